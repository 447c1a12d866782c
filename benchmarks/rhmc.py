"""Riemannian HMC (SoftAbs metric, implicit leapfrog, NUTS trajectories) against NUTS
with a diagonal metric, on the posteriors where the geometry decides.

  funnel10 / funnel51   Neal's funnel, v ~ N(0, 3), x_i ~ N(0, e^(v/2)), d = 10 and
                        51 (Betancourt 2013's 50 + 1). The marginal of v is exactly
                        N(0, 3): its mean and sd are tested by z-scores (estimate -
                        truth) / MCSE, and the neck by the fraction of draws below
                        v = -5 (exact 4.78%) and the 5% quantile (exact -4.93).
  banana                x1 ~ N(0, 1), x2 | x1 ~ N(2 (x1^2 - 1), 0.3): E = (0, 0),
                        Var = (1, 8.09); z-scores of both means and sds.
  logistic              Bayesian logistic regression (Girolami & Calderhead 2011's
                        example; the zoo's LogisticRegression, N = 200, K = 3,
                        simulated), checked against the NUTS run of the same script
                        (z-scores of the differences of the means, both MCSEs).
  gauss3 / gauss10       correlated Gaussians (d = 3: the RHMC tests' N(mu, C); d =
                        10: correlation 0.5, scales e^U(-1, 1), a fixed seed): the
                        metric is exact, so the trajectory floor "auto" should stay
                        0; z-scores of every mean against the truth (max |z|).
  pk_ss                 the zoo's pk_steady_state: trough concentrations at the
                        steady state of a repeated oral dose, the steady state solved
                        by the algebraic-solver super node inside the log density -
                        RHMC differentiates through it three times (Stan's SoftAbs
                        cannot: its algebra_solver has no forward mode); checked
                        against NUTS like logistic.

Columns: divergences after warmup; ESS = bulk ESS (ArviZ) of v (funnels) or the
minimum over the parameters; ESS/s over the whole run (warmup + sampling, chains run
one after the other in this process, CPU seconds); ESS per leapfrog step (warmup +
sampling); for NUTS a leapfrog step is one gradient, for RHMC it is one gradient
plus the Hessians and third-order sweeps counted in the second table.

Second table (RHMC only): what one implicit leapfrog step costs - Hessians
(position fixed point, forward-over-reverse), recordings of the Hessian for the
third-order sweeps, sweeps (``grad tr(M A)`` evaluations: momentum fixed point and
the explicit half step), eigendecompositions, fixed-point iterations, fixed points
solved again from the plain start after a predictor failed (``restart``) - and the split
of the time between Hessians (including the recordings), eigendecompositions
(including the SoftAbs transform and J), sweeps, and the rest (matrix algebra,
gradient, tree), from ``stanlite.samplers.rhmc.PROFILE``. Steps made in one compiled
call (``samplers/rhmc_step_jit.py``: the default where the model's programs run in the
tape interpreter) count their evaluations but not their time split: ``kern%`` is the
share of steps made so, ``hand`` those it handed back to the Python step, and their
time is in ``fixpt%``. ``x grad`` is an implicit step's CPU time over one NUTS
gradient's (the model's compiled gradient at the chain's last point, timed after the
run in the same process).

BLAS: one thread. The machine is shared: every time is noisy; the draws are
deterministic for a seed.

Every run is at the samplers' defaults (RHMC: alpha from the Hessian, adapt_delta
0.99, half the warmup's averaged step size, the trajectory floor ``min_int_time``
"auto", chosen at warmup windows' ends) unless --alpha / --adapt-delta /
--min-int-time say otherwise (--min-int-time auto 0 8: one RHMC run for each, in
the same process; the RHMC rows' checks then say "steps/tr" and the floors the
chains used); 4 chains x (1000 + 1000), the targets of issue 24. NUTS also at other
adapt_delta with --nuts-delta 0.8 0.99.

Run:  python benchmarks/rhmc.py [--quick] [--cases funnel10 funnel51 banana logistic pk_ss]
                                [--samplers nuts rhmc] [--nuts-delta 0.8 0.99]
                                [--chains 4] [--warmup 1000] [--draws 1000]
                                [--alpha 30] [--adapt-delta 0.9]
                                [--nuts-reference-draws 25000]

--nuts-reference-draws N: before a funnel's runs, NUTS at each --nuts-delta is run
long (4 chains x (1000 + N) on each of three seeds) and its v checked against the
exact N(0, 3) with MCSEs that resolve the neck; the closing "ESS/s for v" lines count
NUTS's figure only where that verdict is "unbiased" (issue 24's target). Without it
they fall back on the short run's z-tests, which a NUTS chain that misses the neck
passes when its ESS is small (4 x (1000 + 1000) at 0.99: P(v < -5) 1.7% against
4.78%, z -0.9 from an ESS of 54).
"""

import argparse
import math
import time
import warnings

import blas_threads  # one BLAS thread per process: imported first, for its effect

del blas_threads

import numpy as np  # noqa: E402

from stanlite.models.logistic_regression import LogisticRegression  # noqa: E402
from stanlite.models.neal_funnel import NealFunnel  # noqa: E402
from stanlite.models.synthetic import Banana, PrecisionGaussian  # noqa: E402
from stanlite.samplers import rhmc  # noqa: E402

CASES = ("funnel10", "funnel51", "banana", "gauss3", "gauss10", "logistic", "pk_ss")


def _gauss_model(d):
    """``(model, mu, C)``: N(mu, C) written as the quadratic form (a constant Hessian:
    SoftAbs's metric is the exact precision where alpha does not lift it)."""
    if d == 3:
        C = np.array([[1.0, 0.6, -0.2], [0.6, 2.0, 0.3], [-0.2, 0.3, 0.5]])
        mu = np.array([1.0, -2.0, 0.5])
    else:
        rs = np.random.default_rng(0)
        sd = np.exp(rs.uniform(-1.0, 1.0, d))
        C = (0.5 * np.eye(d) + 0.5) * np.outer(sd, sd)
        mu = rs.normal(size=d)
    return PrecisionGaussian(D=d, mu=mu, P=np.linalg.inv(C)), mu, C
SEED = 20240917


def make_model(case):
    if case == "funnel10":
        return NealFunnel(D=10)
    if case == "funnel51":
        return NealFunnel(D=51)
    if case == "banana":
        return Banana(b=2.0, s=0.3)
    if case in ("gauss3", "gauss10"):
        return _gauss_model(int(case[5:]))[0]
    if case == "logistic":
        import stanlite.models as zoo
        m = zoo.get("logistic_regression")
        assert isinstance(m, LogisticRegression)
        return m
    if case == "pk_ss":
        import stanlite.models as zoo
        return zoo.get("pk_steady_state")
    raise ValueError(case)


def _az():
    import arviz as az
    return az


def ess_bulk(x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(np.ravel(_az().ess(np.asarray(x), method="bulk"))[0])


def _ess_mean(x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(np.ravel(_az().ess(np.asarray(x), method="mean"))[0])


def mcse(x, method):
    """Monte Carlo standard error of the mean or of the sd of ``x`` (chains, draws):
    sd / sqrt(ESS), and for the sd the delta method on the variance's MCSE."""
    x = np.asarray(x, dtype=float)
    if method == "mean":
        return float(x.std() / math.sqrt(_ess_mean(x)))
    d2 = (x - x.mean()) ** 2
    return float(d2.std() / math.sqrt(_ess_mean(d2)) / (2.0 * x.std()))


def run(case, sampler, chains, warmup, draws, alpha, adapt_delta, seed=SEED,
        min_int_time=None):
    """One run; ``alpha``, ``adapt_delta`` and ``min_int_time`` None: the sampler's
    defaults."""
    m = make_model(case)
    kw = dict(chains=chains, warmup=warmup, draws=draws, seed=seed, progress=False,
              parallel=False, save_warmup=True)
    if adapt_delta is not None:
        kw["adapt_delta"] = adapt_delta
    if sampler == "rhmc":
        kw["sampler"] = "rhmc"
        opts = {}
        if alpha is not None:
            opts["alpha"] = alpha
        if min_int_time is not None:
            opts["min_int_time"] = min_int_time
        if opts:
            kw["sampler_options"] = opts
    rhmc.reset_profile()
    c0, w0 = time.process_time(), time.perf_counter()
    fit = m.sample(**kw)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    prof = dict(rhmc.PROFILE)
    steps = sum(sum(s.warmup_stats["n_leapfrog__"]) + sum(s.stats["n_leapfrog__"])
                for s in fit.chain_states)
    div = int(np.sum(fit.sampler_stats["divergent__"]))
    delta = float(fit.chain_states[0].adapt_delta)
    alphas = [s.sampler_options["alpha"] for s in fit.chain_states] \
        if sampler == "rhmc" else None
    floors = [s.sampler_options["min_int_time"] for s in fit.chain_states] \
        if sampler == "rhmc" else None
    # steps a sampling transition
    per_tr = float(np.mean(fit.sampler_stats["n_leapfrog__"]))
    return dict(fit=fit, cpu=cpu, wall=wall, prof=prof, steps=steps, div=div,
                eps=float(np.mean(fit.step_size)), model=m, delta=delta, alphas=alphas,
                floors=floors, per_tr=per_tr)


def gradient_cost(model, q, n=2000):
    """CPU seconds of one ``log_density_gradient`` (the model's compiled gradient,
    as NUTS calls it) at ``q``: the unit an implicit step's cost is quoted in."""
    model.log_density_gradient(q)
    t0 = time.process_time()
    for _ in range(n):
        model.log_density_gradient(q)
    return (time.process_time() - t0) / n


def funnel_checks(fit):
    v = fit["v"]
    mean, sd = v.mean(), v.std()
    z_mean = mean / mcse(v, "mean")
    z_sd = (sd - 3.0) / mcse(v, "sd")
    ind = (v < -5.0).astype(float)
    below = float(ind.mean())
    # P(v < -5)'s MCSE from the exact p (4.78%) and the indicator's ESS (v's where
    # the indicator is constant)
    p = 0.5 * math.erfc(5.0 / 3.0 / math.sqrt(2.0))
    ess_ind = _ess_mean(ind) if 0 < ind.sum() < ind.size else ess_bulk(v)
    z_below = (below - p) / math.sqrt(p * (1 - p) / ess_ind)
    q5 = float(np.quantile(v, 0.05))
    return dict(ess=ess_bulk(v), mean=mean, sd=sd, z_mean=z_mean, z_sd=z_sd,
                below=below, z_below=z_below, q5=q5, vmin=float(v.min()))


#: the exact neck statistics of v ~ N(0, 3): P(v < -5) and the 5% quantile
P_BELOW = 0.5 * math.erfc(5.0 / 3.0 / math.sqrt(2.0))
Q5 = -3.0 * 1.6448536269514722


def neck_stats(v):
    """v's mean, sd, P(v < -5) and 5% quantile, each with its MCSE (ArviZ's ``mcse``
    of the mean, the 0.05 quantile and the indicator ``v < -5``'s mean; the sd's by
    :func:`mcse`, ArviZ 0.23's ``method="sd"`` failing under this numpy) and its
    z-score against the exact N(0, 3); ``v`` (chains, draws)."""
    az = _az()
    v = np.asarray(v, dtype=float)
    ind = (v < -5.0).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        def se_of(x, **kw):
            return float(np.ravel(az.mcse(x, **kw))[0])
        se = {"mean": se_of(v, method="mean"), "sd": mcse(v, "sd"),
              "below": se_of(ind, method="mean") if 0 < ind.sum() < ind.size
              else math.nan,
              "q5": se_of(v, method="quantile", prob=0.05)}
    est = {"mean": float(v.mean()), "sd": float(v.std(ddof=1)),
           "below": float(ind.mean()), "q5": float(np.quantile(v, 0.05))}
    truth = {"mean": 0.0, "sd": 3.0, "below": P_BELOW, "q5": Q5}
    z = {k: (est[k] - truth[k]) / se[k] if se[k] > 0 else math.nan for k in est}
    return dict(est=est, se=se, z=z, ess=ess_bulk(v), n=v.size)


def nuts_reference(case, draws, seeds, chains=4, warmup=1000, adapt_delta=0.99,
                   z_max=3.0):
    """Whether NUTS at ``adapt_delta`` is unbiased on a funnel: ``chains`` x
    (``warmup`` + ``draws``) per seed, long enough that the MCSEs resolve the neck
    (the 4 x (1000 + 1000) run's P(v < -5) of 1.7% against 4.78% passed its z-test
    only because its ESS was 54). Verdict over all seeds' chains pooled: biased when
    any of v's mean, sd, P(v < -5), q5 is more than ``z_max`` MCSEs from the exact
    value; unbiased when none is and P(v < -5)'s MCSE is at most a quarter of the
    exact 4.78% (else undecided: too short). -> (verdict, rows) with one row per
    seed and the pooled one."""
    rows, vs = [], []
    for seed in seeds:
        r = run(case, "nuts", chains, warmup, draws, None, adapt_delta, seed=seed)
        v = np.asarray(r["fit"]["v"], dtype=float)
        vs.append(v)
        rows.append((str(seed), r["div"], r["eps"], r["cpu"], neck_stats(v)))
        print(f"  done NUTS reference seed {seed}: {r['cpu']:.0f} s cpu", flush=True)
    pooled = neck_stats(np.concatenate(vs, axis=0))
    rows.append(("pooled", sum(x[1] for x in rows), math.nan,
                 sum(x[3] for x in rows), pooled))
    bad = [k for k, z in pooled["z"].items() if not abs(z) <= z_max]
    se_below = pooled["se"]["below"]
    if bad:
        verdict = "biased (" + ", ".join(f"{k} z {pooled['z'][k]:+.1f}" for k in bad) + ")"
    elif not se_below <= 0.25 * P_BELOW:
        # a run too short to see the neck passes every z-test: say so
        verdict = (f"undecided (every |z| <= {z_max:g}, but P(v<-5)'s MCSE "
                   f"{100 * se_below:.2f}% cannot resolve the neck's {100 * P_BELOW:.2f}%)")
    else:
        verdict = f"unbiased (every |z| <= {z_max:g})"
    return verdict, rows


def print_reference(case, delta, verdict, rows):
    print(f"NUTS reference, {case} at adapt_delta {delta:.2f}: estimate (MCSE) [z vs "
          f"exact N(0, 3)]")
    print(f"{'seed':>9} {'div':>4} {'ESS':>6}  {'mean':>22} {'sd':>22} "
          f"{'P(v<-5) % (4.78)':>24} {'q5 (-4.93)':>22}")
    for seed, div, _eps, _cpu, st in rows:
        e, s, z = st["est"], st["se"], st["z"]
        cols = []
        for k, scale in (("mean", 1), ("sd", 1), ("below", 100), ("q5", 1)):
            cols.append(f"{scale * e[k]:+7.3f} ({scale * s[k]:.3f}) [{z[k]:+5.1f}]")
        print(f"{seed:>9} {div:4d} {st['ess']:6.0f}  {cols[0]:>22} {cols[1]:>22} "
              f"{cols[2]:>24} {cols[3]:>22}")
    print(f"verdict: NUTS at {delta:.2f} is {verdict}")


def banana_checks(fit):
    x = fit["x"]
    out = {"ess": min(ess_bulk(x[..., j]) for j in range(2))}
    zs = []
    for j, var in ((0, 1.0), (1, 0.3 ** 2 + 2 * 2.0 ** 2)):
        xj = x[..., j]
        zs.append(xj.mean() / mcse(xj, "mean"))
        zs.append((xj.std() - math.sqrt(var)) / mcse(xj, "sd"))
    out["z"] = zs
    return out


def flat_params(fit, names):
    """Every scalar parameter as a (chains, draws) array (``names``: Stan-style
    element names, ``beta[1]``...)."""
    out = []
    for k in dict.fromkeys(n.split("[")[0] for n in names):
        a = fit[k]
        out.extend([a] if a.ndim == 2 else [a[..., j] for j in range(a.shape[2])])
    return out


def ess_comparison(rows, checks, verdicts):
    """One line per funnel run with both samplers: RHMC's ESS/s for v against each
    NUTS run's, and whether NUTS's figure counts - by the long reference run's
    verdict where there is one (``--nuts-reference-draws``), else by the short
    run's own z-tests (mean, sd, P(v < -5) within 3 MCSE), which a chain that
    misses the neck can pass when its ESS is small (noted so)."""
    out = []
    for case in dict.fromkeys(r[0] for r in rows if r[0].startswith("funnel")):
        mine = [r for r in rows if r[0] == case]
        rh = [r for r in mine if r[1].startswith("rhmc")]
        if not rh:
            continue
        for r in mine:
            if r[1] != "nuts":
                continue
            delta, ess_s = r[5], r[9]
            verdict = verdicts.get((case, delta))
            if verdict is not None:
                counts = verdict.startswith("unbiased")
                why = f"long reference run: {verdict}"
            else:
                chk = checks.get((case, "nuts", delta))
                zs = (chk["z_mean"], chk["z_sd"], chk["z_below"]) if chk else ()
                counts = bool(zs) and all(abs(z) < 3 for z in zs)
                why = ("this run's z-tests only (ESS %.0f; no --nuts-reference-draws)"
                       % (chk["ess"] if chk else math.nan))
            ratio = rh[0][9] / ess_s if ess_s > 0 else math.inf
            state = "counts" if counts else "does NOT count"
            target = ("met" if ratio > 1 else "not met") if counts else \
                "met vacuously (NUTS has no unbiased figure)"
            out.append(f"{case}: RHMC {rh[0][9]:.2f} ESS/s against NUTS at {delta:.2f} "
                       f"{ess_s:.2f} (x{ratio:.3g}); NUTS's figure {state} - {why}; "
                       f"target {target}")
    return out


def fmt_z(z):
    flag = "" if abs(z) < 3 else " !"
    return f"{z:+.1f}{flag}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="1 chain x (150 warmup + 150 draws): a smoke run")
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    ap.add_argument("--samplers", nargs="+", default=["nuts", "rhmc"],
                    choices=["nuts", "rhmc"])
    ap.add_argument("--alpha", type=float, default=None,
                    help="SoftAbs alpha (default: RHMC's, chosen from the Hessian)")
    ap.add_argument("--adapt-delta", type=float, default=None,
                    help="target acceptance (default: each sampler's, 0.8 NUTS, 0.99 "
                         "RHMC)")
    ap.add_argument("--min-int-time", nargs="+", default=["auto"],
                    help="RHMC's minimum integration time, one RHMC run per value "
                         "(default: auto, RHMC's own, chosen in warmup; 0: the plain "
                         "U-turn criterion; a number: that floor)")
    ap.add_argument("--nuts-delta", type=float, nargs="+", default=[0.8],
                    help="NUTS runs at these adapt_delta (default 0.8)")
    ap.add_argument("--chains", type=int, default=None)
    ap.add_argument("--draws", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--nuts-reference-draws", type=int, default=0, metavar="N",
                    help="on the funnels, first decide whether NUTS at each "
                         "--nuts-delta is unbiased: 4 chains x (1000 + N) on each of "
                         "--nuts-reference-seeds, v's mean, sd, P(v<-5), q5 against "
                         "the exact N(0, 3) (e.g. 25000; default 0: not run, the "
                         "comparison then rests on the short run's own z-tests)")
    ap.add_argument("--nuts-reference-seeds", type=int, nargs="+",
                    default=[SEED, SEED + 1, SEED + 2])
    args = ap.parse_args()
    rows, costs = [], []
    checks = {}             # (case, sampler, adapt_delta) -> funnel_checks of the run
    verdicts = {}           # (case, adapt_delta) -> NUTS reference verdict
    floors = [None if t == "auto" else float(t) for t in args.min_int_time]
    runs = [("nuts", d, None) for d in args.nuts_delta if "nuts" in args.samplers] + \
        [("rhmc", args.adapt_delta, t) for t in floors if "rhmc" in args.samplers]
    for case in args.cases:
        ref = None
        chains = args.chains or (1 if args.quick else 4)
        warmup = args.warmup or (150 if args.quick else 1000)
        draws = args.draws or (150 if args.quick else 1000)
        if args.nuts_reference_draws and case.startswith("funnel") \
                and "nuts" in args.samplers:
            for d in args.nuts_delta:
                verdict, ref_rows = nuts_reference(case, args.nuts_reference_draws,
                                                   args.nuts_reference_seeds,
                                                   adapt_delta=d)
                verdicts[(case, d)] = verdict
                print_reference(case, d, verdict, ref_rows)
                print(flush=True)
        for sampler, delta, floor in runs:
            if sampler == "nuts":
                delta = delta or args.adapt_delta
            r = run(case, sampler, chains, warmup, draws, args.alpha, delta,
                    min_int_time=floor)
            delta, alpha = r["delta"], r["alphas"]
            fit = r["fit"]
            if case.startswith("funnel"):
                chk = funnel_checks(fit)
                extra = (f"v: mean {chk['mean']:+.2f} (z {fmt_z(chk['z_mean'])}), sd "
                         f"{chk['sd']:.2f} (z {fmt_z(chk['z_sd'])}), P(v<-5) "
                         f"{100 * chk['below']:.1f}% (z {fmt_z(chk['z_below'])}), q5 {chk['q5']:+.2f} (-4.93), "
                         f"min {chk['vmin']:+.1f}")
            elif case == "banana":
                chk = banana_checks(fit)
                extra = "z: " + ", ".join(fmt_z(z) for z in chk["z"]) + \
                    "  (mean/sd of x1, x2)"
            elif case.startswith("gauss"):
                _, mu, C = _gauss_model(int(case[5:]))
                x = fit["x"]
                zs = [(x[..., j].mean() - mu[j]) / mcse(x[..., j], "mean")
                      for j in range(mu.size)]
                zsd = [(x[..., j].std() - math.sqrt(C[j, j])) / mcse(x[..., j], "sd")
                       for j in range(mu.size)]
                chk = {"ess": min(ess_bulk(x[..., j]) for j in range(mu.size))}
                extra = (f"max |z| mean {max(abs(z) for z in zs):.1f}, sd "
                         f"{max(abs(z) for z in zsd):.1f}")
            else:
                cols = flat_params(fit, r["model"].param_names())
                chk = {"ess": min(ess_bulk(x) for x in cols)}
                means = np.array([x.mean() for x in cols])
                se = np.array([mcse(x, "mean") for x in cols])
                if ref is None:
                    ref = (means, se)
                    extra = "means " + " ".join(f"{x:+.3f}" for x in means)
                else:
                    z = (means - ref[0]) / np.sqrt(se ** 2 + ref[1] ** 2)
                    extra = "z vs NUTS: " + ", ".join(fmt_z(x) for x in z)
            label = sampler if floor is None else f"{sampler} T={floor:g}"
            if sampler == "rhmc":
                extra += f"; steps/tr {r['per_tr']:.1f}; floor " + ", ".join(
                    f"{x:.3g}" if isinstance(x, float) else str(x) for x in r["floors"])
            if alpha is not None:
                extra += "; alpha " + ", ".join(f"{x:.3g}" for x in alpha)
            rows.append((case, label, warmup, draws, chains, delta, r["eps"], r["div"],
                         chk["ess"], chk["ess"] / r["cpu"], chk["ess"] / r["steps"],
                         r["cpu"], extra))
            if case.startswith("funnel"):
                checks[(case, sampler, delta)] = chk
            if sampler == "rhmc":
                q = np.asarray(fit.chain_states[0].q, dtype=float)
                costs.append((case, r["prof"], gradient_cost(r["model"], q)))
            print(f"  done {case} {label}: {r['cpu']:.0f} s cpu, {r['div']} divergent, "
                  f"ESS {chk['ess']:.0f}; {extra}", flush=True)
    print()
    print(f"{'case':9} {'sampler':11} {'warm+draws':>10} {'delta':>5} {'eps':>6} {'div':>4} "
          f"{'ESS':>6} {'ESS/s':>7} {'ESS/step':>8} {'cpu s':>7}  checks")
    for (case, lab, w, d, c, delta, eps, div, ess, ess_s, ess_g, cpu, extra) in rows:
        print(f"{case:9} {lab:11} {f'{c}x{w}+{d}':>10} {delta:5.2f} {eps:6.3f} {div:4d} "
              f"{ess:6.0f} {ess_s:7.2f} {ess_g:8.4f} {cpu:7.0f}  {extra}")
    comparison = ess_comparison(rows, checks, verdicts)
    if comparison:
        print()
        print("ESS/s for v (issue 24: RHMC against NUTS, NUTS's figure counted only "
              "where NUTS is unbiased)")
        for line in comparison:
            print(line)
    if costs:
        print()
        print("RHMC cost per implicit leapfrog step, and the time split")
        print(f"{'case':9} {'steps':>7} {'hess':>5} {'rec':>4} {'sweeps':>6} {'eigh':>5} "
              f"{'p-it':>5} {'q-it':>5} {'fp-fail':>7} {'ms/step':>7} {'hess%':>6} "
              f"{'eigh%':>6} {'sweep%':>6} {'fixpt%':>6} {'other%':>6} {'retry':>5} "
              f"{'rescue':>6} {'irrev':>5} {'restart':>7} {'kern%':>5} {'hand':>4} "
              f"{'grad us':>7} {'x grad':>6}")
        for case, P, tg in costs:
            n = max(P["steps"], 1)
            tot = max(P["t_step"], 1e-12)
            other = tot - P["t_hessian"] - P["t_eigh"] - P["t_sweep"]
            print(f"{case:9} {P['steps']:7d} {P['hessians'] / n:5.1f} "
                  f"{P['recordings'] / n:4.1f} {P['sweeps'] / n:6.1f} {P['eighs'] / n:5.1f} "
                  f"{P['p_iterations'] / n:5.1f} {P['q_iterations'] / n:5.1f} "
                  f"{P['fp_failures']:7d} {1e3 * tot / n:7.2f} "
                  f"{100 * P['t_hessian'] / tot:6.1f} {100 * P['t_eigh'] / tot:6.1f} "
                  f"{100 * P['t_sweep'] / tot:6.1f} {100 * P['t_fixed_point'] / tot:6.1f} "
                  f"{100 * other / tot:6.1f} {P['retries']:5d} {P['rescued']:6d} "
                  f"{P['irreversible']:5d} {P['restarts']:7d} "
                  f"{100 * P['kernel_steps'] / n:5.1f} {P['handoffs']:4d} {1e6 * tg:7.1f} "
                  f"{tot / n / tg:6.0f}")


if __name__ == "__main__":
    main()
