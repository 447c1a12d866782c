"""The matrix exponential as a super node, with its Frechet-derivative rules.

``matrix_exp(A) = sum_k A^k / k!`` is computed on plain floats by the Pade
approximant with scaling and squaring of Higham (2005), "The scaling and squaring
method for the matrix exponential revisited", SIAM J. Matrix Anal. Appl. 26(4),
Algorithm 2.3: the smallest degree m in {3, 5, 7, 9} whose bound theta_m covers
||A||_1 is used directly; otherwise A is scaled by 2^-s so that ||A / 2^s||_1 <=
theta_13, the [13/13] approximant r_13 is evaluated and squared s times.

Derivatives never go through the Pade iterations (the AD review's super-node
lesson). They are the Frechet derivative ``L(A, E) = d/de expm(A + e E)`` at e = 0,
read off one exponential of a block upper-triangular matrix (Van Loan 1978,
"Computing integrals involving the matrix exponential"; Mathias 1996; Higham 2008,
"Functions of Matrices", Ch. 3 and 10)::

    expm([[A, E], [0, A]]) = [[expm(A), L(A, E)], [0, expm(A)]]

    tangent (JVP):  d expm(A)       = L(A, dA)
    adjoint (VJP):  A_bar           = L(A^T, G)            (G the output's adjoint)

The adjoint follows from the integral form L(A, E) = int_0^1 e^{sA} E e^{(1-s)A} ds:
<G, L(A, E)> = int tr(G^T e^{sA} E e^{(1-s)A}) ds = <L(A^T, G), E>.
Both rules call ``matrix_exp`` itself (on the 2n x 2n block), written with stanlite
operations, so under an outer differentiation they are recorded in turn: Hessians,
forward-over-reverse or reverse-over-reverse, nest to any order. Because L is linear
in E, E is scaled to the norm of A before the block is formed (and the result scaled
back): the block then needs at most one more squaring than A alone. (Cost: a 2n x 2n
exponential, about 8 times that of expm(A); Al-Mohy & Higham's 2009 algorithm that
differentiates the Pade evaluation itself would be about 3 times.)

``matrix_exp_multiply(A, B) = expm(A) B`` and ``scale_matrix_exp_multiply(t, A, B) =
expm(t A) B`` are Stan's names for the action on a matrix; both are compositions with
the super node, so ``t`` is differentiable as well (d/dt expm(tA) B = A expm(tA) B).
"""

import math

import numpy as np
from scipy.linalg.lapack import dgesv as _dgesv

from ..autodiff.extend import broadcast_to, defjvp, defvjp, primitive
from ..autodiff.var import Box, as_numbers, shape_of, value_of
from ..math.linalg import matmul
from ..math.structure import concatenate, transpose

__all__ = ["matrix_exp", "matrix_exp_multiply", "scale_matrix_exp_multiply"]


# --------------------------------------------------------------------------------------
# Pade approximants (Higham 2005)
# --------------------------------------------------------------------------------------
def _pade_coefficients(m):
    """Numerator coefficients of the [m/m] Pade approximant of e^x:
    p_m(x) = sum_j c_j x^j,  c_j = (2m - j)! m! / ((2m)! j! (m - j)!)
    (the denominator is p_m(-x)). Higham tabulates c_j times a common factor; the
    factor cancels in r_m = q_m^-1 p_m, so the plain ratios serve as well."""
    f = math.factorial
    return tuple(f(2 * m - j) * f(m) / (f(2 * m) * f(j) * f(m - j)) for j in range(m + 1))


_COEF = {m: _pade_coefficients(m) for m in (3, 5, 7, 9, 13)}
# theta_m: the largest ||A||_1 for which the backward error of r_m is below the unit
# roundoff 2^-53 (Higham 2005, Table 2.3)
_THETAS = np.array([1.495585217958292e-2, 2.539398330063230e-1, 9.504178996162932e-1,
                    2.097847961257068e0])
_DEGREES = (3, 5, 7, 9, 13)
_THETA13 = 5.371920351148152e0


def _pade_uv(a, m):
    """U (odd part) and V (even part) of p_m(A) = V + U, so q_m(A) = V - U."""
    b = _COEF[m]
    n = a.shape[-1]
    eye = np.eye(n)
    a2 = a @ a
    if m == 13:
        # Higham 2005, eq. (2.14)-(2.15): 6 matrix products instead of 12
        a4 = a2 @ a2
        a6 = a2 @ a4
        u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2)
                 + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
        v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 \
            + b[2] * a2 + b[0] * eye
        return u, v
    powers = [eye, a2]                   # A^0, A^2, A^4, ...
    while len(powers) <= m // 2:
        powers.append(powers[-1] @ a2)
    u_even = sum(b[2 * k + 1] * powers[k] for k in range(m // 2 + 1))
    v = sum(b[2 * k] * powers[k] for k in range(m // 2 + 1))
    return a @ u_even, v


def _expm_stack(a):
    """expm of a stack ``(k, n, n)`` of float matrices (Higham 2005, Algorithm 2.3),
    vectorised: the matrices are grouped by Pade degree, each group evaluated with
    batched products and one batched solve, and the degree-13 group squared with
    per-matrix counts s (a masked squaring: matrix i stops after its own s_i)."""
    n = a.shape[-1]
    finite = np.isfinite(a).all(axis=(1, 2))
    if n == 1:
        out = np.exp(a)
        out[~finite] = np.nan
        return out
    norm = np.abs(a).sum(axis=1).max(axis=1)                   # ||A||_1 per matrix
    # the smallest degree whose theta_m covers the norm; beyond theta_9: degree 13
    deg = np.searchsorted(_THETAS, norm)
    # an exponential beyond the float range overflows to inf (and inf - inf to NaN in
    # the products that follow): the value says so, numpy's warnings would only repeat it
    with np.errstate(over="ignore", invalid="ignore"):
        if len(a) == 1:                                        # the common case
            if not finite[0]:
                return np.full(a.shape, np.nan)
            return _pade_group(a, _DEGREES[deg[0]], norm)
        # no meaningful value for a NaN or infinite entry: NaN everywhere (as Stan)
        out = np.full(a.shape, np.nan)
        for d in np.unique(deg[finite]):
            idx = np.flatnonzero(finite & (deg == d))
            out[idx] = _pade_group(a[idx], _DEGREES[d], norm[idx])
    return out


def _pade_group(x, m, norm):
    """r_m of every matrix of the stack ``x`` (one degree), scaled and squared."""
    s = None
    if m == 13:
        s = np.maximum(0, np.ceil(np.log2(norm / _THETA13))).astype(int)
        x = x * np.ldexp(1.0, -s)[:, None, None]
    u, v = _pade_uv(x, m)
    r = _solve_stack(v - u, v + u)             # r_m = (V - U)^-1 (V + U)
    if s is not None:
        top = int(s.max())
        if top and s.min() == top:
            for _ in range(top):
                r = r @ r
        else:
            for j in range(top):
                live = j < s
                r[live] = r[live] @ r[live]
    return r


def _solve_stack(q, p):
    if len(q) == 1:
        _, _, r, info = _dgesv(q[0], p[0])
        return r[None] if info == 0 else np.full(p.shape, np.nan)
    try:
        return np.linalg.solve(q, p)
    except np.linalg.LinAlgError:
        # q_m(A) is nonsingular for ||A||_1 <= theta_m (Higham 2005, Lemma 2.5): only
        # an overflow to inf/NaN inside the powers gets here; solve one by one
        out = np.full(p.shape, np.nan)
        for i in range(len(q)):
            _, _, r, info = _dgesv(q[i], p[i])
            if info == 0:
                out[i] = r
        return out


def _expm_raw(a):
    a = np.asarray(a, dtype=np.float64)
    s = a.shape
    if a.size == 0:
        return np.empty(s)
    return _expm_stack(a.reshape((-1,) + s[-2:])).reshape(s)


_expm = primitive(_expm_raw, name="matrix_exp")


# --------------------------------------------------------------------------------------
# the Frechet derivative and the two rules
# --------------------------------------------------------------------------------------
def _mT(x):
    nd = len(shape_of(x))
    axes = list(range(nd))
    axes[-1], axes[-2] = axes[-2], axes[-1]
    return transpose(x, tuple(axes))


def _scale(av, ev):
    """c = ||A||_1 / ||E||_1 per matrix (1 where either is 0 or not finite), shaped to
    broadcast against the stack: the factor that brings E to the size of A."""
    na = np.abs(av).sum(axis=-2).max(axis=-1)
    ne = np.abs(ev).sum(axis=-2).max(axis=-1)
    ok = (ne > 0) & np.isfinite(ne) & np.isfinite(na)
    c = np.where(ok & (na > 0), na, 1.0) / np.where(ok, ne, 1.0)
    return c[..., None, None]


def frechet(a, e):
    """``L(A, E) = d/de expm(A + e E)|_{e=0}``: the top-right block of
    ``expm([[A, E], [0, A]])``.

    ``E`` may carry more leading axes than ``A`` (a stack of directions: forward mode's
    batch of tangents); ``A`` is broadcast against them. Written with stanlite
    operations on purpose: with traced arguments the block exponential is recorded as
    a ``matrix_exp`` node, whose own rules are again Frechet derivatives.

    Example
    -------
    >>> import numpy as np
    >>> from stanlite.functor.matrix_exp import frechet
    >>> frechet(np.diag([1.0, 2.0]), np.eye(2)).round(6)   # diag(e^a) for diagonal A
    array([[2.718282, 0.      ],
           [0.      , 7.389056]])
    """
    sa, se = shape_of(a), shape_of(e)
    n = sa[-1]
    # L is linear in E: scale E to the size of A (a plain constant per matrix, so the
    # derivative of the rescaling is exact) to keep the block's norm, and with it the
    # number of squarings, close to that of A alone.
    av = np.asarray(value_of(a), dtype=float)
    ev = np.asarray(value_of(e), dtype=float)
    c = _scale(av, ev)
    if not isinstance(a, Box) and not isinstance(e, Box):
        # first order on plain floats: assemble the block directly
        big = np.zeros(se[:-2] + (2 * n, 2 * n))
        big[..., :n, :n] = av
        big[..., n:, n:] = av
        big[..., :n, n:] = ev * c
        return _expm_raw(big)[..., :n, n:] / c
    if se != sa:
        a = broadcast_to(a, se)
    zero = np.zeros(se)
    top = concatenate([a, e * c], axis=-1)
    bottom = concatenate([zero, a], axis=-1)
    big = _expm(concatenate([top, bottom], axis=-2))
    return big[..., :n, n:] / c


def _expm_vjp(g, ans, a):
    # <G, L(A, E)> = <L(A^T, G), E>   ->   A_bar = L(A^T, G)
    return frechet(_mT(a), g)


def _expm_jvp(t, ans, a):
    # tangent: L(A, dA); a batch of directions (t.shape = B + A.shape) is a stack of
    # block exponentials, A broadcast against it
    return frechet(a, t)


defvjp(_expm, _expm_vjp)
defjvp(_expm, _expm_jvp)


# --------------------------------------------------------------------------------------
# public functions
# --------------------------------------------------------------------------------------
def _check_square(fname, name, x):
    s = shape_of(x)
    if len(s) < 2 or s[-1] != s[-2]:
        raise ValueError(f"{fname}: {name} must be a square matrix (or a stack of square "
                         f"matrices), got shape {s}")
    return s


def _as_input(x):
    return as_numbers(x, "expected an array of numbers", TypeError)


def matrix_exp(A):
    """The matrix exponential ``expm(A) = sum_{k>=0} A^k / k!`` of a square matrix.

    Pade approximant with scaling and squaring (Higham 2005, Algorithm 2.3) on plain
    floats; one node on the tape whose derivatives are Frechet derivatives
    ``L(A, E)`` (see the module docstring): reverse mode ``A_bar = L(A^T, G)``, forward
    mode ``d expm(A) = L(A, dA)``, both nesting (Hessians through ``matrix_exp``).
    ``A`` may be a stack ``(..., n, n)``. A matrix with a NaN or infinite entry gives a
    NaN matrix; entries of expm(A) beyond the float range overflow to inf or NaN
    (without numpy warnings); an empty ``0 x 0`` matrix gives itself.

    ``expm(A t) y0`` solves the linear ODE ``y' = A y``, ``y(0) = y0``.

    Example
    -------
    >>> import numpy as np, stanlite as sl
    >>> sl.matrix_exp(np.array([[0.0, -np.pi / 2], [np.pi / 2, 0.0]])).round(12)  # rotation
    array([[ 0., -1.],
           [ 1.,  0.]])
    >>> sl.grad(lambda a: sl.sum(sl.matrix_exp(a)))(np.zeros((2, 2))).round(6)
    array([[1., 1.],
           [1., 1.]])
    """
    A = _as_input(A)
    _check_square("matrix_exp", "A", A)
    return _expm(A)


def matrix_exp_multiply(A, B):
    """``expm(A) @ B`` for a square ``A`` (n x n) and ``B`` (n x k, or a vector of n).

    Differentiable in both arguments (a composition with :func:`matrix_exp`).

    Example
    -------
    >>> import numpy as np, stanlite as sl
    >>> sl.matrix_exp_multiply(np.diag([0.0, np.log(2.0)]), np.ones((2, 1))).round(12)
    array([[1.],
           [2.]])
    """
    A, B = _as_input(A), _as_input(B)
    sa = _check_square("matrix_exp_multiply", "A", A)
    sb = shape_of(B)
    if len(sa) != 2:
        raise ValueError(f"matrix_exp_multiply: A must be one n x n matrix, got shape {sa}")
    if len(sb) not in (1, 2) or sb[0] != sa[-1]:
        raise ValueError(f"matrix_exp_multiply: B must have {sa[-1]} rows (A is "
                         f"{sa[0]} x {sa[1]}), got shape {sb}")
    return matmul(_expm(A), B)


def scale_matrix_exp_multiply(t, A, B):
    """``expm(t A) @ B`` for a scalar ``t`` (Stan's ``scale_matrix_exp_multiply``).

    Differentiable in ``t``, ``A`` and ``B``; ``d/dt expm(tA) B = A expm(tA) B``.

    Example
    -------
    >>> import numpy as np, stanlite as sl
    >>> A = np.array([[-1.0, 0.0], [1.0, -0.5]])
    >>> sl.grad(lambda t: sl.sum(sl.scale_matrix_exp_multiply(t, A, np.eye(2))))(0.0)
    -0.5
    """
    t = _as_input(t)
    if shape_of(t) != ():
        raise ValueError(f"scale_matrix_exp_multiply: t must be a scalar, got shape "
                         f"{shape_of(t)}")
    A, B = _as_input(A), _as_input(B)
    sa = _check_square("scale_matrix_exp_multiply", "A", A)
    sb = shape_of(B)
    if len(sa) != 2:
        raise ValueError(f"scale_matrix_exp_multiply: A must be one n x n matrix, got "
                         f"shape {sa}")
    if len(sb) not in (1, 2) or sb[0] != sa[-1]:
        raise ValueError(f"scale_matrix_exp_multiply: B must have {sa[-1]} rows (A is "
                         f"{sa[0]} x {sa[1]}), got shape {sb}")
    if not isinstance(t, Box):
        t = float(t)
    return matmul(_expm(t * A), B)
