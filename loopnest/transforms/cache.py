"""cache_accesses: a local buffer for the region of a buffer that one iteration of a loop
touches, with copy-in / copy-out loops.

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> A = Buffer("A", (4, 6), "float32")
>>> B = Compute("B", (4, 4), lambda i, j: A[i, j] + A[i, j + 2])
>>> nest = LoopNest([B]); i, j = nest.get_loops_for(B)
>>> A_local = nest.cache_accesses(A, "A_local", i)
>>> A_local.shape
(1, 6)
>>> print(nest)
for (int i = 0; i < 4; i++) {
  for (int A_local_i1 = 0; A_local_i1 < 6; A_local_i1++) {
    A_local[0, A_local_i1] = A[i, A_local_i1];
  }
  for (int j = 0; j < 4; j++) {
    B[i, j] = A_local[0, j] + A_local[0, j + 2];
  }
}
"""
from __future__ import annotations

from te.expr import Expr, ExprMutator, IntImm, Load, Var, check_identifier, structural_key
from te.intrinsics import cast
from te.queries import fold_int, free_vars
from te.tensor import Buffer

from ..errors import ScheduleError
from ..lazy_analysis import bounds_inference, islpy, polyhedral_domains
from ..queries import stmt_reads, stmt_writes
from ..stmt import Block, For, ForKind, Stmt, StmtMutator, Store, iter_stmts
from ._concurrent import refuse_sharing_by_concurrent_loops
from ._rewrite import add, loop_path, replace_loop, sub, tidy

__all__ = ["cache_accesses"]


def _less(i: Expr, m: Expr) -> Expr:
    """``i - m``; bounds are of the buffer's index dtype, which may differ from the index's
    (a buffer of constant int32 shape read in int64 loops)."""
    return tidy(sub(i, cast(m, i.dtype)))


def _plus(m: Expr, x: Expr) -> Expr:
    """``m + x`` in ``x``'s dtype (see :func:`_less`)."""
    return tidy(add(cast(m, x.dtype), x))


def _placed(move: tuple, rel: list) -> tuple:
    """The indices into a move's local buffer of the indices ``rel`` (already less the mins):
    in the order of the move's third element, a permutation of the dimensions, when it has one."""
    order = move[2] if len(move) > 2 else None
    return tuple(rel) if order is None else tuple(rel[d] for d in order)


class _Redirect(ExprMutator):
    """Loads of each buffer of ``moves`` (``id(buffer) -> (local, mins)``, or ``(local, mins,
    order)``: the local buffer's dimensions are the buffer's in that order) read ``local`` at
    the indices less ``mins``."""

    def __init__(self, moves: dict):
        self.moves = moves
        self.rebased: dict = {}

    def less(self, i: Expr, m: Expr) -> Expr:
        """``_less(i, m)``, once per distinct index (a large expression repeats its loads)."""
        key = (structural_key(i, vars_by_identity=True), id(m))
        out = self.rebased.get(key)
        if out is None:
            out = self.rebased[key] = _less(i, m)
        return out

    def visit_Load(self, e: Load) -> Expr:
        idx = tuple(self.visit(i) for i in e.indices)
        move = self.moves.get(id(e.buffer))
        if move is not None:
            return Load(move[0], _placed(move, self.relative(idx, move)))
        return e.replace(indices=idx) if any(a is not b for a, b in zip(idx, e.indices)) else e

    def relative(self, idx: tuple, move: tuple) -> list:
        """``idx`` less the move's mins; 0 in a dimension the local buffer holds one element
        of (there the difference is 0 wherever the body accesses it, in whatever form the
        bounds came: ``floordiv(M, 4) * 4 - M * 4 + floordiv(M * 3 + 3, 4) * 4``)."""
        local, mins = move[0], move[1]
        order = move[2] if len(move) > 2 and move[2] is not None else tuple(range(len(mins)))
        one = {d for d, size in zip(order, local.dims) if isinstance(size, IntImm) and size.value == 1}
        return [IntImm(0, i.dtype) if d in one and i.dtype.lanes == 1 else self.less(i, m)
                for d, (i, m) in enumerate(zip(idx, mins))]


class _RedirectStmt(StmtMutator):
    """Accesses of ``buf`` go to ``local`` at the indices less ``mins``; ``also(buf, local,
    mins)`` adds another buffer to move in the same walk (the buffers must differ)."""

    def __init__(self, buf, local, mins, order=None):
        self.moves = {id(buf): (local, mins, order)}
        self.ex = _Redirect(self.moves)

    def also(self, buf, local, mins) -> "_RedirectStmt":
        self.moves[id(buf)] = (local, mins)
        return self

    def visit_expr(self, e):
        return self.ex.visit(e)

    def visit_Store(self, s: Store):
        idx = tuple(self.ex.visit(i) for i in s.indices)
        value = self.ex.visit(s.value)
        move = self.moves.get(id(s.buffer))
        if move is not None:
            return Store(move[0], _placed(move, self.ex.relative(idx, move)), value)
        return s.replace(indices=idx, value=value) if (value is not s.value or
                                                       any(a is not b for a, b in zip(idx, s.indices))) else s


def _exposed_reads(body: Stmt, buf, ranges: dict) -> bool:
    """Whether some read of ``buf`` in ``body`` may see a value from before ``body`` (not
    written earlier in it): then the cache must be filled first. Exact for affine code
    (isl value-based flow); unsure cases count as exposed. ``ranges`` ({Var: (start,
    stop)}) bounds the enclosing loops' variables: with a loop of extent 1, a write
    indexed by 0 covers a read indexed by that loop's variable."""
    isl = islpy()
    try:
        an = polyhedral_domains().analyze(body)
        context = _loop_context(an, ranges)
        accs = an.accesses_of(buf)
        reads = [a for a in accs if not a.is_write]
        if not reads:
            return False
        box = _buffer_box(an, buf)
        if _written_before_read(accs, reads, box, context):
            return False
        empty = isl.UnionMap("{ }")
        sink, must, may, sched = empty, empty, empty, empty
        seen: set[str] = set()
        for a in accs:
            if a.instance.name in seen:
                continue
            seen.add(a.instance.name)
            # one schedule per statement, its reads' time: its own write never feeds its reads
            first = next((b for b in a.instance.accesses if not b.is_write), a)
            sched = sched.union(isl.UnionMap.from_map(first.schedule))
        for a in reads:
            sink = sink.union(isl.UnionMap.from_map(a.relation.intersect_range(box)))
        for a in accs:
            if a.is_write:
                um = isl.UnionMap.from_map(a.relation)
                if a.exact and a.instance.domain_exact:
                    must = must.union(um)
                else:
                    may = may.union(um)
        info = isl.UnionAccessInfo.from_sink(sink).set_must_source(must).set_may_source(may)
        flow = info.set_schedule_map(sched).compute_flow()
        return not flow.get_may_no_source().intersect_params(context).is_empty()
    except isl.Error:  # isl gave up on the body's sets: be safe
        return True


def _written_before_read(accs: list, reads: list, box, context) -> bool:
    """Whether the statements at the top level of the analysed body that come before its
    first read (``accs``: the accesses of one buffer, ``reads`` those that read) write,
    exactly, every element of ``box`` the reads take, for the parameters in ``context``:
    then no read sees an older value. A cheap sufficient test (element sets, no schedule)
    that spares the flow analysis the common case, a tile initialised before it is
    accumulated into."""
    first = min(a.instance.position[0] for a in reads)
    written = None
    for a in accs:
        if a.is_write and a.instance.position[0] < first and a.exact and a.instance.domain_exact:
            r = a.relation.range()
            written = r if written is None else written.union(r)
    if written is None:
        return False
    taken = None
    for a in reads:
        r = a.relation.intersect_range(box).range()
        taken = r if taken is None else taken.union(r)
    return taken.intersect_params(context).is_subset(written)


def _buffer_box(an, buf):
    """The elements of ``buf`` (``0 <= x_d < dim_d``, the upper bounds that are affine in the
    analysis ``an``'s parameters) as an isl set: a read elsewhere is an error
    (``docs/semantics.md``), so what reads take is in it -- a read at an index the analysis
    cannot follow (a gather) then takes only elements the body may have written.

    >>> from te import Buffer, Var
    >>> from loopnest.stmt import For, Store
    >>> from loopnest.lazy_analysis import polyhedral_domains
    >>> N, i = Var("N"), Var("i")
    >>> A = Buffer("A", (N, 4), "float32")
    >>> an = polyhedral_domains().analyze(For(i, 0, N, Store(A, (i, 0), 1.0)))
    >>> print(_buffer_box(an, A))
    [p0] -> { M0[x0, x1] : 0 <= x0 < p0 and 0 <= x1 <= 3 }
    """
    isl = islpy()
    affine = bounds_inference()._affine
    env = {id(v): name for name, v in an.params.items()}
    xs = [f"x{d}" for d in range(len(buf.dims))]
    cons = []
    for x, dim in zip(xs, buf.dims):
        cons.append(f"{x} >= 0")
        hi = affine(dim, env)
        if hi is not None:
            cons.append(f"{x} < {hi}")
    return isl.Set(f"{an.param_decl()}{{ {an.buffer_names[id(buf)]}[{', '.join(xs)}] : {' and '.join(cons) or '0 = 0'} }}")


def _loop_context(an, ranges: dict):
    """The isl parameter set ``start <= v < stop`` of the loop variables in ``ranges`` that
    are parameters of the analysis ``an`` (bounds that are not affine in its parameters
    are left out, which only makes more reads exposed)."""
    isl = islpy()
    affine = bounds_inference()._affine
    env = {id(v): name for name, v in an.params.items()}
    cons = []
    for v, (start, stop) in ranges.items():
        if id(v) not in env:
            continue
        lo, hi = affine(start, env), affine(stop, env)
        if lo is not None:
            cons.append(f"{env[id(v)]} >= {lo}")
        if hi is not None:
            cons.append(f"{env[id(v)]} < {hi}")
    return isl.Set(f"{an.param_decl()}{{ : {' and '.join(cons) or '0 = 0'} }}")


def _size_vars(nest) -> set[int]:
    out: set[int] = set()
    for b in nest.buffers.values():
        for v in free_vars(b.dims):
            out.add(id(v))
    return out


def _copy(nest, name: str, dst_of, src_of, bounds, dtype_like: Var, order) -> Stmt:
    """The loops copying the region ``bounds`` (in the buffer's dimensions) between the
    buffer and its local copy, nested in the local buffer's order of dimensions ``order``
    (its innermost loop runs along the local buffer's last dimension)."""
    vs = [None] * len(bounds)
    for k, d in enumerate(order):
        if fold_int(bounds[d].extent) != 1:
            vs[d] = Var(nest.fresh_name(f"{name}_i{k}"), dtype_like.dtype)
    rel = [v if v is not None else IntImm(0, b.min.dtype) for v, b in zip(vs, bounds)]
    s: Stmt = Store(dst_of[0], dst_of[1](rel), Load(src_of[0], src_of[1](rel)))
    for d in reversed(order):
        v = vs[d]
        if v is not None:   # the extent is of the buffer's index dtype, the loop of the cached loop's
            s = For(v, IntImm(0, v.dtype), tidy(cast(bounds[d].extent, v.dtype)), Block((s,)))
    return s


def cache_accesses(nest, buf: Buffer, name: str, loop, order=None) -> Buffer:
    """Give one iteration of ``loop`` a local buffer ``name`` for the region of ``buf`` its
    body reads or writes: the region is copied in at the start of the body (when read, or
    when the writes may not cover all of it) and copied back at the end (when written), and
    every access in the body goes to the local buffer, its indices offset by the region's
    start.

    Before / after ``cache_accesses(A, "A_local", i)``::

        for (int i = 0; i < 4; i++) {            for (int i = 0; i < 4; i++) {
          for (int j = 0; j < 4; j++) {            for (int A_local_i1 = 0; A_local_i1 < 6; A_local_i1++) {
            B[i, j] = A[i, j] + A[i, j + 2];         A_local[0, A_local_i1] = A[i, A_local_i1];
          }                                        }
        }                                          for (int j = 0; j < 4; j++) {
                                                     B[i, j] = A_local[0, j] + A_local[0, j + 2];
                                                   }
                                                 }

    The region comes from bounds inference as expressions of the loops enclosing and
    including ``loop``; the local buffer's shape is the largest extent over those loops (a
    constant when the extent is bounded by one; else an expression of the sizes, or the
    whole dimension). It is an intermediate of the nest (allocated by prepare_for_codegen)
    and is returned.

    ``order`` (a permutation of ``buf``'s dimensions) lays the local buffer out with the
    dimensions in that order: ``order=(1, 0)`` caches a region of a matrix transposed, so
    that a loop along its first dimension reads the copy contiguously (a packed operand of
    ``A @ B.T``). The copy loops nest in the local buffer's order::

        >>> from te import Buffer, Reduce, Sum
        >>> from loopnest import LoopNest
        >>> A = Buffer("A", (3, 4), "float32")
        >>> S = Reduce("S", (4,), Sum(), lambda j, i: A[i, j], (3,))
        >>> nest = LoopNest([S])
        >>> nest.cache_accesses(A, "A_t", nest.get_loops_for(S)[0], order=(1, 0)).shape
        (1, 3)
        >>> print(str(nest).splitlines()[2])
            A_t[0, A_t_i1] = A[A_t_i1, j];

    Legality: always preserves the result (a region copied back is first copied in unless
    the writes provably cover it). Refused with ScheduleError for an invalid or already
    used ``name``, an ``order`` that is not a permutation of the dimensions, a ``loop``
    whose body does not access ``buf``, a vectorized ``loop``, a ``buf`` that a loop nest
    declared a warp MMA (``tensorize``) reads or writes, a parallel
    or GPU-bound ``loop`` whose copy-back would write elements the iteration did not (other
    iterations may be writing them), and copies that would make the iterations of a
    parallel or GPU-bound loop around ``loop`` share elements of ``buf`` that they write,
    or the iterations of one inside ``loop`` share elements of the local buffer.
    """
    try:
        check_identifier(name, "cache buffer")
    except ValueError as e:
        raise ScheduleError(f"cache_accesses({buf.name}, {name!r}, {loop.name}): {e}") from None
    if name in nest._used_names:
        raise ScheduleError(f"cache_accesses({buf.name}, {name!r}, {loop.name}): the name {name!r} is already used "
                            "by a buffer or loop of this nest; choose another")
    identity = tuple(range(buf.ndim))
    if order is None:
        order = identity
    elif not isinstance(order, (list, tuple)) or sorted(o if isinstance(o, int) and not isinstance(o, bool) else -1
                                                        for o in order) != list(identity):
        raise ScheduleError(f"cache_accesses({buf.name}, {name!r}, {loop.name}): order must be a permutation of "
                            f"{buf.name}'s dimensions {list(identity)}, got {order!r}")
    order = tuple(order)
    f = loop.stmt
    reads, writes = stmt_reads(f.body, buf), stmt_writes(f.body, buf)
    if not (reads or writes):
        raise ScheduleError(f"cannot cache {buf.name} in loop {loop.name}: its body does not access {buf.name}")
    if f.kind == ForKind.VECTORIZED:
        raise ScheduleError(f"cannot cache {buf.name} in loop {loop.name}: the loop is vectorized (its body must "
                            "stay one vector statement); cache in an enclosing loop")
    block = next((g for g in iter_stmts(f.body) if isinstance(g, For) and g.kind == ForKind.GPU_BLOCK), None)
    if block is not None:
        raise ScheduleError(f"cannot cache {buf.name} in loop {loop.name}: the copies would go beside the gpu_block "
                            f"loop {block.var.name} inside it, and a kernel's grid is its outermost loops; cache in "
                            "the innermost block loop or inside it")
    mma = next((g for g in iter_stmts(nest.root) if isinstance(g, For) and g.var in nest._tensorized
                and (stmt_reads(g.body, buf) or stmt_writes(g.body, buf))), None)
    if mma is not None:
        # the MMA's operands and accumulators stay where tensorize found them: a copy of the
        # accumulators left them out of registers (seed 73, case 777)
        raise ScheduleError(f"cannot cache {buf.name} in loop {loop.name}: loop {mma.var.name} was declared a warp MMA "
                            f"by tensorize and reads or writes {buf.name}, whose place (shared memory or registers) "
                            "the MMA needs; cache it before tensorize (gpu_matmul declares its tree's MMAs)")
    chain = next(iter(loop_path(nest.root, lambda s: s is f))) + [f]
    outer = [g.var for g in chain]
    ranges = {g.var: (g.start, g.stop) for g in chain}
    inference = bounds_inference()
    bounds = inference.access_bounds(f.body, buf, outer, outer_ranges=ranges)
    if writes:
        # filled first when a read may see an older value, or when the copy back would
        # otherwise write elements the body does not
        copy_in = (_exposed_reads(f.body, buf, ranges) if reads else False) or \
            not inference.writes_cover_box(f.body, buf, bounds, outer, outer_ranges=ranges)
    else:
        copy_in = True
    if writes and copy_in and not reads and f.kind != ForKind.SERIAL:
        raise ScheduleError(f"cannot cache {buf.name} in {f.kind} loop {loop.name}: its writes may not cover the "
                            f"cached region, so copying it back could overwrite elements that other iterations "
                            "write; cache in a serial loop")
    sizes = _size_vars(nest)
    shape = []
    for b, dim in zip(bounds, buf.dims):
        s = b.extent_bound
        if isinstance(s, Expr) and any(id(v) not in sizes for v in free_vars([s])):
            s = dim
        shape.append(s)
    local = Buffer(name, [shape[d] for d in order], buf.dtype)
    mins = [b.min for b in bounds]
    permuted = order if order != identity else None
    body = _RedirectStmt(buf, local, mins, permuted).visit(f.body)
    stmts = list(body.stmts)
    iv = f.var

    def in_local(r):
        return tuple(r[d] for d in order)

    def in_buffer(r):
        return tuple(_plus(m, x) for m, x in zip(mins, r))
    if copy_in:
        stmts.insert(0, _copy(nest, name, (local, in_local), (buf, in_buffer), bounds, iv, order))
    if writes:
        stmts.append(_copy(nest, name, (buf, in_buffer), (local, in_local), bounds, iv, order))
    new_f = f.replace(body=Block(tuple(stmts)))
    nest.root = replace_loop(nest.root, f.var, lambda _: new_f)
    nest.add_buffer(local)
    nest._cache_buffers[id(local)] = local
    nest._cache_loops[id(local)] = (f.var, frozenset(id(g.var) for g in chain))
    refuse_sharing_by_concurrent_loops(nest, buf, f"cannot cache {buf.name} in loop {loop.name}: the copies of the "
                                       "region", chain, "cache a smaller region (an inner loop), or before binding "
                                       "the loop")
    # one local buffer per iteration of ``loop``: the parallel loops inside it must not share
    # it either (seed 87, case 259: a buffer each parallel iteration kept to itself became one
    # local element that every iteration wrote, and that the copy back read after the loop)
    inner = [g for g in iter_stmts(new_f.body) if isinstance(g, For) and g.kind in ForKind.CONCURRENT]
    refuse_sharing_by_concurrent_loops(nest, local, f"cannot cache {buf.name} in loop {loop.name}: its local "
                                       f"buffer {name}", inner, "cache inside the parallel loop, or before "
                                       "binding it")
    return local
