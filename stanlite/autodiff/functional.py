"""Functional AD: ``grad``, ``value_and_grad``, ``vjp``, ``jacobian``.

Each functional opens its own nested tape (:func:`~stanlite.autodiff.tape.nested`),
so calls nest freely - ``grad`` of a function that itself calls ``grad`` - and the
region is released when it returns, even on an exception. The cyclic garbage
collector is paused while recording and sweeping (see :mod:`.tape`).

Inputs may be floats, arrays or (when nested inside another differentiation)
traced values; outputs are plain floats/arrays, or traced values of the enclosing
level when the input was traced.
"""

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import DifferentiationError
from . import library
from .tape import gc_paused, gc_paused_nested, nested, sweep
from .var import Box, _as_float_value, make_leaf, shape_of

__all__ = ["grad", "value_and_grad", "vjp", "jacobian", "jvp", "hvp", "hessian",
           "jacobian_forward", "jacobian_reverse", "grad_hessian", "grad_trace_mat_hessian"]


def _zeros(shape):
    return 0.0 if shape == () else np.zeros(shape)


def _unwrap_out(y, tape):
    """The value of ``y`` seen from outside ``tape`` (strip this level only)."""
    if isinstance(y, Box) and y.tape is tape:
        return y.value
    return y


def _adj_or_zeros(xv):
    a = xv.adj
    return _zeros(xv.shape) if a is None else a


def _leaf(value, tape):
    """An independent variable on ``tape`` (no checks: ``tape`` is a fresh scope)."""
    return make_leaf(value if isinstance(value, Box) else _as_float_value(value), tape)


def _lift(args, argnums, tape):
    args = list(args)
    leaves = []
    for i in argnums:
        leaf = _leaf(args[i], tape)
        args[i] = leaf
        leaves.append(leaf)
    return args, leaves


_GC = gc_paused()


def sweep_scalar(y, tape):
    """Sweep ``tape`` from ``y`` (adjoint 1.0) if ``y`` is recorded on it: True;
    False for an output that does not depend on the leaves (a zero gradient). A
    non-scalar output is an error either way. (value_and_grad's and the recordings'
    one reverse sweep, recording.py.)"""
    if isinstance(y, Box) and y.tape is tape:
        if type(y.value) is not float and y.shape != ():
            raise DifferentiationError(
                f"grad requires a scalar output, got shape {y.shape}; "
                "use sl.jacobian for vector outputs")
        y.adj = 1.0
        sweep(tape.nodes)           # the collector is paused by the caller's scope
        return True
    if shape_of(y) != ():
        raise DifferentiationError(
            f"grad requires a scalar output, got shape {shape_of(y)}")
    return False


def _argnums(argnum):
    return (argnum,) if isinstance(argnum, int) else tuple(argnum)


def value_and_grad(f: Callable[..., Any], argnum: int | Sequence[int] = 0
                   ) -> Callable[..., tuple[Any, Any]]:
    """``x -> (f(x), df/dx)`` for a scalar-valued ``f``, in one reverse sweep.

    ``argnum`` may be an int or a tuple of ints (then the gradient is a tuple).

    Example
    -------
    >>> import numpy as np, stanlite as sl
    >>> v, g = sl.value_and_grad(lambda x: sl.sum(x ** 2))(np.array([1.0, 2.0]))
    >>> v, g
    (5.0, array([2., 4.]))
    """
    nums = _argnums(argnum)
    single = isinstance(argnum, int)

    def value_and_grad_f(*args):
        with gc_paused_nested() as tape:
            if single:
                leaf = _leaf(args[argnum], tape)
                args = list(args)
                args[argnum] = leaf
                leaves = (leaf,)
            else:
                args, leaves = _lift(args, nums, tape)
            y = f(*args)
            if sweep_scalar(y, tape):
                val = y.value
                if single:
                    a = leaf.adj
                    grads = (_zeros(leaf.shape) if a is None else a,)
                else:
                    grads = tuple(_adj_or_zeros(v) for v in leaves)
            else:
                grads = tuple(_zeros(v.shape) for v in leaves)
                val = y
        if type(val) is not float and not isinstance(val, Box):
            val = float(val)
        return val, (grads[0] if single else grads)

    return value_and_grad_f


def grad(f: Callable[..., Any], argnum: int | Sequence[int] = 0) -> Callable[..., Any]:
    """``x -> df/dx`` for a scalar-valued ``f`` (reverse mode, one sweep).

    Example
    -------
    >>> import numpy as np, stanlite as sl
    >>> sl.grad(lambda x: sl.sum(sl.sin(x)))(np.array([0.0, np.pi]))
    array([ 1., -1.])
    """
    vg = value_and_grad(f, argnum)

    def grad_f(*args):
        return vg(*args)[1]

    return grad_f


def vjp(f: Callable[..., Any], *xs: Any, cotangent: Any) -> tuple[Any, tuple[Any, ...]]:
    """``(f(*xs), J^T cotangent)``: a vector-Jacobian product in one reverse sweep.

    ``cotangent`` has the shape of ``f``'s output; the result has one entry per
    argument, each of that argument's shape.
    """
    with nested() as tape, gc_paused():
        args, leaves = _lift(xs, range(len(xs)), tape)
        y = f(*args)
        if isinstance(y, Box) and y.tape is tape:
            if shape_of(cotangent) != y.shape:
                raise ValueError(f"vjp: cotangent shape {shape_of(cotangent)} does not "
                                 f"match the output shape {y.shape}")
            y.backward(seed=cotangent, retain=True)
            grads = tuple(_adj_or_zeros(v) for v in leaves)
        else:
            grads = tuple(_zeros(v.shape) for v in leaves)
        return _unwrap_out(y, tape), grads


def jacobian(f: Callable[[Any], Any]) -> Callable[[Any], np.ndarray]:
    """``x -> J`` with ``J[i..., j...] = d f(x)[i...] / d x[j...]``.

    Chooses the mode by shape: reverse (one sweep per output) when the output has no
    more elements than the input, forward (one vector-mode pass) otherwise - falling
    back to reverse if some primitive has no forward rule.

    Example
    -------
    >>> import numpy as np, stanlite as sl
    >>> sl.jacobian(lambda x: x ** 2)(np.array([1.0, 3.0]))
    array([[2., 0.],
           [0., 6.]])
    """
    rev = jacobian_reverse(f)
    fwd = jacobian_forward(f)

    def jacobian_f(x):
        from .var import value_of
        n = int(np.prod(shape_of(x), dtype=np.int64))
        m = int(np.prod(shape_of(f(value_of(x))), dtype=np.int64))
        if m > n:
            try:
                return fwd(x)
            except DifferentiationError:
                pass
        return rev(x)

    return jacobian_f


def jacobian_reverse(f: Callable[[Any], Any]) -> Callable[[Any], np.ndarray]:
    """``x -> J`` by reverse mode: one recording, one sweep per output element.

    Example
    -------
    >>> import numpy as np, stanlite as sl
    >>> sl.jacobian_reverse(lambda x: sl.sum(x) * x)(np.array([1.0, 3.0]))
    array([[5., 1.],
           [3., 7.]])
    """
    def jacobian_f(x):
        with nested() as tape, gc_paused():
            args, leaves = _lift((x,), (0,), tape)
            xv = leaves[0]
            y = f(args[0])
            out_shape = shape_of(y)
            in_shape = xv.shape
            m = int(np.prod(out_shape, dtype=np.int64))
            if not (isinstance(y, Box) and y.tape is tape):
                return np.zeros(out_shape + in_shape)
            rows = []
            for i in range(m):
                tape.zero_adjoints()
                xv.adj = None
                seed = np.zeros(m)
                seed[i] = 1.0
                y.backward(seed=float(seed[0]) if out_shape == () else seed.reshape(out_shape),
                           retain=True)
                rows.append(_adj_or_zeros(xv))
        if any(isinstance(r, Box) for r in rows):
            from .extend import reshape
            return reshape(library.lookup("stack")(rows), out_shape + in_shape)
        return np.reshape(np.array(rows, dtype=float), out_shape + in_shape)

    return jacobian_f


# --------------------------------------------------------------------------------------
# forward mode and nested derivatives
# --------------------------------------------------------------------------------------
def _forward(f, x, tangent, batch=(), identity=False):
    """``(f(x), tangent of f(x))`` with ``x`` perturbed by ``tangent`` on a fresh trace.

    ``identity``: the tangent is the identity (see :func:`.dual.is_identity_seed`)."""
    from .dual import Dual, forward_scope
    with forward_scope(batch) as trace:
        xv = x if isinstance(x, Box) else _as_float_value(x)
        tv = tangent if isinstance(tangent, Box) else _as_float_value(tangent)
        if shape_of(tv) != tuple(batch) + shape_of(xv):
            raise ValueError(f"tangent shape {shape_of(tv)} does not match the input "
                             f"shape {tuple(batch) + shape_of(xv)}")
        if identity and len(shape_of(xv)) == 1 and type(tv) is np.ndarray:
            from .dual import identity_seed
            with identity_seed(tv):         # tangents are computed on demand: read
                return _value_tangent(f(Dual(xv, tv, trace)), trace, batch)  # inside
        return _value_tangent(f(Dual(xv, tv, trace)), trace, batch)


def _value_tangent(y, trace, batch):
    if isinstance(y, Box) and y.tape is trace:
        return y.value, y.tangent
    return y, np.zeros(tuple(batch) + shape_of(y))


def jvp(f: Callable[[Any], Any]) -> Callable[[Any, Any], tuple[Any, Any]]:
    """``(x, v) -> (f(x), J(x) v)``: a Jacobian-vector product in one forward pass.

    Example
    -------
    >>> import numpy as np, stanlite as sl
    >>> sl.jvp(lambda x: x * x)(np.array([1.0, 3.0]), np.array([1.0, 1.0]))
    (array([1., 9.]), array([2., 6.]))
    """
    def jvp_f(x, v):
        return _forward(f, x, v)
    return jvp_f


def hvp(f: Callable[[Any], Any]) -> Callable[[Any, Any], Any]:
    """``(x, v) -> H(x) v`` for scalar ``f``: forward-over-reverse, one pass.

    Example
    -------
    >>> import numpy as np, stanlite as sl
    >>> sl.hvp(lambda x: sl.sum(x ** 3))(np.array([1.0, 2.0]), np.array([1.0, 0.0]))
    array([6., 0.])
    """
    g = grad(f)

    def hvp_f(x, v):
        return _forward(g, x, v)[1]
    return hvp_f


def _identity_tangents(x):
    xs = shape_of(x)
    n = int(np.prod(xs, dtype=np.int64))
    return n, np.eye(n).reshape((n,) + xs)


def hessian(f: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``x -> H(x)`` for scalar ``f``, by forward-over-reverse in vector mode.

    All ``n`` directions ride on one batched tangent (the identity), so the whole
    Hessian costs one reverse sweep over duals of width ``n`` - not ``n`` sweeps.
    The result has shape ``x.shape + x.shape``.

    Example
    -------
    >>> import numpy as np, stanlite as sl
    >>> sl.hessian(lambda x: x[0] ** 2 * x[1])(np.array([1.0, 3.0]))
    array([[6., 2.],
           [2., 0.]])
    """
    g = grad(f)

    def hessian_f(x):
        xv = x if isinstance(x, Box) else _as_float_value(x)
        n, eye = _identity_tangents(xv)
        _, t = _forward(g, xv, eye, (n,), identity=True)
        return _reshape_out(t, shape_of(xv) + shape_of(xv))
    return hessian_f


def _reshape_out(t, shape):
    if isinstance(t, Box):
        from .extend import reshape
        return reshape(t, shape)
    return np.reshape(t, shape)


def jacobian_forward(f: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``x -> J`` by forward mode: one pass with ``x.size`` batched tangents."""
    def jacobian_f(x):
        xv = x if isinstance(x, Box) else _as_float_value(x)
        n, eye = _identity_tangents(xv)
        y, t = _forward(f, xv, eye, (n,), identity=True)
        ys = shape_of(y)
        # t has shape (n,) + ys: move the input axis last
        from .extend import reshape
        if isinstance(t, Box):
            tt = library.lookup("transpose")(reshape(t, (n, -1)))
            return reshape(tt, ys + shape_of(xv))
        return np.reshape(np.reshape(t, (n, -1)).T, ys + shape_of(xv))
    return jacobian_f


def grad_hessian(f: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``x -> T`` with ``T[i, j, k] = d^3 f / dx_i dx_j dx_k`` (small ``n``; for tests).

    Forward mode (vector) over the forward-over-reverse Hessian.
    """
    return jacobian_forward(hessian(f))


def grad_trace_mat_hessian(f: Callable[[Any], Any]) -> Callable[[Any, Any], Any]:
    """``(x, M) -> d/dx tr(M H(x))`` with ``M`` held constant.

    The contraction SoftAbs Riemannian HMC needs (Betancourt 2013; Stan's
    ``grad_tr_mat_times_hessian``): reverse mode over the forward-over-reverse Hessian,
    so it costs a constant multiple of one Hessian and never forms the n^3 tensor.

    Example
    -------
    >>> import numpy as np, stanlite as sl
    >>> f = lambda x: sl.sum(x ** 4) / 12          # H = diag(x^2)
    >>> sl.grad_trace_mat_hessian(f)(np.array([1.0, 2.0]), np.eye(2))   # d/dx sum x^2
    array([2., 4.])
    """
    h = hessian(f)

    def gtmh(x, M):
        M = np.asarray(M, dtype=float)

        def trace_mh(z):
            H = h(z)
            return library.lookup("sum")(M * library.lookup("transpose")(H))
        return grad(trace_mh)(x)
    return gtmh
