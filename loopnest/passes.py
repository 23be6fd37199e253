"""prepare_for_codegen as a readable list of named passes.

Each pass takes ``(nest, root)`` and returns the new root. With ``dump=True`` (or
``LOOPNEST_DUMP_PASSES=1`` in the environment) the IR is printed before and after each pass.

>>> [name for name, _ in PASSES]
['shrink_storage', 'insert_prefetches', 'simplify', 'guard_data_dependent_indices', 'flatten_indices', 'vectorize', 'widen_indices', 'insert_allocations', 'final_simplify', 'verify']
"""
from __future__ import annotations

import copy
import math
import os
import sys
from typing import Callable

from te.expr import Broadcast, Expr, ExprMutator, IntImm, Load, as_expr, floordiv, floormod
from te.intrinsics import cast
from te.simplify import Simplifier
from te.view import TensorView, view_root

from .empty_loops import guard_empty_loops
from .index_checks import guard_data_dependent_indices
from .legalize import (expand_float_min_max, guard_int_division, lower_low_precision, mask_shift_amounts,
                       short_circuit, unsigned_division, widen_indices)
from .legalize_vectors import legalize_vectors, scalarize_vectors
from .queries import TouchedBuffers, stmt_writes
from .kinds import ForKind
from .stmt import Allocate, Block, For, Free, Stmt, StmtMutator, Store, iter_stmts
from .vectorize_lowering import lower_vectorized_loops, version_guarded_loops


class _SimplifyStmt(StmtMutator):
    """Simplify expressions knowing the range of every enclosing loop variable (one
    ``Simplifier`` per loop body: its expressions share the ranges)."""

    def __init__(self):
        self.ranges: dict = {}
        self.simplify = Simplifier()

    def visit_expr(self, e: Expr) -> Expr:
        return self.simplify(e)

    def visit_For(self, s: For):
        outer = self.simplify
        start, stop = outer(s.start), outer(s.stop)
        self.ranges[s.var] = (start, outer(stop - start))
        self.simplify = outer.within(self.ranges)
        try:
            body = self.visit(s.body)
        finally:
            del self.ranges[s.var]
            self.simplify = outer
        return s.replace(start=start, stop=stop, body=body)


def simplify_stmt(root: Stmt) -> Stmt:
    """Simplify every expression of a statement tree, using the ranges of enclosing loops."""
    return _SimplifyStmt().visit(root)


def row_major_strides(dims) -> list[Expr]:
    """Element strides of a row-major array with ``dims`` (symbolic dims allowed)."""
    strides = []
    acc: Expr = IntImm(1)
    for d in reversed(dims):
        strides.append(acc)
        acc = d * acc if not (isinstance(acc, IntImm) and acc.value == 1) else d
    return list(reversed(strides))


def flat_index(buf, indices) -> Expr:
    """The element offset of ``buf[indices]``: through ``buf.layout`` when set, else row-major."""
    if len(indices) == 0:
        return IntImm(0)
    if buf.layout is not None:
        lay = buf.layout
        shapes = lay.shape if isinstance(lay.shape, tuple) else (lay.shape,)
        strides = lay.stride if isinstance(lay.stride, tuple) else (lay.stride,)
        off = None
        for ix, sh, st in zip(indices, shapes, strides):
            term = _crd2idx(as_expr(ix), sh, st)
            off = term if off is None else off + term
        return off
    if len(indices) == 1:
        return indices[0]
    # a buffer's dimensions (and the indices into them) may differ in width, (4, N) with an
    # int64 N: the offset is computed in the widest of them
    exprs = [as_expr(x) for x in list(indices) + list(buf.dims)]
    dt = max((x.dtype.element for x in exprs), key=lambda d: d.bits)
    indices = [cast(x, dt) for x in indices]
    off = None
    for ix, st in zip(indices, row_major_strides([cast(d, dt) for d in buf.dims])):
        term = ix if isinstance(st, IntImm) and st.value == 1 else ix * st
        if off is not None and off.dtype.lanes != term.dtype.lanes:   # scalar rows, a vector last index
            off = Broadcast(off, term.dtype.lanes)
        off = term if off is None else off + term
    return off


def _size(shape) -> int:
    return math.prod(_size(s) for s in shape) if isinstance(shape, tuple) else shape


def _crd2idx(coord: Expr, shape, stride) -> Expr:
    """CuTe's coordinate -> index for a 1-D (possibly symbolic) coordinate into a nested
    mode: split colexicographically with floordiv/floormod (coordinates are non-negative)."""
    if not isinstance(shape, tuple):
        return coord if stride == 1 else coord * stride
    out = None
    rem = coord
    for k, (sh, st) in enumerate(zip(shape, stride)):
        n = _size(sh)
        last = k == len(shape) - 1
        c = rem if last else floormod(rem, n)
        term = _crd2idx(c, sh, st)
        out = term if out is None else out + term
        if not last:
            rem = floordiv(rem, n)
    return out


class _FlattenExpr(ExprMutator):
    def visit_Load(self, e: Load) -> Expr:
        idx = tuple(self.visit(i) for i in e.indices)
        if isinstance(e.buffer, TensorView):
            return Load(view_root(e.buffer), (e.buffer.memory_offset(idx),))
        if len(idx) == 1 and e.buffer.layout is None:
            return e.replace(indices=idx)
        return Load(e.buffer, (flat_index(e.buffer, idx),))


class _FlattenStmt(StmtMutator):
    def __init__(self):
        self.ex = _FlattenExpr()

    def visit_expr(self, e):
        return self.ex.visit(e)

    def visit_Store(self, s: Store):
        idx = tuple(self.ex.visit(i) for i in s.indices)
        value = self.ex.visit(s.value)
        if not (len(idx) == 1 and s.buffer.layout is None):
            idx = (flat_index(s.buffer, idx),)
        return Store(s.buffer, idx, value)

    def visit_Prefetch(self, s):
        idx = tuple(self.ex.visit(i) for i in s.indices)
        if not (len(idx) == 1 and s.buffer.layout is None):
            idx = (flat_index(s.buffer, idx),)
        return s.replace(indices=idx)


def flatten_indices(nest, root: Stmt) -> Stmt:
    """Every Load/Store gets one index: the element offset (row-major, or through the layout)."""
    return _FlattenStmt().visit(root)


def vectorize(nest, root: Stmt) -> Stmt:
    """Vectorized loops whose bodies allow it become Ramp/Broadcast vector statements
    (``loopnest.vectorize_lowering``).

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (4,), "float32")
    >>> nest = LoopNest([Compute("B", (4,), lambda i: A[i] + 1.0)])
    >>> _ = nest.vectorize("i")
    >>> print(vectorize(nest, nest.root))
    B[ramp(0, 1, 4)] = A[ramp(0, 1, 4)] + broadcast(1.0f, 4);
    """
    return lower_vectorized_loops(root)


class _Allocator(StmtMutator):
    """Wrap the tightest Block range that uses ``buf`` in Allocate/Free, going into a loop
    only when ``keep_inside(loop)`` allows it."""

    def __init__(self, buf, scope="global", keep_inside: Callable[[For], bool] = lambda f: True,
                 touched: TouchedBuffers | None = None, loop_of: Callable = lambda var: None):
        self.buf = buf
        self.scope = scope
        self.keep_inside = keep_inside
        self.touched = touched or TouchedBuffers()
        self.loop_of = loop_of
        self.done = False

    def visit_Block(self, b: Block):
        users = [k for k, s in enumerate(b.stmts) if id(self.buf) in self.touched(s)]
        if not users:
            return b
        if len(users) == 1 and not isinstance(b.stmts[users[0]], Store):
            # a single user that is a compound statement: go deeper
            child = b.stmts[users[0]]
            new_child = self.visit(child)
            if self.done:
                return b.replace(stmts=b.stmts[:users[0]] + (new_child,) + b.stmts[users[0] + 1:])
        stmts = list(b.stmts)
        if (len(users) > 1 and any(self._concurrent(stmts[k]) for k in users)
                and all(isinstance(stmts[k], For) and stmt_writes(stmts[k], self.buf) for k in users)
                and all(self._apart(stmts[k]) for k in users)):
            # loops holding parallel or GPU loops (an unrolled loop and its tail, the two parts
            # of a split_with_tail around them, say) that each fill the buffer before reading
            # it, in every iteration: one buffer around them all would be shared by the
            # concurrent iterations, so each gets its own allocation inside
            for k in users:
                stmts[k] = _Allocator(self.buf, self.scope, self._inside, self.touched,
                                      self.loop_of).visit(stmts[k])
            self.done = True
            return b.replace(stmts=tuple(stmts))
        lo, hi = users[0], users[-1]
        self.done = True
        return Block(b.stmts[:lo] + (Allocate(self.buf, self.scope),) + b.stmts[lo:hi + 1]
                     + (Free(self.buf),) + b.stmts[hi + 1:])

    @staticmethod
    def _concurrent(s) -> bool:
        """Whether ``s`` is or holds a parallel or GPU loop."""
        return any(isinstance(g, For) and g.kind in ForKind.CONCURRENT for g in iter_stmts(s))

    def _apart(self, s: For) -> bool:
        """Whether the iterations of loop ``s`` read only what they wrote themselves, as
        ``loop_of`` (the scheduled loop of ``s``, before lowering: exact for the flow
        analysis) shows. For the users of a buffer that all write it, this also shows that
        nothing flows from one user to another: the buffer may be private to each iteration
        of each of them."""
        from .transforms.cache import _exposed_reads
        scheduled = self.loop_of(s.var)
        return scheduled is not None and not _exposed_reads(
            scheduled.body, self.buf, {scheduled.var: (scheduled.start, scheduled.stop)})

    def _inside(self, f: For) -> bool:
        """``keep_inside`` for the loops of users shown ``_apart``: the users themselves, and
        the loops inside them that hold all of their uses, may hold the buffer where it
        allows it or where their iterations read only what they wrote (seed 80, case 434: a
        ``compute_at`` copy in a parallel loop and its parallel tail, which the whole-nest
        test, wanting all uses in one loop, refuses)."""
        return self.keep_inside(f) or self._apart(f)

    def visit_For(self, s: For):
        if not self.keep_inside(s):
            return s    # the caller allocates around the loop
        body = self.visit_Block(s.body)
        return s.replace(body=body)

    def generic(self, s):
        if isinstance(s, Block):
            return self.visit_Block(s)
        out = super().generic(s)
        return out


def insert_allocations(nest, root: Stmt) -> Stmt:
    """Each intermediate buffer gets an Allocate/Free around the tightest range of its uses.

    A buffer that ``shrink_storage`` sized for one iteration of a loop is allocated once
    outside its loops, and per iteration of a parallel or GPU loop around or at that loop.
    Another range goes into a loop only when each iteration reads nothing of the buffer that
    another iteration wrote (``privatizable``, decided on the nest's schedule, whose loops
    ``root`` keeps): a fresh buffer per iteration would lose such values. Several parallel or
    GPU loops using a buffer (an unrolled loop and its tail) whose iterations each fill it
    before reading it get an allocation each, inside: one around them would be shared by
    their concurrent iterations (seed 63, case 350); so do serial loops holding such loops
    (the two parts of a ``split_with_tail`` around a parallel loop: seed 76, case 36).

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (4, 8), "float32")
    >>> T1 = Compute("T1", (4, 8), lambda i, j: A[i, j] + 1.0)
    >>> nest = LoopNest([Compute("T2", (4,), lambda i: T1[i / 2, 0] * 2.0)])
    >>> _ = nest.fuse([nest.get_loops_for("T1")[0], nest.get_loops_for("T2")[0]])
    >>> print(insert_allocations(nest, nest.root))
    float32 T1[4, 8]; // alloc
    for (int i = 0; i < 4; i++) {
      for (int j = 0; j < 8; j++) {
        T1[i, j] = A[i, j] + 1.0f;
      }
      T2[i] = T1[i / 2, 0] * 2.0f;
    }
    free(T1);
    """
    from .transforms import privacy
    touched = TouchedBuffers()
    scheduled = {id(s.var): s for s in iter_stmts(nest.root) if isinstance(s, For)}
    for buf in nest.intermediates:
        scope = getattr(buf, "scope", "global")
        root = _Allocator(buf, scope, lambda f, buf=buf: privacy.private_to(nest, buf, f), touched,
                          lambda var: scheduled.get(id(var))).visit(root)
    return root


def final_simplify(nest, root: Stmt) -> Stmt:
    return simplify_stmt(root)


def verify_pass(nest, root: Stmt) -> Stmt:
    from .verify import verify
    verify(root, nest, flattened=True)
    return root


def shrink_storage(nest, root: Stmt) -> Stmt:
    """Intermediates stored at a loop (``compute_at``, ``store_at``) get a buffer of the size
    of the region one iteration of the loop touches (``transforms.store_at``)."""
    from .transforms.store_at import shrink_storage as shrink
    return shrink(nest, root)


def insert_prefetches(nest, root: Stmt) -> Stmt:
    """The prefetches ``LoopNest.prefetch`` recorded, placed (``transforms.prefetch``)."""
    from .transforms.prefetch import insert_prefetches as insert
    return insert(nest, root)


def drop_prefetches(nest, root: Stmt) -> Stmt:
    """No prefetches: a target without them (CUDA) takes the nest without the hints.

    >>> from te import Buffer, Var
    >>> from loopnest.stmt import Block, Prefetch, Store
    >>> A = Buffer("A", (8,), "float32"); i = Var("i")
    >>> print(drop_prefetches(None, Block((Prefetch(A, (i,)), Store(A, (i,), 1.0)))))
    A[i] = 1.0f;
    """
    return _DropPrefetches().visit(root)


class _DropPrefetches(StmtMutator):
    def visit_Prefetch(self, s):
        return None


PASSES: list[tuple[str, Callable]] = [
    ("shrink_storage", shrink_storage),
    ("insert_prefetches", insert_prefetches),
    ("simplify", lambda nest, root: simplify_stmt(root)),
    ("guard_data_dependent_indices", guard_data_dependent_indices),
    ("flatten_indices", flatten_indices),
    ("vectorize", vectorize),
    ("widen_indices", widen_indices),
    ("insert_allocations", insert_allocations),
    ("final_simplify", final_simplify),
    ("verify", verify_pass),
]

#: Passes that run after PASSES for one target only: the compiled targets spell out the
#: language's edge cases that IREval implements directly (see ``loopnest.legalize``).
TARGET_PASSES: dict[str, list[tuple[str, Callable]]] = {
    "ireval": [],
    "llvm": [("guard_empty_loops", guard_empty_loops),
             ("version_guarded_vectors", lambda nest, root: version_guarded_loops(root)),
             ("guard_int_division", guard_int_division), ("mask_shift_amounts", mask_shift_amounts),
             ("lower_low_precision", lower_low_precision),
             ("legalize_vectors", lambda nest, root: legalize_vectors(nest, root, masked_loads=True)),
             ("short_circuit", short_circuit), ("unsigned_division", unsigned_division), ("verify", verify_pass)],
    "cuda": [("drop_prefetches", drop_prefetches), ("guard_int_division", guard_int_division),
             ("mask_shift_amounts", mask_shift_amounts),
             ("lower_low_precision", lower_low_precision), ("legalize_vectors", legalize_vectors),
             ("scalarize_vectors", scalarize_vectors), ("short_circuit", short_circuit),
             ("expand_float_min_max", expand_float_min_max),
             ("verify", verify_pass)],
}


def _verify_each() -> bool:
    """``LOOPNEST_VERIFY=1``: verify the IR after every pass (the test suite sets it)."""
    return os.environ.get("LOOPNEST_VERIFY", "") not in ("", "0")


def run_passes(nest, dump: bool = False, out=None, passes=None, root: Stmt | None = None) -> Stmt:
    """Run ``passes`` (default PASSES) over ``root`` (default ``nest.root``) and return the
    new root. With ``LOOPNEST_VERIFY=1`` the verifier runs after every pass, so a pass that
    breaks an invariant fails with its own name.

    An entry is ``(name, fn)`` or ``(name, fn, show)``: a backend's analysis step records its
    decisions outside the IR (codegen.cuda's plan), and ``show()`` is their text, dumped
    after the IR.

    >>> import io
    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> nest = LoopNest([Compute("B", (2,), lambda i: i * 2)])
    >>> out = io.StringIO()
    >>> _ = run_passes(nest, dump=True, out=out, passes=[("noop", lambda n, r: r, lambda: "facts: none")])
    >>> print(out.getvalue().rstrip())
    // ---- before noop ----
    for (int i = 0; i < 2; i++) {
      B[i] = i * 2;
    }
    // ---- after noop ----
    for (int i = 0; i < 2; i++) {
      B[i] = i * 2;
    }
    // ---- noop: plan ----
    facts: none
    """
    from .errors import VerifyError
    from .printer import stmt_to_str
    from .verify import verify
    out = out or sys.stderr
    root = nest.root if root is None else root
    flattened = passes is not None
    check = _verify_each()
    for name, fn, *show in (PASSES if passes is None else passes):
        before = root
        root = fn(nest, root)
        flattened = flattened or name == "flatten_indices"
        if dump:
            print(f"// ---- before {name} ----\n{stmt_to_str(before)}", file=out)
            print(f"// ---- after {name} ----\n{stmt_to_str(root)}", file=out)
            if show:
                print(f"// ---- {name}: plan ----\n{show[0]()}", file=out)
        if check and name != "verify":
            try:
                verify(root, nest, flattened=flattened)
            except VerifyError as exc:
                raise VerifyError(f"the IR is invalid after pass {name}: {exc}") from exc
    return root


def legalize_for_target(nest, target: str, dump: bool | None = None):
    """A copy of the prepared ``nest`` with ``TARGET_PASSES[target]`` applied (``nest`` itself
    when it was already legalized for ``target``).

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (4,), "int32")
    >>> nest = LoopNest([Compute("B", (4,), lambda i: A[i] % A[3 - i])]).prepare_for_codegen()
    >>> print(legalize_for_target(nest, "llvm"))
    for (int i = 0; i < 4; i++) {
      B[i] = A[i] % select(A[3 - i] == 0 || A[3 - i] == (-1), 1, A[3 - i]);
    }
    """
    if target not in TARGET_PASSES:
        raise ValueError(f"unknown target {target!r}; expected one of {sorted(TARGET_PASSES)}")
    if not getattr(nest, "prepared", False):
        raise ValueError("legalize_for_target takes a prepared nest: call nest.prepare_for_codegen() first")
    done = getattr(nest, "_legalized_for", frozenset())
    if target in done or not TARGET_PASSES[target]:
        return nest
    if dump is None:
        dump = os.environ.get("LOOPNEST_DUMP_PASSES", "") not in ("", "0")
    new = nest.copy() if hasattr(nest, "copy") else copy.copy(nest)   # hand-built nests in tests
    new.root = run_passes(nest, dump=dump, passes=TARGET_PASSES[target])
    new._legalized_for = done | {target}
    return new
