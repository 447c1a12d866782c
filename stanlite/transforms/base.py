"""The transform interface and what every transform shares.

:class:`Transform` is the small interface the model layer codes against (see the
package docstring: ``free_size``, ``constrain``, ``unconstrain``, ``check``,
``check_bounds``, ``shaped_constrain``); :class:`_Structured` is the shared half of
the structured transforms (the object is the trailing one or two axes of the shape,
leading axes an array of such objects, all computed at once). Beside them: the
argument coercions (``_as_free``, ``_as_value``) and the pieces of the messages that
``check`` returns (``_num``, ``_loc``, ``_first``), so that every transform words its
violations the same way.
"""

from math import prod as _prod

import numpy as np

from ..autodiff import Box, value_of
from ..autodiff.var import shape_of
from ..errors import DomainError
from ..math import reshape
from ..math import sum as _sum


CONSTRAINT_TOLERANCE = 1e-8   # Stan's tolerance for sums, unit lengths and symmetry


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


def _nan_message(v):
    i = _first(np.isnan(v))
    return None if i is None else f"{_loc(i)}is nan"


def _is_numeric(v):
    if isinstance(v, (str, bytes)) or callable(v) or isinstance(v, Box):
        return False
    try:
        np.asarray(v, dtype=float)
    except (TypeError, ValueError):
        return False
    return True


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

    def __init__(self, **declared):
        # a subclass passes its constructor's bounds, by name (Lower(lower=...))
        self.declared = declared

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
