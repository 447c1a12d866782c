"""The reverse-mode core: Var, operators, broadcasting, tape, nesting, functionals."""

import gc
import threading
import tracemalloc

import numpy as np
import pytest

import stanlite as sl
from stanlite.autodiff import tape as tape_mod
from stanlite.errors import DifferentiationError


# --- Var basics -------------------------------------------------------------------------
def test_var_holds_float64_values_and_shapes():
    with sl.nested():
        s = sl.Var(2)
        assert type(s.value) is float and s.shape == () and s.ndim == 0
        v = sl.Var([1, 2, 3])
        assert v.value.dtype == np.float64 and v.shape == (3,) and len(v) == 3
        m = sl.Var(np.ones((2, 3)))
        assert m.shape == (2, 3) and m.T.shape == (3, 2) and m.size == 6
        assert sl.value_of(sl.Var(1.5)) == 1.5 and sl.Var(1.5).value == 1.5
        assert "level=" in repr(v)


def test_comparisons_return_plain_booleans():
    with sl.nested():
        x = sl.Var(np.array([1.0, -2.0, 3.0]))
        assert isinstance(x > 0, np.ndarray) and (x > 0).dtype == bool
        assert list(x > 0) == [True, False, True]
        y = sl.Var(2.0)
        assert (y < 3) is True or (y < 3) == np.True_
        assert bool(y >= 2.0) and not bool(y != 2.0)
        assert list(x == x) == [True, True, True]


@pytest.mark.parametrize("op", [
    lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / b,
    lambda a, b: a ** 2 + b ** 3, lambda a, b: abs(a) * b, lambda a, b: -a * b,
    lambda a, b: (a + 3) * (2 - b) / (4 + b * b), lambda a, b: 2.0 / (1.0 + a * a) + 3 ** b,
    lambda a, b: (a * a + 1.0) ** b,
])
@pytest.mark.parametrize("shapes", [((), ()), ((3,), ()), ((), (4,)), ((3,), (3,)),
                                    ((3, 1), (1, 4)), ((2, 3), (3,)), ((4, 1, 3), (2, 1))])
def test_operators_broadcast_against_finite_differences(op, shapes, rng):
    a = rng.uniform(0.5, 2.0, shapes[0])
    b = rng.uniform(0.5, 2.0, shapes[1])
    sl.assert_grad(op, (a, b))


def test_operators_with_constants_of_every_kind(rng):
    x = rng.uniform(0.5, 2.0, 4)
    c = rng.uniform(0.5, 2.0, 4)
    sl.assert_grad(lambda x: 3 * x + x * 2.5 - 1 - x / 2 + 1 / x - c * x + x * c, x)
    sl.assert_grad(lambda x: x ** 3 + 2 ** x + x ** c + c ** x + x ** 0.5, x)
    sl.assert_grad(lambda x: [1.0, 2.0, 3.0, 4.0] * x, x)


def test_pow_at_zero_base_has_finite_exponent_derivative():
    g = sl.grad(lambda z: z[0] ** z[1])(np.array([0.0, 2.0]))
    assert g[0] == 0.0 and g[1] == 0.0


def test_abs_has_zero_derivative_at_zero():
    assert sl.grad(lambda x: sl.sum(abs(x)))(np.array([0.0, -2.0, 3.0])).tolist() == [0, -1, 1]


# --- backward() and the tape --------------------------------------------------------
def test_backward_on_a_root_recording_then_the_region_is_released():
    x = sl.Var(np.array([1.0, 2.0]))
    y = sl.sum(x * x)
    tape = y.tape
    assert len(tape.nodes) >= 2
    y.backward()
    np.testing.assert_allclose(x.adj, [2.0, 4.0])
    assert tape.nodes == []
    with pytest.raises(DifferentiationError):
        y.backward()
    sl.recover_memory()


def test_backward_retain_allows_a_second_sweep_and_adjoints_accumulate():
    with sl.nested():
        x = sl.Var(3.0)
        y = x * x
        y.backward(retain=True)
        assert x.adj == 6.0
        y.tape.zero_adjoints()
        x.adj = None
        y.backward(seed=2.0)
        assert x.adj == 12.0


def test_backward_from_a_closed_scope_raises():
    with sl.nested():
        x = sl.Var(1.0)
        y = x * 2.0
    with pytest.raises(DifferentiationError, match="released"):
        y.backward()


def test_nested_scope_inside_an_outer_recording():
    with sl.nested():
        x = sl.Var(np.array([1.0, 2.0]))
        outer = sl.sum(x * x)
        with sl.nested() as inner_tape:
            y = sl.Var(np.array([3.0]))
            z = sl.sum(y * y * 2.0)
            z.backward()
            np.testing.assert_allclose(y.adj, [12.0])
            assert inner_tape.level == x.tape.level + 1
        assert inner_tape.nodes == [] and not inner_tape.open
        outer.backward()
        np.testing.assert_allclose(x.adj, [2.0, 4.0])


def test_tape_stack_restored_after_an_exception():
    depth = len(tape_mod._state.stack)

    def bad(x):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        sl.grad(bad)(np.ones(2))
    assert len(tape_mod._state.stack) == depth
    assert gc.isenabled()


# --- functionals ------------------------------------------------------------------------
def test_grad_value_and_grad_and_argnums():
    f = lambda x, y: sl.sum(x * y) + sl.sum(x ** 2)  # noqa: E731
    x, y = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    v, g = sl.value_and_grad(f)(x, y)
    assert v == 16.0 and np.allclose(g, [5.0, 8.0])
    gx, gy = sl.grad(f, argnum=(0, 1))(x, y)
    assert np.allclose(gx, [5.0, 8.0]) and np.allclose(gy, x)
    assert sl.grad(lambda s: s * s * s)(2.0) == 12.0


def test_grad_of_a_constant_function_is_zero_and_vector_output_raises():
    assert sl.grad(lambda x: 3.0)(np.ones(3)).tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(DifferentiationError, match="scalar"):
        sl.grad(lambda x: x * 2.0)(np.ones(3))


def test_jacobian_rows_shapes_and_values(rng):
    A = rng.standard_normal((3, 4))
    x = rng.standard_normal(4)
    J = sl.jacobian(lambda x: A @ sl.sin(x))(x)
    np.testing.assert_allclose(J, A * np.cos(x))
    J2 = sl.jacobian(lambda x: sl.reshape(x * x, (2, 2)))(x)
    assert J2.shape == (2, 2, 4)
    np.testing.assert_allclose(J2.reshape(4, 4), np.diag(2 * x))
    assert sl.jacobian(lambda x: x)(x).tolist() == np.eye(4).tolist()


def test_vjp_matches_jacobian_transpose(rng):
    A = rng.standard_normal((3, 4))
    x, u = rng.standard_normal(4), rng.standard_normal(3)
    y, (g,) = sl.vjp(lambda x: A @ (x * x), x, cotangent=u)
    np.testing.assert_allclose(g, (A * 2 * x).T @ u)
    np.testing.assert_allclose(y, A @ (x * x))


# --- nesting and perturbation confusion ---------------------------------------------------
def test_siskind_pearlmutter_perturbation_confusion():
    # d/dx [x * d/dy (x + y)] = d/dx [x * 1] = 1, at any x (the classic wrong answer is 2)
    for x0 in (0.0, 1.0, 3.7):
        assert sl.grad(lambda x: x * sl.grad(lambda y: x + y)(2.0))(x0) == 1.0


def test_inner_grad_closing_over_an_outer_variable():
    # f(x) = d/dy (x * y^2) at y = 3 = 6 x   ->  f'(x) = 6
    f = lambda x: sl.grad(lambda y: x * y * y)(3.0)  # noqa: E731
    assert sl.grad(f)(1.5) == 6.0
    # d/dx [ d/dy (x y) ] = d/dx x = 1
    assert sl.grad(lambda x: sl.grad(lambda y: x * y)(5.0))(2.0) == 1.0


def test_reverse_over_reverse_hessian_and_third_order():
    f = lambda x: sl.sum(sl.sin(x) * x[0] * x[1])  # noqa: E731
    x = np.array([0.3, -0.8, 1.1])
    H = sl.jacobian(sl.grad(f))(x)
    eps = 1e-6
    Hfd = np.array([(sl.grad(f)(x + eps * e) - sl.grad(f)(x - eps * e)) / (2 * eps)
                    for e in np.eye(3)])
    np.testing.assert_allclose(H, Hfd, atol=1e-7)
    np.testing.assert_allclose(H, H.T, atol=1e-12)
    g3 = sl.grad(lambda x: sl.grad(lambda y: sl.grad(lambda z: z ** 4)(y))(x))(2.0)
    assert g3 == 24.0 * 2.0


def test_grad_check_of_a_gradient_function(rng):
    x = rng.uniform(0.5, 1.5, 4)
    sl.assert_grad(lambda x: sl.grad(lambda y: sl.sum(sl.exp(y) * y[0] / y))(x), x)


# --- numpy interop ----------------------------------------------------------------------
def test_numpy_functions_dispatch_on_vars(rng):
    A = rng.standard_normal((3, 3))
    x = rng.uniform(0.5, 1.5, 3)
    sl.assert_grad(lambda x: np.sum(np.exp(x) * np.log(x)) + np.dot(x, x), x)
    sl.assert_grad(lambda x: np.sum(A @ x) + x @ A @ x + np.sum(np.where(x > 1, x, 2 * x)), x)
    sl.assert_grad(lambda x: np.sum(np.concatenate([x, np.sqrt(x)]) ** 2), x)
    sl.assert_grad(lambda x: np.mean(np.stack([x, x * 2])), x)


def test_unsupported_numpy_functions_raise_naming_them():
    with sl.nested():
        x = sl.Var(np.array([1.0, 2.0]))
        with pytest.raises(TypeError, match="spacing"):
            np.spacing(x)
        with pytest.raises(TypeError, match="reduce"):
            np.add.reduce(x)
        with pytest.raises(TypeError, match="fft"):
            np.fft.fft(x)
        with pytest.raises(TypeError, match="drop its derivative"):
            np.asarray(x)


# --- extensibility ------------------------------------------------------------------------
@sl.primitive
def _softplus(x):
    return np.logaddexp(0.0, x)


sl.defvjp(_softplus, lambda g, ans, x: g * sl.exp(x - ans))


def test_user_defined_primitive_with_defvjp(rng):
    x = rng.standard_normal(5)
    sl.assert_grad(lambda x: sl.sum(_softplus(x) * x), x)
    # its VJP uses stanlite operations, so second derivatives work too
    sl.assert_grad(lambda x: sl.grad(lambda y: sl.sum(_softplus(y)))(x), x)
    assert _softplus(0.0) == np.log(2.0)  # plain call is the plain function


def test_primitive_without_vjp_or_with_a_nondifferentiable_argument_raises():
    @sl.primitive
    def novjp(x):
        return x * 2.0

    @sl.primitive
    def shifted(x, k):
        return x + k

    sl.defvjp(shifted, lambda g, ans, x, k: g, None)
    with pytest.raises(DifferentiationError, match="novjp"):
        sl.grad(lambda x: novjp(x))(1.0)
    with pytest.raises(DifferentiationError, match="argument 1 of 'shifted'"):
        sl.grad(lambda x: shifted(x, x))(1.0)
    assert sl.grad(lambda x: shifted(x, 3.0))(1.0) == 1.0


def test_checker_catches_a_wrong_vjp(rng):
    @sl.primitive
    def cube(x):
        return x ** 3

    sl.defvjp(cube, lambda g, ans, x: g * 3.0 * x * x * 1.001)   # 0.1% wrong
    x = rng.uniform(0.5, 1.5, 3)
    r = sl.check_grad(lambda x: sl.sum(cube(x)), x)
    assert not r.passed and r.max_rel_err > 5e-4
    with pytest.raises(AssertionError, match="gradient check failed"):
        sl.assert_grad(lambda x: sl.sum(cube(x)), x)
    sl.defvjp(cube, lambda g, ans, x: g * 3.0 * x * x)
    assert sl.check_grad(lambda x: sl.sum(cube(x)), x).passed


def test_checker_catches_a_wrong_value():
    @sl.primitive
    def off(x):
        return x * 2.0

    sl.defvjp(off, lambda g, ans, x: g * 2.0)
    # a traced path that computes something else than the plain one
    f = lambda x: off(x) + (0.5 if isinstance(x, sl.Var) else 0.0)  # noqa: E731
    assert not sl.check_grad(f, np.array([1.0])).passed


# --- memory and garbage collection -------------------------------------------------------
def test_memory_stays_flat_over_100000_gradients():
    x = np.array([0.5, 1.5, -0.3])
    vg = sl.value_and_grad(lambda x: sl.sum(x * x) + x[0] * x[1])
    for _ in range(2000):
        vg(x)
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        for i in range(100_000):
            vg(x)
            if i == 10_000:
                mid, _ = tracemalloc.get_traced_memory()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert end - base < 64 * 1024, (base, mid, end)
    assert end - mid < 16 * 1024, (base, mid, end)
    assert tape_mod.root_tape().nodes == []


def test_nodes_form_no_reference_cycles():
    x = np.linspace(0.1, 1.0, 5)
    f = lambda x: sl.sum(sl.exp(x[1:] * x[:-1]) / x[0])  # noqa: E731
    gc.collect()
    gc.disable()
    try:
        for _ in range(50):
            sl.grad(f)(x)
            sl.jacobian(sl.grad(f))(x)
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_tapes_are_thread_local():
    out = {}

    def work(k):
        x = np.arange(1.0, 4.0) * k
        for _ in range(200):
            g = sl.grad(lambda x: sl.sum(x * x * x))(x)
        out[k] = g

    ts = [threading.Thread(target=work, args=(k,)) for k in (1.0, 2.0, 3.0)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for k, g in out.items():
        np.testing.assert_allclose(g, 3 * (np.arange(1.0, 4.0) * k) ** 2)


def test_plain_float_vjps_follow_ieee_not_python_exceptions():
    # Python floats raise on 1/0; a gradient must give what numpy gives (inf + warning)
    with pytest.warns(RuntimeWarning):
        assert sl.grad(lambda x: x / 0.0)(1.0) == np.inf
    with pytest.warns(RuntimeWarning):
        assert sl.grad(lambda y: 1.0 / y)(0.0) == -np.inf

    @sl.primitive
    def mylog(x):
        return np.log(x)

    sl.defvjp(mylog, lambda g, ans, x: g / x)
    with pytest.warns(RuntimeWarning):
        assert sl.grad(mylog)(0.0) == np.inf


def test_every_recorded_node_replays_from_its_record(rng):
    from stanlite.autodiff.extend import node_record
    A = rng.standard_normal((3, 3))
    with sl.nested() as tape:
        x = sl.Var(rng.uniform(0.5, 1.5, 3))
        s = sl.Var(0.7)
        y = sl.sum(sl.exp(A @ x) * s - x[np.array([0, 0, 2])] / 2.0 + 3.0 * x[1])
        y = y + sl.where(x > 1, x, 0.0)[0] + sl.concatenate([x, s * 2.0])[3] - 1.0 / s
        assert len(tape.nodes) > 10
        for node in tape.nodes:
            spec, args, kw = node_record(node)
            vals = [a.value if isinstance(a, sl.Var) else a for a in args]
            np.testing.assert_allclose(spec.fun(*vals, **kw), node.value, rtol=1e-15)


def test_defvjp_all_never_drops_a_derivative_silently():
    @sl.primitive
    def scale(x, k):
        return x * k

    sl.defvjp_all(scale, lambda g, ans, x, k: (g * k, None))
    with pytest.raises(DifferentiationError, match="argument 1 of 'scale'"):
        sl.grad(lambda k: sl.sum(scale(np.ones(3), k)))(2.0)

    @sl.primitive
    def scale2(x, k):
        return x * k

    sl.defvjp_all(scale2, lambda g, ans, x, k: (g * k, None), nondiff=(1,))
    with pytest.raises(DifferentiationError, match="argument 1 of 'scale2'"):
        sl.grad(lambda k: sl.sum(scale2(np.ones(3), k)))(2.0)
    np.testing.assert_allclose(sl.grad(lambda x: sl.sum(scale2(x, 2.0)))(np.ones(3)), 2.0)


def test_elementwise_binary_with_a_nondifferentiable_argument_raises_when_recorded():
    from stanlite.autodiff.extend import elementwise_binary
    f = elementwise_binary("shift_by", np.add, None, lambda g, ans, x, y: g)
    assert sl.grad(lambda y: f(1.0, y))(2.0) == 1.0
    with pytest.raises(DifferentiationError, match="argument 0 of 'shift_by'"):
        sl.grad(lambda x: f(x, 1.0))(2.0)
