"""Unbounded counts: ``poisson``, ``poisson_log`` (log rate) and the negative binomials
``neg_binomial`` (shape alpha, inverse scale beta), ``neg_binomial_2`` (mean mu,
overdispersion phi) and ``neg_binomial_2_log`` (log mean eta).

Each is declared with :func:`.family.family` (``_lpmf``, where Stan has them
``_lcdf``/``_lccdf``, and ``_rng`` giving integer draws); the kernels, conventions and
the finite-sum CDF machinery are those of :mod:`.discrete` (see its module doc: exact
shape derivatives of the CDFs, each element summed on the side holding at most half
of the mass; the negative-binomial upper tail summed until the remainder is below
1e-18 of the sum). Draws of a Poisson rate must stay below 2^30 (Stan's limit).

>>> import numpy as np, stanlite as sl
>>> round(sl.poisson_lpmf(np.array([2, 0, 3]), 1.5), 6)
-4.957581
>>> round(sl.neg_binomial_2_lpmf(3, 2.0, 5.0), 6)
-1.885302
"""

import math

import numpy as np
import scipy.special as sps

from .. import math as sm
from ..autodiff.var import guarded, shape_of, value_of
from ..autodiff.vm import opcodes as _op    # the interpreter's lowerings (autodiff/vm)
from ..autodiff.vm.declare import defkernel as _defkernel
from ..autodiff.vm.program import density_op as _density_op, lgamma_table as _lgamma_table
from .discrete import (_NEG_INF, _bshape, _bsum, _cdf_pair, _flat, _idata, _int_draws,
                       _isinf, _isneginf, _pointwise, _pw_int, _pw_mask, _quiet,
                       _quiet_terms, _ranges, _scatter, _segment_weights, _segsum,
                       _size, _stats_to_sides, _sum_log_factorial, _xdiv, _xlog)
from .family import FINITE, NONNEGATIVE, NOT_NAN, POSITIVE, all_of, family, integer
from .fused import _fail, broadcast_size, pointwise

__all__ = [
    "poisson_lpmf", "poisson_lcdf", "poisson_lccdf", "poisson_rng",
    "poisson_log_lpmf", "poisson_log_rng",
    "neg_binomial_lpmf", "neg_binomial_lcdf", "neg_binomial_lccdf", "neg_binomial_rng",
    "neg_binomial_2_lpmf", "neg_binomial_2_lcdf", "neg_binomial_2_lccdf",
    "neg_binomial_2_rng",
    "neg_binomial_2_log_lpmf", "neg_binomial_2_log_rng",
]


#: Stan's largest Poisson rate for ``poisson_rng`` (2^30)
POISSON_MAX_RATE = 2.0 ** 30


def _plain_poisson(check):
    """The hot case first: one plain term is certainly valid, nothing to report."""
    def plain_first(n, lam):
        if type(lam) is float and lam >= 0.0 and type(n) in _INT_TYPES and n >= 0:
            return
        check(n, lam)
    return plain_first


def _plain_poisson_cdf(check):
    def plain_first(n, lam):
        if type(lam) is float and lam >= 0.0 and type(n) in _INT_TYPES:
            return
        check(n, lam)
    return plain_first


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
    "poisson", (("n", integer(0)), ("lambda", all_of(NOT_NAN, NONNEGATIVE))),
    kind="lpmf", lpmf=_poisson, lcdf=_poisson_lcdf, lccdf=_poisson_lccdf,
    cdf_args={"n": integer()},
    rng_args=(("lambda", all_of(NOT_NAN, NONNEGATIVE, _rate_below_max)),),
    params=("n", "lam"), rng_post=_int_draws, rng_arrays=True, fast=_plain_poisson,
    cdf_fast=_plain_poisson_cdf, nondiff=(0,), rng=lambda g, lam: g.poisson(lam),
    doc="""Poisson log mass, summed: sum_i log Poisson(n_i | lambda_i).

    Poisson(n | lambda) = lambda^n e^(-lambda) / n!,  n >= 0,  lambda >= 0.

    >>> import stanlite as sl
    >>> round(sl.poisson_lpmf(2, 1.5), 6)
    -1.382217
    """, lcdf_doc="""Poisson log CDF, summed: log P(X <= n) = log Q(n + 1, lambda).""",
    lccdf_doc="""Poisson log complementary CDF, summed: log P(X > n) = log P(n + 1, lambda).""",
    rng_doc="""Poisson(lambda) draws (ints); lambda must be < 2^30 (Stan's limit).""")
# the interpreter's POISSON op, by element (autodiff/vm/program.py density_op):
# (n | lambda), with lgamma(n + 1) from the table at X1
def _poisson_inside(cnt, lam, lg):
    return lam > 0.0                        # (lam == 0 has its own rules: eager)


def _poisson_lp(cnt, lam, lg):
    return cnt * math.log(lam) - lam - lg


def _poisson_partials(m, g, cnt, lam, lg):
    return 0.0, g * (cnt / lam - 1.0), 0.0


_density_op(poisson_lpmf, _op.POISSON, (None, "nonnegative_finite"), _poisson_lp,
            _poisson_partials, _poisson_inside, table=_lgamma_table)


# ... and POISSON_SS, Poisson terms of one rate summed by their sufficient statistics
# (vm/passes.py): V[X1] log lambda - V[X1 + 1] lambda - V[X1 + 2]
def _poisson_ss_value(V, code, r, n, a, sa, b, sb, c, sc):
    k = code[r, _op.X1]
    lam = V[b]
    if not lam > 0.0:
        return _op.DOMAIN, 0.0
    return _op.OK, V[k] * math.log(lam) - V[k + 1] * lam - V[k + 2]


def _poisson_ss_grad(V, A, code, r, g, m, n, a, sa, b, sb, c, sc):
    if m & 2:
        k = code[r, _op.X1]
        A[b] += g * (V[k] / V[b] - V[k + 1])


_defkernel(_op.POISSON_SS, _poisson_ss_value, _poisson_ss_grad, kind="density")


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
    "poisson_log", (("n", integer(0)), ("alpha", NOT_NAN)), kind="lpmf",
    lpmf=_poisson_log, rng_args=(("alpha", all_of(NOT_NAN, _log_rate_below_max)),),
    rng_post=_int_draws, rng_arrays=True, nondiff=(0,),
    rng=lambda g, alpha: g.poisson(np.exp(alpha)),
    doc="""Poisson log mass on the log scale, summed.

    PoissonLog(n | alpha) = Poisson(n | exp(alpha)); computed as
    n alpha - exp(alpha) - lgamma(n + 1), never as log(exp(alpha)).

    >>> import stanlite as sl
    >>> round(sl.poisson_log_lpmf(2, 0.0), 6)
    -1.693147
    """, rng_doc="""Poisson(exp(alpha)) draws (ints).""")
# the interpreter's POISSON_LOG op, by element (autodiff/vm/program.py density_op)
def _poisson_log_lp(cnt, al, lg):
    return cnt * al - math.exp(al) - lg


def _poisson_log_partials(m, g, cnt, al, lg):
    return 0.0, g * (cnt - math.exp(al)) if m & 2 else 0.0, 0.0


_density_op(poisson_log_lpmf, _op.POISSON_LOG, (None, "finite"), _poisson_log_lp,
            _poisson_log_partials, table=_lgamma_table)


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
    "neg_binomial", (("n", integer(0)), ("alpha", POSITIVE), ("beta", POSITIVE)),
    kind="lpmf", lpmf=_neg_binomial, lcdf=_nb_lcdf, lccdf=_nb_lccdf,
    cdf_args={"n": integer()}, rng_post=_int_draws, rng_arrays=True, nondiff=(0,),
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
    "neg_binomial_2", (("n", integer(0)), ("mu", POSITIVE), ("phi", POSITIVE)),
    kind="lpmf", lpmf=_neg_binomial_2, lcdf=_nb2_lcdf, lccdf=_nb2_lccdf,
    cdf_args={"n": integer()}, rng_post=_int_draws, rng_arrays=True, nondiff=(0,),
    rng=lambda g, mu, phi: g.negative_binomial(phi, phi / (mu + phi)),
    doc="""Negative binomial log mass (mean/overdispersion), summed.

    NegBinomial2(n | mu, phi) = C(n + phi - 1, n) (mu/(mu+phi))^n (phi/(mu+phi))^phi,
    n >= 0, mu, phi > 0; mean mu, variance mu + mu^2/phi.

    >>> import stanlite as sl
    >>> round(sl.neg_binomial_2_lpmf(3, 4.0, 2.0), 6)
    -2.027326
    """, lcdf_doc="""NegBinomial2 log CDF, summed: log P(X <= n).""",
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
    "neg_binomial_2_log", (("n", integer(0)), ("eta", FINITE), ("phi", POSITIVE)),
    kind="lpmf", lpmf=_neg_binomial_2_log, rng_post=_int_draws, rng_arrays=True,
    nondiff=(0,),
    rng=lambda g, eta, phi: g.negative_binomial(phi, sps.expit(np.log(phi) - eta)),
    doc="""NegBinomial2 log mass on the log scale, summed.

    NegBinomial2Log(n | eta, phi) = NegBinomial2(n | exp(eta), phi), computed with
    log1p_exp(eta - log phi) (no exp(eta) overflow).

    >>> import numpy as np, stanlite as sl
    >>> round(sl.neg_binomial_2_log_lpmf(3, np.log(4.0), 2.0), 6)
    -2.027326
    """, rng_doc="""NegBinomial2(exp(eta), phi) draws (ints).""")


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
del _upper, _d
