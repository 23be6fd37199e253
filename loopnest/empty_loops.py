"""The pass ``guard_empty_loops``: a serial or parallel loop whose body is only loops of
symbolic trip counts that do not change with it (or loops it guarded already, and the
storage of their buffers) runs only where one of them runs at least once.

The nests that schedules give the columns or rows a tile leaves over (``split_with_tail``
of a symbolic extent) put the reduction loop around loops of ``floormod(N, 64)``
iterations: where the tiles divide N, the reduction loop still counted through its N
iterations with nothing to do, N^2 of them for the leftover columns of an N x N matmul
(0.48 ms of its 15 at N = 1024 on one core; LLVM did not remove the loop), and the parallel
loop around it allocated its accumulator N times (0.12 ms once the reduction loop was
guarded; 0.05 ms with the parallel loop guarded too). The guard is the same test the inner
loops make, once.

>>> from te import Buffer, Var
>>> from loopnest.stmt import Block, For, Store
>>> A = Buffer("A", (64,), "float32"); N, k, j = Var("N"), Var("k"), Var("j")
>>> inner = For(j, 0, N % 8, Block((Store(A, (j,), A[j] + 1.0),)))
>>> print(guard_empty_loops(None, For(k, 0, N, Block((inner,)))))
if (0 < N % 8) {
  for (int k = 0; k < N; k++) {
    for (int j = 0; j < N % 8; j++) {
      A[j] = A[j] + 1.0f;
    }
  }
}
"""
from __future__ import annotations

from te.expr import LT, Or
from te.queries import fold_int, free_vars, loads

from .kinds import ForKind
from .stmt import Allocate, Block, Cond, For, Free, Stmt, StmtMutator, iter_stmts

__all__ = ["guard_empty_loops"]


def guard_empty_loops(nest, root: Stmt) -> Stmt:
    """``root`` with every serial or parallel loop whose body is only loops (and the
    ``Allocate`` / ``Free`` of buffers), none of a constant positive trip count and all with
    bounds free of the loops inside it and of loads, wrapped in ``if`` one of those inner
    loops runs; a loop guarded so counts by its guard for the loop around it, innermost
    first (see the module docstring). ``nest`` is unused (the pass signature)."""
    return _Guard().visit(root)


class _Guard(StmtMutator):
    def visit_For(self, s: For):
        s = self.generic(s)
        cond = _runs_when(s)
        if cond is None:
            return s
        return Cond(cond, Block((s,)))


def _guarded_loop(s) -> bool:
    """Whether ``s`` is a loop this pass guarded: ``if (c) { for ... }`` and nothing else."""
    return isinstance(s, Cond) and s.otherwise is None and len(s.then.stmts) == 1 and isinstance(s.then.stmts[0], For)


def _runs_when(f: For):
    """The condition under which the body of ``f`` does anything, where ``f`` is serial or
    parallel and its body only loops of symbolic trip counts that no loop inside ``f``
    changes (or such loops already guarded, and the storage of their buffers); else None."""
    if f.kind not in (ForKind.SERIAL, ForKind.PARALLEL):
        return None
    inner = list(f.body.stmts) if isinstance(f.body, Block) else [f.body]
    inner = [g for g in inner if not isinstance(g, (Allocate, Free))]
    if not inner or not all(isinstance(g, For) or _guarded_loop(g) for g in inner):
        return None
    bound_inside = {id(f.var)} | {id(x.var) for g in inner for x in iter_stmts(g) if isinstance(x, For)}
    tests = []
    for g in inner:
        test = g.cond if isinstance(g, Cond) else LT(g.start, g.stop)
        if loads([test]) or any(id(v) in bound_inside for v in free_vars([test])):
            return None
        trips = fold_int(g.stop - g.start) if isinstance(g, For) else None
        if trips is not None:
            if trips > 0:
                return None         # runs every time: nothing to skip
            continue                # never runs
        tests.append(test)
    if not tests:
        return None
    cond = tests[0]
    for t in tests[1:]:
        cond = Or(cond, t)
    return cond
