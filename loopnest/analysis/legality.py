"""Legality of scheduling transforms, decided from the dependences (``dependences``).

Each ``check_*`` returns None when the transform preserves every dependence and otherwise
raises ``ScheduleError`` naming the loops, the buffer and the dependence, and where it can,
saying where the transform would be legal instead. Checks only read the nest.

>>> from te import Buffer, Reduce, Sum
>>> from loopnest import LoopNest, ScheduleError
>>> A = Buffer("A", (4, 8), "float32")
>>> C = Reduce("C", (4,), Sum(), lambda i, k: A[i, k], (8,))
>>> nest = LoopNest([C]); i, k = nest.get_loops_for(C)
>>> check_parallelize(nest, i)
>>> try:
...     check_parallelize(nest, k)
... except ScheduleError as e:
...     print(e)
cannot parallelize loop k: `C[i] = C[i] + A[i, k]` reads C[i], written by the same statement in the previous iteration of loop k (flow dependence on C carried by loop k); parallelize would be legal on loop i
"""
from __future__ import annotations

import itertools
from collections import OrderedDict
from typing import Any, NoReturn, Sequence

import islpy as isl

from te.queries import fold_int

from ..errors import ScheduleError
from ..loop import LoopIndex
from ..queries import own_loaded_ids, stmt_touches
from ..stmt import Block, Cond, For, LetStmt, Store, iter_stmts
from .dependences import (Dependence, UndecidedDependence, _zero_prefix, buffers_carried_by, carried_by,
                          dependences_in, lex_negative_after, reads_written_in_iteration, reorder_violations,
                          undecided, value_flow)
from .domains import analyze, loop_var_of
from .independent import iterations_independent, privately_computed, same_value_of, unshown_buffers

__all__ = ["refuse", "check_parallelize", "check_vectorize", "check_reorder", "check_fuse",
           "check_distribute", "check_gpu_bind", "blocking_parallel", "blocking_buffers",
           "legal_parallel_loops", "privatizable", "accesses_only", "constant_extent", "loops_text",
           "check_kinds_after", "way_to_loop"]


def _name(loop: Any) -> str:
    return loop if isinstance(loop, str) else loop_var_of(loop).name


def loops_text(loops: Sequence[Any]) -> str:
    """``loop i`` / ``loops i and j`` / ``loops i, j and k``."""
    return _loops_text(loops)


def _loops_text(loops: Sequence[Any]) -> str:
    names = [_name(l) for l in loops]
    if len(names) == 1:
        return f"loop {names[0]}"
    return "loops " + ", ".join(names[:-1]) + " and " + names[-1]


def refuse(action: str, loops: Sequence[Any], *, dep: Dependence | None = None, reason: str | None = None,
           hint: str | None = None, loop: Any = None) -> NoReturn:
    """Raise ScheduleError: ``cannot <action> <loops>: <dependence> (<kind> dependence on
    <buffer>); <reason>; <hint>``.

    >>> refuse("vectorize", ["i"], reason="its extent N is not a constant")
    Traceback (most recent call last):
    ...
    loopnest.errors.ScheduleError: cannot vectorize loop i: its extent N is not a constant
    """
    parts = []
    if dep is not None:
        carried = f" carried by loop {_name(loop)}" if loop is not None and dep.is_carried_by(loop) else ""
        parts.append(f"{dep.describe(loop)} ({dep.kind} dependence on {dep.buffer.name}{carried})")
    if reason:
        parts.append(reason)
    msg = (f"cannot {action.format(loops=_loops_text(loops))}" if "{loops}" in action
           else f"cannot {action} {_loops_text(loops)}")
    if parts:
        msg += ": " + "; ".join(parts)
    if hint:
        msg += "; " + hint
    raise ScheduleError(msg)


# ------------------------------------------------------------------------------------
# parallel loops (parallelize, GPU binding, vectorize)
# ------------------------------------------------------------------------------------
def blocking_buffers(nest: Any, loop: Any, privatize: bool = True) -> list:
    """The buffers whose dependences keep ``loop``'s iterations from running in parallel.

    With ``privatize``, an intermediate buffer used only inside ``loop``, whose every read
    gets its value from the same iteration, does not count: it is allocated inside the loop
    body (``insert_allocations``), so each iteration has its own.

    Where the statements show it (``independent.unshown_buffers`` and
    ``independent.privately_computed``), the answer is read off them; else the dependence
    analysis is asked.
    """
    f = _first_loop(nest, loop)
    if f is not None:
        unshown = unshown_buffers(f, f.var)
        if unshown == [] or (unshown and privatize and all(privatizable(nest, b, loop, ask_isl=False)
                                                           for b in unshown)):
            return []           # read off the statements: no dependence carried, or only private ones
    bufs = buffers_carried_by(way_to_loop(nest, loop), loop)
    if privatize:
        bufs = [b for b in bufs if not privatizable(nest, b, loop)]
    return bufs


def _first_loop(nest_or_root: Any, loop: Any) -> For | None:
    """The first loop of ``loop``'s variable in pre-order (the one ``way_to_loop`` keeps), or None."""
    return _loop_index(nest_or_root).get(loop_var_of(loop))


def _loop_index(nest_or_root: Any) -> LoopIndex:
    index = getattr(nest_or_root, "loop_index", None)
    return index() if index is not None else LoopIndex(getattr(nest_or_root, "root", nest_or_root))


def way_to_loop(nest_or_root: Any, loop: Any) -> Any:
    """The nest's root keeping, in every block and branch on the way to ``loop`` (its first
    loop of that variable in pre-order), only the statement that holds it. The statements
    inside the loop keep their iteration domains and their order, so the dependences the
    loop carries are those of the whole nest, and the analysis skips the rest of it (a
    13-stage pipeline analysed once per stage while vectorizing each). The same tree again
    when nothing is left out, so its cached analysis is found. KeyError when the loop is not
    in the nest.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (4,), "float32")
    >>> B = Compute("B", (4,), lambda i: A[i] + 1.0)
    >>> nest = LoopNest([B, Compute("C", (4,), lambda i: B[i] * 2.0)])
    >>> print(way_to_loop(nest, nest.get_loops_for("C")[0]))
    for (int i_1 = 0; i_1 < 4; i_1++) {
      C[i_1] = B[i_1] * 2.0f;
    }
    """
    root = getattr(nest_or_root, "root", nest_or_root)
    var = loop_var_of(loop)
    kept = _keep_way(root, var)
    if kept is None:
        raise KeyError(f"loop {var.name} is not in this statement tree")
    return kept


#: the last trees ``accesses_only`` made, so that the analyses of them are found again
_ACCESSES_ONLY: "OrderedDict[tuple[int, int], tuple[Any, Any, Any]]" = OrderedDict()


def accesses_only(nest_or_root: Any, buffer: Any) -> Any:
    """The nest's root keeping only the statements that load or store ``buffer``, with the
    loops, branches and lets around them (None when no statement does). The accesses keep
    their iteration domains and their order, so the flow of ``buffer``'s values is that of
    the whole nest, and its analysis skips the rest of a long pipeline.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (4,), "float32")
    >>> B = Compute("B", (4,), lambda i: A[i] + 1.0)
    >>> nest = LoopNest([B, Compute("C", (4,), lambda i: A[i] * 2.0)])
    >>> print(accesses_only(nest, B))
    for (int i = 0; i < 4; i++) {
      B[i] = A[i] + 1.0f;
    }
    """
    root = getattr(nest_or_root, "root", nest_or_root)
    key = (id(root), id(buffer))
    hit = _ACCESSES_ONLY.get(key)
    if hit is not None and hit[0] is root and hit[1] is buffer:
        _ACCESSES_ONLY.move_to_end(key)
        return hit[2]
    kept = _keep_accesses(root, buffer)
    _ACCESSES_ONLY[key] = (root, buffer, kept)      # holding both keeps their ids from reuse
    while len(_ACCESSES_ONLY) > 32:
        _ACCESSES_ONLY.popitem(last=False)
    return kept


def _keep_accesses(s: Any, buffer: Any) -> Any:
    if isinstance(s, Block):
        kept = [k for k in (_keep_accesses(x, buffer) for x in s.stmts) if k is not None]
        if not kept:
            return None
        return s if len(kept) == len(s.stmts) and all(a is b for a, b in zip(kept, s.stmts)) else Block(tuple(kept))
    if isinstance(s, (For, Cond, LetStmt)) and id(buffer) in own_loaded_ids(s):
        return s                            # a bound, condition or value reads it: keep it all
    if isinstance(s, (For, LetStmt)):
        body = _keep_accesses(s.body, buffer)
        return None if body is None else (s if body is s.body else s.replace(body=body))
    if isinstance(s, Cond):
        then = _keep_accesses(s.then, buffer)
        otherwise = _keep_accesses(s.otherwise, buffer) if s.otherwise is not None else None
        if then is None and otherwise is None:
            return None
        if then is s.then and otherwise is s.otherwise:
            return s
        return s.replace(then=Block(()) if then is None else then, otherwise=otherwise)
    if isinstance(s, Store):
        return s if s.buffer is buffer or id(buffer) in own_loaded_ids(s) else None
    return s if stmt_touches(s, buffer) else None


def _keep_way(s: Any, var: Any) -> Any:
    if isinstance(s, For):
        if s.var is var:
            return s
        body = _keep_way(s.body, var)
        return None if body is None else s.replace(body=body)
    if isinstance(s, Block):
        for x in s.stmts:
            kept = _keep_way(x, var)
            if kept is not None:
                return s if len(s.stmts) == 1 and kept is x else Block((kept,))
        return None
    if isinstance(s, Cond):
        then = _keep_way(s.then, var)
        if then is not None:
            return s.replace(then=then, otherwise=None)
        otherwise = _keep_way(s.otherwise, var) if s.otherwise is not None else None
        return None if otherwise is None else s.replace(then=Block(()), otherwise=otherwise)
    if isinstance(s, LetStmt):
        body = _keep_way(s.body, var)
        return None if body is None else s.replace(body=body)
    return None


def blocking_parallel(nest: Any, loop: Any, privatize: bool = True) -> list[Dependence]:
    """The first dependence (a one-element list, or []) that keeps ``loop``'s iterations
    from running in parallel (see ``blocking_buffers``)."""
    bufs = blocking_buffers(nest, loop, privatize)
    if not bufs:
        return []
    root = way_to_loop(nest, loop)
    unsure = undecided(root)
    decided = [b for b in bufs if id(b) not in unsure]
    if not decided:
        return [UndecidedDependence(bufs[0])]
    deps = carried_by(root, loop, buffers=decided[:1], first=True)
    if not deps:  # cannot happen: the fast query and the pairwise one agree
        raise AssertionError(f"dependence analysis: no carried dependence found on {decided[0].name}")
    return deps


def privatizable(nest: Any, buffer: Any, loop: Any, ask_isl: bool = True) -> bool:
    """True when the intermediate ``buffer`` may get fresh storage in every iteration of
    ``loop``: all its accesses are inside the loop and every value read comes from a write
    in the same iteration of ``loop`` (and of each loop around it). Then no value of the
    buffer flows between iterations: ``insert_allocations`` may put its Allocate/Free
    inside the loop body, and a dependence on it does not keep the loop from running in
    parallel. Where indices or bounds are not affine, the answer errs towards False. It is
    read off the statements where they show it (``independent.privately_computed``), else
    asked of isl's value flow, unless ``ask_isl`` is False. What was shown is kept with the
    nest, through later transforms (``privacy.carry_private_facts``).

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (4, 8), "float32")
    >>> T1 = Compute("T1", (4, 8), lambda i, j: A[i, j] + 1.0)
    >>> same = LoopNest([Compute("T2", (4,), lambda i: T1[i, 0] * 2.0)])
    >>> fused = same.fuse([same.get_loops_for("T1")[0], same.get_loops_for("T2")[0]])
    >>> privatizable(same, same.buffer("T1"), fused)
    True
    >>> earlier = LoopNest([Compute("T2", (4,), lambda i: T1[i / 2, 0] * 2.0)])
    >>> fused = earlier.fuse([earlier.get_loops_for("T1")[0], earlier.get_loops_for("T2")[0]])
    >>> privatizable(earlier, earlier.buffer("T1"), fused)    # iteration i reads row i / 2
    False
    """
    intermediates = getattr(nest, "intermediates", None)
    if intermediates is None or not any(b is buffer for b in intermediates):
        return False
    # a nest keeps what the analysis showed of its root (``privacy.carry_private_facts``)
    root = getattr(nest, "root", None)
    keeps = root is not None and hasattr(nest, "_private_facts")
    facts = nest._private_facts if keeps else None
    var = loop_var_of(loop)
    key = (id(buffer), id(var))
    if facts is not None and facts[0] is root and key in facts[1]:
        return True
    f = _first_loop(nest, loop) if root is not None else None
    if not (f is not None and privately_computed(nest, buffer, f)) and \
            not (ask_isl and _privatizable(nest, buffer, loop)):
        return False
    if keeps:
        if facts is None or facts[0] is not root:
            facts = nest._private_facts = (root, {}, None)
        facts[1][key] = (buffer, var)     # held, so that the ids stay theirs
    return True


def _privatizable(nest: Any, buffer: Any, loop: Any) -> bool:
    root = accesses_only(nest, buffer)     # the same value flow, a smaller analysis
    if root is None:
        return False
    an = analyze(root)
    if id(loop_var_of(loop)) not in an.loops:
        return False                        # no access inside the loop, or not a loop of the nest
    info = an.loop_info(loop)
    if not all(info.contains(a.instance) for a in an.accesses_of(buffer)):
        return False
    if reads_written_in_iteration(root, buffer, loop):
        return True
    c = info.depth
    bad = []

    def check(m):
        sd = m.get_space().dim(isl.dim_type.in_)
        td = m.get_space().dim(isl.dim_type.out)
        if sd <= c or td <= c:
            bad.append(m)
            return
        # writer and reader in the same iteration of ``loop`` and of every loop around it
        for d in range(c + 1):
            if not (m.order_lt(isl.dim_type.in_, d, isl.dim_type.out, d).is_empty()
                    and m.order_gt(isl.dim_type.in_, d, isl.dim_type.out, d).is_empty()):
                bad.append(m)
                return
    flow = value_flow(root, buffer)
    if flow is None:
        return False        # undecided: keep the buffer shared
    flow.foreach_map(check)
    return not bad


def legal_parallel_loops(nest: Any, near: Any = None, privatize: bool = True) -> list:
    """The loops (For statements) carrying no blocking dependence; with ``near``, only the
    loops around ``near`` and inside it."""
    an = analyze(nest)
    fors = [info.loop for info in an.loops.values()]
    if near is not None:
        info = an.loop_info(near)
        fors = [f for f in fors if f in info.loops or _inside(an, f, info)]
    return [f for f in fors if not blocking_buffers(nest, f, privatize)]


def _inside(an, f, info) -> bool:
    fi = an.loops[id(f.var)]
    return fi.depth > info.depth and fi.prefix[:info.depth + 1] == info.prefix


def _hint(action: str, fors: list, loop: Any) -> str | None:
    names = [f.var.name for f in fors if f.var is not loop_var_of(loop)]
    if not names:
        return None
    return f"{action} would be legal on loop{'s' if len(names) > 1 else ''} {', '.join(names)}"


def check_parallelize(nest: Any, loop: Any) -> None:
    """Legal when no dependence is carried by ``loop`` (no iteration reads or writes what
    another one writes), up to intermediates private to one iteration."""
    deps = blocking_parallel(nest, loop)
    if deps:
        refuse("parallelize", [loop], dep=deps[0], loop=loop,
               hint=_hint("parallelize", legal_parallel_loops(nest, loop), loop))


def check_gpu_bind(nest: Any, loop: Any, label: str) -> None:
    """GPU blocks and threads run in parallel: the same condition as ``check_parallelize``."""
    deps = blocking_parallel(nest, loop)
    if deps:
        refuse(f"bind {{loops}} to {label}", [loop], dep=deps[0], loop=loop,
               hint=_hint("GPU binding", legal_parallel_loops(nest, loop), loop))


def constant_extent(f: Any) -> int | None:
    """The trip count of a For when it is a constant."""
    from te.simplify import simplify
    n = fold_int(f.stop - f.start)
    if n is None:
        n = fold_int(simplify(f.stop - f.start))
    return n


def check_vectorize(nest: Any, loop: Any, check_dependences: bool = True) -> None:
    """Legal when ``loop`` has a constant extent of at least 1 and carries no dependence
    (the spec: no lane may write what another lane reads, nor two lanes one element)."""
    f = _first_loop(nest, loop)
    if f is None:
        raise KeyError(f"loop {loop_var_of(loop).name} is not in this statement tree")
    n = constant_extent(f)
    if n is None:
        from te.printer import expr_to_str
        refuse("vectorize", [loop], reason=f"its extent {expr_to_str(f.extent)} is not a constant; "
               "split it by a constant factor and vectorize the inner loop")
    if n < 1:
        refuse("vectorize", [loop], reason=f"its extent is {n}; a vectorized loop needs at least 1 iteration")
    if f.kind in ("gpu_block", "gpu_thread"):
        refuse("vectorize", [loop], reason=f"it is bound to {f.kind}")
    if not check_dependences:
        return
    deps = blocking_parallel(nest, loop, privatize=False)
    if deps:
        legal = [g for g in legal_parallel_loops(nest, loop, privatize=False) if constant_extent(g)]
        refuse("vectorize", [loop], dep=deps[0], loop=loop, hint=_hint("vectorize", legal, loop))


def check_kinds_after(nest: Any, new_root: Any, loops: Sequence[Any], op: str, change: str = "once moved") -> None:
    """After a transform that moves loops (reorder, tile, ...): every parallel, vectorized
    or GPU loop among ``loops`` (Fors, handles or Vars) must still carry no dependence in
    ``new_root`` (a dependence of distance (1, 1) is carried by whichever loop is outer).
    Raises ScheduleError prefixed with ``op`` and saying what happened to the loop
    (``change``: "once moved"; slicing passes "with loop i sliced"); ``nest`` is not modified.
    """
    kinds = ("parallel", "vectorized", "gpu_block", "gpu_thread")
    # the loops' kinds come from the tree itself: most moves involve no special loop, and
    # then no analysis of the new tree is needed
    fors: dict[int, For] = {}
    for s in iter_stmts(new_root):
        if isinstance(s, For):
            fors.setdefault(id(s.var), s)     # the first in pre-order, as the analysis keeps
    moving = []
    for lp in loops:
        v = loop_var_of(lp)
        if id(v) not in fors:
            raise KeyError(f"loop {v.name} is not in this statement tree")
        moving.append(fors[id(v)])
    moving = [f for f in moving if f.kind in kinds]
    if not moving:
        return
    tmp = nest.copy()
    tmp.root = new_root
    for f in moving:
        try:
            if f.kind == "parallel":
                check_parallelize(tmp, f.var)
            elif f.kind == "vectorized":
                check_vectorize(tmp, f.var)
            else:
                check_gpu_bind(tmp, f.var, f"{f.kind}.{'xyz'[f.axis or 0]}")
        except ScheduleError as e:
            raise ScheduleError(f"{op}: loop {f.var.name} is {f.kind}, and {change}, {e}") from None


# ------------------------------------------------------------------------------------
# reorder
# ------------------------------------------------------------------------------------
def _reorder_violation(deps, outer, band, order):
    for d in deps:
        s = lex_negative_after(d, outer, band, order)
        if not s.is_empty():
            return d, s
    return None


def _band_moves_freely(nest: Any, loops: Sequence[Any]) -> bool:
    """Whether every order of the band ``loops`` is legal by the statements' shape: every
    dependence inside its outermost loop has distance 0 along all of them but at most one
    (``same_value_of``), so a permuted distance vector still starts with its one entry that
    may be nonzero, which was positive."""
    index = _loop_index(nest)
    chains = [index.enclosing(loop_var_of(l)) for l in loops]
    if not all(chains):
        return False
    outer = min(chains, key=len)[-1]
    return sum(not same_value_of(outer, chain[-1].var) for chain in chains) <= 1


def _pairs(an, accs):
    from .dependences import _dependences_among
    return _dependences_among(an, accs)


def check_reorder(nest: Any, loops: Sequence[Any], permutation: Sequence[int]) -> None:
    """Legal when every dependence between iterations of the band stays lexicographically
    positive: its distance vector, permuted, must not start with a negative entry.

    ``loops`` must be perfectly nested (checked by the transform); ``permutation[d]`` is the
    index in ``loops`` of the loop placed at the d-th band position (outermost first).
    """
    if _band_moves_freely(nest, loops):
        return
    an = analyze(nest)
    infos = [an.loop_info(l) for l in loops]
    depths = [i.depth for i in infos]
    band = sorted(depths)
    order = [depths[p] for p in permutation]
    if order == band:
        return
    outer_info = min(infos, key=lambda i: i.depth)
    violated = reorder_violations(nest, outer_info.loop, band, order)
    if not violated:
        return
    unsure = undecided(nest)
    if all(id(b) in unsure for b, _ in violated):
        refuse("reorder", list(loops), dep=UndecidedDependence(violated[0][0]),
               reason="a dependence the new order would reverse cannot be ruled out")
    violated = [v for v in violated if id(v[0]) not in unsure]
    deps = list(_pairs(an, [a for a in an.accesses
                            if outer_info.contains(a.instance) and a.buffer is violated[0][0]]))
    bad = _reorder_violation(deps, band[0], band, order)
    if bad is None:  # cannot happen: the fast query and the pairwise one agree
        raise AssertionError(f"dependence analysis: no reversed dependence found on {violated[0][0].name}")
    dep, s = bad
    by_depth = {i.depth: i.loop.var.name for i in infos}
    old_names = [by_depth[d] for d in band]
    new_names = [by_depth[d] for d in order]
    reason = None
    p = s.sample_point()
    if not p.is_void():
        vec = {d: p.get_coordinate_val(isl.dim_type.set, d).to_python() for d in band}
        before = ", ".join(str(vec[d]) for d in band)
        after = ", ".join(str(vec[d]) for d in order)
        effect = {"flow": f"the read {dep.dst.text()} would run before the write {dep.src.text()} it needs",
                  "anti": f"the write {dep.dst.text()} would run before the read {dep.src.text()} of the old value",
                  "output": f"the two writes of {dep.dst.text()} would run in the opposite order"}[dep.kind]
        reason = (f"its distance ({before}) over ({', '.join(old_names)}) would become ({after}) over "
                  f"({', '.join(new_names)}): {effect}")
    hint = None
    if len(band) <= 4:
        legal = []
        for perm in itertools.permutations(band):
            if list(perm) != band and not reorder_violations(nest, outer_info.loop, band, list(perm)):
                legal.append("(" + ", ".join(by_depth[d] for d in perm) + ")")
        hint = ("legal orders: " + ", ".join(legal)) if legal else "no other order of these loops is legal"
    msg = f"cannot reorder loops ({', '.join(old_names)}) to ({', '.join(new_names)}): {dep.describe()} " \
          f"({dep.kind} dependence on {dep.buffer.name})"
    if reason:
        msg += "; " + reason
    if hint:
        msg += "; " + hint
    raise ScheduleError(msg)


# ------------------------------------------------------------------------------------
# fuse, distribute
# ------------------------------------------------------------------------------------
def check_fuse(nest: Any, loops: Sequence[Any]) -> None:
    """Legal when no iteration of a later loop depends on a later iteration of an earlier
    loop: for every dependence from loop a's body (iteration x) to loop b's body (iteration
    y), a before b, x <= y. The loops are siblings in program order."""
    an = analyze(nest)
    infos = [an.loop_info(l) for l in loops]
    deps = list(_pairs(an, [a for a in an.accesses if any(i.contains(a.instance) for i in infos)]))
    c = infos[0].depth
    for ai, a in enumerate(infos):
        for b in infos[ai + 1:]:
            for d in deps:
                if not (a.contains(d.src.instance) and b.contains(d.dst.instance)):
                    continue
                si = d.src.instance
                # fused loops share their bounds, so the variables' values compare iterations
                bad = d.relation.order_gt(isl.dim_type.in_, c, isl.dim_type.out, c)
                if bad.is_empty():
                    continue
                p = bad.wrap().sample_point()
                ex = ""
                if not p.is_void():
                    x = p.get_coordinate_val(isl.dim_type.set, c).to_python()
                    y = p.get_coordinate_val(isl.dim_type.set, si.depth + c).to_python()
                    ex = f" (e.g. {b.loop.var.name} = {y} needs {a.loop.var.name} = {x})"
                refuse("fuse", loops, dep=d,
                       reason=f"after fusion an iteration of loop {b.loop.var.name} would run before the later "
                              f"iteration of loop {a.loop.var.name} it depends on{ex}")


def check_distribute(nest: Any, loop: Any) -> None:
    """Legal when no dependence goes from a statement of the body to an earlier statement
    of the body within one iteration of the loops enclosing ``loop`` (so in a later
    iteration of ``loop``): distribution runs every iteration of each statement before the
    next statement. Dependences carried by an enclosing loop are kept: every statement of
    one of its iterations still runs before the next iteration."""
    f = _first_loop(nest, loop)
    if f is not None and iterations_independent(f):     # no dependence between two iterations
        return
    an = analyze(nest)
    info = an.loop_info(loop)
    backwards = lambda x, y: info.child_of(x.instance) > info.child_of(y.instance)  # noqa: E731
    for d in dependences_in(nest, loop, pairs=backwards):
        a, b = info.child_of(d.src.instance), info.child_of(d.dst.instance)
        if _within_outer_iteration(d, info.depth):
            refuse("distribute", [loop], dep=d, loop=loop,
                   reason=f"it goes from statement {a} of the body back to statement {b}: distributed, every "
                          f"iteration of statement {b} would run before statement {a}; keep them in one loop")


def _within_outer_iteration(dep: Dependence, depth: int) -> bool:
    """Whether some pair of ``dep`` has the same iteration of the ``depth`` outermost loops
    (those enclosing the loop at ``depth``, which encloses both accesses)."""
    return not _zero_prefix(dep.distance_set(depth), depth).is_empty()
