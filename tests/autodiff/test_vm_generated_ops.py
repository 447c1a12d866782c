"""The interpreter's array ops come from the declarations beside their primitives
(autodiff/vm/declare.py, vm/sweeps.py, vm/generate_ops.py): the checked-in
vm/ops_generated.py is exactly the dispatch the declarations generate and calls the
declared functions themselves, compiled (no copy of their source); every density op
code has one declaration and the kernel keeps no copy; a declaration that reads state
the kernel does not have is refused; the kernel's cache is keyed on every declaring
file; a declared sweep runs the same as plain Python and compiled.
"""

import math
import pathlib
import re

import numpy as np
import pytest

import stanlite  # noqa: F401  (the library's declarations)
from stanlite.autodiff.vm import declare, generate_ops, kernel, opcodes, sweeps
from stanlite.autodiff.vm import ops_generated as G
from testkit import fake_cached_dispatcher


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


def test_the_dispatch_calls_the_declared_functions_and_copies_none():
    # the generated file is the dispatch alone: each op's pair is the declared pair,
    # compiled (numba's py_func is a function over the declared code object itself)
    with open(G.__file__, encoding="utf-8") as f:
        text = f.read()
    assert "\ndef _" not in text and "\n@_jit\ndef " in text
    for op, d in declare.declared_kernels().items():
        for fn in (d.forward, d.reverse):
            bound = getattr(G, fn.__name__)
            assert getattr(bound, "py_func", bound).__code__ is fn.__code__, fn.__name__
    assert len(text.splitlines()) < 250


def test_the_kernel_cache_is_keyed_on_every_declaring_file():
    files = set(sweeps.sources())
    for d in declare.declared_kernels().values():
        assert d.forward.__code__.co_filename in files
    assert any(f.endswith("distributions/continuous.py") for f in files)
    # numbers are compiled in, wherever they are defined (math/cdf_series.py's
    # HALF_LOG_TWO_PI, read by distributions/continuous.py)
    assert "HALF_LOG_TWO_PI = " in sweeps.fingerprint()


_SCALE = 2.0                    # a module number: compiled in
_TABLE = [1.0]                  # module state the kernel cannot have


def _uses_number(V, code, r, n, a, sa, b, sb, c, sc):
    return opcodes.OK, _SCALE * V[a]


def _uses_state(V, code, r, n, a, sa, b, sb, c, sc):
    return opcodes.OK, _TABLE[0] * V[a]


def _twice(x):
    return _SCALE * x


def _uses_helper(V, code, r, n, a, sa, b, sb, c, sc):
    return opcodes.OK, _twice(V[a])


def _grad(V, A, code, r, g, m, n, a, sa, b, sb, c, sc):
    A[a] += g


def test_a_declaration_may_read_numbers_and_helpers_and_nothing_else(monkeypatch):
    decls = {1000: declare.KernelDecl(1000, "density", _uses_number, _grad, ())}
    monkeypatch.setattr(declare, "_KERNELS", decls)
    monkeypatch.setitem(vars(opcodes), "TEST_OP", 1000)
    text = generate_ops.ops_source()
    assert "_uses_number, _grad = _compiled(_O.TEST_OP)" in text
    assert "if op == _O.TEST_OP:" in text
    assert "_SCALE = 2.0" in sweeps.fingerprint(decls)
    V = np.array([3.0])
    code = np.zeros((1, opcodes.ROW), dtype=np.int64)
    helper = declare.KernelDecl(1000, "density", _uses_helper, _grad, (_twice,))
    fwd, _ = sweeps.build({1000: helper}, kernel._jit)[1000]
    assert fwd(V, code, 0, 1, 0, 0, 0, 0, 0, 0) == (opcodes.OK, 6.0)
    sweeps.check({1000: helper})
    for fn, helpers, what in ((_uses_state, (), "_TABLE"), (_uses_helper, (), "_twice")):
        monkeypatch.setattr(declare, "_KERNELS", {
            1000: declare.KernelDecl(1000, "density", fn, _grad, helpers)})
        with pytest.raises(ValueError, match=what):
            generate_ops.ops_source()


def test_a_declared_density_compiled_equals_its_plain_python():
    # normal_lpdf's declared sweeps (distributions/continuous.py) on three points,
    # through the dispatch (compiled) and as written (plain Python)
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


def test_editing_a_declaration_or_a_number_it_reads_flushes_the_kernels_cache(
        tmp_path, monkeypatch):
    # the kernel inlines the declared sweeps, whose files numba does not watch for it
    if not kernel.available():
        pytest.skip("numba's cache needs numba")
    d, flushed = fake_cached_dispatcher(tmp_path)

    declaring = tmp_path / "continuous.py"
    source = declare.declared_kernels()[opcodes.NORMAL].forward.__code__.co_filename
    declaring.write_text(pathlib.Path(source).read_text())
    monkeypatch.setattr(sweeps, "sources", lambda: [str(declaring)])
    kernel.drop_stale_cache(d, "t")
    kernel.drop_stale_cache(d, "t")
    assert len(flushed) == 1                        # stamped, then unchanged
    declaring.write_text(declaring.read_text() + "\n# edited\n")
    kernel.drop_stale_cache(d, "t")
    assert len(flushed) == 2
    numbers = sweeps.fingerprint()
    monkeypatch.setattr(sweeps, "fingerprint", lambda: numbers + "\nx.Y = 1.0")
    kernel.drop_stale_cache(d, "t")
    assert len(flushed) == 3
