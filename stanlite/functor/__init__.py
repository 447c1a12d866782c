"""Super nodes: iterative algorithms differentiated as single primitives.

The AD review's lesson: never tape the iterations of a solver. Each function here
runs its algorithm on plain floats and records *one* node whose derivative rules come
from analysis, not from the iterations:

* :mod:`.algebra_solver` - roots of f(x, theta) = 0, derivatives by the implicit
  function theorem (one transposed solve + one nested VJP of f in theta);
* :mod:`.ode`            - ODE solutions with forward (coupled) or adjoint sensitivities;
* :mod:`.matrix_exp`     - the matrix exponential with its Frechet-derivative rules.
"""

from .algebra_solver import *  # noqa: F401,F403
from .matrix_exp import *  # noqa: F401,F403
from .ode import *  # noqa: F401,F403
from . import algebra_solver as _a, matrix_exp as _m, ode as _o

__all__ = list(_a.__all__) + list(_m.__all__) + list(_o.__all__)
