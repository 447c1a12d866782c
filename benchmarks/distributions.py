"""Value+gradient time of stanlite's fused GLM nodes, side by side with the floor and peers.

Columns (one process, same inputs; every time is a ratio to the first column):

  numpy (floor)   the hand-written numpy value and gradient
  fused GLM       stanlite ``<family>_glm_lpdf/lpmf(y | x, alpha, beta, ...)``: one node
  composed        stanlite ``<family>_lpmf(y, x @ beta + alpha)``: a matmul node, an add
                  node and the fused elementwise log density
  autograd        HIPS autograd ``value_and_grad`` (if installed)
  jax, jax.jit    JAX ``value_and_grad`` without and with ``jax.jit``, float64 (if installed)

The gradient is w.r.t. (alpha, beta), packed in one vector w = (alpha, beta); y, x (and
sigma for the normal model) are data. Timing follows benchmarks/ad_overhead.py (a timed
loop of calls sized from one call, several repeats) with two changes: the clock is
``time.process_time`` (CPU time of the whole process, BLAS and JAX threads included,
less sensitive to other load on a shared machine than wall time; one BLAS thread by
default, see below) and the reported time is the **median** of the repeats; repeats of the columns are interleaved, so a noisy
period hits every column alike. Each implementation's value and gradient are checked
against the hand-written ones before timing.

Cases:
  logistic (bernoulli_logit_glm)  N=100 K=5 and N=100000 K=50
  normal_id_glm                   N=100000 K=50 (sigma fixed)
  poisson_log_glm                 N=100000 K=50

The numpy floors: logistic ``eta = x @ beta + alpha; lp = sum(y * eta - logaddexp(0, eta));
r = y - expit(eta)``; normal ``z = (y - mu)/sigma; lp = -z.z/2 - N log sigma - N log(2 pi)/2;
r = z/sigma``; Poisson ``lp = y.eta - sum(exp(eta)) - C`` with the data constant
C = sum lgamma(y + 1) computed once, outside the timed call (every peer gets the same
hoisted constant; the fused node computes it on each call). Gradient: (sum r, x^T r).

Target (printed with PASS/MISS): the fused bernoulli_logit_glm at N=100000 K=50 costs at
most 1.3x the numpy floor.

BLAS threads: the script sets OPENBLAS_NUM_THREADS (and OMP/MKL) to 1 unless the
environment already sets them, because idle OpenBLAS workers spin and their CPU time
would be counted; ``OPENBLAS_NUM_THREADS=2 python benchmarks/distributions.py``
measures the multi-threaded case (noisier).

Run:  python benchmarks/distributions.py [--quick]
"""

import math
import os
import sys

import blas_threads  # noqa: E402,F401  (one BLAS thread; before numpy)

import numpy as np  # noqa: E402
from scipy.special import expit, gammaln  # noqa: E402

try:
    import stanlite as sl
except ImportError:                 # run from a checkout without installing
    import pathlib
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    import stanlite as sl

import _common  # noqa: E402
from _common import fmt_time, peer_columns, peers, print_head  # noqa: E402

TARGET = ("logistic N=100000 K=50", 1.3)
HALF_LOG_TWO_PI = 0.5 * math.log(2.0 * math.pi)


# ------------------------------------------------------------------------------------
# timing
# ------------------------------------------------------------------------------------
def median_times(fns, arg_of, budget=0.5, repeats=7):
    """Median per-call process time of each ``fns[name](arg_of(name))``; the repeats of
    the different functions are interleaved."""
    return _common.median_times(fns, arg_of, budget, repeats)


# ------------------------------------------------------------------------------------
# cases: each returns (w0, numpy_vg, fused_f, composed_f, make_peer(xnp) -> f)
# ------------------------------------------------------------------------------------
def _design(N, K, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, K)) / np.sqrt(K)
    beta = rng.standard_normal(K)
    w0 = np.concatenate([[0.1], rng.standard_normal(K) * 0.3])
    return rng, x, beta, w0


def _glm_gradient(x, r):
    """The gradient w.r.t. (alpha, beta) of a GLM whose d lp / d eta is ``r``."""
    g = np.empty(x.shape[1] + 1)
    g[0] = r.sum()
    g[1:] = x.T @ r
    return g


def _stanlite_pair(glm, composed, y, x, *rest):
    """stanlite's fused GLM density of (alpha, beta) = (w[0], w[1:]) and the same density
    composed from the linear predictor; ``rest``: the arguments after it (sigma)."""
    def f_fused(w):
        return glm(y, x, w[0], w[1:], *rest)

    def f_composed(w):
        return composed(y, x @ w[1:] + w[0], *rest)
    return f_fused, f_composed


def _glm_peer(x, y, lp_of_eta):
    """A peer's density of (alpha, beta) = (w[0], w[1:]): ``peer(xnp, convert)`` is
    ``lp_of_eta(xnp, y, eta)`` at eta = x beta + alpha, with x and y converted to the
    peer's arrays once."""
    def peer(xnp, convert):
        xj, yj = convert(x), convert(y)

        def f(w):
            return lp_of_eta(xnp, yj, xnp.dot(xj, w[1:]) + w[0])
        return f
    return peer


def logistic_case(N, K, seed=0):
    rng, x, beta, w0 = _design(N, K, seed)
    y = (rng.random(N) < expit(0.2 + x @ beta)).astype(np.int64)
    yf = y.astype(float)

    def vg_np(w):
        eta = x @ w[1:] + w[0]
        lp = float(np.sum(yf * eta - np.logaddexp(0.0, eta)))
        r = yf - expit(eta)
        return lp, _glm_gradient(x, r)

    f_fused, f_composed = _stanlite_pair(sl.bernoulli_logit_glm_lpmf,
                                         sl.bernoulli_logit_lpmf, y, x)

    def peer_lp(xnp, yj, eta):
        return xnp.sum(yj * eta - xnp.logaddexp(0.0, eta))

    return w0, vg_np, f_fused, f_composed, _glm_peer(x, yf, peer_lp)


def normal_case(N, K, seed=1):
    rng, x, beta, w0 = _design(N, K, seed)
    sigma = 1.3
    y = 0.2 + x @ beta + sigma * rng.standard_normal(N)

    def vg_np(w):
        z = (y - (x @ w[1:] + w[0])) / sigma
        lp = -0.5 * float(z @ z) - N * math.log(sigma) - N * HALF_LOG_TWO_PI
        r = z / sigma
        return lp, _glm_gradient(x, r)

    f_fused, f_composed = _stanlite_pair(sl.normal_id_glm_lpdf, sl.normal_lpdf, y, x, sigma)

    def peer_lp(xnp, yj, eta):
        z = (yj - eta) / sigma
        return -0.5 * xnp.sum(z * z) - N * math.log(sigma) - N * HALF_LOG_TWO_PI

    return w0, vg_np, f_fused, f_composed, _glm_peer(x, y, peer_lp)


def poisson_case(N, K, seed=2):
    rng, x, beta, w0 = _design(N, K, seed)
    y = rng.poisson(np.exp(0.5 + 0.5 * (x @ beta)))
    yf = y.astype(float)
    C = float(gammaln(yf + 1.0).sum())        # data constant, hoisted for the peers

    def vg_np(w):
        eta = x @ w[1:] + w[0]
        u = np.exp(eta)
        lp = float(yf @ eta - u.sum()) - C
        r = yf - u
        return lp, _glm_gradient(x, r)

    f_fused, f_composed = _stanlite_pair(sl.poisson_log_glm_lpmf, sl.poisson_log_lpmf, y, x)

    def peer_lp(xnp, yj, eta):
        return xnp.sum(yj * eta - xnp.exp(eta)) - C

    return w0, vg_np, f_fused, f_composed, _glm_peer(x, yf, peer_lp)


CASES = [
    ("logistic N=100 K=5", lambda: logistic_case(100, 5)),
    ("logistic N=100000 K=50", lambda: logistic_case(100000, 50)),
    ("normal_id N=100000 K=50", lambda: normal_case(100000, 50)),
    ("poisson_log N=100000 K=50", lambda: poisson_case(100000, 50)),
]


def run(quick=False):
    budget, repeats = _common.loop_budget(quick, 0.6, 9)
    ps = peers()
    cols = peer_columns(ps, ["numpy (floor)", "fused GLM", "composed"])
    rows = []
    for name, make in CASES:
        w0, vg_np, f_fused, f_composed, peer = make()
        ref_v, ref_g = vg_np(w0)
        fns = {"numpy (floor)": vg_np, "fused GLM": sl.value_and_grad(f_fused),
               "composed": sl.value_and_grad(f_composed),
               **_common.peer_functions(ps, lambda lib: lib.value_and_grad,
                                        lambda anp: peer(anp, np.asarray),
                                        lambda jnp: peer(jnp, jnp.asarray))}
        fns = {c: fns[c] for c in cols}
        jw0 = ps["jax"][1].asarray(w0) if "jax" in ps else None

        def arg_of(col):
            return jw0 if col.startswith("jax") else w0
        for col, fn in fns.items():
            v, g = fn(arg_of(col))
            if not np.allclose(np.asarray(g), ref_g, rtol=1e-8, atol=1e-8) or \
                    not np.isclose(float(v), ref_v, rtol=1e-10):
                print(f"  !! {col} disagrees with the hand-written gradient on {name}",
                      file=sys.stderr)
        times = median_times(fns, arg_of, budget=budget, repeats=repeats)
        rows.append((name, times))
        print(f"  {name}: done", file=sys.stderr)
    w = 27
    head = f"{'case':<{w}}" + "".join(f"{c:>22}" for c in cols)
    print("value + gradient w.r.t. (alpha, beta), median process time per call; "
          "(ratio to the hand-written numpy gradient); "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}")
    print_head(head)
    for name, times in rows:
        floor = times["numpy (floor)"]
        cells = [f"{fmt_time(times[c])} ({times[c] / floor:5.2f}x)" for c in cols]
        print(f"{name:<{w}}" + "".join(f"{c:>22}" for c in cells))
    tname, limit = TARGET
    t = dict(rows)[tname]
    ratio = t["fused GLM"] / t["numpy (floor)"]
    verdict = "PASS" if ratio <= limit else "MISS"
    print(f"\ntarget: fused bernoulli_logit_glm, {tname.split(' ', 1)[1]}: "
          f"{ratio:.2f}x the numpy floor (limit {limit}x)  {verdict}")
    return rows, ratio


if __name__ == "__main__":
    ap = _common.arg_parser(__doc__)
    run(ap.parse_args().quick)
