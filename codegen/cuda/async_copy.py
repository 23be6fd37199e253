"""The CUDA step ``cuda_async_copies``: global-to-shared copies issued as ``cp.async``.

A copy of whole 16-byte vectors (``codegen.cuda.vectors``: a store whose value is, unchanged,
a load of the same type in the same chunks) from a global buffer into a shared one is printed,
on sm_80 and later, as ``cp.async.cg.shared.global``: the thread goes on while the bytes
travel (the plain copy stays under ``#else``, for older GPUs; the host emulation defers each
copy until it is waited for). Before a ``__syncthreads()`` of a kernel that issues such
copies, the thread waits for the copies read after the barrier (``cuda_async_waits``,
:mod:`codegen.cuda.async_wait`; ``cp.async.wait_all`` when in doubt), so the barrier
publishes them as it published the plain stores: ``cuda_sync`` puts a barrier between every
write of a shared buffer and the reads of other statements. A copy whose per-thread
statement (the innermost thread loop around it) also reads the destination stays a plain
copy: no barrier separates the two.

With the barriers of a multi-buffered tile (the copy into stage ``(ko + 1) % 2`` beside the
reads of stage ``ko % 2`` need none), the copies of the next tile overlap the work on this one.

>>> from codegen.cuda.mma_matmul import mma_matmul_example
>>> from codegen.cuda.passes import plan_cuda
>>> from codegen.kernel import make_params
>>> ex = mma_matmul_example(64, 64, 64, BM=64, BN=64, BK=32, WM=32, WN=32)
>>> nest = ex.nest.copy().prepare_for_codegen()
>>> print(plan_cuda(nest, make_params(nest, ex.args), "mm").describe_async_copies())
kernel k0_mm: 2 copies into shared memory issued as cp.async (waited for before each barrier)
  As <- A: 1 chunk(s) of 16 B per store
  Bs <- B: 1 chunk(s) of 16 B per store
"""
from __future__ import annotations

from te.queries import loads
from loopnest.stmt import For, ForKind, Store, StmtVisitor, stmt_exprs, iter_stmts

from .plan import CudaPlan
from .vectors import wide_copy_source

__all__ = ["plan_async_copies", "ASYNC_COPY_BYTES"]

#: the chunk size ``cp.async.cg`` copies (it takes 16 bytes only; 4 and 8 need ``.ca``)
ASYNC_COPY_BYTES = 16


def plan_async_copies(plan: CudaPlan) -> None:
    """Record in ``plan.async_copies`` the stores printed as ``cp.async`` (their ids, with the
    whole-vector load each copies; see the module docstring)."""
    for k in plan.kernels:
        if not k.bound:
            continue
        walk = _ThreadUnits()
        walk.visit(k.region)
        for s, unit in walk.stores:
            src = _async_source(plan, s, unit) if unit is not None else None
            if src is not None:
                plan.async_copies[id(s)] = src


class _ThreadUnits(StmtVisitor):
    """``stores``: every store of a kernel with the innermost thread loop around it (or None)."""

    def __init__(self):
        self.stores: list = []
        self.unit = None

    def visit_For(self, s: For):
        outer = self.unit
        if s.kind == ForKind.GPU_THREAD:
            self.unit = s
        self.generic(s)
        self.unit = outer

    def visit_Store(self, s: Store):
        self.stores.append((s, self.unit))


def _async_source(plan: CudaPlan, s: Store, unit: For):
    """The whole-vector load ``s`` copies when it can be a ``cp.async``, else None."""
    copy = wide_copy_source(plan, s)
    if copy is None:
        return None
    dst, src = copy
    if plan.scope(s.buffer) != "shared" or plan.scope(src.buffer) not in ("global", "param"):
        return None
    if dst.vtype.nbytes != ASYNC_COPY_BYTES or src.vtype.nbytes != ASYNC_COPY_BYTES:
        return None
    if any(ld.buffer is s.buffer for x in iter_stmts(unit) for ld in loads(stmt_exprs(x))):
        return None
    return src
