"""Recording: one run of a function on the tape, with the guards and escapes its code
showed (what :mod:`.compile` turns into a program; see its docstring for guards and
escapes).

A function is recorded either of one input ``x`` (:func:`_record_function`: ``x`` is
one leaf) or of *pieces* of a flat vector (:func:`record_pieces`: one leaf per piece,
``inputs = [(start, stop, shape), ...]``, a piece being ``x[start:stop]`` in
``shape``, a float where the shape is ``()``): how a model's log density is recorded,
one leaf per parameter, already in the shape its constrain step takes, instead of one
leaf for ``x`` and a slicing node per parameter. The gradient of the pieces is written
back at their places in a vector like ``x``.

>>> import numpy as np, stanlite as sl
>>> from stanlite.autodiff.recording import value_and_grad_pieces
>>> f = lambda p: p[0] * sl.sum(p[1])
>>> value_and_grad_pieces(f, np.array([2.0, 1.0, 3.0]), [(0, 1, ()), (1, 3, (2,))])
(8.0, array([4., 2., 2.]))
"""

import os
import sys

import numpy as np

from .extend import reshape
from .functional import sweep_scalar
from .tape import gc_paused_nested
from .var import Box, _strip, make_leaf, unwatch, watch

__all__ = ["Recording", "recording", "record_pieces", "value_and_grad_pieces",
           "cut_pieces", "piece_expression"]



# ======================================================================================
# recording: the tape, the guards and the escapes seen while f runs once
# ======================================================================================
_HERE = os.path.dirname(os.path.abspath(__file__))
# the files whose frames report a look at a value (the comparisons are operators.py's)
_HOOK_FILES = {os.path.join(_HERE, f)
               for f in ("var.py", "compile.py", "recording.py", "operators.py")}


def _where():
    """``file:line (function)`` of the code that looked at a value (the hooks skipped)."""
    f = sys._getframe(2)
    while f is not None and os.path.abspath(f.f_code.co_filename) in _HOOK_FILES:
        f = f.f_back
    if f is None:
        return "?"
    return f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno} ({f.f_code.co_name})"


def _on_tape(x, tape):
    """The variable of ``tape`` that ``x`` is or carries (nested tracing), or None."""
    while isinstance(x, Box):
        if x.tape is tape:
            return x
        x = x.value
    return None


class _Guard:
    __slots__ = ("pos", "fn", "args", "result", "where")

    def __init__(self, pos, fn, args, result, where):
        self.pos = pos              # nodes recorded before it: its place in the replay
        self.fn = fn
        self.args = args            # Vars of the tape, or plain constants
        self.result = result
        self.where = where

    def describe(self):
        name = getattr(self.fn, "__name__", repr(self.fn))
        return f"{name}(...) -> {_short(self.result)} at {self.where}"


def _short(r):
    if isinstance(r, np.ndarray):
        return f"array{r.shape}"
    s = repr(r)
    return s if len(s) < 40 else s[:37] + "..."


class _Recorder:
    """The watcher of one recording (see var.watch): collects guards and escapes."""

    def __init__(self, tape):
        self.tape = tape
        self.guards = []
        self.escapes = []

    def guard(self, fn, args, result):
        tape = self.tape
        found = False
        out = []
        for a in args:
            v = _on_tape(a, tape)
            if v is not None:
                found = True
                out.append(v)
            else:
                out.append(_strip(a))
        if found:
            if isinstance(result, np.ndarray):
                result = result.copy()
            self.guards.append(_Guard(len(tape.nodes), fn, tuple(out), result, _where()))

    def escape(self, x, how):
        if _on_tape(x, self.tape) is not None:
            self.escapes.append(f"{how} at {_where()}")


class Recording:
    """One run of f on the tape: nodes, inputs (leaves), output, guards, escapes, and
    the eager value and gradient at that point."""

    __slots__ = ("tape", "nodes", "inputs", "output", "guards", "escapes", "result",
                 "x")

    def __init__(self, tape, nodes, inputs, output, guards, escapes, result, x):
        self.tape = tape
        self.nodes = nodes
        self.inputs = inputs
        self.output = output
        self.guards = guards
        self.escapes = escapes
        self.result = result
        self.x = x


class recording:
    """Context for code that records a gradient itself (``Model``): ``with
    recording(tape) as rec: ...`` collects guards and escapes on ``tape``."""

    __slots__ = ("rec",)

    def __init__(self, tape):
        self.rec = _Recorder(tape)

    def __enter__(self):
        watch(self.rec)
        return self.rec

    def __exit__(self, *exc):
        unwatch(self.rec)
        return False


def _record_function(f, x, scalar=True):
    """Run ``f`` at ``x`` on a fresh tape, watched; sweep eagerly. -> Recording

    With ``scalar=False`` the output may be an array and there is no sweep: the
    recording's result is ``(0.0, f(x))`` (a replayed forward pass, as for a Hessian)."""
    with gc_paused_nested() as tape:
        leaf = make_leaf(x, tape)
        rec = _Recorder(tape)
        watch(rec)
        try:
            y = f(leaf)
        finally:
            unwatch(rec)
        nodes = tape.nodes
        if not scalar:
            out = np.array(_strip(y), dtype=float)
            return Recording(tape, nodes, [leaf], y, rec.guards, rec.escapes, (0.0, out),
                             x)
        if sweep_scalar(y, tape):
            val = y.value
            a = leaf.adj
            grad = (0.0 if type(x) is float else np.zeros(x.shape)) if a is None else a
        else:
            val = _strip(y)
            grad = 0.0 if type(x) is float else np.zeros(x.shape)
    if type(val) is not float:
        val = float(val)
    return Recording(tape, nodes, [leaf], y, rec.guards, rec.escapes, (val, grad), x)


# ======================================================================================
# a function of pieces of a flat vector (a model's parameters)
# ======================================================================================
def cut_pieces(x, inputs):
    """The pieces of ``x`` (plain or traced) that ``inputs`` describe: ``x[start:stop]``
    in ``shape``, a float where ``shape`` is ``()`` (an element of a traced ``x``)."""
    out = []
    for start, stop, shape in inputs:
        if shape == ():
            out.append(float(x[start]) if type(x) is np.ndarray else x[start])
            continue
        p = x[start:stop]
        if len(shape) > 1:
            p = p.reshape(shape) if type(p) is np.ndarray else reshape(p, shape)
        out.append(p)
    return out


def piece_expression(start, stop, shape):
    """The Python expression that cuts piece ``(start, stop, shape)`` from ``x`` (what
    generated code does where :func:`cut_pieces` is called)."""
    if shape == ():
        return f"x.item({start})"
    if len(shape) > 1:
        return f"x[{start}:{stop}].reshape({tuple(shape)!r})"
    return f"x[{start}:{stop}]"


def record_pieces(f, x, inputs, record=True):
    """``f(pieces of x)`` on a fresh tape, one leaf per piece, swept eagerly.

    ``record=True``: the :class:`Recording` (watched: guards and escapes); else
    ``(value, gradient)`` - :func:`value_and_grad_pieces`. ``x`` is a float vector."""
    # sl.value_and_grad, with one independent variable per piece (already shaped)
    # instead of one for x and a slicing node per piece
    with gc_paused_nested() as tape:
        leaves = []
        for value in cut_pieces(x, inputs):
            leaves.append(make_leaf(value, tape))
        if record:
            with recording(tape) as rec:
                lp = f(leaves)
            nodes = tape.nodes
        else:
            lp = f(leaves)
        g = np.zeros(x.shape[0])
        if sweep_scalar(lp, tape):
            val = lp.value
            for (start, stop, shape), v in zip(inputs, leaves):
                a = v.adj
                if a is not None:
                    if shape == ():
                        g[start] = a
                    else:
                        g[start:stop] = a if type(a) is float else np.ravel(a)
        else:
            val = lp
    if type(val) is not float and not isinstance(val, Box):
        val = float(val)
    if record:
        return Recording(tape, nodes, leaves, lp, rec.guards, rec.escapes,
                         (float(val), g), x.copy())
    return float(val), g


def value_and_grad_pieces(f, x, inputs):
    """``(f(pieces), gradient)`` of ``f`` of the pieces of ``x`` (``inputs``: see the
    module docstring) by the eager tape; the gradient is a vector like ``x``."""
    return record_pieces(f, x, inputs, record=False)
