"""ODE super nodes: values and derivatives against closed forms (a linear system,
``y(t) = expm(A (t - t0)) y0``; the one-compartment model with first-order
absorption), against finite differences at random points, the three derivative
methods against each other (forward sensitivities, adjoint, forward mode), Hessians
through the solution (forward-over-reverse and reverse-over-reverse), a stiff
problem with BDF, and the error cases.

The value returned under differentiation is the state part of the coupled solve
(sensitivities take part in the error control, as in Stan), so values and
derivatives are compared within the solver's tolerances, never bit for bit; finite
differences use steps large enough for the adaptive solver's noise (tol / h) to stay
below the comparison tolerance.
"""

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.linalg import expm, expm_frechet

import stanlite as sl

from testkit import central_gradient, one_comp_mm

TIGHT = dict(rel_tol=1e-11, abs_tol=1e-11)
# second derivatives integrate systems of N (1 + K) (1 + n) states: a little looser
MEDIUM = dict(rel_tol=1e-9, abs_tol=1e-9)
ADJ_MEDIUM = dict(rel_tol_forward=1e-9, abs_tol_forward=1e-9, rel_tol_backward=1e-9,
                  abs_tol_backward=1e-9, rel_tol_quadrature=1e-9, abs_tol_quadrature=1e-9)
ADJ_TIGHT = dict(rel_tol_forward=1e-11, abs_tol_forward=1e-11, rel_tol_backward=1e-11,
                 abs_tol_backward=1e-11, rel_tol_quadrature=1e-11,
                 abs_tol_quadrature=1e-11)


def solvers(bdf_tol=1e-11):
    """(name, solve) for every method at tight tolerances."""
    return [
        ("rk45", lambda *a: sl.ode_rk45(*a, **TIGHT)),
        ("bdf", lambda *a: sl.ode_bdf(*a, rel_tol=bdf_tol, abs_tol=bdf_tol)),
        ("adjoint", lambda *a: sl.ode_adjoint(*a, **ADJ_TIGHT)),
        ("adjoint-bdf", lambda *a: sl.ode_adjoint(*a, **ADJ_TIGHT, solver_forward="bdf")),
    ]


SOLVERS = solvers()
SOLVER_IDS = [s[0] for s in SOLVERS]
SECOND_ORDER = {
    "rk45": lambda *a: sl.ode_rk45(*a, **MEDIUM),
    "bdf": lambda *a: sl.ode_bdf(*a, **MEDIUM),
    "adjoint": lambda *a: sl.ode_adjoint(*a, **ADJ_MEDIUM),
}


def fd_jac(fun, x, h=1e-4):
    """Central differences of a vector function (one column per input)."""
    x = np.asarray(x, dtype=float)
    cols = []
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = h
        cols.append((np.asarray(fun(x + e)) - np.asarray(fun(x - e))) / (2 * h))
    return np.stack(cols, axis=-1)


# --------------------------------------------------------------------------------------
# a linear system: y(t) = expm(A (t - t0)) y0
# --------------------------------------------------------------------------------------
def linear(t, y, A):
    return sl.matmul(A, y)


class Linear:
    """Random stable A, y0, output times, and a loss with random weights; the packed
    input x = (y0, vec A, t0, ts) and the closed form of the loss and its gradient."""

    def __init__(self, seed, n=2, T=3):
        rng = np.random.default_rng(seed)
        self.n, self.T = n, T
        self.A = rng.standard_normal((n, n)) * 0.6 - np.eye(n)
        self.y0 = rng.standard_normal(n)
        self.t0 = float(rng.uniform(-0.5, 0.0))
        self.ts = np.sort(rng.uniform(0.2, 2.0, T))
        self.W = rng.standard_normal((T, n))
        self.x = np.concatenate([self.y0, self.A.ravel(), [self.t0], self.ts])

    def unpack(self, x):
        n = self.n
        return (x[:n], sl.reshape(x[n:n + n * n], (n, n)), x[n + n * n],
                x[n + n * n + 1:])

    def loss(self, solve):
        def L(x):
            y0, A, t0, ts = self.unpack(x)
            return sl.sum(solve(linear, y0, t0, ts, A) * self.W)
        return L

    def exact(self, x):
        n = self.n
        y0, A, t0, ts = x[:n], x[n:n + n * n].reshape(n, n), x[n + n * n], x[n + n * n + 1:]
        return sum(float(w @ expm(A * (t - t0)) @ y0) for w, t in zip(self.W, ts))

    def exact_grad(self, x):
        n = self.n
        y0, A, t0, ts = x[:n], x[n:n + n * n].reshape(n, n), x[n + n * n], x[n + n * n + 1:]
        gy0 = np.zeros(n)
        gA = np.zeros((n, n))
        gt0 = 0.0
        gts = np.zeros(len(ts))
        for i, (w, t) in enumerate(zip(self.W, ts)):
            tau = t - t0
            E = expm(A * tau)
            gy0 += E.T @ w
            for j in range(n):
                for k in range(n):
                    D = np.zeros((n, n))
                    D[j, k] = tau
                    # d expm(A tau) / dA_jk = L(A tau, E_jk tau): the Frechet derivative
                    gA[j, k] += w @ expm_frechet(A * tau, D, compute_expm=False) @ y0
            dy = A @ E @ y0                   # d/dt expm(A tau) y0
            gts[i] = w @ dy
            gt0 -= w @ dy
        return np.concatenate([gy0, gA.ravel(), [gt0], gts])


@pytest.mark.parametrize("name,solve", SOLVERS, ids=SOLVER_IDS)
def test_linear_value_and_gradient_closed_form(name, solve):
    P = Linear(seed=1)
    Y = solve(linear, P.y0, P.t0, P.ts, P.A)
    want = np.array([expm(P.A * (t - P.t0)) @ P.y0 for t in P.ts])
    np.testing.assert_allclose(Y, want, rtol=1e-8, atol=1e-9)
    val, g = sl.value_and_grad(P.loss(solve))(P.x)
    assert val == pytest.approx(P.exact(P.x), rel=1e-8, abs=1e-9)
    np.testing.assert_allclose(g, P.exact_grad(P.x), rtol=1e-7, atol=1e-8)


def test_linear_forward_mode_closed_form():
    P = Linear(seed=2, n=3, T=2)
    rng = np.random.default_rng(3)
    L = P.loss(lambda *a: sl.ode_rk45(*a, **TIGHT))
    v = rng.standard_normal(P.x.size)
    val, jv = sl.jvp(L)(P.x, v)
    assert val == pytest.approx(P.exact(P.x), rel=1e-8)
    assert jv == pytest.approx(P.exact_grad(P.x) @ v, rel=1e-7)
    # vector mode: several directions at once
    V = rng.standard_normal((3, P.x.size))
    from stanlite.autodiff.functional import _forward
    _, tb = _forward(L, P.x, V, (3,))
    np.testing.assert_allclose(tb, V @ P.exact_grad(P.x), rtol=1e-7, atol=1e-8)


def test_linear_jacobian_of_the_solution_forward_and_reverse():
    # the whole Jacobian of Y (T*n outputs) w.r.t. (y0, A): reverse mode (one sweep
    # per output), forward mode (one vector-mode pass) and the closed form agree
    P = Linear(seed=4)
    n = P.n

    def Y(z):
        return sl.reshape(sl.ode_rk45(linear, z[:n], P.t0, P.ts,
                                      sl.reshape(z[n:], (n, n)), **TIGHT), (-1,))
    z = np.concatenate([P.y0, P.A.ravel()])
    Jr = sl.jacobian_reverse(Y)(z)
    Jf = sl.jacobian_forward(Y)(z)

    def exact(z):
        A = z[n:].reshape(n, n)
        return np.concatenate([expm(A * (t - P.t0)) @ z[:n] for t in P.ts])
    Je = fd_jac(exact, z, h=1e-5)      # differences of the closed form (smooth)
    np.testing.assert_allclose(Jr, Je, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(Jf, Je, rtol=1e-7, atol=1e-8)


def test_linear_hessian_against_differences_of_the_exact_gradient():
    P = Linear(seed=5, n=2, T=2)
    L = P.loss(lambda *a: sl.ode_rk45(*a, **TIGHT))
    H = sl.hessian(L)(P.x)
    Hfd = fd_jac(P.exact_grad, P.x, h=1e-5)
    np.testing.assert_allclose(H, (Hfd + Hfd.T) / 2, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(H, H.T, atol=1e-8)


# --------------------------------------------------------------------------------------
# one compartment, first-order absorption: closed form in stanlite operations
# --------------------------------------------------------------------------------------
def one_cpt(t, y, ka, ke):
    """Amounts in the gut and the central compartment."""
    return sl.stack([-ka * y[0], ka * y[0] - ke * y[1]])


def one_cpt_exact(ka, ke, g0, c0, t0, ts):
    """gut = g0 e^{-ka tau}; central = g0 ka/(ka-ke) (e^{-ke tau} - e^{-ka tau})
    + c0 e^{-ke tau}, tau = t - t0 (as a (T, 2) array, in stanlite operations)."""
    tau = ts - t0
    a, e = sl.exp(-ka * tau), sl.exp(-ke * tau)
    return sl.stack([g0 * a, g0 * ka / (ka - ke) * (e - a) + c0 * e], axis=1)


PK_X = np.array([1.3, 0.4, 100.0, 5.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0])
PK_W = np.array([[0.01, -0.02], [0.0, 0.03], [0.02, 0.01], [-0.01, 0.02], [0.0, 0.05]])


def pk_loss(solve):
    """A loss of every input: log-concentrations against weights (nonlinear in all)."""
    def L(x):
        ka, ke, g0, c0, t0, ts = x[0], x[1], x[2], x[3], x[4], x[5:]
        if solve is None:
            Y = one_cpt_exact(ka, ke, g0, c0, t0, ts)
        else:
            Y = solve(one_cpt, sl.stack([g0, c0]), t0, ts, ka, ke)
        return sl.sum(sl.log(Y) * PK_W)
    return L


@pytest.mark.parametrize("name,solve", SOLVERS, ids=SOLVER_IDS)
def test_one_compartment_value_and_gradient_closed_form(name, solve):
    vg_ode = sl.value_and_grad(pk_loss(solve))(PK_X)
    vg_exact = sl.value_and_grad(pk_loss(None))(PK_X)
    assert vg_ode[0] == pytest.approx(vg_exact[0], rel=1e-9)
    np.testing.assert_allclose(vg_ode[1], vg_exact[1], rtol=1e-7, atol=1e-9)


def test_one_compartment_forward_mode_closed_form():
    rng = np.random.default_rng(7)
    v = rng.standard_normal(PK_X.size)
    _, t_ode = sl.jvp(pk_loss(lambda *a: sl.ode_rk45(*a, **TIGHT)))(PK_X, v)
    _, t_exact = sl.jvp(pk_loss(None))(PK_X, v)
    assert t_ode == pytest.approx(t_exact, rel=1e-7)


@pytest.mark.parametrize("name", ["rk45", "bdf", "adjoint"])
def test_one_compartment_hessian_closed_form(name):
    # forward-over-reverse through the solution: the sensitivity system is itself
    # differentiated in forward mode (its tangent system is integrated)
    solve = SECOND_ORDER[name]
    x = PK_X[[0, 1, 2, 3, 4, 6, 9]]            # ka, ke, g0, c0, t0 and two times

    def L(z, exact=False):
        full = sl.concatenate([z[:5], np.array([0.5]), z[5:6], np.array([2.0, 4.0]),
                               z[6:7]])
        return pk_loss(None if exact else solve)(full)
    H = sl.hessian(L)(x)
    He = sl.hessian(lambda z: L(z, exact=True))(x)
    np.testing.assert_allclose(H, He, rtol=1e-6, atol=1e-9)


def test_one_compartment_hessian_against_differences_of_gradients():
    # the check: sl.hessian(loss(ode(p))) vs central differences of sl.grad
    # (the gradients at tight tolerance, so that their noise / h stays small)
    ts = np.array([0.5, 1.0, 3.0])

    def loss(p, solve=dict(SOLVERS)["rk45"]):
        Y = solve(one_cpt, np.array([100.0, 0.0]), 0.0, ts, p[0], p[1])
        return sl.sum(sl.log(Y[:, 1]))
    p = np.array([1.3, 0.4])
    H = sl.hessian(lambda p: loss(p, SECOND_ORDER["rk45"]))(p)
    Hfd = fd_jac(sl.grad(loss), p, h=1e-4)
    np.testing.assert_allclose(H, (Hfd + Hfd.T) / 2, rtol=1e-5, atol=1e-6)


def test_reverse_over_reverse_matches_the_hessian():
    solve = SECOND_ORDER["rk45"]
    ts = np.array([0.5, 2.0])

    def loss(p):
        Y = solve(one_cpt, sl.stack([p[2], 1.0]), 0.0, ts, p[0], p[1])
        return sl.sum(sl.log(Y))
    p = np.array([1.3, 0.4, 50.0])
    v = np.array([0.3, -0.7, 0.01])
    hv = sl.grad(lambda q: sl.sum(sl.grad(loss)(q) * v))(p)
    np.testing.assert_allclose(hv, sl.hessian(loss)(p) @ v, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(hv, sl.hessian(pk_hessian_exact_loss)(p) @ v,
                               rtol=1e-6, atol=1e-9)


def pk_hessian_exact_loss(p):
    Y = one_cpt_exact(p[0], p[1], p[2], 1.0, 0.0, np.array([0.5, 2.0]))
    return sl.sum(sl.log(Y))


# --------------------------------------------------------------------------------------
# a nonlinear system at random points: finite differences, and the methods agree
# --------------------------------------------------------------------------------------
def mm_pk(t, y, theta, dose):
    """Absorption into a compartment with Michaelis-Menten elimination, a forcing term
    that depends on t, and plain data (``dose``, an array) among the arguments."""
    ka, vm, km = theta[0], theta[1], theta[2]
    absorbed = ka * y[0]
    return sl.stack([-absorbed + dose[0] * sl.exp(-t),
                     absorbed - vm * y[1] / (km + y[1])])


@pytest.mark.parametrize("seed", [11, 12])
@pytest.mark.parametrize("name,solve", SOLVERS, ids=SOLVER_IDS)
def test_nonlinear_gradient_against_finite_differences(name, solve, seed):
    rng = np.random.default_rng(seed)
    dose = np.array([0.5])
    x = np.concatenate([rng.uniform(0.5, 2.0, 2),          # y0
                        [rng.uniform(-0.3, 0.0)],            # t0
                        np.sort(rng.uniform(0.2, 3.0, 3)),   # ts
                        rng.uniform(0.5, 2.0, 3)])           # theta
    W = rng.standard_normal((3, 2))

    def L(x):
        return sl.sum(solve(mm_pk, x[:2], x[2], x[3:6], x[6:], dose) * W)
    g = sl.grad(L)(x)
    np.testing.assert_allclose(g, central_gradient(L, x, h=1e-4), rtol=1e-6, atol=1e-7)


def test_sensitivities_adjoint_and_forward_mode_agree():
    rng = np.random.default_rng(21)
    theta = rng.uniform(0.5, 2.0, 3)
    ts = np.linspace(0.3, 4.0, 6)
    W = rng.standard_normal((6, 2))
    dose = np.array([0.3])

    def L(solve):
        return lambda th: sl.sum(solve(mm_pk, np.array([1.0, 0.2]), 0.0, ts, th, dose) * W)
    g_fwd_sens = sl.grad(L(dict(SOLVERS)["rk45"]))(theta)
    g_adj = sl.grad(L(dict(SOLVERS)["adjoint"]))(theta)
    g_adj_bdf = sl.grad(L(dict(SOLVERS)["adjoint-bdf"]))(theta)
    g_bdf = sl.grad(L(dict(SOLVERS)["bdf"]))(theta)
    J_fwd = sl.jacobian_forward(L(dict(SOLVERS)["rk45"]))(theta)
    for g in (g_adj, g_adj_bdf, g_bdf, J_fwd):
        np.testing.assert_allclose(g, g_fwd_sens, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("name", ["rk45", "adjoint", "bdf", "adjoint-bdf"])
def test_many_parameters_closed_form(name):
    # a forcing with P = 41 coefficients (the adjoint's cost does not grow with P; the
    # BDF systems are large enough for sparse Jacobians): y' = -k y + sum_j c_j
    # sin(w_j t) has the closed form y(t) = e^{-kt} y0
    #     + sum_j c_j (k sin(w_j t) - w_j cos(w_j t) + w_j e^{-kt}) / (k^2 + w_j^2)
    P = 41
    rng = np.random.default_rng(5)
    c = rng.standard_normal(P) * 0.1
    w = np.linspace(0.5, 4.0, P)

    def forced(t, y, k, coef):
        return sl.stack([-k * y[0] + sl.sum(coef * sl.sin(w * t))])
    ts = np.array([0.5, 1.5])

    def L(solve):
        return lambda z: sl.sum(sl.square(solve(forced, np.array([1.0]), 0.0, ts, z[0],
                                                z[1:])))

    def L_exact(z):
        k, coef = z[0], z[1:]
        ys = [sl.exp(-k * t) + sl.sum(coef * (k * np.sin(w * t) - w * np.cos(w * t)
                                              + w * sl.exp(-k * t)) / (k * k + w * w))
              for t in ts]
        return sl.sum(sl.square(sl.stack(ys)))
    z = np.concatenate([[0.7], c])
    solve = dict(solvers(bdf_tol=1e-9))[name]
    np.testing.assert_allclose(sl.grad(L(solve))(z), sl.grad(L_exact)(z), rtol=1e-6,
                               atol=1e-9)


def test_adjoint_with_only_output_times_traced():
    decay = lambda t, y: -0.5 * y  # noqa: E731
    g = sl.grad(lambda t: sl.sum(sl.ode_adjoint(decay, [2.0], 0.0, sl.stack([t, 2 * t]))))
    assert g(1.0) == pytest.approx(-np.exp(-0.5) - 2 * np.exp(-1.0), rel=1e-6)


def test_adjoint_hessian_against_differences_of_gradients():
    solve = dict(SOLVERS)["adjoint"]
    ts = np.array([0.5, 2.0])
    dose = np.array([0.4])

    def L(x):
        Y = solve(mm_pk, x[:2], 0.0, ts, x[2:], dose)
        return sl.sum(sl.log(Y))
    x = np.array([1.0, 0.3, 1.2, 0.8, 0.5])
    H = sl.hessian(L)(x)
    Hfd = fd_jac(sl.grad(L), x, h=1e-4)
    np.testing.assert_allclose(H, (Hfd + Hfd.T) / 2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(H, H.T, rtol=1e-7, atol=1e-8)


def test_grad_of_a_function_of_the_gradient_with_ode_adjoint():
    # reverse-over-reverse through ode_adjoint: the outer sweep differentiates the
    # inner rule (forward sensitivities under nesting); compare with hvp
    solve = SECOND_ORDER["adjoint"]
    ts = np.array([1.0, 2.0])

    def L(p):
        return sl.sum(sl.log(solve(one_cpt, np.array([10.0, 1.0]), 0.0, ts, p[0], p[1])))
    p = np.array([1.1, 0.3])
    v = np.array([1.0, -2.0])
    rr = sl.grad(lambda q: sl.sum(sl.grad(L)(q) * v))(p)
    np.testing.assert_allclose(rr, sl.hvp(L)(p, v), rtol=1e-6, atol=1e-9)


# --------------------------------------------------------------------------------------
# stiff problems with BDF
# --------------------------------------------------------------------------------------
def robertson(t, y, logk):
    k = sl.exp(logk)
    a = -k[0] * y[0] + k[2] * y[1] * y[2]
    c = k[1] * y[1] ** 2
    return sl.stack([a, -a - c, c])


ROB_LOGK = np.log([0.04, 3e7, 1e4])
ROB_Y0 = np.array([1.0, 0.0, 0.0])
ROB_TS = np.array([0.4, 4.0])


def test_robertson_value_against_a_reference():
    Y = sl.ode_bdf(robertson, ROB_Y0, 0.0, ROB_TS, ROB_LOGK, rel_tol=1e-9, abs_tol=1e-12)
    k = np.exp(ROB_LOGK)

    def rhs(t, y):
        return [-k[0] * y[0] + k[2] * y[1] * y[2],
                k[0] * y[0] - k[2] * y[1] * y[2] - k[1] * y[1] ** 2, k[1] * y[1] ** 2]
    ref = solve_ivp(rhs, (0, ROB_TS[-1]), ROB_Y0, method="Radau", t_eval=ROB_TS,
                    rtol=1e-12, atol=1e-14).y.T
    np.testing.assert_allclose(Y, ref, rtol=1e-6, atol=1e-11)
    np.testing.assert_allclose(Y.sum(axis=1), 1.0, atol=1e-9)   # mass is conserved


def test_robertson_gradient_bdf_against_differences_and_adjoint():
    W = np.array([[1.0, 1e4, 0.0], [-1.0, 2e4, 2.0]])

    def L(solve):
        return lambda logk: sl.sum(solve(robertson, ROB_Y0, 0.0, ROB_TS, logk) * W)
    bdf = L(lambda *a: sl.ode_bdf(*a, rel_tol=1e-10, abs_tol=1e-14))
    g = sl.grad(bdf)(ROB_LOGK)
    np.testing.assert_allclose(g, central_gradient(bdf, ROB_LOGK, h=1e-5), rtol=1e-5, atol=1e-8)
    tol = dict(rel_tol_forward=1e-10, abs_tol_forward=1e-14, rel_tol_backward=1e-10,
               abs_tol_backward=1e-10, rel_tol_quadrature=1e-10, abs_tol_quadrature=1e-10)
    g_adj = sl.grad(L(lambda *a: sl.ode_adjoint(*a, solver_forward="bdf", **tol)))(ROB_LOGK)
    np.testing.assert_allclose(g_adj, g, rtol=1e-5, atol=1e-8)


def test_rk45_on_a_stiff_problem_fails_early_and_says_so():
    with pytest.raises(sl.SolverError, match=r"ode_rk45: the problem is stiff.*use ode_bdf"):
        sl.ode_rk45(robertson, ROB_Y0, 0.0, [1e4], ROB_LOGK, max_num_steps=10**5)


def test_michaelis_menten_elimination_bdf_matches_rk45():
    # the posteriordb one_comp_mm_elim_abs right-hand side (testkit: a branch on t > 0)
    ts = np.arange(0.5, 10.01, 0.5)
    x_r = np.array([30.0, 2.0])

    def lp(solve):
        return lambda th: sl.sum(sl.log(solve(one_comp_mm, np.array([0.0]), 0.0, ts, th,
                                                x_r)[:, 0]))
    th = np.array([1.0, 2.0, 3.0])
    vb, gb = sl.value_and_grad(lp(sl.ode_bdf))(th)
    vr, gr = sl.value_and_grad(lp(lambda *a: sl.ode_rk45(*a, **TIGHT)))(th)
    assert vb == pytest.approx(vr, rel=1e-8)
    np.testing.assert_allclose(gb, gr, rtol=1e-6)


# --------------------------------------------------------------------------------------
# arguments and edge cases
# --------------------------------------------------------------------------------------
def test_plain_call_returns_an_array_and_data_arguments_pass_through():
    def f(t, y, k, n, table):
        return -k * y * n + table[0]
    Y = sl.ode_rk45(f, [1.0], 0, [1.0, 2.0], 0.5, 2, np.array([0.0]), **TIGHT)
    assert type(Y) is np.ndarray and Y.shape == (2, 1)
    np.testing.assert_allclose(Y[:, 0], np.exp(-np.array([1.0, 2.0])), rtol=1e-9)
    # only the traced argument gets a derivative; ints and arrays are data
    g = sl.grad(lambda k: sl.ode_rk45(f, [1.0], 0, [1.0], k, 2, np.array([0.0]),
                                      **TIGHT)[0, 0])(0.5)
    assert g == pytest.approx(-2 * np.exp(-1.0), rel=1e-8)


def test_repeated_output_times_and_traced_values_in_lists():
    decay = lambda t, y, k: -k * y  # noqa: E731

    def L(x):
        Y = sl.ode_rk45(decay, [x[0], 2.0], 0.0, [x[1], x[1], 1.5], x[2], **TIGHT)
        return sl.sum(Y)
    x = np.array([1.0, 0.5, 0.8])

    def exact(x):
        return sum((x[0] + 2.0) * np.exp(-x[2] * t) for t in (x[1], x[1], 1.5))
    np.testing.assert_allclose(sl.grad(L)(x), central_gradient(exact, x, h=1e-6), rtol=1e-7)


def test_list_of_traced_scalars_as_an_argument_is_one_vector():
    def f(t, y, theta):
        return sl.stack([-theta[0] * y[0], theta[0] * y[0] - theta[1] * y[1]])

    def L(p):
        return sl.sum(sl.ode_rk45(f, [1.0, 0.0], 0.0, [1.0], [p[0], p[1]], **TIGHT))
    p = np.array([1.3, 0.4])
    want = sl.grad(lambda q: sl.sum(one_cpt_exact(q[0], q[1], 1.0, 0.0, 0.0,
                                                  np.array([1.0]))))(p)
    np.testing.assert_allclose(sl.grad(L)(p), want, rtol=1e-8)


def test_vector_abs_tol_for_the_adjoint_and_solver_choices():
    def L(k):
        return sl.sum(sl.ode_adjoint(one_cpt, np.array([100.0, 1e-3]), 0.0, [1.0, 2.0], k,
                                     0.2, abs_tol_forward=[1e-8, 1e-12],
                                     abs_tol_backward=np.array([1e-10, 1e-10]),
                                     rel_tol_forward=1e-10, rel_tol_backward=1e-10,
                                     rel_tol_quadrature=1e-10, abs_tol_quadrature=1e-10,
                                     solver_forward="bdf", solver_backward="rk45"))
    want = sl.grad(lambda k: sl.sum(one_cpt_exact(k, 0.2, 100.0, 1e-3, 0.0,
                                                  np.array([1.0, 2.0]))))(1.1)
    assert sl.grad(L)(1.1) == pytest.approx(want, rel=1e-7)


def test_output_of_f_may_be_a_list_and_depend_on_time_only():
    def f(t, y):
        return [sl.cos(t) if False else np.cos(t)]      # noqa: SIM210 - plain in t
    Y = sl.ode_rk45(f, [0.0], 0.0, [1.0, 2.0], **TIGHT)
    np.testing.assert_allclose(Y[:, 0], np.sin([1.0, 2.0]), rtol=1e-9)
    # derivative w.r.t. an output time: dY/dt = f(t, Y) = cos(t)
    g = sl.grad(lambda t: sl.ode_rk45(f, [0.0], 0.0, sl.stack([t]), **TIGHT)[0, 0])(1.0)
    assert g == pytest.approx(np.cos(1.0), rel=1e-12)


@pytest.mark.parametrize("bad,exc,match", [
    (dict(ts=[1.0, 0.5]), sl.DomainError, r"ts must be sorted.*ts\[1\] = 0.5 < ts\[0\] = 1"),
    (dict(ts=[0.0, 1.0]), sl.DomainError, r"ts\[0\] = 0 <= t0 = 0"),
    (dict(ts=[]), ValueError, r"ts must be a non-empty vector"),
    (dict(ts=[1.0, np.nan]), sl.DomainError, r"ts must be finite"),
    (dict(y0=np.ones((2, 1))), ValueError, r"y0 must be a non-empty vector.*\(2, 1\)"),
    (dict(y0=[]), ValueError, r"y0 must be a non-empty vector"),
    (dict(y0=[1.0, np.inf]), sl.DomainError, r"y0 must be finite"),
    (dict(t0=np.nan), sl.DomainError, r"t0 must be finite"),
    (dict(t0=[0.0, 1.0]), ValueError, r"t0 must be a scalar"),
    (dict(k=np.nan), sl.DomainError, r"args\[0\] must be finite"),
    (dict(rel_tol=-1.0), ValueError, r"rel_tol must be positive"),
    (dict(abs_tol="x"), ValueError, r"abs_tol must be a positive number"),
    (dict(max_num_steps=0), ValueError, r"max_num_steps must be a positive integer"),
    (dict(max_num_steps=2.5), ValueError, r"max_num_steps must be a positive integer"),
])
def test_bad_arguments_are_named(bad, exc, match):
    kw = dict(y0=[1.0, 2.0], t0=0.0, ts=[1.0, 2.0], k=0.5)
    opts = {k: bad.pop(k) for k in list(bad) if k in ("rel_tol", "abs_tol", "max_num_steps")}
    kw.update(bad)
    with pytest.raises(exc, match=match):
        sl.ode_rk45(lambda t, y, k: -k * y, kw["y0"], kw["t0"], kw["ts"], kw["k"], **opts)


def test_f_returning_the_wrong_shape_is_a_model_error():
    with pytest.raises(sl.ModelError, match=r"ode_bdf: f\(t, y, \.\.\.\) must return dy/dt "
                                            r"as a vector of length 2.*shape \(3,\)"):
        sl.ode_bdf(lambda t, y: np.zeros(3), [1.0, 2.0], 0.0, [1.0])
    with pytest.raises(sl.ModelError, match=r"length 1.*shape \(\)"):
        sl.ode_rk45(lambda t, y: 0.0, [1.0], 0.0, [1.0])


def test_a_traced_value_captured_by_f_is_refused():
    def L(k):
        return sl.sum(sl.ode_rk45(lambda t, y: -k * y, [1.0], 0.0, [1.0]))
    with pytest.raises(sl.DifferentiationError, match="closure.*Pass every parameter"):
        sl.grad(L)(0.5)


def test_bad_solver_names_for_the_adjoint():
    with pytest.raises(ValueError, match=r"solver_forward must be 'rk45' or 'bdf'"):
        sl.ode_adjoint(lambda t, y: -y, [1.0], 0.0, [1.0], solver_forward="adams")
    with pytest.raises(ValueError, match=r"abs_tol_backward must be a scalar or a vector "
                                         r"of length 1"):
        sl.ode_adjoint(lambda t, y: -y, [1.0], 0.0, [1.0], abs_tol_backward=[1.0, 2.0])


def test_max_num_steps_exceeded_names_solver_time_and_steps():
    with pytest.raises(sl.SolverError, match=r"ode_rk45: max_num_steps = 5 exceeded between "
                                             r"t = 0 and the next output time 100; reached "
                                             r"t = \S+ after 5 steps"):
        sl.ode_rk45(lambda t, y: -y, [1.0], 0.0, [100.0], max_num_steps=5, rel_tol=1e-10,
                    abs_tol=1e-10)
    # the budget is per output interval: many outputs with few steps between them pass
    Y = sl.ode_rk45(lambda t, y: -y, [1.0], 0.0, np.linspace(0.1, 10, 100), max_num_steps=5)
    assert Y.shape == (100, 1)


def test_a_solution_that_blows_up_is_a_solver_error():
    # y' = y^2, y(0) = 1: y = 1 / (1 - t) is infinite at t = 1
    for solve in (sl.ode_rk45, sl.ode_bdf):
        with pytest.raises(sl.SolverError, match=r"(failed|not finite).* at t = (0\.9\d*|1) "
                                                 r"after \d+ steps"):
            solve(lambda t, y: y * y, [1.0], 0.0, [2.0], rel_tol=1e-6, abs_tol=1e-6)


@pytest.mark.parametrize("solve", [sl.ode_rk45, sl.ode_bdf, sl.ode_adjoint])
def test_a_derivative_that_is_nan_at_the_start_is_a_solver_error(solve):
    # scipy sizes the first step from f(t0, y0): a NaN there made the step size NaN
    # and scipy's step loop spun forever (a sampler proposing V = 0 in a PK model
    # hung a chain for 40 minutes). The alarm turns a regression into a failure.
    import signal

    def hang(*_):
        raise TimeoutError("the solve did not return")
    old = signal.signal(signal.SIGALRM, hang)
    signal.alarm(30)
    try:
        # y' = -k y / (V y) with V = 0: inf / inf at the start
        with pytest.raises(sl.SolverError, match=r"derivative at the initial state is "
                                                 r"not finite \(components \[0\]\) at t = 0"):
            solve(lambda t, y, k: -k * y / (0.0 * y), [1.0], 0.0, [1.0], 2.0)
        with pytest.raises(sl.SolverError, match=r"not finite"):
            sl.grad(lambda k: sl.sum(solve(lambda t, y, k: -k * y / (0.0 * y), [1.0], 0.0,
                                           [1.0], k)))(2.0)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_solver_errors_reject_proposals_and_surface_from_gradients():
    assert issubclass(sl.SolverError, ArithmeticError)
    with pytest.raises(sl.SolverError, match="ode_rk45 \\(sensitivities\\)"):
        sl.grad(lambda k: sl.sum(sl.ode_rk45(lambda t, y, k: k * y * y, [1.0], 0.0, [2.0],
                                             k)))(1.0)
    with pytest.raises(sl.SolverError, match="ode_adjoint"):
        sl.grad(lambda k: sl.sum(sl.ode_adjoint(lambda t, y, k: k * y * y, [1.0], 0.0,
                                                [2.0], k)))(1.0)


# --------------------------------------------------------------------------------------
# inside models: retaped gradients, Hessians, third order
# --------------------------------------------------------------------------------------
def test_compiled_gradient_replays_the_solve_bit_for_bit():
    # the node is an ordinary primitive record: sl.compile replays it (no fallback
    # warning; warnings are errors here) and gives the eager tape's numbers exactly
    ts = np.array([0.5, 1.0, 2.0, 4.0])

    def L(x):
        Y = sl.ode_rk45(one_cpt, sl.stack([x[2], 0.0]), 0.0, ts, x[0], x[1])
        return sl.sum(sl.log(Y[:, 1]))
    vg = sl.compile(L, np.array([1.2, 0.3, 100.0]))
    for x in (np.array([1.0, 0.2, 90.0]), np.array([0.7, 0.5, 50.0])):
        v, g = vg(x)
        v0, g0 = sl.value_and_grad(L)(x)
        assert v == v0 and np.array_equal(g, g0)
    with pytest.raises(sl.DomainError, match=r"ode_rk45: y0 must be finite"):
        vg(np.array([1.0, 0.2, np.nan]))


class OneCompartment(sl.Model):
    T = sl.data.int(lower=1)
    ts = sl.data.vector("T")
    conc = sl.data.vector("T")
    ka = sl.param.real(lower=0)
    ke = sl.param.real(lower=0)
    sigma = sl.param.real(lower=0)

    def log_prob(self, ka, ke, sigma):
        Y = sl.ode_bdf(one_cpt, np.array([100.0, 0.0]), 0.0, self.ts, ka, ke,
                       rel_tol=1e-9, abs_tol=1e-9)
        lp = sl.lognormal_lpdf(ka, 0.0, 1.0) + sl.lognormal_lpdf(ke, -1.0, 1.0)
        lp = lp + sl.normal_lpdf(sigma, 0.0, 1.0)
        return lp + sl.lognormal_lpdf(self.conc, sl.log(Y[:, 1]), sigma)


def test_model_with_an_ode_gradient_and_hessian():
    m = OneCompartment(T=5, ts=[0.5, 1.0, 2.0, 4.0, 8.0], conc=[40.0, 55.0, 55.0, 38.0, 15.0])
    x = m.unconstrain(dict(ka=1.2, ke=0.3, sigma=0.2))
    lp, g = m.log_density_gradient(x)
    assert lp == pytest.approx(m.log_density(x), rel=1e-8)
    np.testing.assert_allclose(g, central_gradient(m.log_density, x, h=1e-5), rtol=1e-5, atol=1e-6)
    _, _, H = m.log_density_hessian(x)
    Hfd = fd_jac(lambda z: m.log_density_gradient(z)[1], x, h=1e-4)
    np.testing.assert_allclose(H, (Hfd + Hfd.T) / 2, rtol=1e-4, atol=1e-5)


def test_third_order_through_the_solution():
    # Riemannian HMC differentiates the Hessian once more: y(1) = b exp(-k)
    decay = lambda t, y, k: -k * y  # noqa: E731

    def L(x):
        return sl.ode_rk45(decay, sl.stack([x[1]]), 0.0, [1.0], x[0], **MEDIUM)[0, 0]
    x = np.array([0.5, 2.0])
    e = np.exp(-0.5)
    T = sl.grad_hessian(L)(x)
    assert T[0, 0, 0] == pytest.approx(-2.0 * e, rel=1e-7)
    assert T[0, 0, 1] == pytest.approx(e, rel=1e-7)
    assert T[1, 1, 1] == 0.0
    M = np.array([[1.0, 0.2], [0.2, 0.5]])
    # tr(M H) with H = [[b e, -e], [-e, 0]]: d/dk = -M00 b e + 2 M01 e, d/db = M00 e
    np.testing.assert_allclose(sl.grad_trace_mat_hessian(L)(x, M),
                               [-M[0, 0] * 2.0 * e + 2 * M[0, 1] * e, M[0, 0] * e],
                               rtol=1e-7)


def test_a_primitive_without_forward_rule_in_f():
    # first order needs only VJPs (the forward pass falls back to reverse sweeps);
    # forward mode through the solution needs f's JVPs and says so
    @sl.primitive
    def cube(x):
        return x ** 3
    sl.defvjp(cube, lambda g, ans, x: 3.0 * g * x ** 2)

    def f(t, y, k):
        return -k * cube(y)                        # vectorised: 3 states
    y0 = np.array([1.0, 0.5, 2.0])

    def L(k):
        return sl.sum(sl.ode_rk45(f, y0, 0.0, [1.0], k, **TIGHT))
    # y' = -k y^3: y(t) = y0 / sqrt(1 + 2 k y0^2 t); dy/dk = -y0^3 t / (1 + 2 k y0^2 t)^1.5
    want = float(np.sum(-y0 ** 3 / (1 + 2 * 0.7 * y0 ** 2) ** 1.5))
    assert sl.grad(L)(0.7) == pytest.approx(want, rel=1e-8)
    with pytest.raises(sl.DifferentiationError, match="cube.*JVP"):
        sl.hessian(lambda k: L(k[0]))(np.array([0.7]))


# --------------------------------------------------------------------------------------
# the retaped right-hand side (sl.compile of f inside the solver)
# --------------------------------------------------------------------------------------
@pytest.fixture
def retape_soon(monkeypatch):
    """Retape f after 2 evaluations (instead of dozens), with an empty cache."""
    from stanlite.functor import ode_rhs
    monkeypatch.setattr(ode_rhs, "RETAPE_AFTER", 2)
    monkeypatch.setattr(ode_rhs, "_cache", type(ode_rhs._cache)())
    return ode_rhs


def _eager_and_retaped(ode_rhs, fun, x):
    saved = ode_rhs.RETAPE_AFTER
    ode_rhs.RETAPE_AFTER = None
    try:
        eager = sl.value_and_grad(fun)(x)
    finally:
        ode_rhs.RETAPE_AFTER = saved
    return eager, sl.value_and_grad(fun)(x), sl.value_and_grad(fun)(x)


def branchy(t, y, theta, x_r):
    """The posteriordb right-hand side: a branch on t, data in a tuple."""
    ka, km, vm = theta[0], theta[1], theta[2]
    dose = 0.0
    if t > 0.5:                                   # the branch flips during the solve
        dose = sl.exp(-ka * t) * x_r[0] * ka / x_r[1]
    return sl.stack([dose - (vm / x_r[1]) * y[0] / (km + y[0])])


@pytest.mark.parametrize("solve", [sl.ode_bdf, sl.ode_rk45, sl.ode_adjoint])
def test_retaped_rhs_gives_the_eager_numbers_bit_for_bit(retape_soon, solve, monkeypatch):
    # the Python replay is bit for bit; the compiled interpreter (the default) agrees
    # to rounding, tested in test_ode_compiled.py
    monkeypatch.setenv("STANLITE_BACKEND", "python")
    ts = np.array([0.25, 1.0, 3.0])

    def lp(th):
        return sl.sum(sl.log(solve(branchy, np.array([1.0]), 0.0, ts, th, (30.0, 2.0))))
    th = np.array([1.0, 2.0, 3.0])
    (v0, g0), (v1, g1), (v2, g2) = _eager_and_retaped(retape_soon, lp, th)
    assert v0 == v1 == v2
    assert np.array_equal(g0, g1) and np.array_equal(g0, g2)
    assert any(e[1] is not None and e[1].ok for e in retape_soon._cache.values())


def test_retaped_rhs_keys_on_the_data(retape_soon, monkeypatch):
    # the same f with other data (other arrays, other numbers) is another program
    monkeypatch.setenv("STANLITE_BACKEND", "python")         # bit for bit (see above)
    ts = np.array([1.0, 2.0])

    def grad_with(dose):
        return sl.grad(lambda k: sl.sum(sl.ode_rk45(mm_pk, np.array([1.0, 0.2]), 0.0, ts, k,
                                                    dose, **TIGHT)))(np.array([1.2, 0.8, 0.5]))
    first = grad_with(np.array([0.5]))
    other = grad_with(np.array([1.5]))
    retape_soon.RETAPE_AFTER = None
    assert np.array_equal(first, grad_with(np.array([0.5])))
    assert np.array_equal(other, grad_with(np.array([1.5])))
    assert not np.allclose(first, other)


def test_retaping_falls_back_quietly(retape_soon):
    # f reads a value with value_of(): the recording cannot be replayed; the solver
    # goes on with the eager tape, without a warning (warnings are errors here)
    def f(t, y, k):
        scale = 1.0 if float(sl.value_of(y[0])) > -1.0 else 2.0
        return -k * y * scale
    g = sl.grad(lambda k: sl.ode_rk45(f, [1.0], 0.0, [1.0], k, **TIGHT)[0, 0])(0.5)
    assert g == pytest.approx(-np.exp(-0.5), rel=1e-8)
    tried = [e[1] for e in retape_soon._cache.values() if e[1] is not None]
    assert tried and not any(rt.ok for rt in tried)


def test_retaping_does_not_change_the_choice_of_strategy(retape_soon):
    # vectorised f with 5 states: one forward pass beats 5 replays; scalar f with 2
    # states: sweeps (retaped)
    from stanlite.functor.ode_rhs import OdeRHS

    def vec(t, y, a):
        return a * y - y ** 3
    rhs = OdeRHS(vec, 5, "ode_rk45")
    args = (np.linspace(0.5, 1.0, 5),)
    for _ in range(5):
        rhs.tangent(0.1, np.ones(5), args, (0,), np.zeros((10, 5)), (np.ones((10, 5)),))
    assert rhs._forward is True
    rhs2 = OdeRHS(one_cpt, 2, "ode_rk45")
    for _ in range(5):
        f, Jy, Jp = rhs2.jacobians(0.1, np.array([1.0, 0.5]), (1.2, 0.3), (0, 1))
    np.testing.assert_array_equal(Jy, [[-1.2, 0.0], [1.2, -0.3]])
    np.testing.assert_array_equal(np.hstack(Jp), [[-1.0, 0.0], [1.0, -0.5]])
    assert rhs2._forward is False
    assert any(e[0] is not None and e[0].ok for e in rhs2._retaped.values())
