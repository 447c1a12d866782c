"""Keep glibc from returning large temporaries to the OS after every gradient.

By default glibc serves allocations above 128 KiB with ``mmap`` and unmaps them on
free, so a tape that allocates and frees the same 800 KB adjoint buffers on every
gradient pays page faults for each of them again (measured: a 3x slowdown of a large
logistic regression). Raising the mmap and trim thresholds keeps freed blocks in the
heap for reuse. Only glibc is affected; elsewhere this does nothing. Set
``STANLITE_NO_MALLOPT=1`` to opt out.
"""

import ctypes
import ctypes.util
import sys

from .config import setting

__all__ = ["tune_allocator"]

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def tune_allocator(threshold=512 * 1024 * 1024):
    """Set glibc's mmap/trim thresholds to ``threshold`` bytes; False if not glibc."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    ok1 = mallopt(_M_MMAP_THRESHOLD, min(threshold, 32 * 1024 * 1024))
    ok2 = mallopt(_M_TRIM_THRESHOLD, threshold)
    return bool(ok1 and ok2)


if not setting("STANLITE_NO_MALLOPT"):
    tune_allocator()
