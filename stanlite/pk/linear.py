"""General linear compartment models ``x' = K x + r(t)`` via the matrix exponential.

Torsten's ``pmx_solve_linode``: any ``n x n`` rate matrix ``K`` (for the two-
compartment model with absorption, ``[[-ka, 0, 0], [ka, -(k10 + k12), k21], [0, k12,
-k21]]``), the same for all subjects or one per subject. The solver is the
superposition of :mod:`.solve`; this module gives it ``Phi(u) = e^{K u}`` and the
infusion integral ``G(u) = int_0^u e^{K s} ds`` through the matrix-exponential super
node (:func:`stanlite.matrix_exp`), for a whole batch of times in one call:

* ``Phi(u) v = e^{K u} v`` - a stack of ``n x n`` exponentials;
* ``G(u) e_c`` exactly, without inverting ``K`` (which may be singular: a
  compartment without elimination), from the augmented matrix (Van Loan 1978)::

      expm([[K, e_c], [0, 0]] u) = [[e^{K u}, G(u) e_c], [0, 1]];

* ``G(inf) e_c = -K^-1 e_c`` (constant infusions at steady state) by a solve.

Derivatives in ``K`` (and in the times, doses, ``ii`` ...) are the matrix
exponential's Frechet-derivative rules, to any order.
"""

import numpy as np

from ..autodiff.var import guarded, shape_of
from ..errors import DomainError
from ..functor.matrix_exp import matrix_exp
from ..math.linalg import matmul, solve
from ..math.structure import concatenate, expand_dims, reshape
from .dosing import as_numbers
from .solve import LinearKernel, solve_linear

__all__ = ["linode", "MatrixExpKernel"]


class MatrixExpKernel(LinearKernel):
    """``Phi`` and ``G`` of ``x' = K x`` by the matrix exponential (module docstring).

    ``K``: ``(n, n)`` for every subject or ``(n_subjects, n, n)``."""

    def __init__(self, K):
        self.K = K
        self.n_cmt = shape_of(K)[-1]
        self.per_subject = len(shape_of(K)) == 3

    def _Ku(self, u, s):
        K = self.K[s] if self.per_subject else self.K
        return K * reshape(u, (shape_of(u)[0], 1, 1)) if shape_of(u) else K * u

    def period(self, u, s):
        return matrix_exp(self._Ku(u, s))

    def bolus(self, u, c, s):
        return self.period(u, s)[:, :, c]

    def free(self, u, V, s):
        return matmul(self.period(u, s), expand_dims(V, -1))[..., 0]

    def infuse(self, u, c, s):
        n = self.n_cmt
        P = shape_of(u)[0]
        col = np.zeros((1, n, 1))
        col[0, c, 0] = 1.0
        top = concatenate([self._Ku(u, s), col * reshape(u, (P, 1, 1))], axis=-1)
        A = concatenate([top, np.zeros((P, 1, n + 1))], axis=-2)
        return matrix_exp(A)[:, :n, n]

    def ginf(self, c, s):
        K = self.K[s] if self.per_subject else self.K
        P = len(s)
        rhs = np.zeros((P, self.n_cmt, 1))
        rhs[:, c, 0] = 1.0
        if not self.per_subject:
            return solve(-K, rhs[..., 0].T).T if P else np.zeros((0, self.n_cmt))
        return solve(-K, rhs)[..., 0]


def linode(events, K, F=None, tlag=None, infusion_rate=None, infusion_duration=None):
    """Amounts of the linear compartment model ``x' = K x`` (plus doses) at every record.

    Torsten's ``pmx_solve_linode``. ``K``: the ``n x n`` rate matrix (``K[i, j]`` the
    rate of transfer from compartment ``j`` to ``i``, the diagonal minus the total
    rate out), shared by all subjects, or ``(n_subjects, n, n)``; plain or traced.
    Returns ``(n_records, n)`` amounts after each record's event; ``F``, ``tlag``,
    ``infusion_rate``, ``infusion_duration`` per compartment (scalar, ``n`` or
    subjects x ``n``) as in :func:`~stanlite.pk.onecpt`. Solved by superposition
    with the matrix-exponential super node (module docstring); steady states in
    closed form, ``Phi(psi) (I - e^{K ii})^-1 ...``.

    Example: the one-compartment model as a matrix; the same amounts as
    :func:`~stanlite.pk.onecpt`.

    >>> import numpy as np, stanlite as sl
    >>> ev = sl.pk.events(time=[0.0, 1.0, 4.0], evid=[1, 0, 0], amt=[100.0, 0, 0])
    >>> K = np.array([[-1.2, 0.0], [1.2, -0.1]])
    >>> np.allclose(sl.pk.linode(ev, K), sl.pk.onecpt(ev, CL=5.0, V=50.0, ka=1.2))
    True
    """
    who = "linode"
    K = as_numbers(K, f"{who}: K must be a square matrix of numbers")
    s = shape_of(K)
    S = events.n_subjects
    if not (len(s) == 2 and s[0] == s[1] and s[0] > 0) and \
            not (len(s) == 3 and s[0] == S and s[1] == s[2] and s[1] > 0):
        raise ValueError(f"{who}: K must be an n x n matrix or one per subject "
                         f"({S} x n x n), got shape {s}")

    def finite(v):
        if not np.all(np.isfinite(np.asarray(v, dtype=float))):
            raise DomainError(f"{who}: K must be finite")
        return True
    guarded(finite, K)
    return solve_linear(events, MatrixExpKernel(K), who, F=F, tlag=tlag,
                        infusion_rate=infusion_rate, infusion_duration=infusion_duration)
