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
``FitFileError`` is a fit file that cannot be written or read back (a full disk, a
truncated, corrupted or hand-edited file); it names the path and what is wrong, and is
an ``OSError`` as the file libraries' own errors are (``except OSError`` keeps working).
``ArgumentError`` is a bad argument of an inference method (``sample``, ``variational``,
``optimize``, ``laplace``, ``pathfinder``, their ``init`` included): it names the
argument, the accepted values and what came (validators: :mod:`stanlite.arguments`).
``RemoteError`` is a model's exception from a chain's worker process that could not be
pickled back as itself: its type name, message and the worker's traceback as text.
"""

__all__ = ["StanliteError", "DataError", "ModelError", "DifferentiationError", "DomainError",
           "SolverError", "FitFileError", "ArgumentError", "RemoteError"]


class StanliteError(Exception):
    """Base class of every error stanlite raises on purpose."""


class DataError(StanliteError, ValueError):
    """Bad input data: names the field, what was expected and what came."""


class ModelError(StanliteError, ValueError):
    """A model that cannot be evaluated: names the parameter or expression."""


class ArgumentError(DataError, TypeError):
    """A bad argument of an inference method: names it, the accepted values and what
    came (``stepsize must be a finite number > 0, got nan``).

    Bad input as a ``DataError`` is, and both a ``ValueError`` and a ``TypeError``:
    code that caught what Python or numpy raise for a bad value or type keeps working."""


class DifferentiationError(StanliteError, TypeError):
    """A derivative that cannot be computed correctly (never silently wrong)."""


class DomainError(StanliteError, ValueError):
    """An argument outside its function's domain (names function, argument and value).

    During sampling this rejects the proposal instead of stopping the chain."""


class SolverError(StanliteError, ArithmeticError):
    """An iterative solver that failed (names solver, tolerance reached, steps taken).

    During sampling this rejects the proposal instead of stopping the chain."""


class FitFileError(StanliteError, OSError):
    """A fit file that cannot be written or read: names the path and what is wrong.

    Saving never damages an existing file (the new one is written aside and renamed
    into place), so after this error from ``fit.save`` the old file is intact."""

    def __init__(self, path, message):
        super().__init__(f"fit file {path!r}: {message}")
        self.path = path
        self.problem = message

    def __str__(self):                      # not OSError's "[Errno n] ..." form
        return f"fit file {self.path!r}: {self.problem}"

    def __reduce__(self):                   # picklable with its two arguments
        return type(self), (self.path, self.problem)


class RemoteError(StanliteError):
    """An exception raised in a chain's worker process that could not be sent back as
    itself (it does not survive pickling): its type name, message and the worker's
    traceback (the user's own lines) in the message; ``type_name`` and
    ``remote_traceback`` as attributes."""

    def __init__(self, message, type_name="", remote_traceback=""):
        super().__init__(message)
        self.type_name, self.remote_traceback = type_name, remote_traceback

    def __reduce__(self):
        return type(self), (self.args[0], self.type_name, self.remote_traceback)

    @classmethod
    def of(cls, e):
        import traceback
        name = type(e).__qualname__
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        try:
            text = str(e)
        except Exception:                # noqa: BLE001 - a broken __str__
            text = "<its message could not be formatted>"
        return cls(f"{name}: {text} (raised in a chain's worker process, sent back as "
                   f"text because the exception cannot be pickled)\n\nWorker traceback:"
                   f"\n{tb}", name, tb)
