"""Lowering: a recording (:mod:`..compile`) becomes an interpreter program (:mod:`.kernel`).

Each primitive says how it lowers - next to its value and derivative rules, through
:func:`deflower` (``spec.lower``) - as a function ``rule(L, node, args, kw)`` that asks
the :class:`Lowerer` ``L`` for its arguments' slots and emits instructions. The
factories below make the rules of the common kinds (elementwise unary and binary,
pure data movement, summed densities); a primitive without a rule makes its program
not lowerable and the Python replay (:mod:`..codegen`) is used instead, as is any
recording whose guards have no lowering (:func:`guard_lowering`).

Layout of the value buffer: the parameters first (``V[:dim]`` is the input vector, so
a call copies it in one loop), then one contiguous run per live node in tape order,
then the constants (data and literals, written once when the program is made). The
adjoint buffer has the same layout; a gradient clears only ``A[:nvar]``.

Data movement (indexing, stacking, concatenation, reshaping, broadcasting) lowers to
one ``GATHER`` whose index table is found by running the primitive's own function on
*slot numbers*: every input element is replaced by the index of its slot (exact as a
float up to 2^53), so the output holds, element by element, where it came from. One
rule thus serves every indexing form numpy has, with numpy's own semantics.

Before assembly the rows go through the graph passes of :mod:`.passes` (shared
subexpressions, n-ary sums, Poisson sufficient statistics, dead rows): what makes a
Stan-style scalar loop cost about its vectorised form. A program of few instructions
over big vectors of transcendental work is left to the Python replay instead
(:func:`_numpy_is_faster`): numpy's SIMD loops beat the kernel's scalar libm calls there.
"""

import math
import operator
import threading

import numpy as np

from .. import library
from ..var import Box, Var, _strip
from . import opcodes as O
from .declare import defdensity

__all__ = ["deflower", "guard_lowering", "lower", "NotLowerable", "unary", "binary",
           "movement", "density", "reduction", "dot", "matmul_rule", "scatter_add_rule",
           "sum_to_shape_rule", "lgamma_table", "Program", "log_mix_rule", "glm_rule",
           "along_axis", "extreme_rule", "dot_self_rule", "squared_distance_rule",
           "mvn_cholesky_rule", "lchoose_sum", "gp_exp_quad_rule", "add_diag_rule",
           "cholesky_rule", "density_op"]

_CONST = 1 << 40            # provisional offsets of constants (patched at the end)


class NotLowerable(Exception):
    """This recording has a node or a guard the interpreter cannot run."""


# ======================================================================================
# the registry: each primitive's lowering lives on its Primitive record
# ======================================================================================
def deflower(prim, rule):
    """Declare how primitive ``prim`` (the public function or its ``Primitive``) lowers
    to interpreter instructions: ``rule(L, node, args, kw)``."""
    spec = getattr(prim, "_spec", prim)
    spec.lower = rule
    return prim


_CHECK_SETS = {"not_nan": O.CHECK_NOT_NAN, "finite": O.CHECK_FINITE,
               "positive_finite": O.CHECK_POSITIVE_FINITE,
               "nonnegative_finite": O.CHECK_NONNEGATIVE_FINITE, "unit": O.CHECK_UNIT,
               "positive": O.CHECK_POSITIVE_OR_INF}


def check_lowering(prim, *sets):
    """Declare what a fused density's argument check requires of each argument (one
    of ``_CHECK_SETS`` or None, in argument order), so that the check - a guard
    wherever the density is recorded in nested differentiation (Hessians) - lowers to
    the interpreter. Stricter than the check is safe (the eager tape then decides)."""
    spec = getattr(prim, "_spec", prim)
    for k in sets:
        if k is not None and k not in _CHECK_SETS:
            raise ValueError(f"unknown argument set {k!r}")
    spec.check._vm_guard = ("args", tuple(sets))
    return prim


def guard_lowering(fn, kind):
    """Declare how a guarded decision function lowers: ``kind`` is ``"positive"``
    (``fn(v) -> v > 0``, elementwise), ``"bound_case"`` (``fn(lb, ub, who)``: which of two
    bounds are finite) or ``"check_positive"``/``"check_nonnegative"`` (returns True or
    raises a domain error)."""
    fn._vm_guard = kind
    return fn


# ======================================================================================
# rule factories
# ======================================================================================
def unary(op):
    """An elementwise function of one argument."""
    def rule(L, node, args, kw):
        (x,) = args
        a, n = L.dense(x)
        L.emit(op, n, L.out(node), a=a, mask=L.var(x))
    return rule


def binary(op):
    """A broadcasting elementwise function of two arguments."""
    def rule(L, node, args, kw):
        x, y = args
        out = L.out(node)
        shape = L.shape(node)
        a, xs, tx = L.arg(x)
        b, ys, ty = L.arg(y)
        if not shape:                   # scalars (loops): no broadcasting to work out
            L.rows.append((op, 1, out, a, 0, b, 0, 0, 0, tx | 2 * ty, 0, 0, 0, 0))
            return
        n = _prod(shape)
        a, sa = L.strided(x, n, shape)
        b, sb = L.strided(y, n, shape)
        L.emit(op, n, out, a=a, sa=sa, b=b, sb=sb, mask=tx | 2 * ty)
    return rule


def movement(data=(0,)):
    """A pure data-movement primitive (its output elements are copies of input
    elements): one GATHER, its table found by running the function on slot numbers.
    ``data``: the positions of the arguments whose elements move (the rest - indices,
    axes, shapes, a condition - are run as they are), or ``"rest"`` for every position
    after the first (``concatenate(axis, *xs)``). Every data argument is replaced by
    its slots, a constant of any numeric type included (an int left as it is would be
    read as a slot number)."""
    def rule(L, node, args, kw):
        spec = L.spec
        tagged = list(args)
        positions = range(1, len(args)) if data == "rest" else data
        for i in positions:
            if i >= len(args):
                continue
            off, shape = L.slot(args[i])
            tagged[i] = (np.arange(_prod(shape), dtype=np.float64) + off).reshape(shape) \
                if shape else float(off)
        ids = np.asarray(spec.fun(*tagged, **kw), dtype=np.float64).ravel()
        table = ids.astype(np.int64)
        if not np.array_equal(table, ids):
            raise NotLowerable(f"{spec.name}: not a pure data movement")
        out = L.out(node)
        L.emit(O.GATHER, table.size, out, x1=L.table(table), mask=1)
    return rule


def density(op, n_args, data_offsets=None):
    """A summed log density of ``n_args`` broadcast arguments (``O.NORMAL`` ...).
    ``data_offsets(L, args) -> X1`` adds per-element constants (lgamma(n + 1))."""
    def rule(L, node, args, kw):
        if kw or len(args) != n_args:
            raise NotLowerable(f"{L.spec.name}: unexpected arguments")
        info = [L.arg(x) for x in args]
        mask = 0
        for i, t in enumerate(info):
            mask |= t[2] << i
        if any(t[1] for t in info):
            shape = np.broadcast_shapes(*[t[1] for t in info])
            n = _prod(shape)
            offs = [L.strided(x, n, shape) for x in args]
        else:                           # scalars (loops): no broadcasting to work out
            shape, n = (), 1
            offs = [(t[0], 0) for t in info]
        f = dict(mask=mask)
        for (o, s), (ka, ks) in zip(offs, (("a", "sa"), ("b", "sb"), ("c", "sc"),
                                           ("x1", "x2"))):
            f[ka], f[ks] = o, s
        if data_offsets is not None:
            f["x1"] = data_offsets(L, args, shape)
        L.emit(op, n, L.out(node), **f)
    return rule


def density_op(prim, op, arg_sets, lp, partials, inside=None, table=None, constant=0.0):
    """Declare, at once, summed density ``prim``'s interpreter op ``op`` of
    ``len(arg_sets)`` broadcast arguments: its lowering (:func:`density`, ``table`` the
    rule that lays out one constant per element at X1, :func:`lgamma_table`), what its
    argument check requires (:func:`check_lowering`, ``arg_sets``) and its sweeps, from
    what one element contributes (``declare.defdensity``: ``lp``, ``partials``,
    ``inside``, ``constant``; the table's constant is the elements' last value)."""
    deflower(prim, density(op, len(arg_sets), table))
    check_lowering(prim, *arg_sets)
    defdensity(op, lp, partials, inside, arity=len(arg_sets) + (table is not None),
               table=table is not None, constant=constant)
    return prim


def _axis_kw(args, kw):
    x = args[0]
    axis = args[1] if len(args) > 1 else kw.get("axis")
    keepdims = args[2] if len(args) > 2 else kw.get("keepdims", False)
    return x, axis, keepdims


def _reduced_map(shape, axis):
    """For each element of an array of ``shape``: the index of its output element when
    summed over ``axis``."""
    nd = len(shape)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = {int(a) % nd for a in axes} if nd else set()
    kept = tuple(1 if i in axes else s for i, s in enumerate(shape))
    size = _prod(kept)
    return np.broadcast_to(np.arange(size, dtype=np.int64).reshape(kept), shape).ravel(), size


def reduction(op):
    """A reduction to a scalar (``O.SUM``, ``O.LSE``); sums along axes become a segment
    sum."""
    def rule(L, node, args, kw):
        x, axis, keepdims = _axis_kw(args, kw)
        a, n = L.dense(x)
        out = L.out(node)
        if axis is None:
            L.emit(op, 1, out, a=a, x2=n, mask=L.var(x))
            return
        if op == O.LSE:
            if not isinstance(axis, (int, np.integer)):
                if len(tuple(axis)) != 1:
                    raise NotLowerable(f"{L.spec.name} along several axes")
                axis = tuple(axis)[0]
            nout, ln, inner = _axis_layout(L.shape_of(x), axis)
            L.emit(O.LSE_AXIS, nout * inner, out, a=a, x1=nout, x2=ln, x3=inner,
                   mask=L.var(x))
            return
        if op != O.SUM:
            raise NotLowerable(f"{L.spec.name} along an axis")
        table, size = _reduced_map(L.shape_of(x), axis)
        L.emit(O.SEGSUM, size, out, a=a, x1=L.table(table), x2=n, mask=L.var(x))
    return rule


def sum_to_shape_rule(L, node, args, kw):
    """``sum_to_shape(x, shape)``: broadcasting undone, as a segment sum."""
    from ..extend import sum_axes
    x, shape = args[0], tuple(args[1] if len(args) > 1 else kw["shape"])
    nb = args[2] if len(args) > 2 else kw.get("nb", 0)
    xs = tuple(L.shape_of(x))
    axes = None if xs == shape else sum_axes(xs, shape, nb)
    if axes is None:                    # the same shape, or broadcast up: a movement
        movement()(L, node, args, kw)
        return
    a, n = L.dense(x)
    table, size = _reduced_map(xs, axes)
    if size != _prod(shape):
        raise NotLowerable("sum_to_shape: unexpected shapes")
    L.emit(O.SEGSUM, size, L.out(node), a=a, x1=L.table(table), x2=n, mask=L.var(x))


def scatter_add_rule(L, node, args, kw):
    """``scatter_add(g, idx, shape)``: zeros of ``shape`` with ``g`` added at ``idx``."""
    g, idx, shape = args
    a, n = L.dense(g)
    size = _prod(shape)
    table = np.arange(size, dtype=np.int64).reshape(shape)[idx].ravel()
    if table.size != n:
        raise NotLowerable("scatter_add with a broadcast value")
    L.emit(O.SEGSUM, size, L.out(node), a=a, x1=L.table(table), x2=n, mask=L.var(g))


def dot(L, node, args, kw):
    """``dot_product(a, b)`` of two vectors."""
    x, y = args
    a, n = L.dense(x)
    b, m = L.dense(y)
    if n != m or len(L.shape_of(x)) != 1 or len(L.shape_of(y)) != 1:
        raise NotLowerable("dot_product of other shapes")
    L.emit(O.DOT, 1, L.out(node), a=a, b=b, x2=n, mask=L.var(x) | 2 * L.var(y))


def matmul_rule(L, node, args, kw):
    """``a @ b`` for matrices and vectors (row-major: a vector is a row on the left, a
    column on the right)."""
    x, y = args
    sx, sy = L.shape_of(x), L.shape_of(y)
    if len(sx) > 2 or len(sy) > 2 or not sx or not sy:
        raise NotLowerable("matmul of stacks or scalars")
    p, k = (1, sx[0]) if len(sx) == 1 else sx
    k2, q = (sy[0], 1) if len(sy) == 1 else sy
    if k != k2:
        raise NotLowerable("matmul of mismatched shapes")
    a, _ = L.dense(x)
    b, _ = L.dense(y)
    L.emit(O.MATMUL, p * q, L.out(node), a=a, b=b, x1=p, x2=k, x3=q,
           mask=L.var(x) | 2 * L.var(y))


def lgamma_table(L, args, shape):
    """X1 of POISSON: the constants lgamma(n + 1) laid out as the counts are."""
    m = args[0]
    if L.traced(m):
        raise NotLowerable("a traced count")
    if type(m) in _SCALARS and _prod(shape) == 1:      # the scalar case, fast (loops)
        v = float(m)
        key = ("lgamma1", v)
        hit = L.const_keys.get(key)
        return hit[0] if hit is not None else L.constant(math.lgamma(v + 1.0), key=key)[0]
    vals = np.asarray(_strip(m), dtype=np.float64)
    n = _prod(shape)
    if vals.size not in (1, n):
        vals = np.ascontiguousarray(np.broadcast_to(vals, shape))
    lg = np.vectorize(math.lgamma, otypes=[float])(vals + 1.0) if vals.size else vals
    L._keep.append(m)
    key = ("lgamma1", float(vals.ravel()[0])) if vals.size == 1 else ("lgamma1", id(m))
    off, _ = L.constant(lg, key=key)
    return off


def gp_exp_quad_rule(L, node, args, kw):
    """``gp_exp_quad_cov(x, alpha, rho)``: one GP_EXP_QUAD (x: N points, 1-D or (N, D))."""
    if kw or len(args) != 3:
        raise NotLowerable("gp_exp_quad_cov: unexpected arguments")
    x, alpha, rho = args
    sx = L.shape_of(x)
    if len(sx) not in (1, 2) or L.shape_of(alpha) != () or L.shape_of(rho) != ():
        raise NotLowerable("gp_exp_quad_cov: unexpected shapes")
    a, _ = L.dense(x)
    b, _ = L.dense(alpha)
    c, _ = L.dense(rho)
    npt, d = int(sx[0]), (1 if len(sx) == 1 else int(sx[1]))
    L.emit(O.GP_EXP_QUAD, npt * npt, L.out(node), a=a, b=b, c=c, x1=npt, x2=d,
           mask=L.var(x) | 2 * L.var(alpha) | 4 * L.var(rho))


def add_diag_rule(L, node, args, kw):
    """``add_diag(m, d)``: the elements of m and of d (broadcast along the diagonal)
    gathered into one run, then summed into place by a SEGSUM."""
    m, d = args
    sm_ = L.shape_of(m)
    if len(sm_) != 2:
        raise NotLowerable("add_diag of a stack")
    rows, cols = int(sm_[0]), int(sm_[1])
    k = min(rows, cols)
    a, n = L.dense(m)
    b, nd = L.dense(d)
    if nd not in (1, k):
        raise NotLowerable("add_diag: unexpected shapes")
    dpos = np.arange(k, dtype=np.int64) if nd == k else np.zeros(k, dtype=np.int64)
    idx = np.concatenate([np.arange(n, dtype=np.int64) + a, b + dpos])
    traced = L.var(m) | L.var(d)
    tmp = L.alloc(n + k)
    L.emit(O.GATHER, n + k, tmp, x1=L.table(idx), mask=traced)
    where = np.concatenate([np.arange(n, dtype=np.int64),
                            np.arange(k, dtype=np.int64) * (cols + 1)])
    L.emit(O.SEGSUM, n, L.out(node), a=tmp, x1=L.table(where), x2=n + k, mask=traced)


def cholesky_rule(L, node, args, kw):
    """``cholesky_decompose``'s primitive: one CHOLESKY (its reverse sweep needs a
    scratch region of 2 n^2 values)."""
    x = args[0]
    sx = L.shape_of(x)
    if len(sx) != 2 or sx[0] != sx[1]:
        raise NotLowerable("cholesky of a stack")
    a, _ = L.dense(x)
    n = int(sx[0])
    scratch = L.alloc(2 * n * n)
    L.emit(O.CHOLESKY, n * n, L.out(node), a=a, x1=n, x3=scratch, mask=L.var(x))


def lchoose_sum(L, args, shape):
    """X1 of BINOMIAL_LOGIT: the constant sum lchoose(N, n) over the broadcast (data)."""
    lchoose = library.lookup("lchoose")
    n, N = args[0], args[1]
    if L.traced(n) or L.traced(N):
        raise NotLowerable("a traced count")
    n, N = (np.asarray(_strip(v), dtype=np.float64) for v in (n, N))   # as the kernel
    v = np.broadcast_to(np.asarray(lchoose(N, n), dtype=np.float64), shape)
    return L.constant(float(v.sum()), key=("lchoose", float(v.sum())))[0]


def log_mix_rule(L, node, args, kw):
    """``log_mix(theta, lp1, lp2)``, elementwise with broadcasting: one LOG_MIX."""
    if kw or len(args) != 3:
        raise NotLowerable("log_mix: unexpected arguments")
    n, shape = L.size(node), L.shape(node)
    f = {}
    for (ka, ks), x in zip((("a", "sa"), ("b", "sb"), ("c", "sc")), args):
        f[ka], f[ks] = L.strided(x, n, shape)
    mask = L.var(args[0]) | 2 * L.var(args[1]) | 4 * L.var(args[2])
    L.emit(O.LOG_MIX, n, L.out(node), mask=mask, **f)


def glm_rule(op, counts=False, with_sigma=False):
    """A fused GLM (distributions/glm.py) as the products it is made of: ``eta = x beta``
    (MATMUL: BLAS for big designs), ``+ alpha`` (ADD), then the summed density ``op`` of
    ``y`` given ``eta`` (and ``sigma``): the same formulas as the fused kernel.
    ``counts``: the density takes the constants lgamma(y + 1) (Poisson)."""
    def rule(L, node, args, kw):
        if kw or len(args) != (5 if with_sigma else 4):
            raise NotLowerable(f"{L.spec.name}: unexpected arguments")
        y, x, alpha, beta = args[:4]
        if not with_sigma and L.traced(y):
            raise NotLowerable(f"{L.spec.name}: a traced outcome")
        sx = L.shape_of(x)
        if len(sx) != 2 or L.shape_of(beta) != sx[1:]:
            raise NotLowerable(f"{L.spec.name}: unexpected shapes")
        n, k = sx
        xa, _ = L.dense(x)
        ba, _ = L.dense(beta)
        tx = L.var(x) | L.var(beta)
        xb = L.alloc(n)
        L.emit(O.MATMUL, n, xb, a=xa, b=ba, x1=n, x2=k, x3=1,
               mask=L.var(x) | 2 * L.var(beta))
        al, sal = L.strided(alpha, n, (n,))
        eta = L.alloc(n)
        L.emit(O.ADD, n, eta, a=xb, sa=1, b=al, sb=sal, mask=tx | 2 * L.var(alpha))
        ya, sy = L.strided(y, n, (n,))
        f = dict(a=ya, sa=sy, b=eta, sb=1, mask=L.var(y) | 2 * (tx | L.var(alpha)))
        if with_sigma:
            f["c"], f["sc"] = L.strided(args[4], n, (n,))
            f["mask"] |= 4 * L.var(args[4])
        if counts:
            f["x1"] = lgamma_table(L, (y,), (n,))
        L.emit(op, n, L.out(node), **f)
    return rule


def _axis_layout(shape, axis):
    """(outer, length, inner) of ``shape`` around ``axis``: the layout of CUMSUM and
    SOFTMAX."""
    axis = int(axis) % len(shape)
    return _prod(shape[:axis]), int(shape[axis]), _prod(shape[axis + 1:])


def along_axis(op):
    """``f(x, axis)`` computed along one axis (``O.CUMSUM``, ``O.SOFTMAX``,
    ``O.LOG_SOFTMAX``)."""
    def rule(L, node, args, kw):
        x = args[0]
        axis = args[1] if len(args) > 1 else kw.get("axis")
        shape = L.shape_of(x)
        if axis is None or not shape:
            raise NotLowerable(f"{L.spec.name} without an axis")
        a, n = L.dense(x)
        nout, ln, inner = _axis_layout(shape, axis)
        L.emit(op, n, L.out(node), a=a, x1=nout, x2=ln, x3=inner, mask=L.var(x))
    return rule


def extreme_rule(is_max):
    """``max``/``min`` over every element (the adjoint to numpy's first arg-extreme)."""
    def rule(L, node, args, kw):
        x, axis, keepdims = _axis_kw(args, kw)
        a, n = L.dense(x)
        if not L.shape_of(x):
            L.emit(O.COPY, 1, L.out(node), a=a, mask=L.var(x))
            return
        if axis is not None or n == 0:
            raise NotLowerable(f"{L.spec.name} along an axis")
        L.emit(O.EXTREME, 1, L.out(node), a=a, x1=int(is_max), x2=n, mask=L.var(x))
    return rule


def dot_self_rule(L, node, args, kw):
    """``dot_self(x)``: DOT of x with itself (both mask bits: the adjoint 2 g x)."""
    (x,) = args
    a, n = L.dense(x)
    L.emit(O.DOT, 1, L.out(node), a=a, b=a, x2=n, mask=3 * L.var(x))


def squared_distance_rule(L, node, args, kw):
    """``squared_distance(a, b)``: d = a - b, then DOT(d, d)."""
    x, y = args
    a, n = L.dense(x)
    b, m = L.dense(y)
    if n != m:
        raise NotLowerable("squared_distance of other shapes")
    d = L.alloc(n)
    t = L.var(x) | L.var(y)
    L.emit(O.SUB, n, d, a=a, sa=1, b=b, sb=1, mask=L.var(x) | 2 * L.var(y))
    L.emit(O.DOT, 1, L.out(node), a=d, b=d, x2=n, mask=3 * t)


def mvn_cholesky_rule(L, node, args, kw):
    """``multi_normal_cholesky_lpdf(y, mu, L)``: one MVN_CHOLESKY (forward and back
    substitution in the kernel; its scratch holds z = L^-1 (y - mu) and L^-T z)."""
    if kw or len(args) != 3:
        raise NotLowerable("multi_normal_cholesky_lpdf: unexpected arguments")
    y, mu, chol = args
    sl_ = L.shape_of(chol)
    shape = np.broadcast_shapes(L.shape_of(y), L.shape_of(mu))
    if len(sl_) != 2 or len(shape) not in (1, 2) or shape[-1] != sl_[0]:
        raise NotLowerable("multi_normal_cholesky_lpdf: unexpected shapes")
    k = int(sl_[0])
    nrow = 1 if len(shape) == 1 else int(shape[0])
    a, sa = L.strided(y, nrow * k, shape)
    b, sb = L.strided(mu, nrow * k, shape)
    c, _ = L.dense(chol)
    scratch = L.alloc(2 * nrow * k)
    L.emit(O.MVN_CHOLESKY, 1, L.out(node), a=a, sa=sa, b=b, sb=sb, c=c, x1=nrow, x2=k,
           x3=scratch, mask=L.var(y) | 2 * L.var(mu) | 4 * L.var(chol))


# ======================================================================================
# the lowerer
# ======================================================================================
class Lowerer:
    """Assigns slots and collects instructions while a recording is lowered."""

    def __init__(self, tape):
        self.tape = tape
        self.rows = []
        self.aux = []
        self.aux_len = 0
        self.top = 0                 # next free offset of the node region
        self.slots = {}              # id(Var) -> (offset, shape)
        self.consts = []             # (provisional offset, flat values)
        self.const_len = 0
        self.const_keys = {}
        self._keep = []              # objects whose id() is used as a key
        self.spec = None

    # -- arguments ---------------------------------------------------------------------
    def traced(self, x):
        return self._on_tape(x) is not None

    def _on_tape(self, x):
        if type(x) is Var and x.tape is self.tape:     # the common case, first
            return x
        while isinstance(x, Box):
            if x.tape is self.tape:
                return x
            x = x.value
        return None

    def var(self, x):
        return 1 if self.traced(x) else 0

    def shape_of(self, x):
        v = self._on_tape(x)
        if v is not None:
            s = self.slots.get(id(v))
            return s[1] if s is not None else _shape(v.value)
        return _shape(_strip(x))

    def arg(self, x):
        """(offset, shape, 1 if traced else 0) of an argument: :meth:`slot` and
        :meth:`var` in one look-up (the rules of scalar loop bodies run 10^4 times)."""
        v = x if type(x) is Var and x.tape is self.tape else self._on_tape(x)
        if v is not None:
            s = self.slots.get(id(v))
            if s is None:
                raise NotLowerable("an input recorded outside the lowered nodes")
            return s[0], s[1], 1
        off, shape = self.constant(_strip(x))
        return off, shape, 0

    def slot(self, x):
        """(offset, shape) of a traced value's node or of a constant."""
        v = self._on_tape(x)
        if v is not None:
            s = self.slots.get(id(v))
            if s is None:
                raise NotLowerable("an input recorded outside the lowered nodes")
            return s
        return self.constant(_strip(x))

    def constant(self, value, key=None):
        if key is None:
            if isinstance(value, np.ndarray):
                key = ("a", id(value))
            elif isinstance(value, (float, int, np.floating, np.integer, bool)):
                key = ("s", float(value))
            else:
                key = ("o", id(value))
        hit = self.const_keys.get(key)
        if hit is not None:
            return hit
        try:
            arr = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise NotLowerable(f"a constant of type {type(value).__name__}") from None
        self._keep.append(value)
        off = _CONST + self.const_len
        self.consts.append(arr.ravel())
        self.const_len += arr.size
        r = self.const_keys[key] = (off, arr.shape)
        return r

    def dense(self, x):
        """(offset, size) of an argument read contiguously."""
        off, shape = self.slot(x)
        return off, _prod(shape)

    def strided(self, x, n, shape):
        """(offset, stride) of ``x`` broadcast to ``shape`` (n elements): stride 1 when it
        has every element, 0 for a single element, else a gathered broadcast copy."""
        off, s = self.slot(x)
        if not s:
            return off, 0
        size = _prod(s)
        if size == 1:
            return off, 0
        if size == n:                   # no repetition: the same elements in order
            return off, 1
        table = np.broadcast_to(
            (np.arange(size, dtype=np.int64) + off).reshape(s), shape).ravel()
        tmp = self.alloc(n)
        self.emit(O.GATHER, n, tmp, x1=self.table(table), mask=self.var(x))
        return tmp, 1

    # -- outputs, tables, instructions -------------------------------------------------
    def alloc(self, n):
        off = self.top
        self.top += n
        return off

    def out(self, node):
        s = self.slots.get(id(node))
        if s is None:
            shape = _shape(node.value)
            s = self.slots[id(node)] = (self.alloc(_prod(shape)), shape)
        return s[0]

    def shape(self, node):
        return _shape(node.value)

    def size(self, node):
        return _prod(_shape(node.value))

    def table(self, ints):
        off = self.aux_len
        self.aux.append(np.asarray(ints, dtype=np.int64).ravel())
        self.aux_len += self.aux[-1].size
        return off

    def emit(self, op, n, out, a=0, sa=0, b=0, sb=0, c=0, sc=0, mask=0, x1=0, x2=0, x3=0,
             x4=0):
        self.rows.append((op, n, out, a, sa, b, sb, c, sc, mask, x1, x2, x3, x4))


# ======================================================================================
# lowering a recording
# ======================================================================================
class Program:
    """An interpreter program and its buffers; ``fn(x)`` follows the protocol of the
    Python replay (:class:`..codegen._Program`): ``(value, gradient)``, or the index of
    the guard that failed."""

    __slots__ = ("fn", "source", "guards", "nodes", "inexact", "code", "aux", "V", "A",
                 "dim", "out", "nvar", "size", "value_only")

    def listing(self):
        names = {v: k for k, v in vars(O).items() if k.isupper() and type(v) is int
                 and k not in ("ROW", "OK", "DOMAIN") and len(k) > 2}
        lines = [f"# interpreter program: {len(self.code)} instructions, "
                 f"{self.V.size} values ({self.nvar} computed), {self.aux.size} indices"]
        for row in self.code:
            lines.append(f"{names.get(int(row[0]), row[0]):>16} " +
                         " ".join(str(int(v)) for v in row[1:]))
        return "\n".join(lines)


def lower(rec, leaves, output, value_only=False, result_shape=None):
    """Lower recording ``rec`` to a :class:`Program` (raises :class:`NotLowerable`).

    ``leaves``: ``[(Var, offset, shape)]`` - where each input variable sits in the
    input vector; ``output``: the traced value returned; ``value_only``: no reverse
    pass, the program returns ``(value, None)`` or, with ``result_shape``, the output
    array as ``(0.0, array)`` (a Hessian's forward pass)."""
    from . import kernel
    if not kernel.available():
        raise NotLowerable("numba is not available")
    tape = rec.tape
    L = Lowerer(tape)
    dim = 0
    for v, off, shape in leaves:
        L.slots[id(v)] = (off, shape)
        dim = max(dim, off + _prod(shape))
    L.top = dim
    out_var = L._on_tape(output)
    if out_var is None:
        raise NotLowerable("the output is not traced")
    nodes = rec.nodes
    live = _live(nodes, out_var, rec.guards, L)
    from ..extend import node_record
    guards = sorted(enumerate(rec.guards), key=lambda ig: ig[1].pos)
    gi = 0
    for j, node in enumerate(nodes):
        while gi < len(guards) and guards[gi][1].pos <= j:
            _lower_guard(L, *guards[gi])
            gi += 1
        record = live.get(id(node))
        if record is None:
            continue
        spec, args, kw = record
        rule = getattr(spec, "lower", None)
        if rule is None:
            raise NotLowerable(f"no interpreter rule for '{spec.name}'")
        L.spec = spec
        rule(L, node, args, kw)
        if id(node) not in L.slots:
            raise NotLowerable(f"the rule of '{spec.name}' made no output")
    while gi < len(guards):
        _lower_guard(L, *guards[gi])
        gi += 1
    out_off, out_shape = L.slots[id(out_var)]
    from .passes import optimise           # CSE, n-ary sums, dead rows (passes.py)
    out_off = optimise(L, out_off, _prod(out_shape))
    if _numpy_is_faster(L.rows):
        raise NotLowerable("a big vectorised program: numpy's replay is faster")
    return _assemble(L, rec, dim, out_off, out_shape, value_only, result_shape)


# Ops whose elements cost the interpreter about what they cost numpy (arithmetic,
# data movement, BLAS products). On the others - exp, log, the densities... - numpy's
# SIMD loops beat numba's scalar libm calls (exp of 1e5 elements: 0.23 ms in numpy,
# 1.7 ms in a numba loop). Measured on logistic regression written with sl.log1p_exp
# (one run, busy machine): N=1000, D=25: interpreter 66 us, Python replay 58, numpy by
# hand 51; N=1e4, D=50: 1231 / 641 / 995; N=1e5: 12.4 / 8.2 / 9.8 ms - the interpreter
# loses 40-60 ns a transcendental element of a gradient, the Python replay ~3 us an
# instruction.
_CHEAP = frozenset((O.ADD, O.SUB, O.MUL, O.DIV, O.NEG, O.SQUARE, O.FABS, O.INV,
                    O.INV_SQUARE, O.COPY, O.GATHER, O.SEGSUM, O.SUM, O.DOT, O.MATMUL,
                    O.CUMSUM, O.EXTREME, O.SUMN))
_NS_PER_ELEMENT = 30.0      # what the interpreter loses on a transcendental element
_NS_PER_ROW = 3000.0        # what the Python replay loses on an instruction
_BIG = 4096                 # below this many such elements, never worth a change


def _numpy_is_faster(rows):
    """Whether the Python replay (numpy's SIMD elementwise loops) would beat the
    interpreter: big vectors of transcendental work in few instructions."""
    work = 0
    for r in rows:
        op = r[0]
        if op not in _CHEAP and op < 90:
            # elements: N, but a full LSE reads X2 of them and LSE_AXIS N * X2
            work += r[11] * (r[1] if op == O.LSE_AXIS else 1) if op in (
                O.LSE, O.LSE_AXIS) else r[1]
    return work >= _BIG and work * _NS_PER_ELEMENT > len(rows) * _NS_PER_ROW


def _live(nodes, out_var, guards, L):
    """Nodes the output or a guard depends on (the rest is never lowered)."""
    from ..extend import node_record
    live = {id(out_var): None}
    for g in guards:
        for a in g.args:
            v = L._on_tape(a)
            if v is not None:
                live[id(v)] = None
    on_tape = L._on_tape
    for node in reversed(nodes):
        if id(node) in live:
            rec = live[id(node)] = node_record(node)      # kept for the lowering
            for a in rec[1]:
                v = on_tape(a)
                if v is not None and id(v) not in live:
                    live[id(v)] = None
            for a in rec[2].values():
                v = on_tape(a)
                if v is not None and id(v) not in live:
                    live[id(v)] = None
    return live


# comparisons of traced values (``if t > 0:`` in an ODE right-hand side) are guards
# whose function is the operator itself: GUARD_CMP's comparison numbers
_COMPARISONS = {operator.lt: 0, operator.le: 1, operator.gt: 2, operator.ge: 3,
                operator.eq: 4, operator.ne: 5}


def _lower_comparison(L, index, g, k):
    x, y = g.args
    if _prod(L.shape_of(x)) != 1 or _prod(L.shape_of(y)) != 1 or np.size(g.result) != 1:
        raise NotLowerable(f"a comparison of arrays: {g.describe()}")
    a = L.slot(x)[0]
    b = L.slot(y)[0]
    L.emit(O.GUARD_CMP, 1, 0, a=a, b=b, x1=k, x2=index, x3=int(bool(g.result)))


def _lower_guard(L, index, g):
    k = _COMPARISONS.get(g.fn) if type(g.fn) is type(operator.lt) else None
    if k is not None:
        _lower_comparison(L, index, g, k)
        return
    kind = getattr(g.fn, "_vm_guard", None)
    if kind is None:
        raise NotLowerable(f"a guard without a lowering: {g.describe()}")
    if kind == "positive":
        (x,) = g.args
        a, n = L.dense(x)
        expect = np.asarray(g.result, dtype=bool).ravel().astype(np.int64)
        if expect.size != n:
            raise NotLowerable("a guard of another shape")
        L.emit(O.GUARD_POSITIVE, n, 0, a=a, x1=L.table(expect), x2=index)
    elif kind == "bound_case":
        lb, ub = g.args[0], g.args[1]
        a = L.slot(-math.inf if lb is None else lb)[0]
        b = L.slot(math.inf if ub is None else ub)[0]
        if L.shape_of(lb if lb is not None else 0.0) != () or \
                L.shape_of(ub if ub is not None else 0.0) != ():
            raise NotLowerable("a bound guard on arrays")
        L.emit(O.GUARD_BOUNDS, 1, 0, a=a, b=b, x1=int(g.result), x2=index)
    elif kind == "nonfinite_branch":
        # a branch for infinite/zero edge values: taken at the recording point, it is
        # not lowered; not taken, the instructions after it see such a value only as a
        # non-finite result, which the eager tape decides (kernel.py)
        if g.result:
            raise NotLowerable(f"an edge-value branch taken: {g.describe()}")
    elif type(kind) is tuple and kind[0] == "args":
        # a density's argument check: the traced arguments checked again (constants
        # were checked when recorded and do not change)
        for x, k in zip(g.args, kind[1]):
            if k is None or not L.traced(x):
                continue
            a, n = L.dense(x)
            L.emit(O.CHECK_ARG, n, 0, a=a, x1=_CHECK_SETS[k])
    elif kind in ("check_positive", "check_nonnegative"):
        (x,) = g.args
        a, n = L.dense(x)
        L.emit(O.CHECK_POSITIVE, n, 0, a=a, x1=int(kind == "check_positive"))
    else:
        raise NotLowerable(f"unknown guard kind {kind!r}")


def _assemble(L, rec, dim, out_off, out_shape, value_only, result_shape):
    nvar = L.top
    code = np.array(L.rows, dtype=np.int64).reshape(-1, O.ROW)
    aux = np.concatenate(L.aux) if L.aux else np.zeros(1, dtype=np.int64)

    def patch(a):
        big = a >= _CONST
        a[big] = a[big] - _CONST + nvar
    for f in (O.A, O.B, O.C, O.X1):
        col = code[:, f]
        if f == O.X1:
            # X1 is an offset into V only for these ops (else a size or a table offset)
            sel = np.isin(code[:, O.OP], (O.POISSON, O.POISSON_LOG, O.STUDENT_T,
                                               O.POISSON_SS, O.BINOMIAL_LOGIT))
            sub = col[sel]
            patch(sub)
            col[sel] = sub
        else:
            patch(col)
        code[:, f] = col
    if out_off >= _CONST:
        raise NotLowerable("the output is a constant")
    patch(aux)
    V = np.zeros(nvar + L.const_len)
    if L.consts:
        V[nvar:] = np.concatenate(L.consts)
    p = Program()
    p.code = np.ascontiguousarray(code)
    p.aux = np.ascontiguousarray(aux)
    p.V = V
    p.A = np.zeros_like(V)
    p.dim = dim
    p.out = out_off
    p.nvar = nvar
    p.size = _prod(out_shape)
    p.value_only = value_only
    p.guards = rec.guards
    p.nodes = len(rec.nodes)
    p.inexact = True
    p.fn = _replay_function(p, result_shape)
    p.source = p.listing()
    return p


def _replay_function(p, result_shape):
    from . import kernel
    code, aux, V, A, dim, out, nvar = p.code, p.aux, p.V, p.A, p.dim, p.out, p.nvar
    vg = kernel.value_grad
    vo = kernel.value_only
    zeros = np.zeros
    DOMAIN = O.DOMAIN
    f64 = np.float64
    ndarray = np.ndarray

    def _vector(x):
        if type(x) is ndarray and x.dtype == f64 and x.flags.c_contiguous:
            return x.reshape(-1) if x.ndim != 1 else x
        return np.ascontiguousarray(x, dtype=f64).reshape(-1)

    # V and A are the program's: the kernels release the GIL, so a call made while
    # another thread runs this program (chains under a ThreadPoolExecutor share the
    # model) works on private copies instead of mixing its values into the other's
    busy = threading.Lock()
    free, done = busy.acquire, busy.release

    if result_shape is not None:
        size = p.size

        def fn(x):
            res = zeros(size)
            if free(False):
                try:
                    st = vo(code, aux, V, dim, out, size, _vector(x), res)
                finally:
                    done()
            else:
                st = vo(code, aux, V.copy(), dim, out, size, _vector(x), res)
            if st:
                return _status(st)
            if not np.isfinite(res).all():
                raise FloatingPointError("a non-finite entry: the eager tape decides")
            return 0.0, res.reshape(result_shape)
    elif p.value_only:
        def fn(x):
            res1 = zeros(1)
            if free(False):
                try:
                    st = vo(code, aux, V, dim, out, 1, _vector(x), res1)
                finally:
                    done()
            else:
                st = vo(code, aux, V.copy(), dim, out, 1, _vector(x), res1)
            if st:
                return _status(st)
            v = float(res1[0])
            if v != v or v in (math.inf, -math.inf):
                raise FloatingPointError("a non-finite value: the eager tape decides")
            return v, None
    else:
        def fn(x):
            g = zeros(dim)
            if free(False):
                try:
                    st, lp = vg(code, aux, V, A, dim, out, nvar, _vector(x), g)
                finally:
                    done()
            else:
                st, lp = vg(code, aux, V.copy(), zeros(A.size), dim, out, nvar,
                            _vector(x), g)
            if st:
                return _status(st)
            return lp, g
    return fn


def _status(st):
    if st == O.DOMAIN:
        # the caller's contract: ArithmeticError -> the eager tape decides this point
        raise FloatingPointError("outside an argument's domain: the eager tape decides")
    return int(st) - 1


_SCALARS = frozenset((float, int, bool, np.float64, np.int64, np.int32, np.float32,
                      np.bool_))


def _shape(v):
    """np.shape, without its cost for the scalars and arrays of a recording."""
    t = type(v)
    if t is np.ndarray:
        return v.shape
    if t in _SCALARS:
        return ()
    return np.shape(v)


def _prod(shape):
    r = 1
    for s in shape:
        r *= int(s)
    return r

