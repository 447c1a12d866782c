"""One Friberg-Karlsson subject: the gradient of the zoo model's log density through
the coupled solver (``sl.pk.twocpt_ode``: PK in closed form, 5 PD states integrated)
side by side with the same model through the plain ``sl.pk.ode`` (8 states), in one
run (issue 22's target: <= 5 ms per gradient for the coupled form).

The model and data are the zoo's (``models/friberg_karlsson.py``: 80 mg every 12 h for
15 doses, 12 concentrations, 14 neutrophil counts over 4 weeks, 11 parameters), at
Torsten's default tolerances 1e-6 and at 1e-8. Columns: CPU milliseconds per gradient
(best of 3 loops, the model's retaped gradient, what a NUTS leapfrog step pays) with
the right-hand side as generated code (``functor/ode_codegen.py``, after its first
``AFTER`` evaluations) and left in the tape interpreter (``interp``, the route before
it; the same gradient bit for bit, asserted), the
ratio full / coupled, ODE right-hand-side evaluations per gradient and ODE solves per
gradient, and the largest relative difference of the two gradients. Times are CPU
time of the process, so other work on a shared machine counts less; still, compare
within one run.

Run:  python benchmarks/friberg_karlsson.py [--quick]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import blas_threads  # noqa: F401,E402  (before numpy)
from _common import best_time  # noqa: E402
import numpy as np  # noqa: E402

import stanlite.models as zoo  # noqa: E402
from stanlite.models.friberg_karlsson import TRUTH, z_of  # noqa: E402


def counts(model, x):
    """(right-hand-side evaluations, ODE solves) of one gradient (compiled steppers)."""
    from stanlite.functor import ode_steppers as dp
    orig, log = dp.dopri, []

    def wrap(*a):
        st = orig(*a)
        log.append(int(a[-1][dp.I_NFEV]))
        return st
    dp.dopri = wrap
    try:
        model.log_density_gradient(x)
    finally:
        dp.dopri = orig
    return sum(log), len(log)


def interpreter_time(kw, x, budget):
    """The coupled gradient with the right-hand side left in the tape interpreter
    (``ode_codegen.AFTER = None``: the route before generated code), on a fresh
    evaluator cache, so that it is measured in the same run."""
    from stanlite.functor import ode_codegen, ode_rhs
    saved = ode_codegen.AFTER, ode_rhs._cache
    ode_codegen.AFTER, ode_rhs._cache = None, type(ode_rhs._cache)()
    try:
        m = zoo.get("friberg_karlsson", **kw)
        for _ in range(5):
            g = m.log_density_gradient(x)[1]
        return best_time(lambda: m.log_density_gradient(x), budget), g
    finally:
        ode_codegen.AFTER, ode_rhs._cache = saved


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tolerance 1e-6 only, short")
    args = ap.parse_args(argv)
    tols = (1e-6,) if args.quick else (1e-6, 1e-8)
    budget = 0.3 if args.quick else 1.5
    print(f"{'tol':>6} {'coupled ms':>11} {'interp ms':>10} {'full ms':>9} "
          f"{'full/coupled':>13} {'rhs evals c/f':>15} {'solves c/f':>11} "
          f"{'max rel diff':>13}")
    for tol in tols:
        kw = dict(rel_tol=tol, abs_tol=tol)
        mc = zoo.get("friberg_karlsson", **kw)
        mf = zoo.get("friberg_karlsson", solver="full", **kw)
        x = mc.unconstrain(z_of(TRUTH))
        gc, gf = mc.log_density_gradient(x)[1], mf.log_density_gradient(x)[1]
        for _ in range(30):     # past ode_codegen.AFTER: the generated right-hand side
            mc.log_density_gradient(x)
        # (compiled in another process while the interpreter goes on: wait for it, so
        # that a first run on an empty numba cache times the generated code too)
        from stanlite.functor import ode_codegen
        ode_codegen.wait()
        mc.log_density_gradient(x)
        tc = best_time(lambda: mc.log_density_gradient(x), budget)
        ti, gi = interpreter_time(kw, x, budget)
        assert np.array_equal(gi, mc.log_density_gradient(x)[1])  # bit for bit
        tf = best_time(lambda: mf.log_density_gradient(x), budget)
        (ec, sc), (ef, sf) = counts(mc, x), counts(mf, x)
        diff = float(np.max(np.abs(gc - gf) / np.maximum(1.0, np.abs(gf))))
        print(f"{tol:>6.0e} {tc * 1e3:>11.2f} {ti * 1e3:>10.2f} {tf * 1e3:>9.2f} "
              f"{tf / tc:>13.1f} "
              f"{ec:>7d}/{ef:<7d} {sc:>5d}/{sf:<5d} {diff:>13.1e}")
    print(f"load average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
