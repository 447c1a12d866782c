"""The inference front door: ``model.sample(...)`` and the other ways to fit a model.

The layer above both the model and the samplers (docs/architecture.md): each function
here takes a :class:`~stanlite.Model`, checks its arguments once
(:mod:`stanlite.arguments`), runs a sampler, an optimizer or an approximation from
``stanlite.samplers`` (or the prior/generated-quantities work of
:mod:`stanlite.workflow`), and wraps the result in a :class:`~stanlite.fit.Fit` or
:class:`~stanlite.approx_fit.ApproximateFit`.

User code calls them as methods, ``model.sample(chains=4)``: :data:`FRONT_DOORS` below
names them, and :func:`stanlite.model.install_front_doors` makes each a method of
``Model`` that resolves to the function registered here. So ``stanlite/model.py``, the
log-density protocol, imports neither the fits nor the samplers (the loops model.py
<-> fit.py and model.py -> samplers -> model.py of issue 23 are gone), and the
import-linter contracts of pyproject.toml hold the order. ``import stanlite``
imports this module, which imports the samplers only when a method runs (numba and
scipy.optimize stay unloaded until then: tests/test_lazy_imports.py).

>>> import stanlite as sl
>>> sl.Model.sample is sample
True
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from .arguments import no_unknown
from .errors import ArgumentError
from .model import Model, install_front_doors

if TYPE_CHECKING:                       # annotations only
    from .approx_fit import ApproximateFit
    from .fit import Fit

__all__ = ["sample", "generate_quantities", "sample_prior_predictive", "variational",
           "optimize", "laplace", "pathfinder", "FRONT_DOORS"]


class _DefaultDelta(float):
    """``sample``'s ``adapt_delta`` when not given: 0.8 (Stan's) for NUTS and static
    HMC, ``samplers.rhmc.ADAPT_DELTA`` for Riemannian HMC (told apart by identity)."""

    def __repr__(self):
        return "0.8 (rhmc: 0.99)"


_DEFAULT_DELTA = _DefaultDelta(0.8)


# ---- the front doors ----------------------------------------------------------------------
def sample(model: Model, chains: int = 4, draws: int | None = None, warmup: int = 1000,
           seed: int | None = None,
           metric: Literal["diag_e", "dense_e", "unit_e"] = "diag_e",
           adapt_delta: float | None = _DEFAULT_DELTA, max_treedepth: int = 10,
           init: Any = None, thin: int = 1, save_warmup: bool = False,
           progress: bool = True, parallel: bool = True, executor: Any = None,
           sampler: Literal["nuts", "hmc", "rhmc"] = "nuts",
           resume_from: Fit | str | os.PathLike | None = None,
           inv_metric: np.ndarray | None = None, stepsize: float = 1.0,
           sampler_options: Mapping[str, Any] | None = None,
           blas_threads: int | None = None, max_workers: int | None = None,
           data_changed_ok: bool = False,
           adaptation: Literal["stan", "nutpie", "nutpie-lowrank"] = "stan",
           **unknown: Any) -> Fit:
    """Sample the posterior with NUTS (default; ``sampler="hmc"``: static HMC),
    with Stan's warmup. Arguments have cmdstanpy's meanings; ``seed`` is split
    into per-chain streams (same draws serial or parallel); ``resume_from=fit``
    continues an interrupted run or extends a finished one (``draws`` larger), with
    the run's settings: fewer ``draws``, or a ``warmup``, ``metric``,
    ``adapt_delta`` or ``adaptation`` other than both its default and the run's,
    is an ArgumentError.
    Returns a :class:`~stanlite.fit.Fit`. ``init``: None (uniform(-2, 2) on the
    unconstrained space), a radius, a possibly partial dict of parameter values,
    an unconstrained vector, or a list of those, one per chain
    (:mod:`stanlite.samplers.inits`). Every argument is checked before a chain
    starts (an :class:`~stanlite.ArgumentError` naming it).

    ``sampler="rhmc"``: Riemannian HMC with the SoftAbs metric (the local Hessian,
    by nested AD) and NUTS trajectories, ``adapt_delta`` 0.99 unless given
    (:data:`stanlite.samplers.rhmc.ADAPT_DELTA`); the step size adapts, and
    SoftAbs's alpha when "auto" (``metric`` and ``inv_metric`` are ignored).
    ``sampler_options`` (rhmc only): ``alpha`` (SoftAbs sharpness; "auto": from the
    first Hessian, then after each warmup transition until the first window's end
    and at each window's end but the last from the Hessians at the latter half of the
    warmup's draws, bounded there to a metric condition number of 300),
    ``adapt_alpha`` (default: whether alpha is "auto"), ``num_steps``
    (None: NUTS; an int: static trajectories of that many steps),
    ``fixed_point_tol`` (1e-8), ``max_fixed_point`` (50) and ``max_halvings`` (3)
    of the implicit leapfrog, ``min_int_time`` (NUTS trajectories last at least this
    long in the metric's time; "auto": chosen at each warmup window's end but the
    last from how much the metric understates the draws' spread, 0 on a Gaussian;
    0: the plain U-turn criterion) and ``adapt_min_int_time`` (default: whether it
    is "auto"). See :mod:`stanlite.samplers.rhmc`.

    ``adaptation``: how warmup adapts the metric. ``"stan"`` (default): Stan's
    windowed variances of the draws. ``"nutpie"``: nutpie's diagonal estimate from
    the draws and their gradients, ``sqrt(var(draws) / var(gradients))``, updated
    at every iteration from the start over a short trailing window; it reaches a
    good metric in fewer warmup iterations (``warmup=300`` is often enough;
    ``benchmarks/adaptation.py``). ``"nutpie-lowrank"``: that diagonal times a
    low-rank correction from the same window, a dense metric (``metric`` may be
    left out). See :class:`stanlite.samplers.adaptation.GradientAdaptation`.

    ``executor``: any ``concurrent.futures.Executor`` or a Dask ``Client``.
    ``max_workers``: processes of the default pool (default: one per chain, at
    most one per core); a run too small to gain from processes runs its chains
    in this process instead (``STANLITE_POOL_COST``, see
    :mod:`stanlite.samplers.runner`). ``blas_threads``: BLAS threads per chain
    (default: 1, in
    worker processes, so parallel chains do not oversubscribe the cores, and in
    this process for the duration of the run, since a model's small matrices run
    slower with threads; ``blas_threads=k`` allows k). Ctrl-C returns the draws so far
    (see :mod:`stanlite.samplers.runner`). ``resume_from`` a fit of a model with
    other parameters (names, shapes or constraints) is an ArgumentError naming
    them; a fit made with other data (another model instance, a loaded file) is a
    DataError naming the fields that differ, unless ``data_changed_ok=True``:
    either would mix two posteriors."""
    from .fit import Fit, check_resume_data, check_same_parameters
    from .samplers.runner import sample_chains
    if resume_from is not None:
        _check_resume_from(resume_from)
        # another model's chains: refused whatever data_changed_ok says (it is
        # about the data only)
        check_same_parameters(resume_from, model, "resume_from: the fit",
                              ArgumentError)
        check_resume_data(resume_from, model, data_changed_ok)
        # a resumed run keeps its settings; draws (if given) extends it
        st0 = resume_from.chain_states[0]
        max_treedepth = st0.max_treedepth
        sampler = st0.sampler
        draws = st0.num_draws if draws is None else draws
        _check_resume_settings(st0, draws=draws, warmup=warmup, metric=metric,
                               adapt_delta=adapt_delta, adaptation=adaptation)
        adaptation = getattr(st0, "adaptation", "stan")
        warmup = st0.num_warmup
    elif draws is None:
        draws = 1000
    # every argument checked here, before a chain starts (stanlite/arguments.py)
    settings, run = _sample_arguments(
        model, chains=chains, draws=draws, warmup=warmup, seed=seed, metric=metric,
        adapt_delta=adapt_delta, max_treedepth=max_treedepth, init=init, thin=thin,
        save_warmup=save_warmup, progress=progress, parallel=parallel,
        sampler=sampler, inv_metric=inv_metric, stepsize=stepsize,
        blas_threads=blas_threads, max_workers=max_workers, executor=executor,
        data_changed_ok=data_changed_ok, adaptation=adaptation,
        sampler_options=sampler_options, unknown=unknown,
        resumed=resume_from is not None)
    states, gq_seeds, interrupted = sample_chains(model, settings, resume_from=resume_from,
                                                  **run)
    return Fit(model, states, gq_seeds, interrupted=interrupted, method=settings.sampler,
               max_treedepth=settings.max_treedepth)


def generate_quantities(model: Model, fit: Fit, seed: int | None = None) -> Fit:
    """A new fit with ``fit``'s parameter draws and this model's transformed
    parameters and generated quantities (cmdstanpy's standalone generated
    quantities); this model may have other data (out-of-sample prediction). See
    :func:`stanlite.workflow.generate_quantities`."""
    from . import workflow
    return workflow.generate_quantities(model, fit, seed=seed)


def sample_prior_predictive(model: Model, draws: int = 1000, seed: int | None = None,
                            check_proper: bool = True, **kwargs: Any) -> Fit:
    """NUTS on the prior (``log_prior``, else ``log_prob`` minus the declared
    ``log_likelihood``) and the generated quantities at each prior draw: a fit
    whose ArviZ export has the ``prior`` and ``prior_predictive`` groups.
    ``kwargs``: :meth:`sample`'s. See :func:`stanlite.workflow.sample_prior_predictive`."""
    from . import workflow
    return workflow.sample_prior_predictive(model, draws=draws, seed=seed,
                                   check_proper=check_proper, **kwargs)


def variational(model: Model, method: Literal["meanfield", "fullrank"] = "meanfield",
                seed: int | None = None, **kwargs: Any) -> ApproximateFit:
    """Stan's ADVI (``method="meanfield"`` or ``"fullrank"``): a Gaussian on the
    unconstrained space fitted by stochastic gradient ascent on the ELBO. Returns
    a fit with the same ``fit[name]``/``summary()``/``to_arviz()`` interface (draws
    from the approximation). See :func:`stanlite.samplers.advi.variational`."""
    from .samplers import advi
    no_unknown("variational", kwargs, advi.variational)
    return advi.variational(model, method=method, seed=seed, **kwargs)


def optimize(model: Model, method: Literal["lbfgs", "bfgs", "newton"] = "lbfgs",
             jacobian: bool = False, seed: int | None = None, **kwargs: Any) -> Any:
    """The posterior mode (MAP; ``jacobian=True``: the mode on the unconstrained
    space) or penalised MLE with L-BFGS on the AD gradient. ``opt[name]`` gives the
    estimate. See :func:`stanlite.samplers.optimize.optimize`."""
    from .samplers import optimize as _optimize
    no_unknown("optimize", kwargs, _optimize.optimize)
    return _optimize.optimize(model, method=method, jacobian=jacobian, seed=seed, **kwargs)


def laplace(model: Model, mode: Any = None, draws: int = 1000, seed: int | None = None,
            **kwargs: Any) -> ApproximateFit:
    """Normal approximation at the mode with the nested-AD Hessian; draws on the
    constrained scale. See :func:`stanlite.samplers.optimize.laplace`."""
    from .samplers import optimize as _optimize
    return _optimize.laplace(model, mode=mode, draws=draws, seed=seed, **kwargs)


def pathfinder(model: Model, seed: int | None = None, **kwargs: Any) -> ApproximateFit:
    """Pathfinder variational inference (single- or multi-path with PSIS
    resampling). See :func:`stanlite.samplers.pathfinder.pathfinder`."""
    from .samplers import pathfinder as _pathfinder
    no_unknown("pathfinder", kwargs, _pathfinder.pathfinder)
    return _pathfinder.pathfinder(model, seed=seed, **kwargs)


# ---- sample's arguments --------------------------------------------------------------------
def _check_resume_settings(st0, **given):
    """A resumed run keeps its settings and its draws: ``draws`` may only extend it,
    and ``warmup``, ``metric``, ``adapt_delta`` or ``adaptation`` other than their
    defaults must be the run's: refused rather than silently ignored. (A default
    value given explicitly cannot be told from one left out, so it is accepted.)"""
    draws = given.pop("draws")
    if _is_int(draws) and draws < st0.num_draws:
        raise ArgumentError(f"draws={draws} is fewer than the {st0.num_draws} draws per "
                            "chain of the run resume_from continues: resume_from "
                            "continues or extends a run (draws at least "
                            f"{st0.num_draws}), it does not shorten it")
    # (the defaults of sample's signature: the option list is not spelled out again)
    defaults = {k: p.default for k, p in inspect.signature(sample).parameters.items()}
    run = {"warmup": st0.num_warmup, "metric": getattr(st0, "metric", None),
           "adapt_delta": getattr(st0, "adapt_delta", None),
           "adaptation": getattr(st0, "adaptation", "stan")}
    for k, v in given.items():
        if run[k] is not None and v != defaults[k] and v != run[k]:
            raise ArgumentError(f"{k}={v!r} differs from the run resume_from continues "
                                f"({k}={run[k]!r}): a resumed run keeps its settings; "
                                f"leave {k} out (or start a new run without resume_from)")


def _is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _check_resume_from(fit):
    """``resume_from`` is a fit of Markov chains (``model.sample``, ``sl.load_fit``)."""
    try:
        states = fit.chain_states
    except AttributeError as e:
        # an approximation says itself why it has no chains
        why = f": {e}" if hasattr(type(fit), "chain_states") else ""
        raise ArgumentError(f"resume_from must be a fit made by model.sample (or "
                            f"sl.load_fit of one), got {type(fit).__name__}{why}") from None
    if not isinstance(states, (list, tuple)) or not states:
        raise ArgumentError(f"resume_from must be a fit with at least one chain, got "
                            f"{type(fit).__name__} with chain_states={states!r}")
    if getattr(fit, "kind", "posterior") == "prior":
        raise ArgumentError("resume_from is a fit of the prior (sample_prior_predictive): "
                            "its chains cannot be continued on the posterior")


def _sample_arguments(model, resumed, **a):
    """:meth:`Model.sample`'s arguments checked (:mod:`stanlite.arguments`): the
    chains' :class:`~stanlite.samplers.settings.ChainSettings` (checked as it is
    made) and the run's own arguments in the form the runner takes; ``init``
    becomes one init per chain (each checked)."""
    from . import arguments as A
    from .samplers.inits import per_run
    from .samplers.settings import SAMPLER_DEFAULT, ChainSettings
    # a typo (draw=) names the closest argument, as the other methods do
    A.no_unknown("sample", a.pop("unknown"), sample)
    chains = A.positive_int("chains", a["chains"])
    seed = A.seed("seed", a["seed"], sequence=False)
    delta = a["adapt_delta"]
    settings = ChainSettings(
        num_warmup=a["warmup"], num_draws=a["draws"], thin=a["thin"],
        sampler=a["sampler"], metric=a["metric"], inv_metric=a["inv_metric"],
        stepsize=a["stepsize"], max_treedepth=a["max_treedepth"],
        # not given: the sampler's own (ChainSettings asks the kernel)
        adapt_delta=SAMPLER_DEFAULT if delta is _DEFAULT_DELTA else delta,
        save_warmup=a["save_warmup"], adaptation=a["adaptation"],
        sampler_options=a["sampler_options"], dim=model.dim)
    for k in ("progress", "parallel", "data_changed_ok"):
        A.boolean(k, a[k])
    A.executor("executor", a["executor"])      # (the runner converts a Client)
    run = dict(chains=chains, seed=seed, progress=a["progress"], parallel=a["parallel"],
               executor=a["executor"])
    for k in ("blas_threads", "max_workers"):      # None: the runner's default
        run[k] = None if a[k] is None else A.positive_int(k, a[k])
    kept = -(-settings.num_draws // settings.thin) + \
        (settings.num_warmup if settings.save_warmup else 0)
    A.fits_in_memory("chains x draws / thin" + (" (+ warmup)" if settings.save_warmup
                                                else ""),
                     chains * kept, model.dim + 9)    # the draw and its 9 statistics
    # a resumed chain has its point already; else one init for all chains, or a
    # list: one per chain (the runner picks them)
    run["init"] = None if resumed else per_run(model, a["init"], chains, "chains")
    return settings, run


#: The methods ``Model`` gets from this layer: the only list of the front doors.
FRONT_DOORS = {f.__name__: f for f in (sample, generate_quantities, sample_prior_predictive,
                                       variational, optimize, laplace, pathfinder)}
install_front_doors(FRONT_DOORS)
