"""The compiled tape interpreter: one forward and one reverse kernel for every program.

A lowered program (:mod:`.program`) is a table of instructions (:mod:`.opcodes`) over
one value buffer ``V`` and one adjoint buffer ``A``. :func:`forward` runs the table
top to bottom, :func:`reverse` bottom to top, each dispatching on the op code; they
are compiled by numba once per install (``cache=True``) and then serve every model,
so no model waits for a compiler (../shared/reviews/compiled-prototype.md, design A:
~2-3 ns of dispatch per instruction, 0.24 us for eight schools inside a compiled loop).

:func:`value_grad` is the entry point from Python and from compiled samplers
(``samplers/nuts_jit.py`` calls it inside the NUTS trajectory): copy ``q`` into the
parameter region of ``V``, run forward, clear the adjoints, seed the output's adjoint
with 1, run reverse, copy the gradient out.

Numerics. Every op computes what the eager tape's primitive computes, in the same
stable form (log1p, log_sum_exp with the max shifted out, ...), elementwise and in
index order, so results agree with the tape to rounding (not bit for bit: sums are
accumulated in another order and numba's libm calls may differ in the last ulp). The
kernels never decide a hard case: a value outside an argument's domain or a
non-finite log density returns ``DOMAIN`` and the caller evaluates that point on the
eager tape, which raises the domain error or returns the inf/NaN it always does.

Without numba the same functions run as plain Python (a debugging aid only: the
callers do not select this backend then, see :func:`available`).
"""

import math
import os

import numpy as np

from .opcodes import (BINOMIAL_LOGIT, CHOLESKY, CUMSUM, EXTREME, GP_EXP_QUAD, LOG_MIX, LOG_SOFTMAX, LSE_AXIS, MVN_CHOLESKY,
                      POISSON_SS, SOFTMAX, SUMN)
from .opcodes import (A as FA, ADD, B as FB, BERNOULLI_LOGIT, BETA, C as FC, CAUCHY,
                      CHECK_POSITIVE, COPY, DIV, DOMAIN, DOT, EXPONENTIAL, GAMMA, GATHER,
                      GUARD_BOUNDS, GUARD_CMP, GUARD_POSITIVE, LOGNORMAL, LSE, LSE2, MASK,
                      MATMUL, MUL, N as FN, NORMAL, OK, OP, OUT, POISSON, POISSON_LOG, POW,
                      SA, SB, SC, SEGSUM, STD_NORMAL, STUDENT_T, SUB, SUM, X1, X2, X3)

from . import opcodes as _O
# the compiler decorator and the scalar helpers (shared with the generated unary ops);
# the elementwise unary ops themselves are generated from the derivatives declared
# beside each primitive (vm/generate.py writes unary_generated.py)
from .scalar import _digamma, _inv_logit, _jit, _log1m_exp, _log1p_exp, njit  # noqa: F401
from .unary_generated import unary as _unary, unary_vjp as _unary_vjp
# ... and the elementwise binary ops' loops (vm/generate.py writes binary_generated.py)
from .binary_generated import (binary as _binary, binary1 as _binary1,
                               binary1_dx as _binary1_dx, binary1_dy as _binary1_dy,
                               binary_vjp as _binary_vjp)

# the second range of binary op codes (opcodes.py: ATAN2 ...)
_BINARY_LO, _BINARY_HI = 120, 140
_UNARY_LO, _UNARY_HI = 140, 160             # the second range of unary ops (opcodes.py)

__all__ = ["available", "forward", "reverse", "value_grad", "value_only", "jacobian",
           "jacobian_rows", "vjp_rows", "warm"]


def available():
    """Whether the compiled interpreter is usable (numba importable, not disabled)."""
    return njit is not None


_HALF_LOG_TWO_PI = 0.5 * math.log(2.0 * math.pi)
_LOG_PI = math.log(math.pi)


# ---- the summed log densities: value (forward) and partials (reverse) ----------------
@_jit
def _density_value(op, V, aux, code, r):
    n = code[r, FN]
    a = code[r, FA]
    sa = code[r, SA]
    b = code[r, FB]
    sb = code[r, SB]
    c = code[r, FC]
    sc = code[r, SC]
    lp = 0.0
    if op == POISSON_SS:
        k = code[r, X1]
        lam = V[b]
        if not lam > 0.0:
            return DOMAIN, 0.0
        return OK, V[k] * math.log(lam) - V[k + 1] * lam - V[k + 2]
    if op == MVN_CHOLESKY:
        return _mvn_value(V, code, r)
    if op == BINOMIAL_LOGIT:
        # n alpha - N log1p_exp(alpha), summed, + sum lchoose(N, n) (a constant)
        for i in range(n):
            al = V[c + i * sc]
            if not math.isfinite(al):
                return DOMAIN, 0.0
            lp += V[a + i * sa] * al - V[b + i * sb] * _log1p_exp(al)
        return OK, V[code[r, X1]] + lp
    if op == NORMAL:
        for i in range(n):
            s = V[c + i * sc]
            if not s > 0.0:
                return DOMAIN, 0.0
            z = (V[a + i * sa] - V[b + i * sb]) / s
            lp += -0.5 * z * z - math.log(s)
        return OK, lp - n * _HALF_LOG_TWO_PI
    if op == STD_NORMAL:
        for i in range(n):
            y = V[a + i * sa]
            lp += -0.5 * y * y
        return OK, lp - n * _HALF_LOG_TWO_PI
    if op == CAUCHY:
        for i in range(n):
            s = V[c + i * sc]
            if not s > 0.0:
                return DOMAIN, 0.0
            z = (V[a + i * sa] - V[b + i * sb]) / s
            lp += -math.log1p(z * z) - math.log(s)
        return OK, lp - n * _LOG_PI
    if op == LOGNORMAL:
        for i in range(n):
            y = V[a + i * sa]
            s = V[c + i * sc]
            if not (s > 0.0 and y > 0.0):
                return DOMAIN, 0.0
            ly = math.log(y)
            z = (ly - V[b + i * sb]) / s
            lp += -0.5 * z * z - math.log(s) - ly
        return OK, lp - n * _HALF_LOG_TWO_PI
    if op == EXPONENTIAL:
        for i in range(n):
            y = V[a + i * sa]
            beta = V[b + i * sb]
            if not (beta > 0.0 and y >= 0.0):
                return DOMAIN, 0.0
            lp += math.log(beta) - beta * y
        return OK, lp
    if op == _O.RAYLEIGH:
        # log y - 2 log sigma - y^2 / (2 sigma^2) (distributions/more_continuous.py)
        for i in range(n):
            y = V[a + i * sa]
            s = V[b + i * sb]
            if not (s > 0.0 and y > 0.0 and y < math.inf):
                return DOMAIN, 0.0
            lp += math.log(y) - 2.0 * math.log(s) - 0.5 * (y * y / (s * s))
        return OK, lp
    if op == _O.LOGLOGISTIC:
        # log beta - log alpha + (beta - 1) d - 2 log1p_exp(beta d), d = log(y / alpha)
        for i in range(n):
            y = V[a + i * sa]
            al = V[b + i * sb]
            be = V[c + i * sc]
            if not (al > 0.0 and be > 0.0 and y > 0.0 and y < math.inf):
                return DOMAIN, 0.0
            la = math.log(al)
            d = math.log(y) - la
            lp += math.log(be) - la + (be - 1.0) * d - 2.0 * _log1p_exp(be * d)
        return OK, lp
    if op == GAMMA:
        for i in range(n):
            y = V[a + i * sa]
            al = V[b + i * sb]
            be = V[c + i * sc]
            if not (al > 0.0 and be > 0.0 and y >= 0.0):
                return DOMAIN, 0.0
            lp += al * math.log(be) - math.lgamma(al) + (al - 1.0) * math.log(y) - be * y
        return OK, lp
    if op == BETA:
        for i in range(n):
            y = V[a + i * sa]
            p = V[b + i * sb]
            q = V[c + i * sc]
            if not (p > 0.0 and q > 0.0 and y >= 0.0 and y <= 1.0):
                return DOMAIN, 0.0
            lp += ((p - 1.0) * math.log(y) + (q - 1.0) * math.log1p(-y)
                   - (math.lgamma(p) + math.lgamma(q) - math.lgamma(p + q)))
        return OK, lp
    if op == STUDENT_T:
        d = code[r, X1]
        sd = code[r, X2]
        for i in range(n):
            nu = V[b + i * sb]
            s = V[d + i * sd]
            if not (nu > 0.0 and s > 0.0):
                return DOMAIN, 0.0
            z = (V[a + i * sa] - V[c + i * sc]) / s
            lp += (math.lgamma(0.5 * (nu + 1.0)) - math.lgamma(0.5 * nu)
                   - 0.5 * math.log(nu) - 0.5 * _LOG_PI - math.log(s)
                   - 0.5 * (nu + 1.0) * math.log1p(z * z / nu))
        return OK, lp
    if op == POISSON:
        k = code[r, X1]
        for i in range(n):
            m = V[a + i * sa]
            lam = V[b + i * sb]
            if not lam > 0.0:
                return DOMAIN, 0.0          # (lam == 0 has its own rules: eager)
            lp += m * math.log(lam) - lam - V[k + i * sa]
        return OK, lp
    if op == POISSON_LOG:
        k = code[r, X1]
        for i in range(n):
            m = V[a + i * sa]
            al = V[b + i * sb]
            lp += m * al - math.exp(al) - V[k + i * sa]
        return OK, lp
    if op == BERNOULLI_LOGIT:
        for i in range(n):
            m = V[a + i * sa]
            al = V[b + i * sb]
            # log inv_logit((2m - 1) alpha)
            lp -= _log1p_exp(-(2.0 * m - 1.0) * al)
        return OK, lp
    return DOMAIN, 0.0


@_jit
def _density_grad(op, V, A, code, r, g):
    n = code[r, FN]
    a = code[r, FA]
    sa = code[r, SA]
    b = code[r, FB]
    sb = code[r, SB]
    c = code[r, FC]
    sc = code[r, SC]
    m = code[r, MASK]
    if op == POISSON_SS:
        if m & 2:
            k = code[r, X1]
            A[b] += g * (V[k] / V[b] - V[k + 1])
    elif op == MVN_CHOLESKY:
        _mvn_grad(V, A, code, r, g)
    elif op == BINOMIAL_LOGIT:
        if m & 4:
            for i in range(n):
                al = V[c + i * sc]
                A[c + i * sc] += g * (V[a + i * sa] - V[b + i * sb] * _inv_logit(al))
    elif op == NORMAL:
        for i in range(n):
            s = V[c + i * sc]
            z = (V[a + i * sa] - V[b + i * sb]) / s
            dmu = g * z / s
            if m & 1:
                A[a + i * sa] -= dmu
            if m & 2:
                A[b + i * sb] += dmu
            if m & 4:
                A[c + i * sc] += g * (z * z - 1.0) / s
    elif op == STD_NORMAL:
        if m & 1:
            for i in range(n):
                A[a + i * sa] -= g * V[a + i * sa]
    elif op == CAUCHY:
        for i in range(n):
            s = V[c + i * sc]
            z = (V[a + i * sa] - V[b + i * sb]) / s
            w = 1.0 / (1.0 + z * z)
            dy = -g * 2.0 * z * w / s
            if m & 1:
                A[a + i * sa] += dy
            if m & 2:
                A[b + i * sb] -= dy
            if m & 4:
                A[c + i * sc] += g * (2.0 * z * z * w - 1.0) / s
    elif op == LOGNORMAL:
        for i in range(n):
            y = V[a + i * sa]
            s = V[c + i * sc]
            z = (math.log(y) - V[b + i * sb]) / s
            if m & 1:
                A[a + i * sa] -= g * (z / s + 1.0) / y
            if m & 2:
                A[b + i * sb] += g * z / s
            if m & 4:
                A[c + i * sc] += g * (z * z - 1.0) / s
    elif op == EXPONENTIAL:
        for i in range(n):
            y = V[a + i * sa]
            beta = V[b + i * sb]
            if m & 1:
                A[a + i * sa] -= g * beta
            if m & 2:
                A[b + i * sb] += g * (1.0 / beta - y)
    elif op == _O.RAYLEIGH:
        for i in range(n):
            y = V[a + i * sa]
            s = V[b + i * sb]
            if m & 1:
                A[a + i * sa] += g * (1.0 / y - y / (s * s))
            if m & 2:
                A[b + i * sb] += g * (y * y / (s * s) - 2.0) / s
    elif op == _O.LOGLOGISTIC:
        for i in range(n):
            y = V[a + i * sa]
            al = V[b + i * sb]
            be = V[c + i * sc]
            d = math.log(y) - math.log(al)
            t = be * d
            w = math.exp(t - _log1p_exp(t))             # inv_logit(t)
            if m & 1:
                A[a + i * sa] += g * (be - 1.0 - 2.0 * be * w) / y
            if m & 2:
                A[b + i * sb] += g * be * (2.0 * w - 1.0) / al
            if m & 4:
                A[c + i * sc] += g * (1.0 / be + d * (1.0 - 2.0 * w))
    elif op == GAMMA:
        for i in range(n):
            y = V[a + i * sa]
            al = V[b + i * sb]
            be = V[c + i * sc]
            if m & 1:
                A[a + i * sa] += g * ((al - 1.0) / y - be)
            if m & 2:
                A[b + i * sb] += g * (math.log(be) - _digamma(al) + math.log(y))
            if m & 4:
                A[c + i * sc] += g * (al / be - y)
    elif op == BETA:
        for i in range(n):
            y = V[a + i * sa]
            p = V[b + i * sb]
            q = V[c + i * sc]
            dpq = _digamma(p + q)
            if m & 1:
                A[a + i * sa] += g * ((p - 1.0) / y - (q - 1.0) / (1.0 - y))
            if m & 2:
                A[b + i * sb] += g * (math.log(y) - _digamma(p) + dpq)
            if m & 4:
                A[c + i * sc] += g * (math.log1p(-y) - _digamma(q) + dpq)
    elif op == STUDENT_T:
        d = code[r, X1]
        sd = code[r, X2]
        for i in range(n):
            nu = V[b + i * sb]
            s = V[d + i * sd]
            r = V[a + i * sa] - V[c + i * sc]
            z = r / s
            q = z * z / nu
            w = (nu + 1.0) / (nu * s * s + r * r)
            if m & 1:
                A[a + i * sa] -= g * w * r
            if m & 4:
                A[c + i * sc] += g * w * r
            if m & 2:
                A[b + i * sb] += g * 0.5 * (_digamma(0.5 * (nu + 1.0)) - _digamma(0.5 * nu)
                                            - 1.0 / nu - math.log1p(q)
                                            + (nu + 1.0) * q / (nu * (1.0 + q)))
            if m & 8:
                A[d + i * sd] += g * (w * r * r - 1.0) / s
    elif op == POISSON:
        if m & 2:
            for i in range(n):
                A[b + i * sb] += g * (V[a + i * sa] / V[b + i * sb] - 1.0)
    elif op == POISSON_LOG:
        if m & 2:
            for i in range(n):
                A[b + i * sb] += g * (V[a + i * sa] - math.exp(V[b + i * sb]))
    elif op == BERNOULLI_LOGIT:
        if m & 2:
            for i in range(n):
                sgn = 2.0 * V[a + i * sa] - 1.0
                A[b + i * sb] += g * sgn * _inv_logit(-sgn * V[b + i * sb])


@_jit
def _compare(k, x, y):
    """Python's comparison number ``k`` (GUARD_CMP: < <= > >= == !=) of two floats."""
    if k == 0:
        return x < y
    if k == 1:
        return x <= y
    if k == 2:
        return x > y
    if k == 3:
        return x >= y
    if k == 4:
        return x == y
    return x != y


# ---- array ops with their own loops (helpers keep the two sweeps short) -------------
# MATMUL calls BLAS (numba's np.dot on contiguous views of V) from this many multiply-
# adds on; below, the plain loop wins. Measured (one thread, ns per product): 4x4x4
# loop 89 / BLAS 262; 8x8x8 517 / 260; 30x30 @ 30 828 / 325; 32x32x32 27,054 / 1,243
_BLAS_MIN = 256


@_jit
def _gemm(X, Y, out):
    # out = X @ Y by BLAS: every call site passes 2-D C-contiguous arrays, so that
    # numba compiles one np.dot (each signature costs seconds of the cold compile)
    np.dot(X, Y, out)


@_jit
def _matmul_fwd(V, code, r):
    o = code[r, OUT]
    a = code[r, FA]
    b = code[r, FB]
    p = code[r, X1]
    k = code[r, X2]
    q = code[r, X3]
    if p * k * q >= _BLAS_MIN:
        _gemm(V[a:a + p * k].reshape(p, k), V[b:b + k * q].reshape(k, q),
              V[o:o + p * q].reshape(p, q))
        return
    for i in range(p):
        for j in range(q):
            s = 0.0
            for t in range(k):
                s += V[a + i * k + t] * V[b + t * q + j]
            V[o + i * q + j] = s


@_jit
def _matmul_rev(V, A, code, r, m):
    o = code[r, OUT]
    a = code[r, FA]
    b = code[r, FB]
    p = code[r, X1]
    k = code[r, X2]
    q = code[r, X3]
    if p * k * q >= _BLAS_MIN:
        G = A[o:o + p * q].reshape(p, q)
        if m & 1:
            # dA += G B^T (B^T copied: B is the small operand of a big product)
            if q == 1:
                for i in range(p):          # outer(g, b): no product to call BLAS for
                    gi = A[o + i]
                    for t in range(k):
                        A[a + i * k + t] += gi * V[b + t]
            else:
                bt = np.empty((q, k))
                for t in range(k):
                    for j in range(q):
                        bt[j, t] = V[b + t * q + j]
                da = np.empty((p, k))
                _gemm(G, bt, da)
                for i in range(p):
                    for t in range(k):
                        A[a + i * k + t] += da[i, t]
        if m & 2:
            # dB += A^T G = (G^T A)^T (G^T copied: the size of the output)
            gt = np.empty((q, p))
            for i in range(p):
                for j in range(q):
                    gt[j, i] = A[o + i * q + j]
            db = np.empty((q, k))
            _gemm(gt, V[a:a + p * k].reshape(p, k), db)
            for t in range(k):
                for j in range(q):
                    A[b + t * q + j] += db[j, t]
        return
    for i in range(p):
        for j in range(q):
            g = A[o + i * q + j]
            if g != 0.0:
                for t in range(k):
                    if m & 1:
                        A[a + i * k + t] += g * V[b + t * q + j]
                    if m & 2:
                        A[b + t * q + j] += g * V[a + i * k + t]


@_jit
def _cumsum_fwd(V, code, r):
    # V[a] as an (outer, length, inner) array, summed along the middle axis
    o = code[r, OUT]
    a = code[r, FA]
    nout = code[r, X1]
    ln = code[r, X2]
    inner = code[r, X3]
    for u in range(nout):
        for j in range(inner):
            s = 0.0
            base = u * ln * inner + j
            for t in range(ln):
                s += V[a + base + t * inner]
                V[o + base + t * inner] = s


@_jit
def _cumsum_rev(A, code, r):
    o = code[r, OUT]
    a = code[r, FA]
    nout = code[r, X1]
    ln = code[r, X2]
    inner = code[r, X3]
    for u in range(nout):
        for j in range(inner):
            s = 0.0
            base = u * ln * inner + j
            for t in range(ln - 1, -1, -1):
                s += A[o + base + t * inner]
                A[a + base + t * inner] += s


@_jit
def _softmax_fwd(V, code, r, log):
    # math/reductions.py: shift by the maximum (0 when it is not finite), then
    # exp(z) / sum exp(z), or z - log(sum exp(z))
    o = code[r, OUT]
    a = code[r, FA]
    nout = code[r, X1]
    ln = code[r, X2]
    inner = code[r, X3]
    for u in range(nout):
        for j in range(inner):
            base = u * ln * inner + j
            hi = -math.inf
            for t in range(ln):
                x = V[a + base + t * inner]
                if x > hi or x != x:
                    hi = x
            if not math.isfinite(hi):
                hi = 0.0
            s = 0.0
            for t in range(ln):
                s += math.exp(V[a + base + t * inner] - hi)
            if log:
                ls = math.log(s)
                for t in range(ln):
                    V[o + base + t * inner] = V[a + base + t * inner] - hi - ls
            else:
                for t in range(ln):
                    V[o + base + t * inner] = math.exp(V[a + base + t * inner] - hi) / s


@_jit
def _softmax_rev(V, A, code, r, log):
    # softmax: ans (g - <g, ans>); log_softmax: g - exp(ans) sum(g)
    o = code[r, OUT]
    a = code[r, FA]
    nout = code[r, X1]
    ln = code[r, X2]
    inner = code[r, X3]
    for u in range(nout):
        for j in range(inner):
            base = u * ln * inner + j
            s = 0.0
            for t in range(ln):
                i = base + t * inner
                s += A[o + i] if log else A[o + i] * V[o + i]
            for t in range(ln):
                i = base + t * inner
                if log:
                    A[a + i] += A[o + i] - math.exp(V[o + i]) * s
                else:
                    A[a + i] += V[o + i] * (A[o + i] - s)


@_jit
def _gp_exp_quad_fwd(V, code, r):
    # K_ij = alpha^2 exp(-|x_i - x_j|^2 / (2 rho^2)), x: N points of D coordinates
    o = code[r, OUT]
    a = code[r, FA]
    al = V[code[r, FB]]
    rho = V[code[r, FC]]
    npt = code[r, X1]
    d = code[r, X2]
    if not (al > 0.0 and rho > 0.0 and math.isfinite(al) and math.isfinite(rho)):
        return DOMAIN
    a2 = al * al
    h = 0.5 / (rho * rho)
    for i in range(npt):
        for j in range(npt):
            s = 0.0
            for k in range(d):
                t = V[a + i * d + k] - V[a + j * d + k]
                s += t * t
            if s != s:
                return DOMAIN               # a NaN coordinate: the eager check
            V[o + i * npt + j] = a2 * math.exp(-s * h)
    return OK


@_jit
def _gp_exp_quad_rev(V, A, code, r, m):
    # Gk = G o K: alpha_bar = 2 sum(Gk) / alpha, rho_bar = sum(Gk o d2) / rho^3,
    # x_bar_i = sum_j (Gk + Gk^T)_ij (x_j - x_i) / rho^2
    o = code[r, OUT]
    a = code[r, FA]
    b = code[r, FB]
    c = code[r, FC]
    al = V[b]
    rho = V[c]
    npt = code[r, X1]
    d = code[r, X2]
    inv_r2 = 1.0 / (rho * rho)
    sg = 0.0
    sgd = 0.0
    for i in range(npt):
        for j in range(npt):
            gk = A[o + i * npt + j] * V[o + i * npt + j]
            if gk == 0.0:
                continue
            sg += gk
            s = 0.0
            for k in range(d):
                t = V[a + i * d + k] - V[a + j * d + k]
                s += t * t
                if m & 1:
                    # (Gk)_ij reaches x_i with (x_j - x_i) and x_j with (x_i - x_j)
                    A[a + i * d + k] -= gk * t * inv_r2
                    A[a + j * d + k] += gk * t * inv_r2
            sgd += gk * s
    if m & 2:
        A[b] += 2.0 * sg / al
    if m & 4:
        A[c] += sgd * inv_r2 / rho


@_jit
def _cholesky_fwd(V, code, r):
    # the lower Cholesky factor of a symmetric positive-definite A (upper part 0)
    o = code[r, OUT]
    a = code[r, FA]
    n = code[r, X1]
    for i in range(n):
        for j in range(i):
            if V[a + i * n + j] != V[a + j * n + i]:
                return DOMAIN               # not exactly symmetric: the eager check
    for j in range(n):
        s = V[a + j * n + j]
        for k in range(j):
            s -= V[o + j * n + k] * V[o + j * n + k]
        if not s > 0.0 or not math.isfinite(s):
            return DOMAIN                   # not positive definite: the eager error
        djj = math.sqrt(s)
        V[o + j * n + j] = djj
        for i in range(j + 1, n):
            t = V[a + i * n + j]
            for k in range(j):
                t -= V[o + i * n + k] * V[o + j * n + k]
            V[o + i * n + j] = t / djj
        for i in range(j):
            V[o + i * n + j] = 0.0
    return OK


@_jit
def _cholesky_rev(V, A, code, r):
    # A_bar = sym(L^-T Phi(L^T L_bar) L^-1), Phi: the lower triangle, diagonal halved
    # (linalg._cholesky_vjp, with the whole L_bar as there); scratch X3: 2 n^2 values
    o = code[r, OUT]
    a = code[r, FA]
    n = code[r, X1]
    P = code[r, X3]
    X = P + n * n
    for i in range(n):
        for j in range(n):
            if j > i:
                V[P + i * n + j] = 0.0
                continue
            s = 0.0
            for k in range(n):
                s += V[o + k * n + i] * A[o + k * n + j]
            V[P + i * n + j] = 0.5 * s if i == j else s
    # X = L^-T Phi: solve L^T X = Phi, rows from the bottom
    for j in range(n):
        for i in range(n - 1, -1, -1):
            s = V[P + i * n + j]
            for k in range(i + 1, n):
                s -= V[o + k * n + i] * V[X + k * n + j]
            V[X + i * n + j] = s / V[o + i * n + i]
    # S = X L^-1: solve S L = X, columns from the right (S kept in P)
    for i in range(n):
        for j in range(n - 1, -1, -1):
            s = V[X + i * n + j]
            for k in range(j + 1, n):
                s -= V[P + i * n + k] * V[o + k * n + j]
            V[P + i * n + j] = s / V[o + j * n + j]
    for i in range(n):
        for j in range(n):
            A[a + i * n + j] += 0.5 * (V[P + i * n + j] + V[P + j * n + i])


@_jit
def _lse_axis_fwd(V, code, r):
    # log_sum_exp along the middle axis of V[a] as (outer, length, inner), as LSE
    o = code[r, OUT]
    a = code[r, FA]
    nout = code[r, X1]
    ln = code[r, X2]
    inner = code[r, X3]
    for u in range(nout):
        for j in range(inner):
            base = u * ln * inner + j
            hi = -math.inf
            for t in range(ln):
                if V[a + base + t * inner] > hi:
                    hi = V[a + base + t * inner]
            if hi == -math.inf or hi == math.inf:
                V[o + u * inner + j] = hi
            else:
                s = 0.0
                for t in range(ln):
                    s += math.exp(V[a + base + t * inner] - hi)
                V[o + u * inner + j] = hi + math.log(s)


@_jit
def _lse_axis_rev(V, A, code, r):
    o = code[r, OUT]
    a = code[r, FA]
    nout = code[r, X1]
    ln = code[r, X2]
    inner = code[r, X3]
    for u in range(nout):
        for j in range(inner):
            g = A[o + u * inner + j]
            ans = V[o + u * inner + j]
            base = u * ln * inner + j
            for t in range(ln):
                A[a + base + t * inner] += g * math.exp(V[a + base + t * inner] - ans)


@_jit
def _extreme_index(V, a, k, is_max):
    # numpy's argmax/argmin: the first extreme element, the first NaN if any
    best = 0
    for i in range(1, k):
        x = V[a + i]
        y = V[a + best]
        if y != y:
            break
        if x != x or (x > y if is_max else x < y):
            best = i
    return best


@_jit
def _log_mix_fwd(V, code, r):
    n = code[r, FN]
    o = code[r, OUT]
    a = code[r, FA]
    sa = code[r, SA]
    b = code[r, FB]
    sb = code[r, SB]
    c = code[r, FC]
    sc = code[r, SC]
    lt = l1t = 0.0
    for i in range(n):
        th = V[a + i * sa]
        if i == 0 or sa != 0:               # a scalar theta: its logs once
            if not (th > 0.0 and th < 1.0):
                return DOMAIN               # theta = 0 or 1 (exact selection): eager
            lt = math.log(th)
            l1t = math.log1p(-th)
        x = lt + V[b + i * sb]
        y = l1t + V[c + i * sc]
        hi = x if x > y else y
        if hi == -math.inf:
            V[o + i] = -math.inf
        else:
            V[o + i] = hi + math.log1p(math.exp(-abs(x - y)))
    return OK


@_jit
def _log_mix_rev(V, A, code, r, m):
    # w_k = exp(lp_k - ans): d theta = w1 - w2, d lp1 = theta w1, d lp2 = (1 - theta) w2
    n = code[r, FN]
    o = code[r, OUT]
    a = code[r, FA]
    sa = code[r, SA]
    b = code[r, FB]
    sb = code[r, SB]
    c = code[r, FC]
    sc = code[r, SC]
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


@_jit
def _mvn_value(V, code, r):
    """sum_n log N(y_n | mu_n, L L^T): z_n = L^-1 (y_n - mu_n) by forward substitution
    (kept in the scratch region X3 for the reverse sweep);
    lp = -|Z|^2 / 2 - N sum log L_kk - N K log(2 pi) / 2.

    The loops run over slices of ``V`` (rows of L, the scratch vectors): numba then
    knows the indices in range and LLVM vectorises them (3x faster at K = 100 than
    indexing ``V`` with computed offsets)."""
    a = code[r, FA]
    sa = code[r, SA]
    b = code[r, FB]
    sb = code[r, SB]
    c = code[r, FC]
    nrow = code[r, X1]
    k = code[r, X2]
    z = code[r, X3]
    # a constant L (no adjoint: not on the tape) was checked lower triangular by the
    # eager density when the program was recorded, and is the same at every call: its
    # upper triangle (K^2 / 2 comparisons, as long as the solve) is not read again
    traced = code[r, MASK] & 4
    ld = 0.0
    for i in range(k):
        row = V[c + i * k:c + (i + 1) * k]
        d = row[i]
        if not (d > 0.0 and math.isfinite(d)):
            return DOMAIN, 0.0
        ld += math.log(d)
        if traced:
            nonzero = 0
            for j in range(i + 1, k):
                nonzero += row[j] != 0.0
            if nonzero:
                return DOMAIN, 0.0          # not lower triangular: the eager check
    lp = 0.0
    for u in range(nrow):
        zu = V[z + u * k:z + (u + 1) * k]
        for i in range(k):
            row = V[c + i * k:c + i * k + i + 1]
            s = V[a + (u * k + i) * sa] - V[b + (u * k + i) * sb]
            for j in range(i):
                s -= row[j] * zu[j]
            zi = s / row[i]
            zu[i] = zi
            lp -= 0.5 * zi * zi
    return OK, lp - nrow * ld - nrow * k * _HALF_LOG_TWO_PI


@_jit
def _mvn_grad(V, A, code, r, g):
    # w_n = L^-T z_n by back substitution in column (axpy) order - w_i = s_i / L_ii,
    # then s_j -= w_i L_ij for j < i, over the contiguous row i of L - into the second
    # half of the scratch: d/dy = -w, d/dmu = w, d/dL = tril(sum_n w_n z_n^T) -
    # N diag(1 / L_kk)
    a = code[r, FA]
    sa = code[r, SA]
    b = code[r, FB]
    sb = code[r, SB]
    c = code[r, FC]
    m = code[r, MASK]
    nrow = code[r, X1]
    k = code[r, X2]
    z = code[r, X3]
    w = z + nrow * k
    for u in range(nrow):
        zu = V[z + u * k:z + (u + 1) * k]
        wu = V[w + u * k:w + (u + 1) * k]
        for i in range(k):
            wu[i] = zu[i]
        for i in range(k - 1, -1, -1):
            row = V[c + i * k:c + i * k + i + 1]
            wi = wu[i] / row[i]
            wu[i] = wi
            for j in range(i):
                wu[j] -= wi * row[j]
        for i in range(k):
            gi = g * wu[i]
            if m & 1:
                A[a + (u * k + i) * sa] -= gi
            if m & 2:
                A[b + (u * k + i) * sb] += gi
        if m & 4:
            for i in range(k):
                gi = g * wu[i]
                arow = A[c + i * k:c + i * k + i + 1]
                for j in range(i + 1):
                    arow[j] += gi * zu[j]
    if m & 4:
        for i in range(k):
            A[c + i * k + i] -= g * nrow / V[c + i * k + i]


# ---- the two sweeps ------------------------------------------------------------------
@_jit
def forward(code, aux, V):
    """Run every instruction; -> status (OK, DOMAIN, or 1 + a failed guard's index)."""
    for r in range(code.shape[0]):
        op = code[r, OP]
        n = code[r, FN]
        o = code[r, OUT]
        a = code[r, FA]
        if op <= 7 or _BINARY_LO <= op < _BINARY_HI:       # elementwise binary
            if op == LOG_MIX:
                if _log_mix_fwd(V, code, r) != OK:
                    return DOMAIN
            elif n == 1:                                    # scalar code
                V[o] = _binary1(op, V[a], V[code[r, FB]])
            else:
                _binary(op, n, V, o, a, code[r, SA], code[r, FB], code[r, SB])
        elif op < 40 or _UNARY_LO <= op < _UNARY_HI:
            for i in range(n):
                V[o + i] = _unary(op, V[a + i])
        elif op == SUM:
            s = 0.0
            for i in range(code[r, X2]):
                s += V[a + i]
            V[o] = s
        elif op == SUMN:
            t = code[r, X1]
            s = 0.0
            for i in range(code[r, X2]):
                s += V[aux[t + i]]
            V[o] = s
        elif op == GATHER:
            t = code[r, X1]
            for i in range(n):
                V[o + i] = V[aux[t + i]]
        elif op == COPY:
            sa = code[r, SA]
            for i in range(n):
                V[o + i] = V[a + i * sa]
        elif op == SEGSUM:
            t = code[r, X1]
            for i in range(n):
                V[o + i] = 0.0
            for i in range(code[r, X2]):
                V[o + aux[t + i]] += V[a + i]
        elif op == LSE:
            k = code[r, X2]
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
        elif op == MATMUL:
            _matmul_fwd(V, code, r)
        elif op == DOT:
            b = code[r, FB]
            s = 0.0
            for i in range(code[r, X2]):
                s += V[a + i] * V[b + i]
            V[o] = s
        elif op == CUMSUM:
            _cumsum_fwd(V, code, r)
        elif op == EXTREME:
            V[o] = V[a + _extreme_index(V, a, code[r, X2], code[r, X1] != 0)]
        elif op == SOFTMAX or op == LOG_SOFTMAX:
            _softmax_fwd(V, code, r, op == LOG_SOFTMAX)
        elif op == LSE_AXIS:
            _lse_axis_fwd(V, code, r)
        elif op == GP_EXP_QUAD:
            if _gp_exp_quad_fwd(V, code, r) != OK:
                return DOMAIN
        elif op == CHOLESKY:
            if _cholesky_fwd(V, code, r) != OK:
                return DOMAIN
        elif op < 90:
            st, lp = _density_value(op, V, aux, code, r)
            if st != OK:
                return st
            V[o] = lp
        elif op == GUARD_POSITIVE:
            t = code[r, X1]
            for i in range(n):
                if (V[a + i] > 0.0) != (aux[t + i] != 0):
                    return 1 + code[r, X2]
        elif op == GUARD_BOUNDS:
            lo = V[a]
            hi = V[code[r, FB]]
            if not lo < hi:
                return DOMAIN
            case = (1 if math.isfinite(lo) else 0) + (2 if math.isfinite(hi) else 0)
            if case != code[r, X1]:
                return 1 + code[r, X2]
        elif op == _O.CHECK_ARG:
            kind = code[r, X1]
            for i in range(n):
                v = V[a + i]
                if kind == 0:
                    bad = v != v
                elif kind == 1:
                    bad = not math.isfinite(v)
                elif kind == 2:
                    bad = not (math.isfinite(v) and v > 0.0)
                elif kind == 3:
                    bad = not (math.isfinite(v) and v >= 0.0)
                elif kind == 4:
                    bad = not (v >= 0.0 and v <= 1.0)
                else:
                    bad = not v > 0.0
                if bad:
                    return DOMAIN
        elif op == CHECK_POSITIVE:
            strict = code[r, X1] != 0
            for i in range(n):
                v = V[a + i]
                if not math.isfinite(v) or v < 0.0 or (strict and v == 0.0):
                    return DOMAIN
        elif op == GUARD_CMP:
            if _compare(code[r, X1], V[a], V[code[r, FB]]) != (code[r, X3] != 0):
                return 1 + code[r, X2]
        else:
            return DOMAIN
    return OK


@_jit
def reverse(code, aux, V, A):
    """Push every instruction's adjoint into its arguments (bottom to top)."""
    for r in range(code.shape[0] - 1, -1, -1):
        op = code[r, OP]
        m = code[r, MASK]
        if m == 0:
            continue
        n = code[r, FN]
        o = code[r, OUT]
        a = code[r, FA]
        if op <= 7 or _BINARY_LO <= op < _BINARY_HI:       # elementwise binary
            if op == LOG_MIX:
                _log_mix_rev(V, A, code, r, m)
            elif n == 1:                                    # scalar code
                b = code[r, FB]
                g = A[o]
                if m & 1:
                    A[a] += _binary1_dx(op, g, V[a], V[b], V[o])
                if m & 2:
                    A[b] += _binary1_dy(op, g, V[a], V[b], V[o])
            else:
                _binary_vjp(op, m, n, V, A, o, a, code[r, SA], code[r, FB], code[r, SB])
        elif op < 40 or _UNARY_LO <= op < _UNARY_HI:
            for i in range(n):
                A[a + i] += _unary_vjp(op, A[o + i], V[a + i], V[o + i])
        elif op == SUM:
            g = A[o]
            for i in range(code[r, X2]):
                A[a + i] += g
        elif op == SUMN:
            t = code[r, X1]
            g = A[o]
            for i in range(code[r, X2]):
                A[aux[t + i]] += g
        elif op == GATHER:
            t = code[r, X1]
            for i in range(n):
                A[aux[t + i]] += A[o + i]
        elif op == COPY:
            sa = code[r, SA]
            for i in range(n):
                A[a + i * sa] += A[o + i]
        elif op == SEGSUM:
            t = code[r, X1]
            for i in range(code[r, X2]):
                A[a + i] += A[o + aux[t + i]]
        elif op == LSE:
            g = A[o]
            ans = V[o]
            for i in range(code[r, X2]):
                A[a + i] += g * math.exp(V[a + i] - ans)
        elif op == MATMUL:
            _matmul_rev(V, A, code, r, m)
        elif op == DOT:
            b = code[r, FB]
            g = A[o]
            for i in range(code[r, X2]):
                if m & 1:
                    A[a + i] += g * V[b + i]
                if m & 2:
                    A[b + i] += g * V[a + i]
        elif op == CUMSUM:
            _cumsum_rev(A, code, r)
        elif op == EXTREME:
            A[a + _extreme_index(V, a, code[r, X2], code[r, X1] != 0)] += A[o]
        elif op == SOFTMAX or op == LOG_SOFTMAX:
            _softmax_rev(V, A, code, r, op == LOG_SOFTMAX)
        elif op == LSE_AXIS:
            _lse_axis_rev(V, A, code, r)
        elif op == GP_EXP_QUAD:
            _gp_exp_quad_rev(V, A, code, r, m)
        elif op == CHOLESKY:
            _cholesky_rev(V, A, code, r)
        elif op < 90:
            _density_grad(op, V, A, code, r, A[o])


@_jit
def value_grad(code, aux, V, A, dim, out, nvar, q, g):
    """lp and its gradient (into ``g``) at ``q``; -> (status, lp).

    ``V[:dim]`` are the parameters, ``V[out]`` the log density, ``A[:nvar]`` the
    adjoints that a call clears (constants live above ``nvar``)."""
    for i in range(dim):
        V[i] = q[i]
    st = forward(code, aux, V)
    if st != OK:
        return st, 0.0
    lp = V[out]
    if not math.isfinite(lp):
        return DOMAIN, lp
    for i in range(nvar):
        A[i] = 0.0
    A[out] = 1.0
    reverse(code, aux, V, A)
    for i in range(dim):
        gi = A[i]
        if not math.isfinite(gi):
            return DOMAIN, lp
        g[i] = gi
    return OK, lp


@_jit
def value_only(code, aux, V, dim, out, size, q, res):
    """The forward pass alone at ``q``: ``res[:size] = V[out:out + size]``; -> status."""
    for i in range(dim):
        V[i] = q[i]
    st = forward(code, aux, V)
    if st != OK:
        return st
    for i in range(size):
        res[i] = V[out + i]
    return OK


@_jit
def jacobian_rows(code, aux, V, A, dim, out, nvar, nout, f, J):
    """After :func:`forward`: the vector output ``f[:nout] = V[out:out + nout]`` and its
    Jacobian ``J[:nout, :dim]``, one reverse sweep per output seeded with a unit
    vector (cheap when outputs are few: an ODE right-hand side's states); -> status
    (DOMAIN when a value or a derivative is not finite: the eager tape decides)."""
    for i in range(nout):
        v = V[out + i]
        if not math.isfinite(v):
            return DOMAIN
        f[i] = v
    for i in range(nout):
        for j in range(nvar):
            A[j] = 0.0
        A[out + i] = 1.0
        reverse(code, aux, V, A)
        for j in range(dim):
            gj = A[j]
            if not math.isfinite(gj):
                return DOMAIN
            J[i, j] = gj
    return OK


@_jit
def tangent_rows(J, z, n, k, ptr, idx, val, res):
    """``res[n + b n + i] = sum_c J[i, 1 + c] z[n + b n + c] + sum_q J[i, 1 + n + idx[q]]
    val[q]`` for ``b < k``: the Jacobian rows of an ODE right-hand side at ``(t, y, p)``
    (columns t, y, p) applied to the sensitivity block ``V_b`` and the directions
    ``D_b`` of ``p`` in compressed form (``D[b, idx[q]] = val[q]`` for ``ptr[b] <= q <
    ptr[b + 1]``): the forward sensitivity system's right-hand side."""
    for b in range(k):
        zb = n + b * n
        for i in range(n):
            s = 0.0
            for c in range(n):
                s += J[i, 1 + c] * z[zb + c]
            for q in range(ptr[b], ptr[b + 1]):
                s += J[i, 1 + n + idx[q]] * val[q]
            res[zb + i] = s


@_jit
def jacobian(code, aux, V, A, dim, out, nvar, nout, x, f, J):
    """A vector-output program's value ``f`` and Jacobian ``J`` (``nout x dim``) at
    ``x``: forward once, then :func:`jacobian_rows`; -> status."""
    for i in range(dim):
        V[i] = x[i]
    st = forward(code, aux, V)
    if st != OK:
        return st
    return jacobian_rows(code, aux, V, A, dim, out, nvar, nout, f, J)


@_jit
def vjp_rows(code, aux, V, A, dim, out, nvar, nout, w, f, g):
    """After :func:`forward`: ``f = V[out:out + nout]`` and ``g = w^T J`` in one reverse
    sweep seeded with ``w``; -> status (DOMAIN on a non-finite value or derivative)."""
    for i in range(nout):
        v = V[out + i]
        if not math.isfinite(v):
            return DOMAIN
        f[i] = v
    for j in range(nvar):
        A[j] = 0.0
    for i in range(nout):
        A[out + i] = w[i]
    reverse(code, aux, V, A)
    for j in range(dim):
        gj = A[j]
        if not math.isfinite(gj):
            return DOMAIN
        g[j] = gj
    return OK


def drop_stale_cache(dispatchers, tag):
    """Drop numba's on-disk cache of ``dispatchers`` when this interpreter's source
    (this file, the op codes, the scalar helpers and the generated unary ops) changed
    since it was written.

    numba keys a cached function on its own file's time stamp only; a function that
    calls the interpreter (a compiled sampler) or reads the op codes (this file's
    kernels) carries their machine code in its cache, and would run the old
    instructions after an edit or an upgrade that kept ``__pycache__``. The source
    hash is kept beside the cache (``<tag>.vm-deps``)."""
    if njit is None:
        return
    import hashlib
    from . import opcodes, scalar as _scalar, unary_generated as _generated
    from . import binary_generated as _generated2
    try:
        h = hashlib.sha256()
        for path in (__file__, opcodes.__file__, _scalar.__file__, _generated.__file__,
                     _generated2.__file__):
            with open(path, "rb") as f:
                h.update(f.read())
        digest = h.hexdigest()
        for d in dispatchers:
            cache = d._cache
            stamp = os.path.join(cache._cache_path, f"{tag}.{d.__name__}.vm-deps")
            try:
                with open(stamp) as f:
                    old = f.read().strip()
            except OSError:
                old = None
            if old != digest:
                cache.flush()
                os.makedirs(cache._cache_path, exist_ok=True)
                with open(stamp, "w") as f:
                    f.write(digest)
    except (OSError, AttributeError):
        pass                    # no cache to protect (or an unwritable one)


def warm():
    """Compile (or load from numba's cache) the kernels: ~0.2 s when cached."""
    if njit is None:
        return
    code = np.zeros((1, 14), dtype=np.int64)
    code[0, 0] = ADD
    code[0, 1] = 1
    code[0, 2] = 1
    V = np.zeros(3)
    A = np.zeros(3)
    aux = np.zeros(1, dtype=np.int64)
    value_grad(code, aux, V, A, 1, 1, 2, np.zeros(1), np.zeros(1))
    value_only(code, aux, V, 1, 1, 1, np.zeros(1), np.zeros(1))


# the kernels read the op codes (another file) as compile-time constants
drop_stale_cache([d for d in list(globals().values())
                  if hasattr(d, "_cache") and hasattr(d, "py_func")], "kernel")
