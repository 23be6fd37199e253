"""Loops whose iterations are independent by their statements' shape: the common case of
a loop that writes each element of its outputs once and reads nothing it writes, decided
without building the polyhedral model (``dependences``), which costs about a millisecond a
question on a 13-stage pipeline whose every stage is vectorized.

The answer is exact where it says True and says nothing where it says False: the callers
then ask the dependence analysis.

>>> from te import Buffer, Compute, Reduce, Sum
>>> from loopnest import LoopNest
>>> A = Buffer("A", (4, 8), "float32")
>>> nest = LoopNest([Compute("B", (4, 8), lambda i, j: A[i, j] * 2.0)])
>>> [iterations_independent(f) for f in nest.loop_index().loops]
[True, True]
>>> nest = LoopNest([Reduce("S", (4,), Sum(), lambda i, k: A[i, k], (8,))])
>>> [iterations_independent(f) for f in nest.loop_index().loops]     # S[i] is read: ask isl
[False, False]
"""
from __future__ import annotations

from te import expr as E
from te.expr import structural_equal
from te.queries import fold_int, free_vars, loads
from te.simplify import simplify

from ..stmt import Block, Cond, For, LetStmt, Prefetch, Store, stmt_children

__all__ = ["iterations_independent"]


def iterations_independent(f: For) -> bool:
    """True when no two iterations of loop ``f`` can touch one element where one of them
    writes it, read off the statements: its body holds only blocks, loops, conditions, lets,
    stores and prefetches; no buffer stored to in it is read in it (by a value, an index, a
    condition, a loop bound or a let); and the stores to each buffer all have the same
    indices, one of which is ``v * c + e`` with ``v`` the loop's variable, ``c`` a nonzero
    constant and ``e`` using no load and no variable bound inside the loop, so different
    iterations write different elements. Then the loop carries no dependence. False means
    "not shown" (ask the dependence analysis).

    >>> from te import Buffer, Var
    >>> A, B = Buffer("A", (16,), "float32"), Buffer("B", (16,), "float32")
    >>> i, j = Var("i"), Var("j")
    >>> def loop(*body):
    ...     return For(i, 0, 8, Block(body))
    >>> iterations_independent(loop(Store(B, (i * 2 + 1,), A[i + 3])))
    True
    >>> iterations_independent(loop(Store(B, (i // 2,), A[i])))      # two iterations, one element
    False
    >>> iterations_independent(loop(Store(B, (i,), 1.0), Store(B, (i + 1,), 2.0)))
    False
    >>> iterations_independent(loop(For(j, 0, 2, Block((Store(B, (i + j,), 1.0),)))))   # j is bound inside
    False
    """
    stores: list[Store] = []
    reads: list = []
    inside = {id(f.var)}
    stack = list(stmt_children(f))
    while stack:
        s = stack.pop()
        if isinstance(s, Block):
            stack.extend(s.stmts)
        elif isinstance(s, For):
            inside.add(id(s.var))
            reads += [s.start, s.stop]
            stack.append(s.body)
        elif isinstance(s, Cond):
            reads.append(s.cond)
            stack.extend(c for c in (s.then, s.otherwise) if c is not None)
        elif isinstance(s, LetStmt):
            inside.add(id(s.var))
            reads.append(s.value)
            stack.append(s.body)
        elif isinstance(s, Store):
            stores.append(s)
            reads += [*s.indices, s.value]
        elif isinstance(s, Prefetch):
            reads += list(s.indices)
        else:                   # an external call, an allocation: ask the analysis
            return False
    written = {id(s.buffer) for s in stores}
    if any(id(ld.buffer) in written for ld in loads(reads)):
        return False
    first: dict = {}
    for s in stores:
        other = first.setdefault(id(s.buffer), s)
        if other is not s and not all(structural_equal(a, b) for a, b in zip(s.indices, other.indices)):
            return False
    return all(any(_moves_with(ix, f.var, inside) for ix in s.indices) for s in first.values())


def _moves_with(index: E.Expr, var: E.Var, inside: set) -> bool:
    """Whether ``index`` is ``var * c + e``: a nonzero constant step per iteration, and
    nothing else in it that varies inside the loop (no load, no let, no other variable bound
    inside it)."""
    lets: list = []
    used = free_vars(index, lets=lets)
    if lets or loads(index) or not index.dtype.is_int or index.dtype.is_vector:
        return False
    if not any(v is var for v in used) or any(id(v) in inside for v in used if v is not var):
        return False
    step = fold_int(simplify(E.substitute(index, {var: var + 1}) - index))
    return step is not None and step != 0
