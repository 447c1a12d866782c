"""Cost of the pharmacometric zoo models built on ``sl.pk``: time per log-density
gradient, and (``--nuts``) a NUTS fit of ``theophylline`` with Stan's defaults.

    python benchmarks/pk_models.py            # gradients only (~1 min)
    python benchmarks/pk_models.py --nuts     # + 4 chains x (1000 + 1000) NUTS

Rows:

* ``theophylline`` (43 parameters, 12 subjects, 132 observations; closed-form
  one-compartment model by ``sl.pk.onecpt``): retaped gradient (the default,
  ``sl.compile``) and the eager tape (``compile = False``);
* ``mm_multidose_ss`` (4 parameters; a steady state of a nonlinear ODE by
  ``sl.pk.ode``: the algebraic-solver super node around ODE solves, then the ODE over
  two dosing intervals): with the closed-form trough as the solver's starting point
  (the model's default) and from zeros (the library's default start).

No peer is timed: Torsten (Stan's pharmacometrics extension) needs a CmdStan build.
Set OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 for timing runs.
"""

import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import _common  # noqa: E402  (the benchmarks' helpers: only the standard library)
import numpy as np  # noqa: E402

import stanlite.models as zoo  # noqa: E402
from stanlite.models import mm_multidose_ss as mm  # noqa: E402


def per_call(fn, x, n, min_time=0.5):
    """Median over 3 repeats of the mean time of ``n`` calls (moving points)."""
    fn(x)                                      # first call: recording, caches
    reps = []
    for _ in range(3):
        t0 = time.perf_counter()
        for k in range(n):
            fn(x + 1e-4 * k)
        reps.append((time.perf_counter() - t0) / n)
    return float(np.median(reps))


def gradients(quick):
    rows = []
    m = zoo.get("theophylline")
    x = np.random.default_rng(0).normal(0.0, 0.3, m.dim)
    x[:3] += [-2.45, np.log(2.9), -3.2]
    n = 50 if quick else 300
    rows.append(("theophylline", m.dim, "retaped gradient",
                 per_call(m.log_density_gradient, x, n)))
    m.compile = False
    rows.append(("theophylline", m.dim, "eager tape gradient",
                 per_call(m.log_density_gradient, x, n)))
    mmod = zoo.get("mm_multidose_ss")
    x = mmod.unconstrain({k: mm.TRUTH[k] for k in ("V", "Vmax", "Km", "sigma")})
    n = 3 if quick else 10
    rows.append(("mm_multidose_ss", mmod.dim, "gradient, closed-form start",
                 per_call(mmod.log_density_gradient, x, n)))
    rows.append(("mm_multidose_ss", mmod.dim, "log density only",
                 per_call(mmod.log_density, x, n)))
    mmod._guess = lambda *a: None
    rows.append(("mm_multidose_ss", mmod.dim, "gradient, start at zeros",
                 per_call(mmod.log_density_gradient, x, n)))
    print(f"{'model':18s} {'dim':>4s}  {'what':30s} {'ms per call':>12s}")
    print("-" * 68)
    for name, dim, what, t in rows:
        print(f"{name:18s} {dim:4d}  {what:30s} {1e3 * t:12.2f}")


def nuts():
    m = zoo.get("theophylline")
    t0 = time.perf_counter()
    fit = m.sample(chains=4, seed=20240808, progress=False)
    secs = time.perf_counter() - t0
    st = fit.sampler_stats
    s = fit.summary(["log_ka", "log_ke", "log_cl", "omega_ka", "omega_ke", "omega_cl",
                     "sigma"])
    print(f"\ntheophylline, NUTS 4 chains x (1000 warmup + 1000 draws): {secs:.0f} s, "
          f"{int(st['divergent__'].sum())} divergences, "
          f"{st['n_leapfrog__'].mean():.1f} leapfrog steps per draw, "
          f"{int(st['n_leapfrog__'].sum())} gradients after warmup")
    print(s[["mean", "sd", "ess_bulk", "ess_tail", "r_hat"]].assign(
        **{"ess_bulk/s": s["ess_bulk"] / secs}).round(3).to_string())


if __name__ == "__main__":
    ap = _common.arg_parser(__doc__, "fewer repetitions")
    ap.add_argument("--nuts", action="store_true", help="also time a NUTS fit")
    args = ap.parse_args()
    gradients(args.quick)
    if args.nuts:
        nuts()
