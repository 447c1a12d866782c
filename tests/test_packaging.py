"""The distribution: one import name (``stanlite``) with samplers/ and models/ inside."""

import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _source_packages():
    """Every package folder of the repo, under the name it must have once installed."""
    names = set()
    for top, installed in (("stanlite", "stanlite"), ("samplers", "stanlite/samplers"),
                           ("models", "stanlite/models")):
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / top)
            names.add(installed if str(rel) == "." else f"{installed}/{rel.as_posix()}")
    return names


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    src = tmp_path_factory.mktemp("src")
    for name in ("stanlite", "samplers", "models"):
        shutil.copytree(ROOT / name, src / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps",
                    "--no-build-isolation", "-q", "-w", str(out)],
                   check=True, capture_output=True, text=True)
    (whl,) = out.glob("stanlite-*.whl")
    return whl


def test_wheel_installs_only_the_stanlite_import_name(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"stanlite"}
    assert "stanlite/samplers/__init__.py" in names
    assert "stanlite/models/__init__.py" in names
    assert not any(n.startswith(("samplers/", "models/")) for n in names)


def test_wheel_contains_every_package_of_the_repo(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    missing = {p for p in _source_packages() if f"{p}/__init__.py" not in names}
    assert not missing, f"packages missing from pyproject's package list: {missing}"


def test_wheel_marks_the_package_as_typed(wheel):
    # PEP 561: type checkers read stanlite's hints only when py.typed is installed
    assert "stanlite/py.typed" in zipfile.ZipFile(wheel).namelist()


def test_unpacked_wheel_imports(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = f"""
import sys, importlib.util
sys.path.insert(0, {str(site)!r})
import numpy as np
import stanlite, stanlite.samplers, stanlite.models
assert stanlite.__file__.startswith({str(site)!r}), stanlite.__file__
assert importlib.util.find_spec("samplers") is None
assert importlib.util.find_spec("models") is None
print(stanlite.grad(lambda x: stanlite.sum(x * x))(np.ones(2)))
"""
    r = subprocess.run([sys.executable, "-I", "-c", code], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "[2. 2.]" in r.stdout


def test_a_checkout_imports_its_samplers_and_models_without_an_install():
    # `python -m stanlite` run at the repository root (the README's first command,
    # after a non-editable `pip install .`) imports stanlite from the checkout, not
    # the installed copy: its samplers/ and models/ must come along. The editable
    # install's finder, which would map them anyway, is removed first.
    code = (
        "import sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f)]\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "import stanlite, stanlite.samplers.nuts, stanlite.models\n"
        "print(stanlite.samplers.nuts.__file__, stanlite.models.__file__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr
    nuts_file, models_file = out.stdout.split()
    assert pathlib.Path(nuts_file) == ROOT / "samplers" / "nuts.py"
    assert pathlib.Path(models_file) == ROOT / "models" / "__init__.py"
