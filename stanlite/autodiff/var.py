"""The reverse-mode node: :class:`Var`, an array-valued variable with an adjoint.

A ``Var`` holds

* ``value`` - a float (0-d) or a float64 ``ndarray`` (n-d), or, under nested
  differentiation, a ``Var`` of a lower level (its value is itself being recorded);
* ``adj``   - the adjoint, same shape, ``None`` until something flows into it;
* ``tape``  - the :class:`~stanlite.autodiff.tape.Tape` that recorded it;
* ``bp``    - its backward rule ``bp(node, g)`` (``None`` for leaves), which pushes
  ``g``'s contribution into the parents' adjoints; and ``x``/``y``, the parents or
  the rule's saved data.

This is Stan's ``var_value<Matrix>``/``vari`` pair collapsed into one object, and
micrograd's ``Value`` with arrays: a node knows its parents and its chain rule, and
the tape (not the node) knows the order. Nodes never point at their children, so the
graph has no cycles besides the tape's own list.

Scalars are stored as Python floats, not 0-d arrays: numpy's per-call overhead on
0-d arrays (~0.5-1 us) would dominate scalar code, where a float multiply costs 20 ns.

Operators, numpy's ufuncs (``np.exp(v)``) and numpy functions (``np.sum(v)``) are
routed through tables filled by :mod:`stanlite.math`; anything not in the tables
raises ``TypeError`` naming the function instead of silently dropping the gradient.
"""

import sys

import numpy as np

from .tape import Tape, _state, current_tape

__all__ = ["Box", "Var", "shape_of", "is_box", "value_of", "value_type", "guarded",
           "ones_like_value", "make_node", "make_leaf", "UFUNCS", "FUNCTIONS"]


class Box:
    """Base of every traced value (reverse ``Var``, forward ``Dual``): what they share
    - introspection, truth value, and the numpy protocols - lives here once."""

    __slots__ = ()

    @property
    def shape(self):
        return shape_of(self.value)

    def __len__(self):
        s = self.shape
        if not s:
            raise TypeError(f"len() of a 0-d {type(self).__name__}")
        return s[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    # Python's number conversions see only the value: float(v), int(v), math.exp(v)
    # (math.* converts through __float__), complex(v), range(v), round(v)... would
    # give a plain number and silently drop the derivative. They are an error at once
    # (as in JAX), naming the call site and what to use instead (see _conversion_error).
    def __float__(self):
        raise _conversion_error(self, "float()")

    def __int__(self):
        raise _conversion_error(self, "int()")

    def __index__(self):
        raise _conversion_error(self, "an integer conversion (an index, range(), ...)")

    def __complex__(self):
        raise _conversion_error(self, "complex()")

    def __round__(self, ndigits=None):
        raise _conversion_error(self, "round()")

    def __trunc__(self):
        raise _conversion_error(self, "math.trunc()")

    def __floor__(self):
        raise _conversion_error(self, "math.floor()")

    def __ceil__(self):
        raise _conversion_error(self, "math.ceil()")

    def __format__(self, spec):
        # f"{v}" is str(v); f"{v:.3f}" would need the number: name the fix
        if not spec:
            return str(self)
        raise _format_error(self, spec)

    def __bool__(self):
        # ``if v:`` on a traced value: a branch on it, a guard while sl.compile records
        return guarded(bool, self)

    def __array__(self, dtype=None, copy=None):
        raise _conversion_error(self, "converting to a numpy array (np.asarray, "
                                      "np.float64, ...)")

    __hash__ = object.__hash__

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if not kwargs and method == "__call__":
            # the common case first (``np.exp(v)``, ``np.float64(2.0) * v``: numpy
            # scalars hand their operators to the ufunc), one lookup and the call
            fn = UFUNCS.get(ufunc)
            if fn is not None:
                if len(inputs) == 2 and type(inputs[0]) is _np_float64:
                    # ``s * v`` with s = self.y[t]: the float it holds, so the primitive
                    # takes its float path at once (numpy's own dispatch to here,
                    # ~0.6 us, cannot be avoided without losing np.exp(v))
                    return fn(float(inputs[0]), inputs[1])
                return fn(*inputs)
        if method != "__call__" or kwargs.get("out") is not None:
            raise TypeError(f"numpy.{ufunc.__name__}.{method} is not supported on "
                            "stanlite traced values (no derivative rule); use stanlite "
                            "functions")
        fn = UFUNCS.get(ufunc)
        if fn is None:
            raise _no_rule_error(ufunc.__name__)
        kwargs.pop("out", None)
        if kwargs:
            raise TypeError(f"numpy.{ufunc.__name__}: keyword arguments {sorted(kwargs)} "
                            "are not supported on stanlite traced values")
        return fn(*inputs)

    def __array_function__(self, func, types, args, kwargs):
        fn = FUNCTIONS.get(func)
        if fn is None:
            raise _no_rule_error(func.__name__)
        return fn(*args, **kwargs)


# numpy functions without a derivative anywhere (predicates, piecewise-constant
# steps): applied to a traced value they are a question about its value, asked of
# ``v.value`` (as a comparison is); the error says so instead of "no derivative rule"
_VALUE_ONLY = frozenset((
    "isfinite", "isnan", "isinf", "isneginf", "isposinf", "signbit", "sign", "floor",
    "ceil", "trunc", "rint", "fix", "round", "around", "logical_not", "logical_and",
    "logical_or", "logical_xor", "isclose", "allclose", "array_equal", "any", "all",
    "nonzero", "count_nonzero", "searchsorted", "digitize", "heaviside", "isreal",
    "iscomplex", "unique"))


def _no_rule_error(name):
    """The error for numpy function/ufunc ``name`` applied to a traced value, which
    stanlite has no derivative rule for (both numpy protocols raise it)."""
    from ..errors import DifferentiationError
    if name in _VALUE_ONLY:
        return DifferentiationError(
            f"numpy.{name} of a traced value: it has no derivative (it only looks at "
            f"the value), so apply it to the value: np.{name}(v.value) (or "
            f"np.{name}(sl.value_of(v)))")
    return DifferentiationError(
        f"numpy.{name} is not supported on stanlite traced values (no derivative "
        "rule); use the stanlite equivalent (sl.<function>), or apply it to v.value "
        "for a plain number that is a constant for the derivative")


# numpy protocol tables: ufunc -> stanlite function, numpy function -> stanlite
# function. Filled by stanlite.math when the primitives are defined.
UFUNCS = {}
FUNCTIONS = {}


def shape_of(x):
    """Shape of a float, array or Var (of any level)."""
    t = type(x)
    if t is float or t is int:
        return ()
    if t is np.ndarray:
        return x.shape
    if isinstance(x, Box):
        return x.shape
    return np.shape(x)


def is_box(x):
    return isinstance(x, Box)


def value_of(x):
    """Strip every level of tracing: the plain float or ndarray underneath.

    While :func:`stanlite.compile` records, reading a recorded variable's value this way
    is reported to the recording: what the caller does with the number is invisible to
    the tape, so the recording is not replayed (the eager tape is used instead). Code
    that only needs a shape uses :func:`shape_of` (or :func:`value_type` for the type);
    code that branches or checks on values uses :func:`guarded`.
    """
    if isinstance(x, Box):
        if _WATCHING:
            _escape(x, "value_of()")
        x = x.value
        while isinstance(x, Box):
            x = x.value
    return x


def _strip(x):
    """``value_of`` without telling a recording (for the hooks themselves)."""
    while isinstance(x, Box):
        x = x.value
    return x


def value_type(x):
    """The type of the plain value under any tracing (``float``, ``numpy.ndarray``,
    ``numpy.float64``...): a structural query, which no recording needs to know about."""
    return type(_strip(x))


# --------------------------------------------------------------------------------------
# retaping hooks: value-dependent control flow, reported to sl.compile's recordings
# --------------------------------------------------------------------------------------
# A recording (autodiff/compile.py) replays the graph it saw; Python code that looks
# at values (``if x > 0``, ``float(x)``, ``np.argsort(x.value)``) can make another
# point take another graph. While a recording is open in some thread, ``_WATCHING``
# is non-zero and the hooks below report such looks to the recordings of the calling
# thread (``tape._state.watchers``); otherwise they cost one global lookup.
_WATCHING = 0


def watch(recorder):
    """Open ``recorder`` (an object with ``guard(fn, args, result)`` and
    ``escape(x, how)`` methods) on this thread; :func:`unwatch` closes it."""
    global _WATCHING
    _state.watchers.append(recorder)
    _WATCHING += 1


def unwatch(recorder):
    global _WATCHING
    ws = _state.watchers
    if recorder in ws:
        ws.remove(recorder)
        _WATCHING -= 1


def guarded(fn, *args):
    """``fn`` of the plain values of ``args``: a decision taken on values, made visible.

    A Python ``if`` on values makes the recorded graph depend on them. Library code
    that branches or checks on values of traced arguments computes the decision with
    ``guarded``: while :func:`stanlite.compile` records, the call and its result are
    kept as a *guard*, re-evaluated at every replay (a replay where ``fn`` gives another
    result re-records; a check that raises there raises). Outside a recording it is
    ``fn`` on the plain values. ``fn`` must be a pure function of those values.
    Comparisons and ``bool()`` of traced values go through here.

    >>> from stanlite.autodiff.var import guarded
    >>> guarded(lambda v, c: v > c, 2.0, 1.0)
    True
    """
    r = fn(*[_strip(a) for a in args])
    if _WATCHING:
        for w in _state.watchers:
            w.guard(fn, args, r)
    return r


def _escape(x, how):
    for w in _state.watchers:
        w.escape(x, how)


# --------------------------------------------------------------------------------------
# Python number conversions of traced values: an error naming the user's line
# --------------------------------------------------------------------------------------
_LIBRARIES = ("numpy", "scipy")      # their Python frames call us on the user's behalf


def _internal(module):
    # stanlite's own code (the zoo's models in stanlite.models are user-level code),
    # and numpy's/scipy's (np.sum([mu, mu]) converts inside numpy/_core/fromnumeric.py)
    top = module.partition(".")[0]
    if top == "stanlite":
        return not module.startswith("stanlite.models")
    return top in _LIBRARIES


def user_call_site(depth=1):
    """``(file, line, function, source line)`` of the innermost frame outside the
    stanlite, numpy and scipy packages (the user's model, say), starting ``depth``
    frames above the caller; ``None`` when every frame is theirs."""
    import linecache
    f = sys._getframe(depth + 1)
    while f is not None and _internal(f.f_globals.get("__name__") or ""):
        f = f.f_back
    if f is None:
        return None
    code = f.f_code
    return (code.co_filename, f.f_lineno, code.co_name,
            linecache.getline(code.co_filename, f.f_lineno).strip())


def _where(depth):
    """`` at file:line (in fn): `source` `` for the user's call site, or ``""``."""
    site = user_call_site(depth)
    if site is None:
        return ""
    file, line, fn, src = site
    return f" at {file}:{line} (in {fn})" + (f": `{src}`" if src else "")


def _conversion_error(x, how):
    """The DifferentiationError for ``how`` (``"float()"``...) applied to traced ``x``:
    names the call site and says what to use instead."""
    from ..errors import DifferentiationError
    hint = ""
    if how.startswith("converting to a numpy array"):
        # the usual way here: a list of traced values handed to numpy
        hint = (" A list of traced values given to a numpy function (np.sum([a, b]), "
                "np.array([a, b])) is converted this way: use sl.sum / sl.stack([a, b]) "
                "instead.")
    return DifferentiationError(
        f"{how} of a traced value{_where(3)}. float(), int() and the math module "
        "(math.exp, math.log, ...) turn a traced value into a plain number and would "
        "silently drop its derivative. Use stanlite's functions (sl.exp, sl.log, ...) "
        "or numpy's (np.exp, ...), which stanlite differentiates; for a deliberate "
        "plain number (a constant for the derivative) use .value or sl.value_of(x)."
        + hint)


def _format_error(x, spec):
    """The DifferentiationError for ``format(x, spec)`` of traced ``x`` (f"{mu:.3f}")."""
    from ..errors import DifferentiationError
    return DifferentiationError(
        f"formatting a traced value with format spec {spec!r}{_where(3)}: a traced value "
        "is not a plain number. To print it, format its value: "
        f"f\"{{mu.value:{spec}}}\" (or sl.value_of(mu)); f\"{{mu}}\" and str(mu) show "
        "the traced value itself")


from .tape import ones_like_value  # noqa: E402,F401  (re-exported)


def _as_float_value(value):
    """Convert user input to stanlite's value representation (float or float64 array)."""
    t = type(value)
    if t is float:
        return value
    if t is np.ndarray and value.dtype == _F64 and value.ndim:
        return value
    if isinstance(value, Box):
        return value
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:
        return float(arr)
    return arr


_F64 = np.dtype(np.float64)


def as_numbers(x, what, error=ValueError):
    """``x`` as float64 (a traced value as it is); ``error(f"{what}, got <type>")``
    when it is not numbers (``what`` names it and what it must be): the argument
    check of functions taking arrays of numbers (matrix_exp, the pk solvers)."""
    if isinstance(x, Box):
        return x
    try:
        return np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise error(f"{what}, got {type(x).__name__}") from None


class Var(Box):
    """A reverse-mode variable (a node of the tape).

    ``Var(value)`` makes an independent variable (a leaf) on the innermost open tape,
    or on ``tape`` if given. Arithmetic, indexing and the functions of
    :mod:`stanlite.math` applied to it record nodes; :meth:`backward` sweeps.

    Example
    -------
    >>> import numpy as np, stanlite as sl
    >>> with sl.nested():
    ...     x = sl.Var(np.array([1.0, 2.0, 3.0]))
    ...     y = sl.sum(sl.exp(x) * x)
    ...     y.backward()
    ...     np.allclose(x.adj, np.exp([1, 2, 3]) * (1 + np.array([1, 2, 3])))
    True
    """

    __slots__ = ("value", "adj", "tape", "bp", "x", "y")

    def __init__(self, value, tape=None):
        if tape is None:
            tape = current_tape()
        if type(tape) is not Tape:
            raise TypeError("Var(): the innermost scope is a forward-mode trace; open "
                            "sl.nested() to create reverse-mode variables inside it")
        value = _as_float_value(value)
        if isinstance(value, Box) and value.tape.level >= tape.level:
            raise ValueError("Var(value): value is traced at the same or a higher level")
        self.value = value
        self.adj = None
        self.tape = tape
        self.bp = None
        self.x = None
        self.y = None

    # -- introspection ---------------------------------------------------------------
    @property
    def shape(self):
        v = self.value
        t = type(v)
        if t is float:
            return ()
        if t is np.ndarray:
            return v.shape
        return shape_of(v)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def dtype(self):
        return np.dtype(np.float64)

    @property
    def grad(self):
        """The adjoint as a plain value (zeros if nothing flowed into it)."""
        a = self.adj
        if a is None:
            return np.zeros(self.shape) if self.shape else 0.0
        if type(a) is float and self.shape != ():
            return np.full(self.shape, a)      # a lazily broadcast adjoint
        return a

    def __repr__(self):
        return f"Var({self.value!r}, level={self.tape.level})"

    # -- reverse sweep -----------------------------------------------------------------
    def backward(self, seed=None, retain=False):
        """Sweep this variable's tape backwards from it; adjoints land in ``.adj``.

        The tape region is released afterwards unless ``retain=True``.
        """
        self.tape.backward(self, seed=seed, retain=retain)


def make_node(value, tape, bp, x, y):
    """Record a new node: ``value``, backward rule ``bp`` and its data ``x``, ``y``
    (the parents, or the rule's saved data), appended to ``tape``.

    The one way to make a node (the one allocation every primitive pays). Primitives
    record through it - directly, through :func:`~stanlite.autodiff.extend.primitive`'s
    generic route, or through :class:`~stanlite.autodiff.callback.TwoPhase`; only the
    hottest paths of scalar code (extend.py's elementwise primitives, Var's indexing)
    inline its stores, to save the call (tests/autodiff/test_core.py compares their
    nodes with this)."""
    n = _new(Var)
    if type(value) is _np_float64:
        value = float(value)
    n.value = value
    n.adj = None
    n.tape = tape
    n.bp = bp
    n.x = x
    n.y = y
    tape.nodes.append(n)
    return n


def make_leaf(value, tape):
    """An independent variable holding ``value`` (already a float, a float64 array or
    a traced value of a lower level) on ``tape``, unchecked and not on the tape's
    node list: the leaves that the library's own drivers make on a fresh scope
    (``Var(value)`` is the checked constructor for users)."""
    v = _new(Var)
    v.value = value
    v.adj = None
    v.tape = tape
    v.bp = None
    v.x = None
    v.y = None
    return v


_new = object.__new__
_np_float64 = np.float64
