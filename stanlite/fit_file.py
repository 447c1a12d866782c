"""A fit's file: the ``stanlite_state`` group written, a file read back and checked.

``fit.save(path)`` (:meth:`stanlite.fit.Fit.save`) writes ArviZ's groups plus the
group :func:`state_group` makes: the chains' states and the generated-quantities
seeds, packed as JSON with exact arrays (:func:`_pack`), the data's fingerprint and
every group's checksum. :func:`read_fit` (``sl.load_fit``) reads such a file back,
checking each piece and naming what is wrong (a :class:`~stanlite.FitFileError`), and
checks a model against the fit (:func:`check_same_parameters`,
:func:`check_resume_data`: the same parameters, the same data), as ``resume_from``
does too. Split from stanlite/fit.py (issue 23: one job a module); it never imports
the fit classes (the reader is handed the class to build).
"""

from __future__ import annotations

import json
import os

import numpy as np

from . import _fitio
from .errors import FitFileError, ModelError
from .fit_tables import _arviz, _rows

__all__ = ["read_fit", "state_group", "check_same_parameters", "check_resume_data",
           "fit_fingerprint", "model_parameters", "STATE_GROUP"]

#: name of the netCDF group holding the resumable state (ignored by ArviZ)
STATE_GROUP = "stanlite_state"
_FORMAT = "stanlite-fit"
_FORMAT_VERSION = 2     # 2: data fingerprint, checksums of every group


def state_group(fit, groups, path):
    """The ``stanlite_state`` group of ``fit``'s file: the chains' states, the seeds
    and what the reader checks (the data's fingerprint, the other ``groups``'
    checksums), as JSON plus exact arrays (see :func:`stanlite.fit.Fit.save`)."""
    import xarray as xr
    meta = {"format": _FORMAT, "version": _FORMAT_VERSION, "method": fit.method,
            "kind": fit.kind, "predictive": fit._predictive_map(),
            "max_treedepth": fit.max_treedepth, "interrupted": bool(fit.interrupted),
            "names": fit.names,
            # a fit loaded without its model keeps what its file said
            "model": _model_id(fit.model) or getattr(fit, "_model_id", None),
            "unconstrained_names": _unconstrained_names(fit.model)
            or getattr(fit, "_unconstrained_names", None),
            "parameters": model_parameters(fit.model)
            or getattr(fit, "_parameters", None),
            "data_fingerprint": fit_fingerprint(fit),
            "checksums": {g: _fitio.dataset_digests(ds) for g, ds in groups.items()},
            "gq_seeds": [_seed_to_json(s) for s in fit.gq_seeds],
            "chain_states": [s.to_dict() for s in fit.chain_states]}
    arrays = {}
    try:
        packed = _pack(meta, arrays)
    except TypeError as e:               # a value the format has no place for
        raise FitFileError(os.fspath(path), f"cannot be written: {e}") from e
    text = json.dumps(packed, allow_nan=True).encode("utf-8")
    ds = xr.Dataset({k: ([f"{k}_dim_{i}" for i in range(v.ndim)], v)
                     for k, v in arrays.items()})
    ds["state_json"] = (("state_json_bytes",), np.frombuffer(text, dtype=np.uint8))
    ds.attrs["format"] = f"{_FORMAT} {_FORMAT_VERSION}"
    ds.attrs["checksum"] = _fitio.state_digest(text, arrays)
    return ds


def _model_id(model):
    if model is None:
        return None
    cls = type(model)
    return f"{cls.__module__}.{cls.__qualname__}"


def _unconstrained_names(model):
    names = getattr(model, "unconstrained_param_names", None)
    return list(names()) if callable(names) else None


def _seed_to_json(s):
    if isinstance(s, np.random.SeedSequence):
        return {"entropy": s.entropy, "spawn_key": list(s.spawn_key),
                "pool_size": s.pool_size, "n_children_spawned": s.n_children_spawned}
    return s                                         # an int seed


def _seed_from_json(d):
    if isinstance(d, dict):
        return np.random.SeedSequence(d["entropy"], spawn_key=tuple(d["spawn_key"]),
                                      pool_size=d["pool_size"],
                                      n_children_spawned=d["n_children_spawned"])
    return d


# ---- plain data <-> JSON + arrays (exact) ---------------------------------------------------
# ndarrays, lists of equal-shape ndarrays (the draws) and lists of numbers (the
# statistics) become netCDF variables, bit for bit; the rest is JSON (floats by repr,
# which round-trips exactly; Python ints of any size, e.g. the generator's state).
_ARR, _STACK, _NUMS = "__stanlite_array__", "__stanlite_stack__", "__stanlite_numbers__"


def _is_number(v):
    return isinstance(v, (int, float, np.integer, np.floating)) and \
        not isinstance(v, (bool, np.bool_))


def _pack(obj, arrays):
    def put(a):
        key = f"a{len(arrays)}"
        arrays[key] = a
        return key
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "biuf":
            raise TypeError(f"cannot save an array of dtype {obj.dtype}")
        return {_ARR: put(np.ascontiguousarray(obj))}
    if isinstance(obj, dict):
        bad = [k for k in obj if not isinstance(k, str)]
        if bad:
            raise TypeError(f"cannot save a dict with non-string keys {bad[:3]}")
        return {k: _pack(v, arrays) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        if obj and all(isinstance(v, np.ndarray) for v in obj) and \
                len({(v.shape, v.dtype) for v in obj}) == 1 and obj[0].dtype.kind in "biuf":
            return {_STACK: put(np.stack(obj))}
        if obj and all(_is_number(v) for v in obj):
            floating = any(isinstance(v, (float, np.floating)) for v in obj)
            if floating or all(-2 ** 63 <= v < 2 ** 63 for v in obj):
                return {_NUMS: put(np.array(obj, dtype=float if floating else np.int64))}
        return [_pack(v, arrays) for v in obj]
    if isinstance(obj, (np.bool_, bool)):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if obj is None or isinstance(obj, (int, float, str)):
        return obj
    raise TypeError(f"cannot save a value of type {type(obj).__name__}")


def _unpack(obj, arrays):
    if isinstance(obj, dict):
        if len(obj) == 1:
            (k, v), = obj.items()
            if k == _ARR:
                return np.array(arrays[v])
            if k == _STACK:
                return [np.array(r) for r in arrays[v]]
            if k == _NUMS:
                return arrays[v].tolist()
        return {k: _unpack(v, arrays) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_unpack(v, arrays) for v in obj]
    return obj


# ---- loading --------------------------------------------------------------------------


def read_fit(path, cls, model=None, data_changed_ok=False):
    """The fit of class ``cls`` (:class:`~stanlite.fit.Fit`, passed in: this module
    is below it) that the file at ``path`` holds, every check made: see
    :func:`stanlite.fit.load_fit`."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no fit file {path!r}")
    problem = _fitio.file_kind(path)
    if problem:
        raise FitFileError(path, problem)
    try:
        datasets, meta, version = _read_fit_file(path)
        fit = _fit_from_file(path, datasets, meta, version, cls)
    except (FitFileError, MemoryError):
        raise
    except Exception as e:                   # noqa: BLE001 - whatever the damage, named
        raise FitFileError(path, f"is damaged or was edited: {type(e).__name__}: {e}") \
            from e
    if model is not None:
        changed = _check_model(path, fit, meta, model, data_changed_ok)
        fit.model = model
        if changed:
            # the saved quantities belong to the other data: recomputed from the saved
            # draws and seeds, never kept silently (the chains stay the run's)
            fit._sampled_fingerprint = fit._fingerprint
            fit._idata = None
            fit._whole = None
            fit._build()
    return fit


def _read_fit_file(path):
    """``(datasets by group, state dict, format version)`` of a fit file, every
    checksum checked; a FitFileError saying what is wrong."""
    import h5py
    import xarray as xr
    try:
        # h5py, not h5netcdf: a failed h5netcdf.File prints an ignored error at exit
        with h5py.File(path, mode="r") as f:
            groups = [k for k in f if isinstance(f.get(k), h5py.Group)]
    except Exception as e:                   # noqa: BLE001 - h5py's errors vary with the damage
        raise FitFileError(path, f"cannot be opened as netCDF-4 (truncated or corrupted): "
                           f"{type(e).__name__}: {e}") from None
    if STATE_GROUP not in groups:
        if "stanlite_approximation" in groups:
            raise FitFileError(path, "holds an approximation (ADVI, Laplace, Pathfinder), "
                               "not MCMC chains to resume: read it with arviz.from_netcdf")
        raise FitFileError(path, f"has no '{STATE_GROUP}' group: it was not written by "
                           "stanlite's fit.save() (open it with arviz.from_netcdf instead)")
    datasets = {}
    for g in groups:
        # the state's arrays are read raw (no fill-value masking): bit for bit
        raw = dict(mask_and_scale=False, decode_times=False, decode_timedelta=False) \
            if g == STATE_GROUP else {}
        try:
            # phony_dims: a variable without dimension scales (written by h5py, not
            # netCDF) gets made-up dimensions instead of a warning
            with xr.open_dataset(path, group=g, engine="h5netcdf", phony_dims="access",
                                 **raw) as ds:
                datasets[g] = ds.load()
        except Exception as e:               # noqa: BLE001
            raise FitFileError(path, f"its group '{g}' cannot be read (truncated or "
                               f"corrupted): {type(e).__name__}: {e}") from None
    state = datasets.pop(STATE_GROUP)
    if "state_json" not in state.variables:
        raise FitFileError(path, f"its '{STATE_GROUP}' group has no variable 'state_json' "
                           "(edited?)")
    raw_text = state["state_json"].values
    if raw_text.dtype != np.uint8 or raw_text.ndim != 1:
        raise FitFileError(path, f"its 'state_json' is {raw_text.dtype} of shape "
                           f"{raw_text.shape}, not bytes (edited?)")
    text = raw_text.tobytes()
    arrays = {k: state[k].values for k in state.data_vars if k != "state_json"}
    try:
        packed = json.loads(text.decode("utf-8"))
    except ValueError as e:                  # UnicodeDecodeError, JSONDecodeError
        raise FitFileError(path, f"its state (JSON) is not valid: {e}") from None
    if not isinstance(packed, dict):
        raise FitFileError(path, f"its state is a JSON {type(packed).__name__}, not an "
                           "object (edited?)")
    version = _format_version(path, packed)
    if version >= 2:
        want = state.attrs.get("checksum")
        if want is None:
            raise FitFileError(path, f"its '{STATE_GROUP}' group has lost its checksum "
                               "(edited?)")
        if _fitio.state_digest(text, arrays) != want:
            raise FitFileError(path, "its state (chain states, seeds) does not match its "
                               "checksum: the file was damaged or edited")
    try:
        meta = _unpack(packed, arrays)
    except KeyError as e:
        raise FitFileError(path, f"its state refers to the array {e}, which is missing "
                           "(edited?)") from None
    if version >= 2:
        _check_group_digests(path, datasets, _need(path, meta, "checksums", dict))
    return datasets, meta, version


def _format_version(path, packed):
    fmt, version = packed.get("format"), packed.get("version")
    if fmt != _FORMAT:
        raise FitFileError(path, f"its state has format {fmt!r}, not {_FORMAT!r}")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise FitFileError(path, f"its format version {version!r} is not valid (edited?)")
    if version > _FORMAT_VERSION:
        raise FitFileError(path, f"was written by a newer stanlite (format version "
                           f"{version}; this one reads up to {_FORMAT_VERSION}): upgrade "
                           "stanlite to read it")
    return version


def _check_group_digests(path, datasets, checksums):
    for g, sums in checksums.items():
        if g not in datasets:
            raise FitFileError(path, f"its group '{g}' is missing (deleted or renamed?)")
        have = _fitio.dataset_digests(datasets[g])
        missing = [k for k in sums if k not in have]
        if missing:
            raise FitFileError(path, f"its group '{g}' has lost the variable(s) "
                               f"{', '.join(missing)} (edited?)")
        bad = [k for k in sums if have[k] != sums[k]]
        if bad:
            raise FitFileError(path, f"the values of {', '.join(bad)} in group '{g}' do "
                               "not match their checksums: the file was damaged or edited")


def _need(path, d, key, types, what="its state"):
    if not isinstance(d, dict) or key not in d:
        raise FitFileError(path, f"{what} has no '{key}' (edited?)")
    v = d[key]
    if not isinstance(v, types) or (isinstance(v, bool) and bool not in
                                    (types if isinstance(types, tuple) else (types,))):
        raise FitFileError(path, f"{what}: '{key}' is {type(v).__name__} {_clip(v)}, not "
                           f"{_type_names(types)} (edited?)")
    return v


def _type_names(types):
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join("None" if t is type(None) else t.__name__ for t in types)


def _clip(v, k=60):
    r = repr(v)
    return r if len(r) <= k else r[:k] + "..."


def _fit_from_file(path, datasets, meta, version, cls):
    """The Fit a checked file describes; its pieces checked against each other."""
    from .chain_state import ChainState
    names = _need(path, meta, "names", list)
    seeds = _need(path, meta, "gq_seeds", list)
    raw_states = _need(path, meta, "chain_states", list)
    unames = _need(path, meta, "unconstrained_names", (list, type(None)))
    dim = len(unames) if unames is not None else None
    states = []
    for i, d in enumerate(raw_states):
        states.append(ChainState.from_dict(_checked_state(path, d, i, dim, len(seeds))))
    fit = cls.__new__(cls)
    fit.model = None
    fit.chain_states = states
    fit.gq_seeds = [_seed_from_json(d) for d in seeds]
    fit.interrupted = _need(path, meta, "interrupted", bool)
    fit.method = _need(path, meta, "method", str)
    fit.kind = meta.get("kind", "posterior")
    if fit.kind not in ("posterior", "prior"):
        raise FitFileError(path, f"its state has kind {fit.kind!r}, not 'posterior' or "
                           "'prior' (edited?)")
    fit.max_treedepth = _need(path, meta, "max_treedepth", (int, type(None)))
    fit._fingerprint = meta.get("data_fingerprint") if version >= 2 else \
        _fingerprint_from_groups(datasets)
    fit._model_id, fit._unconstrained_names = meta.get("model"), unames
    params = meta.get("parameters")          # files written before it was recorded: None
    fit._parameters = params if _is_declarations(params) else None
    group = "prior" if fit.kind == "prior" else "posterior"
    post = datasets.get(group)
    rows, n = _rows(states)
    if post is None:
        if n and names:
            raise FitFileError(path, f"has no '{group}' group (deleted or renamed?)")
        post = {}
    # the replicated data are in the predictive group, under their observed names
    fit._predictive = _need(path, meta, "predictive", dict) if "predictive" in meta \
        else {}
    pp = datasets.get(f"{group}_predictive")
    where = {k: (post, k, group) for k in names}
    for obs, gq in fit._predictive.items():
        if pp is None or obs not in pp:
            raise FitFileError(path, f"its {group}_predictive group has no '{obs}' "
                               "(deleted or edited?)")
        where[gq] = (pp, obs, f"{group}_predictive")
    for k in names:
        ds, var, g = where[k]
        if var not in ds:
            raise FitFileError(path, f"its {g} has no '{var}' (edited?)")
        got = ds[var].shape[:2]
        if got != (len(rows), n):
            raise FitFileError(path, f"its {g} '{var}' has {got[0]} chains x "
                               f"{got[1] if len(got) > 1 else 0} draws; the chain states "
                               f"have {len(rows)} x {n} (edited?)")
    fit._idata = _arviz().InferenceData(**datasets)
    fit._draws = {k: np.asarray(where[k][0][where[k][1]].values) for k in names}
    wpost = datasets.get("warmup_posterior")
    fit._warmup_draws = {k: np.asarray(wpost[k].values) for k in names
                         if k in wpost} if wpost is not None else {}
    fit._from_states(n, dim if dim is not None else
                     (len(states[0].q) if states else 0))
    return fit


def _checked_state(path, d, i, dim, n_seeds):
    """Chain state ``i`` (a dict) with the fields a fit is built from checked."""
    what = f"its chain state {i + 1}"
    if not isinstance(d, dict):
        raise FitFileError(path, f"{what} is {type(d).__name__}, not a dict (edited?)")
    cid = _need(path, d, "chain_id", int, what)
    if not 0 <= cid < n_seeds:
        raise FitFileError(path, f"{what} has chain_id {cid}, but there are {n_seeds} "
                           "generated-quantities seeds (edited?)")
    for key in ("iteration", "num_warmup", "num_draws"):
        if _need(path, d, key, int, what) < 0:
            raise FitFileError(path, f"{what}: '{key}' is negative (edited?)")
    for draws_key, stats_key in (("draws", "stats"), ("warmup_draws", "warmup_stats")):
        draws = _need(path, d, draws_key, list, what)
        stats = _need(path, d, stats_key, dict, what)
        for j, x in enumerate(draws):
            if not isinstance(x, np.ndarray) or x.ndim != 1 or \
                    (dim is not None and x.shape != (dim,)):
                shape = getattr(x, "shape", type(x).__name__)
                raise FitFileError(path, f"{what}: draw {j + 1} of '{draws_key}' has "
                                   f"shape {shape}, not ({dim},) (edited?)")
        for k, v in stats.items():
            if draws_key == "draws" and (not isinstance(v, list) or len(v) != len(draws)):
                raise FitFileError(path, f"{what}: statistic '{k}' has "
                                   f"{len(v) if isinstance(v, list) else _clip(v)} values "
                                   f"for {len(draws)} draws (edited?)")
    return d


def _is_declarations(params):
    return isinstance(params, list) and all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
        for p in params)


def _fingerprint_from_groups(datasets):
    """The data fingerprint of a format-1 file, from the data it stores."""
    data = {}
    for g in ("constant_data", "observed_data"):
        ds = datasets.get(g)
        if ds is not None:
            data.update({str(k): ds[k].values for k in ds.data_vars})
            # a size that names a dimension of the group is kept in its attrs
            data.update({str(k): np.asarray(v) for k, v in ds.attrs.items()
                         if k in ds.dims and np.ndim(v) == 0})
    return _fitio.fingerprint_of_data(None, data) if data else None


def _check_model(path, fit, meta, model, data_changed_ok):
    """Raise unless ``model`` may read the fit (same parameters; same data unless
    ``data_changed_ok``); returns whether its data differ from the fit's."""
    check_same_parameters(fit, model, f"the fit in {path!r}", ModelError)
    gq = (f"; to compute generated quantities with this model's data from the saved "
          f"draws instead, use model.generate_quantities(sl.load_fit({path!r}))")
    return _fitio.compare_fingerprints(
        fit._fingerprint, model, f"the fit in {path!r}", changed_ok=data_changed_ok,
        hint=gq, note="; its transformed parameters and generated quantities are "
        "recomputed with this model's data")


# ---- is a fit one of this model? ---------------------------------------------------------
def model_parameters(model):
    """``[[name, declaration], ...]`` of a model's parameters in order, e.g.
    ``[["sigma", "real<lower=0>"], ["beta", "vector[3]"]]`` (names, declared shapes and
    constraints); None for a log density without declarations."""
    slots = getattr(model, "_slots", None) if model is not None else None
    if slots is None:
        return None
    return [[s.name, s.decl.describe(s.shape)] for s in slots]


def _fit_model_name(fit):
    m = getattr(fit, "model", None)
    if m is not None:
        return type(m).__name__
    ident = getattr(fit, "_model_id", None)
    return ident.rsplit(".", 1)[-1] if isinstance(ident, str) else "unknown"


def check_same_parameters(fit, model, where, error):
    """Raise ``error`` (an exception class) unless ``model`` has the parameters ``fit``
    was made with: their names and declarations (shape, constraint) when both are
    known, else the unconstrained parameter names (a file that recorded only those),
    else the dimension. Continuing chains of one model in another mixes posteriors
    (or fails deep in the sampler), whatever the data; a differing class name alone
    is allowed (the data check warns about it)."""
    theirs = model_parameters(getattr(fit, "model", None)) \
        or getattr(fit, "_parameters", None)
    mine = model_parameters(model)
    fname, mname = _fit_model_name(fit), type(model).__name__
    if theirs is not None and mine is not None:
        tn, mn = [n for n, _ in theirs], [n for n, _ in mine]
        if tn != mn:
            raise error(f"{where} is of model {fname} with parameters {_short(tn)}, "
                        f"this model {mname} has {_short(mn)}: its chains cannot be "
                        "continued here")
        differ = [f"{n} is {a} there, {b} here" for (n, a), (_, b) in zip(theirs, mine)
                  if a != b]
        if differ:
            raise error(f"{where} is of model {fname}, whose parameters are declared "
                        f"otherwise than in this model {mname}: {'; '.join(differ)}")
        return
    want = getattr(fit, "_unconstrained_names", None)
    if getattr(fit, "model", None) is not None:
        want = _unconstrained_names(fit.model)
    have = _unconstrained_names(model)
    if want is not None and have is not None and list(want) != list(have):
        raise error(f"{where} is of model {fname} whose unconstrained parameters are "
                    f"{_short(list(want))}; this model {mname} has {_short(list(have))}")
    states = getattr(fit, "chain_states", None) or ()
    dims = {len(s.q) for s in states if getattr(s, "q", None) is not None}
    dim = getattr(model, "dim", None)
    if dim is not None and dims and dims != {dim}:
        raise error(f"{where} has chains of {_short([str(d) for d in sorted(dims)])} "
                    f"unconstrained parameters (model {fname}); this model {mname} has "
                    f"{dim}")


def fit_fingerprint(fit):
    """The fingerprint of the data ``fit``'s chains were drawn with: its model's data,
    or (a fit loaded without a model) what its file recorded, or (quantities
    recomputed on other data: ``model.generate_quantities``, ``load_fit`` with other
    data) the data of the run; None if unknown."""
    sampled = getattr(fit, "_sampled_fingerprint", None)
    if sampled is not None:
        return sampled
    m = getattr(fit, "model", None)
    fp = _fitio.data_fingerprint(m) if m is not None else None
    return fp if fp is not None else getattr(fit, "_fingerprint", None)


def check_resume_data(fit, model, data_changed_ok=False):
    """For ``model.sample(resume_from=fit)``: a DataError if ``fit`` was made with
    other data than ``model`` has (unless ``data_changed_ok``)."""
    if getattr(fit, "model", None) is model and \
            getattr(fit, "_sampled_fingerprint", None) is None:
        return
    _fitio.compare_fingerprints(fit_fingerprint(fit), model, "resume_from (the fit)",
                                changed_ok=data_changed_ok)


def _short(names, k=6):
    return "[" + ", ".join(names[:k]) + (", ..." if len(names) > k else "") + "]"
