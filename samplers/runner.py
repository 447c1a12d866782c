"""Running chains: seeds, executors, progress bars, interruption and resumption.

One seed becomes per-chain streams with ``numpy.random.SeedSequence(seed).spawn``:
chain ``c`` draws from its own stream whatever runs it, so the same seed gives
bit-identical draws serially, in processes, or on a Dask cluster. Generated
quantities use a second, independent family of streams, so that recomputing them
(after a resume) reproduces them exactly.

Chains run in processes by default (``fork`` where the platform has it, so models
defined in a notebook need no pickling); any ``concurrent.futures.Executor`` may be
given instead (a Dask ``Client.get_executor()`` included). Ctrl-C returns the draws
completed so far, with a warning; ``resume_from=fit`` continues or extends a run.
"""

import concurrent.futures as cf
import copy
import multiprocessing as mp
import os
import sys
import time
import warnings

import numpy as np

from . import chain as _chain
from .progress import wanted

__all__ = ["sample_chains"]

_QUEUE = None          # progress queue inside a worker process (set by the initializer)


_MODEL = None          # the model inside a forked worker (inherited, never pickled)


def _set_queue(q, model=None):
    global _QUEUE, _MODEL
    _QUEUE = q
    _MODEL = model


def _run_inherited(state, init_kwargs, report_every):
    return _run_one(_MODEL, state, init_kwargs, report_every)


def _run_one(model, state, init_kwargs, report_every):
    """Worker: initialise (if needed) and run one chain; never loses its draws."""
    t0 = time.perf_counter()
    if state is None:
        state = _chain.initialize(model, **init_kwargs)
    q = _QUEUE
    last = [0.0]
    divs = [0]

    def tick(st, info):
        divs[0] += info.divergent
        if q is not None:
            now = time.perf_counter()
            if now - last[0] > report_every or st.done:
                last[0] = now
                q.put((st.chain_id, st.iteration, divs[0]))
    try:
        _chain.run(model, state, on_iteration=tick)
        state.interrupted = False
    except KeyboardInterrupt:
        state.interrupted = True
    state.elapsed = getattr(state, "elapsed", 0.0) + time.perf_counter() - t0
    return state


class _Progress:
    """One tqdm bar per chain (iterations, divergences, ETA); silent when off."""

    def __init__(self, chains, total, enabled):
        self.bars = None
        if not enabled:
            return
        try:
            from tqdm.auto import tqdm
        except ImportError:
            return
        self.bars = [tqdm(total=total, desc=f"chain {c + 1}", position=c, leave=True,
                          dynamic_ncols=True, unit="it") for c in range(chains)]

    def update(self, chain_id, iteration, divergences):
        if self.bars is None:
            return
        b = self.bars[chain_id]
        b.update(iteration - b.n)
        if divergences:
            b.set_postfix(divergences=divergences, refresh=False)

    def close(self):
        if self.bars is not None:
            for b in self.bars:
                b.close()


def sample_chains(model, *, chains=4, draws=1000, warmup=1000, seed=None,
                  metric="diag_e", adapt_delta=0.8, max_treedepth=10, init=None, thin=1,
                  save_warmup=False, progress=True, parallel=True, executor=None,
                  sampler="nuts", inv_metric=None, stepsize=1.0, resume_from=None,
                  sampler_options=None):
    """Run the chains; returns ``(states, seeds, interrupted)``."""
    if chains < 1:
        raise ValueError(f"chains must be >= 1, got {chains}")
    if draws < 0 or warmup < 0 or thin < 1:
        raise ValueError("draws and warmup must be >= 0 and thin >= 1")
    if isinstance(max_treedepth, bool) or not isinstance(max_treedepth, (int, np.integer)) \
            or not 1 <= max_treedepth <= 30:
        # 2**30 leapfrog steps a transition is already past any useful run; the
        # trajectory workspace is sized by the depth, so a float or huge one fails here
        raise ValueError(f"max_treedepth must be an integer in 1..30, got {max_treedepth!r}")
    if resume_from is not None:
        # deep copies: the run appends to the states' draw lists, which must not
        # grow inside resume_from's own states
        states = [_chain.ChainState.from_dict(copy.deepcopy(s.to_dict())) for s in
                  resume_from.chain_states]
        for s in states:
            s.num_draws = max(draws, s.num_draws) if draws is not None else s.num_draws
        chains = len(states)
        gq_seeds = resume_from.gq_seeds
        init_kwargs = [None] * chains
    else:
        ss = np.random.SeedSequence(seed)
        chain_seeds, gq_root = ss.spawn(chains), ss.spawn(1)[0]
        gq_seeds = gq_root.spawn(chains)
        states = [None] * chains
        init_kwargs = [dict(chain_id=c, seed_seq=chain_seeds[c], num_warmup=warmup,
                            num_draws=draws, thin=thin, metric=metric,
                            inv_metric=inv_metric, stepsize=stepsize,
                            adapt_delta=adapt_delta, max_treedepth=max_treedepth,
                            sampler=sampler, init=_chain_init(init, c),
                            save_warmup=save_warmup, sampler_options=sampler_options)
                        for c in range(chains)]
    total = (states[0].num_warmup + states[0].num_draws) if states[0] is not None else \
        warmup + draws
    show = wanted(progress)
    bars = _Progress(chains, total, show)
    try:
        if executor is None and (not parallel or chains == 1):
            out = []
            for c in range(chains):
                _set_queue(_DirectQueue(bars))
                try:
                    out.append(_run_one(model, states[c], init_kwargs[c], 0.1))
                finally:
                    _set_queue(None)
                if out[-1].interrupted:
                    # the user pressed Ctrl-C: the remaining chains do not start
                    break
            interrupted = any(s.interrupted for s in out) or len(out) < chains
        else:
            out, interrupted = _run_pool(model, states, init_kwargs, executor, bars,
                                         chains)
    finally:
        bars.close()
    if interrupted:
        done = sum(s.iteration for s in out)
        warnings.warn(f"sampling was interrupted: returning the {done} iterations "
                      f"completed in {len(out)} chain(s); continue with "
                      "model.sample(resume_from=fit)", RuntimeWarning, stacklevel=3)
    return out, gq_seeds, interrupted


class _DirectQueue:
    def __init__(self, bars):
        self.bars = bars

    def put(self, item):
        self.bars.update(*item)


def _chain_init(init, c):
    if isinstance(init, (list, tuple)) and not isinstance(init, np.ndarray):
        return init[c]
    return init


def _run_pool(model, states, init_kwargs, executor, bars, chains):
    own = executor is None
    queue = None
    if own:
        ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
        queue = (ctx or mp).Queue() if bars.bars is not None else None
        # forked workers inherit the model through the initializer's arguments (not
        # pickled): classes defined in a notebook or an exec'd string work too
        forked = ctx is not None
        if forked:
            from .nuts_jit import warm
            warm()                  # the compiled NUTS kernel, inherited by the workers
        executor = cf.ProcessPoolExecutor(max_workers=min(chains, os.cpu_count() or 1),
                                          mp_context=ctx, initializer=_set_queue,
                                          initargs=(queue, model if forked else None))
    interrupted = False
    try:
        if own and forked:
            futs = [executor.submit(_run_inherited, states[c], init_kwargs[c], 0.2)
                    for c in range(chains)]
        else:
            futs = [executor.submit(_run_one, model, states[c], init_kwargs[c], 0.2)
                    for c in range(chains)]
        pending = set(futs)
        while pending:
            try:
                _, pending = cf.wait(pending, timeout=0.1)
                _drain(queue, bars)
            except KeyboardInterrupt:
                interrupted = True      # workers got the signal too and return their draws
        _drain(queue, bars)
        out = [f.result() for f in futs]
    finally:
        if own:
            executor.shutdown(wait=True)
    return out, interrupted or any(s.interrupted for s in out)


def _drain(queue, bars):
    if queue is None:
        return
    while True:
        try:
            item = queue.get_nowait()
        except Exception:          # noqa: BLE001 - queue.Empty (and closed queues)
            return
        bars.update(*item)
