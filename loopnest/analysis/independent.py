"""Dependences read off the statements' shape, without the polyhedral model
(``dependences``), whose build costs about a millisecond a question on a 13-stage pipeline
whose every stage is vectorized: ``same_value_of(f, v)`` says that every dependence among
the statements inside loop ``f`` has distance 0 along loop ``v`` (each element written
inside ``f`` is touched at one value of ``v``), and ``iterations_independent(f)`` that ``f``
carries no dependence; ``unshown_buffers(f, v)`` names the buffers for which that is not
shown, and ``privately_computed(nest, b, f)`` says that every iteration of ``f`` computes
the intermediate ``b`` afresh before reading it (a stage ``compute_at`` put there), so each
iteration may have its own. The legality checks use them before asking the analysis: a
loop that carries no dependence, or only on such private intermediates, may run in
parallel, be vectorized or distributed, and a band of loops of which at most one has a
nonzero distance may be permuted.

The answers are exact where they say True and say nothing where they say False: the
callers then ask the dependence analysis.

>>> from te import Buffer, Compute, Reduce, Sum
>>> from loopnest import LoopNest
>>> A = Buffer("A", (4, 8), "float32")
>>> nest = LoopNest([Compute("B", (4, 8), lambda i, j: A[i, j] * 2.0)])
>>> [iterations_independent(f) for f in nest.loop_index().loops]
[True, True]
>>> nest = LoopNest([Reduce("S", (4,), Sum(), lambda i, k: A[i, k], (8,))])
>>> [iterations_independent(f) for f in nest.loop_index().loops]     # S[i] is read in every k
[True, False]
"""
from __future__ import annotations

from te import expr as E
from te.expr import structural_equal
from te.queries import fold_int, free_vars, loads
from te.simplify import simplify

from ..queries import stmt_reads, stmt_touches, stmt_writes
from ..stmt import Block, Cond, For, LetStmt, Prefetch, Store, iter_stmts, stmt_children, stmt_exprs
from .boxes import affine_form, box_bounds

__all__ = ["iterations_independent", "privately_computed", "same_value_of", "unshown_buffers"]


def iterations_independent(f: For) -> bool:
    """True when loop ``f`` carries no dependence, read off its statements: any two
    iterations that touch one element, one of them writing it, are the same iteration
    (``same_value_of(f, f.var)``). False means "not shown" (ask the dependence analysis).

    >>> from te import Buffer, Var
    >>> A, B = Buffer("A", (16,), "float32"), Buffer("B", (16,), "float32")
    >>> i, j = Var("i"), Var("j")
    >>> def loop(*body):
    ...     return For(i, 0, 8, Block(body))
    >>> iterations_independent(loop(Store(B, (i * 2 + 1,), A[i + 3])))
    True
    >>> iterations_independent(loop(Store(B, (i,), B[i] + 1.0)))     # each iteration its own B[i]
    True
    >>> iterations_independent(loop(Store(B, (i // 2,), A[i])))      # two iterations, one element
    False
    >>> iterations_independent(loop(Store(B, (i,), 1.0), Store(B, (i + 1,), 2.0)))
    False
    >>> iterations_independent(loop(For(j, 0, 2, Block((Store(B, (i + j,), 1.0),)))))   # i + j: (0, 1), (1, 0)
    False
    """
    return same_value_of(f, f.var)


def same_value_of(f: For, var: E.Var) -> bool:
    """True when any two instances of statements inside loop ``f``, in one iteration of the
    loops around ``f``, that touch one element, one of them writing it, have the same value
    of ``var`` (``f``'s variable or that of a loop inside it): every dependence among them
    that no loop around ``f`` carries has distance 0 along ``var``'s loop. (Instances in
    different iterations of a loop around ``f`` may meet at other values: the shifted last
    tile of ``split_with_overlap`` runs rows of the tile before it again.) Read
    off the statements: the body holds only blocks, loops, conditions, lets, stores and
    prefetches; and for every buffer stored to inside ``f``, all its accesses inside ``f``
    have one same index (the same dimension, the same expression; the others may differ),
    ``c * var + sum of c_u * u + e``, with ``u`` the variables of loops inside ``f``
    (constant trip counts and bounds that no loop inside ``f`` changes), ``e`` free of every
    variable bound inside ``f`` and of loads, and coefficients that make it a mixed-radix
    number (each larger than the span of all the smaller terms), so that equal values mean
    equal variables. False means "not shown".

    >>> from te import Buffer, Var
    >>> C, A = Buffer("C", (64,), "float32"), Buffer("A", (64, 8), "float32")
    >>> io, ii, k = Var("io"), Var("ii"), Var("k")
    >>> update = Store(C, (io * 4 + ii,), C[io * 4 + ii] + A[io * 4 + ii, k])
    >>> nest = For(io, 0, 16, Block((For(ii, 0, 4, Block((For(k, 0, 8, Block((update,))),))),)))
    >>> [same_value_of(nest, v) for v in (io, ii, k)]        # C[io * 4 + ii] += ...: k is the reduction
    [True, True, False]
    """
    return unshown_buffers(f, var) == []


def unshown_buffers(f: For, var: E.Var) -> list | None:
    """The buffers stored to inside loop ``f`` whose accesses do not show that every
    dependence among them has distance 0 along ``var`` (``same_value_of``, buffer by buffer);
    None where the statements leave the accesses unknown. The dependences of the others are
    not carried by ``var``'s loop.

    >>> from te import Buffer, Var
    >>> A, B, T = (Buffer(x, (16,), "float32") for x in "ABT")
    >>> i = Var("i")
    >>> body = Block((Store(T, (0,), A[i]), Store(B, (i,), T[0] * 2.0)))
    >>> [b.name for b in unshown_buffers(For(i, 0, 8, body), i)]     # T[0]: one element, every iteration
    ['T']
    """
    walk = _walk(f)
    if walk is None:
        return None
    accesses, loops, inside, buffers = walk
    return [buffers[k] for k, tuples in accesses.items()
            if not any(_determines(ix, var, loops, inside) for ix in _shared(tuples))
            and not any(_window_determines([t[d] for t in tuples], var, loops, inside) for d in range(len(tuples[0])))]


def privately_computed(nest, buffer, f: For) -> bool:
    """True when the intermediate ``buffer`` is computed afresh in every iteration of loop
    ``f`` before it is read there, read off the statements: nothing outside ``f`` touches it;
    one statement of ``f``'s body stores it, with one store whose every index holds at most
    one loop variable of that statement, its own, with coefficient 1 or -1, plus terms of the
    loops around (so the stores fill a box), and without reading it; no statement before
    that one touches it and none after it stores it; and the box of the reads after it lies
    inside the box of the writes (``boxes.box_bounds``, for every value of the loops around
    ``f``). Then every value read comes from a write in the same iteration, and each
    iteration may have its own copy of the buffer (what ``legality.privatizable`` asks).
    False means "not shown".

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (8, 10), "float32")
    >>> B = Compute("B", (8, 10), lambda i, j: A[i, j] + 1.0)
    >>> nest = LoopNest([Compute("C", (8, 8), lambda i, j: B[i, j] + B[i, j + 2])])
    >>> nest.compute_at(B, nest.get_loops_for("C")[0])
    >>> privately_computed(nest, B, nest.loop_index().loops[0])
    True
    """
    if not any(b is buffer for b in getattr(nest, "intermediates", ())):
        return False
    root = nest.root
    for s in iter_stmts(root, skip=lambda x: x is f):
        if not isinstance(s, (Block, For, Cond, LetStmt)) and stmt_touches(s, buffer):
            return False
        if isinstance(s, (For, Cond, LetStmt)) and loads(stmt_exprs(s), buffer):     # its own, not its body's
            return False
    parts = list(f.body.stmts) if isinstance(f.body, Block) else [f.body]
    writers = [k for k, x in enumerate(parts) if stmt_writes(x, buffer)]
    if len(writers) != 1:
        return False
    k = writers[0]
    writer, after = parts[k], Block(tuple(parts[k + 1:]))
    if stmt_reads(writer, buffer) or any(stmt_touches(x, buffer) for x in parts[:k]):
        return False
    if not _fills_a_box(writer, buffer):
        return False
    chain = nest.loop_index().enclosing(f.var)
    if not chain or chain[-1] is not f:
        return False
    ranges = {g.var: (g.start, g.stop) for g in chain}
    written = box_bounds(writer, buffer, ranges, reads=False)
    if written is None:
        return False
    if not stmt_reads(after, buffer):
        return True
    read = box_bounds(after, buffer, ranges, writes=False)
    if read is None:
        return False
    return all(_at_least_zero(r.min - w.min) and _at_least_zero(w.max - r.max) for r, w in zip(read, written))


def _at_least_zero(e: E.Expr) -> bool:
    c = fold_int(simplify(e))
    return c is not None and c >= 0


def _fills_a_box(writer, buffer) -> bool:
    """Whether ``writer`` stores ``buffer`` once, at affine indices that each hold at most one
    variable of a loop inside ``writer``, their own, with coefficient 1 or -1, and otherwise
    only variables of loops around it: over rectangular loops, the stores fill the box of
    their bounds."""
    stores, inner = [], set()
    stack = [writer]
    while stack:
        s = stack.pop()
        if isinstance(s, For):
            inner.add(id(s.var))
        if isinstance(s, Store) and s.buffer is buffer:
            stores.append(s)
        stack.extend(stmt_children(s))
    if len(stores) != 1:
        return False
    seen = set()
    for ix in stores[0].indices:
        form = affine_form(ix, {})
        own = [(k, c) for k, c in form[0].items() if k in inner] if form is not None else []
        if form is None or len(own) > 1 or own and (own[0][1] not in (1, -1) or own[0][0] in seen):
            return False
        seen.update(k for k, _ in own)
    return True


def _window_determines(indices: list, var: E.Var, loops: dict, inside: set) -> bool:
    """Whether equal values of two of ``indices`` (the indices of the accesses at one
    dimension, an instance of each inside the loop) mean equal values of ``var``, where the
    accesses sit in loops of their own (an init store distributed beside the update, its
    loops copies): each index is ``c * var + r + e`` with one same coefficient ``c`` and one
    same ``e`` (terms of variables bound outside the loop), ``r`` a constant and terms of
    other loops inside with constant bounds, and every ``r`` in one window of fewer than
    ``|c|`` values. Then ``c * (v1 - v2) = r2 - r1`` has only the solution
    ``v1 = v2``.

    >>> from te import Var
    >>> io, ii, ii1 = Var("io"), Var("ii"), Var("ii1")
    >>> loops = {id(v): For(v, 0, n, Block(())) for v, n in ((io, 16), (ii, 4), (ii1, 4))}
    >>> inside = set(loops)
    >>> _window_determines([io * 4 + ii, io * 4 + ii1], io, loops, inside)
    True
    >>> _window_determines([io * 4 + ii, io * 4 + ii1 + 1], io, loops, inside)     # io 0, ii1 3 meets io 1, ii 0
    False
    """
    coef = outside = None
    low = high = 0
    for n, ix in enumerate(indices):
        form = affine_form(ix, {})
        if form is None:
            return False
        terms, const = form
        c = terms.get(id(var))
        key = sorted((k, x) for k, x in terms.items() if k not in inside)
        if not c or (n and (c != coef or key != outside)):
            return False
        coef, outside = c, key
        lo = hi = const
        for k, x in terms.items():
            if k not in inside or k == id(var):
                continue
            f = loops.get(k)
            start = stop = None
            if f is not None:
                start, stop = fold_int(simplify(f.start)), fold_int(simplify(f.stop))
            if start is None or stop is None or stop <= start:     # a let's variable, two loops', or unknown
                return False
            lo, hi = lo + min(x * start, x * (stop - 1)), hi + max(x * start, x * (stop - 1))
        low, high = (lo, hi) if n == 0 else (min(low, lo), max(high, hi))
    return coef is not None and high - low < abs(coef)


def _shared(tuples: list) -> list:
    """The indices that every index tuple of ``tuples`` has at the same dimension."""
    first = tuples[0]
    return [ix for d, ix in enumerate(first) if all(structural_equal(t[d], ix) for t in tuples[1:])]


def _walk(f: For):
    """(the index tuples of the accesses inside ``f`` to each buffer stored to inside it, by
    buffer id; the Fors inside ``f`` (and ``f``) by variable id, None for a variable two loops
    bind; the ids of the variables bound inside ``f``; the buffers stored to, by id), or None
    where another kind of statement leaves the accesses unknown."""
    stores: list[Store] = []
    reads: list = []
    loops: dict = {id(f.var): f}
    inside = {id(f.var)}
    stack = list(stmt_children(f))
    while stack:
        s = stack.pop()
        if isinstance(s, Block):
            stack.extend(s.stmts)
        elif isinstance(s, For):
            loops[id(s.var)] = None if id(s.var) in loops else s
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
            return None
    accesses: dict = {}
    buffers: dict = {}
    for s in stores:
        accesses.setdefault(id(s.buffer), []).append(s.indices)
        buffers[id(s.buffer)] = s.buffer
    for ld in loads(reads):
        if id(ld.buffer) in accesses:
            accesses[id(ld.buffer)].append(ld.indices)
    return accesses, loops, inside, buffers


def _determines(index: E.Expr, var: E.Var, loops: dict, inside: set) -> bool:
    """Whether equal values of ``index`` at two instances inside the loop mean equal values
    of ``var`` (see ``same_value_of``)."""
    lets: list = []
    used = free_vars(index, lets=lets)
    if lets or loads(index) or not index.dtype.is_int or index.dtype.is_vector:
        return False
    terms = [v for v in used if id(v) in inside]
    if not any(v is var for v in terms):
        return False
    spans = []
    for v in terms:
        f = loops.get(id(v))
        step = fold_int(simplify(E.substitute(index, {v: v + 1}) - index))
        if f is None or not step:           # a let's variable, a variable two loops bind, or not linear
            return False
        if any(id(u) in inside for u in free_vars([f.start, f.stop])):
            return False                    # a range that moves with another loop: the spans say nothing
        trips = fold_int(simplify(f.stop - f.start))
        spans.append((abs(step), None if trips is None else abs(step) * max(trips - 1, 0)))
    spans = sorted((t for t in spans if t[1] != 0), key=lambda t: t[0])     # a loop of one trip adds a constant
    below = 0       # how far the smaller terms reach; unknown (None) after a loop of unknown trips
    for step, span in spans:
        if below is None or step <= below:
            return False
        below = None if span is None else below + span
    return True
