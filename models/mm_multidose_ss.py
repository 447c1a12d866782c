r"""A multiple-dose regimen at steady state with nonlinear (Michaelis-Menten)
elimination: the algebraic-solver super node inside NUTS, through ``sl.pk.ode``.

The problem
-----------
A patient has received ``dose`` mg by intravenous bolus every ``ii`` h for long
enough to be at steady state (``ss = 1``); the drug is eliminated by a saturable
pathway (Michaelis-Menten kinetics, as phenytoin, ethanol or high-dose salicylate),

.. math::

    x' = -V_{max} \frac{C}{K_m + C}, \qquad C = x / V,

with ``x`` the amount in the body (mg), ``V`` the volume (L), ``Vmax`` the maximal
elimination rate (mg/h) and ``Km`` the concentration of half-maximal elimination
(mg/L). Concentrations are measured over one or more dosing intervals.

Nothing about the steady state is linear: the amount just before a dose (the
trough) is the root of

.. math::

    x - F_{ii}(x + D) = 0,

with ``F_u`` the ODE's evolution over ``u`` h. :func:`stanlite.pk.ode` finds it with
the algebraic-solver super node (Powell's dogleg on plain floats; the integrations
inside by the ODE super node), and differentiates it by the implicit function
theorem: ``dx/dtheta = -(I - F'_x)^{-1} (-F'_theta)``, one transposed solve and one
reverse sweep through the period map, whatever the number of iterations. The
concentrations after the steady-state dose come from the ODE super node again.
A steady state exists only if the pathway can clear the dose, ``Vmax > D / ii``
(otherwise the drug accumulates without bound): the declaration of ``Vmax`` makes
that a bound, so NUTS never proposes a regimen without a steady state.

The one-compartment model with Michaelis-Menten elimination has a closed form (not
used by the model; the tests check against it): with ``vm = Vmax / V``,
``Km log(C / C0) + C - C0 = -vm t``, i.e.

.. math::

    C(t) = K_m\, \omega\!\Big(\log\frac{C_0}{K_m} + \frac{C_0 - v_m t}{K_m}\Big),

``omega`` Wright's omega function (``W(e^y)``, Lambert's W; :func:`concentration_exact`),
and the trough solves a scalar equation (:func:`trough_exact`). The model uses it
for one thing only: a starting point for the algebraic solver (``ss_guess``), which
changes the number of iterations, never the root or its derivatives.

The model
---------
.. math::

    \text{conc}_i &\sim \mathrm{LogNormal}\big(\log C(t_i), \sigma\big), \\
    V &\sim \mathrm{LogNormal}(\log 50, 0.5), \quad
    V_{max} \sim \mathrm{LogNormal}(\log 30, 0.75) \;\; (V_{max} > D / ii), \\
    K_m &\sim \mathrm{LogNormal}(\log 5, 1), \quad \sigma \sim \mathrm{N}^+(0, 0.5).

Proportional (log-normal) error: concentrations are positive and their assay error
is a roughly constant percentage. Weakly informative priors: a volume around
0.7 L/kg for a 70 kg adult, maximal elimination rates of 10-100 mg/h, ``Km`` of
0.5-50 mg/L.

Default data (``data/mm_multidose_ss.json``, :func:`simulate_data`): 600 mg every
24 h, observed at 10 times over the first interval and 4 over the next (the
steady-state dose has ``addl = 1``), simulated from ``V = 50``, ``Vmax = 40``,
``Km = 4``, ``sigma = 0.1`` with seed 20240809 (exact concentrations from the closed
form). The profile falls from 14 to 2.4 mg/L, across ``Km``: the elimination goes
from nearly zero-order to nearly first-order within an interval, which identifies
``Vmax`` and ``Km`` separately.
"""

import math

import numpy as np

import stanlite as sl

__all__ = ["MmMultidoseSs", "mm_elimination", "concentration_exact", "trough_exact",
           "simulate_data", "TRUTH", "DOSE", "II", "TIMES", "DATA_SEED"]

#: the values the default data are simulated from
TRUTH = {"V": 50.0, "Vmax": 40.0, "Km": 4.0, "sigma": 0.1}
DOSE, II, ADDL = 600.0, 24.0, 1
#: sampling times (h after the steady-state dose): one interval, then four more
TIMES = (0.5, 1.0, 2.0, 4.0, 6.0, 8.0, 12.0, 16.0, 20.0, 23.5, 25.0, 30.0, 36.0, 47.5)
DATA_SEED = 20240809


def mm_elimination(t, x, theta):
    r"""``dx/dt = -Vmax (x/V) / (Km + x/V)`` for ``theta = (V, Vmax, Km)`` (stanlite
    ops; ``x`` the amount, a vector of one). Autonomous, as a steady state needs.

    >>> import numpy as np
    >>> mm_elimination(0.0, np.array([200.0]), np.array([50.0, 40.0, 4.0]))
    array([-20.])
    """
    V, vmax, km = theta[0], theta[1], theta[2]
    c = x / V
    return -vmax * c / (km + c)


def concentration_exact(c0, t, V, Vmax, Km):
    r"""The closed-form concentration ``t`` h after ``C = c0`` (numpy, broadcasting):
    ``Km omega(log(c0 / Km) + (c0 - vm t) / Km)``, ``vm = Vmax / V``, ``omega``
    Wright's omega function (stable where Lambert's ``W(e^y)`` would overflow).

    >>> round(float(concentration_exact(12.0, 0.0, 50.0, 40.0, 4.0)), 12)
    12.0
    >>> c = concentration_exact(12.0, 5.0, 50.0, 40.0, 4.0)     # Km log(C/C0) + C - C0
    >>> round(float(4.0 * np.log(c / 12.0) + c - 12.0), 12)    # = -vm t = -4
    -4.0
    """
    from scipy.special import wrightomega

    c0, t, V, Vmax, Km = (np.asarray(a, dtype=float) for a in (c0, t, V, Vmax, Km))
    y = np.log(c0 / Km) + (c0 - Vmax / V * t) / Km
    return Km * np.real(wrightomega(y))


def trough_exact(dose, ii, V, Vmax, Km):
    """The steady-state trough concentration of ``dose`` every ``ii`` (plain floats):
    the root ``c`` of ``C(ii; c + dose / V) = c`` (:func:`concentration_exact`),
    bracketed and solved by Brent's method. ``ValueError`` if ``Vmax <= dose / ii``
    (no steady state).

    >>> c = trough_exact(600.0, 24.0, 50.0, 40.0, 4.0)
    >>> round(c, 6), round(float(concentration_exact(c + 12.0, 24.0, 50.0, 40.0, 4.0)), 6)
    (2.376404, 2.376404)
    """
    from scipy.optimize import brentq

    if not Vmax > dose / ii:
        raise ValueError(f"trough_exact: no steady state, Vmax = {Vmax} <= dose / ii = "
                         f"{dose / ii}")
    d = dose / V

    def g(c):
        return float(concentration_exact(c + d, ii, V, Vmax, Km)) - c

    hi = d
    for _ in range(200):                  # g(0) > 0 and g -> d - vm ii < 0 at infinity
        if g(hi) < 0:
            break
        hi *= 2.0
    return brentq(g, 0.0, hi, xtol=1e-13, rtol=4 * np.finfo(float).eps, maxiter=200)


def simulate_data(seed=DATA_SEED, times=TIMES, dose=DOSE, ii=II, addl=ADDL, **truth):
    """Data for :class:`MmMultidoseSs`: exact concentrations at ``times`` (h after the
    steady-state dose; a dose every ``ii`` up to ``addl`` more) from the closed form,
    times log-normal noise (numpy generator seeded with ``seed``).
    ``data/mm_multidose_ss.json`` is ``simulate_data()``."""
    p = dict(TRUTH, **truth)
    V, Vmax, Km = p["V"], p["Vmax"], p["Km"]
    trough = trough_exact(dose, ii, V, Vmax, Km)
    t = np.asarray(times, dtype=float)
    k = np.minimum(np.floor(t / ii), addl)          # doses given by each time
    c = concentration_exact(trough + dose / V, t - k * ii, V, Vmax, Km)
    noise = np.random.default_rng(seed).standard_normal(len(t))
    conc = c * np.exp(p["sigma"] * noise)
    return {"N": len(t), "time": [float(v) for v in t],
            "conc": [round(float(v), 6) for v in conc], "dose": float(dose),
            "ii": float(ii), "addl": int(addl)}


class MmMultidoseSs(sl.Model):
    r"""Michaelis-Menten elimination at steady state of a multiple-dose regimen,
    solved by ``sl.pk.ode`` (event schedule with ``ss = 1``, the algebraic-solver
    super node for the steady state, the ODE super node for the profile); module
    docstring for the math.

    .. math::

        x^{ss} &= F_{ii}(x^{ss} + D) \quad\text{(algebraic solver)}, \qquad
        C(t) = F_t(x^{ss} + D) / V \quad\text{(ODE)}, \\
        \text{conc}_i &\sim \mathrm{LogNormal}(\log C(t_i), \sigma).

    Data: ``N`` observations at ``time`` (h after the steady-state dose, >= 0) with
    concentrations ``conc`` (mg/L, > 0); the regimen ``dose`` (mg) every ``ii`` (h),
    ``addl`` further doses after the steady-state one (as NONMEM's ADDL). Parameters
    (in this order): ``V`` (L), ``Vmax`` (mg/h, ``> dose / ii``), ``Km`` (mg/L),
    ``sigma``. Transformed parameter: ``C`` (N predicted concentrations).
    Generated quantities: ``C_trough`` (the steady-state trough, mg/L), ``conc_rep``
    and ``log_lik``.

    Keyword arguments of the constructor: ``rel_tol``, ``abs_tol`` of the ODE solves
    (1e-8; the steady-state integrations run at 1e-10, :func:`stanlite.pk.ode`).

    Source: written for stanlite (issue 8: a general-ODE steady state inside NUTS);
    the kinetics are those of Wagner (1973), "Properties of the Michaelis-Menten
    equation and its integrated form", and the Lambert-W solution of Schnell &
    Mendoza (1997); default data simulated (:func:`simulate_data`).
    """

    N = sl.data.int(lower=1)
    time = sl.data.vector("N", lower=0)
    conc = sl.data.vector("N", lower=0)
    dose = sl.data.real(lower=0)
    ii = sl.data.real(lower=0)
    addl = sl.data.int(lower=0)

    V = sl.param.real(lower=0)
    Vmax = sl.param.real(lower=lambda dose, ii: dose / ii)
    Km = sl.param.real(lower=0)
    sigma = sl.param.real(lower=0)

    observed = ("conc",)
    #: no retaping: the solver's starting point is computed from the parameters'
    #: values at each evaluation (a replay would freeze it); the cost is in the ODE
    #: and algebraic solves, which retaping would not change.
    compile = False

    def __init__(self, rel_tol=1e-8, abs_tol=1e-8, **data):
        super().__init__(**data)
        if not np.all(self.conc > 0):
            i = int(np.flatnonzero(~(self.conc > 0))[0])
            raise sl.DataError(f"data field 'conc': log-normal errors need positive "
                               f"concentrations, element [{i + 1}] is {self.conc[i]!r}")
        if not (self.dose > 0 and self.ii > 0):
            raise sl.DataError(f"data fields 'dose' and 'ii': a steady-state regimen needs "
                               f"dose > 0 and ii > 0, got dose = {self.dose}, ii = "
                               f"{self.ii}")
        order = np.argsort(self.time, kind="stable")
        n = self.N
        self.events = sl.pk.events(
            time=np.r_[0.0, self.time[order]], evid=np.r_[1, np.zeros(n)],
            amt=np.r_[self.dose, np.zeros(n)], ii=np.r_[self.ii, np.zeros(n)],
            addl=np.r_[self.addl, np.zeros(n)], ss=np.r_[1, np.zeros(n)])
        self._rec = np.empty(n, dtype=int)
        self._rec[order] = np.arange(1, n + 1)
        self.ode_control = dict(rel_tol=rel_tol, abs_tol=abs_tol)
        self._log_conc = np.log(self.conc)

    def _guess(self, V, Vmax, Km):
        """The exact trough amount from the closed form: a starting point for the
        algebraic solver (plain floats; zeros if the closed form fails)."""
        try:
            v = float(sl.value_of(V))
            c = trough_exact(self.dose, self.ii, v, float(sl.value_of(Vmax)),
                             float(sl.value_of(Km)))
            return np.array([c * v]) if math.isfinite(c) else None
        except (ValueError, ArithmeticError, RuntimeError):
            return None

    def transformed_parameters(self, V, Vmax, Km):
        amounts = sl.pk.ode(mm_elimination, 1, self.events, sl.stack([V, Vmax, Km]),
                            ss_guess=self._guess(V, Vmax, Km), **self.ode_control)
        return {"C": amounts[self._rec, 0] / V}

    def log_prob(self, V, Vmax, Km, sigma, C):
        lp = sl.lognormal_lpdf(V, math.log(50.0), 0.5)
        lp = lp + sl.lognormal_lpdf(Vmax, math.log(30.0), 0.75)
        lp = lp + sl.lognormal_lpdf(Km, math.log(5.0), 1.0)
        lp = lp + sl.normal_lpdf(sigma, 0.0, 0.5)
        return lp + sl.lognormal_lpdf(self.conc, sl.log(C), sigma)

    def generated_quantities(self, rng, V, Vmax, Km, sigma, C):
        mu = np.log(C)
        z = (self._log_conc - mu) / sigma
        return {"C_trough": trough_exact(self.dose, self.ii, V, Vmax, Km),
                "conc_rep": np.exp(rng.normal(mu, sigma)),
                "log_lik": -0.5 * z * z - math.log(sigma) - self._log_conc
                - 0.5 * math.log(2 * math.pi)}


if __name__ == "__main__":           # regenerate the default data
    import json
    import pathlib
    path = pathlib.Path(__file__).resolve().parent / "data" / "mm_multidose_ss.json"
    body = ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in simulate_data().items())
    path.write_text("{\n" + body + "\n}\n", encoding="utf-8")
    print(f"wrote {path}")
