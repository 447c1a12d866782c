"""The guides in docs/ run: every ```python block executes, and a top-level
``print(...)  # expected`` prints what its comment says (the text before a colon)."""

import ast
import contextlib
import io
import pathlib
import re

import pytest

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"


def _blocks():
    for path in sorted(DOCS.glob("*.md")):
        text = path.read_text()
        for i, m in enumerate(re.finditer(r"```python\n(.*?)```", text, re.S)):
            line = text.count("\n", 0, m.start()) + 2
            yield pytest.param(m.group(1), id=f"{path.name}:{line}")


def _expected_prints(src):
    """The expected output of each top-level print, from its line's comment (None:
    no expectation), in order."""
    lines = src.splitlines()
    out = []
    for node in ast.parse(src).body:
        call = node.value if isinstance(node, ast.Expr) else None
        if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "print":
            comment = lines[node.end_lineno - 1].partition("#")[2].strip()
            out.append(comment.split(":")[0].strip() or None)
    return out


@pytest.mark.parametrize("src", list(_blocks()))
def test_guide_block_runs_and_prints_what_it_says(src, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(src, "<docs>", "exec"), {"__name__": "__docs__"})
    printed = buf.getvalue().splitlines()
    expected = _expected_prints(src)
    assert len(printed) >= len(expected)
    for got, want in zip(printed, expected):
        if want is not None:
            assert got.strip() == want, (got, want)


def test_there_are_guides():
    assert list(_blocks()), "docs/ has no python blocks"
