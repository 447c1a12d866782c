"""The command line (``stanlite.cli``) and the main job (``python -m stanlite``):
sampling zoo and file models, writing netCDF, the zoo listing, commands not yet
available, and errors as one line on stderr with exit code 1 (never a traceback)."""

import io
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import stanlite as sl
from stanlite import cli
from stanlite.models import get, names

SMALL = ["--draws", "40", "--warmup", "40", "--chains", "2", "--seed", "5",
         "--no-progress", "--serial"]

MODEL_FILE = '''
import stanlite as sl


class Normal(sl.Model):
    """A normal sample with unknown mean and scale."""
    N = sl.data.int(lower=0)
    y = sl.data.vector("N")
    mu = sl.param.real()
    sigma = sl.param.real(lower=0)
    observed = ("y",)

    def log_prob(self, mu, sigma):
        return (sl.normal_lpdf(self.y, mu, sigma) + sl.normal_lpdf(mu, 0, 10)
                + sl.normal_lpdf(sigma, 0, 5))


NOT_A_MODEL = 3
'''


def run(argv):
    """``main(argv)`` in this process: (exit code, stdout text)."""
    out = io.StringIO()
    code = cli.main(argv, out=out)
    return code, out.getvalue()


def run_process(*args):
    return subprocess.run([sys.executable, "-m", "stanlite.cli", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "normal_model.py"
    path.write_text(MODEL_FILE)
    data = tmp_path / "data.json"
    data.write_text(json.dumps({"N": 4, "y": [0.3, -0.2, 1.1, 0.4]}))
    return path, data


def _assert_is_the_direct_fit(path, **kw):
    """The fit saved at ``path`` has the draws of eight_schools_noncentered sampled
    here, serially, with ``kw``: the command's arguments reached the sampler."""
    direct = get("eight_schools_noncentered").sample(progress=False, parallel=False, **kw)
    loaded = sl.load_fit(path)
    for k in direct.names:
        np.testing.assert_array_equal(loaded[k], direct[k])


# ---- sample ------------------------------------------------------------------------------
def test_sample_zoo_model_prints_summary_and_diagnostics_and_saves(tmp_path):
    out_file = tmp_path / "fit.nc"
    code, text = run(["sample", "eight_schools", *SMALL, "--output", str(out_file)])
    assert code == 0
    assert text.startswith("eight_schools_noncentered: 2 chains x 40 draws")
    header = next(line for line in text.splitlines() if "ess_bulk" in line).split()
    assert header == ["mean", "sd", "5%", "50%", "95%", "mcse_mean", "ess_bulk",
                      "ess_tail", "r_hat"]
    assert "theta[8]" in text and "divergen" in text and "R-hat" in text
    assert f"wrote {out_file}" in text
    # the arguments reached the sampler: the same fit as in Python
    _assert_is_the_direct_fit(out_file, chains=2, draws=40, warmup=40, seed=5)


def test_sample_file_model_with_data_and_sampler_options(model_file, tmp_path):
    path, data = model_file
    out_file = tmp_path / "normal.nc"
    code, text = run(["sample", f"{path}:Normal", "--data", str(data), *SMALL,
                      "--metric", "dense_e", "--adapt-delta", "0.9",
                      "--max-treedepth", "6", "-o", str(out_file)])
    assert code == 0
    assert "mu " in text and "sigma " in text
    fit = sl.load_fit(out_file)
    assert fit["mu"].shape == (2, 40) and fit.inv_metric.shape == (2, 2, 2)
    assert fit.max_treedepth == 6 and np.all(fit["treedepth__"] <= 6)
    idata = fit.to_arviz()
    assert set(idata.observed_data.data_vars) == {"y"}


def test_sample_zoo_model_with_other_data(tmp_path):
    data = tmp_path / "es.json"
    data.write_text(json.dumps({"J": 3, "y": [1.0, 2.0, 3.0], "sigma": [1.0, 1.0, 2.0]}))
    code, text = run(["sample", "eight_schools_noncentered", "--data", str(data), *SMALL])
    assert code == 0 and "theta[3]" in text and "theta[4]" not in text


# ---- models, optimize, variational -------------------------------------------------------
def test_models_lists_the_zoo_with_descriptions():
    code, text = run(["models"])
    assert code == 0
    lines = text.strip().splitlines()
    assert [line.split()[0] for line in lines] == names()
    row = next(line for line in lines if line.startswith("eight_schools_noncentered"))
    assert "non-centred" in row
    garch = next(line for line in lines if line.startswith("garch "))
    assert garch.rstrip().endswith("last variance.")       # the paragraph, on one line


# ---- errors: one line, exit code 1 ---------------------------------------------------------
@pytest.mark.parametrize("args, message", [
    (["sample", "eight_schoolz"], "no zoo model named 'eight_schoolz'.*did you mean"),
    (["sample", "nope.py:Model"], "model file 'nope.py' does not exist"),
    (["sample", "{file}"], "name the model class too"),
    (["sample", "{file}:Missing"], "has no class 'Missing'; its models: Normal"),
    (["sample", "{file}:NOT_A_MODEL"], "not a subclass of stanlite.Model"),
    (["sample", "{file}:Normal"], "missing data field 'N'"),
    (["sample", "{file}:Normal", "--data", "{bad_data}"], "data field 'y'.*shape"),
    (["sample", "{file}:Normal", "--data", "{file}"], "not valid JSON"),
    (["sample", "{file}:Normal", "--data", "missing.json"], "does not exist"),
    (["sample", "{broken}:X"], "could not load .*SyntaxError"),
])
def test_errors_are_one_line(args, message, model_file, tmp_path, capsys):
    path, _ = model_file
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"N": 3, "y": [1.0, 2.0]}))
    broken = tmp_path / "broken.py"
    broken.write_text("def (:\n")
    args = [a.format(file=path, bad_data=bad, broken=broken) for a in args]
    code, text = run(args)
    err = capsys.readouterr().err
    assert code == 1 and text == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("stanlite: error: ")
    assert "Traceback" not in err
    import re
    assert re.search(message, err), err


@pytest.mark.parametrize("command", ["sample", "laplace", "optimize"])
def test_output_is_checked_before_anything_runs(command, tmp_path, capsys, monkeypatch):
    # a model that would fail when run: the --output error comes first, so nothing ran
    calls = []
    monkeypatch.setattr(cli, "build_model", lambda *a: calls.append(a))
    name = "mode.csv" if command == "optimize" else "fit.nc"
    for output, message in ((tmp_path / "no_such" / name, "cannot be written: its "
                             "folder '.*no_such' does not exist"),
                            (tmp_path, "is a folder, not a file name")):
        code, text = run([command, "eight_schools", "--output", str(output)])
        err = capsys.readouterr().err
        assert code == 1 and text == "" and not calls
        assert len(err.strip().splitlines()) == 1, err
        import re
        assert re.search(f"stanlite: error: --output '{re.escape(str(output))}' "
                         f"{message}", err), err


def test_model_error_is_one_line(tmp_path, capsys):
    path = tmp_path / "never.py"
    path.write_text(textwrap.dedent('''
        import stanlite as sl

        class Never(sl.Model):
            a = sl.param.real()

            def log_prob(self, a):
                return sl.normal_lpdf(a, 0.0, -1.0)
    '''))
    code, _ = run(["sample", f"{path}:Never", *SMALL])
    err = capsys.readouterr().err
    assert code == 1 and "could not initialise the chain" in err
    assert len(err.strip().splitlines()) == 1


def test_usage_errors_exit_2(capsys):
    for argv in (["sample", "eight_schools", "--chains", "0"],
                 ["sample", "eight_schools", "--adapt-delta", "1.5"],
                 ["sample", "eight_schools", "--metric", "bogus"], ["frobnicate"], []):
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        assert e.value.code == 2
    capsys.readouterr()


def test_as_a_process_exit_codes_and_no_traceback():
    ok = run_process("models")
    assert ok.returncode == 0 and "eight_schools_noncentered" in ok.stdout
    bad = run_process("sample", "not_a_model")
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.startswith("stanlite: error: no zoo model named 'not_a_model'")
    assert "Traceback" not in bad.stderr
    na = run_process("optimize", "eight_schools")
    assert na.returncode == (0 if callable(getattr(sl.Model, "optimize", None)) else 2)


# ---- the main job ---------------------------------------------------------------------------
def test_main_job_small():
    from stanlite.__main__ import MODEL, main
    out = io.StringIO()
    fit = main(chains=2, draws=30, warmup=30, seed=1, progress=False, out=out)
    text = out.getvalue()
    first = text.splitlines()[0]
    assert first.startswith("stanlite main job:") and MODEL in first
    assert "2 chains x (30 warmup + 30 draws), seed 1" in first
    assert "theta[1]" in text and "Diagnostics:" in text and "divergen" in text
    assert fit["theta"].shape == (2, 30, 8)


# ---- optimize, laplace, pathfinder, variational --------------------------------------------
def test_optimize_prints_estimates_and_convergence_and_writes_csv_json(tmp_path, capsys):
    csv, js = tmp_path / "mode.csv", tmp_path / "mode.json"
    code, text = run(["optimize", "linear_regression", "--seed", "2", "-o", str(csv)])
    assert code == 0
    first, second = text.splitlines()[:2]
    assert first.startswith("linear_regression: optimize (lbfgs, jacobian=False, seed 2): "
                            "converged after")
    assert second.startswith("converged: ")
    direct = get("linear_regression").optimize(seed=2)
    row = next(line for line in text.splitlines() if line.startswith("sigma "))
    assert float(row.split()[1]) == pytest.approx(direct["sigma"], rel=1e-5)
    import pandas as pd
    df = pd.read_csv(csv)
    assert df.shape[0] == 1 and list(df.columns[:4]) == ["lp__", "beta[1]", "beta[2]",
                                                         "sigma"]
    np.testing.assert_allclose(df[["beta[1]", "beta[2]"]].values[0], direct["beta"],
                               rtol=1e-12)
    code, _ = run(["optimize", "linear_regression", "--seed", "2", "--method", "newton",
                   "--jacobian", "-o", str(js)])
    d = json.loads(js.read_text())
    assert code == 0 and d["method"] == "newton" and d["jacobian"] is True
    assert d["converged"] is True and len(d["beta"]) == 2
    assert capsys.readouterr().err == ""


def test_optimize_init_file_tolerances_and_not_converged_warning(model_file, tmp_path,
                                                                  capsys):
    path, data = model_file
    init = tmp_path / "init.json"
    init.write_text(json.dumps({"mu": 0.5, "sigma": 2.0}))
    code, text = run(["optimize", f"{path}:Normal", "--data", str(data), "--init",
                      str(init), "--iter", "2"])
    err = capsys.readouterr().err
    assert code == 0 and "NOT converged after 2 iterations" in text
    assert err.startswith("stanlite: warning: optimize (lbfgs) did not converge")
    assert len(err.strip().splitlines()) == 1
    # seeded: from some random starts L-BFGS-B's line search stalls just above
    # tol_grad = 1e-8 (an honest "not converged"), which is not what this checks
    code, text = run(["optimize", f"{path}:Normal", "--data", str(data), "--tol-rel-grad",
                      "0", "--tol-rel-obj", "0", "--tol-obj", "0", "--tol-param", "0",
                      "--seed", "1"])
    assert code == 0 and "gradient norm" in text.splitlines()[1]


@pytest.mark.parametrize("args, message", [
    (["optimize", "linear_regression", "-o", "mode.txt"], "must end in .csv or .json"),
    (["optimize", "linear_regression", "--init", "nope.json"], "init file 'nope.json' "
     "does not exist"),
    (["optimize", "linear_regression", "--init", "{bad_init}"],
     "init gives 'alpha', which is not a parameter"),
    (["laplace", "{file}:Normal", "--data", "{data}", "--init", "{list_init}"],
     "must hold a JSON object"),
])
def test_approximation_errors_are_one_line(args, message, model_file, tmp_path, capsys,
                                           monkeypatch):
    path, data = model_file
    bad_init = tmp_path / "bad_init.json"
    bad_init.write_text(json.dumps({"alpha": 1.0}))
    list_init = tmp_path / "list_init.json"
    list_init.write_text("[1, 2]")
    monkeypatch.chdir(tmp_path)
    args = [a.format(file=path, data=data, bad_init=bad_init, list_init=list_init)
            for a in args]
    code, _ = run(args)
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    import re
    assert re.search(message, err), err


def test_laplace_and_pathfinder_print_summary_and_diagnostics_and_save(model_file,
                                                                      tmp_path, capsys):
    import arviz as az
    path, data = model_file
    for cmd, extra in (("laplace", ["--draws", "200"]),
                       ("pathfinder", ["--draws", "200", "--num-paths", "2",
                                       "--no-progress"])):
        out = tmp_path / f"{cmd}.nc"
        code, text = run([cmd, f"{path}:Normal", "--data", str(data), "--seed", "3",
                          *extra, "-o", str(out)])
        assert code == 0, capsys.readouterr().err
        assert text.startswith(f"{path}:Normal: {cmd} (200 draws")
        assert "mu " in text and "sigma " in text and "Pareto k-hat" in text
        idata = az.from_netcdf(out)
        assert idata.posterior["mu"].shape == (1, 200)
        assert idata.posterior.attrs["inference_method"] == cmd
    capsys.readouterr()


def test_variational_runs_advi(model_file, tmp_path, capsys):
    path, data = model_file
    out = tmp_path / "advi.nc"
    code, text = run(["variational", f"{path}:Normal", "--data", str(data), "--seed", "1",
                      "--method", "fullrank", "--draws", "100", "--iter", "2000",
                      "--no-progress", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert text.startswith(f"{path}:Normal: variational (fullrank, 100 draws, seed 1)")
    assert "mu " in text and "Pareto k-hat" in text and f"wrote {out}" in text
    assert all(line.startswith("stanlite: warning: ") for line in err.splitlines())


def test_approximation_usage_errors_exit_2(capsys):
    for argv in (["optimize", "eight_schools", "--method", "sgd"],
                 ["optimize", "eight_schools", "--tol-grad", "-1"],
                 ["pathfinder", "eight_schools", "--num-paths", "0"],
                 ["variational", "eight_schools", "--eta", "0"],
                 ["laplace", "eight_schools", "--draws", "0"]):
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        assert e.value.code == 2
    capsys.readouterr()


# ---- --output that cannot be written: refused before sampling; a save failing after ----------
TINY = ["--draws", "10", "--warmup", "10", "--chains", "1", "--seed", "3", "--serial"]


@pytest.fixture
def sample_calls(monkeypatch):
    """The calls of Model.sample (the real one runs)."""
    calls = []
    real = sl.Model.sample

    def spy(self, *a, **kw):
        calls.append(kw)
        return real(self, *a, **kw)
    monkeypatch.setattr(sl.Model, "sample", spy)
    return calls


def _unwritable_outputs(tmp_path):
    import os
    (tmp_path / "afile").write_text("a regular file")
    os.mkfifo(tmp_path / "pipe.nc")
    return [(tmp_path / "afile" / "fit.nc", "cannot be written: its folder '{}' is a "
             "file, not a folder".format(tmp_path / "afile")),
            (tmp_path / "no_such" / "fit.nc", "cannot be written: its folder '{}' does "
             "not exist".format(tmp_path / "no_such")),
            (tmp_path / "pipe.nc", "is a FIFO (named pipe), not a regular file: a fit is "
             "never saved over it; give the name of a regular file")]


def test_unwritable_output_is_refused_before_sampling(tmp_path, capsys, sample_calls):
    import stat
    for output, message in _unwritable_outputs(tmp_path):
        code, text = run(["sample", "eight_schools", *TINY, "--output", str(output)])
        captured = capsys.readouterr()
        assert code == 1 and text == "" and not sample_calls, (output, captured.err)
        assert captured.err == f"stanlite: error: --output '{output}' {message}\n"
        assert "%" not in captured.err                  # no progress bar: nothing ran
    assert stat.S_ISFIFO((tmp_path / "pipe.nc").stat().st_mode)
    # the check is a real trial: a folder where no file can be made (as /sys for root)
    from stanlite import _fitio

    def refused(**kw):
        raise PermissionError(13, "Permission denied")
    import types
    real = _fitio.tempfile
    _fitio.tempfile = types.SimpleNamespace(mkstemp=refused)
    try:
        code, text = run(["sample", "eight_schools", *TINY, "--output",
                          str(tmp_path / "fit.nc")])
    finally:
        _fitio.tempfile = real
    err = capsys.readouterr().err
    assert code == 1 and text == "" and not sample_calls
    assert err == f"stanlite: error: --output '{tmp_path / 'fit.nc'}' cannot create a " \
        f"file in '{tmp_path}': permission denied\n"
    # and a writable one: the trial file is gone, sampling ran
    code, text = run(["sample", "eight_schools", *TINY, "--no-progress", "--output",
                      str(tmp_path / "fit.nc")])
    assert code == 0 and len(sample_calls) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "fit.nc", "pipe.nc"]


def _failing_save(monkeypatch, fails):
    """Fit.save raising a full disk for the paths ``fails(path)`` says."""
    import errno
    from stanlite.fit import Fit
    real = Fit.save
    tried = []

    def save(self, path):
        tried.append(str(path))
        if fails(str(path)):
            e = sl.FitFileError(str(path), "could not be written (No space left on device)")
            e.errno = errno.ENOSPC
            raise e
        return real(self, path)
    monkeypatch.setattr(Fit, "save", save)
    return tried


def test_a_save_failing_after_sampling_keeps_the_draws(tmp_path, monkeypatch, capsys):
    out_dir, cwd = tmp_path / "out", tmp_path / "cwd"
    out_dir.mkdir()
    cwd.mkdir()
    (cwd / "fit.nc").write_bytes(b"the user's own file")     # never overwritten
    monkeypatch.chdir(cwd)
    output = out_dir / "fit.nc"
    tried = _failing_save(monkeypatch, lambda p: p == str(output))
    code, text = run(["sample", "eight_schools", *TINY, "--no-progress",
                      "--output", str(output)])
    err = capsys.readouterr().err
    fallback = cwd / "fit.1.nc"
    assert code == 1 and tried == [str(output), str(fallback)]
    assert err == (f"stanlite: error: --output '{output}' could not be written (No space "
                   f"left on device); the fit was saved to '{fallback}' instead\n")
    assert "ess_bulk" in text and "R-hat" in text and f"wrote {fallback}" in text
    assert (cwd / "fit.nc").read_bytes() == b"the user's own file" and not output.exists()
    _assert_is_the_direct_fit(fallback, chains=1, draws=10, warmup=10, seed=3)


def test_a_save_failing_everywhere_but_the_temporary_folder(tmp_path, monkeypatch, capsys):
    import tempfile
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.chdir(tmp_path)
    tried = _failing_save(monkeypatch, lambda p: not p.startswith(str(tmp)))
    code, text = run(["sample", "eight_schools", *TINY, "--no-progress",
                      "--output", str(tmp_path / "out.nc")])
    err = capsys.readouterr().err
    assert code == 1 and tried == [str(tmp_path / "out.nc"), str(tmp / "out.nc")]
    assert f"the fit was saved to '{tmp / 'out.nc'}' instead" in err
    assert sl.load_fit(tmp / "out.nc").num_draws == 10 and "ess_bulk" in text
    # nowhere at all: the message says so (and every place tried, with its reason)
    tried.clear()
    _failing_save(monkeypatch, lambda p: True)
    code, text = run(["sample", "eight_schools", *TINY, "--no-progress",
                      "--output", str(tmp_path / "out.nc")])
    err = capsys.readouterr().err
    assert code == 1 and "ess_bulk" in text and "wrote" not in text
    assert "the fit could not be saved elsewhere either: " in err
    assert err.startswith(f"stanlite: error: --output '{tmp_path / 'out.nc'}' could not "
                          "be written (No space left on device); the fit could not be "
                          f"saved elsewhere either: '{tmp / 'out.1.nc'}' (could not be")


class _Captured(Exception):
    pass


@pytest.mark.parametrize("argv, expected", [
    (["sample", "eight_schools", "--sampler", "rhmc"], None),      # RHMC's own default
    (["sample", "eight_schools"], None),                            # NUTS's own default
    (["sample", "eight_schools", "--sampler", "rhmc", "--adapt-delta", "0.9"], 0.9),
])
def test_sample_passes_adapt_delta_only_when_given(monkeypatch, argv, expected):
    seen = {}

    def capture(self, **kw):
        seen.update(kw)
        raise _Captured

    monkeypatch.setattr(sl.Model, "sample", capture)
    cli.main(argv, out=io.StringIO())       # (the CLI reports the exception and exits)
    assert "chains" in seen                 # sample was called
    assert seen.get("adapt_delta") == expected
