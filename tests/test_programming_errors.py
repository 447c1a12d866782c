"""Programming errors in a model surface at once; only domain failures are rejections
(issue 19, points 1-3 and 10).

* ``float(v)``, ``int(v)``, ``math.exp(v)`` ... of a traced value would drop its
  derivative: a ``DifferentiationError`` naming the user's line and what to use
  instead, in every method (a wrong ADVI mean or optimum is never returned);
* a ``log_prob`` that returns anything but a real scalar is a ``ModelError`` naming
  the model and what came back, never a rejected proposal;
* TypeError, NameError, AttributeError, IndexError, KeyError, a broadcasting
  ValueError, ModelError, DataError raised inside a model reach the caller with the
  model's own traceback, from serial chains, worker processes and every other method;
  only DomainError, the ArithmeticError family (SolverError), LinAlgError and
  non-finite densities reject a proposal, and the chains count them by reason (kept
  through save/load and resume; ``fit.diagnose()`` reports them).
"""

import builtins
import math
import os
import traceback

import numpy as np
import pytest

import stanlite as sl
from stanlite.samplers.hamiltonian import RejectedPoint, rejection_reason

HERE = os.path.basename(__file__)
FAST = dict(chains=1, draws=30, warmup=30, seed=3, progress=False, parallel=False)


def _line_of(fn, text):
    """The line number of ``text`` in the source of ``fn`` (for messages that name it)."""
    import inspect
    lines, start = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if text in line:
            return start + i
    raise AssertionError(f"{text!r} not in {fn.__name__}")


# ======================================================================================
# 1. Python number conversions of traced values
# ======================================================================================
CONVERSIONS = {
    "float": (float, r"float\(\)"),
    "int": (int, r"int\(\)"),
    "math.exp": (math.exp, r"float\(\)"),
    "math.log": (math.log, r"float\(\)"),
    "math.sqrt": (math.sqrt, r"float\(\)"),
    "math.floor": (math.floor, r"math\.floor\(\)"),
    "complex": (complex, r"complex\(\)"),
    "round": (round, r"round\(\)"),
    "range": (lambda v: range(v), r"integer conversion"),
    "list index": (lambda v: [1.0, 2.0][v], r"integer conversion"),
    "np.float64": (np.float64, r"numpy array"),
    "np.asarray": (np.asarray, r"numpy array"),
    "%-format": (lambda v: "%f" % v, r"float\(\)"),
}


@pytest.mark.parametrize("name", sorted(CONVERSIONS))
def test_a_number_conversion_of_a_var_is_an_error_naming_the_line(name):
    conv, what = CONVERSIONS[name]

    def f(x):
        return x * conv(x)                         # the line the message names
    line = _line_of(f, "return x * conv(x)")
    with pytest.raises(sl.DifferentiationError) as e:
        sl.grad(f)(1.5)
    msg = str(e.value)
    if getattr(conv, "__name__", "") == "<lambda>":
        # the innermost frame outside stanlite is the lambda of the table above
        assert f"{HERE}:" in msg and "(in <lambda>)" in msg
    else:
        assert f"{HERE}:{line} (in f): `return x * conv(x)" in msg
    assert __import__("re").search(what, msg)
    # what to use instead: stanlite/numpy functions, or a deliberate plain value
    assert "sl.exp" in msg and "np.exp" in msg and "sl.value_of" in msg
    assert isinstance(e.value, TypeError)        # (a DifferentiationError is one)


@pytest.mark.parametrize("name", ["float", "math.exp", "int"])
def test_a_number_conversion_of_a_forward_dual_is_an_error(name):
    conv, what = CONVERSIONS[name]
    with pytest.raises(sl.DifferentiationError, match=what + r" of a traced value at .*"
                       + HERE):
        sl.jvp(lambda x: x * conv(x))(1.5, 1.0)
    # a Hessian (forward over reverse) too
    with pytest.raises(sl.DifferentiationError, match=HERE):
        sl.hessian(lambda x: sl.sum(x) * conv(x[0]))(np.array([1.5, 0.5]))


def test_plain_values_and_comparisons_keep_working():
    # a deliberate plain number: .value / sl.value_of (a constant for the derivative)
    assert sl.grad(lambda x: x * float(sl.value_of(x)))(3.0) == 3.0
    assert sl.grad(lambda x: x * math.exp(x.value))(0.0) == 1.0
    # branches on comparisons and bool() (guards of sl.compile) are not conversions

    def piecewise(x):
        if x > 0:
            return x * x
        return -x
    assert sl.grad(piecewise)(2.0) == 4.0 and sl.grad(piecewise)(-2.0) == -1.0
    vg = sl.compile(piecewise, 1.0)
    assert vg(3.0) == (9.0, 6.0) and vg(-3.0) == (3.0, -1.0)
    # plain numbers stay plain numbers
    assert math.exp(0.0) == 1.0 and float(np.float64(2.0)) == 2.0


def test_check_grad_raises_on_a_conversion():
    # check_grad evaluates f on plain values (fine) and traced ones (not): it raises
    # instead of reporting a gradient of math.exp as zero
    with pytest.raises(sl.DifferentiationError, match=HERE):
        sl.check_grad(lambda x: x[0] * math.exp(x[1]), np.array([0.3, 0.2]))
    assert sl.check_grad(lambda x: x[0] * sl.exp(x[1]), np.array([0.3, 0.2])).passed


class MathExp(sl.Model):
    """math.exp(mu) in log_prob, as in the issue (there ADVI gave a mean of -0.05
    instead of 0.57 and optimize a "converged" wrong mode: the derivative of the
    math.exp term was dropped). Its mode solves 3 mu + exp(mu) = 2.3."""
    compile = False
    y = sl.data.vector(3)
    mu = sl.param.real()

    def log_prob(self, mu):
        return sl.normal_lpdf(self.y, mu, 1.0) - math.exp(mu)


class MathExpRetaped(MathExp):
    compile = True


MATH_EXP_DATA = dict(y=[0.5, 1.0, 0.8])


@pytest.mark.parametrize("cls", [MathExp, MathExpRetaped])
@pytest.mark.parametrize("method", ["variational", "optimize", "laplace", "pathfinder",
                                    "sample"])
def test_every_method_raises_on_math_exp_instead_of_a_wrong_answer(cls, method):
    m = cls(**MATH_EXP_DATA)
    line = _line_of(MathExp.log_prob, "math.exp(mu)")
    kw = dict(sample=FAST, variational=dict(seed=1, progress=False),
              optimize=dict(seed=1), laplace=dict(seed=1, draws=10),
              pathfinder=dict(seed=1, num_paths=1, progress=False))[method]
    with pytest.raises(sl.DifferentiationError,
                       match=rf"float\(\) of a traced value at .*{HERE}:{line} "
                             r"\(in log_prob\).*sl\.exp"):
        getattr(m, method)(**kw)


def test_the_same_model_with_sl_exp_gets_the_right_mode():
    class SlExp(MathExp):
        def log_prob(self, mu):
            return sl.normal_lpdf(self.y, mu, 1.0) - sl.exp(mu)
    opt = SlExp(**MATH_EXP_DATA).optimize(seed=1)
    # d/dmu: sum(y - mu) - exp(mu) = 0  ->  3 mu + exp(mu) = 2.3
    mu = float(opt["mu"])
    assert 3 * mu + math.exp(mu) == pytest.approx(2.3, abs=1e-3)


# ======================================================================================
# 2. log_prob must return a real scalar
# ======================================================================================
BAD_RETURNS = {
    "None": (None, "None"),
    "str": ("abc", r"a str \('abc'\)"),
    "bool": (True, r"a bool \(True\)"),
    "numpy bool": (np.bool_(False), r"a bool"),
    "complex": (1 + 2j, r"a complex"),
    "vector": (np.ones(3), r"numpy array of shape \(3,\)"),
    "length-1 vector": (np.ones(1), r"numpy array of shape \(1,\)"),
    "list": ([1.0, 2.0], r"a list of length 2"),
    "tuple": ((1.0,), r"a tuple of length 1"),
    "dict": ({"lp": 1.0}, r"a dict of length 1"),
    "string array": (np.array("x"), r"numpy array of dtype <U1"),
}


class Returns(sl.Model):
    mu = sl.param.real()
    what = None

    def log_prob(self, mu):
        return self.what


@pytest.mark.parametrize("name", sorted(BAD_RETURNS))
@pytest.mark.parametrize("compile_", [True, False])
def test_a_log_prob_that_returns_no_real_scalar_is_a_model_error(name, compile_):
    value, what = BAD_RETURNS[name]
    m = Returns()
    m.what = value
    m.compile = compile_
    pattern = r"Returns\.log_prob must return the log density as a real scalar.*" \
        r"returned .*" + what
    with pytest.raises(sl.ModelError, match=pattern):
        m.log_density_gradient(np.zeros(1))
    with pytest.raises(sl.ModelError, match=pattern):
        m.log_density(np.zeros(1))
    # sampling: the same error at once, not an initialisation failure after retries
    with pytest.raises(sl.ModelError, match=pattern):
        m.sample(**FAST)


def test_a_traced_vector_is_a_model_error_with_a_hint():
    class Vec(sl.Model):
        mu = sl.param.vector(3)

        def log_prob(self, mu):
            return sl.normal_lpdf(mu, 0.0, 1.0) * np.ones(3)
    with pytest.raises(sl.ModelError, match=r"Vec\.log_prob .* a Var of shape \(3,\) "
                                            r"\(sl\.sum"):
        Vec().log_density_gradient(np.zeros(3))


@pytest.mark.parametrize("ok", [1, 2.5, np.float32(1.5), np.int64(2), np.array(3.0)])
def test_real_scalars_are_accepted(ok):
    m = Returns()
    m.what = ok
    lp, g = m.log_density_gradient(np.zeros(1))
    assert lp == float(ok) and g.tolist() == [0.0]


class NoneSomewhere(sl.Model):
    """Returns None in half of the space: 377 silent rejections before issue 19."""
    mu = sl.param.real()

    def log_prob(self, mu):
        if mu > 0.5:
            return None
        return sl.normal_lpdf(mu, 0.0, 1.0)


def test_none_in_part_of_the_space_stops_sampling_at_once():
    with pytest.raises(sl.ModelError, match="NoneSomewhere.log_prob .* returned None"):
        NoneSomewhere().sample(chains=1, draws=200, warmup=200, seed=1, progress=False,
                               parallel=False, init={"mu": 0.0})


# ======================================================================================
# 3. programming errors surface; domain failures are counted rejections
# ======================================================================================
class Faulty(sl.Model):
    """Raises ``kind`` when mu > ``where`` (in part of the space, or everywhere)."""
    y = sl.data.vector(3)
    mu = sl.param.real()
    kind = "TypeError"
    where = -math.inf

    def log_prob(self, mu):
        lp = sl.normal_lpdf(self.y, mu, 1.0)
        if mu > self.where:
            self.fault()
        return lp

    def fault(self):
        k = self.kind
        if k == "TypeError":
            return sl.normal_lpdf(self.y, "mu", 1.0)
        if k == "NameError":
            return undefined_name                       # noqa: F821
        if k == "AttributeError":
            return self.sigma
        if k == "IndexError":
            return self.y[7]
        if k == "KeyError":
            return {}["mu"]
        if k == "ValueError":                           # a broadcasting error
            return sl.normal_lpdf(self.y, np.zeros(2), 1.0)
        if k == "ModelError":
            raise sl.ModelError("mu is not what the model expected")
        if k == "DataError":
            raise sl.DataError("field 'y' is not what the model expected")
        if k == "DifferentiationError":
            raise sl.DifferentiationError("no derivative here")
        if k == "DomainError":
            raise sl.DomainError("fault: mu must be below 0.3, but is 0.7")
        raise AssertionError(k)


PROGRAMMING = ["TypeError", "NameError", "AttributeError", "IndexError", "KeyError",
               "ValueError", "ModelError", "DataError", "DifferentiationError"]


def faulty(kind, where=-math.inf, compile_=True):
    m = Faulty(y=[0.1, -0.3, 0.4])
    m.kind, m.where, m.compile = kind, where, compile_
    return m


def _exc_type(kind):
    return getattr(sl, kind, None) or getattr(builtins, kind)


def _assert_own_traceback(excinfo):
    """The exception's traceback (or, from a worker, its remote traceback) shows the
    model's own line."""
    text = "".join(traceback.format_exception(excinfo.type, excinfo.value,
                                              excinfo.tb))
    assert "in fault" in text and HERE in text, text[-2000:]


@pytest.mark.parametrize("kind", PROGRAMMING)
def test_programming_errors_surface_from_serial_sampling(kind):
    with pytest.raises(_exc_type(kind)) as e:
        faulty(kind).sample(**FAST)
    _assert_own_traceback(e)
    assert "initialise" not in str(e.value)


@pytest.mark.parametrize("kind", ["AttributeError", "ValueError", "IndexError"])
def test_programming_errors_in_part_of_the_space_surface_during_sampling(kind):
    # fine at the initial point, raising beyond mu > 0.6: the first proposal there
    # stops the run (it used to be a silent rejection, truncating the posterior)
    m = faulty(kind, where=0.6)
    with pytest.raises(_exc_type(kind)) as e:
        m.sample(chains=1, draws=300, warmup=300, seed=1, progress=False,
                 parallel=False, init={"mu": 0.0})
    _assert_own_traceback(e)


@pytest.mark.parametrize("kind", ["KeyError", "ModelError"])
def test_programming_errors_reach_the_parent_from_worker_processes(kind):
    with pytest.raises(_exc_type(kind)) as e:
        faulty(kind).sample(chains=2, draws=20, warmup=20, seed=1, progress=False,
                            parallel=True)
    # the worker's traceback (concurrent.futures' _RemoteTraceback) names the line
    _assert_own_traceback(e)


@pytest.mark.parametrize("method", ["variational", "optimize", "laplace", "pathfinder"])
@pytest.mark.parametrize("kind", ["NameError", "ValueError"])
def test_programming_errors_surface_from_every_method(method, kind):
    kw = dict(variational=dict(seed=1, progress=False), optimize=dict(seed=1),
              laplace=dict(seed=1, draws=10),
              pathfinder=dict(seed=1, num_paths=1, progress=False))[method]
    with pytest.raises(_exc_type(kind)) as e:
        getattr(faulty(kind), method)(**kw)
    _assert_own_traceback(e)


def test_laplace_at_a_given_mode_raises_from_the_hessian():
    with pytest.raises(AttributeError):
        faulty("AttributeError").laplace(mode=np.zeros(1), seed=1, draws=10)


def test_a_misspelt_log_prob_argument_is_named_at_once():
    class Misspelt(sl.Model):
        sigma = sl.param.real(lower=0)

        def log_prob(self, sigam):
            return sl.normal_lpdf(sigam, 0.0, 1.0)
    with pytest.raises(sl.ModelError, match=r"log_prob asks for 'sigam', which is not "
                                            r"a parameter .*sigma"):
        Misspelt().sample(**FAST)


def test_what_rejects_a_proposal():
    assert issubclass(sl.DomainError, RejectedPoint)
    assert issubclass(sl.SolverError, RejectedPoint)
    for e in (ZeroDivisionError, OverflowError, FloatingPointError,
              np.linalg.LinAlgError):
        assert issubclass(e, RejectedPoint)
    for e in (TypeError, ValueError, KeyError, IndexError, AttributeError, NameError,
              sl.ModelError, sl.DataError, sl.DifferentiationError):
        assert not issubclass(e, RejectedPoint), e


def test_rejection_reasons_are_normalised():
    a = rejection_reason(sl.DomainError("normal_lpdf: sigma must be positive and "
                                        "finite, but is -0.4312"))
    b = rejection_reason(sl.DomainError("normal_lpdf: sigma must be positive and "
                                        "finite, but is -1.5e-07"))
    assert a == b == "DomainError: normal_lpdf: sigma must be positive and finite, " \
        "but is #"
    assert rejection_reason(None, math.nan) == "non-finite log density"
    assert rejection_reason(None, -math.inf) == "non-finite log density"
    assert rejection_reason(None, 1.0, np.array([1.0, math.inf])) == \
        "non-finite gradient"
    assert len(rejection_reason(sl.DomainError("x" * 500))) < 200


def test_linear_algebra_on_bad_values_is_a_domain_error_bad_shapes_are_not():
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    indefinite = np.array([[1.0, 2.0], [2.0, 1.0]])
    for call in (lambda: sl.cholesky_decompose(indefinite),
                 lambda: sl.cholesky_decompose(np.array([[1.0, 2.0], [0.0, 1.0]])),
                 lambda: sl.cholesky_decompose(np.full((2, 2), np.nan)),
                 lambda: sl.inverse(singular),
                 lambda: sl.mdivide_left(singular, np.ones(2)),
                 lambda: sl.mdivide_left_tri_low(np.zeros((2, 2)), np.ones(2)),
                 lambda: sl.gp_exp_quad_cov(np.zeros(2), 1.0, -1.0)):
        with pytest.raises(sl.DomainError):
            call()
    for call in (lambda: sl.cholesky_decompose(np.ones((2, 3))),
                 lambda: sl.mdivide_left(np.eye(3), np.ones(4)),
                 lambda: sl.gp_exp_quad_cov(np.zeros(2), np.ones(2), 1.0)):
        with pytest.raises(ValueError) as e:
            call()
        assert not isinstance(e.value, sl.DomainError)


class HalfDomain(sl.Model):
    """A DomainError beyond mu > 0.3 and a NaN density below mu < -1.2 (from the
    model's own arithmetic): two reasons for rejections, both counted."""
    compile = False
    mu = sl.param.real()

    def log_prob(self, mu):
        if mu > 0.3:
            raise sl.DomainError(f"halfdomain: mu must be below 0.3, but is "
                                 f"{sl.value_of(mu)}")
        if mu < -1.2:
            return mu * math.nan
        return sl.normal_lpdf(mu, 0.0, 1.0)


def test_rejections_are_counted_by_reason_and_diagnosed(tmp_path):
    fit = HalfDomain().sample(chains=2, draws=150, warmup=150, seed=4, progress=False,
                              parallel=False, init={"mu": 0.0})
    assert np.all(fit["mu"] <= 0.3) and np.all(fit["mu"] >= -1.2)
    for st in fit.chain_states:
        assert st.n_rejected > 0 and sum(st.rejections.values()) == st.n_rejected
        assert set(st.rejections) <= {"DomainError: halfdomain: mu must be below #, but "
                                      "is #", "non-finite log density"}
    reasons = set().union(*(st.rejections for st in fit.chain_states))
    assert len(reasons) == 2
    total = sum(st.n_rejected for st in fit.chain_states)
    text = fit.diagnose()
    assert f"{total} proposal(s) were rejected" in text
    assert "x DomainError: halfdomain: mu must be below #" in text
    assert "x non-finite log density" in text
    # kept through save and load
    path = tmp_path / "fit.nc"
    fit.save(path)
    back = sl.load_fit(path)
    assert [s.rejections for s in back.chain_states] == \
        [s.rejections for s in fit.chain_states]
    assert [s.n_rejected for s in back.chain_states] == \
        [s.n_rejected for s in fit.chain_states]
    assert f"{total} proposal(s) were rejected" in back.diagnose()


def test_static_hmc_reports_its_rejection_reason():
    # (a whole static-HMC run on HalfDomain would crawl: its step size shrinks and the
    # number of steps 2 pi / eps grows; one transition shows the bookkeeping)
    from stanlite.samplers import chain, hamiltonian
    m = HalfDomain()
    metric = hamiltonian.make_metric("diag_e", 1)
    q = np.array([0.25])
    z = hamiltonian.Point(q, None, *m.log_density_gradient(q))
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(20):
        _, info = chain._static_hmc(m, metric, z, 0.7, rng)
        assert info.n_failed == sum((info.rejected or {}).values())
        seen.update(info.rejected or ())
    assert seen == {"DomainError: halfdomain: mu must be below #, but is #",
                    "non-finite log density"}


def test_rejection_counts_continue_on_resume():
    m = HalfDomain()
    kw = dict(chains=1, warmup=100, seed=4, progress=False, parallel=False,
              init={"mu": 0.0})
    whole = m.sample(draws=200, **kw)
    part = m.sample(draws=100, **kw)
    more = m.sample(resume_from=part, draws=200, **{k: v for k, v in kw.items()
                                                     if k not in ("warmup",)})
    assert more.chain_states[0].rejections == whole.chain_states[0].rejections
    assert more.chain_states[0].n_rejected == whole.chain_states[0].n_rejected > 0


def test_a_run_without_rejections_says_so():
    class Fine(sl.Model):
        mu = sl.param.real()

        def log_prob(self, mu):
            return sl.normal_lpdf(mu, 0.0, 1.0)
    fit = Fine().sample(chains=2, draws=50, warmup=50, seed=1, progress=False,
                        parallel=False)
    assert "No proposals were rejected" in fit.diagnose()


# ======================================================================================
# 10. diagnose() on one chain does not claim an R-hat
# ======================================================================================
def test_diagnose_on_one_chain_says_rhat_needs_two_chains():
    class Fine(sl.Model):
        mu = sl.param.real()

        def log_prob(self, mu):
            return sl.normal_lpdf(mu, 0.0, 1.0)
    one = Fine().sample(chains=1, draws=100, warmup=100, seed=1, progress=False)
    text = one.diagnose()
    assert "R-hat below" not in text and "R-hat above" not in text
    assert "R-hat not computed: it needs two chains or more" in text
    two = Fine().sample(chains=2, draws=100, warmup=100, seed=1, progress=False,
                        parallel=False)
    assert "needs two chains" not in two.diagnose()
