"""The tape: a thread-local stack of recording regions and the reverse sweep.

A :class:`Tape` is an arena in the sense of the AD review (Margossian 2019, sec. on
region-based memory): every node created by a primitive is appended to the tape of
the *highest-level* variable among its inputs, in creation order. Creation order is a
valid topological order, so the reverse sweep is a single backwards walk with no graph
sort (as in Stan's ``grad()``). After a gradient the whole region is dropped at once
(``Tape.release``): the node list is cleared, which breaks the only reference cycle
(node -> tape -> node list) and lets reference counting free every node.

Tapes are stacked per thread. ``with nested():`` pushes a tape one level above the
current top (Stan's ``start_nested`` / ``recover_memory_nested``). A variable
belongs to exactly one tape; an operation mixing variables of different levels is
recorded on the highest level with the lower ones treated as constants *at that
level* - but their own dependence is recorded on their own (lower) tape, because
the primitive's value is computed by calling the primitive again on the unwrapped
inputs. That is what makes nested differentiation free of perturbation confusion
(Siskind & Pearlmutter; autograd's trace levels), and why the backward sweep of an
inner tape is itself recorded on the outer tape (reverse-over-reverse).

Garbage collection: nodes hold no reference cycles while their tape is open except
through the tape itself, so the cyclic collector has nothing to find; but its
generation-0 scans over a tape of 10^5 young objects cost far more than the
recording. Recording and sweeping therefore run with the collector paused
(:func:`gc_paused`), restored on exit even on exceptions.
"""

import gc
import threading

import numpy as np

from ..errors import DifferentiationError

__all__ = ["Tape", "nested", "current_tape", "root_tape", "gc_paused", "recover_memory"]


class Tape:
    """One recording region at a nesting ``level`` (1 = root)."""

    __slots__ = ("nodes", "level", "open", "owned", "__weakref__")

    def __init__(self, level):
        self.nodes = []
        self.level = level
        self.open = True
        # ids of adjoint arrays created by the sweep itself (safe to update in place)
        self.owned = {}

    def __repr__(self):
        state = "open" if self.open else "closed"
        return f"<Tape level={self.level} nodes={len(self.nodes)} {state}>"

    def backward(self, root, seed=None, retain=False):
        """Reverse sweep from ``root``: seed its adjoint and walk the tape backwards.

        ``seed`` defaults to ones of the root's shape. With ``retain=False`` the region
        is released afterwards (the nodes can no longer be swept).
        """
        if not self.open:
            raise DifferentiationError(
                "backward() on a variable whose tape was already released "
                "(its nested scope ended or a previous backward() freed it)")
        if root.tape is not self:
            raise DifferentiationError("backward(): the root does not belong to this tape")
        if root.bp is _retired:
            raise DifferentiationError(
                "backward() on a variable whose recording was already released by a "
                "previous backward(); pass retain=True to sweep the same recording twice")
        if seed is None:
            seed = ones_like_value(root.value)
        root.adj = seed
        self.owned = {}
        nodes = self.nodes
        with gc_paused():
            sweep(nodes)
        if not retain:
            # the tape stays open for new recordings; the swept nodes are retired so
            # that sweeping them again is an error rather than a silent no-op
            for node in nodes:
                node.bp = _retired
            self.release()

    def zero_adjoints(self):
        """Set every recorded adjoint back to zero (``None``), for another sweep."""
        for node in self.nodes:
            node.adj = None
        self.owned.clear()

    def release(self):
        """Drop the region: every node recorded here becomes unreachable from the tape."""
        self.nodes = []
        self.owned = {}


def sweep(nodes):
    """The reverse sweep itself: every recorded node, newest first, pushes its adjoint
    into its parents. (Callers pause the garbage collector and seed the root.)"""
    for node in reversed(nodes):
        g = node.adj
        if g is not None:
            node.bp(node, g)


def sweep_rows(tape, nodes, out, leaves, n):
    """The rows of the Jacobian of ``out``, an ``n``-vector recorded as ``nodes`` on
    ``tape``, with respect to ``leaves``: one reverse sweep per row, seeded with the
    unit vector ``e_i`` after clearing what the last sweep left (adjoints, the
    tape's owned buffers). Yields ``(i, adjoints)``, ``adjoints[k]`` what reached
    ``leaves[k]`` (None: nothing). (Callers pause the garbage collector, as for
    :func:`sweep`.)"""
    for i in range(n):
        for node in nodes:
            node.adj = None
        for leaf in leaves:
            leaf.adj = None
        tape.owned = {}
        seed = np.zeros(n)
        seed[i] = 1.0
        out.adj = seed
        sweep(nodes)
        yield i, [leaf.adj for leaf in leaves]


def _retired(node, g):
    raise DifferentiationError("this node's recording was released")


class _State(threading.local):
    def __init__(self):
        self.stack = []
        self.gc_depth = 0
        self.gc_was = True
        # recordings of sl.compile open in this thread (innermost last): the hooks of
        # var.py report value-dependent control flow to them (see compile.py)
        self.watchers = []


_state = _State()


def root_tape():
    """The thread's level-1 tape (created on first use)."""
    stack = _state.stack
    if not stack:
        stack.append(Tape(1))
    return stack[0]


def current_tape():
    """The innermost open tape of this thread."""
    stack = _state.stack
    if not stack:
        stack.append(Tape(1))
    return stack[-1]


def pop_scope(scope):
    """Close ``scope`` (a tape or a forward trace) and pop it off this thread's stack,
    with any inner scope left open above it by an abandoned generator."""
    scope.open = False
    stack = _state.stack
    while stack and stack[-1] is not scope:
        stack.pop().open = False
    if stack:
        stack.pop()


def _pause_gc():
    # re-entrant: the collector's state is saved by the outermost pause, restored by
    # its resume
    st = _state
    if st.gc_depth == 0:
        st.gc_was = gc.isenabled()
        gc.disable()
    st.gc_depth += 1


def _resume_gc():
    st = _state
    st.gc_depth -= 1
    if st.gc_depth == 0 and st.gc_was:
        gc.enable()


class nested:
    """Open a nested recording scope; its memory is released on exit.

    Variables created inside (``sl.Var(x)``) live one level above every enclosing
    scope. Gradients taken inside see enclosing variables as constants at this level,
    while their dependence on those variables is still recorded on the enclosing tape.
    (A class, not a generator context manager: entering and leaving cost ~0.3 us,
    which matters for gradients of small models.)

    Example
    -------
    >>> import numpy as np, stanlite as sl
    >>> with sl.nested():
    ...     x = sl.Var(np.array([1.0, 2.0]))
    ...     y = sl.sum(x * x)
    ...     y.backward()
    ...     print(x.adj)
    [2. 4.]
    """

    __slots__ = ("tape",)

    def __enter__(self):
        stack = _state.stack
        if not stack:
            stack.append(Tape(1))
        self.tape = tape = Tape(stack[-1].level + 1)
        stack.append(tape)
        return tape

    def __exit__(self, *exc):
        tape = self.tape
        tape.nodes = []
        tape.owned = {}
        pop_scope(tape)
        return False


class gc_paused_nested(nested):
    """``nested()`` and ``gc_paused()`` in one scope: what every functional opens."""

    __slots__ = ()

    # _pause_gc and _resume_gc written out: every gradient of the functionals opens
    # this scope, and the two calls cost ~0.1 us of a small model's ~4 us
    def __enter__(self):
        tape = nested.__enter__(self)
        st = _state
        if st.gc_depth == 0:
            st.gc_was = gc.isenabled()
            gc.disable()
        st.gc_depth += 1
        return tape

    def __exit__(self, *exc):
        nested.__exit__(self)
        st = _state
        st.gc_depth -= 1
        if st.gc_depth == 0 and st.gc_was:
            gc.enable()
        return False


def recover_memory():
    """Release the root tape's region (Stan's ``recover_memory``)."""
    root_tape().release()


class gc_paused:
    """Pause the cyclic garbage collector for the duration (re-entrant)."""

    __slots__ = ()

    def __enter__(self):
        _pause_gc()
        return self

    def __exit__(self, *exc):
        _resume_gc()
        return False


def ones_like_value(v):
    """The default seed of a sweep: 1.0, or ones of the value's shape."""
    t = type(v)
    if t is float:
        return 1.0
    if t is np.ndarray:
        return np.ones(v.shape)
    s = v.shape
    return 1.0 if s == () else np.ones(s)
