"""student_t, cauchy, double_exponential, logistic, gumbel, skew_normal, exp_mod_normal,
von_mises, uniform: lpdf/lcdf/lccdf against scipy.stats (or quadrature), gradients
w.r.t. every argument and nested AD (JVP, Hessian) against finite differences,
broadcasting, domain errors, tails, rng moments."""

import numpy as np
import pytest
import scipy.integrate as si
import scipy.special as sps
import scipy.stats as st

import stanlite as sl

KINDS = ("lpdf", "lcdf", "lccdf")
METHOD = {"lpdf": "logpdf", "lcdf": "logcdf", "lccdf": "logsf"}


def _vm_ref(kind):
    """von Mises references: scipy's density; the CDF by quadrature of the density
    from -pi (Stan's definition), the complement from y to pi."""
    def lpdf(y, mu, kappa):
        return st.vonmises.logpdf(y, kappa, loc=mu)

    def prob(lo_hi, mu, kappa):
        lo, hi = lo_hi
        return si.quad(lambda t: np.exp(kappa * (np.cos(t - mu) - 1.0)), lo, hi,
                       epsabs=0, epsrel=1e-13, limit=200)[0] / (2 * np.pi * sps.ive(0, kappa))

    def cdf(y, mu, kappa, upper):
        y, mu, kappa = np.broadcast_arrays(y, mu, kappa)
        out = np.empty(y.shape)
        for i in np.ndindex(y.shape):
            lim = (y[i], np.pi) if upper else (-np.pi, y[i])
            out[i] = np.log(prob(lim, mu[i], kappa[i]))
        return out
    if kind == "lpdf":
        return lpdf
    return lambda y, mu, kappa: cdf(y, mu, kappa, kind == "lccdf")


def _scipy(dist, order):
    """Reference log density from a scipy distribution; ``order`` maps our argument
    list (y, *params) to scipy's (shape..., loc, scale)."""
    def make(kind):
        return lambda y, *p: getattr(dist, METHOD[kind])(y, *order(*p))
    return make


# name -> (reference maker, argument sampler (rng, shapes) -> args, real arg count)
def _ls(rng, shapes, scale=(0.5, 2.0)):
    sy, sm_, ss = shapes
    return (rng.normal(size=sy) * 2, rng.normal(size=sm_), rng.uniform(*scale, ss))


SPECS = {
    "student_t": (_scipy(st.t, lambda nu, mu, s: (nu, mu, s)),
                  lambda rng, sh: (rng.normal(size=sh[0]) * 2, rng.uniform(0.7, 8.0, sh[1]),
                                   rng.normal(size=sh[1]), rng.uniform(0.5, 2.0, sh[2]))),
    "cauchy": (_scipy(st.cauchy, lambda mu, s: (mu, s)), _ls),
    "double_exponential": (_scipy(st.laplace, lambda mu, s: (mu, s)), _ls),
    "logistic": (_scipy(st.logistic, lambda mu, s: (mu, s)), _ls),
    "gumbel": (_scipy(st.gumbel_r, lambda mu, b: (mu, b)), _ls),
    "skew_normal": (_scipy(st.skewnorm, lambda xi, om, al: (al, xi, om)),
                    lambda rng, sh: _ls(rng, sh) + (rng.normal(size=sh[1]) * 2,)),
    "exp_mod_normal": (_scipy(st.exponnorm, lambda mu, s, lam: (1.0 / (lam * s), mu, s)),
                       lambda rng, sh: _ls(rng, sh) + (rng.uniform(0.3, 3.0, sh[1]),)),
    "von_mises": (_vm_ref,
                  lambda rng, sh: (rng.uniform(-2.8, 2.8, sh[0]), rng.normal(size=sh[1]),
                                   rng.uniform(0.3, 4.0, sh[2]))),
    "uniform": (_scipy(st.uniform, lambda a, b: (a, b - a)),
                lambda rng, sh: (rng.uniform(-1.5, 1.5, sh[0]), rng.uniform(-3.0, -2.0, sh[1]),
                                 rng.uniform(2.0, 3.0, sh[2]))),
}

SHAPES = [((5,), (), ()), ((4,), (4,), (4,)), ((3, 2), (2,), ()), ((), (3,), (3,))]


@pytest.mark.parametrize("shapes", SHAPES, ids=["vec-y", "all-vec", "2d-y", "scalar-y"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", list(SPECS))
def test_value_gradient_nested(check, rng, name, kind, shapes):
    ref, sample = SPECS[name]
    args = sample(rng, shapes)
    fn = getattr(sl, f"{name}_{kind}")
    diff = tuple(range(len(args)))
    if name == "skew_normal" and kind != "lpdf":
        # scipy's Owens T is piecewise (method switches): accurate values, but its
        # central differences are noisy at ~1e-6 relative in the tails; the exact
        # derivatives are checked against mpmath below
        check.value(fn, ref(kind), args)
        check.grad(fn, args, diff, rtol=5e-5, atol=1e-7)
        check.nested(fn, args, diff, rtol=5e-4, atol=1e-5)
        return
    rtol = 1e-9 if name == "von_mises" and kind != "lpdf" else 1e-10
    check.all(fn, ref(kind), args, diff, rtol=rtol)


@pytest.mark.parametrize("name", list(SPECS))
def test_one_node_per_density(name):
    ref, sample = SPECS[name]
    args = list(sample(np.random.default_rng(1), ((50,), (), ())))
    from stanlite.autodiff.tape import current_tape
    from stanlite.autodiff.var import Var
    for kind in KINDS:
        with sl.nested():
            t = current_tape()
            a = [Var(np.asarray(v, dtype=float)) for v in args]
            n0 = len(t.nodes)
            getattr(sl, f"{name}_{kind}")(*a)
            assert len(t.nodes) - n0 == 1


@pytest.mark.parametrize("name", list(SPECS))
def test_plain_value_is_float(name):
    ref, sample = SPECS[name]
    args = sample(np.random.default_rng(2), ((), (), ()))
    for kind in KINDS:
        assert type(getattr(sl, f"{name}_{kind}")(*args)) is float


# --------------------------------------------------------------------------------------
# domain errors: each bad argument is named (with its index for arrays)
# --------------------------------------------------------------------------------------
GOOD = {"student_t": (0.5, 3.0, 0.0, 1.0), "cauchy": (0.5, 0.0, 1.0),
        "double_exponential": (0.5, 0.0, 1.0), "logistic": (0.5, 0.0, 1.0),
        "gumbel": (0.5, 0.0, 1.0), "skew_normal": (0.5, 0.0, 1.0, 1.0),
        "exp_mod_normal": (0.5, 0.0, 1.0, 1.0), "von_mises": (0.5, 0.0, 1.0),
        "uniform": (0.5, 0.0, 1.0)}
BAD = {  # (position, bad value, name in the message)
    "student_t": [(0, np.nan, "y"), (1, 0.0, "nu"), (1, np.inf, "nu"), (2, np.inf, "mu"),
                  (3, -1.0, "sigma")],
    "cauchy": [(0, np.nan, "y"), (1, np.nan, "mu"), (2, 0.0, "sigma")],
    "double_exponential": [(0, np.inf, "y"), (1, np.inf, "mu"), (2, -2.0, "sigma")],
    "logistic": [(0, np.inf, "y"), (1, np.inf, "mu"), (2, np.inf, "sigma")],
    "gumbel": [(0, np.nan, "y"), (1, np.inf, "mu"), (2, 0.0, "beta")],
    "skew_normal": [(0, np.nan, "y"), (1, np.inf, "xi"), (2, 0.0, "omega"),
                    (3, np.nan, "alpha")],
    "exp_mod_normal": [(0, np.nan, "y"), (1, np.inf, "mu"), (2, 0.0, "sigma"),
                       (3, -1.0, "lambda")],
    "von_mises": [(0, np.inf, "y"), (1, np.nan, "mu"), (2, -1.0, "kappa"),
                  (2, np.inf, "kappa")],
    "uniform": [(0, np.nan, "y"), (1, -np.inf, "alpha"), (2, np.inf, "beta"),
                (2, -1.0, "beta"), (2, 0.0, "beta")],
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", list(SPECS))
def test_domain_errors(check, name, kind):
    fn = getattr(sl, f"{name}_{kind}")
    for i, bad, argname in BAD[name]:
        check.domain(fn, GOOD[name], i, bad, argname)
    # an array argument: the message gives the offending index
    i, bad, argname = BAD[name][-1]
    check.domain(fn, GOOD[name], i, np.array([GOOD[name][i], bad]), argname + r"\[1\]")


def test_von_mises_cdf_domain(check):
    for fn in (sl.von_mises_lcdf, sl.von_mises_lccdf):
        check.domain(fn, (0.5, 0.0, 1.0), 0, 3.5, "y")        # outside [-pi, pi]
        check.domain(fn, (0.5, 0.0, 1.0), 2, 0.0, "kappa")     # positive for the CDF
    assert np.isfinite(sl.von_mises_lpdf(0.5, 0.0, 0.0))      # kappa = 0: uniform
    assert np.isclose(sl.von_mises_lpdf(0.5, 0.0, 0.0), -np.log(2 * np.pi))


# --------------------------------------------------------------------------------------
# student-t CDF: derivatives w.r.t. nu (series) against mpmath, tails, third order
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("t,nu", [(-0.3, 3.0), (0.3, 3.0), (-2.0, 3.0), (2.5, 0.6),
                                  (-12.0, 1.5), (-1.0, 30.0), (-4.0, 30.0), (-7.0, 200.0),
                                  (1e-9, 2.0), (0.0, 5.0)])
def test_student_t_cdf_nu_derivatives_vs_mpmath(t, nu):
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 30

    def F(v):
        p = mp.betainc(v / 2, mp.mpf(1) / 2, 0, v / (v + mp.mpf(t) ** 2),
                       regularized=True) / 2
        return p if t < 0 else 1 - p
    f0 = F(mp.mpf(nu))
    d1 = mp.diff(F, mp.mpf(nu))
    d2 = mp.diff(F, mp.mpf(nu), 2)
    want_g = float(d1 / f0)
    want_h = float(d2 / f0 - (d1 / f0) ** 2)

    def f(v):
        return sl.student_t_lcdf(t, v[0], 0.0, 1.0)
    x = np.array([nu])
    g = sl.grad(f)(x)[0]
    h = sl.hessian(f)(x)[0, 0]
    np.testing.assert_allclose(g, want_g, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(h, want_h, rtol=1e-11, atol=1e-300)


def test_student_t_cdf_mixed_and_vector_nu(check, rng):
    # nu and y both vectors, points in both series regions and at y = mu
    y = np.array([-8.0, -1.5, -0.2, 0.0, 0.4, 2.0, 9.0])
    nu = np.array([0.8, 2.5, 6.0, 3.0, 40.0, 4.0, 1.2])
    for fn in (sl.student_t_lcdf, sl.student_t_lccdf):
        check.all(fn, lambda y, nu, mu, s: st.t.logcdf(y, nu, mu, s) if fn is sl.student_t_lcdf
                  else st.t.logsf(y, nu, mu, s), (y, nu, 0.0, 1.3), (0, 1, 2, 3), rtol=1e-9)


def test_student_t_third_derivative_in_nu_raises():
    def h(v):
        return sl.hessian(lambda w: sl.student_t_lcdf(-1.0, w[0], 0.0, 1.0))(v)[0, 0]
    with pytest.raises(sl.DifferentiationError):
        sl.grad(h)(np.array([3.0]))
    # third order in y alone is fine (closed forms)
    g3 = sl.grad(lambda v: sl.hessian(
        lambda w: sl.student_t_lcdf(w[0], 3.0, 0.0, 1.0))(v)[0, 0])(np.array([-1.0]))
    assert np.all(np.isfinite(g3))


def test_student_t_tails_and_large_nu():
    assert np.isclose(sl.student_t_lcdf(-1e6, 3.0, 0.0, 1.0), st.t.logcdf(-1e6, 3.0),
                      rtol=1e-12)
    assert np.isclose(sl.student_t_lccdf(1e6, 3.0, 0.0, 1.0), st.t.logsf(1e6, 3.0),
                      rtol=1e-12)
    # nu = 1 is the Cauchy distribution
    y = np.linspace(-5, 5, 7)
    assert np.isclose(sl.student_t_lcdf(y, 1.0, 0.3, 2.0), sl.cauchy_lcdf(y, 0.3, 2.0))
    # beyond the float range of F: the log CDF and its nu-derivative come from the
    # series in logs (mpmath: -6680.72079326727, d/dnu -66.27994269807708)
    assert sl.student_t_lcdf(-1e30, 100.0, 0.0, 1.0) == pytest.approx(-6680.72079326727,
                                                                       rel=1e-13)
    g = sl.grad(lambda v: sl.student_t_lcdf(-1e30, v, 0.0, 1.0))(100.0)
    assert g == pytest.approx(-66.27994269807708, rel=1e-12)
    assert sl.student_t_lccdf(50.0, 2000.0, 0.0, 1.0) == pytest.approx(-815.3562368493068,
                                                                        rel=1e-13)
    # a huge nu near the series switch: refused, never a wrong number
    with pytest.raises(sl.DifferentiationError, match="nu"):
        sl.grad(lambda v: sl.student_t_lcdf(-2.0, v, 0.0, 1.0))(1e6)
    # ... while the other arguments stay differentiable at that nu
    g = sl.grad(lambda m: sl.student_t_lcdf(-2.0, 1e6, m, 1.0))(0.0)
    assert g == pytest.approx(-np.exp(st.t.logpdf(-2.0, 1e6) - st.t.logcdf(-2.0, 1e6)))
    # a large nu: derivative still right (against differences of scipy's CDF)
    g = sl.grad(lambda v: sl.student_t_lcdf(-2.0, v, 0.0, 1.0))(500.0)
    h = 1e-2
    fd = (st.t.logcdf(-2.0, 500.0 + h) - st.t.logcdf(-2.0, 500.0 - h)) / (2 * h)
    assert np.isclose(g, fd, rtol=1e-5)


# --------------------------------------------------------------------------------------
# tails and special points of the other CDFs
# --------------------------------------------------------------------------------------
def test_tails():
    # cauchy: atan2 form keeps the left tail (1/2 + atan(z)/pi cancels)
    assert np.isclose(sl.cauchy_lcdf(-1e12, 0.0, 1.0), st.cauchy.logcdf(-1e12), rtol=1e-12)
    assert np.isclose(sl.cauchy_lccdf(1e12, 0.0, 1.0), st.cauchy.logsf(1e12), rtol=1e-12)
    # logistic / gumbel / laplace far tails stay finite and right
    assert np.isclose(sl.logistic_lcdf(-800.0, 0.0, 1.0), -800.0)
    assert np.isclose(sl.logistic_lccdf(800.0, 0.0, 1.0), -800.0)
    assert np.isclose(sl.gumbel_lccdf(40.0, 0.0, 1.0), st.gumbel_r.logsf(40.0), rtol=1e-12)
    assert np.isclose(sl.gumbel_lccdf(-40.0, 0.0, 1.0), st.gumbel_r.logsf(-40.0), atol=1e-300)
    assert np.isclose(sl.double_exponential_lcdf(-900.0, 0.0, 1.0), -900.0 - np.log(2))
    assert np.isclose(sl.double_exponential_lccdf(900.0, 0.0, 1.0), -900.0 - np.log(2))
    g = sl.grad(lambda y: sl.double_exponential_lcdf(y, 0.0, 1.0))(900.0)
    assert g == 0.0 or np.isclose(g, 0.0, atol=1e-300)
    # exp_mod_normal: both tails against scipy (which works in logs as well)
    for y in (-8.0, -3.0, 6.0, 40.0):
        assert np.isclose(sl.exp_mod_normal_lcdf(y, 0.0, 1.0, 1.5),
                          st.exponnorm.logcdf(y, 1 / 1.5), rtol=1e-8)
        assert np.isclose(sl.exp_mod_normal_lccdf(y, 0.0, 1.0, 1.5),
                          st.exponnorm.logsf(y, 1 / 1.5), rtol=1e-8)
    # skew normal: the complement is a CDF of the reflection, right for either skew
    for al in (-4.0, 4.0):
        for y in (-3.0, 3.0):
            assert np.isclose(sl.skew_normal_lccdf(y, 0.0, 1.0, al),
                              st.skewnorm.logsf(y, al), rtol=1e-9)


@pytest.mark.parametrize("z,a", [(0.3, 1.2), (-0.77, -2.5), (1.5, 3.0), (2.0, -1.7),
                                 (3.34, -1.31), (-2.5, 4.0), (-6.0, -2.0), (-40.0, 1.0),
                                 (-1.0, 50.0), (8.0, -3.0)])
def test_skew_normal_cdf_vs_mpmath(z, a):
    # F = Phi(z) - 2 T(z, a) with Owen's T(h, a) = int_0^a exp(-h^2 (1 + x^2)/2) /
    # (1 + x^2) dx / (2 pi) in 40 digits, or in the far lower tail the integral of
    # the density (the difference would need hundreds of digits);
    # the exact derivatives are d log F/dz = 2 phi(z) Phi(a z)/F and d log F/da =
    # -exp(-z^2 (1 + a^2)/2) / (pi (1 + a^2) F)
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 40

    def F(zz, aa):
        zz, aa = mp.mpf(zz), mp.mpf(aa)
        if zz < -3 or (zz < 0 and aa * zz < -3):
            # far lower tail: integrate the density itself, relative to its value at
            # zz, over t = zz - s (split at its decay scale 1/lam)
            c = 2 * mp.npdf(zz) * mp.ncdf(aa * zz)
            lam = -zz + aa * mp.npdf(aa * zz) / mp.ncdf(aa * zz)
            pts = [0] + [k / lam for k in (0.01, 0.1, 0.3, 1, 3, 10, 30)] + [mp.inf]
            return c * mp.quad(lambda s: 2 * mp.npdf(zz - s) * mp.ncdf(aa * (zz - s)) / c,
                               pts)
        T = mp.quad(lambda x: mp.exp(-zz * zz * (1 + x * x) / 2) / (1 + x * x), [0, aa])
        return mp.ncdf(zz) - T / mp.pi
    for fn, (zz, aa, sgn) in ((sl.skew_normal_lcdf, (z, a, 1)),
                              (sl.skew_normal_lccdf, (-z, -a, -1))):
        if zz > 0:          # F near 1: from the other tail (log1p)
            Q = F(-zz, -aa)
            P, want = 1 - Q, float(mp.log1p(-Q))
        else:
            P = F(zz, aa)
            want = float(mp.log(P))
        dz = 2 * mp.npdf(z) * mp.ncdf(mp.mpf(a) * z) / P
        da = -mp.exp(-mp.mpf(z) ** 2 * (1 + mp.mpf(a) ** 2) / 2) / (mp.pi * (1 + a * a) * P)
        assert fn(z, 0.0, 1.0, a) == pytest.approx(want, rel=1e-12, abs=1e-300)
        g = sl.grad(lambda v: fn(v[0], 0.0, 1.0, v[1]))(np.array([z, a]))
        np.testing.assert_allclose(g, [sgn * float(dz), sgn * float(da)], rtol=1e-11,
                                   atol=1e-300)


def test_double_exponential_kink():
    # Stan's convention: the derivative of |y - mu| at 0 is 0
    g = sl.grad(lambda v: sl.double_exponential_lpdf(v[0], v[1], 2.0))(np.array([1.0, 1.0]))
    assert np.allclose(g, 0.0)
    assert np.isclose(sl.double_exponential_lcdf(1.0, 1.0, 2.0), np.log(0.5))
    assert np.isclose(sl.double_exponential_lccdf(1.0, 1.0, 2.0), np.log(0.5))


def test_von_mises_cdf_special_points():
    # F(-pi) = 0, F(pi) = 1, periodicity in mu, kappa large (narrow) and small
    assert sl.von_mises_lcdf(np.pi, 0.7, 2.0) == pytest.approx(0.0, abs=1e-14)
    assert sl.von_mises_lccdf(-np.pi, 0.7, 2.0) == pytest.approx(0.0, abs=1e-14)
    a = sl.von_mises_lcdf(0.3, 0.7, 2.0)
    assert np.isclose(a, sl.von_mises_lcdf(0.3, 0.7 + 4 * np.pi, 2.0), rtol=1e-12)
    for kappa in (0.01, 30.0, 400.0):
        ref = _vm_ref("lcdf")(np.array([-0.2, 0.1]), 0.05, kappa)
        assert np.allclose(sl.von_mises_lcdf(np.array([-0.2, 0.1]), 0.05, kappa),
                           ref.sum(), rtol=1e-10)
    # derivative w.r.t. kappa at a large kappa against differences
    f = lambda k: sl.von_mises_lcdf(0.02, 0.0, k)  # noqa: E731
    g = sl.grad(f)(300.0)
    fd = (f(300.0 + 1e-3) - f(300.0 - 1e-3)) / 2e-3
    assert np.isclose(g, fd, rtol=1e-6)


@pytest.mark.parametrize("y,mu,kappa", [(-2.5, 0.0, 10.0), (-3.1, 0.0, 50.0), (-1.5, 0.2, 200.0),
                                        (-2.5, 0.3, 1e4), (2.9, -3.0, 40.0), (0.5, 2.0, 80.0)])
def test_von_mises_cdf_far_tails(check, y, mu, kappa):
    # the series alone is exact only to ~1e-16 absolute; tail probabilities far below
    # that come from quadrature in logs: against mpmath (integral split at the decay
    # scale near each end), gradients and Hessians against differences
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 30
    k = mp.mpf(kappa)

    def logmass(lo, hi):
        pts = {lo, hi}
        for e, sgn in ((lo, 1), (hi, -1)):
            lam = max(float(k * abs(mp.sin(e - mu))), 1.0)
            pts |= {e + sgn * t / lam for t in (0.01, 0.1, 0.3, 1, 3, 10, 30)
                    if lo < e + sgn * t / lam < hi}
        pts |= set(np.linspace(lo, hi, 9)[1:-1])
        ival = mp.quad(lambda t: mp.exp(k * (mp.cos(t - mu) - 1)), sorted(pts))
        return float(mp.log(ival) - mp.log(2 * mp.pi * mp.besseli(0, k) * mp.exp(-k)))
    lo = logmass(-np.pi, y)
    up = logmass(y, np.pi)
    assert sl.von_mises_lcdf(y, mu, kappa) == pytest.approx(lo, rel=1e-11)
    assert sl.von_mises_lccdf(y, mu, kappa) == pytest.approx(up, rel=1e-11)
    for fn in (sl.von_mises_lcdf, sl.von_mises_lccdf):
        check.grad(fn, (y, mu, kappa), (0, 1, 2), rtol=1e-6)
        if kappa < 1e3:     # beyond, differences of gradients ~1e4 are mostly rounding
            check.nested(fn, (y, mu, kappa), (0, 1, 2), rtol=1e-5)


def test_uniform_support():
    assert sl.uniform_lpdf(np.array([0.5, 2.5]), 0.0, 2.0) == -np.inf
    assert sl.uniform_lpdf(2.0, 0.0, 2.0) == -np.log(2.0)         # closed interval
    g = sl.grad(lambda v: sl.uniform_lpdf(v[0], v[1], v[2]))(np.array([0.5, 0.0, 2.0]))
    assert np.allclose(g, [0.0, 0.5, -0.5])
    g = sl.grad(lambda v: sl.uniform_lpdf(v[0], v[1], v[2]))(np.array([3.0, 0.0, 2.0]))
    assert np.allclose(g, 0.0)                                     # -inf: zero partials
    # CDFs outside the support: certain side 0 (flat), impossible side -inf
    assert sl.uniform_lcdf(np.array([3.0, 1.0]), 0.0, 2.0) == pytest.approx(np.log(0.5))
    assert sl.uniform_lcdf(-1.0, 0.0, 2.0) == -np.inf
    assert sl.uniform_lccdf(np.array([-3.0, 1.0]), 0.0, 2.0) == pytest.approx(np.log(0.5))
    assert sl.uniform_lccdf(2.5, 0.0, 2.0) == -np.inf
    g = sl.grad(lambda v: sl.uniform_lcdf(np.array([3.0, 1.0]), v[0], v[1]))(
        np.array([0.0, 2.0]))
    assert np.allclose(g, [-1.0 + 0.5, -0.5])       # only the element inside counts


# --------------------------------------------------------------------------------------
# random draws: moments (tolerances from the Monte Carlo standard error), shapes
# --------------------------------------------------------------------------------------
N = 40000
G_EULER = 0.5772156649015329


def _moments(d, mean, var, k=5.0):
    se_m = np.sqrt(var / d.size)
    assert abs(d.mean() - mean) < k * se_m, (d.mean(), mean)
    # variance: se from the fourth moment estimated from the draws
    m4 = np.mean((d - d.mean()) ** 4)
    se_v = np.sqrt(max(m4 - var ** 2, 0.0) / d.size)
    assert abs(d.var() - var) < k * se_v, (d.var(), var)


def test_rng_moments():
    _moments(sl.student_t_rng(6.0, np.full(N, 1.0), 2.0, rng=1), 1.0, 4.0 * 6 / 4)
    _moments(sl.double_exponential_rng(np.full(N, -1.0), 1.5, rng=2), -1.0, 2 * 1.5 ** 2)
    _moments(sl.logistic_rng(np.full(N, 0.5), 0.8, rng=3), 0.5, 0.8 ** 2 * np.pi ** 2 / 3)
    _moments(sl.gumbel_rng(np.full(N, 1.0), 2.0, rng=4), 1.0 + 2.0 * G_EULER,
             np.pi ** 2 * 4.0 / 6)
    al = 3.0
    de = al / np.sqrt(1 + al * al)
    _moments(sl.skew_normal_rng(np.full(N, 1.0), 2.0, al, rng=5),
             1.0 + 2.0 * de * np.sqrt(2 / np.pi), 4.0 * (1 - 2 * de * de / np.pi))
    _moments(sl.exp_mod_normal_rng(np.full(N, 1.0), 0.5, 2.0, rng=6), 1.5, 0.25 + 0.25)
    _moments(sl.uniform_rng(np.full(N, -1.0), 3.0, rng=7), 1.0, 16.0 / 12)
    # cauchy: no moments; quartiles mu -+ sigma
    d = sl.cauchy_rng(np.full(N, 2.0), 3.0, rng=8)
    se = np.sqrt(0.25 * 0.75 / N)
    assert abs(np.mean(d < 2.0 - 3.0) - 0.25) < 5 * se
    assert abs(np.mean(d < 2.0) - 0.5) < 5 * np.sqrt(0.25 / N)
    # von Mises: E cos(y - mu) = I1/I0(kappa), E sin(y - mu) = 0, Stan's range
    mu, kappa = 7.0, 2.5
    d = sl.von_mises_rng(np.full(N, mu), kappa, rng=9)
    c = np.cos(d - mu)
    assert abs(c.mean() - sps.ive(1, kappa) / sps.ive(0, kappa)) < 5 * c.std() / np.sqrt(N)
    assert abs(np.sin(d - mu).mean()) < 5 / np.sqrt(N)
    m = np.mod(mu, 2 * np.pi)
    assert np.all((d >= m - np.pi) & (d <= m + np.pi))


@pytest.mark.parametrize("name,params,cdf", [
    ("student_t", (3.0, 1.0, 2.0), lambda x: st.t.cdf(x, 3.0, 1.0, 2.0)),
    ("skew_normal", (1.0, 2.0, -3.0), lambda x: st.skewnorm.cdf(x, -3.0, 1.0, 2.0)),
    ("exp_mod_normal", (1.0, 0.5, 2.0), lambda x: st.exponnorm.cdf(x, 1.0, 1.0, 0.5)),
    ("gumbel", (1.0, 2.0), lambda x: st.gumbel_r.cdf(x, 1.0, 2.0)),
])
def test_rng_distribution(name, params, cdf):
    # Kolmogorov-Smirnov against the exact CDF (fixed seed)
    d = getattr(sl, f"{name}_rng")(*[np.full(4000, p) if i == 0 else p
                                     for i, p in enumerate(params)], rng=11)
    assert st.kstest(d, cdf).pvalue > 1e-3


@pytest.mark.parametrize("name,params,match", [
    ("logistic", (0.0, -1.0), "sigma"),
    ("uniform", (1.0, 0.5), "beta"),
    ("exp_mod_normal", (0.0, 1.0, 0.0), "lambda"),
    ("von_mises", (0.0, -1.0), "kappa"),
    ("student_t", (0.0, 0.0, 1.0), "nu"),
])
def test_rng_checks_parameters(name, params, match):
    with pytest.raises(sl.DomainError, match=match):
        getattr(sl, f"{name}_rng")(*params)


def test_rng_shapes():
    assert isinstance(sl.cauchy_rng(0.0, 1.0, rng=1), float)
    assert sl.student_t_rng(np.ones(3), 0.0, np.ones((2, 1)), rng=1).shape == (2, 3)
    assert sl.von_mises_rng(np.zeros(4), 0.0, rng=1).shape == (4,)
    a = sl.gumbel_rng(np.zeros(5), 1.0, rng=np.random.default_rng(3))
    b = sl.gumbel_rng(np.zeros(5), 1.0, rng=3)
    assert np.array_equal(a, b)
