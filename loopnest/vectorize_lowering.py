"""prepare_for_codegen's "vectorize" pass: vectorized loops become vector statements
(Ramp / Broadcast) where their bodies allow. ``loopnest.passes`` runs it after the
indices are flattened; loops it cannot lower stay vectorized loops.
"""
from __future__ import annotations

from te import expr as E
from te.expr import Broadcast, IntImm, Ramp, Var, substitute
from te.queries import has_load, int_value, structural_key, uses_var
from te.simplify import const_int_bounds

from .lazy_analysis import legality_checks
from .queries import stmt_loaded_buffers, stmt_stored_buffers
from .stmt import Allocate, Block, Cond, For, ForKind, Let, Prefetch, Stmt, StmtMutator, Store, as_block
from .target import host_target
from .transforms._rewrite import add, mul, sub, substitute_stmt, tidy

__all__ = ["lower_vectorized_loops", "version_guarded_loops", "versioned", "masked_lanes", "interval_condition",
           "affine_in", "lane_pieces"]


def lower_vectorized_loops(root: Stmt) -> Stmt:
    """Replace each vectorized loop of constant extent whose body holds only Stores and Lets
    by vector statements: the variable becomes ``ramp(start, 1, lanes)``, scalar operands
    next to vector ones become broadcasts, loads with a vector index become vector loads.

    Before / after (indices already flattened)::

        vectorized for (int i_inner = 0; i_inner < 4; i_inner++) {
          B[i_outer * 4 + i_inner] = A[i_outer * 4 + i_inner] + 1.0f;
        }
        ->  B[ramp(i_outer * 4, 1, 4)] = A[ramp(i_outer * 4, 1, 4)] + broadcast(1.0f, 4);

    Loops it cannot lower stay vectorized loops (backends run them serially, with a hint):
    inner loops or ifs in the body, a store whose index does not depend on the loop, an
    ``if_then_else`` whose condition varies across lanes, a non-constant extent. On LLVM,
    ``version_guarded_loops`` then versions those guarded by an affine ``if`` or
    ``if_then_else`` (``split_with_mask``, a padded border). Lowering
    runs the statements of the body one after the other for all lanes, which the legality
    check of ``vectorize`` (no dependence carried by the loop) makes equivalent to the loop.

    >>> from te import Buffer, Var
    >>> from loopnest.stmt import Block, For, ForKind, Store
    >>> A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "float32")
    >>> i = Var("i")
    >>> loop = For(i, 0, 8, Block((Store(B, (i,), A[i] + 1.0),)), ForKind.VECTORIZED)
    >>> print(lower_vectorized_loops(Block((loop,))))
    B[ramp(0, 1, 8)] = A[ramp(0, 1, 8)] + broadcast(1.0f, 8);
    """
    return _EachVectorizedLoop(_vectorize_loop).visit(root)


class _EachVectorizedLoop(StmtMutator):
    """Rewrite each vectorized loop, inner loops first, by ``rewrite(loop)`` (None: keep it)."""

    def __init__(self, rewrite):
        self.rewrite = rewrite

    def visit_For(self, s: For):
        s = self.generic(s)
        if s.kind != ForKind.VECTORIZED:
            return s
        out = self.rewrite(s)
        return s if out is None else out


def _vectorize_loop(f: For) -> Stmt | None:
    n = legality_checks().constant_extent(f)
    if n is None or n < 1:
        return None
    if n == 1:
        return substitute_stmt(f.body, {f.var: f.start})
    return _lanes(f, f.body, n)


def version_guarded_loops(root: Stmt) -> Stmt:
    """The LLVM target's pass ``version_guarded_vectors``: each loop still vectorized after
    ``lower_vectorized_loops`` whose guards allow it becomes ``versioned`` (vector code where
    every guard holds for every lane; elsewhere the same vector code with the lanes masked,
    ``masked_lanes``, where its stores allow, else the loop, serial). Only LLVM gets it: CUDA
    runs a vector statement as one statement per lane, so there the loop stays one loop.

    >>> from te import Buffer, Var
    >>> A = Buffer("A", (10,), "float32")
    >>> i = Var("i")
    >>> loop = For(i, 0, 4, Block((Cond(i < 3, Block((Store(A, (i,), 1.0),))),)), ForKind.VECTORIZED)
    >>> print(version_guarded_loops(Block((loop,))))
    for (int i = 0; i < 4; i++) {
      if (i < 3) {
        A[i] = 1.0f;
      }
    }
    """
    return _Versioning().visit(root)


class _Versioning(StmtMutator):
    """``versioned`` for each vectorized loop, knowing the ranges of the loops around it and
    the buffers private to the thread that runs it (``masked_lanes``)."""

    def __init__(self):
        self.ranges: dict = {}
        self.private: frozenset = frozenset()   # ids of buffers allocated in this thread

    def visit_Block(self, s: Block):
        saved = self.private
        try:
            out, changed = [], False
            for x in s.stmts:
                if isinstance(x, Allocate) and x.scope in ("global", "local"):
                    self.private = self.private | {id(x.buffer)}
                nx = self.visit(x)
                changed |= nx is not x
                if nx is not None:
                    out.extend(nx.stmts if isinstance(nx, Block) and not isinstance(x, Block) else [nx])
        finally:
            self.private = saved
        return Block(tuple(out)) if changed else s

    def visit_For(self, s: For):
        saved = self.private
        if s.kind in ForKind.CONCURRENT:
            self.private = frozenset()     # an allocation outside is shared by the iterations
        self.ranges[s.var] = (s.start, tidy(sub(s.stop, s.start)))
        try:
            s = self.generic(s)
        finally:
            del self.ranges[s.var]
            self.private = saved
        if s.kind != ForKind.VECTORIZED:
            return s
        n = legality_checks().constant_extent(s)
        if n is None or n < 2:
            return s
        out = versioned(s, n, self.ranges, self.private)
        return s if out is None else out


def _lanes(f: For, body: Stmt, n: int) -> Stmt | None:
    """``body`` for the ``n`` lanes of loop ``f`` at once, in the pieces of ``lane_pieces``;
    None when it cannot be."""
    pieces = []
    for offset, size in lane_pieces(n, _register_lanes(body)):
        start = tidy(add(f.start, offset))
        if size == 1:
            piece = substitute_stmt(body, {f.var: start})
        else:
            try:
                piece = _Vectorizer(f.var, start, size).stmt(body)
            except TypeError:  # some node cannot take vector operands: leave the loop
                return None
            if piece is None:
                return None
        pieces.append(piece)
    if len(pieces) == 1:
        return pieces[0]
    return Block(tuple(x for piece in pieces for x in as_block(piece).stmts))


def _register_lanes(body: Stmt) -> int:
    """Elements of the widest type ``body`` loads or stores that fit in one vector register of
    the host (the machine LLVM generates code for)."""
    bits = max((b.dtype.bits * b.dtype.lanes for b in stmt_loaded_buffers(body) + stmt_stored_buffers(body)),
               default=32)
    return max(1, host_target().vector_bits // bits)


def lane_pieces(n: int, register_lanes: int = 16) -> list[tuple[int, int]]:
    """``(first lane, lanes)`` of the vector statements that compute ``n`` lanes: one piece,
    or, for more lanes than one vector register holds (``register_lanes``) that are not a
    power of two, pieces of powers of two, largest first. LLVM splits a power-of-two vector
    wider than a register into whole registers, but one of 48 floats (3 AVX-512 registers) it
    takes apart element by element and keeps in memory: a matmul tile of 6 x 48 ran at 5
    GFLOP/s against 150 for 6 x 64, and 6 x 24 at 3 against 123 in pieces. Within one
    register a vector stays whole (6 x 12 on one thread: 85 GFLOP/s whole, 69 in pieces).
    Lowering runs the body's statements for the lanes of a piece before the next piece,
    which the legality of ``vectorize`` (no lane depends on another) makes equivalent.

    >>> lane_pieces(48), lane_pieces(12), lane_pieces(12, register_lanes=8), lane_pieces(25)
    ([(0, 32), (32, 16)], [(0, 12)], [(0, 8), (8, 4)], [(0, 16), (16, 8), (24, 1)])
    """
    if n <= register_lanes or n & (n - 1) == 0:
        return [(0, n)]
    pieces, first = [], 0
    while first < n:
        size = 1 << ((n - first).bit_length() - 1)
        pieces.append((first, size))
        first += size
    return pieces


def versioned(f: For, n: int, ranges: dict | None = None, private: frozenset = frozenset()) -> Stmt | None:
    """For a vectorized loop ``f`` of ``n`` iterations guarded by conditions that hold on an
    interval of its variable (``interval_condition``) -- its body one ``if (c) then``, or
    its ``if_then_else(c, t, e)`` expressions whose ``c`` varies across the lanes --:
    ``if (each c at the first lane and at the last, and no side of c wraps in between)
    {the body for all lanes, each if_then_else replaced by its t} else {f, serial}``
    (``_no_wrap_tests``). Where ``c`` holds at both ends of the lanes it holds for every
    lane, so the vector statements compute exactly what the loop would; None when there is
    no such condition or the body does not vectorize even so. The ``else`` branch is the
    body's vector statements with the lanes masked (``masked_lanes``, given the ``ranges``
    of the loops around ``f`` and the buffers ``private`` to its thread) where the only
    condition is the ``if`` and its stores allow it, else ``f``, serial.

    >>> from te import Buffer, Var
    >>> A, B = Buffer("A", (10,), "float32"), Buffer("B", (10,), "float32")
    >>> o, i = Var("o"), Var("i")
    >>> body = Block((Cond(o * 4 + i < 10, Block((Store(B, (o * 4 + i,), A[o * 4 + i] * 2.0),))),))
    >>> print(versioned(For(i, 0, 4, body, ForKind.VECTORIZED), 4))
    if (o * 4 < 10 && o * 4 + 3 < 10 && o * 4 <= o * 4 + 3) {
      B[ramp(o * 4, 1, 4)] = A[ramp(o * 4, 1, 4)] * broadcast(2.0f, 4);
    } else {
      for (int i = 0; i < 4; i++) {
        if (o * 4 + i < 10) {
          B[o * 4 + i] = A[o * 4 + i] * 2.0f;
        }
      }
    }
    >>> pad = E.IfThenElse(o * 4 + i >= 1, A[o * 4 + i - 1], E.FloatImm(0.0, "float32"))
    >>> print(versioned(For(i, 0, 4, Block((Store(B, (o * 4 + i,), pad),)), ForKind.VECTORIZED), 4))
    if (o * 4 >= 1 && o * 4 + 3 >= 1 && o * 4 <= o * 4 + 3) {
      B[ramp(o * 4, 1, 4)] = A[ramp(o * 4 - 1, 1, 4)];
    } else {
      for (int i = 0; i < 4; i++) {
        B[o * 4 + i] = if_then_else(o * 4 + i >= 1, A[o * 4 + i - 1], 0.0f);
      }
    }
    """
    body, guards = f.body, []
    stmts = body.stmts
    if (len(stmts) == 1 and isinstance(stmts[0], Cond) and stmts[0].otherwise is None
            and interval_condition(stmts[0].cond, f.var)):
        guards.append(stmts[0].cond)
        body = stmts[0].then
    taken = _TakenBranches(f.var)
    body = taken.visit(body)
    guards += taken.conditions
    if not guards:
        return None
    fast = _lanes(f, body, n)
    if fast is None:
        return None
    first, last = tidy(f.start), tidy(add(f.start, n - 1))
    tests: dict = {}         # each test once (those not using f.var unchanged)
    for c in guards:
        for term in _conjuncts(c):
            if not uses_var(term, f.var):
                tests.setdefault(structural_key(term, vars_by_identity=True), term)
                continue
            at = [substitute(term, {f.var: first}), substitute(term, {f.var: last})]
            steady = _no_wrap_tests(term, f.var, first, last, n)
            if steady is None:
                return None
            for t in at + steady:
                tests.setdefault(structural_key(t, vars_by_identity=True), t)
    every_lane = None
    for t in tests.values():
        every_lane = t if every_lane is None else E.And(every_lane, t)
    every_lane = tidy(every_lane)
    serial = f.replace(kind=ForKind.SERIAL)
    known = int_value(every_lane)
    if known:                   # a constant extent and start: the vector code is all there is
        return as_block(fast)
    if not taken.conditions and len(guards) == 1:
        masked = masked_lanes(f, guards[0], body, n, ranges or {}, private)
        if masked is not None:
            serial = masked
    if known is not None:
        return Block((serial,))
    return Cond(every_lane, as_block(fast), Block((serial,)))


class _Fail(Exception):
    pass


class _Rewrite:
    def stmt(self, s: Stmt) -> Stmt | None:
        """``self._stmt(s)``, or None where some construct of ``s`` cannot be rewritten."""
        try:
            return self._stmt(s)
        except _Fail:
            return None


def masked_lanes(f: For, guard: E.Expr, body: Stmt, n: int, ranges: dict, private: frozenset) -> Stmt | None:
    """The body of the vectorized loop ``f`` (``n`` lanes) that runs only where ``guard``
    holds, as vector statements with the other lanes masked: the mask is ``guard`` at each
    lane; a vector load that may leave its buffer in a masked lane loads only the lanes of the
    mask (``if_then_else(mask, load, 0)``, an ``llvm.masked.load``); a store keeps the old
    value in the masked lanes (``select(mask, value, old)``), which only a store to a buffer
    ``private`` to the thread (allocated inside the innermost parallel loop around ``f``)
    whose every lane is inside the buffer (over the loops' ``ranges``) may do. None where a
    store or a load does not allow it (the loop then runs serially). The register tile of a
    partial column tile stays in registers: its accumulators are read and written whole.

    >>> from te import Buffer, Var
    >>> A, L = Buffer("A", (10,), "float32"), Buffer("L", (4,), "float32")
    >>> o, i = Var("o"), Var("i")
    >>> body = Block((Store(L, (i,), L[i] + A[o * 4 + i]),))
    >>> print(masked_lanes(For(i, 0, 4, body, ForKind.VECTORIZED), o * 4 + i < 10, body, 4, {}, frozenset({id(L)})))
    L[ramp(0, 1, 4)] = select(ramp(o * 4, 1, 4) < broadcast(10, 4), L[ramp(0, 1, 4)] + \
if_then_else(ramp(o * 4, 1, 4) < broadcast(10, 4), A[ramp(o * 4, 1, 4)], broadcast(0.0f, 4)), L[ramp(0, 1, 4)]);
    >>> masked_lanes(For(i, 0, 4, body, ForKind.VECTORIZED), o * 4 + i < 10, body, 4, {}, frozenset()) is None
    True
    """
    if len(lane_pieces(n, _register_lanes(body))) != 1:
        return None
    vec = _Vectorizer(f.var, f.start, n)
    try:
        mask = vec.expr(guard)
    except _Fail:
        return None
    lanes = vec.stmt(body)
    if lanes is None or not mask.dtype.is_vector:
        return None
    return _Masked(mask, ranges, private).stmt(lanes)


class _Masked(E.ExprMutator):
    """The statements of ``masked_lanes``: each store's value selected by ``mask``, each
    vector load that may leave its buffer masked; ``_Fail`` where a store may not be."""

    def __init__(self, mask: E.Expr, ranges: dict, private: frozenset):
        self.mask = mask
        self.ranges = ranges
        self.private = private

    stmt = _Rewrite.stmt

    def _stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, Block):
            return Block(tuple(self._stmt(x) for x in s.stmts))
        if isinstance(s, Let):
            return s.replace(value=self.visit(s.value), body=self._stmt(s.body))
        if isinstance(s, Store) and id(s.buffer) in self.private and self._inside(s.buffer, s.indices):
            old, value = E.Load(s.buffer, s.indices), self.visit(s.value)
            if value.dtype == old.dtype and old.dtype.lanes == self.mask.dtype.lanes:
                return s.replace(value=E.Select(self.mask, value, old))
        raise _Fail

    def _inside(self, buffer, indices) -> bool:
        """Whether every lane of the flat ``indices`` is an element of ``buffer``."""
        size = buffer.static_size()
        if size is None or len(indices) != 1:
            return False
        lo, hi = const_int_bounds(indices[0], self.ranges)
        return lo is not None and hi is not None and 0 <= lo and hi < size

    def visit_Load(self, e: E.Load) -> E.Expr:
        e = self.generic(e)
        if not e.dtype.is_vector or self._inside(e.buffer, e.indices):
            return e
        idx = e.indices[-1]
        if len(e.indices) != 1 or not isinstance(idx, Ramp) or int_value(idx.stride) != 1:
            raise _Fail      # a gather that may leave its buffer
        return E.IfThenElse(self.mask, e, E.const(0, e.dtype))


class _TakenBranches(StmtMutator):
    """Replace each ``if_then_else(c, t, e)`` whose condition ``c`` varies with ``var`` and
    holds on an interval of it by ``t``, noting ``c`` in ``conditions`` (valid where every
    ``c`` holds for every lane)."""

    def __init__(self, var: Var):
        self.var = var
        self.conditions: list = []

    def visit_expr(self, e: E.Expr) -> E.Expr:
        return _TakenExpr(self).visit(e)


class _TakenExpr(E.ExprMutator):
    def __init__(self, owner: _TakenBranches):
        self.owner = owner

    def visit_IfThenElse(self, e: E.IfThenElse) -> E.Expr:
        var = self.owner.var
        if uses_var(e.cond, var) and interval_condition(e.cond, var):
            self.owner.conditions.append(e.cond)
            return self.visit(e.t)
        return self.generic(e)


def _no_wrap_tests(cmp: E.Expr, var: Var, first: E.Expr, last: E.Expr, n: int) -> list | None:
    """Tests that no side of the comparison ``cmp`` wraps between the lanes ``first`` and
    ``last`` (integer arithmetic wraps: ``i * 268435456`` over 16 lanes of int32 passes 2^31
    at lane 8, so a condition can hold at both ends and not between). A side ``e`` that
    moves by a constant ``a`` per lane, with ``|a| * (n - 1)`` below half the type's range,
    wraps at most once, and then ends below where it started (``a > 0``): the test is
    ``e(first) <= e(last)`` (``>=`` for ``a < 0``). None when a side's step is not such a
    constant.

    >>> from te import Var
    >>> o, i = Var("o"), Var("i")
    >>> [str(t) for t in _no_wrap_tests(o * 4 + i < 10, i, IntImm(0), IntImm(3), 4)]
    ['o * 4 <= o * 4 + 3']
    >>> _no_wrap_tests(i * o < 10, i, IntImm(0), IntImm(3), 4) is None     # a step of o
    True
    """
    tests = []
    for e in (cmp.a, cmp.b):
        if not uses_var(e, var):
            continue
        one, zero = substitute(e, {var: IntImm(1, var.dtype)}), substitute(e, {var: IntImm(0, var.dtype)})
        step = int_value(tidy(sub(one, zero)))
        if step is None or abs(step) * (n - 1) >= 1 << (e.dtype.bits - 1):
            return None
        lo, hi = tidy(substitute(e, {var: first})), tidy(substitute(e, {var: last}))
        tests.append(E.LE(lo, hi) if step > 0 else E.GE(lo, hi))
    return tests


def _conjuncts(c: E.Expr) -> list:
    return _conjuncts(c.a) + _conjuncts(c.b) if isinstance(c, E.And) else [c]


_INTERVAL_COMPARISONS = (E.LT, E.LE, E.GT, E.GE, E.EQ)


def interval_condition(c: E.Expr, var: Var) -> bool:
    """Whether the values of ``var`` that satisfy ``c`` form an interval, as this test can
    show: ``c`` is a comparison (``< <= > >= ==``, not ``!=``) of two expressions affine in
    ``var`` (``affine_in``), or a conjunction of such, with no loads, on signed integers of
    32 or 64 bits. (That holds for the exact values; integer arithmetic wraps, so
    ``versioned`` also tests at run time that no lane wraps.)

    >>> from te import Var, cast
    >>> i, n = Var("i"), Var("n")
    >>> interval_condition((i * 4 + 1 < n) & (i >= 2), i), interval_condition(i % 4 < 2, i)
    (True, False)
    >>> interval_condition(cast(i, "uint32") - 2 < 3, i)    # wraps below 0
    False
    """
    if has_load(c):
        return False
    if isinstance(c, E.And):
        return interval_condition(c.a, var) and interval_condition(c.b, var)
    return (isinstance(c, _INTERVAL_COMPARISONS) and c.a.dtype.is_int and c.a.dtype.bits >= 32
            and not c.a.dtype.is_vector and affine_in(c.a, var) and affine_in(c.b, var))


def affine_in(e: E.Expr, var: Var) -> bool:
    """Whether ``e`` is ``a * var + b`` with ``a`` and ``b`` not using ``var``: built from
    ``var`` by ``+``, ``-`` and ``*`` by expressions without it.

    >>> from te import Var
    >>> i, n = Var("i"), Var("n")
    >>> affine_in((i + 2) * n - i, i), affine_in(i * i, i), affine_in(i / 2, i)
    (True, False, False)
    """
    if not uses_var(e, var):
        return True
    if e is var:
        return True
    if isinstance(e, (E.Add, E.Sub)):
        return affine_in(e.a, var) and affine_in(e.b, var)
    if isinstance(e, E.Mul):
        return (not uses_var(e.a, var) and affine_in(e.b, var)) or (not uses_var(e.b, var) and affine_in(e.a, var))
    return False


class _Vectorizer:
    """Rewrite a loop body for all lanes at once; ``None`` when some construct cannot be."""

    def __init__(self, var: Var, start: E.Expr, lanes: int):
        self.var = var
        self.lanes = lanes
        self.ramp = Ramp(start, IntImm(1, var.dtype), lanes)
        self.env: dict = {}

    # -- statements --------------------------------------------------------------------
    stmt = _Rewrite.stmt

    def _stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, Block):
            return Block(tuple(self._stmt(x) for x in s.stmts))
        if isinstance(s, Store):
            idx = [self.expr(i) for i in s.indices]
            if (not idx or not idx[-1].dtype.is_vector or isinstance(idx[-1], Broadcast)
                    or any(i.dtype.is_vector for i in idx[:-1])):
                raise _Fail  # a lane-invariant store (or a vector index not in the last place)
            value = self.expr(s.value)
            return Store(s.buffer, tuple(idx), self.bc(value))
        if isinstance(s, Prefetch):
            idx = [self.expr(i) for i in s.indices]
            if any(i.dtype.is_vector for i in idx[:-1]):
                raise _Fail
            return s.replace(indices=tuple(idx))
        if isinstance(s, Let):
            value = self.expr(s.value)
            if value.dtype.is_vector:
                nv = Var(s.var.name, value.dtype)
                self.env[s.var] = nv
                return Let(nv, value, self._stmt(s.body))
            return Let(s.var, value, self._stmt(s.body))
        raise _Fail

    # -- expressions -------------------------------------------------------------------
    def bc(self, e: E.Expr) -> E.Expr:
        return e if e.dtype.is_vector else Broadcast(e, self.lanes)

    def expr(self, e: E.Expr) -> E.Expr:
        t = type(e)
        if t is Var:
            if e is self.var:
                return self.ramp
            return self.env.get(e, e)
        if t in (E.IntImm, E.FloatImm):
            return e
        if t in (Ramp, Broadcast):
            raise _Fail
        if isinstance(e, E.BinaryOp):
            a, b = self.expr(e.a), self.expr(e.b)
            if not (a.dtype.is_vector or b.dtype.is_vector):
                return e.replace(a=a, b=b)
            r = _ramp_arith(t, a, b)
            if r is not None:
                return r
            return t(self.bc(a), self.bc(b))
        if t is E.Not:
            a = self.expr(e.a)
            return e.replace(a=a)
        if t is E.Cast:
            a = self.expr(e.value)
            if not a.dtype.is_vector:
                return e.replace(value=a)
            if isinstance(a, Ramp) and e.dtype.is_integer:
                return Ramp(tidy(E.Cast(e.dtype, a.base)), tidy(E.Cast(e.dtype, a.stride)), a.lanes)
            return E.Cast(e.dtype.with_lanes(self.lanes), a)
        if t is E.Select or t is E.IfThenElse:
            c, x, y = self.expr(e.cond), self.expr(e.t), self.expr(e.f)
            if not any(z.dtype.is_vector for z in (c, x, y)):
                return e.replace(cond=c, t=x, f=y)
            if t is E.IfThenElse and c.dtype.is_vector:
                raise _Fail  # only the taken side may be evaluated, lane by lane
            return t(c, self.bc(x), self.bc(y))
        if t is E.Load:
            idx = [self.expr(i) for i in e.indices]
            if not any(i.dtype.is_vector for i in idx):
                return e.replace(indices=tuple(idx))
            if any(i.dtype.is_vector for i in idx[:-1]):
                raise _Fail
            return E.Load(e.buffer, tuple(idx))
        if t is E.Let:
            value = self.expr(e.value)
            if value.dtype.is_vector:
                nv = Var(e.var.name, value.dtype)
                self.env[e.var] = nv
                body = self.expr(e.body)
                return E.Let(nv, value, body)
            return e.replace(value=value, body=self.expr(e.body))
        if t is E.Call:
            args = [self.expr(a) for a in e.args]
            if not any(a.dtype.is_vector for a in args):
                return e.replace(args=tuple(args))
            return E.Call(e.name, [self.bc(a) for a in args], e.dtype.with_lanes(self.lanes))
        raise _Fail


def _ramp_arith(t, a: E.Expr, b: E.Expr) -> E.Expr | None:
    """Keep integer index arithmetic in Ramp form: ramp + x, ramp - x, ramp * x, ramp + ramp."""
    if not (a.dtype.is_integer and b.dtype.is_integer):
        return None
    ra, rb = isinstance(a, Ramp), isinstance(b, Ramp)
    sa, sb = not a.dtype.is_vector, not b.dtype.is_vector
    lanes = a.lanes if ra else b.lanes if rb else None
    if lanes is None:
        return None
    if t is E.Add:
        if ra and sb:
            return _ramp(add(a.base, b), a.stride, lanes)
        if sa and rb:
            return _ramp(add(a, b.base), b.stride, lanes)
        if ra and rb:
            return _ramp(add(a.base, b.base), add(a.stride, b.stride), lanes)
    if t is E.Sub:
        if ra and sb:
            return _ramp(sub(a.base, b), a.stride, lanes)
        if sa and rb:
            return _ramp(sub(a, b.base), sub(IntImm(0, b.stride.dtype), b.stride), lanes)
        if ra and rb:
            return _ramp(sub(a.base, b.base), sub(a.stride, b.stride), lanes)
    if t is E.Mul:
        if ra and sb:
            return _ramp(mul(a.base, b), mul(a.stride, b), lanes)
        if sa and rb:
            return _ramp(mul(a, b.base), mul(a, b.stride), lanes)
    return None


def _ramp(base: E.Expr, stride: E.Expr, lanes: int) -> E.Expr:
    base, stride = tidy(base), tidy(stride)
    if isinstance(stride, IntImm) and stride.value == 0:
        return Broadcast(base, lanes)
    return Ramp(base, stride, lanes)
