"""The SoftAbs geometry at one position, and the recordings of the potential's Hessian
that the Riemannian HMC of :mod:`.rhmc` differentiates once more.

What lives here: the SoftAbs map ``f(lam) = lam coth(alpha lam)``, its derivative and
divided differences (:func:`softabs`, :func:`softabs_derivative`,
:func:`softabs_divided_differences`); :class:`Geometry`, the metric at one ``q``
(eigendecomposition, ``Sigma^-1 p``, the norms, the trace matrix ``M``); the
third-order sweeps ``d/dq tr(M A(q))`` over an eager recording (:class:`_HessianTape`)
or a compiled one (:class:`_RetapedTrace`, :class:`_TraceAt`); and :data:`PROFILE`,
the counters all of these and the integrator add to. The mathematics is in
:mod:`.rhmc`'s docstring; :mod:`.rhmc` re-exports every name here, which stays the
import path (split out of rhmc.py for issue 23: no file over 1,000 lines).
"""

import math
import time

import numpy as np

from stanlite.autodiff.functional import hessian as _hessian

from . import rhmc_kernels as _K

__all__ = ["Geometry", "softabs", "softabs_derivative", "softabs_divided_differences",
           "PROFILE", "reset_profile"]

#: process-wide counters and seconds (``reset_profile()`` zeroes them); benchmarks
#: read them to split the time between the pieces of the integrator
PROFILE = {}


def reset_profile():
    """Zero :data:`PROFILE`: counts (``hessians``, ``recordings``, ``sweeps``,
    ``eighs``, ``steps``, ``p_iterations``, ``q_iterations``, ``fp_failures``) and
    seconds (``t_hessian``, ``t_eigh``, ``t_sweep``, ``t_fixed_point``, ``t_step``)."""
    PROFILE.clear()
    PROFILE.update({k: 0 for k in ("hessians", "recordings", "sweeps", "eighs", "steps",
                                   "p_iterations", "q_iterations", "fp_failures",
                                   "retries", "rescued", "irreversible", "restarts",
                                   "kernel_steps", "handoffs")})
    PROFILE.update({k: 0.0 for k in ("t_hessian", "t_eigh", "t_sweep", "t_fixed_point",
                                     "t_step", "t_kernel")})


reset_profile()
_clock = time.process_time      # CPU seconds: robust on a shared machine

def _vector(lam):
    lam = np.asarray(lam, dtype=float)
    return lam, np.ascontiguousarray(lam.reshape(-1))


def softabs(lam, alpha):
    """``f(lam) = lam coth(alpha lam)``, elementwise, without cancellation or overflow.

    Series ``(1 + x^2/3 - x^4/45 + ...) / alpha`` (``x = alpha lam``) for
    ``|x| < 0.1``; ``|lam|`` for ``|x| > 18`` (exact in double precision); the
    compiled kernel :func:`.rhmc_kernels.softabs_vec`.

    Example
    -------
    >>> import numpy as np
    >>> from stanlite.samplers.rhmc import softabs
    >>> softabs(np.array([-3.0, 0.0, 1e-9, 30.0]), alpha=1.0).round(6)
    array([ 3.014909,  1.      ,  1.      , 30.      ])
    """
    lam, flat = _vector(lam)
    return _K.softabs_vec(flat, float(alpha)).reshape(lam.shape)


def softabs_derivative(lam, alpha):
    """``f'(lam) = coth(x) - x / sinh(x)^2`` with ``x = alpha lam`` (in (-1, 1)).

    Example
    -------
    >>> import numpy as np
    >>> from stanlite.samplers.rhmc import softabs_derivative
    >>> softabs_derivative(np.array([-30.0, 0.0, 0.5]), alpha=1.0).round(6)
    array([-1.      ,  0.      ,  0.322606])
    """
    lam, flat = _vector(lam)
    return _K.softabs_vec(flat, float(alpha), True).reshape(lam.shape)


def softabs_divided_differences(lam, alpha):
    """The pseudo-Jacobian ``J_kl = (f(lam_k) - f(lam_l)) / (lam_k - lam_l)``,
    ``J_kk = f'(lam_k)`` (Betancourt 2013, the matrix in ``dSigma = Q (J o Q^T dA Q)
    Q^T``), accurate to rounding for every pair, close or not.

    Well-separated pairs use the quotient as written. For close pairs,
    ``f(a) - f(b) = (a - b) coth(alpha a) + b (coth(alpha a) - coth(alpha b))`` and
    ``coth(s) - coth(t) = sinh(t - s) / (sinh s sinh t)`` give the cancellation-free

        J_ab = coth(alpha a) - alpha b sinhc(alpha (a - b)) / (sinh(alpha a) sinh(alpha b))

    (``sinhc(x) = sinh(x)/x``), which is ``f'(a)`` at ``a = b``; near zero the
    divided differences of the Taylor series, and far out ``sign(a)``. The compiled
    kernel :func:`.rhmc_kernels.divided_differences`.

    Example
    -------
    >>> import numpy as np
    >>> from stanlite.samplers.rhmc import softabs_divided_differences
    >>> softabs_divided_differences(np.array([-30.0, 0.5, 0.5 + 1e-12]), 1.0).round(6)
    array([[-1.      , -0.948132, -0.948132],
           [-0.948132,  0.322606,  0.322606],
           [-0.948132,  0.322606,  0.322606]])
    """
    _, flat = _vector(lam)
    alpha = float(alpha)
    return _K.divided_differences(flat, _K.softabs_vec(flat, alpha), alpha)


# ----------------------------------------------------------------------------------------
# the geometry at one position (cached in Point.aux)
# ----------------------------------------------------------------------------------------
class Geometry:
    """The SoftAbs metric at one position ``q``: the eigendecomposition of the
    potential's Hessian ``A = -d^2 log p = Q diag(lam) Q^T``, ``f = f(lam)``,
    ``1/f``, ``log det Sigma`` and (on demand) the pseudo-Jacobian ``J``."""

    __slots__ = ("q", "A", "lam", "Q", "f", "finv", "logdet", "alpha", "_J", "force", "dv",
                 "dv_eps")

    def __init__(self, q, A, alpha):
        t0 = _clock()
        # A symmetrised (forward-over-reverse is symmetric up to rounding), its
        # eigendecomposition, f(lam), 1/f and log det Sigma: one compiled call
        self.A, self.lam, self.Q, self.f, self.finv, self.logdet = \
            _K.eig_softabs(np.ascontiguousarray(A, dtype=float), float(alpha))
        self.q = q
        self.alpha = alpha
        self._J = None
        # what the step that ended here saw (predictors for the next step's fixed
        # points; None at a point with a fresh momentum): dH/dq used in its last
        # half-kick, and the change of velocity Sigma^-1 p_h over it, for step eps
        self.force = self.dv = self.dv_eps = None
        PROFILE["eighs"] += 1
        PROFILE["t_eigh"] += _clock() - t0

    @classmethod
    def from_parts(cls, q, A, lam, Q, f, finv, logdet, alpha, J):
        """The geometry at ``q`` from an eigendecomposition already made (the
        compiled step's, :mod:`.rhmc_step_jit`)."""
        g = object.__new__(cls)
        g.q, g.A, g.lam, g.Q, g.f, g.finv, g.logdet = q, A, lam, Q, f, finv, logdet
        g.alpha, g._J = alpha, J
        g.force = g.dv = g.dv_eps = None
        return g

    def fresh(self):
        """The same geometry without the previous step's predictors."""
        if self.force is None and self.dv is None:
            return self
        g = object.__new__(Geometry)
        for k in Geometry.__slots__:
            setattr(g, k, getattr(self, k))
        g.force = g.dv = g.dv_eps = None
        return g

    @property
    def J(self):
        if self._J is None:
            t0 = _clock()
            self._J = _K.divided_differences(self.lam, self.f, float(self.alpha))
            PROFILE["t_eigh"] += _clock() - t0
        return self._J

    @property
    def metric(self):
        """``Sigma = Q diag(f) Q^T`` (for inspection and tests)."""
        return (self.Q * self.f) @ self.Q.T

    def velocity(self, p):
        """``Sigma^-1 p`` (``dH/dp``)."""
        return _K.velocity(self.Q, self.finv, np.ascontiguousarray(p, dtype=float))

    def sample_momentum(self, rng):
        """``p ~ N(0, Sigma)``: ``Q diag(sqrt f) z``."""
        return self.Q @ (np.sqrt(self.f) * rng.standard_normal(self.f.shape[0]))

    def norm_p(self, dp):
        """``sqrt(dp^T Sigma^-1 dp)``."""
        w = self.Q.T @ dp
        return math.sqrt(float(w @ (self.finv * w)))

    def norm_q(self, dq):
        """``sqrt(dq^T Sigma dq)``."""
        w = self.Q.T @ dq
        return math.sqrt(float(w @ (self.f * w)))

    def trace_matrix(self, p):
        """``M = M_phi + M_tau(p)`` with ``dH/dq = -grad log p + grad tr(M A(q))``."""
        return _K.trace_matrix(self.Q, self.finv, self.J,
                               np.ascontiguousarray(p, dtype=float))


# ----------------------------------------------------------------------------------------
# the model's log density as a function of traced values (for the third-order sweeps)
# ----------------------------------------------------------------------------------------
def _traced_log_density(model):
    """``(f, is_model)``: ``f(x) = log p(x)`` written in stanlite operations, so that
    it nests - an ``sl.Model``'s own log density (the function its
    ``log_density_hessian`` differentiates); for another protocol object its
    ``log_density``, which must then accept traced values."""
    ld = getattr(model, "_log_density", None)
    if callable(ld):
        return ld, True
    return model.log_density, False


class _HessianTape:
    """A recording of ``q -> A(q)`` (the potential's Hessian) at one point; each
    :meth:`grad_trace` is one reverse sweep over it: ``d/dq tr(M A(q))`` for a new
    constant ``M``. A context manager (the recording lives in a nested scope)."""

    __slots__ = ("_scope", "_gc", "_x", "_H", "tape", "A")

    def __init__(self, f, q):
        from stanlite.autodiff.tape import gc_paused, nested
        from stanlite.autodiff.var import Box, Var
        self._scope = nested()
        self._gc = gc_paused()
        t0 = _clock()
        self.tape = self._scope.__enter__()
        self._gc.__enter__()
        try:
            self._x = Var(q)
            H = _hessian(f)(self._x)
        except BaseException:
            self.close()
            raise
        if isinstance(H, Box) and H.tape is self.tape:
            self._H = H
            value = H.value
        else:                       # a constant Hessian (a Gaussian): no third order
            self._H = None
            value = getattr(H, "value", H)
        n = q.shape[0]
        self.A = -np.asarray(value, dtype=float).reshape(n, n)
        PROFILE["recordings"] += 1
        PROFILE["t_hessian"] += _clock() - t0

    def grad_trace(self, M):
        """``d/dq tr(M A(q))`` (``M`` symmetric): the VJP of ``q -> A(q)`` with
        cotangent ``M``, i.e. minus that of the log density's Hessian."""
        if self._H is None:
            return np.zeros(self._x.value.shape)
        t0 = _clock()
        self.tape.zero_adjoints()
        self._x.adj = None
        self._H.backward(seed=M.reshape(self._H.shape), retain=True)
        g = self._x.adj
        PROFILE["sweeps"] += 1
        PROFILE["t_sweep"] += _clock() - t0
        if g is None:
            return np.zeros(self._x.value.shape)
        return -np.asarray(g, dtype=float)

    def close(self):
        if self._scope is not None:
            self._gc.__exit__(None, None, None)
            self._scope.__exit__(None, None, None)
            self._scope = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class _RetapedTrace:
    """The third-order sweeps retaped: ``x = (q, vec M) -> tr(M H(q))`` recorded once
    (forward-over-reverse Hessian on an outer tape) and compiled by ``sl.compile``;
    its gradient's ``q`` part is ``d/dq tr(M H(q))``. Each call replays the Hessian's
    forward pass and the reverse sweep as straight-line numpy, where the taped
    alternative records the Hessian at every point and sweeps it node by node."""

    def __init__(self, f, q):
        import warnings

        from stanlite.autodiff.compile import Compiled, CompileWarning
        from stanlite.math import reshape, sum as _sum
        n = q.shape[0]
        self.n = n

        def trace(x):
            H = _hessian(f)(x[:n])
            return _sum(reshape(x[n:], (n, n)) * H)
        t0 = _clock()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CompileWarning)
            self.program = Compiled(trace, np.concatenate([q, np.zeros(n * n)]))
        self.ok = self.program.fallback is None
        PROFILE["recordings"] += 1
        PROFILE["t_hessian"] += _clock() - t0

    def at(self, q, A):
        return _TraceAt(self, q, A)


class _TraceAt:
    """:class:`_HessianTape`'s interface (``A``, ``grad_trace``) on the retaped
    program at one point ``q`` whose ``A`` is known."""

    __slots__ = ("_rt", "_q", "A")

    def __init__(self, rt, q, A):
        self._rt = rt
        self._q = q
        self.A = A

    def grad_trace(self, M):
        t0 = _clock()
        g = self._rt.program(np.concatenate([self._q, M.ravel()]))[1]
        PROFILE["sweeps"] += 1
        PROFILE["t_sweep"] += _clock() - t0
        return -g[:self._rt.n]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
