"""``import stanlite as sl`` alone gives ``sl.models`` and ``sl.samplers`` (issue 19,
point 14): checked in a fresh interpreter, where nothing imported them before."""

import subprocess
import sys


def test_models_and_samplers_load_on_first_use():
    code = ("import sys, stanlite as sl\n"
            "assert 'stanlite.models' not in sys.modules\n"
            "m = sl.models.get('eight_schools_noncentered')\n"
            "assert m.dim == 10, m.dim\n"
            "assert sl.samplers.__name__ == 'stanlite.samplers'\n"
            "assert 'models' in dir(sl)\n"
            "try:\n"
            "    sl.no_such_thing\n"
            "except AttributeError as e:\n"
            "    assert 'no_such_thing' in str(e)\n"
            "else:\n"
            "    raise SystemExit('no AttributeError')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
