"""The plain-data state of one Markov chain: what a fit stores and a resumed run continues.

The samplers (``stanlite.samplers.chain``) fill and advance it; a
:class:`~stanlite.fit.Fit` keeps one per chain and rebuilds them from a saved file
(``sl.load_fit``). It lives here, below both, so that the fits need not import the
samplers (docs/architecture.md); ``stanlite.samplers.chain.ChainState`` is this class.

>>> s = ChainState(chain_id=0, iteration=3, num_warmup=2, num_draws=1)
>>> s.done, ChainState.from_dict(s.to_dict()).iteration
(True, 3)
>>> s
ChainState(chain_id=0, iteration=3 of 2 + 1, sampler=None)
"""

import dataclasses
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ChainState"]


# Why a dataclass with a __dict__ (no slots, no freezing): the chain commits an
# iteration by one ``state.__dict__.update(new)`` (samplers/chain.py), so that a
# KeyboardInterrupt leaves the state before or after an iteration, never between its
# fields; the per-iteration cost of that commit is what it was with the keyword bag
# (benchmarks: the loop's ~6 us per transition). tests/samplers/test_chain_state.py
# checks that the chain writes only the fields declared here.
@dataclass(eq=False, repr=False, kw_only=True)
class ChainState:
    """The complete, plain-data state of one chain (see
    :mod:`stanlite.samplers.chain`'s docstring): numbers, arrays, lists and dicts
    (picklable, savable as a fit's file).

    Who reads and writes what:

    - the chain (``samplers/chain.py``) makes it (``initialize``) and is the only
      writer while a chain runs: all fields but ``interrupted`` and ``elapsed``, each
      committed iteration (or compiled segment of iterations) in one update;
    - the kernels (``samplers/kernels.py``) never write it: ``Kernel.init`` gives
      ``metric``/``inv_metric`` of a new chain (the Riemannian kernel keeps its chosen
      alpha in the chain's own ``sampler_options`` dict); ``Kernel.live`` rebuilds
      the metric from ``metric`` and ``inv_metric`` (Euclidean) or from
      ``sampler_options`` and ``kernel_adapt`` (Riemannian: ``Kernel.live_fields``
      gives the chain what it commits of these); ``Kernel.window_end`` reads
      ``metric``. A
      transition sees none of it, only the chain's live point, step size and
      generator;
    - the runner (``samplers/runner.py``) writes ``interrupted`` and ``elapsed``;
    - a fit reads the draws, statistics and diagnostics fields; resuming reads
      the settings fields back (``resume_from=``).

    The first eight fields are what every saved state has (a fit's file is checked
    for them: ``fit_file._checked_state``); the others default to what a state
    written before they existed means (``None``: not recorded).

    Which chain, how far, how long: ``chain_id`` (0-based; its generated
    quantities' seed is ``fit.gq_seeds[chain_id]``), ``iteration`` (those completed,
    warmup included: the next one to run), ``num_warmup``, ``num_draws`` (sampling
    iterations, before thinning).

    The draws so far, appended by each committed iteration: ``draws`` (the kept
    draws, unconstrained, one 1-D float array each), ``stats`` (``{name: [value per
    kept draw]}`` with the names of ``samplers.chain.STAT_NAMES``, Stan's ``lp__``,
    ...), ``warmup_draws`` and ``warmup_stats`` (the same of warmup, with
    ``save_warmup``; else empty).

    The run's settings (``settings.ChainSettings``'s, fixed for the chain): ``thin``,
    ``save_warmup``, ``sampler`` (a key of ``samplers.kernels.KERNELS``), ``metric``
    (its kind: "unit_e", "diag_e", "dense_e" or "softabs"), ``adapt`` (whether warmup
    adapts), ``adapt_delta``, ``max_treedepth``, ``adaptation`` ("stan": windowed
    variances; "nutpie" / "nutpie-lowrank": ``grad_adapt``), ``sampler_options``
    (the Riemannian kernel's, the chain's own copy: with ``alpha="auto"`` the chosen
    alpha is kept there; None for the others), ``window_ends`` (the warmup
    iterations, 0-based, where a slow window of Stan's adaptation ends; empty when
    nothing adapts at windows), ``init_buffer`` and ``term_buffer`` (Stan's, as
    fitted to ``num_warmup``).

    Where the chain is: ``q`` (unconstrained), ``lp`` and ``grad`` (its log density
    and gradient), ``rng_state`` (the generator's bit state after the last committed
    iteration, ``PCG64().state``).

    Adaptation: ``stepsize`` (the next iteration's; after warmup the adapted one),
    ``stepsize_initialized`` (whether Stan's step-size search before the first
    iteration was made), ``inv_metric`` (now: a vector for diag_e/unit_e, a matrix
    for dense_e; for softabs the starting one, not used again), ``da`` (the step
    size's dual averaging, ``{"counter", "s_bar", "x_bar", "mu", "delta"}``),
    ``welford`` (the current window's running variances, ``Welford.to_dict()``),
    ``grad_adapt`` (nutpie's adaptation, ``GradientAdaptation.to_dict()``, or None),
    ``kernel_adapt`` (the Riemannian kernel's warmup adaptation of alpha and the
    trajectory floor, ``SoftAbsMetric.adaptation_state()``, or None).

    Diagnostics: ``n_rejected`` (integrator steps whose log density failed, warmup
    included), ``rejections`` (``{reason: count}`` of those,
    ``hamiltonian.rejection_reason``), ``rejected_draws`` (indices into ``draws`` of
    the kept draws that ended at a rejected proposal).

    The runner's: ``interrupted`` (whether the chain stopped before its end: Ctrl-C,
    a stop event), ``elapsed`` (seconds the chain has run, all its runs together).
    """

    # which chain, how far, how long
    chain_id: int
    iteration: int
    num_warmup: int
    num_draws: int
    # the draws so far
    draws: list = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    warmup_draws: list = field(default_factory=list)
    warmup_stats: dict = field(default_factory=dict)
    # the run's settings
    thin: int = 1
    save_warmup: bool = False
    sampler: str | None = None
    metric: str | None = None
    adapt: bool | None = None
    adapt_delta: float | None = None
    max_treedepth: int | None = None
    adaptation: str = "stan"
    sampler_options: dict | None = None
    window_ends: list | None = None
    init_buffer: int | None = None
    term_buffer: int | None = None
    # where the chain is
    q: Any = None
    lp: float | None = None
    grad: Any = None
    rng_state: dict | None = None
    # adaptation
    stepsize: float | None = None
    stepsize_initialized: bool | None = None
    inv_metric: Any = None
    da: dict | None = None
    welford: dict | None = None
    grad_adapt: dict | None = None
    kernel_adapt: dict | None = None
    # diagnostics
    n_rejected: int | None = None
    rejections: dict | None = None
    rejected_draws: list | None = None
    # the runner's
    interrupted: bool = False
    elapsed: float = 0.0

    def to_dict(self):
        """The fields as a dict (no copies), with any attribute set beyond them."""
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d):
        """The state of a dict (``to_dict``'s, or a saved fit's). A key that is not a
        field - one an older version wrote, such as ``gq_seed`` - is kept as an
        attribute, so that a state saved again keeps it."""
        known = _FIELDS.intersection(d)
        state = cls(**{k: d[k] for k in known})
        if len(known) != len(d):
            state.__dict__.update((k, v) for k, v in d.items() if k not in known)
        return state

    @property
    def done(self):
        return self.iteration >= self.num_warmup + self.num_draws

    def __repr__(self):
        # (the generated one would print every draw)
        return (f"ChainState(chain_id={self.chain_id}, iteration={self.iteration} of "
                f"{self.num_warmup} + {self.num_draws}, sampler={self.sampler!r})")


_FIELDS = frozenset(f.name for f in dataclasses.fields(ChainState))
