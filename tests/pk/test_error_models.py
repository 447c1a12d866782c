"""Residual error models of sl.pk (additive, proportional, combined, exponential): values
against scipy's densities, reduce=False, gradients against finite differences and a
Hessian by nested AD, the checks that name the prediction, and the *_rng simulators'
moments (fixed seeds)."""

import numpy as np
import pytest
from scipy import stats

import stanlite as sl
from stanlite.errors import DomainError

Y = np.array([0.4, 2.1, 7.9])
F = np.array([0.5, 2.5, 7.0])


def reference(kind, y, f, p):
    if kind == "additive":
        return stats.norm.logpdf(y, f, p[0])
    if kind == "proportional":
        return stats.norm.logpdf(y, f, p[0] * f)
    if kind == "combined":
        return stats.norm.logpdf(y, f, np.sqrt(p[0] ** 2 + (p[1] * f) ** 2))
    return stats.lognorm.logpdf(y, s=p[0], scale=f)


KINDS = {"additive": (sl.pk.additive_error_lpdf, [0.3]),
         "proportional": (sl.pk.proportional_error_lpdf, [0.15]),
         "combined": (sl.pk.combined_error_lpdf, [0.2, 0.1]),
         "exponential": (sl.pk.exponential_error_lpdf, [0.25])}


@pytest.mark.parametrize("kind", KINDS)
def test_values_against_scipy_and_reduce(kind):
    fn, p = KINDS[kind]
    ref = reference(kind, Y, F, p)
    np.testing.assert_allclose(fn(Y, F, *p, reduce=False), ref, rtol=1e-13)
    assert fn(Y, F, *p) == pytest.approx(ref.sum(), rel=1e-13)
    # scalars broadcast
    assert fn(Y[1], F[1], *p) == pytest.approx(ref[1], rel=1e-13)


@pytest.mark.parametrize("kind", KINDS)
def test_gradient_in_predictions_and_parameters(kind):
    fn, p = KINDS[kind]
    k = len(p)

    def lp(x):
        return fn(Y, x[:3], *[x[3 + j] for j in range(k)])

    def lp_ref(x):
        return reference(kind, Y, x[:3], x[3:]).sum()
    x0 = np.r_[F, p]
    g = sl.grad(lp)(x0)
    h = 1e-6
    fd = np.array([(lp_ref(x0 + h * e) - lp_ref(x0 - h * e)) / (2 * h)
                   for e in np.eye(len(x0))])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-7)
    H = sl.hessian(lp)(x0)
    fdH = np.array([(sl.grad(lp)(x0 + h * e) - sl.grad(lp)(x0 - h * e)) / (2 * h)
                    for e in np.eye(len(x0))])
    np.testing.assert_allclose(H, fdH, rtol=1e-5, atol=1e-5)


def test_combined_reduces_to_additive_and_proportional():
    a = sl.pk.combined_error_lpdf(Y, F, 0.3, 0.0, reduce=False)
    np.testing.assert_allclose(a, sl.pk.additive_error_lpdf(Y, F, 0.3, reduce=False),
                               rtol=1e-14)
    b = sl.pk.combined_error_lpdf(Y, F, 0.0, 0.15, reduce=False)
    np.testing.assert_allclose(b, sl.pk.proportional_error_lpdf(Y, F, 0.15, reduce=False),
                               rtol=1e-14)
    # the combined model keeps a pre-dose sample (prediction 0)
    assert np.isfinite(sl.pk.combined_error_lpdf(0.1, 0.0, 0.2, 0.1))


def test_checks_name_the_prediction():
    with pytest.raises(DomainError, match=r"proportional_error_lpdf: f must be > 0, got "
                       r"f\[1\] = 0"):
        sl.pk.proportional_error_lpdf(Y, np.array([1.0, 0.0, 2.0]), 0.1)
    with pytest.raises(DomainError, match=r"exponential_error_lpdf: y must be > 0, got "
                       r"y\[0\] = -0.1"):
        sl.pk.exponential_error_lpdf(np.array([-0.1, 1.0]), np.array([1.0, 1.0]), 0.1)
    # traced predictions are checked too
    with pytest.raises(DomainError, match="f must be > 0"):
        sl.grad(lambda f: sl.pk.exponential_error_lpdf(Y, f, 0.2))(np.array([1.0, -1, 1]))


@pytest.mark.parametrize("kind, args, sd", [
    ("additive", (0.3,), lambda f: 0.3 + 0 * f),
    ("proportional", (0.1,), lambda f: 0.1 * f),
    ("combined", (0.2, 0.1), lambda f: np.sqrt(0.04 + 0.01 * f * f)),
])
def test_rng_moments(kind, args, sd):
    f = np.array([1.0, 5.0])
    rng = getattr(sl.pk, f"{kind}_error_rng")
    draws = rng(np.broadcast_to(f, (40000, 2)), *args, rng=3)
    np.testing.assert_allclose(draws.mean(axis=0), f, atol=4 * sd(f).max() / 200)
    np.testing.assert_allclose(draws.std(axis=0), sd(f), rtol=0.02)
    d = sl.pk.exponential_error_rng(np.broadcast_to(f, (40000, 2)), 0.2, rng=4)
    np.testing.assert_allclose(np.log(d).std(axis=0), 0.2, rtol=0.02)
    np.testing.assert_allclose(np.median(d, axis=0), f, rtol=0.01)
