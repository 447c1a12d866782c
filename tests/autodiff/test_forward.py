"""Forward mode and nested AD: duals, vector mode, Hessians, third-order contractions."""

import numpy as np
import pytest

import stanlite as sl
from stanlite.errors import DifferentiationError


# --- perturbation confusion (Siskind & Pearlmutter; the AD survey's examples) ----------
@pytest.mark.parametrize("outer", ["grad", "jvp"])
@pytest.mark.parametrize("inner", ["grad", "jvp"])
def test_classic_perturbation_confusion_every_mode_pair(outer, inner):
    # d/dx [x * d/dy (x + y)|_{y=2}] = 1 for every x; the confused answer is 2
    def d(f, x0):
        if inner == "grad":
            return sl.grad(f)(x0)
        return sl.jvp(f)(x0, 1.0)[1]

    def f(x):
        return x * d(lambda y: x + y, 2.0)

    for x0 in (0.0, 1.5, -3.0):
        got = sl.grad(f)(x0) if outer == "grad" else sl.jvp(f)(x0, 1.0)[1]
        assert got == 1.0


@pytest.mark.parametrize("outer", ["grad", "jvp"])
@pytest.mark.parametrize("inner", ["grad", "jvp"])
def test_inner_derivative_closing_over_the_outer_variable(outer, inner):
    # f(x) = d/dy (x y^2)|_{y=3} = 6x, f'(x) = 6;  g(x) = d/dy (x y) = x, g' = 1
    def d(h, y0):
        return sl.grad(h)(y0) if inner == "grad" else sl.jvp(h)(y0, 1.0)[1]

    def D(h, x0):
        return sl.grad(h)(x0) if outer == "grad" else sl.jvp(h)(x0, 1.0)[1]

    assert D(lambda x: d(lambda y: x * y * y, 3.0), 1.7) == 6.0
    assert D(lambda x: d(lambda y: x * y, 5.0), 2.0) == 1.0


def test_duals_of_duals_give_second_derivatives():
    # forward-over-forward: d2/dx2 x^4 = 12 x^2
    def d2(f, x0):
        return sl.jvp(lambda x: sl.jvp(f)(x, 1.0)[1])(x0, 1.0)[1]

    assert d2(lambda x: x ** 4, 2.0) == 48.0
    assert d2(lambda x: x * x * x * x, -1.0) == 12.0


def test_jvp_matches_reverse_jacobian(rng):
    A = rng.standard_normal((3, 4))
    f = lambda x: A @ (x * x) + x[:3] * x[1]  # noqa: E731
    x, v = rng.standard_normal(4), rng.standard_normal(4)
    y, t = sl.jvp(f)(x, v)
    np.testing.assert_allclose(t, sl.jacobian_reverse(f)(x) @ v, rtol=1e-12)
    np.testing.assert_allclose(y, f(x))
    sl.assert_jvp(f, x)


def test_vector_mode_equals_single_directions(rng):
    from stanlite.autodiff.functional import _forward
    f = lambda x: x * x[0] + x / (1.0 + x * x)  # noqa: E731
    x = rng.standard_normal(3)
    V = rng.standard_normal((5, 3))
    _, T = _forward(f, x, V, (5,))
    for k in range(5):
        np.testing.assert_allclose(T[k], sl.jvp(f)(x, V[k])[1], rtol=1e-14)


def test_jacobian_chooses_forward_for_tall_outputs(rng):
    A = rng.standard_normal((6, 2))
    f = lambda x: A @ (x * x)  # noqa: E731
    x = rng.standard_normal(2)
    J = sl.jacobian(f)(x)
    np.testing.assert_allclose(J, A * 2 * x, rtol=1e-13)
    np.testing.assert_allclose(sl.jacobian_forward(f)(x), sl.jacobian_reverse(f)(x))


# --- Hessians -------------------------------------------------------------------------
def test_hessian_of_quadratic_form_is_exact(rng):
    B = rng.standard_normal((5, 5))
    A = B @ B.T
    x = rng.standard_normal(5)
    H = sl.hessian(lambda x: 0.5 * x @ A @ x + sl.sum(x) * 3.0)(x)
    np.testing.assert_allclose(H, A, rtol=1e-13, atol=1e-13)


def test_hessian_of_normal_log_density_closed_form(rng):
    y = rng.standard_normal(20) + 1.0

    def lp(th):                       # mu, log sigma
        mu, ls = th[0], th[1]
        return -y.size * ls - 0.5 * sl.sum(((y - mu) / sl.exp(ls)) ** 2)

    th = np.array([0.4, 0.2])
    s2 = np.exp(2 * th[1])
    r = y - th[0]
    H_true = np.array([[-y.size / s2, -2 * r.sum() / s2],
                       [-2 * r.sum() / s2, -2 * (r @ r) / s2]])
    np.testing.assert_allclose(sl.hessian(lp)(th), H_true, rtol=1e-12)
    sl.assert_hessian(lp, th)


def test_hessian_of_logistic_regression_closed_form(rng):
    X = rng.standard_normal((30, 4))
    yv = (rng.random(30) < 0.5).astype(float)
    f = lambda b: sl.sum(yv * (X @ b) - sl.log1p_exp(X @ b))  # noqa: E731
    b = rng.standard_normal(4) * 0.3
    p = 1 / (1 + np.exp(-X @ b))
    np.testing.assert_allclose(sl.hessian(f)(b), -(X.T * (p * (1 - p))) @ X, rtol=1e-11)


def test_hessian_is_symmetric_and_hvp_consistent(rng):
    f = lambda x: sl.sum(sl.sin(x) * x[0] * x[1]) + sl.sum(x ** 4) / 12  # noqa: E731
    x = rng.standard_normal(4)
    H = sl.hessian(f)(x)
    np.testing.assert_allclose(H, H.T, atol=1e-13)
    for _ in range(3):
        v = rng.standard_normal(4)
        np.testing.assert_allclose(sl.hvp(f)(x, v), H @ v, rtol=1e-12, atol=1e-13)
    # forward-over-reverse agrees with reverse-over-reverse
    np.testing.assert_allclose(H, sl.jacobian_reverse(sl.grad(f))(x), rtol=1e-12, atol=1e-13)
    sl.assert_hessian(f, x)


def test_hessian_of_log_determinant_closed_form(rng):
    n = 3
    B = rng.standard_normal((n, n)) + 3 * np.eye(n)
    f = lambda a: sl.log_determinant(sl.reshape(a, (n, n)))  # noqa: E731
    Ainv = np.linalg.inv(B)
    H = sl.hessian(f)(B.ravel())
    # d2 log|A| / dA_ij dA_kl = -(A^-1)_jk (A^-1)_li
    H_true = -np.einsum("jk,li->ijkl", Ainv, Ainv).reshape(n * n, n * n)
    np.testing.assert_allclose(H, H_true, rtol=1e-10, atol=1e-12)


# --- third order ------------------------------------------------------------------------
def test_grad_hessian_matches_finite_differences_of_the_hessian(rng):
    f = lambda x: sl.sum(sl.exp(0.5 * x) * x[0]) + x[1] ** 3 * x[2]  # noqa: E731
    x = rng.standard_normal(3) * 0.5
    T = sl.grad_hessian(f)(x)
    eps = 1e-5
    Tfd = np.array([(sl.hessian(f)(x + eps * e) - sl.hessian(f)(x - eps * e)) / (2 * eps)
                    for e in np.eye(3)])
    np.testing.assert_allclose(T, Tfd, rtol=1e-7, atol=1e-8)
    # fully symmetric tensor
    np.testing.assert_allclose(T, T.transpose(1, 0, 2), atol=1e-12)
    np.testing.assert_allclose(T, T.transpose(2, 1, 0), atol=1e-12)


def test_grad_trace_mat_hessian_is_the_contraction_of_grad_hessian(rng):
    A = rng.standard_normal((4, 4))
    f = lambda x: sl.sum(sl.log1p_exp(A @ x)) + sl.sum(x ** 4) / 4  # noqa: E731
    x = rng.standard_normal(4)
    M = rng.standard_normal((4, 4))
    g = sl.grad_trace_mat_hessian(f)(x, M)
    T = sl.grad_hessian(f)(x)                  # T[k, i, j] = d/dx_k H_ij
    np.testing.assert_allclose(g, np.einsum("ij,kji->k", M, T), rtol=1e-10, atol=1e-12)


def test_any_nesting_order_gives_the_same_second_derivative(rng):
    f = lambda x: sl.sum(sl.sin(x) * sl.exp(x[0]))  # noqa: E731
    x = rng.standard_normal(3)
    v = rng.standard_normal(3)
    fwd_rev = sl.hvp(f)(x, v)                                      # forward over reverse
    rev_rev = sl.grad(lambda z: sl.sum(sl.grad(f)(z) * v))(x)       # reverse over reverse
    rev_fwd = sl.grad(lambda z: sl.jvp(f)(z, v)[1])(x)              # reverse over forward
    fwd_fwd = np.array([sl.jvp(lambda z: sl.jvp(f)(z, v)[1])(x, e)[1] for e in np.eye(3)])
    for other in (rev_rev, rev_fwd, fwd_fwd):
        np.testing.assert_allclose(fwd_rev, other, rtol=1e-12, atol=1e-13)


# --- errors ----------------------------------------------------------------------------
def test_user_primitive_without_jvp_names_itself_in_forward_mode():
    @sl.primitive
    def twice(x):
        return 2.0 * x

    sl.defvjp(twice, lambda g, ans, x: 2.0 * g)
    assert sl.grad(lambda x: twice(x))(1.0) == 2.0
    with pytest.raises(DifferentiationError, match="'twice' has no JVP"):
        sl.jvp(twice)(1.0, 1.0)
    with pytest.raises(DifferentiationError, match="'twice' has no JVP"):
        sl.hessian(lambda x: sl.sum(twice(x) * x))(np.ones(2))
    sl.defjvp(twice, lambda t, ans, x: 2.0 * t)
    np.testing.assert_allclose(sl.hessian(lambda x: sl.sum(twice(x) * x))(np.ones(2)),
                               4.0 * np.eye(2))


def test_vars_cannot_be_created_directly_in_a_forward_scope():
    with sl.forward_scope():
        with pytest.raises(TypeError, match="forward-mode"):
            sl.Var(1.0)


def test_tangent_shape_mismatch_is_a_clear_error():
    with pytest.raises(ValueError, match="tangent shape"):
        sl.jvp(lambda x: x * 2.0)(np.ones(3), np.ones(2))


def test_forward_rules_on_plain_floats_follow_ieee():
    with pytest.warns(RuntimeWarning):
        assert sl.jvp(lambda x: x / 0.0)(1.0, 1.0)[1] == np.inf
    with pytest.warns(RuntimeWarning):
        assert sl.jvp(lambda y: 1.0 / y)(0.0, 1.0)[1] == -np.inf


def test_higher_derivatives_of_small_integer_powers_at_zero_are_finite():
    x = np.array([0.0, 1.0])
    assert np.all(sl.grad_hessian(lambda v: sl.sum(v ** 2))(x) == 0.0)
    assert sl.grad_hessian(lambda v: sl.sum(v ** 3))(x)[0, 0, 0] == 6.0
    np.testing.assert_allclose(sl.hessian(lambda v: sl.sum(v ** 2))(x), 2 * np.eye(2))


# ---- on-demand tangents and identity seeds (what makes Hessians cheap) ---------------
def test_tangents_are_computed_on_demand_only():
    calls = []

    @sl.primitive
    def noted(x):
        return x * 1.0
    sl.defvjp(noted, lambda g, ans, x: g)
    sl.defjvp(noted, lambda t, ans, x: calls.append(1) or t)
    # the tangent of noted(x) is never needed: d/dx [x * (d/dy noted(y))] reads
    # no tangent of noted's output
    h = sl.hessian(lambda x: sl.sum(x * sl.grad(lambda y: sl.sum(noted(y) * x))(x)))
    np.testing.assert_allclose(h(np.array([1.0, 2.0])), 2 * np.eye(2))
    assert calls == []
    # ... but it is computed when read
    assert sl.jvp(lambda x: noted(x))(np.ones(2), np.ones(2))[1].tolist() == [1.0, 1.0]
    assert calls == [1]


def test_a_long_scalar_chain_does_not_recurse_when_its_tangent_is_read():
    def f(x):
        for _ in range(5000):
            x = x * 1.0001 + 0.0
        return x
    v, t = sl.jvp(f)(1.0, 1.0)
    assert t == pytest.approx(1.0001 ** 5000, rel=1e-12)


def test_identity_seed_shortcut_matches_the_general_rule_and_protects_the_data():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((40, 5))
    X0 = X.copy()
    y = (rng.random(40) < 0.5).astype(float)
    b = rng.standard_normal(5)

    def lp(beta):
        eta = X @ beta
        return sl.sum(y * eta - sl.log1p_exp(eta)) + sl.sum(beta @ X.T @ X @ beta) * 1e-3
    p = 1 / (1 + np.exp(-X @ b))
    want = -(X.T * (p * (1 - p))) @ X + 2e-3 * X.T @ X
    np.testing.assert_allclose(sl.hessian(lp)(b), want, rtol=1e-12, atol=1e-12)
    # the jacobian in forward mode uses the same seed; a non-identity seed does not
    np.testing.assert_allclose(sl.jacobian_forward(lambda beta: X @ beta)(b), X, rtol=0)
    v = rng.standard_normal(5)
    np.testing.assert_allclose(sl.hvp(lp)(b, v), want @ v, rtol=1e-12)
    assert np.array_equal(X, X0)
