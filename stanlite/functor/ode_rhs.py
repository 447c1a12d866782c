"""Right-hand sides of ODE systems: the user's ``f`` and the systems derived from it.

An :class:`OdeRHS` wraps ``F(t, y, *args)`` written in stanlite operations, so that
it can be called on plain values (to integrate) *and* on traced values (so the rules
of :mod:`.ode` can differentiate it again). On plain values it also provides what
the integrators and the sensitivity systems need, computed by AD of ``F`` on one
fresh recording per call (no finite differences anywhere):

* ``value``      - ``F`` itself, its shape checked;
* ``jacobians``  - ``F``, ``J_y = dF/dy`` and ``J_p = dF/dp`` for chosen arguments
  ``p``, by one recording and one reverse sweep per state (row ``i`` of both is the
  gradient of ``F_i``); cheap when the state is small, whatever ``p``'s size;
* ``vjp``        - ``F`` and ``lambda^T [J_y, J_p]`` in one sweep (the adjoint method);
* ``tangent``    - ``F`` and ``V J_y^T + sum_j D_j J_pj^T``: the right-hand side of the
  tangent (variational) equations for a batch of directions ``V`` in ``y`` and
  ``D_j`` in the arguments. Small states use the Jacobians above; larger ones one
  forward-mode pass with vector tangents (the whole batch rides on one evaluation
  of ``F``), which never forms ``J``.

:class:`TangentRHS` is the derived system of :mod:`.ode`: the state ``y`` stacked
with ``k`` tangent copies ``v_1..v_k``,

    y'   = F(t, y, p),
    v_b' = J_y(t, y, p) v_b + J_p(t, y, p) d_b        (b = 1..k),

whose arguments are ``p`` followed by the directions ``d`` of the perturbed ones.
Its traced form (``TangentRHS.F``) is one forward-mode evaluation of the parent's
``F`` on dual numbers, written in stanlite operations, so a tangent system is an
ODE like any other: the super node can differentiate through it again, which is how
second derivatives (Hessians through a solve) come out (see :mod:`.ode`).

Compiled right-hand sides (the default where numba is present): the user's ``f`` is
recorded once per data and lowered to the compiled tape interpreter
(:mod:`.ode_compiled`); ``value``, ``jacobians``, ``vjp``, ``jac`` and the tangent
system's ``value`` are then one numba call each (~2-4 us for a small system), equal to
the tape's numbers to rounding, with guards, re-recording and spot checks as
``sl.compile``. Where ``f`` does not lower (a primitive without an interpreter rule, a
``value_of`` read), or ``STANLITE_BACKEND=python``, the routes below are used.

Retaping: once the user's ``f`` has been differentiated often enough with the same
data, its Jacobian rows come from a compiled recording (``sl.compile``) shared by
later solves, at a fraction of the cost of recording and sweeping at each right-hand
side (see ``RETAPE_AFTER`` below; the same numbers bit for bit under the Python
replay). ``RETAPE_AFTER = None`` turns both off: f on the eager tape.
"""

import threading
import warnings
from collections import OrderedDict

import numpy as np

from ..autodiff.compile import CompileWarning, compile
from ..autodiff.dual import Dual, forward_scope
from ..autodiff.tape import gc_paused_nested, sweep, sweep_rows
from ..autodiff.var import Box, Var, make_leaf, shape_of
from ..errors import DifferentiationError, ModelError
from ..math.reductions import sum as _sum
from ..math.structure import concatenate, reshape, stack
from . import ode_compiled as _oc

__all__ = ["OdeRHS", "TangentRHS", "forward_tangent"]

# Reverse sweeps (one per state) or one vector-mode forward pass? Both cost in
# proportion to the number of operations of f; a forward operation carries a whole
# batch of tangents (numpy arrays even when f works on scalars), a reverse sweep
# only scalars or arrays of the node's size. Measured on the sensitivity right-hand
# side of small systems: f written on scalars (y[0], y[1], ...; 3 states, 7
# directions) costs 130 us by sweeps against 270 us forward; f written on vectors
# (A @ y - y**3, 4 states, 20 directions) 300 us by sweeps against 130 us forward.
# _choose tells the two kinds apart from the first recording.
REVERSE_MAX_N_SCALAR = 8
REVERSE_MAX_N_VECTOR = 2
# A derived system larger than this gets a sparse (block-diagonal) Jacobian for BDF.
_SPARSE_FROM = 80

_F64 = np.dtype(np.float64)


def _closure_error(name):
    return DifferentiationError(
        f"{name}: f returned a traced value although t, y and the arguments were "
        "plain: it uses a traced value that is not one of its arguments (a closure, "
        "or one held inside a dict or an object). Pass every parameter f depends on "
        "as an argument after ts, so that its derivative is computed")



def unpack_arguments(x, args, n, positions, shapes, sizes):
    """The right-hand side's arguments with the float ones read from the flat input
    ``x = (t, y[:n], p...)``: ``args`` with position ``positions[k]`` replaced by its
    piece of ``x`` (shape ``shapes[k]``, ``sizes[k]`` values). -> (arguments, offset
    of what follows the parameters in ``x``)."""
    a = list(args)
    off = 1 + n
    for j, s, m in zip(positions, shapes, sizes):
        a[j] = x[off] if s == () else reshape(x[off:off + m], s)
        off += m
    return a, off

class OdeRHS:
    """``F(t, y, *args)`` (stanlite operations) with plain-value evaluators."""

    __slots__ = ("F", "n", "name", "root", "_tangents", "_forward", "_retaped", "_cm")

    def __init__(self, F, n, name, root=None):
        self.F = F
        self.n = n
        self.name = name
        self.root = self if root is None else root     # the user's system
        self._tangents = {}
        self._retaped = {}
        self._cm = None        # (args, compiled evaluator, its inputs p): see _compiled
        # use the forward pass for tangents and Jacobians? None: not decided yet
        # (decided by the first recording, deterministically: see _choose)
        self._forward = None if n > REVERSE_MAX_N_VECTOR else False

    def __repr__(self):
        return f"<{type(self).__name__} {self.name} n={self.n}>"

    # -- output checking ---------------------------------------------------------------
    def state(self, out):
        """``out`` as a length-``n`` vector (plain or traced), or a ``ModelError``."""
        n = self.n
        t = type(out)
        if t is np.ndarray:
            if out.shape == (n,):
                return out if out.dtype == _F64 else out.astype(float)
        elif isinstance(out, Box):
            if out.shape == (n,):
                return out
        elif t is list or t is tuple:
            if len(out) == n:
                if any(isinstance(o, Box) for o in out):
                    if all(shape_of(o) == () for o in out):
                        return stack(list(out))
                else:
                    try:
                        a = np.asarray(out, dtype=float)
                    except (TypeError, ValueError):
                        a = None
                    if a is not None and a.shape == (n,):
                        return a
        raise ModelError(
            f"{self.name}: f(t, y, ...) must return dy/dt as a vector of length {n} "
            f"(the length of y0); it returned {_describe(out)}")

    # -- plain evaluations -------------------------------------------------------------
    def _compiled(self, t, y, args):
        """``(evaluator, p)``: the user's f compiled for these arguments
        (:mod:`.ode_compiled`), or None (not yet, not lowerable, turned off)."""
        m = self._cm
        if m is None or m[0] is not args:
            if self.root is not self or _oc.COMPILE_AFTER is None:
                return None
            c = _oc.evaluator(self, t, y, args)
            if c is None:
                return None
            m = self._cm = (args, c, c.params(args))
            # beside the retaped rows of these arguments (the same role, compiled)
            self._retaped[("compiled",) + tuple(map(id, args))] = [c, args, m[2]]
            if self._forward is None and c.forward_pays is not None:
                self._forward = c.forward_pays
        c = m[1]
        return (c, m[2]) if c.fallback is None else None

    def value(self, t, y, args):
        cp = self._compiled(t, y, args)
        if cp is not None:
            f = cp[0].value(t, y, cp[1])
            if f is not None:
                return f
        out = self.F(t, y, *args)
        if type(out) is np.ndarray and out.shape == (self.n,) and out.dtype == _F64:
            return out
        out = self.state(out)
        if isinstance(out, Box):
            raise _closure_error(self.name)
        return out

    def jacobians(self, t, y, args, mask):
        """``(F, J_y, [J_pj for j in mask])`` at plain ``(t, y, args)``: one recording
        and one reverse sweep per state; ``J_pj`` has shape ``(n, size of args[j])``."""
        cp = self._compiled(t, y, args)
        if cp is not None and cp[0].covers(mask):
            r = cp[0].jacobian(t, y, cp[1])
            if r is not None:
                f, J = r
                n = self.n
                return f, J[:, 1:1 + n], cp[0].split(J[:, 1 + n:], mask)
        # (retaped only once the first recording has chosen sweeps over the forward
        # pass, see _choose: n replays cost n times one)
        rt = self._retape(t, y, args, mask) if self._forward is False else None
        if rt is not None:
            r = rt[0].jacobians(t, y, rt[1])
            if r is not None:
                return r
        n = self.n
        with gc_paused_nested() as tape:
            yl, leaves, out = self._record(tape, t, y, args, mask)
            Jy = np.zeros((n, n))
            Jp = [np.zeros((n, _size(leaf.value))) for leaf in leaves]
            if not (type(out) is Var and out.tape is tape):
                if isinstance(out, Box):
                    raise _closure_error(self.name)
                return out, Jy, Jp            # F depends on neither y nor p
            fval = out.value
            if isinstance(fval, Box):
                raise _closure_error(self.name)
            nodes = tape.nodes
            if self._forward is None:
                self._choose(nodes)
            for i, (gy, *gp) in sweep_rows(tape, nodes, out, [yl] + leaves, n):
                if gy is not None:
                    Jy[i] = gy
                for g, J in zip(gp, Jp):
                    if g is not None:
                        J[i] = g.ravel() if type(g) is np.ndarray else g
        return fval, Jy, Jp

    def _record(self, tape, t, y, args, mask):
        """``F(t, y, *args)`` recorded on ``tape``, ``y`` and the arguments in ``mask``
        as its leaves; -> (y's leaf, the arguments' leaves, the output)."""
        yl = _leaf(y, tape)
        a = list(args)
        leaves = []
        for j in mask:
            leaf = a[j] = _leaf(args[j], tape)
            leaves.append(leaf)
        return yl, leaves, self.state(self.F(t, yl, *a))

    def vjp(self, t, y, args, mask, lam):
        """``(F, lam^T J_y, [lam^T J_pj (flat) for j in mask])`` in one reverse sweep."""
        cp = self._compiled(t, y, args)
        if cp is not None and cp[0].covers(mask):
            r = cp[0].vjp(t, y, cp[1], np.asarray(lam, dtype=float))
            if r is not None:
                f, g = r
                n = self.n
                return f, g[1:1 + n], cp[0].split(g[1 + n:], mask)
        rt = self._retape(t, y, args, mask)
        if rt is not None:
            r = rt[0].vjp(t, y, rt[1], lam)
            if r is not None:
                return r
        with gc_paused_nested() as tape:
            yl, leaves, out = self._record(tape, t, y, args, mask)
            if not (type(out) is Var and out.tape is tape):
                if isinstance(out, Box):
                    raise _closure_error(self.name)
                return out, np.zeros(self.n), [np.zeros(_size(leaf.value))
                                               for leaf in leaves]
            if isinstance(out.value, Box):
                raise _closure_error(self.name)
            out.adj = np.array(lam, dtype=float)
            sweep(tape.nodes)
            gy = yl.adj
            gy = np.zeros(self.n) if gy is None else np.array(gy, dtype=float)
            gp = [np.zeros(_size(leaf.value)) if leaf.adj is None
                  else np.ravel(leaf.adj) for leaf in leaves]
            return out.value, gy, gp

    def _retape(self, t, y, args, mask):
        """``(evaluator, flattened parameters)`` of the retaped f for these arguments,
        or None (evaluate eagerly; see ``_retaped_rows``)."""
        if RETAPE_AFTER is None or self.root is not self:
            return None
        key = (tuple(mask),) + tuple(map(id, args))
        e = self._retaped.get(key)
        if e is None:
            # the arguments are kept with their key, so that their ids stay unique
            e = self._retaped[key] = [None, args, None]
        rt = e[0]
        if rt is None:
            rt = _retaped_rows(self, t, y, args, mask)
            if rt is None:
                return None
            e[0] = rt
            e[2] = rt.params(args)
        return (rt, e[2]) if rt.ok else None

    def _choose(self, nodes):
        """Decide between reverse sweeps and the forward pass from one recording of
        f: scalar code (most nodes hold floats) favours sweeps for more states."""
        self._forward = _prefers_forward(self.n, nodes)

    def jac(self, t, y, args):
        """``J_y`` at plain values (BDF's Newton iterations)."""
        n = self.n
        cp = self._compiled(t, y, args)
        if cp is not None:
            r = cp[0].jacobian(t, y, cp[1])
            if r is not None:
                return r[1][:, 1:1 + n]
        if self._forward:
            try:
                _, dV = forward_tangent(self, t, y, args, (), np.eye(n), (), n)
                return np.asarray(dV).T        # row k of dV is J_y e_k
            except DifferentiationError:
                self._forward = False          # a primitive without a forward rule
        return self.jacobians(t, y, args, ())[1]

    def tangent(self, t, y, args, mask, V, D):
        """``(F, dV)`` with ``dV = V J_y^T + sum_j D_j J_pj^T`` at plain values; ``V``
        is ``(k, n)``, ``D[j]`` is ``(k,) + shape(args[mask[j]])``."""
        if self._forward:
            try:
                return forward_tangent(self, t, y, args, mask, V, D, V.shape[0])
            except DifferentiationError:
                self._forward = False          # a primitive without a forward rule
        f, Jy, Jp = self.jacobians(t, y, args, mask)
        dV = V @ Jy.T
        k = V.shape[0]
        for d, J in zip(D, Jp):
            dV += np.reshape(d, (k, -1)) @ J.T
        return f, dV

    # -- derived systems ---------------------------------------------------------------
    def tangent_system(self, k, mask, nargs):
        """The system of ``y`` and ``k`` tangent copies (cached per ``(k, mask)``)."""
        key = (k, tuple(mask), nargs)
        s = self._tangents.get(key)
        if s is None:
            s = self._tangents[key] = TangentRHS(self, k, tuple(mask), nargs)
        return s


def _prefers_forward(n, nodes):
    scalars = sum(1 for node in nodes if type(node.value) is float)
    limit = REVERSE_MAX_N_SCALAR if 2 * scalars >= len(nodes) else REVERSE_MAX_N_VECTOR
    return n > limit


def forward_tangent(rhs, t, y, args, mask, V, D, k):
    """``(F, tangent)`` of ``rhs.F`` in ``k`` directions at once (vector-mode forward):
    ``y`` perturbed by the rows of ``V`` and ``args[mask[j]]`` by ``D[j]``. Works on
    plain and traced values alike (a forward trace above every level in use)."""
    a = list(args)
    with forward_scope((k,)) as tr:
        for j, d in zip(mask, D):
            a[j] = Dual(args[j], d, tr)
        out = rhs.state(rhs.F(t, Dual(y, V, tr), *a))
        if isinstance(out, Dual) and out.tape is tr:
            val, tan = out.value, out.tangent
        else:
            val, tan = out, np.zeros((k, rhs.n))
    if isinstance(val, Box) and not any(isinstance(x, Box) for x in (t, y, V, *args, *D)):
        raise _closure_error(rhs.name)
    return val, tan


class TangentRHS(OdeRHS):
    """``[y, v_1..v_k]' = [F, J_y v_b + J_p d_b]``: the parent system with ``k``
    tangent copies; arguments are the parent's ``nargs`` followed by one direction
    array ``(k,) + shape(p)`` per perturbed argument (``mask``)."""

    __slots__ = ("parent", "k", "mask", "nargs")

    def __init__(self, parent, k, mask, nargs):
        N = parent.n
        self.parent = parent
        self.k = k
        self.mask = mask
        self.nargs = nargs

        def F(t, z, *allargs):
            y = z[:N]
            V = reshape(z[N:], (k, N))
            val, tan = forward_tangent(parent, t, y, allargs[:nargs], mask, V,
                                       allargs[nargs:], k)
            return concatenate([val, reshape(tan, (k * N,))])

        super().__init__(F, N * (1 + k), parent.name, parent.root)

    def _compiled_tangent(self, t, z, allargs):
        """``(allargs, evaluator, p, D)``: the parent's compiled f and the directions
        as one (k, P) array, for one solve's arguments; or None."""
        m = self._cm
        if m is not None and m[0] is allargs:
            return m if m[1] is not None and m[1].fallback is None else None
        parent, nargs = self.parent, self.nargs
        if parent.root is not parent or _oc.COMPILE_AFTER is None:
            return None
        args = allargs[:nargs]
        c = _oc.evaluator(parent, t, z[:parent.n], args)
        if c is None:
            return None                       # not yet compiled: ask again next time
        D = c.directions(self.mask, allargs[nargs:], self.k)
        if D is None or not c.tangent_pays(D):
            c = None
        m = self._cm = (allargs, c, None if c is None else c.params(args), D)
        return m if c is not None else None

    def value(self, t, z, allargs):
        cm = self._compiled_tangent(t, z, allargs)
        if cm is not None:
            r = cm[1].tangent(t, z, cm[2], cm[3], self.k)
            if r is not None:
                return r
        N = self.parent.n
        m = self.nargs
        f, dV = self.parent.tangent(t, z[:N], allargs[:m], self.mask,
                                    z[N:].reshape(self.k, N), allargs[m:])
        if isinstance(f, Box) or isinstance(dV, Box):
            raise _closure_error(self.name)
        out = np.empty(self.n)
        out[:N] = f
        out[N:] = np.ravel(dV)
        return out

    def jac(self, t, z, allargs):
        """Block-diagonal approximation ``I (x) J_y``: the exact Jacobian adds blocks
        of second derivatives below the diagonal. The Newton iterations of BDF only
        need an approximation (it changes their convergence rate, not the solution):
        CVODES' simultaneous-corrector approximation."""
        N = self.parent.n
        cm = self._compiled_tangent(t, z, allargs)
        r = None if cm is None else cm[1].jacobian(t, z[:N], cm[2])
        if r is not None:
            Jy = r[1][:, 1:1 + N]
        else:
            Jy = self.parent.jac(t, z[:N], allargs[:self.nargs])
        if self.n > _SPARSE_FROM:
            import scipy.sparse as _sparse    # first use only: not at import stanlite
            return _sparse.kron(_sparse.identity(1 + self.k, format="csc"),
                                _sparse.csc_matrix(Jy), format="csc")
        return np.kron(np.eye(1 + self.k), Jy)


# --------------------------------------------------------------------------------------
# retaping the right-hand side
# --------------------------------------------------------------------------------------
# A solve evaluates f's Jacobians hundreds of times at points that differ only in
# (t, y), and a sampler solves the same system at every step with new parameters.
# Once f has been evaluated RETAPE_AFTER times with the same data, it is recorded once
# more and compiled (sl.compile: the tape as straight-line Python, replayed with the
# eager tape's numbers bit for bit, guards on value-dependent branches such as
# ``if t > 0`` that re-record or fall back to the eager tape when they fail): a replay
# costs a fraction of a recording plus a sweep. The compiled function is
#     h(x) = sum(f(t, y, p) * w),     x = (t, y, p, w),
# whose gradient gives the row w^T [J_y, J_p] and, in the w slot, f itself; p are the
# traced arguments (inputs of the program). The other arguments - data - become
# constants of the program, so the program is shared by the solves that pass the same
# f and the same data: keyed by f's identity, the traced arguments' shapes, and the
# data's values (numbers, tuples of numbers) or identities (arrays and other objects,
# kept alive by the cache so that their ids are not reused). As for sl.compile and
# the models' retaped gradients, f must be a pure function of its arguments, and data
# arrays must not be modified in place between solves. None turns retaping off.
RETAPE_AFTER = 64
_CACHE_SIZE = 32
_cache = OrderedDict()          # key -> [evaluations, _Retaped or None, kept objects]
_cache_lock = threading.Lock()

# a retaped right-hand side that falls back to the eager tape needs no warning: the
# evaluator notices (``fallback``) and uses its own eager path
warnings.filterwarnings("ignore", message=r"sl\.compile\(.*_ode_rhs_rows\)",
                        category=CompileWarning)


def _data_key(a):
    """A hashable stand-in for a data argument: its value if it is an immutable
    number or tuple of numbers, else its identity."""
    t = type(a)
    if t is float or t is int or t is bool or t is str or a is None:
        return (t, a)
    if isinstance(a, (np.floating, np.integer)):
        return (t, a.item())
    if t is tuple and all(type(e) in (float, int) for e in a):
        return (t, a)
    return ("id", id(a))


def _retaped_rows(rhs, t, y, args, mask):
    """The shared compiled evaluator for (f, data), once it has been asked for
    RETAPE_AFTER times; None before (the caller evaluates eagerly)."""
    key = (rhs.F, rhs.n, tuple(mask)) + tuple(
        ("p", shape_of(a)) if j in mask else _data_key(a) for j, a in enumerate(args))
    with _cache_lock:
        e = _cache.get(key)
        if e is None:
            e = _cache[key] = [0, None, (rhs.F,) + tuple(args)]
            if len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
        else:
            _cache.move_to_end(key)
        e[0] += 1
        if e[1] is None and e[0] >= RETAPE_AFTER:
            e[1] = _Retaped(rhs, t, y, args, mask)
        return e[1]


class _Retaped:
    """Rows of [J_y, J_p] (and f) by a compiled recording, for fixed arguments."""

    __slots__ = ("vg", "n", "P", "sizes", "mask", "ok")

    def __init__(self, rhs, t, y, args, mask):
        n = self.n = rhs.n
        F, state = rhs.F, rhs.state
        shapes = [shape_of(args[j]) for j in mask]
        self.sizes = sizes = [_size(args[j]) for j in mask]
        self.P = sum(sizes)
        self.mask = mask
        p = self.params(args)

        def _ode_rhs_rows(x):
            a, off = unpack_arguments(x, args, n, mask, shapes, sizes)
            return _sum(state(F(x[0], x[1:1 + n], *a)) * x[off:])

        self.ok = False
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", CompileWarning)
                x = self._x(t, y, p, np.ones(n))
                vg = compile(_ode_rhs_rows, x)
                # the first replay at a new point is checked against the eager tape:
                # do it now, where a fallback is quiet
                vg(self._x(t, y * (1.0 + 1e-9), p, np.ones(n)))
        except CompileWarning:
            return                                    # warnings as errors
        self.vg = vg
        self.ok = vg.fallback is None

    def params(self, args):
        """The traced arguments, flattened: the program's inputs after t and y."""
        if not self.mask:
            return _EMPTY
        return np.concatenate([np.ravel(args[j]) for j in self.mask])

    @staticmethod
    def _x(t, y, p, w):
        return np.concatenate(((float(t),), y, p, w))

    def _call(self, x):
        try:
            r = self.vg(x)
        except CompileWarning:                        # warnings as errors
            r = None
        if self.vg.fallback is not None:
            self.ok = False
            return None
        return r

    def jacobians(self, t, y, p):
        n, P = self.n, self.P
        Jy = np.empty((n, n))
        Jpf = np.empty((n, P))
        f = None
        for i in range(n):
            w = np.zeros(n)
            w[i] = 1.0
            r = self._call(self._x(t, y, p, w))
            if r is None:
                return None
            g = r[1]
            Jy[i] = g[1:1 + n]
            Jpf[i] = g[1 + n:1 + n + P]
            if f is None:
                f = g[1 + n + P:]
        return f, Jy, self._split(Jpf)

    def vjp(self, t, y, p, lam):
        n, P = self.n, self.P
        r = self._call(self._x(t, y, p, np.asarray(lam, dtype=float)))
        if r is None:
            return None
        g = r[1]
        gp = g[1 + n:1 + n + P]
        out, off = [], 0
        for m in self.sizes:
            out.append(gp[off:off + m])
            off += m
        return g[1 + n + P:], g[1:1 + n], out

    def _split(self, Jpf):
        out, off = [], 0
        for m in self.sizes:
            out.append(Jpf[:, off:off + m])
            off += m
        return out


_EMPTY = np.zeros(0)


def _leaf(value, tape):
    """An independent variable on a fresh tape (values here are already floats or
    float arrays: the integrator's state or a traced input's value)."""
    if type(value) is not float and type(value) is not np.ndarray:
        return Var(value, tape)
    return make_leaf(value, tape)


def _size(v):
    return v.size if type(v) is np.ndarray else 1




def _describe(out):
    if isinstance(out, Box):
        return f"a traced value of shape {out.shape}"
    if isinstance(out, (list, tuple)):
        return f"a {type(out).__name__} of length {len(out)}"
    try:
        return f"shape {np.shape(out)}"
    except Exception:   # noqa: BLE001 - only describing it
        return repr(type(out))
