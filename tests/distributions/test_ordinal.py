"""ordered_probit: value against scipy.stats.norm, gradients (eta and cut points) and
nested AD against finite differences, tails, domain errors, rng frequencies."""

import numpy as np
import pytest
import scipy.stats as st

import stanlite as sl

from testkit import ordinal_cases, ordered_reference


def _op_ref(k, eta, c):
    return ordered_reference(st.norm.cdf, k, eta, c)


def test_ordered_probit(check, rng):
    for args in ordinal_cases(rng).values():
        check.all(sl.ordered_probit_lpmf, _op_ref, args, (1, 2))
    # a middle category on either side (u, v swapped where a + b > 0)
    check.all(sl.ordered_probit_lpmf, _op_ref, (np.array([2, 2]), np.array([-2.5, 2.5]),
                                                 np.array([-0.3, 0.6])), (1, 2))


def test_ordered_probit_pointwise(check, rng):
    cases = ordinal_cases(rng)
    for name in ("vectors", "scalar eta", "cut points per outcome"):
        check.pointwise(sl.ordered_probit_lpmf, _op_ref, cases[name], (1, 2))
    k, eta, c = cases["vectors"]
    assert isinstance(sl.ordered_probit_lpmf(2, 0.3, c, reduce=False), float)
    w = rng.uniform(0.5, 1.5, 8)
    check.nested(lambda *a: sl.sum(w * sl.ordered_probit_lpmf(*a, reduce=False)),
                 (k, eta, c), (1, 2))
    with pytest.raises(sl.DomainError, match="ordered_probit_lpmf: k"):
        sl.ordered_probit_lpmf(9, 0.3, c, reduce=False)


def test_ordered_probit_tails():
    # a middle category 40 standard deviations out: Phi(-39) - Phi(-41) in logs
    c = np.array([-1.0, 1.0])
    want = st.norm.logsf(39.0) + np.log1p(-np.exp(st.norm.logsf(41.0) - st.norm.logsf(39.0)))
    assert np.isclose(sl.ordered_probit_lpmf(2, 40.0, c), want, rtol=1e-12)
    assert np.isclose(sl.ordered_probit_lpmf(2, -40.0, c), want, rtol=1e-12)
    assert np.isclose(sl.ordered_probit_lpmf(1, 40.0, c), st.norm.logcdf(-41.0), rtol=1e-12)
    g = sl.grad(lambda e: sl.ordered_probit_lpmf(3, e, c))(-40.0)
    assert np.isclose(g, np.exp(st.norm.logpdf(41.0) - st.norm.logcdf(-41.0)), rtol=1e-8)


def test_ordered_probit_domain_errors(check):
    c = np.array([-1.0, 0.0, 1.0])
    fn = sl.ordered_probit_lpmf
    check.domain(fn, (2, 0.0, c), 0, 5, "ordered_probit_lpmf: k")
    check.domain(fn, (2, 0.0, c), 0, 0, "k")
    check.domain(fn, (2, 0.0, c), 2, np.array([0.0, -1.0, 2.0]), "c must be strictly")
    check.domain(fn, (2, 0.0, c), 2, np.array([0.0, np.nan, 2.0]), r"c\[1\]")
    check.domain(fn, (2, 0.0, c), 1, np.inf, "eta")
    with pytest.raises(ValueError, match="c must be a non-empty vector"):
        fn(1, 0.0, np.array([]))
    with pytest.raises(sl.DifferentiationError):
        sl.grad(lambda k: fn(k, 0.0, c))(2.0)
    with pytest.raises(sl.DomainError, match="ordered_probit_rng: c"):
        sl.ordered_probit_rng(0.0, [1.0, 0.0])


def test_ordered_probit_rng():
    S = 40000
    c = np.array([-1.0, 0.2, 1.5])
    k = sl.ordered_probit_rng(np.full(S, 0.4), c, rng=13)
    assert k.dtype == np.int64 and k.min() >= 1 and k.max() <= 4
    p = -np.diff(np.concatenate([[1.0], st.norm.cdf(0.4 - c), [0.0]]))
    freq = np.bincount(k - 1, minlength=4) / S
    assert np.all(np.abs(freq - p) < 4 * np.sqrt(p * (1 - p) / S))
    assert isinstance(sl.ordered_probit_rng(0.0, c, rng=1), int)
