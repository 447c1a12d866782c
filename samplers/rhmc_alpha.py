"""SoftAbs's sharpness ``alpha`` chosen from the problem (``sampler_options["alpha"] =
"auto"``, the default; issue 24, point 1).

What lives here: the curvature scale of one Hessian (:func:`curvature_scale`: its
median |eigenvalue|, bounded or not by the condition number ``MAX_CONDITION``), the
first point's alpha (:func:`auto_alpha`), and the inertia test that lets a window's
end raise the bound to ``FIXED_SIGN_CONDITION`` where no curvature changes sign
(:func:`inertia`, :func:`fixed_inertia`). :meth:`.rhmc.SoftAbsMetric.adapt_alpha`
and :meth:`.rhmc.SoftAbsMetric.follow` combine them over the warmup's samples; the
measurements behind every constant are in :mod:`.rhmc`'s docstring, which
re-exports every name here.
"""

import math

import numpy as np

__all__ = ["ALPHA_SCALE", "FOLLOW_RESTART", "MAX_CONDITION", "FIXED_SIGN_CONDITION",
           "FIXED_SIGN_SAMPLES", "INERTIA_TOL", "inertia", "fixed_inertia",
           "curvature_scale", "auto_alpha"]

#: ``alpha = ALPHA_SCALE / s`` with ``s`` the median |eigenvalue| of the potential's
#: Hessian at the chain's first point (see :func:`auto_alpha`)
ALPHA_SCALE = 30.0


#: while alpha follows the chain (:meth:`.rhmc.SoftAbsMetric.follow`), a change by
#: more than this factor since the step size's dual averaging last (re)started
#: restarts it, as a new metric at a window's end does
FOLLOW_RESTART = 2.0

#: the largest condition number ``alpha max |lam|`` the alpha chosen at a warmup
#: window's end gives SoftAbs's metric at the typical sample (:func:`curvature_scale`,
#: :meth:`.rhmc.SoftAbsMetric.adapt_alpha`; :mod:`.rhmc`'s docstring for the
#: measurements on ``pk_steady_state``). 300: above the funnels' and the banana's
#: typical max/median |eigenvalue| times ALPHA_SCALE at d = 10 and 2 (their alphas
#: unchanged), far below pk_steady_state's 1300 x 30 / 20.
MAX_CONDITION = 300.0


#: where no curvature changes sign among the warmup's typical samples
#: (:func:`fixed_inertia`), the condition number ``alpha max |lam|`` the alpha chosen at
#: a window's end may reach (:meth:`.rhmc.SoftAbsMetric.adapt_alpha`): 1e5 lets SoftAbs
#: follow the funnel's x curvatures ``e^-v`` up to v ~ 8 at d = 51 (P(v > 8) = 0.4%)
#: under a largest curvature ~25 (:mod:`.rhmc`'s docstring)
FIXED_SIGN_CONDITION = 1e5

#: eigenvalues within this fraction of the largest |eigenvalue| of zero have no sign
#: (:func:`inertia`)
INERTIA_TOL = 1e-9

#: the fewest warmup samples, all of one inertia, that count as "no curvature changes
#: sign" (:func:`fixed_inertia`): with none differing in 200, the rule of three bounds
#: the share of crossing points by 1.5% (95%); ``pk_steady_state``'s is 2.3% (23 of
#: 1000 NUTS draws), so 200 clean draws happen there with probability 1%
FIXED_SIGN_SAMPLES = 200


def inertia(lam):
    """The number of negative eigenvalues among ``lam``, or -1 when one is zero to
    within ``INERTIA_TOL`` of the largest |eigenvalue| (no definite sign).

    Example
    -------
    >>> inertia([2.0, -1e-3, 5.0]), inertia([2.0, 1e-14, 5.0])
    (1, -1)
    """
    lam = np.asarray(lam, dtype=float)
    tol = INERTIA_TOL * float(np.abs(lam).max(initial=0.0))
    if np.any(np.abs(lam) <= tol):
        return -1
    return int(np.sum(lam < 0))


def fixed_inertia(counts):
    """Whether Hessians with these :func:`inertia` counts (non-finite: not noted)
    share one inertia - a definite sign for every eigenvalue - in at least
    ``FIXED_SIGN_SAMPLES`` of them, none differing.

    Why it matters for alpha: SoftAbs's lift ``1/alpha`` smooths ``|lam|`` where an
    eigenvalue crosses zero, and must then exceed the crossing curvature's swing
    (``pk_steady_state``'s soft direction, -1.5 to 2.5, negative at 2.3% of its
    draws: ``MAX_CONDITION``). Where none crosses, as in a funnel (one negative
    eigenvalue at every typical point), it only keeps the metric invertible, and a
    lift that high hides real scales (the funnel's mouth). Why so many samples: a
    crossing a few percent of the posterior has is missed by a few dozen draws.

    Example
    -------
    >>> fixed_inertia([1] * 200), fixed_inertia([1] * 199 + [0]), fixed_inertia([1] * 50)
    (True, False, False)
    """
    c = np.asarray(counts, dtype=float)
    if c.size < FIXED_SIGN_SAMPLES or not np.all(np.isfinite(c)) or np.any(c < 0):
        return False
    return bool(np.all(c == c[0]))


def curvature_scale(lam, bounded=True):
    """The curvature scale of a Hessian with eigenvalues ``lam`` that ``alpha =
    ALPHA_SCALE / scale`` is chosen from: the median ``|lam|``, but (``bounded``) at
    least ``ALPHA_SCALE / MAX_CONDITION`` of the largest (0 for no eigenvalues).

    The bound keeps SoftAbs's metric - whose eigenvalues run from about ``1/alpha``
    to ``max |lam|`` - at a condition number of at most ``MAX_CONDITION``. It is
    applied to the warmup's samples at windows' ends (:meth:`.rhmc.SoftAbsMetric.
    adapt_alpha`), not to the transient before the first one (see there)."""
    lam = np.abs(np.asarray(lam, dtype=float))
    if not lam.size:
        return 0.0
    med = float(np.median(lam))
    return float(max(med, lam.max() * (ALPHA_SCALE / MAX_CONDITION))) if bounded else med


def auto_alpha(A):
    """SoftAbs's ``alpha`` for a problem whose potential has the Hessian ``A`` at the
    chain's first point: ``ALPHA_SCALE / median |lam|`` (:func:`curvature_scale`,
    unbounded: the first point need not be typical; warmup then adapts it,
    :meth:`.rhmc.SoftAbsMetric.follow` and :meth:`.rhmc.SoftAbsMetric.adapt_alpha`).

    ``alpha`` is an inverse curvature: SoftAbs lifts eigenvalues below about
    ``1/alpha`` to ``1/alpha``. A fixed ``alpha`` is a statement about the units of
    the parameters (Stan's default 1 lifts every curvature below 1, i.e. every
    direction whose scale exceeds 1); this one scales with the problem, so that
    ``1/alpha`` is a thirtieth of the typical curvature: the curvatures near the
    typical one are followed, the near-zero ones (where the Hessian changes sign)
    lifted. Measured on the funnel (``benchmarks/README.md``): alpha 1 gives 16% of
    transitions divergent and never enters the neck, 10-30 times the curvature
    scale none or a few. Without curvature (all eigenvalues 0) it is 1."""
    lam = np.abs(np.linalg.eigvalsh(0.5 * (A + A.T)))
    s = curvature_scale(lam, bounded=False)
    if not (math.isfinite(s) and s > 0):
        s = float(lam.max()) if lam.size and np.isfinite(lam).all() and lam.max() > 0 \
            else ALPHA_SCALE
    return ALPHA_SCALE / s
