"""The registry of the interpreter's array ops: each op's compiled forward and reverse
sweep, declared beside the primitive it lowers (in ``stanlite/math`` and
``stanlite/distributions``), never written in the kernel.

A primitive whose interpreter op has its own loops - a summed log density, a
reduction, a matrix product, a factorisation - states them once, next to its numpy
function, as plain Python that numba compiles::

    def _normal_value(V, code, r, n, a, sa, b, sb, c, sc):
        ...                                 # -> (status, log density)

    def _normal_grad(V, A, code, r, g, m, n, a, sa, b, sb, c, sc):
        ...                                 # adjoints += g * partials

    defkernel(_op.NORMAL, _normal_value, _normal_grad, kind="density")

Two kinds, by what the kernel hands them (``code[r]`` is the op's row, :mod:`.opcodes`):

``"density"``  a summed log density, ``out[0] = sum_i lpdf(...)``:
               ``value(V, code, r, n, a, sa, b, sb, c, sc) -> (status, lp)`` and
               ``grad(V, A, code, r, g, m, n, a, sa, b, sb, c, sc)`` with ``g`` the
               output's adjoint and ``m`` the row's MASK (which arguments need one);
``"array"``    any other op with loops of its own:
               ``forward(V, aux, code, r) -> status`` (it writes its output) and
               ``reverse(V, A, aux, code, r)``.

``helpers`` are further plain functions the two call (compiled with them).

:mod:`.sweeps` compiles the declared functions where they are written, with the
kernel's decorator; :mod:`.generate_ops` writes ``ops_generated.py``, one dispatch
function per sweep and kind (an if-chain on the op code), which :mod:`.kernel`
imports; tests/autodiff/test_vm_generated_ops.py checks that the checked-in file is
what the declarations generate. The registry lives here, in autodiff, and is filled
from math and distributions when they are imported: autodiff never imports them (the
kernel is imported after ``stanlite``, and reads the registry then).
"""

from collections import namedtuple

__all__ = ["defkernel", "declared_kernels", "KernelDecl", "KINDS"]

KINDS = ("density", "array")

KernelDecl = namedtuple("KernelDecl", "op kind forward reverse helpers")

_KERNELS = {}


def defkernel(op, forward, reverse, kind="array", helpers=()):
    """Declare interpreter op ``op``'s compiled sweeps (see the module docstring);
    ``forward`` is returned, so the call can close a block of declarations.

    >>> import stanlite
    >>> from stanlite.autodiff.vm import declare, opcodes
    >>> d = declare.declared_kernels()[opcodes.NORMAL]
    >>> d.kind, d.forward.__module__
    ('density', 'stanlite.distributions.continuous')
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    old = _KERNELS.get(op)
    if old is not None and (old.forward is not forward or old.reverse is not reverse):
        raise ValueError(f"op {op} is declared twice ('{old.forward.__name__}' and "
                         f"'{forward.__name__}')")
    _KERNELS[op] = KernelDecl(op, kind, forward, reverse, tuple(helpers))
    return forward


def declared_kernels():
    """``{op code: KernelDecl}`` of every declaration made so far (the library's are
    made when ``stanlite`` is imported)."""
    return dict(_KERNELS)
