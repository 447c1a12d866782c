"""optimize, Laplace and Pathfinder against posteriordb's reference posteriors, and NUTS
warmup started from Pathfinder.

For every posterior in ``../shared/posteriordb`` that stanlite expresses (the models of
``benchmarks/posteriordb.py``), with the posterior's data:

  optimize    L-BFGS, jacobian=False (MAP): seconds, gradient evaluations, converged
  laplace     1000 draws at the jacobian=True mode: seconds, Pareto k-hat, accuracy
  pathfinder  4 paths, 1000 draws (Stan's defaults): seconds, gradient and
              log-density evaluations, Pareto k-hat, accuracy

Accuracy is against the reference draws (``summary.json``), over every scalar quantity
the reference has: ``mean err`` = max |mean - ref mean| / ref sd, ``sd ratio`` = the
ratio sd / ref sd farthest from 1 (as ``x`` or ``1/x``, whichever is > 1). Pathfinder's
reference points in the paper's evaluation are the same posteriordb posteriors.

With ``--nuts``, NUTS (4 chains, Stan's defaults, ``--warmup`` iterations of warmup,
1000 draws) is run twice per posterior - from uniform(-2, 2) inits with the diag_e
metric, and from ``pf.inits(4)`` with ``metric="dense_e", inv_metric=
pf.inv_metric_estimate("dense_e")`` - and the table gives the leapfrog steps of warmup
(gradient evaluations), warmup iterations at the maximum tree depth, and the worst
|z| of the means against the reference.

No peer column: the Python Pathfinders (pymc-extras' ``fit(method="pathfinder")``,
BlackJAX's ``vi.pathfinder``) are not in the ``bench`` extra; the accuracy columns
compare with Stan's own long NUTS runs instead, as the Pathfinder paper does.

Run:  python benchmarks/pathfinder.py [--quick] [--only NAME ...] [--nuts]
      [--warmup N] [--seed N]
      (--quick: 300 draws, 2 paths; gp_pois_regr is slow - skip it with --only)
"""

import argparse
import importlib.util
import json
import pathlib
import sys
import time
import warnings

import blas_threads  # noqa: F401,E402  (one BLAS thread per process; before numpy)
from _common import print_head  # noqa: E402

import numpy as np  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
if importlib.util.find_spec("stanlite") is None:     # a checkout, not installed
    sys.path.insert(0, str(REPO))

import posteriordb_models as pdbm  # noqa: E402
from posteriordb import PDB, element_draws  # noqa: E402

SEED = 20240501


def accuracy(fit, refs):
    """(max |mean - ref| / ref sd, the sd ratio farthest from 1, its quantity)."""
    worst_m, worst_s, where = 0.0, 1.0, None
    for name, ref in refs.items():
        x = element_draws(fit, name)
        sd = float(ref["sd"])
        if not sd > 0:
            continue
        m = abs(float(x.mean()) - float(ref["mean"])) / sd
        r = float(x.std(ddof=1)) / sd if x.size > 1 else float("nan")
        rr = max(r, 1 / r) if r > 0 else float("inf")
        if m > worst_m:
            worst_m = m
        if not rr <= worst_s:
            worst_s, where = rr, name
    return worst_m, worst_s, where


def nuts_z(fit, refs):
    from posteriordb import _arviz, compare
    az = _arviz()
    return max(compare(element_draws(fit, n), ref, None, az)[0] for n, ref in refs.items())


def warmup_cost(fit):
    ws = [s.warmup_stats for s in fit.chain_states]
    return (int(sum(np.sum(w["n_leapfrog__"]) for w in ws)),
            int(sum(np.sum(np.asarray(w["treedepth__"]) >= fit.max_treedepth) for w in ws)))


def run_posterior(folder, draws, paths, seed, nuts, warmup):
    summary = json.loads((folder / "summary.json").read_text())
    refs = summary["params"]
    model = pdbm.build(folder.name, folder / "data.json")
    row = dict(name=folder.name, dim=model.dim)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # k-hat / convergence: in the row
        t0 = time.perf_counter()
        opt = model.optimize(seed=seed)
        row["opt"] = (time.perf_counter() - t0, opt.n_evals, opt.converged)
        t0 = time.perf_counter()
        try:
            lap = model.laplace(draws=draws, seed=seed)
            row["lap"] = (time.perf_counter() - t0, lap.pareto_k, *accuracy(lap, refs))
        except (ValueError, ArithmeticError) as e:              # not negative definite
            row["lap"] = ("failed", "-H not pos. definite"
                          if "not negative definite" in str(e) else type(e).__name__)
        t0 = time.perf_counter()
        pf = model.pathfinder(seed=seed, num_paths=paths, num_draws=draws, progress=False)
        row["pf"] = (time.perf_counter() - t0, pf.extras["n_grad_evals"],
                     pf.extras["n_lp_evals"], pf.pareto_k, *accuracy(pf, refs))
        if nuts:
            kw = dict(chains=4, draws=1000, warmup=warmup, seed=seed, progress=False,
                      save_warmup=True)
            t0 = time.perf_counter()
            a = model.sample(**kw)
            ta = time.perf_counter() - t0
            t0 = time.perf_counter()
            b = model.sample(init=pf.inits(4), metric="dense_e",
                             inv_metric=pf.inv_metric_estimate("dense_e"), **kw)
            tb = time.perf_counter() - t0
            row["nuts"] = ((ta, *warmup_cost(a), nuts_z(a, refs)),
                           (tb, *warmup_cost(b), nuts_z(b, refs)))
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--nuts", action="store_true", help="also NUTS warmup from Pathfinder")
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=SEED)
    args = ap.parse_args(argv)
    if not PDB.is_dir():
        print(f"posteriordb reference posteriors not found at {PDB} (../shared beside "
              "the checkout); nothing to compare, skipping.")
        return []
    draws, paths = (300, 2) if args.quick else (1000, 4)
    folders = sorted(p for p in PDB.iterdir() if (p / "summary.json").is_file()
                     and p.name in pdbm.POSTERIORS and p.name not in pdbm.SKIPPED)
    if args.only:
        folders = [p for p in folders if any(o in p.name for o in args.only)]
    rows = []
    for folder in folders:
        print(f"  {folder.name} ...", file=sys.stderr, flush=True)
        rows.append(run_posterior(folder, draws, paths, args.seed, args.nuts, args.warmup))
    print_table(rows, draws, paths, args)
    return rows


def _f(v, fmt):
    return v if isinstance(v, str) else format(v, fmt)


def print_table(rows, draws, paths, args):
    w = max([len(r["name"]) for r in rows] + [9])
    print(f"optimize / laplace ({draws} draws) / pathfinder ({paths} paths, {draws} draws) "
          f"vs posteriordb references, seed {args.seed}")
    print("mean err = max |mean - ref| / ref sd;  sd ratio = worst of sd/ref sd, ref "
          "sd/sd")
    head = (f"{'posterior':<{w}} {'d':>3} | {'opt s':>6} {'grads':>5} | {'lap s':>6} "
            f"{'k':>5} {'mean err':>8} {'sd ratio':>8} | {'pf s':>6} {'grads':>6} "
            f"{'lp evals':>8} {'k':>5} {'mean err':>8} {'sd ratio':>8}")
    print_head(head)
    for r in rows:
        ot, og, oc = r["opt"]
        lap = r["lap"]
        if lap[0] == "failed":
            ls = f"{'failed: ' + lap[1]:<30}"[:30]
        else:
            ls = (f"{lap[0]:>6.2f} {lap[1]:>5.2f} {lap[2]:>8.2f} {lap[3]:>8.2f}")
        pt, pg, pl, pk, pm, psr, _ = r["pf"]
        print(f"{r['name']:<{w}} {r['dim']:>3} | {ot:>6.2f} {og:>5d}{'' if oc else '*'} | "
              f"{ls} | {pt:>6.2f} {pg:>6d} {pl:>8d} {pk:>5.2f} {pm:>8.2f} {psr:>8.2f}")
    if any(not r["opt"][2] for r in rows):
        print("* optimize did not converge")
    if any("nuts" in r for r in rows):
        print()
        print(f"NUTS, 4 chains x ({args.warmup} warmup + 1000 draws): warmup leapfrog "
              "steps, warmup iterations at max tree depth, worst |z| of the means vs the "
              "reference")
        head = (f"{'posterior':<{w}} | {'random inits, diag_e':^30} | "
                f"{'Pathfinder inits + dense_e metric':^34}")
        print(head)
        sub = (f"{'':<{w}} | {'s':>6} {'leapfrogs':>10} {'maxdepth':>8} {'|z|':>4} | "
               f"{'s':>6} {'leapfrogs':>10} {'maxdepth':>8} {'|z|':>4}   ratio")
        print(sub)
        print("-" * len(sub))
        for r in rows:
            if "nuts" not in r:
                continue
            (ta, la, da, za), (tb, lb, db, zb) = r["nuts"]
            print(f"{r['name']:<{w}} | {ta:>6.1f} {la:>10d} {da:>8d} {za:>4.1f} | "
                  f"{tb:>6.1f} {lb:>10d} {db:>8d} {zb:>4.1f}   {la / max(lb, 1):>5.1f}x")


if __name__ == "__main__":
    main()
