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
``models`` lists the zoo. ``optimize`` and ``variational`` run ``model.optimize`` /
``model.variational`` where those exist (exit code 2 otherwise).

Exit codes: 0 success, 1 an error (unknown model, bad data, a model that cannot be
evaluated, ...: one line on stderr, no traceback unless ``--traceback``), 2 a usage
error or a command this version does not have.
"""

import argparse
import difflib
import importlib.util
import os
import sys

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


def _print_fit(fit, out):
    print(format_summary(fit.summary()), file=out)
    print("", file=out)
    print(fit.diagnose(), file=out)


# ---- commands ------------------------------------------------------------------------------
def _cmd_sample(args, out):
    model = build_model(args.model, args.data)
    fit = model.sample(chains=args.chains, draws=args.draws, warmup=args.warmup,
                       seed=args.seed, metric=args.metric, adapt_delta=args.adapt_delta,
                       max_treedepth=args.max_treedepth, thin=args.thin,
                       progress=not args.no_progress, parallel=not args.serial)
    seed = "" if args.seed is None else f", seed {args.seed}"
    print(f"{ALIASES.get(args.model, args.model)}: {fit.num_chains} chains x "
          f"{fit.num_draws} draws (warmup {args.warmup}{seed})\n", file=out)
    _print_fit(fit, out)
    if args.output:
        path = fit.save(args.output)
        print(f"\nwrote {path}", file=out)
    return 0


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


def _cmd_approx(method):
    def run(args, out):
        cls = load_model_class(args.model)
        if not callable(getattr(cls, method, None)):
            raise CLIError(f"'{PROG} {method}' is not available yet in this version "
                           f"(models have no {method}() method); use '{PROG} sample'",
                           code=2)
        model = build_model(args.model, args.data)
        kw = {"seed": args.seed}
        if method == "variational" and args.method:
            kw["method"] = args.method
        result = getattr(model, method)(**kw)
        if callable(getattr(result, "summary", None)):
            print(format_summary(result.summary()), file=out)
        else:
            print(result, file=out)
        if args.output:
            if not callable(getattr(result, "save", None)):
                raise CLIError(f"the {method} result cannot be saved (no save())")
            print(f"\nwrote {result.save(args.output)}", file=out)
        return 0
    return run


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


def _unit_open(v):
    x = float(v)
    if not 0 < x < 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), got {v}")
    return x


def make_parser():
    p = argparse.ArgumentParser(
        prog=PROG, description="stanlite: Stan-like probabilistic modeling on its own "
        "reverse-mode automatic differentiation.")
    p.add_argument("--traceback", action="store_true",
                   help="show the full traceback of an error (for bug reports)")
    sub = p.add_subparsers(dest="command", metavar="command")
    sub.required = True

    def model_args(sp):
        sp.add_argument("model", help="a zoo model name (see 'stanlite models') or "
                        "path/to/file.py:ClassName")
        sp.add_argument("--data", metavar="data.json",
                        help="data as Stan JSON (default for a zoo model: its own data)")
        sp.add_argument("--seed", type=int, default=None, help="random seed")
        sp.add_argument("--output", "-o", metavar="fit.nc",
                        help="write the fit to this netCDF file")

    s = sub.add_parser("sample", help="sample the posterior with NUTS",
                       description="Sample the posterior with NUTS (Stan's warmup); print "
                       "the summary and the diagnostics.")
    model_args(s)
    s.add_argument("--chains", type=_positive, default=4)
    s.add_argument("--draws", type=_nonneg, default=1000,
                   help="draws per chain after warmup (default 1000)")
    s.add_argument("--warmup", type=_nonneg, default=1000,
                   help="warmup iterations per chain (default 1000)")
    s.add_argument("--thin", type=_positive, default=1)
    s.add_argument("--metric", choices=["unit_e", "diag_e", "dense_e"], default="diag_e")
    s.add_argument("--adapt-delta", type=_unit_open, default=0.8,
                   help="target acceptance statistic (default 0.8)")
    s.add_argument("--max-treedepth", type=_positive, default=10)
    s.add_argument("--no-progress", action="store_true", help="no progress bars")
    s.add_argument("--serial", action="store_true",
                   help="run the chains one after another in this process")
    s.set_defaults(run=_cmd_sample)

    m = sub.add_parser("models", help="list the model zoo")
    m.set_defaults(run=_cmd_models)

    o = sub.add_parser("optimize", help="posterior mode / MLE (when available)")
    model_args(o)
    o.set_defaults(run=_cmd_approx("optimize"))

    v = sub.add_parser("variational", help="ADVI (when available)")
    model_args(v)
    v.add_argument("--method", choices=["meanfield", "fullrank"], default=None)
    v.set_defaults(run=_cmd_approx("variational"))
    return p


def main(argv=None, out=None):
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit
    code. Output goes to ``out`` (default stdout), errors to stderr."""
    out = out if out is not None else sys.stdout
    args = make_parser().parse_args(argv)
    try:
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
