"""store_at: the loop whose one iteration a tensor's storage is sized for.

``compute_at(T, loop)`` stores T at ``loop``; ``store_at(T, outer)`` hoists the storage to
an enclosing loop (or sinks it back). ``prepare_for_codegen`` (the pass ``shrink_storage``)
then gives T a buffer of the size of the region one iteration of that loop touches, its
indices rebased to the region's start, allocated once outside the loop, or per iteration
(per thread) when the loop is parallel.

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> A = Buffer("A", (8, 10), "float32")
>>> B = Compute("B", (8, 10), lambda i, j: A[i, j] * 2.0)
>>> C = Compute("C", (8, 8), lambda i, j: B[i, j] + B[i, j + 2])
>>> nest = LoopNest([C])
>>> i, j = nest.get_loops_for(C)
>>> nest.compute_at(B, i)
>>> print(nest.prepare_for_codegen())
float32 B[1, 10]; // alloc
for (int i_1 = 0; i_1 < 8; i_1++) {
  for (int j_2 = 0; j_2 < 10; j_2++) {
    B[j_2] = A[i_1 * 10 + j_2] * 2.0f;
  }
  for (int j_1 = 0; j_1 < 8; j_1++) {
    C[i_1 * 8 + j_1] = B[j_1] + B[j_1 + 2];
  }
}
free(B);
"""
from __future__ import annotations

from te.expr import Expr, IntImm
from te.queries import fold_int, free_vars, has_load
from te.tensor import Buffer

from ..errors import ScheduleError
from ..kinds import ForKind
from ..lazy_analysis import bounds_inference, legality_checks
from ..queries import stmt_touches
from ..stmt import For, Stmt, Store, iter_stmts, stmt_exprs
from ._rewrite import loop_path, replace_loop
from .cache import _RedirectStmt, _size_vars

__all__ = ["store_at", "shrink_storage", "storage_loop"]

#: loop kinds whose iterations may run at the same time: a buffer stored at (or inside)
#: one is allocated per iteration
_CONCURRENT = (ForKind.PARALLEL, ForKind.GPU_BLOCK, ForKind.GPU_THREAD)


def _touches_itself(s: Stmt, buf) -> bool:
    """Whether the statement itself (not its children) stores to or loads ``buf``."""
    return (isinstance(s, Store) and s.buffer is buf) or has_load(stmt_exprs(s), buf)


def _accesses_outside(root: Stmt, f: For, buf) -> Stmt | None:
    """A statement outside loop ``f`` that accesses ``buf`` (None when all are inside)."""
    return next((s for s in iter_stmts(root, skip=lambda s: s is f) if _touches_itself(s, buf)), None)


def _innermost_enclosing(root: Stmt, buf) -> For | None:
    """The innermost loop of ``root`` around every access of ``buf`` (None: no such loop)."""
    best = None
    for f in (s for s in iter_stmts(root) if isinstance(s, For)):
        if stmt_touches(f.body, buf) and _accesses_outside(root, f, buf) is None:
            best = f    # pre-order: a later hit is nested in an earlier one
    return best


def _parallel_inside(nest, f: For, buf) -> For | None:
    """The innermost parallel or GPU loop inside ``f`` whose iterations carry a dependence
    on ``buf`` (they were made parallel because each gets its own ``buf``), or None."""
    carried_by = legality_checks().buffers_carried_by
    out = None
    for g in iter_stmts(f.body):
        if isinstance(g, For) and g.kind in _CONCURRENT and stmt_touches(g.body, buf) \
                and any(b is buf for b in carried_by(nest, g.var)):
            out = g
    return out


def storage_loop(nest, buf) -> For | None:
    """The loop ``buf`` is stored at (``compute_at`` / ``store_at``), None for the whole
    buffer. A recorded loop that a later transform replaced (a split, a fuse) falls back
    to the innermost loop around every access of ``buf``; a parallel loop inside it whose
    iterations each need their own ``buf`` (parallelized after ``store_at``) takes its place.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (4, 6), "float32")
    >>> B = Compute("B", (4, 6), lambda i, j: A[i, j] + 1.0)
    >>> nest = LoopNest([Compute("C", (4, 6), lambda i, j: B[i, j] * 2.0)])
    >>> storage_loop(nest, B) is None
    True
    >>> nest.compute_at(B, nest.get_loops_for("C")[0]); storage_loop(nest, B).var.name
    'i_1'
    """
    if buf.name not in nest._store_at:
        return None
    var = nest._store_at[buf.name]
    if var is None:
        return None
    f = nest.loop_index().get(var)
    if f is None or _accesses_outside(nest.root, f, buf) is not None:
        f = _innermost_enclosing(nest.root, buf)
    inner = _parallel_inside(nest, f, buf) if f is not None else None
    return inner or f


def store_at(nest, buf: Buffer, loop) -> None:
    """Size the storage of the intermediate ``buf`` for one iteration of ``loop`` (``None``:
    the whole buffer, as for a tensor not computed at a loop).

    ``compute_at(B, loop)`` stores B at ``loop``: its buffer holds the region one iteration
    of ``loop`` touches, allocated once outside ``loop`` and reused by each iteration. A
    loop further out (Halide's ``store_at``) makes the buffer hold the region of all the
    iterations of the compute loop inside one iteration of it; a loop further in sinks
    the storage again. The buffer is made by ``prepare_for_codegen`` (pass
    ``shrink_storage``): its shape is the largest extent of the region from bounds
    inference (a constant where that is bounded by one), its indices are rebased to the
    region's start, and it is allocated per iteration of the innermost parallel or GPU
    loop around or at ``loop``, else once outside. A dimension whose extent is not
    bounded keeps its full size, and so does a buffer of symbolic size inside GPU-bound
    loops (``codegen.cuda`` shares one such buffer between the threads).

    Legality: ``buf`` is an intermediate, every access of ``buf`` is inside ``loop``,
    ``loop`` is not vectorized, each iteration of ``loop`` reads only values of ``buf``
    that it wrote itself (``privatizable``), and no parallel loop inside ``loop`` relies on
    its iterations having their own ``buf``; otherwise ScheduleError, the nest unchanged.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (8, 10), "float32")
    >>> B = Compute("B", (8, 10), lambda i, j: A[i, j] * 2.0)
    >>> nest = LoopNest([Compute("C", (8, 8), lambda i, j: B[i, j] + B[i, j + 2])])
    >>> io, ii = nest.split_with_tail(nest.get_loops_for("C")[0], 4)[:2]
    >>> nest.compute_at(B, ii); nest.store_at(B, io)
    >>> print(nest.prepare_for_codegen().root.stmts[0])
    float32 B[4, 10]; // alloc
    """
    if not any(b is buf for b in nest.intermediates):
        raise ScheduleError(f"cannot store {buf.name} at a loop: {buf.name} is not an intermediate of this nest "
                            "(outputs and inputs keep their full storage)")
    if loop is None:
        nest._store_at[buf.name] = None
        return
    f = loop.stmt
    where = f"cannot store {buf.name} at loop {loop.name}"
    if not stmt_touches(f.body, buf):
        raise ScheduleError(f"{where}: nothing inside loop {loop.name} accesses {buf.name}")
    out = _accesses_outside(nest.root, f, buf)
    if out is not None:
        line = str(out).strip().splitlines()[0]
        raise ScheduleError(f"{where}: {buf.name} is also accessed outside the loop, by `{line}`; store it at a "
                            f"loop around every access of {buf.name}")
    if f.kind == ForKind.VECTORIZED:
        raise ScheduleError(f"{where}: the loop is vectorized (its lanes cannot have storage of their own); "
                            "store it at an enclosing loop")
    if not legality_checks().privatizable(nest, buf, f.var):
        raise ScheduleError(f"{where}: an iteration of loop {loop.name} reads values of {buf.name} that another "
                            f"iteration (or no iteration) wrote, which storage for one iteration would lose; "
                            f"store it at an enclosing loop, or compute {buf.name} at loop {loop.name} first")
    inner = _parallel_inside(nest, f, buf)
    if inner is not None:
        raise ScheduleError(f"{where}: the {inner.kind} loop {inner.var.name} inside it needs a {buf.name} of its "
                            f"own in each iteration (its iterations write the same elements); store {buf.name} at "
                            f"loop {inner.var.name} or a loop inside it")
    nest._store_at[buf.name] = f.var


def _const(x) -> int | None:
    return x if isinstance(x, int) else fold_int(x)


def _local_shape(nest, buf, bounds) -> tuple[list, list] | None:
    """The shape and region start of ``buf``'s storage for ``bounds``; None when no
    dimension shrinks."""
    sizes = _size_vars(nest)
    shape, mins, smaller = [], [], False
    for b, dim in zip(bounds, buf.dims):
        s = b.extent_bound
        if s is None or isinstance(s, Expr) and any(id(v) not in sizes for v in free_vars([s])):
            shape.append(dim)
            mins.append(IntImm(0, dim.dtype))
            continue
        c, d = _const(s), _const(dim)
        if c is not None and d is not None and c >= d:
            shape.append(dim)
            mins.append(IntImm(0, dim.dtype))
            continue
        smaller = smaller or c is not None or not (isinstance(s, Expr) and s is dim)
        shape.append(s)
        mins.append(b.min)
    return (shape, mins) if smaller else None


def shrink_storage(nest, root: Stmt) -> Stmt:
    """The pass giving each intermediate stored at a loop (``store_at``) a buffer of the
    size of the region one iteration of that loop touches, its indices rebased; the new
    buffer replaces the old one in ``nest.intermediates`` (and ``nest.buffers``) and is
    noted in ``nest._local_storage`` for ``insert_allocations``. Runs on ``nest.root``.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (4, 6), "float32")
    >>> B = Compute("B", (4, 6), lambda i, j: A[i, j] + 1.0)
    >>> nest = LoopNest([Compute("C", (4, 6), lambda i, j: B[i, j] * 2.0)])
    >>> nest.compute_at(B, nest.get_loops_for("C")[0])
    >>> print(shrink_storage(nest, nest.root))
    for (int i_1 = 0; i_1 < 4; i_1++) {
      for (int j_2 = 0; j_2 < 6; j_2++) {
        B[0, j_2] = A[i_1, j_2] + 1.0f;
      }
      for (int j_1 = 0; j_1 < 6; j_1++) {
        C[i_1, j_1] = B[0, j_1] * 2.0f;
      }
    }
    """
    if not nest._store_at:
        return root
    if root is not nest.root:
        raise ValueError("shrink_storage runs on the nest's own statements (before other passes)")
    inference = bounds_inference()
    privatizable = legality_checks().privatizable
    plans = []
    for buf in nest.intermediates:
        if buf.layout is not None or getattr(buf, "scope", "global") != "global":
            continue
        f = storage_loop(nest, buf)
        if f is None or f.kind == ForKind.VECTORIZED or not privatizable(nest, buf, f.var):
            continue
        chain = next(iter(loop_path(root, lambda s: s is f))) + [f]
        ranges = {g.var: (g.start, g.stop) for g in chain}
        bounds = inference.access_bounds(f.body, buf, [g.var for g in chain], outer_ranges=ranges)
        plan = _local_shape(nest, buf, bounds) if bounds is not None else None
        if plan is not None:
            concurrent = [k for k, g in enumerate(chain) if g.kind in _CONCURRENT]
            enter = frozenset(g.var for g in chain[:concurrent[-1] + 1]) if concurrent else frozenset()
            gpu = any(g.kind in (ForKind.GPU_BLOCK, ForKind.GPU_THREAD) for g in chain[:len(enter)])
            if gpu and any(_const(x) is None for x in plan[0]):
                # a GPU kernel cannot size per-thread storage at launch: codegen.cuda shares
                # one buffer between threads, which is exact only for the full-size buffer
                continue
            plans.append((buf, f.var, enter, *plan))
    for buf, var, enter, shape, mins in plans:
        local = Buffer(buf.name, shape, buf.dtype)
        redirect = _RedirectStmt(buf, local, mins)
        root = replace_loop(root, var, lambda g: g.replace(body=redirect.visit(g.body)))
        nest.intermediates = [local if b is buf else b for b in nest.intermediates]
        nest.buffers[buf.name] = local
        nest._local_storage[id(local)] = enter
    return root


def allocate_inside(nest, buf, f: For) -> bool | None:
    """For a buffer ``shrink_storage`` made, whether its Allocate goes inside loop ``f``:
    per iteration of the innermost parallel or GPU loop around or at its storage loop, else
    once outside every loop; None for other buffers."""
    if id(buf) not in nest._local_storage:
        return None
    return f.var in nest._local_storage[id(buf)]
