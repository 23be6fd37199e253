"""The CUDA step ``cuda_async_waits``: how far each barrier lets ``cp.async`` copies run ahead.

A thread's ``cp.async`` copies (``codegen.cuda.async_copy``) are complete only once it waits
for them. ``cp.async.commit_group`` closes the copies a thread has issued into a group, and
``cp.async.wait_group N`` waits until at most the ``N`` most recent groups are in flight.
Waiting for every copy before every barrier (``wait_all``) is always right, but in a
pipelined loop it also waits for the tiles fetched for later iterations: three or four
stages then overlap no more than two.

This step commits one group after every statement of barrier-level code (code every thread
of the block runs together) that issues copies, so every thread commits the same groups.
It then gives each barrier the largest ``N`` such that every copy that a statement after
the barrier (before the next one) reads or writes again was committed before the ``N`` most
recent groups. It finds ``N`` by walking the kernel as ``cuda_sync`` does, with the copies in
flight and their age (the groups committed since), told apart by the stage of a staged
buffer (``codegen.cuda.sync``): it starts from no waits, lowers a barrier's ``N`` wherever an
access needs a copy that would still be in flight, and walks again until no access does.
Loops are walked until what their iterations carry stops changing; ages count up to
:data:`MAX_AGE`. A kernel the walk cannot follow (an access to a copy with no barrier since
it was committed) keeps ``wait_all`` at every barrier.

The tensor-core matmul with three shared stages (``prefetch="shared"``) copies tile
``ko + 2`` while it multiplies tile ``ko``: each K step commits two groups (A and B), so its
barrier may leave the two groups of tile ``ko + 1`` in flight:

>>> from codegen.cuda.mma_matmul import mma_matmul_example
>>> from codegen.cuda.passes import plan_cuda
>>> from codegen.kernel import make_params
>>> ex = mma_matmul_example(64, 64, 256, BM=64, BN=64, BK=32, WM=32, WN=32, stages=3, prefetch="shared")
>>> nest = ex.nest.copy().prepare_for_codegen()
>>> print(plan_cuda(nest, make_params(nest, ex.args), "mm").describe_async_waits())
kernel k0_mm: 6 commit point(s); 1 barrier(s) wait for all but the newest groups
  cp.async.wait_group 2 before: gpu_thread.x for (int lane28 = 0; lane28 < 32; lane28++) {
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from loopnest.stmt import Allocate, Block, Cond, For, ForKind, Free, LetStmt, Stmt, Store, iter_stmts
from te.expr import IntImm
from te.queries import fold_int, free_vars

from .ir_queries import contains_thread_loop, loop_ranges
from .plan import CudaPlan
from .sync import SyncContext, header_accesses, parts_disjoint, rekey_accesses, shared_accesses, stage_key

__all__ = ["plan_async_waits", "MAX_AGE"]

#: ages (groups committed since a copy's own) count up to this; an older copy counts as this
#: old, which only makes a wait wait longer
MAX_AGE = 8

_NO_BARRIER = None   # the key, among the barriers a point may follow, of "none since the kernel began"


class _CannotFollow(Exception):
    """An access to a copy with no barrier since its group was committed."""


def plan_async_waits(plan: CudaPlan) -> None:
    """Fill ``plan.async_commits`` (ids of the statements after which a group is committed)
    and ``plan.async_waits`` (id of a statement -> ``N`` for the barriers before it; ``None``
    where no copy needs waiting for) for every kernel that issues ``cp.async`` copies (see the
    module docstring). Barriers of kernels left out wait for every copy."""
    for k in plan.kernels:
        if not k.bound or not plan.kernel_has_async_copies(k):
            continue
        waits = {id(b): MAX_AGE for b in k.barriers}
        try:
            while True:
                walk = _Walk(plan, k, waits)
                walk.block_or_stmt(k.region, _State({}, {_NO_BARRIER: 0}), SyncContext())
                if walk.lowered is False:
                    break
                waits = walk.waits
            if walk.async_leaves != {id(s) for s in iter_stmts(k.stmt) if id(s) in plan.async_copies}:
                continue        # a copy outside the walked region: keep wait_all
        except _CannotFollow:
            continue
        plan.async_commits |= walk.commits
        for sid, n in waits.items():
            plan.async_waits[sid] = None if n >= MAX_AGE else n


class _State:
    """Where a walk is: ``inflight`` maps ``(id(buffer), part key)`` of the copies in flight to
    their smallest age; ``since`` maps each barrier the point may follow to the largest number
    of groups committed since it."""

    __slots__ = ("inflight", "since")

    def __init__(self, inflight: dict, since: dict):
        self.inflight = inflight
        self.since = since

    def join(self, other: "_State") -> "_State":
        inflight = dict(self.inflight)
        for e, age in other.inflight.items():
            inflight[e] = min(age, inflight.get(e, age))
        since = dict(self.since)
        for b, n in other.since.items():
            since[b] = max(n, since.get(b, n))
        return _State(inflight, since)

    def rekey(self, var, shift: bool) -> "_State":
        """The state with the stages of loop variable ``var`` moved to the next iteration
        (``shift``) or made whole buffers (see ``codegen.cuda.sync.rekey_accesses``)."""
        out: dict = {}
        for (bid, key), age in self.inflight.items():
            new = next(iter(rekey_accesses({bid: [None, {("w", key)}]}, var, shift)[bid][1]))[1]
            out[(bid, new)] = min(age, out.get((bid, new), age))
        return _State(out, dict(self.since))

    def __eq__(self, other) -> bool:
        return self.inflight == other.inflight and self.since == other.since


class _Walk:
    """One walk over a kernel's barrier-level code with the waits ``waits`` (id of a barrier's
    statement -> N); ``lowered`` tells whether an access needed a smaller N (then ``waits``
    holds the lowered values and the caller walks again)."""

    def __init__(self, plan: CudaPlan, k, waits: dict):
        self.plan, self.k = plan, k
        self.waits = dict(waits)
        self.lowered = False
        self.barriers = Counter(id(x) for x in k.barriers)
        self.ranges = loop_ranges(k.stmt)
        self.commits: set[int] = set()
        self.async_leaves: set[int] = set()
        self.buffers: dict = {}        # id -> the buffers copies write

    # -- events ----------------------------------------------------------------------
    def barrier(self, x: Stmt, st: _State) -> _State:
        n = self.waits[id(x)]
        return _State({e: a for e, a in st.inflight.items() if a < n}, {id(x): 0})

    def access(self, acc: dict, st: _State) -> None:
        """Lower the waits of the barriers before this point so that the copies ``acc``
        touches are complete."""
        for (bid, key), age in st.inflight.items():
            if bid not in acc or all(parts_disjoint(key, k2) for _, k2 in acc[bid][1]):
                continue
            for b, since in st.since.items():
                if b is _NO_BARRIER or age - since < 0:
                    raise _CannotFollow()
                if age - since < self.waits[b]:
                    self.waits[b] = age - since
                    self.lowered = True

    def leaf(self, x: Stmt, st: _State, ctx: SyncContext) -> _State:
        """A statement whose threads run apart: its accesses, then a group of its copies."""
        self.access(shared_accesses(self.plan, x, ctx, self.ranges), st)
        copies = [s for s in iter_stmts(x) if id(s) in self.plan.async_copies]
        if not copies:
            return st
        self.commits.add(id(x))
        self.async_leaves |= {id(s) for s in copies}
        inflight = {e: min(a + 1, MAX_AGE) for e, a in st.inflight.items()}
        for s in copies:
            inflight[(id(s.buffer), self._key(s, ctx))] = 0
            self.buffers[id(s.buffer)] = s.buffer
        return _State(inflight, {b: min(n + 1, MAX_AGE) for b, n in st.since.items()})

    def _key(self, s: Store, ctx: SyncContext):
        stage_vars = ctx.stage_vars - {id(x.var) for x in iter_stmts(s) if isinstance(x, (For, LetStmt))}
        return stage_key(s.buffer, s.indices, stage_vars, self.ranges)

    def header(self, exprs, st: _State) -> None:
        self.access(header_accesses(self.plan, exprs), st)

    # -- structure (as codegen.cuda.sync._Uniform walks it) --------------------------
    def block_or_stmt(self, s: Stmt, st: _State, ctx: SyncContext) -> _State:
        if not isinstance(s, Block):
            return self.stmt(s, st, ctx)
        stmts = list(s.stmts)
        i = 0
        while i < len(stmts):
            x = stmts[i]
            if self.barriers[id(x)]:
                st = self.barrier(x, st)
            if isinstance(x, (Allocate, Free)):
                i += 1
            elif contains_thread_loop(x):
                st = self.stmt(x, st, ctx)
                i += 1
            else:       # a run of statements without thread loops (no copies): their accesses
                j = i
                while j < len(stmts) and not isinstance(stmts[j], (Allocate, Free)) \
                        and not contains_thread_loop(stmts[j]):
                    j += 1
                st = self.leaf(Block(tuple(stmts[i:j])), st, ctx)
                i = j
        return st

    def stmt(self, s: Stmt, st: _State, ctx: SyncContext) -> _State:
        if isinstance(s, Block):
            return self.block_or_stmt(s, st, ctx)
        if isinstance(s, For) and s.kind == ForKind.GPU_THREAD:
            if id(s) not in self.k.guarded and contains_thread_loop(s.body):
                inner = ctx.but(tdep=ctx.tdep | {id(s.var)}, stage_vars=ctx.stage_vars - {id(s.var)})
                return self.block_or_stmt(s.body, st, inner)
            return self.leaf(s, st, ctx)
        heads = {For: lambda x: [x.start, x.stop], Cond: lambda x: [x.cond], LetStmt: lambda x: [x.value]}
        head = heads.get(type(s))
        if head is None or not contains_thread_loop(s) or any(id(v) in ctx.tdep for v in free_vars(head(s))):
            return self.leaf(s, st, ctx)
        self.header(head(s), st)
        if isinstance(s, Cond):
            then = self.block_or_stmt(s.then, st, ctx)
            other = self.block_or_stmt(s.otherwise, st, ctx) if s.otherwise is not None else st
            return then.join(other)
        if isinstance(s, LetStmt):
            return self.block_or_stmt(s.body, st, ctx.but(stage_vars=ctx.stage_vars - {id(s.var)}))
        return self.loop(s, st, ctx)

    def loop(self, s: For, st: _State, ctx: SyncContext) -> _State:
        """A serial loop of barrier-level code: the body walked from the join of the entry and
        of every iteration's end (stages renamed to the next iteration) until that stops
        changing; after it, the loop's stages are whole buffers."""
        inner = ctx.but(stage_vars=ctx.stage_vars | {id(s.var)})
        entry = st.rekey(s.var, False)
        top = _first_iteration(entry, s, self.buffers)
        for _ in range(4 * MAX_AGE + 8):
            end = self.block_or_stmt(s.body, top, inner)
            nxt = top.join(end.rekey(s.var, True))
            if nxt == top:
                return entry.join(end.rekey(s.var, False))
            top = nxt
        raise _CannotFollow()


def _first_iteration(st: _State, loop: For, buffers: dict) -> _State:
    """``st`` at the start of ``loop``'s first iteration: a copy into the constant stage ``c``
    of a buffer whose first dimension ``S`` counts its stages is the stage ``(v + c - start)
    % S`` of the loop variable ``v`` there (so that the body's stages of ``v`` tell it apart)."""
    if not isinstance(loop.start, IntImm):
        return st
    out: dict = {}
    for (bid, key), age in st.inflight.items():
        if key is not None and key[0] == "const" and bid in buffers:
            dims = [d if isinstance(d, int) else fold_int(d) for d in buffers[bid].shape]
            S, size = dims[0], int(np.prod(dims))     # (a constant key: every dim is constant)
            if key[2] * S == size:
                key = ("mod", id(loop.var), (key[1] - loop.start.value) % S, S, key[2])
        out[(bid, key)] = min(age, out.get((bid, key), age))
    return _State(out, dict(st.since))
