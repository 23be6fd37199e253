"""Fusing and flattening loops: fuse, flatten (and ``distribute``, re-exported from
``loopnest.transforms.distribute``).

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> A = Buffer("A", (8,), "float32")
>>> B = Compute("B", (8,), lambda i: A[i] + 1.0)
>>> C = Compute("C", (8,), lambda i: B[i] * 2.0)
>>> nest = LoopNest([B, C])
>>> fused = nest.fuse([nest.get_loops_for(B)[0], nest.get_loops_for(C)[0]])
>>> print(nest)
for (int i = 0; i < 8; i++) {
  B[i] = A[i] + 1.0f;
  C[i] = B[i] * 2.0f;
}
"""
from __future__ import annotations

from typing import Sequence

from te.expr import FloorDiv, FloorMod, IntImm, Var
from te.queries import fold_int, free_vars
from te.printer import expr_to_str

from ..errors import ScheduleError
from ..lazy_analysis import legality_checks, polyhedral_domains
from ..loop import Loop
from ..stmt import Block, Cond, For, ForKind, Let, Stmt, StmtMutator
from ._rewrite import (floordiv_c, floormod_c, mul, nonnegative_extent, replace_loop, stmt_text,
                       substitute_stmt, tidy)
from .distribute import distribute
from .reorder import perfect_chain

__all__ = ["fuse", "flatten", "distribute"]


def _parent_block(root: Stmt, var: Var):
    """(the Block holding the For of ``var`` as a direct statement, its index) or None."""
    stack = [root]
    while stack:
        s = stack.pop()
        if isinstance(s, Block):
            for k, x in enumerate(s.stmts):
                if isinstance(x, For) and x.var is var:
                    return s, k
            stack.extend(reversed(s.stmts))
        elif isinstance(s, (For, Let)):
            stack.append(s.body)
        elif isinstance(s, Cond):
            if s.otherwise is not None:
                stack.append(s.otherwise)
            stack.append(s.then)
    return None


def fuse(nest, loops: Sequence):
    """Fuse adjacent sibling loops with equal bounds into one loop running their bodies in
    order; the first loop (in program order, whatever the order of ``loops``) keeps its
    variable (its handle stays valid), the others' variables are replaced by it. Returns the
    fused loop's handle.

    Before / after ``fuse([i, i_1])``::

        for (int i = 0; i < N; i++) {            for (int i = 0; i < N; i++) {
          B[i] = A[i] + 1.0f;                      B[i] = A[i] + 1.0f;
        }                                          C[i] = B[i] * 2.0f;
        for (int i_1 = 0; i_1 < N; i_1++) {      }
          C[i_1] = B[i_1] * 2.0f;
        }

    Legality: the loops must be consecutive statements of one block, with provably equal
    bounds and the same kind, and no iteration of a later loop may depend on a later
    iteration of an earlier one (``check_fuse``: e.g. ``C[i] = B[i + 1]`` after
    ``B[i] = ...`` is refused). Fused parallel / vectorized / GPU loops must still carry no
    dependence. Otherwise ScheduleError naming the loops and the reason.
    """
    loops = list(loops)
    names = [l.name for l in loops]
    legality = legality_checks()
    if len(loops) < 2:
        raise ScheduleError(f"fuse needs at least two loops, got {names}")
    what = legality.loops_text(loops)
    if len({id(l.var) for l in loops}) != len(loops):
        raise ScheduleError(f"fuse: the loops {names} name one loop twice")
    places = []
    for l in loops:
        l.stmt  # raises on a stale handle
        places.append(_parent_block(nest.root, l.var))
    block = places[0][0]
    for l, (b, _) in zip(loops, places):
        if b is not block:
            raise ScheduleError(f"cannot fuse {what}: loop {l.name} is not in the same block as "
                                f"loop {loops[0].name} (fused loops must be siblings, one after the other)")
    order = sorted(range(len(loops)), key=lambda k: places[k][1])
    loops = [loops[k] for k in order]
    idx = [places[k][1] for k in order]
    for a, b in zip(idx, idx[1:]):
        if b != a + 1:
            between = block.stmts[a + 1]
            raise ScheduleError(f"cannot fuse {what}: they are not adjacent; "
                                f"`{stmt_text(between)}` lies between them")
    fors = [block.stmts[k] for k in idx]
    first = fors[0]
    for f in fors[1:]:
        for bound in ("start", "stop"):
            a, b = getattr(first, bound), getattr(f, bound)
            if not polyhedral_domains().provably_equal(a, b):
                raise ScheduleError(
                    f"cannot fuse {what}: their bounds differ: loop {first.var.name} runs "
                    f"[{expr_to_str(first.start)}, {expr_to_str(first.stop)}), loop {f.var.name} runs "
                    f"[{expr_to_str(f.start)}, {expr_to_str(f.stop)}) (split or slice one to match first)")
        if f.kind != first.kind or f.axis != first.axis:
            raise ScheduleError(f"cannot fuse {what}: loop {first.var.name} is {first.kind} and "
                                f"loop {f.var.name} is {f.kind}; fuse before changing loop kinds")
        if f.var.dtype != first.var.dtype:
            raise ScheduleError(f"cannot fuse {what}: their variables have different types "
                                f"({first.var.dtype}, {f.var.dtype})")
    legality.check_fuse(nest, loops)
    body = list(first.body.stmts)
    for f in fors[1:]:
        body.extend(substitute_stmt(f.body, {f.var: first.var}).stmts)
    fused = first.replace(body=Block(tuple(body)))
    if first.kind in (ForKind.PARALLEL, ForKind.VECTORIZED, ForKind.GPU_BLOCK, ForKind.GPU_THREAD):
        try:
            _recheck_kind(nest, fused, block, idx)
        except ScheduleError as e:
            raise ScheduleError(f"cannot fuse {what}: the fused loop would be {first.kind}, and {e}") from None
    new_block = Block(block.stmts[:idx[0]] + (fused,) + block.stmts[idx[-1] + 1:])
    nest.root = _replace_block(nest.root, block, new_block)
    return Loop(nest, first.var)


def _recheck_kind(nest, fused: For, block: Block, idx: list) -> None:
    """The fused loop keeps a parallel kind only if it still carries no dependence."""
    new_block = Block(block.stmts[:idx[0]] + (fused,) + block.stmts[idx[-1] + 1:])
    tmp = nest.copy()
    tmp.root = _replace_block(nest.root, block, new_block)
    if fused.kind == ForKind.VECTORIZED:
        legality_checks().check_vectorize(tmp, fused.var)
    else:
        legality_checks().check_parallelize(tmp, fused.var)


def _replace_block(root: Stmt, old: Block, new: Block) -> Stmt:
    class R(StmtMutator):
        def visit_Block(self, b):
            if b is old:
                return new
            return self.generic(b)

        def generic(self, s):
            if s is old:
                return new
            return super().generic(s)
    out = R().visit(root)
    return out


def flatten(nest, loops: Sequence):
    """Collapse a perfect nest of loops starting at 0 into one loop over the product of
    their extents, recovering each index with floordiv / floormod. Returns its handle (a new
    loop named ``<outer>_<...>_flat``; the old loops' handles become stale).

    Before / after ``flatten([i, j])``::

        for (int i = 0; i < 4; i++) {
          for (int j = 0; j < 6; j++) {
            B[i, j] = A[i, j];
          }
        }
        ->
        for (int i_j_flat = 0; i_j_flat < 24; i_j_flat++) {
          B[floordiv(i_j_flat, 6), floormod(i_j_flat, 6)] = A[floordiv(i_j_flat, 6), floormod(i_j_flat, 6)];
        }

    Legal (the iterations keep their order) but inside a parallel or GPU loop whose
    intermediates the analysis can then no longer show private (``transforms.privacy``).
    The loops must be perfectly nested and
    consecutive, start at 0 (``normalize`` first), have rectangular bounds and one index
    type, and none may be bound to a GPU index (flatten before binding). The flat loop keeps
    the loops' kind when they all share one, else it is serial.
    """
    loops = list(loops)
    if not loops:
        raise ScheduleError("flatten: no loops given")
    chain = perfect_chain(nest, loops, "flatten")
    names = [f.var.name for f in chain]
    if len(chain) != len(loops):
        missing = [n for n in names if n not in {l.name for l in loops}]
        raise ScheduleError(f"flatten: the loops must be consecutive; loop{'s' if len(missing) > 1 else ''} "
                            f"{', '.join(missing)} between them must be listed too")
    if len(chain) == 1:
        return Loop(nest, chain[0].var)
    bound = next((f for f in chain if f.kind in (ForKind.GPU_BLOCK, ForKind.GPU_THREAD)), None)
    if bound is not None:
        # the flat loop would be serial: the threads or blocks it stood for would each run
        # every iteration (seed 69, case 112: a warp MMA's accumulators no longer per thread)
        raise ScheduleError(f"flatten: loop {bound.var.name} is bound to a GPU index ({bound.kind}); flatten the "
                            "loops before binding, then bind the flat loop")
    chain_vars = {id(f.var) for f in chain}
    dtype = chain[0].var.dtype
    for f in chain:
        if fold_int(f.start) != 0:
            raise ScheduleError(f"flatten: loop {f.var.name} starts at {f.start}, not 0; normalize({f.var.name}) first")
        if f.var.dtype != dtype:
            raise ScheduleError(f"flatten: loops {names[0]} and {f.var.name} have different index types "
                                f"({dtype}, {f.var.dtype})")
        used = [v for v in free_vars(f.stop) if id(v) in chain_vars]
        if used:
            raise ScheduleError(f"flatten: the bound of loop {f.var.name} depends on loop {used[0].name} "
                                "(only rectangular nests can be flattened)")
    extents = [nonnegative_extent(nest, f) for f in chain]
    total = extents[0]
    for e in extents[1:]:
        total = tidy(mul(total, e))
    flat = Var(nest.fresh_name("_".join(names) + "_flat"), dtype)
    mapping = {}
    inner_size = None  # product of the extents of the loops inside
    for f, e in zip(reversed(chain), reversed(extents)):
        q = flat if inner_size is None else _div(flat, inner_size)
        mapping[f.var] = q if f is chain[0] else _mod(q, e)
        inner_size = e if inner_size is None else tidy(mul(inner_size, e))
    body = substitute_stmt(chain[-1].body, mapping)
    kinds = {(f.kind, f.axis) for f in chain}
    kind, axis = kinds.pop() if len(kinds) == 1 else (ForKind.SERIAL, None)
    if kind == ForKind.VECTORIZED and fold_int(total) is None:
        kind = ForKind.SERIAL
    new = For(flat, IntImm(0, dtype), total, body, kind, axis)
    nest.root = replace_loop(nest.root, chain[0].var, lambda _: new)
    return Loop(nest, flat)


def _div(a, e):
    c = fold_int(e)
    if c is not None:
        return floordiv_c(a, c)
    return FloorDiv(a, e)


def _mod(a, e):
    c = fold_int(e)
    if c is not None:
        return floormod_c(a, c)
    return FloorMod(a, e)
