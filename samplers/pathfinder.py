"""Pathfinder: normal approximations along an L-BFGS path (Zhang, Carpenter, Gelman &
Vehtari 2022, "Pathfinder: parallel quasi-Newton variational inference", JMLR 23(306)),
single- and multi-path, as Stan runs it.

**Single path.** L-BFGS maximises ``log p`` on the unconstrained space from a random
point (uniform(-2, 2), as for NUTS), recording the iterates ``x_0 .. x_L`` and their
gradients ``grad log p``. With ``f = -log p``, each step gives a correction pair
``s_l = x_l - x_{l-1}``, ``y_l = grad f(x_l) - grad f(x_{l-1})``, kept only if it
satisfies the curvature condition ``s'y > eps ||y||^2`` (eps = 2.2e-16). At every
iterate ``l`` the paper builds the local normal approximation of the second-order
Taylor expansion of ``log p`` with the L-BFGS inverse-Hessian estimate as covariance:

* the *initial* inverse Hessian is diagonal, ``diag(alpha)``, updated with every
  accepted pair by the diagonal of the BFGS update of the scaled Hessian
  (Gilbert & Lemarechal 1989; the paper's Form-Init-Diag)::

      a = y' diag(alpha) y,  b = y's,  c = s' diag(1/alpha) s
      1 / alpha_new = a / (b alpha) + y*y / b - a s*s / (b c alpha*alpha)

  (elementwise; ``alpha = 1`` at the start);
* with the last ``J = history_size`` pairs as columns of ``S``, ``Y`` (d x m), the
  inverse Hessian in the compact form of Byrd, Nocedal & Schnabel (1994)::

      Sigma = diag(alpha) + B G B',     B = [diag(alpha) Y, S]   (d x 2m)
      G = [[0, -R^-1], [-R^-T, R^-T (E + Y' diag(alpha) Y) R^-1]]

  with ``R`` the upper triangle of ``S'Y`` and ``E`` its diagonal: the cost is
  O(d m^2), never a d x d inversion;
* the mean is the quasi-Newton step ``mu = x_l + Sigma grad log p(x_l)``;
* to draw from and evaluate ``N(mu, Sigma)`` in O(d m) per draw when ``2m < d``, the
  thin QR ``diag(alpha)^-1/2 B = Q R_B`` and the Cholesky factor ``L`` of the
  (2m x 2m) matrix ``I + R_B G R_B'`` give ``Sigma = A A'`` with
  ``A = diag(alpha)^1/2 (I + Q (L - I) Q')``: a draw is ``mu + A u``, ``u ~ N(0, I)``,
  ``log det Sigma = sum log alpha + 2 log det L``, and ``A^-1 = (I + Q (L^-1 - I)
  Q') diag(alpha)^-1/2`` (so ``log q`` at any point is O(d m) too); when
  ``2m >= d`` the dense ``Sigma`` and its Cholesky factor are used.

Each approximation's ELBO, ``E_q[log p - log q]``, is estimated with
``num_elbo_draws`` draws; the path returns ``num_single_draws`` draws from the one with
the largest ELBO (the smallest KL divergence to the posterior), with ``log p`` and
``log q`` for each.

**Multi-path** (the default, ``num_paths=4``) runs independent paths and pools their
draws with importance ratios ``log p - log q`` (each draw's ``q`` that of its own
path), smooths them by Pareto-smoothed importance sampling (arviz's ``psislw``,
Vehtari et al. 2024) and resamples ``num_draws`` of them with replacement in
proportion to the smoothed weights: draws from paths stuck in minor modes or on
plateaus get little weight, and the mixture of several Gaussians can fit a
non-Gaussian posterior better than one. The Pareto k-hat of the pooled ratios says
how far that can be trusted.

Beyond Stan's outputs, the result keeps per-path diagnostics (``fit.paths``: the ELBO
at every iterate, the chosen iterate, the optimizer's message, evaluations, each
path's own k-hat, the chosen approximation), records the path of every draw
(``fit["path"]``), and gives NUTS a start: ``fit.inits(chains)`` returns distinct
draws as init dicts and ``fit.inv_metric_estimate()`` the approximation's variances
(or covariance) on the unconstrained space, both in the form ``model.sample(init=...,
inv_metric=...)`` takes.

>>> import stanlite.models as zoo
>>> m = zoo.get("linear_regression")            # kidiq: beta (2), sigma > 0
>>> pf = m.pathfinder(seed=1, num_draws=400, progress=False)
>>> pf["beta"].shape, len(pf.paths), pf.pareto_k < 0.7
((1, 400, 2), 4, True)
>>> inits = pf.inits(chains=2)
>>> sorted(inits[0]), inits[0]["sigma"] > 0
(['beta', 'sigma'], True)
"""

import math
import time
import warnings

import numpy as np

from stanlite import arguments as args
from stanlite.approx_fit import ApproximateFit, pareto_k_sentence, pareto_k_threshold
from stanlite.errors import ArgumentError, ModelError

from .inits import initial_point, per_run, seed_streams
from .optimize import Criteria, Objective, _log_density, run_quasi_newton
from .progress import Bar, wanted

__all__ = ["pathfinder", "PathfinderFit", "PathInfo", "LbfgsNormal", "lbfgs_normal",
           "update_diagonal"]

EPS = np.finfo(np.float64).eps
_LOG_2PI = math.log(2.0 * math.pi)


# ---- the normal approximation of one iterate ---------------------------------------------------
def update_diagonal(alpha, s, y):
    """Gilbert & Lemarechal's update of the diagonal initial inverse Hessian ``alpha``
    with the pair ``(s, y)`` (the diagonal of the BFGS update of the Hessian
    ``(y'Dy / y's) D^-1``, ``D = diag(alpha)``, inverted elementwise). Returns the old
    ``alpha`` if the update is not positive and finite (rounding)."""
    a = float(y @ (alpha * y))
    b = float(y @ s)
    c = float(s @ (s / alpha))
    with np.errstate(all="ignore"):
        inv = a / (b * alpha) + y * y / b - a * s * s / (b * c * alpha * alpha)
        new = 1.0 / inv
    if np.all(np.isfinite(new)) and np.all(new > 0):
        return new
    return alpha


class LbfgsNormal:
    """``N(mean, Sigma)`` on R^d with ``Sigma = diag(alpha) + B G B'`` (the L-BFGS
    inverse-Hessian estimate in compact form; see the module docstring), sampled and
    evaluated in O(d m) per point when ``2m < d`` (else through the dense Cholesky
    factor)."""

    def __init__(self, mean, alpha, B, G):
        self.mean = np.asarray(mean, dtype=np.float64)
        self.alpha = np.asarray(alpha, dtype=np.float64)
        self.B = np.asarray(B, dtype=np.float64)
        self.G = np.asarray(G, dtype=np.float64)
        d, k = self.B.shape
        self.dim = d
        self.low_rank = k < d
        if self.low_rank:
            sa = np.sqrt(self.alpha)
            Q, RB = np.linalg.qr(self.B / sa[:, None])                # thin QR, d x k
            M = np.eye(k) + RB @ self.G @ RB.T
            L = np.linalg.cholesky(0.5 * (M + M.T))               # LinAlgError: not PD
            self._sa, self._Q, self._L = sa, Q, L
            self._Lm = L - np.eye(k)
            self.log_det = float(np.sum(np.log(self.alpha)) + 2 * np.sum(np.log(np.diag(L))))
        else:
            S = self.covariance()
            L = np.linalg.cholesky(S)
            self._L = L
            self.log_det = float(2 * np.sum(np.log(np.diag(L))))
        if not math.isfinite(self.log_det):
            raise np.linalg.LinAlgError("the covariance is singular")

    def covariance(self):
        """The dense covariance ``Sigma`` (d x d)."""
        S = np.diag(self.alpha) + self.B @ self.G @ self.B.T
        return 0.5 * (S + S.T)

    def _transform(self, u):
        """``A u`` for rows ``u`` (n x d), ``A A' = Sigma``."""
        if self.low_rank:
            return (u + ((u @ self._Q) @ self._Lm.T) @ self._Q.T) * self._sa
        return u @ self._L.T

    def _inverse(self, z):
        """``A^-1 z`` for rows ``z``."""
        if self.low_rank:
            w = z / self._sa
            t = w @ self._Q
            k = t.shape[1]
            Linv_t = np.linalg.solve(self._L, t.T).T if k else t
            return w + (Linv_t - t) @ self._Q.T
        return np.linalg.solve(self._L, z.T).T

    def sample(self, rng, n):
        """``(x, log_q)``: ``n`` draws (n x d) and their log densities."""
        u = rng.standard_normal((int(n), self.dim))
        x = self.mean + self._transform(u)
        return x, self._log_q_std(u)

    def _log_q_std(self, u):
        return -0.5 * (self.dim * _LOG_2PI + self.log_det + np.sum(u * u, axis=1))

    def logpdf(self, x):
        """``log q(x)`` for rows of ``x``."""
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        return self._log_q_std(self._inverse(x - self.mean))


def lbfgs_normal(x, grad_log_p, alpha, pairs):
    """The Pathfinder approximation at iterate ``x``: ``N(x + Sigma grad log p(x),
    Sigma)`` with ``Sigma`` from the diagonal ``alpha`` and correction ``pairs``
    ``[(s, y), ...]`` (oldest first; ``y`` are differences of the gradient of
    ``-log p``). Raises ``numpy.linalg.LinAlgError`` if the estimate is not
    positive definite (rounding)."""
    S = np.column_stack([s for s, _ in pairs])
    Y = np.column_stack([y for _, y in pairs])
    m = S.shape[1]
    SY = S.T @ Y
    R = np.triu(SY)
    Rinv = np.linalg.inv(R)       # m x m, m <= history_size
    DY = alpha[:, None] * Y
    mid = Rinv.T @ (np.diag(np.diag(SY)) + Y.T @ DY) @ Rinv
    G = np.block([[np.zeros((m, m)), -Rinv], [-Rinv.T, mid]])
    B = np.hstack([DY, S])
    mean = x + alpha * grad_log_p + B @ (G @ (B.T @ grad_log_p))
    return LbfgsNormal(mean, alpha, B, G)


# ---- one path --------------------------------------------------------------------------------------
class PathInfo:
    """What one single-path Pathfinder did.

    ``index`` (0-based), ``init`` (unconstrained start), ``lp`` (log density at each
    L-BFGS iterate), ``elbo`` (ELBO estimate at each iterate; NaN where none: the
    start, or no accepted correction pair yet; -inf where a draw had no finite
    density), ``best_iteration``, ``best_elbo``, ``approximation`` (the chosen
    :class:`LbfgsNormal`), ``optimizer_converged`` / ``optimizer_message``,
    ``iterations``, ``n_grad_evals`` (L-BFGS), ``n_lp_evals`` (ELBO and output draws),
    ``pareto_k`` (of this path's own draws), ``failed`` (None or the reason),
    ``seconds``."""

    def __init__(self, index):
        self.index = index
        self.failed = None
        self.approximation = None
        self.best_iteration = None
        self.best_elbo = -math.inf
        self.pareto_k = math.nan
        self.draws = self.log_p = self.log_q = None

    def __repr__(self):
        if self.failed:
            return f"<PathInfo {self.index + 1}: failed: {self.failed}>"
        return (f"<PathInfo {self.index + 1}: {self.iterations} L-BFGS iterations, best "
                f"ELBO {self.best_elbo:.4g} at iteration {self.best_iteration}, "
                f"pareto_k {self.pareto_k:.2f}>")


def single_path(model, index, seed_seq, *, init, init_radius, max_lbfgs_iters,
                num_elbo_draws, num_single_draws, history_size, criteria, calculate_lp):
    """Run one Pathfinder path (see the module docstring); returns its
    :class:`PathInfo` with ``draws``, ``log_p``, ``log_q`` set (unless it failed)."""
    t0 = time.perf_counter()
    info = PathInfo(index)
    rng = np.random.default_rng(seed_seq)
    x0, lp0, g0 = initial_point(model, init, rng, jacobian=True, radius=init_radius,
                                what=f"Pathfinder path {index + 1}")
    info.init = x0
    obj = Objective(model, True)
    f0, gf0 = obj(x0)
    trace = run_quasi_newton(obj, x0, f0, gf0, method="lbfgs", max_iter=max_lbfgs_iters,
                             criteria=criteria, history_size=history_size)
    info.iterations = trace.iterations
    info.optimizer_converged = trace.code not in ("max_iter", "no_progress")
    info.optimizer_message = trace.message
    info.n_grad_evals = obj.n_evals
    info.lp = -np.asarray(trace.fs)
    n_lp = 0
    d = model.dim
    alpha = np.ones(d)
    pairs = []
    elbo = np.full(trace.iterations + 1, np.nan)
    n_chol_fail = 0
    best = None
    for l in range(1, trace.iterations + 1):
        s = trace.xs[l] - trace.xs[l - 1]
        y = trace.gs[l] - trace.gs[l - 1]
        if float(s @ y) > EPS * float(y @ y):
            alpha = update_diagonal(alpha, s, y)
            pairs.append((s, y))
            if len(pairs) > history_size:
                pairs.pop(0)
        if not pairs:
            continue
        try:
            with np.errstate(all="ignore"):
                approx = lbfgs_normal(trace.xs[l], -trace.gs[l], alpha, pairs)
        except (np.linalg.LinAlgError, ValueError):
            n_chol_fail += 1
            continue
        xs, lq = approx.sample(rng, num_elbo_draws)
        lp = np.array([_log_density(model, xi, True) for xi in xs])
        n_lp += len(xs)
        e = float(np.mean(lp - lq)) if np.all(np.isfinite(lp)) else -math.inf
        elbo[l] = e
        if best is None or e > best[0]:
            best = (e, l, approx)
    info.elbo = elbo
    info.n_chol_failures = n_chol_fail
    if best is None or not math.isfinite(best[0]):
        if best is not None:
            info.failed = ("no iterate gave a normal approximation with a finite ELBO "
                           "(its draws fall where the log density is not finite)")
        elif trace.iterations == 0:
            info.failed = f"L-BFGS stopped at its initial point ({trace.message})"
        else:
            info.failed = ("no L-BFGS step satisfied the curvature condition s'y > 0 (the "
                           "log density is not concave along the path)")
        info.n_lp_evals = n_lp
        info.seconds = time.perf_counter() - t0
        return info
    info.best_elbo, info.best_iteration, info.approximation = best
    xs, lq = info.approximation.sample(rng, num_single_draws)
    if calculate_lp:
        lp = np.array([_log_density(model, xi, True) for xi in xs])
        n_lp += len(xs)
        info.pareto_k = _psis(lp - lq)[1]
    else:
        lp = None
    info.draws, info.log_p, info.log_q = xs, lp, lq
    info.n_lp_evals = n_lp
    info.seconds = time.perf_counter() - t0
    return info


def _psis(log_ratios):
    """``(normalised smoothed log weights, k-hat)``; non-finite ratios get weight 0."""
    from stanlite.fit_tables import _arviz
    r = np.asarray(log_ratios, dtype=np.float64)
    ok = np.isfinite(r)
    lw = np.full(r.shape, -np.inf)
    if ok.sum() < 2:
        if ok.sum() == 1:
            lw[ok] = 0.0
        return lw, math.nan
    with warnings.catch_warnings():
        # arviz warns when k-hat is large: reported in words by the fit instead
        warnings.simplefilter("ignore")
        w, k = _arviz().psislw(r[ok] - np.max(r[ok]), reff=1.0)
    lw[ok] = w
    return lw, float(np.asarray(k))


# ---- the result ------------------------------------------------------------------------------------
#: diagnose()'s words for the bands of the pooled draws' k-hat (pareto_k_sentence)
_K_WORDS = dict(
    good="the approximation is close to the posterior and the resampled draws are "
    "reliable.",
    usable="usable for means and rough intervals; variances and tail quantiles may be "
    "off.",
    bad="do not trust these draws; the Gaussians along the optimisation paths do not "
    "cover the posterior. Try more paths, or sample with NUTS initialised at the "
    "Pathfinder draws (init=fit.inits(chains)).")


class PathfinderFit(ApproximateFit):
    """Pathfinder's draws with the ``Fit`` interface (an
    :class:`~stanlite.approx_fit.ApproximateFit`), plus ``paths`` (one
    :class:`PathInfo` each), ``resampled`` (whether the draws are a PSIS resample of
    the pooled paths), ``fit["path"]`` (the path of each draw, 1-based), :meth:`inits`
    and :meth:`inv_metric_estimate` to start NUTS.

    For a resampled fit, ``pareto_k`` and :meth:`psis` describe the importance ratios
    of the pooled draws *before* resampling (those that made the draws); the resampled
    draws themselves are equally weighted."""

    def _setup(self, paths, resampled, pool_lw, pool_k, pool_size, init_seed):
        self.paths = paths
        self.resampled = resampled
        self._pool = (pool_lw, pool_k, pool_size)
        self._init_seed = init_seed

    def psis(self):
        if not self.resampled:
            return super().psis()
        n = self.num_draws
        return (np.full(n, -math.log(n)) if n else np.empty(0)), self._pool[1]

    @property
    def pareto_k(self):
        if self.resampled:
            return self._pool[1]
        return super().pareto_k

    def diagnose(self):
        """Notes on the paths, then the Pareto k-hat (of the pooled importance ratios
        for a resampled fit) with its thresholds and advice."""
        if not self.resampled:
            return super().diagnose()
        msgs = list(self.notes)
        lw, k, n_pool = self._pool
        thr = pareto_k_threshold(n_pool)
        ok = [p for p in self.paths if not p.failed]
        head = (f"Pareto k-hat of the importance ratios log_p - log_q over the "
                f"{n_pool} draws of {len(ok)} paths (before resampling): {k:.2f}")
        msgs.append(pareto_k_sentence(head, k, thr, **_K_WORDS))
        w = np.exp(lw[np.isfinite(lw)])
        if w.size:
            msgs.append(f"PSIS effective sample size: {1.0 / np.sum(w * w):.0f} of "
                        f"{n_pool} pooled draws; the {self.num_draws} resampled draws "
                        f"hold {_n_distinct(self.unconstrained_draws[0])} distinct points.")
        msgs.append("k-hat of each path's own draws: "
                    + ", ".join(f"{p.pareto_k:.2f}" for p in ok) + ".")
        return "\n".join(msgs)

    def inits(self, chains=4, seed=None):
        """``chains`` init dicts (constrained parameter values) from distinct draws,
        for ``model.sample(init=fit.inits(chains))``: drawn at random (``seed``;
        default: the fit's) without replacement among the distinct draws with a finite
        log density (with replacement only if there are fewer than ``chains``)."""
        if not isinstance(chains, (int, np.integer)) or isinstance(chains, bool) or \
                chains < 1:
            raise ValueError(f"chains must be an integer >= 1, got {chains!r}")
        xs = self.unconstrained_draws[0]
        lp = self.log_p
        keep = np.arange(len(xs)) if lp is None else np.flatnonzero(np.isfinite(lp))
        if keep.size == 0:
            raise ValueError("no draw with a finite log density: no usable inits")
        _, first = np.unique(xs[keep], axis=0, return_index=True)
        cand = keep[np.sort(first)]
        rng = np.random.default_rng(self._init_seed if seed is None else seed)
        pick = rng.choice(cand, size=int(chains), replace=bool(chains > cand.size))
        return [self.model.constrain(xs[i]) for i in pick]

    def inv_metric_estimate(self, metric="diag_e"):
        """The posterior variances (``"diag_e"``) or covariance (``"dense_e"``) on the
        unconstrained space estimated from the draws, for ``model.sample(metric=...,
        inv_metric=...)``."""
        xs = self.unconstrained_draws[0]
        if metric == "diag_e":
            return xs.var(axis=0, ddof=1)
        if metric == "dense_e":
            return np.atleast_2d(np.cov(xs.T))
        raise ValueError(f"metric must be 'diag_e' or 'dense_e', got {metric!r}")

    def __repr__(self):
        k = self.pareto_k
        kk = "" if k is None or not math.isfinite(k) else f", pareto_k={k:.2f}"
        ok = sum(1 for p in self.paths if not p.failed)
        how = "PSIS-resampled" if self.resampled else "pooled"
        return (f"<PathfinderFit: {self.num_draws} draws ({how}) from {ok} of "
                f"{len(self.paths)} paths, {len(self.names)} quantities{kk}>")


def _n_distinct(x):
    return int(np.unique(x, axis=0).shape[0]) if len(x) else 0


# ---- running paths ---------------------------------------------------------------------------------
_MODEL = None              # the model inside a forked worker (inherited, never pickled)


def _set_model(model):
    global _MODEL
    _MODEL = model


def _path_inherited(index, seed_seq, kw):
    return single_path(_MODEL, index, seed_seq, **kw)


class _PathBar:
    """The bar over the paths, showing the best ELBO so far."""

    def __init__(self, bar):
        self.bar = bar
        self.best = -math.inf

    def done(self, info):
        if not info.failed:
            self.best = max(self.best, info.best_elbo)
        self.bar.advance(1, best_elbo=f"{self.best:.4g}")

    def close(self):
        self.bar.close()


def _run_paths(model, seeds, kws, parallel, executor, bar):
    n = len(seeds)
    if executor is None and (not parallel or n == 1):
        out = []
        for i in range(n):
            out.append(single_path(model, i, seeds[i], **kws[i]))
            bar.done(out[-1])
        return out
    import concurrent.futures as cf
    import multiprocessing as mp
    import os
    own = executor is None
    if own:
        ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
        executor = cf.ProcessPoolExecutor(max_workers=min(n, os.cpu_count() or 1),
                                          mp_context=ctx, initializer=_set_model,
                                          initargs=(model if ctx is not None else None,))
        inherited = ctx is not None
    else:
        inherited = False
    try:
        if inherited:
            futs = [executor.submit(_path_inherited, i, seeds[i], kws[i]) for i in range(n)]
        else:
            futs = [executor.submit(single_path, model, i, seeds[i], **kws[i])
                    for i in range(n)]
        for f in cf.as_completed(futs):
            bar.done(f.result())
        return [f.result() for f in futs]
    finally:
        if own:
            executor.shutdown(wait=True)


def pathfinder(model, seed=None, num_paths=4, num_draws=1000, num_single_draws=None,
               max_lbfgs_iters=1000, num_elbo_draws=25, history_size=5, init_radius=2.0,
               psis_resample=True, calculate_lp=True, init=None, tol_obj=1e-12,
               tol_rel_obj=1e4, tol_grad=1e-8, tol_rel_grad=1e7, tol_param=1e-8,
               progress=True, parallel=False, executor=None):
    """Pathfinder variational inference (see the module docstring), with Stan's
    defaults.

    ``num_paths`` single paths, each L-BFGS for at most ``max_lbfgs_iters`` iterations
    (Stan's tolerances ``tol_*``, ``history_size`` correction pairs), the ELBO of every
    iterate's approximation estimated with ``num_elbo_draws`` draws, and
    ``num_single_draws`` draws (default ``num_draws``) from the best one. One path
    returns its draws; several are pooled and, with ``psis_resample`` (default),
    ``num_draws`` of them are resampled by their Pareto-smoothed importance weights
    (without it, all pooled draws are returned). ``calculate_lp=False`` skips the log
    density of the returned draws (no ``log_p``, no resampling).

    ``init``: None (uniform(-init_radius, init_radius) per path), a radius, a dict of
    parameter values (partial: the others drawn so), an unconstrained vector, or a list
    of those, one per path (see :mod:`stanlite.samplers.inits`).
    ``seed`` makes the result reproducible (one stream per path: the same whether
    paths run serially, in processes with ``parallel=True``, or on ``executor``).
    ``progress`` shows a bar over the paths (in a terminal or notebook).

    Returns a ``PathfinderFit`` (an :class:`~stanlite.approx_fit.ApproximateFit`; see
    the module docstring). Failed paths (no finite ELBO) are left out with a warning;
    if all fail, a :class:`~stanlite.ModelError` gives their reasons.
    """
    o = _options(model, seed, num_paths, num_draws, num_single_draws, max_lbfgs_iters,
                 num_elbo_draws, history_size, init_radius, psis_resample, calculate_lp,
                 progress, parallel, executor)
    inits = per_run(model, init, o.num_paths, "paths")
    criteria = Criteria(tol_obj, tol_rel_obj, tol_grad, tol_rel_grad, tol_param)
    streams = seed_streams(o.seed, o.num_paths + 3)
    path_seeds, resample_ss, gq_ss, init_ss = (streams[:o.num_paths], streams[o.num_paths],
                                               streams[o.num_paths + 1],
                                               streams[o.num_paths + 2])
    kws = [dict(init=inits[i], init_radius=float(o.init_radius),
                max_lbfgs_iters=o.max_lbfgs_iters, num_elbo_draws=o.num_elbo_draws,
                num_single_draws=o.num_single_draws, history_size=o.history_size,
                criteria=criteria, calculate_lp=bool(o.calculate_lp))
           for i in range(o.num_paths)]
    bar = _PathBar(Bar(wanted(o.progress), o.num_paths, "pathfinder", unit="path"))
    try:
        paths = _run_paths(model, path_seeds, kws, o.parallel, o.executor, bar)
    finally:
        bar.close()
    ok = [p for p in paths if not p.failed]
    if not ok:
        why = "; ".join(f"path {p.index + 1}: {p.failed}" for p in paths)
        raise ModelError(f"pathfinder: every path failed ({why}). Check the model "
                         "(is the posterior proper?), or try another init")
    notes, failed = _path_notes(paths, ok, o)
    if failed:
        warnings.warn(failed, RuntimeWarning, stacklevel=3)
    xs, lq, lp, which, pool_lw, pool_k = _pool(ok, o, resample_ss)
    fit = PathfinderFit(model, xs, "pathfinder", log_p=lp, log_q=lq,
                        extras=_extras(paths, pool_k), seed=np.random.default_rng(gq_ss),
                        notes=notes, stats={"path": which})
    fit._setup(paths, o.resample, pool_lw, pool_k, int(sum(len(p.draws) for p in ok)),
               init_ss)
    if o.resample and math.isfinite(pool_k) and pool_k > 0.7:
        # Stan's message, as a warning: resampling could not fix the approximation
        warnings.warn(f"pathfinder: Pareto k-hat {pool_k:.2f} of the importance ratios "
                      "is above 0.7: importance resampling could not correct the "
                      "approximation, which may be poor (see fit.diagnose())",
                      RuntimeWarning, stacklevel=3)
    return fit


class _Options:
    """The arguments of :func:`pathfinder`, checked once (``resample``: whether the
    pooled draws of several paths are resampled)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def _options(model, seed, num_paths, num_draws, num_single_draws, max_lbfgs_iters,
             num_elbo_draws, history_size, init_radius, psis_resample, calculate_lp,
             progress, parallel, executor):
    """Check :func:`pathfinder`'s arguments (errors name the argument)."""
    seed = args.seed("seed", seed, generator=True)
    num_paths = args.positive_int("num_paths", num_paths)
    num_draws = args.positive_int("num_draws", num_draws)
    if num_single_draws is None:
        num_single_draws = num_draws
        # name what the user gave: the per-path count defaulted from num_draws
        pooled = (f"num_paths={num_paths} x num_draws={num_draws:,} (each path draws "
                  "num_draws when num_single_draws is not given)")
    else:
        num_single_draws = args.positive_int("num_single_draws", num_single_draws)
        pooled = f"num_paths={num_paths} x num_single_draws={num_single_draws:,}"
    # every path's draws are pooled before resampling; the fit keeps num_draws
    args.fits_in_memory(pooled, num_paths * num_single_draws, model.dim)
    args.fits_in_memory(f"num_draws={num_draws:,}", num_draws, model.dim)
    o = _Options(
        seed=seed, num_paths=num_paths, num_draws=num_draws,
        num_single_draws=num_single_draws,
        max_lbfgs_iters=args.positive_int("max_lbfgs_iters", max_lbfgs_iters),
        num_elbo_draws=args.positive_int("num_elbo_draws", num_elbo_draws),
        history_size=args.positive_int("history_size", history_size),
        init_radius=args.nonneg_real("init_radius", init_radius),
        psis_resample=args.boolean("psis_resample", psis_resample),
        calculate_lp=args.boolean("calculate_lp", calculate_lp),
        progress=args.boolean("progress", progress),
        parallel=args.boolean("parallel", parallel),
        executor=args.executor("executor", executor))
    o.resample = o.psis_resample and num_paths > 1
    if o.resample and not o.calculate_lp:
        raise ArgumentError("psis_resample needs the log density of the draws: pass "
                            "calculate_lp=True or psis_resample=False")
    return o


def _path_notes(paths, ok, o):
    """The fit's notes on failed and unconverged paths, and the warning text for the
    failed ones (None if no path failed)."""
    notes, warning = [], None
    failed = [p for p in paths if p.failed]
    if failed:
        msg = "; ".join(f"path {p.index + 1}: {p.failed}" for p in failed)
        warning = (f"pathfinder: {len(failed)} of {o.num_paths} paths failed and are "
                   f"left out ({msg})")
        notes.append(f"{len(failed)} of {o.num_paths} paths failed and were left out: "
                     f"{msg}.")
    not_conv = [p.index + 1 for p in ok if not p.optimizer_converged]
    if not_conv:
        notes.append(f"L-BFGS did not converge on path(s) {', '.join(map(str, not_conv))} "
                     f"(max_lbfgs_iters = {o.max_lbfgs_iters} or a failed line search); "
                     "their approximations come from the part of the path it followed.")
    return notes, warning


def _pool(ok, o, resample_ss):
    """The successful paths' draws pooled, with their log q, log p and path numbers,
    the pool's smoothed log importance weights and Pareto k; resampled to
    ``num_draws`` by those weights when ``o.resample``."""
    xs = np.concatenate([p.draws for p in ok])
    lq = np.concatenate([p.log_q for p in ok])
    lp = np.concatenate([p.log_p for p in ok]) if o.calculate_lp else None
    which = np.concatenate([np.full(len(p.draws), p.index + 1) for p in ok])
    pool_lw, pool_k = _psis(lp - lq) if o.calculate_lp else (None, math.nan)
    if o.resample:
        w = np.exp(pool_lw)
        w = w / w.sum()
        idx = np.random.default_rng(resample_ss).choice(len(xs), size=o.num_draws, p=w)
        xs, lq, lp, which = xs[idx], lq[idx], lp[idx], which[idx]
    return xs, lq, lp, which, pool_lw, pool_k


def _extras(paths, pool_k):
    """``fit.extras`` of :func:`pathfinder`: the pool's Pareto k and per-path results."""
    return {
        "pareto_k": pool_k,
        "path_pareto_k": np.array([p.pareto_k if not p.failed else np.nan for p in paths]),
        "path_best_elbo": np.array([p.best_elbo for p in paths]),
        "path_best_iteration": np.array([p.best_iteration if not p.failed else -1
                                         for p in paths]),
        "path_lbfgs_iterations": np.array([p.iterations for p in paths]),
        "path_n_grad_evals": np.array([p.n_grad_evals for p in paths]),
        "path_n_lp_evals": np.array([p.n_lp_evals for p in paths]),
        "n_grad_evals": int(sum(p.n_grad_evals for p in paths)),
        "n_lp_evals": int(sum(p.n_lp_evals for p in paths)),
    }
