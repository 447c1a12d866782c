"""A distribution family declared once: its arguments with their constraints, its
kernels, its draws and its docs; the public functions are generated from that.

A family module writes, for each family, one declaration in the style of NumPyro's
``arg_constraints`` and Stan's named ``check_*`` functions::

    lognormal_lpdf, lognormal_lcdf, lognormal_lccdf, lognormal_rng = family(
        "lognormal", (("y", NONNEGATIVE), ("mu", FINITE), ("sigma", POSITIVE)),
        lpdf=_lognormal, lcdf=_lognormal_cdf(True), lccdf=_lognormal_cdf(False),
        rng="lognormal",
        doc=..., lcdf_doc=..., lccdf_doc=..., rng_doc=...)

and gets back the functions it declared, in the order lpdf (lpmf), lcdf, lccdf, rng
(those given). What is generated:

* the **argument checks**: a constraint is a check ``c(fn, arg, x)`` of
  :mod:`.fused` (``FINITE``, ``POSITIVE``, ... or one of the factories below), run on
  the plain values in argument order and raising
  :class:`~stanlite.errors.DomainError` with the function's and the argument's name
  (``lognormal_lpdf: sigma must be positive and finite, but is -1.0``). Checks that
  relate two arguments (``beta > alpha``) are ``relations``: ``r(fn, *values)``, run
  after the per-argument ones. The CDFs may constrain the outcome differently
  (``cdf_args``), the draws their parameters (``rng_args``);
* the **fused nodes** (:func:`.fused.fused`): the kernel, run under
  ``np.errstate`` when the family's kernels rely on IEEE ends (``quiet``: log 0,
  1/0), and made to return a plain float when nothing is traced (``as_float``);
* the **draws** ``<name>_rng(*params, rng=None)``: the parameters are checked, then
  ``sampler(g, *params, size)`` runs on the generator (:func:`.rng.draw`: traced
  values stripped, the broadcast shape, a 0-d result as a Python scalar; a string
  names the Generator's own method, ``rng="normal"`` is ``g.normal(*params, size)``;
  ``post`` maps the result, e.g. to integers);
* the **signatures and docs** (help() shows ``(y, mu, sigma, /, *, reduce=True)``).

The argument checks are closures of fixed arity (no loop over the arguments): they run
on every evaluation of a density, so they cost what the hand-written ones did.
"""

import functools
import inspect

import numpy as np

from ..autodiff.var import Box as _Box, value_of
from .fused import (check_finite, check_in_range, check_integer, check_nonnegative,
                    check_not_nan, check_positive, check_probability, fused)
from .rng import as_generator, draw

__all__ = ["family", "make_check", "FINITE", "POSITIVE", "NONNEGATIVE", "NOT_NAN",
           "PROBABILITY", "in_range", "integer", "all_of"]

FINITE = check_finite
POSITIVE = check_positive              # > 0 and finite
NONNEGATIVE = check_nonnegative        # >= 0 (inf allowed)
NOT_NAN = check_not_nan
PROBABILITY = check_probability        # in [0, 1]


def in_range(lo, hi):
    """The constraint ``lo <= x <= hi``."""
    def check(fn, arg, x):
        check_in_range(fn, arg, x, lo, hi)
    return check


def integer(lower=None):
    """The constraint "integer-valued" (optionally ``>= lower``)."""
    def check(fn, arg, x):
        check_integer(fn, arg, x, lower)
    return check


def all_of(*constraints):
    """Each of ``constraints`` in turn (the first failing one names the problem)."""
    def check(fn, arg, x):
        for c in constraints:
            c(fn, arg, x)
    return check


# --------------------------------------------------------------------------------------
# argument checks of fixed arity
# --------------------------------------------------------------------------------------
def _check1(fn, c0, a0):
    def check(x0):
        c0(fn, a0, x0)
    return check


def _check2(fn, c0, a0, c1, a1):
    def check(x0, x1):
        c0(fn, a0, x0)
        c1(fn, a1, x1)
    return check


def _check3(fn, c0, a0, c1, a1, c2, a2):
    def check(x0, x1, x2):
        c0(fn, a0, x0)
        c1(fn, a1, x1)
        c2(fn, a2, x2)
    return check


def _check4(fn, c0, a0, c1, a1, c2, a2, c3, a3):
    def check(x0, x1, x2, x3):
        c0(fn, a0, x0)
        c1(fn, a1, x1)
        c2(fn, a2, x2)
        c3(fn, a3, x3)
    return check


_FIXED = {1: _check1, 2: _check2, 3: _check3, 4: _check4}


def make_check(fn, args, relations=(), params=None, fast=None):
    """The argument check of function ``fn``: ``args`` are ``(name, constraint)``
    pairs in argument order (``constraint`` None: unchecked); ``relations`` are checks
    ``r(fn, *values)`` run after them, or ``(k, r)`` to run ``r`` after the first ``k``
    arguments' checks (the order decides which fault is reported first); ``fast``:
    ``fast(check) -> check`` puts a hot case first (one plain scalar term, certainly
    valid: return at once, else ``check``); ``params``: the Python parameter names
    (for the signature; by default the names, which Stan's ``lambda`` cannot be)."""
    names = [a for a, _ in args]
    checks = [c for _, c in args]
    if params is None:
        params = names
    make = _FIXED.get(len(args))
    pairs = [x for pair in zip(checks, names) for x in pair]
    if make is not None and None not in checks and not relations:
        check = make(fn, *pairs)
    else:
        n = len(args)
        steps = [(i, c, a) for i, (a, c) in enumerate(args) if c is not None]
        for r in relations:
            k, r = r if isinstance(r, tuple) else (n, r)
            steps.append((k - 0.5, r, None))            # after argument k - 1
        steps = tuple((c, a, None if a is None else i)
                      for i, c, a in sorted(steps, key=lambda t: t[0]))

        def check(*vals):
            if len(vals) != n:      # (the density names its own signature)
                raise TypeError(f"{fn} takes {n} arguments, got {len(vals)}")
            for c, a, i in steps:
                if i is None:
                    c(fn, *vals)
                else:
                    c(fn, a, vals[i])
    if fast is not None:
        check = fast(check)
    # the parameter names of the density (read by fused.parameter_names)
    check.__signature__ = inspect.Signature(
        [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params])
    check.__qualname__ = f"{fn}.check"
    return check


# --------------------------------------------------------------------------------------
# the fused nodes
# --------------------------------------------------------------------------------------
def _quiet(kernel):
    def quiet(need, *args):
        # the ends of the supports (log 0, 1/0) are handled: no numpy warnings there
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return kernel(need, *args)
    return quiet


def _as_float(kernel):
    def k(need, *args):
        lp, parts = kernel(need, *args)
        return (lp if isinstance(lp, _Box) else float(lp)), parts
    return k


def _node(name, kernel, check, doc, quiet, as_float, nondiff):
    k = kernel
    if quiet:
        k = _quiet(k)
    if as_float:
        k = _as_float(k)
    if k is not kernel:
        k.__doc__ = kernel.__doc__
        k.__module__ = kernel.__module__        # the density's module (doctests, pickling)
    return fused(name, k, check, nondiff=nondiff, doc=doc)


# --------------------------------------------------------------------------------------
# draws
# --------------------------------------------------------------------------------------
_UNSET = object()


def _make_rng(name, args, sampler, doc, post, module, params, relations, arrays):
    check = make_check(name, args, relations, params)
    n = len(args)
    sig = inspect.Signature(
        [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params]
        + [inspect.Parameter("rng", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)])

    def generated(*vals, rng=_UNSET, **kw):
        # the common calls (parameters positional, ``rng=`` by keyword) take no binding
        if kw or len(vals) != n:
            if rng is not _UNSET:
                kw["rng"] = rng
            try:
                bound = sig.bind(*vals, **kw)
            except TypeError as e:
                raise TypeError(f"{name}(): {e}") from None
            bound.apply_defaults()
            *vals, rng = bound.args
        elif rng is _UNSET:
            rng = None
        if arrays:
            # the sampler broadcasts float arrays itself (numpy's own size)
            vals = [np.asarray(value_of(v), dtype=float) for v in vals]
            check(*vals)
            out = sampler(as_generator(rng), *vals)
        elif type(sampler) is str:
            check(*vals)
            out = draw(getattr(as_generator(rng), sampler), *vals)
        else:
            check(*vals)
            out = draw(functools.partial(sampler, as_generator(rng)), *vals)
        return out if post is None else post(out)

    generated.__name__ = generated.__qualname__ = name
    generated.__module__ = module
    generated.__doc__ = doc
    generated.__signature__ = sig
    return generated


# --------------------------------------------------------------------------------------
# the declaration
# --------------------------------------------------------------------------------------
def family(name, args, *, lpdf=None, lpmf=None, lcdf=None, lccdf=None, rng=None, doc=None,
           lcdf_doc=None, lccdf_doc=None, rng_doc=None, cdf_args=None, rng_args=None,
           relations=(), params=None, kind="lpdf", quiet=False, as_float=False,
           nondiff=(), rng_post=None, rng_params=None, rng_relations=(),
           rng_arrays=False, cdf_relations=None, fast=None, cdf_fast=None):
    """Declare the family ``name`` and return its public functions (see module doc).

    ``args``: ``(name, constraint)`` pairs of the density's arguments, outcome first
    (constraint None: unchecked); ``cdf_args``: ``{name: constraint}`` changes for the
    CDFs; ``rng_args``: the draw's ``(name, constraint)`` pairs (default: ``args``
    without the outcome); ``params``: the Python parameter names where a Stan name is
    a keyword (``lam`` for ``lambda``; ``rng_params`` those of the draw);
    ``relations`` (``cdf_relations`` for the CDFs if they differ), ``fast`` and
    ``cdf_fast``: see :func:`make_check`; ``rng_relations``: checks
    ``r(fn, *params)`` of the draw; ``rng_arrays``: the draw's parameters become float
    arrays before the check and ``sampler(g, *params)`` broadcasts them itself;
    ``kind``: ``"lpdf"`` or ``"lpmf"`` (the kernel then given as ``lpmf=``);
    ``nondiff``: argument positions never traced (integer outcomes).

    A toy family, log N(y | 0, sigma) with its kernel's value and partials
    (d/dy = -y/sigma^2, d/dsigma = (y^2/sigma^2 - 1)/sigma):

    >>> import math, stanlite as sl
    >>> from stanlite.distributions.family import family, FINITE, POSITIVE
    >>> def _toy(need, y, sigma):
    ...     z = y / sigma
    ...     lp = -0.5 * z * z - sl.log(sigma) - 0.5 * math.log(2 * math.pi)
    ...     return lp, [-z / sigma if need[0] else None,
    ...                 (z * z - 1.0) / sigma if need[1] else None]
    >>> toy_lpdf, toy_rng = family(
    ...     "toy", (("y", FINITE), ("sigma", POSITIVE)), lpdf=_toy, as_float=True,
    ...     rng=lambda g, sigma, size: g.normal(0.0, sigma, size))
    >>> round(toy_lpdf(1.0, 2.0), 6), round(sl.grad(lambda s: toy_lpdf(1.0, s))(2.0), 6)
    (-1.737086, -0.375)
    >>> toy_lpdf(1.0, -2.0)
    Traceback (most recent call last):
    ...
    stanlite.errors.DomainError: toy_lpdf: sigma must be positive and finite, but is -2.0
    >>> toy_rng(-1.0)
    Traceback (most recent call last):
    ...
    stanlite.errors.DomainError: toy_rng: sigma must be positive and finite, but is -1.0
    """
    if lpmf is not None:                # a mass function: the same slot
        lpdf = lpmf
    out = []
    module = None
    cdf = [(a, (cdf_args or {}).get(a, c)) for a, c in args]
    cdf_rel = relations if cdf_relations is None else cdf_relations
    for suffix, kernel, fdoc, fargs, rel, fst in (
            (kind, lpdf, doc, args, relations, fast),
            ("lcdf", lcdf, lcdf_doc, cdf, cdf_rel, cdf_fast),
            ("lccdf", lccdf, lccdf_doc, cdf, cdf_rel, cdf_fast)):
        if kernel is None:
            continue
        fn = f"{name}_{suffix}"
        check = make_check(fn, fargs, rel, params, fst)
        out.append(_node(fn, kernel, check, fdoc, quiet, as_float, nondiff))
        module = kernel.__module__
    if rng is not None:
        if rng_args is None:
            rng_args = args[1:]
        if rng_params is None:
            rng_params = [a for a, _ in rng_args] if params is None else params[1:]
        out.append(_make_rng(f"{name}_rng", rng_args, rng, rng_doc, rng_post,
                             module or rng.__module__, list(rng_params), rng_relations,
                             rng_arrays))
    return tuple(out)


def cdf_doc(dist, what, tail):
    """The docstring of a family's CDF (``tail``: ``"lcdf"`` or ``"lccdf"``) that needs no
    example of its own."""
    kind = "cumulative distribution function" if tail == "lcdf" else \
        "complementary CDF (1 - CDF)"
    return (f"Log of the {dist} {kind}, summed over elements: {what}.\n\n"
            f"    Same arguments, parameterisation and checks as ``{dist}_lpdf``.\n    ")


def rng_doc(dist, how):
    """The docstring of a family's draws."""
    return (f"Draws from {dist} ({how}), shaped like the broadcast of the parameters; "
            "``rng``: a Generator, a seed or None.")

