"""Shared test configuration: deterministic seeds, paths to ../shared (optional)."""

import os
import pathlib
import sys

# One BLAS thread per test process: on a 2-core machine (and under pytest-xdist)
# OpenBLAS's thread pool competes with itself and makes 3x3 solves take milliseconds.
# Effective only if numpy was not imported yet (the check below says so).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
NUMPY_PREIMPORTED = "numpy" in sys.modules

import numpy as np  # noqa: E402
import pytest  # noqa: E402

SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture
def rng():
    """A fixed-seed generator: every test is deterministic."""
    return np.random.default_rng(20261121)


@pytest.fixture
def shared_dir():
    """../shared beside the checkout; tests needing it skip cleanly when it is absent."""
    if not SHARED.is_dir():
        pytest.skip("../shared is not present (it is optional for users)")
    return SHARED


def pytest_report_header(config):
    return (f"BLAS threads: OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}"
            f" (numpy imported before conftest: {NUMPY_PREIMPORTED})")
