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

from dataclasses import dataclass

from te.expr import GT, Expr, ExprMutator, IntImm, Load, Select, Var, substitute
from te.queries import fold_int, free_vars, has_load
from te.tensor import Buffer

from ..errors import ScheduleError
from ..kinds import ForKind
from ..lazy_analysis import bounds_inference, legality_checks
from ..queries import own_loaded_ids, stmt_touches
from ..stmt import For, Stmt, StmtMutator, Store, iter_stmts, stmt_children, stmt_exprs
from ._rewrite import add, floormod_c, loop_path, replace_loop, sub, tidy
from .cache import _RedirectStmt, _size_vars

__all__ = ["store_at", "shrink_storage", "storage_loop", "Slide"]

#: loop kinds whose iterations may run at the same time: a buffer stored at (or inside)
#: one is allocated per iteration
_CONCURRENT = ForKind.CONCURRENT


def _touches_itself(s: Stmt, buf) -> bool:
    """Whether the statement itself (not its children) stores to or loads ``buf``."""
    return (isinstance(s, Store) and s.buffer is buf) or id(buf) in own_loaded_ids(s)


def _accesses_outside(root: Stmt, f: For, buf) -> Stmt | None:
    """A statement outside loop ``f`` that accesses ``buf`` (None when all are inside)."""
    return next((s for s in iter_stmts(root, skip=lambda s: s is f) if _touches_itself(s, buf)), None)


def _around_every_access(root: Stmt, buf) -> set[int] | None:
    """The ids of the statements of ``root`` that every access of ``buf`` is in (the statement
    itself included): a loop ``f`` has ``_accesses_outside(root, f, buf) is None`` exactly
    when its id is in the set. None when nothing accesses ``buf`` (every loop qualifies).
    One walk, where asking ``_accesses_outside`` of every loop walks the tree per loop."""
    common: set[int] | None = None
    stack: list = [(root, ())]
    while stack:
        s, path = stack.pop()
        path = path + (id(s),)
        if _touches_itself(s, buf):
            common = set(path) if common is None else common.intersection(path)
        for x in stmt_children(s):
            stack.append((x, path))
    return common


def _innermost_enclosing(root: Stmt, buf) -> For | None:
    """The innermost loop of ``root`` around every access of ``buf`` (None: no such loop)."""
    around = _around_every_access(root, buf)
    best = None
    for f in (s for s in iter_stmts(root) if isinstance(s, For)):
        if (around is None or id(f) in around) and stmt_touches(f.body, buf):
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
    the storage again. Sliding window and storage folding (Halide's): when the region
    of one iteration of the compute loop slides along one dimension by fewer elements than
    its size as that (serial) loop advances, each iteration computes only the elements the
    previous one did not, and that dimension is stored modulo the window's size
    (``loopnest.transforms.fold_storage``). The buffer is made by ``prepare_for_codegen`` (pass
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
        slide = _find_slide(root, buf, f)
        if slide is not None:
            shape, mins = plan or (list(buf.dims), [IntImm(0, d.dtype) for d in buf.dims])
            shape = [slide.window if k == slide.dim else s for k, s in enumerate(shape)]
            plan = (shape, mins)
        if plan is not None:
            concurrent = [k for k, g in enumerate(chain) if g.kind in _CONCURRENT]
            enter = frozenset(g.var for g in chain[:concurrent[-1] + 1]) if concurrent else frozenset()
            gpu = any(g.kind in (ForKind.GPU_BLOCK, ForKind.GPU_THREAD) for g in chain[:len(enter)])
            if gpu and any(_const(x) is None for x in plan[0]):
                # a GPU kernel cannot size per-thread storage at launch: codegen.cuda shares
                # one buffer between threads, which is exact only for the full-size buffer
                continue
            plans.append((buf, f.var, enter, slide, *plan))
    redirects: dict = {}      # one walk of each storage loop's body moves all its buffers
    for buf, var, enter, slide, shape, mins in plans:
        local = Buffer(buf.name, shape, buf.dtype)
        if slide is not None:
            root = _apply_slide(root, var, slide, buf, local, mins)
        elif var in redirects:
            redirects[var].also(buf, local, mins)
        else:
            redirects[var] = _RedirectStmt(buf, local, mins)
        nest.intermediates = [local if b is buf else b for b in nest.intermediates]
        nest.buffers[buf.name] = local
        nest._local_storage[id(local)] = enter
    for var, redirect in redirects.items():
        root = replace_loop(root, var, lambda g, redirect=redirect: g.replace(body=redirect.visit(g.body)))
    return root


def allocate_inside(nest, buf, f: For) -> bool | None:
    """For a buffer ``shrink_storage`` made, whether its Allocate goes inside loop ``f``:
    per iteration of the innermost parallel or GPU loop around or at its storage loop, else
    once outside every loop; None for other buffers."""
    if id(buf) not in nest._local_storage:
        return None
    return f.var in nest._local_storage[id(buf)]


# ------------------------------------------------------------------------------------
# sliding windows and storage folding
# ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Slide:
    """A sliding window (Halide's sliding window and storage folding): a tensor ``buf``
    stored at a loop further out than the loop ``compute`` it is computed at (``store_at``
    after ``compute_at``), whose region moves by ``step`` elements of ``window`` along
    dimension ``dim`` per iteration of ``compute``, computes at each iteration only the
    elements the previous one did not (the loop ``region`` over that dimension starts at
    them), and keeps them in a circular buffer of ``window`` elements along ``dim``.

    The pass ``shrink_storage`` finds (``_find_slide``) and applies (``_apply_slide``) it
    while preparing for codegen; the schedule and the printed nest are unchanged. Three rows
    of B per row of C, 8 rows a strip:

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (34, 24), "float32")
    >>> B = Compute("B", (34, 24), lambda y, x: A[y, x] * 2.0)
    >>> C = Compute("C", (32, 24), lambda y, x: B[y, x] + B[y + 1, x] + B[y + 2, x])
    >>> nest = LoopNest([C])
    >>> yo, yi = nest.split_with_mask(nest.get_loops_for(C)[0], 8)
    >>> nest.compute_at(B, yi); nest.store_at(B, yo)
    >>> print(nest.prepare_for_codegen())
    float32 B[3, 24]; // alloc
    for (int y_1_outer = 0; y_1_outer < 4; y_1_outer++) {
      for (int y_1_inner = 0; y_1_inner < 8; y_1_inner++) {
        for (int y_2 = select(y_1_inner > 0, y_1_outer * 8 + y_1_inner + 2, y_1_outer * 8 + y_1_inner); y_2 < y_1_outer * 8 + y_1_inner + 3; y_2++) {
          for (int x_2 = 0; x_2 < 24; x_2++) {
            B[floormod(y_2, 3) * 24 + x_2] = A[y_2 * 24 + x_2] * 2.0f;
          }
        }
        for (int x_1 = 0; x_1 < 24; x_1++) {
          C[y_1_outer * 192 + y_1_inner * 24 + x_1] = B[floormod(y_1_outer * 8 + y_1_inner, 3) * 24 + x_1] + B[floormod(y_1_outer * 8 + y_1_inner + 1, 3) * 24 + x_1] + B[floormod(y_1_outer * 8 + y_1_inner + 2, 3) * 24 + x_1];
        }
      }
    }
    free(B);
    """

    compute: Var
    region: Var
    dim: int
    window: int
    step: int


def _innermost_around(root: Stmt, buf, inside: For) -> For | None:
    """The innermost loop inside ``inside`` (or ``inside`` itself) around every access of ``buf``."""
    around = _around_every_access(root, buf)
    best = None
    for f in (s for s in iter_stmts(inside) if isinstance(s, For)):
        if around is None or id(f) in around:
            best = f    # pre-order: a later hit is nested in an earlier one
    return best


def _reads(s: Stmt, buf, skip: For | None = None) -> bool:
    """Whether a statement of ``s`` (outside loop ``skip``) reads ``buf``, stores to it aside."""
    return any(not (isinstance(x, Store) and x.buffer is buf) and has_load(stmt_exprs(x), buf)
               for x in iter_stmts(s, skip=lambda x: x is skip))


def _nested_fors(s: Stmt):
    """``s`` if it is a loop, and the loops nested in it through loop bodies only (not under a
    guard or a Let, whose body may not run every iteration)."""
    if isinstance(s, For):
        yield s
        for x in s.body.stmts:
            yield from _nested_fors(x)


def _region_loop(root: Stmt, y: For, buf, dim: int, lo: Expr, window: int) -> For | None:
    """The serial loop of ``y``'s body that computes ``buf`` (every store to ``buf`` is in it
    and indexes ``dim`` by its variable) over ``[lo, lo + window)`` in every iteration of
    ``y``, before any statement reads ``buf``; None when there is no such loop."""
    for k, top in enumerate(y.body.stmts):
        for g in _nested_fors(top):
            stores = [x for x in iter_stmts(g.body) if isinstance(x, Store) and x.buffer is buf]
            if not stores or any(x.indices[dim] is not g.var for x in stores):
                continue    # a loop over another dimension's region: look inside it
            elsewhere = any(isinstance(x, Store) and x.buffer is buf for x in iter_stmts(root, skip=lambda x: x is g))
            if (g.kind != ForKind.SERIAL or elsewhere or any(_reads(x, buf) for x in y.body.stmts[:k])
                    or _reads(top, buf, skip=g)):
                return None
            if fold_int(tidy(sub(g.start, lo))) == 0 and fold_int(tidy(sub(g.stop, g.start))) == window:
                return g
            return None
    return None


def _find_slide(root: Stmt, buf, store: For) -> Slide | None:
    """The sliding window of ``buf`` stored at loop ``store``, or None: every access of ``buf``
    is inside one serial loop ``y`` strictly inside ``store`` (with only serial loops between),
    ``y``'s body first computes ``buf`` by a loop over one dimension's region and then reads
    it, and that region is a window of constant size that moves by a constant step of fewer
    elements than its size per iteration of ``y`` (every other dimension's region stays put)."""
    y = _innermost_around(root, buf, store)
    if y is None or y is store:
        return None
    chain = next(iter(loop_path(root, lambda s: s is y))) + [y]
    inner = chain[[g.var for g in chain].index(store.var) + 1:]     # the store loop may be parallel
    if any(g.kind != ForKind.SERIAL for g in inner):
        return None
    gpu = (ForKind.GPU_BLOCK, ForKind.GPU_THREAD)
    if any(g.kind in gpu for g in chain) or any(isinstance(x, For) and x.kind in gpu for x in iter_stmts(y.body)):
        return None     # the threads of a block would need a barrier between iterations of y
    ranges = {g.var: (g.start, g.stop) for g in chain}
    bounds = bounds_inference().access_bounds(y.body, buf, [g.var for g in chain], writes=False,
                                              outer_ranges=ranges)
    if bounds is None:
        return None
    moving = [d for d, b in enumerate(bounds) if any(v is y.var for v in free_vars([b.min, b.extent]))]
    if len(moving) != 1:
        return None
    d = moving[0]
    b = bounds[d]
    window = fold_int(b.extent)
    step = fold_int(tidy(sub(substitute(b.min, {y.var: tidy(add(y.var, 1))}), b.min)))
    if not b.exact or window is None or step is None or not 0 < step < window:
        return None
    g = _region_loop(root, y, buf, d, b.min, window)
    if g is None:
        return None
    return Slide(y.var, g.var, d, window, step)


class _FoldIndex(ExprMutator):
    def __init__(self, buf, local, index):
        self.buf, self.local, self.index = buf, local, index

    def visit_Load(self, e: Load) -> Expr:
        idx = tuple(self.visit(i) for i in e.indices)
        if e.buffer is self.buf:
            return Load(self.local, self.index(idx))
        return e.replace(indices=idx) if any(a is not b for a, b in zip(idx, e.indices)) else e


class _FoldStmt(StmtMutator):
    """Accesses of ``buf`` become accesses of ``local`` at ``index(indices)``."""

    def __init__(self, buf, local, index):
        self.ex = _FoldIndex(buf, local, index)

    def visit_expr(self, e):
        return self.ex.visit(e)

    def visit_Store(self, s: Store):
        idx = tuple(self.ex.visit(i) for i in s.indices)
        value = self.ex.visit(s.value)
        if s.buffer is self.ex.buf:
            return Store(self.ex.local, self.ex.index(idx), value)
        return s.replace(indices=idx, value=value)


def _apply_slide(root: Stmt, store_var: Var, slide: Slide, buf, local, mins) -> Stmt:
    """``root`` with the region loop of ``slide`` starting, after the first iteration of the
    compute loop, at the elements the previous iteration did not compute, and the accesses of
    ``buf`` inside the loop of ``store_var`` redirected to ``local``: the sliding dimension
    indexed modulo the window, the others rebased by ``mins``."""
    def restart(y: For) -> For:
        def move(g: For) -> For:
            later = tidy(add(g.start, slide.window - slide.step))
            return g.replace(start=Select(GT(y.var, y.start), later, g.start))
        return y.replace(body=replace_loop(y.body, slide.region, move))

    root = replace_loop(root, slide.compute, restart)

    def index(idx):
        return tuple(floormod_c(i, slide.window) if d == slide.dim else tidy(sub(i, m))
                     for d, (i, m) in enumerate(zip(idx, mins)))

    fold = _FoldStmt(buf, local, index)
    return replace_loop(root, store_var, lambda g: g.replace(body=fold.visit(g.body)))
