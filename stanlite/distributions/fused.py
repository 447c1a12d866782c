"""One node per log density: Stan's operands-and-partials for stanlite.

A log density ``sum_i log p(y_i | theta_i)`` over N broadcast elements would cost a
dozen elementwise nodes if composed from the math library; Stan instead records
*one* node whose partial derivatives w.r.t. each operand are computed in the same
pass as the value (``operands_and_partials``). :func:`fused` builds such a node from
one *kernel*::

    kernel(need, *args) -> (value, partials)

``need[i]`` says whether the partial w.r.t. argument ``i`` is wanted; ``partials[i]``
is an array broadcastable against the arguments whose sum back to argument ``i``'s
shape is d value / d arg_i (``None`` where not needed). The kernel is written with
stanlite operations, so the one function serves every mode:

* first order (the hot path): arguments are plain arrays, the kernel runs as numpy
  once, and the node's backward rule is ``adj_i += g * partial_i``;
* nested differentiation (Hessians by forward-over-reverse, reverse-over-reverse):
  the same kernel runs on traced values, so the partials are themselves
  differentiable; the forward-mode rule contracts the partials with the tangents.

Argument checks (``sigma > 0`` ...) run on the plain values before anything else and
raise :class:`~stanlite.errors.DomainError` naming the function, the argument and the
offending value; samplers treat that as a rejection, as Stan does.

Pointwise (elementwise) form
----------------------------
Every density also answers ``density(*args, reduce=False)``: the log densities one
per element of the broadcast of the arguments (one per vector for a multivariate
density, one per observation for a GLM) instead of their sum - a per-observation
log-likelihood, a censored observation's log CCDF, the terms of a per-observation
mixture. **How a family declares it** (once, in its module, after the densities):
a function of the same arguments written with stanlite's elementwise operations, so
that it is differentiable at every order by tracing; value branches use comparisons
of the (possibly traced) arguments, which compiled replays guard, or ``guarded``::

    @pointwise(normal_lpdf)
    def _normal_terms(y, mu, sigma):
        z = (y - mu) / sigma
        return -0.5 * z * z - sm.log(sigma) - HALF_LOG_TWO_PI

(or ``fused(..., pointwise=fn)``; one function may serve several densities). The
result is broadcast to the shape of all the arguments (:func:`full_shape`); a
family with a batch structure of its own declares ``@pointwise(d, broadcast=False)``
and returns one value per vector (per row, per outcome) itself. A value computed by
a numerical procedure rather than a composition (finite sums over a range that
depends on the values) is declared with :func:`terms_primitive` from a kernel that
gives per-element values and partials. ``reduce=False`` runs the density's own
argument checks first (the same DomainError), then the function; the summed path
(``reduce=True``, the default: the kernel and its compiled lowering) is untouched.
``tests/distributions/test_pointwise.py`` enumerates every exported density and checks
that the pointwise values sum to the summed value, so a density added without a
pointwise form (or an argument generator there) fails.
"""

import inspect
import math
import weakref

import numpy as np

from ..autodiff.callback import TwoPhase
from ..autodiff.extend import Primitive, accumulate, defjvp_all, defvjp_all, primitive
from ..autodiff.fpstate import fp_ignored  # noqa: F401  (re-exported: the GLMs use it)
from ..autodiff.fpstate import ignore_fp as _ignore_fp, restore_fp as _restore_fp
from ..autodiff.var import Box, Var, guarded, shape_of, value_of
from ..errors import DomainError

__all__ = ["fused", "pointwise", "full_shape", "terms_primitive", "check_positive",
           "check_finite", "check_nonnegative", "check_probability", "check_not_nan",
           "check_in_range", "check_integer", "plain", "broadcast_size", "reps"]


def plain(x):
    """The plain float/array under any level of tracing (for argument checks)."""
    return value_of(x)


def broadcast_size(*args):
    """Number of elements the arguments broadcast to (the N of a vectorized density)."""
    first = None
    same = True
    for a in args:
        t = type(a)
        if t is float or t is int:
            continue
        s = a.shape if t is _ndarray else shape_of(a)
        if s:
            if first is None:
                first = s
            elif s != first:
                same = False
    if first is None:
        return 1
    if same:
        return _prod(first)
    return _prod(np.broadcast_shapes(*[shape_of(a) for a in args]))


def reps(n, x):
    """How many times each element of ``x`` repeats in an ``n``-element broadcast (the
    factor of a term that depends on ``x`` alone, summed over ``x``'s own elements)."""
    t = type(x)
    if t is float or t is int:
        return n
    s = x.shape if t is _ndarray else shape_of(x)
    return n // max(1, _prod(s)) if s else n


def parameter_names(*fns):
    """The public parameter names of a density: those of the first of ``fns`` (its
    check, then its kernel without ``need``) that spells them out, or None when each
    takes ``*args``."""
    for fn, skip in zip(fns, (0, 1)):
        if fn is None:
            continue
        try:
            ps = list(inspect.signature(fn).parameters.values())[skip:]
        except (TypeError, ValueError):
            continue
        if ps and all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in ps):
            return tuple(p.name for p in ps)
    return None


def arity_error(name, params, got):
    """The TypeError for a call of density ``name`` with ``got`` positional arguments
    (the inner functions' own messages would name a local ``check()``)."""
    sig = ", ".join(params)
    n = len(params)
    return TypeError(
        f"{name}({sig}) takes {n} argument{'s' if n != 1 else ''} ({sig}), got {got}"
        " (arguments are positional)")


def _define_rules(spec, kernel, nondiff):
    """The derivative rules of a fused density's primitive ``spec``, all from the one
    kernel: its value, VJP and JVP (nested differentiation) and the two-phase route
    of a first-order node (returned: the kernel's partials saved by the forward pass,
    the backward pass reads them)."""
    def value_only(*args):
        return kernel((False,) * len(args), *args)[0]

    spec.fun = value_only

    def vjp_all(g, ans, *args):
        need = tuple(i not in nondiff for i in range(len(args)))
        parts = kernel(need, *args)[1]
        return tuple(None if p is None else g * p for p in parts)

    def jvp_all(ts, ans, *args):
        need = tuple(t is not None for t in ts)
        parts = kernel(need, *args)[1]
        tan = None
        for x, t, p in zip(args, ts, parts):
            if t is None:
                continue
            c = _contract(p, t, x)
            tan = c if tan is None else tan + c
        return tan

    spec.vjp_all = vjp_all
    spec.jvp_all = jvp_all
    spec.nondiff = tuple(sorted(nondiff))

    def backward(g, parts, pairs, value, vals, kw):
        # the forward pass saved the partials: adj_i += g * partial_i
        for i, p in pairs:
            c = parts[i]
            if type(g) is float and g == 1.0:
                accumulate(p, c)        # the log density is the output: no product
            else:
                accumulate(p, g * c, fresh=type(c) is np.ndarray)

    return TwoPhase(spec, backward)


def fused(name, kernel, check=None, nondiff=(), doc=None, pointwise=None):
    """Make a log-density primitive ``name(*args, reduce=True)`` from ``kernel`` (see
    module doc).

    ``check(*plain_args)`` validates argument values (raise ``DomainError``);
    ``nondiff`` lists positions that must never be traced (integer outcomes, sizes);
    ``pointwise(*args)`` is the elementwise form (``reduce=False``; or declare it
    later with :func:`pointwise`).
    """
    spec = Primitive(name, None)
    params = parameter_names(check, kernel)
    spec.kernel = kernel        # value and partials in one call (read by compile.py)
    spec.check = check
    nondiff = frozenset(nondiff)

    route = _define_rules(spec, kernel, nondiff)

    def general(args):
        # any nesting (values traced at a lower level, forward-mode duals, variables
        # of different tapes): check, then dispatch level by level
        if check is not None:
            guarded(check, *args)           # (a retaped replay runs the check again)
        tape = None
        for i, a in enumerate(args):
            if isinstance(a, Box):
                if i in nondiff:
                    spec.check_differentiable(i)      # raises, naming the argument
                tape = a.tape
        if tape is None:
            return kernel((False,) * len(args), *args)[0]
        return route.general(args)

    def wrapped(*args, reduce=True):
        # the hot path (first order): every traced argument is a Var of one tape
        # holding a plain value; anything else goes the general way
        # (a wrong number of arguments fails inside; the except names the public
        # signature - no arity test on the hot path)
        if reduce is not True:
            return _elementwise(spec, params, nondiff, args, reduce)
        try:
            tape = None
            vals = []
            need = []
            pairs = []
            fixed = None            # args with numpy scalars made floats, if any
            i = 0
            for a in args:
                if type(a) is Var:
                    v = a.value
                    tv = type(v)
                    if tv is not float and tv is not _ndarray and isinstance(v, Box):
                        return general(args)
                    if tape is None:
                        tape = a.tape
                    elif a.tape is not tape:
                        return general(args)
                    vals.append(v)
                    need.append(True)
                    pairs.append((i, a))
                elif isinstance(a, Box):
                    return general(args)
                elif type(a) is _f64:
                    # a numpy scalar (``self.y[t]`` in a loop): the float it holds, so the
                    # checks and the kernel take their float paths (issue 19)
                    a = float(a)
                    vals.append(a)
                    need.append(False)
                    if fixed is None:
                        fixed = list(args)
                    fixed[i] = a
                else:
                    vals.append(a)
                    need.append(False)
                i += 1
            if fixed is not None:
                args = tuple(fixed)
            if check is not None:
                check(*vals)
            if tape is None:
                return kernel((False,) * len(args), *args)[0]
            if nondiff:
                for i, a in pairs:
                    if i in nondiff:
                        spec.check_differentiable(i)      # raises, naming the argument
            token = _ignore_fp()
            try:
                value, parts = kernel(tuple(need), *vals)
            finally:
                _restore_fp(token)
            return route.record(tape, float(value), vals, tuple(pairs), parts)
        except TypeError:
            if params is not None and len(args) != len(params):
                raise arity_error(name, params, len(args)) from None
            raise                   # right arity: a TypeError of its own

    wrapped.__name__ = wrapped.__qualname__ = name
    # the density belongs to the module that wrote its kernel (doctests, pickling)
    wrapped.__module__ = getattr(kernel, "__module__", __name__)
    wrapped.__doc__ = doc or kernel.__doc__
    if params is not None:
        # help() and inspect.signature show (y, mu, sigma, /), not (*args)
        wrapped.__signature__ = inspect.Signature(
            [inspect.Parameter(p, inspect.Parameter.POSITIONAL_ONLY) for p in params]
            + [_REDUCE])
    wrapped._spec = spec
    wrapped._pointwise = None
    if pointwise is not None:
        _declare((wrapped,), pointwise, True)
    spec.wrapped = wrapped
    return wrapped


_ndarray = np.ndarray
_f64 = np.float64
_REDUCE = inspect.Parameter("reduce", inspect.Parameter.KEYWORD_ONLY, default=True)


def pointwise(*densities, broadcast=True):
    """Decorator: declare ``fn(*args)`` (stanlite operations) as the ``reduce=False``
    form of each of ``densities`` (see the module doc). With ``broadcast`` (univariate
    families) its result is brought to the broadcast shape of all the arguments;
    multivariate families return their batch shape themselves (``broadcast=False``)."""
    def declare(fn):
        _declare(densities, fn, broadcast)
        return fn
    return declare


def _declare(densities, fn, broadcast):
    form = fn
    if broadcast:
        def form(*args):
            return full_shape(fn(*args), *args)
        form.__name__ = form.__qualname__ = fn.__name__
        form.__doc__ = fn.__doc__
    for d in densities:
        d._pointwise = form


def full_shape(x, *args):
    """``x`` broadcast to the broadcast shape of ``args`` (a pointwise result whose
    terms do not involve every argument: ``log(sigma)`` with a vector ``y``)."""
    shape = np.broadcast_shapes(*[shape_of(a) for a in args])
    if shape_of(x) == shape:
        return x
    return x + np.zeros(shape)


def terms_primitive(name, core, nondiff=()):
    """The pointwise form of a density whose values come from a numerical procedure
    (finite sums over a data-dependent range, a choice of tail) rather than a
    composition of elementwise operations: one primitive whose value is
    ``core(need, *args)[0]`` (the per-element values, at the broadcast shape) and
    whose derivatives are ``core``'s per-element partials (``[1]``, each broadcastable
    to the values). The procedure runs again at every evaluation (its value decisions
    are never frozen into a recorded graph); ``core`` written with stanlite
    operations makes the partials themselves differentiable (nested AD)."""
    nd = tuple(sorted(nondiff))

    def fun(*args):
        return core((False,) * len(args), *args)[0]
    fun.__name__ = fun.__qualname__ = f"{name}_pointwise"
    prim = primitive(fun)

    def vjp_all(g, ans, *args):
        need = tuple(i not in nd for i in range(len(args)))
        parts = core(need, *args)[1]
        return tuple(None if p is None else g * p for p in parts)

    def jvp_all(ts, ans, *args):
        parts = core(tuple(t is not None for t in ts), *args)[1]
        r = len(shape_of(ans))
        tan = None
        for x, t, p in zip(args, ts, parts):
            if t is None:
                continue
            xs, tsh = shape_of(x), shape_of(t)
            nb = len(tsh) - len(xs)
            if nb and r > len(xs):          # vector mode: batch axes lead
                from ..math import reshape
                t = reshape(t, tsh[:nb] + (1,) * (r - len(xs)) + xs)
            c = t * p
            tan = c if tan is None else tan + c
        return tan

    defvjp_all(prim, vjp_all, nondiff=nd)
    defjvp_all(prim, jvp_all)
    return prim


def check_reduce(name, reduce):
    """``reduce`` must be a bool: True (the sum) or False (the elementwise values)."""
    if not isinstance(reduce, (bool, np.bool_)):
        raise TypeError(f"{name}: reduce must be True or False, got {reduce!r}")
    return bool(reduce)


def _elementwise(spec, params, nondiff, args, reduce):
    """``density(*args, reduce=False)``: the checks of the summed path, then the
    family's pointwise function (plain arrays in, a plain array out; traced in,
    traced out)."""
    name = spec.name
    if check_reduce(name, reduce):
        return spec.wrapped(*args)
    if params is not None and len(args) != len(params):
        raise arity_error(name, params, len(args))
    fn = spec.wrapped._pointwise
    if fn is None:
        raise NotImplementedError(f"{name}: no elementwise form (reduce=False) is declared")
    args = tuple(float(a) if type(a) is _f64 else _plain_sequence(a, i in nondiff)
                 for i, a in enumerate(args))
    if spec.check is not None:
        guarded(spec.check, *args)
    for i, a in enumerate(args):
        if i in nondiff and isinstance(a, Box):
            spec.check_differentiable(i)        # raises, naming the argument
    token = _ignore_fp()
    try:
        out = fn(*args)
    finally:
        _restore_fp(token)
    t = type(out)
    if t is _f64 or t is _ndarray and out.ndim == 0:
        return float(out)
    return out


def _plain_sequence(a, integer_ok):
    """A list or tuple of plain numbers as an array, as the summed kernels take them
    (the pointwise forms do arithmetic on their arguments: ``[0.2, 0.5] - 1.0`` would
    be a TypeError); ints stay ints only where the argument is not differentiated
    (counts, categories: indices). Anything else (traced values) is left as it is."""
    if not isinstance(a, (list, tuple)):
        return a
    arr = np.asarray(a)
    if arr.dtype.kind in "iub":
        return arr if integer_ok else arr.astype(float)
    return arr if arr.dtype.kind == "f" else a


def _contract(p, t, x):
    """sum over the value axes of ``p * t``: the tangent of a scalar log density.

    ``t`` may carry leading batch axes (vector mode); they are kept, and unit axes are
    inserted after them so that ``t``'s value axes right-align with ``p``'s.
    """
    from ..math import reshape, sum as _sum
    xs = shape_of(x)
    ts = shape_of(t)
    nb = len(ts) - len(xs)
    r = max(len(shape_of(p)), len(xs))
    if r > len(xs):
        t = reshape(t, ts[:nb] + (1,) * (r - len(xs)) + xs)
    prod = p * t
    if r == 0:
        return prod
    return _sum(prod, axis=tuple(range(-r, 0)))


# --------------------------------------------------------------------------------------
# argument checks (on plain values): each names the function, argument and value
# --------------------------------------------------------------------------------------
def _fail(fn, arg, what, x, bad):
    x = np.asarray(x)
    if x.ndim:
        idx = np.argwhere(np.broadcast_to(bad, x.shape))[0]
        where = f"{arg}[{', '.join(str(int(i)) for i in idx)}]"
        val = x[tuple(idx)]
    else:
        where, val = arg, x
    raise DomainError(f"{fn}: {where} must be {what}, but is {float(val)!r}")


_prod = math.prod
_F64 = np.dtype(np.float64)
_isfinite = math.isfinite
_INF = math.inf


def _fast_ok(x, lo_ok):
    """Cheap pre-check on floats and float arrays: True means certainly fine; False
    means run the exact check (which finds and names the offending element)."""
    t = type(x)
    if t is float or t is int:
        return _isfinite(x) and bool(lo_ok(x))
    if t is np.ndarray and x.dtype is _F64 and 0 < x.size <= 32 and (
            lo_ok is _true or lo_ok is _gt0):
        # a few numbers (a scale vector, a parameter): Python floats are cheaper than
        # numpy reductions; a finite sum means no NaN/inf, then min > 0 means all > 0
        v = x.ravel().tolist()
        if not _isfinite(sum(v)):
            return False
        return lo_ok is _true or min(v) > 0
    if t is np.ndarray and x.dtype.kind == "f" and x.size:
        # one reduction: a finite sum implies no NaN/inf (overflow falls back)
        return _isfinite(float(x.sum())) and bool(lo_ok(x).all() if lo_ok is not _true
                                                  else True)
    return False


def _true(x):
    return True


def _gt0(x):
    return x > 0


def check_positive(fn, arg, x):
    """``x > 0`` and finite everywhere (a scale, a rate)."""
    if type(x) is float:
        if 0.0 < x < _INF:              # false for NaN
            return
    elif _fast_ok(x, _gt0):
        return
    ok = np.isfinite(x) & (np.asarray(x) > 0)
    if not np.all(ok):
        _fail(fn, arg, "positive and finite", x, ~ok)


def check_nonnegative(fn, arg, x):
    ok = np.asarray(x) >= 0
    if not np.all(ok):
        _fail(fn, arg, "non-negative", x, ~ok)


# Checks and factorisations of constant matrices (a covariance or Cholesky factor
# given as data) cost O(K^2)-O(K^3) per evaluation - more than the density itself
# when it is evaluated at every leapfrog step. Model data is stored read-only
# (declarations.DataDecl.validate), so a read-only array's result is computed once
# and kept while the array lives (a weak reference drops it with the array).
_CONSTANT_CACHE = {}


def is_constant(x):
    """A read-only ndarray: model data (or a value derived from it), which
    :func:`once_for_constant` may remember results for."""
    return type(x) is np.ndarray and not x.flags.writeable


def once_for_constant(key, x, compute):
    """``compute(x)``, remembered per ``key`` for a read-only ndarray ``x``.

    Writable arrays (which could change in place) and traced values are computed
    every time. ``key`` names the computation (e.g. ``("chol", fn, arg)``).
    """
    if type(x) is not np.ndarray or x.flags.writeable:
        return compute(x)
    k = (key, id(x))
    hit = _CONSTANT_CACHE.get(k)
    if hit is not None and hit[0][0]() is x:
        return hit[1]
    return _remember(k, (x,), compute(x))


def once_for_constants(key, arrays, compute):
    """``compute(*arrays)`` remembered per ``key`` while every one of ``arrays`` (all
    read-only ndarrays: the caller checks with :func:`is_constant`) lives: a result
    derived from two data arrays (a design matrix and its outcomes)."""
    k = (key, *map(id, arrays))
    hit = _CONSTANT_CACHE.get(k)
    if hit is not None and all(map(_is_alive_as, hit[0], arrays)):
        return hit[1]
    return _remember(k, arrays, compute(*arrays))


def _is_alive_as(ref, a):
    return ref() is a


def _remember(k, arrays, out):
    if type(out) is np.ndarray:
        out.setflags(write=False)      # shared from now on: never written through

    def drop(_, k=k):                  # any of the arrays gone: the result goes too
        _CONSTANT_CACHE.pop(k, None)
    _CONSTANT_CACHE[k] = (tuple(weakref.ref(a, drop) for a in arrays), out)
    return out


def check_finite(fn, arg, x):
    if type(x) is float:
        if -_INF < x < _INF:            # false for NaN
            return
    elif _fast_ok(x, _true):
        return
    ok = np.isfinite(x)
    if not np.all(ok):
        _fail(fn, arg, "finite", x, ~ok)


def check_not_nan(fn, arg, x):
    if type(x) is float:
        if x == x:                      # false for NaN only
            return
    elif _fast_ok(x, _true):
        return
    ok = ~np.isnan(x)
    if not np.all(ok):
        _fail(fn, arg, "not NaN", x, ~ok)


def check_probability(fn, arg, x):
    x = np.asarray(x)
    ok = (x >= 0) & (x <= 1)
    if not np.all(ok):
        _fail(fn, arg, "a probability in [0, 1]", x, ~ok)


def check_in_range(fn, arg, x, lo, hi):
    x = np.asarray(x)
    ok = (x >= lo) & (x <= hi)
    if not np.all(ok):
        _fail(fn, arg, f"in [{lo}, {hi}]", x, ~ok)


def check_integer(fn, arg, x, lower=None):
    """Integer-valued (an outcome or a count), optionally ``>= lower``."""
    x = np.asarray(x)
    if x.dtype.kind not in "iub":
        ok = np.isfinite(x) & (x == np.round(x)) if x.dtype.kind == "f" else np.zeros(
            x.shape, bool)
        if not np.all(ok):
            _fail(fn, arg, "an integer", x, ~ok)
    if lower is not None:
        ok = x >= lower
        if not np.all(ok):
            _fail(fn, arg, f"an integer >= {lower}", x, ~ok)
