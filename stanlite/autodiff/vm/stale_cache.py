"""Dropping numba's on-disk cache of compiled functions when a file they depend on,
but numba does not watch, has changed.

numba keys a cached function on its own source file's time stamp only, yet the
machine code it stores carries everything the function inlined or called: the
interpreter's op codes and scalar helpers, the NUTS decisions inlined into the
compiled tree, the SoftAbs kernels inlined into the compiled RHMC step, the ODE
steppers inside the population loop. After an edit or an upgrade that kept
``__pycache__``, the cache would run the old instructions. The remedy, written once
here: hash the files a cache depends on and keep the hash beside the cache; a
different hash flushes it before the first call loads it.
"""

import hashlib
import os

__all__ = ["flush_when_changed"]


def flush_when_changed(dispatchers, tag, paths, kind, extra=""):
    """Flush the numba disk cache of each of ``dispatchers`` whose stamp
    ``<cache dir>/<tag>.<name>.<kind>`` does not hold the SHA-256 of the files
    ``paths`` (read in order) and of the text ``extra`` (what the code compiled in
    that no file shows, such as numbers imported from elsewhere), and write the new
    stamp. Call it before the dispatchers' first call (at import). Without a cache,
    or an unwritable one, it does nothing.

    >>> flush_when_changed([], "example", [__file__], "deps")    # nothing to flush
    """
    try:
        h = hashlib.sha256()
        for path in paths:
            with open(path, "rb") as f:
                h.update(f.read())
        if extra:
            h.update(extra.encode())
        digest = h.hexdigest()
        for d in dispatchers:
            cache = d._cache
            stamp = os.path.join(cache._cache_path, f"{tag}.{d.__name__}.{kind}")
            try:
                with open(stamp) as f:
                    old = f.read().strip()
            except OSError:
                old = None
            if old != digest:
                cache.flush()
                os.makedirs(cache._cache_path, exist_ok=True)
                with open(stamp, "w") as f:
                    f.write(digest)
    except (OSError, AttributeError):
        pass                    # no cache to protect (or an unwritable one)
