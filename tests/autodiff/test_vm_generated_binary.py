"""One declaration per elementwise binary primitive, every backend made from it
(autodiff/derivative.py BinaryRule, extend.binary_primitive, vm/generate.py).

Each declared primitive's derivatives - the differentiable rules, the plain-float
rules, the JVPs, the Python replay's templates and the interpreter's generated loops
- equal central finite differences and each other; the checked-in
vm/binary_generated.py is what the declarations generate; the Python replay equals the
tape bit for bit and the interpreter equals it to rounding (value, gradient and
Hessian) over broadcasting shapes; the generated loops run the same without numba.
"""

import sys
import warnings

import numpy as np
import pytest

import stanlite as sl
import stanlite.autodiff.compile  # noqa: F401  (the module; sl.compile is the function)
from stanlite.autodiff import derivative
from stanlite.autodiff.vm import binary_generated as B, generate, opcodes

C = sys.modules["stanlite.autodiff.compile"]

# where each declared primitive is smooth: (interval of x, interval of y)
DOMAINS = {
    "add": ((-2, 2), (-2, 2)), "subtract": ((-2, 2), (-2, 2)),
    "multiply": ((-2, 2), (-2, 2)), "divide": ((-2, 2), (0.4, 2)),
    "power": ((0.4, 2), (-2, 2)), "log_sum_exp": ((-3, 3), (-3, 3)),
    "atan2": ((0.3, 2), (-2, 2)), "hypot": ((0.3, 2), (-2, 2)),
    "log_diff_exp": ((1, 3), (-2, 0.5)), "lmultiply": ((-2, 2), (0.3, 3)),
    "log_inv_logit_diff": ((1, 3), (-2, 0.5)),
    "log_falling_factorial": ((2, 5), (0.1, 1.5)),
    "log_rising_factorial": ((0.5, 3), (0.1, 2)), "lbeta": ((0.3, 3), (0.3, 3)),
    "lchoose": ((3, 6), (0.5, 2)), "digamma_diff": ((0.5, 3), (-0.4, 2)), "owens_t": ((-2, 2), (-2, 2)),
    # (piecewise: smooth away from ties x == y, which random points do not meet)
    "fmin": ((-2, 2), (-2, 2)), "fmax": ((-2, 2), (-2, 2)),
    "minimum": ((-2, 2), (-2, 2)), "maximum": ((-2, 2), (-2, 2)),
    "fdim": ((-2, 2), (-2, 2)),
}

DECLARED = derivative.declared_binary()
NAMES = sorted(DECLARED)
WITH_OP = [n for n in NAMES if DECLARED[n]._spec.derivative.op is not None]


def _rule(name):
    return DECLARED[name]._spec.derivative


def _xy(name, rng, n=6):
    (a, b), (c, d) = DOMAINS[name]
    return rng.uniform(a, b, n), rng.uniform(c, d, n)


def test_every_declared_binary_primitive_has_a_domain_here():
    assert set(DOMAINS) == set(DECLARED)


def test_the_generated_file_is_what_the_declarations_generate():
    # regenerate with: python -m stanlite.autodiff.vm.generate
    with open(generate.BINARY_TARGET, encoding="utf-8", newline="") as f:
        assert f.read() == generate.binary_source()


def test_every_binary_op_of_the_interpreter_is_declared_once():
    ops = {v for k, v in vars(opcodes).items() if k.isupper() and type(v) is int
           and v in generate._BINARY_OPS and not k.startswith("CHECK_")
           and k not in generate._NOT_OPS}
    declared = [r.op for r in derivative._DECLARED_BINARY
                if r.op is not None and r.prim is not None]
    assert sorted(declared) == sorted(ops)


@pytest.mark.parametrize("name", NAMES)
def test_the_rules_equal_central_differences(name, rng):
    prim = DECLARED[name]
    rx, ry = _rule(name).rules
    for x, y in zip(*_xy(name, rng)):
        ans = float(prim(x, y))
        hx, hy = 1e-6 * max(1.0, abs(x)), 1e-6 * max(1.0, abs(y))
        fx = (float(prim(x + hx, y)) - float(prim(x - hx, y))) / (2 * hx)
        fy = (float(prim(x, y + hy)) - float(prim(x, y - hy))) / (2 * hy)
        assert float(rx(1.0, ans, x, y)) == pytest.approx(fx, rel=1e-6, abs=1e-8)
        assert float(ry(1.0, ans, x, y)) == pytest.approx(fy, rel=1e-6, abs=1e-8)


def _plain(f, jit):
    """A generated function, compiled (numba) or as plain Python."""
    return f if jit else getattr(f, "py_func", f)


def _loops(jit):
    """The generated loops, compiled (numba) or as plain Python."""
    return _plain(B.binary, jit), _plain(B.binary_vjp, jit)


@pytest.mark.parametrize("jit", [True, False], ids=["numba", "python"])
@pytest.mark.parametrize("name", NAMES)
def test_every_backend_computes_the_rules(name, jit, rng):
    prim = DECLARED[name]
    r = _rule(name)
    spec = prim._spec
    xs, ys = _xy(name, rng)
    g = rng.uniform(-2.0, 2.0, xs.size)
    ans = prim(xs, ys)
    refs = [spec.vjps[i](g, ans, xs, ys) for i in range(2)]      # the tape's array path
    for k in range(xs.size):
        a, x, y, gk = float(ans[k]), float(xs[k]), float(ys[k]), float(g[k])
        pair = spec.scalar_vjp(gk, a, x, y)
        for i in range(2):
            want = float(refs[i][k])
            # the tape's float paths: both traced (the pair), one traced (alone)
            assert pair[i] == pytest.approx(want, rel=1e-14), (name, i)
            assert r.floats_const[i](gk, a, x, y) == pytest.approx(want, rel=1e-14)
            # the JVP is the same rule applied to a tangent
            assert float(spec.jvps[i](gk, a, x, y)) == pytest.approx(want, rel=1e-14)
    if r.op is None:
        return
    # one element (scalar code)
    one, dx, dy = (_plain(f, jit) for f in (B.binary1, B.binary1_dx, B.binary1_dy))
    for k in range(xs.size):
        a, x, y, gk = float(ans[k]), float(xs[k]), float(ys[k]), float(g[k])
        assert one(r.op, x, y) == pytest.approx(a, rel=1e-14)
        assert dx(r.op, gk, x, y, a) == pytest.approx(float(refs[0][k]), rel=1e-13)
        assert dy(r.op, gk, x, y, a) == pytest.approx(float(refs[1][k]), rel=1e-13)
    fwd, rev = _loops(jit)
    n = xs.size
    V = np.concatenate([xs, ys, np.zeros(n)])
    fwd(r.op, n, V, 2 * n, 0, 1, n, 1)
    np.testing.assert_allclose(V[2 * n:], ans, rtol=1e-14)
    A = np.concatenate([np.zeros(2 * n), g])
    rev(r.op, 3, n, V, A, 2 * n, 0, 1, n, 1)
    np.testing.assert_allclose(A[:n], refs[0], rtol=1e-13)
    np.testing.assert_allclose(A[n:2 * n], refs[1], rtol=1e-13)
    # a broadcast scalar (stride 0): its adjoint is the sum
    A = np.concatenate([np.zeros(2 * n), g])
    V2 = np.concatenate([xs, ys[:1], np.zeros(1 + n)])
    fwd(r.op, n, V2, n + 2, 0, 1, n, 0)
    rev(r.op, 2, n, V2, A[:n + 2 + n], n + 2, 0, 1, n, 0)


# ---- the two compiled backends against the tape, over broadcasting shapes -------------
def _split(name, z):
    """x and y from one parameter vector of 12 (6 in x's domain, 6 in y's)."""
    return z[:6], z[6:]


MIXES = {
    "vector_vector": lambda x, y: (x[:3], y[:3]),
    "scalar_vector": lambda x, y: (x[0], y[1:4]),
    "vector_scalar": lambda x, y: (x[1:4], y[5]),
    "matrix_row": lambda x, y: (sl.reshape(x, (2, 3)), y[:3]),
    "scalar_scalar": lambda x, y: (x[0], y[5]),
    "const_vector": lambda x, y: (np.array([1.5, 1.8, 1.6]), y[:3]),
    "vector_const": lambda x, y: (x[:3], np.array([0.9, 0.7, 1.1])),
    "scalar_literal": lambda x, y: (x[2], 0.8),
}
W = np.linspace(0.5, 1.5, 6)


def _model(name, mix):
    prim = DECLARED[name]

    def f(z):
        x, y = _split(name, z)
        a, b = MIXES[mix](x, y)
        r = prim(a, b)
        shape = tuple(getattr(r, "shape", ()))
        if not shape:
            return r * 1.3 + prim(x[1], y[2]) * 0.7         # scalar code (loops)
        return sl.sum(r * W[:int(np.prod(shape))].reshape(shape))
    return f


def _zs(name, k=4, seed=11):
    rng = np.random.default_rng(seed)
    (a, b), (c, d) = DOMAINS[name]
    # (constants sit inside the domains of every case they are used in)
    return [np.concatenate([rng.uniform(a, b, 6), rng.uniform(c, d, 6)]) for _ in range(k)]


def _usable(name, mix):
    (a, b), (c, d) = DOMAINS[name]
    if mix == "const_vector":
        return a <= 1.5 and 1.8 <= b
    if mix == "vector_const":
        return c <= 0.7 and 1.1 <= d
    if mix == "scalar_literal":
        return c <= 0.8 <= d
    return True


CASES = [(n, m) for n in NAMES for m in sorted(MIXES) if _usable(n, m)]


@pytest.mark.parametrize("name, mix", CASES)
def test_the_python_replay_equals_the_tape_bit_for_bit(name, mix, monkeypatch):
    monkeypatch.setenv("STANLITE_BACKEND", "python")
    f = _model(name, mix)
    zs = _zs(name)
    vg = sl.compile(f, zs[0])
    for z in zs:
        r, e = vg(z), sl.value_and_grad(f)(z)
        assert C._identical(r, e), (name, mix, z, r, e)
    assert vg.fallback is None, vg.fallback


@pytest.mark.parametrize("name, mix", [c for c in CASES if c[0] in WITH_OP])
def test_the_interpreter_equals_the_tape(vm, name, mix):
    f = _model(name, mix)
    zs = _zs(name)
    vm.check(f, zs[0], zs[1:])


@pytest.mark.parametrize("name", WITH_OP)
@pytest.mark.parametrize("mix", ["vector_vector", "scalar_vector", "scalar_scalar"])
def test_compiled_hessians_equal_the_tapes(vm, name, mix):
    f = _model(name, mix)
    zs = _zs(name, k=3)
    vg = vm.compile(f, zs[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sl.CompileWarning)
        vg.hessian(zs[0])
    for z in zs[1:]:
        H = vg.hessian(z)
        E = sl.hessian(f)(z)
        assert vm.close((0.0, H), (0.0, E)), (name, mix, np.max(np.abs(H - E)))


def test_the_new_functions_run_in_the_interpreter(vm):
    def f(z):
        x, y = z[:3], z[3:]
        return sl.sum(sl.atan2(x, y) + sl.hypot(x, y) + sl.log_diff_exp(x + 3.0, y)
                      + sl.lmultiply(y, x) + sl.log_inv_logit_diff(x + 3.0, y)
                      + sl.log_falling_factorial(x + 3.0, y)
                      + sl.log_rising_factorial(x, y))

    rng = np.random.default_rng(3)
    zs = [np.concatenate([rng.uniform(0.5, 2, 3), rng.uniform(0.2, 1.5, 3)])
          for _ in range(4)]
    vg = vm.check(f, zs[0], zs[1:])
    assert {opcodes.ATAN2, opcodes.HYPOT, opcodes.LOG_DIFF_EXP, opcodes.LMULTIPLY,
            opcodes.LOG_INV_LOGIT_DIFF, opcodes.LOG_FALLING_FACTORIAL,
            opcodes.LOG_RISING_FACTORIAL} <= vm.opcodes(vg)


def test_the_selections_run_in_the_interpreter(vm):
    # fmin, fmax, fdim and numpy's minimum/maximum on traced values: declared once
    # (math/elementwise.py), lowered to the interpreter's generated loops
    def f(z):
        x, y = z[:3], z[3:]
        return sl.sum(sl.fmin(x, y) * 1.5 + sl.fmax(x, y) * y + sl.fdim(x, y) * x
                      + np.minimum(x, y) + np.maximum(x, 0.1) * 2.0) \
            + sl.fmin(z[0], z[4]) * sl.fdim(z[1], z[5])

    rng = np.random.default_rng(4)
    zs = [rng.uniform(-2, 2, 6) for _ in range(4)]
    vg = vm.check(f, zs[0], zs[1:])
    assert {opcodes.FMIN, opcodes.FMAX, opcodes.FDIM, opcodes.MINIMUM,
            opcodes.MAXIMUM} <= vm.opcodes(vg)


# ---- the special cases of a constant exponent -------------------------------------------
def test_a_constant_square_differentiates_to_zero_at_zero_three_times():
    d3 = sl.grad(sl.grad(sl.grad(lambda x: x ** 2)))
    assert float(d3(0.0)) == 0.0
    assert float(sl.grad(lambda x: sl.sum(x ** 0))(np.zeros(2))[0]) == 0.0


def test_the_replay_writes_the_special_case_of_a_constant_exponent(monkeypatch):
    monkeypatch.setenv("STANLITE_BACKEND", "python")

    def f(x):
        return x[0] ** 2 + sl.sum(x ** 2.0)

    vg = sl.compile(f, np.array([0.5, -1.5]))
    for x in (np.array([0.0, 2.0]), np.array([-0.3, 0.7])):
        assert C._identical(vg(x), sl.value_and_grad(f)(x))
    assert "_power" not in vg.source.split("return")[0].split("\n", 3)[-1] \
        or "* 2.0 *" in vg.source


def test_no_rule_of_the_replay_is_written_for_a_named_binary():
    # the quotient and the power come from their declarations, not from codegen.py
    import inspect
    from stanlite.autodiff import codegen
    src = inspect.getsource(codegen)
    assert '"divide"' not in src and '"power"' not in src


# ---- densities of issue 21 in the interpreter -----------------------------------------------
Y = np.array([0.4, 1.3, 2.2, 0.9])
DENSITIES = {
    "rayleigh_vector": lambda z: sl.rayleigh_lpdf(Y, sl.exp(z[0])),
    "rayleigh_sigmas": lambda z: sl.rayleigh_lpdf(Y, sl.exp(z[:4])),
    "rayleigh_traced_y": lambda z: sl.rayleigh_lpdf(sl.exp(z[:4]), sl.exp(z[4])),
    "rayleigh_scalars": lambda z: sl.rayleigh_lpdf(1.1, sl.exp(z[0]))
    + sl.rayleigh_lpdf(0.3, sl.exp(z[1])),
    "loglogistic_vector": lambda z: sl.loglogistic_lpdf(Y, sl.exp(z[0]), sl.exp(z[1])),
    "loglogistic_all": lambda z: sl.loglogistic_lpdf(sl.exp(z[:4]), sl.exp(z[4]),
                                                     sl.exp(z[5])),
    "loglogistic_scalars": lambda z: sl.loglogistic_lpdf(0.7, sl.exp(z[0]), sl.exp(z[1]))
    + sl.loglogistic_lpdf(2.5, sl.exp(z[2]), sl.exp(z[1])),
}


@pytest.mark.parametrize("name", sorted(DENSITIES))
def test_rayleigh_and_loglogistic_run_in_the_interpreter(vm, name):
    f = DENSITIES[name]
    rng = np.random.default_rng(5)
    zs = [rng.uniform(-1.0, 1.0, 6) for _ in range(4)]
    vg = vm.check(f, zs[0], zs[1:])
    op = opcodes.RAYLEIGH if name.startswith("rayleigh") else opcodes.LOGLOGISTIC
    assert op in vm.opcodes(vg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sl.CompileWarning)
        vg.hessian(zs[0])
    for z in zs[1:]:
        assert vm.close((0.0, vg.hessian(z)), (0.0, sl.hessian(f)(z)))


def test_a_density_outside_its_domain_is_the_tapes(vm):
    # y = 0: the eager tape decides (-inf), the interpreter hands the point back
    def f(z):
        return sl.rayleigh_lpdf(sl.exp(z[:2]) - 1.0, sl.exp(z[2]))

    vg = sl.compile(f, np.array([0.3, 0.2, 0.1]), verify=False)
    z = np.array([0.0, 0.2, 0.1])
    assert vg(z)[0] == sl.value_and_grad(f)(z)[0] == -np.inf
