"""Flow, anti and output dependences between statement instances (islpy).

A dependence says that one access (``src``) to an element of a buffer executes before
another access (``dst``) to the same element, at least one of them a write:

* flow: a write, then a read of what it wrote;
* anti: a read, then a write overwriting what was read;
* output: a write, then another write of the same element.

The analysis is memory based and exact for affine programs (``relation`` holds exactly
the pairs of iterations involved); non-affine bounds, conditions and indices are
over-approximated (see ``domains``), so a legality check built on it is conservative.

>>> from te import Buffer, Reduce, Sum
>>> from loopnest import LoopNest
>>> A = Buffer("A", (4, 8), "float32")
>>> C = Reduce("C", (4,), Sum(), lambda i, k: A[i, k], (8,))
>>> nest = LoopNest([C])
>>> i, k = nest.get_loops_for(C)
>>> [d.kind for d in carried_by(nest, k)]
['flow', 'anti', 'output']
>>> carried_by(nest, i)
[]
>>> print(carried_by(nest, k)[0].describe())
`C[i] = C[i] + A[i, k]` reads C[i], written by the same statement in the previous iteration of loop k
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import islpy as isl

from .budget import isl_budget, within_budget
from .domains import Access, Analysis, analyze, loop_var_of

__all__ = ["Dependence", "compute_dependences", "carried_by", "dependences_in", "distance_vectors",
           "lex_negative_after", "value_flow", "reads_written_in_iteration", "conflict_distances",
           "buffers_carried_by", "reorder_violations", "reads_initial_values"]


@dataclass(eq=False)
class Dependence:
    """One dependence between two accesses of ``buffer``.

    ``relation`` is an ``isl.Map`` from ``src``'s iterations to ``dst``'s iterations (the
    pairs where both touch one element and src runs first). ``common_loops`` are the loops
    enclosing both; distances are measured over them (dst iteration - src iteration).
    """

    kind: str              # "flow" | "anti" | "output"
    buffer: Any
    src: Access
    dst: Access
    relation: Any          # isl.Map
    analysis: Analysis = field(repr=False)
    _dist: dict = field(default_factory=dict, repr=False)

    # -- structure --------------------------------------------------------------------
    @property
    def common_depth(self) -> int:
        """Number of loops enclosing both accesses."""
        a, b = self.src.instance, self.dst.instance
        n = 0
        while n < min(a.depth, b.depth) and a.position[n] == b.position[n]:
            n += 1
        return n

    @property
    def common_loops(self) -> tuple:
        """The For statements enclosing both accesses, outermost first."""
        return self.src.instance.loops[:self.common_depth]

    def depth_of(self, loop: Any) -> int | None:
        """The depth of ``loop`` among the common loops (None when it does not enclose both)."""
        v = loop_var_of(loop)
        for d, f in enumerate(self.common_loops):
            if f.var is v:
                return d
        return None

    # -- distances --------------------------------------------------------------------
    def distance_set(self, n: int | None = None):
        """The ``isl.Set`` of distance vectors (dst - src) over the first ``n`` common loops.

        >>> from te import Buffer, Reduce, Sum
        >>> from loopnest import LoopNest
        >>> A = Buffer("A", (4, 8), "float32")
        >>> C = Reduce("C", (4,), Sum(), lambda i, k: A[i, k], (8,))
        >>> d = compute_dependences(LoopNest([C]).root)[0]
        >>> d.kind, str(d.src), str(d.dst)
        ('flow', 'C[i] (write)', 'C[i] (read)')
        >>> print(d.distance_set(1))
        { [0] }
        """
        if n is None:
            n = self.common_depth
        s = self._dist.get(n)
        if s is None:
            a, b = self.src.instance, self.dst.instance
            r = self.relation.project_out(isl.dim_type.in_, n, a.depth - n)
            r = r.project_out(isl.dim_type.out, n, b.depth - n)
            r = r.reset_tuple_id(isl.dim_type.in_).reset_tuple_id(isl.dim_type.out)
            s = self._dist[n] = r.deltas()
        return s

    def carried_at(self, depth: int) -> bool:
        """True when some pair has equal iterations of the common loops above ``depth``
        and different iterations of the loop at ``depth``."""
        if depth >= self.common_depth:
            return False
        key = ("carried", depth)
        r = self._dist.get(key)
        if r is None:
            r = self._dist[key] = not _nonzero_at(_zero_prefix(self.distance_set(depth + 1), depth), depth).is_empty()
        return r

    def is_carried_by(self, loop: Any) -> bool:
        """True when ``loop`` carries this dependence (see ``carried_at``)."""
        d = self.depth_of(loop)
        return d is not None and self.carried_at(d)

    def carried_level(self) -> int | None:
        """The depth of the outermost common loop carrying the dependence (None when it is
        loop independent: same iteration of every common loop)."""
        for d in range(self.common_depth):
            if self.carried_at(d):
                return d
        return None

    @property
    def carrying_loops(self) -> list:
        """The For statements carrying this dependence, outermost first."""
        return [f for d, f in enumerate(self.common_loops) if self.carried_at(d)]

    def distance(self, loop: Any) -> int | None:
        """The constant distance at ``loop`` over the pairs carried by it (None when not
        carried by ``loop`` or not constant).

        >>> from te import Buffer, Reduce, Sum
        >>> from loopnest import LoopNest
        >>> A = Buffer("A", (4, 8), "float32")
        >>> C = Reduce("C", (4,), Sum(), lambda i, k: A[i, k], (8,))
        >>> n = LoopNest([C]); i, k = n.get_loops_for(C)
        >>> [(d.kind, d.distance(k), d.min_distance(k)) for d in carried_by(n, k)]
        [('flow', None, 1), ('anti', None, 1), ('output', None, 1)]
        """
        s = self._carried_distances(loop)
        if s is None:
            return None
        p = s.sample_point()
        if p.is_void():
            return None
        v = p.get_coordinate_val(isl.dim_type.set, 0)
        if s.is_subset(s.fix_val(isl.dim_type.set, 0, v)):
            return int(v.to_python())
        return None

    def min_distance(self, loop: Any) -> int | None:
        """The smallest distance at ``loop`` over the pairs it carries, when it is a constant
        (the distance to the closest source: 1 when the previous iteration is involved)."""
        s = self._carried_distances(loop)
        if s is None:
            return None
        m = s.lexmin()
        if m.is_empty():
            return None
        v = m.sample_point().get_coordinate_val(isl.dim_type.set, 0)
        return int(v.to_python()) if m.is_subset(m.fix_val(isl.dim_type.set, 0, v)) else None

    def _carried_distances(self, loop: Any):
        d = self.depth_of(loop)
        if d is None or not self.carried_at(d):
            return None
        s = _nonzero_at(_zero_prefix(self.distance_set(d + 1), d), d)
        return s.project_out(isl.dim_type.set, 0, d)

    def directions(self) -> tuple:
        """Per common loop, the signs the distance takes: a string of '<' (positive distance,
        dst in a later iteration), '=' and '>' (negative), e.g. ``('=', '<')``."""
        n = self.common_depth
        s = self.distance_set(n)
        ctx = s.get_ctx()
        out = []
        for d in range(n):
            signs = ""
            if not s.lower_bound_val(isl.dim_type.set, d, isl.Val.int_from_si(ctx, 1)).is_empty():
                signs += "<"
            if not s.fix_val(isl.dim_type.set, d, isl.Val.int_from_si(ctx, 0)).is_empty():
                signs += "="
            if not s.upper_bound_val(isl.dim_type.set, d, isl.Val.int_from_si(ctx, -1)).is_empty():
                signs += ">"
            out.append(signs or "=")
        return tuple(out)

    @property
    def exact(self) -> bool:
        """False when an index of either access was over-approximated (it depends on data or
        is not affine): the elements involved, and so the pairs, are a superset.

        >>> from te import Buffer, Var
        >>> from loopnest.stmt import Block, For, Store
        >>> A, H = Buffer("A", (8,), "int32"), Buffer("H", (4,), "int32"); i = Var("i")
        >>> d = compute_dependences(Block([For(i, 0, 8, Block([Store(H, (A[i],), H[A[i]] + 1)]))]))[0]
        >>> d.exact, d.describe()
        (False, '`H[A[i]] = H[A[i]] + 1` may read H[A[i]], written by the same statement in an earlier iteration of loop i')
        """
        return self.src.exact and self.dst.exact

    # -- text -------------------------------------------------------------------------
    def _when(self, loop: Any = None) -> str:
        d = self.depth_of(loop) if loop is not None else None
        if d is None or not self.carried_at(d):
            d = self.carried_level()
        if d is None:
            return "earlier in the same iteration" if self.common_depth else "earlier"
        f = self.common_loops[d]
        if not self.exact:      # an index that depends on data: some earlier iteration, not a known one
            return f"in an earlier iteration of loop {f.var.name}"
        dist = self.min_distance(f)
        if dist == 1:
            return f"in the previous iteration of loop {f.var.name}"
        if dist is not None:
            return f"{dist} iterations earlier of loop {f.var.name}"
        return f"in an earlier iteration of loop {f.var.name}"

    def _who(self) -> str:
        if self.src.instance is self.dst.instance:
            return "the same statement"
        return f"`{self.src.instance.text()}`"

    def describe(self, loop: Any = None) -> str:
        """Readable text; ``loop`` selects which carrying loop to explain (default: the
        outermost one). A dependence through an over-approximated index says "may".

        >>> from te import Buffer, Compute
        >>> from loopnest import LoopNest
        >>> A = Buffer("A", (8,), "float32")
        >>> n = LoopNest([Compute("B", (8,), lambda i: A[i])])
        >>> print(compute_dependences(n.root))
        []
        """
        dst_stmt = f"`{self.dst.instance.text()}`"
        when = self._when(loop)
        # name the source access unless it reads as the destination's or is the shown store
        shown = self.src.is_write and self.src.instance is not self.dst.instance
        also = "" if self.src.text() == self.dst.text() or shown else f" (as {self.src.text()})"
        may = "" if self.exact else "may "
        if self.kind == "flow":
            return f"{dst_stmt} {may}read{'' if may else 's'} {self.dst.text()}, written by {self._who()}{also} {when}"
        if self.kind == "anti":
            return f"{dst_stmt} {may}overwrite{'' if may else 's'} {self.dst.text()}, read by {self._who()}{also} {when}"
        return f"{dst_stmt} {may}write{'' if may else 's'} {self.dst.text()}, also written by {self._who()}{also} {when}"

    def __str__(self) -> str:
        return f"{self.kind} dependence on {self.buffer.name}: {self.describe()}"

    __repr__ = __str__


# ------------------------------------------------------------------------------------
# computing dependences
# ------------------------------------------------------------------------------------
_KIND = {(True, False): "flow", (False, True): "anti", (True, True): "output"}


def compute_dependences(root: Any, nest: Any = None) -> list[Dependence]:
    """Every dependence of a statement tree (or a LoopNest's root), cached per root.

    Ordered by buffer (first access first), then kind (flow, anti, output), then source
    and destination in program order.
    """
    an = analyze(root)
    deps = getattr(an, "_deps", None)
    if deps is None:
        deps = an._deps = list(_dependences_among(an, an.accesses))
    return deps


def _dependence(an: Analysis, x: Access, y: Access) -> Dependence | None:
    rel = x.relation.apply_range(y.relation.reverse())
    if rel.is_empty():
        return None
    rel = rel.intersect(_order(an, x, y))
    if rel.is_empty():
        return None
    return Dependence(_KIND[(x.is_write, y.is_write)], x.buffer, x, y, _coalesced(rel), an)


#: isl operations that simplifying one dependence relation may take (the relations of
#: masked, split and cached loops are unions of many pieces with floor divisions, whose
#: coalescing took seconds each); past them the relation is kept as it is (the same set)
COALESCE_OPERATIONS = 100_000


def _coalesced(rel):
    """``rel.coalesce()``, or ``rel`` itself where that takes more than ``COALESCE_OPERATIONS``."""
    out = within_budget(COALESCE_OPERATIONS, rel.coalesce)
    return rel if out is None else out


def _order(an: Analysis, x: Access, y: Access):
    """``{ X[s] -> Y[t] : x at s runs before y at t }`` built with the isl API."""
    a, b = x.instance, y.instance
    c = 0
    while c < min(a.depth, b.depth) and a.position[c] == b.position[c]:
        c += 1
    textual = a.slot(c, x.is_write) < b.slot(c, y.is_write)
    cache = an.__dict__.setdefault("_order_cache", {})
    key = (a.depth, b.depth, c, textual)
    m = cache.get(key)
    if m is None:
        space = an.space(a.depth)[0].map_from_domain_and_range(an.space(b.depth)[0])
        m = isl.Map.universe(space)
        out = isl.Map.empty(space)
        for k in range(c):
            out = out.union(m.order_lt(isl.dim_type.in_, k, isl.dim_type.out, k))
            m = m.equate(isl.dim_type.in_, k, isl.dim_type.out, k)
        if textual:
            out = out.union(m)
        m = cache[key] = out.coalesce()
    return m.set_tuple_name(isl.dim_type.in_, a.name).set_tuple_name(isl.dim_type.out, b.name)


def _zero_prefix(s, n: int):
    """``s`` restricted to vectors whose first ``n`` coordinates are 0."""
    zero = isl.Val.int_from_si(s.get_ctx(), 0)
    for k in range(n):
        s = s.fix_val(isl.dim_type.set, k, zero)
    return s


def _nonzero_at(s, k: int):
    ctx = s.get_ctx()
    return s.lower_bound_val(isl.dim_type.set, k, isl.Val.int_from_si(ctx, 1)).union(
        s.upper_bound_val(isl.dim_type.set, k, isl.Val.int_from_si(ctx, -1)))


def dependences_in(root: Any, loop: Any, pairs: Callable[[Access, Access], bool] | None = None) -> list[Dependence]:
    """Dependences whose source and destination both execute inside ``loop``'s body; with
    ``pairs``, only those from an access ``x`` to an access ``y`` for which ``pairs(x, y)``
    holds (the other pairs are not computed), in the same order."""
    an = analyze(root)
    info = an.loop_info(loop)
    return list(_dependences_among(an, [a for a in an.accesses if info.contains(a.instance)], pairs))


def carried_by(nest_or_root: Any, loop: Any, buffers: Any = None, first: bool = False) -> list[Dependence]:
    """Dependences carried by ``loop``: same iteration of every loop outside it, different
    iterations of ``loop`` (a Loop handle, a For or its Var). ``buffers`` restricts them to
    those buffers; with ``first`` the search stops at the first one found.

    A loop carrying none may run its iterations in parallel (``buffers_carried_by`` answers
    that question faster).
    """
    an = analyze(nest_or_root)
    info = an.loop_info(loop)
    keep = None if buffers is None else {id(b) for b in buffers}
    out = []
    for d in _dependences_among(an, [a for a in an.accesses if info.contains(a.instance)
                                     and (keep is None or id(a.buffer) in keep)]):
        if d.carried_at(info.depth):
            out.append(d)
            if first:
                break
    return out


def _dependences_among(an: Analysis, accs: list, pairs: Callable[[Access, Access], bool] | None = None):
    """Dependences between the given accesses (lazily, by buffer, in program order); with
    ``pairs``, only from ``x`` to ``y`` where ``pairs(x, y)``."""
    full = getattr(an, "_deps", None)
    if full is not None:
        ids = {id(a) for a in accs}
        yield from (d for d in full if id(d.src) in ids and id(d.dst) in ids
                    and (pairs is None or pairs(d.src, d.dst)))
        return
    groups: dict[int, list[Access]] = {}
    for a in accs:
        groups.setdefault(id(a.buffer), []).append(a)
    for group in groups.values():
        if not any(a.is_write for a in group):
            continue
        # flow first, then anti, then output: the most telling explanation comes first
        for want in ((True, False), (False, True), (True, True)):
            for x in group:
                if x.is_write != want[0]:
                    continue
                for y in group:
                    if y.is_write == want[1] and (pairs is None or pairs(x, y)):
                        d = _dependence(an, x, y)
                        if d is not None:
                            yield d


# ------------------------------------------------------------------------------------
# fast queries: one isl computation per buffer instead of one per pair of accesses
# ------------------------------------------------------------------------------------
def conflict_distances(nest_or_root: Any, loop: Any, n: int | None = None, buffers: Any = None) -> list:
    """For each buffer accessed inside ``loop``, the ``isl.Set`` of the distance vectors
    over the first ``n`` enclosing loops (default: down to ``loop``) between any two accesses
    inside ``loop`` touching one element, at least one a write, in either order (the set
    is symmetric: it holds -v with v). Returns ``[(buffer, set)]``, non-empty sets only.

    It answers "is some dependence carried here / reversed by this permutation" with a few
    isl operations per buffer; the Dependence objects are needed only to explain a refusal.
    """
    an = analyze(nest_or_root)
    info = an.loop_info(loop)
    if n is None:
        n = info.depth + 1
    keep = None if buffers is None else {id(b) for b in buffers}
    groups: dict[int, list[Access]] = {}
    for a in an.accesses:
        if info.contains(a.instance) and a.instance.depth >= n and (keep is None or id(a.buffer) in keep):
            groups.setdefault(id(a.buffer), []).append(a)
    cache = an.__dict__.setdefault("_conflicts", {})
    out = []
    for key, accs in groups.items():
        if not any(a.is_write for a in accs):
            continue
        ck = (key, id(info.loop), n)
        d = cache.get(ck)
        if d is None:
            d = cache[ck] = _conflict_set(an, accs, n)
        if not d.is_empty():
            out.append((accs[0].buffer, d))
    return out


#: isl operations the conflicting pairs of accesses of one buffer may take (about 0.2 s): the
#: relations of a cache whose bounds are minima of many floor divisions made their composition
#: run for minutes (random tester seed 154, case 392); the benchmark's schedules take at most
#: 2 ms
CONFLICT_OPERATIONS = 200_000


def _conflict_set(an: Analysis, accs: list, n: int):
    """The distance vectors over the first ``n`` loops between the accesses ``accs`` of one
    buffer that touch one element, at least one a write (see ``conflict_distances``); every
    distance when isl gives up on the pairs (the callers then assume the worst: a dependence
    carried by every loop, reversed by every reorder)."""
    conf = _conflicting_pairs(an, accs)
    if conf is None:
        an.__dict__.setdefault("_undecided", set()).add(id(accs[0].buffer))
        return isl.Set.universe(an.space(n)[0])
    proj = None
    seen: set[str] = set()
    for a in accs:
        inst = a.instance
        if inst.name in seen:
            continue
        seen.add(inst.name)
        sp = an.space(inst.depth)[0]
        m = isl.Map.identity(sp.map_from_set()).project_out(isl.dim_type.out, n, inst.depth - n)
        m = isl.UnionMap.from_map(m.set_tuple_name(isl.dim_type.in_, inst.name))
        proj = m if proj is None else proj.union(m)
    deltas = proj.reverse().apply_range(conf).apply_range(proj).deltas()
    return deltas.extract_set(an.space(n)[0])


def _conflicting_pairs(an: Analysis, accs: list):
    """The pairs of iterations among ``accs`` that touch one element, at least one writing it,
    in either order (an ``isl.UnionMap``), once per set of accesses of the analysis ``an``
    (the loops of one nest share them); None when isl cannot compute them within
    ``CONFLICT_OPERATIONS``."""
    cache = an.__dict__.setdefault("_conflicting_pairs", {})
    key = tuple(id(a) for a in accs)
    hit = cache.get(key)
    if hit is None:
        hit = cache[key] = (accs, within_budget(CONFLICT_OPERATIONS, _pairs, accs))  # accs keeps the ids
    return hit[1]


def _pairs(accs: list):
    writes = isl.UnionMap.from_map(next(a.relation for a in accs if a.is_write))
    every = writes
    for a in accs:
        um = isl.UnionMap.from_map(a.relation)
        every = every.union(um)
        if a.is_write:
            writes = writes.union(um)
    conf = writes.apply_range(every.reverse())
    return conf.union(conf.reverse())


def undecided(nest_or_root: Any) -> set:
    """The ids of the buffers whose conflicting accesses isl could not compute within
    ``CONFLICT_OPERATIONS`` in the analysis of ``nest_or_root`` so far: every distance counts
    for them, and no pair of their accesses can explain a refusal (``UndecidedDependence``).

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> nest = LoopNest([Compute("B", (8,), lambda i: Buffer("A", (8,), "float32")[i] + 1.0)])
    >>> _ = buffers_carried_by(nest.root, nest.get_loops_for("B")[0])
    >>> undecided(nest.root)            # isl decided every buffer
    set()
    """
    return analyze(nest_or_root).__dict__.get("_undecided", set())


@dataclass(frozen=True)
class UndecidedDependence:
    """What a refusal names for ``buffer`` when isl could not compute its conflicting accesses:
    any two of them may touch one element.

    >>> from te import Buffer
    >>> print(UndecidedDependence(Buffer("T", (4,), "float32")).describe())
    isl could not analyse the accesses of T within its operation budget (simpler indices and loop bounds let it), so any two of them may touch one element
    """
    buffer: Any
    kind: str = "possible"

    def describe(self, loop: Any = None) -> str:
        return (f"isl could not analyse the accesses of {self.buffer.name} within its operation budget (simpler "
                "indices and loop bounds let it), so any two of them may touch one element")

    def is_carried_by(self, loop: Any) -> bool:
        return True


def buffers_carried_by(nest_or_root: Any, loop: Any, buffers: Any = None) -> list:
    """The buffers (among ``buffers``, default all) on which ``loop`` carries a dependence
    (fast; see ``conflict_distances``). Naming the buffers asked about spares the isl work
    for the others.

    >>> from te import Buffer, Var
    >>> from loopnest.stmt import Block, For, Store
    >>> A, B, i = Buffer("A", (8,), "float32"), Buffer("B", (8,), "float32"), Var("i")
    >>> loop = For(i, 1, 8, Block([Store(A, (i,), A[i - 1]), Store(B, (i,), A[i])]))
    >>> [b.name for b in buffers_carried_by(loop, loop)], buffers_carried_by(loop, loop, buffers=[B])
    (['A'], [])
    """
    an = analyze(nest_or_root)
    c = an.loop_info(loop).depth
    return [b for b, d in conflict_distances(nest_or_root, loop, buffers=buffers)
            if not _nonzero_at(_zero_prefix(d, c), c).is_empty()]


def _lex_signed(s, seq: list, positive: bool):
    """Vectors of ``s`` lexicographically positive (or, with ``positive=False``, negative)
    when read in the dimension order ``seq``: those whose first nonzero coordinate in that
    order is >= 1 (<= -1). Empty when ``seq`` is empty."""
    ctx = s.get_ctx()
    zero = isl.Val.int_from_si(ctx, 0)
    bound = isl.Val.int_from_si(ctx, 1 if positive else -1)
    out = None
    t = s
    for d in seq:
        if positive:
            piece = t.lower_bound_val(isl.dim_type.set, d, bound)
        else:
            piece = t.upper_bound_val(isl.dim_type.set, d, bound)
        out = piece if out is None else out.union(piece)
        t = t.fix_val(isl.dim_type.set, d, zero)
    return out if out is not None else s.subtract(s)


def _lex_positive(s, seq: list):
    """Vectors of ``s`` lexicographically positive when read in the dimension order ``seq``."""
    return _lex_signed(s, seq, positive=True)


def reorder_violations(nest_or_root: Any, outer_loop: Any, band: list[int], order: list[int]) -> list:
    """Buffers with a dependence inside ``outer_loop`` (the outermost loop of a perfect band
    at depths ``band``) that the permutation ``order`` of the band would reverse, with an
    example distance vector (over the loops down to ``max(band)``): ``[(buffer, set)]``."""
    n = max(band) + 1
    outer = min(band)
    pos = {d: k for k, d in enumerate(band)}
    new_seq = [order[pos[d]] if d in pos else d for d in range(outer, n)]
    out = []
    for buf, d in conflict_distances(nest_or_root, outer_loop, n):
        d = _zero_prefix(d, outer)
        bad = _lex_positive(d, list(range(outer, n)))
        neg = _lex_signed(bad, new_seq, positive=False)
        if not neg.is_empty():
            out.append((buf, neg))
    return out


def distance_vectors(dep: Dependence, loops: list) -> Any:
    """The ``isl.Set`` of distance vectors of ``dep`` over the common loops down to the
    innermost of ``loops`` (all of which must enclose both accesses)."""
    depths = [dep.depth_of(l) for l in loops]
    if any(d is None for d in depths):
        raise ValueError("every loop must enclose both accesses of the dependence")
    return dep.distance_set(max(depths) + 1)


def lex_negative_after(dep: Dependence, outer: int, band: list[int], order: list[int]) -> Any:
    """Distance vectors of ``dep`` that become lexicographically negative when the loops at
    depths ``band`` (consecutive or not, all below the ``outer`` outermost common loops,
    which keep their order) are put in the order ``order`` (a permutation of ``band``).

    Returns an ``isl.Set`` over the common loops down to ``max(band)`` (empty when the
    reordering preserves ``dep``).
    """
    n = max(band) + 1
    s = _zero_prefix(dep.distance_set(n), outer)
    pos = {d: k for k, d in enumerate(band)}
    new_seq = [order[pos[d]] if d in pos else d for d in range(outer, n)]
    return _lex_signed(s, new_seq, positive=False)


def reads_written_in_iteration(nest_or_root: Any, buffer: Any, loop: Any) -> bool:
    """True when every read of ``buffer`` inside ``loop`` is of an element that an exactly
    represented write stored earlier in the same iteration of ``loop``: then the last write
    before each read is in the read's own iteration, so no value of ``buffer`` flows between
    iterations. False when some read is not shown to be so (not exact, or reading what
    another iteration or nothing wrote): a sufficient test, cheaper than ``value_flow``.

    A read counts as written earlier when, for one of the loops around it (``loop`` or one
    inside it), the statements before the read's own in that loop's body write every element
    the read takes in the same iteration of that loop.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (4, 8), "float32")
    >>> T1 = Compute("T1", (4, 8), lambda i, j: A[i, j] + 1.0)
    >>> nest = LoopNest([Compute("T2", (4,), lambda i: T1[i, 7] + T1[i / 2, 0])])
    >>> i = nest.fuse([nest.get_loops_for("T1")[0], nest.get_loops_for("T2")[0]])
    >>> reads_written_in_iteration(nest, nest.buffer("T1"), i)   # T1[i / 2, 0]: row i / 2
    False
    >>> nest = LoopNest([Compute("T2", (4,), lambda i: T1[i, 7] + T1[i, 0])])
    >>> i = nest.fuse([nest.get_loops_for("T1")[0], nest.get_loops_for("T2")[0]])
    >>> reads_written_in_iteration(nest, nest.buffer("T1"), i)
    True
    """
    an = analyze(nest_or_root)
    info = an.loop_info(loop)
    accs = an.accesses_of(buffer)
    writes = [a for a in accs if a.is_write and a.exact and a.instance.domain_exact]
    found = an.__dict__.setdefault("_written_before", {})   # id(read) -> (searched from, depth)
    for a in accs:
        if a.is_write or not info.contains(a.instance):
            continue
        lo, d = found.get(id(a), (None, None))
        if d is not None and d >= info.depth:
            continue
        if lo is None or lo > info.depth or d is not None:
            d = _written_before(a, writes, info.depth)
            found[id(a)] = (info.depth, d)
        if d is None:
            return False
    return True


def _written_before(read: Access, writes: list, outer: int) -> int | None:
    """The first loop depth d >= ``outer`` around ``read`` at which the writes placed before it
    in that loop's body cover every element it reads in the same iteration (see
    ``reads_written_in_iteration``); None when there is none."""
    if not read.exact:
        return None
    pos = read.instance.position
    for d in range(outer, read.instance.depth):
        before = [w for w in writes if w.instance.position[:d + 1] == pos[:d + 1]
                  and w.instance.depth > d and w.instance.position[d + 1] < pos[d + 1]]
        if not before:
            continue
        written = None
        for w in before:
            m = _per_iteration(w, d)
            written = m if written is None else written.union(m)
        if _per_iteration(read, d).is_subset(written):
            return d
    return None


def _per_iteration(a: Access, d: int):
    """``{ [i0, ..., id] -> M[e] }``: the elements ``a`` touches in each iteration of the loops
    at depths 0 to d around it."""
    n = a.instance.depth
    return a.relation.project_out(isl.dim_type.in_, d + 1, n - d - 1).reset_tuple_id(isl.dim_type.in_)


def value_flow(root: Any, buffer: Any):
    """Value-based flow dependences on ``buffer``: for every read, the writes whose value it
    may read (the last write before it, exactly for affine programs), as an
    ``isl.UnionMap`` from writer iterations to reader iterations.

    Writes under over-approximated conditions or with over-approximated indices are "may"
    sources (they do not hide earlier writes). None when isl cannot decide it within
    ``FLOW_OPERATIONS`` (callers then assume the worst).
    """
    flow = _flow(root, buffer)
    return None if flow is None else flow.get_may_dependence()


def reads_initial_values(root: Any, buffer: Any) -> bool:
    """True when some read of ``buffer`` in ``root`` may take a value that no write of
    ``root`` stored before it: the value the buffer held when the statement started (an
    in-place update, a histogram's bins). Non-affine indices or conditions count as "may".

    >>> from te import Buffer, Var
    >>> from loopnest.stmt import Block, For, Store
    >>> A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "float32"); i = Var("i")
    >>> scan = Block([Store(B, (0,), A[0]), For(i, 0, 7, Block([Store(B, (i + 1,), B[i] + A[i + 1])]))])
    >>> reads_initial_values(scan, B), reads_initial_values(For(i, 0, 8, Block([Store(A, (i,), A[i] * 2.0)])), A)
    (False, True)
    """
    if not any(not a.is_write for a in analyze(root).accesses_of(buffer)):
        return False
    flow = _flow(root, buffer)
    return flow is None or not flow.get_may_no_source().is_empty()


def _flow(root: Any, buffer: Any):
    an = analyze(root)
    cache = an.__dict__.setdefault("_value_flow", {})
    hit = cache.get(id(buffer))
    if hit is None or hit[0] is not buffer:
        with isl_budget(FLOW_OPERATIONS) as within:
            flow = _value_flow(an, buffer)
        hit = cache[id(buffer)] = (buffer, flow if within() else None)   # holding buffer keeps its id
    return hit[1]


#: isl operations a value-flow analysis may take (exact dataflow is exponential in the worst
#: case; a few programs of many guarded stages take minutes)
FLOW_OPERATIONS = 2_000_000


def _value_flow(an: Analysis, buffer: Any):
    accs = an.accesses_of(buffer)
    reads = [a for a in accs if not a.is_write]
    writes = [a for a in accs if a.is_write]
    empty = isl.UnionMap("{ }")
    sink = empty
    must = empty
    may = empty
    sched = empty
    seen: set[str] = set()
    for a in accs:
        if a.instance.name not in seen:
            seen.add(a.instance.name)
            sched = sched.union(isl.UnionMap.from_map(_read_schedule(an, a)))
    for a in reads:
        sink = sink.union(isl.UnionMap.from_map(a.relation))
    for a in writes:
        um = isl.UnionMap.from_map(a.relation)
        if a.exact and a.instance.domain_exact:
            must = must.union(um)
        else:
            may = may.union(um)
    info = isl.UnionAccessInfo.from_sink(sink).set_must_source(must).set_may_source(may)
    return info.set_schedule_map(sched).compute_flow()


def _read_schedule(an: Analysis, a: Access):
    # one schedule per statement: its reads' (a statement reads before it writes, so its own
    # write is never the source of its reads)
    for b in a.instance.accesses:
        if not b.is_write:
            return b.schedule
    return an.schedule(a.instance, False)
