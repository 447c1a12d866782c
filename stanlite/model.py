"""``sl.Model``: Stan's program blocks as a Python class, and the log-density protocol.

A subclass declares its data and parameters (:mod:`stanlite.declarations`) and
defines ``log_prob`` (the model block) and optionally ``transformed_parameters`` and
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

import inspect
import json
import os

import numpy as np

from .autodiff.extend import reshape
from .autodiff.functional import hessian
from .autodiff.tape import gc_paused_nested, sweep
from .autodiff.var import Box, Var, shape_of, value_of
from .declarations import DataDecl, ParamDecl
from .errors import DataError, DifferentiationError, ModelError

__all__ = ["Model", "element_names"]


def element_names(name, shape):
    """Stan-style element names in row-major order: ``theta[1]``, ``L[2,1]``."""
    if not shape:
        return [name]
    idx = np.indices(shape).reshape(len(shape), -1).T + 1
    return [f"{name}[{','.join(map(str, i))}]" for i in idx]


class _ParamSlot:
    """One parameter: its place in the unconstrained vector and how to constrain it.

    ``bounds`` holds the evaluated bounds when they are fixed (numbers, data, absent),
    ``None`` when some bound depends on earlier parameters (evaluated per point);
    ``shaped`` is the transform's shortcut for fixed numeric bounds (it takes the free
    values already shaped like the parameter), ``None`` where there is none.
    """

    __slots__ = ("name", "decl", "transform", "shape", "start", "stop", "bounds",
                 "shaped", "kind", "free_shape")

    def __init__(self, name, decl, shape, start):
        self.name = name
        self.decl = decl
        self.transform = decl.transform()
        self.shape = shape
        self.start = start
        self.stop = start + self.transform.free_size(shape)
        self.bounds = None
        self.shaped = None
        self.kind = _FREE
        self.free_shape = None

    def plan(self, data, param_names):
        """Fix what does not change between evaluations (bounds given as numbers or
        data names) and choose how the free values are cut from the vector."""
        fixed = True
        for k in self.transform.bound_names:
            b = getattr(self.decl, k)
            if isinstance(b, str):
                fixed = fixed and b in data and b not in param_names
            elif callable(b):
                fixed = False
        if fixed:
            self.bounds = self.decl.bound_args(data)
            fast = self.transform.shaped_constrain(self.shape, *self.bounds)
            if fast is not None:
                self.shaped, self.free_shape = fast
                if self.free_shape == ():
                    self.kind = _SCALAR
                elif len(self.free_shape) > 1:
                    self.kind = _SHAPED
                # else _FREE: the free vector is already in the shape it takes

    def piece(self, x):
        """This parameter's part of the unconstrained point ``x`` (plain or traced),
        in the form its constrain step takes."""
        kind = self.kind
        if kind == _SCALAR:
            if type(x) is np.ndarray:
                return float(x[self.start])
            return x[self.start]
        p = x[self.start:self.stop]
        if kind == _SHAPED:
            fs = self.free_shape
            return p.reshape(fs) if type(p) is np.ndarray else reshape(p, fs)
        return p


_FREE, _SCALAR, _SHAPED = 0, 1, 2      # how a parameter's free values are cut from x
_new = object.__new__


class Model:
    """Base class of user models (see the module docstring for an example).

    Construct with the data as keyword arguments (extra fields are ignored) or with
    :meth:`from_json`. Class attributes made with ``sl.data.*`` become validated
    instance attributes (``self.y``); ``sl.param.*`` declare the parameters.
    """

    _data_decls = {}
    _param_decls = {}
    #: retape the log-density gradient (sl.compile, autodiff/compile.py): recorded
    #: once, replayed as generated code; ``False`` (on the class or an instance) keeps
    #: the eager tape, as does the environment variable ``STANLITE_COMPILE=0`` for the
    #: whole process. Models whose graph depends on values fall back by themselves.
    #: A replay uses the data as recorded: build a new model for new data.
    compile = os.environ.get("STANLITE_COMPILE", "1").strip().lower() not in (
        "0", "false", "no", "off")

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        data, params = {}, {}
        for klass in reversed(cls.__mro__):
            for name, v in vars(klass).items():
                if isinstance(v, DataDecl):
                    data[name] = v
                elif isinstance(v, ParamDecl):
                    params[name] = v
        cls._data_decls = data
        cls._param_decls = params
        if "log_prob" not in dir(cls) or cls.log_prob is Model.log_prob:
            raise ModelError(f"model class '{cls.__name__}' must define "
                             "log_prob(self, <parameters>) (the model block)")

    # ---- construction -----------------------------------------------------------------
    def __init__(self, **data):
        env = {}
        for name, decl in self._data_decls.items():
            if name not in data:
                shape = decl.shape(env)
                raise DataError(f"missing data field '{name}' (expected "
                                f"{decl.describe(shape)})")
            env[name] = decl.validate(data[name], env)
        self._data = env
        for name, v in env.items():
            setattr(self, name, v)
        slots = []
        k = 0
        for name, decl in self._param_decls.items():
            try:
                shape = decl.shape(env)
            except DataError as e:
                raise DataError(f"parameter '{name}': {e}") from None
            s = _ParamSlot(name, decl, shape, k)
            k = s.stop
            slots.append(s)
        self._slots = slots
        self.dim = k
        names = frozenset(s.name for s in slots)
        for s in slots:
            s.plan(env, names)
        self._param_set = names
        # the env of data and earlier parameters is built per point only if some bound
        # is a function of earlier parameters
        self._dynamic = any(s.bounds is None for s in slots)
        self._lp_args = self._signature(self.log_prob)
        # None as an argument list means "takes **kwargs": give it everything
        self._has_tp = self._has("transformed_parameters")
        self._has_gq = self._has("generated_quantities")
        self._tp_args = self._signature(self.transformed_parameters) if self._has_tp else ()
        self._gq_args = (self._signature(self.generated_quantities, skip=1)
                         if self._has_gq else ())
        self._shapes = None

    @classmethod
    def from_json(cls, source, **overrides):
        """Build the model from a JSON file path, a JSON string or a dict.

        Stan's JSON conventions: ``"NaN"``, ``"Inf"``, ``"-Inf"`` strings are floats;
        extra fields are ignored; ``overrides`` replace fields."""
        if isinstance(source, dict):
            d = dict(source)
        else:
            src = os.fspath(source) if isinstance(source, os.PathLike) else source
            if isinstance(src, str) and src.lstrip().startswith("{"):
                d = json.loads(src)
            else:
                try:
                    with open(src) as f:
                        d = json.load(f)
                except FileNotFoundError:
                    raise DataError(f"data file {src!r} does not exist") from None
                except json.JSONDecodeError as e:
                    raise DataError(f"data file {src!r} is not valid JSON: {e}") from None
        d = {k: _stan_json_value(v) for k, v in d.items()}
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
        return {s.name: s.shape for s in self._slots}

    def _constrain(self, x, jacobian):
        return self._constrain_pieces([s.piece(x) for s in self._slots], jacobian)

    def _constrain_pieces(self, pieces, jacobian):
        """The constrained parameters (dict) and the summed log-Jacobian, from each
        parameter's part of the unconstrained point (:meth:`_ParamSlot.piece`)."""
        env = dict(self._data) if self._dynamic else None
        params = {}
        lj = 0.0
        for s, xi in zip(self._slots, pieces):
            if s.shaped is not None:
                y, j = s.shaped(xi)
            else:
                bounds = s.bounds if s.bounds is not None else s.decl.bound_args(env)
                y, j = s.transform.constrain(xi, s.shape, *bounds)
            # zeros (unbounded parameters) are not added: lj + 0.0 is lj
            if jacobian and not (type(j) is float and j == 0.0):
                lj = j if type(lj) is float and lj == 0.0 else lj + j
            if env is not None:
                env[s.name] = y
            params[s.name] = y
        return params, lj

    def _pick(self, names, avail, what):
        if names is None:
            return avail
        try:
            return {n: avail[n] for n in names}
        except KeyError:
            pass
        out = {}
        for n in names:
            if n not in avail:
                raise ModelError(f"{what} asks for '{n}', which is not a parameter"
                                 + (" or transformed parameter" if what == "log_prob" else "")
                                 + f" of {type(self).__name__} (known: {sorted(avail)})")
            out[n] = avail[n]
        return out

    def _transformed(self, params):
        if not self._has_tp:
            return {}
        tp = self.transformed_parameters(**self._pick(self._tp_args, params,
                                                      "transformed_parameters"))
        if tp is None:
            return {}
        if not isinstance(tp, dict):
            raise ModelError("transformed_parameters must return a dict of name -> value, "
                             f"got {type(tp).__name__}")
        if self._param_set.isdisjoint(tp):
            return tp
        clash = set(tp) & set(params)
        if clash:
            raise ModelError(f"transformed_parameters returns {sorted(clash)}, which "
                             "already name parameters")
        return tp

    def _log_density(self, x, jacobian=True):
        return self._log_density_pieces([s.piece(x) for s in self._slots], jacobian)

    def _log_density_pieces(self, pieces, jacobian):
        params, lj = self._constrain_pieces(pieces, jacobian)
        avail = params
        tp = self._transformed(params)
        if tp:
            avail = {**params, **tp}
        lp = self.log_prob(**self._pick(self._lp_args, avail, "log_prob"))
        if lp is None:
            raise ModelError(f"{type(self).__name__}.log_prob returned None; it must return "
                             "the log density (e.g. sl.normal_lpdf(...) + ...)")
        if not isinstance(lp, Box) and np.ndim(lp) != 0:
            raise ModelError(f"{type(self).__name__}.log_prob must return a scalar, got "
                             f"shape {np.shape(lp)}")
        if not jacobian or type(lj) is float and lj == 0.0:
            return lp
        return lp + lj

    # ---- the log-density protocol ------------------------------------------------------
    def _point(self, x):
        x = np.asarray(x, dtype=np.float64)
        if x.shape != (self.dim,):
            raise ModelError(f"{type(self).__name__}: an unconstrained point has shape "
                             f"({self.dim},), got {x.shape}")
        return x

    def log_density(self, x, jacobian=True):
        """log p(x) on the unconstrained space (plus log|J| of the transforms); retaped
        as the gradient is (the forward pass alone) unless ``compile`` is False."""
        x = self._point(x)
        if not self.compile:
            return float(value_of(self._log_density(x, jacobian)))
        return self._retaped_for(("density", jacobian))(x)

    def log_density_gradient(self, x, jacobian=True):
        """``(log p(x), d log p / dx)`` by reverse-mode AD.

        Retaped by default (class attribute ``compile``): the tape recorded at the
        first call is replayed as generated code, re-recorded where the model's graph
        changes; results equal the eager tape's within 1e-12 relative (see
        :func:`stanlite.compile`)."""
        x = self._point(x)
        if not self.compile:
            return self._gradient(x, jacobian)
        return self._retaped_for(jacobian)(x)

    def _retaped_for(self, key):
        """The retaped gradient (key: ``jacobian``) or density (``("density",
        jacobian)``) of this model, made at first use (autodiff/compile.py)."""
        retaped = self.__dict__.get("_retaped")
        if retaped is None:
            retaped = self.__dict__["_retaped"] = {}
        r = retaped.get(key)
        if r is None:
            from .autodiff.compile import ModelDensity, ModelGradient
            r = retaped[key] = (ModelDensity(self, key[1]) if type(key) is tuple
                                else ModelGradient(self, key))
        return r

    def _gradient(self, x, jacobian, record=False):
        """The eager tape's gradient at a checked point; ``record=True``: the recording
        (tape, leaves, guards, result) that autodiff/compile.py generates code from."""
        # sl.value_and_grad, with one independent variable per parameter (its part of
        # x, already shaped) instead of one for x and a slicing node per parameter
        slots = self._slots
        with gc_paused_nested() as tape:
            leaves = []
            for s in slots:
                v = _new(Var)
                v.value = s.piece(x)
                v.adj = None
                v.tape = tape
                v.bp = None
                v.x = None
                v.y = None
                leaves.append(v)
            if record:
                from .autodiff.compile import recording
                with recording(tape) as rec:
                    lp = self._log_density_pieces(leaves, jacobian)
                nodes = tape.nodes
            else:
                lp = self._log_density_pieces(leaves, jacobian)
            g = np.zeros(self.dim)
            if isinstance(lp, Box) and lp.tape is tape:
                if type(lp.value) is not float and lp.shape != ():
                    raise DifferentiationError(
                        f"grad requires a scalar output, got shape {lp.shape}; "
                        "use sl.jacobian for vector outputs")
                lp.adj = 1.0
                sweep(tape.nodes)
                val = lp.value
                for s, v in zip(slots, leaves):
                    a = v.adj
                    if a is not None:
                        if s.kind == _SCALAR:
                            g[s.start] = a
                        else:
                            g[s.start:s.stop] = a if type(a) is float else np.ravel(a)
            else:
                if shape_of(lp) != ():
                    raise DifferentiationError(
                        f"grad requires a scalar output, got shape {shape_of(lp)}")
                val = lp
        if type(val) is not float and not isinstance(val, Box):
            val = float(val)
        if record:
            from .autodiff.compile import Recording
            return Recording(tape, nodes, leaves, lp, rec.guards, rec.escapes,
                             (float(val), g), x.copy())
        return float(val), g

    def _retape_plan(self):
        """Per parameter: (how its leaf's value is cut from ``x`` as source code,
        start, stop, scalar?) - for the generated gradient code (autodiff/compile.py)."""
        plan = []
        for s in self._slots:
            if s.kind == _SCALAR:
                expr = f"x.item({s.start})"
            elif s.kind == _SHAPED:
                expr = f"x[{s.start}:{s.stop}].reshape({tuple(s.free_shape)!r})"
            else:
                expr = f"x[{s.start}:{s.stop}]"
            plan.append((expr, s.start, s.stop, s.kind == _SCALAR))
        return plan

    def __getstate__(self):
        # the generated code is rebuilt where the model is used (workers, copies)
        state = self.__dict__.copy()
        state.pop("_retaped", None)
        return state

    def log_density_hessian(self, x, jacobian=True):
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

    def constrain(self, x):
        """The parameters (constrained, plain floats) at unconstrained point ``x``."""
        params, _ = self._constrain(self._point(x), False)
        return {k: _plain(v) for k, v in params.items()}

    def unconstrain(self, values):
        """The unconstrained point of a dict of constrained parameter values (every
        parameter must be given; each is checked against its constraint)."""
        if not isinstance(values, dict):
            raise DataError(f"unconstrain expects a dict of parameter values, got "
                            f"{type(values).__name__}")
        env = dict(self._data)
        out = np.empty(self.dim)
        for s in self._slots:
            if s.name not in values:
                raise DataError(f"parameter '{s.name}' has no value (expected "
                                f"{s.decl.describe(s.shape)})")
            try:
                v = np.asarray(values[s.name], dtype=np.float64)
            except (TypeError, ValueError):
                raise DataError(f"parameter '{s.name}': expected real values, got "
                                f"{values[s.name]!r}") from None
            if v.shape != s.shape:
                if v.size == 1 and int(np.prod(s.shape, dtype=np.int64)) == 1:
                    v = v.reshape(s.shape)
                else:
                    raise DataError(f"parameter '{s.name}': expected shape {s.shape}, got "
                                    f"{v.shape}")
            bounds = [_plain(b) for b in s.decl.bound_args(env)]
            msg = s.transform.check(v if v.ndim else float(v), s.shape, *bounds)
            if msg:
                raise DataError(f"parameter '{s.name}': {msg}")
            out[s.start:s.stop] = s.transform.unconstrain(v if v.ndim else float(v),
                                                           s.shape, *bounds)
            env[s.name] = v if v.ndim else float(v)
        return out

    def param_names(self, include_tp=False, include_gq=False):
        """Element names of the parameters (then transformed parameters and generated
        quantities if asked), Stan-style and 1-based: ``['mu', 'theta[1]', ...]``."""
        names = []
        for s in self._slots:
            names += element_names(s.name, s.shape)
        if include_tp or include_gq:
            tp, gq = self.output_shapes()
            for part, inc in ((tp, include_tp), (gq, include_gq)):
                if inc:
                    for n, shape in part.items():
                        names += element_names(n, shape)
        return names

    def unconstrained_param_names(self):
        """Names of the unconstrained coordinates (``theta[1]`` ... per free entry)."""
        names = []
        for s in self._slots:
            n = s.stop - s.start
            names += [s.name] if (n == 1 and not s.shape) else \
                [f"{s.name}[{i + 1}]" for i in range(n)]
        return names

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
        avail = {**params, **self._transformed(params)}
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        gq = self.generated_quantities(gen, **self._pick(self._gq_args, avail,
                                                         "generated_quantities"))
        if gq is None:
            return {}
        if not isinstance(gq, dict):
            raise ModelError("generated_quantities must return a dict of name -> value, got "
                             f"{type(gq).__name__}")
        return {k: _plain(v) for k, v in gq.items()}

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

    def output_shapes(self):
        """``({tp name: shape}, {gq name: shape})``, found by one evaluation at the
        origin of the unconstrained space (shapes may depend on data only)."""
        if self._shapes is None:
            x = np.zeros(self.dim)
            tp = {k: np.shape(v) for k, v in self.transformed_values(x).items()}
            try:
                gq = {k: np.shape(v) for k, v in self.generated_values(x, 0).items()}
            except Exception as e:                       # noqa: BLE001 - reported below
                raise ModelError(f"generated_quantities failed at the origin of the "
                                 f"unconstrained space: {e}") from e
            self._shapes = (tp, gq)
        return self._shapes

    # ---- inference ---------------------------------------------------------------------
    def sample(self, chains=4, draws=None, warmup=1000, seed=None, metric="diag_e",
               adapt_delta=0.8, max_treedepth=10, init=None, thin=1, save_warmup=False,
               progress=True, parallel=True, executor=None, sampler="nuts",
               resume_from=None, inv_metric=None, stepsize=1.0, sampler_options=None):
        """Sample the posterior with NUTS (default; ``sampler="hmc"``: static HMC),
        with Stan's warmup. Arguments have cmdstanpy's meanings; ``seed`` is split
        into per-chain streams (same draws serial or parallel); ``resume_from=fit``
        continues an interrupted run or extends a finished one (``draws`` larger).
        Returns a :class:`~stanlite.fit.Fit`.

        ``sampler="rhmc"``: Riemannian HMC with the SoftAbs metric (the local Hessian,
        by nested AD) and NUTS trajectories; only the step size adapts (``metric``
        and ``inv_metric`` are ignored). ``sampler_options`` (rhmc only): ``alpha``
        (SoftAbs sharpness, 1.0), ``num_steps`` (None: NUTS; an int: static
        trajectories of that many steps), ``fixed_point_tol`` (1e-8) and
        ``max_fixed_point`` (50) of the implicit leapfrog. See
        :mod:`stanlite.samplers.rhmc`."""
        from .fit import Fit
        from .samplers.runner import sample_chains
        if resume_from is not None:
            # a resumed run keeps its settings; draws (if given) extends it
            st0 = resume_from.chain_states[0]
            max_treedepth = st0.max_treedepth
            sampler = st0.sampler
            draws = st0.num_draws if draws is None else draws
        elif draws is None:
            draws = 1000
        if sampler not in ("nuts", "hmc", "rhmc"):
            raise ValueError(f"sampler must be 'nuts', 'hmc' or 'rhmc', got {sampler!r}")
        if sampler_options is not None and sampler != "rhmc":
            raise ValueError(f"sampler_options are for sampler='rhmc', not {sampler!r}")
        if sampler == "rhmc":
            from .samplers.rhmc import check_options
            check_options(sampler_options)          # a bad option fails here, not in a worker
        states, gq_seeds, interrupted = sample_chains(
            self, chains=chains, draws=draws, warmup=warmup, seed=seed, metric=metric,
            adapt_delta=adapt_delta, max_treedepth=max_treedepth, init=init, thin=thin,
            save_warmup=save_warmup, progress=progress, parallel=parallel,
            executor=executor, sampler=sampler, inv_metric=inv_metric, stepsize=stepsize,
            resume_from=resume_from, sampler_options=sampler_options)
        return Fit(self, states, gq_seeds, interrupted=interrupted, method=sampler,
                   max_treedepth=max_treedepth)

    def variational(self, method="meanfield", seed=None, **kwargs):
        """Stan's ADVI (``method="meanfield"`` or ``"fullrank"``): a Gaussian on the
        unconstrained space fitted by stochastic gradient ascent on the ELBO. Returns
        a fit with the same ``fit[name]``/``summary()``/``to_arviz()`` interface (draws
        from the approximation). See :func:`stanlite.samplers.advi.variational`."""
        from .samplers.advi import variational
        return variational(self, method=method, seed=seed, **kwargs)

    def optimize(self, method="lbfgs", jacobian=False, seed=None, **kwargs):
        """The posterior mode (MAP; ``jacobian=True``: the mode on the unconstrained
        space) or penalised MLE with L-BFGS on the AD gradient. ``opt[name]`` gives the
        estimate. See :func:`stanlite.samplers.optimize.optimize`."""
        from .samplers.optimize import optimize
        return optimize(self, method=method, jacobian=jacobian, seed=seed, **kwargs)

    def laplace(self, mode=None, draws=1000, seed=None, **kwargs):
        """Normal approximation at the mode with the nested-AD Hessian; draws on the
        constrained scale. See :func:`stanlite.samplers.optimize.laplace`."""
        from .samplers.optimize import laplace
        return laplace(self, mode=mode, draws=draws, seed=seed, **kwargs)

    def pathfinder(self, seed=None, **kwargs):
        """Pathfinder variational inference (single- or multi-path with PSIS
        resampling). See :func:`stanlite.samplers.pathfinder.pathfinder`."""
        from .samplers.pathfinder import pathfinder
        return pathfinder(self, seed=seed, **kwargs)

    def __repr__(self):
        ps = ", ".join(f"{s.name}: {s.decl.describe(s.shape)}" for s in self._slots)
        return f"<{type(self).__name__} dim={self.dim} ({ps})>"


def _plain(v):
    v = value_of(v)
    if isinstance(v, np.ndarray):
        return v.copy()
    return float(v) if isinstance(v, (float, int, np.floating, np.integer)) else v


_JSON_FLOATS = {"NaN": np.nan, "nan": np.nan, "Inf": np.inf, "+Inf": np.inf,
                "-Inf": -np.inf, "inf": np.inf, "-inf": -np.inf, "Infinity": np.inf,
                "-Infinity": -np.inf}


def _stan_json_value(v):
    if isinstance(v, str) and v in _JSON_FLOATS:
        return _JSON_FLOATS[v]
    if isinstance(v, list):
        return [_stan_json_value(e) for e in v]
    return v
