"""Declarations of a model's data and parameters: Stan's typed block variables.

A model class lists its variables as class attributes, in order, the way a Stan
program lists them in its ``data`` and ``parameters`` blocks::

    class Regression(sl.Model):
        N = sl.data.int(lower=0)
        x = sl.data.vector("N")
        y = sl.data.vector("N")
        sigma = sl.param.real(lower=0)
        beta = sl.param.vector(2, offset=0, multiplier=10)

Sizes are ints, names of (earlier) integer data, or callables of data
(``lambda N: N - 1``). Bounds, offsets and multipliers are numbers, names of data or
earlier parameters, or callables whose argument names are earlier parameters or data
(``upper=lambda alpha1: 1 - alpha1``); :mod:`stanlite.model` evaluates them and hands
the values to the transform, so the Jacobian accounts for them.

This module owns *what a declaration means*: resolving its shape, validating a data
value (each failure is a :class:`~stanlite.errors.DataError` naming the field, what
was expected and what came) and choosing the constraint transform of a parameter.
"""

import inspect
import numbers
import weakref

import numpy as np

from . import transforms
from .errors import DataError, ModelError

__all__ = ["data", "param", "Decl", "DataDecl", "ParamDecl"]


class Decl:
    """One declared variable: its kind, its size expressions and its bounds."""

    block = None

    def __init__(self, kind, dims=(), lower=None, upper=None, offset=None,
                 multiplier=None, dtype="real"):
        self.kind = kind
        self.dims = tuple(dims)
        self.lower = lower
        self.upper = upper
        self.offset = offset
        self.multiplier = multiplier
        self.dtype = dtype
        self.name = None
        if (offset is not None or multiplier is not None) and (
                lower is not None or upper is not None):
            raise ModelError("a declaration takes either bounds (lower/upper) or "
                             "offset/multiplier, not both (as in Stan)")

    def __set_name__(self, owner, name):
        self.name = name

    def __repr__(self):
        dims = ", ".join(map(repr, self.dims))
        extra = "".join(f", {k}={getattr(self, k)!r}" for k in
                        ("lower", "upper", "offset", "multiplier")
                        if getattr(self, k) is not None)
        return f"{self.block}.{self.kind}({dims}{extra})"

    # ---- shapes ----------------------------------------------------------------------
    def shape(self, env):
        """The concrete shape, sizes resolved against ``env`` (data seen so far)."""
        dims = tuple(_resolve_size(self, d, env) for d in self.dims)
        if self.kind == "cholesky_factor_cov" and len(dims) == 1:
            dims = (dims[0], dims[0])
        if self.kind in ("cholesky_factor_corr", "corr_matrix", "cov_matrix"):
            dims = (dims[0], dims[0])
        return dims

    def describe(self, shape):
        base = {"int": "int", "real": "real"}.get(self.kind)
        if base is None and self.kind == "array":
            base = f"array[{', '.join(map(str, shape))}] {self.dtype}"
        elif base is None:
            base = f"{self.kind}[{', '.join(map(str, shape))}]"
        b = []
        if self.lower is not None:
            b.append(f"lower={_show(self.lower)}")
        if self.upper is not None:
            b.append(f"upper={_show(self.upper)}")
        return base + (f"<{', '.join(b)}>" if b else "")


def _show(b):
    if callable(b):
        return "<function of " + ", ".join(inspect.signature(b).parameters) + ">"
    return repr(b)


def _resolve_size(decl, d, env):
    if isinstance(d, str):
        if d not in env:
            raise ModelError(f"'{decl.name}': its size '{d}' names no earlier data field")
        v = env[d]
    elif callable(d):
        v = call_with_names(d, env, f"the size of '{decl.name}'")
    else:
        v = d
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Integral, np.integer)):
        raise DataError(f"'{decl.name}': its size {d!r} must be an int, got {v!r}")
    if v < 0:
        raise DataError(f"'{decl.name}': its size {d!r} is negative ({v})")
    return int(v)


def call_with_names(fun, env, what):
    """Call ``fun`` with the values its argument names refer to in ``env``."""
    names = argument_names(fun)
    missing = [n for n in names if n not in env]
    if missing:
        raise ModelError(f"{what}: argument(s) {missing} name no data field or earlier "
                         "parameter")
    return fun(*[env[n] for n in names])


def argument_names(fun):
    # a plain function's names are remembered (a bound is called at every evaluation,
    # and inspect.signature costs tens of microseconds): keyed weakly by the function,
    # valid while its code object is the same
    code = getattr(fun, "__code__", None)
    if code is not None and (getattr(fun, "__wrapped__", None) is not None
                             or getattr(fun, "__signature__", None) is not None):
        code = None
    if code is not None:
        try:
            hit = _ARGUMENT_NAMES.get(fun)
        except TypeError:                   # unhashable
            code = hit = None
        if hit is not None and hit[0] is code:
            return list(hit[1])
    names = [p.name for p in inspect.signature(fun).parameters.values()
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if code is not None:
        try:
            _ARGUMENT_NAMES[fun] = (code, tuple(names))
        except TypeError:                   # not weakly referenceable
            pass
    return names


_ARGUMENT_NAMES = weakref.WeakKeyDictionary()


def resolve_bound(decl, b, env):
    """A bound's value: a number, a data/parameter name, or a callable of names."""
    if b is None:
        return None
    if isinstance(b, str):
        if b not in env:
            raise ModelError(f"'{decl.name}': bound '{b}' names no data field or earlier "
                             "parameter")
        return env[b]
    if callable(b):
        return call_with_names(b, env, f"a bound of '{decl.name}'")
    return b


# --------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------
class DataDecl(Decl):
    block = "data"

    def __init__(self, kind, dims=(), lower=None, upper=None, dtype="real",
                 allow_nonfinite=False):
        super().__init__(kind, dims, lower=lower, upper=upper, dtype=dtype)
        self.allow_nonfinite = allow_nonfinite

    def validate(self, value, env):
        """Convert ``value`` to the declared type or raise DataError naming the field."""
        shape = self.shape(env)
        expected = self.describe(shape)
        name = self.name
        is_int = self.kind == "int" or self.dtype == "int"
        if isinstance(value, str) or value is None:
            raise DataError(f"data field '{name}': expected {expected}, got {_got(value)}")
        try:
            arr = np.asarray(value)
        except Exception:                                  # ragged lists and the like
            raise DataError(f"data field '{name}': expected {expected}, got a value numpy "
                            f"cannot read as an array ({type(value).__name__})") from None
        if arr.dtype == object:
            raise DataError(f"data field '{name}': expected {expected}, got a ragged or "
                            "mixed-type sequence")
        if arr.dtype.kind not in "biuf":
            raise DataError(f"data field '{name}': expected {expected}, got {_got(value)}")
        if is_int:
            if arr.dtype.kind == "f":
                raise DataError(f"data field '{name}': expected {expected}, got a float "
                                f"value ({_first(arr)}); integer data must be given as "
                                "ints")
            arr = arr.astype(np.int64)
        else:
            arr = arr.astype(np.float64)
        if arr.shape != shape:
            if arr.size == 1 and int(np.prod(shape, dtype=np.int64)) == 1 and shape:
                arr = arr.reshape(shape)       # a length-1 vector given as a scalar
            else:
                raise DataError(f"data field '{name}': expected {expected} (shape "
                                f"{shape}), got shape {arr.shape}")
        if not is_int and not self.allow_nonfinite:
            bad = ~np.isfinite(arr)
            if bad.any():
                raise DataError(f"data field '{name}': expected finite values, "
                                f"{_at(bad, arr)}")
        for b, op, word in ((self.lower, np.greater_equal, ">="),
                            (self.upper, np.less_equal, "<=")):
            if b is None:
                continue
            bv = resolve_bound(self, b, env)
            ok = op(arr, bv)
            if not np.all(ok):
                bad = ~np.broadcast_to(ok, arr.shape)
                raise DataError(f"data field '{name}': expected every value {word} "
                                f"{_show_value(bv)}, {_at(bad, arr)}")
        if not shape:
            return int(arr) if is_int else float(arr)
        arr.setflags(write=False)
        return arr


def _got(value):
    if isinstance(value, str):
        return f"a string {value!r}"
    if value is None:
        return "None"
    return f"{type(value).__name__} {value!r}"[:80]


def _first(arr):
    return arr.flat[0] if arr.size else arr


def _show_value(v):
    a = np.asarray(v)
    return repr(float(a)) if a.ndim == 0 else "the bound"


def _at(bad, arr):
    if arr.ndim == 0:
        return f"got {arr.item()!r}"
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    # element names are 1-based, as in Stan's messages and param_names()
    return f"element [{', '.join(str(i + 1) for i in idx)}] is {arr[idx].item()!r}"


class _DataNamespace:
    """``sl.data``: declarations of a model's data block."""

    @staticmethod
    def int(lower=None, upper=None):
        """An integer: ``N = sl.data.int(lower=0)``."""
        return DataDecl("int", (), lower, upper, dtype="int")

    @staticmethod
    def real(lower=None, upper=None, allow_nonfinite=False):
        """A real number."""
        return DataDecl("real", (), lower, upper, allow_nonfinite=allow_nonfinite)

    @staticmethod
    def vector(size, lower=None, upper=None, allow_nonfinite=False):
        """A vector of reals of length ``size`` (an int or a data name)."""
        return DataDecl("vector", (size,), lower, upper, allow_nonfinite=allow_nonfinite)

    @staticmethod
    def matrix(rows, cols, lower=None, upper=None, allow_nonfinite=False):
        """A ``rows x cols`` matrix of reals."""
        return DataDecl("matrix", (rows, cols), lower, upper,
                        allow_nonfinite=allow_nonfinite)

    @staticmethod
    def array(*dims, shape=None, dtype="real", lower=None, upper=None,
              allow_nonfinite=False):
        """An array of ints or reals: ``sl.data.array("N", dtype="int")`` or
        ``sl.data.array(shape=("N", 3))``."""
        if shape is not None:
            if dims:
                raise ModelError("give the array's dimensions positionally or as shape=, "
                                 "not both")
            dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        if dtype in (int, "int"):
            dtype = "int"
        elif dtype in (float, "real", "float"):
            dtype = "real"
        else:
            raise ModelError(f"array dtype must be 'int' or 'real', got {dtype!r}")
        return DataDecl("array", dims, lower, upper, dtype=dtype,
                        allow_nonfinite=allow_nonfinite)


# --------------------------------------------------------------------------------------
# parameters
# --------------------------------------------------------------------------------------
_STRUCTURED = ("simplex", "ordered", "positive_ordered", "unit_vector",
               "cholesky_factor_corr", "cholesky_factor_cov", "corr_matrix", "cov_matrix")


class ParamDecl(Decl):
    block = "param"

    def transform(self):
        """The constraint transform (bounds are evaluated later, per point)."""
        t = getattr(self, "_transform", None)
        if t is None:
            try:
                t = transforms.make(self.kind, lower=self.lower, upper=self.upper,
                                    offset=self.offset, multiplier=self.multiplier)
            except ValueError as e:
                raise ModelError(f"parameter '{self.name}': {e}") from None
            self._transform = t
        return t

    def bound_args(self, env):
        """The evaluated bounds, in the order the transform takes them."""
        return tuple(resolve_bound(self, getattr(self, n), env)
                     for n in self.transform().bound_names)


class _ParamNamespace:
    """``sl.param``: declarations of a model's parameters block."""

    @staticmethod
    def real(lower=None, upper=None, offset=None, multiplier=None):
        """A real parameter, optionally bounded or affinely transformed."""
        return ParamDecl("real", (), lower, upper, offset, multiplier)

    @staticmethod
    def vector(size, lower=None, upper=None, offset=None, multiplier=None):
        """A vector parameter of length ``size``."""
        return ParamDecl("vector", (size,), lower, upper, offset, multiplier)

    @staticmethod
    def matrix(rows, cols, lower=None, upper=None, offset=None, multiplier=None):
        """A ``rows x cols`` matrix parameter."""
        return ParamDecl("matrix", (rows, cols), lower, upper, offset, multiplier)

    @staticmethod
    def array(*dims, shape=None, lower=None, upper=None, offset=None, multiplier=None):
        """An array of reals: ``sl.param.array("J", 2)`` or ``shape=("J", 2)``."""
        if shape is not None:
            dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        return ParamDecl("array", dims, lower, upper, offset, multiplier)

    @staticmethod
    def simplex(K):
        """A K-simplex (non-negative, sums to one); K-1 free parameters."""
        return ParamDecl("simplex", (K,))

    @staticmethod
    def ordered(K):
        """A strictly increasing K-vector."""
        return ParamDecl("ordered", (K,))

    @staticmethod
    def positive_ordered(K):
        """A strictly increasing K-vector of positive values."""
        return ParamDecl("positive_ordered", (K,))

    @staticmethod
    def unit_vector(K):
        """A K-vector of unit Euclidean length."""
        return ParamDecl("unit_vector", (K,))

    @staticmethod
    def cholesky_factor_corr(K):
        """The Cholesky factor of a K x K correlation matrix."""
        return ParamDecl("cholesky_factor_corr", (K,))

    @staticmethod
    def cholesky_factor_cov(M, N=None):
        """The Cholesky factor (M x N, M >= N) of a covariance matrix."""
        return ParamDecl("cholesky_factor_cov", (M,) if N is None else (M, N))

    @staticmethod
    def corr_matrix(K):
        """A K x K correlation matrix."""
        return ParamDecl("corr_matrix", (K,))

    @staticmethod
    def cov_matrix(K):
        """A K x K covariance matrix (symmetric positive definite)."""
        return ParamDecl("cov_matrix", (K,))


data = _DataNamespace()
param = _ParamNamespace()
