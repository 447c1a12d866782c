"""Give forward-mode ``Dual`` values the operators and array methods of ``Var``.

The math modules install Python operators (``+``, ``@``, comparisons...) and array
methods (``.T``, ``.sum()``...) on :class:`~stanlite.autodiff.var.Var` as they
define the primitives. Every one of those is a primitive call that dispatches on the
highest-level traced argument, so the very same functions serve duals; only
indexing differs (``Var`` has a first-order fast path that records a reverse node).
"""

import numpy as np

from ..autodiff.dual import Dual
from ..autodiff.var import Var
from .structure import _check_index, getitem

__all__ = []

_SHARED = [
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
    "__rtruediv__", "__pow__", "__rpow__", "__neg__", "__pos__", "__abs__", "__matmul__",
    "__rmatmul__", "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__",
    "T", "reshape", "flatten", "ravel", "transpose", "sum", "mean", "prod", "max", "min",
    "cumsum", "cumprod", "dot", "var", "std", "argmax", "argmin", "argsort",
]

for _name in _SHARED:
    if _name in Var.__dict__:
        setattr(Dual, _name, Var.__dict__[_name])


def _dual_getitem(self, idx):
    if type(idx) is list:
        idx = np.asarray(idx)
    _check_index(idx)
    return getitem(self, idx)


Dual.__getitem__ = _dual_getitem
Dual.__hash__ = object.__hash__
