"""Progress bars shared by the samplers and approximations: one tqdm bar over a
known number of steps (ADVI iterations, Pathfinder paths, optimizer iterations),
shown only when asked for and when someone can see it (a terminal or a notebook).

NUTS's per-chain bars (``runner.py``) use :func:`wanted` too; they need one bar per
chain at fixed positions, fed from worker processes, and so keep their own class.
"""

import sys

__all__ = ["wanted", "Bar"]


def wanted(progress):
    """Whether to show a bar: ``progress`` is true and stderr is a terminal, or we run
    inside a Jupyter kernel (tqdm.auto draws a widget there)."""
    if not progress:
        return False
    if "ipykernel" in sys.modules:
        return True
    return hasattr(sys.stderr, "isatty") and sys.stderr.isatty()


class Bar:
    """A tqdm bar of ``total`` steps labelled ``desc``; a silent stand-in when
    ``enabled`` is false or tqdm is missing (every method is then a no-op).

    ``update(n, **postfix)`` moves it to ``n`` steps done (absolute), ``advance(k,
    **postfix)`` by ``k``; ``postfix`` shows running numbers (an ELBO, a log density).
    """

    def __init__(self, enabled, total, desc, unit="it"):
        self.bar = None
        if enabled:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                return
            self.bar = tqdm(total=total, desc=desc, leave=True, dynamic_ncols=True,
                            unit=unit)

    @property
    def enabled(self):
        """Whether a bar is drawn (callers skip formatting postfixes when not)."""
        return self.bar is not None

    def update(self, n, **postfix):
        if self.bar is not None:
            self.bar.update(n - self.bar.n)
            if postfix:
                self.bar.set_postfix(postfix, refresh=False)

    def advance(self, k=1, **postfix):
        if self.bar is not None:
            if postfix:
                self.bar.set_postfix(postfix, refresh=False)
            self.bar.update(k)

    def close(self):
        if self.bar is not None:
            self.bar.close()
