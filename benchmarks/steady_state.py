"""Issue 8's entry point for the AD review's steady-state experiment (Table 8, Figure 4):
brute-force AD through the dogleg iterations against the algebraic super node.

The problem is the zoo's (``stanlite.models.pk_steady_state``): n patients on a
one-compartment model with first-order absorption, x1' = -k1 x1, x2' = k1 x1 - k2 x2,
evolved in closed form over the dosing interval; the steady state x = F_tau(x + D
e_gut) (2n states) by Powell's dogleg (guess 500, rel_tol 1e-10, f_tol 1e-6) with
population k1 = 0.5, k2 = 0.2, D = 1000, tau = 1 and multipliers uniform(0.7, 1.3)
(fixed seed). For 2..28 states the script prints the CPU time to solve and compute all
2n x (2n + 2) sensitivities with

  standard        the dogleg run on traced values, reverse-mode Jacobian through the
                  iterations (the review's "standard"); stanlite records each linear
                  solve as one matrix node, so this tape does not grow with n
  std scalar      the same with every Gauss-Newton solve by Gaussian elimination on
                  scalar nodes: the review's element-wise tape (O(n^3) nodes per solve)
  super (AD J)    ``sl.algebra_solver`` with AD Jacobians (the review's "built-in")
  super (an. J)   the super node with the analytic df/dx (the review's "super node +
                  analytical")
  super fwd       the super node (analytic df/dx) in forward mode: one JVP of f carries
                  all 2n + 2 directions, one LU solve with 2n + 2 right-hand sides
                  (stanlite's reverse-mode Jacobian loops over the 2n outputs in Python)
  plain solve     the same dogleg on plain floats, no derivatives (the floor)

and the ratios std/super, sc/super (standard and std scalar over super (an. J)),
super/plain, fwd/plain (super (an. J) and super fwd over the plain solve) and
AD-J/anJ (super (AD J) over super (an. J), the review's Figure 5).
It saves the Figure 4-style plot (log time against the number of states) to
``benchmarks/figures/steady_state.png``. Before timing it checks the review's closed
forms at the population values and every method's sensitivities against the
differentiated closed form.

The machinery (methods, checks, timing, table, plot) is ``benchmarks/algebraic_solver.py``,
which also times forward mode, a single gradient and scipy's MINPACK.

Run:  python benchmarks/steady_state.py [--quick] [--states 2 4 ...] [--budget S]
"""

import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
importlib.import_module("blas_threads")     # one BLAS thread; before numpy is imported

import algebraic_solver as bench  # noqa: E402

#: the review's columns, in the order of its Table 8, plus the floor
COLUMNS = ("standard", "std scalar", "super (AD J)", "super (an. J)", "super fwd",
           "plain solve")


def main(states=tuple(range(2, 29, 2)), budget=0.5, figure=True):
    path = os.path.join(bench.FIGURES, "steady_state.png") if figure else None
    return bench.run(states, budget, columns=COLUMNS, figure=path)


if __name__ == "__main__":
    st, budget, fig = bench.parse_args(__doc__.splitlines()[0])
    main(st, budget, fig)
