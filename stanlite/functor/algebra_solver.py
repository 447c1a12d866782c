"""The algebraic solver as a super node: roots of f(x, theta) = 0 and their derivatives.

``algebra_solver(f, x_guess, *args)`` returns x* with f(x*, *args) = 0 (n equations in
n unknowns). The iterations run on plain floats - Powell's hybrid dogleg (Powell 1970;
the trust-region scheme of MINPACK's ``hybrj``, More, Garbow & Hillstrom 1980, which
Stan's ``solve_powell`` uses through Eigen) or Newton's method with a backtracking
line search (Dennis & Schnabel 1983, Algorithm A6.3.1) - with the Jacobian J_x =
df/dx from stanlite's forward-mode AD (or a user's analytic ``jac_x``). One node
goes on the tape; its derivatives come from the implicit function theorem, never from
the iterations (the AD review, Section "Optimizing with super nodes", eq. 12):

    f(x*(theta), theta) = 0   =>   dx*/dtheta = -J_x^-1 J_theta,
                                   J_x = df/dx, J_theta = df/dtheta at (x*, theta).

Reverse mode (as Stan's current solver): for the adjoint xbar of the root,

    theta_bar = -J_theta^T J_x^-T xbar = VJP of f(x*, .) at theta with cotangent -lambda,
    J_x^T lambda = xbar,

i.e. one transposed solve with the LU factors of J_x, computed once at the root, and
*one* nested reverse sweep through f in theta: J_theta is never formed, so the cost
does not grow with the number of parameters. Forward mode by the same theorem,

    xdot = -J_x^-1 (J_theta thetadot) = -J_x^-1 (JVP of f(x*, .) at theta along thetadot),

a batch of directions riding on one forward pass (vector mode). Both rules are
written with stanlite operations: on plain floats they are plain numpy/LAPACK calls;
under an outer differentiation (forward-over-reverse Hessians, ``sl.hvp``,
reverse-over-reverse) their arguments are traced, J_x is recomputed as a traced
value and the solve, the nested VJP and the JVP are recorded in turn - so
``sl.hessian`` works through the solver.

Failures raise :class:`~stanlite.errors.SolverError` (an ``ArithmeticError``: inside
NUTS the proposal is rejected, as in Stan) naming the solver, the norm of f reached,
the tolerances and the steps taken: no convergence within ``max_steps``, a point
where the iterations stall with ``||f|| > f_tol``, a singular Jacobian where no step
can be made, or a Jacobian singular at the root (then dx*/dtheta does not exist).

Also here, clearly marked as the *benchmark's baseline* and not for models:
:func:`algebra_solver_taped`, the same dogleg run on traced values so that plain AD
differentiates through every iteration ("standard" in the AD review's Table 8).

The iterations themselves, with the helpers and vector types they share across plain,
traced and scalar-node values, are in :mod:`.algebra_iterations`.
"""

import math

import numpy as np

from ..autodiff.dual import Dual, forward_scope
from ..autodiff.extend import batch_shape, defjvp_all, defvjp_all, primitive, reshape
from ..autodiff.functional import _forward, jacobian_reverse, vjp
from ..autodiff.var import Box, _strip, shape_of, value_of
from ..errors import DifferentiationError, SolverError
from ..math.linalg import solve
from ..math.structure import stack, transpose
from .algebra_iterations import (_SMat, _SVec, _is_plain, _iterate, _lu, _lu_solve,
                                 _plain, _scalar_solve, _singular)

__all__ = ["algebra_solver", "solve_powell", "solve_newton"]

_METHODS = ("powell", "newton")



# --------------------------------------------------------------------------------------
# one solver call: the residual, where the parameters go, the options, the LU at the root
# --------------------------------------------------------------------------------------
class _Problem:
    """Everything one ``algebra_solver`` call needs. ``pos`` lists the positions in
    ``args`` of the traced arguments (the parameters); the others are data, passed to
    ``f`` untouched. The forward solve leaves the root and its LU factors here, so the
    first-order rules reuse them instead of refactorising."""

    __slots__ = ("f", "jac_x", "args", "pos", "method", "rel_tol", "f_tol", "max_steps",
                 "x_guess", "n", "name", "root", "lu", "ad_forward", "jacobians",
                 "jargs", "vjps", "guess_fn", "fresh")

    def __init__(self, name, f, x_guess, args, method, rel_tol, f_tol, max_steps, jac_x,
                 jacobians=None):
        self.name = name
        if not callable(f):
            raise TypeError(f"{name}: f must be a callable f(x, *args) returning the "
                            f"residual vector, got {type(f).__name__}")
        if jac_x is not None and not callable(jac_x):
            raise TypeError(f"{name}: jac_x must be a callable jac_x(x, *args) returning "
                            f"the n x n Jacobian df/dx, got {type(jac_x).__name__}")
        if jacobians is not None and not callable(jacobians):
            raise TypeError(f"{name}: jacobians must be a callable jacobians(x, *args, "
                            f"wrt=()) returning (f, df/dx, [df/dargs[i] for i in wrt]), "
                            f"got {type(jacobians).__name__}")
        if method not in _METHODS:
            raise ValueError(f"{name}: method must be one of {_METHODS}, got {method!r}")
        for key, v in (("rel_tol", rel_tol), ("f_tol", f_tol)):
            if not (isinstance(v, (int, float, np.floating, np.integer)) and
                    math.isfinite(v) and v > 0):
                raise ValueError(f"{name}: {key} must be a positive finite number, got {v!r}")
        if isinstance(max_steps, float) and max_steps.is_integer():
            max_steps = int(max_steps)
        if not isinstance(max_steps, (int, np.integer)) or isinstance(max_steps, bool) \
                or max_steps < 1:
            raise ValueError(f"{name}: max_steps must be a positive integer, got "
                             f"{max_steps!r}")
        # a callable guess is evaluated on the plain argument values at every solve
        # (a replayed recording gets a fresh one); its first value fixes n
        self.guess_fn = x_guess if callable(x_guess) else None
        self.fresh = self.guess_fn is not None      # x_guess is for the first solve
        x0 = self.check_guess(x_guess(*[_strip(a) for a in args])
                              if self.guess_fn is not None else x_guess)
        self.f = f
        self.jac_x = jac_x
        self.pos = tuple(i for i, a in enumerate(args) if isinstance(a, Box))
        # the traced arguments are filled in per call (all_args): holding them here
        # would keep their recording alive as long as the node (e.g. in a retaped plan)
        self.args = [None if isinstance(a, Box) else a for a in args]
        self.method = method
        self.rel_tol = float(rel_tol)
        self.f_tol = float(f_tol)
        self.max_steps = int(max_steps)
        self.x_guess = x0
        self.n = x0.size
        self.root = None
        self.lu = None
        self.ad_forward = True
        self.jacobians = jacobians
        # df/d(traced argument) at the root, from ``jacobians`` or formed by AD for a
        # row-by-row Jacobian (None: the rules differentiate f); reverse sweeps so far
        self.jargs = None
        self.vjps = 0

    def check_guess(self, x_guess):
        """``x_guess`` as a finite float vector (of n entries, once n is known)."""
        name = self.name
        try:
            x0 = np.array(value_of(x_guess), dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: x_guess must be a vector of numbers, got "
                             f"{type(x_guess).__name__}") from None
        if x0.ndim != 1 or x0.size == 0 or \
                (getattr(self, "n", None) is not None and x0.size != self.n):
            want = "a non-empty vector (1-D)" if getattr(self, "n", None) is None \
                else f"a vector of {self.n}"
            raise ValueError(f"{name}: x_guess must be {want}, got shape {x0.shape}")
        if not np.all(np.isfinite(x0)):
            raise ValueError(f"{name}: x_guess must be finite, got {x0}")
        return x0

    # -- evaluations -------------------------------------------------------------------
    def all_args(self, params):
        args = list(self.args)
        for i, p in zip(self.pos, params):
            args[i] = p
        return args

    def call(self, x, params):
        """f(x, *args) with the parameters in place (plain or traced)."""
        return self.f(x, *self.all_args(params))

    def check_residual(self, F, what="f(x, *args)"):
        s = shape_of(F)
        if s != (self.n,):
            raise ValueError(f"{self.name}: {what} must return a vector of {self.n} "
                             f"residuals (one per unknown in x_guess), got shape {s}")

    def jacobian(self, x, args, F=None):
        """``(f(x), J_x)`` on plain or traced values (AD, or the user's ``jac_x``)."""
        if self.jac_x is not None:
            if F is None:
                F = self.f(x, *args)
            J = self.jac_x(x, *args)
            if shape_of(J) != (self.n, self.n):
                raise ValueError(f"{self.name}: jac_x(x, *args) must return the "
                                 f"{self.n} x {self.n} Jacobian df/dx, got shape "
                                 f"{shape_of(J)}")
            if not isinstance(J, Box):
                J = np.asarray(J, dtype=np.float64)
            return F, J
        fx = (lambda z: self.f(z, *args))
        if self.ad_forward:
            # one vector-mode forward pass gives f and all n directional derivatives
            try:
                F, T = _forward(fx, x, np.eye(self.n), (self.n,))
                return F, transpose(T) if isinstance(T, Box) else np.ascontiguousarray(T.T)
            except DifferentiationError:
                self.ad_forward = False         # some primitive in f has no JVP
        if F is None:
            F = fx(x)
        return F, jacobian_reverse(fx)(x)

    # -- the forward solve on plain floats ---------------------------------------------
    def solve(self, params):
        args = self.all_args(params)
        be = _PlainBackend(self, args)
        x0 = self.x_guess
        if self.guess_fn is not None and params:
            if self.fresh:
                self.fresh = False      # the values the guess was made from at set-up
            else:
                x0 = self.check_guess(self.guess_fn(*args))
        x, J, steps = _iterate(be, x0, self)
        lu, piv, rcond = be.factor(J)
        if _singular(rcond, self.n):
            raise SolverError(
                f"{self.name} ({self.method}): the Jacobian df/dx is singular at the root "
                f"found after {steps} steps (reciprocal condition number {rcond:.3g}), so "
                "the root's derivatives (implicit function theorem) do not exist; "
                "reformulate f so that its roots are isolated")
        self.root = x
        self.lu = (lu, piv)
        # df/d(traced arguments) at the root from the caller's ``jacobians``: the
        # first-order rules then contract them instead of differentiating f again
        self.jargs = be.arg_jacobians(x) if self.jacobians is not None and params \
            else None
        self.vjps = 0
        return x

    # -- J_x solves for the rules ------------------------------------------------------
    def solve_jx(self, x, params, rhs, trans):
        """``J_x^-1 rhs`` (``trans=False``) or ``J_x^-T rhs`` at ``(x, params)``.

        Plain values at the root of the forward solve reuse its LU factors; traced
        values (an outer differentiation is active) recompute J_x as a traced value
        and solve with the differentiable ``solve``."""
        if _is_plain(x, rhs, *params):
            if x is self.root and self.lu is not None:
                lu, piv = self.lu
            else:
                _, J = self.jacobian(x, self.all_args(params))
                lu, piv, rcond = _lu(np.asarray(J, dtype=float))
                if _singular(rcond, self.n):
                    raise SolverError(f"{self.name}: the Jacobian df/dx is singular at "
                                      f"the root (reciprocal condition number {rcond:.3g})")
            return _lu_solve(lu, piv, np.asarray(rhs, dtype=float), 1 if trans else 0)
        _, J = self.jacobian(x, self.all_args(params))
        return solve(transpose(J) if trans else J, rhs)


# --------------------------------------------------------------------------------------
# the backends of the iterations (.algebra_iterations): f, J_x and the Gauss-Newton step
# on plain floats, traced values or scalar nodes
# --------------------------------------------------------------------------------------
class _Residual:
    """``f(x, *args)`` seen as an ODE right-hand side ``F(t, y, *args)`` (no ``t``), so
    that the plain iterations evaluate f and J_x by its compiled program
    (:mod:`.ode_compiled`: recorded once per f and data, guards and checks kept)."""

    __slots__ = ("F", "key", "n", "name", "state")

    def __init__(self, prob):
        f = prob.f
        self.key = f
        self.n = prob.n
        self.name = prob.name

        def F(t, y, *args):
            return f(y, *args)
        self.F = F

        def state(out):
            prob.check_residual(out)
            if isinstance(out, (list, tuple)):
                return stack(list(out)) if any(isinstance(o, Box) for o in out) \
                    else np.asarray(out, dtype=np.float64)
            return out
        self.state = state


class _PlainBackend:
    """f, J_x and the Gauss-Newton step on plain floats (LAPACK LU). With the caller's
    ``jacobians``, f and J_x come from it (one call gives both; the last point's are
    kept, so an accepted trial point is not evaluated again). Without it and without
    a user's ``jac_x``, f and J_x come from f's compiled program when it lowers (one
    numba call each), else from the tape (a forward pass per Jacobian)."""

    taped = False

    def __init__(self, prob, args):
        self.prob = prob
        self.args = args
        self.last = None        # (J, lu, piv, rcond) of the last factorisation
        self.compiled = None    # (evaluator, its inputs p), False: not used
        self.memo = None        # (x, F, J, [argument Jacobians]): jacobians' last
        if prob.jac_x is not None or prob.jacobians is not None:
            self.compiled = False

    # -- the caller's jacobians(x, *args, wrt) -----------------------------------------
    def _hook(self, x, wrt):
        prob = self.prob
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            out = prob.jacobians(x, *self.args, wrt=wrt)
        F, J = out[0], out[1]
        self._check(F, J)
        F = np.asarray(F, dtype=np.float64)
        J = np.asarray(J, dtype=np.float64)
        prob.check_residual(F, "jacobians(x, *args)[0]")
        if J.shape != (prob.n, prob.n):
            raise ValueError(f"{prob.name}: jacobians(x, *args)[1] must be the "
                             f"{prob.n} x {prob.n} Jacobian df/dx, got shape {J.shape}")
        jargs = []
        if wrt:
            jargs = [np.asarray(a, dtype=np.float64) for a in out[2]]
            for i, a in zip(wrt, jargs):
                want = (prob.n,) + shape_of(self.args[i])
                if a.shape != want:
                    raise ValueError(f"{prob.name}: jacobians(x, *args)[2] must hold "
                                     f"df/dargs[{i}] of shape {want}, got {a.shape}")
        self.memo = (x, F, J, jargs)
        return F, J

    def arg_jacobians(self, x):
        """``[df/dargs[i] for i in prob.pos]`` at ``x`` (from the last evaluation when
        it asked for them at this point)."""
        m = self.memo
        if m is None or m[0] is not x:
            self._hook(x, self.prob.pos)
            m = self.memo
        return m[3]

    def _compiled(self, x):
        c = self.compiled
        if c is None:
            from . import ode_compiled
            args = tuple(self.args)
            ev = ode_compiled.evaluator(_Residual(self.prob), 0.0, x, args)
            if ev is None:
                return None                     # not yet (or turned off): ask again
            c = self.compiled = (ev, ev.params(args)) if ev.ok else False
        if c is False or not c[0].ok:
            return None
        return c

    def _check(self, F, J=None):
        if isinstance(F, Box) or isinstance(J, Box):
            raise DifferentiationError(
                f"{self.prob.name}: f returned a traced value for plain inputs - it uses a "
                "differentiable variable that is not among its arguments (a closure over "
                "a parameter?); pass every parameter through the solver's arguments so "
                "that the implicit function theorem can see it")

    # trial points may leave f's domain (log of a negative number): that is an
    # expected event - a non-finite ||f|| rejects the step - not a numpy warning
    def fun(self, x):
        if self.prob.jacobians is not None:
            return self._hook(x, self.prob.pos)[0]
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            c = self._compiled(x)
            F = None if c is None else c[0].value(0.0, x, c[1])
            if F is not None:
                return F
            F = self.prob.f(x, *self.args)
        self._check(F)
        F = np.asarray(F, dtype=np.float64)
        self.prob.check_residual(F)
        return F

    def fun_jac(self, x, F=None, last=False, near=None):
        """``(f(x), J_x)``; ``last``: the iterations end at ``x``, a Gauss-Newton
        correction below rel_tol from ``near``.

        With ``jacobians`` every evaluation also gives the argument Jacobians, and
        the last one at ``near`` serves the end: ``x`` differs from ``near`` by less
        than rel_tol (relative), so J_x and df/dtheta there equal those at ``x`` to
        that order - far below the accuracy of the residual that warrants
        ``jacobians`` (an integration at its tolerance) - and ||f(near)|| is the
        f_tol test's (conservative: the correction reduces it). One evaluation fewer
        per solve."""
        if self.prob.jacobians is not None:
            m = self.memo
            if m is not None and (m[0] is x or (last and m[0] is near)):
                self.memo = (x,) + m[1:]
                return m[1], m[2]
            return self._hook(x, self.prob.pos)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            c = self._compiled(x)
            r = None if c is None else c[0].jacobian(0.0, x, c[1])
            if r is not None:
                return r[0], np.ascontiguousarray(r[1][:, 1:1 + self.prob.n])
            F, J = self.prob.jacobian(x, self.args, F)
        self._check(F, J)
        F = np.asarray(F, dtype=np.float64)
        self.prob.check_residual(F)
        return F, np.asarray(J, dtype=np.float64)

    def factor(self, J):
        """LU factors of ``J`` (kept: the last one is reused at the root)."""
        last = self.last
        if last is not None and last[0] is J:
            return last[1:]
        lu, piv, rcond = _lu(J)
        self.last = (J, lu, piv, rcond)
        return lu, piv, rcond

    def gauss_newton(self, J, F):
        """``-J^-1 F``, or ``None`` if ``J`` is numerically singular."""
        if not np.all(np.isfinite(J)):
            return None
        lu, piv, rcond = self.factor(J)
        if _singular(rcond, len(F)):
            return None
        return -_lu_solve(lu, piv, F)


class _TapedBackend:
    """The same operations on traced values: every iteration is recorded."""

    taped = True

    def __init__(self, prob, args, linear_solve=None):
        self.prob = prob
        self.args = args
        self.linear_solve = linear_solve or solve

    def fun(self, x):
        F = self.prob.f(x, *self.args)
        self.prob.check_residual(F)
        return F

    def fun_jac(self, x, F=None, last=False, near=None):
        F, J = self.prob.jacobian(x, self.args, F)
        self.prob.check_residual(F)
        return F, J

    def gauss_newton(self, J, F):
        Jv = np.asarray(value_of(J), dtype=float)
        if not np.all(np.isfinite(Jv)) or _singular(_lu(Jv)[2], len(Jv)):
            return None
        return -self.linear_solve(J, F)




class _ScalarBackend:
    """The iterations on scalar nodes: ``f(x, *args)`` and ``jac_x(x, *args)`` take
    ``x`` as a vector of scalars (indexable) and return a list of scalars (a list of
    rows), and the Gauss-Newton solve is Gaussian elimination on scalar nodes."""

    taped = False       # f at an accepted point is the trial's, as in MINPACK

    def __init__(self, prob, args):
        if prob.jac_x is None:
            raise ValueError(f"{prob.name}: scalar=True needs the analytic jac_x")
        self.prob = prob
        self.args = args

    def fun(self, x):
        F = _SVec(self.prob.f(x, *self.args))
        if len(F) != self.prob.n:
            raise ValueError(f"{self.prob.name}: f(x, *args) must return {self.prob.n} "
                             f"residuals, got {len(F)}")
        return F

    def fun_jac(self, x, F=None, last=False, near=None):
        if F is None:
            F = self.fun(x)
        return F, _SMat(self.prob.jac_x(x, *self.args))

    def gauss_newton(self, J, F):
        Jv = _plain(J)
        if not np.all(np.isfinite(Jv)) or _singular(_lu(Jv)[2], len(Jv)):
            return None
        return -_scalar_solve(J, F)




# --------------------------------------------------------------------------------------
# the super node: one primitive, its VJP and JVP side by side
# --------------------------------------------------------------------------------------
@primitive
def _root(prob, *params):
    """The root for plain parameter values (the forward solve)."""
    return prob.solve(params)


def _root_vjp(g, ans, prob, *params):
    # theta_bar = -J_theta^T J_x^-T g: one transposed solve, one nested VJP of f in
    # theta (the Jacobian J_theta is never formed)
    lam = prob.solve_jx(ans, params, g, trans=True)
    jargs = _plain_jargs(prob, ans, g, *params)
    if jargs is None and prob.jargs is None and ans is prob.root and \
            _is_plain(g, *params):
        prob.vjps += 1
        # f's compiled program gives df/dtheta in one call (cheaper than one nested
        # VJP); else, at a second sweep, one vector-mode forward pass
        jargs = _compiled_arg_jacobians(prob, ans, params)
        if jargs is not None:
            prob.jargs = jargs
        elif prob.vjps == 2:
            # a second sweep at the same root: a Jacobian assembled row by row
            # (jacobian_reverse). Form J_theta once, by one vector-mode forward pass
            # (Stan's solver precomputes it likewise); every sweep is then a
            # contraction. A single gradient keeps the one nested VJP.
            prob.jargs = jargs = _ad_arg_jacobians(prob, ans, params)
    if jargs is not None:
        # df/dtheta at the root: a contraction, no sweep through f
        return (None,) + tuple(_contract(-lam, Ja) for Ja in jargs)
    _, grads = vjp(lambda *p: prob.call(ans, p), *params, cotangent=-lam)
    return (None,) + tuple(grads)


def _ad_arg_jacobians(prob, ans, params):
    """``[df/dp for p in params]`` at the root by one vector-mode forward pass (all
    directions at once), each of shape ``(n,) + shape(p)``; None if a primitive of f
    has no JVP rule."""
    n = prob.n
    shapes = [np.shape(p) for p in params]
    sizes = [int(np.prod(sh, dtype=np.int64)) for sh in shapes]
    P = sum(sizes)
    offs = np.cumsum([0] + sizes)
    ts = []
    for a, k, sh in zip(offs, sizes, shapes):
        t = np.zeros((P, k))
        t[a:a + k] = np.eye(k)
        ts.append(t.reshape((P,) + sh))
    try:
        with forward_scope((P,)) as trace:
            y = prob.call(ans, [Dual(p, t, trace) for p, t in zip(params, ts)])
            fdot = y.tangent if isinstance(y, Box) and y.tape is trace else None
    except DifferentiationError:
        return None
    fdot = np.zeros((P, n)) if fdot is None else np.reshape(value_of(fdot), (P, n))
    return [fdot[a:a + k].T.reshape((n,) + sh) for a, k, sh in zip(offs, sizes, shapes)]


def _compiled_arg_jacobians(prob, ans, params):
    """``[df/dp for p in params]`` at the root (plain values) from f's compiled program
    (:mod:`.ode_compiled`: the program of f seen as a right-hand side gives
    ``[df/dt, df/dx, df/dargs]`` in one numba call), or None when f has no program
    (not lowerable, numba absent, switched off) or a parameter is not among the
    program's float inputs. The same derivatives as AD's, from the same recording."""
    from . import ode_compiled
    args = prob.all_args([np.asarray(p, dtype=np.float64) for p in params])
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        ev = ode_compiled.evaluator(_Residual(prob), 0.0, ans, tuple(args))
        if ev is None or not ev.ok or any(i not in ev.pos for i in prob.pos):
            return None
        r = ev.jacobian(0.0, ans, ev.params(args))
    if r is None or not np.all(np.isfinite(r[1])):
        return None
    n, J = prob.n, r[1]
    out = []
    for i in prob.pos:
        k = ev.pos.index(i)
        a = 1 + n + int(ev.offsets[k])
        out.append(np.ascontiguousarray(J[:, a:a + ev.sizes[k]]).reshape(
            (n,) + tuple(ev.shapes[k])))
    return out


def _plain_jargs(prob, ans, *values):
    """The argument Jacobians of the caller's ``jacobians`` at the root, when the rule
    runs on plain values at that root (else None: the rules differentiate f)."""
    if prob.jargs is None or ans is not prob.root or not _is_plain(*values):
        return None
    return prob.jargs


def _contract(w, Ja):
    """``w^T Ja`` over the residual axis: the cotangent of an argument."""
    r = w @ Ja.reshape(w.shape[0], -1)
    return float(r[0]) if Ja.ndim == 1 else r.reshape(Ja.shape[1:])


def _root_jvp(ts, ans, prob, *params):
    # xdot = -J_x^-1 (J_theta thetadot): one (vector-mode) JVP of f in theta
    ts = ts[1:]
    B = next(batch_shape(t, p) for t, p in zip(ts, params) if t is not None)
    n = prob.n
    jargs = _plain_jargs(prob, ans, *params, *[t for t in ts if t is not None])
    if jargs is None and prob.jargs is None and ans is prob.root and \
            _is_plain(*params, *[t for t in ts if t is not None]):
        jargs = prob.jargs = _compiled_arg_jacobians(prob, ans, params)
    if jargs is not None:
        k = int(np.prod(B, dtype=np.int64))
        fdot = np.zeros((n, k))
        for Ja, t in zip(jargs, ts):
            if t is not None:
                fdot += Ja.reshape(n, -1) @ np.reshape(t, (k, -1)).T
        xdot = prob.solve_jx(ans, params, fdot, trans=False)
        return np.reshape(-xdot.T, B + (n,))
    with forward_scope(B) as trace:
        duals = [p if t is None else Dual(p, t, trace) for p, t in zip(params, ts)]
        y = prob.call(ans, duals)
        fdot = y.tangent if isinstance(y, Box) and y.tape is trace else None
    if fdot is None:
        return np.zeros(B + (n,))
    k = int(np.prod(B, dtype=np.int64))
    rhs = transpose(reshape(fdot, (k, n)))                  # (n, k)
    xdot = prob.solve_jx(ans, params, rhs, trans=False)     # (n, k)
    return reshape(-transpose(xdot), B + (n,))


defvjp_all(_root, _root_vjp, nondiff=(0,))
defjvp_all(_root, _root_jvp)


# --------------------------------------------------------------------------------------
# public functions
# --------------------------------------------------------------------------------------
def algebra_solver(f, x_guess, *args, method="powell", rel_tol=1e-10, f_tol=1e-6,
                   max_steps=200, jac_x=None, jacobians=None):
    """Solve ``f(x, *args) = 0`` for ``x`` (n equations, n unknowns), differentiably.

    Parameters
    ----------
    f : callable ``f(x, *args) -> residual vector of length n``, written with stanlite
        operations (so that AD gives df/dx and the derivatives in the arguments).
    x_guess : vector of n floats, the starting point. The root is not differentiated
        with respect to it (locally the root does not depend on the guess). Or a
        callable ``x_guess(*args)`` returning that vector from the plain values of the
        arguments, called at every solve: a guess that follows the parameters (a
        closed-form approximation) and is computed afresh when a recording of the
        model is replayed.
    *args : the parameters and data, passed to ``f`` as given. Every traced argument
        (a ``Var``: ``theta`` inside a model) is differentiated; plain arrays, ints or
        any other object are data. Stan's ``algebra_solver(f, x, theta, x_r, x_i)``
        is ``algebra_solver(f, x, theta, x_r, x_i)`` here.
    method : ``"powell"`` (hybrid dogleg, Stan's ``solve_powell``; robust far from the
        root) or ``"newton"`` (Newton with a backtracking line search).
    rel_tol : relative tolerance on the step (trust-region radius for Powell, Newton
        step for Newton), in the norm scaled by J's column norms.
    f_tol : the largest acceptable ``||f(x*)||_2`` at the end; otherwise ``SolverError``.
    max_steps : maximum number of iterations (function evaluations for Powell).
    jac_x : optional ``jac_x(x, *args) -> n x n`` analytic Jacobian df/dx, replacing the
        AD Jacobian in the iterations and in the derivative rules (for Hessians through
        the solver it must be written with stanlite operations too).
    jacobians : optional ``jacobians(x, *args, wrt=()) -> (f, J_x)``, or ``(f, J_x,
        [df/dargs[i] for i in wrt])`` when ``wrt`` (positions in ``args``) is not
        empty, evaluated on plain floats only: f and its Jacobians computed together
        by the caller (e.g. a period map integrated with its sensitivities), each
        ``df/dargs[i]`` of shape ``(n,) + shape(args[i])``. It replaces AD in the
        iterations, and the argument Jacobians at the root replace the VJP/JVP of
        ``f`` in the first-order rules (one contraction). Every evaluation is asked
        for them (``wrt`` the traced arguments): when the iterations end with a
        Gauss-Newton correction below ``rel_tol``, the evaluation before it serves
        the rules and the f_tol test (conservative), so the corrected point is not
        evaluated again. Under an outer differentiation
        (Hessians) the rules differentiate ``f`` as usual.

    Returns the root, one node on the tape when an argument is traced. Derivatives by
    the implicit function theorem (module docstring): ``dx*/dtheta = -J_x^-1 J_theta``,
    reverse mode with one transposed LU solve and one VJP of ``f`` in the parameters,
    forward mode with one JVP; both nest, so ``sl.hessian`` works through the solver.

    Raises :class:`~stanlite.SolverError` (naming the method, ``||f||`` reached, the
    tolerances and the steps taken) when the iterations do not converge, stall at a
    point that is not a root, or the Jacobian is singular at the root; ``ValueError``
    for a bad ``x_guess``, residual shape or option.

    Example
    -------
    >>> import numpy as np, stanlite as sl
    >>> f = lambda x, theta: x ** 3 - theta                # x* = theta^(1/3)
    >>> sl.algebra_solver(f, np.array([1.0]), np.array([8.0])).round(12)
    array([2.])
    >>> sl.grad(lambda th: sl.algebra_solver(f, np.array([1.0]), th)[0])(np.array([8.0]))
    array([0.08333333])
    """
    prob = _Problem("algebra_solver", f, x_guess, args, method, rel_tol, f_tol,
                    max_steps, jac_x, jacobians)
    if not prob.pos:
        return prob.solve(())
    return _root(prob, *[args[i] for i in prob.pos])


def solve_powell(f, x_guess, *args, rel_tol=1e-10, f_tol=1e-6, max_steps=200,
                 jac_x=None):
    """Stan's ``solve_powell``: :func:`algebra_solver` with ``method="powell"``.

    Example
    -------
    >>> import numpy as np, stanlite as sl
    >>> f = lambda x, a: sl.stack([x[0] - a * x[1], x[0] * x[1] - 1.0])
    >>> sl.solve_powell(f, np.array([1.0, 1.0]), 4.0).round(12)    # x = (2, 1/2)
    array([2. , 0.5])
    """
    return algebra_solver(f, x_guess, *args, method="powell", rel_tol=rel_tol,
                          f_tol=f_tol, max_steps=max_steps, jac_x=jac_x)


def solve_newton(f, x_guess, *args, rel_tol=1e-10, f_tol=1e-6, max_steps=200,
                 jac_x=None):
    """Stan's ``solve_newton``: :func:`algebra_solver` with ``method="newton"``.

    Example
    -------
    >>> import numpy as np, stanlite as sl
    >>> sl.solve_newton(lambda x, c: sl.exp(x) - c, np.array([0.0]), 2.0)   # log 2
    array([0.69314718])
    """
    return algebra_solver(f, x_guess, *args, method="newton", rel_tol=rel_tol,
                          f_tol=f_tol, max_steps=max_steps, jac_x=jac_x)


def algebra_solver_taped(f, x_guess, *args, method="powell", rel_tol=1e-10, f_tol=1e-6,
                         max_steps=200, jac_x=None, linear_solve=None, scalar=False):
    """BENCHMARK BASELINE - not for models: the same iterations as
    :func:`algebra_solver`, run on traced values so that AD records every one of them.

    This is "standard" AD in the AD review's Table 8: the solver templated on the AD
    type and differentiated by brute force. Its derivative is that of the last
    iterate - which approaches dx*/dtheta as the iterations converge - at the price
    of a tape that grows with the number of iterations and, with an AD Jacobian,
    nested differentiation inside every iteration. The super node
    (:func:`algebra_solver`) gives the exact derivative at a fraction of the cost;
    ``benchmarks/algebraic_solver.py`` measures the difference.

    ``linear_solve(J, F) -> J^-1 F`` replaces the ``solve`` primitive (itself a matrix
    super node) in the Gauss-Newton steps, e.g. by Gaussian elimination on scalar
    nodes.

    ``scalar=True``: the whole iteration on scalar nodes, as a solver templated on a
    scalar AD type (Stan's ``var``) records it - every element of every vector
    operation (residual, analytic Jacobian, norms, scaling, dogleg, Gaussian
    elimination) is its own node. ``f(x, *args)`` and ``jac_x(x, *args)`` (required)
    then take ``x`` as an indexable vector of scalars and return a list of scalars
    (a list of rows); the arguments are passed as given (e.g. lists of scalar nodes).
    The root is returned as one stacked vector.

    Example
    -------
    >>> import numpy as np, stanlite as sl
    >>> from stanlite.functor.algebra_solver import algebra_solver_taped
    >>> f = lambda x, theta: x ** 3 - theta
    >>> g = sl.grad(lambda th: algebra_solver_taped(f, np.array([1.0]), th)[0])
    >>> g(np.array([8.0])).round(8)                        # 1 / (3 theta^(2/3))
    array([0.08333333])
    """
    prob = _Problem("algebra_solver_taped", f, x_guess, args, method, rel_tol, f_tol,
                    max_steps, jac_x)
    if scalar:
        x, _, _ = _iterate(_ScalarBackend(prob, list(args)), _SVec(prob.x_guess), prob)
        return stack(x.e) if any(isinstance(e, Box) for e in x.e) else _plain(x)
    be = _TapedBackend(prob, list(args), linear_solve)
    x, _, _ = _iterate(be, prob.x_guess, prob)
    return x
