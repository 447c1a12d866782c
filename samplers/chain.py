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

NUTS with a Euclidean metric and the model's gradient in the compiled interpreter
runs in *segments* instead (:func:`.nuts_jit.segment`): one call into compiled code
makes many iterations, the step size's dual averaging and the variance window's
Welford sums included, and the state takes them over in one update. The segment
draws from the chain's generator exactly what the iterations one by one would, and
its arithmetic is theirs, so the draws do not depend on whether or where segments
run: the contract above holds with "iteration" read as "segment" for interrupts
(a segment's iterations are committed together), and an iteration the compiled loop
cannot finish (a point the interpreter hands back, a rejected proposal) is rerun by
the Python path from the same state. Segments end where the metric changes (window
ends, the end of warmup), where a spot check of the program is due, and after about
:data:`SEGMENT_SECONDS` (so that Ctrl-C and the runner's stop event are answered).
"""

import time

import numpy as np

from stanlite.chain_state import ChainState  # below the fits, which keep one per chain

from . import nuts, nuts_jit
from .adaptation import (DualAveraging, GradientAdaptation, Welford, init_stepsize,
                         window_ends)
from .hamiltonian import Point, make_metric
from .inits import initial_point
from .kernels import kernel
from .settings import ChainSettings
from .static_hmc import static_hmc as _static_hmc  # noqa: F401  (chain._static_hmc)

__all__ = ["ChainState", "initialize", "run", "STAT_NAMES"]

#: per-iteration sampler statistics (Stan's names, ArviZ's in fit.py)
STAT_NAMES = ("lp__", "accept_stat__", "stepsize__", "treedepth__", "n_leapfrog__",
              "divergent__", "energy__", "energy_error__", "max_energy_error__")


def initialize(model, chain_id, seed_seq, *, init=None, settings=None, **options):
    """A fresh chain: its generator from ``seed_seq`` (one spawned SeedSequence per
    chain), its initial point (:func:`.inits.initial_point`, the routine every
    method shares), and empty adaptation state.

    ``settings``: the run's :class:`.settings.ChainSettings`; or, for a chain made
    directly, its fields as keywords (``num_warmup``, ``num_draws``, ``metric``,
    ``sampler``, ``adaptation``, ...), checked here. ``adaptation``: "stan"
    (windowed variances) or "nutpie" / "nutpie-lowrank" (draws and gradients,
    :class:`.adaptation.GradientAdaptation`; the low-rank one adapts a dense metric,
    whatever ``metric`` says, and starts from ``inv_metric`` as a diagonal if that is
    a vector)."""
    if settings is None:
        settings = ChainSettings(**options)
    elif options:
        raise TypeError(f"initialize: settings and {sorted(options)} both given")
    s = settings
    rng = np.random.Generator(np.random.PCG64(seed_seq))
    q, lp, g = initial_point(model, init, rng, what="the chain")
    dim = model.dim
    metric, inv_metric, grad_adapt = s.metric, s.inv_metric, None
    if s.adaptation != "stan":
        metric, inv_metric, grad_adapt = _grad_adaptation(
            dim, s.num_warmup if s.adapt else 0, s.adaptation, q, g, inv_metric)
    # a chain's own copy: the Riemannian kernel keeps its chosen alpha in it
    sampler_options = None if s.sampler_options is None else dict(s.sampler_options)
    met, metric, at_windows = s.kernel.init(dim, metric, inv_metric, sampler_options)
    ends, (init_buf, term_buf, _) = window_ends(s.num_warmup) \
        if s.adapt and grad_adapt is None else ([], (0, 0, 0))
    if not at_windows:
        ends = []
    da = DualAveraging(delta=s.adapt_delta)
    w = Welford(dim, dense=metric == "dense_e")
    return ChainState(
        chain_id=chain_id, iteration=0, num_warmup=s.num_warmup, num_draws=s.num_draws,
        draws=[], stats={k: [] for k in STAT_NAMES},
        warmup_draws=[], warmup_stats={k: [] for k in STAT_NAMES},
        thin=s.thin, save_warmup=s.save_warmup, sampler=s.sampler, metric=metric,
        adapt=s.adapt and s.num_warmup > 0, adapt_delta=s.adapt_delta,
        max_treedepth=s.max_treedepth, adaptation=s.adaptation,
        sampler_options=sampler_options, window_ends=ends, init_buffer=init_buf,
        term_buffer=term_buf,
        q=q, lp=lp, grad=g, rng_state=rng.bit_generator.state,
        stepsize=float(s.stepsize), stepsize_initialized=False,
        inv_metric=np.array(met.inv, copy=True), da=_da_dict(da),
        welford=_welford_dict(w), grad_adapt=grad_adapt and grad_adapt.to_dict(),
        n_rejected=0, rejections={}, rejected_draws=[])


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


#: the longest a segment of compiled iterations should take, in seconds (a Ctrl-C in
#: this process is answered between two segments); a callback may ask for less
SEGMENT_SECONDS = 0.02


class _Live:
    """A chain's working objects, made from its state at the start of :func:`run`:
    the generator, metric, transition kernel, adaptation and current point. They
    run ahead of the state, which takes them over only when iterations complete."""

    def __init__(self, model, state):
        dim = model.dim
        self.rng = np.random.Generator(np.random.PCG64())
        self.rng.bit_generator.state = state.rng_state
        self.kernel_of = kernel(state.sampler)
        # (the transition without its own errstate: the run sets it once)
        self.metric, self.kernel = self.kernel_of.live(dim, state)
        self.da = _da_from(state.da)
        self.welford = _welford_from(state.welford, dim)
        # nutpie's adaptation (None in a state saved before it existed)
        self.gadapt = GradientAdaptation.from_dict(state.grad_adapt, dim) \
            if state.grad_adapt is not None else None
        self.ends = set(state.window_ends)
        self.z = Point(state.q, None, state.lp, state.grad)
        self.eps = state.stepsize
        self.eps_ready = state.stepsize_initialized   # the step-size search was made
        # segments of compiled iterations (NUTS, a Euclidean metric, numba, a
        # retaped model): their next length (grown up to SEGMENT_SECONDS' worth)
        self.segments = (self.kernel_of.segments and nuts.use_jit
                         and hasattr(self.metric, "whitened_steps")
                         and nuts_jit._compiled(model) is not None)
        self.seg_len = 1
        self.seg_backoff = self.seg_skip = 0    # (_back_off)


def run(model, state, n_iterations=None, on_iteration=None, until=None):
    """Advance ``state`` in place by up to ``n_iterations`` (default: to the end);
    ``until()``, if given, is asked before each iteration or segment and a true
    answer pauses the chain there (the runner's probe of a run's size).

    ``on_iteration(state, n_divergent)`` is called after each commit: one iteration,
    or a segment of iterations run in compiled code (NUTS with the model's program
    in the interpreter: :func:`.nuts_jit.segment`), with the number of divergent
    transitions among them; its attribute ``every``, if any, is the longest time in
    seconds it wants between two calls (progress bars, stop events). A
    KeyboardInterrupt stops after the last completed iteration and is re-raised
    with the state intact.
    """
    live = _Live(model, state)
    total = state.num_warmup + state.num_draws
    stop = total if n_iterations is None else min(total, state.iteration + n_iterations)
    seconds = min(SEGMENT_SECONDS, getattr(on_iteration, "every", SEGMENT_SECONDS))
    # a non-finite value in the sampler's arithmetic is a rejected proposal, not news
    # (set once here rather than per transition: it costs a microsecond)
    with np.errstate(all="ignore"):
        try:
            while state.iteration < stop and (until is None or not until()):
                n_div = _segment(model, state, live, stop, seconds) if live.segments \
                    else None
                if n_div is None:
                    n_div = int(_iteration(model, state, live).divergent)
                if on_iteration is not None:
                    on_iteration(state, n_div)
        except KeyboardInterrupt:
            _drop_uncommitted(state)
            raise
    return state


def _drop_uncommitted(state):
    """After a KeyboardInterrupt inside a Python iteration's commit (the runner's
    handler raises it wherever the chain is): its draw and statistics, appended in
    place before the one update that commits the iteration, are dropped - the kept
    iterations of ``range(state.iteration)`` are what the lists hold."""
    i, nw = state.iteration, state.num_warmup
    kept = ((state.warmup_draws, state.warmup_stats, min(i, nw) if state.save_warmup
             else 0),
            (state.draws, state.stats, max(0, -(-(i - nw) // state.thin))))
    for draws, stats, n in kept:
        del draws[n:]
        for col in stats.values():
            del col[n:]


def _iteration(model, state, live):
    """One iteration in Python (any sampler), committed; returns its TransitionInfo."""
    i = state.iteration
    num_warmup, adapt = state.num_warmup, state.adapt
    warm = i < num_warmup
    if adapt and not live.eps_ready:
        _first_stepsize(model, live)
    z, info = live.kernel(model, live.metric, live.z, live.eps, live.rng,
                          max_depth=state.max_treedepth)
    live.z = z
    used_eps = live.eps
    if warm and adapt:
        live.eps = live.kernel_of.adapt_stepsize(live, info, used_eps)
        if live.gadapt is not None:
            live.metric, live.eps = _grad_adapt_step(model, state, live.gadapt, i, z,
                                                     info, live.metric, live.eps,
                                                     live.da, live.rng)
        elif state.init_buffer <= i < num_warmup - state.term_buffer and live.ends:
            live.welford.add(z.q)
        _warmup_end(model, state, live, i)
    # commit the iteration: only now does the state move
    new = {}
    if warm and state.save_warmup or (not warm and (i - num_warmup) % state.thin == 0):
        draws, stats = (state.warmup_draws, state.warmup_stats) if warm else \
            (state.draws, state.stats)
        draws.append(z.q)
        for name, v in zip(STAT_NAMES, (
                z.lp, info.accept_stat, used_eps, info.treedepth, info.n_leapfrog,
                int(info.divergent), info.energy, info.energy_error,
                info.max_energy_error)):
            stats[name].append(v)
        if info.n_failed and not warm:
            # which kept draws ended at a rejected proposal (diagnose() tells
            # these divergences from the step size's); a new list: snapshots
            new["rejected_draws"] = [*(state.rejected_draws or ()),
                                     len(state.draws) - 1]
    if info.n_failed:
        new.update(_count_rejections(state, info))
    new.update(_live_fields(state, live, warm))
    new["iteration"] = i + 1
    state.__dict__.update(new)          # (one update: see _drop_uncommitted)
    return info


def _first_stepsize(model, live):
    """Stan's step-size search before the first iteration: part of that iteration
    (or segment), committed with it (an interrupt reruns both)."""
    live.eps = init_stepsize(model, live.metric, live.z, live.eps, live.rng)
    live.da.restart(live.eps)
    live.eps_ready = True


def _warmup_end(model, state, live, i):
    """After warmup iteration ``i``'s own adaptation: a slow window that ends there
    sets the metric from its variance estimate and searches the step size again; the
    last warmup iteration fixes the step size at its average."""
    if i in live.ends and live.gadapt is None:
        metric = live.kernel_of.window_end(model, state, live, i == max(live.ends))
        if metric is not None:          # None: the kernel kept its metric (and the
            live.metric = metric        # step size's averaging goes on)
            live.eps = init_stepsize(model, live.metric, live.z, live.eps, live.rng)
            live.da.restart(live.eps)
    if i == state.num_warmup - 1:
        live.eps = live.kernel_of.final_stepsize(live.da)


def _live_fields(state, live, warm):
    """The state's fields from the live objects after iterations (all but the
    draws and the iteration counter), for one update of the state."""
    z = live.z
    # (metrics replace, never mutate, their arrays)
    new = dict(q=z.q, lp=z.lp, grad=z.grad, stepsize=live.eps,
               inv_metric=live.metric.inv, rng_state=live.rng.bit_generator.state,
               stepsize_initialized=live.eps_ready or state.adapt)
    if warm:                            # (adaptation only changes in warmup)
        new.update(da=_da_dict(live.da), welford=_welford_dict(live.welford))
        if live.gadapt is not None:
            new["grad_adapt"] = live.gadapt.to_dict()
    new.update(live.kernel_of.live_fields(live, warm))
    return new


def _segment(model, state, live, stop, seconds):
    """Iterations from ``state.iteration`` in one compiled segment, committed at
    once; returns the number of divergent transitions among them, or None when the
    next iteration is the Python path's (:func:`_iteration`): the model's program
    is not available to compiled loops now, the segment could not finish that
    iteration, or nutpie's adaptation runs in Python now (its low-rank one, or
    its diagonal one before the metric's first change).

    A segment ends before ``stop``, at the end of warmup and after each slow
    window (the metric changes in Python), and its length grows to about
    ``seconds`` of work; its draws from the generator are the Python path's, so
    the draws do not depend on where segments end."""
    i = state.iteration
    num_warmup = state.num_warmup
    warm = i < num_warmup
    adapt = warm and state.adapt
    if live.seg_skip:
        live.seg_skip -= 1
        return None
    # nutpie's adaptation: the diagonal one runs in the kernel once its metric has
    # changed the first time (the step-size search after that change is Python's);
    # the low-rank one (eigendecompositions) in Python
    grad = live.gadapt if adapt else None
    if grad is not None and (grad.lowrank or not grad.n_updates) or \
            not nuts_jit.segment_ready(model, live.metric, state.max_treedepth,
                                       live.kernel.own()):
        return None
    end = min(stop, num_warmup) if warm else stop
    if adapt:
        end = min([end] + [e + 1 for e in live.ends if e >= i])
        if not live.eps_ready:
            _first_stepsize(model, live)
    window = (state.init_buffer, num_warmup - state.term_buffer) if adapt and live.ends \
        else (0, 0)
    n = min(end - i, live.seg_len)
    t0 = time.perf_counter()
    handed = False
    while True:
        seg = nuts_jit.segment(model, live.metric, live.rng, live.z, live.eps, n,
                               state.max_treedepth, live.da if adapt else None,
                               live.welford, window, i, workspace=live.kernel.own(),
                               grad=grad)
        if seg is None or seg.status != nuts_jit.SEGMENT_HANDOFF:
            break
        handed = True
        if seg.n == 0:
            live.seg_len = 1
            _back_off(live, handed)
            return None
        n = seg.n                       # the iterations before the one handed back
    if seg is None:
        return None
    _back_off(live, handed)
    _next_length(live, seg.n, time.perf_counter() - t0, seconds)
    _commit_segment(model, state, live, seg, i, warm, adapt)
    return seg.n_divergent()


#: the most iterations run in Python between two tries of a segment (_back_off)
SEGMENT_BACKOFF = 64


def _back_off(live, handed):
    """After a segment that handed an iteration back, the next one is tried only
    after 1, 3, 7, ... (at most SEGMENT_BACKOFF) iterations in Python; one that did
    not resets that. Where the compiled loop hands back at most iterations (a bounded
    parameter whose unconstrained value keeps crossing 0: a guard of the program)
    every try costs its setup, a discarded partial iteration and often a rerun:
    measured 2.5x slower than the Python path alone (tests/samplers/
    test_nuts_segments.py). The draws do not depend on where segments run."""
    live.seg_backoff = min(2 * live.seg_backoff + 1, SEGMENT_BACKOFF) if handed else 0
    live.seg_skip = live.seg_backoff


def _next_length(live, n, elapsed, seconds):
    """Grow the segments' length fourfold, up to about ``seconds`` of work at the
    rate of the last one (which took ``elapsed`` for ``n`` iterations)."""
    fit = int(seconds * n / elapsed) if elapsed > 0 else 4 * live.seg_len
    live.seg_len = max(1, min(4 * live.seg_len, fit))


def _commit_segment(model, state, live, seg, i, warm, adapt):
    """Take over a segment's iterations ``i .. i + seg.n - 1`` (all warmup or all
    sampling) in one update of the state, so that an interrupt leaves it before or
    after them, never between."""
    n = seg.n
    live.z, live.eps = seg.z, seg.eps
    if adapt:
        seg.adapted(live.da, live.welford)
        if live.gadapt is not None and seg.grad_adapted(live.gadapt, i + n - 1):
            live.metric = make_metric(state.metric, model.dim, live.gadapt.inv)
        _warmup_end(model, state, live, i + n - 1)
    new = _live_fields(state, live, warm)
    new["iteration"] = i + n
    if warm and state.save_warmup:
        keep = slice(0, n)
    elif warm:
        keep = None
    else:
        first = (-(i - state.num_warmup)) % state.thin   # the first kept iteration
        keep = slice(first, n, state.thin)
    if keep is not None:
        draws, stats = ("warmup_draws", "warmup_stats") if warm else ("draws", "stats")
        old = getattr(state, stats)
        new[draws] = getattr(state, draws) + list(seg.draws[:n][keep])
        new[stats] = {name: old[name] + col
                      for name, col in zip(STAT_NAMES, seg.stat_columns(keep))}
    state.__dict__.update(new)


def _grad_adapt_step(model, state, gadapt, i, z, info, metric, eps, da, rng):
    """One warmup iteration of nutpie's adaptation: the metric from the draws and
    gradients so far; at its first change the step-size search again (the initial
    metric was a guess from one gradient). Returns ``(metric, step size)``.

    As in nuts-rs, the step size's dual averaging then runs on, never restarted,
    to the end of warmup, and the final step size is its average over all of it;
    the final window only stops the metric. (Restarting it there, as after Stan's
    last window, averaged over those 150 iterations only: on the logistic
    regression of ``benchmarks/nuts.py`` the step size came out 10% smaller than
    nutpie's, at an acceptance of 0.84 against the 0.80 asked for, and the draws a
    gradient were that much less effective: benchmarks/README.md, issue 20.)

    A draw the transition did not move from (its start point, rarely chosen) is not
    used, as nuts-rs does not use it: the same point twice says nothing of the
    scales and shrinks both variances of a short window."""
    moved = z.q is not state.q and not np.array_equal(z.q, state.q)
    inv = gadapt.update(i, z.q, z.grad, good=not info.divergent and moved)
    if inv is not None:
        metric = make_metric(state.metric, model.dim, inv)
        if gadapt.n_updates == 1:
            eps = init_stepsize(model, metric, z, eps, rng)
            da.restart(eps)
    return metric, eps


def _count_rejections(state, info):
    """The chain's totals with a transition's rejected proposals added, as state
    fields: ``n_rejected`` and ``rejections``, ``{reason: count}`` (``fit.diagnose()``
    reports both; a state saved before the reasons were kept has no ``rejections``
    yet)."""
    counts = dict(state.rejections or {})   # a new dict: snapshots
    for why, n in (info.rejected or {"(reason not recorded)": info.n_failed}).items():
        counts[why] = counts.get(why, 0) + n
    return {"n_rejected": state.n_rejected + info.n_failed, "rejections": counts}
