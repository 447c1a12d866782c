"""ADVI: time to convergence and accuracy, stanlite side by side with PyMC.

Two posteriors, written the same way in each library:

  logistic        N = 1000, K = 10, simulated (seed 20240611: X ~ N(0, 1), beta ~ N(0,
                  0.5), alpha = 0.3); alpha, beta ~ N(0, 2.5); y ~ Bernoulli(logit^-1(
                  alpha + X beta)); stanlite's likelihood is ``bernoulli_logit_glm_lpmf``
  eight schools   non-centred: mu ~ N(0, 5), tau ~ Cauchy+(0, 5), theta_trans ~ N(0, 1),
                  y ~ N(mu + tau theta_trans, sigma)                (the zoo model)

For each (library, family, case) ADVI runs with its library's defaults and ``--seeds``
seeds (default 3), and the table reports medians over the seeds:

  seconds      wall time of the fit plus 1000 draws from the approximation (stanlite:
               ``model.variational``; PyMC: ``pm.fit`` + ``approx.sample``, which
               builds and compiles its step function at every call - included, as a
               user waits for it; an untimed 10-iteration ``pm.fit`` first warms
               PyTensor's on-disk cache of compiled C code, so this is the warm-cache
               cost)
  iters        iterations of stochastic gradient ascent until the stopping rule
               (stanlite: Stan's relative-ELBO rule, tol_rel_obj 0.01, after the eta
               adaptation's 5 x 50 iterations, not counted; PyMC: ``pm.fit(n=10000)``
               stopped by ``CheckParametersConvergence(diff="absolute")``, the
               rule PyMC's documentation uses: parameter change below 1e-3 in
               max-norm between checks 100 iterations apart)
  stanlite*    stanlite with tol_rel_obj = 0.001: longer runs, smaller errors
  conv         runs that met their stopping rule before the iteration limit
  |dmean|      max over the parameters of |mean_ADVI - mean_NUTS| / sd_NUTS
  sd ratio     min and max over the parameters of sd_ADVI / sd_NUTS (1 is right)
  k-hat        Pareto k-hat of log p - log q over the draws (stanlite reports it)

Means and sds are on the constrained scale, from 1000 draws of the approximation; the
reference is a long stanlite NUTS run (4 chains x (1000 warmup + 5000 draws), cached
in the temp directory), whose Monte Carlo error (about 0.01 sd) is negligible here.
The ADVI spread over seeds is large: both libraries stop their stochastic
optimisations early, and meanfield's sd ratios are the family's answer (the diagonal
of the posterior precision), not noise.

BLAS: one thread unless the environment says otherwise. The machine is shared: times
are noisy; the stanlite errors are deterministic for given seeds.

Run:  python benchmarks/advi.py [--quick] [--seeds 3] [--libs stanlite pymc]
                                [--cases logistic eight_schools]
      (--quick: 1 seed, a shorter reference run)
"""

import argparse
import importlib
import importlib.util
import logging
import os
import pathlib
import statistics
import sys
import tempfile
import time
import warnings

importlib.import_module("blas_threads")   # one BLAS thread per process; before numpy

import numpy as np  # noqa: E402

HERE = pathlib.Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1]))

from stanlite.models import get  # noqa: E402
# the zoo's logistic regression without its generated quantities
from stanlite.models.logistic_regression import LogisticRegressionDensity  # noqa: E402

CASES = ("logistic", "eight_schools")
LABELS = {"logistic": "logistic (N=1000, K=10)", "eight_schools": "eight schools (nc)"}
LIBS = ("stanlite", "stanlite*", "pymc")
METHODS = ("meanfield", "fullrank")
OUTPUT_DRAWS = 1000


# ---- the posteriors --------------------------------------------------------------------------
def case_data(case):
    if case == "logistic":
        rng = np.random.default_rng(20240611)
        N, K = 1000, 10
        X = rng.normal(size=(N, K))
        beta = rng.normal(0, 0.5, K)
        p = 1 / (1 + np.exp(-(0.3 + X @ beta)))
        return {"N": N, "K": K, "X": X, "y": (rng.random(N) < p).astype(int)}
    m = get("eight_schools_noncentered")
    return {"J": int(m.J), "y": np.asarray(m.y), "sigma": np.asarray(m.sigma)}


def stanlite_model(case):
    d = case_data(case)
    return LogisticRegressionDensity(**d) if case == "logistic" else get("eight_schools_noncentered")


PARAMS = {"logistic": ("alpha", "beta"), "eight_schools": ("mu", "tau", "theta_trans")}


def flat_moments(arrays, names):
    """{element name: (mean, sd)} from {name: (chains, draws, *shape)} arrays."""
    out = {}
    for k in names:
        a = np.asarray(arrays[k], dtype=float)
        a = a.reshape(a.shape[0] * a.shape[1], -1)
        for j in range(a.shape[1]):
            label = k if a.shape[1] == 1 else f"{k}[{j + 1}]"
            out[label] = (a[:, j].mean(), a[:, j].std(ddof=1))
    return out


# ---- the reference -----------------------------------------------------------------------
def reference(case, quick):
    draws = 1000 if quick else 5000
    path = pathlib.Path(tempfile.gettempdir()) / f"stanlite_advi_bench_{case}_{draws}.npz"
    names = PARAMS[case]
    if path.exists():
        z = np.load(path)
        return {k: (float(z["mean"][i]), float(z["sd"][i])) for i, k in
                enumerate(z["names"])}
    t0 = time.perf_counter()
    fit = stanlite_model(case).sample(chains=4, warmup=1000, draws=draws, seed=20240611,
                                      progress=False)
    mom = flat_moments({k: fit[k] for k in names}, names)
    np.savez(path, names=list(mom), mean=[v[0] for v in mom.values()],
             sd=[v[1] for v in mom.values()])
    print(f"  reference NUTS for {case}: 4 x {draws} draws in "
          f"{time.perf_counter() - t0:.0f} s ({path})", file=sys.stderr)
    return mom


# ---- the runs ------------------------------------------------------------------------------
def run_stanlite(case, method, seed, tol_rel_obj=0.01):
    model = stanlite_model(case)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        fit = model.variational(method=method, seed=seed, progress=False,
                                output_samples=OUTPUT_DRAWS, tol_rel_obj=tol_rel_obj)
        secs = time.perf_counter() - t0
    names = PARAMS[case]
    return {"seconds": secs, "iters": fit.extras["iterations"],
            "converged": fit.extras["converged"], "k": fit.pareto_k,
            "moments": flat_moments({k: fit[k] for k in names}, names)}


def _pymc_model(case):
    import pymc as pm
    d = case_data(case)
    with pm.Model() as model:
        if case == "logistic":
            alpha = pm.Normal("alpha", 0, 2.5)
            beta = pm.Normal("beta", 0, 2.5, shape=d["K"])
            pm.Bernoulli("y", logit_p=alpha + pm.math.dot(d["X"], beta), observed=d["y"])
        else:
            mu = pm.Normal("mu", 0, 5)
            tau = pm.HalfCauchy("tau", 5)
            tt = pm.Normal("theta_trans", 0, 1, shape=d["J"])
            pm.Normal("y", mu + tau * tt, d["sigma"], observed=d["y"])
    return model


_WARM = set()


def run_pymc(case, method, seed):
    import pymc as pm
    logging.getLogger("pymc").setLevel(logging.ERROR)
    logging.getLogger("pytensor").setLevel(logging.ERROR)
    model = _pymc_model(case)
    n = 10000
    kind = "advi" if method == "meanfield" else "fullrank_advi"
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if (case, method) not in _WARM:                 # compile once, untimed
            pm.fit(n=10, method=kind, random_seed=0, progressbar=False)
            _WARM.add((case, method))
        t0 = time.perf_counter()
        approx = pm.fit(n=n, method=kind, random_seed=seed, progressbar=False,
                        callbacks=[pm.callbacks.CheckParametersConvergence(
                            diff="absolute")])
        idata = approx.sample(draws=OUTPUT_DRAWS, random_seed=seed)
        secs = time.perf_counter() - t0
    iters = len(approx.hist)
    names = PARAMS[case]
    post = {k: idata.posterior[k].values for k in names}
    return {"seconds": secs, "iters": iters, "converged": iters < n, "k": None,
            "moments": flat_moments(post, names)}


RUNNERS = {"stanlite": run_stanlite, "pymc": run_pymc,
           "stanlite*": lambda case, method, seed: run_stanlite(case, method, seed, 0.001)}


def available(lib):
    if lib.startswith("stanlite"):
        return True
    return importlib.util.find_spec(lib) is not None


def accuracy(mom, ref):
    dmean = max(abs(mom[k][0] - ref[k][0]) / ref[k][1] for k in ref)
    ratios = [mom[k][1] / ref[k][1] for k in ref]
    return dmean, min(ratios), max(ratios)


def run(cases=CASES, libs=LIBS, seeds=3, quick=False):
    rows = []
    for case in cases:
        ref = reference(case, quick)
        for lib in libs:
            for method in METHODS:
                res = []
                for s in range(1, seeds + 1):
                    try:
                        r = RUNNERS[lib](case, method, s)
                    except Exception as e:                # noqa: BLE001 - reported
                        r = {"error": f"{type(e).__name__}: {str(e)[:80]}"}
                    res.append(r)
                    print(f"  {case} {lib} {method} seed {s}: "
                          + (r["error"] if "error" in r else
                             f"{r['seconds']:.2f} s, {r['iters']} iterations"),
                          file=sys.stderr)
                rows.append((case, lib, method, ref, res))
    return rows


def print_table(rows, seeds, missing):
    print(f"ADVI, medians over {seeds} seed(s); accuracy against long NUTS runs "
          "(errors in posterior sd units)\n")
    head = (f"{'case':<26}{'library':<10}{'family':<11}{'seconds':>8}{'iters':>7}"
            f"{'conv':>6}{'|dmean|':>9}{'sd ratio':>14}{'k-hat':>7}")
    print(head)
    print("-" * len(head))
    for case, lib, method, ref, res in rows:
        ok = [r for r in res if "error" not in r]
        if not ok:
            print(f"{LABELS[case]:<26}{lib:<10}{method:<11}  failed: {res[0]['error']}")
            continue
        acc = [accuracy(r["moments"], ref) for r in ok]
        med = statistics.median
        ks = [r["k"] for r in ok if r["k"] is not None]
        print(f"{LABELS[case]:<26}{lib:<10}{method:<11}"
              f"{med(r['seconds'] for r in ok):>8.2f}"
              f"{med(r['iters'] for r in ok):>7.0f}"
              f"{sum(r['converged'] for r in ok):>4}/{len(res):<1}"
              f"{med(a[0] for a in acc):>9.2f}"
              f"{med(a[1] for a in acc):>7.2f}-{med(a[2] for a in acc):<6.2f}"
              f"{med(ks) if ks else float('nan'):>7.2f}")
        if len(ok) < len(res):
            print(f"{'':<47}{len(res) - len(ok)} run(s) failed: "
                  + next(r["error"] for r in res if "error" in r))
    if missing:
        print(f"\nnot installed: {', '.join(missing)} (pip install -e '.[bench]'); "
              "their rows are missing")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--seeds", type=int, default=None)
    p.add_argument("--libs", nargs="+", default=list(LIBS), choices=LIBS)
    p.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    a = p.parse_args(argv)
    seeds = a.seeds or (1 if a.quick else 3)
    libs = [lib for lib in a.libs if available(lib)]
    missing = [lib for lib in a.libs if lib not in libs]
    print(f"BLAS threads: {os.environ.get('OPENBLAS_NUM_THREADS')}", file=sys.stderr)
    rows = run(a.cases, libs, seeds, a.quick)
    print_table(rows, seeds, missing)


if __name__ == "__main__":
    main()
