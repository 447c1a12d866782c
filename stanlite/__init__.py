"""stanlite: probabilistic modeling on its own reverse-mode automatic differentiation.

>>> import numpy as np, stanlite as sl
>>> sl.grad(lambda x: sl.sum(sl.exp(x)))(np.zeros(2))
array([1., 1.])
"""

import os as _os

# THE PACKAGE MAPPING (issue 23, point 6). Two subpackages are not under stanlite/:
#     stanlite.samplers  is  <repository root>/samplers/
#     stanlite.models    is  <repository root>/models/
# (the user's layout: samplers and the model zoo as top-level folders). An installed
# copy gets this from pyproject.toml's [tool.setuptools] package-dir; imported from a
# checkout (the repository root on sys.path, as ``python -m stanlite`` run there has
# it, before any installed copy), the root is appended to this package's __path__
# below, so ``stanlite.samplers`` resolves to samplers/. A reader of imports must
# read ``.samplers``/``stanlite.samplers`` as samplers/: tests/test_architecture.py
# checks that both mappings agree and runs the layering contracts on that layout.
_root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if (_os.path.isfile(_os.path.join(_root, "pyproject.toml"))
        and _os.path.isfile(_os.path.join(_root, "samplers", "__init__.py"))):
    __path__.append(_root)

from . import _memory  # noqa: F401,E402  (allocator tuning, before any large array)
from .errors import StanliteError, DataError, ModelError, DifferentiationError, DomainError, SolverError, FitFileError, ArgumentError, RemoteError  # noqa: F401
from .autodiff import *  # noqa: F401,F403
from .math import *  # noqa: F401,F403
from .distributions import *  # noqa: F401,F403
from .functor import *  # noqa: F401,F403
from .model import Model  # noqa: F401
from .fit import load_fit  # noqa: F401
from . import inference  # noqa: F401,E402  (model.sample & co.: the front doors)
from .declarations import data, param, transformed_data  # noqa: F401
from . import autodiff, math, distributions, transforms, functor, pk  # noqa: F401

from ._version import __version__  # noqa: E402

# What ``import stanlite`` loads, and what it leaves to first use (issue 20, point 6;
# tests/test_lazy_imports.py, benchmarks/first_draw.py):
# - loaded: numpy, scipy.linalg and scipy.special (every model's math). scipy.linalg
#   is most of the cost (~0.2 s, scipy's array-API layer), and the first draw pays it
#   anyway: numba imports it when it loads the NUTS kernel;
# - at first use: ArviZ and its stack (xarray, pandas, matplotlib, netCDF) when a fit
#   is converted, summarised or saved (fit.py) and where ArviZ computes a number
#   (PSIS: Pathfinder, an approximation's k-hat), numba when the samplers or the compiled tape are
#   imported, scipy.integrate/sparse at the first ODE solve (functor/ode_integrate.py),
#   scipy.optimize at the first optimizer run (samplers/optimize.py);
# - the zoo and the samplers import stanlite themselves, so they cannot be imported
#   eagerly here; ``sl.models.get(...)`` after a bare ``import stanlite as sl`` loads
#   them on first use (PEP 562).
_LAZY = ("models", "samplers")


def __getattr__(name):
    if name in _LAZY:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
