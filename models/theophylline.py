r"""Population pharmacokinetics of theophylline: the classic one-compartment model with
first-order absorption, hierarchical over 12 subjects, solved by ``sl.pk.onecpt``.

The data
--------
Boeckmann, Sheiner & Beal (1994), *NONMEM Users Guide, Part V*: twelve subjects took
one oral dose of the anti-asthmatic theophylline (3.1-5.9 mg/kg) at ``t = 0``; serum
concentrations (mg/L) were measured 11 times over the next 25 h (132 in all, the first
at ``t = 0``). Distributed with R as ``datasets::Theoph`` and the standard example of
Pinheiro & Bates (2000), *Mixed-Effects Models in S and S-PLUS*, section 8.2.

The model
---------
Subject ``j``'s gut and central amounts (per kg of body weight) follow

.. math::

    g' = -k_{a,j}\, g, \qquad c' = k_{a,j}\, g - k_{e,j}\, c, \qquad
    g(0) = D_j,\; c(0) = 0,

and the concentration is ``C = c / V_j`` with the volume ``V_j = CL_j / k_{e,j}``
(L/kg; ``CL`` the clearance, L/h/kg), which gives Pinheiro & Bates'
``SSfol(Dose, Time, lKe, lKa, lCl)``

.. math::

    C_j(t) = \frac{D_j\, k_{a,j}\, k_{e,j}}{CL_j\, (k_{a,j} - k_{e,j})}
             \big(e^{-k_{e,j} t} - e^{-k_{a,j} t}\big).

Here it is not typed in: the schedule (one dose record into the gut at ``t = 0``
per subject, then the observation records) is solved by the library's closed form
(:func:`stanlite.pk.onecpt`, divided differences, exact also when ``ka = ke``),
for all subjects in one vectorised call.

Hierarchy (between-subject variability, log-normal, diagonal, *non-centred*):

.. math::

    \log k_{a,j} = \texttt{log\_ka} + \omega_{ka} z_{ka,j}, \quad
    \log k_{e,j} = \texttt{log\_ke} + \omega_{ke}^{w} z_{ke,j}, \quad
    \log CL_j = \texttt{log\_cl} + \omega_{cl} z_{cl,j},

    z_{ka,j}, z_{cl,j} \sim \mathrm{N}(0, 1), \quad
    z_{ke,j} \sim \mathrm{N}(0, \omega_{ke}^{1 - w}), \quad w = 1/2,

which is, for every ``w``, the same model: ``log ke_j ~ N(log_ke, omega_ke)`` (the
density of ``z_ke`` is that of ``log ke_j`` times the Jacobian ``omega_ke^w``), so
``log_ka``, ``log_ke``, ``log_cl`` are the means of the log-scale individual
parameters: Pinheiro & Bates' fixed effects ``lKa``, ``lKe``, ``lCl``. Only the
geometry NUTS sees depends on the parameterisation. ``ka`` and ``CL`` are
non-centred (``w = 1``) because the data say little about some of the ``omega``:
in the centred form the individual effects and their scale make a funnel where
NUTS diverges; the ``z`` are a priori independent of ``omega``. The price is paid
where the data pin a subject's parameter down (``CL`` within a few percent): ``z``
and the population mean then move together, and trajectories are long (~60
leapfrog steps). Measured on 4 x (400 + 200) NUTS iterations: centring ``ka`` and
``CL`` (``ke`` non-centred) halves the trajectories and raises the bulk ESS of
``log_ka`` from ~120 to ~930, but brings back divergences (2 in 800 draws).

``ke`` is *partly* non-centred (Papaspiliopoulos, Roberts & Skold 2003; issue 22).
``omega_ke`` sits near 0 (``nlme``'s estimate is 2e-5; posterior mean ~0.07) with a
tail to ~0.3, and neither extreme parameterisation suits both ends: centred, small
``omega_ke`` is a funnel; non-centred, a large ``omega_ke`` pins each ``z_ke`` (the
terminal slopes fix ``log ke_j`` within ~0.05) to a width ``~0.05 / omega_ke``, so the
curvature grows ~20-fold from the bulk to the tail, beyond the step size adapted in
the bulk. The divergences of Stan's defaults (4 x (500 + 500): 2 with ``w = 1``
reported; 3 in one run with ``CL`` centred, all at ``omega_ke`` 0.25-0.3) come from
that tail. With ``omega_ke^w``, ``w < 1``, both ends are milder (the width varies
as ``omega_ke^-w`` in the tail, as ``omega_ke^(1 - w)`` in the funnel). Measured
with ``w = 1/2`` at Stan's defaults, 4 x (500 + 500), seeds 1-4: 0 divergences in
all 16 chains, ~57 leapfrog steps per draw (60 before). The price: the bulk ESS of
``omega_ke`` drops from ~800 to 180-260 per 2000 draws (R-hat up to 1.02 on 500
draws per chain), the other population parameters unchanged (ESS 520-2100).

Residual error, additive on the concentration scale:
``conc_i ~ N(C_{j[i]}(t_i), sigma)``. Why not proportional (log-normal)? Twelve
samples are taken at ``t = 0``, where the model's concentration is exactly 0 and
four of them are not (0.15-0.74 mg/L: assay noise, or drug left from before the
study); on the log scale they would have probability zero and must be dropped. An
additive error keeps every observation and is the error model of the published NLME
fits (``nlme``'s default), so the posterior can be compared with them like for like.
(The residuals do grow somewhat with the concentration: a combined additive +
proportional error would fit better; the notebook's posterior predictive checks show
how much.)

Priors, weakly informative on the scale of the problem (log-normal medians from
textbook values for an immediate-release oral drug, each with a factor-e spread):

* ``log_ka ~ N(0, 1)``: absorption half-life around 40 min (95%: 5 min to 5 h);
* ``log_ke ~ N(-2.3, 1)``: elimination half-life around 7 h (95%: 1 h to 2 days);
* ``log_cl ~ N(-3, 1)``: clearance around 0.05 L/h/kg;
* ``omega_ka, omega_ke, omega_cl ~ N+(0, 1)``: coefficients of variation up to ~100%;
* ``sigma ~ N+(0, 2)`` mg/L (the concentrations are 0-11 mg/L).

Flip-flop. ``C(t)`` is unchanged when ``ka`` and ``ke`` are swapped (with ``CL``
fixed, ``V`` changes), so the likelihood has a mirror image with slow absorption and
fast elimination, as likely as the real one. Priors alone do not remove it: in a
first version with unordered population means one NUTS chain of four, started at
Stan's default initial points, settled in the mirror image (``log_ka = -2.45``,
``log_ke = 0.46``) and never left. The model therefore *orders* the population
means, ``log_ka > log_ke`` (absorption faster than elimination, as for any
immediate-release formulation): the standard identification of a symmetric model
(like the ordered means of a mixture). The posterior puts no mass near
``log_ka = log_ke`` (they are ~3 apart, posterior sds ~0.2 and ~0.05), so the
truncation changes nothing else; individual flips stay possible but would put a
subject's ``z_ka`` ~4.5 standard deviations out, which the hierarchy forbids.

Data (``data/theophylline.json``): ``J`` subjects, ``N`` observations, per
observation ``subject`` (1-based), ``time`` (h) and ``conc`` (mg/L); per subject
``dose`` (mg/kg) and ``weight`` (kg, unused by the model). The observations need not
be sorted: the schedule is built sorted by subject and time and the results are
returned in data order.

Parameters (in this order): ``log_ke``, ``log_ka`` (``> log_ke``), ``log_cl``, ``omega_ka``,
``omega_ke``, ``omega_cl``, ``sigma``, ``z_ka``, ``z_ke``, ``z_cl`` (J each).
Transformed parameters: the individual ``ka``, ``ke`` (1/h), ``cl`` (L/h/kg) and the
predicted concentrations ``C`` (N). Generated quantities: ``V_pop`` (the typical
volume ``exp(log_cl - log_ke)``, L/kg), ``t_half`` (typical elimination half-life,
h), ``conc_rep`` (replicated observations) and ``log_lik`` (pointwise).
"""

import math

import numpy as np

import stanlite as sl

__all__ = ["Theophylline", "NLME_REFERENCE", "from_csv", "concentration"]

#: Pinheiro & Bates (2000), section 8.2, as reproduced by R's nlme (maximum
#: likelihood; the book's scripts run by nlme's tests, ``tests/extras/
#: scripts.Rout.save``, ch08): fixed effects, random-effect SDs and residual SD.
#: fm1: general 3x3 random-effect covariance; fm2: diagonal (this model's structure).
NLME_REFERENCE = {
    "fm1Theo.nlme": {"log_ke": -2.433, "log_ka": 0.451, "log_cl": -3.214,
                     "omega_ke": 0.131, "omega_ka": 0.638, "omega_cl": 0.251,
                     "sigma": 0.682, "logLik": -173.0},
    "fm2Theo.nlme": {"log_ke": -2.455, "log_ka": 0.466, "log_cl": -3.227,
                     "omega_ke": 1.93e-5, "omega_ka": 0.644, "omega_cl": 0.167,
                     "sigma": 0.709, "logLik": -177.0},
}

_PRIOR = {"log_ka": (0.0, 1.0), "log_ke": (-2.3, 1.0), "log_cl": (-3.0, 1.0)}
_OMEGA_SCALE = 1.0
#: the weight w of the partly non-centred ke: log ke_j = log_ke + omega_ke^w z_ke_j,
#: z_ke_j ~ N(0, omega_ke^(1 - w)); 1 is non-centred, 0 centred (module docstring)
_KE_WEIGHT = 0.5
_SIGMA_SCALE = 2.0


def from_csv(path):
    """The model's data from a CSV laid out like ``theoph.csv`` (columns ``Subject,
    Wt_kg, Dose_mg_per_kg, Dose_mg_total, Time_h, conc_mg_per_L``, one row per
    sample), as a dict of plain lists (what ``data/theophylline.json`` holds).

    Subjects are numbered 1..J in order of first appearance; a subject's dose and
    weight must be the same on all its rows (:class:`~stanlite.DataError` otherwise).
    """
    import csv

    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    need = ("Subject", "Wt_kg", "Dose_mg_per_kg", "Time_h", "conc_mg_per_L")
    if not rows or any(k not in rows[0] for k in need):
        raise sl.DataError(f"from_csv: {path} needs the columns {', '.join(need)}")
    order, dose, weight = {}, [], []
    subject, time, conc = [], [], []
    for i, r in enumerate(rows):
        key = r["Subject"]
        if key not in order:
            order[key] = len(order) + 1
            dose.append(float(r["Dose_mg_per_kg"]))
            weight.append(float(r["Wt_kg"]))
        j = order[key]
        if float(r["Dose_mg_per_kg"]) != dose[j - 1] or float(r["Wt_kg"]) != weight[j - 1]:
            raise sl.DataError(f"from_csv: row {i + 2}: subject {key} has another dose or "
                               "weight than on its first row (one dose per subject)")
        subject.append(j)
        time.append(float(r["Time_h"]))
        conc.append(float(r["conc_mg_per_L"]))
    return {"J": len(order), "N": len(rows), "subject": subject, "time": time,
            "conc": conc, "dose": dose, "weight": weight}


def concentration(dose, t, ka, ke, cl):
    r"""``SSfol`` in numpy, broadcasting: ``D ka ke / (CL (ka - ke)) (e^{-ke t} -
    e^{-ka t})``, written ``D ka ke / CL * t e^{-ke t} * (1 - e^{-d t}) / (d t)``
    with ``d = ka - ke`` (``-expm1(-d t) / (d t)``, 1 at ``d t = 0``) so that close
    rates lose no digits. For plots and independent checks of the model.

    >>> round(float(concentration(4.02, 1.0, 1.5, 0.09, 0.04)), 6)
    6.647123
    """
    dose, t, ka, ke, cl = (np.asarray(a, dtype=float) for a in (dose, t, ka, ke, cl))
    d = ka - ke
    x = d * t
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(x == 0, 1.0, -np.expm1(-x) / np.where(x == 0, 1.0, x))
    return dose * ka * ke / cl * t * np.exp(-ke * t) * ratio


class Theophylline(sl.Model):
    r"""Hierarchical one-compartment first-order-absorption model of the theophylline
    data (module docstring for the math, priors and the choice of error model).

    .. math::

        \log(k_{a,j}, k_{e,j}, CL_j) &= (\texttt{log\_ka}, \texttt{log\_ke},
            \texttt{log\_cl}) + (\omega_{ka} z_{ka,j}, \omega_{ke}^{w} z_{ke,j},
            \omega_{cl} z_{cl,j}), \quad z_{ka}, z_{cl} \sim \mathrm{N}(0, 1),
            \ z_{ke} \sim \mathrm{N}(0, \omega_{ke}^{1 - w}), \\
        C_j(t) &= \text{central amount of } \texttt{sl.pk.onecpt}
            (\text{dose } D_j \text{ into the gut at } 0;\ CL_j,\ V_j = CL_j / k_{e,j},
            \ k_{a,j}) / V_j, \\
        \text{conc}_i &\sim \mathrm{N}\big(C_{j[i]}(t_i), \sigma\big).

    Source: data of Boeckmann, Sheiner & Beal (1994), NONMEM Users Guide Part V (R's
    ``datasets::Theoph``; ``data/README.md``); model of Pinheiro & Bates (2000),
    *Mixed-Effects Models in S and S-PLUS*, section 8.2 (``fm2Theo.nlme``: diagonal
    random effects on ``lKe, lKa, lCl``, additive error), with priors, ordered
    population rates (``log_ka > log_ke``: no flip-flop mirror mode) and a
    (partly, for ``ke``) non-centred parameterisation for NUTS.

    >>> import stanlite.models as zoo
    >>> m = zoo.get("theophylline")
    >>> m.dim, m.param_names()[:3]
    (43, ['log_ke', 'log_ka', 'log_cl'])
    """

    J = sl.data.int(lower=1)
    N = sl.data.int(lower=1)
    subject = sl.data.array("N", dtype="int", lower=1, upper="J")
    time = sl.data.vector("N", lower=0)
    conc = sl.data.vector("N")
    dose = sl.data.vector("J", lower=0)

    log_ke = sl.param.real()
    # ordered population rates: absorption faster than elimination (flip-flop)
    log_ka = sl.param.real(lower=lambda log_ke: log_ke)
    log_cl = sl.param.real()
    omega_ka = sl.param.real(lower=0)
    omega_ke = sl.param.real(lower=0)
    omega_cl = sl.param.real(lower=0)
    sigma = sl.param.real(lower=0)
    z_ka = sl.param.vector("J")
    z_ke = sl.param.vector("J")
    z_cl = sl.param.vector("J")

    observed = ("conc",)

    def transformed_data(self):
        # per observation its record in the schedule, and its 0-based subject
        _, rec = self.schedule(self.subject, self.time, self.dose)
        return {"rec": rec, "obs_subj": self.subject - 1}

    def __init__(self, *args, **data):            # data as keywords or one dict
        super().__init__(*args, **data)
        # an object, not numbers: an ordinary attribute rather than transformed data
        self.events = self.schedule(self.subject, self.time, self.dose)[0]

    @staticmethod
    def schedule(subject, time, dose):
        """The event schedule of the study: per subject (1-based ``subject`` ids) a
        dose of ``dose[j]`` into the gut (compartment 1) at ``t = 0``, then its
        observation records (evid 0) sorted by time. Returns the
        :class:`~stanlite.pk.EventSchedule` and, per observation (data order), the
        index of its record.

        >>> ev, rec = Theophylline.schedule([1, 1, 2], [0.5, 2.0, 1.0], [4.0, 5.0])
        >>> ev.to_dataframe()[["ID", "TIME", "EVID", "AMT"]].values
        array([[1. , 0. , 1. , 4. ],
               [1. , 0.5, 0. , 0. ],
               [1. , 2. , 0. , 0. ],
               [2. , 0. , 1. , 5. ],
               [2. , 1. , 0. , 0. ]])
        >>> rec.tolist()
        [1, 2, 4]
        """
        subject = np.asarray(subject, dtype=int)
        time = np.asarray(time, dtype=float)
        dose = np.asarray(dose, dtype=float)
        J = len(dose)
        order = np.lexsort((time, subject))           # by subject, then time
        ids, times, evid, amt = [], [], [], []
        rec = np.empty(len(subject), dtype=int)
        k = 0
        for j in range(1, J + 1):
            ids.append(j)
            times.append(0.0)
            evid.append(1)
            amt.append(dose[j - 1])
            k += 1
            for i in order[subject[order] == j]:
                ids.append(j)
                times.append(time[i])
                evid.append(0)
                amt.append(0.0)
                rec[i] = k
                k += 1
        ev = sl.pk.events(id=ids, time=times, evid=evid, amt=amt,
                          cmt=np.where(np.array(evid) == 1, 1, 2))
        return ev, rec

    def transformed_parameters(self, log_ka, log_ke, log_cl, omega_ka, omega_ke,
                               omega_cl, z_ka, z_ke, z_cl):
        ka = sl.exp(log_ka + omega_ka * z_ka)
        ke = sl.exp(log_ke + omega_ke ** _KE_WEIGHT * z_ke)      # partly non-centred
        cl = sl.exp(log_cl + omega_cl * z_cl)
        amounts = sl.pk.onecpt(self.events, CL=cl, V=cl / ke, ka=ka)
        # concentration = central amount / V, V = CL / ke
        C = amounts[self.rec, 1] * (ke / cl)[self.obs_subj]
        return {"ka": ka, "ke": ke, "cl": cl, "C": C}

    def log_prob(self, log_ka, log_ke, log_cl, omega_ka, omega_ke, omega_cl, sigma,
                 z_ka, z_ke, z_cl, C):
        lp = sl.normal_lpdf(log_ka, *_PRIOR["log_ka"])
        lp = lp + sl.normal_lpdf(log_ke, *_PRIOR["log_ke"])
        lp = lp + sl.normal_lpdf(log_cl, *_PRIOR["log_cl"])
        lp = lp + sl.normal_lpdf(sl.stack([omega_ka, omega_ke, omega_cl]), 0.0,
                                 _OMEGA_SCALE)
        lp = lp + sl.normal_lpdf(sigma, 0.0, _SIGMA_SCALE)
        # log ke_j ~ N(log_ke, omega_ke), written for z_ke = (log ke_j - log_ke) /
        # omega_ke^w (module docstring)
        lp = lp + sl.std_normal_lpdf(z_ka)
        lp = lp + sl.normal_lpdf(z_ke, 0.0, omega_ke ** (1.0 - _KE_WEIGHT))
        lp = lp + sl.std_normal_lpdf(z_cl)
        return lp + sl.normal_lpdf(self.conc, C, sigma)

    def generated_quantities(self, rng, log_ke, log_cl, sigma, C):
        return {"V_pop": math.exp(log_cl - log_ke),
                "t_half": math.log(2.0) / math.exp(log_ke),
                "conc_rep": rng.normal(C, sigma),
                "log_lik": self.log_likelihood(sigma, C)}

    def log_likelihood(self, sigma, C):
        """Pointwise log-likelihood (for ``arviz.loo``), one per observation; the prior
        of sample_prior_predictive is log_prob minus its sum."""
        return sl.normal_lpdf(self.conc, C, sigma, reduce=False)


if __name__ == "__main__":           # regenerate the default data from ../shared
    import pathlib
    from stanlite.models import _write_default_data
    src = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "theoph.csv"
    print(f"wrote {_write_default_data('theophylline', from_csv(src))} from {src}")
