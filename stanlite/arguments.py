"""Validation of the inference methods' arguments, in one place.

``sample``, ``variational``, ``optimize``, ``laplace`` and ``pathfinder`` check every
argument with these small functions *before anything runs*: a bad value fails at
once with an :class:`~stanlite.ArgumentError` naming the argument, the accepted
values and what came, instead of a frozen chain (a step size of 0 or NaN), a silently
truncated count (``draws=2.5``) or a traceback from a worker process.

Each validator takes the argument's name and value and returns the value in the form
the method uses (``int``, ``float``, ``bool``) - numpy scalars are accepted wherever
Python numbers are; ``bool`` is not a number here (``draws=True`` is a mistake).

>>> from stanlite.arguments import positive_int, unit_interval
>>> positive_int("chains", 4), unit_interval("adapt_delta", 0.9)
(4, 0.9)
>>> positive_int("chains", 2.5)
Traceback (most recent call last):
...
stanlite.errors.ArgumentError: chains must be an integer >= 1, got 2.5
"""

import difflib
import inspect
import math

import numpy as np

from .errors import ArgumentError

__all__ = ["integer", "positive_int", "nonneg_int", "real", "positive_real",
           "nonneg_real", "unit_interval", "boolean", "choice", "seed", "no_unknown",
           "inv_metric", "suggest", "fits_in_memory", "executor"]


def _is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_real(v):
    return isinstance(v, (int, float, np.integer, np.floating)) and \
        not isinstance(v, (bool, np.bool_))


def integer(name, value, minimum=None, maximum=None):
    """An integer (Python or numpy, not ``bool``) in ``[minimum, maximum]``."""
    if minimum is not None and maximum is not None:
        want = f"an integer in {minimum}..{maximum}"
    elif minimum is not None:
        want = f"an integer >= {minimum}"
    else:
        want = "an integer"
    if not _is_int(value) or (minimum is not None and value < minimum) or \
            (maximum is not None and value > maximum):
        raise ArgumentError(f"{name} must be {want}, got {value!r}")
    return int(value)


def positive_int(name, value):
    """An integer >= 1 (``chains``, ``thin``, iteration counts)."""
    return integer(name, value, 1)


def nonneg_int(name, value):
    """An integer >= 0 (``draws``, ``warmup``)."""
    return integer(name, value, 0)


def real(name, value, low=None, high=None, *, low_open=False, high_open=False,
         finite=True):
    """A real number (not ``bool``, not NaN; finite unless ``finite=False``) between
    ``low`` and ``high`` (closed ends unless ``low_open``/``high_open``)."""
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {low:g}")
    if high is not None:
        parts.append(f"{'<' if high_open else '<='} {high:g}")
    want = ("a finite number" if finite else "a number") + \
        (" " + " and ".join(parts) if parts else "")
    if low is not None and high is not None:
        want = (f"a number in {'(' if low_open else '['}{low:g}, {high:g}"
                f"{')' if high_open else ']'}")
    ok = _is_real(value)
    if ok:
        f = float(value)
        ok = not math.isnan(f) and (not finite or math.isfinite(f))
        if ok and low is not None:
            ok = f > low if low_open else f >= low
        if ok and high is not None:
            ok = f < high if high_open else f <= high
    if not ok:
        raise ArgumentError(f"{name} must be {want}, got {value!r}")
    return float(value)


def positive_real(name, value):
    """A finite number > 0 (``stepsize``, ``eta``)."""
    return real(name, value, 0, low_open=True)


def nonneg_real(name, value):
    """A finite number >= 0 (tolerances, radii)."""
    return real(name, value, 0)


def unit_interval(name, value):
    """A number in the open interval (0, 1) (``adapt_delta``)."""
    return real(name, value, 0, 1, low_open=True, high_open=True)


def boolean(name, value):
    """``True`` or ``False`` (numpy's too); ``0``, ``"no"`` or ``None`` are mistakes."""
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def choice(name, value, options):
    """One of ``options`` (strings), with the closest one suggested for a typo."""
    if not isinstance(value, str) or value not in options:
        raise ArgumentError(f"{name} must be one of {', '.join(map(repr, options))}, "
                            f"got {value!r}{suggest(value, options)}")
    return value


def seed(name, value, sequence=True, generator=False):
    """``None`` (fresh entropy), a non-negative integer, a ``numpy.random.SeedSequence``
    (if ``sequence``) or a ``numpy.random.Generator`` (if ``generator``), returned
    unchanged (an integer as ``int``). Floats, strings, booleans and negative numbers
    are mistakes (numpy would round, hash or reject them later)."""
    if value is None or (sequence and isinstance(value, np.random.SeedSequence)) or \
            (generator and isinstance(value, np.random.Generator)):
        return value
    if _is_int(value) and value >= 0:
        return int(value)
    kinds = ["None", "an integer >= 0"] + (["a numpy SeedSequence"] if sequence else []) \
        + (["a numpy Generator"] if generator else [])
    raise ArgumentError(f"{name} must be {', '.join(kinds[:-1])} or {kinds[-1]}, "
                        f"got {value!r}")


def executor(name, value):
    """``None``, a ``concurrent.futures.Executor``, or a Dask ``Client`` (anything with
    ``get_executor()``), which becomes its executor."""
    import concurrent.futures as cf
    if value is None or isinstance(value, cf.Executor):
        return value
    get = getattr(value, "get_executor", None)
    if callable(get):
        return get()
    raise ArgumentError(f"{name} must be a concurrent.futures.Executor, a Dask Client "
                        f"or None, got {type(value).__name__}")


def suggest(name, valid):
    """``"; did you mean 'x'?"`` for the valid name closest to ``name`` (or "")."""
    if not isinstance(name, str):
        return ""
    close = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


#: other libraries' names (cmdstanpy, CmdStan) for arguments named otherwise here
ALIASES = {"draws": "output_samples", "num_draws": "output_samples",
           "draw": "output_samples",
           "iterations": "iter", "max_iterations": "iter", "num_iterations": "iter",
           "iter_sampling": "draws", "iter_warmup": "warmup", "num_samples": "draws",
           "num_warmup": "warmup", "samples": "draws", "step_size": "stepsize",
           "parallel_chains": "parallel", "show_progress": "progress", "inits": "init",
           "algorithm": "method", "algo": "method", "jacobian_adjust": "jacobian",
           "paths": "num_paths", "metric_file": "inv_metric"}


def no_unknown(what, kwargs, valid):
    """Reject keyword arguments not in ``valid`` (names, or a function whose
    parameters are the valid names): the first unknown one is named with the
    closest valid name (``draw=`` -> "did you mean 'draws'?"), or the name this
    method has for another library's (``iterations=`` -> "did you mean 'iter'?")."""
    if callable(valid):
        valid = [p.name for p in inspect.signature(valid).parameters.values()
                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                 and p.name not in ("self", "model")]
    valid = list(valid)
    for k in kwargs:
        if k not in valid:
            hint = (f"; did you mean {ALIASES[k]!r}?" if ALIASES.get(k) in valid
                    else suggest(k, valid))
            raise ArgumentError(f"{what} got an unexpected argument {k!r}{hint} (its "
                                "arguments: "
                                f"{', '.join(valid)})")


def inv_metric(name, value, metric, dim):
    """An inverse metric for ``metric``: ``diag_e`` takes ``dim`` positive finite
    variances, ``dense_e`` a symmetric positive-definite ``dim x dim`` matrix;
    ``unit_e`` takes none. Returned as a float array (or ``None``)."""
    if value is None:
        return None
    if metric == "unit_e":
        raise ArgumentError(f"{name} is for metric 'diag_e' or 'dense_e'; metric "
                            "'unit_e' has none (pass metric='diag_e' to use it)")
    try:
        a = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ArgumentError(f"{name} must be an array of numbers, got {value!r}") from None
    if metric == "diag_e":
        if a.shape != (dim,):
            raise ArgumentError(f"{name} for metric 'diag_e' must have shape ({dim},) "
                                f"(one variance per unconstrained coordinate), got shape "
                                f"{a.shape}")
        bad = np.flatnonzero(~(np.isfinite(a) & (a > 0)))
        if bad.size:
            raise ArgumentError(f"{name} for metric 'diag_e' must be positive finite "
                                f"numbers, but element [{bad[0]}] is {float(a[bad[0]])}")
        return a
    if a.shape != (dim, dim):
        raise ArgumentError(f"{name} for metric 'dense_e' must have shape ({dim}, {dim}), "
                            f"got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ArgumentError(f"{name} for metric 'dense_e' must be finite")
    scale = max(float(np.max(np.abs(a))), 1e-300)
    if np.max(np.abs(a - a.T)) > 1e-8 * scale:
        i, j = np.unravel_index(np.argmax(np.abs(a - a.T)), a.shape)
        raise ArgumentError(f"{name} for metric 'dense_e' must be symmetric, but element "
                            f"[{i}, {j}] is {float(a[i, j])} and [{j}, {i}] is "
                            f"{float(a[j, i])}")
    try:
        np.linalg.cholesky(0.5 * (a + a.T))
    except np.linalg.LinAlgError:
        raise ArgumentError(f"{name} for metric 'dense_e' must be positive definite, "
                            "but is not") from None
    return a


def fits_in_memory(what, count, width):
    """Refuse, before anything runs, a run that would keep ``count`` draws of
    ``width`` float64 numbers each in memory beyond the machine's physical memory (a
    typo'd ``draws=10**10`` would otherwise end in a MemoryError or the OOM killer
    after hours). ``what`` says which arguments make the count."""
    from .declarations import _bytes, physical_memory
    need = int(count) * int(width) * 8
    limit = physical_memory()
    if limit is not None and need > limit:
        raise ArgumentError(f"{what} would keep {int(count):,} draws of {int(width)} "
                            f"numbers in memory ({_bytes(need)}), more than this "
                            f"machine's memory ({_bytes(limit)})")
