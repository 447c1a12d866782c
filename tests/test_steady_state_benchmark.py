"""The AD review's Table 8 as the paper ran it (``benchmarks/steady_state.py``, issue
22 point 7): the population parameterisation (2 population rates and 2n
multipliers), brute force through the dogleg on scalar nodes and the super node give
the same 2n x (2n + 2) Jacobian - the closed form's, and central differences'.

The problem lives beside the benchmark that times it; the test imports it from there
and skips when the benchmarks folder is absent."""

import importlib
import pathlib
import sys

import numpy as np
import pytest

import stanlite as sl

from testkit import central_jacobian

BENCH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"
if not (BENCH / "steady_state.py").exists():
    pytest.skip("benchmarks/steady_state.py is not present", allow_module_level=True)
sys.path.insert(0, str(BENCH))
ss = importlib.import_module("steady_state")


@pytest.mark.parametrize("n_patients", [1, 2])
def test_standard_and_super_node_give_the_same_jacobian(n_patients):
    theta, ms = ss.methods(n_patients)
    assert theta.shape == (2 * n_patients + 2,)          # k1, k2, phi1, phi2
    errs = ss.check(n_patients)                          # every column vs closed form
    assert max(errs.values()) < 1e-7
    J_std = ms["standard"](theta)
    J_super = ms["super (an. J)"](theta)
    assert J_std.shape == (2 * n_patients, 2 * n_patients + 2)
    np.testing.assert_allclose(J_std, J_super, rtol=1e-8, atol=1e-9 * np.abs(J_super).max())
    x0 = np.full(2 * n_patients, ss.X_GUESS)
    fd = central_jacobian(lambda t: sl.algebra_solver(ss.residual, x0, t, **ss.SOLVER),
                          theta)
    np.testing.assert_allclose(J_std, fd, rtol=1e-5, atol=1e-6 * np.abs(fd).max())


def test_the_scalar_residual_is_the_array_residual():
    theta = ss.population_theta(3)
    x = np.linspace(100.0, 600.0, 6)
    np.testing.assert_allclose(ss.residual_scalar(x, list(theta)),
                               ss.residual(x, theta), rtol=1e-13)
    np.testing.assert_allclose(np.array(ss.jacobian_x_scalar(x, list(theta)), dtype=float),
                               ss.jacobian_x(x, theta), rtol=1e-13)


def test_standard_tape_grows_faster_than_the_states():
    # Gaussian elimination on scalar nodes: ~2 n^3 / 3 multiply-adds per solve, with
    # the O(n^2) products and O(n) vector operations of the dogleg beside it
    small, large = ss.scalar_nodes(2), ss.scalar_nodes(6)       # 4 and 12 states
    assert large > 6 * small
