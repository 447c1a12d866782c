"""stanlite: probabilistic modeling on its own reverse-mode automatic differentiation.

>>> import numpy as np, stanlite as sl
>>> sl.grad(lambda x: sl.sum(sl.exp(x)))(np.zeros(2))
array([1., 1.])
"""

from . import _memory  # noqa: F401  (allocator tuning, before any large array)
from .errors import StanliteError, DataError, ModelError, DifferentiationError, DomainError, SolverError  # noqa: F401
from .autodiff import *  # noqa: F401,F403
from .math import *  # noqa: F401,F403
from .distributions import *  # noqa: F401,F403
from .functor import *  # noqa: F401,F403
from .model import Model  # noqa: F401
from .fit import load_fit  # noqa: F401
from .declarations import data, param  # noqa: F401
from . import autodiff, math, distributions, transforms, functor, pk  # noqa: F401

__version__ = "0.1.0"
