"""What ``import stanlite`` and a first draw load, checked in fresh interpreters.

``import stanlite as sl`` alone gives ``sl.models`` and ``sl.samplers`` (issue 19,
point 14), and loads none of the heavy modules that only some uses need (issue 20,
point 6): ArviZ's stack (xarray, pandas, matplotlib, netCDF, dask) until a fit is
converted (``fit.to_arviz()``, ``fit.summary()``, ``fit.save()``), scipy.integrate /
scipy.sparse until an ODE is solved, scipy.optimize until an optimizer runs. Each
check runs in a new interpreter, where nothing imported them before."""

import json
import subprocess
import sys

import pytest

#: loaded only by the uses that need them
HEAVY = ("arviz", "xarray", "pandas", "matplotlib", "netCDF4", "h5netcdf", "h5py", "dask",
         "scipy.integrate", "scipy.optimize", "scipy.sparse", "scipy.stats")
ARVIZ_STACK = ("arviz", "xarray", "pandas", "matplotlib", "netCDF4", "h5netcdf", "dask")

# prints, as the last line, which HEAVY modules the code run so far has imported
_LOADED = ("\nimport json as _j, sys as _s\n"
           f"print(_j.dumps([m for m in {HEAVY!r} if m in _s.modules]))\n")


def _fresh(code):
    """Run ``code`` in a new interpreter; the JSON it printed last."""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_models_and_samplers_load_on_first_use():
    code = ("import sys, stanlite as sl\n"
            "assert 'stanlite.models' not in sys.modules\n"
            "m = sl.models.get('eight_schools_noncentered')\n"
            "assert m.dim == 10, m.dim\n"
            "assert sl.samplers.__name__ == 'stanlite.samplers'\n"
            "assert 'models' in dir(sl)\n"
            "try:\n"
            "    sl.no_such_thing\n"
            "except AttributeError as e:\n"
            "    assert 'no_such_thing' in str(e)\n"
            "else:\n"
            "    raise SystemExit('no AttributeError')\n"
            "print('[]')\n")
    assert _fresh(code) == []


def test_import_stanlite_loads_no_heavy_module():
    assert _fresh("import stanlite" + _LOADED) == []


def test_public_names_resolve_after_a_bare_import():
    """Every name the subpackages export is ``sl.<name>`` (nothing moved behind a lazy
    attribute was lost), and the contract's entry points are there."""
    code = ("import importlib, stanlite as sl\n"
            "missing = [f'{p}.{n}' for p in ('autodiff', 'math', 'distributions', "
            "'functor') for n in importlib.import_module('stanlite.' + p).__all__ "
            "if not hasattr(sl, n)]\n"
            "missing += [n for n in ('Model', 'data', 'param', 'load_fit', 'compile', "
            "'grad', 'ode_rk45', 'ode_bdf', 'algebra_solver', 'matrix_exp', "
            "'DataError', 'RemoteError', 'models', 'samplers', 'pk', 'transforms') "
            "if not hasattr(sl, n)]\n"
            "import json; print(json.dumps(missing))\n")
    assert _fresh(code) == []


def test_a_first_draw_loads_no_heavy_module_and_conversion_still_works():
    """One in-process draw leaves ArviZ's stack unloaded; converting the fit then
    loads it and works (to_arviz, summary)."""
    code = ("import stanlite as sl\n"
            "m = sl.models.get('eight_schools_noncentered')\n"
            "fit = m.sample(chains=1, warmup=1, draws=1, seed=1, progress=False, "
            "parallel=False)\n"
            "assert fit['mu'].shape == (1, 1), fit['mu'].shape\n"
            "repr(fit)\n" + _LOADED +
            "idata = fit.to_arviz()\n"
            "assert idata.posterior['theta'].shape == (1, 1, 8)\n"
            "s = fit.summary()\n"
            "assert type(s).__module__.startswith('pandas'), type(s)\n"
            "assert s.loc['mu', 'mean'] == fit['mu'][0, 0]\n" + _LOADED)
    lines = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert lines.returncode == 0, lines.stderr
    before, after = (json.loads(x) for x in lines.stdout.strip().splitlines()[-2:])
    assert before == []
    assert {"arviz", "xarray", "pandas"} <= set(after)


@pytest.mark.parametrize("use, loads", [
    ("sl.ode_rk45(lambda t, y, k: -k * y, np.array([1.0]), 0.0, [1.0], 0.5)",
     "scipy.integrate"),
    ("sl.ode_bdf(lambda t, y, k: -k * y, np.array([1.0]), 0.0, [1.0], 0.5)",
     "scipy.integrate"),
])
def test_ode_solvers_import_scipy_integrate_when_called(use, loads):
    """The lazily imported integrators work in a fresh process: y' = -k y (scipy's
    stepper forced: the compiled one, functor/ode_native.py, needs no scipy.integrate)."""
    code = ("import os; os.environ['STANLITE_ODE'] = 'scipy'\n"
            "import math, numpy as np, stanlite as sl\n"
            f"y = {use}\n"
            "assert abs(float(y[0, 0]) - math.exp(-0.5)) < 1e-5, y\n" + _LOADED)
    assert loads in _fresh(code)


def test_optimize_imports_scipy_optimize_when_called():
    code = ("import stanlite as sl\n"
            "m = sl.models.get('linear_regression')\n"
            "opt = m.optimize(seed=1)\n"
            "assert opt.converged\n" + _LOADED)
    assert "scipy.optimize" in _fresh(code)


def test_derivative_rules_are_written_at_their_first_call():
    """``import stanlite`` declares every elementwise primitive's derivative but writes
    and compiles none of their functions (autodiff/derivative.py: ~0.1 s of syntax-tree
    work); the first call of one writes it and takes its code, so later calls run the
    rule directly, and the derivative is the declared one (d/dx x exp(x) =
    (1 + x) exp(x), against the closed form)."""
    code = ("import math, numpy as np, stanlite as sl\n"
            "from stanlite.autodiff.derivative import _DECLARED, _BUILD\n"
            "stand_ins = [r.name for r in _DECLARED if _BUILD in r.rule.__code__.co_names]\n"
            "assert len(stand_ins) == len(_DECLARED) > 20, (len(stand_ins), len(_DECLARED))\n"
            "g = sl.grad(lambda x: sl.sum(x * sl.exp(x)))(np.array([0.5, -1.0]))\n"
            "want = [(1 + x) * math.exp(x) for x in (0.5, -1.0)]\n"
            "assert np.allclose(g, want, rtol=1e-14, atol=0), (g, want)\n"
            "rule = sl.exp._spec.vjps[0]\n"
            "assert _BUILD not in rule.__code__.co_names and rule.__name__ == '_d_exp'\n"
            "print('[]')\n")
    assert _fresh(code) == []


def test_a_steady_state_models_gradient_loads_no_scipy_optimize():
    """mm_multidose_ss's closed-form starting guess for its algebraic solver (a
    bracketed root at every gradient) uses stanlite's Brent (functor/scalar_root.py),
    not scipy.optimize's, whose import cost its first draw ~0.1-0.2 s."""
    code = ("import numpy as np, stanlite as sl\n"
            "m = sl.models.get('mm_multidose_ss')\n"
            "v, g = m.log_density_gradient(np.array([3.9, 3.5, 1.6, -2.3]))\n"
            "assert np.isfinite(v) and np.isfinite(g).all(), (v, g)\n" + _LOADED)
    loaded = _fresh(code)
    assert "scipy.optimize" not in loaded and "scipy.sparse" not in loaded, loaded
