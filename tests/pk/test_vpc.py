"""sl.pk.vpc on small synthetic data: the binning, the observed percentiles, the
simulated percentiles' medians and intervals (exact numbers from constructed
simulations), the outside flags, prediction correction, a fit-like input, the
errors, and the plot rendering with the Agg backend."""

import io

import numpy as np
import pytest

import stanlite as sl
from stanlite.errors import DataError

T = np.array([0.5, 1.0, 1.0, 2.0, 4.0, 4.0, 8.0, 8.0, 12.0, 12.0])
OBS = np.array([3.0, 5.0, 6.0, 7.0, 6.5, 5.5, 4.0, 3.0, 2.0, 1.0])


def constant_sims(n_sim=100):
    """Data set s is the constant s: each simulated percentile is s, so over the
    simulations the percentiles of 0..n_sim-1."""
    return np.repeat(np.arange(n_sim, dtype=float)[:, None], T.size, axis=1)


def test_numbers_with_given_edges():
    v = sl.pk.vpc(constant_sims(), OBS, T, bins=[0, 1, 3, 10, 12])
    # an observation at an inner edge goes right; the last edge is included
    np.testing.assert_array_equal(v.n_obs, [1, 3, 4, 2])
    np.testing.assert_allclose(v.x, [0.5, 1.0, 6.0, 12.0])
    np.testing.assert_allclose(v.observed[1], np.quantile([5.0, 6.0, 7.0],
                                                          [0.05, 0.5, 0.95]))
    np.testing.assert_allclose(v.observed[3], [1.05, 1.5, 1.95])
    expect = np.quantile(np.arange(100.0), [0.05, 0.5, 0.95])     # 4.95, 49.5, 94.05
    np.testing.assert_allclose(v.simulated, np.broadcast_to(expect, (4, 3, 3)))
    # the data are 1-7, the intervals 4.95-94.05
    np.testing.assert_array_equal(v.outside, v.observed < 4.95)
    df = v.to_dataframe()
    assert len(df) == 12 and df["outside"].sum() == 8
    assert "4 bins" in repr(v)


def test_simulations_from_the_same_model_are_calibrated():
    """Observations and simulations from the same model: over 40 seeded replications
    of 6 bins x 3 percentiles at ci = 0.95, on average 18 x 5% = 0.9 observed
    percentiles fall outside (measured 0.875); simulations with a quarter of the
    spread put the outer percentiles outside everywhere."""
    t = np.tile([0.5, 1, 2, 4, 8, 12], 40)
    f = 10 * (np.exp(-0.15 * t) - np.exp(-1.5 * t))
    counts = []
    for seed in range(40):
        rng = np.random.default_rng(seed)
        obs = sl.pk.exponential_error_rng(f, 0.2, rng)
        sims = sl.pk.exponential_error_rng(np.broadcast_to(f, (500, t.size)), 0.2, rng)
        v = sl.pk.vpc(sims, obs, t, bins=6, ci=0.95)
        counts.append(v.outside.sum())
    np.testing.assert_array_equal(v.n_obs, [40] * 6)
    assert 0.5 < np.mean(counts) < 1.4
    narrow = sl.pk.exponential_error_rng(np.broadcast_to(f, (500, t.size)), 0.05, rng)
    w = sl.pk.vpc(narrow, obs, t, bins=6, ci=0.95)
    assert w.outside[:, [0, 2]].all()


def test_quantile_bins_and_a_fit_like_input():
    sims = constant_sims(20).reshape(4, 5, T.size)        # chains x draws x n_obs
    v = sl.pk.vpc({"conc_rep": sims}, OBS, T, name="conc_rep", bins=2)
    assert v.n_obs.sum() == T.size and len(v.x) == 2
    np.testing.assert_allclose(v.edges, [0.5, 4.0, 12.0])
    w = sl.pk.vpc(sims, OBS, T, bins=2)
    np.testing.assert_array_equal(v.simulated, w.simulated)


def test_prediction_correction():
    pred = np.array([2.0, 4.0, 8.0, 8.0, 6.0, 6.0, 4.0, 2.0, 1.0, 1.0])
    obs = 1.5 * pred                                    # proportional to PRED
    v = sl.pk.vpc(constant_sims(), obs, T, bins=[0, 1, 3, 10, 12.5], pred=pred)
    # corrected: 1.5 x the bin's median PRED, the same for every observation in a bin
    np.testing.assert_allclose(v.observed[:, 1], 1.5 * np.array([2.0, 8.0, 5.0, 1.0]))
    np.testing.assert_allclose(v.observed[:, 0], v.observed[:, 2])
    assert v.pred_corrected
    with pytest.raises(DataError, match="pred must be > 0"):
        sl.pk.vpc(constant_sims(), obs, T, pred=pred * 0)


def test_errors():
    with pytest.raises(DataError, match=r"one simulated value per observation"):
        sl.pk.vpc(np.zeros((5, 3)), OBS, T)
    with pytest.raises(DataError, match="same length"):
        sl.pk.vpc(constant_sims(), OBS[:-1], T)
    with pytest.raises(DataError, match="probs must be fractions"):
        sl.pk.vpc(constant_sims(), OBS, T, probs=(5, 50, 95))
    with pytest.raises(DataError, match="increasing bin edges"):
        sl.pk.vpc(constant_sims(), OBS, T, bins=[0, 5, 5])
    with pytest.raises(DataError, match="no simulated quantity 'y_rep'"):
        sl.pk.vpc({"conc_rep": constant_sims()}, OBS, T, name="y_rep")


def test_plot_renders_with_agg():
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    import matplotlib.pyplot as plt
    v = sl.pk.vpc(constant_sims() / 10, OBS, T, bins=[0, 1, 3, 10, 12])
    ax = v.plot(log=True)
    try:
        assert len(ax.collections) == 3                      # one band per percentile
        styles = [ln.get_linestyle() for ln in ax.get_lines()]
        assert styles.count("-") == 1 and styles.count("--") == 2
        assert ax.get_yscale() == "log"
        buf = io.BytesIO()
        ax.figure.savefig(buf, format="png")
        assert buf.getvalue()[:4] == b"\x89PNG"
    finally:
        plt.close(ax.figure)
