"""Ctrl-C while chains run, with real signals (issue 19, point 4 and point 5's second
Ctrl-C): a script samples a slow model in a subprocess, prints a marker when each
chain starts, gets SIGINT, and reports what the fit kept. Checked: queued chains do
not start after the interrupt (the run returns soon after the signal, relative to
how long a chain takes), a serial Ctrl-C keeps every chain that has draws, chains of
unequal length are all kept (``fit.draws(chain=i)`` whole, ``fit[name]`` cut to the
shortest with a warning), a second SIGINT while the runner collects loses nothing,
and ``resume_from`` continues every chain - also those that never started - to the
draws of an uninterrupted run."""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import stanlite as sl

from testkit import StopOnce, killed_on_exit, wait_ok

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

SCRIPT = textwrap.dedent('''
    import json, os, signal, sys, time, warnings
    import numpy as np
    import stanlite as sl
    from stanlite.autodiff.var import value_of

    class Slow(sl.Model):
        """A 2-d normal whose every evaluation sleeps: slow enough to interrupt."""
        mu = sl.param.vector(2)
        compile = False            # the sleep must run at every evaluation
        pause = 0.004

        def log_prob(self, mu):
            v = np.asarray(value_of(mu), dtype=float)
            if v[1] == 0.0 and v[0] in (0.5, 1.5, 2.5, 3.5):      # a chain's init
                os.write(1, b"START %d\\n" % int(v[0]))         # one write: atomic
            time.sleep(self.pause)
            return sl.normal_lpdf(mu, 0.0, 1.0)

    if __name__ == "__main__":
        mode, out, pause, warmup, draws = sys.argv[1:6]
        Slow.pause = float(pause)
        kw = dict(chains=4, warmup=int(warmup), draws=int(draws), seed=3, progress=False,
                  init=[{"mu": [c + 0.5, 0.0]} for c in range(4)])
        if mode == "serial":
            kw["parallel"] = False
        else:
            kw["max_workers"] = 2                  # 4 chains, 2 run, 2 queued
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fit = Slow().sample(**kw)
        t_return = time.time()
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the report must not be cut short
        with warnings.catch_warnings(record=True) as cut:
            warnings.simplefilter("always")
            shape = list(fit["mu"].shape)
        res = dict(t_return=t_return, interrupted=fit.interrupted,
                   iterations=[s.iteration for s in fit.chain_states],
                   n_draws=[len(s.draws) for s in fit.chain_states],
                   whole=[len(fit.draws(chain=c)["mu"]) for c in range(4)],
                   shape=shape, chain_ids=fit.chain_ids,
                   warnings=[str(w.message) for w in caught],
                   cut=[str(w.message) for w in cut])
        with open(out, "w") as f:
            json.dump(res, f)
''')


def _interrupt(tmp_path, mode, pause, warmup, draws, n_signals=1, group=False,
               wait_for=1, after=1.0):
    """Run the script, wait until chain ``wait_for`` started (plus ``after`` s), send
    SIGINT (to the whole process group, as a terminal's Ctrl-C, if ``group``; a
    second one 0.05 s later if ``n_signals`` is 2); the report, stderr, the time the
    first signal was sent and the time sampling had run before it."""
    script = tmp_path / "interrupt_me.py"
    script.write_text(SCRIPT)
    out = tmp_path / "report.json"
    p = subprocess.Popen([sys.executable, str(script), mode, str(out), str(pause),
                          str(warmup), str(draws)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    with killed_on_exit(p):
        seen, t_first = "", None
        while f"START {wait_for}" not in seen:
            line = p.stdout.readline()
            assert line, f"the script ended before chain {wait_for} started: " \
                         f"{p.communicate()[1][-2000:]}"
            seen += line
            if t_first is None and "START" in seen:
                t_first = time.time()
        time.sleep(after)
        t_signal = time.time()
        if group:
            os.killpg(p.pid, signal.SIGINT)
        else:
            p.send_signal(signal.SIGINT)
        for _ in range(n_signals - 1):
            time.sleep(0.05)
            p.send_signal(signal.SIGINT)
        _, err = wait_ok(p)
    return json.loads(out.read_text()), err, t_signal, t_signal - t_first


def _seconds_per_chain(report, ran, running_time, total):
    """How long one whole chain takes, from the iterations the running chains did."""
    rate = sum(report["iterations"][c] for c in ran) / len(ran) / running_time
    return total / rate


def _check_unequal_chains_kept(r):
    with_draws = [c for c in range(4) if r["n_draws"][c] > 0]
    assert r["whole"] == r["n_draws"]                   # fit.draws(chain=i): whole
    assert r["chain_ids"] == with_draws
    assert r["shape"] == [len(with_draws), min(r["n_draws"][c] for c in with_draws), 2]
    if len(set(r["n_draws"])) > 1:
        assert len(r["cut"]) == 1 and "cut to the shortest chain" in r["cut"][0]
    assert any("interrupted" in w for w in r["warnings"])


@pytest.mark.parametrize("group", [False, True], ids=["parent", "process-group"])
def test_parallel_ctrl_c_queued_chains_do_not_start(tmp_path, group):
    total = 30 + 1000
    r, err, t_signal, ran_for = _interrupt(tmp_path, "parallel", 0.004, 30, 1000,
                                           group=group, after=1.5)
    assert r["interrupted"]
    # chains 0 and 1 ran and stopped; 2 and 3 (queued behind them) never started
    assert all(0 < r["iterations"][c] < total for c in (0, 1)), r["iterations"]
    assert r["iterations"][2:] == [0, 0]
    assert any("chain(s) 2, 3 (0-based, as fit.draws(chain=i)) had not started" in w
               for w in r["warnings"])
    _check_unequal_chains_kept(r)
    # the run returned within a small part of what one queued chain would take
    # (before the fix the queued chains ran whole after the signal)
    chain_time = _seconds_per_chain(r, (0, 1), ran_for, total)
    assert r["t_return"] - t_signal < 0.25 * chain_time, (r["t_return"] - t_signal,
                                                           chain_time)


def test_serial_ctrl_c_keeps_every_chain_with_draws(tmp_path):
    total = 10 + 300
    r, err, t_signal, ran_for = _interrupt(tmp_path, "serial", 0.004, 10, 300,
                                           group=True, wait_for=1, after=0.5)
    assert r["interrupted"]
    assert r["iterations"][0] == total                  # chain 1 finished
    assert 0 < r["iterations"][1] < total               # chain 2 stopped mid-way
    assert r["iterations"][2:] == [0, 0]                # 3, 4: initialised, for resume
    _check_unequal_chains_kept(r)
    assert 0 in r["chain_ids"]
    assert r["t_return"] - t_signal < 0.25 * ran_for    # chain 1 took ran_for or less


def test_second_ctrl_c_while_collecting_keeps_the_draws(tmp_path):
    # slow iterations (0.1 s an evaluation): after the first SIGINT the workers finish
    # their current iteration, and the second SIGINT comes while the runner waits
    r, err, t_signal, _ = _interrupt(tmp_path, "parallel", 0.1, 2, 200, n_signals=2,
                                     after=1.5)
    assert "stanlite: stopping" in err                   # the runner absorbed it
    assert r["interrupted"]
    assert all(r["iterations"][c] > 0 for c in (0, 1)) and r["iterations"][2:] == [0, 0]
    _check_unequal_chains_kept(r)


# ---- in-process: unequal chains, never-started chains, resume ------------------------------
@pytest.mark.parametrize("parallel", [False, True])
def test_resume_continues_every_chain_also_unstarted(parallel):
    m = StopOnce(y=0.4)
    kw = dict(chains=3, draws=60, warmup=40, seed=21, progress=False)
    StopOnce.limit[0] = None
    full = m.sample(parallel=False, **kw)
    # stop late in the second chain (serially: the third never starts); the
    # evaluations each chain takes, from runs of the first one and the first two
    calls = []
    for n in (1, 2):
        StopOnce.calls[0] = 0
        m.sample(parallel=False, **{**kw, "chains": n})
        calls.append(StopOnce.calls[0])
    StopOnce.calls[0] = 0
    StopOnce.limit[0] = calls[0] + int(0.8 * (calls[1] - calls[0]))
    with pytest.warns(RuntimeWarning, match=r"chain\(s\) 2 \(0-based, as "
                                            r"fit.draws\(chain=i\)\) had not started"):
        part = m.sample(parallel=False, **kw)
    lengths = [len(s.draws) for s in part.chain_states]
    assert lengths[0] == 60 and 0 < lengths[1] < 60 and lengths[2] == 0
    assert [s.iteration for s in part.chain_states][2] == 0
    # chain i whole; fit[name] cut to the shortest chain with draws, with a warning
    for c in range(3):
        np.testing.assert_array_equal(part.draws(chain=c)["mu"],
                                      full["mu"][c, :lengths[c]])
        np.testing.assert_array_equal(part.draws(chain=c)["y_rep"],
                                      full["y_rep"][c, :lengths[c]])
        assert len(part.draws(chain=c)["lp__"]) == lengths[c]
    with pytest.warns(RuntimeWarning, match=rf"cut to the shortest chain's {lengths[1]} "
                                            rf"draws, hiding {60 - lengths[1]} draws"):
        mu = part["mu"]
    assert mu.shape == (2, lengths[1]) and part.chain_ids == [0, 1]
    with pytest.warns(RuntimeWarning, match=r"summary\(\) is cut"):
        assert part.summary().shape[0] == 2              # mu, y_rep
    # resume: every chain continues, the unstarted one from its own seed
    resumed = m.sample(resume_from=part, progress=False, parallel=parallel)
    assert not resumed.interrupted
    for k in ("mu", "y_rep", "lp__"):
        np.testing.assert_array_equal(resumed[k], full[k])


def test_draws_of_a_chain_checks_its_argument():
    m = StopOnce(y=0.4)
    StopOnce.limit[0] = None
    fit = m.sample(chains=2, draws=10, warmup=10, seed=1, progress=False, parallel=False)
    assert set(fit.draws(chain=1)) >= {"mu", "y_rep", "lp__", "divergent__"}
    np.testing.assert_array_equal(fit.draws(chain=1)["mu"], fit["mu"][1])
    for bad in (2, -1, 1.0, True):
        with pytest.raises(ValueError, match="chain must be an integer in 0..1"):
            fit.draws(chain=bad)


# ---- exceptions a worker cannot send back as themselves ----------------------------------
class _TwoArgError(Exception):
    """Unpickling calls __init__(*args) with one argument: it fails."""

    def __init__(self, a, b):
        super().__init__(f"bad {a} {b}")


class _Raises(sl.Model):
    """Raises ``what[0]()`` in log_prob (a programming error: the run stops)."""
    mu = sl.param.real()
    what = [None]

    def log_prob(self, mu):
        raise self.what[0]()


def _raise_in_workers(make, monkeypatch):
    from stanlite.samplers import runner
    if "fork" not in __import__("multiprocessing").get_all_start_methods():
        pytest.skip("needs the fork start method (the model class is a test's)")
    monkeypatch.setenv(runner.START_METHOD_ENV, "fork")
    _Raises.what[0] = make
    try:
        _Raises().sample(chains=2, draws=5, warmup=5, seed=1, progress=False,
                         parallel=True)
    finally:
        _Raises.what[0] = None


@pytest.mark.parametrize("make, shown", [
    (lambda: _TwoArgError("p", "q"), "_TwoArgError: bad p q"),
    (lambda: RuntimeError("lock attached", __import__("threading").Lock()),
     "RuntimeError: ('lock attached', <unlocked _thread.lock"),
])
def test_unpicklable_exception_in_a_worker_is_sent_back_as_text(make, shown,
                                                                  monkeypatch):
    # these broke the pool before: "a chain's worker process died"
    # the class the runner raises (sl.RemoteError is the same one, imported there)
    from stanlite.samplers.runner import RemoteError, picklable
    if not isinstance(picklable(make()), RemoteError):
        # a library imported earlier in this process (tblib, which dask installs)
        # taught pickle to rebuild exceptions without calling __init__: the forked
        # workers inherit that, and the exception then comes back as itself
        with pytest.raises(type(make()), match=re.escape(shown.split(": ", 1)[1])):
            _raise_in_workers(make, monkeypatch)
        return
    with pytest.raises(RemoteError) as info:
        _raise_in_workers(make, monkeypatch)
    msg = str(info.value)
    assert msg.startswith(shown), msg
    assert "in log_prob" in msg and "raise self.what[0]()" in msg    # the user's line
    assert isinstance(info.value, sl.StanliteError)


def test_picklable_exception_in_a_worker_comes_back_as_itself(monkeypatch):
    with pytest.raises(KeyError, match="plain") as info:
        _raise_in_workers(lambda: KeyError("plain"), monkeypatch)
    # concurrent.futures attaches the worker's traceback as the cause
    assert "raise self.what[0]()" in str(info.value.__cause__)
