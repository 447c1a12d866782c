"""NUTS against posteriordb's reference posteriors: z-scores of means and quantiles.

For every posterior in ``../shared/posteriordb`` (beside the checkout) that stanlite
can express, the script builds the model (zoo models where they are the same
posterior, else ``benchmarks/posteriordb_models.py``) with the posterior's
``data.json``, samples it with plain NUTS (Stan's defaults: diag_e metric,
adapt_delta 0.8, max_treedepth 10; 4 chains, 1000 warmup + 1000 draws, fixed seed)
and compares every scalar quantity of the reference draws (``summary.json``) with
ours:

  mean       z = |mean - ref_mean| / sqrt(mcse^2 + pdb_mcse_mean^2)
             (mcse: ArviZ's MCSE of our mean; pdb_mcse_mean: posteriordb's)
  quantiles  the 5%, 50% and 95% quantiles,
             z = |q - ref_q| / sqrt(mcse_q^2 + ref_mcse_q^2), where mcse_q is ArviZ's
             ``mcse(method="quantile")`` of our draws and the reference's quantile
             MCSE is derived from ours by the ratio of effective sample sizes,
             ref_mcse_q = mcse_q * sqrt(ess_q / ess_ref) (ess_q: ArviZ's quantile ESS
             of our draws; ess_ref: the reference's tail ESS for 5%/95%, bulk ESS for
             the median, from its diagnostics, else its number of draws).

Columns: posterior, number of scalar quantities compared, worst |z| of the means and
of the quantiles (and which quantity), divergent transitions after warmup, wall time
of ``model.sample``, and the verdict:

  PASS   every |z| < 4 and no divergences
  WARN   every |z| < 4, but the sampler reported divergences (its diagnostics are
         printed below the table: a pass the user should not trust blindly)
  FLAG   some |z| >= 4

Posteriordb stores some derived quantities (``theta`` of the non-centred eight
schools): the models report them as transformed parameters, compared like the rest.
``one_comp_mm_elim_abs`` solves its ODE with ``sl.ode_bdf`` at rel_tol = abs_tol =
1e-6 (each gradient integrates the state and its three sensitivities): it is the
slowest posterior here. Without ``../shared`` the script says so and exits cleanly.

Run:  python benchmarks/posteriordb.py [--quick] [--only NAME ...] [--seed N]
                                      [--warmup N] [--draws N]
                                      [--reference-control]
      (--quick: 4 chains x 300 warmup + 300 draws, a smoke run;
       --reference-control: the reference runs' adapt_delta / max_treedepth, e.g.
       0.95 for eight schools, 0.99 and 15 for gp_pois_regr, instead of Stan's
       defaults)
"""

import argparse
import importlib.util
import json
import math
import pathlib
import re
import sys
import time
import warnings

import blas_threads  # noqa: E402,F401  (one BLAS thread per process; before numpy)
from _common import print_head  # noqa: E402

import numpy as np  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
if importlib.util.find_spec("stanlite") is None:     # a checkout, not installed
    sys.path.insert(0, str(REPO))

import posteriordb_models as pdbm  # noqa: E402

PDB = REPO.parent / "shared" / "posteriordb"
SEED = 20240501
THRESHOLD = 4.0
QUANTILES = ((0.05, "q05"), (0.5, "median"), (0.95, "q95"))


def _arviz():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)   # arviz's refactor notice
        import arviz
    return arviz


def _scalar(v):
    return float(np.ravel(np.asarray(v, dtype=float))[0])


# ------------------------------------------------------------------------------------
# comparing one quantity
# ------------------------------------------------------------------------------------
_ELEMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:\[([0-9, ]+)\])?$")


def element_draws(fit, name):
    """Draws ``(chains, draws)`` of a Stan-style element name (``theta[3]``, ``L[2,1]``)."""
    m = _ELEMENT.match(name)
    if m is None:
        raise KeyError(f"cannot parse the quantity name {name!r}")
    base, idx = m.group(1), m.group(2)
    v = fit[base]
    if idx is None:
        return v if v.ndim == 2 else v.reshape(v.shape[0], v.shape[1])
    ix = tuple(int(i) - 1 for i in idx.split(","))
    return v[(slice(None), slice(None)) + ix]


def reference_ess(summary):
    """``{name: (bulk, tail)}`` of the reference draws' ESS (empty if not stored)."""
    diag = summary.get("reference_diagnostics") or {}
    names = (diag.get("diagnostic_information") or {}).get("names") or []
    bulk = diag.get("effective_sample_size_bulk") or []
    tail = diag.get("effective_sample_size_tail") or []
    out = {}
    for i, n in enumerate(names):
        b = bulk[i] if i < len(bulk) else None
        t = tail[i] if i < len(tail) else None
        out[n] = (b, t)
    return out


def compare(x, ref, ess_ref, az):
    """z-scores of our draws ``x`` (chains, draws) against one reference entry:
    ``(z_mean, {q-key: z})``."""
    mean = float(x.mean())
    if np.ptp(x) == 0:
        mcse = 0.0
    else:
        mcse = _scalar(az.mcse(x, method="mean"))
    ref_se = float(ref.get("pdb_mcse_mean") or ref.get("naive_se_mean") or 0.0)
    z_mean = abs(mean - ref["mean"]) / max(math.sqrt(mcse ** 2 + ref_se ** 2), 1e-300)
    n_ref = float(ref.get("n_draws") or 10000)
    zq = {}
    for p, key in QUANTILES:
        if key not in ref:
            continue
        q = float(np.quantile(x, p))
        se = _scalar(az.mcse(x, method="quantile", prob=p))
        ess_q = _scalar(az.ess(x, method="quantile", prob=p))
        bulk, tail = ess_ref if ess_ref else (None, None)
        e_ref = (bulk if p == 0.5 else tail) or n_ref
        se_ref = se * math.sqrt(max(ess_q, 1.0) / max(float(e_ref), 1.0))
        zq[key] = abs(q - ref[key]) / max(math.sqrt(se ** 2 + se_ref ** 2), 1e-300)
    return z_mean, zq


def diagnose_text(fit):
    """``fit.diagnose()``; if that fails, the divergence count in the same words."""
    try:
        return fit.diagnose()
    except Exception as e:                      # noqa: BLE001 - reported in the output
        nd = int(np.sum(fit["divergent__"]))
        n = fit.num_chains * fit.num_draws
        return (f"[fit.diagnose() raised {type(e).__name__}: {e}]\n"
                f"{nd} of {n} transitions ({100 * nd / max(n, 1):.1f}%) ended with a "
                "divergence.")


# ------------------------------------------------------------------------------------
# one posterior
# ------------------------------------------------------------------------------------
def reference_control(summary):
    """The reference run's ``adapt_delta`` / ``max_treedepth`` (Stan's defaults where
    it does not say)."""
    args = (summary.get("reference_inference") or {}).get("method_arguments") or {}
    ctl = args.get("control") or {}
    return {"adapt_delta": float(ctl.get("adapt_delta", 0.8)),
            "max_treedepth": int(ctl.get("max_treedepth", 10))}


def run_posterior(folder, draws, warmup, seed, az, ref_control=False):
    name = folder.name
    summary = json.loads((folder / "summary.json").read_text())
    refs = summary["params"]
    ess_ref = reference_ess(summary)
    model = pdbm.build(name, folder / "data.json")
    control = reference_control(summary) if ref_control else {}
    t0 = time.perf_counter()
    fit = model.sample(chains=4, draws=draws, warmup=warmup, seed=seed, progress=False,
                       **control)
    elapsed = time.perf_counter() - t0
    worst_mean = (0.0, None)
    worst_q = (0.0, None)
    for pname, ref in refs.items():
        x = element_draws(fit, pname)
        zm, zq = compare(x, ref, ess_ref.get(pname), az)
        if not math.isfinite(zm) or zm > worst_mean[0]:
            worst_mean = (zm, pname)
        for key, z in zq.items():
            if not math.isfinite(z) or z > worst_q[0]:
                worst_q = (z, f"{pname} {key}")
    div = int(np.sum(fit["divergent__"]))
    worst = max(worst_mean[0], worst_q[0])
    if not (worst < THRESHOLD):
        verdict = "FLAG"
    elif div:
        verdict = "WARN"
    else:
        verdict = "PASS"
    return dict(name=name, n=len(refs), dim=model.dim, z_mean=worst_mean, control=control,
                z_q=worst_q, div=div, time=elapsed, verdict=verdict,
                diagnose=diagnose_text(fit) if (div or verdict != "PASS") else None)


# ------------------------------------------------------------------------------------
# the table
# ------------------------------------------------------------------------------------
def run(quick=False, only=None, seed=SEED, root=None, ref_control=False, draws=None,
        warmup=None):
    root = pathlib.Path(root) if root else PDB
    if not root.is_dir():
        print(f"posteriordb reference posteriors not found at {root} "
              "(../shared beside the checkout); nothing to compare, skipping.")
        return []
    draws = draws or (300 if quick else 1000)
    warmup = warmup or (300 if quick else 1000)
    az = _arviz()
    folders = sorted(p for p in root.iterdir() if (p / "summary.json").is_file())
    if only:
        folders = [p for p in folders if any(o in p.name for o in only)]
    settings = ("the reference runs' adapt_delta/max_treedepth" if ref_control else
                "adapt_delta 0.8, max_treedepth 10")
    print(f"posteriordb: {len(folders)} posteriors in {root}; NUTS (diag_e, {settings}), "
          f"4 chains x ({warmup} warmup + {draws} draws), seed {seed}; "
          f"pass: every |z| < {THRESHOLD:g}", file=sys.stderr)
    rows = []
    for folder in folders:
        name = folder.name
        if name in pdbm.SKIPPED:
            rows.append(dict(name=name, skipped=f"skipped: {pdbm.SKIPPED[name]}"))
        elif name not in pdbm.POSTERIORS:
            rows.append(dict(name=name, skipped="skipped: no stanlite model"))
        else:
            r = run_posterior(folder, draws, warmup, seed, az, ref_control)
            rows.append(r)
            print(f"  {name}: {r['verdict']} ({r['time']:.1f} s)", file=sys.stderr)
    print_table(rows, draws, warmup, seed, settings)
    return rows


def print_table(rows, draws, warmup, seed, settings):
    w = max([len(r["name"]) for r in rows] + [9])
    print(f"posteriordb reference posteriors vs stanlite NUTS ({settings}): 4 chains x "
          f"({warmup} warmup + {draws} draws), seed {seed}; "
          "z = |ours - reference| / combined MCSE")
    head = (f"{'posterior':<{w}} {'n':>3} {'max|z| mean':>11} {'max|z| q5/50/95':>15} "
            f"{'worst quantity':<22} {'div':>5} {'time s':>7}  verdict")
    print_head(head)
    for r in rows:
        if "skipped" in r:
            print(f"{r['name']:<{w}} {'':>3} {'':>11} {'':>15} {'':<22} {'':>5} {'':>7}  "
                  f"{r['skipped']}")
            continue
        zm, zq = r["z_mean"], r["z_q"]
        worst = zm[1] + " mean" if zm[0] >= zq[0] else zq[1]
        print(f"{r['name']:<{w}} {r['n']:>3} {zm[0]:>11.2f} {zq[0]:>15.2f} "
              f"{worst or '':<22} {r['div']:>5} {r['time']:>7.1f}  {r['verdict']}")
    done = [r for r in rows if "skipped" not in r]
    counts = {v: sum(r["verdict"] == v for r in done) for v in ("PASS", "WARN", "FLAG")}
    print(f"\n{counts['PASS']} PASS, {counts['WARN']} WARN (divergences), "
          f"{counts['FLAG']} FLAG (|z| >= {THRESHOLD:g}), "
          f"{len(rows) - len(done)} skipped")
    for r in done:
        if r["diagnose"]:
            print(f"\n{r['name']}: fit.diagnose()")
            for line in r["diagnose"].splitlines():
                print(f"  {line}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 300 warmup + 300 draws per chain")
    ap.add_argument("--only", nargs="+", metavar="NAME",
                    help="only posteriors whose folder name contains one of these")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--draws", type=int, default=None, help="draws per chain (default 1000)")
    ap.add_argument("--warmup", type=int, default=None,
                    help="warmup iterations per chain (default 1000)")
    ap.add_argument("--root", help=f"posteriordb folder (default {PDB})")
    ap.add_argument("--reference-control", action="store_true",
                    help="sample with the reference runs' adapt_delta and max_treedepth "
                         "(e.g. 0.99 and 15 for gp_pois_regr) instead of Stan's defaults")
    a = ap.parse_args()
    run(a.quick, a.only, a.seed, a.root, a.reference_control, a.draws, a.warmup)
