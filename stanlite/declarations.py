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

Data are read as Stan's JSON reader reads them: numbers only. Booleans, strings,
complex numbers, dicts, sets, ragged lists and missing values (None, ``pd.NA``, masked
entries of a numpy masked array) are errors, never silently converted; an int field
takes whole numbers (``2`` or ``2.0``, not ``2.5``) within 64 bits ("too large"
otherwise, never a wrapped value). pandas Series/DataFrames of numbers are accepted
(their values; a nullable column's ``pd.NA`` is a missing value). A size that would
allocate more than the machine's physical memory is refused before anything is
allocated, naming the field and the size. Bounds of a parameter that are data are
checked when the model is built (:meth:`ParamDecl.check_bounds`).
"""

import decimal
import functools
import inspect
import math
import numbers
import os
import weakref
from collections.abc import Mapping

import numpy as np

from . import transforms
from .errors import DataError, ModelError

__all__ = ["data", "transformed_data", "param", "Decl", "DataDecl", "TransformedDataDecl",
           "ParamDecl"]


class Decl:
    """One declared variable: its kind, its size expressions and its bounds."""

    block = None

    def __init__(self, kind, dims=(), lower=None, upper=None, offset=None,
                 multiplier=None, dtype="real", array=None, name=None):
        self.kind = kind
        self.dims = tuple(_size_expression(kind, d) for d in dims)
        self.array = _array_dims(kind, array)
        self.lower = lower
        self.upper = upper
        self.offset = offset
        self.multiplier = multiplier
        self.dtype = dtype
        self.name = _stan_name(kind, name)     # the Stan name (set by the class if None)
        self.attr = None                       # the Python attribute name
        if (offset is not None or multiplier is not None) and (
                lower is not None or upper is not None):
            raise ModelError("a declaration takes either bounds (lower/upper) or "
                             "offset/multiplier, not both (as in Stan)")

    def __set_name__(self, owner, name):
        self.attr = name
        if self.name is None:
            self.name = name

    @property
    def size_exprs(self):
        """The size expressions of the whole shape: the array's, then the type's."""
        return self.array + self.dims

    @property
    def label(self):
        """How messages name this variable: ``data field 'y'``, ``parameter 'theta'``."""
        return f"{_BLOCK_WORDS[self.block]} '{self.name}'"

    def __repr__(self):
        parts = [repr(d) for d in self.dims]
        parts += [f"{k}={getattr(self, k)!r}" for k in
                  ("lower", "upper", "offset", "multiplier") if getattr(self, k) is not None]
        if self.array:
            parts.append(f"array={self.array if len(self.array) > 1 else self.array[0]!r}")
        if self.name is not None and self.name != self.attr:
            parts.append(f"name={self.name!r}")
        return f"{self.block}.{self.kind}({', '.join(parts)})"

    # ---- shapes ----------------------------------------------------------------------
    def shape(self, env):
        """The concrete shape, sizes resolved against ``env`` (data seen so far)."""
        lead = tuple(_resolve_size(self, d, env) for d in self.array)
        dims = tuple(_resolve_size(self, d, env) for d in self.dims)
        if self.kind == "cholesky_factor_cov" and len(dims) == 1:
            dims = (dims[0], dims[0])
        if self.kind in ("cholesky_factor_corr", "corr_matrix", "cov_matrix"):
            dims = (dims[0], dims[0])
        dims = lead + dims
        _check_allocation(self, dims)
        return dims

    def describe(self, shape):
        """Stan's spelling of the type: ``array[3] simplex[4]``, ``vector[8]<lower=0>``."""
        n = len(self.array)
        lead, shape = tuple(shape[:n]), tuple(shape[n:])
        base = {"int": "int", "real": "real"}.get(self.kind)
        if base is None and self.kind == "array":
            base = f"array[{', '.join(map(str, shape))}] {self.dtype}"
        elif base is None:
            base = f"{self.kind}[{', '.join(map(str, shape))}]"
        if lead:
            if base.startswith("array["):              # array[M] of array[N] real
                base = f"array[{', '.join(map(str, lead))}, " + base[len("array["):]
            else:
                base = f"array[{', '.join(map(str, lead))}] {base}"
        b = []
        if self.lower is not None:
            b.append(f"lower={_show(self.lower)}")
        if self.upper is not None:
            b.append(f"upper={_show(self.upper)}")
        return base + (f"<{', '.join(b)}>" if b else "")


_BLOCK_WORDS = {"data": "data field", "transformed_data": "transformed data",
                "param": "parameter"}


def _show(b):
    if callable(b):
        return "<function of " + ", ".join(inspect.signature(b).parameters) + ">"
    return repr(b)


def _resolve_size(decl, d, env):
    """One size of ``decl``: a non-negative int. A bad size that came from data is a
    DataError naming the size's source; a bad literal size is a ModelError (the
    declaration itself is wrong)."""
    if isinstance(d, str):
        if d not in env:
            raise ModelError(f"{decl.label}: its size '{d}' names no earlier data field")
        v = env[d]
    elif callable(d):
        v = call_with_names(d, env, f"the size of {decl.label}")
    else:
        v = d
    err = DataError if isinstance(d, str) or callable(d) else ModelError
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Integral, np.integer)):
        raise err(f"{decl.label}: its size {_size_source(d)} must be a single int >= 0, "
                  f"got {_got(v)}")
    if v < 0:
        raise err(f"{decl.label}: its size {_size_source(d)} is negative ({v}); sizes "
                  "must be >= 0")
    return int(v)


def _size_source(d):
    """How a message names a size expression: ``'J'``, ``<function of N>``, ``3``."""
    return f"'{d}'" if isinstance(d, str) else _show(d)


_ARRAY_HINT = ("for an array of them (Stan's array[M]) give the leading sizes as "
               "array=, e.g. sl.param.simplex(\"K\", array=\"M\")")


def _size_expression(kind, d):
    """A size as declared. A tuple or list of sizes is a ModelError at once (the
    natural attempt at an array of a type); other bad values (a float, a negative
    int) are reported when the model is built, naming the variable."""
    if isinstance(d, (tuple, list)):
        raise ModelError(f"{kind}: a size is one int, data name or function of data, "
                         f"got the {type(d).__name__} {d!r}; {_ARRAY_HINT}")
    return d


def _array_dims(kind, array):
    """``array=``: the leading (Stan ``array[...]``) sizes as a tuple: one size or a
    tuple/list of them; None for none."""
    if array is None:
        return ()
    sizes = tuple(array) if isinstance(array, (tuple, list)) else (array,)
    for d in sizes:
        if isinstance(d, (tuple, list)):
            raise ModelError(f"{kind}: array= takes a size or a flat tuple of sizes "
                             f"(array=(\"M\", \"N\") for array[M, N]), got {array!r}")
    return tuple(_size_expression(f"{kind} array=", d) for d in sizes)


def _stan_name(kind, name):
    """``name=``: the variable's name in Stan (and in every output), for names Python
    cannot spell as an attribute (``lambda``); checked to be an identifier."""
    if name is None:
        return None
    if not (isinstance(name, str) and name.isidentifier() and name.isascii()
            and name[:1].isalpha()):
        raise ModelError(f"{kind}: name= must be a Stan identifier (letters, digits, "
                         f"underscores, starting with a letter), got {name!r}")
    return name


def _data_sizes_note(decl, dims):
    """``"J = 8"``: the sizes of ``decl`` given by data (names or callables), or ''."""
    return ", ".join(f"{d if isinstance(d, str) else _size_source(d)} = {v}"
                     for d, v in zip(decl.size_exprs, dims)
                     if isinstance(d, str) or callable(d))


def _sizes_note(decl, dims):
    """``"J = 8, K = 3"``: the size expressions of ``decl`` with their values."""
    return ", ".join(f"{d if isinstance(d, str) else _size_source(d)} = {v}"
                     for d, v in zip(decl.size_exprs, dims))


#: bytes an element takes once validated (float64 or int64)
_ITEM_BYTES = 8


@functools.lru_cache(maxsize=None)
def physical_memory():
    """The machine's physical memory in bytes (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def _check_allocation(decl, dims):
    """Refuse a shape whose values would not fit in the machine's memory, before
    anything of that size is allocated (a typo'd size would otherwise end in a
    MemoryError or the OOM killer, far from the field that caused it)."""
    count = math.prod(dims)                          # Python ints: no overflow
    need = count * _ITEM_BYTES
    limit = physical_memory()
    if limit is None:
        limit = 2 ** 63                              # unknown: only the impossible
    if need > limit:
        from_data = any(isinstance(d, str) or callable(d) for d in decl.size_exprs)
        raise (DataError if from_data else ModelError)(f"{decl.label}: {decl.describe(dims)} has {count:,} elements "
                        f"({_bytes(need)}), more than this machine's memory "
                        f"({_bytes(limit)}); check its size ({_sizes_note(decl, dims)})")


def _bytes(n):
    for unit, k in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= k:
            return f"{n / k:.3g} {unit}"
    return f"{n} bytes"


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
                 allow_nonfinite=False, array=None, name=None):
        super().__init__(kind, dims, lower=lower, upper=upper, dtype=dtype, array=array,
                         name=name)
        self.allow_nonfinite = allow_nonfinite

    def validate(self, value, env):
        """Convert ``value`` to the declared type or raise DataError naming the field.

        One check per concern, in order: what the value is (numbers only: no
        booleans, strings, missing values...), int-ness (whole numbers within int64),
        shape, finiteness, bounds."""
        shape = self.shape(env)
        is_int = self.kind == "int" or self.dtype == "int"
        field = _Field(self.name, self.describe(shape), is_int,
                       _data_sizes_note(self, shape), _BLOCK_WORDS[self.block])
        arr = _numeric_array(value, field)
        arr = _as_ints(arr, field) if is_int else _as_reals(arr, field)
        arr = _fit_shape(arr, shape, field)
        if not is_int and not self.allow_nonfinite:
            _check_finite(arr, field)
        for which in ("lower", "upper"):
            _check_data_bound(self, which, arr, env, field)
        if not shape:
            return int(arr) if is_int else float(arr)
        arr.setflags(write=False)
        return arr


class _Field:
    """A data field as messages name it: ``data field 'y': expected vector[8], ...``."""

    __slots__ = ("name", "expected", "is_int", "sizes", "what")

    def __init__(self, name, expected, is_int, sizes="", what="data field"):
        self.name, self.expected, self.is_int = name, expected, is_int
        self.sizes = sizes                 # "J = 8": the sizes that came from data
        self.what = what                   # "data field", "transformed data"

    def error(self, problem):
        return DataError(f"{self.what} '{self.name}': {problem}")

    def wrong(self, got):
        return self.error(f"expected {self.expected}, got {got}")


# ---- what the value is: numbers only ------------------------------------------------
_INT64 = np.iinfo(np.int64)
_NO_MISSING = ("missing values are not supported (Stan's data have none): drop or "
               "impute them, or model them as parameters")


def _numeric_array(value, field):
    """``value`` as a numeric ndarray (dtype kind i, u or f), or a DataError saying what
    it is instead: a missing value, a boolean, a string, a mapping, a ragged list..."""
    if _is_missing(value):
        raise field.error(f"{_NO_MISSING}; got {_show_element(value)}")
    if _is_pandas(value) and hasattr(value, "to_numpy"):
        value = _from_pandas(value)
    if isinstance(value, np.ma.MaskedArray):
        value = _unmasked(value, field)
    if isinstance(value, (str, bytes, bytearray, Mapping, set, frozenset)) or \
            isinstance(value, memoryview) and value.format in ("B", "b", "c"):
        raise field.wrong(_got(value))      # (numpy would read bytes as small ints)
    if isinstance(value, (list, tuple)):
        _check_masked_rows(value, field)
    try:
        arr = np.asarray(value, dtype=object) if isinstance(value, (list, tuple)) \
            else np.asarray(value)
    except Exception:                                  # noqa: BLE001 - reported below
        raise field.wrong(f"a value numpy cannot read as an array "
                          f"({type(value).__name__})") from None
    if arr.dtype == object:
        return _from_objects(arr, field)
    if arr.dtype.kind == "b":
        got = _got(value) if arr.ndim == 0 else f"an array of booleans (shape {arr.shape})"
        raise field.wrong(f"{got}; Stan data take numbers only (use 0 and 1)")
    if arr.dtype.kind not in "iuf":
        raise field.wrong(f"{_dtype_words(arr.dtype)} ({_short(value)})")
    return arr


def _is_pandas(value):
    return type(value).__module__.partition(".")[0] == "pandas"


def _from_pandas(value):
    """A pandas Series/DataFrame/Index/array as numpy: numpy-backed columns give their
    values (NaN stays a float); nullable columns give objects, so ``pd.NA`` is found
    and reported as a missing value instead of silently becoming NaN."""
    dtypes = list(value.dtypes) if hasattr(value, "columns") else [value.dtype]
    if all(isinstance(t, np.dtype) for t in dtypes):
        return value.to_numpy()
    return value.to_numpy(dtype=object)


def _unmasked(value, field):
    """A masked array without masked entries as its data; masked entries are missing
    values, reported with their number and the first position."""
    mask = np.ma.getmaskarray(value)
    if mask.any():
        k = int(mask.sum())
        raise field.error(f"{_NO_MISSING}; the masked array has {k} masked "
                          f"element{'s' if k > 1 else ''}, the first "
                          f"{_position(np.argwhere(mask)[0]) or 'the value'}")
    return np.asarray(value.data)


def _check_masked_rows(rows, field):
    """A list of masked arrays (rows of a matrix, say): numpy would read the masked
    entries' hidden data as values; a masked entry is a missing value."""
    if not any(issubclass(t, np.ma.MaskedArray) for t in set(map(type, rows))):
        return                                   # (the common case, at C speed)
    for i, row in enumerate(rows):
        if isinstance(row, np.ma.MaskedArray):
            mask = np.ma.getmaskarray(row)
            if mask.any():
                at = _position((i, *np.argwhere(mask)[0]))
                raise field.error(f"{_NO_MISSING}; row {i + 1} is a masked array with "
                                  f"{int(mask.sum())} masked element(s), the first "
                                  f"{at}")


def _is_missing(e):
    """None, pandas' NA/NaT, numpy's masked constant: a missing value, not a number."""
    return e is None or e is np.ma.masked or type(e).__name__ in ("NAType", "NaTType")


def _is_number(t):
    """Whether elements of type ``t`` are numbers Stan data may hold: reals (a
    Decimal, as ``json.loads(parse_float=Decimal)`` gives, too), not booleans."""
    return issubclass(t, (numbers.Real, decimal.Decimal)) and \
        not issubclass(t, (bool, np.bool_))


def _from_objects(arr, field):
    """An object array (from lists, or object-dtype input) as numbers: each element
    must be a real number; a nested sequence here means ragged rows."""
    flat = arr.ravel()
    types = set(map(type, flat))
    if any(issubclass(t, np.ndarray) for t in types):
        arr, flat = _unwrap_0d(arr)
        types = set(map(type, flat))
    if not all(_is_number(t) for t in types):
        if any(issubclass(t, _SEQUENCES) for t in types):
            _check_ragged(arr, field)           # (missing values are not rows)
        i = next(i for i, e in enumerate(flat) if not _is_number(type(e)))
        raise _element_error(field, flat[i], np.unravel_index(i, arr.shape))
    if field.is_int:
        _check_whole(arr, field, _to_float(arr, field))
        try:
            return arr.astype(np.int64)             # exact for Python ints
        except OverflowError:                       # a number beyond int64
            i = next(i for i, e in enumerate(flat) if not _in_int64(e))
            raise _too_large(field, flat[i], np.unravel_index(i, arr.shape)) from None
    return _to_float(arr, field)


def _unwrap_0d(arr):
    """0-d arrays among the elements (``[np.array(1.0), 2.0]``) as the scalars they
    hold; a masked constant stays (a missing value)."""
    flat = np.empty(arr.size, dtype=object)
    for i, e in enumerate(arr.ravel()):          # one by one: rows stay objects
        flat[i] = e[()] if type(e) is np.ndarray and e.ndim == 0 else e
    return flat.reshape(arr.shape), flat


def _in_int64(e):
    # compared as Python numbers: exact (numpy would round 2**63 - 1 to a float)
    e = e.item() if isinstance(e, np.generic) else e
    return _INT64.min <= e <= _INT64.max


def _to_float(arr, field):
    """An object array of real numbers as float64 ("too large" beyond float range)."""
    try:
        return arr.astype(np.float64)
    except OverflowError:
        flat = arr.ravel()
        i = next(i for i, e in enumerate(flat) if not _fits_float(e))
        raise _too_large(field, flat[i], np.unravel_index(i, arr.shape)) from None


def _fits_float(e):
    try:
        float(e)
    except OverflowError:
        return False
    return True


_SEQUENCES = (list, tuple, np.ndarray)


def _is_row(e):
    """A nested sequence (a row numpy kept as an object), not a 0-d array such as
    np.ma.masked."""
    return isinstance(e, _SEQUENCES) and np.ndim(e) > 0


def _check_ragged(arr, field):
    """Rows of different lengths (numpy keeps them as objects): name the first row
    whose length differs from the first's."""
    flat = arr.ravel()
    lengths = [len(e) if _is_row(e) else None for e in flat]
    for i, n in enumerate(lengths):
        if n != lengths[0]:
            def row(j):
                return (f"{_position(np.unravel_index(j, arr.shape))} is "
                        + (f"a sequence of length {lengths[j]}" if lengths[j] is not None
                           else f"a single value {_short(flat[j])}"))
            raise field.wrong(f"a ragged sequence: {row(0)} but {row(i)}; every row "
                              "must have the same length")


def _element_error(field, e, index):
    at = _position(index)
    where = f" ({at})" if at else ""
    if _is_missing(e):
        return field.error(f"{_NO_MISSING}; got {_show_element(e)}{where}")
    if isinstance(e, (bool, np.bool_)):
        return field.wrong(f"a boolean {bool(e)}{where}; Stan data take numbers only "
                           "(use 0 and 1)")
    if _is_row(e):
        return field.wrong(f"a ragged or nested sequence: {at or 'the value'} is a "
                           f"{type(e).__name__} of length {len(e)}; every row must have "
                           "the same length")
    return field.wrong(f"{_got(e)}{where}")


def _too_large(field, e, index):
    at = _position(index)
    if isinstance(e, (numbers.Integral, np.integer)) or field.is_int:
        limit = "integers must fit in 64 bits (-2**63 <= n < 2**63)"
    else:
        limit = "reals must fit in float64 (|x| <= 1.8e308)"
    return field.error(f"{at or 'the value'} is too large ({_short(e)}): {limit}")


# ---- int fields: whole numbers within int64 -------------------------------------------
def _as_ints(arr, field):
    if arr.dtype.kind == "f":
        _check_whole(arr, field, arr)
        big = np.abs(arr) >= 2.0 ** 63             # floats: 2**63 - 1 is 2**63 here
        if big.any():
            i = tuple(np.argwhere(big)[0])
            raise _too_large(field, arr[i], i)
    elif arr.dtype.kind == "u" and arr.size and arr.max() > _INT64.max:
        i = np.unravel_index(int(np.argmax(arr > _INT64.max)), arr.shape)
        raise _too_large(field, arr[i], i)
    return arr.astype(np.int64)


def _check_whole(arr, field, values):
    """Floats given for an int field must be whole numbers (``2.0`` is 2; ``2.5``,
    NaN or inf are errors naming the first such element)."""
    with np.errstate(invalid="ignore"):
        whole = np.isfinite(values) & (values == np.trunc(values))
    if not whole.all():
        i = tuple(np.argwhere(~whole)[0])
        if np.isnan(values[i]):
            raise field.error(f"{_position(i) or 'the value'} is NaN, which an int "
                              f"(expected {field.expected}) cannot be; {_NO_MISSING}")
        raise field.wrong(f"a float that is not a whole number: "
                          f"{_position(i) or 'the value'} is {_short(arr[i])}; integer "
                          "data must be whole numbers")


def _as_reals(arr, field):
    return arr.astype(np.float64)


# ---- shape, finiteness, bounds ----------------------------------------------------------
def _fit_shape(arr, shape, field):
    if arr.shape == shape:
        return arr
    if arr.size == 1 and math.prod(shape) == 1 and shape:
        return arr.reshape(shape)           # a length-1 vector given as a scalar
    if arr.shape == (0,) and len(shape) > 1 and math.prod(shape) == 0:
        # Stan JSON writes any empty array as [] (array[0] vector[3], matrix[0, 3])
        return arr.reshape(shape)
    # a wrong size field shows up as a wrong shape here: name the size's value too
    sizes = f"; its size comes from the data: {field.sizes}" if field.sizes else ""
    raise field.error(f"expected {field.expected} (shape {shape}), got shape "
                      f"{arr.shape}{sizes}")


def _check_finite(arr, field):
    bad = ~np.isfinite(arr)
    if bad.any():
        raise field.error(f"expected finite values, {_at(bad, arr)}; declare the field "
                          "with allow_nonfinite=True to accept NaN and inf")


def _check_data_bound(decl, which, arr, env, field):
    """``lower``/``upper`` of a data field: the bound must be numbers that broadcast to
    the field's shape (a data bound of the wrong shape names both) and not NaN; every
    value must satisfy it."""
    b = getattr(decl, which)
    if b is None:
        return
    raw = resolve_bound(decl, b, env)
    try:
        bv = np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError):
        raise field.error(f"its {which} bound {_show(b)} is not a number "
                          f"({_got(raw)})") from None
    try:
        full = np.broadcast_to(bv, arr.shape)
    except ValueError:
        raise field.error(f"its {which} bound {_show(b)} has shape {bv.shape}, which "
                          f"does not fit the field's shape {arr.shape}") from None
    if np.isnan(bv).any():
        raise field.error(f"its {which} bound {_show(b)} is NaN, so no value can "
                          "satisfy it")
    op, word = (np.greater_equal, ">=") if which == "lower" else (np.less_equal, "<=")
    bad = ~op(arr, full)
    if bad.any():
        if bv.ndim == 0:
            want = _show_value(bv)
        else:                                        # the bound's element at that place
            want = f"its {which} bound {_show(b)} there, " \
                   f"{full[tuple(np.argwhere(bad)[0])].item()!r}"
        raise field.error(f"expected every value {word} {want}, {_at(bad, arr)}")


# ---- message pieces ----------------------------------------------------------------------
def _got(value):
    if isinstance(value, str):
        return f"a string {_short(value)}"
    if value is None:
        return "None"
    if isinstance(value, (Mapping, set, frozenset)):
        return f"a {type(value).__name__} {_short(value)}"
    if isinstance(value, (bool, np.bool_)):
        return f"a boolean {bool(value)}"
    if isinstance(value, (complex, np.complexfloating)):
        return f"a complex number {value!r}"
    return f"{type(value).__name__} {_short(value)}"


def _short(value, n=60):
    if isinstance(value, np.generic) and value.ndim == 0:
        value = value.item()                     # 8.5, not np.float64(8.5)
    r = repr(value)
    return r if len(r) <= n else r[:n - 3] + "..."


def _show_element(e):
    return "None" if e is None else "a masked value" if e is np.ma.masked else repr(e)


def _dtype_words(dtype):
    return {"c": "complex numbers", "U": "strings", "S": "bytes", "M": "dates",
            "m": "time deltas", "V": "structured records"}.get(dtype.kind,
                                                               f"dtype {dtype}")


def _position(index):
    """``element [2, 1]`` (1-based, as Stan and param_names() count) or '' for 0-d."""
    if len(index) == 0:
        return ""
    return f"element [{', '.join(str(int(i) + 1) for i in index)}]"


def _show_value(v):
    a = np.asarray(v)
    return repr(float(a)) if a.ndim == 0 else "the bound"


def _at(bad, arr):
    if arr.ndim == 0:
        return f"got {arr.item()!r}"
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    return f"{_position(idx)} is {arr[idx].item()!r}"


def validate_transformed(name, value, decl, env):
    """A value ``transformed_data`` returned, as the model keeps it: with a
    declaration (``sl.transformed_data.*``), validated as that type; without one,
    numbers only (an int, a real or an array of them: ints stay int64, others
    float64), finite. Arrays come back read-only. Each failure is a DataError naming
    the transformed data (it follows from the data)."""
    if decl is not None:
        return decl.validate(value, env)
    arr0 = np.asarray(value) if isinstance(value, np.ndarray) else None
    is_int = arr0 is not None and arr0.dtype.kind in "iu" or \
        isinstance(value, (numbers.Integral, np.integer)) and not isinstance(
            value, (bool, np.bool_))
    field = _Field(name, "numbers (an int, a real or an array of them)", is_int,
                   what="transformed data")
    arr = _numeric_array(value, field)
    if isinstance(value, (list, tuple)) and _all_ints(value):   # a list of ints: ints
        field.is_int = True
    arr = _as_ints(arr, field) if field.is_int else _as_reals(arr, field)
    if not field.is_int:
        bad = ~np.isfinite(arr)
        if bad.any():
            raise field.error(f"expected finite values, {_at(bad, arr)}; declare it with "
                              f"sl.transformed_data.<type>(..., allow_nonfinite=True) to "
                              "allow NaN and inf")
    if arr.ndim == 0:
        return int(arr) if field.is_int else float(arr)
    arr = np.array(arr)                       # our own copy: the caller's stays writable
    arr.setflags(write=False)
    return arr


def _all_ints(rows):
    """Whether a (nested) list holds Python/numpy ints only (no bools)."""
    for e in rows:
        if isinstance(e, (list, tuple)):
            if not _all_ints(e):
                return False
        elif isinstance(e, (bool, np.bool_)) or not isinstance(e, (numbers.Integral,
                                                                      np.integer)):
            return False
    return True


class TransformedDataDecl(DataDecl):
    """The declared type of a value ``transformed_data`` returns (``sl.transformed_data
    .vector("N")``): validated as data are, with messages naming the transformed data."""

    block = "transformed_data"


class _DataNamespace:
    """``sl.data``: declarations of a model's data block (``sl.transformed_data``: the
    same types, declaring what ``transformed_data`` returns). ``array=`` gives leading
    dimensions, Stan's ``array[N]`` (a size or a tuple of sizes); ``name=`` the field's
    name in the data and every output, for a name Python cannot spell (``lambda``)."""

    def __init__(self, cls):
        self._cls = cls

    def int(self, lower=None, upper=None, *, array=None, name=None):
        """An integer: ``N = sl.data.int(lower=0)``; ``sl.data.int(array="N")`` is
        Stan's ``array[N] int``."""
        return self._cls("int", (), lower, upper, dtype="int", array=array, name=name)

    def real(self, lower=None, upper=None, allow_nonfinite=False, *, array=None,
             name=None):
        """A real number (``array=``: an array of them)."""
        return self._cls("real", (), lower, upper, allow_nonfinite=allow_nonfinite,
                         array=array, name=name)

    def vector(self, size, lower=None, upper=None, allow_nonfinite=False, *,
               array=None, name=None):
        """A vector of reals of length ``size`` (an int or a data name); with
        ``array="N"``, Stan's ``array[N] vector[size]``, shape ``(N, size)``."""
        return self._cls("vector", (size,), lower, upper,
                         allow_nonfinite=allow_nonfinite, array=array, name=name)

    def matrix(self, rows, cols, lower=None, upper=None, allow_nonfinite=False, *,
               array=None, name=None):
        """A ``rows x cols`` matrix of reals (``array=``: an array of them)."""
        return self._cls("matrix", (rows, cols), lower, upper,
                         allow_nonfinite=allow_nonfinite, array=array, name=name)

    def array(self, *dims, shape=None, dtype="real", lower=None, upper=None,
              allow_nonfinite=False, name=None):
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
        return self._cls("array", dims, lower, upper, dtype=dtype,
                         allow_nonfinite=allow_nonfinite, name=name)


# --------------------------------------------------------------------------------------
# parameters
# --------------------------------------------------------------------------------------
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

    def free_size(self, shape):
        """The number of free reals of a value of ``shape``; a shape the constraint
        cannot take (a simplex or unit vector of size 0, a Cholesky factor with more
        columns than rows) names the parameter and its sizes: a DataError when a
        size came from data, a ModelError when the declaration fixed it."""
        transform = self.transform()
        try:
            return transform.free_size(shape)
        except ValueError as e:
            err = DataError if any(isinstance(d, str) or callable(d)
                                   for d in self.size_exprs) else ModelError
            what = str(e).split(": ", 1)[-1]
            raise err(f"{self.label}: {self.kind} of shape {shape} is not possible: "
                      f"{self.kind} {what} ({_sizes_note(self, shape)})") from None

    def check_bounds(self, shape, env, param_names):
        """Check the bounds (or offset/multiplier) that do not depend on parameters
        once, when the model is built: a data bound of the wrong shape, an inverted
        or NaN pair, a non-positive multiplier name the parameter and the bound here
        rather than at the first gradient. Bounds that are functions of earlier
        parameters are checked by the transform at each point."""
        transform = self.transform()
        values, known = [], []
        for k in transform.bound_names:
            b = getattr(self, k)
            if b is None or _depends_on(b, param_names):
                values.append(None)
                continue
            values.append(self._evaluate_bound(k, b, env))
            known.append(k)
        if not known:
            return
        msg = transform.check_bounds(shape, *values)
        if msg:
            from_data = any(isinstance(getattr(self, k), str) or callable(getattr(self, k))
                            for k in known)
            shown = ", ".join(f"{k}={_show_bound(getattr(self, k), v)}"
                              for k, v in zip(transform.bound_names, values) if k in known)
            raise (DataError if from_data else ModelError)(
                f"{self.label} ({shown}): {msg}")

    def _evaluate_bound(self, k, b, env):
        try:
            return resolve_bound(self, b, env)
        except (DataError, ModelError):
            raise
        except Exception as e:                       # noqa: BLE001 - named and re-raised
            raise ModelError(f"{self.label}: its {k} bound {_show(b)} failed on the "
                             f"data: {type(e).__name__}: {e}") from e


def _depends_on(b, names):
    """Whether bound ``b`` (a name or a callable of names) refers to one of ``names``."""
    if isinstance(b, str):
        return b in names
    if callable(b):
        return any(n in names for n in argument_names(b))
    return False


def _show_bound(b, value):
    """``'L' = 1.0``: a bound as declared, with its value when it came from data."""
    if not (isinstance(b, str) or callable(b)):
        return repr(b)
    a = np.asarray(value)
    v = _short(a.item() if a.ndim == 0 else a)
    return f"{_show(b)} = {v}"


def _one_size(kind, K, more):
    """A type of one size given more (``sl.param.simplex("M", "K")``, the natural
    attempt at an array of simplexes): a ModelError pointing to ``array=``."""
    if more:
        sizes = ", ".join(map(repr, (K,) + more))
        raise ModelError(f"{kind} takes one size, got {len(more) + 1} ({sizes}); {_ARRAY_HINT}")


def _sized(kind, doc):
    """The declaration of ``sl.param``'s one-size type ``kind`` (a simplex, an ordered
    vector, a correlation matrix...: all K-sized, declared alike), as a static method
    ``kind(K, *more, array=None, name=None)`` with the docstring ``doc``."""
    def declare(K, *more, array=None, name=None):
        _one_size(kind, K, more)
        return ParamDecl(kind, (K,), array=array, name=name)
    declare.__name__ = kind
    declare.__qualname__ = f"_ParamNamespace.{kind}"
    declare.__doc__ = doc
    return staticmethod(declare)


class _ParamNamespace:
    """``sl.param``: declarations of a model's parameters block.

    Every type takes ``array=``, leading dimensions as Stan's ``array[M]`` (a size, or
    a tuple of sizes for ``array[M, N]``): ``sl.param.simplex("K", array="M")`` is
    ``array[M] simplex[K]``, of shape ``(M, K)``; each element gets its own transform
    (all computed at once) and the log-Jacobian is their sum; element names are
    Stan's (``theta[2,3]``). Bounds of an array broadcast against its whole shape (a
    number, a vector of the element's length, an array of the full shape...).
    ``name=`` gives the parameter a Stan name Python cannot spell: ``lambda_ =
    sl.param.real(lower=0, name="lambda")`` is ``lambda`` in every output and init
    dict; ``log_prob`` receives it as ``lambda_``."""

    @staticmethod
    def real(lower=None, upper=None, offset=None, multiplier=None, *, array=None,
             name=None):
        """A real parameter, optionally bounded or affinely transformed."""
        return ParamDecl("real", (), lower, upper, offset, multiplier, array=array,
                         name=name)

    @staticmethod
    def vector(size, lower=None, upper=None, offset=None, multiplier=None, *,
               array=None, name=None):
        """A vector parameter of length ``size``."""
        return ParamDecl("vector", (size,), lower, upper, offset, multiplier, array=array,
                         name=name)

    @staticmethod
    def matrix(rows, cols, lower=None, upper=None, offset=None, multiplier=None,
               *, array=None, name=None):
        """A ``rows x cols`` matrix parameter."""
        return ParamDecl("matrix", (rows, cols), lower, upper, offset, multiplier,
                         array=array, name=name)

    @staticmethod
    def array(*dims, shape=None, lower=None, upper=None, offset=None, multiplier=None,
              name=None):
        """An array of reals: ``sl.param.array("J", 2)`` or ``shape=("J", 2)``."""
        if shape is not None:
            dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        return ParamDecl("array", dims, lower, upper, offset, multiplier, name=name)

    # the one-size types: ``kind(K, *more, array=None, name=None)``
    simplex = _sized("simplex", "A K-simplex (non-negative, sums to one); K-1 free "
                     "parameters.")
    ordered = _sized("ordered", "A strictly increasing K-vector.")
    positive_ordered = _sized("positive_ordered",
                              "A strictly increasing K-vector of positive values.")
    unit_vector = _sized("unit_vector", "A K-vector of unit Euclidean length.")
    sum_to_zero_vector = _sized(
        "sum_to_zero_vector",
        """A K-vector summing to zero (Stan 2.36's isometric transform, K-1 free
        parameters; no Jacobian term: a standard normal on the free parameters is
        a normal of marginal variance (K-1)/K on each element).""")

    @staticmethod
    def stochastic_matrix(rows, columns, kind="row", *, array=None, name=None):
        """A ``rows x columns`` matrix whose rows (``kind="row"``, Stan's
        ``row_stochastic_matrix``) or columns (``kind="column"``,
        ``column_stochastic_matrix``) are simplexes."""
        k = {"row": "row", "rows": "row", "column": "column", "columns": "column",
             "col": "column"}.get(kind) if isinstance(kind, str) else None
        if k is None:
            raise ModelError(f"stochastic_matrix: kind must be 'row' (each row a simplex) "
                             f"or 'column' (each column a simplex), got {kind!r}")
        return ParamDecl(f"{k}_stochastic_matrix", (rows, columns), array=array,
                         name=name)

    @staticmethod
    def row_stochastic_matrix(rows, columns, *, array=None, name=None):
        """A matrix whose rows are simplexes (Stan's ``row_stochastic_matrix``)."""
        return ParamDecl("row_stochastic_matrix", (rows, columns), array=array, name=name)

    @staticmethod
    def column_stochastic_matrix(rows, columns, *, array=None, name=None):
        """A matrix whose columns are simplexes (``column_stochastic_matrix``)."""
        return ParamDecl("column_stochastic_matrix", (rows, columns), array=array,
                         name=name)

    cholesky_factor_corr = _sized("cholesky_factor_corr",
                                  "The Cholesky factor of a K x K correlation matrix.")

    @staticmethod
    def cholesky_factor_cov(M, N=None, *, array=None, name=None):
        """The Cholesky factor (M x N, M >= N) of a covariance matrix."""
        return ParamDecl("cholesky_factor_cov", (M,) if N is None else (M, N),
                         array=array, name=name)

    corr_matrix = _sized("corr_matrix", "A K x K correlation matrix.")
    cov_matrix = _sized("cov_matrix",
                        "A K x K covariance matrix (symmetric positive definite).")


data = _DataNamespace(DataDecl)
transformed_data = _DataNamespace(TransformedDataDecl)
param = _ParamNamespace()
