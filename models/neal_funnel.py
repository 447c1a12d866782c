"""Neal's funnel."""

import stanlite as sl

__all__ = ["NealFunnel"]


class NealFunnel(sl.Model):
    r"""Neal's funnel (Neal 2003, "Slice sampling", §8), in dimension D (10 by default).

    .. math::

        v \sim \mathrm{N}(0, 3), \qquad
        x_i \sim \mathrm{N}(0, e^{v/2}), \quad i = 1..D-1.

    Parameters: ``v``, ``x`` (D - 1). No observations: the only datum is ``D``
    (``models/data/neal_funnel.json``: D = 10). The neck (v << 0) defeats a single
    step size: a test of divergence reporting and of Riemannian HMC. The marginal of
    ``v`` is known exactly, N(0, 3); each ``x_i`` is a heavy-tailed scale mixture of
    normals with mean 0.

    Source: R. M. Neal, "Slice sampling", Annals of Statistics 31 (2003), §8 (the
    funnel of dimension 10); also the Stan User's Guide, "Reparameterization".
    """

    D = sl.data.int(lower=2)

    v = sl.param.real()
    x = sl.param.vector(lambda D: D - 1)

    def log_prob(self, v, x):
        return sl.normal_lpdf(v, 0, 3) + sl.normal_lpdf(x, 0, sl.exp(v / 2))
