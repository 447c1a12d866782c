"""The ``stanlite`` command line.

::

    stanlite sample eight_schools_noncentered --chains 4 --draws 1000 --seed 1
    stanlite sample path/to/model.py:MyModel --data data.json --output fit.nc
    stanlite models

``sample`` fits a zoo model (by name, ``eight_schools`` standing for
``eight_schools_noncentered``; its default data unless ``--data`` is given)
or a ``sl.Model`` subclass from a Python file (``path.py:ClassName``), prints the
summary and the diagnostics, and with ``--output`` writes the fit as netCDF
(``sl.load_fit`` reads it back; ``arviz.from_netcdf`` reads its ArviZ groups).
``models`` lists the zoo. The approximate methods take the same model arguments::

    stanlite optimize eight_schools --method lbfgs --seed 1 -o mode.csv
    stanlite laplace linear_regression --draws 1000 -o laplace.nc
    stanlite pathfinder eight_schools --num-paths 4 --draws 1000 -o pathfinder.nc
    stanlite variational eight_schools --method fullrank -o advi.nc

``sample`` takes ``--init`` (a JSON file of values or a radius), ``--sampler``
(``nuts``, ``hmc``, ``rhmc``) and ``--save-warmup``; ``stanlite --version`` prints the
version. The file ``--output`` writes has the ArviZ groups ``az.plot_ppc``,
``az.loo`` and ``az.compare`` take (see :meth:`stanlite.fit.Fit.to_arviz`).

``optimize`` prints the parameters' estimates (``--all``: the transformed parameters
and generated quantities too) and how the optimizer converged (``--output``
writes them as CSV, one row as cmdstanpy's ``optimized_params_pd``, or JSON);
``laplace``, ``pathfinder`` and ``variational`` print the summary of their draws and
their diagnostics (Pareto k-hat), and ``--output`` writes the draws as netCDF
(``arviz.from_netcdf`` reads them). Warnings (an optimizer that did not converge, a
large k-hat) are one line each on stderr, prefixed ``stanlite: warning:``.

Exit codes: 0 success, 1 an error (unknown model, bad data, a model that cannot be
evaluated, ...: one line on stderr, no traceback unless ``--traceback``), 2 a usage
error or a command this version does not have. ``--output`` is tried before the run
(a temporary file is created and removed in its folder); if writing it still fails
after the run (a disk that filled up meanwhile), the fit is saved under the same name in
the current folder, else in the temporary folder, the message says where, the summary
is printed, and the exit code is 1.
"""

import argparse
import contextlib
import difflib
import importlib.util
import json
import os
import sys
import warnings

__all__ = ["main", "load_model_class", "build_model", "format_summary"]

PROG = "stanlite"

#: short names the command line accepts for zoo models
ALIASES = {"eight_schools": "eight_schools_noncentered"}


class CLIError(Exception):
    """An error reported as one line on stderr, exit code ``code``."""

    def __init__(self, message, code=1):
        super().__init__(message)
        self.code = code


# ---- the model -------------------------------------------------------------------------
def load_model_class(spec):
    """The ``sl.Model`` subclass named by ``spec``: a zoo name, or ``path.py:Class``."""
    from .model import Model
    if ":" in spec and spec.rsplit(":", 1)[0].endswith(".py"):
        path, name = spec.rsplit(":", 1)
        if not os.path.isfile(path):
            raise CLIError(f"model file {path!r} does not exist")
        mod_name = "_stanlite_user_" + "".join(c if c.isalnum() else "_" for c in
                                               os.path.abspath(path))
        try:
            spec_ = importlib.util.spec_from_file_location(mod_name, path)
            module = importlib.util.module_from_spec(spec_)
            sys.modules[mod_name] = module            # pickling, dataclasses, ...
            spec_.loader.exec_module(module)
        except Exception as e:                        # noqa: BLE001 - reported in one line
            sys.modules.pop(mod_name, None)
            raise CLIError(f"could not load {path!r}: {type(e).__name__}: {e}") from e
        cls = getattr(module, name, None)
        if cls is None:
            found = sorted(k for k, v in vars(module).items() if isinstance(v, type)
                           and issubclass(v, Model) and v is not Model)
            raise CLIError(f"{path!r} has no class {name!r}"
                           + (f"; its models: {', '.join(found)}" if found else ""))
        if not (isinstance(cls, type) and issubclass(cls, Model)):
            raise CLIError(f"{path}:{name} is not a subclass of stanlite.Model")
        return cls
    if spec.endswith(".py"):
        raise CLIError(f"name the model class too: {spec}:ClassName")
    from . import models
    try:
        return models.model_class(ALIASES.get(spec, spec))
    except models.UnknownModelError as e:
        close = [n for n in models.names() if n.startswith(spec)] or \
            difflib.get_close_matches(spec, models.names(), n=3)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise CLIError(f"{e}{hint} (or give path/to/file.py:ClassName)") from None


def build_model(spec, data=None):
    """The model ``spec`` names, built with the JSON data file ``data`` (for a zoo
    model without ``data``: its default data)."""
    cls = load_model_class(spec)
    if data is not None:
        return cls.from_json(os.fspath(data))
    if ":" not in spec:
        from . import models
        return models.get(ALIASES.get(spec, spec))
    return cls()


# ---- output ------------------------------------------------------------------------------
def format_summary(df):
    """The summary table as text: 4 significant digits, ESS as integers, R-hat to
    3 decimals."""
    def sig(v):
        return f"{v:.4g}"

    def ess(v):
        return "nan" if v != v else f"{v:.0f}"
    fmt = {c: sig for c in df.columns}
    fmt.update(ess_bulk=ess, ess_tail=ess, r_hat=lambda v: f"{v:.3f}")
    return df.to_string(formatters=fmt)


def _check_output(path):
    """``--output`` checked before anything runs (hours of sampling must not end in
    "no such folder"): it is not a folder, device, FIFO or socket, and a temporary file
    of the save's own naming can really be created (and is removed) in its folder.
    (The file itself is written aside and renamed into place: see stanlite/_fitio.py.)"""
    if not path:
        return
    from ._fitio import check_writable
    from .errors import FitFileError
    try:
        check_writable(path)
    except FitFileError as e:
        raise CLIError(f"--output {path!r} {e.problem}") from None


def _fallback_paths(path):
    """Where a fit goes when ``--output`` fails after the run: its file name in the
    current folder, else in the temporary folder (not the folder that just failed);
    never over an existing file."""
    import tempfile
    name = os.path.basename(os.fspath(path)) or "fit.nc"
    stem, ext = os.path.splitext(name)
    failed = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    for folder in (os.getcwd(), tempfile.gettempdir()):
        if os.path.realpath(folder) == failed:
            continue
        candidate = os.path.join(folder, name)
        n = 1
        while os.path.lexists(candidate):
            candidate = os.path.join(folder, f"{stem}.{n}{ext}")
            n += 1
        yield candidate


def _save(fit, path):
    """Save ``fit`` at ``--output`` ``path``; if that fails (a disk that filled up
    during the run), at a fallback path so that the draws are not lost. Returns
    (the path written or None, the error message or None)."""
    from .errors import FitFileError
    try:
        return fit.save(path), None
    except FitFileError as e:
        failure = f"--output {os.fspath(path)!r} {e.problem}"
    tried = []
    for other in _fallback_paths(path):
        try:
            written = fit.save(other)
        except FitFileError as e:
            tried.append(f"{other!r} ({e.problem})")
            continue
        return written, f"{failure}; the fit was saved to {written!r} instead"
    return None, f"{failure}; the fit could not be saved elsewhere either: " \
        + "; ".join(tried)


def _save_and_print(fit, header, args, out):
    """Save first (the draws are safe before anything else can fail), then print
    the header, summary and diagnostics, then where the fit went. Exit code 1 if
    ``--output`` could not be written (the fit then went to a fallback path)."""
    written, failure = _save(fit, args.output) if args.output else (None, None)
    print(header + "\n", file=out)
    _print_fit(fit, out)
    if written:
        print(f"\nwrote {written}", file=out)
    if failure:
        _error(failure, args, 1)
        return 1
    return 0


def _print_fit(fit, out):
    if fit.num_draws == 0:       # stopped in warmup: diagnose() says how to go on
        print("No draws to summarise yet.", file=out)
    else:
        print(format_summary(fit.summary()), file=out)
    print("", file=out)
    print(fit.diagnose(), file=out)


# ---- commands ------------------------------------------------------------------------------
def _cmd_sample(args, out):
    model = build_model(args.model, args.data)
    # --adapt-delta passed only when given: the sampler's own default otherwise
    delta = {} if args.adapt_delta is None else {"adapt_delta": args.adapt_delta}
    fit = model.sample(chains=args.chains, draws=args.draws, warmup=args.warmup,
                       seed=args.seed, metric=args.metric, **delta,
                       max_treedepth=args.max_treedepth, thin=args.thin,
                       init=_read_init(args.init), progress=not args.no_progress,
                       parallel=not args.serial, adaptation=args.adaptation,
                       sampler=args.sampler, save_warmup=args.save_warmup)
    seed = "" if args.seed is None else f", seed {args.seed}"
    return _save_and_print(fit, f"{ALIASES.get(args.model, args.model)}: {fit.num_chains} "
                           f"chains x {fit.num_draws} draws (warmup {args.warmup}{seed})",
                           args, out)


def _cmd_models(args, out):
    from . import models
    rows = [(n, _one_line(models.model_class(n).__doc__)) for n in models.names()]
    width = max(len(n) for n, _ in rows)
    for n, d in rows:
        print(f"{n:<{width}}  {d}", file=out)
    return 0


def _one_line(doc):
    """The first paragraph of a docstring, on one line."""
    if not doc:
        return ""
    para = []
    for line in doc.strip().splitlines():
        if not line.strip():
            break
        para.append(line.strip())
    return " ".join(para)


@contextlib.contextmanager
def _warnings_to_stderr():
    """Warnings raised by a method, each as one line on stderr (after the run)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            seen = set()
            for w in caught:
                if issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning,
                                           FutureWarning)):
                    continue
                msg = " ".join(str(w.message).split())
                if msg not in seen:
                    seen.add(msg)
                    print(f"{PROG}: warning: {msg}", file=sys.stderr)


def _read_init(path):
    """``--init``: a JSON file of parameter values (Stan's JSON; parameters it leaves
    out are drawn at random), or a number: the radius R of uniform(-R, R) on the
    unconstrained space (0: the origin), as CmdStan's ``init=``."""
    if path is None:
        return None
    try:
        return float(path)
    except ValueError:
        pass
    # the reader of Model.from_json (stanlite/stan_json.py): the same faults refused
    from .stan_json import read_object, stan_json_value
    d = read_object(path, f"init file {path!r}", "parameter values", error=CLIError)
    return {k: stan_json_value(v) for k, v in d.items()}


def _tolerances(args):
    return {k: getattr(args, k) for k in ("tol_obj", "tol_rel_obj", "tol_grad",
                                          "tol_rel_grad", "tol_param")
            if getattr(args, k) is not None}


def _model_name(args):
    return ALIASES.get(args.model, args.model)


def _cmd_optimize(args, out):
    model = build_model(args.model, args.data)
    with _warnings_to_stderr():
        opt = model.optimize(method=args.method, jacobian=args.jacobian, seed=args.seed,
                             init=_read_init(args.init), iter=args.iter,
                             history_size=args.history_size, **_tolerances(args))
    state = "converged" if opt.converged else "NOT converged"
    print(f"{_model_name(args)}: optimize ({opt.method}, jacobian={opt.jacobian}"
          f"{'' if args.seed is None else f', seed {args.seed}'}): {state} after "
          f"{opt.iterations} iterations ({opt.n_evals} evaluations)", file=out)
    print(f"{opt.message}\n", file=out)
    table = opt.summary()
    if not args.all:
        # the parameters (and lp__); the derived values are in --output's file
        keep = ["lp__"] + [n for n in model.param_names() if n in table.index]
        hidden = len(table) - len(keep)
        table = table.loc[keep]
    print(table.to_string(float_format=lambda v: f"{v:.6g}"), file=out)
    if not args.all and hidden:
        print(f"({hidden} values of transformed parameters and generated quantities not "
              "shown: --all prints them, --output writes them)", file=out)
    if args.output:
        path = os.fspath(args.output)
        if path.endswith(".csv"):
            opt.to_frame().to_csv(path, index=False, float_format="%.17g")
        elif path.endswith(".json"):
            d = {"lp__": opt.lp, "converged": opt.converged, "message": opt.message,
                 "method": opt.method, "jacobian": opt.jacobian,
                 **{k: (v.tolist() if hasattr(v, "tolist") else v)
                    for k, v in opt.to_dict().items()}}
            with open(path, "w") as f:
                json.dump(d, f, indent=1)
        else:
            raise CLIError(f"--output for optimize must end in .csv or .json, got {path!r}")
        print(f"\nwrote {path}", file=out)
    return 0


def _seed_text(args):
    return "" if args.seed is None else f", seed {args.seed}"


def _cmd_laplace(args, out):
    model = build_model(args.model, args.data)
    with _warnings_to_stderr():
        fit = model.laplace(draws=args.draws, jacobian=args.jacobian, seed=args.seed,
                            init=_read_init(args.init))
    return _save_and_print(fit, f"{_model_name(args)}: laplace ({fit.num_draws} draws, "
                           f"jacobian={args.jacobian}{_seed_text(args)})", args, out)


def _cmd_pathfinder(args, out):
    model = build_model(args.model, args.data)
    with _warnings_to_stderr():
        fit = model.pathfinder(seed=args.seed, num_paths=args.num_paths,
                               num_draws=args.draws, num_single_draws=args.single_draws,
                               num_elbo_draws=args.elbo_draws,
                               max_lbfgs_iters=args.max_lbfgs_iters,
                               psis_resample=not args.no_psis_resample,
                               init=_read_init(args.init),
                               progress=not args.no_progress, **_tolerances(args))
    return _save_and_print(fit, f"{_model_name(args)}: pathfinder ({fit.num_draws} "
                           f"draws, {args.num_paths} paths{_seed_text(args)})", args, out)


def _cmd_variational(args, out):
    model = build_model(args.model, args.data)
    kw = dict(method=args.method, seed=args.seed, iter=args.iter,
              output_samples=args.draws, tol_rel_obj=args.tol_rel_obj,
              init=_read_init(args.init), progress=not args.no_progress)
    if args.eta is not None:
        kw["eta"] = args.eta
    with _warnings_to_stderr():
        fit = model.variational(**kw)
    return _save_and_print(fit, f"{_model_name(args)}: variational ({args.method}, "
                           f"{fit.num_draws} draws{_seed_text(args)})", args, out)


# ---- argument parsing ------------------------------------------------------------------------
def _positive(v):
    n = int(v)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return n


def _nonneg(v):
    n = int(v)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {v}")
    return n


def _nonneg_float(v):
    x = float(v)
    if not x >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {v}")
    return x


def _positive_float(v):
    x = float(v)
    if not x > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {v}")
    return x


def _unit_open(v):
    x = float(v)
    if not 0 < x < 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), got {v}")
    return x


def _version():
    from ._version import __version__
    return __version__


def make_parser():
    p = argparse.ArgumentParser(
        prog=PROG, description="stanlite: Stan-like probabilistic modeling on its own "
        "reverse-mode automatic differentiation.")
    p.add_argument("--traceback", action="store_true",
                   help="show the full traceback of an error (for bug reports)")
    p.add_argument("--version", action="version", version=f"{PROG} {_version()}")
    sub = p.add_subparsers(dest="command", metavar="command")
    sub.required = True
    _add_sample(sub)
    sub.add_parser("models", help="list the model zoo").set_defaults(run=_cmd_models)
    _add_optimize(sub)
    _add_laplace(sub)
    _add_pathfinder(sub)
    _add_variational(sub)
    return p


# ---- the parts of the subcommands' parsers ------------------------------------------------
def _model_args(sp, output_help="write the fit to this netCDF file", output_metavar="fit.nc"):
    """The model, its data, the seed and the output file: every fitting command's."""
    sp.add_argument("model", help="a zoo model name (see 'stanlite models') or "
                    "path/to/file.py:ClassName")
    sp.add_argument("--data", metavar="data.json",
                    help="data as Stan JSON (default for a zoo model: its own data)")
    sp.add_argument("--seed", type=int, default=None, help="random seed")
    sp.add_argument("--output", "-o", metavar=output_metavar, help=output_help)


def _init_arg(sp):
    sp.add_argument("--init", metavar="init.json",
                    help="initial parameter values as Stan JSON (missing ones random), "
                    "or a radius R: uniform(-R, R) on the unconstrained space")


def _tol_args(sp):
    for name, default in (("tol-obj", "1e-12"), ("tol-rel-obj", "1e4"),
                          ("tol-grad", "1e-8"), ("tol-rel-grad", "1e7"),
                          ("tol-param", "1e-8")):
        sp.add_argument(f"--{name}", type=_nonneg_float, default=None,
                        help=f"Stan's L-BFGS convergence test (default {default})")


def _no_progress_arg(sp, what="no progress bar"):
    sp.add_argument("--no-progress", action="store_true", help=what)


def _command(sub, name, run, help, description, *model_args):
    """The parser of the fitting subcommand ``name`` (run by ``run``), with the model
    arguments (``model_args``: the output's help and metavar, see :func:`_model_args`)."""
    sp = sub.add_parser(name, help=help, description=description)
    _model_args(sp, *model_args)
    sp.set_defaults(run=run)
    return sp


def _add_sample(sub):
    s = _command(sub, "sample", _cmd_sample, "sample the posterior with NUTS",
                 "Sample the posterior with NUTS (Stan's warmup); print the summary and "
                 "the diagnostics.")
    s.add_argument("--chains", type=_positive, default=4)
    s.add_argument("--draws", type=_nonneg, default=1000,
                   help="draws per chain after warmup (default 1000)")
    s.add_argument("--warmup", type=_nonneg, default=1000,
                   help="warmup iterations per chain (default 1000)")
    s.add_argument("--thin", type=_positive, default=1)
    s.add_argument("--metric", choices=["unit_e", "diag_e", "dense_e"], default="diag_e")
    from .samplers.adaptation import ADAPTATIONS
    s.add_argument("--adaptation", choices=ADAPTATIONS, default="stan",
                   help="how warmup adapts the metric: Stan's windows (default) or "
                   "nutpie's from draws and gradients, which needs a shorter warmup")
    s.add_argument("--adapt-delta", type=_unit_open, default=None,
                   help="target acceptance statistic (default: the sampler's own, 0.8 "
                   "for NUTS and static HMC, 0.99 for RHMC)")
    s.add_argument("--max-treedepth", type=_positive, default=10)
    from .samplers.kernels import NAMES as SAMPLERS     # the kernel registry's names
    s.add_argument("--sampler", choices=SAMPLERS, default="nuts",
                   help="NUTS (default), static HMC, or Riemannian HMC (SoftAbs metric)")
    s.add_argument("--save-warmup", action="store_true",
                   help="keep the warmup draws (the file's warmup_posterior group)")
    _no_progress_arg(s, "no progress bars")
    s.add_argument("--serial", action="store_true",
                   help="run the chains one after another in this process")
    _init_arg(s)


def _add_optimize(sub):
    o = _command(sub, "optimize", _cmd_optimize,
                 "posterior mode / penalised MLE (L-BFGS, BFGS, Newton)",
                 "The posterior mode (MAP; with --jacobian the mode on the unconstrained "
                 "space) or penalised MLE, with Stan's convergence tests.",
                 "write the estimates (.csv: one row, as cmdstanpy; or .json)", "mode.csv")
    o.add_argument("--method", choices=["lbfgs", "bfgs", "newton"], default="lbfgs")
    o.add_argument("--jacobian", action="store_true",
                   help="include the log-Jacobian of the transforms (default: not, MAP)")
    o.add_argument("--iter", type=_positive, default=2000, help="maximum iterations")
    o.add_argument("--history-size", type=_positive, default=5,
                   help="L-BFGS correction pairs (default 5)")
    o.add_argument("--all", action="store_true",
                   help="print the transformed parameters and generated quantities too "
                   "(default: the parameters)")
    _init_arg(o)
    _tol_args(o)


def _add_laplace(sub):
    la = _command(sub, "laplace", _cmd_laplace, "normal approximation at the mode",
                  "Draws from the normal approximation at the mode (nested-AD Hessian) on "
                  "the unconstrained space.")
    la.add_argument("--draws", type=_positive, default=1000)
    la.add_argument("--no-jacobian", dest="jacobian", action="store_false",
                    help="the mode and density without the log-Jacobian")
    _init_arg(la)


def _add_pathfinder(sub):
    pf = _command(sub, "pathfinder", _cmd_pathfinder, "Pathfinder variational inference",
                  "Multi-path Pathfinder (Zhang et al. 2022) with PSIS resampling, Stan's "
                  "defaults.")
    pf.add_argument("--num-paths", type=_positive, default=4)
    pf.add_argument("--draws", type=_positive, default=1000,
                    help="draws returned (default 1000)")
    pf.add_argument("--single-draws", type=_positive, default=None,
                    help="draws per path (default: --draws)")
    pf.add_argument("--elbo-draws", type=_positive, default=25)
    pf.add_argument("--max-lbfgs-iters", type=_positive, default=1000)
    pf.add_argument("--no-psis-resample", action="store_true",
                    help="return the pooled draws of all paths, not a PSIS resample")
    _no_progress_arg(pf)
    _init_arg(pf)
    _tol_args(pf)


def _add_variational(sub):
    v = _command(sub, "variational", _cmd_variational, "ADVI (mean-field or full-rank)",
                 "Stan's ADVI: a Gaussian on the unconstrained space fitted by stochastic "
                 "gradient ascent on the ELBO.")
    v.add_argument("--method", choices=["meanfield", "fullrank"], default="meanfield")
    v.add_argument("--iter", type=_positive, default=10000, help="maximum iterations")
    v.add_argument("--draws", type=_positive, default=1000,
                   help="draws from the approximation (default 1000)")
    v.add_argument("--tol-rel-obj", type=_positive_float, default=0.01)
    v.add_argument("--eta", type=_positive_float, default=None,
                   help="step-size scale (default: adapted)")
    _no_progress_arg(v)
    _init_arg(v)


def main(argv=None, out=None):
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit
    code. Output goes to ``out`` (default stdout), errors to stderr."""
    out = out if out is not None else sys.stdout
    args = make_parser().parse_args(argv)
    try:
        _check_output(getattr(args, "output", None))
        return args.run(args, out)
    except CLIError as e:
        _error(e, args, e.code)
        return e.code
    except BrokenPipeError:                          # `stanlite ... | head`
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:                            # noqa: BLE001 - one line, no traceback
        from .errors import StanliteError
        if args.traceback:
            raise
        what = "" if isinstance(e, (StanliteError, OSError)) else f"{type(e).__name__}: "
        _error(f"{what}{e}", args, 1)
        return 1


def _error(msg, args, code):
    if getattr(args, "traceback", False) and isinstance(msg, BaseException) \
            and msg.__cause__ is not None:
        import traceback
        traceback.print_exception(msg.__cause__)
    print(f"{PROG}: error: {msg}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
