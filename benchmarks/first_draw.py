"""Fresh-process cost: seconds from process start to the first draw, per zoo model.

What a user waits for in a new interpreter before NUTS gives anything: starting Python,
``import stanlite``, building the zoo model with its default data, and one in-process
chain of 1 warmup iteration + 1 draw (``chains=1, parallel=False``): the initial point,
the step-size search, numba loading its compiled NUTS kernel, the model's first
gradients (recorded, then retaped). Issue 20, point 6: no zoo model should wait more
than 1 s on the shared 2-core machine, with the caches warm.

Each model runs in its own fresh process, first once unmeasured (numba writes its disk
cache, Python its ``.pyc`` files: ``PYTHONDONTWRITEBYTECODE`` is removed from the
child's environment, as a normal installation has its bytecode; stanlite writes the
model's lowered program to its disk cache, ``stanlite/autodiff/program_cache.py``, so
the measured runs start from it and check it once against the eager tape instead of
recording: ``STANLITE_CACHE_DIR=off`` measures a first use), then ``--repeats``
times measured. Columns:

  import s    ``import stanlite`` inside the child (perf_counter around it)
  build s     ``sl.models.get(name)``: the zoo model with its default data
  samplers s  importing the samplers (``stanlite.samplers.runner``), numba included:
              what ``model.sample`` would import first
  sample s    the ``sample`` call: numba loading the NUTS kernel from its cache, the
              model's first gradients (recorded, then retaped), 2 iterations, the fit
  draw s      wall seconds from just before the parent starts the process to the
              moment ``sample`` returned the first draw (interpreter start included)
  cpu s       user + system CPU seconds of the whole child process (exit included):
              less sensitive than wall time to the load other work puts on the machine
  big modules which of the heavy optional modules (ArviZ's stack, numba, the scipy
              subpackages only some models need) were imported by the first draw

Reported: the minimum over the repeats (the least-disturbed run; the spread is mostly
other processes). A row ``(python -c pass)`` gives the interpreter's own floor and
``(import numpy, scipy.linalg, numba + 1 cached kernel)`` the floor of the libraries
every chain needs.

Run:  python benchmarks/first_draw.py [--repeats 3] [--models name ...] [--root DIR]
(``--root``: another checkout to measure, e.g. a ``git worktree`` of an older commit.)
"""

import argparse
import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: modules worth naming when a first draw pulled them in (each costs 0.05-1 s)
BIG = ("arviz", "xarray", "pandas", "matplotlib", "netCDF4", "h5netcdf", "h5py", "dask",
       "numba", "scipy.integrate", "scipy.optimize", "scipy.sparse", "scipy.stats")

# the child: stanlite from the checkout under test, timestamps in epoch seconds
# (comparable with the parent's clock), one JSON line on stdout
CHILD = r"""
import sys, time, json
t0 = time.perf_counter()
import stanlite as sl
t1 = time.perf_counter()
model = sl.models.get(sys.argv[1])
t2 = time.perf_counter()
import stanlite.samplers.runner
t3 = time.perf_counter()
fit = model.sample(chains=1, warmup=1, draws=1, seed=1, progress=False, parallel=False)
t_draw = time.time()
t4 = time.perf_counter()
print(json.dumps({"file": sl.__file__, "import": t1 - t0, "build": t2 - t1,
                  "samplers": t3 - t2, "sample": t4 - t3, "draw_at": t_draw,
                  "big": [m for m in json.loads(sys.argv[2]) if m in sys.modules]}))
"""

FLOOR_PASS = "import time, json; print(json.dumps({'draw_at': time.time()}))"

# numpy + scipy.linalg (every model's linear algebra) + numba with one cached kernel:
# what no first draw can avoid while the NUTS kernel is compiled code (a file, not
# ``-c``: numba caches only functions defined in a file)
FLOOR_LIBS = r"""
import time, json, sys
import numpy as np, scipy.linalg
from numba import njit

@njit(cache=True)
def _one(x):
    return x.sum() + 1.0

_one(np.ones(3))
print(json.dumps({"draw_at": time.time(),
                  "big": [m for m in json.loads(sys.argv[1]) if m in sys.modules]}))
"""


def child_env(root):
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_once(args, root, cwd):
    """One fresh process ``python *args``: (its JSON report, wall seconds to the
    first draw, CPU seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    r = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                       env=child_env(root), cwd=cwd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError(f"{args[1:]} failed:\n{r.stderr[-2000:]}")
    report = json.loads(r.stdout.strip().splitlines()[-1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return report, report["draw_at"] - start, cpu


def measure(args, root, cwd, repeats):
    run_once(args, root, cwd)                        # warm the caches, unmeasured
    runs = [run_once(args, root, cwd) for _ in range(repeats)]
    report = runs[0][0]
    nan = float("nan")
    out = {k: min(r[0].get(k, nan) for r in runs)
           for k in ("import", "build", "samplers", "sample")}
    return {**out, "draw": min(r[1] for r in runs), "cpu": min(r[2] for r in runs),
            "big": report.get("big", []), "file": report.get("file")}


COLUMNS = ("import", "build", "samplers", "sample")


def row(label, m):
    cols = "".join(f"{'' if m[k] != m[k] else format(m[k], '.2f'):>11s}" for k in COLUMNS)
    return (f"{label:34s}{cols} {m['draw']:7.2f} {m['cpu']:6.2f}  "
            f"{', '.join(m['big']) or '-'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--models", nargs="*")
    ap.add_argument("--root", default=str(ROOT), help="the checkout to measure")
    a = ap.parse_args()
    root = pathlib.Path(a.root).resolve()
    names = a.models or json.loads(subprocess.run(
        [sys.executable, "-c", "import json, stanlite as sl; "
         "print(json.dumps(sl.models.names()))"], capture_output=True, text=True,
        env=child_env(root), cwd=root, check=True).stdout)
    big = json.dumps(BIG)
    print(f"{'model':34s}" + "".join(f"{k + ' s':>11s}" for k in COLUMNS)
          + f" {'draw s':>7s} {'cpu s':>6s}  big modules at the first draw")
    print("-" * 110)
    print(row("(python -c pass)", measure(["-c", FLOOR_PASS], root, root, a.repeats)))
    with tempfile.TemporaryDirectory() as tmp:
        floor = pathlib.Path(tmp, "floor_libs.py")
        floor.write_text(FLOOR_LIBS)
        print(row("(numpy, scipy.linalg, numba kernel)",
                  measure([str(floor), big], root, root, a.repeats)))
    worst = 0.0
    for name in names:
        m = measure(["-c", CHILD, name, big], root, root, a.repeats)
        if not m["file"].startswith(str(root)):
            raise RuntimeError(f"imported {m['file']}, not the checkout {root}")
        worst = max(worst, m["draw"])
        print(row(name, m), flush=True)
    print(f"\nslowest first draw: {worst:.2f} s (min of {a.repeats} runs each; {root}; "
          f"load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
