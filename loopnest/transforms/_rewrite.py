"""Small statement-rewriting helpers shared by the transforms (private to
``loopnest.transforms``; ``loopnest.vectorize_lowering`` uses the arithmetic helpers too).

>>> from te import Var
>>> i = Var("i")
>>> print(add(mul(i, 8), 0))
i * 8
"""
from __future__ import annotations

from typing import Callable

from te.expr import Add, Expr, FloorDiv, FloorMod, IntImm, Max, Mul, Sub, Var, as_expr, substitute
from te.queries import fold_int, free_vars
from te.simplify import simplify

from ..lazy_analysis import polyhedral_domains
from ..printer import stmt_to_str
from ..stmt import Block, Cond, For, ForKind, Let, Stmt, StmtMutator, Store, iter_stmts


# ------------------------------------------------------------------------------------
# integer arithmetic that folds constants (``te.queries.fold_int``) and drops neutral terms
# (prints cleanly even before the simplifier canonicalises)
# ------------------------------------------------------------------------------------
def _c(v: int, like: Expr) -> Expr:
    return IntImm(v, like.dtype)


def _pair(a, b) -> tuple[Expr, Expr]:
    if isinstance(a, Expr):
        return a, as_expr(b, a)
    if isinstance(b, Expr):
        return as_expr(a, b), b
    return as_expr(a), as_expr(b)


def add(a, b) -> Expr:
    """``a + b`` with constants folded and ``+ 0`` dropped."""
    a, b = _pair(a, b)
    ca, cb = fold_int(a), fold_int(b)
    if ca is not None and cb is not None:
        return _c(ca + cb, a)
    if cb == 0:
        return a
    if ca == 0:
        return b
    if cb is not None and cb < 0:
        return Sub(a, _c(-cb, a))
    return Add(a, b)


def sub(a, b) -> Expr:
    """``a - b`` with constants folded and ``- 0`` dropped."""
    a, b = _pair(a, b)
    ca, cb = fold_int(a), fold_int(b)
    if ca is not None and cb is not None:
        return _c(ca - cb, a)
    if cb == 0:
        return a
    if cb is not None and cb < 0:
        return Add(a, _c(-cb, a))
    return Sub(a, b)


def mul(a, b) -> Expr:
    """``a * b`` with constants folded and ``* 1`` dropped."""
    a, b = _pair(a, b)
    ca, cb = fold_int(a), fold_int(b)
    if ca is not None and cb is not None:
        return _c(ca * cb, a)
    if cb == 1:
        return a
    if ca == 1:
        return b
    if ca == 0 or cb == 0:
        return _c(0, a)
    return Mul(a, b)


def floordiv_c(a: Expr, f: int) -> Expr:
    ca = fold_int(a)
    if ca is not None:
        return _c(ca // f, a)
    return a if f == 1 else FloorDiv(a, _c(f, a))


def floormod_c(a: Expr, f: int) -> Expr:
    ca = fold_int(a)
    if ca is not None:
        return _c(ca % f, a)
    return _c(0, a) if f == 1 else FloorMod(a, _c(f, a))


def tidy(e: Expr) -> Expr:
    """Simplify an expression built by a transform."""
    return simplify(e)


def nonnegative_extent(nest, f: For) -> Expr:
    """``f``'s extent ``stop - start`` when it is provably ``>= 0`` (a constant, or under the
    ranges of the loops around ``f``, sizes being ``>= 0``), else ``max(stop - start, 0)``.
    A loop with a negative extent runs no iteration; splitting it into ``floordiv`` and
    ``floormod`` of its extent must keep that.

    >>> from te import Buffer, Compute, Var
    >>> from loopnest import LoopNest
    >>> N = Var("N"); A = Buffer("A", (N,), "float32")
    >>> B = Compute("B", (N,), lambda i: A[i] + 1.0)
    >>> C = Compute("C", (N - 1,), lambda i: A[i] * 2.0)
    >>> nest = LoopNest([B, C]); (b,), (c,) = nest.get_loops_for(B), nest.get_loops_for(C)
    >>> print(nonnegative_extent(nest, b.stmt), nonnegative_extent(nest, c.stmt))
    N max(N - 1, 0)
    """
    ext = tidy(sub(f.stop, f.start))
    e = fold_int(ext)
    if e is not None:
        return _c(max(e, 0), ext)
    ranges = {g.var: (g.start, g.stop) for g in nest.loop_index().enclosing(f.var) if g is not f}
    sizes = free_vars([d for b in nest.buffers.values() for d in b.dims])
    if polyhedral_domains().provably_nonnegative(ext, ranges, sizes):
        return ext
    return tidy(Max(ext, _c(0, ext)))


# ------------------------------------------------------------------------------------
# statement rewriting
# ------------------------------------------------------------------------------------
class _Subst(StmtMutator):
    def __init__(self, mapping: dict):
        self.mapping = mapping

    def visit_expr(self, e: Expr) -> Expr:
        ne = substitute(e, self.mapping)
        return ne if ne is e else tidy(ne)


def substitute_stmt(s: Stmt, mapping: dict) -> Stmt:
    """Replace variables in every expression of ``s`` (rewritten expressions are simplified)."""
    if not mapping:
        return s
    return _Subst(mapping).visit(s)


class _Renamer(StmtMutator):
    """Give every loop / let variable bound inside the tree a fresh variable."""

    def __init__(self, fresh_name: Callable[[str], str], mapping: dict):
        self.fresh_name = fresh_name
        self.mapping = mapping

    def visit_expr(self, e):
        ne = substitute(e, self.mapping)
        return ne if ne is e else tidy(ne)

    def visit_For(self, s: For):
        nv = Var(self.fresh_name(s.var.name), s.var.dtype)
        start, stop = self.visit_expr(s.start), self.visit_expr(s.stop)
        self.mapping[s.var] = nv
        body = self.visit(s.body)
        return For(nv, start, stop, body, s.kind, s.axis)

    def visit_LetStmt(self, s: Let):
        nv = Var(self.fresh_name(s.var.name), s.var.dtype)
        value = self.visit_expr(s.value)
        self.mapping[s.var] = nv
        return Let(nv, value, self.visit(s.body))


def clone_fresh(s: Stmt, fresh_name: Callable[[str], str], mapping: dict | None = None,
                renamed: dict | None = None) -> Stmt:
    """A copy of ``s`` whose inner loop/let variables are new Vars (named by ``fresh_name``),
    with ``mapping`` applied to free variables. Loop variables stay unique in the nest.
    ``renamed``, when given, receives each loop variable of ``s`` -> its new variable."""
    r = _Renamer(fresh_name, dict(mapping or {}))
    out = r.visit(s)
    if renamed is not None:
        renamed.update((f.var, r.mapping[f.var]) for f in iter_stmts(s) if isinstance(f, For))
    return out


class _ReplaceLoop(StmtMutator):
    def __init__(self, var: Var, make: Callable[[For], Stmt | list[Stmt] | None]):
        self.var = var
        self.make = make
        self.found = False

    def visit_For(self, s: For):
        if s.var is self.var:
            self.found = True
            r = self.make(s)
            if r is None:
                return Block(())
            if isinstance(r, (list, tuple)):
                return Block(tuple(r))
            return r
        return self.generic(s)


def replace_loop(root: Stmt, var: Var, make: Callable[[For], Stmt | list | None]) -> Stmt:
    """Replace the For binding ``var`` by ``make(for)`` (a statement, a list spliced in
    place, or None to delete it)."""
    m = _ReplaceLoop(var, make)
    out = m.visit(root)
    if not m.found:
        raise LookupError(f"no loop {var.name} in the tree")
    return out


def find_loop(root: Stmt, var: Var) -> For | None:
    for s in iter_stmts(root):
        if isinstance(s, For) and s.var is var:
            return s
    return None


def loop_path(root: Stmt, pred: Callable[[Stmt], bool]) -> list[list[For]]:
    """For every statement matching ``pred``, the list of enclosing Fors (outermost first)."""
    out: list[list[For]] = []

    def rec(s: Stmt, path: list[For]):
        if pred(s):
            out.append(path)
        if isinstance(s, For):
            rec(s.body, path + [s])
        elif isinstance(s, Block):
            for x in s.stmts:
                rec(x, path)
        elif isinstance(s, Cond):
            rec(s.then, path)
            if s.otherwise is not None:
                rec(s.otherwise, path)
        elif isinstance(s, Let):
            rec(s.body, path)
    rec(root, [])
    return out


def stmt_text(s) -> str:
    """The first line of ``s`` printed, cut to 60 characters (for error messages).

    >>> from te import Buffer, Var
    >>> from loopnest.stmt import Block, For, Store
    >>> A = Buffer("A", (8,), "float32"); i = Var("i")
    >>> stmt_text(For(i, 0, 8, Block((Store(A, (i,), 1.0),))))
    'for (int i = 0; i < 8; i++) {'
    """
    lines = stmt_to_str(s).splitlines()
    text = lines[0] if lines else type(s).__name__
    return text if len(text) <= 60 else text[:57] + "..."


# ------------------------------------------------------------------------------------
# removing statements and pruning what becomes empty
# ------------------------------------------------------------------------------------
class _Remove(StmtMutator):
    def __init__(self, pred: Callable[[Stmt], bool]):
        self.pred = pred

    def visit_Store(self, s: Store):
        return None if self.pred(s) else s

    def visit_Block(self, b: Block):
        out = []
        changed = False
        for x in b.stmts:
            nx = self.visit(x)
            if nx is not x:
                changed = True
            if nx is None or (isinstance(nx, Block) and not nx.stmts and not isinstance(x, Block)):
                continue
            out.append(nx)
        return Block(tuple(out)) if changed else b

    def visit_For(self, s: For):
        body = self.visit(s.body)
        if not body.stmts:
            return None
        return s.replace(body=body)

    def visit_LetStmt(self, s: Let):
        body = self.visit(s.body)
        if not body.stmts:
            return None
        return s.replace(body=body)

    def visit_Cond(self, s: Cond):
        then = self.visit(s.then)
        other = self.visit(s.otherwise) if s.otherwise is not None else None
        if other is not None and not other.stmts:
            other = None
        if not then.stmts and other is None:
            return None
        return s.replace(then=then, otherwise=other)


def remove_stores(root: Block, pred: Callable[[Store], bool]) -> Block:
    """Drop the Stores matching ``pred``, then every loop / let / if left empty."""
    out = _Remove(pred).visit(root)
    return out if out is not None else Block(())


# ------------------------------------------------------------------------------------
# GPU statement trees built by hand (gpu_matmul, gpu_wgmma)
# ------------------------------------------------------------------------------------
def fresh_vars() -> Callable[[str], Var]:
    """A source of loop variables numbered in creation order: ``fresh("c")`` -> ``c0``, ``c1``...

    >>> fresh = fresh_vars(); fresh("c").name, fresh("e").name
    ('c0', 'e1')
    """
    counter = iter(range(1 << 30))
    return lambda base: Var(f"{base}{next(counter)}")


def thread_nest(fresh: Callable[[str], Var], loops, body_fn) -> For:
    """Thread loops ``loops`` = ``[(name, extent) for z, y, x]`` (outermost first, bound to
    threadIdx.z, .y, .x) around the statements ``body_fn(z, y, x)``.

    >>> print(thread_nest(fresh_vars(), [("g", 1), ("w", 4), ("lane", 32)], lambda g, w, lane: [Block([])]))
    gpu_thread.z for (int g0 = 0; g0 < 1; g0++) {
      gpu_thread.y for (int w1 = 0; w1 < 4; w1++) {
        gpu_thread.x for (int lane2 = 0; lane2 < 32; lane2++) {
        }
      }
    }
    """
    (nz, ez), (ny, ey), (nx, ex) = loops
    z, y, x = fresh(nz), fresh(ny), fresh(nx)
    inner = For(x, 0, ex, Block(body_fn(z, y, x)), ForKind.GPU_THREAD, 0)
    return For(z, 0, ez, Block([For(y, 0, ey, Block([inner]), ForKind.GPU_THREAD, 1)]), ForKind.GPU_THREAD, 2)


def matmul_sizes(A, B, C, b_layout: str) -> tuple[int, int, int, bool]:
    """``(M, N, K, nk)`` of ``C (M x N) = A (M x K) @ B`` with B stored K x N (``b_layout``
    "kn") or N x K ("nk", then ``nk`` is True); ValueError when the layout or the shapes
    do not fit.

    >>> from te import Buffer
    >>> matmul_sizes(Buffer("A", (4, 8)), Buffer("B", (16, 8)), Buffer("C", (4, 16)), "nk")
    (4, 16, 8, True)
    """
    M, K = (int(d) for d in A.shape)
    if b_layout not in ("kn", "nk"):
        raise ValueError(f"b_layout must be 'kn' (B is K x N) or 'nk' (B is N x K), got {b_layout!r}")
    nk = b_layout == "nk"
    N = int(B.shape[0] if nk else B.shape[1])
    if int(B.shape[1] if nk else B.shape[0]) != K or tuple(int(d) for d in C.shape) != (M, N):
        raise ValueError(f"matmul shapes do not match: A {A.shape}, B {B.shape} ({b_layout}), C {C.shape}")
    return M, N, K, nk
