"""stanlite.distributions.family: what a declaration generates - the argument checks
(order of the faults reported, relations in their declared place, the fast predicate,
the CDFs' own constraints), the fused densities (value, gradient, signature, doc), the
draws (signature, positional or keyword rng, checked parameters, array mode) - on a
toy family, so that the generator is tested apart from the real families (whose
behaviour the other test files pin)."""

import inspect
import math

import numpy as np
import pytest

import stanlite as sl
from stanlite.distributions.family import (FINITE, NONNEGATIVE, NOT_NAN, POSITIVE,
                                           all_of, family, in_range, integer, make_check)


def _toy(need, y, mu, sigma):
    """log N(y | mu, sigma) with its partials."""
    z = (y - mu) / sigma
    lp = sl.sum(-0.5 * z * z - sl.log(sigma)) - 0.5 * math.log(2 * math.pi) * np.size(z)
    return lp, [-z / sigma if need[0] else None, z / sigma if need[1] else None,
                (z * z - 1.0) / sigma if need[2] else None]


def _mu_below_y(fn, y, mu, sigma):
    if np.any(np.asarray(mu) > np.asarray(y)):
        raise sl.DomainError(f"{fn}: mu must be <= y")


TOY = family("toy", (("y", NOT_NAN), ("mu", FINITE), ("sigma", POSITIVE)),
             lpdf=_toy, lcdf=_toy, lccdf=_toy, cdf_args={"y": NONNEGATIVE},
             as_float=True, rng="normal", doc="The toy density.",
             rng_doc="Toy draws.")


def test_declaration_returns_the_functions_in_order():
    lpdf, lcdf, lccdf, rng = TOY
    assert [f.__name__ for f in TOY] == ["toy_lpdf", "toy_lcdf", "toy_lccdf", "toy_rng"]
    assert lpdf.__doc__ == "The toy density." and rng.__doc__ == "Toy draws."
    assert lcdf.__doc__ == _toy.__doc__            # no doc given: the kernel's
    assert str(inspect.signature(lpdf)) == "(y, mu, sigma, /, *, reduce=True)"
    assert str(inspect.signature(rng)) == "(mu, sigma, rng=None)"


def test_value_and_gradient_come_from_the_kernel():
    lpdf = TOY[0]
    v = lpdf(0.3, 0.1, 1.2)
    assert type(v) is float
    assert v == pytest.approx(-0.5 * (0.2 / 1.2) ** 2 - math.log(1.2)
                              - 0.5 * math.log(2 * math.pi))
    g = sl.grad(lambda p: lpdf(0.3, p[0], p[1]))(np.array([0.1, 1.2]))
    z = 0.2 / 1.2
    np.testing.assert_allclose(g, [z / 1.2, (z * z - 1.0) / 1.2])


def test_checks_name_function_argument_and_value_in_argument_order():
    lpdf, lcdf = TOY[0], TOY[1]
    with pytest.raises(sl.DomainError, match=r"^toy_lpdf: sigma must be positive and "
                                             r"finite, but is -1\.0$"):
        lpdf(0.0, 0.0, -1.0)
    with pytest.raises(sl.DomainError, match=r"^toy_lpdf: mu must be finite"):
        lpdf(0.0, math.inf, -1.0)                 # two faults: the first argument's
    with pytest.raises(sl.DomainError, match=r"^toy_lpdf: y\[1\] must be not NaN"):
        lpdf(np.array([0.0, math.nan]), 0.0, 1.0)
    lpdf(-1.0, 0.0, 1.0)                          # the density accepts y < 0 ...
    with pytest.raises(sl.DomainError, match=r"^toy_lcdf: y must be non-negative"):
        lcdf(-1.0, 0.0, 1.0)                      # ... its CDFs' own constraint does not


def test_draws_check_their_parameters_and_take_rng_either_way():
    rng_fn = TOY[3]
    a = rng_fn(0.5, 2.0, rng=3)
    assert a == rng_fn(0.5, 2.0, 3) == rng_fn(mu=0.5, sigma=2.0, rng=3)
    assert a == np.random.default_rng(3).normal(0.5, 2.0)
    assert rng_fn(np.zeros(3), 1.0, rng=1).shape == (3,)
    with pytest.raises(sl.DomainError, match=r"^toy_rng: sigma must be positive"):
        rng_fn(0.0, -2.0)
    with pytest.raises(TypeError, match=r"toy_rng\(.*'weights'"):
        rng_fn(0.0, 1.0, weights=1)
    with pytest.raises(TypeError, match=r"toy_rng\(.*multiple values"):
        rng_fn(0.0, 1.0, 3, rng=4)


def test_relations_run_where_declared():
    seen = []

    def rel(fn, a, b, c):
        seen.append("rel")
        if a > b:
            raise sl.DomainError(f"{fn}: a must be <= b")

    def c(tag):
        def check(fn, arg, x):
            seen.append(arg)
            if x < 0:
                raise sl.DomainError(f"{fn}: {arg} must be >= 0")
        return check

    args = (("a", c("a")), ("b", c("b")), ("c", c("c")))
    make_check("f", args, relations=((2, rel),))(1.0, 2.0, 3.0)
    assert seen == ["a", "b", "rel", "c"]
    seen.clear()
    make_check("f", args, relations=(rel,))(1.0, 2.0, 3.0)
    assert seen == ["a", "b", "c", "rel"]
    with pytest.raises(sl.DomainError, match="a must be <= b"):
        make_check("f", args, relations=((2, rel),))(3.0, 2.0, -1.0)   # before c's fault


def test_fast_path_returns_at_once_on_the_hot_case_else_checks():
    calls = []

    def counted(fn, arg, x):
        calls.append(arg)
        POSITIVE(fn, arg, x)

    def plain_first(check):
        def fast(n, lam):
            if type(lam) is float and lam > 0:
                return
            check(n, lam)
        return fast

    check = make_check("f", (("n", counted), ("lam", counted)), fast=plain_first)
    check(1, 2.0)
    assert calls == []
    with pytest.raises(sl.DomainError, match="f: lam must be positive"):
        check(1, -2.0)
    assert calls == ["n", "lam"]
    assert str(inspect.signature(check)) == "(n, lam)"


def test_constraint_factories():
    with pytest.raises(sl.DomainError, match=r"f: x must be in \[0, 1\], but is 1\.5"):
        in_range(0, 1)("f", "x", 1.5)
    with pytest.raises(sl.DomainError, match=r"f: n must be an integer >= 0, but is -1\.0"):
        integer(0)("f", "n", -1)
    with pytest.raises(sl.DomainError, match=r"f: k must be finite"):
        all_of(NONNEGATIVE, FINITE)("f", "k", math.inf)
    check = make_check("f", (("x", None), ("y", FINITE)))
    check(math.nan, 1.0)                              # None: unchecked
    with pytest.raises(TypeError):
        check(1.0)                                    # wrong arity is a TypeError


def test_array_draws_and_post():
    (pmf, rng_fn) = family(
        "toy_count", (("n", integer(0)), ("lam", POSITIVE)), kind="lpmf",
        lpmf=lambda need, n, lam: (sl.sum(n * sl.log(lam) - lam), [None, None]),
        nondiff=(0,), rng_arrays=True, rng=lambda g, lam: g.poisson(lam),
        rng_post=lambda out: np.asarray(out, dtype=np.int64))
    assert pmf.__name__ == "toy_count_lpmf"
    d = rng_fn([1.0, 2.0, 3.0], rng=0)
    assert d.dtype == np.int64 and d.shape == (3,)
    np.testing.assert_array_equal(d, np.random.default_rng(0).poisson([1.0, 2.0, 3.0]))
    with pytest.raises(sl.DomainError, match=r"toy_count_rng: lam\[1\] must be positive"):
        rng_fn([1.0, -2.0])
    with pytest.raises(sl.DifferentiationError):
        sl.grad(lambda n: pmf(n, 2.0))(1.0)           # a nondiff argument traced
