"""compute_at: compute the part of a tensor one iteration of a consumer loop needs, inside it.

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> A = Buffer("A", (4, 10), "float32")
>>> B = Compute("B", (4, 10), lambda i, j: A[i, j] * 2.0)
>>> C = Compute("C", (4, 8), lambda i, j: B[i, j] + B[i, j + 2])
>>> nest = LoopNest([C])
>>> i, j = nest.get_loops_for(C)
>>> nest.compute_at(B, i)
>>> print(nest)
for (int i_1 = 0; i_1 < 4; i_1++) {
  for (int j_2 = 0; j_2 < 10; j_2++) {
    B[i_1, j_2] = A[i_1, j_2] * 2.0f;
  }
  for (int j_1 = 0; j_1 < 8; j_1++) {
    C[i_1, j_1] = B[i_1, j_1] + B[i_1, j_1 + 2];
  }
}

When another consumer also reads B, B stays for it and the loop computes the rows it
needs into a buffer of its own, of the footprint's size once prepared:

>>> D = Compute("D", (4,), lambda i: B[i, 9] - 1.0)
>>> nest = LoopNest([C, D])
>>> nest.compute_at(B, nest.get_loops_for(C)[0])
>>> [str(s).splitlines()[0] for s in nest.prepare_for_codegen().root.stmts if "alloc" in str(s)]
['float32 B[4, 10]; // alloc', 'float32 B_local[1, 10]; // alloc']
"""
from __future__ import annotations

import time

from te.expr import IntImm, Load, Var, substitute
from te.queries import fold_int, has_load, loads
from te.tensor import Buffer, Tensor

from ..errors import ScheduleError
from ..lazy_analysis import bounds_inference
from ..loop import Loop
from ..queries import stores_to
from ..stmt import Block, For, ForKind, Stmt, StmtMutator, Store, iter_stmts, stmt_exprs
from .cache import _Redirect
from ._concurrent import refuse_sharing_by_concurrent_loops
from ._rewrite import find_loop, loop_path, remove_stores, replace_loop, tidy
from .inline import check_inputs_ready, check_movable_tensor, current_definition, definition_inputs

__all__ = ["compute_at", "compute_at_candidates"]


class _Refused(Exception):
    """A reason compute_at cannot place the tensor at one loop."""


def _consumer_reads(root: Stmt, t: Tensor) -> list[Stmt]:
    """Statements (other than ``t``'s own stores) whose expressions read ``t``."""
    out = []
    for s in iter_stmts(root):
        if isinstance(s, Store) and s.buffer is t:
            continue
        if has_load(stmt_exprs(s), t):
            out.append(s)
    return out


def _check_pristine(root: Stmt, t: Tensor) -> None:
    """``t``'s stores compute its current definition: they read no buffer made by a transform
    (a cache of cache_accesses, a partial result of rfactor), which rebuilding ``t`` from the
    definition would lose."""
    allowed = {id(b) for b in definition_inputs(root, t)} | {id(t)}
    for s in stores_to(root, t):
        for ld in loads([*s.indices, s.value]):
            if id(ld.buffer) not in allowed:
                raise _Refused(f"the store `{str(s).strip()}` reads {ld.buffer.name}, which {t.name}'s "
                               f"definition does not read ({ld.buffer.name} was made by a transform such as "
                               "rfactor or cache_accesses); apply compute_at before that transform")


def _region_loops(nest, t: Tensor, definition, bounds, target: Buffer | None = None) -> Stmt:
    """The statements computing ``t`` (whose current definition is the expression
    ``definition`` over ``t.args``) over the region ``bounds`` (one DimBounds per dim) into
    ``target`` (``t`` itself by default, else a buffer of ``t``'s shape); a dimension of
    extent 1 becomes no loop."""
    out_buf = t if target is None else target
    idx = []
    loops = []
    for a, b in zip(t.args, bounds):
        if fold_int(b.extent) == 1:
            idx.append(b.min)
            continue
        v = Var(nest.fresh_name(a.name), a.dtype)
        idx.append(v)
        loops.append((v, b.min, b.stop))
    mapping = dict(zip(t.args, idx))
    if t.is_reduction:
        rvars = [Var(nest.fresh_name(r.name), r.dtype) for r in t.reduce_args]
        mapping.update(zip(t.reduce_args, rvars))
        body = tidy(substitute(definition, mapping))
        index = tuple(idx)
        inner: Stmt = Store(out_buf, index, t.reducer.combine(Load(out_buf, index), body))
        for v, d in reversed(list(zip(rvars, t.reduce_dims))):
            inner = For(v, IntImm(0, v.dtype), d, Block((inner,)))
        stmts: tuple = (Store(out_buf, index, t.reducer.identity(t.dtype)), inner)
    else:
        stmts = (Store(out_buf, tuple(idx), tidy(substitute(definition, mapping))),)
    out: Stmt = Block(stmts)
    for v, lo, hi in reversed(loops):
        out = Block((For(v, lo, hi, out),))
    return out.stmts[0] if len(out.stmts) == 1 else out


def _nested(a: For, b: For) -> bool:
    """Whether one of the loops ``a``, ``b`` is inside the other (or they are one loop)."""
    return a is b or find_loop(a.body, b.var) is not None or find_loop(b.body, a.var) is not None


def _tail_sites(nest, t: Tensor, f: For) -> list[For]:
    """The loops of the tail nests of ``split_with_tail`` that correspond to ``f`` (and, for a
    loop of a tail nest, the main nest's loop it copies), which read ``t``: compute_at
    computes ``t`` at each of them too. A tail loop corresponds to the split's inner and
    outer loops; a loop cloned into a tail, to the loop it copies. Vectorized loops and
    loops around or inside one already chosen are left out (their reads stay outside)."""
    index = nest.loop_index()
    sites = [f]
    todo = [f.var]
    seen = {id(f.var)}
    while todo:
        v = todo.pop(0)
        linked = [g for g, mains in nest._tail_of.items() if any(m is v for m in mains)]
        if v in nest._tail_of:
            linked.append(nest._tail_of[v][0])
        for g in linked:
            if id(g) in seen:
                continue
            seen.add(id(g))
            todo.append(g)
            h = index.get(g)
            if h is None or h.kind == ForKind.VECTORIZED or not _consumer_reads(h.body, t) \
                    or any(_nested(h, x) for x in sites):
                continue
            sites.append(h)
    return sites


def _read_outside(root: Stmt, t: Tensor, sites: list[For]) -> Stmt | None:
    """A statement outside every loop of ``sites`` that reads ``t`` (None when there is none)."""
    ids = {id(g.var) for g in sites}
    skip = lambda s: isinstance(s, For) and id(s.var) in ids  # noqa: E731
    return next((s for s in iter_stmts(root, skip) if not (isinstance(s, Store) and s.buffer is t)
                 and has_load(stmt_exprs(s), t)), None)


def _compute_inside(nest, root: Stmt, t: Tensor, definition, var: Var, target: Buffer | None) -> tuple:
    """``root`` with the region of ``t`` that one iteration of the loop of ``var`` reads
    computed at the start of its body (before the first statement reading ``t``), into
    ``target`` whose reads in the loop then replace those of ``t`` (``t`` itself when None).
    Returns the new root and the computing statement."""
    f0 = find_loop(root, var)
    chain = next(p for p in loop_path(root, lambda s: s is f0)) + [f0]
    ranges = {g.var: (g.start, g.stop) for g in chain}
    bounds = bounds_inference().access_bounds(f0.body, t, [g.var for g in chain], writes=False,
                                              outer_ranges=ranges)
    compute = _region_loops(nest, t, definition, bounds, target)
    body = f0.body
    if target is not None:
        body = _ReadsOf(t, target).visit(body)
    stmts = body.stmts
    first = next(k for k, s in enumerate(f0.body.stmts) if _consumer_reads(s, t))
    new_f = f0.replace(body=Block(stmts[:first] + (compute,) + stmts[first:]))
    return replace_loop(root, var, lambda _: new_f), compute


class _ReadsOf(StmtMutator):
    """Redirect the reads of ``buf`` to ``local`` (same indices); stores are left alone."""

    def __init__(self, buf, local):
        self.buf = buf
        self.ex = _Redirect({id(buf): (local, [IntImm(0, d.dtype) for d in buf.dims])})

    def visit_expr(self, e):
        return self.ex.visit(e)

    def visit_Store(self, s: Store):
        return s if s.buffer is self.buf else self.generic(s)


def _plan(nest, t: Tensor, loop_var: Var) -> tuple[Stmt, list[tuple[Buffer, Var]]]:
    """The new root with ``t`` computed inside the loop of ``loop_var`` (and its tail loops),
    and the buffers made for local copies with the loops they are computed at; raises
    _Refused."""
    root = nest.root
    f = find_loop(root, loop_var)
    if f.kind == ForKind.VECTORIZED:
        raise _Refused(f"loop {f.var.name} is vectorized (its body must stay one vector statement)")
    if not _consumer_reads(f.body, t):
        raise _Refused(f"nothing inside loop {f.var.name} reads {t.name}")
    _check_pristine(root, t)
    sites = _tail_sites(nest, t, f)
    definition = current_definition(root, t)
    copies: list[tuple[Buffer, Var]] = []
    targets: list[Buffer | None] = []
    if _read_outside(root, t, sites) is None:
        root = remove_stores(root, lambda s: isinstance(s, Store) and s.buffer is t)
        targets.append(None)
    for g in sites[len(targets):]:
        local = Buffer(nest.fresh_name(f"{t.name}_local"), t.dims, t.dtype)
        copies.append((local, g.var))
        targets.append(local)
    computes = []
    for g, target in zip(sites, targets):
        root, compute = _compute_inside(nest, root, t, definition, g.var, target)
        computes.append(compute)
    _check_legal(nest, t, root, computes)
    return root, copies


def _check_legal(nest, t: Tensor, new_root: Stmt, computes: list[Stmt]) -> None:
    """The legality hook of compute_at: every buffer ``t`` reads is complete where ``t`` (or
    a local copy of it) is now computed."""
    sites = [s for c in computes for s in iter_stmts(c) if isinstance(s, Store)]
    try:
        check_inputs_ready(new_root, t, sites, "compute_at")
    except ScheduleError as e:
        raise _Refused(str(e).split(": ", 1)[1]) from None


#: at most this many loops, and about this many seconds, are tried for the loops that a
#: refused compute_at suggests: each try plans the whole transform (bounds inference and a
#: rebuilt nest), which takes seconds where the tensor's readers are large expressions
SUGGESTED_LOOPS = 8
SUGGESTION_SECONDS = 1.0


def compute_at_candidates(nest, t: Tensor) -> list:
    """The loops (handles, outermost first) at which ``compute_at(t, loop)`` is legal.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (4,), "float32")
    >>> B = Compute("B", (4,), lambda i: A[i] * 2.0)
    >>> C = Compute("C", (4,), lambda i: B[i] + 1.0)
    >>> [lp.name for lp in compute_at_candidates(LoopNest([C]), B)]
    ['i_1']
    """
    return _candidates(nest, t, None, None)[0]


def _candidates(nest, t: Tensor, limit: int | None, seconds: float | None) -> tuple[list, int]:
    """(the legal loops among the first ``limit`` loops that read ``t``, tried for about
    ``seconds``; the number of loops that read ``t`` left untried)."""
    out = []
    readers = [s for s in iter_stmts(nest.root) if isinstance(s, For) and _consumer_reads(s.body, t)]
    deadline = None if seconds is None else time.monotonic() + seconds
    for k, f in enumerate(readers):
        if limit is not None and k >= limit or deadline is not None and time.monotonic() > deadline:
            return out, len(readers) - k
        saved = set(nest._used_names)
        try:
            _plan(nest, t, f.var)
            out.append(Loop(nest, f.var))
        except (_Refused, ScheduleError):
            pass
        finally:
            nest._used_names = saved
    return out, 0


def compute_at(nest, buf: Buffer, loop) -> None:
    """Compute, inside ``loop`` and before the statements that read it, the region of the
    tensor ``buf`` that one iteration of ``loop`` reads.

    Before / after ``compute_at(B, i)`` (C reads ``B[i, j]`` and ``B[i, j + 2]``)::

        for (int i = 0; i < 4; i++) {              for (int i_1 = 0; i_1 < 4; i_1++) {
          for (int j = 0; j < 10; j++) {             for (int j_2 = 0; j_2 < 10; j_2++) {
            B[i, j] = A[i, j] * 2.0f;                  B[i_1, j_2] = A[i_1, j_2] * 2.0f;
          }                                          }
        }                                            for (int j_1 = 0; j_1 < 8; j_1++) {
        for (int i_1 = 0; i_1 < 4; i_1++) {            C[i_1, j_1] = B[i_1, j_1] + B[i_1, j_1 + 2];
          for (int j_1 = 0; j_1 < 8; j_1++) {        }
            C[i_1, j_1] = B[i_1, j_1] + B[i_1, j_1 + 2];
          }                                        }
        }

    The region comes from bounds inference (``analysis.bounds``): exact for affine
    indices, as expressions of the loops enclosing and including ``loop`` (clamped to the
    shape of B), else the whole dimension. B's loops are generated afresh over that region
    from its current definition (``current_definition``: what was inlined into B stays
    inlined); a dimension of extent 1 gets no loop, a reduction gets its initialisation and
    reduction loops. Earlier schedules of B's loops are dropped, so schedule them after
    compute_at (``nest.get_loops_for(B)``). B is stored at ``loop`` (``store_at``):
    ``prepare_for_codegen`` gives it a buffer of the size of the region one iteration of
    ``loop`` touches, its indices rebased, allocated once outside ``loop`` (per iteration of
    a parallel loop); ``store_at(B, outer)`` hoists the storage. Elements needed by several
    iterations are recomputed by each, unless the storage is hoisted and the region slides
    along ``loop``: then each iteration computes only its new elements into a circular
    buffer of the window's size (storage folding, see ``store_at``).

    Other readers (as PyTorch NNC's ``computeAt``): when B is also read outside ``loop``, B
    stays where it is for those readers, and ``loop`` computes the region it needs into a
    new buffer ``B_local`` of its own (stored at ``loop``, so ``prepare_for_codegen`` sizes
    it to the footprint); only the reads inside ``loop`` read it. After ``compute_at(B, i_1)``
    where ``D[i] = B[i, 9] - 1`` also reads B::

        for (int i = 0; i < 4; i++) {
          for (int j = 0; j < 10; j++) {
            B[i, j] = A[i, j] * 2.0f;
          }
        }
        for (int i_1 = 0; i_1 < 4; i_1++) {
          for (int j_2 = 0; j_2 < 10; j_2++) {
            B_local[i_1, j_2] = A[i_1, j_2] * 2.0f;
          }
          for (int j_1 = 0; j_1 < 8; j_1++) {
            C[i_1, j_1] = B_local[i_1, j_1] + B_local[i_1, j_1 + 2];
          }
        }
        for (int i_2 = 0; i_2 < 4; i_2++) {
          D[i_2] = B[i_2, 9] - 1.0f;
        }

    Tails: after ``split_with_tail``, B is computed at ``loop`` and also at the loop of each
    tail nest that corresponds to it (the tail loop for the split's inner or outer loop, the
    copy of a loop for a loop inside the split one; and the other way round for a loop of
    the tail nest), as Halide computes a producer in every partial strip; each tail site
    computes into a ``B_local`` buffer of its own. After ``split_with_tail(i, 4)`` of 6 rows
    and ``compute_at(B, i_1_inner)``::

        for (int i_1_outer = 0; i_1_outer < 1; i_1_outer++) {
          for (int i_1_inner = 0; i_1_inner < 4; i_1_inner++) {
            for (int j_2 = 0; j_2 < 10; j_2++) {
              B[i_1_inner, j_2] = A[i_1_inner, j_2] * 2.0f;
            }
            for (int j_1 = 0; j_1 < 8; j_1++) {
              C[i_1_outer * 4 + i_1_inner, j_1] = B[i_1_outer * 4 + i_1_inner, j_1] + ...;
            }
          }
        }
        for (int i_1_tail = 0; i_1_tail < 2; i_1_tail++) {
          for (int j_3 = 0; j_3 < 10; j_3++) {
            B_local[i_1_tail + 4, j_3] = A[i_1_tail + 4, j_3] * 2.0f;
          }
          for (int j_1_1 = 0; j_1_1 < 8; j_1_1++) {
            C[i_1_tail + 4, j_1_1] = B_local[i_1_tail + 4, j_1_1] + B_local[i_1_tail + 4, j_1_1 + 2];
          }
        }

    Legality: B must be an intermediate tensor (not an output, an input, or a buffer made
    by a transform), something inside ``loop`` must read B, ``loop`` must not be
    vectorized, B's stores must not read a buffer made by a transform (rfactor,
    cache_accesses), and every buffer B reads must be complete where B (or its local copy)
    is now computed. When refused, the ScheduleError lists the loops where compute_at would
    be legal, among the first ``SUGGESTED_LOOPS`` loops that read B (tried for about
    ``SUGGESTION_SECONDS``; it says how many it left untried: ``compute_at_candidates``
    lists them all).
    """
    check_movable_tensor(nest, buf, f"compute {buf.name} at loop {loop.name}")
    t: Tensor = buf
    try:
        plan = _plan(nest, t, loop.var)
    except _Refused as e:
        saved = set(nest._used_names)
        found, untried = _candidates(nest, t, SUGGESTED_LOOPS, SUGGESTION_SECONDS)
        legal = [l.name for l in found]
        nest._used_names = saved
        where = (f"compute_at({t.name}, ...) would be legal at loop{'s' if len(legal) > 1 else ''} "
                 f"{', '.join(legal)}") if legal else f"there is no loop where compute_at({t.name}, ...) is legal"
        if untried:
            where = (f"{where} among the loops tried ({untried} more loop{'s' if untried > 1 else ''} that "
                     f"read{'' if untried > 1 else 's'} {t.name} not tried; compute_at_candidates lists them all)")
        raise ScheduleError(f"cannot compute {t.name} at loop {loop.name}: {e}; {where}") from None
    new_root, copies = plan
    nest.root = new_root
    if not any(var is loop.var for _, var in copies):
        nest._store_at[t.name] = loop.var
    for local, var in copies:
        nest.add_buffer(local)
        nest._store_at[local.name] = var
    f = nest.loop(loop.var).stmt
    chain = next(iter(loop_path(nest.root, lambda s: s is f))) + [f]
    for b in [t] + [local for local, _ in copies]:
        refuse_sharing_by_concurrent_loops(nest, b, f"computing {t.name} at loop {loop.name}", chain,
                                           "compute it at a loop inside the parallel or GPU loop where each "
                                           "iteration's region is its own, or before making the loop concurrent")
