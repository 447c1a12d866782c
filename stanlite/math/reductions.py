"""Reductions and vector functions: sums, products, moments, norms, softmax, sorting.

Every function is one primitive or a composition of primitives, and every VJP is
written with stanlite operations, so all of them differentiate again under nesting
(Hessians, reverse-over-reverse). Derivatives:

    d sum(x) = sum(dx)                  adjoint: broadcast ``g`` back over the reduced axes
    d prod(x) = sum_i (prod_{j!=i} x_j) dx_i
                                        the "product of the others" is computed from
                                        exclusive cumulative products, never ``prod / x_i``,
                                        so it is exact with one or several zeros
    d cumprod(x)_k = sum_{i<=k} (prod_{j<=k, j!=i} x_j) dx_i
                                        adjoint via a linear recurrence (no division)
    d cumulative_sum(x) = cumulative_sum(dx)   adjoint: reverse cumulative sum
    d dot_product(a, b) = b.da + a.db
    d dot_self(x) = 2 x.dx
    d squared_distance(a, b) = 2 (a - b).(da - db)
    d softmax(x) = s * (dx - <s, dx>)             (s = softmax(x))
    d log_softmax(x) = dx - <s, dx>
    d max(x) = dx[argmax]               (ties: the first maximal element, numpy's argmax)
    d sort(x) = sort's permutation of dx

Forward mode: every primitive also has a JVP, written with stanlite operations next
to its VJP (so forward-over-reverse Hessians and higher orders nest); the tangents of
``prod`` and ``cumprod`` go through the same division-free linear recurrence.

Conventions
-----------
* ``axis`` is ``None`` (all elements), an int (negative allowed) or, for
  ``sum``/``mean``/``prod``/``max``/``min``/``variance``/``sd``, a tuple of ints.
* ``variance`` and ``sd`` are Stan's *sample* moments (divisor ``n - 1``) by default;
  ``ddof=0`` gives numpy's population moments (``np.var``/``np.std`` on a Var keep
  numpy's ``ddof=0`` default).
* ``softmax`` and ``log_softmax`` act along ``axis=-1`` (a vector's only axis, the rows
  of a matrix); they subtract the maximum first, so large inputs do not overflow.
* ``sort_indices_asc``/``sort_indices_desc`` return **0-based** plain integer arrays
  (Stan's are 1-based); add 1 for Stan's numbering. Sorting is stable: equal values
  keep their input order (also for the descending variants).
* ``max``/``min`` send the adjoint to the first maximal (minimal) element only (in
  row-major order, numpy's ``argmax``); a subgradient at ties. ``sd`` and ``distance`` have no derivative
  where they are 0 (the gradient is NaN there, as for ``sqrt`` at 0).
"""

import math

import numpy as np

from ..autodiff.extend import (_tag, accumulate, batch_shape, broadcast_to, defjvp,
                               defjvp_all, defvjp, defvjp_all, primitive)
from ..autodiff import library as _library
from ..autodiff.operators import register as register_operators
from ..autodiff.var import FUNCTIONS, Var, guarded, make_node, shape_of, value_of
from ..autodiff.vm import opcodes as _op    # the interpreter's lowerings (autodiff/vm)
from ..autodiff.vm import program as _program
from ..autodiff.vm.declare import defkernel as _defkernel
from ..autodiff.vm.program import deflower as _deflower, dot as _ldot, reduction as _lr
from .elementwise import exp, sqrt
from .structure import _where, concatenate, getitem, reshape

__all__ = ["sum", "mean", "prod", "cumprod", "variance", "sd", "cumulative_sum",
           "dot_product", "dot_self", "squared_distance", "distance", "softmax",
           "log_softmax", "sort_asc", "sort_desc", "sort_indices_asc",
           "sort_indices_desc", "max", "min"]

_builtin_sum = sum


def _as_scalar(r):
    return float(r) if np.ndim(r) == 0 else r


def _norm_axes(axis, ndim):
    """``axis`` as a sorted tuple of non-negative ints (``None``: all axes)."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(a, ndim)
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {axis!r}")
    return tuple(sorted(out))


def _reduced_shape(shape, axis, keepdims=False):
    """Shape of the result with the reduced axes kept as length 1."""
    axes = _norm_axes(axis, len(shape))
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def _expand_back(g, x, axis, keepdims):
    """Broadcast a reduction's adjoint back to the input's shape."""
    shape = shape_of(x)
    if not keepdims:
        g = reshape(g, _reduced_shape(shape, axis))
    return broadcast_to(g, shape)


def _batch_axes(axis, nd, nb):
    """The axes ``axis`` of an ``nd``-dimensional value, as axes of a tangent with
    ``nb`` leading batch axes (``None``: all the value's axes)."""
    return tuple(nb + a for a in _norm_axes(axis, nd))


def _batch_axis(axis, nb):
    """One axis of a value as an axis of its tangent (negative axes are unchanged)."""
    return axis + nb if axis >= 0 else axis


def _nb(t, x):
    return len(batch_shape(t, x))


def _count(shape, axis):
    return int(np.prod([shape[a] for a in _norm_axes(axis, len(shape))], dtype=np.int64))


# --------------------------------------------------------------------------------------
# sum, mean
# --------------------------------------------------------------------------------------
@primitive
def _sum(x, axis=None, keepdims=False):
    return _as_scalar(np.sum(x, axis=axis, keepdims=keepdims))


defvjp(_sum, lambda g, ans, x, axis=None, keepdims=False: _expand_back(g, x, axis, keepdims))


def _sum_jvp(t, ans, x, axis=None, keepdims=False):
    # the same sum over the same axes, shifted past the tangent's batch axes
    return _sum(t, _batch_axes(axis, len(shape_of(x)), _nb(t, x)), keepdims)


defjvp(_sum, _sum_jvp)
_deflower(_sum, _lr(_op.SUM))


# the interpreter's SUM sweeps (autodiff/vm/declare.py): out[0] = sum V[a : a + X2]
def _sum_forward(V, aux, code, r):
    a = code[r, _op.A]
    s = 0.0
    for i in range(code[r, _op.X2]):
        s += V[a + i]
    V[code[r, _op.OUT]] = s
    return _op.OK


def _sum_reverse(V, A, aux, code, r):
    a = code[r, _op.A]
    g = A[code[r, _op.OUT]]
    for i in range(code[r, _op.X2]):
        A[a + i] += g


_defkernel(_op.SUM, _sum_forward, _sum_reverse)


def _bp_sum_all(node, g):
    # adjoint of a full sum: g in every entry (the hottest reduction: every log density
    # ends in one). ``a + g`` broadcasts the scalar without materialising ones.
    x = node.x
    xv = x.value
    if type(g) is float and type(xv) is np.ndarray:
        accumulate(x, g)        # materialised or kept lazy, as x's own rule allows
        return
    accumulate(x, _expand_back(g, xv, None, False))


_tag(_bp_sum_all, _sum._spec, lambda node: (node.x,), "sum_all")


def sum(x, axis=None, keepdims=False):
    """Sum of elements (over ``axis``, all by default); a list of scalars is summed
    pairwise with ``+``.

    Derivative: d sum(x) = sum(dx); the adjoint broadcasts ``g`` over the summed axes.
    """
    tx = type(x)
    if tx is np.ndarray and axis is None and not keepdims:
        return float(x.sum())           # plain fast path (log-density kernels)
    if tx is float:
        return x
    if tx is _f64 and axis is None and not keepdims:
        return float(x)                 # e.g. log(5) of an int parameter: a numpy scalar
    if tx is Var and axis is None and not keepdims:
        xv = x.value
        if type(xv) is np.ndarray:
            return make_node(float(xv.sum()), x.tape, _bp_sum_all, x, None)
        if type(xv) is float:
            return x                    # the sum of one number is that number (no node)
    if isinstance(x, (list, tuple)):
        return _builtin_sum(x[1:], x[0]) if x else 0.0
    return _sum(x, axis, keepdims)


_f64 = np.float64


def mean(x, axis=None, keepdims=False):
    """Arithmetic mean over ``axis`` (all by default)."""
    return _sum(x, axis, keepdims) / _count(shape_of(x), axis)


# --------------------------------------------------------------------------------------
# shifts and the linear recurrence (the building blocks of division-free products)
# --------------------------------------------------------------------------------------
def _take(x, axis, sl):
    idx = [slice(None)] * len(shape_of(x))
    idx[axis] = sl
    return getitem(x, tuple(idx))


def _shift(x, axis, fill, right):
    """``x`` moved one step along ``axis`` (to the right: ``out[i] = x[i-1]``), with
    ``fill`` entering at the vacated end."""
    shape = list(shape_of(x))
    n = shape[axis]
    shape[axis] = 1
    pad = np.full(shape, float(fill))
    if n == 0:
        return x
    if right:
        return concatenate([pad, _take(x, axis, slice(0, n - 1))], axis)
    return concatenate([_take(x, axis, slice(1, n)), pad], axis)


@primitive
def _linrec(a, b, axis, reverse):
    """The linear recurrence ``h[i] = a[i] h[i-1] + b[i]`` along ``axis`` with
    ``h[-1] = 0`` (``reverse``: ``h[i] = a[i] h[i+1] + b[i]``, ``h[n] = 0``)."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
    am = np.moveaxis(a, axis, 0)
    bm = np.moveaxis(b, axis, 0)
    h = np.empty(bm.shape)
    n = bm.shape[0]
    order = range(n - 1, -1, -1) if reverse else range(n)
    prev = None
    for i in order:
        h[i] = bm[i] if prev is None else am[i] * prev + bm[i]
        prev = h[i]
    return np.moveaxis(h, 0, axis)


def _linrec_vjp_all(g, ans, a, b, axis, reverse):
    # forward: mu[i] = g[i] + a[i+1] mu[i+1] (a reverse recurrence in ``a`` shifted
    # left); b_bar = mu, a_bar[i] = mu[i] h[i-1]. The reverse recurrence mirrors this.
    a = broadcast_to(a, shape_of(ans))
    mu = _linrec(_shift(a, axis, 0.0, right=reverse), g, axis, not reverse)
    return mu * _shift(ans, axis, 0.0, right=not reverse), mu, None, None


defvjp_all(_linrec, _linrec_vjp_all)


def _lift_rank(t, nb, x, nd):
    """Tangent ``t`` (batch ``nb`` + shape of ``x``) with unit axes inserted after the
    batch axes so that it right-aligns with a value of rank ``nd``."""
    xs = shape_of(x)
    if len(xs) >= nd:
        return t
    return reshape(t, shape_of(t)[:nb] + (1,) * (nd - len(xs)) + xs)


def _linrec_jvp_all(ts, ans, a, b, axis, reverse):
    # dh[i] = a[i] dh[i-1] + (da[i] h[i-1] + db[i]): the same recurrence in ``a``
    ta, tb = ts[0], ts[1]
    nb = _nb(ta, a) if ta is not None else _nb(tb, b)
    nd = len(shape_of(ans))
    rhs = None
    if ta is not None:
        rhs = _lift_rank(ta, nb, a, nd) * _shift(ans, axis, 0.0, right=not reverse)
    if tb is not None:
        tb = _lift_rank(tb, nb, b, nd)
        rhs = tb if rhs is None else rhs + tb
    full = shape_of(rhs)[:nb] + shape_of(ans)
    if shape_of(rhs) != full:
        rhs = broadcast_to(rhs, full)
    return _linrec(a, rhs, _batch_axis(axis, nb), reverse)


defjvp_all(_linrec, _linrec_jvp_all)


# --------------------------------------------------------------------------------------
# cumulative products and sums, prod
# --------------------------------------------------------------------------------------
@primitive
def _cumprod(x, axis):
    return np.cumprod(x, axis=axis)


def _cumprod_vjp(g, ans, x, axis):
    # x_bar[i] = (prod_{j<i} x_j) * r[i],  r[i] = g[i] + x[i+1] r[i+1]
    left = _cumprod(_shift(x, axis, 1.0, right=True), axis)
    r = _linrec(_shift(x, axis, 0.0, right=False), g, axis, True)
    return left * r


defvjp(_cumprod, _cumprod_vjp, None)
# dy[k] = x[k] dy[k-1] + dx[k] y[k-1] (y[-1] = 1): a linear recurrence, no division
defjvp(_cumprod, lambda t, ans, x, axis: _linrec(
    x, t * _shift(ans, axis, 1.0, right=True), _batch_axis(axis, _nb(t, x)), False), None)


def _flat_axis(x, axis):
    """(x, axis) with ``axis=None`` meaning the flattened array (numpy's convention)."""
    if axis is None:
        return reshape(x, (-1,)), 0
    nd = len(shape_of(x))
    return x, _norm_axes(axis, nd)[0]


def cumprod(x, axis=None):
    """Cumulative product along ``axis`` (flattened when ``None``, as numpy); the
    derivative is exact where entries are 0 (no division)."""
    x, axis = _flat_axis(x, axis)
    return _cumprod(x, axis)


def _others(x, axis):
    """``prod_{j != i} x_j`` along ``axis``, from exclusive cumulative products."""
    left = _cumprod(_shift(x, axis, 1.0, right=True), axis)
    rev = slice(None, None, -1)
    right = _take(_cumprod(_shift(_take(x, axis, rev), axis, 1.0, right=True), axis),
                  axis, rev)
    return left * right


@primitive
def _prod(x, axis, keepdims):
    return _as_scalar(np.prod(x, axis=axis, keepdims=keepdims))


def _others_of(x, axis):
    """``_others`` along ``axis``, or over the flattened array when ``None``."""
    if axis is None:
        return reshape(_others(reshape(x, (-1,)), 0), shape_of(x))
    return _others(x, axis)


def _prod_vjp(g, ans, x, axis, keepdims):
    return _expand_back(g, x, axis, keepdims) * _others_of(x, axis)


def _prod_jvp(t, ans, x, axis, keepdims):
    return _sum(t * _others_of(x, axis), _batch_axes(axis, len(shape_of(x)), _nb(t, x)),
                keepdims)


defvjp(_prod, _prod_vjp, None, None)
defjvp(_prod, _prod_jvp, None, None)


def _over_axes(prim, x, axis, keepdims):
    """Apply the single-axis reduction ``prim(x, axis, keepdims)`` over a tuple of axes
    (reductions that are associative: product, max, min)."""
    nd = len(shape_of(x))
    if nd == 0:
        return prim(x, None, keepdims)
    if axis is None or isinstance(axis, (int, np.integer)):
        return prim(x, None if axis is None else _norm_axes(axis, nd)[0], keepdims)
    axes = _norm_axes(axis, nd)
    if len(axes) == nd:
        return prim(x, None, keepdims)
    if len(axes) == 1:
        return prim(x, axes[0], keepdims)
    for a in reversed(axes):
        x = prim(x, a, True)
    if not keepdims:
        x = reshape(x, tuple(d for i, d in enumerate(shape_of(x)) if i not in axes))
    return x


def prod(x, axis=None, keepdims=False):
    """Product of elements over ``axis`` (all by default). The derivative is the product
    of the other elements, exact with one or several zeros."""
    return _over_axes(_prod, x, axis, keepdims)


@primitive
def _cumsum(x, axis):
    return np.cumsum(x, axis=axis)


def _cumsum_vjp(g, ans, x, axis):
    rev = slice(None, None, -1)
    return _take(_cumsum(_take(g, axis, rev), axis), axis, rev)


defvjp(_cumsum, _cumsum_vjp, None)
defjvp(_cumsum, lambda t, ans, x, axis: _cumsum(t, _batch_axis(axis, _nb(t, x))), None)
_deflower(_cumsum, _program.along_axis(_op.CUMSUM))


# the op row of CUMSUM, SOFTMAX, LOG_SOFTMAX and LSE_AXIS as vm/program.py writes it
# (its _axis_layout): out, the operand, and the operand as an (outer, length, inner)
# array scanned or reduced along its middle axis; a declared helper (helpers=) of
# every sweep that reads that layout
def _axis_layout(code, r):
    return (code[r, _op.OUT], code[r, _op.A], code[r, _op.X1], code[r, _op.X2],
            code[r, _op.X3])


# the largest of the ``ln`` values V[p], V[p + inner], ... (one slice along that middle
# axis), -inf if there are none; a NaN is passed over (the shift it gives does not
# matter: a NaN in the slice makes each of its outputs NaN whatever the shift). The
# shift of the SOFTMAX, LOG_SOFTMAX and LSE_AXIS sweeps, a declared helper of each
def _axis_max(V, p, ln, inner):
    hi = -math.inf
    for t in range(ln):
        if V[p + t * inner] > hi:
            hi = V[p + t * inner]
    return hi


# the interpreter's CUMSUM sweeps: running sums of V[a] as (X1, X2, X3) along its
# middle axis
def _cumsum_forward(V, aux, code, r):
    # V[a] as an (outer, length, inner) array, summed along the middle axis
    o, a, nout, ln, inner = _axis_layout(code, r)
    for u in range(nout):
        for j in range(inner):
            s = 0.0
            base = u * ln * inner + j
            for t in range(ln):
                s += V[a + base + t * inner]
                V[o + base + t * inner] = s
    return _op.OK


def _cumsum_reverse(V, A, aux, code, r):
    o, a, nout, ln, inner = _axis_layout(code, r)
    for u in range(nout):
        for j in range(inner):
            s = 0.0
            base = u * ln * inner + j
            for t in range(ln - 1, -1, -1):
                s += A[o + base + t * inner]
                A[a + base + t * inner] += s


_defkernel(_op.CUMSUM, _cumsum_forward, _cumsum_reverse, helpers=(_axis_layout,))


def cumulative_sum(x, axis=None):
    """Running sums (Stan's ``cumulative_sum``); along ``axis``, over the flattened
    array when ``None`` (numpy's ``cumsum`` convention)."""
    x, axis = _flat_axis(x, axis)
    return _cumsum(x, axis)


# --------------------------------------------------------------------------------------
# moments
# --------------------------------------------------------------------------------------
def variance(x, axis=None, ddof=1, keepdims=False):
    """Variance over ``axis`` with divisor ``n - ddof``: Stan's sample variance
    (``ddof=1``) by default; ``ddof=0`` is numpy's ``np.var``."""
    n = _count(shape_of(x), axis)
    if n - ddof <= 0:
        raise ValueError(f"variance: {n} element(s) with ddof={ddof}; need more than "
                         "ddof elements")
    d = x - _sum(x, axis, True) / n
    return _sum(d * d, axis, keepdims) / (n - ddof)


def sd(x, axis=None, ddof=1, keepdims=False):
    """Standard deviation, ``sqrt(variance(x, axis, ddof))`` (Stan's sample sd by
    default). Not differentiable where it is 0 (a constant vector)."""
    return sqrt(variance(x, axis, ddof, keepdims))


# --------------------------------------------------------------------------------------
# inner products and distances (vectors)
# --------------------------------------------------------------------------------------
def _check_same_shape(name, a, b):
    sa, sb = shape_of(a), shape_of(b)
    if sa != sb:
        raise ValueError(f"{name}: arguments have shapes {sa} and {sb}; they must match")


@primitive
def _dot_product(a, b):
    return float(np.sum(np.multiply(a, b)))


defvjp(_dot_product, lambda g, ans, a, b: g * b, lambda g, ans, a, b: g * a)


def _inner(t, c, x):
    """``<t, c>`` over the axes of ``x`` for each batch direction of tangent ``t``."""
    nb = _nb(t, x)
    return _sum(t * c, tuple(range(nb, len(shape_of(t)))))


defjvp(_dot_product, lambda t, ans, a, b: _inner(t, b, a),
       lambda t, ans, a, b: _inner(t, a, b))
_deflower(_dot_product, _ldot)


# the interpreter's DOT sweeps: out[0] = V[a:a+X2] . V[b:b+X2]
def _dot_forward(V, aux, code, r):
    a = code[r, _op.A]
    b = code[r, _op.B]
    s = 0.0
    for i in range(code[r, _op.X2]):
        s += V[a + i] * V[b + i]
    V[code[r, _op.OUT]] = s
    return _op.OK


def _dot_reverse(V, A, aux, code, r):
    a = code[r, _op.A]
    b = code[r, _op.B]
    m = code[r, _op.MASK]
    g = A[code[r, _op.OUT]]
    for i in range(code[r, _op.X2]):
        if m & 1:
            A[a + i] += g * V[b + i]
        if m & 2:
            A[b + i] += g * V[a + i]


_defkernel(_op.DOT, _dot_forward, _dot_reverse)


def dot_product(a, b):
    """``sum(a * b)`` for equally shaped vectors (Stan's ``dot_product``)."""
    _check_same_shape("dot_product", a, b)
    return _dot_product(a, b)


@primitive
def dot_self(x):
    """``sum(x * x)`` (Stan's ``dot_self``): the squared Euclidean norm."""
    return float(np.sum(np.multiply(x, x)))


defvjp(dot_self, lambda g, ans, x: (2.0 * g) * x)
defjvp(dot_self, lambda t, ans, x: 2.0 * _inner(t, x, x))
_deflower(dot_self, _program.dot_self_rule)


@primitive
def _squared_distance(a, b):
    d = np.subtract(a, b)
    return float(np.sum(d * d))


defvjp(_squared_distance,
       lambda g, ans, a, b: (2.0 * g) * (a - b),
       lambda g, ans, a, b: (-2.0 * g) * (a - b))
defjvp(_squared_distance,
       lambda t, ans, a, b: 2.0 * _inner(t, a - b, a),
       lambda t, ans, a, b: -2.0 * _inner(t, a - b, b))
_deflower(_squared_distance, _program.squared_distance_rule)


def squared_distance(a, b):
    """``sum((a - b)^2)`` (Stan's ``squared_distance``)."""
    _check_same_shape("squared_distance", a, b)
    return _squared_distance(a, b)


def distance(a, b):
    """Euclidean distance ``sqrt(squared_distance(a, b))`` (no derivative at ``a == b``)."""
    return sqrt(squared_distance(a, b))


# --------------------------------------------------------------------------------------
# softmax
# --------------------------------------------------------------------------------------
def _stable_shift(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return x - m


@primitive
def _softmax(x, axis):
    z = np.exp(_stable_shift(x, axis))
    return z / np.sum(z, axis=axis, keepdims=True)


defvjp(_softmax,
       lambda g, ans, x, axis: ans * (g - _sum(g * ans, axis, True)), None)
# ds = s * (dx - <s, dx>): the same form as the adjoint, along the shifted axis
defjvp(_softmax, lambda t, ans, x, axis: ans * (
    t - _sum(ans * t, _batch_axis(axis, _nb(t, x)), True)), None)
_deflower(_softmax, _program.along_axis(_op.SOFTMAX))


# the interpreter's SOFTMAX and LOG_SOFTMAX sweeps, along the middle axis of V[a] as
# (X1, X2, X3): one pair for both ops, the row's op code saying which (as EXTREME's
# X1 says max or min)
def _softmax_forward(V, aux, code, r):
    # math/reductions.py: shift by the maximum (0 when it is not finite), then
    # exp(z) / sum exp(z), or z - log(sum exp(z))
    log = code[r, _op.OP] == _op.LOG_SOFTMAX
    o, a, nout, ln, inner = _axis_layout(code, r)
    for u in range(nout):
        for j in range(inner):
            base = u * ln * inner + j
            hi = _axis_max(V, a + base, ln, inner)
            if not math.isfinite(hi):
                hi = 0.0
            s = 0.0
            for t in range(ln):
                s += math.exp(V[a + base + t * inner] - hi)
            if log:
                ls = math.log(s)
                for t in range(ln):
                    V[o + base + t * inner] = V[a + base + t * inner] - hi - ls
            else:
                for t in range(ln):
                    V[o + base + t * inner] = math.exp(V[a + base + t * inner] - hi) / s
    return _op.OK


def _softmax_reverse(V, A, aux, code, r):
    # softmax: ans (g - <g, ans>); log_softmax: g - exp(ans) sum(g)
    log = code[r, _op.OP] == _op.LOG_SOFTMAX
    o, a, nout, ln, inner = _axis_layout(code, r)
    for u in range(nout):
        for j in range(inner):
            base = u * ln * inner + j
            s = 0.0
            for t in range(ln):
                i = base + t * inner
                s += A[o + i] if log else A[o + i] * V[o + i]
            for t in range(ln):
                i = base + t * inner
                if log:
                    A[a + i] += A[o + i] - math.exp(V[o + i]) * s
                else:
                    A[a + i] += V[o + i] * (A[o + i] - s)


_defkernel(_op.SOFTMAX, _softmax_forward, _softmax_reverse,
           helpers=(_axis_layout, _axis_max))


@primitive
def _log_softmax(x, axis):
    z = _stable_shift(x, axis)
    return z - np.log(np.sum(np.exp(z), axis=axis, keepdims=True))


defvjp(_log_softmax,
       lambda g, ans, x, axis: g - exp(ans) * _sum(g, axis, True), None)
defjvp(_log_softmax, lambda t, ans, x, axis: t - _sum(
    exp(ans) * t, _batch_axis(axis, _nb(t, x)), True), None)
_deflower(_log_softmax, _program.along_axis(_op.LOG_SOFTMAX))
_defkernel(_op.LOG_SOFTMAX, _softmax_forward, _softmax_reverse,
           helpers=(_axis_layout, _axis_max))


def softmax(x, axis=-1):
    """``exp(x) / sum(exp(x))`` along ``axis`` (the last by default), computed stably."""
    if shape_of(x) == ():
        raise ValueError("softmax: needs at least a vector")
    return _softmax(x, _norm_axes(axis, len(shape_of(x)))[0])


def log_softmax(x, axis=-1):
    """``x - log_sum_exp(x)`` along ``axis`` (the last by default), computed stably."""
    if shape_of(x) == ():
        raise ValueError("log_softmax: needs at least a vector")
    return _log_softmax(x, _norm_axes(axis, len(shape_of(x)))[0])


# --------------------------------------------------------------------------------------
# max, min
# --------------------------------------------------------------------------------------
def _first_extreme_mask(v, axis, arg):
    """Boolean mask of the first arg-extreme element along ``axis`` (all when None)."""
    v = np.asarray(v, dtype=float)
    mask = np.zeros(v.shape, dtype=bool)
    if v.size == 0:
        return mask
    if axis is None:
        mask.flat[arg(v)] = True
        return mask
    i = arg(v, axis=axis, keepdims=True)
    np.put_along_axis(mask, i, True, axis=axis)
    return mask


def _extreme_vjp(arg):
    def vjp(g, ans, x, axis, keepdims):
        if shape_of(x) == ():
            return g
        mask = _first_extreme_mask(value_of(x), axis, arg)
        return _where(mask, _expand_back(g, x, axis, keepdims), 0.0)
    return vjp


@primitive
def _max(x, axis, keepdims):
    return _as_scalar(np.max(x, axis=axis, keepdims=keepdims))


@primitive
def _min(x, axis, keepdims):
    return _as_scalar(np.min(x, axis=axis, keepdims=keepdims))


def _extreme_jvp(arg):
    # the tangent of the first extreme element: a masked sum over the reduced axes
    def jvp(t, ans, x, axis, keepdims):
        nd = len(shape_of(x))
        if nd == 0:
            return t
        mask = _first_extreme_mask(value_of(x), axis, arg)
        return _sum(_where(mask, t, 0.0), _batch_axes(axis, nd, _nb(t, x)), keepdims)
    return jvp


defvjp(_max, _extreme_vjp(np.argmax), None, None)
defvjp(_min, _extreme_vjp(np.argmin), None, None)
defjvp(_max, _extreme_jvp(np.argmax), None, None)
defjvp(_min, _extreme_jvp(np.argmin), None, None)
_deflower(_max, _program.extreme_rule(True))
_deflower(_min, _program.extreme_rule(False))


# the interpreter's EXTREME sweeps: out[0] = max (X1 = 1) or min (X1 = 0) of
# V[a : a + X2]
def _extreme_index(V, a, k, is_max):
    # numpy's argmax/argmin: the first extreme element, the first NaN if any
    best = 0
    for i in range(1, k):
        x = V[a + i]
        y = V[a + best]
        if y != y:
            break
        if x != x or (x > y if is_max else x < y):
            best = i
    return best


def _extreme_forward(V, aux, code, r):
    a = code[r, _op.A]
    i = _extreme_index(V, a, code[r, _op.X2], code[r, _op.X1] != 0)
    V[code[r, _op.OUT]] = V[a + i]
    return _op.OK


def _extreme_reverse(V, A, aux, code, r):
    a = code[r, _op.A]
    i = _extreme_index(V, a, code[r, _op.X2], code[r, _op.X1] != 0)
    A[a + i] += A[code[r, _op.OUT]]


_defkernel(_op.EXTREME, _extreme_forward, _extreme_reverse, helpers=(_extreme_index,))


def max(x, axis=None, keepdims=False):
    """Largest element over ``axis`` (all by default). The adjoint goes to the first
    maximal element (numpy's ``argmax``); tied elements after it get none."""
    return _over_axes(_max, x, axis, keepdims)


def min(x, axis=None, keepdims=False):
    """Smallest element over ``axis`` (all by default). The adjoint goes to the first
    minimal element (numpy's ``argmin``); tied elements after it get none."""
    return _over_axes(_min, x, axis, keepdims)


# --------------------------------------------------------------------------------------
# sorting
# --------------------------------------------------------------------------------------
def _perm(v, axis, descending):
    v = np.asarray(v, dtype=float)
    if descending:
        return np.argsort(-v, axis=axis, kind="stable")
    return np.argsort(v, axis=axis, kind="stable")


def _sort_perm(x, axis, descending):
    # an index computed from values: through ``guarded``, a guard of sl.compile
    return guarded(_perm, x, axis, descending)


def _sort(x, axis, descending):
    shape = shape_of(x)
    if shape == ():
        raise ValueError("sort: needs at least a vector")
    if axis is None:
        x = reshape(x, (-1,))
        shape = shape_of(x)
        axis = 0
    axis = _norm_axes(axis, len(shape))[0]
    perm = _sort_perm(x, axis, descending)
    if len(shape) == 1:
        return getitem(x, perm)
    grids = list(np.ogrid[tuple(slice(0, d) for d in shape)])
    grids[axis] = perm
    return getitem(x, tuple(grids))


def sort_asc(x, axis=-1):
    """``x`` sorted ascending along ``axis`` (the last by default; ``None``: flattened).
    A permutation of the values, so the adjoint is the permuted adjoint. Stable."""
    return _sort(x, axis, False)


def sort_desc(x, axis=-1):
    """``x`` sorted descending along ``axis``; equal values keep their input order."""
    return _sort(x, axis, True)


def sort_indices_asc(x, axis=-1):
    """The **0-based** indices that sort ``x`` ascending (a plain int array; Stan's
    ``sort_indices_asc`` is 1-based). Stable: ties keep their input order."""
    return _sort_perm(x, axis, False)


def sort_indices_desc(x, axis=-1):
    """The **0-based** indices that sort ``x`` descending (plain ints). Stable."""
    return _sort_perm(x, axis, True)


# --------------------------------------------------------------------------------------
# numpy protocol and ndarray-like methods
# --------------------------------------------------------------------------------------
def _no_out(name, out, extra=None):
    if out is not None:
        raise TypeError(f"numpy.{name}(..., out=...) is not supported on stanlite Vars")
    if extra:
        raise TypeError(f"numpy.{name}: keyword arguments {sorted(extra)} are not "
                        "supported on stanlite Vars")


def _np_sum(a, axis=None, dtype=None, out=None, keepdims=False, **k):
    _no_out("sum", out, k)
    return sum(a, axis, keepdims)


def _np_mean(a, axis=None, dtype=None, out=None, keepdims=False, **k):
    _no_out("mean", out, k)
    return mean(a, axis, keepdims)


def _np_prod(a, axis=None, dtype=None, out=None, keepdims=False, **k):
    _no_out("prod", out, k)
    return prod(a, axis, keepdims)


def _np_var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *,
            correction=None, **k):
    _no_out("var", out, k)
    return variance(a, axis, ddof if correction is None else correction, keepdims)


def _np_std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *,
            correction=None, **k):
    _no_out("std", out, k)
    return sd(a, axis, ddof if correction is None else correction, keepdims)


def _np_max(a, axis=None, out=None, keepdims=False, **k):
    _no_out("max", out, k)
    return max(a, axis, keepdims)


def _np_min(a, axis=None, out=None, keepdims=False, **k):
    _no_out("min", out, k)
    return min(a, axis, keepdims)


def _np_cumsum(a, axis=None, dtype=None, out=None):
    _no_out("cumsum", out)
    return cumulative_sum(a, axis)


def _np_cumprod(a, axis=None, dtype=None, out=None):
    _no_out("cumprod", out)
    return cumprod(a, axis)


def _sort_kw(name, order, k):
    # ``kind`` is accepted and ignored: stanlite always sorts stably
    extra = {n: v for n, v in k.items() if v is not None}
    if order is not None:
        extra["order"] = order
    _no_out(name, None, extra)


def _np_sort(a, axis=-1, kind=None, order=None, **k):
    _sort_kw("sort", order, k)
    return sort_asc(a, axis)


def _np_argsort(a, axis=-1, kind=None, order=None, **k):
    _sort_kw("argsort", order, k)
    return sort_indices_asc(a, axis)


def _np_arg(fn):
    def arg(a, axis=None, out=None, **k):
        _no_out(fn.__name__, out)
        return guarded(lambda v: fn(np.asarray(v, dtype=float), axis=axis, **k), a)
    return arg


FUNCTIONS.update({
    np.sum: _np_sum, np.mean: _np_mean, np.prod: _np_prod,
    np.var: _np_var, np.std: _np_std,
    np.max: _np_max, np.min: _np_min, np.amax: _np_max, np.amin: _np_min,
    np.cumsum: _np_cumsum, np.cumprod: _np_cumprod,
    np.sort: _np_sort, np.argsort: _np_argsort,
    np.argmax: _np_arg(np.argmax), np.argmin: _np_arg(np.argmin),
})


# the generated replays of sl.compile call the sum's backward helper (autodiff/codegen.py)
_library.provide(_expand_back=_expand_back)

# the array methods of Var and Dual (autodiff/operators.py): v.sum(), v.mean(), ...
register_operators(sum=sum, mean=mean, prod=prod, max=max, min=min, variance=variance,
                   sd=sd, cumulative_sum=cumulative_sum, cumprod=cumprod,
                   sort_indices_asc=sort_indices_asc)

