"""Interpreter lowerings of GLMs, log_mix, running sums, softmax, extremes, inner
products, matrix products (BLAS path) and multi_normal_cholesky (autodiff/vm).

Each program is compiled with the interpreter, checked to run there (not in the
Python replay), and compared with the eager tape at random points (to rounding) and
with central finite differences of its own value.
"""

import sys

import numpy as np
import pytest

import stanlite as sl
from stanlite.autodiff.vm import kernel

pytestmark = pytest.mark.skipif(not kernel.available(), reason="numba not available")


def _vm(f, x0):
    vg = sl.compile(f, x0, verify=False)
    vg(x0)
    assert vg.vm_skipped is None, vg.vm_skipped
    assert vg.compiled
    return vg


def check(f, x0, n_points=3, seed=0, scale=0.3, fd=True, rtol=1e-10):
    """The interpreter agrees with the eager tape at random points near ``x0`` and
    with central finite differences of its value."""
    rng = np.random.default_rng(seed)
    vg = _vm(f, np.array(x0, dtype=float))
    ref = sl.value_and_grad(f)
    for _ in range(n_points):
        x = np.asarray(x0, dtype=float) + scale * rng.standard_normal(np.shape(x0))
        v, g = vg(x)
        v0, g0 = ref(x)
        assert vg.compiled
        np.testing.assert_allclose(v, v0, rtol=rtol, atol=rtol)
        np.testing.assert_allclose(g, g0, rtol=1e-9, atol=1e-9)
        if fd:
            h = 1e-6
            for i in range(x.size):
                e = np.zeros_like(x)
                e.flat[i] = h
                d = (vg(x + e)[0] - vg(x - e)[0]) / (2 * h)
                assert abs(d - g.flat[i]) <= 1e-5 * (1 + abs(g.flat[i])), (i, d, g.flat[i])
    return vg


RNG = np.random.default_rng(42)
Y = RNG.standard_normal(7)


# ---- log_mix ---------------------------------------------------------------------------
def test_log_mix_scalar_theta_vector_components():
    def f(x):
        theta = sl.inv_logit(x[0])
        lp1 = -0.5 * (Y - x[1]) ** 2
        lp2 = -0.5 * (Y - x[2]) ** 2 / 4.0
        return sl.sum(sl.log_mix(theta, lp1, lp2))
    check(f, [0.2, -1.0, 1.0])


def test_log_mix_vector_theta_and_scalar_component():
    def f(x):
        theta = sl.inv_logit(x[:3])
        return sl.sum(sl.log_mix(theta, x[3], -0.5 * x[4:7] ** 2))
    check(f, RNG.standard_normal(7) * 0.5)


def test_log_mix_theta_outside_the_unit_interval_falls_back_to_the_tape():
    def f(x):
        return sl.log_mix(x[0], x[1], x[2])
    vg = _vm(f, np.array([0.3, 0.1, -0.2]))
    with np.errstate(invalid="ignore"):
        v, _ = vg(np.array([1.5, 0.1, -0.2]))
        v0, _ = sl.value_and_grad(f)(np.array([1.5, 0.1, -0.2]))
    assert np.isnan(v) and np.isnan(v0)


# ---- running sums, softmax, extremes, inner products ------------------------------------
def test_cumulative_sum_vector():
    w = RNG.standard_normal(6)
    check(lambda x: sl.sum(w * sl.cumulative_sum(x)), RNG.standard_normal(6))


@pytest.mark.parametrize("axis", [0, 1])
def test_cumulative_sum_along_an_axis(axis):
    w = RNG.standard_normal((3, 4))
    check(lambda x: sl.sum(w * sl.cumulative_sum(sl.reshape(x, (3, 4)), axis=axis)),
          RNG.standard_normal(12))


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [0, -1])
def test_softmax_along_an_axis(fn, axis):
    w = RNG.standard_normal((3, 4))
    f = getattr(sl, fn)
    check(lambda x: sl.sum(w * f(sl.reshape(x, (3, 4)), axis=axis)),
          RNG.standard_normal(12))


def test_softmax_vector():
    w = RNG.standard_normal(5)
    check(lambda x: sl.sum(w * sl.softmax(x)) + sl.sum(sl.log_softmax(x) * w),
          RNG.standard_normal(5))


@pytest.mark.parametrize("fn", ["max", "min"])
def test_max_min_of_a_vector(fn):
    f = getattr(sl, fn)
    check(lambda x: f(x * x) * x[0], np.array([0.3, -1.2, 0.7, 2.0]), fd=False, scale=0.05)


def test_max_of_a_scalar():
    check(lambda x: sl.max(x[0] * x[1]), np.array([0.3, -1.2]))


def test_dot_self_and_squared_distance():
    c = RNG.standard_normal(4)
    check(lambda x: sl.dot_self(x[:4]) * x[4] + sl.squared_distance(x[:4], c)
          + sl.squared_distance(c, x[4:8]) + sl.squared_distance(x[:4], x[4:8]),
          RNG.standard_normal(8))


# ---- matrix products ---------------------------------------------------------------------
@pytest.mark.parametrize("p,k,q", [(2, 3, 4), (40, 30, 20), (1, 30, 90), (90, 30, 1)])
def test_matmul_both_traced(p, k, q):
    # the small shape runs the loop, the others BLAS (kernel._BLAS_MIN)
    w = RNG.standard_normal((p, q))

    def f(x):
        a = sl.reshape(x[:p * k], (p, k))
        b = sl.reshape(x[p * k:], (k, q))
        return sl.sum(w * (a @ b))
    check(f, RNG.standard_normal(p * k + k * q), n_points=1, fd=(p * k < 10))


def test_matmul_matrix_vector_with_data():
    X = RNG.standard_normal((300, 20))
    check(lambda b: sl.sum(sl.log1p_exp(X @ b)) - 0.5 * sl.sum(b * b),
          RNG.standard_normal(20) * 0.1, fd=False)


def test_matmul_vector_matrix_with_data():
    X = RNG.standard_normal((20, 300))
    check(lambda b: sl.sum(sl.log1p_exp(b @ X)), RNG.standard_normal(20) * 0.1, fd=False)


# ---- GLMs --------------------------------------------------------------------------------
N, K = 50, 4
XG = RNG.standard_normal((N, K))
YB = (RNG.random(N) < 0.4).astype(int)
YP = RNG.poisson(2.0, N)
YN = RNG.standard_normal(N)


def test_bernoulli_logit_glm_scalar_intercept():
    check(lambda x: sl.bernoulli_logit_glm_lpmf(YB, XG, x[0], x[1:]),
          RNG.standard_normal(K + 1) * 0.3)


def test_bernoulli_logit_glm_vector_intercept_and_traced_design():
    def f(x):
        alpha = x[0] + 0.1 * np.arange(N)
        xm = XG * sl.exp(x[K + 1])
        return sl.bernoulli_logit_glm_lpmf(YB, xm, alpha, x[1:K + 1])
    check(f, RNG.standard_normal(K + 2) * 0.3)


def test_bernoulli_logit_glm_big_design_uses_blas(monkeypatch):
    # the lowering is what is tested here: a program this big is otherwise timed
    # against its Python replay, which may win (autodiff/compile.py _faster;
    # tests/autodiff/test_backend_choice.py)
    monkeypatch.setattr(sys.modules["stanlite.autodiff.compile"], "_big_vectorised",
                        lambda prog: False)
    X = RNG.standard_normal((2000, 10))
    y = (RNG.random(2000) < 0.5).astype(int)
    check(lambda x: sl.bernoulli_logit_glm_lpmf(y, X, x[0], x[1:]),
          RNG.standard_normal(11) * 0.1, n_points=2, fd=False)


def test_poisson_log_glm():
    check(lambda x: sl.poisson_log_glm_lpmf(YP, XG, x[0], x[1:]),
          RNG.standard_normal(K + 1) * 0.3)


def test_poisson_log_glm_scalar_outcome():
    check(lambda x: sl.poisson_log_glm_lpmf(3, XG, x[0], x[1:]),
          RNG.standard_normal(K + 1) * 0.3)


def test_normal_id_glm_traced_scale_and_outcome():
    def f(x):
        return sl.normal_id_glm_lpdf(YN + x[K + 2], XG, x[0], x[1:K + 1], sl.exp(x[K + 1]))
    check(f, RNG.standard_normal(K + 3) * 0.3)


# ---- multi_normal_cholesky ---------------------------------------------------------------
KM = 4
LC = np.linalg.cholesky(np.eye(KM) + 0.5)


def test_multi_normal_cholesky_vector_parameter():
    check(lambda x: sl.multi_normal_cholesky_lpdf(x, np.zeros(KM), LC),
          RNG.standard_normal(KM))


def test_multi_normal_cholesky_rows_and_traced_mean():
    yy = RNG.standard_normal((3, KM))
    check(lambda x: sl.multi_normal_cholesky_lpdf(yy, x, LC), RNG.standard_normal(KM))


def test_multi_normal_cholesky_traced_factor():
    yy = RNG.standard_normal((3, KM))
    pos = {rc: i for i, rc in enumerate(zip(*np.tril_indices(KM)))}

    def f(x):
        # a lower-triangular factor from parameters, exp on the diagonal
        entries = [(sl.exp(x[pos[r, c]]) if r == c else x[pos[r, c]]) if r >= c else 0.0
                   for r in range(KM) for c in range(KM)]
        chol = sl.reshape(sl.stack(entries), (KM, KM))
        return sl.multi_normal_cholesky_lpdf(yy, x[len(pos):], chol)
    check(f, RNG.standard_normal(len(pos) + KM) * 0.3)


def test_multi_normal_cholesky_large_dense_factor():
    # K = 37 (not a multiple of a SIMD width): the sliced substitutions' remainders;
    # a data factor (its upper triangle not re-scanned) and a traced factor's rows
    k = 37
    idx = np.arange(k)
    chol = np.linalg.cholesky(0.8 ** np.abs(idx[:, None] - idx[None, :]))
    yy = RNG.standard_normal((2, k))
    check(lambda x: sl.multi_normal_cholesky_lpdf(x, np.zeros(k), chol),
          RNG.standard_normal(k), fd=False)
    check(lambda x: sl.multi_normal_cholesky_lpdf(yy, x, chol), RNG.standard_normal(k),
          fd=False)
    check(lambda x: sl.multi_normal_cholesky_lpdf(yy, x[1:], chol * sl.exp(x[0])),
          RNG.standard_normal(k + 1) * 0.1, fd=False)


def test_multi_normal_cholesky_traced_factor_leaving_the_lower_triangle():
    # an upper entry zero where recorded, not at the next point: the interpreter hands
    # the point to the eager density, which raises its own error
    def f(x):
        upper = sl.stack([0.0, x[0] - 0.5, 0.0, 0.0])
        return sl.multi_normal_cholesky_lpdf(x[1:], np.zeros(2),
                                             np.eye(2) + sl.reshape(upper, (2, 2)))
    vg = _vm(f, np.array([0.5, 0.1, 0.2]))
    v0 = sl.value_and_grad(f)(np.array([0.5, 0.3, 0.2]))[0]
    assert vg(np.array([0.5, 0.3, 0.2]))[0] == pytest.approx(v0, rel=1e-12)
    with pytest.raises(Exception, match="triangular"):
        sl.value_and_grad(f)(np.array([0.7, 0.1, 0.2]))
    with pytest.raises(Exception, match="triangular"):
        vg(np.array([0.7, 0.1, 0.2]))


def test_big_vectorised_programs_replay_in_numpy():
    # exp/log of 1e4 elements: numpy's SIMD loops beat the interpreter (program.py,
    # _numpy_is_faster); small vectors stay in the interpreter
    X = RNG.standard_normal((20000, 3))
    f = lambda b: sl.sum(sl.log1p_exp(X @ b))     # noqa: E731
    vg = sl.compile(f, np.zeros(3), verify=False)
    v, g = vg(np.full(3, 0.1))
    assert not vg.compiled and "numpy" in vg.vm_skipped
    v0, g0 = sl.value_and_grad(f)(np.full(3, 0.1))
    np.testing.assert_allclose(g, g0, rtol=1e-12)
    small = lambda b: sl.sum(sl.log1p_exp(X[:100] @ b))     # noqa: E731
    assert _vm(small, np.zeros(3)).compiled


@pytest.mark.parametrize("axis,keepdims",
                         [(0, False), (1, False), (-1, True), ((0,), False)])
def test_log_sum_exp_along_an_axis(axis, keepdims):
    w = RNG.standard_normal(np.zeros((3, 4)).sum(axis=axis, keepdims=keepdims).shape)
    check(lambda x: sl.sum(w * sl.log_sum_exp(sl.reshape(x, (3, 4)), axis=axis,
                                              keepdims=keepdims)),
          RNG.standard_normal(12))


def test_log_sum_exp_along_the_middle_axis():
    w = RNG.standard_normal((2, 4))
    check(lambda x: sl.sum(w * sl.log_sum_exp(sl.reshape(x, (2, 3, 4)), axis=1)),
          RNG.standard_normal(24))


# ---- binomial_logit ----------------------------------------------------------------------
NB = np.array([10, 4, 7, 0, 12])
KB = np.array([3, 4, 0, 0, 5])


def test_binomial_logit_vector_logits():
    check(lambda x: sl.binomial_logit_lpmf(KB, NB, x), RNG.standard_normal(5))


def test_binomial_logit_scalar_logit_and_scalar_trials():
    check(lambda x: sl.binomial_logit_lpmf(KB, 12, x[0])
          + sl.binomial_logit_lpmf(3, 9, x[1]), RNG.standard_normal(2))


def test_binomial_logit_infinite_logit_goes_to_the_tape():
    vg = _vm(lambda x: sl.binomial_logit_lpmf(KB, NB, x[0] / x[1]), np.array([0.3, 1.0]))
    with pytest.raises(sl.DomainError), np.errstate(divide="ignore"):
        vg(np.array([1.0, 0.0]))


# ---- Hessians (forward over reverse) of programs with these ops --------------------------
HESSIAN_FUNCS = {
    "log_mix": lambda x: sl.sum(sl.log_mix(sl.inv_logit(x[0]), -0.5 * (Y - x[1]) ** 2,
                                           -0.5 * (Y - x[2]) ** 2)),
    "cumsum_softmax": lambda x: sl.sum(sl.cumulative_sum(x) * sl.softmax(x)),
    "log_softmax_lse": lambda x: sl.sum(sl.log_softmax(x) * Y[:3]) + sl.log_sum_exp(
        sl.reshape(sl.stack([x[0], x[1], x[2], x[0] * x[1]]), (2, 2)), axis=0)[1],
    "glm": lambda x: sl.bernoulli_logit_glm_lpmf(YB, XG[:, :2], x[0], x[1:]),
    "mvn": lambda x: sl.multi_normal_cholesky_lpdf(x, np.zeros(3), LC[:3, :3]),
    "distances": lambda x: sl.squared_distance(x, Y[:3]) * sl.dot_self(x),
}


@pytest.mark.parametrize("name", sorted(HESSIAN_FUNCS))
def test_hessians_agree_with_differences_of_the_tape_gradient(name):
    f = HESSIAN_FUNCS[name]
    x = np.array([0.3, -0.5, 0.8])
    H = sl.compile(f, x).hessian(x)
    g = sl.value_and_grad(f)
    h = 1e-5
    Hfd = np.array([(g(x + h * e)[1] - g(x - h * e)[1]) / (2 * h) for e in np.eye(3)])
    np.testing.assert_allclose(H, Hfd, rtol=1e-5, atol=1e-6)


# ---- Gaussian-process pieces: gp_exp_quad_cov, add_diag, cholesky_decompose --------------
XP = np.linspace(-2.0, 3.0, 5)


def test_gp_exp_quad_cov_of_data_points():
    w = RNG.standard_normal((5, 5))
    check(lambda x: sl.sum(w * sl.gp_exp_quad_cov(XP, sl.exp(x[0]), sl.exp(x[1]))),
          np.array([0.2, 0.4]))


def test_gp_exp_quad_cov_of_traced_points_in_two_dimensions():
    w = RNG.standard_normal((4, 4))
    check(lambda x: sl.sum(w * sl.gp_exp_quad_cov(sl.reshape(x[2:], (4, 2)), sl.exp(x[0]),
                                                  sl.exp(x[1]))),
          RNG.standard_normal(10) * 0.5)


@pytest.mark.parametrize("shape,dshape", [((3, 3), ()), ((3, 3), (3,)), ((2, 4), (2,))])
def test_add_diag(shape, dshape):
    w = RNG.standard_normal(shape)
    n, k = int(np.prod(shape)), int(np.prod(dshape))
    check(lambda x: sl.sum(w * sl.add_diag(sl.reshape(x[:n], shape),
                                           sl.reshape(x[n:], dshape) if dshape else x[n])),
          RNG.standard_normal(n + max(k, 1)))


@pytest.fixture
def vm_cholesky():
    # cholesky_decompose is not lowered by default (math/linalg.py says why): lower it
    # for these tests only
    from stanlite.math import linalg
    from stanlite.autodiff.vm.program import cholesky_rule, deflower
    spec = linalg._cholesky._spec
    old = getattr(spec, "lower", None)
    deflower(linalg._cholesky, cholesky_rule)
    yield
    spec.lower = old


def test_cholesky_is_not_lowered_by_default():
    f = lambda x: sl.sum(sl.cholesky_decompose(sl.reshape(x, (2, 2))))   # noqa: E731
    vg = sl.compile(f, np.array([2.0, 0.5, 0.5, 1.0]))
    assert not vg.compiled and "_cholesky" in vg.vm_skipped


def test_cholesky_of_a_traced_matrix(vm_cholesky):
    w = RNG.standard_normal((4, 4))         # upper entries of L read too (as zeros)

    def f(x):
        b = sl.reshape(x, (4, 4))
        return sl.sum(w * sl.cholesky_decompose(b @ sl.transpose(b) + 4.0 * np.eye(4)))
    check(f, RNG.standard_normal(16) * 0.5)


def test_a_gp_model_as_the_zoo_writes_it(vm_cholesky):
    k = np.array([3, 0, 5, 2, 1])

    def f(x):
        cov = sl.add_diag(sl.gp_exp_quad_cov(XP, sl.exp(x[0]), sl.exp(x[1])), 1e-6)
        fv = sl.cholesky_decompose(cov) @ x[2:]
        return sl.normal_lpdf(x[2:], 0, 1) + sl.poisson_log_lpmf(k, fv)
    check(f, RNG.standard_normal(7) * 0.3)


def test_cholesky_of_a_matrix_not_positive_definite_raises_as_the_tape(vm_cholesky):
    f = lambda x: sl.sum(sl.cholesky_decompose(sl.reshape(x, (2, 2))))   # noqa: E731
    vg = _vm(f, np.array([2.0, 0.5, 0.5, 1.0]))
    with pytest.raises(sl.DomainError):
        vg(np.array([1.0, 2.0, 2.0, 1.0]))
