"""The compiled interpreter's LSE, LSE_AXIS and LOG_MIX sweeps: ``log_sum_exp`` (whole
and along an axis) and ``log_mix``, whose lowering rules are declared in
:mod:`.special`, which imports this module beside them (autodiff/vm/declare.py says how
the sweeps reach the kernel). Plain Python that numba compiles: their own module only
to keep :mod:`.special` under 1,000 lines.
"""

import math

from ..autodiff.vm import opcodes as _op
from ..autodiff.vm.declare import defkernel as _defkernel
# declared helpers: the along_axis op row, and the maximum of one slice along it
from .reductions import _axis_layout, _axis_max

__all__ = []


# the interpreter's LSE sweeps: out[0] = log sum exp V[a : a + X2]
def _lse_forward(V, aux, code, r):
    a = code[r, _op.A]
    o = code[r, _op.OUT]
    k = code[r, _op.X2]
    hi = -math.inf
    for i in range(k):
        if V[a + i] > hi:
            hi = V[a + i]
    if hi == -math.inf or hi == math.inf:
        V[o] = hi
    else:
        s = 0.0
        for i in range(k):
            s += math.exp(V[a + i] - hi)
        V[o] = hi + math.log(s)
    return _op.OK


def _lse_reverse(V, A, aux, code, r):
    a = code[r, _op.A]
    o = code[r, _op.OUT]
    g = A[o]
    ans = V[o]
    for i in range(code[r, _op.X2]):
        A[a + i] += g * math.exp(V[a + i] - ans)


_defkernel(_op.LSE, _lse_forward, _lse_reverse)


# ... and LSE_AXIS, along the middle axis of V[a] as (X1, X2, X3)
def _lse_axis_forward(V, aux, code, r):
    # log_sum_exp along the middle axis of V[a] as (outer, length, inner), as LSE
    o, a, nout, ln, inner = _axis_layout(code, r)
    for u in range(nout):
        for j in range(inner):
            base = u * ln * inner + j
            hi = _axis_max(V, a + base, ln, inner)
            if hi == -math.inf or hi == math.inf:
                V[o + u * inner + j] = hi
            else:
                s = 0.0
                for t in range(ln):
                    s += math.exp(V[a + base + t * inner] - hi)
                V[o + u * inner + j] = hi + math.log(s)
    return _op.OK


def _lse_axis_reverse(V, A, aux, code, r):
    o, a, nout, ln, inner = _axis_layout(code, r)
    for u in range(nout):
        for j in range(inner):
            g = A[o + u * inner + j]
            ans = V[o + u * inner + j]
            base = u * ln * inner + j
            for t in range(ln):
                A[a + base + t * inner] += g * math.exp(V[a + base + t * inner] - ans)


_defkernel(_op.LSE_AXIS, _lse_axis_forward, _lse_axis_reverse,
           helpers=(_axis_layout, _axis_max))


# the interpreter's LOG_MIX sweeps (autodiff/vm/declare.py): log(a e^b + (1 - a) e^c)
# elementwise, 0 < a < 1
def _log_mix_row(code, r):
    # the op row both sweeps read: N elements of out, and theta, lp1, lp2 at a, b, c
    # with strides SA, SB, SC (0: one value broadcast)
    return (code[r, _op.N], code[r, _op.OUT], code[r, _op.A], code[r, _op.SA],
            code[r, _op.B], code[r, _op.SB], code[r, _op.C], code[r, _op.SC])


def _log_mix_forward(V, aux, code, r):
    n, o, a, sa, b, sb, c, sc = _log_mix_row(code, r)
    lt = l1t = 0.0
    for i in range(n):
        th = V[a + i * sa]
        if i == 0 or sa != 0:               # a scalar theta: its logs once
            if not (th > 0.0 and th < 1.0):
                return _op.DOMAIN               # theta = 0 or 1 (exact selection): eager
            lt = math.log(th)
            l1t = math.log1p(-th)
        x = lt + V[b + i * sb]
        y = l1t + V[c + i * sc]
        hi = x if x > y else y
        if hi == -math.inf:
            V[o + i] = -math.inf
        else:
            V[o + i] = hi + math.log1p(math.exp(-abs(x - y)))
    return _op.OK


def _log_mix_reverse(V, A, aux, code, r):
    m = code[r, _op.MASK]
    # w_k = exp(lp_k - ans): d theta = w1 - w2, d lp1 = theta w1, d lp2 = (1 - theta) w2
    n, o, a, sa, b, sb, c, sc = _log_mix_row(code, r)
    for i in range(n):
        g = A[o + i]
        ans = V[o + i]
        s = ans if math.isfinite(ans) else 0.0
        th = V[a + i * sa]
        w1 = math.exp(V[b + i * sb] - s)
        w2 = math.exp(V[c + i * sc] - s)
        if m & 1:
            A[a + i * sa] += g * (w1 - w2)
        if m & 2:
            A[b + i * sb] += g * th * w1
        if m & 4:
            A[c + i * sc] += g * (1.0 - th) * w2


_defkernel(_op.LOG_MIX, _log_mix_forward, _log_mix_reverse, helpers=(_log_mix_row,))
