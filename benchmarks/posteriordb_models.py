"""stanlite models for the posteriordb posteriors that are not zoo models, and the map
from every posterior in ../shared/posteriordb to the model that expresses it.

Written from the math of each posterior's ``model.stan`` (posteriordb, BSD-3); used by
``benchmarks/posteriordb.py``. Zoo models are reused where they are the same
posterior (same data fields, same priors, the reference's quantities reported under
the same names).

  mesquite-logmesquite   log-log linear regression of shrub weight on six predictors,
                         flat priors on the coefficients and on sigma > 0
  sblrc-blr              Bayesian linear regression, beta ~ N(0, 10), sigma ~ N+(0, 10)

``one_comp_mm_elim_abs`` (a one-compartment model with Michaelis-Menten elimination,
a nonlinear ODE solved by ``sl.ode_bdf``) is the zoo model of that name.
"""

import numpy as np

try:
    import stanlite as sl
except ImportError:                 # run from a checkout without installing
    import pathlib
    import sys
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    import stanlite as sl

__all__ = ["LogMesquite", "Blr", "POSTERIORS", "SKIPPED", "build"]


class LogMesquite(sl.Model):
    r"""Log-log regression of mesquite bush weight (Gelman & Hill 2007, ch. 4).

    .. math::
        \log w_n \sim \mathrm{N}\big(\beta_1 + \beta_2 \log d^{(1)}_n
            + \beta_3 \log d^{(2)}_n + \beta_4 \log h^{c}_n + \beta_5 \log h^{t}_n
            + \beta_6 \log \rho_n + \beta_7 g_n,\ \sigma\big),

    with improper flat priors on ``beta`` (7) and ``sigma > 0``. The six predictors
    form a design matrix built once (Stan's transformed data); the likelihood is one
    fused ``normal_id_glm`` node with intercept ``beta[1]``.
    """

    N = sl.data.int(lower=0)
    weight = sl.data.vector("N", lower=0)
    diam1 = sl.data.vector("N", lower=0)
    diam2 = sl.data.vector("N", lower=0)
    canopy_height = sl.data.vector("N", lower=0)
    total_height = sl.data.vector("N", lower=0)
    density = sl.data.vector("N", lower=0)
    group = sl.data.vector("N")

    beta = sl.param.vector(7)
    sigma = sl.param.real(lower=0)

    def __init__(self, **data):
        super().__init__(**data)
        self._log_weight = np.log(self.weight)
        self._design = np.column_stack([
            np.log(self.diam1), np.log(self.diam2), np.log(self.canopy_height),
            np.log(self.total_height), np.log(self.density), self.group])

    def log_prob(self, beta, sigma):
        return sl.normal_id_glm_lpdf(self._log_weight, self._design, beta[0], beta[1:],
                                     sigma)


class Blr(sl.Model):
    r"""Bayesian linear regression without intercept (posteriordb ``sblrc-blr``).

    .. math::
        \beta_d \sim \mathrm{N}(0, 10), \qquad \sigma \sim \mathrm{N}^+(0, 10), \qquad
        y_n \sim \mathrm{N}(x_n^\top \beta, \sigma), \quad n = 1..N.
    """

    N = sl.data.int(lower=0)
    D = sl.data.int(lower=0)
    X = sl.data.matrix("N", "D")
    y = sl.data.vector("N")

    beta = sl.param.vector("D")
    sigma = sl.param.real(lower=0)

    def log_prob(self, beta, sigma):
        lp = sl.normal_lpdf(beta, 0, 10) + sl.normal_lpdf(sigma, 0, 10)
        return lp + sl.normal_id_glm_lpdf(self.y, self.X, 0.0, beta, sigma)


from stanlite.models.one_comp_mm_elim_abs import OneCompMmElimAbsRidge  # noqa: E402

#: posterior folder -> ("zoo", zoo name) or ("local", class defined here or imported)
POSTERIORS = {
    "arK-arK": ("zoo", "ark"),
    "eight_schools-eight_schools_centered": ("zoo", "eight_schools_centered"),
    "eight_schools-eight_schools_noncentered": ("zoo", "eight_schools_noncentered"),
    "gp_pois_regr-gp_pois_regr": ("zoo", "gp_pois_regr"),
    "kidiq-kidscore_momiq": ("zoo", "linear_regression"),
    "low_dim_gauss_mix-low_dim_gauss_mix": ("zoo", "normal_mixture"),
    "mesquite-logmesquite": ("local", LogMesquite),
    # (the zoo model sampled along its K_m-V_m ridge: no divergences at Stan's defaults)
    "one_comp_mm_elim_abs-one_comp_mm_elim_abs": ("local", OneCompMmElimAbsRidge),
    "sblrc-blr": ("local", Blr),
}

#: posteriors the library cannot express yet, with the reason
SKIPPED = {}


def build(posterior, data):
    """The stanlite model of ``posterior`` built from ``data`` (a path, JSON text or a
    dict; fields the model does not declare are ignored)."""
    kind, what = POSTERIORS[posterior]
    if kind == "zoo":
        import stanlite.models as zoo
        cls = zoo.model_class(what)
    else:
        cls = what
    return cls.from_json(data)
