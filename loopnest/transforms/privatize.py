"""privatize: give each chunk of a loop its own copy of a buffer it accumulates into, so that
a scatter (a histogram ``H[bin(A[i])] += 1``) can run in parallel.

>>> from te import Buffer, Var, cast, int32
>>> from loopnest import LoopNest
>>> from loopnest.stmt import For, Let, Store
>>> V, H = Buffer("V", (100,), "float32"), Buffer("H", (8,), "int32")
>>> i, k = Var("i"), Var("k", int32)
>>> hist = For(i, 0, 100, Let(k, cast(V[i] * 8.0, int32), Store(H, (k,), H[k] + 1)))
>>> nest = LoopNest(hist, outputs=[H])
>>> part = nest.privatize(H, i, parts=4, parallel=True)
>>> print(nest)
parallel for (int i_part = 0; i_part < 4; i_part++) {
  for (int H_part_i0 = 0; H_part_i0 < 8; H_part_i0++) {
    H_part[i_part, H_part_i0] = 0;
  }
  for (int i_inner = 0; i_inner < 25; i_inner++) {
    { int k = int32(V[i_part * 25 + i_inner] * 8.0f);
      H_part[i_part, select(k >= 0 && k < 8, k, 32)] = H_part[i_part, select(k >= 0 && k < 8, k, 32)] + 1;
    }
  }
}
for (int H_i0 = 0; H_i0 < 8; H_i0++) {
  for (int i_part_1 = 0; i_part_1 < 4; i_part_1++) {
    H[H_i0] = H[H_i0] + H_part[i_part_1, H_i0];
  }
}
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

from te.expr import Add, And, Call, Cast, Expr, ExprMutator, GE, IntImm, Load, LT, Max, Min, Mul, Or, Select, Sub, \
    Var, const, structural_equal
from te.queries import fold_int, free_vars, has_load
from te.tensor import Buffer, Max as MaxReducer, Min as MinReducer

from ..errors import ScheduleError
from ..lazy_analysis import bounds_inference, legality_checks
from ..loop import Loop
from ..stmt import Block, Cond, For, ForKind, Stmt, StmtMutator, Store, iter_stmts, stmt_exprs
from ..target import host_target
from ._rewrite import add, floordiv_c, mul, nonnegative_extent, replace_loop, stmt_text, sub, substitute_stmt, tidy
from .loop_kinds import parallelize

__all__ = ["privatize", "OPERATORS", "resolve_parts"]


@dataclass(frozen=True)
class _Operator:
    """An associative and commutative update operator: how it prints in messages, how to
    combine two values, and its identity for a dtype."""

    name: str
    combine: Callable[[Expr, Expr], Expr]
    identity: Callable[[Any], Expr]


def _value(v) -> Callable[[Any], Expr]:
    return lambda dt: const(v(dt) if callable(v) else v, dt)


#: the update operators ``privatize`` accepts, by the name its messages use
OPERATORS = {
    "+": _Operator("+", Add, _value(0)),
    "*": _Operator("*", Mul, _value(1)),
    "min": _Operator("min", Min, MinReducer().identity),
    "max": _Operator("max", Max, MaxReducer().identity),
    "&": _Operator("&", lambda a, b: Call("bitwise_and", (a, b), a.dtype),
                   _value(lambda dt: -1 if dt.is_int else dt.max_value())),     # every bit set
    "|": _Operator("|", lambda a, b: Call("bitwise_or", (a, b), a.dtype), _value(0)),
    "^": _Operator("^", lambda a, b: Call("bitwise_xor", (a, b), a.dtype), _value(0)),
    "&&": _Operator("&&", And, _value(True)),
    "||": _Operator("||", Or, _value(False)),
}
_BINARY = {Add: "+", Mul: "*", Min: "min", Max: "max", And: "&&", Or: "||"}
_CALLS = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^"}


def _refuse(buf, loop, why: str):
    raise ScheduleError(f"cannot privatize {buf.name} at loop {loop.name}: {why}")


def _text(s: Stmt) -> str:
    return f"`{stmt_text(s).rstrip(';')}`"


def _same_indices(a, b) -> bool:
    return len(a) == len(b) and all(x is y or structural_equal(x, y) for x, y in zip(a, b))


def _operands(e: Expr) -> tuple[str, Expr, Expr] | None:
    """(operator name, left, right) of an update's value; ``a - b`` counts as ``+`` (its left
    operand must then be the accumulator)."""
    if isinstance(e, Sub):
        return "-", e.a, e.b
    name = _BINARY.get(type(e))
    if name is not None:
        return name, e.a, e.b
    if isinstance(e, Call) and e.name in _CALLS and len(e.args) == 2:
        return _CALLS[e.name], e.args[0], e.args[1]
    return None


def _is_acc(e: Expr, buf) -> bool:
    return isinstance(e, Load) and e.buffer is buf


def _update(s: Store, buf, loop) -> tuple[str, Load, Expr]:
    """(operator, accumulator load, other operand) of the store ``s`` to ``buf``, or refuse."""
    ops = _operands(s.value)
    text = _text(s)
    if ops is None or not (_is_acc(ops[1], buf) or (ops[0] != "-" and _is_acc(ops[2], buf))):
        _refuse(buf, loop, f"{text} is not an update {buf.name}[idx] = {buf.name}[idx] op x with an associative "
                           "and commutative op (+, *, min, max, &, |, ^, &&, ||; or - with the accumulator on the "
                           f"left); privatize needs every store to {buf.name} inside the loop to be such an update")
    name, a, b = ops
    swap = name != "-" and _is_acc(b, buf) and (not _is_acc(a, buf) or _same_indices(b.indices, s.indices))
    acc, other = (b, a) if swap else (a, b)
    if not _same_indices(acc.indices, s.indices):
        _refuse(buf, loop, f"{text} reads {buf.name} at another index than it writes (`{acc}`); privatize needs "
                           "each update to read and write the same element")
    if has_load(other, buf):
        _refuse(buf, loop, f"{text} reads {buf.name} besides its accumulator; privatize needs {buf.name} to be "
                           "read only by the updates themselves")
    return ("+" if name == "-" else name), acc, other


def _check(nest, buf, loop) -> str:
    """The operator of the updates of ``buf`` inside ``loop`` (refuses when privatizing is
    not legal)."""
    f = loop.stmt
    if f.kind != ForKind.SERIAL:
        _refuse(buf, loop, f"the loop is {f.kind}; privatize splits a serial loop (apply it before "
                           "parallelize, vectorize or a GPU binding)")
    ops: dict[str, Store] = {}
    others: dict[int, Expr] = {}      # update store -> its operand besides the accumulator
    for s in iter_stmts(f.body):
        if isinstance(s, Store) and s.buffer is buf:
            name, _, other = _update(s, buf, loop)
            ops.setdefault(name, s)
            others[id(s)] = other
    if not ops:
        _refuse(buf, loop, f"loop {loop.name} does not update {buf.name}")
    if len(ops) > 1:
        found = ", ".join(f"{n} ({_text(s)})" for n, s in ops.items())
        _refuse(buf, loop, f"the updates of {buf.name} combine with different operators: {found}; privatize needs "
                           "one operator, as the copies are combined with it")
    for s in iter_stmts(f.body):
        exprs = stmt_exprs(s)
        if id(s) in others:
            exprs = [e for e in exprs if e is not s.value] + [others[id(s)]]
        if has_load(exprs, buf):
            _refuse(buf, loop, f"{buf.name} is also read by {_text(s)} inside the loop, which would see one "
                               f"chunk's partial values; privatize needs {buf.name} to be read only by its updates")
    return next(iter(ops))


def resolve_parts(parts: Any) -> int:
    """The number of private copies: ``parts``, or this machine's cores when None
    (``loopnest.target.host_target().cores``). ScheduleError unless an int >= 1.

    >>> resolve_parts(3)
    3
    >>> resolve_parts(None) == host_target().cores
    True
    """
    if parts is None:
        return host_target().cores
    if isinstance(parts, bool) or not isinstance(parts, int) and not hasattr(parts, "__index__"):
        raise ScheduleError(f"privatize: parts must be an int >= 1 (or None for the machine's cores), got {parts!r}")
    if int(parts) < 1:
        raise ScheduleError(f"privatize: parts must be >= 1, got {parts}")
    return int(parts)


class _Redirect(ExprMutator):
    """Accesses to ``buf`` -> accesses to copy ``c`` of ``part``, rebased to the region's
    ``mins``. An index bounds inference could not keep inside the region (``guarded``: data
    dependent) is mapped past the end of all the copies when it is outside its dimension:
    the kernels check the flat offset of a data-dependent access, and an offset into the
    next copy would pass that check where the access to ``buf`` would not."""

    def __init__(self, buf, part, c, mins, guarded):
        self.buf, self.part, self.c, self.mins, self.guarded = buf, part, c, mins, guarded

    def at(self, indices) -> tuple:
        out = [self.c]
        shape = self.part.dims
        for d, (i, m) in enumerate(zip(indices, self.mins)):
            rel = tidy(sub(i, m))
            if self.guarded[d]:
                # in the widest of the index's and the sizes' types (an int64 size with int32
                # indices, or the reverse: seed 146, case 397)
                dt = max([rel.dtype] + [x.dtype for x in shape[:d + 2]], key=lambda t: t.bits)
                rel, *sizes = (x if x.dtype == dt else Cast(dt, x) for x in [rel, *shape[:d + 2]])
                past = functools.reduce(mul, sizes)         # copies * shape[0] * ... * shape[d]
                rel = Select(And(GE(rel, IntImm(0, dt)), LT(rel, sizes[-1])), rel, tidy(past))
            out.append(rel)
        return tuple(out)

    def visit_Load(self, e: Load) -> Expr:
        if e.buffer is self.buf:
            return Load(self.part, self.at(e.indices))
        return self.generic(e)


class _RedirectStmt(StmtMutator):
    def __init__(self, buf, part, c, mins, guarded):
        self.ex = _Redirect(buf, part, c, mins, guarded)
        self.buf = buf

    def visit_expr(self, e):
        return self.ex.visit(e)

    def visit_Store(self, s: Store):
        if s.buffer is self.buf:
            return Store(self.ex.part, self.ex.at(s.indices), self.ex.visit(s.value))
        return self.generic(s)


def _region(nest, buf, f: For) -> tuple[list, list]:
    """The box of ``buf`` that the loop ``f`` updates in one iteration of the loops around it:
    (per dimension, the bounds from bounds inference; the size a copy needs, which depends
    on the buffers' sizes only: the largest extent over the loops around, else the whole
    dimension)."""
    outer = [g for g in nest.loop_index().enclosing(f.var) if g is not f]
    bounds = bounds_inference().access_bounds(f, buf, [g.var for g in outer],
                                              outer_ranges={g.var: (g.start, g.stop) for g in outer})
    sizes = {id(v) for b in nest.buffers.values() for v in free_vars(b.dims)}
    shape = []
    for b, dim in zip(bounds, buf.dims):
        n = b.extent_bound
        if n is None or isinstance(n, Expr) and any(id(v) not in sizes for v in free_vars([n])):
            n = dim
        shape.append(n)
    return bounds, shape


def _over_region(nest, bounds, base: str, make: Callable[[tuple], Stmt]) -> Stmt:
    """``make(offsets)`` inside one loop per dimension of the region ``bounds`` (named
    ``base_i0``, ...; none for a dimension of extent 1, whose offset is 0)."""
    offsets, loops = [], []
    for d, b in enumerate(bounds):
        if fold_int(b.extent) == 1:
            offsets.append(IntImm(0, b.extent.dtype))
            continue
        v = Var(nest.fresh_name(f"{base}_i{d}"), b.extent.dtype)
        offsets.append(v)
        loops.append((v, b.extent))
    s = make(tuple(offsets))
    for v, n in reversed(loops):
        s = For(v, IntImm(0, v.dtype), n, Block((s,)))
    return s


def _check_enclosing(nest, buf, loop, f: For) -> None:
    """The copies are set and combined inside the loops around ``loop``: a parallel one must
    stay free of dependences (re-checked after the rewrite); a vectorized one is refused."""
    for g in nest.loop_index().enclosing(f.var):
        if g is f or g.kind in (ForKind.SERIAL, ForKind.UNROLLED):
            continue
        if g.kind == ForKind.VECTORIZED:
            _refuse(buf, loop, f"loop {g.var.name} around it is vectorized, and the copies need loops of their "
                               "own; privatize before vectorizing")
        try:
            legality_checks().check_parallelize(nest, Loop(nest, g.var))
        except ScheduleError as e:
            _refuse(buf, loop, f"loop {g.var.name} around it is {g.kind}, and its iterations would share the "
                               f"copies ({e}); privatize a loop that no parallel loop encloses")


def _chunks(nest, f: For, parts: int, buf, loop) -> tuple[int, Expr, bool]:
    """(copies, iterations per chunk, guard needed?) for ``parts`` chunks of ``f``."""
    ext = nonnegative_extent(nest, f)
    e = fold_int(ext)
    v = f.var
    if e is None:
        return parts, floordiv_c(add(ext, parts - 1), parts), parts > 1
    if e == 0:
        _refuse(buf, loop, "the loop runs no iteration")
    chunk = -(-e // parts)
    copies = -(-e // chunk)         # no copy whose chunk would be empty
    return copies, IntImm(chunk, v.dtype), copies * chunk != e


def privatize(nest, buf: Buffer, loop, parts: int, parallel: bool = False) -> Loop:
    """Split ``loop`` into ``parts`` chunks, each accumulating into its own copy of ``buf``
    (a new intermediate ``<buf>_part[copies, ...]``, set to the operator's identity at the
    start of the chunk), then combine the copies into ``buf`` after the loop. The chunks no
    longer touch a common element, so the chunk loop is legal to ``parallelize`` (``parallel=
    True`` does it) or to bind to GPU blocks; the combining loop over ``buf``'s elements runs
    after it. This is OpenMP's ``reduction`` clause, and Halide's or TVM's ``rfactor`` of a
    scatter. Returns the chunk loop.

    Before / after ``privatize(H, i, 4)`` (10 iterations: chunks of 3, the last one masked)::

        for (int i = 0; i < 10; i++) {         for (int i_part = 0; i_part < 4; i_part++) {
          H[B[i]] = H[B[i]] + 1;                 for (int H_part_i0 = 0; H_part_i0 < 8; H_part_i0++) {
        }                                          H_part[i_part, H_part_i0] = 0;
                                                 }
                                                 for (int i_inner = 0; i_inner < 3; i_inner++) {
                                                   if (i_part * 3 + i_inner < 10) {
                                                     H_part[i_part, select(B[...] >= 0 && B[...] < 8, B[...], 32)] = ... + 1;
                                                 ...
                                               }
                                               for (int H_i0 = 0; H_i0 < 8; H_i0++) {
                                                 for (int i_part_1 = 0; i_part_1 < 4; i_part_1++) {
                                                   H[H_i0] = H[H_i0] + H_part[i_part_1, H_i0];

    Chunks are contiguous (chunk ``p`` runs iterations ``p * c`` to ``p * c + c - 1`` of a
    loop cut into chunks of ``c = ceil(extent / parts)``); a symbolic extent, or one that
    ``c`` does not divide, masks the last chunk with a guard. With a constant extent, copies
    whose chunk would be empty are left out (``parts`` larger than the extent gives one copy
    per iteration). ``parts=None`` (through ``LoopNest.privatize``) is the machine's core count,
    resolved when the call is made and recorded as that number, so the history replays to the
    same nest anywhere.

    A copy holds the box of ``buf`` that the loop updates in one iteration of the loops
    around it (bounds inference: one row of ``H[r, A[r, i]]`` inside a loop over ``r``; all
    of ``buf`` for a data-dependent index), indices rebased to the box; the copies are
    initialised and combined over the whole box, so privatizing pays off when the loop does
    much more work than the box has elements (a histogram of many values into few bins). A
    data-dependent index outside ``buf`` would land in the next copy, where the kernels'
    check of the flat offset would let it pass; the rewritten index (the ``select`` above)
    sends it past the end of all the copies instead, so the kernel still stops with
    ``IndexError`` (naming the copy) as the serial loop would.

    Legality: every store to ``buf`` inside ``loop`` is an update ``buf[idx] = buf[idx] op x``
    (or ``x op buf[idx]``) reading and writing the same element, all with one operator that
    is associative and commutative: ``+`` (``buf[idx] - x`` counts as ``+``), ``*``, ``min``,
    ``max``, and on integers ``&``, ``|``, ``^`` (on bools ``&&``, ``||``); ``buf`` is read
    nowhere else in the loop (the private copies hide the partial values); the loop is serial,
    and no loop around it is vectorized, nor parallel unless its iterations stay independent
    with the copies (checked after the rewrite; in practice, privatize outside parallel loops).
    Integer results are exact (wrapping arithmetic is associative), and so are ``min`` and
    ``max``. Floating-point ``+`` and ``*`` are reassociated: each chunk accumulates its own
    part from the identity and the parts are combined in order, so results may differ in
    rounding from the serial loop, as with ``rfactor``. A refusal names the store found and
    leaves the nest unchanged.

    >>> from te import Buffer, Var
    >>> from loopnest import LoopNest
    >>> from loopnest.stmt import For, Store
    >>> P, S = Buffer("P", (64,), "int32"), Buffer("S", (8,), "float32"); i = Var("i")
    >>> nest = LoopNest(For(i, 0, 64, Store(S, (P[i],), S[P[i]] * 0.5 + 1.0)), outputs=[S])
    >>> nest.privatize(S, i, parts=4)
    Traceback (most recent call last):
      ...
    loopnest.errors.ScheduleError: cannot privatize S at loop i: `S[P[i]] = S[P[i]] * 0.5f + 1.0f` is not an update S[idx] = S[idx] op x with an associative and commutative op (+, *, min, max, &, |, ^, &&, ||; or - with the accumulator on the left); privatize needs every store to S inside the loop to be such an update
    """
    name = _check(nest, buf, loop)
    op = OPERATORS[name]
    f = loop.stmt
    v = f.var
    copies, chunk, masked = _chunks(nest, f, parts, buf, loop)
    bounds, shape = _region(nest, buf, f)
    mins = [b.min for b in bounds]
    part = Buffer(nest.fresh_name(f"{buf.name}_part"), [IntImm(copies, v.dtype)] + shape, buf.dtype)
    c = Var(nest.fresh_name(f"{v.name}_part"), v.dtype)
    inner = Var(nest.fresh_name(f"{v.name}_inner"), v.dtype)
    rel = tidy(add(mul(c, chunk), inner))
    unsure = [not b.exact for b in bounds]
    body = _RedirectStmt(buf, part, c, mins, unsure).visit(substitute_stmt(f.body, {v: tidy(add(rel, f.start))}))
    if masked:
        body = Block((Cond(LT(rel, nonnegative_extent(nest, f)), body),))
    identity = op.identity(buf.dtype)
    init = _over_region(nest, bounds, part.name, lambda at: Store(part, (c,) + at, identity))
    chunks = For(c, IntImm(0, v.dtype), IntImm(copies, v.dtype),
                 Block((init, For(inner, IntImm(0, v.dtype), chunk, body))))
    c2 = Var(nest.fresh_name(c.name), v.dtype)

    def combine(at):
        idx = tuple(tidy(add(m, x)) for m, x in zip(mins, at))
        step = Store(buf, idx, op.combine(Load(buf, idx), Load(part, (c2,) + at)))
        return For(c2, IntImm(0, v.dtype), IntImm(copies, v.dtype), Block((step,)))
    final = _over_region(nest, bounds, buf.name, combine)
    nest.root = replace_loop(nest.root, v, lambda _: [chunks, final])
    nest.add_buffer(part)
    _check_enclosing(nest, buf, loop, chunks)
    handle = Loop(nest, c)
    if parallel:
        parallelize(nest, handle)
    return handle
