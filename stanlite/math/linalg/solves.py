"""Linear systems, inverses and determinants, and the factorisations they use.

- triangular solves (``mdivide_left_tri_low``, ``mdivide_right_tri_low``): one
  primitive ``_trisolve`` calling LAPACK's ``dtrtrs`` directly;
- the Cholesky factor (``cholesky_decompose``) and what is built on it for
  symmetric positive-definite matrices: ``mdivide_left_spd``, ``mdivide_right_spd``,
  ``inverse_spd``, ``log_determinant_spd`` (triangular solves, no explicit inverse);
- general (LU) solves ``mdivide_left`` / ``solve`` / ``mdivide_right``, ``inverse``,
  ``log_determinant`` and ``determinant``.

Rules (Giles: inverse, inverse product, determinant, Cholesky factorisation) are in
the package docstring; they are written with stanlite operations so that they are
differentiated again under nested differentiation.
"""

import numpy as np
from scipy.linalg.lapack import dtrtrs as _dtrtrs

from ...autodiff.extend import defjvp, defjvp_all, defvjp, defvjp_all, primitive
from ...autodiff.var import shape_of
from ...errors import DomainError
from ..reductions import sum as _rsum
from ..structure import reshape
from .common import (_as_float, _check_right, _check_rows, _check_square, _domain, _factor_symmetric, _mT,
                     _pad, _per_matrix, _scalar_out, _sym, _tril_mask)
from .products import matmul


# --------------------------------------------------------------------------------------
# triangular solves and Cholesky
# --------------------------------------------------------------------------------------
def _batched(fn, a, b):
    """Apply a 2-D solver ``fn(a, b)`` over the broadcast leading axes of a and b."""
    if a.ndim == 2 and b.ndim == 2:
        return fn(a, b)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    ab = np.broadcast_to(a, batch + a.shape[-2:])
    bb = np.broadcast_to(b, batch + b.shape[-2:])
    out = np.empty(batch + b.shape[-2:])
    for i in np.ndindex(*batch):
        out[i] = fn(ab[i], bb[i])
    return out


@primitive
def _trisolve(L, b, trans):
    """``L^-1 b`` (``trans=False``) or ``L^-T b`` (``trans=True``) for the lower
    triangle of ``L`` (the upper triangle is not read); ``b`` a matrix; stacks of
    either broadcast."""
    L = _as_float(L)
    b = _as_float(b)

    if L.shape[-1] == 0 or b.shape[-1] == 0:
        return np.zeros(np.broadcast_shapes(L.shape[:-2], b.shape[:-2]) + b.shape[-2:])
    t = 1 if trans else 0

    def solve(l2, b2):
        # LAPACK dtrtrs, the routine behind scipy.linalg.solve_triangular, called
        # directly: solve_triangular's argument handling costs ~20x the solve itself
        # on the small matrices of typical models. LAPACK wants column-major: a
        # row-major L is handed over as the column-major U = L^T (no copy) with the
        # transposition flipped, since L^-1 b = U^-T b
        if l2.flags.c_contiguous and not l2.flags.f_contiguous:
            x, info = _dtrtrs(l2.T, b2, lower=0, trans=1 - t)
        else:
            x, info = _dtrtrs(l2, b2, lower=1, trans=t)
        if info > 0:
            raise DomainError("triangular solve: the matrix is singular (zero on the "
                              "diagonal)")
        if info < 0:  # pragma: no cover - an argument LAPACK rejected
            raise ValueError(f"triangular solve: LAPACK dtrtrs argument {-info} invalid")
        return x
    if L.ndim == 2 and b.ndim > 2:
        # one L, many right-hand sides (forward-mode batches): one solve on the
        # columns side by side, (..., n, k) -> (n, ... k)
        n = b.shape[-2]
        cols = np.moveaxis(b, -2, 0)
        x = solve(L, np.ascontiguousarray(cols.reshape(n, -1)))
        return np.moveaxis(x.reshape(cols.shape), 0, -2)
    return _batched(solve, L, b)


def _trisolve_vjp_all(g, ans, L, b, trans):
    # C = L^-1 B: B_bar = L^-T G, L_bar = -B_bar C^T   (Giles: inverse product)
    # C = L^-T B: B_bar = L^-1 G, L_bar = -C B_bar^T
    # restricted to the lower triangle, the only part of L that is read
    b_bar = _trisolve(L, g, not trans)
    l_bar = -matmul(ans, _mT(b_bar)) if trans else -matmul(b_bar, _mT(ans))
    return _tril_mask(shape_of(L)[-1]) * l_bar, b_bar, None


defvjp_all(_trisolve, _trisolve_vjp_all)


def _trisolve_jvp_all(ts, ans, L, b, trans):
    # C = L^-1 B:  dC = L^-1 (dB - tril(dL) C);  C = L^-T B:  dC = L^-T (dB - tril(dL)^T C)
    tL, tb, _ = ts
    nd = len(shape_of(ans))
    rhs = None if tb is None else _pad(tb, b, nd)
    if tL is not None:
        dl = _tril_mask(shape_of(L)[-1]) * _pad(tL, L, nd)
        d = matmul(_mT(dl) if trans else dl, ans)
        rhs = -d if rhs is None else rhs - d
    return _trisolve(L, rhs, trans)


defjvp_all(_trisolve, _trisolve_jvp_all)


def _tri_low(fname, L, b, trans):
    sL, sb = shape_of(L), shape_of(b)
    _check_square(fname, "L", sL)
    _check_rows(fname, sL, sb, "L", "b")
    try:
        if len(sb) == 1:
            return _trisolve(L, reshape(b, (sb[0], 1)), trans)[..., 0]
        return _trisolve(L, b, trans)
    except ValueError as e:
        if str(e).startswith("triangular solve"):
            _domain(fname, "L is singular (zero on the diagonal)")
        raise


def mdivide_left_tri_low(L, b):
    """``L^-1 b`` for the lower triangle of ``L`` (``b`` a vector or a matrix)."""
    return _tri_low("mdivide_left_tri_low", L, b, False)


def mdivide_right_tri_low(b, L):
    """``b L^-1`` for the lower triangle of ``L`` (``b`` a row vector or a matrix);
    computed as ``(L^-T b^T)^T``."""
    fname = "mdivide_right_tri_low"
    sb = shape_of(b)
    _check_right(fname, shape_of(L), sb, "L")
    if len(sb) == 1:
        return _tri_low(fname, L, b, True)
    return _mT(_tri_low(fname, L, _mT(b), True))


@primitive
def _cholesky(a, fname):
    return _factor_symmetric(fname, a, np.linalg.cholesky, "A is not positive definite")


def _cholesky_vjp(g, ans, a, fname):
    # dL = L Phi(L^-1 dA L^-T) (Giles: Cholesky factorisation; Murray 2016) gives
    # A_bar = 1/2 (S + S^T), S = L^-T Phi(L^T L_bar) L^-1 with Phi = lower triangle,
    # diagonal halved (S symmetrised: A_bar is the gradient for symmetric dA).
    L = ans
    n = shape_of(L)[-1]
    phi = (_tril_mask(n) - 0.5 * np.eye(n)) * matmul(_mT(L), g)
    x = _trisolve(L, phi, True)                 # L^-T Phi
    s = _mT(_trisolve(L, _mT(x), True))         # (L^-T (L^-T Phi)^T)^T = L^-T Phi L^-1
    return _sym(s)


defvjp(_cholesky, _cholesky_vjp, None)


def _cholesky_jvp(t, ans, a, fname):
    # dL = L Phi(L^-1 dA L^-T) for the symmetric part of dA (the perturbations the
    # VJP's symmetric A_bar is the gradient for)
    L = ans
    n = shape_of(L)[-1]
    x = _trisolve(L, _sym(t), False)            # L^-1 dA
    y = _trisolve(L, _mT(x), False)             # L^-1 (L^-1 dA)^T = L^-1 dA L^-T
    return matmul(L, (_tril_mask(n) - 0.5 * np.eye(n)) * y)


defjvp(_cholesky, _cholesky_jvp, None)
# not lowered (program.cholesky_rule exists): a GP covariance is often so ill-conditioned
# (kappa ~ 1e10 with a 1e-10 jitter) that the kernel's Cholesky and LAPACK's, both right
# to rounding, give gradients 1e-8 apart - and the spot checks (1e-12) then hand the
# whole run to the eager tape (gp_pois_regr, 250 draws: 39 s; 35 s in the Python
# replay, 13 ms a gradient; the interpreter's gradient is 20 us). Until a failed check
# falls back to the Python replay rather than the tape, such programs replay in Python.


def cholesky_decompose(a):
    """The lower-triangular Cholesky factor ``L`` of a symmetric positive-definite
    ``A = L L^T`` (stacks allowed). Raises ``ValueError`` if ``A`` is not square,
    not symmetric or not positive definite.

    >>> import numpy as np, stanlite as sl
    >>> sl.cholesky_decompose(np.array([[4.0, 2.0], [2.0, 2.0]]))
    array([[2., 0.],
           [1., 1.]])
    """
    return _cholesky(a, "cholesky_decompose")



def _spd_solve(fname, a, b):
    """``A^-1 b`` through ``A = L L^T``: two triangular solves, no inverse."""
    sa, sb = shape_of(a), shape_of(b)
    _check_square(fname, "A", sa)
    _check_rows(fname, sa, sb, "A", "b")
    L = _cholesky(a, fname)
    if len(sb) == 1:
        col = reshape(b, (sb[0], 1))
        return _trisolve(L, _trisolve(L, col, False), True)[..., 0]
    return _trisolve(L, _trisolve(L, b, False), True)


def mdivide_left_spd(a, b):
    """``A^-1 b`` for a symmetric positive-definite ``A`` (via Cholesky)."""
    return _spd_solve("mdivide_left_spd", a, b)


def mdivide_right_spd(b, a):
    """``b A^-1`` for a symmetric positive-definite ``A`` (via Cholesky)."""
    fname = "mdivide_right_spd"
    sb = shape_of(b)
    _check_right(fname, shape_of(a), sb, "A")
    if len(sb) == 1:
        return _spd_solve(fname, a, b)
    return _mT(_spd_solve(fname, a, _mT(b)))      # A symmetric: (A^-1 b^T)^T


def inverse_spd(a):
    """``A^-1`` for a symmetric positive-definite ``A``: ``L^-T L^-1`` from Cholesky."""
    L = _cholesky(a, "inverse_spd")
    linv = _trisolve(L, np.eye(shape_of(a)[-1]), False)
    return matmul(_mT(linv), linv)


# --------------------------------------------------------------------------------------
# general solves, inverse, determinants
# --------------------------------------------------------------------------------------
@primitive
def _solve(a, b):
    """``A^-1 B`` for square ``A`` and a matrix ``B`` (LU, stacks broadcast)."""
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise DomainError("solve: the matrix is singular") from None


def _solve_vjp_all(g, ans, a, b):
    # C = A^-1 B: B_bar = A^-T G, A_bar = -B_bar C^T      (Giles: inverse product)
    b_bar = _solve(_mT(a), g)
    return -matmul(b_bar, _mT(ans)), b_bar


defvjp_all(_solve, _solve_vjp_all)


def _solve_jvp_all(ts, ans, a, b):
    # C = A^-1 B: dC = A^-1 (dB - dA C)                     (Giles: inverse product)
    ta, tb = ts
    nd = len(shape_of(ans))
    rhs = None if tb is None else _pad(tb, b, nd)
    if ta is not None:
        d = matmul(_pad(ta, a, nd), ans)
        rhs = -d if rhs is None else rhs - d
    return _solve(a, rhs)


defjvp_all(_solve, _solve_jvp_all)


def _general_solve(fname, a, b):
    sa, sb = shape_of(a), shape_of(b)
    _check_square(fname, "A", sa)
    _check_rows(fname, sa, sb, "A", "b")
    try:
        if len(sb) == 1:
            return _solve(a, reshape(b, (sb[0], 1)))[..., 0]
        return _solve(a, b)
    except ValueError as e:
        if str(e).startswith("solve:"):
            _domain(fname, "A is singular")
        raise


def mdivide_left(a, b):
    """``A^-1 b`` (Stan's ``A \\ b``) for a square ``A`` and a vector or matrix ``b``."""
    return _general_solve("mdivide_left", a, b)


solve = mdivide_left


def mdivide_right(b, a):
    """``b A^-1`` (Stan's ``b / A``), computed as ``(A^-T b^T)^T``."""
    fname = "mdivide_right"
    sb = shape_of(b)
    _check_right(fname, shape_of(a), sb, "A")
    if len(sb) == 1:
        return _general_solve(fname, _mT(a), b)
    return _mT(_general_solve(fname, _mT(a), _mT(b)))


@primitive
def inverse(a):
    """``A^-1`` for a square ``A`` (stacks allowed); prefer the ``mdivide_*``
    functions to multiplying by an inverse."""
    a = _as_float(a)
    _check_square("inverse", "A", a.shape)
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        raise DomainError("inverse: A is singular") from None


# Giles: inverse. C = A^-1, A_bar = -C^T G C^T
defvjp(inverse, lambda g, ans, a: -matmul(_mT(ans), matmul(g, _mT(ans))))
# dC = -C dA C
defjvp(inverse, lambda t, ans, a: -matmul(ans, matmul(t, ans)))


def _tr_prod(mt, t):
    """``tr(M dA)`` per matrix, given ``mt = M^T`` (elementwise, over the last two axes)."""
    return _rsum(mt * t, axis=(-2, -1))


@primitive
def log_determinant(a):
    """``log |det A|`` (via an LU factorisation; ``-inf`` for a singular ``A``)."""
    a = _as_float(a)
    _check_square("log_determinant", "A", a.shape)
    return _scalar_out(np.linalg.slogdet(a)[1])


# d log|det A| = tr(A^-1 dA)  ->  A_bar = g A^-T           (Giles: determinant, / det)
defvjp(log_determinant, lambda g, ans, a: _per_matrix(g) * _mT(inverse(a)))
# d log|det A| = tr(A^-1 dA)
defjvp(log_determinant, lambda t, ans, a: _tr_prod(_mT(inverse(a)), t))


@primitive
def determinant(a):
    """``det A`` (stacks allowed)."""
    a = _as_float(a)
    _check_square("determinant", "A", a.shape)
    return _scalar_out(np.linalg.det(a))


# Giles: determinant. A_bar = g det(A) A^-T (needs a non-singular A)
defvjp(determinant, lambda g, ans, a: _per_matrix(g * ans) * _mT(inverse(a)))
# d det A = det A tr(A^-1 dA)
defjvp(determinant, lambda t, ans, a: ans * _tr_prod(_mT(inverse(a)), t))


@primitive
def log_determinant_spd(a):
    """``log det A`` for a symmetric positive-definite ``A``: ``2 sum log diag(L)``."""
    a = _as_float(a)
    L = _cholesky(a, "log_determinant_spd")
    return _scalar_out(2.0 * np.sum(np.log(np.diagonal(L, axis1=-2, axis2=-1)), axis=-1))


def _inv_spd(a, fname):
    """``A^-1 = L^-T L^-1`` (symmetric) from the Cholesky factor."""
    L = _cholesky(a, fname)
    linv = _trisolve(L, np.eye(shape_of(a)[-1]), False)
    return matmul(_mT(linv), linv)


def _logdet_spd_vjp(g, ans, a):
    # A_bar = g A^-1 = g L^-T L^-1 (two triangular solves, symmetric)
    return _per_matrix(g) * _inv_spd(a, "log_determinant_spd")


defvjp(log_determinant_spd, _logdet_spd_vjp)
# d log det A = tr(A^-1 dA)
defjvp(log_determinant_spd,
       lambda t, ans, a: _tr_prod(_inv_spd(a, "log_determinant_spd"), t))
