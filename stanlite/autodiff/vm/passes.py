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
in the environment switches them off too (to compare, or to debug a lowering);
``STANLITE_VM_PASSES=4`` runs passes 1-4 only. Passes 5-6 (scans, vector rows,
compaction) are described at their section below.
"""

import numpy as np

from ...config import setting, switched_off
from . import opcodes as O

__all__ = ["optimise", "enabled"]

_CONST = 1 << 40            # program._CONST: constants' provisional offsets start here

_BINARY = frozenset(range(O.ADD, O.LSE2 + 1)) | frozenset(range(O.ATAN2, 140))
_UNARY = frozenset(range(O.NEG, O.PHI + 1)) | frozenset(range(O.LAMBERT_W0, 160))
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
    return not switched_off("STANLITE_VM_PASSES")


def _all_passes():
    """``STANLITE_VM_PASSES=4``: passes 1-4 only (to compare with passes 5-6)."""
    return setting("STANLITE_VM_PASSES", "1").strip() != "4"


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
    if _all_passes() and _orderable(g.rows):
        out_off = _vectorise(g, out_off, out_size)
        out_off = _compact(g, out_off, out_size)
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
            row = _remap_row(g, row, rm, top)
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
        # a vector row of pass 5 reads a run of several rows' outputs
        for v, k in _ranges(row):
            if k > 1 and v < top:
                p = owner[v:v + k]
                need[p[p >= 0]] = True
        t = g.table(row)
        if t is not None and t.size:
            inside = t[t < top]
            p = owner[inside]
            need[p[p >= 0]] = True
    g.rows = [r for i, r in enumerate(rows) if need[i]]


# ---- 5. scans and vector rows (the rows reordered) ------------------------------------
# After passes 1-4 a Stan-style loop is still hundreds of scalar rows, each costing the
# kernels' dispatch (~20 ns a row and direction) more than its one flop, over a value
# buffer as long as the whole recording (every node kept its slot: the adjoints of all
# of them are cleared at each call). The coal-mining change point's loop form, after
# pass 3: 111 prefix sums sum_{t<s} poisson(D[t] | e) chained one ADD at a time (CSE
# shared them between the iterations over s), 111 POISSON_SS rows at l, 112 two-leaf
# sums of the two, over 25,322 slots. Passes 5-6 make that ~25 rows over ~600 slots:
#
# 5a. scans: a chain of scalar ADDs whose partial sums are read elsewhere becomes one
#     GATHER of its terms and one CUMSUM (the same additions in the same order);
# 5b. POISSON_SS rows at one rate become vector arithmetic: n log(lambda) - k lambda - c
#     for all of them at once (the value as POISSON_SS computes it, in the same order);
# 5c. vector rows: independent scalar elementwise rows of one op (two-leaf sums as
#     ADDs) become one row over their operands, read with stride 1 where they lie in a
#     run (the outputs of a row made here, constants), stride 0 where they are one
#     slot, else gathered first;
# 6.  compaction: the node slots no row writes are removed from the value buffer.
#
# The rows are then put back in an order where each comes after the rows it reads,
# between the same guards: a guard (or an argument check) is a barrier no row crosses,
# so what is computed before a failed guard stays what was computed before it.

_MIN_RUN = 4                 # fewer rows than this stay as they are
_UNORDERABLE = frozenset((O.CHOLESKY, O.MVN_CHOLESKY))    # scratch regions in X3


def _orderable(rows):
    return all(r[O.OP] not in _UNORDERABLE for r in rows)


def _ranges(row):
    """(offset, length) of each run of V the row reads (its table apart)."""
    op, n = row[O.OP], row[O.N]
    if op in _BINARY:
        return ((row[O.A], n if row[O.SA] else 1), (row[O.B], n if row[O.SB] else 1))
    if op in _UNARY:
        return ((row[O.A], n),)
    if op == O.LOG_MIX or op in _DENSITIES:
        r = ((row[O.A], n if row[O.SA] else 1), (row[O.B], n if row[O.SB] else 1),
             (row[O.C], n if row[O.SC] else 1))
        if op == O.STUDENT_T:
            r += ((row[O.X1], n if row[O.X2] else 1),)
        return r
    if op == O.COPY:
        return ((row[O.A], n if row[O.SA] else 1),)
    if op in (O.SUM, O.LSE, O.EXTREME, O.SEGSUM):
        return ((row[O.A], row[O.X2]),)
    if op == O.DOT:
        return ((row[O.A], row[O.X2]), (row[O.B], row[O.X2]))
    if op in (O.CUMSUM, O.SOFTMAX, O.LOG_SOFTMAX, O.LSE_AXIS):
        return ((row[O.A], row[O.X1] * row[O.X2] * row[O.X3]),)
    if op == O.MATMUL:
        return ((row[O.A], row[O.X1] * row[O.X2]), (row[O.B], row[O.X2] * row[O.X3]))
    if op == O.POISSON_SS:
        return ((row[O.B], 1),)
    if op == O.GP_EXP_QUAD:
        return ((row[O.A], row[O.X1] * row[O.X2]), (row[O.B], 1), (row[O.C], 1))
    if op in (O.GUARD_BOUNDS, O.GUARD_CMP):
        return ((row[O.A], 1), (row[O.B], 1))
    if op in _GUARDS:
        return ((row[O.A], n),)
    return ()                                   # GATHER, SUMN: their tables


def _row(op, n, out, a=0, sa=0, b=0, sb=0, mask=0, x1=0, x2=0, x3=0):
    row = [0] * O.ROW
    row[O.OP], row[O.N], row[O.OUT], row[O.A], row[O.SA], row[O.B], row[O.SB] = \
        op, n, out, a, sa, b, sb
    row[O.MASK], row[O.X1], row[O.X2], row[O.X3] = mask, x1, x2, x3
    return tuple(row)


def _owner_of(rows, top):
    owner = np.full(top, -1, dtype=np.int64)
    for i, row in enumerate(rows):
        k = _out_size(row)
        if k:
            owner[row[O.OUT]:row[O.OUT] + k] = i
    return owner


def _deps(g, rows, owner):
    """For each row, the set of rows whose outputs it reads."""
    top = owner.size
    deps = []
    for row in rows:
        d = set()
        for off, k in _ranges(row):
            if off < top:
                if k == 1:
                    if owner[off] >= 0:
                        d.add(int(owner[off]))
                else:
                    p = owner[off:off + k]
                    d.update(p[p >= 0].tolist())
        t = g.table(row)
        if t is not None and t.size:
            p = owner[t[t < top]]
            d.update(p[p >= 0].tolist())
        deps.append(d)
    return deps


def _segments(rows):
    """Each row's segment: the number of guards before it (a guard ends its own)."""
    seg, s = [], 0
    for row in rows:
        seg.append(s)
        if row[O.OP] in _GUARDS:
            s += 1
    return seg


class _Unordered(Exception):
    """The rewritten rows have no valid order (a cycle): the pass is not applied."""


def _reorder(g, rows, seg, prio):
    """``rows`` in an order where each follows the rows it reads, segment by segment
    (a segment's guard last), ties broken by ``prio``. -> (rows, their segments)."""
    import heapq
    owner = _owner_of(rows, g.L.top)
    deps = _deps(g, rows, owner)
    n = len(rows)
    readers = [[] for _ in range(n)]
    missing = [0] * n
    for i, d in enumerate(deps):
        for p in d:
            if seg[p] > seg[i]:
                raise _Unordered("a row reads a row of a later segment")
            if seg[p] == seg[i] and p != i:
                readers[p].append(i)
                missing[i] += 1
    by_seg = {}
    for i in range(n):
        by_seg.setdefault(seg[i], []).append(i)
    order = []
    for s in sorted(by_seg):
        members = by_seg[s]
        last = [i for i in members if rows[i][O.OP] in _GUARDS]
        heap = [(prio[i], i) for i in members if missing[i] == 0 and i not in last]
        heapq.heapify(heap)
        done = 0
        while heap:
            _, i = heapq.heappop(heap)
            order.append(i)
            done += 1
            for j in readers[i]:
                missing[j] -= 1
                if missing[j] == 0 and rows[j][O.OP] not in _GUARDS:
                    heapq.heappush(heap, (prio[j], j))
        for i in last:
            if missing[i]:
                raise _Unordered("a guard's arguments are not computed before it")
            order.append(i)
        if done + len(last) != len(members):
            raise _Unordered("a cycle")
    return [rows[i] for i in order], [seg[i] for i in order]


def _remap_rows(g, rows, rm):
    """Point every read of a slot in ``rm`` (a dict old -> new, or an array: new =
    rm[old]) at its new slot."""
    top = g.L.top
    if isinstance(rm, np.ndarray):          # (already the whole map)
        rma = rm
    else:
        if not rm:
            return rows
        rma = np.arange(top, dtype=np.int64)
        keys = np.fromiter(rm.keys(), dtype=np.int64, count=len(rm))
        rma[keys] = np.fromiter(rm.values(), dtype=np.int64, count=len(rm))
    return [_remap_row(g, row, rma, top) for row in rows]


def _remap_row(g, row, rm, top):
    """``row`` with its reads of slots below ``top`` pointed through ``rm`` (an array:
    new = rm[old]), a new tuple if any changed; its gather table remapped in place."""
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
    if t is not None and t.size:
        m = t < top
        t[m] = rm[t[m]]
    return row


def _apply(g, rows, seg, new, drop, rm):
    """Rows ``drop`` removed, ``new`` [(at, segment, row)] added (placed near row
    ``at``), reads remapped by ``rm``, the whole put in order."""
    if not new:
        return rows, seg
    keep = [i for i in range(len(rows)) if i not in drop]
    all_rows = [rows[i] for i in keep] + [r for _, _, r in new]
    all_seg = [seg[i] for i in keep] + [s for _, s, _ in new]
    prio = [(i, 1, 0) for i in keep] + [(at, 0, k) for k, (at, _, _) in enumerate(new)]
    all_rows = _remap_rows(g, all_rows, rm)
    return _reorder(g, all_rows, all_seg, prio)


def _scalar_add(row):
    return row[O.OP] == O.ADD and row[O.N] == 1


def _scans(g, rows, seg, rm):
    """5a: chains of scalar ADDs (each reading the previous one's output) -> GATHER of
    their terms + CUMSUM; -> (new rows, dropped rows)."""
    top = g.L.top
    owner = _owner_of(rows, top)
    succ, leaf, has_pred = {}, {}, set()
    for j, row in enumerate(rows):
        if not _scalar_add(row):
            continue
        for f, other in ((O.A, O.B), (O.B, O.A)):
            v = row[f]
            i = int(owner[v]) if v < top else -1
            if i >= 0 and i not in succ and _scalar_add(rows[i]) and seg[i] == seg[j] \
                    and row[other] != v:
                succ[i], leaf[j] = j, row[other]
                has_pred.add(j)
                break
    new, drop = [], set()
    for i in range(len(rows)):
        if i in has_pred or i not in succ:
            continue
        chain = [i]
        while chain[-1] in succ:
            chain.append(succ[chain[-1]])
        members = set(chain)
        terms = [rows[i][O.A], rows[i][O.B]]
        cut = len(chain)
        for k, j in enumerate(chain[1:], 1):
            v = leaf[j]
            if v < top and owner[v] in members:      # a partial sum as a term: stop
                cut = k
                break
            terms.append(v)
        chain = chain[:cut]
        if len(chain) < _MIN_RUN:
            continue
        k = len(terms)
        mask = int(any(rows[j][O.MASK] for j in chain))
        tmp, block = g.L.alloc(k), g.L.alloc(k)
        new.append((i, seg[i], _row(O.GATHER, k, tmp, mask=mask, x1=g.new_table(terms))))
        new.append((i, seg[i], _row(O.CUMSUM, k, block, a=tmp, mask=mask, x1=1, x2=k,
                                    x3=1)))
        for pos, j in enumerate(chain):
            rm[rows[j][O.OUT]] = block + pos + 1
            drop.add(j)
    return new, drop


def _poisson_vectors(g, rows, seg, rm):
    """5b: POISSON_SS rows of one rate (and segment), and scalar POISSON rows of a
    count of data at it, -> LOG of the rate and four vector rows: (n log(lambda) - k
    lambda) - c, as POISSON_SS and POISSON compute each. A rate <= 0 gives
    a NaN or -inf the final checks meet (DOMAIN: the eager tape decides, as the
    POISSON_SS row's own check hands it)."""
    groups = {}
    for i, row in enumerate(rows):
        if row[O.N] == 1 and (row[O.OP] == O.POISSON_SS or (
                row[O.OP] == O.POISSON and row[O.A] >= _CONST and row[O.X1] >= _CONST)):
            groups.setdefault((seg[i], row[O.B], row[O.MASK]), []).append(i)
    new, drop = [], set()
    if not groups:
        return new, drop
    L = g.L
    consts = np.concatenate(L.consts) if L.consts else np.zeros(0)

    def stats(row):                 # (sum n, terms, sum lgamma(n + 1))
        if row[O.OP] == O.POISSON:  # one term of data: n log(lambda) - lambda - c
            return consts[row[O.A] - _CONST], 1.0, consts[row[O.X1] - _CONST]
        return consts[row[O.X1] - _CONST:row[O.X1] - _CONST + 3]

    for (s, b, mask), members in groups.items():
        k = len(members)
        if k < _MIN_RUN:
            continue
        st = np.array([stats(rows[i]) for i in members], dtype=float)
        m, n, c = (L.constant(np.ascontiguousarray(st[:, j]),
                              key=("poisson_vectors", L.const_len))[0] for j in range(3))
        t = 1 if mask & 2 else 0
        lb, t1, t2, t3, out = L.alloc(1), L.alloc(k), L.alloc(k), L.alloc(k), L.alloc(k)
        at = members[0]
        for row in (_row(O.LOG, 1, lb, a=b, mask=t),
                    _row(O.MUL, k, t1, a=m, sa=1, b=lb, mask=2 * t),
                    _row(O.MUL, k, t2, a=n, sa=1, b=b, mask=2 * t),
                    _row(O.SUB, k, t3, a=t1, sa=1, b=t2, sb=1, mask=3 * t),
                    _row(O.SUB, k, out, a=t3, sa=1, b=c, sb=1, mask=t)):
            new.append((at, s, row))
        for pos, i in enumerate(members):
            rm[rows[i][O.OUT]] = out + pos
            drop.add(i)
    return new, drop


def _two_leaf_sums(g, rows):
    """Two-leaf SUMN rows as ADDs (the same sum: 0 + a + b == a + b), for 5c."""
    out = []
    for row in rows:
        if row[O.OP] == O.SUMN and row[O.X2] == 2:
            a, b = (int(v) for v in g.table(row))
            row = _row(O.ADD, 1, row[O.OUT], a=a, b=b, mask=3 if row[O.MASK] else 0)
        out.append(row)
    return out


def _operands(row):
    return (O.A, O.B) if row[O.OP] in _BINARY else (O.A,)


def _levels(g, rows, seg):
    deps = _deps(g, rows, _owner_of(rows, g.L.top))
    level = [0] * len(rows)
    for i, d in enumerate(deps):
        level[i] = 1 + max((level[p] for p in d if seg[p] == seg[i]), default=0)
    return level


def _runs(rows, members, fields):
    """``members`` split into runs whose operands step by 0 or 1 (the same step along
    the run, field by field; a unary op's operand by 1)."""
    runs, cur, step = [], [members[0]], None
    for j in members[1:]:
        p = rows[cur[-1]]
        d = tuple(rows[j][f] - p[f] for f in fields)
        ok = all(x in (0, 1) for x in d) and (step is None or d == step) and \
            (len(fields) == 2 or d == (1,))
        if ok:
            cur.append(j)
            step = d
        else:
            runs.append((cur, step))
            cur, step = [j], None
    runs.append((cur, step))
    return runs


def _vector_rows(g, rows, seg, rm):
    """5c: same-level scalar elementwise rows of one op -> vector rows."""
    level = _levels(g, rows, seg)
    groups = {}
    for i, row in enumerate(rows):
        op = row[O.OP]
        if row[O.N] == 1 and (op in _BINARY or op in _UNARY):
            groups.setdefault((seg[i], level[i], op, row[O.MASK]), []).append(i)
    new, drop = [], set()
    L = g.L
    consts = None
    for key in sorted(groups, key=lambda k: (k[0], k[1])):
        members = groups[key]
        if len(members) < _MIN_RUN:
            continue
        s, _, op, mask = key
        fields = _operands(rows[members[0]])
        # operands as remapped by the groups of lower levels
        args = {i: [rm.get(rows[i][f], rows[i][f]) for f in fields] for i in members}
        view = {i: _with(rows[i], fields, args[i]) for i in members}
        rest = []
        for run, step in _runs(view, members, fields):
            if len(run) < _MIN_RUN:
                rest += run
                continue
            strides = step if step is not None else (1,) * len(fields)
            operands = [(args[run[0]][j], strides[j]) for j in range(len(fields))]
            new.append(_vector(g, rows, run, s, op, mask, fields, operands, rm, drop))
        if len(rest) >= _MIN_RUN:
            if consts is None:
                consts = np.concatenate(L.consts) if L.consts else np.zeros(0)
            operands = []
            for j, f in enumerate(fields):
                vs = [args[i][j] for i in rest]
                if all(v == vs[0] for v in vs):
                    operands.append((vs[0], 0))
                elif all(v >= _CONST for v in vs):
                    arr = consts[np.array(vs, dtype=np.int64) - _CONST]
                    operands.append((L.constant(arr, key=("vector_rows", L.const_len))[0],
                                     1))
                else:
                    tmp = L.alloc(len(rest))
                    bit = 1 << j
                    new.append((rest[0], s, _row(O.GATHER, len(rest), tmp,
                                                 mask=1 if mask & bit else 0,
                                                 x1=g.new_table(vs))))
                    operands.append((tmp, 1))
            if op in _UNARY and operands[0][1] != 1:
                continue
            new.append(_vector(g, rows, rest, s, op, mask, fields, operands, rm, drop))
    return new, drop


def _copies(g, rows, rm):
    """GATHERs of a run of node slots in order (a list of a vector row's outputs
    stacked) are dropped: their readers read the run (added to ``rm``)."""
    top = g.L.top
    out = []
    for row in rows:
        if row[O.OP] == O.GATHER and row[O.N] > 1:
            t = g.table(row)
            if t[0] < top and t[-1] < top and (np.diff(t) == 1).all():
                res = [rm.get(v, v) for v in t.tolist()]    # (a dropped GATHER's run)
            else:
                res = None
            first = res[0] if res else 0
            if res and first < top and res == list(range(first, first + len(res))):
                for pos in range(row[O.N]):
                    rm[row[O.OUT] + pos] = first + pos
                continue
        out.append(row)
    return out


def _with(row, fields, vals):
    r = list(row)
    for f, v in zip(fields, vals):
        r[f] = v
    return r


def _vector(g, rows, members, s, op, mask, fields, operands, rm, drop):
    """One row of ``op`` over ``members`` (their outputs now a run of its output)."""
    k = len(members)
    out = g.L.alloc(k)
    (a, sa), (b, sb) = operands if len(operands) == 2 else (operands[0], (0, 0))
    for pos, i in enumerate(members):
        rm[rows[i][O.OUT]] = out + pos
        drop.add(i)
    return members[0], s, _row(op, k, out, a=a, sa=sa, b=b, sb=sb, mask=mask)


def _vectorise(g, out_off, out_size):
    """Passes 5a-5c (see above); -> the output's offset. Left as it was if the rows
    found no valid order."""
    saved = (list(g.rows), g.aux.copy(), [a.copy() for a in g.extra])
    rows = g.rows
    seg = _segments(rows)
    rm = {}
    try:
        for step in (_scans, _poisson_vectors):
            new, drop = step(g, rows, seg, rm)
            rows, seg = _apply(g, rows, seg, new, drop, rm)
        rows = _two_leaf_sums(g, rows)
        new, drop = _vector_rows(g, rows, seg, rm)
        rows, seg = _apply(g, rows, seg, new, drop, rm)
        rows = _remap_rows(g, _copies(g, rows, rm), rm)
    except _Unordered:
        g.rows, g.aux, g.extra = saved
        return out_off
    out = rm.get(out_off, out_off)
    if out_size > 1 and any(rm.get(v, v) != out + (v - out_off)
                            for v in range(out_off, out_off + out_size)):
        g.rows, g.aux, g.extra = saved          # the output must stay one run
        return out_off
    g.rows = rows
    _dead(g, out, out_size)
    return out


def _compact(g, out_off, out_size):
    """6: the node slots no row writes are removed (offsets keep their order, so every
    run a row reads stays a run); -> the output's offset. Not applied if a row reads
    a slot no row writes (above the parameters)."""
    rows = g.rows
    top = g.L.top
    owner = _owner_of(rows, top)
    written = owner >= 0
    if not written.any():
        return out_off
    base = int(np.argmax(written))           # the first node slot (parameters below)
    for row in rows:
        for off, k in _ranges(row):
            if base <= off < top and not written[off:off + k].all():
                return out_off
        t = g.table(row)
        if t is not None and t.size:
            inside = t[(t >= base) & (t < top)]
            if not written[inside].all():
                return out_off
    if base <= out_off < top and not written[out_off:out_off + out_size].all():
        return out_off
    rma = np.arange(top, dtype=np.int64)
    rma[base:] = base + np.cumsum(written[base:]) - written[base:]
    if (rma == np.arange(top)).all():
        return out_off
    rows = _remap_rows(g, rows, rma)
    g.rows = [tuple(r) if r[O.OP] in _GUARDS else
              tuple(r[:O.OUT]) + (int(rma[r[O.OUT]]),) + tuple(r[O.OUT + 1:])
              for r in rows]
    g.L.top = base + int(written[base:].sum())
    return int(rma[out_off]) if out_off < top else out_off
