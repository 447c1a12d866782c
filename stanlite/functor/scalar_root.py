"""A root of a scalar function of plain floats in a bracket, by Brent's method.

Why here rather than ``scipy.optimize.brentq``: importing ``scipy.optimize`` costs
0.1-0.2 s of CPU in a new process (it pulls in ``scipy.sparse`` and its linear
algebra), and a model that needs one bracketed root per gradient - a closed-form
starting guess for the algebraic solver (``models/mm_multidose_ss.py``) - paid it
before its first draw (issue 20, point 6). This is a few dozen lines of arithmetic.

The method (R. P. Brent, *Algorithms for Minimization without Derivatives*, 1973,
ch. 4): keep a bracket ``[b, c]`` with ``f(b)`` and ``f(c)`` of opposite signs, ``b``
the end with the smaller ``|f|`` (the current estimate), and step from ``b`` by
inverse quadratic interpolation through the last three points (or the secant through
two), falling back to bisection whenever the interpolated step leaves the bracket's
safe part or does not shrink fast enough. The evaluations are then at most about
the square of bisection's count (Brent's bound; a multiple root comes near it), and
on a smooth function with a simple root the convergence is superlinear: fewer than
bisection's. The steps are the classic ones of Brent's ``zeroin``; scipy's
``brentq`` extrapolates in another form, so the two agree to the tolerance, not bit
for bit.
"""

import math

from ..errors import DomainError, SolverError

__all__ = ["brent"]


def brent(f, a, b, *, xtol=2e-12, rtol=8.881784197001252e-16, maxiter=100):
    """A root of ``f`` (a function of one float returning a float) between ``a`` and
    ``b``, where ``f(a)`` and ``f(b)`` differ in sign (or one is 0).

    Returns ``x`` with ``|x - x*| <= xtol + rtol |x|`` for a root ``x*`` of ``f`` in
    the bracket (a sign change: ``f`` need only be continuous there). ``rtol``
    defaults to ``4 eps``, the smallest that still terminates near a large root.

    Raises :class:`~stanlite.errors.DomainError` (a ``ValueError``) when the bracket
    is not one - an end or ``f`` at an end not finite, ``a == b``, or ``f(a)`` and
    ``f(b)`` of the same sign - or ``f`` is not finite at a point inside it, and
    :class:`~stanlite.errors.SolverError` (an ``ArithmeticError``) when ``maxiter``
    evaluations past the ends did not reach the tolerance.
    """
    a, b = float(a), float(b)
    if not (math.isfinite(a) and math.isfinite(b)):
        raise DomainError(f"brent: the bracket [{a!r}, {b!r}] must be finite")
    if a == b:
        raise DomainError(f"brent: the bracket [{a!r}, {b!r}] is empty (a == b)")
    if not (xtol > 0.0 and rtol >= 0.0):
        raise DomainError(f"brent: xtol must be > 0 and rtol >= 0, got xtol = {xtol!r}, "
                          f"rtol = {rtol!r}")
    fa = _value(f, a)
    fb = _value(f, b)
    if fa == 0.0:
        return a
    if fb == 0.0:
        return b
    if (fa > 0.0) == (fb > 0.0):
        raise DomainError(f"brent: f has the same sign at both ends of the bracket: "
                          f"f({a!r}) = {fa!r}, f({b!r}) = {fb!r}")
    # b: the estimate; c: the other end of the bracket; a: the previous estimate
    c, fc = a, fa
    step = prev = b - a         # the last step, the one before it
    for _ in range(maxiter):
        if (fb > 0.0) == (fc > 0.0):
            # the last step crossed no sign change: the bracket is [a, b] again
            c, fc = a, fa
            step = prev = b - a
        if abs(fc) < abs(fb):
            # b the end nearer the root (by |f|); a follows it as the previous point
            a, fa = b, fb
            b, fb = c, fc
            c, fc = a, fa
        tol = 0.5 * (xtol + rtol * abs(b))
        half = 0.5 * (c - b)            # bisection's step, towards c
        if fb == 0.0 or abs(half) <= tol:
            return b
        if abs(prev) >= tol and abs(fa) > abs(fb):
            # interpolation: the secant when only two points are distinct, else the
            # inverse quadratic through (a, fa), (b, fb), (c, fc); written as p / q
            s = fb / fa
            if a == c:
                p = 2.0 * half * s
                q = 1.0 - s
            else:
                qa = fa / fc
                r = fb / fc
                p = s * (2.0 * half * qa * (qa - r) - (b - a) * (r - 1.0))
                q = (qa - 1.0) * (r - 1.0) * (s - 1.0)
            if p > 0.0:
                q = -q
            else:
                p = -p
            # accepted if it stays within 3/4 of the way to c and is less than half
            # the step before last (else the bracket might shrink too slowly)
            if 2.0 * p < min(3.0 * half * q - abs(tol * q), abs(prev * q)):
                prev, step = step, p / q
            else:
                prev = step = half
        else:
            prev = step = half
        a, fa = b, fb
        # never a step shorter than the tolerance (it would not move b measurably)
        b += step if abs(step) > tol else math.copysign(tol, half)
        fb = _value(f, b)
    raise SolverError(f"brent: no convergence in maxiter = {maxiter} evaluations: the "
                      f"bracket is [{min(b, c)!r}, {max(b, c)!r}], its half-width "
                      f"{abs(c - b) / 2:.3g} > the tolerance "
                      f"{0.5 * (xtol + rtol * abs(b)):.3g}")


def _value(f, x):
    v = float(f(x))
    if not math.isfinite(v):
        raise DomainError(f"brent: f({x!r}) = {v!r} is not finite")
    return v
