"""The plain-data state of one Markov chain: what a fit stores and a resumed run continues.

The samplers (``stanlite.samplers.chain``) fill and advance it; a
:class:`~stanlite.fit.Fit` keeps one per chain and rebuilds them from a saved file
(``sl.load_fit``). It lives here, below both, so that the fits need not import the
samplers (docs/architecture.md); ``stanlite.samplers.chain.ChainState`` is this class.

>>> s = ChainState(iteration=3, num_warmup=2, num_draws=1)
>>> s.done, ChainState.from_dict(s.to_dict()).iteration
(True, 3)
"""

__all__ = ["ChainState"]


class ChainState:
    """The complete, plain-data state of one chain (see
    :mod:`stanlite.samplers.chain`'s docstring): numbers, arrays, lists and dicts
    (picklable, savable)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def to_dict(self):
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d):
        return cls(**d)

    @property
    def done(self):
        return self.iteration >= self.num_warmup + self.num_draws
