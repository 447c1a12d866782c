"""The algebraic-solver super node: roots, derivatives by the implicit function theorem
(reverse, forward, nested) against closed forms and finite differences, and errors."""

import numpy as np
import pytest

import stanlite as sl
from stanlite.functor.algebra_solver import algebra_solver_taped

from testkit import central_jacobian, check_retaped, fd_grad_trace_hessian, one_compartment, one_compartment_exact

METHODS = ["powell", "newton"]


# --------------------------------------------------------------------------------------
# problems with closed forms
# --------------------------------------------------------------------------------------
def cube(x, theta):
    """x^3 = theta: x* = theta^(1/3), dx*/dtheta = theta^(-2/3) / 3."""
    return x ** 3 - theta


def exp_log(x, a, b):
    """exp(a x) = b: x* = log(b) / a, dx/da = -log(b) / a^2, dx/db = 1 / (a b)."""
    return sl.exp(a * x) - b


def sqrt_system(x, a):
    """x0 = a x1, x0 x1 = 1: x* = (sqrt(a), 1 / sqrt(a))."""
    return sl.stack([x[0] - a * x[1], x[0] * x[1] - 1.0])


def monotone(x, theta, M):
    """x + 0.3 tanh(M x) = theta, ||0.3 M||_2 < 1: one root for every theta (the
    map is a perturbation of the identity whose Jacobian I + 0.3 diag(sech^2) M is
    nonsingular everywhere)."""
    return x + 0.3 * sl.tanh(M @ x) - theta


def random_M(rng, n=4):
    M = rng.standard_normal((n, n))
    return M / np.linalg.norm(M, 2) * 2.5           # ||0.3 M||_2 = 0.75


@pytest.mark.parametrize("method", METHODS)
def test_scalar_root_and_derivatives_closed_form(method):
    for theta in (0.3, 8.0, 50.0):
        th = np.array([theta])
        x = sl.algebra_solver(cube, np.array([1.0]), th, method=method)
        np.testing.assert_allclose(x, [theta ** (1 / 3)], rtol=1e-13)

        def root(t):
            return sl.algebra_solver(cube, np.array([1.0]), t, method=method)[0]
        np.testing.assert_allclose(sl.grad(root)(th), [theta ** (-2 / 3) / 3], rtol=1e-12)
        np.testing.assert_allclose(sl.jvp(root)(th, np.array([1.0]))[1],
                                   theta ** (-2 / 3) / 3, rtol=1e-12)
        np.testing.assert_allclose(sl.hessian(root)(th), [[-2 / 9 * theta ** (-5 / 3)]],
                                   rtol=1e-11)


@pytest.mark.parametrize("method", METHODS)
def test_two_parameter_arguments(method):
    a, b = 1.7, 3.2
    grad = sl.grad(lambda a_, b_: sl.algebra_solver(
        exp_log, np.array([0.0]), a_, b_, method=method)[0], argnum=(0, 1))
    da, db = grad(a, b)
    np.testing.assert_allclose([da, db], [-np.log(b) / a ** 2, 1 / (a * b)], rtol=1e-12)
    # only b traced: a is data (a plain float passed through untouched)
    db_only = sl.grad(lambda b_: sl.algebra_solver(
        exp_log, np.array([0.0]), a, b_, method=method)[0])(b)
    np.testing.assert_allclose(db_only, 1 / (a * b), rtol=1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_two_dimensional_system(method):
    a = 4.0
    x = sl.algebra_solver(sqrt_system, np.array([1.0, 1.0]), a, method=method)
    np.testing.assert_allclose(x, [2.0, 0.5], rtol=1e-13)
    J = sl.jacobian(lambda t: sl.algebra_solver(sqrt_system, np.array([1.0, 1.0]), t[0],
                                                method=method))(np.array([a]))
    # d sqrt(a) = 1 / (2 sqrt a), d a^-1/2 = -a^-3/2 / 2
    np.testing.assert_allclose(J[:, 0], [0.25, -0.0625], rtol=1e-12)


def test_one_compartment_steady_state_closed_form():
    theta = np.array([0.5, 0.2, 1000.0, 1.0])
    x = sl.algebra_solver(one_compartment, np.full(2, 500.0), theta)
    exact = one_compartment_exact(theta)
    np.testing.assert_allclose(x, exact, rtol=1e-12)
    # gut trough D e^{-k1 tau} / (1 - e^{-k1 tau}), as the review's check
    np.testing.assert_allclose(x[0], 1000 * np.exp(-0.5) / (1 - np.exp(-0.5)), rtol=1e-12)
    # sensitivities to (k1, k2, D, tau): the closed form differentiated by AD
    J = sl.jacobian(lambda t: sl.algebra_solver(one_compartment, np.full(2, 500.0), t))(theta)
    J_exact = sl.jacobian(one_compartment_exact)(theta)
    np.testing.assert_allclose(J, J_exact, rtol=1e-9, atol=1e-9 * np.abs(J_exact).max())


# --------------------------------------------------------------------------------------
# random points: finite differences, forward vs reverse, Hessians
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", METHODS)
def test_gradient_jvp_hessian_against_differences(method, rng):
    M = random_M(rng)
    for _ in range(3):
        theta = rng.standard_normal(4) * 1.5

        def h(t):
            x = sl.algebra_solver(monotone, np.zeros(4), t, M, method=method)
            return sl.sum(sl.sin(x)) + x[0] * x[1]
        # root accurate to ~1e-15 (quadratic convergence), so differences are clean
        sl.assert_grad(h, theta)
        sl.assert_jvp(h, theta)
        sl.assert_hessian(h, theta, rtol=1e-6, atol=1e-8)


def test_forward_and_reverse_jacobians_agree_with_the_theorem(rng):
    M = random_M(rng)
    theta = rng.standard_normal(4)

    def root(t):
        return sl.algebra_solver(monotone, np.zeros(4), t, M)
    Jr = sl.jacobian_reverse(root)(theta)
    Jf = sl.jacobian_forward(root)(theta)
    x = root(theta)
    Jx = sl.jacobian(lambda z: monotone(z, theta, M))(x)
    Jt = sl.jacobian(lambda t: monotone(x, t, M))(theta)
    np.testing.assert_allclose(Jr, -np.linalg.solve(Jx, Jt), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(Jf, Jr, rtol=1e-12, atol=1e-14)


def test_hessian_via_jacobian_of_analytic_jac_x(rng):
    # a user's analytic df/dx (written with stanlite ops) replaces AD everywhere,
    # including inside the nested rules of a Hessian
    M = random_M(rng)

    def jac(x, t, M_):
        s = 1.0 - sl.tanh(M_ @ x) ** 2
        return np.eye(4) + 0.3 * sl.reshape(s, (4, 1)) * M_
    theta = rng.standard_normal(4)

    def h(t, **kw):
        x = sl.algebra_solver(monotone, np.zeros(4), t, M, **kw)
        return sl.sum(x ** 3)
    np.testing.assert_allclose(sl.grad(lambda t: h(t, jac_x=jac))(theta),
                               sl.grad(h)(theta), rtol=1e-12)
    np.testing.assert_allclose(sl.hessian(lambda t: h(t, jac_x=jac))(theta),
                               sl.hessian(h)(theta), rtol=1e-10, atol=1e-12)


def test_reverse_over_reverse(rng):
    # grad of (sum of a gradient): the solver's VJP is itself recorded and swept
    M = random_M(rng)
    theta = rng.standard_normal(4)

    def h(t):
        return sl.sum(sl.algebra_solver(monotone, np.zeros(4), t, M) ** 2)
    outer = sl.grad(lambda t: sl.sum(sl.grad(h)(t)))(theta)
    np.testing.assert_allclose(outer, sl.hessian(h)(theta).sum(axis=0), rtol=1e-10)


def test_grad_trace_mat_hessian_for_riemannian_hmc(rng):
    # d/dtheta tr(W H(theta)): reverse over forward-over-reverse through the solver,
    # against Richardson-refined central differences of the Hessian
    M = random_M(rng, 3)
    theta = rng.standard_normal(3)
    W = rng.standard_normal((3, 3))
    W = W + W.T

    def h(t):
        return sl.sum(sl.sin(sl.algebra_solver(monotone, np.zeros(3), t, M)))
    fd = fd_grad_trace_hessian(sl.hessian(h), theta, W)
    np.testing.assert_allclose(sl.grad_trace_mat_hessian(h)(theta, W), fd, rtol=1e-6,
                               atol=1e-8)


def test_hvp_and_third_derivative(rng):
    theta = np.array([8.0])

    def root(t):
        return sl.algebra_solver(cube, np.array([1.0]), t)[0]
    np.testing.assert_allclose(sl.hvp(root)(theta, np.array([2.0])),
                               [2 * -2 / 9 * 8.0 ** (-5 / 3)], rtol=1e-11)
    # d^3/dtheta^3 theta^(1/3) = 10/27 theta^(-8/3)
    np.testing.assert_allclose(sl.grad_hessian(root)(theta), [[[10 / 27 * 8.0 ** (-8 / 3)]]],
                               rtol=1e-9)


def test_methods_agree_far_from_the_root():
    # atan(x) = theta from x = 3: plain Newton overshoots (|x| grows); the line search
    # and the trust region both bring it home
    f = lambda x, t: sl.atan(x) - t                                      # noqa: E731
    for method in METHODS:
        x = sl.algebra_solver(f, np.array([3.0]), np.array([0.2]), method=method)
        np.testing.assert_allclose(x, [np.tan(0.2)], rtol=1e-13)


def test_data_arguments_of_any_type():
    # ints, dicts, strings: passed to f untouched, never differentiated
    def f(x, theta, cfg, power):
        return x ** power - theta * cfg["scale"]
    g = sl.grad(lambda t: sl.algebra_solver(f, np.array([1.0]), t, {"scale": 2.0}, 3)[0])
    np.testing.assert_allclose(g(np.array([4.0])), [2 * 8.0 ** (-2 / 3) / 3], rtol=1e-12)


def test_traced_guess_is_not_differentiated():
    # the root does not depend on where the iterations start
    g = sl.grad(lambda z: sl.algebra_solver(cube, z, np.array([8.0]))[0] + z[0])
    np.testing.assert_allclose(g(np.array([1.5])), [1.0])


def test_taped_baseline_matches_the_super_node():
    theta = np.array([0.5, 0.2, 1000.0, 1.0])
    for jac in (None, _one_compartment_jac):
        J_taped = sl.jacobian(lambda t: algebra_solver_taped(
            one_compartment, np.full(2, 500.0), t, jac_x=jac))(theta)
        J_node = sl.jacobian(lambda t: sl.algebra_solver(
            one_compartment, np.full(2, 500.0), t, jac_x=jac))(theta)
        np.testing.assert_allclose(J_taped, J_node, rtol=1e-8,
                                   atol=1e-10 * np.abs(J_node).max())
    # and the tape: one node for the super node, the iterations for the baseline
    with sl.nested() as tape:
        algebra_solver_taped(one_compartment, np.full(2, 500.0), sl.Var(theta))
        n_taped = len(tape.nodes)
    with sl.nested() as tape:
        sl.algebra_solver(one_compartment, np.full(2, 500.0), sl.Var(theta))
        n_node = len(tape.nodes)
    assert n_node == 1 and n_taped > 50


def _one_compartment_jac(x, theta):
    k1, k2, tau = theta[0], theta[1], theta[3]
    e1, e2 = sl.exp(-k1 * tau), sl.exp(-k2 * tau)
    return sl.stack([sl.stack([e1 - 1.0, 0.0 * e1]),
                     sl.stack([k1 / (k1 - k2) * (e2 - e1), e2 - 1.0])])


# --------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", METHODS)
def test_no_root_raises_solver_error(method):
    f = lambda x, t: x ** 2 + t                                          # noqa: E731
    with pytest.raises(sl.SolverError, match=rf"algebra_solver \({method}\), after \d+ "
                                             r"steps: .*\|\|f\(x\)\|\| = .*f_tol"):
        sl.algebra_solver(f, np.array([1.0]), np.array([1.0]), method=method)


def test_max_steps_reached_names_the_limit():
    f = lambda x, t: sl.atan(x) - t                                      # noqa: E731
    with pytest.raises(sl.SolverError, match=r"\(powell\), after 2 steps: no convergence \(max_steps reached\)"):
        sl.algebra_solver(f, np.array([30.0]), np.array([0.2]), max_steps=2)


def test_solver_error_rejects_a_proposal():
    # an ArithmeticError: the samplers' RejectedPoint
    assert issubclass(sl.SolverError, ArithmeticError)
    from stanlite.samplers.hamiltonian import RejectedPoint
    assert issubclass(sl.SolverError, RejectedPoint)


def test_jacobian_singular_at_the_root():
    # two copies of one equation: x0 = theta, x1 free; J = [[1, 0], [1, 0]]
    f = lambda x, t: sl.stack([x[0] - t, x[0] - t])                      # noqa: E731
    with pytest.raises(sl.SolverError, match=r"powell.*singular at the root"):
        sl.algebra_solver(f, np.array([0.0, 0.0]), 1.0)
    with pytest.raises(sl.SolverError, match=r"newton.*singular Jacobian"):
        sl.algebra_solver(f, np.array([0.0, 0.0]), 1.0, method="newton")


def test_bad_arguments_name_the_solver_and_argument():
    th = np.array([8.0])
    cases = [
        (dict(x_guess=np.ones((1, 1))), r"x_guess must be a non-empty vector"),
        (dict(x_guess=np.array([])), r"x_guess must be a non-empty vector"),
        (dict(x_guess=np.array([np.nan])), r"x_guess must be finite"),
        (dict(method="bfgs"), r"method must be one of"),
        (dict(rel_tol=0.0), r"rel_tol must be a positive"),
        (dict(f_tol=-1.0), r"f_tol must be a positive"),
        (dict(max_steps=0), r"max_steps must be a positive integer"),
    ]
    for kw, msg in cases:
        x0 = kw.pop("x_guess", np.array([1.0]))
        with pytest.raises(ValueError, match=rf"algebra_solver: {msg}"):
            sl.algebra_solver(cube, x0, th, **kw)
    with pytest.raises(ValueError, match=r"f\(x, \*args\) must return a vector of 2 residuals"):
        sl.algebra_solver(lambda x, t: x[0] - t, np.ones(2), th)
    with pytest.raises(ValueError, match=r"jac_x\(x, \*args\) must return the 1 x 1"):
        sl.algebra_solver(cube, np.ones(1), th, jac_x=lambda x, t: np.ones(2))
    with pytest.raises(TypeError, match=r"f must be a callable"):
        sl.algebra_solver("f", np.ones(1), th)
    with pytest.raises(sl.SolverError, match=r"f\(x_guess, \*args\) is not finite"):
        sl.algebra_solver(lambda x, t: sl.log(x) - t, np.array([-1.0]), th)


def test_closure_over_a_parameter_is_refused():
    # the implicit function theorem only sees the solver's arguments: a parameter
    # captured by f would silently lose its derivative
    def h(t):
        return sl.algebra_solver(lambda x: x ** 3 - t, np.array([1.0]))[0]
    with pytest.raises(sl.DifferentiationError, match=r"not among its arguments"):
        sl.grad(h)(np.array([8.0]))


def test_raises_exactly_when_the_float_version_raises():
    f = lambda x, t: x ** 2 + t                                          # noqa: E731
    for call in (lambda t: sl.algebra_solver(f, np.array([1.0]), t)[0],):
        with pytest.raises(sl.SolverError):
            call(np.array([1.0]))
        with pytest.raises(sl.SolverError):
            sl.grad(call)(np.array([1.0]))
        with pytest.raises(sl.SolverError):
            sl.hessian(call)(np.array([1.0]))


# --------------------------------------------------------------------------------------
# inside a model
# --------------------------------------------------------------------------------------
def _square_root(x, t):
    """x^2 = t: a root (x* = sqrt(t) from a positive guess) only for t > 0."""
    return x ** 2 - t


class _SqrtModel(sl.Model):
    theta = sl.param.real()

    def log_prob(self, theta):
        x = sl.algebra_solver(_square_root, np.array([1.0]), sl.reshape(theta, (1,)))[0]
        return sl.normal_lpdf(theta, 0.3, 0.5) + sl.normal_lpdf(0.5, x, 0.3)


def _sqrt_model_lp(theta):
    x = np.sqrt(theta)
    return (-0.5 * ((theta - 0.3) / 0.5) ** 2 - np.log(0.5) - 0.5 * ((0.5 - x) / 0.3) ** 2
            - np.log(0.3) - np.log(2 * np.pi))


def test_log_density_gradient_and_hessian_through_the_solver():
    m = _SqrtModel()
    for th in (0.2, 0.9):
        lp, g, H = m.log_density_hessian(np.array([th]))
        np.testing.assert_allclose(lp, _sqrt_model_lp(th), rtol=1e-12)
        h = 1e-5
        fd = (_sqrt_model_lp(th + h) - _sqrt_model_lp(th - h)) / (2 * h)
        np.testing.assert_allclose(g, [fd], rtol=1e-7)
        fd2 = (_sqrt_model_lp(th + h) - 2 * lp + _sqrt_model_lp(th - h)) / h ** 2
        np.testing.assert_allclose(H, [[fd2]], rtol=1e-4)
    # no real root for theta < 0: the solver's error reaches the sampler (a rejection)
    with pytest.raises(sl.SolverError):
        m.log_density_gradient(np.array([-0.4]))


@pytest.mark.slow
def test_nuts_rejects_proposals_where_the_solver_fails():
    # the posterior lives on theta > 0; proposals with theta < 0 make the solver raise,
    # which NUTS treats as a rejection (counted as divergent, as Stan does), so the
    # chain never leaves the region where the root exists
    fit = _SqrtModel().sample(chains=1, draws=300, warmup=300, seed=3, parallel=False,
                              progress=False)
    assert np.all(fit["theta"] > 0)


def test_retaped_gradient_matches_eager(rng):
    # sl.compile replays the recorded node with new parameters: the root and the LU
    # cached by the forward solve must follow (never a stale factorisation)
    M = random_M(rng, 3)

    def h(t):
        return sl.sum(sl.sin(sl.algebra_solver(monotone, np.zeros(3), t, M)))
    check_retaped(h, np.zeros(3), [rng.standard_normal(3) for _ in range(3)])


# --------------------------------------------------------------------------------------
# jacobians=: f and its Jacobians from the caller; callable guesses; J_theta formed
# once for a row-by-row Jacobian (issue 22)
# --------------------------------------------------------------------------------------
def _monotone_jacobians(M, calls):
    """``jacobians`` of :func:`monotone` in numpy: df/dx = I + 0.3 diag(sech^2(Mx)) M,
    df/dtheta = -I; every call is logged (the point and what was asked)."""
    def jacobians(x, theta, M_, wrt=()):
        calls.append((x.copy(), tuple(wrt)))
        u = M @ x
        F = x + 0.3 * np.tanh(u) - theta
        J = np.eye(len(x)) + 0.3 * (1.0 - np.tanh(u) ** 2)[:, None] * M
        return (F, J) if not wrt else (F, J, [-np.eye(len(x)) for _ in wrt])
    return jacobians


@pytest.mark.parametrize("method", METHODS)
def test_jacobians_hook_gives_the_ad_derivatives(method, rng):
    M = random_M(rng, 3)
    theta = rng.standard_normal(3)
    w = rng.standard_normal(3)
    calls = []
    hook = _monotone_jacobians(M, calls)

    def loss(t, jacobians):
        return sl.sum(w * sl.algebra_solver(monotone, np.zeros(3), t, M, method=method,
                                            jacobians=jacobians))
    v, g = sl.value_and_grad(lambda t: loss(t, hook))(theta)
    v0, g0 = sl.value_and_grad(lambda t: loss(t, None))(theta)
    np.testing.assert_allclose(v, v0, rtol=1e-12)
    np.testing.assert_allclose(g, g0, rtol=1e-9)
    np.testing.assert_allclose(g, central_differences(lambda t: loss(t, None), theta),
                               rtol=1e-6)
    # every evaluation came from the hook, asked for df/dtheta too (theta is traced)
    assert calls and all(wrt == (0,) for _, wrt in calls)
    # forward mode contracts the same Jacobians
    jf = sl.jacobian_forward(lambda t: sl.algebra_solver(
        monotone, np.zeros(3), t, M, method=method, jacobians=hook))(theta)
    jr = sl.jacobian_reverse(lambda t: sl.algebra_solver(monotone, np.zeros(3), t, M,
                                                         method=method))(theta)
    np.testing.assert_allclose(jf, jr, rtol=1e-9)


def test_jacobians_hook_does_not_evaluate_the_last_correction_again(rng):
    # converged by a Gauss-Newton correction below rel_tol: the evaluation before it
    # serves the rules, so no point is evaluated twice and the corrected one never
    M = random_M(rng, 3)
    calls = []
    x = sl.algebra_solver(monotone, np.zeros(3), sl.Var(np.ones(3)), M,
                          jacobians=_monotone_jacobians(M, calls))
    pts = [c[0] for c in calls]
    assert len({p.tobytes() for p in pts}) == len(pts)
    assert not any(np.array_equal(p, sl.value_of(x)) for p in pts)
    # the f_tol test still holds at the root
    assert np.linalg.norm(sl.value_of(monotone(sl.value_of(x), np.ones(3), M))) < 1e-6


def test_jacobians_hook_is_checked():
    bad = lambda x, t, wrt=(): (x ** 3 - t, np.eye(2))            # noqa: E731
    with pytest.raises(ValueError, match="jacobians.*1 x 1 Jacobian"):
        sl.algebra_solver(cube, np.array([1.0]), sl.Var(np.array([8.0])), jacobians=bad)
    with pytest.raises(TypeError, match="jacobians must be a callable"):
        sl.algebra_solver(cube, np.array([1.0]), 8.0, jacobians=3)


def test_callable_guess_follows_the_parameters_in_a_replay(rng):
    # the guess is a function of the plain argument values, called at every solve -
    # also when sl.compile replays the recorded node at new parameters
    M = random_M(rng, 3)
    seen = []

    def guess(t, M_):
        seen.append(np.array(t, dtype=float))
        return np.array(t, dtype=float)          # x ~ theta when tanh is small

    def h(t):
        return sl.sum(sl.sin(sl.algebra_solver(monotone, guess, t, M)))
    c = sl.compile(h, np.zeros(3))
    for _ in range(3):
        theta = rng.standard_normal(3)
        seen.clear()
        v, g = c(theta)
        assert seen and all(np.array_equal(s, theta) for s in seen)
        v0, g0 = sl.value_and_grad(h)(theta)
        np.testing.assert_allclose(g, g0, rtol=1e-10)
    # a replay's guess is checked against the size fixed when the problem was set up
    import importlib
    A = importlib.import_module("stanlite.functor.algebra_solver")
    prob = A._Problem("algebra_solver", monotone, guess, (sl.Var(np.ones(3)), M),
                      "powell", 1e-10, 1e-6, 200, None)
    assert prob.n == 3
    with pytest.raises(ValueError, match="x_guess must be a vector of 3"):
        prob.check_guess(np.zeros(2))


@pytest.mark.parametrize("compiled", [False, True])
def test_reverse_jacobian_forms_the_argument_jacobian_once(rng, monkeypatch, compiled):
    # jacobian_reverse sweeps once per state: the second sweep at the same root forms
    # df/dtheta by one forward pass and the others contract it - one nested VJP of f,
    # not n; a single gradient keeps its one VJP. When f lowers to a compiled program
    # (ode_compiled), df/dtheta comes from it in one call: no nested VJP at all
    import importlib
    from stanlite.autodiff.vm.kernel import available
    from stanlite.functor import ode_compiled
    A = importlib.import_module("stanlite.functor.algebra_solver")
    if compiled and not available():
        pytest.skip("no compiled interpreter (numba)")
    if not compiled:
        monkeypatch.setattr(ode_compiled, "COMPILE_AFTER", None)
    want = 0 if compiled else 1
    vjps = []
    real = A.vjp
    monkeypatch.setattr(A, "vjp", lambda *a, **k: vjps.append(1) or real(*a, **k))
    M = random_M(rng, 4)
    theta = rng.standard_normal(4)

    def root(t):
        return sl.algebra_solver(monotone, np.zeros(4), t, M)
    J = sl.jacobian_reverse(root)(theta)
    assert len(vjps) == want
    np.testing.assert_allclose(J, sl.jacobian_forward(root)(theta), rtol=1e-10)
    np.testing.assert_allclose(J, central_jacobian(root, theta), rtol=1e-6)
    vjps.clear()
    g = sl.grad(lambda t: sl.sum(sl.sin(root(t))))(theta)
    assert len(vjps) == want
    np.testing.assert_allclose(g, np.cos(root(theta)) @ J, rtol=1e-10)


def test_scalar_taped_baseline_records_scalar_nodes_and_matches():
    # algebra_solver_taped(scalar=True): the dogleg on scalar nodes (Stan's var): the
    # same root and derivatives as the super node, and a tape of scalar nodes only
    def f(x, th):
        return [x[0] ** 3 - th[0], x[1] * x[0] - th[1]]

    def jac(x, th):
        return [[3.0 * x[0] ** 2, 0.0], [x[1], x[0]]]

    def g(x, th):
        return sl.stack([x[0] ** 3 - th[0], x[1] * x[0] - th[1]])
    theta = np.array([8.0, 3.0])
    J = sl.jacobian(lambda t: algebra_solver_taped(f, np.ones(2), [t[0], t[1]], jac_x=jac,
                                                   scalar=True))(theta)
    J0 = sl.jacobian(lambda t: sl.algebra_solver(g, np.ones(2), t))(theta)
    np.testing.assert_allclose(J, J0, rtol=1e-9, atol=1e-12)
    # x = (th0^(1/3), th1 / x0): dx1/dth0 = -th1 / x0^2 / 12, dx1/dth1 = 1 / x0
    np.testing.assert_allclose(J, [[1 / 12, 0.0], [-3 / 4 / 12, 0.5]], rtol=1e-9,
                               atol=1e-15)
    with sl.nested() as tape:
        t = sl.Var(theta)
        algebra_solver_taped(f, np.ones(2), [t[0], t[1]], jac_x=jac, scalar=True)
        shapes = [np.shape(sl.value_of(nd)) for nd in tape.nodes]
    assert len(shapes) > 100
    assert sum(s != () for s in shapes) <= 3        # theta, the final stack
    with pytest.raises(ValueError, match="scalar=True needs the analytic jac_x"):
        algebra_solver_taped(f, np.ones(2), [1.0, 2.0], scalar=True)


def central_differences(fn, x, h=1e-6):
    g = np.empty_like(x)
    for i in range(len(x)):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (float(sl.value_of(fn(x + e))) - float(sl.value_of(fn(x - e)))) / (2 * h)
    return g


def test_argument_jacobians_from_the_compiled_program_match_differences(rng):
    # with an analytic jac_x the iterations never compile f; the rules then ask f's
    # compiled program for df/dtheta (and df/dM, a second parameter) at the root:
    # reverse and forward Jacobians against central differences and each other
    import importlib
    from stanlite.autodiff.vm.kernel import available
    A = importlib.import_module("stanlite.functor.algebra_solver")
    if not available():
        pytest.skip("no compiled interpreter (numba)")
    M = random_M(rng, 3)
    theta = rng.standard_normal(3)

    def jac(x, th, m):
        s = 1.0 / sl.cosh(m @ x) ** 2
        return np.eye(3) + 0.3 * s[:, None] * m

    def root(t, m=M):
        return sl.algebra_solver(monotone, np.zeros(3), t, m, jac_x=jac)
    x = root(theta)
    prob = A._Problem("algebra_solver", monotone, np.zeros(3), (sl.Var(theta), M),
                      "powell", 1e-10, 1e-6, 200, jac)
    got = A._compiled_arg_jacobians(prob, x, (theta,))
    assert got is not None and got[0].shape == (3, 3)
    np.testing.assert_allclose(got[0], -np.eye(3), atol=1e-12)      # df/dtheta = -I
    J = sl.jacobian_reverse(root)(theta)
    np.testing.assert_allclose(J, central_jacobian(root, theta), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(sl.jacobian_forward(root)(theta), J, rtol=1e-10)
    # a matrix parameter: df/dM from the program, shaped like M
    flat = lambda mv: root(theta, mv.reshape(3, 3))
    JM = sl.jacobian_reverse(flat)(M.ravel())
    np.testing.assert_allclose(JM, central_jacobian(flat, M.ravel()), rtol=1e-6,
                               atol=1e-9)
    np.testing.assert_allclose(sl.jacobian_forward(flat)(M.ravel()), JM, rtol=1e-10)
