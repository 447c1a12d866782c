r"""Linear interpolation of time-varying covariates, differentiable and branch-free.

Torsten's ``linear_interpolation(xout, x, y)``: a covariate measured at times
``x_0 < x_1 < ... < x_K`` (body weight, creatinine clearance, a lab value) is
continued between them by straight lines and held constant outside:

.. math::

    v(t) = v_0 + \sum_{k=0}^{K-1} s_k \big(\min(\max(t, x_k), x_{k+1}) - x_k\big),
    \qquad s_k = \frac{v_{k+1} - v_k}{x_{k+1} - x_k}.

Written this way (``max(u, 0) = (u + |u|) / 2``) the function has no branch on ``t``:
the same operations hold for every ``t``, so it can sit inside an ODE right-hand side
that the compiled interpreter runs (``sl.pk.ode``, ``sl.ode_rk45``), where ``t`` is
the integrator's time. Derivatives: in ``t`` the slope of the segment (the mean of the
two slopes exactly at a knot, where ``v`` has a kink; 0 outside the range), and in
the ``values`` (which may be parameters) the hat functions of the knots.
"""

import numpy as np

from ..autodiff.var import Box, shape_of
from ..errors import DataError
from ..math.elementwise import fabs
from ..math.reductions import sum as _sum
from ..math.structure import expand_dims
from .dosing import as_numbers

__all__ = ["interpolate_linear"]


def _pos(x):
    return 0.5 * (x + fabs(x))


def _knots(times):
    """The knot times: a finite, strictly increasing vector (DataError); traced
    knots (an ODE right-hand side's data, recorded) are only checked for shape, their
    values being out of reach of a recording."""
    if isinstance(times, Box):
        if len(shape_of(times)) != 1 or shape_of(times)[0] == 0:
            raise DataError(f"interpolate_linear: times must be a non-empty vector, got "
                            f"shape {shape_of(times)}")
        return times
    try:
        x = np.asarray(times, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(f"interpolate_linear: times must be numbers, got "
                        f"{type(times).__name__}") from None
    if x.ndim != 1 or x.size == 0:
        raise DataError(f"interpolate_linear: times must be a non-empty vector, got "
                        f"shape {x.shape}")
    bad = np.flatnonzero(~np.isfinite(x))
    if bad.size:
        raise DataError(f"interpolate_linear: times[{int(bad[0])}] = {x[bad[0]]}: times "
                        "must be finite")
    bad = np.flatnonzero(np.diff(x) <= 0)
    if bad.size:
        i = int(bad[0]) + 1
        raise DataError(f"interpolate_linear: times[{i}] = {x[i]:g} <= times[{i - 1}] "
                        f"= {x[i - 1]:g}: times must be strictly increasing")
    return x


def interpolate_linear(t, times, values):
    r"""The piecewise-linear interpolant of ``values`` at ``times``, evaluated at ``t``.

    Parameters
    ----------
    t : a time (scalar) or a vector of times; plain or traced (an ODE's time).
    times : the knots, a strictly increasing vector of ``K + 1`` numbers (data; inside
        an ODE right-hand side the solver hands data arrays over as traced inputs,
        which is fine).
    values : the covariate at the knots, a vector of ``K + 1`` (plain or traced).

    Returns a scalar for a scalar ``t``, a vector for a vector ``t``: the value of the
    interpolant, constant before ``times[0]`` and after ``times[-1]`` (module
    docstring for the formula and derivatives). Torsten's
    ``linear_interpolation``. Bad ``times`` or ``values`` raise
    :class:`~stanlite.errors.DataError` naming the argument.

    Example: weight measured on days 0, 10 and 20; its value on day 5, and a
    clearance that follows it inside an ODE right-hand side (``t`` is the solver's
    time; the knots and weights are data arguments of ``f``).

    >>> import numpy as np, stanlite as sl
    >>> days, wt = np.array([0.0, 10.0, 20.0]), np.array([70.0, 60.0, 64.0])
    >>> float(sl.pk.interpolate_linear(5.0, days, wt))
    65.0
    >>> sl.pk.interpolate_linear(np.array([-1.0, 15.0, 30.0]), days, wt)
    array([70., 62., 64.])
    >>> def f(t, x, theta, days, wt):
    ...     CL = theta[0] * (sl.pk.interpolate_linear(t, days, wt) / 70.0) ** 0.75
    ...     return -CL / theta[1] * x
    >>> ev = sl.pk.events(time=[0.0, 12.0], evid=[1, 0], amt=[100.0, 0.0])
    >>> A = sl.pk.ode(f, 1, ev, np.array([5.0, 50.0]), data=(days, wt))
    >>> A.shape
    (2, 1)
    """
    # (inside an ODE right-hand side the solver passes data arrays as traced inputs)
    x = _knots(times)
    K = shape_of(x)[0]
    values = as_numbers(values, "interpolate_linear: values must be numbers", DataError)
    if shape_of(values) != (K,):
        raise DataError(f"interpolate_linear: values must have one value per time "
                        f"({K}), got shape {shape_of(values)}")
    if not isinstance(t, Box):
        t = np.asarray(t, dtype=np.float64)
        if t.ndim > 1:
            raise DataError(f"interpolate_linear: t must be a scalar or a vector, got "
                            f"shape {t.shape}")
        if not isinstance(values, Box) and not isinstance(x, Box):
            return np.interp(t, x, values) if t.ndim else float(np.interp(t, x, values))
    elif len(shape_of(t)) > 1:
        raise DataError(f"interpolate_linear: t must be a scalar or a vector, got shape "
                        f"{shape_of(t)}")
    if K == 1:
        v0 = values[0]
        return v0 if shape_of(t) == () else v0 * np.ones(shape_of(t)[0])
    lo = x[:-1]
    h = x[1:] - lo
    slope = (values[1:] - values[:-1]) / h
    if shape_of(t) == ():
        return values[0] + _sum(slope * (h - _pos(h - _pos(t - lo))))
    u = expand_dims(t, -1) - lo                       # (T, K)
    return values[0] + _sum(slope * (h - _pos(h - _pos(u))), axis=1)
