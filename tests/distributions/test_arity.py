"""Every public distribution function refuses a wrong number of arguments (or an
unknown keyword) with a TypeError naming the public function - not an inner
``check()`` or kernel - and shows its parameter names to help()/inspect (issue 19)."""

import inspect

import numpy as np
import pytest

import stanlite as sl
from stanlite import distributions as dists
from stanlite.autodiff.tape import Tape
from stanlite.autodiff.var import make_node

NAMES = sorted(dists.__all__)


def _params(name):
    return inspect.signature(getattr(sl, name)).parameters.values()


def _required(name):
    return [p for p in _positional(name) if p.default is p.empty]


def _positional(name):
    return [p for p in _params(name)
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def test_every_public_distribution_is_covered():
    assert len(NAMES) > 150
    assert all(hasattr(sl, n) for n in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_signature_names_the_parameters(name):
    ps = list(_params(name))
    assert ps, name
    assert all(p.kind is not p.VAR_POSITIONAL for p in ps), \
        f"{name}{inspect.signature(getattr(sl, name))}"


@pytest.mark.parametrize("name", [n for n in NAMES if _required(n)])
def test_one_argument_too_few(name):
    with pytest.raises(TypeError, match=rf"\b{name}\(") as info:
        getattr(sl, name)(*([1.0] * (len(_required(name)) - 1)))
    assert "check()" not in str(info.value) and "<locals>" not in str(info.value)


@pytest.mark.parametrize("name", NAMES)
def test_one_argument_too_many(name):
    n = len(_positional(name)) + 1
    with pytest.raises(TypeError, match=rf"\b{name}\(") as info:
        getattr(sl, name)(*([1.0] * n))
    assert "<locals>" not in str(info.value)


@pytest.mark.parametrize("name", NAMES)
def test_unknown_keyword_names_the_function_and_keyword(name):
    args = [1.0] * len(_required(name))
    with pytest.raises(TypeError, match=rf"\b{name}\(.*'weights'"):
        getattr(sl, name)(*args, weights=False)


def test_message_gives_the_signature():
    with pytest.raises(TypeError) as info:
        sl.normal_lpdf(1.0)
    assert str(info.value).startswith(
        "normal_lpdf(y, mu, sigma) takes 3 arguments (y, mu, sigma), got 1")
    with pytest.raises(TypeError, match=r"student_t_lcdf\(y, nu, mu, sigma\) .* got 5"):
        sl.student_t_lcdf(1.0, 3.0, 0.0, 1.0, 2.0)
    # the Stan names, not those of a shared check
    assert str(inspect.signature(sl.neg_binomial_2_lcdf)) == "(n, mu, phi, /, *, reduce=True)"
    assert str(inspect.signature(sl.normal_lpdf)) == "(y, mu, sigma, /, *, reduce=True)"


def test_wrong_arity_on_the_recorded_path():
    # inside log_prob the arguments are traced (the hot path): same message
    tape = Tape(1)
    beta = make_node(0.5, tape, None, (), None)
    with pytest.raises(TypeError, match=r"normal_lpdf\(y, mu, sigma\) takes 3 .* got 1"):
        sl.normal_lpdf(beta)
    with pytest.raises(TypeError, match=r"normal_lpdf\(y, mu, sigma\) takes 3 .* got 2"):
        sl.normal_lpdf(np.ones(3), beta)


def test_wrong_arity_inside_a_model_surfaces_at_once():
    class Bad(sl.Model):
        beta = sl.param.real()

        def log_prob(self, beta):
            return sl.normal_lpdf(beta)

    with pytest.raises(TypeError, match=r"normal_lpdf\(y, mu, sigma\) takes 3"):
        Bad().log_density_gradient(np.zeros(1))


def test_a_type_error_of_the_right_arity_is_not_rewritten():
    # a bad value (not a count) keeps its own message
    with pytest.raises(TypeError) as info:
        sl.normal_lpdf("a", 0.0, 1.0)
    assert "takes 3 arguments" not in str(info.value)
