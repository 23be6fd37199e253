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

from te import expr as E
from loopnest.stmt import Allocate, Block, Cond, For, Free, Let, Stmt, Store

__all__ = ["stmt_key"]


class _Keyer:
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

    def expr(self, e) -> None:
        out = self.out
        k = self.seen.get(id(e))
        if k is not None:
            out.append(f"@{k}")
            return
        t = type(e)
        if t is E.Var:
            out.append(self.var(e))
            return
        if t is E.IntImm:
            out.append(f"{e.value}:{e.dtype.name}")
            return
        if t is E.FloatImm:
            out.append(f"{float(e.value).hex()}:{e.dtype.name}")
            return
        self.seen[id(e)] = len(self.seen)
        self.keep.append(e)
        out.append(f"({t.__name__}:{e.dtype.name}")
        if t is E.Load:
            out.append(self.buf(e.buffer))
        elif t is E.Call:
            out.append(e.name)
        elif t is E.Let:
            out.append(self.var(e.var))
        elif t in (E.Ramp, E.Broadcast):
            out.append(str(e.lanes))
        for c in e.children():
            self.expr(c)
        out.append(")")

    def stmt(self, s: Stmt) -> None:
        out = self.out
        t = type(s)
        if t is Block:
            out.append("{")
            for x in s.stmts:
                self.stmt(x)
            out.append("}")
        elif t is For:
            out.append(f"for:{s.kind}:{s.axis}:{self.var(s.var)}")
            self.expr(s.start)
            self.expr(s.stop)
            self.stmt(s.body)
        elif t is Store:
            out.append(f"store:{self.buf(s.buffer)}")
            for i in s.indices:
                self.expr(i)
            self.expr(s.value)
        elif t is Cond:
            out.append("if")
            self.expr(s.cond)
            self.stmt(s.then)
            if s.otherwise is not None:
                out.append("else")
                self.stmt(s.otherwise)
        elif t is Let:
            out.append(f"let:{self.var(s.var)}")
            self.expr(s.value)
            self.stmt(s.body)
        elif t is Allocate:
            out.append(f"alloc:{self.buf(s.buffer)}:{s.scope}")
        elif t is Free:
            out.append(f"free:{self.buf(s.buffer)}")
        else:
            out.append(f"?{t.__name__}:{id(s)}")  # unknown statements never share a key


def stmt_key(root: Stmt, buffers: Sequence, scalar_vars: Sequence) -> str:
    """A sha256 hex digest of the structure of ``root`` with the kernel's parameter buffers and
    scalar variables (in order) numbered first."""
    k = _Keyer()
    for b in buffers:
        k.out.append(k.buf(b))
    for v in scalar_vars:
        k.out.append(k.var(v))
    k.out.append("|")
    k.stmt(root)
    return hashlib.sha256(" ".join(k.out).encode()).hexdigest()
