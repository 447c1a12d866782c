"""The parameter layout: where each parameter's free values sit in the unconstrained
vector, and how they are constrained and unconstrained.

The unconstrained point ``x`` (length ``dim``) holds the parameters' free
coordinates concatenated in declaration order. :class:`ParamLayout` is built once
per model (:class:`~stanlite.Model` delegates to it) from the parameter
declarations and the data scope; it cuts ``x`` into one piece per parameter
(:meth:`ParamLayout.pieces`, described for :func:`stanlite.compile` by
:attr:`ParamLayout.inputs`), maps the pieces to the constrained values and the
log-Jacobian (:meth:`ParamLayout.constrain_pieces`), maps constrained values back
(:meth:`ParamLayout.unconstrain`) and names the coordinates Stan's way (1-based,
row-major).

>>> import stanlite as sl
>>> from stanlite.layout import ParamLayout
>>> lay = ParamLayout({"mu": sl.param.real(), "s": sl.param.vector(2, lower=0)}, {})
>>> lay.dim, lay.inputs, lay.unconstrained_param_names()
(3, [(0, 1, ()), (1, 3, (2,))], ['mu', 's[1]', 's[2]'])
"""

import numpy as np

from .autodiff.extend import reshape
from .autodiff.var import value_of
from .declarations import argument_names
from .errors import DataError

__all__ = ["ParamLayout", "element_names"]


def element_names(name, shape):
    """Stan-style element names in row-major order: ``theta[1]``, ``L[2,1]``."""
    if not shape:
        return [name]
    idx = np.indices(shape).reshape(len(shape), -1).T + 1
    return [f"{name}[{','.join(map(str, i))}]" for i in idx]


_FREE, _SCALAR, _SHAPED = 0, 1, 2      # how a parameter's free values are cut from x


class _ParamSlot:
    """One parameter: its place in the unconstrained vector and how to constrain it.

    ``bounds`` holds the evaluated bounds when they are fixed (numbers, data, absent),
    ``None`` when some bound depends on earlier parameters (evaluated per point);
    ``shaped`` is the transform's shortcut for fixed numeric bounds (it takes the free
    values already shaped like the parameter), ``None`` where there is none.
    """

    __slots__ = ("name", "decl", "transform", "shape", "start", "stop", "bounds",
                 "shaped", "kind", "free_shape")

    def __init__(self, name, decl, shape, start):
        self.name = name
        self.decl = decl
        self.transform = decl.transform()
        self.shape = shape
        self.start = start
        self.stop = start + self.transform.free_size(shape)
        self.bounds = None
        self.shaped = None
        self.kind = _FREE
        self.free_shape = None

    def plan(self, data, param_names):
        """Fix what does not change between evaluations (bounds given as numbers,
        data names or callables of data only: evaluated once, here) and choose how
        the free values are cut from the vector."""
        fixed = True
        for k in self.transform.bound_names:
            b = getattr(self.decl, k)
            if isinstance(b, str):
                fixed = fixed and b in data and b not in param_names
            elif callable(b):
                fixed = fixed and all(n in data and n not in param_names
                                      for n in argument_names(b))
        if fixed:
            self.bounds = self.decl.bound_args(data)
            fast = self.transform.shaped_constrain(self.shape, *self.bounds)
            if fast is not None:
                self.shaped, self.free_shape = fast
                if self.free_shape == ():
                    self.kind = _SCALAR
                elif len(self.free_shape) > 1:
                    self.kind = _SHAPED
                # else _FREE: the free vector is already in the shape it takes

    def piece(self, x):
        """This parameter's part of the unconstrained point ``x`` (plain or traced),
        in the form its constrain step takes."""
        kind = self.kind
        if kind == _SCALAR:
            if type(x) is np.ndarray:
                return float(x[self.start])
            return x[self.start]
        p = x[self.start:self.stop]
        if kind == _SHAPED:
            fs = self.free_shape
            return p.reshape(fs) if type(p) is np.ndarray else reshape(p, fs)
        return p

    def piece_shape(self):
        """The shape of :meth:`piece` of a plain point: ``()`` for a float."""
        if self.kind == _SCALAR:
            return ()
        if self.kind == _SHAPED:
            return tuple(self.free_shape)
        return (self.stop - self.start,)


class ParamLayout:
    """The parameters of one model laid out on the unconstrained space.

    ``decls``: ``{Stan name: ParamDecl}`` in declaration order; ``scope``: what sizes
    and bounds may name (the data by Stan and Python names, the transformed data).
    Sizes and data bounds are checked here, once (a DataError or ModelError now, not
    at a gradient). Attributes: ``slots`` (one :class:`_ParamSlot` per parameter),
    ``dim``, ``names`` (frozenset of Stan names), ``aliases`` (Python name -> Stan
    name, for parameters declared with ``name=``), ``dynamic`` (some bound depends on
    earlier parameters: evaluated per point)."""

    def __init__(self, decls, scope):
        self.scope = scope
        slots = []
        k = 0
        for name, decl in decls.items():
            shape = decl.shape(scope)              # sizes named, memory checked
            decl.free_size(shape)                  # a shape the constraint can take
            s = _ParamSlot(name, decl, shape, k)
            k = s.stop
            slots.append(s)
        self.slots = slots
        self.dim = k
        names = frozenset(s.name for s in slots)
        refs = names | frozenset(s.decl.attr for s in slots)
        for s in slots:
            s.decl.check_bounds(s.shape, scope, refs)  # data bounds: now, not at a gradient
            s.plan(scope, refs)
        self.names = names
        self.aliases = {s.decl.attr: s.name for s in slots if s.decl.attr != s.name}
        # the env of data and earlier parameters is built per point only if some bound
        # is a function of earlier parameters
        self.dynamic = any(s.bounds is None for s in slots)
        #: ``[(start, stop, shape)]``: :meth:`pieces` described for
        #: :func:`stanlite.compile`'s ``inputs`` (shape ``()``: a float)
        self.inputs = [(s.start, s.stop, s.piece_shape()) for s in slots]

    # ---- cutting x ---------------------------------------------------------------------
    def pieces(self, x):
        """Each parameter's part of ``x`` (plain or traced), as its constrain step
        takes it: a float for a scalar with a shortcut, else a slice of ``x`` (shaped
        where the shortcut takes a shape)."""
        return [s.piece(x) for s in self.slots]


    # ---- constrained <-> unconstrained -------------------------------------------------
    def constrain_pieces(self, pieces, jacobian):
        """The constrained parameters (dict) and the summed log-Jacobian, from each
        parameter's part of the unconstrained point (:meth:`pieces`)."""
        env = dict(self.scope) if self.dynamic else None
        params = {}
        lj = 0.0
        for s, xi in zip(self.slots, pieces):
            if s.shaped is not None:
                y, j = s.shaped(xi)
            else:
                bounds = s.bounds if s.bounds is not None else s.decl.bound_args(env)
                y, j = s.transform.constrain(xi, s.shape, *bounds)
            # zeros (unbounded parameters) are not added: lj + 0.0 is lj
            if jacobian and not (type(j) is float and j == 0.0):
                lj = j if type(lj) is float and lj == 0.0 else lj + j
            if env is not None:
                env[s.name] = env[s.decl.attr] = y
            params[s.name] = y
        return params, lj

    def unconstrain(self, values, fill=None, label="parameter {name!r}", error=DataError,
                    strict=False):
        """The unconstrained point of ``values`` (a dict of constrained values, each
        checked against its constraint); see :meth:`stanlite.Model.unconstrain`. Errors
        are of class ``error`` and start with ``label`` (formatted with the
        parameter's ``name`` and declaration ``decl``); ``strict`` also rejects
        booleans and infinite values (an init: Stan would reject it at the first
        evaluation, less clearly)."""
        if not isinstance(values, dict):
            raise error(f"{label.format(name='values', decl='')}: expected a dict of "
                        f"parameter values, got {type(values).__name__}"
                        if strict else f"unconstrain expects a dict of parameter values, "
                        f"got {type(values).__name__}")
        if fill is not None:
            fill = np.asarray(fill, dtype=np.float64)
            if fill.shape != (self.dim,):
                raise ValueError(f"fill must be an unconstrained point of shape "
                                 f"({self.dim},), got {fill.shape}")
        env = dict(self.scope)
        out = np.empty(self.dim)
        for s in self.slots:
            bounds = [_plain(b) for b in s.decl.bound_args(env)]
            if s.name not in values:
                if fill is None:
                    raise error(f"{label.format(name=s.name, decl=s.decl.describe(s.shape))}"
                                f" has no value (expected {s.decl.describe(s.shape)})")
                out[s.start:s.stop] = fill[s.start:s.stop]
                if self.dynamic:           # later bounds may depend on this parameter
                    piece = s.piece(fill)
                    y, _ = (s.shaped(piece) if s.shaped is not None else
                            s.transform.constrain(piece, s.shape, *bounds))
                    env[s.name] = env[s.decl.attr] = _plain(y)
                continue
            where = label.format(name=s.name, decl=s.decl.describe(s.shape))
            v = _given_value(s, values[s.name], where, error, strict)
            msg = s.transform.check(v if v.ndim else float(v), s.shape, *bounds)
            if msg:
                raise error(f"{where}: {msg}")
            out[s.start:s.stop] = s.transform.unconstrain(v if v.ndim else float(v),
                                                           s.shape, *bounds)
            if strict and not np.all(np.isfinite(out[s.start:s.stop])):
                raise error(f"{where}: {_plain(v)} is on the boundary of the support (its "
                            "unconstrained value is infinite); give a value strictly "
                            "inside")
            env[s.name] = env[s.decl.attr] = v if v.ndim else float(v)
        return out

    def constrain_draws(self, X):
        """The parameters at every row of ``X`` (draws x dim), ``{name: (draws,
        *shape)}``, bit for bit as :meth:`constrain_pieces` draw by draw, or None when
        a bound depends on other parameters or a transform is not elementwise (see
        ``Model._constrain_draws``)."""
        if self.dynamic or any(s.shaped is None or not getattr(s.shaped, "elementwise",
                                                                False)
                               for s in self.slots):
            return None
        n = X.shape[0]
        out = {}
        for s in self.slots:
            cols = X[:, s.start:s.stop]
            f = s.shaped
            if getattr(f, "identity", False):
                y = cols.copy()
            elif s.kind == _SCALAR:
                xs = cols[:, 0].tolist()
                each = getattr(f, "scalars", None)     # (the same numbers, cheaper)
                y = np.array(each(xs) if each is not None else [f(v)[0] for v in xs],
                             dtype=float)
            else:
                y = np.asarray(f(np.ascontiguousarray(cols).reshape(
                    (n,) + tuple(s.free_shape)))[0], dtype=float)
            out[s.name] = y.reshape((n,) + tuple(s.shape))
        return out

    # ---- names -------------------------------------------------------------------------
    def shapes(self):
        """``{name: shape}`` of the (constrained) parameters, in declaration order."""
        return {s.name: s.shape for s in self.slots}

    def param_names(self):
        """Element names of the constrained parameters, Stan-style and 1-based."""
        names = []
        for s in self.slots:
            names += element_names(s.name, s.shape)
        return names

    def unconstrained_param_names(self):
        """Names of the unconstrained coordinates (``theta[1]`` ... per free entry)."""
        names = []
        for s in self.slots:
            n = s.stop - s.start
            names += [s.name] if (n == 1 and not s.shape) else \
                [f"{s.name}[{i + 1}]" for i in range(n)]
        return names

    def describe(self):
        """``"mu: real, sigma: real<lower=0>"``: each parameter with its declaration."""
        return ", ".join(f"{s.name}: {s.decl.describe(s.shape)}" for s in self.slots)


def _given_value(s, raw, where, error, strict):
    """A given constrained value of slot ``s`` as a float array of its shape (checks of
    :meth:`ParamLayout.unconstrain`, before the constraint's own)."""
    if strict and _masked(raw):
        # np.asarray would read the hidden values under the mask
        raise error(f"{where}: has masked (missing) values, which are not "
                    "supported: give every value")
    try:
        v = np.asarray(raw, dtype=np.float64)
    except OverflowError:
        raise error(f"{where}: {raw!r} is too large for a float64") from None
    except (TypeError, ValueError):
        raise error(f"{where}: expected real values, got {raw!r}") from None
    if strict and _not_numbers(raw):
        raise error(f"{where}: expected real values, got {raw!r}")
    if v.shape != s.shape:
        if v.size == 1 and int(np.prod(s.shape, dtype=np.int64)) == 1:
            v = v.reshape(s.shape)
        else:
            raise error(f"{where}: expected shape {s.shape}, got {v.shape}")
    if strict and np.isinf(v).any():
        i = np.unravel_index(np.argmax(np.isinf(v)), v.shape)
        at = f"element {list(i)} " if v.ndim else ""
        raise error(f"{where}: must be finite, but {at}is {v[i]}")
    return v


def _masked(raw):
    """Whether ``raw`` is a masked array or holds ``np.ma.masked`` elements."""
    if isinstance(raw, np.ma.MaskedArray):
        return True
    if isinstance(raw, (list, tuple)):
        return any(_masked(e) for e in raw)
    return False


def _not_numbers(raw):
    """Whether ``raw`` holds strings or booleans, which ``np.asarray(raw, float)``
    would silently read as numbers ("0" -> 0.0, True -> 1.0)."""
    if isinstance(raw, np.ndarray) and raw.dtype.kind != "O":
        return raw.dtype.kind in "USb"
    # lists (a list of numbers and True is a float array to numpy), objects
    return any(isinstance(e, (str, bytes, bool, np.bool_))
               for e in np.asarray(raw, dtype=object).ravel())


def _plain(v):
    """``v`` on plain numbers: an array copied, a number a float, others as they are."""
    v = value_of(v)
    if isinstance(v, np.ndarray):
        return v.copy()
    return float(v) if isinstance(v, (float, int, np.floating, np.integer)) else v
