"""Executors and platforms (issue 19, points 11-13): a model class defined in a
script's ``__main__`` sampled on a real ``distributed.LocalCluster`` (given as the
``Client`` or its ``get_executor()``) and under the ``spawn`` start method, each in a
subprocess running a script as a user would; an unguarded spawn script gets a clear
error instead of a recursive failure; worker processes run with one BLAS thread
unless asked otherwise; progress bars advance under executors without a queue."""

import concurrent.futures as cf
import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import stanlite as sl
from stanlite.samplers import runner

from testkit import killed_on_exit, wait_ok

MODEL = '''
import json, sys
import numpy as np
import stanlite as sl

class Script(sl.Model):                     # defined in __main__: pickled by value
    N = sl.data.int(lower=0)
    y = sl.data.vector("N")
    mu = sl.param.real()
    sigma = sl.param.real(lower=0)

    def log_prob(self, mu, sigma):
        return sl.normal_lpdf(self.y, mu, sigma) + sl.normal_lpdf(mu, 0, 5) \\
            + sl.lognormal_lpdf(sigma, 0, 1)

    def generated_quantities(self, rng, mu, sigma):
        return {"y_new": rng.normal(mu, sigma)}

KW = dict(chains=2, draws=30, warmup=30, seed=4, progress=False)
'''


def _run_script(tmp_path, body, env=None, timeout=180):
    script = tmp_path / "user_script.py"
    script.write_text(MODEL + textwrap.dedent(body))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=timeout, cwd=tmp_path, env={**os.environ, **(env or {})})


def test_dask_local_cluster_with_a_class_from_main(tmp_path):
    pytest.importorskip("distributed")
    p = _run_script(tmp_path, '''
        if __name__ == "__main__":
            import warnings
            from distributed import Client, LocalCluster
            m = Script(N=3, y=[0.2, -0.5, 1.1])
            ref = m.sample(parallel=False, **KW)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")        # the cluster's own notices
                with LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as cluster, \\
                        Client(cluster) as client:
                    a = m.sample(executor=client, **KW)
                    b = m.sample(executor=client.get_executor(), **KW)
            same = [bool(np.array_equal(f[k], ref[k])) for f in (a, b)
                    for k in ("mu", "sigma", "y_new", "lp__")]
            print(json.dumps({"same": same}))
    ''')
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout.strip().splitlines()[-1]) == {"same": [True] * 8}


def test_spawn_start_method_with_a_guarded_script(tmp_path):
    p = _run_script(tmp_path, '''
        if __name__ == "__main__":
            m = Script(N=3, y=[0.2, -0.5, 1.1])
            ref = m.sample(parallel=False, **KW)
            fit = m.sample(**KW)                       # processes, started by spawn
            print(json.dumps({"same": bool(np.array_equal(fit["mu"], ref["mu"])
                                           and np.array_equal(fit["y_new"], ref["y_new"]))}))
    ''', env={runner.START_METHOD_ENV: "spawn"})
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout.strip().splitlines()[-1]) == {"same": True}


def test_spawn_start_method_set_by_the_script(tmp_path):
    # the user's own choice (multiprocessing.set_start_method) is honoured too
    p = _run_script(tmp_path, '''
        if __name__ == "__main__":
            import multiprocessing
            multiprocessing.set_start_method("spawn")
            m = Script(N=3, y=[0.2, -0.5, 1.1])
            ref = m.sample(parallel=False, **KW)
            fit = m.sample(**KW)
            print(json.dumps({"same": bool(np.array_equal(fit["mu"], ref["mu"]))}))
    ''', env={runner.START_METHOD_ENV: ""})
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout.strip().splitlines()[-1]) == {"same": True}


def test_unguarded_spawn_script_gets_a_clear_error(tmp_path):
    p = _run_script(tmp_path, '''
        m = Script(N=3, y=[0.2, -0.5, 1.1])
        fit = m.sample(**KW)                           # no __main__ guard
    ''', env={runner.START_METHOD_ENV: "spawn"}, timeout=120)
    assert p.returncode != 0
    assert 'if __name__ == "__main__":' in p.stderr
    assert "StanliteError" in p.stderr
    assert "bootstrapping phase" not in p.stderr       # multiprocessing's own riddle


class _Killed(sl.Model):
    """A worker that dies (as the kernel's OOM killer would kill it) at its first
    gradient evaluation in a worker process."""
    x = sl.param.real()
    compile = False
    parent = [None]

    def log_prob(self, x):
        if os.getpid() != self.parent[0]:
            os.kill(os.getpid(), signal.SIGKILL)
        return sl.normal_lpdf(x, 0.0, 1.0)


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="needs fork")
def test_a_killed_forked_worker_is_not_blamed_on_spawn(monkeypatch):
    monkeypatch.setenv(runner.START_METHOD_ENV, "fork")
    _Killed.parent[0] = os.getpid()
    with pytest.raises(sl.StanliteError, match="worker process died") as e:
        _Killed().sample(chains=2, draws=5, warmup=5, seed=1, progress=False)
    assert "killed" in str(e.value) and "spawn" not in str(e.value)


def test_unknown_start_method_is_named(monkeypatch):
    monkeypatch.setenv(runner.START_METHOD_ENV, "teleport")
    m = _Threads()
    with pytest.raises(ValueError, match="STANLITE_START_METHOD='teleport'"):
        m.sample(chains=2, draws=5, warmup=5, seed=1, progress=False)


# ---- BLAS threads ------------------------------------------------------------------------
class _Threads(sl.Model):
    """Records the BLAS thread count of the process that evaluates it."""
    x = sl.param.real()
    compile = False
    record = [None]               # a folder: one file per process

    def log_prob(self, x):
        folder = self.record[0]
        if folder is not None:
            from threadpoolctl import threadpool_info
            n = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
            with open(os.path.join(folder, f"{os.getpid()}.json"), "w") as f:
                json.dump(n, f)
        return sl.normal_lpdf(x, 0.0, 1.0)


def _blas_threads_seen(tmp_path, **kw):
    _Threads.record[0] = str(tmp_path)
    try:
        _Threads().sample(chains=2, draws=5, warmup=5, seed=1, progress=False, **kw)
    finally:
        _Threads.record[0] = None
    seen = {}
    for f in tmp_path.glob("*.json"):
        seen[int(f.stem)] = json.loads(f.read_text())
        f.unlink()
    return seen


def test_workers_run_with_one_blas_thread(tmp_path, monkeypatch):
    pytest.importorskip("threadpoolctl")
    monkeypatch.delenv(runner.START_METHOD_ENV, raising=False)
    seen = _blas_threads_seen(tmp_path)
    assert os.getpid() not in seen and seen              # evaluated in the workers
    assert all(n and set(n) == {1} for n in seen.values()), seen
    seen = _blas_threads_seen(tmp_path, blas_threads=2)
    assert all(n and set(n) == {2} for n in seen.values()), seen


def _blas_here():
    from threadpoolctl import threadpool_info
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


@pytest.mark.parametrize("how", [dict(parallel=False), dict(chains=1)])
def test_chains_in_this_process_run_with_one_blas_thread_then_restore(tmp_path, how):
    # measured (benchmarks/serial_blas_threads.py): a 3x3 cov_matrix model 4x and a
    # GP with N=200-300 3-7x slower with 2 BLAS threads than with 1, serially
    pytest.importorskip("threadpoolctl")
    from threadpoolctl import threadpool_limits
    kw = dict(dict(chains=2), **how)
    with threadpool_limits(limits=2, user_api="blas"):
        here = _blas_here()
        assert here and set(here) == {2}
        _Threads.record[0] = str(tmp_path)
        try:
            _Threads().sample(draws=5, warmup=5, seed=1, progress=False, **kw)
            seen = json.loads((tmp_path / f"{os.getpid()}.json").read_text())
            assert seen == [1] * len(here)              # limited during the run
            assert _blas_here() == here                 # and restored after it
            _Threads().sample(draws=5, warmup=5, seed=1, progress=False,
                              blas_threads=2, **kw)
            seen = json.loads((tmp_path / f"{os.getpid()}.json").read_text())
            assert seen == here                         # blas_threads=k allows k
        finally:
            _Threads.record[0] = None


# ---- progress under an executor without a queue ------------------------------------------
def test_bars_advance_under_a_foreign_executor(monkeypatch):
    seen = []
    monkeypatch.setattr(runner, "wanted", lambda progress: True)
    monkeypatch.setattr(runner._Progress, "close",
                        lambda self: seen.extend(b.n for b in self.bars))
    with cf.ThreadPoolExecutor(2) as ex:
        _Threads().sample(chains=2, draws=7, warmup=5, seed=1, executor=ex)
    assert seen == [12, 12]


def test_executor_must_be_an_executor():
    with pytest.raises(TypeError, match="executor must be a concurrent.futures.Executor"):
        _Threads().sample(chains=2, draws=5, warmup=5, seed=1, progress=False,
                          executor="dask")


@pytest.mark.parametrize("kind", ["dask", "threads"])
def test_ctrl_c_under_an_executor_stops_running_chains_queued_ones_do_not_start(
        tmp_path, kind):
    if kind == "dask":
        pytest.importorskip("distributed")
    import signal
    import time
    script = tmp_path / "executor_interrupt.py"
    script.write_text(textwrap.dedent('''
        import json, os, sys, threading, time, warnings
        import numpy as np
        import stanlite as sl

        _calls = {}             # log_prob calls per thread (picklable, unlike a local)

        class Slow(sl.Model):
            mu = sl.param.vector(2)
            compile = False

            def log_prob(self, mu):
                time.sleep(0.004)
                # a marker per running chain once it is well into sampling, so the
                # test interrupts running chains however long start-up took
                key = (os.getpid(), threading.get_ident())
                n = _calls[key] = _calls.get(key, 0) + 1
                if n == 50:
                    mark = os.path.join(os.environ["MARKS"],
                                        f"{os.getpid()}-{threading.get_ident()}")
                    open(mark, "w").close()
                return sl.normal_lpdf(mu, 0.0, 1.0)

        def run(executor):
            os.write(1, b"SAMPLING\\n")
            t0 = time.time()
            fit = Slow().sample(chains=4, warmup=20, draws=1000, seed=2, progress=False,
                                executor=executor)
            return fit, t0, time.time()

        if __name__ == "__main__":
            warnings.simplefilter("ignore")
            if sys.argv[1] == "threads":
                from concurrent.futures import ThreadPoolExecutor
                with ThreadPoolExecutor(2) as ex:
                    fit, t0, t1 = run(ex)
            else:
                from distributed import Client, LocalCluster
                with LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as cluster, \\
                        Client(cluster) as client:
                    client.submit(sum, [1]).result()          # the workers are up
                    fit, t0, t1 = run(client)
            print(json.dumps({"t0": t0, "t_return": t1,
                              "iterations": [s.iteration for s in fit.chain_states],
                              "interrupted": fit.interrupted}))
    '''))
    marks = tmp_path / "marks"
    marks.mkdir()
    p = subprocess.Popen([sys.executable, str(script), kind], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                         env={**os.environ, "MARKS": str(marks)})
    with killed_on_exit(p):
        while "SAMPLING" not in p.stdout.readline():
            assert p.poll() is None, p.stderr.read()[-3000:]
        # both workers' chains are sampling (a loaded machine may take seconds to
        # start them), then a little longer
        deadline = time.time() + 120
        while len(list(marks.iterdir())) < 2 and time.time() < deadline:
            assert p.poll() is None, p.stderr.read()[-3000:]
            time.sleep(0.05)
        time.sleep(0.5)
        t_signal = time.time()
        p.send_signal(signal.SIGINT)
        out, err = wait_ok(p)
    r = json.loads(out.strip().splitlines()[-1])
    assert r["interrupted"]
    it = r["iterations"]
    ran = [c for c in range(4) if it[c] > 0]
    assert len(ran) == 2 and all(it[c] < 1020 for c in ran), it     # stopped mid-way
    # a chain would take 1020 iterations at the rate the running ones went
    rate = sum(it) / 2 / (t_signal - r["t0"])
    assert r["t_return"] - t_signal < 0.25 * 1020 / rate, (r["t_return"] - t_signal, rate)
