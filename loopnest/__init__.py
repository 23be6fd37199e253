"""loopnest: lowering tensors to loop nests, scheduling transforms, and codegen preparation.

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> A = Buffer("A", (64,), "float32")
>>> B = Compute("B", (64,), lambda i: A[i] * 2.0)
>>> nest = LoopNest([B])
>>> outer, inner, tail = nest.split_with_tail(nest.get_loops_for(B)[0], 8)
"""
from .errors import LoopNestError, LoweringError, ScheduleError, VerifyError
from .loop import Loop
from .nest import LoopNest
from .target import Target, host_target
from .stmt import Allocate, Block, Cond, ExternCall, For, ForKind, Free, Let, Stmt, Store

__all__ = ["LoopNest", "Loop", "ScheduleError", "VerifyError", "LoweringError", "LoopNestError",
           "For", "ForKind", "Store", "Cond", "Block", "Let", "Allocate", "Free", "Stmt",
           "Target", "host_target"]
