"""Software prefetch: ``LoopNest.prefetch(buffer, loop, distance)`` asks for the elements of
``buffer`` that iteration ``v + distance`` of ``loop`` will access to be fetched into the
cache while iteration ``v`` runs; the pass ``insert_prefetches`` (the first of
``prepare_for_codegen``) places the ``Prefetch`` statements.

Where: beside one access of ``buffer`` in the loop's body, the last store to it (a prefetch
for writing, which takes the line in the state a store needs) or, where the loop only reads
the buffer, its last load. The prefetch has that access's indices with the loop's variable
``v`` replaced by ``min(v + distance, stop - 1)``, so it stands inside the same inner loops
and touches an element the nest itself accesses (never outside the buffer), one vector
(about one cache line) per iteration of a vectorized inner loop: the next row's prefetches
are spread over the work of this row. The hint helps where a loop makes several passes
over a row that comes from memory or a far cache (the first pass waits for it, the later
ones run from L1 while the memory is idle): layernorm 4096 x 1024 on 2 AVX-512 cores
reads the next row and takes the next output row for writing, 1.2x faster.

Accesses whose indices the loop's next iterations cannot be told from (an index read from
memory, a variable bound by a ``Let`` inside the loop, under an ``if`` or inside a loop whose
bounds depend on the loop's variable) are not prefetched, nor are reads on a side of an
``if_then_else`` (the guard may keep an out-of-range read from running, and the prefetch
would not be guarded); ``prefetch`` refuses a buffer none of whose accesses qualifies.

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> X = Buffer("X", (4, 8), "float32")
>>> nest = LoopNest([Compute("Y", (4, 8), lambda i, j: X[i, j] * 2.0)])
>>> i, j = nest.get_loops_for("Y")
>>> nest.prefetch("X", i)
>>> print(insert_prefetches(nest, nest.root))
for (int i = 0; i < 4; i++) {
  for (int j = 0; j < 8; j++) {
    prefetch X[min(i + 1, 3), j];
    Y[i, j] = X[i, j] * 2.0f;
  }
}
"""
from __future__ import annotations

import warnings

from te import expr as E
from te.queries import free_vars, loads, unconditional_loads, uses_var
from te.simplify import simplify

from ..errors import ScheduleError
from ..kinds import ForKind
from ..loop import LoopIndex
from ..stmt import Block, Cond, For, Let, Prefetch, Stmt, StmtMutator, Store, stmt_children
from ._rewrite import replace_loop

__all__ = ["prefetch", "insert_prefetches"]

#: the kinds of loop whose next iterations a prefetch may run ahead of
_KINDS = (ForKind.SERIAL, ForKind.PARALLEL, ForKind.UNROLLED)


def prefetch(nest, buffer, loop, distance: int = 1) -> None:
    """Record that ``buffer`` is to be prefetched ``distance`` iterations of ``loop`` ahead
    (see the module). A second call for the same buffer and loop replaces the distance.
    Refused (ScheduleError, nothing recorded): an intermediate buffer (its storage may be
    narrowed to one iteration), a ``distance`` that is not an int of at least 1, a loop that
    is vectorized or bound to the GPU, and a buffer the loop does not access in a way a
    prefetch can follow."""
    buf = nest.buffer(buffer)
    if isinstance(distance, bool) or not isinstance(distance, int) or distance < 1:
        raise ScheduleError(f"prefetch: the distance is a number of iterations, an int of at least 1, not "
                            f"{distance!r}")
    if not any(buf is b for b in list(nest.inputs) + list(nest.outputs)):
        raise ScheduleError(f"prefetch: {buf.name} is an intermediate of the nest; prefetch is for the kernel's "
                            f"inputs and outputs ({', '.join(b.name for b in list(nest.inputs) + list(nest.outputs))})"
                            ", which come from memory")
    f = loop.stmt
    if f.kind not in _KINDS:
        raise ScheduleError(f"prefetch: loop {f.var.name} is {f.kind}; a prefetch runs ahead of a serial, parallel "
                            "or unrolled loop (give the loop around the vector or GPU loops)")
    if loads([f.start, f.stop]):
        raise ScheduleError(f"prefetch: the bounds of loop {f.var.name} read memory; a prefetch runs ahead of a loop "
                            "whose bounds are known when it starts")
    if _site(f, buf) is None:
        raise ScheduleError(f"prefetch: loop {f.var.name} does not access {buf.name} at indices its next iterations "
                            "can be told from (none, or only through a value read from memory, a let variable, a "
                            "condition or a loop bound that depends on the loop, or on a side of an if_then_else)")
    nest._prefetches = [p for p in nest._prefetches if not (p[0] is buf and p[1] is f.var)]
    nest._prefetches.append((buf, f.var, distance))


def insert_prefetches(nest, root: Stmt) -> Stmt:
    """Place the prefetches that ``LoopNest.prefetch`` recorded (see the module). A recorded
    loop that a later transform removed (a split, fuse or unroll of that loop) is skipped with
    a warning: call ``prefetch`` after the transforms of that loop."""
    for buf, var, distance in getattr(nest, "_prefetches", ()):
        f = LoopIndex(root).get(var)
        site = _site(f, buf) if f is not None else None
        if site is None:
            warnings.warn(f"the prefetch of {buf.name} at loop {var.name} is dropped: "
                          + ("the loop no longer exists (a transform after prefetch replaced it); call prefetch "
                             "after the transforms of that loop" if f is None else
                             "the loop no longer accesses it at indices a prefetch can follow"), stacklevel=2)
            continue
        store, indices, write = site
        ahead = E.Min(var + distance, simplify(f.stop - 1))
        moved = tuple(simplify(E.substitute(i, {var: ahead})) for i in indices)
        before = _Before(f.var, store, Prefetch(buf, moved, write))
        root = replace_loop(root, var, lambda f: f.replace(body=before.visit(f.body)))
    return root


def _same_in_every_iteration(s: Stmt, var) -> bool:
    """Whether what ``s`` (a loop, condition or let between the prefetch loop and an access)
    decides about the statements inside it is the same in every iteration of ``var``'s loop:
    bounds and conditions that neither use ``var`` nor read memory. A let's variable may
    stand for anything: never."""
    if isinstance(s, For):
        return not uses_var([s.start, s.stop], var) and not loads([s.start, s.stop])
    if isinstance(s, Cond):
        return not uses_var(s.cond, var) and not loads(s.cond)
    return not isinstance(s, Let)


def _site(f: For, buf) -> tuple[Store, tuple, bool] | None:
    """The access a prefetch of ``buf`` in loop ``f`` follows: (the Store it stands before, its
    indices, whether it is a write); None where none qualifies."""
    found: dict[bool, tuple] = {}
    stack: list[tuple[Stmt, bool]] = [(f.body, True)]
    while stack:
        s, followable = stack.pop()
        if isinstance(s, Block):
            stack.extend((x, followable) for x in reversed(s.stmts))
        elif isinstance(s, (For, Cond, Let)):
            inside = followable and _same_in_every_iteration(s, f.var)
            stack.extend((x, inside) for x in reversed(stmt_children(s)))
        elif isinstance(s, Store) and followable:
            reads = [ld.indices for ld in unconditional_loads(list(s.indices) + [s.value], buf)]
            for indices, write in [(ix, False) for ix in reads] + ([(s.indices, True)] if s.buffer is buf else []):
                if _followable(indices, f.var):
                    found[write] = (s, indices, write)
    return found.get(True) or found.get(False)


def _followable(indices: tuple, var) -> bool:
    """Indices that name the same access in another iteration of ``var``'s loop and move with
    it: they use ``var`` and hold no load and no Let expression. (Their other variables are
    the loops' inside, the same for every iteration, or bound outside the loop.)"""
    lets: list = []
    free_vars(indices, lets=lets)
    return not lets and not loads(indices) and uses_var(indices, var)


class _Before(StmtMutator):
    """Insert ``new`` before each occurrence of the statement ``target`` (one Store object may
    stand at several places) that ``_site`` would follow: none inside a loop, condition or
    let that differs between the iterations of ``var``'s loop."""

    def __init__(self, var, target: Store, new: Stmt):
        self.var, self.target, self.new = var, target, new

    def visit_Store(self, s: Store):
        return Block((self.new, s)) if s is self.target else s

    def generic(self, s: Stmt):
        return super().generic(s) if _same_in_every_iteration(s, self.var) else s
