"""The AD review's Table 8 / Figure 4: differentiating an algebraic solver, brute-force
AD through the iterations ("standard") against the implicit-function-theorem super
node, on the pharmacometric steady-state problem of the review's appendix.

The problem (reusable: ``steady_state_problem``): n patients, each a one-compartment
model with first-order absorption from the gut,

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

Columns (time to solve and compute all sensitivities, best of several repeats):

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
over the plain solve; AD-J/anJ = super (AD J) over super (an. J) (the review's
Figure 5).

Checks before timing: at the population values the gut trough equals
D e^{-k1 tau} / (1 - e^{-k1 tau}) and the central trough its closed form; every
method's sensitivities match the closed-form steady state differentiated by AD.
Saves the Figure 4-style plot (log time vs number of states) to
benchmarks/figures/algebraic_solver.png when matplotlib is installed.

Run:  python benchmarks/algebraic_solver.py [--quick] [--states 2 4 ...]
"""

import argparse
import math
import os
import time

try:
    import blas_threads  # noqa: F401  (before numpy, when run as a script)
except ImportError:         # imported as a module (the problem definition) after numpy
    pass
import numpy as np

import stanlite as sl
from stanlite.functor.algebra_solver import algebra_solver_taped

K1, K2, DOSE, TAU = 0.5, 0.2, 1000.0, 1.0
MAX_PATIENTS = 14
SEED = 20180314


# --------------------------------------------------------------------------------------
# the steady-state problem (kept small and importable: the zoo will reuse it)
# --------------------------------------------------------------------------------------
def multipliers(n_patients, seed=SEED):
    """(phi1, phi2) for patients 1..n: uniform(0.7, 1.3), the same patient i at every n."""
    if not 1 <= n_patients <= MAX_PATIENTS:
        raise ValueError(f"n_patients must be in 1..{MAX_PATIENTS}, got {n_patients}")
    phi = np.random.default_rng(seed).uniform(0.7, 1.3, size=(2, MAX_PATIENTS))
    return phi[0, :n_patients], phi[1, :n_patients]


def population_theta(n_patients, k1=K1, k2=K2, dose=DOSE, tau=TAU, random=True):
    """theta = (k1_1..k1_n, k2_1..k2_n, D, tau); ``random=False``: every patient at the
    population values."""
    if random:
        p1, p2 = multipliers(n_patients)
    else:
        p1 = p2 = np.ones(n_patients)
    return np.concatenate([k1 * p1, k2 * p2, [dose, tau]])


def _unpack(theta):
    n = (theta.shape[0] - 2) // 2
    return n, theta[:n], theta[n:2 * n], theta[2 * n], theta[2 * n + 1]


def steady_state_residual(x, theta):
    """f(x, theta) = F_tau(x + D e_gut) - x for every patient (stanlite ops)."""
    n, k1, k2, dose, tau = _unpack(theta)
    gut, central = x[:n], x[n:]
    e1, e2 = sl.exp(-k1 * tau), sl.exp(-k2 * tau)
    g = gut + dose
    return sl.concatenate([g * e1 - gut,
                           central * e2 + g * k1 / (k1 - k2) * (e2 - e1) - central])


def steady_state_jacobian(x, theta):
    """The analytic df/dx: per patient [[e1 - 1, 0], [k1 / (k1 - k2) (e2 - e1), e2 - 1]]
    (a block of four diagonal matrices; stanlite ops, so it is differentiable too)."""
    n, k1, k2, dose, tau = _unpack(theta)
    e1, e2 = sl.exp(-k1 * tau), sl.exp(-k2 * tau)
    top = sl.concatenate([sl.diag_matrix(e1 - 1.0), np.zeros((n, n))], axis=1)
    bottom = sl.concatenate([sl.diag_matrix(k1 / (k1 - k2) * (e2 - e1)),
                             sl.diag_matrix(e2 - 1.0)], axis=1)
    return sl.concatenate([top, bottom], axis=0)


def steady_state_exact(theta):
    """The closed-form trough: gut D e1 / (1 - e1), central
    (gut + D) k1 / (k1 - k2) (e2 - e1) / (1 - e2)."""
    n, k1, k2, dose, tau = _unpack(theta)
    e1, e2 = sl.exp(-k1 * tau), sl.exp(-k2 * tau)
    gut = dose * e1 / (1.0 - e1)
    central = (gut + dose) * k1 / (k1 - k2) * (e2 - e1) / (1.0 - e2)
    return sl.concatenate([gut, central])


def scalar_solve(J, b):
    """``J^-1 b`` by Gaussian elimination with partial pivoting on scalar nodes: what a
    linear solve templated on a scalar AD type records (about 2 n^3 / 3 multiply-adds,
    each a node)."""
    n = sl.value_of(b).shape[0]
    A = [[J[i, j] for j in range(n)] for i in range(n)]
    y = [b[i] for i in range(n)]
    for k in range(n):
        p = max(range(k, n), key=lambda i: abs(float(sl.value_of(A[i][k]))))
        A[k], A[p] = A[p], A[k]
        y[k], y[p] = y[p], y[k]
        for i in range(k + 1, n):
            m = A[i][k] / A[k][k]
            for j in range(k + 1, n):
                A[i][j] = A[i][j] - m * A[k][j]
            y[i] = y[i] - m * y[k]
    x = [None] * n
    for i in reversed(range(n)):
        r = y[i]
        for j in range(i + 1, n):
            r = r - A[i][j] * x[j]
        x[i] = r / A[i][i]
    return sl.stack(x)


def steady_state_problem(n_patients):
    """``(residual, jac_x, x_guess, theta)`` of the review's problem for n patients."""
    return (steady_state_residual, steady_state_jacobian, np.full(2 * n_patients, 500.0),
            population_theta(n_patients))


SOLVER = dict(rel_tol=1e-10, f_tol=1e-6, max_steps=200)


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
    against the closed form differentiated by AD."""
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
    """Best per-call seconds over ``repeats`` loops of ~budget/repeats each (3 single
    calls for a computation slower than the budget)."""
    t0 = time.perf_counter()
    fn(arg)
    one = max(time.perf_counter() - t0, 1e-7)
    if one > budget:
        return min([one] + [_once(fn, arg) for _ in range(2)])
    n = max(1, int(budget / repeats / one))
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn(arg)
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def _once(fn, arg):
    t0 = time.perf_counter()
    fn(arg)
    return time.perf_counter() - t0


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


def plot(rows, cols, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no figure)")
        return
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    states = [r[0] for r in rows]
    for j, c in enumerate(cols):
        ax.plot(states, [r[2][j] * 1e3 for r in rows], marker="o", ms=3, label=c)
    ax.set_yscale("log")
    ax.set_xlabel("number of states (2 per patient)")
    ax.set_ylabel("run time (ms, log scale)")
    ax.set_title("Solve + all sensitivities of the steady state")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")


def main(states=tuple(range(2, 29, 2)), budget=0.5, figure=True):
    gut, central = check(1)
    for s in sorted({states[0], states[-1]}):
        check(s // 2)
    print(f"check at the population values: gut trough {gut:.6f} = D e^(-k1 tau) / "
          f"(1 - e^(-k1 tau)), central trough {central:.6f} (closed form); every "
          "method's sensitivities match the closed form to 1e-7\n")
    _, ms = methods(1)
    cols = list(ms)
    head = "".join(f"{c:>14}" for c in cols)
    print("run time (ms) to solve and compute all 2n x (2n+2) sensitivities, best of "
          "5 timed loops (of 3 single calls when one call exceeds the budget)")
    print(f"{'states':>6}{'nodes':>7}{'nodes sc':>9}{head}{'std/super':>10}"
          f"{'sc/super':>9}{'super/plain':>12}{'AD-J/anJ':>9}")
    print("-" * (22 + 14 * len(cols) + 40))
    rows = []
    for s in states:
        theta, ms = methods(s // 2)
        ts = [best_time(run, theta, budget) for run in ms.values()]
        t = dict(zip(cols, ts))
        n_std, n_sc, _ = tape_sizes(s // 2)
        rows.append((s, (n_std, n_sc), ts))
        print(f"{s:>6}{n_std:>7}{n_sc:>9}" + "".join(f"{_fmt(x):>14}" for x in ts)
              + f"{t['standard'] / t['super (an. J)']:>10.1f}"
              + f"{t['std scalar'] / t['super (an. J)']:>9.0f}"
              + f"{t['super (an. J)'] / t['plain solve']:>12.1f}"
              + f"{t['super (AD J)'] / t['super (an. J)']:>9.2f}", flush=True)
    print("\nnodes / nodes sc: recorded by one standard / standard-scalar solve (the super "
          "node records one)")
    if figure:
        plot(rows, cols, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                      "figures", "algebraic_solver.png"))
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="states 2, 12, 28; short loops")
    ap.add_argument("--states", type=int, nargs="+", help="even numbers of states (2..28)")
    ap.add_argument("--no-figure", action="store_true")
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds of timing per method and size (default 0.5)")
    a = ap.parse_args()
    st = tuple(a.states) if a.states else ((2, 12, 28) if a.quick else tuple(range(2, 29, 2)))
    if any(s % 2 or not 2 <= s <= 2 * MAX_PATIENTS for s in st):
        ap.error(f"--states must be even numbers in 2..{2 * MAX_PATIENTS}")
    main(st, budget=a.budget or (0.15 if a.quick else 0.5), figure=not a.no_figure)
