"""Pointwise log densities (issue 21, point 4): ``density(*args, reduce=False)``.

For EVERY ``*_lpdf``/``*_lpmf``/``*_lcdf``/``*_lccdf`` exported by stanlite (the list
is read from the package, so a density added later is enumerated too, and fails
here until it has an argument generator below and a pointwise form): the shape (the
broadcast shape; one value per vector for a multivariate density, one per row for a
GLM), the sum equal to the summed value, gradients of ``sum(w * values)`` against
central differences, the same DomainError as the summed call for a bad argument;
per-element values against scipy where scipy has the family; nested differentiation,
models (log_prob, generated quantities, Hessians) and the summed path untouched.
"""

import inspect

import numpy as np
import pytest
import scipy.stats as st
from scipy.special import expit

import stanlite as sl

SUFFIXES = ("_lpdf", "_lpmf", "_lcdf", "_lccdf")
NAMES = sorted(n for n in dir(sl) if n.endswith(SUFFIXES) and callable(getattr(sl, n)))


def _family(name):
    return name.rsplit("_", 1)[0]


# --------------------------------------------------------------------------------------
# arguments: one generator per family -> (args, positions to differentiate or None for
# "every float argument"); batches of 4 mixing vector and scalar arguments
# --------------------------------------------------------------------------------------
def _pos(r, n=4):
    return r.uniform(0.6, 2.5, n)


def _unit(r, n=4):
    return r.uniform(0.15, 0.85, n)


def _simplex(r, *shape):
    x = r.uniform(0.5, 2.0, shape)
    return x / x.sum(axis=-1, keepdims=True)


def _spd(r, K=3):
    a = r.normal(size=(K, K))
    return a @ a.T + K * np.eye(K)


def _corr(r, K=3):
    s = _spd(r, K)
    d = np.sqrt(np.diag(s))
    return s / np.outer(d, d)


def _counts(r, n=4, lam=3.0):
    return r.poisson(lam, n)


def _ls(r):                                     # (y, loc, scale)
    return (r.normal(size=4), r.normal(size=4) * 0.5, 1.3), None


def _y_pos2(r):
    return (_pos(r), _pos(r)[0]), None


def _y_pos3(r):
    return (_pos(r), _pos(r), 1.4), None


def _binomial_like(r, third):
    N = np.array([5, 8, 3, 10])
    n = np.array([2, 6, 0, 4])
    return (n, N, third), (2,)


def _glm(r, kind):
    N, K = 6, 2
    x = r.normal(size=(N, K))
    beta = r.normal(size=K) * 0.5
    if kind == "normal":
        return (r.normal(size=N), x, 0.3, beta, 1.2), None
    y = r.integers(0, 2, N) if kind == "bernoulli" else r.poisson(2.0, N)
    return (y, x, 0.3, beta), (1, 2, 3)


ARGS = {
    "normal": _ls, "cauchy": _ls, "double_exponential": _ls, "logistic": _ls,
    "gumbel": _ls,
    "std_normal": lambda r: ((r.normal(size=4),), None),
    "student_t": lambda r: ((r.normal(size=4), _pos(r) + 1.0, 0.2, 1.3), None),
    "skew_normal": lambda r: ((r.normal(size=4), 0.1, 1.2, r.normal(size=4)), None),
    "exp_mod_normal": lambda r: ((r.normal(size=4), 0.2, 1.1, _pos(r)), None),
    "von_mises": lambda r: ((r.uniform(-2.5, 2.5, 4), 0.3, _pos(r)), None),
    "uniform": lambda r: ((r.uniform(-0.5, 1.5, 4), -1.0 - _unit(r), 2.0 + _unit(r)),
                          None),
    "lognormal": lambda r: ((_pos(r), r.normal(size=4) * 0.3, 0.9), None),
    "chi_square": _y_pos2, "inv_chi_square": _y_pos2, "exponential": _y_pos2,
    "scaled_inv_chi_square": _y_pos3, "gamma": _y_pos3, "inv_gamma": _y_pos3,
    "weibull": _y_pos3, "frechet": _y_pos3,
    "pareto": lambda r: ((0.8 + _pos(r), 0.7, _pos(r)), None),
    "pareto_type_2": lambda r: ((0.3 + _pos(r), 0.2, 1.5, _pos(r)), None),
    "beta": lambda r: ((_unit(r), _pos(r), 1.7), None),
    "beta_proportion": lambda r: ((_unit(r), _unit(r), 4.0), None),
    "bernoulli": lambda r: ((np.array([0, 1, 1, 0]), _unit(r)), (1,)),
    "bernoulli_lccdf": lambda r: ((np.array([0, -1, 0, 0]), _unit(r)), (1,)),
    "bernoulli_logit": lambda r: ((np.array([0, 1, 1, 0]), r.normal(size=4)), (1,)),
    "binomial": lambda r: _binomial_like(r, _unit(r)),
    "binomial_logit": lambda r: _binomial_like(r, r.normal(size=4)),
    "beta_binomial": lambda r: ((np.array([2, 6, 0, 4]), np.array([5, 8, 3, 10]),
                                 _pos(r), 1.6), (2, 3)),
    "poisson": lambda r: ((_counts(r), _pos(r)), (1,)),
    "poisson_log": lambda r: ((_counts(r), r.normal(size=4)), (1,)),
    "neg_binomial": lambda r: ((_counts(r), _pos(r), 0.8), (1, 2)),
    "neg_binomial_2": lambda r: ((_counts(r), _pos(r) * 2, 1.5), (1, 2)),
    "neg_binomial_2_log": lambda r: ((_counts(r), r.normal(size=4), 1.5), (1, 2)),
    "categorical": lambda r: ((np.array([1, 3, 2, 3]), _simplex(r, 3)), ()),
    "categorical_logit": lambda r: ((np.array([1, 3, 2, 3]), r.normal(size=3)), (1,)),
    "multinomial": lambda r: ((np.array([2, 0, 3]), _simplex(r, 3)), ()),
    "ordered_logistic": lambda r: ((np.array([1, 2, 3, 2]), r.normal(size=4),
                                    np.array([-0.7, 0.4])), (1, 2)),
    "hypergeometric": lambda r: ((np.array([2, 1, 3]), 5, 4, 6), ()),
    "multi_normal": lambda r: ((r.normal(size=(5, 3)), r.normal(size=3), _spd(r)), (0, 1)),
    "multi_normal_cholesky": lambda r: ((r.normal(size=(5, 3)), r.normal(size=(5, 3)),
                                         np.linalg.cholesky(_spd(r))), (0, 1)),
    "multi_student_t": lambda r: ((r.normal(size=(5, 3)), 4.5, r.normal(size=3), _spd(r)),
                                  (0, 1, 2)),
    "dirichlet": lambda r: ((_simplex(r, 4, 3), _pos(r, 3)), (1,)),
    "lkj_corr": lambda r: ((_corr(r), 1.7), (1,)),
    "lkj_corr_cholesky": lambda r: ((np.linalg.cholesky(_corr(r)), 1.7), (1,)),
    "wishart": lambda r: ((_spd(r), 5.5, _spd(r)), (1,)),
    "inv_wishart": lambda r: ((_spd(r), 5.5, _spd(r)), (1,)),
    "rayleigh": _y_pos2,
    "loglogistic": _y_pos3,
    "beta_neg_binomial": lambda r: ((_counts(r), 3.0, _pos(r) + 1.0, 1.5), (1, 2, 3)),
    "dirichlet_multinomial": lambda r: ((np.array([[2, 0, 3], [1, 1, 1]]), _pos(r, 3)),
                                        (1,)),
    "ordered_probit": lambda r: ((np.array([1, 2, 3, 2]), r.normal(size=4),
                                  np.array([-0.7, 0.4])), (1, 2)),
    "multi_normal_prec": lambda r: ((r.normal(size=(5, 3)), r.normal(size=3),
                                     np.linalg.inv(_spd(r))), (0, 1)),
    "multi_student_t_cholesky": lambda r: ((r.normal(size=(5, 3)), 4.5, r.normal(size=3),
                                            np.linalg.cholesky(_spd(r))), (0, 1, 2)),
    "lkj_cov": lambda r: ((_spd(r), r.normal(size=3) * 0.3, _pos(r, 3), 1.7), (1, 2, 3)),
    "wishart_cholesky": lambda r: ((np.linalg.cholesky(_spd(r)), 5.5,
                                    np.linalg.cholesky(_spd(r))), (1,)),
    "categorical_logit_glm": lambda r: ((np.array([1, 3, 2, 3, 1, 2]), r.normal(size=(6, 2)),
                                         r.normal(size=3), r.normal(size=(2, 3))),
                                        (1, 2, 3)),
    "neg_binomial_2_log_glm": lambda r: ((r.poisson(2.0, 6), r.normal(size=(6, 2)), 0.3,
                                          r.normal(size=2) * 0.5, 1.7), (1, 2, 3, 4)),
    "normal_id_glm": lambda r: _glm(r, "normal"),
    "bernoulli_logit_glm": lambda r: _glm(r, "bernoulli"),
    "poisson_log_glm": lambda r: _glm(r, "poisson"),
}

# result shape when it is not the broadcast shape of the arguments
SHAPES = {
    "multi_normal": lambda a: np.shape(a[0])[:-1],
    "multi_normal_cholesky": lambda a: np.shape(a[0])[:-1],
    "multi_student_t": lambda a: np.shape(a[0])[:-1],
    "dirichlet": lambda a: np.broadcast_shapes(np.shape(a[0])[:-1], np.shape(a[1])[:-1]),
    "lkj_corr": lambda a: (), "lkj_corr_cholesky": lambda a: (),
    "wishart": lambda a: (), "inv_wishart": lambda a: (),
    "categorical": lambda a: np.shape(a[0]), "categorical_logit": lambda a: np.shape(a[0]),
    "multinomial": lambda a: (),
    "multi_normal_prec": lambda a: np.shape(a[0])[:-1],
    "multi_student_t_cholesky": lambda a: np.shape(a[0])[:-1],
    "dirichlet_multinomial": lambda a: np.broadcast_shapes(np.shape(a[0])[:-1],
                                                           np.shape(a[1])[:-1]),
    "lkj_cov": lambda a: (), "wishart_cholesky": lambda a: (),
    "ordered_probit": lambda a: np.broadcast_shapes(np.shape(a[0]), np.shape(a[1]),
                                                    np.shape(a[2])[:-1]),
    "categorical_logit_glm": lambda a: np.shape(a[1])[:1],
    "neg_binomial_2_log_glm": lambda a: np.shape(a[1])[:1],
    "ordered_logistic": lambda a: np.broadcast_shapes(np.shape(a[0]), np.shape(a[1]),
                                                      np.shape(a[2])[:-1]),
    "normal_id_glm": lambda a: np.shape(a[1])[:1],
    "bernoulli_logit_glm": lambda a: np.shape(a[1])[:1],
    "poisson_log_glm": lambda a: np.shape(a[1])[:1],
}


def _args(name, seed=0):
    fam = _family(name)
    make = ARGS.get(name, ARGS.get(fam))       # (a density's own, else its family's)
    if make is None:
        pytest.fail(f"{name}: no argument generator for family {fam!r}: add one to ARGS "
                    "in tests/distributions/test_pointwise.py")
    return make(np.random.default_rng(seed))


def _expected_shape(name, args):
    f = SHAPES.get(_family(name))
    if f is not None:
        return tuple(f(args))
    return np.broadcast_shapes(*[np.shape(a) for a in args])


def _diff_positions(name, args, diff):
    if diff is not None:
        return tuple(diff)
    return tuple(i for i, a in enumerate(args) if np.asarray(a).dtype.kind == "f")


# --------------------------------------------------------------------------------------
# every density
# --------------------------------------------------------------------------------------
def test_every_density_is_enumerated():
    assert len(NAMES) >= 110
    for n in ("normal_lpdf", "poisson_lpmf", "gamma_lccdf", "multi_normal_lpdf",
              "normal_id_glm_lpdf", "beta_binomial_lcdf"):
        assert n in NAMES


@pytest.mark.parametrize("name", NAMES)
def test_reduce_is_a_keyword_only_parameter(name):
    p = inspect.signature(getattr(sl, name)).parameters["reduce"]
    assert p.kind is p.KEYWORD_ONLY and p.default is True


@pytest.mark.parametrize("name", NAMES)
def test_shape_and_sum(name):
    fn = getattr(sl, name)
    args, _ = _args(name)
    total = fn(*args)
    out = fn(*args, reduce=False)
    assert np.shape(out) == _expected_shape(name, args), name
    assert np.all(np.isfinite(out)), (name, out)
    np.testing.assert_allclose(np.sum(out), total, rtol=1e-12, atol=1e-12, err_msg=name)
    assert fn(*args, reduce=True) == total


@pytest.mark.parametrize("name", NAMES)
def test_each_element_is_the_density_of_that_element(name):
    # element i of the pointwise form == the summed density of the i-th elements
    fn = getattr(sl, name)
    args, _ = _args(name, seed=1)
    out = np.asarray(fn(*args, reduce=False))
    shape = _expected_shape(name, args)
    if _family(name) in SHAPES or out.ndim != 1:
        pytest.skip("batch structure of its own (covered by the sum and scipy checks)")
    b = [np.broadcast_to(np.asarray(a), shape) for a in args]
    for i in range(shape[0]):
        one = [x[i].item() if x.dtype.kind == "f" else int(x[i]) for x in b]
        np.testing.assert_allclose(out[i], fn(*one), rtol=1e-12, atol=1e-12,
                                   err_msg=f"{name} element {i}")


@pytest.mark.parametrize("name", NAMES)
def test_gradient_of_a_weighted_sum(name, check):
    fn = getattr(sl, name)
    args, diff = _args(name, seed=2)
    diff = _diff_positions(name, args, diff)
    if not diff:
        pytest.skip("no real argument")
    w = np.random.default_rng(3).uniform(0.5, 1.5, _expected_shape(name, args))

    def weighted(*a):
        return sl.sum(w * fn(*a, reduce=False))
    check.grad(weighted, args, diff, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", NAMES)
def test_bad_argument_raises_the_same_domain_error(name):
    fn = getattr(sl, name)
    args, _ = _args(name)
    seen = 0
    for i, a in enumerate(args):
        for bad in (np.nan, -1.0):
            b = list(args)
            b[i] = np.full(np.shape(a), bad) if np.ndim(a) else bad
            try:
                fn(*b)
            except sl.DomainError as e:
                want = str(e)
            except Exception:           # (a shape or type error: not a domain check)
                continue
            else:
                continue
            with pytest.raises(sl.DomainError) as info:
                fn(*b, reduce=False)
            assert str(info.value) == want
            seen += 1
    assert seen, f"{name}: no argument was checked"


@pytest.mark.parametrize("name", ["normal_lpdf", "poisson_lpmf", "multi_normal_lpdf",
                                  "normal_id_glm_lpdf"])
def test_reduce_must_be_a_bool(name):
    args, _ = _args(name)
    with pytest.raises(TypeError, match="reduce must be True or False"):
        getattr(sl, name)(*args, reduce="no")
    with pytest.raises(TypeError):
        getattr(sl, name)(*args, False)         # keyword-only: one positional too many


# --------------------------------------------------------------------------------------
# per element against scipy
# --------------------------------------------------------------------------------------
def _loc_scale(dist):
    return lambda y, mu, s: dist(loc=mu, scale=s), 0


SCIPY = {
    "normal": lambda y, mu, s: st.norm(mu, s),
    "std_normal": lambda y: st.norm(),
    "student_t": lambda y, nu, mu, s: st.t(nu, mu, s),
    "cauchy": lambda y, mu, s: st.cauchy(mu, s),
    "double_exponential": lambda y, mu, s: st.laplace(mu, s),
    "logistic": lambda y, mu, s: st.logistic(mu, s),
    "gumbel": lambda y, mu, b: st.gumbel_r(mu, b),
    "skew_normal": lambda y, xi, om, a: st.skewnorm(a, xi, om),
    "exp_mod_normal": lambda y, mu, s, lam: st.exponnorm(1.0 / (lam * s), mu, s),
    "uniform": lambda y, a, b: st.uniform(a, b - a),
    "lognormal": lambda y, mu, s: st.lognorm(s, scale=np.exp(mu)),
    "chi_square": lambda y, nu: st.chi2(nu),
    "inv_chi_square": lambda y, nu: st.invgamma(nu / 2, scale=0.5),
    "scaled_inv_chi_square": lambda y, nu, s: st.invgamma(nu / 2, scale=nu * s * s / 2),
    "exponential": lambda y, b: st.expon(scale=1.0 / b),
    "gamma": lambda y, a, b: st.gamma(a, scale=1.0 / b),
    "inv_gamma": lambda y, a, b: st.invgamma(a, scale=b),
    "weibull": lambda y, a, s: st.weibull_min(a, scale=s),
    "frechet": lambda y, a, s: st.invweibull(a, scale=s),
    "pareto": lambda y, m, a: st.pareto(a, scale=m),
    "pareto_type_2": lambda y, mu, lam, a: st.lomax(a, loc=mu, scale=lam),
    "beta": lambda y, a, b: st.beta(a, b),
    "beta_proportion": lambda y, mu, k: st.beta(mu * k, (1 - mu) * k),
    "bernoulli": lambda n, t: st.bernoulli(t),
    "bernoulli_logit": lambda n, a: st.bernoulli(expit(a)),
    "binomial": lambda n, N, t: st.binom(N, t),
    "binomial_logit": lambda n, N, a: st.binom(N, expit(a)),
    "beta_binomial": lambda n, N, a, b: st.betabinom(N, a, b),
    "poisson": lambda n, lam: st.poisson(lam),
    "poisson_log": lambda n, a: st.poisson(np.exp(a)),
    "neg_binomial": lambda n, a, b: st.nbinom(a, b / (1 + b)),
    "neg_binomial_2": lambda n, mu, phi: st.nbinom(phi, phi / (mu + phi)),
    "neg_binomial_2_log": lambda n, eta, phi: st.nbinom(phi, phi / (np.exp(eta) + phi)),
    "hypergeometric": lambda n, N, a, b: st.hypergeom(a + b, a, N),
    "rayleigh": lambda y, s: st.rayleigh(scale=s),
    "loglogistic": lambda y, a, b: st.fisk(b, scale=a),
}
if hasattr(st, "betanbinom"):
    SCIPY["beta_neg_binomial"] = lambda n, r, a, b: st.betanbinom(r, a, b)
_METHOD = {"lpdf": "logpdf", "lpmf": "logpmf", "lcdf": "logcdf", "lccdf": "logsf"}
SCIPY_NAMES = [n for n in NAMES if _family(n) in SCIPY]


@pytest.mark.parametrize("name", SCIPY_NAMES)
def test_against_scipy(name):
    fn = getattr(sl, name)
    args, _ = _args(name, seed=4)
    dist = SCIPY[_family(name)](*args)
    got = fn(*args, reduce=False)
    want = getattr(dist, _METHOD[name.rsplit("_", 1)[1]])(args[0])
    np.testing.assert_allclose(got, np.broadcast_to(want, np.shape(got)), rtol=1e-7,
                               atol=1e-9, err_msg=name)


def test_multivariate_against_scipy():
    r = np.random.default_rng(5)
    Y, mu, S = r.normal(size=(5, 3)), r.normal(size=3), _spd(r)
    np.testing.assert_allclose(sl.multi_normal_lpdf(Y, mu, S, reduce=False),
                               st.multivariate_normal(mu, S).logpdf(Y), rtol=1e-10)
    np.testing.assert_allclose(
        sl.multi_normal_cholesky_lpdf(Y, mu, np.linalg.cholesky(S), reduce=False),
        st.multivariate_normal(mu, S).logpdf(Y), rtol=1e-10)
    np.testing.assert_allclose(sl.multi_student_t_lpdf(Y, 4.5, mu, S, reduce=False),
                               st.multivariate_t(mu, S, df=4.5).logpdf(Y), rtol=1e-10)
    th, al = _simplex(r, 4, 3), _pos(r, 3)
    np.testing.assert_allclose(sl.dirichlet_lpdf(th, al, reduce=False),
                               [st.dirichlet(al).logpdf(t) for t in th], rtol=1e-10)


# --------------------------------------------------------------------------------------
# support ends: each element on its own
# --------------------------------------------------------------------------------------
def test_elements_outside_the_support_are_minus_inf_alone():
    y = np.array([0.5, 3.0, 1.5])
    out = sl.uniform_lpdf(y, 0.0, 2.0, reduce=False)
    np.testing.assert_allclose(out, [-np.log(2.0), -np.inf, -np.log(2.0)])
    assert sl.uniform_lpdf(y, 0.0, 2.0) == -np.inf
    g = sl.gamma_lcdf(np.array([0.0, 1.0, np.inf]), 2.0, 1.0, reduce=False)
    assert g[0] == -np.inf and g[2] == 0.0 and np.isfinite(g[1])
    g = sl.gamma_lccdf(np.array([0.0, 1.0, np.inf]), 2.0, 1.0, reduce=False)
    assert g[0] == 0.0 and g[2] == -np.inf
    p = sl.pareto_lpdf(np.array([0.5, 2.0]), 1.0, 2.0, reduce=False)
    assert p[0] == -np.inf and np.isfinite(p[1])
    b = sl.binomial_lcdf(np.array([-1, 2, 5]), 5, 0.3, reduce=False)
    assert b[0] == -np.inf and b[2] == 0.0
    np.testing.assert_allclose(b[1], st.binom(5, 0.3).logcdf(2))


def test_censored_likelihood_per_observation():
    # observed values by density, right-censored ones by the log CCDF, per observation
    y = np.array([0.4, 1.2, 2.0, 2.0])
    censored = np.array([False, False, True, True])
    ll = np.where(censored, sl.weibull_lccdf(y, 1.5, 1.1, reduce=False),
                  sl.weibull_lpdf(y, 1.5, 1.1, reduce=False))
    want = np.where(censored, st.weibull_min(1.5, scale=1.1).logsf(y),
                    st.weibull_min(1.5, scale=1.1).logpdf(y))
    np.testing.assert_allclose(ll, want, rtol=1e-12)


# --------------------------------------------------------------------------------------
# differentiation, models
# --------------------------------------------------------------------------------------
def _mixture(y, p):
    mu1, mu2, s = p[0], p[1], sl.exp(p[2])
    w = 0.3
    terms = sl.stack([np.log(w) + sl.normal_lpdf(y, mu1, s, reduce=False),
                      np.log(1 - w) + sl.normal_lpdf(y, mu2, s, reduce=False)])
    return sl.sum(sl.log_sum_exp(terms, axis=0))


def test_mixture_gradient_and_hessian():
    y = np.random.default_rng(6).normal(size=7)
    p0 = np.array([-0.5, 1.0, 0.2])

    def loop(p):
        tot = 0.0
        for yi in y:
            tot = tot + sl.log_sum_exp(sl.stack([
                np.log(0.3) + sl.normal_lpdf(yi, p[0], sl.exp(p[2])),
                np.log(0.7) + sl.normal_lpdf(yi, p[1], sl.exp(p[2]))]))
        return tot
    np.testing.assert_allclose(_mixture(y, p0), loop(p0), rtol=1e-12)
    sl.assert_grad(lambda p: _mixture(y, p), p0)
    sl.assert_hessian(lambda p: _mixture(y, p), p0)
    np.testing.assert_allclose(sl.hessian(lambda p: _mixture(y, p))(p0),
                               sl.hessian(loop)(p0), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", ["student_t_lcdf", "gamma_lpdf", "beta_lccdf",
                                  "neg_binomial_2_lpmf", "multi_normal_lpdf",
                                  "poisson_log_glm_lpmf", "ordered_logistic_lpmf",
                                  "neg_binomial_2_lccdf", "beta_binomial_lcdf",
                                  "double_exponential_lcdf", "dirichlet_lpdf"])
def test_nested_differentiation(name, check):
    fn = getattr(sl, name)
    args, diff = _args(name, seed=7)
    diff = _diff_positions(name, args, diff)
    w = np.random.default_rng(8).uniform(0.5, 1.5, _expected_shape(name, args))
    check.nested(lambda *a: sl.sum(w * fn(*a, reduce=False)), args, diff)


def test_matrix_argument_gradient():
    # Sigma = A A^T + 3 I (a free parameterisation of a covariance): per-vector values
    r = np.random.default_rng(10)
    Y, mu = r.normal(size=(4, 3)), r.normal(size=3)
    w = r.uniform(0.5, 1.5, 4)

    def f(a):
        A = sl.reshape(a, (3, 3))
        S = A @ sl.transpose(A) + 3.0 * np.eye(3)
        return (sl.sum(w * sl.multi_normal_lpdf(Y, mu, S, reduce=False))
                + sl.sum(w * sl.multi_student_t_lpdf(Y, 3.5, mu, S, reduce=False)))
    a0 = r.normal(size=9)
    sl.assert_grad(f, a0)
    sl.assert_hessian(f, a0, rtol=1e-5, atol=1e-6)


class _Mixture(sl.Model):
    N = sl.data.int()
    y = sl.data.vector("N")
    mu = sl.param.vector(2)
    sigma = sl.param.real(lower=0)

    def log_prob(self, mu, sigma):
        lp = sl.normal_lpdf(mu, 0.0, 2.0) + sl.exponential_lpdf(sigma, 1.0)
        terms = sl.stack([np.log(0.4) + sl.normal_lpdf(self.y, mu[0], sigma, reduce=False),
                          np.log(0.6) + sl.normal_lpdf(self.y, mu[1], sigma, reduce=False)])
        return lp + sl.sum(sl.log_sum_exp(terms, axis=0))

    def generated_quantities(self, rng, mu, sigma):
        return {"log_lik": sl.normal_lpdf(self.y, mu[0], sigma, reduce=False)}


def _mixture_model():
    y = np.random.default_rng(9).normal(size=6)
    return _Mixture(y=y, N=6), y


def test_inside_a_model_gradient_and_hessian():
    m, y = _mixture_model()
    x = np.array([-0.3, 0.8, 0.1])
    lp, g = m.log_density_gradient(x)

    def by_hand(x):
        mu, sigma = x[:2], sl.exp(x[2])
        lp = sl.normal_lpdf(mu, 0.0, 2.0) + sl.exponential_lpdf(sigma, 1.0) + x[2]
        for yi in y:
            lp = lp + sl.log_sum_exp(sl.stack([
                np.log(0.4) + sl.normal_lpdf(yi, mu[0], sigma),
                np.log(0.6) + sl.normal_lpdf(yi, mu[1], sigma)]))
        return lp
    np.testing.assert_allclose(lp, by_hand(x), rtol=1e-12)
    np.testing.assert_allclose(g, sl.grad(by_hand)(x), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(m.log_density_hessian(x)[2], sl.hessian(by_hand)(x),
                               rtol=1e-8, atol=1e-10)
    # a second point through the same (recorded, replayed) log density
    x2 = np.array([0.5, -1.0, -0.4])
    np.testing.assert_allclose(m.log_density_gradient(x2)[1], sl.grad(by_hand)(x2),
                               rtol=1e-10, atol=1e-12)


def test_generated_quantities_per_observation():
    m, y = _mixture_model()
    fit = m.sample(chains=1, draws=20, warmup=30, seed=1)
    ll = np.asarray(fit["log_lik"])
    mu = np.asarray(fit["mu"])
    sigma = np.asarray(fit["sigma"])
    assert ll.shape[-1] == 6
    flat_ll = ll.reshape(-1, 6)
    flat_mu, flat_s = mu.reshape(-1, 2), sigma.reshape(-1)
    np.testing.assert_allclose(flat_ll, st.norm.logpdf(y[None, :], flat_mu[:, :1],
                                                       flat_s[:, None]), rtol=1e-10)


def test_plain_values_give_plain_arrays():
    out = sl.poisson_lpmf(np.array([1, 2]), 1.5, reduce=False)
    assert type(out) is np.ndarray and out.dtype == np.float64
    assert type(sl.normal_lpdf(0.3, 0.0, 1.0, reduce=False)) is float


class _Censored(sl.Model):
    """Value branches of pointwise forms that move with the parameters: the side of
    the double exponential's CDF (guarded comparisons), the finite sums of the
    negative binomial's CDF (one primitive), a support end moving with a parameter."""
    N = sl.data.int()
    y = sl.data.vector("N")
    n = sl.data.int(array="N")
    mu = sl.param.real()
    phi = sl.param.real(lower=0)
    ymin = sl.param.real(lower=0, upper=1)

    def log_prob(self, mu, phi, ymin):
        lp = sl.normal_lpdf(mu, 0.0, 3.0) + sl.lognormal_lpdf(phi, 0.0, 1.0)
        lp = lp + sl.sum(sl.double_exponential_lcdf(self.y, mu, 1.3, reduce=False))
        lp = lp + sl.sum(sl.neg_binomial_2_lccdf(self.n, sl.exp(mu), phi, reduce=False))
        return lp + sl.sum(sl.pareto_lccdf(self.y + 2.0, ymin, phi, reduce=False))


def test_compiled_replays_follow_the_value_branches():
    y = np.array([-1.5, -0.2, 0.4, 1.1, 2.5])
    n = np.array([0, 1, 3, 2, 6])
    m = _Censored(N=5, y=y, n=n)

    def summed(x):
        mu, phi, ymin = x[0], sl.exp(x[1]), sl.inv_logit(x[2])
        lp = sl.normal_lpdf(mu, 0.0, 3.0) + sl.lognormal_lpdf(phi, 0.0, 1.0) + x[1]
        lp = lp + sl.log_inv_logit(x[2]) + sl.log1m_inv_logit(x[2])
        lp = lp + sl.double_exponential_lcdf(y, mu, 1.3)
        lp = lp + sl.neg_binomial_2_lccdf(n, sl.exp(mu), phi)
        return lp + sl.pareto_lccdf(y + 2.0, ymin, phi)
    # mu moves across the data: the sign pattern of (y - mu) changes between points
    for x in ([-2.0, 0.1, 0.3], [0.3, -0.2, -1.0], [3.0, 0.5, 2.0], [0.0, 0.1, 0.3]):
        x = np.array(x)
        lp, g = m.log_density_gradient(x)
        np.testing.assert_allclose(lp, summed(x), rtol=1e-11, err_msg=str(x))
        np.testing.assert_allclose(g, sl.grad(summed)(x), rtol=1e-8, atol=1e-10,
                                   err_msg=str(x))
    np.testing.assert_allclose(m.log_density_hessian(x)[2], sl.hessian(summed)(x),
                               rtol=1e-6, atol=1e-8)


def test_declaring_a_pointwise_form():
    from stanlite.distributions.fused import fused, pointwise

    def kernel(need, y, mu):
        d = y - mu
        return -0.5 * sl.sum(d * d), [-d if need[0] else None, d if need[1] else None]

    def check(y, mu):
        if not np.all(np.isfinite(mu)):
            raise sl.DomainError("toy_lpdf: mu must be finite")

    toy = fused("toy_lpdf", kernel, check)
    with pytest.raises(NotImplementedError, match="toy_lpdf: no elementwise form"):
        toy(np.zeros(2), 0.0, reduce=False)
    pointwise(toy)(lambda y, mu: -0.5 * (y - mu) ** 2)
    np.testing.assert_allclose(toy(np.array([1.0, 2.0]), 0.5, reduce=False), [-0.125, -1.125])
    # a term that leaves out an argument is broadcast to the full shape
    pointwise(toy)(lambda y, mu: -0.5 * mu * mu)
    assert np.shape(toy(np.zeros(3), 1.0, reduce=False)) == (3,)
    with pytest.raises(sl.DomainError, match="mu must be finite"):
        toy(np.zeros(3), np.nan, reduce=False)
    toy2 = fused("toy2_lpdf", kernel, check, pointwise=lambda y, mu: -0.5 * (y - mu) ** 2)
    assert toy2(2.0, 0.0, reduce=np.False_) == -2.0


def test_plain_arguments_as_the_summed_call_takes_them():
    # lists and ints where the summed call takes them
    np.testing.assert_allclose(sl.categorical_lpmf([1, 2], [0.3, 0.7], reduce=False),
                               np.log([0.3, 0.7]))
    np.testing.assert_allclose(np.sum(sl.bernoulli_lpmf([1, 0], [0.2, 0.4], reduce=False)),
                               sl.bernoulli_lpmf([1, 0], [0.2, 0.4]))
    np.testing.assert_allclose(sl.poisson_lpmf([1, 2], 3, reduce=False),
                               st.poisson(3).logpmf([1, 2]))


ENDS = {"positive": [0.0, 0.7, np.inf], "unit": [0.0, 0.4, 1.0]}
END_FAMILIES = {
    "lognormal": ("positive", (0.2, 0.9)), "chi_square": ("positive", (2.0,)),
    "inv_chi_square": ("positive", (3.0,)), "scaled_inv_chi_square": ("positive", (3.0, 1.1)),
    "exponential": ("positive", (1.3,)), "gamma": ("positive", (0.7, 1.2)),
    "inv_gamma": ("positive", (2.0, 1.2)), "weibull": ("positive", (0.8, 1.1)),
    "frechet": ("positive", (2.0, 1.1)), "pareto": ("positive", (0.5, 2.0)),
    "beta": ("unit", (0.7, 1.0)), "beta_proportion": ("unit", (0.4, 3.0)),
    "uniform": ("positive", (0.0, 2.0)),
}
END_NAMES = [f"{f}_{k}" for f in END_FAMILIES for k in ("lpdf", "lcdf", "lccdf")]


@pytest.mark.parametrize("name", END_NAMES)
def test_support_ends_element_by_element(name):
    # each element of the pointwise form at the ends of the support is the summed
    # density of that element alone (-inf, 0, a finite value or a DomainError alike)
    fn = getattr(sl, name)
    kind, params = END_FAMILIES[_family(name)]
    for y in ENDS[kind]:
        try:
            want = fn(y, *params)
        except sl.DomainError:
            with pytest.raises(sl.DomainError):
                fn(np.array([y, 0.5]), *params, reduce=False)
            continue
        got = fn(np.array([0.5, y]), *params, reduce=False)
        assert got[1] == want or np.isclose(got[1], want, rtol=1e-12), (name, y, got, want)
        assert got[0] == fn(0.5, *params)


@pytest.mark.parametrize("name", NAMES)
def test_lists_wherever_the_summed_form_takes_them(name):
    # a list given for one argument: the pointwise form takes it wherever the summed
    # form does (beta_lpdf(y, [2.0, 3.0], b, reduce=False) was a TypeError: its terms
    # do arithmetic on the argument), with the same values as the array
    fn = getattr(sl, name)
    args, _ = _args(name)
    want = fn(*args, reduce=False)
    for i, a in enumerate(args):
        if not isinstance(a, np.ndarray):
            continue
        b = list(args)
        b[i] = a.tolist()
        try:
            fn(*b)
        except TypeError:
            continue                # the summed form does not take it either
        np.testing.assert_allclose(fn(*b, reduce=False), want, rtol=1e-15,
                                   err_msg=f"{name} argument {i}")
