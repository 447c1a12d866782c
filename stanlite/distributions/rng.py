"""Random draws for generated quantities (``<name>_rng``): plain numpy, no AD.

``rng`` may be a ``numpy.random.Generator`` (what a model's ``generated_quantities``
receives), an int seed, or ``None`` (fresh entropy). Results have the broadcast shape
of the parameters; a 0-d result is a Python float (or int for discrete draws).
"""

import numpy as np

from ..autodiff.var import value_of

__all__ = ["as_generator", "draw"]


def as_generator(rng):
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(rng)


def draw(sampler, *params, size=None):
    """``sampler(*params, size=broadcast shape)`` with traced values stripped."""
    params = [np.asarray(value_of(p), dtype=float) for p in params]
    if size is None and params:
        size = np.broadcast_shapes(*[p.shape for p in params])
    out = sampler(*params, size=size) if params else sampler(size=size)
    out = np.asarray(out)
    if out.ndim == 0:
        return out.item()
    return out
