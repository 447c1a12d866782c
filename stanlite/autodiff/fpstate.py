"""numpy's floating-point warnings switched off around a kernel, cheaply.

A fused node's forward kernel (a log density and its partials, an ODE solve) may
divide by zero or overflow on the way to a correct value (``inf`` in a tail that is
then multiplied by 0, say); numpy would warn. ``np.errstate(divide="ignore",
invalid="ignore", over="ignore")`` turns that off but costs a few microseconds, paid
by every density of every gradient. numpy >= 2 keeps the floating-point error state
in a context variable, so :func:`ignore_fp` sets it to a derived state - computed once
per base state and cached - and :func:`restore_fp` resets it. Older numpy:
``np.errstate`` itself.

The AD core owns these because its two-phase nodes (:mod:`.callback`) and the
generated replays of sl.compile (:mod:`.codegen`) run kernels under them; the
densities (stanlite/distributions/fused.py) import them from here.

>>> import numpy as np
>>> from stanlite.autodiff.fpstate import fp_ignored
>>> with fp_ignored():
...     float(np.float64(1.0) / np.float64(0.0))
inf
"""

import numpy as np

__all__ = ["ignore_fp", "restore_fp", "fp_ignored"]

try:
    from numpy._core.umath import _extobj_contextvar as _FP_STATE
    from numpy._core.umath import _make_extobj
except ImportError:                                     # pragma: no cover - numpy 1.x
    _FP_STATE = None

if _FP_STATE is not None:
    _fp_cache = (None, None)        # (base state, the same with the three ignored)

    def ignore_fp():
        """Ignore numpy's divide/invalid/overflow warnings until :func:`restore_fp`
        with the token returned."""
        global _fp_cache
        base = _FP_STATE.get()
        cached_base, derived = _fp_cache
        if cached_base is not base:
            derived = _make_extobj(divide="ignore", invalid="ignore", over="ignore")
            _fp_cache = (base, derived)    # holding base keeps its identity unique
        return _FP_STATE.set(derived)

    restore_fp = _FP_STATE.reset
else:                                                   # pragma: no cover
    def ignore_fp():
        e = np.errstate(divide="ignore", invalid="ignore", over="ignore")
        e.__enter__()
        return e

    def restore_fp(e):
        e.__exit__(None, None, None)


class fp_ignored:
    """``with fp_ignored():`` - numpy's divide/invalid/overflow warnings off for the
    block, like ``np.errstate`` with those three ignored at a quarter of its cost
    (for kernels that can also be called outside a fused node)."""

    __slots__ = ("_token",)

    def __enter__(self):
        self._token = ignore_fp()

    def __exit__(self, *exc):
        restore_fp(self._token)
