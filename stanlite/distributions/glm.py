"""Fused generalised linear models: one node for ``y ~ family(link^-1(alpha + x beta))``.

Stan's GLM functions, with Stan's argument order and shapes::

    normal_id_glm_lpdf(y | x, alpha, beta, sigma)
    bernoulli_logit_glm_lpmf(y | x, alpha, beta)
    poisson_log_glm_lpmf(y | x, alpha, beta)

``x`` is the (N, K) design matrix, ``beta`` the (K,) coefficients, ``alpha`` the
intercept (a scalar or one per row, (N,)), ``sigma`` the scale (a scalar or (N,)),
``y`` the (N,) outcomes (or a scalar shared by every row). Integer outcomes are never
differentiable (``bernoulli`` y in {0, 1}, ``poisson`` y >= 0).

Each call records one node. With eta = alpha + x beta the linear predictor, the
kernel computes ``r = d lp / d eta`` once and every partial from it:
``d/dbeta = x^T r``, ``d/dalpha = r`` (summed for a scalar intercept),
``d/dx = outer(r, beta)``. The design matrix is usually data, so its (N, K) partial is
formed only when ``x`` is differentiated; the plain (first-order) path reads ``x``
exactly twice (``x beta`` and ``x^T r``) - the same passes as a hand-written gradient
- and does the elementwise work in place. For ``bernoulli_logit_glm`` with data ``x``
and ``y`` (read-only arrays, as a model stores them) and a number ``alpha``, the
outcome-signed design ``[s, s x]`` is formed once and the intercept rides along as
its first column. Under nested differentiation (Hessians)
the same formulas run on traced values.

Argument checks that cost a pass over ``x`` happen only when the result is not finite
(as in Stan): then a non-finite ``x``, ``beta``, ``alpha`` (or ``y``) is reported by
name instead of returning NaN.

>>> import numpy as np, stanlite as sl
>>> x = np.array([[1.0, 0.5], [-0.3, 2.0], [0.0, -1.0]])
>>> y = np.array([1, 0, 1])
>>> round(sl.bernoulli_logit_glm_lpmf(y, x, 0.2, np.array([0.7, -0.4])), 6)
-1.208685
>>> round(sl.bernoulli_logit_lpmf(y, 0.2 + x @ np.array([0.7, -0.4])), 6)
-1.208685
"""

import math

import numpy as np
import scipy.special as sps

from .. import math as sm
from ..autodiff.var import Box, guarded, shape_of, value_of
from .continuous import normal_lpdf
from .counts import poisson_log_lpmf
from .discrete import _sum_log_factorial, bernoulli_logit_lpmf
from .fused import (_fail, check_finite, check_integer, check_positive, fp_ignored, fused,
                    is_constant, once_for_constant, once_for_constants, pointwise)

__all__ = ["normal_id_glm_lpdf", "bernoulli_logit_glm_lpmf", "poisson_log_glm_lpmf"]

HALF_LOG_TWO_PI = float(0.5 * np.log(2.0 * np.pi))
# bernoulli_logit_glm: up to this many rows, the fewest-calls form (logaddexp, expit);
# above, exp/log1p on |t| (cheaper per element). Measured crossover (numpy 2.4, one
# core): 300 rows for the value, 250 for the gradient; at 1000 rows the fewest-calls
# form costs 19 us against 10.
_SMALL = 256
# ... unless x and y are data and alpha a number (the usual model): then the signed
# design [s, s x] is kept once per (y, x) pair and one exp does the elementwise work
# (_bernoulli_logit_glm_data). Measured (one core): 1.6x faster at 10 to 1000 rows,
# 1.1x at 20000 x 50, none left at 80000 x 50, where the products are memory-bound:
# up to this many elements (16 MB)
_AUGMENTED_MAX = 1 << 21


# --------------------------------------------------------------------------------------
# shapes and checks
# --------------------------------------------------------------------------------------
def _f64(a):
    """A plain argument as float64 (no copy for float64 arrays; 0-d -> float)."""
    if type(a) is np.ndarray and a.dtype == np.float64:
        return a
    a = np.asarray(a, dtype=float)
    return float(a) if a.ndim == 0 else a


def _shape(v):
    return v.shape if type(v) is np.ndarray else np.shape(v)


def _check_shapes(fn, y, x, alpha, beta, sigma=None):
    """x (N, K); beta (K,); alpha, sigma and y scalar or (N,). Returns N."""
    xs = _shape(x)
    if len(xs) != 2:
        raise ValueError(f"{fn}: x must be an (N, K) matrix, but has shape {xs}")
    N, K = xs
    if _shape(beta) != (K,):
        raise ValueError(f"{fn}: beta must have shape ({K},) to match x {xs}, but has "
                         f"shape {np.shape(beta)}")
    for name, v in (("y", y), ("alpha", alpha), ("sigma", sigma)):
        if v is None or type(v) is float:
            continue
        s = _shape(v)
        if s != () and s != (N,):
            raise ValueError(f"{fn}: {name} must be a scalar or have shape ({N},) (one per "
                             f"row of x), but has shape {s}")
    return N


# Outcomes are data: the same read-only array at every gradient. What is derived from
# one - its check, its signs 2y - 1 - is kept per array (fused.once_for_constant), not
# recomputed at each call.
def _signs(y):
    """s = 2y - 1 (floats): +1 for a success, -1 for a failure."""
    return 2.0 * np.asarray(y, dtype=np.float64) - 1.0


def _check_binary(fn, y):
    once_for_constant(("binary",), y, lambda y: _check_binary_now(fn, y))


def _check_binary_now(fn, y):
    y = np.asarray(y)
    kind = y.dtype.kind
    if kind == "b":
        return
    if kind in "iu":
        if not (y >> 1).any():             # 0 and 1 are the integers with y >> 1 == 0
            return
    elif ((y == 0) | (y == 1)).all():
        return
    check_integer(fn, "y", y)              # a non-integer says so
    ok = (y == 0) | (y == 1)
    _fail(fn, "y", "0 or 1", y, ~ok)


def _check_count(fn, y):
    y = np.asarray(y)
    if y.dtype.kind in "iu":
        if y.size and y.min() < 0:
            check_integer(fn, "y", y, 0)
        return
    check_integer(fn, "y", y, 0)


def _integer_glm(name, kernel, check_y, doc):
    """The fused node of a GLM of integer outcomes ``y`` (never differentiated): its
    check is the shapes' and then ``check_y(name, y)`` (binary, counts)."""
    def check(y, x, alpha, beta):
        _check_shapes(name, y, x, alpha, beta)
        check_y(name, y)
    check.__qualname__ = f"{name}.check"
    return fused(name, kernel, check, nondiff=(0,), doc=doc)


def _lazy_finite(fn, lp, args):
    """Stan's deferred checks: only a non-finite result pays for scanning the inputs."""
    if np.isfinite(lp):
        return
    for name, v in args:
        check_finite(fn, name, value_of(v))


def _traced(*args):
    for a in args:
        if isinstance(a, Box):
            return True
    return False


def _outer(r, beta):
    """outer(r, beta): d lp / dx (N, K)."""
    if _traced(r, beta):
        return sm.reshape(r, (-1, 1)) * sm.reshape(beta, (1, -1))
    return np.multiply.outer(r, beta)


def _alpha_partial(r, alpha):
    if shape_of(alpha) == ():
        return sm.sum(r) if isinstance(r, Box) else float(r.sum())
    return r


def _linear_parts(parts, need, r, x, alpha, beta):
    """The partials every GLM shares, from r = d lp / d eta with eta = x beta + alpha:
    d/dx = outer(r, beta), d/dalpha = r (summed for a scalar alpha), d/dbeta = x^T r."""
    if need[1]:
        parts[1] = _outer(r, beta)
    if need[2]:
        parts[2] = _alpha_partial(r, alpha)
    if need[3]:
        parts[3] = sm.matmul(r, x)


# ======================================================================================
# normal_id_glm
# ======================================================================================
def _normal_id_glm(need, y, x, alpha, beta, sigma):
    """log N(y | alpha + x beta, sigma), summed.  With z = (y - mu)/sigma:
    lp = -z.z/2 - sum log sigma - N log(2 pi)/2;  r = d/dmu = z/sigma,
    d/dy = -r, d/dsigma = (z^2 - 1)/sigma."""
    N = shape_of(x)[0]
    with fp_ignored():
        if not _traced(y, x, alpha, beta, sigma):
            return _normal_id_glm_plain(need, N, _f64(y), _f64(x), _f64(alpha),
                                        _f64(beta), _f64(sigma))
        mu = sm.matmul(x, beta) + alpha
        inv_s = 1.0 / sigma
        z = (y - mu) * inv_s
        ls = sm.log(sigma)
        lp = (-0.5 * sm.sum(z * z) - N * HALF_LOG_TWO_PI
              - (N * ls if shape_of(sigma) == () else sm.sum(ls)))
        parts = [None] * 5
        r = z * inv_s
        if need[0]:
            parts[0] = -r if shape_of(y) != () else -sm.sum(r)
        _linear_parts(parts, need, r, x, alpha, beta)
        if need[4]:
            d = (z * z - 1.0) * inv_s
            parts[4] = d if shape_of(sigma) != () else sm.sum(d)
        return lp, parts


def _normal_id_glm_plain(need, N, y, x, alpha, beta, sigma):
    fn = "normal_id_glm_lpdf"
    z = x @ beta                        # mu, then overwritten by z in place
    z += alpha
    np.subtract(y, z, out=z)
    scalar_s = type(sigma) is float
    if scalar_s:
        inv_s = 1.0 / sigma
        z *= inv_s
        log_s = N * float(np.log(sigma))
    else:
        inv_s = 1.0 / sigma
        z *= inv_s
        log_s = float(np.log(sigma).sum())
    zz = float(z @ z)
    lp = -0.5 * zz - N * HALF_LOG_TWO_PI - log_s
    _lazy_finite(fn, lp, (("y", y), ("x", x), ("alpha", alpha), ("beta", beta)))
    parts = [None] * 5
    if need[4]:
        if scalar_s:
            parts[4] = (zz - N) * inv_s
        else:
            parts[4] = (z * z - 1.0) * inv_s
    if need[0] or need[1] or need[2] or need[3]:
        r = z
        r *= inv_s                      # d lp / d mu (z is not needed any more)
        if need[0]:
            parts[0] = -r if np.ndim(y) else -float(r.sum())
        _linear_parts(parts, need, r, x, alpha, beta)
    return lp, parts


def _check_normal_id_glm(y, x, alpha, beta, sigma):
    fn = "normal_id_glm_lpdf"
    _check_shapes(fn, y, x, alpha, beta, sigma)
    check_positive(fn, "sigma", sigma)


normal_id_glm_lpdf = fused("normal_id_glm_lpdf", _normal_id_glm, _check_normal_id_glm)
normal_id_glm_lpdf.__doc__ = """Normal linear regression log density, one fused node.

    normal_id_glm(y | x, alpha, beta, sigma) = prod_i N(y_i | alpha_i + x_i . beta, sigma_i)

    ``x`` (N, K), ``beta`` (K,), ``alpha`` and ``sigma`` scalars or (N,), ``y`` (N,)
    (or a scalar); sigma > 0. Equals ``normal_lpdf(y, alpha + x @ beta, sigma)``.

    >>> import numpy as np, stanlite as sl
    >>> x = np.array([[1.0, 2.0], [0.5, -1.0]])
    >>> round(sl.normal_id_glm_lpdf(np.array([0.3, -0.2]), x, 0.1, np.array([0.2, 0.1]), 1.5), 6)
    -2.677696
    """


# ======================================================================================
# bernoulli_logit_glm
# ======================================================================================
def _bernoulli_logit_glm(need, y, x, alpha, beta):
    """log Bernoulli(y | inv_logit(eta)), eta = alpha + x beta, summed.

    With s = 2y - 1 and t = s eta:  lp = sum log inv_logit(t)
    = sum [min(t, 0) - log1p(exp(-|t|))]  (stable for any |t|), and
    r = d lp / d eta = s inv_logit(-t) = s / (1 + exp(t))  (exp overflow gives 0).
    """
    with fp_ignored():
        if not _traced(x, alpha, beta):
            return _bernoulli_logit_glm_plain(need, y, _f64(x), _f64(alpha),
                                              _f64(beta))
        s = once_for_constant(("signs",), y, _signs)
        t = s * (sm.matmul(x, beta) + alpha)
        lp = sm.sum(sm.log_inv_logit(t))
        parts = [None] * 4
        if need[1] or need[2] or need[3]:
            r = s * sm.inv_logit(-t)
            _linear_parts(parts, need, r, x, alpha, beta)
        return lp, parts


def _bernoulli_logit_glm_plain(need, y, x, alpha, beta):
    fn = "bernoulli_logit_glm_lpmf"
    if (type(alpha) is float and not need[1] and is_constant(x) and is_constant(y)
            and y.shape == x.shape[:1] and x.size <= _AUGMENTED_MAX):
        out = _bernoulli_logit_glm_data(
            need, once_for_constants(("bernoulli_logit_glm",), (y, x), _signed_design),
            alpha, beta)
        if out is not None:
            return out
    t = x @ beta                        # eta, then t = s * eta in place
    t += alpha
    s = once_for_constant(("signs",), y, _signs)   # shared between calls: read-only
    t *= s
    if t.size <= _SMALL:
        # few elements: per-call overhead dominates, so use the fewest numpy calls
        # (logaddexp/expit cost more per element than exp/log1p, but save four calls)
        np.negative(t, out=t)
        lp = -float(np.logaddexp(0.0, t).sum())
        _lazy_finite(fn, lp, (("x", x), ("alpha", alpha), ("beta", beta)))
        parts = [None] * 4
        if need[1] or need[2] or need[3]:
            r = sps.expit(t, out=t)
            r *= s
            _linear_parts(parts, need, r, x, alpha, beta)
        return lp, parts
    a = np.abs(t)
    sum_abs = float(a.sum())
    np.negative(a, out=a)
    np.exp(a, out=a)                    # exp(-|t|) in (0, 1]
    np.log1p(a, out=a)
    lp = 0.5 * (float(t.sum()) - sum_abs) - float(a.sum())
    _lazy_finite(fn, lp, (("x", x), ("alpha", alpha), ("beta", beta)))
    parts = [None] * 4
    if need[1] or need[2] or need[3]:
        r = np.exp(t, out=t)            # r = s / (1 + exp(t)), in place
        r += 1.0
        np.divide(s, r, out=r)
        _linear_parts(parts, need, r, x, alpha, beta)
    return lp, parts


def _signed_design(y, x):
    """``A = [s, s x]`` (N, K + 1), s = 2y - 1: the design with its intercept column,
    each row signed by its outcome, so that ``t = s eta = A [alpha, beta]``."""
    s = _signs(y)
    a = np.empty((x.shape[0], x.shape[1] + 1))
    a[:, 0] = s
    np.multiply(s[:, None], x, out=a[:, 1:])
    return a


def _bernoulli_logit_glm_data(need, a, alpha, beta):
    """The plain kernel when ``x`` and ``y`` are data (read-only, so ``A = [s, s x]``
    is formed once) and ``alpha`` is a number. With ``e = exp(-t)``, ``-t = A c`` for
    ``c = -[alpha, beta]``:

        lp = -sum log1p(e),   r_n / s_n = inv_logit(-t_n) = e_n / (1 + e_n),
        [d/dalpha, d/dbeta] = A^T (e / (1 + e)),

    one matrix-vector product each way (the intercept rides along as a column) and a
    single exp: half the elementwise passes of the |t| form. ``log1p(exp(-t))`` is
    exact wherever ``exp(-t)`` is finite; where it overflows (some t < -709) or the
    inputs are not finite, ``lp`` is not finite and the caller uses the |t| form,
    which is stable everywhere and names a bad argument: None is returned."""
    c = np.empty(a.shape[1])
    c[0] = -alpha
    np.negative(beta, out=c[1:])
    e = a.dot(c)
    np.exp(e, out=e)
    lp = -float(np.log1p(e).sum())
    if not lp > -math.inf:          # -inf (overflow) or NaN
        return None
    parts = [None] * 4
    if need[2] or need[3]:
        d = e + 1.0
        np.divide(e, d, out=e)
        g = e.dot(a)
        parts[2] = float(g[0])
        parts[3] = g[1:]
    return lp, parts


bernoulli_logit_glm_lpmf = _integer_glm(
    "bernoulli_logit_glm_lpmf", _bernoulli_logit_glm, _check_binary,
    doc="""Logistic regression log mass, one fused node.

    bernoulli_logit_glm(y | x, alpha, beta) = prod_i Bernoulli(y_i | inv_logit(alpha_i + x_i . beta))

    ``y`` in {0, 1} (ints, (N,) or a scalar), ``x`` (N, K), ``alpha`` scalar or (N,),
    ``beta`` (K,). Equals ``bernoulli_logit_lpmf(y, alpha + x @ beta)``, at the cost of
    the two matrix-vector products a hand-written gradient needs.

    >>> import numpy as np, stanlite as sl
    >>> x = np.array([[1.0, 2.0], [0.5, -1.0]])
    >>> round(sl.bernoulli_logit_glm_lpmf([1, 0], x, 0.1, np.array([0.2, 0.1])), 6)
    -1.218474
    """)


# ======================================================================================
# poisson_log_glm
# ======================================================================================
def _poisson_log_glm(need, y, x, alpha, beta):
    """log Poisson(y | exp(eta)), eta = alpha + x beta, summed:
    lp = y.eta - sum exp(eta) - sum lgamma(y + 1);  r = d lp / d eta = y - exp(eta)."""
    with fp_ignored():
        if not _traced(x, alpha, beta):
            return _poisson_log_glm_plain(need, y, _f64(x), _f64(alpha), _f64(beta))
        yf = _f64(y)
        N = shape_of(x)[0]
        eta = sm.matmul(x, beta) + alpha
        u = sm.exp(eta)
        ysum = _sum_log_factorial(y) * (N if np.ndim(y) == 0 else 1)
        lp = sm.sum(yf * eta) - sm.sum(u) - ysum
        parts = [None] * 4
        if need[1] or need[2] or need[3]:
            r = yf - u
            _linear_parts(parts, need, r, x, alpha, beta)
        return lp, parts


def _poisson_log_glm_plain(need, y, x, alpha, beta):
    fn = "poisson_log_glm_lpmf"
    N = x.shape[0]
    yf = _f64(y)
    eta = x @ beta
    eta += alpha
    ye = float(yf @ eta) if np.ndim(yf) else yf * float(eta.sum())
    u = np.exp(eta, out=eta)            # exp(eta) in place: eta is not needed any more
    lp = ye - float(u.sum()) - _sum_log_factorial(y) * (N if np.ndim(y) == 0 else 1)
    if not np.isfinite(lp):
        _lazy_finite(fn, lp, (("x", x), ("alpha", alpha), ("beta", beta)))
    parts = [None] * 4
    if need[1] or need[2] or need[3]:
        r = np.subtract(yf, u, out=u)
        _linear_parts(parts, need, r, x, alpha, beta)
    return lp, parts


poisson_log_glm_lpmf = _integer_glm(
    "poisson_log_glm_lpmf", _poisson_log_glm, _check_count,
    doc="""Poisson log-linear regression log mass, one fused node.

    poisson_log_glm(y | x, alpha, beta) = prod_i Poisson(y_i | exp(alpha_i + x_i . beta))

    ``y`` counts >= 0 (ints, (N,) or a scalar), ``x`` (N, K), ``alpha`` scalar or (N,),
    ``beta`` (K,). Equals ``poisson_log_lpmf(y, alpha + x @ beta)``.

    >>> import numpy as np, stanlite as sl
    >>> x = np.array([[1.0, 2.0], [0.5, -1.0]])
    >>> round(sl.poisson_log_glm_lpmf([3, 0], x, 0.1, np.array([0.2, 0.1])), 6)
    -3.045652
    """)


# interpreter lowerings (autodiff/vm): each GLM as its matrix-vector product (BLAS),
# the intercept, and the summed density of the linear predictor
from ..autodiff.vm import opcodes as _op  # noqa: E402
from ..autodiff.vm.program import (check_lowering as _check_lowering,  # noqa: E402
                                   deflower as _deflower, glm_rule as _glm)

_deflower(bernoulli_logit_glm_lpmf, _glm(_op.BERNOULLI_LOGIT))
_deflower(poisson_log_glm_lpmf, _glm(_op.POISSON_LOG, counts=True))
_deflower(normal_id_glm_lpdf, _glm(_op.NORMAL, with_sigma=True))
# their argument checks look at no traced value but sigma's sign (stricter is safe)
_check_lowering(bernoulli_logit_glm_lpmf, None, None, None, None)
_check_lowering(poisson_log_glm_lpmf, None, None, None, None)
_check_lowering(normal_id_glm_lpdf, None, None, None, None, "positive_finite")


# --------------------------------------------------------------------------------------
# elementwise forms (``reduce=False``, see :mod:`.fused`): one value per row of x, the
# elementwise form of the family at eta = alpha + x beta
# --------------------------------------------------------------------------------------
def _per_row(glm, family, checked):
    """The pointwise form of ``glm`` from that of its ``family`` density; the finite
    checks the summed kernel defers (:func:`_lazy_finite`) run first, in its order."""
    def terms(y, x, alpha, beta, *scale):
        args = dict(y=y, x=x, alpha=alpha, beta=beta)
        for name in checked:       # (guarded: a compiled replay checks again)
            guarded(check_finite, glm.__name__, name, args[name])
        return family._pointwise(y, sm.matmul(x, beta) + alpha, *scale)
    terms.__name__ = terms.__qualname__ = f"_{glm.__name__}_terms"
    pointwise(glm, broadcast=False)(terms)


_per_row(normal_id_glm_lpdf, normal_lpdf, ("y", "x", "alpha", "beta"))
_per_row(bernoulli_logit_glm_lpmf, bernoulli_logit_lpmf, ("x", "alpha", "beta"))
_per_row(poisson_log_glm_lpmf, poisson_log_lpmf, ("x", "alpha", "beta"))
