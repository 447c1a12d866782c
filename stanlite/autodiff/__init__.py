"""stanlite's automatic differentiation core.

* :mod:`.tape`       - the thread-local tape stack, nesting, the reverse sweep;
* :mod:`.var`        - the array-valued node ``Var`` and the numpy protocols;
* :mod:`.extend`     - defining primitives (``primitive``, ``defvjp``) and broadcasting;
* :mod:`.functional` - ``grad``, ``value_and_grad``, ``vjp``, ``jacobian``;
* :mod:`.check`      - ``check_grad``, the finite-difference gradient checker.

No math lives here; :mod:`stanlite.math` defines the primitives with :mod:`.extend`.
"""

from .tape import Tape, nested, current_tape, gc_paused, recover_memory  # noqa: F401
from .var import Box, Var, value_of  # noqa: F401
from .extend import (primitive, defvjp, defvjp_all, defjvp, accumulate,  # noqa: F401
                     sum_to_shape, broadcast_to)
from .functional import grad, value_and_grad, vjp, jacobian  # noqa: F401
from .check import check_grad, assert_grad, GradCheck  # noqa: F401

__all__ = ["Tape", "nested", "current_tape", "gc_paused", "recover_memory", "Box", "Var",
           "value_of", "primitive", "defvjp", "defvjp_all", "defjvp", "accumulate",
           "sum_to_shape", "broadcast_to", "grad", "value_and_grad", "vjp", "jacobian",
           "check_grad", "assert_grad", "GradCheck"]
