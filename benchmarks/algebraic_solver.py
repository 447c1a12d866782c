"""The AD review's Table 8 / Figure 4: differentiating an algebraic solver, brute-force
AD through the iterations ("standard") against the implicit-function-theorem super
node, on the pharmacometric steady-state problem of the review's appendix.

The problem (``stanlite.models.pk_steady_state``, where the zoo model of the same
name is built on it; ``steady_state_problem(n)`` gives it for n patients): n
patients, each a one-compartment model with first-order absorption from the gut,

    x1' = -k1 x1,    x2' = k1 x1 - k2 x2          (x1 gut, x2 central amount),

evolved in closed form over the dosing interval tau (F_tau below). A dose D enters
the gut at the start of each interval; the steady state (the trough) solves

    x = F_tau(x + D e_gut),   F_tau(g, c) = (g e^{-k1 tau},
                                             c e^{-k2 tau} + g k1 / (k1 - k2) (e^{-k2 tau} - e^{-k1 tau})).

Population k1 = 0.5, k2 = 0.2, D = 1000, tau = 1; patient i has k1_i = k1 phi1_i,
k2_i = k2 phi2_i with multipliers uniform(0.7, 1.3) (fixed seed; patient i is the
same at every size). States: 2n (all guts, then all centrals); parameters: the 2n
rates plus D and tau (2n + 2); initial guess 500; Powell's dogleg with rel_tol 1e-10,
f_tol 1e-6. Output: the 2n x (2n + 2) sensitivities of the steady state.

Columns (CPU time of this process to solve and compute all sensitivities, best of
several repeats; CPU rather than wall time, so that other jobs on a shared machine
do not count):

  standard         the dogleg run on traced values (``algebra_solver_taped``) with
                   the analytic df/dx, reverse-mode Jacobian through every iteration
                   (the review's "standard": the solver templated on the AD type).
                   stanlite's nodes are arrays and its linear solve is itself a
                   matrix primitive, so this tape has ~600 nodes at every size
  std scalar       the same, with each Gauss-Newton solve done by Gaussian
                   elimination on scalar nodes (O(n^3) nodes per solve): what a
                   solver templated on a scalar AD type (Stan's var) records
  super (AD J)     ``sl.algebra_solver`` (AD Jacobians: df/dx by forward mode in the
                   iterations, one nested VJP of f per adjoint), reverse mode: 2n
                   sweeps (the review's "built-in", Stan's solver)
  super (an. J)    the super node with the analytic df/dx (``jac_x``)
  super fwd        the super node (analytic J) in forward mode: one JVP of f for all
                   2n + 2 directions and one LU solve with 2n + 2 right-hand sides
  super 1 grad     the gradient of one scalar (the sum of the troughs) through the
                   super node (analytic J): one solve, one transposed LU solve, one
                   VJP of f - what a log-density gradient inside NUTS costs
  plain solve      the same dogleg on plain floats, analytic df/dx, no derivatives
                   (the floor)
  scipy hybrj      scipy.optimize.root(method="hybr") with the analytic df/dx:
                   MINPACK's compiled dogleg, no derivatives (a peer floor)

Ratios (like with like: every one of these uses the analytic df/dx): std/super and
sc/super = standard and std scalar over super (an. J); super/plain = super (an. J)
over the plain solve; fwd/plain = super fwd over the plain solve; AD-J/anJ = super (AD J)
over super (an. J) (the review's Figure 5).

Checks before timing: at the population values the gut trough equals
D e^{-k1 tau} / (1 - e^{-k1 tau}) and the central trough its closed form; every
method's sensitivities match the closed-form steady state differentiated by AD.
Saves the Figure 4-style plot (log time vs number of states) to
benchmarks/figures/algebraic_solver.png when matplotlib is installed.

``benchmarks/steady_state.py`` (issue 8's entry point) runs the same table on the
review's columns; both use :func:`run` here.

Run:  python benchmarks/algebraic_solver.py [--quick] [--states 2 4 ...] [--budget S]
"""

import argparse
import math
import os
import sys
import time

try:
    import blas_threads  # noqa: F401  (before numpy, when run as a script)
except ImportError:         # imported as a module (benchmarks/steady_state.py) after numpy
    pass
import numpy as np

import stanlite as sl
from _common import per_call
from stanlite.functor.algebra_iterations import _scalar_solve, _SMat, _SVec
from stanlite.functor.algebra_solver import algebra_solver_taped

# the problem lives in the zoo (the model pk_steady_state is built on it)
from stanlite.models.pk_steady_state import (  # noqa: E402
    DOSE, K1, K2, MAX_PATIENTS, SOLVER, TAU, population_theta, steady_state_exact,
    steady_state_problem)


# --------------------------------------------------------------------------------------
# the linear solve of a scalar-AD solver
# --------------------------------------------------------------------------------------
def scalar_solve(J, b):
    """``J^-1 b`` on scalar nodes: the library's Gaussian elimination with partial
    pivoting on scalar nodes (the scalar baseline of ``algebra_solver_taped``), applied
    to J's and b's entries; what a linear solve templated on a scalar AD type records
    (about 2 n^3 / 3 multiply-adds, each a node)."""
    n = sl.value_of(b).shape[0]
    A = _SMat([[J[i, j] for j in range(n)] for i in range(n)])
    return sl.stack(_scalar_solve(A, _SVec([b[i] for i in range(n)])).e)


# --------------------------------------------------------------------------------------
# the compared computations: theta -> (2n, 2n + 2) sensitivities
# --------------------------------------------------------------------------------------
def methods(n_patients):
    f, jac, x0, theta = steady_state_problem(n_patients)
    out = {
        "standard": sl.jacobian_reverse(
            lambda t: algebra_solver_taped(f, x0, t, jac_x=jac, **SOLVER)),
        "std scalar": sl.jacobian_reverse(
            lambda t: algebra_solver_taped(f, x0, t, jac_x=jac, linear_solve=scalar_solve,
                                           **SOLVER)),
        "super (AD J)": sl.jacobian_reverse(
            lambda t: sl.algebra_solver(f, x0, t, **SOLVER)),
        "super (an. J)": sl.jacobian_reverse(
            lambda t: sl.algebra_solver(f, x0, t, jac_x=jac, **SOLVER)),
        "super fwd": sl.jacobian_forward(
            lambda t: sl.algebra_solver(f, x0, t, jac_x=jac, **SOLVER)),
        "super 1 grad": sl.grad(
            lambda t: sl.sum(sl.algebra_solver(f, x0, t, jac_x=jac, **SOLVER))),
        "plain solve": lambda t: sl.algebra_solver(f, x0, t, jac_x=jac, **SOLVER),
    }
    try:
        import scipy.optimize as so

        def f_np(x, t):
            return np.asarray(f(x, t))

        def j_np(x, t):
            return np.asarray(jac(x, t))

        out["scipy hybrj"] = lambda t: so.root(f_np, x0, args=(t,), jac=j_np,
                                               method="hybr", tol=1e-10).x
    except ImportError:
        pass
    return theta, out


def check(n_patients):
    """The review's check at the population values and every method's sensitivities
    against the closed form differentiated by AD. Returns the (gut, central) trough."""
    f, jac, x0, _ = steady_state_problem(n_patients)
    pop = population_theta(n_patients, random=False)
    x = sl.algebra_solver(f, x0, pop, **SOLVER)
    e1, e2 = math.exp(-K1 * TAU), math.exp(-K2 * TAU)
    gut = DOSE * e1 / (1 - e1)
    central = (gut + DOSE) * K1 / (K1 - K2) * (e2 - e1) / (1 - e2)
    n = n_patients
    assert np.allclose(x[:n], gut, rtol=1e-10), (x[:n], gut)
    assert np.allclose(x[n:], central, rtol=1e-10), (x[n:], central)
    theta, ms = methods(n_patients)
    exact = sl.jacobian(steady_state_exact)(theta)
    x_exact = np.asarray(steady_state_exact(theta))
    for name, run in ms.items():
        r = run(theta)
        ref = exact if r.ndim == 2 else (
            exact.sum(axis=0) if name == "super 1 grad" else x_exact)
        err = np.max(np.abs(r - ref)) / np.max(np.abs(ref))
        assert err < 1e-7, (name, n_patients, err)
    return gut, central


def best_time(fn, arg, budget, repeats=5):
    """Best per-call CPU seconds of this process (``time.process_time``: other jobs on a
    shared machine do not count) over ``repeats`` loops of ~budget/repeats each (3
    single calls for a computation slower than the budget)."""
    one = max(_once(fn, arg), 1e-7)
    if one > budget:
        return min([one] + [_once(fn, arg) for _ in range(2)])
    n = max(1, int(budget / repeats / one))
    return min(per_call(fn, n, arg) for _ in range(repeats))


def _once(fn, arg):
    t0 = time.process_time()
    fn(arg)
    return time.process_time() - t0


def _fmt(t):
    return f"{t * 1e3:9.3f}" if t < 10 else f"{t * 1e3:9.0f}"


def tape_sizes(n_patients):
    """Nodes recorded by one solve: standard, standard scalar, super node."""
    f, jac, x0, theta = steady_state_problem(n_patients)
    out = []
    for kw in ({}, {"linear_solve": scalar_solve}):
        with sl.nested() as tape:
            algebra_solver_taped(f, x0, sl.Var(theta), jac_x=jac, **kw, **SOLVER)
            out.append(len(tape.nodes))
    with sl.nested() as tape:
        sl.algebra_solver(f, x0, sl.Var(theta), **SOLVER)
        out.append(len(tape.nodes))
    return tuple(out)


#: (name, numerator, denominator) of the ratio columns
RATIOS = (("std/super", "standard", "super (an. J)"),
          ("sc/super", "std scalar", "super (an. J)"),
          ("super/plain", "super (an. J)", "plain solve"),
          ("fwd/plain", "super fwd", "plain solve"),
          ("AD-J/anJ", "super (AD J)", "super (an. J)"))

_STYLE = {"standard": ("o", "-"), "std scalar": ("s", "-"), "super (AD J)": ("^", "-"),
          "super (an. J)": ("v", "-"), "super fwd": ("D", "-"),
          "plain solve": ("", "--"),
          "scipy hybrj": ("", ":")}


def plot(rows, cols, path, title="Solve + all sensitivities of the steady state"):
    """The review's Figure 4: log run time against the number of states, one line per
    method (``rows``: ``(states, nodes, times)`` as returned by :func:`run`)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no figure)")
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    states = [r[0] for r in rows]
    for j, c in enumerate(cols):
        marker, line = _STYLE.get(c, ("o", "-"))
        ax.plot(states, [r[2][j] * 1e3 for r in rows], marker=marker, ms=4, ls=line,
                label=c)
    ax.set_yscale("log")
    ax.set_xlabel("number of states (2 per patient)")
    ax.set_ylabel("CPU time (ms, log scale)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"figure: {path}")
    return path


def run(states=tuple(range(2, 29, 2)), budget=0.5, columns=None, figure=None):
    """Check, then time ``columns`` (default: every method) at each number of states
    and print the table with the tape sizes and the ratios; save the Figure 4-style
    plot to ``figure`` (a path) if given. Returns the rows ``(states, (nodes standard,
    nodes std scalar), [seconds per column])``."""
    gut, central = check(1)
    for s in sorted({states[0], states[-1]}):
        check(s // 2)
    print(f"check at the population values: gut trough {gut:.6f} = D e^(-k1 tau) / "
          f"(1 - e^(-k1 tau)), central trough {central:.6f} (closed form); every "
          "method's sensitivities match the closed form to 1e-7\n")
    cols = list(columns) if columns is not None else list(methods(1)[1])
    ratios = [r for r in RATIOS if r[1] in cols and r[2] in cols]
    head = "".join(f"{c:>14}" for c in cols)
    print("CPU time (ms) to solve and compute all 2n x (2n+2) sensitivities, best of "
          "5 timed loops (of 3 single calls when one call exceeds the budget)")
    print(f"{'states':>6}{'nodes':>7}{'nodes sc':>9}{head}"
          + "".join(f"{r[0]:>12}" for r in ratios))
    print("-" * (22 + 14 * len(cols) + 12 * len(ratios)))
    rows = []
    for s in states:
        theta, ms = methods(s // 2)
        ts = [best_time(ms[c], theta, budget) for c in cols]
        t = dict(zip(cols, ts))
        n_std, n_sc, _ = tape_sizes(s // 2)
        rows.append((s, (n_std, n_sc), ts))
        print(f"{s:>6}{n_std:>7}{n_sc:>9}" + "".join(f"{_fmt(x):>14}" for x in ts)
              + "".join(f"{t[a] / t[b]:>12.1f}" for _, a, b in ratios), flush=True)
    print("\nnodes / nodes sc: recorded by one standard / standard-scalar solve (the super "
          "node records one)")
    if figure:
        plot(rows, cols, figure)
    return rows


def routes_table(states=(2, 12, 28), budget=0.5):
    """The AD-Jacobian solver (no ``jac_x``: the plain iterations' f and df/dx come from
    f's compiled program, functor/ode_compiled.py) against the route before (f and a
    forward pass on the tape at each iteration; ``ode_compiled.COMPILE_AFTER = None``),
    timed alternately in one run: a plain solve, one gradient, all sensitivities."""
    from stanlite.functor import ode_compiled
    print("\nAD-Jacobian solver (no jac_x): CPU ms, compiled f (default) / tape f (before)")
    head = f"{'states':>6}" + "".join(f"{c:>24}" for c in
                                      ("plain solve", "super 1 grad", "super (AD J)"))
    print(head)
    print("-" * len(head))
    saved = ode_compiled.COMPILE_AFTER
    for st in states:
        f, _, x0, theta = steady_state_problem(st // 2)
        fns = [lambda t: sl.algebra_solver(f, x0, t, **SOLVER),
               sl.grad(lambda t: sl.sum(sl.algebra_solver(f, x0, t, **SOLVER))),
               sl.jacobian_reverse(lambda t: sl.algebra_solver(f, x0, t, **SOLVER))]
        cells = []
        for fn in fns:
            best = {}
            try:
                for _ in range(2):
                    for route, after in (("after", saved), ("before", None)):
                        ode_compiled.COMPILE_AFTER = after
                        best[route] = min(best.get(route, math.inf),
                                          best_time(fn, theta, budget / 2, repeats=2))
            finally:
                ode_compiled.COMPILE_AFTER = saved
            cells.append(f"{best['after'] * 1e3:7.2f} / {best['before'] * 1e3:7.2f}"
                         f" {best['before'] / best['after']:4.1f}x")
        print(f"{st:>6}" + "".join(f"{c:>24}" for c in cells), flush=True)


FIGURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "figures")


def parse_args(description, default_budget=0.5):
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--quick", action="store_true", help="states 2, 12, 28; short loops")
    ap.add_argument("--states", type=int, nargs="+", help="even numbers of states (2..28)")
    ap.add_argument("--no-figure", action="store_true")
    ap.add_argument("--routes", action="store_true",
                    help="only the compiled-f vs tape-f table of the AD-Jacobian solver")
    ap.add_argument("--budget", type=float, default=None,
                    help=f"CPU seconds of timing per method and size (default "
                         f"{default_budget})")
    a = ap.parse_args()
    st = tuple(a.states) if a.states else ((2, 12, 28) if a.quick else tuple(range(2, 29, 2)))
    if any(s % 2 or not 2 <= s <= 2 * MAX_PATIENTS for s in st):
        ap.error(f"--states must be even numbers in 2..{2 * MAX_PATIENTS}")
    if a.routes:
        routes_table(st if a.states else (2, 12, 28), a.budget or default_budget)
        sys.exit(0)
    return st, a.budget or (0.15 if a.quick else default_budget), not a.no_figure


if __name__ == "__main__":
    st, budget, fig = parse_args(__doc__.splitlines()[0])
    run(st, budget, figure=os.path.join(FIGURES, "algebraic_solver.png") if fig else None)
