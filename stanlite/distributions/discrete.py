"""Discrete distributions: log mass functions, CDFs and RNGs with Stan's names.

Every ``<name>_lpmf(n, *params)`` is one fused node (see :mod:`.fused`): the value is
the sum over the broadcast elements, the partials w.r.t. every real parameter come
from the same kernel. Integer arguments (outcomes, sizes, counts) are never
differentiable: they are validated with ``check_integer`` (an ``int`` array, or floats
with integral values; ``2.5`` raises :class:`~stanlite.DomainError` naming the
argument) and a traced value there raises :class:`~stanlite.DifferentiationError`.

Supports are Stan's: ``bernoulli`` outcomes are 0/1, counts are ``>= 0``, and the
outcomes of ``categorical``, ``categorical_logit`` and ``ordered_logistic`` are
**1-based** (``1..K``), exactly as in Stan (``y = 1`` is the first category).

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
from ..autodiff.var import Box, guarded, shape_of, value_of
from ..autodiff.vm import opcodes as _op    # the interpreter's lowerings (autodiff/vm)
from ..autodiff.vm.program import (check_lowering as _check_lowering,
                                   deflower as _deflower, density as _ld,
                                   lchoose_sum as _lchoose_sum,
                                   lgamma_table as _lgamma_table)
from ..errors import DomainError
from .fused import (_fail, broadcast_size, check_finite, check_integer,
                    check_positive, check_probability, fused, pointwise, terms_primitive)
from .family import (FINITE, NONNEGATIVE, NOT_NAN, POSITIVE, PROBABILITY, all_of, family,
                     integer)
from .rng import as_generator

__all__ = [
    "bernoulli_lpmf", "bernoulli_lcdf", "bernoulli_lccdf", "bernoulli_rng",
    "bernoulli_logit_lpmf", "bernoulli_logit_rng",
    "binomial_lpmf", "binomial_lcdf", "binomial_lccdf", "binomial_rng",
    "binomial_logit_lpmf", "binomial_logit_rng",
    "beta_binomial_lpmf", "beta_binomial_lcdf", "beta_binomial_lccdf", "beta_binomial_rng",
    "poisson_lpmf", "poisson_lcdf", "poisson_lccdf", "poisson_rng",
    "poisson_log_lpmf", "poisson_log_rng",
    "neg_binomial_lpmf", "neg_binomial_lcdf", "neg_binomial_lccdf", "neg_binomial_rng",
    "neg_binomial_2_lpmf", "neg_binomial_2_lcdf", "neg_binomial_2_lccdf",
    "neg_binomial_2_rng",
    "neg_binomial_2_log_lpmf", "neg_binomial_2_log_rng",
    "categorical_lpmf", "categorical_rng", "categorical_logit_lpmf",
    "categorical_logit_rng",
    "multinomial_lpmf", "multinomial_rng",
    "ordered_logistic_lpmf", "ordered_logistic_rng",
    "hypergeometric_lpmf", "hypergeometric_rng",
]

_NEG_INF = -np.inf
#: Stan's tolerance for a simplex (``|sum(theta) - 1| <= 1e-8``)
SIMPLEX_TOL = 1e-8
#: Stan's largest Poisson rate for ``poisson_rng`` (2^30)
POISSON_MAX_RATE = 2.0 ** 30


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


def _plain_poisson(n, lam):
    """One plain term (the hot case): certainly valid, nothing to report."""
    return type(lam) is float and lam >= 0.0 and type(n) in _INT_TYPES and n >= 0


def _plain_poisson_cdf(n, lam):
    return type(lam) is float and lam >= 0.0 and type(n) in _INT_TYPES


def _rate_below_max(fn, arg, lam):
    ok = lam < POISSON_MAX_RATE
    if not np.all(ok):
        _fail(fn, arg, "less than 2^30", lam, ~ok)


def _log_rate_below_max(fn, arg, alpha):
    with np.errstate(over="ignore"):
        lam = np.exp(alpha)
    ok = lam < POISSON_MAX_RATE
    if not np.all(ok):
        _fail(fn, arg, "less than log(2^30)", alpha, ~ok)


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
    "bernoulli",
    (("n", all_of(integer(0), _at_most_one)), ("theta", PROBABILITY)),
    kind="lpmf",
    lpmf=_bernoulli,
    lcdf=_bernoulli_lcdf,
    lccdf=_bernoulli_lccdf,
    cdf_args={"n": integer()},
    rng_args=(("theta", PROBABILITY),),
    rng_post=_int_draws,
    rng_arrays=True,
    nondiff=(0,),
    rng=lambda g, theta: g.binomial(1, theta),
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
    "bernoulli_logit",
    (("n", all_of(integer(0), _at_most_one)), ("alpha", NOT_NAN)),
    kind="lpmf",
    lpmf=_bernoulli_logit,
    rng_post=_int_draws,
    rng_arrays=True,
    nondiff=(0,),
    rng=lambda g, alpha: g.binomial(1, sps.expit(alpha)),
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
    "binomial",
    (("n", integer(0)), ("N", integer(0)), ("theta", PROBABILITY)),
    kind="lpmf",
    lpmf=_binomial,
    lcdf=_binomial_lcdf,
    lccdf=_binomial_lccdf,
    cdf_args={"n": integer()},
    relations=((2, _n_at_most_N),),
    cdf_relations=(),
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
    "binomial_logit",
    (("n", integer(0)), ("N", integer(0)), ("alpha", FINITE)),
    kind="lpmf",
    lpmf=_binomial_logit,
    relations=((2, _n_at_most_N),),
    nondiff=(0, 1),
    doc="""Binomial log mass on the logit scale, summed.

    BinomialLogit(n | N, alpha) = Binomial(n | N, inv_logit(alpha)),  alpha real;
    computed as lchoose(N, n) + n alpha - N log1p_exp(alpha).

    >>> import stanlite as sl
    >>> round(sl.binomial_logit_lpmf(3, 10, 0.0), 6)
    -2.14398
    """)
_deflower(binomial_logit_lpmf, _ld(_op.BINOMIAL_LOGIT, 3, _lchoose_sum))
_check_lowering(binomial_logit_lpmf, None, None, "finite")


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
    kind="lpmf",
    lpmf=_beta_binomial,
    lcdf=_bb_lcdf,
    lccdf=_bb_lccdf,
    nondiff=(0, 1),
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
# Poisson
# ======================================================================================
# one plain term (a Stan-style loop calls ``poisson_lpmf(D[t], lam)`` thousands of
# times): plain float arithmetic, the same formula in the same order as the general
# kernel below, without its numpy calls (~100 us -> a few us a call)
_INT_TYPES = frozenset((int, np.int64, np.int32, np.int16, np.int8, np.uint8, np.uint16,
                        np.uint32, np.uint64))
_COUNT_TYPES = frozenset((int, float, np.int64, np.int32, np.int16, np.int8, np.uint8,
                          np.uint16, np.uint32, np.uint64, np.float64))
_LGAMMA1 = {}


def _lgamma1(n):
    """lgamma(n + 1) of a count, as the general kernel computes it (scipy), memoised."""
    v = _LGAMMA1.get(n)
    if v is None:
        v = float(sps.gammaln(n + 1.0))
        if len(_LGAMMA1) < 4096:
            _LGAMMA1[n] = v
    return v


def _poisson(need, n, lam):
    """log Poisson(n | lambda) = n log lambda - lambda - lgamma(n + 1);  d = n/lambda - 1.

    lambda = 0 allows only n = 0; lambda = inf has probability 0 (Stan's conventions).
    """
    if type(lam) is float and 0.0 < lam < math.inf and type(n) in _COUNT_TYPES:
        k = float(n)
        lp = -_lgamma1(k) + k * math.log(lam) - lam
        return lp, [None, k / lam - 1.0 if need[1] else None]
    return _poisson_any(need, n, lam)


@_quiet
def _poisson_any(need, n, lam):
    n = _idata(n)
    M = broadcast_size(n, lam)
    if np.any(np.isinf(value_of(lam))):
        return _NEG_INF, [None, 0.0 if need[1] else None]
    base = -_sum_log_factorial(n) * (M // max(1, _size(n)))
    if shape_of(lam) == ():
        k = float(np.sum(n)) * (M // max(1, _size(n)))
        lp = base + _xlog(k, lam) - M * lam
        return lp, [None, _xdiv(k, lam) - M if need[1] else None]
    lp = base + _bsum(_xlog(n, lam), M) - _bsum(lam, M)
    return lp, [None, _xdiv(n, lam) - 1.0 if need[1] else None]


def _poisson_cdf(need, n, lam, upper):
    """log P(X <= n) = log Q(n + 1, lambda), log P(X > n) = log P(n + 1, lambda)
    (regularized incomplete gamma); d/dlambda P(X <= n) = -Poisson(n | lambda)."""
    n = np.asarray(_idata(n))
    shape = _bshape(n, lam)
    below = n < 0
    if not upper and np.any(below):
        return _NEG_INF, [None, 0.0 if need[1] else None]
    nn = np.where(below, 0.0, n) if np.any(below) else n
    F = sm.gamma_p(nn + 1.0, lam) if upper else sm.gamma_q(nn + 1.0, lam)
    logF = sm.log(F)
    if np.any(below):
        logF = sm.where(np.broadcast_to(~below, shape), logF, 0.0)
    lp = _bsum(logF, int(np.prod(shape, dtype=np.int64)))
    d = None
    if need[1]:
        d = sm.exp(_xlog(nn, lam) - lam - sps.gammaln(nn + 1.0) - logF)
        if not upper:
            d = -d
        if np.any(below):
            d = sm.where(np.broadcast_to(~below, shape), d, 0.0)
    return lp, [None, d]


_poisson_lcdf, _poisson_lccdf = _cdf_pair(_poisson_cdf)
poisson_lpmf, poisson_lcdf, poisson_lccdf, poisson_rng = family(
    "poisson",
    (("n", integer(0)), ("lambda", all_of(NOT_NAN, NONNEGATIVE))),
    kind="lpmf",
    lpmf=_poisson,
    lcdf=_poisson_lcdf,
    lccdf=_poisson_lccdf,
    cdf_args={"n": integer()},
    rng_args=(("lambda", all_of(NOT_NAN, NONNEGATIVE, _rate_below_max)),),
    params=("n", "lam"),
    rng_post=_int_draws,
    rng_arrays=True,
    fast=_plain_poisson,
    cdf_fast=_plain_poisson_cdf,
    nondiff=(0,),
    rng=lambda g, lam: g.poisson(lam),
    doc="""Poisson log mass, summed: sum_i log Poisson(n_i | lambda_i).

    Poisson(n | lambda) = lambda^n e^(-lambda) / n!,  n >= 0,  lambda >= 0.

    >>> import stanlite as sl
    >>> round(sl.poisson_lpmf(2, 1.5), 6)
    -1.382217
    """,
    lcdf_doc="""Poisson log CDF, summed: log P(X <= n) = log Q(n + 1, lambda).""",
    lccdf_doc="""Poisson log complementary CDF, summed: log P(X > n) = log P(n + 1, lambda).""",
    rng_doc="""Poisson(lambda) draws (ints); lambda must be < 2^30 (Stan's limit).""")
_deflower(poisson_lpmf, _ld(_op.POISSON, 2, _lgamma_table))
_check_lowering(poisson_lpmf, None, "nonnegative_finite")


# --------------------------------------------------------------------------------------
@_quiet
def _poisson_log(need, n, alpha):
    """log PoissonLog(n | alpha) = n alpha - exp(alpha) - lgamma(n + 1); d = n - exp(alpha).

    Never forms log(exp(alpha)); alpha = -inf allows only n = 0, alpha = +inf has
    probability 0, and exp(alpha) overflowing gives -inf (the correct limit).
    """
    n = _idata(n)
    M = broadcast_size(n, alpha)
    av = np.asarray(value_of(alpha))
    if np.any(av == np.inf):
        return _NEG_INF, [None, 0.0 if need[1] else None]
    base = -_sum_log_factorial(n) * (M // max(1, _size(n)))
    if shape_of(alpha) == ():
        k = float(np.sum(n)) * (M // max(1, _size(n)))
        na = 0.0 if k == 0 else k * alpha
        lp = base + na - M * sm.exp(alpha)
        return lp, [None, k - M * sm.exp(alpha) if need[1] else None]
    if np.any(np.isneginf(av)):
        z = np.asarray(n) == 0
        na = sm.where(z, 0.0, n * sm.where(z, 0.0, alpha))
    else:
        na = n * alpha
    e = sm.exp(alpha)
    lp = base + _bsum(na, M) - _bsum(e, M)
    return lp, [None, n - e if need[1] else None]


poisson_log_lpmf, poisson_log_rng = family(
    "poisson_log",
    (("n", integer(0)), ("alpha", NOT_NAN)),
    kind="lpmf",
    lpmf=_poisson_log,
    rng_args=(("alpha", all_of(NOT_NAN, _log_rate_below_max)),),
    rng_post=_int_draws,
    rng_arrays=True,
    nondiff=(0,),
    rng=lambda g, alpha: g.poisson(np.exp(alpha)),
    doc="""Poisson log mass on the log scale, summed.

    PoissonLog(n | alpha) = Poisson(n | exp(alpha)); computed as
    n alpha - exp(alpha) - lgamma(n + 1), never as log(exp(alpha)).

    >>> import stanlite as sl
    >>> round(sl.poisson_log_lpmf(2, 0.0), 6)
    -1.693147
    """,
    rng_doc="""Poisson(exp(alpha)) draws (ints).""")
_deflower(poisson_log_lpmf, _ld(_op.POISSON_LOG, 2, _lgamma_table))
_check_lowering(poisson_log_lpmf, None, "finite")


# ======================================================================================
# negative binomial
# ======================================================================================
@_quiet
def _neg_binomial(need, n, alpha, beta):
    """log NegBinomial(n | a, b) = lchoose(n + a - 1, n) + a log(b/(1+b)) - n log1p(b).

    d/da = psi(n + a) - psi(a) + log(b/(1+b)),  d/db = a/b - (a + n)/(1 + b);
    log(b/(1+b)) = -log1p(1/b) keeps precision for large b.
    """
    n = _idata(n)
    M = broadcast_size(n, alpha, beta)
    lp_ = -sm.log1p(1.0 / beta)          # log(b / (1 + b))
    l1b = sm.log1p(beta)                 # -log(1 / (1 + b))
    lp = (_bsum(sm.lchoose(n + alpha - 1.0, n), M) + _bsum(alpha * lp_, M)
          - _bsum(n * l1b, M))
    da = sm.digamma(n + alpha) - sm.digamma(alpha) + lp_ if need[1] else None
    db = alpha / beta - (alpha + n) / (1.0 + beta) if need[2] else None
    return lp, [None, da, db]


def _nb_tail_lengths(n, a, lq, cap=1 << 22):
    """How many terms k = n+1, n+2, ... of the NB(a, p) upper tail (q = 1 - p = e^lq)
    make the remainder < 1e-18 of the sum (plain values; ``-1`` where ``cap`` terms
    are not enough).

    Past the mode the ratio r_k = p_{k+1}/p_k = (k + a)/(k + 1) q is < 1 and moves
    monotonically towards q, so the remainder after term k is at most
    p_k r/(1 - r) with r = max(r_k, q).
    """
    m = n.size
    T = np.full(m, -1, dtype=np.int64)
    run = np.full(m, -np.inf)
    todo = np.arange(m)
    off, C = 0, 64
    q = np.exp(lq)
    while todo.size and off < cap:
        j = np.arange(off, off + C, dtype=float)
        k = n[todo, None] + 1.0 + j[None, :]
        aa = a[todo, None]
        t = sps.gammaln(k + aa) - sps.gammaln(k + 1.0) + k * lq[todo, None]
        cum = np.logaddexp.accumulate(np.concatenate([run[todo, None], t], axis=1),
                                      axis=1)[:, 1:]
        r = (k + aa) / (k + 1.0) * q[todo, None]
        rmax = np.maximum(r, q[todo, None])
        bound = t + np.log(rmax) - np.log1p(-rmax)
        ok = (r < 1.0) & (bound < cum - 41.5)
        has = ok.any(axis=1)
        T[todo[has]] = off + ok[has].argmax(axis=1) + 1
        run[todo] = cum[:, -1]
        todo = todo[~has]
        off += C
        C = min(2 * C, 1 << 16)
    return T


def _nb_cdf_core(need_a, need_b, n, alpha, beta, upper):
    """log P(X <= n) (``upper`` False) or log P(X > n) per element, X ~ NB(a, b), and
    d/da, d/db of it, by finite sums of the mass (see the module doc).

    Returns (value array over the broadcast, [d/da, d/db]) or (-inf, None) when an
    element has probability 0.
    """
    n = np.asarray(_idata(n))
    shape = _bshape(n, alpha, beta)
    M = int(np.prod(shape, dtype=np.int64))
    nf = np.broadcast_to(n, shape).ravel()
    below = nf < 0
    if not upper and np.any(below):
        return None, None
    idx = np.flatnonzero(~below)
    a = _flat(alpha, shape)
    b = _flat(beta, shape)
    if idx.size != M:
        a, b = a[idx], b[idx]
    nv = nf[idx]
    m = idx.size
    if m == 0:                       # every n below the support: P(X > n) = 1
        return np.zeros(M), [np.zeros(M) if need_a else None,
                             np.zeros(M) if need_b else None]
    lp_ = -sm.log1p(1.0 / b)         # log p,  p = b / (1 + b)
    lq = -sm.log1p(b)                # log q,  q = 1 / (1 + b)
    ap, lqp = np.asarray(value_of(a)), np.asarray(value_of(lq))
    # the side holding at most half the mass (P(X <= n) = I_p(a, n + 1))
    F = sps.betainc(ap, nv + 1.0, np.exp(-np.log1p(1.0 / np.asarray(value_of(b)))))
    head = F <= 0.5
    T = np.zeros(m, dtype=np.int64)
    if not np.all(head):
        tl = np.flatnonzero(~head)
        Tt = _nb_tail_lengths(nv[tl], ap[tl], lqp[tl])
        head[tl[Tt < 0]] = True          # pathological tail: sum the head instead
        T[tl] = np.maximum(Tt, 0)
    start = np.where(head, 0.0, nv + 1.0)
    k, seg, offs = _ranges(start, np.where(head, nv + 1, T))
    # log p_k = lchoose(k + a - 1, k) + a log p + k log q (lchoose: no cancellation of
    # lgamma(k + a) - lgamma(a) for large a)
    t = sm.lchoose(k + a[seg] - 1.0, k) + k * lq[seg]
    logS, w = _segment_weights(t, seg, offs, m)
    logS = logS + a * lp_
    gs = [None, None]
    if need_a:
        gs[0] = _segsum(w * sm.digamma(k + a[seg]), seg, m) - sm.digamma(a) + lp_
    if need_b:
        gs[1] = a / (b * (1.0 + b)) - _segsum(w * k, seg, m) / (1.0 + b)
    val, gs = _stats_to_sides(logS, gs, head, upper)
    if m != M:
        val = _scatter(val, idx, M)         # elements below the support: log 1 = 0
        gs = [None if g is None else _scatter(g, idx, M) for g in gs]
    return val, gs


def _neg_binomial_cdf(need, n, alpha, beta, upper):
    val, gs = _nb_cdf_core(need[1], need[2], n, alpha, beta, upper)
    if val is None:
        return _NEG_INF, [None, 0.0 if need[1] else None, 0.0 if need[2] else None]
    shape = _bshape(n, alpha, beta)
    return sm.sum(val), [None] + [None if g is None else sm.reshape(g, shape) for g in gs]


_nb_lcdf, _nb_lccdf = _cdf_pair(_neg_binomial_cdf)
neg_binomial_lpmf, neg_binomial_lcdf, neg_binomial_lccdf, neg_binomial_rng = family(
    "neg_binomial",
    (("n", integer(0)), ("alpha", POSITIVE), ("beta", POSITIVE)),
    kind="lpmf",
    lpmf=_neg_binomial,
    lcdf=_nb_lcdf,
    lccdf=_nb_lccdf,
    cdf_args={"n": integer()},
    rng_post=_int_draws,
    rng_arrays=True,
    nondiff=(0,),
    rng=lambda g, a, b: g.negative_binomial(a, b / (1.0 + b)),
    doc="""Negative binomial log mass (shape/inverse-scale), summed.

    NegBinomial(n | a, b) = C(n + a - 1, n) (b/(1+b))^a (1/(1+b))^n,  n >= 0, a, b > 0;
    mean a/b, variance a/b^2 (b + 1).

    >>> import stanlite as sl
    >>> round(sl.neg_binomial_lpmf(3, 2.0, 0.5), 6)
    -2.027326
    """,
    lcdf_doc="""Negative binomial log CDF, summed: log P(X <= n) = log I_{b/(1+b)}(a, n + 1)
    (exact derivatives in a and b by finite sums; see the module doc).""",
    lccdf_doc="""Negative binomial log complementary CDF, summed: log P(X > n).""",
    rng_doc="""NegBinomial(alpha, beta) draws (ints): failures before the alpha-th success with
    success probability beta/(1 + beta).""")


# --------------------------------------------------------------------------------------
@_quiet
def _neg_binomial_2(need, n, mu, phi):
    """log NegBinomial2(n | mu, phi) = lchoose(n + phi - 1, n) - n log1p(phi/mu)
    - phi log1p(mu/phi).

    d/dmu = n/mu - (n + phi)/(mu + phi),
    d/dphi = psi(n + phi) - psi(phi) - log1p(mu/phi) + (mu - n)/(mu + phi).
    """
    n = _idata(n)
    M = broadcast_size(n, mu, phi)
    l_mu = sm.log1p(mu / phi)
    lp = (_bsum(sm.lchoose(n + phi - 1.0, n), M) - _bsum(n * sm.log1p(phi / mu), M)
          - _bsum(phi * l_mu, M))
    dmu = dphi = None
    if need[1] or need[2]:
        inv = 1.0 / (mu + phi)
        if need[1]:
            dmu = n / mu - (n + phi) * inv
        if need[2]:
            dphi = sm.digamma(n + phi) - sm.digamma(phi) - l_mu + (mu - n) * inv
    return lp, [None, dmu, dphi]


def _neg_binomial_2_cdf(need, n, mu, phi, upper):
    """NB2(mu, phi) = NB(a = phi, b = phi/mu): chain rule db/dmu = -b/mu, db/dphi = 1/mu."""
    b = phi / mu
    val, gs = _nb_cdf_core(need[1] or need[2], need[1] or need[2], n, phi, b, upper)
    if val is None:
        return _NEG_INF, [None, 0.0 if need[1] else None, 0.0 if need[2] else None]
    shape = _bshape(n, mu, phi)
    parts = [None, None, None]
    if need[1] or need[2]:
        ga, gb = gs
        bf, muf = _flat(b, shape), _flat(mu, shape)
        if need[1]:
            parts[1] = sm.reshape(-gb * bf / muf, shape)
        if need[2]:
            parts[2] = sm.reshape(ga + gb / muf, shape)
    return sm.sum(val), parts


_nb2_lcdf, _nb2_lccdf = _cdf_pair(_neg_binomial_2_cdf)
neg_binomial_2_lpmf, neg_binomial_2_lcdf, neg_binomial_2_lccdf, neg_binomial_2_rng = family(
    "neg_binomial_2",
    (("n", integer(0)), ("mu", POSITIVE), ("phi", POSITIVE)),
    kind="lpmf",
    lpmf=_neg_binomial_2,
    lcdf=_nb2_lcdf,
    lccdf=_nb2_lccdf,
    cdf_args={"n": integer()},
    rng_post=_int_draws,
    rng_arrays=True,
    nondiff=(0,),
    rng=lambda g, mu, phi: g.negative_binomial(phi, phi / (mu + phi)),
    doc="""Negative binomial log mass (mean/overdispersion), summed.

    NegBinomial2(n | mu, phi) = C(n + phi - 1, n) (mu/(mu+phi))^n (phi/(mu+phi))^phi,
    n >= 0, mu, phi > 0; mean mu, variance mu + mu^2/phi.

    >>> import stanlite as sl
    >>> round(sl.neg_binomial_2_lpmf(3, 4.0, 2.0), 6)
    -2.027326
    """,
    lcdf_doc="""NegBinomial2 log CDF, summed: log P(X <= n).""",
    lccdf_doc="""NegBinomial2 log complementary CDF, summed: log P(X > n).""",
    rng_doc="""NegBinomial2(mu, phi) draws (ints).""")


# --------------------------------------------------------------------------------------
@_quiet
def _neg_binomial_2_log(need, n, eta, phi):
    """log NegBinomial2Log(n | eta, phi) = NegBinomial2(n | exp(eta), phi)
    = lchoose(n + phi - 1, n) + n (eta - log phi) - (n + phi) log1p_exp(eta - log phi).

    With s = inv_logit(eta - log phi) = mu/(mu + phi):  d/deta = n - (n + phi) s,
    d/dphi = psi(n + phi) - psi(phi) - log1p_exp(eta - log phi) + s - n (1 - s)/phi;
    mu = exp(eta) is never formed, so no overflow for large eta.
    """
    n = _idata(n)
    M = broadcast_size(n, eta, phi)
    t = eta - sm.log(phi)
    L = sm.log1p_exp(t)
    lp = (_bsum(sm.lchoose(n + phi - 1.0, n), M) + _bsum(n * t, M)
          - _bsum((n + phi) * L, M))
    de = dphi = None
    if need[1] or need[2]:
        s = sm.exp(t - L)
        if need[1]:
            de = n - (n + phi) * s
        if need[2]:
            dphi = (sm.digamma(n + phi) - sm.digamma(phi) - L + s
                    - n * sm.exp(-L) / phi)
    return lp, [None, de, dphi]


neg_binomial_2_log_lpmf, neg_binomial_2_log_rng = family(
    "neg_binomial_2_log",
    (("n", integer(0)), ("eta", FINITE), ("phi", POSITIVE)),
    kind="lpmf",
    lpmf=_neg_binomial_2_log,
    rng_post=_int_draws,
    rng_arrays=True,
    nondiff=(0,),
    rng=lambda g, eta, phi: g.negative_binomial(phi, sps.expit(np.log(phi) - eta)),
    doc="""NegBinomial2 log mass on the log scale, summed.

    NegBinomial2Log(n | eta, phi) = NegBinomial2(n | exp(eta), phi), computed with
    log1p_exp(eta - log phi) (no exp(eta) overflow).

    >>> import numpy as np, stanlite as sl
    >>> round(sl.neg_binomial_2_log_lpmf(3, np.log(4.0), 2.0), 6)
    -2.027326
    """,
    rng_doc="""NegBinomial2(exp(eta), phi) draws (ints).""")


# ======================================================================================
# categorical and multinomial (1-based categories, as in Stan)
# ======================================================================================
def _counts(y, K):
    y = np.asarray(value_of(y), dtype=np.int64).ravel()
    return np.bincount(y - 1, minlength=K).astype(float)


@_quiet
def _categorical(need, y, theta):
    """log Categorical(y | theta) = sum_i log theta[y_i]  (y_i in 1..K);
    with counts c_k: sum_k c_k log theta_k,  d/dtheta_k = c_k / theta_k."""
    c = _counts(y, _size(theta))
    return sm.sum(_xlog(c, theta)), [None, _xdiv(c, theta) if need[1] else None]


def _check_categorical(y, theta):
    fn = "categorical_lpmf"
    _check_simplex(fn, "theta", theta)
    _check_category(fn, "y", y, np.size(theta))


@_quiet
def _categorical_logit(need, y, beta):
    """log CategoricalLogit(y | beta) = sum_i (beta[y_i] - log_sum_exp(beta));
    d/dbeta = c - n softmax(beta)."""
    K = _size(beta)
    c = _counts(y, K)
    n = float(np.sum(c))
    lse = sm.log_sum_exp(beta)
    lp = sm.sum(c * beta) - n * lse
    return lp, [None, c - n * sm.exp(beta - lse) if need[1] else None]


def _check_categorical_logit(y, beta):
    fn = "categorical_logit_lpmf"
    b = np.asarray(beta)
    if b.ndim != 1 or b.size == 0:
        raise ValueError(f"{fn}: beta must be a non-empty vector, but has shape {b.shape}")
    check_finite(fn, "beta", b)
    _check_category(fn, "y", y, b.size)


categorical_lpmf = fused("categorical_lpmf", _categorical, _check_categorical, nondiff=(0,))
categorical_lpmf.__doc__ = """Categorical log mass, summed over the outcomes ``y`` (int or int array).

    Categorical(y | theta) = theta[y],  y in 1..K (1-based, as in Stan), theta a
    K-simplex.

    >>> import stanlite as sl
    >>> round(sl.categorical_lpmf(2, [0.25, 0.75]), 6)
    -0.287682
    """
categorical_logit_lpmf = fused("categorical_logit_lpmf", _categorical_logit,
                               _check_categorical_logit, nondiff=(0,))
categorical_logit_lpmf.__doc__ = """Categorical log mass with log-odds ``beta``, summed.

    CategoricalLogit(y | beta) = Categorical(y | softmax(beta)),  y in 1..K (1-based).

    >>> import stanlite as sl
    >>> round(sl.categorical_logit_lpmf([1, 2], [0.0, 0.0]), 6)
    -1.386294
    """


def _draw_categorical(g, p, size):
    """1-based category draws from the probability vector ``p`` by inverse CDF."""
    cdf = np.cumsum(p)
    u = g.random(size) * cdf[-1]
    return np.minimum(np.searchsorted(cdf, u, side="right"), p.size - 1) + 1


def categorical_rng(theta, rng=None, *, size=None):
    """Categorical(theta) draws in 1..K (an int; an int array of ``size`` if given)."""
    theta = np.asarray(value_of(theta), dtype=float)
    _check_simplex("categorical_rng", "theta", theta)
    return _int_draws(_draw_categorical(as_generator(rng), theta, size))


def categorical_logit_rng(beta, rng=None, *, size=None):
    """CategoricalLogit(beta) draws in 1..K (an int; an int array of ``size`` if given)."""
    beta = np.asarray(value_of(beta), dtype=float)
    check_finite("categorical_logit_rng", "beta", beta)
    p = np.exp(beta - np.max(beta))
    return _int_draws(_draw_categorical(as_generator(rng), p / p.sum(), size))


# --------------------------------------------------------------------------------------
@_quiet
def _multinomial(need, y, theta):
    """log Multinomial(y | theta) = lgamma(N + 1) - sum_k lgamma(y_k + 1) + sum_k y_k log
    theta_k,  N = sum_k y_k;  d/dtheta_k = y_k / theta_k."""
    y = np.asarray(_idata(y), dtype=float)
    base = float(sps.gammaln(y.sum() + 1.0) - sps.gammaln(y + 1.0).sum())
    return base + sm.sum(_xlog(y, theta)), [None, _xdiv(y, theta) if need[1] else None]


def _check_multinomial(y, theta):
    fn = "multinomial_lpmf"
    _check_simplex(fn, "theta", theta)
    check_integer(fn, "y", y, 0)
    if np.shape(y) != np.shape(theta):
        raise ValueError(f"{fn}: y must have the size of theta ({np.size(theta)}), "
                         f"but has shape {np.shape(y)}")


multinomial_lpmf = fused("multinomial_lpmf", _multinomial, _check_multinomial, nondiff=(0,))
multinomial_lpmf.__doc__ = """Multinomial log mass of the count vector ``y``.

    Multinomial(y | theta) = N! / prod_k y_k! prod_k theta_k^y_k,  N = sum_k y_k,
    y_k >= 0, theta a K-simplex.

    >>> import stanlite as sl
    >>> round(sl.multinomial_lpmf([1, 2], [0.5, 0.5]), 6)
    -0.980829
    """


def multinomial_rng(theta, N, rng=None):
    """One Multinomial(N, theta) count vector (an int array of theta's size)."""
    theta = np.asarray(value_of(theta), dtype=float)
    _check_simplex("multinomial_rng", "theta", theta)
    N = int(_rng_ints("multinomial_rng", "N", N))
    return np.asarray(as_generator(rng).multinomial(N, theta / theta.sum()), dtype=np.int64)


# ======================================================================================
# ordered logistic (1-based outcomes)
# ======================================================================================
def _ol_layout(k, eta, c):
    """Flattened outcomes, cut-point indices and masks for ordered_logistic."""
    cs = shape_of(c)
    K = cs[-1] + 1
    kk = np.asarray(value_of(k), dtype=np.int64)
    B = np.broadcast_shapes(kk.shape, shape_of(eta), cs[:-1])
    M = int(np.prod(B, dtype=np.int64))
    kf = np.broadcast_to(kk, B).ravel()
    lo = kf >= 2                    # a lower cut point c_{k-1} exists
    hi = kf <= K - 1                # an upper cut point c_k exists
    ilo = np.clip(kf - 2, 0, K - 2)
    ihi = np.clip(kf - 1, 0, K - 2)
    return B, M, K, lo, hi, ilo, ihi


def _cut_pairs(eta, c, B, M, K, ilo, ihi):
    """The flat predictor and the lower/upper cut point of every outcome of an ordinal
    density (clipped indices where one does not exist: the caller masks them), and
    the row of ``c`` of each outcome (None for one shared vector)."""
    e = _flat(eta, B)
    cs = shape_of(c)
    if len(cs) == 1:
        return e, c[ilo], c[ihi], None
    c2 = c if cs[:-1] == B else c + np.zeros(B + cs[-1:])
    c2 = sm.reshape(c2, (M, K - 1))
    rows = np.arange(M)
    return e, c2[rows, ilo], c2[rows, ihi], rows


def _cut_partials(parts, need, da, db, B, M, K, ilo, ihi, rows):
    """From d/da and d/db (a = eta - c_{k-1}, b = eta - c_k): d/deta = da + db,
    d/dc_{k-1} = -da, d/dc_k = -db, gathered onto the shapes of eta and c."""
    if need[1]:
        parts[1] = sm.reshape(da + db, B)
    if need[2]:
        if rows is None:
            parts[2] = (_scatter_add_plain(-da, ilo, K - 1)
                        + _scatter_add_plain(-db, ihi, K - 1))
        else:
            g = (_scatter_add2(-da, (rows, ilo), (M, K - 1))
                 + _scatter_add2(-db, (rows, ihi), (M, K - 1)))
            parts[2] = sm.reshape(g, B + (K - 1,))


def _ol_pieces(k, eta, c):
    """The flattened pieces of ordered_logistic (kernel and pointwise form): layout,
    masks, a = eta - c_{k-1}, b = eta - c_k, -log_inv_logit(a), -log1m_inv_logit(b),
    the cut-point gap (1 where there is none)."""
    B, M, K, lo, hi, ilo, ihi = _ol_layout(k, eta, c)
    mid = lo & hi
    e, clo, chi, rows = _cut_pairs(eta, c, B, M, K, ilo, ihi)
    a = e - clo
    b = e - chi
    La = sm.log1p_exp(-a)           # -log_inv_logit(a)
    Lb = sm.log1p_exp(b)            # -log1m_inv_logit(b)
    dgap = sm.where(mid, chi - clo, 1.0)
    return B, M, K, lo, hi, mid, ilo, ihi, rows, a, b, La, Lb, dgap


@_quiet
def _ordered_logistic(need, k, eta, c):
    """log OrderedLogistic(k | eta, c) = log(inv_logit(eta - c_{k-1}) - inv_logit(eta - c_k))
    with c_0 = -inf, c_K = +inf. With a = eta - c_{k-1}, b = eta - c_k, d = c_k - c_{k-1}:

      log P = [k > 1] log_inv_logit(a) + [k < K] log1m_inv_logit(b) + [1 < k < K] log1m_exp(-d)

    d/da = [k > 1] (1 - inv_logit(a)) + [1 < k < K] / expm1(d),
    d/db = -[k < K] inv_logit(b) - [1 < k < K] / expm1(d);
    d/deta = d/da + d/db, d/dc_{k-1} = -d/da, d/dc_k = -d/db.
    """
    B, M, K, lo, hi, mid, ilo, ihi, rows, a, b, La, Lb, dgap = _ol_pieces(k, eta, c)
    lp = (-sm.sum(sm.where(lo, La, 0.0)) - sm.sum(sm.where(hi, Lb, 0.0))
          + sm.sum(sm.where(mid, sm.log1m_exp(-dgap), 0.0)))
    parts = [None, None, None]
    if need[1] or need[2]:
        im = sm.where(mid, 1.0 / sm.expm1(dgap), 0.0)
        da = sm.where(lo, sm.exp(-a - La), 0.0) + im          # 1 - inv_logit(a)
        db = -sm.where(hi, sm.exp(b - Lb), 0.0) - im          # -inv_logit(b)
        _cut_partials(parts, need, da, db, B, M, K, ilo, ihi, rows)
    return lp, parts


def _scatter_add_plain(v, idx, K):
    if isinstance(v, Box):
        return sm.scatter_add(v, idx, (K,))
    return np.bincount(idx, weights=v, minlength=K)


def _scatter_add2(v, idx, shape):
    if isinstance(v, Box):
        return sm.scatter_add(v, idx, shape)
    out = np.zeros(shape)
    np.add.at(out, idx, v)
    return out


def _check_cut_points(fn, c, eta=None):
    """``c``: a non-empty vector (or array of vectors) of finite, strictly increasing
    cut points (a shape error is a ValueError, a bad value a DomainError naming it);
    ``eta``, if given, finite (checked before ``c``'s values). Returns ``c`` as floats."""
    c = np.asarray(c, dtype=float)
    if c.ndim < 1 or c.shape[-1] < 1:
        raise ValueError(f"{fn}: c must be a non-empty vector of cut points, "
                         f"but has shape {c.shape}")
    if eta is not None:
        check_finite(fn, "eta", eta)
    check_finite(fn, "c", c)
    if c.shape[-1] > 1:
        ok = np.diff(c, axis=-1) > 0
        if not np.all(ok):
            idx = np.argwhere(~ok)[0]
            idx[-1] += 1
            where = ", ".join(str(int(i)) for i in idx)
            raise DomainError(f"{fn}: c must be strictly increasing (ordered), but "
                              f"c[{where}] = {float(c[tuple(idx)])!r} does not exceed the "
                              "previous cut point")
    return c


def _check_ordinal(fn):
    """The argument checks of an ordinal density ``fn(k, eta, c)`` (ordered_logistic,
    ordered_probit): cut points, then the categories 1..K, then the shapes."""
    def check(k, eta, c):
        c = _check_cut_points(fn, c, eta)
        _check_category(fn, "k", k, c.shape[-1] + 1)
        if c.ndim > 1:
            try:
                np.broadcast_shapes(np.shape(k), np.shape(eta), c.shape[:-1])
            except ValueError:
                raise ValueError(f"{fn}: c of shape {c.shape} does not match k of shape "
                                 f"{np.shape(k)} and eta of shape {np.shape(eta)}") from None
    return check


ordered_logistic_lpmf = fused("ordered_logistic_lpmf", _ordered_logistic,
                              _check_ordinal("ordered_logistic_lpmf"), nondiff=(0,))
ordered_logistic_lpmf.__doc__ = """Ordered logistic log mass, summed over the outcomes.

    OrderedLogistic(k | eta, c) = inv_logit(eta - c_{k-1}) - inv_logit(eta - c_k),
    k in 1..K (1-based, as in Stan), c strictly increasing cut points (K - 1 of them),
    c_0 = -inf, c_K = +inf. Vectorized: ``k`` an int array with ``eta`` a scalar or an
    array of its shape; ``c`` one vector shared by all, or one row per outcome
    (shape ``eta.shape + (K - 1,)``). Computed with log_inv_logit, log1m_inv_logit
    and log1m_exp of the cut-point gap (stable for far-apart cut points).

    >>> import stanlite as sl
    >>> round(sl.ordered_logistic_lpmf([1, 2, 3], 0.0, [-1.0, 1.0]), 6)
    -3.39846
    """


def ordered_logistic_rng(eta, c, rng=None):
    """OrderedLogistic(eta, c) draws in 1..K: 1 + #{j: c_j < eta + logistic noise}
    (an int for a scalar eta, an int array shaped like eta otherwise)."""
    eta = np.asarray(value_of(eta), dtype=float)
    c = np.asarray(value_of(c), dtype=float)
    check_finite("ordered_logistic_rng", "eta", eta)
    check_finite("ordered_logistic_rng", "c", c)
    if c.ndim != 1 or np.any(np.diff(c) <= 0):
        raise DomainError("ordered_logistic_rng: c must be a strictly increasing vector")
    z = eta + as_generator(rng).logistic(size=eta.shape)
    return _int_draws(1 + np.sum(c < np.asarray(z)[..., None], axis=-1))


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


@_pointwise(poisson_lpmf)
def _poisson_terms(n, lam):
    n = _pw_int(n)
    dead = guarded(_isinf, lam)         # (decisions on traced values: guarded)
    return _pw_mask(dead, _NEG_INF, lambda lam: _xlog(n, lam) - lam - sps.gammaln(n + 1.0),
                    sm.where(dead, 1.0, lam) if np.any(dead) else lam)


def _poisson_cdf_terms(upper):
    def terms(n, lam):
        n = _pw_int(n)
        below = n < 0
        nn = np.where(below, 0.0, n)
        lf = sm.log(sm.gamma_p(nn + 1.0, lam) if upper else sm.gamma_q(nn + 1.0, lam))
        return sm.where(below, 0.0 if upper else _NEG_INF, lf) if np.any(below) else lf
    return terms


_pointwise(poisson_lcdf)(_poisson_cdf_terms(False))
_pointwise(poisson_lccdf)(_poisson_cdf_terms(True))


@_pointwise(poisson_log_lpmf)
def _poisson_log_terms(n, alpha):
    n = _pw_int(n)
    dead = guarded(_isinf, alpha) & ~guarded(_isneginf, alpha)      # alpha = +inf
    zero_n = (n == 0) & guarded(_isneginf, alpha)     # n alpha, n = 0, alpha = -inf: 0
    safe = sm.where(dead | zero_n, 0.0, alpha) if np.any(dead | zero_n) else alpha
    v = n * safe - sm.exp(alpha) - sps.gammaln(n + 1.0)
    return sm.where(dead, _NEG_INF, v) if np.any(dead) else v


@_pointwise(neg_binomial_lpmf)
def _neg_binomial_terms(n, alpha, beta):
    n = _pw_int(n)
    return (sm.lchoose(n + alpha - 1.0, n) - alpha * sm.log1p(1.0 / beta)
            - n * sm.log1p(beta))


def _nb_cdf_terms(need, n, alpha, beta, upper):
    """Per-element values of :func:`_nb_cdf_core` at the broadcast shape (-inf below
    the support for the lower tail) and their partials [None, d/da, d/db]."""
    n = np.asarray(_idata(n))
    shape = _bshape(n, alpha, beta)
    dead = np.broadcast_to(n < 0, shape) if not upper else np.zeros(shape, bool)
    val, gs = _nb_cdf_core(need[1], need[2], np.where(dead, 0, n), alpha, beta, upper)
    val = sm.reshape(val, shape)
    gs = [None if g is None else sm.reshape(g, shape) for g in gs]
    if np.any(dead):
        val = sm.where(dead, _NEG_INF, val)
        gs = [None if g is None else sm.where(dead, 0.0, g) for g in gs]
    return val, [None] + gs


def _nb2_cdf_terms(need, n, mu, phi, upper):
    """NB2(mu, phi) = NB(phi, phi/mu) (the chain rule of :func:`_neg_binomial_2_cdf`)."""
    b = phi / mu
    nd = need[1] or need[2]
    val, (_, ga, gb) = _nb_cdf_terms((False, nd, nd), n, phi, b, upper)
    parts = [None, None, None]
    if need[1]:
        parts[1] = -gb * b / mu
    if need[2]:
        parts[2] = ga + gb / mu
    return val, parts


for _upper, _d in ((False, neg_binomial_lcdf), (True, neg_binomial_lccdf)):
    pointwise(_d)(_quiet_terms(_d.__name__, _nb_cdf_terms, _upper, (0,)))
for _upper, _d in ((False, neg_binomial_2_lcdf), (True, neg_binomial_2_lccdf)):
    pointwise(_d)(_quiet_terms(_d.__name__, _nb2_cdf_terms, _upper, (0,)))
del _upper, _d


@_pointwise(neg_binomial_2_lpmf)
def _neg_binomial_2_terms(n, mu, phi):
    n = _pw_int(n)
    return (sm.lchoose(n + phi - 1.0, n) - n * sm.log1p(phi / mu)
            - phi * sm.log1p(mu / phi))


@_pointwise(neg_binomial_2_log_lpmf)
def _neg_binomial_2_log_terms(n, eta, phi):
    n = _pw_int(n)
    t = eta - sm.log(phi)
    return sm.lchoose(n + phi - 1.0, n) + n * t - (n + phi) * sm.log1p_exp(t)


@_pointwise(categorical_lpmf, broadcast=False)
def _categorical_terms(y, theta):
    """One value per outcome (the shape of ``y``)."""
    y = np.asarray(value_of(y), dtype=np.int64)
    return sm.log(theta[y - 1])     # (indexed first: no log of a zero not chosen)


@_pointwise(categorical_logit_lpmf, broadcast=False)
def _categorical_logit_terms(y, beta):
    y = np.asarray(value_of(y), dtype=np.int64)
    return beta[y - 1] - sm.log_sum_exp(beta)


@_pointwise(multinomial_lpmf, broadcast=False)
def _multinomial_terms(y, theta):
    """One count vector: the value itself (shape ())."""
    return multinomial_lpmf(y, theta)


@_pointwise(ordered_logistic_lpmf, broadcast=False)
def _ordered_logistic_terms(k, eta, c):
    """One value per outcome (the broadcast of k, eta and c's leading axes)."""
    B, M, K, lo, hi, mid, ilo, ihi, rows, a, b, La, Lb, dgap = _ol_pieces(k, eta, c)
    v = (sm.where(mid, sm.log1m_exp(-dgap), 0.0) - sm.where(lo, La, 0.0)
         - sm.where(hi, Lb, 0.0))
    return sm.reshape(v, B)


@_pointwise(hypergeometric_lpmf)
def _hypergeometric_terms(n, N, a, b):
    n, N, a, b = (_pw_int(x) for x in (n, N, a, b))
    return sm.lchoose(a, n) + sm.lchoose(b, N - n) - sm.lchoose(a + b, N)
