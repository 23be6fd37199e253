"""Loop kinds: vectorize, unroll, parallelize, GPU binding. (The vector lowering that
``prepare_for_codegen`` runs on vectorized loops is ``loopnest.vectorize_lowering``.)

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> A = Buffer("A", (64,), "float32")
>>> B = Compute("B", (64,), lambda i: A[i] * 2.0)
>>> nest = LoopNest([B]); i, = nest.get_loops_for(B)
>>> _ = nest.parallelize(i)
>>> print(nest)
parallel for (int i = 0; i < 64; i++) {
  B[i] = A[i] * 2.0f;
}
"""
from __future__ import annotations

from te.expr import IntImm, Var
from te.queries import expr_size, fold_int, free_vars
from te.printer import expr_to_str

from ..errors import ScheduleError
from ..lazy_analysis import legality_checks
from ..loop import Loop
from ..queries import stmt_loaded_buffers, stmt_stored_buffers
from ..stmt import Block, ExternCall, For, ForKind, LetStmt, Stmt, Store, iter_stmts, stmt_children, stmt_exprs
from ..vectorize_lowering import lower_vectorized_loops  # re-exported: it used to live here
from ._rewrite import add, clone_fresh, floordiv_c, mul, nonnegative_extent, replace_loop, substitute_stmt, tidy

__all__ = ["vectorize", "unroll", "parallelize", "set_gpu_index", "lower_vectorized_loops",
           "MAX_UNROLL", "MAX_LATE_UNROLL", "MAX_UNROLL_NODES"]

#: the most copies a full unroll may make
MAX_UNROLL = 1024

#: the most iterations of a late unroll (``unroll(loop, late=True)``): the LLVM backend
#: copies the body of an unrolled loop up to this many times, and runs a longer one as a loop
MAX_LATE_UNROLL = 64

#: the most nodes (statements and expression nodes) the copies of a full unroll may hold:
#: 1,024 copies of a 300-node body gave a 237,000-line LLVM module that LLVM's optimiser
#: took more than ten minutes over (random tester seed 53, case 253)
MAX_UNROLL_NODES = 65536

_GPU = (ForKind.GPU_BLOCK, ForKind.GPU_THREAD)
_AXES = "xyz"


def _set_kind(nest, f: For, kind: str, axis=None) -> None:
    nest.root = replace_loop(nest.root, f.var, lambda g: g.replace(kind=kind, axis=axis))


def _not_gpu(f: For, op: str) -> None:
    if f.kind in _GPU:
        raise ScheduleError(f"cannot {op} loop {f.var.name}: it is bound to {f.kind}.{_AXES[f.axis]}")


# ------------------------------------------------------------------------------------
# vectorize / parallelize
# ------------------------------------------------------------------------------------
def vectorize(nest, loop, check: bool = True):
    """Mark ``loop`` vectorized; ``prepare_for_codegen`` turns it into vector statements
    (Ramp / Broadcast) when its body allows, else backends run it as a loop with a
    vectorization hint. Returns the handle.

    Before / after ``vectorize(i_inner)``::

        for (int i_inner = 0; i_inner < 8; i_inner++) {     vectorized for (int i_inner = 0; i_inner < 8; i_inner++) {
          B[i_outer * 8 + i_inner] = A[...] * 2.0f;           B[i_outer * 8 + i_inner] = A[...] * 2.0f;
        }                                                   }

    and after prepare_for_codegen: ``B[ramp(i_outer * 8, 1, 8)] = A[ramp(i_outer * 8, 1, 8)] *
    broadcast(2.0f, 8);``.

    Legality: a constant extent >= 1, and no dependence carried by the loop (no lane may
    write what another lane reads, nor two lanes write one element). ``check=False`` skips
    the dependence check (the extent must still be constant): the caller asserts the loop
    is safe, and the call is recorded with ``check=False`` in the history.
    """
    f = loop.stmt
    legality_checks().check_vectorize(nest, loop, check_dependences=check)
    _set_kind(nest, f, ForKind.VECTORIZED)
    return loop


def parallelize(nest, loop, check: bool = True):
    """Run the iterations of ``loop`` on several threads. Returns the handle.

    Before / after ``parallelize(i)``::

        for (int i = 0; i < N; i++) {          parallel for (int i = 0; i < N; i++) {
          C[i] = 0.0f;                            C[i] = 0.0f;
          for (int k = 0; k < 64; k++) {          for (int k = 0; k < 64; k++) {
            C[i] = C[i] + A[i, k];                  C[i] = C[i] + A[i, k];

    Legality: no dependence carried by ``loop`` (``check_parallelize``): parallelizing
    ``i`` above is legal, parallelizing ``k`` is refused (every k updates C[i]). An
    intermediate buffer used only inside the loop, each iteration reading only what it
    wrote, is private to the iteration and does not count. ``check=False`` skips the check
    (recorded in the history).
    """
    f = loop.stmt
    _not_gpu(f, "parallelize")
    if check:
        legality_checks().check_parallelize(nest, loop)
    _set_kind(nest, f, ForKind.PARALLEL)
    return loop


def set_gpu_index(nest, loop, dim: int, kind: str, check: bool = True):
    """Bind ``loop`` to ``blockIdx`` (kind gpu_block) or ``threadIdx`` (gpu_thread) along
    ``dim`` (0, 1, 2 for x, y, z). Returns the handle.

    Before / after ``set_gpu_block_index(i_outer, 0)`` and ``set_gpu_thread_index(i_inner, 0)``::

        for (int i_outer = 0; i_outer < 4; i_outer++) {    gpu_block.x for (int i_outer = 0; i_outer < 4; i_outer++) {
          for (int i_inner = 0; i_inner < 32; i_inner++) {   gpu_thread.x for (int i_inner = 0; i_inner < 32; i_inner++) {

    Refused: a ``dim`` outside 0..2; a second loop on the same path bound to the same kind
    and axis; a block loop inside a thread loop; once block loops enclose thread loops, a
    block loop below a loop that is not a block loop holding only it (a kernel's grid is its
    outermost loops; block loops may be bound in any order before their threads) -- except
    serial loops above all the block loops, which run on the host and launch the kernel once
    per iteration, as in Halide; a loop
    whose extent depends on a loop or let variable of the nest (grid and block sizes are
    fixed at launch); a thread binding after which the threads of another axis of the
    kernel would run a thread loop's body redundantly while two of its statements exchange
    data (a barrier there would be divergent: the CUDA build refuses it); and (GPU
    iterations run in parallel) a loop carrying a dependence, as for ``parallelize``.
    """
    label_op = "set_gpu_block_index" if kind == ForKind.GPU_BLOCK else "set_gpu_thread_index"
    if isinstance(dim, bool) or not isinstance(dim, int) or dim not in (0, 1, 2):
        raise ScheduleError(f"{label_op}({loop.name}, {dim!r}): dim must be 0, 1 or 2 (x, y or z)")
    if kind not in _GPU:
        raise ScheduleError(f"set_gpu_index: kind must be gpu_block or gpu_thread, got {kind!r}")
    f = loop.stmt
    label = f"{kind}.{_AXES[dim]}"
    outer = [l.stmt for l in nest.get_enclosing_loops(loop)[:-1]]
    inner = [s for s in iter_stmts(f.body) if isinstance(s, For)]
    for g in outer + inner:
        if g.kind == kind and g.axis == dim:
            raise ScheduleError(f"cannot bind loop {loop.name} to {label}: loop {g.var.name} "
                                f"{'around' if g in outer else 'inside'} it is already bound to {label}")
    if kind == ForKind.GPU_BLOCK:
        t = next((g for g in outer if g.kind == ForKind.GPU_THREAD), None)
        if t is not None:
            raise ScheduleError(f"cannot bind loop {loop.name} to {label}: it is inside the gpu_thread loop "
                                f"{t.var.name}; block loops must enclose thread loops")
        if any(g.kind == ForKind.GPU_THREAD for g in inner):
            _check_grid_chain(loop.name, label, outer + [f], binding=f)
    else:
        b = next((g for g in inner if g.kind == ForKind.GPU_BLOCK), None)
        if b is not None:
            raise ScheduleError(f"cannot bind loop {loop.name} to {label}: the gpu_block loop {b.var.name} is "
                                f"inside it; block loops must enclose thread loops")
        _check_grid_chain(loop.name, label, outer)
    _check_launch_extent(nest, f, loop.name, label)
    if kind == ForKind.GPU_THREAD:
        _check_block_size(loop.name, label, f, dim, _kernel_thread_loops(nest, outer + [f]))
        _check_redundant_exchange(nest, f, dim, outer, loop.name, label)
    _check_axis_limit(loop.name, label, f, (MAX_BLOCK_DIMS if kind == ForKind.GPU_THREAD else MAX_GRID_DIMS)[dim])
    if check:
        legality_checks().check_gpu_bind(nest, loop, label)
    _set_kind(nest, f, kind, dim)
    return loop


def _check_redundant_exchange(nest, f: For, dim: int, outer: list, name: str, label: str) -> None:
    """Binding ``f`` makes ``dim`` a thread axis of its kernel (the outermost block loop
    around it, else its top-level statement). The threads of a kernel axis that is not bound
    around a thread loop run that loop's body redundantly, its stores guarded to one of them;
    two statements of such a body (at one level, not inside a nested thread loop) that
    exchange data through a buffer shared beyond the loop would need a ``__syncthreads()``
    there, which would be divergent, so the CUDA build refuses them: refuse the binding
    instead (seed 130, case 293: a slice_head made sibling thread loops on x and z, each
    initialising and then accumulating a row of a reduction)."""
    axis_of = lambda g: dim if g is f else g.axis if g.kind == ForKind.GPU_THREAD else None  # noqa: E731
    threads = [g for g in _kernel_thread_loops(nest, outer + [f]) if g is not f] + [f]
    axes = {axis_of(g) for g in threads}
    if len(axes) < 2:
        return
    chains = nest.loop_index()
    for t in threads:
        unbound = axes - {axis_of(g) for g in chains.enclosing(t.var)}
        if not unbound:
            continue
        # intermediates accessed only inside t are t's own (allocated in it): no exchange through them
        seen_outside = {id(b) for s in iter_stmts(nest.root, skip=lambda s: s is t) if isinstance(s, (Store, ExternCall))
                        for b in stmt_stored_buffers(s) + stmt_loaded_buffers(s)}
        own = {id(b) for b in nest.intermediates} - seen_outside
        buf = _exchange(t.body, own, axis_of)
        if buf is not None:
            raise ScheduleError(
                f"cannot bind loop {name} to {label}: threads on {'/'.join(_AXES[a] for a in sorted(unbound))} would "
                f"run the body of the gpu_thread loop {t.var.name} redundantly, and two of its statements exchange "
                f"data through {buf.name}, which needs a __syncthreads() between them that only some threads would "
                f"reach; bind a loop of {t.var.name} that holds both statements to that axis instead, or bind loops "
                "that are nested rather than siblings")


def _kernel_of(nest, path: list) -> Stmt:
    """The statement that is the kernel of the loops ``path`` (a loop and those around it,
    outermost first): the outermost block loop on it, else the top-level statement holding it."""
    kernel = next((g for g in path if g.kind == ForKind.GPU_BLOCK), None)
    return kernel if kernel is not None else next(s for s in nest.root.stmts if any(x is path[0] for x in iter_stmts(s)))


def _kernel_thread_loops(nest, path: list) -> list:
    """The thread loops of the kernel of ``path`` (``_kernel_of``): siblings' threads share its block."""
    return [g for g in iter_stmts(_kernel_of(nest, path)) if isinstance(g, For) and g.kind == ForKind.GPU_THREAD]


def _exchange(body: Stmt, own: set, axis_of):
    """A buffer (not in ``own``) that one statement of ``body`` stores and another loads or
    stores, at one level of a block, recursing into loops but not into thread loops (those
    are checked with their own axes bound) and into conditions and lets (seed 190, case 169:
    the exchange was inside the guard of a thread loop's tail); None otherwise."""
    parts = body.stmts if isinstance(body, Block) else [body]
    stores = [{id(b): b for b in stmt_stored_buffers(x)} for x in parts]
    touched = [{id(b) for b in stmt_loaded_buffers(x)} | set(stores[k]) for k, x in enumerate(parts)]
    for i, written in enumerate(stores):
        for j, other in enumerate(touched):
            shared = [b for k, b in written.items() if i != j and k in other and k not in own]
            if shared:
                return shared[0]
    inner = (_exchange(body, own, axis_of) for x in parts if not isinstance(x, For) or axis_of(x) is None
             for body in stmt_children(x))
    return next((b for b in inner if b is not None), None)


#: the kinds of loop that may hold block-bound loops: the launcher runs them (host loops)
HOST_LOOP_KINDS = (ForKind.SERIAL, ForKind.UNROLLED)

#: the most threads a CUDA block may have, on every device
MAX_BLOCK_THREADS = 1024
#: the largest block (threads per axis) and grid (blocks per axis) on every device: x, y, z
MAX_BLOCK_DIMS = (1024, 1024, 64)
MAX_GRID_DIMS = (2 ** 31 - 1, 65535, 65535)


def _check_axis_limit(name: str, label: str, f: For, limit: int) -> None:
    """A loop bound to a block or thread axis may not be longer than that axis allows."""
    ext = fold_int(tidy(f.stop - f.start))
    if ext is not None and ext > limit:
        raise ScheduleError(f"cannot bind loop {name} to {label}: its {ext} iterations exceed the {limit} that "
                            f"CUDA allows on that axis; split the loop and bind a part of at most {limit}, or "
                            "bind it to another axis")


def _block_threads(bound: list) -> tuple[int, str]:
    """The threads of a block whose thread loops are ``bound`` (pairs of a loop and its axis):
    the product over the axes of their longest constant extent; and those extents as text."""
    widest: dict = {}
    for g, axis in bound:
        ext = fold_int(tidy(g.stop - g.start))
        if ext is not None:
            widest[axis] = max(widest.get(axis, 1), ext)
    threads = 1
    for ext in widest.values():
        threads *= ext
    return threads, " x ".join(f"{widest[a]} ({_AXES[a]})" for a in sorted(widest))


def _check_block_size(name: str, label: str, f: For, dim: int, around: list) -> None:
    """The block that binding ``f`` to ``threadIdx`` axis ``dim`` gives the thread loops of its
    kernel (``around``: those around and inside ``f`` and, as they share the block, beside it;
    the largest constant extent per axis) must have at most ``MAX_BLOCK_THREADS`` threads."""
    threads, sizes = _block_threads([(g, dim if g is f else g.axis) for g in around + [f]
                                     if g is f or g.kind == ForKind.GPU_THREAD])
    if threads > MAX_BLOCK_THREADS:
        raise ScheduleError(f"cannot bind loop {name} to {label}: the block would have {sizes} = {threads} threads, "
                            f"more than the {MAX_BLOCK_THREADS} a CUDA block may have; split the loop and bind "
                            "its inner part")


def check_kernel_blocks(nest, op: str) -> None:
    """After the transform ``op``: each kernel (an outermost GPU-bound loop with what it holds)
    binds at most ``MAX_BLOCK_THREADS`` threads, counting the longest constant thread loop of
    each axis (as the launch does, ``codegen.cuda.outline``). Binding checks its own block;
    this catches the transforms that bring thread loops together, as a ``fuse`` of two
    kernels' block loops does (256 threads along x beside 256 along y: a block of 65,536).

    >>> from te import Compute
    >>> from loopnest import LoopNest
    >>> A, B = Compute("A", (512,), lambda i: i), Compute("B", (512,), lambda i: i * 2)
    >>> nest = LoopNest([A, B])
    >>> (a_out, a_in, _), (b_out, b_in, _) = (nest.split_with_tail(nest.get_loops_for(t)[0], 256) for t in (A, B))
    >>> for loop, axis in ((a_out, 0), (b_out, 0)):
    ...     _ = nest.set_gpu_block_index(loop, axis)
    >>> _ = nest.set_gpu_thread_index(a_in, 0), nest.set_gpu_thread_index(b_in, 1)
    >>> nest.fuse([a_out, b_out])
    Traceback (most recent call last):
    ...
    loopnest.errors.ScheduleError: fuse: the kernel of loop i_outer would bind 256 (x) x 256 (y) = 65536 threads per block, more than the 1024 a CUDA block may have; bind the loops of one axis only, or split them and keep the outer parts serial
    """
    stack: list[Stmt] = [nest.root]
    while stack:
        s = stack.pop()
        if not (isinstance(s, For) and s.kind in (ForKind.GPU_BLOCK, ForKind.GPU_THREAD)):
            stack.extend(stmt_children(s))
            continue
        threads, sizes = _block_threads([(g, g.axis) for g in iter_stmts(s)
                                         if isinstance(g, For) and g.kind == ForKind.GPU_THREAD])
        if threads > MAX_BLOCK_THREADS:
            raise ScheduleError(f"{op}: the kernel of loop {s.var.name} would bind {sizes} = {threads} threads per "
                                f"block, more than the {MAX_BLOCK_THREADS} a CUDA block may have; bind the loops of "
                                "one axis only, or split them and keep the outer parts serial")


def _check_launch_extent(nest, f: For, name: str, label: str) -> None:
    """A bound loop's extent is a grid or block size, fixed at launch: it may not depend on a
    variable the nest binds (a loop's or a let's), as a triangular loop's, or a cache loop's
    sized by the iteration of a loop around it, may."""
    bound = {id(s.var): s for s in iter_stmts(nest.root) if isinstance(s, (For, LetStmt))}
    bad = [v for v in free_vars([f.start, f.stop]) if id(v) in bound]
    if bad:
        what = ", ".join(f"{'loop' if isinstance(bound[id(v)], For) else 'let'} {v.name}" for v in bad)
        raise ScheduleError(f"cannot bind loop {name} to {label}: its extent {expr_to_str(tidy(f.stop - f.start))} "
                            f"depends on {what}, and grid and block sizes must be known at launch; split with a "
                            "mask rather than a tail, or bind an outer loop")


def _check_grid_chain(name: str, label: str, path: list, binding: For | None = None) -> None:
    """The loops of ``path`` (outermost first) from its outermost block loop down to its
    innermost one must all be block loops, each holding only the next: a kernel's grid is its
    outermost loops. The loops above them may be serial: they run on the host, launching
    the kernel once per iteration (``codegen.cuda.outline``). Checked once a block loop has
    thread loops inside it (binding usually goes blocks first, threads last), so block loops
    may be bound in any order before that. ``binding``: the loop of ``path`` being bound to a
    block index now (a block loop already)."""
    blocks = [k for k, g in enumerate(path) if g.kind == ForKind.GPU_BLOCK or g is binding]
    if not blocks:
        return
    for g, child in zip(path[:blocks[0]], path[1:blocks[0] + 1]):
        if g.kind not in HOST_LOOP_KINDS:
            raise ScheduleError(
                f"cannot bind loop {name} to {label}: the gpu_block loops below loop {g.var.name} would run once "
                f"per iteration of it on the host, but it is a {g.kind} loop; only serial (or unrolled) loops "
                "can hold kernels; make it serial, or bind it to a block index too")
    chain = path[blocks[0]:blocks[-1] + 1]
    for g, child in zip(chain, chain[1:]):
        if g.kind != ForKind.GPU_BLOCK and g is not binding:
            raise ScheduleError(
                f"cannot bind loop {name} to {label}: the gpu_block loop {child.var.name} is inside loop "
                f"{g.var.name}, which is not a gpu_block loop, and a kernel's grid is its outermost loops; bind "
                f"{g.var.name} to a block index too, or reorder so that the block loops are outermost")
        if len(g.body.stmts) != 1 or g.body.stmts[0] is not child:
            raise ScheduleError(
                f"cannot bind loop {name} to {label}: the gpu_block loop {g.var.name} holds other statements "
                f"besides loop {child.var.name}, so {child.var.name} is not among the kernel's outermost "
                f"loops; distribute {g.var.name} first")


# ------------------------------------------------------------------------------------
# unroll
# ------------------------------------------------------------------------------------
def unroll(nest, loop, factor: int | None = None, late: bool = False):
    """Unroll ``loop`` fully (``factor=None``) or by ``factor``; ``late=True``: fully, when
    code is generated.

    Full unroll (constant extent, at most ``MAX_UNROLL``): the loop is replaced by one copy
    of its body per iteration, the variable replaced by its value; returns None (the loop is
    gone: its handles raise ScheduleError saying ``unroll`` removed it, and it keeps its
    place in ``get_loops_for``'s lists, so a list read again does not shift onto another
    loop). The first copy keeps the inner loops' variables, later copies get fresh ones; a
    later ``unroll`` of an inner loop (by its handle, or from a list) unrolls it in every
    copy.
    Before / after ``unroll(j)``::

        for (int j = 0; j < 3; j++) {       B[i, 0] = A[i, 0];
          B[i, j] = A[i, j];                B[i, 1] = A[i, 1];
        }                                   B[i, 2] = A[i, 2];

    By a factor: the loop keeps its variable (and handle) and runs ``extent // factor``
    iterations, each one running ``factor`` copies of the body; the remaining iterations run
    in a tail loop ``<var>_tail`` (absent when the factor divides a constant extent).
    Returns ``(loop, tail)``. Before / after ``unroll(i, 2)`` on 5 iterations::

        for (int i = 0; i < 5; i++) {       for (int i = 0; i < 2; i++) {
          B[i] = A[i];                        B[i * 2] = A[i * 2];
        }                                     B[i * 2 + 1] = A[i * 2 + 1];
                                            }
                                            for (int i_tail = 4; i_tail < 5; i_tail++) {
                                              B[i_tail] = A[i_tail];
                                            }

    Late (``late=True``, a serial loop of at most ``MAX_LATE_UNROLL`` constant iterations):
    the loop stays, marked ``unrolled``, and the backends make the copies (LLVM one per
    iteration, CUDA through ``#pragma unroll``; IREval runs it as a loop). The passes of
    ``prepare_for_codegen`` then work on one body instead of every copy: a register-blocked
    kernel compiles much faster (the benchmark's convolution: 0.50 -> 0.32 s), for the same
    code. The loop keeps its handle; later transforms see one body. Returns None.

    Legal (iterations keep their order). Refused: inside a parallel or GPU loop, where the
    analysis can then no longer show that loop's intermediates private to its iterations
    (``transforms.privacy``); a GPU-bound loop, a non-constant
    extent for a full unroll, a factor that is not an int >= 1 or not below a constant extent,
    copies that would hold more than ``MAX_UNROLL_NODES`` statements and expression nodes; a
    late unroll with a factor, of a loop that is not serial, or of more than
    ``MAX_LATE_UNROLL`` iterations.
    """
    f = loop.stmt
    _not_gpu(f, "unroll")
    group = [f] + [g for g in nest._copies_of(f.var)]
    call = f"unroll({loop.name})" if factor is None else f"unroll({loop.name}, {factor})"
    if late:
        _unroll_late(nest, loop.name, group, factor)
        return None
    if factor is None:
        extents = [_full_unroll_extent(nest, g, loop.name) for g in group]
        for g, n in zip(group, extents):
            _unroll_fully(nest, Loop(nest, g.var).stmt, n, call)
        return None
    if isinstance(factor, bool) or not isinstance(factor, int):
        raise ScheduleError(f"unroll({loop.name}, {factor!r}): the factor must be an int >= 1 (or None to "
                            "unroll fully)")
    if factor < 1:
        raise ScheduleError(f"unroll({loop.name}, {factor}): the factor must be >= 1")
    if factor == 1:
        return loop, None
    extents = [legality_checks().constant_extent(g) for g in group]
    for n in extents:
        if n is not None and factor >= n:
            raise ScheduleError(f"unroll({loop.name}, {factor}): the factor is not below the extent {n}; "
                                f"use unroll({loop.name}) to unroll fully")
    size = _nodes(f.body)
    if factor * size > MAX_UNROLL_NODES:
        raise ScheduleError(f"{call}: {factor} copies of the body of {size} nodes would make {factor * size} "
                            f"(at most {MAX_UNROLL_NODES}); use a smaller factor")
    tails = [_unroll_by(nest, Loop(nest, g.var).stmt, n, factor) for g, n in zip(group, extents)]
    for t in tails[1:]:
        if t is not None and tails[0] is not None:
            nest._copies[t] = tails[0]
    return loop, (Loop(nest, tails[0]) if tails[0] is not None else None)


def _unroll_late(nest, name: str, group: list, factor) -> None:
    """Mark the loops of ``group`` (a loop and its copies) unrolled, after the checks of a
    full unroll and those of a late one."""
    call = f"unroll({name}, late=True)"
    if factor is not None:
        raise ScheduleError(f"{call} with factor {factor!r}: a late unroll is a full one; leave out the factor, "
                            f"or unroll({name}, {factor!r}) now")
    for g in group:
        if g.kind != ForKind.SERIAL:
            raise ScheduleError(f"cannot {call}: the loop is {g.kind}; a late unroll marks a serial loop")
        n = _full_unroll_extent(nest, g, name)
        if n > MAX_LATE_UNROLL:
            raise ScheduleError(f"cannot {call}: {n} iterations (a late unroll takes at most {MAX_LATE_UNROLL}); "
                                f"unroll({name}) copies up to {MAX_UNROLL} now")
    for g in group:
        _set_kind(nest, g, ForKind.UNROLLED)


def _full_unroll_extent(nest, f: For, name: str) -> int:
    n = legality_checks().constant_extent(f)
    if n is None:
        raise ScheduleError(f"cannot fully unroll loop {name}: its extent {expr_to_str(f.extent)} "
                            f"is not a constant; unroll({name}, factor) unrolls by a factor")
    if n > MAX_UNROLL:
        raise ScheduleError(f"cannot fully unroll loop {name}: {n} iterations would make {n} copies "
                            f"(at most {MAX_UNROLL}); unroll by a factor instead")
    size = _nodes(f.body)
    if n * size > MAX_UNROLL_NODES:
        raise ScheduleError(f"cannot fully unroll loop {name}: {n} copies of its body of {size} nodes would make "
                            f"{n * size} (at most {MAX_UNROLL_NODES}); unroll by a smaller factor instead")
    return n


def _nodes(s: Stmt) -> int:
    """Statements and expression nodes in ``s`` (a shared subexpression counted at each use)."""
    return sum(1 + expr_size(stmt_exprs(x)) for x in iter_stmts(s))


def _body_copies(nest, f: For, values: list) -> list[Stmt]:
    """The statements of ``f``'s body once per value of its variable: the first copy keeps
    the body's loops, the others get fresh ones (recorded as copies of the first)."""
    stmts: list[Stmt] = []
    for c, value in enumerate(values):
        if c == 0:
            stmts.extend(substitute_stmt(f.body, {f.var: value}).stmts)
            continue
        copy = clone_fresh(f.body, nest.fresh_name, {f.var: value})
        nest._note_copies(f.body, copy)
        stmts.extend(copy.stmts)
    return stmts


def _unroll_fully(nest, f: For, n: int, call: str) -> None:
    v = f.var
    stmts = _body_copies(nest, f, [tidy(add(f.start, c)) for c in range(max(n, 0))])
    nest._note_removed(v, call)
    nest.root = replace_loop(nest.root, v, lambda _: stmts)


def _unroll_by(nest, f: For, n: int | None, factor: int) -> Var | None:
    """Unroll ``f`` by ``factor``; returns the tail loop's variable (None without a tail)."""
    v = f.var
    trip = IntImm(n // factor, v.dtype) if n is not None else floordiv_c(nonnegative_extent(nest, f), factor)
    body = _body_copies(nest, f, [tidy(add(add(mul(v, factor), c), f.start)) for c in range(factor)])
    main = For(v, IntImm(0, v.dtype), trip, Block(tuple(body)), f.kind, f.axis)
    new: list[Stmt] = [main]
    tail = None
    if n is None or n % factor:
        tail = Var(nest.fresh_name(f"{v.name}_tail"), v.dtype)
        tail_start = tidy(add(mul(trip, factor), f.start))
        tail_body = clone_fresh(f.body, nest.fresh_name, {v: tail})
        kind = f.kind if f.kind != ForKind.VECTORIZED else ForKind.SERIAL
        new.append(For(tail, tail_start, f.stop, tail_body, kind))
    nest.root = replace_loop(nest.root, v, lambda _: new)
    return tail
