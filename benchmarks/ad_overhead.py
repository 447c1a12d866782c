"""Value+gradient time of stanlite's eager tape and its retaped (compiled) replay, side by
side with the floor and peers.

Columns (one process, same inputs): the hand-written numpy gradient (the floor),
stanlite's eager tape (``sl.value_and_grad``), the same tape retaped (``sl.compile``: the
recording replayed as generated code), HIPS autograd, JAX ``value_and_grad`` without and
with ``jax.jit`` (float64), when installed. Timing: process time (one BLAS thread unless
the environment says otherwise), each column a timed loop sized from one call, the
**median** of several repeats, the repeats of a case's columns interleaved so that a
noisy period hits them alike. Every gradient is checked against the hand-written one
before timing. Compilation times (sl.compile's recording and code generation, jax.jit's
first call) are reported below the table, not in it.

Cases:
  logistic regression     lp = sum(y * eta - log1p_exp(eta)) - |beta|^2 / 2, eta = X beta
  hierarchical normal     non-centred: theta = mu + exp(log_tau) theta_tilde
  scalar loop             200 iterations of s += a*b; a = sin(a)*0.5 + b  (1000 nodes)
  matrix exp 2x2          the closed-form exponential of a 2x2 matrix written entry by
                          entry in scalar operations (the AD review's Table 7 example),
                          a weighted sum of its entries

A second table: every zoo model's log-density gradient and log density on the eager
tape and retaped (what ``Model`` does by default), and the one-time recording cost.

Run:  python benchmarks/ad_overhead.py [--quick] [--no-models]
"""

import math
import sys
import time

import blas_threads  # noqa: F401  (one BLAS thread; before numpy)
import _common  # noqa: E402
# peers: also imported from here by hessian.py and distributions.py
from _common import fmt_time, peer_columns, peers, print_head  # noqa: E402,F401

import numpy as np  # noqa: E402

try:
    import stanlite as sl
except ImportError:                 # run from a checkout without installing
    import pathlib
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    import stanlite as sl


# ------------------------------------------------------------------------------------
# timing
# ------------------------------------------------------------------------------------
def best_time(fn, arg, budget=0.4, repeats=5):
    """Best per-call seconds of ``fn(arg)`` over ``repeats`` timed loops of
    ~budget/repeats each (wall time: perf_counter)."""
    return _common.best_time(fn, budget, repeats, arg=arg, clock=time.perf_counter,
                             floor=1e-7)


def median_times(fns, args, budget=0.5, repeats=7):
    """Median per-call process time of each ``fns[k](args[k])``, repeats interleaved
    (each loop sized from 5 calls)."""
    return _common.median_times(fns, args.__getitem__, budget, repeats, calls=5,
                                floor=1e-7)


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

    def density_in(xnp, yv, sv):    # in stanlite, autograd.numpy or jax.numpy
        def f(x):
            mu, log_tau, tt = x[0], x[1], x[2:]
            theta = mu + xnp.exp(log_tau) * tt
            r = (yv - theta) / sv
            return (-mu * mu / 50.0 - 0.5 * log_tau * log_tau
                    - 0.5 * xnp.sum(tt * tt) - 0.5 * xnp.sum(r * r))
        return f

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

    def f_peer(xnp):
        # the data as the peer's arrays (autograd.numpy.asarray leaves numpy's as they are)
        return density_in(xnp, xnp.asarray(y), xnp.asarray(sigma))

    return x0, density_in(sl, y, sigma), vg_np, f_peer, f_peer


LOOP = 200  # 5 operations per iteration: 1000 nodes


def scalar_loop_case():
    x0 = np.array([0.3, 0.7])

    def loop_in(xnp):               # the loop, in stanlite, autograd.numpy or jax.numpy
        def f(x):
            a, b = x[0], x[1]
            s = 0.0
            for _ in range(LOOP):
                s = s + a * b
                a = xnp.sin(a) * 0.5 + b
            return s
        return f

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

    return x0, loop_in(sl), vg_np, loop_in, loop_in


def matrix_exp_case(seed=0):
    # exp(A), A = [[a, b], [c, d]] with real eigenvalues (4bc > -(a-d)^2), in closed form:
    # e^{(a+d)/2} / D [[D ch + (a-d) sh, 2b sh], [2c sh, D ch - (a-d) sh]],
    # D = sqrt((a-d)^2 + 4bc), ch = cosh(D/2), sh = sinh(D/2)
    rng = np.random.default_rng(seed)
    x0 = np.array([0.3, 0.8, 0.5, -0.4]) + 0.1 * rng.standard_normal(4)
    w = rng.uniform(0.5, 1.5, 4)
    w0, w1, w2, w3 = (float(v) for v in w)

    def entries_in(xnp):            # in stanlite, autograd.numpy or jax.numpy
        def f(x):
            a, b, c, d = x[0], x[1], x[2], x[3]
            amd = a - d
            delta = xnp.sqrt(amd * amd + 4.0 * b * c)
            ch, sh = xnp.cosh(0.5 * delta), xnp.sinh(0.5 * delta)
            s = xnp.exp(0.5 * (a + d)) / delta
            e11 = s * (delta * ch + amd * sh)
            e12 = s * 2.0 * b * sh
            e21 = s * 2.0 * c * sh
            e22 = s * (delta * ch - amd * sh)
            return w0 * e11 + w1 * e12 + w2 * e21 + w3 * e22
        return f

    def vg_np(x):
        # forward and the hand-written adjoint, on Python floats
        a, b, c, d = (float(v) for v in x)
        amd = a - d
        q = amd * amd + 4.0 * b * c
        delta = math.sqrt(q)
        ch, sh = math.cosh(0.5 * delta), math.sinh(0.5 * delta)
        m = math.exp(0.5 * (a + d))
        s = m / delta
        t1, t2 = delta * ch + amd * sh, delta * ch - amd * sh
        lp = s * (w0 * t1 + 2.0 * sh * (w1 * b + w2 * c) + w3 * t2)
        gs = w0 * t1 + 2.0 * sh * (w1 * b + w2 * c) + w3 * t2
        gt1, gt2 = w0 * s, w3 * s
        gb = 2.0 * s * sh * w1
        gc = 2.0 * s * sh * w2
        gsh = 2.0 * s * (w1 * b + w2 * c) + (gt1 - gt2) * amd
        gch = (gt1 + gt2) * delta
        gdelta = (gt1 + gt2) * ch - gs * s / delta + 0.5 * (gch * sh + gsh * ch)
        gamd = (gt1 - gt2) * sh
        gm = gs / delta
        gsum = 0.5 * gm * m
        gq = gdelta / (2.0 * delta)
        gamd += 2.0 * amd * gq
        gb += 4.0 * c * gq
        gc += 4.0 * b * gq
        return lp, np.array([gsum + gamd, gb, gc, gsum - gamd])

    return x0, entries_in(sl), vg_np, entries_in, entries_in


CASES = [
    ("logistic N=100 D=5", lambda: logistic_case(100, 5)),
    ("logistic N=100000 D=50", lambda: logistic_case(100000, 50)),
    ("hierarchical J=8", lambda: hierarchical_case(8)),
    ("hierarchical J=10000", lambda: hierarchical_case(10000)),
    ("scalar loop 1000 ops", scalar_loop_case),
    ("matrix exp 2x2", matrix_exp_case),
]


def run(quick=False):
    budget, repeats = _common.loop_budget(quick, 0.5, 7)
    ps = peers()
    cols = peer_columns(ps, ["numpy (floor)", "stanlite", "compiled"])
    rows = []
    compile_times = []
    for name, make in CASES:
        x0, f_sl, vg_np, f_ag, f_jax = make()
        ref_v, ref_g = vg_np(x0)
        t0 = time.process_time()
        compiled = sl.compile(f_sl, x0)
        t_compile = time.process_time() - t0
        # a replay at another point first: the retaped code's one-time check against
        # the eager tape is not part of the timed calls
        compiled(x0 * 1.01)
        fns = {"numpy (floor)": vg_np, "stanlite": sl.value_and_grad(f_sl),
               "compiled": compiled,
               **_common.peer_functions(ps, lambda lib: lib.value_and_grad, f_ag, f_jax)}
        args = {c: x0 for c in cols}
        t_jit = None
        if "jax" in ps:
            args["jax"] = args["jax.jit"] = ps["jax"][1].asarray(x0)
            t0 = time.process_time()
            fns["jax.jit"](args["jax.jit"])
            t_jit = time.process_time() - t0
        for col in cols:
            v, g = fns[col](args[col])
            if not np.allclose(np.asarray(g), ref_g, rtol=1e-8, atol=1e-10) or \
                    not np.isclose(float(v), ref_v, rtol=1e-10):
                print(f"  !! {col} disagrees with the hand-written gradient on {name}",
                      file=sys.stderr)
        timed = dict(fns)
        if "jax" in timed and (name.startswith("scalar") or name.startswith("matrix")):
            del timed["jax"]   # un-jitted JAX on scalar code: seconds per call
        times = median_times(timed, args, budget=budget, repeats=repeats)
        if "jax" in fns and "jax" not in times:
            times["jax"] = best_time(fns["jax"], args["jax"], budget=budget / 4, repeats=2)
        rows.append((name, times))
        compile_times.append((name, t_compile, compiled.source.count("\n"), t_jit))
    # table
    w = 24
    head = f"{'case':<{w}}" + "".join(f"{c:>22}" for c in cols)
    print("value + gradient, median process time per call; (ratio to the hand-written "
          "numpy gradient)")
    print_head(head)
    for name, times in rows:
        floor = times["numpy (floor)"]
        cells = []
        for c in cols:
            t = times[c]
            cells.append(f"{fmt_time(t)} ({t / floor:5.2f}x)")
        print(f"{name:<{w}}" + "".join(f"{c:>22}" for c in cells))
    loop = dict(rows)["scalar loop 1000 ops"]
    print(f"\nper node (record + sweep), scalar loop: eager "
          f"{loop['stanlite'] / (5 * LOOP) * 1e6:.3f} us, compiled "
          f"{loop['compiled'] / (5 * LOOP) * 1e6:.3f} us")
    print("compilation (process time): " + "; ".join(
        f"{n}: sl.compile {tc * 1e3:.1f} ms ({lines} lines)"
        + (f", jax.jit {tj:.2f} s" if tj is not None else "")
        for n, tc, lines, tj in compile_times))
    return rows


def zoo_table(quick=False):
    """The zoo models' log density and gradient: eager tape vs retaped (the default of
    ``Model``), per call, at a fixed random point of the unconstrained space."""
    import stanlite.models as zoo
    budget = 0.15 if quick else 0.4
    repeats = 5 if quick else 7
    print("\nzoo models (stanlite.models): median process time per call, eager tape vs "
          "retaped (Model's default)")
    head = (f"{'model':<28}{'dim':>4}{'grad eager':>12}{'retaped':>10}{'speed-up':>10}"
            f"{'density eager':>15}{'retaped':>10}{'speed-up':>10}{'record ms':>11}")
    print_head(head)
    out = []
    for name in zoo.names():
        m = zoo.get(name)
        x = np.random.default_rng(7).uniform(-1.0, 1.0, m.dim)
        t0 = time.process_time()
        m.log_density_gradient(x)                   # records and compiles
        t_rec = time.process_time() - t0
        m.log_density_gradient(x * 0.9)             # the one-time check against the tape
        m.log_density(x)
        m.log_density(x * 0.9)
        fns = {"ge": lambda z: m._gradient(z, True), "gc": m.log_density_gradient,
               "de": lambda z: m._log_density(z, True), "dc": m.log_density}
        t = median_times(fns, {k: x for k in fns}, budget=budget, repeats=repeats)
        out.append((name, t))
        # "eager": the model opts out (compile = False) or that program fell back
        rt = m.__dict__.get("_retaped", {})
        eager_g = not m.compile or rt[True].fallback is not None
        eager_d = not m.compile or rt[("density", True)].fallback is not None
        sg = "   eager*" if eager_g else f"{t['ge'] / t['gc']:>8.1f}x"
        sd = "   eager*" if eager_d else f"{t['de'] / t['dc']:>8.1f}x"
        print(f"{name:<28}{m.dim:>4}{fmt_time(t['ge']):>12}{fmt_time(t['gc']):>10} {sg}"
              f"{fmt_time(t['de']):>15}{fmt_time(t['dc']):>10} {sd}"
              f"{t_rec * 1e3 if m.compile else float('nan'):>11.1f}")
    print("eager*: the model keeps the eager tape (compile = False), or that program "
          "does (see the README)")
    return out


if __name__ == "__main__":
    ap = _common.arg_parser(__doc__)
    ap.add_argument("--no-models", action="store_true", help="skip the zoo-model table")
    a = ap.parse_args()
    run(a.quick)
    if not a.no_models:
        zoo_table(a.quick)
