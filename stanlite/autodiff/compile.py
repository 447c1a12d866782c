"""Retaping: a recorded tape compiled to straight-line Python (``sl.compile``).

Why. A Python tape pays interpretive overhead on every operation - a node object, a
dispatch, a closure call in the sweep - and for small and scalar-heavy log densities
that overhead, not the arithmetic, is the cost of a gradient. Retaping (the AD
review, Margossian 2019, "Retaping"; ADOL-C, CppAD) records the tape once and reuses
its *expression graph* at later points; the SSA paper (Innes 2018, "Don't unroll
adjoint") explains why the adjoint must then be compiled rather than interpreted.
Here the recorded graph is turned into Python source - the forward pass, then the
adjoint sweep unrolled in reverse tape order - with plain floats for 0-d values,
numpy calls on arrays, constants hoisted into the function's defaults, dead nodes
removed, and adjoints accumulated without any broadcasting machinery (every shape is
known when the code is generated). Python's own ``compile`` turns it into bytecode.

What is generated mirrors the eager sweep exactly: every node's forward value is
computed by the same function on the same types (``math.exp`` on floats, ``np.exp``
on arrays), every adjoint contribution by the same rule and added in the same order,
so a replay gives the eager tape's value and gradient *to the last bit* (the rules are
in :mod:`.codegen`; this module records, replays and falls back). Each kind of
node has a rule: the hot elementwise primitives, indexing, sums and products are
written inline; a fused density (distributions/fused.py) stays ONE call to its
kernel, which gives value and partials together; any other primitive - super nodes
(algebraic solver, ODE, matrix exponential) included - is one call to its forward
function and one to its registered VJP, on plain values.

Guards. Python code that looks at values can make another point take another graph.
While recording, the hooks of :mod:`.var` report every such look:

* a *decision* (``bool(v)``, ``v > 0`` and the other comparisons, library code going
  through :func:`~stanlite.autodiff.var.guarded`: the sign of a bounded parameter, a
  bound check, an argsort) becomes a guard - the function and its observed result -
  re-evaluated at its place in the replay; a replay whose guard gives another result
  stops and the point is recorded again (each distinct path is kept, up to
  ``max_recordings``), after which the function runs on the eager tape, with one
  :class:`CompileWarning` saying why;
* an *escape* (``value_of(v)``: a plain number the tape cannot follow, asked for on
  purpose) makes the recording unreplayable: the eager tape is used, with one
  warning. ``float(v)``, ``int(v)`` and ``math.exp(v)`` of a traced value are not
  escapes but errors (:class:`~stanlite.DifferentiationError`, raised by the value
  itself, recording or not): they would drop the derivative, not only the replay.

A changed input shape records again. Three more safety nets: the code is checked
against the eager results at the recording point, the first replay at a new point
is checked against the eager tape, and so are replays number 2, 4, 8, ... (spot
checks, at a vanishing amortised cost): an unguarded dependence on values - a
``.value`` read, random numbers - shows up there as a difference, and the eager tape
takes over. Replays that hit a Python float exception (``1.0 / 0.0``, ``math.log(-1)``)
are computed by the eager tape, which gives numpy's inf/NaN, as it always does.
A function to compile must be a pure function of its argument (no randomness, no
state changed between calls), as for ``jax.jit``.

>>> import numpy as np, stanlite as sl
>>> f = lambda x: sl.sum(sl.exp(x) * x) - x[0] * x[1]
>>> vg = sl.compile(f, np.array([0.1, 0.2, 0.3]), backend="python")
>>> v, g = vg(np.array([1.0, 2.0, 3.0]))
>>> v0, g0 = sl.value_and_grad(f)(np.array([1.0, 2.0, 3.0]))
>>> v == v0 and np.array_equal(g, g0)        # bit for bit (the generated Python)
True
"""

import math
import os
import threading
from collections.abc import Callable
from typing import Any
from time import perf_counter as _clock
import warnings

import numpy as np

from ..config import setting
from ..errors import ArgumentError, DomainError, StanliteError
from .codegen import NotCompilable, _p, build
from .compile_portable import _format_digest, _program_from, _program_state
from .recording import (Recording, _record_function, _short, cut_pieces,  # noqa: F401
                        piece_expression, record_pieces, recording)
from .var import Box, _as_float_value, _strip

__all__ = ["compile", "Compiled", "CompileWarning"]

_ndarray = np.ndarray
_f64 = np.float64
_F64_DTYPE = np.dtype(np.float64)


class CompileWarning(UserWarning):
    """``sl.compile`` (or a model's retaped gradient) fell back to the eager tape."""


# ======================================================================================
# the replaying callables: variants, re-recording, fallback, verification
# ======================================================================================
class _Retaped:
    """What a retaped gradient shares: programs per input shape (each a path through
    the guards, most recently used first), re-recording when every program's guards
    fail, the eager tape when that happens too often or cannot be compiled, and the
    checks against the eager tape.

    Subclasses give ``_record(x) -> Recording``, ``_eager(x) -> (value, gradient)`` and
    ``_io(recording) -> (inputs, output)`` (see :class:`.codegen._Gen`); with
    ``value_only`` the programs compute the value alone (the gradient is None)."""

    value_only = False

    def __init__(self, what, max_recordings, verify, exact=False, backend=None):
        self.backend = _backend(backend)
        self.vm_skipped = None          # why the interpreter was not used, or None
        if max_recordings < 1:
            raise ValueError(f"max_recordings must be >= 1, got {max_recordings!r}")
        self.what = what
        self.exact = bool(exact)
        self.max_recordings = int(max_recordings)
        self.verify = bool(verify)
        self.recordings = 0             # recordings made (the first one included)
        self.fallback = None            # why the eager tape is used, or None
        self._programs = {}             # input key -> [_Program], most recent first
        self._check_at = None           # the recording point, until the first replay
        self._last_guard = None
        self._fast = None               # (key, fn) of the program that replayed last
        self._lock = threading.RLock()
        self._replays = 0               # successful replays so far
        # the replay count of the next spot check against the eager tape (verify)
        self._next_check = 2 if self.verify else float("inf")
        self._replay_seconds = 0.0      # one replay's cost, timed at the recording point

    def _fast_call(self, x, key):
        """Replay the program that replayed last (no bookkeeping), else the full path."""
        fast = self._fast
        if fast is not None and key == fast[0] and self._replays + 1 < self._next_check:
            try:
                r = fast[1](x)
            except StanliteError:
                raise
            except (ArithmeticError, ValueError):
                return self._eager(x)
            if type(r) is tuple:
                self._replays += 1
                return r
        return self._call(x, key)

    # -- the hot path --------------------------------------------------------------------
    def _call(self, x, key):
        with self._lock:            # programs are reordered and added: one thread at a time
            return self._call_locked(x, key)

    def _call_locked(self, x, key):
        if self.fallback is not None:
            return self._eager(x)
        progs = self._programs.get(key)
        if progs:
            for j, p in enumerate(progs):
                retime = self._retime
                if retime:
                    t0 = _clock()
                try:
                    r = p.fn(x)
                except StanliteError:
                    raise                   # a domain error or a failed solver, as eager
                except (ArithmeticError, ValueError):
                    # Python floats raise where numpy gives inf/NaN: the tape decides
                    return self._eager(x)
                if type(r) is tuple:
                    if retime:
                        self._replay_seconds = min(self._replay_seconds, _clock() - t0)
                        self._retime = False
                    if j:
                        progs.insert(0, progs.pop(j))
                    self._replays += 1
                    if self._check_at is not None or p in self._unchecked:
                        return self._first_replay(x, r, key)
                    if self._replays >= self._next_check:
                        return self._spot_check(x, r)
                    self._fast = (key, p.fn)
                    return r
                self._last_guard = p.guards[r]
        return self._rerecord(x, key)

    # -- recording -----------------------------------------------------------------------
    def _rerecord(self, x, key):
        if self.recordings == 0 and not self._cache_tried:
            self._cache_tried = True
            if self._load_cached():
                return self._call_locked(x, key)    # its first replay is checked
        if self.recordings >= self.max_recordings:
            g = self._last_guard
            why = f"; the last guard that failed: {g.describe()}" if g is not None else ""
            self._give_up(f"its graph changed at each of {self.recordings} recordings "
                          f"(max_recordings){why}")
            return self._eager(x)
        rec = self._record(x)
        r = self._add(rec, key)
        return rec.result if r is None else r

    def _add(self, rec, key):
        """Keep a program for recording ``rec``. -> the program's own result at the
        recording point (None if there is none): what the call that recorded returns,
        so every answer comes from the program and a run does not depend on which of
        its calls happened to record or be checked (the interpreter equals the tape
        to rounding, not bit for bit: same seed, same draws, whatever ran before)."""
        self.recordings += 1
        self._fast = None
        if rec.escapes:
            self._give_up(f"a value left the tape ({rec.escapes[0]}), so the recorded "
                          "graph may depend on it in ways it cannot check")
            return
        prog = self._lower(rec) if self.backend != "python" else None
        if prog is not None and _big_vectorised(prog):
            prog = self._faster(rec, prog)
        try:
            if prog is None:
                prog = build(rec, *self._io(rec), exact=self.exact,
                             value_only=self.value_only)
        except NotCompilable as e:
            self._give_up(f"it cannot be compiled: {e}", warn=not e.quiet)
            return
        # the generated code must give the tape's results at the recording point
        try:
            t0 = _clock()
            r = prog.fn(rec.x)
            self._replay_seconds = _clock() - t0
        except (ArithmeticError, ValueError):
            r = None                        # inf/NaN there: checked at the next point
        else:
            same = _close if prog.inexact else _identical
            if type(r) is not tuple or not same(r, rec.result):
                self._give_up("internal: the generated code disagrees with the tape at "
                              "the recording point (please report this)")
                return
            if self._replay_seconds > 1e-3 and hasattr(prog, "code"):
                # a process's first replay may include loading the interpreter from
                # numba's cache (0.2-0.9 s): timed again, as the spot checks' budget
                # is a share of it (and the disk cache keeps it)
                t0 = _clock()
                prog.fn(rec.x)
                self._replay_seconds = min(self._replay_seconds, _clock() - t0)
            elif self._replay_seconds > 1e-3:
                # a Python replay costs as much as the function (friberg_karlsson's:
                # 15 ODE solves, ~0.015 s of a fresh first draw): its second timing is
                # the next replay's, the first at a new point (checked on the full
                # path, :meth:`_call_locked`), not one more call here
                self._retime = True
        self._programs.setdefault(key, []).insert(0, prog)
        if self.verify:
            self._check_at = _snapshot(rec.x)
        return r

    def _lower(self, rec):
        """The recording as a compiled interpreter program (autodiff/vm), or None when
        a node or a guard has no lowering (the Python replay is used then)."""
        from .vm.program import NotLowerable, lower
        try:
            leaves, output, result_shape, post = self._vm_io(rec)
            prog = lower(rec, leaves, output, value_only=self.value_only,
                         result_shape=result_shape)
        except NotLowerable as e:
            self.vm_skipped = str(e)
            return None
        if post is not None:
            prog.fn = post(prog.fn)
        self.vm_skipped = None
        return prog

    def _faster(self, rec, prog):
        """Of the interpreter program ``prog`` and the Python replay of ``rec``, the one
        that runs faster at the recording point (timed: each called once to load it,
        then the best of three interleaved calls; the replay must win by a margin,
        ``_PY_MARGIN`` and ``_PY_CALL``). For big vectorised programs, where numpy's
        SIMD loops can beat the interpreter's strided scalar loops even on arithmetic
        (hierarchical normal, J = 10^4, one run at load 7: the Python replay 70 us a
        gradient, the interpreter 303 us); a static estimate
        (``vm.program._numpy_is_faster``) decides the clear cases before this."""
        try:
            py = build(rec, *self._io(rec), exact=self.exact, value_only=self.value_only)
            for p in (prog, py):
                if type(p.fn(rec.x)) is not tuple:
                    return prog
            times = {prog: math.inf, py: math.inf}
            for _ in range(3):
                for p in (prog, py):
                    t0 = _clock()
                    p.fn(rec.x)
                    times[p] = min(times[p], _clock() - t0)
        except (NotCompilable, ArithmeticError, ValueError):
            return prog
        # (a margin: the interpreter's program also runs inside the compiled samplers'
        # own loops, where a gradient costs no Python call, ~3-5 us)
        if times[py] * _PY_MARGIN + _PY_CALL < times[prog]:
            self.vm_skipped = (f"a big vectorised program: its Python replay measured "
                               f"faster ({times[py] * 1e6:.0f} us against the "
                               f"interpreter's {times[prog] * 1e6:.0f} us)")
            return py
        return prog

    def _vm_io(self, rec):
        """(leaves as (Var, offset, shape), output, result shape or None, a wrapper of
        the replay function or None) - what :func:`.vm.program.lower` needs."""
        raise NotImplementedError

    # -- compiled samplers: the program runs inside their kernels ------------------------
    def kernel_program(self, key=None):
        """The interpreter program a compiled sampler may run in its own loop (see
        samplers/nuts_jit.py), or None: none lowered, the eager tape took over, or the
        first replay at a new point has not been checked yet."""
        if self.fallback is not None or self._check_at is not None:
            return None
        progs = self._programs.get(key)
        if not progs or not hasattr(progs[0], "code") or progs[0] in self._unchecked:
            return None
        return progs[0]

    def kernel_replays(self, n, x, key=None):
        """A compiled sampler ran the program ``n`` times; the spot checks against the
        eager tape (replays 2, 4, 8, ...) continue at ``x``, one of its points: the
        program is replayed there and compared, and the eager tape takes over for good
        if they differ (as in :meth:`_spot_check`). -> whether the program stays."""
        with self._lock:
            self._replays += n
            if self._replays < self._next_check:
                return True
            self._schedule_after(self._replays)
            prog = self.kernel_program(key)
            if prog is None:
                return self.fallback is None
            try:
                r = prog.fn(x)
            except (ArithmeticError, ValueError):
                return True                     # the eager tape decides that point
            if type(r) is tuple:
                self._checked(x, r)
            return self.fallback is None

    def kernel_budget(self):
        """How many replays a compiled sampler may run before :meth:`kernel_replays`
        makes the next spot check (it stops where a check is due; ``inf`` when the
        program is not verified)."""
        return self._next_check - self._replays

    @property
    def compiled(self):
        """Whether the program replayed last runs in the compiled interpreter."""
        progs = [p for ps in self._programs.values() for p in ps]
        return bool(progs) and hasattr(progs[0], "code")

    def _first_replay(self, x, r, key):
        """The first replay at a new point is checked against the eager tape (for
        programs from the disk cache: each program's first replay anywhere - a guard
        path may have changed alone, where the cache's key cannot see it; one that
        disagrees is dropped with the others and the function recorded again, as if
        there had been no cache)."""
        p = self._programs[key][0]          # the program that replayed (moved first)
        if p in self._unchecked:
            e = self._timed_reference(x)
            if not _close(r, e):
                self._programs, self._fast, self.recordings = {}, None, 0
                self._unchecked, self._check_at = (), None
                return self._rerecord(x, key)
            self._unchecked = [q for q in self._unchecked if q is not p]
            if self._check_at is _PENDING:
                self._check_at = None
            self._schedule_after(self._replays)
            return r
        if _identical_input(x, self._check_at):
            return r
        self._check_at = None
        r = self._checked(x, r)
        self._schedule_after(self._replays)
        if self.fallback is None:
            self._store_cached()
        return r

    def _spot_check(self, x, r):
        """Replays number 2, 4, 8, ... (then every 2^20th) are checked against the
        eager tape too: a dependence on values that agreed at the first new point (a
        ``.value`` mask that happened to match there) is caught when it shows, at an
        amortised cost of O(log n / n) eager evaluations per replay - or less: see
        :meth:`_schedule_after`."""
        r = self._checked(x, r)
        self._schedule_after(self._replays)
        return r

    #: what spot checks may cost: this share of the replays' own time, plus
    #: ``check_allowance`` seconds in all (a cheap model keeps the doubling schedule;
    #: where one eager evaluation costs 10^4 replays - a Stan-style scalar loop - the
    #: doubling schedule alone would spend most of a run checking)
    check_budget = 0.05
    check_allowance = 0.05

    def _schedule_after(self, n):
        """The next spot check after replay ``n``: doubling (2, 4, 8, ..., then every
        2^20th), postponed while the checks made so far plus the next one would cost
        more than ``check_allowance + check_budget * (time of the replays)``, with
        the costs as timed (each check's eager evaluation, one replay at the
        recording point). The first replay at a new point is always checked."""
        nxt = self._next_check
        while nxt <= n:
            nxt = 2 * nxt if nxt < (1 << 20) else nxt + (1 << 20)
        if self._replay_seconds > 0.0:
            over = self._check_seconds + self._eager_seconds - self.check_allowance
            if over > 0.0:
                need = over / (self.check_budget * self._replay_seconds)
                # (never more than 2^20 replays without a check)
                nxt = max(nxt, int(min(need, n + (1 << 20))))
        self._next_check = nxt

    def _checked(self, x, r):
        """``r`` checked against the eager tape at ``x``: ``r`` if they agree (a checked
        call answers as an unchecked one would: see :meth:`_add`), else the eager
        tape's result, and the eager tape for good."""
        e = self._timed_reference(x)
        if not _close(r, e):
            self._give_up("its replay differs from the eager tape at a new point (the "
                          "graph depends on values in a way no guard saw: a .value read, "
                          "random numbers, state changed between calls?)")
            return e
        return r

    def _reference(self, x):
        """What a replay is checked against: the eager tape."""
        return self._eager(x)

    def _timed_reference(self, x):
        """:meth:`_reference`, its time counted (the spot checks' budget)."""
        t0 = _clock()
        e = self._reference(x)
        self._eager_seconds = _clock() - t0
        self._check_seconds += self._eager_seconds
        return e

    quiet = False           # fall back without a warning (an optional speed-up)
    _eager_seconds = 0.0    # the last check's eager evaluation, timed
    _check_seconds = 0.0    # all checks' eager evaluations
    _unchecked = ()         # programs loaded from the disk cache, not checked yet
    _retime = False         # the next replay is timed (a Python replay's second timing)
    _cache_tried = False    # the disk cache was looked at (once, before recording)

    # -- the disk cache (subclasses that have a key: ModelGradient) ---------------------
    def _load_cached(self):
        """Adopt programs from the disk cache (before a first recording). -> whether"""
        return False

    def _store_cached(self):
        """Write the programs to the disk cache (their first new point checked)."""

    def _give_up(self, reason, warn=True):
        self.fallback = reason
        self._programs = {}
        self._fast = None
        if warn and not self.quiet:
            warnings.warn(f"{self.what} runs on the eager tape: {reason}", CompileWarning,
                          stacklevel=4)

    # -- portable state: spawned workers, Dask tasks, the disk cache ---------------------
    def portable(self):
        """The interpreter programs (of input key None: a model's) and the state of
        the checks, as plain arrays, numbers and strings (:func:`_program_state`):
        what a process that did not record needs to replay as this one does. The
        generated-Python replays are left out (code objects with arbitrary constants):
        a process that needs one records it again."""
        with self._lock:
            progs = self._programs.get(None, ())
            vm = [p for p in progs if hasattr(p, "code")]
            whole = len(vm) == len(progs)
            return {"format": _format_digest(), "value_only": self.value_only,
                    "programs": [_program_state(p) for p in vm],
                    "recordings": self.recordings if whole else len(vm),
                    "fallback": self.fallback, "vm_skipped": self.vm_skipped,
                    "replays": self._replays if vm else 0,
                    "next_check": self._next_check if vm else self._first_check(),
                    "replay_seconds": self._replay_seconds,
                    "check_seconds": self._check_seconds,
                    "eager_seconds": self._eager_seconds,
                    "check_at": _snapshot(self._check_at) if vm else None,
                    "unchecked": [i for i, p in enumerate(vm) if p in self._unchecked]}

    def _adopt(self, st, fresh=False):
        """Take over a :meth:`portable` state. -> whether it could be (made by this
        interpreter, numba present). ``fresh`` (the disk cache): the counters start
        over and the first replay at any point is checked against the eager tape."""
        progs = st["programs"]
        if st.get("format") != _format_digest() or st["value_only"] != self.value_only:
            return False
        if progs:
            from .vm import kernel
            if not kernel.available() or self.backend == "python":
                return False
        with self._lock:
            new = [_program_from(d) for d in progs]
            self._programs = {None: new} if progs else {}
            self._fast = None
            self._replay_seconds = st["replay_seconds"]
            if fresh:
                self.recordings = len(progs)
                self._replays = 0
                self._next_check = self._first_check()
                self._check_at = _PENDING if self.verify else None
                self._unchecked = list(new) if self.verify else ()
                self._cache_tried = self.verify
                return True
            self.recordings, self.fallback, self.vm_skipped = (
                st["recordings"], st["fallback"], st["vm_skipped"])
            self._replays, self._next_check = st["replays"], st["next_check"]
            self._check_seconds, self._eager_seconds = (st["check_seconds"],
                                                        st["eager_seconds"])
            self._check_at = st["check_at"]
            self._unchecked = [new[i] for i in st["unchecked"]]
            self._cache_tried = True
        return True

    def _first_check(self):
        return 2 if self.verify else float("inf")

    def prepare(self, points):
        """Record (or load) and lower now, and check the first replay at a new point,
        trying ``points`` (plain inputs) in turn until a checked program is ready or
        the eager tape took over; points where the function is not defined are
        skipped. -> whether a checked program is ready. What a later call returns
        does not depend on these points: every answer comes from the program (see
        :meth:`_add`). At most two recordings are made here: a function whose
        guards change from point to point (a sign pattern per point) records the
        other paths where it meets them, not ``max_recordings`` of random ones."""
        for x in points:
            if self.fallback is not None or self._ready() or self.recordings >= 2:
                break
            try:
                with np.errstate(all="ignore"):
                    self(x)
            except _REJECTED:
                continue
        return self._ready()

    def _ready(self):
        return self.fallback is None and bool(self._programs) and self._check_at is None

    # -- introspection -------------------------------------------------------------------
    @property
    def source(self):
        """The generated Python source of the most recently used program (or None)."""
        for progs in self._programs.values():
            if progs:
                return progs[0].source
        return None

    @property
    def programs(self):
        """Number of compiled programs kept (one per input shape and guard path)."""
        return sum(len(p) for p in self._programs.values())


def _snapshot(x):
    return x.copy() if type(x) is np.ndarray else x


#: the first replay of programs from the disk cache is checked at any point
_PENDING = object()

#: what a point outside the function's domain raises (samplers/hamiltonian.py's
#: RejectedPoint): :meth:`_Retaped.prepare` tries another point
_REJECTED = (DomainError, ArithmeticError, np.linalg.LinAlgError)


# a program whose vector rows (of >= _VECTOR elements) hold >= _VECTOR_WORK elements
# in all, in at most _VECTOR_ROWS rows (the Python replay is generated for it: cheap
# for few rows), is timed both ways (_Retaped._faster)
_VECTOR, _VECTOR_WORK, _VECTOR_ROWS = 256, 2048, 2000
# the Python replay is kept when it beats the interpreter by this factor and call cost
_PY_MARGIN, _PY_CALL = 1.25, 5e-6


def _big_vectorised(prog):
    code = getattr(prog, "code", None)
    if code is None or len(code) > _VECTOR_ROWS:
        return False
    n = code[:, 1]                  # (vm/opcodes.py: field N, the element count)
    return int(n[n >= _VECTOR].sum()) >= _VECTOR_WORK


def _identical_input(x, y):
    if type(x) is np.ndarray:
        return type(y) is np.ndarray and np.array_equal(x, y)
    return x == y


def _identical(r, s):
    """Bit-for-bit equal ``(value, gradient)`` pairs (NaN equal to NaN)."""
    (a, ga), (b, gb) = r, s
    same = a == b or (a != a and b != b)
    if ga is None or gb is None:
        return same and ga is gb
    if type(ga) is np.ndarray or type(gb) is np.ndarray:
        return same and np.array_equal(np.asarray(ga), np.asarray(gb), equal_nan=True)
    return same and (ga == gb or (ga != ga and gb != gb))


def _close(r, s, rtol=1e-12):
    """Equal to rounding: within ``rtol`` relative to each part's largest magnitude,
    and never below ``rtol`` absolute - nor, for the gradient, ``rtol |value|``.

    The floors are for cancellation: rounding errors scale with the terms summed, not
    with the result, so a gradient of exact zeros at a mode (``sum(y - mu)`` at the
    mean) comes out as 4e-16 summed in another order, and a log density can cross 0.
    A replay whose graph differs (what the checks are for) differs far above them."""
    (a, ga), (b, gb) = r, s
    if ga is None or gb is None:
        if ga is not gb:
            return False
        ga = gb = np.zeros(0)
    ga, gb = np.asarray(ga, dtype=float), np.asarray(gb, dtype=float)
    if ga.shape != gb.shape:
        return False
    if not (np.array_equal(np.isnan(ga), np.isnan(gb)) and (a != a) == (b != b)):
        return False
    if a == a and abs(a - b) > rtol * max(abs(a), abs(b), 1.0):
        return a == b
    fin = ~np.isnan(ga)
    if not fin.any():
        return True
    da, db = ga[fin], gb[fin]
    if not np.array_equal(np.isinf(da), np.isinf(db)):
        return False
    floor = abs(a) if a - a == 0.0 else 0.0      # |value| if finite
    scale = max(np.max(np.abs(np.where(np.isinf(da), 0.0, da))),
                np.max(np.abs(np.where(np.isinf(db), 0.0, db))), floor, 1.0)
    with np.errstate(invalid="ignore"):         # inf - inf where both are inf: not used
        return bool(np.all(np.where(np.isinf(da), da == db,
                                    np.abs(da - db) <= rtol * scale)))


# ======================================================================================
# sl.compile
# ======================================================================================
class Compiled(_Retaped):
    """``x -> (f(x), df/dx)`` replayed from a recorded tape (made by :func:`compile`).

    Attributes: ``recordings`` (how many times f was recorded), ``programs`` (compiled
    variants kept), ``fallback`` (why the eager tape is used, or None), ``source``
    (the generated code). ``hvp(x, v)`` gives Hessian-vector products by the eager
    tape's forward-over-reverse (nested AD is not retaped).
    """

    def __init__(self, f, example_x=None, max_recordings=8, verify=True, exact=False,
                 backend=None, inputs=None, value_only=False):
        if not callable(f):
            raise TypeError(f"sl.compile: f must be callable, got {type(f).__name__}")
        what = f"sl.compile({getattr(f, '__qualname__', repr(f))})"
        super().__init__(what, max_recordings, verify, exact, backend)
        self.f = f
        self._hessian = None
        if value_only:
            self.value_only = True
        #: the pieces f takes (``[(start, stop, shape)]``), or None: f takes x itself
        self.inputs = None if inputs is None else _pieces_layout(inputs)
        if inputs is not None:      # x: a vector as long as the pieces reach
            self._shape = (max((stop for _, stop, _ in self.inputs), default=0),)
        if example_x is None:
            if inputs is None:
                raise TypeError("sl.compile: example_x is needed (it may be None only "
                                "with inputs=: then the first call records)")
            return
        if isinstance(example_x, Box):
            raise TypeError("sl.compile: example_x must be a plain float or array (it is "
                            "traced); compile outside the differentiation")
        x = _input(example_x) if inputs is None else self._point(example_x)
        rec = self._record(x)
        self._add(rec, self._key_of(x))

    def __call__(self, x):
        if self.inputs is not None:
            if type(x) is not _ndarray or x.shape != self._shape or \
                    x.dtype is not _F64_DTYPE:
                if isinstance(x, Box):
                    return self._nested(x)
                x = self._point(x)
            r = self._fast_call(x, None)
        elif type(x) is _ndarray and x.dtype is _F64_DTYPE and x.ndim:
            r = self._fast_call(x, x.shape)
        elif isinstance(x, Box):
            return self._nested(x)
        else:
            x = _input(x)
            r = self._fast_call(x, _key(x))
        return r[0] if self.value_only else r

    def _nested(self, x):
        # inside another differentiation: the eager tape nests, the replay does not
        from .functional import value_and_grad
        if self.value_only:
            return self.whole(x)
        return value_and_grad(self.whole)(x)

    def whole(self, x):
        """``f`` as a function of ``x`` itself (with ``inputs``: of its pieces)."""
        return self.f(x) if self.inputs is None else self.f(cut_pieces(x, self.inputs))

    def _point(self, x):
        """``x`` as a float vector that ``inputs`` cut (a TypeError if it is not)."""
        x = _input(x)
        if type(x) is float or x.shape != self._shape:
            raise TypeError(f"{self.what}: the argument must be a float vector of shape "
                            f"{self._shape} (the inputs' layout), got shape "
                            f"{np.shape(x)}")
        return x

    def _key_of(self, x):
        # with inputs there is one input shape: the key None (portable() states)
        return None if self.inputs is not None else _key(x)

    def hvp(self, x, v):
        """``H(x) v`` by the eager tape (forward-over-reverse; not retaped)."""
        from .functional import hvp
        return hvp(self.whole)(x, v)

    def hessian(self, x):
        """``H(x)``, retaped: the forward-over-reverse Hessian (``sl.hessian(f)``) is
        itself recorded once - every numpy operation of the dual reverse sweep, with
        the tangents' batch axis - and replayed as straight-line code, so a Hessian
        costs its numpy calls and none of the dual numbers' dispatch. Guarded and
        checked against ``sl.hessian(f)`` like the gradient (equal within 1e-12
        relative to its largest entry; usually bit for bit).

        >>> import numpy as np, stanlite as sl
        >>> vg = sl.compile(lambda x: x[0] ** 2 * x[1] + sl.sum(sl.exp(x)), np.ones(2))
        >>> vg.hessian(np.array([1.0, 3.0])).round(4)
        array([[ 8.7183,  2.    ],
               [ 2.    , 20.0855]])
        """
        h = self._hessian
        if h is None:
            with self._lock:
                if self._hessian is None:
                    self._hessian = CompiledHessian(self.whole, x, self.max_recordings,
                                                    self.verify, backend=self.backend)
                h = self._hessian
        return h(x)

    def _record(self, x):
        if self.inputs is not None:
            rec = record_pieces(self.f, x, self.inputs)
        else:
            rec = _record_function(self.f, x)
        if self.value_only:
            rec.result = (rec.result[0], None)
        return rec

    def _eager(self, x):
        if self.value_only:
            return float(_strip(self.whole(x))), None
        if self.inputs is not None:
            return record_pieces(self.f, x, self.inputs, record=False)
        from .functional import value_and_grad
        return value_and_grad(self.f)(x)

    def _reference(self, x):
        if self.value_only:
            # the value on the tape, which the program replays (a super node may
            # compute its value on plain inputs another way: an ODE solver's steps)
            if self.inputs is not None:
                return record_pieces(self.f, x, self.inputs, record=False)[0], None
            return _record_function(self.f, x).result[0], None
        return self._eager(x)

    def _io(self, rec):
        if self.inputs is not None:
            return self._pieces_io(rec)
        leaf = rec.inputs[0]
        shape = np.shape(leaf.value)

        def output(gen, value, adjs):
            if self.value_only:
                return [f"return (_float({value}), None)"]
            st = adjs[0]
            if st is None:
                grad = f"_zeros({shape!r})" if shape else "0.0"
            elif type(st.kind) is tuple:
                grad = st.expr if st.owned else f"{st.expr}.copy()"
            else:
                grad = st.expr
            return [f"return ({value}, {grad})"]
        return [(leaf, "x")], output

    def _pieces_io(self, rec):
        """The generated code's inputs (each piece cut from ``x``) and its return: the
        pieces' adjoints written into one gradient vector."""
        layout = self.inputs
        inputs = [(leaf, piece_expression(*piece))
                  for leaf, piece in zip(rec.inputs, layout)]
        dim = self._shape[0]

        def output(gen, value, adjs):
            if self.value_only:
                return [f"return (_float({value}), None)"]
            lines = [f"g = _zeros({dim})"]
            for st, (start, stop, shape) in zip(adjs, layout):
                if st is None:
                    continue
                if shape == ():
                    lines.append(f"g[{start}] = {st.expr}")
                elif type(st.kind) is tuple and len(st.kind) > 1:
                    lines.append(f"g[{start}:{stop}] = {_p(st.expr)}.ravel()")
                else:
                    lines.append(f"g[{start}:{stop}] = {st.expr}")
            lines.append(f"return (_float({value}), g)")
            return lines
        return inputs, output

    def _vm_io(self, rec):
        if self.inputs is not None:
            leaves = [(leaf, start, np.shape(leaf.value))
                      for leaf, (start, _, _) in zip(rec.inputs, self.inputs)]
            return leaves, rec.output, None, None
        leaf = rec.inputs[0]
        shape = np.shape(leaf.value)
        if type(rec.x) is not float and len(shape) == 1:
            return [(leaf, 0, shape)], rec.output, None, None

        def post(fn):               # the gradient in the input's own shape
            def replay(x):
                r = fn(x)
                if type(r) is tuple and r[1] is not None:
                    g = r[1]
                    return r[0], (float(g[0]) if not shape else g.reshape(shape))
                return r
            return replay
        return [(leaf, 0, shape)], rec.output, None, post

    def __repr__(self):
        state = f"eager: {self.fallback}" if self.fallback else \
            f"{self.programs} program(s), {self.recordings} recording(s)"
        return f"<Compiled {self.what} ({state})>"


class CompiledHessian(_Retaped):
    """``x -> H(x)`` replayed (made by :meth:`Compiled.hessian`): the recording is of
    ``sl.hessian(f)`` on the tape, the program its forward pass alone - no adjoints,
    the Hessian as its output."""

    value_only = True

    def __init__(self, f, example_x, max_recordings=8, verify=True, what=None,
                 quiet=False, backend=None):
        from .functional import hessian
        what = what or f"sl.compile({getattr(f, '__qualname__', repr(f))}).hessian"
        super().__init__(what, max_recordings, verify, exact=True, backend=backend)
        self.quiet = quiet
        self.f = f
        self._h = hessian(f)
        x = _input(example_x)
        self._add(self._record(x), _key(x))

    def __call__(self, x):
        if isinstance(x, Box):
            return self._h(x)
        if type(x) is _ndarray and x.dtype is _F64_DTYPE and x.ndim:
            return self._fast_call(x, x.shape)[1]
        x = _input(x)
        return self._fast_call(x, _key(x))[1]

    def _record(self, x):
        return _record_function(self._h, x, scalar=False)

    def _vm_io(self, rec):
        leaf = rec.inputs[0]
        return ([(leaf, 0, np.shape(leaf.value))], rec.output, np.shape(rec.result[1]),
                None)

    def _eager(self, x):
        return 0.0, np.array(self._h(x), dtype=float)

    def _io(self, rec):
        leaf = rec.inputs[0]

        def output(gen, value, adjs):
            # a fresh array unless the Hessian is a constant or an input's view
            own = value.startswith("v") and type(gen.vkind.get(id(rec.output))) is tuple
            return [f"return (0.0, {value if own else f'_array({value}, dtype=float)'})"]
        return [(leaf, "x")], output


_BACKENDS = ("auto", "vm", "python")


def _backend(backend):
    """The replay backend: ``"auto"`` (the compiled interpreter where a recording
    lowers, else generated Python), ``"python"`` (generated Python only); the default
    comes from ``STANLITE_BACKEND``."""
    name = "backend"
    if backend is None:
        name = "the environment variable STANLITE_BACKEND"
        backend = setting("STANLITE_BACKEND", "auto").strip().lower() or "auto"
    if backend == "vm":
        backend = "auto"
    if backend not in _BACKENDS:
        raise ArgumentError(f"{name} must be one of {', '.join(map(repr, _BACKENDS))}, "
                            f"got {backend!r}")
    return backend


def _input(x):
    # the two common cases of var._as_float_value written out: every call of a
    # compiled function converts its argument, and the call saved is a few percent of
    # a small model's compiled gradient
    t = type(x)
    if t is float:
        return x
    if t is np.ndarray and x.dtype == _f64 and x.ndim:
        return x
    try:
        return _as_float_value(x)
    except (TypeError, ValueError) as e:
        raise TypeError(f"sl.compile: the argument must be a float or an array of floats, "
                        f"got {type(x).__name__} {_short(x)} ({e})") from None


def _key(x):
    return () if type(x) is float else x.shape


def _pieces_layout(inputs):
    """``inputs`` checked: ``[(start, stop, shape)]`` of ints, each piece holding
    ``stop - start`` values. -> a list of tuples"""
    out = []
    for piece in inputs:
        try:
            start, stop, shape = piece
            start, stop, shape = int(start), int(stop), tuple(int(n) for n in shape)
        except (TypeError, ValueError):
            raise ArgumentError(f"sl.compile: inputs must be (start, stop, shape) "
                                f"triples of integers, got {piece!r}") from None
        size = int(np.prod(shape, dtype=np.int64))
        if not 0 <= start <= stop or stop - start != size:
            raise ArgumentError(f"sl.compile: the inputs piece {piece!r} does not hold "
                                f"its shape's {size} value(s) of x (need 0 <= start <= "
                                f"stop and stop - start == {size})")
        out.append((start, stop, shape))
    return out


def compile(f: "Callable[[Any], Any]", example_x: "Any" = None, *,
            max_recordings: int = 8, verify: bool = True, exact: bool = False,
            backend: "str | None" = None, inputs: "list | None" = None,
            value_only: bool = False) -> "Compiled":
    """Record ``f`` at ``example_x`` and compile the tape: ``x -> (f(x), grad f(x))``.

    ``f`` maps a float or float array to a scalar, written with stanlite operations
    (what ``sl.value_and_grad`` takes). The tape recorded at ``example_x`` becomes
    straight-line Python - the forward pass and the adjoint sweep, floats for 0-d
    values, numpy on arrays, fused densities and super nodes as single calls - which
    every later call replays; the results equal ``sl.value_and_grad(f)(x)`` bit for
    bit (to rounding in the compiled interpreter, see ``backend``). Control flow that
    depends on values is guarded: a comparison, ``bool()`` or a library decision on
    values (see :func:`~stanlite.autodiff.var.guarded`) is re-checked at each replay and
    a different outcome records again (each path is kept; after ``max_recordings``
    recordings, or a ``value_of()`` of a traced value, the eager tape is used, with a
    :class:`CompileWarning`). Another input shape records again. ``verify`` checks the
    first replay at a new point against the eager tape.

    The returned :class:`Compiled` also has ``hessian(x)`` (the forward-over-reverse
    Hessian, itself retaped) and ``hvp(x, v)`` (by the eager tape).

    ``backend``: ``"auto"`` (the default, from the environment variable
    ``STANLITE_BACKEND`` when not given) runs a recording whose every node and guard
    lowers in the compiled tape interpreter (:mod:`stanlite.autodiff.vm`, numba; results
    equal the tape's to rounding: within 1e-12 relative, not bit for bit) and the rest
    as generated Python; ``"python"`` always replays generated Python (bit for bit with
    the tape, ``source`` is that code). Without numba (or with ``STANLITE_JIT=0``)
    ``"auto"`` is ``"python"``. ``compiled`` says whether the interpreter runs,
    ``vm_skipped`` why it does not.

    ``inputs``: ``f`` takes pieces of ``x`` instead of ``x`` - a list, one piece per
    ``(start, stop, shape)`` given: ``x[start:stop]`` in ``shape``, a float where the
    shape is ``()`` - and ``x`` is a float vector as long as the pieces reach; the
    gradient is still ``x``'s (each piece's at its place, zeros where no piece is).
    How a model's log density is compiled (``Model.log_density_gradient``: one piece
    per parameter, ``ParamLayout.inputs`` in stanlite/layout.py), with one tape
    variable per piece and no slicing nodes. ``example_x`` may then be None: the
    first call records. ``value_only``: ``x -> f(x)`` alone, the forward pass replayed
    without adjoints (checked against the value on the eager tape).

    >>> import numpy as np, stanlite as sl
    >>> y = np.array([0.5, -1.0, 2.0])
    >>> vg = sl.compile(lambda m: sl.normal_lpdf(y, m[0], sl.exp(m[1])), np.zeros(2))
    >>> v, g = vg(np.array([0.3, 0.1]))
    >>> round(v, 6), np.round(g, 6)
    (-4.948084, array([0.491238, 0.782536]))
    >>> vp = sl.compile(lambda p: p[0] * sl.sum(p[1] ** 2), inputs=[(0, 1, ()),
    ...                 (1, 3, (2,))], backend="python")
    >>> vp(np.array([2.0, 1.0, 3.0]))
    (20.0, array([10.,  4., 12.]))
    """
    return Compiled(f, example_x, max_recordings=max_recordings, verify=verify,
                    exact=exact, backend=backend, inputs=inputs, value_only=value_only)
