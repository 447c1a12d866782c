"""Loading stanlite's cached kernels without numba's load-time extras
(stanlite/autodiff/vm/fast_load.py).

The hook changes when numba parses and imports, never which machine code runs: a
kernel loaded through it gives the same numbers, bit for bit, as one loaded by numba
itself (``STANLITE_FAST_LOAD=0``); the names it takes from the object's ELF symbol
table are the names numba takes from the parsed bitcode; a function compiled later
still links against a lazily loaded kernel. Each load is checked in a new interpreter
(in this one the kernels may already be loaded or compiled)."""

import json
import os
import subprocess
import sys

import pytest

from stanlite.autodiff.vm import fast_load, kernel, scalar

pytestmark = pytest.mark.skipif(not kernel.available(), reason="needs numba")

# in a new interpreter: load the interpreter's value_grad (a model's gradient, eight
# schools) and the scalar helper _sign from numba's cache, then compile a new function
# calling _sign (it links _sign's library); print what the test checks as JSON
_CHILD = r"""
import json, sys
import numpy as np
import stanlite as sl
from stanlite.autodiff.vm import fast_load, scalar
from numba.core.registry import cpu_target

objects = []
_elf = fast_load.elf_symbols
fast_load.elf_symbols = lambda obj: objects.append(obj) or _elf(obj)
ctx = cpu_target.target_context
refreshes = []
_refresh = type(ctx).refresh
type(ctx).refresh = lambda self: refreshes.append(1) or _refresh(self)

m = sl.models.get("eight_schools_noncentered")
x = np.linspace(-1.0, 1.0, m.dim)
lp, g = m.log_density_gradient(x)
sign = scalar._sign(-2.5)
out = {"installed": fast_load.installed(), "lp": float(lp).hex(),
       "g": [float(v).hex() for v in g], "sign": sign,
       "refreshes_at_load": len(refreshes)}
from numba.core import entrypoints
out["entry_points_at_load"] = entrypoints._already_initialized
lib = next(iter(scalar._sign.overloads.values())).library
out["lazy"] = type(lib).__name__
out["parsed_before_link"] = lib._shared_module is not None
if fast_load.installed():
    import llvmlite.binding as ll
    mod = ll.parse_bitcode(lib._stanlite_bitcode)
    named = sorted(gv.name for gs in (mod.functions, mod.global_variables) for gv in gs
                   if not gv.is_declaration)
    elf = [sorted(_elf(obj)[0]) for obj in objects]
    out["symbols_match"] = named in elf
    out["objects"] = len(objects)
    out["defined_known"] = all(cpu_target.target_context.codegen()._engine
                               .is_symbol_defined(n) for n in named)

from numba import njit

@njit(cache=False)
def twice_sign(v):
    return 2.0 * scalar._sign(v)

out["linked"] = twice_sign(-2.5)
out["parsed_after_link"] = lib._shared_module is not None
print(json.dumps(out))
"""


def _child(fast):
    env = dict(os.environ, STANLITE_FAST_LOAD="1" if fast else "0")
    r = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                       env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def children():
    import numba
    if not numba.__version__.startswith(fast_load.AUDITED) or sys.platform != "linux":
        # the hook installs itself only for the numba versions it was read against,
        # and takes symbol names from ELF objects: elsewhere numba loads as it would
        pytest.skip(f"fast_load is audited for numba {fast_load.AUDITED} on Linux; "
                    f"this is numba {numba.__version__} on {sys.platform}")
    # numba's cache of the kernels the children load: written here if missing
    kernel.warm()
    scalar._sign(1.0)
    return _child(True), _child(False)


def test_a_fast_loaded_kernel_computes_the_same_numbers(children):
    fast, numba_own = children
    assert fast["installed"] and not numba_own["installed"]
    assert fast["lp"] == numba_own["lp"] and fast["g"] == numba_own["g"]
    assert fast["sign"] == numba_own["sign"] == -1.0


def test_no_target_refresh_no_entry_points_and_no_bitcode_parse_at_load(children):
    fast, numba_own = children
    assert fast["refreshes_at_load"] == 0 and numba_own["refreshes_at_load"] > 0
    assert not fast["entry_points_at_load"] and numba_own["entry_points_at_load"]
    assert fast["lazy"] == "LazyBitcodeLibrary" and not fast["parsed_before_link"]
    assert numba_own["parsed_before_link"]


def test_elf_names_are_the_bitcodes_defined_names(children):
    fast, _ = children
    assert fast["objects"] >= 2           # value_grad's and _sign's
    assert fast["symbols_match"] and fast["defined_known"]


def test_a_later_compile_links_a_lazily_loaded_kernel(children):
    fast, numba_own = children
    assert fast["linked"] == numba_own["linked"] == -2.0
    assert fast["parsed_after_link"]


def test_elf_symbols_refuses_what_is_not_an_elf64_object():
    assert fast_load.elf_symbols(b"") is None
    assert fast_load.elf_symbols(b"\xcf\xfa\xed\xfe" + bytes(60)) is None    # Mach-O
    assert fast_load.elf_symbols(b"\x7fELF\x02\x01" + bytes(60)) is None     # not ET_REL


def test_an_unresolvable_symbol_asks_for_numbas_full_initialisation():
    assert fast_load._runtime_ready({"NRT_MemInfo_alloc_aligned", "exp"})
    assert not fast_load._runtime_ready({"no_such_symbol_in_any_library_here"})
