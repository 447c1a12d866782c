"""The compiled kernels of :mod:`.ode_compiled`: an ODE right-hand side's program run
on ``x = (t, y, p)`` assembled inside the call (numba, ``cache=True``; imported on the
first compiled right-hand side, so ``import stanlite`` does not import numba)."""

from ..autodiff.vm import kernel as _k
from ..autodiff.vm.kernel import finite_outputs as _finite_outputs, load_point as _load
from ..autodiff.vm.opcodes import OK

__all__ = ["rhs_value", "rhs_jacobian", "rhs_vjp", "rhs_tangent"]

_jit = _k._jit
_forward = _k.forward
_rows = _k.jacobian_rows
_tangent_rows = _k.tangent_rows
_vjp_rows = _k.vjp_rows


# ---- kernels: x = (t, y, p) assembled inside the compiled call ----------------------
@_jit
def rhs_value(code, aux, V, out, n, t, y, p, f):
    _load(V, t, y, n, p)
    st = _forward(code, aux, V)
    if st != OK:
        return st
    return _finite_outputs(V, out, n, f)


@_jit
def rhs_jacobian(code, aux, V, A, dim, out, nvar, n, t, y, p, f, J):
    _load(V, t, y, n, p)
    st = _forward(code, aux, V)
    if st != OK:
        return st
    return _rows(code, aux, V, A, dim, out, nvar, n, f, J)


@_jit
def rhs_vjp(code, aux, V, A, dim, out, nvar, n, t, y, p, w, f, g):
    _load(V, t, y, n, p)
    st = _forward(code, aux, V)
    if st != OK:
        return st
    return _vjp_rows(code, aux, V, A, dim, out, nvar, n, w, f, g)


@_jit
def rhs_tangent(code, aux, V, A, dim, out, nvar, n, t, z, p, ptr, idx, val, k, J, res):
    """``res = [f, V_b J_y^T + D_b J_p^T for b < k]`` with ``y = z[:n]``, ``V_b =
    z[n + b n : n + (b + 1) n]`` and the directions ``D`` of ``p`` (k x P) by rows in
    compressed form (``D[b, idx[q]] = val[q]`` for ``ptr[b] <= q < ptr[b + 1]``: a
    sensitivity system's are unit vectors, one per parameter)."""
    _load(V, t, z, n, p)
    st = _forward(code, aux, V)
    if st != OK:
        return st
    st = _rows(code, aux, V, A, dim, out, nvar, n, res, J)
    if st != OK:
        return st
    _tangent_rows(J, z, n, k, ptr, idx, val, res)
    return OK


# these kernels carry the interpreter's machine code in their numba cache, which numba
# keys on this file alone: drop it when the interpreter's source changes
_k.drop_stale_cache([rhs_value, rhs_jacobian, rhs_vjp, rhs_tangent], "ode_kernels")
