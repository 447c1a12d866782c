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

A density whose element is a function of its own arguments' elements alone (normal,
gamma, beta, poisson...) declares only that element - its log density, its domain and
its partials - through :func:`defdensity` (``vm.program.density_op`` declares its
lowering with it): the two strided loops over the arguments are written once, here,
and each family's copy is compiled with its element functions inlined.

:mod:`.sweeps` compiles the declared functions where they are written, with the
kernel's decorator; :mod:`.generate_ops` writes ``ops_generated.py``, one dispatch
function per sweep and kind (an if-chain on the op code), which :mod:`.kernel`
imports; tests/autodiff/test_vm_generated_ops.py checks that the checked-in file is
what the declarations generate. The registry lives here, in autodiff, and is filled
from math and distributions when they are imported: autodiff never imports them (the
kernel is imported after ``stanlite``, and reads the registry then).
"""

import types
from collections import namedtuple

from . import opcodes as _op

__all__ = ["defkernel", "defdensity", "declared_kernels", "KernelDecl", "KINDS"]

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


def _everywhere(*args):
    # the domain of a density defined at every element (poisson_log)
    return True


# The summed densities' two strided loops, written once: :func:`defdensity` makes each
# family's sweeps from these two, with the family's per-element functions in place of
# ``_inside``, ``_lp`` and ``_partials`` and its numbers in place of ``_ARITY``,
# ``_TABLE`` and ``_CONST`` (numba freezes them, so the branches on them are compiled
# away and the per-element functions inlined). With ``_TABLE`` the third value is the
# per-element constant the lowering put at X1 (lgamma(n + 1)), read with the first
# argument's stride. The placeholders (never called) name what each family binds.
_inside = _lp = _partials = None
_ARITY = _TABLE = 0
_CONST = 0.0


def _summed_value(V, code, r, n, a, sa, b, sb, c, sc):
    k = code[r, _op.X1]
    lp = 0.0
    for i in range(n):
        y = V[a + i * sa]
        p = V[b + i * sb]
        if _ARITY == 2:
            if not _inside(y, p):
                return _op.DOMAIN, 0.0
            lp += _lp(y, p)
        else:
            q = V[k + i * sa] if _TABLE else V[c + i * sc]
            if not _inside(y, p, q):
                return _op.DOMAIN, 0.0
            lp += _lp(y, p, q)
    return _op.OK, lp - n * _CONST


def _summed_grad(V, A, code, r, g, m, n, a, sa, b, sb, c, sc):
    k = code[r, _op.X1]
    for i in range(n):
        y = V[a + i * sa]
        p = V[b + i * sb]
        if _ARITY == 2:
            d = _partials(m, g, y, p)
        else:
            d = _partials(m, g, y, p, V[k + i * sa] if _TABLE else V[c + i * sc])
        if m & 1:
            A[a + i * sa] += d[0]
        if m & 2:
            A[b + i * sb] += d[1]
        if _ARITY == 3 and not _TABLE and m & 4:
            A[c + i * sc] += d[2]


def _instance(template, name, module, consts):
    fn = types.FunctionType(template.__code__,
                            {**template.__globals__, "__name__": module, **consts}, name)
    fn.__qualname__ = name
    return fn


def defdensity(op, lp, partials, inside=None, arity=3, table=False, constant=0.0):
    """Declare the sweeps of summed density ``op`` (``kind="density"``) by what one
    element contributes, the loops over the interpreter's strided arguments being
    written once, here:

    ``lp(y, p[, q])``                 the element's log density, summed (in order) and
                                      less ``n * constant``;
    ``inside(y, p[, q])``             False where the element is outside the density's
                                      domain (the value sweep returns DOMAIN); None:
                                      everywhere;
    ``partials(m, g, y, p[, q])``     the adjoints' increments, ``g`` (the output's
                                      adjoint) times the element's partials, as a tuple
                                      of ``arity``; ``m`` is the row's MASK, bit k - 1
                                      set where argument k needs one: a partial whose
                                      argument needs none is not used. Arithmetic is
                                      best computed as is (the compiler sinks it;
                                      a branch each costs more), a call to a
                                      transcendental or special function only where
                                      needed (``... if m & 2 else 0.0``).

    ``arity`` is 2 or 3 values an element; ``table``: the third is no argument but the
    per-element constant the lowering stores at X1 (read with the first argument's
    stride, never differentiated). The two sweeps are compiled each with its own
    functions (their numba cache is each family's: named for it) and the per-element
    functions inlined, as fast as a loop written out. Returns ``lp``.
    """
    if arity not in (2, 3) or (table and arity != 3):
        raise ValueError(f"arity must be 2 or 3 (3 with a table), got {arity}")
    inside = _everywhere if inside is None else inside
    consts = dict(_inside=inside, _lp=lp, _partials=partials, _ARITY=arity,
                  _TABLE=int(table), _CONST=float(constant))
    stem = lp.__name__.removesuffix("_lp")
    value = _instance(_summed_value, stem + "_value", lp.__module__, consts)
    grad = _instance(_summed_grad, stem + "_grad", lp.__module__, consts)
    defkernel(op, value, grad, kind="density", helpers=(inside, lp, partials))
    return lp


def declared_kernels():
    """``{op code: KernelDecl}`` of every declaration made so far (the library's are
    made when ``stanlite`` is imported)."""
    return dict(_KERNELS)
