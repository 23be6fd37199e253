"""The CUDA plan: every decision the CUDA passes take about a prepared nest, for the printer.

The passes of ``codegen.cuda.passes`` fill one :class:`CudaPlan` step by step -- kernels and
launch dimensions, memory scopes, barriers and one-thread sections, kernel arguments and
their aliasing qualifiers -- and the printer (``codegen.cuda.emit``) only spells them out
in CUDA C. Facts about statements are keyed by statement identity: the plan holds its own
copy of the tree (``root``) in which every statement object is distinct.

Each section prints as text (the pass dumps show it after the pass that recorded it):

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> from codegen.kernel import make_params
>>> from codegen.cuda.passes import plan_cuda
>>> A = Buffer("A", (256,), "float32")
>>> B = Compute("B", (256,), lambda i: A[i] + 1.0)
>>> nest = LoopNest([B])
>>> bo, bi = nest.split_with_mask(nest.get_loops_for(B)[0], 128)
>>> _ = nest.set_gpu_block_index(bo, 0), nest.set_gpu_thread_index(bi, 0)
>>> nest = nest.prepare_for_codegen()
>>> print(plan_cuda(nest, make_params(nest, [A, B]), "add1"))
kernel k0_add1: grid (2, 1, 1), block (128, 1, 1)
  blockIdx.x: i_outer
  threadIdx.x: i_inner (extent 128)
kernel k0_add1: no shared memory
kernel k0_add1: no barriers, no one-thread sections
A: const __restrict__ (no kernel writes it)
B: neither const nor __restrict__ (written by k0_add1)
k0_add1(A, B)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from te.expr import Expr, Var
from te.printer import expr_to_str
from te.queries import fold_int, free_vars
from loopnest.stmt import For, Stmt, iter_stmts

from ..kernel import Param, eval_int_expr
from .ir_queries import AXES, extent

__all__ = ["ArgRef", "KernelSpec", "Guard", "Placement", "KernelPlan", "CudaPlan", "HostLoop", "launches",
           "STATIC_SHARED_BYTES"]

#: the most shared memory a kernel may declare statically (``__shared__`` arrays); a kernel
#: that needs more takes it as dynamic shared memory (``extern __shared__``), which the device
#: must allow (its opt-in limit: 163 KiB on sm_80, 227 KiB on sm_90), see ``KernelSpec.dynamic_shared``
STATIC_SHARED_BYTES = 48 * 1024


@dataclass(frozen=True)
class ArgRef:
    """One kernel argument: a user buffer (``param`` index into the Kernel's buffer params),
    a launcher-allocated global buffer (``scratch`` index) or a size variable.

    ``written``: this kernel stores to the buffer. ``readonly``: no kernel of the module
    stores to it, so it is declared ``const``; ``restrict``: it is also declared
    ``__restrict__`` in this kernel (see ``codegen.cuda.aliasing`` for the rule).

    >>> ArgRef("param", 0, name="b_A", readonly=True, restrict=True)
    ArgRef(kind='param', index=0, var=None, name='b_A', written=False, readonly=True, restrict=True)
    """

    kind: str              # "param" | "scratch" | "size"
    index: int = -1
    var: Var | None = None
    name: str = ""         # the C name, for messages
    written: bool = False
    readonly: bool = False
    restrict: bool = False


@dataclass
class KernelSpec:
    """One ``__global__`` function and how to launch it.

    >>> from te import Var
    >>> n = Var("n")
    >>> ks = KernelSpec("k0_f", (n, 1, 1), (128, 1, 1), [], 0, True)
    >>> ks.static_threads, ks.dims({id(n): 5})
    (128, ((5, 1, 1), (128, 1, 1)))
    """

    name: str
    grid: tuple            # three ints or size expressions (evaluated at launch)
    block: tuple
    args: list[ArgRef]
    shared_bytes: int
    bound: bool            # False: a single-thread kernel (no GPU-bound loops)
    stmt: Stmt = field(default=None, repr=False)

    @property
    def dynamic_shared(self) -> int:
        """Bytes of dynamic shared memory to launch with: all of ``shared_bytes`` when they are
        more than ``STATIC_SHARED_BYTES`` (the kernel then declares its shared buffers in one
        ``extern __shared__`` array), else 0.

        >>> KernelSpec("k", (1, 1, 1), (32, 1, 1), [], 64 * 1024, True).dynamic_shared
        65536
        """
        return self.shared_bytes if self.shared_bytes > STATIC_SHARED_BYTES else 0

    @property
    def static_threads(self) -> int | None:
        """Threads per block when every block dimension is constant, else None."""
        vals = [fold_int(d) if isinstance(d, Expr) else d for d in self.block]
        return math.prod(vals) if all(v is not None for v in vals) else None

    def dims(self, sizes: dict) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """(grid, block) for sizes ``{id(var): int}``; negative extents count as 0."""
        def ev(d):
            return max(0, d if isinstance(d, int) else eval_int_expr(d, sizes))
        return tuple(ev(d) for d in self.grid), tuple(ev(d) for d in self.block)


@dataclass
class HostLoop:
    """A serial loop around kernels, run by the launcher: ``items`` (kernel indices and nested
    host loops, in order) are launched once per value of ``var`` from ``start`` to ``stop``
    (expressions of the size variables and the host loops around), the value passed to each
    kernel that uses it as a scalar argument.

    >>> from te import Var
    >>> i = Var("i")
    >>> [(k, env.get(id(i))) for k, env in launches([0, HostLoop(i, 0, 2, [1, 2])], {})]
    [(0, None), (1, 0), (2, 0), (1, 1), (2, 1)]
    """

    var: Var
    start: Any
    stop: Any
    items: list = field(default_factory=list)

    def describe(self) -> str:
        """One line for the plan dumps: ``HostLoop(i, 0, 2).describe()`` is ``'host loop i from 0 to 2'``."""
        return f"host loop {self.var.name} from {_dim(self.start)} to {_dim(self.stop)}"


def launches(schedule: list, sizes: dict):
    """The kernel launches of ``schedule`` (kernel indices and :class:`HostLoop`), in order:
    ``(kernel index, env)`` with ``env`` = ``sizes`` (``{id(var): int}``) plus the values of
    the host loops around the launch (see the ``HostLoop`` example)."""
    for item in schedule:
        if isinstance(item, HostLoop):
            lo = item.start if isinstance(item.start, int) else eval_int_expr(item.start, sizes)
            hi = item.stop if isinstance(item.stop, int) else eval_int_expr(item.stop, sizes)
            for v in range(lo, hi):
                yield from launches(item.items, {**sizes, id(item.var): v})
        else:
            yield item, sizes


@dataclass(frozen=True)
class Guard:
    """Statements that every thread of some axes reaches but only one of them may execute:
    the ``span`` sibling statements starting at the keyed one run under
    ``threadIdx.<axis> == 0`` for each of ``axes`` -- as a whole (``whole``), or, when they
    also store to thread-local arrays (which every thread keeps for itself), only their
    stores to shared and global memory.

    >>> g = Guard((0, 1), True, 2)
    >>> g.cond
    'threadIdx.x == 0 && threadIdx.y == 0'
    """

    axes: tuple
    whole: bool
    span: int = 1

    @property
    def cond(self) -> str:
        """The C condition selecting the one thread."""
        return " && ".join(f"threadIdx.{AXES[a]} == 0" for a in self.axes)


@dataclass
class Placement:
    """Where an allocated buffer lives.

    ``scope`` is ``"global"`` (launcher-allocated, passed as argument ``scratch``),
    ``"shared"`` (``__shared__``; with ``slice_axes``: one slice of the buffer per thread of
    those thread axes, whose block sizes are ``slice_dims``) or ``"local"`` (a thread-local
    array; ``private_size``: promoted from shared memory, each thread keeping that many
    elements indexed without the thread variables; packed densely with ``private_slots``
    (constant index -> slot) or ``private_strides`` (coefficient of a loop variable in the
    index -> its stride in the thread's array)).
    ``offset``: the byte offset of a shared buffer in its kernel's shared memory (in
    allocation order, a multiple of ``align``: 16 bytes, 1024 for a swizzled warpgroup-MMA
    operand).

    >>> from te import Buffer
    >>> p = Placement(Buffer("t", (16,), "float32"), "shared", slice_axes=(1,), slice_dims=(8,))
    >>> p.elements, p.nbytes
    (128, 512)
    """

    buffer: Any
    scope: str
    kernel: int | None = None       # the kernel allocating it; None: the top level of the module
    scratch: int | None = None
    slice_axes: tuple = ()
    slice_dims: tuple = ()
    private_size: int | None = None
    private_strides: dict | None = None
    private_slots: dict | None = None
    offset: int = 0
    slice_stride: Any = None        # global with slices: elements per slice (an expression)
    spilled: bool = False           # global because the kernel's shared buffers were over the limit
    align: int = 16                 # bytes, of a shared buffer's offset
    pinned: bool = False            # its Allocate asked for this scope

    @property
    def slices(self) -> int:
        """Slices of a sliced shared buffer (1 otherwise)."""
        return math.prod(self.slice_dims) if self.slice_dims else 1

    @property
    def elements(self) -> int | None:
        """Elements declared (per thread for local arrays), None when only known at launch."""
        if self.private_size is not None:
            return self.private_size
        n = self.buffer.static_size()
        return None if n is None else n * self.slices

    @property
    def nbytes(self) -> int | None:
        """Bytes declared (see ``elements``)."""
        n = self.elements
        return None if n is None else n * self.buffer.dtype.itemsize * self.buffer.dtype.lanes


@dataclass
class KernelPlan:
    """One ``__global__`` function: the top-level statement ``stmt`` it runs, its bound
    loops, launch dimensions, and what the later passes decided inside it.

    ``region`` is what every thread of a block executes (the body of the innermost block
    loop); ``guarded`` holds the ids of thread loops shorter than the block (run under
    ``if (threadIdx.<a> < extent)``); ``barriers`` lists, in text order, the statement
    each ``__syncthreads()`` precedes; ``guards`` maps statement ids to :class:`Guard`.

    >>> from codegen.cuda import examples
    >>> from codegen import build
    >>> ex = examples.matmul_tiled()
    >>> k = build(ex.nest, ex.args, target="cuda").module.plan.kernels[0]
    >>> k.name, k.bound, k.thread_axes, len(k.barriers), k.barriers_before(k.barriers[0])
    ('k0_C', True, [0, 1], 2, 1)
    """

    index: int
    name: str
    stmt: Stmt
    block_loops: list[For]
    thread_loops: list[For]
    region: Stmt
    grid: tuple = (1, 1, 1)
    block: tuple = (1, 1, 1)
    guarded: frozenset = frozenset()
    shared_bytes: int = 0
    spilled_shared_bytes: int = 0   # the shared bytes asked for when some moved to global memory
    barriers: list[Stmt] = field(default_factory=list)
    guards: dict[int, Guard] = field(default_factory=dict)
    args: list[ArgRef] = field(default_factory=list)
    arg_objects: list[Any] = field(default_factory=list)   # the Buffer / Var behind each of args
    select_hazards: dict[int, tuple] = field(default_factory=dict)  # id(R) -> (R, W): R loses __restrict__
    host_loops: tuple = ()       # the HostLoops around the kernel, outermost first

    @property
    def thread_axes(self) -> list[int]:
        """The thread axes some loop of the kernel is bound to, sorted."""
        return sorted({f.axis for f in self.thread_loops})

    @property
    def bound(self) -> bool:
        """False for a single-thread kernel (no GPU-bound loop)."""
        return bool(self.block_loops or self.thread_loops)

    def barriers_before(self, s: Stmt) -> int:
        """How many ``__syncthreads()`` precede statement ``s``."""
        return sum(1 for x in self.barriers if x is s)

    def spec(self) -> KernelSpec:
        """The launch description the Kernel keeps."""
        return KernelSpec(self.name, self.grid, self.block, list(self.args), self.shared_bytes, self.bound,
                          self.stmt)


def _dim(d) -> str:
    n = d if isinstance(d, int) else fold_int(d)
    return str(n) if n is not None else expr_to_str(d)


def _first_line(s: Stmt, width: int = 72) -> str:
    text = str(s).strip()
    line = text.splitlines()[0] if text else type(s).__name__
    return line if len(line) <= width else line[:width - 3] + "..."


@dataclass
class CudaPlan:
    """Everything the CUDA passes decide about one module (see the module docstring).

    Built by ``codegen.cuda.passes.plan_cuda``; ``str(plan)`` prints every section recorded.
    A built CUDA kernel keeps it as ``kernel.module.plan``:

    >>> from codegen.cuda import examples
    >>> from codegen import build
    >>> ex = examples.softmax_rows()
    >>> plan = build(ex.nest, ex.args, target="cuda").module.plan
    >>> plan.done, [b.name for b in plan.scratch], plan.scope(plan.scratch[0]), plan.scope(ex.args[0])
    (['kernels', 'memory', 'tensor_cores', ..., 'async_copies', 'async_waits'], ['mx', 'e', 's'], 'global', 'param')
    """

    root: Stmt
    params: list[Param]
    base: str
    max_threads: int
    max_shared: int
    kernels: list[KernelPlan] = field(default_factory=list)
    schedule: list = field(default_factory=list)      # kernel indices and HostLoops, in launch order
    placements: dict[int, Placement] = field(default_factory=dict)   # id(buffer) -> where it lives
    scratch: list[Any] = field(default_factory=list)
    readonly: set[int] = field(default_factory=set)                    # ids of buffers no kernel writes
    written_by: dict[int, list[str]] = field(default_factory=dict)     # id(buffer) -> kernel names
    done: list[str] = field(default_factory=list)                      # the sections recorded so far
    # cuda_vector_access (codegen.cuda.vectors): id(store) -> WideAccess; id(store or LetStmt) ->
    # [(WideAccess, ids of the loads reading it)]; param index -> pointer alignment in bytes
    wide_stores: dict[int, Any] = field(default_factory=dict)
    hoisted: dict[int, list] = field(default_factory=dict)
    param_alignment: dict[int, int] = field(default_factory=dict)
    # cuda_tensor_cores (codegen.cuda.tensor_cores): id(loop) -> MmaNest; kernel name -> [MmaNest]
    mma: dict[int, Any] = field(default_factory=dict)
    async_copies: dict[int, Any] = field(default_factory=dict)   # id of a store issued as cp.async -> its source
    # cuda_async_waits (codegen.cuda.async_wait): ids of the statements followed by a commit;
    # id of a barrier's statement -> the groups its wait leaves in flight (None: no wait)
    async_commits: set[int] = field(default_factory=set)
    async_waits: dict[int, Any] = field(default_factory=dict)
    mma_by_kernel: dict[str, list] = field(default_factory=dict)
    tensorized: dict = field(default_factory=dict)       # loop variable -> intrinsic (nest.tensorize)
    mma_refusals: dict = field(default_factory=dict)     # loop variable -> why it is not an MMA
    # cuda_wgmma_overlap (codegen.cuda.wgmma_overlap): id(loop) -> the loop after which every
    # warpgroup MMA group is waited for (its nests leave one group in flight per iteration)
    wgmma_drains: dict[int, Any] = field(default_factory=dict)

    @property
    def buffer_params(self) -> list[Param]:
        """The buffer arguments of build, in order (their index is ArgRef.index)."""
        return [p for p in self.params if p.is_buffer]

    @property
    def size_ids(self) -> set[int]:
        """Ids of the size variables known at launch: scalar arguments and buffer dimensions."""
        out: set[int] = set()
        for p in self.params:
            if p.var is not None:
                out.add(id(p.var))
            if p.buffer is not None:
                out.update(id(v) for v in free_vars(p.buffer.dims))
        return out

    def launch_ids(self, k: KernelPlan) -> set[int]:
        """Ids of the variables known when kernel ``k`` is launched: the sizes and its host loops."""
        return self.size_ids | {id(h.var) for h in k.host_loops}

    def scope(self, buf) -> str:
        """``"param"`` for a build argument, else the scope of its Placement."""
        p = self.placements.get(id(buf))
        return p.scope if p is not None else "param"

    # -- text ------------------------------------------------------------------------
    def describe_tensor_cores(self) -> str:
        """The loop nests printed as ``mma.sync`` (recorded by ``cuda_tensor_cores``), per
        kernel that has any; empty when none has."""
        out = []
        for k in self.kernels:
            nests = self.mma_by_kernel.get(k.name, [])
            if nests:
                out.append(f"kernel {k.name}: {len(nests)} warp MMA nest(s)")
                out.extend(f"  {m.describe()}" for m in nests)
        return "\n".join(out)

    def describe_wgmma_overlap(self) -> str:
        """The warpgroup MMA nests that leave their group running into the next iteration of
        their loop (recorded by ``cuda_wgmma_overlap``), per kernel that has any."""
        out = []
        for k in self.kernels:
            nests = [m for m in self.mma_by_kernel.get(k.name, []) if getattr(m, "in_flight", 0)]
            if nests:
                loops = {id(f): f.var.name for f in iter_stmts(k.region) if id(f) in self.wgmma_drains}
                out.append(f"kernel {k.name}: {len(nests)} warpgroup MMA nest(s) in flight across iterations of "
                           f"{', '.join(loops.values())}")
        return "\n".join(out)

    def describe_kernels(self) -> str:
        """Kernels, launch dimensions and bound loops (recorded by ``cuda_outline_kernels``)."""
        out = []
        for k in self.kernels:
            if not k.bound:
                out.append(f"kernel {k.name}: a single thread <<<1, 1>>> (no loop is bound to the GPU)")
            else:
                out.append(f"kernel {k.name}: grid ({', '.join(map(_dim, k.grid))}), "
                           f"block ({', '.join(map(_dim, k.block))})")
            if k.host_loops:
                out.append("  launched once per iteration of " + ", ".join(h.describe() for h in k.host_loops))
            if not k.bound:
                continue
            for f in k.block_loops:
                out.append(f"  blockIdx.{AXES[f.axis]}: {f.var.name}")
            for f in k.thread_loops:
                ext = _dim(extent(f))
                g = f", guarded: threadIdx.{AXES[f.axis]} < {ext}" if id(f) in k.guarded else ""
                out.append(f"  threadIdx.{AXES[f.axis]}: {f.var.name} (extent {ext}{g})")
        return "\n".join(out) or "no kernels"

    def describe_memory(self) -> str:
        """Where every allocated buffer lives (recorded by ``cuda_memory_scopes``)."""
        out = []
        glob = [self.placements[id(b)] for b in self.scratch]
        if glob:
            out.append("global, allocated by the launcher: " + ", ".join(
                f"{b.name}[{', '.join(_dim(d) for d in b.dims)}]" for b in self.scratch))
        for p in glob:
            if p.slice_stride is not None:
                per = " and per thread of " + "/".join(f"threadIdx.{AXES[a]}" for a in p.slice_axes) \
                    if p.slice_axes else ""
                k = self.kernels[p.kernel]
                why = (f"moved out of shared memory: the kernel's shared buffers need {k.spilled_shared_bytes} B, "
                       f"more than the limit of {self.max_shared} B" if p.spilled else "its size is known only at launch")
                out.append(f"  {p.buffer.name}: one slice of {_dim(p.slice_stride)} x {p.buffer.dtype} per block{per}"
                           f" of kernel {k.name} ({why})")
        for k in self.kernels:
            mine = [p for p in self.placements.values() if p.kernel == k.index and p.scope != "global"]
            if not mine:
                out.append(f"kernel {k.name}: no shared memory")
                continue
            out.append(f"kernel {k.name}: {k.shared_bytes} B of shared memory")
            for p in mine:
                dt = p.buffer.dtype
                if p.scope == "local" and p.private_size is not None:
                    what = f"local, promoted from shared: {p.private_size} x {dt} per thread"
                elif p.scope == "local":
                    what = f"local, {p.elements} x {dt} per thread"
                elif p.slice_axes:
                    axes = "/".join(f"threadIdx.{AXES[a]}" for a in p.slice_axes)
                    what = (f"shared, one slice of {p.buffer.static_size()} x {dt} per thread of {axes} "
                            f"({p.nbytes} B)")
                else:
                    what = f"shared, {p.elements} x {dt} ({p.nbytes} B)"
                out.append(f"  {p.buffer.name}: {what}")
        return "\n".join(out) or "no allocations"

    def describe_sync(self) -> str:
        """Barriers and one-thread sections (recorded by ``cuda_sync``)."""
        out = []
        for k in self.kernels:
            if not k.barriers and not k.guards:
                out.append(f"kernel {k.name}: no barriers, no one-thread sections")
                continue
            out.append(f"kernel {k.name}: {len(k.barriers)} barrier(s), {len(k.guards)} one-thread section(s)")
            for s in k.barriers:
                out.append(f"  __syncthreads() before: {_first_line(s)}")
            stmts = {id(x): x for x in iter_stmts(k.stmt)}
            for sid, g in k.guards.items():
                what = "runs" if g.whole else "makes the shared/global stores of"
                more = f" (+{g.span - 1} more)" if g.span > 1 else ""
                out.append(f"  if ({g.cond}) {what}: {_first_line(stmts[sid])}{more}")
        return "\n".join(out) or "no kernels"

    def describe_arguments(self) -> str:
        """Aliasing qualifiers of every buffer argument and each kernel's signature
        (recorded by ``cuda_arguments``)."""
        out = []
        seen: dict[int, Any] = {}
        for k in self.kernels:
            for a, obj in zip(k.args, k.arg_objects):
                if a.kind != "size":
                    seen.setdefault(id(obj), (obj, a.kind))
        for bid, (b, kind) in seen.items():
            tag = " (scratch)" if kind == "scratch" else ""
            if bid in self.readonly:
                out.append(f"{b.name}{tag}: const __restrict__ (no kernel writes it)")
                for k in self.kernels:
                    if bid in k.select_hazards:
                        w = k.select_hazards[bid][1]
                        out.append(f"  only const in {k.name}: a select loads it on one side and {w.name}, "
                                   "which the module writes, on the other")
            else:
                out.append(f"{b.name}{tag}: neither const nor __restrict__ (written by "
                           f"{', '.join(self.written_by.get(bid, []))})")
        for k in self.kernels:
            out.append(f"{k.name}({', '.join(getattr(o, 'name', '?') for o in k.arg_objects)})")
        return "\n".join(out)

    def describe_async_copies(self) -> str:
        """The copies into shared memory issued as ``cp.async`` (recorded by
        ``cuda_async_copies``), per kernel that has any; empty when none has."""
        out = []
        for k in self.kernels:
            mine = [s for s in iter_stmts(k.stmt) if id(s) in self.async_copies]
            if not mine:
                continue
            out.append(f"kernel {k.name}: {len(mine)} copies into shared memory issued as cp.async "
                       "(waited for before each barrier)")
            for s in mine:
                w = self.wide_stores[id(s)]
                out.append(f"  {s.buffer.name} <- {self.async_copies[id(s)].buffer.name}: "
                           f"{w.chunks} chunk(s) of {w.vtype.nbytes} B per store")
        return "\n".join(out)

    def describe_async_waits(self) -> str:
        """Where ``cp.async`` groups are committed and what each barrier waits for (recorded
        by ``cuda_async_waits``), per kernel that issues copies; empty when none does."""
        out = []
        for k in self.kernels:
            if not self.kernel_has_async_copies(k):
                continue
            commits = sum(1 for x in iter_stmts(k.stmt) if id(x) in self.async_commits)
            if not commits:
                out.append(f"kernel {k.name}: every barrier waits for every copy (cp.async.wait_all)")
                continue
            partial = [s for s in k.barriers if self.async_waits.get(id(s), 0) != 0]
            out.append(f"kernel {k.name}: {commits} commit point(s); {len(partial)} barrier(s) wait for all but "
                       "the newest groups")
            for s in k.barriers:
                n = self.async_waits.get(id(s), 0)
                what = "no wait" if n is None else "cp.async.wait_all" if n == 0 else f"cp.async.wait_group {n}"
                out.append(f"  {what} before: {_first_line(s)}")
        return "\n".join(out)

    def kernel_has_async_copies(self, k) -> bool:
        """Whether kernel ``k`` issues ``cp.async`` copies (its barriers wait for them first)."""
        return any(id(s) in self.async_copies for s in iter_stmts(k.stmt))

    def describe_vectors(self) -> str:
        """The loads and stores done as whole CUDA vectors, and the alignment buffer arguments
        need (recorded by ``cuda_vector_access``); empty when there are none."""
        out = []
        stmts = {id(x): x for x in iter_stmts(self.root)}

        def show(what, w):
            idx = expr_to_str(w.index)
            return (f"{what} {w.buffer.name}[{idx}]: {w.chunks} x {w.vtype.name} "
                    f"({w.vtype.align} B aligned)")
        for sid, s in stmts.items():
            for w, _ in self.hoisted.get(sid, []):
                out.append(show("load", w))
            if sid in self.wide_stores:
                out.append(show("store", self.wide_stores[sid]))
        if self.param_alignment:
            bufs = self.buffer_params
            out.append("pointers checked at launch: " + ", ".join(
                f"{bufs[i].name} {a} B aligned" for i, a in self.param_alignment.items()))
        return "\n".join(out)

    def __str__(self) -> str:
        parts = {"kernels": self.describe_kernels, "memory": self.describe_memory,
                 "tensor_cores": self.describe_tensor_cores, "sync": self.describe_sync,
                 "wgmma_overlap": self.describe_wgmma_overlap,
                 "arguments": self.describe_arguments, "vectors": self.describe_vectors,
                 "async_copies": self.describe_async_copies, "async_waits": self.describe_async_waits}
        return "\n".join(t for t in (parts[s]() for s in self.done) if t)
