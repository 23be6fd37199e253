"""Structural verifier for statement trees.

Checks that every variable is bound where used (loop variables, let variables, or the
nest's free size variables), that no loop variable is bound twice, that every access has
the buffer's rank (or one index once flattened) and that Allocate/Free pair up in a Block.

>>> from te import Compute
>>> from loopnest import LoopNest
>>> n = LoopNest([Compute("B", (4,), lambda i: i)])
>>> n.verify()
"""
from __future__ import annotations

from te.expr import Load, Var, walk

from .errors import VerifyError
from .queries import stmt_free_vars
from .stmt import Allocate, Block, Cond, For, Free, Let, Stmt, Store, stmt_exprs


def _binders(root: Stmt) -> set[int]:
    """ids of every variable bound by a For, a Let statement or a Let expression in ``root``."""
    from te.expr import Let as LetExpr
    from .stmt import iter_stmts
    out: set[int] = set()
    for s in iter_stmts(root):
        if isinstance(s, (For, Let)):
            out.add(id(s.var))
        for e in stmt_exprs(s) + ([s.start, s.stop] if isinstance(s, For) else []):
            walk(e, lambda n: out.add(id(n.var)) if isinstance(n, LetExpr) else None)
    return out


#: the kernel's scalar parameters: ``loopnest.queries.stmt_free_vars`` (name kept for importers)
free_vars = stmt_free_vars


def verify(root: Stmt, nest=None, flattened: bool = False) -> None:
    """Raise VerifyError on the first structural problem found in ``root``."""
    from te.expr import Let as LetExpr
    binders = _binders(root)

    def check_expr(e, scope, where):
        def rec(n, scope):
            if isinstance(n, Var) and id(n) in binders and id(n) not in scope:
                raise VerifyError(f"variable {n.name} is used in {where} outside the loop or let that binds it")
            if isinstance(n, Load):
                want = 1 if flattened else n.buffer.ndim
                if len(n.indices) != want and not (flattened and n.buffer.ndim == 0 and len(n.indices) <= 1):
                    raise VerifyError(f"load of {n.buffer.name} has {len(n.indices)} index(es), expected {want}")
            if isinstance(n, LetExpr):
                rec(n.value, scope)
                rec(n.body, scope | {id(n.var)})
                return
            for c in n.children():
                rec(c, scope)
        rec(e, scope)

    def rec(s: Stmt, scope: frozenset):
        if isinstance(s, Block):
            live: set[int] = set()
            for x in s.stmts:
                if isinstance(x, Allocate):
                    live.add(id(x.buffer))
                elif isinstance(x, Free):
                    if id(x.buffer) not in live:
                        raise VerifyError(f"free({x.buffer.name}) without a matching allocation in its block")
                    live.discard(id(x.buffer))
                rec(x, scope)
            if live:
                raise VerifyError("an allocation is not freed in its block")
            return
        where = type(s).__name__
        if isinstance(s, For):
            if id(s.var) in scope:
                raise VerifyError(f"loop variable {s.var.name} is bound twice in nested loops")
            check_expr(s.start, scope, f"the bounds of loop {s.var.name}")
            check_expr(s.stop, scope, f"the bounds of loop {s.var.name}")
            rec(s.body, scope | {id(s.var)})
            return
        if isinstance(s, Let):
            check_expr(s.value, scope, f"let {s.var.name}")
            rec(s.body, scope | {id(s.var)})
            return
        if isinstance(s, Store):
            want = 1 if flattened else s.buffer.ndim
            if len(s.indices) != want and not (flattened and s.buffer.ndim == 0):
                raise VerifyError(f"store to {s.buffer.name} has {len(s.indices)} index(es), expected {want}")
        for e in stmt_exprs(s):
            check_expr(e, scope, f"a {where} statement")
        if isinstance(s, Cond):
            rec(s.then, scope)
            if s.otherwise is not None:
                rec(s.otherwise, scope)

    rec(root, frozenset())
