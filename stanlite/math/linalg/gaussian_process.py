"""Gaussian-process covariance functions (Stan's ``gp_*_cov``).

``gp_exp_quad_cov`` (``cov_exp_quad``) is one primitive with hand-written rules (it
is the hot one, and has a lowering for the interpreter). The other kernels
(exponential, Matern 3/2 and 5/2, periodic) are compositions of one distance
primitive ``_distance`` with elementwise functions, so they have every derivative
in the points, the magnitude, the length scale(s) and the period.
"""

import math

import numpy as np

from ...autodiff.extend import batch_shape, defjvp_all, defvjp, defvjp_all, primitive
from ...autodiff.var import Box, guarded, shape_of
from ...autodiff.vm import program as _program
from ...autodiff.vm.program import deflower as _deflower
from ...autodiff.vm import opcodes as _op
from ...autodiff.vm.declare import defkernel as _defkernel
from ..elementwise import exp, sin
from ..reductions import sum as _rsum
from ..structure import reshape, where
from .common import _as_float, _domain, _fail, _mT
from .products import matmul


# --------------------------------------------------------------------------------------
# Gaussian-process covariance
# --------------------------------------------------------------------------------------
def _points(fname, x):
    x = _as_float(x)
    if x.ndim == 1:
        return x[:, None]
    if x.ndim == 2:
        return x
    _fail(fname, f"x must be a 1-D array of points or a 2-D (N, D) array, got shape "
                 f"{x.shape}")


@primitive
def gp_exp_quad_cov(x, alpha, rho):
    """Squared-exponential covariance ``K_ij = alpha^2 exp(-|x_i - x_j|^2 / (2 rho^2))``
    of the points ``x`` (a 1-D array of scalars or an ``(N, D)`` array of points);
    differentiable in ``x``, ``alpha`` and ``rho`` (Stan's ``gp_exp_quad_cov``, formerly
    ``cov_exp_quad``).

    >>> import numpy as np, stanlite as sl
    >>> sl.gp_exp_quad_cov(np.array([0.0, 1.0]), 2.0, 1.0).round(4)
    array([[4.    , 2.4261],
           [2.4261, 4.    ]])
    """
    fname = "gp_exp_quad_cov"
    X = _points(fname, x)
    for name, v in (("alpha", alpha), ("rho", rho)):
        if np.ndim(v) != 0:
            _fail(fname, f"{name} must be a scalar, got shape {np.shape(v)}")
        if not float(v) > 0 or not np.isfinite(float(v)):
            _domain(fname, f"{name} must be positive and finite, got {float(v)}")
    if np.isnan(X).any():
        _domain(fname, "x contains NaN")
    d = X[:, None, :] - X[None, :, :]
    d2 = np.sum(d * d, axis=-1)
    return float(alpha) ** 2 * np.exp(-0.5 * d2 / float(rho) ** 2)


def _gp_exp_quad_cov_vjp_all(g, ans, x, alpha, rho):
    # K = alpha^2 E, E = exp(-d2 / (2 rho^2)), d2_ij = |x_i - x_j|^2; with Gk = G o K:
    #   alpha_bar = 2 sum(Gk) / alpha,   rho_bar = sum(Gk o d2) / rho^3,
    #   x_bar_i = -(1/rho^2) sum_j (Gk + Gk^T)_ij (x_i - x_j)
    sx = shape_of(x)
    n = sx[0]
    X = x if len(sx) == 2 else reshape(x, (n, 1))
    dim = shape_of(X)[1]
    gk = g * ans
    diff = reshape(X, (n, 1, dim)) - reshape(X, (1, n, dim))
    d2 = _rsum(diff * diff, axis=2)
    inv_rho2 = 1.0 / (rho * rho)
    alpha_bar = 2.0 * _rsum(gk) / alpha
    rho_bar = _rsum(gk * d2) * inv_rho2 / rho
    gh = gk + _mT(gk)
    x_bar = (matmul(gh, X) - reshape(_rsum(gh, axis=1), (n, 1)) * X) * inv_rho2
    return reshape(x_bar, sx), alpha_bar, rho_bar


defvjp_all(gp_exp_quad_cov, _gp_exp_quad_cov_vjp_all)


def _gp_exp_quad_cov_jvp_all(ts, ans, x, alpha, rho):
    # dK = K (2 dalpha / alpha + d2 drho / rho^3 - (x_i - x_j).(dx_i - dx_j) / rho^2)
    tx, ta, tr = ts
    sx = shape_of(x)
    n = sx[0]
    X = x if len(sx) == 2 else reshape(x, (n, 1))
    dim = shape_of(X)[1]
    diff = reshape(X, (n, 1, dim)) - reshape(X, (1, n, dim))
    out = None
    if ta is not None:
        out = reshape(ta, batch_shape(ta, alpha) + (1, 1)) * (2.0 * ans / alpha)
    if tr is not None:
        d2 = _rsum(diff * diff, axis=2)
        c = reshape(tr, batch_shape(tr, rho) + (1, 1)) * (ans * d2 / (rho * rho * rho))
        out = c if out is None else out + c
    if tx is not None:
        B = batch_shape(tx, x)
        T = reshape(tx, B + (n, dim))
        tdiff = reshape(T, B + (n, 1, dim)) - reshape(T, B + (1, n, dim))
        c = -(ans / (rho * rho)) * _rsum(diff * tdiff, axis=-1)
        out = c if out is None else out + c
    return out


defjvp_all(gp_exp_quad_cov, _gp_exp_quad_cov_jvp_all)
_deflower(gp_exp_quad_cov, _program.gp_exp_quad_rule)


# the interpreter's GP_EXP_QUAD sweeps (autodiff/vm/declare.py): K (X1 x X1) of X1
# points V[a] of X2 coordinates, alpha V[b], rho V[c]
def _gp_exp_quad_forward(V, aux, code, r):
    # K_ij = alpha^2 exp(-|x_i - x_j|^2 / (2 rho^2)), x: N points of D coordinates
    o = code[r, _op.OUT]
    a = code[r, _op.A]
    al = V[code[r, _op.B]]
    rho = V[code[r, _op.C]]
    npt = code[r, _op.X1]
    d = code[r, _op.X2]
    if not (al > 0.0 and rho > 0.0 and math.isfinite(al) and math.isfinite(rho)):
        return _op.DOMAIN
    a2 = al * al
    h = 0.5 / (rho * rho)
    for i in range(npt):
        for j in range(npt):
            s = 0.0
            for k in range(d):
                t = V[a + i * d + k] - V[a + j * d + k]
                s += t * t
            if s != s:
                return _op.DOMAIN               # a NaN coordinate: the eager check
            V[o + i * npt + j] = a2 * math.exp(-s * h)
    return _op.OK


def _gp_exp_quad_reverse(V, A, aux, code, r):
    m = code[r, _op.MASK]
    # Gk = G o K: alpha_bar = 2 sum(Gk) / alpha, rho_bar = sum(Gk o d2) / rho^3,
    # x_bar_i = sum_j (Gk + Gk^T)_ij (x_j - x_i) / rho^2
    o = code[r, _op.OUT]
    a = code[r, _op.A]
    b = code[r, _op.B]
    c = code[r, _op.C]
    al = V[b]
    rho = V[c]
    npt = code[r, _op.X1]
    d = code[r, _op.X2]
    inv_r2 = 1.0 / (rho * rho)
    sg = 0.0
    sgd = 0.0
    for i in range(npt):
        for j in range(npt):
            gk = A[o + i * npt + j] * V[o + i * npt + j]
            if gk == 0.0:
                continue
            sg += gk
            s = 0.0
            for k in range(d):
                t = V[a + i * d + k] - V[a + j * d + k]
                s += t * t
                if m & 1:
                    # (Gk)_ij reaches x_i with (x_j - x_i) and x_j with (x_i - x_j)
                    A[a + i * d + k] -= gk * t * inv_r2
                    A[a + j * d + k] += gk * t * inv_r2
            sgd += gk * s
    if m & 2:
        A[b] += 2.0 * sg / al
    if m & 4:
        A[c] += sgd * inv_r2 / rho


_defkernel(_op.GP_EXP_QUAD, _gp_exp_quad_forward, _gp_exp_quad_reverse)

cov_exp_quad = gp_exp_quad_cov


# --------------------------------------------------------------------------------------
# more Gaussian-process kernels: functions of the distance r = |x_i - x'_j| / l
# --------------------------------------------------------------------------------------
# The distance is one primitive whose derivative is the unit vector (x_i - x'_j) / d_ij
# and 0 where the points coincide (d = 0: a subgradient; every kernel here is flat
# there or the pair is the diagonal, whose value is sigma^2 whatever x is). The
# kernels are compositions of it with elementwise functions, so they have every
# derivative in x, sigma, l and p.
@primitive
def _distance(x1, x2):
    """d_ij = |x1_i - x2_j| for point sets (N, D) and (M, D)."""
    d = _as_float(x1)[:, None, :] - _as_float(x2)[None, :, :]
    return np.sqrt(np.sum(d * d, axis=-1))


def _unit_weights(g, ans):
    """g_ij / d_ij, and 0 where d_ij = 0."""
    zero = guarded(lambda d: np.asarray(d) == 0.0, ans)
    return where(zero, 0.0, g / where(zero, 1.0, ans))


def _distance_vjp_x1(g, ans, x1, x2):
    w = _unit_weights(g, ans)                                     # (N, M)
    return reshape(_rsum(w, axis=1), (-1, 1)) * x1 - matmul(w, x2)


def _distance_vjp_x2(g, ans, x1, x2):
    w = _unit_weights(g, ans)
    return reshape(_rsum(w, axis=0), (-1, 1)) * x2 - matmul(_mT(w), x1)


def _distance_jvp(t1, t2, ans, x1, x2):
    # dd_ij = (x1_i - x2_j) . (dx1_i - dx2_j) / d_ij (0 where d = 0); batch axes B lead
    n, dim = shape_of(x1)
    mm = shape_of(x2)[0]
    diff = reshape(x1, (n, 1, dim)) - reshape(x2, (1, mm, dim))
    td = None
    if t1 is not None:
        B = batch_shape(t1, x1)
        td = reshape(t1, B + (n, 1, dim))
    if t2 is not None:
        B = batch_shape(t2, x2)
        c = -reshape(t2, B + (1, mm, dim))
        td = c if td is None else td + c
    return _unit_weights(_rsum(diff * td, axis=-1), ans)


defvjp(_distance, _distance_vjp_x1, _distance_vjp_x2)
defjvp_all(_distance, lambda ts, ans, x1, x2: _distance_jvp(ts[0], ts[1], ans, x1, x2))


def _gp_points(fname, x, name="x"):
    """Points as an (N, D) array: a 1-D array of scalars, an (N, D) array or a list of
    vectors (Stan's array[] real / array[] vector)."""
    if isinstance(x, (list, tuple)):
        from ..structure import stack
        x = stack(list(x)) if x else np.zeros((0, 1))
    if not isinstance(x, Box):
        x = _as_float(x)
        if np.isnan(x).any():
            _domain(fname, f"{name} contains NaN")
    s = shape_of(x)
    if len(s) == 1:
        return reshape(x, (s[0], 1))
    if len(s) == 2:
        return x
    _fail(fname, f"{name} must be a 1-D array of points or a 2-D (N, D) array, got shape "
                 f"{s}")


def _gp_positive(fname, name, v, vector_ok=False):
    s = shape_of(v)
    if s != () and not (vector_ok and len(s) == 1):
        _fail(fname, f"{name} must be a scalar{' or a vector' if vector_ok else ''}, got "
                     f"shape {s}")
    bad = guarded(lambda a: not bool(np.all((np.asarray(a) > 0) & np.isfinite(a))), v)
    if bad:
        _domain(fname, f"{name} must be positive and finite, got {_plain_value(v)!r}")


def _plain_value(v):
    while isinstance(v, Box):
        v = v.value
    return v.tolist() if isinstance(v, np.ndarray) else float(v)


def _gp_distance(fname, args, nparams):
    """Parse ``(x, *params)`` or ``(x1, x2, *params)``: the scaled distances
    r = |x1_i - x2_j| / l (l a scalar, or per dimension), and the params."""
    if len(args) == nparams + 1:
        x1 = x2 = _gp_points(fname, args[0])
    elif len(args) == nparams + 2:
        x1 = _gp_points(fname, args[0], "x1")
        x2 = _gp_points(fname, args[1], "x2")
        if shape_of(x1)[1] != shape_of(x2)[1]:
            _fail(fname, f"x1 and x2 must have points of the same dimension, got "
                         f"{shape_of(x1)[1]} and {shape_of(x2)[1]}")
    else:
        raise TypeError(f"{fname} takes (x, {_GP_PARAMS[nparams]}) or (x1, x2, "
                        f"{_GP_PARAMS[nparams]}), got {len(args)} arguments")
    params = args[-nparams:]
    return x1, x2, params


_GP_PARAMS = {2: "sigma, length_scale", 3: "sigma, length_scale, period"}


def _scaled_distance(fname, x1, x2, sigma, ls):
    _gp_positive(fname, "sigma", sigma)
    _gp_positive(fname, "length_scale", ls, vector_ok=True)
    sl_ = shape_of(ls)
    if sl_ == ():
        return _distance(x1, x2) / ls
    if sl_[0] != shape_of(x1)[1]:
        _fail(fname, f"length_scale has {sl_[0]} elements but the points have "
                     f"{shape_of(x1)[1]} dimensions")
    same = x1 is x2
    x1 = x1 / reshape(ls, (1, -1))
    return _distance(x1, x1 if same else x2 / reshape(ls, (1, -1)))


def _stationary(fname, args):
    """``(sigma, r)`` of a kernel called as ``(x, sigma, length_scale)`` or
    ``(x1, x2, sigma, length_scale)``: r the distances scaled by the length scale(s)."""
    x1, x2, (sigma, ls) = _gp_distance(fname, args, 2)
    return sigma, _scaled_distance(fname, x1, x2, sigma, ls)


def gp_exponential_cov(*args):
    """Exponential (Matern 1/2, Ornstein-Uhlenbeck) covariance
    ``K_ij = sigma^2 exp(-|x_i - x'_j| / l)`` (Stan's ``gp_exponential_cov``).

    Called as ``(x, sigma, length_scale)`` (a covariance matrix of the points x) or
    ``(x1, x2, sigma, length_scale)`` (the cross-covariance); points are a 1-D array
    of scalars, an (N, D) array or a list of vectors; ``length_scale`` a scalar or
    one per dimension (ARD). Differentiable in everything; at coinciding points the
    derivative in x is taken as 0 (the kernel is not differentiable there).

    >>> import numpy as np, stanlite as sl
    >>> sl.gp_exponential_cov(np.array([0.0, 1.0]), 2.0, 0.5).round(4)
    array([[4.    , 0.5413],
           [0.5413, 4.    ]])
    """
    sigma, r = _stationary("gp_exponential_cov", args)
    return sigma * sigma * exp(-r)


_SQRT3 = float(np.sqrt(3.0))
_SQRT5 = float(np.sqrt(5.0))


def gp_matern32_cov(*args):
    """Matern 3/2 covariance ``K_ij = sigma^2 (1 + sqrt(3) r) exp(-sqrt(3) r)``,
    r = |x_i - x'_j| / l (Stan's ``gp_matern32_cov``). Arguments as
    :func:`gp_exponential_cov`: ``(x, sigma, length_scale)`` or
    ``(x1, x2, sigma, length_scale)``.

    >>> import numpy as np, stanlite as sl
    >>> sl.gp_matern32_cov(np.array([0.0, 1.0]), 1.0, 1.0).round(4)
    array([[1.    , 0.4834],
           [0.4834, 1.    ]])
    """
    sigma, d = _stationary("gp_matern32_cov", args)
    r = _SQRT3 * d
    return sigma * sigma * (1.0 + r) * exp(-r)


def gp_matern52_cov(*args):
    """Matern 5/2 covariance ``K_ij = sigma^2 (1 + sqrt(5) r + 5 r^2 / 3)
    exp(-sqrt(5) r)``, r = |x_i - x'_j| / l (Stan's ``gp_matern52_cov``). Arguments
    as :func:`gp_exponential_cov`.

    >>> import numpy as np, stanlite as sl
    >>> sl.gp_matern52_cov(np.array([0.0, 1.0]), 1.0, 1.0).round(3)
    array([[1.   , 0.524],
           [0.524, 1.   ]])
    """
    sigma, d = _stationary("gp_matern52_cov", args)
    r = _SQRT5 * d
    return sigma * sigma * (1.0 + r + r * r / 3.0) * exp(-r)


def gp_periodic_cov(*args):
    """Periodic covariance ``K_ij = sigma^2 exp(-2 sin^2(pi |x_i - x'_j| / p) / l^2)``
    (Stan's ``gp_periodic_cov``), called as ``(x, sigma, length_scale, period)`` or
    ``(x1, x2, sigma, length_scale, period)``; all scalars positive.

    >>> import numpy as np, stanlite as sl
    >>> sl.gp_periodic_cov(np.array([0.0, 0.5, 1.0]), 1.0, 1.0, 1.0).round(4)[0]
    array([1.    , 0.1353, 1.    ])
    """
    fname = "gp_periodic_cov"
    x1, x2, (sigma, ls, period) = _gp_distance(fname, args, 3)
    _gp_positive(fname, "sigma", sigma)
    _gp_positive(fname, "length_scale", ls)
    _gp_positive(fname, "period", period)
    s = sin(np.pi * _distance(x1, x2) / period)
    return sigma * sigma * exp(-2.0 * s * s / (ls * ls))
