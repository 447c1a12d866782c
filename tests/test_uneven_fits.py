"""Fits of interrupted runs (issue 19 review): a fit with no draws yet (Ctrl-C in
warmup) summarises, diagnoses, saves and loads; messages number chains 0-based as
``fit.draws(chain=i)``; the cut-to-the-shortest warning comes once per user call and
not from save(); diagnose() separates divergences at rejected proposals from step-size
divergences; resume_from refuses fewer draws or other settings than the run's."""

import warnings

import numpy as np
import pytest

import stanlite as sl

from testkit import StopOnce


def _interrupted(limit, **kw):
    m = StopOnce(y=0.4)
    StopOnce.calls[0] = 0
    StopOnce.limit[0] = limit
    kw = {**dict(chains=2, draws=30, warmup=200, seed=5, progress=False,
                 parallel=False), **kw}
    with pytest.warns(RuntimeWarning, match="interrupted"):
        fit = m.sample(**kw)
    StopOnce.limit[0] = None
    return m, fit


def _cut_warnings(record):
    return [w for w in record if "cut to the shortest" in str(w.message)]


# ---- A: no draws yet ----------------------------------------------------------------
def test_fit_interrupted_in_warmup_summarises_diagnoses_saves(tmp_path):
    m, fit = _interrupted(limit=50)              # long before warmup=200 ends
    assert fit.num_draws == 0 and all(len(s.draws) == 0 for s in fit.chain_states)
    s = fit.summary()
    assert s.empty and list(s.columns) == ["mean", "sd", "5%", "50%", "95%",
                                           "mcse_mean", "ess_bulk", "ess_tail", "r_hat"]
    d = fit.diagnose()
    assert "no draws yet" in d and "resume_from" in d and "warmup" in d
    path = fit.save(tmp_path / "w.nc")
    back = sl.load_fit(path, model=m)
    assert back.num_draws == 0 and back.summary().empty
    assert "no draws yet" in back.diagnose()
    assert fit.to_arviz().posterior["mu"].shape == (2, 0)
    resumed = m.sample(resume_from=back, progress=False, parallel=False)
    assert resumed["mu"].shape == (2, 30) and not resumed.interrupted


# ---- B, D: uneven chains ---------------------------------------------------------------
def _uneven():
    """Chain 0 whole (100 draws), chain 1 stopped in its sampling phase."""
    kw = dict(chains=2, draws=100, warmup=100, seed=5, progress=False, parallel=False)
    calls = []
    for n in (1, 2):
        StopOnce.calls[0], StopOnce.limit[0] = 0, None
        StopOnce(y=0.4).sample(**{**kw, "chains": n})
        calls.append(StopOnce.calls[0])
    m, fit = _interrupted(calls[0] + int(0.8 * (calls[1] - calls[0])), **kw)
    lengths = [len(s.draws) for s in fit.chain_states]
    assert lengths[0] == 100 and 4 <= lengths[1] < 100, lengths
    return m, fit


def test_uneven_fit_warns_once_per_call_and_not_on_save(tmp_path):
    m, fit = _uneven()
    k = len(fit.chain_states[1].draws)
    for call in (fit.diagnose, fit.summary, fit.to_arviz):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            call()
        cut = _cut_warnings(rec)
        assert len(cut) == 1, [str(w.message) for w in cut]
        # 0-based chain numbers, as fit.draws(chain=i)
        assert f"chain(s) 0 ({100 - k} more)" in str(cut[0].message)
    fit._idata = None
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        path = fit.save(tmp_path / "u.nc")
    assert _cut_warnings(rec) == []
    # the state keeps every chain whole
    back = sl.load_fit(path, model=m)
    assert [len(s.draws) for s in back.chain_states] == [100, k]
    np.testing.assert_array_equal(back.draws(chain=0)["mu"], fit.draws(chain=0)["mu"])


# ---- C: divergences at rejected proposals ----------------------------------------------
class _Wall(sl.Model):
    """A normal whose density is undefined (non-finite) above 0.5: every proposal
    there is rejected, which ends its transition as a divergence."""
    mu = sl.param.real()
    compile = False

    def log_prob(self, mu):
        if sl.value_of(mu) > 0.5:
            return -np.inf
        return sl.normal_lpdf(mu, 0.0, 1.0)


def test_diagnose_tells_divergences_at_rejections_from_step_size_ones():
    fit = _Wall().sample(chains=2, draws=200, warmup=200, seed=3, progress=False,
                         parallel=False)
    nd = int(fit["divergent__"].sum())
    at = sum(len(s.rejected_draws) for s in fit.chain_states)
    assert nd > 0 and at > 0
    d = fit.diagnose()
    line = next(ln for ln in d.splitlines() if "divergence" in ln)
    assert "ended at a rejected proposal" in line and "model's domain" in line
    assert "adapt_delta will not remove them" in line
    if at == nd:
        assert f"All {nd} ended at a rejected proposal" in line
        assert "increase adapt_delta" not in line
    else:
        assert f"{at} of them ended at a rejected proposal" in line


# ---- I: resume_from keeps the run's settings --------------------------------------------
def test_resume_refuses_fewer_draws_and_other_settings():
    m = StopOnce(y=0.4)
    fit = m.sample(chains=1, draws=20, warmup=20, seed=2, progress=False, parallel=False)
    with pytest.raises(sl.ArgumentError, match=r"draws=5 is fewer than the 20 draws"):
        m.sample(resume_from=fit, draws=5, progress=False)
    for kw, msg in ((dict(warmup=500), r"warmup=500 differs .*warmup=20"),
                    (dict(warmup=0), r"warmup=0 differs"),
                    (dict(adapt_delta=0.95), r"adapt_delta=0.95 differs .*0.8"),
                    (dict(metric="dense_e"), r"metric='dense_e' differs")):
        with pytest.raises(sl.ArgumentError, match=msg):
            m.sample(resume_from=fit, progress=False, **kw)
    # the run's own values (or none) are fine; draws extends it
    more = m.sample(resume_from=fit, draws=30, warmup=20, adapt_delta=0.8,
                    progress=False, parallel=False)
    assert more["mu"].shape == (1, 30)
    np.testing.assert_array_equal(more["mu"][:, :20], fit["mu"])


def test_cli_prints_a_fit_without_draws(tmp_path, monkeypatch, capsys):
    from stanlite import cli
    monkeypatch.setattr(cli, "build_model", lambda name, data: StopOnce(y=0.4))
    StopOnce.calls[0], StopOnce.limit[0] = 0, 50       # Ctrl-C long before warmup ends
    out = tmp_path / "x.nc"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # the interrupt's warning
        code = cli.main(["sample", "stop", "--chains", "2", "--warmup", "200", "--draws",
                         "30", "--serial", "--no-progress", "--output", str(out)])
    StopOnce.limit[0] = None
    printed = capsys.readouterr().out
    assert code == 0, capsys.readouterr().err
    assert "No draws to summarise yet." in printed and "no draws yet" in printed
    assert "resume_from" in printed and out.exists()
