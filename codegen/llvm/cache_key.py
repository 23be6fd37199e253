"""Structural keys of prepared statements, for the in-memory compile cache.

Two statements get the same key exactly when they compile to the same code: variables
and buffers are numbered by identity in order of first appearance (names do not matter,
distinct objects with one name stay distinct), every dtype is included, float constants
are written exactly (``float.hex``, so ``-0.0`` and ``0.0`` differ), and shared
subexpressions are written once and referenced afterwards.

>>> from te import Buffer, Var
>>> from loopnest.stmt import For, Store, Block
>>> A = Buffer("A", (8,), "float32"); i, j = Var("i"), Var("j")
>>> k1 = stmt_key(For(i, 0, 8, Block([Store(A, (i,), 1.0)])), [A], [])
>>> k2 = stmt_key(For(j, 0, 8, Block([Store(A, (j,), 1.0)])), [A], [])
>>> k1 == k2
True
"""
from __future__ import annotations

import hashlib
from typing import Sequence

from te.functor import Functor
from loopnest.stmt import Allocate, Block, Cond, For, Free, Let, Stmt, Store

__all__ = ["stmt_key"]


class _Keyer(Functor):
    """``visit(node)`` appends the key of a statement or expression to ``out``."""

    def __init__(self):
        self.out: list[str] = []
        self.vars: dict[int, int] = {}
        self.bufs: dict[int, int] = {}
        self.seen: dict[int, int] = {}
        self.keep: list = []  # keep keyed nodes alive so ids stay unique during the walk

    def var(self, v) -> str:
        n = self.vars.get(id(v))
        if n is None:
            n = self.vars[id(v)] = len(self.vars)
            self.keep.append(v)
        return f"v{n}:{v.dtype.name}"

    def buf(self, b) -> str:
        n = self.bufs.get(id(b))
        if n is None:
            n = self.bufs[id(b)] = len(self.bufs)
            self.keep.append(b)
            self.out.append(f"B{n}:{b.dtype.name}[")
            for d in b.dims:
                self.expr(d)
            self.out.append("]")
        return f"b{n}"

    # -- expressions -------------------------------------------------------------------------
    def expr(self, e) -> None:
        """The key of ``e``, or a reference to where a shared subexpression was keyed."""
        k = self.seen.get(id(e))
        if k is not None:
            self.out.append(f"@{k}")
            return
        self.visit(e)

    def visit_Var(self, e):
        self.out.append(self.var(e))

    def visit_IntImm(self, e):
        self.out.append(f"{e.value}:{e.dtype.name}")

    def visit_FloatImm(self, e):
        self.out.append(f"{float(e.value).hex()}:{e.dtype.name}")

    def _begin(self, e) -> None:
        """Number ``e`` (later occurrences refer to it) and start its key."""
        self.seen[id(e)] = len(self.seen)
        self.keep.append(e)
        self.out.append(f"({type(e).__name__}:{e.dtype.name}")

    def _end(self, e) -> None:
        for c in e.children():
            self.expr(c)
        self.out.append(")")

    def visit_Load(self, e):
        self._begin(e)
        self.out.append(self.buf(e.buffer))
        self._end(e)

    def visit_Call(self, e):
        self._begin(e)
        self.out.append(e.name)
        self._end(e)

    def visit_Let(self, e):
        self._begin(e)
        self.out.append(self.var(e.var))
        self._end(e)

    def visit_Ramp(self, e):
        self._begin(e)
        self.out.append(str(e.lanes))
        self._end(e)

    visit_Broadcast = visit_Ramp

    def visit_ExtractLane(self, e):
        self._begin(e)
        self.out.append(str(e.lane))
        self._end(e)

    # -- statements --------------------------------------------------------------------------
    def visit_Block(self, s: Block):
        self.out.append("{")
        for x in s.stmts:
            self.visit(x)
        self.out.append("}")

    def visit_For(self, s: For):
        self.out.append(f"for:{s.kind}:{s.axis}:{self.var(s.var)}")
        self.expr(s.start)
        self.expr(s.stop)
        self.visit(s.body)

    def visit_Store(self, s: Store):
        self.out.append(f"store:{self.buf(s.buffer)}")
        for i in s.indices:
            self.expr(i)
        self.expr(s.value)

    def visit_Prefetch(self, s):
        self.out.append(f"prefetch:{int(s.write)}:{self.buf(s.buffer)}")
        for i in s.indices:
            self.expr(i)

    def visit_Cond(self, s: Cond):
        self.out.append("if")
        self.expr(s.cond)
        self.visit(s.then)
        if s.otherwise is not None:
            self.out.append("else")
            self.visit(s.otherwise)

    def visit_LetStmt(self, s: Let):
        self.out.append(f"let:{self.var(s.var)}")
        self.expr(s.value)
        self.visit(s.body)

    def visit_Allocate(self, s: Allocate):
        self.out.append(f"alloc:{self.buf(s.buffer)}:{s.scope}")

    def visit_Free(self, s: Free):
        self.out.append(f"free:{self.buf(s.buffer)}")

    def visit_ExternCall(self, s):
        self.out.append(f"extern:{s.func.address}:{s.func.name}:"
                        f"{','.join(self.buf(b) for b in s.outputs)}:{','.join(self.buf(b) for b in s.inputs)}")

    def generic(self, node):
        if isinstance(node, Stmt):
            self.out.append(f"?{type(node).__name__}:{id(node)}")  # unknown statements never share a key
            return
        self._begin(node)     # any other expression: its class, dtype and children
        self._end(node)


def stmt_key(root: Stmt, buffers: Sequence, scalar_vars: Sequence) -> str:
    """A sha256 hex digest of the structure of ``root`` with the kernel's parameter buffers and
    scalar variables (in order) numbered first."""
    k = _Keyer()
    for b in buffers:
        k.out.append(k.buf(b))
    for v in scalar_vars:
        k.out.append(k.var(v))
    k.out.append("|")
    k.visit(root)
    return hashlib.sha256(" ".join(k.out).encode()).hexdigest()
