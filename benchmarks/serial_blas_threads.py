"""Chains in the calling process (``parallel=False`` or one chain): BLAS unlimited vs
one thread (``blas_threads=1``), in one run so both columns see the same machine load.

Two models: a 3x3 ``cov_matrix`` parameter in a multi_normal (small matrices: BLAS
threading is pure overhead there) and a GP marginal likelihood with N points (one
N x N Cholesky per gradient: where threads could help). For each: seconds per
gradient and wall seconds of a short serial run, unlimited and limited, interleaved
and repeated. Run: ``python benchmarks/serial_blas_threads.py [N ...]``.
"""

import sys
import time

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import stanlite as sl


class SmallCov(sl.Model):
    y = sl.data.matrix(50, 3)
    mu = sl.param.vector(3)
    Sigma = sl.param.cov_matrix(3)

    def log_prob(self, mu, Sigma):
        lp = sl.normal_lpdf(mu, 0, 5) + sl.wishart_lpdf(Sigma, 5.0, np.eye(3))
        for i in range(50):
            lp = lp + sl.multi_normal_lpdf(self.y[i], mu, Sigma)
        return lp


class GP(sl.Model):
    N = sl.data.int(lower=1)
    x = sl.data.vector("N")
    y = sl.data.vector("N")
    rho = sl.param.real(lower=0)
    alpha = sl.param.real(lower=0)
    sigma = sl.param.real(lower=0)

    def log_prob(self, rho, alpha, sigma):
        K = sl.add_diag(sl.gp_exp_quad_cov(self.x, alpha, rho), sigma ** 2 + 1e-9)
        lp = sl.gamma_lpdf(rho, 5, 5) + sl.normal_lpdf(alpha, 0, 1) \
            + sl.normal_lpdf(sigma, 0, 1)
        return lp + sl.multi_normal_cholesky_lpdf(self.y, np.zeros(self.N),
                                                   sl.cholesky_decompose(K))


def per_gradient(model, limit, reps):
    x = np.full(model.dim, 0.1)
    with threadpool_limits(limits=limit, user_api="blas") if limit else _null():
        model.log_density_gradient(x)
        t = time.perf_counter()
        for _ in range(reps):
            model.log_density_gradient(x)
        return (time.perf_counter() - t) / reps


def run(model, blas_threads, iters):
    t = time.perf_counter()
    model.sample(chains=1, warmup=iters, draws=iters, seed=1, progress=False,
                 parallel=False, blas_threads=blas_threads)
    return time.perf_counter() - t


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def main(ns):
    rng = np.random.default_rng(0)
    blas = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    print(f"BLAS threads by default: {blas}")
    models = [("cov_matrix 3x3, 50 rows", SmallCov(y=rng.normal(size=(50, 3))), 300, 30)]
    for n in ns:
        x = np.sort(rng.uniform(0, 10, n))
        models.append((f"GP N={n}", GP(N=n, x=x, y=np.sin(x) + rng.normal(0, .3, n)),
                       20, 15))
    print(f"{'model':26s} {'threads':>8s} {'ms/grad':>9s} {'run s':>8s}")
    for name, m, reps, iters in models:
        for rep in range(2):
            for limit in (None, 1) if rep == 0 else (1, None):
                g = per_gradient(m, limit, reps)
                s = run(m, limit, iters)
                print(f"{name:26s} {str(limit or 'all'):>8s} {g * 1e3:9.3f} {s:8.2f}"
                      f"   ({iters}+{iters} iterations)", flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [200, 300])
