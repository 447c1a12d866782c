"""NUTS efficiency: ESS per second of stanlite, side by side with nutpie, PyMC and NumPyro.

ESS/s = min over the parameters of the bulk ESS (ArviZ) / seconds, for 4 chains of
1000 warmup + 1000 draws (Stan's defaults everywhere: adapt_delta / target_accept
0.8, max tree depth 10), on five posteriors, the first three written the same way in
each library. Warmup adaptation: each library its own default, except that stanlite
runs the adaptation nutpie runs on the posterior (one rule, :func:`stanlite_adaptation`:
its ``adaptation="nutpie"``, from draws and gradients, and ``"nutpie-lowrank"`` where
nutpie runs its low-rank mass matrix); the row ``stanlite-stan`` is stanlite with
Stan's windowed adaptation, printed beside it:

  eight schools     non-centred: mu ~ N(0, 5), tau ~ Cauchy+(0, 5), theta_trans ~ N(0, 1),
                    y ~ N(mu + tau theta_trans, sigma)                      (diag metric)
  logistic          N=1000, D=25, simulated (seed 20240611: X ~ N(0, 1), beta ~ N(0, 0.5),
                    alpha = 0.3); alpha, beta ~ N(0, 2.5); stanlite's likelihood is one
                    ``bernoulli_logit_glm_lpmf`` node                        (diag metric)
  gauss100          x ~ N(0, S), S = D R D, R_ij = 0.9^|i-j|, D = diag of standard
                    deviations log-spaced from 0.3 to 3 (condition number of S ~1.3e4);
                    stanlite: ``multi_normal_cholesky_lpdf``                (dense metric;
                    nutpie: its low-rank modified diagonal mass matrix, its answer to
                    correlated posteriors)
  hmm_loop          an HMM forward algorithm, T=200, K=3, normal emissions, transition
                    rows simplexes; coal_loop: the coal-mining change point (T=112,
                    marginalised over the change point). Models and data in
                    ``loop_models.py`` / ``loop_data.py`` (the coal counts *simulated*:
                    the real series is not in the repository). stanlite runs the
                    Stan-style *loop* form (scalar Python loops: 1791 scalar
                    log_sum_exp terms; 12,544 scalar ``poisson_lpmf`` calls); the peers
                    their natural vectorised forms (PyMC/nutpie: ``pytensor.scan`` over t
                    for the HMM, ``cumsum`` for the change point, as a ``Potential``;
                    NumPyro: ``lax.scan`` / ``cumsum`` as a ``factor``)       (diag metric)

Each (library, posterior) runs in a fresh Python process (``--worker``), and the
seconds are counted two ways (stanlite's numba caches are warmed first by one untimed
short run, as after any earlier use of the install; its disk cache of lowered
programs is off, ``STANLITE_CACHE_DIR=off``, so that "fresh" includes recording and
lowering the model as a first use does; nutpie, PyMC and NumPyro build
and compile each model in every process, as they do for a user, with whatever caches
they keep themselves, e.g. PyTensor's compiled C modules):

  fresh     from just before the process is started to the moment the draws are
            back: interpreter start, imports, model building, every compilation or
            tracing, sampling (what a user waits for);
  excl.     excluding compilation and set-up: stanlite, the ``model.sample`` call,
            after ``model.precompile()`` (its one-time recording of the tape, the
            lowering to the interpreter and the check of the first replay against
            the eager tape: milliseconds for the vectorised models, ~0.4 s for the
            coal loop's 25k-node tape; ``sample`` would do it itself, once, before
            forking its workers) and after its compiled NUTS kernel is loaded (~0.2 s
            from numba's cache); what ``sample`` still replays, re-records (a failed
            guard) and spot-checks stays inside; nutpie, the
            ``nutpie.sample`` call (after ``compile_pymc_model``); PyMC, its own
            ``sampling_time`` (after the model's
            functions are compiled and the sampler initialised); NumPyro, the
            ``mcmc.run`` call minus the tracing/lowering/XLA-compile durations JAX
            reports through ``jax.monitoring``.

Chains use both cores where the library can: stanlite runs its chains in processes
(default), nutpie and PyMC get ``cores=2`` (PyMC's default on this machine is 1: it
assumes half the CPUs are hyperthreads), NumPyro runs float64 (``enable_x64``, like the others)
with its default ``chain_method="parallel"``, which falls back to sequential chains
with one CPU device (``--numpyro-devices 4`` gives it 4 host devices instead).

Second table, the cost of a gradient and of the sampler around it:

  grads        stanlite, nutpie and PyMC: leapfrog steps (one gradient each) over
               warmup + sampling, all chains (stanlite's from the fit with
               save_warmup=True);
               NumPyro: leapfrog
               steps of the sampling phase only (its warmup statistics are not kept)
  steps/draw   mean leapfrog steps per draw after warmup
  us/grad      every library the same way: median CPU time of its log density +
               gradient (compiled, for the peers; nutpie: the numba function its
               sampler calls, through Python) in a timed loop, at one point
  in kernel    stanlite only: the gradient inside compiled code, as the compiled
               NUTS trajectory calls it: the lowered program's ``value_grad`` in a
               numba loop over the run's 4000 distinct draws (kernel_timing.py),
               CPU time, the fastest of 20 loops (the verdict prints the median
               too); "-" when the model is not in the interpreter
  in sampler   stanlite: CPU time per call inside ``log_density_gradient`` while
               sampling (all chains; each process times its first 64 calls, then a
               random eighth, and adds the sums to shared memory every 256 calls; two
               ``process_time`` calls, ~0.6 us each, are the cost of one measurement)
  overhead     stanlite only: (CPU time of the run - CPU time in the
               gradient) / gradient evaluations, i.e. the sampler's own cost per
               leapfrog step (trajectory, U-turn checks, adaptation, bookkeeping,
               shipping the draws back), and that as a percentage of "in sampler".
               When the compiled NUTS trajectory evaluates the recording itself
               (issue 20: the interpreter called from the kernel, not through
               ``log_density_gradient``), the counter sees only the gradients that
               went through Python, so "in sampler" and "overhead" are left out
               (the row's note says so)
  CPU us/step  stanlite only: CPU time of the ``sample`` call (this process and its
               chain processes: a small run's chains run in this process) / gradient
               evaluations, everything in (gradient, sampler, spot checks,
               re-recordings, the fit's arrays)

The issue's anchor numbers (fresh / excl. ESS/s, measured on another 2-core machine)
are printed next to ours, then issue 20's targets with PASS/MISS: on every posterior
stanlite's ESS/s excl. >= nutpie's and fresh >= 2x nutpie's (both measured here), eight
schools >= 0.5x CmdStan's anchor (37,000 ESS/s, excl.) and its gradient <= 1.5 us
(judged in compiled code, "in kernel", as a C++ gradient is timed; the two upper
bounds through Python, us/grad, and per leapfrog step with everything in, CPU
us/step, are printed beside it). The machine is shared:
expect noise in every time; the ESS is deterministic for a given seed (stanlite).

BLAS: one thread per process unless the environment says otherwise.

``stanlite-stan`` (run by default) is stanlite with Stan's windowed adaptation
(``adaptation="stan"``) on every posterior; the targets are judged on the
``stanlite`` row, the Stan row's verdict is printed after them for comparison.

``stanlite-eager`` (not run unless named in ``--libs``) is stanlite on the eager tape
(``STANLITE_COMPILE=0``): the pair of rows is retaping's effect on ESS/s (issue 10).
The compiled interpreter's gradients equal the tape's to rounding, not bit for bit, so
the same seed can give other draws (the line then says "DRAWS DIFFER").

Run:  python benchmarks/nuts.py [--quick] [--libs stanlite nutpie pymc numpyro stanlite-eager]
                                [--cases eight_schools logistic gauss100 hmm_loop coal_loop]
                                [--timeout SECONDS] [--skip LIB:CASE ...]
      (--quick: 4 chains x 200 warmup + 200 draws, a smoke run; --timeout: per
      (library, posterior) process, default 1200)
"""

import argparse
import importlib.util
import json
import math
import os
import pathlib
import random
import subprocess
import sys
import time
import warnings

import blas_threads  # noqa: E402,F401  (one BLAS thread per process; before numpy)
from _common import median_time, print_head  # noqa: E402

import numpy as np  # noqa: E402

HERE = pathlib.Path(__file__).resolve()
REPO = HERE.parents[1]

CASES = ("eight_schools", "logistic", "gauss100", "hmm_loop", "coal_loop")
LABELS = {"eight_schools": "eight schools (non-centred)",
          "logistic": "logistic N=1000 D=25",
          "gauss100": "100-d Gaussian (dense)",
          "hmm_loop": "HMM T=200 K=3 (loops)",
          "coal_loop": "coal change point (loops)"}
LIBS = ("stanlite", "stanlite-stan", "nutpie", "pymc", "numpyro", "stanlite-eager")
#: the libraries run by default
DEFAULT_LIBS = LIBS[:5]
#: what each library entry runs: ``stanlite-eager`` is stanlite with the eager tape
#: (``STANLITE_COMPILE=0``, no retaping), for the effect of retaping at the same seeds;
#: ``stanlite-stan`` is stanlite with Stan's windowed adaptation everywhere, the row
#: beside the adaptation rule's (:func:`stanlite_adaptation`)
WORKER_OF = {"stanlite-eager": "stanlite", "stanlite-stan": "stanlite"}
ENV_OF = {"stanlite-eager": {"STANLITE_COMPILE": "0"},
          "stanlite-stan": {"STANLITE_BENCH_ADAPTATION": "stan"}}
#: every stanlite process: no disk cache of lowered programs (a first use records)
STANLITE_ENV = {"STANLITE_CACHE_DIR": "off"}
SEED = 20240611

#: the issues' anchors, ESS/s (fresh process, excluding compilation); None: not given.
#: CmdStan and nutpie: issue 20's (CmdStan 2.35, nutpie 0.16); PyMC and NumPyro: the
#: earlier issue's, measured on another 2-core machine
ANCHORS = {
    "eight_schools": {"pymc": (80, 277), "numpyro": (172, 2800), "nutpie": (420, 11400),
                      "cmdstan": (None, 37000)},
    "logistic": {"pymc": (98, 181), "numpyro": (114, 890), "nutpie": (430, 2100),
                 "cmdstan": (None, 2700)},
    "gauss100": {"pymc": (2, 2), "numpyro": (126, 200), "nutpie": (790, 3300),
                 "cmdstan": (None, 750)},
    "hmm_loop": {},
    "coal_loop": {},
}
#: issue 20's targets: ESS/s excl. >= nutpie's, fresh >= this times nutpie's; eight
#: schools >= this fraction of CmdStan's ESS/s, its gradient <= this many seconds
FRESH_VS_NUTPIE = 2.0
CMDSTAN_FRACTION = 0.5
EIGHT_SCHOOLS_GRAD = 1.5e-6


# ------------------------------------------------------------------------------------
# data, shared by the three libraries
# ------------------------------------------------------------------------------------
def case_data(case):
    if case == "eight_schools":
        return {"J": 8, "y": np.array([28.0, 8, -3, 7, -1, 1, 18, 12]),
                "sigma": np.array([15.0, 10, 16, 11, 9, 11, 10, 18])}
    if case == "logistic":
        rng = np.random.default_rng(SEED)
        N, D = 1000, 25
        X = rng.standard_normal((N, D))
        beta = rng.normal(0.0, 0.5, D)
        p = 1.0 / (1.0 + np.exp(-(0.3 + X @ beta)))
        y = (rng.random(N) < p).astype(np.int64)
        return {"N": N, "K": D, "X": X, "y": y}
    if case == "gauss100":
        D = 100
        sd = np.exp(np.linspace(np.log(0.3), np.log(3.0), D))
        idx = np.arange(D)
        R = 0.9 ** np.abs(idx[:, None] - idx[None, :])
        S = sd[:, None] * R * sd[None, :]
        return {"D": D, "L": np.linalg.cholesky(S)}
    if case in ("hmm_loop", "coal_loop"):
        import loop_data                    # stanlite-free: the peers' processes too
        return loop_data.hmm_data() if case == "hmm_loop" else loop_data.coal_data()
    raise ValueError(case)


# ------------------------------------------------------------------------------------
# effective sample size
# ------------------------------------------------------------------------------------
def min_bulk_ess(arrays):
    """min bulk ESS over every scalar element of ``{name: (chains, draws, ...)}``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz as az
    best = math.inf
    for v in arrays.values():
        v = np.asarray(v, dtype=float)
        flat = v.reshape(v.shape[0], v.shape[1], -1)
        for j in range(flat.shape[2]):
            e = float(np.ravel(az.ess(flat[:, :, j], method="bulk"))[0])
            best = min(best, e if math.isfinite(e) else 0.0)
    return best


# ------------------------------------------------------------------------------------
# workers: one (library, case) per fresh process; each returns a dict
# ------------------------------------------------------------------------------------
_COUNTER = None            # shared (calls, CPU seconds) of gradient calls, set per run
_LOCAL = [0, 0.0, 0]       # this process's unflushed calls and CPU seconds, and all its calls
_ALWAYS = 64               # a process's first calls (its retaping among them) are all timed
_RATE = 0.125              # ... then a random eighth, each standing for 1 / _RATE calls
# a forked chain process starts its own count
os.register_at_fork(after_in_child=lambda: _LOCAL.__setitem__(slice(None), [0, 0.0, 0]))


def _flush():
    loc = _LOCAL
    c = _COUNTER
    if c is not None:
        with c.get_lock():
            c[0] += loc[0]
            c[1] += loc[1]
    loc[0], loc[1] = 0, 0.0


def _stanlite_models():
    try:
        import stanlite as sl
    except ImportError:             # run from a checkout without installing
        sys.path.insert(0, str(REPO))
        import stanlite as sl

    base = sl.Model.log_density_gradient
    timed = random.Random(SEED).random

    class Counting:
        """Measures the CPU time of gradient evaluations in the chain processes
        (through shared memory inherited by fork): a process's first calls (which
        retape the model) all, then a random eighth, each standing for eight calls.
        Timing one costs two ``process_time`` calls (~1.2 us), which would otherwise
        land in the sampler's overhead at every step. Each process adds its sums to
        the shared ones every 256 calls (a lock per call would cost ~2 us); the exact
        number of evaluations comes from the fit's leapfrog counts, the time per
        evaluation from these sums."""

        def log_density_gradient(self, x, jacobian=True):
            loc = _LOCAL
            loc[0] += 1
            loc[2] += 1
            if loc[2] > _ALWAYS and timed() >= _RATE:
                return base(self, x, jacobian)
            t0 = time.process_time()
            out = base(self, x, jacobian)
            dt = time.process_time() - t0
            loc[1] += dt if loc[2] <= _ALWAYS else dt / _RATE
            if loc[0] >= 256:
                _flush()
            return out

    class EightSchools(Counting, sl.Model):
        J = sl.data.int(lower=1)
        y = sl.data.vector("J")
        sigma = sl.data.vector("J", lower=0)
        mu = sl.param.real()
        tau = sl.param.real(lower=0)
        theta_trans = sl.param.vector("J")

        def log_prob(self, mu, tau, theta_trans):
            lp = sl.normal_lpdf(mu, 0, 5) + sl.cauchy_lpdf(tau, 0, 5)
            lp = lp + sl.std_normal_lpdf(theta_trans)
            return lp + sl.normal_lpdf(self.y, mu + tau * theta_trans, self.sigma)

    # the zoo's logistic regression without its generated quantities
    from stanlite.models.logistic_regression import LogisticRegressionDensity

    class Logistic(Counting, LogisticRegressionDensity):
        pass

    class Gauss(Counting, sl.Model):
        D = sl.data.int(lower=1)
        L = sl.data.matrix("D", "D")
        x = sl.param.vector("D")

        def __init__(self, **data):
            super().__init__(**data)
            self._zero = np.zeros(self.D)

        def log_prob(self, x):
            return sl.multi_normal_cholesky_lpdf(x, self._zero, self.L)

    # the Stan-style loop models, in their loop form
    import loop_models

    class HmmLoop(Counting, loop_models.HmmLoop):
        pass

    class CoalLoop(Counting, loop_models.CoalLoop):
        pass

    # module-level names, so that the models pickle by reference into the workers
    out = {}
    for case, cls in (("eight_schools", EightSchools), ("logistic", Logistic),
                      ("gauss100", Gauss), ("hmm_loop", HmmLoop),
                      ("coal_loop", CoalLoop)):
        name = f"_Bench_{cls.__name__}"
        cls.__name__ = cls.__qualname__ = name
        cls.__module__ = __name__
        globals()[name] = cls
        out[case] = cls
    return out


def stanlite_adaptation(case):
    """The warmup adaptation stanlite runs on ``case``: the one nutpie runs there
    (one rule for every posterior, issue 20): stanlite's implementation of nutpie's
    diagonal adaptation from draws and gradients (``adaptation="nutpie"``), and its
    low-rank one on the 100-d Gaussian, where nutpie runs its low-rank mass matrix
    (``low_rank_modified_mass_matrix=True`` in :func:`run_nutpie`).
    ``STANLITE_BENCH_ADAPTATION`` overrides it (the ``stanlite-stan`` row: Stan's
    windowed adaptation, ``"stan"``, with the dense metric on the 100-d Gaussian)."""
    return os.environ.get("STANLITE_BENCH_ADAPTATION") or (
        "nutpie-lowrank" if case == "gauss100" else "nutpie")


def run_stanlite(case, draws, warmup, seed, opts):
    import multiprocessing as mp
    import resource
    global _COUNTER
    cls = _stanlite_models()[case]
    model = cls(**case_data(case))
    metric = "dense_e" if case == "gauss100" else "diag_e"
    extra = {"adaptation": stanlite_adaptation(case)}
    _COUNTER = mp.get_context("fork").Array("d", 2)
    # the compiled NUTS kernel (numba: imported, loaded from its cache or compiled)
    # is stanlite's compilation, outside "excl." as the peers' is
    from stanlite.samplers import nuts_jit
    nuts_jit.warm()
    # the model's one-time recording and lowering (and the first replay's check) is
    # its compilation too, as nutpie's compile_pymc_model is nutpie's
    t_compile = time.perf_counter()
    model.precompile()
    t_compile = time.perf_counter() - t_compile
    def cpu():
        # this process and its children: a small run's chains run in this process
        # (samplers/runner.py _small_run), a larger one's in worker processes
        return sum(r.ru_utime + r.ru_stime for r in (
            resource.getrusage(resource.RUSAGE_SELF),
            resource.getrusage(resource.RUSAGE_CHILDREN)))
    cpu0 = cpu()
    t0 = time.perf_counter()
    fit = model.sample(chains=4, draws=draws, warmup=warmup, seed=seed, metric=metric,
                       progress=False, save_warmup=True, **extra)
    excl = time.perf_counter() - t0
    t_end = time.time()
    # the runner's worker processes exit on their own after a run: joined here, so
    # that their CPU time is in RUSAGE_CHILDREN (it was missing: 1.4 us a step for
    # logistic's 57 us gradients)
    from stanlite.samplers import runner
    runner._reap_pools()
    chains_cpu = cpu() - cpu0
    # every leapfrog step is one gradient (plus a few for initialisation and step-size
    # searches, not counted); the counted sample gives the CPU time per gradient
    n_grad = float(fit.warmup("n_leapfrog__").sum() + fit["n_leapfrog__"].sum())
    counted, counted_cpu = float(_COUNTER[0]), float(_COUNTER[1])
    grad_cpu = counted_cpu / counted * n_grad if counted else 0.0
    params = {k: fit[k] for k in model.param_shapes()}
    res = dict(t_end=t_end, excl=excl, t_compile=t_compile, min_ess=min_bulk_ess(params),
               n_grad=n_grad, steps_per_draw=float(np.mean(fit["n_leapfrog__"])),
               divergences=int(np.sum(fit["divergent__"])))
    x = np.asarray(fit.unconstrained_draws[0, -1], dtype=float)
    base = next(k for k in type(model).__mro__ if k.__name__ == "Model")
    res["t_grad"] = median_time(lambda: base.log_density_gradient(model, x))
    # the gradient inside compiled code, as the compiled trajectory calls it: the
    # interpreter's value_grad in a numba loop over the run's distinct draws
    import kernel_timing
    k = kernel_timing.in_kernel_seconds(model, fit.unconstrained_draws.reshape(
        -1, model.dim))
    if k is not None:
        res["t_grad_kernel"], res["t_grad_kernel_median"], res["kernel_handed"] = k
    if n_grad <= 0 or chains_cpu <= 0:
        res["note"] = "chain CPU time not measurable"
        return res
    res["cpu_step"] = chains_cpu / n_grad
    if counted >= 0.9 * n_grad:
        res["t_grad_sampler"] = grad_cpu / n_grad
        res["overhead"] = (chains_cpu - grad_cpu) / n_grad
    else:
        # the compiled NUTS trajectory evaluates the recording itself, unseen by the
        # Python-level counter: gradient and sampler are not separable then
        res["note"] = (f"{counted / n_grad:.0%} of gradients via Python, the rest in "
                       "the compiled trajectory")
    return res


def _pymc_hmm(pm, y):
    """The HMM forward algorithm vectorised over the states, ``pytensor.scan`` over t."""
    import pytensor
    import pytensor.tensor as pt
    K = 3
    mu = pm.Normal("mu", 0, 5, shape=K, transform=pm.distributions.transforms.ordered,
                   initval=np.array([-1.0, 0.0, 1.0]))
    sigma = pm.HalfNormal("sigma", 2)
    theta = pm.Dirichlet("theta", a=np.ones((K, K)))            # rows: from state j
    log_theta = pt.log(theta)
    z = (y[:, None] - mu[None, :]) / sigma
    emit = -0.5 * z * z - pt.log(sigma) - 0.5 * np.log(2 * np.pi)

    def step(e_t, gamma, lt):
        return pt.logsumexp(gamma[:, None] + lt, axis=0) + e_t

    gammas = pytensor.scan(step, sequences=[emit[1:]], outputs_info=[np.log(1 / K) + emit[0]],
                           non_sequences=[log_theta], return_updates=False)
    pm.Potential("loglik", pt.logsumexp(gammas[-1]))
    return ["mu", "sigma", "theta"]


def _pymc_coal(pm, d):
    """The change point marginalised with cumulative sums (the guide's second form)."""
    import math as m
    import pytensor.tensor as pt
    D = np.asarray(d["D"], dtype=float)
    lg = np.array([m.lgamma(v + 1.0) for v in D])
    e = pm.Exponential("e", d["r_e"])
    l_ = pm.Exponential("l", d["r_l"])
    pe, pl = D * pt.log(e) - e - lg, D * pt.log(l_) - l_ - lg
    ce, cl = pt.cumsum(pe), pt.cumsum(pl)
    pm.Potential("loglik", pt.logsumexp((ce - pe) + (cl[-1] - cl + pl) - np.log(d["T"])))
    return ["e", "l"]


def pymc_model(case):
    """``(model, names of the parameters, PyMC's init)`` of ``case`` in PyMC (nutpie
    compiles the same model)."""
    import logging
    import pymc as pm
    logging.getLogger("pymc").setLevel(logging.ERROR)
    d = case_data(case)
    with pm.Model() as model:
        if case == "eight_schools":
            mu = pm.Normal("mu", 0, 5)
            tau = pm.HalfCauchy("tau", 5)
            tt = pm.Normal("theta_trans", 0, 1, shape=d["J"])
            pm.Normal("y", mu + tau * tt, d["sigma"], observed=d["y"])
            names, init = ["mu", "tau", "theta_trans"], "jitter+adapt_diag"
        elif case == "logistic":
            alpha = pm.Normal("alpha", 0, 2.5)
            beta = pm.Normal("beta", 0, 2.5, shape=d["K"])
            pm.Bernoulli("y", logit_p=alpha + pm.math.dot(d["X"], beta), observed=d["y"])
            names, init = ["alpha", "beta"], "jitter+adapt_diag"
        elif case == "gauss100":
            pm.MvNormal("x", mu=np.zeros(d["D"]), chol=d["L"])
            names, init = ["x"], "jitter+adapt_full"
        elif case == "hmm_loop":
            names, init = _pymc_hmm(pm, d["y"]), "jitter+adapt_diag"
        else:
            names, init = _pymc_coal(pm, d), "jitter+adapt_diag"
    return model, names, init


def run_pymc(case, draws, warmup, seed, opts):
    import pymc as pm
    model, names, init = pymc_model(case)
    with model:
        idata = pm.sample(draws=draws, tune=warmup, chains=4, cores=2, random_seed=seed,
                          init=init, target_accept=0.8, progressbar=False,
                          compute_convergence_checks=False, discard_tuned_samples=False)
    t_end = time.time()
    post = idata.posterior
    st = idata.sample_stats
    n_grad = float(st["n_steps"].sum())
    if "warmup_sample_stats" in idata.groups():
        n_grad += float(idata.warmup_sample_stats["n_steps"].sum())
    res = dict(t_end=t_end, excl=float(st.attrs["sampling_time"]),
               min_ess=min_bulk_ess({k: post[k].values for k in names}), n_grad=n_grad,
               steps_per_draw=float(st["n_steps"].mean()),
               divergences=int(st["diverging"].sum()))
    try:
        f = model.logp_dlogp_function(ravel_inputs=True)
    except TypeError:                          # PyMC before ravel_inputs (raveled anyway)
        f = model.logp_dlogp_function()
    f.set_extra_values({})
    ip = model.initial_point()
    x = np.concatenate([np.ravel(ip[v.name]) for v in model.value_vars])
    res["t_grad"] = median_time(lambda: f(x))
    return res


def run_nutpie(case, draws, warmup, seed, opts):
    import nutpie
    model, names, _ = pymc_model(case)
    compiled = nutpie.compile_pymc_model(model)          # numba: outside "excl."
    # the 100-d Gaussian: nutpie's low-rank modified mass matrix (the anchor)
    low_rank = case == "gauss100"
    t0 = time.perf_counter()
    idata = nutpie.sample(compiled, draws=draws, tune=warmup, chains=4, cores=2,
                          seed=seed, target_accept=0.8, maxdepth=10, save_warmup=True,
                          progress_bar=False, low_rank_modified_mass_matrix=low_rank)
    excl = time.perf_counter() - t0
    t_end = time.time()
    post, st = idata.posterior, idata.sample_stats
    n_grad = float(st["n_steps"].sum())
    if "warmup_sample_stats" in idata.groups():
        n_grad += float(idata.warmup_sample_stats["n_steps"].sum())
    res = dict(t_end=t_end, excl=excl,
               min_ess=min_bulk_ess({k: post[k].values for k in names}), n_grad=n_grad,
               steps_per_draw=float(st["n_steps"].mean()),
               divergences=int(st["diverging"].sum()),
               note="low-rank mass matrix" if low_rank else "")
    # the numba function nutpie's sampler calls (without shared variables: the jitted
    # function itself; else the pytensor function around it)
    f = compiled.logp_func
    x = np.asarray(compiled.initial_point_func(seed), dtype=float) \
        if callable(compiled.initial_point_func) else np.zeros(compiled.n_dim)
    fn = f.vm.jit_fn if not f.get_shared() else f
    res["t_grad"] = median_time(lambda: fn(x))
    return res


def run_numpyro(case, draws, warmup, seed, opts):
    import collections
    import numpyro
    if opts.get("numpyro_devices"):
        numpyro.set_host_device_count(int(opts["numpyro_devices"]))
    numpyro.enable_x64()
    import jax
    import jax.monitoring
    import numpyro.distributions as dist
    from numpyro.infer import MCMC, NUTS
    from numpyro.infer.util import initialize_model
    compile_s = collections.defaultdict(float)

    def listen(name, secs, **kw):
        if name.startswith("/jax/core/compile/"):
            compile_s[name] += secs
    jax.monitoring.register_event_duration_secs_listener(listen)
    d = case_data(case)
    if case == "eight_schools":
        def model(y, sigma):
            mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
            tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
            tt = numpyro.sample("theta_trans", dist.Normal(0.0, 1.0).expand([len(y)]))
            numpyro.sample("y", dist.Normal(mu + tau * tt, sigma), obs=y)
        args, dense = (d["y"], d["sigma"]), False
    elif case == "logistic":
        def model(X, y):
            alpha = numpyro.sample("alpha", dist.Normal(0.0, 2.5))
            beta = numpyro.sample("beta", dist.Normal(0.0, 2.5).expand([X.shape[1]]))
            numpyro.sample("y", dist.Bernoulli(logits=alpha + X @ beta), obs=y)
        args, dense = (d["X"], d["y"]), False
    elif case == "gauss100":
        def model(L):
            numpyro.sample("x", dist.MultivariateNormal(loc=np.zeros(L.shape[0]),
                                                        scale_tril=L))
        args, dense = (d["L"],), True
    elif case == "hmm_loop":
        model, args, dense = _numpyro_hmm(numpyro, dist, d), (d["y"],), False
    else:
        model, args, dense = _numpyro_coal(numpyro, dist, d), (np.asarray(d["D"]),), False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # "not enough devices ... sequentially"
        mcmc = MCMC(NUTS(model, dense_mass=dense, target_accept_prob=0.8, max_tree_depth=10),
                    num_warmup=warmup, num_samples=draws, num_chains=4,
                    progress_bar=False)
    t0 = time.perf_counter()
    mcmc.run(jax.random.PRNGKey(seed), *args, extra_fields=("num_steps", "diverging"))
    samples = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
    wall = time.perf_counter() - t0
    t_end = time.time()
    compile_total = sum(compile_s.values())
    extra = mcmc.get_extra_fields(group_by_chain=True)
    steps = np.asarray(extra["num_steps"])
    res = dict(t_end=t_end, excl=wall - compile_total, compile=compile_total,
               min_ess=min_bulk_ess({k: np.asarray(v) for k, v in samples.items()}),
               n_grad=float(steps.sum()), steps_per_draw=float(steps.mean()),
               divergences=int(np.asarray(extra["diverging"]).sum()),
               chain_method=mcmc.chain_method, note="grads: sampling phase only")
    info = initialize_model(jax.random.PRNGKey(0), model, model_args=args)
    vg = jax.jit(jax.value_and_grad(info.potential_fn))
    z = info.param_info.z
    res["t_grad"] = median_time(lambda: jax.block_until_ready(vg(z)))
    return res


def _numpyro_hmm(numpyro, dist, d):
    """The HMM forward algorithm vectorised over the states, ``lax.scan`` over t."""
    import jax
    import jax.numpy as jnp
    from jax.scipy.special import logsumexp
    K = 3

    def model(y):
        mu = numpyro.sample("mu", dist.ImproperUniform(dist.constraints.ordered_vector,
                                                       (), (K,)))
        numpyro.factor("mu_prior", dist.Normal(0.0, 5.0).log_prob(mu).sum())
        sigma = numpyro.sample("sigma", dist.HalfNormal(2.0))
        theta = numpyro.sample("theta", dist.Dirichlet(jnp.ones((K, K))))
        log_theta = jnp.log(theta)
        emit = dist.Normal(mu[None, :], sigma).log_prob(y[:, None])

        def step(gamma, e_t):
            return logsumexp(gamma[:, None] + log_theta, axis=0) + e_t, None

        gamma, _ = jax.lax.scan(step, jnp.log(1.0 / K) + emit[0], emit[1:])
        numpyro.factor("loglik", logsumexp(gamma))
    return model


def _numpyro_coal(numpyro, dist, d):
    """The change point marginalised with cumulative sums (the guide's second form)."""
    import jax.numpy as jnp
    from jax.scipy.special import gammaln, logsumexp
    T, r_e, r_l = d["T"], d["r_e"], d["r_l"]

    def model(D):
        e = numpyro.sample("e", dist.Exponential(r_e))
        l_ = numpyro.sample("l", dist.Exponential(r_l))
        lg = gammaln(D + 1.0)
        pe, pl = D * jnp.log(e) - e - lg, D * jnp.log(l_) - l_ - lg
        ce, cl = jnp.cumsum(pe), jnp.cumsum(pl)
        numpyro.factor("loglik", logsumexp((ce - pe) + (cl[-1] - cl + pl) - jnp.log(T)))
    return model


WORKERS = {"stanlite": run_stanlite, "nutpie": run_nutpie, "pymc": run_pymc,
           "numpyro": run_numpyro}


def worker_main(lib, case, draws, warmup, seed, opts):
    res = WORKERS[lib](case, draws, warmup, seed, opts)
    sys.stdout.flush()
    print("RESULT " + json.dumps(res), flush=True)


# ------------------------------------------------------------------------------------
# the driver
# ------------------------------------------------------------------------------------
def available(lib):
    lib = WORKER_OF.get(lib, lib)
    if lib == "stanlite":
        return True
    return importlib.util.find_spec(lib) is not None


def run_fresh(lib, case, draws, warmup, seed, opts, timeout):
    cmd = [sys.executable, str(HERE), "--worker", WORKER_OF.get(lib, lib), case,
           "--draws", str(draws),
           "--warmup", str(warmup), "--seed", str(seed)]
    if opts.get("numpyro_devices"):
        cmd += ["--numpyro-devices", str(opts["numpyro_devices"])]
    env = dict(os.environ, **ENV_OF.get(lib, {}))
    if WORKER_OF.get(lib, lib) == "stanlite":
        env.update(STANLITE_ENV)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + ([env["PYTHONPATH"]]
                                                       if env.get("PYTHONPATH") else []))
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                           cwd=str(REPO))
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"exit {p.returncode}: {tail[:150]}"}
    res = json.loads(lines[-1][len("RESULT "):])
    res["fresh"] = res["t_end"] - t0
    return res


def warm_caches(seed, opts, timeout):
    """One untimed stanlite process first (a short eight schools run), so that numba's
    on-disk caches of the compiled NUTS kernel and gradient interpreter exist: a
    changed or new install compiles them once (seconds), which would otherwise land in
    the first stanlite row's "fresh" time only."""
    print("  warming stanlite's numba caches (untimed) ...", file=sys.stderr, flush=True)
    r = run_fresh("stanlite", "eight_schools", 50, 50, seed, opts, timeout)
    if "error" in r:
        print(f"    {r['error']}", file=sys.stderr)


def run(quick=False, libs=DEFAULT_LIBS, cases=CASES, seed=SEED, opts=None, timeout=1200,
        skip=()):
    opts = opts or {}
    draws, warmup = (200, 200) if quick else (1000, 1000)
    results = {}
    missing = [lib for lib in libs if not available(lib)]
    if any(WORKER_OF.get(lib, lib) == "stanlite" for lib in libs):
        warm_caches(seed, opts, timeout)
    for case in cases:
        for lib in libs:
            if lib in missing:
                results[case, lib] = {"error": "not installed"}
                continue
            if f"{lib}:{case}" in skip:
                results[case, lib] = {"error": "skipped (--skip)"}
                continue
            print(f"  {LABELS[case]}: {lib} ...", file=sys.stderr, flush=True)
            r = run_fresh(lib, case, draws, warmup, seed, opts, timeout)
            results[case, lib] = r
            if "error" in r:
                print(f"    {r['error']}", file=sys.stderr)
            else:
                comp = f", precompile {r['t_compile']:.2f} s" if "t_compile" in r else ""
                print(f"    fresh {r['fresh']:.1f} s, excl. {r['excl']:.1f} s{comp}, "
                      f"min ESS {r['min_ess']:.0f}", file=sys.stderr)
    print_tables(results, libs, cases, draws, warmup, seed, missing, opts)
    return results


def _rate(r, key):
    if "error" in r or r.get(key, 0) <= 0:
        return None
    return r["min_ess"] / r[key]


def _fmt_rate(v):
    if v is None:
        return "-"
    return f"{v:.0f}" if v >= 10 else f"{v:.1f}"


def _anchor(case, lib):
    a = ANCHORS[case].get(lib)
    if lib == "stanlite-eager":
        return "(no retaping)"
    if lib == "stanlite":
        a = ANCHORS[case].get("cmdstan")
        return f"CmdStan - / {a[1]}" if a else ""
    if not a:
        return ""
    return f"{a[0]} / {a[1]}"


def _results(results, cases, libs):
    """(case, library, result) in the tables' row order."""
    for case in cases:
        for lib in libs:
            yield case, lib, results[case, lib]


def print_tables(results, libs, cases, draws, warmup, seed, missing, opts):
    quick = draws < 1000 or warmup < 1000
    print(f"NUTS, 4 chains x ({warmup} warmup + {draws} draws), seed {seed}; "
          "ESS/s = min bulk ESS over the parameters / seconds; "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}")
    if missing:
        print(f"not installed: {', '.join(missing)} (pip install nutpie pymc numpyro); their "
              "rows read 'not installed'")
    head = (f"{'posterior':<28}{'library':<15}{'min ESS':>8}{'div':>5}{'fresh s':>9}"
            f"{'ESS/s':>8}{'excl. s':>9}{'ESS/s':>8}   anchor ESS/s fresh / excl.")
    print_head(head)
    for case, lib, r in _results(results, cases, libs):
        if "error" in r:
            print(f"{LABELS[case]:<28}{lib:<15}{r['error']:>47}   {_anchor(case, lib)}")
            continue
        print(f"{LABELS[case]:<28}{lib:<15}{r['min_ess']:>8.0f}{r['divergences']:>5}"
              f"{r['fresh']:>9.1f}{_fmt_rate(_rate(r, 'fresh')):>8}"
              f"{r['excl']:>9.1f}{_fmt_rate(_rate(r, 'excl')):>8}   "
              f"{_anchor(case, lib)}")
    print()
    head = (f"{'posterior':<28}{'library':<15}{'grads':>10}{'steps/draw':>11}"
            f"{'us/grad':>9}{'in kernel':>10}{'CPU us/step':>12}{'in sampler':>11}"
            f"{'overhead us/step':>18}{'% of grad':>10}")
    print_head(head)
    for case, lib, r in _results(results, cases, libs):
        if "error" in r:
            continue
        ov, tg, ts = r.get("overhead"), r.get("t_grad"), r.get("t_grad_sampler")
        cs, tk = r.get("cpu_step"), r.get("t_grad_kernel")
        print(f"{LABELS[case]:<28}{lib:<15}{r['n_grad']:>10.0f}"
              f"{r['steps_per_draw']:>11.1f}"
              f"{(f'{tg * 1e6:.1f}' if tg else '-'):>9}"
              f"{(f'{tk * 1e6:.2f}' if tk else '-'):>10}"
              f"{(f'{cs * 1e6:.1f}' if cs else '-'):>12}"
              f"{(f'{ts * 1e6:.1f}' if ts else '-'):>11}"
              f"{(f'{ov * 1e6:.1f}' if ov is not None else '-'):>18}"
              f"{(f'{100 * ov / ts:.0f}%' if ov is not None and ts else '-'):>10}"
              + (f"   ({r['note']})" if r.get("note") else ""))
    for case in cases:
        r = results.get((case, "numpyro"), {})
        if "compile" in r:
            print(f"NumPyro, {LABELS[case]}: {r['compile']:.1f} s of JAX tracing/"
                  f"compilation, chain_method={r.get('chain_method')}")
    if quick:
        print("\n(quick run: short warmup, so ESS/s is not comparable with the anchors, "
              "which are for 1000 + 1000)")
    print_retaping(results, cases)
    print_targets(results, cases)


def print_retaping(results, cases):
    """Retaping's effect (issue 10): the same seeds with and without it; the draws are
    the same (a replay's gradient is the tape's), so only the cost per gradient moves."""
    pairs = [(c, results.get((c, "stanlite"), {}), results.get((c, "stanlite-eager"), {}))
             for c in cases]
    pairs = [(c, a, b) for c, a, b in pairs if a and b and "error" not in a
             and "error" not in b]
    if not pairs:
        return
    print("\nretaping, same seeds (eager tape -> retaped); CPU us per leapfrog step, "
          "everything in:")

    def per_step(r):
        v = r.get("cpu_step")
        return f"{v * 1e6:.0f}" if v else "-"

    for case, a, b in pairs:
        same = "identical draws" if (a["min_ess"] == b["min_ess"]
                                     and a["n_grad"] == b["n_grad"]) else "DRAWS DIFFER"
        print(f"  {LABELS[case]}: CPU us/step {per_step(b)} -> {per_step(a)}; ESS/s excl. "
              f"{_fmt_rate(_rate(b, 'excl'))} -> {_fmt_rate(_rate(a, 'excl'))}, fresh "
              f"{_fmt_rate(_rate(b, 'fresh'))} -> {_fmt_rate(_rate(a, 'fresh'))} "
              f"({same}: min ESS {b['min_ess']:.0f} / {a['min_ess']:.0f})")


def print_targets(results, cases):
    """Issue 20's targets: stanlite against nutpie measured here, and against the
    issue's nutpie anchors (another 2-core machine) in brackets; eight schools against
    CmdStan's anchor."""
    print("\ntargets (issue 20): stanlite vs nutpie measured here -> verdict; "
          "[vs the issue's nutpie anchor] -> verdict")

    def verdict(ours, other, factor=1.0):
        if ours is None or other is None:
            return "n/a"
        return "PASS" if ours >= factor * other else "MISS"

    for case in cases:
        lab = LABELS[case]
        s = results.get((case, "stanlite"), {"error": "not run"})
        if "error" in s:
            print(f"  {lab}: stanlite {s['error']} -> MISS")
            continue
        peer = results.get((case, "nutpie"), {"error": "not run"})
        anchors = ANCHORS[case].get("nutpie")
        for key, label, factor in (("excl", "excl.", 1.0),
                                   ("fresh", "fresh", FRESH_VS_NUTPIE)):
            ours, theirs = _rate(s, key), _rate(peer, key)
            need = f">= {factor:g}x nutpie's" if factor != 1.0 else ">= nutpie's"
            line = (f"  {lab}, ESS/s {label} {need}: {_fmt_rate(ours)} vs "
                    f"{_fmt_rate(theirs)} -> {verdict(ours, theirs, factor)}")
            if anchors:
                anc = anchors[1 if key == "excl" else 0]
                line += f"; [{anc}] -> {verdict(ours, anc, factor)}"
            print(line)
        st = results.get((case, "stanlite-stan"))
        if st is not None and "error" not in st:
            ours, theirs = _rate(st, "excl"), _rate(peer, "excl")
            print(f"  ({lab}, stanlite-stan (Stan's adaptation), ESS/s excl.: "
                  f"{_fmt_rate(ours)} vs {_fmt_rate(theirs)} -> "
                  f"{verdict(ours, theirs)}; not the target's row)")
        if case == "eight_schools":
            ours, cs = _rate(s, "excl"), ANCHORS[case]["cmdstan"][1]
            print(f"  {lab}, ESS/s excl. >= {CMDSTAN_FRACTION:g}x CmdStan's [{cs}]: "
                  f"{_fmt_rate(ours)} -> {verdict(ours, cs, CMDSTAN_FRACTION)}")
            # the gradient itself: the lowered program inside compiled code, as the
            # compiled trajectory calls it (what C++ Stan's figure is); the two
            # upper bounds printed beside it include more - a call through Python
            # (log_density_gradient), and the whole run's CPU per leapfrog step
            # (sampler, adaptation, the fit's arrays)
            tk, tg, cs = s.get("t_grad_kernel"), s.get("t_grad"), s.get("cpu_step")
            shown = [f"{tk * 1e6:.2f} us in compiled code (median of 20 loops "
                     f"{s['t_grad_kernel_median'] * 1e6:.2f})" if tk else
                     "no program in the interpreter"]
            if tg:
                shown.append(f"{tg * 1e6:.1f} us through Python")
            if cs:
                shown.append(f"{cs * 1e6:.1f} us a leapfrog step, everything in")
            ok = "PASS" if tk and tk <= EIGHT_SCHOOLS_GRAD else "MISS"
            print(f"  {lab}, gradient <= {EIGHT_SCHOOLS_GRAD * 1e6:g} us: "
                  f"{', '.join(shown)} -> {ok} (judged in compiled code)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 200 warmup + 200 draws per chain")
    ap.add_argument("--libs", nargs="+", choices=LIBS, default=list(DEFAULT_LIBS))
    ap.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--skip", nargs="+", default=[], metavar="LIB:CASE",
                    help="(library, posterior) pairs not to run, e.g. pymc:hmm_loop")
    ap.add_argument("--timeout", type=float, default=1200,
                    help="seconds per (library, posterior) process (default 1200)")
    ap.add_argument("--numpyro-devices", type=int, default=0,
                    help="numpyro.set_host_device_count(N) before JAX starts "
                         "(default: JAX's one CPU device)")
    ap.add_argument("--worker", nargs=2, metavar=("LIB", "CASE"), help=argparse.SUPPRESS)
    ap.add_argument("--draws", type=int, default=1000, help=argparse.SUPPRESS)
    ap.add_argument("--warmup", type=int, default=1000, help=argparse.SUPPRESS)
    a = ap.parse_args()
    opts = {"numpyro_devices": a.numpyro_devices}
    if a.worker:
        worker_main(a.worker[0], a.worker[1], a.draws, a.warmup, a.seed, opts)
    else:
        run(a.quick, a.libs, a.cases, a.seed, opts, a.timeout, set(a.skip))
