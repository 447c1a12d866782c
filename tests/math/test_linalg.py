"""Linear algebra: values against numpy, adjoints against finite differences
(``sl.assert_grad``) and closed forms, second order (reverse-over-reverse), errors."""

import numpy as np
import pytest

import stanlite as sl


def _rng(seed):
    return np.random.default_rng(seed)


def spd(n, seed=0, batch=()):
    """A well-conditioned SPD matrix (or stack): B B^T + n I."""
    b = _rng(seed).standard_normal(batch + (n, n))
    return b @ np.swapaxes(b, -1, -2) + n * np.eye(n)


def well(n, seed=0, batch=()):
    """A well-conditioned general square matrix: random + n I."""
    return _rng(seed).standard_normal(batch + (n, n)) + n * np.eye(n)


def lower(n, seed=0, batch=()):
    """A lower-triangular factor with a safe diagonal (junk above it: never read)."""
    a = _rng(seed).standard_normal(batch + (n, n))
    i = np.arange(n)
    a[..., i, i] = 2.0 + np.abs(a[..., i, i])
    return a


def symp(s, shift):
    """Symmetric parametrisation usable inside traced code: S + S^T + shift I."""
    return s + sl.swapaxes(s, -1, -2) + shift * np.eye(s.shape[-1])


def check(f, x, **kw):
    return sl.assert_grad(f, x, **kw)


def check2(scalar_fn, x, **kw):
    """Reverse-over-reverse: the gradient of ``scalar_fn`` checked against FD."""
    return sl.assert_grad(lambda a: sl.grad(scalar_fn)(a), x, **kw)


# --------------------------------------------------------------------------------------
# matmul and dot
# --------------------------------------------------------------------------------------
MATMUL_SHAPES = [
    ((3, 4), (4, 2)),            # matrix @ matrix
    ((3, 4), (4,)),              # matrix @ vector
    ((4,), (4, 2)),              # vector @ matrix
    ((4,), (4,)),                # vector @ vector
    ((2, 3, 4), (2, 4, 5)),      # stack @ stack
    ((2, 3, 4), (4, 5)),         # stack @ matrix (broadcast)
    ((3, 4), (2, 4, 5)),         # matrix @ stack
    ((1, 3, 4), (2, 4, 5)),      # size-1 batch axis broadcast
    ((2, 3, 4), (4,)),           # stack @ vector
    ((4,), (2, 4, 5)),           # vector @ stack
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_value_and_grad(sa, sb):
    r = _rng(1)
    a, b = r.standard_normal(sa), r.standard_normal(sb)
    assert np.allclose(sl.matmul(a, b), a @ b)
    check(sl.matmul, (a, b))
    check(lambda x, y: x @ y, (a, b))                  # the operator
    check(lambda x: np.matmul(x, b), a)                # numpy protocol, constant b
    check(lambda y: a @ y, b)                          # constant a (rmatmul)


def test_matmul_closed_form():
    r = _rng(2)
    a, b, w = r.standard_normal((3, 4)), r.standard_normal((4, 2)), r.standard_normal((3, 2))
    ga, gb = sl.grad(lambda x, y: sl.sum(w * (x @ y)), argnum=(0, 1))(a, b)
    assert np.allclose(ga, w @ b.T) and np.allclose(gb, a.T @ w)


@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 2)), ((4,), (4,)), ((2, 3, 4), (4,))])
def test_matmul_second_order(sa, sb):
    r = _rng(3)
    a, b = r.standard_normal(sa), r.standard_normal(sb)
    na = a.size

    def f(z):
        x, y = sl.reshape(z[:na], sa), sl.reshape(z[na:], sb)
        c = x @ y
        return sl.sum(sl.sin(c) * c)
    check2(f, np.concatenate([a.ravel(), b.ravel()]))


def test_dot():
    r = _rng(4)
    a, b, m = r.standard_normal(3), r.standard_normal(3), r.standard_normal((3, 3))
    assert np.isclose(sl.dot(a, b), a @ b)
    check(sl.dot, (a, b))
    check(lambda x: sl.dot(m, x), a)
    check(lambda x: sl.dot(2.0, x), a)
    check(lambda x: np.dot(x, m), a)


def test_matmul_shape_mismatch():
    with pytest.raises(ValueError):
        sl.grad(lambda x: sl.sum(x @ np.ones((3, 2))))(np.ones((2, 2)))


# --------------------------------------------------------------------------------------
# products: crossprod, tcrossprod, quad forms, diagonal scalings
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(4, 3), (2, 4, 3)])
def test_crossprod_tcrossprod(shape):
    a = _rng(5).standard_normal(shape)
    at = np.swapaxes(a, -1, -2)
    assert np.allclose(sl.crossprod(a), at @ a)
    assert np.allclose(sl.tcrossprod(a), a @ at)
    check(sl.crossprod, a)
    check(sl.tcrossprod, a)
    check2(lambda z: sl.sum(sl.crossprod(sl.reshape(z, shape)) ** 2), a.ravel())
    check2(lambda z: sl.sum(sl.tcrossprod(sl.reshape(z, shape)) ** 2), a.ravel())


@pytest.mark.parametrize("sa,sb", [((4, 4), (4, 2)), ((4, 4), (4,)), ((2, 4, 4), (4, 3)),
                                   ((2, 4, 4), (4,))])
def test_quad_form(sa, sb):
    r = _rng(6)
    a, b = r.standard_normal(sa), r.standard_normal(sb)
    ref = b @ a @ b if b.ndim == 1 else np.swapaxes(b, -1, -2) @ a @ b
    assert np.allclose(sl.quad_form(a, b), ref)
    check(sl.quad_form, (a, b))


def test_quad_form_closed_form_and_second_order():
    r = _rng(7)
    a, b = r.standard_normal((4, 4)), r.standard_normal(4)
    ga, gb = sl.grad(sl.quad_form, argnum=(0, 1))(a, b)
    assert np.allclose(ga, np.outer(b, b))
    assert np.allclose(gb, (a + a.T) @ b)
    bm, w = r.standard_normal((4, 2)), r.standard_normal((2, 2))
    ga, gb = sl.grad(lambda x, y: sl.sum(w * sl.quad_form(x, y)), argnum=(0, 1))(a, bm)
    assert np.allclose(ga, bm @ w @ bm.T)
    assert np.allclose(gb, a @ bm @ w.T + a.T @ bm @ w)

    def f(z):
        x, y = sl.reshape(z[:16], (4, 4)), sl.reshape(z[16:], (4, 2))
        return sl.sum(sl.quad_form(x, y) ** 2)
    check2(f, np.concatenate([a.ravel(), bm.ravel()]))
    check2(lambda z: sl.quad_form(sl.reshape(z[:16], (4, 4)), z[16:]) ** 2,
           np.concatenate([a.ravel(), b]))


@pytest.mark.parametrize("sb", [(4, 3), (4,)])
def test_quad_form_sym(sb):
    r = _rng(8)
    s, b = r.standard_normal((4, 4)), r.standard_normal(sb)
    a = s + s.T
    v = sl.quad_form_sym(a, b)
    assert np.allclose(v, sl.quad_form(a, b))
    if b.ndim == 2:
        assert np.array_equal(v, v.T)
    check(lambda x, y: sl.quad_form_sym(symp(x, 0.0), y), (s, b))
    n = s.size
    check2(lambda z: sl.sum(sl.quad_form_sym(symp(sl.reshape(z[:n], (4, 4)), 0.0),
                                             sl.reshape(z[n:], sb)) ** 2),
           np.concatenate([s.ravel(), b.ravel()]))


@pytest.mark.parametrize("sm,sv", [((3, 3), (3,)), ((2, 3, 3), (3,)), ((2, 3, 3), (2, 3))])
def test_quad_form_diag(sm, sv):
    r = _rng(9)
    m, v = r.standard_normal(sm), r.standard_normal(sv)
    ref = np.einsum("...i,...ij,...j->...ij", v * np.ones(sm[:-1]), m, v * np.ones(sm[:-1]))
    assert np.allclose(sl.quad_form_diag(m, v), ref)
    check(sl.quad_form_diag, (m, v))
    nm = m.size
    check2(lambda z: sl.sum(sl.quad_form_diag(sl.reshape(z[:nm], sm),
                                              sl.reshape(z[nm:], sv)) ** 2),
           np.concatenate([m.ravel(), v.ravel()]))


def test_diag_pre_post_multiply():
    r = _rng(10)
    m, u, v = r.standard_normal((3, 4)), r.standard_normal(3), r.standard_normal(4)
    assert np.allclose(sl.diag_pre_multiply(u, m), np.diag(u) @ m)
    assert np.allclose(sl.diag_post_multiply(m, v), m @ np.diag(v))
    check(sl.diag_pre_multiply, (u, m))
    check(sl.diag_post_multiply, (m, v))
    with pytest.raises(ValueError, match="diag_pre_multiply"):
        sl.diag_pre_multiply(v, m)
    with pytest.raises(ValueError, match="diag_post_multiply"):
        sl.diag_post_multiply(m, u)


# --------------------------------------------------------------------------------------
# diagonals and trace
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3), (2, 3, 3)])
def test_diagonal_and_diag_matrix(shape):
    r = _rng(11)
    m = r.standard_normal(shape)
    assert np.allclose(sl.diagonal(m), np.diagonal(m, axis1=-2, axis2=-1))
    check(sl.diagonal, m)
    v = r.standard_normal(shape[:-1])
    dm = sl.diag_matrix(v)
    assert dm.shape == shape[:-1] + (shape[-2],)
    assert np.allclose(sl.diagonal(dm), v)
    check(sl.diag_matrix, v)
    # second order: diagonal and diag_matrix differentiate into each other
    check2(lambda z: sl.sum(sl.diagonal(sl.reshape(z, shape)) ** 3), m.ravel())
    check2(lambda z: sl.sum(sl.diag_matrix(z) ** 3), v.ravel() if v.ndim == 1 else v[0])


@pytest.mark.parametrize("shape,sd", [((3, 3), ()), ((3, 3), (3,)), ((3, 5), (3,)),
                                      ((2, 3, 3), (3,)), ((2, 3, 3), (2, 3))])
def test_add_diag(shape, sd):
    r = _rng(12)
    m, d = r.standard_normal(shape), r.standard_normal(sd)
    ref = m.copy()
    k = min(shape[-2:])
    ref[..., np.arange(k), np.arange(k)] += d
    assert np.allclose(sl.add_diag(m, d), ref)
    check(sl.add_diag, (m, d))
    nm = m.size
    check2(lambda z: sl.sum(sl.add_diag(sl.reshape(z[:nm], shape),
                                        sl.reshape(z[nm:], sd)) ** 3),
           np.concatenate([m.ravel(), np.ravel(d)]))
    with pytest.raises(ValueError, match="add_diag"):
        sl.add_diag(m, np.ones(k + 1))


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (2, 3, 3)])
def test_trace(shape):
    m = _rng(13).standard_normal(shape)
    assert np.allclose(sl.trace(m), np.trace(m, axis1=-2, axis2=-1))
    check(sl.trace, m)
    check2(lambda z: sl.sum(sl.trace(sl.reshape(z, shape)) ** 3), m.ravel())


def test_trace_closed_form_and_numpy_protocol():
    a = _rng(14).standard_normal((4, 4))
    assert np.array_equal(sl.grad(sl.trace)(a), np.eye(4))
    assert np.array_equal(sl.grad(lambda x: np.trace(x))(a), np.eye(4))
    s3 = _rng(14).standard_normal((3, 3, 2))
    check(lambda x: np.trace(x), s3)                   # numpy's default axes 0, 1
    check(lambda x: np.diagonal(x), s3)
    gd = sl.grad(lambda x: sl.sum(np.diagonal(x)))(s3)
    assert np.allclose(gd.sum(axis=2), np.eye(3) * 2)
    v = _rng(14).standard_normal(3)
    check(lambda x: np.diag(x), v)
    check(lambda x: np.diag(x), a)


# --------------------------------------------------------------------------------------
# Cholesky and triangular solves
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("batch", [(), (2,)])
def test_cholesky_value_and_grad(batch):
    a = spd(4, 15, batch)
    L = sl.cholesky_decompose(a)
    assert np.allclose(L, np.linalg.cholesky(a))
    assert np.allclose(L @ np.swapaxes(L, -1, -2), a)            # reconstructs
    assert np.array_equal(L, np.tril(L))
    s = _rng(15).standard_normal(batch + (4, 4))
    check(lambda x: sl.cholesky_decompose(symp(x, 8.0)), s)
    check(lambda x: np.linalg.cholesky(symp(x, 8.0)), s)


def test_cholesky_adjoint_symmetric_and_closed_form():
    a = spd(4, 16)
    w = _rng(16).standard_normal((4, 4))
    ga = sl.grad(lambda x: sl.sum(w * sl.cholesky_decompose(x)))(a)
    assert np.allclose(ga, ga.T)
    # sum(log diag L) = log det A / 2, so its gradient is A^-1 / 2
    gl = sl.grad(lambda x: sl.sum(sl.log(sl.diagonal(sl.cholesky_decompose(x)))))(a)
    assert np.allclose(gl, 0.5 * np.linalg.inv(a))


def test_cholesky_second_order():
    s = _rng(17).standard_normal(16)
    w = _rng(18).standard_normal((4, 4))
    check2(lambda z: sl.sum(w * sl.cholesky_decompose(symp(sl.reshape(z, (4, 4)), 8.0))), s)
    # the gradient of a Cholesky-based log-determinant
    check2(lambda z: 2.0 * sl.sum(sl.log(sl.diagonal(
        sl.cholesky_decompose(symp(sl.reshape(z, (4, 4)), 8.0))))), s)


@pytest.mark.parametrize("sb", [(4,), (4, 3), (2, 4, 3)])
def test_mdivide_left_tri_low(sb):
    r = _rng(19)
    L, b = lower(4, 19), r.standard_normal(sb)
    Lt = np.tril(L)
    assert np.allclose(sl.mdivide_left_tri_low(L, b), np.linalg.solve(Lt, b))
    check(sl.mdivide_left_tri_low, (L, b))
    # only the lower triangle is read, so the adjoint of L is lower triangular
    gL = sl.grad(lambda x: sl.sum(sl.mdivide_left_tri_low(x, b)))(L)
    assert np.array_equal(gL, np.tril(gL))
    nL = L.size
    check2(lambda z: sl.sum(sl.mdivide_left_tri_low(sl.reshape(z[:nL], (4, 4)),
                                                    sl.reshape(z[nL:], sb)) ** 2),
           np.concatenate([L.ravel(), b.ravel()]))


def test_mdivide_left_tri_low_batched_L():
    r = _rng(20)
    L, b = lower(3, 20, (2,)), r.standard_normal((3, 2))
    assert np.allclose(sl.mdivide_left_tri_low(L, b), np.linalg.solve(np.tril(L), b))
    check(sl.mdivide_left_tri_low, (L, b))


@pytest.mark.parametrize("sb", [(4,), (3, 4)])
def test_mdivide_right_tri_low(sb):
    r = _rng(21)
    L, b = lower(4, 21), r.standard_normal(sb)
    assert np.allclose(sl.mdivide_right_tri_low(b, L), b @ np.linalg.inv(np.tril(L)))
    check(sl.mdivide_right_tri_low, (b, L))
    nb = b.size
    check2(lambda z: sl.sum(sl.mdivide_right_tri_low(sl.reshape(z[:nb], sb),
                                                     sl.reshape(z[nb:], (4, 4))) ** 2),
           np.concatenate([b.ravel(), L.ravel()]))


def test_multiply_lower_tri_self_transpose():
    for shape in [(4, 4), (4, 3), (3, 4), (2, 3, 3)]:
        L = _rng(22).standard_normal(shape)
        t = np.tril(L)
        assert np.allclose(sl.multiply_lower_tri_self_transpose(L), t @ np.swapaxes(t, -1, -2))
        check(sl.multiply_lower_tri_self_transpose, L)
        check2(lambda z: sl.sum(sl.multiply_lower_tri_self_transpose(
            sl.reshape(z, shape)) ** 2), L.ravel())


# --------------------------------------------------------------------------------------
# general solves, inverse, determinants
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("sa,sb", [((4, 4), (4,)), ((4, 4), (4, 2)), ((2, 4, 4), (4, 2)),
                                   ((2, 4, 4), (4,)), ((4, 4), (2, 4, 3))])
def test_mdivide_left(sa, sb):
    r = _rng(23)
    a, b = well(4, 23, sa[:-2]), r.standard_normal(sb)
    if len(sb) == 1:
        ref = np.linalg.solve(a, b[:, None])[..., 0]
    else:
        ref = np.linalg.solve(a, b)
    assert np.allclose(sl.mdivide_left(a, b), ref)
    check(sl.mdivide_left, (a, b))
    check(sl.solve, (a, b))


def test_mdivide_left_closed_form_and_second_order():
    r = _rng(24)
    a, b, w = well(3, 24), r.standard_normal((3, 2)), r.standard_normal((3, 2))
    ga, gb = sl.grad(lambda x, y: sl.sum(w * sl.mdivide_left(x, y)), argnum=(0, 1))(a, b)
    c = np.linalg.solve(a, b)
    bbar = np.linalg.solve(a.T, w)
    assert np.allclose(gb, bbar) and np.allclose(ga, -bbar @ c.T)
    check2(lambda z: sl.sum(sl.mdivide_left(sl.reshape(z[:9], (3, 3)),
                                            sl.reshape(z[9:], (3, 2))) ** 2),
           np.concatenate([a.ravel(), b.ravel()]))
    check(lambda x, y: np.linalg.solve(x, y), (a, b))


@pytest.mark.parametrize("sb", [(4,), (3, 4)])
def test_mdivide_right(sb):
    r = _rng(25)
    a, b = well(4, 25), r.standard_normal(sb)
    assert np.allclose(sl.mdivide_right(b, a), b @ np.linalg.inv(a))
    check(sl.mdivide_right, (b, a))
    nb = b.size
    check2(lambda z: sl.sum(sl.mdivide_right(sl.reshape(z[:nb], sb),
                                             sl.reshape(z[nb:], (4, 4))) ** 2),
           np.concatenate([b.ravel(), a.ravel()]))


@pytest.mark.parametrize("sb", [(4,), (4, 2)])
def test_spd_solves_and_inverse_spd(sb):
    r = _rng(26)
    a, b = spd(4, 26), r.standard_normal(sb)
    s = r.standard_normal((4, 4))
    assert np.allclose(sl.mdivide_left_spd(a, b), np.linalg.solve(a, b))
    bt = b.T if b.ndim == 2 else b
    assert np.allclose(sl.mdivide_right_spd(bt, a), bt @ np.linalg.inv(a))
    assert np.allclose(sl.inverse_spd(a), np.linalg.inv(a))
    check(lambda x, y: sl.mdivide_left_spd(symp(x, 8.0), y), (s, b))
    check(lambda x, y: sl.mdivide_right_spd(y, symp(x, 8.0)), (s, bt))
    check(lambda x: sl.inverse_spd(symp(x, 8.0)), s)
    check2(lambda z: sl.sum(sl.inverse_spd(symp(sl.reshape(z, (4, 4)), 8.0)) ** 2), s.ravel())
    nb = b.size
    check2(lambda z: sl.sum(sl.mdivide_left_spd(symp(sl.reshape(z[nb:], (4, 4)), 8.0),
                                                sl.reshape(z[:nb], sb)) ** 2),
           np.concatenate([b.ravel(), s.ravel()]))


@pytest.mark.parametrize("batch", [(), (2,)])
def test_inverse(batch):
    a = well(4, 27, batch)
    assert np.allclose(sl.inverse(a), np.linalg.inv(a))
    check(sl.inverse, a)
    check(lambda x: np.linalg.inv(x), a)
    check2(lambda z: sl.sum(sl.inverse(sl.reshape(z, batch + (4, 4))) ** 2), a.ravel())


@pytest.mark.parametrize("batch", [(), (3,)])
def test_log_determinant_and_determinant(batch):
    a = well(4, 28, batch)
    a[..., 0, :] *= -1.0                                        # negative determinant
    assert np.allclose(sl.log_determinant(a), np.linalg.slogdet(a)[1])
    assert np.allclose(sl.determinant(a), np.linalg.det(a))
    check(sl.log_determinant, a)
    check(sl.determinant, a)
    check(lambda x: np.linalg.det(x), a)
    check2(lambda z: sl.sum(sl.log_determinant(sl.reshape(z, batch + (4, 4)))), a.ravel())
    check2(lambda z: sl.sum(sl.determinant(sl.reshape(z, batch + (4, 4)))), a.ravel())


def test_determinant_closed_forms():
    a = well(4, 29)
    ainv_t = np.linalg.inv(a).T
    assert np.allclose(sl.grad(sl.log_determinant)(a), ainv_t)          # d log|A| = A^-T
    assert np.allclose(sl.grad(sl.determinant)(a), np.linalg.det(a) * ainv_t)
    p = spd(4, 29)
    assert np.allclose(sl.log_determinant_spd(p), np.linalg.slogdet(p)[1])
    assert np.allclose(sl.grad(sl.log_determinant_spd)(p), np.linalg.inv(p))


@pytest.mark.parametrize("batch", [(), (2,)])
def test_log_determinant_spd(batch):
    s = _rng(30).standard_normal(batch + (4, 4))
    check(lambda x: sl.log_determinant_spd(symp(x, 8.0)), s)
    check2(lambda z: sl.sum(sl.log_determinant_spd(symp(sl.reshape(z, batch + (4, 4)), 8.0))),
           s.ravel())


# --------------------------------------------------------------------------------------
# symmetric eigendecomposition
# --------------------------------------------------------------------------------------
def test_eigen_values_and_convention():
    a = spd(4, 31)
    lam, V = sl.eigenvalues_sym(a), sl.eigenvectors_sym(a)
    assert np.allclose(lam, np.linalg.eigvalsh(a)) and np.all(np.diff(lam) > 0)
    assert np.allclose(V @ np.diag(lam) @ V.T, a)
    assert np.allclose(V.T @ V, np.eye(4))
    # sign convention: the largest-magnitude component of each column is positive
    k = np.argmax(np.abs(V), axis=0)
    assert np.all(V[k, np.arange(4)] > 0)


@pytest.mark.parametrize("batch", [(), (2,)])
def test_eigen_adjoints(batch):
    s = _rng(32).standard_normal(batch + (4, 4))
    check(lambda x: sl.eigenvalues_sym(symp(x, 0.0)), s)
    check(lambda x: sl.eigenvectors_sym(symp(x, 0.0)), s)


def test_eigen_adjoints_closed_form_and_fd():
    a = spd(4, 33)
    lam, V = np.linalg.eigh(a)
    # d lambda_i / dA = v_i v_i^T
    for i in range(4):
        g = sl.grad(lambda x: sl.eigenvalues_sym(x)[i])(a)
        assert np.allclose(g, np.outer(V[:, i], V[:, i]))
    # eigenvector adjoint against a symmetric central difference, entry by entry
    w = _rng(33).standard_normal((4, 4))
    g = sl.grad(lambda x: sl.sum(w * sl.eigenvectors_sym(x)))(a)
    h = 1e-6
    for i, j in [(0, 0), (1, 2), (3, 1)]:
        e = np.zeros((4, 4))
        e[i, j] = e[j, i] = 1.0                              # a symmetric direction
        fd = (np.sum(w * sl.eigenvectors_sym(a + h * e))
              - np.sum(w * sl.eigenvectors_sym(a - h * e))) / (2 * h)
        assert np.isclose(np.sum(g * e), fd, rtol=1e-6, atol=1e-8)


def test_eigenvalues_gradient_at_repeated_eigenvalues():
    # a function symmetric in the eigenvalues has a basis-independent gradient even
    # where they repeat: sum(eigenvalues) = trace, sum(eigenvalues^2) = |A|_F^2
    a = np.eye(3)
    assert np.allclose(sl.grad(lambda x: sl.sum(sl.eigenvalues_sym(x)))(a), np.eye(3))
    assert np.allclose(sl.grad(lambda x: sl.sum(sl.eigenvalues_sym(x) ** 2))(a), 2 * a)


def test_eigen_second_order():
    s = _rng(34).standard_normal(16)
    w = _rng(35).standard_normal((4, 4))
    check2(lambda z: sl.sum(w[0] * sl.eigenvalues_sym(symp(sl.reshape(z, (4, 4)), 0.0)) ** 2),
           s)
    check2(lambda z: sl.sum(w * sl.eigenvectors_sym(symp(sl.reshape(z, (4, 4)), 0.0))), s)


# --------------------------------------------------------------------------------------
# Gaussian-process covariance
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(5,), (5, 2)])
def test_gp_exp_quad_cov(shape):
    x = _rng(36).standard_normal(shape)
    alpha, rho = 1.3, 0.8
    X = x.reshape(len(x), -1)
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    ref = alpha ** 2 * np.exp(-d2 / (2 * rho ** 2))
    assert np.allclose(sl.gp_exp_quad_cov(x, alpha, rho), ref)
    assert np.allclose(sl.cov_exp_quad(x, alpha, rho), ref)
    check(sl.gp_exp_quad_cov, (x, np.array(alpha), np.array(rho)))
    check(lambda a: sl.gp_exp_quad_cov(x, a, rho), np.array(alpha))
    check(lambda r: sl.gp_exp_quad_cov(x, alpha, r), np.array(rho))
    check(lambda z: sl.gp_exp_quad_cov(z, alpha, rho), x)
    n = x.size
    w = _rng(37).standard_normal((5, 5))
    check2(lambda z: sl.sum(w * sl.gp_exp_quad_cov(sl.reshape(z[:n], shape), z[n], z[n + 1])),
           np.concatenate([x.ravel(), [alpha, rho]]))


def test_gp_in_a_model():
    # a GP marginal likelihood: the gradient flows through the kernel, add_diag,
    # Cholesky, a triangular solve and the log-determinant
    x = np.linspace(0.0, 3.0, 6)
    y = np.sin(x)

    def lp(theta):
        K = sl.add_diag(sl.gp_exp_quad_cov(x, sl.exp(theta[0]), sl.exp(theta[1])), 0.1)
        L = sl.cholesky_decompose(K)
        z = sl.mdivide_left_tri_low(L, y)
        return -0.5 * sl.sum(z * z) - sl.sum(sl.log(sl.diagonal(L)))
    check(lp, np.array([0.2, -0.1]))
    check2(lp, np.array([0.2, -0.1]))


# --------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------
def test_cholesky_errors():
    with pytest.raises(ValueError, match="cholesky_decompose: A is not positive definite"):
        sl.cholesky_decompose(np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="cholesky_decompose: A is not symmetric"):
        sl.cholesky_decompose(np.array([[2.0, 1.0], [0.0, 2.0]]))
    with pytest.raises(ValueError, match=r"cholesky_decompose: A must be square.*\(2, 3\)"):
        sl.cholesky_decompose(np.ones((2, 3)))
    with pytest.raises(ValueError, match="cholesky_decompose"):
        sl.grad(lambda x: sl.sum(sl.cholesky_decompose(x)))(-np.eye(3))
    with pytest.raises(ValueError, match="log_determinant_spd: A is not positive definite"):
        sl.log_determinant_spd(-np.eye(2))
    with pytest.raises(ValueError, match="inverse_spd"):
        sl.inverse_spd(-np.eye(2))
    with pytest.raises(ValueError, match="mdivide_left_spd"):
        sl.mdivide_left_spd(-np.eye(2), np.ones(2))


def test_shape_errors():
    a, b = np.eye(3), np.ones((4, 2))
    with pytest.raises(ValueError, match=r"mdivide_left: shapes \(3, 3\) \(A\) and \(4, 2\)"):
        sl.mdivide_left(a, b)
    with pytest.raises(ValueError, match="mdivide_left: A must be square"):
        sl.mdivide_left(np.ones((3, 2)), np.ones(3))
    with pytest.raises(ValueError, match="mdivide_right"):
        sl.mdivide_right(np.ones((2, 4)), a)
    with pytest.raises(ValueError, match="mdivide_left_tri_low"):
        sl.mdivide_left_tri_low(a, np.ones(4))
    with pytest.raises(ValueError, match="mdivide_right_tri_low"):
        sl.mdivide_right_tri_low(np.ones(4), a)
    with pytest.raises(ValueError, match=r"quad_form: shapes \(3, 3\) \(A\) and \(4, 2\)"):
        sl.quad_form(a, b)
    with pytest.raises(ValueError, match="quad_form_sym: A is not symmetric"):
        sl.quad_form_sym(np.triu(np.ones((3, 3))), np.ones(3))
    with pytest.raises(ValueError, match="quad_form_diag"):
        sl.quad_form_diag(a, np.ones(2))
    with pytest.raises(ValueError, match="inverse: A must be square"):
        sl.inverse(np.ones((2, 3)))
    with pytest.raises(ValueError, match="log_determinant: A must be square"):
        sl.log_determinant(np.ones((2, 3)))
    with pytest.raises(ValueError, match="determinant: A must be a matrix"):
        sl.determinant(np.ones(3))
    with pytest.raises(ValueError, match="eigenvalues_sym: A is not symmetric"):
        sl.eigenvalues_sym(np.triu(np.ones((3, 3))))
    with pytest.raises(ValueError, match="trace: A must be a matrix"):
        sl.trace(np.ones(3))
    with pytest.raises(ValueError, match="diag_matrix"):
        sl.diag_matrix(1.0)
    with pytest.raises(ValueError, match="crossprod"):
        sl.crossprod(np.ones(3))
    # traced arguments are checked too, before anything is recorded
    with pytest.raises(ValueError, match="mdivide_left"):
        sl.grad(lambda x: sl.sum(sl.mdivide_left(x, b)))(a)


def test_singular_and_domain_errors():
    sing = np.array([[1.0, 2.0], [2.0, 4.0]])
    with pytest.raises(ValueError, match="mdivide_left: A is singular"):
        sl.mdivide_left(sing, np.ones(2))
    with pytest.raises(ValueError, match="inverse: A is singular"):
        sl.inverse(sing)
    with pytest.raises(ValueError, match="mdivide_left_tri_low: L is singular"):
        sl.mdivide_left_tri_low(np.array([[1.0, 0.0], [1.0, 0.0]]), np.ones(2))
    assert sl.log_determinant(np.zeros((2, 2))) == -np.inf
    with pytest.raises(ValueError, match="gp_exp_quad_cov: rho must be positive"):
        sl.gp_exp_quad_cov(np.ones(3), 1.0, -1.0)
    with pytest.raises(ValueError, match="gp_exp_quad_cov: alpha must be a scalar"):
        sl.gp_exp_quad_cov(np.ones(3), np.ones(2), 1.0)
    with pytest.raises(ValueError, match="gp_exp_quad_cov: x must be"):
        sl.gp_exp_quad_cov(np.ones((2, 2, 2)), 1.0, 1.0)


# --------------------------------------------------------------------------------------
# forward mode: JVPs (vs finite differences and vector vs single mode), Hessians by
# forward-over-reverse, third order. Every function is fed from one flat vector v.
# --------------------------------------------------------------------------------------
def M(v, shape, shift=0.0):
    """A matrix (stack) from the vector ``v``, plus ``shift`` I (well conditioned)."""
    m = sl.reshape(v, shape)
    return m + shift * np.eye(shape[-1]) if shift else m


def SPD(v, shape):
    """SPD (stack) from the vector ``v``: B B^T + n I."""
    b = sl.reshape(v, shape)
    return b @ sl.swapaxes(b, -1, -2) + shape[-1] * np.eye(shape[-1])


def _mm(sa, sb):
    na = int(np.prod(sa))
    return (lambda v: sl.matmul(sl.reshape(v[:na], sa), sl.reshape(v[na:], sb)),
            na + int(np.prod(sb)))


# (id, f(v), len(v)): every linalg function, with stacks and broadcasting
FWD_CASES = [(f"matmul{sa}{sb}",) + _mm(sa, sb) for sa, sb in MATMUL_SHAPES] + [
    ("dot", lambda v: sl.dot(v[:3], sl.reshape(v[3:], (3, 2))), 9),
    ("crossprod", lambda v: sl.crossprod(M(v, (4, 3))), 12),
    ("tcrossprod", lambda v: sl.tcrossprod(M(v, (2, 4, 3))), 24),
    ("quad_form", lambda v: sl.quad_form(M(v[:16], (4, 4)), M(v[16:], (4, 2))), 24),
    ("quad_form_vec", lambda v: sl.quad_form(M(v[:16], (4, 4)), v[16:]), 20),
    ("quad_form_stack_vec", lambda v: sl.quad_form(M(v[:18], (2, 3, 3)), v[18:]), 21),
    ("quad_form_bstack", lambda v: sl.quad_form(M(v[:9], (3, 3)), M(v[9:], (2, 3, 2))), 21),
    ("quad_form_sym", lambda v: sl.quad_form_sym(SPD(v[:9], (3, 3)), M(v[9:], (3, 2))), 15),
    ("quad_form_sym_vec", lambda v: sl.quad_form_sym(SPD(v[:9], (3, 3)), v[9:]), 12),
    ("quad_form_diag", lambda v: sl.quad_form_diag(M(v[:18], (2, 3, 3)), v[18:]), 21),
    ("quad_form_diag_vstack", lambda v: sl.quad_form_diag(M(v[:9], (3, 3)),
                                                          M(v[9:], (2, 3))), 15),
    ("diag_pre_post", lambda v: sl.diag_post_multiply(
        sl.diag_pre_multiply(v[:3], M(v[3:15], (3, 4))), v[15:]), 19),
    ("diagonal_diag_matrix", lambda v: sl.diag_matrix(sl.diagonal(M(v, (2, 3, 4)))), 24),
    ("add_diag_scalar", lambda v: sl.add_diag(M(v[:18], (2, 3, 3)), v[18]), 19),
    ("add_diag_vec", lambda v: sl.add_diag(M(v[:12], (3, 4)), v[12:]), 15),
    ("add_diag_stack", lambda v: sl.add_diag(M(v[:18], (2, 3, 3)), M(v[18:], (2, 3))), 24),
    ("trace", lambda v: sl.trace(M(v, (2, 3, 3))), 18),
    ("cholesky", lambda v: sl.cholesky_decompose(SPD(v, (3, 3))), 9),
    ("cholesky_stack", lambda v: sl.cholesky_decompose(SPD(v, (2, 3, 3))), 18),
    ("tri_low_vec", lambda v: sl.mdivide_left_tri_low(M(v[:9], (3, 3), 4.0), v[9:]), 12),
    ("tri_low_bstack", lambda v: sl.mdivide_left_tri_low(M(v[:9], (3, 3), 4.0),
                                                         M(v[9:], (2, 3, 2))), 21),
    ("tri_low_Lstack", lambda v: sl.mdivide_left_tri_low(M(v[:18], (2, 3, 3), 4.0),
                                                         M(v[18:], (3, 2))), 24),
    ("right_tri_low", lambda v: sl.mdivide_right_tri_low(M(v[9:], (2, 3)),
                                                         M(v[:9], (3, 3), 4.0)), 15),
    ("mult_lower_tri_self_t", lambda v: sl.multiply_lower_tri_self_transpose(
        M(v, (2, 4, 3))), 24),
    ("mdivide_left", lambda v: sl.mdivide_left(M(v[:9], (3, 3), 4.0), v[9:]), 12),
    ("mdivide_left_Astack", lambda v: sl.mdivide_left(M(v[:18], (2, 3, 3), 4.0),
                                                      M(v[18:], (3, 2))), 24),
    ("mdivide_right", lambda v: sl.mdivide_right(M(v[9:], (2, 3)), M(v[:9], (3, 3), 4.0)), 15),
    ("solve_bstack", lambda v: sl.solve(M(v[:9], (3, 3), 4.0), M(v[9:], (2, 3, 2))), 21),
    ("mdivide_left_spd", lambda v: sl.mdivide_left_spd(SPD(v[:9], (3, 3)), v[9:]), 12),
    ("mdivide_right_spd", lambda v: sl.mdivide_right_spd(M(v[9:], (2, 3)),
                                                         SPD(v[:9], (3, 3))), 15),
    ("inverse", lambda v: sl.inverse(M(v, (2, 3, 3), 4.0)), 18),
    ("inverse_spd", lambda v: sl.inverse_spd(SPD(v, (3, 3))), 9),
    ("log_determinant", lambda v: sl.log_determinant(M(v, (2, 3, 3), 4.0)), 18),
    ("determinant", lambda v: sl.determinant(M(v, (2, 3, 3), 4.0)), 18),
    ("log_determinant_spd", lambda v: sl.log_determinant_spd(SPD(v, (2, 3, 3))), 18),
    ("eigenvalues_sym", lambda v: sl.eigenvalues_sym(SPD(v, (2, 3, 3))), 18),
    ("eigenvectors_sym", lambda v: sl.eigenvectors_sym(SPD(v, (2, 3, 3))), 18),
    ("gp_1d", lambda v: sl.gp_exp_quad_cov(v[:4], sl.exp(v[4]), sl.exp(v[5])), 6),
    ("gp_2d", lambda v: sl.cov_exp_quad(M(v[:6], (3, 2)), sl.exp(v[6]), sl.exp(v[7])), 8),
]
FWD_IDS = [c[0] for c in FWD_CASES]


def _point(name, n):
    return 0.5 * _rng(sum(map(ord, name))).standard_normal(n)


@pytest.mark.parametrize("name,f,n", FWD_CASES, ids=FWD_IDS)
def test_jvp(name, f, n):
    sl.assert_jvp(f, _point(name, n))


@pytest.mark.parametrize("name,f,n", FWD_CASES, ids=FWD_IDS)
def test_hessian_forward_over_reverse(name, f, n):
    def scalar(v):
        y = f(v)
        return sl.sum(sl.sin(y) * y)
    sl.assert_hessian(scalar, _point(name, n))


@pytest.mark.parametrize("fname", ["cholesky_decompose", "eigenvalues_sym",
                                   "eigenvectors_sym", "log_determinant_spd"])
def test_jvp_vjp_duality_symmetric_input(fname):
    # <u, J dA> = <J^T u, dA> also for a non-symmetric dA: the forward rules use the
    # symmetric part of dA, exactly the perturbations the symmetric adjoints are for
    f = getattr(sl, fname)
    a = spd(4, 40)
    r = _rng(41)
    da = r.standard_normal((4, 4))
    u = r.standard_normal(np.shape(f(a)))
    _, t = sl.jvp(f)(a, da)
    _, (abar,) = sl.vjp(f, a, cotangent=u if np.ndim(u) else float(u))
    assert np.isclose(np.sum(u * t), np.sum(abar * da), rtol=1e-10, atol=1e-12)
    assert np.allclose(sl.jvp(f)(a, da)[1], sl.jvp(f)(a, 0.5 * (da + da.T))[1])


def test_hessian_log_determinant_closed_form():
    # d2 log|A| [E, F] = -tr(A^-1 E A^-1 F): H[ij, kl] = -Ainv[j, k] Ainv[l, i]
    a = well(3, 42)
    ai = np.linalg.inv(a)
    H = sl.hessian(lambda v: sl.log_determinant(sl.reshape(v, (3, 3))))(a.ravel())
    assert np.allclose(H, -np.einsum("jk,li->ijkl", ai, ai).reshape(9, 9))
    # log_determinant_spd: the same for symmetric perturbations (sym(E), sym(F))
    s = spd(3, 43)
    si = np.linalg.inv(s)
    Hs = sl.hessian(sl.log_determinant_spd)(s)
    ref = -0.5 * (np.einsum("ik,lj->ijkl", si, si) + np.einsum("il,kj->ijkl", si, si))
    assert np.allclose(Hs, ref)


def test_hessian_quad_form_closed_form():
    # c = b^T A b: H_AA = 0, d2c/dA_ij db_m = d_im b_j + b_i d_jm, H_bb = A + A^T
    r = _rng(44)
    a, b = r.standard_normal((3, 3)), r.standard_normal(3)
    H = sl.hessian(lambda v: sl.quad_form(sl.reshape(v[:9], (3, 3)), v[9:]))(
        np.concatenate([a.ravel(), b]))
    e = np.eye(3)
    hab = (np.einsum("im,j->ijm", e, b) + np.einsum("i,jm->ijm", b, e)).reshape(9, 3)
    assert np.allclose(H[:9, :9], 0.0)
    assert np.allclose(H[:9, 9:], hab) and np.allclose(H[9:, :9], hab.T)
    assert np.allclose(H[9:, 9:], a + a.T)


def test_hessian_quad_form_of_the_seeded_vector():
    # the vector itself traced (its tangent is the Hessian's identity seed: the JVP
    # takes a shortcut there): closed form A + A^T, and a nonlinear function of it
    # against central differences of the gradient
    r = _rng(45)
    a, x = r.standard_normal((4, 4)), r.standard_normal(4)
    for qf in (sl.quad_form, lambda A, v: sl.quad_form_sym(A + A.T, v)):
        np.testing.assert_allclose(sl.hessian(lambda v: qf(a, v))(x),
                                   a + a.T if qf is sl.quad_form else 2 * (a + a.T),
                                   rtol=1e-13, atol=1e-13)
    s = a @ a.T + np.eye(4)
    sl.assert_hessian(lambda v: -4.5 * sl.log1p(sl.quad_form_sym(s, v) / 5.0), x)
    # J = d/dx (the vector output of) quad_form's JVP path with a batch of tangents
    sl.assert_jvp(lambda v: sl.quad_form(a, v), x)


def test_hessian_gp_marginal_likelihood_closed_form():
    # L(theta) = -y^T K^-1 y / 2 - log det K / 2, K = alpha^2 E(rho) + sigma^2 I,
    # theta = log(alpha, rho, sigma):
    # d2L/di dj = -a^T K_i K^-1 K_j a + a^T K_ij a / 2
    #             + tr(K^-1 K_i K^-1 K_j) / 2 - tr(K^-1 K_ij) / 2,     a = K^-1 y
    x = np.linspace(0.0, 3.0, 6)
    y = np.sin(x) + 0.1 * _rng(45).standard_normal(6)

    def lp(th):
        K = sl.add_diag(sl.gp_exp_quad_cov(x, sl.exp(th[0]), sl.exp(th[1])),
                        sl.exp(2.0 * th[2]))
        L = sl.cholesky_decompose(K)
        z = sl.mdivide_left_tri_low(L, y)
        return -0.5 * sl.sum(z * z) - 0.5 * sl.log_determinant_spd(K)

    th = np.array([0.3, -0.2, -1.0])
    al, rho, sig = np.exp(th)
    d2 = (x[:, None] - x[None, :]) ** 2
    kse = al ** 2 * np.exp(-0.5 * d2 / rho ** 2)
    eye = np.eye(6)
    K = kse + sig ** 2 * eye
    q = d2 / rho ** 2
    dk = [2 * kse, kse * q, 2 * sig ** 2 * eye]
    ddk = [[4 * kse, 2 * kse * q, 0 * eye],
           [2 * kse * q, kse * (q * q - 2 * q), 0 * eye],
           [0 * eye, 0 * eye, 4 * sig ** 2 * eye]]
    ki = np.linalg.inv(K)
    a = ki @ y
    ref = np.array([[-a @ dk[i] @ ki @ dk[j] @ a + 0.5 * a @ ddk[i][j] @ a
                     + 0.5 * np.trace(ki @ dk[i] @ ki @ dk[j]) - 0.5 * np.trace(ki @ ddk[i][j])
                     for j in range(3)] for i in range(3)])
    assert np.allclose(sl.hessian(lp)(th), ref, rtol=1e-9, atol=1e-10)
    sl.assert_hessian(lp, th)


def _third_order_fd(f, v, h=1e-4):
    """d/dv_k of the Hessian by central differences of sl.hessian."""
    hess = sl.hessian(f)
    return np.stack([(hess(v + h * e) - hess(v - h * e)) / (2 * h) for e in np.eye(v.size)],
                    axis=-1)


THIRD_ORDER = {
    "log_determinant": lambda v: sl.log_determinant(M(v, (3, 3), 3.0)),
    "log_determinant_spd": lambda v: sl.log_determinant_spd(SPD(v, (3, 3))),
    "cholesky_decompose": lambda v: sl.sum(sl.sin(sl.cholesky_decompose(SPD(v, (3, 3))))),
}


@pytest.mark.parametrize("name", list(THIRD_ORDER))
def test_third_order(name):
    # grad_hessian: forward over the forward-over-reverse Hessian (the JVP rules are
    # themselves differentiated) vs central differences of sl.hessian
    f = THIRD_ORDER[name]
    v = _point(name, 9)
    T = sl.grad_hessian(f)(v)
    assert np.allclose(T, _third_order_fd(f, v), rtol=1e-6, atol=1e-8)
    # a third derivative is symmetric in all its indices
    assert np.allclose(T, np.transpose(T, (1, 0, 2)))
    assert np.allclose(T, np.transpose(T, (2, 1, 0)))
