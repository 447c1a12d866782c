"""One Markov chain as resumable plain data: warmup with adaptation, then sampling.

Everything a chain needs to continue is in :class:`ChainState` - position, log
density and gradient, the generator's bit state, the step size, the dual-averaging
accumulators, the Welford accumulator, the metric, the iteration counter and the
draws so far - as numbers, arrays, lists and dicts (picklable, savable). A chain
stopped after any iteration (Ctrl-C, a crash, an exhausted budget) and continued
from its state produces exactly the draws an uninterrupted run would: the
generator's state is snapshotted after each completed iteration, and an interrupted
iteration is discarded and rerun.

The transition kernels (NUTS, static HMC) see the model only through the
log-density protocol; the chain only through ``(point, info)``.
"""

import math

import numpy as np

from . import nuts
from .adaptation import (DualAveraging, GradientAdaptation, Welford, init_stepsize,
                         window_ends)
from .hamiltonian import NON_FINITE_DENSITY, Point, make_metric

__all__ = ["ChainState", "initialize", "run", "STAT_NAMES"]

#: per-iteration sampler statistics (Stan's names, ArviZ's in fit.py)
STAT_NAMES = ("lp__", "accept_stat__", "stepsize__", "treedepth__", "n_leapfrog__",
              "divergent__", "energy__", "energy_error__", "max_energy_error__")


class ChainState:
    """The complete, plain-data state of one chain (see module docstring)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def to_dict(self):
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d):
        return cls(**d)

    @property
    def done(self):
        return self.iteration >= self.num_warmup + self.num_draws


def _initial_point(model, init, rng, tries=100):
    """The chain's starting point ``(q, lp, grad)`` from ``init`` (uniform(-2, 2) on
    the unconstrained space, a radius, a possibly partial dict, a vector): the
    rules every method shares, in :func:`.inits.initial_point`."""
    from .inits import initial_point
    return initial_point(model, init, rng, tries=tries, what="the chain")


def initialize(model, chain_id, seed_seq, *, num_warmup, num_draws, thin=1,
               metric="diag_e", inv_metric=None, stepsize=1.0, adapt_delta=0.8,
               max_treedepth=10, sampler="nuts", init=None, save_warmup=False,
               adapt=True, sampler_options=None, adaptation="stan"):
    """A fresh chain: its generator from ``seed_seq`` (one spawned SeedSequence per
    chain), its initial point, and empty adaptation state. ``adaptation``: "stan"
    (windowed variances) or "nutpie" / "nutpie-lowrank" (draws and gradients,
    :class:`.adaptation.GradientAdaptation`; the low-rank one adapts a dense metric,
    whatever ``metric`` says, and starts from ``inv_metric`` as a diagonal if that is
    a vector)."""
    rng = np.random.Generator(np.random.PCG64(seed_seq))
    q, lp, g = _initial_point(model, init, rng)
    dim = model.dim
    grad_adapt = None
    if adaptation != "stan" and sampler != "rhmc":
        metric, inv_metric, grad_adapt = _grad_adaptation(
            dim, num_warmup if adapt else 0, adaptation, q, g, inv_metric)
    met = make_metric(metric, dim, inv_metric)
    ends, (init_buf, term_buf, _) = window_ends(num_warmup) \
        if adapt and grad_adapt is None else ([], (0, 0, 0))
    if sampler == "rhmc":
        # the SoftAbs metric follows the local Hessian (rhmc.py): only the step size
        # adapts, no metric windows
        from .rhmc import check_options, make_kernel
        sampler_options = check_options(sampler_options)
        met, metric, ends = make_kernel(dim, sampler_options)[0], "softabs", []
    state = ChainState(
        chain_id=chain_id, iteration=0, num_warmup=num_warmup, num_draws=num_draws,
        thin=thin, save_warmup=save_warmup, sampler=sampler, metric=metric,
        inv_metric=np.array(met.inv, copy=True), stepsize=float(stepsize),
        adapt=adapt and num_warmup > 0, adapt_delta=adapt_delta,
        max_treedepth=max_treedepth, window_ends=ends, init_buffer=init_buf,
        term_buffer=term_buf, q=q, lp=lp, grad=g, rng_state=None,
        da=None, welford=None, stepsize_initialized=False,
        draws=[], warmup_draws=[], stats={k: [] for k in STAT_NAMES},
        warmup_stats={k: [] for k in STAT_NAMES}, n_rejected=0, rejections={},
        rejected_draws=[],
        gq_seed=None,
        sampler_options=sampler_options,
        adaptation=adaptation if sampler != "rhmc" else "stan",
        grad_adapt=grad_adapt and grad_adapt.to_dict())
    da = DualAveraging(delta=adapt_delta)
    state.da = _da_dict(da)
    w = Welford(dim, dense=metric == "dense_e")
    state.welford = _welford_dict(w)
    state.rng_state = rng.bit_generator.state
    return state


def _grad_adaptation(dim, num_warmup, adaptation, q, g, inv_metric):
    """``(metric kind, initial inverse metric, GradientAdaptation or None)`` of a chain
    with nutpie's adaptation: the start is ``inv_metric`` if given, else the initial
    gradient's metric; without warmup nothing adapts, and the metric is
    ``inv_metric`` or the identity, as with Stan's adaptation."""
    lowrank = adaptation == "nutpie-lowrank"
    kind = "dense_e" if lowrank else "diag_e"
    start = None
    if inv_metric is not None:
        inv = np.asarray(inv_metric, dtype=float)
        start = np.diag(inv) if lowrank and inv.ndim == 1 else inv
    if num_warmup == 0:
        return kind, start, None
    adapter = GradientAdaptation(dim, num_warmup, lowrank=lowrank)
    guess = adapter.start(q, g)
    if start is None:
        start = guess
    adapter.inv = start
    return kind, start, adapter


def _da_dict(da):
    return {"counter": da.counter, "s_bar": da.s_bar, "x_bar": da.x_bar, "mu": da.mu,
            "delta": da.delta}


def _da_from(d):
    da = DualAveraging(delta=d["delta"])
    da.counter, da.s_bar, da.x_bar, da.mu = d["counter"], d["s_bar"], d["x_bar"], d["mu"]
    return da


def _welford_dict(w):
    return w.to_dict()          # (no copies: a snapshot for free, see Welford.to_dict)


def _welford_from(d, dim):
    return Welford.from_dict(d, dim)


def run(model, state, n_iterations=None, on_iteration=None):
    """Advance ``state`` in place by up to ``n_iterations`` (default: to the end).

    ``on_iteration(state, info)`` is called after each completed iteration (progress
    bars). A KeyboardInterrupt stops after the last completed iteration and is
    re-raised with the state intact.
    """
    dim = model.dim
    rng = np.random.Generator(np.random.PCG64())
    rng.bit_generator.state = state.rng_state
    if state.sampler == "rhmc":
        from .rhmc import make_kernel
        metric, kernel = make_kernel(dim, getattr(state, "sampler_options", None))
    else:
        metric = make_metric(state.metric, dim, state.inv_metric)
        # NUTS without its own errstate: the run sets it once (below)
        kernel = nuts._transition if state.sampler == "nuts" else _static_hmc
    da = _da_from(state.da)
    welford = _welford_from(state.welford, dim)
    # nutpie's adaptation (a state saved before it existed has no such field)
    gadapt = GradientAdaptation.from_dict(state.grad_adapt, dim) \
        if getattr(state, "grad_adapt", None) is not None else None
    ends = set(state.window_ends)
    z = Point(state.q, None, state.lp, state.grad)
    eps = state.stepsize
    num_warmup, adapt, thin = state.num_warmup, state.adapt, state.thin
    save_warmup, max_depth = state.save_warmup, state.max_treedepth
    total = num_warmup + state.num_draws
    stop = total if n_iterations is None else min(total, state.iteration + n_iterations)
    # where a kept iteration goes: the draw, then the statistics in STAT_NAMES order
    sinks = {warm: [draws.append] + [stats[k].append for k in STAT_NAMES]
             for warm, draws, stats in ((True, state.warmup_draws, state.warmup_stats),
                                        (False, state.draws, state.stats))}
    # a non-finite value in the sampler's arithmetic is a rejected proposal, not news
    # (set once here rather than per transition: it costs a microsecond)
    with np.errstate(all="ignore"):
        while state.iteration < stop:
            i = state.iteration
            warm = i < num_warmup
            if adapt and not state.stepsize_initialized:
                # part of this iteration: committed with it (an interrupt reruns both)
                eps = init_stepsize(model, metric, z, eps, rng)
                da.restart(eps)
            z, info = kernel(model, metric, z, eps, rng, max_depth=max_depth)
            used_eps = eps
            if warm and adapt:
                eps = da.update(info.accept_stat)
                if gadapt is not None:
                    metric, eps = _grad_adapt_step(model, state, gadapt, i, z, info,
                                                   metric, eps, da, rng)
                elif state.init_buffer <= i < num_warmup - state.term_buffer and ends:
                    welford.add(z.q)
                if i in ends and gadapt is None:
                    inv = welford.regularized()
                    welford.restart()
                    metric = make_metric(state.metric, dim, inv)
                    eps = init_stepsize(model, metric, z, eps, rng)
                    da.restart(eps)
                if i == num_warmup - 1:
                    eps = da.final()
            # commit the iteration: only now does the state move
            if warm and save_warmup or (not warm and (i - num_warmup) % thin == 0):
                for append, v in zip(sinks[warm], (
                        z.q, z.lp, info.accept_stat, used_eps, info.treedepth,
                        info.n_leapfrog, int(info.divergent), info.energy,
                        info.energy_error, info.max_energy_error)):
                    append(v)
                if info.n_failed and not warm:
                    # which kept draws ended at a rejected proposal (diagnose() tells
                    # these divergences from the step size's); a new list: snapshots
                    state.rejected_draws = [*getattr(state, "rejected_draws", ()),
                                            len(state.draws) - 1]
            if info.n_failed:
                _count_rejections(state, info)
            state.q, state.lp, state.grad = z.q, z.lp, z.grad
            state.stepsize = eps
            state.inv_metric = metric.inv  # metrics replace, never mutate, their arrays
            if warm:                       # (adaptation only changes in warmup)
                state.da = _da_dict(da)
                state.welford = _welford_dict(welford)
                if gadapt is not None:
                    state.grad_adapt = gadapt.to_dict()
            state.rng_state = rng.bit_generator.state
            state.stepsize_initialized = state.stepsize_initialized or adapt
            state.iteration = i + 1
            if on_iteration is not None:
                on_iteration(state, info)
    return state


def _grad_adapt_step(model, state, gadapt, i, z, info, metric, eps, da, rng):
    """One warmup iteration of nutpie's adaptation: the metric from the draws and
    gradients so far; at its first change the step-size search again (the initial
    metric was a guess from one gradient); at the start of the final window the
    step size's dual averaging restarts from its average, as after Stan's last
    window. Returns ``(metric, step size)``."""
    inv = gadapt.update(i, z.q, z.grad, good=not info.divergent)
    if inv is not None:
        metric = make_metric(state.metric, model.dim, inv)
        if gadapt.n_updates == 1:
            eps = init_stepsize(model, metric, z, eps, rng)
            da.restart(eps)
    if i == gadapt.final_start - 1 and gadapt.final_start < state.num_warmup:
        eps = da.final()
        da.restart(eps)
    return metric, eps


def _count_rejections(state, info):
    """Add a transition's rejected proposals to the chain's totals: ``n_rejected``
    and ``rejections``, ``{reason: count}`` (``fit.diagnose()`` reports both; a
    state saved before the reasons were kept has no ``rejections`` yet)."""
    state.n_rejected += info.n_failed
    counts = dict(getattr(state, "rejections", None) or {})   # a new dict: snapshots
    for why, n in (info.rejected or {"(reason not recorded)": info.n_failed}).items():
        counts[why] = counts.get(why, 0) + n
    state.rejections = counts


def _static_hmc(model, metric, z, eps, rng, max_depth=10, int_time=2 * math.pi):
    """Static HMC (Stan's ``static_hmc``): L = max(1, round(int_time / eps)) integrator
    steps, then a Metropolis accept/reject on the energy difference."""
    with np.errstate(all="ignore"):
        z0 = metric.start(model, z, rng)
        H0 = z0.h
        n = max(1, int(int_time / eps + 0.5))
        z1 = z0
        for _ in range(n):
            z1 = metric.step(model, z1, eps)
            if z1.h == math.inf:
                break
    h = z1.h
    # (an energy that fell: accepted, without exp of a difference past 709 overflowing)
    accept = 0.0 if not h < math.inf else 1.0 if h <= H0 else math.exp(H0 - h)
    divergent = h - H0 > 1000.0
    out = z1 if rng.random() < accept else z0
    failed = z1.lp == -math.inf
    return out, nuts.TransitionInfo(accept, n, 0, divergent, out.h, int(failed),
                                    out.h - H0, h - H0,
                                    {z1.why or NON_FINITE_DENSITY: 1} if failed else None)
