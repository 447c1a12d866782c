"""matrix_exp (Pade with scaling and squaring) and its Frechet-derivative rules:
values against scipy, mpmath and closed forms; gradients, JVPs and Hessians against
finite differences; the linear ODE identity; errors."""

import numpy as np
import pytest
import scipy.linalg as sla

import stanlite as sl
from stanlite.functor.matrix_exp import frechet

from testkit import check_retaped, fd_grad_trace_hessian


def norm1(A):
    return float(np.max(np.sum(np.abs(A), axis=0)))


# --------------------------------------------------------------------------------------
# values
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 3, 5, 10])
def test_against_scipy_over_every_pade_degree_and_squaring(n, rng):
    # norms from 1e-3 (degree 3) through theta_13 = 5.37 (degree 13) to 300 (squarings).
    # Both are approximations (scipy: Al-Mohy & Higham 2009) whose errors grow like
    # ||A|| eps; scipy's is the larger one at moderate norms (see the next test)
    for target in (1e-3, 0.1, 0.5, 1.5, 4.0, 20.0, 300.0):
        for _ in range(3):
            A = rng.standard_normal((n, n))
            A *= target / norm1(A)
            E, R = sl.matrix_exp(A), sla.expm(A)
            tol = 5e-14 * max(1.0, norm1(A))
            assert np.max(np.abs(E - R)) <= tol * np.max(np.abs(R)), (n, target)


def test_against_high_precision(rng):
    # 30-digit reference: relative error within a few eps times max(1, ||A||_1)
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 30
    for n in (2, 3, 5):
        for target in (1e-3, 0.5, 4.0, 20.0, 300.0):
            A = rng.standard_normal((n, n))
            A *= target / norm1(A)
            X = np.array(mp.expm(mp.matrix(A.tolist())).tolist(), dtype=float)
            err = np.max(np.abs(sl.matrix_exp(A) - X)) / np.max(np.abs(X))
            assert err <= 2e-15 * max(1.0, target), (n, target, err)


def test_overflow_is_silent_inf():
    # e^1000 is beyond the float range: the value says so, no warning (errors here)
    E = sl.matrix_exp(np.array([[1000.0, 1.0], [0.0, 999.0]]))
    assert not np.all(np.isfinite(E))


def test_closed_forms():
    # rotation generator: expm([[0, -w], [w, 0]]) = [[cos w, -sin w], [sin w, cos w]]
    for w in (0.3, np.pi / 2, 7.0, 40.0):
        c, s = np.cos(w), np.sin(w)
        np.testing.assert_allclose(sl.matrix_exp(np.array([[0.0, -w], [w, 0.0]])),
                                   [[c, -s], [s, c]], atol=1e-14 * max(1.0, w))
    # nilpotent: the series stops, expm(N) = I + N + N^2 / 2
    N = np.array([[0.0, 2.0, -3.0], [0.0, 0.0, 5.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(sl.matrix_exp(N), np.eye(3) + N + N @ N / 2, rtol=1e-14,
                               atol=1e-14)
    # diagonal: elementwise exp, across degrees and squarings
    d = np.array([-30.0, -1.0, 1e-3, 0.7, 12.0])
    np.testing.assert_allclose(sl.matrix_exp(np.diag(d)), np.diag(np.exp(d)), rtol=1e-14)
    # 1 x 1 and the empty matrix
    np.testing.assert_allclose(sl.matrix_exp(np.array([[2.0]])), [[np.exp(2.0)]], rtol=1e-15)
    assert sl.matrix_exp(np.zeros((0, 0))).shape == (0, 0)


def test_one_compartment_solution_closed_form():
    # x' = A x, A = [[-k1, 0], [k1, -k2]]: gut x1 = e^{-k1 t}, central
    # x2 = k1 / (k1 - k2) (e^{-k2 t} - e^{-k1 t}) for a unit dose in the gut
    k1, k2, t = 0.9, 0.25, 3.0

    def exact(p):
        return sl.stack([sl.exp(-p[0] * t),
                         p[0] / (p[0] - p[1]) * (sl.exp(-p[1] * t) - sl.exp(-p[0] * t))])

    def via_expm(p):
        A = sl.stack([sl.stack([-p[0], 0.0 * p[0]]), sl.stack([p[0], -p[1]])])
        return sl.matrix_exp_multiply(A * t, np.array([1.0, 0.0]))
    p = np.array([k1, k2])
    np.testing.assert_allclose(via_expm(p), exact(p), rtol=1e-14)
    np.testing.assert_allclose(sl.jacobian(via_expm)(p), sl.jacobian(exact)(p), rtol=1e-12)
    h_e = sl.hessian(lambda q: exact(q)[1])(p)
    np.testing.assert_allclose(sl.hessian(lambda q: via_expm(q)[1])(p), h_e, rtol=1e-10)


def test_stacks_and_non_finite_input(rng):
    As = rng.standard_normal((3, 4, 4)) * np.array([0.01, 1.0, 30.0])[:, None, None]
    E = sl.matrix_exp(As)
    for i in range(3):
        np.testing.assert_allclose(E[i], sl.matrix_exp(As[i]), rtol=1e-15)
    A = np.eye(2)
    A[0, 1] = np.nan
    assert np.all(np.isnan(sl.matrix_exp(A)))
    A[0, 1] = np.inf
    assert np.all(np.isnan(sl.matrix_exp(A)))


# --------------------------------------------------------------------------------------
# derivatives
# --------------------------------------------------------------------------------------
def test_frechet_derivative_against_scipy(rng):
    for target in (0.05, 1.0, 4.0, 30.0):
        A = rng.standard_normal((4, 4))
        A *= target / norm1(A)
        E = rng.standard_normal((4, 4))
        L = sla.expm_frechet(A, E, compute_expm=False)
        assert np.max(np.abs(frechet(A, E) - L)) <= 1e-12 * max(1, target) * np.abs(L).max()
    # a batch of directions against one at a time
    Es = rng.standard_normal((3, 4, 4))
    np.testing.assert_allclose(frechet(A, Es), np.stack([frechet(A, e) for e in Es]),
                               rtol=1e-13, atol=1e-13 * np.abs(frechet(A, Es)).max())


@pytest.mark.parametrize("target", [0.01, 0.8, 3.0, 25.0])
def test_gradient_jvp_hessian_against_differences(target, rng):
    # each norm exercises another Pade degree (and squarings at 25)
    n = 3
    A = rng.standard_normal((n, n))
    A *= target / norm1(A)
    W = rng.standard_normal((n, n))
    sl.assert_grad(sl.matrix_exp, A)
    sl.assert_jvp(sl.matrix_exp, A)

    def h(a):
        return sl.sum(W * sl.matrix_exp(sl.reshape(a, (n, n))))
    # derivatives of expm scale like e^{||A||}: compare relative to the Hessian's size
    H = sl.hessian(h)(A.ravel())
    sl.assert_hessian(h, A.ravel(), rtol=1e-6, atol=1e-8 * max(1.0, np.abs(H).max()))


def test_forward_and_reverse_agree(rng):
    A = rng.standard_normal((3, 3))
    Jr = sl.jacobian_reverse(sl.matrix_exp)(A)
    Jf = sl.jacobian_forward(sl.matrix_exp)(A)
    np.testing.assert_allclose(Jf, Jr, rtol=1e-12, atol=1e-14)


def test_gradient_on_stacks(rng):
    As = rng.standard_normal((2, 3, 3))
    sl.assert_grad(sl.matrix_exp, As)
    sl.assert_jvp(sl.matrix_exp, As)


def test_reverse_over_reverse(rng):
    A = rng.standard_normal((2, 2))

    def h(a):
        return sl.sum(sl.sin(sl.matrix_exp(sl.reshape(a, (2, 2)))))
    outer = sl.grad(lambda a: sl.sum(sl.grad(h)(a)))(A.ravel())
    np.testing.assert_allclose(outer, sl.hessian(h)(A.ravel()).sum(axis=0), rtol=1e-10)


def test_grad_trace_mat_hessian(rng):
    # third derivatives: reverse over the forward-over-reverse Hessian (Frechet
    # derivatives of Frechet derivatives) against differences of the Hessian
    a = rng.standard_normal(4)
    W = rng.standard_normal((4, 4))
    W = W + W.T

    def h(x):
        return sl.sum(sl.sin(sl.matrix_exp(sl.reshape(x, (2, 2)))))
    fd = fd_grad_trace_hessian(sl.hessian(h), a, W)
    np.testing.assert_allclose(sl.grad_trace_mat_hessian(h)(a, W), fd, rtol=1e-6,
                               atol=1e-7)


def test_linear_ode_identity(rng):
    # y(t) = expm(A t) y0 solves y' = A y: d/dt expm(At) y0 = A expm(At) y0, in both modes
    A = rng.standard_normal((4, 4))
    y0 = rng.standard_normal(4)
    t = 0.7

    def y(s):
        return sl.scale_matrix_exp_multiply(s, A, y0)
    rhs = A @ sla.expm(A * t) @ y0
    np.testing.assert_allclose(sl.jacobian(y)(t), rhs, rtol=1e-12)
    np.testing.assert_allclose(sl.jvp(y)(t, 1.0)[1], rhs, rtol=1e-12)
    # second derivative: A^2 expm(At) y0
    np.testing.assert_allclose(sl.hessian(lambda s: y(s[0])[2])(np.array([t])),
                               [[(A @ A @ sla.expm(A * t) @ y0)[2]]], rtol=1e-10)


def test_matrix_exp_multiply_derivatives(rng):
    A = rng.standard_normal((3, 3))
    B = rng.standard_normal((3, 2))
    np.testing.assert_allclose(sl.matrix_exp_multiply(A, B), sla.expm(A) @ B, rtol=1e-13)
    np.testing.assert_allclose(sl.scale_matrix_exp_multiply(0.4, A, B),
                               sla.expm(0.4 * A) @ B, rtol=1e-13)
    sl.assert_grad(sl.matrix_exp_multiply, (A, B))
    sl.assert_jvp(sl.matrix_exp_multiply, (A, B))
    sl.assert_grad(sl.scale_matrix_exp_multiply, (np.array(0.4), A, B))
    sl.assert_jvp(sl.scale_matrix_exp_multiply, (np.array(0.4), A, B))


# --------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------
def test_bad_shapes_name_the_function():
    with pytest.raises(ValueError, match=r"matrix_exp: A must be a square matrix"):
        sl.matrix_exp(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"matrix_exp: A must be a square matrix"):
        sl.matrix_exp(np.ones(3))
    with pytest.raises(ValueError, match=r"matrix_exp_multiply: B must have 2 rows"):
        sl.matrix_exp_multiply(np.eye(2), np.ones((3, 1)))
    with pytest.raises(ValueError, match=r"matrix_exp_multiply: A must be a square"):
        sl.matrix_exp_multiply(np.ones((2, 3)), np.ones((3, 1)))
    with pytest.raises(ValueError, match=r"scale_matrix_exp_multiply: t must be a scalar"):
        sl.scale_matrix_exp_multiply(np.ones(2), np.eye(2), np.ones((2, 1)))
    with pytest.raises(TypeError, match=r"expected an array of numbers"):
        sl.matrix_exp("A")


def test_retaped_gradient_matches_eager(rng):
    def h(a):
        return sl.sum(sl.sin(sl.matrix_exp(sl.reshape(a, (3, 3)))))
    check_retaped(h, np.zeros(9), [rng.standard_normal(9) for _ in range(3)])
