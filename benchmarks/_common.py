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
    try:
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        out["jax"] = (jax, jnp)
    except ImportError:
        pass
    return out


def peer_columns(ps, ours):
    """The table's columns: ``ours`` (the floor and stanlite's), then the installed
    peers' (``ps`` from :func:`peers`): autograd, and jax without and with ``jax.jit``."""
    cols = list(ours)
    if "autograd" in ps:
        cols.append("autograd")
    if "jax" in ps:
        cols += ["jax", "jax.jit"]
    return cols


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

