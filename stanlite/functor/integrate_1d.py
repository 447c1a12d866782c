"""One-dimensional integrals of a user function, differentiable in the parameters and
the limits: Stan's ``integrate_1d``.

    I(a, b, theta) = int_a^b f(x, xc, theta, x_r, x_i) dx

The value comes from adaptive Gauss-Kronrod quadrature on plain floats (QUADPACK
through scipy.integrate.quad, with its extrapolation for endpoint singularities;
infinite limits by its change of variables), and one node goes on the tape. Its derivatives are integrals too (Leibniz's rule,
differentiating under the integral sign), never derivatives of the quadrature:

    dI/dtheta = int_a^b df/dtheta dx,     dI/db = f(b, ...),     dI/da = -f(a, ...)

(a limit's term is zero where the limit is infinite). The theta-gradient integrand
is f's reverse-mode gradient at each quadrature point (computed once per point for
all components), each component integrated by QUADPACK as the value is. Both rules call the same
primitive again, on the derivative integrand, so derivatives of every order exist
(a Hessian integrates f's Hessian in theta).

Stan's conventions: ``xc`` is the distance to the nearer finite limit, ``a - x``
near a and ``b - x`` near b (here computed as that difference, not with extra
precision), NaN when a limit is infinite. The quadrature stops at
``relative_tolerance`` (default sqrt(machine epsilon), as Stan); when QUADPACK
reports that it could not reach it, the integral is solved again to an absolute
tolerance of the tolerance times the integral of |f| (Stan's criterion, which also
accepts integrals that cancel to zero); if that fails too, a
:class:`~stanlite.errors.SolverError` names the integral, the tolerance and the
error reached. NaN from the integrand is a :class:`~stanlite.errors.DomainError`.
Parameters reach f only through theta (Stan's rule): an integrand that reads another
traced value, captured from the enclosing scope, raises
:class:`~stanlite.errors.DifferentiationError` instead of losing its derivative.

scipy.integrate is imported at the first integral, not by ``import stanlite``.
"""

import math

import numpy as np

from ..autodiff.extend import batch_shape, defjvp_all, defvjp, primitive, reshape
from ..autodiff.functional import jacobian
from ..autodiff.var import Box, guarded, shape_of
from ..errors import DifferentiationError, DomainError, SolverError
from ..math.linalg import matmul
from ..math.structure import stack, transpose

__all__ = ["integrate_1d"]

_SQRT_EPS = math.sqrt(np.finfo(float).eps)


class _Integrand:
    """``h(x, xc, theta)``: the user's integrand (order 0) or its ``order``-th
    derivative in theta (an array of ``order`` trailing theta axes)."""

    def __init__(self, f, x_r, x_i, tol, order=0, base=None):
        self.f = f
        self.x_r = x_r
        self.x_i = x_i
        self.tol = tol
        self.order = order
        self.base = base if base is not None else self

    def __call__(self, x, xc, theta):
        if self.order == 0:
            return self.f(x, xc, theta, self.x_r, self.x_i)
        lower = self.lower
        return jacobian(lambda t: lower(x, xc, t))(theta)

    def derivative(self):
        """The integrand of dI/dtheta: this one's Jacobian in theta."""
        d = self.__dict__.get("_derivative")
        if d is None:
            d = _Integrand(self.f, self.x_r, self.x_i, self.tol, self.order + 1, self.base)
            d.lower = self
            self._derivative = d
        return d


def _xc(x, a, b):
    """Stan's complement: a - x near a, b - x near b; NaN with an infinite limit."""
    if math.isinf(a) or math.isinf(b):
        return math.nan
    return a - x if x - a <= b - x else b - x


def _plain_value(h, x, a, b, theta):
    # NaN is reported below, naming x: numpy's warnings on the way are not needed
    with np.errstate(divide="ignore", invalid="ignore"):
        v = h(x, _xc(x, a, b), theta)
    if isinstance(v, Box):
        # theta is plain here: the integrand read another traced value (a closure over
        # a parameter), whose derivative the quadrature would silently drop
        raise DifferentiationError(
            "integrate_1d: the integrand depends on a traced value other than theta (a "
            "parameter captured from the enclosing scope?); pass every parameter in theta")
    v = np.asarray(v, dtype=float)
    if np.isnan(v).any():
        raise DomainError(f"integrate_1d: the integrand is NaN at x = {x!r} "
                          f"(theta = {np.asarray(theta).tolist()})")
    return v


def _quad1(fx, a, b, tol, what):
    """QUADPACK's int_a^b fx to relative tolerance ``tol`` (or Stan's L1 criterion)."""
    from scipy.integrate import quad    # first use (module doc)
    r = quad(fx, a, b, epsabs=0.0, epsrel=tol, limit=200, full_output=1)
    val, err = r[0], r[1]
    if len(r) > 3:
        # QUADPACK's ier > 0: the relative tolerance was not reached, as happens for an
        # integral that cancels (to zero, e.g. a normalised density's derivative); Stan
        # asks for the error relative to the integral of |f| instead: solve again with
        # that as an absolute tolerance
        l1 = quad(lambda x: abs(fx(x)), a, b, epsabs=0.0, epsrel=tol, limit=200,
                  full_output=1)[0]
        r = quad(fx, a, b, epsabs=tol * l1, epsrel=tol, limit=200, full_output=1)
        val, err = r[0], r[1]
        if len(r) > 3 and not err <= tol * l1:
            raise SolverError(
                f"integrate_1d: the error estimate of {what} over [{a}, {b}], {err:.3g}, "
                f"exceeds relative_tolerance = {tol:g} times the integral of |f|, "
                f"{l1:.3g} (QUADPACK: {r[3].splitlines()[0]})")
    return val


def _quad(h, a, b, theta):
    """int_a^b h dx on plain values, to h's relative tolerance (see module doc): one
    QUADPACK integral per component of h (as Stan integrates each gradient component
    separately: QUADPACK's extrapolation copes with the endpoint singularities that
    derivatives such as d/da x^(a-1) = log(x) x^(a-1) have), h evaluated once per
    point for all components."""
    tol = h.tol
    if h.order == 0:
        if a == b:
            return 0.0
        return _quad1(lambda x: float(_plain_value(h, x, a, b, theta)), a, b, tol,
                      "the integral")
    memo = {}

    def hx(x):
        v = memo.get(x)
        if v is None:
            v = memo[x] = np.ravel(_plain_value(h, x, a, b, theta))
        return v
    shape = np.shape(_plain_value(h, 0.5 * (a + b) if np.isfinite(a + b) else 0.0,
                                  a, b, theta))
    out = np.zeros(int(np.prod(shape, dtype=np.int64)))
    if a != b:
        for k in range(out.size):
            out[k] = _quad1(lambda x, k=k: hx(x)[k], a, b, tol,
                            f"the derivative integral (component {k})")
    return out.reshape(shape)


# --------------------------------------------------------------------------------------
# the super node: one primitive, its VJP and JVP side by side
# --------------------------------------------------------------------------------------
@primitive(name="integrate_1d")
def _integral(h, a, b, theta):
    """int_a^b h(x, xc, theta) dx for plain values."""
    v = _quad(h, float(a), float(b), theta)
    return float(v) if np.ndim(v) == 0 else np.asarray(v, dtype=float)


def _limit_term(h, a, b, theta, at):
    """h at a finite limit (xc = 0 there); None at an infinite one (its term is 0)."""
    if guarded(lambda v: math.isinf(float(v)), at):
        return None
    return h(at, 0.0, theta)


def _contract_out(g, j, out_nd):
    """sum over the output axes of g (shape S) times j (shape S + (P,)): shape (P,)."""
    if out_nd == 0:
        return g * j
    p = shape_of(j)[-1]
    return matmul(reshape(g, (1, -1)), reshape(j, (-1, p)))[0]


def _integral_vjp_theta(g, ans, h, a, b, theta):
    return _contract_out(g, _integral(h.derivative(), a, b, theta), len(shape_of(ans)))


def _integral_vjp_a(g, ans, h, a, b, theta):
    fa = _limit_term(h, a, b, theta, a)
    return 0.0 if fa is None else -_dot_out(g, fa, len(shape_of(ans)))


def _integral_vjp_b(g, ans, h, a, b, theta):
    fb = _limit_term(h, a, b, theta, b)
    return 0.0 if fb is None else _dot_out(g, fb, len(shape_of(ans)))


def _dot_out(g, v, nd):
    if nd == 0:
        return g * v
    from ..math.reductions import sum as _sum
    return _sum(g * v)


def _integral_jvp(ts, ans, h, a, b, theta):
    _, ta, tb, tt = ts
    out = shape_of(ans)
    tan = None
    if tt is not None:
        B = batch_shape(tt, theta)
        k = int(np.prod(B, dtype=np.int64))
        j = _integral(h.derivative(), a, b, theta)            # S + (P,)
        p = shape_of(j)[-1]
        c = matmul(reshape(tt, (k, p)), transpose(reshape(j, (-1, p))))   # (k, |S|)
        tan = reshape(c, B + out)
    for t, at, sign in ((ta, a, -1.0), (tb, b, 1.0)):
        if t is None:
            continue
        f = _limit_term(h, a, b, theta, at)
        if f is None:
            continue
        B = batch_shape(t, at)
        c = sign * reshape(t, B + (1,) * len(out)) * f
        tan = c if tan is None else tan + c
    return tan


defvjp(_integral, None, _integral_vjp_a, _integral_vjp_b, _integral_vjp_theta)
defjvp_all(_integral, _integral_jvp)


# --------------------------------------------------------------------------------------
# the public function
# --------------------------------------------------------------------------------------
def _as_theta(theta):
    if isinstance(theta, (list, tuple)):
        if any(isinstance(t, Box) for t in theta):
            return stack(list(theta))
        theta = np.asarray(theta, dtype=float)
    if isinstance(theta, Box):
        s = shape_of(theta)
    else:
        theta = np.asarray(theta, dtype=float)
        s = theta.shape
    if len(s) != 1:
        raise ValueError(f"integrate_1d: theta must be a 1-D array (Stan's array[] real), "
                         f"but has shape {s}")
    return theta


def _check_limit(name, v):
    if shape_of(v) != ():
        raise ValueError(f"integrate_1d: {name} must be a scalar, but has shape "
                         f"{shape_of(v)}")
    if guarded(lambda x: math.isnan(float(x)), v):
        raise DomainError(f"integrate_1d: {name} must not be NaN")


def integrate_1d(f, a, b, theta=(), x_r=(), x_i=(), relative_tolerance=_SQRT_EPS):
    """``int_a^b f(x, xc, theta, x_r, x_i) dx`` (Stan's ``integrate_1d``),
    differentiable in ``theta`` and in the limits ``a`` and ``b``.

    ``f(x, xc, theta, x_r, x_i)`` returns the integrand at the float ``x``; ``xc`` is
    the distance to the nearer limit (``a - x`` or ``b - x``; NaN if a limit is
    infinite), ``theta`` a 1-D array of parameters (traced when differentiated:
    write ``f`` with stanlite or numpy functions), ``x_r``/``x_i`` data passed
    through. ``a <= b``, either may be infinite. The value comes from adaptive
    quadrature to ``relative_tolerance``; dI/dtheta is the integral of df/dtheta,
    dI/db = f(b), dI/da = -f(a) (see the module doc).

    >>> import numpy as np, stanlite as sl
    >>> f = lambda x, xc, th, x_r, x_i: sl.exp(-th[0] * x * x)
    >>> round(sl.integrate_1d(f, -np.inf, np.inf, np.array([2.0])), 10)  # sqrt(pi / 2)
    1.2533141373
    >>> g = sl.grad(lambda th: sl.integrate_1d(f, 0.0, np.inf, th))(np.array([2.0]))
    >>> np.round(g, 8)   # d/dth sqrt(pi / th) / 2 = -sqrt(pi) / (4 th^1.5)
    array([-0.15666427])
    """
    if not callable(f):
        raise TypeError(f"integrate_1d: f must be a function f(x, xc, theta, x_r, x_i), "
                        f"got {type(f).__name__}")
    tol = float(relative_tolerance)
    if not tol > 0:
        raise ValueError(f"integrate_1d: relative_tolerance must be positive, got {tol}")
    _check_limit("a", a)
    _check_limit("b", b)
    if guarded(lambda x, y: float(x) > float(y), a, b):
        raise DomainError(f"integrate_1d: the lower limit a = {float(_v(a))!r} must be less "
                          f"than or equal to the upper limit b = {float(_v(b))!r}")
    theta = _as_theta(theta)
    h = _Integrand(f, x_r, x_i, tol)
    return _integral(h, a, b, theta)


def _v(x):
    while isinstance(x, Box):
        x = x.value
    return x
