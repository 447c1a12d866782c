"""Every argument of every inference method is checked before anything runs (issue 19,
point 9): a table of bad values per argument - NaN, inf, 0, -1, 2.5, True, strings,
None where it is not allowed - each an ``sl.ArgumentError`` whose message names the
argument; good values (numpy integers and floats, numpy booleans) are accepted and
give the same result as Python's; typos in keyword arguments name the closest valid
name. The validators themselves: ``stanlite/arguments.py``."""

import math
import types

import numpy as np
import pytest

import stanlite as sl
from stanlite import arguments as A

from testkit import Normal


@pytest.fixture(scope="module")
def model():
    return Normal(N=4, y=[0.3, -0.2, 1.1, 0.6])


NAN, INF = math.nan, math.inf
COUNT_BAD = [NAN, INF, -1, 2.5, True, "x", None, [1]]          # every integer argument
POSITIVE_COUNT_BAD = COUNT_BAD + [0]
REAL_POSITIVE_BAD = [NAN, INF, -INF, 0, -1, True, "x", None, [1.0]]
REAL_NONNEG_BAD = [NAN, INF, -1, -1e-300, True, "x", None]
BOOL_BAD = [1, 0, "yes", None, NAN]
SEED_BAD = [-1, 2.5, NAN, INF, "x", True, [1, 2]]


def cases(method, arg, values):
    return [(method, {arg: v}, arg) for v in values]


def table(method, rows):
    """``cases`` for every argument of each row: ``{"arg1 arg2": bad values}`` (the
    arguments that share a list of bad values are one row)."""
    return [c for args, values in rows.items() for arg in args.split()
            for c in cases(method, arg, values)]


SAMPLE = (
    table("sample", {
        "chains thin": POSITIVE_COUNT_BAD,
        "draws": COUNT_BAD[:-2] + [[1]],                 # None: the default (1000)
        "warmup": COUNT_BAD,
        "max_treedepth": POSITIVE_COUNT_BAD + [31, 10 ** 6],
        "stepsize": REAL_POSITIVE_BAD,
        "adapt_delta": [NAN, INF, 0, 1, -1, 1.5, True, "x", None],
        "seed": SEED_BAD + [np.random.SeedSequence(1)],
        "metric": ["diag", "dense", "x", None, 1, True],
        "sampler": ["nut", "NUTS", None, 1],
        "save_warmup progress parallel data_changed_ok": BOOL_BAD,
        "blas_threads max_workers": [0, -1, 2.5, True, "x"],
        "executor": ["processes", 3, True, object()],
        "resume_from": [3, "fit", object(), [1]]})
    + cases("sample", "inv_metric", [[1.0, -1.0], [1.0, NAN], [1.0, INF], [0.0, 1.0],
                                     [1.0], [[1.0, 0.0], [0.0, 1.0]], "x", [[1.0], [1.0, 2.0]]])
    + [("sample", {"metric": "dense_e", "inv_metric": v}, "inv_metric")
       for v in ([[1.0, 2.0], [2.0, 1.0]],            # symmetric, not positive definite
                 [[1.0, 0.5], [0.0, 1.0]],            # not symmetric
                 [[1.0, NAN], [NAN, 1.0]], [1.0, 1.0], np.eye(3), [[-1.0, 0], [0, 1.0]])]
    + [("sample", {"metric": "unit_e", "inv_metric": [1.0, 1.0]}, "inv_metric")]
    + [("sample", {"sampler_options": {"alpha": 1.0}}, "sampler_options")]
    + [("sample", {"sampler": "rhmc", "sampler_options": {k: v}}, f"sampler_options.*{k}")
       for k, bad in (("alpha", REAL_POSITIVE_BAD[:-3]), ("num_steps", [0, 2.5, True, "x"]),
                      ("fixed_point_tol", REAL_POSITIVE_BAD[:-3]),
                      ("max_fixed_point", [0, -1, 2.5, None, True]),
                      ("retape", BOOL_BAD[:-1]), ("alpah", [1.0]))
       for v in bad]
    + [("sample", {"sampler": "rhmc", "sampler_options": [1]}, "sampler_options")]
    + [("sample", {"draws": 10 ** 15}, "draws.*more than this machine's memory"),
       ("sample", {"chains": 10 ** 9, "draws": 10 ** 6}, "chains x draws"),
       ("sample", {"warmup": 10 ** 15, "save_warmup": True}, "warmup.*memory")]
)

INIT_BAD = [({"sigma": -1.0}, "sigma"), ({"sigma": 0.0}, "sigma"),
            ({"sigm": 1.0}, "sigm.*did you mean 'sigma'"), ({"mu": [1.0, 2.0]}, "mu.*shape"),
            ({"mu": INF}, "mu.*finite"), ({"mu": NAN}, "mu.*nan"), ({"mu": True}, "mu"),
            ({"mu": "a"}, "mu"), ({"sigma": None}, "sigma"), ("x", "init"), (-1.0, "init"),
            (NAN, "init"), (INF, "init"), (True, "init"), (np.zeros(3), "init.*length 2"),
            (np.array([0.0, NAN]), "init.*finite"), (object(), "init"),
            ({"mu": "0.5"}, "mu.*expected real values"), ({"sigma": [True]}, "sigma"),
            ({"mu": np.array(["1"])}, "mu.*expected real values"),
            ({"mu": np.True_}, "mu.*expected real values"),
            ({"mu": np.ma.masked_array([0.0], mask=[True])}, "'mu'.*masked"),
            ({"sigma": [np.ma.masked]}, "'sigma'.*masked"),
            ({"sigma": 2 ** 1100}, "'sigma'.*too large"),
            (types.SimpleNamespace(unconstrained=np.zeros(4)),
             "init is a result with 4 unconstrained values, but Normal has 2"),
            (types.SimpleNamespace(unconstrained=[0.0, np.inf]), "init.*not finite")]

VARIATIONAL = (
    table("variational", {
        "method": ["full", "meanfeild", None, 1],
        "seed": SEED_BAD,
        # output_samples=0 is accepted: an empty fit
        "iter grad_samples elbo_samples eval_elbo adapt_iter output_samples":
            POSITIVE_COUNT_BAD,
        "max_iter": [0, -1, 2.5, True, "x", NAN],
        "eta": [NAN, INF, 0, -1, True, "x"],                       # None: adapted
        "tol_rel_obj": REAL_POSITIVE_BAD,
        "adapt_engaged progress": BOOL_BAD})
    + [("variational", {"output_samples": 10 ** 15}, "output_samples.*memory")]
)

OPTIMIZE = table("optimize", {
    "method": ["LBFGS", "sgd", None, 1],
    "jacobian verbose progress": BOOL_BAD,
    "seed": SEED_BAD,
    "iter": COUNT_BAD,
    "history_size refresh": POSITIVE_COUNT_BAD,
    "init_radius tol_obj tol_rel_obj tol_grad tol_rel_grad tol_param": REAL_NONNEG_BAD})

LAPLACE = (
    table("laplace", {
        "draws": POSITIVE_COUNT_BAD,                     # 0: an empty fit
        "jacobian": BOOL_BAD,
        "seed": SEED_BAD,
        "mode": ["x", [0.0], np.zeros(3), [0.0, NAN], True]})
    + [("laplace", {"mode": {"mu": 0.0, "sigma": -1.0}}, "sigma"),
       ("laplace", {"mode": {"mu": 0.0}}, "sigma"),
       ("laplace", {"mode": {"mu": 0.0, "sigma": 1.0, "tau": 1.0}}, "tau"),
       ("laplace", {"mode": [0.0, 0.0], "iter": 10}, "iter"),   # only to find a mode
       ("laplace", {"iter": 2.5}, "iter"), ("laplace", {"method": "x"}, "method"),
       ("laplace", {"draws": 10 ** 15}, "draws.*memory")]
)

PATHFINDER = (
    table("pathfinder", {
        "seed": SEED_BAD,
        "num_paths num_draws max_lbfgs_iters num_elbo_draws history_size":
            POSITIVE_COUNT_BAD,
        "num_single_draws": [0, -1, 2.5, True, "x", NAN],
        "init_radius tol_obj tol_rel_obj tol_grad tol_rel_grad tol_param": REAL_NONNEG_BAD,
        "psis_resample calculate_lp progress parallel": BOOL_BAD,
        "executor": ["processes", 3, True]})
    + [("pathfinder", {"init": [None, None], "num_paths": 4},
        "init.*one entry per path \\(4\\), got 2"),
       ("pathfinder", {"calculate_lp": False, "num_paths": 2}, "calculate_lp"),
       # the argument the user gave is named, not the defaulted num_single_draws
       ("pathfinder", {"num_draws": 10 ** 15},
        r"num_paths=1 x num_draws=1,000,000,000,000,000 \(each path .*memory"),
       ("pathfinder", {"num_draws": 10 ** 15, "num_single_draws": 5},
        r"^num_draws=1,000,000,000,000,000 would keep .*memory"),
       ("pathfinder", {"num_single_draws": 10 ** 15},
        r"num_paths=1 x num_single_draws=1,000,000,000,000,000 would keep .*memory")]
)

INITS = [(m, {"init": v}, pattern) for m in ("sample", "variational", "optimize",
                                             "laplace", "pathfinder")
         for v, pattern in INIT_BAD]
INITS += [("sample", {"init": [{"mu": 0.0}] * 3, "chains": 2},
           "init.*one entry per chain \\(2\\), got 3"),
          ("sample", {"init": [{"mu": 0.0}, {"sigma": -2.0}], "chains": 2},
           "init\\[1\\]|sigma")]

TYPOS = [("sample", "draw", "draws"), ("sample", "iter_sampling", "draws"),
         ("sample", "num_warmup", "warmup"), ("sample", "adapt_detla", "adapt_delta"),
         ("variational", "draws", "output_samples"), ("variational", "iterations", "iter"),
         ("variational", "grad_sample", "grad_samples"), ("optimize", "itr", "iter"),
         ("optimize", "iterations", "iter"), ("optimize", "tol_grd", "tol_grad"),
         ("laplace", "draw", "draws"), ("laplace", "jacobain", "jacobian"),
         ("laplace", "history", "history_size"), ("pathfinder", "num_path", "num_paths"),
         ("pathfinder", "num_draw", "num_draws"), ("pathfinder", "paths", "num_paths")]

# the cheapest run of each method, so that a wrongly accepted value fails fast
QUICK = {"sample": dict(chains=1, draws=5, warmup=5, progress=False, parallel=False,
                        seed=1),
         "variational": dict(iter=20, output_samples=5, progress=False, seed=1),
         "optimize": dict(iter=20, seed=1),
         "laplace": dict(draws=5, seed=1),
         "pathfinder": dict(num_paths=1, num_draws=5, max_lbfgs_iters=10,
                            num_elbo_draws=5, progress=False, seed=1)}


def _call(model, method, kw):
    base = dict(QUICK[method])
    if method == "laplace" and "mode" in kw:
        base = {"draws": 5}
    return getattr(model, method)(**{**base, **kw})


@pytest.mark.parametrize("method, kw, name", SAMPLE + VARIATIONAL + OPTIMIZE + LAPLACE
                         + PATHFINDER + INITS)
def test_bad_argument_is_an_argument_error_naming_it(model, method, kw, name):
    with pytest.raises(sl.ArgumentError, match=name) as info:
        _call(model, method, kw)
    # the class keeps the old contracts: a ValueError, a TypeError, a DataError
    assert isinstance(info.value, (ValueError, TypeError, sl.DataError, sl.StanliteError))


@pytest.mark.parametrize("method, typo, meant", TYPOS)
def test_unknown_keyword_suggests_the_closest_valid_name(model, method, typo, meant):
    with pytest.raises(sl.ArgumentError, match=f"{method} got an unexpected argument "
                       f"'{typo}'; did you mean '{meant}'"):
        _call(model, method, {typo: 1})
    with pytest.raises(TypeError):             # what Python would raise, still
        _call(model, method, {typo: 1})


def test_bad_arguments_fail_before_any_gradient():
    class Counting(Normal):
        compile = False
        calls = 0

        def log_prob(self, mu, sigma):
            type(self).calls += 1
            return super().log_prob(mu, sigma)
    m = Counting(N=2, y=[0.0, 1.0])
    for method, kw, _ in (SAMPLE[::7] + VARIATIONAL[::7] + OPTIMIZE[::7] + PATHFINDER[::7]
                          + INITS[::5]):
        with pytest.raises(sl.ArgumentError):
            _call(m, method, kw)
    assert Counting.calls == 0


# ---- good values are accepted (numpy scalars as Python's) ---------------------------------
def test_numpy_scalars_give_the_same_draws_as_python_numbers(model):
    py = model.sample(chains=2, draws=20, warmup=30, thin=2, max_treedepth=8, seed=3,
                      stepsize=0.5, adapt_delta=0.9, progress=False, parallel=False,
                      save_warmup=True)
    np_ = model.sample(chains=np.int64(2), draws=np.int32(20), warmup=np.uint16(30),
                       thin=np.int8(2), max_treedepth=np.int64(8), seed=np.uint32(3),
                       stepsize=np.float32(0.5), adapt_delta=np.float64(0.9),
                       progress=np.bool_(False), parallel=np.False_, save_warmup=np.True_)
    np.testing.assert_array_equal(py["mu"], np_["mu"])
    assert np_["mu"].shape == (2, 10)
    assert all(type(s.num_draws) is int and type(s.num_warmup) is int
               for s in np_.chain_states)


@pytest.mark.filterwarnings("ignore::UserWarning")     # short runs: not converged
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_edge_values_that_are_accepted(model):
    # draws=0 (warmup only) and warmup=0 run; a huge seed is what SeedSequence takes
    fit = model.sample(chains=1, draws=0, warmup=10, seed=2 ** 40, progress=False,
                       parallel=False)
    assert fit.chain_states[0].iteration == 10
    fit = model.sample(chains=1, draws=5, warmup=0, seed=0, progress=False,
                       parallel=False, metric="dense_e", inv_metric=[[1.0, 0.2], [0.2, 1.0]])
    assert fit["mu"].shape == (1, 5)
    opt = model.optimize(seed=np.random.default_rng(1), iter=np.int64(50),
                         tol_obj=np.float32(1e-12), jacobian=np.bool_(False))
    assert opt.converged
    model.variational(seed=np.random.SeedSequence(4), iter=np.int64(200), eta=np.float64(0.1),
                      output_samples=np.int64(1), progress=False, adapt_engaged=False)
    model.laplace(draws=np.int64(3), seed=np.int16(5))
    model.pathfinder(num_paths=np.int64(1), num_draws=np.int64(4), seed=1, progress=False,
                     max_lbfgs_iters=np.int32(50))


# ---- the validators ------------------------------------------------------------------------
@pytest.mark.parametrize("fun, good, bad", [
    (A.positive_int, [1, np.int64(3), 10 ** 20], [0, -1, 1.0, True, np.True_, "1", None]),
    (A.nonneg_int, [0, np.uint8(0)], [-1, 0.0, False]),
    (A.positive_real, [1e-300, 2, np.float16(0.5)], [0, -0.0, NAN, INF, True, "1"]),
    (A.nonneg_real, [0, 0.0, 3], [-1e-9, NAN, INF, False]),
    (A.unit_interval, [1e-9, 0.5, np.float32(0.99)], [0, 1, NAN, -0.5, True]),
    (A.boolean, [True, False, np.bool_(True)], [0, 1, "True", None]),
    (A.seed, [None, 0, 2 ** 32, np.int64(7), np.random.SeedSequence(1)],
     [-1, 1.0, "7", True, np.random.default_rng(1)]),
])
def test_validators(fun, good, bad):
    for v in good:
        fun("arg", v)
    for v in bad:
        with pytest.raises(sl.ArgumentError, match=r"^arg must be"):
            fun("arg", v)


def test_validators_return_python_types():
    assert type(A.positive_int("n", np.int64(3))) is int
    assert type(A.positive_real("x", np.float32(0.5))) is float
    assert type(A.boolean("b", np.bool_(True))) is bool
    assert A.seed("s", np.random.default_rng(1), generator=True) is not None
    assert A.integer("d", 30, 1, 30) == 30
    with pytest.raises(sl.ArgumentError, match=r"d must be an integer in 1\.\.30, got 31"):
        A.integer("d", 31, 1, 30)


def test_choice_and_unknown_keywords_suggest():
    with pytest.raises(sl.ArgumentError, match="metric must be one of 'diag_e', 'dense_e'"
                       ".*got 'dense'; did you mean 'dense_e'"):
        A.choice("metric", "dense", ("diag_e", "dense_e"))
    with pytest.raises(sl.ArgumentError, match="f got an unexpected argument 'zzz' \\(its "
                       "arguments: a, b\\)"):
        A.no_unknown("f", {"zzz": 1}, lambda model, a, b=1: None)
    A.no_unknown("f", {"a": 1}, ["a"])


def test_inv_metric_messages():
    with pytest.raises(sl.ArgumentError, match=r"shape \(2,\).*got shape \(3,\)"):
        A.inv_metric("inv_metric", [1, 1, 1], "diag_e", 2)
    with pytest.raises(sl.ArgumentError, match=r"symmetric, but element \[0, 1\] is 0.5"):
        A.inv_metric("inv_metric", [[1, 0.5], [0, 1]], "dense_e", 2)
    assert A.inv_metric("inv_metric", None, "unit_e", 2) is None
    np.testing.assert_array_equal(A.inv_metric("m", [1, 2], "diag_e", 2), [1.0, 2.0])


def test_resume_from_an_approximation_says_it_has_no_chains(model):
    lap = model.laplace(draws=5, seed=1)
    with pytest.raises(sl.ArgumentError, match="resume_from must be a fit made by "
                       "model.sample.*ApproximateFit.*no Markov chains"):
        model.sample(resume_from=lap, progress=False)


@pytest.mark.parametrize("method, arg", [("laplace", "draws"),
                                         ("variational", "output_samples"),
                                         ("pathfinder", "num_draws"),
                                         ("pathfinder", "num_single_draws")])
def test_zero_draws_of_an_approximation_are_refused(model, method, arg):
    # a 0-draw fit had no values: fit["mu"] raised KeyError "'mu' is not a parameter"
    with pytest.raises(sl.ArgumentError, match=rf"^{arg} must be an integer >= 1, got 0$"):
        _call(model, method, {arg: 0})


def test_laplace_mode_of_another_model_is_named(model):
    class Other(sl.Model):
        a = sl.param.vector(3)

        def log_prob(self, a):
            return sl.normal_lpdf(a, 0, 1)
    opt = Other().optimize(seed=1, jacobian=True)
    with pytest.raises(sl.ArgumentError, match="mode is a result with 3 unconstrained "
                       "values, but Normal has 2"):
        model.laplace(mode=opt)
    with pytest.raises(sl.ArgumentError, match="init is a result with 3"):
        model.sample(init=opt, progress=False)
