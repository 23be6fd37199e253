"""Kernel outlining: which statements become ``__global__`` functions, and their launch dimensions.

Each top-level statement of the root Block (Allocate/Free aside) becomes one kernel,
launched in order. Its ``gpu_block`` loops must be the outermost loops (a chain of
single-statement bodies); their extents are the grid. A top-level serial loop with block
loops inside is a *host loop*, as in Halide: the launcher runs it, launching the kernels of
its body (outlined in the same way, host loops nested) once per iteration, each kernel
taking the loop's value as a scalar argument where it uses it. A kernel's ``gpu_thread`` loops
give the block: per axis the largest extent, and the shorter loops of that axis are *guarded*
(``if (threadIdx.x < extent)``); at least one thread where the kernel has work outside an
axis's loops, which may all be empty. Extents stay expressions of the size variables when they
are not constant, evaluated at launch. A statement with no GPU-bound loop is a
single-thread kernel (``<<<1, 1>>>``).

Before (IR)::

    gpu_block.x for (int i_outer = 0; i_outer < 2; i_outer++) {
      gpu_thread.x for (int i_inner = 0; i_inner < 128; i_inner++) { ... }
    }

After (plan)::

    kernel k0_f: grid (2, 1, 1), block (128, 1, 1)
      blockIdx.x: i_outer
      threadIdx.x: i_inner (extent 128)

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> from codegen.kernel import make_params
>>> from codegen.cuda.plan import CudaPlan
>>> A = Buffer("A", (100,), "float32")
>>> B = Compute("B", (100,), lambda i: A[i] * 2.0)
>>> nest = LoopNest([B])
>>> _ = nest.set_gpu_thread_index(nest.get_loops_for(B)[0], 0)
>>> nest = nest.prepare_for_codegen()
>>> plan = CudaPlan(nest.root, make_params(nest, [A, B]), "f", 1024, 48 * 1024)
>>> outline_kernels(plan)
>>> print(plan.describe_kernels())
kernel k0_f: grid (1, 1, 1), block (100, 1, 1)
  threadIdx.x: i (extent 100)
"""
from __future__ import annotations

import math
from typing import Any

from te import expr as E
from te.expr import Expr, IntImm
from te.queries import fold_int, free_vars, structural_equal
from loopnest.stmt import Allocate, ExternCall, For, ForKind, Free, Stmt, Store, iter_stmts
from loopnest.transforms.loop_kinds import MAX_BLOCK_DIMS, MAX_BLOCK_THREADS, MAX_GRID_DIMS

from ..kernel import BuildError
from .ir_queries import AXES, StmtWalk, extent, flatten, fresh_copy
from .plan import CudaPlan, HostLoop, KernelPlan

__all__ = ["outline_kernels", "host_level", "is_host_loop", "MAX_THREADS_PER_BLOCK", "MAX_SHARED_BYTES",
           "MAX_BLOCK_DIMS", "MAX_GRID_DIMS"]

MAX_THREADS_PER_BLOCK = MAX_BLOCK_THREADS
MAX_SHARED_BYTES = 48 * 1024


def outline_kernels(plan: CudaPlan) -> None:
    """Record the kernels of ``plan.root`` (made a fresh copy first) in ``plan.kernels``,
    with their bound loops and launch dimensions (see the module docstring)."""
    plan.root = fresh_copy(plan.root)
    plan.schedule = _outline(plan, plan.root, ())


def _outline(plan: CudaPlan, s: Stmt, host: tuple) -> list:
    """The launch schedule of the host-level statements of ``s`` (``host``: the HostLoops
    around them), recording their kernels in ``plan.kernels``."""
    items: list = []
    for x in flatten(s):
        if isinstance(x, (Allocate, Free)):
            continue
        if is_host_loop(x):
            known = plan.size_ids | {id(h.var) for h in host}
            bad = [v for v in free_vars([x.start, x.stop]) if id(v) not in known]
            if bad:
                raise BuildError(f"the bounds of loop {x.var.name}, which holds gpu_block loops and so runs on the "
                                 f"host, depend on {', '.join(v.name for v in bad)}, which is neither a size "
                                 "argument nor a host loop")
            h = HostLoop(x.var, fold_int(x.start) if fold_int(x.start) is not None else x.start,
                         fold_int(x.stop) if fold_int(x.stop) is not None else x.stop)
            h.items = _outline(plan, x.body, host + (h,))
            items.append(h)
            continue
        k = _kernel(x, len(plan.kernels), plan.base)
        k.host_loops = host
        k.grid, k.block, k.guarded = _dims(k, plan.launch_ids(k), plan.max_threads)
        plan.kernels.append(k)
        items.append(k.index)
    return items


def is_host_loop(s: Stmt) -> bool:
    """Whether ``s`` is a loop the launcher runs: a serial loop with block loops inside."""
    return isinstance(s, For) and s.kind == ForKind.SERIAL and any(
        isinstance(x, For) and x.kind == ForKind.GPU_BLOCK for x in iter_stmts(s.body))


def host_level(s: Stmt) -> list[Stmt]:
    """The statements of ``s`` at host level, in order: its top-level statements, with the
    bodies of host loops spliced in (the host loops themselves left out). Each one that is
    neither an Allocate nor a Free is a kernel, in the order of ``plan.kernels``."""
    out: list[Stmt] = []
    for x in flatten(s):
        out.extend(host_level(x.body) if is_host_loop(x) else [x])
    return out


def _kernel(stmt: Stmt, index: int, base: str) -> KernelPlan:
    block_loops: list[For] = []
    region: Stmt = stmt
    s = stmt
    while isinstance(s, For) and s.kind == ForKind.GPU_BLOCK:
        block_loops.append(s)
        if len(s.body.stmts) == 1 and isinstance(s.body.stmts[0], For) \
                and s.body.stmts[0].kind == ForKind.GPU_BLOCK:
            s = s.body.stmts[0]
            continue
        region = s.body
        break
    chain = {id(f) for f in block_loops}
    for x in iter_stmts(stmt):
        if isinstance(x, For) and x.kind == ForKind.GPU_BLOCK and id(x) not in chain:
            raise BuildError(
                f"gpu_block loop {x.var.name} is not among the outermost loops of its nest: "
                "block-bound loops must enclose everything else of a top-level nest, each "
                "the single statement of the one above (a kernel has one grid); only serial loops "
                "at the top level may hold them (the launcher runs those)")
    for f in block_loops:
        if f.axis not in (0, 1, 2):
            raise BuildError(f"gpu_block loop {f.var.name} has axis {f.axis!r}; expected 0, 1 or 2")
    axes = [f.axis for f in block_loops]
    if len(set(axes)) != len(axes):
        raise BuildError(f"two gpu_block loops of one nest are bound to the same axis "
                         f"({', '.join(f'{f.var.name}->blockIdx.{AXES[f.axis]}' for f in block_loops)})")
    finder = _ThreadLoops()
    finder.visit(region, ())
    return KernelPlan(index, f"k{index}_{base}", stmt, block_loops, finder.found, region)


class _ThreadLoops(StmtWalk):
    """``visit(s, outer)`` collects the ``gpu_thread`` loops of ``s`` in ``found`` (pre-order),
    refusing bad axes and a loop nested in one bound to the same axis (``outer``: the thread
    loops around ``s``)."""

    def __init__(self):
        self.found: list[For] = []

    def visit_For(self, s: For, outer: tuple) -> None:
        if s.kind == ForKind.GPU_THREAD:
            if s.axis not in (0, 1, 2):
                raise BuildError(f"gpu_thread loop {s.var.name} has axis {s.axis!r}; expected 0, 1 or 2")
            for o in outer:
                if o.axis == s.axis:
                    raise BuildError(f"gpu_thread loop {s.var.name} is nested inside gpu_thread loop "
                                     f"{o.var.name}, both bound to threadIdx.{AXES[s.axis]}")
            self.found.append(s)
            outer = outer + (s,)
        self.generic(s, outer)


def _launch_extent(f: For, what: str, known: set[int]) -> Expr:
    ext = extent(f)
    bad = [v for v in free_vars(ext) if id(v) not in known]
    if bad:
        raise BuildError(f"the extent of {what} loop {f.var.name} ({ext}) depends on "
                         f"{', '.join(v.name for v in bad)}, which is neither a size argument nor a host loop: "
                         "grid and block sizes must be known at launch (split with a mask rather than a tail, "
                         "or bind an outer loop)")
    return ext


def _work_outside(region: Stmt, loops: list[For]) -> bool:
    """Whether ``region`` stores (or calls) anywhere outside ``loops``."""
    inside = {id(x) for f in loops for x in iter_stmts(f)}
    return any(isinstance(x, (Store, ExternCall)) and id(x) not in inside for x in iter_stmts(region))


def _dims(k: KernelPlan, known: set[int], max_threads: int) -> tuple[tuple, tuple, frozenset]:
    grid: list[Any] = [1, 1, 1]
    for f in k.block_loops:
        grid[f.axis] = _launch_extent(f, "gpu_block", known)
    block: list[Any] = [1, 1, 1]
    guarded: set[int] = set()
    for a in range(3):
        loops = [f for f in k.thread_loops if f.axis == a]
        if not loops:
            continue
        exts = [_launch_extent(f, "gpu_thread", known) for f in loops]
        consts = [fold_int(x) for x in exts]
        # the launch skips a kernel with an empty block, right only when these loops hold all its work
        at_least_one = _work_outside(k.region, loops)
        if all(c is not None for c in consts):
            m = max(consts)
            block[a] = IntImm(max(m, 1) if at_least_one else m)
            guarded |= {id(f) for f, c in zip(loops, consts) if c != block[a].value}
        elif all(structural_equal(x, exts[0]) for x in exts) and not at_least_one:
            block[a] = exts[0]
        else:
            d = exts[0]
            for x in exts[1:]:
                d = E.Max(d, x) if d.dtype == x.dtype else d
            block[a] = E.Max(d, IntImm(1, d.dtype)) if at_least_one else d
            guarded |= {id(f) for f in loops}
    grid = tuple(fold_int(g) if isinstance(g, Expr) and fold_int(g) is not None else g for g in grid)
    block = tuple(fold_int(b) if isinstance(b, Expr) and fold_int(b) is not None else b for b in block)
    for a, (g, lim) in enumerate(zip(grid, MAX_GRID_DIMS)):
        if isinstance(g, int) and g > lim:
            raise BuildError(f"kernel {k.index}: the grid has {g} blocks on axis {AXES[a]}, more than the "
                             f"CUDA limit {lim}")
    for a, (b, lim) in enumerate(zip(block, MAX_BLOCK_DIMS)):
        if isinstance(b, int) and b > lim:
            raise BuildError(f"kernel {k.index}: {b} threads on axis {AXES[a]} exceed the CUDA limit {lim} "
                             f"(loops {', '.join(f.var.name for f in k.thread_loops if f.axis == a)})")
    if all(isinstance(b, int) for b in block) and math.prod(block) > max_threads:
        raise BuildError(f"kernel {k.index} binds {' x '.join(map(str, block))} = {math.prod(block)} threads per "
                         f"block, more than the limit of {max_threads} (thread-bound loops "
                         f"{', '.join(f'{f.var.name}->threadIdx.{AXES[f.axis]}' for f in k.thread_loops)}); "
                         "split them further and keep the outer parts serial or bound to blocks")
    return grid, block, frozenset(guarded)
