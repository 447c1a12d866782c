"""Faults after sampling never lose draws: ``generated_quantities`` failing at some or
every draw (NaN, one warning), a real Ctrl-C (SIGINT) while the generated quantities
are computed, and a full disk (a file-size limit) while a fit is saved over a good
file. The signal and disk cases run in child processes."""

import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import stanlite as sl

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and rlimits")


class Flaky(sl.Model):
    """generated_quantities raises where mu > 0.5 (a bug that shows at some draws)."""
    mu = sl.param.real()

    def log_prob(self, mu):
        return sl.normal_lpdf(mu, 0.0, 1.0)

    def generated_quantities(self, rng, mu):
        if mu > 0.5:
            raise ZeroDivisionError("boom")
        return {"k": rng.poisson(3.0), "v": np.array([mu, 2 * mu])}


class AlwaysFails(Flaky):
    def generated_quantities(self, rng, mu):
        return {"v": [1.0, mu][5]}                  # an IndexError at every draw


class FailsAtOrigin(Flaky):
    """Undefined at mu = 0 (the origin output_shapes used to rely on)."""
    def generated_quantities(self, rng, mu):
        if mu == 0.0:
            raise ValueError("undefined at 0")
        return {"logabs": np.log(abs(mu))}


class ShapeChanges(Flaky):
    def generated_quantities(self, rng, mu):
        return {"v": np.zeros(2 if mu < 0 else 3)}


_KW = dict(chains=2, draws=60, warmup=60, seed=5, progress=False, parallel=False)


def test_gq_failing_at_some_draws_gives_nan_and_one_warning():
    with pytest.warns(RuntimeWarning, match=r"failed at \d+ of 120 draws \(the first at "
                      r"chain \d, draw \d+: ZeroDivisionError: boom\).*\(k, v\) are NaN"
                      ) as rec:
        fit = Flaky().sample(**_KW)
    assert len([w for w in rec if "generated_quantities" in str(w.message)]) == 1
    bad = fit["mu"] > 0.5
    assert 0 < bad.sum() < 120
    assert fit["mu"].shape == (2, 60) and np.isfinite(fit["mu"]).all()
    assert np.isnan(fit["k"][bad]).all() and np.isfinite(fit["k"][~bad]).all()
    assert np.isnan(fit["v"][bad]).all() and fit["v"].shape == (2, 60, 2)
    np.testing.assert_array_equal(fit["v"][~bad][:, 1], 2 * fit["mu"][~bad])
    # integer draws are floats (NaN fits them); the others are still whole numbers
    assert fit["k"].dtype == float and (fit["k"][~bad] == np.round(fit["k"][~bad])).all()
    # the same warning and values when the fit is rebuilt (the seeds are kept)
    with pytest.warns(RuntimeWarning, match="generated_quantities failed"):
        again = Flaky().sample(resume_from=fit, progress=False, parallel=False)
    np.testing.assert_array_equal(again["k"], fit["k"])


def test_gq_failing_everywhere_keeps_the_draws():
    with pytest.warns(RuntimeWarning, match="failed at every one of the 120 draws .*"
                      "IndexError.*no generated quantities; the parameter draws are all"):
        fit = AlwaysFails().sample(**_KW)
    assert fit.names == ["mu"] and fit["mu"].shape == (2, 60)
    assert np.isfinite(fit["mu"]).all()


def test_gq_shapes_come_from_the_draws_not_the_origin():
    m = FailsAtOrigin()
    fit = m.sample(**_KW)                           # no warning: mu is never exactly 0
    np.testing.assert_array_equal(fit["logabs"], np.log(np.abs(fit["mu"])))
    assert m.output_shapes() == ({}, {"logabs": ()})   # found away from the origin
    with pytest.raises(sl.ModelError, match="failed at the origin .* and at 20 random "
                       "points; the first failure: IndexError"):
        AlwaysFails().output_shapes()


def test_gq_changing_shape_counts_as_a_failure():
    with pytest.warns(RuntimeWarning, match=r"ModelError: generated quantity 'v' has "
                      r"shape \(\d,\) here and \(\d,\) at the first draw"):
        fit = ShapeChanges().sample(**_KW)
    first = fit["mu"][0, 0]
    same = (fit["mu"] < 0) == (first < 0)
    assert np.isfinite(fit["v"][same]).all() and np.isnan(fit["v"][~same]).all()


class TPBreaks(sl.Model):
    """transformed_parameters that fails where mu > 0.5 once ``broken`` is set (after
    sampling: a block that worked on traced values and fails on plain floats)."""
    mu = sl.param.real()
    broken = False

    def transformed_parameters(self, mu):
        if TPBreaks.broken and mu > 0.5:
            raise ValueError("tp")
        return {"mu2": 2 * mu}

    def log_prob(self, mu):
        return sl.normal_lpdf(mu, 0.0, 1.0)

    def generated_quantities(self, rng, mu, mu2):
        return {"g": mu2 + 1}


def test_transformed_parameters_failing_after_sampling_keeps_the_draws():
    from stanlite.fit import Fit
    m = TPBreaks()
    fit = m.sample(**_KW)
    TPBreaks.broken = True
    try:
        with pytest.warns(RuntimeWarning, match=r"transformed_parameters failed at \d+ "
                          r"of 120 draws .*ValueError: tp\): their transformed parameters "
                          "and generated quantities are NaN"):
            again = Fit(m, fit.chain_states, fit.gq_seeds)
    finally:
        TPBreaks.broken = False
    bad = fit["mu"] > 0.5
    np.testing.assert_array_equal(again["mu"], fit["mu"])
    assert np.isnan(again["mu2"][bad]).all() and np.isnan(again["g"][bad]).all()
    np.testing.assert_array_equal(again["g"][~bad], fit["g"][~bad])


# ---- real signals and rlimits in child processes --------------------------------------------
def _script(code, folder):
    script = folder / "child.py"
    script.write_text(textwrap.dedent(code))
    return script


def _child(code, tmp_path, **kw):
    script = _script(code, tmp_path)
    env = dict(os.environ, PYTHONWARNINGS="default", STANLITE_COMPILE="0")
    return subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


_SLOW_GQ = """
    import sys, time
    import numpy as np
    import stanlite as sl

    class Slow(sl.Model):
        mu = sl.param.real()
        started = False

        def log_prob(self, mu):
            return sl.normal_lpdf(mu, 0.0, 1.0)

        def generated_quantities(self, rng, mu):
            if not Slow.started:
                Slow.started = True
                print("GQ-STARTED", flush=True)
            time.sleep(0.01)
            return {"y_rep": rng.normal(mu, 1.0)}

    fit = Slow().sample(chains=3, draws=200, warmup=50, seed=2, progress=False,
                        parallel={parallel})
    fit.save("fit.nc")
    print("SAVED", fit.num_chains, fit.num_draws,
          int(np.isfinite(fit["mu"]).sum()), int(np.isfinite(fit["y_rep"]).sum()),
          flush=True)
"""


@pytest.mark.parametrize("parallel", [False, True])
def test_ctrl_c_during_generated_quantities_keeps_every_draw(tmp_path, parallel):
    p = _child(_SLOW_GQ.replace("{parallel}", str(parallel)), tmp_path)
    try:
        line = p.stdout.readline()
        assert line.strip() == "GQ-STARTED", (line, p.stderr.read() if p.poll() else "")
        time.sleep(0.3)                          # some quantities computed, most not
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    tag, chains, draws, finite_mu, finite_rep = out.split()
    assert (tag, int(chains), int(draws)) == ("SAVED", 3, 200)
    assert int(finite_mu) == 600                 # every parameter draw is there
    assert 0 < int(finite_rep) < 600             # the quantities not reached are NaN
    assert "interrupted while computing the transformed parameters and generated " \
           "quantities" in err and "resume_from=fit) recomputes them" in err
    fit = sl.load_fit(tmp_path / "fit.nc")
    assert fit["mu"].shape == (3, 200) and np.isfinite(fit["mu"]).all()
    assert fit.unconstrained_draws.shape == (3, 200, 1)


# ---- damaged, hand-edited and foreign files ---------------------------------------------------
@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A small fit, its file and the file's bytes."""
    from stanlite.models import get
    m = get("eight_schools_noncentered")
    fit = m.sample(chains=2, draws=30, warmup=30, seed=1, progress=False, parallel=False)
    path = fit.save(tmp_path_factory.mktemp("good") / "good.nc")
    with open(path, "rb") as f:
        raw = f.read()
    return m, fit, path, raw


def _same(a, b):
    assert a.names == b.names
    for k in a.names:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    for k, v in a.sampler_stats.items():
        np.testing.assert_array_equal(v, b[k], err_msg=k)


def _load_damaged(path, m):
    """Load a damaged file: a FitFileError naming the path (None if it loads)."""
    try:
        return sl.load_fit(path, model=m)
    except sl.FitFileError as e:
        assert str(path) in str(e) and e.path == str(path)
        return e


def test_truncated_files(saved, tmp_path):
    m, fit, _, raw = saved
    offsets = [0, 1, 4, 8, 100, 511, 512, 2048, len(raw) // 4, len(raw) // 2,
               3 * len(raw) // 4, len(raw) - 100, len(raw) - 1]
    for k in offsets:
        p = tmp_path / f"cut{k}.nc"
        p.write_bytes(raw[:k])
        e = _load_damaged(p, m)
        assert isinstance(e, sl.FitFileError), k
        if k == 0:
            assert "is empty" in str(e)


def test_flipped_bytes_never_load_silently_wrong(saved, tmp_path):
    # 80 files with 1-3 bytes changed at random offsets (fixed seed): each is either
    # a FitFileError naming the path, or loads to exactly the saved fit (a byte HDF5
    # does not use); measured at seed 20261126: 41 errors, 39 identical
    m, fit, _, raw = saved
    rng = np.random.default_rng(20261126)
    outcomes = {"error": 0, "identical": 0}
    p = tmp_path / "flipped.nc"
    for _ in range(80):
        b = bytearray(raw)
        for off in rng.integers(0, len(raw), size=rng.integers(1, 4)):
            b[off] ^= int(rng.integers(1, 256))
        p.write_bytes(bytes(b))
        got = _load_damaged(p, m)
        if isinstance(got, sl.FitFileError):
            outcomes["error"] += 1
        else:
            _same(fit, got)
            outcomes["identical"] += 1
    assert outcomes["error"] > 20 and outcomes["identical"] > 0, outcomes


def test_foreign_files(saved, tmp_path):
    m, fit, _, raw = saved
    cases = {"text.nc": (b"not netCDF at all\n", "is not a netCDF-4 .HDF5. file"),
             "random.nc": (np.random.default_rng(3).bytes(5000), "is not a netCDF-4"),
             "nc3.nc": (b"CDF\x01" + bytes(200), "netCDF-3 file"),
             "empty.nc": (b"", "is empty")}
    for name, (content, msg) in cases.items():
        p = tmp_path / name
        p.write_bytes(content)
        with pytest.raises(sl.FitFileError, match=f"{name}.*{msg}"):
            sl.load_fit(p)
    with pytest.raises(sl.FitFileError, match="is a folder"):
        sl.load_fit(tmp_path)
    with pytest.raises(FileNotFoundError, match="no fit file"):
        sl.load_fit(tmp_path / "missing.nc")
    # an approximation's file (ApproximateFit.save's groups) is named as such
    import xarray as xr
    from stanlite import _fitio
    approx = _fitio.write_netcdf(tmp_path / "laplace.nc", {
        "posterior": fit.to_arviz().posterior,
        "stanlite_approximation": xr.Dataset({"u": (("d",), np.zeros(3))})})
    with pytest.raises(sl.FitFileError, match="holds an approximation"):
        sl.load_fit(approx)


def _edited(saved, tmp_path, name, edit):
    import shutil

    import h5py
    p = tmp_path / name
    shutil.copy(saved[2], p)
    with h5py.File(p, "r+") as f:
        edit(f)
    return p


def _replace_state_json(f, text):
    from stanlite import _fitio           # the checksum recomputed: only the JSON is bad
    g = f["stanlite_state"]
    arrays = {k: g[k][()] for k in g if k != "state_json" and not k.endswith("_bytes")
              and g[k].ndim and "_dim_" not in k}
    del g["state_json"]
    g.create_dataset("state_json", data=np.frombuffer(text, dtype=np.uint8))
    return _fitio.state_digest(text, arrays)


@pytest.mark.parametrize("case, edit, msg", [
    ("no_posterior", lambda f: f.__delitem__("posterior"),
     "group 'posterior' is missing"),
    ("renamed_stats", lambda f: f.move("sample_stats", "stats"),
     "group 'sample_stats' is missing"),
    ("no_state", lambda f: f.__delitem__("stanlite_state"), "has no 'stanlite_state'"),
    ("no_mu", lambda f: f["posterior"].__delitem__("mu"),
     "cannot be read|lost the variable.*mu"),
    ("edited_value", lambda f: f["posterior/theta"].__setitem__((0, 0, 0), 1.5),
     "values of theta in group 'posterior' do not match their checksums"),
    ("no_checksum", lambda f: f["stanlite_state"].attrs.__delitem__("checksum"),
     "lost its checksum"),
    ("bad_checksum", lambda f: f["stanlite_state"].attrs.__setitem__("checksum", "00"),
     "does not match its checksum"),
    ("no_json", lambda f: f["stanlite_state"].__delitem__("state_json"),
     "cannot be read|no variable 'state_json'"),
])
def test_hand_edited_files(saved, tmp_path, case, edit, msg):
    p = _edited(saved, tmp_path, f"{case}.nc", edit)
    with pytest.raises(sl.FitFileError, match=f"{case}.nc.*({msg})"):
        sl.load_fit(p, model=saved[0])


@pytest.mark.parametrize("text, msg", [
    (b"{not json", "its state .JSON. is not valid"),
    (b"[1, 2]", "JSON list, not an object"),
    (b'{"format": "other", "version": 1}', "has format 'other'"),
    (b'{"format": "stanlite-fit", "version": 99}', "newer stanlite .format version 99"),
    (b'{"format": "stanlite-fit", "version": "2"}', "format version '2' is not valid"),
    (b'{"format": "stanlite-fit", "version": 2}', "no 'checksums'"),
])
def test_bad_state_json(saved, tmp_path, text, msg):
    def edit(f):
        f["stanlite_state"].attrs["checksum"] = _replace_state_json(f, text)
    p = _edited(saved, tmp_path, "state.nc", edit)
    with pytest.raises(sl.FitFileError, match=msg):
        sl.load_fit(p)


def test_inconsistent_state_is_named(saved, tmp_path):
    # a state whose checksums are right but whose pieces disagree (a tool that
    # rewrote the file): the pieces are checked against each other
    import copy
    m, fit, _, _ = saved
    bad = copy.copy(fit)
    bad.chain_states = [copy.deepcopy(s) for s in fit.chain_states]
    bad.chain_states[1].stats["lp__"] = bad.chain_states[1].stats["lp__"][:-3]
    p = bad.save(tmp_path / "stats.nc")
    with pytest.raises(sl.FitFileError, match="chain state 2: statistic 'lp__' has 27 "
                       "values for 30 draws"):
        sl.load_fit(p)
    bad.chain_states[1] = copy.deepcopy(fit.chain_states[1])
    bad.chain_states[0].draws = [x[:5] for x in bad.chain_states[0].draws]
    p = bad.save(tmp_path / "dim.nc")
    with pytest.raises(sl.FitFileError, match=r"chain state 1: draw 1 of 'draws' has "
                       r"shape \(5,\), not \(10,\)"):
        sl.load_fit(p)


# ---- a full disk while saving ---------------------------------------------------------------
_FULL_DISK = """
    import resource, signal, sys
    import stanlite as sl

    fit = sl.load_fit(sys.argv[1])
    limit = int(sys.argv[3])
    # a file-size limit is a full disk for this process: writes past it fail (EFBIG)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        fit.save(sys.argv[2])
    except sl.FitFileError as e:
        print(f"FitFileError errno={e.errno}: {e}")
        sys.exit(3)
    print("saved")
"""


@pytest.mark.parametrize("limit", [1, 4096, 100_000])
def test_full_disk_never_damages_the_file_it_replaces(saved, tmp_path, limit):
    m, fit, good, raw = saved
    target = tmp_path / "fit.nc"
    target.write_bytes(raw)
    os.chmod(target, 0o640)
    assert len(raw) > limit
    script = _script(_FULL_DISK, tmp_path)
    r = subprocess.run([sys.executable, str(script), good, str(target), str(limit)],
                       capture_output=True, text=True, timeout=300)
    # an error the program can handle, not a signal (it segfaulted before)
    assert r.returncode == 3, (r.returncode, r.stdout, r.stderr[-2000:])
    assert f"fit file '{target}': could not be written (File too large); the " \
           "existing file is unchanged" in r.stdout
    assert "errno=27" in r.stdout                # EFBIG
    assert target.read_bytes() == raw
    assert sorted(os.listdir(tmp_path)) == ["child.py", "fit.nc"]   # no temporary file
    _same(fit, sl.load_fit(target, model=m))


def test_save_is_atomic_and_keeps_permissions(saved, tmp_path):
    m, fit, good, raw = saved
    target = tmp_path / "fit.nc"
    target.write_bytes(b"old")
    os.chmod(target, 0o640)
    assert fit.save(target) == str(target)
    assert os.stat(target).st_mode & 0o777 == 0o640
    assert os.listdir(tmp_path) == ["fit.nc"]
    _same(fit, sl.load_fit(target))
    # through a symbolic link: the file it names is replaced, the link stays
    link = tmp_path / "link.nc"
    link.symlink_to(target)
    fit.save(link)
    assert link.is_symlink() and sorted(os.listdir(tmp_path)) == ["fit.nc", "link.nc"]
    _same(fit, sl.load_fit(link))
    with pytest.raises(sl.FitFileError, match="is a folder"):
        fit.save(tmp_path)
    # a value the file format has no place for: named with the path
    import copy
    odd = copy.copy(fit)
    odd.chain_states = [copy.copy(s) for s in fit.chain_states]
    odd.chain_states[0].extra = object()
    with pytest.raises(sl.FitFileError, match="fit.nc.*cannot save a value of type object"):
        odd.save(target)
    _same(fit, sl.load_fit(target))
    with pytest.raises(sl.FitFileError, match="its folder .* does not exist"):
        fit.save(tmp_path / "no" / "such" / "fit.nc")


def test_ctrl_c_while_saving_leaves_the_old_file(saved, tmp_path, monkeypatch):
    m, fit, good, raw = saved
    target = tmp_path / "fit.nc"
    target.write_bytes(raw)
    from stanlite import _fitio

    real_write = os.write

    def interrupted_write(fd, data):
        real_write(fd, bytes(data[:100]))
        raise KeyboardInterrupt
    monkeypatch.setattr(_fitio.os, "write", interrupted_write)
    with pytest.raises(KeyboardInterrupt):
        fit.save(target)
    monkeypatch.undo()
    assert target.read_bytes() == raw and os.listdir(tmp_path) == ["fit.nc"]


# ---- targets a save must not replace, folders it cannot write in ------------------------------
def _no_temporary_files(folder):
    return not [n for n in os.listdir(folder) if n.endswith(".tmp")]


@pytest.fixture(scope="module")
def approx():
    from stanlite.models import get
    return get("eight_schools_noncentered").laplace(draws=20, seed=1)


@pytest.mark.parametrize("which", ["fit", "approx"])
def test_save_never_replaces_a_fifo_or_a_folder(saved, approx, tmp_path, which):
    import stat
    fit = saved[1] if which == "fit" else approx
    fifo = tmp_path / "pipe.nc"
    os.mkfifo(fifo)
    link = tmp_path / "link.nc"
    link.symlink_to(fifo)
    for target in (fifo, link):
        with pytest.raises(sl.FitFileError, match=re.escape(f"fit file '{target}': is a "
                                                             "FIFO (named pipe)")) as e:
            fit.save(target)
        assert e.value.path == str(target) and "not a regular file" in str(e.value)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and link.is_symlink()
    folder = tmp_path / "folder.nc"
    folder.mkdir()
    with pytest.raises(sl.FitFileError, match=f"'{re.escape(str(folder))}': is a folder"):
        fit.save(folder)
    assert folder.is_dir() and not os.listdir(folder)
    assert _no_temporary_files(tmp_path)
    # a symbolic link to a regular file is followed (the file it names is replaced)
    regular = tmp_path / "regular.nc"
    regular.write_bytes(b"old")
    (tmp_path / "to_regular.nc").symlink_to(regular)
    fit.save(tmp_path / "to_regular.nc")
    assert (tmp_path / "to_regular.nc").is_symlink() and regular.stat().st_size > 3


def _unwritable_cases(tmp_path):
    """(target, errno, message) for folders no file can be made in, as any user."""
    import errno
    (tmp_path / "afile").write_text("a regular file")
    return [(tmp_path / "afile" / "x.nc", errno.ENOTDIR,
             f"its folder '{tmp_path / 'afile'}' is a file, not a folder"),
            (tmp_path / "no_such" / "x.nc", errno.ENOENT,
             f"its folder '{tmp_path / 'no_such'}' does not exist")]


@pytest.mark.parametrize("which", ["fit", "approx"])
def test_save_errors_name_the_target_and_the_reason(saved, approx, tmp_path, which):
    fit = saved[1] if which == "fit" else approx
    for target, code, message in _unwritable_cases(tmp_path):
        with pytest.raises(sl.FitFileError) as e:
            fit.save(target)
        assert isinstance(e.value, OSError) and e.value.errno == code
        assert str(e.value) == f"fit file '{target}': cannot be written: {message}"


@pytest.mark.skipif(os.geteuid() == 0, reason="permission bits do not stop root")
def test_save_in_a_read_only_folder(saved, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    try:
        with pytest.raises(sl.FitFileError, match=re.escape(f"fit file '{ro / 'x.nc'}'")):
            saved[1].save(ro / "x.nc")
    finally:
        os.chmod(ro, 0o700)
    assert os.listdir(ro) == []


@pytest.mark.parametrize("which", ["fit", "approx"])
@pytest.mark.parametrize("code, reason", [
    (13, "permission denied"),                       # /sys, even for root
    (30, "the file system is read-only"),
    (2, "the folder does not accept new files")])    # /proc
def test_a_temporary_file_that_cannot_be_created_is_named_with_the_target(
        saved, approx, tmp_path, monkeypatch, which, code, reason):
    # what /sys and /proc do to root, whom permission bits never stop
    from stanlite import _fitio
    fit = saved[1] if which == "fit" else approx

    def refused(**kw):
        raise OSError(code, os.strerror(code), os.path.join(kw["dir"], "." + kw["prefix"]))
    monkeypatch.setattr(_fitio.tempfile, "mkstemp", refused)
    target = tmp_path / "x.nc"
    with pytest.raises(sl.FitFileError) as e:
        fit.save(target)
    assert e.value.errno == code and e.value.path == str(target)
    assert str(e.value) == f"fit file '{target}': cannot create a file in '{tmp_path}': " \
        f"{reason}"


def test_save_never_replaces_a_socket(saved, tmp_path):
    import socket
    import stat
    path = tmp_path / "s.nc"
    if len(str(path)) > 100:
        pytest.skip("the path is too long for a Unix socket")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        with pytest.raises(sl.FitFileError, match=re.escape(f"fit file '{path}': is a "
                                                             "socket, not a regular file")):
            saved[1].save(path)
        assert stat.S_ISSOCK(os.stat(path).st_mode) and _no_temporary_files(tmp_path)
