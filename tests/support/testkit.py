"""Models and helpers shared by several test files.

``tests/conftest.py`` puts this folder on ``sys.path`` (the tests are not a package:
pytest imports them with ``--import-mode=importlib``), so a test file says ``from
testkit import ...``. A model here is one class for every file that uses it: a test
that changes a class attribute (``StopOnce.limit``) sets it back, as it did in its
own file.
"""

import contextlib

import numpy as np
import pytest

import stanlite as sl


# ---- models ---------------------------------------------------------------------------
class Normal(sl.Model):
    N = sl.data.int(lower=0)
    y = sl.data.vector("N")
    mu = sl.param.real()
    sigma = sl.param.real(lower=0)

    def log_prob(self, mu, sigma):
        return (sl.normal_lpdf(self.y, mu, sigma) + sl.normal_lpdf(mu, 0, 10)
                + sl.normal_lpdf(sigma, 0, 5))


class Loop(Normal):
    """A Stan-style scalar loop (lowers to the interpreter): Normal's data and
    parameters, other priors, the likelihood one term at a time."""

    def log_prob(self, mu, sigma):
        lp = sl.normal_lpdf(mu, 0, 5) + sl.normal_lpdf(sigma, 0, 2)
        for v in self.y:
            lp = lp + sl.normal_lpdf(v, mu, sigma)
        return lp


class Regression(sl.Model):
    """y ~ N(alpha + beta x, sigma), with ``y`` declared observed (its pointwise
    log-likelihood for ArviZ's loo)."""
    N = sl.data.int(lower=0)
    x = sl.data.vector("N")
    y = sl.data.vector("N")
    alpha = sl.param.real()
    beta = sl.param.real()
    sigma = sl.param.real(lower=0)
    observed = ("y",)

    def log_prob(self, alpha, beta, sigma):
        return (sl.normal_lpdf(self.y, alpha + beta * self.x, sigma)
                + sl.normal_lpdf(alpha, 0, 5) + sl.normal_lpdf(beta, 0, 5)
                + sl.normal_lpdf(sigma, 0, 2))

    def log_likelihood(self, alpha, beta, sigma):
        r = (self.y - alpha - beta * self.x) / sigma
        return -0.5 * r * r - np.log(sigma) - 0.5 * np.log(2 * np.pi)


def regression_data(n=20, seed=0):
    """Data for :class:`Regression`: x ~ N(0, 1), y = 1 + 2 x + N(0, 0.5)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return dict(N=n, x=x, y=1.0 + 2.0 * x + 0.5 * rng.normal(size=n))


class Interrupts:
    """A mixin before ``sl.Model`` for models that stop a run as a Ctrl-C would: its
    ``log_prob`` counts the calls in ``calls[0]`` and raises KeyboardInterrupt once
    there have been more than ``limit[0]`` (None: never); otherwise it returns the
    class's ``density(<parameters>)``. Each class has its own ``calls`` and ``limit``
    lists (a test sets them on the class); ``once`` sets ``limit`` back to None when it
    raises."""
    compile = False     # log_prob counts its calls: no retaping
    once = False

    def log_prob(self, **params):
        self.calls[0] += 1
        if self.limit[0] is not None and self.calls[0] > self.limit[0]:
            if self.once:
                self.limit[0] = None
            raise KeyboardInterrupt
        return self.density(**params)


class StopOnce(Interrupts, sl.Model):
    """Raises KeyboardInterrupt (a Ctrl-C's effect) once, at its ``limit``-th call."""
    y = sl.data.real()
    mu = sl.param.real()
    calls = [0]
    limit = [None]
    once = True

    def density(self, mu):
        return sl.normal_lpdf(self.y, mu, 1.0) + sl.normal_lpdf(mu, 0.0, 1.0)

    def generated_quantities(self, rng, mu):
        return {"y_rep": rng.normal(mu, 1.0)}


# ---- closed forms ------------------------------------------------------------------------
class CorrGauss:
    """A correlated Gaussian N(0, S) through the log-density protocol (no Model)."""

    def __init__(self, S):
        self.P = np.linalg.inv(S)
        self.dim = len(S)

    def log_density_gradient(self, q):
        g = -self.P @ q
        return 0.5 * float(q @ g), g


def one_comp_mm(t, y, theta, x_r, t_dose=0.0):
    """The right-hand side of posteriordb's one_comp_mm_elim_abs in an ODE test's
    form: theta = (ka, km, vm), x_r = (dose, volume); the dose enters after ``t_dose``
    (posteriordb's program: t > 0), a branch on t."""
    ka, km, vm = theta[0], theta[1], theta[2]
    dose = 0.0
    if t > t_dose:
        dose = sl.exp(-ka * t) * x_r[0] * ka / x_r[1]
    return sl.stack([dose - (vm / x_r[1]) * y[0] / (km + y[0])])


def one_compartment(x, theta):
    """Steady state of a one-compartment model with first-order absorption (the AD
    review's experiment for one patient): x = F_tau(x + D e_gut), theta = (k1, k2, D,
    tau); the evolution over tau is in closed form."""
    k1, k2, D, tau = theta[0], theta[1], theta[2], theta[3]
    e1, e2 = sl.exp(-k1 * tau), sl.exp(-k2 * tau)
    g = x[0] + D
    return sl.stack([g * e1 - x[0],
                     x[1] * e2 + g * k1 / (k1 - k2) * (e2 - e1) - x[1]])


def one_compartment_exact(theta):
    """The root of :func:`one_compartment`: (gut, central) at the steady state."""
    k1, k2, D, tau = theta[0], theta[1], theta[2], theta[3]
    e1, e2 = sl.exp(-k1 * tau), sl.exp(-k2 * tau)
    gut = D * e1 / (1.0 - e1)
    central = (gut + D) * k1 / (k1 - k2) * (e2 - e1) / (1.0 - e2)
    return sl.stack([gut, central])


def ordered_reference(cdf, k, eta, c):
    """Elementwise log P(k | eta, c) of an ordered model with link ``cdf`` (logistic:
    scipy's expit; probit: the normal cdf): cdf(eta - c[k-1]) - cdf(eta - c[k]), with
    c[0] = -inf and c[K] = +inf; cut points ``c`` broadcast over their leading axes."""
    c = np.asarray(c, dtype=float)
    K = c.shape[-1] + 1
    pad = c.shape[:-1] + (1,)
    cc = np.concatenate([np.full(pad, -np.inf), c, np.full(pad, np.inf)], axis=-1)
    k = np.asarray(k)
    eta = np.asarray(eta, dtype=float)
    shape = np.broadcast_shapes(k.shape, eta.shape, c.shape[:-1])
    k, eta = np.broadcast_to(k, shape), np.broadcast_to(eta, shape)
    cc = np.broadcast_to(cc, shape + (K + 1,))
    lo = np.take_along_axis(cc, (k - 1)[..., None], -1)[..., 0]
    hi = np.take_along_axis(cc, k[..., None], -1)[..., 0]
    return np.log(cdf(eta - lo) - cdf(eta - hi))


def ordinal_cases(rng):
    """The arguments (k, eta, c) at which the ordered-logistic and ordered-probit tests
    check their distribution, by name: K = 5 outcomes with vectors of outcomes and
    predictors, a scalar predictor, a scalar outcome too, one row of cut points per
    outcome, and K = 2 (a single cut point: a binary regression). Draws the predictors,
    then the rows of cut points, from ``rng``."""
    c = np.array([-1.2, -0.1, 0.7, 1.9])
    k = np.array([1, 2, 3, 4, 5, 5, 1, 3])
    eta = rng.normal(size=8)
    c_rows = np.sort(rng.normal(size=(8, 4)), axis=1)
    return {"vectors": (k, eta, c), "scalar eta": (k, 0.3, c),
            "scalar k and eta": (3, 0.3, c), "cut points per outcome": (k, eta, c_rows),
            "K = 2": (np.array([1, 2, 2]), eta[:3], [0.4])}


# ---- replays ----------------------------------------------------------------------------
def check_retaped(f, x0, points):
    """``sl.compile(f, x0)`` (recorded at ``x0``, replayed at each point) gives the eager
    tape's value (to 1e-14) and gradient (to 1e-12)."""
    c = sl.compile(f, x0)
    for x in points:
        v, g = c(x)
        v0, g0 = sl.value_and_grad(f)(x)
        np.testing.assert_allclose(v, v0, rtol=1e-14)
        np.testing.assert_allclose(g, g0, rtol=1e-12)


# ---- finite differences ----------------------------------------------------------------
def central_gradient(fun, x, h=1e-6):
    """Central differences of a plain scalar function of a vector (step ``h``)."""
    x = np.asarray(x, dtype=float)
    g = np.empty(x.size)
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = h
        g[i] = (fun(x + e) - fun(x - e)) / (2 * h)
    return g


def check_directions(fun, x, g, rtol, atol, h=1e-6, k=2, seed=0, mask=None):
    """The gradient ``g`` of ``fun`` at ``x`` along ``k`` random directions v (scaled by
    max(1, |x|), restricted to ``mask``) against the central difference of ``fun``
    along v."""
    rng = np.random.default_rng(seed)
    for _ in range(k):
        v = rng.standard_normal(np.shape(x)) * np.maximum(1.0, np.abs(x))
        if mask is not None:
            v = v * mask
        fd = (float(fun(x + h * v)) - float(fun(x - h * v))) / (2 * h)
        assert float(np.sum(g * v)) == pytest.approx(fd, rel=rtol, abs=atol)


def check_model_gradient(m, x, rtol, atol, h=1e-6):
    """``m.log_density_gradient(x)`` (retaped: replayed after the first call) equals
    the eager tape's bit for bit, and central differences of ``m.log_density``."""
    lp, g = m.log_density_gradient(x)
    eager = m._gradient(x, True)
    assert lp == eager[0] and np.array_equal(g, eager[1])
    fd = [(m.log_density(x + h * e) - m.log_density(x - h * e)) / (2 * h)
          for e in np.eye(m.dim)]
    np.testing.assert_allclose(g, fd, rtol=rtol, atol=atol)


def fd_grad_trace_hessian(H, x, W):
    """d/dx tr(W H(x)) (what ``sl.grad_trace_mat_hessian`` computes) from central
    differences of the Hessian ``H``, Richardson-refined (steps 1e-4 and 5e-5)."""
    def d(e, s):
        return (np.sum(W * H(x + s * e)) - np.sum(W * H(x - s * e))) / (2 * s)
    return np.array([(4 * d(e, 5e-5) - d(e, 1e-4)) / 3 for e in np.eye(len(x))])


def central_jacobian(fn, x, h=1e-6, relative=False):
    """Central differences of a vector function, one column per input (the last axis).
    The step is ``h``, or ``h * max(1, |x_i|)`` with ``relative``."""
    cols = []
    for i in range(len(x)):
        e = np.zeros_like(x)
        e[i] = h * max(1.0, abs(x[i])) if relative else h
        cols.append((np.asarray(fn(x + e)) - np.asarray(fn(x - e))) / (2 * e[i]))
    return np.stack(cols, axis=-1)


# ---- PK event tables ---------------------------------------------------------------------
def events_from_rows(rows):
    """``sl.pk.events`` of rows (id, time, evid, amt, cmt, rate, ii, addl)."""
    a = np.array(rows, dtype=float)
    return sl.pk.events(id=a[:, 0], time=a[:, 1], evid=a[:, 2], amt=a[:, 3],
                        cmt=a[:, 4], rate=a[:, 5], ii=a[:, 6], addl=a[:, 7])


# ---- spies and child processes -----------------------------------------------------------
def fake_cached_dispatcher(cache_dir):
    """``([dispatcher], flushed)``: a stand-in for a numba dispatcher whose on-disk cache
    lives in ``cache_dir``, for the stale-cache checks; each ``flush()`` appends to
    ``flushed``, so a test counts how often a change of source dropped the cache."""
    flushed = []

    class Cache:
        _cache_path = str(cache_dir)

        def flush(self):
            flushed.append(1)

    class Dispatcher:
        __name__ = "fake"
        _cache = Cache()

    return [Dispatcher()], flushed


def count_calls(monkeypatch, owner, name):
    """Replace ``owner.<name>`` (for the test) by a spy that calls it; the returned
    list grows by one per call."""
    calls = []
    real = getattr(owner, name)

    def spy(*a, **k):
        calls.append(1)
        return real(*a, **k)
    monkeypatch.setattr(owner, name, spy)
    return calls


@contextlib.contextmanager
def killed_on_exit(p):
    """A child process that is killed if the block leaves before it has ended."""
    try:
        yield p
    finally:
        if p.poll() is None:
            p.kill()


def wait_ok(p, timeout=120):
    """``(stdout, stderr)`` of a child that must exit with 0 (its stderr's end is the
    failure message)."""
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, err[-3000:]
    return out, err
