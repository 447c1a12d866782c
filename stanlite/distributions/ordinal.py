"""Ordinal regression: ``ordered_logistic`` and ``ordered_probit``.

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
from ..autodiff.var import Box, shape_of, value_of
from ..errors import DomainError
from .discrete import (_check_category, _flat, _int_draws, _plain_float, _pointwise,
                       _quiet)
from .fused import check_finite, fused, pointwise
from .rng import as_generator

__all__ = ["ordered_logistic_lpmf", "ordered_logistic_rng", "ordered_probit_lpmf",
           "ordered_probit_rng"]


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


@_pointwise(ordered_logistic_lpmf, broadcast=False)
def _ordered_logistic_terms(k, eta, c):
    """One value per outcome (the broadcast of k, eta and c's leading axes)."""
    B, M, K, lo, hi, mid, ilo, ihi, rows, a, b, La, Lb, dgap = _ol_pieces(k, eta, c)
    v = (sm.where(mid, sm.log1m_exp(-dgap), 0.0) - sm.where(lo, La, 0.0)
         - sm.where(hi, Lb, 0.0))
    return sm.reshape(v, B)


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
