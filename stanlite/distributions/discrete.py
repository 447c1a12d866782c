"""Discrete distributions: log mass functions, CDFs and RNGs with Stan's names.

Every ``<name>_lpmf(n, *params)`` is one fused node (see :mod:`.fused`): the value is
the sum over the broadcast elements, the partials w.r.t. every real parameter come
from the same kernel. Integer arguments (outcomes, sizes, counts) are never
differentiable: they are validated with ``check_integer`` (an ``int`` array, or floats
with integral values; ``2.5`` raises :class:`~stanlite.DomainError` naming the
argument) and a traced value there raises :class:`~stanlite.DifferentiationError`.

Supports are Stan's: ``bernoulli`` outcomes are 0/1, counts are ``>= 0`` (the
1-based categorical families are in :mod:`.categorical`, ``ordered_logistic`` in
:mod:`.ordinal`).

This module holds the families with bounded outcomes (bernoulli, binomial,
beta_binomial, hypergeometric, with their logit forms) and the helpers shared with
:mod:`.counts` (poisson and the negative binomials), :mod:`.categorical`,
:mod:`.ordinal` and :mod:`.more_discrete`.

``_lcdf``/``_lccdf`` (``log P(X <= n)``, ``log P(X > n)``) exist where Stan has them:
bernoulli, binomial, beta_binomial, poisson, neg_binomial, neg_binomial_2. An ``n``
below the support gives ``lcdf = -inf`` (``lccdf = 0``); above it ``lcdf = 0``
(``lccdf = -inf``). Their derivatives w.r.t. shape parameters (``alpha``/``beta`` of
the beta-binomial and negative binomial, ``phi``) are exact: the CDF of a count is a
finite sum of mass-function terms, so its derivative is a weighted average of the
per-term scores. Each element is summed on the side (``k <= n`` or ``k > n``) that
holds at most half of the mass, so neither tail loses precision to cancellation;
the work is O(n) terms per element (the negative-binomial upper tail is summed until
the remainder is below 1e-18 of the sum, with a proven geometric bound).

``_rng(*params, rng=None)`` returns integer draws: an ``int64`` array shaped like the
broadcast of the parameters, or a Python ``int`` for a single draw.

>>> import numpy as np, stanlite as sl
>>> round(sl.poisson_lpmf(np.array([2, 0, 3]), 1.5), 6)
-4.957581
>>> round(sl.categorical_lpmf(np.array([1, 3, 3]), np.array([0.2, 0.3, 0.5])), 6)
-2.995732
>>> sl.grad(lambda t: sl.bernoulli_lpmf(np.array([1, 0, 1]), t))(0.5)
2.0
"""

import functools
import math

import numpy as np
import scipy.special as sps

from .. import math as sm
from ..autodiff.var import Box, shape_of, value_of
from ..autodiff.vm import opcodes as _op    # the interpreter's lowerings (autodiff/vm)
from ..autodiff.vm.declare import defkernel as _defkernel
from ..autodiff.vm.scalar import _inv_logit, _log1p_exp
from ..autodiff.vm.program import (check_lowering as _check_lowering,
                                   deflower as _deflower, density as _ld,
                                   lchoose_sum as _lchoose_sum)
from ..errors import DomainError
from .fused import (_fail, broadcast_size, check_finite, check_integer,
                    check_positive, check_probability, fused, pointwise, terms_primitive)
from .family import FINITE, NOT_NAN, POSITIVE, PROBABILITY, all_of, family, integer
from .rng import as_generator

__all__ = [
    "bernoulli_lpmf", "bernoulli_lcdf", "bernoulli_lccdf", "bernoulli_rng",
    "bernoulli_logit_lpmf", "bernoulli_logit_rng",
    "binomial_lpmf", "binomial_lcdf", "binomial_lccdf", "binomial_rng",
    "binomial_logit_lpmf", "binomial_logit_rng",
    "beta_binomial_lpmf", "beta_binomial_lcdf", "beta_binomial_lccdf", "beta_binomial_rng",
    "hypergeometric_lpmf", "hypergeometric_rng",
]

_NEG_INF = -np.inf
#: Stan's tolerance for a simplex (``|sum(theta) - 1| <= 1e-8``)
SIMPLEX_TOL = 1e-8


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------
def _quiet(kernel):
    """Run a kernel with numpy's floating-point warnings off: boundary values (log 0,
    exp overflow to inf) give IEEE results that the kernel handles on purpose."""
    @functools.wraps(kernel)
    def k(need, *args):
        args = [a if isinstance(a, Box) else _plain_float(a) for a in args]
        with np.errstate(all="ignore"):
            return kernel(need, *args)
    return k


def _plain_float(x):
    a = np.asarray(x, dtype=float)
    return float(a) if a.ndim == 0 else a


def _cdf_pair(core):
    """(lcdf kernel, lccdf kernel) from ``core(need, *args, upper)``."""
    return (_quiet(lambda need, *args: core(need, *args, False)),
            _quiet(lambda need, *args: core(need, *args, True)))


def _idata(x):
    """An integer argument as float64 for arithmetic (0-d -> float)."""
    a = np.asarray(value_of(x), dtype=float)
    return float(a) if a.ndim == 0 else a


def _size(x):
    return int(np.prod(shape_of(x), dtype=np.int64))


def _bsum(term, n):
    """The sum of ``term`` over an ``n``-element broadcast it is part of (each of its
    elements repeats ``n / size(term)`` times)."""
    size = _size(term)
    s = sm.sum(term) if shape_of(term) != () else term
    reps = n // max(1, size)
    return s if reps == 1 else s * reps


def _zero_where(a, x):
    """Mask of the elements where ``a == 0`` and ``x == 0`` meet (0 log 0 cases)."""
    return np.any((np.asarray(a) == 0) & (np.asarray(value_of(x)) == 0))


def _xlog(a, x):
    """``a * log(x)`` with ``0 log 0 = 0`` (``a`` plain; ``x`` may be traced)."""
    if _zero_where(a, x):
        z = np.asarray(a) == 0
        return sm.where(z, 0.0, a * sm.log(sm.where(z, 1.0, x)))
    return a * sm.log(x)


def _xdiv(a, x):
    """``a / x`` with ``0 / 0 = 0`` (the matching derivative of :func:`_xlog`)."""
    if _zero_where(a, x):
        z = np.asarray(a) == 0
        return sm.where(z, 0.0, a / sm.where(z, 1.0, x))
    return a / x


_LOG_FACTORIAL_TABLE_MAX = 1 << 20


def _sum_log_factorial(y):
    """sum_i lgamma(y_i + 1) of non-negative integer data: a table lookup for counts
    up to 2^20 (an order of magnitude cheaper than lgamma on every element)."""
    y = np.asarray(y)
    if y.size == 0:
        return 0.0
    top = float(y.max())
    if 0 <= top <= _LOG_FACTORIAL_TABLE_MAX and y.min() >= 0:
        table = sps.gammaln(np.arange(int(top) + 1, dtype=float) + 1.0)
        idx = y if y.dtype.kind in "iu" else y.astype(np.intp)
        return float(table[idx].sum())
    return float(sps.gammaln(y + 1.0).sum())


def _flat(x, shape):
    """``x`` broadcast to ``shape`` and flattened (traced values stay traced)."""
    if isinstance(x, Box):
        if shape_of(x) != tuple(shape):
            x = x + np.zeros(shape)
        return sm.reshape(x, (-1,))
    return np.broadcast_to(np.asarray(x, dtype=float), shape).ravel()


def _segsum(v, seg, m):
    """Per-segment sums of the flat ``v`` (segment ids ``seg``, ``m`` segments)."""
    if isinstance(v, Box):
        return sm.scatter_add(v, seg, (m,))
    return np.bincount(seg, weights=v, minlength=m)


def _ranges(start, length):
    """Flat ``k`` values and segment ids of the ragged ranges [start_i, start_i + len_i)."""
    length = np.asarray(length, dtype=np.int64)
    offs = np.cumsum(length) - length
    seg = np.repeat(np.arange(len(length)), length)
    k = np.asarray(start, dtype=float)[seg] + (np.arange(len(seg)) - offs[seg])
    return k, seg, offs


def _segment_weights(t, seg, offs, m):
    """log sum_k exp(t_k) per segment and the softmax weights exp(t_k - that).

    The per-segment maximum used for stability is a plain constant (the log-sum-exp
    does not depend on it), so the result stays differentiable in ``t``.
    """
    tv = np.asarray(value_of(t), dtype=float)
    mx = np.maximum.reduceat(tv, offs)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    e = sm.exp(t - mx[seg])
    s = _segsum(e, seg, m)
    return sm.log(s) + mx, e / s[seg]


def _stats_to_sides(logS, gs, head, upper):
    """From the log-mass ``logS`` of the summed side (``head``: k <= n, else k > n) and
    its score averages ``gs``, the requested side: log F (``upper`` False) or log(1-F),
    and d/dparam of it. With O the other side, S + O = 1 and S dlogS + O dlogO = 0."""
    want = head != upper        # is the requested side the one summed?
    if np.all(want):
        return logS, gs
    logO = sm.log1m_exp(logS)
    ratio = sm.exp(logS - logO)
    val = sm.where(want, logS, logO)
    return val, [None if g is None else sm.where(want, g, -ratio * g) for g in gs]


def _scatter(v, idx, m):
    """A length-``m`` vector with ``v`` at positions ``idx`` and 0 elsewhere."""
    if isinstance(v, Box):
        return sm.scatter_add(v, idx, (m,))
    out = np.zeros(m)
    out[idx] = v
    return out


def _int_draws(out):
    out = np.asarray(out, dtype=np.int64)
    return int(out) if out.ndim == 0 else out


def _bshape(*xs):
    return np.broadcast_shapes(*[np.shape(value_of(x)) for x in xs])


# argument checks ---------------------------------------------------------------------
def _check_count(fn, arg, x, lower=0):
    check_integer(fn, arg, x, lower)


def _check_le(fn, arg, x, bound, bound_name):
    x = np.asarray(x)
    ok = x <= np.asarray(bound)
    if not np.all(ok):
        _fail(fn, arg, f"<= {bound_name}", np.broadcast_to(x, ok.shape), ~ok)


def _at_most_one(fn, arg, x):
    _check_le(fn, arg, x, 1, "1")


def _n_at_most_N(fn, n, N, *params):
    _check_le(fn, "n", n, N, "N")


def _check_positive_finite(fn, arg, x):
    check_positive(fn, arg, x)


def _check_simplex(fn, arg, theta):
    t = np.asarray(theta, dtype=float)
    if t.ndim != 1 or t.size == 0:
        # a shape, not a value: a programming error (ValueError), never a rejection
        raise ValueError(f"{fn}: {arg} must be a non-empty vector (a simplex), "
                         f"but has shape {t.shape}")
    ok = t >= 0
    if not np.all(ok):
        _fail(fn, arg, "a simplex (non-negative entries)", t, ~ok)
    s = float(np.sum(t))
    if not abs(s - 1.0) <= SIMPLEX_TOL:
        raise DomainError(f"{fn}: {arg} must be a simplex (sum to 1 within "
                          f"{SIMPLEX_TOL:g}), but sums to {s!r}")


def _check_category(fn, arg, y, K):
    check_integer(fn, arg, y, 1)
    y = np.asarray(y)
    ok = y <= K
    if not np.all(ok):
        _fail(fn, arg, f"a category in 1..{K}", y, ~ok)


# ======================================================================================
# Bernoulli
# ======================================================================================
@_quiet
def _bernoulli(need, n, theta):
    """log Bernoulli(n | theta) = n log theta + (1 - n) log(1 - theta).

    With p = theta if n = 1 else 1 - theta: value sum log p, d/dtheta = (2n - 1)/p.
    A scalar theta uses the count k = sum n: k log theta + (N - k) log(1 - theta).
    """
    n = _idata(n)
    N = broadcast_size(n, theta)
    if shape_of(theta) == ():
        k = float(np.sum(n)) * (N // max(1, _size(n)))
        lp = _xlog(k, theta) + _xlog(N - k, 1.0 - theta)
        d = _xdiv(k, theta) - _xdiv(N - k, 1.0 - theta) if need[1] else None
        return lp, [None, d]
    s = 2.0 * n - 1.0
    p = (1.0 - n) + s * theta
    return sm.sum(sm.log(p)), [None, s / p if need[1] else None]


@_quiet
def _bernoulli_lcdf(need, n, theta):
    """log P(X <= n): -inf for n < 0, log(1 - theta) for n = 0, 0 for n >= 1."""
    n = _idata(n)
    if np.any(np.asarray(n) < 0):
        return _NEG_INF, [None, 0.0 if need[1] else None]
    z = np.asarray(n) == 0
    lp = sm.sum(sm.where(z, sm.log1m(theta), 0.0))
    d = sm.where(z, -1.0 / (1.0 - theta), 0.0) if need[1] else None
    return lp, [None, d]


@_quiet
def _bernoulli_lccdf(need, n, theta):
    """log P(X > n): 0 for n < 0, log theta for n = 0, -inf for n >= 1."""
    n = np.asarray(_idata(n))
    if np.any(n >= 1):
        return _NEG_INF, [None, 0.0 if need[1] else None]
    z = n == 0
    lp = sm.sum(sm.where(z, sm.log(theta), 0.0))
    d = sm.where(z, 1.0 / theta, 0.0) if need[1] else None
    return lp, [None, d]


bernoulli_lpmf, bernoulli_lcdf, bernoulli_lccdf, bernoulli_rng = family(
    "bernoulli", (("n", all_of(integer(0), _at_most_one)), ("theta", PROBABILITY)),
    kind="lpmf", lpmf=_bernoulli, lcdf=_bernoulli_lcdf, lccdf=_bernoulli_lccdf,
    cdf_args={"n": integer()}, rng_args=(("theta", PROBABILITY),), rng_post=_int_draws,
    rng_arrays=True, nondiff=(0,), rng=lambda g, theta: g.binomial(1, theta),
    doc="""Bernoulli log mass, summed: sum_i log Bernoulli(n_i | theta_i).

    Bernoulli(n | theta) = theta^n (1 - theta)^(1 - n),  n in {0, 1},  theta in [0, 1].

    >>> import stanlite as sl
    >>> round(sl.bernoulli_lpmf([1, 0, 1], 0.75), 6)
    -1.961659
    """,
    lcdf_doc="""Bernoulli log CDF, summed: log P(X <= n) = log(1 - theta) at n = 0.""",
    lccdf_doc="""Bernoulli log complementary CDF, summed: log P(X > n) = log theta
    at n = 0.""",
    rng_doc="""Bernoulli(theta) draws (0/1 ints), shaped like ``theta``.""")


# --------------------------------------------------------------------------------------
@_quiet
def _bernoulli_logit(need, n, alpha):
    """log Bernoulli(n | inv_logit(alpha)) = log inv_logit(s alpha),  s = 2n - 1.

    = -log1p_exp(-s alpha) (stable for any alpha); d/dalpha = s inv_logit(-s alpha)
    = s exp(-s alpha - log1p_exp(-s alpha)).
    """
    s = 2.0 * _idata(n) - 1.0
    t = -s * alpha
    L = sm.log1p_exp(t)
    lp = -sm.sum(L)
    return lp, [None, s * sm.exp(t - L) if need[1] else None]


bernoulli_logit_lpmf, bernoulli_logit_rng = family(
    "bernoulli_logit", (("n", all_of(integer(0), _at_most_one)), ("alpha", NOT_NAN)),
    kind="lpmf", lpmf=_bernoulli_logit, rng_post=_int_draws, rng_arrays=True,
    nondiff=(0,), rng=lambda g, alpha: g.binomial(1, sps.expit(alpha)),
    doc="""Bernoulli log mass on the logit scale, summed.

    BernoulliLogit(n | alpha) = Bernoulli(n | inv_logit(alpha)),  n in {0, 1}, alpha real;
    computed as log inv_logit((2n - 1) alpha), which is stable for any |alpha|.

    >>> import stanlite as sl
    >>> round(sl.bernoulli_logit_lpmf([1, 0], 800.0), 6)
    -800.0
    """,
    rng_doc="""Bernoulli(inv_logit(alpha)) draws (0/1 ints), shaped like ``alpha``.""")
_deflower(bernoulli_logit_lpmf, _ld(_op.BERNOULLI_LOGIT, 2))
_check_lowering(bernoulli_logit_lpmf, None, "not_nan")


# the interpreter's BERNOULLI_LOGIT sweeps (also bernoulli_logit_glm's):
# log inv_logit((2n - 1) alpha)
def _bernoulli_logit_value(V, code, r, n, a, sa, b, sb, c, sc):
    lp = 0.0
    for i in range(n):
        cnt = V[a + i * sa]
        al = V[b + i * sb]
        lp -= _log1p_exp(-(2.0 * cnt - 1.0) * al)
    return _op.OK, lp


def _bernoulli_logit_grad(V, A, code, r, g, m, n, a, sa, b, sb, c, sc):
    if m & 2:
        for i in range(n):
            sgn = 2.0 * V[a + i * sa] - 1.0
            A[b + i * sb] += g * sgn * _inv_logit(-sgn * V[b + i * sb])


_defkernel(_op.BERNOULLI_LOGIT, _bernoulli_logit_value, _bernoulli_logit_grad,
           kind="density")


# ======================================================================================
# binomial
# ======================================================================================
@_quiet
def _binomial(need, n, N, theta):
    """log Binomial(n | N, theta) = lchoose(N, n) + n log theta + (N - n) log(1 - theta).

    d/dtheta = n/theta - (N - n)/(1 - theta)  (0 log 0 = 0 at theta in {0, 1}).
    """
    n, N = _idata(n), _idata(N)
    M = broadcast_size(n, N, theta)
    lp = _bsum(sm.lchoose(N, n), M)
    m = N - n
    if shape_of(theta) == ():
        r = M // max(1, _size(m))
        k, f = float(np.sum(n)) * (M // max(1, _size(n))), float(np.sum(m)) * r
        lp = lp + _xlog(k, theta) + _xlog(f, 1.0 - theta)
        d = _xdiv(k, theta) - _xdiv(f, 1.0 - theta) if need[2] else None
        return lp, [None, None, d]
    lp = lp + _bsum(_xlog(n, theta) + _xlog(m, 1.0 - theta), M)
    d = _xdiv(n, theta) - _xdiv(m, 1.0 - theta) if need[2] else None
    return lp, [None, None, d]


def _binomial_cdf(need, n, N, theta, upper):
    """log P(X <= n) = log I_{1-theta}(N - n, n + 1), log P(X > n) = log I_theta(n + 1,
    N - n); d/dtheta P(X <= n) = -(N - n) C(N, n) theta^n (1 - theta)^(N - n - 1)."""
    n, N = np.asarray(_idata(n)), np.asarray(_idata(N))
    shape = _bshape(n, N, theta)
    below, above = n < 0, n >= N
    if np.any(above if upper else below):
        return _NEG_INF, [None, None, 0.0 if need[2] else None]
    inside = ~(below | above)
    if not np.all(inside):          # the other edge contributes log 1 = 0
        nn = np.where(inside, n, 0.0)
        NN = np.where(inside, N, 1.0)
    else:
        nn, NN = n, N
    if upper:
        F = sm.inc_beta(nn + 1.0, NN - nn, theta)
    else:
        F = sm.inc_beta(NN - nn, nn + 1.0, 1.0 - theta)
    logF = sm.log(F)
    if not np.all(inside):
        logF = sm.where(np.broadcast_to(inside, shape), logF, 0.0)
    lp = _bsum(logF, int(np.prod(shape, dtype=np.int64)))
    d = None
    if need[2]:
        m = NN - nn
        logd = (sm.log(m) + sm.lchoose(NN, nn) + _xlog(nn, theta)
                + _xlog(m - 1.0, 1.0 - theta))
        d = sm.exp(logd - logF)
        if not upper:
            d = -d
        if not np.all(inside):
            d = sm.where(np.broadcast_to(inside, shape), d, 0.0)
    return lp, [None, None, d]


_binomial_lcdf, _binomial_lccdf = _cdf_pair(_binomial_cdf)
binomial_lpmf, binomial_lcdf, binomial_lccdf = family(
    "binomial", (("n", integer(0)), ("N", integer(0)), ("theta", PROBABILITY)),
    kind="lpmf", lpmf=_binomial, lcdf=_binomial_lcdf, lccdf=_binomial_lccdf,
    cdf_args={"n": integer()}, relations=((2, _n_at_most_N),), cdf_relations=(),
    nondiff=(0, 1),
    doc="""Binomial log mass, summed: sum_i log Binomial(n_i | N_i, theta_i).

    Binomial(n | N, theta) = C(N, n) theta^n (1 - theta)^(N - n),  0 <= n <= N,
    theta in [0, 1].

    >>> import stanlite as sl
    >>> round(sl.binomial_lpmf(3, 10, 0.25), 6)
    -1.385166
    """,
    lcdf_doc="""Binomial log CDF, summed: log P(X <= n) = log I_{1-theta}(N - n, n + 1).""",
    lccdf_doc="""Binomial log complementary CDF, summed: log P(X > n)
    = log I_theta(n + 1, N - n).""")


def _rng_ints(fn, arg, x):
    x = np.asarray(value_of(x))
    check_integer(fn, arg, x, 0)
    return x.astype(np.int64)


def binomial_rng(N, theta, rng=None):
    """Binomial(N, theta) draws (ints), shaped like the broadcast of the arguments."""
    N = _rng_ints("binomial_rng", "N", N)
    theta = np.asarray(value_of(theta), dtype=float)
    check_probability("binomial_rng", "theta", theta)
    return _int_draws(as_generator(rng).binomial(N, theta))


# --------------------------------------------------------------------------------------
@_quiet
def _binomial_logit(need, n, N, alpha):
    """log BinomialLogit(n | N, alpha) = lchoose(N, n) + n alpha - N log1p_exp(alpha).

    (n log inv_logit(alpha) + (N - n) log(1 - inv_logit(alpha)), stably);
    d/dalpha = n - N inv_logit(alpha), inv_logit(alpha) = exp(alpha - log1p_exp(alpha)).
    """
    n, N = _idata(n), _idata(N)
    M = broadcast_size(n, N, alpha)
    L = sm.log1p_exp(alpha)
    lp = _bsum(sm.lchoose(N, n), M) + _bsum(n * alpha - N * L, M)
    d = n - N * sm.exp(alpha - L) if need[2] else None
    return lp, [None, None, d]


(binomial_logit_lpmf,) = family(
    "binomial_logit", (("n", integer(0)), ("N", integer(0)), ("alpha", FINITE)),
    kind="lpmf", lpmf=_binomial_logit, relations=((2, _n_at_most_N),), nondiff=(0, 1),
    doc="""Binomial log mass on the logit scale, summed.

    BinomialLogit(n | N, alpha) = Binomial(n | N, inv_logit(alpha)),  alpha real;
    computed as lchoose(N, n) + n alpha - N log1p_exp(alpha).

    >>> import stanlite as sl
    >>> round(sl.binomial_logit_lpmf(3, 10, 0.0), 6)
    -2.14398
    """)
_deflower(binomial_logit_lpmf, _ld(_op.BINOMIAL_LOGIT, 3, _lchoose_sum))
_check_lowering(binomial_logit_lpmf, None, None, "finite")


# the interpreter's BINOMIAL_LOGIT sweeps: n alpha - N log1p_exp(alpha), summed, + the
# constant V[X1] = sum lchoose(N, n)
def _binomial_logit_value(V, code, r, n, a, sa, b, sb, c, sc):
    lp = 0.0
    for i in range(n):
        al = V[c + i * sc]
        if not math.isfinite(al):
            return _op.DOMAIN, 0.0
        lp += V[a + i * sa] * al - V[b + i * sb] * _log1p_exp(al)
    return _op.OK, V[code[r, _op.X1]] + lp


def _binomial_logit_grad(V, A, code, r, g, m, n, a, sa, b, sb, c, sc):
    if m & 4:
        for i in range(n):
            al = V[c + i * sc]
            A[c + i * sc] += g * (V[a + i * sa] - V[b + i * sb] * _inv_logit(al))


_defkernel(_op.BINOMIAL_LOGIT, _binomial_logit_value, _binomial_logit_grad,
           kind="density")


def binomial_logit_rng(N, alpha, rng=None):
    """Binomial(N, inv_logit(alpha)) draws (ints)."""
    N = _rng_ints("binomial_logit_rng", "N", N)
    alpha = np.asarray(value_of(alpha), dtype=float)
    check_finite("binomial_logit_rng", "alpha", alpha)
    return _int_draws(as_generator(rng).binomial(N, sps.expit(alpha)))


# ======================================================================================
# beta-binomial
# ======================================================================================
@_quiet
def _beta_binomial(need, n, N, alpha, beta):
    """log BetaBinomial(n | N, a, b) = lchoose(N, n) + lbeta(n + a, N - n + b) - lbeta(a, b).

    d/da = psi(n + a) - psi(N + a + b) - psi(a) + psi(a + b),
    d/db = psi(N - n + b) - psi(N + a + b) - psi(b) + psi(a + b);
    an n outside 0..N has probability 0 (log density -inf), as in Stan.
    """
    n, N = _idata(n), _idata(N)
    M = broadcast_size(n, N, alpha, beta)
    na, Na = np.asarray(n), np.asarray(N)
    if np.any((na < 0) | (na > Na)):
        return _NEG_INF, [None, None, 0.0 if need[2] else None, 0.0 if need[3] else None]
    lp = (_bsum(sm.lchoose(N, n), M) + _bsum(sm.lbeta(n + alpha, (N - n) + beta), M)
          - _bsum(sm.lbeta(alpha, beta), M))
    da = db = None
    if need[2] or need[3]:
        ab = alpha + beta
        common = sm.digamma(ab) - sm.digamma(N + ab)
        if need[2]:
            da = sm.digamma(n + alpha) - sm.digamma(alpha) + common
        if need[3]:
            db = sm.digamma((N - n) + beta) - sm.digamma(beta) + common
    return lp, [None, None, da, db]


def _bb_cdf(need, n, N, alpha, beta, upper):
    """log P(X <= n) or log P(X > n) of the beta-binomial by finite sums of the mass.

    The derivative of log S (S = sum_{k in side} p_k) is the p_k/S-weighted average of
    the per-term scores d log p_k, computed on the side holding at most half the mass.
    """
    n, N = np.asarray(_idata(n)), np.asarray(_idata(N))
    nf = np.broadcast_to(n, _bshape(n, N, alpha, beta)).ravel()
    if np.any(nf >= np.broadcast_to(N, _bshape(n, N, alpha, beta)).ravel() if upper
              else nf < 0):
        return _NEG_INF, [None, None, 0.0 if need[2] else None, 0.0 if need[3] else None]
    vals, parts = _bb_cdf_terms(need, n, N, alpha, beta, upper)
    return sm.sum(vals), parts


def _bb_cdf_terms(need, n, N, alpha, beta, upper):
    """The elementwise values of :func:`_bb_cdf` at the broadcast shape (-inf for an
    element with probability 0, 0 for one with probability 1) and their partials."""
    n, N = np.asarray(_idata(n)), np.asarray(_idata(N))
    shape = _bshape(n, N, alpha, beta)
    M = int(np.prod(shape, dtype=np.int64))
    nf = np.broadcast_to(n, shape).ravel()
    Nf = np.broadcast_to(N, shape).ravel()
    below, above = nf < 0, nf >= Nf
    dead = above if upper else below
    idx = np.flatnonzero(~(below | above))
    if idx.size == 0:
        return (np.where(dead, _NEG_INF, 0.0).reshape(shape),
                [None, None] + [np.zeros(shape) if nd else None for nd in need[2:]])
    nv, Nv = nf[idx], Nf[idx]
    m = idx.size
    a = _flat(alpha, shape)
    b = _flat(beta, shape)
    if idx.size != M:
        a, b = a[idx], b[idx]

    def log_terms(k, seg, a, b):
        # log p_k without the k-free -lbeta(a, b)
        return sm.lchoose(Nv[seg], k) + sm.lbeta(k + a[seg], (Nv[seg] - k) + b[seg])

    # which side holds at most half the mass: plain head sums
    ap, bp = np.asarray(value_of(a)), np.asarray(value_of(b))
    k, seg, offs = _ranges(np.zeros(m), nv + 1)
    logH, _ = _segment_weights(log_terms(k, seg, ap, bp), seg, offs, m)
    head = (logH - sps.betaln(ap, bp)) <= np.log(0.5)
    start = np.where(head, 0.0, nv + 1)
    k, seg, offs = _ranges(start, np.where(head, nv + 1, Nv - nv))
    logS, w = _segment_weights(log_terms(k, seg, a, b), seg, offs, m)
    logS = logS - sm.lbeta(a, b)
    gs = [None, None]
    if need[2] or need[3]:
        ab = a + b
        common = sm.digamma(ab) - sm.digamma(Nv + ab)
        if need[2]:
            gs[0] = _segsum(w * sm.digamma(k + a[seg]), seg, m) - sm.digamma(a) + common
        if need[3]:
            gs[1] = (_segsum(w * sm.digamma((Nv[seg] - k) + b[seg]), seg, m)
                     - sm.digamma(b) + common)
    val, gs = _stats_to_sides(logS, gs, head, upper)
    if m != M:
        val = _scatter(val, idx, M)
        if np.any(dead):
            val = sm.where(dead, _NEG_INF, val)
    parts = [None, None, None, None]
    for j, g in enumerate(gs):
        if g is not None:
            parts[2 + j] = sm.reshape(g if m == M else _scatter(g, idx, M), shape)
    return sm.reshape(val, shape), parts


_bb_lcdf, _bb_lccdf = _cdf_pair(_bb_cdf)
beta_binomial_lpmf, beta_binomial_lcdf, beta_binomial_lccdf = family(
    "beta_binomial",
    (("n", integer()), ("N", integer(0)), ("alpha", POSITIVE), ("beta", POSITIVE)),
    kind="lpmf", lpmf=_beta_binomial, lcdf=_bb_lcdf, lccdf=_bb_lccdf, nondiff=(0, 1),
    doc="""Beta-binomial log mass, summed.

    BetaBinomial(n | N, a, b) = C(N, n) B(n + a, N - n + b) / B(a, b),  0 <= n <= N,
    a, b > 0 (n outside 0..N: log mass -inf).

    >>> import stanlite as sl
    >>> round(sl.beta_binomial_lpmf(3, 10, 2.0, 3.0), 6)
    -1.938941
    """,
    lcdf_doc="""Beta-binomial log CDF, summed: log sum_{k <= n} BetaBinomial(k | N, a, b).""",
    lccdf_doc="""Beta-binomial log complementary CDF, summed:
    log sum_{k > n} BetaBinomial(k | N, a, b).""")


def beta_binomial_rng(N, alpha, beta, rng=None):
    """BetaBinomial(N, alpha, beta) draws: Binomial(N, p) with p ~ Beta(alpha, beta)."""
    fn = "beta_binomial_rng"
    N = _rng_ints(fn, "N", N)
    alpha = np.asarray(value_of(alpha), dtype=float)
    beta = np.asarray(value_of(beta), dtype=float)
    check_positive(fn, "alpha", alpha)
    check_positive(fn, "beta", beta)
    g = as_generator(rng)
    shape = np.broadcast_shapes(N.shape, alpha.shape, beta.shape)
    p = g.beta(np.broadcast_to(alpha, shape), np.broadcast_to(beta, shape))
    return _int_draws(g.binomial(N, p))


# ======================================================================================
# hypergeometric (all arguments are integers: no derivatives)
# ======================================================================================
@_quiet
def _hypergeometric(need, n, N, a, b):
    """log Hypergeometric(n | N, a, b) = lchoose(a, n) + lchoose(b, N - n) - lchoose(a + b, N)."""
    n, N, a, b = _idata(n), _idata(N), _idata(a), _idata(b)
    M = broadcast_size(n, N, a, b)
    lp = (_bsum(sm.lchoose(a, n), M) + _bsum(sm.lchoose(b, N - n), M)
          - _bsum(sm.lchoose(a + b, N), M))
    return lp, [None, None, None, None]


def _check_hypergeometric(fn):
    def check(n, N, a, b):
        check_integer(fn, "N", N, 0)
        check_integer(fn, "a", a, 0)
        check_integer(fn, "b", b, 0)
        _check_le(fn, "N", N, np.asarray(a) + np.asarray(b), "a + b")
        if n is None:
            return
        check_integer(fn, "n", n)
        n_, N_, a_, b_ = (np.asarray(v) for v in (n, N, a, b))
        ok = (n_ >= np.maximum(0, N_ - b_)) & (n_ <= np.minimum(a_, N_))
        if not np.all(ok):
            _fail(fn, "n", "in max(0, N - b)..min(a, N)",
                  np.broadcast_to(n_, ok.shape), ~ok)
    return check


hypergeometric_lpmf = fused("hypergeometric_lpmf", _hypergeometric,
                            _check_hypergeometric("hypergeometric_lpmf"),
                            nondiff=(0, 1, 2, 3))
hypergeometric_lpmf.__doc__ = """Hypergeometric log mass, summed: n successes in N draws
    without replacement from a successes and b failures.

    Hypergeometric(n | N, a, b) = C(a, n) C(b, N - n) / C(a + b, N),
    max(0, N - b) <= n <= min(a, N), N <= a + b (all integers: no derivatives).

    >>> import stanlite as sl
    >>> round(sl.hypergeometric_lpmf(2, 5, 4, 6), 6)
    -0.741937
    """


def hypergeometric_rng(N, a, b, rng=None):
    """Hypergeometric(N, a, b) draws: successes among N draws from a successes, b failures."""
    fn = "hypergeometric_rng"
    _check_hypergeometric(fn)(None, N, a, b)
    N, a, b = (_rng_ints(fn, nm, v) for nm, v in (("N", N), ("a", a), ("b", b)))
    return _int_draws(as_generator(rng).hypergeometric(a, b, N))


# ======================================================================================
# elementwise forms (``reduce=False``, see :mod:`.fused`): outcomes and sizes are data,
# so masks on them are constants; an element with probability 0 is -inf on its own
# ======================================================================================
def _pointwise(*densities, broadcast=True):
    """:func:`.pointwise` with the plain arguments as floats (as :func:`_quiet` gives
    the kernels: lists and ints are accepted)."""
    def declare(fn):
        @functools.wraps(fn)
        def plain_args(*args):
            return fn(*[a if isinstance(a, Box) else _plain_float(a) for a in args])
        pointwise(*densities, broadcast=broadcast)(plain_args)
        return fn
    return declare


def _pw_int(x):
    """An integer argument as a float array (plain: outcomes are never traced)."""
    return np.asarray(_idata(x), dtype=float)


def _pw_mask(mask, dead_value, f, *safe):
    """``f(*safe)`` with ``dead_value`` where ``mask`` (which may be all False)."""
    if not np.any(mask):
        return f(*safe)
    return sm.where(mask, dead_value, f(*safe))


@_pointwise(bernoulli_lpmf)
def _bernoulli_terms(n, theta):
    n = _pw_int(n)
    return sm.log((1.0 - n) + (2.0 * n - 1.0) * theta)


@_pointwise(bernoulli_lcdf)
def _bernoulli_lcdf_terms(n, theta):
    n = _pw_int(n)
    return sm.where(n < 0, _NEG_INF, sm.where(n == 0, sm.log1m(theta), 0.0))


@_pointwise(bernoulli_lccdf)
def _bernoulli_lccdf_terms(n, theta):
    n = _pw_int(n)
    return sm.where(n >= 1, _NEG_INF, sm.where(n == 0, sm.log(theta), 0.0))


@_pointwise(bernoulli_logit_lpmf)
def _bernoulli_logit_terms(n, alpha):
    return -sm.log1p_exp((1.0 - 2.0 * _pw_int(n)) * alpha)


@_pointwise(binomial_lpmf)
def _binomial_terms(n, N, theta):
    n, N = _pw_int(n), _pw_int(N)
    n, N = np.broadcast_arrays(n, N)
    return sm.lchoose(N, n) + _xlog(n, theta) + _xlog(N - n, 1.0 - theta)


def _binomial_cdf_terms(upper):
    def terms(n, N, theta):
        n, N = np.broadcast_arrays(_pw_int(n), _pw_int(N))
        below, above = n < 0, n >= N
        inside = ~(below | above)
        nn, NN = np.where(inside, n, 0.0), np.where(inside, N, 1.0)
        if upper:
            lf = sm.log(sm.inc_beta(nn + 1.0, NN - nn, theta))
        else:
            lf = sm.log(sm.inc_beta(NN - nn, nn + 1.0, 1.0 - theta))
        dead = above if upper else below
        return sm.where(dead, _NEG_INF, sm.where(inside, lf, 0.0))
    return terms


_pointwise(binomial_lcdf)(_binomial_cdf_terms(False))
_pointwise(binomial_lccdf)(_binomial_cdf_terms(True))


@_pointwise(binomial_logit_lpmf)
def _binomial_logit_terms(n, N, alpha):
    n, N = _pw_int(n), _pw_int(N)
    return sm.lchoose(N, n) + n * alpha - N * sm.log1p_exp(alpha)


@_pointwise(beta_binomial_lpmf)
def _beta_binomial_terms(n, N, alpha, beta):
    n, N = np.broadcast_arrays(_pw_int(n), _pw_int(N))
    dead = (n < 0) | (n > N)
    n = np.where(dead, 0.0, n)
    return _pw_mask(dead, _NEG_INF, lambda: sm.lchoose(N, n) + sm.lbeta(n + alpha, (N - n) + beta)
                    - sm.lbeta(alpha, beta))


def _quiet_terms(name, core, upper, nondiff):
    """:func:`.terms_primitive` of ``core(need, *args, upper)`` (warnings off)."""
    def q(need, *args):
        args = [a if isinstance(a, Box) else _plain_float(a) for a in args]
        with np.errstate(all="ignore"):
            return core(need, *args, upper)
    return terms_primitive(name, q, nondiff)


pointwise(beta_binomial_lcdf)(_quiet_terms("beta_binomial_lcdf", _bb_cdf_terms, False,
                                           (0, 1)))
pointwise(beta_binomial_lccdf)(_quiet_terms("beta_binomial_lccdf", _bb_cdf_terms, True,
                                            (0, 1)))


def _isinf(x):
    return np.isinf(x)


def _isneginf(x):
    return np.isneginf(x)


@_pointwise(hypergeometric_lpmf)
def _hypergeometric_terms(n, N, a, b):
    n, N, a, b = (_pw_int(x) for x in (n, N, a, b))
    return sm.lchoose(a, n) + sm.lchoose(b, N - n) - sm.lchoose(a + b, N)
