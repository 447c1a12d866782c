"""Running chains: seeds, executors, progress bars, interruption and resumption.

One seed becomes per-chain streams with ``numpy.random.SeedSequence(seed).spawn``:
chain ``c`` draws from its own stream whatever runs it, so the same seed gives
bit-identical draws serially, in processes, or on a Dask cluster. Generated
quantities use a second, independent family of streams, so that recomputing them
(after a resume) reproduces them exactly.

Chains run in processes by default (``fork`` where the platform has it, so models
defined in a notebook need no pickling; ``STANLITE_START_METHOD=spawn`` or
``forkserver`` chooses another start method, as Windows and macOS use by default);
any ``concurrent.futures.Executor`` may be given instead, a Dask ``Client`` or its
``get_executor()`` included. Chains run with one BLAS thread unless
``blas_threads`` says otherwise: in worker processes, chains in parallel already
use the cores, and BLAS threads on top of them oversubscribe (a 200x200 Cholesky
gradient 10-100x slower); in this process (``parallel=False``, one chain) for the
duration of the run only, because a model's matrices are small: measured on 2
cores (benchmarks/serial_blas_threads.py), a 3x3 ``cov_matrix`` model ran 4x
slower and a GP with N=200 or 300 points 3-7x slower with the default 2 threads
than with one.

A parallel run too small to gain from processes stays in this process
(:func:`_small_run`): its first chain starts here, and after 0.05 s of CPU time the
rest of the run is estimated from it, with the share of it spent in compiled NUTS
segments; when worker processes would save less than starting them costs
(``STANLITE_POOL_COST``, 0.15 s; 0: always processes), the chains run here - in
threads, one per core, where the compiled segments (which release the GIL) make
that pay (eight schools, 4 x 2000 iterations: ~0.1 s of CPU, ~85% of it compiled),
else one after another (a gradient in Python holds the GIL: :func:`_where`).
The draws are the same either way.

Ctrl-C (SIGINT) while chains run: the runner's own handler tells every chain to
stop after its current iteration (queued chains do not start; a chain running in
this process's main thread stops at once, its partial iteration discarded; one in
a thread after its current segment), collects what was
drawn, and returns it with a warning; further Ctrl-Cs while it collects are
absorbed, so the draws are never lost. Chains that never started are initialised
here (deterministically, from their own seeds), so that ``resume_from=fit``
continues every chain and gives the draws of an uninterrupted run.
"""

import concurrent.futures as cf
import contextlib
import copy
import math
import os
import signal
import sys
import threading
import time
import uuid
import warnings

import numpy as np

from stanlite.config import setting
from stanlite.errors import RemoteError, StanliteError

from . import chain as _chain
from .progress import wanted

__all__ = ["sample_chains", "START_METHOD_ENV", "RemoteError", "picklable"]

#: environment variable choosing the worker processes' start method
START_METHOD_ENV = "STANLITE_START_METHOD"

_QUEUE = None          # progress queue inside a worker process (set by the initializer)
_MODEL = None          # the model inside a forked worker (inherited, never pickled)
_STOP = None           # the pool's stop event inside a worker (set by the initializer)


def _init_worker(q, model, stop):
    """Initializer of the runner's own worker processes: the progress queue, the
    model (forked workers only), the stop event; SIGINT is ignored there, the parent
    handles Ctrl-C and sets the stop event (a worker killed by a KeyboardInterrupt
    while idle would break the whole pool and lose every chain's draws)."""
    global _QUEUE, _MODEL, _STOP
    _QUEUE, _MODEL, _STOP = q, model, stop
    with contextlib.suppress(ValueError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run_inherited(state, init_kwargs, report_every, blas_threads):
    return _run_remote(_MODEL, state, init_kwargs, report_every, blas_threads)


def _run_remote(model, state, init_kwargs, report_every, blas_threads=None, stop=None):
    """:func:`_run_one` in a worker: an exception it raises goes back to this process
    by pickling, and one that cannot make the round trip (a lock in its arguments, a
    custom ``__init__`` whose arguments do not match ``args``) would break the whole
    pool ("a worker process died"); it is sent as a :class:`RemoteError` carrying its
    type, message and traceback instead."""
    try:
        return _Shipped(_run_one(model, state, init_kwargs, report_every, blas_threads,
                                 stop))
    except Exception as e:
        sent = picklable(e)
        if sent is e:
            raise                        # as itself, its cause (and traceback) intact
    # raised outside the handler: no __context__ pointing back at the unpicklable
    # original (a pickler that follows __context__, as tblib's does once a library
    # installed it, would fail on it again and break the pool)
    raise sent


class _Shipped:
    """A chain's state on its way back from a worker: its draws (lists of one array
    per iteration) travel as one 2-D array each, and arrive as lists again (of the
    rows: the same numbers). Pickling thousands of small arrays costs ~2.5 us each,
    ~10 ms a chain of 1000 + 1000 kept iterations, paid again to unpickle them in
    this process while the other chains wait."""

    __slots__ = ("state",)
    _LISTS = ("draws", "warmup_draws")

    def __init__(self, state):
        self.state = state

    def __getstate__(self):
        st = self.state
        if st is None:
            return None, {}
        d = dict(st.__dict__)
        packed = {}
        for k in self._LISTS:
            rows = d.get(k)
            if isinstance(rows, list) and rows and _same_vectors(rows):
                packed[k] = np.array(rows)
                d[k] = None
        return type(st).from_dict(d), packed

    def __setstate__(self, shipped):
        st, packed = shipped
        for k, a in packed.items():
            setattr(st, k, list(a))
        self.state = st


def _same_vectors(rows):
    """Whether ``rows`` are float64 vectors of one length (a chain's draws)."""
    n = rows[0].shape if type(rows[0]) is np.ndarray else None
    return n is not None and len(n) == 1 and all(
        type(r) is np.ndarray and r.shape == n and r.dtype == np.float64 for r in rows)


def _received(res):
    """A worker's result: the chain's state (unwrapped from :class:`_Shipped`)."""
    return res.state if isinstance(res, _Shipped) else res


def picklable(e):
    """``e`` if it survives pickling and unpickling, else a :class:`RemoteError`
    with its type name, message and formatted traceback."""
    import pickle
    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:                    # noqa: BLE001 - any failure of the round trip
        return RemoteError.of(e)


def blas_limit(n):
    """A context in which BLAS libraries use at most ``n`` threads (threadpoolctl);
    ``None`` leaves them alone."""
    if n is None or int(n) == 1 and _one_thread_already():
        return contextlib.nullcontext()
    return _blas_controller().limit(limits=int(n), user_api="blas")


def _one_thread_already():
    """Whether the environment started the BLAS libraries with one thread and nothing
    can have changed that through threadpoolctl (not imported): then a limit of one
    thread is a no-op, and threadpoolctl's import and scan of the loaded libraries
    (~25 ms, on the way to a fresh process's first draw) are skipped.
    ``OMP_NUM_THREADS`` binds OpenBLAS, MKL and BLIS; ``OPENBLAS_NUM_THREADS`` binds
    numpy's and scipy's BLAS when both are OpenBLAS builds (their wheels)."""
    if "threadpoolctl" in sys.modules:
        return False
    env = {k: os.environ.get(k, "").strip() for k in (
        "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "MKL_NUM_THREADS",
        "BLIS_NUM_THREADS")}
    if any(v not in ("", "1") for v in env.values()):
        return False                    # (a library's own variable overrides OMP's)
    if env["OMP_NUM_THREADS"] == "1":
        return True
    if env["OPENBLAS_NUM_THREADS"] != "1":
        return False
    try:
        import numpy
        import scipy
        return all("openblas" in str(m.__config__.CONFIG["Build Dependencies"]["blas"]
                                     ["name"]).lower() for m in (numpy, scipy))
    except Exception:                   # noqa: BLE001 - another build's config: scan
        return False


_BLAS = [None, -1]      # this process's threadpoolctl controller, len(sys.modules) then


def _blas_controller():
    """A threadpoolctl controller of the BLAS libraries loaded in this process, made
    once (finding them costs ~3-16 ms, importing threadpoolctl ~20 ms: per chain, a
    large part of a small model's run) and again after an extension module was
    imported (a new BLAS comes with one; the modules a first run imports are
    Python). Made in this process before workers are forked, which inherit it."""
    from threadpoolctl import ThreadpoolController
    n = len(sys.modules)
    if _BLAS[0] is None or _BLAS[1] != n and _new_extension(_BLAS[1]):
        _BLAS[0] = ThreadpoolController()
    _BLAS[1] = n
    return _BLAS[0]


def _new_extension(since):
    """Whether a module imported after the first ``since`` of ``sys.modules`` (in
    import order) is compiled (a shared library: it may bring a BLAS)."""
    new = list(sys.modules.values())[max(since, 0):]
    return any(str(getattr(m, "__file__", None) or "").endswith((".so", ".pyd"))
               for m in new)


def _run_one(model, state, init_kwargs, report_every, blas_threads=None, stop=None,
             until=None, queue=None):
    """Worker: initialise (if needed) and run one chain; never loses its draws.

    Returns the state, or ``None`` for a chain told to stop before it started.
    ``stop`` (or the pool's ``_STOP``) is checked before the chain starts and after
    each iteration; ``until()`` true pauses the chain (``chain.run``). Progress goes
    to ``queue`` (or the process's ``_QUEUE``)."""
    stop = stop if stop is not None else _STOP
    if stop is not None and stop.is_set():
        return state                 # queued when Ctrl-C came: never started
    t0 = time.perf_counter()
    q = queue if queue is not None else _QUEUE
    # nothing to report and nothing to watch: no call per iteration at all
    tick = _ticker(q, stop, report_every) if q is not None or stop is not None else None
    with blas_limit(blas_threads):
        try:
            if state is None:
                state = _chain.initialize(model, **init_kwargs)
            _chain.run(model, state, on_iteration=tick, until=until)
            state.interrupted = False
        except KeyboardInterrupt:
            if state is None:
                return None
            state.interrupted = True
    state.elapsed += time.perf_counter() - t0
    return state


#: seconds between two looks of a chain at its stop event: a multiprocessing Event
#: costs ~1 us a look (a lock and a semaphore), a large part of a small model's
#: iteration; a Ctrl-C is answered within this time (plus an iteration). Compiled
#: NUTS segments (chain.py) are made this short, and each costs ~30 us to set up
_STOP_POLL = 0.02


def _ticker(q, stop, report_every):
    """The chain's ``on_iteration``: its progress (iteration, divergences) put on
    ``q`` every ``report_every`` seconds and at the end; a KeyboardInterrupt after a
    committed iteration (the state is whole) once ``stop`` is set."""
    last = [0.0, -float("inf")]         # the last report, the last look at stop
    divs = [0]
    clock = time.perf_counter

    def tick(st, n_divergent):
        divs[0] += n_divergent
        now = clock()
        if q is not None and (now - last[0] > report_every or st.done):
            last[0] = now
            q.put((st.chain_id, st.iteration, divs[0]))
        if stop is not None and (now - last[1] >= _STOP_POLL or st.done):
            last[1] = now
            if stop.is_set():
                raise KeyboardInterrupt
    # how often the chain should call: compiled segments of iterations end in time
    tick.every = min(_STOP_POLL if stop is not None else math.inf,
                     report_every if q is not None else math.inf)
    return tick


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

    def finished(self, state):
        """A chain's result arrived (executors without a progress queue)."""
        if state is not None:
            self.update(state.chain_id, state.iteration,
                        int(np.sum(state.stats.get("divergent__", ()))))

    def close(self):
        if self.bars is not None:
            for b in self.bars:
                b.close()


class _Interrupts:
    """Ctrl-C (SIGINT) during a run, handled by the runner (main thread only).

    The first Ctrl-C sets ``stopped`` (the pool's loop then tells the workers) and,
    while a chain runs in this process (``armed``), raises KeyboardInterrupt there so
    that it stops at once; every later one is absorbed with a note on stderr:
    collecting the draws must not be interrupted. Nothing else happens in the
    handler (a Dask stop is a network call: the loop makes it)."""

    def __init__(self):
        self.presses = 0
        self.stopped = False
        self.armed = False
        self._prev = None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            with contextlib.suppress(ValueError, TypeError):
                self._prev = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc):
        if self._prev is not None:
            signal.signal(signal.SIGINT, self._prev)
        return False

    def interrupt(self):
        """Record an interrupt (also a KeyboardInterrupt caught without the handler,
        or raised by the model); the pool's loop tells the workers."""
        self.stopped = True

    def _handler(self, signum, frame):
        self.presses += 1
        self.stopped = True
        if self.presses == 1 and self.armed:
            self.armed = False
            raise KeyboardInterrupt
        if self.presses == 2:
            print("stanlite: stopping - the chains finish their current iteration and "
                  "their draws are kept", file=sys.stderr, flush=True)


def sample_chains(model, settings, *, chains=4, seed=None, init=None, progress=True,
                  parallel=True, executor=None, resume_from=None, blas_threads=None,
                  max_workers=None):
    """Run the chains; returns ``(states, seeds, interrupted)``.

    ``settings``: the run's :class:`.settings.ChainSettings`, what every chain shares
    (a resumed run keeps its chains' own and takes only ``num_draws``: it extends
    them). ``init``: one per chain (:func:`.inits.per_run`). ``blas_threads``: BLAS
    threads per chain; ``None`` means 1, in worker processes and in this process
    alike (restored after the run). ``max_workers``: processes of the runner's own
    pool (default: one per chain, at most one per core)."""
    # the arguments were checked by Model.sample (stanlite/arguments.py)
    _check_not_importing_main()
    if resume_from is not None:
        # deep copies: the run appends to the states' draw lists, which must not
        # grow inside resume_from's own states
        states = [_chain.ChainState.from_dict(copy.deepcopy(s.to_dict())) for s in
                  resume_from.chain_states]
        for s in states:
            s.num_draws = max(settings.num_draws, s.num_draws)
        chains = len(states)
        gq_seeds = resume_from.gq_seeds
        init_kwargs = [None] * chains
    else:
        ss = np.random.SeedSequence(seed)
        chain_seeds, gq_root = ss.spawn(chains), ss.spawn(1)[0]
        gq_seeds = gq_root.spawn(chains)
        states = [None] * chains
        init_kwargs = [dict(chain_id=c, seed_seq=chain_seeds[c], settings=settings,
                            init=_chain_init(init, c))
                       for c in range(chains)]
    total = (states[0].num_warmup + states[0].num_draws) if states[0] is not None else \
        settings.num_warmup + settings.num_draws
    bars = _Progress(chains, total, wanted(progress))
    executor = _as_executor(executor)
    with _Interrupts() as intr:
        try:
            # one BLAS thread by default, in this process too: the matrices of a
            # model are small enough that threads cost more than they give
            # (benchmarks/serial_blas_threads.py), and more so on a loaded machine
            threads = 1 if blas_threads is None else blas_threads
            if executor is None and (not parallel or chains == 1):
                with blas_limit(threads):       # restored when the run ends
                    _run_serial(model, states, init_kwargs, bars, intr)
            elif executor is None and (where := _small_run(
                    model, states, init_kwargs, bars, intr, threads, max_workers)):
                with blas_limit(threads):
                    if where == THREADS:
                        _run_threads(model, states, init_kwargs, bars, intr,
                                     max_workers)
                    else:
                        _run_serial(model, states, init_kwargs, bars, intr)
            else:
                _run_pool(model, states, init_kwargs, executor, bars, intr,
                          blas_threads=threads, max_workers=max_workers)
        finally:
            bars.close()
        interrupted = intr.stopped or any(s is None or s.interrupted
                                          for s in states)
        out = _start_the_rest(model, states, init_kwargs) if interrupted else states
    if interrupted:
        _warn_interrupted(out, chains)
    return out, gq_seeds, interrupted


def _run_serial(model, states, init_kwargs, bars, intr):
    """The chains one after another in this process (each from where it is: a
    chain the probe of :func:`_small_run` started continues); after a Ctrl-C (or a
    KeyboardInterrupt raised in the model) the remaining chains do not start."""
    for c in range(len(states)):
        if intr.stopped:
            break
        _run_here(model, states, c, init_kwargs, bars, intr)


def _run_here(model, states, c, init_kwargs, bars, intr, until=None):
    """Chain ``c`` in this process, to its end or until ``until()`` (see
    :func:`_run_one`); a Ctrl-C keeps its committed iterations in ``states[c]``."""
    global _QUEUE
    _QUEUE = _DirectQueue(bars) if bars.bars is not None else None
    try:
        intr.armed = True
        if states[c] is None:
            # initialised here, not in _run_one: whatever interrupts, states[c]
            # holds every committed iteration (run advances it in place)
            states[c] = _chain.initialize(model, **init_kwargs[c])
        _run_one(model, states[c], None, 0.1, until=until)
    except KeyboardInterrupt:       # between the chain's own frames
        intr.interrupt()
        if states[c] is not None:
            states[c].interrupted = True
    finally:
        intr.armed = False
        _QUEUE = None
    if states[c] is not None and getattr(states[c], "interrupted", False):
        intr.interrupt()


def _run_threads(model, states, init_kwargs, bars, intr, max_workers):
    """The chains in threads of this process, one per core (or ``max_workers``), at
    most one per chain; each continues from where it is (the probe's chain too).

    Why: a compiled NUTS segment (nuts_jit.segment) releases the GIL, so chains in
    threads run side by side without starting processes. Safe: every thread runs its
    chain's Python holding one gate (``nuts_jit.gate``) and lets go of it only inside
    compiled segments, which touch the chain's own arrays alone; whatever the chains
    share - the model, its retaped gradient's programs, guards and spot checks, its
    eager tape - is used one chain at a time, as in :func:`_run_serial`. Each chain
    draws from its own generator, so the draws are those of a serial run, bit for bit.

    Ctrl-C (the handler in the main thread, which waits here) or a KeyboardInterrupt
    raised in a chain's model tells every chain to stop after its current segment;
    chains not started do not start. A chain that raises stops the others the same
    way, and its exception is raised once all are back."""
    from queue import SimpleQueue

    from .nuts_jit import gate
    chains = len(states)
    workers = max(1, min(max_workers or os.cpu_count() or 1, chains))
    stop = threading.Event()
    queue = SimpleQueue() if bars.bars is not None else None
    lock = threading.Lock()

    def one(c):
        with gate(lock):
            if stop.is_set():
                return states[c]
            try:
                if states[c] is None:
                    states[c] = _chain.initialize(model, **init_kwargs[c])
                _run_one(model, states[c], None, 0.1, stop=stop, queue=queue)
            except KeyboardInterrupt:       # raised by the model while initialising
                intr.interrupt()
            except BaseException:
                stop.set()                  # the others stop; this error is raised
                raise
            if states[c] is None or getattr(states[c], "interrupted", False):
                intr.interrupt()
                stop.set()
            return states[c]

    with cf.ThreadPoolExecutor(workers, thread_name_prefix="stanlite-chain") as ex:
        _collect([ex.submit(one, c) for c in range(chains)], states, queue, bars, intr,
                 stop)


#: environment variable: what starting the worker processes of a parallel run is
#: taken to cost, in seconds (default :data:`POOL_COST`); 0: always processes
POOL_COST_ENV = "STANLITE_POOL_COST"
#: seconds: forking two workers of a process that has numba and a model loaded,
#: and shipping the chains back, measured 30-100 ms on 2 cores (the first fork of
#: a fresh process the most; a loaded machine occasionally far more); a little more
#: here because the estimate runs high (a process's first iterations and early
#: warmup's cost more than the rest: eight schools' first run in a fresh process is
#: estimated at ~0.15 s for ~0.1 s of work)
POOL_COST = 0.15
#: CPU seconds of the first chain a parallel run's size is estimated from (the probe
#: ends after PROBE_WALL seconds on the clock too); a whole chain of eight schools
#: takes ~0.025 s (more on a loaded machine: a whole chain gives the best estimate)
PROBE_SECONDS = 0.05
PROBE_WALL = 0.25
#: the probe ends early, after this much CPU time, where its estimate is already
#: CLEAR times past the limit (a large run: its chains go to the pool sooner)
PROBE_SURE = 0.01
CLEAR = 4.0


#: where :func:`_small_run` puts a parallel run's chains (None: worker processes)
SERIAL, THREADS = "serial", "threads"
#: seconds: what running chains in threads of this process costs over running them
#: one after another (starting the threads, the gate handed between the chains at
#: each compiled segment: ~1 ms measured for eight schools' 4 chains), rounded up
THREAD_COST = 0.005


def _small_run(model, states, init_kwargs, bars, intr, threads, max_workers):
    """Where a parallel run (``parallel=True``, the runner's own pool) runs: in
    worker processes (None), or in this process - its chains one after another
    (:data:`SERIAL`) or in threads (:data:`THREADS`, :func:`_run_threads`).

    Its first unfinished chain (chain 0 but in a resumed run) runs here first for
    :data:`PROBE_SECONDS` of CPU time (its iterations are kept: it continues
    wherever the rest runs); the CPU time of all chains one after another is
    estimated from it, and so is the share of it spent in compiled NUTS segments
    (``nuts_jit.compiled_seconds``: the only part that chains in threads run side by
    side, the rest waiting for the GIL and the chains' gate). :func:`_where` then
    weighs what processes and threads would save against what they cost. Eight
    schools' 4 x 2000 iterations take ~0.1 s here, ~90% of it in compiled
    segments: threads (a pool would add 30-100 ms to save at most half); a model
    whose gradient runs in Python never enters a segment: one chain after another.
    CPU time, not clock time: the decision does not follow the machine's load
    (clock time cannot tell a chain preempted by other processes from one that
    waits; a model that waits in ``log_prob`` - sleeps, reads, calls out - is judged
    by its CPU time, and ``STANLITE_POOL_COST=0`` gives it processes). Early warmup
    iterations cost more than later ones, so a probe that did not finish its chain
    overestimates: processes in doubt. The probe ends early (after
    :data:`PROBE_SURE`) when its answer is the same for an estimate :data:`CLEAR`
    times lower or higher. A Ctrl-C in the probe: SERIAL (nothing more starts).
    ``STANLITE_POOL_COST=0`` turns this off. The draws are the same either way."""
    cost = _pool_cost()
    workers = max_workers or min(len(states), os.cpu_count() or 1)
    if cost <= 0:
        return None
    _compile_once(model)
    _warm()                             # not in the probe's time (the pool's anyway)
    todo = [(s.num_warmup + s.num_draws - s.iteration) if s is not None else
            kw["settings"].num_warmup + kw["settings"].num_draws
            for s, kw in zip(states, init_kwargs)]
    left = sum(todo)
    if not left:
        return SERIAL                   # (a resumed run with nothing left to do)
    c = next(i for i, n in enumerate(todo) if n)      # the first unfinished chain
    before = states[c].iteration if states[c] is not None else 0
    cpu, wall = _clocks()
    compiled = _compiled_clock()
    c0, w0, k0 = cpu(), wall(), compiled()

    def estimate():
        """The run's CPU seconds, one chain after another, from chain c's so far,
        and the share of them in compiled segments."""
        ran = (states[c].iteration if states[c] is not None else 0) - before
        spent = cpu() - c0
        share = min(1.0, max(0.0, (compiled() - k0) / spent)) if spent > 0 else 0.0
        return (spent * left / ran if ran else math.inf), share

    def until():
        spent = cpu() - c0
        if spent >= PROBE_SECONDS or wall() - w0 >= PROBE_WALL:
            return True
        if spent < PROBE_SURE:
            return False
        seconds, share = estimate()
        low = _where(seconds / CLEAR, share, workers, cost)
        return low is None or low == _where(seconds * CLEAR, share, workers, cost)

    with blas_limit(threads):
        _run_here(model, states, c, init_kwargs, bars, intr, until=until)
    return SERIAL if intr.stopped else _where(*estimate(), workers, cost)


def _clocks():
    """``(CPU time of this thread, clock time)``: the probe's clocks."""
    return time.thread_time, time.perf_counter


def _compiled_clock():
    """CPU time this thread spent in compiled NUTS segments: the probe's third clock."""
    from .nuts_jit import compiled_seconds
    return compiled_seconds


def _where(seconds, compiled, workers, cost):
    """Where chains estimated at ``seconds`` of CPU time one after another, a share
    ``compiled`` of it in compiled segments, run best: None (``workers`` processes,
    saving ``seconds * (1 - 1/workers)`` at ``cost``), :data:`THREADS` (saving
    ``compiled * seconds * (1 - 1/workers)`` at :data:`THREAD_COST`: only the
    compiled segments overlap) or :data:`SERIAL` (when neither saves anything).

    >>> _where(0.1, 0.9, 2, 0.15), _where(0.1, 0.0, 2, 0.15), _where(5.0, 0.9, 2, 0.15)
    ('threads', 'serial', None)
    """
    if not seconds < math.inf:
        return None                     # (no iteration to estimate from: processes)
    gain = seconds * (1.0 - 1.0 / workers)
    threads = compiled * gain - THREAD_COST
    if threads > 0.0 and threads >= gain - cost:
        return THREADS
    return SERIAL if _in_process(seconds, workers, cost) else None


def _in_process(seconds, workers, cost):
    """Whether chains estimated at ``seconds`` of CPU time (one after another) run
    here: ``workers`` processes would save at most ``seconds * (1 - 1/workers)``,
    and starting them costs ``cost``."""
    return seconds * (1.0 - 1.0 / workers) <= cost


def _pool_cost():
    v = setting(POOL_COST_ENV).strip()
    if not v:
        return POOL_COST
    try:
        cost = float(v)
    except ValueError:
        cost = math.nan
    if not cost >= 0:
        raise ValueError(f"{POOL_COST_ENV}={v!r}: expected seconds, a number >= 0 "
                         "(0: parallel runs always in worker processes)")
    return cost


def _warm():
    """What forked workers inherit instead of each loading it: the compiled NUTS
    kernel, the modules a chain imports when it starts (its initial point's), the
    BLAS controller (after those imports)."""
    from .nuts_jit import warm
    warm()
    from . import inits  # noqa: F401
    _blas_controller()


def _start_the_rest(model, states, init_kwargs):
    """After an interrupt: the chains that never started are initialised here, from
    their own seeds (what their worker would have done), so that a resumed run
    continues all of them; one whose initialisation fails is left out (it would have
    failed in the uninterrupted run too)."""
    out = []
    for s, kw in zip(states, init_kwargs):
        if s is None and kw is not None:
            try:
                s = _chain.initialize(model, **kw)
                s.interrupted = True
            except (Exception, KeyboardInterrupt):     # noqa: BLE001 - reported below
                s = None
        if s is not None:
            out.append(s)
    return out


def _warn_interrupted(out, chains):
    done = sum(s.iteration for s in out)
    idle = [s.chain_id for s in out if s.iteration == 0]   # 0-based, as fit.draws(chain=i)
    lost = chains - len(out)
    warnings.warn(
        f"sampling was interrupted: returning the {done} iterations completed in "
        f"{len(out) - len(idle)} of {chains} chain(s)"
        + (f"; chain(s) {', '.join(map(str, idle))} (0-based, as fit.draws(chain=i)) had "
           "not started" if idle else "")
        + (f"; {lost} chain(s) could not be initialised" if lost else "")
        + "; continue every chain with model.sample(resume_from=fit)",
        RuntimeWarning, stacklevel=4)


class _DirectQueue:
    def __init__(self, bars):
        self.bars = bars

    def put(self, item):
        self.bars.update(*item)


def _chain_init(init, c):
    if isinstance(init, (list, tuple)) and not isinstance(init, np.ndarray):
        return init[c]
    return init


def _check_not_importing_main():
    """A spawn/forkserver worker imports the user's main module; a script that samples
    at its top level (no ``if __name__ == "__main__":``) would start sampling again
    there, recursively. Say so instead. (A worker imports multiprocessing before the
    main module: where it is not imported, this is no worker. multiprocessing itself
    is imported only by runs that start processes: ~5-10 ms a small run need not pay.)"""
    mp = sys.modules.get("multiprocessing")
    if mp is not None and getattr(mp.current_process(), "_inheriting", False):
        raise StanliteError(
            "model.sample() was called while a worker process was importing your "
            "script's main module: with the 'spawn' start method (the default on "
            "Windows and macOS) each worker re-imports the script. Put the code that "
            "samples under  if __name__ == \"__main__\":  (model classes may stay at "
            "the top level).")


def _as_executor(executor):
    """A Dask ``Client`` becomes its ``get_executor()``; executors pass through."""
    from stanlite.arguments import executor as check_executor
    return check_executor("executor", executor)


def _start_method():
    """The worker start method: ``STANLITE_START_METHOD``, else the one the program
    set (``multiprocessing.set_start_method``), else fork where it exists."""
    import multiprocessing as mp
    methods = mp.get_all_start_methods()
    want = setting(START_METHOD_ENV).strip().lower() or \
        mp.get_start_method(allow_none=True)
    if want:
        if want not in methods:
            raise ValueError(f"{START_METHOD_ENV}={want!r}: this platform's start methods "
                             f"are {', '.join(methods)}")
        return want
    return "fork" if "fork" in methods else None


class _DaskStop:
    """A stop flag a Dask task can read: a named ``distributed.Event``, looked at
    most every half second (each look is a round trip to the scheduler)."""

    def __init__(self, name):
        self.name = name
        self._next = 0.0
        self._set = False

    def set(self):
        from distributed import Event
        Event(self.name).set()

    def is_set(self):
        now = time.monotonic()
        if not self._set and now >= self._next:
            from distributed import Event
            self._next = now + 0.5
            with contextlib.suppress(Exception):
                self._set = Event(self.name).is_set()
        return self._set

    def __getstate__(self):
        return {"name": self.name}

    def __setstate__(self, d):
        self.__init__(d["name"])


def _is_dask(executor):
    return type(executor).__module__.startswith("distributed")


def _run_pool(model, states, init_kwargs, executor, bars, intr, blas_threads,
              max_workers=None):
    # (imported here: ~20 ms that a run in this process does not need)
    import multiprocessing as mp
    from concurrent.futures.process import BrokenProcessPool
    chains = len(states)
    own = executor is None
    queue = stop = None
    forked = False
    _compile_once(model)
    if own:
        _reap_pools()
        method = _start_method()
        ctx = mp.get_context(method) if method else mp.get_context()
        forked = method == "fork"
        queue = ctx.Queue() if bars.bars is not None else None
        stop = ctx.Event()
        if forked:
            _warm()                 # once here, inherited by every worker
        workers = max_workers or min(chains, os.cpu_count() or 1)
        # forked workers inherit the model through the initializer's arguments (not
        # pickled): classes defined in a notebook or an exec'd string work too
        executor = cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx,
                                          initializer=_init_worker,
                                          initargs=(queue, model if forked else None,
                                                    stop))
    elif _is_dask(executor):
        # a Dask task cannot be cancelled without losing what it drew: it is told
        # to stop through a named distributed.Event instead
        stop = _DaskStop(f"stanlite-stop-{uuid.uuid4().hex}")
    elif isinstance(executor, cf.ThreadPoolExecutor):
        stop = threading.Event()             # threads of this process share it
    collected = False
    try:
        futs = [_submit(executor, own and forked, model, states[c], init_kwargs[c],
                        blas_threads, None if own else stop) for c in range(chains)]
        _collect(futs, states, queue, bars, intr, stop)
        collected = True
    except BrokenProcessPool as e:
        raise _broken_pool(e, forked) from e
    finally:
        if own:
            # every chain is back: the workers exit on their own and the pool's
            # thread joins them (waiting for a large process's teardown took
            # 30-40 ms of every run); after an error, they are waited for
            thread = getattr(executor, "_executor_manager_thread", None)
            executor.shutdown(wait=not collected, cancel_futures=True)
            if collected and thread is not None:
                _LINGERING.append(thread)


#: the threads of pools whose workers were left to exit on their own: joined before
#: the next pool forks (no fork while they run)
_LINGERING = []


def _reap_pools():
    while _LINGERING:
        _LINGERING.pop().join()


def _compile_once(model):
    """The model's gradient recorded, lowered and checked once, here, before the
    chains start (``Model.precompile``): forked workers inherit the program, the
    others receive it with the pickled model, so no chain records it again (a
    Stan-style scalar loop: 0.4 s of CPU per chain). The draws do not depend on it.
    A failure is left to the chains, which report it as they always did; a warning
    (the eager tape takes over) is shown here, once."""
    precompile = getattr(model, "precompile", None)
    if precompile is None:
        return
    try:
        precompile()
    except Warning:
        raise
    except Exception:               # noqa: BLE001 - the chains meet it again and say so
        pass


def _broken_pool(e, forked):
    """What a dead worker most likely means. A forked worker inherits the model and
    never re-imports the script, so there it is a crash (memory, compiled code); a
    spawned one re-imports the main module, where an unguarded ``sample()`` stops it
    (:func:`_check_not_importing_main` prints why on the worker's stderr)."""
    if forked:
        why = ("the worker was killed (out of memory?) or crashed in compiled code "
               "(numba, BLAS); the other chains' workers were stopped with it")
    else:
        why = ("with the 'spawn'/'forkserver' start method each worker re-imports your "
               "script: if it samples at its top level, put that code under  if "
               "__name__ == \"__main__\":  (the worker's own message is printed above); "
               "otherwise the worker ran out of memory or crashed in compiled code")
    return StanliteError(f"a chain's worker process died ({e}): {why}")


def _submit(executor, inherited, model, state, init_kwargs, blas_threads, stop):
    if inherited:
        return executor.submit(_run_inherited, state, init_kwargs, 0.2, blas_threads)
    return executor.submit(_run_remote, model, state, init_kwargs, 0.2, blas_threads,
                           stop)


def _collect(futs, states, queue, bars, intr, stop):
    """Wait for the chains, feeding the bars; after Ctrl-C tell them to stop (``stop``
    is an event every chain reads after each iteration and before it starts; without
    one the queued futures are cancelled, which standard executors allow only for
    chains not yet running). ``states[c]`` gets each chain's result."""
    pending = set(futs)
    told = False
    while pending:
        try:
            done, pending = cf.wait(pending, timeout=0.1)
            _drain(queue, bars)
            for f in done:
                if queue is None and not f.cancelled() and f.exception() is None:
                    bars.finished(_received(f.result()))
            if intr.stopped and not told:
                told = True
                if stop is not None:
                    stop.set()
                else:
                    for f in pending:
                        f.cancel()
        except KeyboardInterrupt:
            intr.interrupt()             # no handler (not the main thread's SIGINT)
    _drain(queue, bars)
    for c, f in enumerate(futs):
        if f.cancelled():
            continue                     # never started: states[c] stays as it was
        res = _received(f.result())      # a model error in a worker is raised here
        if res is not None:
            states[c] = res


def _drain(queue, bars):
    if queue is None:
        return
    while True:
        try:
            item = queue.get_nowait()
        except Exception:          # noqa: BLE001 - queue.Empty (and closed queues)
            return
        bars.update(*item)
