"""Per-call cost of the log-density protocol of the zoo models, side by side with floors.

What NUTS pays at every leapfrog step is one ``model.log_density_gradient(x)``; for the
small zoo models that cost is almost all Python overhead (parameter slicing, transform
dispatch, argument picking, the fused nodes' wrappers), not arithmetic. Columns, for each
model of ``stanlite.models.names()`` with its default data, at one point ``x``:

  grad        ``model.log_density_gradient(x)``, microseconds per call
  density     ``model.log_density(x)``, microseconds per call
  nodes       tape nodes recorded by one gradient
  sl floor    the same log density (value and gradient identical up to rounding) written
              by hand as a plain function of ``x`` with stanlite operations -
              ``sl.value_and_grad(f)(x)``: what the model machinery adds is the difference
  np floor    the hand-written numpy value and gradient (where easy), the absolute floor

The floors are checked against the model (value and gradient, 1e-12 relative) before
timing. Timing follows benchmarks/distributions.py: the clock is ``time.process_time``
(one BLAS thread unless the environment says otherwise), each column is a timed loop sized
from one call, and the reported time is the **median** of several repeats, the repeats of
a model's columns interleaved so that a noisy period hits them alike.

Run:  python benchmarks/model_overhead.py [--quick] [--models name ...]
"""

import math
import os
import sys

import blas_threads  # noqa: E402,F401  (one BLAS thread; before numpy)
import _common  # noqa: E402

import numpy as np  # noqa: E402

try:
    import stanlite as sl
except ImportError:                 # run from a checkout without installing
    import pathlib
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    import stanlite as sl
import stanlite.models as zoo  # noqa: E402
from stanlite.autodiff import tape as _tape  # noqa: E402


# ------------------------------------------------------------------------------------
# timing
# ------------------------------------------------------------------------------------
def median_times(fns, arg, budget=0.5, repeats=7):
    """Median per-call process time of each ``fns[name](arg)``; the repeats of the
    different functions are interleaved (each loop sized from 10 calls)."""
    return _common.median_times(fns, lambda _: arg, budget, repeats, calls=10,
                                floor=1e-7)


def tape_nodes(model, x):
    """Nodes recorded by one ``log_density_gradient(x)``: counted when its recording
    scope closes (whatever path the model takes to its gradient)."""
    seen = []
    orig = _tape.nested.__exit__

    def counting_exit(self, *exc):
        seen.append(len(self.tape.nodes))
        return orig(self, *exc)

    _tape.nested.__exit__ = counting_exit
    try:
        model.log_density_gradient(x)
    finally:
        _tape.nested.__exit__ = orig
    return sum(seen) if seen else None


# ------------------------------------------------------------------------------------
# floors: the same log densities by hand (f_sl for sl.value_and_grad; vg_np in numpy)
# ------------------------------------------------------------------------------------
LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
LOG_PI = math.log(math.pi)             # the half-Cauchy's normalisation


def floors_eight_schools_noncentered(m):
    y, sigma, J = m.y, m.sigma, m.J

    def f_sl(x):
        tt, mu, log_tau = x[:J], x[J], x[J + 1]
        tau = sl.exp(log_tau)
        lp = sl.normal_lpdf(tt, 0, 1) + sl.normal_lpdf(y, tt * tau + mu, sigma)
        lp = lp + sl.normal_lpdf(mu, 0, 5) + sl.cauchy_lpdf(tau, 0, 5)
        return lp + log_tau

    def vg_np(x):
        tt, mu, log_tau = x[:J], x[J], x[J + 1]
        tau = math.exp(log_tau)
        theta = tt * tau + mu
        r = (y - theta) / sigma
        u = tau / 5.0
        lp = (-0.5 * (tt @ tt) - J * LOG_SQRT_2PI
              - 0.5 * (r @ r) - np.sum(np.log(sigma)) - J * LOG_SQRT_2PI
              - 0.5 * (mu / 5.0) ** 2 - math.log(5.0) - LOG_SQRT_2PI
              - LOG_PI - math.log(5.0) - math.log1p(u * u) + log_tau)
        rs = r / sigma                           # d lp / d theta
        g = np.empty(J + 2)
        g[:J] = -tt + tau * rs
        g[J] = rs.sum() - mu / 25.0
        g[J + 1] = tau * (rs @ tt) - 2.0 * u * u / (1.0 + u * u) + 1.0
        return float(lp), g

    return f_sl, vg_np


def floors_eight_schools_centered(m):
    y, sigma, J = m.y, m.sigma, m.J

    def f_sl(x):
        theta, mu, log_tau = x[:J], x[J], x[J + 1]
        tau = sl.exp(log_tau)
        lp = sl.cauchy_lpdf(tau, 0, 5) + sl.normal_lpdf(theta, mu, tau)
        lp = lp + sl.normal_lpdf(y, theta, sigma)
        return lp + sl.normal_lpdf(mu, 0, 5) + log_tau

    def vg_np(x):
        theta, mu, log_tau = x[:J], x[J], x[J + 1]
        tau = math.exp(log_tau)
        u = tau / 5.0
        z = (theta - mu) / tau
        r = (y - theta) / sigma
        lp = (-LOG_PI - math.log(5.0) - math.log1p(u * u)
              - 0.5 * (z @ z) - J * log_tau - J * LOG_SQRT_2PI
              - 0.5 * (r @ r) - np.sum(np.log(sigma)) - J * LOG_SQRT_2PI
              - 0.5 * (mu / 5.0) ** 2 - math.log(5.0) - LOG_SQRT_2PI + log_tau)
        g = np.empty(J + 2)
        g[:J] = -z / tau + r / sigma
        g[J] = z.sum() / tau - mu / 25.0
        g[J + 1] = -2.0 * u * u / (1.0 + u * u) + (z @ z) - J + 1.0
        return float(lp), g

    return f_sl, vg_np


def floors_logistic_regression(m):
    X, y, K = m.X, m.y, m.K

    def f_sl(x):
        alpha, beta = x[0], x[1:]
        lp = sl.normal_lpdf(alpha, 0, 2.5) + sl.normal_lpdf(beta, 0, 2.5)
        return lp + sl.bernoulli_logit_glm_lpmf(y, X, alpha, beta)

    def vg_np(x):
        alpha, beta = x[0], x[1:]
        eta = X @ beta + alpha
        p = 0.5 * (1.0 + np.tanh(0.5 * eta))          # inv_logit without overflow
        lp = (float(y @ eta - np.sum(np.logaddexp(0.0, eta)))
              - 0.5 * (alpha * alpha + beta @ beta) / 6.25
              - (K + 1) * (math.log(2.5) + LOG_SQRT_2PI))
        r = y - p
        g = np.empty(K + 1)
        g[0] = r.sum() - alpha / 6.25
        g[1:] = X.T @ r - beta / 6.25
        return lp, g

    return f_sl, vg_np


def floors_linear_regression(m):
    ks, iq = m.kid_score, m.mom_iq

    def f_sl(x):
        b0, b1, log_sigma = x[0], x[1], x[2]
        sigma = sl.exp(log_sigma)
        lp = sl.cauchy_lpdf(sigma, 0, 2.5)
        return lp + sl.normal_lpdf(ks, b0 + b1 * iq, sigma) + log_sigma

    return f_sl, None


def floors_neal_funnel(m):
    def f_sl(x):
        v = x[0]
        return sl.normal_lpdf(v, 0, 3) + sl.normal_lpdf(x[1:], 0, sl.exp(v / 2))

    return f_sl, None


def floors_radon(m):
    J = m.J
    county, fl, lr = m.county, m.floor_measure, m.log_radon

    def f_sl(x):
        alpha, beta, mu_a = x[:J], x[J], x[J + 1]
        ls_a, ls_y = x[J + 2], x[J + 3]
        s_a, s_y = sl.exp(ls_a), sl.exp(ls_y)
        lp = sl.normal_lpdf(s_y, 0, 1) + sl.normal_lpdf(s_a, 0, 1)
        lp = lp + sl.normal_lpdf(mu_a, 0, 10) + sl.normal_lpdf(beta, 0, 10)
        lp = lp + sl.normal_lpdf(alpha, mu_a, s_a)
        lp = lp + sl.normal_lpdf(lr, alpha[county] + fl * beta, s_y)
        return lp + ls_a + ls_y

    return f_sl, None


def floors_ark(m):
    lags, target = m.lags, m.target

    def f_sl(x):
        alpha, beta, log_sigma = x[0], x[1:-1], x[-1]
        sigma = sl.exp(log_sigma)
        lp = sl.normal_lpdf(alpha, 0, 10) + sl.normal_lpdf(beta, 0, 10)
        lp = lp + sl.cauchy_lpdf(sigma, 0, 2.5)
        return lp + sl.normal_lpdf(target, alpha + lags @ beta, sigma) + log_sigma

    return f_sl, None


FLOORS = {
    "eight_schools_noncentered": floors_eight_schools_noncentered,
    "eight_schools_centered": floors_eight_schools_centered,
    "logistic_regression": floors_logistic_regression,
    "linear_regression": floors_linear_regression,
    "neal_funnel": floors_neal_funnel,
    "radon": floors_radon,
    "ark": floors_ark,
}


def _agrees(v, g, ref_v, ref_g, rtol=1e-12):
    scale = max(1.0, float(np.max(np.abs(ref_g))))
    return (abs(v - ref_v) <= rtol * max(1.0, abs(ref_v))
            and bool(np.all(np.abs(np.asarray(g) - ref_g) <= rtol * scale)))


# ------------------------------------------------------------------------------------
# the table
# ------------------------------------------------------------------------------------
def run(quick=False, names=None):
    budget, repeats = (0.15, 5) if quick else (0.6, 9)
    names = names or zoo.names()
    rows = []
    for name in names:
        m = zoo.get(name)
        x = np.random.default_rng(1).uniform(-1.0, 1.0, m.dim)
        ref_v, ref_g = m.log_density_gradient(x)
        fns = {"grad": m.log_density_gradient, "density": m.log_density}
        f_sl, vg_np = FLOORS[name](m) if name in FLOORS else (None, None)
        if f_sl is not None:
            fns["sl floor"] = sl.value_and_grad(f_sl)
        if vg_np is not None:
            fns["np floor"] = vg_np
        for k in ("sl floor", "np floor"):
            if k in fns:
                v, g = fns[k](x)
                if not _agrees(float(v), g, ref_v, ref_g):
                    print(f"  !! {k} disagrees with the model on {name}", file=sys.stderr)
        times = median_times(fns, x, budget=budget, repeats=repeats)
        rows.append((name, m.dim, tape_nodes(m, x), times))
    w = 27
    cols = ("grad", "density", "sl floor", "np floor")
    print("log-density protocol of the zoo models: median process time per call (us); "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}")
    head = f"{'model':<{w}}{'dim':>5}{'nodes':>7}" + "".join(f"{c:>10}" for c in cols) \
        + f"{'grad/sl':>9}"
    print(head)
    print("-" * len(head))
    for name, dim, nodes, times in rows:
        cells = "".join(f"{times[c] * 1e6:10.1f}" if c in times else f"{'-':>10}"
                        for c in cols)
        ratio = (f"{times['grad'] / times['sl floor']:8.2f}x" if "sl floor" in times
                 else f"{'-':>9}")
        print(f"{name:<{w}}{dim:>5}{nodes if nodes is not None else '-':>7}{cells}{ratio}")
    return rows


if __name__ == "__main__":
    ap = _common.arg_parser(__doc__)
    ap.add_argument("--models", nargs="*", help="zoo model names (default: all)")
    a = ap.parse_args()
    run(a.quick, a.models)
