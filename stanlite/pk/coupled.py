r"""Coupled PK/PD: a linear PK model in closed form driving an ODE PD model.

Torsten's ``pmx_solve_onecpt_rk45`` / ``_bdf`` and ``pmx_solve_twocpt_rk45`` /
``_bdf``: the states are ``(a, y)``, the ``n_pk`` amounts ``a`` of a one- or
two-compartment model with first-order absorption and the ``n_pd`` states ``y`` of a
pharmacodynamic model driven by them,

.. math::

    a' = K a + r_{pk} \quad\text{(linear: closed form)}, \qquad
    y' = f(t, y, a(t), \theta) + r_{pd} \quad\text{(ODE)}.

The events are processed as by :func:`~stanlite.pk.ode` (:mod:`.nonlinear`: doses,
infusions, resets, lags, ``F``, additional doses, in NONMEM's order); between two
events only ``y`` is integrated, by the ODE super node, and ``a`` is a known function
of time inside its right-hand side. With distinct rates ``lambda_j`` (the
eigenvalues of ``-K``: ``ka, k`` or ``ka, alpha, beta``), Sylvester's formula

.. math::

    e^{K u} = \sum_j P_j e^{-\lambda_j u}, \qquad
    P_j = \prod_{i \ne j} \frac{K + \lambda_i I}{\lambda_i - \lambda_j},

gives the amounts ``u`` after the segment's start ``t0`` from the modal vectors
``M_j = P_j a(t0)`` (and ``N_j = P_j r`` for a running infusion at rates ``r``)::

    a(t0 + u) = sum_j e^{-lambda_j u} M_j + sum_j (1 - e^{-lambda_j u}) / lambda_j N_j,

one small matrix product: the right-hand side lowers to the compiled interpreter in
a few instructions more than ``f``'s own, and the integrator steps in numba
(:mod:`stanlite.functor.ode_steppers`), with forward sensitivities in ``M``, the
rates (hence in the PK parameters, doses, ``F``, ``tlag``, ...) and ``theta``.
Because ``a`` is not a state, the fast PK rates do not limit the step of the
explicit integrator (in the full ODE they make the system stiff), and the
sensitivity system has ``n_pd (1 + K)`` states instead of ``(n_pk + n_pd)(1 + K)``.
The PK columns of the result are the same sums of exponentials at the records.

Accuracy: the sums of exponentials need distinct rates, as Torsten's closed forms
do: ``ka = CL / V`` exactly (one compartment) or ``ka`` equal to ``alpha`` or
``beta`` divides by zero, and close rates lose digits as ``eps / |ka - k|``. The
closed forms of :func:`~stanlite.pk.onecpt` (divided differences) have no such limit.

Not supported: steady-state records (``ss > 0``: a :class:`~stanlite.errors.DataError`
names the record).
"""

import numpy as np

from ..autodiff.var import Box, shape_of
from ..errors import DataError
from ..functor.ode import ode_bdf, ode_rk45
from ..math.elementwise import exp, expm1, sqrt
from ..math.structure import concatenate, expand_dims, stack
from .analytic import _by_record, _param, _positive
from .dosing import as_numbers, check_compartments, expand, plan
from .nonlinear import events_of_subjects
from .per_record import PerRecordSystem, theta_per_record
from .steady_state import OdeSystem

__all__ = ["onecpt_ode", "twocpt_ode", "projectors", "pk_amounts", "CoupledSystem"]


class _OneCpt:
    """``gut' = -ka gut``, ``cent' = ka gut - k cent``; parameters (CL, V, ka)."""

    n = 2
    names = ("CL", "V", "ka")

    @staticmethod
    def setup(p):
        ka, k = p[2], p[0] / p[1]
        return (ka, k), (ka, k)

    @staticmethod
    def matrix(d):
        ka, k = d
        return stack([stack([-ka, 0.0 * ka]), stack([ka, -k])])


class _TwoCpt:
    """The two-compartment model with absorption of :func:`~stanlite.pk.twocpt`;
    parameters (CL, Q, V2, V3, ka); rates ``ka, alpha, beta`` (computed without
    cancellation, as :class:`~stanlite.pk.analytic.TwoCptKernel`)."""

    n = 3
    names = ("CL", "Q", "V2", "V3", "ka")

    @staticmethod
    def setup(p):
        k10, k12, k21, ka = p[0] / p[2], p[1] / p[2], p[1] / p[3], p[4]
        S = k10 + k12 + k21
        dk = k10 - k21
        R = sqrt(dk * dk + k12 * (k12 + 2.0 * (k10 + k21)))
        alpha = 0.5 * (S + R)
        beta = 2.0 * k10 * k21 / (S + R)
        return (ka, alpha, beta), (k10, k12, k21, ka)

    @staticmethod
    def matrix(d):
        k10, k12, k21, ka = d
        z = 0.0 * ka
        return stack([stack([-ka, z, z]), stack([ka, -(k10 + k12), k21]),
                      stack([z, k12, -k21])])


def projectors(model, p):
    r"""The rates ``lambda`` (a vector of ``m``) and Sylvester's projectors ``P``
    (``m x n x n``) of the PK model with parameters ``p`` (``model.names``):
    ``e^{K u} = sum_j P_j e^{-lambda_j u}`` (module docstring); a few small matrix
    products, once per subject."""
    from ..math.linalg import matmul
    lam, d = model.setup(p)
    K = model.matrix(d)
    eye = np.eye(model.n)
    m = len(lam)
    P = []
    for j in range(m):
        Pj = None
        den = 1.0
        for i in range(m):
            if i != j:
                Fi = K + lam[i] * eye
                Pj = Fi if Pj is None else matmul(Pj, Fi)
                den = den * (lam[i] - lam[j])
        P.append(Pj / den)
    return stack(list(lam)), stack(P)


def pk_amounts(u, lam, M, N=None):
    r"""The PK amounts ``u`` after a time ``t0`` (``u`` a scalar or a vector of
    ``T``), from the modal vectors ``M = P a(t0)`` (``m x n``) and, with an infusion
    running at rates ``r`` (per compartment), ``N = P r``:

    .. math::

        a(t_0 + u) = \sum_j e^{-\lambda_j u} M_j
                     + \sum_j \frac{1 - e^{-\lambda_j u}}{\lambda_j} N_j.

    Elementwise operations and one small matrix product: the right-hand side that
    calls it lowers to the compiled interpreter in a few instructions. Returns a
    vector of ``n`` (scalar ``u``) or ``T x n``."""
    from ..math.linalg import matmul
    v = u * lam if shape_of(u) == () else expand_dims(u, -1) * lam
    out = matmul(exp(-v), M)
    if N is not None:
        out = out + matmul(-expm1(-v) / lam, N)
    return out


# --------------------------------------------------------------------------------------
# the coupled system for the event-driven solver (.nonlinear)
# --------------------------------------------------------------------------------------
_RHS = {}


def _coupled_rhs(f, infusion):
    """The right-hand side of the PD states, one per ``f`` (with or without a running
    PK infusion), so that compiled evaluators are shared between solves
    (:func:`stanlite.functor.ode_compiled.evaluator` keys them by the function)."""
    key = (f, infusion)
    try:
        rhs = _RHS.get(key)
    except TypeError:
        rhs = None
    if rhs is None:
        if infusion:
            def rhs(t, y, t0, lam, M, N, theta, rate, *data):
                return f(t, y, pk_amounts(t - t0, lam, M, N), theta, *data) + rate
        else:
            def rhs(t, y, t0, lam, M, theta, rate, *data):
                return f(t, y, pk_amounts(t - t0, lam, M), theta, *data) + rate
        try:
            _RHS[key] = rhs
            if len(_RHS) > 32:
                _RHS.pop(next(iter(_RHS)))
        except TypeError:
            pass
    return rhs


def _part(x, lo, hi):
    return x[lo:hi] if isinstance(x, Box) else np.asarray(x, dtype=np.float64)[lo:hi]


def _zero(x):
    return not isinstance(x, Box) and not np.any(x)


class CoupledSystem(OdeSystem):
    """A coupled model for :mod:`.nonlinear`'s event loop: the states ``(a, y)``; over
    a segment between events ``a`` follows the closed form and only ``y`` is
    integrated. The loop's ``theta`` for a subject is ``(lambda, P, theta_pd)``
    (:func:`projectors`)."""

    def __init__(self, f, n_pk, n_pd, solver, rel_tol, abs_tol, max_num_steps, data,
                 who):
        super().__init__(f, n_pk + n_pd, solver, rel_tol, abs_tol, max_num_steps, data,
                         1e-10, 1e-6, 200, None, who)
        self.n_pk = n_pk
        self.f_pd = f

    def _segment(self, x, t0, theta, rate):
        """The right-hand side and its arguments from state ``x`` at ``t0``."""
        from ..math.linalg import matmul
        lam, P, th = theta
        n_pk = self.n_pk
        a0, y0 = _part(x, 0, n_pk), _part(x, n_pk, self.n)
        r_pk, r_pd = _part(rate, 0, n_pk), _part(rate, n_pk, self.n)
        M = matmul(P, a0)
        if _zero(r_pk):
            return self._rhs(False), y0, (t0, lam, M, th, r_pd), (lam, M, None)
        N = matmul(P, r_pk)
        return self._rhs(True), y0, (t0, lam, M, N, th, r_pd), (lam, M, N)

    def _rhs(self, infusion):
        return _coupled_rhs(self.f_pd, infusion)

    def evolve(self, x, t0, ts, theta, rate, tol=None):
        ts, r, a = self._span(ts, tol)
        rhs, y0, args, pk = self._segment(x, t0, theta, rate)
        Y = self.solver(rhs, y0, t0, ts, *args, *self.data, rel_tol=r, abs_tol=a,
                        max_num_steps=self.max_num_steps)
        A = pk_amounts(ts - t0, *pk)
        if isinstance(A, Box) or isinstance(Y, Box):
            return concatenate([A, Y], axis=1)
        return np.concatenate([A, Y], axis=1)

    def skip(self, x, u, t, theta, rate):
        """A zero-length span ``u`` that carries derivatives (see
        :meth:`.OdeSystem.skip`): the PK part in closed form, the PD part by one
        midpoint step."""
        if not isinstance(u, Box):
            return x
        rhs, y, args, pk = self._segment(x, t, theta, rate)
        data = tuple(self.data)
        k1 = rhs(t, y, *args, *data)
        h = 0.5 * u
        y = y + u * rhs(t + h, y + h * k1, *args, *data)
        return concatenate([pk_amounts(u, *pk), y])

    def steady_state(self, ev, p, d, q, theta):
        raise DataError(f"{self.who}: steady states are not supported by the coupled "
                        "solvers")


def _coupled(model, who, f, n_pd, events, params, theta, data, F, tlag, infusion_rate,
             infusion_duration, method, rel_tol, abs_tol, max_num_steps):
    if not callable(f):
        raise DataError(f"{who}: f must be a function f(t, y, a, theta, *data), got "
                        f"{type(f).__name__}")
    if isinstance(n_pd, bool) or not (isinstance(n_pd, (int, np.integer)) and
                                      n_pd >= 1):
        raise DataError(f"{who}: n_pd (the number of PD states) must be a positive "
                        f"integer, got {n_pd!r}")
    if method not in ("rk45", "bdf"):
        raise DataError(f"{who}: method must be 'rk45' or 'bdf', got {method!r}")
    n_pk = model.n
    n = n_pk + int(n_pd)
    S = events.n_subjects
    R = events.n_records
    try:
        params = [_param(who, nm, x, S, R) for nm, x in zip(model.names, params)]
    except ValueError as e:                 # the closed forms' message, as a DataError
        raise DataError(str(e)) from None
    _positive(who, **dict(zip(model.names, params)))
    if theta is None:
        theta = np.zeros(0)
    theta = as_numbers(theta, f"{who}: theta must be numbers", DataError)
    theta_rows = theta_per_record(theta, events)
    if S > 1 and not theta_rows and (len(shape_of(theta)) == 0 or
                                     shape_of(theta)[0] != S):
        raise DataError(f"{who}: with {S} subjects theta must have a leading axis of "
                        f"{S} (theta[s] for subject s) or of {R} (one row per record), "
                        f"got shape {shape_of(theta)}")
    check_compartments(events, n, who)
    bad = np.flatnonzero(events.is_dose & (events.ss > 0))
    if bad.size:
        i = int(bad[0])
        raise DataError(f"{who}: record {i + 1} (subject {events.ids[events.subject[i]]}"
                        f"): ss = {int(events.ss[i])}: steady states are not supported "
                        "by the coupled solvers (sl.pk.ode solves the full system)")
    p = plan(events)
    d = expand(events, p, n, who, F=F, tlag=tlag, infusion_rate=infusion_rate,
               infusion_duration=infusion_duration)
    solver = ode_rk45 if method == "rk45" else ode_bdf
    sys_ = CoupledSystem(f, n_pk, int(n_pd), solver, rel_tol, abs_tol, max_num_steps,
                         tuple(data), who)
    if theta_rows or _by_record(events, params):
        # parameters per record (.per_record): projectors for every record's row
        sub = events.subject
        per = [projectors(model, _params_at(params, sub[r], r, R)) +
               (theta[r] if theta_rows else theta[sub[r]] if S > 1 else theta,)
               for r in range(R)]
        sys_ = PerRecordSystem(sys_, events)
        return events_of_subjects(events, p, d, sys_.tables(per), sys_)
    per = [projectors(model, _params_at(params, s, None, R)) +
           (theta[s] if S > 1 else theta,) for s in range(S)]
    return events_of_subjects(events, p, d, per if S > 1 else per[0], sys_)


def _params_at(params, s, r, R):
    """The PK parameters of subject ``s`` (at record ``r`` for those given per record)
    as one vector (plain or traced)."""
    ps = [x if shape_of(x) == () else x[r] if shape_of(x) == (R,) and r is not None
          else x[s] for x in params]
    if any(isinstance(x, Box) for x in ps):
        return stack(ps)
    return np.array([float(x) for x in ps])


def onecpt_ode(f, n_pd, events, CL, V, ka, theta=None, *, data=(), F=None, tlag=None,
               infusion_rate=None, infusion_duration=None, method="rk45", rel_tol=1e-6,
               abs_tol=1e-6, max_num_steps=10**6):
    r"""A one-compartment PK model in closed form coupled to an ODE PD model.

    Torsten's ``pmx_solve_onecpt_rk45`` / ``pmx_solve_onecpt_bdf``. The states are
    the gut and central amounts ``a`` (compartments 1, 2: :func:`~stanlite.pk.onecpt`)
    then the ``n_pd`` PD states ``y`` (compartments 3 ..), with

    .. math::

        y' = f(t, y, a(t), \theta, \ldots), \qquad y(t_0) = 0,

    ``f(t, y, a, theta, *data)`` written in stanlite operations (``a`` the vector of
    PK amounts at ``t``; concentrations are ``a[1] / V``). Only ``y`` is integrated
    (the module docstring); the PK columns are the closed forms. Doses may go into
    any compartment (a bolus into a PD compartment is a jump of that state).

    Parameters: ``CL, V, ka`` as in :func:`~stanlite.pk.onecpt` (scalars, one per
    subject or one per record; ``ka != CL / V``), ``theta`` the PD parameters
    (``theta[s]`` per subject with several; or one row per record, Torsten's 2-D
    theta, :mod:`stanlite.pk.per_record`), ``data`` extra plain arguments of ``f``; ``F``, ``tlag``,
    ``infusion_rate``, ``infusion_duration`` per compartment (``2 + n_pd``);
    ``method`` ``"rk45"`` or ``"bdf"``; the tolerances are Torsten's defaults.

    Returns ``(n_records, 2 + n_pd)`` amounts/states after each record's event.
    Everything may be traced. Steady-state records raise ``DataError``.

    Example: an effect compartment ``y' = ke0 (C - y)``, ``C = cent / V``.

    >>> import numpy as np, stanlite as sl
    >>> ev = sl.pk.events(time=[0.0, 1.0, 4.0], evid=[1, 0, 0], amt=[100.0, 0, 0])
    >>> eff = lambda t, y, a, th: th[0] * (a[1] / th[1] - y)
    >>> A = sl.pk.onecpt_ode(eff, 1, ev, CL=5.0, V=50.0, ka=1.2, theta=[0.5, 50.0])
    >>> A.shape, bool(np.allclose(A[:, :2], sl.pk.onecpt(ev, CL=5.0, V=50.0, ka=1.2)))
    ((3, 3), True)
    """
    return _coupled(_OneCpt, "pk.onecpt_ode", f, n_pd, events,
                    (CL, V, ka), theta, data, F, tlag, infusion_rate, infusion_duration,
                    method, rel_tol, abs_tol, max_num_steps)


def twocpt_ode(f, n_pd, events, CL, Q, V2, V3, ka, theta=None, *, data=(), F=None,
               tlag=None, infusion_rate=None, infusion_duration=None, method="rk45",
               rel_tol=1e-6, abs_tol=1e-6, max_num_steps=10**6):
    r"""A two-compartment PK model in closed form coupled to an ODE PD model.

    Torsten's ``pmx_solve_twocpt_rk45`` / ``pmx_solve_twocpt_bdf``: as
    :func:`onecpt_ode` with the PK of :func:`~stanlite.pk.twocpt` (compartments 1
    gut, 2 central, 3 peripheral; ``a`` a vector of 3, the PD states from compartment
    4). ``ka`` must differ from the disposition rates ``alpha`` and ``beta``.

    Example: the Friberg-Karlsson model of the zoo (``models/friberg_karlsson.py``)
    is ``twocpt_ode`` with five PD states. A one-state effect compartment:

    >>> import numpy as np, stanlite as sl
    >>> ev = sl.pk.events(time=[0.0, 2.0, 12.0], evid=[1, 0, 0], amt=[1000.0, 0, 0])
    >>> eff = lambda t, y, a, th: th[0] * (a[1] / 35.0 - y)
    >>> A = sl.pk.twocpt_ode(eff, 1, ev, CL=10.0, Q=15.0, V2=35.0, V3=105.0, ka=2.0,
    ...                      theta=[0.3])
    >>> A.shape
    (3, 4)
    """
    return _coupled(_TwoCpt, "pk.twocpt_ode", f, n_pd, events,
                    (CL, Q, V2, V3, ka), theta, data, F, tlag, infusion_rate,
                    infusion_duration, method, rel_tol, abs_tol, max_num_steps)
