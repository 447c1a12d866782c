"""Faults after sampling never lose draws: ``generated_quantities`` failing at some or
every draw (NaN, one warning), a real Ctrl-C (SIGINT) while the generated quantities
are computed, and a full disk (a file-size limit) while a fit is saved over a good
file. The signal and disk cases run in child processes."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import stanlite as sl

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and rlimits")


class Flaky(sl.Model):
    """generated_quantities raises where mu > 0.5 (a bug that shows at some draws)."""
    mu = sl.param.real()

    def log_prob(self, mu):
        return sl.normal_lpdf(mu, 0.0, 1.0)

    def generated_quantities(self, rng, mu):
        if mu > 0.5:
            raise ZeroDivisionError("boom")
        return {"k": rng.poisson(3.0), "v": np.array([mu, 2 * mu])}


class AlwaysFails(Flaky):
    def generated_quantities(self, rng, mu):
        return {"v": [1.0, mu][5]}                  # an IndexError at every draw


class FailsAtOrigin(Flaky):
    """Undefined at mu = 0 (the origin output_shapes used to rely on)."""
    def generated_quantities(self, rng, mu):
        if mu == 0.0:
            raise ValueError("undefined at 0")
        return {"logabs": np.log(abs(mu))}


class ShapeChanges(Flaky):
    def generated_quantities(self, rng, mu):
        return {"v": np.zeros(2 if mu < 0 else 3)}


_KW = dict(chains=2, draws=60, warmup=60, seed=5, progress=False, parallel=False)


def test_gq_failing_at_some_draws_gives_nan_and_one_warning():
    with pytest.warns(RuntimeWarning, match=r"failed at \d+ of 120 draws \(the first at "
                      r"chain \d, draw \d+: ZeroDivisionError: boom\).*\(k, v\) are NaN"
                      ) as rec:
        fit = Flaky().sample(**_KW)
    assert len([w for w in rec if "generated_quantities" in str(w.message)]) == 1
    bad = fit["mu"] > 0.5
    assert 0 < bad.sum() < 120
    assert fit["mu"].shape == (2, 60) and np.isfinite(fit["mu"]).all()
    assert np.isnan(fit["k"][bad]).all() and np.isfinite(fit["k"][~bad]).all()
    assert np.isnan(fit["v"][bad]).all() and fit["v"].shape == (2, 60, 2)
    np.testing.assert_array_equal(fit["v"][~bad][:, 1], 2 * fit["mu"][~bad])
    # integer draws are floats (NaN fits them); the others are still whole numbers
    assert fit["k"].dtype == float and (fit["k"][~bad] == np.round(fit["k"][~bad])).all()
    # the same warning and values when the fit is rebuilt (the seeds are kept)
    with pytest.warns(RuntimeWarning, match="generated_quantities failed"):
        again = Flaky().sample(resume_from=fit, progress=False, parallel=False)
    np.testing.assert_array_equal(again["k"], fit["k"])


def test_gq_failing_everywhere_keeps_the_draws():
    with pytest.warns(RuntimeWarning, match="failed at every one of the 120 draws .*"
                      "IndexError.*no generated quantities; the parameter draws are all"):
        fit = AlwaysFails().sample(**_KW)
    assert fit.names == ["mu"] and fit["mu"].shape == (2, 60)
    assert np.isfinite(fit["mu"]).all()


def test_gq_shapes_come_from_the_draws_not_the_origin():
    m = FailsAtOrigin()
    fit = m.sample(**_KW)                           # no warning: mu is never exactly 0
    np.testing.assert_array_equal(fit["logabs"], np.log(np.abs(fit["mu"])))
    assert m.output_shapes() == ({}, {"logabs": ()})   # found away from the origin
    with pytest.raises(sl.ModelError, match="failed at the origin .* and at 20 random "
                       "points; the first failure: IndexError"):
        AlwaysFails().output_shapes()


def test_gq_changing_shape_counts_as_a_failure():
    with pytest.warns(RuntimeWarning, match=r"ModelError: generated quantity 'v' has "
                      r"shape \(\d,\) here and \(\d,\) at the first draw"):
        fit = ShapeChanges().sample(**_KW)
    first = fit["mu"][0, 0]
    same = (fit["mu"] < 0) == (first < 0)
    assert np.isfinite(fit["v"][same]).all() and np.isnan(fit["v"][~same]).all()


# ---- real signals and rlimits in child processes --------------------------------------------
def _child(code, tmp_path, **kw):
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(code))
    env = dict(os.environ, PYTHONWARNINGS="default", STANLITE_COMPILE="0")
    return subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


_SLOW_GQ = """
    import sys, time
    import numpy as np
    import stanlite as sl

    class Slow(sl.Model):
        mu = sl.param.real()
        started = False

        def log_prob(self, mu):
            return sl.normal_lpdf(mu, 0.0, 1.0)

        def generated_quantities(self, rng, mu):
            if not Slow.started:
                Slow.started = True
                print("GQ-STARTED", flush=True)
            time.sleep(0.01)
            return {"y_rep": rng.normal(mu, 1.0)}

    fit = Slow().sample(chains=3, draws=200, warmup=50, seed=2, progress=False,
                        parallel={parallel})
    fit.save("fit.nc")
    print("SAVED", fit.num_chains, fit.num_draws,
          int(np.isfinite(fit["mu"]).sum()), int(np.isfinite(fit["y_rep"]).sum()),
          flush=True)
"""


@pytest.mark.parametrize("parallel", [False, True])
def test_ctrl_c_during_generated_quantities_keeps_every_draw(tmp_path, parallel):
    p = _child(_SLOW_GQ.replace("{parallel}", str(parallel)), tmp_path)
    try:
        line = p.stdout.readline()
        assert line.strip() == "GQ-STARTED", (line, p.stderr.read() if p.poll() else "")
        time.sleep(0.3)                          # some quantities computed, most not
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    tag, chains, draws, finite_mu, finite_rep = out.split()
    assert (tag, int(chains), int(draws)) == ("SAVED", 3, 200)
    assert int(finite_mu) == 600                 # every parameter draw is there
    assert 0 < int(finite_rep) < 600             # the quantities not reached are NaN
    assert "interrupted while computing the transformed parameters and generated " \
           "quantities" in err and "resume_from=fit) recomputes them" in err
    fit = sl.load_fit(tmp_path / "fit.nc")
    assert fit["mu"].shape == (3, 200) and np.isfinite(fit["mu"]).all()
    assert fit.unconstrained_draws.shape == (3, 200, 1)
