"""The text of generated replay code (:mod:`.codegen`): the kinds of runtime values,
which decide the code as they decide the eager tape's branches, and expressions as
strings - parenthesising, literal folding, numpy's pairwise sum written out,
subscripts and operators as source.

>>> kind_of(1.0), kind_of(np.zeros((2, 3))), _p("a + b"), _subscript((1, slice(2, None)))
('F', (2, 3), '(a + b)', '1, 2:')
"""

import math
import operator

import numpy as np

# "F": a Python float, "N": a numpy float64 scalar, a tuple: an ndarray of that shape,
# "O": anything else (handled by runtime helpers)
# "F": a Python float, "N": a numpy float64 scalar, a tuple: an ndarray of that shape,
# "O": anything else (handled by runtime helpers)
_F, _N, _O = "F", "N", "O"


_f64 = np.float64


_ndarray = np.ndarray


_F64_DTYPE = np.dtype(np.float64)


def kind_of(v):
    t = type(v)
    if t is float:
        return _F
    if t is np.ndarray:
        return v.shape
    if t is _f64:
        return _N
    return _O


def _arith_kind(*ks):
    """Kind of ``a op b`` (+ - * /, numpy broadcasting) from the operands' kinds."""
    shapes = [k for k in ks if type(k) is tuple]
    if shapes:
        s = np.broadcast_shapes(*shapes)
        return s if s else _N
    if _O in ks:
        return _O
    return _N if _N in ks else _F


_IDENT = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789")


def _atomic(e):
    """Is expression ``e`` a name or a literal (safe to repeat, no parentheses)?"""
    return all(c in _IDENT or c == "." for c in e) and not e[0].isdigit() or _is_num(e)


def _is_num(e):
    try:
        float(e)
        return not e.startswith("-")
    except ValueError:
        return False


def _p(e):
    return e if _atomic(e) else f"({e})"


def _pairwise_expr(t, n):
    """numpy's pairwise sum of the ``n`` floats of list ``t``, as an expression."""
    e = [f"{t}[{i}]" for i in range(n)]
    if n < 8:
        return " + ".join(e)
    r = e[:8]
    i = 8
    while i < n - n % 8:
        r = [f"({r[j]} + {e[i + j]})" for j in range(8)]
        i += 8
    out = f"(({r[0]} + {r[1]}) + ({r[2]} + {r[3]})) + (({r[4]} + {r[5]}) + ({r[6]} + {r[7]}))"
    return " + ".join([f"({out})"] + e[i:])


def _pairwise_agrees():
    """Does this numpy sum short float64 vectors in the order ``_pairwise_expr`` writes?
    (Checked once per process, at the first short sum a program writes - not at import:
    its ~320 small ``eval`` calls cost ~20 ms that a first draw from a cached program
    never needs; if not, sums stay numpy calls.)"""
    ok = _PAIRWISE_OK[0]
    if ok is None:
        ok = _PAIRWISE_OK[0] = _pairwise_check()
    return ok


def _pairwise_check():
    rng = np.random.default_rng(12345)
    for n in range(1, 17):
        for _ in range(20):
            a = rng.standard_normal(n) * 10.0 ** rng.uniform(-8, 8, n)
            t = a.tolist()      # noqa: F841 (read by the expression)
            if eval(_pairwise_expr("t", n), {"t": t}) != float(a.sum()):
                return False
    return True


_PAIRWISE_OK = [None]        # _pairwise_agrees(), once known


_LITERAL = set("0123456789.e+-*/() ")


def _fold(e):
    """A Python-float expression of literals only (``(-1.0) * 0.5``) evaluated now, as
    the replay would (the same IEEE operations), as a literal; else None."""
    if not e or not set(e) <= _LITERAL:
        return None
    try:
        v = eval(e, {"__builtins__": {}})       # noqa: S307 (digits and operators only)
    except Exception:
        return None
    if type(v) is not float or not math.isfinite(v):
        return None
    return repr(v)


def _subscript(idx):
    """``idx`` as subscript source (``3``, ``2:``, ``1, ::2``), or None if it is not
    made of ints, slices, None and Ellipsis."""
    items = idx if type(idx) is tuple else (idx,)
    out = []
    for it in items:
        t = type(it)
        if t is int:
            out.append(repr(it))
        elif t is slice:
            parts = [("" if v is None else repr(v)) for v in (it.start, it.stop, it.step)]
            if not all(v is None or type(v) is int for v in (it.start, it.stop, it.step)):
                return None
            out.append(":".join(parts[:2]) + (f":{parts[2]}" if it.step is not None else ""))
        elif it is None:
            out.append("None")
        elif it is Ellipsis:
            out.append("...")
        else:
            return None
    if type(idx) is tuple:
        return ", ".join(out) + ("," if len(out) == 1 else "") if out else "()"
    return out[0]


_OPS = {operator.add: "+", operator.sub: "-", operator.mul: "*"}


_CMP = {operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">=",
        operator.eq: "==", operator.ne: "!="}
