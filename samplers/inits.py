"""Initial points for every inference method, from the ``init`` argument.

``init`` means the same to ``sample``, ``variational``, ``optimize``, ``laplace``,
``pathfinder`` and the CLI's ``--init`` (cmdstanpy's meanings):

* ``None``: uniform(-2, 2) on the unconstrained space (``radius``), as Stan draws it;
* a number ``R >= 0``: uniform(-R, R) (``0``: the origin);
* a dict of constrained parameter values - possibly **partial**: the parameters it
  leaves out are drawn as above, from the run's own generator (a fixed seed gives
  the same point); a retry after a non-finite log density redraws only those;
* an unconstrained vector of length ``dim``, or a result with an ``unconstrained``
  attribute (an optimum);
* for methods with several runs (chains, paths), a list or tuple of the above, one
  per run (:func:`per_run`).

:func:`initial_point` is the one routine that reads ``init``: a chain
(:func:`.chain.initialize`), the optimizers, ADVI and each Pathfinder path call it,
so a partial dict, a radius or a vector starts every method the same way (they
differ only in ``jacobian``, the density whose finiteness is checked, and in
``radius``, ``init_radius`` where a method has one). A chain once read a dict as
complete and refused a partial one (issue 23, section 3.4 of the architecture
review); sharing this routine, it reads it as above, as the optimizer does.

Everything about the given values is checked before anything runs, each error an
:class:`~stanlite.ArgumentError` naming the parameter: an unknown name (with the
closest known one), a wrong shape, a value outside the support ("init for 'sigma'
(real<lower=0>): must be >= 0, but is -1"), a simplex that does not sum to 1, a
covariance matrix that is not positive definite.
"""

import math

import numpy as np

from stanlite.arguments import nonneg_real, suggest
from stanlite.errors import ArgumentError, ModelError

from .hamiltonian import RejectedPoint

__all__ = ["initial_point", "per_run", "check_init", "check_names", "optimum_point",
           "safe_log_density_gradient", "seed_streams"]

#: how an error about one parameter's value starts, after "init" (or "init[2]")
_LABEL = " for {name!r} ({decl})"


def seed_streams(seed, n):
    """``n`` independent ``SeedSequence`` children of ``seed`` (an int, None, a
    ``SeedSequence`` or a ``Generator``, from which one seed is drawn): a method's
    streams (its start and its algorithm, its generated quantities; ADVI's,
    optimize's, laplace's and Pathfinder's, each from its ``seed``)."""
    if isinstance(seed, np.random.Generator):
        seed = int(seed.integers(2 ** 63))
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    return ss.spawn(n)


def per_run(model, init, n, what="chains"):
    """``n`` inits, one per run: ``init`` itself ``n`` times, or the entries of a list
    or tuple of length ``n`` (``what`` names the runs in the error). Each is checked
    (:func:`check_init`) here, before any run starts."""
    if not isinstance(init, (list, tuple)):
        check_init(model, init)                  # once: the same init for every run
        return [init] * n
    if len(init) != n:
        raise ArgumentError(f"init as a list needs one entry per {what[:-1]} ({n}), "
                            f"got {len(init)}")
    for i, v in enumerate(init):
        check_init(model, v, what=f"init[{i}]")
    return list(init)


def _is_radius(init):
    return isinstance(init, (int, float, np.integer, np.floating)) and \
        not isinstance(init, (bool, np.bool_))


def check_init(model, init, what="init"):
    """Check ``init`` without evaluating the model (see the module docstring); a
    dict's given values are checked against their constraints wherever those do not
    depend on parameters it leaves out."""
    if init is None:
        return
    if hasattr(init, "unconstrained"):
        optimum_point(model, init, what)
        return
    if _is_radius(init):
        nonneg_real(f"{what} (a radius)", init)
        return
    if isinstance(init, dict):
        check_names(model, init, what)
        if hasattr(model, "_unconstrain"):
            complete = all(k in init for k in model.param_shapes())
            if complete or not getattr(model, "_dynamic", True):
                model._unconstrain(init, None if complete else np.zeros(model.dim),
                                   what + _LABEL, ArgumentError, strict=True)
        return
    _vector(model, init)


def _vector(model, init):
    dim = model.dim
    if isinstance(init, (str, bytes, bool, np.bool_)):
        a = None
    else:
        try:
            a = np.asarray(init, dtype=np.float64)
        except (TypeError, ValueError):
            a = None
    if a is None or a.shape != (dim,):
        raise ArgumentError(f"init must be None, a radius, a dict of parameter values or "
                            f"an unconstrained vector of length {dim}; got "
                            f"{type(init).__name__}"
                            + (f" of shape {a.shape}" if a is not None else f" {init!r}"))
    if not np.all(np.isfinite(a)):
        raise ArgumentError(f"init as an unconstrained vector must be finite, but element "
                            f"[{int(np.argmax(~np.isfinite(a)))}] is "
                            f"{a[~np.isfinite(a)][0]}")
    return a


def optimum_point(model, result, what="init"):
    """The unconstrained point of a result given as an init or a mode (an
    optimization result), checked to be a finite point of this model."""
    x = np.asarray(result.unconstrained, dtype=np.float64)
    if x.shape != (model.dim,):
        raise ArgumentError(f"{what} is a result with {x.size} unconstrained values, but "
                            f"{type(model).__name__} has {model.dim}: is it another "
                            "model's?")
    if not np.all(np.isfinite(x)):
        raise ArgumentError(f"{what} is a result whose unconstrained point is not finite")
    return x


def check_names(model, init, what="init"):
    """Every key of the dict ``init`` names a parameter (else an ArgumentError naming
    the unknown ones and the closest parameter)."""
    shapes = getattr(model, "param_shapes", None)
    if not callable(shapes):
        return
    known = list(shapes())
    unknown = [k for k in init if k not in known]
    if unknown:
        raise ArgumentError(
            f"{what} gives {', '.join(map(repr, unknown))}, which "
            f"{'is not a parameter' if len(unknown) == 1 else 'are not parameters'}"
            f" of {type(model).__name__} (its parameters: {', '.join(known)})"
            f"{suggest(unknown[0], known)}")


def _point_maker(model, init, radius):
    """``(make(rng), random)``: how each try builds its point, and whether tries
    differ (something is drawn)."""
    dim = model.dim
    if init is None or _is_radius(init):
        r = float(radius if init is None else init)
        if not r:
            return (lambda rng: np.zeros(dim)), False
        return (lambda rng: rng.uniform(-r, r, dim)), True
    if isinstance(init, dict):
        partial = hasattr(model, "_unconstrain") and \
            any(k not in init for k in model.param_shapes())
        if not partial:
            x = (model._unconstrain(init, None, "init" + _LABEL, ArgumentError, strict=True)
                 if hasattr(model, "_unconstrain") else model.unconstrain(init))
            return (lambda rng: x), False
        r = float(radius)

        def make(rng):
            # the whole point is drawn, as Stan draws it, then the given values
            # replace their parts: a seed gives the same point whatever is given
            fill = rng.uniform(-r, r, dim) if r else np.zeros(dim)
            return model._unconstrain(init, fill, "init" + _LABEL, ArgumentError,
                                      strict=True)
        return make, bool(r)
    if hasattr(init, "unconstrained"):
        x = optimum_point(model, init, "init")
        return (lambda rng: x), False
    x = _vector(model, init)
    return (lambda rng: x), False


def safe_log_density_gradient(model, x, jacobian):
    """``(lp, grad, error)``; ``lp = -inf`` where the density fails or is not finite.
    (Here rather than in optimize.py, which uses it too: a chain's initial point then
    does not import the optimizers, ~10-20 ms of a small run's first ``sample``.)"""
    try:
        with np.errstate(all="ignore"):
            lp, g = (model.log_density_gradient(x) if jacobian
                     else model.log_density_gradient(x, jacobian=False))
    except RejectedPoint as e:
        return -math.inf, None, e
    lp = float(lp)
    g = np.asarray(g, dtype=np.float64)
    if not math.isfinite(lp) or not np.all(np.isfinite(g)):
        return -math.inf, g, None
    return lp, g, None


def initial_point(model, init, rng, *, jacobian=True, radius=2.0, tries=100,
                  what="the chain"):
    """The starting point ``(x, lp, grad)`` on the unconstrained space, with a finite
    log density and gradient (``jacobian``: with the transforms' log-Jacobian).

    ``init`` as in the module docstring; what is drawn comes from ``rng``, up to
    ``tries`` times. A point where the log density stays non-finite is a
    :class:`~stanlite.ModelError` saying what failed where (``what``: "the chain",
    "ADVI", "the optimizer", ...)."""
    check_init(model, init)
    make, random = _point_maker(model, init, radius)
    last = None
    n_try = tries if random else 1
    for _ in range(n_try):
        x = make(rng)
        lp, g, err = safe_log_density_gradient(model, x, jacobian)
        if math.isfinite(lp):
            return x, lp, g
        last = (x, g, err)
    x, g, err = last
    raise ModelError(f"could not initialise {what}: at {_where(init, radius, n_try)}, "
                     f"{_why(model, g, err)}. Check the parameters' constraints and the "
                     "priors, or pass init=")


def _where(init, radius, n_try):
    if n_try == 1:
        return "the given init"
    r = float(radius if init is None or isinstance(init, dict) else init)
    draw = f"{n_try} random initial points (uniform(-{r:g}, {r:g}) on the unconstrained " \
        "space"
    return draw + (", the parameters the init leaves out)" if isinstance(init, dict)
                   else ")")


def _why(model, g, err):
    if err is not None:
        return f"the log density raised {type(err).__name__}: {err}"
    if g is not None and not np.all(np.isfinite(g)):
        f = getattr(model, "unconstrained_param_names", None)
        names = list(f()) if callable(f) else [f"x[{i + 1}]" for i in range(model.dim)]
        bad = [names[i] for i in np.flatnonzero(~np.isfinite(g))]
        return f"the gradient is not finite w.r.t. {', '.join(bad[:5])}"
    return "the log density is not finite (-inf or NaN)"
