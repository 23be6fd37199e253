"""Which intermediates each iteration of a loop may keep to itself: the question
``insert_allocations`` asks to place an allocation inside a loop, and the check that keeps
transforms from changing its answer for a parallel or GPU loop."""
from __future__ import annotations

from ..errors import ScheduleError
from ..kinds import ForKind
from ..lazy_analysis import legality_checks
from ..queries import own_loaded_ids, stmt_loaded_buffers, stmt_stored_buffers
from ..stmt import Block, ExternCall, For, Stmt, Store, iter_stmts, stmt_children
from ._rewrite import loop_path
from .store_at import allocate_inside

__all__ = ["private_to", "refuse_lost_privacy", "carry_private_facts", "KEEPS_ITERATIONS"]


def private_to(nest, buf, f: For) -> bool:
    """Whether ``buf`` may be allocated inside loop ``f`` (a loop of ``nest.root`` or a lowered
    copy of one); False for a loop the nest's analysis does not know. A buffer stored at a
    loop (``shrink_storage``) is allocated once outside it, per iteration of a parallel loop.
    A ``gpu_matmul`` tree's tiles and accumulators are private to its block loops while the
    nest is as the tree left it (each block fills them before reading them).

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (4, 8), "float32")
    >>> T1 = Compute("T1", (4, 8), lambda i, j: A[i, j] + 1.0)
    >>> nest = LoopNest([Compute("T2", (4,), lambda i: T1[i, 0] + T1[i, 7])])
    >>> i = nest.fuse([nest.get_loops_for("T1")[0], nest.get_loops_for("T2")[0]])
    >>> private_to(nest, nest.buffer("T1"), i.stmt)     # row i is written, then read, in iteration i
    True
    """
    inside = allocate_inside(nest, buf, f)
    if inside is not None:
        return inside
    tree = nest._tree_private
    if tree is not None and tree[0] is nest.root and id(buf) in tree[1] and id(f.var) in tree[2]:
        return True         # a gpu_matmul tree's tiles in its block loops, as it made them
    if id(buf) in nest._cache_buffers and any(
            isinstance(g, For) and g.kind in ForKind.CONCURRENT for g in iter_stmts(f)):
        # a cache_accesses copy is filled by each iteration of its loop before it is read, so
        # it is private to every loop that contains all its uses (the loops asked about here),
        # even where the dependence analysis cannot show it; it goes down to the parallel or
        # GPU loops, whose concurrent iterations must not share one copy (seed 50, case 227)
        return True
    if _filled_in_each_iteration(nest, buf, f):
        return True
    return legality_checks().privatizable(nest, buf, f.var)      # False for a loop not in the nest


def _filled_in_each_iteration(nest, buf, f: For) -> bool:
    """Whether each iteration of ``f`` reads only elements of ``buf`` that it wrote, shown
    without the dependence analysis (whose build dominates this pass for an unrolled register
    tile): ``buf`` is a ``cache_accesses`` copy made at a loop L, each iteration of L reads
    only what it wrote (the copy in at its start covers every other read), and ``f`` is L or
    a loop that was around L when the copy was made, with only such loops between them (an
    iteration of ``f`` holds whole iterations of L, values are not read across them), and L
    holds every access to ``buf`` inside ``f``. Every loop around L must have been around it
    then (a loop moved out of L would run L's iterations in pieces). Anything else (L split,
    unrolled or copied since, loops made later around it) is left to the analysis."""
    made_at = nest._cache_loops.get(id(buf))
    if made_at is None:
        return False
    var, around = made_at
    chain = nest.loop_index().enclosing(var)
    if not chain or any(id(g.var) not in around for g in chain):
        return False
    paths = loop_path(f, lambda s: isinstance(s, For) and s.var is var)
    if len(paths) != 1 or any(id(g.var) not in around for g in paths[0]):
        return False
    made = next(s for s in iter_stmts(f) if isinstance(s, For) and s.var is var)
    for s in iter_stmts(f, skip=lambda s: s is made):
        if id(buf) in own_loaded_ids(s) or isinstance(s, Store) and s.buffer is buf or \
                isinstance(s, ExternCall) and any(b is buf for b in s.buffers):
            return False
    return True


def refuse_lost_privacy(nest, old_root, op: str) -> None:
    """After the transform ``op`` turned ``old_root`` into ``nest.root``: raise ScheduleError
    when a parallel or GPU loop whose statements it changed now writes an intermediate that
    its iterations would share. Such an intermediate gets its own storage per iteration only
    where the dependence analysis shows each iteration reading what it wrote itself
    (``insert_allocations``); a transform may leave the analysis unable to show it (a
    ``split_with_tail`` or ``unroll`` inside the loop gives bounds whose value flow isl gives
    up on), and then one buffer would serve all the concurrent iterations: a data race. What
    the analysis showed before a transform that keeps every iteration and its order
    (``KEEPS_ITERATIONS``) still holds after it (``carry_private_facts``).

    Loops the transform did not change (the same statement object) are not analysed again;
    concurrent loops it made (a parallel loop's tail after a split) are analysed for every
    intermediate they write.

    >>> from te import Compute, Var
    >>> from loopnest import LoopNest
    >>> N = Var("N"); T1 = Compute("T1", (N,), lambda i: i * 2.0)
    >>> nest = LoopNest([Compute("T2", (8,), lambda j: T1[N - 1] + T1[0])])
    >>> j = nest.get_loops_for("T2")[0]
    >>> nest.compute_at(nest.buffer("T1"), j); _ = nest.parallelize(j)
    >>> old_root = nest.root
    >>> _ = nest.unroll(nest.get_loops_for("T1")[-1], 2)
    >>> refuse_lost_privacy(nest, old_root, "unroll")   # T1 is still private to each j
    """
    if nest.root is old_root:
        return
    before = {id(f.var): f for f in iter_stmts(old_root)
              if isinstance(f, For) and f.kind in ForKind.CONCURRENT}
    if not before:
        return
    intermediates = {id(b) for b in nest.intermediates}
    for f in iter_stmts(nest.root):
        if not isinstance(f, For) or f.kind not in ForKind.CONCURRENT:
            continue
        old = before.get(id(f.var))
        if old is f or (old is not None and old.kind != f.kind):
            continue
        # the analysis of a buffer that no changed statement touches is as before
        changed = _changed_buffers(old.body, f.body) if old is not None else intermediates
        written = [b for b in stmt_stored_buffers(f.body) if id(b) in intermediates and id(b) in changed]
        carried = None
        for buf in written:
            if private_to(nest, buf, f):
                continue
            if carried is None:
                carried = legality_checks().blocking_buffers(nest, nest.loop(f.var), privatize=False)
            if any(b is buf for b in carried):
                raise ScheduleError(
                    f"{op}: the iterations of the {f.kind} loop {f.var.name} would share one {buf.name}: they "
                    f"write it, and after this change the analysis can no longer show that each iteration reads "
                    f"only the elements of {buf.name} it wrote itself (a data race); leave the loop as it is, "
                    f"or keep {f.var.name} serial")


#: transforms that keep every loop's iterations and the order of every statement instance
#: (a split or an unroll restructures one loop) or change only loop kinds, which no analysis
#: reads: a buffer private to a loop before one of them is private to it after
KEEPS_ITERATIONS = frozenset({"split_with_tail", "split_with_mask", "unroll", "vectorize", "parallelize"})


def carry_private_facts(nest, old_root, op: str) -> None:
    """After the transform ``op`` (in ``KEEPS_ITERATIONS``) turned ``old_root`` into ``nest.root``: keep
    what the analysis showed of ``old_root`` (``nest._private_facts``: intermediates private
    to a loop) for every loop that is still one loop with the same bounds inside the same
    loops, and still holds every access of the buffer (an unroll around it copies them out
    of it). Its iterations, and the order of the instances in each, are as they were, so
    each iteration still reads only what it wrote; the analysis of the new tree may no
    longer show it (isl gives up on a tail's bounds), and need not be asked again.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (4, 8), "float32")
    >>> T1 = Compute("T1", (4, 8), lambda i, j: A[i, j] + 1.0)
    >>> nest = LoopNest([Compute("T2", (4, 8), lambda i, j: T1[i, j] * 2.0)])
    >>> i = nest.get_loops_for("T2")[0]
    >>> nest.compute_at(nest.buffer("T1"), i); _ = nest.parallelize(i)
    >>> legality_checks().privatizable(nest, nest.buffer("T1"), i)     # the analysis shows it
    True
    >>> shown = nest._private_facts[1]
    >>> _ = nest.split_with_tail(nest.get_loops_for("T1")[-1], 3)      # carries it
    >>> nest._private_facts[0] is nest.root and nest._private_facts[1] == shown
    True
    """
    facts = nest._private_facts
    if facts is None or facts[0] is not old_root or nest.root is old_root or not facts[1]:
        return
    if op in _KIND_ONLY:                # the same loops and statements: every fact holds
        nest._private_facts = (nest.root, dict(facts[1]), facts[2])
        return
    buffers = {key[0] for key in facts[1]}
    before = facts[2] if facts[2] is not None else _loop_places(old_root, buffers)[0]
    after, around = _loop_places(nest.root, buffers)
    kept = {key: held for key, held in facts[1].items()
            if before.get(key[1]) is not None and before[key[1]] == after.get(key[1])
            and key[1] in around.get(key[0], ())}
    nest._private_facts = (nest.root, kept, after)


#: the transforms of ``KEEPS_ITERATIONS`` that change only the kind of one loop
_KIND_ONLY = frozenset({"vectorize", "parallelize"})


def _loop_places(root: Stmt, buffers: set) -> tuple[dict, dict]:
    """(id(loop variable) -> (id of its start, id of its stop, the ids of the variables of the
    loops around it), or None for a variable two loops use; id(buffer) -> the ids of the
    variables of the loops around every statement that stores or loads it, for the ids in
    ``buffers``), in one walk."""
    places: dict = {}
    around: dict = {}
    stack: list = [(root, ())]
    while stack:
        s, chain = stack.pop()
        if isinstance(s, ExternCall):
            touched = {id(b) for b in s.buffers}
        else:
            touched = own_loaded_ids(s) & buffers
            if isinstance(s, Store) and id(s.buffer) in buffers:
                touched = touched | {id(s.buffer)}
        for k in touched:
            around[k] = frozenset(chain) if k not in around else around[k].intersection(chain)
        if isinstance(s, For):
            k = id(s.var)
            places[k] = None if k in places else (id(s.start), id(s.stop), chain)
            chain = chain + (k,)
        for x in stmt_children(s):
            stack.append((x, chain))
    return places, around


def _changed_buffers(old: Stmt, new: Stmt) -> set:
    """The ids of the buffers that the statements differing between ``old`` and ``new`` (two
    versions of one loop body) load or store, in either version."""
    if old is new:
        return set()
    if isinstance(old, Block) and isinstance(new, Block) and len(old.stmts) == len(new.stmts):
        return set().union(*(_changed_buffers(a, b) for a, b in zip(old.stmts, new.stmts)))
    if (isinstance(old, For) and isinstance(new, For) and old.var is new.var and old.kind == new.kind
            and old.start is new.start and old.stop is new.stop):
        return _changed_buffers(old.body, new.body)
    return {id(b) for s in (old, new) for b in stmt_loaded_buffers(s) + stmt_stored_buffers(s)}
