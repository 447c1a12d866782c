"""Structural primitives: indexing, reshaping, transposing, joining, selecting.

None of these do arithmetic; their adjoints move values around:

* ``x[idx]``       adjoint: scatter-add ``g`` into zeros of ``x``'s shape at ``idx``
  (``np.add.at`` when an integer array may repeat positions);
* ``reshape``      adjoint: reshape back; ``transpose``: the inverse permutation;
* ``concatenate``/``stack``: slice the adjoint back into the pieces;
* ``where(c, a, b)``: route the adjoint by the (constant) condition.

Scatter-add and gather are each other's transpose, so both are primitives: that
keeps the reverse sweep of an indexing operation differentiable (nested AD).
All of these are linear, so in forward mode the tangent goes through the same
operation, its axes shifted past the leading batch axes of vector mode.
The first-order sweep of ``x[i]`` adds into the input's adjoint in place (when the
sweep owns that buffer) so a Python loop over ``x[i]`` costs O(1) per element.
"""

import numpy as np

from ..autodiff.extend import (_tag, accumulate, batch_shape, defjvp, defjvp_all, defvjp,
                               primitive)
from ..autodiff import library as _library
from ..autodiff.operators import register as register_operators
from ..autodiff.var import FUNCTIONS, Box, Var, make_node, shape_of
# the interpreter's lowerings (autodiff/vm): data movement as one gather (movement),
# scatter_add as a segment sum
from ..autodiff.vm.program import (deflower as _deflower, movement as _lm,
                                   scatter_add_rule as _lsa)

__all__ = ["getitem", "scatter_add", "reshape", "flatten", "transpose", "concatenate",
           "stack", "where", "append_row", "append_col", "head", "tail", "segment",
           "rep_vector", "rep_matrix", "rep_array", "to_vector", "swapaxes", "squeeze",
           "expand_dims"]


def _check_index(idx):
    items = idx if type(idx) is tuple else (idx,)
    for it in items:
        if isinstance(it, Box):
            raise TypeError("indexing with a stanlite Var is not differentiable; "
                            "index with ints, slices or integer/boolean arrays")


def _is_basic(idx):
    t = type(idx)
    if t is int or t is slice or idx is None or idx is Ellipsis:
        return True
    if t is tuple:
        for it in idx:
            ti = type(it)
            if not (ti is int or ti is slice or it is None or it is Ellipsis
                    or isinstance(it, (np.integer,))):
                return False
        return True
    if isinstance(idx, np.integer):
        return True
    if isinstance(idx, np.ndarray) and idx.dtype == bool:
        return True  # a mask selects each element at most once
    return False


def _getitem_raw(x, idx):
    if type(x) is float:
        x = np.asarray(x)  # a 0-d value: x[()], x[None], x[...] as numpy allows
    r = x[idx]
    if type(r) is np.float64:
        return float(r)
    return r


def _scatter_add_raw(g, idx, shape):
    """zeros(shape) with ``g`` added at ``idx`` (repeated positions accumulate)."""
    z = np.zeros(shape)
    if _is_basic(idx):
        z[idx] += g
    else:
        np.add.at(z, idx, g)
    return z


getitem = primitive(_getitem_raw, name="getitem")
scatter_add = primitive(_scatter_add_raw, name="scatter_add")
defvjp(getitem, lambda g, ans, x, idx: scatter_add(g, idx, shape_of(x)), None)
defvjp(scatter_add, lambda g, ans, gg, idx, shape: getitem(g, idx), None, None)


def _batched_index(idx, nb):
    """``idx`` applied after ``nb`` leading batch axes."""
    if nb == 0:
        return idx
    lead = (slice(None),) * nb
    return lead + (idx if type(idx) is tuple else (idx,))


def _is_array_index(it):
    return type(it) is list or isinstance(it, np.ndarray)


def _separated(idx):
    """Would numpy move the advanced-index axes of ``idx`` to the front?

    It does when the advanced indices (arrays, and ints once an array is present)
    are not next to each other; then leading batch axes would end up behind them.
    Conservative: ``None`` and ``...`` count as separators, 0-d arrays as advanced.
    """
    if type(idx) is not tuple or len(idx) < 3:
        return False
    if not any(_is_array_index(it) for it in idx):
        return False
    pos = [i for i, it in enumerate(idx)
           if _is_array_index(it) or isinstance(it, (int, np.integer))]
    return pos[-1] - pos[0] + 1 != len(pos)


def _explicit_ellipsis(idx, nd):
    """``idx`` with its ``...`` spelled out as slices (``nd``: the indexed rank), so
    that axes appended after the indexed ones are never touched by it."""
    if not any(it is Ellipsis for it in idx):
        return idx
    used = 0
    for it in idx:
        if it is None or it is Ellipsis or isinstance(it, (bool, np.bool_)):
            continue
        if type(it) is list:
            it = np.asarray(it)
        used += it.ndim if isinstance(it, np.ndarray) and it.dtype == bool else 1
    out = []
    for it in idx:
        out.extend((slice(None),) * (nd - used) if it is Ellipsis else (it,))
    return tuple(out)


def _to_back(t, nb):
    """Move the ``nb`` leading (batch) axes of ``t`` behind the others."""
    n = len(shape_of(t))
    return transpose(t, tuple(range(nb, n)) + tuple(range(nb)))


def _to_front(t, nb):
    """Move the ``nb`` trailing (batch) axes of ``t`` to the front."""
    n = len(shape_of(t))
    return transpose(t, tuple(range(n - nb, n)) + tuple(range(n - nb)))


# forward mode: gather and scatter are linear, so the tangent goes through the same op.
# The batch axes lead (``t[:, idx]``) unless numpy would move separated advanced
# indices in front of them; then they trail during the operation (trailing axes are
# never moved) and are brought back to the front.
def _getitem_jvp(t, ans, x, idx):
    nb = len(batch_shape(t, x))
    if nb and _separated(idx):
        nd = len(shape_of(x))
        return _to_front(getitem(_to_back(t, nb), _explicit_ellipsis(idx, nd)), nb)
    return getitem(t, _batched_index(idx, nb))


def _scatter_add_jvp(t, ans, gg, idx, shape):
    b = batch_shape(t, gg)
    nb = len(b)
    if nb and _separated(idx):
        idx = _explicit_ellipsis(idx, len(shape))
        return _to_front(scatter_add(_to_back(t, nb), idx, tuple(shape) + b), nb)
    return scatter_add(t, _batched_index(idx, nb), b + tuple(shape))


defjvp(getitem, _getitem_jvp, None)
defjvp(scatter_add, _scatter_add_jvp, None, None)
_deflower(getitem, _lm())
_deflower(scatter_add, _lsa)


def _bp_getitem(node, g):
    p = node.x
    idx = node.y
    tg = type(g)
    a = p.adj
    if (tg is float or tg is np.ndarray) and not isinstance(a, Box):
        # first-order sweep: add in place into a buffer this sweep owns
        owned = p.tape.owned
        ti = type(idx)
        basic = ti is int or ti is slice or _is_basic(idx)
        if a is None and basic:
            # first contribution through a basic index: copy into zeros (one pass less
            # than adding into them; basic indexing never repeats a position)
            a = np.zeros(p.value.shape)
            a[idx] = g
            p.adj = a
            owned[id(p)] = a
            return
        if a is None or owned.get(id(p)) is not a:
            if a is None:
                a = np.zeros(p.value.shape)
            elif type(a) is float:          # a lazily broadcast adjoint
                a = np.full(p.value.shape, a)
            else:
                a = np.array(a, dtype=float)
            p.adj = a
            owned[id(p)] = a
        if basic:
            a[idx] += g
        else:
            np.add.at(a, idx, g)
    else:
        accumulate(p, scatter_add(g, idx, shape_of(p.value)))


_new = object.__new__
_f64 = np.float64


# the node of x[idx] recorded with _bp_getitem is a plain getitem(x, idx) node: say so,
# for tools that read a tape back as (primitive, inputs) records
_tag(_bp_getitem, getitem._spec, lambda node: (node.x, node.y), "getitem")


def var_getitem(self, idx):
    """``v[idx]`` of a Var (its first-order fast path): basic, integer-array and
    boolean-mask indexing."""
    ti = type(idx)
    if ti is int or ti is slice:
        # the common case (x[0], x[2:]): nothing to check or convert
        v = self.value
        if type(v) is np.ndarray:
            r = v[idx]
            n = _new(Var)
            n.value = float(r) if type(r) is _f64 else r
            n.adj = None
            n.tape = t = self.tape
            n.bp = _bp_getitem
            n.x = self
            n.y = idx
            t.nodes.append(n)
            return n
        return getitem(self, idx)
    if ti is list:
        _check_index(tuple(idx))
        idx = np.asarray(idx)
        if idx.size == 0:
            idx = idx.astype(np.intp)  # x[[]]: an empty selection, not a float index
    _check_index(idx)
    v = self.value
    if type(v) is np.ndarray:
        return make_node(_getitem_raw(v, idx), self.tape, _bp_getitem, self, idx)
    return getitem(self, idx)


def checked_getitem(x, idx):
    """``x[idx]`` of any traced value (a ``Dual``, a ``Var`` of a lower level): the
    index checked, then the primitive."""
    if type(idx) is list:
        idx = np.asarray(idx)
    _check_index(idx)
    return getitem(x, idx)


# reshape is a core primitive (forward mode needs it for batch axes); re-exported here
from ..autodiff.extend import reshape  # noqa: E402


def flatten(x):
    """``x`` as a 1-D vector (row-major)."""
    return reshape(x, (-1,))


@primitive
def transpose(x, axes=None):
    """Permute axes (reverse them by default; negative axes allowed, as numpy); the
    adjoint applies the inverse permutation."""
    r = np.transpose(x, axes)
    return float(r) if r.ndim == 0 else r


def _transpose_vjp(g, ans, x, axes=None):
    if axes is None:
        return transpose(g)
    n = len(shape_of(x))
    return transpose(g, tuple(int(i) for i in np.argsort([int(a) % n for a in axes])))


defvjp(transpose, _transpose_vjp, None)


def _transpose_jvp(t, ans, x, axes=None):
    nb = len(batch_shape(t, x))
    nd = len(shape_of(x))
    perm = tuple(range(nd))[::-1] if axes is None else tuple(a % nd for a in axes)
    return transpose(t, tuple(range(nb)) + tuple(nb + a for a in perm))


defjvp(transpose, _transpose_jvp, None)
_deflower(transpose, _lm())


def swapaxes(x, a, b):
    n = len(shape_of(x))
    axes = list(range(n))
    axes[a], axes[b] = axes[b], axes[a]
    return transpose(x, tuple(axes))


@primitive
def _concat(axis, *xs):
    return np.concatenate([np.atleast_1d(x) for x in xs], axis=axis)


def _concat_vjp_all(g, ans, axis, *xs):
    out = [None]
    start = 0
    for x in xs:
        s = shape_of(x)
        n = s[axis] if s else 1
        sl = [slice(None)] * len(shape_of(ans))
        sl[axis] = slice(start, start + n)
        piece = getitem(g, tuple(sl))
        out.append(piece if s else reshape(piece, ()))
        start += n
    return tuple(out)


from ..autodiff.extend import defvjp_all  # noqa: E402

defvjp_all(_concat, _concat_vjp_all, nondiff=(0,))


def _concat_jvp_all(ts, ans, axis, *xs):
    # the tangent of a concatenation is the concatenation of the tangents (zeros for
    # the pieces that are not perturbed), along the same axis after the batch axes
    b = next(batch_shape(t, x) for t, x in zip(ts[1:], xs) if t is not None)
    pieces = []
    for t, x in zip(ts[1:], xs):
        s = shape_of(x)
        if t is None:
            t = np.zeros(b + (s if s else (1,)))
        elif not s:
            t = reshape(t, b + (1,))
        pieces.append(t)
    ax = axis if axis is None or axis < 0 else axis + len(b)
    if axis is None:
        pieces = [reshape(p, b + (-1,)) for p in pieces]
        ax = len(b)
    return _concat(ax, *pieces)


defjvp_all(_concat, _concat_jvp_all)
_deflower(_concat, _lm("rest"))


def concatenate(xs, axis=0):
    """Join arrays (plain or traced, mixed) along an existing axis; scalars count as
    length-1 vectors. ``axis=None`` joins the flattened arrays (as numpy)."""
    xs = list(xs)
    if not xs:
        raise ValueError("concatenate: need at least one array")
    if axis is None:
        return _concat(0, *[reshape(x, (-1,)) for x in xs])
    return _concat(axis, *xs)


@primitive
def _stack(axis, *xs):
    if axis == 0 and xs:
        for x in xs:
            if type(x) is not float:
                break
        else:
            return np.array(xs)         # a list of scalars (a recursion's values)
    return np.stack(xs, axis=axis)


def _stack_vjp_all(g, ans, axis, *xs):
    if type(g) is np.ndarray:
        # first order: the adjoint's slices along the axis (as getitem gives them)
        ax = axis if axis >= 0 else axis + g.ndim
        gm = g if ax == 0 else np.moveaxis(g, ax, 0)
        return (None,) + tuple(gm.tolist() if gm.ndim == 1 else gm)
    nd = len(shape_of(ans))
    ax = axis if axis >= 0 else axis + nd
    out = [None]
    for i in range(len(xs)):
        sl = [slice(None)] * nd
        sl[ax] = i
        out.append(getitem(g, tuple(sl)))
    return tuple(out)


defvjp_all(_stack, _stack_vjp_all, nondiff=(0,))


def _stack_jvp_all(ts, ans, axis, *xs):
    b = next(batch_shape(t, x) for t, x in zip(ts[1:], xs) if t is not None)
    pieces = [np.zeros(b + shape_of(x)) if t is None else t for t, x in zip(ts[1:], xs)]
    return _stack(axis + len(b) if axis >= 0 else axis, *pieces)


defjvp_all(_stack, _stack_jvp_all)
_deflower(_stack, _lm("rest"))


def stack(xs, axis=0):
    """Stack equally-shaped arrays (plain or traced, mixed) along a new axis."""
    xs = list(xs)
    if not xs:
        raise ValueError("stack: need at least one array")
    return _stack(axis, *xs)


def _as_cond(c):
    if isinstance(c, Box):
        raise TypeError("where: the condition must be plain booleans (compare values: "
                        "comparisons on Vars already return plain booleans)")
    return np.asarray(c, dtype=bool)


@primitive
def _where(c, x, y):
    r = np.where(c, x, y)
    return float(r) if r.ndim == 0 else r


_where._spec.broadcasting = True
defjvp(_where, None,
       lambda t, ans, c, x, y: _where(c, t, 0.0),
       lambda t, ans, c, x, y: _where(c, 0.0, t))
defvjp(_where, None,
       lambda g, ans, c, x, y: _where(c, g, 0.0),
       lambda g, ans, c, x, y: _where(c, 0.0, g))
_deflower(_where, _lm((1, 2)))


def where(c, x, y):
    """Elementwise ``x`` where ``c`` else ``y`` (broadcasting). The condition is
    constant: comparisons on Vars return plain booleans, so ``where(x > 0, x, 0)``
    works and its derivative flows to the branch taken."""
    return _where(_as_cond(c), x, y)


def squeeze(x, axis=None):
    """Drop length-1 axes (all of them, or those in ``axis``; numpy semantics)."""
    s = shape_of(x)
    if axis is None:
        new = tuple(d for d in s if d != 1)
    else:
        axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
        for a in axes:
            if not -len(s) <= a < len(s):
                raise np.exceptions.AxisError(int(a), len(s))
        axes = tuple(a % len(s) for a in axes)
        for a in axes:
            if s[a] != 1:
                raise ValueError("cannot select an axis to squeeze out which has size "
                                 f"not equal to one (axis {a} of shape {s})")
        new = tuple(d for i, d in enumerate(s) if i not in axes)
    return reshape(x, new)


def expand_dims(x, axis):
    """Insert length-1 axes at ``axis`` (an int or a tuple; numpy semantics)."""
    s = shape_of(x)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    n = len(s) + len(axes)
    pos = set()
    for a in axes:
        if not -n <= a < n:
            raise np.exceptions.AxisError(int(a), n)
        pos.add(a % n)
    if len(pos) != len(axes):
        raise ValueError("expand_dims: repeated axis")
    it = iter(s)
    return reshape(x, tuple(1 if i in pos else next(it) for i in range(n)))


# Stan's vector helpers (1-based ``segment`` as in Stan)
def head(v, n):
    """The first ``n`` elements of a vector."""
    return v[:n]


def tail(v, n):
    """The last ``n`` elements of a vector."""
    return v[len(v) - n:] if n else v[0:0]


def segment(v, i, n):
    """``n`` elements starting at 1-based position ``i`` (Stan's ``segment``)."""
    return v[i - 1:i - 1 + n]


def append_row(a, b):
    """Stack vectors/matrices vertically (Stan's ``append_row``)."""
    return concatenate([a, b], axis=0)


def append_col(a, b):
    """Join matrices side by side, or row vectors end to end (Stan's ``append_col``)."""
    if len(shape_of(a)) <= 1 and len(shape_of(b)) <= 1:
        return concatenate([a, b], axis=0)
    return concatenate([a, b], axis=1)


def rep_vector(x, n):
    """A length-``n`` vector filled with ``x`` (derivative: the sum of the adjoint)."""
    from ..autodiff.extend import broadcast_to
    return broadcast_to(x, (n,))


def rep_matrix(x, m, n=None):
    """An ``m x n`` matrix of ``x``; or, for a vector ``x`` and ``n=None``, Stan's
    column-repeat: ``m`` copies of the column vector ``x`` side by side."""
    from ..autodiff.extend import broadcast_to
    if n is None:
        if len(shape_of(x)) != 1:
            raise TypeError("rep_matrix(x, m): x must be a vector (give both m and n "
                            "to repeat a scalar)")
        k = shape_of(x)[0]
        return broadcast_to(reshape(x, (k, 1)), (k, m))
    return broadcast_to(x, (m, n))


def rep_array(x, *dims):
    from ..autodiff.extend import broadcast_to
    return broadcast_to(x, tuple(dims))


def to_vector(x):
    """Column-major flattening, as Stan's ``to_vector`` of a matrix."""
    if len(shape_of(x)) == 2:
        return reshape(transpose(x), (-1,))
    return reshape(x, (-1,))


# numpy protocol
FUNCTIONS.update({
    np.reshape: lambda a, newshape=None, shape=None, **k: reshape(
        a, shape if shape is not None else newshape),
    np.transpose: lambda a, axes=None: transpose(a, axes),
    np.concatenate: lambda arrays, axis=0, **k: concatenate(arrays, axis),
    np.stack: lambda arrays, axis=0, **k: stack(arrays, axis),
    np.where: lambda c, x=None, y=None: where(c, x, y),
    np.ravel: lambda a, order="C": flatten(a),
    np.squeeze: lambda a, axis=None: squeeze(a, axis),
    np.expand_dims: lambda a, axis: expand_dims(a, axis),
    np.swapaxes: lambda a, b, c: swapaxes(a, b, c),
})


# the generated replays of sl.compile call indexing's backward helpers (codegen.py)
_library.provide(_is_basic=_is_basic, _scatter_add_raw=_scatter_add_raw)

# the operators and array methods of Var and Dual (autodiff/operators.py) that index
# and reshape: ``v[i]`` (Var's first-order fast path, and the checked general form),
# ``v.T``, ``v.reshape``, ``v.flatten``/``v.ravel``, ``v.transpose``
register_operators(var_getitem=var_getitem, getitem=checked_getitem, reshape=reshape,
                   transpose=transpose, flatten=flatten)

