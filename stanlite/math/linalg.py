"""Linear algebra with matrix adjoints, Stan's names.

Every function is one primitive (numpy / scipy.linalg on plain arrays) with its
reverse-mode rule beside it, or a short composition of such primitives. References
"Giles: <result>" are to the result of that name in M. Giles (2008), "An extended
collection of matrix derivative results for forward and reverse mode algorithmic
differentiation" (Oxford NA report 08/01); ``X_bar`` is the adjoint of ``X``, ``G``
(``g``) the adjoint of the output.

    C = A B            A_bar = G B^T,  B_bar = A^T G          (Giles: multiplication)
    C = A^-1           A_bar = -C^T G C^T                     (Giles: inverse)
    C = A^-1 B         B_bar = A^-T G,  A_bar = -B_bar C^T    (Giles: inverse product)
    c = det A          A_bar = g c A^-T                       (Giles: determinant)
    c = log|det A|     A_bar = g A^-T
    A = L L^T          A_bar = (S + S^T) / 2,  S = L^-T Phi(L^T L_bar) L^-1, where Phi
                       takes the lower triangle and halves the diagonal; it follows
                       from the forward rule dL = L Phi(L^-1 dA L^-T)
                       (Giles: Cholesky factorisation; Murray 2016, "Differentiation
                       of the Cholesky decomposition")
    A = V diag(l) V^T  A_bar = V (diag(l_bar) + F o (V^T V_bar)) V^T, symmetrised,
                       F_ij = 1 / (l_j - l_i) for i != j, 0 on the diagonal
                       (Giles: eigenvalues and eigenvectors)

Forward mode: each primitive also has its JVP beside its VJP (``dX`` the tangent):

    dC = dA B + A dB;   d(A^-1) = -A^-1 dA A^-1;   d(A^-1 B) = A^-1 (dB - dA C)
    d log|det A| = tr(A^-1 dA);   d det A = det A tr(A^-1 dA)
    dL = L Phi(L^-1 dA L^-T)                              (Cholesky)
    dl_i = v_i^T dA v_i,   dV = V (F o (V^T dA V))        (symmetric eigenproblem)

Tangents carry leading batch axes ``B`` (vector mode, used for Hessians): the rules
act on the last two axes only, and a tangent whose stack has fewer axes than the
output's is padded after ``B`` (:func:`_pad`) before it meets broadcasting. Like the
VJPs, the JVPs use stanlite operations only, so they are differentiated again (third
derivatives; forward-over-reverse evaluates the VJPs on duals). Functions of
symmetric matrices use the symmetric part of ``dA``, matching their symmetric
adjoints.

Conventions
-----------
* Matrices are 2-D arrays; most functions also take stacks ``(..., m, n)`` with
  numpy's broadcasting of the leading axes. A 1-D right-hand side is a vector.
* Functions of symmetric matrices (``cholesky_decompose``, ``eigenvalues_sym``,
  ``eigenvectors_sym``, ``quad_form_sym``, ``log_determinant_spd``, the ``*_spd``
  solves) check symmetry (to ``1e-8`` relative) as Stan does, and their adjoints are
  symmetric: they are the gradients with respect to symmetric perturbations.
* The adjoints are written with stanlite operations only, so that under nested
  differentiation they are recorded and differentiated again (reverse-over-reverse).
  Triangular solves are primitives; Cholesky and triangular solves are used in
  preference to explicit inverses.
* Bad shapes and non-square inputs raise ``ValueError`` naming the function (and
  the shapes): programming errors. Non-symmetric, non-positive-definite, singular or
  NaN values raise :class:`~stanlite.DomainError` (a ``ValueError`` too), which a
  sampler treats as a rejected proposal, as Stan does.
"""

import numpy as np
from scipy.linalg.lapack import dtrtrs as _dtrtrs

from ..autodiff.extend import (batch_shape, broadcast_to, defjvp, defjvp_all, definline,
                                defvjp, defvjp_all, primitive)
from ..autodiff.var import FUNCTIONS, UFUNCS, Box, guarded, shape_of
from ..autodiff.vm import program as _program
from ..autodiff.vm.program import deflower as _deflower, matmul_rule as _lmm
from ..errors import DomainError
from ..autodiff.dual import is_identity_seed
from .arithmetic import fabs
from .elementwise import exp, sin, sqrt
from .reductions import sum as _rsum
from .structure import reshape, transpose, where

__all__ = ["matmul", "dot", "crossprod", "tcrossprod", "quad_form", "quad_form_sym",
           "quad_form_diag", "diag_matrix", "diagonal", "add_diag", "diag_pre_multiply",
           "diag_post_multiply", "trace", "cholesky_decompose", "mdivide_left_tri_low",
           "mdivide_right_tri_low", "mdivide_left", "mdivide_right", "mdivide_left_spd",
           "mdivide_right_spd", "solve", "inverse", "inverse_spd", "log_determinant",
           "determinant", "log_determinant_spd", "multiply_lower_tri_self_transpose",
           "eigenvalues_sym", "eigenvectors_sym", "gp_exp_quad_cov", "cov_exp_quad"]


# --------------------------------------------------------------------------------------
# helpers (all valid on plain and traced values)
# --------------------------------------------------------------------------------------
def _mT(x):
    """Swap the last two axes (the matrix transpose of a stack of matrices)."""
    n = len(shape_of(x))
    if n < 2:
        return x
    axes = list(range(n))
    axes[-1], axes[-2] = axes[-2], axes[-1]
    return transpose(x, tuple(axes))


def _sym(x):
    """(X + X^T) / 2 over the last two axes."""
    return 0.5 * (x + _mT(x))


def _per_matrix(g):
    """A per-matrix scalar (or stack of them) shaped to broadcast against matrices."""
    s = shape_of(g)
    return g if s == () else reshape(g, s + (1, 1))


def _pad(t, x, nd):
    """Forward mode: the tangent ``t`` of ``x`` (batch axes ``B`` leading) with unit
    axes inserted after ``B`` so that its non-batch part has ``nd`` axes. Stacks then
    broadcast against primal values (right-aligned) without meeting the batch axes."""
    xs = shape_of(x)
    miss = nd - len(xs)
    if miss <= 0:
        return t
    return reshape(t, batch_shape(t, x) + (1,) * miss + xs)


def _tril_mask(n, m=None):
    return np.tril(np.ones((n, n if m is None else m)))


def _as_float(x):
    return np.asarray(x, dtype=np.float64)


def _scalar_out(r):
    return float(r) if np.ndim(r) == 0 else r


def _fail(fname, msg):
    raise ValueError(f"{fname}: {msg}")


def _domain(fname, msg):
    # a value outside the function's domain (a singular or indefinite matrix, a NaN):
    # during sampling it rejects the proposal, as Stan's domain errors do; _fail is
    # for the shapes and types of the arguments, which are programming errors
    raise DomainError(f"{fname}: {msg}")


def _check_matrix(fname, name, s):
    if len(s) < 2:
        _fail(fname, f"{name} must be a matrix (or a stack of matrices), got shape {s}")


def _check_square(fname, name, s):
    _check_matrix(fname, name, s)
    if s[-1] != s[-2]:
        _fail(fname, f"{name} must be square, got shape {s}")


def _check_rows(fname, sa, sb, aname="A", bname="b"):
    """``b`` (vector or matrix) must have as many rows as ``A`` has columns."""
    if len(sb) == 0:
        _fail(fname, f"{bname} must be a vector or a matrix, got a scalar")
    nb = sb[0] if len(sb) == 1 else sb[-2]
    if nb != sa[-1]:
        _fail(fname, f"shapes {sa} ({aname}) and {sb} ({bname}) do not match: {aname} "
                     f"has {sa[-1]} columns, {bname} has {nb} rows")


def _check_symmetric(fname, a, name="A"):
    """Stan's check_symmetric, relative to the matrix's scale; NaN fails."""
    if a.size == 0 or (a == np.swapaxes(a, -1, -2)).all():
        return                  # exactly symmetric (and so no NaN): one pass, no scale
    if np.isnan(a).any():
        _domain(fname, f"{name} contains NaN")
    scale = max(1.0, float(np.max(np.abs(a))))
    err = float(np.max(np.abs(a - np.swapaxes(a, -1, -2))))
    if not err <= 1e-8 * scale:
        _domain(fname, f"{name} is not symmetric (max |{name} - {name}^T| = {err:.3g})")


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


def diag_pre_multiply(v, m):
    """``diag(v) M``: row ``i`` of ``M`` scaled by ``v_i``."""
    sv, sm = shape_of(v), shape_of(m)
    _check_matrix("diag_pre_multiply", "M", sm)
    if len(sv) != 1 or sv[0] != sm[-2]:
        _fail("diag_pre_multiply", f"v must be a vector of length {sm[-2]} to match M "
                                   f"of shape {sm}, got shape {sv}")
    return reshape(v, (sv[0], 1)) * m


def diag_post_multiply(m, v):
    """``M diag(v)``: column ``j`` of ``M`` scaled by ``v_j``."""
    sv, sm = shape_of(v), shape_of(m)
    _check_matrix("diag_post_multiply", "M", sm)
    if len(sv) != 1 or sv[0] != sm[-1]:
        _fail("diag_post_multiply", f"v must be a vector of length {sm[-1]} to match M "
                                    f"of shape {sm}, got shape {sv}")
    return m * v


# --------------------------------------------------------------------------------------
# diagonals and trace
# --------------------------------------------------------------------------------------
@primitive
def _diag_embed(v, shape):
    """zeros(shape) with ``v`` on the diagonal of the last two axes."""
    z = np.zeros(shape)
    k = min(shape[-2:])
    idx = np.arange(k)
    z[..., idx, idx] = v
    return z


@primitive
def diagonal(m):
    """The diagonal of a matrix (of each matrix of a stack) as a vector."""
    m = _as_float(m)
    _check_matrix("diagonal", "M", m.shape)
    return np.diagonal(m, axis1=-2, axis2=-1).copy()


# gather and scatter of the diagonal are each other's transpose
defvjp(_diag_embed, lambda g, ans, v, shape: diagonal(g), None)
defvjp(diagonal, lambda g, ans, m: _diag_embed(g, shape_of(m)))
# both linear: the tangent goes through the same operation (over the last two axes)
defjvp(_diag_embed, lambda t, ans, v, shape: _diag_embed(
    t, batch_shape(t, v) + tuple(shape)), None)
defjvp(diagonal, lambda t, ans, m: diagonal(t))


def diag_matrix(v):
    """The square matrix with diagonal ``v`` (stacks of vectors give stacks)."""
    s = shape_of(v)
    if len(s) == 0:
        _fail("diag_matrix", "v must be a vector, got a scalar")
    return _diag_embed(v, s + (s[-1],))


@primitive
def add_diag(m, d):
    """``M`` plus ``d`` on its diagonal (``d`` a scalar or a vector of the diagonal's
    length, ``min(rows, cols)``)."""
    r = np.array(m, dtype=np.float64)
    _check_matrix("add_diag", "M", r.shape)
    k = min(r.shape[-2:])
    d = _as_float(d)
    if d.ndim > 0 and d.shape[-1] != k:
        _fail("add_diag", f"d must be a scalar or a vector of length {k} for M of "
                          f"shape {r.shape}, got shape {d.shape}")
    idx = np.arange(k)
    r[..., idx, idx] += d
    return r


# M_bar = G; d_bar = diag(G) (summed to a scalar d by the core)
defvjp(add_diag, lambda g, ans, m, d: g, lambda g, ans, m, d: diagonal(g))


def _add_diag_jvp_d(t, ans, m, d):
    # dC = diag(dd): the tangent of d broadcast along the diagonal, then embedded
    B = batch_shape(t, d)
    so = shape_of(ans)
    k = min(so[-2:])
    return _diag_embed(broadcast_to(t, B + so[:-2] + (k,), len(B)), B + so)


defjvp(add_diag, lambda t, ans, m, d: t, _add_diag_jvp_d)
_deflower(add_diag, _program.add_diag_rule)


@primitive
def trace(a):
    """Sum of the diagonal (per matrix of a stack)."""
    a = _as_float(a)
    _check_matrix("trace", "A", a.shape)
    return _scalar_out(np.trace(a, axis1=-2, axis2=-1))


# d tr(A) = tr(dA)  ->  A_bar = g I
defvjp(trace, lambda g, ans, a: _per_matrix(g) * np.eye(*shape_of(a)[-2:]))
defjvp(trace, lambda t, ans, a: trace(t))


# --------------------------------------------------------------------------------------
# triangular solves and Cholesky
# --------------------------------------------------------------------------------------
def _batched(fn, a, b):
    """Apply a 2-D solver ``fn(a, b)`` over the broadcast leading axes of a and b."""
    if a.ndim == 2 and b.ndim == 2:
        return fn(a, b)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    ab = np.broadcast_to(a, batch + a.shape[-2:])
    bb = np.broadcast_to(b, batch + b.shape[-2:])
    out = np.empty(batch + b.shape[-2:])
    for i in np.ndindex(*batch):
        out[i] = fn(ab[i], bb[i])
    return out


@primitive
def _trisolve(L, b, trans):
    """``L^-1 b`` (``trans=False``) or ``L^-T b`` (``trans=True``) for the lower
    triangle of ``L`` (the upper triangle is not read); ``b`` a matrix; stacks of
    either broadcast."""
    L = _as_float(L)
    b = _as_float(b)

    if L.shape[-1] == 0 or b.shape[-1] == 0:
        return np.zeros(np.broadcast_shapes(L.shape[:-2], b.shape[:-2]) + b.shape[-2:])
    t = 1 if trans else 0

    def solve(l2, b2):
        # LAPACK dtrtrs, the routine behind scipy.linalg.solve_triangular, called
        # directly: solve_triangular's argument handling costs ~20x the solve itself
        # on the small matrices of typical models. LAPACK wants column-major: a
        # row-major L is handed over as the column-major U = L^T (no copy) with the
        # transposition flipped, since L^-1 b = U^-T b
        if l2.flags.c_contiguous and not l2.flags.f_contiguous:
            x, info = _dtrtrs(l2.T, b2, lower=0, trans=1 - t)
        else:
            x, info = _dtrtrs(l2, b2, lower=1, trans=t)
        if info > 0:
            raise DomainError("triangular solve: the matrix is singular (zero on the "
                              "diagonal)")
        if info < 0:  # pragma: no cover - an argument LAPACK rejected
            raise ValueError(f"triangular solve: LAPACK dtrtrs argument {-info} invalid")
        return x
    if L.ndim == 2 and b.ndim > 2:
        # one L, many right-hand sides (forward-mode batches): one solve on the
        # columns side by side, (..., n, k) -> (n, ... k)
        n = b.shape[-2]
        cols = np.moveaxis(b, -2, 0)
        x = solve(L, np.ascontiguousarray(cols.reshape(n, -1)))
        return np.moveaxis(x.reshape(cols.shape), 0, -2)
    return _batched(solve, L, b)


def _trisolve_vjp_all(g, ans, L, b, trans):
    # C = L^-1 B: B_bar = L^-T G, L_bar = -B_bar C^T   (Giles: inverse product)
    # C = L^-T B: B_bar = L^-1 G, L_bar = -C B_bar^T
    # restricted to the lower triangle, the only part of L that is read
    b_bar = _trisolve(L, g, not trans)
    l_bar = -matmul(ans, _mT(b_bar)) if trans else -matmul(b_bar, _mT(ans))
    return _tril_mask(shape_of(L)[-1]) * l_bar, b_bar, None


defvjp_all(_trisolve, _trisolve_vjp_all)


def _trisolve_jvp_all(ts, ans, L, b, trans):
    # C = L^-1 B:  dC = L^-1 (dB - tril(dL) C);  C = L^-T B:  dC = L^-T (dB - tril(dL)^T C)
    tL, tb, _ = ts
    nd = len(shape_of(ans))
    rhs = None if tb is None else _pad(tb, b, nd)
    if tL is not None:
        dl = _tril_mask(shape_of(L)[-1]) * _pad(tL, L, nd)
        d = matmul(_mT(dl) if trans else dl, ans)
        rhs = -d if rhs is None else rhs - d
    return _trisolve(L, rhs, trans)


defjvp_all(_trisolve, _trisolve_jvp_all)


def _tri_low(fname, L, b, trans):
    sL, sb = shape_of(L), shape_of(b)
    _check_square(fname, "L", sL)
    _check_rows(fname, sL, sb, "L", "b")
    try:
        if len(sb) == 1:
            return _trisolve(L, reshape(b, (sb[0], 1)), trans)[..., 0]
        return _trisolve(L, b, trans)
    except ValueError as e:
        if str(e).startswith("triangular solve"):
            _domain(fname, "L is singular (zero on the diagonal)")
        raise


def mdivide_left_tri_low(L, b):
    """``L^-1 b`` for the lower triangle of ``L`` (``b`` a vector or a matrix)."""
    return _tri_low("mdivide_left_tri_low", L, b, False)


def mdivide_right_tri_low(b, L):
    """``b L^-1`` for the lower triangle of ``L`` (``b`` a row vector or a matrix);
    computed as ``(L^-T b^T)^T``."""
    sL, sb = shape_of(L), shape_of(b)
    fname = "mdivide_right_tri_low"
    _check_square(fname, "L", sL)
    if len(sb) == 0 or sb[-1] != sL[-2]:
        _fail(fname, f"shapes {sb} (b) and {sL} (L) do not match: b must have "
                     f"{sL[-2]} columns")
    if len(sb) == 1:
        return _tri_low(fname, L, b, True)
    return _mT(_tri_low(fname, L, _mT(b), True))


@primitive
def _cholesky(a, fname):
    a = _as_float(a)
    _check_square(fname, "A", a.shape)
    _check_symmetric(fname, a)
    try:
        return np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        raise DomainError(f"{fname}: A is not positive definite") from None


def _cholesky_vjp(g, ans, a, fname):
    # dL = L Phi(L^-1 dA L^-T) (Giles: Cholesky factorisation; Murray 2016) gives
    # A_bar = 1/2 (S + S^T), S = L^-T Phi(L^T L_bar) L^-1 with Phi = lower triangle,
    # diagonal halved (S symmetrised: A_bar is the gradient for symmetric dA).
    L = ans
    n = shape_of(L)[-1]
    phi = (_tril_mask(n) - 0.5 * np.eye(n)) * matmul(_mT(L), g)
    x = _trisolve(L, phi, True)                 # L^-T Phi
    s = _mT(_trisolve(L, _mT(x), True))         # (L^-T (L^-T Phi)^T)^T = L^-T Phi L^-1
    return _sym(s)


defvjp(_cholesky, _cholesky_vjp, None)


def _cholesky_jvp(t, ans, a, fname):
    # dL = L Phi(L^-1 dA L^-T) for the symmetric part of dA (the perturbations the
    # VJP's symmetric A_bar is the gradient for)
    L = ans
    n = shape_of(L)[-1]
    x = _trisolve(L, _sym(t), False)            # L^-1 dA
    y = _trisolve(L, _mT(x), False)             # L^-1 (L^-1 dA)^T = L^-1 dA L^-T
    return matmul(L, (_tril_mask(n) - 0.5 * np.eye(n)) * y)


defjvp(_cholesky, _cholesky_jvp, None)
# not lowered (program.cholesky_rule exists): a GP covariance is often so ill-conditioned
# (kappa ~ 1e10 with a 1e-10 jitter) that the kernel's Cholesky and LAPACK's, both right
# to rounding, give gradients 1e-8 apart - and the spot checks (1e-12) then hand the
# whole run to the eager tape (gp_pois_regr, 250 draws: 39 s; 35 s in the Python
# replay, 13 ms a gradient; the interpreter's gradient is 20 us). Until a failed check
# falls back to the Python replay rather than the tape, such programs replay in Python.


def cholesky_decompose(a):
    """The lower-triangular Cholesky factor ``L`` of a symmetric positive-definite
    ``A = L L^T`` (stacks allowed). Raises ``ValueError`` if ``A`` is not square,
    not symmetric or not positive definite.

    >>> import numpy as np, stanlite as sl
    >>> sl.cholesky_decompose(np.array([[4.0, 2.0], [2.0, 2.0]]))
    array([[2., 0.],
           [1., 1.]])
    """
    return _cholesky(a, "cholesky_decompose")


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


def _spd_solve(fname, a, b):
    """``A^-1 b`` through ``A = L L^T``: two triangular solves, no inverse."""
    sa, sb = shape_of(a), shape_of(b)
    _check_square(fname, "A", sa)
    _check_rows(fname, sa, sb, "A", "b")
    L = _cholesky(a, fname)
    if len(sb) == 1:
        col = reshape(b, (sb[0], 1))
        return _trisolve(L, _trisolve(L, col, False), True)[..., 0]
    return _trisolve(L, _trisolve(L, b, False), True)


def mdivide_left_spd(a, b):
    """``A^-1 b`` for a symmetric positive-definite ``A`` (via Cholesky)."""
    return _spd_solve("mdivide_left_spd", a, b)


def mdivide_right_spd(b, a):
    """``b A^-1`` for a symmetric positive-definite ``A`` (via Cholesky)."""
    sa, sb = shape_of(a), shape_of(b)
    fname = "mdivide_right_spd"
    _check_square(fname, "A", sa)
    if len(sb) == 0 or sb[-1] != sa[-2]:
        _fail(fname, f"shapes {sb} (b) and {sa} (A) do not match: b must have "
                     f"{sa[-2]} columns")
    if len(sb) == 1:
        return _spd_solve(fname, a, b)
    return _mT(_spd_solve(fname, a, _mT(b)))      # A symmetric: (A^-1 b^T)^T


def inverse_spd(a):
    """``A^-1`` for a symmetric positive-definite ``A``: ``L^-T L^-1`` from Cholesky."""
    L = _cholesky(a, "inverse_spd")
    linv = _trisolve(L, np.eye(shape_of(a)[-1]), False)
    return matmul(_mT(linv), linv)


# --------------------------------------------------------------------------------------
# general solves, inverse, determinants
# --------------------------------------------------------------------------------------
@primitive
def _solve(a, b):
    """``A^-1 B`` for square ``A`` and a matrix ``B`` (LU, stacks broadcast)."""
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise DomainError("solve: the matrix is singular") from None


def _solve_vjp_all(g, ans, a, b):
    # C = A^-1 B: B_bar = A^-T G, A_bar = -B_bar C^T      (Giles: inverse product)
    b_bar = _solve(_mT(a), g)
    return -matmul(b_bar, _mT(ans)), b_bar


defvjp_all(_solve, _solve_vjp_all)


def _solve_jvp_all(ts, ans, a, b):
    # C = A^-1 B: dC = A^-1 (dB - dA C)                     (Giles: inverse product)
    ta, tb = ts
    nd = len(shape_of(ans))
    rhs = None if tb is None else _pad(tb, b, nd)
    if ta is not None:
        d = matmul(_pad(ta, a, nd), ans)
        rhs = -d if rhs is None else rhs - d
    return _solve(a, rhs)


defjvp_all(_solve, _solve_jvp_all)


def _general_solve(fname, a, b):
    sa, sb = shape_of(a), shape_of(b)
    _check_square(fname, "A", sa)
    _check_rows(fname, sa, sb, "A", "b")
    try:
        if len(sb) == 1:
            return _solve(a, reshape(b, (sb[0], 1)))[..., 0]
        return _solve(a, b)
    except ValueError as e:
        if str(e).startswith("solve:"):
            _domain(fname, "A is singular")
        raise


def mdivide_left(a, b):
    """``A^-1 b`` (Stan's ``A \\ b``) for a square ``A`` and a vector or matrix ``b``."""
    return _general_solve("mdivide_left", a, b)


solve = mdivide_left


def mdivide_right(b, a):
    """``b A^-1`` (Stan's ``b / A``), computed as ``(A^-T b^T)^T``."""
    sa, sb = shape_of(a), shape_of(b)
    fname = "mdivide_right"
    _check_square(fname, "A", sa)
    if len(sb) == 0 or sb[-1] != sa[-2]:
        _fail(fname, f"shapes {sb} (b) and {sa} (A) do not match: b must have "
                     f"{sa[-2]} columns")
    if len(sb) == 1:
        return _general_solve(fname, _mT(a), b)
    return _mT(_general_solve(fname, _mT(a), _mT(b)))


@primitive
def inverse(a):
    """``A^-1`` for a square ``A`` (stacks allowed); prefer the ``mdivide_*``
    functions to multiplying by an inverse."""
    a = _as_float(a)
    _check_square("inverse", "A", a.shape)
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        raise DomainError("inverse: A is singular") from None


# Giles: inverse. C = A^-1, A_bar = -C^T G C^T
defvjp(inverse, lambda g, ans, a: -matmul(_mT(ans), matmul(g, _mT(ans))))
# dC = -C dA C
defjvp(inverse, lambda t, ans, a: -matmul(ans, matmul(t, ans)))


def _tr_prod(mt, t):
    """``tr(M dA)`` per matrix, given ``mt = M^T`` (elementwise, over the last two axes)."""
    return _rsum(mt * t, axis=(-2, -1))


@primitive
def log_determinant(a):
    """``log |det A|`` (via an LU factorisation; ``-inf`` for a singular ``A``)."""
    a = _as_float(a)
    _check_square("log_determinant", "A", a.shape)
    return _scalar_out(np.linalg.slogdet(a)[1])


# d log|det A| = tr(A^-1 dA)  ->  A_bar = g A^-T           (Giles: determinant, / det)
defvjp(log_determinant, lambda g, ans, a: _per_matrix(g) * _mT(inverse(a)))
# d log|det A| = tr(A^-1 dA)
defjvp(log_determinant, lambda t, ans, a: _tr_prod(_mT(inverse(a)), t))


@primitive
def determinant(a):
    """``det A`` (stacks allowed)."""
    a = _as_float(a)
    _check_square("determinant", "A", a.shape)
    return _scalar_out(np.linalg.det(a))


# Giles: determinant. A_bar = g det(A) A^-T (needs a non-singular A)
defvjp(determinant, lambda g, ans, a: _per_matrix(g * ans) * _mT(inverse(a)))
# d det A = det A tr(A^-1 dA)
defjvp(determinant, lambda t, ans, a: ans * _tr_prod(_mT(inverse(a)), t))


@primitive
def log_determinant_spd(a):
    """``log det A`` for a symmetric positive-definite ``A``: ``2 sum log diag(L)``."""
    a = _as_float(a)
    L = _cholesky(a, "log_determinant_spd")
    return _scalar_out(2.0 * np.sum(np.log(np.diagonal(L, axis1=-2, axis2=-1)), axis=-1))


def _inv_spd(a, fname):
    """``A^-1 = L^-T L^-1`` (symmetric) from the Cholesky factor."""
    L = _cholesky(a, fname)
    linv = _trisolve(L, np.eye(shape_of(a)[-1]), False)
    return matmul(_mT(linv), linv)


def _logdet_spd_vjp(g, ans, a):
    # A_bar = g A^-1 = g L^-T L^-1 (two triangular solves, symmetric)
    return _per_matrix(g) * _inv_spd(a, "log_determinant_spd")


defvjp(log_determinant_spd, _logdet_spd_vjp)
# d log det A = tr(A^-1 dA)
defjvp(log_determinant_spd,
       lambda t, ans, a: _tr_prod(_inv_spd(a, "log_determinant_spd"), t))


# --------------------------------------------------------------------------------------
# symmetric eigendecomposition
# --------------------------------------------------------------------------------------
def _eigh(fname, a):
    a = _as_float(a)
    _check_square(fname, "A", a.shape)
    _check_symmetric(fname, a)
    try:
        return np.linalg.eigh(a)
    except np.linalg.LinAlgError:
        raise DomainError(f"{fname}: the eigendecomposition did not converge") from None


@primitive
def eigenvalues_sym(a):
    """Eigenvalues of a symmetric ``A`` in ascending order (as Stan)."""
    return _eigh("eigenvalues_sym", a)[0]


def _eigenvalues_vjp(g, ans, a):
    # d l_i = v_i^T dA v_i  ->  A_bar = V diag(g) V^T        (Giles: eigenvalues, D_bar)
    V = eigenvectors_sym(a)
    sg = shape_of(g)
    return matmul(V * reshape(g, sg[:-1] + (1, sg[-1])), _mT(V))


defvjp(eigenvalues_sym, _eigenvalues_vjp)


def _eigenvalues_jvp(t, ans, a):
    # d l_i = v_i^T dA v_i = sum_j V_ji (dA V)_ji
    V = eigenvectors_sym(a)
    return _rsum(V * matmul(t, V), axis=-2)


defjvp(eigenvalues_sym, _eigenvalues_jvp)


@primitive
def eigenvectors_sym(a):
    """Unit eigenvectors of a symmetric ``A`` as columns, in the order of
    :func:`eigenvalues_sym`.

    Sign convention: an eigenvector is only defined up to sign; each column is
    oriented so that its component of largest magnitude is positive. That choice is
    deterministic and locally constant, so the function is differentiable where the
    eigenvalues are distinct (Stan leaves the sign to Eigen's solver).

    Limitation: the derivative involves ``1 / (l_j - l_i)``; it is infinite/undefined
    for repeated eigenvalues (the eigenvectors of a repeated eigenvalue are not
    unique), and inaccurate when eigenvalues are nearly equal.
    """
    v = _eigh("eigenvectors_sym", a)[1]
    k = np.argmax(np.abs(v), axis=-2)[..., None, :]
    s = np.sign(np.take_along_axis(v, k, axis=-2))
    s[s == 0] = 1.0
    return v * s


def _eigenvectors_vjp(g, ans, a):
    # Giles: eigenvalues and eigenvectors, symmetric case (U^-1 = U^T):
    # dV = V (F o (V^T dA V)), F_ij = 1 / (l_j - l_i) for i != j, 0 on the diagonal;
    # hence
    # A_bar = V (F o (V^T V_bar)) V^T, symmetrised (gradient for symmetric dA).
    V = ans
    p = _eig_f(eigenvalues_sym(a)) * matmul(_mT(V), g)
    return _sym(matmul(V, matmul(p, _mT(V))))


def _eig_f(lam):
    """F_ij = 1 / (l_j - l_i) for i != j, 0 on the diagonal (stacks allowed)."""
    sl_ = shape_of(lam)
    n = sl_[-1]
    diff = reshape(lam, sl_[:-1] + (1, n)) - reshape(lam, sl_[:-1] + (n, 1))  # l_j - l_i
    eye = np.eye(n)
    return (1.0 - eye) / (diff + eye)


defvjp(eigenvectors_sym, _eigenvectors_vjp)


def _eigenvectors_jvp(t, ans, a):
    # dV = V (F o (V^T dA V)), for the symmetric part of dA (as the VJP). The sign
    # normalisation is a locally constant column scaling S, and V S (F o S P S) =
    # V (F o P) S, so the rule holds for the normalised V as well.
    V = ans
    p = _sym(matmul(_mT(V), matmul(t, V)))
    return matmul(V, _eig_f(eigenvalues_sym(a)) * p)


defjvp(eigenvectors_sym, _eigenvectors_jvp)


# --------------------------------------------------------------------------------------
# Gaussian-process covariance
# --------------------------------------------------------------------------------------
def _points(fname, x):
    x = _as_float(x)
    if x.ndim == 1:
        return x[:, None]
    if x.ndim == 2:
        return x
    _fail(fname, f"x must be a 1-D array of points or a 2-D (N, D) array, got shape "
                 f"{x.shape}")


@primitive
def gp_exp_quad_cov(x, alpha, rho):
    """Squared-exponential covariance ``K_ij = alpha^2 exp(-|x_i - x_j|^2 / (2 rho^2))``
    of the points ``x`` (a 1-D array of scalars or an ``(N, D)`` array of points);
    differentiable in ``x``, ``alpha`` and ``rho`` (Stan's ``gp_exp_quad_cov``, formerly
    ``cov_exp_quad``).

    >>> import numpy as np, stanlite as sl
    >>> sl.gp_exp_quad_cov(np.array([0.0, 1.0]), 2.0, 1.0).round(4)
    array([[4.    , 2.4261],
           [2.4261, 4.    ]])
    """
    fname = "gp_exp_quad_cov"
    X = _points(fname, x)
    for name, v in (("alpha", alpha), ("rho", rho)):
        if np.ndim(v) != 0:
            _fail(fname, f"{name} must be a scalar, got shape {np.shape(v)}")
        if not float(v) > 0 or not np.isfinite(float(v)):
            _domain(fname, f"{name} must be positive and finite, got {float(v)}")
    if np.isnan(X).any():
        _domain(fname, "x contains NaN")
    d = X[:, None, :] - X[None, :, :]
    d2 = np.sum(d * d, axis=-1)
    return float(alpha) ** 2 * np.exp(-0.5 * d2 / float(rho) ** 2)


def _gp_exp_quad_cov_vjp_all(g, ans, x, alpha, rho):
    # K = alpha^2 E, E = exp(-d2 / (2 rho^2)), d2_ij = |x_i - x_j|^2; with Gk = G o K:
    #   alpha_bar = 2 sum(Gk) / alpha,   rho_bar = sum(Gk o d2) / rho^3,
    #   x_bar_i = -(1/rho^2) sum_j (Gk + Gk^T)_ij (x_i - x_j)
    sx = shape_of(x)
    n = sx[0]
    X = x if len(sx) == 2 else reshape(x, (n, 1))
    dim = shape_of(X)[1]
    gk = g * ans
    diff = reshape(X, (n, 1, dim)) - reshape(X, (1, n, dim))
    d2 = _rsum(diff * diff, axis=2)
    inv_rho2 = 1.0 / (rho * rho)
    alpha_bar = 2.0 * _rsum(gk) / alpha
    rho_bar = _rsum(gk * d2) * inv_rho2 / rho
    gh = gk + _mT(gk)
    x_bar = (matmul(gh, X) - reshape(_rsum(gh, axis=1), (n, 1)) * X) * inv_rho2
    return reshape(x_bar, sx), alpha_bar, rho_bar


defvjp_all(gp_exp_quad_cov, _gp_exp_quad_cov_vjp_all)


def _gp_exp_quad_cov_jvp_all(ts, ans, x, alpha, rho):
    # dK = K (2 dalpha / alpha + d2 drho / rho^3 - (x_i - x_j).(dx_i - dx_j) / rho^2)
    tx, ta, tr = ts
    sx = shape_of(x)
    n = sx[0]
    X = x if len(sx) == 2 else reshape(x, (n, 1))
    dim = shape_of(X)[1]
    diff = reshape(X, (n, 1, dim)) - reshape(X, (1, n, dim))
    out = None
    if ta is not None:
        out = reshape(ta, batch_shape(ta, alpha) + (1, 1)) * (2.0 * ans / alpha)
    if tr is not None:
        d2 = _rsum(diff * diff, axis=2)
        c = reshape(tr, batch_shape(tr, rho) + (1, 1)) * (ans * d2 / (rho * rho * rho))
        out = c if out is None else out + c
    if tx is not None:
        B = batch_shape(tx, x)
        T = reshape(tx, B + (n, dim))
        tdiff = reshape(T, B + (n, 1, dim)) - reshape(T, B + (1, n, dim))
        c = -(ans / (rho * rho)) * _rsum(diff * tdiff, axis=-1)
        out = c if out is None else out + c
    return out


defjvp_all(gp_exp_quad_cov, _gp_exp_quad_cov_jvp_all)
_deflower(gp_exp_quad_cov, _program.gp_exp_quad_rule)

cov_exp_quad = gp_exp_quad_cov


# --------------------------------------------------------------------------------------
# numpy protocol
# --------------------------------------------------------------------------------------
def _last_two(a, axis1, axis2, fname):
    """Move ``axis1``, ``axis2`` of ``a`` to the end (numpy's diagonal/trace axes)."""
    nd = len(shape_of(a))
    a1, a2 = axis1 % nd, axis2 % nd
    if a1 == nd - 2 and a2 == nd - 1:
        return a
    rest = [i for i in range(nd) if i not in (a1, a2)]
    return transpose(a, tuple(rest + [a1, a2]))


def _np_offset(offset, fname):
    if offset != 0:
        raise TypeError(f"numpy.{fname} with offset={offset} is not supported on "
                        "stanlite Vars")


def _np_trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    _np_offset(offset, "trace")
    return trace(_last_two(a, axis1, axis2, "trace"))


def _np_diagonal(a, offset=0, axis1=0, axis2=1):
    _np_offset(offset, "diagonal")
    return diagonal(_last_two(a, axis1, axis2, "diagonal"))


def _np_diag(v, k=0):
    _np_offset(k, "diag")
    nd = len(shape_of(v))
    if nd == 1:
        return diag_matrix(v)
    if nd == 2:
        return diagonal(v)
    raise ValueError("numpy.diag: input must be 1-D or 2-D")


def _np_cholesky(a, upper=False):
    L = cholesky_decompose(a)
    return _mT(L) if upper else L


UFUNCS[np.matmul] = matmul
FUNCTIONS.update({
    np.dot: dot, np.matmul: matmul,
    np.trace: _np_trace, np.diagonal: _np_diagonal, np.diag: _np_diag,
    np.linalg.inv: inverse, np.linalg.solve: mdivide_left, np.linalg.det: determinant,
    np.linalg.cholesky: _np_cholesky,
})


# ======================================================================================
# issue 21: QR and singular value decompositions, matrix_power, sparse (CSR) products,
# more Gaussian-process kernels, numpy's outer/clip/flip/linalg.norm on traced values
# ======================================================================================
def _matrix2(fname, a, name="A"):
    s = shape_of(a)
    if len(s) != 2:
        _fail(fname, f"{name} must be a matrix (2-D), got shape {s}")
    return s


def _nan_check(fname, a):
    if np.isnan(a).any():
        _domain(fname, "A contains NaN")


# --------------------------------------------------------------------------------------
# thin QR:  A = Q R,  Q (m x k) orthonormal columns, R (k x n) upper, k = min(m, n),
# diag(R) >= 0 (Stan's sign convention, which makes the factors unique for full rank).
#
# Only Q is a primitive; R = triu(Q^T A) exactly (its derivative is upper triangular
# too, so the mask drops only rounding). For m >= n (Walter & Lehmann 2018), with R
# invertible, from dA = dQ R + Q dR (Q^T dQ antisymmetric, dR R^-1 upper):
#     JVP:  C = Q^T dA R^-1,  W = tril(C, -1) - tril(C, -1)^T  (= Q^T dQ),
#           dQ = dA R^-1 - Q (C - W)
#     VJP:  A_bar = (Q_bar - Q N) R^-T,   M = Q^T Q_bar,  N = triu(M) + triu(M, 1)^T
#           (the JVP's transpose: C - W = triu(C) + tril(C, -1)^T)
# A wide A (m < n) is [X | Y] with X square: Q = Q(X), so the same rules apply to X.
# --------------------------------------------------------------------------------------
@primitive
def _qr_q(a):
    """Thin Q of a (m x n, m >= n) with diag(R) >= 0."""
    a = _as_float(a)
    _nan_check("qr_thin_Q", a)
    q, r = np.linalg.qr(a)
    s = np.sign(np.diagonal(r)).copy()
    s[s == 0] = 1.0
    return q * s


def _qr_r_of(q, a):
    """R = triu(Q^T A) (exact: Q^T A is upper triangular, up to rounding)."""
    k, n = shape_of(q)[-1], shape_of(a)[-1]
    return np.triu(np.ones((k, n))) * matmul(_mT(q), a)


def _right_solve_rt(b, r):
    """``b R^-T`` for upper-triangular R: (R^-1 b^T)^T = (L^-T b^T)^T with L = R^T."""
    return _mT(_trisolve(_mT(r), _mT(b), True))


def _right_solve_r(b, r):
    """``b R^-1`` for upper-triangular R: (L^-1 b^T)^T with L = R^T."""
    return _mT(_trisolve(_mT(r), _mT(b), False))


def _qr_r_checked(q, a):
    """R for the derivative rules, which solve with it: singular R (A's first k columns
    linearly dependent) is a DomainError, not a silently huge derivative."""
    r = _qr_r_of(q, a)
    guarded(_check_qr_rank, r)
    return r


def _check_qr_rank(r):
    d = np.abs(np.diagonal(np.asarray(r)))
    if d.size and not d.min() > 1e-12 * max(float(np.max(np.abs(r))), 1e-300):
        raise DomainError("qr_thin_Q: the derivative needs the first min(m, n) columns of "
                          "A to be linearly independent, but R is singular (smallest "
                          f"|diagonal| {float(d.min())!r})")


def _qr_q_vjp(g, ans, a):
    q = ans
    r = _qr_r_checked(q, a)
    m = matmul(_mT(q), g)
    k = shape_of(m)[-1]
    n = np.triu(np.ones((k, k))) * m + _mT(np.triu(np.ones((k, k)), 1) * m)
    return _right_solve_rt(g - matmul(q, n), r)


def _qr_q_jvp(t, ans, a):
    q = ans
    r = _qr_r_checked(q, a)
    x = _right_solve_r(t, r)                    # dA R^-1
    c = matmul(_mT(q), x)
    strict = np.tril(np.ones(shape_of(r)[-2:]), -1)
    w = strict * c - _mT(strict * c)
    return x - matmul(q, c - w)


defvjp(_qr_q, _qr_q_vjp)
defjvp(_qr_q, _qr_q_jvp)


def qr_thin_Q(a):
    """The orthonormal factor Q (m x k, k = min(m, n)) of the thin QR decomposition
    ``A = Q R`` (Stan's ``qr_thin_Q``), with the signs that make diag(R) >= 0.
    Differentiable where the first k columns of A are linearly independent (a
    singular R raises ``DomainError`` in the derivative).

    >>> import numpy as np, stanlite as sl
    >>> A = np.array([[3.0, 1.0], [4.0, 2.0], [0.0, 2.0]])
    >>> Q = sl.qr_thin_Q(A)
    >>> Q.shape, np.allclose(Q.T @ Q, np.eye(2)), np.allclose(Q @ sl.qr_thin_R(A), A)
    ((3, 2), True, True)
    """
    m, n = _matrix2("qr_thin_Q", a)
    return _qr_q(a if m >= n else a[:, :m])


def qr_thin_R(a):
    """The upper-trapezoidal factor R (k x n, k = min(m, n)) of the thin QR
    decomposition ``A = Q R`` (Stan's ``qr_thin_R``), diag(R) >= 0; computed as
    ``triu(Q^T A)`` with Q = :func:`qr_thin_Q` (so its derivative is Q's).

    >>> import numpy as np, stanlite as sl
    >>> sl.qr_thin_R(np.array([[3.0, 1.0], [4.0, 2.0]])).round(6) + 0.0
    array([[5. , 2.2],
           [0. , 0.4]])
    """
    _matrix2("qr_thin_R", a)
    return _qr_r_of(qr_thin_Q(a), a)


# --------------------------------------------------------------------------------------
# singular value decomposition:  A = U diag(s) V^T  (thin: U m x k, V n x k,
# k = min(m, n), s descending). Signs: each column of U has its entry of largest
# magnitude positive (V's column flipped with it): deterministic and locally constant.
# Derivatives (Townsend 2016, "Differentiating the singular value decomposition"),
# with F_ij = 1 / (s_j^2 - s_i^2) (i != j), 0 on the diagonal, S = diag(s):
#   s:  ds_i = u_i^T dA v_i;                A_bar = U diag(s_bar) V^T
#   U:  dU = U (F o (dP S + S dP^T)) + (I - U U^T) dA V S^-1,     dP = U^T dA V
#       A_bar = U (F o (U^T U_bar - U_bar^T U)) S V^T + (I - U U^T) U_bar S^-1 V^T
#   V:  dV = V (F o (S dP + dP^T S)) + (I - V V^T) dA^T U S^-1
#       A_bar = U S (F o (V^T V_bar - V_bar^T V)) V^T + U S^-1 V_bar^T (I - V V^T)
# U and V need distinct singular values (and non-zero ones for the (I - U U^T) terms
# of a non-square A): otherwise they are not unique and a DomainError says so.
# --------------------------------------------------------------------------------------
def _svd(fname, a):
    a = _as_float(a)
    _matrix2(fname, a)
    _nan_check(fname, a)
    try:
        u, s, vt = np.linalg.svd(a, full_matrices=False)
    except np.linalg.LinAlgError:
        raise DomainError(f"{fname}: the SVD did not converge") from None
    k = np.argmax(np.abs(u), axis=0)
    sign = np.sign(u[k, np.arange(u.shape[1])])
    sign[sign == 0] = 1.0
    return u * sign, s, vt.T * sign


@primitive
def singular_values(a):
    """The singular values of ``A`` in decreasing order (Stan's ``singular_values``),
    differentiable: d s_i = u_i^T dA v_i (defined where the s_i are distinct; the sum
    of them is differentiable everywhere but at 0).

    >>> import numpy as np, stanlite as sl
    >>> sl.singular_values(np.array([[3.0, 0.0], [0.0, -4.0]]))
    array([4., 3.])
    """
    return _svd("singular_values", a)[1]


def _sv_vjp(g, ans, a):
    U, V = svd_U(a), svd_V(a)
    return matmul(U * reshape(g, (1, -1)), _mT(V))


def _sv_jvp(t, ans, a):
    U, V = svd_U(a), svd_V(a)
    return _rsum(U * matmul(t, V), axis=-2)


defvjp(singular_values, _sv_vjp)
defjvp(singular_values, _sv_jvp)


@primitive
def svd_U(a):
    """The left singular vectors U (m x k, k = min(m, n)) of the thin SVD
    ``A = U diag(s) V^T`` (Stan's ``svd_U``), columns in the order of
    :func:`singular_values`, each with its largest-magnitude entry positive.
    Differentiable where the singular values are distinct (and non-zero when A is
    not square); elsewhere U is not unique and the derivative raises ``DomainError``.

    >>> import numpy as np, stanlite as sl
    >>> A = np.array([[2.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    >>> sl.svd_U(A)
    array([[1., 0.],
           [0., 1.],
           [0., 0.]])
    """
    return _svd("svd_U", a)[0]


@primitive
def svd_V(a):
    """The right singular vectors V (n x k, k = min(m, n)) of the thin SVD
    ``A = U diag(s) V^T`` (Stan's ``svd_V``), signed to match :func:`svd_U`.
    Differentiable where the singular values are distinct (and non-zero when A is
    not square); elsewhere the derivative raises ``DomainError``.

    >>> import numpy as np, stanlite as sl
    >>> A = np.array([[0.0, 2.0], [1.0, 0.0]])
    >>> sl.svd_V(A)
    array([[0., 1.],
           [1., 0.]])
    """
    return _svd("svd_V", a)[2]


def _check_svd_derivative(fname, s, needs_positive):
    sv = np.asarray(s, dtype=float)
    scale = float(np.max(sv)) if sv.size else 0.0
    gaps = np.abs(np.diff(sv))
    if sv.size > 1 and not np.all(gaps > 1e-10 * scale):
        i = int(np.argmin(gaps))
        raise DomainError(
            f"{fname}: the derivative needs distinct singular values, but singular "
            f"values {i} and {i + 1} are {sv[i]!r} and {sv[i + 1]!r} (the singular "
            "vectors of a repeated singular value are not unique)")
    if needs_positive and sv.size and not sv[-1] > 1e-12 * scale:
        raise DomainError(f"{fname}: the derivative of the singular vectors of a "
                          f"non-square matrix needs non-zero singular values, but the "
                          f"smallest is {sv[-1]!r}")


def _svd_parts(fname, a, which):
    """(U, s, V, F) for the rules of svd_U/svd_V, after the distinctness check."""
    m, n = shape_of(a)
    s = singular_values(a)
    needs_positive = (m > n) if which == "U" else (n > m)
    guarded(lambda v: _check_svd_derivative(fname, v, needs_positive), s)
    k = shape_of(s)[-1]
    s2 = s * s
    diff = reshape(s2, (1, k)) - reshape(s2, (k, 1))          # s_j^2 - s_i^2
    eye = np.eye(k)
    F = (1.0 - eye) / (diff + eye)
    return svd_U(a), s, svd_V(a), F, m > k, n > k


def _svd_u_vjp(g, ans, a):
    U, s, V, F, tall, _ = _svd_parts("svd_U", a, "U")
    ut_g = matmul(_mT(U), g)
    inner = (F * (ut_g - _mT(ut_g))) * reshape(s, (1, -1))        # (F o (.)) S
    out = matmul(matmul(U, inner), _mT(V))
    if tall:
        proj = g - matmul(U, ut_g)                                # (I - U U^T) U_bar
        out = out + matmul(proj / reshape(s, (1, -1)), _mT(V))
    return out


def _svd_v_vjp(g, ans, a):
    U, s, V, F, _, wide = _svd_parts("svd_V", a, "V")
    vt_g = matmul(_mT(V), g)
    inner = reshape(s, (-1, 1)) * (F * (vt_g - _mT(vt_g)))        # S (F o (.))
    out = matmul(matmul(U, inner), _mT(V))
    if wide:
        proj = g - matmul(V, vt_g)                                # (I - V V^T) V_bar
        out = out + matmul(U / reshape(s, (1, -1)), _mT(proj))
    return out


def _svd_u_jvp(t, ans, a):
    U, s, V, F, tall, _ = _svd_parts("svd_U", a, "U")
    tv = matmul(t, V)                                              # dA V
    dp = matmul(_mT(U), tv)
    srow = reshape(s, (1, -1))
    scol = reshape(s, (-1, 1))
    out = matmul(U, F * (dp * srow + scol * _mT(dp)))
    if tall:
        out = out + (tv - matmul(U, dp)) / srow
    return out


def _svd_v_jvp(t, ans, a):
    U, s, V, F, _, wide = _svd_parts("svd_V", a, "V")
    tu = matmul(_mT(t), U)                                         # dA^T U
    dp = matmul(_mT(tu), V)                                        # U^T dA V
    srow = reshape(s, (1, -1))
    scol = reshape(s, (-1, 1))
    out = matmul(V, F * (scol * dp + _mT(dp) * srow))
    if wide:
        out = out + (tu - matmul(V, _mT(dp))) / srow
    return out


defvjp(svd_U, _svd_u_vjp)
defjvp(svd_U, _svd_u_jvp)
defvjp(svd_V, _svd_v_vjp)
defjvp(svd_V, _svd_v_jvp)


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


# --------------------------------------------------------------------------------------
# compressed sparse row (CSR) matrix times a dense vector, Stan's 1-based layout
# --------------------------------------------------------------------------------------
class _CSR:
    """The fixed pattern of an m x n sparse matrix: the row and column of each stored
    value (0-based); ``T`` is the transposed pattern (rows and columns swapped)."""

    __slots__ = ("m", "n", "rows", "cols", "_t")

    def __init__(self, m, n, rows, cols):
        self.m, self.n, self.rows, self.cols = m, n, rows, cols
        self._t = None

    @property
    def T(self):
        if self._t is None:
            self._t = _CSR(self.n, self.m, self.cols, self.rows)
            self._t._t = self
        return self._t


@primitive
def _csr_mv(p, w, b):
    """y_i = sum over stored (i, j, w) of w b_j; leading batch axes of w and b (forward
    mode) broadcast."""
    w = _as_float(w)
    b = _as_float(b)
    prod = w * b[..., p.cols]
    if prod.ndim == 1:
        return np.bincount(p.rows, weights=prod, minlength=p.m)
    batch = prod.shape[:-1]
    k = int(np.prod(batch, dtype=np.int64))
    idx = (p.rows[None, :] + p.m * np.arange(k)[:, None]).ravel()
    return np.bincount(idx, weights=prod.reshape(-1), minlength=k * p.m).reshape(
        batch + (p.m,))


def _csr_vjp_w(g, ans, p, w, b):
    # d y_i / d w_k = b_{col k} for k in row i
    return g[p.rows] * b[p.cols]


def _csr_vjp_b(g, ans, p, w, b):
    # b_bar = A^T g: the transposed pattern with the same values
    return _csr_mv(p.T, w, g)


defvjp(_csr_mv, None, _csr_vjp_w, _csr_vjp_b)
defjvp(_csr_mv, None, lambda t, ans, p, w, b: _csr_mv(p, t, b),
       lambda t, ans, p, w, b: _csr_mv(p, w, t))


def _int_vector(fname, name, v):
    a = np.asarray(v)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"
                       and not np.all(np.asarray(a, dtype=float) % 1 == 0)):
        _fail(fname, f"{name} must be a 1-D array of integers, got {v!r}")
    return a.astype(np.int64)


def csr_matrix_times_vector(m, n, w, v, u, b):
    """The product of the m x n sparse matrix stored in compressed sparse row form
    (Stan's layout, 1-based) with the dense vector b (Stan's
    ``csr_matrix_times_vector``): ``w`` the non-zero values row by row, ``v`` their
    column indices (1..n), ``u`` the index in w of each row's first value (size
    m + 1, ``u[m]`` one past the last). Differentiable in ``w`` and ``b``.

    >>> import numpy as np, stanlite as sl
    >>> # [[1, 0, 2], [0, 3, 0]] @ [1, 1, 1]
    >>> sl.csr_matrix_times_vector(2, 3, np.array([1.0, 2.0, 3.0]), [1, 3, 2], [1, 3, 4],
    ...                            np.ones(3))
    array([3., 3.])
    """
    fname = "csr_matrix_times_vector"
    m, n = int(m), int(n)
    if m < 1 or n < 1:
        _fail(fname, f"m and n must be positive, got m = {m}, n = {n}")
    vv = _int_vector(fname, "v", v)
    uu = _int_vector(fname, "u", u)
    w = w if isinstance(w, Box) else _as_float(w)       # lists too
    b = b if isinstance(b, Box) else _as_float(b)
    sw, sb = shape_of(w), shape_of(b)
    if len(sw) != 1:
        _fail(fname, f"w must be a vector, got shape {sw}")
    if sb != (n,):
        _fail(fname, f"b must be a vector of size n = {n}, got shape {sb}")
    if uu.size != m + 1:
        _fail(fname, f"u must have m + 1 = {m + 1} elements, got {uu.size}")
    if vv.size != sw[0]:
        _fail(fname, f"v and w must have the same size, got {vv.size} and {sw[0]}")
    if uu[0] != 1 or np.any(np.diff(uu) < 0) or uu[-1] - 1 != sw[0]:
        _fail(fname, f"u must be non-decreasing from 1 to size(w) + 1 = {sw[0] + 1}, got "
                     f"{uu.tolist()}")
    if vv.size and (vv.min() < 1 or vv.max() > n):
        _fail(fname, f"v (column indices) must be in 1..n = 1..{n}, got {vv.tolist()}")
    rows = np.repeat(np.arange(m), np.diff(uu))
    return _csr_mv(_CSR(m, n, rows, vv - 1), w, b)


def csr_extract(a):
    """``(w, v, u)`` of a dense matrix in Stan's CSR layout (1-based; see
    :func:`csr_matrix_times_vector`), for data.

    >>> import numpy as np, stanlite as sl
    >>> sl.csr_extract(np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]))
    (array([1., 2., 3.]), array([1, 3, 2]), array([1, 3, 4]))
    """
    a = _as_float(a)
    if a.ndim != 2:
        _fail("csr_extract", f"a must be a matrix, got shape {a.shape}")
    r, c = np.nonzero(a)
    u = np.concatenate([[0], np.cumsum(np.bincount(r, minlength=a.shape[0]))]) + 1
    return a[r, c], c + 1, u


# --------------------------------------------------------------------------------------
# more Gaussian-process kernels: functions of the distance r = |x_i - x'_j| / l
# --------------------------------------------------------------------------------------
# The distance is one primitive whose derivative is the unit vector (x_i - x'_j) / d_ij
# and 0 where the points coincide (d = 0: a subgradient; every kernel here is flat
# there or the pair is the diagonal, whose value is sigma^2 whatever x is). The
# kernels are compositions of it with elementwise functions, so they have every
# derivative in x, sigma, l and p.
@primitive
def _distance(x1, x2):
    """d_ij = |x1_i - x2_j| for point sets (N, D) and (M, D)."""
    d = _as_float(x1)[:, None, :] - _as_float(x2)[None, :, :]
    return np.sqrt(np.sum(d * d, axis=-1))


def _unit_weights(g, ans):
    """g_ij / d_ij, and 0 where d_ij = 0."""
    zero = guarded(lambda d: np.asarray(d) == 0.0, ans)
    return where(zero, 0.0, g / where(zero, 1.0, ans))


def _distance_vjp_x1(g, ans, x1, x2):
    w = _unit_weights(g, ans)                                     # (N, M)
    return reshape(_rsum(w, axis=1), (-1, 1)) * x1 - matmul(w, x2)


def _distance_vjp_x2(g, ans, x1, x2):
    w = _unit_weights(g, ans)
    return reshape(_rsum(w, axis=0), (-1, 1)) * x2 - matmul(_mT(w), x1)


def _distance_jvp(t1, t2, ans, x1, x2):
    # dd_ij = (x1_i - x2_j) . (dx1_i - dx2_j) / d_ij (0 where d = 0); batch axes B lead
    n, dim = shape_of(x1)
    mm = shape_of(x2)[0]
    diff = reshape(x1, (n, 1, dim)) - reshape(x2, (1, mm, dim))
    td = None
    if t1 is not None:
        B = batch_shape(t1, x1)
        td = reshape(t1, B + (n, 1, dim))
    if t2 is not None:
        B = batch_shape(t2, x2)
        c = -reshape(t2, B + (1, mm, dim))
        td = c if td is None else td + c
    return _unit_weights(_rsum(diff * td, axis=-1), ans)


defvjp(_distance, _distance_vjp_x1, _distance_vjp_x2)
defjvp_all(_distance, lambda ts, ans, x1, x2: _distance_jvp(ts[0], ts[1], ans, x1, x2))


def _gp_points(fname, x, name="x"):
    """Points as an (N, D) array: a 1-D array of scalars, an (N, D) array or a list of
    vectors (Stan's array[] real / array[] vector)."""
    if isinstance(x, (list, tuple)):
        from .structure import stack
        x = stack(list(x)) if x else np.zeros((0, 1))
    if not isinstance(x, Box):
        x = _as_float(x)
        if np.isnan(x).any():
            _domain(fname, f"{name} contains NaN")
    s = shape_of(x)
    if len(s) == 1:
        return reshape(x, (s[0], 1))
    if len(s) == 2:
        return x
    _fail(fname, f"{name} must be a 1-D array of points or a 2-D (N, D) array, got shape "
                 f"{s}")


def _gp_positive(fname, name, v, vector_ok=False):
    s = shape_of(v)
    if s != () and not (vector_ok and len(s) == 1):
        _fail(fname, f"{name} must be a scalar{' or a vector' if vector_ok else ''}, got "
                     f"shape {s}")
    bad = guarded(lambda a: not bool(np.all((np.asarray(a) > 0) & np.isfinite(a))), v)
    if bad:
        _domain(fname, f"{name} must be positive and finite, got {_plain_value(v)!r}")


def _plain_value(v):
    while isinstance(v, Box):
        v = v.value
    return v.tolist() if isinstance(v, np.ndarray) else float(v)


def _gp_distance(fname, args, nparams):
    """Parse ``(x, *params)`` or ``(x1, x2, *params)``: the scaled distances
    r = |x1_i - x2_j| / l (l a scalar, or per dimension), and the params."""
    if len(args) == nparams + 1:
        x1 = x2 = _gp_points(fname, args[0])
    elif len(args) == nparams + 2:
        x1 = _gp_points(fname, args[0], "x1")
        x2 = _gp_points(fname, args[1], "x2")
        if shape_of(x1)[1] != shape_of(x2)[1]:
            _fail(fname, f"x1 and x2 must have points of the same dimension, got "
                         f"{shape_of(x1)[1]} and {shape_of(x2)[1]}")
    else:
        raise TypeError(f"{fname} takes (x, {_GP_PARAMS[nparams]}) or (x1, x2, "
                        f"{_GP_PARAMS[nparams]}), got {len(args)} arguments")
    params = args[-nparams:]
    return x1, x2, params


_GP_PARAMS = {2: "sigma, length_scale", 3: "sigma, length_scale, period"}


def _scaled_distance(fname, x1, x2, sigma, ls):
    _gp_positive(fname, "sigma", sigma)
    _gp_positive(fname, "length_scale", ls, vector_ok=True)
    sl_ = shape_of(ls)
    if sl_ == ():
        return _distance(x1, x2) / ls
    if sl_[0] != shape_of(x1)[1]:
        _fail(fname, f"length_scale has {sl_[0]} elements but the points have "
                     f"{shape_of(x1)[1]} dimensions")
    same = x1 is x2
    x1 = x1 / reshape(ls, (1, -1))
    return _distance(x1, x1 if same else x2 / reshape(ls, (1, -1)))


def gp_exponential_cov(*args):
    """Exponential (Matern 1/2, Ornstein-Uhlenbeck) covariance
    ``K_ij = sigma^2 exp(-|x_i - x'_j| / l)`` (Stan's ``gp_exponential_cov``).

    Called as ``(x, sigma, length_scale)`` (a covariance matrix of the points x) or
    ``(x1, x2, sigma, length_scale)`` (the cross-covariance); points are a 1-D array
    of scalars, an (N, D) array or a list of vectors; ``length_scale`` a scalar or
    one per dimension (ARD). Differentiable in everything; at coinciding points the
    derivative in x is taken as 0 (the kernel is not differentiable there).

    >>> import numpy as np, stanlite as sl
    >>> sl.gp_exponential_cov(np.array([0.0, 1.0]), 2.0, 0.5).round(4)
    array([[4.    , 0.5413],
           [0.5413, 4.    ]])
    """
    x1, x2, (sigma, ls) = _gp_distance("gp_exponential_cov", args, 2)
    r = _scaled_distance("gp_exponential_cov", x1, x2, sigma, ls)
    return sigma * sigma * exp(-r)


_SQRT3 = float(np.sqrt(3.0))
_SQRT5 = float(np.sqrt(5.0))


def gp_matern32_cov(*args):
    """Matern 3/2 covariance ``K_ij = sigma^2 (1 + sqrt(3) r) exp(-sqrt(3) r)``,
    r = |x_i - x'_j| / l (Stan's ``gp_matern32_cov``). Arguments as
    :func:`gp_exponential_cov`: ``(x, sigma, length_scale)`` or
    ``(x1, x2, sigma, length_scale)``.

    >>> import numpy as np, stanlite as sl
    >>> sl.gp_matern32_cov(np.array([0.0, 1.0]), 1.0, 1.0).round(4)
    array([[1.    , 0.4834],
           [0.4834, 1.    ]])
    """
    x1, x2, (sigma, ls) = _gp_distance("gp_matern32_cov", args, 2)
    r = _SQRT3 * _scaled_distance("gp_matern32_cov", x1, x2, sigma, ls)
    return sigma * sigma * (1.0 + r) * exp(-r)


def gp_matern52_cov(*args):
    """Matern 5/2 covariance ``K_ij = sigma^2 (1 + sqrt(5) r + 5 r^2 / 3)
    exp(-sqrt(5) r)``, r = |x_i - x'_j| / l (Stan's ``gp_matern52_cov``). Arguments
    as :func:`gp_exponential_cov`.

    >>> import numpy as np, stanlite as sl
    >>> sl.gp_matern52_cov(np.array([0.0, 1.0]), 1.0, 1.0).round(3)
    array([[1.   , 0.524],
           [0.524, 1.   ]])
    """
    x1, x2, (sigma, ls) = _gp_distance("gp_matern52_cov", args, 2)
    r = _SQRT5 * _scaled_distance("gp_matern52_cov", x1, x2, sigma, ls)
    return sigma * sigma * (1.0 + r + r * r / 3.0) * exp(-r)


def gp_periodic_cov(*args):
    """Periodic covariance ``K_ij = sigma^2 exp(-2 sin^2(pi |x_i - x'_j| / p) / l^2)``
    (Stan's ``gp_periodic_cov``), called as ``(x, sigma, length_scale, period)`` or
    ``(x1, x2, sigma, length_scale, period)``; all scalars positive.

    >>> import numpy as np, stanlite as sl
    >>> sl.gp_periodic_cov(np.array([0.0, 0.5, 1.0]), 1.0, 1.0, 1.0).round(4)[0]
    array([1.    , 0.1353, 1.    ])
    """
    fname = "gp_periodic_cov"
    x1, x2, (sigma, ls, period) = _gp_distance(fname, args, 3)
    _gp_positive(fname, "sigma", sigma)
    _gp_positive(fname, "length_scale", ls)
    _gp_positive(fname, "period", period)
    s = sin(np.pi * _distance(x1, x2) / period)
    return sigma * sigma * exp(-2.0 * s * s / (ls * ls))


__all__ += ["qr_thin_Q", "qr_thin_R", "singular_values", "svd_U", "svd_V",
            "matrix_power", "csr_matrix_times_vector", "csr_extract", "gp_exponential_cov",
            "gp_matern32_cov", "gp_matern52_cov", "gp_periodic_cov", "norm1", "norm2"]


# --------------------------------------------------------------------------------------
# norms, and numpy's outer / clip / flip / linalg.norm on traced values
# --------------------------------------------------------------------------------------
def norm1(x):
    """The L1 norm ``sum |x_i|`` of a vector (Stan's ``norm1``; derivative sign(x_i),
    0 at 0).

    >>> import numpy as np, stanlite as sl
    >>> float(sl.norm1(np.array([3.0, -4.0])))
    7.0
    """
    return _rsum(fabs(x))


def norm2(x):
    """The Euclidean norm ``sqrt(sum x_i^2)`` of a vector (Stan's ``norm2``; its
    gradient x / |x| is undefined at 0).

    >>> import numpy as np, stanlite as sl
    >>> float(sl.norm2(np.array([3.0, -4.0])))
    5.0
    """
    return sqrt(_rsum(x * x))


def _np_outer(a, b, out=None):
    from .structure import flatten
    if out is not None:
        raise TypeError("numpy.outer: out= is not supported on stanlite traced values")
    return reshape(flatten(a), (-1, 1)) * reshape(flatten(b), (1, -1))


def _np_clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None, **kw):
    # derivative 1 inside the interval, 0 outside (to the bound, if it is traced);
    # at a bound, the value's side (numpy's clip returns the bound there).
    # numpy >= 2.1 also spells the bounds min=/max=
    if out is not None or kw:
        raise TypeError("numpy.clip: only (a, a_min, a_max) are supported on stanlite "
                        "traced values")
    a_min = min if a_min is None else a_min
    a_max = max if a_max is None else a_max
    if a_min is None and a_max is None:
        raise ValueError("numpy.clip: one of a_min, a_max must be given")
    r = a
    if a_min is not None:
        r = where(guarded(lambda x, lo: np.asarray(x) < lo, r, a_min), a_min, r)
    if a_max is not None:
        r = where(guarded(lambda x, hi: np.asarray(x) > hi, r, a_max), a_max, r)
    return r


def _np_flip(m, axis=None):
    nd = len(shape_of(m))
    axes = range(nd) if axis is None else (
        (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis))
    axes = {int(a) % nd for a in axes}
    idx = tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(nd))
    return m[idx]


def _np_norm(x, ord=None, axis=None, keepdims=False):
    nd = len(shape_of(x))
    if axis is None and (ord is None or ord == "fro") and nd >= 1:
        r = sqrt(_rsum(x * x))
        return reshape(r, (1,) * nd) if keepdims else r
    if axis is None:
        axis = tuple(range(nd)) if nd <= 2 else None
    if isinstance(axis, (int, np.integer)) or (isinstance(axis, tuple) and len(axis) == 1):
        ax = axis if isinstance(axis, (int, np.integer)) else axis[0]
        if ord is None or ord == 2:
            return sqrt(_rsum(x * x, axis=ax, keepdims=keepdims))
        if ord == 1:
            return _rsum(fabs(x), axis=ax, keepdims=keepdims)
        if ord == np.inf:
            from .reductions import max as _rmax
            return _rmax(fabs(x), axis=ax, keepdims=keepdims)
        if ord == -np.inf:
            from .reductions import min as _rmin
            return _rmin(fabs(x), axis=ax, keepdims=keepdims)
        if isinstance(ord, (int, float)) and ord > 0:
            return _rsum(fabs(x) ** ord, axis=ax, keepdims=keepdims) ** (1.0 / ord)
    elif nd == 2 and not keepdims and tuple(int(a) % 2 for a in axis) == (0, 1):
        if ord == "nuc":
            return _rsum(singular_values(x))
        if ord == 2:
            return singular_values(x)[0]
        if ord in (1, -1, np.inf, -np.inf):
            from .reductions import max as _rmax, min as _rmin
            s = _rsum(fabs(x), axis=0 if ord in (1, -1) else 1)
            return _rmax(s) if ord > 0 else _rmin(s)
    raise TypeError(f"numpy.linalg.norm(ord={ord!r}, axis={axis!r}, keepdims={keepdims}) "
                    "is not supported on stanlite traced values")


def _np_matrix_power(a, n):
    return matrix_power(a, n)


# np.linalg.qr/svd of a traced matrix give stanlite's factors, whose column signs
# (diag(R) >= 0; U's largest entries positive) may differ from numpy's on plain arrays
def _np_qr(a, mode="reduced"):
    if mode != "reduced":
        raise TypeError(f"numpy.linalg.qr(mode={mode!r}) is not supported on stanlite "
                        "traced values (only 'reduced': sl.qr_thin_Q, sl.qr_thin_R)")
    q = qr_thin_Q(a)
    return q, _qr_r_of(q, a)


def _np_svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    if not compute_uv:
        return singular_values(a)
    m, n = _matrix2("svd", a)
    if full_matrices and m != n:
        raise TypeError("numpy.linalg.svd of a traced non-square matrix needs "
                        "full_matrices=False (the thin SVD: sl.svd_U, sl.svd_V)")
    return svd_U(a), singular_values(a), _mT(svd_V(a))


FUNCTIONS.update({
    np.outer: _np_outer, np.clip: _np_clip, np.flip: _np_flip,
    np.linalg.norm: _np_norm, np.linalg.matrix_power: _np_matrix_power,
    np.linalg.qr: _np_qr, np.linalg.svd: _np_svd,
    np.fliplr: lambda m: _np_flip(m, 1), np.flipud: lambda m: _np_flip(m, 0),
})
