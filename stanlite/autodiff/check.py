"""The gradient checker every primitive test uses: AD against central differences.

For a function ``f`` of one or several arrays and random unit directions ``v`` with
random output cotangents ``u``, it compares the reverse-mode number
``<J^T u, v>`` with the central difference of ``phi(t) = <u, f(x + t v)>`` at
``t = 0``, refined by one Richardson step (error O(h^4) instead of O(h^2)):

    D(h) = (phi(h) - phi(-h)) / 2h,      D* = (4 D(h/2) - D(h)) / 3.

It also checks that the traced evaluation returns the same value as the plain one.
A direction check catches a wrong gradient component with probability one, at the
cost of two (four, with Richardson) extra evaluations per direction.
"""

from dataclasses import dataclass, field

import numpy as np

from .functional import vjp
from .var import value_of

__all__ = ["check_grad", "assert_grad", "check_jvp", "assert_jvp", "check_hessian",
           "assert_hessian", "GradCheck"]


@dataclass
class GradCheck:
    """The outcome of :func:`check_grad`."""

    max_abs_err: float
    max_rel_err: float
    passed: bool
    value_err: float
    details: list = field(default_factory=list, repr=False)

    def __bool__(self):
        return self.passed


def _as_args(x):
    if isinstance(x, tuple):
        return tuple(np.asarray(a, dtype=float) for a in x)
    return (np.asarray(x, dtype=float),)


def _scalarize(a):
    a = np.asarray(a, dtype=float)
    return float(a) if a.ndim == 0 else a


def check_grad(f, x, *, directions=4, h=1e-4, rtol=1e-6, atol=1e-8, seed=0):
    """Compare ``f``'s reverse-mode derivative with central differences.

    ``x`` is an array (``f(x)``) or a tuple of arrays (``f(*x)``); ``f`` may return a
    scalar or an array. Returns a :class:`GradCheck` with the largest absolute and
    relative errors over ``directions`` random directions; ``passed`` is true when
    every direction satisfies ``|ad - fd| <= atol + rtol * max(|ad|, |fd|)``.

    Example
    -------
    >>> import numpy as np, stanlite as sl
    >>> r = sl.check_grad(lambda x: sl.sum(sl.exp(x) * x), np.array([0.1, -0.4]))
    >>> r.passed
    True
    """
    rng = np.random.default_rng(seed)
    args = _as_args(x)
    call = (lambda *a: f(*a))

    def plain(a):
        return np.asarray(value_of(call(*(_scalarize(t) for t in a))), dtype=float)

    y0 = plain(args)
    worst_abs = 0.0
    worst_rel = 0.0
    passed = True
    details = []
    value_err = 0.0
    for _ in range(directions):
        u = rng.standard_normal(y0.shape)
        vs = [rng.standard_normal(a.shape) for a in args]
        norm = np.sqrt(sum(float(np.sum(v * v)) for v in vs)) or 1.0
        vs = [v / norm for v in vs]
        y_ad, gs = vjp(call, *(_scalarize(a) for a in args),
                       cotangent=_scalarize(u))
        value_err = max(value_err, float(np.max(np.abs(np.asarray(value_of(y_ad)) - y0),
                                                initial=0.0)))
        ad = sum(float(np.sum(np.asarray(value_of(g)) * v)) for g, v in zip(gs, vs))

        def phi(t):
            return float(np.sum(u * plain([a + t * v for a, v in zip(args, vs)])))

        fd = _richardson(phi, h)
        err = abs(ad - fd)
        scale = max(abs(ad), abs(fd))
        rel = err / scale if scale > 0 else err
        ok = err <= atol + rtol * scale
        passed = passed and ok and np.isfinite(ad) and np.isfinite(fd)
        worst_abs = max(worst_abs, err)
        worst_rel = max(worst_rel, rel)
        details.append({"ad": ad, "fd": fd, "abs_err": err, "rel_err": rel})
    if value_err > 1e-12 * max(1.0, float(np.max(np.abs(y0), initial=0.0))):
        passed = False
    return GradCheck(worst_abs, worst_rel, bool(passed), value_err, details)


def assert_grad(f, x, **kwargs):
    """:func:`check_grad`, raising ``AssertionError`` with the numbers if it fails."""
    return _passed(check_grad(f, x, **kwargs), "gradient", "per direction ")


def _passed(r, what, details=""):
    """``r`` if its check passed; else the ``AssertionError`` with its numbers (the one
    failure message of the ``assert_*`` checks; ``details`` names what
    ``r.details`` holds)."""
    if not r.passed:
        raise AssertionError(f"{what} check failed: max abs err {r.max_abs_err:.3g}, "
                             f"max rel err {r.max_rel_err:.3g}, value err "
                             f"{r.value_err:.3g}; {details}{r.details}")
    return r


def _richardson(phi, h):
    d1 = (phi(h) - phi(-h)) / (2 * h)
    d2 = (phi(h / 2) - phi(-h / 2)) / h
    return (4 * d2 - d1) / 3


def check_jvp(f, x, *, directions=3, h=1e-4, rtol=1e-6, atol=1e-8, seed=0):
    """Compare forward mode with central differences, and vector mode with single mode.

    For random directions ``v`` (jointly over the arguments when ``x`` is a tuple),
    ``jvp`` of ``f`` must match the Richardson central difference of ``f`` along
    ``v``; a batch of all directions at once (vector mode) must match the single
    ones, and the traced value must match the plain one.
    """
    from .functional import _forward
    rng = np.random.default_rng(seed)
    args = _as_args(x)
    multi = isinstance(x, tuple)
    # pack the arguments into one flat vector so a single trace perturbs all of them
    sizes = [a.size for a in args]
    shapes = [a.shape for a in args]
    flat = np.concatenate([a.ravel() for a in args]) if args else np.zeros(0)

    def unpack(z):
        from .extend import reshape        # (the core primitive math re-exports)
        out, start = [], 0
        for n, s in zip(sizes, shapes):
            piece = z[start:start + n]
            out.append(reshape(piece, s))
            start += n
        return out

    def g(z):
        return f(*unpack(z)) if multi else f(unpack(z)[0])

    def plain(z):
        parts, start = [], 0
        for n, s in zip(sizes, shapes):
            parts.append(_scalarize(z[start:start + n].reshape(s)))
            start += n
        return np.asarray(value_of(f(*parts) if multi else f(parts[0])), dtype=float)

    y0 = plain(flat)
    vs = rng.standard_normal((directions, flat.size))
    vs /= np.linalg.norm(vs, axis=1, keepdims=True) + (flat.size == 0)
    worst_abs = worst_rel = value_err = 0.0
    passed = True
    details = []
    singles = []
    for v in vs:
        y, t = _forward(g, flat, v)
        value_err = max(value_err, float(np.max(np.abs(np.asarray(value_of(y)) - y0),
                                                initial=0.0)))
        t = np.asarray(value_of(t), dtype=float)
        singles.append(t)
        fd = np.asarray(_richardson(lambda s: plain(flat + s * v), h))
        err = float(np.max(np.abs(t - fd), initial=0.0))
        scale = float(np.max(np.maximum(np.abs(t), np.abs(fd)), initial=0.0))
        ok = bool(np.all(np.abs(t - fd) <= atol + rtol * np.maximum(np.abs(t), np.abs(fd))))
        passed = passed and ok and bool(np.all(np.isfinite(t)))
        worst_abs = max(worst_abs, err)
        worst_rel = max(worst_rel, err / scale if scale > 0 else err)
        details.append({"abs_err": err})
    _, tb = _forward(g, flat, vs, (directions,))
    tb = np.asarray(value_of(tb), dtype=float)
    batch_err = float(np.max(np.abs(tb - np.stack(singles)), initial=0.0))
    if batch_err > 1e-12 * max(1.0, float(np.max(np.abs(tb), initial=0.0))):
        passed = False
        details.append({"vector_mode_err": batch_err})
    if value_err > 1e-12 * max(1.0, float(np.max(np.abs(y0), initial=0.0))):
        passed = False
    return GradCheck(worst_abs, worst_rel, bool(passed), value_err, details)


def check_hessian(f, x, *, h=1e-4, rtol=1e-6, atol=1e-7):
    """Compare the forward-over-reverse Hessian of scalar ``f`` at the 1-D point ``x``
    with central differences of the reverse gradient (and its symmetry)."""
    from .functional import grad, hessian
    x = np.asarray(x, dtype=float)
    H = np.asarray(value_of(hessian(f)(x)), dtype=float)
    g = grad(f)
    n = x.size
    fd = np.empty((n, n))
    for i in range(n):
        e = np.zeros(n)
        e[i] = 1.0
        fd[i] = _richardson(lambda s: np.asarray(g(x + s * e), dtype=float), h)
    err = np.abs(H - fd)
    scale = np.maximum(np.abs(H), np.abs(fd))
    passed = bool(np.all(err <= atol + rtol * scale)) and bool(np.all(np.isfinite(H)))
    sym = float(np.max(np.abs(H - H.T), initial=0.0))
    passed = passed and sym <= 1e-10 * max(1.0, float(np.max(np.abs(H), initial=0.0)))
    mx = float(np.max(err, initial=0.0))
    rel = float(np.max(err / np.where(scale > 0, scale, 1.0), initial=0.0))
    return GradCheck(mx, rel, passed, 0.0, [{"symmetry_err": sym}])


def assert_jvp(f, x, **kwargs):
    """:func:`check_jvp`, raising ``AssertionError`` with the numbers if it fails."""
    return _passed(check_jvp(f, x, **kwargs), "forward-mode")


def assert_hessian(f, x, **kwargs):
    """:func:`check_hessian`, raising ``AssertionError`` if it fails."""
    return _passed(check_hessian(f, x, **kwargs), "Hessian")
