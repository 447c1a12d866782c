"""Riemannian-manifold HMC with Betancourt's SoftAbs metric and the implicit
(generalised) leapfrog of Girolami & Calderhead.

What lives here: the SoftAbs metric as an object with the two methods the trajectory
code is written against (``start`` and ``step``, see :mod:`.hamiltonian`), so the
NUTS tree of :mod:`.nuts` and the static trajectory of :mod:`.chain` run on it
unchanged; the Hamiltonian and its gradients; the kernels ``sampler="rhmc"`` uses.
The SoftAbs map, the geometry at one position and the Hessian recordings are in
:mod:`.rhmc_geometry` (re-exported here).

The metric (Betancourt 2013, arXiv:1212.4693, sec. 4). With ``A(q)`` the Hessian of
the potential ``U(q) = -log p(q)`` and its eigendecomposition ``A = Q diag(lam) Q^T``,

    Sigma(q) = Q diag(f(lam)) Q^T,     f(lam) = lam coth(alpha lam)

a smooth absolute value: ``f(lam) -> |lam|`` for ``alpha |lam| >> 1`` and
``f(lam) -> 1/alpha`` as ``lam -> 0``, so ``Sigma`` is positive definite even where
``A`` is not (a funnel's mouth, a banana's flanks, a saddle). The Hamiltonian is

    H(q, p) = U(q) + 1/2 log det Sigma(q) + 1/2 p^T Sigma(q)^-1 p
            = U(q) + phi(q) + tau(q, p).

Its gradient in ``q`` needs ``dSigma/dq_i`` - third derivatives of log p. By the
Daleckii-Krein formula (Betancourt's eq. for the "pseudo-Jacobian")

    dSigma/dq_i = Q (J o (Q^T dA/dq_i Q)) Q^T,
    J_kl = (f(lam_k) - f(lam_l)) / (lam_k - lam_l),   J_kk = f'(lam_k)

(``o`` the elementwise product), so that with ``u = Sigma^-1 p`` in the eigenbasis,
``u = diag(1/f) Q^T p``,

    dphi/dq_i = 1/2 tr(Sigma^-1 dSigma_i)          = tr(M_phi dA/dq_i),
                M_phi = 1/2 Q diag(J_kk / f_k) Q^T
    dtau/dq_i = -1/2 p^T Sigma^-1 dSigma_i Sigma^-1 p = tr(M_tau dA/dq_i),
                M_tau = -1/2 Q (J o u u^T) Q^T

and the whole q-gradient is ``dH/dq = -grad log p + grad_q tr(M A(q))`` with
``M = M_phi + M_tau`` held constant: one vector-Jacobian product of the map
``q -> A(q)`` with cotangent ``M`` (the contraction ``sl.grad_trace_mat_hessian``
computes), never the n^3 tensor. ``dH/dp = Sigma^-1 p`` is the velocity ("p sharp").

The integrator (Girolami & Calderhead 2011, eqs. 16-18), with ``e = eps / 2``:

    p_h = p_0 - e dH/dq(q_0, p_h)                            (implicit in p_h)
    q_1 = q_0 + e [dH/dp(q_0, p_h) + dH/dp(q_1, p_h)]       (implicit in q_1)
    p_1 = p_h - e dH/dq(q_1, p_h)                            (explicit)

symmetric (``step(-eps)`` from ``(q_1, p_1)`` returns to ``(q_0, p_0)``) and
volume-preserving when the two fixed points are solved exactly. They are solved by
Anderson-accelerated fixed-point iteration (:func:`_fixed_point`) to
``fixed_point_tol`` (1e-8, Stan's threshold) in the metric's own norm (``|dp|`` in
``Sigma^-1``, ``|dq|`` in ``Sigma`` at ``q_0``: standard deviations, so one tolerance
fits every scale of a funnel), at most ``max_fixed_point`` (50) evaluations, starting
from the previous step's force and change of velocity (predictors kept in the
point's geometry); a fixed point that fails from a predictor is solved once more from
the plain start (``p_0``, ``q_0``), since a predictor can start the iteration outside
the solution's basin (on the banana, 94 such restarts in 1000 transitions, each a
step that was a failure before). Stan caps the iterations at 10 and carries on with whatever it has;
here an iteration that does not converge, stops contracting, or meets a failing
density is a *divergence* (``h = inf``): the step was too large for the local
curvature (the implicit equations may have no solution), an unconverged step would
break the reversibility the sampler's correctness rests on, and the tree stops there
as it does for an energy blow-up.

Cost and caching. Per step: the momentum fixed point at ``q_0`` records the map
``q -> A(q)`` once (forward-over-reverse Hessian on a tape, :func:`sl.hessian`) and
sweeps it backwards once per iteration (reverse over forward-over-reverse: each
sweep is one ``grad tr(M A)`` for a new ``M``); the position fixed point needs the
Hessian and its eigendecomposition at each new iterate (inherent); the final
momentum half-step records once more at ``q_1`` and sweeps once, and that recording
also gives the Hessian whose eigendecomposition the returned point caches in
``Point.aux`` (the :class:`Geometry`), so the next step and the next transition start
without recomputing it. :data:`PROFILE` accumulates the time split (Hessians,
eigendecompositions, third-order sweeps, fixed-point iterations).

The compiled step (:mod:`.rhmc_step_jit`, the default where the model's gradient,
Hessian and sweep programs run in the tape interpreter): the whole step above - both
fixed points, the half-kick, the geometry at ``q1`` - is one compiled call that calls
the programs directly, with the same arithmetic; it hands a step back to the Python
code below when the interpreter does (a guard, a domain). At d = 10 a step 0.73 ->
0.35 ms (136 -> 63 NUTS gradients); at d = 51 it is the programs' own cost (a sweep
is ~40 gradients there, an eigendecomposition ~20) and does not change.

Between two evaluations of the model, the dense algebra (eigendecomposition with the
SoftAbs transform, the velocity ``Sigma^-1 p``, the divided differences ``J``, the
matrix ``M`` of a sweep, each Anderson update) is one compiled call each
(:mod:`.rhmc_kernels`): at d = 10 an eigendecomposition with the transform 47 -> 16
us, ``J`` 80 -> 2 us, ``M`` 22 -> 2 us (CPU time, one process), so an implicit step
is mostly the model's own Hessians and third-order sweeps (``benchmarks/README.md``).

Retaping (``sampler_options={"retape": True}``, the default, for an ``sl.Model``
with ``compile`` on): the Hessians come from the model's retaped Hessian
(``Model.log_density_hessian``: the forward-over-reverse computation recorded once
and replayed as straight-line numpy), and the sweeps from one compiled program of
``(q, vec M) -> tr(M H(q))`` whose gradient's ``q`` part is the sweep - no recording
per point. Where either cannot be replayed (a density that reads nested values), the
recording described above is used. Hessians 3-10x cheaper; a step on the banana
2.6 -> 0.7 ms, on the funnel (d = 10) 4.5 -> 2.0 ms, on ``pk_steady_state`` 63 -> 47
ms (its sweeps, through the solver's third-order IFT, are the floor there).

The NUTS criterion generalises unchanged (Betancourt 2013, arXiv:1304.1920): ``rho``
is the sum of the momenta and the ends' velocities are ``p_sharp = Sigma(q)^-1 p`` -
exactly ``Point.v`` here.

Failed steps. A fixed point that does not converge is, on the funnel and the banana,
mostly an implicit equation without a solution: the momentum equation is quadratic
in ``p_h`` and past some step size it meets a fold (least squares stalls with a
singular Jacobian; a damped iteration rescues none). Such a step is retried as 2, 4,
8 substeps (``max_halvings``, :meth:`SoftAbsMetric._retry`), kept only if the same
rule run backwards from its end picks the same subdivision (every coarser one fails
there too); otherwise, or if every subdivision fails, it is a divergence.

What the divergences are (measured: every failed step of 1 x (500 + 500) runs at the
defaults captured and solved again with a Powell hybrid root finder). On the banana
they sit at its bottom, x ~ (0, -2), where x1's curvature ``1 - 44 (x2 + 2) + ...``
crosses zero within one sd of x2 and SoftAbs's metric for x1 changes several-fold
over it; on the funnel they come with large momenta (3.5-4.6 in the metric's norm,
against sqrt(d) = 3.2 typical). Most are folds of the momentum equation (the root
finder stalls at the same residual, 0.06-1.5: no solution), some position fixed
points that a restart from the plain start solves (the predictor's fault: now
restarted). Of the folds that remain, about a third are rescued in substeps; the
rest are refused as irreversible (from the retried end, the undivided step
converges backwards - the fold depends on the momentum at the start of the step),
so the divergence rate follows the rate of failed steps, which ``adapt_delta``
bounds. Every implicit variant (the other order of the generalised leapfrog, the
implicit midpoint) has the same quadratic momentum equation.

Step-size adaptation is Stan's dual averaging on the acceptance statistic, with one
change (:func:`make_kernel`): a transition in which a smaller step cured a failed
step (rescued, or irreversibly so) reports an acceptance of 0 - the implicit
integrator fails abruptly, energy errors staying small up to the step size where the
equations lose their solutions, so without this the adaptation would not back off.
A step that failed at every subdivision is not a matter of the step size (rounding
noise in a model's third derivatives, or a momentum the fold reaches at any step
size): it counts as one rejected step of the transition's average, as a divergent
step does in Stan's, so such failures cannot drive the step size to zero (before
this rule every failed transition reported 0 and a failure rate independent of the
step size, as on ``pk_steady_state`` before its divided difference, collapsed it).
And a cured failure lowers the step size by at most the factor its substeps needed
(:func:`adapt_stepsize`): at ``adapt_delta`` 0.99 a reported 0 early in a window cut
it 14-fold on ``pk_steady_state`` (0.099 -> 0.0071 after one fold at iteration 31,
then 511 steps a transition); the equilibrium (failures in about ``1 - adapt_delta``
of the transitions) is unchanged, only the transient after one failure is bounded.
What fails there (measured, seed 1): folds of both implicit equations, not noise -
the momentum equation at iteration 31 (a Powell hybrid root finder stalls at 0.086
in the metric's norm; at 0.9 of the step it solves to 1e-13), the position equation
at iteration 33 out in the tail (log sigma -1.86, log k2 -1.57), where the Hessian's
eigenvalue 1.6 falls towards SoftAbs's floor ``1/alpha`` along the step, so the
velocity ``Sigma(q)^-1 p`` grows five-fold over two steps' length and
``q1 = q0 + e (v0 + v(q1))`` has no solution (second differences of ``v`` scale as
h^2 from 1e-3 to 1e-7: smooth). That was at alpha 5.59 (the first point's); once
alpha is bounded by the metric's condition number at the first window's end
(``MAX_CONDITION``, below: 0.2-0.3 there) such steps fold only at step sizes of ~0.2
and above, which the bulk's energy errors do not reach at adapt_delta 0.99.
Sampling then uses half of dual averaging's final average (:func:`final_stepsize`),
and alpha is not adapted at the last window's end (``kernels.SoftAbsNuts``), so that
the average is over the whole last window rather than the term buffer's 50
iterations: at the average itself 0.5% of the banana's transitions were divergent,
at 0.7 of it 0.05-0.075%, at half of it none (4 x (1000 + 1000)).
The default ``adapt_delta`` for RHMC is :data:`ADAPT_DELTA` (0.99), by measurement:
at 0.8 4-6% of transitions on the funnel (d = 10) and the banana were divergent, at
0.95 none in 200 (but 0.4% and 1-2% over longer runs), at 0.99 none of the funnel's
2000 + 500 transitions and 0.4% of the banana's 1000 (``benchmarks/README.md``): the
divergences are failed steps (see above), whose rate ``adapt_delta`` bounds. Failures that persist as the step size shrinks point at the model:
a fixed point that stalls at a residual floor above ``fixed_point_tol`` is rounding
noise in the third derivatives (``pk_steady_state``'s absorption/elimination factor
lost digits where two rates met, until it was written as a divided difference).

``alpha`` (:func:`auto_alpha`, the default ``"auto"``): ``ALPHA_SCALE`` (30) over the
Hessian's curvature scale (:func:`curvature_scale`: the median |eigenvalue|) at the
chain's first point; then, until the first warmup window's end, after every warmup
transition over the median of those scales at the latter half of the warmup's
samples so far (:meth:`SoftAbsMetric.follow`); and at the end of each of Stan's
warmup windows but the last (where a new alpha would leave the step size 50
iterations to settle) likewise, but with each sample's scale at least a tenth of its
largest |eigenvalue| (``ALPHA_SCALE / MAX_CONDITION``), so that the metric's
condition number ``alpha max |lam|`` is at most ``MAX_CONDITION`` = 300 at the
typical sample (:meth:`SoftAbsMetric.adapt_alpha`; ``adapt_alpha``). The chosen
alpha is kept in the chain's state (``sampler_options["alpha"]``) so that a resumed
chain keeps its metric.
Why the bound (issue 24, ``pk_steady_state``): there the Hessian's |eigenvalues|
are ~1 (a direction whose curvature changes sign across the posterior: -1.5 to 2.5),
~20 and ~1300, so the median put the floor ``1/alpha`` at 0.7 (0.18 with the first
point's 5.59), under the soft curvature's swings and 2000 times below the stiff
one; the implicit equations then fold in log k2's tails at steps of 0.01-0.08 (the
velocity in the soft direction growing several-fold along a step), and warmup's
step size fell to 0.0025 (1023 steps a transition). Single steps from NUTS draws in
the upper tail (48 a cell) fail at eps 0.08 in 8 of 48 at alpha 5.59, 7 at 1.43, 1
at 0.3, 0 at 0.2, 0.1, 0.05 (at 0.16: 11, 3, 1, 0, 0 of 48 for 1.43, 0.3, 0.2,
0.1, 0.05), while the energy errors stay alike (median |dH| 7e-4 to 2e-3 at 0.08).
With the bound alpha is 0.15-0.26 there (floor ~4-6, the stiff direction followed);
the funnels' and the banana's spectra are narrower (the largest |lam| typically 6.5x
the median at d = 10, 2x on the banana: their alphas do not change; 27x at d = 51,
where alpha is bounded by ~10 instead of ~28 - inside the range its chains already
adapt to, 17.5-190). Why follow the chain at first: the initialisation's point
need not look like the posterior (pk_steady_state's gave 5.59, and the first window
ran at 127-255 steps a transition). Why not bound the followed alpha: the funnel's
first transitions pass points where v has fallen before the x's shrank, whose
v-curvature ``sum x^2 e^-v / 2`` is 10^4-10^5; bounded there, alpha fell to 0.005,
every direction was made as stiff as that one, the chain stopped moving and the
followed alpha with it (one chain, 300 warmup: 1023 steps a transition and a
trajectory floor of 88.7 against 6-11 unbounded). At a window's end the scales are
the latter half of the warmup's samples, from the typical set.
Where no curvature changes sign (issue 24, the funnel's mouth at d = 51). The bound
is for a curvature that crosses zero, whose swing the lift must cover. The funnel has
none - one negative eigenvalue (along the x's own direction and v) at every typical
point - but its x curvatures ``e^-v`` span e^-9 to e^9, and under the bounded alpha
(~10 at d = 51) SoftAbs gives the x a local variance of at most alpha in the mouth,
against their spread ``e^v`` (1600 at v = 7.4). There ``1/2 log det Sigma`` no longer
pays for the x's volume, and v moves as under a Euclidean metric, an energy-limited
random walk (mean |dv| 0.3 a transition against ~2 elsewhere): one chain of four
spent a third of its draws at v > 5 (exact 4.8%), ESS(v) 14 from 4000 draws, R-hat
1.21. So at a window's end where every warmup sample so far - at least
``FIXED_SIGN_SAMPLES`` (200) - has one inertia (:func:`fixed_inertia`), alpha may
reach ``FIXED_SIGN_CONDITION`` (1e5) over the median largest |eigenvalue|, which
follows the x's curvature up to v ~ 8 at d = 51. From a point in the mouth (v = 7.5,
one chain, 150 + 150): alpha 3000 left it within 25 transitions at 62 steps each,
alpha 10 was still at v 5.6-6.6 after 300, at 160 steps each. The funnels, the
Gaussians and the logistic regression have one inertia at every draw; the banana
(48% of 1000 NUTS draws with a negative eigenvalue) and ``pk_steady_state`` (2.3%)
do not and keep the bounded alpha. At the defaults (``benchmarks/README.md``, tenth
round): funnel d = 51, 3 x (1000 + 1000), alpha ~3300-3500, ESS of v 14 -> 2125,
R-hat 1.21 -> 1.003, 0 divergent, the neck within 1.1 MCSE; d = 10, 4 x (1000 +
1000), ESS 472 -> 1867.
On the funnel, where v mixes slowly, the adapted alphas still differ between chains
(8.8-151 over 4 x 1000 warmup draws, against 12-110 from the first points).
SoftAbs lifts eigenvalues below about ``1/alpha`` to ``1/alpha``: a constant is a
statement about the parameters' units (Stan's 1.0 lifts every curvature below 1);
on the funnel (d = 10, 200 + 200, adapt_delta 0.8) alpha 1 had 47 divergent
transitions of 200 and never went below v = -2.8, alpha 10 and 30 two and six
and reached the neck. A number may be given.

Mixing along the funnel's neck (why v's ESS was low; issue 24, point 2). The U-turn
criterion is the generalised one of Betancourt (arXiv:1304.1920), as Stan has it:
``rho`` the sum of the momenta, each end's velocity ``p_sharp = Sigma(q_end)^-1
p_end`` at its own position (checked), with Stan's checks across the seam of every
merge, multinomial sampling within subtrees and biased progressive sampling at the
top (:mod:`.nuts`, shared with the Euclidean tree). What it does on the funnel
(measured: long trajectories from exact draws, ``benchmarks/README.md``): the local
Hessian gives v the mass of its *conditional* scale given x (about ``sqrt(2 / (d -
1))``) while its effective potential has the marginal scale 3, so in the metric's
time v oscillates slowly - half-periods of 8-10 at d = 10, 20-25 at d = 51 - while
the x directions, whitened, have a period of about 2 pi. ``p_sharp . rho`` sums over
all directions, each contributing about its kinetic energy, so the trajectory
U-turns when the fast ones turn (after 2.3-4 at both sizes), with v a fraction of
the way along its swing: a random walk in v (mean |dv| 1.1 a transition at d = 10).
Nothing is wrong with the criterion; it answers for the sum, not for the slowest
direction. The fixed points are not the limit either (energy errors 0.01-0.06 over
600 steps at the sampling step size). Hence ``sampler_options["min_int_time"]``:
runs of states shorter than it are not tested for a U-turn (a rule that depends on
the run alone, so the tree stays reversible), and trajectories last at least that
long in the metric's time; with 8 on the funnel (d = 10) ESS of v a transition
0.041 -> 0.41, ESS a CPU second 2.1 -> 6.7 (16: 0.40 and 3.5, past v's half-period).

The floor is chosen from the problem (the default ``"auto"``,
:meth:`SoftAbsMetric.adapt_min_int_time`): at the end of each of Stan's warmup
windows but the last (the step size then averages under the floor sampling uses),
over the latter half of the warmup's samples, ``lambda`` = the largest generalised
eigenvalue of (their covariance, the mean of their local covariances ``Sigma(q)^-1``)
(:func:`scale_understatement`): how many times the draws' variance exceeds the one
the metric gives, in the worst direction. The sample covariance's own inflation
(a d-dimensional Gaussian's top eigenvalue from n draws sits near ``(1 + sqrt(d /
n))^2``, 2.1 at d = 10 from 50) is removed by the spiked-covariance inverse
(:func:`spike_estimate`); then the floor is ``FLOOR_SCALE`` (2) times ``r =
sqrt(lambda)`` where ``r >= FLOOR_THRESHOLD`` (2), else 0 (:func:`auto_min_int_time`).
From exact funnel draws ``r`` is 4.6 at d = 10 and 10 at d = 51 (v's local sd ~0.7
and ~0.3 against 3; along x the mean local variance is the draws'), against v's
half-periods 8-10 and 20-25: hence 2 r. A Gaussian with its exact metric has ``r``
about 1 (no floor: its draws and step size are those of the plain criterion). The
chosen number replaces "auto" in the chain's state (with ``adapt_min_int_time``
True), so a resumed chain keeps it; a number given by the user is used as it is.
Measured at the defaults, 4 x (1000 + 1000) (``benchmarks/README.md``, issue 24
seventh round): funnel d = 10 floors 7.1-10.3, ESS of v 699 (plain criterion: 166),
0 divergences, v's mean, sd and P(v < -5) within 0.2 MCSE; Gaussians (d = 3, 10)
floor 0, draws unchanged; banana floors 8.6-19.7, ESS 279 -> 1000 but ESS a CPU
second 5.9 -> 4.8 (its bend counts as understated spread). Betancourt (2013) shows
SoftAbs *reaching* the neck where a Euclidean metric cannot (which it does here
too); the public copies reachable here do not give a mixing rate along v to compare.
"""

import math

import numpy as np

from stanlite.autodiff.functional import hessian as _hessian

from . import rhmc_kernels as _K
from . import rhmc_step_jit as _SJ
from .hamiltonian import Point, RejectedPoint, rejection_reason
# the geometry, the Hessian recordings and PROFILE live in rhmc_geometry.py (issue 23);
# re-exported here, the import path callers and tests use
from .rhmc_geometry import (  # noqa: F401  (_TraceAt: rhmc._TraceAt in the tests)
    PROFILE, Geometry, _clock, _HessianTape, _RetapedTrace, _TraceAt, _traced_log_density,
    reset_profile, softabs, softabs_derivative, softabs_divided_differences)
# the trajectory floor's estimator (min_int_time "auto"): rhmc_floor.py, re-exported
from .rhmc_floor import (FLOOR_BLOCK, FLOOR_GROWTH, FLOOR_SCALE,  # noqa: F401
                         FLOOR_THRESHOLD, FloorSums, auto_min_int_time, floor_cap,
                         scale_understatement, spike_estimate)
# alpha's choice (auto_alpha, curvature_scale, the inertia test): rhmc_alpha.py,
# re-exported
from .rhmc_alpha import (ALPHA_SCALE, FIXED_SIGN_CONDITION, FIXED_SIGN_SAMPLES,  # noqa: F401
                         FOLLOW_RESTART, INERTIA_TOL, MAX_CONDITION, auto_alpha,
                         curvature_scale, fixed_inertia, inertia)
from .static_hmc import static_hmc

__all__ = ["SoftAbsMetric", "Geometry", "softabs", "softabs_derivative", "auto_alpha",
           "curvature_scale", "inertia", "fixed_inertia", "FIXED_SIGN_CONDITION",
           "FIXED_SIGN_SAMPLES", "INERTIA_TOL",
           "softabs_divided_differences", "make_kernel", "static_transition",
           "ADAPT_DELTA", "ALPHA_SCALE", "FINAL_STEP_FACTOR", "final_stepsize",
           "MIN_INT_TIME", "FLOOR_SCALE", "FLOOR_THRESHOLD", "FLOOR_BLOCK", "FloorSums",
           "scale_understatement", "spike_estimate", "auto_min_int_time",
           "FLOOR_GROWTH", "floor_cap",
           "MAX_CONDITION", "FOLLOW_RESTART", "adapt_stepsize", "failure_accept_stat",
           "OPTION_DEFAULTS", "PROFILE", "reset_profile"]

#: ``model.sample(sampler="rhmc")``'s ``adapt_delta`` when not given. Measured
#: (``benchmarks/README.md``): at 0.8, 4-6% of the transitions on the funnel (d = 10)
#: and the banana were divergent, at 0.95 none in 200; over 2 x (500 + 500) 0.4% of
#: the funnel's and 1-2% of the banana's at 0.95; at 0.99 none of the funnel's (d = 10)
#: 2 x (1000 + 1000) and 1 x (500 + 500), 0.4% of the banana's 2 x (500 + 500) (the
#: banana's 0.1% aimed at is not met). The divergences are failed implicit steps, whose
#: rate this bounds (module docstring); 0.99 takes steps about half as long.
ADAPT_DELTA = 0.99

#: the sampling phase's step size is this times dual averaging's average (see
#: :func:`final_stepsize`)
FINAL_STEP_FACTOR = 0.5

#: A fixed trajectory floor measured before the floor was chosen per problem
#: (``sampler_options={"min_int_time": MIN_INT_TIME}``): NUTS trajectories with the
#: SoftAbs metric integrate at least this long (in the metric's time, where a
#: Gaussian direction's period is 2 pi). As a fixed default it failed: on a 3-d
#: Gaussian (1 x (100 + 300)) it took 255 steps a transition against 17 and the
#: adapted step size fell from 0.19 to 0.049 (warmup acceptance 0.92-0.98 at step
#: sizes where the plain criterion's was 0.99). The U-turn criterion, summed over
#: every direction, stops when the fast ones turn (after about 2.3-4 on the funnel),
#: while the directions the local Hessian overstates - the funnel's v, the banana's
#: ridge - oscillate with half-periods of 8-10 (funnel, d = 10) to 20-25 (d = 51)
#: and move a fraction of that. Measured (``benchmarks/README.md``, issue 24 sixth
#: round), 2 x (500 + 1000), same seed: ESS of v a transition 0.041 -> 0.41 and
#: ESS/s 2.1 -> 6.7 on the funnel (d = 10); the banana's 0.043 -> 0.28 and 3.0 ->
#: 5.4. The default is now ``"auto"`` (:func:`auto_min_int_time`): 7.1-10.3 on the
#: funnel (d = 10), 8.6-19.7 on the banana, 0 on Gaussians (4 chains each).
MIN_INT_TIME = 8.0


def failure_accept_stat(da, eps, cut):
    """The acceptance statistic that moves dual averaging ``da`` from the step size
    ``eps`` to ``eps / cut`` in its next update (clamped to [0, 1]: never a larger
    drop than a statistic of 0 makes, nor a rise).

    Dual averaging's next log step is ``mu - sqrt(t) s_t / gamma`` with ``s_t =
    (1 - 1/(t + t0)) s_{t-1} + (delta - a) / (t + t0)`` (:class:`.adaptation.
    DualAveraging`); solved for ``a`` at ``log(eps / cut)``."""
    t = da.counter + 1
    eta = 1.0 / (t + da.t0)
    target = math.log(eps) - math.log(cut)
    s_new = (da.mu - target) * da.gamma / math.sqrt(t)
    a = da.delta - (s_new - (1.0 - eta) * da.s_bar) / eta
    return min(1.0, max(0.0, a))


def adapt_stepsize(da, metric, info, eps):
    """Warmup's next step size after an RHMC transition at ``eps`` (the kernel's
    :meth:`~.kernels.Kernel.adapt_stepsize`): Stan's dual averaging on the
    transition's acceptance statistic - except that a transition with a failed
    implicit step that ``n`` substeps cured (``metric.cut``, rescued or refused as
    irreversible) lowers the step size by at most the factor ``n``.

    Why. Such a transition reports an acceptance of 0 (:func:`make_kernel`), and at
    ``adapt_delta`` 0.99 dual averaging weighs a 0 like 99 successes; early in a
    window its kick to the log step, ``0.99 sqrt(t) / (gamma (t + t0))``, is 2.7 at
    t = 32, a factor 14. Measured on ``pk_steady_state`` at the defaults (seed 1):
    the step size climbed to 0.099 over 31 transitions of acceptance ~1, one
    momentum fixed point met a fold at iteration 31 (no solution: a Powell hybrid
    root finder stalls at a residual of 0.086 in the metric's norm, while at 0.9 of
    the step it solves to 1e-13), and the next step size was 0.0071: transitions of
    511 implicit steps of ~50 ms from then on. What the failure says is only that
    the step was too large *there*, by a factor of at most ``n`` (its substeps
    converged): the step size drops by that factor, no more. Later in a window,
    where a 0's kick is smaller than ``log n`` (t above ~800 for n = 2), the rule is
    the plain one, so dual averaging's equilibrium - failures in about ``1 -
    adapt_delta`` of the transitions - is unchanged; only the transient after one
    rare event is bounded. Warmup only: the sampling phase's step size is fixed, so
    detailed balance is not touched by this rule.
    """
    cut = getattr(metric, "cut", 1)
    a = info.accept_stat
    if cut > 1 and math.isfinite(eps) and eps > 0:
        a = max(a, failure_accept_stat(da, eps, cut))
    return da.update(a)


def final_stepsize(da):
    """The step size RHMC samples with: ``FINAL_STEP_FACTOR`` times warmup's dual
    averaging's average ``exp(x_bar)``.

    Why not the average itself: dual averaging holds the transitions that met a
    failed implicit step near ``1 - adapt_delta`` (their acceptance is reported as
    0, every other transition's is near 1), and about half of those failures are not
    rescued by substeps - divergences at ~0.4-0.5% of transitions on the banana at
    0.99, above the 0.1% aimed at. A higher target would need the adaptation to
    estimate a rarer event from a 1000-iteration warmup (a failure's kick to the
    log step then outweighs hundreds of successes: tried, it collapsed the step
    size). The failure rate falls steeply with the step size (the implicit
    equations lose their solution at a step size that depends on the momentum),
    so a fixed factor below the equilibrium buys a large cut in failures for a
    proportional cost in steps. Measured on the banana, 4 x (1000 + 1000) at the
    defaults (``benchmarks/README.md``): divergent transitions 21 of 4000 at the
    average, 3 and 2 (two seeds) at 0.7 of it, 0 at 0.5 (1.4x the steps of 1.0)."""
    return FINAL_STEP_FACTOR * da.final()


#: ``sampler_options`` of ``model.sample(sampler="rhmc")`` and their defaults
OPTION_DEFAULTS = {
    "alpha": "auto",          # SoftAbs sharpness: ALPHA_SCALE / the Hessian's median
                              # |eigenvalue| at the chain's first point, adapted in
                              # warmup (module docstring); or a number
    "adapt_alpha": None,      # alpha adapted at the ends of warmup windows (None:
                              # when alpha is "auto"; kept True in the chain's state
                              # once the chosen alpha replaced "auto")
    "num_steps": None,        # None: NUTS trajectories; an int L: static, L steps
    "fixed_point_tol": 1e-8,  # in the metric's norm (standard deviations)
    "max_fixed_point": 50,    # iterations per implicit half-step before a divergence
    "max_halvings": 3,        # a failed implicit step is retried as 2, 4, ... 2^k
                              # substeps (reversibly, see SoftAbsMetric.step)
    "retape": True,           # an sl.Model's Hessians and third-order sweeps replayed
                              # as compiled code (the eager tape where they cannot be)
    "min_int_time": "auto",   # NUTS trajectories: runs shorter than this (in the
                              # metric's time) are not tested for a U-turn; 0: the
                              # plain criterion; "auto": 0, then at each warmup
                              # window's end but the last auto_min_int_time of the
                              # metric's understatement of the draws' scale
    "adapt_min_int_time": None,  # the floor adapted at warmup windows' ends (None:
                              # when min_int_time is "auto"; kept True in the chain's
                              # state once the chosen number replaced "auto")
}


def _finite(*xs):
    for x in xs:
        if not np.all(np.isfinite(x)):
            return False
    return True


# ----------------------------------------------------------------------------------------
# the metric: start / step for the trajectory code
# ----------------------------------------------------------------------------------------
class SoftAbsMetric:
    """The SoftAbs Riemannian metric with the implicit leapfrog: ``start`` and
    ``step`` for :func:`stanlite.samplers.nuts.transition` (and the static
    trajectory), plus the Hamiltonian and its gradients for inspection.

    Parameters
    ----------
    dim : the number of unconstrained parameters.
    alpha : SoftAbs sharpness (> 0; default 1.0, Stan's); None: chosen at the first
        geometry by :func:`auto_alpha` (``on_alpha`` is then told).
    fixed_point_tol : convergence of the implicit half-steps, in the metric's norm
        (standard deviations; default 1e-8).
    max_fixed_point : iterations per implicit half-step before the step is declared
        divergent (default 50).
    max_halvings : a failed step is retried as up to ``2^max_halvings`` substeps,
        where reversible (default 0: a failed step is a divergence).

    The model must implement ``log_density_gradient`` and ``log_density_hessian``;
    the third-order terms differentiate the log density itself, so it must be
    written in stanlite operations (every ``sl.Model`` is).

    Example
    -------
    >>> import numpy as np, stanlite as sl
    >>> from stanlite.samplers.rhmc import SoftAbsMetric
    >>> class Gauss(sl.Model):
    ...     x = sl.param.vector(2)
    ...     def log_prob(self, x):
    ...         return sl.normal_lpdf(x, 0, np.array([1.0, 0.1]))
    >>> m = SoftAbsMetric(2, alpha=1e3)
    >>> m.geometry(Gauss(), np.zeros(2)).metric.round(6)   # the inverse covariance
    array([[  1.,   0.],
           [  0., 100.]])
    """

    name = "softabs"

    def __init__(self, dim, alpha=1.0, fixed_point_tol=1e-8, max_fixed_point=50,
                 max_halvings=0):
        if alpha is not None and not (isinstance(alpha, (int, float))
                                      and math.isfinite(alpha) and alpha > 0):
            raise ValueError(f"alpha (the SoftAbs sharpness) must be a positive finite "
                             f"number or None (chosen from the first Hessian), got "
                             f"{alpha!r}")
        if not (isinstance(fixed_point_tol, (int, float)) and fixed_point_tol > 0):
            raise ValueError(f"fixed_point_tol must be a positive number, got "
                             f"{fixed_point_tol!r}")
        if not (isinstance(max_fixed_point, int) and max_fixed_point >= 1):
            raise ValueError(f"max_fixed_point must be an int >= 1, got "
                             f"{max_fixed_point!r}")
        self.dim = dim
        self.alpha = None if alpha is None else float(alpha)
        self.on_alpha = None          # called with alpha when it is chosen (make_kernel)
        self.options = None           # the chain's sampler_options this metric writes
                                      # its choices into (kernels.SoftAbsNuts.live)
        self.tol = float(fixed_point_tol)
        self.max_iter = max_fixed_point
        self.max_halvings = int(max_halvings)
        self._f = None
        self._is_model = False
        self._verified = False
        self._model = None
        self._trace = None            # _RetapedTrace of the model (None: not yet/not used)
        self.retape = True            # replay compiled Hessians and sweeps (sl.Model)
        self.failures = 0             # implicit steps that did not converge, ever
        self.cured = 0                # failed steps that substeps solved, ever
        self.cut = 1                  # the most substeps a cured step of the current
                                      # transition needed (1: none; make_kernel)
        self.compiled_step = True     # the whole step in compiled code where it can run
        self.adapts_alpha = False     # alpha adapted at warmup windows' ends (make_kernel)
        self.follows = True           # ... and after every warmup transition until the
                                      # first window's end (follow())
        self.da_alpha = None          # the alpha warmup's step size was last restarted
                                      # for (kernels.SoftAbsNuts.adapt_stepsize)
        self._scales = []             # (unbounded, bounded) log curvature scales,
                                      # log max |lam| and the inertia of the warmup's
                                      # samples (observe())
        self._jit_buffers = None
        self._zero = np.zeros(dim)
        self.min_int_time = 0.0       # read by nuts._python_tree (make_kernel sets it)
        self.adapts_floor = False     # min_int_time adapted at windows' ends (make_kernel)
        self.on_floor = None          # called with a newly chosen min_int_time
        self._floor_sums = FloorSums()  # warmup samples and local covariances
        self.floor_history = []       # (draws used, lambda_max, floor) per window end
        self.floor_wanted = None      # the last window end's floor before floor_cap
        self.floor_noted = True       # False after the last window's end (kernels.py)

    @property
    def inv(self):
        """No constant inverse metric (it depends on the position): NaNs, so that a
        fit's ``inv_metric`` cannot be mistaken for an adapted one."""
        return np.full(self.dim, np.nan)

    # ---- the pieces ----------------------------------------------------------------
    def _fun(self, model):
        if model is not self._model:
            self._f, self._is_model = _traced_log_density(model)
            self._verified = self._is_model
            self._model = model
            self._trace = None
        return self._f

    def _retaped(self, model):
        """Replay compiled Hessians and sweeps for this model? (an ``sl.Model`` with
        retaping on; each of the two falls back to the tape on its own)."""
        return self.retape and self._is_model and getattr(model, "compile", False)

    def _tape(self, model, q, A=None):
        """What gives ``A`` at ``q`` and the sweeps ``d/dq tr(M A)``: the retaped
        program (``A`` from the retaped Hessian) or a recording of the Hessian."""
        f = self._fun(model)
        if self._retaped(model):
            if self._trace is None:
                self._trace = _RetapedTrace(f, q)
            if self._trace.ok:
                if A is None:
                    A = self._hessian_of(model, f, q)
                return self._trace.at(q, A)
        return _HessianTape(f, q)

    def _hessian_of(self, model, f, q):
        """``A(q) = -H(q)``: the model's retaped Hessian where it replays, else nested
        AD on the tape."""
        t0 = _clock()
        if self._retaped(model):
            H = model._retaped_hessian(q, True)
        else:
            H = _hessian(f)(q)
        PROFILE["hessians"] += 1
        PROFILE["t_hessian"] += _clock() - t0
        return -np.asarray(H, dtype=float).reshape(q.shape[0], q.shape[0])

    def _verify(self, model, q, H):
        """A protocol object's ``log_density`` must nest (stanlite operations all the
        way): its traced Hessian must be its own, or the third-order terms would be
        silently wrong."""
        from stanlite.errors import ModelError
        try:
            Ht = np.asarray(_hessian(self._f)(q), dtype=float).reshape(H.shape)
            ok = np.allclose(Ht, H, rtol=1e-6, atol=1e-8 * (1 + np.abs(H).max()))
        except Exception as e:                 # noqa: BLE001 - re-raised with advice
            raise ModelError(
                f"RHMC differentiates the log density three times, so "
                f"{type(model).__name__}.log_density must accept traced values (be "
                f"written with stanlite operations); calling it on one raised "
                f"{type(e).__name__}: {e}") from e
        if not ok:
            raise ModelError(
                f"RHMC differentiates the log density three times, so "
                f"{type(model).__name__}.log_density must be written with stanlite "
                "operations; nested AD through it does not reproduce its "
                "log_density_hessian (plain numpy somewhere inside?)")
        self._verified = True

    def geometry(self, model, q):
        """The :class:`Geometry` at ``q`` (raises for a failing density; non-finite
        Hessians raise ``FloatingPointError``)."""
        f = self._fun(model)
        with np.errstate(all="ignore"):
            if self._is_model:                  # the Hessian alone (no gradient)
                Hl = -self._hessian_of(model, f, q)
            else:                               # a protocol object's own Hessian
                t0 = _clock()
                Hl = model.log_density_hessian(q)[2]
                if not self._verified:
                    self._verify(model, q, Hl)
                PROFILE["hessians"] += 1
                PROFILE["t_hessian"] += _clock() - t0
        Hl = np.asarray(Hl, dtype=float)
        if not _finite(Hl):
            raise FloatingPointError("the Hessian of the log density is not finite")
        if self.alpha is None:
            self.choose_alpha(-Hl)
        return Geometry(q, -Hl, self.alpha)

    def _velocity_at(self, model, q, p):
        """``Sigma(q)^-1 p``: what a position iterate needs of the geometry at ``q``
        (for an ``sl.Model``, its Hessian and one compiled call; raises as
        :meth:`geometry` does)."""
        if not self._is_model or self.alpha is None:
            return self.geometry(model, q).velocity(p)
        with np.errstate(all="ignore"):
            A = self._hessian_of(model, self._f, q)
        if not _finite(A):
            raise FloatingPointError("the Hessian of the log density is not finite")
        t0 = _clock()
        v = _K.softabs_velocity(np.ascontiguousarray(A), self.alpha, p)
        PROFILE["eighs"] += 1
        PROFILE["t_eigh"] += _clock() - t0
        return v

    def choose_alpha(self, A):
        """Set ``alpha`` from the potential's Hessian ``A`` (see :func:`auto_alpha`)
        and tell ``on_alpha`` (which keeps it in the chain's state)."""
        return self._set_alpha(auto_alpha(A))

    def _set_alpha(self, alpha):
        self.alpha = float(alpha)
        if self.on_alpha is not None:
            self.on_alpha(self.alpha)
        return self.alpha

    def observe(self, z):
        """Note the curvature scales (:func:`curvature_scale`, unbounded and
        bounded) of the Hessian at a transition's sample ``z`` (its cached
        geometry; nothing if it has none) for :meth:`adapt_alpha`, and (when the floor adapts) the sample with its local
        covariance for :meth:`adapt_min_int_time`."""
        geo = z.aux
        if isinstance(geo, Geometry) and geo.q is z.q:
            s = (curvature_scale(geo.lam, False), curvature_scale(geo.lam, True),
                 float(np.abs(geo.lam).max(initial=0.0)))
            if all(math.isfinite(x) and x > 0 for x in s):
                self._scales.append((math.log(s[0]), math.log(s[1]), math.log(s[2]),
                                     float(inertia(geo.lam))))
            if self.adapts_floor and self.floor_noted and np.all(np.isfinite(geo.finv)):
                self._floor_sums.add(z.q, geo.Q, geo.finv)

    def adaptation_state(self):
        """What warmup's adaptation of alpha and the floor has gathered, as plain
        data for the chain's state (``ChainState.kernel_adapt``, committed with
        each warmup iteration: kernels.SoftAbsNuts.live_fields), so that a chain
        paused and resumed - by the user, or by the parallel runner's probe of a
        run's size - continues exactly as one that was not: the samples' curvature
        scales (an ``(n, 2)`` array, unbounded and bounded logs), the alpha the step
        size's averaging was last restarted for, and the floor's sums (dropped after
        the last window's end, where nothing reads them any more)."""
        return {"scales": np.array(self._scales, dtype=float).reshape(-1, 4),
                "da_alpha": self.da_alpha,
                "floor": self._floor_sums.to_dict() if self.floor_noted else None,
                "floor_wanted": self.floor_wanted, "note": self.floor_note()}

    def floor_note(self):
        """What ``fit.diagnose()`` repeats for this chain (``ChainState.kernel_adapt
        ["note"]``, as of warmup's last iteration), or None: a trajectory floor that
        its growth limit (:func:`floor_cap`: at most twofold a window's end) held
        below the last adapting window's estimate. Warmup ended before the floor
        reached what the draws asked for, and a direction the metric understates
        (the funnel's v at d = 51 after 400 warmup iterations: floor 8 against ~20)
        may then mix slowly enough to bias its estimates. (No advice to fix the
        floor at the estimate: one excursion of a short warmup can put that at ten
        times what the posterior needs, :mod:`.rhmc_floor`.)"""
        want, floor = self.floor_wanted, self.min_int_time
        if want is None or not want > 1.01 * floor:
            return None
        return (f"RHMC's trajectory floor (min_int_time) ended warmup at {floor:.3g}, "
                f"below its own estimate {want:.3g}: it may at most double at each "
                "warmup window's end, and warmup ended first. Directions the SoftAbs "
                "metric understates (a funnel's neck) may then mix too slowly to trust "
                "their estimates: run a longer warmup (1000 iterations or more).")

    def restore_adaptation(self, d):
        """Read back :meth:`adaptation_state` (None: nothing gathered yet)."""
        if not d:
            return
        sc = np.asarray(d["scales"], dtype=float)
        if sc.size and sc.reshape(len(sc), -1).shape[1] == 2:
            # a state saved before the largest |eigenvalue| and the inertia were
            # noted: no inertia known, so adapt_alpha keeps the bounded rule
            sc = np.column_stack([sc.reshape(-1, 2), np.full((len(sc), 2), np.nan)])
        self._scales = [tuple(float(x) for x in row) for row in sc.reshape(-1, 4)]
        self.da_alpha = None if d["da_alpha"] is None else float(d["da_alpha"])
        self._floor_sums = FloorSums.from_dict(d["floor"])
        w = d.get("floor_wanted")       # (absent from states saved before it was kept)
        self.floor_wanted = None if w is None else float(w)

    def adapt_min_int_time(self):
        """At the end of a warmup window: ``min_int_time`` from the latter half of the
        warmup's samples so far (:func:`scale_understatement` of their covariance
        against the mean of their local covariances ``Sigma(q)^-1``, then
        :func:`auto_min_int_time`; :mod:`.rhmc_floor`); no change with fewer than
        ``dim + 2`` samples or a non-finite estimate. -> min_int_time.

        Why the latter half of all the samples, as :meth:`adapt_alpha`: on the funnel
        a window of 25-50 draws sits in one part of v's range and would understate
        its spread; the floor chosen at one window lengthens the next windows'
        trajectories, so v's spread (and the floor) grows window by window. It grows
        at most by ``FLOOR_GROWTH`` a window (:func:`floor_cap`)."""
        est = self._floor_sums.latter_half()
        if est is None:
            return self.min_int_time
        cov, local, m = est
        lam = scale_understatement(cov, local)
        if not math.isfinite(lam):
            return self.min_int_time
        want = auto_min_int_time(lam, m, self.dim)
        t = min(want, floor_cap(self.min_int_time))
        self.floor_history.append((m, lam, t))
        # kept for diagnose(): a floor the cap held below its estimate at the last
        # adapting window's end is one warmup was too short to reach
        self.floor_wanted = want
        self.min_int_time = t
        if self.on_floor is not None:
            self.on_floor(t)
        return t

    def adapt_alpha(self, bounded=True):
        """At the end of a warmup window (chain.py, Stan's windows): ``alpha =
        ALPHA_SCALE / exp(median log scale)`` over the latter half of the warmup's
        samples so far (the scales noted by :meth:`observe`: :func:`curvature_scale`
        ``bounded`` or not, :meth:`follow` uses the unbounded); no change without
        any. Where every sample so far has one inertia (:func:`fixed_inertia`: no
        curvature changes sign), the bounded alpha may grow to
        ``FIXED_SIGN_CONDITION`` over the median largest |eigenvalue| (the module
        docstring: the funnel's mouth). -> alpha.

        Why not the first point's: the first point is wherever the initialisation
        put it (on the funnel its scale ``e^-v`` varied alpha over 12-110 between
        chains), while the warmup's samples come from the typical set; the median of
        the log scales is the curvature of the typical sample (on the funnel
        ``e^-median(v)``, about 1: alpha about 30). Why the latter half of all of
        them and not the last window's: where the chain mixes slowly (v on the
        funnel) a window of 25-50 draws sits in one part of the posterior (measured:
        one window's median gave alpha 1.5, the neck's curvature). Each call changes
        the metric; the chain then searches the step size again, as Stan does after
        a metric window."""
        if self._scales:
            rows = self._scales[len(self._scales) // 2:]
            alpha = ALPHA_SCALE / math.exp(float(np.median([x[bounded] for x in rows])))
            if bounded and fixed_inertia([x[3] for x in self._scales]):
                # no curvature changed sign at any warmup sample so far (the
                # transient's included, so one crossing seen keeps the bound for
                # good): the lift only keeps the metric invertible, down to a
                # FIXED_SIGN_CONDITION-th of the typical largest curvature (module
                # docstring: a funnel's mouth)
                largest = math.exp(float(np.median([x[2] for x in rows])))
                alpha = max(alpha, FIXED_SIGN_CONDITION / largest)
            self._set_alpha(alpha)
        return self.alpha

    def follow(self):
        """After a warmup transition (kernels.SoftAbsNuts.adapt_stepsize): until the
        first window's end, where :meth:`adapt_alpha` first runs, alpha follows the
        chain - :meth:`adapt_alpha` after every transition, without the condition
        number's bound (the module docstring says why) - when it adapts at all.
        -> alpha.

        Why. The first point is wherever the initialisation put it, and its
        curvature need not be the posterior's: on ``pk_steady_state`` a random
        start's Hessian (|eigenvalues| ~3, ~3, ~120) gave alpha 5.59, where the
        posterior's (~1, ~20, ~1300) give ~1.4 (unbounded); with 5.59 implicit steps
        fold in log k2's tails at steps of 0.01-0.05, and the first window (100
        transitions of a 1000-iteration warmup) ran at 127-255 steps a transition.
        The chain reaches the typical set in a few transitions; the median over the
        latter half of its samples follows it there. The step size's dual averaging
        is restarted when alpha has moved by more than ``FOLLOW_RESTART`` (2) since
        it last started (kernels.SoftAbsNuts.adapt_stepsize): at adapt_delta 0.99
        the step size climbs back by only a few percent a transition, and a step
        learnt for a first point's alpha 20-50 times the posterior's cost 255-511
        steps a transition (measured on pk_steady_state). Warmup only, so the
        metric is fixed while sampling."""
        if self.adapts_alpha and self.follows:
            return self.adapt_alpha(bounded=False)
        return self.alpha

    def hamiltonian(self, model, q, p):
        """``H(q, p) = -log p(q) + 1/2 log det Sigma(q) + 1/2 p^T Sigma(q)^-1 p``."""
        q = np.asarray(q, dtype=float)
        p = np.asarray(p, dtype=float)
        lp = model.log_density_gradient(q)[0]
        g = self.geometry(model, q)
        return -lp + 0.5 * g.logdet + 0.5 * float(p @ g.velocity(p))

    def dH_dq(self, model, q, p):
        """``dH/dq`` through the pseudo-Jacobian and one ``grad tr(M A)`` sweep."""
        q = np.asarray(q, dtype=float)
        p = np.asarray(p, dtype=float)
        _, grad = model.log_density_gradient(q)
        with self._tape(model, q) as rec:
            if self.alpha is None:
                self.choose_alpha(rec.A)
            geo = Geometry(q, rec.A, self.alpha)
            return -grad + rec.grad_trace(geo.trace_matrix(p))

    def dH_dp(self, model, q, p):
        """``dH/dp = Sigma(q)^-1 p``."""
        return self.geometry(model, np.asarray(q, float)).velocity(np.asarray(p, float))

    # ---- the interface of the trajectory code ----------------------------------------
    def _geometry_of(self, model, z):
        geo = z.aux
        if isinstance(geo, Geometry) and geo.q is z.q and geo.alpha == self.alpha:
            return geo
        from stanlite.errors import ModelError
        try:
            geo = self.geometry(model, z.q)
        except ModelError:
            raise
        except RejectedPoint as e:
            raise ModelError(f"RHMC: the Hessian of the log density cannot be evaluated at "
                             f"the chain's current point ({type(e).__name__}: {e}); the "
                             "SoftAbs metric needs finite second derivatives") from e
        return geo

    def start(self, model, z, rng):
        """``z`` with a fresh ``p ~ N(0, Sigma(q))``, its velocity and Hamiltonian
        (the geometry is reused from ``z.aux`` when it belongs to ``z.q``)."""
        geo = self._geometry_of(model, z).fresh()
        p = geo.sample_momentum(rng)
        v = geo.velocity(p)
        h = -z.lp + 0.5 * geo.logdet + 0.5 * float(p @ v)
        if not -math.inf < h < math.inf:
            h = math.inf
        return Point(z.q, p, z.lp, z.grad, v, h, geo)

    def step(self, model, z, eps):
        """One implicit (generalised) leapfrog step of size ``eps`` (negative:
        backwards) from ``z``, which carries its geometry in ``z.aux``. A failing
        density, a non-finite Hessian or a fixed point that does not converge gives
        ``h = inf`` (a divergence; ``lp = -inf`` only when the density failed)."""
        t_start = _clock()
        PROFILE["steps"] += 1
        try:
            z1 = self._steps(model, z, eps, 1)
            if z1.h == math.inf and z1.lp != -math.inf and self.max_halvings:
                z1 = self._retry(model, z, eps, z1)
            if z1.h == math.inf and z1.lp != -math.inf:
                PROFILE["fp_failures"] += 1
                self.failures += 1
            return z1
        finally:
            PROFILE["t_step"] += _clock() - t_start

    # ---- the compiled step (rhmc_step_jit) ---------------------------------------------
    def _jit_programs(self, model):
        """The model's gradient, Hessian and sweep programs in the tape interpreter,
        each with this metric's own value/adjoint buffers (the programs' hold their
        constants; chains in threads never share them) - or None, when one of them is
        not available to compiled loops (not lowered, on the eager tape, a first
        replay at a new point not yet checked): then the Python step runs, and its
        calls through the model make them available."""
        if self.alpha is None or not _SJ.available() or not self._retaped(model) \
                or self._trace is None or not self._trace.ok:
            return None
        n = self.dim
        cg = model.compiled_gradient()
        ch = getattr(model, "_retaped", {}).get(("hessian", True))
        if cg is None or ch is None:
            return None
        pg = cg.kernel_program()
        ph = ch.kernel_program((n,))
        ps = self._trace.program.kernel_program((n + n * n,))
        if pg is None or ph is None or ps is None or not ph.value_only \
                or ph.size != n * n or ps.dim != n + n * n:
            return None
        kb = self._jit_buffers
        if kb is None or kb[0] is not pg or kb[1] is not ph or kb[2] is not ps:
            kb = self._jit_buffers = (pg, ph, ps, pg.V.copy(), pg.A.copy(), ph.V.copy(),
                                      ps.V.copy(), ps.A.copy(), cg, ch,
                                      self._trace.program)
        return kb

    def _jit_step(self, kb, z, geo0, eps):
        """One implicit step in compiled code (:func:`.rhmc_step_jit.implicit_step`):
        the new point, a divergence, or None (handed back: the Python step redoes
        it)."""
        pg, ph, ps, gV, gA, hV, sV, sA, cg, ch, ct = kb
        n = self.dim
        t0 = _clock()
        counts = np.zeros(_SJ.N_COUNTS, dtype=np.int64)
        res = np.empty((9 + n, n))
        Q1, J1 = np.empty((n, n)), np.empty((n, n))
        has_force, has_dv = geo0.force is not None, geo0.dv is not None
        zero = self._zero
        out, lp, logdet = _SJ.implicit_step(
            z.q, z.p, z.grad, geo0.Q, geo0.f, geo0.finv, geo0.J,
            geo0.force if has_force else zero, has_force,
            geo0.dv if has_dv else zero, eps / geo0.dv_eps if has_dv else 0.0, has_dv,
            float(eps), self.alpha, self.tol, self.max_iter,
            pg.code, pg.aux, gV, gA, pg.dim, pg.out, pg.nvar,
            ph.code, ph.aux, hV, ph.dim, ph.out, ph.size,
            ps.code, ps.aux, sV, sA, ps.dim, ps.out, ps.nvar,
            counts, res, Q1, J1)
        c = counts.tolist()
        P = PROFILE
        P["p_iterations"] += c[_SJ.C_P_IT]
        P["q_iterations"] += c[_SJ.C_Q_IT]
        P["hessians"] += c[_SJ.C_HESS]
        P["sweeps"] += c[_SJ.C_SWEEP]
        P["eighs"] += c[_SJ.C_EIGH]
        P["restarts"] += c[_SJ.C_RESTART]
        P["kernel_steps"] += 1
        dt = _clock() - t0
        P["t_kernel"] += dt
        P["t_fixed_point"] += dt
        # the spot checks of the programs against the eager tape continue
        q_end = res[0] if out == _SJ.OK else z.q
        if c[_SJ.C_GRAD]:
            cg.kernel_replays(c[_SJ.C_GRAD], q_end)
        if c[_SJ.C_HESS]:
            ch.kernel_replays(c[_SJ.C_HESS], q_end, key=(n,))
        if c[_SJ.C_SWEEP]:
            ct.kernel_replays(c[_SJ.C_SWEEP], np.concatenate([q_end, np.zeros(n * n)]),
                              key=(n + n * n,))
        if out == _SJ.HANDOFF:
            P["handoffs"] += 1
            return None
        if out == _SJ.FAILED:
            return self._fail(z)
        q1, p1, g1, v1 = res[0].copy(), res[1].copy(), res[2].copy(), res[3].copy()
        geo1 = Geometry.from_parts(q1, res[9:9 + n].copy(), res[6].copy(), Q1, res[7].copy(),
                                   res[8].copy(), logdet, self.alpha, J1)
        geo1.force = res[4].copy()
        geo1.dv = res[5].copy()
        geo1.dv_eps = eps
        h = -lp + 0.5 * logdet + 0.5 * float(p1 @ v1)
        if not -math.inf < h < math.inf:
            h = math.inf
        return Point(q1, p1, lp, g1, v1, h, geo1)

    def _retry(self, model, z, eps, failed):
        """A step whose fixed points failed, retried as ``2^j`` substeps of
        ``eps / 2^j`` (``j = 1 .. max_halvings``), kept only if reversible.

        The rule "the fewest substeps (a power of two) whose fixed points all
        converge" maps ``(q0, p0)`` to ``(q1, p1)``; it is an involution (with the
        time reversed), as the sampler's correctness needs, only if the same rule
        applied backwards from ``(q1, p1)`` picks the same number of substeps: so
        every coarser subdivision must fail backwards from there too. If one
        converges, the step is a divergence (as it was before the retry). Each
        composition of implicit leapfrogs is symplectic and symmetric, so the
        retried step keeps the volume (Bou-Rabee, Carpenter & Marsden's GIST
        argument; Betancourt's advice for stiff regions is the smaller step)."""
        for j in range(1, self.max_halvings + 1):
            n = 1 << j
            PROFILE["retries"] += 1
            z1 = self._steps(model, z, eps, n)
            if z1.lp == -math.inf:
                return z1                        # the density failed: a rejection
            if z1.h == math.inf:
                continue
            # (either way below, n substeps converged where one did not: the step
            # was too large by a factor of at most n - what the adaptation is told)
            self.cut = max(self.cut, n)
            back = z1
            for jb in range(j):                  # coarser subdivisions, backwards
                zb = self._steps(model, back, -eps, 1 << jb)
                if zb.h != math.inf:
                    PROFILE["irreversible"] += 1
                    self.cured += 1
                    return failed
            PROFILE["rescued"] += 1
            self.cured += 1
            return z1
        return failed

    def _steps(self, model, z, eps, n):
        """``n`` implicit steps of ``eps / n`` from ``z`` (stopping at a failure)."""
        h = eps / n
        for _ in range(n):
            try:
                z = self._step(model, z, h)
            except RejectedPoint as e:
                return Point(z.q, z.p, -math.inf, None, z.v, math.inf,
                             why=rejection_reason(e))
            if z.h == math.inf:
                return z
        return z

    def _fail(self, z):
        return Point(z.q, z.p, z.lp, z.grad, z.v, math.inf, z.aux)

    def _step(self, model, z, eps):
        f = self._fun(model)
        half = 0.5 * eps
        geo0 = self._geometry_of(model, z)
        if self.compiled_step:
            progs = self._jit_programs(model)
            if progs is not None:
                z1 = self._jit_step(progs, z, geo0, eps)
                if z1 is not None:
                    return z1
        q0, p0 = z.q, z.p
        # both fixed points are measured (and accelerated) in the metric at q0:
        # |dp| in Sigma^-1, |dq| in Sigma, i.e. in standard deviations
        wp = np.sqrt(geo0.finv)[:, None] * geo0.Q.T
        wq = np.sqrt(geo0.f)[:, None] * geo0.Q.T
        t0 = _clock()
        # 1. p_h = p0 - e dH/dq(q0, p_h), dH/dq = -grad + grad tr(M(p) A): each
        #    evaluation is one sweep over the recording of q -> A(q) at q0
        with self._tape(model, q0, geo0.A) as rec:
            base = p0 + half * z.grad

            def G_p(p):
                PROFILE["p_iterations"] += 1
                return base - half * rec.grad_trace(geo0.trace_matrix(p))
            # start from the last step's force (an O(eps^2) guess) when there is one
            start = p0 if geo0.force is None else p0 - half * geo0.force
            p_h = _fixed_point(G_p, start, wp, self.tol, self.max_iter)
            if p_h is None and start is not p0:
                # a predictor can start the iteration outside the solution's basin
                # (the iterates only change the path, not the solution)
                PROFILE["restarts"] += 1
                p_h = _fixed_point(G_p, p0, wp, self.tol, self.max_iter)
        if p_h is None:
            PROFILE["t_fixed_point"] += _clock() - t0
            return self._fail(z)
        # 2. q1 = q0 + e [Sigma(q0)^-1 p_h + Sigma(q1)^-1 p_h]: the Hessian and its
        #    eigendecomposition at every iterate (the first, q1 = q0, is known)
        v0 = geo0.velocity(p_h)

        def G_q(q):
            if q is q0:
                return q0 + eps * v0
            PROFILE["q_iterations"] += 1
            return q0 + half * (v0 + self._velocity_at(model, q, p_h))
        if geo0.dv is None:
            start = q0                 # its G is free: the explicit Euler step
        else:                          # the velocity changes as over the last step
            start = q0 + half * (2.0 * v0 + (eps / geo0.dv_eps) * geo0.dv)
        q = _fixed_point(G_q, start, wq, self.tol, self.max_iter)
        if q is None and start is not q0:
            PROFILE["restarts"] += 1
            q = _fixed_point(G_q, q0, wq, self.tol, self.max_iter)
        PROFILE["t_fixed_point"] += _clock() - t0
        if q is None:
            return self._fail(z)
        # 3. p1 = p_h - e dH/dq(q1, p_h), explicit; the recording at q1 also gives
        #    the Hessian whose eigendecomposition the new point carries
        lp, grad = model.log_density_gradient(q)
        if not (math.isfinite(lp) and _finite(grad)):
            return Point(q, p_h, -math.inf, None, p_h, math.inf,
                         why=rejection_reason(None, lp, grad))
        with self._tape(model, q) as rec:
            if not _finite(rec.A):
                return Point(q, p_h, -math.inf, None, p_h, math.inf,
                             why="non-finite Hessian")
            geo1 = Geometry(q, rec.A, self.alpha)
            force = rec.grad_trace(geo1.trace_matrix(p_h)) - grad
        p1 = p_h - half * force
        geo1.force = force
        geo1.dv = geo1.velocity(p_h) - v0
        geo1.dv_eps = eps
        v1 = geo1.velocity(p1)
        h = -lp + 0.5 * geo1.logdet + 0.5 * float(p1 @ v1)
        if not -math.inf < h < math.inf:
            return Point(q, p1, lp, grad, v1, math.inf, geo1)
        return Point(q, p1, lp, grad, v1, h, geo1)


def _fixed_point(G, x0, W, tol, max_iter, depth=4):
    """Solve ``x = G(x)`` from ``x0``; ``None`` when it does not converge.

    Anderson acceleration (type II, Walker & Ni 2011) of depth ``depth`` with the
    least-squares problem in the whitened coordinates ``W x`` (the metric norm, so
    the acceleration is as scale-free as the test). Convergence: ``|W (G(x) - x)| <=
    tol``, and the answer is that last ``G(x)``. Failure: ``max_iter`` evaluations,
    a non-finite value, a residual growing a thousandfold, or no new smallest
    residual in 8 evaluations (no contraction: the step is too large for the local
    curvature, and the implicit equations may have no solution at all - on the
    funnel the momentum equation, quadratic in ``p_h``, meets a fold: least squares
    stalls at a residual of 0.1 with a singular Jacobian, and a damped iteration
    (mixing 1/2, tried) rescues none of these failures). The accelerated iterates
    only change the path, not the solution, so the integrator's symmetry holds to
    ``tol``.
    """
    out = _anderson(G, x0, W, tol, max_iter, depth, 1.0)
    return None if out is _STALLED else out


_STALLED = object()


def _anderson(G, x0, W, tol, max_iter, depth, beta):
    """Anderson-accelerated iteration with mixing ``beta``: the solution, None
    (non-finite) or ``_STALLED`` (no convergence). The histories are kept in
    ``depth`` columns, the oldest overwritten; each update is one compiled call
    (:func:`.rhmc_kernels.anderson_step`)."""
    x = x0
    gx = G(x)
    n = x0.shape[0]
    dX, dF, dW = np.empty((n, depth)), np.empty((n, depth)), np.empty((n, depth))
    count = 0
    x_prev = f_prev = wf_prev = None
    r0 = None
    best, k_best = math.inf, 0
    for k in range(max_iter):
        if gx is None or not _finite(gx):
            return None
        fx = gx - x
        wf = W @ fx
        r = math.sqrt(float(wf @ wf))
        if r <= tol:
            return gx
        if r < best:
            best, k_best = r, k
        if r0 is None:
            r0 = r
        elif not r < 1e3 * r0 or k - k_best >= 8 or k == max_iter - 1:
            return _STALLED
        if k > 0:
            j = (k - 1) % depth
            dX[:, j] = x - x_prev
            dF[:, j] = fx - f_prev
            dW[:, j] = wf - wf_prev
            count = min(count + 1, depth)
        x_prev, f_prev, wf_prev = x, fx, wf
        x = _K.anderson_step(x, fx, wf, dX, dF, dW, count, beta)
        gx = G(x)
    return _STALLED


# ----------------------------------------------------------------------------------------
# kernels for chain.run
# ----------------------------------------------------------------------------------------
def static_transition(model, metric, z, eps, rng, max_depth=10, num_steps=10):
    """Static RHMC: ``num_steps`` implicit leapfrog steps and a Metropolis
    accept/reject on ``H``; the same kernel as the Euclidean static HMC with the
    integration time ``num_steps * eps`` (so ``num_steps`` stays fixed while the
    step size adapts)."""
    return static_hmc(model, metric, z, eps, rng, max_depth=max_depth,
                       int_time=num_steps * eps)


def check_options(options):
    """``sampler_options`` completed with :data:`OPTION_DEFAULTS`, checked (an
    :class:`~stanlite.ArgumentError` naming the option)."""
    from stanlite import arguments as A
    from stanlite.errors import ArgumentError
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise ArgumentError(f"sampler_options must be a dict, got "
                            f"{type(options).__name__}")
    unknown = sorted(set(options) - set(OPTION_DEFAULTS))
    if unknown:
        raise ArgumentError(f"unknown sampler_options {unknown} for sampler='rhmc'"
                            f"{A.suggest(unknown[0], OPTION_DEFAULTS)}; known: "
                            f"{sorted(OPTION_DEFAULTS)}")
    out = dict(OPTION_DEFAULTS)
    out.update(options)
    if out["num_steps"] is not None:    # None: NUTS; an int: static trajectories
        out["num_steps"] = A.positive_int("sampler_options['num_steps']", out["num_steps"])
    out["retape"] = A.boolean("sampler_options['retape']", out["retape"])
    if out["alpha"] != "auto":
        out["alpha"] = A.positive_real("sampler_options['alpha']", out["alpha"])
    out["adapt_alpha"] = out["alpha"] == "auto" if out["adapt_alpha"] is None else \
        A.boolean("sampler_options['adapt_alpha']", out["adapt_alpha"])
    out["max_halvings"] = A.nonneg_int("sampler_options['max_halvings']",
                                       out["max_halvings"])
    out["fixed_point_tol"] = A.positive_real("sampler_options['fixed_point_tol']",
                                             out["fixed_point_tol"])
    out["max_fixed_point"] = A.positive_int("sampler_options['max_fixed_point']",
                                            out["max_fixed_point"])
    if isinstance(out["min_int_time"], str):
        if out["min_int_time"] != "auto":
            raise ArgumentError(f"sampler_options['min_int_time'] must be \"auto\" or "
                                f"a number >= 0, got {out['min_int_time']!r}")
    else:
        out["min_int_time"] = float(A.nonneg_real("sampler_options['min_int_time']",
                                                  out["min_int_time"]))
    auto_floor = out["min_int_time"] == "auto"
    out["adapt_min_int_time"] = auto_floor if out["adapt_min_int_time"] is None else \
        A.boolean("sampler_options['adapt_min_int_time']", out["adapt_min_int_time"])
    return out


def make_kernel(dim, options=None):
    """``(metric, kernel)`` for ``chain.run``: the SoftAbs metric and NUTS
    (``num_steps`` None) or the static kernel with ``num_steps`` steps; a
    transition with a failed implicit step reports ``accept_stat = 0`` (see the
    module docstring; warmup's adaptation bounds what a cured one does to the step
    size: :func:`adapt_stepsize`)."""
    from . import nuts
    o = check_options(options)
    auto = o["alpha"] == "auto"
    metric = SoftAbsMetric(dim, None if auto else o["alpha"], o["fixed_point_tol"],
                           o["max_fixed_point"], o["max_halvings"])
    metric.retape = o["retape"]
    metric.adapts_alpha = o["adapt_alpha"]
    floor = o["min_int_time"]
    # "auto": no floor until the first window's end has measured one
    metric.min_int_time = 0.0 if floor == "auto" else floor
    metric.adapts_floor = o["adapt_min_int_time"]
    if (floor == "auto" or metric.adapts_floor) and isinstance(options, dict):
        # as alpha: the chosen floor is kept in the chain's state (a resumed chain
        # integrates as long), and whether it goes on adapting at later windows
        metric.on_floor = lambda t: options.__setitem__("min_int_time", t)
        options["adapt_min_int_time"] = metric.adapts_floor
    if (auto or metric.adapts_alpha) and isinstance(options, dict):
        # the chain's state holds these options: the chosen alpha is kept there, so
        # a resumed chain (and every later transition) uses the same metric; and
        # whether alpha adapts over warmup windows (chain.py keeps Stan's window ends
        # for RHMC then and calls metric.adapt_alpha() at each), which "auto" said
        # until the chosen number replaced it
        metric.on_alpha = lambda a: options.__setitem__("alpha", a)
        options["adapt_alpha"] = metric.adapts_alpha
    L = o["num_steps"]

    def kernel(model, metric, z, eps, rng, max_depth=10):
        before, cured_before = metric.failures, metric.cured
        metric.cut = 1
        if L is None:
            z, info = nuts.transition(model, metric, z, eps, rng, max_depth=max_depth)
        else:
            z, info = static_transition(model, metric, z, eps, rng, max_depth, num_steps=L)
        if metric.adapts_alpha or metric.adapts_floor:
            # (noted in sampling too, where nothing reads them: four floats a draw;
            # the floor's sums stop at the last window's end, kernels.py)
            metric.observe(z)
        if metric.max_halvings:
            # A step that a smaller step cured (rescued in substeps, or irreversibly
            # so) was too large where it was taken: the transition reports 0, as
            # before the retries, so the adaptation keeps such steps rare. A step
            # that failed at every subdivision is not cured by a smaller step
            # (rounding noise in a model's third derivatives, a fold the momentum
            # can reach at any step size): it counts only as one rejected step of
            # the transition's average (a divergent step in Stan's), so failures
            # of that kind cannot drive the step size to zero.
            if metric.cured != cured_before:
                info.accept_stat = 0.0
            else:
                hard = metric.failures - before
                if hard and info.n_leapfrog:
                    info.accept_stat = max(0.0, info.accept_stat - hard / info.n_leapfrog)
        elif metric.failures != before:
            # The implicit leapfrog fails abruptly: the energy error stays small up to
            # a step size where the fixed points stop converging, so the states built
            # before the failure still average a high acceptance and dual averaging
            # would not back off. A transition whose integrator failed reports 0, so
            # the adaptation keeps the failure rate below 1 - adapt_delta.
            info.accept_stat = 0.0
        return z, info
    return metric, kernel
