"""The Python replay (autodiff/codegen.py) where a fused density's log is -inf: its
kernel may give a scalar ``0.0`` partial for an array argument (poisson_lpmf at
lambda = inf); the replay gives what the eager tape gives (was a TypeError in the
backward rule of ``lambda = mu * exposure``: ``float(np.dot(0.0, exposure))``). The
interpreter backend is checked at the same points."""

import numpy as np
import pytest

import stanlite as sl
from stanlite.autodiff.vm import kernel

Y = np.array([3, 0, 2, 5])
EXPOSURE = np.array([1.0, 2.0, 1e10, 0.5])


def _poisson(x):
    # lambda = inf where mu * 1e10 overflows: the log density is -inf there
    return sl.poisson_lpmf(Y, x[0] * EXPOSURE) + sl.normal_lpdf(x[1], 0.0, 1.0)


def _poisson_log_rate(x):
    return sl.poisson_lpmf(Y, sl.exp(x[0]) * EXPOSURE) + sl.normal_lpdf(x[1], 0.0, 1.0)


BACKENDS = ["python", pytest.param("auto", marks=pytest.mark.skipif(
    not kernel.available(), reason="numba unavailable"))]


def _same(r, e):
    """Equal to rounding (the interpreter's sums may round differently); infinite and
    NaN entries where the eager tape has them."""
    assert r[0] == e[0] or abs(r[0] - e[0]) <= 1e-12 * abs(e[0])
    np.testing.assert_allclose(r[1], e[1], rtol=1e-12, atol=0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("f, points", [
    (_poisson, [[1e300, 0.2], [0.0, 0.2], [0.5, -1.0]]),
    (_poisson_log_rate, [[700.0, 0.2], [-800.0, 0.3], [0.1, 0.4]]),
])
def test_a_fused_density_of_minus_inf_replays_as_the_eager_tape(backend, f, points):
    vg = sl.compile(f, np.array([0.5, 0.2]), verify=False, backend=backend)
    ref = sl.value_and_grad(f)
    assert vg.compiled == (backend == "auto"), vg.vm_skipped
    with np.errstate(all="ignore"):
        for x in points:
            x = np.array(x)
            r, e = vg(x), ref(x)
            _same(r, e)
        assert vg(np.array([1e300, 0.2]))[0] == -np.inf
    assert vg.programs == 1

