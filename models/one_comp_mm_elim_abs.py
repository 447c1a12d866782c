r"""One-compartment model with first-order absorption and Michaelis-Menten elimination
(posteriordb ``one_comp_mm_elim_abs``): a nonlinear ODE solved by ``sl.ode_bdf``."""

import numpy as np

import stanlite as sl

__all__ = ["OneCompMmElimAbs", "OneCompMmElimAbsRidge", "mm_elimination_rhs"]


def mm_elimination_rhs(t, C, k_a, K_m, V_m, D, V):
    r"""``dC/dt`` of the one-compartment model with first-order absorption and
    Michaelis-Menten elimination (stanlite ops; ``C`` is a vector of length 1):

    .. math::

        \frac{dC}{dt} = \mathbb{1}[t > 0]\, \frac{D k_a}{V} e^{-k_a t}
            - \frac{V_m}{V} \frac{C}{K_m + C}.

    The absorption term is the dose ``D`` leaving the gut at rate ``k_a`` (the gut
    amount ``D e^{-k_a t}`` in closed form), as in posteriordb's program, whose
    ``if (t > 0)`` is kept (it only changes the right-hand side at ``t = 0``).

    >>> import numpy as np
    >>> mm_elimination_rhs(1.0, np.array([2.0]), 0.5, 1.0, 3.0, 30.0, 2.0).round(6)
    array([3.54898])
    """
    elim = (V_m / V) * C / (K_m + C)
    if t > 0:
        return sl.exp(-k_a * t) * (D / V) * k_a - elim
    return -elim


class _OneCompMmElimAbsData:
    """What both parameterisations share: the data, the ODE solver options, the
    gut's initial state and the outputs (observed, predictive, log_likelihood,
    generated_quantities). A plain mixin, not a Model: the declarations are
    collected from the class's MRO."""

    t0 = sl.data.real()
    D = sl.data.real(lower=0)
    V = sl.data.real(lower=0)
    N_t = sl.data.int(lower=1)
    times = sl.data.vector("N_t")
    C_hat = sl.data.vector("N_t", lower=0)

    def transformed_data(self):
        if np.any(np.diff(self.times) < 0) or not np.all(self.times > self.t0):
            raise sl.DataError("times must be non-decreasing and after t0, got "
                               f"t0 = {self.t0}, times = {self.times}")
        return {"y0": np.zeros(1)}                    # the gut starts empty

    def __init__(self, *args, rel_tol=1e-6, abs_tol=1e-6, max_num_steps=1000, **data):
        super().__init__(*args, **data)
        self.ode_control = dict(rel_tol=rel_tol, abs_tol=abs_tol,     # solver options
                                max_num_steps=max_num_steps)

    observed = ("C_hat",)
    predictive = {"C_hat": "C_ppc"}

    def log_likelihood(self, sigma, C):
        """Pointwise log-likelihood (ArviZ's log_likelihood group, arviz.loo); the
        prior of sample_prior_predictive is log_prob minus its sum."""
        return sl.lognormal_lpdf(self.C_hat, sl.log(C[:, 0]), sigma, reduce=False)

    def generated_quantities(self, rng, sigma, C):
        mu = np.log(C[:, 0])
        z = (np.log(self.C_hat) - mu) / sigma
        return {"C_ppc": np.exp(rng.normal(mu, sigma)),
                "log_lik": -0.5 * z * z - np.log(sigma * self.C_hat)
                - 0.5 * np.log(2.0 * np.pi)}


class OneCompMmElimAbs(_OneCompMmElimAbsData, sl.Model):
    r"""One-compartment pharmacokinetics with first-order absorption and saturable
    (Michaelis-Menten) elimination, concentrations with log-normal error.

    .. math::

        \frac{dC}{dt} &= \mathbb{1}[t > 0]\,\frac{D k_a}{V} e^{-k_a t}
            - \frac{V_m}{V}\,\frac{C}{K_m + C}, \qquad C(t_0) = 0, \\
        \hat C_n &\sim \mathrm{LogNormal}\big(\log C(t_n), \sigma\big), \quad n = 1..N_t,
        \\
        k_a, K_m, V_m, \sigma &\sim \mathrm{Cauchy}^+(0, 1).

    ``C(t)`` is solved by ``sl.ode_bdf`` (BDF, the stiff solver, as Stan's
    ``integrate_ode_bdf`` in the reference program; elimination is saturable, so the
    system is nonlinear and stiff when ``K_m`` is small). Its gradient comes from the
    forward sensitivities integrated with the solution (1 state, 3 parameters: a
    coupled system of 4 states). Tolerances: ``rel_tol = abs_tol = 1e-6`` by default
    (keyword arguments of the constructor, with ``max_num_steps = 1000`` between two
    output times: points near the posterior need far fewer - a cap of 200 rejected
    none of 20 random points around it - while a tiny ``K_m`` with a large ``V_m``,
    which a long warmup trajectory can propose, made BDF creep for minutes per
    gradient under Stan's 10^8; capped, such a proposal is rejected in a fraction of a
    second, as Stan rejects one that exceeds its cap). Stan's
    ``integrate_ode_bdf``, which computed posteriordb's reference, uses 1e-10; between
    the two the log density moves by less than 5e-4 over the posterior
    (``benchmarks/one_comp_gradient.py``): importance weights within 0.05% of 1, far
    below what 4000 draws resolve, at a fifth of the cost per gradient.

    Data: ``t0`` (day), dose ``D`` (mg), volume ``V`` (L), ``N_t`` measurement
    ``times`` (day, after ``t0``) and measured concentrations ``C_hat`` (mg/L).
    Parameters (in this order): ``k_a`` (1/day), ``K_m`` (mg/L), ``V_m`` (mg/L/day
    per unit volume, as in the source), ``sigma``. Transformed parameter: ``C``
    (``N_t x 1``, Stan's ``array[N_t, 1] real``). Generated quantities: ``C_ppc``
    (posterior predictive concentrations) and ``log_lik``.

    Source: posteriordb ``one_comp_mm_elim_abs-one_comp_mm_elim_abs`` (BSD-3; from
    stan-dev's ``stat_comp_benchmarks``, ``benchmarks/pkpd``); default data:
    posteriordb's (synthetic: D = 30, V = 2, 20 times over 10 days).
    """

    k_a = sl.param.real(lower=0)
    K_m = sl.param.real(lower=0)
    V_m = sl.param.real(lower=0)
    sigma = sl.param.real(lower=0)

    def transformed_parameters(self, k_a, K_m, V_m):
        C = sl.ode_bdf(mm_elimination_rhs, self.y0, self.t0, self.times, k_a, K_m, V_m,
                       self.D, self.V, **self.ode_control)
        return {"C": C}

    def log_prob(self, k_a, K_m, V_m, sigma, C):
        lp = sl.cauchy_lpdf(sl.stack([k_a, K_m, V_m, sigma]), 0.0, 1.0)
        return lp + sl.lognormal_lpdf(self.C_hat, sl.log(C[:, 0]), sigma)

class OneCompMmElimAbsRidge(_OneCompMmElimAbsData, sl.Model):
    r""":class:`OneCompMmElimAbs`'s posterior sampled along its ridge: the same model,
    with ``V_m`` replaced as a parameter by the elimination rate scale ``r``,

    .. math::

        V_m = r\,(K_m + c_{ref}), \qquad c_{ref} = \mathrm{median}(\hat C),

    so that ``V_m`` is a transformed parameter (same name, same draws to compare) and
    the prior keeps its density in ``(k_a, K_m, V_m, sigma)``: ``log(K_m + c_ref)``,
    the log-Jacobian of ``r -> V_m``, is added. On the unconstrained scale the two
    models' log densities are equal at corresponding points (``log V_m = log r +
    log(K_m + c_ref)`` has a unit Jacobian determinant in the log coordinates).

    Why: with ``C`` near ``c_ref`` the data fix the elimination rate ``V_m C / (K_m
    + C)``, not ``K_m`` and ``V_m`` apart. For ``K_m`` well above the concentrations
    only ``V_m / K_m`` is identified, for ``K_m`` well below only ``V_m``: in ``(log
    K_m, log V_m)`` the posterior is a ridge that bends from flat to the diagonal
    around ``K_m ~ c_ref`` (``K_m`` spans two decades: q05 0.09, q95 8.7). A diagonal
    metric adapted to the bulk leaves the bent part of the ridge within a step: at
    Stan's defaults NUTS diverged 6-7 times in 4 x (1000 + 1000) transitions
    (posteriordb's reference run used adapt_delta 0.99), at ``K_m`` 11-46 with
    ``V_m / (K_m + c_ref)`` at the ridge's 0.06-0.085 - not a rough log density (at
    those points the gradient matches central differences along a line to 2e-3 at
    the model's tolerance 1e-6, the second differences are smooth) and not a failed
    solve. ``r`` is the ridge's coordinate in both regimes (``r ~ V_m / c_ref`` for
    small ``K_m``, ``~ V_m / K_m`` for large), so ``(log K_m, log r)`` are close to
    independent a posteriori.

    Data and options: those of :class:`OneCompMmElimAbs`. Parameters ``k_a``, ``K_m``,
    ``r``, ``sigma``; transformed parameters ``V_m`` and ``C``.
    """

    k_a = sl.param.real(lower=0)
    K_m = sl.param.real(lower=0)
    r = sl.param.real(lower=0)
    sigma = sl.param.real(lower=0)

    def transformed_data(self):
        out = super().transformed_data()
        out["c_ref"] = float(np.median(self.C_hat))
        return out

    def transformed_parameters(self, k_a, K_m, r):
        V_m = r * (K_m + self.c_ref)
        tp = OneCompMmElimAbs.transformed_parameters(self, k_a, K_m, V_m)
        return {"V_m": V_m, "C": tp["C"]}

    def log_prob(self, k_a, K_m, V_m, sigma, C):
        # the prior of V_m through r: + log |dV_m / dr|
        return (OneCompMmElimAbs.log_prob(self, k_a, K_m, V_m, sigma, C)
                + sl.log(K_m + self.c_ref))
