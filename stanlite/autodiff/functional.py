"""Functional AD: ``grad``, ``value_and_grad``, ``vjp``, ``jacobian``.

Each functional opens its own nested tape (:func:`~stanlite.autodiff.tape.nested`),
so calls nest freely - ``grad`` of a function that itself calls ``grad`` - and the
region is released when it returns, even on an exception. The cyclic garbage
collector is paused while recording and sweeping (see :mod:`.tape`).

Inputs may be floats, arrays or (when nested inside another differentiation)
traced values; outputs are plain floats/arrays, or traced values of the enclosing
level when the input was traced.
"""

import numpy as np

from ..errors import DifferentiationError
from .tape import gc_paused, nested
from .var import Box, Var, _as_float_value, shape_of

__all__ = ["grad", "value_and_grad", "vjp", "jacobian"]


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
    v = _new(Var)
    v.value = value if isinstance(value, Box) else _as_float_value(value)
    v.adj = None
    v.tape = tape
    v.bp = None
    v.x = None
    v.y = None
    return v


def _lift(args, argnums, tape):
    args = list(args)
    leaves = []
    for i in argnums:
        leaf = _leaf(args[i], tape)
        args[i] = leaf
        leaves.append(leaf)
    return args, leaves


_new = object.__new__
_GC = gc_paused()


def _argnums(argnum):
    return (argnum,) if isinstance(argnum, int) else tuple(argnum)


def value_and_grad(f, argnum=0):
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
        with nested() as tape, _GC:
            if single:
                leaf = _leaf(args[argnum], tape)
                args = list(args)
                args[argnum] = leaf
                leaves = (leaf,)
            else:
                args, leaves = _lift(args, nums, tape)
            y = f(*args)
            if isinstance(y, Box) and y.tape is tape:
                if y.shape != ():
                    raise DifferentiationError(
                        f"grad requires a scalar output, got shape {y.shape}; "
                        "use sl.jacobian for vector outputs")
                tape.backward(y, 1.0, retain=True)
                grads = tuple(_adj_or_zeros(v) for v in leaves)
                val = y.value
            else:
                if shape_of(y) != ():
                    raise DifferentiationError(
                        f"grad requires a scalar output, got shape {shape_of(y)}")
                grads = tuple(_zeros(v.shape) for v in leaves)
                val = y
        if type(val) is not float and not isinstance(val, Box):
            val = float(val)
        return val, (grads[0] if single else grads)

    return value_and_grad_f


def grad(f, argnum=0):
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


def vjp(f, *xs, cotangent):
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


def jacobian(f):
    """``x -> J`` with ``J[i..., j...] = d f(x)[i...] / d x[j...]`` (reverse mode).

    One recording, then one reverse sweep per output element (rows of J).

    Example
    -------
    >>> import numpy as np, stanlite as sl
    >>> sl.jacobian(lambda x: x ** 2)(np.array([1.0, 3.0]))
    array([[2., 0.],
           [0., 6.]])
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
            from ..math.structure import reshape, stack
            return reshape(stack(rows), out_shape + in_shape)
        return np.reshape(np.array(rows, dtype=float), out_shape + in_shape)

    return jacobian_f
