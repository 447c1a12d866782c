"""Constraint transforms: bijections from the unconstrained space onto constrained sets.

A constrained parameter (``real<lower=0>``, ``simplex[K]``, ``cov_matrix[K]``, ...) is
sampled on the unconstrained space R^n; the model sees ``y = constrain(x)`` and its log
density gains ``log |det J(x)|``, the change-of-measure term, so that a density that is
flat in ``x + log_jac`` is flat on the constrained set. The maps are the ones Stan's
reference manual defines in its chapter "Constraint Transforms" (deviations are listed
at the end of this docstring).

Every transform implements the same small interface (the model layer codes against it):

``name``
    short name (``"lower"``, ``"simplex"``, ...).
``free_size(shape)``
    number ``n`` of unconstrained reals for a constrained value of ``shape``.
``constrain(x, shape, *bounds) -> (y, log_jac)``
    ``x`` is a 1-D array or traced ``Var`` of length ``free_size(shape)``; ``y`` has
    ``shape`` (a float for ``shape == ()``); ``log_jac`` is the scalar
    ``log |det dy_free/dx|``. Written with stanlite operations, so it is differentiable
    in reverse mode and nested (forward-over-reverse: ``sl.hessian`` works through it).
    ``bounds`` are the evaluated bounds of the declaration, in the order of the
    transform's ``bound_names`` (floats, arrays broadcastable to ``shape``, or traced
    ``Var``s when a bound is a function of other parameters: the value is then
    differentiable with respect to the bound too). ``None`` stands for an absent bound;
    with no bounds passed at all, the numeric values given to :func:`make` are used.
``unconstrain(y, shape, *bounds) -> ndarray``
    the inverse map (plain floats, 1-D of length ``free_size(shape)``); raises
    :class:`stanlite.DomainError` if ``y`` is not in the constrained set.
``check(y, shape, *bounds) -> str | None``
    ``None`` if ``y`` is in the constrained set (with Stan's tolerance ``1e-8`` for
    simplex sums, unit lengths, unit diagonals and symmetry), else a short message.
    Element indices in messages are 0-based (Python), not Stan's 1-based ones.

Elementwise transforms (any shape: scalar, vector, matrix, array): :class:`Identity`,
:class:`Lower`, :class:`Upper`, :class:`LowerUpper`, :class:`OffsetMultiplier`.
Structured transforms (the constrained object is the trailing one or two axes of
``shape``; leading axes are an array of such objects, e.g. ``shape=(3, K)`` for three
simplexes): :class:`Simplex`, :class:`Ordered`, :class:`PositiveOrdered`,
:class:`UnitVector`, :class:`CholeskyFactorCorr`, :class:`CholeskyFactorCov`,
:class:`CorrMatrix`, :class:`CovMatrix`, :class:`SumToZero` (Stan 2.36's isometric
sum-to-zero vector), :class:`RowStochastic`, :class:`ColumnStochastic` (each row or
column a simplex). A declaration's ``array=`` dimensions are such leading axes: every
element of the array gets its own transform, computed for all elements at once, and
the log-Jacobian is the sum over them. :func:`make` picks the transform for a
declaration.

>>> import numpy as np, stanlite as sl
>>> from stanlite import transforms as T
>>> t = T.make("vector", lower=0.0)
>>> y, lj = t.constrain(np.array([0.0, np.log(2.0)]), (2,))
>>> y, float(lj)
(array([1., 2.]), 0.6931471805599453)
>>> t.unconstrain(y, (2,))
array([0.        , 0.69314718])
>>> t.check(np.array([1.0, -1.5]), (2,))
'must be >= 0, but element [1] is -1.5'

Deviations from Stan (all deliberate):

* the stick-breaking simplex transform is the one of Stan's reference manual up to
  version 2.35 (Stan 2.36 switched to an isometric-log-ratio transform);
* the correlation-matrix constrain returns an exactly symmetric matrix with an exactly
  unit diagonal, and the covariance-matrix one an exactly symmetric matrix;
* the free coordinates of ``row_stochastic_matrix`` are row by row (each row's
  ``M - 1`` together), not column-major as Stan's;
* the free coordinates of ``corr_matrix`` are ordered like those of
  ``cholesky_factor_corr`` (row-major over the strictly lower triangle, as the
  reference manual's figure), not column-major as Stan's ``read_corr_L``;
* unbounded values are checked only for NaN (infinite values pass, as they do for
  bounded ones at the open end);
* infinite bounds reduce to the one-sided or identity map *when the transform is
  evaluated*, element by element (a bound can be data or a parameter), so
  ``make("real", lower=0, upper=np.inf)`` is a :class:`LowerUpper` that behaves as
  :class:`Lower`.
"""

from functools import lru_cache
from math import exp as _math_exp
from math import nextafter as _nextafter
from math import prod as _prod

import numpy as np

from .autodiff import Box, value_of, broadcast_to
from .autodiff.var import guarded, shape_of, value_type
from .errors import DomainError
from .autodiff.vm.program import guard_lowering as _guard_lowering
from .math import (concatenate, cumulative_sum, exp, log, log_inv_logit,
                   log1m_inv_logit, inv_logit, matmul, multiply_lower_tri_self_transpose,
                   reshape, swapaxes, tanh, where)
from .math import sum as _sum
from .math import sqrt as _sqrt

__all__ = ["Transform", "Identity", "Lower", "Upper", "LowerUpper", "OffsetMultiplier",
           "Simplex", "Ordered", "PositiveOrdered", "UnitVector", "CholeskyFactorCorr",
           "CholeskyFactorCov", "CorrMatrix", "CovMatrix", "SumToZero", "RowStochastic",
           "ColumnStochastic", "make", "ELEMENTWISE_KINDS",
           "STRUCTURED_KINDS", "CONSTRAINT_TOLERANCE"]

CONSTRAINT_TOLERANCE = 1e-8   # Stan's tolerance for sums, unit lengths and symmetry
_LOG2 = float(np.log(2.0))
_LOG4 = float(np.log(4.0))


# --------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------
def _shape(shape):
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


def _size(shape):
    return _prod(shape)


def _num(v):
    """A number for messages: ``0``, ``-1.5``, ``1.0000000001``, ``inf``, ``nan``."""
    v = float(v)
    if np.isfinite(v) and v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return repr(v)


def _idx(index):
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def _loc(index):
    """``'element [1, 2] '`` (empty for a scalar)."""
    return f"element {_idx(index)} " if len(index) else ""


def _first(mask):
    """Index tuple of the first True entry of ``mask`` (None if there is none)."""
    flat = np.flatnonzero(np.ravel(mask))
    if flat.size == 0:
        return None
    return tuple(int(i) for i in np.unravel_index(int(flat[0]), np.shape(mask)))


def _scalar_out(v):
    """A plain 0-d result as a Python float; traced results stay traced."""
    return v if isinstance(v, Box) else float(v)


def _as_free(x, n, who):
    """The unconstrained input as a 1-D array (or Var) of length ``n``."""
    if not isinstance(x, Box):
        x = np.asarray(x, dtype=float)
    shp = shape_of(x)
    if shp != (n,):
        if len(shp) <= 1 and _size(shp) == n:
            return reshape(x, (n,))
        raise ValueError(f"{who}: expected an unconstrained vector of length {n}, "
                         f"got shape {shp}")
    return x


def _as_value(y, shape, who):
    """A constrained value as a plain float array of exactly ``shape``."""
    try:
        v = np.asarray(value_of(y), dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{who}: expected numbers of shape {shape}, got {type(y).__name__}")
    if v.shape != shape:
        raise ValueError(f"{who}: expected a value of shape {shape}, got shape {v.shape}")
    return v


def _plain_bound(b):
    """A bound as given if traced or absent; else a float (scalar) or float array."""
    if b is None or isinstance(b, Box):
        return b
    a = np.asarray(b, dtype=float)
    return float(a) if a.ndim == 0 else a


def _bsum(term, n):
    """Sum of ``term`` broadcast to ``n`` elements (each entry is repeated equally)."""
    if n == 0:
        return 0.0
    k = _size(shape_of(term))
    s = _sum(term)
    return s if k == n else s * float(n // k)


# --------------------------------------------------------------------------------------
# the interface
# --------------------------------------------------------------------------------------
class Transform:
    """Base class: a bijection from R^n onto a constrained set (see the module doc).

    ``bound_names`` lists the bounds ``constrain``/``unconstrain``/``check`` take after
    ``shape``, in order; ``declared`` holds the values given to :func:`make` (numbers,
    arrays, or the names/callables the model layer resolves), used when no bounds are
    passed.
    """

    name = "transform"
    bound_names = ()
    full_bound_names = ()

    def __init__(self):
        self.declared = {}

    def free_size(self, shape):
        raise NotImplementedError

    def constrain(self, x, shape, *bounds):
        raise NotImplementedError

    def unconstrain(self, y, shape, *bounds):
        raise NotImplementedError

    def check(self, y, shape, *bounds):
        raise NotImplementedError

    def check_bounds(self, shape, *bounds):
        """A message if evaluated ``bounds`` (in ``bound_names`` order, ``None`` for one
        not known yet) cannot serve a value of ``shape``, else None: used to check
        bounds given by data once, when a model is built. Structured transforms take
        no bounds."""
        return None

    def shaped_constrain(self, shape, *bounds):
        """Optional shortcut for the model layer, for bounds fixed in advance:
        ``(f, free_shape)`` where ``f(x)`` is ``constrain`` of the free values given
        already in ``free_shape`` (a float or 0-d traced value for ``()``), without
        re-checking the bounds and the shape at every evaluation; or ``None`` (no
        shortcut: call ``constrain``, which checks and reports)."""
        return None

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.declared.items() if v is not None)
        return f"{type(self).__name__}({args})"

    def _resolve(self, bounds):
        """The bounds as a dict name -> value (None if absent).

        Accepts the bounds in the order of ``bound_names``, or of ``full_bound_names``
        (``(lower, upper)`` or ``(offset, multiplier)``, ``None`` for absent ones), or
        none at all (the numeric values given to :func:`make`)."""
        names, full = self.bound_names, self.full_bound_names
        if len(bounds) == 0:
            out = {}
            for k in names:
                v = self.declared.get(k)
                if v is not None and not _is_numeric(v):
                    raise TypeError(f"{self.name}: the {k} bound {v!r} must be evaluated "
                                    f"by the caller and passed to the transform")
                out[k] = v
            return out
        if len(bounds) == len(names):
            return dict(zip(names, bounds))
        if len(bounds) == len(full):
            return dict(zip(full, bounds))
        if all(b is None for b in bounds):
            return {}
        raise TypeError(f"{self.name}: expected bounds {names}, got {len(bounds)} values")


# --------------------------------------------------------------------------------------
# elementwise: identity, lower, upper, lower-upper (infinite bounds reduce elementwise)
# --------------------------------------------------------------------------------------
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
            try:
                ok = np.broadcast_shapes(v.shape, shape) == shape
            except ValueError:
                ok = False
            if not ok:
                raise ValueError(f"{who}: the {name} bound has shape {v.shape}, which does "
                                 f"not broadcast to the value's shape {shape}")
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


class _ShapedStructured:
    __slots__ = ("transform", "batch", "dims")

    def __init__(self, transform, batch, dims):
        self.transform, self.batch, self.dims = transform, batch, dims

    def __call__(self, x):
        if not _size(self.batch + self.dims):
            return _no_objects(self.batch, self.dims)
        y, lj = self.transform._constrain(x, self.batch, self.dims)
        return y, _scalar_out(lj)


def _no_objects(batch, dims):
    """No structured values (``array[0] simplex[K]``, a stochastic matrix with no rows
    or columns; Stan allows them): empty, log-Jacobian 0, and no zero-size operations
    recorded (the interpreter's lowering has no table for them: a KeyError)."""
    return np.zeros(tuple(batch) + tuple(dims)), 0.0


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
        super().__init__()
        self.declared = {"lower": lower}


class Upper(_Elementwise):
    """``y = ub - exp(x)``, ``log_jac = sum(x)``; ``ub = +inf`` gives the identity."""

    name = "upper"
    bound_names = ("upper",)

    def __init__(self, upper=None):
        super().__init__()
        self.declared = {"upper": upper}


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
        super().__init__()
        self.declared = {"lower": lower, "upper": upper}


# --------------------------------------------------------------------------------------
# offset / multiplier
# --------------------------------------------------------------------------------------
def _check_om(who, name, v, shape):
    """An offset must be finite, a multiplier positive and finite, both broadcastable."""
    a = np.asarray(v, dtype=float)
    try:
        fits = np.broadcast_shapes(a.shape, shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{who}: the {name} has shape {a.shape}, which does "
                         f"not broadcast to the value's shape {shape}")
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
        super().__init__()
        self.declared = {"offset": offset, "multiplier": multiplier}

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


# --------------------------------------------------------------------------------------
# structured transforms
# --------------------------------------------------------------------------------------
class _Structured(Transform):
    """Shared parts: the object is the trailing ``core`` axes of the shape; leading axes
    are an array of such objects (vectorized, not looped)."""

    core = 1

    def _split(self, shape):
        shape = _shape(shape)
        if len(shape) < self.core:
            raise ValueError(f"{self.name}: shape {shape} needs at least {self.core} "
                             f"dimension(s)")
        batch, dims = shape[:len(shape) - self.core], shape[len(shape) - self.core:]
        self._check_dims(dims)
        return shape, batch, dims

    def _check_dims(self, dims):
        pass

    def _no_bounds(self, bounds):
        if any(b is not None for b in bounds):
            raise TypeError(f"{self.name} takes no bounds")

    def free_size(self, shape):
        shape, batch, dims = self._split(shape)
        return _size(batch) * self._core_free(dims)

    def constrain(self, x, shape, *bounds):
        self._no_bounds(bounds)
        shape, batch, dims = self._split(shape)
        m = self._core_free(dims)
        x = _as_free(x, _size(batch) * m, self.name)
        if not _size(batch + dims):
            return _no_objects(batch, dims)
        y, lj = self._constrain(reshape(x, batch + (m,)), batch, dims)
        return y, _scalar_out(lj)

    def shaped_constrain(self, shape, *bounds):
        """See :meth:`Transform.shaped_constrain`: the free values come as
        ``batch + (m,)`` (``m`` free reals per object)."""
        if any(b is not None for b in bounds):
            return None
        try:
            shape, batch, dims = self._split(shape)
        except ValueError:
            return None
        return _ShapedStructured(self, batch, dims), batch + (self._core_free(dims),)

    def unconstrain(self, y, shape, *bounds):
        self._no_bounds(bounds)
        shape, batch, dims = self._split(shape)
        v = _as_value(y, shape, self.name)
        msg = self._violation(v, dims)
        if msg is not None:
            raise DomainError(f"{self.name}: {msg}")
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            x = self._unconstrain(v, dims)
        return np.asarray(x, dtype=float).reshape(-1)

    def check(self, y, shape, *bounds):
        self._no_bounds(bounds)
        try:
            shape, batch, dims = self._split(shape)
            v = _as_value(y, shape, self.name)
        except ValueError as e:
            return str(e).split(": ", 1)[-1]
        return self._violation(v, dims)


def _nan_message(v):
    i = _first(np.isnan(v))
    return None if i is None else f"{_loc(i)}is nan"


class Simplex(_Structured):
    """Stan's stick-breaking simplex: ``K - 1`` free reals for a ``K``-simplex.

    With ``z_k = inv_logit(x_k - log(K - k))`` (1-based ``k``), ``y_k = z_k`` times the
    stick left after the first ``k - 1`` breaks, ``y_K`` the stick left at the end;
    ``log_jac = sum_k log(z_k (1 - z_k) stick_k)`` (the Jacobian of the first ``K - 1``
    coordinates). ``x = 0`` maps to the centre ``1/K``.

    >>> import numpy as np
    >>> Simplex().constrain(np.zeros(3), (4,))[0]
    array([0.25, 0.25, 0.25, 0.25])
    """

    name = "simplex"

    def _check_dims(self, dims):
        if dims[0] < 1:
            raise ValueError("simplex: needs at least 1 element")

    def _core_free(self, dims):
        return dims[0] - 1

    def _constrain(self, x, batch, dims):
        K = dims[0]
        if K == 1:
            return np.ones(batch + (1,)), 0.0
        u = x - np.log(K - np.arange(1.0, K))
        lz = log_inv_logit(u)                              # log z_k
        cs = cumulative_sum(log1m_inv_logit(u), axis=-1)   # log stick after break k
        zero = np.zeros(batch + (1,))
        y = exp(concatenate([lz, zero], axis=-1) + concatenate([zero, cs], axis=-1))
        return y, _sum(lz + cs)

    def _violation(self, v, dims):
        msg = _nan_message(v)
        if msg:
            return msg
        i = _first(v < 0)
        if i is not None:
            return f"must be >= 0, but {_loc(i)}is {_num(v[i])}"
        s = np.sum(v, axis=-1)
        i = _first(np.abs(s - 1.0) > CONSTRAINT_TOLERANCE)
        if i is not None:
            at = f" at {_idx(i)}" if i else ""
            return (f"must sum to 1 (within {CONSTRAINT_TOLERANCE:g}), but the sum{at} "
                    f"is {_num(s[i])}")
        return None

    def _unconstrain(self, v, dims):
        K = dims[0]
        tail = np.cumsum(v[..., ::-1], axis=-1)[..., ::-1]     # sum_{j >= k} y_j
        return (np.log(v[..., :-1]) - np.log(tail[..., 1:])
                + np.log(K - np.arange(1.0, K)))


class Ordered(_Structured):
    """``y_1 = x_1``, ``y_k = y_{k-1} + exp(x_k)``; ``log_jac = sum_{k >= 2} x_k``.

    >>> import numpy as np
    >>> Ordered().constrain(np.array([1.0, 0.0, 0.0]), (3,))[0]
    array([1., 2., 3.])
    """

    name = "ordered"
    _positive = False

    def _core_free(self, dims):
        return dims[0]

    def _constrain(self, x, batch, dims):
        if dims[0] == 0:
            return x, 0.0
        if self._positive:
            return cumulative_sum(exp(x), axis=-1), _sum(x)
        if batch:
            first, rest = x[..., :1], x[..., 1:]
        else:                                   # one vector: plain slices (cheaper)
            first, rest = x[:1], x[1:]
        steps = concatenate([first, exp(rest)], axis=-1)
        return cumulative_sum(steps, axis=-1), _sum(rest)

    def _violation(self, v, dims):
        msg = _nan_message(v)
        if msg:
            return msg
        if self._positive:
            i = _first(v[..., :1] < 0)
            if i is not None:
                return f"must be >= 0, but {_loc(i)}is {_num(v[i])}"
        d = np.diff(v, axis=-1)
        i = _first(~(d > 0))
        if i is not None:
            j = i[:-1] + (i[-1] + 1,)
            return (f"must be strictly increasing, but {_loc(j)}is {_num(v[j])} after "
                    f"{_loc(i)}= {_num(v[i])}")
        return None

    def _unconstrain(self, v, dims):
        if self._positive:
            return np.log(np.concatenate([v[..., :1], np.diff(v, axis=-1)], axis=-1))
        return np.concatenate([v[..., :1], np.log(np.diff(v, axis=-1))], axis=-1)


class PositiveOrdered(Ordered):
    """``y_1 = exp(x_1)``, ``y_k = y_{k-1} + exp(x_k)``; ``log_jac = sum(x)``."""

    name = "positive_ordered"
    _positive = True


def _check_direction(r2):
    if _first(np.asarray(r2) == 0) is not None:
        raise DomainError("unit_vector: the unconstrained vector is all zeros, so it "
                          "has no direction")


class UnitVector(_Structured):
    """``y = x / ||x||`` with the log "Jacobian" ``-||x||^2 / 2``, as Stan.

    This is **not** a bijection: ``K`` free reals map onto the ``K - 1``-dimensional
    sphere, and every ray gives the same point. The term is the log density of a
    standard normal ``x`` (up to a constant), whose direction is uniform on the sphere:
    it makes the radius proper so that a flat density in ``y`` is sampled correctly.
    ``unconstrain`` returns ``y`` itself (the point of norm 1 on its ray). ``x = 0`` has
    no direction and raises :class:`stanlite.DomainError`.

    >>> import numpy as np
    >>> y, lj = UnitVector().constrain(np.array([3.0, 4.0]), (2,))
    >>> y, lj
    (array([0.6, 0.8]), -12.5)
    """

    name = "unit_vector"

    def _check_dims(self, dims):
        if dims[0] < 1:
            raise ValueError("unit_vector: needs at least 1 element")

    def _core_free(self, dims):
        return dims[0]

    def _constrain(self, x, batch, dims):
        sq = x * x
        r2 = _sum(sq, axis=-1, keepdims=True)
        guarded(_check_direction, r2)
        return x / _sqrt(r2), -0.5 * _sum(r2)

    def _violation(self, v, dims):
        msg = _nan_message(v)
        if msg:
            return msg
        s = np.sum(v * v, axis=-1)
        i = _first(~(np.abs(s - 1.0) <= CONSTRAINT_TOLERANCE))
        if i is not None:
            at = f" at {_idx(i)}" if i else ""
            return (f"must have unit length (within {CONSTRAINT_TOLERANCE:g} on the squared "
                    f"norm), but the squared norm{at} is {_num(s[i])}")
        return None

    def _unconstrain(self, v, dims):
        return v


# --------------------------------------------------------------------------------------
# matrices: Cholesky factors, correlation and covariance matrices
# --------------------------------------------------------------------------------------
@lru_cache(maxsize=64)
def _corr_constants(K):
    """Index tables for K x K correlation factors (row-major strictly lower order)."""
    r, c = np.tril_indices(K, -1)
    m = r.size
    gather = np.full(K * K, m, dtype=np.intp)          # slot m holds a zero
    gather[r * K + c] = np.arange(m)
    eye = np.eye(K)
    coef_L = 1.0 + 0.5 * (r - c - 1)                   # tanh + z -> L (strictly lower)
    coef_corr = 1.0 + 0.5 * (K - c - 2)                # tanh + z -> Omega
    lower = np.tril(np.ones((K, K), dtype=bool), -1)
    for a in (gather, eye, coef_L, coef_corr, lower):
        a.setflags(write=False)
    return r, c, gather, eye, coef_L, coef_corr, lower


def _to_square(v, gather, batch, K):
    ext = concatenate([v, np.zeros(batch + (1,))], axis=-1)
    return reshape(ext[..., gather], batch + (K, K))


def _corr_cholesky(x, batch, K):
    """(L, log(1 - z^2)) from the free CPC reals (tanh-transformed, row-major)."""
    r, c, gather, eye, _, _, _ = _corr_constants(K)
    z = tanh(x)
    two = 2.0 * x
    w = (log_inv_logit(two) + log1m_inv_logit(two)) + _LOG4     # log(1 - tanh(x)^2)
    Z = _to_square(z, gather, batch, K)
    W = _to_square(w, gather, batch, K)
    # S[i, j] = sum_{j' < j} log(1 - z_ij'^2): log of the squared length left in row i
    cs = cumulative_sum(W, axis=-1)
    S = concatenate([np.zeros(batch + (K, 1)), cs[..., :-1]], axis=-1)
    L = (Z + eye) * exp(0.5 * S)
    return L, w


def _corr_free_from_L(L, K):
    r, c = np.tril_indices(K, -1)
    sq = L * L
    before = np.cumsum(sq, axis=-1) - sq               # sum_{j' < j} L_ij'^2
    z = L[..., r, c] / np.sqrt(1.0 - before[..., r, c])
    return np.arctanh(z)


def _square_dims(name, dims):
    if dims[0] != dims[1]:
        raise ValueError(f"{name}: needs a square shape, got {dims}")


def _lower_tri_message(v):
    K0, K1 = v.shape[-2:]
    upper = np.triu(np.ones((K0, K1), dtype=bool), 1)
    i = _first((v != 0) & upper)
    if i is not None:
        return f"must be lower triangular, but {_loc(i)}is {_num(v[i])}"
    return None


def _diag_positive_message(v):
    d = np.diagonal(v, axis1=-2, axis2=-1)
    i = _first(~(d > 0))
    if i is not None:
        j = i + (i[-1],)
        return f"must have a positive diagonal, but {_loc(j)}is {_num(v[j])}"
    return None


def _symmetric_message(v):
    t = np.swapaxes(v, -1, -2)
    i = _first(np.abs(v - t) > CONSTRAINT_TOLERANCE)
    if i is not None:
        j = i[:-2] + (i[-1], i[-2])
        return (f"must be symmetric (within {CONSTRAINT_TOLERANCE:g}), but {_loc(i)}is "
                f"{_num(v[i])} and {_loc(j)}is {_num(v[j])}")
    return None


def _pos_def_message(v):
    try:
        np.linalg.cholesky(0.5 * (v + np.swapaxes(v, -1, -2)))
    except np.linalg.LinAlgError:
        return "must be positive definite, but is not"
    return None


class CholeskyFactorCorr(_Structured):
    """Cholesky factor of a correlation matrix from ``K(K-1)/2`` free reals.

    The free reals are mapped by ``tanh`` to canonical partial correlations ``z_ij`` in
    (-1, 1) (row-major over the strictly lower triangle), then
    ``L_ij = z_ij sqrt(1 - sum_{j'<j} L_ij'^2)`` for ``j < i`` and
    ``L_ii = sqrt(1 - sum_{j<i} L_ij^2)``. The log Jacobian of the strictly lower
    entries is ``sum_{i>j} log(1 - z_ij^2) (1 + (i - j - 1)/2)`` (0-based), computed in
    closed form (vectorized, no loop over K). Flat in ``x + log_jac`` means flat in
    ``L``; LKJ(1) on ``L L^T`` needs ``lkj_corr_cholesky_lpdf(L, 1)`` on top, as in Stan.

    >>> import numpy as np
    >>> L, lj = CholeskyFactorCorr().constrain(np.array([np.arctanh(0.6)]), (2, 2))
    >>> np.round(L, 12)
    array([[1. , 0. ],
           [0.6, 0.8]])
    """

    name = "cholesky_factor_corr"
    core = 2

    def _check_dims(self, dims):
        _square_dims(self.name, dims)

    def _core_free(self, dims):
        return dims[0] * (dims[0] - 1) // 2

    def _constrain(self, x, batch, dims):
        K = dims[0]
        L, w = _corr_cholesky(x, batch, K)
        coef = _corr_constants(K)[4]
        return L, _sum(w * coef)

    def _violation(self, v, dims):
        msg = (_nan_message(v) or _lower_tri_message(v) or _diag_positive_message(v))
        if msg:
            return msg
        s = np.sum(v * v, axis=-1)
        i = _first(~(np.abs(s - 1.0) <= CONSTRAINT_TOLERANCE))
        if i is not None:
            return (f"must have rows of unit length (within {CONSTRAINT_TOLERANCE:g} on the "
                    f"squared norm), but row {_idx(i)} has squared norm {_num(s[i])}")
        return None

    def _unconstrain(self, v, dims):
        return _corr_free_from_L(v, dims[0])


class CorrMatrix(_Structured):
    """Correlation matrix ``Omega = L L^T`` with ``L`` from :class:`CholeskyFactorCorr`
    (``K(K-1)/2`` free reals). The log Jacobian of the strictly lower entries of
    ``Omega`` is ``sum_{i>j} log(1 - z_ij^2) (1 + (K - j - 2)/2)`` (0-based ``j``): the
    tanh term plus the CPC-to-correlation term of Lewandowski, Kurowicka and Joe (2009).
    A flat density in ``x + log_jac`` is LKJ(1), uniform over correlation matrices.
    """

    name = "corr_matrix"
    core = 2

    def _check_dims(self, dims):
        _square_dims(self.name, dims)

    def _core_free(self, dims):
        return dims[0] * (dims[0] - 1) // 2

    def _constrain(self, x, batch, dims):
        K = dims[0]
        L, w = _corr_cholesky(x, batch, K)
        _, _, _, eye, _, coef, lower = _corr_constants(K)
        om = multiply_lower_tri_self_transpose(L)
        om = where(lower, om, where(lower.T, swapaxes(om, -1, -2), 1.0))
        return om, _sum(w * coef)

    def _violation(self, v, dims):
        msg = _nan_message(v) or _symmetric_message(v)
        if msg:
            return msg
        d = np.diagonal(v, axis1=-2, axis2=-1)
        i = _first(~(np.abs(d - 1.0) <= CONSTRAINT_TOLERANCE))
        if i is not None:
            j = i + (i[-1],)
            return (f"must have a unit diagonal (within {CONSTRAINT_TOLERANCE:g}), but "
                    f"{_loc(j)}is {_num(v[j])}")
        return _pos_def_message(v)

    def _unconstrain(self, v, dims):
        L = np.linalg.cholesky(0.5 * (v + np.swapaxes(v, -1, -2)))
        return _corr_free_from_L(L, dims[0])


@lru_cache(maxsize=64)
def _chol_constants(M, N):
    """Index tables for an M x N Cholesky factor (Stan's row-major order)."""
    r, c = np.tril_indices(M, 0, N)
    n = r.size
    diag = np.flatnonzero(r == c)                      # positions of L_kk in x
    gather = np.full(M * N, n + N, dtype=np.intp)      # slot n + N holds a zero
    gather[r * N + c] = np.arange(n)
    gather[np.arange(N) * (N + 1)] = n + np.arange(N)
    lower = np.tril(np.ones((M, N), dtype=bool), -1)
    for a in (r, c, diag, gather, lower):
        a.setflags(write=False)
    return r, c, diag, gather, lower


def _chol_factor(x, batch, M, N):
    """(L, the free diagonal reals) for an M x N Cholesky factor."""
    _, _, diag, gather, _ = _chol_constants(M, N)
    xd = x[..., diag]
    ext = concatenate([x, exp(xd), np.zeros(batch + (1,))], axis=-1)
    return reshape(ext[..., gather], batch + (M, N)), xd


def _chol_free(L, M, N):
    r, c, diag, _, _ = _chol_constants(M, N)
    x = L[..., r, c].copy()
    x[..., diag] = np.log(x[..., diag])
    return x


class CholeskyFactorCov(_Structured):
    """Cholesky factor of a covariance matrix, shape ``(M, N)`` with ``M >= N``:
    ``N(N+1)/2 + (M-N)N`` free reals filled row by row into the lower trapezoid, the
    diagonal as ``exp``; ``log_jac`` is the sum of the free diagonal reals.

    >>> import numpy as np
    >>> CholeskyFactorCov().constrain(np.array([0.0, 2.0, 0.0]), (2, 2))[0]
    array([[1., 0.],
           [2., 1.]])
    """

    name = "cholesky_factor_cov"
    core = 2

    def _check_dims(self, dims):
        if dims[0] < dims[1]:
            raise ValueError(f"{self.name}: needs rows >= columns, got shape {dims}")

    def _core_free(self, dims):
        M, N = dims
        return N * (N + 1) // 2 + (M - N) * N

    def _constrain(self, x, batch, dims):
        L, xd = _chol_factor(x, batch, *dims)
        return L, _sum(xd)

    def _violation(self, v, dims):
        return _nan_message(v) or _lower_tri_message(v) or _diag_positive_message(v)

    def _unconstrain(self, v, dims):
        return _chol_free(v, *dims)


class CovMatrix(_Structured):
    """Covariance matrix ``Sigma = L L^T`` with ``L`` lower triangular and a log-scale
    diagonal (``K + K(K-1)/2`` free reals, Stan's order). The log Jacobian of the lower
    triangle of ``Sigma`` is ``K log 2 + sum_k (K - k + 2) log L_kk`` (1-based ``k``).

    >>> import numpy as np
    >>> S, lj = CovMatrix().constrain(np.array([0.0, 1.0, 0.0]), (2, 2))
    >>> S
    array([[1., 1.],
           [1., 2.]])
    """

    name = "cov_matrix"
    core = 2

    def _check_dims(self, dims):
        _square_dims(self.name, dims)

    def _core_free(self, dims):
        K = dims[0]
        return K + K * (K - 1) // 2

    def _constrain(self, x, batch, dims):
        K = dims[0]
        L, xd = _chol_factor(x, batch, K, K)
        lower = _chol_constants(K, K)[4]
        S = multiply_lower_tri_self_transpose(L)
        S = where(lower.T, swapaxes(S, -1, -2), S)     # exactly symmetric
        coef = K + 1.0 - np.arange(K)                  # K - k + 2 for 1-based k
        return S, _sum(xd * coef) + _LOG2 * K * _size(batch)

    def _violation(self, v, dims):
        return _nan_message(v) or _symmetric_message(v) or _pos_def_message(v)

    def _unconstrain(self, v, dims):
        K = dims[0]
        L = np.linalg.cholesky(0.5 * (v + np.swapaxes(v, -1, -2)))
        return _chol_free(L, K, K)


# --------------------------------------------------------------------------------------
# sum-to-zero vectors and stochastic matrices
# --------------------------------------------------------------------------------------
@lru_cache(maxsize=64)
def _zero_sum_basis(K):
    """The ``(K - 1) x K`` matrix whose rows are an orthonormal basis of the vectors
    summing to zero (Stan 2.36's "pivot coordinates"): row ``i`` (1-based) holds
    ``1/sqrt(i(i+1))`` in its first ``i`` places, ``-i/sqrt(i(i+1))`` in place
    ``i + 1`` and zeros after."""
    B = np.zeros((max(K - 1, 0), K))
    for i in range(1, K):
        a = 1.0 / np.sqrt(i * (i + 1.0))
        B[i - 1, :i] = a
        B[i - 1, i] = -i * a
    B.setflags(write=False)
    return B


class SumToZero(_Structured):
    """Stan's ``sum_to_zero_vector[K]`` (Stan 2.36's isometric transform): ``K - 1``
    free reals are the coordinates of ``y`` in the orthonormal basis of the
    hyperplane ``sum(y) = 0`` given by :func:`_zero_sum_basis`, ``y = x B``. The map
    is linear and an isometry onto the hyperplane, so ``log_jac = 0`` (as in Stan):
    a standard normal on ``x`` is a normal on ``y`` with marginal variances
    ``(K - 1) / K``.

    >>> import numpy as np
    >>> y, lj = SumToZero().constrain(np.array([1.0, 2.0]), (3,))
    >>> round(float(y.sum()), 12), lj
    (0.0, 0.0)
    """

    name = "sum_to_zero_vector"

    def _check_dims(self, dims):
        if dims[0] < 1:
            raise ValueError("sum_to_zero_vector: needs at least 1 element")

    def _core_free(self, dims):
        return dims[0] - 1

    def _constrain(self, x, batch, dims):
        K = dims[0]
        if K == 1:
            return np.zeros(batch + (1,)), 0.0
        return matmul(x, _zero_sum_basis(K)), 0.0

    def _violation(self, v, dims):
        msg = _nan_message(v)
        if msg:
            return msg
        s = np.sum(v, axis=-1)
        i = _first(~(np.abs(s) <= CONSTRAINT_TOLERANCE))
        if i is not None:
            at = f" at {_idx(i)}" if i else ""
            return (f"must sum to 0 (within {CONSTRAINT_TOLERANCE:g}), but the sum{at} "
                    f"is {_num(s[i])}")
        return None

    def _unconstrain(self, v, dims):
        return v @ _zero_sum_basis(dims[0]).T


class RowStochastic(_Structured):
    """Stan's ``row_stochastic_matrix[N, M]``: each row a simplex (the
    :class:`Simplex` transform per row, all rows at once), ``N (M - 1)`` free reals,
    row by row (each row's ``M - 1`` together; Stan orders them column-major);
    ``log_jac`` is the sum of the rows' simplex terms.

    >>> import numpy as np
    >>> RowStochastic().constrain(np.zeros(2), (2, 2))[0]
    array([[0.5, 0.5],
           [0.5, 0.5]])
    """

    name = "row_stochastic_matrix"
    core = 2
    _simplex = Simplex()

    def _check_dims(self, dims):
        if dims[1] < 1:
            raise ValueError(f"{self.name}: needs at least 1 column")

    def _core_free(self, dims):
        return dims[0] * (dims[1] - 1)

    def _constrain(self, x, batch, dims):
        N, M = dims
        return self._simplex._constrain(reshape(x, batch + (N, M - 1)), batch + (N,),
                                        (M,))

    def _violation(self, v, dims):
        return _stochastic_message(v, -1, "row")

    def _unconstrain(self, v, dims):
        return self._simplex._unconstrain(v, (dims[1],))


class ColumnStochastic(RowStochastic):
    """Stan's ``column_stochastic_matrix[N, M]``: each column a simplex, ``(N - 1) M``
    free reals, column by column (as Stan's column-major order); the simplex
    transform on the transpose."""

    name = "column_stochastic_matrix"

    def _check_dims(self, dims):
        if dims[0] < 1:
            raise ValueError(f"{self.name}: needs at least 1 row")

    def _core_free(self, dims):
        return (dims[0] - 1) * dims[1]

    def _constrain(self, x, batch, dims):
        N, M = dims
        y, lj = self._simplex._constrain(reshape(x, batch + (M, N - 1)), batch + (M,),
                                         (N,))
        return swapaxes(y, -1, -2), lj

    def _violation(self, v, dims):
        return _stochastic_message(v, -2, "column")

    def _unconstrain(self, v, dims):
        return self._simplex._unconstrain(np.swapaxes(v, -1, -2), (dims[0],))


def _stochastic_message(v, axis, what):
    """Why ``v`` is not row- (``axis=-1``) or column- (``axis=-2``) stochastic."""
    msg = _nan_message(v)
    if msg:
        return msg
    i = _first(v < 0)
    if i is not None:
        return f"must be >= 0, but {_loc(i)}is {_num(v[i])}"
    s = np.sum(v, axis=axis)
    i = _first(np.abs(s - 1.0) > CONSTRAINT_TOLERANCE)
    if i is None:
        return None
    # i indexes the batch and then the row (column) whose sum is off
    where = f"{what} {i[-1]}" + (f" of {_idx(i[:-1])}" if len(i) > 1 else "")
    return (f"must have each {what} sum to 1 (within {CONSTRAINT_TOLERANCE:g}), but "
            f"{where} sums to {_num(s[i])}")


# --------------------------------------------------------------------------------------
# the factory
# --------------------------------------------------------------------------------------
ELEMENTWISE_KINDS = ("real", "int", "vector", "row_vector", "matrix", "array")
STRUCTURED_KINDS = {
    "simplex": Simplex, "ordered": Ordered, "positive_ordered": PositiveOrdered,
    "unit_vector": UnitVector, "cholesky_factor_corr": CholeskyFactorCorr,
    "cholesky_factor_cov": CholeskyFactorCov, "corr_matrix": CorrMatrix,
    "cov_matrix": CovMatrix, "sum_to_zero_vector": SumToZero,
    "row_stochastic_matrix": RowStochastic,
    "column_stochastic_matrix": ColumnStochastic,
}


def _is_numeric(v):
    if isinstance(v, (str, bytes)) or callable(v) or isinstance(v, Box):
        return False
    try:
        np.asarray(v, dtype=float)
    except (TypeError, ValueError):
        return False
    return True


def make(kind, lower=None, upper=None, offset=None, multiplier=None):
    """The transform for a declaration of ``kind`` with the given bounds.

    ``kind`` is one of ``ELEMENTWISE_KINDS`` (bounds and offset/multiplier apply
    elementwise) or a structured kind (``"simplex"``, ``"ordered"``,
    ``"positive_ordered"``, ``"unit_vector"``, ``"cholesky_factor_corr"``,
    ``"cholesky_factor_cov"``, ``"corr_matrix"``, ``"cov_matrix"``,
    ``"sum_to_zero_vector"``, ``"row_stochastic_matrix"``,
    ``"column_stochastic_matrix"``), which take no
    bounds. Bounds may be numbers, arrays, or anything the caller evaluates later (a
    data name, a callable); they only decide the transform and serve as defaults.
    Numeric ``lower >= upper`` or a non-positive numeric multiplier raises ``ValueError``.

    >>> make("real", lower=0, upper=1)
    LowerUpper(lower=0, upper=1)
    >>> make("simplex")
    Simplex()
    >>> make("real", lower=2, upper=1)
    Traceback (most recent call last):
    ...
    ValueError: real: lower bound 2 must be less than upper bound 1
    """
    k = str(kind).lower()
    bounded = lower is not None or upper is not None
    affine = offset is not None or multiplier is not None
    if k in STRUCTURED_KINDS:
        if bounded or affine:
            raise ValueError(f"{k}: a {k} takes no lower/upper/offset/multiplier")
        return STRUCTURED_KINDS[k]()
    if k not in ELEMENTWISE_KINDS:
        raise ValueError(f"unknown kind {kind!r}; expected one of "
                         f"{ELEMENTWISE_KINDS + tuple(STRUCTURED_KINDS)}")
    if bounded and affine:
        raise ValueError(f"{k}: lower/upper cannot be combined with offset/multiplier")
    if lower is not None and upper is not None:
        if _is_numeric(lower) and _is_numeric(upper):
            lv, uv = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
            try:
                bad = ~(lv < uv)
            except ValueError:
                raise ValueError(f"{k}: lower bound of shape {lv.shape} and upper bound of "
                                 f"shape {uv.shape} do not broadcast")
            i = _first(bad)
            if i is not None:
                lb, ub = np.broadcast_arrays(lv, uv)
                at = f" at {_idx(i)}" if i else ""
                raise ValueError(f"{k}: lower bound {_num(lb[i])} must be less than upper "
                                 f"bound {_num(ub[i])}{at}")
        return LowerUpper(lower, upper)
    if lower is not None:
        return Lower(lower)
    if upper is not None:
        return Upper(upper)
    if affine:
        if multiplier is not None and _is_numeric(multiplier):
            mv = np.asarray(multiplier, dtype=float)
            i = _first(~(np.isfinite(mv) & (mv > 0)))
            if i is not None:
                raise ValueError(f"{k}: the multiplier must be positive and finite, but "
                                 f"{_loc(i)}is {_num(mv[i])}")
        return OffsetMultiplier(offset, multiplier)
    return Identity()
