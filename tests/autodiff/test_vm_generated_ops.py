"""The interpreter's array ops come from the declarations beside their primitives
(autodiff/vm/declare.py, vm/generate_ops.py): the checked-in vm/ops_generated.py is
exactly what the declarations generate; every density op code has one declaration and
the kernel keeps no copy; the assembler refuses a declaration that reads state the
kernel does not have; a declared sweep runs the same as plain Python and compiled.
"""

import math
import re

import numpy as np
import pytest

import stanlite  # noqa: F401  (the library's declarations)
from stanlite.autodiff.vm import declare, generate_ops, kernel, opcodes
from stanlite.autodiff.vm import ops_generated as G


def test_the_generated_file_is_what_the_declarations_generate():
    # regenerate with: python -m stanlite.autodiff.vm.generate
    with open(generate_ops.OPS_TARGET, encoding="utf-8", newline="") as f:
        assert f.read() == generate_ops.ops_source()


def test_every_array_op_is_declared_and_the_kernel_keeps_no_copy():
    names = {v: k for k, v in vars(opcodes).items() if k.isupper() and type(v) is int}
    density_ops = {v for v in names if 60 <= v < 90}
    # reductions, products, factorisations and log_mix; data movement (COPY, GATHER,
    # SEGSUM) and the passes' n-ary sum (SUMN) are the kernel's own machinery
    array_ops = {v for v in names if 40 <= v < 60} - {
        opcodes.COPY, opcodes.GATHER, opcodes.SEGSUM, opcodes.SUMN} | {opcodes.LOG_MIX}
    decls = declare.declared_kernels()
    assert {op for op, d in decls.items() if d.kind == "density"} == density_ops
    assert {op for op, d in decls.items() if d.kind == "array"} == array_ops
    assert G.DENSITY_OPS == frozenset(density_ops)
    assert G.ARRAY_OPS == frozenset(array_ops)
    for op in density_ops | array_ops:
        module = decls[op].forward.__module__
        assert module.startswith(("stanlite.math", "stanlite.distributions")), module
    with open(kernel.__file__, encoding="utf-8") as f:
        src = f.read()
    for op in density_ops | array_ops - {opcodes.LOG_MIX}:
        assert not re.search(rf"(op == |_O\.){names[op]}\b", src), names[op]
    for helper in ("_matmul", "_softmax", "_cholesky", "_gp_exp_quad", "_mvn",
                   "_log_mix_", "_extreme_index", "_digamma"):
        assert f"def {helper}" not in src, helper


def test_a_second_declaration_of_an_op_is_refused():
    d = declare.declared_kernels()[opcodes.NORMAL]
    with pytest.raises(ValueError, match="declared twice"):
        declare.defkernel(opcodes.NORMAL, d.reverse, d.forward, kind="density")
    with pytest.raises(ValueError, match="kind"):
        declare.defkernel(opcodes.NORMAL, d.forward, d.reverse, kind="elementwise")


_SCALE = 2.0                    # a module number: written into the generated file
_TABLE = [1.0]                  # module state the kernel cannot have


def _uses_number(V, code, r, n, a, sa, b, sb, c, sc):
    return opcodes.OK, _SCALE * V[a]


def _uses_state(V, code, r, n, a, sa, b, sb, c, sc):
    return opcodes.OK, _TABLE[0] * V[a]


def _grad(V, A, code, r, g, m, n, a, sa, b, sb, c, sc):
    A[a] += g


def test_the_assembler_resolves_numbers_and_refuses_other_state(monkeypatch):
    monkeypatch.setattr(declare, "_KERNELS", {
        1000: declare.KernelDecl(1000, "density", _uses_number, _grad, ())})
    monkeypatch.setitem(vars(opcodes), "TEST_OP", 1000)
    text = generate_ops.ops_source()
    assert "_SCALE = 2.0" in text and "def _uses_number(" in text
    assert "if op == _O.TEST_OP:" in text
    monkeypatch.setattr(declare, "_KERNELS", {
        1000: declare.KernelDecl(1000, "density", _uses_state, _grad, ())})
    with pytest.raises(ValueError, match="_TABLE"):
        generate_ops.ops_source()


def test_a_declared_density_compiled_equals_its_plain_python():
    # normal_lpdf's declared sweeps (distributions/continuous.py) on three points
    d = declare.declared_kernels()[opcodes.NORMAL]
    V = np.array([0.3, -1.2, 2.0, 0.1, 1.5, 0.0])        # y (3), mu, sigma, out
    code = np.zeros((1, opcodes.ROW), dtype=np.int64)
    args = (3, 0, 1, 3, 0, 4, 0)                          # n, a, sa, b, sb, c, sc
    st, lp = G.density_value(opcodes.NORMAL, V, code, 0, *args)
    st0, lp0 = d.forward(V, code, 0, *args)
    assert st == st0 == opcodes.OK and lp == lp0
    z = (V[:3] - 0.1) / 1.5
    assert lp == pytest.approx(np.sum(-0.5 * z * z - math.log(1.5)
                                      - 0.5 * math.log(2 * math.pi)), rel=1e-14)
    A, A0 = np.zeros(6), np.zeros(6)
    G.density_grad(opcodes.NORMAL, V, A, code, 0, 1.0, 7, *args)
    d.reverse(V, A0, code, 0, 1.0, 7, *args)
    np.testing.assert_array_equal(A, A0)
    np.testing.assert_allclose(A[:3], -z / 1.5, rtol=1e-14)
