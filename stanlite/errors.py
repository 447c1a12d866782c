"""Exception types that name what went wrong, for users of every layer.

``DataError`` and ``ModelError`` are part of the public contract (DESIGN.md, "Errors"):
a bad data field or a model that cannot be evaluated must say *which* field or
parameter and what was expected, instead of surfacing a numpy traceback.
``DomainError`` is an argument outside a function's domain (a scale ``sigma <= 0``);
samplers treat it as a rejected proposal, as Stan does with ``std::domain_error``.
``DifferentiationError`` is raised by the AD core when a derivative cannot be
computed correctly (a primitive without the needed rule, a closed tape).
``SolverError`` is an iterative super node (algebraic solver, ODE integrator) that
did not converge; it names the solver, the tolerance reached and the steps taken, and
like ``DomainError`` it rejects a proposal during sampling.
"""

__all__ = ["StanliteError", "DataError", "ModelError", "DifferentiationError", "DomainError",
           "SolverError"]


class StanliteError(Exception):
    """Base class of every error stanlite raises on purpose."""


class DataError(StanliteError, ValueError):
    """Bad input data: names the field, what was expected and what came."""


class ModelError(StanliteError, ValueError):
    """A model that cannot be evaluated: names the parameter or expression."""


class DifferentiationError(StanliteError, TypeError):
    """A derivative that cannot be computed correctly (never silently wrong)."""


class DomainError(StanliteError, ValueError):
    """An argument outside its function's domain (names function, argument and value).

    During sampling this rejects the proposal instead of stopping the chain."""


class SolverError(StanliteError, ArithmeticError):
    """An iterative solver that failed (names solver, tolerance reached, steps taken).

    During sampling this rejects the proposal instead of stopping the chain."""
