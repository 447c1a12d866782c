"""``python -m stanlite``: without arguments the main job (tests/test_readme.py runs
it); with arguments the command line, never the main job in disguise (issue 19: ``python
-m stanlite sample nope`` used to ignore its arguments, fit eight schools and exit 0)."""

import subprocess
import sys

import pytest


def run(*args):
    return subprocess.run([sys.executable, "-m", "stanlite", *args], capture_output=True,
                          text=True, timeout=120)


def test_models_lists_the_zoo():
    r = run("models")
    assert r.returncode == 0, r.stderr
    assert "radon" in r.stdout and "neal_funnel" in r.stdout
    assert "main job" not in r.stdout


@pytest.mark.parametrize("args, code, words", [
    (("frobnicate",), 2, "invalid choice: 'frobnicate'"),
    (("sample", "nope_model", "--chains", "1"), 1, "no zoo model named 'nope_model'"),
])
def test_bad_commands_fail_with_the_cli_message(args, code, words):
    r = run(*args)
    assert r.returncode == code
    assert words in r.stderr
    assert "main job" not in r.stdout and "Traceback" not in r.stderr
