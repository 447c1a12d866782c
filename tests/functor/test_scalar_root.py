"""stanlite.functor.scalar_root.brent: roots against closed forms, the tolerance, the
evaluation count (superlinear, never far beyond bisection's), and bracket errors."""

import math

import pytest

from stanlite.errors import DomainError, SolverError
from stanlite.functor.scalar_root import brent


class Counted:
    def __init__(self, f):
        self.f, self.calls = f, 0

    def __call__(self, x):
        self.calls += 1
        return self.f(x)


# (f, a, b, the root in closed form)
CLOSED = [
    (lambda x: x * x - 2.0, 0.0, 2.0, math.sqrt(2.0)),
    (lambda x: 2.0 - x * x, 0.0, 2.0, math.sqrt(2.0)),              # decreasing
    (lambda x: math.exp(x) - 5.0, -10.0, 10.0, math.log(5.0)),
    (lambda x: math.log(x) + 1.0, 1e-3, 5.0, math.exp(-1.0)),
    (lambda x: x ** 3 - 8.0, -1.0, 100.0, 2.0),
    (lambda x: math.cos(x), 1.0, 3.0, math.pi / 2.0),
    (lambda x: math.tanh(50.0 * (x - 0.3)), 0.0, 1.0, 0.3),          # steep
    (lambda x: (x - 1.0) ** 3, -3.0, 4.0, 1.0),                       # triple root
    (lambda x: x - 1e8, 0.0, 1e9, 1e8),                               # rtol decides
    (lambda x: x + 1e-7, -1.0, 1.0, -1e-7),
    # Lambert's W (the model's trough is one, models/mm_multidose_ss.py): W(e) = 1
    (lambda x: x * math.exp(x) - math.e, 0.0, 3.0, 1.0),
]


@pytest.mark.parametrize("f, a, b, root", CLOSED)
@pytest.mark.parametrize("flip", [False, True])
def test_closed_forms(f, a, b, root, flip):
    if flip:
        a, b = b, a                                 # the ends in either order
    for xtol, rtol in ((2e-12, 8.881784197001252e-16), (1e-6, 0.0), (1e-13, 1e-10)):
        x = brent(f, a, b, xtol=xtol, rtol=rtol, maxiter=1000)
        assert abs(x - root) <= xtol + rtol * abs(x) + 4 * math.ulp(root)


@pytest.mark.parametrize("f, a, b, root", CLOSED)
def test_evaluations(f, a, b, root):
    """Within Brent's bound, about the square of bisection's count (a multiple root
    comes near it: the interpolation crawls); fewer than bisection's for the simple
    roots, superlinear on the smooth ones."""
    g = Counted(f)
    xtol = 1e-12
    brent(g, a, b, xtol=xtol, rtol=0.0, maxiter=10_000)
    bisection = math.ceil(math.log2(abs(b - a) / xtol))
    assert g.calls <= (bisection + 1) ** 2
    if root != 1.0 or a != -3.0:                    # (all but the triple root)
        assert g.calls <= bisection
    if f is CLOSED[0][0]:
        assert g.calls <= 12                       # sqrt(2): superlinear


def test_root_at_an_end_is_returned_exactly():
    assert brent(lambda x: x - 1.5, 1.5, 3.0) == 1.5
    assert brent(lambda x: x - 3.0, 1.5, 3.0) == 3.0


def test_default_tolerance_near_a_large_root():
    x = brent(lambda x: math.log(x) - math.log(3e12), 1.0, 1e15)
    assert abs(x - 3e12) <= 2e-12 + 8.881784197001252e-16 * 3e12 + math.ulp(3e12)


@pytest.mark.parametrize("a, b, f, words", [
    (0.0, 1.0, lambda x: x + 1.0, "same sign at both ends"),
    (-1.0, 1.0, lambda x: x * x + 1.0, "same sign at both ends"),
    (1.0, 1.0, lambda x: x, "is empty"),
    (0.0, math.inf, lambda x: x - 1.0, "must be finite"),
    (math.nan, 1.0, lambda x: x - 0.5, "must be finite"),
    (0.0, 1.0, lambda x: math.nan, "is not finite"),
    (-1.0, 1.0, lambda x: 1.0 / x if x else math.inf, "is not finite"),
])
def test_bad_brackets(a, b, f, words):
    with pytest.raises(DomainError, match=words) as e:
        brent(f, a, b)
    assert isinstance(e.value, ValueError)
    assert "brent" in str(e.value)


def test_bad_tolerances():
    with pytest.raises(DomainError, match="xtol must be > 0"):
        brent(lambda x: x, -1.0, 1.0, xtol=0.0)
    with pytest.raises(DomainError, match="rtol >= 0"):
        brent(lambda x: x, -1.0, 1.0, rtol=-1.0)


def test_no_convergence_names_the_bracket():
    with pytest.raises(SolverError, match=r"maxiter = 3 evaluations.*bracket is \[") as e:
        brent(lambda x: math.exp(x) - 1e3, 0.0, 100.0, xtol=1e-14, rtol=0.0, maxiter=3)
    assert isinstance(e.value, ArithmeticError)


def test_a_jump_is_bracketed():
    """A sign change without a root (a discontinuity): the answer is the jump, to the
    tolerance - what a bracketing method promises for any sign change."""
    x = brent(lambda x: -1.0 if x < 0.25 else 1.0, 0.0, 1.0, xtol=1e-10, rtol=0.0)
    assert abs(x - 0.25) <= 1e-10
