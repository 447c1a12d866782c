"""Super nodes: iterative algorithms differentiated as single primitives.

The AD review's lesson: never tape the iterations of a solver. Each function here
runs its algorithm on plain floats and records *one* node whose derivative rules come
from analysis, not from the iterations:

* :mod:`.algebra_solver` - roots of f(x, theta) = 0, derivatives by the implicit
  function theorem (one transposed solve + one nested VJP of f in theta);
* :mod:`.ode`            - ODE solutions with forward (coupled) or adjoint sensitivities;
* :mod:`.matrix_exp`     - the matrix exponential with its Frechet-derivative rules;
* :mod:`.integrate_1d`   - 1-D integrals, derivatives by Leibniz's rule (integrals too).
"""

from .algebra_solver import *  # noqa: F401,F403
from .matrix_exp import *  # noqa: F401,F403
from .ode import *  # noqa: F401,F403
from .integrate_1d import *  # noqa: F401,F403
import sys as _sys

# by module object: ``from .matrix_exp import *`` rebinds the name ``matrix_exp`` here
# to the function of that name
__all__ = [n for m in ("algebra_solver", "matrix_exp", "ode", "integrate_1d")
           for n in _sys.modules[f"{__name__}.{m}"].__all__]
