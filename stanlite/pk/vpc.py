"""Visual predictive checks (VPC): percentiles of the observations against the same
percentiles of simulated data sets, per time bin.

A VPC (Holford 2005; Bergstrand, Hooker, Wallin & Karlsson 2011, "Prediction-corrected
visual predictive checks") asks whether the model reproduces the *spread* of the
data over time, not only each subject's fit: for each time bin the 5th, 50th and
95th percentiles of the observations are compared with the distribution of the
same percentiles over many data sets simulated from the model (the median and a
90% interval of each simulated percentile). An observed percentile outside its
interval shows a misfit - too little or too much variability, a wrong shape.

The simulations are the model's: replicated observations drawn in
``generated_quantities`` (one data set per posterior draw). For the classic VPC they
should come from *new* subjects (new random effects drawn from the population
distribution); replicates of the observed subjects (their fitted random effects)
give a milder, individual-level check. Prediction correction (``pred=``: the
population predictions, typical parameters and no random effects) removes the
spread due to doses and covariates differing between subjects within a bin.

:func:`vpc` computes (numbers, :class:`VPCResult`); :meth:`VPCResult.plot` draws
(matplotlib, imported only then).
"""

from dataclasses import dataclass

import numpy as np

from ..errors import DataError

__all__ = ["vpc", "VPCResult"]


@dataclass(eq=False, repr=False)    # (arrays: compared by identity; __repr__ below)
class VPCResult:
    """The numbers of a VPC (see :func:`vpc`). Arrays over ``n_bins`` time bins and the
    ``n_probs`` percentiles ``probs``:

    * ``edges`` (n_bins + 1) the bin limits; ``x`` the median time of each bin's
      observations; ``n_obs`` their number;
    * ``observed`` (n_bins, n_probs): the percentiles of the observations;
    * ``simulated`` (n_bins, n_probs, 3): for each percentile of the simulated data
      sets, its lower limit, median and upper limit over the simulations (the
      central ``ci`` interval);
    * ``outside`` (n_bins, n_probs): an observed percentile outside its interval;
    * ``observations``: (times, values) of the observations (prediction-corrected
      when ``pred`` was given), for the plot.
    """

    edges: np.ndarray
    x: np.ndarray
    n_obs: np.ndarray
    probs: np.ndarray
    ci: float
    observed: np.ndarray
    simulated: np.ndarray
    observations: tuple
    pred_corrected: bool

    @property
    def outside(self):
        lo, hi = self.simulated[..., 0], self.simulated[..., 2]
        return (self.observed < lo) | (self.observed > hi)

    def to_dataframe(self):
        """One row per bin and percentile: bin, time, n, prob, observed, sim_lo,
        sim_median, sim_hi, outside."""
        import pandas as pd
        B, P = self.observed.shape
        return pd.DataFrame({
            "bin": np.repeat(np.arange(B), P), "time": np.repeat(self.x, P),
            "n": np.repeat(self.n_obs, P), "prob": np.tile(self.probs, B),
            "observed": self.observed.ravel(), "sim_lo": self.simulated[..., 0].ravel(),
            "sim_median": self.simulated[..., 1].ravel(),
            "sim_hi": self.simulated[..., 2].ravel(), "outside": self.outside.ravel()})

    def __repr__(self):
        return (f"VPCResult({len(self.x)} bins, percentiles {list(self.probs)}, "
                f"{int(self.outside.sum())} observed percentiles outside their "
                f"{self.ci:.0%} intervals)")

    def plot(self, ax=None, *, points=True, log=False, xlabel="time",
             ylabel="observation"):
        """Draw the VPC on ``ax`` (a new figure when None); returns the axes.

        Shaded bands: the ``ci`` intervals of the simulated percentiles (the median's
        darker); lines: the observed percentiles (median solid, others dashed),
        red markers where outside their band; dots: the observations."""
        import matplotlib.pyplot as plt
        if ax is None:
            _, ax = plt.subplots(figsize=(7, 4.5))
        if points:
            t, y = self.observations
            ax.plot(t, y, "o", color="0.55", ms=3, alpha=0.6, label="observations")
        mid = int(np.argmin(np.abs(np.asarray(self.probs) - 0.5)))
        for j, p in enumerate(self.probs):
            color = "tab:red" if j == mid else "tab:blue"
            ax.fill_between(self.x, self.simulated[:, j, 0], self.simulated[:, j, 2],
                            color=color, alpha=0.25, lw=0,
                            label=f"simulated {100 * p:g}th pct, {self.ci:.0%} interval")
            ax.plot(self.x, self.observed[:, j], "-" if j == mid else "--", color="k",
                    lw=1.5, label=f"observed {100 * p:g}th pct")
            out = self.outside[:, j]
            if out.any():
                ax.plot(self.x[out], self.observed[out, j], "o", mfc="none",
                        mec="tab:red", ms=9, mew=1.5)
        if log:
            ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(("prediction-corrected " if self.pred_corrected else "") + ylabel)
        ax.legend(fontsize="small", frameon=False)
        return ax


def _simulations(fit_or_simulations, name, n_obs):
    """The simulated data sets as an (n_sim, n_obs) array."""
    if name is not None:
        try:
            sims = fit_or_simulations[name]
        except (KeyError, TypeError, IndexError) as e:
            raise DataError(f"vpc: no simulated quantity {name!r} in the fit ({e})") \
                from None
    else:
        sims = fit_or_simulations
    sims = np.asarray(sims, dtype=float)
    if sims.ndim < 2 or sims.shape[-1] != n_obs:
        raise DataError(f"vpc: the simulations must be an array (..., {n_obs}) - one "
                        f"simulated value per observation in the last axis - got shape "
                        f"{sims.shape}")
    return sims.reshape(-1, n_obs)


def _edges(times, bins):
    if np.ndim(bins) == 0:
        k = int(bins)
        if k < 1:
            raise DataError(f"vpc: bins must be >= 1 or an array of bin edges, got {bins}")
        # quantile bins: about the same number of observations in each
        e = np.unique(np.quantile(times, np.linspace(0, 1, k + 1)))
        if len(e) == 1:
            e = np.array([e[0], e[0]])
        return e
    e = np.asarray(bins, dtype=float)
    if e.ndim != 1 or len(e) < 2 or np.any(np.diff(e) <= 0):
        raise DataError("vpc: bins must be a number of bins or increasing bin edges, got "
                        f"{bins!r}")
    return e


def vpc(fit_or_simulations, observed, times, *, name=None, bins=8,
        probs=(0.05, 0.5, 0.95), ci=0.9, pred=None, sim_pred=None):
    """A visual predictive check: per time bin, the percentiles ``probs`` of the
    observations against the distribution of the same percentiles over simulated
    data sets.

    Parameters
    ----------
    fit_or_simulations : simulated data sets, an array ``(..., n_obs)`` (e.g. draws
        of replicated observations, chains x draws x n_obs), or a fit with
        ``name`` the replicated quantity (``fit[name]``).
    observed, times : the observations and their times (n_obs each); NaN
        observations are left out of the observed percentiles.
    bins : the number of bins (edges at quantiles of the times: equal counts) or the
        bin edges (an observation at an inner edge goes to the bin on its right;
        the last bin includes its upper edge).
    probs : the percentiles (fractions), default 5th, 50th, 95th.
    ci : the width of the central interval of each simulated percentile.
    pred : population predictions per observation: prediction-corrected VPC, each
        observed and simulated value multiplied by ``median(pred in its bin) /
        pred``; ``sim_pred`` the same for the simulations if they differ (default
        ``pred``).

    Returns a :class:`VPCResult` (``.plot()`` draws it).

    >>> import numpy as np, stanlite as sl
    >>> rng = np.random.default_rng(1)
    >>> t = np.repeat([1.0, 2.0, 4.0, 8.0], 50)
    >>> conc = 10 * np.exp(-0.2 * t)
    >>> sims = conc * np.exp(0.2 * rng.standard_normal((400, t.size)))
    >>> obs = conc * np.exp(0.2 * rng.standard_normal(t.size))
    >>> v = sl.pk.vpc(sims, obs, t, bins=[0, 1.5, 3, 6, 9])
    >>> v.x.tolist(), v.n_obs.tolist()
    ([1.0, 2.0, 4.0, 8.0], [50, 50, 50, 50])
    >>> v.simulated.shape, int(v.outside.sum())
    ((4, 3, 3), 0)
    """
    observed = np.asarray(observed, dtype=float)
    times = np.asarray(times, dtype=float)
    if observed.ndim != 1 or times.shape != observed.shape:
        raise DataError(f"vpc: observed and times must be vectors of the same length, "
                        f"got shapes {observed.shape} and {times.shape}")
    if not np.all(np.isfinite(times)):
        raise DataError("vpc: times must be finite")
    n = observed.size
    sims = _simulations(fit_or_simulations, name, n)
    probs = np.asarray(probs, dtype=float)
    if probs.ndim != 1 or np.any((probs <= 0) | (probs >= 1)):
        raise DataError(f"vpc: probs must be fractions in (0, 1), got {probs.tolist()}")
    if not 0 < ci < 1:
        raise DataError(f"vpc: ci must be in (0, 1), got {ci}")
    edges = _edges(times, bins)
    which = np.clip(np.searchsorted(edges, times, side="right") - 1, 0, len(edges) - 2)
    inside = (times >= edges[0]) & (times <= edges[-1])
    if pred is not None:
        observed, sims = _pred_correct(observed, sims, pred, sim_pred, which, n)
    B = len(edges) - 1
    keep = [b for b in range(B) if np.any(inside & (which == b))]
    x, n_obs, obs_p, sim_p = [], [], [], []
    lo_hi = [(1 - ci) / 2, 0.5, (1 + ci) / 2]
    for b in keep:
        idx = np.flatnonzero(inside & (which == b))
        x.append(float(np.median(times[idx])))
        ok = idx[np.isfinite(observed[idx])]
        n_obs.append(len(ok))
        obs_p.append(np.quantile(observed[ok], probs) if len(ok) else
                     np.full(len(probs), np.nan))
        per_sim = np.quantile(sims[:, idx], probs, axis=1)        # (n_probs, n_sim)
        sim_p.append(np.quantile(per_sim, lo_hi, axis=1).T)      # (n_probs, 3)
    return VPCResult(edges, np.array(x), np.array(n_obs), probs, ci, np.array(obs_p),
                     np.array(sim_p), (times, observed), pred is not None)


def _pred_correct(observed, sims, pred, sim_pred, which, n):
    """Bergstrand et al.'s prediction correction: value * median(PRED in bin) / PRED."""
    def factor(p, what):
        p = np.asarray(p, dtype=float)
        if p.shape != (n,):
            raise DataError(f"vpc: {what} must have one value per observation ({n}), "
                            f"got shape {p.shape}")
        if np.any(~(p > 0)):
            raise DataError(f"vpc: {what} must be > 0 (population predictions), got "
                            f"{p[~(p > 0)][0]:g}")
        med = np.zeros(n)
        for b in np.unique(which):
            sel = which == b
            med[sel] = np.median(p[sel])
        return med / p
    fo = factor(pred, "pred")
    fs = fo if sim_pred is None else factor(sim_pred, "sim_pred")
    return observed * fo, sims * fs
