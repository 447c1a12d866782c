"""stanlite's automatic differentiation core.

* :mod:`.tape`       - the thread-local tape stack, nesting, the reverse sweep;
* :mod:`.var`        - the array-valued node ``Var`` and the numpy protocols;
* :mod:`.operators`  - the Python operators and array methods of ``Var`` and ``Dual``
  (``+``, ``@``, ``<``, ``v[i]``, ``v.T``, ``v.sum()``...), calling the primitives
  :mod:`stanlite.math` registers;
* :mod:`.extend`     - defining primitives (``primitive``, ``defvjp``) and broadcasting;
* :mod:`.dual`       - forward mode: ``Dual`` values on a ``ForwardTrace`` (vector mode);
* :mod:`.functional` - ``grad``, ``value_and_grad``, ``vjp``, ``jacobian``, ``jvp``,
  ``hvp``, ``hessian``, ``grad_hessian``, ``grad_trace_mat_hessian``;
* :mod:`.check`      - ``check_grad``, the finite-difference gradient checker;
* :mod:`.compile`    - ``compile``: retaping, a recorded tape replayed as generated code
  (:mod:`.codegen` writes the code).

No math lives here; :mod:`stanlite.math` defines the primitives with :mod:`.extend`.
"""

from .tape import Tape, nested, current_tape, gc_paused, recover_memory  # noqa: F401
from .var import Box, Var, value_of  # noqa: F401
from .extend import (primitive, defvjp, defvjp_all, defjvp, defjvp_all,  # noqa: F401
                     accumulate, sum_to_shape, broadcast_to)
from .functional import (grad, value_and_grad, vjp, jacobian, jvp, hvp,  # noqa: F401
                         hessian, jacobian_forward, jacobian_reverse, grad_hessian,
                         grad_trace_mat_hessian)
from .dual import Dual, ForwardTrace, forward_scope  # noqa: F401
from . import operators  # noqa: F401,E402  (Var's and Dual's operators, installed on Box)
from .check import (check_grad, assert_grad, check_jvp, assert_jvp,  # noqa: F401
                    check_hessian, assert_hessian, GradCheck)
from .compile import compile, Compiled, CompileWarning  # noqa: F401,A004

__all__ = ["Tape", "nested", "current_tape", "gc_paused", "recover_memory", "Box", "Var",
           "value_of", "primitive", "defvjp", "defvjp_all", "defjvp", "accumulate",
           "sum_to_shape", "broadcast_to", "grad", "value_and_grad", "vjp", "jacobian",
           "jvp", "hvp", "hessian", "jacobian_forward", "jacobian_reverse", "grad_hessian",
           "grad_trace_mat_hessian", "Dual", "ForwardTrace", "forward_scope", "defjvp_all",
           "check_grad", "assert_grad", "check_jvp", "assert_jvp", "check_hessian",
           "assert_hessian", "GradCheck", "compile", "Compiled", "CompileWarning"]
