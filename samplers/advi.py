r"""Automatic differentiation variational inference (ADVI), as Stan implements it.

ADVI (Kucukelbir, Tran, Ranganath, Gelman and Blei 2017, "Automatic differentiation
variational inference", JMLR 18(14)) fits a Gaussian :math:`q` on the unconstrained
space :math:`\mathbb{R}^d` - where the model's log density :math:`\log p(\zeta)`
already includes the log-Jacobian of the transforms - by stochastic gradient ascent
on the evidence lower bound

.. math::

    \mathcal{L}(q) = \mathrm{E}_q[\log p(\zeta)] + \mathrm{H}[q].

Two families (section 2.5 of the paper):

* ``meanfield``: :math:`\zeta = \mu + \exp(\omega)\odot\eta`, :math:`\eta\sim N(0, I)`,
  parameters :math:`(\mu, \omega = \log\sigma)`, entropy
  :math:`\tfrac d2(1 + \log 2\pi) + \sum_i \omega_i`;
* ``fullrank``: :math:`\zeta = \mu + L\eta` with :math:`L` lower triangular
  (:math:`\Sigma = LL^\top`), entropy :math:`\tfrac d2(1+\log 2\pi) + \sum_i\log|L_{ii}|`.

Gradients use the reparameterisation (equations 8-10 of the paper; ``grad_samples``
draws :math:`\eta_m`, :math:`g_m = \nabla\log p(\zeta_m)` by reverse-mode AD):

.. math::

    \nabla_\mu\mathcal{L} \approx \bar g,\qquad
    \nabla_\omega\mathcal{L} \approx \overline{g\odot\eta}\odot e^{\omega} + 1,\qquad
    \nabla_L\mathcal{L} \approx \mathrm{tril}\big(\overline{g\,\eta^\top}\big)
        + \mathrm{diag}(1/L_{ii}).

The step for every variational parameter (equation 11; Stan's constants
:math:`\tau = 1`, :math:`\alpha = 0.1`) is

.. math::

    \theta_{k+1} = \theta_k + \eta\,k^{-1/2}\,\frac{g_k}{\tau + \sqrt{s_k}},\qquad
    s_k = \alpha g_k^2 + (1-\alpha)s_{k-1},\quad s_1 = g_1^2

(the paper's :math:`k^{-1/2+\epsilon}` has :math:`\epsilon = 10^{-16}`; Stan and this
module use :math:`k^{-1/2}`).

Step-size adaptation (``adapt_engaged``, when ``eta`` is not given): from the same
start, run ``adapt_iter`` iterations with each of :math:`\eta = 100, 10, 1, 0.1, 0.01`
and estimate the ELBO after each; stop at the first :math:`\eta` whose ELBO is worse
than the previous one once an ELBO has beaten the initial one, and take that previous
:math:`\eta` (Stan's early stop); a diverged trial (non-finite ELBO) counts as the
worst. Convergence (``stochastic_gradient_ascent`` in Stan): every ``eval_elbo``
iterations the ELBO is estimated with ``elbo_samples`` draws, the relative change
:math:`|(\mathcal{L}_{prev} - \mathcal{L})/\mathcal{L}|` goes into a circular buffer of
``max(0.1 iter / eval_elbo, 2)`` entries, and the run stops when the buffer's mean or
median falls below ``tol_rel_obj``. After ``10 eval_elbo`` iterations a mean or median
above 0.5 means "may be diverging"; a run that ends without converging, or whose
ELBO was once 5% better than at convergence, warns (:class:`ConvergenceWarning`).

Non-finite values: a draw at which the log density or its gradient is not finite
(or raises a domain or solver error) is dropped and redrawn, as in Stan; after
``max(10, grad_samples)`` dropped draws for one gradient (Stan allows fewer than
``grad_samples``, i.e. none by default) or ``elbo_samples`` for one ELBO the run stops
with a :class:`~stanlite.errors.ModelError` saying where. During the step-size
adaptation a failed gradient is a zero step and a failed ELBO a rejected
:math:`\eta`, as in Stan.

The result is an :class:`~stanlite.approx_fit.ApproximateFit` with ``output_samples``
draws from :math:`q` and, per draw, ``log_p`` (the model's log density, Jacobian
included) and ``log_q`` (the normalised Gaussian log density; Stan's ``log_g__``
omits the constant); ``fit.extras`` holds the ELBO history, the mean (unconstrained
and constrained), the scale (``meanfield``) or the covariance and its Cholesky
factor (``fullrank``), ``eta`` and the adaptation trials, and the final step sizes.
"""

import collections
import math
import time
import warnings

import numpy as np

from stanlite import arguments as args
from stanlite.errors import ArgumentError, ModelError

from .hamiltonian import RejectedPoint
from .inits import check_init, initial_point, seed_streams
from .progress import Bar, wanted

__all__ = ["variational", "ConvergenceWarning", "ETA_SEQUENCE"]

#: step-size scales tried by the adaptation, in Stan's order
ETA_SEQUENCE = (100.0, 10.0, 1.0, 0.1, 0.01)
_TAU = 1.0            # offset of the step-size denominator (Stan's tau)
_ALPHA = 0.1          # weight of the newest squared gradient (Stan's post_factor)
_LOG_2PI = math.log(2.0 * math.pi)


class ConvergenceWarning(UserWarning):
    """ADVI stopped without meeting its convergence criterion, or may be diverging."""


class _Failure(Exception):
    """Too many non-finite evaluations in one gradient or ELBO estimate."""

    def __init__(self, what, count, last):
        super().__init__(what)
        self.what, self.count, self.last = what, count, last


# ---- the two Gaussian families, packed in one flat vector ---------------------------------
class _Family:
    """A Gaussian on R^d, its parameters packed in a flat vector ``theta``.

    ``meanfield``: ``theta = [mu, omega]`` (2d); ``fullrank``: ``theta = [mu,
    vec(L)]`` (d + d^2, row-major L whose upper triangle stays exactly zero: its
    gradient is zero there, so the step is 0 / (tau + 0)). The elementwise step of
    Stan then is one numpy expression on ``theta``; ``mu`` and the scale are views.
    """

    def __init__(self, dim, fullrank):
        self.d = dim
        self.fullrank = fullrank
        self.size = dim + (dim * dim if fullrank else dim)
        if fullrank:
            self.lower = np.tril(np.ones((dim, dim)))
            self.diag = np.arange(dim) * (dim + 1)

    def initial(self, x0):
        """Stan's start: mean at the initial point, unit scale (omega = 0, L = I)."""
        theta = np.zeros(self.size)
        theta[:self.d] = x0
        if self.fullrank:
            theta[self.d:][self.diag] = 1.0
        return theta

    def scale(self, theta):
        """sigma (d,) for meanfield, L (d, d) for fullrank."""
        rest = theta[self.d:]
        return rest.reshape(self.d, self.d) if self.fullrank else np.exp(rest)

    def transform(self, theta, z):
        """zeta = mu + sigma * z or mu + L z, for z of shape (d,) or (n, d)."""
        s = self.scale(theta)
        return theta[:self.d] + (z @ s.T if self.fullrank else z * s)

    def log_abs_det(self, theta):
        if self.fullrank:
            return float(np.sum(np.log(np.abs(np.diagonal(self.scale(theta))))))
        return float(np.sum(theta[self.d:]))

    def entropy(self, theta):
        return 0.5 * self.d * (1.0 + _LOG_2PI) + self.log_abs_det(theta)

    def log_q(self, theta, z):
        """Normalised log density of q at the draws mu + scale z, z (n, d)."""
        return -0.5 * np.sum(z * z, axis=-1) - self.log_abs_det(theta) \
            - 0.5 * self.d * _LOG_2PI

    def elbo_grad(self, theta, z, g):
        """Reparameterisation gradient of the ELBO from draws z (m, d) and the model's
        gradients g (m, d) at mu + scale z, entropy term included."""
        d = self.d
        out = np.empty(self.size)
        m = g.shape[0]
        if m == 1:
            out[:d] = g[0]
        else:
            np.divide(g.sum(0), m, out=out[:d])
        rest = out[d:]
        if self.fullrank:
            gl = rest.reshape(d, d)
            np.matmul(g.T, z, out=gl)               # sum_m g_m z_m^T
            if m > 1:
                gl /= m
            gl *= self.lower
            rest[self.diag] += 1.0 / theta[d:][self.diag]
        else:
            if m == 1:
                np.multiply(g[0], z[0], out=rest)
            else:
                np.divide((g * z).sum(0), m, out=rest)
            rest *= np.exp(theta[d:])
            rest += 1.0
        return out

    def describe(self, theta):
        """What the fit reports: mean and scale (meanfield) or covariance (fullrank)."""
        d = self.d
        out = {"mean": theta[:d].copy()}
        if self.fullrank:
            L = self.scale(theta).copy()
            out["cholesky"] = L
            out["cov"] = L @ L.T
        else:
            out["omega"] = theta[d:].copy()
            out["scale"] = np.exp(theta[d:])
        return out

    def unpack(self, v):
        """A flat per-variational-parameter vector as a dict (mu, omega or L)."""
        d = self.d
        rest = v[d:].reshape(d, d).copy() if self.fullrank else v[d:].copy()
        return {"mu": v[:d].copy(), ("L" if self.fullrank else "omega"): rest}


# ---- Monte Carlo estimates ------------------------------------------------------------------
class _Estimator:
    """The ELBO and its gradient by Monte Carlo, with Stan's dropping of draws at
    which the model is not finite."""

    def __init__(self, model, family, rng, grad_samples, elbo_samples):
        self.model = model
        self.family = family
        self.rng = rng
        self.grad_samples = grad_samples
        self.elbo_samples = elbo_samples
        self.max_grad_drops = max(10, grad_samples)
        self.n_grad = 0            # gradient evaluations
        self.last_failure = None   # why the last failed evaluation failed
        self.n_density = 0         # log-density evaluations (ELBO and output draws)

    def log_density(self, x):
        """log p(x), or (nan, the reason) when it fails."""
        self.n_density += 1
        try:
            lp = self.model.log_density(x)
        except RejectedPoint as e:
            return math.nan, e
        return lp, None

    def gradient(self, theta):
        """The ELBO's gradient at ``theta`` (raises _Failure after too many drops)."""
        fam, rng, m = self.family, self.rng, self.grad_samples
        d = fam.d
        if m == 1:                                  # the default: no (1, d) arrays
            z = rng.standard_normal(d)
            g = self._model_gradient(fam.transform(theta, z), 0)
            drops = 0
            while g is None:
                drops += 1
                if drops >= self.max_grad_drops:
                    raise _Failure("gradient", drops, self.last_failure)
                z = rng.standard_normal(d)          # drop the draw, redraw it
                g = self._model_gradient(fam.transform(theta, z), drops)
            return fam.elbo_grad(theta, z[None, :], g[None, :])
        z = rng.standard_normal((m, d))
        zeta = fam.transform(theta, z)
        g = np.empty((m, d))
        drops = 0
        i = 0
        while i < m:
            gi = self._model_gradient(zeta[i], drops)
            if gi is not None:
                g[i] = gi
                i += 1
                continue
            drops += 1
            if drops >= self.max_grad_drops:
                raise _Failure("gradient", drops, self.last_failure)
            z[i] = rng.standard_normal(d)
            zeta[i] = fam.transform(theta, z[i])
        return fam.elbo_grad(theta, z, g)

    def _model_gradient(self, x, drops):
        """The model's gradient at ``x``, or None (the reason in ``last_failure``)."""
        self.n_grad += 1
        try:
            lp, g = self.model.log_density_gradient(x)
        except RejectedPoint as e:
            self.last_failure = f"{type(e).__name__}: {e}"
            return None
        # a finite sum means every element is finite (checked elementwise only if
        # the sum is not: it may overflow)
        if math.isfinite(lp) and (math.isfinite(g.sum()) or np.isfinite(g).all()):
            return g
        self.last_failure = "the log density or its gradient is not finite"
        return None

    def elbo(self, theta):
        """The ELBO at ``theta``: mean log density over ``elbo_samples`` finite draws
        plus the entropy (raises _Failure after ``elbo_samples`` dropped draws)."""
        fam, n = self.family, self.elbo_samples
        total, got, drops, last = 0.0, 0, 0, None
        while got < n:
            z = self.rng.standard_normal((n - got, fam.d))
            for x in fam.transform(theta, z):
                lp, err = self.log_density(x)
                if math.isfinite(lp):
                    total += lp
                    got += 1
                else:
                    drops += 1
                    last = f"{type(err).__name__}: {err}" if err is not None else \
                        "the log density is not finite"
                    if drops >= n:
                        raise _Failure("ELBO", drops, last)
        return total / n + fam.entropy(theta)


# ---- the algorithm ------------------------------------------------------------------------
def _sga(est, theta, eta, iterations, on_check=None, check_every=0, robust=False):
    """Stan's stochastic gradient ascent steps from ``theta`` (updated in place).

    ``robust`` (the adaptation): a failed gradient is a zero step. ``on_check(k)`` is
    called every ``check_every`` iterations and returns True to stop. Returns the
    number of iterations done and the final ``s`` (running mean of squared
    gradients)."""
    s = None
    k = 0
    tmp = np.empty_like(theta)
    sqrt, multiply, divide = np.sqrt, np.multiply, np.divide
    for k in range(1, iterations + 1):
        try:
            g = est.gradient(theta)
        except _Failure as f:
            if not robust:
                f.iteration = k
                raise
            g = np.zeros_like(theta)
        # s_k = alpha g^2 + (1 - alpha) s_(k-1), s_1 = g_1^2 (in place: no temporaries)
        if s is None:
            s = g * g
        else:
            multiply(g, g, out=tmp)
            tmp *= _ALPHA
            s *= 1.0 - _ALPHA
            s += tmp
        # theta += eta k^(-1/2) g / (tau + sqrt(s_k))
        sqrt(s, out=tmp)
        tmp += _TAU
        divide(g, tmp, out=tmp)
        tmp *= eta / math.sqrt(k)
        theta += tmp
        if check_every and k % check_every == 0 and on_check(k):
            break
    return k, s


def _adapt_eta(est, theta0, adapt_iter, bar):
    """Stan's step-size adaptation: returns ``(eta, trials)`` with the ELBO after
    ``adapt_iter`` iterations for each eta tried."""
    try:
        elbo_init = est.elbo(theta0)
    except _Failure as f:
        raise ModelError(
            "ADVI: cannot compute the ELBO at the initial approximation (mean at the "
            f"initial point, unit scale): the log density failed at {f.count} draws "
            f"({f.last}). The model may be severely ill-conditioned or misspecified; "
            "try another init") from None
    worst = -np.finfo(float).max
    elbo_best, eta_best = worst, None
    trials = []
    for i, eta in enumerate(ETA_SEQUENCE):
        theta = theta0.copy()
        with np.errstate(all="ignore"):
            _sga(est, theta, eta, adapt_iter, robust=True)
            try:
                elbo = est.elbo(theta) if np.isfinite(theta).all() else worst
            except _Failure:
                elbo = worst
        if not math.isfinite(elbo):
            elbo = worst
        trials.append((eta, elbo if elbo > worst else -math.inf))
        bar.update((i + 1) * adapt_iter, eta=eta, elbo=f"{elbo:.4g}")
        if elbo < elbo_best and elbo_best > elbo_init:
            return eta_best, trials, elbo_init           # the previous eta was better
        if i < len(ETA_SEQUENCE) - 1:
            elbo_best, eta_best = elbo, eta
        elif elbo > elbo_init:
            return eta, trials, elbo_init
    tried = ", ".join(f"eta={e:g}: {v:.6g}" for e, v in trials)
    raise ModelError(
        f"ADVI: every step size tried by the adaptation failed to improve the ELBO over "
        f"its initial value {elbo_init:.6g} (ELBO after {adapt_iter} iterations: "
        f"{tried}). The model may be severely ill-conditioned or misspecified; try "
        "another init, a smaller eta with adapt_engaged=False, or more adapt_iter")


def variational(model, method="meanfield", seed=None, iter=10000, grad_samples=1,
                elbo_samples=100, eval_elbo=100, eta=None, adapt_engaged=True,
                adapt_iter=50, tol_rel_obj=0.01, output_samples=1000, init=None,
                progress=True, max_iter=None):
    r"""Fit a Gaussian approximation of the posterior by Stan's ADVI.

    See the module docstring for the algorithm. Arguments have CmdStan's names and
    defaults:

    method : ``"meanfield"`` (diagonal Gaussian) or ``"fullrank"`` (dense).
    seed : int or ``SeedSequence``: the same seed gives the same result.
    iter : maximum number of iterations (``max_iter`` is a synonym).
    grad_samples, elbo_samples : Monte Carlo draws per gradient / ELBO estimate.
    eval_elbo : estimate the ELBO (and check convergence) every ``eval_elbo``
        iterations.
    eta : step-size scale; ``None`` adapts it (``adapt_engaged=True``, trying
        100, 10, 1, 0.1, 0.01 for ``adapt_iter`` iterations each) or uses 1.0. A
        given ``eta`` is used as is.
    tol_rel_obj : relative ELBO change (mean or median of the recent ones) below
        which the run has converged.
    output_samples : draws from the approximation in the returned fit.
    init : ``None`` (uniform(-2, 2) on the unconstrained space), a radius, a dict of
        parameter values (partial: the others drawn so) or an unconstrained vector:
        the initial mean (see :mod:`stanlite.samplers.inits`).
    progress : a tqdm bar when on a terminal or in a notebook.

    Returns an :class:`~stanlite.approx_fit.ApproximateFit` (method ``"meanfield"``
    or ``"fullrank"``); ``fit.extras`` holds ``elbo`` (the estimates), ``elbo_iter``
    (their iterations), ``delta_elbo_mean``/``delta_elbo_median``, ``mean``,
    ``mean_constrained``, ``scale``/``omega`` or ``cov``/``cholesky``, ``eta``,
    ``eta_trials``, ``iterations``, ``converged``, ``final_step`` and
    ``final_grad_sq`` (per variational parameter), ``n_gradients``, ``n_densities``
    and ``elapsed`` (seconds per phase). Warns with :class:`ConvergenceWarning` when
    the run did not converge or may be diverging.

    >>> import numpy as np
    >>> import stanlite as sl
    >>> class Normal(sl.Model):
    ...     y = sl.data.vector(3)
    ...     mu = sl.param.real()
    ...     def log_prob(self, mu):
    ...         return sl.normal_lpdf(self.y, mu, 1.0) + sl.normal_lpdf(mu, 0, 10)
    >>> fit = Normal(y=[0.8, 1.4, 1.1]).variational(seed=1, progress=False)
    >>> fit.extras["converged"], round(float(fit["mu"].mean()), 1)   # exact: 1.1
    (True, 1.1)
    >>> round(float(fit.extras["scale"][0]), 1)                      # exact: 0.58
    0.6
    """
    from stanlite.approx_fit import ApproximateFit
    o = _options(model, method, seed, iter, max_iter, grad_samples, elbo_samples,
                 eval_elbo, eta, adapt_engaged, adapt_iter, tol_rel_obj, output_samples,
                 init, progress)
    alg_ss, gq_ss = seed_streams(o.seed, 2)
    rng = np.random.default_rng(alg_ss)
    x0, _, _ = initial_point(model, init, rng, what="ADVI")
    fam = _Family(o.dim, o.method == "fullrank")
    theta0 = fam.initial(x0)
    est = _Estimator(model, fam, rng, o.grad_samples, o.elbo_samples)
    show = wanted(o.progress)
    t_start = time.perf_counter()
    eta, trials, elbo_init = _step_size(est, theta0, o, show)
    t_adapt = time.perf_counter()
    run = _Ascent(est, theta0.copy(), eta, o, show)
    run.run()
    t_sga = time.perf_counter()
    draws, log_p, log_q = _output_draws(est, fam, run.theta, rng, o.output_samples)
    t_draws = time.perf_counter()

    notes, warn = _summary(run, o, trials, log_p, log_q)
    for w in warn:
        warnings.warn(w, ConvergenceWarning, stacklevel=2)
    extras = _extras(model, fam, run, elbo_init, trials, est,
                     {"adaptation": t_adapt - t_start, "optimization": t_sga - t_adapt,
                      "draws": t_draws - t_sga})
    return ApproximateFit(model, draws, o.method, log_p=log_p, log_q=log_q, extras=extras,
                          seed=gq_ss, notes=notes)


class _Options:
    """The arguments of :func:`variational`, checked once (``dim``: the model's)."""

    __slots__ = ("method", "seed", "max_iter", "grad_samples", "elbo_samples",
                 "eval_elbo", "eta", "adapt_engaged", "adapt_iter", "tol_rel_obj",
                 "output_samples", "progress", "dim")

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)


def _options(model, method, seed, iter, max_iter, grad_samples, elbo_samples, eval_elbo,
             eta, adapt_engaged, adapt_iter, tol_rel_obj, output_samples, init, progress):
    """Check :func:`variational`'s arguments (errors name the argument) and the model."""
    method = args.choice("method", method, ("meanfield", "fullrank"))
    seed = args.seed("seed", seed, generator=True)
    if max_iter is not None:
        max_iter = args.positive_int("max_iter", max_iter)
        if iter != 10000 and iter != max_iter:
            raise ArgumentError(f"iter={iter!r} and max_iter={max_iter!r} disagree (they "
                                "are the same setting: give one)")
        iter = max_iter
    max_iter = args.positive_int("iter", iter)
    # the Monte Carlo and iteration counts: each an integer >= 1 (checked in this order)
    counts = dict(grad_samples=grad_samples, elbo_samples=elbo_samples,
                  eval_elbo=eval_elbo, adapt_iter=adapt_iter, output_samples=output_samples)
    counts = {k: args.positive_int(k, v) for k, v in counts.items()}
    args.fits_in_memory("output_samples", counts["output_samples"], getattr(model, "dim", 1))
    tol_rel_obj = args.positive_real("tol_rel_obj", tol_rel_obj)
    if eta is not None:
        eta = args.positive_real("eta", eta)
    adapt_engaged = args.boolean("adapt_engaged", adapt_engaged)
    progress = args.boolean("progress", progress)
    check_init(model, init)
    dim = getattr(model, "dim", None)
    if not isinstance(dim, (int, np.integer)) or dim < 1:
        raise ModelError(f"ADVI needs a model with at least one parameter (dim >= 1), "
                         f"got dim={dim!r}")
    return _Options(method=method, seed=seed, max_iter=max_iter, eta=eta,
                    adapt_engaged=adapt_engaged, tol_rel_obj=tol_rel_obj, progress=progress,
                    dim=int(dim), **counts)


def _step_size(est, theta0, o, show):
    """``(eta, trials, elbo_init)``: the given eta, or Stan's adaptation's choice (with
    its trials and the initial ELBO), or 1.0 when adaptation is off."""
    if o.eta is None and o.adapt_engaged:
        bar = Bar(show, o.adapt_iter * len(ETA_SEQUENCE), f"ADVI {o.method}: adapt eta")
        try:
            return _adapt_eta(est, theta0, o.adapt_iter, bar)
        finally:
            bar.close()
    return (1.0 if o.eta is None else o.eta), [], None


class _Ascent:
    """The stochastic gradient ascent of :func:`variational` with Stan's convergence
    checks: every ``eval_elbo`` iterations the ELBO goes into ``hist`` and its relative
    change into a circular buffer of ``max(0.1 iter / eval_elbo, 2)`` entries, whose
    mean or median below ``tol_rel_obj`` stops the run. ``theta`` is updated in place."""

    def __init__(self, est, theta, eta, o, show):
        self.est, self.theta, self.eta, self.o = est, theta, eta, o
        self.cb = collections.deque(maxlen=max(int(0.1 * o.max_iter / o.eval_elbo), 2))
        self.hist = {"iter": [], "elbo": [], "mean": [], "median": []}
        self.elbo, self.best, self.best_iter = 0.0, -math.inf, 0
        self.converged, self.diverging, self.interrupted = None, False, False
        self.iterations, self.s = 0, np.zeros_like(theta)
        self.bar = Bar(show, o.max_iter, f"ADVI {o.method}")

    def run(self):
        o = self.o
        try:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                self.iterations, self.s = _sga(self.est, self.theta, self.eta, o.max_iter,
                                               on_check=self.check,
                                               check_every=o.eval_elbo)
        except _Failure as f:
            raise ModelError(
                f"ADVI ({o.method}): the log density or its gradient failed at {f.count} "
                f"draws from the approximation in one gradient estimate at iteration "
                f"{f.iteration} "
                f"({f.last}). The approximation may have diverged (eta = {self.eta:g}; "
                "try a smaller eta) or the model is severely ill-conditioned or "
                "misspecified") from None
        except KeyboardInterrupt:
            self.interrupted = True
            self.iterations = max(self.hist["iter"], default=0)
        finally:
            self.bar.close()

    def check(self, k):
        """The ELBO at iteration ``k`` and the convergence test; True to stop."""
        o, prev = self.o, self.elbo
        try:
            elbo = self.est.elbo(self.theta)
        except _Failure as f:
            raise ModelError(
                f"ADVI ({o.method}): the log density failed at {f.count} draws from the "
                f"approximation while estimating the ELBO at iteration {k} ({f.last}). "
                f"The approximation may have diverged (eta = {self.eta:g}; try a smaller "
                "eta) or the model is severely ill-conditioned or misspecified") from None
        self.elbo = elbo
        if elbo > self.best:
            self.best, self.best_iter = elbo, k
        rel = abs((prev - elbo) / elbo) if elbo != 0 else math.inf
        cb = self.cb
        cb.append(rel)
        mean = sum(cb) / len(cb)
        median = sorted(cb)[len(cb) // 2]         # Stan's (upper) median
        for key, v in (("iter", k), ("elbo", elbo), ("mean", mean), ("median", median)):
            self.hist[key].append(v)
        if mean < o.tol_rel_obj:
            self.converged = "mean"
        elif median < o.tol_rel_obj:
            self.converged = "median"
        self.diverging = k > 10 * o.eval_elbo and (mean > 0.5 or median > 0.5)
        self.bar.update(k, elbo=f"{elbo:.6g}", delta_mean=f"{mean:.3g}",
                        delta_med=f"{median:.3g}")
        return self.converged is not None


def _output_draws(est, fam, theta, rng, output_samples):
    """``output_samples`` draws from the approximation, with log p and log q of each."""
    z = rng.standard_normal((output_samples, fam.d))
    with np.errstate(all="ignore"):
        draws = fam.transform(theta, z)
        log_q = fam.log_q(theta, z)
    with np.errstate(all="ignore"):
        log_p = np.array([est.log_density(x)[0] for x in draws]) if output_samples \
            else np.empty(0)
    return draws, log_p, log_q


def _summary(run, o, trials, log_p, log_q):
    """What the run learned, in words: ``(notes, warnings)`` (the warnings are notes
    too, last)."""
    method, iterations, hist = o.method, run.iterations, run.hist
    notes, warn = [], []
    if run.interrupted:
        warn.append(f"ADVI ({method}) was interrupted after {iterations} iterations: "
                    "the approximation is where it stopped")
    elif run.converged:
        converged = run.converged
        notes.append(f"ADVI ({method}) converged after {iterations} iterations: the "
                     f"{converged} relative ELBO change "
                     f"({hist[converged][-1]:.3g}) is below tol_rel_obj = "
                     f"{o.tol_rel_obj:g}.")
        if run.elbo != 0 and abs((run.best - run.elbo) / run.elbo) > 0.05:
            warn.append(
                f"ADVI ({method}): the ELBO at iteration {run.best_iter} "
                f"({run.best:.6g}) is larger than at convergence "
                f"({run.elbo:.6g}): the approximation may not be a good optimum; "
                "try a smaller tol_rel_obj or another seed")
    else:
        warn.append(_not_converged(run, o))
    how = "chosen by adaptation" if trials else "given"
    notes.append(f"Step-size scale eta = {run.eta:g} ({how}).")
    fin = log_p - log_q
    fin = fin[np.isfinite(fin)]
    if fin.size > 1:
        notes.append(f"ELBO at the {o.output_samples} output draws: {fin.mean():.6g} "
                     f"(Monte Carlo se {fin.std(ddof=1) / math.sqrt(fin.size):.2g}).")
    notes.extend(warn)
    return notes, warn


def _not_converged(run, o):
    """The warning of a run that ended without converging."""
    hist = run.hist
    what = (f"the last relative ELBO changes (mean {hist['mean'][-1]:.3g}, median "
            f"{hist['median'][-1]:.3g}) are above tol_rel_obj = {o.tol_rel_obj:g}"
            if hist["iter"] else f"the ELBO was never evaluated (eval_elbo = "
            f"{o.eval_elbo} > iter)")
    msg = f"ADVI ({o.method}) did not converge in {o.max_iter} iterations: {what}"
    if run.diverging:
        msg += ("; it may be diverging (relative changes above 0.5): inspect "
                "fit.extras['elbo'], try a smaller eta or reparameterise")
    else:
        msg += "; the approximation may not be meaningful: increase iter"
    return msg


def _extras(model, fam, run, elbo_init, trials, est, elapsed):
    """``fit.extras`` of :func:`variational` (listed in its docstring)."""
    hist, eta, iterations, s = run.hist, run.eta, run.iterations, run.s
    step = (eta / math.sqrt(max(iterations, 1))) / (_TAU + np.sqrt(s))
    extras = fam.describe(run.theta)
    try:
        extras["mean_constrained"] = model.constrain(extras["mean"])
    except (RejectedPoint, AttributeError):
        extras["mean_constrained"] = None
    extras.update(
        elbo=np.array(hist["elbo"]), elbo_iter=np.array(hist["iter"], dtype=int),
        delta_elbo_mean=np.array(hist["mean"]), delta_elbo_median=np.array(hist["median"]),
        elbo_init=elbo_init, eta=eta, eta_trials=trials, iterations=iterations,
        converged=bool(run.converged), interrupted=run.interrupted,
        final_step=fam.unpack(step), final_grad_sq=fam.unpack(s),
        n_gradients=est.n_grad, n_densities=est.n_density, elapsed=elapsed)
    return extras
