"""The work around a fit: standalone generated quantities, the prior and its predictive.

* :func:`generate_quantities` (``model.generate_quantities(fit, seed=...)``,
  cmdstanpy's standalone generated quantities): the fit's parameter draws (its
  unconstrained draws, never re-sampled) run through ``model``'s transformed
  parameters and generated quantities. ``model`` may be built on other data - the
  same parameters, other covariates or another number of observations: out-of-sample
  prediction. The result is a new fit sharing the draws; its ArviZ export carries
  ``model``'s data.

* :func:`sample_prior_predictive` (``model.sample_prior_predictive(draws=..., seed=...)``):
  NUTS on the *prior*, the model's log density without its likelihood, then the
  generated quantities at every prior draw - so a replicated ``y_rep`` is a draw of
  the prior predictive distribution. The prior is, in this order:

  1. ``log_prior(self, <parameters, transformed parameters>)`` if the model defines
     it: the model states its prior itself (the clean split, and the only way when the
     likelihood cannot be written pointwise);
  2. else ``log_prob - sum(log_likelihood)``: the model's declared pointwise
     ``log_likelihood(self, ...)`` (the one ``arviz.loo`` reads) is taken to be exactly
     the likelihood terms of ``log_prob``. It must then be written with stanlite
     operations on its parameters (``sl.normal_lpdf(self.y, mu, sigma, reduce=False)``,
     ``sl.log``, ``np.log`` of a traced value...), not ``math.log`` or plain floats,
     and take parameters and transformed parameters only: it is differentiated.

  A model that declares neither is a ModelError saying so. The difference of 2. is
  retaped as any log density, but its replays are checked against the eager tape to
  1e-12 relative to the *difference*, while they round at ~1e-16 of the cancelling
  terms: where the likelihood is ~1e4 times the prior or more (the kidiq regression at
  a random point: terms ~1e6, prior ~1), the check fails and the prior runs on the
  eager tape (slower, same values), without a warning. A prior that is improper
  (flat in some direction, as ``p(beta) ∝ 1`` or a positive parameter without a
  prior) has nothing to sample: before sampling, every unconstrained coordinate is
  probed at +-10 and +-100 (the others at a fixed point drawn as Stan's initial
  values are: uniform(-2, 2)), and a log prior that does not decrease
  outwards there is a ModelError naming the element (``check_proper=False`` skips the
  probe). The returned fit's ``kind`` is ``"prior"``: ``to_arviz()`` puts its draws in
  the ``prior`` and ``prior_predictive`` groups (``sample_stats_prior`` for the
  sampler's statistics), and ``idata.extend(prior_fit.to_arviz())`` joins them to a
  posterior's InferenceData.
"""

import copy

import numpy as np

from .autodiff.var import value_of
from .errors import ArgumentError, DomainError, ModelError
from .model import _has_own_prior, _no_likelihood, likelihood_sum, log_prior

__all__ = ["generate_quantities", "sample_prior_predictive", "prior_model", "log_prior"]


# ---- standalone generated quantities -----------------------------------------------------
def generate_quantities(model, fit, seed=None):
    """A new fit with ``fit``'s draws and ``model``'s transformed parameters and
    generated quantities (see the module docstring). ``fit``: a fit of
    ``model.sample`` or ``sl.load_fit`` (with or without its model), or an
    approximation (ADVI, Laplace, Pathfinder). ``model`` must have the same
    parameters (names, shapes, constraints): an ArgumentError naming them otherwise.
    ``seed``: the generated quantities' random streams (one per chain, split as
    ``model.sample`` splits its seed); ``None`` draws fresh entropy."""
    from . import arguments as A
    from .approx_fit import ApproximateFit
    from .fit import Fit, check_same_parameters, fit_fingerprint, output_arrays
    if not isinstance(fit, Fit):
        raise ArgumentError(f"generate_quantities takes a fit (model.sample, sl.load_fit, "
                            f"an approximation), got {type(fit).__name__}")
    seed = A.seed("seed", seed, sequence=False)
    check_same_parameters(fit, model, "the fit given to generate_quantities", ArgumentError)
    new = copy.copy(fit)
    new.model = model
    new._idata = None
    new._whole = None
    if isinstance(fit, ApproximateFit):
        x = fit.unconstrained_draws[0]
        with np.errstate(over="ignore", under="ignore"):     # as ApproximateFit does
            new._draws = output_arrays(model, [x], [np.random.default_rng(seed)]) \
                if len(x) else {}
    else:
        new.gq_seeds = np.random.SeedSequence(seed).spawn(len(fit.gq_seeds))
        # the chains were drawn with the fit's data: a resumed run must not continue
        # them on this model's (fit_fingerprint, check_resume_data)
        new._sampled_fingerprint = fit_fingerprint(fit)
        new._build()
    return new


# ---- the prior -------------------------------------------------------------------------------
def prior_model(model):
    """A copy of ``model`` whose log density is its prior (:func:`log_prior`): the
    same data, parameters, blocks and generated quantities; its own retaped
    gradient (never the posterior's)."""
    if getattr(model, "_prior_only", False):
        return model
    prior = copy.copy(model)
    d = prior.__dict__
    d.pop("_retaped", None)                 # recorded for the posterior's density
    d["_prior_only"] = True
    return prior


def check_proper_prior(prior):
    """A ModelError if the log prior of ``prior`` (a :func:`prior_model`) does not
    decrease outwards along some unconstrained coordinate: probed at 10 and 100 in
    both directions, the other coordinates at a fixed point drawn from uniform(-2, 2). Flat (``p(beta) ∝ 1``) or growing (a positive
    parameter with no prior: the log-Jacobian grows) means improper. The tolerance
    allows for the rounding of ``log_prob - sum(log_likelihood)``, whose terms can be
    large far out."""
    names = prior.unconstrained_param_names()
    # from a generic point (Stan's uniform(-2, 2) initialisation, fixed here), not the
    # origin: at the origin a centred hierarchy has alpha_j = mu exactly, where its
    # (proper) prior is unbounded as the scale goes to 0 (the funnel's neck): the log
    # density grows along -log(tau), and eight schools' prior looked improper
    x0 = np.random.default_rng(20240502).uniform(-2.0, 2.0, prior.dim)
    for i in range(prior.dim):
        for sign in (1.0, -1.0):
            near = _probe(prior, x0, i, 10.0 * sign)
            far = _probe(prior, x0, i, 100.0 * sign)
            if near is None or far is None:
                continue            # undefined out there: no evidence of impropriety
            (lp_near, scale_near), (lp_far, scale_far) = near, far
            # log_prob - sum(log_likelihood) rounds at ~eps of the likelihood's size;
            # where that swamps the prior, the probe says nothing
            tol = 1e-6 + 1e-14 * (scale_near + scale_far)
            if tol > 1e-2:
                continue
            if lp_far >= lp_near - tol:
                where = "+" if sign > 0 else "-"
                raise ModelError(
                    f"the prior of {type(prior).__name__} looks improper: its log density "
                    f"(log_prob without the likelihood) does not decrease as the "
                    f"unconstrained {names[i]} goes to {where}infinity ({lp_near:.6g} at "
                    f"{where}10, {lp_far:.6g} at {where}100; flat or growing). A prior "
                    "predictive needs a proper prior: give that parameter a prior in "
                    "log_prob (or a proper log_prior), or pass check_proper=False if it "
                    "is proper but very wide")


def _probe(prior, x0, i, r):
    """``(log prior, size of its terms)`` at ``x0 + r e_i`` on plain floats, or None
    where it is undefined (a domain error, a non-finite value)."""
    x = x0.copy()
    x[i] = r
    try:
        with np.errstate(all="ignore"):
            lp = float(value_of(prior._log_density(x)))
            scale = 0.0
            if not _has_own_prior(prior):
                params, _ = prior._constrain(x, False)
                avail = {**params, **prior._transformed(params)}
                scale = abs(float(value_of(likelihood_sum(prior, avail))))
    except (DomainError, ArithmeticError, FloatingPointError):
        return None
    if not (np.isfinite(lp) and np.isfinite(scale)):
        return None
    return lp, scale


def check_declares_prior(model):
    """A ModelError unless ``model`` declares its prior (``log_prior``) or its
    likelihood (``log_likelihood``)."""
    if not _has_own_prior(model) and not callable(getattr(model, "log_likelihood", None)):
        raise _no_likelihood(model)


def sample_prior_predictive(model, draws=1000, seed=None, check_proper=True, **kwargs):
    """NUTS on ``model``'s prior, generated quantities at every draw (see the module
    docstring). ``kwargs``: :meth:`Model.sample`'s (``chains``, ``warmup``, ...;
    ``resume_from`` excepted). Returns a fit whose ``kind`` is ``"prior"``."""
    if "resume_from" in kwargs:
        raise ArgumentError("sample_prior_predictive does not take resume_from: draw a "
                            "new prior sample (it is cheap) with more draws")
    check_declares_prior(model)
    prior = prior_model(model)
    if check_proper:
        check_proper_prior(prior)
    fit = prior.sample(draws=draws, seed=seed, **kwargs)
    fit.model = model           # the user's model (its kind stays "prior")
    return fit
