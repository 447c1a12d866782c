"""stanlite.models: the model zoo, one module per model, with default data in data/.

Installed as ``stanlite.models`` (the folder ``models/`` is mapped into the
``stanlite`` package by pyproject.toml)::

    >>> import stanlite.models as zoo
    >>> "eight_schools_noncentered" in zoo.names()
    True
    >>> m = zoo.get("eight_schools_noncentered")           # default data
    >>> m.dim
    10
    >>> zoo.get("neal_funnel", D=3).param_names()           # a data field overridden
    ['v', 'x[1]', 'x[2]']

``get(name, **overrides)`` builds the model with its default data
(``data/<name>.json``, read with :mod:`importlib.resources`, so it works from an
installed wheel); ``model_class(name)`` gives the class, to build it with other data;
``default_data(name)`` the default data as a dict. Each model's docstring gives the
model in math notation and its source. Default data copied from posteriordb are
BSD-3 (Copyright (c) 2011-2024, Stan Developers and their Assignees); see
``data/README.md`` and ``data/LICENSE`` in the source tree.
"""

import importlib
import importlib.resources
from stanlite.stan_json import read_object

__all__ = ["names", "get", "model_class", "default_data", "UnknownModelError"]

# name -> class name: each model is the class of that name in the module named as
# the model (as its data file is: data/<name>.json), imported on first use
_REGISTRY = {
    "ark": "ArK",
    "eight_schools_centered": "EightSchoolsCentered",
    "eight_schools_noncentered": "EightSchoolsNoncentered",
    "friberg_karlsson": "FribergKarlsson",
    "garch": "Garch",
    "gp_pois_regr": "GpPoisRegr",
    "linear_regression": "LinearRegression",
    "mm_multidose_ss": "MmMultidoseSs",
    "logistic_regression": "LogisticRegression",
    "neal_funnel": "NealFunnel",
    "normal_mixture": "NormalMixture",
    "one_comp_mm_elim_abs": "OneCompMmElimAbs",
    "pk_steady_state": "PkSteadyState",
    "radon": "Radon",
    "theophylline": "Theophylline",
}


class UnknownModelError(KeyError):
    """No zoo model has that name (a ``KeyError`` whose message lists the names)."""

    def __str__(self):                       # KeyError would show the message quoted
        return str(self.args[0]) if self.args else ""


def names():
    """The names of the zoo models, sorted."""
    return sorted(_REGISTRY)


def _check(name):
    if not isinstance(name, str) or name not in _REGISTRY:
        raise UnknownModelError(f"no zoo model named {name!r}; the zoo has: "
                                + ", ".join(names()))


def model_class(name):
    """The ``sl.Model`` subclass of zoo model ``name``."""
    _check(name)
    return getattr(importlib.import_module(f"{__name__}.{name}"), _REGISTRY[name])


def default_data(name):
    """The default data of zoo model ``name`` as a dict (parsed from its JSON file)."""
    _check(name)
    text = importlib.resources.files(__name__).joinpath("data", f"{name}.json") \
        .read_text(encoding="utf-8")
    return read_object(text, f"the zoo's data file {name}.json", "field: value pairs",
                       text=True)


def _write_default_data(name, data):
    """Write ``data`` as zoo model ``name``'s default data (data/<name>.json in the
    source tree, one field a line) and return the path: for the models whose data
    are made by code, when run as a script (``python models/<name>.py``)."""
    import pathlib
    path = pathlib.Path(__file__).resolve().parent / "data" / f"{name}.json"
    body = ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in data.items())
    path.write_text("{\n" + body + "\n}\n", encoding="utf-8")
    return path


def get(name, **data_overrides):
    """Zoo model ``name`` built with its default data; keyword arguments replace data
    fields (e.g. ``get("neal_funnel", D=3)``)."""
    return model_class(name).from_json(default_data(name), **data_overrides)
