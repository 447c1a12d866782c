"""Graph passes over a lowered program, before it is assembled (:func:`.program.lower`).

A recording of a Stan-style loop is big and repetitive: the coal-mining change point
written with loops records 12,544 scalar ``poisson_lpmf`` calls that compute only 224
distinct values, and sums them one ``+`` at a time. Run as recorded, that costs 25,000
instructions a gradient; the passes below make it ~700 (../shared/reviews/
compiled-prototype.md, section 2: generic passes bring such a program to ~1.5x its
vectorised form). Each pass is generic, keeps the program's meaning exactly (only the
order of additions changes: results agree to rounding), and works on the Lowerer's
rows, so every primitive's lowering benefits without knowing about it:

1. **CSE by hash-consing**: a row with the same op, the same argument slots and the
   same integer fields as an earlier row is dropped and its readers read the earlier
   row's output (for GATHER, the same index table counts as the same).
2. **n-ary sums**: a tree of scalar ADD rows (and SUMs of a GATHER) whose inner
   results have no other reader becomes one SUMN over a table of its leaves: one
   instruction instead of one per ``+``, forward and backward.
3. **grouped densities**: inside a SUMN, scalar density terms of data with the same
   parameter slots become one row: Poisson terms their sufficient statistics,
   POISSON_SS = ``sum(n) log(lambda) - k lambda - sum lgamma(n + 1)``, as a vectorised
   ``poisson_lpmf`` computes it; the others (normal, ...) one vector row of their op
   over the data (the loop ``y[n] ~ normal(mu, sigma)`` as the vectorised call).
4. **dead rows** (no reader left, not a guard, not the output) are removed.

Rows of an op the passes do not know (a newer op) switch them off for that program:
they must know which fields of a row are offsets to rewrite them. ``STANLITE_VM_PASSES=0``
in the environment switches them off too (to compare, or to debug a lowering).
"""

import os

import numpy as np

from . import opcodes as O

__all__ = ["optimise", "enabled"]

_CONST = 1 << 40            # program._CONST: constants' provisional offsets start here

_BINARY = frozenset(range(O.ADD, O.LSE2 + 1)) | frozenset(range(O.ATAN2, 140))
_UNARY = frozenset(range(O.NEG, O.PHI + 1))
_ONE_ARG = frozenset((O.COPY, O.SUM, O.LSE, O.SEGSUM, O.CUMSUM, O.EXTREME, O.SOFTMAX,
                      O.LOG_SOFTMAX, O.LSE_AXIS))
_DENSITIES = frozenset((O.NORMAL, O.CAUCHY, O.LOGNORMAL, O.STD_NORMAL, O.EXPONENTIAL,
                        O.POISSON, O.POISSON_LOG, O.GAMMA, O.BETA, O.STUDENT_T,
                        O.BERNOULLI_LOGIT, O.BINOMIAL_LOGIT, O.RAYLEIGH, O.LOGLOGISTIC))
_GUARDS = frozenset((O.GUARD_POSITIVE, O.GUARD_BOUNDS, O.CHECK_POSITIVE, O.GUARD_CMP,
                     getattr(O, "CHECK_ARG", O.CHECK_POSITIVE)))
_SCALAR_OUT = _DENSITIES | {O.SUM, O.LSE, O.DOT, O.SUMN, O.EXTREME, O.MVN_CHOLESKY,
                            O.POISSON_SS}
# rows that may be shared: pure functions of their argument slots and integer fields
# (MVN_CHOLESKY writes a scratch region of its own: never shared)
_SHAREABLE = (_BINARY | {O.LOG_MIX} | _UNARY | _ONE_ARG | _DENSITIES
              | {O.GATHER, O.MATMUL, O.DOT, O.POISSON_SS, O.GP_EXP_QUAD})
_KNOWN = _SHAREABLE | _GUARDS | {O.SUMN, O.MVN_CHOLESKY, O.CHOLESKY}


def enabled():
    return os.environ.get("STANLITE_VM_PASSES", "1").strip().lower() not in (
        "0", "false", "no", "off")


def _reads(row):
    """The V offsets a row reads as (field, ...) of A/B/C: its slot arguments."""
    op = row[O.OP]
    if op in _UNARY or op in _ONE_ARG or op == O.CHOLESKY:
        return (O.A,)
    if op in _BINARY or op in (O.MATMUL, O.DOT):
        return (O.A, O.B)
    if op == O.POISSON_SS:
        return (O.B,)
    if op in (O.GATHER, O.SUMN):
        return ()
    if op in _GUARDS:
        return (O.A, O.B) if op in (O.GUARD_BOUNDS, O.GUARD_CMP) else (O.A,)
    return (O.A, O.B, O.C)          # LOG_MIX, densities, MVN_CHOLESKY


def _table(row):
    """(offset, length) of the row's table of V offsets in aux, or None."""
    op = row[O.OP]
    if op == O.GATHER:
        return row[O.X1], row[O.N]
    if op == O.SUMN:
        return row[O.X1], row[O.X2]
    return None


def _out_size(row):
    op = row[O.OP]
    if op in _GUARDS:
        return 0
    return 1 if op in _SCALAR_OUT else row[O.N]


class _Graph:
    """Rows, their flat aux table and the owner (producing row) of each node slot."""

    def __init__(self, L):
        self.L = L
        # tuples (hashable keys); rows the passes make are lists until finish()
        self.rows = [r if type(r) is tuple else tuple(r) for r in L.rows]
        self.aux = (np.concatenate(L.aux) if L.aux else np.zeros(0, dtype=np.int64))
        self.top = L.top
        self.extra = []              # tables appended by the passes

    def table(self, row):
        t = _table(row)
        if t is None:
            return None
        off, n = t
        if off >= self.aux.size:
            return self.extra_table(off, n)
        return self.aux[off:off + n]

    def extra_table(self, off, n):
        base = self.aux.size
        for arr in self.extra:
            if off == base:
                return arr[:n]
            base += arr.size
        raise KeyError(off)

    def new_table(self, ints):
        off = self.aux.size + sum(a.size for a in self.extra)
        self.extra.append(np.asarray(ints, dtype=np.int64))
        return off

    def owners(self):
        owner = np.full(self.L.top, -1, dtype=np.int64)
        for i, row in enumerate(self.rows):
            k = _out_size(row)
            if k:
                owner[row[O.OUT]:row[O.OUT] + k] = i
        return owner

    def finish(self):
        L = self.L
        L.rows = [tuple(r) for r in self.rows]
        L.aux = [self.aux] + self.extra
        L.aux_len = sum(a.size for a in L.aux)


def optimise(L, out_off, out_size):
    """Run the passes on Lowerer ``L`` in place; -> the output's (maybe new) offset."""
    if not enabled() or not L.rows:
        return out_off
    for row in L.rows:
        if row[O.OP] not in _KNOWN:
            return out_off
    g = _Graph(L)
    out_off = _cse(g, out_off)
    _sums(g, out_off, out_size)
    _dead(g, out_off, out_size)
    g.finish()
    return out_off


# ---- 1. common subexpressions --------------------------------------------------------
def _cse(g, out_off):
    top = g.top
    rm = np.arange(top, dtype=np.int64)
    seen = {}
    kept = []
    changed = False
    for row in g.rows:
        if changed:
            fields = _reads(row)
            if row[O.OP] == O.STUDENT_T:
                fields = fields + (O.X1,)
            new = None
            for f in fields:
                v = row[f]
                if v < top and rm[v] != v:
                    if new is None:
                        new = list(row)
                    new[f] = int(rm[v])
            if new is not None:
                row = tuple(new)
            t = g.table(row)
            if t is not None:
                m = t < top
                t[m] = rm[t[m]]
        op = row[O.OP]
        if op in _SHAREABLE:
            if op == O.GATHER:
                key = (op, row[O.N], row[O.MASK], g.table(row).tobytes())
            else:
                key = row[:O.OUT] + row[O.OUT + 1:]
            hit = seen.get(key)
            if hit is not None:
                k = _out_size(row)
                o = row[O.OUT]
                rm[o:o + k] = np.arange(hit, hit + k)
                changed = True
                continue
            seen[key] = row[O.OUT]
        kept.append(row)
    g.rows = kept
    return int(rm[out_off]) if out_off < top else out_off


# ---- 2. n-ary sums (3. with grouped densities) ----------------------------------------
def _sums(g, out_off, out_size):
    rows = g.rows
    top = g.top
    owner = g.owners()
    uses = np.zeros(len(rows) + 1, dtype=np.int64)      # uses[-1]: constants, params

    def reader(v):
        return owner[v] if v < top else -1

    for row in rows:
        for f in _reads(row):
            uses[reader(row[f])] += 1
        if row[O.OP] == O.STUDENT_T:
            uses[reader(row[O.X1])] += 1
        t = g.table(row)
        if t is not None and t.size:
            inside = t[t < top]
            np.add.at(uses, owner[inside], 1)
    for v in range(out_off, out_off + out_size):
        uses[reader(v)] += 1
    terms = {}                       # row index -> its leaves (a sum to flatten)
    absorbed = set()

    def leaves(v):
        p = reader(v)
        if p >= 0 and uses[p] == 1 and p in terms:
            absorbed.add(p)
            return terms[p]
        return [v]

    for i, row in enumerate(rows):
        op = row[O.OP]
        if op == O.ADD and row[O.N] == 1:
            terms[i] = leaves(row[O.A]) + leaves(row[O.B])
        elif op == O.SUM:
            p = reader(row[O.A])
            if p >= 0 and uses[p] == 1 and rows[p][O.OP] == O.GATHER \
                    and rows[p][O.N] == row[O.X2]:
                absorbed.add(p)
                out = []
                for v in g.table(rows[p]).tolist():
                    out += leaves(v)
                terms[i] = out
    if not terms:
        return
    consts = np.concatenate(g.L.consts) if g.L.consts else np.zeros(0)
    new = []
    for i, row in enumerate(rows):
        if i in absorbed:
            continue
        t = terms.get(i)
        # a row that absorbed another (whose row is dropped above) must be rewritten,
        # whatever its number of leaves: it would read the dropped row's slot
        if t is not None and (len(t) > 2 or row[O.OP] == O.SUM
                              or t != [row[O.A], row[O.B]]):
            t = _poisson_statistics(g, rows, owner, top, consts, t, new)
            row = [0] * O.ROW
            row[O.OP], row[O.N], row[O.OUT] = O.SUMN, 1, rows[i][O.OUT]
            row[O.X1], row[O.X2], row[O.MASK] = g.new_table(t), len(t), 1
        new.append(row)
    g.rows = new


# scalar density rows of data (y a constant) that one vector row of the same op can
# replace when they share their parameters' slots: the loop body ``target +=
# normal_lpdf(y[n] | mu, sigma)`` becomes the vectorised call
_VECTORISABLE = frozenset((O.NORMAL, O.CAUCHY, O.LOGNORMAL, O.STD_NORMAL, O.EXPONENTIAL,
                           O.GAMMA, O.BETA, O.STUDENT_T, O.BERNOULLI_LOGIT,
                           O.POISSON_LOG))


def _group_key(r):
    """How a scalar density row of data groups with others, or None."""
    op = r[O.OP]
    if r[O.N] != 1 or r[O.A] < _CONST:
        return None
    if op == O.POISSON:
        return (O.POISSON_SS, r[O.B], r[O.MASK]) if r[O.X1] >= _CONST else None
    if op in _VECTORISABLE:
        if op == O.POISSON_LOG and r[O.X1] < _CONST:
            return None
        x1 = r[O.X1] if op == O.STUDENT_T else 0
        return (op, r[O.B], r[O.C], x1, r[O.MASK])
    return None


def _poisson_statistics(g, rows, owner, top, consts, terms, new):
    """Terms of one sum that are scalar density rows of data sharing their parameters
    -> one row per group (appended to ``new``): POISSON_SS for Poisson terms (sum(n)
    log(lambda) - k lambda - sum lgamma(n + 1)), else one vector row of the same op
    over the data; -> the remaining terms."""
    groups = {}
    rest = []
    for v in terms:
        p = owner[v] if v < top else -1
        r = rows[p] if p >= 0 else None
        key = _group_key(r) if r is not None else None
        if key is None:
            rest.append(v)
        else:
            groups.setdefault(key, []).append(r)
    for key, rs in groups.items():
        if len(rs) == 1:
            rest.append(rs[0][O.OUT])
            continue
        row = [0] * O.ROW
        row[O.OUT], row[O.N], row[O.MASK], row[O.B] = g.L.alloc(1), 1, rs[0][O.MASK], \
            rs[0][O.B]
        ys = np.array([consts[r[O.A] - _CONST] for r in rs])
        if key[0] == O.POISSON_SS:
            m, c = float(ys.sum()), sum(float(consts[r[O.X1] - _CONST]) for r in rs)
            row[O.OP] = O.POISSON_SS
            row[O.X1] = g.L.constant(np.array([m, float(len(rs)), c]),
                                     key=("poisson_ss", m, len(rs), c))[0]
        else:
            op = row[O.OP] = key[0]
            row[O.N] = len(rs)
            row[O.A] = g.L.constant(ys, key=("grouped", g.L.const_len))[0]
            row[O.SA] = 1
            row[O.C] = rs[0][O.C]
            if op == O.POISSON_LOG:         # lgamma(n + 1) laid out as the counts
                lg = np.array([consts[r[O.X1] - _CONST] for r in rs])
                row[O.X1] = g.L.constant(lg, key=("grouped", g.L.const_len))[0]
            elif op == O.STUDENT_T:
                row[O.X1] = rs[0][O.X1]
        new.append(row)
        rest.append(row[O.OUT])
    return rest


# ---- 4. dead rows ---------------------------------------------------------------------
def _dead(g, out_off, out_size):
    rows = g.rows
    owner = g.owners()
    top = g.L.top
    need = np.zeros(len(rows), dtype=bool)
    for v in range(out_off, out_off + out_size):
        if v < top and owner[v] >= 0:
            need[owner[v]] = True
    for i in range(len(rows) - 1, -1, -1):
        row = rows[i]
        if not (need[i] or row[O.OP] in _GUARDS):
            continue
        need[i] = True
        vs = [row[f] for f in _reads(row)]
        if row[O.OP] == O.STUDENT_T:
            vs.append(row[O.X1])
        for v in vs:
            if v < top and owner[v] >= 0:
                need[owner[v]] = True
        t = g.table(row)
        if t is not None and t.size:
            inside = t[t < top]
            p = owner[inside]
            need[p[p >= 0]] = True
    g.rows = [r for i, r in enumerate(rows) if need[i]]
