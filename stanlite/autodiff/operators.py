"""The Python operators and array methods of traced values, in one place.

``v + w``, ``-v``, ``v @ w``, ``v < w``, ``v[i]``, ``v.T``, ``v.sum()``... on a
reverse-mode :class:`~stanlite.autodiff.var.Var` or a forward-mode
:class:`~stanlite.autodiff.dual.Dual`. Each one is a call of a primitive of
:mod:`stanlite.math`, which dispatches on the highest-level traced argument; so one
set of methods serves both kinds of value. They are installed here on their common
base :class:`~stanlite.autodiff.var.Box` (Var and Dual inherit them; nothing is copied
by name), when :mod:`stanlite.autodiff` is imported.

The AD core does not import the math library (it sits above; the layering of
docs/architecture.md): the math modules hand their primitives in with
:func:`register` as they define them, and the methods below look them up in this
module's namespace at call time. The table :data:`PRIMITIVES` lists every name a
method needs; until a name is registered its methods raise, naming it.

The hottest operators (``+ - * / **``, unary ``-`` and ``Var``'s indexing) are the
registered primitives themselves, set as the class attribute at registration: a
wrapper would cost a Python frame per operation of scalar code. The reflected ones
(``1.0 + v``) and the methods take one frame to reorder their arguments.

>>> import stanlite as sl
>>> from stanlite.autodiff import operators
>>> operators.PRIMITIVES["__radd__"]
'add'
>>> with sl.nested():
...     v = sl.Var(2.0)
...     ((3.0 - v) * v).value
2.0
"""

import operator

import numpy as np

from .dual import Dual
from .var import UFUNCS, Box, Var, guarded

__all__ = ["register", "PRIMITIVES"]


def _unregistered(name):
    def missing(*args, **kw):
        raise NotImplementedError(
            f"the primitive {name!r} behind an operator of traced values is not "
            "registered: import stanlite.math (import stanlite does)")
    missing.__name__ = f"unregistered_{name}"
    return missing


# the registered primitives, one module-level name each (``_add`` for "add"): a
# method's lookup is a global lookup, as it was when the methods lived in math/
_add = _subtract = _multiply = _divide = _power = _negative = _fabs = None
_matmul = _dot = _reshape = _transpose = _flatten = _getitem = None
_sum = _mean = _prod = _max = _min = _variance = _sd = None
_cumulative_sum = _cumprod = _sort_indices_asc = None


# -- arithmetic --------------------------------------------------------------------
def __radd__(self, o):
    return _add(o, self)


def __rsub__(self, o):
    return _subtract(o, self)


def __rmul__(self, o):
    return _multiply(o, self)


def __rtruediv__(self, o):
    return _divide(o, self)


def __rpow__(self, o):
    return _power(o, self)


def __pos__(self):
    return self


def __abs__(self):
    return _fabs(self)


def __matmul__(self, o):
    return _matmul(self, o)


def __rmatmul__(self, o):
    return _matmul(o, self)


# -- comparisons: a decision on values, which ``guarded`` makes a guard of sl.compile
def _comparison(op):
    def compare(self, other):
        return guarded(op, self, other)
    compare.__name__ = f"__{op.__name__}__"
    return compare


# -- indexing and shape ------------------------------------------------------------
def __getitem__(self, idx):
    # the general form (a Dual, a Var of a lower level are dispatched by the
    # primitive); Var's own is its first-order fast path, registered as "var_getitem"
    return _getitem(self, idx)


def _T(self):
    return _transpose(self)


def reshape(self, *shape):
    return _reshape(self, shape[0] if len(shape) == 1 else shape)


def flatten(self):
    return _flatten(self)


def transpose(self, *axes):
    """``v.transpose()``, ``v.transpose(1, 0)`` or ``v.transpose((1, 0))`` (numpy's)."""
    if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], (int, np.integer))):
        axes = axes[0]
    return _transpose(self, axes or None)


# -- reductions and products -------------------------------------------------------
def sum(self, axis=None, keepdims=False):    # noqa: A001  (numpy's method name)
    return _sum(self, axis, keepdims)


def mean(self, axis=None, keepdims=False):
    return _mean(self, axis, keepdims)


def prod(self, axis=None, keepdims=False):
    return _prod(self, axis, keepdims)


def max(self, axis=None, keepdims=False):    # noqa: A001
    return _max(self, axis, keepdims)


def min(self, axis=None, keepdims=False):    # noqa: A001
    return _min(self, axis, keepdims)


def var(self, axis=None, ddof=0, keepdims=False):
    # numpy's default ddof=0 (Stan's ``variance`` has ddof=1)
    return _variance(self, axis, ddof, keepdims)


def std(self, axis=None, ddof=0, keepdims=False):
    return _sd(self, axis, ddof, keepdims)


def cumsum(self, axis=None):
    return _cumulative_sum(self, axis)


def cumprod(self, axis=None):
    return _cumprod(self, axis)


def dot(self, other):
    return _dot(self, other)


def argmax(self, axis=None):
    return guarded(lambda v: np.argmax(np.asarray(v), axis=axis), self)


def argmin(self, axis=None):
    return guarded(lambda v: np.argmin(np.asarray(v), axis=axis), self)


def argsort(self, axis=-1):
    return _sort_indices_asc(self, axis)


# attribute of Box -> the registered primitive it calls (None: none)
PRIMITIVES = {
    "__add__": "add", "__radd__": "add", "__sub__": "subtract", "__rsub__": "subtract",
    "__mul__": "multiply", "__rmul__": "multiply", "__truediv__": "divide",
    "__rtruediv__": "divide", "__pow__": "power", "__rpow__": "power",
    "__neg__": "negative", "__pos__": None, "__abs__": "fabs", "__matmul__": "matmul",
    "__rmatmul__": "matmul", "__lt__": None, "__le__": None, "__gt__": None,
    "__ge__": None, "__eq__": None, "__ne__": None, "__getitem__": "getitem",
    "T": "transpose", "reshape": "reshape", "flatten": "flatten", "ravel": "flatten",
    "transpose": "transpose", "sum": "sum", "mean": "mean", "prod": "prod",
    "max": "max", "min": "min", "var": "variance", "std": "sd",
    "cumsum": "cumulative_sum", "cumprod": "cumprod", "dot": "dot", "argmax": None,
    "argmin": None, "argsort": "sort_indices_asc",
}

# the operators that *are* their primitive (no frame of their own), and Var's
# first-order indexing: set as class attributes by ``register``
_DIRECT = {"add": ("__add__", Box), "subtract": ("__sub__", Box),
           "multiply": ("__mul__", Box), "divide": ("__truediv__", Box),
           "power": ("__pow__", Box), "negative": ("__neg__", Box),
           "var_getitem": ("__getitem__", Var)}

_METHODS = {
    "__radd__": __radd__, "__rsub__": __rsub__, "__rmul__": __rmul__,
    "__rtruediv__": __rtruediv__, "__rpow__": __rpow__, "__pos__": __pos__,
    "__abs__": __abs__, "__matmul__": __matmul__, "__rmatmul__": __rmatmul__,
    "__lt__": _comparison(operator.lt), "__le__": _comparison(operator.le),
    "__gt__": _comparison(operator.gt), "__ge__": _comparison(operator.ge),
    "__eq__": _comparison(operator.eq), "__ne__": _comparison(operator.ne),
    "__getitem__": __getitem__, "T": property(_T), "reshape": reshape,
    "flatten": flatten, "ravel": flatten, "transpose": transpose, "sum": sum,
    "mean": mean, "prod": prod, "max": max, "min": min, "var": var, "std": std,
    "cumsum": cumsum, "cumprod": cumprod, "dot": dot, "argmax": argmax,
    "argmin": argmin, "argsort": argsort,
}
_NAMES = frozenset(p for p in PRIMITIVES.values() if p is not None) | set(_DIRECT)


def register(**primitives):
    """The math layer's hand-in: ``register(add=add, matmul=matmul, ...)`` makes the
    operators of traced values call these primitives. Names are those of
    :data:`PRIMITIVES` (plus ``var_getitem``, Var's first-order indexing); another
    name is an error (a typo would leave an operator unregistered)."""
    unknown = set(primitives) - _NAMES
    if unknown:
        raise ValueError(f"register(): no operator calls {sorted(unknown)}")
    g = globals()
    for name, fn in primitives.items():
        if name in PRIMITIVES.values():
            g["_" + name] = fn
        direct = _DIRECT.get(name)
        if direct is not None:
            attr, cls = direct
            setattr(cls, attr, fn)


def _install():
    g = globals()
    for name in _NAMES - {"var_getitem"}:
        if g["_" + name] is None:
            g["_" + name] = _unregistered(name)
    for attr, fn in _METHODS.items():
        setattr(Box, attr, fn)
    for name, (attr, cls) in _DIRECT.items():
        if attr not in _METHODS:
            setattr(cls, attr, _unregistered(name))
    # comparisons of numpy values against traced ones (``np.float64(1) < v``, np.less)
    UFUNCS.update({
        np.less: lambda a, b: guarded(operator.lt, a, b),
        np.less_equal: lambda a, b: guarded(operator.le, a, b),
        np.greater: lambda a, b: guarded(operator.gt, a, b),
        np.greater_equal: lambda a, b: guarded(operator.ge, a, b),
        np.equal: lambda a, b: guarded(operator.eq, a, b),
        np.not_equal: lambda a, b: guarded(operator.ne, a, b),
    })


# once per process: a second copy of this file (pytest's doctests import modules
# under their own names) must not put methods bound to its empty registry on Box
if not getattr(Box, "_operators_installed", False):
    _install()
    Box._operators_installed = True
assert set(_METHODS) | {a for a, c in _DIRECT.values() if c is Box} == set(PRIMITIVES)
assert Dual.__mro__[1] is Box      # Dual takes the operators from Box, as Var does
