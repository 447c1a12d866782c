r"""The Friberg-Karlsson semi-mechanistic model of drug-induced neutropenia, one
subject, through the coupled PK/PD solver ``sl.pk.twocpt_ode``.

The problem
-----------
A cytotoxic drug is given orally, ``amt`` every ``ii`` h; its plasma concentration
follows a two-compartment model with first-order absorption (CL, Q, V1 central, V2
peripheral, ka), and it kills proliferating cells in the bone marrow. The
neutrophils mature through a proliferating pool, three transit compartments and the
circulation, each with rate ``k_tr = 4 / MTT`` (MTT the mean transit time), and a
feedback of the circulating count on proliferation keeps the count at ``Circ_0`` in
the absence of drug (Friberg, Henningsson, Maas, Nguyen & Karlsson 2002, "Model of
chemotherapy-induced myelosuppression with parameter consistency across drugs",
J. Clin. Oncol. 20):

.. math::

    \text{Prol}' &= k_{tr}\,\text{Prol}\,\big((1 - E)\,(\text{Circ}_0 /
        \text{Circ})^{\gamma} - 1\big), \qquad E = \alpha\, C(t), \quad
        C = \text{cent} / V_1, \\
    \text{Tr}_1' &= k_{tr} (\text{Prol} - \text{Tr}_1), \quad
    \text{Tr}_2' = k_{tr} (\text{Tr}_1 - \text{Tr}_2), \quad
    \text{Tr}_3' = k_{tr} (\text{Tr}_2 - \text{Tr}_3), \\
    \text{Circ}' &= k_{tr} (\text{Tr}_3 - \text{Circ}).

As in Torsten's example (``example-models/FK_coupled``) the PD states are the
deviations ``y = state - Circ_0`` from the baseline, so they start at 0 like the
amounts of an event schedule. The PK is linear: ``sl.pk.twocpt_ode`` computes it in
closed form and integrates only the five PD states (Torsten's
``pmx_solve_twocpt_rk45``); the same model through ``sl.pk.ode`` integrates all
eight states (:func:`fk_full`, the benchmark's comparison).

The model
---------
.. math::

    \log c_i &\sim \mathrm{N}(\log C(t_i), \sigma), \qquad
    \log n_k \sim \mathrm{N}(\log \text{Circ}(t_k), \sigma_N), \\
    \text{CL} &\sim \mathrm{LogNormal}(\log 10, 0.25), \quad
    Q \sim \mathrm{LogNormal}(\log 15, 0.5), \quad
    V_1 \sim \mathrm{LogNormal}(\log 35, 0.25), \\
    V_2 &\sim \mathrm{LogNormal}(\log 105, 0.5), \quad
    k_a \sim \mathrm{LogNormal}(\log 2, 0.25), \quad
    \text{MTT} \sim \mathrm{LogNormal}(\log 125, 0.2), \\
    \text{Circ}_0 &\sim \mathrm{LogNormal}(\log 5, 0.2), \quad
    \alpha \sim \mathrm{LogNormal}(\log 3 \cdot 10^{-4}, 0.2), \quad
    \gamma \sim \mathrm{LogNormal}(\log 0.17, 0.2), \\
    \sigma, \sigma_N &\sim \mathrm{N}^+(0, 0.5).

The priors are those of Torsten's example (informative, as usual for this model:
the system parameters MTT, Circ_0 and gamma carry over between drugs). The nine
log-normal parameters are sampled through their standardised logs ``z ~ N(0, I)``
(the same posterior, better scaled for NUTS). Units: amounts
in ug, volumes in L, concentrations in ug/L, times in h, neutrophils in 10^9/L.

Default data (``data/friberg_karlsson.json``, :func:`simulate_data`): 80 mg every
12 h for 15 doses; 12 concentrations over the first dosing interval and 14
neutrophil counts over four weeks, simulated from :data:`TRUTH` by the full 8-state
ODE (``sl.pk.ode``, tolerances 1e-10) with log-normal noise (numpy seed
:data:`DATA_SEED`). Run ``python models/friberg_karlsson.py`` to regenerate them.
"""

import math

import numpy as np

import stanlite as sl

__all__ = ["FribergKarlsson", "fk_pd", "fk_full", "schedule", "simulate_data", "z_of",
           "TRUTH", "PRIORS", "DESIGN", "DATA_SEED"]

#: the values the default data are simulated from
TRUTH = {"CL": 10.0, "Q": 15.0, "V1": 35.0, "V2": 105.0, "ka": 2.0, "mtt": 125.0,
         "circ0": 5.0, "alpha": 3e-4, "gamma": 0.17, "sigma": 0.1, "sigma_neut": 0.1}
#: the default design: dose (ug), interval (h), additional doses, PK and PD times (h)
DESIGN = {"amt": 80000.0, "ii": 12.0, "addl": 14,
          "time_pk": [0.083, 0.167, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0],
          "time_neut": [24.0, 48.0, 72.0, 96.0, 120.0, 144.0, 168.0, 192.0, 216.0, 240.0,
                        288.0, 336.0, 480.0, 672.0]}
DATA_SEED = 20261126
#: the log-normal priors (median, sd of the log) of the nine system parameters, in the
#: order of ``z``
PRIORS = {"CL": (10.0, 0.25), "Q": (15.0, 0.5), "V1": (35.0, 0.25), "V2": (105.0, 0.5),
          "ka": (2.0, 0.25), "mtt": (125.0, 0.2), "circ0": (5.0, 0.2),
          "alpha": (3e-4, 0.2), "gamma": (0.17, 0.2)}
NAMES = tuple(PRIORS)


def z_of(values):
    """The model's parameters (``z``, ``sigma``, ``sigma_neut``) for natural values of
    the nine system parameters and the two error sds (a dict such as :data:`TRUTH`):
    ``z_i = log(value_i / median_i) / sd_i``.

    >>> z_of(TRUTH)["z"]
    array([0., 0., 0., 0., 0., 0., 0., 0., 0.])
    """
    z = np.array([math.log(values[k] / PRIORS[k][0]) / PRIORS[k][1] for k in NAMES])
    return {"z": z, "sigma": values["sigma"], "sigma_neut": values["sigma_neut"]}


def fk_pd(t, y, a, theta):
    r"""The five PD rates (deviations from ``Circ_0``) for ``sl.pk.twocpt_ode``:
    ``a`` the PK amounts (gut, central, peripheral), ``theta = (V1, MTT, Circ_0,
    alpha, gamma)``.

    >>> import numpy as np
    >>> th = np.array([35.0, 125.0, 5.0, 3e-4, 0.17])
    >>> fk_pd(0.0, np.zeros(5), np.zeros(3), th)          # baseline: at rest
    array([0., 0., 0., 0., 0.])
    """
    V1, mtt, circ0, alpha, gamma = theta[0], theta[1], theta[2], theta[3], theta[4]
    ktr = 4.0 / mtt
    edrug = alpha * a[1] / V1
    prol, t1, t2, t3, circ = (y[0] + circ0, y[1] + circ0, y[2] + circ0, y[3] + circ0,
                              y[4] + circ0)
    return sl.stack([ktr * prol * ((1.0 - edrug) * (circ0 / circ) ** gamma - 1.0),
                     ktr * (prol - t1), ktr * (t1 - t2), ktr * (t2 - t3),
                     ktr * (t3 - circ)])


def fk_full(t, x, theta):
    """The same model as one 8-state ODE for ``sl.pk.ode``: gut, central, peripheral,
    then the PD states; ``theta = (CL, Q, V1, V2, ka, MTT, Circ_0, alpha, gamma)``."""
    CL, Q, V1, V2, ka = theta[0], theta[1], theta[2], theta[3], theta[4]
    k10, k12, k21 = CL / V1, Q / V1, Q / V2
    pk = sl.stack([-ka * x[0], ka * x[0] - (k10 + k12) * x[1] + k21 * x[2],
                   k12 * x[1] - k21 * x[2]])
    pd = fk_pd(t, x[3:], x[:3], sl.stack([V1, theta[5], theta[6], theta[7], theta[8]]))
    return sl.concatenate([pk, pd])


def schedule(amt, ii, addl, times):
    """The event schedule: the dose record at 0 (``addl`` more every ``ii``), then one
    observation record per time of ``times`` (sorted)."""
    times = np.asarray(times, dtype=float)
    n = len(times)
    z = np.zeros(n)
    return sl.pk.events(time=np.r_[0.0, times], evid=np.r_[1, z], amt=np.r_[amt, z],
                        ii=np.r_[ii, z], addl=np.r_[addl, z])


def simulate_data(seed=DATA_SEED, design=DESIGN, **truth):
    """Data for :class:`FribergKarlsson`: the exact (full ODE, tolerance 1e-10)
    concentrations and neutrophil counts of ``design`` at ``truth`` (default
    :data:`TRUTH`), times log-normal noise from ``numpy.random.default_rng(seed)``
    (concentrations first, then counts). ``data/friberg_karlsson.json`` is
    ``simulate_data()``."""
    p = dict(TRUTH, **truth)
    tp, tn = list(design["time_pk"]), list(design["time_neut"])
    times = np.unique(np.r_[tp, tn])
    ev = schedule(design["amt"], design["ii"], design["addl"], times)
    theta = np.array([p[k] for k in ("CL", "Q", "V1", "V2", "ka", "mtt", "circ0",
                                     "alpha", "gamma")])
    A = sl.pk.ode(fk_full, 8, ev, theta, rel_tol=1e-10, abs_tol=1e-10)[1:]
    at = {float(t): i for i, t in enumerate(times)}
    conc = np.array([A[at[t], 1] / p["V1"] for t in tp])
    neut = np.array([A[at[t], 7] + p["circ0"] for t in tn])
    z = np.random.default_rng(seed).standard_normal(len(tp) + len(tn))
    conc = conc * np.exp(p["sigma"] * z[:len(tp)])
    neut = neut * np.exp(p["sigma_neut"] * z[len(tp):])
    return {"amt": design["amt"], "ii": design["ii"], "addl": design["addl"],
            "N_pk": len(tp), "time_pk": tp, "conc": [round(float(v), 6) for v in conc],
            "N_neut": len(tn), "time_neut": tn,
            "neut": [round(float(v), 6) for v in neut]}


def _positive_field(name, v):
    if not np.all(np.asarray(v) > 0):
        i = int(np.flatnonzero(~(np.asarray(v) > 0))[0])
        raise sl.DataError(f"data field '{name}': log-normal errors need positive "
                           f"values, element [{i + 1}] is {float(v[i])!r}")


class FribergKarlsson(sl.Model):
    r"""Friberg-Karlsson neutropenia, one subject, two-compartment oral PK in closed
    form coupled to the five-state myelosuppression ODE (module docstring for the
    math).

    Data: one dosing record (``amt`` ug every ``ii`` h, ``addl`` more); ``N_pk``
    concentrations ``conc`` (ug/L) at ``time_pk`` and ``N_neut`` neutrophil counts
    ``neut`` at ``time_neut`` (h after the first dose). Parameters: ``z`` (9), the
    system parameters standardised on the log scale (``CL = 10 e^{0.25 z_1}``, ...,
    :data:`PRIORS`: their log-normal priors become ``z ~ N(0, I)``, so the sampler
    sees parameters of unit scale and the zero point is the prior median;
    :func:`z_of` maps natural values to them), ``sigma``, ``sigma_neut``.
    Transformed parameters: ``CL, Q, V1, V2, ka, mtt, circ0, alpha, gamma``, ``C``
    (predicted concentrations) and ``circ`` (predicted counts). Generated quantities:
    ``conc_rep``, ``neut_rep`` (replicates) and ``log_lik`` (both kinds of
    observation, concentrations first).

    Constructor options: ``solver`` ``"coupled"`` (default: ``sl.pk.twocpt_ode``) or
    ``"full"`` (``sl.pk.ode`` with all 8 states: the same posterior to the
    tolerances, the slow path of the benchmark), ``rel_tol``, ``abs_tol`` (1e-6,
    Torsten's defaults) and ``max_num_steps`` (5000 between two events, ~100 are
    needed: far-out proposals of warmup fail fast, with a ``SolverError``, and are
    rejected).

    Source: Friberg et al. (2002) for the model; the design, parameter values and
    priors follow Torsten's ``FK_coupled`` example (Metrum Research Group); default
    data simulated (:func:`simulate_data`).
    """

    amt = sl.data.real(lower=0)
    ii = sl.data.real(lower=0)
    addl = sl.data.int(lower=0)
    N_pk = sl.data.int(lower=1)
    time_pk = sl.data.vector("N_pk", lower=0)
    conc = sl.data.vector("N_pk", lower=0)
    N_neut = sl.data.int(lower=1)
    time_neut = sl.data.vector("N_neut", lower=0)
    neut = sl.data.vector("N_neut", lower=0)

    z = sl.param.vector(9)               # standardised log system parameters
    sigma = sl.param.real(lower=0)
    sigma_neut = sl.param.real(lower=0)

    observed = ("conc", "neut")

    def transformed_data(self):
        _positive_field("conc", self.conc)
        _positive_field("neut", self.neut)
        return {"log_conc": np.log(self.conc), "log_neut": np.log(self.neut)}

    def __init__(self, *args, solver="coupled", rel_tol=1e-6, abs_tol=1e-6,
                 max_num_steps=5000, **data):
        super().__init__(*args, **data)
        if solver not in ("coupled", "full"):
            raise sl.ModelError(f"FribergKarlsson: solver must be 'coupled' or 'full', "
                                f"got {solver!r}")
        times = np.unique(np.r_[self.time_pk, self.time_neut])
        self.events = schedule(self.amt, self.ii, self.addl, times)
        # record of each observation (record 0 is the dose)
        self.rec_pk = 1 + np.searchsorted(times, self.time_pk)
        self.rec_neut = 1 + np.searchsorted(times, self.time_neut)
        self.solver = solver
        self.control = dict(rel_tol=rel_tol, abs_tol=abs_tol, max_num_steps=max_num_steps)

    def transformed_parameters(self, z):
        med = np.array([PRIORS[k][0] for k in NAMES])
        sd = np.array([PRIORS[k][1] for k in NAMES])
        p = med * sl.exp(sd * z)                # each log-normal(log median, sd)
        CL, Q, V1, V2, ka, mtt, circ0, alpha, gamma = (p[i] for i in range(9))
        if self.solver == "coupled":
            A = sl.pk.twocpt_ode(fk_pd, 5, self.events, CL, Q, V1, V2, ka,
                                 sl.stack([V1, mtt, circ0, alpha, gamma]), **self.control)
        else:
            A = sl.pk.ode(fk_full, 8, self.events, p, **self.control)
        out = {k: p[i] for i, k in enumerate(NAMES)}
        out.update(C=A[self.rec_pk, 1] / V1, circ=A[self.rec_neut, 7] + circ0)
        return out

    def log_prob(self, z, sigma, sigma_neut, C, circ):
        lp = sl.std_normal_lpdf(z)
        lp = lp + sl.normal_lpdf(sigma, 0.0, 0.5) + sl.normal_lpdf(sigma_neut, 0.0, 0.5)
        lp = lp + sl.lognormal_lpdf(self.conc, sl.log(C), sigma)
        return lp + sl.lognormal_lpdf(self.neut, sl.log(circ), sigma_neut)

    def log_likelihood(self, sigma, sigma_neut, C, circ):
        """Pointwise log-likelihood of the observations (concentrations, then
        neutrophil counts) on their own scale: the log-normal densities."""
        return sl.concatenate([
            sl.lognormal_lpdf(self.conc, sl.log(C), sigma, reduce=False),
            sl.lognormal_lpdf(self.neut, sl.log(circ), sigma_neut, reduce=False)])

    def generated_quantities(self, rng, sigma, sigma_neut, C, circ):
        lc, ln = np.log(C), np.log(circ)
        zc = (self.log_conc - lc) / sigma
        zn = (self.log_neut - ln) / sigma_neut
        c = 0.5 * math.log(2 * math.pi)
        return {"conc_rep": np.exp(rng.normal(lc, sigma)),
                "neut_rep": np.exp(rng.normal(ln, sigma_neut)),
                "log_lik": np.r_[-0.5 * zc * zc - math.log(sigma) - self.log_conc - c,
                                 -0.5 * zn * zn - math.log(sigma_neut) - self.log_neut
                                 - c]}


if __name__ == "__main__":           # regenerate the default data
    from stanlite.models import _write_default_data
    print(f"wrote {_write_default_data('friberg_karlsson', simulate_data())}")
