"""Loop kinds, below both the statement classes and the printer.

>>> ForKind.PARALLEL
'parallel'
"""
from __future__ import annotations

__all__ = ["ForKind"]


class ForKind:
    """Loop kinds (strings, so they print and serialise as themselves)."""

    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unrolled"
    GPU_BLOCK = "gpu_block"
    GPU_THREAD = "gpu_thread"
    ALL = (SERIAL, PARALLEL, VECTORIZED, UNROLLED, GPU_BLOCK, GPU_THREAD)
    #: loops whose iterations run at the same time
    CONCURRENT = (PARALLEL, GPU_BLOCK, GPU_THREAD)
