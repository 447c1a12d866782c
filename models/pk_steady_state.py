r"""The AD review's steady-state experiment (Margossian 2019, Table 8 and its appendix)
as a problem, and as a Bayesian model sampled with the algebraic super node inside.

The problem
-----------
Patient ``i`` (of ``n``) takes an oral dose ``D`` every ``tau``; the drug moves from
the gut (amount ``x1``) to a central compartment (amount ``x2``) and is eliminated,

.. math::

    x_1' = -k_{1i} x_1, \qquad x_2' = k_{1i} x_1 - k_{2i} x_2,

a linear system solved in closed form. Over one interval the evolution operator is

.. math::

    F_t(g, c) = \Big(g e^{-k_1 t},\;
        c e^{-k_2 t} + g \frac{k_1}{k_1 - k_2}\big(e^{-k_2 t} - e^{-k_1 t}\big)\Big).

After many doses every patient cycles through the same amounts: the *steady state*,
whose trough (the amounts just before a dose) solves

.. math::

    x = F_\tau(x + D e_{\mathrm{gut}})
    \quad\Longleftrightarrow\quad
    f(x, \theta) = F_\tau(x + D e_{\mathrm{gut}}) - x = 0,

a root-finding problem in the 2n amounts (all guts, then all centrals) with parameters
``theta = (k1_1..k1_n, k2_1..k2_n, D, tau)`` (2n + 2 of them). It is linear and has
a closed form (:func:`steady_state_exact`): gut trough ``D e^{-k1 tau} / (1 - e^{-k1
tau}) = D / (e^{k1 tau} - 1)``, central trough ``(g + D) k1 / (k1 - k2) (e^{-k2 tau} -
e^{-k1 tau}) / (1 - e^{-k2 tau})``; the review solves it numerically
(:func:`steady_state`: ``sl.algebra_solver``, Powell's dogleg, initial guess 500,
rel_tol 1e-10, f_tol 1e-6) because that is what a general (nonlinear) model needs, and
times its derivatives: brute-force AD through the dogleg iterations against the
implicit-function-theorem super node (``benchmarks/steady_state.py``).

Population values ``k1 = 0.5``, ``k2 = 0.2`` (1/day), ``D = 1000`` (mg), ``tau = 1``
(day); patient ``i`` has ``k1_i = k1 phi1_i``, ``k2_i = k2 phi2_i`` with multipliers
drawn uniform(0.7, 1.3) from a fixed seed (:func:`multipliers`; patient ``i`` is the
same whatever ``n``, ``n`` up to 14, i.e. 2 to 28 states).

The factor ``k1 (e^{-k2 t} - e^{-k1 t}) / (k1 - k2)`` is computed as
``-k1 e^{-k2 t} expm1(-(k1 - k2) t) / (k1 - k2)`` (:func:`transfer`): no cancellation
in the value when the two rates are close (it tends to ``k1 t e^{-k t}``); it is 0/0
only at exactly equal rates. Its derivatives of order n lose digits like
``eps / (k1 - k2)^n`` there, so the model uses the divided difference
``-k1 t g[k2 t, k1 t]`` of ``g(y) = e^{-y}`` instead (:func:`transfer_dd`, by
:func:`stanlite.pk.divdiff_exp`), exact in every derivative and at equal rates: the
residual, its Jacobian and the closed form take the factor as an argument.

The model
---------
:class:`PkSteadyState`: trough concentrations measured at steady state, one per
patient, with proportional (log-normal) error,

.. math::

    C_i^{\mathrm{obs}} \sim \mathrm{LogNormal}\big(\log(x^{ss}_{2,i}(\theta) / V),
        \sigma\big), \qquad
    k_1, k_2 \sim \mathrm{LogNormal}(0, 1), \qquad \sigma \sim \mathrm{N}^+(0, 0.5),

where ``x^ss(theta)`` is the steady state solved by ``sl.algebra_solver`` at every
log-density evaluation: its gradient comes from the implicit function theorem
(one transposed LU solve and one VJP of ``f``), so NUTS runs with the algebraic super
node inside every leapfrog step.

Design: the per-patient multipliers ``phi1``, ``phi2`` are *data* (known covariates,
as in the review's experiment where they are fixed draws), not hierarchical
parameters. With one trough per patient, individual absorption and elimination rates
are not identified: a hierarchical layer ``log phi ~ N(0, omega)`` would add 2n
parameters informed only by their prior. With known multipliers the posterior is that
of the population rates, and it shows a pharmacological fact worth seeing: troughs at
steady state determine the elimination rate ``k2`` sharply (the trough is mostly
``D e^{-k2 tau} / (1 - e^{-k2 tau})``) but carry almost no information about the
absorption rate ``k1``, whose posterior stays close to its prior (the notebook
``notebooks/pk_steady_state.ipynb`` plots both).

Default data (``data/pk_steady_state.json``, :func:`simulate_data`): 14 patients (28
states), the population values above, volume ``V = 50`` L, ``sigma = 0.1``, noise
seed 20240808.
"""

import math

import numpy as np

import stanlite as sl
from stanlite.autodiff.var import shape_of
from stanlite.pk import divdiff_exp

__all__ = ["PkSteadyState", "K1", "K2", "DOSE", "TAU", "MAX_PATIENTS", "SEED", "SOLVER",
           "X_GUESS", "multipliers", "population_theta", "unpack", "transfer",
           "transfer_dd", "steady_state_residual", "steady_state_jacobian", "steady_state_exact",
           "steady_state", "steady_state_problem", "evolve", "steady_state_profile",
           "simulate_data"]

K1, K2, DOSE, TAU = 0.5, 0.2, 1000.0, 1.0
MAX_PATIENTS = 14
SEED = 20180314
#: the review's solver settings (Powell's dogleg)
SOLVER = dict(rel_tol=1e-10, f_tol=1e-6, max_steps=200)
#: the review's initial guess for every amount
X_GUESS = 500.0
#: the default data's volume (L), noise and noise seed
VOLUME, SIGMA, DATA_SEED = 50.0, 0.1, 20240808


# --------------------------------------------------------------------------------------
# the problem
# --------------------------------------------------------------------------------------
def multipliers(n_patients, seed=SEED):
    """The multipliers ``(phi1, phi2)`` of patients 1..n, each uniform(0.7, 1.3).

    All 14 patients are drawn at once and the first ``n`` kept, so patient ``i`` is
    the same at every ``n``.

    >>> phi1, phi2 = multipliers(2)
    >>> bool(np.all((0.7 <= phi1) & (phi1 <= 1.3))), phi2.shape
    (True, (2,))
    """
    if not isinstance(n_patients, (int, np.integer)) or not 1 <= n_patients <= MAX_PATIENTS:
        raise ValueError(f"n_patients must be an integer in 1..{MAX_PATIENTS}, got "
                         f"{n_patients!r}")
    phi = np.random.default_rng(seed).uniform(0.7, 1.3, size=(2, MAX_PATIENTS))
    return phi[0, :n_patients], phi[1, :n_patients]


def population_theta(n_patients, k1=K1, k2=K2, dose=DOSE, tau=TAU, random=True):
    """``theta = (k1_1..k1_n, k2_1..k2_n, D, tau)``: the patients' rates (population
    value times multiplier), the dose and the interval. ``random=False``: every
    patient at the population values.

    >>> population_theta(2, random=False)
    array([5.e-01, 5.e-01, 2.e-01, 2.e-01, 1.e+03, 1.e+00])
    """
    if random:
        p1, p2 = multipliers(n_patients)
    else:
        p1 = p2 = np.ones(n_patients)
    return np.concatenate([k1 * p1, k2 * p2, [dose, tau]])


def unpack(theta):
    """``(n, k1, k2, D, tau)`` from ``theta`` (plain or traced)."""
    n = (len(theta) - 2) // 2
    return n, theta[:n], theta[n:2 * n], theta[2 * n], theta[2 * n + 1]


def transfer(k1, k2, t):
    r"""``k1 (e^{-k2 t} - e^{-k1 t}) / (k1 - k2)``: the central amount at ``t`` per unit
    in the gut at 0 (stanlite ops), written ``-k1 e^{-k2 t} expm1(-(k1 - k2) t) /
    (k1 - k2)`` so that close rates lose no digits in the value.

    This is the review's problem as the solver benchmarks time it. Its derivatives
    are AD's of the quotient, term by term, and the n-th cancels like
    ``eps / (k1 - k2)^n`` as the rates meet: harmless to first order (12 digits
    left at ``k1 - k2 = 1e-6``), but the second derivative keeps 8 digits at
    ``1e-4`` and the third about 4. Hessians and third derivatives (RHMC) use
    :func:`transfer_dd`, which the model uses.

    >>> round(float(transfer(0.5, 0.2, 1.0)), 10)         # (e^-0.2 - e^-0.5) 5/3
    0.3536668223
    """
    d = k1 - k2
    return -k1 * sl.exp(-k2 * t) * sl.expm1(-d * t) / d


def transfer_dd(k1, k2, t):
    r"""The same factor as the divided difference ``-k1 t g[k2 t, k1 t]`` of
    ``g(y) = e^{-y}`` (:func:`stanlite.pk.divdiff_exp`): close or equal rates lose no
    digits in the value *nor in any derivative* (the derivatives of a divided
    difference are divided differences again, evaluated without cancellation). What
    :class:`PkSteadyState` uses: RHMC's SoftAbs metric needs third derivatives of the
    log density, and with :func:`transfer` its implicit leapfrog stalled on that
    noise wherever a patient's absorption and elimination rates crossed.

    Plain floats (the solver's iterations) take the quotient, which is exact to
    rounding in value (and ``k1 t e^{-k1 t}`` at equal rates): no primitive's
    overhead where no derivative is taken.

    >>> round(float(transfer_dd(0.5, 0.2, 1.0)), 10)
    0.3536668223
    >>> round(float(transfer_dd(0.5, 0.5, 1.0)), 10)      # k1 t e^{-k1 t}
    0.3032653299
    >>> k = np.array([0.2 + 1e-6])             # d^2/dk1^2, 50 digits: -0.764147925079
    >>> round(float(sl.hessian(lambda k: transfer_dd(k[0], 0.2, 1.0))(k)[0, 0]), 10)
    -0.7641479251
    >>> round(float(sl.hessian(lambda k: transfer(k[0], 0.2, 1.0))(k)[0, 0]), 5)
    -0.76416
    """
    if not isinstance(k1, sl.Box) and not isinstance(k2, sl.Box) \
            and not isinstance(t, sl.Box):
        k1, k2, t = (np.asarray(a, dtype=float) for a in (k1, k2, t))
        d = k1 - k2
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(d == 0, k1 * t * np.exp(-k1 * t),
                           -k1 * np.exp(-k2 * t) * np.expm1(-d * t) / np.where(d == 0, 1, d))
        return float(out) if out.ndim == 0 else out
    lo, hi = k2 * t, k1 * t
    # shapes, not values (a retaped recording may read these)
    shape = np.broadcast_shapes(shape_of(lo), shape_of(hi))
    if shape_of(lo) != shape:
        lo = sl.broadcast_to(lo, shape)
    if shape_of(hi) != shape:
        hi = sl.broadcast_to(hi, shape)
    return -hi * divdiff_exp(sl.stack([lo, hi], axis=-1))


def steady_state_residual(x, theta, transfer=transfer):
    """``f(x, theta) = F_tau(x + D e_gut) - x`` for every patient (stanlite ops):
    guts ``(g + D) e^{-k1 tau} - g``, centrals ``c e^{-k2 tau} + (g + D)
    transfer(k1, k2, tau) - c``; ``transfer``: :func:`transfer` (the review's
    problem) or :func:`transfer_dd` (exact higher derivatives)."""
    n, k1, k2, dose, tau = unpack(theta)
    gut, central = x[:n], x[n:]
    g = gut + dose
    return sl.concatenate([g * sl.exp(-k1 * tau) - gut,
                           central * sl.exp(-k2 * tau) + g * transfer(k1, k2, tau)
                           - central])


def steady_state_jacobian(x, theta, transfer=transfer):
    """The analytic ``df/dx``: per patient ``[[e^{-k1 tau} - 1, 0], [transfer(k1, k2,
    tau), e^{-k2 tau} - 1]]``, four diagonal blocks (stanlite ops: differentiable, so
    Hessians through the solver work with it)."""
    n, k1, k2, dose, tau = unpack(theta)
    top = sl.concatenate([sl.diag_matrix(sl.expm1(-k1 * tau)), np.zeros((n, n))], axis=1)
    bottom = sl.concatenate([sl.diag_matrix(transfer(k1, k2, tau)),
                             sl.diag_matrix(sl.expm1(-k2 * tau))], axis=1)
    return sl.concatenate([top, bottom], axis=0)


def steady_state_exact(theta, transfer=transfer):
    """The closed-form trough: guts ``D / (e^{k1 tau} - 1)``, centrals ``(g + D)
    transfer(k1, k2, tau) / (1 - e^{-k2 tau})`` (stanlite ops)."""
    n, k1, k2, dose, tau = unpack(theta)
    gut = dose / sl.expm1(k1 * tau)
    central = -(gut + dose) * transfer(k1, k2, tau) / sl.expm1(-k2 * tau)
    return sl.concatenate([gut, central])


def steady_state(theta, jac_x=True, x_guess=None, transfer=transfer):
    r"""The steady-state trough amounts ``x`` (guts, then centrals) solving
    ``x = F_tau(x + D e_gut)``, by ``sl.algebra_solver`` with the review's settings
    (Powell's dogleg, guess 500 for every amount, rel_tol 1e-10, f_tol 1e-6).

    Differentiable in ``theta`` by the implicit function theorem,
    ``dx/dtheta = -J_x^{-1} J_theta``. ``jac_x=True`` passes the analytic ``df/dx``
    (:func:`steady_state_jacobian`); ``False`` lets AD compute it. ``transfer``: the
    factor the residual uses (:func:`transfer_dd` for Hessians and third derivatives
    accurate when the rates of a patient meet; it is passed to the residual as data).

    >>> x = steady_state(population_theta(1, random=False))
    >>> np.round(x, 6)                                 # gut, central
    array([1541.494083, 4958.602473])
    >>> round(1000 * math.exp(-0.5) / (1 - math.exp(-0.5)), 6)
    1541.494083
    """
    n = (len(theta) - 2) // 2
    x0 = np.full(2 * n, X_GUESS) if x_guess is None else x_guess
    extra = () if transfer is globals()["transfer"] else (transfer,)
    return sl.algebra_solver(steady_state_residual, x0, theta, *extra,
                             jac_x=steady_state_jacobian if jac_x else None, **SOLVER)


def steady_state_problem(n_patients):
    """``(residual, jac_x, x_guess, theta)`` of the review's problem for ``n`` patients
    (what ``benchmarks/algebraic_solver.py`` times)."""
    return (steady_state_residual, steady_state_jacobian,
            np.full(2 * n_patients, X_GUESS), population_theta(n_patients))


# --------------------------------------------------------------------------------------
# profiles (plain numpy, for plots and simulation)
# --------------------------------------------------------------------------------------
def evolve(gut, central, k1, k2, t):
    """``F_t(gut, central)`` in numpy, broadcasting (e.g. patients x times).

    >>> g, c = evolve(1.0, 0.0, 0.5, 0.2, 1.0)
    >>> round(float(g), 10), round(float(c), 10)
    (0.6065306597, 0.3536668223)
    """
    gut, central, k1, k2, t = (np.asarray(a, dtype=float) for a in (gut, central, k1, k2, t))
    d = k1 - k2
    tr = -k1 * np.exp(-k2 * t) * np.expm1(-d * t) / d
    return gut * np.exp(-k1 * t), central * np.exp(-k2 * t) + gut * tr


def steady_state_profile(theta, times):
    """Amounts ``(gut, central)``, each ``(n, len(times))``, at ``times`` (>= 0, in the
    same unit as tau) after a dose at steady state: doses at 0, tau, 2 tau, ...; a time
    on a dosing time is just after that dose. Plain numpy, from the closed-form trough.

    >>> g, c = steady_state_profile(population_theta(1, random=False), [0.0, 1.0, 2.0])
    >>> np.round(c, 3)                 # the same at every dose: steady state
    array([[4958.602, 4958.602, 4958.602]])
    """
    theta = np.asarray(sl.value_of(theta), dtype=float)
    n, k1, k2, dose, tau = unpack(theta)
    ts = np.asarray(times, dtype=float)
    if ts.ndim != 1 or np.any(ts < 0) or not np.all(np.isfinite(ts)):
        raise ValueError("times must be a vector of finite times >= 0")
    x = np.asarray(steady_state_exact(theta))
    since = np.mod(ts, tau)[None, :]
    return evolve((x[:n] + dose)[:, None], x[n:, None], k1[:, None], k2[:, None], since)


def simulate_data(n_patients=MAX_PATIENTS, k1=K1, k2=K2, sigma=SIGMA, volume=VOLUME,
                  dose=DOSE, tau=TAU, seed=DATA_SEED):
    """Data for :class:`PkSteadyState`: troughs of ``n`` patients at the true values,
    with log-normal noise of scale ``sigma`` (numpy generator seeded with ``seed``).
    ``data/pk_steady_state.json`` is ``simulate_data()`` (regenerate it with
    ``python -m stanlite.models.pk_steady_state``)."""
    phi1, phi2 = multipliers(n_patients)
    theta = np.concatenate([k1 * phi1, k2 * phi2, [dose, tau]])
    c = np.asarray(steady_state_exact(theta))[n_patients:] / volume
    noise = np.random.default_rng(seed).standard_normal(n_patients)
    return {"N": int(n_patients), "phi1": phi1.tolist(), "phi2": phi2.tolist(),
            "dose": float(dose), "tau": float(tau), "V": float(volume),
            "C_obs": (c * np.exp(sigma * noise)).tolist()}


# --------------------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------------------
class PkSteadyState(sl.Model):
    r"""Population rates from steady-state troughs, the steady state solved by the
    algebraic super node (the AD review's Table 8 problem as a Bayesian model).

    .. math::

        x^{ss}(\theta) &: \; x = F_\tau(x + D e_{\mathrm{gut}}), \qquad
        \theta = (k_1 \phi_{1}, k_2 \phi_{2}, D, \tau) \quad \text{(2N states)}, \\
        C^{\mathrm{obs}}_i &\sim \mathrm{LogNormal}\big(\log(x^{ss}_{2,i} / V),
            \sigma\big), \quad i = 1..N, \\
        k_1, k_2 &\sim \mathrm{LogNormal}(0, 1), \qquad \sigma \sim \mathrm{N}^+(0, 0.5),

    with ``F_tau`` the closed-form evolution of the one-compartment model with
    first-order absorption over the dosing interval (module docstring). The
    steady state is found by ``sl.algebra_solver`` (Powell, guess 500, rel_tol 1e-10,
    f_tol 1e-6, analytic ``df/dx``) at every evaluation; its derivatives come from the
    implicit function theorem. The residual's transfer factor is the divided
    difference (:func:`transfer_dd`), so that derivatives of every order stay exact
    where a patient's absorption and elimination rates meet (RHMC needs the third).

    Data: ``N`` patients, multipliers ``phi1``, ``phi2`` (known covariates), ``dose``
    (mg), ``tau`` (day), volume ``V`` (L), observed troughs ``C_obs`` (mg/L).
    Parameters (in this order): ``k1``, ``k2`` (1/day), ``sigma``. Transformed
    parameter: ``C_trough`` (the model's trough concentrations). Generated
    quantities: ``C_rep`` (replicated troughs) and ``log_lik``.

    Source: Margossian (2019), *A review of automatic differentiation and its
    efficient implementation*, appendix (the steady-state experiment); Margossian
    (2018), *Computing steady states with Stan's nonlinear algebraic solver*, StanCon.
    Default data simulated (:func:`simulate_data`: 14 patients, k1 = 0.5, k2 = 0.2,
    D = 1000, tau = 1, V = 50, sigma = 0.1, seed 20240808).
    """

    N = sl.data.int(lower=1)
    phi1 = sl.data.vector("N", lower=0)
    phi2 = sl.data.vector("N", lower=0)
    dose = sl.data.real(lower=0)
    tau = sl.data.real(lower=0)
    V = sl.data.real(lower=0)
    C_obs = sl.data.vector("N", lower=0)

    k1 = sl.param.real(lower=0)
    k2 = sl.param.real(lower=0)
    sigma = sl.param.real(lower=0)

    def transformed_data(self):
        return {"log_c_obs": np.log(self.C_obs), "x_guess": np.full(2 * self.N, X_GUESS)}

    def transformed_parameters(self, k1, k2):
        theta = sl.concatenate([k1 * self.phi1, k2 * self.phi2,
                                np.array([self.dose, self.tau])])
        x = steady_state(theta, x_guess=self.x_guess, transfer=transfer_dd)
        return {"C_trough": x[self.N:] / self.V}

    observed = ("C_obs",)
    predictive = {"C_obs": "C_rep"}

    def log_prob(self, k1, k2, sigma, C_trough):
        lp = sl.lognormal_lpdf(k1, 0.0, 1.0) + sl.lognormal_lpdf(k2, 0.0, 1.0)
        lp = lp + sl.normal_lpdf(sigma, 0.0, 0.5)
        return lp + sl.lognormal_lpdf(self.C_obs, sl.log(C_trough), sigma)

    def log_likelihood(self, sigma, C_trough):
        """Pointwise log-likelihood (ArviZ's log_likelihood group, arviz.loo); the
        prior of sample_prior_predictive is log_prob minus its sum."""
        return sl.lognormal_lpdf(self.C_obs, sl.log(C_trough), sigma, reduce=False)

    def generated_quantities(self, rng, sigma, C_trough):
        mu = np.log(C_trough)
        z = (self.log_c_obs - mu) / sigma
        return {"C_rep": np.exp(rng.normal(mu, sigma)),
                "log_lik": -0.5 * z * z - math.log(sigma) - self.log_c_obs
                - 0.5 * math.log(2 * math.pi)}


if __name__ == "__main__":           # regenerate the default data
    from stanlite.models import _write_default_data
    print(f"wrote {_write_default_data('pk_steady_state', simulate_data())}")
