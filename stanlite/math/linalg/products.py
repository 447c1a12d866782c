"""Matrix products and their derivatives (Giles: multiplication).

``matmul`` / ``dot`` (numpy's rules for vectors and stacks), ``crossprod``
(``A^T A``), ``tcrossprod`` (``A A^T``), the quadratic forms ``quad_form``,
``quad_form_sym`` and ``quad_form_diag``, the diagonal scalings
``diag_pre_multiply`` / ``diag_post_multiply``, ``multiply_lower_tri_self_transpose``
and ``matrix_power`` (repeated squaring with ``matmul``). Each primitive has its VJP
and JVP beside it; ``matmul`` also declares its inline template (the retaped
program) and its lowering (the interpreter), being the hottest product of models.
"""

import numpy as np

from ...autodiff.extend import (batch_shape, defjvp, defjvp_all, definline, defvjp,
                                defvjp_all, primitive)
from ...autodiff.var import shape_of
from ...autodiff.vm.program import deflower as _deflower, matmul_rule as _lmm
from ...autodiff.vm import opcodes as _op
from ...autodiff.vm.declare import defkernel as _defkernel
from ...autodiff.dual import is_identity_seed
from ..reductions import sum as _rsum
from ..structure import reshape
from .common import (_as_float, _check_matrix, _check_rows, _check_square,
                     _check_symmetric, _domain, _fail, _matrix2, _mT, _pad, _per_matrix,
                     _scalar_out, _sym, _tril_mask)


# --------------------------------------------------------------------------------------
# products
# --------------------------------------------------------------------------------------
@primitive
def matmul(a, b):
    """``a @ b`` with numpy's rules for vectors (1-D operands) and stacks."""
    r = np.matmul(a, b)
    return float(r) if np.ndim(r) == 0 else r


def _matmul_vjp_a(g, ans, a, b):
    # Giles: multiplication, A_bar = G B^T (vectors as numpy promotes them)
    na, nb = len(shape_of(a)), len(shape_of(b))
    if nb == 1:
        if na == 1:             # inner product: a_bar = g b
            return g * b
        # (..., m, n) @ (n,) -> (..., m): a_bar = g[..., :, None] * b
        return reshape(g, shape_of(g) + (1,)) * b
    if na == 1:                 # (n,) @ (..., n, k) -> (..., k): a_bar = B g
        return matmul(b, reshape(g, shape_of(g) + (1,)))[..., 0] if len(shape_of(b)) > 2 \
            else matmul(b, g)
    return matmul(g, _mT(b))


def _matmul_vjp_b(g, ans, a, b):
    # Giles: multiplication, B_bar = A^T G
    na, nb = len(shape_of(a)), len(shape_of(b))
    if na == 1:
        if nb == 1:
            return g * a
        # (n,) @ (..., n, k): b_bar = a[:, None] * g[..., None, :]
        sg = shape_of(g)
        return reshape(a, (shape_of(a)[0], 1)) * reshape(g, sg[:-1] + (1, sg[-1]))
    if nb == 1:                 # (..., m, n) @ (n,): b_bar = A^T g
        if na == 2:
            return matmul(g, a)
        return matmul(reshape(g, shape_of(g)[:-1] + (1, shape_of(g)[-1])), a)[..., 0, :]
    return matmul(_mT(a), g)


defvjp(matmul, _matmul_vjp_a, _matmul_vjp_b)


# forward mode: d(a b) = da b + a db. Tangents carry leading batch axes B, which
# must not meet matmul's own (right-aligned) broadcasting of stacks or its vector
# rules: vectors are promoted to a row (a) / a column (b) as numpy does, the tangent
# is padded to the output's stack rank (_pad), and the promoted axes are dropped.
def _matmul_tangent(t, ans, a, b, which):
    sa, sb = shape_of(a), shape_of(b)
    # a vector operand against a matrix: its batch of tangents is itself a matrix, so
    # the tangent is one matrix product (BLAS-3) rather than a stack of mat-vecs -
    # the hot case of forward-over-reverse Hessians (X @ beta and its adjoint g @ X)
    if which == 0 and len(sa) == 1 and len(sb) == 2:
        if is_identity_seed(t):                 # I @ b = b (see dual.is_identity_seed)
            return _readonly(b)
        return matmul(t, b)                     # (B, n) @ (n, k) -> (B, k)
    if which == 1 and len(sa) == 2 and len(sb) == 1:
        if is_identity_seed(t):                 # I @ A^T = A^T
            # a C-ordered copy: the elementwise passes that follow run 2x faster on
            # it than on the transposed view, which more than pays for the copy
            return _readonly(np.ascontiguousarray(_mT(a))) if type(a) is np.ndarray \
                else _mT(a)
        return matmul(t, _mT(a))                # (B, n) @ (n, m) -> (B, m)
    ca = sa if len(sa) > 1 else (1,) + sa
    cb = sb if len(sb) > 1 else sb + (1,)
    nd = max(len(ca), len(cb))
    if which == 0:
        B = batch_shape(t, a)
        x = reshape(t, B + (1,) * (nd - len(ca)) + ca)
        y = b if len(sb) > 1 else reshape(b, cb)
    else:
        B = batch_shape(t, b)
        x = a if len(sa) > 1 else reshape(a, ca)
        y = reshape(t, B + (1,) * (nd - len(cb)) + cb)
    return reshape(matmul(x, y), B + shape_of(ans))


def _readonly(v):
    # a tangent that aliases an operand must never be written through
    if type(v) is np.ndarray:
        v = v.view()
        v.flags.writeable = False
    return v


def _matmul_jvp_a(t, ans, a, b):
    return _matmul_tangent(t, ans, a, b, 0)


def _matmul_jvp_b(t, ans, a, b):
    return _matmul_tangent(t, ans, a, b, 1)


defjvp(matmul, _matmul_jvp_a, _matmul_jvp_b)


def _matmul_replay_vjp(i, sa, sb, sg):
    """The Python replay's template of argument ``i``'s VJP (in ``{g}``, ``{x}`` = a,
    ``{y}`` = b) for vectors and matrices: the rules of _matmul_vjp_a/_b above for
    those ranks (the same operations); None beyond two dimensions."""
    na, nb = len(sa), len(sb)
    if na not in (1, 2) or nb not in (1, 2):
        return None
    if i == 0:
        if nb == 1:
            return "{g} * {y}" if na == 1 else f"_np.reshape({{g}}, {sg + (1,)!r}) * {{y}}"
        return "_matmul({y}, {g})" if na == 1 else "_matmul({g}, {y}.T)"
    if na == 1:
        return "{g} * {x}" if nb == 1 else \
            f"_np.reshape({{x}}, ({sa[0]}, 1)) * _np.reshape({{g}}, (1, {sg[-1]}))"
    return "_matmul({g}, {x})" if nb == 1 else "_matmul({x}.T, {g})"


# the replay writes the product as np.matmul and Giles's rules for <= 2-d
definline(matmul, kind="matmul", vjp_shaped=_matmul_replay_vjp)
_deflower(matmul, _lmm)                 # the interpreter: vectors and matrices


# the interpreter's MATMUL sweeps (autodiff/vm/declare.py). BLAS (numba's np.dot on
# contiguous views of V) from this many multiply-adds on; below, the plain loop wins.
# Measured (one thread, ns per product): 4x4x4 loop 89 / BLAS 262; 8x8x8 517 / 260;
# 30x30 @ 30 828 / 325; 32x32x32 27,054 / 1,243
_BLAS_MIN = 256


def _gemm(X, Y, out):
    # out = X @ Y by BLAS: every call site passes 2-D C-contiguous arrays, so that
    # numba compiles one np.dot (each signature costs seconds of the cold compile)
    np.dot(X, Y, out)


def _matmul_row(code, r):
    # the op row both sweeps read: out = V[a] (p, k) @ V[b] (k, q), row-major
    return (code[r, _op.OUT], code[r, _op.A], code[r, _op.B], code[r, _op.X1],
            code[r, _op.X2], code[r, _op.X3])


def _matmul_forward(V, aux, code, r):
    o, a, b, p, k, q = _matmul_row(code, r)
    if p * k * q >= _BLAS_MIN:
        _gemm(V[a:a + p * k].reshape(p, k), V[b:b + k * q].reshape(k, q),
              V[o:o + p * q].reshape(p, q))
        return _op.OK
    for i in range(p):
        for j in range(q):
            s = 0.0
            for t in range(k):
                s += V[a + i * k + t] * V[b + t * q + j]
            V[o + i * q + j] = s
    return _op.OK


def _matmul_reverse(V, A, aux, code, r):
    m = code[r, _op.MASK]
    o, a, b, p, k, q = _matmul_row(code, r)
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


_defkernel(_op.MATMUL, _matmul_forward, _matmul_reverse,
           helpers=(_gemm, _matmul_row))


def dot(a, b):
    """``np.dot`` for vectors and matrices (matmul semantics for ndim <= 2)."""
    if len(shape_of(a)) == 0 or len(shape_of(b)) == 0:
        return a * b
    return matmul(a, b)


@primitive
def crossprod(a):
    """``A^T A`` (Stan's ``crossprod``); stacks allowed."""
    a = _as_float(a)
    _check_matrix("crossprod", "A", a.shape)
    return np.matmul(np.swapaxes(a, -1, -2), a)


# C = A^T A: dC = dA^T A + A^T dA  ->  A_bar = A (G + G^T)        (Giles: multiplication)
defvjp(crossprod, lambda g, ans, a: matmul(a, g + _mT(g)))


def _crossprod_jvp(t, ans, a):
    u = matmul(_mT(t), a)                       # dC = dA^T A + (dA^T A)^T
    return u + _mT(u)


defjvp(crossprod, _crossprod_jvp)


@primitive
def tcrossprod(a):
    """``A A^T`` (Stan's ``tcrossprod``); stacks allowed."""
    a = _as_float(a)
    _check_matrix("tcrossprod", "A", a.shape)
    return np.matmul(a, np.swapaxes(a, -1, -2))


# C = A A^T  ->  A_bar = (G + G^T) A
defvjp(tcrossprod, lambda g, ans, a: matmul(g + _mT(g), a))


def _tcrossprod_jvp(t, ans, a):
    u = matmul(t, _mT(a))                       # dC = dA A^T + (dA A^T)^T
    return u + _mT(u)


defjvp(tcrossprod, _tcrossprod_jvp)


def _quad_form_raw(fname, a, b, sym):
    a = _as_float(a)
    b = _as_float(b)
    _check_square(fname, "A", a.shape)
    _check_rows(fname, a.shape, b.shape, "A", "B")
    if sym:
        _check_symmetric(fname, a)
    if b.ndim == 1:
        return _scalar_out(np.matmul(np.matmul(b, a), b))
    c = np.matmul(np.swapaxes(b, -1, -2), np.matmul(a, b))
    if sym:
        c = 0.5 * (c + np.swapaxes(c, -1, -2))
    return c


@primitive
def quad_form(a, b):
    """``B^T A B`` for a square ``A``; a scalar ``b^T A b`` for a vector ``b``."""
    return _quad_form_raw("quad_form", a, b, False)


@primitive
def quad_form_sym(a, b):
    """``B^T A B`` for a symmetric ``A``, symmetrised as in Stan; scalar for a vector."""
    return _quad_form_raw("quad_form_sym", a, b, True)


def _quad_form_vjp_all(g, ans, a, b, sym=False):
    if len(shape_of(b)) == 1:
        # c = b^T A b: A_bar = g b b^T, b_bar = g (A + A^T) b
        n = shape_of(b)[0]
        a_bar = _per_matrix(g) * (reshape(b, (n, 1)) * reshape(b, (1, n)))
        gv = g if shape_of(g) == () else reshape(g, shape_of(g) + (1,))
        return a_bar, gv * matmul(a + _mT(a), b)
    # C = B^T A B (Giles: multiplication, twice): A_bar = B G B^T,
    # B_bar = A B G^T + A^T B G. quad_form_sym's output is (C + C^T)/2, whose
    # adjoint first symmetrises G.
    if sym:
        g = _sym(g)
    a_bar = matmul(b, matmul(g, _mT(b)))
    b_bar = matmul(a, matmul(b, _mT(g))) + matmul(_mT(a), matmul(b, g))
    return a_bar, b_bar


defvjp_all(quad_form, _quad_form_vjp_all)
defvjp_all(quad_form_sym, lambda g, ans, a, b: _quad_form_vjp_all(g, ans, a, b, True))


def _quad_form_jvp_all(ts, ans, a, b, sym=False):
    ta, tb = ts
    sb = shape_of(b)
    out = None
    if len(sb) == 1:
        # c = b^T A b: dc = b^T dA b + db^T (A + A^T) b
        n = sb[0]
        if ta is not None:
            out = _rsum(ta * (reshape(b, (n, 1)) * reshape(b, (1, n))), axis=(-2, -1))
        if tb is not None:
            w = matmul(a + _mT(a), reshape(b, (n, 1)))
            w = reshape(w, shape_of(w)[:-1])
            if is_identity_seed(tb) and shape_of(w) == (n,):
                c = w                           # sum_j I[k, j] w[j] = w[k]
            else:
                c = _rsum(_pad(tb, b, len(shape_of(w))) * w, axis=-1)
            out = c if out is None else out + c
        return out
    # C = B^T A B: dC = dB^T A B + B^T dA B + B^T A dB; quad_form_sym: symmetrised
    nd = len(shape_of(ans))
    if ta is not None:
        out = matmul(_mT(b), matmul(_pad(ta, a, nd), b))
    if tb is not None:
        tb = _pad(tb, b, nd)
        c = matmul(_mT(tb), matmul(a, b)) + matmul(_mT(b), matmul(a, tb))
        out = c if out is None else out + c
    return _sym(out) if sym else out


defjvp_all(quad_form, _quad_form_jvp_all)
defjvp_all(quad_form_sym, lambda ts, ans, a, b: _quad_form_jvp_all(ts, ans, a, b, True))


@primitive
def quad_form_diag(m, v):
    """``diag(v) M diag(v)``, i.e. ``M_ij v_i v_j`` (Stan's ``quad_form_diag``)."""
    m = _as_float(m)
    v = _as_float(v)
    _check_square("quad_form_diag", "M", m.shape)
    if v.ndim == 0 or v.shape[-1] != m.shape[-1]:
        _fail("quad_form_diag", f"v must be a vector of length {m.shape[-1]} to match "
                                f"M of shape {m.shape}, got shape {v.shape}")
    return m * v[..., :, None] * v[..., None, :]


def _quad_form_diag_vjp_all(g, ans, m, v):
    # C_ij = M_ij v_i v_j: M_bar = G o v v^T, v_bar = (G o M + (G o M)^T) v
    sv = shape_of(v)
    vc = reshape(v, sv + (1,))
    vr = reshape(v, sv[:-1] + (1, sv[-1]))
    gm = g * m
    v_bar = matmul(gm + _mT(gm), vc)[..., 0]
    return g * (vc * vr), v_bar


defvjp_all(quad_form_diag, _quad_form_diag_vjp_all)


def _quad_form_diag_jvp_all(ts, ans, m, v):
    # dC = dM o v v^T + M o (dv v^T + v dv^T)
    tm, tv = ts
    nd = len(shape_of(ans))
    sv = shape_of(v)
    out = None
    if tm is not None:
        out = _pad(tm, m, nd) * (reshape(v, sv + (1,)) * reshape(v, sv[:-1] + (1, sv[-1])))
    if tv is not None:
        tv = _pad(tv, v, nd - 1)
        st = shape_of(tv)
        u = reshape(tv, st + (1,)) * reshape(v, sv[:-1] + (1, sv[-1]))
        c = m * (u + _mT(u))
        out = c if out is None else out + c
    return out


defjvp_all(quad_form_diag, _quad_form_diag_jvp_all)


def _check_scaling(fname, v, m, axis):
    """``v`` a vector as long as axis ``axis`` (-2 rows, -1 columns) of the matrix ``M``;
    returns the shape of ``v``."""
    sv, sm = shape_of(v), shape_of(m)
    _check_matrix(fname, "M", sm)
    if len(sv) != 1 or sv[0] != sm[axis]:
        _fail(fname, f"v must be a vector of length {sm[axis]} to match M of shape {sm}, "
                     f"got shape {sv}")
    return sv


def diag_pre_multiply(v, m):
    """``diag(v) M``: row ``i`` of ``M`` scaled by ``v_i``."""
    sv = _check_scaling("diag_pre_multiply", v, m, -2)
    return reshape(v, (sv[0], 1)) * m


def diag_post_multiply(m, v):
    """``M diag(v)``: column ``j`` of ``M`` scaled by ``v_j``."""
    _check_scaling("diag_post_multiply", v, m, -1)
    return m * v


@primitive
def multiply_lower_tri_self_transpose(L):
    """``T T^T`` with ``T`` the lower triangle of ``L`` (``L`` may be rectangular)."""
    L = _as_float(L)
    _check_matrix("multiply_lower_tri_self_transpose", "L", L.shape)
    t = np.tril(L)
    return np.matmul(t, np.swapaxes(t, -1, -2))


def _mlt_self_t_vjp(g, ans, L):
    # C = T T^T, T = tril(L): T_bar = (G + G^T) T, L_bar = tril(T_bar)
    mask = _tril_mask(*shape_of(L)[-2:])
    return mask * matmul(g + _mT(g), L * mask)


defvjp(multiply_lower_tri_self_transpose, _mlt_self_t_vjp)


def _mlt_self_t_jvp(t, ans, L):
    # dC = dT T^T + T dT^T, dT = tril(dL)
    mask = _tril_mask(*shape_of(L)[-2:])
    u = matmul(mask * t, _mT(L * mask))
    return u + _mT(u)


defjvp(multiply_lower_tri_self_transpose, _mlt_self_t_jvp)


# --------------------------------------------------------------------------------------
# matrix_power: repeated squaring with matmul (exact; its derivatives are matmul's)
# --------------------------------------------------------------------------------------
def matrix_power(a, n):
    """``A^n`` for a square matrix A and an integer n >= 0 (Stan's ``matrix_power``;
    ``A^0`` is the identity), by repeated squaring: about 2 log2(n) products,
    differentiable in A.

    >>> import numpy as np, stanlite as sl
    >>> sl.matrix_power(np.array([[1.0, 1.0], [0.0, 1.0]]), 5)
    array([[1., 5.],
           [0., 1.]])
    """
    fname = "matrix_power"
    s = _matrix2(fname, a)
    _check_square(fname, "A", s)
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        if isinstance(n, (float, np.floating)) and float(n).is_integer():
            n = int(n)
        else:
            _fail(fname, f"n must be an integer, got {n!r}")
    n = int(n)
    if n < 0:
        _domain(fname, f"n must be non-negative, but is {n}")
    out = None
    base = a
    while n:
        if n & 1:
            out = base if out is None else matmul(out, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    return np.eye(s[0]) if out is None else out
