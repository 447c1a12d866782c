"""Issue 21's linear algebra: qr_thin_Q/R, svd_U/V, singular_values, matrix_power,
csr_matrix_times_vector (and csr_extract), gp_exponential/matern32/matern52/periodic
covariances, norm1/norm2, and numpy's outer/clip/flip/linalg.norm/qr/svd/matrix_power
on traced values: values against numpy/scipy and closed forms, gradients (reverse and
forward) against central differences, Hessians, errors."""

import doctest

import numpy as np
import pytest
from scipy.spatial.distance import cdist

import stanlite as sl

SHAPES = [(4, 3), (3, 3), (2, 4), (5, 1)]


def _weights(shape, seed):
    return np.random.default_rng(seed).normal(size=shape)


def _all_orders(f, x):
    """f's gradient (reverse), JVP (forward) and Hessian against differences."""
    assert sl.check_grad(f, x).passed
    assert sl.check_jvp(f, x).passed
    shape = np.shape(x)
    assert sl.check_hessian(lambda v: f(sl.reshape(v, shape)), np.ravel(x),
                            rtol=1e-5, atol=1e-6).passed


# --------------------------------------------------------------------------------------
# QR
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES)
def test_qr_values(shape):
    A = _weights(shape, 1)
    Q, R = sl.qr_thin_Q(A), sl.qr_thin_R(A)
    k = min(shape)
    assert Q.shape == (shape[0], k) and R.shape == (k, shape[1])
    np.testing.assert_allclose(Q @ R, A, atol=1e-13)
    np.testing.assert_allclose(Q.T @ Q, np.eye(k), atol=1e-13)
    assert np.all(np.diag(R) >= 0) and np.all(np.tril(R, -1) == 0)
    q, r = np.linalg.qr(A)          # numpy's factors, up to the signs of diag(R)
    s = np.sign(np.diag(r))
    np.testing.assert_allclose(Q, q * s, atol=1e-13)
    np.testing.assert_allclose(R, r * s[:, None], atol=1e-13)


@pytest.mark.parametrize("shape", SHAPES)
def test_qr_derivatives(shape):
    A = _weights(shape, 2)
    W1 = _weights((shape[0], min(shape)), 3)
    W2 = _weights((min(shape), shape[1]), 4)
    _all_orders(lambda a: sl.sum(sl.qr_thin_Q(a) * W1) + sl.sum(sl.qr_thin_R(a) * W2), A)


def test_qr_errors():
    with pytest.raises(ValueError, match="qr_thin_Q: A must be a matrix"):
        sl.qr_thin_Q(np.ones(3))
    with pytest.raises(sl.DomainError, match="qr_thin_Q: A contains NaN"):
        sl.qr_thin_Q(np.full((2, 2), np.nan))
    # rank deficient: the value exists, the derivative does not (R is singular)
    A = np.array([[1.0, 2.0], [2.0, 4.0], [0.0, 0.0]])
    with pytest.raises(sl.DomainError, match="qr_thin_Q: the derivative needs .* R is "
                                             "singular"):
        sl.grad(lambda a: sl.sum(sl.qr_thin_Q(a)))(A)


# --------------------------------------------------------------------------------------
# SVD
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES)
def test_svd_values(shape):
    A = _weights(shape, 5)
    U, s, V = sl.svd_U(A), sl.singular_values(A), sl.svd_V(A)
    k = min(shape)
    assert U.shape == (shape[0], k) and V.shape == (shape[1], k) and s.shape == (k,)
    np.testing.assert_allclose(s, np.linalg.svd(A, compute_uv=False), rtol=1e-13)
    np.testing.assert_allclose((U * s) @ V.T, A, atol=1e-13)
    np.testing.assert_allclose(U.T @ U, np.eye(k), atol=1e-13)
    np.testing.assert_allclose(V.T @ V, np.eye(k), atol=1e-13)
    # the sign convention: each column of U has its largest-magnitude entry positive
    assert np.all(U[np.argmax(np.abs(U), axis=0), np.arange(k)] > 0)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("which", ["singular_values", "svd_U", "svd_V"])
def test_svd_derivatives(shape, which):
    fn = getattr(sl, which)
    A = _weights(shape, 6)
    W = _weights(np.shape(fn(A)), 7)
    _all_orders(lambda a: sl.sum(fn(a) * W), A)


def test_singular_values_closed_forms():
    A = _weights((4, 3), 8)
    u, s, vt = np.linalg.svd(A, full_matrices=False)
    # d s_i / dA = u_i v_i^T
    for i in range(3):
        g = sl.grad(lambda a: sl.singular_values(a)[i])(A)
        np.testing.assert_allclose(g, np.outer(u[:, i], vt[i]), atol=1e-12)
    # the nuclear norm at a repeated singular value: gradient U V^T = I (first order
    # does not need distinct values)
    np.testing.assert_allclose(sl.grad(lambda a: sl.sum(sl.singular_values(a)))(
        2.0 * np.eye(3)), np.eye(3), atol=1e-14)


def test_svd_vectors_need_distinct_singular_values():
    with pytest.raises(sl.DomainError, match="svd_U: the derivative needs distinct "
                                             "singular values"):
        sl.grad(lambda a: sl.sum(sl.svd_U(a)))(np.diag([2.0, 2.0, 1.0]))
    with pytest.raises(sl.DomainError, match="svd_V: the derivative needs distinct"):
        sl.jacobian(lambda a: sl.svd_V(a)[0])(np.eye(2))
    A = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])     # tall, singular value 0
    with pytest.raises(sl.DomainError, match="non-zero singular values"):
        sl.grad(lambda a: sl.sum(sl.svd_U(a)))(A)
    with pytest.raises(sl.DomainError, match="svd_U: A contains NaN"):
        sl.svd_U(np.full((2, 2), np.nan))


# --------------------------------------------------------------------------------------
# matrix_power
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [0, 1, 2, 3, 6, 11])
def test_matrix_power(n):
    A = 0.6 * _weights((3, 3), 9)
    np.testing.assert_allclose(sl.matrix_power(A, n), np.linalg.matrix_power(A, n),
                               rtol=1e-12, atol=1e-14)
    if n:
        W = _weights((3, 3), 10)
        _all_orders(lambda a: sl.sum(sl.matrix_power(a, n) * W), A)
    else:
        assert sl.grad(lambda a: sl.sum(sl.matrix_power(a, 0)))(A).tolist() == \
            np.zeros((3, 3)).tolist()


def test_matrix_power_errors():
    with pytest.raises(sl.DomainError, match="matrix_power: n must be non-negative"):
        sl.matrix_power(np.eye(2), -1)
    with pytest.raises(ValueError, match="matrix_power: n must be an integer"):
        sl.matrix_power(np.eye(2), 1.5)
    with pytest.raises(ValueError, match="matrix_power"):
        sl.matrix_power(np.ones((2, 3)), 2)
    assert sl.matrix_power(np.eye(2), 2.0).shape == (2, 2)


# --------------------------------------------------------------------------------------
# CSR
# --------------------------------------------------------------------------------------
DENSE = np.array([[1.0, 0.0, 2.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 3.0, -1.0, 4.0]])


def test_csr_extract_and_product():
    w, v, u = sl.csr_extract(DENSE)
    assert w.tolist() == [1.0, 2.0, 3.0, -1.0, 4.0]
    assert v.tolist() == [1, 3, 2, 3, 4] and u.tolist() == [1, 3, 3, 6]
    b = _weights(4, 11)
    np.testing.assert_allclose(sl.csr_matrix_times_vector(3, 4, w, v, u, b), DENSE @ b,
                               rtol=1e-14)
    np.testing.assert_allclose(sl.csr_matrix_times_vector(3, 4, list(w), list(v), list(u),
                                                          list(b)), DENSE @ b, rtol=1e-14)


def test_csr_derivatives():
    w, v, u = sl.csr_extract(DENSE)
    b = _weights(4, 12)
    y = _weights(3, 13)

    def f(z):
        return sl.sum((sl.csr_matrix_times_vector(3, 4, z[:5], v, u, z[5:]) - y) ** 2)
    _all_orders(f, np.concatenate([w, b]))
    # closed form: d/db sum(g * A b) = A^T g
    g = sl.grad(lambda b_: sl.sum(sl.csr_matrix_times_vector(3, 4, w, v, u, b_) * y))(b)
    np.testing.assert_allclose(g, DENSE.T @ y, rtol=1e-14)


def test_csr_errors():
    w, v, u = sl.csr_extract(DENSE)
    b = np.ones(4)
    with pytest.raises(ValueError, match="u must have m \\+ 1 = 4 elements"):
        sl.csr_matrix_times_vector(3, 4, w, v, u[:-1], b)
    with pytest.raises(ValueError, match="v \\(column indices\\) must be in 1..n"):
        sl.csr_matrix_times_vector(3, 4, w, np.array([1, 3, 2, 3, 5]), u, b)
    with pytest.raises(ValueError, match="b must be a vector of size n = 4"):
        sl.csr_matrix_times_vector(3, 4, w, v, u, np.ones(3))
    with pytest.raises(ValueError, match="v and w must have the same size"):
        sl.csr_matrix_times_vector(3, 4, w[:4], v, u, b)
    with pytest.raises(ValueError, match="u must be non-decreasing"):
        sl.csr_matrix_times_vector(3, 4, w, v, np.array([1, 4, 3, 6]), b)


# --------------------------------------------------------------------------------------
# Gaussian-process kernels
# --------------------------------------------------------------------------------------
def _k_exp(d, s, l):
    return s * s * np.exp(-d / l)


def _k_m32(d, s, l):
    r = np.sqrt(3) * d / l
    return s * s * (1 + r) * np.exp(-r)


def _k_m52(d, s, l):
    r = np.sqrt(5) * d / l
    return s * s * (1 + r + r * r / 3) * np.exp(-r)


KERNELS = {"gp_exponential_cov": _k_exp, "gp_matern32_cov": _k_m32,
           "gp_matern52_cov": _k_m52}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_gp_kernel_values(name):
    fn, ref = getattr(sl, name), KERNELS[name]
    x = _weights(6, 14)
    X = _weights((5, 2), 15)
    np.testing.assert_allclose(fn(x, 1.3, 0.7), ref(cdist(x[:, None], x[:, None]), 1.3, 0.7),
                               rtol=1e-13)
    np.testing.assert_allclose(fn(X, 1.3, 0.7), ref(cdist(X, X), 1.3, 0.7), rtol=1e-13)
    np.testing.assert_allclose(fn(X, X[:2], 1.3, 0.7), ref(cdist(X, X[:2]), 1.3, 0.7),
                               rtol=1e-13)
    np.testing.assert_allclose(fn(list(X), 1.3, 0.7), fn(X, 1.3, 0.7), rtol=1e-15)
    # ARD: one length scale per dimension = the points scaled first
    ls = np.array([0.5, 2.0])
    np.testing.assert_allclose(fn(X, 1.3, ls), ref(cdist(X / ls, X / ls), 1.3, 1.0),
                               rtol=1e-13)
    assert np.linalg.eigvalsh(fn(X, 1.3, 0.7)).min() > -1e-12


def test_gp_periodic_values():
    x = _weights(6, 16)
    d = cdist(x[:, None], x[:, None])
    np.testing.assert_allclose(sl.gp_periodic_cov(x, 1.2, 0.8, 2.0),
                               1.44 * np.exp(-2 * np.sin(np.pi * d / 2) ** 2 / 0.64),
                               rtol=1e-13)
    # one period apart: full correlation
    np.testing.assert_allclose(sl.gp_periodic_cov(np.array([0.0, 2.0]), 1.0, 0.5, 2.0),
                               np.ones((2, 2)), rtol=1e-14)
    np.testing.assert_allclose(sl.gp_periodic_cov(x, x[:2], 1.2, 0.8, 2.0),
                               sl.gp_periodic_cov(x, 1.2, 0.8, 2.0)[:, :2], rtol=1e-14)


@pytest.mark.parametrize("name", sorted(KERNELS) + ["gp_periodic_cov"])
def test_gp_kernel_derivatives(name):
    fn = getattr(sl, name)
    n = 4
    W = _weights((n, n), 17)
    params = [1.3, 0.7] + ([1.9] if name == "gp_periodic_cov" else [])
    z = np.concatenate([_weights(n, 18), params])
    _all_orders(lambda v: sl.sum(fn(v[:n], *[v[n + i] for i in range(len(params))]) * W), z)
    # 2-D points, cross-covariance, ARD length scales: first order
    X = _weights((3, 2), 19)
    if name != "gp_periodic_cov":
        assert sl.check_grad(lambda v: sl.sum(fn(sl.reshape(v[:6], (3, 2)), X[:2] + 0.3, v[6],
                                                 v[7:]) ** 2),
                             np.concatenate([X.ravel(), [1.1, 0.6, 1.4]])).passed


def test_gp_kernel_coinciding_points_have_finite_derivatives():
    x = np.array([0.0, 0.0, 1.0])
    for name in KERNELS:
        g = sl.grad(lambda v: sl.sum(getattr(sl, name)(v, 1.0, 1.0)))(x)
        assert np.all(np.isfinite(g))
    H = sl.hessian(lambda v: sl.sum(sl.gp_matern52_cov(v, 1.0, 1.0)))(x)
    assert np.all(np.isfinite(H))


def test_gp_kernel_errors():
    x = np.arange(3.0)
    with pytest.raises(sl.DomainError, match="gp_matern32_cov: sigma must be positive"):
        sl.gp_matern32_cov(x, -1.0, 1.0)
    with pytest.raises(sl.DomainError, match="length_scale must be positive"):
        sl.gp_exponential_cov(x, 1.0, 0.0)
    with pytest.raises(sl.DomainError, match="period must be positive"):
        sl.gp_periodic_cov(x, 1.0, 1.0, -2.0)
    with pytest.raises(TypeError, match=r"gp_matern52_cov takes \(x, sigma, length_scale\)"):
        sl.gp_matern52_cov(x, 1.0)
    with pytest.raises(ValueError, match="same dimension"):
        sl.gp_matern52_cov(np.ones((2, 2)), np.ones((2, 3)), 1.0, 1.0)
    with pytest.raises(ValueError, match="length_scale has 3 elements"):
        sl.gp_matern52_cov(np.ones((2, 2)), 1.0, np.ones(3))
    with pytest.raises(sl.DomainError, match="x contains NaN"):
        sl.gp_exponential_cov(np.array([0.0, np.nan]), 1.0, 1.0)


# --------------------------------------------------------------------------------------
# norms and the numpy protocol
# --------------------------------------------------------------------------------------
def test_norm1_norm2():
    x = np.array([3.0, -4.0, 1.0])
    assert sl.norm1(x) == 8.0 and sl.norm2(x) == pytest.approx(np.sqrt(26.0), rel=1e-15)
    np.testing.assert_allclose(sl.grad(sl.norm1)(x), np.sign(x))
    np.testing.assert_allclose(sl.grad(sl.norm2)(x), x / np.sqrt(26.0), rtol=1e-15)


def test_numpy_outer_clip_flip():
    rng = np.random.default_rng(20)
    x, y = rng.normal(size=4), rng.normal(size=3)
    W = rng.normal(size=(4, 3))
    assert sl.check_grad(lambda a, b: sl.sum(np.outer(a, b) * W), (x, y)).passed
    np.testing.assert_allclose(sl.grad(lambda a: sl.sum(np.outer(a, y) * W))(x), W @ y)
    # clip: derivative 1 inside, 0 outside, the bound's own where it is traced
    x = np.array([-2.0, -0.3, 0.2, 1.5])
    np.testing.assert_array_equal(sl.grad(lambda a: sl.sum(np.clip(a, -1.0, 1.0)))(x),
                                  [0.0, 1.0, 1.0, 0.0])
    lo_grad = sl.grad(lambda lo: sl.sum(np.clip(x, lo, None)))(-1.0)
    assert lo_grad == 1.0
    hi_grad = sl.grad(lambda a: sl.sum(np.clip(a, None, 0.0)))(x)
    np.testing.assert_array_equal(hi_grad, [1.0, 1.0, 0.0, 0.0])
    np.testing.assert_array_equal(
        sl.grad(lambda a: sl.sum(np.clip(a, min=-1.0, max=1.0)))(x), [0.0, 1.0, 1.0, 0.0])
    with pytest.raises(ValueError, match="one of a_min, a_max"):
        sl.grad(lambda a: sl.sum(np.clip(a, None, None)))(x)
    M = rng.normal(size=(2, 3))
    for kw in ({}, {"axis": 0}, {"axis": 1}, {"axis": (0, 1)}, {"axis": -1}):
        f = lambda a, kw=kw: np.flip(a, **kw)   # noqa: E731
        got = sl.jacobian(lambda a: sl.flatten(f(sl.reshape(a, (2, 3)))))(M.ravel())
        want = np.flip(np.arange(6).reshape(2, 3), **kw).ravel()
        np.testing.assert_array_equal(got, np.eye(6)[want])
    np.testing.assert_array_equal(
        sl.grad(lambda a: sl.sum(np.fliplr(a) * M))(M), np.fliplr(M))
    np.testing.assert_array_equal(
        sl.grad(lambda a: sl.sum(np.flipud(a) * M))(M), np.flipud(M))


@pytest.mark.parametrize("args", [
    {}, {"ord": 1}, {"ord": 2}, {"ord": np.inf}, {"ord": -np.inf}, {"ord": 3},
    {"axis": 0}, {"ord": 1, "axis": 0}])
def test_numpy_linalg_norm_vector(args):
    x = np.array([0.5, -2.0, 1.2])
    f = lambda a: np.linalg.norm(a, **args)      # noqa: E731
    np.testing.assert_allclose(sl.value_of(sl.grad(f)(x) * 0 + f(x)), np.linalg.norm(x, **args))
    assert sl.check_grad(f, x).passed


@pytest.mark.parametrize("args", [
    {}, {"ord": "fro"}, {"ord": "nuc"}, {"ord": 2}, {"ord": 1}, {"ord": -1},
    {"ord": np.inf}, {"ord": -np.inf}, {"axis": 1}, {"axis": 0, "keepdims": True},
    {"keepdims": True}])
def test_numpy_linalg_norm_matrix(args):
    M = _weights((3, 4), 21)
    f = lambda a: sl.sum(np.linalg.norm(a, **args))     # noqa: E731
    np.testing.assert_allclose(f(M), np.sum(np.linalg.norm(M, **args)), rtol=1e-13)
    assert sl.check_grad(f, M).passed
    if "keepdims" in args:
        v, _ = sl.value_and_grad(lambda a: sl.sum(np.linalg.norm(a, **args)))(M)
        assert np.shape(np.linalg.norm(M, **args)) == np.shape(
            sl.jacobian(lambda a: np.linalg.norm(sl.reshape(a, (3, 4)), **args))(
                M.ravel()))[:-1]


def test_numpy_linalg_norm_unsupported():
    with pytest.raises(TypeError, match="numpy.linalg.norm"):
        sl.grad(lambda a: np.linalg.norm(a, ord=0.5, axis=(0, 1)))(np.ones((2, 2)))


def test_numpy_linalg_qr_svd_matrix_power():
    A = _weights((4, 3), 22)
    W = _weights((4, 3), 23)
    g1 = sl.grad(lambda a: sl.sum(np.linalg.qr(a)[0] * W))(A)
    g2 = sl.grad(lambda a: sl.sum(sl.qr_thin_Q(a) * W))(A)
    np.testing.assert_array_equal(g1, g2)
    g = sl.grad(lambda a: sl.sum(np.linalg.svd(a, compute_uv=False)))(A)
    np.testing.assert_allclose(g, sl.grad(lambda a: sl.sum(sl.singular_values(a)))(A))
    # on traced values the factors follow stanlite's sign convention (numpy's own, on
    # plain arrays, may differ by column signs)
    np.testing.assert_array_equal(
        sl.grad(lambda a: sl.sum(np.linalg.svd(a, full_matrices=False)[2] * W[:3]))(A),
        sl.grad(lambda a: sl.sum(sl.transpose(sl.svd_V(a)) * W[:3]))(A))
    with pytest.raises(TypeError, match="full_matrices=False"):
        sl.grad(lambda a: sl.sum(np.linalg.svd(a)[0]))(A)
    with pytest.raises(TypeError, match="mode='complete'"):
        sl.grad(lambda a: sl.sum(np.linalg.qr(a, mode="complete")[0]))(A)
    B = _weights((3, 3), 24)
    np.testing.assert_allclose(
        sl.grad(lambda b: sl.sum(np.linalg.matrix_power(b, 3)))(B),
        sl.grad(lambda b: sl.sum(sl.matrix_power(b, 3)))(B), rtol=1e-15)


def test_model_with_the_new_functions_replays_correctly():
    class GP(sl.Model):
        x = sl.data.vector(5)
        y = sl.data.vector(5)
        rho = sl.param.real(lower=0)
        alpha = sl.param.real(lower=0)

        def log_prob(self, rho, alpha):
            K = sl.add_diag(sl.gp_matern32_cov(self.x, alpha, rho), 0.1)
            K = K + 0.01 * sl.matrix_power(K, 2)
            return (sl.multi_normal_lpdf(self.y, np.zeros(5), K)
                    + sl.normal_lpdf(rho, 0, 2) + sl.normal_lpdf(alpha, 0, 2)
                    + 0.01 * sl.sum(sl.singular_values(K)))

    m = GP(x=np.linspace(0, 2, 5), y=np.sin(np.linspace(0, 2, 5)))
    rng = np.random.default_rng(25)
    for _ in range(3):
        z = rng.normal(scale=0.3, size=2)
        lp, g = m.log_density_gradient(z)
        e_lp, e_g = m._gradient(z, True)
        assert lp == e_lp and np.array_equal(g, e_g)
        h = 1e-6
        fd = [(m.log_density(z + h * e) - m.log_density(z - h * e)) / (2 * h)
              for e in np.eye(2)]
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", ["qr_thin_Q", "qr_thin_R", "singular_values", "svd_U",
                                  "svd_V", "matrix_power", "csr_matrix_times_vector",
                                  "csr_extract", "gp_exponential_cov", "gp_matern32_cov",
                                  "gp_matern52_cov", "gp_periodic_cov", "norm1", "norm2"])
def test_docstring_examples(name):
    fn = getattr(sl, name)
    r = doctest.DocTestRunner()
    for t in doctest.DocTestFinder().find(fn, name, globs={}):
        r.run(t)
    assert r.failures == 0 and r.tries > 0
