"""Structural primitives: indexing, reshaping, transposing, joining, selecting, and
Stan's vector helpers. Values against numpy, gradients against finite differences,
and reverse-over-reverse through each adjoint (scatter-add <-> gather)."""

import numpy as np
import pytest

import stanlite as sl


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _scalar(y):
    if np.shape(sl.value_of(y)) == ():
        return y * y
    return sl.sum(sl.sin(y))


def check_all(f, x, value=None):
    """Value vs reference, first-order and reverse-over-reverse gradient checks."""
    if value is not None:
        np.testing.assert_array_equal(f(x), value)
    sl.assert_grad(f, x)
    sl.assert_grad(lambda y: sl.grad(lambda z: _scalar(f(z)))(y), x)


# --------------------------------------------------------------------------------------
# indexing
# --------------------------------------------------------------------------------------
X1 = _x(7, seed=1)
X2 = _x((4, 5), seed=2)
X3 = _x((2, 3, 4), seed=3)

INDEX_CASES = [
    (X1, 3), (X1, -1), (X1, -7), (X1, np.int64(2)),
    (X1, slice(1, 6, 2)), (X1, slice(None, None, -1)), (X1, slice(5, 0, -2)),
    (X1, slice(2, 2)), (X1, Ellipsis), (X1, None), (X1, (None, slice(1, 3))),
    (X2, (1, 2)), (X2, (-1, -2)), (X2, 1), (X2, (slice(None), 3)),
    (X2, (slice(None, None, 2), slice(1, None, 2))), (X2, (Ellipsis, 0)),
    (X2, (None, 1, Ellipsis)), (X2, (slice(None), None, slice(1, 3))),
    (X3, (Ellipsis, 1)), (X3, (1, Ellipsis, slice(None, None, -1))), (X3, (0, 1, 2)),
    (X1, np.array([0, 3, 3, 6, 3])), (X1, np.array([-1, 0, -1])),
    (X2, (np.array([0, 0, 3]), np.array([1, 1, 4]))), (X2, np.array([2, 2, 0])),
    (X2, (slice(1, 3), np.array([4, 0, 4]))), (X2, np.array([[0, 1], [1, 1]])),
    (X1, X1 > 0), (X2, X2 > 0), (X2, (X2[:, 0] > 0, slice(None))),
    (X2, (np.array([True, False, True, True]), 2)), (X3, X3[..., 0] < 0.5),
    (X1, [0, 2, 2]), (X2, [1, 3]), (X2, ([0, 0, 2], [4, 4, 1])), (X1, [True] * 3 + [False] * 4),
]


@pytest.mark.parametrize("x,idx", INDEX_CASES, ids=[str(i) for i in range(len(INDEX_CASES))])
def test_indexing(x, idx):
    ref = x[tuple(idx) if isinstance(idx, tuple) else idx]
    with sl.nested():
        out = sl.Var(x)[idx]
        assert isinstance(out, sl.Var)
        np.testing.assert_array_equal(out.value, ref)
        assert out.shape == np.shape(ref)
    if np.size(ref) == 0:
        return
    check_all(lambda v: v[idx], x)
    # a primitive of the result, so the in-place first-order path meets other adjoints
    sl.assert_grad(lambda v: sl.sum(sl.exp(v[idx])) * v[(0,) * v.ndim] + sl.sum(v), x)


def test_repeated_integer_indices_accumulate():
    x = np.arange(1.0, 6.0)
    idx = np.array([0, 3, 3, 3, 4, 0])
    np.testing.assert_array_equal(sl.grad(lambda v: sl.sum(v[idx]))(x), [2, 0, 0, 3, 1])
    np.testing.assert_array_equal(sl.grad(lambda v: sl.sum(v[[1, 1, 1]]))(x),
                                  [0, 3, 0, 0, 0])
    m = np.arange(6.0).reshape(2, 3)
    g = sl.grad(lambda v: sl.sum(v[[0, 0, 1], [2, 2, 2]] * np.array([1.0, 10.0, 100.0])))(m)
    np.testing.assert_array_equal(g, [[0, 0, 11], [0, 0, 100]])
    # the scatter-add adjoint on a traced value (not the in-place first-order path)
    g = sl.grad(lambda v: sl.sum((v * 1.0)[np.array([2, 2])] ** 2))(x)
    np.testing.assert_array_equal(g, [0, 0, 12, 0, 0])


def test_python_loop_over_elements():
    x = _x(6, seed=4)

    def f(v):
        return sum(v[i] * v[i] for i in range(len(v)))

    assert sl.grad(f)(x) == pytest.approx(2 * x)
    np.testing.assert_allclose(sl.jacobian(sl.grad(f))(x), 2 * np.eye(6), rtol=1e-15)
    sl.assert_grad(f, x)
    sl.assert_grad(lambda y: sl.grad(f)(y), x)
    # iterating a Var yields its elements; mixing with whole-array use
    g = sl.grad(lambda v: sum(e * 3.0 for e in v) + sl.sum(v * v) + v[0] * v[-1])(x)
    ref = 3.0 + 2 * x
    ref[0] += x[-1]
    ref[-1] += x[0]
    np.testing.assert_allclose(g, ref, rtol=1e-14)


def test_indexing_does_not_mutate_inputs():
    x = _x(5, seed=5)
    x0 = x.copy()
    seed = np.ones(3)
    sl.vjp(lambda v: v[np.array([1, 1, 4])] + v[:3], x, cotangent=seed)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(seed, np.ones(3))


def test_hessian_through_repeated_indices():
    x = _x(5, seed=6)
    idx = np.array([0, 2, 2, 4, 4, 4, 2])

    def f(v):
        return sl.sum(v[idx] ** 3)

    counts = np.bincount(idx, minlength=5)
    np.testing.assert_allclose(sl.grad(f)(x), 3 * counts * x ** 2, rtol=1e-14)
    np.testing.assert_allclose(sl.jacobian(sl.grad(f))(x), np.diag(6 * counts * x),
                               rtol=1e-14)
    sl.assert_grad(sl.grad(f), x)
    sl.assert_grad(lambda y: sl.jacobian(sl.grad(f))(y), x)  # third order
    m = _x((3, 4), seed=7)
    rows, cols = np.array([0, 0, 2, 1]), np.array([3, 3, 0, 1])
    sl.assert_grad(sl.grad(lambda v: sl.sum(v[rows, cols] ** 3)), m)
    sl.assert_grad(sl.grad(lambda v: sl.sum(v[m > 0] ** 3)), m)


def test_indexing_a_zero_d_var():
    assert sl.grad(lambda v: sl.sum(v[None] * v[...]))(1.5) == pytest.approx(3.0)
    assert sl.grad(lambda v: v[()] * 2.0)(1.5) == 2.0


def test_indexing_with_a_var_raises():
    with sl.nested():
        v = sl.Var(np.arange(4.0))
        i = sl.Var(1.0)
        for idx in (i, (i,), (0, i), [i]):
            with pytest.raises(TypeError):
                v[idx]


def test_np_asarray_of_var_raises():
    with sl.nested():
        v = sl.Var(np.arange(3.0))
        with pytest.raises(TypeError, match="drop its derivative"):
            np.asarray(v)
        with pytest.raises(TypeError, match="drop its derivative"):
            np.array(v)


def test_empty_selections():
    x = _x(4, seed=8)
    g = sl.grad(lambda v: sl.sum(v[[]]) + sl.sum(v[2:2]) + sl.sum(v[x > 10]) + v[1])(x)
    np.testing.assert_array_equal(g, [0, 1, 0, 0])


# --------------------------------------------------------------------------------------
# comparisons
# --------------------------------------------------------------------------------------
def test_comparisons_return_plain_booleans():
    x = np.array([-1.0, 0.0, 2.0])
    with sl.nested():
        v = sl.Var(x)
        for got, ref in [(v > 0, x > 0), (v >= 0, x >= 0), (v < 0, x < 0),
                         (v <= 0, x <= 0), (v == 0, x == 0), (v != 0, x != 0),
                         (0 < v, 0 < x), (v > v * 0.5, x > x * 0.5),
                         (np.greater(v, 0), x > 0), (np.less_equal(0.0, v), 0 <= x)]:
            assert type(got) is np.ndarray and got.dtype == bool
            np.testing.assert_array_equal(got, ref)
        s = v[2]
        assert (s > 1) is True and (s < 1) is False
        assert isinstance(s == 2.0, bool)
    # under nesting the values compared are stripped of every level
    seen = []

    def inner(z):
        seen.append(z > 0)
        return sl.sum(z * z)

    sl.grad(lambda u: sl.sum(sl.grad(inner)(u)))(x)
    assert type(seen[0]) is np.ndarray and seen[0].dtype == bool


# --------------------------------------------------------------------------------------
# reshaping and transposing
# --------------------------------------------------------------------------------------
RESHAPES = [
    ("reshape", lambda v: sl.reshape(v, (4, 6)), lambda a: a.reshape(4, 6)),
    ("reshape-1", lambda v: sl.reshape(v, (-1, 3)), lambda a: a.reshape(-1, 3)),
    ("reshape-int", lambda v: sl.reshape(v, -1), lambda a: a.reshape(-1)),
    ("method-args", lambda v: v.reshape(3, 8), lambda a: a.reshape(3, 8)),
    ("method-tuple", lambda v: v.reshape((6, 4)), lambda a: a.reshape((6, 4))),
    ("np.reshape", lambda v: np.reshape(v, (2, 12)), lambda a: np.reshape(a, (2, 12))),
    ("flatten", sl.flatten, lambda a: a.flatten()),
    ("m-flatten", lambda v: v.flatten(), lambda a: a.flatten()),
    ("ravel", lambda v: v.ravel(), lambda a: a.ravel()),
    ("np.ravel", lambda v: np.ravel(v), np.ravel),
    ("transpose", sl.transpose, np.transpose),
    ("transpose-axes", lambda v: sl.transpose(v, (1, 2, 0)), lambda a: a.transpose(1, 2, 0)),
    ("transpose-neg", lambda v: sl.transpose(v, (-1, 0, -2)),
     lambda a: np.transpose(a, (-1, 0, -2))),
    ("m-transpose", lambda v: v.transpose(), lambda a: a.transpose()),
    ("m-transpose-args", lambda v: v.transpose(2, 0, 1), lambda a: a.transpose(2, 0, 1)),
    ("m-transpose-tuple", lambda v: v.transpose((0, 2, 1)), lambda a: a.transpose((0, 2, 1))),
    ("np.transpose", lambda v: np.transpose(v, (1, 0, 2)),
     lambda a: np.transpose(a, (1, 0, 2))),
    (".T", lambda v: v.T, lambda a: a.T),
    ("swapaxes", lambda v: sl.swapaxes(v, 0, 2), lambda a: np.swapaxes(a, 0, 2)),
    ("np.swapaxes", lambda v: np.swapaxes(v, -1, 1), lambda a: np.swapaxes(a, -1, 1)),
    ("squeeze", lambda v: sl.squeeze(v[:, :1, None]), lambda a: np.squeeze(a[:, :1, None])),
    ("squeeze-axis", lambda v: sl.squeeze(v[:, :1], 1), lambda a: np.squeeze(a[:, :1], 1)),
    ("squeeze-tuple", lambda v: np.squeeze(v[None, :1], (0, -3)),
     lambda a: np.squeeze(a[None, :1], (0, -3))),
    ("expand_dims", lambda v: sl.expand_dims(v, 1), lambda a: np.expand_dims(a, 1)),
    ("expand_dims-neg", lambda v: np.expand_dims(v, -1), lambda a: np.expand_dims(a, -1)),
    ("expand_dims-tuple", lambda v: np.expand_dims(v, (0, 4)),
     lambda a: np.expand_dims(a, (0, 4))),
    ("to_vector", lambda v: sl.to_vector(v[0]), lambda a: a[0].flatten(order="F")),
]


@pytest.mark.parametrize("name,f,ref", RESHAPES, ids=[r[0] for r in RESHAPES])
def test_reshapes(name, f, ref):
    x = X3  # (2, 3, 4)
    with sl.nested():
        out = f(sl.Var(x))
        assert isinstance(out, sl.Var)
        np.testing.assert_array_equal(out.value, ref(x))
    check_all(f, x, ref(x))


def test_reshape_errors():
    with sl.nested():
        v = sl.Var(X2)
        with pytest.raises(ValueError):
            sl.squeeze(v, 0)
        with pytest.raises(np.exceptions.AxisError):
            sl.squeeze(v, 3)
        with pytest.raises(ValueError):
            v.reshape(3, 3)
        with pytest.raises(ValueError):
            sl.transpose(v, (0, 0))


# --------------------------------------------------------------------------------------
# joining
# --------------------------------------------------------------------------------------
def test_concatenate_mixed():
    a = _x((2, 3), seed=9)
    c = np.arange(6.0).reshape(2, 3)
    cases = [
        (lambda v: sl.concatenate([v, c, v * 2.0]), np.concatenate([a, c, a * 2]), a),
        (lambda v: sl.concatenate([v, c], axis=1), np.concatenate([a, c], axis=1), a),
        (lambda v: sl.concatenate([c, v, v], axis=-1), np.concatenate([c, a, a], axis=-1),
         a),
        (lambda v: np.concatenate([v, c], axis=0), np.concatenate([a, c]), a),
        (lambda v: np.concatenate((c, v), axis=-1), np.concatenate([c, a], axis=-1), a),
        (lambda v: np.concatenate([v, c, 1.5], axis=None),
         np.concatenate([a.ravel(), c.ravel(), [1.5]]), a),
        (lambda v: sl.concatenate([v[0], 2.0, c[1], v[1, 2]]),
         np.concatenate([a[0], [2.0], c[1], [a[1, 2]]]), a),
        (lambda v: sl.append_row(v, c), np.vstack([a, c]), a),
        (lambda v: sl.append_col(v, c), np.hstack([a, c]), a),
        (lambda v: sl.append_col(v[0], v[1]), np.concatenate([a[0], a[1]]), a),
        (lambda v: sl.append_row(v[0], 3.0), np.append(a[0], 3.0), a),
    ]
    for f, ref, x in cases:
        check_all(f, x, ref)


def test_stack_mixed():
    a = _x(3, seed=10)
    c = np.arange(3.0)
    for axis in (0, 1, -1):
        ref = np.stack([a, c, a * a], axis=axis)
        check_all(lambda v: sl.stack([v, c, v * v], axis=axis), a, ref)
        check_all(lambda v: np.stack([c, v], axis=axis), a, np.stack([c, a], axis=axis))
    m = _x((2, 3), seed=11)
    for axis in (0, 1, 2, -1, -2):
        check_all(lambda v: sl.stack([v, m, v], axis=axis), m,
                  np.stack([m, m, m], axis=axis))
    # scalars: Vars and floats
    check_all(lambda v: sl.stack([v[0], 1.5, v[2] * v[1]]), a,
              np.array([a[0], 1.5, a[2] * a[1]]))
    with pytest.raises(ValueError):
        sl.stack([])


# --------------------------------------------------------------------------------------
# where
# --------------------------------------------------------------------------------------
def test_where_with_broadcasting_and_var_condition():
    x = _x((3, 4), seed=12)
    row = _x(4, seed=13)
    ref = np.where(x > 0, x ** 2, row)
    check_all(lambda v: sl.where(v > 0, v ** 2, row), x, ref)
    check_all(lambda v: np.where(v > 0, v ** 2, 0.0), x, np.where(x > 0, x ** 2, 0.0))
    # condition (3, 1) broadcast against (3, 4) and a traced scalar branch
    cond = np.array([[True], [False], [True]])
    sl.assert_grad(lambda v, s: sl.where(cond, v, s * s), (x, 0.7))
    sl.assert_grad(lambda v, r: sl.where(v < 0.2, r, v), (x, row))
    g_r = sl.grad(lambda r: sl.sum(sl.where(x < 0.2, r, x)))(row)
    np.testing.assert_array_equal(g_r, np.sum(x < 0.2, axis=0))
    # derivative flows to the branch taken (relu)
    np.testing.assert_array_equal(sl.grad(lambda v: sl.sum(sl.where(v > 0, v, 0.0)))(x),
                                  (x > 0).astype(float))
    sl.assert_grad(sl.grad(lambda v: sl.sum(sl.where(v > 0, v ** 3, -v))), x)


def test_where_rejects_a_traced_condition():
    with sl.nested():
        v = sl.Var(np.ones(3))
        with pytest.raises(TypeError, match="condition"):
            sl.where(v, v, 0.0)


# --------------------------------------------------------------------------------------
# Stan's vector helpers
# --------------------------------------------------------------------------------------
def test_rep_vector_and_rep_matrix():
    np.testing.assert_array_equal(sl.rep_vector(2.5, 3), [2.5, 2.5, 2.5])
    assert sl.grad(lambda s: sl.sum(sl.rep_vector(s, 4) * np.arange(4.0)))(1.0) == 6.0
    sl.assert_grad(lambda s: sl.rep_vector(s, 3) ** 2, 0.3)
    sl.assert_grad(lambda s: sl.grad(lambda t: sl.sum(sl.rep_vector(t, 3) ** 3))(s), 0.3)
    # scalar -> m x n
    m = sl.rep_matrix(1.5, 2, 3)
    assert np.shape(m) == (2, 3) and np.all(np.asarray(m) == 1.5)
    w = _x((2, 3), seed=14)
    assert sl.grad(lambda s: sl.sum(sl.rep_matrix(s, 2, 3) * w))(1.0) == pytest.approx(w.sum())
    sl.assert_grad(lambda s: sl.rep_matrix(s, 2, 3) * w, 0.4)
    # vector (k,) and m: m copies of the column vector side by side -> (k, m)
    v = np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(sl.rep_matrix(v, 2), [[1, 1], [2, 2], [3, 3]])
    w3 = _x((3, 2), seed=15)
    np.testing.assert_allclose(sl.grad(lambda u: sl.sum(sl.rep_matrix(u, 2) * w3))(v),
                               w3.sum(axis=1), rtol=1e-15)
    check_all(lambda u: sl.rep_matrix(u, 2) * w3, v)
    check_all(lambda u: sl.rep_matrix(u, 2, 3) * w, v)   # a vector broadcast as rows
    check_all(lambda u: sl.rep_array(u, 2, 4, 3), v)
    with pytest.raises(TypeError):
        sl.rep_matrix(1.0, 3)


def test_head_tail_segment():
    x = _x(6, seed=16)
    for f, ref in [(lambda v: sl.head(v, 3), x[:3]), (lambda v: sl.head(v, 6), x),
                   (lambda v: sl.tail(v, 2), x[-2:]), (lambda v: sl.tail(v, 6), x),
                   (lambda v: sl.segment(v, 1, 2), x[0:2]),
                   (lambda v: sl.segment(v, 3, 4), x[2:6])]:
        check_all(f, x, ref)
    assert np.shape(sl.head(x, 0)) == (0,) and np.shape(sl.tail(x, 0)) == (0,)
    g = sl.grad(lambda v: sl.sum(sl.segment(v, 2, 3)) + sl.sum(sl.tail(v, 1)))(x)
    np.testing.assert_array_equal(g, [0, 1, 1, 1, 0, 1])


# --------------------------------------------------------------------------------------
# forward mode: structural ops are linear, so the tangent of f at x along v is f(v)
# exactly; sl.assert_jvp checks single and vector mode against finite differences,
# sl.assert_hessian the forward-over-reverse Hessian through each op
# --------------------------------------------------------------------------------------
def check_forward(f, x, linear=True):
    sl.assert_jvp(f, x)
    if linear:
        v = _x(np.shape(x), seed=98)
        np.testing.assert_array_equal(sl.jvp(f)(x, v)[1], f(v))
    np.testing.assert_array_equal(sl.jacobian_forward(f)(x), sl.jacobian_reverse(f)(x))
    w = _x(np.shape(f(x)), seed=99)
    shape = np.shape(x)
    sl.assert_hessian(lambda z: sl.sum(sl.sin(f(sl.reshape(z, shape))) * w), np.ravel(x))


FWD_INDEX_CASES = [(x, i) for x, i in INDEX_CASES if np.size(x[i]) > 0] + [
    # advanced indices separated by a slice/None/...: numpy moves them to the front,
    # in front of any leading batch axes
    (X3, (np.array([0, 1, 1]), slice(None), np.array([1, 2, 3]))),
    (X3, (0, slice(None), np.array([3, 1]))), (X3, (np.array([1, 0]), None, 2)),
    (X3, (np.array(1), Ellipsis, [0, 3, 3])), (X3, (1, Ellipsis, np.array([[0], [2]]))),
    (X3, (slice(None), 1, slice(1, 3))), (X3, (np.array([0, 1]), slice(None), X3[0, 0] > 0)),
]


@pytest.mark.parametrize("x,idx", FWD_INDEX_CASES,
                         ids=[str(i) for i in range(len(FWD_INDEX_CASES))])
def test_indexing_forward(x, idx):
    check_forward(lambda v: v[idx], x)


def test_indexing_forward_zero_d_and_bool_lists():
    sl.assert_jvp(lambda v: sl.getitem(v, None) * sl.getitem(v, ...) + sl.getitem(v, ()), 1.5)
    check_forward(lambda v: v[[True, False, True], ..., [1, 3]], X3[[0, 1, 0]])


@pytest.mark.parametrize("idx,shape", [
    (np.array([0, 3, 3, 1]), (4, 5)), ((slice(1, 3), 2), (4, 5)), (X2 > 0, (4, 5)),
    ((np.array([1, 0, 1]), slice(None), np.array([3, 3, 0])), (2, 3, 5)),
], ids=["repeated", "basic", "mask", "separated"])
def test_scatter_add_forward(idx, shape):
    from stanlite.math.structure import scatter_add
    gs = np.shape(np.zeros(shape)[idx])
    check_forward(lambda g: scatter_add(g, idx, shape), _x(gs, seed=1))


@pytest.mark.parametrize("name,f,ref", RESHAPES, ids=[r[0] for r in RESHAPES])
def test_reshapes_forward(name, f, ref):
    check_forward(f, X3)


def test_concatenate_stack_where_forward():
    a = _x((2, 3), seed=9)
    c = np.arange(6.0).reshape(2, 3)
    cases = [
        lambda v: sl.concatenate([v, c, v * 2.0]),
        lambda v: sl.concatenate([v, c], axis=1),
        lambda v: sl.concatenate([c, v, v], axis=-1),
        lambda v: sl.concatenate([v, c, 1.5], axis=None),
        lambda v: sl.concatenate([v[0], 2.0, c[1], v[1, 2]]),
        lambda v: sl.append_row(v[0], 3.0),
        lambda v: sl.append_col(v, c),
        lambda v: sl.stack([v, c, v], axis=0),
        lambda v: sl.stack([c, v], axis=1),
        lambda v: sl.stack([v, c], axis=-1),
        lambda v: sl.stack([v[0, 0], 1.5, v[1, 2], v[0, 1]]),
        lambda v: sl.stack([v[0], c[1]], axis=-1),
        lambda v: sl.where(v > 0, v, 0.0),
        lambda v: sl.where(v > 0, c, v),
        lambda v: sl.where(np.array([[True], [False]]), v, v[0, 1]),   # a scalar branch
        lambda v: sl.where(c > 2, v[0], v[1]),                          # broadcast rows
        lambda v: sl.rep_matrix(v[0], 2) * sl.reshape(sl.to_vector(v)[:3], (3, 1)),
    ]
    for f in cases:
        check_forward(f, a, linear=False)
    # two traced branches of different shapes, and a traced condition rejected
    sl.assert_jvp(lambda v, r: sl.where(v < 0.2, r, v), (a, a[0]))


def test_indexing_third_order():
    # forward (vector) over forward-over-reverse through gather/scatter-add and a
    # repeated, separated advanced index
    x = _x((2, 3), seed=17)
    rows, cols = np.array([1, 0, 1, 1]), np.array([2, 2, 0, 2])

    def f(v):
        m = sl.reshape(v, (2, 3))
        return sl.sum(sl.sin(m[rows, cols]) * m[rows, cols] ** 3) + \
            sl.sum(sl.exp(m[None, rows, 1]))

    t = sl.grad_hessian(f)(x.ravel())
    hess = sl.hessian(f)
    fd = np.empty_like(t)
    h = 1e-4
    for k in range(6):
        e = np.zeros(6)
        e[k] = h
        d1 = (hess(x.ravel() + e) - hess(x.ravel() - e)) / (2 * h)
        d2 = (hess(x.ravel() + e / 2) - hess(x.ravel() - e / 2)) / h
        fd[..., k] = (4 * d2 - d1) / 3
    np.testing.assert_allclose(t, fd, rtol=1e-6, atol=1e-7)
