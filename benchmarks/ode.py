"""ODE gradients: forward sensitivities vs the adjoint method vs finite differences.

The cost of one gradient of a loss of an ODE solution with respect to P parameters
(few output times), stanlite's ``ode_rk45`` (forward sensitivities: the state and
its N x K sensitivities integrated together), ``ode_adjoint`` (forward solve, then a
backward solve of the adjoint system whose right-hand side is one vector-Jacobian
product of f, whatever P) and forward finite differences (P + 1 plain solves), side
by side with JAX's ``jax.experimental.ode.odeint`` (Dormand-Prince, gradients by its
own adjoint method; jit-compiled, compilation excluded) and diffrax when installed.
All at rel_tol = abs_tol = 1e-6; the "err" columns are the largest relative
difference from the forward-sensitivity gradient. Times are CPU seconds of the
process (best of a few loops), so that other work on a shared machine does not
count.

Families:
  chain   N states, P = 2N parameters: a cascade with saturable transfer,
          y_1' = a_1 e^{-t} - b_1 y_1,  y_i' = a_i y_{i-1} / (1 + y_{i-1}) - b_i y_i,
          written on vectors (one slice and a few elementwise operations); the
          sensitivity system has N (1 + 3N) states.
  forced  N = 2 states, P parameters: two compartments driven by a forcing with
          P - 2 Fourier coefficients; the sensitivity system has only 2 (1 + P)
          states, whose right-hand side costs 2 reverse sweeps whatever P.

A second table measures one gradient of the posteriordb model one_comp_mm_elim_abs
(one state, three parameters, 20 output times, Michaelis-Menten elimination): the
case NUTS pays for at every leapfrog step. A third times the zoo's ODE models'
gradients (one_comp_mm_elim_abs, mm_multidose_ss) at distinct points, as a sampler
calls them.

Each stanlite time is given for the right-hand-side routes side by side, measured
alternately in one run: "compiled" (the default: f recorded once and run by the
compiled tape interpreter, functor/ode_compiled.py), "retaped" (f's Jacobian rows
replayed by sl.compile, the route before; ode_compiled.COMPILE_AFTER = None) and,
in the PK table, "tape" (f recorded and swept at every evaluation; RETAPE_AFTER =
None).

Run:  python benchmarks/ode.py [--quick]
"""

import argparse
import contextlib
import math
import sys
import time
import warnings

import blas_threads  # noqa: F401  (before numpy)
from _common import best_time, jax64, print_head, zoo_ode_points
import numpy as np

import stanlite as sl

TOL = 1e-6


def _fmt(t):
    if t is None:
        return "       -"
    if t < 1.0:
        return f"{t * 1e3:8.1f}"
    return f"{t * 1e3:8.0f}"


def _err(g, ref):
    if g is None:
        return "     -"
    return f"{np.max(np.abs(g - ref)) / max(np.max(np.abs(ref)), 1e-300):6.0e}"


# ------------------------------------------------------------------------------------
# problems: stanlite f, jax f, initial state, output times, weights, parameters
# ------------------------------------------------------------------------------------
def chain_problem(N, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.5, 1.5, N)
    b = rng.uniform(0.5, 1.5, N)
    ts = np.array([1.0, 2.0, 4.0])
    W = rng.standard_normal((len(ts), N))
    y0 = np.full(N, 0.5)

    def f(t, y, a, b):
        first = a[:1] * sl.exp(-t)
        if N == 1:
            return first - b * y
        rest = a[1:] * y[:-1] / (1.0 + y[:-1])
        return sl.concatenate([first, rest]) - b * y

    def unpack(p):
        return p[:N], p[N:]

    def f_jax(jnp):
        def g(y, t, a, b):
            first = a[:1] * jnp.exp(-t)
            rest = a[1:] * y[:-1] / (1.0 + y[:-1])
            return jnp.concatenate([first, rest]) - b * y
        return g
    return dict(f=f, f_jax=f_jax, y0=y0, ts=ts, W=W, p=np.concatenate([a, b]),
                unpack=unpack, N=N)


def forced_problem(P, seed=0):
    rng = np.random.default_rng(seed)
    M = P - 2
    w = np.linspace(0.5, 3.0, M)         # bounded frequencies: the step count stays put
    c = rng.standard_normal(M) * 0.3 / np.sqrt(max(M, 1))
    k = np.array([1.2, 0.5])
    ts = np.array([1.0, 2.0, 4.0])
    W = rng.standard_normal((len(ts), 2))
    y0 = np.array([1.0, 0.0])

    def f(t, y, k, c):
        drive = sl.sum(c * sl.sin(w * t)) if M else 0.0
        return sl.stack([-k[0] * y[0] + drive, k[0] * y[0] - k[1] * y[1]])

    def unpack(p):
        return p[:2], p[2:]

    def f_jax(jnp):
        def g(y, t, k, c):
            drive = jnp.sum(c * jnp.sin(w * t))
            return jnp.stack([-k[0] * y[0] + drive, k[0] * y[0] - k[1] * y[1]])
        return g
    return dict(f=f, f_jax=f_jax, y0=y0, ts=ts, W=W, p=np.concatenate([k, c]),
                unpack=unpack, N=2)


# ------------------------------------------------------------------------------------
# gradient methods
# ------------------------------------------------------------------------------------
def loss_of(pb, solve):
    f, y0, ts, W, unpack = pb["f"], pb["y0"], pb["ts"], pb["W"], pb["unpack"]

    def L(p):
        return sl.sum(solve(f, y0, 0.0, ts, *unpack(p)) * W)
    return L


def rk45(*a):
    return sl.ode_rk45(*a, rel_tol=TOL, abs_tol=TOL)


def adjoint(*a):
    return sl.ode_adjoint(*a, rel_tol_forward=TOL, abs_tol_forward=TOL,
                          rel_tol_backward=TOL, abs_tol_backward=TOL,
                          rel_tol_quadrature=TOL, abs_tol_quadrature=TOL)


def fd_gradient(L, p, h=1e-6):
    """Forward differences: P + 1 plain solves (relative step for the parameters)."""
    base = L(p)
    g = np.empty(p.size)
    for i in range(p.size):
        q = p.copy()
        d = h * max(1.0, abs(p[i]))
        q[i] += d
        g[i] = (L(q) - base) / d
    return g


def _jitted_gradient(pb, jx, solve):
    """The jitted jax gradient (numpy in and out) of sum(W * Y), ``Y = solve(g, y0,
    args)`` the solution at pb's times of its jax right-hand side ``g``; ``jx`` is
    ``(jax, jax.numpy)``."""
    jax, jnp = jx
    g = pb["f_jax"](jnp)
    W, y0, unpack = jnp.asarray(pb["W"]), jnp.asarray(pb["y0"]), pb["unpack"]

    def L(p):
        return jnp.sum(solve(g, y0, unpack(p)) * W)
    grad = jax.jit(jax.grad(L))
    return lambda p: np.asarray(grad(jnp.asarray(p)).block_until_ready())


def jax_gradient(pb):
    """A jitted gradient with jax.experimental.ode.odeint, or None if unavailable."""
    jx = jax64()
    try:
        from jax.experimental.ode import odeint
    except ImportError:
        return None
    jnp = jx[1]
    ts = jnp.concatenate([jnp.zeros(1), jnp.asarray(pb["ts"])])    # odeint starts at ts[0]
    return _jitted_gradient(
        pb, jx, lambda g, y0, args: odeint(g, y0, ts, *args, rtol=TOL, atol=TOL)[1:])


def diffrax_gradient(pb):
    """A jitted gradient with diffrax (Dopri5, its default adjoint), if installed."""
    jx = jax64()
    try:
        import diffrax
    except ImportError:
        return None
    ts = jx[1].asarray(pb["ts"])

    def solve(g, y0, args):
        term = diffrax.ODETerm(lambda t, y, args: g(y, t, *args))
        return diffrax.diffeqsolve(term, diffrax.Dopri5(), 0.0, float(ts[-1]), None, y0,
                                   args=args, saveat=diffrax.SaveAt(ts=ts),
                                   stepsize_controller=diffrax.PIDController(rtol=TOL,
                                                                            atol=TOL),
                                   max_steps=100000).ys
    return _jitted_gradient(pb, jx, solve)


def sweep_table(title, cases, budget):
    print(f"\n{title}")
    cols = "    N     P |  fwd sens   before   adjoint   before   fin.diff |  adj err " \
           "  fd err |      jax  jax err | diffrax  dfx err"
    print("CPU time per gradient, ms")
    print(cols)
    print("-" * len(cols))
    rows = []
    for pb in cases:
        p = pb["p"]
        L_fwd, L_adj = loss_of(pb, rk45), loss_of(pb, adjoint)
        L_plain = loss_of(pb, rk45)
        g_fwd = sl.grad(L_fwd)(p)
        g_adj = sl.grad(L_adj)(p)
        g_fd = fd_gradient(L_plain, p)
        t_fwd = _routes(lambda: sl.grad(L_fwd)(p), budget, ("compiled", "retaped"))
        t_adj = _routes(lambda: sl.grad(L_adj)(p), budget, ("compiled", "retaped"))
        t_fd = best_time(lambda: fd_gradient(L_plain, p), budget, repeats=2)
        jg = jax_gradient(pb)
        g_jax = t_jax = None
        if jg is not None:
            g_jax = jg(p)
            t_jax = best_time(lambda: jg(p), budget)
        dg = diffrax_gradient(pb)
        g_dfx = t_dfx = None
        if dg is not None:
            g_dfx = dg(p)
            t_dfx = best_time(lambda: dg(p), budget)
        row = (f"{pb['N']:5d} {p.size:5d} | {_fmt(t_fwd['compiled'])} "
               f"{_fmt(t_fwd['retaped'])}  {_fmt(t_adj['compiled'])} "
               f"{_fmt(t_adj['retaped'])}   {_fmt(t_fd)} | "
               f"{_err(g_adj, g_fwd)}   {_err(g_fd, g_fwd)} | {_fmt(t_jax)}   "
               f"{_err(g_jax, g_fwd)} | {_fmt(t_dfx)}   {_err(g_dfx, g_fwd)}")
        print(row, flush=True)
        rows.append(row)
    return rows


# ------------------------------------------------------------------------------------
# the PK model NUTS evaluates: one_comp_mm_elim_abs (posteriordb)
# ------------------------------------------------------------------------------------
PK_TIMES = np.arange(0.5, 10.01, 0.5)
PK_C = np.array([5.708, 7.101, 8.385, 9.790, 13.439, 11.448, 11.212, 11.427, 12.243,
                 13.820, 13.841, 11.422, 10.503, 11.912, 14.085, 10.551, 10.191, 12.223,
                 11.729, 12.272])


def one_comp_mm_elim_abs(t, y, theta, x_r):
    k_a, K_m, V_m = theta[0], theta[1], theta[2]
    D, V = x_r
    dose = 0.0
    if t > 0:
        dose = sl.exp(-k_a * t) * D * k_a / V
    elim = (V_m / V) * y[0] / (K_m + y[0])
    return sl.stack([dose - elim])


def pk_table(budget):
    x_r = (30.0, 2.0)
    theta = np.array([1.0, 2.0, 3.0])

    def lp(solve):
        def f(th):
            C = solve(one_comp_mm_elim_abs, np.array([0.0]), 0.0, PK_TIMES, th, x_r)
            return sl.lognormal_lpdf(PK_C, sl.log(C[:, 0]), 0.5)
        return f
    variants = [
        ("ode_bdf, Stan defaults (1e-10, 1e-10)", lambda *a: sl.ode_bdf(*a)),
        ("ode_bdf, 1e-6 (integrate_ode_bdf's defaults)",
         lambda *a: sl.ode_bdf(*a, rel_tol=1e-6, abs_tol=1e-6)),
        ("ode_rk45, 1e-6", lambda *a: sl.ode_rk45(*a, rel_tol=1e-6, abs_tol=1e-6)),
        ("ode_adjoint, rk45, 1e-6", adjoint),
        ("ode_adjoint, bdf, 1e-6",
         lambda *a: sl.ode_adjoint(*a, solver_forward="bdf")),
    ]
    print("\none_comp_mm_elim_abs: one log density and one gradient (20 output times, "
          "1 state, 3 parameters)")
    print("CPU ms per log density ('value', compiled f) and per gradient by route: "
          "'compiled' (the default), 'retaped' (before), 'tape'")
    head = (f"{'method':46s} {'value':>7s} {'compiled':>9s} {'retaped':>8s} "
            f"{'tape':>8s} {'before/after':>12s}")
    print_head(head)
    rows = []
    for name, solve in variants:
        f = lp(solve)
        vg = sl.value_and_grad(f)
        tv = best_time(lambda: f(theta), budget)
        t = _routes(lambda: vg(theta), budget)
        row = (f"{name:46s} {tv * 1e3:7.2f} {t['compiled'] * 1e3:9.2f} "
               f"{t['retaped'] * 1e3:8.2f} {t['tape'] * 1e3:8.2f} "
               f"{t['retaped'] / t['compiled']:12.1f}")
        print(row, flush=True)
        rows.append(row)
    return rows


@contextlib.contextmanager
def _route(name):
    """Evaluate ODE right-hand sides by one route: "compiled" (the default),
    "retaped" (the route before the compiled one) or "tape" (no retaping)."""
    from stanlite.functor import ode_compiled, ode_rhs
    from stanlite.pk import ode_plan
    saved = ode_rhs.RETAPE_AFTER, ode_compiled.COMPILE_AFTER
    try:
        if name == "walk":
            ode_plan.ENABLED = False        # pk.ode's general event walk
        elif name != "compiled":
            ode_compiled.COMPILE_AFTER = None
        if name == "tape":
            ode_rhs.RETAPE_AFTER = None
        with warnings.catch_warnings():
            # the retaped route's replays agree with the tape only to rounding now
            # (sl.compile lowers them to the interpreter): a model may warn and fall back
            warnings.simplefilter("ignore", sl.CompileWarning)
            yield
    finally:
        ode_rhs.RETAPE_AFTER, ode_compiled.COMPILE_AFTER = saved
        ode_plan.ENABLED = True


def _routes(fn, budget, names=("compiled", "retaped", "tape")):
    """Best time of ``fn`` by each route, measured alternately (so that the load of a
    shared machine hits all alike)."""
    best = {n: math.inf for n in names}
    for _ in range(3):
        for n in names:
            with _route(n):
                best[n] = min(best[n], best_time(fn, budget / 3, repeats=1))
    return best


# ------------------------------------------------------------------------------------
# the zoo's ODE models: one gradient at distinct points, as a sampler asks for it
# ------------------------------------------------------------------------------------
def zoo_table(quick):
    import stanlite.models as zoo
    n = 12 if quick else 40
    print("\nzoo ODE models: CPU ms per log-density gradient at distinct points near a "
          "typical point (a fresh model per route; best of 3 passes, routes alternated); "
          "'walk' is pk.ode's general event walk (pk/ode_plan.py off), 'retaped' the "
          "right-hand side's route before the compiled one")
    head = (f"{'model':22s} {'compiled':>9s} {'walk':>9s} {'retaped':>9s} "
            f"{'walk/compiled':>13s} {'retaped/compiled':>16s}")
    print_head(head)
    rows = []
    for name, xs in zoo_ode_points(n, n):
        best = {"compiled": math.inf, "walk": math.inf, "retaped": math.inf}
        # warm-up as in a sampler's first iterations: the right-hand side's generated
        # code replaces the interpreter after ode_codegen.AFTER evaluations
        m = zoo.get(name)
        for x in xs * (1 if quick else 4):
            m.log_density_gradient(x)
        # (it compiles in another process while the interpreter goes on: wait for it,
        # so that a first run on an empty numba cache times the generated code too)
        from stanlite.functor import ode_codegen
        ode_codegen.wait()
        m.log_density_gradient(xs[0])
        for _ in range(3):
            for route in best:
                with _route(route):
                    m = zoo.get(name)
                    m.log_density_gradient(xs[0])      # recordings, caches
                    t0 = time.process_time()
                    for x in xs[1:]:
                        m.log_density_gradient(x)
                    best[route] = min(best[route],
                                      (time.process_time() - t0) / (len(xs) - 1))
        b = {k: v * 1e3 for k, v in best.items()}
        row = (f"{name:22s} {b['compiled']:9.2f} {b['walk']:9.2f} {b['retaped']:9.2f} "
               f"{b['walk'] / b['compiled']:13.2f} {b['retaped'] / b['compiled']:16.1f}")
        print(row, flush=True)
        rows.append(row)
    return rows


def main(quick=False):
    budget = 0.3 if quick else 1.0
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}")
    pk_table(budget)
    zoo_table(quick)
    chains = [1, 2, 5, 10] if quick else [1, 2, 5, 10, 25, 50, 100]
    sweep_table("chain: N states, P = 2N parameters",
                [chain_problem(N) for N in chains], budget)
    forced = [2, 10, 50] if quick else [2, 5, 10, 20, 50, 100, 200]
    sweep_table("forced: 2 states, P parameters", [forced_problem(P) for P in forced],
                budget)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer sizes, shorter loops")
    main(ap.parse_args().quick)
