"""Streaming (non-temporal) stores: which outputs get them, and the fence that orders them.

A contiguous vector store to an output argument that the kernel never reads, in a kernel
whose arguments outgrow the cache (``streaming_outputs``), carries ``!nontemporal``: the data
goes to memory without first reading each cache line (``memory`` emits it where the address
is aligned, else a plain store). Those stores are weakly ordered, so every function using
them ends with ``store_fence`` before returning or finishing its part of a parallel loop.

>>> from te import Buffer, Var
>>> from loopnest.stmt import For, Store, Block
>>> from codegen.kernel import Param
>>> A = Buffer("A", (1024,), "float32"); i = Var("i")
>>> root = For(i, 0, 1024, Block([Store(A, (i,), 1.0)]))     # 4096 bytes written, never read
>>> streaming_outputs(root, [Param("A", A)], 4096) == {id(A)}
True
>>> streaming_outputs(root, [Param("A", A)], 8192)           # the arguments add up to less than 8192
frozenset()
"""
from __future__ import annotations

from typing import Sequence

from llvmlite import ir

from te.expr import IntImm
from loopnest.queries import stmt_loaded_buffers, stmt_stored_buffers
from loopnest.stmt import Stmt

from ..kernel import Param
from .decls import declare
from .types import VOID

__all__ = ["streaming_outputs", "store_fence"]


def streaming_outputs(root: Stmt, buffer_params: Sequence[Param], min_bytes: int) -> frozenset:
    """The ids of the buffer parameters whose contiguous vector stores should be streaming
    (non-temporal) stores: outputs the kernel writes but never reads, of a constant size of
    at least ``min_bytes / 4``, in a kernel whose constant-size arguments add up to at least
    ``min_bytes`` (half the last-level cache, ``build.streaming_store_bytes``). The output of
    such a kernel is no longer in cache when anything reads it, so writing around the caches
    saves reading each line before it is written (a third of the memory traffic of a copy);
    where the arguments fit in the cache, the output stays there for its reader (a 4096^2
    transpose on a 260 MB cache: 1.7x faster without). Empty when ``min_bytes`` is 0; with
    ``min_bytes`` 1, every output the kernel never reads, whatever its size (the random
    tester's setting: ``build.streaming_store_threshold``)."""
    if min_bytes <= 0:
        return frozenset()
    read = {id(b) for b in stmt_loaded_buffers(root)}
    written = {id(b) for b in stmt_stored_buffers(root)}
    if min_bytes == 1:
        return frozenset(id(p.buffer) for p in buffer_params if id(p.buffer) in written and id(p.buffer) not in read)
    sizes = {}
    for p in buffer_params:
        buf = p.buffer
        if all(isinstance(d, IntImm) for d in buf.dims):
            n = buf.dtype.itemsize * buf.dtype.lanes
            for d in buf.dims:
                n *= d.value
            sizes[id(buf)] = n
    if sum(sizes.values()) < min_bytes:
        return frozenset()
    return frozenset(b for b, n in sizes.items() if 4 * n >= min_bytes and b in written and b not in read)


def store_fence(b: ir.IRBuilder, triple: str) -> None:
    """Order the function's streaming stores before whatever follows its return (another
    thread, or the caller, must see them once the loop is done): ``sfence`` on x86, a
    sequentially consistent fence elsewhere."""
    if triple.startswith(("x86_64", "i386", "i686")):
        b.call(declare(b.module, "llvm.x86.sse.sfence", VOID, []), [])
    else:
        b.fence("seq_cst")
