"""Stan's JSON, read as CmdStan reads it: one reader for data files and init files.

:meth:`Model.from_json <stanlite.Model.from_json>` (data) and the command line's
``--init`` (parameter values) and the zoo's default data (stanlite.models) read
JSON here, so both give the same errors for the
same faults - a missing file, a directory, text that is not UTF-8 or not JSON, a key
given twice (json keeps the last silently; CmdStan refuses it), nesting too deep, a
top level that is not an object - each naming the file. A UTF-8 byte-order mark is
no error. Stan writes non-finite numbers as the strings ``"NaN"``, ``"Inf"``,
``"-Inf"`` (and their spellings below); :func:`stan_json_value` turns them into
floats.

>>> read_object('{"N": 2, "y": ["NaN", 1.5]}', "the JSON data", "field: value pairs",
...             text=True)
{'N': 2, 'y': ['NaN', 1.5]}
>>> stan_json_value(["-Inf", 1.5, ["NaN"]])
[-inf, 1.5, [nan]]
"""

import json
import os
from collections.abc import Mapping

import numpy as np

from .errors import DataError

__all__ = ["read_data", "read_object", "stan_json_value"]


def read_data(source):
    """The data dict of ``source`` (what :meth:`Model.from_json
    <stanlite.Model.from_json>` takes): a dict, a JSON string or a path to a JSON
    file; each failure is a DataError naming the file and what is wrong."""
    if isinstance(source, Mapping):
        return dict(source)
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if not isinstance(source, str):
        raise DataError(f"from_json takes a path, a JSON string or a dict, got "
                        f"{type(source).__name__}")
    if source.lstrip()[:1] in ("{", "["):
        return read_object(source, "the JSON data", "field: value pairs", text=True)
    return read_object(source, f"data file {source!r}", "field: value pairs")


def read_object(source, where, holds, error=DataError, text=False):
    """The JSON object of the file at path ``source`` (``text=True``: of the JSON text
    ``source``) as a dict, values as json gives them. Every fault is an ``error``
    (the caller's exception class) whose message starts with ``where`` (``"data file
    'x.json'"``); ``holds`` says what the object must hold (``"parameter values"``)."""
    d = _parse_json(source if text else _read_text(source, where, error), where, error)
    if not isinstance(d, dict):
        raise error(f"{where} must hold a JSON object of {holds}, got a JSON "
                    f"{type(d).__name__}")
    return d


def _read_text(path, where, error):
    try:
        with open(path, encoding="utf-8-sig") as f:      # a BOM is no error
            return f.read()
    except FileNotFoundError:
        raise error(f"{where} does not exist") from None
    except IsADirectoryError:
        raise error(f"{where} is a directory, not a JSON file") from None
    except UnicodeDecodeError as e:
        raise error(f"{where} is not UTF-8 text: {e}") from None
    except OSError as e:
        raise error(f"{where} cannot be read: {e.strerror or e}") from None


def _parse_json(text, where, error):
    def no_duplicates(pairs):
        # json keeps the last of repeated keys silently; CmdStan refuses them
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise error(f"{where}: field '{k}' appears more than once")
            seen.add(k)
        return dict(pairs)
    try:
        return json.loads(text, object_pairs_hook=no_duplicates)
    except json.JSONDecodeError as e:
        raise error(f"{where} is not valid JSON: {e}") from None
    except RecursionError:
        raise error(f"{where} nests too deeply to be data") from None


_JSON_FLOATS = {"NaN": np.nan, "nan": np.nan, "Inf": np.inf, "+Inf": np.inf,
                "-Inf": -np.inf, "inf": np.inf, "-inf": -np.inf, "Infinity": np.inf,
                "-Infinity": -np.inf}


def stan_json_value(v):
    """``v`` with Stan's non-finite strings (``"NaN"``, ``"Inf"``, ``"-Inf"``, ...) as
    floats, in nested lists too; other values as they are."""
    if isinstance(v, str) and v in _JSON_FLOATS:
        return _JSON_FLOATS[v]
    if isinstance(v, list):
        return [stan_json_value(e) for e in v]
    return v
