"""Shared test configuration: deterministic seeds, the optional reference data.

Reference data (posteriordb posteriors with their reference means and sds, the
Theophylline CSV) are optional: ``STANLITE_REFERENCE_DATA`` names a folder holding
``posteriordb/`` and ``data/``; without it the folder beside the checkout that the
project's CI provides is used when present. Tests that need them skip otherwise.
"""

import os
import pathlib
import sys

# One BLAS thread per test process: on a 2-core machine (and under pytest-xdist)
# OpenBLAS's thread pool competes with itself and makes 3x3 solves take milliseconds.
# Effective only if numpy was not imported yet (the check below says so).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
NUMPY_PREIMPORTED = "numpy" in sys.modules
# No disk cache of lowered programs (stanlite/autodiff/program_cache.py): a test sees a
# model recorded in its own process, whatever ran before; the cache's own tests set it.
os.environ["STANLITE_CACHE_DIR"] = "off"
# Parallel runs in worker processes whatever their size (samplers/runner.py
# ``_small_run`` keeps small ones in this process, by a CPU-time probe): the tests
# of pools, forks and executors test them; tests/samplers/test_small_runs.py sets
# its own cost to test that choice.
os.environ["STANLITE_POOL_COST"] = "0"

import numpy as np  # noqa: E402
import pytest  # noqa: E402

# Models and helpers shared by several test files (tests/support/testkit.py), importable
# as ``testkit``: the tests are not a package (--import-mode=importlib). That folder, not
# tests/ itself, goes on the path: tests/' subfolders would become top-level names.
SUPPORT = pathlib.Path(__file__).resolve().parent / "support"
if str(SUPPORT) not in sys.path:
    sys.path.insert(0, str(SUPPORT))
collect_ignore = ["support"]        # imported as ``testkit``, not collected a second time

SHARED = pathlib.Path(os.environ.get("STANLITE_REFERENCE_DATA")
                      or pathlib.Path(__file__).resolve().parents[2] / "shared")


@pytest.fixture
def rng():
    """A fixed-seed generator: every test is deterministic."""
    return np.random.default_rng(20261121)


@pytest.fixture
def shared_dir():
    """The reference-data folder; tests needing it skip cleanly when it is absent."""
    if not SHARED.is_dir():
        pytest.skip("optional reference data (posteriordb references, the Theophylline "
                    "CSV) not found: set STANLITE_REFERENCE_DATA to a folder holding "
                    "posteriordb/ and data/ to run this test")
    return SHARED


def pytest_report_header(config):
    return (f"BLAS threads: OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}"
            f" (numpy imported before conftest: {NUMPY_PREIMPORTED})")


class _VMChecks:
    """Checks of the compiled tape interpreter (stanlite/autodiff/vm) against the eager
    tape: shared by tests/autodiff/test_vm_*.py and tests/test_vm_zoo.py."""

    def __init__(self):
        import stanlite.autodiff.compile  # noqa: F401  (the module, not sl.compile)
        from stanlite.autodiff.vm import kernel
        self._C = sys.modules["stanlite.autodiff.compile"]
        self.available = kernel.available()

    def close(self, r, e, rtol=1e-12):
        """(value, gradient) pairs equal to rounding: within ``rtol`` relative to each
        part's largest magnitude (compile.py's ``_close``: what replays are held to)."""
        return self._C._close(r, e, rtol)

    def compile(self, f, x0, **kw):
        """``sl.compile(f, x0)`` unverified (each call runs the interpreter itself, not
        the eager tape's checked answer), asserted to run in the interpreter."""
        import stanlite as sl
        vg = sl.compile(f, np.asarray(x0, dtype=float), verify=False, **kw)
        assert vg.vm_skipped is None and vg.compiled, vg.vm_skipped
        return vg

    @staticmethod
    def fd_grad(value, x, h=1e-6):
        """Central finite differences of ``value`` at ``x``."""
        g = np.zeros(x.size)
        for i in range(x.size):
            e = np.zeros(x.size)
            e[i] = h * max(1.0, abs(x[i]))
            g[i] = (value(x + e) - value(x - e)) / (2 * e[i])
        return g

    def check(self, f, x0, points, fd=True, rtol=1e-12, fd_rtol=1e-6):
        """The interpreter's value and gradient equal the eager tape's at every point
        (to rounding) and the gradient equals central differences of its own value."""
        import stanlite as sl
        vg = self.compile(f, x0)
        ref = sl.value_and_grad(f)
        for x in points:
            x = np.asarray(x, dtype=float)
            r = vg(x)
            e = ref(x)
            assert self.close(r, e, rtol), (x, r, e)
            if fd:
                fdg = self.fd_grad(lambda z: vg(z)[0], x)
                scale = max(1.0, float(np.max(np.abs(e[1]))))
                assert np.allclose(r[1], fdg, rtol=fd_rtol, atol=fd_rtol * scale), \
                    (x, r[1], fdg)
        assert vg.fallback is None and vg.compiled
        return vg

    @staticmethod
    def opcodes(retaped):
        """The op codes of every interpreter program a retaped callable holds."""
        return {int(op) for ps in retaped._programs.values() for p in ps
                if hasattr(p, "code") for op in p.code[:, 0]}


@pytest.fixture
def vm():
    """Checks of the compiled interpreter; skips where numba is unavailable."""
    checks = _VMChecks()
    if not checks.available:
        pytest.skip("the compiled interpreter needs numba (STANLITE_JIT=0 or absent)")
    return checks
