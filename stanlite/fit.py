"""The result of a fit: draws by name, summary, diagnostics in words, ArviZ export.

``fit[name]`` is an array ``(chains, draws, *shape)`` for every parameter,
transformed parameter and generated quantity (chains of unequal length, left by an
interrupted run, cut to the shortest with a warning; ``fit.draws(chain=i)`` gives
chain ``i`` whole); ``fit.summary()`` a pandas DataFrame
(mean, sd, 5/50/95% quantiles, MCSE, bulk/tail ESS, rank-normalised split R-hat, the
last four computed by ArviZ); ``fit.diagnose()`` the checks Stan's ``diagnose``
runs, each in words with advice; ``fit.to_arviz()`` an ``arviz.InferenceData``.
The chains' full states are kept (``fit.chain_states``), so a run can be resumed
or extended with ``model.sample(resume_from=fit)``.

``fit.save(path)`` writes a netCDF file (ArviZ's layout, readable by
``arviz.from_netcdf``) with one extra group, ``stanlite_state``, that holds the
chains' states and the generated-quantities seeds; :func:`load_fit` reads it back
into a fit with the same ``fit[name]``, ``summary()``, ``diagnose()``,
``to_arviz()``, ``step_size`` and ``inv_metric``, from which
``model.sample(resume_from=loaded)`` continues bit-identically. The file is written
aside and renamed into place, with checksums of every group and a fingerprint of the
model's data, which ``load_fit`` checks (:mod:`stanlite._fitio`): a damaged or edited
file is a :class:`~stanlite.FitFileError`, resuming on other data a ``DataError``.

A model may define ``log_likelihood(self, <names>)`` returning the pointwise
log-likelihood (an array, or a dict name -> array); it goes to the InferenceData's
``log_likelihood`` group (for ``arviz.loo`` / ``arviz.compare``). A class attribute
``observed = ("y",)`` names the data fields that are observations: they go to
``observed_data``, the other data fields to ``constant_data``; ``predictive = {"y":
"y_rep"}`` (or the naming rule ``<observed>_rep``) names the generated quantity that
replicates an observed field: it goes to ``posterior_predictive`` under the field's
name (``prior_predictive`` for a fit of the prior). Dimensions are named after the
declared sizes (:meth:`Fit.to_arviz`). ``fit["beta[1]"]`` is an element by Stan's
name; ``fit.draws_pd()`` and ``fit.draws_xr()`` are cmdstanpy's tables. Integer
generated quantities keep an integer dtype.
"""

from __future__ import annotations

import contextlib
import inspect
import os

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _fitio
from .errors import ModelError
# the file format and the model checks (fit_file.py), the arrays and datasets
# (fit_tables.py): split from this module, which keeps the fit object; the names
# other modules and the tests read as stanlite.fit.<name> are re-exported
from .fit_file import (STATE_GROUP, _pack, _seed_from_json, _seed_to_json,  # noqa: F401
                       _unconstrained_names, _unpack, check_resume_data,
                       check_same_parameters, fit_fingerprint, read_fit, state_group)
from .fit_tables import (_arviz, _checked_dims, _dataset, _diagnostics,  # noqa: F401
                         _DimNames, _element, _empty_arrays, _from_dict, _names_list,
                         _observed_names, _OutputTable, _rows, _stack_rows, _with_coords,
                         output_arrays, predictive_names)

if TYPE_CHECKING:                       # annotations only (imported lazily at run time)
    import arviz
    import pandas
    import xarray

__all__ = ["Fit", "load_fit"]

#: Stan's sampler statistics -> ArviZ's sample_stats names
ARVIZ_STATS = {"lp__": "lp", "accept_stat__": "acceptance_rate", "stepsize__": "step_size",
               "treedepth__": "tree_depth", "n_leapfrog__": "n_steps",
               "divergent__": "diverging", "energy__": "energy",
               "energy_error__": "energy_error", "max_energy_error__": "max_energy_error"}


class Fit:
    """Draws of a sampler run, with its diagnostics (see the module docstring)."""

    #: per-draw statistics (Stan's names) -> ArviZ's sample_stats names
    arviz_stats = ARVIZ_STATS
    #: warmup iterations kept (save_warmup=True); none for an approximation
    num_warmup_draws = 0
    _warmup_draws = {}
    _warmup_stats = {}
    #: "posterior", or "prior" for model.sample_prior_predictive (ArviZ's prior groups)
    kind = "posterior"

    def __init__(self, model, chain_states, gq_seeds, interrupted=False, method="nuts",
                 max_treedepth=10):
        self.model = model
        self.chain_states = chain_states
        self.gq_seeds = gq_seeds
        self.interrupted = interrupted
        self.method = method
        self.max_treedepth = max_treedepth
        self.kind = "prior" if getattr(model, "_prior_only", False) else "posterior"
        self._idata = None          # set for a fit read by load_fit
        self._build()

    # ---- assembling the arrays ---------------------------------------------------------
    #: chains whose whole draws (all quantities) are computed: ``{index: {name: array}}``
    _whole = None
    #: the chain_states indices of fit[name]'s rows (None: no Markov chains, e.g. ADVI)
    _rows = None

    def _build(self):
        states = self.chain_states
        rows, n = _rows(states)
        kept = [states[i] for i in rows]
        rngs = [np.random.Generator(np.random.PCG64(self.gq_seeds[s.chain_id]))
                for s in kept]
        # every chain whole (output_arrays pads the shorter ones with NaN), fit[name]
        # the first n of each: generated quantities are drawn in draw order from the
        # chain's own stream, so a cut changes none of them
        full = output_arrays(self.model, [s.draws for s in kept], rngs)
        if n == 0 and not full:
            full = _empty_arrays(self.model, len(kept))   # fit[name] is (chains, 0, ...)
        self._whole = {i: {k: v[j, :len(states[i].draws)] for k, v in full.items()}
                       for j, i in enumerate(rows)}
        self._draws = {k: v[:, :n] for k, v in full.items()}
        # warmup draws (save_warmup=True): their generated quantities from streams of
        # their own, so that saving warmup changes nothing after it
        nw = min(len(s.warmup_draws) for s in kept) if kept else 0
        wrngs = [np.random.Generator(np.random.PCG64(self.gq_seeds[s.chain_id]).jumped())
                 for s in kept]
        self._warmup_draws = output_arrays(self.model, [s.warmup_draws[:nw] for s in kept],
                                           wrngs, what="warmup draws") if nw else {}
        self._from_states(n, self.model.dim)

    def _from_states(self, n, dim):
        """Sampler statistics and unconstrained draws from the chain states (the
        chains that have draws, cut to ``n``: :func:`_rows`)."""
        self._rows, _ = _rows(self.chain_states)
        states = [self.chain_states[i] for i in self._rows]
        self.num_draws = n
        self.num_chains = len(states)
        self._stats = {k: np.array([s.stats[k][:n] for s in states], dtype=float)
                       for k in (states[0].stats if states else {})}
        nw = min(len(s.warmup_stats.get("lp__", ())) for s in states) if states else 0
        self.num_warmup_draws = nw
        self._warmup_stats = {k: np.array([s.warmup_stats[k][:nw] for s in states],
                                          dtype=float)
                              for k in (states[0].warmup_stats if nw else {})}
        self.unconstrained_draws = np.array([np.asarray(s.draws[:n]) for s in states]) \
            if states else np.empty((0, 0, dim))

    @property
    def chain_ids(self):
        """The chains (0-based, as ``chain_states`` and ``draws(chain=i)`` number them)
        whose draws are the rows of ``fit[name]``: all of them, unless an interrupted
        run left some without draws."""
        return [self.chain_states[i].chain_id for i in self._rows]

    def _cut_note(self):
        """What the cut of ``fit[name]`` to the shortest chain hides, or ``None``."""
        if self._rows is None:
            return None
        lengths = [len(s.draws) for s in self.chain_states]
        # 0-based, as fit.draws(chain=i) numbers them
        hidden = {i: lengths[i] - self.num_draws for i in self._rows
                  if lengths[i] > self.num_draws}
        empty = [i for i in range(len(lengths)) if i not in self._rows]
        if not hidden and not empty:
            return None
        note = f"cut to the shortest chain's {self.num_draws} draws"
        if hidden:
            note += (f", hiding {sum(hidden.values())} draws of chain(s) "
                     + ", ".join(f"{c} ({k} more)" for c, k in hidden.items()))
        if empty:
            note += f"; chain(s) {', '.join(map(str, empty))} have no draws and are left out"
        return note + " (an interrupted run); fit.draws(chain=i) gives chain i whole"

    #: > 0 while a method calls another that would warn about the cut again
    _cut_quiet = 0

    @contextlib.contextmanager
    def _no_cut_warning(self):
        """Inside: ``_warn_cut`` is silent (one warning per user-facing call)."""
        self._cut_quiet += 1
        try:
            yield
        finally:
            self._cut_quiet -= 1

    def _warn_cut(self, what):
        note = self._cut_note() if not self._cut_quiet else None
        if note is not None:
            import warnings
            warnings.warn(f"{what} is {note}", RuntimeWarning, stacklevel=3)

    def _get(self, name):
        if name in self._draws:
            return self._draws[name]
        if name in self._stats:
            return self._stats[name]
        element = _element(name, self._draws)
        if element is not None:
            return element
        raise KeyError(f"'{name}' is not a parameter, transformed parameter, generated "
                       f"quantity or sampler statistic of this fit; known: "
                       f"{sorted(self._draws) + sorted(self._stats)}")

    def __getitem__(self, name: str) -> np.ndarray:
        """``(chains, draws, *shape)``; an element by Stan's name (1-based, as in
        ``summary()``: ``fit["beta[1]"]``, ``fit["L[2,1]"]``) is ``(chains, draws)``.
        Chains of unequal length (an interrupted run) are cut to the shortest, with a
        RuntimeWarning saying how much is hidden."""
        v = self._get(name)
        self._warn_cut(f"fit[{name!r}]")
        return v

    def draws(self, chain: int) -> dict[str, np.ndarray]:
        """Chain ``chain`` whole (0-based, as in ``chain_states``): ``{name: (draws,
        *shape)}`` of every parameter, transformed parameter, generated quantity and
        sampler statistic, however many draws the other chains have (``fit[name]``
        cuts all chains to the shortest)."""
        n_chains = len(self.chain_states)
        if isinstance(chain, bool) or not isinstance(chain, (int, np.integer)) \
                or not 0 <= chain < n_chains:
            raise ValueError(f"chain must be an integer in 0..{n_chains - 1}, got {chain!r}")
        st = self.chain_states[chain]
        out = dict(self._whole_quantities(chain))
        out.update({k: np.asarray(v, dtype=float) for k, v in st.stats.items()})
        return out

    def _whole_quantities(self, chain):
        if self._whole is not None and chain in self._whole:
            return self._whole[chain]
        st = self.chain_states[chain]
        if not st.draws:
            return {k: np.empty((0,) + v.shape[2:]) for k, v in self._draws.items()}
        if chain in self._rows and len(st.draws) == self.num_draws:
            return {k: v[self._rows.index(chain)] for k, v in self._draws.items()}
        if self.model is None:
            from .errors import ModelError
            raise ModelError(f"chain {chain} has {len(st.draws)} draws, more than this "
                             f"loaded fit's arrays keep ({self.num_draws}): load it with "
                             "sl.load_fit(path, model=model) to compute them")
        rng = np.random.Generator(np.random.PCG64(self.gq_seeds[st.chain_id]))
        whole = {k: v[0] for k, v in output_arrays(self.model, [st.draws], [rng]).items()}
        self._whole = {**(self._whole or {}), chain: whole}
        return whole

    def warmup(self, name: str) -> np.ndarray:
        """``(chains, warmup draws, *shape)`` of a quantity or sampler statistic over
        the warmup iterations (a run with ``save_warmup=True``; cmdstanpy's
        ``inc_warmup``). They are in ``to_arviz()``'s ``warmup_posterior`` and
        ``warmup_sample_stats`` groups too."""
        if not self.num_warmup_draws:
            raise KeyError("this fit kept no warmup draws: sample with save_warmup=True")
        src = self._warmup_draws
        if name in src:
            return src[name]
        if name in self._warmup_stats:
            return self._warmup_stats[name]
        raise KeyError(f"'{name}' is not a quantity or sampler statistic of this fit; "
                       f"known: {sorted(src) + sorted(self._warmup_stats)}")

    def __contains__(self, name):
        return name in self._draws or name in self._stats or \
            _element(name, self._draws, strict=False) is not None

    # ---- tables ---------------------------------------------------------------------------
    def draws_pd(self, vars: str | Sequence[str] | None = None, inc_warmup: bool = False
                 ) -> pandas.DataFrame:
        """The draws as a pandas DataFrame, one row per draw, as cmdstanpy's
        ``draws_pd``: ``chain__`` (1-based), ``iter__`` (the iteration within its
        chain, 1-based; warmup first with ``inc_warmup=True``), ``draw__`` (1-based
        over all rows), the sampler statistics (``lp__``, ``accept_stat__``, ...),
        then one column per element of every quantity under Stan's names
        (``theta[1]``); integer quantities keep an integer dtype. ``vars``: names
        of quantities, elements or statistics to keep (a str or a list). Chains of
        unequal length are cut to the shortest, as ``fit[name]``."""
        import pandas as pd
        from .model import element_names
        self._warn_cut("draws_pd()")
        blocks = self._row_blocks(inc_warmup)
        cols = {}
        chains = [c for c, _, _, _ in blocks]
        n_rows = [len(it) for _, it, _, _ in blocks]
        cols["chain__"] = np.repeat(np.asarray(chains, dtype=np.int64) + 1, n_rows)
        cols["iter__"] = np.concatenate([it for _, it, _, _ in blocks]) if blocks else \
            np.empty(0, np.int64)
        cols["draw__"] = np.arange(1, len(cols["iter__"]) + 1)
        want = None if vars is None else \
            set(_names_list(vars, self._draws, self._stats))
        for k in self._stats:
            if want is None or k in want:
                cols[k] = _stack_rows([s[k] for _, _, s, _ in blocks])
        for k in self.names:
            if want is not None and k not in want and \
                    not any(w.startswith(k + "[") for w in want):
                continue
            v = _stack_rows([q[k] for _, _, _, q in blocks])
            flat = v.reshape(v.shape[0], -1)
            for j, en in enumerate(element_names(k, v.shape[1:])):
                if want is None or k in want or en in want:
                    cols[en] = flat[:, j]
        return pd.DataFrame(cols)

    def draws_xr(self, vars: str | Sequence[str] | None = None, inc_warmup: bool = False
                 ) -> xarray.Dataset:
        """The draws as an ``xarray.Dataset`` (cmdstanpy's ``draws_xr``): every
        parameter, transformed parameter and generated quantity (or those ``vars``
        names) with dimensions ``chain``, ``draw`` and the named dimensions of
        :meth:`to_arviz` (``theta`` is ``(chain, draw, J)``); ``chain`` labelled
        from 1; the warmup draws first with ``inc_warmup=True``."""
        import xarray as xr
        self._warn_cut("draws_xr()")
        names = self.names if vars is None else _names_list(vars, self._draws,
                                                            elements=False)
        dims = self._quantity_dims()
        out = {}
        for k in names:
            v = self._draws[k]
            if inc_warmup and self.num_warmup_draws:
                v = np.concatenate([self._warmup_draws[k], v], axis=1)
            out[k] = (["chain", "draw"] + dims[k], v)
        chains = np.arange(1, len(self._rows if self._rows is not None else
                                  range(self.num_chains)) + 1)
        n = self.num_draws + (self.num_warmup_draws if inc_warmup else 0)
        return xr.Dataset(out, coords={"chain": chains, "draw": np.arange(n)})

    def _quantity_dims(self):
        """``{quantity: [dimension names]}``, as :meth:`to_arviz` names them."""
        if self.model is not None:
            names = _DimNames(self.model, self._data_arrays())
            return {k: names.of(k, v.shape[2:]) for k, v in self._draws.items()}
        out = {}
        idata = self._idata
        where = {gq: obs for obs, gq in (getattr(self, "_predictive", None) or {}).items()}
        for k, v in self._draws.items():
            var, found = where.get(k, k), None
            for g in ("posterior", "prior", "posterior_predictive", "prior_predictive"):
                if idata is not None and g in idata.groups() and var in idata[g]:
                    found = list(idata[g][var].dims[2:])
                    break
            out[k] = found if found is not None else \
                [f"{k}_dim_{i}" for i in range(v.ndim - 2)]
        return out

    def _row_blocks(self, inc_warmup):
        """Per chain: ``(chain index, iterations, stats, quantities)`` of the rows
        :meth:`draws_pd` writes (warmup first when asked and kept)."""
        blocks = []
        n, nw = self.num_draws, self.num_warmup_draws if inc_warmup else 0
        for c in range(self.num_chains):
            stats = {k: v[c] for k, v in self._stats.items()}
            q = {k: v[c] for k, v in self._draws.items()}
            if nw:
                stats = {k: np.concatenate([self._warmup_stats[k][c], v]) if k in
                         self._warmup_stats else np.concatenate([np.full(nw, np.nan), v])
                         for k, v in stats.items()}
                q = {k: np.concatenate([self._warmup_draws[k][c], v]) for k, v in q.items()}
            chain = self._rows[c] if self._rows is not None else c
            blocks.append((chain, np.arange(1, nw + n + 1), stats, q))
        return blocks

    @property
    def names(self):
        return list(self._draws)

    @property
    def step_size(self):
        """Adapted step size per chain."""
        return np.array([s.stepsize for s in self.chain_states])

    @property
    def inv_metric(self):
        """Adapted inverse metric per chain (variances for diag_e, a matrix for dense_e)."""
        return np.array([s.inv_metric for s in self.chain_states])

    @property
    def sampler_stats(self):
        """Stan-named per-draw statistics, each ``(chains, draws)``."""
        return dict(self._stats)

    # ---- ArviZ ------------------------------------------------------------------------
    def to_arviz(self, coords: Mapping[str, Sequence[Any]] | None = None,
                 dims: Mapping[str, Sequence[str]] | None = None) -> arviz.InferenceData:
        """``arviz.InferenceData`` that ArviZ's functions take as it is:

        * ``posterior`` (parameters, transformed parameters, generated quantities) and
          ``sample_stats`` (ArviZ's names); ``prior`` and ``sample_stats_prior`` for a
          fit of :meth:`~stanlite.Model.sample_prior_predictive`;
        * ``posterior_predictive`` (``prior_predictive``): the replicated data the
          model declares, ``predictive = {"y": "y_rep"}`` (observed field: generated
          quantity), or by the naming rule ``<observed>_rep``; each under the name of
          its observed field, so that ``az.plot_ppc(idata)`` pairs them (and out of
          ``posterior``; ``fit["y_rep"]`` still gives it);
        * ``log_likelihood``: the model's pointwise ``log_likelihood(self, ...)`` (one
          observed field: named after it), for ``az.loo`` / ``az.compare``;
        * ``observed_data`` (the fields ``observed = ("y",)`` names) and
          ``constant_data`` (the other data fields);
        * ``warmup_posterior``/``warmup_sample_stats`` with ``save_warmup=True``.

        Dimensions are named after the declared sizes: a ``vector("J")`` has dimension
        ``J``, and an axis of an undeclared quantity (transformed parameter, generated
        quantity, log-likelihood) whose length is that of exactly one named size gets
        its name too (several sizes of one length: ``<name>_dim_<i>``, as numeric
        sizes). An int data field that names a dimension is that dimension's length:
        in a data group holding the dimension it is left out of the variables and kept
        in the group's ``attrs``. ``coords``: ``{dim: labels}`` (e.g. ``{"J":
        school_names}``; the default is 0, 1, ...); ``dims``: ``{variable: [dim names]}``
        to override the naming. A loaded fit returns what was saved (with ``coords``
        applied). Chains of unequal length are cut to the shortest, as ``fit[name]``
        (with a warning)."""
        if self._idata is not None:
            return _with_coords(self._idata, coords) if coords else self._idata
        az = _arviz()
        self._warn_cut("to_arviz()")      # the same cut as fit[name]
        prior = self.kind == "prior"
        model = self.model
        data = self._data_arrays()
        observed = _observed_names(model, data)
        quantities = dict(self._draws)
        predictive = self._predictive_map()
        names = _DimNames(model, data)
        all_dims = {k: names.of(k, data[k].shape) for k in data}
        for k, v in quantities.items():
            all_dims[k] = names.of(k, v.shape[2:])
        pp = {obs: quantities.pop(gq) for obs, gq in predictive.items()}
        loglik = {}
        ll_fun = getattr(model, "log_likelihood", None)
        if callable(ll_fun) and not prior:
            loglik = self._pointwise(ll_fun, default_name=observed[0] if len(observed) == 1
                                     else "log_lik")
        # dims of one group's variables: a Dataset has one variable per name
        group_dims = {}
        for k, v in loglik.items():
            group_dims[("ll", k)] = all_dims[k] if k in data and \
                data[k].shape == v.shape[2:] else names.of(k, v.shape[2:])
        user = _checked_dims(dims, {**{k: v.shape for k, v in data.items()},
                                    **{k: v.shape[2:] for k, v in self._draws.items()},
                                    **{k: v.shape[2:] for k, v in loglik.items()}})
        all_dims.update({k: v for k, v in user.items() if k in all_dims})
        sizes = {}
        for k, d in all_dims.items():
            shape = data[k].shape if k in data else self._draws[k].shape[2:]
            sizes.update(zip(d, shape))
        coords_all = {d: np.arange(n) for d, n in sizes.items()}
        posterior_dims = {k: all_dims[k] for k in quantities}
        post_key, stats_key, pp_key = (("prior", "sample_stats_prior", "prior_predictive")
                                       if prior else ("posterior", "sample_stats",
                                                      "posterior_predictive"))
        kw = {post_key: quantities, stats_key: self._arviz_stats(self._stats)}
        if pp:
            kw[pp_key] = pp
        groups_dims = {post_key: posterior_dims,
                       pp_key: {obs: user.get(obs, all_dims[obs]) for obs in pp}}
        if loglik:
            kw["log_likelihood"] = loglik
            groups_dims["log_likelihood"] = {k: user.get(k, group_dims[("ll", k)])
                                             for k in loglik}
        if self.num_warmup_draws and not prior:
            kw.update(warmup_posterior=dict(self._warmup_draws),
                      warmup_sample_stats=self._arviz_stats(self._warmup_stats),
                      save_warmup=True)
        import warnings
        with warnings.catch_warnings():
            # a short (or interrupted) run may have fewer draws than chains: not an error
            warnings.filterwarnings("ignore", "More chains", UserWarning)
            idata = _from_dict(az, kw, groups_dims, posterior_dims, coords_all)
        # the data groups built here: ArviZ's from_dict would turn scalars into (1,)
        groups = {}
        for group, fields in (("observed_data", observed),
                              ("constant_data", [k for k in data if k not in observed])):
            if fields:
                groups[group] = _dataset({k: data[k] for k in fields}, all_dims,
                                         coords_all)
        if groups:
            idata.add_groups(groups)
        return _with_coords(idata, coords) if coords else idata

    def _data_arrays(self):
        return {k: np.asarray(v) for k, v in getattr(self.model, "data", {}).items()}

    def _predictive_map(self):
        """``{observed field: generated quantity}`` of the replicated data
        (:func:`predictive_names`; a fit loaded without its model: what its file
        recorded)."""
        if self.model is None:
            return dict(getattr(self, "_predictive", None) or {})
        data = self._data_arrays()
        return predictive_names(self.model, _observed_names(self.model, data),
                                self._draws, data)

    def _arviz_stats(self, raw):
        names = self.arviz_stats
        stats = {names[k]: v for k, v in raw.items() if k in names}
        if "diverging" in stats:
            stats["diverging"] = stats["diverging"].astype(bool)
        if "tree_depth" in stats:
            stats["reached_max_treedepth"] = stats["tree_depth"] >= self.max_treedepth
        return stats

    def _pointwise(self, fun, default_name="log_lik"):
        """``(chains, draws, ...)`` arrays of the model's pointwise log-likelihood.

        ``fun`` receives the quantities its signature names (parameters, transformed
        parameters, generated quantities); a ``**params`` signature receives the
        parameters and transformed parameters."""
        from .errors import ModelError
        ps = list(inspect.signature(fun).parameters.values())
        named = [p.name for p in ps if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        # a name= parameter (Stan name 'lambda') is asked for by its Python name
        aliases = {k: v for k, v in (getattr(self.model, "_aliases", None) or {}).items()
                   if k not in self._draws and v in self._draws}
        missing = [p.name for p in ps if p.name in named and p.name not in self._draws
                   and p.name not in aliases and p.default is p.empty]
        if missing:
            raise ModelError(f"log_likelihood asks for {', '.join(missing)}, which "
                             "is not a parameter, transformed parameter or generated "
                             f"quantity of the model (known: {', '.join(self._draws)})")
        names = [k for k in named if k in self._draws or k in aliases]
        if any(p.kind == p.VAR_KEYWORD for p in ps):
            shapes = self.model.param_shapes() if self.model is not None else {}
            tp = self.model.output_shapes()[0] if self.model is not None else {}
            names += [k for k in list(shapes) + list(tp) if k not in names]
        out = {}
        for c in range(self.num_chains):
            for d in range(self.num_draws):
                vals = {k: self._draws[aliases.get(k, k)][c, d] for k in names}
                try:
                    ll = fun(**vals)
                except Exception as e:                # noqa: BLE001 - re-raised, named
                    raise ModelError(f"log_likelihood failed at chain {c + 1}, draw "
                                     f"{d + 1}: {type(e).__name__}: {e}") from e
                items = ll.items() if isinstance(ll, dict) else [(default_name, ll)]
                for k, v in items:
                    v = np.asarray(v, dtype=float)
                    if k not in out:
                        out[k] = np.empty((self.num_chains, self.num_draws) + v.shape)
                    out[k][c, d] = v
        return out

    # ---- saving -------------------------------------------------------------------------
    def save(self, path: str | os.PathLike, coords: Mapping[str, Sequence[Any]] | None = None
             ) -> None:
        """Write the fit to a netCDF file: ArviZ's groups (``arviz.from_netcdf``
        reads them; ``coords`` labels their dimensions, as in :meth:`to_arviz`) plus
        the ``stanlite_state`` group needed to resume; read it back with
        ``sl.load_fit(path)``. Returns the path.

        The file is written whole to a temporary file in the same folder and renamed
        over ``path`` (:func:`write_netcdf`): an existing file is never damaged, and
        a full disk or any other failure is a :class:`~stanlite.FitFileError` naming
        the path. The state records a fingerprint of the model's data and checksums
        of every group, which :func:`load_fit` checks. The ArviZ groups of an uneven
        fit are cut to the shortest chain, as ``to_arviz()``; the state keeps every
        chain whole (so saving does not warn about the cut)."""
        with self._no_cut_warning():
            idata = self.to_arviz(coords=coords)
        groups = {g: idata[g] for g in idata.groups()}
        groups[STATE_GROUP] = state_group(self, groups, path)
        return _fitio.write_netcdf(path, groups, attrs=getattr(idata, "attrs", None))

    # ---- summaries ----------------------------------------------------------------------
    def summary(self, names: Sequence[str] | None = None) -> pandas.DataFrame:
        """A DataFrame, one row per scalar element (Stan-style names): mean, sd, 5%,
        50%, 95%, mcse_mean, ess_bulk, ess_tail, r_hat. Over ``fit[name]``'s draws:
        chains of unequal length are cut to the shortest (with a warning)."""
        import pandas as pd
        az = _arviz()
        from .model import element_names
        rows, index = [], []
        self._warn_cut("summary()")       # the same cut as fit[name]
        # no draws yet (interrupted in warmup): no rows; diagnose() says why
        for k in (names or self.names) if self.num_draws else ():
            v = self._get(k)
            shp = v.shape[2:]
            flat = v.reshape(v.shape[0], v.shape[1], -1)
            for j, en in enumerate(element_names(k, shp)):
                x = flat[:, :, j]
                q5, q50, q95 = np.quantile(x, [0.05, 0.5, 0.95])
                rows.append((x.mean(), x.std(ddof=1) if x.size > 1 else np.nan, q5, q50,
                             q95, *_diagnostics(az, x)))
                index.append(en)
        return pd.DataFrame(rows, index=index, columns=["mean", "sd", "5%", "50%", "95%",
                                                        "mcse_mean", "ess_bulk",
                                                        "ess_tail", "r_hat"])

    def diagnose(self) -> str:
        """Stan's checks in words: divergences, tree-depth saturation, E-BFMI per
        chain, R-hat, effective sample size; then what the sampler says of its own
        adaptation (``sampler="rhmc"``: a trajectory floor warmup ended before
        reaching)."""
        msgs = []
        st = self._stats
        n_total = self.num_chains * self.num_draws
        if n_total == 0:
            return self._no_draws_message()
        self._warn_cut("diagnose()")
        if "divergent__" in st:
            nd = int(st["divergent__"].sum())
            if nd:
                msgs.append(self._divergences_message(nd, n_total))
            else:
                msgs.append("No divergent transitions found.")
        if "treedepth__" in st:
            nt = int((st["treedepth__"] >= self.max_treedepth).sum())
            if nt:
                msgs.append(f"{nt} of {n_total} transitions hit the maximum tree depth "
                            f"({self.max_treedepth}): an efficiency problem, not a bias; "
                            "increase max_treedepth or reparameterise.")
            else:
                msgs.append("Tree depth below the maximum in every transition.")
        if "energy__" in st and self.num_draws > 2:
            low = []
            for c in range(self.num_chains):
                e = st["energy__"][c]
                bfmi = np.sum(np.diff(e) ** 2) / max(np.sum((e - e.mean()) ** 2), 1e-300)
                if bfmi < 0.3:
                    low.append(f"chain {self._rows[c] if self._rows else c}: {bfmi:.2f}")
            if low:
                msgs.append("E-BFMI below 0.3 (" + "; ".join(low) + "): the momentum "
                            "resampling explores the energy levels poorly; reparameterise.")
            else:
                msgs.append("E-BFMI satisfactory for all chains.")
        if self.num_draws >= 4:
            with self._no_cut_warning():  # diagnose() warned once already
                s = self.summary()
            bad_r = s.index[s["r_hat"] > 1.01].tolist()
            if self.num_chains < 2:
                # R-hat compares chains: one chain cannot show that it has not mixed
                msgs.append("R-hat not computed: it needs two chains or more (this fit "
                            "has one); run chains=4 to check convergence.")
            elif bad_r:
                msgs.append(f"R-hat above 1.01 for {', '.join(bad_r[:8])}"
                            + (" ..." if len(bad_r) > 8 else "") + ": the chains have "
                            "not mixed; run longer or check the model.")
            else:
                msgs.append("R-hat below 1.01 for all parameters.")
            thresh = 100 * self.num_chains
            low_ess = s.index[(s["ess_bulk"] < thresh) | (s["ess_tail"] < thresh)].tolist()
            if low_ess:
                msgs.append(f"Effective sample size below {thresh} (100 per chain) for "
                            f"{', '.join(low_ess[:8])}" + (" ..." if len(low_ess) > 8 else "")
                            + ": estimates of their quantiles are unreliable; run longer.")
            else:
                msgs.append("Effective sample sizes satisfactory.")
        msgs.extend(self._kernel_messages())
        rejected = self._rejections_message()
        if rejected:
            msgs.append(rejected)
        if self.interrupted:
            msgs.append("The run was interrupted: these are the draws completed so far.")
        return "\n".join(msgs)

    def _kernel_messages(self):
        """What the sampler's kernel noted of its own warmup adaptation, per chain
        with draws (``ChainState.kernel_adapt["note"]``: RHMC's trajectory floor,
        :meth:`stanlite.samplers.rhmc.SoftAbsMetric.floor_note`)."""
        out = []
        for i in self._rows or ():
            note = (getattr(self.chain_states[i], "kernel_adapt", None) or {}).get("note")
            if note:
                out.append(f"Chain {i}: {note}")
        return out

    def _divergences_message(self, nd, n_total):
        """The divergences in words. A rejected proposal (the density failed: a
        DomainError or a non-finite value) ends its transition as a divergence, as in
        Stan; those come from the model's domain, not the step size, so adapt_delta
        is advised only for the others."""
        head = f"{nd} of {n_total} transitions ({100 * nd / n_total:.2g}%) ended with a " \
            "divergence."
        step = ("The posterior has regions the sampler cannot explore reliably: "
                "increase adapt_delta (e.g. 0.95) or reparameterise (e.g. non-centred).")
        domain = ("their cause is the model's domain (the rejection reasons below), not "
                  "the step size: a larger adapt_delta will not remove them; constrain "
                  "the parameters (or guard the density) so that it is defined wherever "
                  "the constraints allow")
        at_rejection = self._divergent_rejections()
        if at_rejection is None:        # a fit saved before this was recorded
            if not sum(int(getattr(s, "n_rejected", None) or 0)
                       for s in self.chain_states or ()):
                return f"{head} {step}"
            return (f"{head} Rejected proposals (below) count as divergences too; "
                    f"where the divergences are those, {domain}. For the others: {step}")
        if not at_rejection:
            return f"{head} {step}"
        if at_rejection == nd:
            return f"{head} All {nd} ended at a rejected proposal: {domain}."
        return (f"{head} {at_rejection} of them ended at a rejected proposal: {domain}. "
                f"For the other {nd - at_rejection}: {step}")

    def _divergent_rejections(self):
        """How many of ``fit[name]``'s transitions ended at a rejected proposal, or
        ``None`` when the chain states do not record it."""
        states = [self.chain_states[i] for i in self._rows or ()]
        if not states or not all(getattr(s, "rejected_draws", None) is not None
                                  for s in states):
            return None
        return sum(int(j) < self.num_draws for s in states for j in s.rejected_draws)

    def _no_draws_message(self):
        """diagnose() of a fit without draws: where the chains stopped, what next."""
        states = self.chain_states or ()
        if self._rows is None or not states:
            return "No draws to diagnose."
        done = [f"{s.iteration}/{s.num_warmup}" for s in states]
        return ("There are no draws yet: the run was stopped before any chain had "
                f"finished warmup (warmup iterations done per chain: {', '.join(done)}). "
                "Continue it with model.sample(resume_from=fit) (after fit.save(path): "
                "sl.load_fit(path, model=model)) to finish warmup and draw.")

    def _rejections_message(self):
        """How many proposals (integrator steps, warmup included) were rejected because
        the log density failed there, and why (the chains' ``rejections`` counts)."""
        states = [s for s in getattr(self, "chain_states", None) or ()
                  if getattr(s, "n_rejected", None) is not None]
        if not states:
            return None
        total = sum(int(s.n_rejected) for s in states)
        if not total:
            return "No proposals were rejected (the log density was finite everywhere " \
                "the sampler went)."
        counts = {}
        for s in states:
            for why, n in (getattr(s, "rejections", None) or {}).items():
                counts[why] = counts.get(why, 0) + int(n)
        missing = total - sum(counts.values())
        if missing > 0:
            counts["(reason not recorded)"] = counts.get("(reason not recorded)", 0) + missing
        top = sorted(counts.items(), key=lambda kv: -kv[1])
        parts = "; ".join(f"{n} x {why}" for why, n in top[:5])
        more = f"; and {len(top) - 5} other reasons" if len(top) > 5 else ""
        return (f"{total} proposal(s) were rejected (warmup included) because the log "
                f"density failed there: {parts}{more}. A few during warmup are normal "
                "(large early steps); many mean the sampler keeps hitting a region where "
                "the density is undefined: check the constraints of the parameters.")

    def __repr__(self):
        return (f"<Fit {self.method}: {self.num_chains} chains x {self.num_draws} draws, "
                f"{len(self.names)} quantities>")


def load_fit(path: str | os.PathLike, model: Any = None, data_changed_ok: bool = False
             ) -> Fit:
    """Read a fit written by ``fit.save(path)``.

    The result has ``fit[name]``, ``summary()``, ``diagnose()``, ``to_arviz()``,
    ``step_size`` and ``inv_metric`` without the model; with ``model`` nothing changes
    but two checks, and either way ``model.sample(resume_from=loaded, draws=...)``
    continues the chains exactly where they stopped. The checks: ``model`` has the
    same unconstrained parameters (a ModelError otherwise), and its data are the data
    the fit was made with (the file's fingerprint: each field's sha256; a
    :class:`~stanlite.DataError` naming the fields that differ, unless
    ``data_changed_ok=True`` - continuing a run on other data mixes two posteriors;
    its message points at ``model.generate_quantities(sl.load_fit(path))``, which
    computes a new model's quantities from the saved draws). With other data and
    ``data_changed_ok=True``, the transformed parameters and generated quantities are
    recomputed with ``model``'s data from the saved draws and seeds (the warning says
    so): the saved ones belong to the other data and are never kept silently.
    Files of format version 1 (no fingerprint) are compared with the data they
    store in ``constant_data``/``observed_data``.

    A file that is empty, truncated, corrupted (checksums of every group and of the
    state are checked), hand-edited or of a newer format is a
    :class:`~stanlite.FitFileError` naming the path and what is wrong; a missing
    file a ``FileNotFoundError``."""
    return read_fit(path, Fit, model, data_changed_ok)
