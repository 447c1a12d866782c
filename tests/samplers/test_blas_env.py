"""runner.blas_limit(1) skips threadpoolctl (its import and its scan of the loaded
libraries, ~25 ms of a fresh process's first draw) only when the environment started
the BLAS libraries with one thread and threadpoolctl, not imported, cannot have
changed that."""

import contextlib
import sys

import numpy as np

from stanlite.samplers import runner

_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "MKL_NUM_THREADS",
         "BLIS_NUM_THREADS")


def _env(monkeypatch, **values):
    for k in _VARS:
        monkeypatch.delenv(k, raising=False)
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delitem(sys.modules, "threadpoolctl", raising=False)


def _openblas():
    return "openblas" in str(np.__config__.CONFIG["Build Dependencies"]["blas"]
                             ["name"]).lower()


def test_one_thread_from_the_environment(monkeypatch):
    _env(monkeypatch, OMP_NUM_THREADS="1")
    assert runner._one_thread_already()
    assert isinstance(runner.blas_limit(1), contextlib.nullcontext)
    assert "threadpoolctl" not in sys.modules
    _env(monkeypatch, OPENBLAS_NUM_THREADS="1")
    assert runner._one_thread_already() == _openblas()


def test_otherwise_threadpoolctl_decides(monkeypatch):
    _env(monkeypatch)
    assert not runner._one_thread_already()             # nothing set: all cores
    _env(monkeypatch, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="4")
    assert not runner._one_thread_already()             # OpenBLAS's own wins
    _env(monkeypatch, OMP_NUM_THREADS="1", MKL_NUM_THREADS="2")
    assert not runner._one_thread_already()
    _env(monkeypatch, OMP_NUM_THREADS="1")
    monkeypatch.setitem(sys.modules, "threadpoolctl", object())
    assert not runner._one_thread_already()             # may have changed the limits
