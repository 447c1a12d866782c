"""The AD review's Table 8 as the paper ran it (issue 22, point 7): brute-force AD
through the dogleg iterations on scalar nodes against the algebraic super node, with
sensitivities in the population parameters and the patients' multipliers.

The problem (the review's appendix; the zoo's ``stanlite.models.pk_steady_state``
holds the residual, its analytic df/dx and the closed form): n patients on a
one-compartment model with first-order absorption, x1' = -k1 x1, x2' = k1 x1 - k2 x2,
evolved in closed form over the dosing interval; the steady state x = F_tau(x + D
e_gut) (2n states, all guts then all centrals) by Powell's dogleg (guess 500, rel_tol
1e-10, f_tol 1e-6). As the paper set it up, patient i's coefficients are a population
parameter times a multiplier, k1_i = k1 phi1_i and k2_i = k2 phi2_i (k1 = 0.5, k2 =
0.2, multipliers uniform(0.7, 1.3) from a fixed seed), and the sensitivities are taken
in

    theta = (k1, k2, phi1_1..phi1_n, phi2_1..phi2_n)         (2n + 2 parameters),

with D = 1000 and tau = 1 fixed. Every column computes the whole 2n x (2n + 2)
Jacobian of the steady state (CPU ms of this process, best of several loops):

  standard        the dogleg templated on a scalar AD type, as Stan ran it:
                  ``algebra_solver_taped(..., scalar=True)`` - residual, analytic
                  df/dx, norms, scaling, dogleg and Gaussian elimination all on
                  scalar nodes (one node per element and operation); reverse mode
                  (one sweep of that tape per state)
  std arrays      the same iterations on array nodes (stanlite's own tape: a vector
                  operation or a linear solve is one node); reverse mode
  super (an. J)   the implicit-function-theorem super node (``sl.algebra_solver``)
                  with the analytic df/dx, reverse mode (the review's "super node +
                  analytical": per state one transposed LU solve and one VJP of f)
  super fwd       the same super node in forward mode: one vector JVP of f carries
                  all 2n + 2 directions, one LU solve with 2n + 2 right-hand sides
  built-in        the super node with df/dx by AD (the review's "built-in", Stan's
                  algebra_solver), reverse mode
  plain solve     the dogleg on plain floats with the analytic df/dx, no derivatives

Ratios: std/super = standard / super (an. J) (the review's Table 8 ratio; the paper's
values at 4, 12, 20 and 28 states are printed beside: 11, 51, 226, 377),
std/fwd = standard / super fwd, super/plain and fwd/plain = the super node's cost over
the plain solve (target <= 3x), and nodes = the scalar nodes one standard solve records.

Before timing, every method's Jacobian is checked against the closed-form steady state
differentiated by AD (to 1e-7).

Run:  python benchmarks/steady_state.py [--quick] [--states 4 12 ...] [--budget S]
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import blas_threads  # noqa: F401  (one BLAS thread; before numpy, as a script)
except ImportError:      # imported as a module (the tests) after numpy
    pass
import numpy as np  # noqa: E402

import stanlite as sl  # noqa: E402
from stanlite.functor.algebra_solver import algebra_solver_taped  # noqa: E402
from stanlite.models.pk_steady_state import (  # noqa: E402
    DOSE, K1, K2, MAX_PATIENTS, SOLVER, TAU, X_GUESS, multipliers, steady_state_exact,
    steady_state_jacobian, steady_state_residual)

#: the paper's Table 8 ratio (standard / super node) at these numbers of states
PAPER_RATIO = {4: 11, 12: 51, 20: 226, 28: 377}
COLUMNS = ("standard", "std arrays", "super (an. J)", "super fwd", "built-in",
           "plain solve")
RATIOS = (("std/super", "standard", "super (an. J)"),
          ("std/fwd", "standard", "super fwd"),
          ("super/plain", "super (an. J)", "plain solve"),
          ("fwd/plain", "super fwd", "plain solve"))
FIGURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "figures")


# --------------------------------------------------------------------------------------
# the problem in the population parameterisation
# --------------------------------------------------------------------------------------
def population_theta(n_patients):
    """``theta = (k1, k2, phi1 (n), phi2 (n))``: the population values and the fixed
    draws of the multipliers (patient i the same at every n)."""
    phi1, phi2 = multipliers(n_patients)
    return np.concatenate([[K1, K2], phi1, phi2])


def rates(theta):
    """The zoo problem's parameters ``(k1 phi1, k2 phi2, D, tau)`` (stanlite ops)."""
    n = (len(theta) - 2) // 2
    return sl.concatenate([theta[0] * theta[2:2 + n], theta[1] * theta[2 + n:],
                           np.array([DOSE, TAU])])


def residual(x, theta):
    """f(x, theta) = F_tau(x + D e_gut) - x on array nodes."""
    return steady_state_residual(x, rates(theta))


def jacobian_x(x, theta):
    """The analytic df/dx on array nodes."""
    return steady_state_jacobian(x, rates(theta))


def exact(theta):
    """The closed-form steady state (stanlite ops)."""
    return steady_state_exact(rates(theta))


def _patients(theta):
    """Per patient ``(exp(-k1_i tau), exp(-k2_i tau), transfer_i)`` on scalars."""
    n = (len(theta) - 2) // 2
    out = []
    for i in range(n):
        k1 = theta[0] * theta[2 + i]
        k2 = theta[1] * theta[2 + n + i]
        d = k1 - k2
        e2 = sl.exp(-k2 * TAU)
        out.append((sl.exp(-k1 * TAU), e2, -k1 * e2 * sl.expm1(-d * TAU) / d))
    return out


def residual_scalar(x, theta):
    """The same residual on scalars (``x`` indexable, ``theta`` a list): one node per
    operation, as a functor templated on Stan's ``var`` records it."""
    n = (len(theta) - 2) // 2
    gut, central = [], []
    for i, (e1, e2, tr) in enumerate(_patients(theta)):
        g = x[i] + DOSE
        gut.append(g * e1 - x[i])
        central.append(x[n + i] * e2 + g * tr - x[n + i])
    return gut + central


def jacobian_x_scalar(x, theta):
    """The analytic df/dx on scalars, a dense list of rows (as an Eigen matrix of
    ``var``)."""
    n = (len(theta) - 2) // 2
    rows = [[0.0] * (2 * n) for _ in range(2 * n)]
    for i, (e1, e2, tr) in enumerate(_patients(theta)):
        rows[i][i] = e1 - 1.0
        rows[n + i][i] = tr
        rows[n + i][n + i] = e2 - 1.0
    return rows


def standard(theta, x0):
    """The steady state by the dogleg on scalar nodes (theta's elements as scalars)."""
    th = [theta[i] for i in range(sl.value_of(theta).shape[0])]
    return algebra_solver_taped(residual_scalar, x0, th, jac_x=jacobian_x_scalar,
                                scalar=True, **SOLVER)


def methods(n_patients):
    """``(theta, {column: theta -> 2n x (2n + 2) Jacobian, or the root for the plain
    solve})``."""
    theta = population_theta(n_patients)
    x0 = np.full(2 * n_patients, X_GUESS)

    def super_node(jac):
        return lambda t: sl.algebra_solver(residual, x0, t, jac_x=jac, **SOLVER)
    return theta, {
        "standard": sl.jacobian_reverse(lambda t: standard(t, x0)),
        "std arrays": sl.jacobian_reverse(
            lambda t: algebra_solver_taped(residual, x0, t, jac_x=jacobian_x, **SOLVER)),
        "super (an. J)": sl.jacobian_reverse(super_node(jacobian_x)),
        "super fwd": sl.jacobian_forward(super_node(jacobian_x)),
        "built-in": sl.jacobian_reverse(super_node(None)),
        "plain solve": super_node(jacobian_x),
    }


def check(n_patients, tol=1e-7):
    """Every method against the closed form differentiated by AD; returns the largest
    relative error of each."""
    theta, ms = methods(n_patients)
    ref_J = sl.jacobian(exact)(theta)
    ref_x = np.asarray(exact(theta))
    errs = {}
    for name, fn in ms.items():
        r = fn(theta)
        ref = ref_J if r.ndim == 2 else ref_x
        errs[name] = float(np.max(np.abs(r - ref)) / np.max(np.abs(ref)))
        assert errs[name] < tol, (name, n_patients, errs[name])
    return errs


def scalar_nodes(n_patients):
    """Nodes one standard (scalar) solve records."""
    theta = population_theta(n_patients)
    with sl.nested() as tape:
        standard(sl.Var(theta), np.full(2 * n_patients, X_GUESS))
        return len(tape.nodes)


# --------------------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------------------
def run(states=(4, 12, 20, 28), budget=0.5, figure=None):
    """Check, then time every column at each number of states; print the table with
    the paper's ratio beside ours. Returns ``(states, nodes, {column: seconds})`` rows."""
    import algebraic_solver as bench       # best_time, plot
    for s in sorted({2, states[0], states[-1]}):
        check(s // 2)
    print("checked: every method's 2n x (2n+2) Jacobian matches the closed form to 1e-7\n")
    print("CPU ms to solve and compute all 2n x (2n+2) sensitivities (best of 5 loops; "
          "3 single calls when one exceeds the budget)")
    head = (f"{'states':>6}{'nodes':>8}" + "".join(f"{c:>14}" for c in COLUMNS)
            + "".join(f"{r[0]:>12}" for r in RATIOS) + f"{'paper':>7}")
    print(head)
    print("-" * len(head))
    rows = []
    for s in states:
        theta, ms = methods(s // 2)
        t = {c: bench.best_time(ms[c], theta, budget) for c in COLUMNS}
        nodes = scalar_nodes(s // 2)
        rows.append((s, nodes, t))
        paper = PAPER_RATIO.get(s)
        print(f"{s:>6}{nodes:>8}" + "".join(f"{t[c] * 1e3:>14.3f}" for c in COLUMNS)
              + "".join(f"{t[a] / t[b]:>12.1f}" for _, a, b in RATIOS)
              + (f"{paper:>7d}" if paper else f"{'-':>7}"), flush=True)
    if figure:
        bench.plot([(s, None, [t[c] for c in COLUMNS]) for s, _, t in rows], COLUMNS,
                   figure, title="Table 8 as the paper ran it (2n + 2 sensitivities)")
    return rows


# --------------------------------------------------------------------------------------
# mm_multidose_ss: the zoo's general-ODE steady state, before and after (issue 22)
# --------------------------------------------------------------------------------------
def mm_gradient_table(n_points=20, repeats=3):
    """Time per log-density gradient of ``mm_multidose_ss`` (2 regimens, each a bolus
    steady state by the algebraic solver around ODE solves, then the profile) by the
    route now (``pk.steady_state.PERIOD_JACOBIANS``: the period map and its
    Jacobians from one sensitivity solve per evaluation) and the route before (the
    residual through AD, recorded again at every solve), alternately in one run at
    the same distinct points near the truth; with the recordings of a right-hand side
    or residual and the ODE solves per gradient."""
    import time

    import stanlite.models as zoo
    from stanlite.functor import ode_compiled, ode_native
    from stanlite.models import mm_multidose_ss as mm
    from stanlite.pk import steady_state as pss

    rng = np.random.default_rng(0)
    saved = pss.PERIOD_JACOBIANS
    best, counts = {}, {}
    try:
        for _ in range(repeats):
            for route, on in (("now", True), ("before", False)):
                pss.PERIOD_JACOBIANS = on
                m = zoo.get("mm_multidose_ss")
                x0 = m.unconstrain({k: mm.TRUTH[k] for k in ("V", "Vmax", "Km", "sigma")})
                xs = [x0 + rng.normal(0.0, 0.02, x0.size) for _ in range(n_points)]
                m.log_density_gradient(xs[0])             # first call: recordings
                rec0 = ode_compiled.STATS["compiled"] + ode_compiled.STATS["fallback"]
                sol0 = ode_native.STATS["compiled"]
                t0 = time.process_time()
                for x in xs[1:]:
                    m.log_density_gradient(x)
                t = (time.process_time() - t0) / (n_points - 1)
                best[route] = min(best.get(route, math.inf), t)
                k = n_points - 1
                counts[route] = (
                    (ode_compiled.STATS["compiled"] + ode_compiled.STATS["fallback"]
                     - rec0) / k, (ode_native.STATS["compiled"] - sol0) / k)
    finally:
        pss.PERIOD_JACOBIANS = saved
    print(f"\nmm_multidose_ss, CPU ms per log-density gradient (best of {repeats}, "
          f"{n_points - 1} distinct points each), routes alternated in one run")
    print(f"{'route':>8}{'ms/grad':>10}{'recordings/grad':>17}{'ODE solves/grad':>17}")
    for r in ("now", "before"):
        print(f"{r:>8}{best[r] * 1e3:>10.3f}{counts[r][0]:>17.1f}{counts[r][1]:>17.1f}")
    print(f"before / now: {best['before'] / best['now']:.1f}x")
    return best, counts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="states 4 and 12, short loops")
    ap.add_argument("--states", type=int, nargs="+", help="even numbers of states")
    ap.add_argument("--budget", type=float, default=None,
                    help="CPU seconds of timing per cell (default 0.5)")
    ap.add_argument("--no-figure", action="store_true")
    ap.add_argument("--mm", action="store_true",
                    help="only mm_multidose_ss's gradient, route now against before")
    a = ap.parse_args(argv)
    if a.mm:
        return mm_gradient_table(10 if a.quick else 20)
    st = tuple(a.states) if a.states else ((4, 12) if a.quick else (4, 12, 20, 28))
    if any(s % 2 or not 2 <= s <= 2 * MAX_PATIENTS for s in st):
        ap.error(f"--states must be even numbers in 2..{2 * MAX_PATIENTS}")
    budget = a.budget or (0.15 if a.quick else 0.5)
    fig = None if a.no_figure else os.path.join(FIGURES, "steady_state.png")
    return run(st, budget, fig)


if __name__ == "__main__":
    main()
