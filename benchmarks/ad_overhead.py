"""Value+gradient time of stanlite's eager tape, side by side with the floor and peers.

Columns (one process, same inputs): the hand-written numpy gradient (the floor),
stanlite, HIPS autograd, JAX ``value_and_grad`` without and with ``jax.jit`` (float64),
when installed. Every time is the best of several repeats of a timed loop (the
machines are shared and noisy; the minimum is the least disturbed measurement), and
every gradient is checked against the hand-written one before timing.

Cases:
  logistic regression     lp = sum(y * eta - log1p_exp(eta)) - |beta|^2 / 2, eta = X beta
  hierarchical normal     non-centred: theta = mu + exp(log_tau) theta_tilde
  scalar loop             200 iterations of s += a*b; a = sin(a)*0.5 + b  (1000 nodes)

Run:  python benchmarks/ad_overhead.py [--quick]
"""

import argparse
import math
import sys
import time

import numpy as np

import stanlite as sl


# ------------------------------------------------------------------------------------
# timing
# ------------------------------------------------------------------------------------
def best_time(fn, arg, budget=0.4, repeats=5):
    """Best per-call seconds over ``repeats`` timed loops of ~budget/repeats each."""
    fn(arg)
    t0 = time.perf_counter()
    fn(arg)
    one = max(time.perf_counter() - t0, 1e-7)
    n = max(1, int(budget / repeats / one))
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn(arg)
        best = min(best, (time.perf_counter() - t0) / n)
    return best


# ------------------------------------------------------------------------------------
# cases: each returns (x0, stanlite_f, numpy_value_and_grad, autograd_f, jax_f, n_ops)
# ------------------------------------------------------------------------------------
def logistic_case(N, D, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, D)) / np.sqrt(D)
    beta_true = rng.standard_normal(D)
    y = (rng.random(N) < 1 / (1 + np.exp(-X @ beta_true))).astype(float)
    x0 = rng.standard_normal(D) * 0.1

    def f_sl(b):
        eta = X @ b
        return sl.sum(y * eta - sl.log1p_exp(eta)) - 0.5 * sl.sum(b * b)

    def vg_np(b):
        eta = X @ b
        lp = float(np.sum(y * eta - np.logaddexp(0.0, eta)) - 0.5 * b @ b)
        p = 0.5 * (1.0 + np.tanh(0.5 * eta))  # inv_logit, overflow-free
        return lp, X.T @ (y - p) - b

    def f_ag(anp):
        def f(b):
            eta = anp.dot(X, b)
            return anp.sum(y * eta - anp.logaddexp(0.0, eta)) - 0.5 * anp.sum(b * b)
        return f

    def f_jax(jnp):
        Xj, yj = jnp.asarray(X), jnp.asarray(y)

        def f(b):
            eta = Xj @ b
            return jnp.sum(yj * eta - jnp.logaddexp(0.0, eta)) - 0.5 * jnp.sum(b * b)
        return f

    return x0, f_sl, vg_np, f_ag, f_jax


def hierarchical_case(J, seed=0):
    rng = np.random.default_rng(seed)
    sigma = rng.uniform(5, 20, J)
    y = rng.normal(5, 10, J) + rng.normal(0, sigma)
    x0 = rng.standard_normal(J + 2) * 0.5

    def f_sl(x):
        mu, log_tau, tt = x[0], x[1], x[2:]
        theta = mu + sl.exp(log_tau) * tt
        r = (y - theta) / sigma
        return (-mu * mu / 50.0 - 0.5 * log_tau * log_tau
                - 0.5 * sl.sum(tt * tt) - 0.5 * sl.sum(r * r))

    def vg_np(x):
        mu, log_tau, tt = x[0], x[1], x[2:]
        tau = math.exp(log_tau)
        theta = mu + tau * tt
        r = (y - theta) / sigma
        lp = -mu * mu / 50.0 - 0.5 * log_tau ** 2 - 0.5 * tt @ tt - 0.5 * r @ r
        rs = r / sigma                      # d lp / d theta
        g = np.empty_like(x)
        g[0] = -mu / 25.0 + rs.sum()
        g[1] = -log_tau + tau * (rs @ tt)
        g[2:] = -tt + tau * rs
        return lp, g

    def f_ag(anp):
        def f(x):
            mu, log_tau, tt = x[0], x[1], x[2:]
            theta = mu + anp.exp(log_tau) * tt
            r = (y - theta) / sigma
            return (-mu * mu / 50.0 - 0.5 * log_tau * log_tau
                    - 0.5 * anp.sum(tt * tt) - 0.5 * anp.sum(r * r))
        return f

    def f_jax(jnp):
        yj, sj = jnp.asarray(y), jnp.asarray(sigma)

        def f(x):
            mu, log_tau, tt = x[0], x[1], x[2:]
            theta = mu + jnp.exp(log_tau) * tt
            r = (yj - theta) / sj
            return (-mu * mu / 50.0 - 0.5 * log_tau * log_tau
                    - 0.5 * jnp.sum(tt * tt) - 0.5 * jnp.sum(r * r))
        return f

    return x0, f_sl, vg_np, f_ag, f_jax


LOOP = 200  # 5 operations per iteration: 1000 nodes


def scalar_loop_case():
    x0 = np.array([0.3, 0.7])

    def f_sl(x):
        a, b = x[0], x[1]
        s = 0.0
        for _ in range(LOOP):
            s = s + a * b
            a = sl.sin(a) * 0.5 + b
        return s

    def vg_np(x):
        # the hand-written adjoint of the same loop, on Python floats
        a, b = float(x[0]), float(x[1])
        as_ = []
        s = 0.0
        for _ in range(LOOP):
            as_.append(a)
            s += a * b
            a = math.sin(a) * 0.5 + b
        ga, gb = 0.0, 0.0          # adjoint of the final a is 0 (unused)
        for i in range(LOOP - 1, -1, -1):
            ai = as_[i]
            # a_{i+1} = sin(a_i)/2 + b ; s += a_i * b
            gb += ga + ai
            ga = ga * 0.5 * math.cos(ai) + b
        return s, np.array([ga, gb])

    def f_ag(anp):
        def f(x):
            a, b = x[0], x[1]
            s = 0.0
            for _ in range(LOOP):
                s = s + a * b
                a = anp.sin(a) * 0.5 + b
            return s
        return f

    def f_jax(jnp):
        def f(x):
            a, b = x[0], x[1]
            s = 0.0
            for _ in range(LOOP):
                s = s + a * b
                a = jnp.sin(a) * 0.5 + b
            return s
        return f

    return x0, f_sl, vg_np, f_ag, f_jax


CASES = [
    ("logistic N=100 D=5", lambda: logistic_case(100, 5)),
    ("logistic N=100000 D=50", lambda: logistic_case(100000, 50)),
    ("hierarchical J=8", lambda: hierarchical_case(8)),
    ("hierarchical J=10000", lambda: hierarchical_case(10000)),
    ("scalar loop 1000 ops", scalar_loop_case),
]


def peers():
    out = {}
    try:
        import autograd
        import autograd.numpy as anp
        out["autograd"] = (autograd, anp)
    except ImportError:
        pass
    try:
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        out["jax"] = (jax, jnp)
    except ImportError:
        pass
    return out


def run(quick=False):
    budget = 0.15 if quick else 0.5
    ps = peers()
    cols = ["numpy (floor)", "stanlite"]
    if "autograd" in ps:
        cols.append("autograd")
    if "jax" in ps:
        cols += ["jax", "jax.jit"]
    rows = []
    for name, make in CASES:
        x0, f_sl, vg_np, f_ag, f_jax = make()
        ref_v, ref_g = vg_np(x0)
        fns = {"numpy (floor)": vg_np, "stanlite": sl.value_and_grad(f_sl)}
        if "autograd" in ps:
            ag, anp = ps["autograd"]
            fns["autograd"] = ag.value_and_grad(f_ag(anp))
        if "jax" in ps:
            jax, jnp = ps["jax"]
            vg = jax.value_and_grad(f_jax(jnp))
            vgj = jax.jit(vg)

            def block(fn):
                def call(x):
                    v, g = fn(x)
                    g.block_until_ready()
                    return v, g
                return call
            fns["jax"] = block(vg)
            fns["jax.jit"] = block(vgj)
        times = {}
        for col in cols:
            fn = fns[col]
            arg = x0
            if col.startswith("jax"):
                arg = ps["jax"][1].asarray(x0)
            v, g = fn(arg)
            if not np.allclose(np.asarray(g), ref_g, rtol=1e-8, atol=1e-10) or \
                    not np.isclose(float(v), ref_v, rtol=1e-10):
                print(f"  !! {col} disagrees with the hand-written gradient on {name}",
                      file=sys.stderr)
            b = budget
            if col == "jax" and name.startswith("scalar"):
                b = budget / 4   # un-jitted JAX on a scalar loop is very slow
            times[col] = best_time(fn, arg, budget=b)
        rows.append((name, times))
    # table
    w = 24
    head = f"{'case':<{w}}" + "".join(f"{c:>22}" for c in cols)
    print("value + gradient, best time per call; (ratio to the hand-written numpy gradient)")
    print(head)
    print("-" * len(head))
    for name, times in rows:
        floor = times["numpy (floor)"]
        cells = []
        for c in cols:
            t = times[c]
            cells.append(f"{_fmt(t)} ({t / floor:5.2f}x)")
        print(f"{name:<{w}}" + "".join(f"{c:>22}" for c in cells))
    loop = dict(rows)["scalar loop 1000 ops"]["stanlite"]
    print(f"\nstanlite per node (record + sweep), scalar loop: {loop / (5 * LOOP) * 1e6:.3f} us")
    return rows


def _fmt(t):
    if t < 1e-3:
        return f"{t * 1e6:8.1f} us"
    return f"{t * 1e3:8.2f} ms"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="shorter timing loops")
    run(ap.parse_args().quick)
