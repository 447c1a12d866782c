"""How :mod:`.codegen` reads a recorded node: its rule family (from the form its
backward rule declares, never from its name), its key for common subexpressions,
and the kinds of its results, probed once on plain values.
"""

import warnings

import numpy as np

from .extend import _bp_generic
from .var import Var


class NotCompilable(Exception):
    """A node or guard that has no replay rule (the eager tape is used). ``quiet``: not
    a problem of the function, only a replay that would not be faster."""

    def __init__(self, msg, quiet=False):
        super().__init__(msg)
        self.quiet = quiet


def _cse_key(spec, args, kw, names):
    """A hashable key of a primitive call: traced arguments by the name of their value,
    numbers and index tuples by value (``repr``: 0.0 and -0.0 differ), other objects
    by identity."""
    parts = [spec]
    for a in list(args) + list(kw.items()):
        t = type(a)
        if t is Var:
            parts.append(("v", names.get(id(a), id(a))))
        elif t in (float, int, bool, str) or a is None:
            parts.append(("c", t, repr(a)))
        elif t is tuple or t is slice:
            r = repr(a)
            if "array" in r or "<" in r:
                parts.append(("o", id(a)))
            else:
                parts.append(("c", t, r))
        else:
            parts.append(("o", id(a)))
    return tuple(parts)


def _is(spec, kind):
    """Does ``spec`` declare that it is numpy's operation ``kind`` (extend.definline)?"""
    inl = spec.inline
    return inl is not None and inl.kind == kind


# the replay rules that mirror the tape's fast rules of a declared form (fast_rules.py:
# + - *), not the generated ones from the VJPs
_FORM_RULES = {"linear": "linear", "bilinear": "mul"}


def _family(n, spec):
    bp = n.bp
    if bp is _bp_generic:
        return "generic"
    if spec.kernel is not None:
        return "fused"
    form = getattr(bp, "_form", None)       # the layout of the node (extend._tag)
    if form == "binary_own":
        declared = getattr(spec.derivative, "form", None)
        rule = None if declared is None else _FORM_RULES.get(declared[0])
        if rule is None:
            raise NotCompilable(f"hand-written backward rules of '{spec.name}'")
        return rule
    if form is None:
        raise NotCompilable(f"no replay rule for nodes of '{spec.name}' "
                            f"({getattr(bp, '__name__', bp)})")
    return form


def _quiet(fn, *args, **kw):
    """Evaluate ``fn`` once for the kind of its result (warnings and fp errors off)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return fn(*args, **kw)
        except (ArithmeticError, ValueError):
            return None


def _probe(spec, n, args):
    vals = [a.value if type(a) is Var else a for a in args]
    if spec.op is not None:
        return _quiet(spec.op, *vals)
    return _quiet(spec.fun, *vals)


def _probe_vjp(vjp, n, vals):
    return _quiet(vjp, n.adj, n.value, *vals)


def _probe_call(fn, n, vals, kw):
    return _quiet(fn, n.adj, n.value, *vals, **kw)
