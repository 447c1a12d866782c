r"""A multiple-dose regimen at steady state with nonlinear (Michaelis-Menten)
elimination: the algebraic-solver super node inside NUTS, through ``sl.pk.ode``.

The problem
-----------
A patient takes ``dose`` mg by intravenous bolus every ``ii`` h, long enough to be at
steady state (``ss = 1``); the drug is eliminated by a saturable pathway
(Michaelis-Menten kinetics, as phenytoin, ethanol or high-dose salicylate),

.. math::

    x' = -V_{max} \frac{C}{K_m + C}, \qquad C = x / V,

with ``x`` the amount in the body (mg), ``V`` the volume (L), ``Vmax`` the maximal
elimination rate (mg/h) and ``Km`` the concentration of half-maximal elimination
(mg/L). Concentrations are measured over one or more dosing intervals, at the steady
state of one or several regimens (``R`` of them: a regimen changed after a first
measurement, as in therapeutic drug monitoring).

Nothing about the steady state is linear: the amount just before a dose (the
trough) is the root of

.. math::

    x - F_{ii}(x + D) = 0,

with ``F_u`` the ODE's evolution over ``u`` h. :func:`stanlite.pk.ode` finds it with
the algebraic-solver super node (Powell's dogleg on plain floats; the integrations
inside by the ODE super node), and differentiates it by the implicit function
theorem: ``dx/dtheta = (I - F'_x)^{-1} F'_theta`` (``F'`` the derivatives of
``F_ii(x + D)``), one transposed solve and one reverse sweep through the period map,
whatever the number of iterations. The concentrations after the steady-state dose
come from the ODE super node again. A steady state exists only if the pathway can
clear the dose, ``Vmax > D / ii`` (otherwise the drug accumulates without bound):
the declaration of ``Vmax`` makes that a bound (the largest ``D / ii`` of the
regimens), so NUTS never proposes a regimen without a steady state.

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

Default data (``data/mm_multidose_ss.json``, :func:`simulate_data`): the classic
dose-adjustment design for a drug with saturable elimination (Ludden et al. 1977):
150 mg every 12 h, sampled at 6 times over an interval at steady state; then 300 mg
every 12 h, sampled at 9 times over two intervals (``addl = 1``) at the new steady
state; simulated from ``V = 50``, ``Vmax = 40``, ``Km = 4``, ``sigma = 0.1`` with seed
20240809 (exact concentrations from the closed form). Doubling the dose raises the
trough more than five-fold (0.8 to 4.6 mg/L). One regimen alone identifies ``Vmax``
and ``Km`` poorly (their posterior is a long curved ridge; NUTS needed ~100
leapfrog steps per draw on a single-regimen version of these data); the two steady
states pin both down (posterior sds ~8% on the log scale). ``Vmax`` and ``Km``
remain strongly correlated (~0.97): sample with ``metric="dense_e"``.
"""

import math

import numpy as np

import stanlite as sl
from stanlite.functor.scalar_root import brent

__all__ = ["MmMultidoseSs", "steady_state_floor", "mm_elimination", "concentration_exact",
           "trough_exact", "profile_exact", "simulate_data", "TRUTH", "REGIMENS", "DATA_SEED"]

#: the values the default data are simulated from
TRUTH = {"V": 50.0, "Vmax": 40.0, "Km": 4.0, "sigma": 0.1}
#: the default regimens: (dose mg, ii h, addl, sampling times in h after the
#: steady-state dose) - 150 mg every 12 h, then 300 mg every 12 h over two intervals
REGIMENS = ((150.0, 12.0, 0, (0.5, 2.0, 4.0, 6.0, 9.0, 11.5)),
            (300.0, 12.0, 1, (0.5, 2.0, 4.0, 6.0, 9.0, 11.5, 13.0, 18.0, 23.5)))
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
    if not Vmax > dose / ii:
        raise ValueError(f"trough_exact: no steady state, Vmax = {Vmax} <= dose / ii = "
                         f"{dose / ii}")
    d = dose / V

    from scipy.special import wrightomega
    vm_ii = Vmax / V * ii

    def g(c):
        # concentration_exact on one float (no array conversions: the model calls
        # this at every gradient for the solver's starting point)
        c0 = c + d
        return Km * wrightomega(math.log(c0 / Km) + (c0 - vm_ii) / Km).real - c

    hi = d
    for _ in range(200):                  # g(0) > 0 and g -> d - vm ii < 0 at infinity
        if g(hi) < 0:
            break
        hi *= 2.0
    # (stanlite's own Brent: scipy.optimize's import cost a new process ~0.1-0.2 s
    # before its first draw, issue 20 point 6)
    return brent(g, 0.0, hi, xtol=1e-13, rtol=4 * np.finfo(float).eps, maxiter=200)


def profile_exact(dose, ii, addl, t, V, Vmax, Km):
    """Concentrations ``t`` h after a steady-state dose (numpy, closed form): the
    trough plus the dose at 0, then ``addl`` more doses every ``ii`` (a time on a
    dosing time is after that dose, as in an event schedule).

    >>> c = profile_exact(300.0, 12.0, 1, [0.0, 12.0, 24.0], 50.0, 40.0, 4.0)
    >>> bool(np.isclose(c[0], c[1])), bool(c[2] < c[1])   # periodic, then washout
    (True, True)
    """
    tr = trough_exact(dose, ii, V, Vmax, Km)
    t = np.asarray(t, dtype=float)
    k = np.minimum(np.floor(t / ii), addl)            # doses given by each time
    return concentration_exact(tr + dose / V, t - k * ii, V, Vmax, Km)


def simulate_data(seed=DATA_SEED, regimens=REGIMENS, **truth):
    """Data for :class:`MmMultidoseSs`: exact concentrations (:func:`profile_exact`)
    for each regimen ``(dose, ii, addl, times)`` at the ``truth`` (default
    :data:`TRUTH`, overridable by keyword), times log-normal noise (numpy generator
    seeded with ``seed``). ``data/mm_multidose_ss.json`` is ``simulate_data()``."""
    p = dict(TRUTH, **truth)
    regimen, times, conc = [], [], []
    for r, (dose, ii, addl, t) in enumerate(regimens):
        c = profile_exact(dose, ii, addl, t, p["V"], p["Vmax"], p["Km"])
        regimen += [r + 1] * len(t)
        times += [float(v) for v in t]
        conc += list(c)
    noise = np.random.default_rng(seed).standard_normal(len(conc))
    conc = np.asarray(conc) * np.exp(p["sigma"] * noise)
    return {"R": len(regimens), "dose": [float(r[0]) for r in regimens],
            "ii": [float(r[1]) for r in regimens], "addl": [int(r[2]) for r in regimens],
            "N": len(conc), "regimen": regimen, "time": times,
            "conc": [round(float(v), 6) for v in conc]}


def steady_state_floor(dose, ii):
    """``Vmax``'s lower bound ``max(dose / ii)`` (a steady state exists above it),
    computed from the data when the model is built. A regimen needs ``dose > 0`` and
    ``ii > 0``: checked here, before the division."""
    for name, v in (("dose", dose), ("ii", ii)):
        if not np.all(v > 0):
            i = int(np.flatnonzero(~(v > 0))[0])
            raise sl.DataError(f"data field '{name}': a steady-state regimen needs "
                               f"dose > 0 and ii > 0, element [{i + 1}] is "
                               f"{float(v[i])!r}")
    return float(np.max(dose / ii))


class MmMultidoseSs(sl.Model):
    r"""Michaelis-Menten elimination at the steady states of multiple-dose regimens,
    solved by ``sl.pk.ode`` (one event schedule per regimen with an ``ss = 1`` dose,
    the algebraic-solver super node for its steady state, the ODE super node for the
    profile); module docstring for the math.

    .. math::

        x^{ss}_r &= F_{ii_r}(x^{ss}_r + D_r) \quad\text{(algebraic solver)}, \qquad
        C_r(t) = F_t(x^{ss}_r + D_r) / V \quad\text{(ODE)}, \\
        \text{conc}_i &\sim \mathrm{LogNormal}(\log C_{r[i]}(t_i), \sigma).

    Data: ``R`` regimens, each ``dose[r]`` (mg) every ``ii[r]`` (h) with ``addl[r]``
    further doses after the steady-state one (NONMEM's ADDL); ``N`` observations with
    their ``regimen`` (1-based), ``time`` (h after that regimen's steady-state dose)
    and ``conc`` (mg/L, > 0). Parameters (in this order): ``V`` (L), ``Vmax`` (mg/h,
    ``> max(dose / ii)``: a steady state exists), ``Km`` (mg/L), ``sigma``.
    Transformed parameter: ``C`` (N predicted concentrations). Generated quantities:
    ``C_trough`` (the steady-state trough of each regimen, mg/L), ``conc_rep`` and
    ``log_lik``.

    Keyword arguments of the constructor: ``rel_tol``, ``abs_tol`` of the ODE solves
    (1e-8; the steady-state integrations run at 1e-10, :func:`stanlite.pk.ode`) and
    ``max_num_steps`` (1000 between two output times; ~20-60 are needed over the
    posterior). The cap matters for sampling: where ``Km`` is absurdly small (``Km =
    e^-8``, ~10 prior sds out, which the first warmup iterations can propose) the
    equation turns stiff as the concentration falls below ``Km`` and the explicit
    solver would creep for minutes; capped, it raises ``SolverError`` at once and NUTS
    rejects the proposal. ``Vmax`` and ``Km`` are strongly correlated a posteriori:
    sample with ``metric="dense_e"``, and from initial estimates (``init=``, typical
    values such as ``V = 50``, ``Vmax = 35``, ``Km = 5``, jittered per chain): the
    default uniform(-2, 2) box on the log scale puts ``V`` below 7.4 L, where the
    density is so steep that warmup starts from step sizes near 1e-6.

    Source: written for stanlite (issue 8: a general-ODE steady state inside NUTS);
    kinetics of Wagner (1973), "Properties of the Michaelis-Menten equation and its
    integrated form", J. Pharmacokinet. Biopharm. 1, the Lambert-W solution of Schnell
    & Mendoza (1997), and the two-regimen design of Ludden, Allen, Valutsky, Vicuna,
    Nappi, Hoffman, Wallace, Lalka & McNay (1977), "Individualization of phenytoin
    dosage regimens", Clin. Pharmacol. Ther. 21; default data simulated
    (:func:`simulate_data`).
    """

    R = sl.data.int(lower=1)
    dose = sl.data.vector("R", lower=0)
    ii = sl.data.vector("R", lower=0)
    addl = sl.data.array("R", dtype="int", lower=0)
    N = sl.data.int(lower=1)
    regimen = sl.data.array("N", dtype="int", lower=1, upper="R")
    time = sl.data.vector("N", lower=0)
    conc = sl.data.vector("N", lower=0)

    V = sl.param.real(lower=0)
    Vmax = sl.param.real(lower=steady_state_floor)
    Km = sl.param.real(lower=0)
    sigma = sl.param.real(lower=0)

    observed = ("conc",)
    #: no retaping: the cost is in the solves, which a replay runs all the same
    #: (measured ~10% faster retaped); the solver's start follows the parameters
    #: either way (``_guess`` is a function of theta, called at every solve).
    compile = False

    def _regimen_obs(self):
        """Per regimen, its observations' indices in time order."""
        obs = [np.flatnonzero(self.regimen == r + 1) for r in range(self.R)]
        return [o[np.argsort(self.time[o], kind="stable")] for o in obs]

    def transformed_data(self):
        if not np.all(self.conc > 0):
            i = int(np.flatnonzero(~(self.conc > 0))[0])
            bad = float(self.conc[i])
            raise sl.DataError(f"data field 'conc': log-normal errors need positive "
                               f"concentrations, element [{i + 1}] is {bad!r}")
        # C is computed regimen by regimen (see __init__) and gathered back into data
        # order by data_order
        order = np.concatenate(self._regimen_obs())
        data_order = np.empty(self.N, dtype=int)
        data_order[order] = np.arange(self.N)
        return {"data_order": data_order, "log_conc": np.log(self.conc)}

    def __init__(self, *args, rel_tol=1e-8, abs_tol=1e-8, max_num_steps=1000, **data):
        super().__init__(*args, **data)
        # objects, not numbers (ordinary attributes rather than transformed data): one
        # schedule per regimen, its steady-state dose at 0, then its observations in
        # time order; the solver's options
        self.events = []
        for r, obs in enumerate(self._regimen_obs()):
            n = len(obs)
            self.events.append(sl.pk.events(
                time=np.r_[0.0, self.time[obs]], evid=np.r_[1, np.zeros(n)],
                amt=np.r_[self.dose[r], np.zeros(n)], ii=np.r_[self.ii[r], np.zeros(n)],
                addl=np.r_[self.addl[r], np.zeros(n)], ss=np.r_[1, np.zeros(n)]))
        self.ode_control = dict(rel_tol=rel_tol, abs_tol=abs_tol,
                                max_num_steps=max_num_steps)

    def _guess(self, r):
        """Regimen ``r``'s starting point for the algebraic solver: ``theta = (V, Vmax,
        Km) -> `` the exact trough amount from the closed form (plain floats; ``None``,
        the library's zeros, if the closed form fails). A function of theta, called
        by the solver at every solve, so the model's retaped gradient gets a fresh
        guess at every point."""
        dose, ii = float(self.dose[r]), float(self.ii[r])

        def guess(theta):
            v, vmax, km = (float(t) for t in theta)
            try:
                c = trough_exact(dose, ii, v, vmax, km)
            except (ValueError, ArithmeticError, RuntimeError):
                return None
            return np.array([c * v]) if math.isfinite(c) else None
        return guess

    def transformed_parameters(self, V, Vmax, Km):
        theta = sl.stack([V, Vmax, Km])
        parts = [sl.pk.ode(mm_elimination, 1, ev, theta, ss_guess=self._guess(r),
                           **self.ode_control)[1:, 0]
                 for r, ev in enumerate(self.events)]
        amounts = parts[0] if len(parts) == 1 else sl.concatenate(parts)
        return {"C": amounts[self.data_order] / V}

    def log_prob(self, V, Vmax, Km, sigma, C):
        lp = sl.lognormal_lpdf(V, math.log(50.0), 0.5)
        lp = lp + sl.lognormal_lpdf(Vmax, math.log(30.0), 0.75)
        lp = lp + sl.lognormal_lpdf(Km, math.log(5.0), 1.0)
        lp = lp + sl.normal_lpdf(sigma, 0.0, 0.5)
        return lp + sl.lognormal_lpdf(self.conc, sl.log(C), sigma)

    def log_likelihood(self, sigma, C):
        """Pointwise log-likelihood (ArviZ's log_likelihood group, arviz.loo); the
        prior of sample_prior_predictive is log_prob minus its sum."""
        return sl.lognormal_lpdf(self.conc, sl.log(C), sigma, reduce=False)

    def generated_quantities(self, rng, V, Vmax, Km, sigma, C):
        mu = np.log(C)
        z = (self.log_conc - mu) / sigma
        return {"C_trough": np.array([trough_exact(d, i, V, Vmax, Km)
                                      for d, i in zip(self.dose, self.ii)]),
                "conc_rep": np.exp(rng.normal(mu, sigma)),
                "log_lik": -0.5 * z * z - math.log(sigma) - self.log_conc
                - 0.5 * math.log(2 * math.pi)}


if __name__ == "__main__":           # regenerate the default data
    from stanlite.models import _write_default_data
    print(f"wrote {_write_default_data('mm_multidose_ss', simulate_data())}")
