"""Distributing loops: ``distribute`` (loop fission), and ``distribute_out_of_the_way``, which
transforms that need a perfect nest (reorder, reorder_axis, tile) call to move the statements
in the way (a reduction's init store, other sibling statements) into loops of their own.

>>> from te import Buffer, Reduce, Sum
>>> from loopnest import LoopNest
>>> A = Buffer("A", (4, 8), "float32")
>>> C = Reduce("C", (4,), Sum(), lambda i, k: A[i, k], (8,))
>>> nest = LoopNest([C]); i, k = nest.get_loops_for(C)
>>> distribute_out_of_the_way(nest, i, k, "reorder")
>>> print(nest)
for (int i_1 = 0; i_1 < 4; i_1++) {
  C[i_1] = 0.0f;
}
for (int i = 0; i < 4; i++) {
  for (int k = 0; k < 8; k++) {
    C[i] = C[i] + A[i, k];
  }
}
"""
from __future__ import annotations

from te.expr import Var

from ..errors import ScheduleError
from ..lazy_analysis import legality_checks
from ..loop import Loop
from ..stmt import Block, For, ForKind, Stmt, iter_stmts
from ._rewrite import replace_loop, stmt_text, substitute_stmt

__all__ = ["distribute", "distribute_out_of_the_way"]


def distribute(nest, loop, keep: int = 0):
    """Loop fission: one loop per statement of ``loop``'s body, in order. The loop of
    statement ``keep`` (the first by default) keeps the loop's variable (and handle); the
    others get fresh variables (``i_1``, ``i_2``, ...); loops inside the body keep theirs.
    Returns the list of handles.

    Before / after ``distribute(i)``::

        for (int i = 0; i < 8; i++) {            for (int i = 0; i < 8; i++) {
          B[i] = A[i] + 1.0f;                      B[i] = A[i] + 1.0f;
          C[i] = A[i] * 2.0f;                    }
        }                                        for (int i_1 = 0; i_1 < 8; i_1++) {
                                                   C[i_1] = A[i_1] * 2.0f;
                                                 }

    Legality: no dependence may go from a statement of the body to an earlier one in a
    later iteration of ``loop`` (within one iteration of the loops around it), since
    distribution runs all iterations of each statement before the next
    (``check_distribute``); dependences carried by the enclosing loops are kept. A body of
    one statement is refused (nothing to distribute).

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (8,), "float32")
    >>> nest = LoopNest([Compute("B", (8,), lambda i: A[i]), Compute("C", (8,), lambda i: A[i])])
    >>> i = nest.fuse(nest.get_all_loops())
    >>> distribute(nest, i, keep=1)
    [Loop(i_2), Loop(i)]
    """
    f = loop.stmt
    stmts = f.body.stmts
    if len(stmts) < 2:
        raise ScheduleError(f"cannot distribute loop {loop.name}: its body has {len(stmts)} statement"
                            f"{'' if len(stmts) == 1 else 's'}, there is nothing to split")
    if not 0 <= keep < len(stmts):
        raise ScheduleError(f"distribute({loop.name}, keep={keep}): keep must index a statement of the body "
                            f"(0..{len(stmts) - 1})")
    outer = nest.get_enclosing_loops(loop)[:-1]
    if f.kind == ForKind.GPU_BLOCK and outer and outer[-1].stmt.kind == ForKind.GPU_BLOCK:
        # the block loop around would hold several loops: a kernel's grid is its outermost
        # loops, each block loop holding only the next (seed 74, case 1059)
        raise ScheduleError(f"cannot distribute loop {loop.name}: it is a gpu_block loop inside the gpu_block loop "
                            f"{outer[-1].name}, which would then hold several loops; distribute the outermost "
                            "block loop, or distribute before binding")
    legality_checks().check_distribute(nest, loop)
    new = []
    for k, s in enumerate(stmts):
        if k == keep:
            new.append(f.replace(body=Block((s,))))
            continue
        v = Var(nest.fresh_name(f.var.name), f.var.dtype)
        new.append(For(v, f.start, f.stop, substitute_stmt(Block((s,)), {f.var: v}), f.kind, f.axis))
    nest.root = replace_loop(nest.root, f.var, lambda _: new)
    return [Loop(nest, g.var) for g in new]


def distribute_out_of_the_way(nest, outer, inner, op: str) -> None:
    """Make ``inner`` the only statement of the loops from ``outer`` down to it: every loop on
    that path whose body holds other statements (a reduction's init store, sibling loops) is
    distributed, innermost first, the path's loop keeping its variable and handle, the others
    getting loops of their own. ``outer`` and ``inner`` are handles, ``outer`` around
    ``inner``. Nothing changes when the path is already perfect.

    ScheduleError (for ``op``) naming the statement in the way and the dependence when a
    distribution is illegal; the caller (a transform) restores the nest. A loop wrapped in a
    guard or a Let is left for the caller's own check.
    """
    chain = [l.var for l in nest.get_enclosing_loops(inner)]
    ids = [id(v) for v in chain]
    if id(outer.var) not in ids:
        return
    top = ids.index(id(outer.var))
    for d in range(len(chain) - 2, top - 1, -1):
        f = Loop(nest, chain[d]).stmt
        body = f.body.stmts
        if len(body) < 2:
            continue
        nxt = chain[d + 1]
        keep = next((k for k, s in enumerate(body) if _holds_loop(s, nxt)), None)
        if keep is None:
            continue
        other = body[1] if keep == 0 else body[0]
        try:
            distribute(nest, Loop(nest, f.var), keep=keep)
        except ScheduleError as e:
            raise ScheduleError(
                f"{op}: the body of loop {f.var.name} holds `{stmt_text(other)}` besides loop {nxt.name}, and it "
                f"cannot be moved into a loop of its own: {e}") from None


def _holds_loop(s: Stmt, var: Var) -> bool:
    return any(isinstance(x, For) and x.var is var for x in iter_stmts(s))
