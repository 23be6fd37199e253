"""What an outlined parallel loop body captures from the enclosing function.

>>> from te import Buffer, Var
>>> from loopnest.stmt import For, Store, Block
>>> A = Buffer("A", (8,), "float32"); i = Var("i"); n = Var("n")
>>> vs, bs = captures(For(i, 0, n, Block([Store(A, (i,), 1.0)])))
>>> [v.name for v in vs], [b.name for b in bs]
([], ['A'])
"""
from __future__ import annotations

from te import expr as E
from te.expr import Var
from loopnest.stmt import Allocate, For, Let, Stmt, Store, iter_stmts, stmt_exprs

__all__ = ["captures", "free_vars_and_buffers"]


def free_vars_and_buffers(root: Stmt, exclude=()) -> tuple[list[Var], list]:
    """Variables used but not bound in ``root``, and buffers accessed but not allocated in it,
    each in first-use order."""
    used_vars: dict[int, Var] = {}
    bound: set[int] = {id(v) for v in exclude}
    used_bufs: dict[int, object] = {}
    allocated: set[int] = set()

    def visit_expr(e):
        def f(n):
            if isinstance(n, Var):
                used_vars.setdefault(id(n), n)
            elif isinstance(n, E.Load):
                used_bufs.setdefault(id(n.buffer), n.buffer)
            elif isinstance(n, E.Let):
                bound.add(id(n.var))
        E.walk(e, f)

    for s in iter_stmts(root):
        if isinstance(s, For):
            bound.add(id(s.var))
        elif isinstance(s, Let):
            bound.add(id(s.var))
        elif isinstance(s, Allocate):
            allocated.add(id(s.buffer))
            for d in s.buffer.dims:
                visit_expr(d)
        elif isinstance(s, Store):
            used_bufs.setdefault(id(s.buffer), s.buffer)
        for e in stmt_exprs(s):
            visit_expr(e)
    vars_ = [v for k, v in used_vars.items() if k not in bound]
    bufs = [b for k, b in used_bufs.items() if k not in allocated]
    return vars_, bufs


def captures(loop: For) -> tuple[list[Var], list]:
    """The variables and buffers the body of ``loop`` needs from outside (its own variable
    excluded; its bounds are evaluated by the caller)."""
    return free_vars_and_buffers(loop.body, exclude=(loop.var,))
