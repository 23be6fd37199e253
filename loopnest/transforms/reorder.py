"""Reordering the loops of a nest: reorder, reorder_axis.

A reorder changes only the nesting order: every loop keeps its variable, bounds and kind,
so handles to all the loops stay valid. Statements in the way (a reduction's init store,
sibling statements) are first distributed into loops of their own when that is legal.

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> A = Buffer("A", (4, 8), "float32")
>>> B = Compute("B", (4, 8), lambda i, j: A[i, j] + 1.0)
>>> nest = LoopNest([B]); i, j = nest.get_loops_for(B)
>>> _ = nest.reorder([i, j], [1, 0])
>>> print(nest)
for (int j = 0; j < 8; j++) {
  for (int i = 0; i < 4; i++) {
    B[i, j] = A[i, j] + 1.0f;
  }
}
"""
from __future__ import annotations

from typing import Sequence

from te.queries import free_vars

from ..errors import ScheduleError
from ..lazy_analysis import legality_checks
from ..loop import Loop
from ..stmt import Block, For
from ._rewrite import replace_loop, stmt_text
from .distribute import distribute_out_of_the_way

__all__ = ["reorder", "reorder_axis", "perfect_chain"]


def perfect_chain(nest, loops: Sequence, op: str) -> list[For]:
    """The Fors from the outermost to the innermost of ``loops``, each the only statement of
    the previous one's body; ScheduleError naming the statement in the way otherwise.

    ``loops`` (handles) may come in any order but must lie on one path of the tree.
    """
    names = [l.name for l in loops]
    if len({id(l.var) for l in loops}) != len(loops):
        raise ScheduleError(f"{op}: the loops {names} name one loop twice")
    chains = {id(l.var): [f.var for f in _enclosing(nest, l)] for l in loops}
    deepest = max(loops, key=lambda l: len(chains[id(l.var)]))
    path = chains[id(deepest.var)]
    for l in loops:
        if not any(v is l.var for v in path):
            raise ScheduleError(f"{op}: loops {l.name} and {deepest.name} are not nested one inside the other "
                                f"(they are in different loop nests)")
    top = min(loops, key=lambda l: len(chains[id(l.var)]))
    chain = [top.stmt]
    while chain[-1].var is not deepest.var:
        f = chain[-1]
        body = f.body.stmts
        nxt = [s for s in body if isinstance(s, For)]
        if len(body) != 1 or not nxt:
            other = next((s for s in body if not isinstance(s, For)), None)
            where = "besides" if len(body) > 1 else "around"
            what = f"`{stmt_text(other)}` {where} the next loop" if other is not None else "several loops"
            raise ScheduleError(
                f"{op}: loops {', '.join(names)} are not perfectly nested: the body of loop {f.var.name} holds "
                f"{what}; move it out first (e.g. distribute({f.var.name}) if legal)")
        chain.append(nxt[0])
    return chain


def _enclosing(nest, loop) -> list[For]:
    return [l.stmt for l in nest.get_enclosing_loops(loop)]


def reorder(nest, loops: Sequence, permutation: Sequence[int]):
    """Reorder a perfect nest: ``permutation[d]`` is the index in ``loops`` of the loop placed
    at the d-th of the positions the loops occupy (outermost first); loops between them that
    are not listed stay in place. Returns the handles of ``loops`` in their new order.

    Before / after ``reorder([i, j, k], [2, 0, 1])``::

        for (int i = 0; i < 4; i++) {            for (int k = 0; k < 2; k++) {
          for (int j = 0; j < 8; j++) {            for (int i = 0; i < 4; i++) {
            for (int k = 0; k < 2; k++) {            for (int j = 0; j < 8; j++) {
              B[i, j, k] = A[i, j, k];                 B[i, j, k] = A[i, j, k];
            }                                        }
          }                                        }
        }                                        }

    Statements in the way: when a loop between the outermost and the innermost of the loops
    that move holds other statements besides the next loop (a reduction's init store,
    sibling statements), it is distributed first (``distribute``, innermost first): the
    statements in the way get loops of their own with fresh variables, the listed loops keep
    theirs. Before / after ``reorder([i, j, k], [0, 2, 1])`` on a matmul (ijk to ikj)::

        for (int i = 0; i < M; i++) {            for (int i = 0; i < M; i++) {
          for (int j = 0; j < N; j++) {            for (int j_1 = 0; j_1 < N; j_1++) {
            C[i, j] = 0.0f;                          C[i, j_1] = 0.0f;
            for (int k = 0; k < K; k++) {          }
              C[i, j] = C[i, j] + ...;             for (int k = 0; k < K; k++) {
                                                     for (int j = 0; j < N; j++) {
                                                       C[i, j] = C[i, j] + ...;

    When a distribution is illegal (a dependence from a later statement back to an earlier
    one) the reorder is refused, naming the statement and the dependence.

    Legality: the loops must then be perfectly nested (each the only statement of the previous
    one's body), no loop's bounds may use a loop placed inside it, every dependence
    between iterations of the nest must keep a lexicographically positive distance vector
    once permuted (``check_reorder``), and a parallel / vectorized / GPU loop must still
    carry no dependence at its new depth. Otherwise ScheduleError, naming the statement in
    the way or the dependence and the orders that would be legal.
    """
    perm = [int(p) for p in permutation]
    n = len(loops)
    if n == 0:
        raise ScheduleError("reorder: no loops given")
    if sorted(perm) != list(range(n)):
        raise ScheduleError(f"reorder: the permutation {list(permutation)} is not a permutation of "
                            f"0..{n - 1} (one entry per loop of {[l.name for l in loops]})")
    if len({id(l.var) for l in loops}) != n:
        raise ScheduleError(f"reorder: the loops {[l.name for l in loops]} name one loop twice")
    if _on_one_path(nest, loops):
        by_depth = sorted(loops, key=lambda l: _depth(nest, l))
        target = [loops[p] for p in perm]
        moved = [d for d in range(n) if target[d].var is not by_depth[d].var]
        if not moved:
            return by_depth
        first, last = moved[0], moved[-1]
        if first > 0 or last < n - 1:
            # the loops that keep their place at either end take no part (nor does what is
            # in the way around them)
            sub = by_depth[first:last + 1]
            ids = [id(l.var) for l in sub]
            inner = reorder(nest, sub, [ids.index(id(l.var)) for l in target[first:last + 1]])
            return by_depth[:first] + inner + by_depth[last + 1:]
    _distribute_path(nest, loops, "reorder")
    chain = perfect_chain(nest, loops, "reorder")
    pos = {id(f.var): k for k, f in enumerate(chain)}
    slots = sorted(pos[id(l.var)] for l in loops)
    new_chain = list(chain)
    for slot, p in zip(slots, perm):
        new_chain[slot] = chain[pos[id(loops[p].var)]]
    if all(a is b for a, b in zip(new_chain, chain)):
        return [Loop(nest, f.var) for f in new_chain if id(f.var) in {id(l.var) for l in loops}]
    _check_bounds_order(new_chain)
    legality_checks().check_reorder(nest, loops, perm)
    body = chain[-1].body
    for f in reversed(new_chain):
        body = Block((f.replace(body=body),))
    new_top = body.stmts[0]
    new_root = replace_loop(nest.root, chain[0].var, lambda _: new_top)
    legality_checks().check_kinds_after(nest, new_root, new_chain, "reorder")
    nest.root = new_root
    listed = {id(l.var) for l in loops}
    return [Loop(nest, f.var) for f in new_chain if id(f.var) in listed]


def _depth(nest, loop) -> int:
    return len(nest.get_enclosing_loops(loop))


def _on_one_path(nest, loops: Sequence) -> bool:
    """Whether the loops lie on one path of the tree (each around or inside the others)."""
    deepest = max(loops, key=lambda l: _depth(nest, l))
    path = {id(l.var) for l in nest.get_enclosing_loops(deepest)}
    return all(id(l.var) in path for l in loops)


def _distribute_path(nest, loops: Sequence, op: str) -> None:
    """Distribute the statements in the way between the outermost and the innermost of
    ``loops`` into loops of their own (``distribute_out_of_the_way``)."""
    depths = [_depth(nest, l) for l in loops]
    outer = loops[depths.index(min(depths))]
    inner = loops[depths.index(max(depths))]
    if any(v is outer.var for v in (l.var for l in nest.get_enclosing_loops(inner))):
        distribute_out_of_the_way(nest, outer, inner, op)


def _check_bounds_order(new_chain: list[For]) -> None:
    for d, f in enumerate(new_chain):
        inner = {id(g.var): g for g in new_chain[d:]}
        used = [v for v in free_vars([f.start, f.stop]) if id(v) in inner]
        if used:
            v = used[0]
            raise ScheduleError(f"reorder: the bounds of loop {f.var.name} use {v.name}, but loop {v.name} "
                                f"would be placed inside loop {f.var.name} (a non-rectangular nest keeps the "
                                f"loop bounding it outside)")


def reorder_axis(nest, a, b):
    """Swap two loops of one nest (the loops between them stay in place); swapping a loop
    with itself does nothing.

    Before / after ``reorder_axis(i, k)``::

        for (int i = 0; i < 4; i++) {            for (int k = 0; k < 2; k++) {
          for (int j = 0; j < 8; j++) {            for (int j = 0; j < 8; j++) {
            for (int k = 0; k < 2; k++) {            for (int i = 0; i < 4; i++) {
              B[i, j, k] = A[i, j, k];                 B[i, j, k] = A[i, j, k];

    Same legality as ``reorder``, statements in the way distributed the same way. Returns
    the handles (the outer one first, after the swap).
    """
    if a.var is b.var:
        return [a, b]
    outer, inner = (a, b) if _depth(nest, a) <= _depth(nest, b) else (b, a)
    return reorder(nest, [outer, inner], [1, 0])
