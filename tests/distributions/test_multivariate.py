"""Multivariate distributions: values against scipy.stats (or closed forms for LKJ),
gradients w.r.t. every real argument and nested AD (JVP, Hessian) against finite
differences, the symmetric-matrix gradient convention, vectorization, domain errors,
and rng moments (MCSE tolerances, fixed seeds).

Matrix arguments with constraints (symmetric, lower triangular, unit diagonal,
simplex) are differentiated through a linear parameterisation by free entries
(``u``), so finite differences stay inside the support: a symmetric matrix is built
from its lower triangle with the (i, j) and (j, i) entries moving together, which
checks the documented convention (gradient G symmetric, d/du_ij = G_ij + G_ji).
"""

import numpy as np
import pytest
import scipy.stats as st
from scipy.special import betaln

import stanlite as sl
from stanlite.autodiff.var import shape_of
from stanlite.models.synthetic import CorrelatedGaussian

K = 3


# --------------------------------------------------------------------------------------
# parameterisations of constrained matrices by free entries (plain and traced)
# --------------------------------------------------------------------------------------
def _basis(k, kind):
    """Constant (k*k, m) matrix B: vec(M) = B u for the free entries u of M."""
    pairs = [(i, j) for i in range(k) for j in range(i + 1)
             if kind != "offdiag" or i != j]
    B = np.zeros((k * k, len(pairs)))
    for c, (i, j) in enumerate(pairs):
        B[i * k + j, c] = 1.0
        if kind in ("sym", "offdiag"):
            B[j * k + i, c] = 1.0
    return B, pairs


def free(M, kind):
    """The free entries of M (lower triangle, with or without the diagonal)."""
    _, pairs = _basis(M.shape[0], kind)
    return np.array([M[i, j] for i, j in pairs])


def via(fn, specs):
    """fn with the matrix arguments ``specs = {index: kind}`` given by free entries."""
    def f(*a):
        a = list(a)
        for i, kind in specs.items():
            m = int(shape_of(a[i])[0])
            k = next(k for k in range(1, 20) if len(_basis(k, kind)[1]) == m)
            B, _ = _basis(k, kind)
            M = sl.reshape(sl.matmul(B, a[i]), (k, k))
            a[i] = M + np.eye(k) if kind == "offdiag" else M
        return fn(*a)
    f.__name__ = getattr(fn, "__name__", "f")
    return f


def spd(rng, k=K):
    A = rng.normal(size=(k, k))
    return A @ A.T + k * np.eye(k)


def corr(rng, k=K):
    S = spd(rng, k)
    d = 1.0 / np.sqrt(np.diag(S))
    C = S * d[:, None] * d[None, :]
    np.fill_diagonal(C, 1.0)
    return C


def rows(x, n):
    x = np.asarray(x)
    return np.broadcast_to(x, (n, x.shape[-1])) if x.ndim == 1 else x


def mse(draws, exact, n_sd=4.5):
    """|mean - exact| within n_sd Monte Carlo standard errors (per component)."""
    draws = np.asarray(draws)
    m = draws.mean(axis=0)
    se = draws.std(axis=0, ddof=1) / np.sqrt(draws.shape[0])
    assert np.all(np.abs(m - exact) <= n_sd * se + 1e-12), (m, exact, se)


SHAPES = [((K,), (K,)), ((4, K), (K,)), ((K,), (4, K)), ((4, K), (4, K))]


# --------------------------------------------------------------------------------------
# multi_normal, multi_normal_cholesky, multi_student_t
# --------------------------------------------------------------------------------------
def _mvn_ref(y, mu, S):
    n = max(np.ndim(y) == 2 and len(y) or 1, np.ndim(mu) == 2 and len(mu) or 1)
    return sum(st.multivariate_normal.logpdf(a, b, S) for a, b in zip(rows(y, n), rows(mu, n)))


@pytest.mark.parametrize("shapes", SHAPES)
def test_multi_normal(check, rng, shapes):
    y, mu, S = rng.normal(size=shapes[0]), rng.normal(size=shapes[1]), spd(rng)
    fn = via(sl.multi_normal_lpdf, {2: "sym"})
    ref = via(_mvn_ref, {2: "sym"})
    check.all(fn, ref, (y, mu, free(S, "sym")), (0, 1, 2))


@pytest.mark.parametrize("shapes", SHAPES)
def test_multi_normal_cholesky(check, rng, shapes):
    y, mu, S = rng.normal(size=shapes[0]), rng.normal(size=shapes[1]), spd(rng)
    L = np.linalg.cholesky(S)
    fn = via(sl.multi_normal_cholesky_lpdf, {2: "tril"})
    ref = via(lambda y, mu, L: _mvn_ref(y, mu, L @ L.T), {2: "tril"})
    check.all(fn, ref, (y, mu, free(L, "tril")), (0, 1, 2))
    # same value as the covariance form
    assert np.isclose(sl.multi_normal_cholesky_lpdf(y, mu, L), sl.multi_normal_lpdf(y, mu, S))


def _mvt_ref(y, nu, mu, S):
    n = max(np.ndim(y) == 2 and len(y) or 1, np.ndim(mu) == 2 and len(mu) or 1)
    return sum(st.multivariate_t.logpdf(a, b, S, df=nu) for a, b in zip(rows(y, n), rows(mu, n)))


@pytest.mark.parametrize("shapes", SHAPES)
def test_multi_student_t(check, rng, shapes):
    y, mu, S = rng.normal(size=shapes[0]) * 2, rng.normal(size=shapes[1]), spd(rng)
    fn = via(sl.multi_student_t_lpdf, {3: "sym"})
    ref = via(_mvt_ref, {3: "sym"})
    check.all(fn, ref, (y, 3.7, mu, free(S, "sym")), (0, 1, 2, 3))


def test_symmetric_gradient_convention(rng):
    """Documented convention: grad w.r.t. Sigma is the symmetric G of the formula with
    independent entries; moving (i, j) and (j, i) together by eps changes the log
    density by 2 eps G_ij (eps G_ii on the diagonal)."""
    y, mu, S = rng.normal(size=(5, K)), rng.normal(size=K), spd(rng)
    f = lambda S_: sl.multi_normal_lpdf(y, mu, S_)                      # noqa: E731
    G = sl.grad(f)(S)
    assert G.shape == (K, K)
    np.testing.assert_allclose(G, G.T, atol=1e-12)
    Si = np.linalg.inv(S)
    R = (y - mu).T
    want = 0.5 * (Si @ R @ R.T @ Si - len(y) * Si)
    np.testing.assert_allclose(G, want, rtol=1e-10, atol=1e-12)
    h = 1e-5
    for i in range(K):
        for j in range(i + 1):
            E = np.zeros((K, K))
            E[i, j] = E[j, i] = h
            fd = (f(S + E) - f(S - E)) / (2 * h)
            np.testing.assert_allclose(fd, G[i, j] * (1 if i == j else 2), rtol=1e-6)
    # the same gradient as composing the density from the math library
    def composed(S_):
        L = sl.cholesky_decompose(S_)
        z = sl.mdivide_left_tri_low(L, (y - mu).T)
        return -0.5 * sl.sum(z * z) - 0.5 * len(y) * sl.log_determinant_spd(S_)
    np.testing.assert_allclose(sl.grad(composed)(S), G, rtol=1e-10, atol=1e-12)
    # Cholesky-factor arguments: zeros above the diagonal
    GL = sl.grad(lambda L_: sl.multi_normal_cholesky_lpdf(y, mu, L_))(np.linalg.cholesky(S))
    assert np.all(np.triu(GL, 1) == 0)


def test_multi_normal_one_node_and_shared_factorisation():
    from stanlite.autodiff.tape import current_tape
    from stanlite.autodiff.var import Var
    y = np.ones((100, K))
    with sl.nested():
        t = current_tape()
        S = Var(np.eye(K) * 2.0)
        mu = Var(np.zeros(K))
        n0 = len(t.nodes)
        sl.multi_normal_lpdf(y, mu, S)
        sl.multi_student_t_lpdf(y, 4.0, mu, S)
        assert len(t.nodes) - n0 == 2


def test_multi_normal_edge_cases(rng):
    S = spd(rng)
    # an empty array of vectors contributes nothing
    assert sl.multi_normal_lpdf(np.zeros((0, K)), np.zeros(K), S) == 0.0
    # K = 1 reduces to the normal
    assert np.isclose(sl.multi_normal_lpdf([0.3], [0.1], [[4.0]]),
                      st.norm.logpdf(0.3, 0.1, 2.0))
    assert np.isclose(sl.multi_student_t_lpdf([0.3], 5.0, [0.1], [[4.0]]),
                      st.t.logpdf(0.3, 5.0, 0.1, 2.0))
    # lists are accepted
    assert np.isclose(sl.multi_normal_lpdf([1.0, 2.0], [0.0, 0.0], [[1.0, 0.0], [0.0, 1.0]]),
                      st.multivariate_normal.logpdf([1.0, 2.0], [0, 0], np.eye(2)))


def test_multi_normal_domain_errors(check, rng):
    y, mu, S = rng.normal(size=K), np.zeros(K), spd(rng)
    L = np.linalg.cholesky(S)
    asym = S.copy()
    asym[0, 1] += 0.1
    notpd = np.diag([1.0, -1.0, 1.0])
    for fn, a, si in ((sl.multi_normal_lpdf, (y, mu, S), 2),
                      (sl.multi_student_t_lpdf, (y, 3.0, mu, S), 3)):
        check.domain(fn, a, si, asym, "Sigma must be symmetric")
        check.domain(fn, a, si, notpd, "Sigma must be positive definite")
        check.domain(fn, a, si, np.full((K, K), np.nan), r"Sigma\[0, 0\]")
        check.domain(fn, a, 0, np.array([0.0, np.nan, 0.0]), r"y\[1\]")
        check.domain(fn, a, si - 1, np.array([0.0, np.inf, 0.0]), r"mu\[1\]")
    check.domain(sl.multi_student_t_lpdf, (y, 3.0, mu, S), 1, 0.0, "nu")
    check.domain(sl.multi_student_t_lpdf, (y, 3.0, mu, S), 1, np.inf, "nu")
    upper = L.copy()
    upper[0, 2] = 0.5
    negd = L.copy()
    negd[1, 1] = -1.0
    check.domain(sl.multi_normal_cholesky_lpdf, (y, mu, L), 2, upper,
                 r"L must be lower triangular, but L\[0, 2\]")
    check.domain(sl.multi_normal_cholesky_lpdf, (y, mu, L), 2, negd,
                 r"L must have a positive diagonal, but L\[1, 1\]")
    with pytest.raises(ValueError, match="mu"):
        sl.multi_normal_lpdf(y, np.zeros(K + 1), S)
    with pytest.raises(ValueError, match="different numbers"):
        sl.multi_normal_lpdf(np.zeros((2, K)), np.zeros((3, K)), S)
    with pytest.raises(ValueError, match="square"):
        sl.multi_normal_lpdf(y, mu, np.ones((K, K + 1)))


def test_multi_normal_rng(rng):
    mu, S = np.array([1.0, -2.0, 0.5]), spd(rng)
    n = 20000
    d = sl.multi_normal_rng(np.tile(mu, (n, 1)), S, rng=1)
    assert d.shape == (n, K)
    mse(d, mu)
    c = d - mu
    mse((c[:, :, None] * c[:, None, :]).reshape(n, -1), S.ravel())
    assert sl.multi_normal_rng(mu, S, rng=2).shape == (K,)
    L = np.linalg.cholesky(S)
    d2 = sl.multi_normal_cholesky_rng(np.tile(mu, (n, 1)), L, rng=3)
    mse(d2, mu)
    c = d2 - mu
    mse((c[:, :, None] * c[:, None, :]).reshape(n, -1), S.ravel())
    # the same stream gives the same draws in both parameterisations
    np.testing.assert_allclose(sl.multi_normal_rng(mu, S, rng=7),
                               sl.multi_normal_cholesky_rng(mu, L, rng=7))
    with pytest.raises(sl.DomainError, match="Sigma"):
        sl.multi_normal_rng(mu, -S, rng=1)


def test_multi_student_t_rng(rng):
    mu, S, nu = np.array([1.0, -2.0, 0.5]), spd(rng), 9.0
    n = 40000
    d = sl.multi_student_t_rng(nu, np.tile(mu, (n, 1)), S, rng=4)
    assert d.shape == (n, K)
    mse(d, mu)
    c = d - mu
    mse((c[:, :, None] * c[:, None, :]).reshape(n, -1), (nu / (nu - 2) * S).ravel())
    # the radial part: q = r^T S^-1 r / K ~ F(K, nu)
    q = np.einsum("ni,ij,nj->n", c, np.linalg.inv(S), c) / K
    assert st.kstest(q, st.f(K, nu).cdf).pvalue > 1e-3
    assert sl.multi_student_t_rng(nu, mu, S, rng=2).shape == (K,)
    with pytest.raises(sl.DomainError, match="nu"):
        sl.multi_student_t_rng(-1.0, mu, S)


# --------------------------------------------------------------------------------------
# dirichlet
# --------------------------------------------------------------------------------------
def _simplex(rng, shape):
    x = rng.uniform(0.2, 1.0, size=shape)
    return x / x.sum(axis=-1, keepdims=True)


def _dirichlet_ref(theta, alpha):
    n = max(np.ndim(theta) == 2 and len(theta) or 1, np.ndim(alpha) == 2 and len(alpha) or 1)
    return sum(st.dirichlet.logpdf(t, a) for t, a in zip(rows(theta, n), rows(alpha, n)))


@pytest.mark.parametrize("shapes", SHAPES)
def test_dirichlet(check, rng, shapes):
    theta0 = _simplex(rng, shapes[0])
    alpha = rng.uniform(0.5, 3.0, size=shapes[1])
    # theta moves in the simplex's tangent space: theta0 + u C, C = I - 11^T/K
    C = np.eye(K) - 1.0 / K

    def on_simplex(f):
        return lambda u, a: f(theta0 + u @ C, a)
    u0 = np.zeros(shapes[0])
    check.value(sl.dirichlet_lpdf, _dirichlet_ref, (theta0, alpha))
    check.grad(on_simplex(sl.dirichlet_lpdf), (u0, alpha), (0, 1))
    check.nested(on_simplex(sl.dirichlet_lpdf), (u0, alpha), (0, 1))
    # the full (unconstrained, Stan's) gradient w.r.t. theta is (alpha - 1)/theta
    g = sl.grad(lambda t: sl.dirichlet_lpdf(t, alpha))(theta0)
    want = np.broadcast_to((alpha - 1) / theta0, np.broadcast_shapes(theta0.shape, alpha.shape))
    np.testing.assert_allclose(g, want.sum(axis=0) if g.ndim < want.ndim else want,
                               rtol=1e-12)


def test_dirichlet_domain_errors(check):
    th, al = np.array([0.2, 0.3, 0.5]), np.array([1.0, 2.0, 3.0])
    check.domain(sl.dirichlet_lpdf, (th, al), 0, np.array([0.2, 0.3, 0.6]),
                 "theta must be a simplex, but it sums to")
    check.domain(sl.dirichlet_lpdf, (th, al), 0, np.array([-0.2, 0.7, 0.5]),
                 r"theta must be a simplex, but theta\[0\]")
    check.domain(sl.dirichlet_lpdf, (th, al), 0, np.array([[0.2, 0.3, 0.5], [0.5, 0.5, 0.5]]),
                 r"theta\[1\] must be a simplex")
    check.domain(sl.dirichlet_lpdf, (th, al), 1, np.array([1.0, 0.0, 3.0]), r"alpha\[1\]")
    with pytest.raises(ValueError, match="do not match"):
        sl.dirichlet_lpdf(th, np.ones(4))


def test_dirichlet_rng():
    alpha = np.array([0.5, 2.0, 3.5])
    n = 20000
    d = sl.dirichlet_rng(np.tile(alpha, (n, 1)), rng=5)
    a0 = alpha.sum()
    np.testing.assert_allclose(d.sum(axis=1), 1.0)
    mse(d, alpha / a0)
    mse(d * d, alpha * (alpha + 1) / (a0 * (a0 + 1)))
    big = np.array([2.0, 5.0])                                   # the gamma branch
    d = sl.dirichlet_rng(np.tile(big, (n, 1)), rng=6)
    mse(d[:, 0], 2.0 / 7.0)
    assert st.kstest(d[:, 0], st.beta(2.0, 5.0).cdf).pvalue > 1e-3
    # tiny concentrations: still a simplex, no NaN (log-space draws)
    t = sl.dirichlet_rng(np.array([1e-3, 2e-3, 1e-3]), rng=1)
    assert t.shape == (3,) and np.all(np.isfinite(t)) and np.isclose(t.sum(), 1.0)
    d = sl.dirichlet_rng(np.tile([0.1, 0.1], (n, 1)), rng=8)
    assert st.kstest(d[:, 0], st.beta(0.1, 0.1).cdf).pvalue > 1e-3


# --------------------------------------------------------------------------------------
# LKJ
# --------------------------------------------------------------------------------------
def _lkj_log_c3(eta):
    """-log of the integral of det^(eta-1) over 3x3 correlation matrices:
    integrating the last correlation first (det is quadratic in it),
    c_3(eta) = B(1/2, eta) B(1/2, eta + 1/2)^2."""
    return -(betaln(0.5, eta) + 2 * betaln(0.5, eta + 0.5))


@pytest.mark.parametrize("eta", [0.4, 1.0, 2.5])
def test_lkj_corr_values(eta, rng):
    # K = 2: r = 2 Beta(eta, eta) - 1
    for r in (-0.7, 0.0, 0.35):
        want = st.beta.logpdf((r + 1) / 2, eta, eta) - np.log(2)
        assert np.isclose(sl.lkj_corr_lpdf(np.array([[1.0, r], [r, 1.0]]), eta), want,
                          rtol=1e-12)
    # K = 3 against the closed-form normalising constant
    Om = corr(rng)
    want = _lkj_log_c3(eta) + (eta - 1) * np.linalg.slogdet(Om)[1]
    assert np.isclose(sl.lkj_corr_lpdf(Om, eta), want, rtol=1e-12)
    # the Cholesky form: LkjCorr(L L^T) times the Jacobian prod_k L_kk^(K-k)
    for k in (2, 3, 5):
        Om = corr(rng, k)
        L = np.linalg.cholesky(Om)
        jac = np.sum((k - np.arange(1, k + 1)) * np.log(np.diag(L)))
        assert np.isclose(sl.lkj_corr_cholesky_lpdf(L, eta), sl.lkj_corr_lpdf(Om, eta) + jac,
                          rtol=1e-12)
    # K = 1: a point mass
    assert sl.lkj_corr_lpdf(np.eye(1), eta) == 0.0


def test_lkj_known_volumes():
    # eta = 1: uniform; the volumes of the 3x3 and 4x4 elliptopes are pi^2/2, 32 pi^2/27
    assert np.isclose(sl.lkj_corr_lpdf(np.eye(3), 1.0), -np.log(np.pi ** 2 / 2), rtol=1e-14)
    assert np.isclose(sl.lkj_corr_lpdf(np.eye(4), 1.0), -np.log(32 * np.pi ** 2 / 27),
                      rtol=1e-14)
    # continuity across eta = 1 (Stan has a separate eta == 1 branch)
    for k in (2, 3, 4, 7):
        v = [sl.lkj_corr_lpdf(np.eye(k), e) for e in (1 - 1e-9, 1.0, 1 + 1e-9)]
        assert np.allclose(v, v[1], atol=1e-7)


@pytest.mark.parametrize("eta", [1.0, 2.5])
def test_lkj_normalises_k4_monte_carlo(eta):
    """exp(lkj_corr_lpdf(I)) * integral of det^(eta-1) over 4x4 correlation matrices = 1,
    the integral by uniform sampling of the 6 correlations in the cube [-1, 1]^6."""
    k, n = 4, 200000
    g = np.random.default_rng(11)
    r = g.uniform(-1, 1, size=(n, 6))
    M = np.tile(np.eye(k), (n, 1, 1))
    iu = np.tril_indices(k, -1)
    M[:, iu[0], iu[1]] = r
    M[:, iu[1], iu[0]] = r
    pd = (1 - r[:, 0] ** 2 > 0) & (np.linalg.det(M[:, :3, :3]) > 0) & (np.linalg.det(M) > 0)
    f = np.where(pd, np.abs(np.linalg.det(M)) ** (eta - 1), 0.0) * 2.0 ** 6
    c = np.exp(sl.lkj_corr_lpdf(np.eye(k), eta))
    est, se = c * f.mean(), c * f.std(ddof=1) / np.sqrt(n)
    assert abs(est - 1.0) < 4.5 * se, (est, se)


@pytest.mark.parametrize("eta", [0.8, 2.3])
def test_lkj_corr_gradients(check, rng, eta):
    Om = corr(rng)
    ref = via(lambda O, e: _lkj_log_c3(e) + (e - 1) * np.linalg.slogdet(O)[1], {0: "offdiag"})
    check.all(via(sl.lkj_corr_lpdf, {0: "offdiag"}), ref, (free(Om, "offdiag"), eta), (0, 1))
    # closed form of the gradient (symmetric convention)
    G = sl.grad(lambda O: sl.lkj_corr_lpdf(O, eta))(Om)
    np.testing.assert_allclose(G, (eta - 1) * np.linalg.inv(Om), rtol=1e-10, atol=1e-12)
    # eta gradient at a different K
    Om5 = corr(rng, 5)
    check.grad(sl.lkj_corr_lpdf, (Om5, eta), (1,))


@pytest.mark.parametrize("eta", [0.8, 1.0, 2.3])
def test_lkj_corr_cholesky_gradients(check, rng, eta):
    k = 4
    L = np.linalg.cholesky(corr(rng, k))

    def ref(L_, e):
        d = np.log(np.diag(L_))[1:]
        return (sl.lkj_corr_lpdf(np.eye(k), e)
                + np.sum((k - np.arange(2, k + 1) + 2 * e - 2) * d))
    check.all(via(sl.lkj_corr_cholesky_lpdf, {0: "tril"}), via(ref, {0: "tril"}),
              (free(L, "tril"), eta), (0, 1))
    G = sl.grad(lambda L_: sl.lkj_corr_cholesky_lpdf(L_, eta))(L)
    want = np.diag(np.r_[0.0, (k - np.arange(2, k + 1) + 2 * eta - 2) / np.diag(L)[1:]])
    np.testing.assert_allclose(G, want, rtol=1e-12)


def test_lkj_domain_errors(check, rng):
    Om = corr(rng)
    bad = Om.copy()
    bad[1, 1] = 1.1
    check.domain(sl.lkj_corr_lpdf, (Om, 2.0), 0, bad, r"Omega must be a correlation matrix "
                                                      r"\(unit diagonal\), but Omega\[1, 1\]")
    asym = Om.copy()
    asym[0, 2] += 0.01
    check.domain(sl.lkj_corr_lpdf, (Om, 2.0), 0, asym, "Omega must be symmetric")
    notpd = np.array([[1.0, 0.9, -0.9], [0.9, 1.0, 0.9], [-0.9, 0.9, 1.0]])
    check.domain(sl.lkj_corr_lpdf, (Om, 2.0), 0, notpd, "Omega must be positive definite")
    check.domain(sl.lkj_corr_lpdf, (Om, 2.0), 1, 0.0, "eta")
    L = np.linalg.cholesky(Om)
    check.domain(sl.lkj_corr_cholesky_lpdf, (L, 2.0), 0, L.T, "L must be lower triangular")
    check.domain(sl.lkj_corr_cholesky_lpdf, (L, 2.0), 0, -L, "L must have a positive diagonal")
    check.domain(sl.lkj_corr_cholesky_lpdf, (L, 2.0), 1, -1.0, "eta")
    with pytest.raises(sl.DomainError, match="eta"):
        sl.lkj_corr_rng(3, 0.0)
    with pytest.raises(sl.DomainError, match="K"):
        sl.lkj_corr_cholesky_rng(0, 1.0)


@pytest.mark.parametrize("k,eta", [(2, 0.7), (4, 2.0), (5, 1.0)])
def test_lkj_rng(k, eta):
    n = 20000
    L = sl.lkj_corr_cholesky_rng(k, eta, size=n, rng=9)
    assert L.shape == (n, k, k)
    assert np.all(np.triu(L, 1) == 0) and np.all(np.diagonal(L, axis1=1, axis2=2) > 0)
    np.testing.assert_allclose(np.sum(L * L, axis=2), 1.0, atol=1e-12)
    Om = sl.lkj_corr_rng(k, eta, size=n, rng=9)
    np.testing.assert_allclose(Om, L @ np.swapaxes(L, 1, 2), atol=1e-12)
    # every off-diagonal correlation is 2 Beta(b, b) - 1, b = eta - 1 + K/2
    b = eta - 1 + k / 2
    for i, j in [(1, 0), (k - 1, 0), (k - 1, k - 2)]:
        r = Om[:, i, j]
        mse(r, 0.0)
        mse(r * r, 1.0 / (2 * b + 1))
        assert st.kstest((r + 1) / 2, st.beta(b, b).cdf).pvalue > 1e-3
    # single draws
    one = sl.lkj_corr_rng(k, eta, rng=1)
    assert one.shape == (k, k) and np.all(np.diag(one) == 1.0)
    np.linalg.cholesky(one)


def test_lkj_rng_matches_density_k3():
    """The draws follow the density: E[det^(eta' - eta)] under LkjCorr(eta) equals
    c_3(eta') / c_3(eta) (closed form), for eta = 1.5, eta' = 2.5."""
    eta, eta2, n = 1.5, 2.5, 20000
    Om = sl.lkj_corr_rng(3, eta, size=n, rng=10)
    f = np.linalg.det(Om) ** (eta2 - eta)
    mse(f, np.exp(_lkj_log_c3(eta) - _lkj_log_c3(eta2)))


# --------------------------------------------------------------------------------------
# wishart, inv_wishart
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["wishart", "inv_wishart"])
def test_wishart_values_and_gradients(check, rng, name):
    fn = getattr(sl, f"{name}_lpdf")
    dist = {"wishart": st.wishart, "inv_wishart": st.invwishart}[name]
    W, S = spd(rng), spd(rng)
    ref = lambda W_, nu, S_: dist.logpdf(W_, df=nu, scale=S_)           # noqa: E731
    for nu in (2.5, 6.3):
        check.value(fn, ref, (W, nu, S))
    f = via(fn, {0: "sym", 2: "sym"})
    check.all(f, via(ref, {0: "sym", 2: "sym"}), (free(W, "sym"), 4.2, free(S, "sym")),
              (0, 1, 2))
    # closed forms (symmetric convention)
    nu = 4.2
    Wi, Si = np.linalg.inv(W), np.linalg.inv(S)
    gW = sl.grad(lambda W_: fn(W_, nu, S))(W)
    gS = sl.grad(lambda S_: fn(W, nu, S_))(S)
    if name == "wishart":
        wW, wS = 0.5 * ((nu - K - 1) * Wi - Si), 0.5 * (Si @ W @ Si - nu * Si)
    else:
        wW, wS = 0.5 * (Wi @ S @ Wi - (nu + K + 1) * Wi), 0.5 * (nu * Si - Wi)
    np.testing.assert_allclose(gW, wW, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gS, wS, rtol=1e-10, atol=1e-12)
    # K = 1: Wishart(nu, s) is s * chi2(nu), inverse Wishart is InvGamma(nu/2, s/2)
    if name == "wishart":
        want = st.chi2.logpdf(1.7 / 0.8, 3.0) - np.log(0.8)
    else:
        want = st.invgamma.logpdf(1.7, 1.5, scale=0.4)
    assert np.isclose(fn([[1.7]], 3.0, [[0.8]]), want, rtol=1e-12)


@pytest.mark.parametrize("name", ["wishart", "inv_wishart"])
def test_wishart_domain_errors(check, rng, name):
    fn = getattr(sl, f"{name}_lpdf")
    W, S = spd(rng), spd(rng)
    asym = W.copy()
    asym[2, 0] += 1.0
    check.domain(fn, (W, 4.0, S), 0, asym,
                 r"W must be symmetric, but W\[0, 2\] = .* and W\[2, 0\]")
    check.domain(fn, (W, 4.0, S), 2, -S, "Sigma must be positive definite")
    check.domain(fn, (W, 4.0, S), 0, -W, "W must be positive definite")
    check.domain(fn, (W, 4.0, S), 1, 2.0, "nu must be greater than K - 1 = 2")
    check.domain(fn, (W, 4.0, S), 1, np.nan, "nu")
    with pytest.raises(ValueError, match="Sigma must be 3 x 3"):
        fn(W, 4.0, np.eye(2))
    with pytest.raises(sl.DomainError, match="nu"):
        getattr(sl, f"{name}_rng")(1.0, S)


def test_wishart_rng(rng):
    S, nu, n = spd(rng) / 3, 6.0, 20000
    W = sl.wishart_rng(nu, S, size=n, rng=12)
    assert W.shape == (n, K, K)
    np.testing.assert_array_equal(W, np.swapaxes(W, 1, 2))
    mse(W.reshape(n, -1), (nu * S).ravel())
    # Var(W_ij) = nu (S_ij^2 + S_ii S_jj)
    var = nu * (S ** 2 + np.outer(np.diag(S), np.diag(S)))
    mse(((W - nu * S) ** 2).reshape(n, -1), var.ravel())
    one = sl.wishart_rng(nu, S, rng=1)
    assert one.shape == (K, K)
    np.linalg.cholesky(one)


def test_inv_wishart_rng(rng):
    S, nu, n = spd(rng), 9.0, 20000
    W = sl.inv_wishart_rng(nu, S, size=n, rng=13)
    assert W.shape == (n, K, K)
    np.testing.assert_array_equal(W, np.swapaxes(W, 1, 2))
    mse(W.reshape(n, -1), (S / (nu - K - 1)).ravel())
    # its inverse is Wishart(nu, S^-1)
    Wi = np.linalg.inv(W)
    mse(Wi.reshape(n, -1), (nu * np.linalg.inv(S)).ravel())
    one = sl.inv_wishart_rng(nu, S, rng=1)
    assert one.shape == (K, K)
    np.linalg.cholesky(one)


def test_constant_matrices_are_checked_and_factorised_once(monkeypatch):
    # model data is read-only: its checks/Cholesky run once; writable arrays every time
    from stanlite.distributions import multivariate as mv
    calls = []
    real = mv._chol_now
    monkeypatch.setattr(mv, "_chol_now", lambda *a: calls.append(1) or real(*a))
    S = np.array([[2.0, 0.5], [0.5, 1.0]])
    y = np.array([0.3, -0.2])
    want = sl.multi_normal_lpdf(y, np.zeros(2), S)
    for _ in range(3):
        assert sl.multi_normal_lpdf(y, np.zeros(2), S) == want
    assert len(calls) == 4                      # writable: every call
    S.setflags(write=False)
    calls.clear()
    for _ in range(3):
        assert sl.multi_normal_lpdf(y, np.zeros(2), S) == want
    assert len(calls) == 1
    # the cached factor is shared, so it is read-only
    L = mv._chol("multi_normal_lpdf", "Sigma", S)
    assert not L.flags.writeable
    # a bad constant matrix still raises, every time (nothing cached on failure)
    B = np.array([[1.0, 2.0], [0.0, 1.0]])
    B.setflags(write=False)
    for _ in range(2):
        with pytest.raises(sl.DomainError, match="lower triangular"):
            sl.multi_normal_cholesky_lpdf(y, np.zeros(2), B)


def test_model_data_matrices_are_read_only():
    L = np.linalg.cholesky(np.array([[2.0, 0.5], [0.5, 1.0]]))
    m = CorrelatedGaussian(D=2, m=np.zeros(2), L=L)
    assert not m.L.flags.writeable and L.flags.writeable     # a copy; the user's untouched
    with pytest.raises(ValueError):
        m.L[0, 0] = 3.0
