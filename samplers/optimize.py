"""Posterior modes and the Laplace approximation: CmdStan's ``optimize`` and ``laplace``.

**optimize** maximises the log density on the unconstrained space R^dim,

    x* = argmax_x  log p(x | y)          (jacobian=False, CmdStan's default)
    x* = argmax_x  log p(x | y) + log|J(x)|                   (jacobian=True)

and reports ``x*`` on the constrained scale. Without the Jacobian term the optimum is
the mode of the posterior density *of the constrained parameters* (the MAP estimate,
or the penalised maximum-likelihood estimate when the priors are flat: plain MLE);
with it, the mode of the density of the *unconstrained* parameters, which is where a
normal approximation on the unconstrained space belongs (Laplace, below). The two
differ whenever a parameter is constrained: for ``sigma > 0`` with density
``p(sigma)``, ``log sigma`` has density ``p(sigma) sigma`` and a different mode.

Three methods, as in CmdStan: ``"lbfgs"`` (default; scipy's L-BFGS-B on the AD
gradient, ``history_size`` correction pairs), ``"bfgs"`` (scipy's dense BFGS) and
``"newton"`` (Newton steps with the nested-AD Hessian, its eigenvalues made positive
- ``|lambda|``, floored - and the step halved until the log density does not
decrease, as Stan's ``newton`` does). Convergence is decided by Stan's five tests
after every iteration ``i`` (any one ends the run; a tolerance of 0 disables its
test; ``f = -log p``, ``g`` its gradient, ``eps`` machine epsilon)::

    |f_i - f_{i-1}|                                   < tol_obj
    |f_i - f_{i-1}| / max(|f_i|, |f_{i-1}|, 1)        < tol_rel_obj * eps
    ||g_i||                                           < tol_grad
    g_i' H_i g_i / max(|f_i|, 1)                      < tol_rel_grad * eps
    ||x_i - x_{i-1}||                                 < tol_param

with ``H_i`` the method's estimate of the inverse Hessian (for the quasi-Newton
methods the L-BFGS estimate from the last ``history_size`` steps, by the two-loop
recursion; for Newton the inverse of the modified Hessian). The run that hits
``iter`` iterations without passing a test - or whose line search cannot make
progress first - is *not converged*: the result says so (``opt.converged``,
``opt.message``) and a ``RuntimeWarning`` is raised.

A log density that is not finite (or raises a domain error) at a trial point of a
line search is handled as Stan does, by stepping back: the objective handed to scipy
is extended outside the finite region by a value far above the best one seen, so the
line search contracts (L-BFGS-B itself would otherwise stop at an infinity).

**laplace** is the normal approximation at the mode on the unconstrained space,

    q(x) = N(x | x*, Sigma),    Sigma = (-H)^-1,   H = d^2 log p / dx dx' at x*

with ``H`` exact up to rounding by nested (forward-over-reverse) AD and ``Sigma``
applied through the Cholesky factor of ``-H`` (``-H = R R'``: draws are
``x* + R'^-1 z``, ``z ~ N(0, I)``, and ``log q = -z'z/2 - dim/2 log 2 pi + sum log
diag R``), never an explicit inverse. Draws go to the constrained scale through the
transforms (``model.output``), with the model's log density ``log_p`` and ``log_q``
per draw, so that the fit's Pareto k-hat tells how far the posterior is from normal.
As in CmdStan the mode is found with ``jacobian=True`` unless given.

>>> import stanlite as sl
>>> class Normal(sl.Model):
...     y = sl.data.vector(4)
...     mu = sl.param.real()
...     sigma = sl.param.real(lower=0)
...     def log_prob(self, mu, sigma):                  # flat priors: MLE
...         return sl.normal_lpdf(self.y, mu, sigma)
>>> m = Normal(y=[1.0, 2.0, 3.0, 6.0])
>>> opt = m.optimize(seed=1)
>>> opt.converged, round(float(opt["mu"]), 3), round(float(opt["sigma"]), 3)
(True, 3.0, 1.871)
>>> # the mode of the density of log(sigma): sigma^2 = sum((y - 3)^2) / (4 - 1)
>>> lap = m.laplace(draws=200, seed=1)
>>> round(float(lap.extras["mode"]["sigma"]), 4), lap["mu"].shape
(2.1602, (1, 200))
"""

import inspect
import math
import warnings
from collections import deque

import numpy as np
from scipy import linalg as _la

from stanlite import arguments as args
from stanlite.errors import ArgumentError, ModelError

from .hamiltonian import RejectedPoint
from .inits import (check_names, initial_point, optimum_point,
                    safe_log_density_gradient, seed_streams)
from .progress import Bar, wanted

__all__ = ["optimize", "laplace", "OptimizationResult", "initial_point"]

EPS = np.finfo(np.float64).eps
METHODS = ("lbfgs", "bfgs", "newton")

#: how far above the best value seen the objective is set where the log density is
#: not finite (in units of 1 + |best|): large enough that no line search accepts it
_GUARD = 1e3


# ---- the objective -------------------------------------------------------------------------
def _log_density(model, x, jacobian):
    """``log p(x)`` (no gradient); ``-inf`` where it fails or is not finite."""
    try:
        with np.errstate(all="ignore"):
            lp = float(model.log_density(x) if jacobian
                       else model.log_density(x, jacobian=False))
    except RejectedPoint:
        return -math.inf
    return lp if math.isfinite(lp) else -math.inf


class Objective:
    """``f(x) = -log p(x)`` and its gradient for scipy's minimisers, counting the
    evaluations and remembering the last few (the iterates' gradients are read back
    from here, never recomputed).

    Where the log density is not finite, ``f`` is ``f_best + 1e3 (1 + |f_best|)`` with a
    gradient pointing away from the best point seen: a line search stepping outside
    the finite region sees a steep wall and contracts, as Stan's does on an error."""

    def __init__(self, model, jacobian):
        self.model = model
        self.jacobian = jacobian
        self.n_evals = 0
        self.n_failed = 0
        self.best = None                 # (f, x) of the best finite point
        self._cache = {}
        self._order = deque()

    def __call__(self, x):
        x = np.asarray(x, dtype=np.float64)
        key = x.tobytes()
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        self.n_evals += 1
        lp, g, _ = safe_log_density_gradient(self.model, x, self.jacobian)
        if math.isfinite(lp):
            out = (-lp, -g)
            if self.best is None or out[0] < self.best[0]:
                self.best = (out[0], x.copy())
            self._cache[key] = out
            self._order.append(key)
            if len(self._order) > 32:
                self._cache.pop(self._order.popleft(), None)
            return out
        self.n_failed += 1
        f_best, x_best = self.best
        d = x - x_best
        wall = _GUARD * (1.0 + abs(f_best))
        return f_best + wall, 2.0 * wall * d / max(float(d @ d), 1e-300)

    def lookup(self, x):
        """``(f, grad f)`` at an evaluated point (evaluates it if it was not)."""
        x = np.asarray(x, dtype=np.float64)
        hit = self._cache.get(x.tobytes())
        return hit if hit is not None else self(x)


def _unconstrained_names(model):
    f = getattr(model, "unconstrained_param_names", None)
    return list(f()) if callable(f) else [f"x[{i + 1}]" for i in range(model.dim)]


# ---- Stan's convergence tests ------------------------------------------------------------------
class Criteria:
    """Stan's (L-)BFGS convergence tests (see the module docstring)."""

    def __init__(self, tol_obj=1e-12, tol_rel_obj=1e4, tol_grad=1e-8, tol_rel_grad=1e7,
                 tol_param=1e-8):
        self.tol_obj = args.nonneg_real("tol_obj", tol_obj)
        self.tol_rel_obj = args.nonneg_real("tol_rel_obj", tol_rel_obj)
        self.tol_grad = args.nonneg_real("tol_grad", tol_grad)
        self.tol_rel_grad = args.nonneg_real("tol_rel_grad", tol_rel_grad)
        self.tol_param = args.nonneg_real("tol_param", tol_param)

    def check(self, f_prev, f, g, dx, Hg):
        """``(code, sentence)`` of the first test passed, or None. ``Hg`` is the
        inverse-Hessian estimate times ``g`` (None: no estimate yet)."""
        df = abs(f - f_prev)
        if df < self.tol_obj:
            return "tol_obj", (f"absolute change in the log density {df:.3g} < tol_obj "
                               f"= {self.tol_obj:g}")
        gn = float(np.linalg.norm(g))
        if gn < self.tol_grad:
            return "tol_grad", f"gradient norm {gn:.3g} < tol_grad = {self.tol_grad:g}"
        rel = df / max(abs(f), abs(f_prev), 1.0)
        if rel < self.tol_rel_obj * EPS:
            return "tol_rel_obj", (f"relative change in the log density {rel:.3g} < "
                                   f"tol_rel_obj * eps = {self.tol_rel_obj * EPS:.3g}")
        if Hg is not None:
            rg = abs(float(g @ Hg)) / max(abs(f), 1.0)
            if rg < self.tol_rel_grad * EPS:
                return "tol_rel_grad", (f"relative gradient magnitude {rg:.3g} < "
                                        f"tol_rel_grad * eps = {self.tol_rel_grad * EPS:.3g}")
        dn = float(np.linalg.norm(dx))
        if dn < self.tol_param:
            return "tol_param", (f"parameter change {dn:.3g} < tol_param = "
                                 f"{self.tol_param:g}")
        return None


def lbfgs_inverse_hessian_product(pairs, v):
    """``H v`` for the L-BFGS inverse-Hessian estimate from correction pairs
    ``(s, y)`` (oldest first), by the two-loop recursion (Nocedal & Wright 2006,
    Algorithm 7.4) with ``H_0 = (s'y / y'y) I`` from the newest pair."""
    if not pairs:
        return None
    q = np.array(v, dtype=np.float64)
    alphas = []
    for s, y in reversed(pairs):
        rho = 1.0 / float(y @ s)
        a = rho * float(s @ q)
        q -= a * y
        alphas.append((rho, a))
    s, y = pairs[-1]
    q *= float(s @ y) / float(y @ y)
    for (s, y), (rho, a) in zip(pairs, reversed(alphas)):
        b = rho * float(y @ q)
        q += (a - b) * s
    return q


# ---- the runs -----------------------------------------------------------------------------------
class _Trace:
    """Iterates of a run: x, f = -log p, grad f, and the evaluations counted so far."""

    def __init__(self, x, f, g, history_size):
        self.xs, self.fs, self.gs = [x], [f], [g]
        self.evals = [1]
        self.pairs = deque(maxlen=max(1, int(history_size)))
        self.code = None
        self.message = None

    def add(self, x, f, g, n_evals):
        s = x - self.xs[-1]
        y = g - self.gs[-1]
        sy = float(s @ y)
        if sy > EPS * float(y @ y):                 # curvature condition
            self.pairs.append((s, y))
        self.xs.append(x)
        self.fs.append(f)
        self.gs.append(g)
        self.evals.append(n_evals)
        return s

    @property
    def iterations(self):
        return len(self.xs) - 1


def _report(trace, verbose, refresh, out=None):
    """CmdStan-like iteration lines (with ``verbose``)."""
    if not verbose:
        return
    import sys
    out = out or sys.stdout
    i = trace.iterations
    if i == 1:
        print(f"{'Iter':>6} {'log prob':>14} {'||dx||':>11} {'||grad||':>11} "
              f"{'# evals':>8}", file=out)
    if i % max(1, refresh) == 0 or trace.code is not None:
        dx = float(np.linalg.norm(trace.xs[-1] - trace.xs[-2]))
        print(f"{i:>6} {-trace.fs[-1]:>14.6g} {dx:>11.4g} "
              f"{float(np.linalg.norm(trace.gs[-1])):>11.4g} {trace.evals[-1]:>8}",
              file=out)


def _end_iteration(trace, verdict, max_iter, verbose, refresh, on_iteration):
    """The end of one iteration, the same for every method: Stan's ``verdict`` (or
    ``max_iter`` once reached) recorded in the trace, the iteration line printed and
    ``on_iteration`` called, in that order (the callback sees the final code). Returns
    the verdict (None: go on)."""
    if verdict is None and trace.iterations >= max_iter:
        verdict = ("max_iter", f"reached iter = {max_iter} iterations")
    if verdict is not None:
        trace.code, trace.message = verdict
    _report(trace, verbose, refresh)
    if on_iteration is not None:
        on_iteration(trace)
    return verdict


def run_quasi_newton(obj, x0, f0, g0, *, method="lbfgs", max_iter=2000, criteria=None,
                     history_size=5, verbose=False, refresh=100, on_iteration=None):
    """Minimise ``obj`` (an :class:`Objective`) from ``x0`` with scipy's L-BFGS-B or
    BFGS, stopping on Stan's tests; returns the :class:`_Trace` of the iterates.

    ``on_iteration(trace)`` is called after every iteration (Pathfinder uses the
    iterates). scipy's own tests are switched off (``ftol = gtol = 0``), so a run ends
    on a Stan test, ``max_iter``, or a line search that cannot make progress."""
    criteria = criteria or Criteria()
    trace = _Trace(x0, f0, g0, history_size)

    def callback(intermediate_result):
        x = np.array(intermediate_result.x, dtype=np.float64)
        f, g = obj.lookup(x)
        dx = trace.add(x, f, g, obj.n_evals)
        verdict = _end_iteration(trace, criteria.check(
            trace.fs[-2], f, g, dx, lbfgs_inverse_hessian_product(trace.pairs, g)),
            max_iter, verbose, refresh, on_iteration)
        if verdict is not None:
            raise StopIteration

    g0n = float(np.linalg.norm(g0))
    if g0n < criteria.tol_grad:                     # a stationary start: nothing to do
        trace.code = "tol_grad"
        trace.message = f"gradient norm {g0n:.3g} < tol_grad = {criteria.tol_grad:g}"
        return trace
    if max_iter < 1:
        trace.code, trace.message = "max_iter", "reached iter = 0 iterations"
        return trace
    if method == "lbfgs":
        opts = dict(maxiter=max_iter + 1, maxfun=2 ** 31 - 1, ftol=0.0, gtol=0.0,
                    maxcor=int(history_size), maxls=40)
        meth = "L-BFGS-B"
    else:
        opts = dict(maxiter=max_iter + 1, gtol=0.0, c1=1e-4, c2=0.9)
        meth = "BFGS"
    # here, not at the top: chains import this module for its initial point
    # (inits.py), and scipy.optimize costs ~0.1 s (issue 20, point 6)
    from scipy import optimize as _sopt
    with warnings.catch_warnings():
        # scipy's "precision loss" notes: the run's end is reported below, in words
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", _sopt.OptimizeWarning)
        res = _sopt.minimize(obj, x0, jac=True, method=meth, callback=callback,
                             options=opts)
    if trace.code is None:
        x = np.asarray(res.x, dtype=np.float64)
        if not np.array_equal(x, trace.xs[-1]) and obj.best is not None:
            # scipy ended inside an iteration: keep its point only if it is better
            f, g = obj.lookup(x)
            if f < trace.fs[-1]:
                trace.add(x, f, g, obj.n_evals)
        trace.code = "no_progress"
        trace.message = ("the line search could not decrease the objective further "
                         f"(scipy {meth}: {_text(res.message)})")
    return trace


def _text(msg):
    return msg.decode() if isinstance(msg, bytes) else str(msg)


def run_newton(model, x0, lp0, g0, *, jacobian, max_iter, criteria, verbose=False,
               refresh=100, on_iteration=None):
    """Stan's Newton method: the step ``H~^-1 g`` with ``H~`` the negative Hessian of
    log p with its eigenvalues replaced by their absolute values (floored at 1e-8 of
    the largest), halved until the log density does not decrease."""
    trace = _Trace(x0, -lp0, -g0, 1)
    trace.n_hessians = 0
    trace.n_evals = 1
    x, lp, g = x0, lp0, g0
    for _ in range(max_iter):
        try:
            with np.errstate(all="ignore"):
                lp, g, H = (model.log_density_hessian(x) if jacobian
                            else model.log_density_hessian(x, jacobian=False))
        except RejectedPoint as e:
            trace.code = "no_progress"
            trace.message = f"the Hessian could not be computed: {type(e).__name__}: {e}"
            break
        trace.n_hessians += 1
        H = np.asarray(H, dtype=np.float64)
        if not np.all(np.isfinite(H)):
            trace.code = "no_progress"
            trace.message = "the Hessian is not finite at the current point"
            break
        w, V = _la.eigh(-0.5 * (H + H.T))
        w = np.abs(w)
        w = np.maximum(w, 1e-8 * max(float(w.max()), 1e-300))
        step = V @ ((V.T @ g) / w)                # ascent direction of log p
        t = 1.0
        new = None
        while t > 1e-50:
            xt = x + t * step
            lpt = _log_density(model, xt, jacobian)
            trace.n_evals += 1
            if lpt >= lp:
                new = xt
                break
            t *= 0.5
        if new is None:
            trace.code = "no_progress"
            trace.message = "no step along the Newton direction increases the log density"
            break
        lp_new, g_new, _ = safe_log_density_gradient(model, new, jacobian)
        trace.n_evals += 1
        dx = trace.add(new, -lp_new, -g_new, trace.n_evals)
        # relative gradient with the modified Hessian at the previous point: g' H~^-1 g
        Hg = V @ ((V.T @ g_new) / w)
        verdict = _end_iteration(trace, criteria.check(trace.fs[-2], -lp_new, g_new, dx, Hg),
                                 max_iter, verbose, refresh, on_iteration)
        x, lp, g = new, lp_new, g_new
        if verdict is not None:
            break
    if trace.code is None:
        trace.code, trace.message = "max_iter", f"reached iter = {max_iter} iterations"
    return trace


# ---- the result ---------------------------------------------------------------------------------
class OptimizationResult:
    """A posterior mode or penalised MLE (see the module docstring).

    ``opt[name]`` is the estimate of a parameter, transformed parameter or generated
    quantity (an array of its shape; a numpy float for a scalar); ``opt.lp`` the log
    density there (with the Jacobian term if ``jacobian=True``), ``opt.unconstrained``
    the optimum on the unconstrained space, ``opt.grad`` the gradient there;
    ``opt.converged``, ``opt.criterion`` (which test ended the run: ``"tol_obj"``,
    ``"tol_rel_obj"``, ``"tol_grad"``, ``"tol_rel_grad"``, ``"tol_param"``, or
    ``"max_iter"`` / ``"no_progress"`` when not converged), ``opt.message`` in words,
    ``opt.iterations``, ``opt.n_evals`` (log-density evaluations, with gradient for
    the quasi-Newton methods), ``opt.history`` (per iteration: ``lp``, ``grad_norm``,
    ``step_norm``, ``evals``). ``summary()`` and ``to_frame()`` are pandas views,
    ``to_dict()`` a dict of copies.
    """

    def __init__(self, model, x, lp, grad, *, method, jacobian, trace, values, seed=None,
                 n_hessians=0):
        self.model = model
        self.unconstrained = np.asarray(x, dtype=np.float64)
        self.lp = float(lp)
        self.grad = np.asarray(grad, dtype=np.float64)
        self.method = method
        self.jacobian = bool(jacobian)
        self.criterion = trace.code
        self.converged = trace.code not in ("max_iter", "no_progress")
        self.message = ("converged: " if self.converged else "not converged: ") + \
            trace.message
        self.iterations = trace.iterations
        self.n_evals = int(trace.evals[-1]) if hasattr(trace, "evals") else 0
        self.n_hessians = int(n_hessians)
        fs = np.asarray(trace.fs)
        xs = np.asarray(trace.xs)
        self.history = {
            "lp": -fs,
            "grad_norm": np.linalg.norm(np.asarray(trace.gs), axis=1),
            "step_norm": np.r_[np.nan, np.linalg.norm(np.diff(xs, axis=0), axis=1)],
            "evals": np.asarray(trace.evals),
        }
        self.seed = seed
        self._values = {k: (np.float64(v) if np.ndim(v) == 0 else np.asarray(v, dtype=float))
                        for k, v in values.items()}

    def __getitem__(self, name):
        try:
            v = self._values[name]
        except KeyError:
            if name == "lp__":
                return np.float64(self.lp)
            raise KeyError(f"'{name}' is not a parameter, transformed parameter or "
                           f"generated quantity of this optimum; known: "
                           f"{', '.join(self._values)}") from None
        return v.copy() if isinstance(v, np.ndarray) else v

    def __contains__(self, name):
        return name in self._values

    @property
    def names(self):
        """Parameters, transformed parameters, generated quantities (in this order)."""
        return list(self._values)

    def to_dict(self):
        """``{name: value}`` (copies), parameters first."""
        return {k: self[k] for k in self._values}

    def _elements(self):
        from stanlite.model import element_names
        names, vals = [], []
        for k, v in self._values.items():
            names += element_names(k, np.shape(v))
            vals += list(np.ravel(v))
        return names, vals

    def summary(self):
        """A DataFrame, one row per scalar element (Stan-style names, ``lp__`` first),
        column ``estimate``."""
        import pandas as pd
        names, vals = self._elements()
        return pd.DataFrame({"estimate": [self.lp] + vals}, index=["lp__"] + names)

    def to_frame(self):
        """A one-row DataFrame, ``lp__`` then one column per element (cmdstanpy's
        ``optimized_params_pd``)."""
        import pandas as pd
        names, vals = self._elements()
        return pd.DataFrame([[self.lp] + vals], columns=["lp__"] + names)

    def __repr__(self):
        state = "converged" if self.converged else "NOT converged"
        return (f"<OptimizationResult {self.method} (jacobian={self.jacobian}): {state} "
                f"after {self.iterations} iterations, {self.n_evals} evaluations; "
                f"lp = {self.lp:.6g}; {len(self._values)} quantities>")


# ---- optimize ----------------------------------------------------------------------------------
def optimize(model, method="lbfgs", jacobian=False, seed=None, init=None, iter=2000,
             tol_obj=1e-12, tol_rel_obj=1e4, tol_grad=1e-8, tol_rel_grad=1e7,
             tol_param=1e-8, history_size=5, verbose=False, refresh=100, init_radius=2.0,
             progress=False):
    """The mode of the posterior (``jacobian=False``: of the constrained parameters'
    density, i.e. MAP or penalised MLE; ``jacobian=True``: of the unconstrained
    parameters' density), by ``method`` ``"lbfgs"`` (default), ``"bfgs"`` or
    ``"newton"`` on the AD gradient (Hessian), with Stan's convergence tests and
    defaults (see the module docstring for the math).

    ``init``: None (uniform(-init_radius, init_radius) on the unconstrained space, the
    generator seeded by ``seed``), a radius, a dict of parameter values (missing ones
    random), an unconstrained vector, or an earlier result. ``iter`` caps the
    iterations; ``history_size`` is L-BFGS's number of correction pairs; ``verbose``
    prints one line every ``refresh`` iterations; ``progress=True`` shows a tqdm bar of
    the iterations with the log density (in a terminal or notebook; off by default,
    since a run takes a fraction of a second). Generated quantities are computed at
    the optimum with a generator seeded by ``seed``.

    Returns an :class:`OptimizationResult`; warns (``RuntimeWarning``) when the run
    did not converge.

    >>> import stanlite as sl
    >>> class Beta(sl.Model):             # Beta(3, 2) posterior of a probability
    ...     theta = sl.param.real(lower=0, upper=1)
    ...     def log_prob(self, theta):
    ...         return 2 * sl.log(theta) + sl.log1m(theta)
    >>> opt = Beta().optimize(seed=2)
    >>> round(float(opt["theta"]), 6), opt.criterion in ("tol_rel_grad", "tol_grad",
    ...                                                   "tol_rel_obj", "tol_obj")
    (0.666667, True)
    """
    method = args.choice("method", method, METHODS)
    jacobian = args.boolean("jacobian", jacobian)
    seed = args.seed("seed", seed, generator=True)
    iter = args.nonneg_int("iter", iter)
    history_size = args.positive_int("history_size", history_size)
    verbose = args.boolean("verbose", verbose)
    refresh = args.positive_int("refresh", refresh)
    init_radius = args.nonneg_real("init_radius", init_radius)
    progress = args.boolean("progress", progress)
    criteria = Criteria(tol_obj, tol_rel_obj, tol_grad, tol_rel_grad, tol_param)
    init_ss, gq_ss = seed_streams(seed, 2)
    rng = np.random.default_rng(init_ss)
    x0, lp0, g0 = initial_point(model, init, rng, jacobian=jacobian, radius=init_radius,
                                what="the optimizer")
    bar = Bar(wanted(progress), None, f"optimize ({method})")

    def show(trace):
        bar.advance(1, lp=f"{-trace.fs[-1]:.6g}")
    on_iteration = show if bar.enabled else None

    try:
        if method == "newton":
            trace = run_newton(model, x0, lp0, g0, jacobian=jacobian, max_iter=int(iter),
                               criteria=criteria, verbose=verbose, refresh=refresh,
                               on_iteration=on_iteration)
            n_hess = trace.n_hessians
        else:
            obj = Objective(model, jacobian)
            f0, gf0 = obj(x0)
            trace = run_quasi_newton(obj, x0, f0, gf0, method=method, max_iter=int(iter),
                                     criteria=criteria, history_size=history_size,
                                     verbose=verbose, refresh=refresh,
                                     on_iteration=on_iteration)
            n_hess = 0
    finally:
        bar.close()
    x = trace.xs[-1]
    lp, g = -trace.fs[-1], -trace.gs[-1]
    values = _output(model, x, np.random.default_rng(gq_ss))
    result = OptimizationResult(model, x, lp, g, method=method, jacobian=jacobian,
                                trace=trace, values=values, seed=seed, n_hessians=n_hess)
    if not result.converged:
        warnings.warn(f"optimize ({method}) did not converge: {trace.message}; after "
                      f"{result.iterations} iterations the gradient norm is "
                      f"{float(np.linalg.norm(g)):.3g}. Check opt.converged / "
                      "opt.history, raise iter, or try another method or init",
                      RuntimeWarning, stacklevel=3)
    return result


_OPTIMIZE_ARGS = list(inspect.signature(optimize).parameters)


def _output(model, x, rng):
    out = getattr(model, "output", None)
    if callable(out):
        return out(x, rng=rng)
    if callable(getattr(model, "constrain", None)):
        return model.constrain(x)
    return {"x": np.asarray(x)}


# ---- laplace --------------------------------------------------------------------------------------
def laplace(model, mode=None, draws=1000, jacobian=True, seed=None, **optimize_kwargs):
    """Draws from the normal approximation at the mode on the unconstrained space,
    ``N(x*, (-H)^-1)`` with ``H`` the nested-AD Hessian of the log density at ``x*``
    (see the module docstring), returned on the constrained scale as an
    :class:`~stanlite.approx_fit.ApproximateFit` (method ``"laplace"``) with
    ``log_p`` (the model's log density, Jacobian included if ``jacobian``) and
    ``log_q`` per draw.

    ``mode``: None (found by :func:`optimize` with ``jacobian``, seeded by ``seed``;
    ``optimize_kwargs`` go to it), an :class:`OptimizationResult` (it must have been
    found with the same ``jacobian``), a dict of constrained parameter values, or an
    unconstrained vector. ``fit.extras`` holds ``mode`` (dict, constrained),
    ``mode_unconstrained``, ``covariance`` (unconstrained, ``(dim, dim)``),
    ``cholesky_precision`` (``R`` with ``-H = R R'``), ``lp_mode`` and, if optimised,
    ``optimization`` (the :class:`OptimizationResult`).

    A Hessian that is not negative definite at the mode (a saddle point, a flat
    direction, an improper posterior) is a :class:`~stanlite.ModelError` naming the
    direction and the parameters it involves.

    >>> import stanlite as sl
    >>> class Normal2(sl.Model):
    ...     mu = sl.param.real()
    ...     def log_prob(self, mu):
    ...         return sl.normal_lpdf(mu, 1.0, 0.5)
    >>> fit = laplace(Normal2(), draws=4000, seed=3)
    >>> round(float(fit.extras["covariance"][0, 0]), 12)
    0.25
    """
    draws = args.positive_int("draws", draws)    # a 0-draw fit has no values to read
    args.fits_in_memory("draws", draws, model.dim)
    jacobian = args.boolean("jacobian", jacobian)
    seed = args.seed("seed", seed, generator=True)
    # the optimizer's own arguments, checked by it; laplace sets jacobian and seed
    args.no_unknown("laplace", optimize_kwargs,
                    [n for n in _LAPLACE_ARGS if n not in ("model", "optimize_kwargs")] +
                    [n for n in _OPTIMIZE_ARGS if n not in ("model", "jacobian", "seed")])
    from stanlite.approx_fit import ApproximateFit
    opt_ss, draw_ss, gq_ss = seed_streams(seed, 3)
    opt = None
    if mode is None:
        opt = optimize(model, jacobian=jacobian, seed=opt_ss, **optimize_kwargs)
        x = opt.unconstrained
    elif optimize_kwargs:
        raise ArgumentError(f"laplace got optimizer arguments {sorted(optimize_kwargs)} "
                            "with a given mode: they are used only to find the mode")
    elif isinstance(mode, OptimizationResult):
        if mode.jacobian != bool(jacobian):
            raise ArgumentError(f"the mode was found with jacobian={mode.jacobian} but "
                                f"laplace was asked for jacobian={bool(jacobian)}: the "
                                "normal approximation belongs at the mode of the same "
                                f"density (use model.optimize(jacobian={bool(jacobian)}))")
        opt = mode
        x = optimum_point(model, mode, "mode")
    elif isinstance(mode, dict):
        check_names(model, mode, "mode")
        x = (model._unconstrain(mode, None, "mode for {name!r} ({decl})", ArgumentError,
                                strict=True) if hasattr(model, "_unconstrain")
             else model.unconstrain(mode))
    else:
        try:
            x = np.asarray(mode, dtype=np.float64)
        except (TypeError, ValueError):
            x = None
        if x is None or x.shape != (model.dim,) or not np.all(np.isfinite(x)):
            raise ArgumentError(f"mode must be an optimization result, a dict of "
                                f"parameter values or a finite unconstrained vector of "
                                f"length {model.dim}; got {type(mode).__name__}"
                                + (f" of shape {x.shape}" if x is not None else ""))
    try:
        with np.errstate(all="ignore"):
            lp, g, H = (model.log_density_hessian(x) if jacobian
                        else model.log_density_hessian(x, jacobian=False))
    except RejectedPoint as e:
        raise ModelError(f"laplace: the log density cannot be evaluated at the mode: "
                         f"{type(e).__name__}: {e}") from e
    H = np.asarray(H, dtype=np.float64)
    if not np.all(np.isfinite(H)) or not math.isfinite(lp):
        raise ModelError("laplace: the log density or its Hessian is not finite at the "
                         "mode")
    P = -0.5 * (H + H.T)                                   # precision of q
    R = _precision_cholesky(P, model)
    dim = x.shape[0]
    rng = np.random.default_rng(draw_ss)
    z = rng.standard_normal((int(draws), dim))
    # x = x* + R^-T z has covariance R^-T R^-1 = (R R^T)^-1 = P^-1
    # (numpy's solvers: scipy's triangular solve costs milliseconds on small systems)
    xs = x + np.linalg.solve(R.T, z.T).T if draws else np.empty((0, dim))
    half_logdet_P = float(np.sum(np.log(np.diag(R))))
    log_q = -0.5 * np.sum(z * z, axis=1) - 0.5 * dim * math.log(2 * math.pi) + \
        half_logdet_P
    log_p = np.array([_log_density(model, xi, jacobian) for xi in xs])
    Rinv = np.linalg.inv(R)
    cov = Rinv.T @ Rinv                                   # (R R')^-1
    extras = {"mode": model.constrain(x) if callable(getattr(model, "constrain", None))
              else x.copy(),
              "mode_unconstrained": x.copy(), "covariance": cov, "cholesky_precision": R,
              "lp_mode": float(lp), "jacobian": bool(jacobian)}
    notes = []
    if opt is not None:
        extras["optimization"] = opt
        if not opt.converged:
            notes.append(f"The mode is not reliable: {opt.message}.")
    gn = float(np.linalg.norm(g))
    # a mode should have a zero gradient: the Newton step to the true mode, in units of
    # the approximation's standard deviations, says how far off it is
    off = float(np.sqrt(max(0.0, g @ cov @ g)))
    if off > 0.1:
        notes.append(f"The gradient at the given mode is not zero (norm {gn:.3g}): the "
                     f"true mode is about {off:.2g} standard deviations away; the "
                     "approximation is centred at the wrong place.")
    return ApproximateFit(model, xs, "laplace", log_p=log_p, log_q=log_q, extras=extras,
                          seed=np.random.default_rng(gq_ss), notes=notes)


_LAPLACE_ARGS = list(inspect.signature(laplace).parameters)


def _precision_cholesky(P, model):
    """Lower Cholesky factor of the precision ``-H``; a clear error if ``-H`` is not
    positive definite (the Hessian is not negative definite at the mode)."""
    try:
        return np.linalg.cholesky(P)
    except np.linalg.LinAlgError:
        pass
    w, V = _la.eigh(P)
    k = int(np.argmin(w))
    v = V[:, k]
    names = _unconstrained_names(model)
    top = np.argsort(-np.abs(v))[:3]
    involved = ", ".join(f"{names[i]} ({v[i]:+.2f})" for i in top if abs(v[i]) > 0.05)
    kind = "flat (zero curvature)" if abs(w[k]) <= 1e-10 * max(1.0, float(np.max(np.abs(w)))) \
        else "curving upwards (a saddle point or minimum, not a maximum)"
    raise ModelError(
        "laplace: the Hessian of the log density is not negative definite at the mode "
        f"(its largest eigenvalue is {-w[k]:.3g}), so there is no normal approximation: "
        f"the log density is {kind} along the unconstrained direction {involved}. The "
        "point may not be a maximum (check the optimization converged) or the posterior "
        "is improper or unidentified in these parameters (add or tighten priors)")
