"""A run's sampling settings: one frozen object, checked once when it is made.

``model.sample(...)`` (:mod:`stanlite.inference`) makes one :class:`ChainSettings`
from the user's arguments; the runner hands it to every chain
(:func:`.chain.initialize`), which copies the fields into the chain's state (the
state is what a fit saves and a resumed run continues, so its fields keep their
names). Nothing downstream checks an option again or spells the list out again.

Every check raises :class:`~stanlite.ArgumentError` naming the argument as the user
spelled it (``draws``, not ``num_draws``), with the messages of
:mod:`stanlite.arguments`; the sampler's name, its default ``adapt_delta`` and its
``sampler_options`` come from the kernel registry (:mod:`.kernels`).

>>> s = ChainSettings(num_warmup=10, num_draws=5, sampler="hmc",
...                   adapt_delta=SAMPLER_DEFAULT)
>>> s.sampler, s.adapt_delta, s.metric
('hmc', 0.8, 'diag_e')
>>> ChainSettings(sampler="nust")
Traceback (most recent call last):
...
stanlite.errors.ArgumentError: sampler must be one of 'nuts', 'hmc', 'rhmc', got 'nust'; did you mean 'nuts'?
"""

import dataclasses
from typing import Any

from stanlite import arguments as A
from stanlite.errors import ArgumentError

from .adaptation import ADAPTATIONS
from .kernels import NAMES, kernel

__all__ = ["ChainSettings", "SAMPLER_DEFAULT"]


class _SamplerDefault:
    def __repr__(self):
        return "SAMPLER_DEFAULT"


#: ``adapt_delta=SAMPLER_DEFAULT``: the kernel's own (``None`` is a user's mistake)
SAMPLER_DEFAULT = _SamplerDefault()


@dataclasses.dataclass(frozen=True, eq=False)
class ChainSettings:
    """The validated options every chain of a run shares (their meanings:
    :func:`stanlite.inference.sample`). ``adapt_delta=SAMPLER_DEFAULT``: the
    sampler's own default. ``dim``: the model's number of unconstrained
    coordinates, against which ``inv_metric`` is checked (None: not checked; a
    chain made directly, in tests).
    ``adapt=False`` runs warmup without adaptation (a chain made directly)."""

    num_warmup: int = 1000
    num_draws: int = 1000
    thin: int = 1
    sampler: str = "nuts"
    metric: str = "diag_e"
    inv_metric: Any = None
    stepsize: float = 1.0
    adapt_delta: Any = 0.8
    max_treedepth: int = 10
    save_warmup: bool = False
    adapt: bool = True
    sampler_options: Any = None
    adaptation: str = "stan"
    dim: int | None = None

    def __post_init__(self):
        for name, value in self._checked().items():
            object.__setattr__(self, name, value)       # (frozen: set once, here)

    def _checked(self):
        """The fields normalised (ints, floats, the sampler's defaults filled in),
        each checked in the order the front door always checked them."""
        out = dict(num_draws=A.nonneg_int("draws", self.num_draws),
                   num_warmup=A.nonneg_int("warmup", self.num_warmup),
                   thin=A.positive_int("thin", self.thin))
        metric = A.choice("metric", self.metric, ("diag_e", "dense_e", "unit_e"))
        k = kernel(A.choice("sampler", self.sampler, NAMES))
        delta = k.default_adapt_delta if self.adapt_delta is SAMPLER_DEFAULT \
            else self.adapt_delta
        out["adapt_delta"] = A.unit_interval("adapt_delta", delta)
        # 2**30 leapfrog steps a transition is already past any useful run; the
        # trajectory workspace is sized by the depth, so a huge one fails here
        out["max_treedepth"] = A.integer("max_treedepth", self.max_treedepth, 1, 30)
        out["stepsize"] = A.positive_real("stepsize", self.stepsize)
        out["save_warmup"] = A.boolean("save_warmup", self.save_warmup)
        out["adapt"] = A.boolean("adapt", self.adapt)
        out["adaptation"] = _adaptation(self.adaptation, metric, k)
        if k.euclidean and self.dim is not None:
            # (the Riemannian metric is the local Hessian's: inv_metric is ignored)
            out["inv_metric"] = A.inv_metric("inv_metric", self.inv_metric, metric,
                                             self.dim)
        out["sampler_options"] = k.check_options(self.sampler_options)
        return out

    @property
    def kernel(self):
        """The sampler's kernel (:mod:`.kernels`)."""
        return kernel(self.sampler)

    def replace(self, **changes):
        """A copy with ``changes`` (checked again)."""
        return dataclasses.replace(self, **changes)


def _adaptation(adaptation, metric, k):
    """``adaptation`` checked against ``metric`` and the kernel: nutpie's adapts a
    diagonal metric (its low-rank variant a dense one, from ``diag_e`` or
    ``dense_e``), and not the Riemannian sampler's, which has no metric to adapt."""
    adaptation = A.choice("adaptation", adaptation, ADAPTATIONS)
    if adaptation == "stan":
        return adaptation
    if not k.euclidean:
        raise ArgumentError(f"adaptation={adaptation!r} adapts a Euclidean metric; "
                            f"sampler={k.name!r} follows the local Hessian and adapts "
                            "only the step size: leave adaptation out (or 'stan')")
    allowed = ("diag_e", "dense_e") if adaptation == "nutpie-lowrank" else ("diag_e",)
    if metric not in allowed:
        hint = " (adaptation='nutpie-lowrank' adapts a dense one)" \
            if metric == "dense_e" else ""
        raise ArgumentError(f"adaptation={adaptation!r} adapts metric "
                            f"{' or '.join(map(repr, allowed))}, got metric={metric!r}"
                            f"{hint}")
    return adaptation
