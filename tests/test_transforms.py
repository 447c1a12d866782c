"""Constraint transforms (stanlite.transforms): round trips, log-Jacobians against AD and
finite-difference Jacobians, change of measure (quadrature and random-walk Metropolis with
batch-means MCSE), gradients and Hessians through constrain (also w.r.t. traced bounds),
check() messages and edge cases."""

import math

import numpy as np
import pytest
from scipy import integrate, stats

import stanlite as sl
from stanlite import transforms as T

INF = np.inf


# --------------------------------------------------------------------------------------
# the cases: (id, transform, shape, bounds, free coordinates of y)
# --------------------------------------------------------------------------------------
def _flat(y):
    return np.ravel(y) if not isinstance(y, sl.Box) else sl.reshape(y, (-1,))


def _tri(strict):
    def f(y):
        M, N = np.shape(sl.value_of(y))[-2:]
        r, c = np.tril_indices(M, -1 if strict else 0, N)
        return sl.reshape(y[..., r, c], (-1,))
    return f


def _head(y):
    return sl.reshape(y[..., :-1], (-1,))


CASES = [
    ("identity-scalar", T.Identity(), (), (), _flat),
    ("identity-matrix", T.Identity(), (2, 3), (), _flat),
    ("lower-scalar", T.Lower(), (), (1.5,), _flat),
    ("lower-vector-array-bound", T.Lower(), (3,), (np.array([0.0, -1.0, 2.0]),), _flat),
    ("upper-matrix", T.Upper(), (2, 2), (3.0,), _flat),
    ("upper-array3d", T.Upper(), (2, 1, 2), (np.array([1.0, 2.0]),), _flat),
    ("lower_upper-scalar", T.LowerUpper(), (), (-1.0, 3.0), _flat),
    ("lower_upper-vector", T.LowerUpper(), (4,), (np.array([0.0, -1, -2, 5]), 10.0), _flat),
    ("lower_upper-mixed-inf", T.LowerUpper(), (4,),
     (np.array([0.0, -INF, 1.0, -INF]), np.array([1.0, 2.0, INF, INF])), _flat),
    ("lower_upper-matrix", T.LowerUpper(), (2, 3),
     (np.array([[0.0], [1.0]]), np.array([[1.0], [4.0]])), _flat),
    ("offset_multiplier-scalar", T.OffsetMultiplier(), (), (1.0, 2.5), _flat),
    ("offset_multiplier-vector", T.OffsetMultiplier(), (3,),
     (np.array([0.0, 1.0, 2.0]), np.array([0.5, 1.0, 3.0])), _flat),
    ("multiplier-only-matrix", T.OffsetMultiplier(multiplier=2.0), (2, 2), (2.0,), _flat),
] + [
    # the transforms without arguments: one case per size (a fresh transform each)
    (f"{name}-{label}", transform(), shape, (), flat)
    for name, transform, flat, sizes in [
        ("simplex", T.Simplex, _head, {"1": (1,), "2": (2,), "5": (5,), "batch": (2, 3)}),
        ("ordered", T.Ordered, _flat, {"1": (1,), "4": (4,), "batch": (3, 2)}),
        ("positive_ordered", T.PositiveOrdered, _flat, {"3": (3,), "batch": (2, 3)}),
        ("cholesky_factor_corr", T.CholeskyFactorCorr, _tri(True),
         {"2": (2, 2), "4": (4, 4), "batch": (2, 3, 3)}),
        ("corr_matrix", T.CorrMatrix, _tri(True), {"2": (2, 2), "4": (4, 4), "batch": (2, 3, 3)}),
        ("cholesky_factor_cov", T.CholeskyFactorCov, _tri(False),
         {"3x3": (3, 3), "5x2": (5, 2), "batch": (2, 3, 2)}),
        ("cov_matrix", T.CovMatrix, _tri(False), {"1": (1, 1), "3": (3, 3), "batch": (2, 2, 2)})]
    for label, shape in sizes.items()
]
IDS = [c[0] for c in CASES]
UNIT = [("unit_vector-3", T.UnitVector(), (3,), (), None),
        ("unit_vector-batch", T.UnitVector(), (2, 4), (), None)]


def _seed(name):
    return sum(ord(ch) * (i + 1) for i, ch in enumerate(name)) % 100003


def _x(name, t, shape, scale=0.8):
    return np.random.default_rng(_seed(name)).normal(scale=scale, size=t.free_size(shape))


def _valid(t, shape, bounds, rng):
    """A point of the constrained set drawn without using the transform."""
    if isinstance(t, (T.Lower, T.Upper, T.LowerUpper, T.Identity)):
        lb = bounds[0] if isinstance(t, (T.Lower, T.LowerUpper)) else -INF
        ub = bounds[-1] if isinstance(t, (T.Upper, T.LowerUpper)) else INF
        lv, uv = np.broadcast_to(lb, shape), np.broadcast_to(ub, shape)
        u, e, z = rng.uniform(0.05, 0.95, shape), rng.exponential(size=shape), rng.normal(size=shape)
        fl, fu = np.isfinite(lv), np.isfinite(uv)
        with np.errstate(invalid="ignore"):
            y = np.where(fl & fu, lv + (uv - lv) * u,
                         np.where(fl, lv + e, np.where(fu, uv - e, z)))
        return np.asarray(y, dtype=float)
    if isinstance(t, T.OffsetMultiplier):
        return rng.normal(size=shape)
    batch = shape[:-1] if t.name in ("simplex", "ordered", "positive_ordered",
                                      "unit_vector") else shape[:-2]
    if t.name == "simplex":
        return rng.dirichlet(np.ones(shape[-1]), size=batch)
    if t.name == "ordered":
        return np.sort(rng.normal(size=shape), axis=-1)
    if t.name == "positive_ordered":
        return np.sort(rng.exponential(size=shape), axis=-1)
    if t.name == "unit_vector":
        z = rng.normal(size=shape)
        return z / np.linalg.norm(z, axis=-1, keepdims=True)
    M, N = shape[-2:]
    if t.name == "cholesky_factor_cov":
        L = np.tril(rng.normal(size=shape))
        idx = np.arange(N)
        L[..., idx, idx] = rng.uniform(0.5, 2.0, size=batch + (N,))
        return L
    A = rng.normal(size=batch + (M, M + 2))
    S = A @ np.swapaxes(A, -1, -2)
    if t.name == "cov_matrix":
        return 0.5 * (S + np.swapaxes(S, -1, -2))
    d = 1.0 / np.sqrt(np.diagonal(S, axis1=-2, axis2=-1))
    om = S * d[..., :, None] * d[..., None, :]
    om = 0.5 * (om + np.swapaxes(om, -1, -2))
    idx = np.arange(M)
    om[..., idx, idx] = 1.0
    if t.name == "corr_matrix":
        return om
    return np.linalg.cholesky(om)


def _fd_jacobian(F, x, h=1e-6):
    cols = []
    for j in range(x.size):
        e = np.zeros_like(x)
        e[j] = h
        cols.append((np.asarray(F(x + e)) - np.asarray(F(x - e))) / (2 * h))
    return np.stack(cols, axis=1)


# --------------------------------------------------------------------------------------
# sizes and round trips
# --------------------------------------------------------------------------------------
def test_free_sizes():
    assert T.Identity().free_size(()) == 1
    assert T.Lower().free_size((2, 3)) == 6
    assert T.Simplex().free_size((5,)) == 4
    assert T.Simplex().free_size((3, 5)) == 12
    assert T.Ordered().free_size((4,)) == 4
    assert T.UnitVector().free_size((4,)) == 4
    assert T.CholeskyFactorCorr().free_size((4, 4)) == 6
    assert T.CorrMatrix().free_size((5, 5)) == 10
    assert T.CholeskyFactorCov().free_size((5, 3)) == 3 * 4 // 2 + 2 * 3
    assert T.CovMatrix().free_size((4, 4)) == 4 + 6
    assert T.CovMatrix().free_size((2, 3, 3)) == 12


@pytest.mark.parametrize("name,t,shape,bounds,free", CASES, ids=IDS)
def test_round_trips(name, t, shape, bounds, free):
    x = _x(name, t, shape)
    y, lj = t.constrain(x, shape, *bounds)
    if shape == ():
        assert isinstance(y, float)
    else:
        assert np.shape(y) == shape
    assert isinstance(lj, float)
    assert t.check(y, shape, *bounds) is None
    np.testing.assert_allclose(t.unconstrain(y, shape, *bounds), x, rtol=1e-9, atol=1e-11)
    rng = np.random.default_rng(_seed(name) + 1)
    y0 = _valid(t, shape, bounds, rng)
    assert t.check(y0, shape, *bounds) is None
    x0 = t.unconstrain(y0, shape, *bounds)
    assert x0.shape == (t.free_size(shape),) and np.all(np.isfinite(x0))
    y1, _ = t.constrain(x0, shape, *bounds)
    np.testing.assert_allclose(y1, y0, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name,t,shape,bounds,free", UNIT, ids=[u[0] for u in UNIT])
def test_unit_vector_round_trip_and_log_term(name, t, shape, bounds, free):
    x = _x(name, t, shape)
    y, lj = t.constrain(x, shape)
    xs = x.reshape(shape)
    np.testing.assert_allclose(y, xs / np.linalg.norm(xs, axis=-1, keepdims=True), rtol=1e-14)
    assert lj == pytest.approx(-0.5 * np.sum(x * x), rel=1e-14)
    assert t.check(y, shape) is None
    # not a bijection: the inverse returns the point of norm 1 on the ray
    np.testing.assert_allclose(t.unconstrain(y, shape), np.ravel(y), rtol=1e-15)
    y0 = _valid(t, shape, (), np.random.default_rng(3))
    np.testing.assert_allclose(t.constrain(t.unconstrain(y0, shape), shape)[0], y0, rtol=1e-14)


def test_batched_structured_equal_stacked_singles():
    rng = np.random.default_rng(11)
    for t, core in [(T.Simplex(), (4,)), (T.Ordered(), (3,)), (T.PositiveOrdered(), (3,)),
                    (T.UnitVector(), (3,)), (T.CholeskyFactorCorr(), (3, 3)),
                    (T.CorrMatrix(), (3, 3)), (T.CholeskyFactorCov(), (4, 2)),
                    (T.CovMatrix(), (3, 3))]:
        n = t.free_size(core)
        x = rng.normal(size=3 * n)
        y, lj = t.constrain(x, (3,) + core)
        singles = [t.constrain(x[i * n:(i + 1) * n], core) for i in range(3)]
        np.testing.assert_allclose(y, np.stack([s[0] for s in singles]), rtol=1e-14)
        assert lj == pytest.approx(sum(s[1] for s in singles), rel=1e-13, abs=1e-13)


# --------------------------------------------------------------------------------------
# log |det J| against the AD Jacobian and finite differences
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,t,shape,bounds,free", CASES, ids=IDS)
def test_log_jacobian(name, t, shape, bounds, free):
    x = _x(name, t, shape)
    if x.size == 0:
        assert t.constrain(x, shape, *bounds)[1] == 0.0
        return
    _, lj = t.constrain(x, shape, *bounds)

    def F(v):
        return free(t.constrain(v, shape, *bounds)[0])

    J = np.asarray(sl.jacobian(F)(x))
    assert J.shape == (x.size, x.size)
    sign, logdet = np.linalg.slogdet(J)
    assert sign != 0
    assert lj == pytest.approx(logdet, rel=1e-10, abs=1e-10)
    sign, logdet_fd = np.linalg.slogdet(_fd_jacobian(F, x))
    assert lj == pytest.approx(logdet_fd, rel=1e-6, abs=1e-6)


def test_cholesky_corr_and_corr_matrix_log_jacobians_differ_by_lkj_term():
    """log_jac(corr_matrix) = log_jac(cholesky_factor_corr) + sum_i (K-i-1) log L_ii,
    the Jacobian of L -> L L^T on the strictly lower entries (Stan's LKJ Cholesky term)."""
    K = 5
    x = np.random.default_rng(5).normal(size=K * (K - 1) // 2)
    L, lj_L = T.CholeskyFactorCorr().constrain(x, (K, K))
    om, lj_om = T.CorrMatrix().constrain(x, (K, K))
    np.testing.assert_allclose(om, L @ L.T, atol=1e-15)
    extra = sum((K - i - 1) * np.log(L[i, i]) for i in range(K))
    assert lj_om == pytest.approx(lj_L + extra, rel=1e-12)


def test_exact_structure_of_outputs():
    x = np.random.default_rng(2).normal(size=10)
    om, _ = T.CorrMatrix().constrain(x, (5, 5))
    assert np.array_equal(om, om.T) and np.all(np.diag(om) == 1.0)
    S, _ = T.CovMatrix().constrain(np.random.default_rng(3).normal(size=15), (5, 5))
    assert np.array_equal(S, S.T)
    L, _ = T.CholeskyFactorCorr().constrain(x, (5, 5))
    assert np.all(np.triu(L, 1) == 0)
    np.testing.assert_allclose(np.sum(L * L, axis=1), 1.0, atol=1e-15)
    y, _ = T.Simplex().constrain(np.random.default_rng(4).normal(size=7) * 3, (8,))
    assert abs(np.sum(y) - 1.0) < 1e-14 and np.all(y > 0)


# --------------------------------------------------------------------------------------
# change of measure: quadrature (exact) and random-walk Metropolis (statistical)
# --------------------------------------------------------------------------------------
def _one_d(t, bounds, g, lo=-np.inf, hi=np.inf):
    def h(x):
        y, lj = t.constrain(np.array([x]), (), *bounds)
        return g(y) * math.exp(lj)
    return integrate.quad(h, lo, hi, epsabs=1e-11, epsrel=1e-10, limit=200)[0]


def test_change_of_measure_one_dimensional_quadrature():
    lu = (T.LowerUpper(), (-1.0, 3.0))
    assert _one_d(*lu, lambda y: 1.0) == pytest.approx(4.0, rel=1e-8)       # length
    assert _one_d(*lu, lambda y: y) == pytest.approx(4.0, rel=1e-8)         # int y dy
    assert _one_d(*lu, lambda y: y * y) == pytest.approx(28 / 3, rel=1e-8)
    # (y = lb + exp(x) overflows for x > 709: integrate where the integrand lives)
    assert _one_d(T.Lower(), (1.5,), lambda y: math.exp(1.5 - y),
                  -60, 6) == pytest.approx(1, rel=1e-8)
    assert _one_d(T.Upper(), (3.0,), lambda y: y * math.exp(y - 3),
                  -60, 6) == pytest.approx(2, rel=1e-8)
    assert _one_d(T.OffsetMultiplier(), (1.0, 2.5),
                  lambda y: stats.norm.pdf(y, 0.5, 1.2)) == pytest.approx(1.0, rel=1e-8)
    # infinite bounds: the one-sided map and the identity
    assert _one_d(T.LowerUpper(), (0.0, INF), lambda y: math.exp(-y),
                  -60, 6) == pytest.approx(1.0, rel=1e-8)
    assert _one_d(T.LowerUpper(), (-INF, INF),
                  lambda y: stats.norm.pdf(y)) == pytest.approx(1.0, rel=1e-8)


def test_change_of_measure_simplex_area_quadrature():
    """int exp(log_jac(x)) g(y(x)) dx = int_simplex g(y) dy1 dy2 for K = 3, by the
    trapezoid rule on a grid in x (spectrally accurate: the integrand is analytic in a
    strip of half-width pi and decays like exp(-|x|))."""
    t, h = T.Simplex(), 0.6
    grid = np.arange(-36.0, 36.0 + h / 2, h)
    tot = np.zeros(3)
    for a in grid:
        for b in grid:
            y, lj = t.constrain(np.array([a, b]), (3,))
            tot += math.exp(lj) * np.array([1.0, y[0], y[2] ** 2])
    tot *= h * h
    # the triangle {y1, y2 >= 0, y1 + y2 <= 1}: area 1/2, int y1 = 1/6, int y3^2 = 1/12
    np.testing.assert_allclose(tot, [0.5, 1 / 6, 1 / 12], rtol=1e-8)


def _rwm(logp_stats, dim, rng, n_draws, n_warm=1500, target=0.3):
    """Random-walk Metropolis with a Robbins-Monro tuned scalar step during warmup."""
    x = rng.normal(scale=0.3, size=dim)
    lp, st = logp_stats(x)
    log_step = math.log(2.4 / math.sqrt(dim))
    out = np.empty((n_draws, len(st)))
    accepted = 0
    for it in range(n_warm + n_draws):
        prop = x + math.exp(log_step) * rng.standard_normal(dim)
        lpp, stp = logp_stats(prop)
        d = lpp - lp if np.isfinite(lpp) else -np.inf
        if math.log(rng.uniform()) < d:
            x, lp, st = prop, lpp, stp
            accepted += it >= n_warm
        if it < n_warm:
            log_step += (math.exp(min(0.0, d)) - target) * 3.0 / math.sqrt(it + 10)
        else:
            out[it - n_warm] = st
    return out, accepted / n_draws


def _assert_moments(draws, truths, labels, n_batches=40, z=4.5, min_ess=200):
    """Each mean within z MCSE of the truth; MCSE from batch means (honest under
    autocorrelation); ESS = var / MCSE^2 must be large enough to make the test bite."""
    n = draws.shape[0] // n_batches * n_batches
    for k, (truth, label) in enumerate(zip(truths, labels)):
        f = draws[:n, k]
        bm = f.reshape(n_batches, -1).mean(axis=1)
        mcse = bm.std(ddof=1) / math.sqrt(n_batches)
        ess = f.var() / mcse ** 2
        assert ess >= min_ess, f"{label}: ESS {ess:.0f} too small for a meaningful check"
        assert abs(f.mean() - truth) <= z * mcse, \
            f"{label}: mean {f.mean():.4f} vs {truth:.4f} (MCSE {mcse:.4f}, ESS {ess:.0f})"


def test_metropolis_lower_upper_flat_is_uniform():
    t, lb, ub = T.LowerUpper(), -1.0, 3.0

    def lp(x):
        y, lj = t.constrain(x, (), lb, ub)
        return lj, (y, y * y)

    draws, acc = _rwm(lp, 1, np.random.default_rng(101), 5000, n_warm=1000)
    assert 0.15 < acc < 0.6
    _assert_moments(draws, [1.0, 7 / 3], ["E y", "E y^2"])     # Uniform(-1, 3)
    ks = stats.kstest(draws[::20, 0], stats.uniform(lb, ub - lb).cdf)
    assert ks.pvalue > 1e-3


def test_metropolis_simplex_flat_is_dirichlet_one():
    K, t = 4, T.Simplex()

    def lp(x):
        y, lj = t.constrain(x, (K,))
        return lj, np.concatenate([y, y * y])

    draws, _ = _rwm(lp, K - 1, np.random.default_rng(102), 8000)
    m2 = 2 / (K * (K + 1))                       # E y_k^2 under Dirichlet(1,...,1)
    _assert_moments(draws, [1 / K] * K + [m2] * K,
                    [f"E y{k}" for k in range(K)] + [f"E y{k}^2" for k in range(K)])


def test_metropolis_corr_matrix_flat_is_lkj_one():
    K, t = 3, T.CorrMatrix()
    r, c = np.tril_indices(K, -1)

    def lp(x):
        om, lj = t.constrain(x, (K, K))
        v = om[r, c]
        return lj, np.concatenate([v, v * v])

    draws, _ = _rwm(lp, K * (K - 1) // 2, np.random.default_rng(103), 8000)
    # LKJ(1): each off-diagonal correlation is Beta(K/2, K/2) on (-1, 1): E r^2 = 1/(K+1)
    _assert_moments(draws, [0.0] * 3 + [1 / (K + 1)] * 3,
                    ["E r10", "E r20", "E r21", "E r10^2", "E r20^2", "E r21^2"])


def test_metropolis_cholesky_corr_with_lkj_term_is_lkj_one():
    K, t = 3, T.CholeskyFactorCorr()
    r, c = np.tril_indices(K, -1)

    def lp(x):
        L, lj = t.constrain(x, (K, K))
        lkj = sum((K - i - 1) * math.log(L[i, i]) for i in range(1, K))  # lkj_corr_cholesky(L|1)
        v = (L @ L.T)[r, c]
        return lj + lkj, np.concatenate([v, v * v])

    draws, _ = _rwm(lp, K * (K - 1) // 2, np.random.default_rng(104), 8000)
    _assert_moments(draws, [0.0] * 3 + [1 / (K + 1)] * 3,
                    ["E r10", "E r20", "E r21", "E r10^2", "E r20^2", "E r21^2"])


def test_metropolis_cov_matrix_wishart():
    K, nu, t = 2, 5.0, T.CovMatrix()

    def lp(x):
        S, lj = t.constrain(x, (K, K))
        logdet = np.linalg.slogdet(S)[1]
        return lj + 0.5 * (nu - K - 1) * logdet - 0.5 * np.trace(S), (S[0, 0], S[1, 0], S[1, 1])

    draws, _ = _rwm(lp, 3, np.random.default_rng(105), 10000)
    _assert_moments(draws, [nu, 0.0, nu], ["E S00", "E S10", "E S11"])    # Wishart(nu, I)


def test_metropolis_ordered_normal_order_statistics():
    t = T.Ordered()

    def lp(x):
        y, lj = t.constrain(x, (3,))
        return lj - 0.5 * float(np.sum(y * y)), y

    draws, _ = _rwm(lp, 3, np.random.default_rng(106), 8000)
    e3 = 3 / (2 * math.sqrt(math.pi))             # E max of 3 standard normals
    _assert_moments(draws, [-e3, 0.0, e3], ["E y(1)", "E y(2)", "E y(3)"])


def test_metropolis_positive_ordered_exponential_order_statistics():
    t = T.PositiveOrdered()

    def lp(x):
        y, lj = t.constrain(x, (3,))
        return lj - float(np.sum(y)), y

    draws, _ = _rwm(lp, 3, np.random.default_rng(107), 8000)
    _assert_moments(draws, [1 / 3, 1 / 3 + 1 / 2, 1 / 3 + 1 / 2 + 1],
                    ["E y(1)", "E y(2)", "E y(3)"])


def test_metropolis_unit_vector_flat_is_uniform_on_sphere():
    t = T.UnitVector()

    def lp(x):
        y, lj = t.constrain(x, (3,))
        return lj, np.concatenate([y, y * y])

    draws, _ = _rwm(lp, 3, np.random.default_rng(108), 6000)
    _assert_moments(draws, [0.0] * 3 + [1 / 3] * 3,
                    ["E y0", "E y1", "E y2", "E y0^2", "E y1^2", "E y2^2"])


# --------------------------------------------------------------------------------------
# derivatives: reverse, forward, Hessians; traced bounds
# --------------------------------------------------------------------------------------
def _objective(t, shape, bounds, w):
    def f(x):
        y, lj = t.constrain(x, shape, *bounds)
        return sl.sum(sl.reshape(y, (-1,)) * w) + 0.1 * sl.sum(sl.reshape(y, (-1,)) ** 2) + lj
    return f


@pytest.mark.parametrize("name,t,shape,bounds,free", CASES + UNIT, ids=IDS + [u[0] for u in UNIT])
def test_gradient_forward_and_hessian(name, t, shape, bounds, free):
    x = _x(name, t, shape, scale=0.6)
    if x.size == 0:
        return
    w = np.random.default_rng(_seed(name) + 2).normal(size=max(1, int(np.prod(shape))))
    f = _objective(t, shape, bounds, w)
    sl.assert_grad(f, x)
    sl.assert_jvp(lambda v: sl.reshape(t.constrain(v, shape, *bounds)[0], (-1,)), x)
    sl.assert_hessian(f, x)


def test_lower_upper_hessian_at_zero_is_smooth():
    """The log-Jacobian is smooth at x = 0 (no abs() kink): exact second derivative."""
    t = T.LowerUpper()
    f = lambda x: t.constrain(x, (3,), 0.0, 2.0)[1]           # noqa: E731
    H = sl.hessian(f)(np.zeros(3))
    # d^2/dx^2 [log s(x) + log(1 - s(x))] = -2 s(1-s) = -1/2 at 0
    np.testing.assert_allclose(H, -0.5 * np.eye(3), atol=1e-14)
    sl.assert_hessian(f, np.array([0.0, 1e-9, -1e-9]))


def _traced_cases():
    # (name, transform, shape, n_x, bounds as functions of the traced scalar a)
    return [
        ("lower", T.Lower(), (3,), lambda a: (sl.sin(a),)),
        ("upper", T.Upper(), (2, 2), lambda a: (2.0 * a,)),
        ("lower_upper", T.LowerUpper(), (3,), lambda a: (a, a * a + 3.0)),
        ("lower_upper-scalar-upper-1-minus", T.LowerUpper(), (), lambda a: (0.0, 1.0 - 0.3 * a)),
        ("lower_upper-mixed", T.LowerUpper(), (3,),
         lambda a: (sl.concatenate([sl.reshape(a, (1,)), np.array([-INF, 0.0])]),
                    sl.concatenate([np.array([INF, 1.0]), sl.reshape(sl.exp(a), (1,))]))),
        ("offset_multiplier", T.OffsetMultiplier(), (3,), lambda a: (a, sl.exp(a))),
    ]


@pytest.mark.parametrize("case", _traced_cases(), ids=[c[0] for c in _traced_cases()])
def test_traced_bounds(case):
    name, t, shape, bound_fn = case
    n = t.free_size(shape)
    rng = np.random.default_rng(_seed(name))
    v = np.concatenate([rng.normal(scale=0.7, size=n), [0.4]])

    def y_of(v):
        y, _ = t.constrain(v[:n], shape, *bound_fn(v[n]))
        return sl.reshape(y, (-1,))

    def lj_of(v):
        return t.constrain(v[:n], shape, *bound_fn(v[n]))[1]

    # the log-Jacobian is w.r.t. x at fixed bounds: the x-columns of the full Jacobian
    J = np.asarray(sl.jacobian(y_of)(v))
    assert np.any(J[:, n] != 0)                      # the value depends on the bound
    _, logdet = np.linalg.slogdet(J[:, :n])
    assert lj_of(v) == pytest.approx(logdet, rel=1e-10, abs=1e-12)
    w = rng.normal(size=n)
    f = lambda u: sl.sum(y_of(u) * w) + lj_of(u)     # noqa: E731
    sl.assert_grad(f, v)
    sl.assert_hessian(f, v)


# --------------------------------------------------------------------------------------
# check(): messages
# --------------------------------------------------------------------------------------
CHECKS = [
    (T.Lower(), (2,), (0.0,), [1.0, -1.5], "must be >= 0, but element [1] is -1.5"),
    (T.Lower(), (), (0.0,), -1.5, "must be >= 0, but is -1.5"),
    (T.Upper(), (2, 2), (1.0,), [[0, 2], [0, 0]], "must be <= 1, but element [0, 1] is 2"),
    (T.LowerUpper(), (2,), (0.0, 1.0), [0.5, np.nan], "must be in [0, 1], but element [1] is nan"),
    (T.LowerUpper(), (2,), (np.array([0.0, -INF]), np.array([INF, 2.0])), [1.0, 2.5],
     "must be <= 2, but element [1] is 2.5"),
    (T.Identity(), (3,), (), [0.0, np.nan, 1.0], "element [1] is nan"),
    (T.Simplex(), (3,), (), [0.5, 0.6, -0.1], "must be >= 0, but element [2] is -0.1"),
    (T.Simplex(), (3,), (), [0.5, 0.6, 0.1], "must sum to 1 (within 1e-08), but the sum is 1.2"),
    (T.Simplex(), (2, 2), (), [[0.5, 0.5], [0.5, 0.6]], "the sum at [1] is 1.1"),
    (T.Simplex(), (3,), (), [0.5, 0.5], "expected a value of shape (3,), got shape (2,)"),
    (T.Ordered(), (3,), (), [0.0, 1.5, 1.0],
     "must be strictly increasing, but element [2] is 1 after element [1] = 1.5"),
    (T.Ordered(), (2,), (), [1.0, 1.0], "must be strictly increasing"),
    (T.PositiveOrdered(), (2,), (), [-1.0, 1.0], "must be >= 0, but element [0] is -1"),
    (T.UnitVector(), (2,), (), [0.6, 0.7], "must have unit length"),
    (T.CholeskyFactorCorr(), (2, 2), (), [[1.0, 0.1], [0.0, 1.0]],
     "must be lower triangular, but element [0, 1] is 0.1"),
    (T.CholeskyFactorCorr(), (2, 2), (), [[1.0, 0.0], [0.6, -0.8]],
     "must have a positive diagonal, but element [1, 1] is -0.8"),
    (T.CholeskyFactorCorr(), (2, 2), (), [[1.0, 0.0], [0.6, 0.7]],
     "must have rows of unit length"),
    (T.CorrMatrix(), (2, 2), (), [[1.0, 0.5], [0.4, 1.0]],
     "must be symmetric (within 1e-08), but element [0, 1] is 0.5 and element [1, 0] is 0.4"),
    (T.CorrMatrix(), (2, 2), (), [[1.0, 0.5], [0.5, 1.1]], "must have a unit diagonal"),
    (T.CorrMatrix(), (3, 3), (), [[1, .9, -.9], [.9, 1, .9], [-.9, .9, 1]],
     "must be positive definite"),
    (T.CholeskyFactorCov(), (3, 2), (), [[1.0, 0.0], [0.5, 0.0], [1.0, 2.0]],
     "must have a positive diagonal, but element [1, 1] is 0"),
    (T.CovMatrix(), (2, 2), (), [[1.0, 2.0], [2.0, 1.0]], "must be positive definite"),
    (T.CovMatrix(), (2, 2), (), [[1.0, 0.0], [1e-6, 1.0]], "must be symmetric"),
]


@pytest.mark.parametrize("t,shape,bounds,y,msg", CHECKS,
                         ids=[f"{c[0].name}-{i}" for i, c in enumerate(CHECKS)])
def test_check_messages(t, shape, bounds, y, msg):
    got = t.check(y, shape, *bounds)
    assert got is not None and msg in got, got
    if "expected a value of shape" in msg:
        with pytest.raises(ValueError, match="expected a value of shape"):
            t.unconstrain(y, shape, *bounds)
    else:
        with pytest.raises(sl.DomainError) as e:
            t.unconstrain(y, shape, *bounds)
        assert msg in str(e.value) and t.name in str(e.value)


def test_check_tolerances_like_stan():
    eps = 5e-9
    assert T.Simplex().check([0.5, 0.5 + eps], (2,)) is None
    assert T.UnitVector().check([0.6, 0.8 + eps / 2], (2,)) is None
    assert T.CorrMatrix().check([[1 + eps, 0.3], [0.3 + eps, 1.0]], (2, 2)) is None
    assert T.CovMatrix().check([[2.0, 0.3], [0.3 + eps, 1.0]], (2, 2)) is None
    assert T.Simplex().check([0.5, 0.5 + 3 * eps], (2,)) is not None
    # bounds are inclusive, as Stan's checks
    assert T.LowerUpper().check([0.0, 1.0], (2,), 0.0, 1.0) is None
    assert T.Lower().check(np.inf, (), 0.0) is None


# --------------------------------------------------------------------------------------
# edge cases
# --------------------------------------------------------------------------------------
def test_infinite_bounds_reduce():
    x = np.array([-1.2, 0.3, 2.0])
    y, lj = T.LowerUpper().constrain(x, (3,), -INF, INF)
    np.testing.assert_array_equal(y, x)
    assert lj == 0.0
    for args, ref in [((1.0, INF), T.Lower().constrain(x, (3,), 1.0)),
                      ((-INF, 1.0), T.Upper().constrain(x, (3,), 1.0))]:
        y, lj = T.LowerUpper().constrain(x, (3,), *args)
        np.testing.assert_array_equal(y, ref[0])
        assert lj == ref[1]
    np.testing.assert_array_equal(T.Lower().constrain(x, (3,), -INF)[0], x)
    np.testing.assert_array_equal(T.Upper().constrain(x, (3,), INF)[0], x)
    # mixed arrays: every element as its own scalar transform
    lb, ub = np.array([0.0, -INF, 1.0]), np.array([1.0, 2.0, INF])
    y, lj = T.LowerUpper().constrain(x, (3,), lb, ub)
    singles = [T.LowerUpper().constrain(x[i:i + 1], (), lb[i], ub[i]) for i in range(3)]
    np.testing.assert_allclose(y, [s[0] for s in singles], rtol=1e-15)
    assert lj == pytest.approx(sum(s[1] for s in singles), rel=1e-14)
    np.testing.assert_allclose(T.LowerUpper().unconstrain(y, (3,), lb, ub), x, rtol=1e-12)


def test_lower_not_below_upper_is_rejected():
    with pytest.raises(ValueError, match="lower bound 2 must be less than upper bound 1"):
        T.make("real", lower=2, upper=1)
    with pytest.raises(ValueError, match=r"lower bound 1 must be less than upper bound 1 at \[1\]"):
        T.make("vector", lower=np.array([0.0, 1.0]), upper=np.array([1.0, 1.0]))
    t = T.LowerUpper()
    for lb, ub in [(2.0, 1.0), (1.0, 1.0), (np.nan, 1.0), (INF, INF)]:
        with pytest.raises(sl.DomainError, match="must be less than upper bound"):
            t.constrain(np.zeros(1), (), lb, ub)
        with pytest.raises(ValueError, match="must be less than upper bound"):
            t.unconstrain(0.5, (), lb, ub)
        assert "must be less than upper bound" in t.check(0.5, (), lb, ub)
    # a traced bound that crosses the other: a DomainError (a sampler rejects the proposal)
    with pytest.raises(sl.DomainError, match=r"at \[1\]"):
        sl.grad(lambda v: t.constrain(v[:2], (2,), 0.0, v[2] * np.array([1.0, -1.0]))[1])(
            np.array([0.1, 0.2, 0.5]))
    assert issubclass(sl.DomainError, ValueError)


def test_bad_arguments():
    with pytest.raises(ValueError, match="expected an unconstrained vector of length 3"):
        T.Simplex().constrain(np.zeros(2), (4,))
    with pytest.raises(ValueError, match="does not broadcast"):
        T.Lower().constrain(np.zeros(3), (3,), np.zeros(2))
    with pytest.raises(sl.DomainError, match="multiplier must be positive"):
        T.OffsetMultiplier().constrain(np.zeros(2), (2,), 0.0, np.array([1.0, -2.0]))
    with pytest.raises(sl.DomainError, match="offset must be finite"):
        T.OffsetMultiplier().constrain(np.zeros(1), (), INF, 1.0)
    with pytest.raises(sl.DomainError, match="no direction"):
        T.UnitVector().constrain(np.zeros(3), (3,))
    with pytest.raises(ValueError, match="rows >= columns"):
        T.CholeskyFactorCov().free_size((2, 3))
    with pytest.raises(ValueError, match="square"):
        T.CorrMatrix().constrain(np.zeros(1), (2, 3))
    with pytest.raises(TypeError, match="takes no bounds"):
        T.Simplex().constrain(np.zeros(1), (2,), 0.0)
    with pytest.raises(TypeError, match="must be evaluated by the caller"):
        T.make("real", lower="a_name").constrain(np.zeros(1), ())


def test_make():
    assert isinstance(T.make("real"), T.Identity)
    assert isinstance(T.make("vector", lower=0), T.Lower)
    assert isinstance(T.make("matrix", upper=1), T.Upper)
    assert isinstance(T.make("array", lower=0, upper=lambda a: a), T.LowerUpper)
    assert isinstance(T.make("real", lower=0, upper=INF), T.LowerUpper)
    t = T.make("vector", offset=1.0)
    assert isinstance(t, T.OffsetMultiplier) and t.bound_names == ("offset",)
    assert T.make("vector", multiplier="s").bound_names == ("multiplier",)
    for kind, cls in [("simplex", T.Simplex), ("ordered", T.Ordered),
                      ("positive_ordered", T.PositiveOrdered), ("unit_vector", T.UnitVector),
                      ("cholesky_factor_corr", T.CholeskyFactorCorr),
                      ("cholesky_factor_cov", T.CholeskyFactorCov),
                      ("corr_matrix", T.CorrMatrix), ("cov_matrix", T.CovMatrix)]:
        t = T.make(kind)
        assert type(t) is cls and t.name == kind
    with pytest.raises(ValueError, match="takes no"):
        T.make("simplex", lower=0)
    with pytest.raises(ValueError, match="cannot be combined"):
        T.make("real", lower=0, multiplier=2)
    with pytest.raises(ValueError, match="unknown kind"):
        T.make("tensor")
    with pytest.raises(ValueError, match="multiplier must be positive"):
        T.make("real", multiplier=0.0)
    # declared numbers serve as defaults; bounds may also come as (lower, upper)
    x = np.array([0.0, 1.0])
    np.testing.assert_array_equal(T.make("vector", lower=1.0).constrain(x, (2,))[0],
                                  1.0 + np.exp(x))
    np.testing.assert_array_equal(T.Lower().constrain(x, (2,), 1.0, None)[0], 1.0 + np.exp(x))
    np.testing.assert_array_equal(T.Identity().constrain(x, (2,), None, None)[0], x)
    np.testing.assert_array_equal(T.Lower().constrain(x, (2,), [0, 1])[0], [1.0, 1.0 + np.e])
    y, lj = T.OffsetMultiplier(multiplier=2.0).constrain(x, (2,), None, 2.0)
    np.testing.assert_array_equal(y, 2 * x)


def test_empty_and_trivial_sizes():
    for t, shape in [(T.Identity(), (0,)), (T.Ordered(), (0,)), (T.Lower(), (0, 3)),
                     (T.Simplex(), (1,)), (T.CholeskyFactorCorr(), (1, 1)),
                     (T.CorrMatrix(), (1, 1))]:
        n = t.free_size(shape)
        bounds = (0.0,) if isinstance(t, T.Lower) else ()
        y, lj = t.constrain(np.zeros(n), shape, *bounds)
        assert np.shape(y) == shape and lj == 0.0
        assert t.unconstrain(y, shape, *bounds).shape == (n,)
    assert np.array_equal(T.Simplex().constrain(np.zeros(0), (1,))[0], [1.0])
    assert np.array_equal(T.CorrMatrix().constrain(np.zeros(0), (1, 1))[0], [[1.0]])


def test_extreme_unconstrained_values_stay_finite_and_in_set():
    x = np.array([-40.0, -5.0, 0.0, 5.0, 40.0])
    y, lj = T.LowerUpper().constrain(x, (5,), 0.0, 1.0)
    assert np.all((y >= 0) & (y <= 1)) and np.isfinite(lj)
    assert y[0] > 0 and 1 - y[3] == pytest.approx(1 / (1 + np.exp(5.0)), rel=1e-12)
    g = sl.grad(lambda v: T.LowerUpper().constrain(v, (5,), 0.0, 1.0)[1])(x)
    np.testing.assert_allclose(g, -np.tanh(x / 2), rtol=1e-12)    # d/dx log(s(1-s))
    y, lj = T.Simplex().constrain(np.array([30.0, -30.0, 0.0]), (4,))
    assert np.isfinite(lj) and T.Simplex().check(y, (4,)) is None
    L, lj = T.CholeskyFactorCorr().constrain(np.array([25.0, -25.0, 3.0]), (3, 3))
    assert np.isfinite(lj) and T.CholeskyFactorCorr().check(L, (3, 3)) is None
    g = sl.grad(lambda v: T.CorrMatrix().constrain(v, (3, 3))[1])(np.array([25.0, -25.0, 3.0]))
    assert np.all(np.isfinite(g))


def test_traced_input_gives_traced_outputs_and_plain_input_plain_outputs():
    seen = {}

    def f(x):
        y, lj = T.CovMatrix().constrain(x, (2, 2))
        seen["types"] = (type(y), type(lj))
        return sl.sum(y) + lj

    sl.grad(f)(np.array([0.1, 0.2, 0.3]))
    assert all(issubclass(c, sl.Box) for c in seen["types"])
    y, lj = T.CovMatrix().constrain(np.array([0.1, 0.2, 0.3]), (2, 2))
    assert type(y) is np.ndarray and type(lj) is float
