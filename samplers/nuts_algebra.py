"""The decisions of a NUTS transition, written once for both trees.

:mod:`.nuts` (the Python tree) calls these functions as they are; :mod:`.nuts_jit`
(the compiled tree) calls the same source, which numba compiles and inlines where
it is called (``register_jitable``). They work on scalars only: the vectors -
momenta, the sums ``rho`` of a subtree's momenta - stay with each tree, which
computes the dot products its own way (numpy's in Python, index-ordered sums when
compiled) and hands them, or the sums they enter, here. The algorithm is the one
described in :mod:`.nuts`:

* :func:`energy_error` - the statistics of one new state: a divergence when
  ``H - H0`` exceeds ``max_delta_h``, the acceptance statistic's running sum, the
  largest energy error;
* :func:`multinomial` - which of two adjacent runs of states (subtrees) gives the
  proposal of their union, in proportion to their weights;
* :func:`progressive` - biased progressive sampling at the top of the tree;
* :func:`no_uturn`, :func:`merge_no_uturn` - the generalised U-turn criterion,
  and the three checks of a merge (Stan's two extra ones across its seam).

A U-turn summary of a run of states carries, besides ``rho``, its end states'
``k = v . p`` and ``d = v . rho`` at both ends (``v`` the velocity, ``p`` itself in
the whitened momentum). By linearity every check of a merge of ``a`` (built first)
and ``b`` is one of those scalars plus one dot product, e.g.
``v_a_beg . (rho_a + rho_b) = d_a_beg + v_a_beg . rho_b``.
"""

import math

from stanlite.config import switched_off

__all__ = ["log_sum_exp", "energy_error", "multinomial", "progressive", "no_uturn",
           "merge_no_uturn"]

try:
    if switched_off("STANLITE_JIT"):
        raise ImportError("disabled by STANLITE_JIT")
    from numba.extending import register_jitable
    # each function stays the plain Python function (what the Python tree calls, at
    # a Python call's cost) and numba compiles the same source wherever compiled
    # code calls it, inlined there
    _jitable = register_jitable(inline="always")
except ImportError:
    _jitable = (lambda f: f)


@_jitable
def log_sum_exp(a, b):
    """``log(e^a + e^b)``; every log weight of a tree is finite (a state with an
    infinite energy is a divergence, never merged)."""
    if a > b:
        return a + math.log1p(math.exp(b - a))
    return b + math.log1p(math.exp(a - b))


@_jitable
def energy_error(err, sum_metro, max_abs, max_err, max_delta_h):
    """A new state with energy error ``err = H - H0`` (``inf`` for a failed step):
    ``(divergent, sum_metro, max_abs, max_err)`` - whether it diverged, and the
    running sum of ``min(1, exp(-err))`` (``accept_stat``'s; a divergent state is
    not counted), the largest ``|err|`` and that error with its sign."""
    if err > 0.0:
        if err > max_abs:
            max_abs = max_err = err
        if err > max_delta_h:
            return True, sum_metro, max_abs, max_err
        sum_metro += math.exp(-err)
    else:
        sum_metro += 1.0
        if -err > max_abs:
            max_abs, max_err = -err, err
    return False, sum_metro, max_abs, max_err


@_jitable
def multinomial(lw_first, lw_second, u):
    """The union of two adjacent subtrees with log weights ``lw_first`` (built
    first) and ``lw_second``: ``(its log weight, whether its proposal is the first
    subtree's)``. The second's is kept with probability ``W_second / W_union``
    (``u`` a uniform on [0, 1))."""
    lw = log_sum_exp(lw_second, lw_first)
    return lw, u >= math.exp(lw_second - lw)


@_jitable
def progressive(log_w, lw_sub):
    """Biased progressive sampling of a new top-level subtree (log weight ``lw_sub``)
    against the trajectory so far (``log_w``): ``(sure, p)`` - its proposal replaces
    the sample if ``sure``, else with probability ``p`` (``min(1, W_sub / W_old)``,
    favouring states far from the start). A uniform is drawn only when not sure."""
    if lw_sub > log_w:
        return True, 1.0
    # (only here: exp of a large positive difference would overflow)
    return False, math.exp(lw_sub - log_w)


@_jitable
def no_uturn(v_beg_rho, v_end_rho):
    """The generalised criterion: a run of states goes on while the velocities at
    both its ends point along its summed momentum ``rho`` (``v . rho > 0``)."""
    return v_beg_rho > 0.0 and v_end_rho > 0.0


@_jitable
def merge_no_uturn(union_beg, union_end, a_b1_beg, a_b1_end, an_b_beg, an_b_end):
    """Whether subtree ``a`` followed by ``b`` goes on: Stan's three checks (2.21+),
    each :func:`no_uturn` of a run of states, given as ``v . rho`` at the run's two
    ends - the union ``a + b``; ``a`` extended by ``b``'s first state ``b1``; ``b``
    extended by ``a``'s last state ``an``. The last two catch U-turns that straddle
    the seam between the halves. (The callers compute the six products by
    linearity from the subtrees' summaries: module docstring.)"""
    return (no_uturn(union_beg, union_end) and no_uturn(a_b1_beg, a_b1_end)
            and no_uturn(an_b_beg, an_b_end))
