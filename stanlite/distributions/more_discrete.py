"""More discrete distributions: ``beta_neg_binomial`` and ``dirichlet_multinomial``.

Stan's parameterisations (functions reference)::

    BetaNegBinomial(n | r, alpha, beta) = Gamma(n + r) / (n! Gamma(r))
                                          B(n + beta, r + alpha) / B(alpha, beta)

the number of failures before the ``r``-th success when the success probability is
``Beta(alpha, beta)`` (``n >= 0``; ``r, alpha, beta > 0``; mean ``r beta / (alpha -
1)`` for ``alpha > 1``); ``_lpmf``, ``_lcdf``, ``_lccdf`` and ``_rng``. And::

    DirichletMultinomial(y | alpha) = Gamma(alpha_0) Gamma(N + 1) / Gamma(N + alpha_0)
                                      prod_k Gamma(y_k + alpha_k) / (Gamma(alpha_k) y_k!)

the counts ``y`` (``N = sum_k y_k``) of N draws from a ``Dirichlet(alpha)``
probability vector (``alpha_0 = sum_k alpha_k``); ``_lpmf`` and
``_rng(alpha, N)``. ``y`` is one count vector (K,) or an array of them (M, K);
``alpha`` (K,) or (M, K).

``reduce=False`` gives one value per element (per count vector for
``dirichlet_multinomial``) instead of the sum. Each density is one fused node
(:mod:`.fused`); the integer outcomes are never differentiable (as in
:mod:`.discrete`). ``beta_neg_binomial_lcdf`` sums the mass of
``0..n`` (O(n) terms per element) in logs; its derivatives are the mass-weighted
averages of the per-term scores, exact like the other count CDFs of
:mod:`.discrete`. ``_lccdf`` is ``log(1 - CDF)`` of the same sum: the tail of this
distribution decays only polynomially (like ``n^-(alpha+1)``), so there is no short
upper sum; a complementary probability below ~1e-16 of the CDF rounds to ``-inf``.

>>> import numpy as np, stanlite as sl
>>> round(sl.beta_neg_binomial_lpmf(np.array([0, 3]), 2.0, 3.0, 1.5), 6)
-3.513796
>>> round(sl.dirichlet_multinomial_lpmf(np.array([1, 0, 2]), np.ones(3)), 6)     # 1/C(5, 2)
-2.302585
"""

import numpy as np

from .. import math as sm
from ..autodiff.var import Box, value_of
from ..errors import DomainError
from .discrete import (_bshape, _bsum, _flat, _idata, _int_draws, _plain_float, _pw_int,
                       _quiet, _ranges, _rng_ints, _scatter, _segment_weights, _segsum,
                       _stats_to_sides)
from .fused import (broadcast_size, check_integer, check_positive, fused, pointwise,
                    terms_primitive)
from .multivariate import dirichlet_rng
from .family import POSITIVE, family, integer
from .rng import as_generator

__all__ = ["beta_neg_binomial_lpmf", "beta_neg_binomial_lcdf", "beta_neg_binomial_lccdf",
           "beta_neg_binomial_rng",
           "dirichlet_multinomial_lpmf", "dirichlet_multinomial_rng"]

_NEG_INF = -np.inf
#: the largest Poisson rate a ``beta_neg_binomial_rng`` draw may need (numpy's int64)
_MAX_RATE = 1e18


# ======================================================================================
# beta_neg_binomial
# ======================================================================================
def _bnb_terms(n, r, a, b):
    """log BetaNegBinomial(n | r, a, b) elementwise; lchoose(n + r - 1, n) for
    lgamma(n + r) - lgamma(n + 1) - lgamma(r) (no cancellation for large r)."""
    return sm.lchoose(n + r - 1.0, n) + sm.lbeta(n + b, r + a) - sm.lbeta(a, b)


def _bnb_scores(n, r, a, b):
    """d/dr, d/da, d/db of the log mass at n (elementwise)."""
    pt = sm.digamma(n + r + a + b)
    pab = sm.digamma(a + b)
    par = sm.digamma(a + r)
    return (sm.digamma(n + r) - sm.digamma(r) + par - pt,
            par - pt - sm.digamma(a) + pab,
            sm.digamma(n + b) - pt - sm.digamma(b) + pab)


@_quiet
def _beta_neg_binomial(need, n, r, alpha, beta):
    """log BNB(n | r, a, b) = lgamma(n + r) - lgamma(n + 1) - lgamma(r)
    + lbeta(n + b, r + a) - lbeta(a, b); with psi_T = psi(n + r + a + b):

    d/dr = psi(n + r) - psi(r) + psi(a + r) - psi_T,
    d/da = psi(a + r) - psi_T - psi(a) + psi(a + b),
    d/db = psi(n + b) - psi_T - psi(b) + psi(a + b).
    """
    n = _idata(n)
    M = broadcast_size(n, r, alpha, beta)
    lp = _bsum(_bnb_terms(n, r, alpha, beta), M)
    parts = [None, None, None, None]
    if need[1] or need[2] or need[3]:
        dr, da, db = _bnb_scores(n, r, alpha, beta)
        parts[1:] = [dr if need[1] else None, da if need[2] else None,
                     db if need[3] else None]
    return lp, parts


def _bnb_cdf_terms(need, n, r, alpha, beta, upper):
    """log P(X <= n) (``upper`` False) or log(1 - P(X <= n)) per element (at the
    broadcast shape) and [None, d/dr, d/dalpha, d/dbeta] of them, from the finite sum
    of the mass over 0..n. An n < 0 has P(X <= n) = 0: -inf (zero partials) for the
    lower tail, 0 for the upper."""
    n = np.asarray(_idata(n))
    shape = _bshape(n, r, alpha, beta)
    M = int(np.prod(shape, dtype=np.int64))
    nf = np.broadcast_to(n, shape).ravel()
    below = nf < 0
    idx = np.flatnonzero(~below)
    m = idx.size
    if m == 0:
        val = np.full(shape, 0.0 if upper else _NEG_INF)
        return val, [None] + [np.zeros(shape) if nd else None for nd in need[1:]]
    rr, aa, bb = (_flat(v, shape) for v in (r, alpha, beta))
    if m != M:
        rr, aa, bb = rr[idx], aa[idx], bb[idx]
    k, seg, offs = _ranges(np.zeros(m), nf[idx] + 1)
    t = _bnb_terms(k, rr[seg], aa[seg], bb[seg])
    logS, w = _segment_weights(t, seg, offs, m)
    gs = [None, None, None]
    if any(need[1:]):
        scores = _bnb_scores(k, rr[seg], aa[seg], bb[seg])
        gs = [_segsum(w * s, seg, m) if nd else None for s, nd in zip(scores, need[1:])]
    val, gs = _stats_to_sides(logS, gs, np.ones(m, bool), upper)
    if m != M:
        val = _scatter(val, idx, M)         # below the support: log 1 = 0 (upper) ...
        gs = [None if g is None else _scatter(g, idx, M) for g in gs]
        if not upper:
            val = sm.where(below, _NEG_INF, val)      # ... or log 0 (lower)
    return sm.reshape(val, shape), [None] + [None if g is None else sm.reshape(g, shape)
                                             for g in gs]


def _bnb_cdf(upper):
    @_quiet
    def kernel(need, n, r, alpha, beta):
        if not upper and np.any(np.asarray(_idata(n)) < 0):
            return _NEG_INF, [None] + [0.0 if nd else None for nd in need[1:]]
        val, parts = _bnb_cdf_terms(need, n, r, alpha, beta, upper)
        return sm.sum(val), parts
    return kernel


def _beta_neg_binomial_draw(g, r, alpha, beta):
    # p ~ Beta(alpha, beta) the success probability, a negative binomial count of
    # failures, drawn as Poisson(Gamma(r, (1 - p)/p)) with (1 - p)/p = G_beta / G_alpha
    # from two gammas (no 1 - p cancellation)
    shape = np.broadcast_shapes(r.shape, alpha.shape, beta.shape)
    with np.errstate(divide="ignore", over="ignore"):
        odds = g.standard_gamma(np.broadcast_to(beta, shape)) / g.standard_gamma(
            np.broadcast_to(alpha, shape))
        lam = g.standard_gamma(np.broadcast_to(r, shape)) * odds
    if not np.all(lam <= _MAX_RATE):
        raise DomainError("beta_neg_binomial_rng: a draw's Poisson rate exceeds "
                          f"{_MAX_RATE:g} (the count would overflow an int64; alpha is "
                          "too small for integer draws)")
    return _int_draws(g.poisson(lam))


(beta_neg_binomial_lpmf,
 beta_neg_binomial_lcdf,
 beta_neg_binomial_lccdf,
 beta_neg_binomial_rng) = family(
    "beta_neg_binomial",
    (("n", integer(0)), ("r", POSITIVE), ("alpha", POSITIVE), ("beta", POSITIVE)),
    kind="lpmf", lpmf=_beta_neg_binomial, lcdf=_bnb_cdf(False), lccdf=_bnb_cdf(True),
    cdf_args={"n": integer()}, rng_arrays=True, nondiff=(0,),
    rng=_beta_neg_binomial_draw, doc="""Beta negative binomial log mass, summed.

    BetaNegBinomial(n | r, alpha, beta) = Gamma(n + r)/(n! Gamma(r))
                                          B(n + beta, r + alpha)/B(alpha, beta),
    n >= 0, r, alpha, beta > 0 (scipy: ``betanbinom(r, alpha, beta)``).

    >>> import stanlite as sl
    >>> round(sl.beta_neg_binomial_lpmf(2, 3.0, 2.0, 1.0), 6)
    -2.169054
    """, lcdf_doc="""Beta negative binomial log CDF, summed: log P(X <= n)
    (the mass of 0..n summed in logs; n < 0 gives -inf).""",
    lccdf_doc="""Beta negative binomial log complementary CDF, summed:
    log P(X > n) = log(1 - P(X <= n)) (n < 0 gives 0).""",
    rng_doc="""BetaNegBinomial(r, alpha, beta) draws (ints): with p ~ Beta(alpha, beta) the
    success probability, a negative binomial count of failures, drawn as
    Poisson(Gamma(r, (1 - p)/p)) with (1 - p)/p = G_beta / G_alpha from two gammas
    (no 1 - p cancellation). A Poisson rate beyond 1e18 (alpha tiny: the draw would
    overflow an int64) raises DomainError.""")


@pointwise(beta_neg_binomial_lpmf)
def _beta_neg_binomial_terms(n, r, alpha, beta):
    return _bnb_terms(_pw_int(n), r, alpha, beta)


def _bnb_cdf_primitive(name, upper):
    """The pointwise CDF: a primitive of the per-element sums (see fused.terms_primitive)."""
    def core(need, *args):
        args = [a if isinstance(a, Box) else _plain_float(a) for a in args]
        with np.errstate(all="ignore"):
            return _bnb_cdf_terms(need, *args, upper)
    return terms_primitive(name, core, (0,))


pointwise(beta_neg_binomial_lcdf)(_bnb_cdf_primitive("beta_neg_binomial_lcdf", False))
pointwise(beta_neg_binomial_lccdf)(_bnb_cdf_primitive("beta_neg_binomial_lccdf", True))


# ======================================================================================
# dirichlet_multinomial
# ======================================================================================
def _dm_pieces(y, alpha):
    """Per count vector: sum_k lchoose(y_k + a_k - 1, y_k) - lchoose(N + a0 - 1, N)
    (the lgamma differences of the mass as binomial coefficients: no cancellation for
    large concentrations; exactly 0 for N = 0), with the broadcast pieces."""
    y = np.asarray(_idata(y), dtype=float)
    shape = _bshape(y, alpha)
    yb = np.broadcast_to(y, shape)
    a = alpha if _bshape(alpha) == shape else alpha + np.zeros(shape)
    N = yb.sum(axis=-1)
    a0 = sm.sum(a, axis=-1)
    v = sm.sum(sm.lchoose(yb + a - 1.0, yb), axis=-1) - sm.lchoose(N + a0 - 1.0, N)
    return v, shape, yb, a, N, a0


@_quiet
def _dirichlet_multinomial(need, y, alpha):
    """sum_rows [lgamma(a0) - lgamma(N + a0) + lgamma(N + 1)
                 + sum_k (lgamma(y_k + a_k) - lgamma(a_k) - lgamma(y_k + 1))];
    d/da_k = psi(a0) - psi(N + a0) + psi(y_k + a_k) - psi(a_k)."""
    v, shape, yb, a, N, a0 = _dm_pieces(y, alpha)
    parts = [None, None]
    if need[1]:
        d0 = sm.digamma(a0) - sm.digamma(N + a0)
        parts[1] = sm.reshape(d0, shape[:-1] + (1,)) + sm.digamma(yb + a) - sm.digamma(a)
    return sm.sum(v), parts


def _check_dirichlet_multinomial(y, alpha):
    fn = "dirichlet_multinomial_lpmf"
    sy, sa = np.shape(y), np.shape(alpha)
    for arg, s in (("y", sy), ("alpha", sa)):
        if len(s) not in (1, 2) or s[-1] == 0:
            raise ValueError(f"{fn}: {arg} must be a vector or an array of vectors "
                             f"(M, K), got shape {s}")
    if sy[-1] != sa[-1] or (len(sy) == len(sa) == 2 and sy[0] != sa[0]):
        raise ValueError(f"{fn}: shapes {sy} (y) and {sa} (alpha) do not match")
    check_integer(fn, "y", y, 0)
    check_positive(fn, "alpha", alpha)


dirichlet_multinomial_lpmf = fused("dirichlet_multinomial_lpmf", _dirichlet_multinomial,
                                   _check_dirichlet_multinomial, nondiff=(0,))
dirichlet_multinomial_lpmf.__doc__ = """Dirichlet-multinomial log mass of the count vector(s) y.

    DirichletMultinomial(y | alpha) = Gamma(a0) Gamma(N + 1) / Gamma(N + a0)
                                      prod_k Gamma(y_k + alpha_k) / (Gamma(alpha_k) y_k!),
    N = sum_k y_k, a0 = sum_k alpha_k; y_k >= 0 ints, alpha_k > 0. ``y`` (K,) or (M, K),
    ``alpha`` (K,) or (M, K); the value is summed over the count vectors.

    >>> import stanlite as sl
    >>> round(sl.dirichlet_multinomial_lpmf([2, 1], [1.0, 1.0]), 6)     # uniform on 0..3
    -1.386294
    """


@pointwise(dirichlet_multinomial_lpmf, broadcast=False)
def _dirichlet_multinomial_terms(y, alpha):
    """One log mass per count vector (shape () for one vector)."""
    alpha = alpha if isinstance(alpha, Box) else np.asarray(alpha, dtype=float)
    return _dm_pieces(y, alpha)[0]


def dirichlet_multinomial_rng(alpha, N, rng=None):
    """One DirichletMultinomial(alpha, N) count vector (an int array of alpha's size):
    a multinomial draw of N from a Dirichlet(alpha) probability vector."""
    fn = "dirichlet_multinomial_rng"
    alpha = np.asarray(value_of(alpha), dtype=float)
    if alpha.ndim != 1 or alpha.size == 0:
        raise ValueError(f"{fn}: alpha must be a non-empty vector, got shape {alpha.shape}")
    check_positive(fn, "alpha", alpha)
    N = int(_rng_ints(fn, "N", N))
    g = as_generator(rng)
    if N == 0:
        return np.zeros(alpha.size, dtype=np.int64)
    theta = dirichlet_rng(alpha, rng=g)
    return np.asarray(g.multinomial(N, theta / theta.sum()), dtype=np.int64)
