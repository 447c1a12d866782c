"""Hessian time and Hessian/gradient ratio, stanlite side by side with the floor and peers.

stanlite's Hessian is forward-over-reverse in vector mode (one reverse sweep over
d-wide duals). Columns: the hand-written numpy Hessian (the floor), stanlite
(``sl.hessian``, eager), stanlite retaped (``sl.compile(f, x0).hessian``: the
forward-over-reverse computation recorded once and replayed as straight-line numpy),
HIPS autograd's ``hessian``, ``jax.hessian`` with and without ``jit`` (float64), when
installed; the last column is the eager Hessian's time over the eager gradient's.
Every Hessian is checked against the hand-written one before timing.

Models at d = 10, 50, 200:
  logistic regression (vectorized)   N = 1000:  H = -X^T diag(s(1-s)) X
  multivariate Student-t (dense)     nu = 5:    q = x^T P x,
      lp = -(nu+d)/2 log(1 + q/nu),  H = -(nu+d)/(nu+q) P + 2(nu+d)/(nu+q)^2 (Px)(Px)^T
      (q written as Stan users write it, ``quad_form_sym(P, x)``; ``--matmul`` writes
      ``x @ P @ x``, whose forward-over-reverse Hessian has a d x d x d product:
      the tangent of the adjoint (x @ P)^bar, d directions wide, times P^T)

Run:  python benchmarks/hessian.py [--quick] [--matmul]
"""

import sys

import blas_threads  # noqa: F401  (before numpy)
import numpy as np

import stanlite as sl
import _common
from _common import fmt_time, peer_columns, peers, print_head
from ad_overhead import best_time


def logistic(d, N=1000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, d)) / np.sqrt(d)
    y = (rng.random(N) < 0.5).astype(float)
    x0 = rng.standard_normal(d) * 0.3

    def f_sl(b):
        eta = X @ b
        return sl.sum(y * eta - sl.log1p_exp(eta)) - 0.5 * sl.sum(b * b)

    def h_np(b):
        p = 0.5 * (1.0 + np.tanh(0.5 * (X @ b)))
        return -(X.T * (p * (1.0 - p))) @ X - np.eye(d)

    def f_gen(np_):
        def f(b):
            eta = np_.dot(X, b)
            return np_.sum(y * eta - np_.logaddexp(0.0, eta)) - 0.5 * np_.sum(b * b)
        return f

    return x0, f_sl, h_np, f_gen


MATMUL = False


def student_t(d, nu=5.0, seed=0):
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((d, d))
    P = B @ B.T / d + np.eye(d)
    x0 = rng.standard_normal(d) * 0.3

    def f_sl(x):
        q = x @ P @ x if MATMUL else sl.quad_form_sym(P, x)
        return -(nu + d) / 2 * sl.log1p(q / nu)

    def h_np(x):
        Px = P @ x
        q = x @ Px
        return -(nu + d) / (nu + q) * P + 2 * (nu + d) / (nu + q) ** 2 * np.outer(Px, Px)

    def f_gen(np_):
        def f(x):
            return -(nu + d) / 2 * np_.log1p(np_.dot(x, np_.dot(P, x)) / nu)
        return f

    return x0, f_sl, h_np, f_gen


def _blocking_array(h):
    """A jax Hessian function that returns once the Hessian is computed."""
    return lambda x: h(x).block_until_ready()


def run(quick=False):
    budget = 0.15 if quick else 0.4
    ps = peers()
    cols = peer_columns(ps, ["numpy (floor)", "stanlite", "retaped"])
    rows = []
    for model, make in (("logistic", logistic), ("student-t", student_t)):
        for d in (10, 50, 200):
            x0, f_sl, h_np, f_gen = make(d)
            ref = h_np(x0)
            compiled = sl.compile(f_sl, x0)
            compiled.hessian(x0 * 1.01)     # record, and the first replay's check
            fns = {"numpy (floor)": h_np, "stanlite": sl.hessian(f_sl),
                   "retaped": compiled.hessian,
                   **_common.peer_functions(ps, lambda lib: lib.hessian, f_gen,
                                            block=_blocking_array)}
            times = {}
            for col in cols:
                arg = ps["jax"][1].asarray(x0) if col.startswith("jax") else x0
                H = np.asarray(fns[col](arg))
                if not np.allclose(H, ref, rtol=1e-8, atol=1e-10):
                    print(f"  !! {col} Hessian disagrees on {model} d={d}", file=sys.stderr)
                b = budget / 4 if (col == "jax" or (col == "autograd" and d == 200)) else budget
                times[col] = best_time(fns[col], arg, budget=b, repeats=3)
            g_time = best_time(sl.value_and_grad(f_sl), x0, budget=budget / 2)
            rows.append((f"{model} d={d}", times, times["stanlite"] / g_time))
    w = 20
    head = f"{'case':<{w}}" + "".join(f"{c:>22}" for c in cols) + f"{'stanlite H/grad':>17}"
    print("Hessian, best time per call; (ratio to the hand-written numpy Hessian)")
    print_head(head)
    for name, times, hg in rows:
        floor = times["numpy (floor)"]
        cells = [f"{fmt_time(times[c])} ({times[c] / floor:6.2f}x)" for c in cols]
        print(f"{name:<{w}}" + "".join(f"{c:>22}" for c in cells) + f"{hg:>16.1f}x")
    return rows


if __name__ == "__main__":
    ap = _common.arg_parser(__doc__)
    ap.add_argument("--matmul", action="store_true",
                    help="the Student-t's quadratic form as x @ P @ x")
    args = ap.parse_args()
    MATMUL = args.matmul
    run(args.quick)
