"""``sl.Model``: Stan's program blocks as a Python class, and the log-density protocol.

A subclass declares its data and parameters (:mod:`stanlite.declarations`) and
defines ``log_prob`` (the model block) and optionally ``transformed_data`` (run once
at build: new read-only values), ``transformed_parameters`` and
``generated_quantities``::

    >>> import stanlite as sl
    >>> class Normal(sl.Model):
    ...     N = sl.data.int(lower=0)
    ...     y = sl.data.vector("N")
    ...     mu = sl.param.real()
    ...     sigma = sl.param.real(lower=0)
    ...     def log_prob(self, mu, sigma):
    ...         return sl.normal_lpdf(self.y, mu, sigma) + sl.normal_lpdf(mu, 0, 10)
    >>> m = Normal(N=3, y=[0.1, -0.4, 1.2])
    >>> m.dim, m.param_names()
    (2, ['mu', 'sigma'])
    >>> x = m.unconstrain({"mu": 0.5, "sigma": 1.0})        # sigma -> log(sigma)
    >>> lp, g = m.log_density_gradient(x)
    >>> round(lp, 6), g.shape
    (-6.709589, (2,))

What samplers see is the *log-density protocol* on the unconstrained space
R^dim - ``dim``, ``log_density(x, jacobian=True)``, ``log_density_gradient(x)``,
``log_density_hessian(x)``, ``unconstrain(dict)``, ``constrain(x)`` - never the
model's internals; any object with these methods can be sampled.

Unconstrained layout: the parameters' free coordinates concatenated in declaration
order. ``log_prob`` receives constrained values (plus the transformed parameters it
names in its signature); the framework adds the log-Jacobian of every transform
(``jacobian=False`` leaves it out: a penalised likelihood for MAP, as Stan's
optimizer does by default). Element names follow Stan (``theta[1]``, ``L[2,1]``,
1-based); flattening is row-major (C order), as numpy's.
"""

from __future__ import annotations

import difflib
import inspect
import types
from collections.abc import Mapping
from typing import Any

import numpy as np

from .autodiff.functional import hessian
from .autodiff.recording import value_and_grad_pieces
from .autodiff.var import Box, Var, shape_of, value_of
from .config import switched_off
from .declarations import (DataDecl, ParamDecl, TransformedDataDecl, argument_names,
                           validate_transformed)
from .errors import DataError, ModelError
from .layout import ParamLayout, _plain, element_names
from .stan_json import read_data, stan_json_value

__all__ = ["Model", "element_names"]


def _is_skeleton(cls):
    """Whether ``cls`` has nothing of its own but dunders (``__module__``, ``__doc__``,
    ...): how cloudpickle's reconstruction creates a class before filling it."""
    return all(k.startswith("__") and k.endswith("__") for k in vars(cls))


def _no_log_prob(cls):
    return ModelError(f"model class '{cls.__name__}' must define "
                      "log_prob(self, <parameters>) (the model block)")


_SHAPE_POINTS = 21                     # points output_shapes tries (the origin first)


_new = object.__new__

#: name -> function(model, ...): the inference methods, registered by stanlite/inference.py
_FRONT_DOORS = {}


def install_front_doors(doors):
    """Register the functions behind ``model.sample(...)`` and the other inference
    methods (``{name: function(model, ...)}``). The inference layer
    (stanlite/inference.py) calls this once, when ``import stanlite`` imports it: the
    model stays below the fits and the samplers it does not import."""
    unknown = sorted(set(doors) - {k for k, v in vars(Model).items()
                                   if isinstance(v, _FrontDoor)})
    if unknown:
        raise ValueError(f"Model declares no front door {', '.join(unknown)}")
    _FRONT_DOORS.update(doors)


class _FrontDoor:
    """A method of :class:`Model` defined by the inference layer: ``model.sample``
    is ``stanlite.inference.sample`` bound to ``model`` (its signature and docstring),
    ``Model.sample`` the function itself."""

    def __init__(self, name):
        self.name = name

    def __get__(self, model, cls=None):
        try:
            fun = _FRONT_DOORS[self.name]
        except KeyError:
            raise AttributeError(f"Model.{self.name} is defined by stanlite.inference, "
                                 "which is not imported") from None
        return fun if model is None else types.MethodType(fun, model)

    def __repr__(self):
        return f"<Model.{self.name}: stanlite.inference.{self.name}>"


class Model:
    """Base class of user models (see the module docstring for an example).

    Construct with the data as keyword arguments or one dict (``Model(**data)``,
    ``Model(data)``; every field must be declared) or with :meth:`from_json` (which
    ignores undeclared fields, as CmdStan does). Class attributes made with ``sl.data.*`` become validated
    instance attributes (``self.y``); ``sl.param.*`` declare the parameters.
    """

    _data_decls = {}
    _param_decls = {}
    #: True on the copy whose log density is the prior (stanlite/workflow.py)
    _prior_only = False
    #: retape the log-density gradient (sl.compile, autodiff/compile.py): recorded
    #: once, replayed as generated code; ``False`` (on the class or an instance) keeps
    #: the eager tape, as does the environment variable ``STANLITE_COMPILE=0`` for the
    #: whole process. Models whose graph depends on values fall back by themselves.
    #: A replay uses the data as recorded: build a new model for new data.
    compile = not switched_off("STANLITE_COMPILE")      # (stanlite/config.py)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        skeleton = _is_skeleton(cls)        # before the attributes set below
        data, tdata, params = {}, {}, {}
        for klass in reversed(cls.__mro__):
            for name, v in vars(klass).items():
                if isinstance(v, TransformedDataDecl):
                    tdata[name] = v
                elif isinstance(v, DataDecl):
                    data[name] = v
                elif isinstance(v, ParamDecl):
                    params[name] = v
        # keyed by Stan name (``name=``, else the attribute's): what data, outputs and
        # init dicts use; ``decl.attr`` is the Python name
        cls._data_decls, cls._tdata_decls, cls._param_decls = _by_stan_name(
            cls, data, tdata, params)
        # cloudpickle (Dask, a class defined in __main__ or a notebook) rebuilds a class
        # as an empty skeleton and fills its attributes afterwards: only dunders at
        # creation time. Such a class is checked when it is instantiated instead.
        if cls.log_prob is Model.log_prob and not skeleton:
            raise _no_log_prob(cls)

    # ---- construction -----------------------------------------------------------------
    def __init__(self, *args, **data):
        if type(self).log_prob is Model.log_prob:
            raise _no_log_prob(type(self))      # an empty class body (see __init_subclass__)
        data = _positional_data(type(self), args, data)
        data = _stan_keys(type(self), data)
        _check_unknown_fields(type(self), data)
        # env: data by Stan name (model.data); scope: what sizes and bounds may name
        # (also the Python names of renamed fields, and the transformed data)
        env, scope = {}, {}
        for name, decl in self._data_decls.items():
            if name not in data:
                shape = decl.shape(scope)
                raise DataError(f"missing data field '{name}' (expected "
                                f"{decl.describe(shape)})")
            env[name] = scope[name] = scope[decl.attr] = decl.validate(data[name], scope)
        self._data = env
        for name, decl in self._data_decls.items():
            setattr(self, decl.attr, env[name])
        scope.update(self._run_transformed_data(scope))
        self._scope = scope
        layout = self._layout = ParamLayout(self._param_decls, scope)
        self.dim = layout.dim
        self._param_set = layout.names
        # Python argument name -> Stan name, for parameters named with name=
        self._aliases = layout.aliases
        self._lp_args = self._signature(self.log_prob)
        # None as an argument list means "takes **kwargs": give it everything
        self._has_tp = self._has("transformed_parameters")
        self._has_gq = self._has("generated_quantities")
        self._tp_args = self._signature(self.transformed_parameters) if self._has_tp else ()
        self._gq_args = (self._signature(self.generated_quantities, skip=1)
                         if self._has_gq else ())
        self._shapes = None
        # data and transformed data are fixed once built (see __setattr__)
        self._frozen = frozenset(d.attr for d in self._data_decls.values()) | \
            frozenset(self._tdata)

    def __setattr__(self, name, value):
        frozen = self.__dict__.get("_frozen")
        if frozen is not None and name in frozen:
            what = "transformed data" if name in self._tdata else "a data field"
            raise ModelError(f"{type(self).__name__}.{name} is {what}, fixed when the "
                             f"model is built (a fit, a compiled gradient and the saved "
                             f"data all use it): build a new model with other data "
                             f"instead of assigning to it")
        object.__setattr__(self, name, value)

    def _run_transformed_data(self, scope):
        """Stan's transformed data: ``transformed_data()`` run once, its values
        validated (:func:`~stanlite.declarations.validate_transformed`: numbers only,
        finite unless declared otherwise, read-only arrays; a declared output its
        declared type) and set as attributes. Returns ``{name: value}``."""
        cls = type(self)
        decls = {d.attr: d for d in cls._tdata_decls.values()}
        out = self.transformed_data() if self._has("transformed_data") else {}
        if out is None:
            out = {}
        if not isinstance(out, Mapping):
            raise ModelError(f"{cls.__name__}.transformed_data must return a dict of name "
                             f"-> value, got {type(out).__name__}")
        missing = [n for n in decls if n not in out]
        if missing:
            raise ModelError(f"{cls.__name__}.transformed_data declares "
                             f"{', '.join(map(repr, missing))} (sl.transformed_data) but "
                             f"does not return {'it' if len(missing) == 1 else 'them'}")
        taken = {**{d.attr: "a data field" for d in cls._data_decls.values()},
                 **{d.attr: "a parameter" for d in cls._param_decls.values()}}
        values = {}
        env = dict(scope)
        for name, v in out.items():
            if not isinstance(name, str) or not name.isidentifier() or name[0] == "_":
                raise ModelError(f"{cls.__name__}.transformed_data: names must be Python "
                                 f"identifiers (they become attributes) not starting with "
                                 f"'_' (the model's own), got {name!r}")
            if name in taken or name == "dim" or name not in decls and hasattr(cls, name):
                clash = taken.get(name, f"an attribute of {cls.__name__}")
                raise ModelError(f"{cls.__name__}.transformed_data returns '{name}', which "
                                 f"is already {clash}")
            values[name] = env[name] = validate_transformed(name, v, decls.get(name), env)
        self._tdata = values
        for name, v in values.items():
            setattr(self, name, v)
        return values

    @classmethod
    def from_json(cls, source, **overrides):
        """Build the model from a JSON file path, a JSON string or a dict.

        Stan's JSON conventions: ``"NaN"``, ``"Inf"``, ``"-Inf"`` strings are floats;
        fields the model does not declare are ignored, as CmdStan ignores them (but a
        missing field with a near namesake among them is reported as a likely typo);
        ``overrides`` replace fields and, like keyword data, must be declared."""
        d = read_data(source)
        _check_json_typos(cls, d, overrides)
        try:
            d = {k: stan_json_value(v) for k, v in d.items() if k in cls._data_decls}
        except RecursionError:
            raise DataError("the JSON data nest too deeply to be data") from None
        d.update(overrides)
        return cls(**d)

    def _has(self, meth):
        return getattr(type(self), meth) is not getattr(Model, meth)

    def _signature(self, fun, skip=0):
        ps = list(inspect.signature(fun).parameters.values())[skip:]
        if any(p.kind == p.VAR_KEYWORD for p in ps):
            return None                              # takes everything
        return [p.name for p in ps if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]

    # ---- blocks users may define -------------------------------------------------------
    def transformed_data(self):
        """Optional: Stan's transformed data block. Run once when the model is built,
        after the data are validated (``self.<field>``); return a dict of new named
        values, available as ``self.<name>`` in every other block. The values must
        be numbers (ints, reals, arrays of them), finite unless declared with
        ``allow_nonfinite=True``; arrays become read-only. An output may be declared
        as a class attribute with the data types (``x_std = sl.transformed_data
        .vector("N")``) to have its type, shape and bounds checked. Other objects (a
        solver's options, an event schedule) stay ordinary attributes set in
        ``__init__`` after ``super().__init__(...)``."""
        return {}

    def transformed_parameters(self, **params):
        """Optional: return a dict of derived quantities (Stan's transformed parameters)."""
        return {}

    def log_prob(self, **params):
        """The model block: return the log density of the constrained parameters."""
        raise NotImplementedError

    def generated_quantities(self, rng, **params):
        """Optional: return a dict of quantities computed per draw on plain floats."""
        return {}

    # ---- the parameters ----------------------------------------------------------------
    @property
    def data(self):
        """The validated data (a dict)."""
        return dict(self._data)

    def param_shapes(self):
        """``{name: shape}`` of the (constrained) parameters, in declaration order."""
        return self._layout.shapes()

    @property
    def _slots(self):
        """The parameters' places in the unconstrained vector (stanlite/layout.py)."""
        return self._layout.slots

    @property
    def _dynamic(self):
        """Whether some parameter's bounds depend on another parameter (then a partial
        ``init`` can only be checked once the rest is drawn: samplers/inits.py)."""
        return self._layout.dynamic

    def _constrain(self, x, jacobian):
        layout = self._layout
        return layout.constrain_pieces(layout.pieces(x), jacobian)

    def _constrain_pieces(self, pieces, jacobian):
        """The constrained parameters (dict) and the summed log-Jacobian, from each
        parameter's part of the unconstrained point (:meth:`ParamLayout.pieces`)."""
        return self._layout.constrain_pieces(pieces, jacobian)

    def _pick(self, names, avail, what):
        if names is None:
            return avail
        try:
            return {n: avail[n] for n in names}
        except KeyError:
            pass
        out = {}
        aliases = self.__dict__.get("_aliases") or {}
        for n in names:
            if n in aliases and n not in avail:     # a name= parameter, by its Python name
                out[n] = avail[aliases[n]]
                continue
            if n not in avail:
                raise ModelError(f"{what} asks for '{n}', which is not a parameter"
                                 + (" or transformed parameter" if what == "log_prob" else "")
                                 + f" of {type(self).__name__} (known: {sorted(avail)})")
            out[n] = avail[n]
        return out

    def _transformed(self, params):
        if not self._has_tp:
            return {}
        tp = _block_dict("transformed_parameters", self.transformed_parameters(
            **self._pick(self._tp_args, params, "transformed_parameters")))
        if self._param_set.isdisjoint(tp):
            return tp
        clash = set(tp) & set(params)
        if clash:
            raise ModelError(f"transformed_parameters returns {sorted(clash)}, which "
                             "already name parameters")
        return tp

    def _log_density(self, x, jacobian=True):
        return self._log_density_pieces(self._layout.pieces(x), jacobian)

    def _log_density_pieces(self, pieces, jacobian):
        params, lj = self._constrain_pieces(pieces, jacobian)
        avail = params
        tp = self._transformed(params)
        if tp:
            avail = {**params, **tp}
        if self._prior_only:                # sample_prior_predictive: stanlite/workflow.py
            lp = log_prior(self, avail)
        else:
            lp = self.log_prob(**self._pick(self._lp_args, avail, "log_prob"))
        t = type(lp)
        if not (t is Var and type(lp.value) is float or t is float):
            self._check_log_prob(lp)            # (the common cases above need no check)
        if not jacobian or type(lj) is float and lj == 0.0:
            return lp
        return lp + lj

    def _check_log_prob(self, lp):
        """A ModelError unless ``lp`` (what ``log_prob`` returned) is a real scalar: a
        float or int, a numpy real scalar or 0-d array, a 0-d traced value. Anything
        else is a programming error in the model, raised at once - never a rejected
        proposal (samplers reject only DomainError and non-finite densities)."""
        if isinstance(lp, Box):
            if shape_of(lp) == ():
                return
        elif isinstance(lp, (bool, np.bool_)):
            pass
        elif isinstance(lp, (int, float, np.integer, np.floating)):
            return
        elif isinstance(lp, np.ndarray) and lp.ndim == 0 and lp.dtype.kind in "iuf":
            return
        raise ModelError(f"{type(self).__name__}.log_prob must return the log density as "
                         f"a real scalar (e.g. sl.normal_lpdf(...) + ...), but it returned "
                         f"{_describe_value(lp)}")

    # ---- the log-density protocol ------------------------------------------------------
    def _point(self, x):
        x = np.asarray(x, dtype=np.float64)
        if x.shape != (self.dim,):
            raise ModelError(f"{type(self).__name__}: an unconstrained point has shape "
                             f"({self.dim},), got {x.shape}")
        return x

    def log_density(self, x: np.ndarray, jacobian: bool = True) -> float:
        """log p(x) on the unconstrained space (plus log|J| of the transforms); retaped
        as the gradient is (the forward pass alone) unless ``compile`` is False."""
        x = self._point(x)
        if not self.compile:
            return float(value_of(self._log_density(x, jacobian)))
        return self._retaped_for(("density", jacobian))(x)

    def log_density_gradient(self, x: np.ndarray, jacobian: bool = True
                             ) -> tuple[float, np.ndarray]:
        """``(log p(x), d log p / dx)`` by reverse-mode AD.

        Retaped by default (class attribute ``compile``): the tape recorded at the
        first call is replayed as generated code, re-recorded where the model's graph
        changes; results equal the eager tape's within 1e-12 relative (see
        :func:`stanlite.compile`)."""
        x = self._point(x)
        if not self.compile:
            return self._gradient(x, jacobian)
        return self._retaped_for(jacobian)(x)

    def compiled_gradient(self, jacobian=True):
        """The retaped gradient object (stanlite/model_retape.py) for samplers that run its
        interpreter program inside their own compiled loop (``kernel_program()``,
        ``kernel_replays(n, x)``), or None when the model is not retaped."""
        if not self.compile:
            return None
        return self._retaped_for(jacobian)

    def precompile(self, jacobian: bool = True) -> Model:
        """Record and compile the log-density gradient now, not at its first use;
        returns the model (``m = MyModel(**data).precompile()``).

        What the first gradient call would do (record the tape, lower it to the
        compiled interpreter or to generated Python, or take a program from the
        disk cache, ``stanlite/autodiff/program_cache.py``), and the check of its
        first replay at a new point against the eager tape, at fixed points drawn
        uniformly from (-2, 2) on the unconstrained space (points where the density
        is not defined are skipped). The draws of a later run do not depend on it:
        every answer comes from the same program, wherever it was recorded.
        ``model.sample`` does this itself before its worker processes start, which
        then inherit the program (forked) or receive it with the pickled model.
        Nothing happens when ``compile`` is False."""
        if self.compile:
            rng = np.random.default_rng(20)
            self._retaped_for(jacobian).prepare(
                rng.uniform(-2.0, 2.0, self.dim) for _ in range(10))
        return self

    def _retaped_for(self, key):
        """The retaped gradient (key: ``jacobian``) or density (``("density",
        jacobian)``) of this model, made at first use (stanlite/model_retape.py)."""
        retaped = self.__dict__.get("_retaped")
        if retaped is None:
            retaped = self.__dict__["_retaped"] = {}
        r = retaped.get(key)
        if r is None:
            from .model_retape import ModelDensity, ModelGradient
            r = retaped[key] = (ModelDensity(self, key[1]) if type(key) is tuple
                                else ModelGradient(self, key))
            # the prior (log_prob - sum(log_likelihood), workflow.py) may cancel beyond
            # the replay checks' rounding: then it runs eagerly, without a warning
            r.quiet = r.quiet or self._prior_only
        return r

    def _gradient(self, x, jacobian):
        """The eager tape's ``(value, gradient)`` at a checked point, one tape variable
        per parameter (its piece of ``x``, already shaped: the layout's ``inputs``),
        as the retaped gradient records it (stanlite/model_retape.py)."""
        return value_and_grad_pieces(
            lambda pieces: self._log_density_pieces(pieces, jacobian), x,
            self._layout.inputs)

    def __getstate__(self):
        # the interpreter programs travel as arrays (spawned workers, Dask tasks replay
        # without recording: stanlite/model_retape.py portable_programs); generated Python
        # and Hessians are recorded again where the model is used
        state = self.__dict__.copy()
        retaped = state.pop("_retaped", None)
        if retaped:
            from .model_retape import portable_programs
            shipped = portable_programs(retaped)
            if shipped:
                state["_retaped_portable"] = shipped
        return state

    def __setstate__(self, state):
        shipped = state.pop("_retaped_portable", None)
        self.__dict__.update(state)
        if shipped:
            from .model_retape import adopt_programs
            adopt_programs(self, shipped)

    def __copy__(self):
        # a copy records its own programs: it may get another density (workflow.py's
        # prior) or other attributes
        new = _new(type(self))
        new.__dict__.update(self.__dict__)
        new.__dict__.pop("_retaped", None)
        return new

    def log_density_hessian(self, x: np.ndarray, jacobian: bool = True
                            ) -> tuple[float, np.ndarray, np.ndarray]:
        """``(log p(x), gradient, Hessian)``; the Hessian by nested (forward-over-
        reverse) AD, exact up to rounding."""
        x = self._point(x)
        lp, g = self.log_density_gradient(x, jacobian)
        if self.compile:
            H = self._retaped_hessian(x, jacobian)
        else:
            H = hessian(lambda z: self._log_density(z, jacobian))(x)
        return lp, g, np.asarray(H, dtype=np.float64).reshape(self.dim, self.dim)

    def _retaped_hessian(self, x, jacobian):
        """The Hessian retaped (:class:`~stanlite.autodiff.compile.CompiledHessian`:
        the forward-over-reverse computation recorded once, replayed as numpy). Where
        it cannot be (a nested value read in a density, say) the eager Hessian is
        used without a warning: the result is the same, only slower."""
        retaped = self.__dict__.setdefault("_retaped", {})
        key = ("hessian", jacobian)
        r = retaped.get(key)
        if r is None:
            from .autodiff.compile import CompiledHessian
            r = retaped[key] = CompiledHessian(
                lambda z: self._log_density(z, jacobian), x,
                what=f"{type(self).__name__}.log_density_hessian", quiet=True)
        return r(x)

    def constrain(self, x: np.ndarray) -> dict[str, Any]:
        """The parameters (constrained, plain floats) at unconstrained point ``x``."""
        params, _ = self._constrain(self._point(x), False)
        return {k: _plain(v) for k, v in params.items()}

    def unconstrain(self, values: Mapping[str, Any], fill: Any = None) -> np.ndarray:
        """The unconstrained point of a dict of constrained parameter values, each
        checked against its constraint (a :class:`~stanlite.DataError` naming it).

        Every parameter must be given, unless ``fill`` (an unconstrained point of
        length ``dim``) is: a parameter missing from ``values`` then takes its
        coordinates from ``fill`` - how a partial init is completed with random
        values (``samplers/inits.py``), as Stan completes one."""
        return self._unconstrain(values, fill)

    def _unconstrain(self, values, fill=None, label="parameter {name!r}", error=DataError,
                     strict=False):
        """:meth:`unconstrain`, its errors of class ``error`` starting with ``label``
        (formatted with the parameter's ``name`` and declaration ``decl``); ``strict``
        also rejects booleans and infinite values (see :meth:`ParamLayout.unconstrain`)."""
        return self._layout.unconstrain(values, fill, label, error, strict)

    def param_names(self, include_tp: bool = False, include_gq: bool = False) -> list[str]:
        """Element names of the parameters (then transformed parameters and generated
        quantities if asked), Stan-style and 1-based: ``['mu', 'theta[1]', ...]``."""
        names = self._layout.param_names()
        if include_tp or include_gq:
            tp, gq = self.output_shapes()
            for part, inc in ((tp, include_tp), (gq, include_gq)):
                if inc:
                    for n, shape in part.items():
                        names += element_names(n, shape)
        return names

    def unconstrained_param_names(self):
        """Names of the unconstrained coordinates (``theta[1]`` ... per free entry)."""
        return self._layout.unconstrained_param_names()

    # ---- output: transformed parameters and generated quantities on plain floats ------
    def transformed_values(self, x):
        """``{name: value}`` of the transformed parameters at ``x`` (plain floats)."""
        params, _ = self._constrain(self._point(x), False)
        return {k: _plain(v) for k, v in self._transformed(params).items()}

    def generated_values(self, x, rng=None):
        """``{name: value}`` of the generated quantities at ``x``; ``rng`` is a numpy
        Generator (or seed) handed to ``generated_quantities``."""
        if not self._has_gq:
            return {}
        params, _ = self._constrain(self._point(x), False)
        return self._generated({**params, **self._transformed(params)}, rng)

    def _generated(self, avail, rng):
        """:meth:`generated_values` from the parameters and transformed parameters
        (``avail``, as the blocks take them)."""
        if not self._has_gq:
            return {}
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        gq = _block_dict("generated_quantities", self.generated_quantities(
            gen, **self._pick(self._gq_args, avail, "generated_quantities")))
        return {k: _plain_quantity(v) for k, v in gq.items()}

    def output(self, x, rng=None, include_tp=True, include_gq=True):
        """Everything a draw reports: parameters, transformed parameters, generated
        quantities, as ``{name: float or ndarray}``."""
        x = self._point(x)
        params, _ = self._constrain(x, False)
        out = {k: _plain(v) for k, v in params.items()}
        if include_tp and self._has_tp:
            out.update({k: _plain(v) for k, v in self._transformed(params).items()})
        if include_gq:
            out.update(self.generated_values(x, rng))
        return out

    # ---- a fit's draws (stanlite/fit.py output_arrays): the same numbers as output() ---
    def _draw_output(self, x):
        """``(output(x, include_gq=False), gq)`` with ``gq(rng)`` giving
        ``generated_values(x, rng)`` from the same constrained and transformed
        parameters: computed once per draw instead of once for each; None when a
        subclass replaces ``output`` or ``generated_values`` (call them instead)."""
        if not _own_outputs(type(self)):
            return None
        params, _ = self._constrain(self._point(x), False)
        out = {k: _plain(v) for k, v in params.items()}     # (before tp: as output())
        tp = self._transformed(params)
        if tp:
            out.update({k: _plain(v) for k, v in tp.items()})
        avail = {**params, **tp} if tp else params
        return out, lambda rng: self._generated(avail, rng)

    def _constrain_draws(self, X):
        """The parameters at every row of ``X`` (draws x dim), ``{name: (draws,
        *shape)}``: what :meth:`output` gives draw by draw, bit for bit - each
        parameter's own constrain step on the same values, all draws in one call
        where the step is elementwise (``elementwise`` on it, transforms.py), for a
        scalar its plain-float formula on each draw, as output() calls it (the
        transform's ``scalars``: one call for all of them, where it has one).
        None when output() reports more than the parameters (transformed
        parameters, generated quantities: computed per draw), a bound depends on
        other parameters, or a transform is not elementwise (simplex, Cholesky
        factors, ...)."""
        if self._has_tp or self._has_gq or not _own_outputs(type(self)):
            return None
        return self._layout.constrain_draws(X)

    def output_shapes(self):
        """``({tp name: shape}, {gq name: shape})``, found by one evaluation at the
        origin of the unconstrained space (shapes may depend on data only) or, where
        a block fails there (a quantity undefined at zero), at the first of up to
        20 further points uniform in (-2, 2) - Stan's initial box, from a fixed seed
        - where both succeed. A ModelError naming the first failure if none does.
        (A fit does not depend on this: it takes its shapes from its draws.)"""
        if self._shapes is None:
            rng = np.random.default_rng(20240611)
            first = None
            for i in range(_SHAPE_POINTS):
                x = np.zeros(self.dim) if i == 0 else rng.uniform(-2.0, 2.0, self.dim)
                try:
                    tp = {k: np.shape(v) for k, v in self.transformed_values(x).items()}
                    gq = {k: np.shape(v) for k, v in self.generated_values(x, 0).items()}
                except Exception as e:               # noqa: BLE001 - reported below
                    first = first or e
                    continue
                self._shapes = (tp, gq)
                break
            else:
                raise ModelError(f"{type(self).__name__}: transformed_parameters or "
                                 "generated_quantities failed at the origin of the "
                                 f"unconstrained space and at {_SHAPE_POINTS - 1} random "
                                 f"points; the first failure: {type(first).__name__}: "
                                 f"{first}") from first
        return self._shapes

    # ---- inference: the front doors, defined by the layer above ------------------------
    # model.sample(...), model.optimize(...), ...: functions of stanlite/inference.py
    # (which names them in its FRONT_DOORS), bound to the model; model.py imports
    # neither the samplers nor the fits (docs/architecture.md).
    sample = _FrontDoor("sample")
    generate_quantities = _FrontDoor("generate_quantities")
    sample_prior_predictive = _FrontDoor("sample_prior_predictive")
    variational = _FrontDoor("variational")
    optimize = _FrontDoor("optimize")
    laplace = _FrontDoor("laplace")
    pathfinder = _FrontDoor("pathfinder")

    def __repr__(self):
        return f"<{type(self).__name__} dim={self.dim} ({self._layout.describe()})>"


# ---- the prior's log density (a model's log_prior, or log_prob minus its likelihood):
# the density of model.sample_prior_predictive's copy (stanlite/workflow.py) ----------
def log_prior(model, avail):
    """The prior log density of the constrained parameters and transformed
    parameters ``avail`` (traced or plain): ``model.log_prior`` if the model defines
    it, else ``log_prob - sum(log_likelihood)``."""
    if _has_own_prior(model):
        fun = model.log_prior
        return fun(**model._pick(model._signature(fun), avail, "log_prior"))
    lp = model.log_prob(**model._pick(model._lp_args, avail, "log_prob"))
    return lp - likelihood_sum(model, avail)


def _no_likelihood(model):
    return ModelError(
        f"{type(model).__name__} declares no likelihood, so its prior is unknown: define "
        "log_likelihood(self, <parameters>) returning the pointwise log-likelihood terms "
        "of log_prob (the prior is then log_prob minus their sum), or log_prior(self, "
        "<parameters>) returning the prior log density")


def likelihood_sum(model, avail):
    """``sum(log_likelihood(...))`` at ``avail`` (a dict result: every entry summed)."""
    from .math import sum as sl_sum
    fun = getattr(model, "log_likelihood", None)
    if not callable(fun):
        raise _no_likelihood(model)
    names = model._signature(fun)
    if names is not None:
        aliases = model.__dict__.get("_aliases") or {}    # name=: the Python name
        missing = [n for n in names if n not in avail and aliases.get(n) not in avail]
        if missing:
            raise ModelError(
                f"{type(model).__name__}.log_likelihood asks for {', '.join(missing)}, "
                "which is not a parameter or transformed parameter: the prior (log_prob "
                "minus the log-likelihood) is differentiated where generated quantities "
                "do not exist. Compute the log-likelihood from parameters and transformed "
                "parameters, or define log_prior(self, ...)")
    ll = fun(**model._pick(names, avail, "log_likelihood"))
    parts = list(ll.values()) if isinstance(ll, dict) else [ll]
    total = 0.0
    for p in parts:
        total = total + sl_sum(p)
    return total


def _has_own_prior(model):
    own = getattr(type(model), "log_prior", None)
    return own is not None and own is not getattr(Model, "log_prior", None)


def _describe_value(v):
    """What a value is, for an error message: its type, and its shape or a short repr."""
    if v is None:
        return "None"
    name = type(v).__name__
    if isinstance(v, Box) or isinstance(v, np.ndarray):
        shape = shape_of(v)
        hint = " (sl.sum(...) adds up elementwise terms)" if shape else ""
        if isinstance(v, np.ndarray):
            name = "numpy array" + ("" if v.dtype.kind in "iuf" else f" of dtype {v.dtype}")
        return f"a {name} of shape {shape}{hint}"
    if isinstance(v, (list, tuple, dict, set)):
        return f"a {name} of length {len(v)}"
    r = repr(v)
    return f"a {name} ({r if len(r) <= 40 else r[:37] + '...'})"


def _own_outputs(cls):
    """Whether ``cls`` reports its draws with Model's own ``output`` and
    ``generated_values`` (the shortcuts of a fit's draws rely on them)."""
    return cls.output is Model.output and cls.generated_values is Model.generated_values \
        and cls._constrain is Model._constrain and cls.constrain is Model.constrain


def _block_dict(block, out):
    """What the model's block ``block`` (transformed_parameters, generated_quantities)
    returned, as its dict of name -> value: None is an empty one, anything else but a
    dict a ModelError."""
    if out is None:
        return {}
    if not isinstance(out, dict):
        raise ModelError(f"{block} must return a dict of name -> value, got "
                         f"{type(out).__name__}")
    return out


def _plain_quantity(v):
    """A generated quantity on plain numbers: :func:`_plain`, but an integer stays an
    integer (``rng.poisson``, counts: fit.py keeps their integer dtype)."""
    if isinstance(v, (int, np.integer, np.bool_)):
        return int(v)
    return _plain(v)


# ---- data: field names --------------------------------------------------------------
def _positional_data(cls, args, data):
    """``Model(data_dict)`` (cmdstanpy's habit) reads the dict as keyword data (keywords
    given too replace its fields); any other positional argument is a DataError."""
    if not args:
        return data
    if len(args) == 1 and isinstance(args[0], Mapping):
        bad = [k for k in args[0] if not isinstance(k, str)]
        if bad:
            raise DataError(f"{cls.__name__}: data field names must be strings, got "
                            f"{bad[0]!r}")
        return {**args[0], **data}
    raise DataError(f"{cls.__name__} takes its data as keyword arguments "
                    f"({cls.__name__}(**data)), one dict, or {cls.__name__}.from_json(...); "
                    f"got {len(args)} positional argument(s) "
                    f"({', '.join(type(a).__name__ for a in args)})")


def _by_stan_name(cls, *groups):
    """Each ``{attribute: declaration}`` group keyed by the declarations' Stan names
    (``name=``); two variables with one Stan name are a ModelError."""
    seen, out = {}, []
    for group in groups:
        keyed = {}
        for attr, decl in group.items():
            name = decl.name if decl.attr == attr else attr
            if name in seen:
                raise ModelError(f"{cls.__name__}: '{attr}' and '{seen[name]}' are both "
                                 f"named '{name}'")
            seen[name] = attr
            keyed[name] = decl
        out.append(keyed)
    return out


def _stan_keys(cls, data):
    """Keyword data with a renamed field (``name="lambda"``) given by its Python name
    (``lambda_=``) re-keyed to the Stan name; both at once is a DataError."""
    renamed = {d.attr: n for n, d in cls._data_decls.items() if d.attr != n}
    if not renamed or not any(k in renamed for k in data):
        return data
    out = {}
    for k, v in data.items():
        n = renamed.get(k, k)
        if n in out or n != k and n in data:
            raise DataError(f"data field '{n}' is given twice: as '{n}' and as '{k}' "
                            "(its Python name)")
        out[n] = v
    return out


def _check_unknown_fields(cls, data):
    """Keyword data the model does not declare are an error (a typo such as ``sigmma=``
    would otherwise be dropped silently, or a parameter given as data be ignored)."""
    declared = cls._data_decls
    unknown = [k for k in data if k not in declared]
    if not unknown:
        return
    name = unknown[0]
    model = cls.__name__
    if name in cls._param_decls or name in {d.attr for d in cls._param_decls.values()}:
        raise DataError(f"'{name}' is a parameter of {model}, not a data field: data "
                        "cannot fix it (give a starting value with init=, or declare "
                        "it with sl.data to make it data)")
    close = _close_name(name, declared)
    hint = f" (did you mean '{close}'?)" if close else ""
    others = f"; unknown too: {', '.join(map(repr, unknown[1:]))}" if unknown[1:] else ""
    raise DataError(f"unknown data field '{name}'{hint}: {model} declares "
                    f"{', '.join(declared) or 'no data'}{others} (Model.from_json "
                    "ignores undeclared fields of Stan JSON data, as CmdStan does)")


def _check_json_typos(cls, d, overrides):
    """A declared field missing from JSON data that has a near namesake there is
    reported as a typo (the namesake would otherwise be ignored without a word)."""
    extras = [k for k in d if k not in cls._data_decls]
    for name in cls._data_decls:
        if name in d or name in overrides:
            continue
        close = _close_name(name, extras)
        if close:
            raise DataError(f"missing data field '{name}'; the data have '{close}', "
                            f"which {cls.__name__} does not declare: a typo?")


def _close_name(name, candidates):
    """The candidate nearest ``name`` (difflib, ignoring case: ``n`` finds ``N``), or
    None if none is close."""
    by_lower = {c.lower(): c for c in candidates}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1)
    return by_lower[close[0]] if close else None
