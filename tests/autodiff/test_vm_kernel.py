"""The compiled interpreter's kernels, op by op (stanlite/autodiff/vm/kernel.py).

Every elementwise, reduction and density op that a primitive lowers to is run inside
the interpreter (asserted: not the Python replay) on scalars, vectors and matrices,
with every broadcasting mix (a scalar as a stride-0 argument, a row gathered across a
matrix, a column against a row, constants on either side), at random points of its
domain; its value and gradient equal the eager tape's to rounding (1e-12 relative to
the largest magnitude, what replays are held to) and the gradient equals central
differences of the interpreter's own value. A last test checks that these cases reach
every such op code of opcodes.py (the more specialised ops are the subject of
test_vm_ops_more.py).
"""

import numpy as np
import pytest

import stanlite as sl
from stanlite.autodiff.vm import opcodes as O

SEED = 20261126
W6 = np.random.default_rng(1).uniform(0.5, 1.5, 6)
W23 = W6.reshape(2, 3)
C3 = np.array([0.7, -1.1, 0.4])


def _points(lo, hi, k=3, seed=SEED):
    rng = np.random.default_rng(seed)
    return [rng.uniform(lo, hi, 6) for _ in range(k + 1)]


# --------------------------------------------------------------------------------------
# elementwise unary: (function, domain)
# --------------------------------------------------------------------------------------
UNARY = {
    "exp": (sl.exp, (-2, 2)), "log": (sl.log, (0.1, 3)), "log1p": (sl.log1p, (-0.9, 3)),
    "expm1": (sl.expm1, (-2, 2)), "sqrt": (sl.sqrt, (0.1, 3)),
    "square": (sl.square, (-2, 2)), "inv": (sl.inv, (0.3, 3)),
    "log1m": (sl.log1m, (-2, 0.9)), "inv_logit": (sl.inv_logit, (-4, 4)),
    "log_inv_logit": (sl.log_inv_logit, (-4, 4)),
    "log1m_inv_logit": (sl.log1m_inv_logit, (-4, 4)),
    "log1p_exp": (sl.log1p_exp, (-4, 4)), "tanh": (sl.tanh, (-2, 2)),
    "sin": (sl.sin, (-3, 3)), "cos": (sl.cos, (-3, 3)), "lgamma": (sl.lgamma, (0.2, 9)),
    "fabs": (sl.fabs, (0.2, 2)), "fabs_neg": (sl.fabs, (-2, -0.2)),
    "inv_sqrt": (sl.inv_sqrt, (0.2, 3)), "logit": (sl.logit, (0.05, 0.95)),
    "atan": (sl.atan, (-3, 3)), "sinh": (sl.sinh, (-2, 2)), "cosh": (sl.cosh, (-2, 2)),
    "inv_square": (sl.inv_square, (0.3, 2)), "log1m_exp": (sl.log1m_exp, (-3, -0.05)),
    "cbrt": (sl.cbrt, (0.2, 3)), "cbrt_neg": (sl.cbrt, (-3, -0.2)),
    "erf": (sl.erf, (-2, 2)), "erfc": (sl.erfc, (-2, 2)), "Phi": (sl.Phi, (-3, 3)),
    "negative": (lambda v: -v, (-2, 2)),
}

SHAPES = {
    "scalar": lambda fn, x: fn(x[0]) * 1.3 + fn(x[4]),
    "vector": lambda fn, x: sl.sum(fn(x) * W6),
    "matrix": lambda fn, x: sl.sum(fn(sl.reshape(x, (2, 3))) * W23),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_ops_equal_the_tape_and_finite_differences(vm, name, shape):
    fn, (lo, hi) = UNARY[name]
    pts = _points(lo, hi)
    vm.check(lambda x: SHAPES[shape](fn, x), pts[0], pts[1:])


# --------------------------------------------------------------------------------------
# elementwise binary, every broadcasting mix
# --------------------------------------------------------------------------------------
BINARY = {
    "add": (lambda a, b: a + b, (-2, 2)), "subtract": (lambda a, b: a - b, (-2, 2)),
    "multiply": (lambda a, b: a * b, (-2, 2)), "divide": (lambda a, b: a / b, (0.4, 2)),
    "power": (lambda a, b: a ** b, (0.4, 2)),
    "log_sum_exp2": (lambda a, b: sl.log_sum_exp(a, b), (-3, 3)),
}

MIXES = {
    "vector_vector": lambda x: (x[:3], x[3:]),
    "scalar_vector": lambda x: (x[0], x[1:4]),           # a stride-0 argument
    "vector_scalar": lambda x: (x[1:4], x[5]),
    "matrix_row": lambda x: (sl.reshape(x, (2, 3)), x[:3]),       # a gathered row
    "column_row": lambda x: (sl.reshape(x[:2], (2, 1)), x[3:]),   # both broadcast
    "scalar_scalar": lambda x: (x[0], x[5]),
    "const_vector": lambda x: (np.abs(C3) + 0.5, x[:3]),
    "vector_const": lambda x: (x[:3], np.abs(C3) + 0.5),
    "literal_vector": lambda x: (1.7, x[2:5]),
    "scalar_const": lambda x: (x[0], np.abs(C3) + 0.5),   # traced scalar, constant array
    "matrix_const_row": lambda x: (sl.reshape(x, (2, 3)), np.abs(C3) + 0.5),
}


def _weighted_sum(r):
    shape = tuple(getattr(r, "shape", ()))       # (a shape is no value read)
    w = np.linspace(0.5, 1.5, max(1, int(np.prod(shape))))
    return sl.sum(r * w.reshape(shape))


@pytest.mark.parametrize("mix", sorted(MIXES))
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_ops_broadcast_as_the_tape(vm, name, mix):
    op, (lo, hi) = BINARY[name]
    pts = _points(lo, hi)
    vm.check(lambda x: _weighted_sum(op(*MIXES[mix](x))), pts[0], pts[1:])


# --------------------------------------------------------------------------------------
# reductions and products
# --------------------------------------------------------------------------------------
M32 = np.random.default_rng(2).standard_normal((3, 2))
REDUCTIONS = {
    "sum": lambda x: sl.sum(x * x),
    "sum_axis0": lambda x: sl.sum(sl.sum(sl.reshape(x, (2, 3)), axis=0) ** 2),
    "sum_axis1": lambda x: sl.sum(sl.sum(sl.reshape(x, (2, 3)), axis=1) ** 2),
    "sum_axis_neg_keepdims": lambda x: sl.sum(
        sl.sum(sl.reshape(x, (2, 3)), axis=-1, keepdims=True) * W23),
    "sum_axes_3d": lambda x: sl.sum(sl.sum(sl.reshape(x, (1, 2, 3)), axis=(0, 2)) ** 2),
    "log_sum_exp": lambda x: sl.log_sum_exp(x * 2.0),
    "dot_product": lambda x: sl.dot_product(x[:3], x[3:]),
    "dot_product_const": lambda x: sl.dot_product(x[:3], C3),
    "matvec": lambda x: sl.sum(sl.sin(sl.reshape(x, (2, 3)) @ C3)),
    "vecmat": lambda x: sl.sum(sl.sin(x[:3] @ M32)),
    "matmat": lambda x: sl.sum(sl.sin(sl.reshape(x, (2, 3)) @ sl.reshape(x, (3, 2)))),
    "const_mat_vec": lambda x: sl.sum(sl.sin(M32 @ x[:2])),
    "mean": lambda x: sl.mean(x) ** 2,
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions_and_products(vm, name):
    pts = _points(-1.5, 1.5)
    vm.check(REDUCTIONS[name], pts[0], pts[1:])


# --------------------------------------------------------------------------------------
# summed densities, with their arguments broadcast in every way
# --------------------------------------------------------------------------------------
Y3 = np.array([0.3, 0.55, 0.8])
N3 = np.array([0, 3, 1])
B3 = np.array([1, 0, 1])
DENSITIES = {
    "normal_data": lambda x: sl.normal_lpdf(Y3, x[0], sl.exp(x[1])),
    "normal_all_traced": lambda x: sl.normal_lpdf(x[:3], x[3:], x[0] + 0.5),
    "normal_vector_sigma": lambda x: sl.normal_lpdf(x[:3], 0.5, x[3:]),
    "normal_scalar_y": lambda x: sl.normal_lpdf(x[0], x[1:4], 1.5),
    "normal_matrix_row": lambda x: sl.normal_lpdf(sl.reshape(x, (2, 3)), x[:3], 1.2),
    "normal_scalars": lambda x: sl.normal_lpdf(x[0], x[1], x[2]),
    "std_normal": lambda x: sl.std_normal_lpdf(x),
    "std_normal_scalar": lambda x: sl.std_normal_lpdf(x[2]),
    "cauchy": lambda x: sl.cauchy_lpdf(x[:3], x[0], x[3:]),
    "cauchy_data": lambda x: sl.cauchy_lpdf(Y3, x[0], x[1]),
    "lognormal": lambda x: sl.lognormal_lpdf(x[:3], x[3:], x[0]),
    "lognormal_data": lambda x: sl.lognormal_lpdf(Y3, x[0], x[1]),
    "exponential": lambda x: sl.exponential_lpdf(x[:3], x[3:]),
    "exponential_scalar_rate": lambda x: sl.exponential_lpdf(Y3, x[0]),
    "gamma": lambda x: sl.gamma_lpdf(x[:3], x[3:], x[0]),
    "gamma_data": lambda x: sl.gamma_lpdf(Y3, x[0] * 3.0, x[1:4]),
    "beta": lambda x: sl.beta_lpdf(x[:3], x[3:] * 2.0, x[0] + 1.0),
    "beta_data": lambda x: sl.beta_lpdf(Y3, x[0], x[1]),
    "student_t": lambda x: sl.student_t_lpdf(x[:3], x[3] * 5.0, x[4], x[5]),
    "student_t_vectors": lambda x: sl.student_t_lpdf(Y3, x[:3] * 4.0, x[3:], x[0]),
    "poisson": lambda x: sl.poisson_lpmf(N3, x[:3] * 2.0),
    "poisson_scalar_rate": lambda x: sl.poisson_lpmf(N3, x[0] * 2.0),
    "poisson_log": lambda x: sl.poisson_log_lpmf(N3, x[3:]),
    "poisson_log_scalar": lambda x: sl.poisson_log_lpmf(N3, x[0]),
    "bernoulli_logit": lambda x: sl.bernoulli_logit_lpmf(B3, x[:3] - 0.5),
    "bernoulli_logit_scalar": lambda x: sl.bernoulli_logit_lpmf(B3, x[0]),
}


@pytest.mark.parametrize("name", sorted(DENSITIES))
def test_densities_equal_the_tape(vm, name):
    # every argument positive and below 1 (a beta variate, a scale, a rate)
    pts = _points(0.2, 0.9)
    vm.check(DENSITIES[name], pts[0], pts[1:])


# --------------------------------------------------------------------------------------
# the cases above reach every elementwise, reduction and density op
# --------------------------------------------------------------------------------------
# specialised ops exercised in test_vm_ops_more.py / test_vm_lowering.py, and guards
ELSEWHERE = {"LOG_MIX", "CUMSUM", "SUMN", "EXTREME", "SOFTMAX", "LOG_SOFTMAX",
             "MVN_CHOLESKY", "POISSON_SS", "SEGSUM", "COPY", "LSE_AXIS",
             "BINOMIAL_LOGIT", "GP_EXP_QUAD", "CHOLESKY",
             # (tests/autodiff/test_vm_generated_binary.py)
             "RAYLEIGH", "LOGLOGISTIC"}


def _all_cases():
    for name, (fn, (lo, hi)) in UNARY.items():
        for shape in SHAPES.values():
            yield (lambda x, fn=fn, shape=shape: shape(fn, x)), (lo, hi)
    for op, (lo, hi) in BINARY.values():
        for mix in MIXES.values():
            yield (lambda x, op=op, mix=mix: _weighted_sum(op(*mix(x)))), (lo, hi)
    for f in REDUCTIONS.values():
        yield f, (-1.5, 1.5)
    for f in DENSITIES.values():
        yield f, (0.2, 0.9)


def test_the_cases_reach_every_arithmetic_and_density_op(vm):
    seen = set()
    for f, (lo, hi) in _all_cases():
        seen |= vm.opcodes(vm.compile(f, _points(lo, hi, 0)[0]))
    # the table's field names (OP, N, OUT, ...) are small ints too: only op codes count
    fields = {"ROW", "OK", "DOMAIN", "OP", "N", "OUT", "A", "SA", "B", "SB", "C", "SC",
              "MASK", "X1", "X2", "X3", "X4"}
    ops = {k: v for k, v in vars(O).items() if k.isupper() and type(v) is int
           and 0 < v < O.GUARD_POSITIVE and k not in fields}
    missing = {k for k, v in ops.items() if v not in seen} - ELSEWHERE
    assert not missing, sorted(missing)


# --------------------------------------------------------------------------------------
# Hessians: sl.compile(f).hessian records sl.hessian(f) (forward over reverse) and
# lowers that recording too where it can
# --------------------------------------------------------------------------------------
def _hessian_cases():
    for name, (fn, dom) in UNARY.items():
        yield f"{name}-vector", (lambda x, fn=fn: SHAPES["vector"](fn, x)), dom
    for name, (op, dom) in BINARY.items():
        for mix in ("scalar_vector", "matrix_row", "scalar_const", "const_vector"):
            yield (f"{name}-{mix}",
                   (lambda x, op=op, mix=mix: _weighted_sum(op(*MIXES[mix](x)))), dom)
    for name, f in REDUCTIONS.items():
        yield name, f, (-1.5, 1.5)
    for name, f in DENSITIES.items():
        yield name, f, (0.2, 0.9)


HESSIAN_CASES = {name: (f, dom) for name, f, dom in _hessian_cases()}
# these must run in the interpreter (others may replay as Python: a constant Hessian,
# trigamma, a guard without a lowering; or as the eager tape: a value read in a VJP)
HESSIAN_VM = ["exp-vector", "log-vector", "sin-vector", "tanh-vector",
              "inv_logit-vector", "log1p_exp-vector", "Phi-vector", "sqrt-vector",
              "divide-scalar_vector", "divide-matrix_row", "divide-const_vector",
              "matvec", "vecmat", "normal_data", "normal_all_traced",
              "normal_vector_sigma", "cauchy", "cauchy_data", "lognormal_data",
              "bernoulli_logit", "exponential"]


@pytest.mark.parametrize("name", sorted(HESSIAN_CASES))
def test_compiled_hessians_equal_the_tapes(vm, name):
    import warnings
    f, (lo, hi) = HESSIAN_CASES[name]
    pts = _points(lo, hi, k=2)
    vg = vm.compile(f, pts[0])                     # unverified: so is its Hessian
    with warnings.catch_warnings():
        # a Hessian whose recording reads a value (power, atan, poisson) is the eager
        # tape's, with a CompileWarning: the same numbers
        warnings.simplefilter("ignore", sl.CompileWarning)
        vg.hessian(pts[0])
    h = vg._hessian
    if name in HESSIAN_VM:
        assert h.compiled and h.fallback is None, (h.vm_skipped, h.fallback)
    for x in pts[1:]:
        H = vg.hessian(x)
        E = sl.hessian(f)(x)
        assert vm.close((0.0, H), (0.0, E)), (name, x, H - E)
        assert np.allclose(H, H.T, rtol=1e-12, atol=1e-12)
