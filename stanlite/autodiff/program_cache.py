"""A cache of models' lowered log-density programs on disk, shared by processes.

Why. Recording a model's tape and lowering it to the interpreter (autodiff/vm) is paid
once per process: for a Stan-style scalar loop (12,544 ``poisson_lpmf`` calls) that is
0.4 s, most of what a fresh process waits for before its first draw. A lowered
program is flat arrays (the instruction table, its index table, the constants) and a
few numbers, so it is kept here after its first check against the eager tape, and a
later process with the same model and data starts from it.

Key: a hash of the source files of the modules defining the model's classes (every
class of its MRO but ``Model``: the class, its helpers, its constants), its instance
attributes (the data; derived layouts left out; an object of another kind by what
its ``_program_key_state()`` returns, if it has one), which program (gradient or
density, with or without the Jacobian), the Python and numpy versions and the
``stanlite`` package's files (names, sizes, modification times: the lowering rules
sit beside every function). A model whose class has no source file (an ``exec``'d
string, a notebook cell) or whose attributes hold objects of other kinds is not
cached.

What the key cannot see - a function of another module that ``log_prob`` calls,
changed since - is what the checks are for: a program from the cache is
checked against the eager tape at its first replay (as a freshly recorded one is at
its first new point), and one that disagrees is dropped and the model recorded
again; the spot checks then continue as for any program.

Where: ``$STANLITE_CACHE_DIR`` if set (empty, ``0`` or ``off``: no cache), else
``$XDG_CACHE_HOME/stanlite/programs`` (``~/.cache/...``; ``%LOCALAPPDATA%`` on
Windows). Entries are ``.npz`` files read with ``allow_pickle=False`` (arrays and
JSON, no code), written atomically (a temporary file renamed), the least recently
used beyond :data:`MAX_ENTRIES` removed. A directory that cannot be made, read or
written only means no cache: nothing is raised.
"""

import hashlib
import inspect
import json
import os
import sys
import tempfile
import zipfile

import numpy as np

from .._version import __version__
from ..config import setting, user_cache_home

__all__ = ["ENV", "KEY_STATE", "directory", "model_key", "load", "store", "source_digest",
           "package_digest"]

#: environment variable: the cache's directory (empty, 0 or off: no cache)
ENV = "STANLITE_CACHE_DIR"
#: the method by which an object held by a model gives what defines it for the key
#: (numbers, strings, arrays, containers of them: ``pk.EventSchedule``'s records)
KEY_STATE = "_program_key_state"
#: entries kept (the least recently used beyond it are removed)
MAX_ENTRIES = 256

_OFF = ("", "0", "off", "false", "no", "none")
#: instance attributes every model derives from its class and data (not hashed)
_DERIVED = frozenset(("_retaped", "_slots", "_layout", "_shapes", "_param_set",
                      "_lp_args", "_tp_args", "_gq_args", "_jit_context"))
_digests = {}


def directory():
    """The cache's directory, or None when it is turned off."""
    v = setting(ENV, None)
    if v is not None:
        return None if v.strip().lower() in _OFF else v
    return os.path.join(user_cache_home(), "stanlite", "programs")


def source_digest(paths):
    """sha256 of the files ``paths``' contents, computed once per process."""
    paths = tuple(paths)
    d = _digests.get(paths)
    if d is None:
        h = hashlib.sha256()
        for path in paths:
            h.update(os.path.basename(path).encode())
            with open(path, "rb") as fh:
                h.update(fh.read())
        d = _digests[paths] = h.hexdigest()
    return d


def package_digest():
    """A hash of the ``stanlite`` package's ``.py`` files: names, sizes and
    modification times (a stat each: ~1 ms for the package, where reading them
    costs tens), computed once per process."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # stanlite/
    d = _digests.get(root)
    if d is None:
        h = hashlib.sha256()
        for f in _files(root):
            st = os.stat(f)
            h.update(f"{f[len(root):]} {st.st_size} {st.st_mtime_ns}\n".encode())
        d = _digests[root] = h.hexdigest()
    return d


def _files(root):
    out = []
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        out.extend(os.path.join(top, f) for f in sorted(files) if f.endswith(".py"))
    return out


def model_key(model, what):
    """The cache key of ``model``'s program ``what`` (a tuple of str and bool), or
    None when the model cannot be cached (see the module docstring)."""
    h = hashlib.sha256()
    h.update(f"stanlite {__version__} python {sys.version_info[:3]} numpy "
             f"{np.__version__} {what!r}\n".encode())
    h.update(package_digest().encode())
    try:
        for cls in type(model).__mro__:
            # (stanlite.model.Model named, not imported: autodiff stays below the model)
            if (cls.__module__, cls.__qualname__) == ("stanlite.model", "Model") \
                    or cls is object:
                continue
            h.update(f"{cls.__module__}.{cls.__qualname__}\n".encode())
            h.update(_module_source(cls).encode())
        for name in sorted(model.__dict__):
            if name not in _DERIVED:
                h.update(f"\n{name}=".encode())
                _feed(h, model.__dict__[name])
    except (OSError, TypeError, _Unhashable):
        return None
    return h.hexdigest()[:40]


class _Unhashable(Exception):
    pass


def _module_source(cls):
    """The source file of ``cls``'s module, read (the class, its helpers and its
    constants); _Unhashable when there is none or the class is not written in it
    (made by ``exec``, renamed)."""
    path = inspect.getsourcefile(cls)
    if not path:
        raise _Unhashable
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        text = f.read()
    if f"class {cls.__name__}" not in text:
        raise _Unhashable
    return text


def _feed(h, v):
    """Feed ``v`` (numbers, strings, arrays, containers of them) to ``h``; anything
    else raises _Unhashable."""
    if v is None or isinstance(v, (bool, int, float, complex, str, np.generic)):
        h.update(f"{type(v).__name__}:{v!r};".encode())
    elif isinstance(v, bytes):
        h.update(b"bytes:" + v)
    elif isinstance(v, np.ndarray):
        if v.dtype.hasobject:
            raise _Unhashable
        h.update(f"array:{v.dtype.str}:{v.shape};".encode())
        h.update(np.ascontiguousarray(v).tobytes())
    elif isinstance(v, (list, tuple)):
        h.update(f"{type(v).__name__}[{len(v)}](".encode())
        for x in v:
            _feed(h, x)
        h.update(b")")
    elif isinstance(v, (set, frozenset)):
        h.update(f"set[{len(v)}](".encode())
        for x in sorted(v, key=repr):
            _feed(h, x)
        h.update(b")")
    elif isinstance(v, dict):
        h.update(f"dict[{len(v)}](".encode())
        for k in sorted(v, key=repr):
            _feed(h, k)
            _feed(h, v[k])
        h.update(b")")
    elif callable(getattr(type(v), KEY_STATE, None)):
        # an object that says what defines it (an event schedule: its records)
        h.update(f"{type(v).__module__}.{type(v).__qualname__}(".encode())
        _feed(h, getattr(v, KEY_STATE)())
        h.update(b")")
    else:
        raise _Unhashable


def _path(key):
    d = directory()
    return None if d is None or key is None else os.path.join(d, key + ".npz")


def load(key):
    """The portable state (autodiff/compile.py ``_Retaped.portable``) cached under
    ``key`` (:func:`model_key`), or None."""
    path = _path(key)
    if path is None:
        return None
    try:
        # the file opened here: np.load leaves its own open when the zip is cut short
        with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as z:
            st = json.loads(bytes(z["meta"]).decode())
            for i, p in enumerate(st["programs"]):
                for k in ("code", "aux", "V"):
                    p[k] = z[f"p{i}_{k}"]
        os.utime(path)                  # recently used (the pruning's order)
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile):
        return None
    return st


def store(key, st):
    """Keep the portable state ``st`` under ``key``; silently nothing when there is
    no cache or it cannot be written."""
    path = _path(key)
    if path is None or not st["programs"]:
        return
    arrays = {}
    progs = []
    for i, p in enumerate(st["programs"]):
        q = dict(p)
        for k in ("code", "aux", "V"):
            arrays[f"p{i}_{k}"] = np.asarray(q.pop(k))
        progs.append(q)
    meta = {"format": st["format"], "value_only": st["value_only"], "programs": progs,
            "replay_seconds": st["replay_seconds"]}
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    d = os.path.dirname(path)
    try:
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **arrays)
            os.replace(tmp, path)       # atomic: a reader sees the old or the new file
        except BaseException:
            os.unlink(tmp)
            raise
        _prune(d)
    except OSError:
        pass


def _prune(d):
    """Remove the least recently used entries beyond :data:`MAX_ENTRIES`."""
    entries = []
    for f in os.listdir(d):
        if f.endswith(".npz"):
            p = os.path.join(d, f)
            try:
                entries.append((os.stat(p).st_mtime, p))
            except OSError:
                pass
    entries.sort()
    for _, p in entries[:max(0, len(entries) - MAX_ENTRIES)]:
        try:
            os.unlink(p)
        except OSError:
            pass
