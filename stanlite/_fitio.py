"""Fit files that never damage what they replace and never load silently wrong.

Writing (:func:`write_netcdf`): the whole netCDF-4 file is built in memory (xarray's
DataTree through h5netcdf) and only then written, as plain bytes, to a temporary file
in the destination's folder, flushed to disk and renamed over the destination
(``os.replace``, atomic on POSIX and Windows). Why in memory first: HDF5 writing
straight to a file that hits a full disk or a file-size limit (EFBIG) fails deep in
its cache flush, and h5py then crashes the interpreter (a segmentation fault, measured
with ``RLIMIT_FSIZE``) - no Python error to catch. An ``os.write`` of bytes fails with
an ordinary ``OSError`` instead, and the old file, never opened, is untouched.
A rename replaces whatever the destination is, so a destination that exists and is
not a regular file (a device such as /dev/full, a FIFO, a socket, a folder) is refused;
a symbolic link is followed to the file it names. Every ``OSError`` becomes a
:class:`FitFileError` naming the path the user gave (never only the temporary name),
its errno kept.

Reading checks: the file's signature (empty, not HDF5, a netCDF-3 file), checksums of
every group written (``sha256`` of each variable's values, shape and dtype: flipped
bytes and hand edits are found, not loaded), and a fingerprint of the data a fit was
made with (each data field's sha256 and the model class), against which a model given
for resuming is compared.
"""

import errno
import hashlib
import os
import stat
import tempfile

import numpy as np

from .errors import DataError, FitFileError

__all__ = ["write_netcdf", "data_fingerprint", "compare_fingerprints", "dataset_digests",
           "digest", "file_kind"]

_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


# ---- writing ----------------------------------------------------------------------------
# words for what an existing non-regular file is: saving over it (a rename) would replace
# a device node, a FIFO or a socket with a regular file, so it is refused
_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))

# OSError reasons in words (else the system's own text, lower case)
_REASONS = {errno.EACCES: "permission denied", errno.EPERM: "operation not permitted",
            errno.EROFS: "the file system is read-only",
            errno.ENOSPC: "no space left on the device",
            errno.EDQUOT: "disk quota exceeded", errno.EFBIG: "file too large",
            errno.ENOTDIR: "a part of the path is not a folder"}


def _target(path):
    """The file a save replaces: the file a symbolic link names, else ``path``."""
    return os.path.realpath(path) if os.path.islink(path) else path


def _temp_args(target):
    """Where and how the temporary file of a save is named (``.NAME.XXXX.tmp`` in the
    destination's folder): shared by the save and by :func:`check_writable`'s trial."""
    return dict(dir=os.path.dirname(os.path.abspath(target)),
                prefix=f".{os.path.basename(target)}.", suffix=".tmp")


def _reason(e, folder=None):
    if e.errno == errno.ENOENT and folder and os.path.isdir(folder):
        return "the folder does not accept new files"       # /proc
    return _REASONS.get(e.errno) or (e.strerror or str(e)).lower()


def _os_failure(path, e, message):
    """A FitFileError naming ``path`` with ``message``, keeping ``e``'s errno (``e``
    may be an errno number alone)."""
    if isinstance(e, int):
        e = OSError(e, os.strerror(e))
    err = FitFileError(path, message)
    err.errno, err.strerror, err.filename = e.errno, e.strerror, path
    return err


def _check_kind(path, target):
    """Refuse an existing target that is not a regular file (followed through links)."""
    try:
        st = os.stat(target)
    except OSError:                          # missing (or unreadable): the save will say
        return
    if stat.S_ISDIR(st.st_mode):
        raise _os_failure(path, errno.EISDIR, "is a folder, not a file name")
    if not stat.S_ISREG(st.st_mode):
        kind = next((w for test, w in _KINDS if test(st.st_mode)), "not a regular file")
        shown = "" if target == path else f" (the symbolic link names {target!r})"
        raise FitFileError(path, f"is {kind}{shown}, not a regular file: a fit is never "
                           "saved over it; give the name of a regular file")


def _check_folder(path, folder):
    if os.path.isdir(folder):
        return
    if os.path.exists(folder):
        raise _os_failure(path, errno.ENOTDIR, f"cannot be written: its folder {folder!r} "
                          "is a file, not a folder")
    raise _os_failure(path, errno.ENOENT, f"cannot be written: its folder {folder!r} does "
                      "not exist")


def check_writable(path):
    """Raise :class:`FitFileError` unless a fit can be saved at ``path``: it is not a
    folder, device, FIFO or socket; its folder exists; and a file can really be made
    there (a temporary file of the save's own naming is created and removed: the
    permission bits alone do not say, e.g. for root, on /sys or a read-only mount).
    (What a run checks before it starts, so that hours of sampling do not end in an
    unwritable path.)"""
    path = os.fspath(path)
    target = _target(path)
    _check_kind(path, target)
    args = _temp_args(target)
    _check_folder(path, args["dir"])
    if os.path.exists(target) and not os.access(target, os.W_OK):
        # os.replace would succeed, but the user marked the file read-only
        raise FitFileError(path, "exists and is read-only")
    fd, tmp = _make_temp(path, args)
    os.close(fd)
    os.unlink(tmp)


def _make_temp(path, args):
    """``mkstemp`` in the destination's folder; a failure named with ``path``."""
    try:
        return tempfile.mkstemp(**args)
    except OSError as e:
        raise _os_failure(path, e, f"cannot create a file in {args['dir']!r}: "
                          f"{_reason(e, args['dir'])}") from e


def write_netcdf(path, groups, attrs=None):
    """Write ``groups`` (``{name: xarray.Dataset}``, ``attrs`` on the root) as one
    netCDF-4 file at ``path``, atomically (see the module docstring); numeric
    variables compressed as ArviZ compresses them. Returns ``path`` (a str).

    Any failure is a :class:`FitFileError` naming the path (its ``errno`` that of
    the ``OSError`` underneath); an existing file at ``path`` is unchanged and no
    temporary file is left behind."""
    import xarray as xr
    path = os.fspath(path)
    check_writable(path)
    tree = {"/": xr.Dataset(attrs=dict(attrs or {}))}
    encoding = {}
    for name, ds in groups.items():
        tree[f"/{name}"] = ds
        encoding[f"/{name}"] = {k: {"zlib": True} for k, v in ds.variables.items()
                                if v.dtype.kind in "biuf" and v.ndim}
    try:
        data = xr.DataTree.from_dict(tree).to_netcdf(None, engine="h5netcdf",
                                                     encoding=encoding)
    except Exception as e:                   # noqa: BLE001 - named, with its cause
        raise FitFileError(path, f"could not be encoded as netCDF: {type(e).__name__}: "
                           f"{e}") from e
    _replace_with_bytes(path, memoryview(data))
    return path


def _replace_with_bytes(path, data):
    # a symbolic link keeps pointing at the new file: the file it names is replaced
    target = _target(path)
    _check_kind(path, target)                # (again: it may have changed meanwhile)
    args = _temp_args(target)
    mode = _file_mode(target)
    fd, tmp = _make_temp(path, args)
    try:
        try:
            view = data
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as e:               # Ctrl-C too: never leave the temporary file
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if not isinstance(e, OSError):
            raise
        kept = "; the existing file is unchanged" if os.path.exists(path) else ""
        raise _os_failure(path, e, f"could not be written ({e.strerror or e}){kept}") \
            from e
    _fsync_folder(args["dir"])


def _file_mode(path):
    """The permissions the new file gets: the old file's, else the umask's default."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_folder(folder):
    """Make the rename durable where the platform allows (POSIX); best effort."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---- what a file is ---------------------------------------------------------------------
def file_kind(path):
    """Why ``path`` cannot be a fit file (a sentence), or ``None`` if it may be one:
    missing, a folder, empty, netCDF-3, or not HDF5 (HDF5 puts its signature at
    offset 0, 512, 1024, ... )."""
    if not os.path.exists(path):
        return None
    if os.path.isdir(path):
        return "is a folder, not a fit file"
    size = os.path.getsize(path)
    if size == 0:
        return "is empty (0 bytes): a save that never finished, or not a fit file"
    with open(path, "rb") as f:
        head = f.read(8)
        if head[:3] == b"CDF":
            return ("is a netCDF-3 file; fit.save() writes netCDF-4 (HDF5): it was not "
                    "written by stanlite")
        offset = 0
        while offset + 8 <= size:
            f.seek(offset)
            if f.read(8) == _HDF5_MAGIC:
                return None
            offset = 512 if offset == 0 else 2 * offset
    return (f"is not a netCDF-4 (HDF5) file (no HDF5 signature in its {size} bytes): "
            "not written by fit.save(), or damaged at its start")


# ---- checksums --------------------------------------------------------------------------
def digest(values):
    """sha256 (hex) of an array's dtype, shape and values (NaNs made canonical)."""
    a = np.asarray(values)
    # text (coordinate labels) is text however it comes back: fixed-width unicode
    # written, object read (netCDF's variable-length strings)
    kind = f"{a.dtype.kind}{a.dtype.itemsize}" if a.dtype.kind in "biufc" else "text"
    h = hashlib.sha256(f"{kind}{a.shape}".encode())
    if a.dtype.kind in "biufc":
        if a.dtype.kind in "fc":
            a = np.where(np.isnan(a), np.nan, a)
        h.update(np.ascontiguousarray(a).tobytes())
    else:                                    # strings, objects: their text
        h.update("\x00".join(map(str, a.ravel().tolist())).encode("utf-8", "replace"))
    return h.hexdigest()


def dataset_digests(ds):
    """``{variable: digest}`` of every variable (coordinates included) of a Dataset."""
    return {str(k): digest(v.values) for k, v in ds.variables.items()}


def state_digest(text, arrays):
    """One sha256 over the state's JSON text and its arrays (by name)."""
    h = hashlib.sha256(bytes(text))
    for k in sorted(arrays):
        h.update(k.encode())
        h.update(digest(arrays[k]).encode())
    return h.hexdigest()


# ---- the data a fit was made with ----------------------------------------------------------
def data_fingerprint(model):
    """``{"model": class name, "fields": {name: digest}}`` of a model's data, or None
    for an object without ``data`` (any log-density protocol)."""
    data = getattr(model, "data", None) if model is not None else None
    if not isinstance(data, dict):
        return None
    return {"model": type(model).__qualname__,
            "fields": {k: _field_digest(v) for k, v in data.items()}}


def fingerprint_of_data(model_name, data):
    """The fingerprint of data read back from a file's data groups (older files)."""
    return {"model": model_name, "fields": {k: _field_digest(v) for k, v in data.items()}}


def _field_digest(v):
    # the canonical form: integers as int64, reals as float64 (an int field stays int)
    a = np.asarray(v)
    if a.dtype.kind in "biu":
        a = a.astype(np.int64)
    elif a.dtype.kind == "f":
        a = a.astype(np.float64)
    return digest(a)


def compare_fingerprints(saved, model, where, changed_ok=False, hint="", note=""):
    """Raise :class:`~stanlite.DataError` if ``model``'s data differ from the
    fingerprint ``saved`` (``where`` says whose fingerprint: "the fit in 'x.nc'"),
    naming the fields that differ (and ``hint``); a warning only if ``changed_ok``
    (ending with ``note``). A differing model class is a RuntimeWarning (a renamed
    class is common; the parameters were already checked to be the same). Returns
    whether the data differ."""
    import warnings
    mine = data_fingerprint(model)
    if saved is None or mine is None:
        return False
    a, b = saved.get("fields", {}), mine["fields"]
    differ = sorted(k for k in set(a) & set(b) if a[k] != b[k])
    only_saved, only_mine = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    if differ or only_saved or only_mine:
        parts = ([f"{', '.join(differ)} differ"] if differ else []) \
            + ([f"{', '.join(only_saved)} only in the fit's data"] if only_saved else []) \
            + ([f"{', '.join(only_mine)} only in this model's"] if only_mine else [])
        msg = (f"{where} was made with other data than this {type(model).__name__} "
               f"has ({'; '.join(parts)}): continuing it would mix two posteriors")
        if not changed_ok:
            raise DataError(msg + "; pass data_changed_ok=True if that is what you want"
                            + hint)
        warnings.warn(msg + f" (data_changed_ok=True){note}", RuntimeWarning,
                      stacklevel=4)
    if saved.get("model") not in (None, mine["model"]):
        warnings.warn(f"{where} was made with a model class named {saved['model']}, this "
                      f"one is {mine['model']} (same parameters and data): continuing "
                      "assumes it is the same model", RuntimeWarning, stacklevel=4)
    return bool(differ or only_saved or only_mine)
