"""lbeta and lchoose: one plain-float implementation (vm/scalar.py _lbeta, _lchoose)
shared by the tape and the compiled interpreter, accurate where the lgamma sum cancels.

Reference: mpmath at 50 digits (lgamma(1e10) ~ 2.2e11 leaves 39 digits after the
point). Tolerance: |error| <= 1e-14 max(1, |lbeta|). Why: below 10 both the value is
the sum lgamma(x) + lgamma(y) - lgamma(x + y) of terms up to lgamma(20) ~ 39, whose
three roundings alone are up to ~1.5 * 2^-52 * 39 ~ 1.3e-14 absolute (measured worst
3.9e-15 over these points); elsewhere every term is formed without cancellation
(measured worst below 1e-15 relative). scipy's betaln misses this by 1e-9..1e-8.
"""

import math

import mpmath as mp
import numpy as np
import pytest

import stanlite as sl
from stanlite.autodiff.vm import opcodes
from stanlite.autodiff.vm.scalar import _lbeta, _lchoose

TOL = 1e-14


def _ref_lbeta(x, y):
    with mp.workdps(50):
        x, y = mp.mpf(x), mp.mpf(y)
        return mp.loggamma(x) + mp.loggamma(y) - mp.loggamma(x + y)


def _points(n, seed):
    rng = np.random.default_rng(seed)
    a = 10.0 ** rng.uniform(-8, 10, n)
    b = 10.0 ** rng.uniform(-8, 10, n)
    # around the switch at 10, and where lbeta ~ 0 with one argument large
    # (lgamma(x) = x log y: y = exp(lgamma(x) / x), up to 1e10)
    c = rng.uniform(0.0, 20.0, (2, n // 8))
    x = 10.0 ** rng.uniform(-1.5, 0.3, n // 8)
    y = np.array([math.exp(min(math.lgamma(v) / v, 23.0)) for v in x])
    return np.concatenate([a, c[0], x]), np.concatenate([b, c[1], y])


def test_lbeta_equals_mpmath_over_1e_8_to_1e10():
    a, b = _points(3000, 1)
    worst = 0.0
    for x, y in zip(a, b):
        ref = _ref_lbeta(x, y)
        err = float(abs(mp.mpf(_lbeta(x, y)) - ref) / max(1.0, abs(ref)))
        worst = max(worst, err)
        assert err <= TOL, (x, y, float(ref), _lbeta(x, y))
    # the primitive is that function, bit for bit (arrays and floats)
    v = sl.lbeta(a, b)
    assert np.array_equal(v, [_lbeta(x, y) for x, y in zip(a, b)])
    assert sl.lbeta(float(a[0]), float(b[0])) == _lbeta(a[0], b[0])


def test_lbeta_where_the_lgamma_sum_loses_six_digits():
    # lbeta ~ 0 with y ~ 1e10: lgamma's terms of ~2e11 cancel in the plain sum
    x = 0.1
    y = math.exp(math.lgamma(x) / x)
    ref = _ref_lbeta(x, y)
    assert abs(float(ref)) < 1e-3
    assert abs(float(mp.mpf(sl.lbeta(x, y)) - ref)) <= 1e-15


def test_lbeta_edges():
    assert sl.lbeta(0.0, 2.0) == math.inf
    assert math.isnan(sl.lbeta(-1.0, 2.0)) and math.isnan(sl.lbeta(math.nan, 2.0))
    assert sl.lbeta(2.0, math.inf) == -math.inf
    assert sl.lbeta(1.0, 1.0) == 0.0
    assert sl.lbeta(3.0, 7.0) == sl.lbeta(7.0, 3.0)


@pytest.mark.parametrize("lo, hi", [(1e-3, 1.0), (1.0, 30.0), (30.0, 1e4)])
def test_lbeta_gradient_equals_central_differences_and_digammas(lo, hi):
    rng = np.random.default_rng(5)
    for _ in range(40):
        x, y = 10.0 ** rng.uniform(math.log10(lo), math.log10(hi), 2)
        ga, gb = sl.grad(lambda z: sl.lbeta(z[0], z[1]))(np.array([x, y]))
        for i, (g, v) in enumerate(((ga, x), (gb, y))):
            h = 1e-6 * v
            up = [x + h, y] if i == 0 else [x, y + h]
            dn = [x - h, y] if i == 0 else [x, y - h]
            fd = (_lbeta(*up) - _lbeta(*dn)) / (2.0 * h)
            with mp.workdps(30):
                exact = float(mp.digamma(v) - mp.digamma(mp.mpf(x) + mp.mpf(y)))
            # the tape's derivative (digamma_diff: no cancellation of the digammas)
            assert g == pytest.approx(exact, rel=1e-13)
            assert fd == pytest.approx(exact, rel=1e-5, abs=1e-9)


def test_lchoose_equals_mpmath():
    rng = np.random.default_rng(2)
    n = 10.0 ** rng.uniform(-0.5, 10, 1500)
    k = n * rng.uniform(0.0, 1.0, n.size)
    for nv, kv in zip(n, k):
        with mp.workdps(50):
            N, K = mp.mpf(nv), mp.mpf(kv)
            ref = mp.loggamma(N + 1) - mp.loggamma(K + 1) - mp.loggamma(N - K + 1)
        err = float(abs(mp.mpf(_lchoose(nv, kv)) - ref) / max(1.0, abs(ref)))
        assert err <= TOL, (nv, kv)
    assert np.array_equal(sl.lchoose(n, k), [_lchoose(a, b) for a, b in zip(n, k)])
    assert sl.lchoose(10.0, 3.0) == pytest.approx(math.log(120.0), rel=1e-15)
    assert sl.lchoose(5.0, 0.0) == 0.0 and sl.lchoose(5.0, 5.0) == 0.0
    assert math.isnan(sl.lchoose(2.0, 4.0)) and math.isnan(sl.lchoose(-2.0, 0.5))


@pytest.mark.parametrize("scale", [1.0, 50.0, 1e6])
def test_the_interpreter_equals_the_tape_in_every_branch(vm, scale):
    # both < 10, one >= 10, both >= 10 (scale 1, 50, 1e6 times the small ones)
    def f(z):
        a, b = z[:3], z[3:]
        return (sl.sum(sl.lbeta(a, b * scale) * np.array([1.0, 0.5, 2.0]))
                + sl.lbeta(a[0] * scale, b[1]) + sl.sum(sl.lchoose(b * scale + 3.0, a)))

    rng = np.random.default_rng(7)
    zs = [rng.uniform(0.2, 3.0, 6) for _ in range(4)]
    vg = vm.check(f, zs[0], zs[1:])
    assert {opcodes.LBETA, opcodes.LCHOOSE} <= vm.opcodes(vg)


def test_digamma_diff_equals_mpmath_where_the_digammas_cancel():
    # psi(x) - psi(x + y), lbeta's and lchoose's derivatives: ~5e-16 relative measured
    # (the plain difference loses ~1e-15 / |y/x| relative); 4e-15 leaves a margin of 8
    from stanlite.autodiff.vm.scalar import _digamma_diff
    rng = np.random.default_rng(3)
    for _ in range(2000):
        x = 10.0 ** rng.uniform(-8, 10)
        y = 10.0 ** rng.uniform(-8, 10) if rng.uniform() < 0.7 else -x * rng.uniform(0, 0.99)
        with mp.workdps(50):
            ref = mp.digamma(mp.mpf(x)) - mp.digamma(mp.mpf(x) + mp.mpf(y))
            err = float(abs(mp.mpf(_digamma_diff(x, y)) - ref) / abs(ref))
        assert err <= 4e-15, (x, y)
    x, y = rng.uniform(0.5, 3.0, 5), rng.uniform(-0.4, 2.0, 5)
    assert np.array_equal(sl.math.special.digamma_diff(x, y),
                          [_digamma_diff(a, b) for a, b in zip(x, y)])


@pytest.mark.parametrize("scale", [1.0, 1e6])
def test_the_beta_densitys_op_uses_the_same_lbeta(vm, scale):
    # the interpreter's BETA op (distributions/bounded.py) and the tape's beta_lpdf
    # share _lbeta: equal to rounding also where the lgamma sum would cancel
    def f(z):
        return sl.beta_lpdf(np.array([0.3, 0.5, 0.8]), z[:3] * scale, z[3:])

    rng = np.random.default_rng(8)
    zs = [rng.uniform(0.5, 3.0, 6) for _ in range(4)]
    vg = vm.check(f, zs[0], zs[1:])
    assert opcodes.BETA in vm.opcodes(vg)


def test_the_beta_densitys_gradient_where_its_digammas_cancel(vm):
    # d/dalpha beta_lpdf = log(theta) - (psi(alpha) - psi(alpha + beta)): at alpha = 1e6,
    # beta = 1, theta = 0.999999 the two terms cancel to -5e-13; as digamma_diff (tape
    # and the interpreter's BETA op alike) it is right to ~1e-9 relative (the rounding
    # of log(theta) ~ 1e-6 and of digamma_diff, ~5e-22 absolute), where the digamma
    # difference (psi ~ 13.8, ~1e-15 absolute) was off by 2e-3 relative
    th = np.array([0.999999, 0.9999990000001])

    def f(z):
        return sl.beta_lpdf(th, z[0], z[1])

    z = np.array([1e6, 1.0])
    with mp.workdps(50):
        a, b = mp.mpf(z[0]), mp.mpf(z[1])
        dab = mp.digamma(a + b)
        want = [float(sum(mp.log(mp.mpf(t)) - mp.digamma(a) + dab for t in th)),
                float(sum(mp.log1p(-mp.mpf(t)) - mp.digamma(b) + dab for t in th))]
    tape = sl.grad(f)(z)
    vg = vm.compile(f, z)
    comp = vg(z)[1]
    assert opcodes.BETA in vm.opcodes(vg)
    for g in (tape, comp):
        assert g[0] == pytest.approx(want[0], rel=1e-8, abs=0.0)
        assert g[1] == pytest.approx(want[1], rel=1e-14)
