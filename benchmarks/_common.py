"""Helpers shared by the benchmark scripts: timed loops, and the peer libraries.

Imported by its bare name (``import _common``), as ``blas_threads`` is: a script run as
``python benchmarks/<name>.py`` has this folder on sys.path. Only the standard library
is imported at the top, so that importing it neither loads numpy before
``blas_threads`` has set the BLAS thread count nor loads stanlite in the peers'
processes (nuts.py).

Timing is a loop of back-to-back calls sized from one timed call so that ``repeats``
loops take about ``budget`` seconds in all; the clock is the process time by default
(all the process's threads, not the wall: on a shared machine the wall clock also
counts the time other processes hold the cores).
"""

import argparse
import statistics
import time

# "no argument": ``fn()`` is timed; given an argument, ``fn(arg)`` is. The argument is
# passed by the loop itself: a closure around it would add a call to every timed call,
# which is a visible share of a microsecond-scale gradient.
NO_ARG = object()


def per_call(fn, n, arg=NO_ARG, clock=time.process_time):
    """Seconds per call over ``n`` back-to-back calls of ``fn()`` (or ``fn(arg)``)."""
    if arg is NO_ARG:
        t0 = clock()
        for _ in range(n):
            fn()
        return (clock() - t0) / n
    t0 = clock()
    for _ in range(n):
        fn(arg)
    return (clock() - t0) / n


def loop_size(fn, budget, repeats, arg=NO_ARG, clock=time.process_time, calls=1,
              floor=1e-6):
    """Calls per timed loop so that ``repeats`` loops take about ``budget`` seconds: one
    warm-up call (imports, JIT compilation, caches), then ``calls`` timed calls give
    the time of one (at least ``floor``: a clock tick can read 0)."""
    if arg is NO_ARG:
        fn()
    else:
        fn(arg)
    one = max(per_call(fn, calls, arg, clock), floor)
    return max(1, int(budget / repeats / one))


def best_time(fn, budget=1.0, repeats=3, arg=NO_ARG, clock=time.process_time,
              floor=1e-6):
    """Best per-call seconds over ``repeats`` loops (after one warm-up call)."""
    n = loop_size(fn, budget, repeats, arg, clock, floor=floor)
    return min(per_call(fn, n, arg, clock) for _ in range(repeats))


def median_time(fn, budget=0.6, repeats=5):
    """Median per-call process seconds over ``repeats`` loops (after one warm-up call)."""
    n = loop_size(fn, budget, repeats)
    return statistics.median(per_call(fn, n) for _ in range(repeats))


def median_times(fns, arg_of, budget=0.5, repeats=7, calls=1, floor=1e-6):
    """Median per-call process seconds of each ``fns[name](arg_of(name))``. The repeats
    of the different functions are interleaved, so that a noisy period of a shared
    machine hits them alike. ``calls`` and ``floor``: as in :func:`loop_size`."""
    sizes = {k: loop_size(f, budget, repeats, arg_of(k), calls=calls, floor=floor)
             for k, f in fns.items()}
    samples = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            samples[k].append(per_call(f, sizes[k], arg_of(k)))
    return {k: statistics.median(v) for k, v in samples.items()}


def zoo_ode_points(n_one_comp, n_mm):
    """The zoo's ODE models with distinct points near a typical one, as a sampler asks
    for gradients: ``[(name, points)]``, ``n_one_comp`` points of one_comp_mm_elim_abs
    and ``n_mm`` of mm_multidose_ss (seed 0 for each). numpy and stanlite are imported
    here, when called, not with this module."""
    import numpy as np
    import stanlite.models as zoo
    from stanlite.models import mm_multidose_ss as mm
    cases = [("one_comp_mm_elim_abs", dict(k_a=1.0, K_m=2.0, V_m=3.0, sigma=0.5),
              n_one_comp),
             ("mm_multidose_ss", {k: mm.TRUTH[k] for k in ("V", "Vmax", "Km", "sigma")},
              n_mm)]
    out = []
    for name, at, n in cases:
        rng = np.random.default_rng(0)
        x0 = zoo.get(name).unconstrain(at)
        out.append((name, [x0 + rng.normal(0.0, 0.02, x0.size) for _ in range(n)]))
    return out


def arg_parser(doc, quick_help="shorter timing loops"):
    """A benchmark script's command line: the first line of its docstring ``doc`` as
    the description, and ``--quick`` (``quick_help``: what a quick run cuts)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=quick_help)
    return ap


def loop_budget(quick, budget, repeats):
    """``(budget, repeats)`` of a table's timed loops: the script's own, or a
    ``--quick`` run's (0.15 s in 5 repeats: a smoke run, not a measurement)."""
    return (0.15, 5) if quick else (budget, repeats)


def fmt_time(t):
    """Seconds as a table cell: microseconds below a millisecond, else milliseconds."""
    if t < 1e-3:
        return f"{t * 1e6:8.1f} us"
    return f"{t * 1e3:8.2f} ms"


def peers():
    """The optional peer AD libraries that are installed: ``{"autograd": (autograd,
    autograd.numpy), "jax": (jax, jax.numpy)}`` (jax in float64)."""
    out = {}
    try:
        import autograd
        import autograd.numpy as anp
        out["autograd"] = (autograd, anp)
    except ImportError:
        pass
    jx = jax64()
    if jx is not None:
        out["jax"] = jx
    return out


def jax64():
    """``(jax, jax.numpy)`` with float64 enabled (like the others), or None when jax is
    not installed."""
    try:
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
    except ImportError:
        return None
    return jax, jnp


def peer_columns(ps, ours):
    """The table's columns: ``ours`` (the floor and stanlite's), then the installed
    peers' (``ps`` from :func:`peers`): autograd, and jax without and with ``jax.jit``."""
    cols = list(ours)
    if "autograd" in ps:
        cols.append("autograd")
    if "jax" in ps:
        cols += ["jax", "jax.jit"]
    return cols


def peer_functions(ps, derivative, make, make_jax=None, block=None):
    """The installed peers' (``ps`` from :func:`peers`) versions of one derivative, by
    column of :func:`peer_columns`: ``derivative(lib)`` is the library's transform
    (e.g. ``lambda lib: lib.value_and_grad``), ``make(np_)`` builds the function on the
    library's numpy (``make_jax`` for jax, if it needs its own). jax's are wrapped by
    ``block`` (default :func:`blocking`, for a value and gradient) so that a timed call
    waits for the result, without and with ``jax.jit``."""
    fns = {}
    if "autograd" in ps:
        ag, anp = ps["autograd"]
        fns["autograd"] = derivative(ag)(make(anp))
    if "jax" in ps:
        jax, jnp = ps["jax"]
        d = derivative(jax)((make_jax or make)(jnp))
        block = block or blocking
        fns["jax"] = block(d)
        fns["jax.jit"] = block(jax.jit(d))
    return fns


def blocking(vg):
    """A jax value-and-gradient function that returns only once its gradient is
    computed (jax dispatches asynchronously: the timed call would end before it)."""
    def call(x):
        v, g = vg(x)
        g.block_until_ready()
        return v, g
    return call


def print_head(head):
    """A table's header line and a rule as long."""
    print(head)
    print("-" * len(head))

