"""Read-only queries on statement trees: free variables, loads, stores and buffers. The
expression-level queries they build on are in ``te.queries``.

>>> from te import Buffer, Var
>>> from loopnest.stmt import Allocate, Block, For, Free, Store
>>> i, n = Var("i"), Var("n")
>>> A, B, T = Buffer("A", (8,), "float32"), Buffer("B", (n,), "float32"), Buffer("T", (8,), "float32")
>>> root = Block([Allocate(T), For(i, 0, n, Block([Store(T, (i,), A[i]), Store(B, (i,), T[i])])), Free(T)])
>>> [v.name for v in stmt_free_vars(root)], [b.name for b in external_buffers(root)]
(['n'], ['A', 'B'])
>>> stmt_reads(root, A), stmt_writes(root, A), [s.buffer.name for s in stores_to(root, B)]
(True, False, ['B'])

Conventions: as in ``te.queries`` (lists in order of first appearance, identity comparison).
The expressions of a statement are ``loopnest.stmt.stmt_exprs``: a For's bounds, a Store's
indices and value, a Cond's condition and a Let's value, so queries on ``root`` include
loop bounds and conditions; the dimensions of an allocated buffer count only where said.
"""
from __future__ import annotations

from typing import Any, Iterable

from te.expr import Expr, Load, Var
from te.queries import free_vars, has_load, loaded_buffers, loads

from .stmt import Allocate, ExternCall, For, Let, Stmt, Store, iter_stmts, stmt_children, stmt_depth, stmt_exprs

__all__ = ["stmt_free_vars", "own_loaded_ids", "TouchedBuffers", "stmt_loads", "stmt_reads", "stmt_writes",
           "stmt_touches", "stores_to", "stmt_loaded_buffers", "stmt_stored_buffers", "external_buffers", "stmt_depth"]


def stmt_free_vars(root: Stmt, extra: Iterable[Expr] = (), *, exclude: Iterable[Var] = (),
                   allocations: bool = True) -> list[Var]:
    """The variables used in ``root`` that no For, Let statement or Let expression in ``root``
    binds (for a whole nest: the kernel's scalar parameters), in order of first use.

    A binder counts everywhere in ``root``, not only in its scope (a variable bound in one
    place and used outside it is reported by ``loopnest.verify``, not here). ``extra``
    expressions are searched after ``root`` (their variables bound in ``root`` are still
    excluded), ``exclude`` names variables to leave out (for example the variable of an
    enclosing loop), and ``allocations`` says whether the dimensions of the buffers that
    ``root`` allocates count as uses (a kernel needs them to allocate; an analysis of the
    accessed indices may not).

    >>> from te import Buffer, Var
    >>> from loopnest.stmt import Allocate, Block, For, Let, Store
    >>> n, m, i, t = Var("n"), Var("m"), Var("i"), Var("t")
    >>> A, T = Buffer("A", (n,), "int32"), Buffer("T", (m,), "int32")
    >>> root = Block([Allocate(T), For(i, 0, n, Block([Let(t, i * 2, Block([Store(A, (i,), t)]))]))])
    >>> [v.name for v in stmt_free_vars(root)]
    ['m', 'n']
    >>> [v.name for v in stmt_free_vars(root, allocations=False)], [v.name for v in stmt_free_vars(root, exclude=[n])]
    (['n'], ['m'])
    >>> [v.name for v in stmt_free_vars(root, [i + Var("k")], allocations=False)]
    ['n', 'k']
    """
    seen: dict[Var, None] = {}
    bound = set(exclude)
    for s in iter_stmts(root):
        t = type(s)
        if t is For or t is Let:
            bound.add(s.var)
        elif t is Allocate:
            if allocations:
                seen.update(dict.fromkeys(free_vars(s.buffer.dims)))
            continue
        used, lets = _own_vars(s)
        seen.update(used)
        bound.update(lets)
    lets: list = []
    seen.update(dict.fromkeys(free_vars(list(extra), lets=lets)))
    bound.update(lets)
    return [v for v in seen if v not in bound]


#: id(Store) -> (the Store, the variables of its expressions in order of first appearance
#: (as a dict), the variables its Let expressions bind): statements are immutable and a
#: transform keeps the ones it does not change, so a query on the new tree walks only the
#: expressions of new stores. Only Stores (which hold most of the expressions) are kept: an
#: entry for a loop would keep its whole body alive. Emptied when full.
_OWN_VARS: dict[int, tuple] = {}
_OWN_VARS_SIZE = 1 << 14


def _own_vars(s: Stmt) -> tuple[dict, tuple]:
    """The variables of ``s``'s own expressions (for an ExternCall, its buffers' shapes first)
    and those bound by Let expressions among them."""
    store = type(s) is Store
    if store:
        hit = _OWN_VARS.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1], hit[2]
    exprs: list = []
    if type(s) is ExternCall:     # the call is passed every buffer's shape
        for b in s.buffers:
            exprs.extend(b.dims)
    exprs.extend(stmt_exprs(s))
    bound: list = []
    used = dict.fromkeys(free_vars(exprs, lets=bound))
    lets = tuple(bound)
    if store:
        if len(_OWN_VARS) >= _OWN_VARS_SIZE:
            _OWN_VARS.clear()
        _OWN_VARS[id(s)] = (s, used, lets)
    return used, lets


#: id(Store) -> (the Store, ids of the buffers its expressions load); Stores only, as
#: ``_OWN_VARS``; emptied when full
_OWN_LOADS: dict[int, tuple] = {}


def own_loaded_ids(s: Stmt) -> frozenset:
    """The ids of the buffers that the expressions of ``s`` itself (not of the statements
    inside it) load, kept per Store: a pass asking about many buffers, or about the trees
    of successive transforms (which keep the statements they do not change), walks each
    store's expressions once.

    >>> from te import Buffer
    >>> from loopnest.stmt import Store
    >>> A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "float32")
    >>> own_loaded_ids(Store(B, (0,), A[1] + A[2])) == {id(A)}
    True
    """
    store = type(s) is Store
    if store:
        hit = _OWN_LOADS.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1]
    ids = frozenset(id(b) for b in loaded_buffers(stmt_exprs(s)))
    if store:
        if len(_OWN_LOADS) >= _OWN_VARS_SIZE:
            _OWN_LOADS.clear()
        _OWN_LOADS[id(s)] = (s, ids)
    return ids


class TouchedBuffers:
    """``stmt_touches`` for many statements and buffers: ``touched(s)`` is the set of ids of
    the buffers that ``s``'s subtree loads or stores (an ExternCall's buffers included),
    computed once per statement object for the life of this object (statements are
    immutable, and the trees of successive rewrites share all but the statements around
    them). Keep one for a pass or an analysis, not longer: it keeps the statements it saw.

    >>> from te import Buffer, Var
    >>> from loopnest.stmt import Block, For
    >>> A, B, C = (Buffer(x, (8,), "float32") for x in "ABC")
    >>> i = Var("i")
    >>> touched = TouchedBuffers()
    >>> loop = For(i, 0, 8, Block([Store(B, (i,), A[i])]))
    >>> id(A) in touched(loop), id(B) in touched(loop), id(C) in touched(loop)
    (True, True, False)
    """

    def __init__(self):
        self.memo: dict[int, tuple] = {}

    def __call__(self, s: Stmt) -> set[int]:
        hit = self.memo.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1]
        out = set(own_loaded_ids(s))
        if type(s) is Store:
            out.add(id(s.buffer))
        elif type(s) is ExternCall:
            out.update(id(b) for b in s.buffers)
        for x in stmt_children(s):
            out |= self(x)
        self.memo[id(s)] = (s, out)
        return out


def _all_exprs(root: Stmt) -> list:
    out: list = []
    for s in iter_stmts(root):
        out.extend(stmt_exprs(s))
    return out


def stmt_loads(root: Stmt, buffer: Any = None) -> list[Load]:
    """Every ``Load`` in the expressions of ``root`` (of ``buffer`` when given), in order
    (``te.queries.loads`` over the statements in pre-order).

    >>> from te import Buffer, Var
    >>> from loopnest.stmt import Block, For, Store
    >>> A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "float32")
    >>> i = Var("i")
    >>> [str(ld) for ld in stmt_loads(For(i, 0, 8, Block([Store(B, (i,), A[i] + B[i])])))]
    ['A[i]', 'B[i]']
    """
    return loads(_all_exprs(root), buffer)


def stmt_reads(root: Stmt, buffer: Any) -> bool:
    """Whether some expression of ``root`` loads ``buffer``.

    >>> from te import Buffer
    >>> from loopnest.stmt import Store
    >>> A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "float32")
    >>> stmt_reads(Store(B, (0,), A[1]), A), stmt_reads(Store(B, (0,), A[1]), B)
    (True, False)
    """
    for s in iter_stmts(root):
        if has_load(stmt_exprs(s), buffer) or (type(s) is ExternCall and _holds(s.inputs, buffer)):
            return True
    return False


def _holds(bufs: tuple, buffer: Any) -> bool:
    return any(b is buffer for b in bufs)


def stmt_writes(root: Stmt, buffer: Any) -> bool:
    """Whether ``root`` stores to ``buffer``.

    >>> from te import Buffer
    >>> from loopnest.stmt import Store
    >>> A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "float32")
    >>> stmt_writes(Store(B, (0,), A[1]), B), stmt_writes(Store(B, (0,), A[1]), A)
    (True, False)
    """
    return any((type(s) is Store and s.buffer is buffer) or (type(s) is ExternCall and _holds(s.outputs, buffer))
               for s in iter_stmts(root))


def stmt_touches(root: Stmt, buffer: Any) -> bool:
    """Whether ``root`` loads from or stores to ``buffer`` (allocating it does not count).

    >>> from te import Buffer
    >>> from loopnest.stmt import Store
    >>> A, B, C = (Buffer(x, (8,), "float32") for x in "ABC")
    >>> [stmt_touches(Store(B, (0,), A[1]), x) for x in (A, B, C)]
    [True, True, False]
    """
    for s in iter_stmts(root):
        if type(s) is Store and s.buffer is buffer:
            return True
        if type(s) is ExternCall and _holds(s.buffers, buffer):
            return True
        if has_load(stmt_exprs(s), buffer):
            return True
    return False


def stores_to(root: Stmt, buffer: Any) -> list[Store]:
    """The Stores to ``buffer`` in ``root``, in pre-order.

    >>> from te import Buffer
    >>> from loopnest.stmt import Block, Store
    >>> A = Buffer("A", (8,), "float32")
    >>> [str(s) for s in stores_to(Block([Store(A, (0,), 1.0), Store(A, (1,), 2.0)]), A)]
    ['A[0] = 1.0f;', 'A[1] = 2.0f;']
    """
    return [s for s in iter_stmts(root) if type(s) is Store and s.buffer is buffer]


def stmt_loaded_buffers(root: Stmt) -> list:
    """The distinct buffers loaded in ``root`` (by a Load, or read by an ExternCall), in order
    of first load.

    >>> from te import Buffer
    >>> from loopnest.stmt import Block, Store
    >>> A, B, C = (Buffer(x, (8,), "float32") for x in "ABC")
    >>> [b.name for b in stmt_loaded_buffers(Block([Store(C, (0,), B[0]), Store(C, (1,), A[0] + B[1])]))]
    ['B', 'A']
    """
    if not any(type(s) is ExternCall for s in iter_stmts(root)):
        return loaded_buffers(_all_exprs(root))
    seen: dict[int, Any] = {}
    for s in iter_stmts(root):
        bufs = s.inputs if type(s) is ExternCall else loaded_buffers(stmt_exprs(s))
        for b in bufs:
            seen.setdefault(id(b), b)
    return list(seen.values())


def stmt_stored_buffers(root: Stmt) -> list:
    """The distinct buffers stored to in ``root`` (by a Store, or written by an ExternCall), in
    order of first store.

    >>> from te import Buffer
    >>> from loopnest.stmt import Block, Store
    >>> A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "float32")
    >>> [b.name for b in stmt_stored_buffers(Block([Store(B, (0,), 1.0), Store(A, (0,), B[0]), Store(B, (1,), 2.0)]))]
    ['B', 'A']
    """
    seen: dict[int, Any] = {}
    for s in iter_stmts(root):
        if type(s) is Store and id(s.buffer) not in seen:
            seen[id(s.buffer)] = s.buffer
        elif type(s) is ExternCall:
            for b in s.outputs:
                seen.setdefault(id(b), b)
    return list(seen.values())


def external_buffers(root: Stmt) -> list:
    """The buffers ``root`` loads from or stores to but does not allocate, in order of first
    access (a Store's buffer comes before the loads in its indices and value): what code
    outlined from ``root`` must receive.

    >>> from te import Buffer
    >>> from loopnest.stmt import Allocate, Block, Free, Store
    >>> A, B, T = (Buffer(x, (8,), "float32") for x in "ABT")
    >>> root = Block([Allocate(T), Store(T, (0,), A[0]), Store(B, (0,), T[0]), Free(T)])
    >>> [b.name for b in external_buffers(root)]
    ['A', 'B']
    """
    used: dict[int, Any] = {}
    allocated: set[int] = set()
    for s in iter_stmts(root):
        t = type(s)
        if t is Allocate:
            allocated.add(id(s.buffer))
            exprs = s.buffer.dims
        else:
            if t is Store:
                used.setdefault(id(s.buffer), s.buffer)
            elif t is ExternCall:
                for b in s.buffers:
                    used.setdefault(id(b), b)
            exprs = stmt_exprs(s)
        for ld in loads(exprs):
            used.setdefault(id(ld.buffer), ld.buffer)
    return [b for k, b in used.items() if k not in allocated]

