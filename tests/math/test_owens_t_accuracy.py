"""owens_t: one plain-float implementation (vm/scalar.py _owens_t) shared by the tape
and the compiled interpreter (op OWENS_T).

Reference: mpmath at 40 digits, the defining integral with exp(-h^2/2) taken out (so
that mp.quad's absolute tolerance is a relative one: T(30, a) ~ 1e-198), split where
the Gaussian exp(-h^2 x^2 / 2) bends (k / h) and at the decades of x, and Owen's
identity T(h, a) = (Q(h) + Q(ah)) / 2 - Q(h) Q(ah) - T(ah, 1/a) for a > 1 (no
cancellation at 40 digits). It reproduces T(0, a) = atan(a) / (2 pi) and
T(h, 1) = Q(h) (1 - Q(h)) / 2 to 1e-39.

Tolerance: 2e-15 relative. The measured worst over 3,600 points (h in [0, 40],
|a| in [1e-8, 1e10], both signs) is 6.7e-16, median 8e-17: every term of the
quadrature is positive, exp(-h^2/2) is formed with h^2 exact, and erfc's argument
carries its rounding (see _owens_t); 2e-15 leaves a margin of 3 for libm's exp/erfc.
scipy's owens_t, the former implementation, is off by up to 2.5e-9 at these points
(at a ~ 1e-8), so it is checked only loosely (its own accuracy).
"""

import math

import mpmath as mp
import numpy as np
import pytest
import scipy.special as sps

import stanlite as sl
from stanlite.autodiff.vm import opcodes
from stanlite.autodiff.vm.scalar import _owens_t

TOL = 2e-15


def _t_integral(h, a):
    """T(h, a) for a >= 0 by its integral (mpmath; h, a mpf)."""
    if a == 0 or h > 1e4:
        return mp.mpf(0)
    pts = [mp.mpf(0)]
    if h > 0:
        pts += [mp.mpf(k) / h for k in (0.5, 1, 2, 4, 8, 16) if mp.mpf(k) / h < a]
    x = mp.mpf(1)
    while x < a:
        pts.append(x)
        x *= 10
    pts = sorted(set(pts + [a]))
    sc = max(h, 1)          # the integral is ~ 1/h: scaled to O(1)
    f = lambda x: sc * mp.exp(-h * h * x * x / 2) / (1 + x * x)
    return mp.exp(-h * h / 2) * mp.quad(f, pts) / (2 * mp.pi * sc)


def _q(x):
    return mp.mpf(0) if x > 1e4 else mp.erfc(x / mp.sqrt(2)) / 2


def _ref(h, a):
    with mp.workdps(40):
        h, a = abs(mp.mpf(h)), mp.mpf(a)
        s = -1 if a < 0 else 1
        a = abs(a)
        if a <= 1:
            return s * _t_integral(h, a)
        q1, q2 = _q(h), _q(a * h)
        return s * (q1 / 2 + q2 / 2 - q1 * q2 - _t_integral(a * h, 1 / a))


HS = [0.0, 1e-8, 0.1, 1.0, 3.0, 8.0, 8.4, 8.5, 8.6, 10.0, 20.0, 30.0, 37.0]
AS = [1e-8, 1e-6, 1e-3, 0.5, 0.999, 1.0, 1.001, 2.0, 10.0, 1e3, 1e6, 1e10]


def _points(n, seed):
    rng = np.random.default_rng(seed)
    h = 10.0 ** rng.uniform(-3.0, 1.55, n)          # up to ~35
    a = 10.0 ** rng.uniform(-8.0, 8.0, n)
    grid = np.array([(x, y) for x in HS for y in AS]).T
    return np.concatenate([grid[0], h]), np.concatenate([grid[1], a])


def test_owens_t_equals_mpmath_and_beats_scipy():
    hs, as_ = _points(400, 1)
    worst = worst_scipy = 0.0
    for k, (h, a) in enumerate(zip(hs, as_)):
        # both signs of h and a (T is even in h, odd in a)
        sh, sa = (1.0, 1.0) if k % 2 else (-1.0, -1.0)
        ref = _ref(h, a)
        err = float(abs(mp.mpf(_owens_t(sh * h, sa * a)) - sa * ref) / abs(ref))
        assert err <= TOL, (h, a, float(ref), _owens_t(sh * h, sa * a))
        worst = max(worst, err)
        worst_scipy = max(worst_scipy, float(abs(mp.mpf(sps.owens_t(h, a)) - ref)
                                             / abs(ref)))
    # scipy's owens_t (what the primitive was before) as a sanity check of the
    # reference: right to its own ~1e-9
    assert worst <= worst_scipy and worst_scipy < 1e-8
    # the primitive is that function, bit for bit (arrays, broadcasting and floats)
    v = sl.owens_t(hs, as_)
    assert np.array_equal(v, [_owens_t(x, y) for x, y in zip(hs, as_)])
    assert np.array_equal(sl.owens_t(hs[:5, None], as_[None, :7]),
                          [[_owens_t(x, y) for y in as_[:7]] for x in hs[:5]])
    assert sl.owens_t(float(hs[3]), float(as_[3])) == _owens_t(hs[3], as_[3])


def test_owens_t_closed_forms_and_edges():
    for a in (1e-300, 1e-8, 0.3, 1.0, 4.0, 1e10, math.inf):
        assert sl.owens_t(0.0, a) == pytest.approx(math.atan(a) / (2 * math.pi),
                                                   rel=1e-15)
    for h in (0.5, 2.0, 8.5, 12.0, 30.0):
        with mp.workdps(40):
            q = _q(mp.mpf(h))
            want = float(q * (1 - q) / 2)                  # T(h, 1)
            half_tail = float(q / 2)                       # T(h, inf)
        assert sl.owens_t(h, 1.0) == pytest.approx(want, rel=TOL)
        assert sl.owens_t(-h, math.inf) == pytest.approx(half_tail, rel=TOL)
        assert sl.owens_t(h, -math.inf) == pytest.approx(-half_tail, rel=TOL)
    assert sl.owens_t(0.0, math.inf) == 0.25
    assert sl.owens_t(3.0, 0.0) == 0.0 and sl.owens_t(math.inf, 2.0) == 0.0
    assert sl.owens_t(40.0, 0.5) == 0.0                     # underflows
    assert math.isnan(sl.owens_t(math.nan, 1.0)) and math.isnan(sl.owens_t(1.0, math.nan))
    rng = np.random.default_rng(2)
    h, a = rng.uniform(-9, 9, 50), rng.uniform(-5, 5, 50)
    np.testing.assert_array_equal(sl.owens_t(-h, a), sl.owens_t(h, a))
    np.testing.assert_array_equal(sl.owens_t(h, -a), -sl.owens_t(h, a))


def test_owens_t_either_side_of_its_branch_switches():
    # the quadrature (a <= 1 or h >= 8.5) and Owen's identity (a > 1, h < 8.5) meet at
    # a = 1 and at h = 8.5: both sides of each switch, an ulp apart, equal mpmath
    up, down = (lambda v: np.nextafter(v, math.inf)), (lambda v: np.nextafter(v, 0.0))
    pts = [(h, a) for h in (0.5, 3.0, 8.0) for a in (down(1.0), 1.0, up(1.0))]
    pts += [(h, a) for h in (down(8.5), 8.5) for a in (up(1.0), 1.5, 3.0, 100.0)]
    for h, a in pts:
        ref = _ref(h, a)
        assert float(abs(mp.mpf(sl.owens_t(h, a)) - ref) / ref) <= TOL, (h, a)


# (h, a) intervals: both branches, near the switch h = 8.5, large h, tiny and huge a
RANGES = [((-3.0, 3.0), (-3.0, 3.0)), ((7.5, 9.5), (0.5, 4.0)),
          ((10.0, 30.0), (1e-6, 1e-5)), ((0.05, 2.0), (1e5, 1e6))]


@pytest.mark.parametrize("hr, ar", RANGES)
def test_owens_t_gradient_equals_central_differences(hr, ar):
    # d/dh = -phi(h) erf(a h / sqrt 2) / 2, d/da = exp(-h^2 (1 + a^2) / 2) /
    # (2 pi (1 + a^2)); against central differences of log T (relative steps 1e-6,
    # truncation ~1e-12 relative: tolerance 1e-7), broadcast over a vector of h
    rng = np.random.default_rng(4)
    for _ in range(6):
        h = rng.uniform(*hr, 3)
        a = float(np.exp(rng.uniform(math.log(ar[0]), math.log(ar[1])))) if ar[0] > 0 \
            else rng.uniform(*ar)

        def f(z):
            return sl.sum(sl.log(sl.fabs(sl.owens_t(z[:3], z[3]))))

        z = np.concatenate([h, [a]])
        g = sl.grad(f)(z)
        fd = np.zeros(4)
        for i in range(4):
            e = np.zeros(4)
            e[i] = 1e-6 * abs(z[i])
            fd[i] = (float(f(z + e)) - float(f(z - e))) / (2 * e[i])
        np.testing.assert_allclose(g, fd, rtol=1e-7, atol=1e-7 * np.max(np.abs(fd)))


SCALES = {"moderate": (0.0, 1.0, 1.0), "near_the_switch": (7.8, 0.5, 1.0),
          "large_h_small_a": (29.0, 1.0, 1e-6), "small_h_large_a": (0.0, 0.3, 1e6)}


@pytest.mark.parametrize("case", sorted(SCALES))
def test_the_interpreter_equals_the_tape(vm, case):
    # log T (T ~ 1e-185 at h = 29..30 is compared on its own scale), vectors,
    # broadcast scalars and the scalar path, both branches of _owens_t
    shift, hs, as_ = SCALES[case]

    def f(z):
        h, a = shift + hs * z[:3], as_ * z[3:]
        return (sl.sum(sl.log(sl.owens_t(h, a)) * np.array([1.0, 0.5, 2.0]))
                + sl.sum(sl.log(sl.owens_t(h, a[1])))
                + sl.log(sl.owens_t(h[0], a[2])))

    rng = np.random.default_rng(9)
    zs = [rng.uniform(0.2, 3.0, 6) for _ in range(4)]
    vg = vm.check(f, zs[0], zs[1:])
    assert opcodes.OWENS_T in vm.opcodes(vg)
