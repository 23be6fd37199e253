"""The CUDA step ``cuda_wgmma_overlap``: which warpgroup MMAs stay in flight across an iteration.

``wgmma.mma_async`` runs asynchronously: the tensor cores read the shared-memory operands and
update the accumulators after the instruction has been issued, until ``wgmma.wait_group``.
Waiting for every group at the end of each MMA nest (``wait_group 0``) is always right, but
in a pipelined K loop the tensor cores then idle while the threads pass the barrier and
issue the next tiles' copies. Where it is safe, the nest waits instead for all but its own
newest group (``wait_group 1``): the MMAs of iteration n run on while iteration n+1 copies
the next tiles and issues its own MMAs, and a ``wait_group 0`` after the loop completes the
last group before anything else reads the accumulators.

It is safe when, for the serial loop of uniform code directly around the nest (its thread
loops aside), the nest is the last statement of the loop's body, nothing else in the loop
touches its accumulators, and every store to an operand buffer in the body

- follows a barrier in the same iteration (every thread has then passed the previous
  iteration's wait, so only that iteration's MMAs can still be reading), and
- writes a part of the buffer other than the stage the previous iteration's MMAs read
  (stages as ``codegen.cuda.sync`` tells them apart: ``(ko + a) % S`` of the loop variable).

``wgmma_matmul`` (:mod:`loopnest.transforms.gpu_wgmma`) copies its tiles ``stages - 2``
k-tiles ahead for this: with ``stages`` 4, iteration ko copies into stage ``(ko + 2) % 4``
while the MMAs of iteration ko - 1 read stage ``(ko - 1) % 4``.

>>> from codegen import build
>>> from codegen.cuda.mma_matmul import wgmma_matmul_example
>>> ex = wgmma_matmul_example(128, 256, 512, BM=128, BN=256, BK=64, stages=4)
>>> k = build(ex.nest, ex.args, target="cuda", max_shared_bytes=227 * 1024)
>>> print(k.module.plan.describe_wgmma_overlap())
kernel k0_C: 1 warpgroup MMA nest(s) in flight across iterations of ko
>>> "tc_wgmma_wait<1>" in k.source
True
"""
from __future__ import annotations

from te.queries import loads
from loopnest.stmt import Block, For, ForKind, Store, iter_stmts, stmt_exprs

from .ir_queries import loop_ranges
from .sync import SyncContext, access_conflict, rekey_accesses, shared_accesses

__all__ = ["plan_wgmma_overlap"]


def plan_wgmma_overlap(plan) -> None:
    """Set ``in_flight`` (1) on every warpgroup MMA nest of ``plan`` that may leave its group
    running into the next iteration of its loop, and record the loop in ``plan.wgmma_drains``
    (id(loop) -> loop), after which the CUDA printer waits for every group."""
    for k in plan.kernels:
        nests = [m for m in plan.mma_by_kernel.get(k.name, ()) if getattr(m, "kind", "mma") == "wgmma"]
        if not nests:
            continue
        ranges = loop_ranges(k.region)
        for m in nests:
            loop = _overlapping_loop(plan, k, m, ranges)
            if loop is not None:
                m.in_flight = 1
                plan.wgmma_drains[id(loop)] = loop


def _path(root, target) -> list | None:
    """The statements from ``root`` down to ``target`` (both included), or None."""
    if root is target:
        return [root]
    children = root.stmts if isinstance(root, Block) else [root.body] if isinstance(root, For) else []
    for c in children:
        p = _path(c, target)
        if p is not None:
            return [root] + p
    return None


def _overlapping_loop(plan, k, m, ranges) -> For | None:
    """The serial loop around the nest ``m`` whose next iteration may run beside its MMAs (see
    the module docstring), or None."""
    path = _path(k.region, m.root)
    if path is None:
        return None
    # up from the nest: thread loops (each only around the next), then the loop's body
    i = len(path) - 2
    while i >= 1 and (isinstance(path[i], For) and path[i].kind == ForKind.GPU_THREAD
                      or isinstance(path[i], Block) and len(path[i].stmts) == 1):
        i -= 1
    if i < 1 or not isinstance(path[i], Block) or not isinstance(path[i - 1], For):
        return None
    body, loop, nest = path[i], path[i - 1], path[i + 1]
    if loop.kind != ForKind.SERIAL or body.stmts[-1] is not nest or any(
            isinstance(x, For) and x.kind == ForKind.GPU_THREAD for x in path[:i - 1]):
        return None
    before = body.stmts[:-1]
    if any(b is m.acc for x in before for b in _buffers(x)):
        return None
    ctx = SyncContext(stage_vars=frozenset({id(loop.var)}))
    reads = rekey_accesses(shared_accesses(plan, m.root, ctx, ranges), loop.var, True)     # as iteration n+1 names them
    operands = {id(m.a), id(m.b)}
    for x in before:
        writes = {key: v for key, v in shared_accesses(plan, x, ctx, ranges).items() if key in operands}
        if access_conflict(writes, reads) is not None:
            return None
    return loop if _stores_follow_a_barrier(k, before, operands)[0] else None


def _buffers(s) -> list:
    """The buffers ``s`` stores to or loads from."""
    out = []
    for x in iter_stmts(s):
        if isinstance(x, Store):
            out.append(x.buffer)
        out.extend(ld.buffer for ld in loads(stmt_exprs(x)))
    return out


def _stores_follow_a_barrier(k, stmts, operands: set) -> tuple[bool, bool]:
    """``(ok, barrier)``: whether every store to the ``operands`` in ``stmts`` (run in order by
    every thread) comes after a ``__syncthreads()`` that all threads reach in the same
    iteration (one before a statement of ``stmts``, or inside the unguarded thread loops that
    begin them), and whether ``stmts`` hold such a barrier."""
    for x in stmts:
        if k.barriers_before(x) > 0:
            return True, True
        if isinstance(x, For) and x.kind == ForKind.GPU_THREAD and id(x) not in k.guarded:
            ok, barrier = _stores_follow_a_barrier(k, x.body.stmts if isinstance(x.body, Block) else [x.body],
                                                   operands)
            if not ok:
                return False, False
            if barrier:
                return True, True
        elif any(isinstance(s, Store) and id(s.buffer) in operands for s in iter_stmts(x)):
            return False, False
    return True, False
