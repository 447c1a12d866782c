"""Stan-style loop models: the gradient of the loop form against the vectorised form,
timed at distinct points as a sampler calls it (issue 20's target: loop <= 3x).

For each model of ``loop_models.py`` (an HMM forward algorithm, T=200, K=3; the
coal-mining change point, T=112, 12,544 scalar ``poisson_lpmf`` calls), both forms are
built on the same data and called with ``model.log_density_gradient(x)`` at the same
sequence of distinct points: a fixed-seed random walk in the unconstrained space
starting near the data's generating values, each point a small step from the last, as
a NUTS trajectory visits them. Every call is at a new point, so whatever the model
does there is in the time: the replay of its recording, the spot checks against the
tape, re-recordings. Columns:

  first      the first call (the recording, one-time), CPU seconds
  loop       CPU time per call of the loop form over the remaining points
  vectorised the same for the vectorised form
  ratio      loop / vectorised; the target is <= 3x (PASS / MISS)

At every point the two forms must agree (value and gradient, to rounding): the script
asserts it before printing the table. The backend is whatever ``sl.Model`` uses by
default (``STANLITE_COMPILE=0`` in the environment gives the eager tape, at a much
larger cost per call: use fewer ``--points`` then).

A sampler calls a gradient ~10^4-10^5 times per chain (1000 + 1000 iterations at 5-30
leapfrog steps each), so the default is 20,000 points: the one-time costs (the first
replay's check against the eager tape, tens of ms for a 12,544-term loop) are spread as
a chain spreads them; ``--points 2000`` shows them at a tenth of a chain.

Each form runs ``--repeats`` times (default 3) on new model objects, so every run
records and checks again (the disk cache of lowered programs is off unless
``STANLITE_CACHE_DIR`` is set); the table shows the minimum of each column.

Run:  python benchmarks/loops.py [--points 20000] [--repeats 3] [--quick]
                                 [--models hmm coal]
"""

import argparse
import os
import sys
import time

import blas_threads  # noqa: F401  (one BLAS thread; before numpy)

# no disk cache of lowered programs (autodiff/program_cache.py): every repeat records,
# lowers and checks its program as a first use does (set it to time a cached start)
os.environ.setdefault("STANLITE_CACHE_DIR", "off")

import numpy as np  # noqa: E402

try:
    import stanlite  # noqa: F401
except ImportError:                 # run from a checkout without installing
    import pathlib
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import loop_models  # noqa: E402

SEED = 20261126
TARGET = 3.0

#: constrained values near which the walk starts (the data's generating values)
START = {
    "hmm": {"mu": [-3.0, 0.0, 3.0], "sigma": 1.0,
            "theta1": [0.9, 0.05, 0.05], "theta2": [0.05, 0.9, 0.05],
            "theta3": [0.05, 0.05, 0.9]},
    "coal": {"e": 3.0, "l": 1.0},
}
#: step of the walk per unconstrained coordinate (about a leapfrog step's size)
STEP = 0.02


def walk(model, start, n, seed=SEED):
    """``n`` distinct points: a random walk from ``start`` (constrained values)."""
    rng = np.random.default_rng(seed)
    x0 = np.asarray(model.unconstrain(start), dtype=float)
    steps = rng.normal(0.0, STEP, (n, x0.size))
    steps[0] = 0.0
    return x0 + np.cumsum(steps, axis=0)


def timed_calls(model, points):
    """(first call's CPU seconds, CPU seconds per later call, values, gradients)."""
    vals, grads = np.empty(len(points)), np.empty(points.shape)
    t0 = time.process_time()
    vals[0], grads[0] = model.log_density_gradient(points[0])
    first = time.process_time() - t0
    t0 = time.process_time()
    for i in range(1, len(points)):
        vals[i], grads[i] = model.log_density_gradient(points[i])
    per_call = (time.process_time() - t0) / max(len(points) - 1, 1)
    return first, per_call, vals, grads


def check_agreement(name, a, b, rtol=1e-9):
    """The loop and vectorised forms' values and gradients agree at every point."""
    (va, ga), (vb, gb) = a, b
    scale = 1.0 + np.abs(vb)
    dv = np.max(np.abs(va - vb) / scale)
    dg = np.max(np.abs(ga - gb) / (1.0 + np.abs(gb)))
    assert dv < rtol and dg < rtol, (
        f"{name}: loop and vectorised forms disagree (value {dv:.2e}, gradient "
        f"{dg:.2e}, relative)")
    return max(dv, dg)


def run(names, n_points, repeats=3):
    """Each form timed ``repeats`` times, each time on new model objects (recorded and
    checked again: the one-time costs are in every repeat); the minimum is kept (the
    machine is shared: the minimum is the least disturbed)."""
    rows = []
    for name in names:
        loop_cls, vec_cls, make_data = loop_models.LOOP_MODELS[name]
        data = make_data()
        best = None
        for rep in range(repeats):
            loop_m, vec_m = loop_cls(**data), vec_cls(**data)
            points = walk(loop_m, START[name], n_points)
            print(f"  {name}: loop form ({rep + 1}/{repeats}) ...", file=sys.stderr,
                  flush=True)
            f_l, t_l, v_l, g_l = timed_calls(loop_m, points)
            print(f"  {name}: vectorised form ({rep + 1}/{repeats}) ...", file=sys.stderr,
                  flush=True)
            f_v, t_v, v_v, g_v = timed_calls(vec_m, points)
            err = check_agreement(name, (v_l, g_l), (v_v, g_v))
            now = (f_l, t_l, f_v, t_v)
            best = now if best is None else tuple(map(min, best, now))
        rows.append((name, loop_m.dim, *best, err))
    print_table(rows, n_points, repeats)
    return rows


def print_table(rows, n_points, repeats=1):
    backend = os.environ.get("STANLITE_COMPILE", "(default)")
    print(f"gradient at {n_points} distinct points (random walk, step {STEP}), CPU time, "
          f"min of {repeats} runs; STANLITE_COMPILE={backend}, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}")
    head = (f"{'model':<8}{'dim':>4}{'first s (loop)':>16}{'loop us':>12}"
            f"{'first s (vec)':>15}{'vec. us':>10}{'ratio':>8}{'max rel diff':>14}"
            f"   target <= {TARGET:g}x")
    print(head)
    print("-" * len(head))
    for name, dim, f_l, t_l, f_v, t_v, err in rows:
        ratio = t_l / t_v
        print(f"{name:<8}{dim:>4}{f_l:>16.3f}{t_l * 1e6:>12.1f}{f_v:>15.3f}"
              f"{t_v * 1e6:>10.1f}{ratio:>7.1f}x{err:>14.1e}   "
              f"{'PASS' if ratio <= TARGET else 'MISS'}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=20000,
                    help="distinct points per form (default 20000)")
    ap.add_argument("--repeats", type=int, default=3,
                    help="runs per form on new model objects; the minimum is shown")
    ap.add_argument("--quick", action="store_true", help="200 points")
    ap.add_argument("--models", nargs="+", choices=sorted(loop_models.LOOP_MODELS),
                    default=list(loop_models.LOOP_MODELS))
    a = ap.parse_args()
    run(a.models, 200 if a.quick else a.points, max(1, a.repeats))
