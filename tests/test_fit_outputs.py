"""How a fit computes what its draws report (stanlite/fit.py ``output_arrays``) fast
and with the very numbers ``model.output`` gives draw by draw:

* a model whose draws report only their parameters, all with elementwise transforms
  (``Model._constrain_draws``), has every draw constrained in one pass;
* a model with transformed parameters and generated quantities has its parameters
  constrained and its transformed parameters computed once per draw, not twice
  (``Model._draw_output``);
* anything else (structured transforms, bounds depending on parameters, a subclass
  that replaces ``output``) keeps the per-draw loop."""

import warnings

import numpy as np
import pytest

import stanlite as sl
from stanlite import fit as F


class _Elementwise(sl.Model):
    a = sl.param.real()
    b = sl.param.real(lower=0)
    c = sl.param.real(upper=2.5)
    d = sl.param.real(lower=-1, upper=3)
    e = sl.param.vector(1, lower=0.5)
    f = sl.param.vector(8, lower=-2, upper=1)
    g = sl.param.matrix(3, 5, upper=0)
    h = sl.param.vector(13)
    i = sl.param.vector(13, lower=0)
    j = sl.param.vector(3, lower=-1, upper=1)

    def log_prob(self, **params):
        return 0.0


class _Simplex(sl.Model):
    a = sl.param.real(lower=0)
    s = sl.param.simplex(4)

    def log_prob(self, a, s):
        return 0.0


class _Dynamic(sl.Model):
    a = sl.param.real(lower=0)
    b = sl.param.real(lower=0, upper=lambda a: a + 1)

    def log_prob(self, a, b):
        return 0.0


class _WithBlocks(sl.Model):
    y = sl.data.vector(3)
    mu = sl.param.real()
    tau = sl.param.real(lower=0)
    z = sl.param.vector(3)
    calls = 0

    def transformed_parameters(self, mu, tau, z):
        type(self).calls += 1
        return {"theta": mu + tau * z}

    def log_prob(self, mu, tau, z, theta):
        return sl.normal_lpdf(self.y, theta, 1.0)

    def generated_quantities(self, rng, theta, tau):
        return {"y_rep": rng.normal(theta, 1.0), "t2": tau * tau}


def _per_draw(model, draws, seeds):
    """What output_arrays computed before its shortcuts: output() and
    generated_values() per draw, NaN after a shorter chain's end."""
    out = {}
    n = max(len(xs) for xs in draws)
    for c, xs in enumerate(draws):
        rng = np.random.Generator(np.random.PCG64(seeds[c]))
        for d, x in enumerate(xs):
            vals = {**model.output(x, rng=rng, include_gq=False),
                    **model.generated_values(x, rng)}
            for k, v in vals.items():
                if k not in out:
                    out[k] = np.full((len(draws), n) + np.shape(v), np.nan)
                out[k][c, d] = v
    return out


def _draws(model, lengths, scale, seed=0):
    rs = np.random.default_rng(seed)
    return [[rs.normal(size=model.dim) * scale for _ in range(k)] for k in lengths]


def _arrays(model, draws, seeds):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return F.output_arrays(model, draws, [np.random.Generator(np.random.PCG64(s))
                                              for s in seeds])


def _same(a, b):
    assert list(a) == list(b)
    for k in a:
        assert a[k].shape == b[k].shape, k
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


@pytest.mark.parametrize("scale", [0.3, 4.0])
def test_parameters_only_model_constrains_all_draws_at_once(scale, monkeypatch):
    # every elementwise case: identity, lower, upper, both (mixed signs within a
    # draw at scale 4), scalars, vectors of 1, 3, 8, 13, a matrix; chains of
    # unequal length (NaN after the end)
    m = _Elementwise()
    draws = _draws(m, (40, 40, 23), scale)
    want = _per_draw(m, draws, (1, 2, 3))
    assert m._constrain_draws(np.zeros((2, m.dim))) is not None
    # the one pass only: output() per draw is not called
    monkeypatch.setattr(F._OutputTable, "draw", lambda *a, **k: pytest.fail("per draw"))
    got = _arrays(m, draws, (1, 2, 3))
    _same(got, want)
    assert np.isnan(got["j"][2, 23:]).all() and not np.isnan(got["j"][2, :23]).any()


@pytest.mark.parametrize("model", [_Simplex(), _Dynamic(), _WithBlocks(y=np.zeros(3))],
                         ids=["simplex", "dynamic bound", "blocks"])
def test_other_models_keep_the_per_draw_loop(model):
    assert model._constrain_draws(np.zeros((2, model.dim))) is None
    draws = _draws(model, (15, 9), 1.0)
    _same(_arrays(model, draws, (4, 5)), _per_draw(model, draws, (4, 5)))


def test_subclass_replacing_output_is_called_per_draw():
    class Doubled(_Elementwise):
        def output(self, x, rng=None, include_tp=True, include_gq=True):
            return {k: 2 * v for k, v in super().output(x, rng).items()}

    m = Doubled()
    assert m._constrain_draws(np.zeros((1, m.dim))) is None
    assert m._draw_output(np.zeros(m.dim)) is None
    draws = _draws(m, (5,), 1.0)
    got = _arrays(m, draws, (1,))
    np.testing.assert_array_equal(got["b"][0], [m.output(x)["b"] for x in draws[0]])
    assert got["b"][0, 0] == 2 * _Elementwise.output(m, draws[0][0])["b"]


def test_blocks_computed_once_per_draw_with_the_same_numbers():
    m = _WithBlocks(y=np.array([0.5, -1.0, 2.0]))
    draws = _draws(m, (30, 30), 1.5)
    want = _per_draw(m, draws, (8, 9))
    _WithBlocks.calls = 0
    got = _arrays(m, draws, (8, 9))
    assert _WithBlocks.calls == 60          # was 120: once for output, once for gq
    _same(got, want)


class _Proper(sl.Model):
    a = sl.param.real()
    b = sl.param.real(lower=0)
    d = sl.param.real(lower=-1, upper=1)
    f = sl.param.vector(4, lower=-2)
    g = sl.param.matrix(2, 3, upper=0)

    def log_prob(self, a, b, d, f, g):
        return (sl.normal_lpdf(a, 1, 2) + sl.exponential_lpdf(b, 1) + d
                + sl.normal_lpdf(f, 0, 1) + sl.normal_lpdf(g, -1, 1))


def test_fit_of_a_parameters_only_model_is_unchanged():
    # a sampled fit's arrays equal the per-draw computation from its own draws
    m = _Proper()
    assert m._constrain_draws(np.zeros((1, m.dim))) is not None
    fit = m.sample(chains=2, warmup=30, draws=20, seed=3, progress=False, parallel=False,
                   save_warmup=True)
    draws = [s.draws for s in fit.chain_states]
    want = _per_draw(m, draws, (0, 0))
    for k in want:
        np.testing.assert_array_equal(fit[k], want[k])
    warm = [s.warmup_draws for s in fit.chain_states]
    np.testing.assert_array_equal(fit.warmup("f"), _per_draw(m, warm, (0, 0))["f"])


def _bits(values):
    return np.asarray(values, dtype=float).view(np.int64)


@pytest.mark.parametrize("bounds", [dict(lower=0), dict(lower=-1.5), dict(upper=2.5),
                                    dict(lower=-1, upper=3),
                                    dict(lower=-28.6, upper=54.7)],
                         ids=["lower 0", "lower", "upper", "both", "both, span an ulp less"])
def test_scalar_draws_constrained_in_one_call_bit_for_bit(bounds, monkeypatch):
    # a scalar parameter's draws go through the transform's ``scalars`` (one call,
    # no per-draw dispatch) and give model.constrain's numbers bit for bit at
    # ordinary, large (exp overflows, inv_logit saturates) and signed-zero points
    class One(sl.Model):
        b = sl.param.real(**bounds)

        def log_prob(self, b):
            return 0.0

    m = One()
    rs = np.random.default_rng(7)
    xs = np.concatenate([rs.normal(size=3000) * 3, rs.normal(size=500) * 40,
                         [0.0, -0.0, 709.7, 710.0, -745.2, -800.0, 800.0, 1e-300,
                          -36.9, 36.9, 5e-324]])
    with np.errstate(over="ignore"):            # exp(710) is inf either way
        want = [float(m.constrain(np.array([v]))["b"]) for v in xs]
        shaped = m._slots[0].shaped
        calls = []
        monkeypatch.setattr(type(shaped), "__call__",
                            lambda self, x: calls.append(x) or pytest.fail("per draw"))
        got = m._constrain_draws(xs[:, None])["b"]
    assert got.shape == xs.shape and not calls
    np.testing.assert_array_equal(_bits(got), _bits(want))
