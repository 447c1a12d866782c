"""The notebooks in notebooks/ run: each is executed by a real Jupyter kernel (nbclient)
with small sizes, in a temporary copy, and any cell error fails the test.

Every ``notebooks/*.ipynb`` is picked up automatically. The convention a notebook
follows: read the environment variable ``STANLITE_NOTEBOOK_SMALL`` (set to ``1`` here)
in a cell tagged ``parameters`` and shrink its sizes accordingly, so that a run takes
well under a minute; the committed file carries the outputs of a full-size run (checked
below: every code cell executed, in order, without an error output).
"""

import os
import pathlib
import shutil

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[1] / "notebooks")
                   .glob("*.ipynb"))


def _ids(paths):
    return [p.stem for p in paths]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_committed_with_outputs(path):
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    assert code, f"{path.name} has no code"
    counts = [c.execution_count for c in code]
    assert all(isinstance(n, int) for n in counts), \
        f"{path.name} is committed without (some of) its outputs: run it and save"
    assert counts == sorted(counts), f"{path.name}: cells were executed out of order"
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, f"{path.name} is committed with an error: {errors[0].evalue}"
    assert any("image/png" in o.get("data", {}) for c in code for o in c.outputs), \
        f"{path.name} has no plots in its committed outputs"
    params = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert params and "STANLITE_NOTEBOOK_SMALL" in params[0].source, \
        f"{path.name} needs a cell tagged 'parameters' reading STANLITE_NOTEBOOK_SMALL"


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_runs_with_small_sizes(path, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    pytest.importorskip("matplotlib")
    # a copy in a scratch directory: the committed notebook is never rewritten and
    # whatever the notebook writes lands in tmp_path
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    nb = nbformat.read(copy, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    # the kernel inherits this process's environment
    monkeypatch.setenv("STANLITE_NOTEBOOK_SMALL", "1")
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(var, os.environ.get(var, "1"))
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()                # raises CellExecutionError on any cell error
    ran = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    assert all(isinstance(c.execution_count, int) for c in ran)
