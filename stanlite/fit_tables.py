"""A fit's arrays: draws into named arrays, generated quantities, ArviZ's datasets.

What :class:`~stanlite.fit.Fit` (and :class:`~stanlite.approx_fit.ApproximateFit`)
build their ``fit[name]`` arrays and ``to_arviz()`` groups with, apart from the fit
objects themselves: :func:`output_arrays` runs the model's transformed parameters
and generated quantities over the draws (:class:`_OutputTable` fills the arrays),
the element names Stan uses (``beta[1]``), and the datasets, dimension names and
coordinates of the InferenceData. Split from stanlite/fit.py (issue 23: one job a
module); stanlite.fit re-exports the names other modules use.
"""

from __future__ import annotations

import numpy as np

from .errors import ModelError

__all__ = ["output_arrays", "predictive_names"]


def _arviz():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)   # arviz's refactor notice
        import arviz
    return arviz


def _diagnostics(az, x):
    if x.shape[1] < 4 or not np.all(np.isfinite(x)):
        return (np.nan,) * 4
    if np.ptp(x) == 0:
        return (0.0, np.nan, np.nan, np.nan)
    # R-hat needs two chains (ArviZ returns NaN for one, logging a warning per call)
    rhat = _scalar(az.rhat(x)) if x.shape[0] > 1 else np.nan
    return (_scalar(az.mcse(x, method="mean")), _scalar(az.ess(x, method="bulk")),
            _scalar(az.ess(x, method="tail")), rhat)


def _element(name, draws, strict=True):
    """``(chains, draws)`` of the element Stan names ``name`` (``beta[1]``,
    ``L[2,1]``: 1-based), or None if ``name`` has not that form or names no quantity;
    an index out of range is a KeyError (``strict``) or None."""
    if not isinstance(name, str) or not name.endswith("]") or "[" not in name:
        return None
    base, _, rest = name[:-1].partition("[")
    v = draws.get(base)
    if v is None:
        return None
    try:
        idx = tuple(int(i) for i in rest.split(","))
    except ValueError:
        return None
    shape = v.shape[2:]
    if len(idx) != len(shape) or not all(1 <= i <= n for i, n in zip(idx, shape)):
        if not strict:
            return None
        if not shape:
            raise KeyError(f"{name!r}: '{base}' is a scalar, it has no elements: "
                           f"fit[{base!r}]")
        raise KeyError(f"{name!r}: '{base}' has shape {shape}, indexed from 1 as in Stan "
                       f"(its elements run from {base}[{','.join('1' * len(shape))}] to "
                       f"{base}[{','.join(map(str, shape))}])")
    return v[(slice(None), slice(None)) + tuple(i - 1 for i in idx)]


def _names_list(vars, draws, stats=(), elements=True):
    """``vars`` (a name or a list of them) checked: each a quantity, a statistic or
    (``elements``) a quantity's element; a KeyError naming the first that is not."""
    names = [vars] if isinstance(vars, str) else list(vars)
    for k in names:
        if k in draws or k in stats:
            continue
        if elements and _element(k, draws, strict=False) is not None:
            continue
        raise KeyError(f"{k!r} is not a quantity{' or element' if elements else ''}"
                       f"{' or sampler statistic' if stats else ''} of this fit; known: "
                       f"{', '.join(list(draws) + list(stats))}")
    return names


def _stack_rows(parts):
    """The per-chain row blocks of one column (or quantity) one after another."""
    if not parts:
        return np.empty(0)
    return np.concatenate(parts, axis=0)


def _rows(states):
    """``(indices, n)``: the chains that make up ``fit[name]`` and its number of draws.
    Chains of equal length are all kept; otherwise (an interrupted run) the chains
    with draws, cut to the shortest of them."""
    lengths = [len(s.draws) for s in states]
    if len(set(lengths)) <= 1:
        return list(range(len(states))), (lengths[0] if lengths else 0)
    rows = [i for i, k in enumerate(lengths) if k > 0]
    return rows, min(lengths[i] for i in rows)


def _empty_arrays(model, chains):
    """``{name: (chains, 0, *shape)}`` for a run without draws (interrupted in
    warmup), so that ``fit[name]`` still has the quantity's shape."""
    try:
        tp, gq = model.output_shapes()
        shapes = {**model.param_shapes(), **tp, **gq}
    except Exception:              # noqa: BLE001 - no shapes: the fit has no arrays
        return {}
    return {k: np.empty((chains, 0) + tuple(v)) for k, v in shapes.items()}


def output_arrays(model, draws, rngs, what="draws"):
    """``{name: (chains, draws, *shape)}`` of everything a draw reports (parameters,
    transformed parameters, generated quantities: ``model.output(x, rng)``) from the
    unconstrained draws of each chain (``draws[c][d]`` a point of R^dim), the
    generated quantities of chain ``c`` drawn with ``rngs[c]`` in draw order.
    Chains of unequal length: arrays as long as the longest, NaN after a chain's end.

    Nothing here loses a draw (the draws are paid for; the quantities are derived):

    * ``generated_quantities`` raising at a draw - any ``Exception``, the user's bugs
      included; only ``KeyboardInterrupt``/``SystemExit`` are not caught - gives NaN
      for that draw's generated quantities, as cmdstan writes them, and one
      RuntimeWarning with the count and the first error (its type and message).
      ``transformed_parameters`` failing at a draw (it succeeded there during
      sampling, on traced values) likewise gives NaN for its quantities and the
      generated ones. Names and shapes come from the first draw that succeeds (not
      from the origin, where a quantity may be undefined); if none succeeds the
      fit has none of them, and the warning says so. Integer quantities
      (``rng.poisson``, counts, booleans) keep an integer dtype (int64) when every
      draw has them; where some draw has NaN for them (a failure, an interrupt)
      they are floats, so that NaN fits.
    * Ctrl-C (``KeyboardInterrupt``) stops the computation: the draws not reached
      get their parameters (constrained: cheap) and NaN for the transformed
      parameters and generated quantities, with a RuntimeWarning. A second Ctrl-C
      stops that too (the rest NaN); the unconstrained draws are kept either way
      (``fit.unconstrained_draws``, the chain states), and
      ``model.sample(resume_from=fit)`` recomputes everything exactly (the
      generated quantities' seeds are kept).
    """
    whole = _parameters_only(model, draws)
    if whole is not None:
        return whole
    table = _OutputTable(len(draws), max((len(xs) for xs in draws), default=0))
    gq_fun = getattr(model, "generated_values", None)
    split = callable(gq_fun) and getattr(model, "_has_gq", True)
    table.parts = getattr(model, "_draw_output", None)
    stop = None                                   # (chain, draw) of a Ctrl-C
    for c, (xs, rng) in enumerate(zip(draws, rngs)):
        for d in range(len(xs)):
            x = np.asarray(xs[d])
            table.total += 1
            if stop is None:
                try:
                    table.draw(c, d, model, x, rng, gq_fun if split else None)
                    continue
                except KeyboardInterrupt:
                    stop = (c, d)
                    if (c, d) in table.have_params:
                        continue
            table.put_params(c, d, model, x)
    table.warn(what, stop)
    return table.integers_kept()


def _parameters_only(model, draws):
    """:func:`output_arrays` for a model whose draws report their parameters only
    (no transformed parameters, no generated quantities): every draw constrained in
    one pass (``model._constrain_draws``: the numbers ``output`` gives draw by draw,
    ~100x cheaper for a small model); None when the model cannot (the per-draw loop
    then runs, with its handling of failures and Ctrl-C: this pass is retried there
    if anything interrupts it)."""
    batch = getattr(model, "_constrain_draws", None)
    if batch is None:
        return None
    lengths = [len(xs) for xs in draws]
    dim = getattr(model, "dim", None)
    try:
        X = [np.asarray(xs, dtype=float) for xs in draws if len(xs)]
        if not X:
            return {}
        X = X[0] if len(X) == 1 else np.concatenate(X)
        if X.ndim != 2 or X.shape[1] != dim:
            return None
        vals = batch(X)
    except (Exception, KeyboardInterrupt):   # noqa: BLE001 - the per-draw loop decides
        return None
    if vals is None:
        return None
    out = {}
    n = max(lengths)
    for k, v in vals.items():
        a = out[k] = np.full((len(draws), n) + v.shape[1:], np.nan)
        i = 0
        for c, m in enumerate(lengths):
            a[c, :m] = v[i:i + m]
            i += m
    return out


class _OutputTable:
    """The arrays :func:`output_arrays` fills: NaN until a draw's value is put, each
    array allocated by the first value of its name (its shape); the failures, by
    block, for one warning each."""

    def __init__(self, chains, n):
        self.shape = (chains, n)
        self.out = {}
        self.names = {}               # block -> {name: shape} of its first success
        self.failed = {}              # block -> [count, (chain, draw, exception)]
        self.tried = {"transformed_parameters": 0, "generated_quantities": 0, "output": 0}
        self.have_params = set()      # (chain, draw) whose parameters are in
        self.done = 0                 # draws with everything computed
        self.total = 0
        self.params_stopped = False   # a second Ctrl-C stopped the parameters too
        self.parts = None             # model._draw_output, where it has one
        self.reals = set()            # names with a non-integer value at some draw

    def integers_kept(self):
        """The arrays, those of integer quantities (integer at every draw, none
        missing) as int64."""
        for k, a in self.out.items():
            if k not in self.reals and a.size and not np.isnan(a).any():
                self.out[k] = a.astype(np.int64)
        return self.out

    def draw(self, c, d, model, x, rng, gq_fun):
        """One draw: everything, each block's failure counted (its values NaN)."""
        block = "transformed_parameters" if gq_fun is not None else "output"
        self.tried[block] += 1
        try:
            if gq_fun is not None:
                # one constrain (and transformed parameters) for both blocks where
                # the model offers it
                parts = self.parts(x) if self.parts is not None else None
                if parts is not None:
                    base, gq_of = parts
                else:
                    base = model.output(x, rng=rng, include_gq=False)
                    gq_of = None
            else:
                base = model.output(x, rng=rng)
        except Exception as e:       # noqa: BLE001 - the user's code: NaN, counted
            self._fail(block, c, d, e)
            self.put_params(c, d, model, x)
            return
        self._put(c, d, base)
        self.have_params.add((c, d))
        if gq_fun is not None:
            self.tried["generated_quantities"] += 1
            try:
                vals = self._checked("generated_quantities",
                                     gq_of(rng) if gq_of is not None else gq_fun(x, rng))
            except Exception as e:   # noqa: BLE001 - the user's code: NaN, counted
                self._fail("generated_quantities", c, d, e)
                return
            self._put(c, d, vals)
        self.done += 1

    def _checked(self, block, values):
        vals = {k: np.asarray(v) for k, v in values.items()}
        bad = [k for k, v in vals.items() if v.dtype.kind not in "biuf"]
        if bad:
            raise ModelError(f"{block}: '{bad[0]}' is {vals[bad[0]].dtype}, not numbers")
        if block not in self.names:
            self.names[block] = {k: v.shape for k, v in vals.items()}
        else:
            _same_quantities(vals, self.names[block])
        return vals

    def _fail(self, block, c, d, e):
        rec = self.failed.setdefault(block, [0, (c, d, e)])
        rec[0] += 1

    def _put(self, c, d, vals):
        for k, v in vals.items():
            if np.asarray(v).dtype.kind not in "biu":
                self.reals.add(k)
            a = self.out.get(k)
            if a is None:
                a = self.out[k] = np.full(self.shape + np.shape(v), np.nan)
            a[c, d] = v

    def put_params(self, c, d, model, x):
        """This draw's parameters only (the rest stays NaN)."""
        if self.params_stopped or not callable(getattr(model, "constrain", None)):
            return
        try:
            vals = model.constrain(x)
        except KeyboardInterrupt:
            self.params_stopped = True
            return
        self._put(c, d, vals)
        self.have_params.add((c, d))

    def warn(self, what, stop):
        import warnings
        for block, (count, (c, d, e)) in self.failed.items():
            first = f"the first at chain {c + 1}, draw {d + 1}: {type(e).__name__}: {e}"
            noun = _BLOCK_NOUNS[block]
            if count == self.tried[block]:
                msg = (f"{block} failed at every one of the {count} {what} ({first}): "
                       f"this fit has no {noun}; the parameter draws are all kept. Fix "
                       f"{block} and recompute them with model.sample(resume_from=fit)")
            else:
                names = self.names.get(block)
                which = f" ({', '.join(names)})" if names else ""
                msg = (f"{block} failed at {count} of {self.tried[block]} {what} "
                       f"({first}): their {noun}{which} are NaN, as Stan writes them; "
                       "the parameter draws are all kept")
            warnings.warn(msg, RuntimeWarning, stacklevel=6)
        if stop is not None:
            c, d = stop
            left = self.total - self.done
            no_params = self.total - len(self.have_params)
            kept = ("every draw keeps its parameters" if not no_params else
                    f"a second Ctrl-C left the parameters of {no_params} of them NaN too")
            warnings.warn(f"interrupted while computing the transformed parameters and "
                          f"generated quantities of the {what} (at chain {c + 1}, draw "
                          f"{d + 1}): {left} of {self.total} {what} have NaN for them; "
                          f"{kept}, and the unconstrained draws are all in the fit. "
                          "model.sample(resume_from=fit) recomputes them exactly",
                          RuntimeWarning, stacklevel=6)


#: what a failing block leaves NaN (output_arrays' warnings)
_BLOCK_NOUNS = {"generated_quantities": "generated quantities",
                "transformed_parameters": "transformed parameters and generated quantities",
                "output": "quantities but the parameters"}


def _same_quantities(vals, shapes):
    """Raise if a draw's generated quantities differ in names or shapes from the
    first successful draw's (Stan's are declared; a draw that differs failed)."""
    if vals.keys() != shapes.keys():
        extra, missing = sorted(set(vals) - set(shapes)), sorted(set(shapes) - set(vals))
        raise ModelError("generated_quantities returned other names than at the first "
                         "draw: " + "; ".join(
                             ([f"new {', '.join(extra)}"] if extra else [])
                             + ([f"no {', '.join(missing)}"] if missing else [])))
    for k, v in vals.items():
        if v.shape != shapes[k]:
            raise ModelError(f"generated quantity '{k}' has shape {v.shape} here and "
                             f"{shapes[k]} at the first draw")


def _scalar(v):
    """A float from what ArviZ returns for one variable (0-d, or shape (1,))."""
    return float(np.asarray(v, dtype=float).reshape(-1)[0])


def _dataset(values, dims, coords):
    """An ``xarray.Dataset`` of data fields (0-d stays 0-d), with ArviZ's attrs. A
    0-d field named like a dimension of the group (a size ``J`` beside a
    ``vector("J")``) cannot be a variable there (xarray): it goes to the attrs."""
    import xarray as xr
    az = _arviz()
    vs, cs = {}, {}
    for k, v in values.items():
        d = dims.get(k) or [f"{k}_dim_{i}" for i in range(v.ndim)]
        vs[k] = (d, v)
        for name, size in zip(d, v.shape):
            cs[name] = coords.get(name, np.arange(size))
    make_attrs = getattr(getattr(az, "data", None), "base", None)
    attrs = make_attrs.make_attrs() if hasattr(make_attrs, "make_attrs") else {}
    for k in [k for k, (d, v) in vs.items() if k in cs and not d]:
        attrs[k] = vs.pop(k)[1].item()
    return xr.Dataset(vs, coords=cs, attrs=attrs)


# ---- dimension names, coordinates, replicated data -----------------------------------------
class _DimNames:
    """Dimension names from the model's declarations: a declared axis of size
    ``"J"`` is ``J``; an axis of an undeclared quantity whose length is that of exactly
    one named size takes that name; any other axis is ``<variable>_dim_<i>``."""

    def __init__(self, model, data):
        cls = type(model)
        decls = {**getattr(cls, "_data_decls", {}), **getattr(cls, "_param_decls", {})}
        shapes = {k: np.shape(v) for k, v in data.items()}
        shapes.update(_param_shapes(model))
        self.declared, named = {}, {}
        for attr, decl in decls.items():
            # outputs name a variable by its Stan name (name=), else its attribute
            k = next((n for n in (getattr(decl, "name", None), attr) if n in shapes), None)
            if k is None:
                continue
            shape = shapes[k]
            exprs = getattr(decl, "size_exprs", decl.dims)    # array= sizes first
            sizes = [d if isinstance(d, str) else None for d in exprs]
            if len(sizes) + 1 == len(shape):            # a square matrix of one size
                sizes.append(None)
            if len(sizes) != len(shape) or any(
                    d is not None and (d not in data or np.ndim(data[d]) or
                                       int(data[d]) != n) for d, n in zip(sizes, shape)):
                continue                                # not a layout read here
            self.declared[k] = sizes
            named.update((d, n) for d, n in zip(sizes, shape) if d is not None)
        by_length = {}
        for d, n in named.items():
            by_length.setdefault(n, []).append(d)
        self.by_length = {n: ds[0] for n, ds in by_length.items() if len(ds) == 1}

    def of(self, k, shape):
        """The dimension names of variable ``k`` of (per-draw) shape ``shape``."""
        given = self.declared.get(k)
        out = []
        for i, n in enumerate(shape):
            d = given[i] if given is not None else self.by_length.get(n)
            out.append(d if d is not None and d not in out else f"{k}_dim_{i}")
        return out


def _param_shapes(model):
    shapes = getattr(model, "param_shapes", None)
    return shapes() if callable(shapes) else {}


def _checked_dims(dims, shapes):
    """``to_arviz``'s ``dims``: ``{variable: [dimension names]}``, one name per axis
    of a variable of the fit (``shapes``: per draw)."""
    from .errors import ArgumentError
    if dims is None:
        return {}
    if not isinstance(dims, dict) or not all(
            isinstance(v, (list, tuple)) and all(isinstance(d, str) for d in v)
            for v in dims.values()):
        raise ArgumentError("dims must be a dict of variable name -> list of dimension "
                            f"names, got {dims!r}")
    for k, v in dims.items():
        if k not in shapes:
            raise ArgumentError(f"dims names {k!r}, which is not a variable of this fit "
                                f"(variables: {', '.join(shapes)})")
        if len(v) != len(shapes[k]):
            raise ArgumentError(f"dims for {k!r}: {len(v)} names for its "
                                f"{len(shapes[k])} axes (shape {shapes[k]} per draw)")
    return {k: list(v) for k, v in dims.items()}


def _from_dict(az, kw, groups_dims, posterior_dims, coords):
    """``az.from_dict`` with the dimension names of every group (one mapping: a name
    in two groups has the same dimensions in both, as the observed field and its
    replicate and log-likelihood do)."""
    merged = dict(posterior_dims)
    for d in groups_dims.values():
        merged.update(d)
    return az.from_dict(**kw, coords=coords, dims=merged)


def _with_coords(idata, coords):
    """``idata`` with ``coords`` (``{dim: labels}``) on every group having the
    dimension; an ArgumentError for a dimension no group has or labels of the wrong
    length."""
    from .errors import ArgumentError
    if not isinstance(coords, dict):
        raise ArgumentError(f"coords must be a dict of dimension name -> labels, got "
                            f"{type(coords).__name__}")
    sizes = {}
    for g in idata.groups():
        sizes.update(idata[g].sizes)
    for d, labels in coords.items():
        if d not in sizes:
            known = sorted(k for k in sizes if k not in ("chain", "draw"))
            raise ArgumentError(f"coords names dimension {d!r}, which no group has "
                                f"(dimensions: {', '.join(known)})")
        if np.ndim(labels) != 1 or len(labels) != sizes[d]:
            raise ArgumentError(f"coords for dimension {d!r}: expected {sizes[d]} labels, "
                                f"got {np.shape(labels)}")
    out = idata.copy()
    for g in out.groups():
        ds = out[g]
        mine = {d: np.asarray(v) for d, v in coords.items() if d in ds.dims}
        if mine:
            setattr(out, g, ds.assign_coords(mine))
    return out


def predictive_names(model, observed, quantities, data):
    """``{observed field: generated quantity}`` of the model's replicated data: its
    ``predictive`` declaration (``{"y": "y_rep"}``), else the naming rule
    ``<observed>_rep`` for each observed field with such a quantity. A declaration
    naming no observed field or no generated quantity, or a replicate whose shape is
    not its field's, is a ModelError."""
    declared = getattr(model, "predictive", None)
    what = f"{type(model).__name__}.predictive"
    if declared is None:
        pairs = {obs: f"{obs}_rep" for obs in observed if f"{obs}_rep" in quantities}
    elif not isinstance(declared, dict):
        raise ModelError(f"{what} must be a dict of observed data field -> generated "
                         f"quantity (e.g. {{'y': 'y_rep'}}), got {type(declared).__name__}")
    else:
        pairs = dict(declared)
        for obs, gq in pairs.items():
            if obs not in observed:
                raise ModelError(f"{what} names {obs!r}, which is not an observed data "
                                 f"field (observed: {', '.join(observed) or 'none'}; "
                                 "declare it in observed = (...))")
            if gq not in quantities:
                raise ModelError(f"{what} maps {obs!r} to {gq!r}, which is not a "
                                 "generated quantity of the fit (quantities: "
                                 f"{', '.join(quantities)})")
    for obs, gq in pairs.items():
        if quantities[gq].shape[2:] != np.shape(data[obs]):
            raise ModelError(f"{what if declared is not None else 'the replicate'} "
                             f"{gq!r} has shape {quantities[gq].shape[2:]} per draw, "
                             f"but the observed {obs!r} has shape {np.shape(data[obs])}")
    return pairs


# ---- observed data, model identity -------------------------------------------------------
def _observed_names(model, data):
    """The data fields the model declares observed (``observed = ("y",)``), checked."""
    from .errors import ModelError
    obs = getattr(model, "observed", ()) or ()
    if isinstance(obs, str):
        obs = (obs,)
    obs = tuple(obs)
    bad = [k for k in obs if k not in data]
    if bad:
        raise ModelError(f"{type(model).__name__}.observed names {', '.join(map(repr, bad))}"
                         f", which is not a data field (data fields: "
                         f"{', '.join(data) or 'none'})")
    return obs
