"""Errors for misuse of traced values name the user's line and the fix (issue 19,
points F and G): conversions inside numpy (np.sum([mu, mu])) point at the user's
call, not at numpy's frames; formatting with a spec and numpy predicates say to use
the value."""

import math
import re

import numpy as np
import pytest

import stanlite as sl
from stanlite.errors import DifferentiationError

HERE = re.escape(__file__)


def _error_of(f, x=0.3):
    with pytest.raises(DifferentiationError) as info:
        sl.grad(f)(x)
    return str(info.value)


@pytest.mark.parametrize("fn", [np.sum, np.mean, np.array], ids=lambda f: f.__name__)
def test_a_list_of_traced_values_given_to_numpy_names_the_users_line(fn):
    def lp(mu):
        return fn([mu, mu])
    msg = _error_of(lp)
    assert re.search(HERE + r":\d+ \(in lp\): `return fn\(\[mu, mu\]\)`", msg), msg
    assert "numpy/" not in msg
    assert "sl.sum" in msg and "sl.stack" in msg


def test_math_exp_still_names_the_users_line():
    def lp(mu):
        return math.exp(mu)
    msg = _error_of(lp)
    assert re.search(HERE + r":\d+ \(in lp\): `return math.exp\(mu\)`", msg), msg


def test_formatting_a_traced_value_with_a_spec_says_to_format_its_value():
    def lp(mu):
        return sl.log(mu) if f"{mu:.3f}" else mu
    msg = _error_of(lp)
    assert "'.3f'" in msg and "mu.value:.3f" in msg and "sl.value_of" in msg
    assert re.search(HERE + r":\d+ \(in lp\)", msg), msg
    # DifferentiationError is a TypeError, as format()'s own error was
    with sl.nested():
        with pytest.raises(TypeError):
            format(sl.Var(1.0), "g")


def test_formatting_without_a_spec_shows_the_traced_value():
    with sl.nested():
        v = sl.Var(1.5)
        assert f"{v}" == str(v) == repr(v) == format(v, "")
        assert "1.5" in f"{v}"


@pytest.mark.parametrize("name", ["isfinite", "isnan", "isinf", "floor", "signbit"])
def test_numpy_predicates_of_a_traced_value_say_to_apply_them_to_the_value(name):
    fn = getattr(np, name)
    with sl.nested():
        v = sl.Var(np.array([1.0, 2.0]))
        with pytest.raises(DifferentiationError, match=rf"np\.{name}\(v\.value\)"):
            fn(v)
        assert np.array_equal(fn(v.value), fn(np.array([1.0, 2.0])))


def test_numpy_functions_without_a_rule_still_name_the_function():
    with sl.nested():
        v = sl.Var(np.array([1.0, 2.0]))
        with pytest.raises(DifferentiationError, match=r"numpy\.allclose.*v\.value"):
            np.allclose(v, 1.0)
        with pytest.raises(DifferentiationError, match=r"numpy\.gcd .*no derivative"):
            np.gcd(v, 2)
