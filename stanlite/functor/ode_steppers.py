"""ODE integrators in numba over a compiled right-hand side: a whole solve per call.

:mod:`.ode_integrate` steps scipy's RK45 from Python, and each of its ~7 right-hand
side evaluations per step crosses from scipy into a compiled kernel and back (~1,400
crossings per solve of a small PK model). Here the steps themselves are compiled: one
call integrates from ``t0`` to ``ts[-1]``, evaluating the program of the user's ``f``
(the compiled tape interpreter, :mod:`stanlite.autodiff.vm.kernel`) in place.

The method is scipy's RK45 step for step, so that the two routes agree to rounding:
the Dormand-Prince 5(4) tableau, the initial step of Hairer, Norsett & Wanner (*Solving
ODEs I*, sec. II.4), the error norm (RMS of the embedded error over ``atol + rtol
max(|y|, |y_new|)``), the step factor ``0.9 err^(-1/5)`` within ``[0.2, 10]`` (no
growth right after a rejection), the quartic dense output at the output times, the
last step cut to land on ``ts[-1]``. Around it the rules of :func:`.ode_integrate.
integrate`: at most ``max_num_steps`` accepted steps between two output times, a
state that stops being finite is a failure, and Hairer's stiffness test (the last two
stages, both at ``t + h``) stops a hopeless solve early.

The right-hand side is called through a function pointer of one signature
(``RHS_SIG``): the interpreter's adapter :func:`interp` over a bundle of programs, or
their generated code (:mod:`.ode_codegen`), so that one compiled stepper serves
both; the pointer crosses from Python as two integers (:func:`address`).

With ``k > 0`` directions the state is the coupled system of Stan's forward
sensitivities, ``z = [y, s_1..s_k]`` with ``s_b' = J_y s_b + J_p d_b`` (``d_b`` the
directions of the parameters in compressed rows): one forward pass and ``n`` reverse
sweeps of the program per stage give ``f`` and ``J``, then the contraction. Every
component takes part in the error control, as in Stan.

:func:`bdf` is scipy's BDF likewise (variable order 1-5 in the quasi-constant step
size form with the NDF modification, Shampine & Reichelt 1997; Newton iterations with
a Jacobian refreshed only when they fail to converge; dense output at the output
times). Its Newton matrix for the coupled system is ``I (x) (I - c J_y)``, CVODES'
simultaneous-corrector approximation that scipy's route uses too; here only the
``n x n`` block is factorised and the blocks are solved one by one.

The kernels return a status: ``OK``; a status of the program (a failed guard, a value
outside a domain: the caller redoes the solve on the route that handles those); or
one of the solver's failures below, described by ``info``.
"""

import math

import numpy as np

from ..autodiff.vm import kernel as _k
# (_inline: the steppers' pieces are inlined into them, see "pieces of the steppers")
from ..autodiff.vm.kernel import (finite_outputs as _finite_outputs,
                                  inline_jit as _inline, load_point as _load)
from ..autodiff.vm.opcodes import OK

__all__ = ["dopri", "bdf", "C", "A", "B", "E", "P", "BAD_START", "TOO_SMALL",
           "NOT_FINITE", "MAX_STEPS", "STIFF"]

_jit = _k._jit
_forward = _k.forward
_rows = _k.jacobian_rows
_tangent_rows = _k.tangent_rows

# the solver's failures (program statuses are DOMAIN = -1 or a guard's 1 + index)
BAD_START = -10         # f(t0, y0) or the first step size is not finite
TOO_SMALL = -11         # the step size fell below 10 ulps of t
NOT_FINITE = -12        # an accepted state is not finite
MAX_STEPS = -13         # max_num_steps accepted steps without reaching an output time
STIFF = -14             # the stiffness test: the budget cannot reach the next output

# info slots
I_TOTAL, I_T, I_T_LAST, I_NEXT, I_HLAMB, I_NEED, I_H, I_NFEV = range(8)
INFO_SIZE = 8

# Dormand & Prince (1980), RK5(4)7M; dense output: Shampine (1986), as scipy's RK45
C = np.array([0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0])
A = np.array([
    [0.0, 0.0, 0.0, 0.0, 0.0],
    [1 / 5, 0.0, 0.0, 0.0, 0.0],
    [3 / 40, 9 / 40, 0.0, 0.0, 0.0],
    [44 / 45, -56 / 15, 32 / 9, 0.0, 0.0],
    [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729, 0.0],
    [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656]])
B = np.array([35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84])
E = np.array([-71 / 57600, 0.0, 71 / 16695, -71 / 1920, 17253 / 339200, -22 / 525,
              1 / 40])
P = np.array([
    [1.0, -8048581381 / 2820520608, 8663915743 / 2820520608,
     -12715105075 / 11282082432],
    [0.0, 0.0, 0.0, 0.0],
    [0.0, 131558114200 / 32700410799, -68118460800 / 10900136933,
     87487479700 / 32700410799],
    [0.0, -1754552775 / 470086768, 14199869525 / 1410260304,
     -10690763975 / 1880347072],
    [0.0, 127303824393 / 49829197408, -318862633887 / 49829197408,
     701980252875 / 199316789632],
    [0.0, -282668133 / 205662961, 2019193451 / 616988883, -1453857185 / 822651844],
    [0.0, 40617522 / 29380423, -110615467 / 29380423, 69997945 / 29380423]])

_SAFETY = 0.9
_MIN_FACTOR = 0.2
_MAX_FACTOR = 10.0
_EXPONENT = -1.0 / 5.0


@_jit
def _load_run(codes, coff, auxs, aoff, Vs, voff, j, n, t, z, p):
    """Load ``x = (t, z[:n], p)`` into program ``j``'s values and run its forward pass
    (programs are slices of the concatenated tables: offsets ``coff``, ``aoff``,
    ``voff``; the adjoint buffers share the value buffers' offsets); -> status."""
    V = Vs[voff[j]:voff[j + 1]]
    _load(V, t, z, n, p)
    return _forward(codes[coff[j]:coff[j + 1]], auxs[aoff[j]:aoff[j + 1]], V)


@_jit
def _other(codes, coff, auxs, aoff, Vs, voff, n, t, z, p, cur, where, st):
    """After program ``cur[0]`` failed a guard (status ``st``): the forward pass of the
    next of the ``cur[1]`` programs whose guards hold, which becomes ``cur[0]``; ->
    status. When none holds, a failed guard's status, and ``where = (t, z[:n])`` says
    where (the caller records that path there)."""
    nprog = cur[1]
    for q in range(1, nprog):
        j = (cur[0] + q) % nprog
        st = _load_run(codes, coff, auxs, aoff, Vs, voff, j, n, t, z, p)
        if st <= 0:
            if st == OK:
                cur[0] = j
            return st
    where[0] = t
    for i in range(n):
        where[1 + i] = z[i]
    return st


@_jit
def _interp(codes, coff, auxs, aoff, Vs, voff, As, outs, nvars, cur, where, dim, n, k, t,
            z, p, ptr, idx, val, J, res):
    """``res = [f, V_b J_y^T + D_b J_p^T for b < k]`` at ``(t, z[:n], p)`` (``k = 0``:
    ``f`` alone, one forward pass; ``k = -1``: ``f`` and the Jacobian rows ``J``)
    by the interpreter; -> the program's status."""
    # (the program that ran last, here: a call returning the program costs ~1 us)
    j = cur[0]
    V = Vs[voff[j]:voff[j + 1]]
    _load(V, t, z, n, p)
    st = _forward(codes[coff[j]:coff[j + 1]], auxs[aoff[j]:aoff[j + 1]], V)
    if st > 0:
        st = _other(codes, coff, auxs, aoff, Vs, voff, n, t, z, p, cur, where, st)
        j = cur[0]
        V = Vs[voff[j]:voff[j + 1]]
    if st != OK:
        return st
    out = outs[j]
    if k == 0:
        return _finite_outputs(V, out, n, res)
    st = _rows(codes[coff[j]:coff[j + 1]], auxs[aoff[j]:aoff[j + 1]], V,
               As[voff[j]:voff[j + 1]], dim, out, nvars[j], n, res, J)
    if st != OK or k < 0:
        return st
    _tangent_rows(J, z, n, k, ptr, idx, val, res)
    return OK


# ---- the right-hand side as the steppers call it -------------------------------------
# One signature for every right-hand side, called through a function pointer: the
# interpreter's adapter below, or a program's generated code (.ode_codegen). ``ci`` /
# ``cf``: the adapter's integer and float tables (unused by generated code), ``cur``:
# the program that ran last and the number of programs, ``where``: the point where no
# program's guards held. ``k``: 0 ``f`` alone, -1 ``f`` and ``J``, > 0 the tangents.
if _k.njit is not None:
    from numba import types as _nt
    from numba.core import cgutils as _cg
    from numba.extending import intrinsic as _intrinsic
    _f1, _i1, _f2 = _nt.float64[::1], _nt.int64[::1], _nt.float64[:, ::1]
    _i8, _f8 = _nt.int64, _nt.float64
    RHS_SIG = _i8(_f8, _f1, _f1, _i8, _i1, _i1, _f1, _f2, _f1, _i1, _f1, _i1, _f1)
    RHS_TYPE = _nt.FunctionType(RHS_SIG)
    #: the decorator of a function the steppers call (generated code uses it too)
    rhs_jit = _k.njit(RHS_SIG, cache=True, nogil=True, error_model="numpy")

    @_intrinsic
    def _as_rhs(typingctx, c_addr, jit_addr):
        """The function pointer of the addresses :func:`address` returned (plain
        integers cross from Python to the kernels: a function object as an argument
        costs hundreds of microseconds of numba's dispatch per call)."""
        def codegen(context, builder, signature, args):
            vp = context.get_value_type(_nt.voidptr)
            fs = _cg.create_struct_proxy(RHS_TYPE)(context, builder)
            fs.c_addr = builder.inttoptr(args[0], vp)
            fs.py_addr = _cg.get_null_value(vp)
            fs.jit_addr = builder.inttoptr(args[1], vp)
            return fs._getvalue()
        return RHS_TYPE(_i8, _i8), codegen
else:                                           # (no numba: plain Python)
    RHS_SIG = RHS_TYPE = None
    rhs_jit = _jit


def address(fn):
    """``fn``'s addresses (an int64 array: its C wrapper, its numba entry) for the
    steppers' ``fp`` argument; ``fn`` must stay alive while they are used."""
    from numba.experimental.function_type import _get_jit_address, _get_wrapper_address
    return np.array([_get_wrapper_address(fn, RHS_SIG), _get_jit_address(fn, RHS_SIG)],
                    dtype=np.int64)


def eager(dispatchers, tag):
    """Compile ``dispatchers`` (pairs of a lazily compiled function and its signature)
    for their signatures alone, after :func:`~stanlite.autodiff.vm.kernel.
    drop_stale_cache` (eager decoration would load a stale cache before it can be
    dropped)."""
    if _k.njit is None:
        return
    _k.drop_stale_cache([d for d, _ in dispatchers], tag)
    for d, sig in dispatchers:
        d.compile(sig.args)
        d.disable_compile()


# the adapter's integer table: nprog, dim, then coff, aoff, voff (nprog + 1 each),
# outs, nvars (nprog each), the programs' rows (ROW fields each), their aux tables
_ROW = 14


@_jit
def interp(t, z, p, k, ptr, idx, val, J, res, ci, cf, cur, where):
    """The interpreter behind the steppers' function pointer: ``ci`` and ``cf`` are
    a bundle of programs packed by :func:`pack` (``cf``: values, then adjoints)."""
    nprog = ci[0]
    dim = ci[1]
    o = 2
    coff = ci[o:o + nprog + 1]
    o += nprog + 1
    aoff = ci[o:o + nprog + 1]
    o += nprog + 1
    voff = ci[o:o + nprog + 1]
    o += nprog + 1
    outs = ci[o:o + nprog]
    o += nprog
    nvars = ci[o:o + nprog]
    o += nprog
    nc = coff[nprog]
    codes = ci[o:o + nc * _ROW].reshape((nc, _ROW))
    o += nc * _ROW
    auxs = ci[o:o + aoff[nprog]]
    nv = voff[nprog]
    return _interp(codes, coff, auxs, aoff, cf[:nv], voff, cf[nv:2 * nv], outs, nvars,
                   cur, where, dim, where.shape[0] - 1, k, t, z, p, ptr, idx, val, J, res)


def pack(codes, coff, auxs, aoff, Vs, voff, As, outs, nvars, dim):
    """:func:`interp`'s tables ``(ci, cf)`` for a bundle of programs (concatenated
    tables with offsets, as :mod:`.ode_native` makes them)."""
    nprog = len(outs)
    ci = np.concatenate([np.array([nprog, dim], dtype=np.int64), coff, aoff, voff, outs,
                         nvars, np.ascontiguousarray(codes, dtype=np.int64).ravel(),
                         auxs]).astype(np.int64)
    return ci, np.concatenate([Vs, As])


@_jit
def _rms(x, scale):
    s = 0.0
    m = x.shape[0]
    for i in range(m):
        e = x[i] / scale[i]
        s += e * e
    return math.sqrt(s / m)


# ---- pieces of the steppers ----------------------------------------------------------
# numba inlines these into dopri and bdf (its IR inliner, inline="always"), where a
# compiled call with a tuple return cost 10-18% of a solve; they work in the stepper's
# arrays, none allocates. Each inlined array argument still costs a reference count
# pair (an atomic add and subtract) where LLVM's pruning leaves it: dopri's stages as
# such a piece made its solves 3-5% slower, so they stay written out in dopri. BDF's
# pieces run in _bdf_steps, from which numba removes every reference count operation
# (see there).
@_inline
def _stop(info, st, t, total, nfev):
    """Where a solve ended: the time reached, the accepted steps, the right-hand side
    evaluations; -> ``st``."""
    info[I_T] = t
    info[I_TOTAL] = total
    info[I_NFEV] = nfev
    return st


@_inline
def _stop_before(info, st, t, total, nfev, i_out, hlamb):
    """:func:`_stop` for a solve given up before output ``i_out`` (MAX_STEPS, STIFF),
    with the stiffness estimate."""
    info[I_NEXT] = i_out
    info[I_HLAMB] = hlamb
    return _stop(info, st, t, total, nfev)


@_inline
def _start(fn, ci, cf, cur, where, k, p, ptr, idx, val, J, m, t0, t_end, rtol, atol,
           y, f, f1, tmp, scale, order, info):
    """Start a solve at ``(t0, y)`` (``fn, ci, .. J``: the right-hand side and its
    arguments, see ``RHS_SIG``): the info slots, ``f = f(t0, y)`` and the first step
    size of a method of ``order`` by the rule of Hairer, Norsett & Wanner (scipy's
    select_initial_step; ``f1``, ``tmp``, ``scale``: work arrays); -> (status, step
    size). ``info[I_NFEV]`` counts the evaluations."""
    info[I_T] = t0
    info[I_T_LAST] = t0
    info[I_NEXT] = 0
    info[I_TOTAL] = 0
    info[I_HLAMB] = 0.0
    info[I_NEED] = 0.0
    info[I_H] = 0.0
    st = fn(t0, y, p, k, ptr, idx, val, J, f, ci, cf, cur, where)
    info[I_NFEV] = 1
    if st != OK:
        return st, 0.0
    for i in range(m):
        scale[i] = atol[i] + abs(y[i]) * rtol
    d0 = _rms(y, scale)
    d1 = _rms(f, scale)
    if d0 < 1e-5 or d1 < 1e-5:
        h0 = 1e-6
    else:
        h0 = 0.01 * d0 / d1
    interval = abs(t_end - t0)
    h0 = min(h0, interval)
    for i in range(m):
        tmp[i] = y[i] + h0 * f[i]
    st = fn(t0 + h0, tmp, p, k, ptr, idx, val, J, f1, ci, cf, cur, where)
    info[I_NFEV] = 2
    if st != OK:
        return st, 0.0
    for i in range(m):
        tmp[i] = f1[i] - f[i]
    d2 = _rms(tmp, scale) / h0
    if d1 <= 1e-15 and d2 <= 1e-15:
        h1 = max(1e-6, h0 * 1e-3)
    else:
        h1 = (0.01 / max(d1, d2)) ** (1.0 / (order + 1))
    h_abs = min(100 * h0, h1, interval)
    if not math.isfinite(h_abs):
        return BAD_START, h_abs
    for i in range(m):
        if not math.isfinite(f[i]):
            return BAD_START, h_abs
    return OK, h_abs


@_inline
def _finite(y, m):
    """Whether ``y[:m]`` is finite."""
    for i in range(m):
        if not math.isfinite(y[i]):
            return False
    return True


@_inline
def _shrink(err, safety, exponent):
    """The step size's factor after a rejected step: ``safety err^exponent``, at least
    ``_MIN_FACTOR`` (a NaN error gives ``_MIN_FACTOR``, as Python's max(0.2, NaN))."""
    fac = safety * err ** exponent
    return fac if fac > _MIN_FACTOR else _MIN_FACTOR


@_inline
def _step_end(t, h_abs, t_end):
    """The next step's end from ``t`` by ``h_abs``, cut to land on ``t_end``; -> (its
    end, the step, whether it was cut)."""
    t_new = t + h_abs
    cut = t_new - t_end > 0
    if cut:
        t_new = t_end
    return t_new, t_new - t, cut


@_inline
def _outputs(ts, i_out, t, y, Y, m, rk, W, y_old, t_prev, h, order):
    """After a step to ``(t, y)``: ``Y``'s rows from ``i_out`` on up to ``t``, between
    the steps by the method's dense output - RK45's quartic (``rk``: ``W`` the
    stages of the step of size ``h`` from ``(t_prev, y_old)``) or BDF's interpolant
    (``W`` the differences of ``order`` for the step size ``h``); -> the next
    output's index."""
    T = ts.shape[0]
    while i_out < T and ts[i_out] <= t:
        if ts[i_out] == t:
            for i in range(m):
                Y[i_out, i] = y[i]
        elif rk:
            x = (ts[i_out] - t_prev) / h
            for i in range(m):
                acc = 0.0
                xp = 1.0
                for c in range(4):
                    xp *= x
                    q = 0.0
                    for j in range(7):
                        q += W[j, i] * P[j, c]
                    acc += q * xp
                Y[i_out, i] = y_old[i] + h * acc
        else:
            # scipy's BdfDenseOutput with the step size and order just chosen
            for i in range(m):
                acc = W[0, i]
                prod = 1.0
                for j in range(order):
                    prod *= (ts[i_out] - (t - h * j)) / (h * (1 + j))
                    acc += W[j + 1, i] * prod
                Y[i_out, i] = acc
        i_out += 1
    return i_out


# ---- RK45 -----------------------------------------------------------------------------
@_inline
def _rk_error(K, h, y, y_new, rtol, atol, scale, tmp, m):
    """The norm of a Dormand-Prince step's error estimate over ``atol + rtol
    max(|y|, |y_new|)``."""
    for i in range(m):
        scale[i] = atol[i] + max(abs(y[i]), abs(y_new[i])) * rtol
        acc = 0.0
        for j in range(7):
            acc += K[j, i] * E[j]
        tmp[i] = acc * h
    return _rms(tmp, scale)


@_inline
def _grow(err, rejected):
    """The step size's factor after an accepted step of error ``err < 1``: ``0.9
    err^(-1/5)`` at most 10, and at most 1 right after a rejection."""
    if err == 0.0:
        factor = _MAX_FACTOR
    else:
        factor = min(_MAX_FACTOR, _SAFETY * err ** _EXPONENT)
    if rejected:
        factor = min(1.0, factor)
    return factor


@_inline
def _stiffness(K, y, y_old, h, hlamb, m):
    """Hairer's estimate ``h |lambda|`` from the last two stages, both at ``t + h``:
    ``k6 = f(t + h, y6)``, ``k7 = f(t + h, y1)`` (``hlamb``, the last one, when
    ``y6 = y1``)."""
    den = 0.0
    num = 0.0
    for i in range(m):
        acc = 0.0
        for j in range(5):
            acc += K[j, i] * A[5, j]
        d = y[i] - (y_old[i] + h * acc)
        den += d * d
        e = K[6, i] - K[5, i]
        num += e * e
    if den > 0.0:
        return abs(h) * math.sqrt(num / den)
    return hlamb


@_jit
def dopri(fp, ci, cf, cur, where, dim, n, k, p, ptr, idx, val, z0, t0, ts, rtol, atol,
          max_steps, stiff_after, Y, y, info):
    """Integrate the (coupled) system from ``(t0, z0)``; ``Y[i] = z(ts[i])``.
    ``fp, ci, cf, cur, where``: the right-hand side (its addresses, :func:`address`,
    and its arguments; see ``RHS_SIG``); ``dim`` its inputs ``(t, y, p)``. ``atol``
    has one value per component of ``z``; ``y`` (like ``z0``) holds the state
    reached on return. -> status (see the module docstring);
    ``info``: steps, time reached, last output time, next output index, the stiffness
    estimate ``h |lambda|``, the steps it extrapolates, the step size, right-hand side
    evaluations."""
    fn = _as_rhs(fp[0], fp[1])
    m = z0.shape[0]
    T = ts.shape[0]
    J = np.empty((n, dim))
    K = np.empty((7, m))
    W = np.empty((4, m))
    y_new, y_old, tmp, scale = W[0], W[1], W[2], W[3]
    for i in range(m):
        y[i] = z0[i]
    t = t0
    t_end = ts[T - 1]
    # f(t0, y0) and the initial step
    st, h_abs = _start(fn, ci, cf, cur, where, k, p, ptr, idx, val, J, m, t0, t_end,
                       rtol, atol, y, K[0], y_new, tmp, scale, 4, info)
    if st != OK:
        return st
    nfev = 2
    i_out = 0
    steps = 0
    total = 0
    # stiffness test state (ode_integrate._Stiffness)
    count = 0
    calm = 0
    hlamb = 0.0
    while True:
        # -- one accepted step (scipy's RungeKutta._step_impl) -------------------------
        if total > 0:
            for i in range(m):
                K[0, i] = K[6, i]           # FSAL: the last step's f(t + h) = f(t)
        min_step = 10.0 * abs(np.nextafter(t, np.inf) - t)
        if h_abs < min_step:
            h_abs = min_step
        rejected = False
        while True:
            if h_abs < min_step:
                return _stop(info, TOO_SMALL, t, total, nfev)
            t_new, h, _ = _step_end(t, h_abs, t_end)
            h_abs = abs(h)
            for s in range(1, 6):
                for i in range(m):
                    acc = 0.0
                    for j in range(s):
                        acc += K[j, i] * A[s, j]
                    tmp[i] = y[i] + acc * h
                st = fn(t + C[s] * h, tmp, p, k, ptr, idx, val, J, K[s],
                        ci, cf, cur, where)
                nfev += 1
                if st != OK:
                    info[I_NFEV] = nfev
                    return st
            for i in range(m):
                acc = 0.0
                for j in range(6):
                    acc += K[j, i] * B[j]
                y_new[i] = y[i] + h * acc
            st = fn(t + h, y_new, p, k, ptr, idx, val, J, K[6], ci, cf, cur, where)
            nfev += 1
            if st != OK:
                info[I_NFEV] = nfev
                return st
            err = _rk_error(K, h, y, y_new, rtol, atol, scale, tmp, m)
            if err < 1.0:
                h_abs *= _grow(err, rejected)
                break
            # (a NaN error rejects the step too)
            h_abs *= _shrink(err, _SAFETY, _EXPONENT)
            rejected = True
        for i in range(m):
            y_old[i] = y[i]
            y[i] = y_new[i]
        # (K keeps the step's seven stages until the next step: the dense output and
        # the stiffness test read them)
        t_prev = t
        t = t_new
        total += 1
        steps += 1
        if not _finite(y, m):
            return _stop(info, NOT_FINITE, t, total, nfev)
        if t >= ts[i_out]:
            i_out = _outputs(ts, i_out, t, y, Y, m, True, K, y_old, t_prev, h, 0)
            if i_out == T:
                break
            steps = 0
            info[I_T_LAST] = t
            continue
        if steps >= max_steps:
            return _stop_before(info, MAX_STEPS, t, total, nfev, i_out, hlamb)
        if steps >= stiff_after:
            hlamb = _stiffness(K, y, y_old, h, hlamb, m)
            if hlamb > 3.25:
                calm = 0
                count += 1
                if count >= 15:
                    count = 0
                    need = steps + (ts[i_out] - t) / max(h_abs, 1e-300)
                    if need > max_steps:
                        info[I_NEED] = need
                        info[I_H] = h_abs
                        return _stop_before(info, STIFF, t, total, nfev, i_out, hlamb)
            else:
                calm += 1
                if calm == 6:
                    count = 0
    info[I_HLAMB] = hlamb
    return _stop(info, OK, t, total, nfev)


# ---- BDF (scipy.integrate.BDF, step for step) ---------------------------------------
_MAX_ORDER = 5
_NEWTON_MAXITER = 4
_KAPPA = np.array([0.0, -0.1850, -1 / 9, -0.0823, -0.0415, 0.0])
_GAMMA = np.concatenate(([0.0], np.cumsum(1.0 / np.arange(1, _MAX_ORDER + 1))))
_ALPHA = (1.0 - _KAPPA) * _GAMMA
_ERROR_CONST = _KAPPA * _GAMMA + 1.0 / np.arange(1, _MAX_ORDER + 2)


@_jit
def _compute_R(order, factor, R):
    """``R[:order + 1, :order + 1]``: the cumulative products of scipy's compute_R."""
    for c in range(order + 1):
        R[0, c] = 1.0
    for r in range(1, order + 1):
        R[r, 0] = 0.0
        for c in range(1, order + 1):
            R[r, c] = R[r - 1, c] * ((r - 1 - factor * c) / r)


@_jit
def _change_D(D, order, factor, C, tmp):
    """``D[:order + 1] = (R U)^T D[:order + 1]``: the differences after a change of the
    step size by ``factor`` (``C``: room for ``R``, ``U`` and ``R U``)."""
    R, U, RU = C[0], C[1], C[2]
    _compute_R(order, factor, R)
    _compute_R(order, 1.0, U)
    q = order + 1
    for i in range(q):
        for j in range(q):
            s = 0.0
            for l in range(q):
                s += R[i, l] * U[l, j]
            RU[i, j] = s
    m = D.shape[1]
    for i in range(m):
        for j in range(q):
            s = 0.0
            for l in range(q):
                s += RU[l, j] * D[l, i]
            tmp[j] = s
        for j in range(q):
            D[j, i] = tmp[j]


@_jit
def _jac_y(fn, ci, cf, cur, where, n, t, z, p, ptr, idx, val, J, f, Jy):
    """``Jy = df/dy`` at ``(t, z[:n], p)``; -> the program's status."""
    st = fn(t, z, p, -1, ptr, idx, val, J, f, ci, cf, cur, where)
    if st != OK:
        return st
    for i in range(n):
        for c in range(n):
            Jy[i, c] = J[i, 1 + c]
    return OK


@_jit
def _lu(M, piv):
    """In-place LU factorisation with partial pivoting (LAPACK's getrf). A zero pivot
    leaves inf/NaN in the solutions: the Newton iteration then fails, as with LAPACK."""
    n = M.shape[0]
    for c in range(n):
        r = c
        big = abs(M[c, c])
        for i in range(c + 1, n):
            v = abs(M[i, c])
            if v > big:
                big = v
                r = i
        piv[c] = r
        if r != c:
            for j in range(n):
                v = M[c, j]
                M[c, j] = M[r, j]
                M[r, j] = v
        d = M[c, c]
        for i in range(c + 1, n):
            M[i, c] /= d
            l = M[i, c]
            if l != 0.0:
                for j in range(c + 1, n):
                    M[i, j] -= l * M[c, j]


@_jit
def _lu_solve_blocks(M, piv, b, nb):
    """Solve ``(I_nb (x) M) x = b`` in place (``b`` holds ``nb`` blocks of size n)."""
    n = M.shape[0]
    for blk in range(nb):
        o = blk * n
        for c in range(n):
            r = piv[c]
            if r != c:
                v = b[o + c]
                b[o + c] = b[o + r]
                b[o + r] = v
        for i in range(n):
            s = b[o + i]
            for j in range(i):
                s -= M[i, j] * b[o + j]
            b[o + i] = s
        for i in range(n - 1, -1, -1):
            s = b[o + i]
            for j in range(i + 1, n):
                s -= M[i, j] * b[o + j]
            b[o + i] = s / M[i, i]



@_inline
def _rms_times(c, x, scale, tmp, m):
    """The norm of ``c x`` over ``scale`` (``tmp``: a work array)."""
    for i in range(m):
        tmp[i] = c * x[i]
    return _rms(tmp, scale)


@_jit                   # (a compiled call, not inlined: it slices D, see _bdf_steps)
def _choose_order(D, order, error_norm, scale, tmp, m):
    """scipy's choice of the next order from the error estimates of the orders
    ``order - 1, order, order + 1`` (``scale``: the new state's); -> (the change of
    the order, -1, 0 or 1; the largest of the three ``err^(-1/(q + 1))``)."""
    if order > 1:
        em = _rms_times(_ERROR_CONST[order - 1], D[order], scale, tmp, m)
    else:
        em = np.inf
    if order < _MAX_ORDER:
        ep = _rms_times(_ERROR_CONST[order + 1], D[order + 2], scale, tmp, m)
    else:
        ep = np.inf
    f_m = em ** (-1.0 / order)
    f_0 = error_norm ** (-1.0 / (order + 1))
    f_p = ep ** (-1.0 / (order + 2))
    # np.argmax: the first of the largest
    best = f_m
    delta = -1
    if f_0 > best:
        best = f_0
        delta = 0
    if f_p > best:
        best = f_p
        delta = 1
    return delta, best


@_jit
def _newton_matrix(Jy, c, LU, piv):
    """``LU``, ``piv``: the factors of the Newton matrix ``I - c Jy``."""
    n = Jy.shape[0]
    for i in range(n):
        for j in range(n):
            LU[i, j] = -c * Jy[i, j]
        LU[i, i] += 1.0
    _lu(LU, piv)


@_inline
def _predict(D, order, rtol, atol, ypred, scale, psi, m):
    """The predicted state ``ypred`` (the sum of the differences ``D``), its ``scale``
    and ``psi``, the differences' part of the BDF equation (scipy's)."""
    for i in range(m):
        s = 0.0
        for j in range(order + 1):
            s += D[j, i]
        ypred[i] = s
        scale[i] = atol[i] + rtol * abs(s)
        s = 0.0
        for j in range(1, order + 1):
            s += D[j, i] * _GAMMA[j]
        psi[i] = s / _ALPHA[order]


@_inline
def _newton(fn, ci, cf, cur, where, p, k, ptr, idx, val, J, t_new, c, LU, piv, nb,
            ypred, psi, scale, ynew, f, d, dy, m, newton_tol):
    """scipy's solve_bdf_system: Newton's iterations for ``ynew`` at ``t_new`` from
    the prediction ``ypred``, ``d`` the sum of the corrections; -> (the program's
    status, whether they converged, the iterations = the evaluations of ``f``)."""
    for i in range(m):
        ynew[i] = ypred[i]
        d[i] = 0.0
    dy_norm_old = -1.0
    for it in range(_NEWTON_MAXITER):
        st = fn(t_new, ynew, p, k, ptr, idx, val, J, f, ci, cf, cur, where)
        if st != OK:
            return st, False, it + 1
        for i in range(m):
            dy[i] = c * f[i] - psi[i] - d[i]
        _lu_solve_blocks(LU, piv, dy, nb)
        dy_norm = _rms(dy, scale)
        if dy_norm_old >= 0.0:
            rate = dy_norm / dy_norm_old
            if rate >= 1.0 or (rate ** (_NEWTON_MAXITER - it) / (1 - rate) *
                               dy_norm > newton_tol):
                return OK, False, it + 1
        else:
            rate = -1.0
        for i in range(m):
            ynew[i] += dy[i]
            d[i] += dy[i]
        if dy_norm == 0.0 or (rate >= 0.0 and rate / (1 - rate) * dy_norm < newton_tol):
            return OK, True, it + 1
        dy_norm_old = dy_norm
    return OK, False, _NEWTON_MAXITER


@_inline
def _accept(D, order, d, ynew, y, m):
    """After an accepted step: ``y = ynew``, and scipy's update of the differences
    ``D`` (``d``: the step's sum of Newton corrections)."""
    for i in range(m):
        y[i] = ynew[i]
    for i in range(m):
        D[order + 2, i] = d[i] - D[order + 1, i]
        D[order + 1, i] = d[i]
    for j in range(order, -1, -1):
        for i in range(m):
            D[j, i] += D[j + 1, i]


@_jit
def bdf(fp, ci, cf, cur, where, dim, n, k, p, ptr, idx, val, z0, t0, ts, rtol, atol,
        max_steps, Y, y, info):
    """Integrate the (coupled) system from ``(t0, z0)`` by scipy's BDF; the arguments
    and the result as :func:`dopri` (no stiffness test: this is the stiff solver)."""
    fn = _as_rhs(fp[0], fp[1])
    m = z0.shape[0]
    J = np.empty((n, dim))
    Jy = np.empty((n, n))
    LU = np.empty((n, n))
    piv = np.zeros(n, dtype=np.int64)
    fbuf = np.empty(n)
    D = np.zeros((_MAX_ORDER + 3, m))
    C = np.empty((3, _MAX_ORDER + 1, _MAX_ORDER + 1))
    ctmp = np.empty(_MAX_ORDER + 1)
    W = np.empty((8, m))                # the work vectors, as rows of one array
    f, ynew, ypred, d = W[0], W[1], W[2], W[3]
    dy, psi, scale, tmp = W[4], W[5], W[6], W[7]
    for i in range(m):
        y[i] = z0[i]
    # the initial step (order 1 in the step-size formula)
    st, h_abs = _start(fn, ci, cf, cur, where, k, p, ptr, idx, val, J, m, t0, ts[-1],
                       rtol, atol, y, f, ynew, tmp, scale, 1, info)
    if st != OK:
        return st
    # the Jacobian at the start (scipy evaluates it when the solver is made)
    st = _jac_y(fn, ci, cf, cur, where, n, t0, y, p, ptr, idx, val, J, fbuf, Jy)
    if st != OK:
        return st
    return _bdf_steps(fp, ci, cf, cur, where, k, p, ptr, idx, val, J, Jy, fbuf, LU, piv,
                      D, C, ctmp, f, ynew, ypred, d, dy, psi, scale, tmp, t0, h_abs,
                      ts, rtol, atol, max_steps, Y, y, info)


@_jit
def _bdf_steps(fp, ci, cf, cur, where, k, p, ptr, idx, val, J, Jy, fbuf, LU, piv, D, C,
               ctmp, f, ynew, ypred, d, dy, psi, scale, tmp, t, h_abs, ts, rtol, atol,
               max_steps, Y, y, info):
    """:func:`bdf`'s steps from ``(t, y)``, ``f = f(t, y)``, ``Jy`` its Jacobian,
    ``h_abs`` the first step size (the other arrays: room to work in).

    It allocates no array, slices none and calls nothing that returns one: numba then
    drops every reference count operation from it (numba.core.removerefctpass), and
    its inlined pieces cost nothing. Written into bdf, each of their array arguments
    cost an atomic reference count pair per step that LLVM's pruning left in place
    (bdf ran ~10% slower); a slice or an allocation here would bring them all back.
    The right-hand side comes as its addresses ``fp`` and is made a function here:
    a first-class function passed between two compiled functions is what numba
    warns of as experimental (NumbaExperimentalFeatureWarning, an error under the
    test suite's filters), a function made inside one is not."""
    fn = _as_rhs(fp[0], fp[1])
    n = Jy.shape[0]
    m = y.shape[0]
    nb = 1 + k
    T = ts.shape[0]
    t_end = ts[T - 1]
    nfev = 2
    newton_tol = max(10 * 2.220446049250313e-16 / rtol, min(0.03, rtol ** 0.5))
    for i in range(m):
        D[0, i] = y[i]
        D[1, i] = f[i] * h_abs
    order = 1
    n_equal = 0
    have_lu = False
    i_out = 0
    steps = 0
    total = 0
    while True:
        # -- one accepted step (scipy's BDF._step_impl) -------------------------------
        min_step = 10.0 * abs(np.nextafter(t, np.inf) - t)
        if h_abs < min_step:
            _change_D(D, order, min_step / h_abs, C, ctmp)
            h_abs = min_step
            n_equal = 0
        current_jac = False
        while True:
            if h_abs < min_step:
                return _stop(info, TOO_SMALL, t, total, nfev)
            t_new, h, cut = _step_end(t, h_abs, t_end)
            if cut:
                _change_D(D, order, abs(h) / h_abs, C, ctmp)
                n_equal = 0
                have_lu = False
            h_abs = abs(h)
            _predict(D, order, rtol, atol, ypred, scale, psi, m)
            c = h / _ALPHA[order]
            while True:
                if not have_lu:
                    _newton_matrix(Jy, c, LU, piv)
                    have_lu = True
                st, converged, n_iter = _newton(fn, ci, cf, cur, where, p, k, ptr, idx,
                                                val, J, t_new, c, LU, piv, nb, ypred,
                                                psi, scale, ynew, f, d, dy, m,
                                                newton_tol)
                nfev += n_iter
                if st != OK:
                    info[I_NFEV] = nfev
                    return st
                if converged or current_jac:
                    break
                # not converged: a fresh Jacobian at the prediction, and again
                st = _jac_y(fn, ci, cf, cur, where, n, t_new, ypred, p, ptr, idx, val,
                            J, fbuf, Jy)
                if st != OK:
                    info[I_NFEV] = nfev
                    return st
                have_lu = False
                current_jac = True
            if not converged:
                h_abs *= 0.5
                _change_D(D, order, 0.5, C, ctmp)
                n_equal = 0
                have_lu = False
                continue
            safety = 0.9 * (2 * _NEWTON_MAXITER + 1) / (2 * _NEWTON_MAXITER + n_iter)
            for i in range(m):
                scale[i] = atol[i] + rtol * abs(ynew[i])
            error_norm = _rms_times(_ERROR_CONST[order], d, scale, tmp, m)
            if error_norm > 1.0:
                fac = _shrink(error_norm, safety, -1.0 / (order + 1))
                h_abs *= fac
                _change_D(D, order, fac, C, ctmp)
                n_equal = 0
            else:
                break
        n_equal += 1
        t = t_new
        _accept(D, order, d, ynew, y, m)
        if n_equal >= order + 1:
            # a new order and step size (scale is still that of y_new)
            delta, best = _choose_order(D, order, error_norm, scale, tmp, m)
            order += delta
            fac = min(_MAX_FACTOR, safety * best)
            h_abs *= fac
            _change_D(D, order, fac, C, ctmp)
            n_equal = 0
            have_lu = False
        total += 1
        steps += 1
        if not _finite(y, m):
            return _stop(info, NOT_FINITE, t, total, nfev)
        if t >= ts[i_out]:
            i_out = _outputs(ts, i_out, t, y, Y, m, False, D, y, t, h_abs, order)
            if i_out == T:
                break
            steps = 0
            info[I_T_LAST] = t
            continue
        if steps >= max_steps:
            return _stop_before(info, MAX_STEPS, t, total, nfev, i_out, 0.0)
    return _stop(info, OK, t, total, nfev)


# the kernels carry the interpreter's machine code in their numba cache, which numba
# keys on this file alone: drop it when the interpreter's source changes
_k.drop_stale_cache([_load_run, _other, _interp, _rms, dopri, _compute_R, _change_D,
                     _jac_y, _lu, _lu_solve_blocks, _choose_order,
                     _newton_matrix, bdf, _bdf_steps], "ode_steppers")
eager([(interp, RHS_SIG)], "ode_steppers")
