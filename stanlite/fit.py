"""The result of a fit: draws by name, summary, diagnostics in words, ArviZ export.

``fit[name]`` is an array ``(chains, draws, *shape)`` for every parameter,
transformed parameter and generated quantity; ``fit.summary()`` a pandas DataFrame
(mean, sd, 5/50/95% quantiles, MCSE, bulk/tail ESS, rank-normalised split R-hat, the
last four computed by ArviZ); ``fit.diagnose()`` the checks Stan's ``diagnose``
runs, each in words with advice; ``fit.to_arviz()`` an ``arviz.InferenceData``.
The chains' full states are kept (``fit.chain_states``), so a run can be resumed
or extended with ``model.sample(resume_from=fit)``.
"""

import numpy as np

__all__ = ["Fit"]

#: Stan's sampler statistics -> ArviZ's sample_stats names
ARVIZ_STATS = {"lp__": "lp", "accept_stat__": "acceptance_rate", "stepsize__": "step_size",
               "treedepth__": "tree_depth", "n_leapfrog__": "n_steps",
               "divergent__": "diverging", "energy__": "energy"}


def _arviz():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)   # arviz's refactor notice
        import arviz
    return arviz


class Fit:
    """Draws of a sampler run, with its diagnostics (see the module docstring)."""

    def __init__(self, model, chain_states, gq_seeds, interrupted=False, method="nuts",
                 max_treedepth=10):
        self.model = model
        self.chain_states = chain_states
        self.gq_seeds = gq_seeds
        self.interrupted = interrupted
        self.method = method
        self.max_treedepth = max_treedepth
        self._build()

    # ---- assembling the arrays ---------------------------------------------------------
    def _build(self):
        model = self.model
        states = self.chain_states
        n = min(len(s.draws) for s in states) if states else 0
        self.num_draws = n
        self.num_chains = len(states)
        out = {}
        for c, s in enumerate(states):
            rng = np.random.Generator(np.random.PCG64(self.gq_seeds[s.chain_id]))
            for d in range(n):
                vals = model.output(np.asarray(s.draws[d]), rng=rng)
                for k, v in vals.items():
                    if k not in out:
                        out[k] = np.empty((len(states), n) + np.shape(v))
                    out[k][c, d] = v
        self._draws = out
        self._stats = {k: np.array([s.stats[k][:n] for s in states], dtype=float)
                       for k in (states[0].stats if states else {})}
        self.unconstrained_draws = np.array([np.asarray(s.draws[:n]) for s in states]) \
            if states else np.empty((0, 0, model.dim))

    def __getitem__(self, name):
        if name in self._draws:
            return self._draws[name]
        if name in self._stats:
            return self._stats[name]
        raise KeyError(f"'{name}' is not a parameter, transformed parameter, generated "
                       f"quantity or sampler statistic of this fit; known: "
                       f"{sorted(self._draws) + sorted(self._stats)}")

    def __contains__(self, name):
        return name in self._draws or name in self._stats

    @property
    def names(self):
        return list(self._draws)

    @property
    def step_size(self):
        """Adapted step size per chain."""
        return np.array([s.stepsize for s in self.chain_states])

    @property
    def inv_metric(self):
        """Adapted inverse metric per chain (variances for diag_e, a matrix for dense_e)."""
        return np.array([s.inv_metric for s in self.chain_states])

    @property
    def sampler_stats(self):
        """Stan-named per-draw statistics, each ``(chains, draws)``."""
        return dict(self._stats)

    # ---- ArviZ ------------------------------------------------------------------------
    def to_arviz(self):
        """``arviz.InferenceData`` with posterior, sample_stats (ArviZ names),
        log_likelihood (if the model defines ``log_likelihood``), observed/constant
        data, and coords/dims per parameter axis."""
        az = _arviz()
        posterior = dict(self._draws)
        loglik = {}
        ll_fun = getattr(self.model, "log_likelihood", None)
        if callable(ll_fun):
            loglik = self._pointwise(ll_fun)
        stats = {ARVIZ_STATS[k]: v for k, v in self._stats.items() if k in ARVIZ_STATS}
        if "diverging" in stats:
            stats["diverging"] = stats["diverging"].astype(bool)
        if "energy" in stats:
            H0 = stats["energy"]
            stats["energy_error"] = np.concatenate(
                [np.zeros((H0.shape[0], 1)), np.diff(H0, axis=1)], axis=1) \
                if H0.shape[1] else H0
        if "tree_depth" in stats:
            stats["reached_max_treedepth"] = stats["tree_depth"] >= self.max_treedepth
        dims, coords = {}, {}
        for k, v in posterior.items():
            shp = v.shape[2:]
            dims[k] = [f"{k}_dim_{i}" for i in range(len(shp))]
            for i, size in enumerate(shp):
                coords[f"{k}_dim_{i}"] = np.arange(size)
        data = self.model.data if hasattr(self.model, "data") else {}
        kw = dict(posterior=posterior, sample_stats=stats, coords=coords, dims=dims,
                  constant_data={k: np.asarray(v) for k, v in data.items()})
        if loglik:
            kw["log_likelihood"] = loglik
        return az.from_dict(**kw)

    def _pointwise(self, fun):
        import inspect
        names = list(inspect.signature(fun).parameters)
        out = {}
        for c, s in enumerate(self.chain_states):
            for d in range(self.num_draws):
                vals = {k: self._draws[k][c, d] for k in names if k in self._draws}
                ll = fun(**vals)
                for k, v in (ll.items() if isinstance(ll, dict) else [("log_lik", ll)]):
                    v = np.asarray(v, dtype=float)
                    if k not in out:
                        out[k] = np.empty((self.num_chains, self.num_draws) + v.shape)
                    out[k][c, d] = v
        return out

    # ---- summaries ----------------------------------------------------------------------
    def summary(self, names=None):
        """A DataFrame, one row per scalar element (Stan-style names): mean, sd, 5%,
        50%, 95%, mcse_mean, ess_bulk, ess_tail, r_hat."""
        import pandas as pd
        az = _arviz()
        from .model import element_names
        rows, index = [], []
        for k in (names or self.names):
            v = self[k]
            shp = v.shape[2:]
            flat = v.reshape(v.shape[0], v.shape[1], -1)
            for j, en in enumerate(element_names(k, shp)):
                x = flat[:, :, j]
                q5, q50, q95 = np.quantile(x, [0.05, 0.5, 0.95])
                rows.append((x.mean(), x.std(ddof=1) if x.size > 1 else np.nan, q5, q50,
                             q95, *_diagnostics(az, x)))
                index.append(en)
        return pd.DataFrame(rows, index=index, columns=["mean", "sd", "5%", "50%", "95%",
                                                        "mcse_mean", "ess_bulk",
                                                        "ess_tail", "r_hat"])

    def diagnose(self):
        """Stan's checks in words: divergences, tree-depth saturation, E-BFMI per
        chain, R-hat, effective sample size."""
        msgs = []
        st = self._stats
        n_total = self.num_chains * self.num_draws
        if n_total == 0:
            return "No draws to diagnose."
        if "divergent__" in st:
            nd = int(st["divergent__"].sum())
            if nd:
                msgs.append(f"{nd} of {n_total} transitions ({100 * nd / n_total:.1f}%) "
                            "ended with a divergence. The posterior has regions the "
                            "sampler cannot explore reliably: increase adapt_delta (e.g. "
                            "0.95) or reparameterise (e.g. non-centred).")
            else:
                msgs.append("No divergent transitions found.")
        if "treedepth__" in st:
            nt = int((st["treedepth__"] >= self.max_treedepth).sum())
            if nt:
                msgs.append(f"{nt} of {n_total} transitions hit the maximum tree depth "
                            f"({self.max_treedepth}): an efficiency problem, not a bias; "
                            "increase max_treedepth or reparameterise.")
            else:
                msgs.append("Tree depth below the maximum in every transition.")
        if "energy__" in st and self.num_draws > 2:
            low = []
            for c in range(self.num_chains):
                e = st["energy__"][c]
                bfmi = np.sum(np.diff(e) ** 2) / max(np.sum((e - e.mean()) ** 2), 1e-300)
                if bfmi < 0.3:
                    low.append(f"chain {c + 1}: {bfmi:.2f}")
            if low:
                msgs.append("E-BFMI below 0.3 (" + "; ".join(low) + "): the momentum "
                            "resampling explores the energy levels poorly; reparameterise.")
            else:
                msgs.append("E-BFMI satisfactory for all chains.")
        if self.num_draws >= 4:
            s = self.summary()
            bad_r = s.index[s["r_hat"] > 1.01].tolist()
            if bad_r:
                msgs.append(f"R-hat above 1.01 for {', '.join(bad_r[:8])}"
                            + (" ..." if len(bad_r) > 8 else "") + ": the chains have "
                            "not mixed; run longer or check the model.")
            else:
                msgs.append("R-hat below 1.01 for all parameters.")
            thresh = 100 * self.num_chains
            low_ess = s.index[(s["ess_bulk"] < thresh) | (s["ess_tail"] < thresh)].tolist()
            if low_ess:
                msgs.append(f"Effective sample size below {thresh} (100 per chain) for "
                            f"{', '.join(low_ess[:8])}" + (" ..." if len(low_ess) > 8 else "")
                            + ": estimates of their quantiles are unreliable; run longer.")
            else:
                msgs.append("Effective sample sizes satisfactory.")
        if self.interrupted:
            msgs.append("The run was interrupted: these are the draws completed so far.")
        return "\n".join(msgs)

    def __repr__(self):
        return (f"<Fit {self.method}: {self.num_chains} chains x {self.num_draws} draws, "
                f"{len(self.names)} quantities>")


def _diagnostics(az, x):
    if x.shape[1] < 4 or not np.all(np.isfinite(x)):
        return (np.nan,) * 4
    if np.ptp(x) == 0:
        return (0.0, np.nan, np.nan, np.nan)
    return (float(az.mcse(x, method="mean")), float(az.ess(x, method="bulk")),
            float(az.ess(x, method="tail")), float(az.rhat(x)))
