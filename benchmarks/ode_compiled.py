"""ODE solves in compiled code (issue 22, point 1): scipy's stepper vs the numba
stepper, beside the closed form where there is one.

Both routes evaluate the same compiled right-hand side (functor/ode_compiled.py); they
differ in who steps: scipy's RK45/BDF from Python, calling f (and its Jacobians) once
per stage (``scipy``), or one numba call per solve (``compiled``,
functor/ode_native.py and ode_steppers.py: the same methods step for step). Rows:

  onecpt oral q12h x 6   one-compartment PK with first-order absorption, 6 doses, 24
                         observations: ``sl.pk.ode`` (rk45 and bdf, tol 1e-8) against
                         its closed form ``sl.pk.onecpt``; gradient in (CL, V, ka).
  robertson              the stiff chemical kinetics (3 states), ``ode_bdf``, tol 1e-8,
                         gradient in the three rate constants.
  one_comp_mm_elim_abs   posteriordb's model (zoo; ``ode_bdf``): one log-density gradient.
  mm_multidose_ss        the zoo's steady-state Michaelis-Menten model (``pk.ode`` rk45,
                         two algebraic steady states): one log-density gradient.

CPU milliseconds (time.process_time, best of a few loops, routes alternated so that
the load of a shared machine hits both alike); ``scipy/compiled`` is the speed-up,
``compiled/closed`` the price of the ODE over the closed form.

Run:  python benchmarks/ode_compiled.py [--quick]
"""

import argparse
import contextlib
import math
import sys
import time
import warnings

import blas_threads  # noqa: F401  (before numpy)
from _common import zoo_ode_points
import numpy as np

import stanlite as sl
from stanlite.functor import ode_native


@contextlib.contextmanager
def route(name):
    saved = ode_native.ENABLED
    ode_native.ENABLED = name == "compiled"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sl.CompileWarning)
            yield
    finally:
        ode_native.ENABLED = saved


def best_time(fn, budget):
    """Best CPU seconds per call of ``fn`` (one warm-up call; loops of ~budget/3)."""
    fn()
    best = math.inf
    for _ in range(3):
        n, t0 = 0, time.process_time()
        while True:
            fn()
            n += 1
            el = time.process_time() - t0
            if el > budget / 3 or n >= 200:
                break
        best = min(best, el / n)
    return best


def both(make, budget):
    """Best time of ``make(route)()`` by each route, alternated."""
    best = {"scipy": math.inf, "compiled": math.inf}
    for _ in range(2):
        for r in best:
            with route(r):
                fn = make(r)
                best[r] = min(best[r], best_time(fn, budget / 2))
    return best


# ------------------------------------------------------------------------------------
def onecpt_case(method):
    CL, V, KA = 5.0, 50.0, 1.2
    obs = np.concatenate([np.arange(0.5, 72.0, 3.0)])
    time_ = np.concatenate([[0.0], obs])
    evid = np.concatenate([[1], np.zeros(len(obs), dtype=int)])
    amt = np.concatenate([[100.0], np.zeros(len(obs))])
    ii = np.concatenate([[12.0], np.zeros(len(obs))])
    addl = np.concatenate([[5], np.zeros(len(obs), dtype=int)])
    ev = sl.pk.events(time=time_, evid=evid, amt=amt, ii=ii, addl=addl)
    w = np.random.default_rng(0).normal(size=len(time_))

    def one(t, x, th):
        return sl.stack([-th[0] * x[0], th[0] * x[0] - th[1] * x[1]])

    def ode_loss(p):
        CL_, V_, ka = p[0], p[1], p[2]
        A = sl.pk.ode(one, 2, ev, sl.stack([ka, CL_ / V_]), method=method,
                      rel_tol=1e-8, abs_tol=1e-8)
        return sl.sum(A[:, 1] * w) / V_

    def closed_loss(p):
        A = sl.pk.onecpt(ev, p[0], p[1], p[2])
        return sl.sum(A[:, 1] * w) / p[1]
    p = np.array([CL, V, KA])
    return p, ode_loss, closed_loss


def robertson_case():
    def rob(t, y, k1, k2, k3):
        a = -k1 * y[0] + k3 * y[1] * y[2]
        c = k2 * y[1] ** 2
        return sl.stack([a, -a - c, c])
    y0 = np.array([1.0, 0.0, 0.0])
    W = np.array([[1.0, 1e4, 0.0]] * 3)

    def loss(lk):
        k = sl.exp(lk)
        return sl.sum(sl.ode_bdf(rob, y0, 0.0, [0.4, 4.0, 40.0], k[0], k[1], k[2],
                                 rel_tol=1e-8, abs_tol=1e-10) * W)
    return np.log([0.04, 3e7, 1e4]), loss


def fn_rows(budget):
    rows = []
    for method in ("rk45", "bdf"):
        p, ode_loss, closed_loss = onecpt_case(method)
        g_ode = sl.grad(ode_loss)
        g_closed = sl.grad(closed_loss)
        err = np.max(np.abs(g_ode(p) - g_closed(p)) / np.abs(g_closed(p)))
        t = both(lambda r: (lambda: g_ode(p)), budget)
        tc = best_time(lambda: g_closed(p), budget / 2)
        rows.append((f"onecpt oral q12h x 6 ({method}), grad", t, tc,
                     f"grad rel. err vs closed {err:.1e}"))
    lk, loss = robertson_case()
    g = sl.grad(loss)
    t = both(lambda r: (lambda: g(lk)), budget)
    rows.append(("robertson (bdf), grad", t, None, ""))
    return rows


def zoo_rows(quick):
    import stanlite.models as zoo
    rows = []
    for name, xs in (zoo_ode_points(10, 5) if quick else zoo_ode_points(40, 20)):
        n = len(xs)
        best = {"scipy": math.inf, "compiled": math.inf}
        for _ in range(2):
            for r in best:
                with route(r):
                    m = zoo.get(name)           # a fresh model per route
                    m.log_density_gradient(xs[0])
                    t0 = time.process_time()
                    for x in xs[1:]:
                        m.log_density_gradient(x)
                    best[r] = min(best[r], (time.process_time() - t0) / (n - 1))
        rows.append((f"{name} (zoo), log-density grad", best, None,
                     "distinct points near a typical one"))
    return rows


def main(quick=False):
    budget = 0.6 if quick else 2.0
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}")
    head = (f"{'case':42s} {'scipy':>9s} {'compiled':>9s} {'closed':>8s} "
            f"{'scipy/compiled':>14s} {'compiled/closed':>15s}  note")
    print("CPU ms per call")
    print(head)
    print("-" * len(head))
    for label, t, tc, note in fn_rows(budget) + zoo_rows(quick):
        closed = f"{tc * 1e3:8.3f}" if tc else f"{'-':>8s}"
        ratio = f"{t['compiled'] / tc:15.1f}" if tc else f"{'-':>15s}"
        print(f"{label:42s} {t['scipy'] * 1e3:9.3f} {t['compiled'] * 1e3:9.3f} {closed} "
              f"{t['scipy'] / t['compiled']:14.1f} {ratio}  {note}", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer points, shorter loops")
    main(ap.parse_args().quick)
