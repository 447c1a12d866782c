"""ODE solutions as super nodes: ``ode_rk45``, ``ode_bdf`` and ``ode_adjoint``.

The solution ``Y[i] = y(t_i)`` of

    y'(t) = f(t, y, p),    y(t0) = y0,    i = 1..T,

is one node of the tape, whatever the number of steps the integrator took (the AD
review's super node: "approximate the derivative, don't differentiate the
approximation"). The integration runs on plain floats in scipy's RK45 (Dormand-
Prince 5(4), non-stiff) or BDF (variable order 1-5, stiff), stepped by
:mod:`.ode_integrate`; ``f`` is written in stanlite operations and its derivatives
come from stanlite's AD (:mod:`.ode_rhs`), never from finite differences. Where ``f``
lowers to the compiled tape interpreter (the default with numba), the same methods
run step for step in numba, a whole solve (plain, sensitivities or tangents) per call
(:mod:`.ode_native`, :mod:`.ode_steppers`); ``STANLITE_ODE=scipy`` forces scipy's
stepper.

Derivatives
-----------
Forward sensitivities (``ode_rk45``, ``ode_bdf``). For every scalar input ``theta``
the sensitivity ``s = dy/dtheta`` solves the variational equation

    s' = J_y(t, y, p) s + J_p(t, y, p) dp/dtheta,
    s(t0) = dy0/dtheta - f(t0, y0, p) dt0/dtheta,

so ``y`` and all ``K`` sensitivities are integrated together as one coupled system
of ``N (1 + K)`` states (Stan's ``coupled_ode_system``). A reverse sweep then only
contracts: ``theta_bar = sum_i g_i . s(t_i)`` for the output adjoint ``g``. Output
times enter directly: ``dY_i/dt_i = f(t_i, Y_i, p)``.

Adjoint method (``ode_adjoint``; Cao, Li, Petzold & Serban 2003, the method of
CVODES and of Stan's ``ode_adjoint_tol_ctl``). The forward solve keeps its dense
output; the reverse sweep integrates backwards from ``t_T`` to ``t0``

    lambda' = -J_y^T lambda,                lambda(t_T) = g_T,
    mu'     = -J_p^T lambda,                mu(t_T) = 0,

adding ``g_i`` to ``lambda`` at each earlier output time. Then ``y0_bar =
lambda(t0)``, ``p_bar = mu(t0) = int_{t0}^{t_T} J_p^T lambda dt``, ``t0_bar =
-lambda(t0) . f(t0, y0)`` and ``t_i_bar = g_i . f(t_i, Y_i)``. Each right-hand side
costs one vector-Jacobian product of ``f`` (one reverse sweep), whatever the number
of parameters: a model with many parameters and few states is cheap.

Forward mode and nesting. The JVP of the node integrates the tangent system (``y``
with one tangent copy ``v_b`` per direction of a batch, ``v_b(t0) = dy0_b - f(t0,
y0) dt0_b``, ``v_b' = J_y v_b + J_p dp_b``) plus ``f(t_i, Y_i) dt_i_b``. Both the
sensitivity system and the tangent system are ODEs whose right-hand side is itself
written in stanlite operations (a forward-mode evaluation of ``f``,
:class:`~.ode_rhs.TangentRHS`), and both are solved by calling this same super node.
So when the inputs are traced at a lower level - ``sl.hessian`` is forward-over-
reverse; ``sl.grad`` of a ``sl.grad`` is reverse-over-reverse - the rules record
themselves and are differentiated again: the Hessian of ``loss(ode(p))`` solves
the tangent system of the sensitivity system, ``N (1 + K) (1 + n)`` states. On
plain values (the first-order case every sampler step needs) the reverse rule
contracts sensitivities computed during the forward pass, with no re-solve.

Under nesting, ``ode_adjoint``'s reverse rule uses forward sensitivities (the
backward adjoint solve is a computation on plain floats, not a differentiable one):
second derivatives through ``ode_adjoint`` are correct, computed like those of
``ode_rk45``/``ode_bdf``. Likewise a first-order sweep whose output adjoint is
itself traced (reverse-over-reverse with a traced seed) contracts sensitivities.
Forward mode evaluates ``f`` on dual numbers: a primitive of ``f`` without a JVP
rule makes JVPs and Hessians through the solution raise ``DifferentiationError``
naming it (first-order gradients only need VJPs).

Values. Under differentiation the returned ``Y`` is the state part of the coupled
solve; the sensitivities take part in the error control (as in Stan), so it agrees
with the plain solve to the tolerances, not to the last bit.

Recording. Each node is an ordinary primitive record (a forward function and a VJP
over plain values), so tapes holding a solve are replayed by ``sl.compile`` and the
models' retaped gradients; Stan's checks on values (finite inputs, sorted output
times after ``t0``) run where the integration runs, at every replayed point too.

Failures raise :class:`~stanlite.errors.SolverError` (an ``ArithmeticError``: a
sampler rejects the proposal) naming the solver, the time reached and the steps
taken; bad inputs raise ``ValueError``/``DomainError`` naming the argument, and an
``f`` returning the wrong shape a ``ModelError``.
"""

import weakref

import numpy as np

from ..autodiff.dual import Dual
from ..autodiff.callback import TwoPhase
from ..autodiff.extend import Primitive, accumulate
from ..autodiff.var import Box, Var, shape_of
from ..errors import DifferentiationError, DomainError
from ..math.reductions import sum as _sum
from ..math.structure import concatenate, reshape, stack, transpose
from . import ode_native as _native
from .ode_integrate import Control, integrate, integrate_backward
from .ode_rhs import _SPARSE_FROM, OdeRHS

__all__ = ["ode_rk45", "ode_bdf", "ode_adjoint"]


# --------------------------------------------------------------------------------------
# public functions
# --------------------------------------------------------------------------------------
def ode_rk45(f, y0, t0, ts, *args, rel_tol=1e-6, abs_tol=1e-6, max_num_steps=10**6):
    """Solve a non-stiff ODE ``y' = f(t, y, *args)`` with Runge-Kutta-Dormand-Prince.

    Returns ``Y`` of shape ``(len(ts), len(y0))`` with ``Y[i] = y(ts[i])``, where
    ``y(t0) = y0``; ``ts`` must be non-decreasing with ``ts[0] > t0`` (Stan's rules).
    ``f(t, y, *args)`` returns ``dy/dt`` (a vector like ``y``) written with stanlite
    operations. ``args`` are anything ``f`` needs: traced values (``Var``s, scalars
    or arrays) get sensitivities, plain data (arrays, ints) do not. Every traced
    input - ``y0``, ``t0``, ``ts``, ``args`` - is differentiable, in reverse mode
    (forward sensitivities integrated with the solution, see the module docstring)
    and forward mode, to any order (``sl.hessian`` works through the solution).

    ``rel_tol``, ``abs_tol``: the integrator's tolerances (the error estimate of each
    component ``i`` is kept below ``abs_tol + rel_tol |y_i|``; sensitivities are part
    of the error control). ``max_num_steps``: most steps between two output times.
    Stan's defaults. A failure (step budget, non-finite state, a problem too stiff
    for an explicit method) raises ``sl.SolverError``.

    Example: exponential decay ``y' = -k y``, ``y(t) = exp(-k t)``, and its
    derivative in ``k`` at ``t = 1``, ``-exp(-k)``.

    >>> import numpy as np, stanlite as sl
    >>> decay = lambda t, y, k: -k * y
    >>> Y = sl.ode_rk45(decay, np.array([1.0]), 0.0, [1.0, 2.0], 0.5, rel_tol=1e-8,
    ...                 abs_tol=1e-8)
    >>> np.round(Y[:, 0], 6)
    array([0.606531, 0.367879])
    >>> g = sl.grad(lambda k: sl.ode_rk45(decay, np.array([1.0]), 0.0, [1.0], k,
    ...                                   rel_tol=1e-8, abs_tol=1e-8)[0, 0])(0.5)
    >>> round(g, 6)
    -0.606531
    """
    return _public("ode_rk45", "rk45", f, y0, t0, ts, args, rel_tol, abs_tol,
                   max_num_steps)


def ode_bdf(f, y0, t0, ts, *args, rel_tol=1e-10, abs_tol=1e-10, max_num_steps=10**8):
    """Solve a stiff ODE ``y' = f(t, y, *args)`` with backward differentiation formulas.

    Same contract as :func:`ode_rk45` (see there), with scipy's BDF (variable order
    1-5, the method family of CVODES that Stan's ``ode_bdf`` uses) and Stan's
    defaults ``rel_tol = abs_tol = 1e-10``, ``max_num_steps = 10^8``. The Newton
    iterations use the AD Jacobian ``J_y`` of ``f``; for the coupled sensitivity
    system they use its block-diagonal part ``I (x) J_y`` (the simultaneous-corrector
    approximation of CVODES).

    Example: Robertson's chemical kinetics, a classic stiff problem, conserves mass.

    >>> import numpy as np, stanlite as sl
    >>> def robertson(t, y, k1, k2, k3):
    ...     a = -k1 * y[0] + k3 * y[1] * y[2]
    ...     c = k2 * y[1] ** 2
    ...     return sl.stack([a, -a - c, c])
    >>> Y = sl.ode_bdf(robertson, np.array([1.0, 0.0, 0.0]), 0.0, [1.0, 100.0],
    ...                0.04, 3e7, 1e4, rel_tol=1e-8, abs_tol=1e-10)
    >>> np.round(Y.sum(axis=1), 8)
    array([1., 1.])
    """
    return _public("ode_bdf", "bdf", f, y0, t0, ts, args, rel_tol, abs_tol,
                   max_num_steps)


def ode_adjoint(f, y0, t0, ts, *args, rel_tol_forward=1e-6, abs_tol_forward=1e-6,
                rel_tol_backward=1e-6, abs_tol_backward=1e-6,
                rel_tol_quadrature=1e-6, abs_tol_quadrature=1e-6,
                max_num_steps=10**6, solver_forward="rk45", solver_backward=None):
    """Solve ``y' = f(t, y, *args)``; reverse-mode derivatives by the adjoint method.

    The value is that of :func:`ode_rk45` / :func:`ode_bdf` (``solver_forward`` =
    ``"rk45"`` or ``"bdf"``); the difference is the reverse sweep, which solves the
    adjoint system backwards in time (``solver_backward``, by default the forward
    solver) instead of carrying forward sensitivities: its cost does not grow with
    the number of parameters (one vector-Jacobian product of ``f`` per right-hand
    side, no Jacobian in the parameters is formed). See the module docstring for the
    equations. This is Stan's ``ode_adjoint_tol_ctl`` with scipy's integrators:

    * ``rel_tol_forward``, ``abs_tol_forward`` (scalar or one per state): the forward
      solve (and the forward sensitivities used under nested differentiation);
    * ``rel_tol_backward``, ``abs_tol_backward`` (scalar or one per state): the
      adjoint states ``lambda``;
    * ``rel_tol_quadrature``, ``abs_tol_quadrature``: the parameter integrals
      ``mu``. They are integrated together with ``lambda`` (each costs nothing extra:
      the same sweep gives both products); scipy's integrators take one relative
      tolerance, so that solve uses ``min(rel_tol_backward, rel_tol_quadrature)``;
    * ``max_num_steps``: most steps between two output times, in both directions.

    The forward trajectory is kept in memory (all steps' interpolants) rather than
    checkpointed and recomputed as CVODES does.

    Example: the derivative of ``y(1)`` for ``y' = -k y`` in ``k`` is ``-exp(-k)``.

    >>> import numpy as np, stanlite as sl
    >>> decay = lambda t, y, k: -k * y
    >>> g = sl.grad(lambda k: sl.ode_adjoint(decay, np.array([1.0]), 0.0, [1.0], k,
    ...     rel_tol_forward=1e-9, abs_tol_forward=1e-9, rel_tol_backward=1e-9,
    ...     abs_tol_backward=1e-9, rel_tol_quadrature=1e-9,
    ...     abs_tol_quadrature=1e-9)[0, 0])(0.5)
    >>> round(g, 6)
    -0.606531
    """
    name = "ode_adjoint"
    method_f = _method(name, "solver_forward", solver_forward)
    method_b = _method(name, "solver_backward",
                       solver_forward if solver_backward is None else solver_backward)
    f, xs, n = _validate(name, f, y0, t0, ts, args)
    steps = _steps(name, max_num_steps)
    fwd = Control(name, method_f, _tol(name, "rel_tol_forward", rel_tol_forward),
                  _atol(name, "abs_tol_forward", abs_tol_forward, n), steps)
    bwd = Control(f"{name} (backward)", method_b,
                  min(_tol(name, "rel_tol_backward", rel_tol_backward),
                      _tol(name, "rel_tol_quadrature", rel_tol_quadrature)),
                  _atol(name, "abs_tol_backward", abs_tol_backward, n), steps)
    quad_atol = _tol(name, "abs_tol_quadrature", abs_tol_quadrature)
    return _ode(_Problem(OdeRHS(f, n, name), fwd, (bwd, quad_atol)), xs)


# --------------------------------------------------------------------------------------
# argument checking
# --------------------------------------------------------------------------------------
def _public(name, method, f, y0, t0, ts, args, rel_tol, abs_tol, max_num_steps):
    f, xs, n = _validate(name, f, y0, t0, ts, args)
    ctl = Control(name, method, _tol(name, "rel_tol", rel_tol),
                  _tol(name, "abs_tol", abs_tol), _steps(name, max_num_steps))
    return _ode(_Problem(OdeRHS(f, n, name), ctl, None), xs)


def _method(name, arg, m):
    if not isinstance(m, str) or m.lower() not in ("rk45", "bdf"):
        raise ValueError(f"{name}: {arg} must be 'rk45' or 'bdf', got {m!r}")
    return m.lower()


def _tol(name, arg, v):
    try:
        v = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: {arg} must be a positive number, got {v!r}") from None
    if not (0.0 < v < np.inf):
        raise ValueError(f"{name}: {arg} must be positive and finite, got {v!r}")
    return v


def _atol(name, arg, v, n):
    if np.ndim(v) == 0:
        return _tol(name, arg, v)
    a = np.asarray(v, dtype=float)
    if a.shape != (n,):
        raise ValueError(f"{name}: {arg} must be a scalar or a vector of length {n} "
                         f"(one per state), got shape {a.shape}")
    if not np.all((a > 0) & np.isfinite(a)):
        raise ValueError(f"{name}: {arg} must be positive and finite, got {a}")
    return a


def _steps(name, v):
    try:
        m = float(v)
    except (TypeError, ValueError):
        m = np.nan
    if not (np.isfinite(m) and m >= 1 and m == int(m)):
        raise ValueError(f"{name}: max_num_steps must be a positive integer, got {v!r}")
    return int(m)


def _as_vector(name, arg, x):
    """A plain float array or a traced value; lists holding traced values are stacked."""
    if isinstance(x, Box):
        return x
    if isinstance(x, (list, tuple)) and any(isinstance(e, Box) for e in x):
        if not all(shape_of(e) == () for e in x):
            raise ValueError(f"{name}: {arg} must be a vector (a list of scalars or "
                             "a 1-d array)")
        return stack(list(x))
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: {arg} must be a vector of numbers, got "
                         f"{type(x).__name__}") from None
    return a


def _validate(name, f, y0, t0, ts, args):
    if not callable(f):
        raise TypeError(f"{name}: f must be a function f(t, y, *args) returning dy/dt, "
                        f"got {type(f).__name__}")
    y0 = _as_vector(name, "y0", y0)
    s = shape_of(y0)
    if len(s) != 1 or s[0] == 0:
        raise ValueError(f"{name}: y0 must be a non-empty vector (the initial state), "
                         f"got shape {s}")
    n = s[0]
    if not isinstance(t0, Box):
        try:
            t0 = float(t0)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: t0 must be a scalar, got {t0!r}") from None
    elif t0.shape != ():
        raise ValueError(f"{name}: t0 must be a scalar, got shape {t0.shape}")
    ts = _as_vector(name, "ts", ts)
    s = shape_of(ts)
    if len(s) != 1 or s[0] == 0:
        raise ValueError(f"{name}: ts must be a non-empty vector of output times, got "
                         f"shape {s}")
    args = list(args)
    for j, a in enumerate(args):
        if isinstance(a, (list, tuple)) and _has_box(a):
            try:
                args[j] = stack(list(a))
            except (TypeError, ValueError):
                raise DifferentiationError(
                    f"{name}: args[{j}] is a {type(a).__name__} holding traced values "
                    "that do not stack into one array; pass them as separate "
                    "arguments") from None
    return f, (y0, t0, ts) + tuple(args), n


def _check_values(name, y0, t0, ts, args, n):
    """Stan's checks on the plain values (run where the integration runs, so that a
    replayed recording - sl.compile - checks every new point): finite inputs, output
    times non-decreasing and after t0. ``y0[:n]`` is the user's initial state, the
    rest (derived systems) its initial tangents."""
    if not np.isfinite(y0).all():
        if not np.isfinite(y0[:n]).all():
            raise DomainError(f"{name}: y0 must be finite, got {y0[:n]}")
        raise DomainError(f"{name}: the initial sensitivities (y0's directions and "
                          f"-f(t0, y0)) are not finite: {y0[n:]}")
    if not np.isfinite(t0):
        raise DomainError(f"{name}: t0 must be finite, got {t0}")
    if not np.isfinite(ts).all():
        raise DomainError(f"{name}: ts must be finite, got {ts}")
    if not ts[0] > t0:
        raise DomainError(f"{name}: the output times must come after t0; got ts[0] = "
                          f"{ts[0]:g} <= t0 = {t0:g}")
    if ts.shape[0] > 1:
        d = np.diff(ts)
        if (d < 0).any():
            i = int(np.flatnonzero(d < 0)[0])
            raise DomainError(f"{name}: ts must be sorted in increasing order; got "
                              f"ts[{i + 1}] = {ts[i + 1]:g} < ts[{i}] = {ts[i]:g}")
    for j, v in enumerate(args):
        if type(v) is float or (type(v) is np.ndarray and v.dtype.kind == "f"
                                and id(v) not in _UNIT_IDS):
            if not np.isfinite(v).all():
                raise DomainError(f"{name}: args[{j}] must be finite, got {v}")


def _has_box(a):
    for e in a:
        if isinstance(e, Box) or (isinstance(e, (list, tuple)) and _has_box(e)):
            return True
    return False


# --------------------------------------------------------------------------------------
# the super node: dispatch by the kind of tracing
# --------------------------------------------------------------------------------------
class _Problem:
    """What is integrated and how: the right-hand side, the forward control and,
    for ``ode_adjoint``, ``(backward control, quadrature abs tol)``."""

    __slots__ = ("rhs", "ctl", "adjoint")

    def __init__(self, rhs, ctl, adjoint):
        self.rhs = rhs
        self.ctl = ctl
        self.adjoint = adjoint

    def derived(self, k, mask, nargs, what):
        """The problem of the tangent system with ``k`` directions."""
        return _Problem(self.rhs.tangent_system(k, mask, nargs), self.ctl.renamed(what),
                        None)

    def __repr__(self):
        return f"<ODE problem {self.ctl.name}, {self.rhs.n} states>"


# inputs are the tuple xs = (y0, t0, ts, *args); positions 0, 1, 2, 3 + j
def _ode(pb, xs):
    top = None
    level = 0
    for x in xs:
        if isinstance(x, Box) and x.tape.level > level:
            top = x
            level = x.tape.level
    if top is None:
        return _solve(pb, xs)[0]
    if type(top) is Var:
        return _record(pb, xs, top.tape)
    return _forward(pb, xs, top.tape)


def _solve(pb, xs, dense=False):
    """Integrate on plain values: ``(Y, dense solution or None)``."""
    y0 = np.asarray(xs[0], dtype=float)
    t0, ts, args = float(xs[1]), np.asarray(xs[2], dtype=float), xs[3:]
    rhs = pb.rhs
    _check_values(rhs.name, y0, t0, ts, args, rhs.root.n)
    if not dense:
        # the whole solve in compiled code when f is a compiled program (ode_native)
        Y = _native.solve(pb, y0, t0, ts, args)
        if Y is not None:
            return Y, None

    def fun(t, y):
        return rhs.value(float(t), y, args)

    def jac(t, y):
        return rhs.jac(float(t), y, args)

    Y, sol, _ = integrate(fun, y0, t0, ts, pb.ctl, jac if pb.ctl.method == "bdf" else None,
                          dense)
    return Y, sol


def _record(pb, xs, tape):
    """Reverse mode: one node on ``tape`` (an ordinary primitive record, see below)."""
    vals = list(xs)
    pairs = []
    lower = False
    for i, x in enumerate(xs):
        if isinstance(x, Box):
            if x.tape is tape:
                v = x.value
                vals[i] = v
                pairs.append((i, x))
                if isinstance(v, Box):
                    lower = True
            else:
                lower = True
    if lower:
        # the values are traced at a lower level: the value comes from calling the node
        # again (which records those levels) and the reverse rule is written in
        # stanlite operations
        route, forward = _NESTED_NODE, _nested_forward
    elif pb.adjoint is not None:
        route, forward = _ADJ_NODE, _adj_forward
    else:
        route, forward = _SENS_NODE, _sens_forward
    kw = {"problem": pb, "traced": tuple(i for i, _ in pairs)}
    Y, saved = forward(*vals, **kw)
    return route.record(tape, Y, vals, pairs, saved, kw)


# --------------------------------------------------------------------------------------
# the nodes' rules
# --------------------------------------------------------------------------------------
# A node recorded here is a two-phase node (autodiff/callback.py): its forward pass
# computes the value *and* what the reverse rule needs in one go (the sensitivities,
# or the forward trajectory for the adjoint method), saved on the node, and its
# backward pass contracts them with the adjoint. The node is a record of the spec
# (the primitive), so a tape holding a solve stays replayable (sl.compile, models'
# retaped gradients): a replay calls the spec's forward function on new plain values
# and then its VJP, which finds the saved data again by the identity of the value
# (_Stash) and recomputes them if it cannot.
class _Stash:
    """Data kept beside an array value for as long as that array lives."""

    def __init__(self):
        self._d = {}

    def put(self, Y, data):
        d = self._d
        k = id(Y)

        def drop(ref, k=k):
            e = d.get(k)
            if e is not None and e[0] is ref:
                del d[k]
        d[k] = (weakref.ref(Y, drop), data)

    def get(self, Y):
        e = self._d.get(id(Y))
        if e is not None and e[0]() is Y:
            return e[1]
        return None


_STASH = _Stash()


def _as_tuple(out, n):
    return tuple(_scalar(out[i]) if i in out else None for i in range(n))


def _sens_forward(*xs, problem, traced):
    """Forward pass of a first-order node: the coupled solve, ``(Y, saved)`` with the
    sensitivities saved (and stashed beside ``Y`` for a replay's VJP)."""
    Y, S, layout = _sensitivities_plain(problem, xs, traced)
    F_ts = _f_at_outputs_plain(problem.rhs, xs, Y) if 2 in traced else None
    saved = (S, layout, F_ts)
    _STASH.put(Y, saved)
    return Y, saved


def _sens_fun(*xs, problem, traced):
    """Value of a first-order node (a replay): the coupled solve, sensitivities
    stashed."""
    return _sens_forward(*xs, problem=problem, traced=traced)[0]


def _sens_vjp(g, ans, *xs, problem, traced):
    """The VJP of a replayed node: from the stashed sensitivities (or solved again)."""
    st = _STASH.get(ans)
    if st is None:
        return _as_tuple(_vjp_general(problem, xs, traced, g, ans), len(xs))
    return _sens_saved_vjp(g, st, ans, xs, problem, traced)


def _sens_saved_vjp(g, saved, ans, xs, problem, traced):
    """Contract the saved sensitivities with the output adjoint ``g``:
    ``theta_bar = sum_i g_i . S_i``, ``t_i_bar = g_i . f(t_i, Y_i)``."""
    S, layout, F_ts = saved
    if type(g) is float:
        g = np.full(ans.shape, g)
    out = {}
    if type(g) is np.ndarray:
        if S is not None:
            out = _split(np.einsum("tkn,tn->k", S, g), layout, traced)
        if F_ts is not None:
            out[2] = np.einsum("tn,tn->t", F_ts, g)
    else:
        # a traced adjoint (reverse-over-reverse): the same contraction, recorded
        T, N = ans.shape
        if S is not None:
            out = _split(_sum(S * reshape(g, (T, 1, N)), axis=(0, 2)), layout, traced)
        if F_ts is not None:
            out[2] = _sum(F_ts * g, axis=1)
    return _as_tuple(out, len(xs))


def _adj_forward(*xs, problem, traced):
    """Forward pass of a first-order ``ode_adjoint`` node: the forward solve, ``(Y,
    sol)`` with its dense trajectory saved (and stashed for a replay's VJP)."""
    Y, sol = _solve(problem, xs, dense=True)
    _STASH.put(Y, sol)
    return Y, sol


def _adj_fun(*xs, problem, traced):
    """Value of a first-order ``ode_adjoint`` node (a replay)."""
    return _adj_forward(*xs, problem=problem, traced=traced)[0]


def _adj_vjp(g, ans, *xs, problem, traced):
    return _adj_saved_vjp(g, _STASH.get(ans), ans, xs, problem, traced)


def _adj_saved_vjp(g, sol, ans, xs, problem, traced):
    """The adjoint method's backward solve along the saved trajectory ``sol`` (solved
    again if it is None)."""
    if type(g) is float:
        g = np.full(ans.shape, g)
    if type(g) is not np.ndarray:
        # a traced adjoint: forward sensitivities contracted in stanlite operations
        return _as_tuple(_vjp_general(problem, xs, traced, g, ans), len(xs))
    if sol is None:
        sol = _solve(problem, xs, dense=True)[1]
    return _as_tuple(_adjoint_vjp(problem, xs, traced, g, sol, ans), len(xs))


def _nested_fun(*xs, problem, traced):
    return _ode(problem, xs)


def _nested_forward(*xs, problem, traced):
    """Forward pass of a node over values traced at a lower level: nothing saved
    (the reverse rule is written in stanlite operations)."""
    return _ode(problem, xs), None


def _nested_vjp(g, ans, *xs, problem, traced):
    if type(g) is float:
        g = np.full(shape_of(ans), g)
    return _as_tuple(_vjp_general(problem, xs, traced, g, ans), len(xs))


def _spec(name, fun, vjp_all):
    spec = Primitive(name, fun)
    spec.vjp_all = vjp_all
    return spec


_SENS = _spec("ode (forward sensitivities)", _sens_fun, _sens_vjp)
_ADJ = _spec("ode (adjoint method)", _adj_fun, _adj_vjp)
_NESTED = _spec("ode (nested)", _nested_fun, _nested_vjp)


def _backward(saved_vjp):
    """The backward pass of a two-phase ODE node from ``saved_vjp(g, saved, ans, xs,
    problem, traced)``: each traced input's contribution added to its adjoint."""
    def backward(g, saved, parents, value, vals, kw):
        cs = saved_vjp(g, saved, value, tuple(vals), **kw)
        for i, p in parents:
            if cs[i] is None:
                raise DifferentiationError(
                    f"argument {i} of an ODE solve is not differentiable (its VJP gave "
                    "no contribution) but received a traced value")
            accumulate(p, cs[i])
    return backward


def _nested_saved_vjp(g, saved, ans, xs, problem, traced):
    return _nested_vjp(g, ans, *xs, problem=problem, traced=traced)


_SENS_NODE = TwoPhase(_SENS, _backward(_sens_saved_vjp))
_ADJ_NODE = TwoPhase(_ADJ, _backward(_adj_saved_vjp))
_NESTED_NODE = TwoPhase(_NESTED, _backward(_nested_saved_vjp))


# --------------------------------------------------------------------------------------
# sensitivity directions
# --------------------------------------------------------------------------------------
def _directions(pb, vals, positions):
    """The ``K`` directions of the sensitivity system for the traced inputs.

    Returns ``(V0, D, mask, layout, K)``: ``V0`` (K, N) initial tangents (identity
    rows for ``y0``, ``-f(t0, y0)`` for ``t0``, zeros for the arguments), ``D`` the
    argument directions (identity blocks, one array per masked argument), and
    ``layout[pos] = (start, stop, shape)`` of each input's rows.
    """
    y0, t0, args = vals[0], vals[1], vals[3:]
    rhs = pb.rhs
    N = rhs.n
    blocks = []
    layout = {}
    k = 0
    if 0 in positions:
        blocks.append(np.eye(N))
        layout[0] = (k, k + N, (N,))
        k += N
    if 1 in positions:
        f0 = _f_at(rhs, t0, y0, args)
        blocks.append(-reshape(f0, (1, N)))
        layout[1] = (k, k + 1, ())
        k += 1
    mask = [p - 3 for p in positions if p >= 3]
    start = k
    for j in mask:
        s = shape_of(args[j])
        size = int(np.prod(s, dtype=np.int64))
        layout[3 + j] = (k, k + size, s)
        k += size
    K = k
    if k > start:
        blocks.append(np.zeros((k - start, N)))
    D = []
    for j in mask:
        a, b, s = layout[3 + j]
        d = np.zeros((K, b - a))
        d[a:b] = np.eye(b - a)
        D.append(d.reshape((K,) + s))
    if any(isinstance(b, Box) for b in blocks):
        V0 = concatenate(blocks, axis=0)
    else:
        V0 = np.concatenate(blocks, axis=0)
    return V0, D, mask, layout, K


_PLANS = {}
_UNIT_DIRECTIONS = {}
_UNIT_IDS = set()           # the arrays of _UNIT_DIRECTIONS (kept alive by it): finite


def _plan(pb, vals, positions):
    """:func:`_directions` and the sensitivity problem, ``(V0, D, mask, layout, K,
    sub)`` with ``D`` a tuple. Unless ``t0`` is traced (its block is ``-f(t0,
    y0)``) the directions are unit vectors that depend only on the number of states,
    the traced positions and the arguments' shapes: kept, and shared by every solve
    with those (so that the compiled evaluator finds its compressed form of them by
    identity, :meth:`.ode_compiled.CompiledRHS.directions`), never written; the
    sensitivity problem is kept per problem."""
    args = vals[3:]
    if 1 in positions:
        V0, D, mask, layout, K = _directions(pb, vals, positions)
        return (V0, tuple(D), mask, layout, K,
                pb.derived(K, mask, len(args), "sensitivities"))
    key = (pb.rhs.n, tuple(positions)) + tuple(shape_of(args[p - 3]) for p in positions
                                               if p >= 3)
    got = _PLANS.get((pb,) + key)
    if got is not None:
        return got
    dirs = _UNIT_DIRECTIONS.get(key)
    if dirs is None:
        V0, D, mask, layout, K = _directions(pb, vals, positions)
        for a in [V0] + D:
            a.flags.writeable = False
        if len(_UNIT_DIRECTIONS) >= 256:
            old = _UNIT_DIRECTIONS.pop(next(iter(_UNIT_DIRECTIONS)))
            _UNIT_IDS.difference_update(id(a) for a in old[1])
        dirs = _UNIT_DIRECTIONS[key] = (V0, tuple(D), mask, layout, K)
        _UNIT_IDS.update(id(a) for a in D)
    got = dirs + (pb.derived(dirs[4], dirs[2], len(args), "sensitivities"),)
    if len(_PLANS) >= 256:
        _PLANS.pop(next(iter(_PLANS)))
    _PLANS[(pb,) + key] = got
    return got


def _f_at(rhs, t, y, args):
    """``f(t, y, *args)`` as a vector (plain or traced)."""
    if not (isinstance(t, Box) or isinstance(y, Box) or any(isinstance(a, Box) for a in args)):
        return rhs.value(float(t), y, args)
    return rhs.state(rhs.F(t, y, *args))


def _sensitivities_plain(pb, vals, positions):
    """Solve y and its sensitivities to the traced inputs on plain values:
    ``(Y, S, layout)`` with ``S[i, k] = dY_i / dtheta_k``."""
    N = pb.rhs.n
    y0, t0, ts, args = vals[0], vals[1], vals[2], vals[3:]
    if not [p for p in positions if p != 2]:
        return _solve(pb, vals)[0], None, {}
    V0, D, mask, layout, K, sub = _plan(pb, vals, positions)
    z0 = np.concatenate([y0, V0.ravel()])
    Z = _solve(sub, (z0, t0, ts) + tuple(args) + D)[0]
    return Z[:, :N].copy(), Z[:, N:].reshape(len(Z), K, N), layout


def _f_at_outputs_plain(rhs, vals, Y):
    ts, args = vals[2], vals[3:]
    return np.array([rhs.value(float(t), y, args) for t, y in zip(ts, Y)])


def _f_at_outputs(rhs, vals, Y):
    """``F[i] = f(ts[i], Y[i], *args)`` (plain or traced): ``dY_i / dt_i``."""
    ts, args = vals[2], vals[3:]
    if not (isinstance(ts, Box) or isinstance(Y, Box) or any(isinstance(a, Box) for a in args)):
        return _f_at_outputs_plain(rhs, vals, Y)
    return stack([_f_at(rhs, ts[i], Y[i], args) for i in range(shape_of(ts)[0])])


def _split(c, layout, positions):
    """Cut the contracted sensitivities ``c`` (K,) into each input's contribution."""
    out = {}
    for p in positions:
        if p == 2:
            continue
        a, b, s = layout[p]
        if s == ():
            out[p] = c[a]
        else:
            out[p] = reshape(c[a:b], s) if isinstance(c, Box) else c[a:b].reshape(s)
    return out


# --------------------------------------------------------------------------------------
# reverse rules
# --------------------------------------------------------------------------------------
def _scalar(c):
    return float(c) if type(c) is np.float64 else c


def _vjp_general(pb, vals, positions, g, Y):
    """The reverse rule in stanlite operations: forward sensitivities obtained by
    calling the super node on the sensitivity system (so that it is recorded and
    differentiated again), contracted with ``g``."""
    N = pb.rhs.n
    t0, ts, args = vals[1], vals[2], vals[3:]
    T = shape_of(ts)[0]
    out = {}
    if [p for p in positions if p != 2]:
        V0, D, mask, layout, K = _directions(pb, vals, positions)
        z0 = concatenate([vals[0], reshape(V0, (K * N,))])
        sub = pb.derived(K, mask, len(args), "sensitivities")
        Z = _ode(sub, (z0, t0, ts) + tuple(args) + tuple(D))
        S = reshape(Z[:, N:], (T, K, N))
        c = _sum(S * reshape(g, (T, 1, N)), axis=(0, 2))
        out = _split(c, layout, positions)
    if 2 in positions:
        out[2] = _sum(_f_at_outputs(pb.rhs, vals, Y) * g, axis=1)
    return out


def _adjoint_vjp(pb, vals, positions, g, sol, Y):
    rhs = pb.rhs
    N = rhs.n
    y0, t0, ts, args = vals[0], float(vals[1]), np.asarray(vals[2]), vals[3:]
    mask = [p - 3 for p in positions if p >= 3]
    shapes = [shape_of(args[j]) for j in mask]
    sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
    P = sum(sizes)
    bwd, quad_atol = pb.adjoint
    n = N + P

    def fun(t, z):
        t = float(t)
        _, a, bs = rhs.vjp(t, sol(t), args, mask, z[:N])
        out = np.empty(n)
        out[:N] = -a
        if P:
            out[N:] = -np.concatenate(bs)
        return out

    def jac(t, z):
        # d(-J_y^T lambda)/d lambda = -J_y^T; the quadrature rows' dependence on
        # lambda (-J_p^T) is left out: it would need J_p, and mu does not feed back,
        # so the Newton iterations converge without it
        t = float(t)
        Jt = -rhs.jac(t, sol(t), args).T
        if n > _SPARSE_FROM:
            import scipy.sparse as _sparse    # first use only: not at import stanlite
            return _sparse.block_diag([Jt, _sparse.csc_matrix((P, P))], format="csc")
        M = np.zeros((n, n))
        M[:N, :N] = Jt
        return M
    atol_b = bwd.atol_for(N)
    atol = np.concatenate([np.broadcast_to(atol_b, (N,)), np.full(P, quad_atol)])
    out = {}
    if 2 in positions:
        out[2] = np.einsum("tn,tn->t", _f_at_outputs_plain(rhs, vals, Y), g)
    if not [p for p in positions if p != 2]:
        return out                  # only output times: no backward solve needed
    z = np.zeros(n)
    z[:N] = g[-1]

    def jumps(i):
        gi = g[i]
        if not gi.any():
            return None
        j = np.zeros(n)
        j[:N] = gi
        return j

    z = integrate_backward(fun, z, ts, t0, jumps, bwd, atol,
                           jac if bwd.method == "bdf" else None)
    lam = z[:N]
    if 0 in positions:
        out[0] = lam.copy()
    if 1 in positions:
        out[1] = -float(lam @ rhs.value(t0, y0, args))
    off = N
    for j, s, size in zip(mask, shapes, sizes):
        piece = z[off:off + size]
        out[3 + j] = float(piece[0]) if s == () else piece.reshape(s)
        off += size
    return out


# --------------------------------------------------------------------------------------
# forward mode
# --------------------------------------------------------------------------------------
def _forward(pb, xs, tr):
    """Forward mode: integrate the tangent system for the trace's batch of directions."""
    batch = tr.batch
    nb = int(np.prod(batch, dtype=np.int64)) if batch else 1
    vals = list(xs)
    tans = [None] * len(xs)
    for i, x in enumerate(xs):
        if isinstance(x, Box) and x.tape is tr:
            vals[i] = x.value
            tans[i] = reshape(x.tangent, (nb,) + shape_of(x.value))
    vals = tuple(vals)
    rhs = pb.rhs
    N = rhs.n
    y0, t0, ts, args = vals[0], vals[1], vals[2], vals[3:]
    T = shape_of(ts)[0]
    mask = [j for j in range(len(args)) if tans[3 + j] is not None]
    if tans[0] is None and tans[1] is None and not mask:
        Y = _ode(pb, vals)                         # only the output times move
        V = np.zeros((nb, T, N))
    else:
        V0 = tans[0] if tans[0] is not None else np.zeros((nb, N))
        if tans[1] is not None:
            # s(t0) = dy0 - f(t0, y0) dt0: moving t0 forward shifts the solution
            f0 = _f_at(rhs, t0, y0, args)
            V0 = V0 - reshape(tans[1], (nb, 1)) * reshape(f0, (1, N))
        z0 = concatenate([y0, reshape(V0, (nb * N,))])
        sub = pb.derived(nb, mask, len(args), "tangents")
        Z = _ode(sub, (z0, t0, ts) + tuple(args) + tuple(tans[3 + j] for j in mask))
        Y = Z[:, :N]
        V = transpose(reshape(Z[:, N:], (T, nb, N)), (1, 0, 2))
    if tans[2] is not None:
        F_ts = _f_at_outputs(rhs, vals, Y)
        V = V + reshape(tans[2], (nb, T, 1)) * reshape(F_ts, (1, T, N))
    return Dual(Y, reshape(V, tuple(batch) + (T, N)), tr)
