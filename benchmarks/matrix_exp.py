"""The AD review's Table 7: a 2 x 2 matrix exponential written elementwise, "standard"
vs "optimized" (fewer nodes), plus stanlite's ``matrix_exp`` super node.

The review (Margossian 2019, "Reducing the number of operations in a function" and
the appendix) differentiates the closed form of expm for a 2 x 2 matrix
A = [[a, b], [c, d]], with delta = sqrt((a - d)^2 + 4 b c) (real when b c > 0),

    expm(A) = e^{(a+d)/2} / delta * [[delta cosh(delta/2) + (a - d) sinh(delta/2),  2 b sinh(delta/2)],
                                     [2 c sinh(delta/2),  delta cosh(delta/2) + (d - a) sinh(delta/2)]],

once as a direct translation ("standard": every repeated subexpression recomputed)
and once with intermediate variables ("optimized"), over 1000 random matrices with
entries uniform(1, 10), computing all 16 partial derivatives of each. Its Table 7:
41 vs 25 nodes, relative run time 1.0 vs 0.68 (Stan Math, C++).

Columns here, for the 1000 matrices: nodes on the tape for one matrix, run time
(mean and sd over repeats) and time relative to "standard":

  standard / optimized     the review's two codes, scalar stanlite ops, one matrix at
                           a time (one recording + 4 reverse sweeps per matrix)
  super node               ``sl.matrix_exp`` (Pade + Frechet-derivative adjoint), one
                           matrix at a time
  standard, vectorized     the standard code on arrays: a, b, c, d are 1000-vectors,
                           so the whole batch is one tape of the same 41-ish nodes
  super node, stack        ``sl.matrix_exp`` on the (1000, 2, 2) stack
  jax (jit+vmap), when installed: ``jacrev`` of the standard code, vmapped and jitted

Every method's Jacobians are checked against the super node's before timing.

Run:  python benchmarks/matrix_exp.py [--repeats 100] [--quick]
"""

import argparse
import statistics
import time

import blas_threads  # noqa: F401  (before numpy)
import numpy as np

import stanlite as sl


# --------------------------------------------------------------------------------------
# the review's two codes (A given as the 4-vector (a, b, c, d), row-major)
# --------------------------------------------------------------------------------------
def expm2_standard(A, np_=sl):
    """Direct translation of the closed form: repeated subexpressions recomputed."""
    a, b, c, d = A[0], A[1], A[2], A[3]
    delta = np_.sqrt(np_.square(a - d) + 4 * b * c)
    B00 = np_.exp(0.5 * (a + d)) * (delta * np_.cosh(0.5 * delta)
                                    + (a - d) * np_.sinh(0.5 * delta))
    B01 = 2 * b * np_.exp(0.5 * (a + d)) * np_.sinh(0.5 * delta)
    B10 = 2 * c * np_.exp(0.5 * (a + d)) * np_.sinh(0.5 * delta)
    B11 = np_.exp(0.5 * (a + d)) * (delta * np_.cosh(0.5 * delta)
                                    + (d - a) * np_.sinh(0.5 * delta))
    return np_.stack([B00 / delta, B01 / delta, B10 / delta, B11 / delta])


def expm2_optimized(A, np_=sl):
    """The same expression with intermediate variables (the review's optimized code)."""
    a, b, c, d = A[0], A[1], A[2], A[3]
    delta = np_.sqrt(np_.square(a - d) + 4 * b * c)
    half_delta = 0.5 * delta
    cosh_half_delta = np_.cosh(half_delta)
    sinh_half_delta = np_.sinh(half_delta)
    exp_half_a_plus_d = np_.exp(0.5 * (a + d))
    two_exp_sinh = 2 * exp_half_a_plus_d * sinh_half_delta
    delta_cosh = delta * cosh_half_delta
    ad_sinh_half_delta = (a - d) * sinh_half_delta
    B00 = exp_half_a_plus_d * (delta_cosh + ad_sinh_half_delta)
    B01 = b * two_exp_sinh
    B10 = c * two_exp_sinh
    B11 = exp_half_a_plus_d * (delta_cosh - ad_sinh_half_delta)
    return np_.stack([B00 / delta, B01 / delta, B10 / delta, B11 / delta])


def expm2_super_node(A):
    return sl.reshape(sl.matrix_exp(sl.reshape(A, (2, 2))), (4,))


def count_nodes(f, x):
    """Nodes recorded on a fresh tape by one evaluation of ``f`` at ``x``."""
    with sl.nested() as tape:
        f(sl.Var(x))
        return len(tape.nodes)


# --------------------------------------------------------------------------------------
# the batch computations (each returns the (1000, 4, 4) Jacobians)
# --------------------------------------------------------------------------------------
def per_matrix(f):
    jac = sl.jacobian_reverse(f)

    def run(As):
        return np.stack([jac(A) for A in As])
    return run


def vectorized_standard(As):
    """One tape for the whole batch: a, b, c, d are vectors; 4 sweeps, one per output
    entry, give the 16 partials of every matrix (each matrix only sees its own)."""
    n = len(As)
    with sl.nested():
        cols = [sl.Var(As[:, j].copy()) for j in range(4)]
        out = expm2_standard(cols)                      # (4, n)
        J = np.empty((n, 4, 4))
        for i in range(4):
            for v in cols:
                v.adj = None
            seed = np.zeros((4, n))
            seed[i] = 1.0
            sl.current_tape().zero_adjoints()
            out.backward(seed=seed, retain=True)
            for j, v in enumerate(cols):
                J[:, i, j] = v.adj
    return J


def stack_super_node(As):
    n = len(As)
    M = As.reshape(n, 2, 2)
    J = np.empty((n, 4, 4))
    with sl.nested():
        X = sl.Var(M)
        E = sl.matrix_exp(X)
        for i in range(4):
            seed = np.zeros((n, 2, 2))
            seed[:, i // 2, i % 2] = 1.0
            sl.current_tape().zero_adjoints()
            X.adj = None
            E.backward(seed=seed, retain=True)
            J[:, i, :] = X.adj.reshape(n, 4)
    return J


def jax_runner():
    try:
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
    except ImportError:
        return None
    jac = jax.jit(jax.vmap(jax.jacrev(lambda A: expm2_standard(A, jnp))))

    def run(As):
        return np.asarray(jac(jnp.asarray(As)).block_until_ready())
    return run


# --------------------------------------------------------------------------------------
def timed(run, As, repeats):
    run(As)                                     # warm-up (and JAX compilation)
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run(As)
        ts.append(time.perf_counter() - t0)
    return ts


def main(repeats=10, n_matrices=1000, seed=1):
    rng = np.random.default_rng(seed)
    As = rng.uniform(1.0, 10.0, size=(n_matrices, 4))   # the review's uniform(1, 10)
    methods = [
        ("standard", per_matrix(expm2_standard), count_nodes(expm2_standard, As[0])),
        ("optimized", per_matrix(expm2_optimized), count_nodes(expm2_optimized, As[0])),
        ("super node", per_matrix(expm2_super_node), count_nodes(expm2_super_node, As[0])),
        ("standard, vectorized", vectorized_standard,
         count_nodes(expm2_standard, As[0])),
        ("super node, stack", stack_super_node, 1),
    ]
    jr = jax_runner()
    if jr is None:
        print("(jax not installed: its column is skipped)")
    else:
        methods.append(("jax jit(vmap(jacrev))", jr, None))

    # every method's 16 partials against the super node's, matrix by matrix
    ref = per_matrix(expm2_super_node)(As[:50])
    for name, run, _ in methods:
        J = run(As)[:50]
        err = np.max(np.abs(J - ref) / (1e-300 + np.abs(ref).max(axis=(1, 2))[:, None, None]))
        assert err < 1e-9, (name, err)

    print(f"2 x 2 matrix exponential, {n_matrices} matrices with entries uniform(1, 10), "
          f"all 16 partials each; {repeats} repeats\n")
    print(f"{'implementation':<24}{'nodes':>7}{'run time (ms)':>22}{'relative':>10}")
    print("-" * 63)
    base = None
    rows = []
    for name, run, nodes in methods:
        ts = timed(run, As, repeats)
        mean = statistics.fmean(ts) * 1e3
        sd = statistics.stdev(ts) * 1e3 if len(ts) > 1 else 0.0
        base = base or mean
        rows.append((name, nodes, mean, sd))
        nd = "-" if nodes is None else str(nodes)
        print(f"{name:<24}{nd:>7}{mean:>13.2f} +- {sd:<6.2f}{mean / base:>9.3g}")
    print("\nnodes: recorded for one matrix (the review: standard 41, optimized 25; the "
          "super node records 1 node plus the two reshapes of this 4-vector interface)")
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=10,
                    help="timed repetitions of the 1000-matrix batch (the review: 100)")
    ap.add_argument("--quick", action="store_true", help="3 repeats of 200 matrices")
    a = ap.parse_args()
    if a.quick:
        main(repeats=3, n_matrices=200)
    else:
        main(repeats=a.repeats)
