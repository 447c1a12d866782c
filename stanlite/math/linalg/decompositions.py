"""Spectral and orthogonal decompositions: symmetric eigendecomposition
(``eigenvalues_sym``, ``eigenvectors_sym``), thin QR (``qr_thin_Q``, ``qr_thin_R``)
and thin SVD (``singular_values``, ``svd_U``, ``svd_V``).

Each factor is made unique by a sign convention (stated at each function) so that it
is a differentiable function of the matrix; the derivatives (Giles for the
eigenproblem, Walter & Lehmann 2018 for QR, Townsend 2016 for the SVD) are written
out in the comments above each group, and raise :class:`~stanlite.DomainError` where
the factor is not unique (repeated eigen- or singular values, a singular R).
"""

import math

import numpy as np

from ...autodiff.extend import defjvp, defvjp, primitive
from ...autodiff.var import guarded, shape_of
from ...autodiff.vm import opcodes as _op
from ...autodiff.vm.declare import defkernel as _defkernel
from ...errors import DomainError
from ..reductions import sum as _rsum
from ..structure import reshape
from .common import _as_float, _matrix2, _mT, _nan_check, _factor_symmetric, _sym
from .products import matmul
from .solves import _trisolve


# --------------------------------------------------------------------------------------
# symmetric eigendecomposition
# --------------------------------------------------------------------------------------
def _eigh(fname, a):
    return _factor_symmetric(fname, a, np.linalg.eigh,
                             "the eigendecomposition did not converge")


@primitive
def eigenvalues_sym(a):
    """Eigenvalues of a symmetric ``A`` in ascending order (as Stan)."""
    return _eigh("eigenvalues_sym", a)[0]


def _eigenvalues_vjp(g, ans, a):
    # d l_i = v_i^T dA v_i  ->  A_bar = V diag(g) V^T        (Giles: eigenvalues, D_bar)
    V = eigenvectors_sym(a)
    sg = shape_of(g)
    return matmul(V * reshape(g, sg[:-1] + (1, sg[-1])), _mT(V))


defvjp(eigenvalues_sym, _eigenvalues_vjp)


def _eigenvalues_jvp(t, ans, a):
    # d l_i = v_i^T dA v_i = sum_j V_ji (dA V)_ji
    V = eigenvectors_sym(a)
    return _rsum(V * matmul(t, V), axis=-2)


defjvp(eigenvalues_sym, _eigenvalues_jvp)


@primitive
def eigenvectors_sym(a):
    """Unit eigenvectors of a symmetric ``A`` as columns, in the order of
    :func:`eigenvalues_sym`.

    Sign convention: an eigenvector is only defined up to sign; each column is
    oriented so that its component of largest magnitude is positive. That choice is
    deterministic and locally constant, so the function is differentiable where the
    eigenvalues are distinct (Stan leaves the sign to Eigen's solver).

    Limitation: the derivative involves ``1 / (l_j - l_i)``; it is infinite/undefined
    for repeated eigenvalues (the eigenvectors of a repeated eigenvalue are not
    unique), and inaccurate when eigenvalues are nearly equal.
    """
    v = _eigh("eigenvectors_sym", a)[1]
    k = np.argmax(np.abs(v), axis=-2)[..., None, :]
    s = np.sign(np.take_along_axis(v, k, axis=-2))
    s[s == 0] = 1.0
    return v * s


def _eigenvectors_vjp(g, ans, a):
    # Giles: eigenvalues and eigenvectors, symmetric case (U^-1 = U^T):
    # dV = V (F o (V^T dA V)), F_ij = 1 / (l_j - l_i) for i != j, 0 on the diagonal;
    # hence
    # A_bar = V (F o (V^T V_bar)) V^T, symmetrised (gradient for symmetric dA).
    V = ans
    p = _eig_f(eigenvalues_sym(a)) * matmul(_mT(V), g)
    return _sym(matmul(V, matmul(p, _mT(V))))


def _eig_f(lam):
    """F_ij = 1 / (l_j - l_i) for i != j, 0 on the diagonal (stacks allowed)."""
    sl_ = shape_of(lam)
    n = sl_[-1]
    diff = reshape(lam, sl_[:-1] + (1, n)) - reshape(lam, sl_[:-1] + (n, 1))  # l_j - l_i
    eye = np.eye(n)
    return (1.0 - eye) / (diff + eye)


defvjp(eigenvectors_sym, _eigenvectors_vjp)


def _eigenvectors_jvp(t, ans, a):
    # dV = V (F o (V^T dA V)), for the symmetric part of dA (as the VJP). The sign
    # normalisation is a locally constant column scaling S, and V S (F o S P S) =
    # V (F o P) S, so the rule holds for the normalised V as well.
    V = ans
    p = _sym(matmul(_mT(V), matmul(t, V)))
    return matmul(V, _eig_f(eigenvalues_sym(a)) * p)


defjvp(eigenvectors_sym, _eigenvectors_jvp)


# --------------------------------------------------------------------------------------
# thin QR:  A = Q R,  Q (m x k) orthonormal columns, R (k x n) upper, k = min(m, n),
# diag(R) >= 0 (Stan's sign convention, which makes the factors unique for full rank).
#
# Only Q is a primitive; R = triu(Q^T A) exactly (its derivative is upper triangular
# too, so the mask drops only rounding). For m >= n (Walter & Lehmann 2018), with R
# invertible, from dA = dQ R + Q dR (Q^T dQ antisymmetric, dR R^-1 upper):
#     JVP:  C = Q^T dA R^-1,  W = tril(C, -1) - tril(C, -1)^T  (= Q^T dQ),
#           dQ = dA R^-1 - Q (C - W)
#     VJP:  A_bar = (Q_bar - Q N) R^-T,   M = Q^T Q_bar,  N = triu(M) + triu(M, 1)^T
#           (the JVP's transpose: C - W = triu(C) + tril(C, -1)^T)
# A wide A (m < n) is [X | Y] with X square: Q = Q(X), so the same rules apply to X.
# --------------------------------------------------------------------------------------
@primitive
def _qr_q(a):
    """Thin Q of a (m x n, m >= n) with diag(R) >= 0."""
    a = _as_float(a)
    _nan_check("qr_thin_Q", a)
    q, r = np.linalg.qr(a)
    s = np.sign(np.diagonal(r)).copy()
    s[s == 0] = 1.0
    return q * s


def _qr_r_of(q, a):
    """R = triu(Q^T A) (exact: Q^T A is upper triangular, up to rounding)."""
    k, n = shape_of(q)[-1], shape_of(a)[-1]
    return np.triu(np.ones((k, n))) * matmul(_mT(q), a)


def _right_solve_rt(b, r):
    """``b R^-T`` for upper-triangular R: (R^-1 b^T)^T = (L^-T b^T)^T with L = R^T."""
    return _mT(_trisolve(_mT(r), _mT(b), True))


def _right_solve_r(b, r):
    """``b R^-1`` for upper-triangular R: (L^-1 b^T)^T with L = R^T."""
    return _mT(_trisolve(_mT(r), _mT(b), False))


def _qr_r_checked(q, a):
    """R for the derivative rules, which solve with it: singular R (A's first k columns
    linearly dependent) is a DomainError, not a silently huge derivative."""
    r = _qr_r_of(q, a)
    guarded(_check_qr_rank, r)
    return r


def _check_qr_rank(r):
    d = np.abs(np.diagonal(np.asarray(r)))
    if d.size and not d.min() > 1e-12 * max(float(np.max(np.abs(r))), 1e-300):
        raise DomainError("qr_thin_Q: the derivative needs the first min(m, n) columns of "
                          "A to be linearly independent, but R is singular (smallest "
                          f"|diagonal| {float(d.min())!r})")


def _qr_q_vjp(g, ans, a):
    q = ans
    r = _qr_r_checked(q, a)
    m = matmul(_mT(q), g)
    k = shape_of(m)[-1]
    n = np.triu(np.ones((k, k))) * m + _mT(np.triu(np.ones((k, k)), 1) * m)
    return _right_solve_rt(g - matmul(q, n), r)


def _qr_q_jvp(t, ans, a):
    q = ans
    r = _qr_r_checked(q, a)
    x = _right_solve_r(t, r)                    # dA R^-1
    c = matmul(_mT(q), x)
    strict = np.tril(np.ones(shape_of(r)[-2:]), -1)
    w = strict * c - _mT(strict * c)
    return x - matmul(q, c - w)


defvjp(_qr_q, _qr_q_vjp)
defjvp(_qr_q, _qr_q_jvp)


def qr_thin_Q(a):
    """The orthonormal factor Q (m x k, k = min(m, n)) of the thin QR decomposition
    ``A = Q R`` (Stan's ``qr_thin_Q``), with the signs that make diag(R) >= 0.
    Differentiable where the first k columns of A are linearly independent (a
    singular R raises ``DomainError`` in the derivative).

    >>> import numpy as np, stanlite as sl
    >>> A = np.array([[3.0, 1.0], [4.0, 2.0], [0.0, 2.0]])
    >>> Q = sl.qr_thin_Q(A)
    >>> Q.shape, np.allclose(Q.T @ Q, np.eye(2)), np.allclose(Q @ sl.qr_thin_R(A), A)
    ((3, 2), True, True)
    """
    m, n = _matrix2("qr_thin_Q", a)
    return _qr_q(a if m >= n else a[:, :m])


def qr_thin_R(a):
    """The upper-trapezoidal factor R (k x n, k = min(m, n)) of the thin QR
    decomposition ``A = Q R`` (Stan's ``qr_thin_R``), diag(R) >= 0; computed as
    ``triu(Q^T A)`` with Q = :func:`qr_thin_Q` (so its derivative is Q's).

    >>> import numpy as np, stanlite as sl
    >>> sl.qr_thin_R(np.array([[3.0, 1.0], [4.0, 2.0]])).round(6) + 0.0
    array([[5. , 2.2],
           [0. , 0.4]])
    """
    _matrix2("qr_thin_R", a)
    return _qr_r_of(qr_thin_Q(a), a)


# --------------------------------------------------------------------------------------
# singular value decomposition:  A = U diag(s) V^T  (thin: U m x k, V n x k,
# k = min(m, n), s descending). Signs: each column of U has its entry of largest
# magnitude positive (V's column flipped with it): deterministic and locally constant.
# Derivatives (Townsend 2016, "Differentiating the singular value decomposition"),
# with F_ij = 1 / (s_j^2 - s_i^2) (i != j), 0 on the diagonal, S = diag(s):
#   s:  ds_i = u_i^T dA v_i;                A_bar = U diag(s_bar) V^T
#   U:  dU = U (F o (dP S + S dP^T)) + (I - U U^T) dA V S^-1,     dP = U^T dA V
#       A_bar = U (F o (U^T U_bar - U_bar^T U)) S V^T + (I - U U^T) U_bar S^-1 V^T
#   V:  dV = V (F o (S dP + dP^T S)) + (I - V V^T) dA^T U S^-1
#       A_bar = U S (F o (V^T V_bar - V_bar^T V)) V^T + U S^-1 V_bar^T (I - V V^T)
# U and V need distinct singular values (and non-zero ones for the (I - U U^T) terms
# of a non-square A): otherwise they are not unique and a DomainError says so.
# --------------------------------------------------------------------------------------
def _svd(fname, a):
    a = _as_float(a)
    _matrix2(fname, a)
    _nan_check(fname, a)
    try:
        u, s, vt = np.linalg.svd(a, full_matrices=False)
    except np.linalg.LinAlgError:
        raise DomainError(f"{fname}: the SVD did not converge") from None
    k = np.argmax(np.abs(u), axis=0)
    sign = np.sign(u[k, np.arange(u.shape[1])])
    sign[sign == 0] = 1.0
    return u * sign, s, vt.T * sign


@primitive
def singular_values(a):
    """The singular values of ``A`` in decreasing order (Stan's ``singular_values``),
    differentiable: d s_i = u_i^T dA v_i (defined where the s_i are distinct; the sum
    of them is differentiable everywhere but at 0).

    >>> import numpy as np, stanlite as sl
    >>> sl.singular_values(np.array([[3.0, 0.0], [0.0, -4.0]]))
    array([4., 3.])
    """
    return _svd("singular_values", a)[1]


def _sv_vjp(g, ans, a):
    U, V = svd_U(a), svd_V(a)
    return matmul(U * reshape(g, (1, -1)), _mT(V))


def _sv_jvp(t, ans, a):
    U, V = svd_U(a), svd_V(a)
    return _rsum(U * matmul(t, V), axis=-2)


defvjp(singular_values, _sv_vjp)
defjvp(singular_values, _sv_jvp)


@primitive
def svd_U(a):
    """The left singular vectors U (m x k, k = min(m, n)) of the thin SVD
    ``A = U diag(s) V^T`` (Stan's ``svd_U``), columns in the order of
    :func:`singular_values`, each with its largest-magnitude entry positive.
    Differentiable where the singular values are distinct (and non-zero when A is
    not square); elsewhere U is not unique and the derivative raises ``DomainError``.

    >>> import numpy as np, stanlite as sl
    >>> A = np.array([[2.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    >>> sl.svd_U(A)
    array([[1., 0.],
           [0., 1.],
           [0., 0.]])
    """
    return _svd("svd_U", a)[0]


@primitive
def svd_V(a):
    """The right singular vectors V (n x k, k = min(m, n)) of the thin SVD
    ``A = U diag(s) V^T`` (Stan's ``svd_V``), signed to match :func:`svd_U`.
    Differentiable where the singular values are distinct (and non-zero when A is
    not square); elsewhere the derivative raises ``DomainError``.

    >>> import numpy as np, stanlite as sl
    >>> A = np.array([[0.0, 2.0], [1.0, 0.0]])
    >>> sl.svd_V(A)
    array([[0., 1.],
           [1., 0.]])
    """
    return _svd("svd_V", a)[2]


def _check_svd_derivative(fname, s, needs_positive):
    sv = np.asarray(s, dtype=float)
    scale = float(np.max(sv)) if sv.size else 0.0
    gaps = np.abs(np.diff(sv))
    if sv.size > 1 and not np.all(gaps > 1e-10 * scale):
        i = int(np.argmin(gaps))
        raise DomainError(
            f"{fname}: the derivative needs distinct singular values, but singular "
            f"values {i} and {i + 1} are {sv[i]!r} and {sv[i + 1]!r} (the singular "
            "vectors of a repeated singular value are not unique)")
    if needs_positive and sv.size and not sv[-1] > 1e-12 * scale:
        raise DomainError(f"{fname}: the derivative of the singular vectors of a "
                          f"non-square matrix needs non-zero singular values, but the "
                          f"smallest is {sv[-1]!r}")


def _svd_parts(fname, a, which):
    """(U, s, V, F) for the rules of svd_U/svd_V, after the distinctness check."""
    m, n = shape_of(a)
    s = singular_values(a)
    needs_positive = (m > n) if which == "U" else (n > m)
    guarded(lambda v: _check_svd_derivative(fname, v, needs_positive), s)
    k = shape_of(s)[-1]
    s2 = s * s
    diff = reshape(s2, (1, k)) - reshape(s2, (k, 1))          # s_j^2 - s_i^2
    eye = np.eye(k)
    F = (1.0 - eye) / (diff + eye)
    return svd_U(a), s, svd_V(a), F, m > k, n > k


def _svd_u_vjp(g, ans, a):
    U, s, V, F, tall, _ = _svd_parts("svd_U", a, "U")
    ut_g = matmul(_mT(U), g)
    inner = (F * (ut_g - _mT(ut_g))) * reshape(s, (1, -1))        # (F o (.)) S
    out = matmul(matmul(U, inner), _mT(V))
    if tall:
        proj = g - matmul(U, ut_g)                                # (I - U U^T) U_bar
        out = out + matmul(proj / reshape(s, (1, -1)), _mT(V))
    return out


def _svd_v_vjp(g, ans, a):
    U, s, V, F, _, wide = _svd_parts("svd_V", a, "V")
    vt_g = matmul(_mT(V), g)
    inner = reshape(s, (-1, 1)) * (F * (vt_g - _mT(vt_g)))        # S (F o (.))
    out = matmul(matmul(U, inner), _mT(V))
    if wide:
        proj = g - matmul(V, vt_g)                                # (I - V V^T) V_bar
        out = out + matmul(U / reshape(s, (1, -1)), _mT(proj))
    return out


def _svd_u_jvp(t, ans, a):
    U, s, V, F, tall, _ = _svd_parts("svd_U", a, "U")
    tv = matmul(t, V)                                              # dA V
    dp = matmul(_mT(U), tv)
    srow = reshape(s, (1, -1))
    scol = reshape(s, (-1, 1))
    out = matmul(U, F * (dp * srow + scol * _mT(dp)))
    if tall:
        out = out + (tv - matmul(U, dp)) / srow
    return out


def _svd_v_jvp(t, ans, a):
    U, s, V, F, _, wide = _svd_parts("svd_V", a, "V")
    tu = matmul(_mT(t), U)                                         # dA^T U
    dp = matmul(_mT(tu), V)                                        # U^T dA V
    srow = reshape(s, (1, -1))
    scol = reshape(s, (-1, 1))
    out = matmul(V, F * (scol * dp + _mT(dp) * srow))
    if wide:
        out = out + (tu - matmul(V, _mT(dp))) / srow
    return out


defvjp(svd_U, _svd_u_vjp)
defjvp(svd_U, _svd_u_jvp)
defvjp(svd_V, _svd_v_vjp)
defjvp(svd_V, _svd_v_jvp)


# the interpreter's CHOLESKY sweeps (autodiff/vm/declare.py; program.cholesky_rule,
# not attached to cholesky_decompose: see math/linalg/solves.py): the lower factor of
# V[a] (X1 x X1), scratch X3 (2 X1^2 values)
def _cholesky_row(code, r):
    # the op row both sweeps read: the factor's place, the operand's, and the order
    return code[r, _op.OUT], code[r, _op.A], code[r, _op.X1]


def _cholesky_forward(V, aux, code, r):
    # the lower Cholesky factor of a symmetric positive-definite A (upper part 0)
    o, a, n = _cholesky_row(code, r)
    for i in range(n):
        for j in range(i):
            if V[a + i * n + j] != V[a + j * n + i]:
                return _op.DOMAIN               # not exactly symmetric: the eager check
    for j in range(n):
        s = V[a + j * n + j]
        for k in range(j):
            s -= V[o + j * n + k] * V[o + j * n + k]
        if not s > 0.0 or not math.isfinite(s):
            return _op.DOMAIN                   # not positive definite: the eager error
        djj = math.sqrt(s)
        V[o + j * n + j] = djj
        for i in range(j + 1, n):
            t = V[a + i * n + j]
            for k in range(j):
                t -= V[o + i * n + k] * V[o + j * n + k]
            V[o + i * n + j] = t / djj
        for i in range(j):
            V[o + i * n + j] = 0.0
    return _op.OK


def _cholesky_reverse(V, A, aux, code, r):
    # A_bar = sym(L^-T Phi(L^T L_bar) L^-1), Phi: the lower triangle, diagonal halved
    # (linalg._cholesky_vjp, with the whole L_bar as there); scratch X3: 2 n^2 values
    o, a, n = _cholesky_row(code, r)
    P = code[r, _op.X3]
    X = P + n * n
    for i in range(n):
        for j in range(n):
            if j > i:
                V[P + i * n + j] = 0.0
                continue
            s = 0.0
            for k in range(n):
                s += V[o + k * n + i] * A[o + k * n + j]
            V[P + i * n + j] = 0.5 * s if i == j else s
    # X = L^-T Phi: solve L^T X = Phi, rows from the bottom
    for j in range(n):
        for i in range(n - 1, -1, -1):
            s = V[P + i * n + j]
            for k in range(i + 1, n):
                s -= V[o + k * n + i] * V[X + k * n + j]
            V[X + i * n + j] = s / V[o + i * n + i]
    # S = X L^-1: solve S L = X, columns from the right (S kept in P)
    for i in range(n):
        for j in range(n - 1, -1, -1):
            s = V[X + i * n + j]
            for k in range(j + 1, n):
                s -= V[P + i * n + k] * V[o + k * n + j]
            V[P + i * n + j] = s / V[o + j * n + j]
    for i in range(n):
        for j in range(n):
            A[a + i * n + j] += 0.5 * (V[P + i * n + j] + V[P + j * n + i])


_defkernel(_op.CHOLESKY, _cholesky_forward, _cholesky_reverse, helpers=(_cholesky_row,))
