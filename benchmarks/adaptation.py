"""Warmup adaptation: how many warmup gradients each scheme needs for a good metric.

Schemes (``model.sample(adaptation=..., metric=..., warmup=W)``):

  stan            Stan's windowed adaptation: step size only for 75 iterations, then
                  windows of 25, 50, 100, ... estimating the variance of the draws
                  (``metric='diag_e'``) or their covariance (``'dense_e'``), then 50
                  iterations of step size only (15% / 75% / 10% of a short warmup)
  nutpie          nutpie's diagonal from draws and gradients, sqrt(var q / var grad),
                  updated at every iteration from the start over a trailing window
  nutpie-lowrank  that diagonal times a low-rank correction from the same window
                  (a dense metric)

on three posteriors:

  gauss100        x ~ N(0, S), S = D R D, R_ij = 0.9^|i-j|, sd log-spaced 0.3..3
                  (the 100-d Gaussian of ``nuts.py``; exact means and sds)
  scales20        20 independent normals, sd log-spaced 0.01..100 (exact)
  eight_schools   non-centred (zoo model ``eight_schools_noncentered``); reference
                  means and sds from posteriordb in ../shared when present

Columns, for 4 chains x (W warmup + 1000 draws), fixed seeds:

  warmup grads    leapfrog steps (one gradient each) of the warmup, all chains (the
                  step-size searches' few gradients not counted)
  steps/draw      mean leapfrog steps per draw after warmup
  ESS/grad        min bulk ESS over every scalar / gradients of the sampling phase:
                  the quality of the adapted metric and step size
  ESS/all grads   min bulk ESS / (warmup + sampling gradients): the whole run's cost
  max |err|/MCSE  max over scalars of |mean - true mean| / MCSE of the mean (ArviZ;
                  eight schools: the combined MCSE of ours and the reference's)
  max sd err      max over scalars of |sd - true sd| / true sd
  div             divergent transitions after warmup

The ESS and the errors are fixed by the seed up to the rounding of the compiled
gradient, which changes the chains: they move by a few percent between runs (the
100-d Gaussian) and code versions; the wall time (last column) is noise on a shared
machine, given for orientation only.

Run:  python benchmarks/adaptation.py [--quick] [--cases gauss100 scales20 eight_schools]
      (--quick: 2 chains x 300 draws and fewer schemes, a smoke run)
"""

import argparse
import json
import math
import pathlib
import sys
import time
import warnings

import blas_threads  # noqa: F401  (one BLAS thread per process; before numpy)

import numpy as np  # noqa: E402

HERE = pathlib.Path(__file__).resolve()
REPO = HERE.parents[1]
SHARED = REPO.parent / "shared"
SEED = 20261126
PARALLEL = True          # (an experiment patching the adaptation runs serially)

#: per posterior: (adaptation, metric, warmup) runs
SCHEMES = {
    "gauss100": [("stan", "dense_e", 1000), ("stan", "dense_e", 300),
                 ("stan", "diag_e", 1000), ("nutpie", "diag_e", 1000),
                 ("nutpie", "diag_e", 300), ("nutpie-lowrank", "dense_e", 1000),
                 ("nutpie-lowrank", "dense_e", 300), ("nutpie-lowrank", "dense_e", 150)],
    "scales20": [("stan", "diag_e", 1000), ("stan", "diag_e", 300),
                 ("nutpie", "diag_e", 1000), ("nutpie", "diag_e", 300),
                 ("nutpie", "diag_e", 150)],
    "eight_schools": [("stan", "diag_e", 1000), ("stan", "diag_e", 300),
                      ("nutpie", "diag_e", 1000), ("nutpie", "diag_e", 300),
                      ("nutpie", "diag_e", 150)],
}
QUICK = {k: [v[0], v[-1]] for k, v in SCHEMES.items()}
LABELS = {"gauss100": "100-d Gaussian (corr. 0.9)", "scales20": "20 normals, sd 0.01..100",
          "eight_schools": "eight schools (non-centred)"}


def _stanlite():
    try:
        import stanlite as sl
    except ImportError:             # run from a checkout without installing
        sys.path.insert(0, str(REPO))
        import stanlite as sl
    return sl


def _define_models():
    """The two Gaussian models (stanlite.models.synthetic: the tests' models; chain
    processes unpickle them by reference)."""
    _stanlite()
    from stanlite.models.synthetic import CorrelatedGaussian, Scales, correlated_cov
    return CorrelatedGaussian, Scales, correlated_cov


def posterior(case):
    """``(model, names, reference)``: ``reference`` maps each scalar's name (e.g.
    ``x[3]``) to ``(mean, sd, mcse of the mean)``; None when unknown."""
    Gauss, Scales, correlated_cov = _define_models()
    if case == "gauss100":
        D = 100
        sd = np.exp(np.linspace(np.log(0.3), np.log(3.0), D))
        S = correlated_cov(D, 0.3, 3.0, 0.9)
        model = Gauss(D=D, m=np.zeros(D), L=np.linalg.cholesky(S))
        return model, ["x"], {f"x[{i + 1}]": (0.0, s, 0.0) for i, s in enumerate(sd)}
    if case == "scales20":
        D = 20
        sd = np.exp(np.linspace(np.log(0.01), np.log(100.0), D))
        return Scales(D=D, sd=sd), ["x"], \
            {f"x[{i + 1}]": (0.0, s, 0.0) for i, s in enumerate(sd)}
    if case == "eight_schools":
        import stanlite.models as zoo
        model = zoo.get("eight_schools_noncentered")
        ref = None
        f = SHARED / "posteriordb" / "eight_schools-eight_schools_noncentered" / \
            "summary.json"
        if f.is_file():
            params = json.loads(f.read_text())["params"]
            ref = {k: (v["mean"], v["sd"], v["pdb_mcse_mean"]) for k, v in params.items()}
        return model, ["mu", "tau", "theta"], ref
    raise ValueError(case)


def scalars(fit, names):
    """``{'x[1]': (chains, draws), ...}`` of the named quantities."""
    out = {}
    for k in names:
        v = np.asarray(fit[k], dtype=float)
        flat = v.reshape(v.shape[0], v.shape[1], -1)
        scalar = flat.shape[2] == 1 and v.ndim == 2
        for j in range(flat.shape[2]):
            out[k if scalar else f"{k}[{j + 1}]"] = flat[:, :, j]
    return out


def measure(model, names, ref, adaptation, metric, warmup, chains, draws, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz as az
    t0 = time.perf_counter()
    fit = model.sample(chains=chains, warmup=warmup, draws=draws, seed=seed,
                       adaptation=adaptation, metric=metric, progress=False,
                       save_warmup=True, parallel=PARALLEL)
    secs = time.perf_counter() - t0
    warm = float(fit.warmup("n_leapfrog__").sum()) if warmup else 0.0
    samp = float(fit["n_leapfrog__"].sum())
    ess, err, sd_err = math.inf, 0.0, 0.0
    for k, x in scalars(fit, names).items():
        e = float(np.ravel(az.ess(x, method="bulk"))[0])
        ess = min(ess, e if math.isfinite(e) else 0.0)
        if ref is None or k not in ref:
            continue
        mean, sd, ref_se = ref[k]
        se = float(np.ravel(az.mcse(x, method="mean"))[0])
        err = max(err, abs(float(np.mean(x)) - mean) / math.hypot(se, ref_se))
        sd_err = max(sd_err, abs(float(np.std(x, ddof=1)) - sd) / sd)
    return dict(warm=warm, steps=samp / (chains * draws), ess=ess, ess_grad=ess / samp,
                ess_all=ess / (warm + samp), err=err if ref else None,
                sd_err=sd_err if ref else None, div=int(np.sum(fit["divergent__"])),
                secs=secs)


def _f(v, fmt):
    return "-" if v is None else format(v, fmt)


def print_table(rows, chains, draws):
    print(f"\n{chains} chains x (W warmup + {draws} draws); seed {SEED}\n")
    print("| posterior | adaptation | metric | W | warmup grads | steps/draw | min ESS | "
          "ESS/grad | ESS/all grads | max abs err/MCSE | max sd err | div | s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for case, (ad, metric, warmup), r in rows:
        print(f"| {LABELS[case]} | {ad} | {metric} | {warmup} | {r['warm']:,.0f} | "
              f"{r['steps']:.1f} | {r['ess']:,.0f} | {r['ess_grad']:.4f} | "
              f"{r['ess_all']:.4f} | {_f(r['err'], '.2f')} | {_f(r['sd_err'], '.3f')} | "
              f"{r['div']} | {r['secs']:.1f} |", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cases", nargs="+", default=list(SCHEMES), choices=list(SCHEMES))
    args = ap.parse_args(argv)
    chains, draws = (2, 300) if args.quick else (4, 1000)
    schemes = QUICK if args.quick else SCHEMES
    rows = []
    for case in args.cases:
        model, names, ref = posterior(case)
        for s in schemes[case]:
            r = measure(model, names, ref, *s, chains=chains, draws=draws, seed=SEED)
            rows.append((case, s, r))
            print(f"  {case} {s}: {r['warm']:,.0f} warmup grads, ESS/grad "
                  f"{r['ess_grad']:.4f} ({r['secs']:.1f} s)", file=sys.stderr, flush=True)
    print_table(rows, chains, draws)


if __name__ == "__main__":
    main()
