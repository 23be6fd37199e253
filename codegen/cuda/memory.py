"""Memory scopes: where every allocated buffer of a CUDA module lives.

* An ``Allocate`` at the top level of the root (an intermediate shared by kernels), or
  anywhere inside a single-thread kernel, is global memory allocated by the launcher and
  passed as an extra kernel argument.
* An ``Allocate`` inside the block-bound loops but outside every thread-bound loop is
  ``__shared__`` (static size required; the kernel's total is checked against the limit).
* An ``Allocate`` inside thread-bound loops is a thread-local array -- unless thread-bound
  loops nested inside its scope (on other axes) use it: then the threads of those inner
  loops share it, and it is a ``__shared__`` array with one slice per thread of the outer
  thread loops.
* An ``Allocate`` inside GPU-bound loops whose size (or, for a sliced shared array, the
  block's size) is only known at launch is a global buffer with one slice per block and
  per thread of the thread axes bound around it -- what a shared (or thread-local) array
  would give -- each slice padded to 16 bytes; the launcher allocates it for the grid.
  Except a tensor outside thread loops or private to a thread (the full-size intermediate
  ``compute_at`` leaves in a loop) that no store adds to: one global buffer of that size,
  shared by every block and thread. That is exact when each iteration reads only elements
  it wrote and iterations that write the same element write the same value -- what
  ``compute_at`` produces for a ``Compute`` tensor. A reduction's stores add to what is
  there, so threads computing the same elements would race: it gets a slice per thread.
* Register promotion: a shared buffer that each thread uses privately (see
  :func:`promote_private`) becomes a thread-local array.
* A kernel whose shared buffers need more than the limit (``max_shared_bytes``) moves the
  largest of them to global memory, one slice per block (and per thread of a sliced
  array's axes), until the rest fits: slower, but the schedule builds. A buffer allocated
  with scope ``"shared"`` stays; the build is refused when those alone do not fit.

Before (IR)::

    gpu_block.x for (...) {
      float32 As[256]; // alloc
      gpu_thread.x for (...) { ... As ... }

After (plan)::

    kernel k0_C: 2048 B of shared memory
      As: shared, 256 x float32 (1024 B)

>>> from codegen.cuda import examples
>>> from codegen.cuda.passes import plan_cuda
>>> from codegen.kernel import make_params
>>> ex = examples.matmul_register_tiled(64, 128, 16)
>>> nest = ex.nest.copy().prepare_for_codegen()
>>> print(plan_cuda(nest, make_params(nest, ex.args), "mm", upto="cuda_memory_scopes").describe_memory())
kernel k0_mm: 4096 B of shared memory
  acc: local, promoted from shared: 16 x float32 per thread
  As: shared, 512 x float32 (2048 B)
  Bs: shared, 512 x float32 (2048 B)
"""
from __future__ import annotations

from te import expr as E
from te.expr import Expr, IntImm
from te.queries import fold_int, free_vars, loads
from te.simplify import simplify
from te.tensor import Buffer, Tensor
from loopnest.queries import stmt_touches
from loopnest.stmt import Allocate, Block, Cond, For, ForKind, Free, Stmt, Store, iter_stmts, stmt_exprs

from ..kernel import BuildError
from .ir_queries import AXES, StmtWalk, extent, interval, linear_coeff
from .outline import host_level
from .plan import CudaPlan, KernelPlan, Placement

__all__ = ["assign_memory_scopes", "align_shared", "promote_private", "private_index"]


def assign_memory_scopes(plan: CudaPlan) -> None:
    """Fill ``plan.placements`` / ``plan.scratch`` and each kernel's ``shared_bytes`` (see the
    module docstring); refuses kernels over ``plan.max_shared`` bytes of shared memory.

    >>> from codegen.cuda import examples
    >>> from codegen.cuda.passes import plan_cuda
    >>> from codegen.kernel import make_params
    >>> ex = examples.matmul_tiled()
    >>> nest = ex.nest.copy().prepare_for_codegen()
    >>> plan = plan_cuda(nest, make_params(nest, ex.args), "mm", upto="cuda_outline_kernels")
    >>> assign_memory_scopes(plan)
    >>> plan.kernels[0].shared_bytes, sorted(p.scope for p in plan.placements.values())
    (2048, ['local', 'shared', 'shared'])
    """
    kernels = iter(plan.kernels)
    for s in host_level(plan.root):
        if isinstance(s, Allocate):
            _place(plan, Placement(s.buffer, "global"))
            continue
        if isinstance(s, Free):
            continue
        k = next(kernels)
        _classify_allocs(plan, k)
        promote_private(plan, k)
        shared = [p for p in _placements_in(plan, k) if p.scope == "shared"]
        if _padded_total(shared) > plan.max_shared:
            shared = _spill_to_global(plan, k, shared)
        _set_offsets(k, shared)
    size_ids = plan.size_ids
    for b in plan.scratch:
        bad = [v for v in free_vars(b.dims) if id(v) not in size_ids]
        if bad:
            raise BuildError(f"the size of intermediate {b.name} depends on {', '.join(v.name for v in bad)}, "
                             "which is not a size argument (an intermediate outside the kernels, in a loop "
                             "the launcher runs, is allocated once for the whole call)")


def _set_offsets(k: KernelPlan, shared: list[Placement]) -> None:
    """Place ``shared`` in order, each at a multiple of its alignment (16 bytes, or what
    :func:`align_shared` asked), and set the kernel's ``shared_bytes``."""
    k.shared_bytes = 0
    for p in shared:
        p.offset = -(-k.shared_bytes // p.align) * p.align
        k.shared_bytes = p.offset + _padded(p)


def align_shared(plan: CudaPlan, k: KernelPlan, buffers, align: int) -> None:
    """Align the shared memory of ``buffers`` (of kernel ``k``) to ``align`` bytes (the
    1024-byte atoms of a swizzled warpgroup-MMA operand), placing the kernel's shared buffers
    again; raises BuildError when they no longer fit in ``plan.max_shared`` bytes."""
    wanted = {id(b) for b in buffers}
    shared = [p for p in _placements_in(plan, k) if p.scope == "shared"]
    for p in shared:
        if id(p.buffer) in wanted:
            p.align = max(p.align, align)
    _set_offsets(k, shared)
    if k.shared_bytes > plan.max_shared:
        raise BuildError(f"kernel {k.name}'s shared buffers need {k.shared_bytes} bytes with "
                         f"{', '.join(b.name for b in buffers)} aligned to {align} bytes, over the limit of "
                         f"{plan.max_shared}; use smaller tiles, or a larger max_shared_bytes")


def _padded(p: Placement) -> int:
    return -(-p.nbytes // 16) * 16


def _padded_total(shared: list[Placement]) -> int:
    return sum(_padded(p) for p in shared)


def _spill_to_global(plan: CudaPlan, k: KernelPlan, shared: list[Placement]) -> list[Placement]:
    """Move shared buffers of kernel ``k``, largest first, to global memory (one slice per
    block, and per thread of a sliced buffer's axes: what the shared array gave) until the
    rest fits in ``plan.max_shared`` bytes; returns the buffers left in shared memory. A
    buffer allocated with scope ``"shared"`` stays; refuses when the rest cannot fit.
    The barriers stay where they are: ``__syncthreads()`` orders global memory within a block
    as it does shared memory."""
    need = _padded_total(shared)
    moved: set[int] = set()
    for p in sorted((p for p in shared if not p.pinned), key=lambda p: -p.nbytes):
        if _padded_total([x for x in shared if id(x) not in moved]) <= plan.max_shared:
            break
        moved.add(id(p))
    keep = [p for p in shared if id(p) not in moved]
    if _padded_total(keep) > plan.max_shared:
        names = ", ".join(f"{p.buffer.name} ({p.nbytes} B)" for p in shared)
        asked = ", ".join(p.buffer.name for p in keep if p.pinned)
        raise BuildError(f"kernel {k.index} needs {need} bytes of shared memory ({names}), more than the limit of "
                         f"{plan.max_shared} bytes, even with every buffer that does not ask for shared memory moved "
                         f"to global memory (allocated in shared memory: {asked}); use smaller tiles, or build with "
                         "a larger max_shared_bytes (up to the device's opt-in limit: 163 KiB on sm_80, 227 KiB on "
                         "sm_90; more than 48 KiB is taken as dynamic shared memory)")
    for p in shared:
        if id(p) in moved:
            _place_global_slices(plan, k, p.buffer, p.slice_axes)
            plan.placements[id(p.buffer)].spilled = True
    k.spilled_shared_bytes = need
    return keep


def _place(plan: CudaPlan, p: Placement) -> None:
    if p.scope == "global":
        old = plan.placements.get(id(p.buffer))
        if old is not None and old.scratch is not None:
            p.scratch = old.scratch
        else:
            p.scratch = len(plan.scratch)
            plan.scratch.append(p.buffer)
    plan.placements[id(p.buffer)] = p


def _placements_in(plan: CudaPlan, k: KernelPlan) -> list[Placement]:
    """The placements of the buffers allocated in kernel ``k``, in order of allocation."""
    seen: dict[int, Placement] = {}
    for x in iter_stmts(k.stmt):
        if isinstance(x, Allocate) and id(x.buffer) in plan.placements:
            seen[id(x.buffer)] = plan.placements[id(x.buffer)]
    return list(seen.values())


def _classify_allocs(plan: CudaPlan, k: KernelPlan) -> None:
    _Allocations(plan, k).visit(k.stmt, frozenset())


class _Allocations(StmtWalk):
    """``visit(s, bound)`` places every buffer allocated in ``s`` (``bound``: the thread axes
    bound around ``s``)."""

    def __init__(self, plan: CudaPlan, k: KernelPlan):
        self.plan, self.k = plan, k

    def visit_Block(self, s: Block, bound: frozenset) -> None:
        for n, x in enumerate(s.stmts):
            if isinstance(x, Allocate):   # its scope: the siblings after it
                _classify(self.plan, self.k, x, bound, s.stmts[n + 1:])
            else:
                self.visit(x, bound)

    def visit_For(self, s: For, bound: frozenset) -> None:
        self.generic(s, bound | {s.axis} if s.kind == ForKind.GPU_THREAD else bound)


def _classify(plan: CudaPlan, k: KernelPlan, a: Allocate, bound: frozenset, after) -> None:
    b = a.buffer
    scope_range = []
    for x in after:
        if isinstance(x, Free) and x.buffer is b:
            break
        scope_range.append(x)
    slice_axes: tuple = ()
    slice_dims: tuple = ()
    if not k.bound:
        scope = "global"
    elif not bound:
        scope = "shared"
    elif set(k.thread_axes) <= bound or not any(
            isinstance(y, For) and y.kind == ForKind.GPU_THREAD and stmt_touches(y, b)
            for x in scope_range for y in iter_stmts(x)):
        scope = "local"
    else:
        # threads of the axes bound around the allocation each have their own copy, which
        # the nested thread loops share: a shared array with one slice per such thread
        scope = "shared"
        slice_axes = tuple(sorted(bound))
        slice_dims = tuple(k.block[ax] for ax in slice_axes)
    want = a.scope if a.scope in ("shared", "local") else None
    # a full-size tensor may be one buffer for all threads only where concurrent threads that
    # write an element write the same value: not where a store adds to what is there (a
    # reduction computed in each thread: seed 143, case 395)
    full_size_shared = isinstance(b, Tensor) and not slice_axes and not _accumulates(scope_range, b)
    per_thread_global = scope != "global" and (b.static_size() is None or not all(
        isinstance(d, int) for d in slice_dims)) and not full_size_shared
    if per_thread_global:
        scope = "global"
    if want and want != scope:
        raise BuildError(f"buffer {b.name} is allocated with scope {want!r} but sits where the CUDA backend "
                         f"needs {scope!r} memory ("
                         + ("inside a thread-bound loop" if bound else "outside thread-bound loops")
                         + (", and its size or the block's is known only at launch" if per_thread_global else "")
                         + ")")
    if per_thread_global:
        # a size known only at launch: a global buffer with one slice per block and per
        # thread of the axes bound around the allocation (as a shared or local array would be)
        _place_global_slices(plan, k, b, tuple(sorted(bound)))
        return
    if scope != "global" and b.static_size() is None:
        # a tensor of a size known only at launch outside thread loops: one global buffer,
        # shared by all blocks (see the module docstring for when that is exact)
        scope, slice_axes, slice_dims = "global", (), ()
    _place(plan, Placement(b, scope, k.index, slice_axes=slice_axes, slice_dims=slice_dims, pinned=want == scope))


def _accumulates(stmts, b) -> bool:
    """Whether a store to ``b`` in ``stmts`` reads ``b`` (a read-modify-write: a reduction).

    >>> from te import Buffer, float32
    >>> from te.expr import Var
    >>> acc, i = Buffer("acc", (4,), float32), Var("i")
    >>> _accumulates([Store(acc, (i,), acc[i] + 1.0)], acc), _accumulates([Store(acc, (i,), 1.0)], acc)
    (True, False)
    """
    return any(isinstance(x, Store) and x.buffer is b and any(ld.buffer is b for ld in loads(x.value))
               for s in stmts for x in iter_stmts(s))


def _place_global_slices(plan: CudaPlan, k: KernelPlan, b, axes: tuple) -> None:
    """Place ``b`` (allocated in kernel ``k`` inside the thread loops of ``axes``) in a global
    buffer with one slice per block and per thread of ``axes``, each slice padded to a
    multiple of 16 bytes (so slices are as aligned as the buffer)."""
    i64 = "int64"
    slices = _product([*k.grid, *(k.block[ax] for ax in axes)], i64)
    per = max(1, 16 // (b.dtype.itemsize * b.dtype.lanes))
    stride = simplify(E.FloorDiv(_product(b.dims, i64) + IntImm(per - 1, i64), IntImm(per, i64)) * IntImm(per, i64))
    old = plan.placements.get(id(b))
    if old is not None and old.slice_stride is not None:     # allocated by another kernel too
        slices = simplify(E.Max(plan.scratch[old.scratch].dims[0], slices))
        index = old.scratch
        plan.scratch[index] = Buffer(b.name, (slices, stride), b.dtype)
    else:
        index = len(plan.scratch)
        plan.scratch.append(Buffer(b.name, (slices, stride), b.dtype))
    p = Placement(b, "global", k.index, scratch=index, slice_axes=axes,
                  slice_dims=tuple(k.block[ax] for ax in axes), slice_stride=stride)
    plan.placements[id(b)] = p
    plan.placements[id(plan.scratch[index])] = p


def _product(dims, dtype: str) -> Expr:
    out: Expr = IntImm(1, dtype)
    for d in dims:
        d = IntImm(d, dtype) if isinstance(d, int) else d
        out = out * (d if d.dtype == out.dtype else E.Cast(out.dtype, d))
    return simplify(out)


def promote_private(plan: CudaPlan, k: KernelPlan) -> None:
    """Shared buffers of kernel ``k`` that each thread uses privately become thread-local
    arrays (registers).

    A buffer qualifies when every access to it sits inside thread-bound loops on all of the
    kernel's thread axes (each starting at 0), its flat index (or the base of a contiguous
    ``ramp``, whose lanes extend ``r``) is ``sum(c_a * t_a) + r`` in
    those loop variables with the same coefficients ``c_a`` at every access, ``r`` does not
    depend on thread indices and lies in ``[0, R)``, and the coefficients give each thread
    a disjoint slice (sorted, ``c_1 >= R`` and ``c_(k+1) >= c_k * extent_k``). Each thread
    then keeps ``R`` elements, indexed by ``r`` -- the usual per-thread accumulator tile of
    a matmul, which must live across the serial K loop that holds the shared-memory copies.
    The module example shows the accumulator ``acc`` of a register-tiled matmul promoted.

    A thread's elements may also be spread out, and are then packed densely: every ``r`` a
    constant (unrolled loops), the thread offsets plus those constants all distinct (each
    thread keeps one slot per constant, ``private_slots``); or every ``r`` a sum of loop
    variables (each from 0) times coefficients that, with the thread coefficients, form a
    mixed radix (sorted, each at least the previous one times its extent; each thread keeps
    the product of those extents, ``private_strides``). An accumulator of several output
    channels per thread, say, in a tile whose channel dimension is outermost.
    """
    cands = {id(p.buffer): p for p in _placements_in(plan, k) if p.scope == "shared" and not p.slice_axes}
    if not cands or not k.thread_axes:
        return
    info: dict[int, dict] = {i: {"coef": None, "R": 0, "ext": {}, "ok": True, "digits": {}, "consts": set(),
                                 "packable": True} for i in cands}

    def check_index(bid, ix: Expr, threads: dict, ranges: dict):
        st = info[bid]
        if not st["ok"]:
            return
        if set(threads) != set(k.thread_axes) or any(not (isinstance(f.start, IntImm) and f.start.value == 0)
                                                   for f in threads.values()):
            st["ok"] = False
            return
        span = 1
        if type(ix) is E.Ramp and fold_int(ix.stride) == 1:   # a contiguous run: its base, and its lanes
            span, ix = ix.dtype.lanes, ix.base
        coef = {}
        rest = ix
        for ax, f in threads.items():
            c = linear_coeff(ix, f.var)
            if c is None:
                st["ok"] = False
                return
            ext = fold_int(extent(f))
            if ext is None:
                st["ok"] = False
                return
            # one thread on the axis: its coefficient says nothing (the simplifier may have
            # dropped the term of a variable that can only be 0)
            coef[ax] = c if ext > 1 else 0
            st["ext"][ax] = max(st["ext"].get(ax, 0), ext)
            rest = E.substitute(rest, {f.var: IntImm(0, f.var.dtype)})
        if st["coef"] is None:
            st["coef"] = coef
        elif st["coef"] != coef:
            st["ok"] = False
            return
        tvars = {id(f.var) for f in threads.values()}
        if any(id(v) in tvars for v in free_vars(rest)):
            st["ok"] = False
            return
        _record_digits(st, rest, span, ranges)
        lo_hi = interval(rest, ranges)
        if lo_hi is None or lo_hi[0] < 0:
            st["ok"] = False
            return
        st["R"] = max(st["R"], guarded_max(rest, lo_hi[1], accesses.limits, ranges) + span)

    accesses = _Accesses(info, check_index)
    accesses.visit(k.stmt, {}, {})
    for bid, st in info.items():
        if not st["ok"] or st["coef"] is None:
            continue
        need = st["R"]
        disjoint = True
        for ax in sorted(st["coef"], key=lambda ax: st["coef"][ax]):
            c = st["coef"][ax]
            if st["ext"][ax] == 1:
                continue
            if c < need:
                disjoint = False
                break
            need = c * st["ext"][ax]
        if disjoint:
            p = cands[bid]
            p.scope, p.private_size = "local", st["R"]
        elif st["packable"] and (st["digits"] or st["consts"]):
            packed = _packing(st)
            if packed is not None:
                p = cands[bid]
                p.scope = "local"
                p.private_strides, p.private_slots, p.private_size = packed


def _record_digits(st: dict, rest: Expr, span: int, ranges: dict) -> None:
    """Note the thread-free part ``rest`` of an index for a packed promotion: a constant goes
    to ``st["consts"]``; a sum of distinct coefficients times loop variables that start at 0
    to ``st["digits"]`` (coefficient -> largest extent). Anything else (or a vector's base, or
    both kinds in one buffer) clears ``st["packable"]``."""
    if not st["packable"]:
        return
    if span != 1:
        st["packable"] = False
        return
    r = fold_int(simplify(rest))
    if r is not None:
        st["consts"].add(r)
    else:
        seen = set()
        zero = {}
        for v in free_vars(rest):
            c = linear_coeff(rest, v)
            rng = ranges.get(id(v))
            if c is None or c <= 0 or c in seen or rng is None or rng[0] != 0:
                st["packable"] = False
                return
            seen.add(c)
            st["digits"][c] = max(st["digits"].get(c, 0), rng[1] + 1)
            zero[v] = IntImm(0, v.dtype)
        if fold_int(simplify(E.substitute(rest, zero))) != 0:
            st["packable"] = False
    if st["consts"] and st["digits"]:
        st["packable"] = False


#: at most this many (thread, element) pairs are enumerated to show constant slots disjoint
_MAX_PAIRS = 1 << 16


def _packing(st: dict):
    """How each thread packs its elements densely, ``(strides, slots, elements)``, or None:
    ``slots`` (constant index -> slot) when every index is a constant and the thread offsets
    plus those constants are all distinct; ``strides`` (coefficient -> stride) when the
    thread and loop-variable coefficients form a mixed radix."""
    threads = [(c, st["ext"][ax]) for ax, c in st["coef"].items() if st["ext"][ax] > 1]
    if st["consts"]:
        offsets = [0]
        for c, n in threads:
            offsets = [o + c * t for o in offsets for t in range(n)]
        consts = sorted(st["consts"])
        if len(offsets) * len(consts) > _MAX_PAIRS or \
                len({o + r for o in offsets for r in consts}) != len(offsets) * len(consts):
            return None
        return None, {r: i for i, r in enumerate(consts)}, len(consts)
    places = sorted(threads + list(st["digits"].items()))
    for (c, n), (c2, _) in zip(places, places[1:]):
        if c < 1 or c2 < c * n:
            return None
    strides, size = {}, 1
    for c, n in sorted(st["digits"].items()):
        strides[c] = size
        size *= n
    return strides, None, size


class _Accesses(StmtWalk):
    """``visit(s, threads, ranges)`` calls ``on_index(id(buffer), index, threads, ranges)`` for
    every load and store in ``s`` of the buffers keyed in ``bids``, with the thread loops
    around it (``{axis: For}``) and the ranges of the loop variables (``{id(var): (lo, hi)}``,
    None when not constant)."""

    def __init__(self, bids, on_index):
        self.bids, self.on_index = bids, on_index
        self.limits: list = []      # (e, c): e <= c where the access is (the guards around it)

    def visit_For(self, s: For, threads: dict, ranges: dict) -> None:
        lo, hi = fold_int(s.start), fold_int(s.stop)
        if lo is not None and hi is not None and hi <= lo:
            return      # no iteration (a split's main loop that its tail does all the work of)
        if s.kind == ForKind.GPU_THREAD:
            threads = {**threads, s.axis: s}
        ranges = {**ranges, id(s.var): (lo, hi - 1) if lo is not None and hi is not None else None}
        self.generic(s, threads, ranges)

    def visit_Store(self, s: Store, threads: dict, ranges: dict) -> None:
        self.generic(s, threads, ranges)
        if id(s.buffer) in self.bids:
            self.on_index(id(s.buffer), _index_of(s), threads, ranges)

    def visit_Cond(self, s: Cond, threads: dict, ranges: dict) -> None:
        """The then-branch runs only where the condition holds: the ranges it bounds (a mask's
        ``i_outer * 4 + i_inner < 2``) are narrowed there."""
        for ld in loads([s.cond]):
            if id(ld.buffer) in self.bids:
                self.on_index(id(ld.buffer), _index_of(ld), threads, ranges)
        narrowed = narrow_ranges(s.cond, ranges)
        if narrowed is not None:
            limits = upper_limits(s.cond)
            self.limits.extend(limits)
            try:
                self.visit(s.then, threads, narrowed)
            finally:
                del self.limits[len(self.limits) - len(limits):]
        if s.otherwise is not None:
            self.visit(s.otherwise, threads, ranges)

    def generic(self, s: Stmt, threads: dict, ranges: dict) -> None:
        for ld in loads(stmt_exprs(s)):
            if id(ld.buffer) in self.bids:
                self.on_index(id(ld.buffer), _index_of(ld), threads, ranges)
        super().generic(s, threads, ranges)


def upper_limits(cond: Expr) -> list:
    """The ``(e, c)`` with ``e <= c`` (``c`` constant) that ``cond`` says where it holds: its
    conjuncts ``e < c`` and ``e <= c``.

    >>> from te import Var
    >>> o, i, n = Var("o"), Var("i"), Var("n")
    >>> [(str(e), c) for e, c in upper_limits((o * 3 + i < 4) & (i <= n) & (o <= 1))]
    [('o * 3 + i', 3), ('o', 1)]
    """
    if isinstance(cond, E.And):
        return upper_limits(cond.a) + upper_limits(cond.b)
    c = fold_int(cond.b) if type(cond) in (E.LT, E.LE) else None
    return [] if c is None else [(cond.a, c - (1 if type(cond) is E.LT else 0))]


def guarded_max(e: Expr, hi: int, limits: list, ranges: dict) -> int:
    """An upper bound of ``e`` no larger than ``hi`` (its bound over the box ``ranges``), with
    the guards ``limits`` (``(g, c)``: ``g <= c``) around it: ``e = (e - g) + g`` is at most
    the bound of ``e - g`` plus ``c`` -- exact where ``g`` is a part of ``e``, a mask's
    ``o * 3 + i < 4`` in the index ``t * 4 + o * 3 + i`` (the box alone allows ``o = 1, i = 2``).

    >>> from te import Var
    >>> t, o, i = Var("t"), Var("o"), Var("i")
    >>> ranges = {id(t): (0, 3), id(o): (0, 1), id(i): (0, 2)}
    >>> e = t * 4 + o * 3 + i
    >>> interval(e, ranges)[1], guarded_max(e, 17, [(o * 3 + i, 3)], ranges)
    (17, 15)
    """
    for g, c in limits:
        rest = interval(simplify(e - g), ranges) if g.dtype == e.dtype else None
        if rest is not None:
            hi = min(hi, rest[1] + c)
    return hi


def narrow_ranges(cond: Expr, ranges: dict) -> dict | None:
    """``ranges`` (``{id(var): (lo, hi)}``) narrowed by what ``cond`` says where it holds: each
    conjunct ``e < c`` or ``e <= c`` (``c`` constant, ``e`` linear with a positive constant
    coefficient in a ranged variable) bounds that variable from above. None when no value of
    the ranges satisfies ``cond``.

    >>> from te import Var
    >>> o, i = Var("o"), Var("i")
    >>> narrow_ranges(o * 4 + i < 2, {id(o): (0, 0), id(i): (0, 3)}) == {id(o): (0, 0), id(i): (0, 1)}
    True
    """
    if isinstance(cond, E.And):
        first = narrow_ranges(cond.a, ranges)
        return None if first is None else narrow_ranges(cond.b, first)
    if type(cond) not in (E.LT, E.LE) or fold_int(cond.b) is None:
        return ranges
    limit = fold_int(cond.b) - (1 if type(cond) is E.LT else 0)      # cond: e <= limit
    out = dict(ranges)
    for v in free_vars(cond.a):
        r = out.get(id(v))
        c = linear_coeff(cond.a, v) if r is not None else None
        if c is None or c <= 0:
            continue
        others = interval(E.substitute(cond.a, {v: IntImm(0, v.dtype)}), out)
        if others is None:
            continue
        hi = (limit - others[0]) // c
        if hi < r[0]:
            return None
        out[id(v)] = (r[0], min(r[1], hi))
    return out


def _index_of(node) -> Expr:
    return node.indices[0] if node.indices else IntImm(0)


def private_index(k: KernelPlan, ix: Expr, strides: dict | None = None, slots: dict | None = None) -> Expr:
    """The index of a buffer promoted by :func:`promote_private` within the current thread's
    own elements: ``ix`` with the thread variables of kernel ``k`` set to 0; for a packed
    promotion, that constant's slot (``slots``) or each remaining variable's coefficient
    replaced by its stride (``strides``).

    >>> from te import Var
    >>> from loopnest.stmt import For, ForKind
    >>> t, r = Var("t"), Var("r")
    >>> k = KernelPlan(0, "k0", None, [], [For(t, 0, 32, [], ForKind.GPU_THREAD, 0)], None)
    >>> print(private_index(k, t * 4 + r))
    r
    """
    rest = simplify(E.substitute(ix, {f.var: IntImm(0, f.var.dtype) for f in k.thread_loops}))
    if slots is not None:
        return IntImm(slots[fold_int(rest)], rest.dtype)
    if strides is None:
        return rest
    out = IntImm(0, rest.dtype)
    for v in free_vars(rest):
        out = out + IntImm(strides[linear_coeff(rest, v)], rest.dtype) * v
    return simplify(out)
