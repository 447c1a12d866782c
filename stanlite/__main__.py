"""``python -m stanlite``: the main job.

Fits the zoo model ``eight_schools_noncentered`` (Rubin's eight schools, non-centred)
with NUTS - 4 chains x (1000 warmup + 1000 draws), seed 1, chains in parallel
processes - and prints its posterior summary and Stan's diagnostics in words. The
same as ``stanlite sample eight_schools_noncentered --seed 1``.

With arguments, ``python -m stanlite ...`` is the command line itself
(``python -m stanlite sample model.py:Class --data d.json``, ``python -m stanlite
models``): the same as the ``stanlite`` script, for environments where the script is
not on PATH.
"""

import sys
import time

MODEL = "eight_schools_noncentered"


def main(chains=4, draws=1000, warmup=1000, seed=1, progress=True, out=None):
    """Fit the zoo model and print the summary and diagnostics; returns the fit."""
    import stanlite.models as zoo
    from stanlite.cli import format_summary
    out = out if out is not None else sys.stdout
    print(f"stanlite main job: NUTS on the zoo model '{MODEL}', {chains} chains x "
          f"({warmup} warmup + {draws} draws), seed {seed}", file=out, flush=True)
    model = zoo.get(MODEL)
    t0 = time.perf_counter()
    fit = model.sample(chains=chains, draws=draws, warmup=warmup, seed=seed,
                       progress=progress)
    elapsed = time.perf_counter() - t0
    print(f"sampled in {elapsed:.1f} s; mean step size "
          f"{fit.step_size.mean():.3g}\n", file=out)
    print(format_summary(fit.summary()), file=out)
    print("\nDiagnostics:", file=out)
    print(fit.diagnose(), file=out)
    return fit


if __name__ == "__main__":
    if len(sys.argv) > 1:
        from stanlite.cli import main as cli_main
        sys.exit(cli_main(sys.argv[1:]))
    main()
