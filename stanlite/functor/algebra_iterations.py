"""The iterations of the algebraic solver (:mod:`.algebra_solver`): Powell's hybrid
dogleg (MINPACK's ``hybrj``) and Newton's method with a backtracking line search,
written once for the three kinds of values they run on - plain floats (the super
node's forward solve), traced arrays and scalar nodes (the benchmark baseline
:func:`~.algebra_solver.algebra_solver_taped`) - with the small helpers valid on all
three and the vector types of the scalar-node baseline.

A backend (``fun``, ``fun_jac``, ``gauss_newton``; :mod:`.algebra_solver`) supplies f,
J_x and the Gauss-Newton step; decisions are made on plain values.
"""

import math

import numpy as np
from scipy.linalg.lapack import dgecon as _dgecon, dgetrf as _dgetrf, dgetrs as _dgetrs

from ..autodiff.var import Box, value_of
from ..errors import SolverError
from ..math.elementwise import sqrt
from ..math.reductions import sum as _sum
from ..math.structure import transpose, where

_EPS = np.finfo(float).eps

# --------------------------------------------------------------------------------------
# small helpers valid on plain and traced values
# --------------------------------------------------------------------------------------
def _val(x):
    """The plain float underneath (decisions of the iterations are made on values)."""
    return float(value_of(x))


def _norm(v):
    if type(v) is np.ndarray:
        return math.sqrt(float(v @ v))
    if type(v) is _SVec:
        return sqrt(v.dot(v))
    return sqrt(_sum(v * v))


def _dot(a, b):
    """``a . b`` (plain, array nodes, or scalar nodes)."""
    if type(a) is _SVec:
        return a.dot(b)
    return _sum(a * b)


def _colnorms(J):
    if type(J) is np.ndarray:
        return np.sqrt(np.einsum("ij,ij->j", J, J))
    if type(J) is _SMat:
        return _SVec([sqrt(c.dot(c)) for c in J.T.rows])
    return sqrt(_sum(J * J, axis=0))


def _plain(v):
    """The plain values of a vector or matrix (for the iterations' decisions)."""
    if type(v) is _SVec:
        return np.array([_val(e) for e in v.e])
    if type(v) is _SMat:
        return np.array([[_val(e) for e in r.e] for r in v.rows])
    return value_of(v)


def _is_plain(*xs):
    for x in xs:
        if isinstance(x, Box):
            return False
    return True


def _lu(J):
    """LU factors of a plain square matrix and its reciprocal condition number (1-norm),
    by LAPACK directly: dgetrf/dgecon never warn, a singular matrix gives rcond = 0."""
    lu, piv, info = _dgetrf(J)
    if info != 0 or not np.all(np.isfinite(lu)):
        return lu, piv, 0.0
    anorm = float(np.max(np.sum(np.abs(J), axis=0)))
    rcond, info = _dgecon(lu, anorm, norm="1")
    return lu, piv, float(rcond) if info == 0 else 0.0


def _singular(rcond, n):
    return not rcond > n * _EPS


def _lu_solve(lu, piv, b, trans=0):
    x, info = _dgetrs(lu, piv, b, trans=trans)
    return x


# --------------------------------------------------------------------------------------
# the vectors of the scalar-node baseline
# --------------------------------------------------------------------------------------
class _SVec:
    """A vector of scalars (scalar nodes or floats) with element-by-element
    arithmetic: one node per element and operation, what a solver templated on a
    scalar AD type (Stan's ``var``) records. The benchmark baseline's vectors
    (:func:`algebra_solver_taped` with ``scalar=True``); not for models."""

    __slots__ = ("e",)

    def __init__(self, e):
        self.e = list(e)

    def __len__(self):
        return len(self.e)

    def __getitem__(self, i):
        return self.e[i]

    def __iter__(self):
        return iter(self.e)

    def _other(self, o):
        if type(o) is _SVec:
            return o.e
        if type(o) is np.ndarray and o.ndim == 1:
            return [float(v) for v in o]
        return [o] * len(self.e)

    def __add__(self, o):
        return _SVec([a + b for a, b in zip(self.e, self._other(o))])

    def __radd__(self, o):
        return _SVec([b + a for a, b in zip(self.e, self._other(o))])

    def __sub__(self, o):
        return _SVec([a - b for a, b in zip(self.e, self._other(o))])

    def __rsub__(self, o):
        return _SVec([b - a for a, b in zip(self.e, self._other(o))])

    def __mul__(self, o):
        return _SVec([a * b for a, b in zip(self.e, self._other(o))])

    def __rmul__(self, o):
        return _SVec([b * a for a, b in zip(self.e, self._other(o))])

    def __truediv__(self, o):
        return _SVec([a / b for a, b in zip(self.e, self._other(o))])

    def __rtruediv__(self, o):
        return _SVec([b / a for a, b in zip(self.e, self._other(o))])

    def __neg__(self):
        return _SVec([-a for a in self.e])

    def dot(self, o):
        acc = None
        for a, b in zip(self.e, self._other(o)):
            acc = a * b if acc is None else acc + a * b
        return acc


class _SMat:
    """A matrix of scalars, row by row (:class:`_SVec` rows)."""

    __slots__ = ("rows",)

    def __init__(self, rows):
        self.rows = [r if type(r) is _SVec else _SVec(r) for r in rows]

    @property
    def T(self):
        return _SMat([_SVec(c) for c in zip(*[r.e for r in self.rows])])

    def __matmul__(self, v):
        return _SVec([r.dot(v) for r in self.rows])


def _scalar_solve(J, b):
    """``J^-1 b`` by Gaussian elimination with partial pivoting (on values), every
    multiply-add a scalar node (about 2 n^3 / 3 of them)."""
    n = len(b)
    A = [list(r.e) for r in J.rows]
    y = list(b.e)
    for k in range(n):
        piv = max(range(k, n), key=lambda i: abs(_val(A[i][k])))
        A[k], A[piv] = A[piv], A[k]
        y[k], y[piv] = y[piv], y[k]
        for i in range(k + 1, n):
            m = A[i][k] / A[k][k]
            for j in range(k + 1, n):
                A[i][j] = A[i][j] - m * A[k][j]
            y[i] = y[i] - m * y[k]
    x = [None] * n
    for i in reversed(range(n)):
        r = y[i]
        for j in range(i + 1, n):
            r = r - A[i][j] * x[j]
        x[i] = r / A[i][i]
    return _SVec(x)


# --------------------------------------------------------------------------------------
# the iterations, shared by the plain solve and the taped baseline
# --------------------------------------------------------------------------------------
def _fail(prob, msg, steps, fnorm, advice=""):
    raise SolverError(f"{prob.name} ({prob.method}), after {steps} steps: {msg}; "
                      f"||f(x)|| = {fnorm:.3g} (f_tol = {prob.f_tol:g}, rel_tol = "
                      f"{prob.rel_tol:g}, max_steps = {prob.max_steps}){advice}")


def _iterate(be, x0, prob):
    """Run the chosen method; return ``(root, J_x at the root, steps)``."""
    F, J = be.fun_jac(x0)
    fnorm = _val(_norm(F))
    if not math.isfinite(fnorm):
        raise SolverError(f"{prob.name} ({prob.method}): f(x_guess, *args) is not finite "
                          f"(||f|| = {fnorm}); choose another x_guess")
    run = _powell if prob.method == "powell" else _newton
    x, F, J, fnorm, steps, why = run(be, x0, F, J, fnorm, prob)
    # as Stan: however the iterations stopped (converged, or no further progress
    # possible), the point is accepted if and only if ||f|| <= f_tol
    if not fnorm <= prob.f_tol:
        _fail(prob, f"the iterations stopped ({why}) at a point that is not a root "
                    "(||f(x)|| > f_tol)", steps, fnorm,
              ". Try another x_guess, check that f has a root, or lower rel_tol")
    return x, J, steps


def _scaling(D, J):
    """MINPACK's diagonal scaling: the running maximum of J's column norms (a column
    of zeros keeps 1), making the trust region invariant to the units of x."""
    c = _colnorms(J)
    if type(c) is _SVec:
        if D is None:
            return _SVec([e if _val(e) > 0 else 1.0 for e in c.e])
        return _SVec([e if _val(e) > _val(d) else d for e, d in zip(c.e, D.e)])
    cv = value_of(c)
    if D is None:
        return where(cv > 0, c, 1.0) if isinstance(c, Box) else np.where(cv > 0, c, 1.0)
    return where(cv > value_of(D), c, D) if isinstance(c, Box) or isinstance(D, Box) \
        else np.maximum(D, c)


def _below_rel_tol(step, D, x, prob):
    """Whether the scaled ``step`` is below ``rel_tol`` relative to the scaled ``x``."""
    return _val(_norm(D * step)) <= prob.rel_tol * _val(_norm(D * x))


def _last_step(be, x, step, steps):
    """``x + step`` and f, J_x and ||f|| there (evaluated as the last point: its
    Jacobian is the one the derivative rules factorise); -> (x, F, J, ||f||, steps
    taken)."""
    x_prev, x = x, x + step
    F, J = be.fun_jac(x, last=True, near=x_prev)
    return x, F, J, _val(_norm(F)), steps + 1


def _check_budget(prob, steps, fnorm):
    """Fail when ``max_steps`` steps are taken without convergence."""
    if steps >= prob.max_steps:
        _fail(prob, "no convergence (max_steps reached)", steps, fnorm)


def _dogleg(J, F, D, delta, gn):
    """Powell's dogleg step in the variables z = D x for the radius ``delta``.

    Inside the region the Gauss-Newton step ``gn = -J^-1 F`` is taken. Otherwise the
    path runs from 0 to the Cauchy point (the minimiser of ||F + J p|| along the
    scaled steepest-descent direction s = -D^-1 J^T F / ||D^-1 J^T F||) and on to the
    Gauss-Newton point; the step is where it leaves the region. With a singular J
    (``gn`` None) the step is the Cauchy point, cut at the boundary.
    Returns ``(p, ||D p||)``, or ``None`` at a stationary point of ||F||^2 (J^T F = 0).
    """
    dv = _val(delta)
    if gn is not None:
        gn_norm = _norm(D * gn)
        if _val(gn_norm) <= dv:
            return gn, gn_norm
    g = (transpose(J) @ F if isinstance(J, Box) else J.T @ F) / D
    gnorm = _norm(g)
    if not _val(gnorm) > 0:
        return None
    s = -g / gnorm
    Js = J @ (s / D)
    tc = gnorm / _dot(Js, Js)              # |F.Js| = ||g|| because s is a unit vector
    if gn is None or _val(tc) >= dv:
        t = delta if _val(tc) >= dv else tc
        return s * t / D, t
    a = s * tc
    d = D * gn - a
    ad = _dot(a, d)
    dd = _dot(d, d)
    rest = delta * delta - tc * tc          # > 0: the Cauchy point is inside
    root = sqrt(ad * ad + dd * rest)
    # ||a + tau d|| = delta, written without cancellation for either sign of a.d
    tau = (root - ad) / dd if _val(ad) <= 0 else rest / (ad + root)
    return (a + d * tau) / D, delta


def _powell(be, x, F, J, fnorm, prob):
    """Powell's hybrid method with MINPACK's trust-region rules (hybrj): radius
    ``delta = 100 ||D x0||`` cut to the first step; reduction ratio
    rho = actual / predicted reduction of ||F||^2; rho < 0.1 halves the radius,
    rho >= 0.5 (or two successes in a row) lets it grow to 2 ||D p||, and near-perfect
    agreement (|rho - 1| <= 0.1) sets it to 2 ||D p||, so it shrinks quadratically
    with Newton-like steps near the root; a step is accepted when rho >= 1e-4. The
    Jacobian is the exact one, re-evaluated at every accepted point (hybrj uses
    Broyden updates between evaluations; AD makes the exact one affordable and the
    convergence quadratic). Converged when delta <= rel_tol ||D x||, when the
    Gauss-Newton step is below rel_tol (||D p|| <= rel_tol ||D x||; then it is taken),
    or f(x) = 0. MINPACK's "no further progress" conditions (a radius at the roundoff
    level of x, 10 steps without a 0.1% reduction of ||f||) stop the iterations too;
    then, as in Stan, ||f|| <= f_tol decides."""
    D = _scaling(None, J)
    xnorm = _val(_norm(D * x))
    delta = 100.0 * xnorm if xnorm > 0 else 100.0
    gn = be.gauss_newton(J, F)
    steps = 0
    why = "f(x) = 0"
    ncsuc = ncfail = nslow = 0
    while fnorm > 0:
        if gn is not None and _below_rel_tol(gn, D, x, prob):
            # the Gauss-Newton correction is below rel_tol: take it (it squares the
            # error) and stop. Without this test a problem solved to roundoff (a linear
            # one, after one step) would wait for the noise in ||f|| to shrink delta
            x, F, J, fnorm, steps = _last_step(be, x, gn, steps)
            why = "Gauss-Newton step below rel_tol"
            break
        _check_budget(prob, steps, fnorm)
        step = _dogleg(J, F, D, delta, gn)
        if step is None:
            why = ("stuck where the Jacobian df/dx is singular and J^T f = 0: a "
                   "stationary point of ||f||")
            break
        p, pnorm = step
        pv = _val(pnorm)
        if steps == 0 and pv < _val(delta):
            delta = pnorm
        x_new = x + p
        F_new = be.fun(x_new)
        steps += 1
        fnorm1 = _val(_norm(F_new))
        if not math.isfinite(fnorm1):
            fnorm1 = math.inf
        actred = 1.0 - (fnorm1 / fnorm) ** 2 if fnorm1 < fnorm else -1.0
        # ||F + J p||: the linear model's prediction (a decision: plain values only)
        lin = _norm(_plain(F) + _plain(J) @ _plain(p))
        prered = 1.0 - (lin / fnorm) ** 2 if lin < fnorm else 0.0
        ratio = actred / prered if prered > 0 else 0.0
        if ratio < 0.1:
            ncsuc = 0
            ncfail += 1
            delta = 0.5 * delta
        else:
            ncfail = 0
            ncsuc += 1
            if ratio >= 0.5 or ncsuc > 1:
                if 2.0 * pv > _val(delta):
                    delta = 2.0 * pnorm
            if abs(ratio - 1.0) <= 0.1:
                delta = 2.0 * pnorm
        if ratio >= 1e-4:
            x = x_new
            F, J = be.fun_jac(x, None if be.taped else F_new)
            fnorm = fnorm1
            D = _scaling(D, J)
            gn = be.gauss_newton(J, F)
        nslow = nslow + 1 if actred < 1e-3 else 0
        xnorm = _val(_norm(D * x))
        if _val(delta) <= prob.rel_tol * xnorm:
            why = "trust region below rel_tol"
            break
        # MINPACK's "no further improvement possible": steps at the roundoff level of
        # x, or 10 steps without reducing ||f|| by 0.1% (typically: ||f|| is at the
        # roundoff level of the residual itself)
        if 0.1 * max(0.1 * _val(delta), pv) <= _EPS * xnorm:
            why = "step at the roundoff level of x"
            break
        if nslow >= 10:
            why = "10 steps without reducing ||f|| by 0.1%"
            break
    return x, F, J, fnorm, steps, why


def _newton(be, x, F, J, fnorm, prob):
    """Newton's method with a backtracking line search on phi = ||F||^2 / 2
    (Armijo condition phi(l) <= (1 - 2e-4 l) phi(0), since phi'(0) = -||F||^2 along the
    Newton direction; the next l minimises the quadratic through phi(0), phi'(0) and
    phi(l), kept in [0.1 l, 0.5 l]). Converged when the full Newton step is below
    rel_tol in the scaled norm (||D p|| <= rel_tol ||D x||; that last step is taken)
    or f(x) = 0."""
    D = _scaling(None, J)
    steps = 0
    why = "f(x) = 0"
    while fnorm > 0:
        gn = be.gauss_newton(J, F)
        if gn is None:
            _fail(prob, "singular Jacobian df/dx (no Newton step)", steps, fnorm)
        if _below_rel_tol(gn, D, x, prob):
            # converged: the last (tiny) step still squares the error, and the
            # Jacobian at the returned point is the one the rules factorise
            x, F, J, fnorm, steps = _last_step(be, x, gn, steps)
            why = "Newton step below rel_tol"
            break
        _check_budget(prob, steps, fnorm)
        lam = 1.0
        phi0 = fnorm * fnorm
        while True:
            x_new = x + lam * gn if lam != 1.0 else x + gn
            F_new = be.fun(x_new)
            f1 = _val(_norm(F_new))
            phi = f1 * f1 if math.isfinite(f1) else math.inf
            if phi <= (1.0 - 2e-4 * lam) * phi0:
                break
            if lam < 1e-10:
                # no decrease along the Newton direction (at a root, ||f|| is at its
                # roundoff level): stop here and let f_tol decide
                return x, F, J, fnorm, steps, "the line search found no decrease of ||f||"
            # minimiser of q(l) = phi0 - phi0 l + c l^2 through phi(lam)
            c = (phi - phi0 + phi0 * lam) / (lam * lam)
            lam_q = phi0 / (2.0 * c) if c > 0 and math.isfinite(c) else 0.0
            lam = min(max(lam_q, 0.1 * lam), 0.5 * lam)
        steps += 1
        x = x_new
        F, J = be.fun_jac(x, None if be.taped else F_new)
        fnorm = f1
        D = _scaling(D, J)
    return x, F, J, fnorm, steps, why
