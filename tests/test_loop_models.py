"""The Stan-style loop models of the benchmarks (``benchmarks/loop_models.py``): each
loop form agrees with its vectorised form in value and gradient, and both with an
independent numpy/scipy log density (so that a mistake shared by the two forms shows).

The models live beside the benchmarks that time them (``loops.py``, ``nuts.py``); the
test imports them from there and skips when the benchmarks folder is absent. The coal
model is checked on a 40-year slice of its data (1,600 scalar ``poisson_lpmf`` calls
instead of 12,544) to keep the test fast; the change point falls inside the slice.
"""

import math
import pathlib
import sys

import numpy as np
import pytest
import scipy.stats as st
from scipy.special import logsumexp

BENCH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"
if not (BENCH / "loop_models.py").is_file():
    pytest.skip("benchmarks/loop_models.py is not present", allow_module_level=True)
# on the path only while importing: benchmarks/ has modules named like common ones
sys.path.insert(0, str(BENCH))
try:
    import loop_models  # noqa: E402
finally:
    sys.path.remove(str(BENCH))


def _coal_slice():
    d = loop_models.coal_data()
    D = d["D"][20:60]
    return dict(d, T=len(D), D=D)


def _hmm_reference(model, v):
    """log p(y, params) without the Jacobian: the forward algorithm in numpy."""
    y, K = model.y, loop_models.HMM_K
    mu, sigma = np.asarray(v["mu"]), float(v["sigma"])
    theta = np.stack([v["theta1"], v["theta2"], v["theta3"]])
    emit = st.norm.logpdf(y[:, None], mu[None, :], sigma)
    gamma = math.log(1.0 / K) + emit[0]
    for t in range(1, len(y)):
        gamma = logsumexp(gamma[:, None] + np.log(theta), axis=0) + emit[t]
    prior = st.norm.logpdf(mu, 0, 5).sum() + st.norm.logpdf(sigma, 0, 2)
    return prior + logsumexp(gamma)


def _coal_reference(model, v):
    """log p(D, e, l) without the Jacobian: the change point summed out directly."""
    D, T = np.asarray(model.D), model.T
    e, l_ = float(v["e"]), float(v["l"])
    t = np.arange(1, T + 1)
    lp = [-math.log(T) + st.poisson.logpmf(D, np.where(t < s, e, l_)).sum()
          for s in range(1, T + 1)]
    prior = st.expon.logpdf(e, scale=1 / model.r_e) + st.expon.logpdf(l_, scale=1 / model.r_l)
    return prior + logsumexp(lp)


CASES = {
    "hmm": (loop_models.HmmLoop, loop_models.HmmVectorised, loop_models.hmm_data,
            _hmm_reference),
    "coal": (loop_models.CoalLoop, loop_models.CoalVectorised, _coal_slice,
             _coal_reference),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_loop_form_agrees_with_vectorised_form(name):
    loop_cls, vec_cls, make_data, reference = CASES[name]
    data = make_data()
    loop_m, vec_m = loop_cls(**data), vec_cls(**data)
    rng = np.random.default_rng(20261126)
    for _ in range(3):
        x = rng.normal(0.0, 0.7, loop_m.dim)
        lp_l, g_l = loop_m.log_density_gradient(x)
        lp_v, g_v = vec_m.log_density_gradient(x)
        assert lp_l == pytest.approx(lp_v, rel=1e-11, abs=1e-9)
        np.testing.assert_allclose(g_l, g_v, rtol=1e-9, atol=1e-9)
        expected = reference(loop_m, loop_m.constrain(x))
        assert loop_m.log_density(x, jacobian=False) == pytest.approx(expected, rel=1e-10)
