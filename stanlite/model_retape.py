"""A model's log density retaped: ``Model.log_density_gradient`` and
``Model.log_density`` through :func:`stanlite.compile`.

The model hands :func:`~stanlite.compile` a function of its parameters' pieces
(``Model._log_density_pieces``) and the parameter layout's ``inputs``
(stanlite/layout.py): one tape variable per parameter, cut from the unconstrained
point as its constrain step takes it. What is the model's own: the name in warnings
(``Normal.log_density_gradient``), the disk cache of lowered programs
(autodiff/program_cache.py, keyed by the model's class and data), and the programs
a model's pickle carries (:func:`portable_programs`, :func:`adopt_programs`).
"""

from .autodiff.compile import Compiled

__all__ = ["ModelGradient", "ModelDensity", "portable_programs", "adopt_programs"]


class ModelGradient(Compiled):
    """``Model.log_density_gradient`` retaped: ``x -> (lp, gradient)`` for one model and
    one ``jacobian`` setting; recorded at the first call (or taken from the disk
    cache)."""

    def __init__(self, model, jacobian, max_recordings=8, verify=True, exact=False):
        def log_density(pieces):
            return model._log_density_pieces(pieces, jacobian)
        super().__init__(log_density, None, max_recordings, verify, exact,
                         inputs=model._layout.inputs)
        self.what = f"{type(model).__name__}.log_density_gradient"
        self.model = model
        self.jacobian = jacobian

    def __call__(self, x):
        # (x is the model's checked point: Model._point)
        return self._fast_call(x, None)

    def _cache_what(self):
        return ("density" if self.value_only else "gradient", bool(self.jacobian))

    _disk_key = False       # the disk cache's key (program_cache.py), once computed

    def _cache_key(self):
        if self._disk_key is False:
            from .autodiff.program_cache import directory, model_key
            if directory() is None or self.backend == "python":
                return None
            self._disk_key = model_key(self.model, self._cache_what())
        return self._disk_key

    def _load_cached(self):
        from .autodiff.program_cache import load
        st = load(self._cache_key())
        return st is not None and self._adopt(st, fresh=True)

    def _store_cached(self):
        from .autodiff.program_cache import store
        key = self._cache_key()
        if key is not None and self._programs.get(None):
            store(key, self.portable())


class ModelDensity(ModelGradient):
    """``Model.log_density`` retaped: the forward pass alone (fused densities asked for
    no partials), recorded on the tape like the gradient and checked against the
    tape's value at the first replay: it equals ``log_density_gradient(x)[0]``."""

    value_only = True

    def __init__(self, model, jacobian, max_recordings=8, verify=True, exact=False):
        super().__init__(model, jacobian, max_recordings, verify, exact)
        self.what = f"{type(model).__name__}.log_density"

    def __call__(self, x):
        return self._fast_call(x, None)[0]


def portable_programs(retaped):
    """A model's retaped gradients and densities (``Model._retaped``) as
    :meth:`~stanlite.autodiff.compile._Retaped.portable` states, by key: what its
    pickle carries (Model.__getstate__) so that a spawned worker or a Dask task
    replays without recording. The Hessians are left out (recorded again where
    used)."""
    out = {}
    for key, r in retaped.items():
        if isinstance(r, ModelGradient):
            st = r.portable()
            if st["programs"] or st["fallback"] is not None:
                out[key] = st
    return out


def adopt_programs(model, shipped):
    """The other side of :func:`portable_programs`: ``model`` (just unpickled) takes
    the states over; one made by another interpreter version is dropped (recorded
    again at first use)."""
    for key, st in shipped.items():
        r = model._retaped_for(key)
        if not r._adopt(st):
            model.__dict__["_retaped"].pop(key, None)
