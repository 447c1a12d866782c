"""Where a gradient of posteriordb's one_comp_mm_elim_abs goes: the cost NUTS pays at
every leapfrog step of ``benchmarks/posteriordb.py``'s slowest posterior.

The zoo model ``one_comp_mm_elim_abs`` (one state, Michaelis-Menten elimination, 20
output times) solves its ODE with ``sl.ode_bdf``; its gradient integrates the state
and its sensitivities to the three parameters (a coupled system of 4 states). For
each solver setting the script prints the CPU time (``time.process_time``, best of
several loops) of one log density and one gradient at the posterior median, the
largest change of the log density against a 1e-10 solve over a few posterior-typical
points, and a profile of the default setting split into the integrator's evaluations
of the coupled right-hand side and its Jacobian (stanlite), scipy's BDF stepping, and
the rest of the model.

Run:  python benchmarks/one_comp_gradient.py [--repeats N]
"""

import argparse
import cProfile
import importlib
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
importlib.import_module("blas_threads")     # one BLAS thread; before numpy is imported

import numpy as np  # noqa: E402

import stanlite as sl  # noqa: E402
import stanlite.models as zoo  # noqa: E402
from stanlite.models import one_comp_mm_elim_abs as oc  # noqa: E402

NAME = "one_comp_mm_elim_abs"
MEDIAN = {"k_a": 0.755, "K_m": 0.980, "V_m": 0.897, "sigma": 0.1255}   # posteriordb's


class _Model(oc.OneCompMmElimAbs):
    """The zoo model, with ``ode_rk45`` instead of ``ode_bdf`` when asked."""

    solver = "bdf"

    def transformed_parameters(self, k_a, K_m, V_m):
        if self.solver == "bdf":
            return super().transformed_parameters(k_a, K_m, V_m)
        return {"C": sl.ode_rk45(oc.mm_elimination_rhs, self.y0, self.t0, self.times, k_a,
                                 K_m, V_m, self.D, self.V, **self.ode_control)}


def build(rel_tol, abs_tol, solver="bdf"):
    m = _Model.from_json(zoo.default_data(NAME), rel_tol=rel_tol, abs_tol=abs_tol)
    m.solver = solver
    return m


def cpu(fn, repeats):
    fn()
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        for _ in range(repeats):
            fn()
        best = min(best, (time.process_time() - t0) / repeats)
    return best


def typical_points(n=8, seed=1):
    """Points around the posterior (log scale, spread like its marginals)."""
    rng = np.random.default_rng(seed)
    center = np.log([MEDIAN[k] for k in ("k_a", "K_m", "V_m", "sigma")])
    spread = np.array([0.1, 1.0, 0.3, 0.18])
    return [center + spread * rng.standard_normal(4) for _ in range(n)]


def profile_split(model, x, repeats):
    """Split one gradient by cProfile's cumulative times: the integrator's calls of the
    right-hand side of the coupled system and of its Jacobian (stanlite evaluating f
    and its derivatives), scipy's BDF stepping around them, and everything outside the
    integration. Also the number of those calls per gradient."""
    for _ in range(3):                  # recorded, retaped (the model's and f's tapes)
        model.log_density_gradient(x)
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(repeats):
        model.log_density_gradient(x)
    pr.disable()
    st = pstats.Stats(pr)
    total = integ = rhs = jac = 0.0
    n_rhs = n_jac = 0
    for (path, _, func), (_, nc, _, ct, _) in st.stats.items():
        if path.endswith(os.path.join("functor", "ode.py")) and func == "fun":
            rhs += ct
            n_rhs += nc
        elif path.endswith(os.path.join("functor", "ode.py")) and func == "jac":
            jac += ct
            n_jac += nc
        elif path.endswith("ode_integrate.py") and func == "integrate":
            integ += ct
        elif path.endswith("model.py") and func == "log_density_gradient":
            total += ct
    parts = {"right-hand side of the coupled system (f and its Jacobian-vector "
             "products, stanlite)": rhs,
             "Jacobian for BDF's Newton iterations (stanlite)": jac,
             "scipy's BDF stepping (LU solves, error control, interpolation)":
                 integ - rhs - jac,
             "outside the integration (the model, the retaped gradient)": total - integ}
    return {k: v / total for k, v in parts.items()}, n_rhs / repeats, n_jac / repeats


def main(repeats=5):
    settings = [("ode_bdf 1e-6 (the zoo default)", 1e-6, 1e-6, "bdf"),
                ("ode_bdf 1e-8", 1e-8, 1e-8, "bdf"),
                ("ode_bdf 1e-10 (integrate_ode_bdf's default)", 1e-10, 1e-10, "bdf"),
                ("ode_rk45 1e-6 (for comparison)", 1e-6, 1e-6, "rk45")]
    tight = build(1e-10, 1e-10)
    pts = typical_points()
    lp_tight = [tight.log_density(x) for x in pts]
    x = tight.unconstrain(MEDIAN)
    print(f"{NAME}: CPU time per evaluation at the posterior median, best of 3 loops "
          f"of {repeats}; |dlp| = largest change of the log density against ode_bdf 1e-10 "
          f"over {len(pts)} posterior-typical points")
    head = (f"{'solver, rel_tol = abs_tol':<44}{'lp ms':>8}{'grad ms':>9}{'grad/lp':>8}"
            f"{'|dlp|':>10}")
    print(head)
    print("-" * len(head))
    for label, rt, at, solver in settings:
        m = build(rt, at, solver)
        t_lp = cpu(lambda: m.log_density(x), repeats)
        t_g = cpu(lambda: m.log_density_gradient(x), repeats)
        dlp = max(abs(m.log_density(p) - q) for p, q in zip(pts, lp_tight))
        print(f"{label:<44}{t_lp * 1e3:>8.1f}{t_g * 1e3:>9.1f}{t_g / t_lp:>8.2f}"
              f"{dlp:>10.1e}", flush=True)
    parts, n_rhs, n_jac = profile_split(build(1e-6, 1e-6), x, repeats)
    print(f"\nwhere a gradient's CPU time goes (ode_bdf 1e-6; cProfile, so the profiler's "
          f"overhead inflates the small calls): {n_rhs:.0f} right-hand sides and "
          f"{n_jac:.0f} Jacobians of the 4-state coupled system per gradient")
    for k, v in parts.items():
        print(f"  {v * 100:5.1f}%  {k}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    main(ap.parse_args().repeats)
