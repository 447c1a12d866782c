"""Initial values (issue 19, point 9; samplers/inits.py): an init outside a parameter's
support names the parameter and its declaration, for every kind of constraint; partial
inits are completed as Stan completes them (uniform(-2, 2) on the unconstrained space,
from the run's own generator) by every method and by the CLI's ``--init``,
reproducibly under a fixed seed; a retry redraws only the missing parameters; a list
gives one init per chain."""

import inspect
import io
import json
import re

import numpy as np
import pytest

import stanlite as sl
from stanlite import cli
from stanlite.samplers.inits import initial_point

import testkit


class Constrained(sl.Model):
    """One parameter of each kind of constraint (the log density is irrelevant here)."""
    K = sl.data.int(lower=2)
    sigma_g = sl.param.real(lower=0)
    cap = sl.param.real(upper=3)
    p = sl.param.real(lower=0, upper=1)
    theta = sl.param.simplex("K")
    o = sl.param.ordered("K")
    po = sl.param.positive_ordered("K")
    u = sl.param.unit_vector("K")
    S = sl.param.cov_matrix("K")
    C = sl.param.corr_matrix("K")
    L = sl.param.cholesky_factor_corr("K")
    Lc = sl.param.cholesky_factor_cov("K")

    def log_prob(self, sigma_g, cap, p, theta, o, po, u, S, C, L, Lc):
        return -0.5 * sl.sum(o * o) - sigma_g - 0.5 * cap * cap


GOOD = dict(sigma_g=1.0, cap=0.0, p=0.5, theta=[0.2, 0.3, 0.5], o=[-1.0, 0.0, 2.0],
            po=[0.5, 1.0, 3.0], u=[0.6, 0.8, 0.0], S=np.eye(3), C=np.eye(3), L=np.eye(3),
            Lc=np.eye(3))

BAD = [
    ("sigma_g", -1, r"init for 'sigma_g' \(real<lower=0>\): must be >= 0, but is -1"),
    ("sigma_g", 0.0, r"sigma_g.*boundary of the support"),
    ("cap", 4.0, r"init for 'cap' \(real<upper=3>\): must be <= 3, but is 4"),
    ("p", 1.5, r"init for 'p' \(real<lower=0, upper=1>\): must be in \[0, 1\]"),
    ("p", -0.1, r"'p'.*must be in \[0, 1\]"),
    ("theta", [0.2, 0.3, 0.6], r"init for 'theta' \(simplex\[3\]\): must sum to 1"),
    ("theta", [-0.2, 0.7, 0.5], r"'theta' \(simplex\[3\]\): must be >= 0"),
    ("o", [3.0, 2.0, 1.0], r"init for 'o' \(ordered\[3\]\): must be strictly increasing"),
    ("po", [-1.0, 1.0, 2.0], r"'po' \(positive_ordered\[3\]\): must be >= 0"),
    ("u", [1.0, 1.0, 0.0], r"'u' \(unit_vector\[3\]\): must have unit length"),
    ("S", -np.eye(3), r"init for 'S' \(cov_matrix\[3, 3\]\): must be positive definite"),
    ("S", [[1, 2, 0], [2, 1, 0], [0, 0, 1]], r"'S'.*positive definite"),
    ("S", [[1, 0.5, 0], [0, 1, 0], [0, 0, 1]], r"'S'.*symmetric"),
    ("C", 2 * np.eye(3), r"init for 'C' \(corr_matrix\[3, 3\]\): must have a unit diagonal"),
    ("L", 2 * np.eye(3), r"'L' \(cholesky_factor_corr\[3, 3\]\): must have rows of unit"),
    ("L", np.triu(np.ones((3, 3))) / np.sqrt([[3], [2], [1]]), r"'L'.*lower triangular"),
    ("Lc", -np.eye(3), r"'Lc' \(cholesky_factor_cov\[3, 3\]\): must have a positive diag"),
    ("theta", [0.5, 0.5], r"init for 'theta'.*expected shape \(3,\), got \(2,\)"),
    ("S", np.eye(2), r"init for 'S'.*expected shape \(3, 3\), got \(2, 2\)"),
    ("o", [0.0, np.inf, np.inf], r"init for 'o'.*must be finite"),
]


@pytest.fixture(scope="module")
def constrained():
    return Constrained(K=3)


def test_the_good_init_is_accepted(constrained):
    x, lp, _ = initial_point(constrained, GOOD, np.random.default_rng(0))
    assert np.all(np.isfinite(x)) and np.isfinite(lp)
    back = constrained.constrain(x)
    for k, v in GOOD.items():
        np.testing.assert_allclose(back[k], v, atol=1e-12)


@pytest.mark.parametrize("name, value, pattern", BAD)
@pytest.mark.parametrize("method", ["sample", "optimize", "variational", "pathfinder"])
def test_init_outside_the_support_names_parameter_and_constraint(constrained, method, name,
                                                                 value, pattern):
    init = {**GOOD, name: value}
    with pytest.raises(sl.ArgumentError, match=pattern):
        getattr(constrained, method)(init=init, seed=1, progress=False)
    # also when the other parameters are left out (a partial init)
    with pytest.raises(sl.ArgumentError, match=pattern):
        getattr(constrained, method)(init={name: value}, seed=1, progress=False)


def test_unknown_init_name_is_named_with_the_closest_parameter(constrained):
    with pytest.raises(sl.ArgumentError, match=r"init gives 'sigma', which is not a "
                       r"parameter of Constrained \(its parameters: sigma_g, .*\); did you "
                       r"mean 'sigma_g'\?"):
        constrained.sample(init={"sigma": 1.0}, progress=False)


# ---- partial inits in every method ------------------------------------------------------
class Hier(sl.Model):
    J = sl.data.int(lower=1)
    y = sl.data.vector("J")
    mu = sl.param.real()
    tau = sl.param.real(lower=0)
    theta = sl.param.vector("J")

    def log_prob(self, mu, tau, theta):
        return (sl.normal_lpdf(self.y, theta, 1.0) + sl.normal_lpdf(theta, mu, tau)
                + sl.normal_lpdf(mu, 0, 5) + sl.cauchy_lpdf(tau, 0, 2))


@pytest.fixture(scope="module")
def hier():
    return Hier(J=3, y=[1.0, -0.5, 2.0])


def _start(model, fit_kw, seed):
    """The first draw of a chain that cannot move (step size 1e-12): its init."""
    fit = model.sample(chains=2, warmup=0, draws=1, stepsize=1e-12, seed=seed,
                       progress=False, parallel=False, **fit_kw)
    return {k: fit[k][:, 0] for k in ("mu", "tau", "theta")}


def test_sample_partial_init_keeps_the_given_values_and_draws_the_rest(hier):
    a = _start(hier, dict(init={"tau": 0.7}), seed=11)
    b = _start(hier, dict(init={"tau": 0.7}), seed=11)
    c = _start(hier, dict(init={"tau": 0.7}), seed=12)
    np.testing.assert_allclose(a["tau"], 0.7, rtol=1e-6)
    for k in a:                                  # reproducible under a fixed seed
        np.testing.assert_array_equal(a[k], b[k])
    assert not np.allclose(a["mu"], c["mu"])     # another seed: other random values
    assert a["mu"][0] != a["mu"][1]              # each chain draws its own
    assert np.all(np.abs(a["mu"]) <= 2) and np.all(np.abs(a["theta"]) <= 2)
    # the missing parameters are exactly Stan's uniform(-2, 2) draws: those of init=None
    free = _start(hier, {}, seed=11)
    # (equal up to the 1e-12 step the chains still take)
    np.testing.assert_allclose(a["mu"], free["mu"], rtol=1e-6)
    np.testing.assert_allclose(a["theta"], free["theta"], rtol=1e-6)


def test_sample_init_list_is_one_per_chain(hier):
    s = _start(hier, dict(init=[{"mu": 1.5}, {"mu": -1.5, "tau": 2.0}]), seed=3)
    np.testing.assert_allclose(s["mu"], [1.5, -1.5], rtol=1e-6)
    np.testing.assert_allclose(s["tau"][1], 2.0, rtol=1e-6)
    with pytest.raises(sl.ArgumentError, match=r"one entry per chain \(2\), got 1"):
        hier.sample(chains=2, init=[{"mu": 0.0}], progress=False)


def test_sample_partial_init_in_worker_processes_matches_serial(hier):
    kw = dict(chains=2, warmup=20, draws=10, seed=5, progress=False, init={"mu": 0.3})
    serial = hier.sample(parallel=False, **kw)
    parallel = hier.sample(parallel=True, **kw)
    np.testing.assert_array_equal(serial["theta"], parallel["theta"])


def test_radius_init(hier):
    s = _start(hier, dict(init=0.1), seed=4)
    assert np.all(np.abs(s["mu"]) <= 0.1) and np.all(np.abs(np.log(s["tau"])) <= 0.1)
    s = _start(hier, dict(init=0), seed=4)
    np.testing.assert_allclose(s["mu"], 0.0, atol=1e-6)


class Normal(sl.Model):
    y = sl.data.vector(4)
    mu = sl.param.real()
    sigma = sl.param.real(lower=0)

    def log_prob(self, mu, sigma):
        return (sl.normal_lpdf(self.y, mu, sigma) + sl.normal_lpdf(mu, 0, 10)
                + sl.normal_lpdf(sigma, 0, 5))


@pytest.mark.filterwarnings("ignore::UserWarning")       # short runs: not converged
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("method, kw", [
    ("variational", dict(iter=100, output_samples=10, progress=False)),
    ("optimize", dict(iter=200)),
    ("laplace", dict(draws=10)),
    ("pathfinder", dict(num_paths=2, num_draws=20, max_lbfgs_iters=50, progress=False)),
])
def test_partial_init_in_every_method_is_reproducible(method, kw):
    model = Normal(y=[0.3, -0.2, 1.1, 0.6])

    def run(seed):
        fit = getattr(model, method)(seed=seed, init={"sigma": 1.3}, **kw)
        # the optimizer's path from its (partly random) start; the others' draws
        return fit.history["lp"] if method == "optimize" else fit["mu"]
    a = run(7)
    np.testing.assert_array_equal(a, run(7))
    assert not np.array_equal(a, run(8))


@pytest.mark.filterwarnings("ignore::UserWarning")       # one iteration: not converged
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_variational_and_optimize_start_at_the_given_values(hier):
    opt = hier.optimize(init={"mu": 0.25, "tau": 1.5}, iter=0, seed=2)
    assert opt.unconstrained[0] == 0.25 and opt.unconstrained[1] == np.log(1.5)
    fit = hier.variational(init={"mu": 0.25}, seed=2, iter=1, eta=1e-12,
                           adapt_engaged=False, output_samples=1, progress=False)
    assert fit.extras["mean"][0] == pytest.approx(0.25, abs=1e-9)


class Gated(sl.Model):
    """mu < 0 has no density: a random mu is redrawn, the given sigma never."""
    mu = sl.param.real()
    sigma = sl.param.real(lower=0)

    def log_prob(self, mu, sigma):
        if mu < 0:
            return -np.inf
        return sl.normal_lpdf(mu, 1, sigma) + sl.normal_lpdf(sigma, 1, 1)


def test_retry_redraws_only_the_missing_parameters():
    m = Gated()
    rng = np.random.default_rng(0)
    draws = [initial_point(m, {"sigma": 0.8}, rng)[0] for _ in range(20)]
    assert all(x[0] >= 0 for x in draws)                  # mu redrawn until finite
    assert all(x[1] == np.log(0.8) for x in draws)         # sigma kept

    class Never(Gated):
        def log_prob(self, mu, sigma):
            return -np.inf
    with pytest.raises(sl.ModelError, match=r"could not initialise the chain: at 100 "
                       r"random initial points.*the parameters the init leaves out"):
        initial_point(Never(), {"sigma": 0.8}, np.random.default_rng(0))


class Dependent(sl.Model):
    """A bound that is another parameter: the missing one is drawn first."""
    a = sl.param.real()
    b = sl.param.real(lower="a")

    def log_prob(self, a, b):
        return sl.normal_lpdf(a, 0, 1) + sl.normal_lpdf(b, a + 1, 1)


def test_partial_init_with_a_bound_depending_on_a_missing_parameter():
    m = Dependent()
    for seed in range(5):
        x, _, _ = initial_point(m, {"b": 5.0}, np.random.default_rng(seed))
        v = m.constrain(x)
        assert v["b"] == pytest.approx(5.0) and v["a"] < 5.0
        x, _, _ = initial_point(m, {"a": 0.5}, np.random.default_rng(seed))
        v = m.constrain(x)
        assert v["a"] == 0.5 and v["b"] > 0.5


# ---- the CLI's --init ------------------------------------------------------------------------
# the model file of the CLI tests: the normal model of tests/support/testkit.py (not
# this file's Normal)
MODEL_SRC = "import stanlite as sl\n\n\n" + inspect.getsource(testkit.Normal)


@pytest.fixture()
def files(tmp_path):
    (tmp_path / "normal.py").write_text(MODEL_SRC)
    (tmp_path / "data.json").write_text(json.dumps({"N": 3, "y": [0.1, -0.4, 1.2]}))
    (tmp_path / "partial.json").write_text(json.dumps({"sigma": 1.5}))
    (tmp_path / "bad.json").write_text(json.dumps({"sigma": -1.5}))
    (tmp_path / "typo.json").write_text(json.dumps({"sigm": 1.5}))
    return tmp_path


def _cli(argv):
    out = io.StringIO()
    code = cli.main(argv, out=out)
    return code, out.getvalue()


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("command, extra", [
    ("sample", ["--chains", "2", "--draws", "30", "--warmup", "30", "--serial",
                "--no-progress"]),
    ("variational", ["--iter", "200", "--draws", "50", "--no-progress"]),
    ("optimize", ["--iter", "100"]),
    ("laplace", ["--draws", "50"]),
    ("pathfinder", ["--num-paths", "2", "--draws", "50", "--max-lbfgs-iters", "50",
                    "--no-progress"]),
])
def test_cli_partial_init_file_is_accepted_and_reproducible(files, command, extra, capsys):
    argv = [command, f"{files / 'normal.py'}:Normal", "--data", str(files / "data.json"),
            "--init", str(files / "partial.json"), "--seed", "4", *extra]
    code, text = _cli(argv)
    assert code == 0, capsys.readouterr().err
    assert _cli(argv) == (0, text)                     # the same seed: the same output


@pytest.mark.parametrize("init, message", [
    ("bad.json", r"init for 'sigma' \(real<lower=0>\): must be >= 0, but is -1.5"),
    ("typo.json", r"init gives 'sigm'.*did you mean 'sigma'"),
    ("-1", r"init \(a radius\) must be a finite number >= 0, got -1"),
    ("nan", r"init \(a radius\) must be a finite number >= 0"),
])
def test_cli_bad_init_is_one_line_naming_it(files, init, message, capsys):
    path = str(files / init) if init.endswith(".json") else init
    code, _ = _cli(["sample", f"{files / 'normal.py'}:Normal", "--data",
                    str(files / "data.json"), "--init", path, "--serial", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert re.search(message, err), err


def test_cli_init_radius(files):
    code, text = _cli(["sample", f"{files / 'normal.py'}:Normal", "--data",
                       str(files / "data.json"), "--init", "0.5", "--chains", "1",
                       "--draws", "10", "--warmup", "10", "--serial", "--no-progress",
                       "--seed", "1"])
    assert code == 0 and "1 chains x 10 draws" in text
