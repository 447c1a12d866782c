"""Interpreter programs as plain data (arrays, numbers, strings): what a pickled
model carries to a spawned worker or a Dask task, and what the disk cache
(:mod:`.program_cache`) stores - see ``_Retaped.portable`` in :mod:`.compile`.
"""

import numpy as np


class _GuardNote:
    """A guard of a program made in another process: its description only (what a
    warning names when the graph keeps changing)."""

    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text

    def describe(self):
        return self.text


def _program_state(p):
    """An interpreter program (autodiff/vm/program.py) as arrays, numbers and strings;
    its value buffer as lowered (constants, zeros where values are computed)."""
    V = p.V.copy()
    V[:p.nvar] = 0.0
    return {"code": p.code, "aux": p.aux, "V": V, "dim": p.dim, "out": p.out,
            "nvar": p.nvar, "size": p.size, "value_only": p.value_only,
            "nodes": p.nodes, "guards": [g.describe() for g in p.guards]}


def _program_from(d):
    """The program of :func:`_program_state` ``d``, with its own buffers."""
    from .vm.program import Program, _replay_function
    p = Program()
    p.code = np.ascontiguousarray(d["code"], dtype=np.int64)
    p.aux = np.ascontiguousarray(d["aux"], dtype=np.int64)
    p.V = np.array(d["V"], dtype=np.float64)
    p.A = np.zeros_like(p.V)
    p.dim, p.out, p.nvar, p.size, p.nodes = (int(d[k]) for k in
                                             ("dim", "out", "nvar", "size", "nodes"))
    p.value_only = bool(d["value_only"])
    p.guards = [_GuardNote(t) for t in d["guards"]]
    p.inexact = True
    p.fn = _replay_function(p, None)
    p.source = p.listing()
    return p


def _format_digest():
    """The programs' format: a hash of the interpreter's source (kernels, op codes,
    the replay function); programs made by another version are not adopted."""
    from .program_cache import source_digest
    from .vm import kernel, opcodes, program
    return source_digest((kernel.__file__, opcodes.__file__, program.__file__))
