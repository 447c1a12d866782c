"""The result of an approximate method: ADVI, Laplace, Pathfinder, optimisation.

An :class:`ApproximateFit` holds independent draws from an approximation ``q`` of the
posterior on the unconstrained space (or a single point, for an optimum), and gives
them the interface of the NUTS :class:`~stanlite.fit.Fit`: ``fit[name]`` is an array
``(1, draws, *shape)`` for every parameter, transformed parameter and generated
quantity (computed by ``model.output(x, rng)`` per unconstrained draw, as for NUTS),
``fit.summary()`` the same DataFrame, ``fit.to_arviz()`` an ``InferenceData``. What
differs is what can be checked: there is no Markov chain, so no R-hat or
divergences; instead, when the method knows the approximation's density, each draw
carries

* ``log_p`` - the model's log density at the draw (unconstrained space, log-Jacobian
  of the transforms included), also reported as ArviZ's ``lp``;
* ``log_q`` - the approximation's normalised log density at the draw,

and ``diagnose()`` reports the Pareto k-hat of the importance ratios
``log_p - log_q`` (Pareto-smoothed importance sampling: Vehtari et al. 2024, "Pareto
smoothed importance sampling", JMLR 25(72); for variational inference: Yao et al.
2018, "Yes, but did it work?: evaluating variational inference", ICML). The ratios
are the weights that would turn draws from ``q`` into draws from the posterior; the
fatter their right tail, the further ``q`` is from the posterior where it matters. A
k-hat below 0.5 means the approximation is good (and reweighting it is reliable);
above ``min(1 - 1/log10(S), 0.7)`` (``S`` draws) the importance-sampling estimates do
not converge at a usable rate and the approximation should not be trusted.

Note that Stan writes ``log_g__`` without the normal's normalising constant and
log-determinant; ``log_q`` here is the full normalised log density, so that
``log_p - log_q`` is an importance log weight on the right scale (its mean is the
ELBO for ADVI).

Each method stores what it has learned in ``fit.extras`` (for ADVI: the ELBO
history, the mean, the scale or covariance, the step size ``eta``...), and
method-specific sentences for ``diagnose()`` in ``fit.notes``. Every method builds
its result the same way, from unconstrained draws::

    >>> import numpy as np
    >>> import stanlite as sl
    >>> from stanlite.approx_fit import ApproximateFit
    >>> class Normal(sl.Model):
    ...     mu = sl.param.real()
    ...     sigma = sl.param.real(lower=0)
    ...     def log_prob(self, mu, sigma):
    ...         return sl.normal_lpdf(mu, 0, 1) + sl.lognormal_lpdf(sigma, 0, 1)
    >>> m = Normal()
    >>> x = 0.5 * np.random.default_rng(1).standard_normal((1000, 2))  # q: too narrow
    >>> log_q = np.sum(-0.5 * (x / 0.5) ** 2 - np.log(0.5 * np.sqrt(2 * np.pi)), axis=1)
    >>> log_p = np.array([m.log_density(xi) for xi in x])    # the posterior is N(0, I)
    >>> fit = ApproximateFit(m, x, "example", log_p=log_p, log_q=log_q, seed=1)
    >>> fit["sigma"].shape, fit.names, fit.method
    ((1, 1000), ['mu', 'sigma'], 'example')
    >>> fit.summary().loc["mu", ["mean", "sd"]].round(1).tolist()    # sd: 0.5, not 1
    [-0.0, 0.5]
    >>> print(fit.diagnose())          # doctest: +NORMALIZE_WHITESPACE
    Pareto k-hat of the importance ratios log_p - log_q over 1000 draws: 0.90 > 0.67:
    do not trust this approximation; the approximation is far from the posterior where
    it matters; sample with NUTS.
    PSIS effective sample size: 46 of 1000 draws.
"""

import numpy as np

from .fit import Fit
from .fit_tables import _arviz, output_arrays

__all__ = ["ApproximateFit", "pareto_k_threshold"]

#: Pareto k-hat below which an approximation is good (Yao et al. 2018, section 2.3)
K_GOOD = 0.5

#: advice per method family when k-hat is above the threshold
_ADVICE = {
    "meanfield": "the mean-field Gaussian is far from the posterior where it matters "
                 "(typically too narrow: mean-field ADVI underestimates variances and "
                 "ignores correlations). Try method='fullrank', reparameterise (e.g. "
                 "non-centred), or sample with NUTS (it can start at the approximation's "
                 "mean: init=fit.extras['mean'] as a vector)",
    "fullrank": "the full-rank Gaussian is far from the posterior where it matters "
                "(skewed, heavy-tailed or funnel-shaped posteriors are not Gaussian on "
                "the unconstrained space). Reparameterise, or sample with NUTS",
    "laplace": "the posterior is far from the normal approximation at the mode. Use "
               "the draws only as a rough guide (or as NUTS inits) and sample with NUTS",
    "pathfinder": "the Gaussians along the optimisation path do not cover the "
                  "posterior. Try more paths, or sample with NUTS initialised at the "
                  "Pathfinder draws",
}
_ADVICE_DEFAULT = ("the approximation is far from the posterior where it matters; "
                   "sample with NUTS")


#: diagnose()'s words for k-hat below K_GOOD and below the threshold (pareto_k_sentence;
#: the words above it are the method's advice, _ADVICE)
_K_WORDS = dict(
    good="the approximation is close to the posterior; its estimates (and "
    "PSIS-reweighted ones, fit.psis()) are reliable.",
    usable="the approximation is usable for means and rough intervals, but variances "
    "and tail quantiles may be off; PSIS-reweighted estimates (fit.psis()) are more "
    "accurate.")


def pareto_k_threshold(n):
    """The sample-size dependent k-hat threshold ``min(1 - 1/log10(n), 0.7)``
    (Vehtari et al. 2024, section 3.2.4): above it, importance-sampling estimates from
    ``n`` draws are unreliable.

    >>> round(pareto_k_threshold(1000), 4), pareto_k_threshold(10 ** 6)
    (0.6667, 0.7)
    """
    if n <= 10:
        return 0.0
    return float(min(1.0 - 1.0 / np.log10(n), 0.7))


def pareto_k_sentence(head, k, thr, good, usable, bad):
    """``head`` (what k-hat ``k`` is of) completed by the band ``k`` falls in, its
    bounds and the words for it: ``good`` below :data:`K_GOOD`, ``usable`` below
    the sample-size threshold ``thr`` (:func:`pareto_k_threshold`), ``bad`` above
    it; or that ``k`` could not be estimated. (One wording of the bands for every
    approximation's ``diagnose()``.)"""
    if not np.isfinite(k):
        return head + ": could not be estimated (too few finite ratios)."
    if k < K_GOOD:
        return f"{head} < {K_GOOD}: {good}"
    if k < thr:
        return f"{head}, between {K_GOOD} and {thr:.2f}: {usable}"
    more = " (k > 1: the ratios have no finite mean)" if k > 1 else ""
    return f"{head} > {thr:.2f}{more}: {bad}"


class ApproximateFit(Fit):
    """Draws from an approximation of the posterior, with the ``Fit`` interface.

    Parameters
    ----------
    model : the model (anything with the log-density protocol and ``output``).
    unconstrained_draws : array ``(draws, dim)`` (or ``(1, draws, dim)``) of points of
        the unconstrained space.
    method : the method's name (``"meanfield"``, ``"fullrank"``, ``"laplace"``,
        ``"pathfinder"``, ``"optimize"``...), used by ``repr`` and ``diagnose``.
    log_p, log_q : optional arrays ``(draws,)``: the model's log density at each draw
        (Jacobian included) and the approximation's normalised log density.
    extras : optional dict of what the method learned (kept as ``fit.extras``).
    seed : seed (int, ``SeedSequence`` or ``Generator``) of the generated quantities.
    notes : optional list of sentences for ``diagnose()`` (convergence and the like).
    stats : optional dict ``name -> (draws,)`` of further per-draw statistics
        (``fit[name]`` and ``sample_stats`` under that name).
    """

    def __init__(self, model, unconstrained_draws, method, *, log_p=None, log_q=None,
                 extras=None, seed=None, notes=None, stats=None):
        self.model = model
        self.method = str(method)
        self.interrupted = False
        self.max_treedepth = None
        self._idata = None
        x = np.asarray(unconstrained_draws, dtype=np.float64)
        dim = getattr(model, "dim", None)
        if x.ndim == 3 and x.shape[0] == 1:
            x = x[0]
        if x.ndim == 1 and dim is not None and x.shape == (dim,):
            x = x[None, :]                      # a single point (an optimum)
        if x.ndim != 2 or (dim is not None and x.shape[1] != dim):
            raise ValueError(f"unconstrained_draws must be an array (draws, {dim}), got "
                             f"shape {np.shape(unconstrained_draws)}")
        n = x.shape[0]
        self.extras = dict(extras or {})
        self.notes = list(notes or [])
        per_draw = {}
        for name, v in (("log_p__", log_p), ("log_q__", log_q)):
            if v is not None:
                per_draw[name] = self._per_draw(v, n, name[:-2])
        if log_p is not None:
            per_draw = {"lp__": per_draw["log_p__"], **per_draw}
        for name, v in (stats or {}).items():
            per_draw[name] = self._per_draw(v, n, name)
        self.arviz_stats = {**{"lp__": "lp", "log_p__": "log_p", "log_q__": "log_q"},
                            **{k: k for k in (stats or {})}}
        self._stats = {k: v[None, :] for k, v in per_draw.items()}
        self.unconstrained_draws = x[None, :, :]
        self.num_chains, self.num_draws = 1, n
        gen = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        # draws far in the tails of a wide approximation may overflow a transform
        # (exp of a large number): that is an infinite value, not an error
        with np.errstate(over="ignore", under="ignore"):
            self._draws = output_arrays(model, [x], [gen]) if n else {}
        self._psis = None

    @staticmethod
    def _per_draw(v, n, what):
        a = np.asarray(v, dtype=np.float64).reshape(-1)
        if a.shape != (n,):
            raise ValueError(f"{what} must have one value per draw ({n}), got shape "
                             f"{np.shape(v)}")
        return a

    # ---- what a Markov chain has and an approximation has not ---------------------------
    @property
    def chain_states(self):
        raise AttributeError(f"a {self.method} fit has no Markov chains to resume; start "
                             "NUTS from it with model.sample(init=...) instead")

    @property
    def step_size(self):
        raise AttributeError(f"a {self.method} fit has no step size (not an MCMC run)")

    @property
    def inv_metric(self):
        raise AttributeError(f"a {self.method} fit has no metric (not an MCMC run)")

    # ---- importance ratios ------------------------------------------------------------
    @property
    def log_p(self):
        """The model's log density at each draw, ``(draws,)``, or None."""
        v = self._stats.get("log_p__")
        return None if v is None else v[0]

    @property
    def log_q(self):
        """The approximation's log density at each draw, ``(draws,)``, or None."""
        v = self._stats.get("log_q__")
        return None if v is None else v[0]

    def psis(self):
        """Pareto-smoothed importance sampling of the ratios ``log_p - log_q``.

        Returns ``(log_weights, k)``: normalised smoothed log weights ``(draws,)``
        (``sum(exp(log_weights)) == 1``; draws where ``log_p`` is not finite get
        weight 0) and the Pareto shape estimate k-hat (arviz's ``psislw``, relative
        efficiency 1: the draws are independent). Raises ``ValueError`` if the
        method did not record ``log_p`` and ``log_q``.
        """
        if self._psis is None:
            lp, lq = self.log_p, self.log_q
            if lp is None or lq is None:
                raise ValueError(f"this {self.method} fit has no log_p/log_q per draw: "
                                 "no importance ratios to smooth")
            r = lp - lq
            ok = np.isfinite(r)
            lw = np.full(r.shape, -np.inf)
            k = np.nan
            if ok.sum() > 1:
                az = _arviz()
                w, k = az.psislw(r[ok] - np.max(r[ok]), reff=1.0)
                lw[ok] = w
                k = float(np.asarray(k))
            self._psis = (lw, k)
        return self._psis

    @property
    def pareto_k(self):
        """k-hat of the importance ratios (see :meth:`psis`), None without them."""
        if self.log_p is None or self.log_q is None:
            return None
        return self.psis()[1]

    # ---- words ------------------------------------------------------------------------
    def diagnose(self):
        """The method's own notes (convergence...), then the Pareto k-hat of the
        importance ratios with the thresholds of Yao et al. (2018) and Vehtari et al.
        (2024) and advice, the PSIS effective sample size, and non-finite densities."""
        msgs = list(self.notes)
        n = self.num_draws
        if n == 0:
            return "\n".join(msgs + ["No draws to diagnose."])
        lp = self.log_p
        if lp is not None and not np.all(np.isfinite(lp)):
            bad = int(np.sum(~np.isfinite(lp)))
            msgs.append(f"The log density is not finite at {bad} of {n} draws: the "
                        "approximation puts mass where the posterior has none (they get "
                        "importance weight 0).")
        if lp is not None and self.log_q is not None and n > 10:
            lw, k = self.psis()
            thr = pareto_k_threshold(n)
            ess = 1.0 / np.sum(np.exp(2 * lw[np.isfinite(lw)])) if np.isfinite(k) else 0.0
            # two decimals, three where two would print k equal to a threshold
            digits = 3 if round(k, 2) in (round(thr, 2), K_GOOD) else 2
            head = (f"Pareto k-hat of the importance ratios log_p - log_q over {n} draws: "
                    f"{k:.{digits}f}")
            advice = _ADVICE.get(self.method, _ADVICE_DEFAULT)
            msgs.append(pareto_k_sentence(
                head, k, thr, **_K_WORDS,
                bad=f"do not trust this approximation; {advice}."))
            if np.isfinite(k):
                msgs.append(f"PSIS effective sample size: {ess:.0f} of {n} draws.")
        elif n == 1:
            msgs.append("A point estimate: no uncertainty to check.")
        return "\n".join(msgs)

    # ---- ArviZ, saving ------------------------------------------------------------------
    def to_arviz(self):
        """``arviz.InferenceData`` as for NUTS (one chain): posterior, sample_stats
        (``lp``, ``log_p``, ``log_q`` and the method's per-draw statistics),
        log_likelihood, observed_data and constant_data; the posterior's attrs name
        the method."""
        if self._idata is None:
            idata = super().to_arviz()
            idata.posterior.attrs["inference_method"] = self.method
            self._idata = idata
        return self._idata

    def save(self, path):
        """Write the InferenceData (``arviz.from_netcdf`` reads it) plus a group
        ``stanlite_approximation`` with the unconstrained draws and the numeric
        extras (ELBO history, mean, covariance...). Returns the path. Written
        aside and renamed into place, as ``Fit.save`` (an existing file is never
        damaged; a failure is a FitFileError naming the path)."""
        import xarray as xr
        from ._fitio import write_netcdf
        idata = self.to_arviz()
        arrays = {"unconstrained_draws": self.unconstrained_draws[0]}
        for k, v in self.extras.items():
            a = np.asarray(v)
            if a.dtype.kind in "biuf":
                arrays[k] = a
        ds = xr.Dataset({k: ([f"{k}_dim_{i}" for i in range(v.ndim)], v)
                         for k, v in arrays.items()},
                        attrs={"method": self.method, "notes": "\n".join(self.notes)})
        groups = {g: idata[g] for g in idata.groups()}
        groups["stanlite_approximation"] = ds
        return write_netcdf(path, groups, attrs=getattr(idata, "attrs", None))

    def __repr__(self):
        k = self.pareto_k
        tail = "" if k is None or not np.isfinite(k) else f", pareto_k={k:.2f}"
        return (f"<ApproximateFit {self.method}: {self.num_draws} draws, "
                f"{len(self.names)} quantities{tail}>")
