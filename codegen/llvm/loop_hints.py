"""Unrolling hints for the serial loops the schedule left alone.

LLVM's loop unroller, left to itself, partially unrolls every innermost loop by up to its
size threshold (and runtime-unrolls those of unknown trip count, with a remainder loop), and
fully unrolls outer loops that become innermost; the passes after it then work on several
copies of each body: most of the optimisation and code generation time of a tiled kernel.
The schedule already chose what to unroll, so here each loop gets a ``!llvm.loop`` hint:

* left to LLVM: copy and fill nests (the copies in and out of a register tile made by
  ``cache_accesses``, whose complete unrolling lets the tile live in registers; a transpose
  between the kernel's arguments), but those that fill an intermediate of more than
  ``REGISTER_TILE`` elements (a packed panel or filter: the transposing pack of a 64 x 64 x
  3 x 3 filter, unrolled into 72 gathers, took 25 of conv2d's 217 ms of build, for no
  speed), nests of at most
  ``SMALL_NEST`` body executions (tails), and other innermost loops that accumulate into the
  same element (a reduction into one vector of lanes or into scalars, where unrolling hides
  the loop overhead);
* ``llvm.loop.unroll.count 2``: a register-blocked reduction (``register_tile_reduction``: the
  loop around a vectorized and unrolled register tile, ``C_local[i, ramp] += A[i, k] *
  B[k, ramp]``) of a symbolic or even trip count, whose loop overhead and addressing are then
  paid once per two steps (matmul 1024 on one core: 13.25-13.74 -> 12.51-12.60 ms, PyTorch
  12.98-13.34 in the same runs; with a symbolic N, where LLVM recomputes the six row
  addresses of A in every step, 14.37-14.72 -> 12.95-13.52 ms; conv2d's loop of 3 filter
  columns, unrolled twice with a remainder step, ran 15% slower); and the other innermost
  loops (streaming loops), unless they load vectors of scattered elements, which LLVM's cost
  model would not unroll, or store vectors (the schedule vectorized the loop inside: the
  13-stage stencil's 13 vector loops unrolled twice took 33 ms more to build, 265 against
  232, for a run time within 2%);
* ``llvm.loop.unroll.disable``: every other loop.

>>> from te.expr import IntImm, Var
>>> from loopnest.stmt import Block, For
>>> i, j = Var("i"), Var("j")
>>> small = For(i, IntImm(0), IntImm(6), For(j, IntImm(0), IntImm(16), Block([])))
>>> nest_executions(small, limit=128), unroll_choice(small)
(96, 'twice')
>>> unroll_choice(For(i, IntImm(0), Var("n"), small))
'never'
"""
from __future__ import annotations

from llvmlite import ir

from te import expr as E
from te.queries import int_value, uses_var
from loopnest.queries import stmt_loads
from loopnest.stmt import Block, Cond, For, ForKind, Stmt, Store, iter_stmts
from loopnest.transforms.loop_kinds import MAX_LATE_UNROLL

from .decls import loop_md

__all__ = ["REGISTER_TILE", "SMALL_NEST", "accumulates", "innermost", "is_copy", "nest_executions",
           "register_tile_reduction", "unroll_choice", "unroll_hint"]

SMALL_NEST = 16    # body executions of a constant loop nest (a tail) that LLVM may still unroll completely
REGISTER_TILE = 2048   # elements of an intermediate whose copy or fill nests LLVM may unroll (a register tile)


def _executions(s: Stmt, limit: int) -> int | None:
    """Leaf statements executed by ``s``; None when a loop's trip count is not constant or
    the count passes ``limit`` (counting stops there)."""
    if isinstance(s, For):
        ext = int_value(s.extent)
        if ext is None:
            return None
        if ext <= 0:
            return 0
        inner = _executions(s.body, limit // ext)
        return None if inner is None or inner * ext > limit else inner * ext
    if isinstance(s, Block):
        total = 0
        for x in s.stmts:
            n = _executions(x, limit - total)
            if n is None:
                return None
            total += n
            if total > limit:
                return None
        return max(total, 1)
    if isinstance(s, Cond):
        n = 0
        for x in (s.then, s.otherwise):
            if x is not None:
                k = _executions(x, limit - n)
                if k is None:
                    return None
                n += k
        return max(n, 1)
    body = getattr(s, "body", None)
    return _executions(body, limit) if isinstance(body, Stmt) else 1


def nest_executions(s: For, limit: int = SMALL_NEST) -> int | None:
    """How many times the innermost statements of loop ``s`` run, when every loop in it has a
    constant trip count and the count is at most ``limit``; else None.

    >>> from te.expr import IntImm, Var
    >>> from loopnest.stmt import Block, For
    >>> nest_executions(For(Var("i"), IntImm(0), IntImm(200), Block([])))
    """
    return _executions(s, limit)


def _copied(s: For) -> bool:
    """Whether the emitter copies the body of loop ``s`` for each of its iterations (an
    unrolled loop of at most ``MAX_LATE_UNROLL`` constant iterations)."""
    n = int_value(s.extent)
    return s.kind == ForKind.UNROLLED and n is not None and n <= MAX_LATE_UNROLL


def _nest_stmts(s: For):
    """The statements of ``s``'s body, through the small constant nests in it (which LLVM
    unrolls); None where a loop in it is not such a nest."""
    out, stack = [], list(s.body.stmts)
    while stack:
        x = stack.pop()
        if isinstance(x, For) and nest_executions(x, SMALL_NEST) is None:
            return None
        out.append(x)
        stack.extend(_children(x))
    return out


def innermost(s: For) -> bool:
    """Whether ``s`` holds no loop but small constant nests (an innermost loop once LLVM has
    unrolled those).

    >>> from te.expr import IntImm, Var
    >>> from loopnest.stmt import Block, For
    >>> innermost(For(Var("i"), IntImm(0), Var("n"), For(Var("j"), IntImm(0), IntImm(4), Block([]))))
    True
    """
    return _nest_stmts(s) is not None


def accumulates(s: For) -> bool:
    """Whether ``s`` is an innermost loop (``innermost``) that accumulates: some store in it
    writes the same element on every iteration (its index does not use the loop variable).

    >>> from te import Buffer, float32
    >>> from te.expr import IntImm, Var
    >>> from loopnest.stmt import For, Store
    >>> acc, x, k = Buffer("acc", (1,), float32), Buffer("x", (64,), float32), Var("k")
    >>> accumulates(For(k, IntImm(0), IntImm(64), Store(acc, (IntImm(0),), acc[0] + x[k])))
    True
    """
    stmts = _nest_stmts(s)
    return stmts is not None and any(isinstance(x, Store) and not uses_var(x.indices, s.var) for x in stmts)


def register_tile_reduction(s: For) -> bool:
    """Whether ``s`` is the reduction loop of a register tile: its body, once the unrolled
    loops in it are copied, is straight-line code that stores two vectors or more to elements
    that do not change with ``s`` (the schedule vectorized and unrolled the tile around the
    reduction; a row reduced into one vector of lanes is not a tile).

    >>> from te import Buffer, float32
    >>> from te.expr import Broadcast, IntImm, Ramp, Var
    >>> from loopnest.stmt import For, ForKind, Store
    >>> acc, a, b = Buffer("acc", (24, 16), float32), Buffer("a", (24, 64), float32), Buffer("b", (64, 16), float32)
    >>> i, k, lanes = Var("i"), Var("k"), Ramp(IntImm(0), IntImm(1), 16)
    >>> step = Store(acc, (i, lanes), acc[i, lanes] + Broadcast(a[i, k], 16) * b[k, lanes])
    >>> register_tile_reduction(For(k, IntImm(0), IntImm(64), For(i, IntImm(0), IntImm(24), step, ForKind.UNROLLED)))
    True
    >>> register_tile_reduction(For(k, IntImm(0), IntImm(64), For(i, IntImm(0), IntImm(24), step)))
    False
    >>> row = Store(acc, (IntImm(0), lanes), acc[0, lanes] + b[k, lanes])
    >>> register_tile_reduction(For(k, IntImm(0), IntImm(64), row))
    False
    """
    stores = _accumulator_stores(s.body, s.var)
    return stores is not None and stores >= 2


def _accumulator_stores(s: Stmt, var: E.Var) -> int | None:
    """How many vector stores to elements that do not change with ``var`` one execution of
    ``s`` makes, counting each copy of an unrolled loop's body; None where a loop in ``s`` is
    neither copied by the emitter nor a small constant nest."""
    if isinstance(s, Store):
        return int(s.value.dtype.lanes > 1 and not uses_var(s.indices, var))
    copies = 1
    if isinstance(s, For):
        if not _copied(s) and nest_executions(s, SMALL_NEST) is None:
            return None
        copies = max(int_value(s.extent), 0)
    total = 0
    for x in _children(s):
        n = _accumulator_stores(x, var)
        if n is None:
            return None
        total += n
    return copies * total


def _children(s: Stmt) -> list:
    if isinstance(s, For):
        return [s.body]
    if isinstance(s, Block):
        return list(s.stmts)
    if isinstance(s, Cond):
        return [x for x in (s.then, s.otherwise) if x is not None]
    body = getattr(s, "body", None)
    return [body] if isinstance(body, Stmt) else []


def is_copy(s: For) -> bool:
    """Whether ``s`` stores, and every store in it stores a load or a constant (a copy or a fill).

    >>> from te import Buffer, float32
    >>> from te.expr import IntImm, Var
    >>> from loopnest.stmt import For, Store
    >>> a, b, i = Buffer("a", (8,), float32), Buffer("b", (8,), float32), Var("i")
    >>> is_copy(For(i, IntImm(0), IntImm(8), Store(a, (i,), b[i])))
    True
    """
    stores = [x for x in iter_stmts(s.body) if isinstance(x, Store)]
    return bool(stores) and all(isinstance(x.value, (E.Load, E.FloatImm, E.IntImm)) for x in stores)


def unroll_choice(s: For, arguments: frozenset = frozenset()) -> str:
    """How far LLVM may unroll the serial loop ``s`` of a kernel whose argument buffers have
    the ids ``arguments``: ``"llvm"`` (LLVM decides: a copy nest but one that fills a large
    intermediate, a small nest of at most ``SMALL_NEST`` body executions, or an innermost loop that
    accumulates), ``"twice"`` (the reduction loop of a register tile, ``register_tile_reduction``,
    of a symbolic or even trip count; another innermost loop, once LLVM has unrolled the small
    nests in it, that loads no vector of scattered elements and stores no vector) or
    ``"never"`` (a loop around other loops, or an innermost loop of vector statements).

    >>> from te.expr import IntImm, Var
    >>> from loopnest.stmt import Block, For
    >>> i, j = Var("i"), Var("j")
    >>> inner = For(j, IntImm(0), IntImm(1024), Block([]))
    >>> unroll_choice(For(j, IntImm(0), IntImm(8), Block([]))), unroll_choice(inner)
    ('llvm', 'twice')
    >>> unroll_choice(For(i, IntImm(0), Var("n"), inner))
    'never'
    """
    if is_copy(s) and not _packs(s, arguments):
        return "llvm"
    n = nest_executions(s, SMALL_NEST)
    if n is not None:
        return "llvm"
    trips = int_value(s.extent)
    if register_tile_reduction(s) and (trips is None or trips % 2 == 0):
        return "twice"
    if accumulates(s):
        return "llvm"
    return "twice" if innermost(s) and not _gathers(s) and not _stores_vectors(s) else "never"


def _packs(s: For, arguments: frozenset) -> bool:
    """Whether the copy or fill nest ``s`` stores to an intermediate (a buffer not among
    ``arguments``) of more than ``REGISTER_TILE`` elements, or of a symbolic size."""
    for x in iter_stmts(s.body):
        if isinstance(x, Store) and id(x.buffer) not in arguments:
            n = x.buffer.static_size()
            if n is None or n > REGISTER_TILE:
                return True
    return False


def _gathers(s: For) -> bool:
    """Whether a load in ``s`` reads a vector of elements that are not adjacent (a gather or a
    strided load, which LLVM's cost model declines to unroll)."""
    return any((int_value(i.stride) != 1) if isinstance(i, E.Ramp) else i.dtype.lanes > 1
               for ld in stmt_loads(s.body) for i in ld.indices)


def _stores_vectors(s: For) -> bool:
    """Whether ``s`` stores a vector: the schedule vectorized a loop inside it, whose
    statements are already as wide as the target's vectors."""
    return any(isinstance(x, Store) and x.value.dtype.lanes > 1 for x in iter_stmts(s.body))


def unroll_hint(module: ir.Module, s: For, arguments: frozenset = frozenset()) -> ir.MDValue | None:
    """The ``!llvm.loop`` node of the serial loop ``s`` (of a kernel whose argument buffers
    have the ids ``arguments``) that says how far LLVM may unroll it (``unroll_choice``), or
    None where LLVM decides.

    >>> from te.expr import IntImm, Var
    >>> from loopnest.stmt import Block, For
    >>> m = ir.Module()
    >>> unroll_hint(m, For(Var("i"), IntImm(0), IntImm(4), Block([]))) is None
    True
    >>> inner = For(Var("j"), IntImm(0), Var("n"), Block([]))
    >>> print(unroll_hint(m, For(Var("i"), IntImm(0), Var("n"), inner)))
    !1 = !{ !1, !0 }
    >>> print(m.metadata[0])
    !0 = !{ !"llvm.loop.unroll.disable" }
    """
    choice = unroll_choice(s, arguments)
    if choice == "twice":
        return loop_md(module, ("llvm.loop.unroll.count", ir.Constant(ir.IntType(32), 2)))
    if choice == "never":
        return loop_md(module, ("llvm.loop.unroll.disable",))
    return None
