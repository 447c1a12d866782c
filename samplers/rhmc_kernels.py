"""The SoftAbs metric's dense linear algebra, compiled (numba): what one implicit
leapfrog step of :mod:`.rhmc` does between two evaluations of the model.

Why a module of its own. An implicit step evaluates the model's Hessian (position
fixed point) or a third-order sweep (momentum fixed point) about ten times; between
two evaluations it needs an eigendecomposition and the SoftAbs transform (position),
or the matrix ``M`` of ``dH/dq = -grad + grad tr(M A)`` (momentum), and an Anderson
update. As numpy calls these cost 40-180 us each at d = 10 (a dozen small array
operations, each ~1-5 us of call overhead; the divided differences ``J`` alone
170 us), several times the model's own compiled evaluations; as one compiled call
each they cost a few us.

Every function here is the only implementation of what it computes:
``rhmc.softabs``, ``softabs_derivative`` and ``softabs_divided_differences`` call
these kernels. Without numba (``STANLITE_JIT=0``) the same functions run as
Python, slowly (as the NUTS kernel of :mod:`.nuts_jit` does).
"""

import math

import numpy as np

from .nuts_jit import _jit

__all__ = ["softabs_vec", "divided_differences",
           "eig_softabs", "softabs_velocity", "velocity", "trace_matrix",
           "anderson_step"]

# |alpha lam| below which f and its derivatives use the Taylor series of x coth(x)
# (six terms: the first omitted one is below 1e-16 relative there), and above which
# coth(alpha lam) = 1 to double precision (2 e^-36 < 1e-15)
SMALL = 0.1
LARGE = 18.0
#: x coth(x) = sum_k c_k x^(2k), c_k = 2^(2k) B_2k / (2k)!
COTH_SERIES = np.array([1.0, 1.0 / 3.0, -1.0 / 45.0, 2.0 / 945.0, -1.0 / 4725.0,
                        2.0 / 93555.0])


@_jit
def _f(lam, alpha):
    """``lam coth(alpha lam)`` without cancellation or overflow."""
    x = alpha * lam
    ax = abs(x)
    if ax < SMALL:
        x2 = x * x
        s = 0.0
        for k in range(COTH_SERIES.shape[0] - 1, -1, -1):
            s = s * x2 + COTH_SERIES[k]
        return s / alpha
    if ax > LARGE:
        return abs(lam)
    return lam / math.tanh(x)


@_jit
def _fprime(lam, alpha):
    """``f'(lam) = coth(x) - x / sinh(x)^2``, ``x = alpha lam``."""
    x = alpha * lam
    ax = abs(x)
    if ax < SMALL:
        # x sum_k 2k c_k x^(2k-2): the series' derivative, no cancellation near 0
        x2 = x * x
        s = 0.0
        for k in range(COTH_SERIES.shape[0] - 1, 0, -1):
            s = s * x2 + 2 * k * COTH_SERIES[k]
        return x * s
    if ax > LARGE:
        return 1.0 if lam > 0 else -1.0
    return 1.0 / math.tanh(x) - x / math.sinh(x) ** 2


@_jit
def _pair(a, b, fa, fb, alpha):
    """``(f(a) - f(b)) / (a - b)``, ``f'(a)`` at ``a = b``, accurate for close pairs
    (see ``rhmc.softabs_divided_differences``)."""
    d = a - b
    scale = max(max(abs(a), abs(b)), 1.0 / alpha)
    if abs(d) > 1e-3 * scale:
        return (fa - fb) / d
    xa = alpha * a
    xb = alpha * b
    if abs(xa) < SMALL and abs(xb) < SMALL:
        # (s(xa) - s(xb)) / (xa - xb) for the series s of x coth(x): each
        # (xa^2k - xb^2k) / (xa - xb) = sum_j xa^j xb^(2k-1-j), exactly
        out = 0.0
        for k in range(1, COTH_SERIES.shape[0]):
            t = 0.0
            for j in range(2 * k):
                t += xa ** j * xb ** (2 * k - 1 - j)
            out += COTH_SERIES[k] * t
        return out
    if abs(xa) > LARGE and abs(xb) > LARGE:
        return 1.0 if a > 0 else -1.0
    # coth(xa) - xb sinhc(xa - xb) / (sinh xa sinh xb): f(a) - f(b) = (a - b)
    # coth(xa) + b (coth(xa) - coth(xb)) without cancellation
    dx = xa - xb
    sinhc = 1.0 + dx * dx / 6.0 if abs(dx) < 1e-8 else math.sinh(dx) / dx
    return 1.0 / math.tanh(xa) - xb * sinhc / (math.sinh(xa) * math.sinh(xb))


@_jit
def softabs_vec(lam, alpha, derivative=False):
    """``f(lam_i)`` for each eigenvalue, or ``f'(lam_i)`` with ``derivative``: one
    loop for both (the branch is on an argument, the same at every element)."""
    out = np.empty(lam.shape[0])
    for i in range(lam.shape[0]):
        out[i] = _fprime(lam[i], alpha) if derivative else _f(lam[i], alpha)
    return out


@_jit
def divided_differences(lam, f, alpha):
    """The pseudo-Jacobian ``J`` (symmetric: the close-pair formula is not, so each
    pair is the mean of both orders)."""
    n = lam.shape[0]
    J = np.empty((n, n))
    for k in range(n):
        J[k, k] = _pair(lam[k], lam[k], f[k], f[k], alpha)
        for m in range(k):
            v = 0.5 * (_pair(lam[k], lam[m], f[k], f[m], alpha)
                       + _pair(lam[m], lam[k], f[m], f[k], alpha))
            J[k, m] = v
            J[m, k] = v
    return J


@_jit
def eig_softabs(A, alpha):
    """``(A_sym, lam, Q, f, 1/f, log det Sigma)`` of the potential's Hessian ``A``
    (symmetrised: forward-over-reverse is symmetric up to rounding)."""
    S = 0.5 * (A + A.T)
    lam, Q = np.linalg.eigh(S)
    n = lam.shape[0]
    f = np.empty(n)
    finv = np.empty(n)
    logdet = 0.0
    for i in range(n):
        f[i] = _f(lam[i], alpha)
        finv[i] = 1.0 / f[i]
        logdet += math.log(f[i])
    return S, lam, np.ascontiguousarray(Q), f, finv, logdet


@_jit
def velocity(Q, finv, p):
    """``Sigma^-1 p = Q diag(1/f) Q^T p``."""
    return Q @ (finv * (Q.T @ p))


@_jit
def softabs_velocity(A, alpha, p):
    """``Sigma(q)^-1 p`` from the potential's Hessian ``A`` at ``q``: what each
    iteration of the position fixed point needs of the geometry there."""
    S = 0.5 * (A + A.T)
    lam, Q = np.linalg.eigh(S)
    w = Q.T @ p
    for i in range(lam.shape[0]):
        w[i] /= _f(lam[i], alpha)
    return Q @ w


@_jit
def trace_matrix(Q, finv, J, p):
    """``M = M_phi + M_tau(p)`` with ``dH/dq = -grad log p + grad tr(M A(q))``:
    ``Q (-1/2 J o u u^T + 1/2 diag(J_kk / f_k)) Q^T`` with ``u = diag(1/f) Q^T p``."""
    u = finv * (Q.T @ p)
    n = u.shape[0]
    inner = np.empty((n, n))
    for k in range(n):
        for m in range(n):
            inner[k, m] = -0.5 * J[k, m] * u[k] * u[m]
        inner[k, k] += 0.5 * J[k, k] * finv[k]
    return Q @ inner @ Q.T


@_jit
def _lstsq_columns(W, b, m):
    """``gamma = argmin |W[:, :m] gamma - b|`` for a few columns (``m`` <= depth):
    modified Gram-Schmidt with one reorthogonalisation, a column whose remainder is
    below ``eps max(n, m)`` of the largest column norm dropped (its ``gamma`` 0, as
    numpy's ``lstsq`` cut-off drops such singular values), then back substitution.
    At d = 10 this is ~0.3 us where ``np.linalg.lstsq`` (LAPACK's SVD with its
    workspace) was ~12 us, and an implicit step makes about ten of them."""
    n = W.shape[0]
    Qc = np.empty((n, m))
    R = np.zeros((m, m))
    keep = np.zeros(m, dtype=np.bool_)
    big = 0.0
    for j in range(m):
        s = 0.0
        for i in range(n):
            s += W[i, j] * W[i, j]
        big = max(big, math.sqrt(s))
    cut = 2.220446049250313e-16 * max(n, m) * big
    for j in range(m):
        v = W[:, j].copy()
        for _ in range(2):                       # twice: orthogonal to rounding
            for k in range(j):
                if keep[k]:
                    c = 0.0
                    for i in range(n):
                        c += Qc[i, k] * v[i]
                    R[k, j] += c
                    for i in range(n):
                        v[i] -= c * Qc[i, k]
        nv = math.sqrt(np.dot(v, v))
        if nv > cut:
            keep[j] = True
            R[j, j] = nv
            for i in range(n):
                Qc[i, j] = v[i] / nv
    gamma = np.zeros(m)
    for j in range(m - 1, -1, -1):
        if not keep[j]:
            continue
        c = 0.0
        for i in range(n):
            c += Qc[i, j] * b[i]
        for k in range(j + 1, m):
            c -= R[j, k] * gamma[k]
        gamma[j] = c / R[j, j]
    return gamma


@_jit
def anderson_step(x, fx, wf, dX, dF, dW, count, beta):
    """One Anderson (type II) update from the histories ``dX, dF, dW`` (columns
    ``0 .. count-1``, in any order): ``gamma = argmin |dW gamma - wf|``
    (:func:`_lstsq_columns`), then ``x - dX gamma + beta (fx - dF gamma)``."""
    if count == 0:
        return x + beta * fx
    gamma = _lstsq_columns(dW, wf, count)
    out = x + beta * fx
    for j in range(count):      # (loops: the column slices are not contiguous)
        for i in range(x.shape[0]):
            out[i] -= gamma[j] * (dX[i, j] + beta * dF[i, j])
    return out
