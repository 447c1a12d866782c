"""hmm_marginal, hmm_hidden_state_prob, hmm_latent_rng: values and gradients against a
hand-written forward algorithm and against brute-force enumeration of the hidden
paths, central differences, Hessians, argument errors."""

import itertools

import numpy as np
import pytest

import stanlite as sl

from testkit import check_model_gradient


def _problem(K, N, seed=0):
    rng = np.random.default_rng(seed)
    lo = rng.normal(size=(K, N)) - 1.0
    G = rng.dirichlet(np.ones(K), size=K)
    r = rng.dirichlet(np.ones(K))
    return lo, G, r


def _hand(lo, G, r):
    """The forward algorithm as a model would write it: a loop of log_sum_exp."""
    K, N = sl.autodiff.var.shape_of(lo)
    a = sl.log(r) + lo[:, 0]
    for n in range(1, N):
        a = sl.stack([sl.log_sum_exp(a + sl.log(G[:, j])) for j in range(K)]) + lo[:, n]
    return sl.log_sum_exp(a)


def _brute(lo, G, r):
    """log p(y) and p(z_n = k | y) by summing over every hidden path."""
    K, N = lo.shape
    total = 0.0
    post = np.zeros((K, N))
    for z in itertools.product(range(K), repeat=N):
        p = r[z[0]] * np.exp(lo[z[0], 0])
        for n in range(1, N):
            p *= G[z[n - 1], z[n]] * np.exp(lo[z[n], n])
        total += p
        post[list(z), range(N)] += p
    return np.log(total), post / total


@pytest.mark.parametrize("K,N", [(1, 1), (2, 1), (3, 4), (2, 6)])
def test_value_against_enumeration(K, N):
    lo, G, r = _problem(K, N, seed=K * 10 + N)
    lp, post = _brute(lo, G, r)
    np.testing.assert_allclose(sl.hmm_marginal(lo, G, r), lp, rtol=1e-12)
    np.testing.assert_allclose(sl.hmm_hidden_state_prob(lo, G, r), post, rtol=1e-10,
                               atol=1e-14)


@pytest.mark.parametrize("K,N", [(2, 1), (3, 5), (4, 12)])
def test_value_and_gradient_against_hand_written_forward_algorithm(K, N):
    lo, G, r = _problem(K, N, seed=N)
    np.testing.assert_allclose(sl.hmm_marginal(lo, G, r), _hand(lo, G, r), rtol=1e-12)
    for i in range(3):
        got = sl.grad(sl.hmm_marginal, i)(lo, G, r)
        want = sl.grad(_hand, i)(lo, G, r)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_gradient_against_finite_differences():
    # Gamma's rows and rho are simplexes (checked): differences move them through
    # softmax, which keeps them on the simplex
    lo, G, r = _problem(3, 6, seed=3)
    fs = (lambda x: sl.hmm_marginal(x, G, r),
          lambda u: sl.hmm_marginal(lo, sl.stack([sl.softmax(u[i]) for i in range(3)]), r),
          lambda u: sl.hmm_marginal(lo, G, sl.softmax(u)))
    for f, x in zip(fs, (lo, np.log(G), np.log(r))):
        res = sl.check_grad(f, x)
        assert res.passed, res


def test_log_omega_gradient_is_the_posterior_marginals():
    lo, G, r = _problem(3, 5, seed=4)
    np.testing.assert_allclose(sl.grad(sl.hmm_marginal)(lo, G, r),
                               sl.hmm_hidden_state_prob(lo, G, r), rtol=1e-12)


def test_long_sequence_does_not_underflow():
    # 5000 observations of log density ~ -50: p(y) = e^-250000, far below 1e-308
    lo, G, r = _problem(3, 5000, seed=5)
    lo = lo - 50.0
    v = sl.hmm_marginal(lo, G, r)
    assert np.isfinite(v) and v < -2.4e5
    g = sl.grad(sl.hmm_marginal, 1)(lo, G, r)
    assert np.all(np.isfinite(g))
    # the first 40 steps alone: hand-written agrees
    np.testing.assert_allclose(sl.hmm_marginal(lo[:, :40], G, r), _hand(lo[:, :40], G, r),
                               rtol=1e-12)


@pytest.mark.parametrize("arg", [0, 1, 2])
def test_hessian_against_hand_written(arg):
    K, N = 3, 4
    lo, G, r = _problem(K, N, seed=6)
    x0 = (lo, G, r)[arg]

    def wrap(fn):
        def f(x):
            args = [lo, G, r]
            args[arg] = sl.reshape(x, x0.shape)
            return fn(*args)
        return f

    H = sl.hessian(wrap(sl.hmm_marginal))(x0.ravel())
    np.testing.assert_allclose(H, sl.hessian(wrap(_hand))(x0.ravel()), rtol=1e-9,
                               atol=1e-11)
    if arg == 0:        # differences of Gamma and rho would leave the simplex
        assert sl.check_hessian(wrap(sl.hmm_marginal), x0.ravel()).passed


def test_inside_a_model_gradient_and_vm_fallback():
    class HMM(sl.Model):
        N = sl.data.int(lower=1)
        y = sl.data.vector("N")
        mu = sl.param.ordered(2)
        p = sl.param.simplex(2)
        q = sl.param.simplex(2)

        def log_prob(self, mu, p, q):
            lo = sl.stack([-0.5 * (self.y - mu[0]) ** 2, -0.5 * (self.y - mu[1]) ** 2])
            G = sl.stack([p, q])
            return (sl.normal_lpdf(mu, 0, 5) + sl.hmm_marginal(lo, G, sl.stack([0.5, 0.5])))

    y = np.concatenate([np.full(5, -1.0), np.full(5, 2.0)])
    m = HMM(N=10, y=y)
    rng = np.random.default_rng(9)
    for _ in range(3):
        x = rng.normal(size=m.dim)
        check_model_gradient(m, x, rtol=1e-6, atol=1e-7)
    # no interpreter lowering: the model falls back to the Python replay, and says so
    r = m.compiled_gradient()
    assert not r.compiled and "hmm_marginal" in r.vm_skipped


def test_latent_rng_frequencies_match_posterior_marginals():
    lo, G, r = _problem(3, 4, seed=7)
    post = sl.hmm_hidden_state_prob(lo, G, r)
    rng = np.random.default_rng(8)
    draws = np.array([sl.hmm_latent_rng(lo, G, r, rng=rng) for _ in range(4000)])
    assert draws.dtype.kind == "i" and draws.shape == (4000, 4)
    assert draws.min() >= 1 and draws.max() <= 3
    freq = np.stack([(draws == k + 1).mean(axis=0) for k in range(3)])
    np.testing.assert_allclose(freq, post, atol=0.03)   # 4 sd of a 4000-draw proportion
    # the joint law too: pairs (z_1, z_2) against enumeration
    K, N = lo.shape
    joint = np.zeros((K, K))
    for z in itertools.product(range(K), repeat=N):
        p = r[z[0]] * np.exp(lo[z[0], 0])
        for n in range(1, N):
            p *= G[z[n - 1], z[n]] * np.exp(lo[z[n], n])
        joint[z[0], z[1]] += p
    joint /= joint.sum()
    emp = np.zeros((K, K))
    np.add.at(emp, (draws[:, 0] - 1, draws[:, 1] - 1), 1.0)
    np.testing.assert_allclose(emp / len(draws), joint, atol=0.03)


def test_argument_errors_name_the_argument():
    lo, G, r = _problem(2, 3)
    with pytest.raises(ValueError, match="hmm_marginal: Gamma must be a K x K"):
        sl.hmm_marginal(lo, G[:1], r)
    with pytest.raises(ValueError, match="hmm_marginal: rho must be a vector of size K"):
        sl.hmm_marginal(lo, G, np.ones(3) / 3)
    with pytest.raises(ValueError, match="log_omega must be a K x N matrix"):
        sl.hmm_marginal(lo[:, :0], G, r)
    bad = G.copy()
    bad[1] = [0.7, 0.7]
    with pytest.raises(sl.DomainError, match=r"Gamma\[1\] \(row 2\) must be a simplex"):
        sl.hmm_marginal(lo, bad, r)
    with pytest.raises(sl.DomainError, match="rho must be a simplex"):
        sl.hmm_marginal(lo, G, np.array([0.3, 0.3]))
    bad = G.copy()
    bad[0] = [1.2, -0.2]
    with pytest.raises(sl.DomainError, match=r"Gamma\[0, 1\] must be non-negative"):
        sl.hmm_marginal(lo, bad, r)
    with pytest.raises(sl.DomainError, match="log_omega"):
        sl.hmm_marginal(np.full((2, 3), np.nan), G, r)
    with pytest.raises(sl.DomainError, match="hmm_latent_rng: rho"):
        sl.hmm_latent_rng(lo, G, np.array([0.3, 0.3]))


def test_impossible_observations_give_minus_infinity():
    lo = np.array([[0.0, -np.inf], [-np.inf, 0.0]])
    G = np.array([[1.0, 0.0], [0.0, 1.0]])      # the state never changes
    assert sl.hmm_marginal(lo, G, np.array([0.5, 0.5])) == -np.inf


@pytest.mark.slow
def test_nuts_recovers_simulated_hmm_parameters():
    """``array[2] simplex[2]`` transitions and ordered emission means, as in Stan's
    HMM examples: the posterior covers the simulated values."""
    class HMM(sl.Model):
        N = sl.data.int(lower=1)
        y = sl.data.vector("N")
        mu = sl.param.ordered(2)
        Gamma = sl.param.simplex(2, array=2)

        def log_prob(self, mu, Gamma):
            lo = sl.stack([-0.5 * (self.y - mu[k]) ** 2 for k in range(2)])
            return (sl.normal_lpdf(mu, 0, 5)
                    + sl.hmm_marginal(lo, Gamma, np.array([0.5, 0.5])))

    rng = np.random.default_rng(1)
    G = np.array([[0.9, 0.1], [0.2, 0.8]])
    mu = np.array([-1.0, 2.0])
    z = [0]
    for _ in range(199):
        z.append(rng.choice(2, p=G[z[-1]]))
    y = rng.normal(mu[z], 1.0)
    fit = HMM(N=200, y=y).sample(chains=2, draws=500, warmup=500, seed=1)
    for name, truth in (("mu", mu), ("Gamma", G)):
        d = np.asarray(fit[name])
        d = d.reshape((-1,) + np.shape(truth))
        m, s = d.mean(axis=0), d.std(axis=0)
        assert np.all(np.abs(m - truth) < 4 * s + 0.02), (name, m, s)
