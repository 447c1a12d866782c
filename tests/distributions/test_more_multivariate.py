"""multi_normal_prec, multi_student_t_cholesky, lkj_cov, wishart_cholesky: values
against scipy.stats (multivariate_normal with the inverse, multivariate_t, wishart
plus the Jacobian of L -> L L^T) or the definition (lkj_cov: lognormal sds and
lkj_corr of the correlation), gradients w.r.t. every real argument and nested AD
against finite differences, closed-form matrix gradients, domain errors, rng moments
within Monte Carlo error (fixed seeds).

Constrained matrix arguments are differentiated through their free entries (the lower
triangle; a symmetric matrix moves (i, j) and (j, i) together), so differences stay
in the support and check the symmetric gradient convention."""

import numpy as np
import pytest
import scipy.stats as st

import stanlite as sl
from stanlite.autodiff.var import shape_of

K = 3


# --------------------------------------------------------------------------------------
# matrices from their free entries (plain and traced)
# --------------------------------------------------------------------------------------
def _embedding(k, symmetric):
    """(k*k, m) constant B with vec(M) = B u, u the lower triangle of M by rows."""
    pairs = [(i, j) for i in range(k) for j in range(i + 1)]
    B = np.zeros((k * k, len(pairs)))
    for c, (i, j) in enumerate(pairs):
        B[i * k + j, c] = 1.0
        if symmetric:
            B[j * k + i, c] = 1.0
    return B, pairs


def lower(M):
    return np.array([M[i, j] for i, j in _embedding(len(M), False)[1]])


def by_lower(fn, specs):
    """``fn`` with argument ``i`` given by its lower triangle, for ``i, symmetric`` in
    ``specs`` (a symmetric matrix or a lower-triangular one)."""
    def f(*a):
        a = list(a)
        for i, symmetric in specs.items():
            m = shape_of(a[i])[0]
            k = int(round((np.sqrt(8 * m + 1) - 1) / 2))
            a[i] = sl.reshape(sl.matmul(_embedding(k, symmetric)[0], a[i]), (k, k))
        return fn(*a)
    return f


def spd(rng, k=K):
    A = rng.normal(size=(k, k))
    return A @ A.T + k * np.eye(k)


def rows(x, n):
    x = np.asarray(x)
    return np.broadcast_to(x, (n, x.shape[-1])) if x.ndim == 1 else x


def n_vectors(*xs):
    return max([len(x) if np.ndim(x) == 2 else 1 for x in xs])


def mcse_close(draws, exact, n_se=4.0):
    """Per component |mean - exact| within n_se Monte Carlo standard errors."""
    draws = np.asarray(draws)
    se = draws.std(axis=0, ddof=1) / np.sqrt(len(draws))
    assert np.all(np.abs(draws.mean(axis=0) - exact) <= n_se * se), \
        (draws.mean(axis=0), exact, se)


SHAPES = [((K,), (K,)), ((4, K), (K,)), ((K,), (4, K)), ((4, K), (4, K))]


# --------------------------------------------------------------------------------------
# multi_normal_prec
# --------------------------------------------------------------------------------------
def _prec_ref(y, mu, O):
    n = n_vectors(y, mu)
    S = np.linalg.inv(O)
    return sum(st.multivariate_normal.logpdf(a, b, S) for a, b in zip(rows(y, n), rows(mu, n)))


@pytest.mark.parametrize("shapes", SHAPES)
def test_multi_normal_prec(check, rng, shapes):
    y, mu, O = rng.normal(size=shapes[0]), rng.normal(size=shapes[1]), spd(rng)
    check.value(sl.multi_normal_prec_lpdf, _prec_ref, (y, mu, O))
    fn = by_lower(sl.multi_normal_prec_lpdf, {2: True})
    check.all(fn, by_lower(_prec_ref, {2: True}), (y, mu, lower(O)), (0, 1, 2))
    # closed form, symmetric convention: 1/2 (N Omega^-1 - sum_n r_n r_n^T)
    R = rows(y, n_vectors(y, mu)) - mu
    G = sl.grad(lambda O_: sl.multi_normal_prec_lpdf(y, mu, O_))(O)
    np.testing.assert_allclose(G, 0.5 * (len(R) * np.linalg.inv(O) - R.T @ R),
                               rtol=1e-10, atol=1e-12)
    assert np.isclose(sl.multi_normal_prec_lpdf(y, mu, O),
                      sl.multi_normal_lpdf(y, mu, np.linalg.inv(O)), rtol=1e-12)


@pytest.mark.parametrize("shapes", SHAPES)
def test_multivariate_pointwise(check, rng, shapes):
    y, mu, S = rng.normal(size=shapes[0]), rng.normal(size=shapes[1]), spd(rng)
    L = np.linalg.cholesky(S)
    n = n_vectors(y, mu)
    batch = () if len(y.shape) == len(mu.shape) == 1 else (n,)
    want = st.multivariate_normal.logpdf(rows(y, n) - rows(mu, n), np.zeros(K), S)
    check.pointwise(sl.multi_normal_prec_lpdf, lambda *a: np.reshape(want, batch),
                    (y, mu, np.linalg.inv(S)), (0, 1))
    want = st.multivariate_t.logpdf(rows(y, n) - rows(mu, n), np.zeros(K), S, df=3.7)
    check.pointwise(sl.multi_student_t_cholesky_lpdf, lambda *a: np.reshape(want, batch),
                    (y, 3.7, mu, L), (0, 1, 2))
    # the matrix arguments through their free entries
    w = rng.uniform(0.5, 1.5, batch)
    f = by_lower(lambda y_, mu_, O_: sl.sum(w * sl.multi_normal_prec_lpdf(
        y_, mu_, O_, reduce=False)), {2: True})
    check.grad(f, (y, mu, lower(np.linalg.inv(S))), (2,))
    f = by_lower(lambda y_, nu, mu_, L_: sl.sum(w * sl.multi_student_t_cholesky_lpdf(
        y_, nu, mu_, L_, reduce=False)), {3: False})
    check.grad(f, (y, 3.7, mu, lower(L)), (3,))
    # a density of one matrix: its one value
    W = spd(rng)
    assert sl.lkj_cov_lpdf(W, 0.1, 0.9, 1.5, reduce=False) == sl.lkj_cov_lpdf(W, 0.1, 0.9, 1.5)
    LW = np.linalg.cholesky(W)
    assert (sl.wishart_cholesky_lpdf(LW, 4.5, L, reduce=False)
            == sl.wishart_cholesky_lpdf(LW, 4.5, L))
    with pytest.raises(sl.DomainError, match="lkj_cov_lpdf: sigma"):
        sl.lkj_cov_lpdf(W, 0.1, -0.9, 1.5, reduce=False)


def test_multi_normal_prec_checks(check, rng):
    y, mu, O = rng.normal(size=K), np.zeros(K), spd(rng)
    fn = sl.multi_normal_prec_lpdf
    asym = O.copy()
    asym[0, 2] += 1.0
    check.domain(fn, (y, mu, O), 2, asym, r"multi_normal_prec_lpdf: Omega must be symmetric")
    check.domain(fn, (y, mu, O), 2, -O, "Omega must be positive definite")
    check.domain(fn, (y, mu, O), 1, np.array([0.0, np.inf, 0.0]), r"mu\[1\]")
    check.domain(fn, (y, mu, O), 0, np.array([0.0, np.nan, 0.0]), "y")
    with pytest.raises(ValueError, match="Omega must be a square matrix"):
        fn(y, mu, np.ones((3, 2)))
    with pytest.raises(ValueError, match="y must be a vector of length 3"):
        fn(np.ones(2), mu, O)


# --------------------------------------------------------------------------------------
# multi_student_t_cholesky
# --------------------------------------------------------------------------------------
def _mvt_chol_ref(y, nu, mu, L):
    n = n_vectors(y, mu)
    S = L @ L.T
    return sum(st.multivariate_t.logpdf(a, b, S, df=nu)
               for a, b in zip(rows(y, n), rows(mu, n)))


@pytest.mark.parametrize("shapes", SHAPES)
def test_multi_student_t_cholesky(check, rng, shapes):
    y, mu = 2 * rng.normal(size=shapes[0]), rng.normal(size=shapes[1])
    L = np.linalg.cholesky(spd(rng))
    check.value(sl.multi_student_t_cholesky_lpdf, _mvt_chol_ref, (y, 3.7, mu, L))
    fn = by_lower(sl.multi_student_t_cholesky_lpdf, {3: False})
    check.all(fn, by_lower(_mvt_chol_ref, {3: False}), (y, 3.7, mu, lower(L)), (0, 1, 2, 3))
    assert np.isclose(sl.multi_student_t_cholesky_lpdf(y, 3.7, mu, L),
                      sl.multi_student_t_lpdf(y, 3.7, mu, L @ L.T), rtol=1e-12)
    # the gradient w.r.t. L is lower triangular
    G = sl.grad(lambda L_: sl.multi_student_t_cholesky_lpdf(y, 3.7, mu, L_))(L)
    assert np.all(np.triu(G, 1) == 0)


def test_multi_student_t_cholesky_checks(check, rng):
    y, mu, L = rng.normal(size=K), np.zeros(K), np.linalg.cholesky(spd(rng))
    fn = sl.multi_student_t_cholesky_lpdf
    check.domain(fn, (y, 4.0, mu, L), 3, L.T, r"L must be lower triangular, but L\[0, 1\]")
    neg = L.copy()
    neg[1, 1] = -1.0
    check.domain(fn, (y, 4.0, mu, L), 3, neg, r"L must have a positive diagonal")
    check.domain(fn, (y, 4.0, mu, L), 1, 0.0, "multi_student_t_cholesky_lpdf: nu")
    check.domain(fn, (y, 4.0, mu, L), 2, np.full(K, np.nan), "mu")
    with pytest.raises(sl.DomainError, match="multi_student_t_cholesky_rng: L"):
        sl.multi_student_t_cholesky_rng(4.0, mu, L.T)


def test_multi_student_t_cholesky_rng(rng):
    nu, n = 7.0, 40000
    L = np.linalg.cholesky(spd(rng) / 3)
    mu = np.array([1.0, -2.0, 0.5])
    d = sl.multi_student_t_cholesky_rng(nu, np.broadcast_to(mu, (n, K)), L, rng=31)
    assert d.shape == (n, K)
    mcse_close(d, mu)
    S = nu / (nu - 2) * L @ L.T                       # the covariance
    r = d - mu
    mcse_close(np.einsum("ni,nj->nij", r, r).reshape(n, -1), S.ravel())
    assert sl.multi_student_t_cholesky_rng(nu, mu, L, rng=1).shape == (K,)


# --------------------------------------------------------------------------------------
# lkj_cov
# --------------------------------------------------------------------------------------
def _lkj_cov_ref(W, mu, sigma, eta):
    sds = np.sqrt(np.diag(W))
    C = W / np.outer(sds, sds)
    return (np.sum(st.lognorm.logpdf(sds, s=sigma, scale=np.exp(mu)))
            + sl.lkj_corr_lpdf(C, eta))


@pytest.mark.parametrize("vectors", [False, True])
def test_lkj_cov(check, rng, vectors):
    W = spd(rng) / 2
    mu = rng.normal(size=K) * 0.3 if vectors else 0.2
    sigma = rng.uniform(0.5, 1.5, K) if vectors else 0.8
    for eta in (0.7, 1.0, 2.5):
        check.value(sl.lkj_cov_lpdf, _lkj_cov_ref, (W, mu, sigma, eta))
    fn = by_lower(sl.lkj_cov_lpdf, {0: True})
    ref = by_lower(_lkj_cov_ref, {0: True})
    check.all(fn, ref, (lower(W), mu, sigma, 1.8), (0, 1, 2, 3))


def test_lkj_cov_checks(check, rng):
    W = spd(rng)
    fn = sl.lkj_cov_lpdf
    check.domain(fn, (W, 0.0, 1.0, 2.0), 2, -1.0, "lkj_cov_lpdf: sigma")
    check.domain(fn, (W, 0.0, 1.0, 2.0), 1, np.inf, "mu")
    check.domain(fn, (W, 0.0, 1.0, 2.0), 3, 0.0, "eta")
    check.domain(fn, (W, 0.0, 1.0, 2.0), 0, -W, "W must be positive definite")
    with pytest.raises(ValueError, match=r"mu must be a scalar or have shape \(3,\)"):
        fn(W, np.zeros(2), 1.0, 2.0)


# --------------------------------------------------------------------------------------
# wishart_cholesky
# --------------------------------------------------------------------------------------
def _wishart_chol_ref(LW, nu, LS):
    k = len(LW)
    jac = k * np.log(2) + sum((k - i) * np.log(LW[i, i]) for i in range(k))
    return st.wishart.logpdf(LW @ LW.T, df=nu, scale=LS @ LS.T) + jac


def test_wishart_cholesky(check, rng):
    LW, LS = np.linalg.cholesky(spd(rng)), np.linalg.cholesky(spd(rng) / 4)
    for nu in (2.5, 6.3):
        check.value(sl.wishart_cholesky_lpdf, _wishart_chol_ref, (LW, nu, LS))
    fn = by_lower(sl.wishart_cholesky_lpdf, {0: False, 2: False})
    ref = by_lower(_wishart_chol_ref, {0: False, 2: False})
    check.all(fn, ref, (lower(LW), 4.2, lower(LS)), (0, 1, 2))
    # K = 1: L_W^2 ~ s^2 chi2(nu), so log p(l) = log chi2(l^2/s^2) + log(2 l / s^2)
    l, s, nu = 1.3, 0.7, 3.0
    want = st.chi2.logpdf(l * l / (s * s), nu) + np.log(2 * l / (s * s))
    assert np.isclose(sl.wishart_cholesky_lpdf([[l]], nu, [[s]]), want, rtol=1e-12)


def test_wishart_cholesky_rng_diagonal():
    """Bartlett: with L_S = diag(s), the factor's squared diagonal entries are
    s_k^2 chi2(nu - k) (0-based k), so E[L_kk^2] = s_k^2 (nu - k)."""
    nu, n = 5.5, 40000
    s = np.array([0.5, 1.0, 2.0])
    LW = sl.wishart_cholesky_rng(nu, np.diag(s), size=n, rng=41)
    d2 = np.diagonal(LW, axis1=1, axis2=2) ** 2
    mcse_close(d2, s ** 2 * (nu - np.arange(K)))


def test_wishart_cholesky_checks(check, rng):
    LW, LS = np.linalg.cholesky(spd(rng)), np.linalg.cholesky(spd(rng))
    fn = sl.wishart_cholesky_lpdf
    check.domain(fn, (LW, 4.0, LS), 0, LW.T, r"wishart_cholesky_lpdf: L_W must be lower")
    check.domain(fn, (LW, 4.0, LS), 2, -LS, "L_S must have a positive diagonal")
    check.domain(fn, (LW, 4.0, LS), 1, 2.0, "nu must be greater than K - 1 = 2")
    with pytest.raises(ValueError, match="L_S must be 3 x 3"):
        fn(LW, 4.0, np.eye(2))
    with pytest.raises(sl.DomainError, match="wishart_cholesky_rng: nu"):
        sl.wishart_cholesky_rng(1.0, LS)


def test_wishart_cholesky_rng(rng):
    S, nu, n = spd(rng) / 3, 6.0, 20000
    LS = np.linalg.cholesky(S)
    L = sl.wishart_cholesky_rng(nu, LS, size=n, rng=42)
    assert L.shape == (n, K, K)
    assert np.all(np.triu(L, 1) == 0) and np.all(np.diagonal(L, axis1=1, axis2=2) > 0)
    W = L @ np.swapaxes(L, 1, 2)
    mcse_close(W.reshape(n, -1), (nu * S).ravel())
    one = sl.wishart_cholesky_rng(nu, LS, rng=1)
    assert one.shape == (K, K)
