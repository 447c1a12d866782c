"""Pharmacometrics: NONMEM-style dosing events, compartment models, steady states.

The modelling layer of Torsten (Stan's pharmacometrics extension), differentiable
everywhere with stanlite's AD:

=================================  ==================================================
:func:`events`, :class:`EventSchedule`  NONMEM records (``TIME, EVID, AMT, CMT, RATE,
                                   II, ADDL, SS``, one or many subjects ``ID``) from
                                   arrays, a dict or a pandas DataFrame, validated
:func:`read_nonmem`               a NONMEM data file (``.`` missing, comment rows,
                                   covariates), errors naming line and column
:func:`onecpt`, :func:`twocpt`     one/two compartments with first-order absorption,
                                   closed forms (Torsten's ``pmx_solve_onecpt`` /
                                   ``pmx_solve_twocpt``)
:func:`linode`                     any linear model ``x' = K x``, matrix exponential
                                   (``pmx_solve_linode``)
:func:`ode`                        any ODE ``x' = f(t, x, theta)``, ODE super nodes
                                   (``pmx_solve_rk45`` / ``pmx_solve_bdf``)
:func:`ode_group`                  :func:`ode` for a whole population in one call, one
                                   node, subjects in threads (``pmx_solve_group_*``)
:func:`onecpt_ode`, :func:`twocpt_ode`  closed-form PK driving an ODE PD model, only
                                   the PD integrated (``pmx_solve_onecpt_rk45`` ...)
:func:`interpolate_linear`         time-varying covariates between their measurements
                                   (``linear_interpolation``), usable inside ``f``
:func:`ode_steady_state`           the steady-state trough of a regimen of an ODE
                                   model, algebraic-solver super node
:func:`additive_error_lpdf` etc.   residual error models (additive, proportional,
                                   combined, exponential) as log densities
:func:`vpc`                        visual predictive check: simulated against
                                   observed percentiles per time bin, a plot
:func:`divdiff_exp`                divided differences of ``e^{-x}``: the primitive
                                   of the closed forms
=================================  ==================================================

Conventions. Every solver returns the *amounts* (not concentrations) in each
compartment after each record's event, an array ``(n_records, n_cmt)`` - the
transpose of Torsten's matrix - for all subjects of the schedule at once; model
parameters are scalars, one value per subject, or one per record (Torsten's 2-D
theta: piecewise-constant in time, :mod:`.per_record`); the bioavailability ``F``,
the lag ``tlag`` and modelled infusion rates/durations are per compartment (scalar,
a vector of ``n_cmt``, a subjects x ``n_cmt`` or a records x ``n_cmt`` matrix).
Compartments are numbered from 1 in the data (Torsten: 1 gut, 2 central, 3
peripheral) and from 0 in the result's columns. Everything may be a parameter - the
model's, ``F``, ``tlag``, and the schedule's ``time, amt, rate, ii``
(``events.replace(amt=...)``) - with reverse and forward mode to any order (Hessians
for Riemannian HMC).

How. Linear models are solved by superposition of doses, vectorised over all
(record, dose) pairs of all subjects (:mod:`.solve`), with steady states in closed
form (:mod:`.steady_state`); the closed forms are divided differences, exact when
rates coincide (:mod:`.analytic`). ODE models are solved event by event, one ODE
super node per dosing interval, and their steady states are roots found by the
algebraic-solver super node (:mod:`.nonlinear`). Semantics of the records (order of
events at equal times, resets, lags at steady state, infusions with ``F``): see
:mod:`.events` and :mod:`.dosing`.

Example: a population model. Three subjects get 100 mg orally at ``t = 0``, then
concentrations are measured; subject ``j`` has its own clearance, volume and
absorption rate around population means (non-centred log-normal variability).

>>> import numpy as np, stanlite as sl
>>> t = [0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 12.0]
>>> data = {"ID": np.repeat([1, 2, 3], 7), "TIME": t * 3,
...         "AMT": [100.0, 0, 0, 0, 0, 0, 0] * 3}
>>> events = sl.pk.events(data)                   # EVID 1 where AMT > 0, CMT 1 (gut)
>>> obs = events.observed
>>> truth = sl.pk.onecpt(events, CL=[4.0, 5.0, 6.0], V=[40.0, 50.0, 45.0], ka=1.2)
>>> conc = truth[obs, 1] / np.array([40.0, 50.0, 45.0])[events.subject[obs]]
>>> conc = conc * np.exp(np.random.default_rng(1).normal(0.0, 0.1, len(obs)))
>>> class PopPK(sl.Model):
...     N = sl.data.int(lower=1)
...     J = sl.data.int(lower=1)
...     conc = sl.data.vector("N", lower=0)
...     mu = sl.param.vector(3)                  # log CL, log V, log ka
...     omega = sl.param.vector(3, lower=0)      # between-subject sd
...     z = sl.param.matrix("J", 3)
...     sigma = sl.param.real(lower=0)
...
...     def __init__(self, events, **data):
...         super().__init__(**data)
...         self.events = events
...         self.obs = events.observed
...
...     def log_prob(self, mu, omega, z, sigma):
...         theta = sl.exp(mu + omega * z)           # (J, 3): per subject
...         CL, V, ka = theta[:, 0], theta[:, 1], theta[:, 2]
...         A = sl.pk.onecpt(self.events, CL=CL, V=V, ka=ka)
...         c = A[self.obs, 1] / V[self.events.subject[self.obs]]
...         lp = sl.normal_lpdf(mu, np.log([5.0, 50.0, 1.0]), 1.0)
...         lp = lp + sl.normal_lpdf(omega, 0.0, 0.5) + sl.std_normal_lpdf(z)
...         lp = lp + sl.normal_lpdf(sigma, 0.0, 0.5)
...         return lp + sl.lognormal_lpdf(self.conc, sl.log(c), sigma)
>>> model = PopPK(events, N=len(obs), J=3, conc=conc)
>>> x = np.zeros(model.dim)
>>> lp, g = model.log_density_gradient(x)
>>> model.dim, g.shape, bool(np.isfinite(lp))
(16, (16,), True)

``model.sample()`` then runs NUTS on it. Steady state, infusions, lags: e.g. an
infusion of 500 mg over 30 min every 12 h, at steady state, into the central
compartment of a two-compartment model, with the amounts over one interval:

>>> ev = sl.pk.events(time=[0.0, 0.5, 2.0, 6.0, 12.0], evid=[1, 0, 0, 0, 0],
...                   amt=[500.0, 0, 0, 0, 0], rate=[1000.0, 0, 0, 0, 0],
...                   ii=[12.0, 0, 0, 0, 0], ss=[1, 0, 0, 0, 0], cmt=[2, 2, 2, 2, 2])
>>> A = sl.pk.twocpt(ev, CL=8.0, Q=12.0, V2=30.0, V3=80.0, ka=1.0)
>>> bool(np.isclose(A[0, 1], A[4, 1]))           # periodic: the trough comes back
True
"""

from .divdiff import divdiff_exp
from .events import EventSchedule, events
from .nonmem import NonmemData, read_nonmem
from .analytic import onecpt, twocpt
from .linear import linode
from .nonlinear import ode
from .coupled import onecpt_ode, twocpt_ode
from .interpolate import interpolate_linear
from .population import ode_group
from .steady_state import ode_steady_state
from .error_models import (additive_error_lpdf, combined_error_lpdf,
                           exponential_error_lpdf, proportional_error_lpdf,
                           additive_error_rng, combined_error_rng, exponential_error_rng,
                           proportional_error_rng)
from .vpc import VPCResult, vpc

__all__ = ["events", "EventSchedule", "read_nonmem", "NonmemData", "onecpt", "twocpt", "linode", "ode",
           "ode_group", "onecpt_ode", "twocpt_ode", "interpolate_linear",
           "ode_steady_state", "divdiff_exp", "additive_error_lpdf",
           "proportional_error_lpdf", "combined_error_lpdf", "exponential_error_lpdf",
           "additive_error_rng", "proportional_error_rng", "combined_error_rng",
           "exponential_error_rng", "vpc", "VPCResult"]
