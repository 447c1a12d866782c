"""The transition kernels a chain runs, and the one registry that names them.

A kernel is what ``sampler=`` chooses: it says how a chain's metric starts
(:meth:`Kernel.init`), how it is rebuilt from a saved chain state
(:meth:`Kernel.live`), what a transition is (the ``step`` :meth:`Kernel.live`
returns, ``step(model, metric, z, eps, rng, max_depth) -> (point, TransitionInfo)``),
and what warmup adapts at the end of a slow window (:meth:`Kernel.window_end`).
The chain (:mod:`.chain`) is the loop around them - step-size adaptation, windows,
draws and their statistics - and never asks which sampler it runs.

:data:`KERNELS` is the only place that knows the names ``"nuts"``, ``"hmc"`` and
``"rhmc"``: the front door's checks (:mod:`.settings`), the chain, the command line
and the fits' files all go through it. Adding a sampler is adding a class here.

The modules behind the kernels (NUTS and its compiled tree, the Riemannian metric)
are imported when a chain starts, not with this module: the command line and the
argument checks read the registry without loading numba.
"""

__all__ = ["Kernel", "KERNELS", "NAMES", "kernel"]


class Kernel:
    """A Euclidean kernel (a metric the user chooses with ``metric=``/``inv_metric=``
    and warmup adapts, by Stan's windows or nutpie's ``adaptation=``); subclasses
    give the transition (:meth:`transition`)."""

    #: the name ``sampler=`` gives it (the registry's key)
    name = None
    #: whether ``metric=``, ``inv_metric=`` and ``adaptation=`` apply to it
    euclidean = True
    #: ``adapt_delta`` when the user gives none (Stan's)
    default_adapt_delta = 0.8
    #: whether a chain may run it in compiled segments (:func:`.nuts_jit.segment`)
    segments = False

    def check_options(self, options):
        """``sampler_options`` checked and completed with their defaults (an
        :class:`~stanlite.ArgumentError` naming the option); a Euclidean kernel
        takes none."""
        if options is not None:
            from stanlite.errors import ArgumentError
            raise ArgumentError(f"sampler_options are for sampler='rhmc', not "
                                f"{self.name!r}")
        return None

    def transition(self):
        """The step function ``step(model, metric, z, eps, rng, max_depth)``."""
        raise NotImplementedError

    def init(self, dim, metric, inv_metric, options):
        """A new chain's ``(metric object, metric kind, adapts at window ends)``
        from the settings (nutpie's adaptation has set ``metric``/``inv_metric``
        already: :func:`.chain.initialize`)."""
        from .hamiltonian import make_metric
        return make_metric(metric, dim, inv_metric), metric, True

    def live(self, dim, state):
        """``(metric, step)`` of a chain from its state's ``metric`` and ``inv_metric``
        (:class:`.chain._Live`; the fields a kernel reads:
        :class:`stanlite.chain_state.ChainState`)."""
        from .hamiltonian import make_metric
        return make_metric(state.metric, dim, state.inv_metric), self.transition()

    def live_fields(self, live, warm):
        """The kernel's own fields of the chain's state after an iteration (``warm``:
        a warmup one), committed with it (:func:`.chain._live_fields`); a Euclidean
        kernel keeps nothing of its own."""
        return {}

    def window_end(self, model, state, live, last=False):
        """The metric after a slow window of Stan's warmup ends (``last``: the
        last one): the window's regularised variances (the Welford accumulator
        restarts). None would keep the metric and the step size's averaging."""
        from .hamiltonian import make_metric
        inv = live.welford.regularized()
        live.welford.restart()
        return make_metric(state.metric, model.dim, inv)

    def adapt_stepsize(self, live, info, eps):
        """The next warmup step size after a transition at ``eps`` that reported
        ``info``: Stan's dual averaging (``live.da``) on its acceptance statistic."""
        return live.da.update(info.accept_stat)

    def final_stepsize(self, da):
        """The step size sampling uses, from warmup's dual averaging ``da``:
        Stan's, its average."""
        return da.final()


class Nuts(Kernel):
    """The No-U-Turn sampler (Stan's multinomial NUTS, :mod:`.nuts`); with the
    model's gradient in the compiled interpreter its iterations run in compiled
    segments (:mod:`.nuts_jit`)."""

    name = "nuts"
    segments = True

    def transition(self):
        from . import nuts
        # one per chain, with the chain's own workspace; without its own errstate:
        # chain.run sets it once for the whole run
        return nuts.ChainTransition()


class StaticHmc(Kernel):
    """Static HMC (Stan's ``static_hmc``, :mod:`.static_hmc`)."""

    name = "hmc"

    def transition(self):
        from .static_hmc import static_hmc
        return static_hmc


class SoftAbsNuts(Kernel):
    """Riemannian HMC with the SoftAbs metric of the local Hessian (:mod:`.rhmc`):
    NUTS trajectories, or static ones (``sampler_options["num_steps"]``). No
    Euclidean metric: warmup adapts the step size and, when ``alpha`` is "auto",
    SoftAbs's alpha (after every transition until the first window's end, then at
    the ends of Stan's windows), and when ``min_int_time`` is "auto", the
    trajectories' floor at the windows' ends."""

    name = "rhmc"
    euclidean = False

    @property
    def default_adapt_delta(self):
        # (importing rhmc costs ~20 ms: only when this sampler is asked for)
        from .rhmc import ADAPT_DELTA
        return ADAPT_DELTA

    def check_options(self, options):
        from .rhmc import check_options
        return check_options(options)

    def init(self, dim, metric, inv_metric, options):
        # the options are the chain's own dict: make_kernel keeps the chosen alpha
        # in it, so that a resumed chain uses the same metric
        from .rhmc import make_kernel
        met = make_kernel(dim, options)[0]
        return met, "softabs", met.adapts_alpha or met.adapts_floor

    def live(self, dim, state):
        # (from the state's sampler_options, with the alpha chosen in warmup; the
        # metric writes what it chooses into its own copy, which the chain commits
        # with the iteration - live_fields - so that an interrupted iteration leaves
        # the state's options as they were)
        from .rhmc import make_kernel
        opts = None if state.sampler_options is None else dict(state.sampler_options)
        met, kern = make_kernel(dim, opts)
        met.options = opts
        met.restore_adaptation(state.kernel_adapt)
        # a chain resumed past its first window's end: alpha no longer follows it;
        # nor in a warmup too short for windows (under 20 iterations), whose last
        # transitions would otherwise move alpha and restart the step size's
        # averaging just before sampling fixes it
        ends = state.window_ends
        met.follows = bool(ends) and state.iteration <= min(ends)
        met.floor_noted = not ends or state.iteration <= max(ends)
        return met, kern

    def live_fields(self, live, warm):
        # the options with the chosen alpha and floor; in warmup, what the
        # adaptation has gathered (SoftAbsMetric.adaptation_state)
        met = live.metric
        new = {} if met.options is None else {"sampler_options": dict(met.options)}
        if warm and (met.adapts_alpha or met.adapts_floor):
            new["kernel_adapt"] = met.adaptation_state()
        return new

    def window_end(self, model, state, live, last=False):
        # alpha from the warmup's Hessians (rhmc.py), except at the last window's
        # end: a new alpha there would restart the step size's averaging for the
        # 50 iterations of the term buffer only, and where the final step size then
        # lands decides the sampling phase's failed implicit steps (measured on the
        # banana: final step sizes 0.028-0.052 between four chains of one run).
        # Kept, the averaging runs over the whole last window (rhmc.py). A warmup
        # with one window (under 200 iterations) adapts alpha there: once.
        # The trajectory floor (min_int_time "auto") likewise, and for the same
        # reason not at the last end: longer trajectories lower the acceptance at a
        # given step size, so the step size must be averaged under the floor that
        # sampling uses.
        met = live.metric
        met.follows = False     # from here alpha changes at window ends only
        if last and len(live.ends) > 1:
            met.floor_noted = False         # nothing reads the floor's sums any more
            return None
        if met.adapts_alpha:
            met.adapt_alpha()
        if met.adapts_floor:
            met.adapt_min_int_time()
        return met

    def adapt_stepsize(self, live, info, eps):
        # a transition whose implicit step was too large (cured by substeps) lowers
        # the step size by the factor the substeps needed at most (rhmc.py); and
        # until the first window's end alpha follows the chain's samples (warmup
        # only: this runs in warmup alone; SoftAbsMetric.follow)
        from .rhmc import FOLLOW_RESTART, adapt_stepsize
        met = live.metric
        eps = adapt_stepsize(live.da, met, info, eps)
        if not (met.adapts_alpha and met.follows):
            return eps              # (a window's end restarts the averaging itself)
        if met.da_alpha is None:
            met.da_alpha = met.alpha        # the alpha the step size is adapted for
        alpha = met.follow()
        if max(alpha / met.da_alpha, met.da_alpha / alpha) > FOLLOW_RESTART:
            # a new metric, as at a window's end: the step size the averaging has
            # learnt is for the old one, and at adapt_delta 0.99 it climbs back by a
            # few percent a transition (SoftAbsMetric.follow); restarted, its first
            # proposal is ten times the current step (Stan's)
            live.da.restart(eps)
            met.da_alpha = alpha
        return eps

    def final_stepsize(self, da):
        from .rhmc import final_stepsize
        return final_stepsize(da)


#: sampler name -> kernel: the only place that knows the names
KERNELS = {k.name: k for k in (Nuts(), StaticHmc(), SoftAbsNuts())}
#: the names ``sampler=`` accepts, in the order error messages list them
NAMES = tuple(KERNELS)


def kernel(name):
    """The kernel ``sampler=name`` runs (a KeyError for an unknown name: the front
    door has checked it, :mod:`.settings`)."""
    return KERNELS[name]
