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
import json
import os

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _fitio
from .errors import FitFileError, ModelError

if TYPE_CHECKING:                       # annotations only (imported lazily at run time)
    import arviz
    import pandas
    import xarray

__all__ = ["Fit", "load_fit"]

#: name of the netCDF group holding the resumable state (ignored by ArviZ)
STATE_GROUP = "stanlite_state"
_FORMAT = "stanlite-fit"
_FORMAT_VERSION = 2     # 2: data fingerprint, checksums of every group

#: Stan's sampler statistics -> ArviZ's sample_stats names
ARVIZ_STATS = {"lp__": "lp", "accept_stat__": "acceptance_rate", "stepsize__": "step_size",
               "treedepth__": "tree_depth", "n_leapfrog__": "n_steps",
               "divergent__": "diverging", "energy__": "energy",
               "energy_error__": "energy_error", "max_energy_error__": "max_energy_error"}


def _arviz():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)   # arviz's refactor notice
        import arviz
    return arviz


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
        import xarray as xr
        with self._no_cut_warning():
            idata = self.to_arviz(coords=coords)
        groups = {g: idata[g] for g in idata.groups()}
        meta = {"format": _FORMAT, "version": _FORMAT_VERSION, "method": self.method,
                "kind": self.kind, "predictive": self._predictive_map(),
                "max_treedepth": self.max_treedepth, "interrupted": bool(self.interrupted),
                "names": self.names,
                # a fit loaded without its model keeps what its file said
                "model": _model_id(self.model) or getattr(self, "_model_id", None),
                "unconstrained_names": _unconstrained_names(self.model)
                or getattr(self, "_unconstrained_names", None),
                "parameters": model_parameters(self.model)
                or getattr(self, "_parameters", None),
                "data_fingerprint": fit_fingerprint(self),
                "checksums": {g: _fitio.dataset_digests(ds) for g, ds in groups.items()},
                "gq_seeds": [_seed_to_json(s) for s in self.gq_seeds],
                "chain_states": [s.to_dict() for s in self.chain_states]}
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
        groups[STATE_GROUP] = ds
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
        chain, R-hat, effective sample size."""
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
        rejected = self._rejections_message()
        if rejected:
            msgs.append(rejected)
        if self.interrupted:
            msgs.append("The run was interrupted: these are the draws completed so far.")
        return "\n".join(msgs)

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
            if not sum(int(getattr(s, "n_rejected", 0)) for s in self.chain_states or ()):
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
        if not states or not all(hasattr(s, "rejected_draws") for s in states):
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
                  if hasattr(s, "n_rejected")]
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
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no fit file {path!r}")
    problem = _fitio.file_kind(path)
    if problem:
        raise FitFileError(path, problem)
    try:
        datasets, meta, version = _read_fit_file(path)
        fit = _fit_from_file(path, datasets, meta, version)
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


def _fit_from_file(path, datasets, meta, version):
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
    fit = Fit.__new__(Fit)
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
