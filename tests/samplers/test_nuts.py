"""NUTS and its pieces: Stan's window schedule, the integrator (energy, reversibility),
posterior moments of exact posteriors within Monte Carlo standard errors, adaptation of
the metric, reproducibility by seed (serial, processes, Dask), rejection of failing
proposals, initialisation errors, interruption and bit-identical resumption."""

import math
import warnings

import numpy as np
import pytest
import scipy.stats as st

import stanlite as sl
from stanlite.samplers import adaptation, hamiltonian, nuts, nuts_jit
from stanlite.samplers.hamiltonian import Point
from testkit import CorrGauss as _CorrGauss, StopOnce


def _ess(x):
    """Bulk ESS of a (chains, draws) array (ArviZ)."""
    import arviz as az
    return float(az.ess(np.asarray(x), method="bulk"))


def assert_mean_within_mcse(draws, mean, sd, k=4.0):
    """|sample mean - true mean| < k MCSE, with MCSE = true sd / sqrt(ESS)."""
    est = draws.mean()
    mcse = sd / np.sqrt(_ess(draws))
    assert abs(est - mean) < k * mcse, (est, mean, mcse)


def assert_sd_within_mcse(draws, sd, k=4.0):
    """Sample variance vs true, MCSE of a variance ~ var * sqrt(2 / ESS) for
    near-Gaussian draws (ESS of the squared deviations)."""
    dev2 = (draws - draws.mean()) ** 2
    est = dev2.mean()
    mcse = sd ** 2 * np.sqrt(2.0 / _ess(dev2))
    assert abs(est - sd ** 2) < k * mcse, (est, sd ** 2, mcse)


# ---- schedule --------------------------------------------------------------------------
def test_window_schedule_is_stans():
    assert adaptation.window_ends(1000) == ([99, 149, 249, 449, 949], (75, 50, 25))
    # 15% / 75% / 10% fallback when the defaults do not fit
    assert adaptation.window_ends(100) == ([89], (15, 10, 75))
    assert adaptation.window_ends(10) == ([], (10, 0, 0))
    ends, _ = adaptation.window_ends(2000)
    assert ends[-1] == 2000 - 50 - 1 and ends[:4] == [99, 149, 249, 449]


def test_dual_averaging_converges_to_target():
    # acceptance a(eps) = exp(-eps): the fixed point of dual averaging is a = delta
    da = adaptation.DualAveraging(delta=0.8)
    da.restart(1.0)
    eps = 1.0
    for _ in range(2000):
        eps = da.update(np.exp(-eps))
    assert np.isclose(np.exp(-da.final()), 0.8, atol=0.01)


def test_welford_regularisation():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 3)) * [1, 2, 3]
    w = adaptation.Welford(3)
    for r in x:
        w.add(r)
    n = 50
    want = n / (n + 5) * x.var(0, ddof=1) + 1e-3 * 5 / (n + 5)
    np.testing.assert_allclose(w.regularized(), want)
    wd = adaptation.Welford(3, dense=True)
    for r in x:
        wd.add(r)
    np.testing.assert_allclose(wd.regularized(), n / (n + 5) * np.cov(x.T)
                               + 1e-3 * 5 / (n + 5) * np.eye(3))



def test_dense_estimate_from_fewer_draws_than_dimensions_keeps_every_scale():
    # n <= dim: S is singular; shrunk towards its diagonal (weight n/(n+dim) on S)
    # before Stan's regularisation, so no direction gets Stan's ~1e-4 variance
    rng = np.random.default_rng(1)
    d, n = 40, 25
    scales = np.geomspace(0.3, 3.0, d)
    x = rng.normal(size=(n, d)) * scales
    w = adaptation.Welford(d, dense=True)
    for r in x:
        w.add(r)
    S = np.cov(x.T)
    lam = n / (n + d)
    want = n / (n + 5) * (lam * S + (1 - lam) * np.diag(np.diag(S))) \
        + 1e-3 * 5 / (n + 5) * np.eye(d)
    est = w.regularized()
    np.testing.assert_allclose(est, want, rtol=1e-12)
    assert np.linalg.matrix_rank(S) < d
    # its smallest eigenvalue is of the order of the smallest scale, not 1e-3 * 5/30
    assert np.linalg.eigvalsh(est)[0] > 0.1 * (1 - lam) * n / (n + 5) * scales[0] ** 2

# ---- integrator --------------------------------------------------------------------------
class _Gauss:
    """A log-density-protocol object (not a Model): N(0, diag(s^2))."""

    def __init__(self, s):
        self.s = np.asarray(s, float)
        self.dim = len(s)

    def log_density_gradient(self, q):
        return float(-0.5 * np.sum((q / self.s) ** 2)), -q / self.s ** 2


def test_leapfrog_energy_and_reversibility(rng):
    m = _Gauss([1.0, 2.0, 0.5])
    metric = hamiltonian.DiagMetric(3, np.array([1.0, 4.0, 0.25]))
    q = rng.normal(size=3)
    lp, g = m.log_density_gradient(q)
    z0 = Point(q, metric.sample_momentum(rng), lp, g)
    H = lambda z: -z.lp + metric.kinetic(z.p)      # noqa: E731
    z = z0
    for _ in range(200):
        z = hamiltonian.leapfrog(m, metric, z, 0.1)
    assert abs(H(z) - H(z0)) < 1e-2          # second-order integrator, bounded error
    back = Point(z.q, -z.p, z.lp, z.grad)
    for _ in range(200):
        back = hamiltonian.leapfrog(m, metric, back, 0.1)
    np.testing.assert_allclose(back.q, z0.q, atol=1e-10)
    np.testing.assert_allclose(-back.p, z0.p, atol=1e-10)


def test_dense_metric_momentum_covariance(rng):
    M_inv = np.array([[2.0, 0.6], [0.6, 1.0]])
    metric = hamiltonian.DenseMetric(2, M_inv)
    p = np.array([metric.sample_momentum(rng) for _ in range(20000)])
    # p ~ N(0, M) with M = inv(M_inv): compare within 4 standard errors
    M = np.linalg.inv(M_inv)
    se = np.sqrt((M ** 2 + np.outer(np.diag(M), np.diag(M))) / 20000)
    assert np.all(np.abs(np.cov(p.T) - M) < 4 * se)


def test_nuts_transition_on_protocol_object(rng):
    m = _Gauss([1.0, 1.0])
    metric = hamiltonian.UnitMetric(2)
    q = np.zeros(2)
    z = Point(q, None, *m.log_density_gradient(q))
    draws = []
    for _ in range(3000):
        z, info = nuts.transition(m, metric, z, 0.9, rng)
        assert 0 <= info.accept_stat <= 1 and info.n_leapfrog >= 1
        draws.append(z.q)
    d = np.array(draws)[None]
    for j in range(2):
        assert_mean_within_mcse(d[..., j], 0.0, 1.0)
        assert_sd_within_mcse(d[..., j], 1.0)



def _reference_tree(m, Minv, q0, p0, eps, forward, max_depth=10):
    """Stan's base_nuts written plainly, as the yardstick of the fast tree: leapfrog
    in the momentum p (not whitened), velocities M^-1 p, explicit sums rho and the
    three U-turn checks of every merge. All doublings go one way, so the tree's
    stopping point is deterministic (the multinomial draws cannot change it).
    Returns (number of leapfrog steps, tree depth)."""
    def crit(p_minus, p_plus, rho):
        return (Minv @ p_minus) @ rho > 0 and (Minv @ p_plus) @ rho > 0

    lp0, g0 = m.log_density_gradient(q0)
    H0 = -lp0 + 0.5 * p0 @ Minv @ p0
    e = eps if forward else -eps
    n = [0]

    def build(z, depth):
        if depth == 0:
            q, p, g = z
            p = p + 0.5 * e * g
            q = q + e * Minv @ p
            lp, g = m.log_density_gradient(q)
            p = p + 0.5 * e * g
            n[0] += 1
            ok = -lp + 0.5 * p @ Minv @ p - H0 <= 1000.0
            return ok, (q, p, g), p, p, p
        ok, z, rho_a, a_beg, a_end = build(z, depth - 1)
        if not ok:
            return (False,) + (None,) * 4
        ok, z, rho_b, b_beg, b_end = build(z, depth - 1)
        if not ok:
            return (False,) + (None,) * 4
        rho = rho_a + rho_b
        ok = (crit(a_beg, b_end, rho) and crit(a_beg, b_beg, rho_a + b_beg)
              and crit(a_end, b_end, rho_b + a_end))
        return ok, z, rho, a_beg, b_end

    z = (q0, p0, g0)
    rho, far, adj = p0, p0, p0          # the trajectory's sum, far end, growing end
    for depth in range(max_depth):
        ok, z, rho_s, s_beg, s_end = build(z, depth)
        if not ok:
            return n[0], depth
        ok = (crit(far, s_end, rho + rho_s) and crit(far, s_beg, rho + s_beg)
              and crit(adj, s_end, rho_s + adj))
        rho, adj = rho + rho_s, s_end
        if not ok:
            return n[0], depth + 1
    return n[0], max_depth


_IMPLEMENTATIONS = ["python", pytest.param("compiled", marks=pytest.mark.skipif(
    not nuts_jit.available(), reason="numba not installed or STANLITE_JIT=0"))]


def _use(implementation, monkeypatch, uniform=None):
    """Select the Python or the compiled tree; ``uniform``: every uniform it draws
    (a constant stream makes every doubling go one way)."""
    import itertools
    monkeypatch.setattr(nuts, "use_jit", implementation == "compiled")
    if uniform is not None:
        monkeypatch.setattr(nuts, "_uniforms", lambda rng: itertools.repeat(uniform))
        monkeypatch.setattr(nuts_jit, "_uniform_batch", lambda rng, n: np.full(n, uniform))


@pytest.mark.parametrize("implementation", _IMPLEMENTATIONS)
@pytest.mark.parametrize("kind", ["unit_e", "diag_e", "dense_e"])
def test_tree_stops_where_plain_nuts_does(kind, implementation, monkeypatch):
    # the fast trees (whitened momenta, U-turn dot products by linearity, the
    # recursion unrolled; in Python and compiled) against the plain one,
    # trajectory by trajectory: same number of leapfrog steps and same depth,
    # forwards and backwards
    S = np.array([[4.0, 1.8, 0.3], [1.8, 1.0, 0.2], [0.3, 0.2, 0.25]])
    m = _CorrGauss(S)
    inv = {"unit_e": None, "diag_e": np.array([3.0, 0.8, 0.3]), "dense_e": S * 0.9}[kind]
    metric = hamiltonian.make_metric(kind, 3, inv)
    Minv = np.eye(3) if inv is None else (np.diag(inv) if inv.ndim == 1 else inv)
    L = np.linalg.cholesky(Minv)              # p~ = L^T p for every metric kind
    seen = set()
    for seed in range(40):
        rs = np.random.default_rng(seed)
        q0 = rs.normal(size=3) * 1.5
        eps = rs.uniform(0.05, 0.9)
        p0 = np.linalg.solve(L.T, np.random.default_rng(seed).standard_normal(3))
        if kind != "dense_e":                 # the diagonal factor is sqrt(inv)
            p0 = np.random.default_rng(seed).standard_normal(3) / np.sqrt(np.diag(Minv))
        for forward in (True, False):
            _use(implementation, monkeypatch, 0.9 if forward else 0.1)
            z = Point(q0, None, *m.log_density_gradient(q0))
            _, info = nuts.transition(m, metric, z, eps, np.random.default_rng(seed))
            want = _reference_tree(m, Minv, q0, p0, eps, forward)
            assert (info.n_leapfrog, info.treedepth) == want, (seed, forward, eps)
            seen.add(want[1])
    assert len(seen) >= 3                     # trees of several depths were compared


def _summary(states):
    """The fast tree's U-turn summary of a run of states [(p, v), ...], plainly."""
    rho = sum(p for p, _ in states)
    (pb, vb), (pe, ve) = states[0], states[-1]
    return (rho, pb, vb, pe, ve, vb @ pb, ve @ pe, vb @ rho, ve @ rho)


class _Walled(_CorrGauss):
    """A correlated Gaussian whose density raises beyond one wall and is NaN beyond
    another: rejected proposals and divergences inside trajectories."""

    def log_density_gradient(self, q):
        if q[0] > 2.0:
            raise sl.DomainError("beyond the wall")     # a rejection (a ValueError is not)
        if q[1] < -1.5:
            return math.nan, np.zeros_like(q)
        return super().log_density_gradient(q)


@pytest.mark.skipif(not nuts_jit.available(), reason="numba not installed or "
                    "STANLITE_JIT=0")
@pytest.mark.parametrize("kind", ["unit_e", "diag_e", "dense_e"])
def test_compiled_tree_equals_python_tree(kind, monkeypatch):
    # with the same momentum and the same uniforms (a fixed sequence, restarted at
    # every transition; each tree takes them in its own batches), the compiled and
    # the Python tree make the same transitions, to rounding: same sample, tree,
    # acceptance statistic, energies, divergences and rejected steps
    S = np.array([[4.0, 1.8, 0.3], [1.8, 1.0, 0.2], [0.3, 0.2, 0.25]])
    inv = {"unit_e": None, "diag_e": np.array([3.0, 0.8, 0.3]), "dense_e": S * 0.9}[kind]
    m = _Walled(S)

    def chain(implementation, seed):
        seq = np.random.default_rng(seed + 1000).random(4000)
        taken = [0]

        def batch(rng, n):
            taken[0] += n
            return seq[taken[0] - n:taken[0]]

        monkeypatch.setattr(nuts, "use_jit", implementation == "compiled")
        monkeypatch.setattr(nuts, "_uniforms", lambda rng: iter(seq))
        monkeypatch.setattr(nuts_jit, "_uniform_batch", batch)
        metric = hamiltonian.make_metric(kind, 3, inv)
        rng = np.random.default_rng(seed)
        q = rng.normal(size=3) * 0.5
        z = Point(q, None, *m.log_density_gradient(q))
        out = []
        for t in range(40):
            taken[0] = 0
            z, info = nuts.transition(m, metric, z, 0.05 + 1.5 * seq[3000 + t], rng)
            out.append((z.q, z.lp, info))
        return out

    seen = {"divergent": 0, "failed": 0, "depths": set(), "why": set()}
    for seed in range(8):
        for (qa, lpa, a), (qb, lpb, b) in zip(chain("python", seed),
                                              chain("compiled", seed)):
            np.testing.assert_allclose(qb, qa, rtol=1e-10, atol=1e-12)
            assert lpb == pytest.approx(lpa, rel=1e-10, abs=1e-12)
            assert (b.n_leapfrog, b.treedepth, b.divergent, b.n_failed, b.rejected) == \
                (a.n_leapfrog, a.treedepth, a.divergent, a.n_failed, a.rejected)
            for name in ("accept_stat", "energy", "energy_error", "max_energy_error"):
                assert getattr(b, name) == pytest.approx(getattr(a, name), rel=1e-9,
                                                         abs=1e-10), name
            seen["divergent"] += a.divergent
            seen["failed"] += a.n_failed
            seen["why"].update(a.rejected or ())
            seen["depths"].add(a.treedepth)
    # the comparison covered divergences, rejected steps and several tree depths
    assert seen["divergent"] > 5 and seen["failed"] > 5 and len(seen["depths"]) >= 3
    # and both kinds of rejection, each with its reason
    assert seen["why"] == {"DomainError: beyond the wall", "non-finite log density"}


@pytest.mark.parametrize("implementation", _IMPLEMENTATIONS)
@pytest.mark.parametrize("lp0", [-np.inf, np.nan])
def test_start_with_infinite_energy_stays_put(lp0, implementation, monkeypatch):
    # no energy error is measurable from such a start; both trees return it with
    # no step taken (the compiled one used to read a failed step's empty gradient)
    _use(implementation, monkeypatch)
    m = _CorrGauss(np.eye(3))
    q = np.array([0.3, -0.2, 0.1])
    for kind in ("unit_e", "diag_e", "dense_e"):
        metric = hamiltonian.make_metric(kind, 3)
        z, info = nuts.transition(m, metric, Point(q, None, lp0, -q), 0.5,
                                  np.random.default_rng(1))
        np.testing.assert_array_equal(z.q, q)
        assert (info.n_leapfrog, info.treedepth, info.divergent) == (0, 0, False)
        assert info.accept_stat == 0.0 and info.energy == np.inf
        # and a finite start moves
        z, info = nuts.transition(m, metric, Point(q, None, *m.log_density_gradient(q)),
                                  0.5, np.random.default_rng(1))
        assert info.n_leapfrog > 0 and not np.array_equal(z.q, q)


@pytest.mark.parametrize("implementation", _IMPLEMENTATIONS)
@pytest.mark.parametrize("kind", ["diag_e", "dense_e"])
def test_metric_set_takes_effect_at_the_next_transition(kind, implementation, monkeypatch):
    # the trees cache the metric's factor and its step-size multiples; set() must
    # not leave a stale copy behind
    _use(implementation, monkeypatch)
    m = _CorrGauss(np.array([[1.0, 0.5], [0.5, 2.0]]))
    inv = np.array([0.5, 3.0]) if kind == "diag_e" else np.array([[0.5, 0.2], [0.2, 3.0]])
    q = np.array([0.4, -0.3])
    z = Point(q, None, *m.log_density_gradient(q))
    reused = hamiltonian.make_metric(kind, 2)
    nuts.transition(m, reused, z, 0.4, np.random.default_rng(2))   # fills the caches
    reused.set(inv)
    fresh = hamiltonian.make_metric(kind, 2, inv)
    a, ia = nuts.transition(m, reused, z, 0.4, np.random.default_rng(3))
    b, ib = nuts.transition(m, fresh, z, 0.4, np.random.default_rng(3))
    np.testing.assert_array_equal(a.q, b.q)
    assert ia.n_leapfrog == ib.n_leapfrog


@pytest.mark.skipif(not nuts_jit.available(), reason="numba not installed or "
                    "STANLITE_JIT=0")
def test_compiled_tree_names_a_gradient_of_the_wrong_length(monkeypatch):
    # compiled code does not check its indices: a protocol object whose gradient
    # has the wrong length gets a clear error instead of a read past its end
    class Short(_CorrGauss):
        def log_density_gradient(self, q):
            lp, g = super().log_density_gradient(q)
            return lp, g[:2]

    monkeypatch.setattr(nuts, "use_jit", True)
    m = Short(np.eye(3))
    metric = hamiltonian.make_metric("diag_e", 3)
    q = np.zeros(3)
    with pytest.raises(sl.ModelError, match=r"gradient of shape \(2,\).*expected \(3,\)"):
        nuts.transition(m, metric, Point(q, None, 0.0, np.zeros(3)), 0.5,
                        np.random.default_rng(0))
    with pytest.raises(sl.ModelError, match=r"gradient of shape \(2,\)"):
        nuts.transition(m, metric, Point(q, None, 0.0, np.zeros(2)), 0.5,
                        np.random.default_rng(0))


@pytest.mark.parametrize("whitened", [True, False])
def test_merge_checks_equal_the_three_plain_checks(whitened):
    # the merges compute the six U-turn dot products by linearity from what each
    # subtree carries; here against the plain checks on explicit sums, for runs of
    # 1, 2 and 4 states (whitened: v is p itself; else v = A(q) p with a metric
    # that changes along the trajectory, as SoftAbs does)
    rng = np.random.default_rng(7)
    d = 4

    def velocity(p):
        B = rng.normal(size=(d, d))
        return (B @ B.T + np.eye(d)) @ p

    def crit(va, vb, rho):
        return va @ rho > 0 and vb @ rho > 0

    outcomes = set()
    for trial in range(3000):
        na, nb = [(1, 1), (2, 2), (4, 4), (4, 2), (2, 4)][trial % 5]
        mu = rng.normal(size=d)
        # momenta that keep or reverse direction, so that every check sometimes fails
        ps = [mu * rng.choice([1.0, -0.3]) + 0.8 * rng.normal(size=d)
              for _ in range(na + nb)]
        states = [(p, p if whitened else velocity(p)) for p in ps]
        a, b = _summary(states[:na]), _summary(states[na:])
        rho_a, rho_b = a[0], b[0]
        (pab, vab), (pae, vae) = states[0], states[na - 1]
        (pbb, vbb), (pbe, vbe) = states[na], states[-1]
        want = (crit(vab, vbe, rho_a + rho_b) and crit(vab, vbb, rho_a + pbb)
                and crit(vae, vbe, rho_b + pae))
        merge = nuts._merge_pairs if (na, nb) == (2, 2) else nuts._merge
        got = merge(a, b)
        assert (got is not None) == want, (trial, na, nb)
        outcomes.add(want)
        if got is not None:
            ref = _summary(states)
            np.testing.assert_allclose(got[0], ref[0], rtol=1e-12, atol=1e-12)
            assert got[1] is pab and got[3] is pbe
            np.testing.assert_allclose(got[5:], ref[5:], rtol=1e-10, atol=1e-10)
    assert outcomes == {True, False}


# ---- exact posteriors through sl.Model ----------------------------------------------------
class IidGauss(sl.Model):
    mu = sl.param.vector(4)

    def log_prob(self, mu):
        return sl.normal_lpdf(mu, np.array([0.0, 1.0, -2.0, 3.0]),
                              np.array([1.0, 10.0, 0.1, 2.0]))


def test_iid_gaussian_moments():
    fit = IidGauss().sample(chains=2, draws=800, warmup=400, seed=11, progress=False,
                            parallel=False)
    d = fit["mu"]
    assert d.shape == (2, 800, 4)
    for j, (m, s) in enumerate(zip([0.0, 1.0, -2.0, 3.0], [1.0, 10.0, 0.1, 2.0])):
        assert_mean_within_mcse(d[..., j], m, s)
        assert_sd_within_mcse(d[..., j], s)


class CorrGauss(sl.Model):
    L = sl.data.matrix(3, 3)
    x = sl.param.vector(3)

    def log_prob(self, x):
        return sl.multi_normal_cholesky_lpdf(x, np.zeros(3), self.L)


def test_correlated_gaussian_dense_metric():
    S = np.array([[1.0, 0.9, 0.5], [0.9, 1.0, 0.6], [0.5, 0.6, 2.0]])
    fit = CorrGauss(L=np.linalg.cholesky(S)).sample(chains=2, draws=800, warmup=500,
                                                     seed=3, metric="dense_e",
                                                     progress=False, parallel=False,
                                                     save_warmup=True)
    d = fit["x"]
    for j in range(3):
        assert_mean_within_mcse(d[..., j], 0.0, np.sqrt(S[j, j]))
        assert_sd_within_mcse(d[..., j], np.sqrt(S[j, j]))
    # the adapted dense inverse metric is the last slow window's covariance,
    # regularised as Stan does: within 4 Monte Carlo standard errors of
    # n/(n+5) S + 1e-3 (5/(n+5)) I, each entry's error from the window's own draws
    # (the products of centred coordinates: their sd over the square root of
    # their effective sample size)
    assert fit.inv_metric.shape == (2, 3, 3)
    ends, _ = adaptation.window_ends(500)
    window = fit.warmup("x")[:, ends[-2] + 1:ends[-1] + 1]
    n = window.shape[1]
    expected = n / (n + 5) * S + 1e-3 * 5 / (n + 5) * np.eye(3)
    for c in range(2):
        x = window[c] - window[c].mean(0)
        for i in range(3):
            for j in range(i + 1):
                prod = x[:, i] * x[:, j]
                se = prod.std() / np.sqrt(_ess(prod))
                assert abs(fit.inv_metric[c, i, j] - expected[i, j]) < 4 * se, (c, i, j)


class NormalNormal(sl.Model):
    N = sl.data.int()
    y = sl.data.vector("N")
    mu = sl.param.real()

    def log_prob(self, mu):
        return sl.normal_lpdf(mu, 1.0, 2.0) + sl.normal_lpdf(self.y, mu, 1.5)


class BetaBinomial(sl.Model):
    n = sl.data.int()
    k = sl.data.int()
    p = sl.param.real(lower=0, upper=1)

    def log_prob(self, p):
        return sl.beta_lpdf(p, 2.0, 3.0) + sl.binomial_lpmf(self.k, self.n, p)


class Dirichlet(sl.Model):
    theta = sl.param.simplex(3)

    def log_prob(self, theta):
        return sl.dirichlet_lpdf(theta, np.array([2.0, 3.0, 5.0]))


def test_conjugate_posteriors():
    y = np.array([0.3, 2.1, 1.7, -0.4, 1.1])
    prec = 1 / 4 + len(y) / 1.5 ** 2
    m_post, s_post = (1.0 / 4 + y.sum() / 1.5 ** 2) / prec, prec ** -0.5
    fit = NormalNormal(N=5, y=y).sample(chains=2, draws=800, warmup=300, seed=5,
                                        progress=False, parallel=False)
    assert_mean_within_mcse(fit["mu"], m_post, s_post)
    assert_sd_within_mcse(fit["mu"], s_post)

    fit = BetaBinomial(n=20, k=7).sample(chains=2, draws=800, warmup=300, seed=6,
                                         progress=False, parallel=False)
    post = st.beta(2 + 7, 3 + 13)
    assert_mean_within_mcse(fit["p"], post.mean(), post.std())

    fit = Dirichlet().sample(chains=2, draws=800, warmup=300, seed=7, progress=False,
                             parallel=False)
    post = st.dirichlet([2.0, 3.0, 5.0])
    for j in range(3):
        assert_mean_within_mcse(fit["theta"][..., j], post.mean()[j],
                                np.sqrt(post.var()[j]))


def test_adaptation_recovers_variances_across_scales():
    scales = np.array([1e-2, 1e-1, 1.0, 1e1, 1e2])

    class Scales(sl.Model):
        x = sl.param.vector(5)

        def log_prob(self, x):
            return sl.normal_lpdf(x, 0.0, scales)
    fit = Scales().sample(chains=1, draws=200, warmup=1000, seed=2, progress=False)
    inv = fit.inv_metric[0]
    # the last window holds 500 draws; with ESS >= 150 per coordinate the relative sd
    # of a variance estimate is <= sqrt(2/150) = 0.115: allow 4 of those
    np.testing.assert_allclose(inv / scales ** 2, 1.0, atol=4 * np.sqrt(2 / 150))


# ---- reproducibility, executors -----------------------------------------------------------
def test_same_seed_same_draws_serial_and_parallel():
    m = NormalNormal(N=2, y=[0.5, 1.0])
    a = m.sample(chains=2, draws=50, warmup=50, seed=42, progress=False, parallel=False)
    b = m.sample(chains=2, draws=50, warmup=50, seed=42, progress=False, parallel=True)
    np.testing.assert_array_equal(a["mu"], b["mu"])
    np.testing.assert_array_equal(a["lp__"], b["lp__"])
    c = m.sample(chains=2, draws=50, warmup=50, seed=43, progress=False, parallel=False)
    assert not np.array_equal(a["mu"], c["mu"])


def test_dask_executor_bit_identical():
    distributed = pytest.importorskip("dask.distributed")
    m = NormalNormal(N=2, y=[0.5, 1.0])
    a = m.sample(chains=2, draws=40, warmup=40, seed=9, progress=False, parallel=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as cluster, \
                distributed.Client(cluster) as client:
            b = m.sample(chains=2, draws=40, warmup=40, seed=9, progress=False,
                         executor=client.get_executor())
    np.testing.assert_array_equal(a["mu"], b["mu"])


# ---- failures: rejection, initialisation --------------------------------------------------
class Positive(sl.Model):
    """An unconstrained parameter used as a scale: half the space is a domain error."""
    s = sl.param.real()

    def log_prob(self, s):
        return sl.normal_lpdf(1.0, 0.0, s) + sl.normal_lpdf(s, 1.0, 1.0)


def test_domain_errors_reject_and_chain_continues():
    fit = Positive().sample(chains=1, draws=300, warmup=200, seed=1, progress=False,
                            init={"s": 1.0})
    assert fit["s"].shape == (1, 300) and np.all(fit["s"] > 0)
    assert fit.chain_states[0].n_rejected > 0


def test_initialisation_failure_names_the_problem():
    class Never(sl.Model):
        a = sl.param.real()

        def log_prob(self, a):
            return sl.normal_lpdf(a, 0.0, -1.0)
    with pytest.raises(sl.ModelError, match=r"initialise.*sigma"):
        Never().sample(chains=1, draws=10, warmup=10, seed=1, progress=False)


@pytest.mark.parametrize("depth", [0, -1, 2.5, 31, True])
def test_bad_max_treedepth_is_named(depth):
    with pytest.raises(ValueError, match=r"max_treedepth must be an integer in 1\.\.30"):
        Positive().sample(chains=1, draws=5, warmup=5, seed=1, progress=False,
                          max_treedepth=depth)


# ---- interruption and resumption ------------------------------------------------------------
@pytest.mark.parametrize("limit", [3, 60, 250, 500])
def test_interrupt_keeps_draws_and_resume_is_bit_identical(limit):
    m = StopOnce(y=0.7)
    StopOnce.limit[0] = None
    full = m.sample(chains=1, draws=100, warmup=100, seed=8, progress=False)
    StopOnce.calls[0] = 0
    StopOnce.limit[0] = limit      # the k-th log density: in init, warmup, sampling
    with pytest.warns(RuntimeWarning, match="interrupted"):
        part = m.sample(chains=1, draws=100, warmup=100, seed=8, progress=False)
    assert part.interrupted and part.chain_states[0].iteration < 200
    StopOnce.limit[0] = None
    resumed = m.sample(resume_from=part, draws=100, progress=False)
    np.testing.assert_array_equal(resumed["mu"], full["mu"])
    np.testing.assert_array_equal(resumed["lp__"], full["lp__"])
    # extending a finished run continues the same chain
    longer = m.sample(resume_from=full, draws=150, progress=False)
    np.testing.assert_array_equal(longer["mu"][:, :100], full["mu"])
    assert longer["mu"].shape == (1, 150)


# ---- fit object --------------------------------------------------------------------------------
def test_fit_interface():
    from stanlite.models import get
    m = get("eight_schools_noncentered")
    fit = m.sample(chains=2, draws=200, warmup=200, seed=1, progress=False)
    assert fit["theta"].shape == (2, 200, 8) and fit["mu"].shape == (2, 200)
    s = fit.summary()
    assert list(s.columns) == ["mean", "sd", "5%", "50%", "95%", "mcse_mean", "ess_bulk",
                               "ess_tail", "r_hat"]
    assert "theta[1]" in s.index and "y_rep[8]" in s.index
    text = fit.diagnose()
    assert "divergen" in text and "R-hat" in text
    idata = fit.to_arviz()
    assert set(idata.posterior.data_vars) >= {"mu", "tau", "theta", "theta_trans"}
    ss = idata.sample_stats
    for k in ("lp", "acceptance_rate", "step_size", "tree_depth", "n_steps", "diverging",
              "energy", "energy_error", "max_energy_error", "reached_max_treedepth"):
        assert k in ss.data_vars, k
    assert fit.step_size.shape == (2,) and fit.inv_metric.shape == (2, m.dim)
    with pytest.raises(KeyError, match="known"):
        fit["nope"]
