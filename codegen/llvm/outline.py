"""What an outlined parallel loop body captures from the enclosing function.

>>> from te import Buffer, Var
>>> from loopnest.stmt import For, Store, Block
>>> A = Buffer("A", (8,), "float32"); i = Var("i"); n = Var("n")
>>> vs, bs = captures(For(i, 0, n, Block([Store(A, (i,), 1.0)])))
>>> [v.name for v in vs], [b.name for b in bs]
([], ['A'])
"""
from __future__ import annotations

from loopnest.queries import external_buffers, stmt_free_vars
from loopnest.stmt import For

__all__ = ["captures"]


def captures(loop: For) -> tuple[list, list]:
    """The variables and buffers the body of ``loop`` needs from outside (its own variable
    excluded; its bounds are evaluated by the caller), each in first-use order:
    ``loopnest.queries.stmt_free_vars`` and ``external_buffers`` of the body."""
    return stmt_free_vars(loop.body, exclude=(loop.var,)), external_buffers(loop.body)
