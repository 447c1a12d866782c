"""Ordinal regression: ``ordered_probit`` (``ordered_logistic`` lives in :mod:`.discrete`).

Stan's parameterisation: an outcome ``k`` in ``1..K`` (1-based), a linear predictor
``eta`` and ``K - 1`` strictly increasing cut points ``c`` (``c_0 = -inf``,
``c_K = +inf``)::

    OrderedProbit(k | eta, c) = Phi(eta - c_{k-1}) - Phi(eta - c_k)

Vectorised as ``ordered_logistic``: ``k`` an int array, ``eta`` a scalar or an array
of its shape, ``c`` one vector shared by all or one row per outcome
(``eta.shape + (K - 1,)``). The value is the sum over the outcomes (one value per
outcome with ``reduce=False``); one fused node (:mod:`.fused`) with the partials
w.r.t. ``eta`` and ``c``.

The difference of two normal CDFs is formed in logs on the side of the tails where
it does not cancel: with ``a = eta - c_{k-1} > b = eta - c_k``,
``log(Phi(a) - Phi(b)) = log Phi(a) + log1m_exp(log Phi(b) - log Phi(a))`` when
``a + b <= 0`` and the same with ``(a, b) -> (-b, -a)`` (``Phi(-b) - Phi(-a)``, the
upper tails) otherwise, so a middle category far in either tail keeps its precision.

>>> import numpy as np, stanlite as sl
>>> round(sl.ordered_probit_lpmf(np.array([1, 2, 3]), 0.0, np.array([-1.0, 1.0])), 6)
-4.063758
"""

import numpy as np

from .. import math as sm
from ..autodiff.var import Box, value_of
from .discrete import (_check_cut_points, _check_ordinal, _cut_pairs, _cut_partials,
                       _int_draws, _ol_layout, _plain_float, _quiet)
from .fused import check_finite, fused, pointwise
from .rng import as_generator

__all__ = ["ordered_probit_lpmf", "ordered_probit_rng"]

_HALF_LOG_TWO_PI = 0.5 * float(np.log(2.0 * np.pi))


def _op_pieces(k, eta, c):
    """The flattened pieces of ordered_probit (kernel and pointwise form): the layout,
    the masks, a = eta - c_{k-1}, b = eta - c_k and the log mass of each outcome."""
    B, M, K, lo, hi, ilo, ihi = _ol_layout(k, eta, c)
    e, clo, chi, rows = _cut_pairs(eta, c, B, M, K, ilo, ihi)
    a = e - clo
    b = e - chi
    mid = lo & hi
    # k = 1 has only the upper tail Phi(-b); k = K only Phi(a); a middle category the
    # side with the smaller tail masses (a comparison on traced values: guarded)
    flip = ~lo | (hi & ((a + b) > 0))
    u = sm.where(flip, -b, a)
    lu = sm.log_Phi(u)
    lp_el = lu
    if np.any(mid):
        v = sm.where(mid, sm.where(flip, -a, b), u - 1.0)      # (u - 1: any finite v < u)
        lp_el = lu + sm.where(mid, sm.log1m_exp(sm.log_Phi(v) - lu), 0.0)
    return B, M, K, lo, hi, ilo, ihi, rows, a, b, lp_el


@_quiet
def _ordered_probit(need, k, eta, c):
    """log P = log(Phi(a) - Phi(b)) with a = eta - c_{k-1} (+inf for k = 1) and
    b = eta - c_k (-inf for k = K); written ``log Phi(u) + log1m_exp(log Phi(v) -
    log Phi(u))`` with (u, v) = (a, b), or (-b, -a) where that is the smaller tail.

    d/da = phi(a) / P (0 for k = 1),  d/db = -phi(b) / P (0 for k = K).
    """
    B, M, K, lo, hi, ilo, ihi, rows, a, b, lp_el = _op_pieces(k, eta, c)
    lp = sm.sum(lp_el)
    parts = [None, None, None]
    if need[1] or need[2]:
        da = sm.where(lo, sm.exp(-0.5 * a * a - _HALF_LOG_TWO_PI - lp_el), 0.0)
        db = -sm.where(hi, sm.exp(-0.5 * b * b - _HALF_LOG_TWO_PI - lp_el), 0.0)
        _cut_partials(parts, need, da, db, B, M, K, ilo, ihi, rows)
    return lp, parts


ordered_probit_lpmf = fused("ordered_probit_lpmf", _ordered_probit,
                            _check_ordinal("ordered_probit_lpmf"), nondiff=(0,))
ordered_probit_lpmf.__doc__ = """Ordered probit log mass, summed over the outcomes.

    OrderedProbit(k | eta, c) = Phi(eta - c_{k-1}) - Phi(eta - c_k),
    k in 1..K (1-based, as in Stan), c strictly increasing cut points (K - 1 of them),
    c_0 = -inf, c_K = +inf. Shapes as ``ordered_logistic_lpmf``: ``k`` an int array,
    ``eta`` a scalar or an array of its shape, ``c`` one vector or one row per outcome.

    >>> import stanlite as sl
    >>> round(sl.ordered_probit_lpmf(2, 0.5, [-1.0, 1.0]), 6)
    -0.470555
    """


@pointwise(ordered_probit_lpmf, broadcast=False)
def _ordered_probit_terms(k, eta, c):
    """One log mass per outcome (the broadcast of k, eta and c's leading axes)."""
    k, eta, c = (a if isinstance(a, Box) else _plain_float(a) for a in (k, eta, c))
    pieces = _op_pieces(k, eta, c)
    return sm.reshape(pieces[-1], pieces[0])


def ordered_probit_rng(eta, c, rng=None):
    """OrderedProbit(eta, c) draws in 1..K: 1 + #{j: c_j < eta + N(0, 1) noise}
    (an int for a scalar eta, an int array shaped like eta otherwise)."""
    fn = "ordered_probit_rng"
    eta = np.asarray(value_of(eta), dtype=float)
    check_finite(fn, "eta", eta)
    c = _check_cut_points(fn, value_of(c))
    if c.ndim != 1:
        raise ValueError(f"{fn}: c must be one vector of cut points, got shape {c.shape}")
    z = eta + as_generator(rng).standard_normal(size=eta.shape)
    return _int_draws(1 + np.sum(c < np.asarray(z)[..., None], axis=-1))
