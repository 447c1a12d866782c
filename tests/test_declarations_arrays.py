"""Arrays of constrained types (``array=``, Stan's ``array[M]``) and the new types
(``sum_to_zero_vector``, row and column ``stochastic_matrix``), through a model: shapes,
Stan element names, constrain/unconstrain round trips, the summed log-Jacobian against
the log|det| of the finite-difference Jacobian of the whole transform, data arrays and
their validation messages, misuse errors; NUTS on a sum-to-zero vector."""

import numpy as np
import pytest

import stanlite as sl
from stanlite import transforms as T


# ---- what each type's free coordinates of y are (its value without the redundant part)
def _all(y):
    return np.ravel(y)


def _head(y):                     # simplex, rows of a row-stochastic matrix
    return np.ravel(y[..., :-1])


def _col_head(y):                 # columns of a column-stochastic matrix
    return np.ravel(np.swapaxes(y, -1, -2)[..., :-1])


def _tri(strict):
    def f(y):
        M, N = y.shape[-2:]
        r, c = np.tril_indices(M, -1 if strict else 0, N)
        return np.ravel(y[..., r, c])
    return f


def _model(decl, data=None):
    """A model with one parameter ``theta`` declared by ``decl`` and a flat log_prob:
    its log density is the log-Jacobian alone."""
    ns = {"M": sl.data.int(), "N": sl.data.int(), "K": sl.data.int(), "theta": decl,
          "log_prob": lambda self, theta: 0.0}
    if data:
        ns.update({k: sl.data.array(*np.shape(v)) for k, v in data.items()})
    cls = type("Arr", (sl.Model,), ns)
    return cls(M=2, N=3, K=4, **(data or {}))


# (id, declaration, shape, free coordinates of y)
CASES = [
    ("simplex", lambda: sl.param.simplex("K", array="M"), (2, 4), _head),
    ("simplex-2d-array", lambda: sl.param.simplex("K", array=("M", "N")), (2, 3, 4), _head),
    ("ordered", lambda: sl.param.ordered("K", array="N"), (3, 4), _all),
    ("positive_ordered", lambda: sl.param.positive_ordered(3, array=2), (2, 3), _all),
    ("cholesky_factor_corr", lambda: sl.param.cholesky_factor_corr(3, array="M"),
     (2, 3, 3), _tri(True)),
    ("cholesky_factor_cov", lambda: sl.param.cholesky_factor_cov(4, 2, array="M"),
     (2, 4, 2), _tri(False)),
    ("corr_matrix", lambda: sl.param.corr_matrix(3, array=("M",)), (2, 3, 3), _tri(True)),
    ("cov_matrix", lambda: sl.param.cov_matrix(2, array=("M", "N")), (2, 3, 2, 2),
     _tri(False)),
    ("vector-lower", lambda: sl.param.vector("K", lower=0, array="M"), (2, 4), _all),
    ("vector-lower-upper-broadcast",
     lambda: sl.param.vector("K", lower=np.array([0.0, 1, 2, 3]), upper=10.0, array="M"),
     (2, 4), _all),
    ("vector-lower-per-element", lambda: sl.param.vector(
        "K", lower=np.array([[0.0], [-5.0]]), array="M"), (2, 4), _all),
    ("real-array-offset-multiplier",
     lambda: sl.param.real(offset=1.0, multiplier=3.0, array=("M", "N")), (2, 3), _all),
    ("matrix-upper", lambda: sl.param.matrix("N", 2, upper=1.0, array="M"), (2, 3, 2), _all),
    ("real-plain", lambda: sl.param.real(array="K"), (4,), _all),
    ("sum_to_zero_vector", lambda: sl.param.sum_to_zero_vector("K", array="M"), (2, 4),
     None),
    ("row_stochastic", lambda: sl.param.stochastic_matrix("N", "K", array="M"),
     (2, 3, 4), _head),
    ("column_stochastic",
     lambda: sl.param.stochastic_matrix("N", "K", kind="column", array="M"),
     (2, 3, 4), _col_head),
    ("row_stochastic-plain", lambda: sl.param.row_stochastic_matrix(2, 3), (2, 3), _head),
]
IDS = [c[0] for c in CASES]


def _fd_jacobian(F, x, h=1e-6):
    cols = []
    for j in range(x.size):
        e = np.zeros_like(x)
        e[j] = h
        cols.append((F(x + e) - F(x - e)) / (2 * h))
    return np.stack(cols, axis=1)


@pytest.mark.parametrize("name,decl,shape,free", CASES, ids=IDS)
def test_array_shape_round_trip_and_names(name, decl, shape, free):
    m = _model(decl())
    assert m.param_shapes() == {"theta": shape}
    x = np.random.default_rng(len(name)).normal(scale=0.7, size=m.dim)
    y = m.constrain(x)["theta"]
    assert y.shape == shape
    np.testing.assert_allclose(m.unconstrain({"theta": y}), x, rtol=1e-9, atol=1e-10)
    # Stan's element names: row-major, 1-based; the last one names the full shape
    names = m.param_names()
    assert len(names) == int(np.prod(shape))
    assert names[-1] == "theta[" + ",".join(map(str, shape)) + "]"
    assert names[1] == "theta[" + ",".join(["1"] * (len(shape) - 1) + ["2"]) + "]"


@pytest.mark.parametrize("name,decl,shape,free", CASES, ids=IDS)
def test_array_log_jacobian_is_log_det_of_fd_jacobian(name, decl, shape, free):
    m = _model(decl())
    x = np.random.default_rng(7 + len(name)).normal(scale=0.6, size=m.dim)
    lj = m.log_density(x, jacobian=True) - m.log_density(x, jacobian=False)
    if free is None:
        # the sum-to-zero transform is an isometry onto the hyperplane: the volume
        # factor sqrt(det(J^T J)) of the full map is 1, so log_jac = 0 (as Stan)
        J = _fd_jacobian(lambda z: np.ravel(m.constrain(z)["theta"]), x)
        assert lj == 0.0
        assert 0.5 * np.linalg.slogdet(J.T @ J)[1] == pytest.approx(0.0, abs=1e-8)
        return
    J = _fd_jacobian(lambda z: free(m.constrain(z)["theta"]), x)
    assert J.shape[0] == J.shape[1] == m.dim
    sign, logdet = np.linalg.slogdet(J)
    assert sign != 0
    assert lj == pytest.approx(logdet, rel=1e-6, abs=1e-6)
    # every element has its own transform: the log-Jacobian is the sum of the
    # per-element ones (the transform applied to one element alone)
    t = m._slots[0].transform
    n_lead = len(shape) - (1 if t.name in ("simplex", "ordered", "positive_ordered",
                                          "unit_vector", "sum_to_zero_vector")
                           else 2 if isinstance(t, T._Structured) else len(shape))
    if n_lead:
        core = shape[n_lead:]
        k = t.free_size(core)
        b = m._slots[0].bounds or ()
        parts = x.reshape(-1, k) if k else np.zeros((int(np.prod(shape[:n_lead])), 0))
        if not b or all(np.ndim(v) == 0 for v in b if v is not None):
            total = sum(t.constrain(p, core, *b)[1] for p in parts)
            assert lj == pytest.approx(total, rel=1e-12, abs=1e-12)


def test_unit_vector_array():
    m = _model(sl.param.unit_vector("K", array="M"))
    x = np.random.default_rng(1).normal(size=m.dim)
    y = m.constrain(x)["theta"]
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), 1.0, rtol=1e-14)
    assert m.log_density(x) == pytest.approx(-0.5 * np.sum(x * x), rel=1e-14)
    np.testing.assert_allclose(m.constrain(m.unconstrain({"theta": y}))["theta"], y,
                               rtol=1e-14)
    assert m.param_names()[-1] == "theta[2,4]"


def test_sum_to_zero_and_stochastic_constraints_hold():
    rng = np.random.default_rng(3)
    for decl, axis in ((sl.param.sum_to_zero_vector("K", array=("M", "N")), None),
                       (sl.param.stochastic_matrix("N", "K", kind="row"), -1),
                       (sl.param.stochastic_matrix("N", "K", kind="columns",
                                                   array="M"), -2)):
        m = _model(decl)
        y = m.constrain(rng.normal(scale=3.0, size=m.dim))["theta"]
        if axis is None:
            np.testing.assert_allclose(y.sum(-1), 0.0, atol=1e-13)
        else:
            assert np.all(y > 0)
            np.testing.assert_allclose(y.sum(axis), 1.0, rtol=1e-13)


def test_sum_to_zero_is_stans_pivot_basis():
    # Stan 2.36: z_k = sum_{i >= k} y_i / sqrt(i(i+1)) - (k-1) y_{k-1} / sqrt((k-1)k)
    y = np.array([0.3, -1.2, 2.0])
    K = 4
    z = np.zeros(K)
    for k in range(1, K + 1):
        z[k - 1] = sum(y[i - 1] / np.sqrt(i * (i + 1)) for i in range(k, K))
        if k >= 2:
            z[k - 1] -= (k - 1) * y[k - 2] / np.sqrt((k - 1) * k)
    got, lj = T.SumToZero().constrain(y, (K,))
    np.testing.assert_allclose(got, z, rtol=1e-14, atol=1e-15)
    assert lj == 0.0
    assert T.SumToZero().free_size((3, K)) == 3 * (K - 1)
    assert T.SumToZero().constrain(np.zeros(0), (1,))[0].tolist() == [0.0]


def test_array_and_name_are_keyword_only():
    with pytest.raises(TypeError):
        sl.param.vector(3, None, None, None, None, "M")
    with pytest.raises(TypeError):
        sl.data.vector(3, None, None, False, "M")
    assert repr(sl.param.simplex("K", array=("M", 2))) == \
        "param.simplex('K', array=('M', 2))"
    assert repr(sl.param.real(lower=0, name="lambda")) == "param.real(lower=0, name='lambda')"


def test_free_sizes_and_descriptions():
    m = _model(sl.param.stochastic_matrix("N", "K", kind="column", array="M"))
    assert m.dim == 2 * 2 * 4
    assert "array[2] column_stochastic_matrix[3, 4]" in repr(m)
    m = _model(sl.param.simplex("K", array=("M", "N")))
    assert m.dim == 2 * 3 * 3
    assert "array[2, 3] simplex[4]" in repr(m)


def test_check_messages_name_the_element():
    m = _model(sl.param.simplex("K", array="M"))
    bad = np.full((2, 4), 0.25)
    bad[1] = [0.5, 0.5, 0.5, -0.5]
    with pytest.raises(sl.DataError, match=r"parameter 'theta'.*must be >= 0.*\[1, 3\]"):
        m.unconstrain({"theta": bad})
    m = _model(sl.param.stochastic_matrix("N", "K", kind="column"))
    with pytest.raises(sl.DataError, match="each column sum to 1.*column 0 sums to 1.5"):
        m.unconstrain({"theta": np.full((3, 4), 0.5)})
    m = _model(sl.param.sum_to_zero_vector("K"))
    with pytest.raises(sl.DataError, match="must sum to 0"):
        m.unconstrain({"theta": np.ones(4)})


def test_data_bound_array_of_the_full_shape():
    lo = np.array([[0.0, 1, 2, 3], [-1, -2, -3, -4]])
    m = _model(sl.param.vector("K", lower="lo", array="M"), data={"lo": lo})
    y = m.constrain(np.zeros(m.dim))["theta"]
    np.testing.assert_allclose(y, lo + 1.0)
    with pytest.raises(sl.DataError, match=r"parameter 'theta'.*lower.*shape \(3,\)"):
        _model(sl.param.vector("K", lower="lo", array="M"), data={"lo": np.zeros(3)})


# ---- data arrays ------------------------------------------------------------------------
class ArrayData(sl.Model):
    N = sl.data.int(lower=0)
    K = sl.data.int(lower=1)
    n = sl.data.int(lower=0, array="N")
    x = sl.data.vector("K", array="N")
    grid = sl.data.real(array=("N", 2))
    mu = sl.param.real()

    def log_prob(self, mu):
        return sl.normal_lpdf(self.x, mu, 1.0)


def test_data_arrays_validate_and_keep_types():
    m = ArrayData(N=2, K=3, n=[1, 4], x=[[1, 2, 3], [4, 5, 6]],
                  grid=[[0.5, 1], [2, 3]])
    assert m.n.dtype == np.int64 and m.n.shape == (2,)
    assert m.x.shape == (2, 3) and m.grid.shape == (2, 2)
    assert not m.x.flags.writeable


@pytest.mark.parametrize("field,value,message", [
    ("x", [[1, 2, 3], [4, np.nan, 6]], r"data field 'x'.*element \[2, 2\] is nan"),
    ("x", [[1, 2], [3, 4]], r"data field 'x': expected array\[2\] vector\[3\] "
                            r"\(shape \(2, 3\)\), got shape \(2, 2\)"),
    ("n", [1, 2.5], r"data field 'n'.*element \[2\] is 2.5"),
    ("n", [1, -1], r"data field 'n'.*>= 0.*element \[2\] is -1"),
    ("grid", [[0, 1], [2, True]], r"data field 'grid'.*boolean"),
])
def test_data_array_errors_name_field_and_index(field, value, message):
    data = dict(N=2, K=3, n=[1, 4], x=np.ones((2, 3)), grid=np.zeros((2, 2)))
    data[field] = value
    with pytest.raises(sl.DataError, match=message):
        ArrayData(**data)


# ---- misuse gets a clear error ------------------------------------------------------------
@pytest.mark.parametrize("make,message", [
    (lambda: sl.param.simplex(("M", "K")), r"simplex: a size is one int.*array="),
    (lambda: sl.param.vector(["K"]), r"vector: a size is one int.*array="),
    (lambda: sl.param.simplex("K", array=[("M", "N")]), r"array= takes a size or a flat"),
    (lambda: sl.param.stochastic_matrix(2, 3, kind="diagonal"), r"kind must be 'row'"),
    (lambda: sl.param.simplex("M", "K"), r"simplex takes one size, got 2 \('M', 'K'\); "
                                         r"for an array of them.*array="),
    (lambda: sl.param.cov_matrix(3, 4), r"cov_matrix takes one size, got 2"),
    (lambda: sl.param.real(name="2x"), r"name= must be a Stan identifier"),
])
def test_misuse_is_a_model_error(make, message):
    with pytest.raises(sl.ModelError, match=message):
        make()


@pytest.mark.parametrize("array,message", [
    (2.5, r"parameter 'theta'.*size 2.5 must be a single int"),
    (-1, r"parameter 'theta'.*size -1 is negative"),
    (True, r"parameter 'theta'.*size True must be a single int"),
])
def test_bad_literal_array_sizes_name_the_parameter(array, message):
    with pytest.raises(sl.ModelError, match=message):
        _model(sl.param.simplex("K", array=array))


def test_array_size_from_data_that_is_bad():
    with pytest.raises(sl.DataError, match=r"parameter 'theta'.*simplex.*size 'K'|"
                                           r"simplex of shape \(2, 0\) is not possible"):
        type("A", (sl.Model,), {"M": sl.data.int(), "K": sl.data.int(),
                                "theta": sl.param.simplex("K", array="M"),
                                "log_prob": lambda self, theta: 0.0})(M=2, K=0)
    with pytest.raises(sl.DataError, match=r"size 'M' is negative"):
        type("A", (sl.Model,), {"M": sl.data.int(), "K": sl.data.int(),
                                "theta": sl.param.simplex("K", array="M"),
                                "log_prob": lambda self, theta: 0.0})(M=-1, K=3)


def test_gradient_through_array_of_simplexes_matches_fd():
    class Lda(sl.Model):
        M = sl.data.int()
        K = sl.data.int()
        counts = sl.data.array("M", "K")
        theta = sl.param.simplex("K", array="M")

        def log_prob(self, theta):
            return sl.sum(self.counts * sl.log(theta)) + sl.dirichlet_lpdf(
                theta, np.full(self.K, 2.0))

    m = Lda(M=3, K=4, counts=np.arange(12.0).reshape(3, 4))
    x = np.random.default_rng(5).normal(size=m.dim)
    lp, g = m.log_density_gradient(x)
    fd = _fd_jacobian(lambda z: np.array([m.log_density(z)]), x)[0]
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)


# ---- NUTS on a sum-to-zero vector ---------------------------------------------------------
class ZeroSum(sl.Model):
    K = sl.data.int()
    z = sl.param.sum_to_zero_vector("K")

    def log_prob(self, z):
        return sl.normal_lpdf(z, 0.0, 2.0)


def _batch_mcse(v, batches=20):
    """Monte Carlo standard error of the mean of ``v`` (chains x draws) by batch means
    within each chain."""
    c, n = v.shape
    b = v[:, :n - n % batches].reshape(c, batches, -1).mean(axis=2).ravel()
    return b.std(ddof=1) / np.sqrt(b.size)


def test_nuts_sum_to_zero_marginal_variance():
    K = 5
    fit = ZeroSum(K=K).sample(chains=2, draws=1000, warmup=500, seed=11, progress=False,
                              parallel=False)
    z = fit["z"]                                         # (chains, draws, K)
    np.testing.assert_allclose(z.sum(-1), 0.0, atol=1e-12)
    exact = 4.0 * (K - 1) / K                            # sigma^2 (K - 1) / K
    for k in range(K):
        sq = z[..., k] ** 2
        assert abs(sq.mean() - exact) < 4 * _batch_mcse(sq), (k, sq.mean(), exact)


@pytest.mark.parametrize("decl", [
    lambda: sl.param.sum_to_zero_vector("K", array="M"),
    lambda: sl.param.stochastic_matrix("N", "K", kind="row", array="M"),
    lambda: sl.param.stochastic_matrix("N", "K", kind="column"),
    lambda: sl.param.simplex("K", array=("M", "N")),
], ids=["sum_to_zero", "row_stochastic", "column_stochastic", "simplex-2d"])
def test_hessian_through_the_new_transforms_matches_fd_of_the_gradient(decl):
    cls = type("H", (sl.Model,), {"M": sl.data.int(), "N": sl.data.int(),
                                  "K": sl.data.int(), "theta": decl(),
                                  "log_prob": lambda self, theta: sl.sum(
                                      sl.sin(3.0 * theta) * theta)})
    m = cls(M=2, N=3, K=4)
    x = np.random.default_rng(4).normal(scale=0.5, size=m.dim)
    _, g, H = m.log_density_hessian(x)
    h = 1e-6
    fd = np.stack([(m.log_density_gradient(x + h * e)[1] - m.log_density_gradient(
        x - h * e)[1]) / (2 * h) for e in np.eye(m.dim)])
    np.testing.assert_allclose(H, fd, rtol=1e-5, atol=1e-5)
    m.compile = False                                  # the eager tape agrees
    lp2, g2 = m.log_density_gradient(x)
    np.testing.assert_allclose(g2, g, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("decl", [
    sl.param.simplex(3, array="M"), sl.param.ordered(3, array="M"),
    sl.param.cholesky_factor_corr(3, array="M"), sl.param.row_stochastic_matrix("M", 3),
    sl.param.column_stochastic_matrix(3, "M"), sl.param.corr_matrix(2, array="M")])
def test_an_empty_array_of_structured_parameters(decl):
    # array[0] simplex[K] (Stan allows it): the gradient's recording lowered zero-size
    # operations and failed with a KeyError from the interpreter's passes
    class Empty(sl.Model):
        M = sl.data.int(lower=0)
        th = decl
        a = sl.param.real()

        def log_prob(self, th, a):
            return sl.normal_lpdf(a, 0.0, 1.0)
    m = Empty(M=0)
    assert m.dim == 1 and 0 in m.param_shapes()["th"]
    for _ in range(2):                  # the recording, then a replay
        lp, g = m.log_density_gradient(np.array([0.3]))
        assert lp == pytest.approx(-0.5 * 0.09 - 0.5 * np.log(2 * np.pi), rel=1e-14)
        np.testing.assert_allclose(g, [-0.3], rtol=1e-14)
    assert m.constrain(np.array([0.3]))["th"].shape == m.param_shapes()["th"]


def test_empty_array_data_as_stan_json_writes_them():
    # cmdstanpy's write_stan_json (and Stan's own JSON) gives [] for any empty array:
    # array[0] vector[3] and matrix[0, 3] were refused as "got shape (0,)"
    import json

    class EmptyData(sl.Model):
        N = sl.data.int(lower=0)
        v = sl.data.vector(3, array="N")
        M = sl.data.matrix("N", 3)
        a = sl.param.real()

        def log_prob(self, a):
            return sl.normal_lpdf(a, 0.0, 1.0)
    m = EmptyData.from_json(json.dumps({"N": 0, "v": [], "M": []}))
    assert m.v.shape == (0, 3) and m.M.shape == (0, 3)
    with pytest.raises(sl.DataError, match=r"data field 'v'.*shape \(1, 3\)"):
        EmptyData(N=1, v=[], M=[[1.0, 2.0, 3.0]])
