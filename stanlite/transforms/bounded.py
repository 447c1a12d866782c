"""Elementwise transforms: :class:`Identity`, :class:`Lower`, :class:`Upper`,
:class:`LowerUpper` and :class:`OffsetMultiplier` (any shape, one free real each).

Bounds may be numbers, arrays broadcastable to the value, or traced values (functions
of other parameters); an infinite bound reduces to the one-sided or identity map
element by element, when the transform is evaluated. The common case - numeric
scalar bounds - has its own short path (it runs at every gradient of every bounded
parameter), and ``shaped_constrain`` hands the model small picklable callables
(``_ShapedBounded``, ``_shaped_identity``) that skip the re-checks.
"""

from math import exp as _math_exp
from math import nextafter as _nextafter

import numpy as np

from ..autodiff import Box, value_of, broadcast_to
from ..autodiff.var import guarded, value_type
from ..errors import DomainError
from ..autodiff.vm.program import guard_lowering as _guard_lowering
from ..math import (concatenate, exp, log, log_inv_logit, log1m_inv_logit, inv_logit,
                    reshape)
from ..math import sum as _sum
from .base import (Transform, _as_free, _as_value, _bsum, _first, _idx, _loc, _num,
                   _plain_bound, _scalar_out, _shape, _size)


# --------------------------------------------------------------------------------------
# elementwise: identity, lower, upper, lower-upper (infinite bounds reduce elementwise)
# --------------------------------------------------------------------------------------
def _check_broadcasts(who, what, vshape, shape):
    """A ``ValueError`` unless a bound of shape ``vshape`` (``what``: which one)
    broadcasts to the value's ``shape`` without enlarging it."""
    try:
        fits = np.broadcast_shapes(vshape, shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{who}: the {what} has shape {vshape}, which does "
                         f"not broadcast to the value's shape {shape}")


def _bound_values(shape, lb, ub, who):
    """Plain lower/upper bound values (absent = -inf / +inf; not broadcast), validated:
    broadcastable to ``shape``, not NaN, lower < upper."""
    vals = []
    for name, b, absent in (("lower", lb, -np.inf), ("upper", ub, np.inf)):
        if b is None:
            vals.append(np.float64(absent))
            continue
        v = np.asarray(value_of(b), dtype=float)
        if v.ndim:
            _check_broadcasts(who, f"{name} bound", v.shape, shape)
        vals.append(v)
    lv, uv = vals
    bad = ~(lv < uv)
    if bad.any():
        i = _first(np.broadcast_to(bad, shape))
        lo, hi = np.broadcast_to(lv, shape)[i], np.broadcast_to(uv, shape)[i]
        at = f" at {_idx(i)}" if shape else ""
        raise DomainError(f"{who}: lower bound {_num(lo)} must be less than upper bound "
                          f"{_num(hi)}{at}")
    return lv, uv


def _take_bound(b, shape, idx):
    if isinstance(b, Box):
        return reshape(broadcast_to(b, shape), (-1,))[idx]
    return np.broadcast_to(np.asarray(b, dtype=float), shape).ravel()[idx]


def _bounded_piece(case, x, lb, ub, n):
    """(y, log_jac) for one kind of element: 0 none, 1 lower, 2 upper, 3 both finite."""
    if case == 0:
        return x, 0.0
    if case < 3:
        return _one_sided(case, x, lb, ub), _sum(x)
    # Stan's map, lb + (ub - lb) inv_logit(x), with no decision on x's value: the
    # recorded graph is the same for every point (a sign-dependent formula made each
    # sign pattern a new recording for sl.compile). inv_logit and the log-Jacobian's
    # terms are stable primitives (they branch inside, not on the tape); at |x| large
    # y is the bound itself, as with Stan's formula
    diff = _span(lb, ub)
    y = _two_sided(x, lb, diff)
    lj = _bsum(log(diff), n) + _sum(log_inv_logit(x) + log1m_inv_logit(x))
    return y, lj


def _one_sided(case, x, lb, ub):
    """y of :func:`_bounded_piece` for one finite bound (case 1 lower, 2 upper)."""
    if case == 1:
        if type(lb) is float and lb == 0.0:
            return exp(x)                   # 0 + exp(x) is exp(x): one node less
        return lb + exp(x)
    return ub - exp(x)


def _two_sided(x, lb, diff):
    """y of :func:`_bounded_piece` for two finite bounds (``diff``: :func:`_span`)."""
    return lb + diff * inv_logit(x)


def _span(lb, ub):
    """``ub - lb``, for plain bounds lowered by an ulp where ``lb + (ub - lb)`` rounds
    above ``ub`` (as for lb = -28.6, ub = 54.7): then ``lb + span * s`` stays <= ub for
    every ``0 <= s <= 1`` (rounding is monotonic), so a constrained value never leaves
    [lb, ub]. Traced bounds (functions of parameters) keep the plain difference: the
    adjustment would be a decision on their values."""
    if isinstance(lb, Box) or isinstance(ub, Box):
        return ub - lb
    if type(lb) is float and type(ub) is float:
        d = ub - lb
        while lb + d > ub:
            d = _nextafter(d, 0.0)
        return d
    lb, ub = np.asarray(lb, dtype=float), np.asarray(ub, dtype=float)
    d = ub - lb
    over = lb + d > ub
    while over.any():
        d = np.where(over, np.nextafter(d, 0.0), d)
        over = lb + d > ub
    return d


def _bounded_constrain(x, shape, lb, ub, who):
    tl, tu = type(lb), type(ub)
    if (lb is None or tl is float or tl is int) and (ub is None or tu is float or tu is int):
        # the common case, numeric scalar bounds: no per-element bookkeeping (this runs
        # at every gradient evaluation of every bounded parameter)
        return _scalar_bounds_constrain(x, shape, lb, ub, who)
    shape = _shape(shape)
    n = _size(shape)
    x = _as_free(x, n, who)
    if shape == () and _scalar_bound(lb) and _scalar_bound(ub):
        # a scalar whose bound is a function of another parameter (traced): the same
        # checks and formula as below, without numpy's per-element machinery
        c = guarded(_scalar_bound_case, lb, ub, who)
        xs = x[0] if isinstance(x, Box) else float(x[0])
        y, lj = _bounded_piece(c, xs, lb if c & 1 else None, ub if c & 2 else None, 1)
        return _scalar_out(y), _scalar_out(lj)
    case = guarded(_bound_cases, shape, lb, ub, who)
    cases = np.unique(case) if case.ndim else (int(case),)
    if len(cases) == 1 or n == 0:            # one formula for every element (usual)
        c = int(cases[0]) if n else 0
        y, lj = _bounded_piece(c, reshape(x, shape), lb if c & 1 else None,
                               ub if c & 2 else None, n)
    else:                                    # mixed finite / infinite bounds
        flat = np.broadcast_to(case, shape).ravel()
        ys, ljs, order = [], [], []
        for c in cases:
            idx = np.flatnonzero(flat == c)
            yi, lji = _bounded_piece(int(c), x[idx],
                                     _take_bound(lb, shape, idx) if c & 1 else None,
                                     _take_bound(ub, shape, idx) if c & 2 else None,
                                     idx.size)
            ys.append(yi)
            ljs.append(lji)
            order.append(idx)
        inv = np.empty(n, dtype=np.intp)
        inv[np.concatenate(order)] = np.arange(n)
        y = reshape(concatenate(ys)[inv], shape)
        lj = sum(ljs[1:], ljs[0])
    if shape == ():
        y = _scalar_out(y)
    return y, _scalar_out(lj)


def _scalar_bound(b):
    """Absent, a number, or traced with a scalar value."""
    t = type(b)
    return b is None or t is float or t is int or isinstance(b, Box) and \
        value_type(b) is float


# decisions on bound and parameter values, taken through ``guarded`` (plain values in)
def _scalar_bound_case(lb, ub, who):
    """Which bounds of a scalar are finite (1 lower, 2 upper, 3 both); checks lb < ub."""
    lv = -_INF if lb is None else float(lb)
    uv = _INF if ub is None else float(ub)
    if not lv < uv:                     # NaN included
        raise DomainError(f"{who}: lower bound {_num(lv)} must be less than upper "
                          f"bound {_num(uv)}")
    return int(lv != -_INF) + 2 * int(uv != _INF)


# how the decision above lowers to the compiled interpreter (autodiff/vm)
_guard_lowering(_scalar_bound_case, "bound_case")


def _bound_cases(shape, lb, ub, who):
    """Per element, which bounds are finite (as :func:`_scalar_bound_case`); checked."""
    lv, uv = _bound_values(shape, lb, ub, who)
    return np.isfinite(lv).astype(np.int8) + 2 * np.isfinite(uv).astype(np.int8)


def _scalar_bounds_constrain(x, shape, lb, ub, who):
    shape = _shape(shape)
    n = _size(shape)
    x = _as_free(x, n, who)
    fl = lb is not None and lb != -_INF
    fu = ub is not None and ub != _INF
    if lb is not None and ub is not None and not lb < ub:
        raise DomainError(f"{who}: lower bound {_num(lb)} must be less than upper bound "
                          f"{_num(ub)}")
    if lb is not None and lb != lb or ub is not None and ub != ub:
        raise DomainError(f"{who}: a bound is NaN")
    if shape == ():
        xs = x[0] if isinstance(x, Box) else float(x[0])
    else:
        xs = x if len(shape) == 1 else reshape(x, shape)
    y, lj = _bounded_piece(int(fl) + 2 * int(fu), xs, float(lb) if fl else None,
                           float(ub) if fu else None, n)
    return y, _scalar_out(lj)


_INF = float("inf")


# the shortcuts shaped_constrain returns: small picklable callables (a model holding
# them can be pickled, copied and sent to worker processes). ``elementwise``: the
# callable takes free values with leading batch axes too (draws x shape), and gives
# each element the value a call on that draw's own array gives - the same formula
# per element (the model constrains a fit's draws all at once with it:
# Model._constrain_draws)
def _shaped_identity(x):
    return x, 0.0


_shaped_identity.elementwise = True
_shaped_identity.identity = True      # (y is x: nothing to compute)


class _ShapedBounded:
    __slots__ = ("case", "lb", "ub", "n")
    elementwise = True

    def __init__(self, case, lb, ub, n):
        self.case, self.lb, self.ub, self.n = case, lb, ub, n

    def __call__(self, x):
        y, lj = _bounded_piece(self.case, x, self.lb, self.ub, self.n)
        return y, _scalar_out(lj)

    def scalars(self, xs):
        """The constrained values of the plain floats ``xs`` (a list; a scalar
        parameter's draws) as a list: ``[self(v)[0] for v in xs]`` bit for bit - the
        same functions on the same floats (the scalar ``exp`` and ``inv_logit``,
        whose results can differ from numpy's array loops by an ulp) - without the
        log-Jacobian and the per-call dispatch (~10x cheaper a draw)."""
        case, lb, ub = self.case, self.lb, self.ub
        if case == 1 and lb == 0.0:         # (what _one_sided gives: the common case)
            try:
                # exp's plain-float path is math.exp (inf past its range): the
                # same numbers, without the dispatch
                return list(map(_math_exp, xs))
            except OverflowError:
                return list(map(exp, xs))
        if case == 3:
            diff = _span(lb, ub)
            return [_two_sided(v, lb, diff) for v in xs]
        return [_one_sided(case, v, lb, ub) for v in xs]


def _bounds_message(v, lv, uv):
    """Message for the first element outside [lv, uv] (or NaN), None if all inside."""
    lv, uv = np.broadcast_to(lv, v.shape), np.broadcast_to(uv, v.shape)
    bad = ~((v >= lv) & (v <= uv))
    i = _first(bad)
    if i is None:
        return None
    lo, hi = lv[i], uv[i]
    if np.isfinite(lo) and np.isfinite(hi):
        want = f"must be in [{_num(lo)}, {_num(hi)}]"
    elif np.isfinite(lo):
        want = f"must be >= {_num(lo)}"
    elif np.isfinite(hi):
        want = f"must be <= {_num(hi)}"
    else:
        want = "must not be nan"
    return f"{want}, but {_loc(i)}is {_num(v[i])}"


class _Elementwise(Transform):
    """Shared parts of the elementwise transforms (any shape, one free real each)."""

    full_bound_names = ("lower", "upper")

    def free_size(self, shape):
        return _size(_shape(shape))

    def _lu(self, bounds):
        b = self._resolve(bounds)
        return _plain_bound(b.get("lower")), _plain_bound(b.get("upper"))

    def constrain(self, x, shape, *bounds):
        lb, ub = self._lu(bounds)
        return _bounded_constrain(x, shape, lb, ub, self.name)

    def shaped_constrain(self, shape, *bounds):
        """See :meth:`Transform.shaped_constrain`: the free values come in the value's
        own shape; only for numeric scalar bounds (``None`` for arrays or invalid
        bounds, which ``constrain`` checks and reports)."""
        if type(self).constrain is not _Elementwise.constrain:
            return None
        try:
            lb, ub = self._lu(bounds)
        except (TypeError, ValueError):
            return None
        if not ((lb is None or type(lb) is float) and (ub is None or type(ub) is float)):
            return None
        if lb is not None and ub is not None and not lb < ub or \
                lb is not None and lb != lb or ub is not None and ub != ub:
            return None
        shape = _shape(shape)
        case = int(lb is not None and lb != -_INF) + 2 * int(ub is not None and ub != _INF)
        if case == 0:
            return _shaped_identity, shape
        return _ShapedBounded(case, lb if case & 1 else None, ub if case & 2 else None,
                              _size(shape)), shape

    def unconstrain(self, y, shape, *bounds):
        shape = _shape(shape)
        lb, ub = self._lu(bounds)
        v = _as_value(y, shape, self.name)
        lv, uv = _bound_values(shape, lb, ub, self.name)
        msg = _bounds_message(v, lv, uv)
        if msg is not None:
            raise DomainError(f"{self.name}: {msg}")
        fl, fu = np.isfinite(lv), np.isfinite(uv)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            lo = np.log(v - np.where(fl, lv, 0.0))
            hi = np.log(np.where(fu, uv, 0.0) - v)
            x = np.where(fl & fu, lo - hi, np.where(fl, lo, np.where(fu, hi, v)))
        return np.asarray(x, dtype=float).reshape(-1)

    def check(self, y, shape, *bounds):
        shape = _shape(shape)
        lb, ub = self._lu(bounds)
        try:
            v = _as_value(y, shape, self.name)
            lv, uv = _bound_values(shape, lb, ub, self.name)
        except ValueError as e:
            return str(e).split(": ", 1)[-1]
        return _bounds_message(v, lv, uv)

    def check_bounds(self, shape, *bounds):
        """See :meth:`Transform.check_bounds`: shapes that broadcast, no NaN, lower <
        upper elementwise."""
        try:
            lb, ub = self._lu(bounds)
            _bound_values(_shape(shape), lb, ub, self.name)
        except (TypeError, ValueError) as e:
            return str(e).split(": ", 1)[-1]
        return None


class Identity(_Elementwise):
    """No constraint: ``y = x``, ``log_jac = 0``.

    >>> import numpy as np
    >>> Identity().constrain(np.array([1.5]), ())
    (1.5, 0.0)
    """

    name = "identity"


class Lower(_Elementwise):
    """``y = lb + exp(x)``, ``log_jac = sum(x)``; ``lb = -inf`` gives the identity.

    >>> import numpy as np
    >>> Lower().constrain(np.array([0.0, 1.0]), (2,), 1.0)[0]
    array([2.        , 3.71828183])
    """

    name = "lower"
    bound_names = ("lower",)

    def __init__(self, lower=None):
        super().__init__(lower=lower)


class Upper(_Elementwise):
    """``y = ub - exp(x)``, ``log_jac = sum(x)``; ``ub = +inf`` gives the identity."""

    name = "upper"
    bound_names = ("upper",)

    def __init__(self, upper=None):
        super().__init__(upper=upper)


class LowerUpper(_Elementwise):
    """``y = lb + (ub - lb) inv_logit(x)``,
    ``log_jac = sum(log(ub - lb) + log_inv_logit(x) + log1m_inv_logit(x))``.

    Elements with an infinite bound use the one-sided (or identity) map instead;
    ``lb >= ub`` raises :class:`stanlite.DomainError` (a ``ValueError``).

    >>> import numpy as np
    >>> y, lj = LowerUpper().constrain(np.array([0.0]), (), -1.0, 3.0)
    >>> y, round(lj, 12)
    (1.0, 0.0)
    """

    name = "lower_upper"
    bound_names = ("lower", "upper")

    def __init__(self, lower=None, upper=None):
        super().__init__(lower=lower, upper=upper)


# --------------------------------------------------------------------------------------
# offset / multiplier
# --------------------------------------------------------------------------------------
def _check_om(who, name, v, shape):
    """An offset must be finite, a multiplier positive and finite, both broadcastable."""
    a = np.asarray(v, dtype=float)
    _check_broadcasts(who, name, a.shape, shape)
    if name == "offset":
        ok, need = np.isfinite(a), "finite"
    else:
        ok, need = np.isfinite(a) & (a > 0), "positive and finite"
    i = _first(~ok)
    if i is not None:
        raise DomainError(f"{who}: the {name} must be {need}, but "
                          f"{_loc(i)}is {_num(a[i])}")


class OffsetMultiplier(_Elementwise):
    """``y = offset + multiplier * x``, ``log_jac = sum(log(multiplier))`` over the
    shape (a scalar multiplier counts once per element). ``offset`` must be finite and
    ``multiplier`` positive and finite; either may be absent (0 and 1).

    ``constrain(x, shape, offset, multiplier)`` takes both (``None`` for an absent
    one); a transform made with only one of them also accepts just that one.

    >>> import numpy as np
    >>> t = OffsetMultiplier(offset=1.0, multiplier=2.0)
    >>> y, lj = t.constrain(np.array([0.5, -1.0]), (2,))
    >>> y, round(float(lj), 12)
    (array([ 2., -1.]), 1.38629436112)
    """

    name = "offset_multiplier"
    full_bound_names = ("offset", "multiplier")

    def __init__(self, offset=None, multiplier=None):
        super().__init__(offset=offset, multiplier=multiplier)

    @property
    def bound_names(self):
        names = tuple(k for k in ("offset", "multiplier") if self.declared[k] is not None)
        return names or ("offset", "multiplier")

    def _om(self, bounds, shape):
        b = self._resolve(bounds)
        off, mul = _plain_bound(b.get("offset")), _plain_bound(b.get("multiplier"))
        for name, v in (("offset", off), ("multiplier", mul)):
            if v is not None:
                # a check on values (a guard of sl.compile when v is traced)
                guarded(_check_om, self.name, name, v, shape)
        return off, mul

    def constrain(self, x, shape, *bounds):
        shape = _shape(shape)
        n = _size(shape)
        off, mul = self._om(bounds, shape)
        y = reshape(_as_free(x, n, self.name), shape)
        lj = 0.0
        if mul is not None:
            y = y * mul
            lj = _bsum(log(mul), n)
        if off is not None:
            y = y + off
        if shape == ():
            y = _scalar_out(y)
        return y, _scalar_out(lj)

    def unconstrain(self, y, shape, *bounds):
        shape = _shape(shape)
        off, mul = self._om(bounds, shape)
        v = _as_value(y, shape, self.name)
        msg = _bounds_message(v, np.full(shape, -np.inf), np.full(shape, np.inf))
        if msg is not None:
            raise DomainError(f"{self.name}: {msg}")
        if off is not None:
            v = v - np.asarray(value_of(off), dtype=float)
        if mul is not None:
            v = v / np.asarray(value_of(mul), dtype=float)
        return np.broadcast_to(v, shape).astype(float).reshape(-1)

    def check(self, y, shape, *bounds):
        shape = _shape(shape)
        try:
            self._om(bounds, shape)
            v = _as_value(y, shape, self.name)
        except ValueError as e:
            return str(e).split(": ", 1)[-1]
        return _bounds_message(v, np.full(shape, -np.inf), np.full(shape, np.inf))

    def check_bounds(self, shape, *bounds):
        """See :meth:`Transform.check_bounds`: shapes that broadcast, a finite offset,
        a positive finite multiplier."""
        try:
            self._om(bounds, _shape(shape))
        except (TypeError, ValueError) as e:
            return str(e).split(": ", 1)[-1]
        return None
