"""The README's code blocks run as written (docs execute)."""

import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_python_examples():
    assert BLOCKS


@pytest.mark.parametrize("i", range(len(BLOCKS)))
def test_readme_block_runs(i, capsys):
    exec(compile(BLOCKS[i], f"README.md block {i}", "exec"), {})
    out = capsys.readouterr().out
    assert "False" not in out


def test_readme_opens_with_the_two_commands():
    text = README.read_text()
    first = re.search(r"```bash\n(.*?)```", text, flags=re.S).group(1).splitlines()
    assert first[0].startswith("pip install . && python -m stanlite")
    assert first[1].startswith('pip install -e ".[dev]" && python -m pytest')
    ci = (README.parent / ".ci" / "run").read_text()
    assert 'pip install -e ".[dev]" && python -m pytest' in ci
