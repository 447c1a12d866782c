"""Code generation for retaping (:mod:`.compile`): a recording becomes Python source.

One rule per kind of node turns it into its forward statement and its adjoint
contributions, mirroring what the eager tape does for that node on the same types -
the same function (``math.exp`` on floats, ``np.exp`` on arrays), the same VJP, the
contributions added in the same order with the same summing back to shapes
(``extend.accumulate``, decided here once on kinds instead of at every sweep on
types) - so that the generated code gives the tape's value and gradient bit for bit
(up to the sign of an exact zero: negations are carried as flags, see ``_Adj``).
Kinds of nodes: the elementwise primitives (unary; ``+ -``, ``*``, and the generated
binary rules), indexing, full sums, fused densities (one kernel call: value and
partials together), and every other primitive - super nodes included - as one call
of its forward function and one of its VJP on plain values. Nothing here knows a
primitive by its name: a node's rule follows the form its backward rule declares
(``extend._tag``), and the hottest rules are written inline from the templates and
the operation each primitive declares beside its definition (``extend.definline``,
or made from an elementwise primitive's one derivative declaration,
``extend.unary_primitive`` and ``extend.binary_primitive``; read as ``spec.inline``
and ``spec.derivative``). Liveness removes dead nodes, a
forward common-subexpression pass computes repeated calls once, and (unless ``exact``)
a sum of squares becomes one dot product.
"""

import builtins
import math

import numpy as np

from ..errors import DifferentiationError
from .codegen_nodes import (NotCompilable, _cse_key, _family, _is, _probe, _probe_call,
                            _probe_vjp)
from .codegen_runtime import _RUNTIME
from .codegen_text import (_CMP, _F, _N, _O, _OPS, _arith_kind, _atomic, _fold, _p,
                           _pairwise_agrees, _pairwise_expr, _subscript, kind_of)
from .extend import lazy_adjoint_ok, node_record
from . import library
from .var import Box, Var, _strip

__all__ = ["build", "NotCompilable", "kind_of"]

# ======================================================================================
# code generation
# ======================================================================================
class _Adj:
    """The adjoint of one variable during generation: an expression (a name, or - for
    scalars - a deferred sum), its kind, and whether the buffer is this sweep's own.

    ``neg`` (arrays only): the expression holds the adjoint's negation. A sign is
    carried instead of computed - ``-1.0 * x`` is ``x`` negated, ``a - b`` passes ``g``
    to ``b`` negated, and products, quotients and sums of a negated factor are the
    negation of the product (round to nearest is symmetric) - until a rule that is not
    linear in its adjoint, or the gradient itself, needs the value: then one
    ``-expr``. Only the sign of an exact zero can differ from the tape's."""

    __slots__ = ("expr", "kind", "owned", "terms", "neg")

    def __init__(self, expr, kind, owned, terms=1, neg=False):
        self.expr = expr
        self.kind = kind
        self.owned = owned
        self.terms = terms          # contributions summed in a deferred expression
        self.neg = neg


class _Gen:
    """Generate the replay function of one recording.

    ``inputs`` is a list of ``(leaf, expression)``: how each input leaf's value is cut
    from the function's argument ``x``; ``output(gen, adjoint_exprs)`` returns the
    lines that build and return ``(value, gradient)``.
    """

    def __init__(self, rec, inputs, output, exact=False, value_only=False):
        self.rec = rec
        self.value_only = value_only    # the forward pass alone (a log density)
        self.inputs = inputs
        self.output = output
        self.exact = exact
        self.fused = {}             # id(sum node) -> x: sum(x * x) as one dot product
        # a fused density asked for its value alone, where the tape asked for partials:
        # its kernel may take another (cheaper) path, equal within a few ulps
        self.value_paths = False
        self.skip = set()           # ids of nodes folded into another (not computed)
        self.cse = {}               # (primitive, arguments) -> name of its value
        self.uid = {}               # id(Var) -> its own name, where vname is shared
        self.listed = {}            # id(input vector) -> name of its .tolist()
        self.elements = {}          # id(input vector) -> its gradient, element by element
        self.lines = []
        self.consts = {}            # parameter name -> object
        self.const_ids = {}         # id(object) -> parameter name
        self.keep = []              # objects whose ids key const_ids
        self.helpers = {}           # name -> function called by an inline template
        self.vname = {}             # id(Var) -> name of its value
        self.vkind = {}             # id(Var) -> kind of its value
        self.adj = {}               # id(Var) -> _Adj
        self.need = set()           # ids of Vars whose adjoint matters
        self.ntmp = 0
        self.tape = rec.tape

    # -- names and constants -----------------------------------------------------------
    def const(self, obj, hint="k"):
        t = type(obj)
        if t is float:
            if math.isfinite(obj):
                r = repr(obj)
                return f"({r})" if r.startswith("-") else r
            return "_inf" if obj > 0 else ("(-_inf)" if obj < 0 else "_nan")
        if t is int or t is bool or obj is None:
            r = repr(obj)
            return f"({r})" if r.startswith("-") else r
        if t is str:
            return repr(obj)
        name = self.const_ids.get(id(obj))
        if name is None:
            name = f"{hint}{len(self.consts)}"
            self.consts[name] = obj
            self.const_ids[id(obj)] = name
            self.keep.append(obj)
        return name

    def fn(self, f, hint="f"):
        return self.const(f, hint)

    def template(self, spec, field):
        """The inline template ``field`` (``"fwd"``, ``"vjp_float"``, ``"vjp_array"``)
        that ``spec`` declares (extend.definline, or made from its declared derivative:
        extend.unary_primitive), with the functions it calls made
        globals of the generated code; None if it declares none, or if a name it calls
        is taken by another function (the call of the rule is written instead)."""
        inl = spec.inline
        t = None if inl is None else getattr(inl, field)
        if t is None:
            return None
        helpers = inl.helpers() if callable(inl.helpers) else inl.helpers
        for k, f in helpers.items():
            if self.helpers.get(k, _RUNTIME.get(k, f)) is not f:
                return None
        self.helpers.update(helpers)
        return t

    def aname(self, vid):
        """The name of a variable's adjoint buffer (its own, also when its value is
        another node's)."""
        return "a" + self.uid.get(vid, self.vname.get(vid))

    def tmp(self, prefix="t"):
        self.ntmp += 1
        return f"{prefix}{self.ntmp}"

    def emit(self, line):
        self.lines.append(line)

    def val(self, a):
        """Expression of an argument: a traced value's name, or the constant (a
        variable created inside f from a plain value is a constant too)."""
        if type(a) is Var:
            n = self.vname.get(id(a))
            if n is None:
                if a.bp is None and a.tape is self.tape and not isinstance(a.value, Box):
                    return self.const(a.value)
                raise NotCompilable("a value from outside the recording")
            return n
        return self.const(a)

    def kind(self, a):
        if type(a) is Var:
            k = self.vkind.get(id(a))
            return kind_of(a.value) if k is None else k
        return kind_of(a)

    # -- adjoints ---------------------------------------------------------------------
    def take(self, v, uses=1):
        """This node's (final) adjoint as an expression usable ``uses`` times."""
        e, k, neg = self.take_signed(v, uses)
        if neg:
            st = self.adj[id(v)]
            name = self.aname(id(v))
            self.emit(f"{name} = -{e}")
            st.expr, st.owned, st.neg = name, True, False
            e = name
        return e, k

    def take_signed(self, v, uses=1):
        """``(expression, kind, negated)``: for rules linear in the adjoint, which pass
        a sign on instead of computing it."""
        st = self.adj[id(v)]
        lit = st.kind == _F and _fold(st.expr)
        if lit:
            st.expr = lit
        elif uses > 1 and not _atomic(st.expr):
            name = self.aname(id(v))
            self.emit(f"{name} = {st.expr}")
            st.expr = name
        return _p(st.expr), st.kind, st.neg

    def acc(self, p, c, ck, fresh=False, neg=False):
        """Add contribution ``c`` (kind ``ck``; its negation if ``neg``) into ``p``'s
        adjoint: extend.accumulate, decided here on kinds instead of at runtime on
        types."""
        pid = id(p)
        if pid not in self.need:
            return
        if c.startswith("1.0 * ") and _atomic(c[6:]):
            c, fresh = c[6:], False         # 1.0 * v is v, bit for bit
        if neg and type(ck) is not tuple:
            c, neg = f"-{_p(c)}", False     # a scalar's sign costs nothing
        pk = self.vkind[pid]
        if pk == _F:
            if ck == _F:
                pass
            elif type(ck) is tuple or ck == _N:
                c, ck, fresh = self.sum_all(c, ck), _F, False
            else:
                c, ck, fresh = f"_float(_np.sum({c}))", _F, False
        else:
            ps = pk if type(pk) is tuple else ()
            cs = ck if type(ck) is tuple else ()
            if cs != ps:
                if ck == _F:
                    if not lazy_adjoint_ok(p, ps):
                        c, ck, fresh = f"_full({ps!r}, {c})", ps, True
                elif ck == _O:
                    raise NotCompilable("an adjoint contribution of unknown type")
                else:
                    c = f"_sts({c}, {ps!r})"
                    ck, fresh = (ps, True) if ps else (_F, False)
        if neg and type(ck) is not tuple:
            c, neg = f"-{_p(c)}", False
        if ck == _F:
            c = _fold(c) or c
        st = self.adj.get(pid)
        if st is None:
            owned = fresh and type(ck) is tuple and ck == pk
            if type(ck) is tuple and not _atomic(c):
                name = self.aname(pid)
                self.emit(f"{name} = {c}")
                c = name
            self.adj[pid] = _Adj(c, ck, owned, neg=neg)
            return
        ak = st.kind
        if type(ak) is tuple and (type(ck) is tuple or ck == _F):
            # -s + c is -(s - c), and c - s; s + -c is s - c (exactly, up to a zero's sign)
            if st.owned:
                self.emit(f"{st.expr} {'+=' if st.neg == neg else '-='} {c}")
            else:
                name = self.aname(pid)
                if st.neg == neg:
                    self.emit(f"{name} = {st.expr} + {_p(c)}")
                elif st.neg:
                    self.emit(f"{name} = {_p(c)} - {st.expr}")
                    st.neg = False
                else:
                    self.emit(f"{name} = {st.expr} - {_p(c)}")
                st.expr, st.owned = name, True
            return
        k = _arith_kind(ak, ck)
        if st.terms >= 8:
            # a long deferred sum is written out (Python's parser limits nesting)
            name = self.aname(pid)
            self.emit(f"{name} = {st.expr}")
            st.expr, st.terms = name, 1
        if st.neg:                          # (c is a scalar: never negated)
            e = f"{_p(c)} - {_p(st.expr)}"
        else:
            e = f"{_p(st.expr)} {'-' if neg else '+'} {_p(c)}"
        if type(k) is tuple:
            name = self.aname(pid)
            self.emit(f"{name} = {e}")
            self.adj[pid] = _Adj(name, k, True)
        else:
            if k == _F:
                e = _fold(e) or e
            self.adj[pid] = _Adj(e, k, False, st.terms + 1)

    def sum_all(self, x, k):
        """``float(x.sum())`` of an array expression of kind ``k``. A short vector is
        summed in Python floats in numpy's own order (its pairwise summation: below 8
        terms left to right, else 8 running sums combined as a tree, then the rest),
        the same bits without the cost of a reduction call (1 us against 0.4)."""
        if not (type(k) is tuple and len(k) == 1 and 1 <= k[0] <= 16 and
                _pairwise_agrees()):
            return f"_float({_p(x)}.sum())"
        t = self.tmp("s")
        self.emit(f"{t} = {_p(x)}.tolist()")
        return _pairwise_expr(t, k[0])

    # -- the function --------------------------------------------------------------------
    def generate(self):
        rec = self.rec
        nodes = rec.nodes
        out = rec.output
        index = {id(n): i for i, n in enumerate(nodes)}
        records = []
        for n in nodes:
            if n.bp is None:
                records.append(None)            # a Var created inside f: a constant
                continue
            try:
                records.append(node_record(n))
            except DifferentiationError as e:
                raise NotCompilable(str(e)) from None

        # inputs
        for j, (leaf, expr) in enumerate(self.inputs):
            self.vname[id(leaf)] = f"x{j}"
            self.vkind[id(leaf)] = kind_of(leaf.value)

        # liveness: what the output and the guards need (backwards), what depends on
        # an input (forwards); adjoints matter where both hold
        parents = []
        for n, r in zip(nodes, records):
            parents.append([] if r is None else [a for a in r[1] if type(a) is Var])
        live = set()
        stack = []
        if type(out) is Var and out.tape is rec.tape:
            stack.append(out)
        for gd in rec.guards:
            stack.extend(a for a in gd.args if type(a) is Var)
        while stack:
            v = stack.pop()
            if id(v) in live:
                continue
            live.add(id(v))
            i = index.get(id(v))
            if i is not None:
                stack.extend(parents[i])
        dep = {id(leaf) for leaf, _ in self.inputs}
        for n, ps in zip(nodes, parents):
            if any(id(p) in dep for p in ps):
                dep.add(id(n))
        self.need = dep & (live | {id(leaf) for leaf, _ in self.inputs})
        if self.value_only:
            self.need = set()

        if not self.exact:
            self.fuse(nodes, records, index, live)

        # forward pass, guards in their places
        body = self.lines
        for j, (leaf, expr) in enumerate(self.inputs):
            if id(leaf) in live or id(leaf) in self.need:
                self.emit(f"x{j} = {expr}")
                self.scalars_of(leaf, f"x{j}", nodes, records, live)
        guards = sorted(enumerate(rec.guards), key=lambda t: t[1].pos)
        gi = 0
        for i, n in enumerate(nodes):
            while gi < len(guards) and guards[gi][1].pos <= i:
                self.guard(*guards[gi])
                gi += 1
            if id(n) not in live:
                continue
            self.vname[id(n)] = f"v{i}"
            self.vkind[id(n)] = kind_of(n.value)
            if id(n) in self.skip:
                continue
            if records[i] is None:
                self.emit(f"v{i} = {self.const(n.value)}")
                continue
            self.forward(n, records[i])
        while gi < len(guards):
            self.guard(*guards[gi])
            gi += 1

        # adjoint sweep, newest node first
        outv = None
        if type(out) is Var and id(out) in live:
            outv = self.vname[id(out)]
            if id(out) in self.need:
                self.adj[id(out)] = _Adj("1.0", _F, False)
        for i in range(len(nodes) - 1, -1, -1):
            n = nodes[i]
            st = self.adj.get(id(n))
            if st is None or records[i] is None:
                continue
            # self-check: the kind decided here is the kind the eager sweep had
            if kind_of(n.adj) != st.kind:
                raise NotCompilable(f"internal: adjoint kind of node {i} "
                                     f"({records[i][0].name}) is {st.kind}, the tape "
                                     f"had {kind_of(n.adj)}")
            self.backward(n, records[i])

        for leaf, _ in self.inputs:
            st = self.adj.get(id(leaf))
            if st is not None and kind_of(leaf.adj) != st.kind:
                raise NotCompilable("internal: an input's adjoint kind differs from the "
                                     "tape's")
        adjs = []
        for leaf, _ in self.inputs:
            el = self.elements.get(id(leaf))
            if el is not None and el[1]:
                # an input read only element by element: its gradient in one array
                n = self.vkind[id(leaf)][0]
                name = self.aname(id(leaf))
                self.emit(f"{name} = _array([{', '.join(el[1].get(i, '0.0') for i in range(n))}])")
                self.adj[id(leaf)] = _Adj(name, (n,), True)
            st = self.adj.get(id(leaf))
            if st is not None and st.neg:
                self.take(leaf)             # the gradient itself: its sign computed
            adjs.append(None if st is None else st)
        if outv is not None:
            value = outv
        elif self.value_only and np.ndim(_strip(out)):
            value = self.const(np.array(_strip(out), dtype=float), "k")   # a constant array
        else:
            value = self.const(float(_strip(out)))
        self.lines.extend(self.output(self, value, adjs))
        return body

    def scalars_of(self, leaf, name, nodes, records, live):
        """An input vector read element by element (``x[0]``, ``x[1]``...): read all of
        it as Python floats at once, and - if that is all it is used for - build its
        gradient from the elements' adjoints (no zeros and scatter)."""
        if type(self.vkind[id(leaf)]) is not tuple or len(self.vkind[id(leaf)]) != 1:
            return
        reads, other = 0, False
        for n, r in zip(nodes, records):
            if r is None or id(n) not in live or not any(a is leaf for a in r[1]):
                continue
            if _family(n, r[0]) == "getitem" and r[1][0] is leaf and \
                    type(r[1][1]) is int and type(n.value) is float:
                reads += 1
            else:
                other = True
        size = self.vkind[id(leaf)][0]
        if reads >= 2 and size <= max(16, 4 * reads):       # (not 2 reads of 10^4)
            self.emit(f"{name}l = {name}.tolist()")
            self.listed[id(leaf)] = f"{name}l"
        if reads and not other and size <= max(16, 2 * reads):
            self.elements[id(leaf)] = [True, {}]    # [no contribution yet, index -> sum]

    def fuse(self, nodes, records, index, live):
        """Algebraic fusions (not bit-exact, within a few ulps): a sum of squares
        ``sum(x * x)`` whose product feeds nothing else is one dot product - one pass
        and no temporary (its backward, 2 g x, never needed the product)."""
        uses = {}
        for n, r in zip(nodes, records):
            if r is not None and id(n) in live:
                for a in r[1]:
                    if type(a) is Var:
                        uses[id(a)] = uses.get(id(a), 0) + 1
        for gd in self.rec.guards:
            for a in gd.args:
                if type(a) is Var:
                    uses[id(a)] = uses.get(id(a), 2) + 1
        out = self.rec.output
        if type(out) is Var:
            uses[id(out)] = uses.get(id(out), 0) + 1
        for n, r in zip(nodes, records):
            if r is None or id(n) not in live or _family(n, r[0]) != "sum_all":
                continue
            m = r[1][0]
            j = index.get(id(m))
            if j is None or uses.get(id(m)) != 1 or records[j] is None:
                continue
            mr = records[j]
            if _family(m, mr[0]) != "mul":
                continue
            a, b = mr[1]
            if a is b and type(a) is Var and type(kind_of(a.value)) is tuple:
                self.fused[id(n)] = a
                self.skip.add(id(m))

    # -- guards ---------------------------------------------------------------------------
    def guard(self, k, gd):
        args = [self.val(a) for a in gd.args]
        fn = gd.fn
        r = gd.result
        fail = f"return {k}"
        op = _CMP.get(fn)
        if fn is bool and len(args) == 1 and type(r) is bool:
            self.emit(f"if {'not ' if r else ''}{_p(args[0])}: {fail}")
            return
        if op is not None and len(args) == 2:
            e = f"{_p(args[0])} {op} {_p(args[1])}"
            if type(r) is bool or type(r) is np.bool_:
                self.emit(f"if {'not ' if r else ''}({e}): {fail}")
                return
            if isinstance(r, np.ndarray) and r.dtype == bool:
                if r.all():
                    self.emit(f"if not ({e}).all(): {fail}")
                elif not r.any():
                    self.emit(f"if ({e}).any(): {fail}")
                else:
                    self.emit(f"if not _array_equal({e}, {self.const(r, 'r')}): {fail}")
                return
        call = f"{self.fn(fn, 'c')}({', '.join(args)})"
        if r is None:
            self.emit(f"if {call} is not None: {fail}")
        else:
            self.emit(f"if not _same({call}, {self.const(r, 'r')}): {fail}")

    # -- forward rules ----------------------------------------------------------------------
    def forward(self, n, record):
        spec, args, kw = record
        name = self.vname[id(n)]
        fam = _family(n, spec)
        # the same primitive on the same arguments twice (x[0] read twice, 0.5 * d
        # written twice): the value is computed once (each node keeps its own adjoint,
        # so the sweep - and every bit of the result - is unchanged)
        key = _cse_key(spec, args, kw, self.vname)
        prev = self.cse.get(key)
        if prev is not None:
            self.vname[id(n)] = prev        # one value under one name (its partials too)
            self.uid[id(n)] = name
            return
        self.cse[key] = name
        if fam == "unary":
            x = self.val(args[0])
            xk = self.kind(args[0])
            if xk == _F:
                t = self.template(spec, "fwd")
                if t is not None:
                    e = t.format(x=x)
                elif spec.scalar is not None:
                    e = f"{self.fn(spec.scalar)}({x})"
                else:
                    e = f"_float({self.fn(spec.fun)}({x}))"
            elif type(xk) is tuple:
                e = f"{self.fn(spec.fun)}({x})"
            else:
                raise NotCompilable(f"'{spec.name}' of a {xk} value")
            self.emit(f"{name} = {e}")
            return
        if fam in ("linear", "mul", "binary"):
            a, b = self.val(args[0]), self.val(args[1])
            ka, kb = self.kind(args[0]), self.kind(args[1])
            t = self.template(spec, "fwd") if spec.op is None else None
            sym = _OPS.get(spec.op)
            if sym is not None:
                e = f"{_p(a)} {sym} {_p(b)}"
            elif spec.op is not None:
                # an operator of its own (a user's): the tape computes op(x, y)
                e = f"{self.fn(spec.op)}({a}, {b})"
            elif t is not None and (ka == _F or type(ka) is tuple or kb == _F
                                    or type(kb) is tuple):
                # the value written out (``x / y``: np.true_divide is IEEE division, /)
                e = t.format(x=_p(a), y=_p(b))
            else:
                t = None
                e = f"{self.fn(spec.fun)}({a}, {b})"
            rk = kind_of(n.value)
            python = sym is not None or t is not None
            if rk == _F and not (python and ka in (_F, _N) and kb in (_F, _N)):
                # a float result the tape normalised from a numpy scalar
                probe = _probe(spec, n, args)
                if type(probe) is not float:
                    e = f"_float({e})"
            self.emit(f"{name} = {e}")
            return
        if fam == "sum_all":
            sq = self.fused.get(id(n))
            if sq is not None:
                x = self.val(sq)
                d = f"_dot({x}, {x})" if len(self.kind(sq)) == 1 else f"_dot_all({x}, {x})"
                self.emit(f"{name} = _float({d})")
                return
            self.emit(f"{name} = {self.sum_all(self.val(args[0]), self.kind(args[0]))}")
            return
        if fam == "getitem":
            self.emit(f"{name} = {self.getitem_expr(args[0], args[1], n)}")
            return
        if fam == "fused":
            self.fused_forward(n, spec, args)
            return
        # a generic primitive: its forward function on plain values
        vals = [self.val(a) for a in args]
        kws = [f"{k}={self.const(v)}" for k, v in kw.items()]
        if _is(spec, "matmul") and not kw:
            e = f"_matmul({vals[0]}, {vals[1]})"
            self.emit(f"{name} = {'_float(' + e + ')' if kind_of(n.value) == _F else e}")
            return
        if _is(spec, "reshape") and not kw and type(kind_of(n.value)) is tuple \
                and type(self.kind(args[0])) is tuple:
            # np.reshape of a float array to an array: the method, no wrapper calls
            self.emit(f"{name} = {_p(vals[0])}.reshape({vals[1]})")
            return
        fun = spec.fun
        if self.value_only:
            # a node made by hand (a super node) may do its reverse pass's work in
            # ``fun``; replaying the value alone is then no cheaper than the tape
            if spec.plain is not None:
                fun = spec.plain
            elif spec.wrapped is None:
                raise NotCompilable(f"'{spec.name}' computes more than its value",
                                    quiet=True)
        e = f"{self.fn(fun)}({', '.join(vals + kws)})"
        self.emit(f"{name} = _norm({e})")

    def getitem_expr(self, x, idx, n):
        xv = self.val(x)
        xk = self.kind(x)
        sub = _subscript(idx)
        if sub is None:
            sub = self.const(idx, "i")
        if type(xk) is not tuple:
            return f"{self.fn(n.bp._spec.fun)}({xv}, {self.const(idx, 'i')})"
        if kind_of(n.value) == _F:
            lst = self.listed.get(id(x)) if type(x) is Var else None
            if lst is not None and type(idx) is int:
                return f"{lst}[{idx}]"
            if type(idx) is int and len(xk) == 1:
                return f"{xv}.item({idx})"
            return f"_float({xv}[{sub}])"
        return f"{xv}[{sub}]"

    def fused_forward(self, n, spec, args):
        name = self.vname[id(n)]
        pairs, parts = n.x[3], n.y      # a two-phase node: the partials are saved
        need = tuple(type(a) is Var and not self.value_only for a in args)
        if self.value_only and any(type(a) is Var for a in args):
            self.value_paths = True
        vals = [self.val(a) for a in args]
        if spec.check is not None:
            self.emit(f"{self.fn(spec.check, 'chk')}({', '.join(vals)})")
        pn = f"P{name[1:]}"
        target = f"{name}, {pn}" if any(need) else f"{name}, _"
        self.emit("_tk = _ignore_fp()")
        self.emit("try:")
        self.emit(f"    {target} = {self.fn(spec.kernel, 'kern')}({need!r}, "
                  f"{', '.join(vals)})")
        self.emit("finally:")
        self.emit("    _restore_fp(_tk)")
        self.emit(f"{name} = _float({name})")
        # the backward rules use each array partial as an array of its recorded shape
        shapes = tuple((i, np.shape(parts[i])) for i, _ in pairs
                       if need[i] and type(parts[i]) is np.ndarray)
        if shapes:
            test = " or ".join(f"type({pn}[{i}]) is not _ndarray" for i, _ in shapes)
            self.emit(f"if {test}:")
            self.emit(f"    {pn} = _shaped_partials({pn}, {shapes!r})")

    # -- backward rules -----------------------------------------------------------------------
    def backward(self, n, record):
        spec, args, kw = record
        fam = _family(n, spec)
        getattr(self, "bw_" + fam)(n, spec, args, kw)

    def _needs(self, *vs):
        return [type(v) is Var and id(v) in self.need for v in vs]

    def dot_all(self, g, v, shape):
        """sum(g * v) as arithmetic._dot_all computes it; a vector's ravel is itself,
        so (unless exact: the ravel copies a strided view) one np.dot."""
        if len(shape) == 1 and not self.exact:
            return f"_float(_dot({g}, {v}))"
        return f"_dot_all({g}, {v})"

    def bw_unary(self, n, spec, args, kw):
        (x,) = args
        if id(x) not in self.need:
            return
        ans, xv = self.vname[id(n)], self.val(x)
        xk = self.kind(x)
        g, gk, gneg = self.take_signed(n)
        vjp = spec.vjps[0]
        t = self.template(spec, "vjp_array") if type(gk) is tuple or type(xk) is tuple \
            else None
        if t is not None:
            # the templates are linear in g: a sign in front goes on as a flag
            flip = t.startswith("-{g}")
            c = (t[1:] if flip else t).format(g=g, ans=ans, x=xv)
            # (-g alone keeps g's kind: a float adjoint of an array stays a float)
            ck = _arith_kind(gk, xk) if "{x}" in t or "{ans}" in t else gk
            self.acc(x, c, ck, fresh=type(ck) is tuple and c != g, neg=gneg != flip)
            return
        if gneg:
            g, gk = self.take(n)
        svjp = spec.scalar_vjp
        if svjp is not None and gk == _F and xk == _F:
            t = self.template(spec, "vjp_float")
            if t is not None:
                c = t.format(g=g, ans=ans, x=xv)
            else:
                c = f"{self.fn(svjp)}({g}, {ans}, {xv})"
            self.acc(x, c, _F)
            return
        c = f"{self.fn(vjp)}({g}, {ans}, {xv})"
        self.acc(x, c, kind_of(_probe_vjp(vjp, n, (x.value,))))

    def bw_linear(self, n, spec, args, kw):
        # d(sx x + sy y) = sx dx + sy dy, the signs declared (fast_rules.form_of)
        x, y = args
        nx, ny = self._needs(x, y)
        g, gk, gneg = self.take_signed(n, uses=int(nx) + int(ny))
        for need, v, s in zip((nx, ny), (x, y), spec.derivative.form[1]):
            if not need:
                continue
            if s < 0 and type(gk) is not tuple:
                self.acc(v, f"-{g}", gk)
            else:
                self.acc(v, g, gk, neg=gneg != (s < 0))

    def bw_mul(self, n, spec, args, kw):
        x, y = args
        nx, ny = self._needs(x, y)
        xv, yv = self.val(x), self.val(y)
        xk, yk = self.kind(x), self.kind(y)
        tx, ty = type(x) is Var, type(y) is Var
        g, gk, gneg = self.take_signed(n, uses=int(nx) + int(ny) + (1 if x is y else 0))
        mul = self.product
        if tx and ty:
            if gk == _F and xk == _F and yk == _F:
                if nx:
                    self.acc(x, f"{g} * {_p(yv)}", _F)
                if ny:
                    self.acc(y, f"{g} * {_p(xv)}", _F)
                return
            if x is y:
                k = _arith_kind(gk, xk)
                two = _fold(f"{g} + {g}") or f"({g} + {g})"
                self.acc(x, *mul(two, xv, k, gk, xk, gneg))
                return
            if type(gk) is tuple:
                if xk == _F and yk == gk:
                    if nx:
                        self.acc(x, self.dot_all(g, yv, gk), _F, neg=gneg)
                    if ny:
                        self.acc(y, *mul(g, xv, gk, gk, xk, gneg))
                    return
                if yk == _F and xk == gk:
                    if nx:
                        self.acc(x, *mul(g, yv, gk, gk, yk, gneg))
                    if ny:
                        self.acc(y, self.dot_all(g, xv, gk), _F, neg=gneg)
                    return
            if nx:
                self.acc(x, *mul(g, yv, _arith_kind(gk, yk), gk, yk, gneg))
            if ny:
                self.acc(y, *mul(g, xv, _arith_kind(gk, xk), gk, xk, gneg))
            return
        # one traced operand v, one constant c (bp_x / bp_y: the same rule)
        v, c, vk, ck_ = (x, yv, xk, yk) if tx else (y, xv, yk, xk)
        if id(v) not in self.need:
            return
        cobj = y if tx else x
        if vk == _F and type(gk) is tuple and type(cobj) is np.ndarray and ck_ == gk:
            self.acc(v, self.dot_all(g, c, gk), _F, neg=gneg)
            return
        self.acc(v, *mul(g, c, _arith_kind(gk, ck_), gk, ck_, gneg))

    @staticmethod
    def product(a, b, k, ak, bk, neg):
        """``(expression, kind, fresh, negated)`` of the contribution ``a * b`` (kind
        ``k``), whose factor ``a`` is negated if ``neg``: a factor that is the literal
        1.0 or -1.0 leaves the other operand as it is (with a sign) when that already
        has the result's shape - ``-1.0 * x`` is ``-x`` bit for bit."""
        if ak == _F and bk == k and _atomic(b):
            lit = _fold(a)                      # (a scalar factor is never negated)
            if lit in ("1.0", "-1.0"):
                return b, k, False, lit == "-1.0"
        if bk == _F and ak == k and _atomic(a):
            lit = _fold(b)
            if lit in ("1.0", "-1.0"):
                return a, k, False, neg != (lit == "-1.0")
        return f"{a} * {_p(b)}", k, type(k) is tuple, neg

    def bw_binary(self, n, spec, args, kw):
        x, y = args
        nx, ny = self._needs(x, y)
        if not (nx or ny):
            return
        g, gk, gneg = self.take_signed(n, uses=int(nx) + int(ny))
        svjp = spec.scalar_vjp
        kinds = {"g": gk, "ans": kind_of(n.value), "x": self.kind(x), "y": self.kind(y)}
        ops = {"g": g, "ans": self.vname[id(n)], "x": self.val(x), "y": self.val(y)}
        for i, v in ((0, x), (1, y)):
            if (nx, ny)[i]:
                if not self._bin_inline(spec, i, v, y, ops, kinds, gneg):
                    if gneg:
                        ops["g"], kinds["g"] = self.take(n)
                        gneg = False
                    if svjp is not None and all(kinds[k] == _F for k in ("g", "x", "y")):
                        args = f"({ops['g']}, {ops['ans']}, {ops['x']}, {ops['y']})"
                        one = getattr(spec.derivative, "floats_const", None)
                        if one is not None and type(x) is not type(y):
                            c = f"{self.fn(one[i])}{args}"      # the tape's one-argument rule
                        else:
                            c = f"{self.fn(svjp)}{args}[{i}]"
                        self.acc(v, c, _F)
                    else:
                        self._bin_vjp(n, spec, i, v, ops["g"], ops["ans"], ops["x"],
                                      ops["y"])

    def _bin_inline(self, spec, i, v, y, ops, kinds, gneg):
        """Write argument ``i``'s contribution from the template its declared derivative
        gives (extend.binary_primitive): on floats the float rule, where an operand it
        reads is an array the array rule (its sign carried as a flag: the rules are
        linear in g); False where neither applies (the rule is called)."""
        rule = spec.derivative
        if spec.inline is None or rule is None or not hasattr(rule, "trees"):
            return False
        const = None if type(y) is Var else y
        used = rule.operands(i, const)
        ks = [kinds[u] for u in used]
        if all(k == _F for k in ks) and spec.scalar_vjp is not None:
            # (the pair of float rules where both are traced; with y a constant, the
            # special case the tape's one-argument rule takes)
            t = self.bin_template(spec, "float", i, const)
            if t is None:
                return False
            if gneg:
                return False            # (a scalar adjoint is never negated)
            self.acc(v, t.format(**ops), _F)
            return True
        if not any(type(k) is tuple for k in ks) or any(k in (_N, _O) for k in ks) \
                or not rule.calls_read_arrays(i, const, {u for u, k in zip(used, ks)
                                                         if type(k) is tuple}):
            return False
        t = self.bin_template(spec, "array", i, const)
        if t is None:
            return False
        for name, e in rule.shared():
            if name in t and name not in ops:
                # a call both derivatives make: computed once for the node
                ops[name] = self.tmp("s")
                self.emit(f"{ops[name]} = {e.format(**ops)}")
        flip = t.startswith("-{g}")
        c = (t[1:] if flip else t).format(**ops)
        k = _arith_kind(*ks)
        self.acc(v, c, k, fresh=type(k) is tuple and c != ops["g"], neg=gneg != flip)
        return True

    def bin_template(self, spec, target, i, const):
        """:meth:`template` for argument ``i`` of a declared binary derivative."""
        helpers = spec.inline.helpers
        helpers = helpers() if callable(helpers) else helpers
        for k, f in helpers.items():
            if self.helpers.get(k, _RUNTIME.get(k, f)) is not f:
                return None
        self.helpers.update(helpers)
        return spec.derivative.template(target, i, const)

    def _bin_vjp(self, n, spec, i, v, g, ans, xv, yv):
        vjp = spec.vjps[i]
        args = n.bp._args(n)
        vals = [a.value if type(a) is Var else a for a in args]
        c = f"{self.fn(vjp)}({g}, {ans}, {xv}, {yv})"
        self.acc(v, c, kind_of(_probe_vjp(vjp, n, vals)))

    def bw_sum_all(self, n, spec, args, kw):
        (x,) = args
        if id(x) not in self.need:
            return
        g, gk = self.take(n)
        xk = self.kind(x)
        if gk == _F and type(xk) is tuple:
            self.acc(x, g, _F)
            return
        _expand_back = library.lookup("_expand_back")
        c = f"{self.fn(_expand_back)}({g}, {self.val(x)}, None, False)"
        probe = _expand_back(n.adj, x.value, None, False)
        self.acc(x, c, kind_of(probe))

    def bw_getitem(self, n, spec, args, kw):
        p, idx = args
        if id(p) not in self.need:
            return
        _is_basic = library.lookup("_is_basic")
        _scatter_add_raw = library.lookup("_scatter_add_raw")
        g, gk = self.take(n)
        pk = self.kind(p)
        if type(pk) is not tuple:
            raise NotCompilable("getitem of a scalar")
        el = self.elements.get(id(p))
        if el is not None:
            # eager: zeros, the first contribution assigned, later ones added (0.0 + g
            # where an element is hit first by a later one: -0.0 becomes 0.0 there too)
            i = idx % pk[0]
            prev = el[1].get(i)
            if prev is None:
                el[1][i] = g if el[0] else f"0.0 + {g}"
            else:
                el[1][i] = f"{_p(prev)} + {g}"
            el[0] = False
            if len(el[1][i]) > 400:
                t = self.tmp("e")
                self.emit(f"{t} = {el[1][i]}")
                el[1][i] = t
            return
        if gk == _F or type(gk) is tuple:
            basic = type(idx) in (int, slice) or _is_basic(idx)
            sub = _subscript(idx) or self.const(idx, "i")
            st = self.adj.get(id(p))
            name = self.aname(id(p))
            if st is None:
                self.emit(f"{name} = _zeros({pk!r})")
                if basic:
                    self.emit(f"{name}[{sub}] = {g}")
                else:
                    self.emit(f"_add_at({name}, {sub}, {g})")
                self.adj[id(p)] = _Adj(name, pk, True)
                return
            if st.neg:
                self.emit(f"{name} = -{_p(st.expr)}")
                st.expr, st.owned, st.neg = name, True, False
            if not st.owned:
                self.emit(f"{name} = _copy_in({st.expr}, {pk!r})")
                st.expr, st.kind, st.owned = name, pk, True
            if basic:
                self.emit(f"{st.expr}[{sub}] += {g}")
            else:
                self.emit(f"_add_at({st.expr}, {sub}, {g})")
            return
        c = f"{self.fn(_scatter_add_raw)}({g}, {self.const(idx, 'i')}, {pk!r})"
        self.acc(p, c, pk)

    def bw_fused(self, n, spec, args, kw):
        pairs, parts = n.x[3], n.y      # a two-phase node: the partials are saved
        pn = f"P{self.vname[id(n)][1:]}"
        todo = [(i, p) for i, p in pairs if id(p) in self.need]
        if not todo:
            return
        g, gk = self.take(n, uses=len(todo))
        for i, p in todo:
            part = parts[i]
            pk_ = kind_of(part)
            if g == "1.0":
                self.acc(p, f"{pn}[{i}]", pk_)
            else:
                k = _arith_kind(gk, pk_)
                self.acc(p, f"{g} * {pn}[{i}]", k, fresh=type(part) is np.ndarray)

    def bw_shaped(self, n, spec, args, todo, g, gk):
        """The contributions of a binary rule whose template depends on the operands'
        shapes (``spec.inline.vjp_shaped``: matmul's, declared beside it); False where
        it gives none (the rule is called)."""
        a, b = args
        sa, sb = np.shape(a.value if type(a) is Var else a), \
            np.shape(b.value if type(b) is Var else b)
        gs = gk if type(gk) is tuple else ()
        if gs != np.shape(n.value):
            return False            # (a lazily broadcast float adjoint of an array)
        ts = [spec.inline.vjp_shaped(i, sa, sb, gs) for i, _ in todo]
        if None in ts:
            return False
        ops = {"g": g, "x": _p(self.val(a)), "y": _p(self.val(b))}
        for (i, p), t in zip(todo, ts):
            self.acc(p, t.format(**ops), sa if i == 0 else sb, fresh=True)
        return True

    def bw_generic(self, n, spec, args, kw):
        todo = [(i, a) for i, a in enumerate(args) if type(a) is Var and id(a) in self.need]
        if not todo:
            return
        g, gk = self.take(n, uses=1 if spec.vjp_all is not None else len(todo))
        if spec.inline is not None and spec.inline.vjp_shaped is not None and not kw \
                and len(args) == 2 and self.bw_shaped(n, spec, args, todo, g, gk):
            return
        ans = self.vname[id(n)]
        vals = [self.val(a) for a in args]
        kws = [f"{k}={self.const(v)}" for k, v in kw.items()]
        argl = ", ".join([g, ans] + vals + kws)
        plain = [a.value if type(a) is Var else a for a in args]
        if spec.vjp_all is not None:
            t = self.tmp("c")
            self.emit(f"{t} = {self.fn(spec.vjp_all, 'vjp')}({argl})")
            probes = _probe_call(spec.vjp_all, n, plain, kw)
            for i, p in todo:
                if probes[i] is None:
                    raise NotCompilable(f"argument {i} of '{spec.name}' has no VJP")
                self.acc(p, f"{t}[{i}]", kind_of(probes[i]))
            return
        for i, p in todo:
            vjp = spec.vjps[i]
            c = f"{self.fn(vjp, 'vjp')}({argl})"
            self.acc(p, c, kind_of(_probe_call(vjp, n, plain, kw)))


class _Program:
    """A generated replay function and what it was made from."""

    __slots__ = ("fn", "source", "guards", "nodes", "inexact")

    def __init__(self, fn, source, guards, nodes, inexact):
        self.fn = fn
        self.source = source
        self.guards = guards
        self.nodes = nodes
        self.inexact = inexact      # fusions, value-only kernels: equal to the tape
        #                             within a few ulps


def build(rec, inputs, output, exact=False, value_only=False, name="retaped"):
    """Generate, compile and return the replay function of ``rec`` (a _Program)."""
    gen = _Gen(rec, inputs, output, exact, value_only)
    body = gen.generate()
    params = ", ".join(f"{k}={k}" for k in gen.consts)
    head = f"def {name}(x{', *, ' + params if params else ''}):"
    src = "\n".join([head] + ["    " + line for line in body]) + "\n"
    ns = dict(_RUNTIME)
    ns.update(gen.helpers)
    ns.update(gen.consts)
    code = builtins.compile(src, f"<sl.compile {name}>", "exec")
    exec(code, ns)
    return _Program(ns[name], src, rec.guards, len(rec.nodes),
                    bool(gen.fused) or gen.value_paths)
