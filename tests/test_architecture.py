"""The layering of stanlite, as contracts that fail on a new upward import or loop.

pyproject.toml's ``[tool.importlinter]`` writes the layers down (autodiff <- math <-
distributions/transforms/functor <- model <- fits <- samplers <- inference <-
models/cli; docs/architecture.md) and forbids loops between sibling modules at any
depth. import-linter reads a package from its folder, and ``stanlite.samplers`` and
``stanlite.models`` are not under stanlite/: pyproject.toml's ``package-dir`` maps the
root folders samplers/ and models/ into the package (stanlite/__init__.py does the
same for a checkout). So the contracts run on the package laid out as an installed
copy has it - the files copied to a temporary folder by that ``package-dir`` mapping,
read from pyproject.toml itself - and the tests below check that the linter sees
those two packages: an upward import or a loop written into them breaks a contract.

Run ``python tests/test_architecture.py`` for the linter's full report.
"""

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

try:
    import tomllib
except ModuleNotFoundError:             # Python 3.10: import-linter's own dependency
    import tomli as tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
LAYERS = "stanlite is layered"
ACYCLIC = "no import loops between sibling modules or packages"


def _package_dir():
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]["package-dir"]


def installed_layout(dest):
    """Copy the Python files into ``dest`` as pyproject's ``package-dir`` installs
    them (``samplers/`` as ``stanlite/samplers/``, ...); return ``dest``."""
    dest = pathlib.Path(dest)
    for name, src in sorted(_package_dir().items()):
        shutil.copytree(ROOT / src, dest.joinpath(*name.split(".")), dirs_exist_ok=True,
                        ignore=lambda d, names: [n for n in names if not (
                            n.endswith(".py") or (pathlib.Path(d, n).is_dir()
                                                  and n != "__pycache__"))])
    return dest


def lint(where):
    """Run pyproject.toml's contracts on the package found in ``where`` (a fresh
    process: this one has imported stanlite from elsewhere). ``(exit code, report)``."""
    code = ("import sys; from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, "
            "no_logo=True))")
    env = {**os.environ, "PYTHONPATH": str(where)}
    r = subprocess.run([sys.executable, "-c", code, str(ROOT / "pyproject.toml")],
                       cwd=where, env=env, capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout + r.stderr


@pytest.fixture
def layout(tmp_path):
    return installed_layout(tmp_path)


def test_the_contracts_hold(layout):
    rc, out = lint(layout)
    assert rc == 0, out
    assert LAYERS in out and ACYCLIC in out and "2 kept, 0 broken" in out, out


@pytest.mark.parametrize("importer, line, broken, edge", [
    # the loop of issue 23: the model importing the fits or the samplers back
    ("stanlite/model.py", "from .fit import Fit", LAYERS,
     "stanlite.model is not allowed to import stanlite.fit"),
    ("stanlite/model.py", "from .samplers import runner", LAYERS,
     "stanlite.model is not allowed to import stanlite.samplers"),
    # in the mapped folders: samplers/ importing the front door, the zoo from below
    ("stanlite/samplers/hamiltonian.py", "import stanlite.inference", LAYERS,
     "stanlite.samplers is not allowed to import stanlite.inference"),
    ("stanlite/fit.py", "from . import models", LAYERS,
     "stanlite.fit is not allowed to import stanlite.models"),
    # a loop inside a layer: static_hmc is below chain (chain <-> rhmc was one)
    ("stanlite/samplers/static_hmc.py", "from . import chain", ACYCLIC,
     "No cycles are allowed in stanlite.samplers"),
    # the AD core importing upwards by a new path
    ("stanlite/autodiff/tape.py", "from ..distributions import normal_lpdf", LAYERS,
     "stanlite.autodiff is not allowed to import stanlite.distributions"),
    # ... or by one of the paths it had before issue 23's point 2 closed it
    ("stanlite/autodiff/functional.py", "from ..math.structure import stack", LAYERS,
     "stanlite.autodiff is not allowed to import stanlite.math"),
    ("stanlite/autodiff/codegen.py", "from ..distributions.fused import plain", LAYERS,
     "stanlite.autodiff is not allowed to import stanlite.distributions"),
])
def test_a_bad_import_breaks_a_contract(layout, importer, line, broken, edge):
    path = layout / importer
    path.write_text(path.read_text() + f"\n{line}  # a deliberate bad import\n")
    rc, out = lint(layout)
    assert rc != 0, out
    report = out.partition("Broken contracts")[2]    # (an upward import closes a
    assert broken in report and edge in report, out   # loop too: both may break)


def test_the_layers_have_no_known_exceptions():
    """The layers contract ignores no import: the AD core imports nothing above it
    (the math package registers into it: autodiff/operators.py, library.py), and no
    other layer reaches up. A new exception is a decision for docs/architecture.md,
    not a line to add here."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["id"] == "layers")
    assert layers.get("ignore_imports", []) == []
    acyclic = next(c for c in contracts if c["id"] == "acyclic")
    assert not [i for i in acyclic.get("ignore_imports", [])
                if i.startswith("stanlite.autodiff") and "stanlite.autodiff" not in
                i.partition("->")[2] or i.startswith("stanlite.math.")], acyclic


def test_var_and_dual_take_their_operators_from_one_table():
    """Every operator and array method of Var and Dual is autodiff/operators.py's
    (on their common base), none assigned by the math modules or copied by name."""
    import stanlite  # noqa: F401  (the math package registers the primitives)
    from stanlite.autodiff import operators
    from stanlite.autodiff.dual import Dual
    from stanlite.autodiff.var import Box, Var
    for name in operators.PRIMITIVES:
        assert name in Box.__dict__, name
        assert name not in Dual.__dict__, name
        if name != "__getitem__":               # Var's first-order fast path
            assert name not in Var.__dict__, name
    for name in ("__add__", "__mul__", "__neg__"):
        fn = Box.__dict__[name]
        assert fn is getattr(stanlite, operators.PRIMITIVES[name]), name   # no wrapper
    for path in (ROOT / "stanlite" / "math").rglob("*.py"):
        text = path.read_text()
        assert "Var." + "__" not in text and "setattr(Dual" not in text, path


def test_the_checkout_maps_what_pyproject_maps():
    """stanlite/__init__.py maps the root folders into the package as package-dir
    does: imported from the checkout, ``stanlite.samplers`` is samplers/."""
    mapped = {k: v for k, v in _package_dir().items() if k != "stanlite"}
    assert mapped == {"stanlite.samplers": "samplers", "stanlite.models": "models"}
    code = ("import importlib, sys\n"
            "for n in sys.argv[1:]: print(importlib.import_module(n).__file__)")
    r = subprocess.run([sys.executable, "-c", code, *mapped], cwd=ROOT, check=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)},
                       capture_output=True, text=True, timeout=300)
    files = r.stdout.split()
    assert files == [str(ROOT / src / "__init__.py") for src in mapped.values()]


def test_the_linter_on_the_bare_checkout_refuses_rather_than_passes():
    """Run where the checkout is (the root folders not under stanlite/), the linter
    cannot see the mapped packages: it must fail on the missing layers, not pass
    with fewer edges."""
    rc, out = lint(ROOT)
    assert rc != 0 and "Missing layer in container 'stanlite'" in out, out


def test_every_environment_switch_is_declared_in_config():
    """stanlite/config.py's table is the list of the STANLITE_* variables: each one
    named anywhere in the library is declared there, and each declared one is named
    in the files the table says read it."""
    import re
    from stanlite.config import SWITCHES
    named = {}
    for top in ("stanlite", "samplers", "models"):
        for path in (ROOT / top).rglob("*.py"):
            if path.name != "config.py":
                for name in set(re.findall(r"STANLITE_[A-Z0-9_]*[A-Z0-9]", path.read_text())):
                    named.setdefault(name, set()).add(path.relative_to(ROOT).as_posix())
    assert sorted(set(named) - set(SWITCHES)) == [], named
    for name, (_, where) in SWITCHES.items():
        for path in re.findall(r"[\w/]+\.py", where):
            assert path in named.get(name, ()), (name, path)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as d:
        rc, out = lint(installed_layout(d))
        print(out)
        sys.exit(rc)
