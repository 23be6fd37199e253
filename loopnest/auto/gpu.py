"""GPU schedule building blocks, made of the public transforms: threads over a loop, block
reductions, rows of intermediates in shared memory. Used by the hand GPU schedules of
``bench.gpu_schedules`` and by the tuning space for CUDA (``tune.gpu_space``).

>>> from te import Buffer, Reduce, Sum
>>> from loopnest import LoopNest
>>> A = Buffer("A", (8, 1024), "float32")
>>> S = Reduce("S", (8,), Sum(), lambda i, k: A[i, k], (1024,))
>>> nest = LoopNest([S])
>>> row = nest.get_loops_for(S)[0]
>>> _ = nest.set_gpu_block_index(row, 0)
>>> cache_rows(nest, block_reduce(nest, S, 256), row)
>>> sorted(b for b in nest.buffers if b.endswith("_sh"))
['S_rf_1_sh', 'S_rf_sh']
"""
from __future__ import annotations

from ..loop import Loop

__all__ = ["thread_strided", "block_reduce", "cache_rows", "row_threads", "pow2_at_most"]


def pow2_at_most(n: int, cap: int) -> int:
    """The largest power of two at most ``min(n, cap)`` (1 at least).

    >>> pow2_at_most(1000, 256), pow2_at_most(3, 256)
    (256, 2)
    """
    p = 1
    while p * 2 <= min(n, cap):
        p *= 2
    return p


def row_threads(n: int, cap: int = 256) -> int:
    """Threads per row of ``n`` columns: a power of two, at most ``cap``, about four columns
    per thread, at least a warp.

    >>> row_threads(1024), row_threads(64)
    (256, 32)
    """
    return max(32, pow2_at_most(max(n // 4, 1), cap))


def thread_strided(nest, loop, threads: int, unroll: bool = True) -> Loop:
    """Spread ``loop`` over ``threads`` threads of threadIdx.x, each taking every
    ``threads``-th iteration (``i = o * threads + t``), so a warp touches consecutive
    elements (coalesced global accesses, conflict-free shared ones). Returns the thread loop.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (1024,), "float32"); B = Compute("B", (1024,), lambda i: A[i] + 1.0)
    >>> nest = LoopNest([B]); t = thread_strided(nest, nest.get_loops_for(B)[0], 256)
    >>> print(nest)                                   # unroll expands the 4 iterations
    gpu_thread.x for (int i_inner = 0; i_inner < 256; i_inner++) {
      B[i_inner] = A[i_inner] + 1.0f;
      B[i_inner + 256] = A[i_inner + 256] + 1.0f;
      B[i_inner + 512] = A[i_inner + 512] + 1.0f;
      B[i_inner + 768] = A[i_inner + 768] + 1.0f;
    }
    """
    outer, inner = nest.split_with_mask(loop, threads)
    nest.reorder([outer, inner], [1, 0])
    nest.set_gpu_thread_index(inner, 0)
    if unroll and isinstance(outer.extent, int) and outer.extent <= 8:
        nest.unroll(outer)
    return inner


def _reduce_level(nest, t, k, threads: int):
    """One level of a block reduction of ``t`` over loop ``k``: ``rfactor`` into one partial
    per thread (thread ``p`` combines iterations ``p, p + threads, ...``), the partial kept
    in a register while it accumulates. Returns (partial buffer, the final combining loop)."""
    ko, ki = nest.split_with_mask(k, threads)
    rf = nest.rfactor(t, ki)
    init = nest.loop(ki.name + "_rf")
    nest.reorder([ko, ki], [1, 0])
    fused = nest.fuse([init, ki])
    nest.set_gpu_thread_index(fused, 0)
    nest.cache_accesses(rf, rf.name + "_reg", fused)      # per thread: one element, a register
    final = nest.get_loops_for(t)[-1]
    return rf, final


def block_reduce(nest, t, threads: int, second: int = 32) -> list:
    """Reduce ``t`` (one value per row, the row loop bound to a block) over its innermost
    reduction loop with ``threads`` threads: each thread combines a strided slice in a
    register (``rfactor`` + ``cache_accesses``), then ``second`` threads combine those
    partials, then one thread combines the last ``second`` -- a three-level tree through
    shared memory (the CUDA backend has no warp shuffles). Returns the partial buffers,
    which the caller caches in shared memory at the row loop (:func:`cache_rows`)."""
    k = nest.get_loops_for(t)[-1]
    rf1, final = _reduce_level(nest, t, k, threads)
    out = [rf1]
    if second and threads >= 4 * second:
        rf2, _ = _reduce_level(nest, t, final, second)
        out.append(rf2)
    return out


def cache_rows(nest, bufs, row_loop) -> None:
    """One row of each intermediate of ``bufs`` in shared memory at ``row_loop`` (the
    copy-backs to the full-size intermediates are dead and removed)."""
    for b in bufs:
        nest.cache_accesses(b, b.name + "_sh", row_loop)
    nest.eliminate_dead_stores()
