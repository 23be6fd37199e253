"""Threads and barriers: where ``__syncthreads()`` goes and which statements one thread runs.

Code outside thread-bound loops (but inside the kernel) is executed by every thread of the
block, so its stores are guarded to run on one thread (``threadIdx == 0`` on the axes not
bound around them; stores to thread-local arrays are made by every thread). Where every
thread of the block arrives together -- block level, the body of a thread-bound loop whose
extent is the block size, serial loops / conds / lets whose headers do not depend on
thread indices -- ``__syncthreads()`` is placed between two statements that touch the same
shared or global buffer (one of them writing); in a serial loop the check includes the
previous iteration (loop-carried reuse of a shared tile), and data written before the loop
and read in it gets its barrier before the loop (once) unless the body needs one on every
iteration anyway. Where threads diverge (a guarded thread loop, thread-dependent control
flow), statements that would need a barrier are refused with a BuildError.

Before (IR, ``examples.softmax_block``: per-thread partial maxima in shared ``pmax``, one
thread combines them into shared ``stat``, every thread then reads ``stat``)::

    gpu_thread.x for (int t1 = 0; t1 < 64; t1++) { pmax[t1] = ...; }
    stat[0] = -inff;
    for (int t4 = 0; t4 < 64; t4++) { stat[0] = max(stat[0], pmax[t4]); }
    gpu_thread.x for (int t2 = 0; t2 < 64; t2++) { ... stat[0] ... }

After (plan)::

    __syncthreads() before: stat[0] = -inff;
    __syncthreads() before: gpu_thread.x for (int t2 = 0; t2 < 64; t2++) {
    if (threadIdx.x == 0) runs: stat[0] = -inff; (+1 more)

>>> from codegen.cuda import examples
>>> from codegen.cuda.passes import plan_cuda
>>> from codegen.kernel import make_params
>>> ex = examples.matmul_tiled()
>>> nest = ex.nest.copy().prepare_for_codegen()
>>> plan = plan_cuda(nest, make_params(nest, ex.args), "mm", upto="cuda_sync")
>>> print(plan.describe_sync())
kernel k0_mm: 2 barrier(s), 0 one-thread section(s)
  __syncthreads() before: gpu_thread.x for (int tx3 = 0; tx3 < 16; tx3++) {
  __syncthreads() before: gpu_thread.x for (int tx7 = 0; tx7 < 16; tx7++) {
"""
from __future__ import annotations

from te.functor import Functor
from te.queries import free_vars, loads
from loopnest.stmt import Allocate, Block, Cond, For, ForKind, Free, LetStmt, Stmt, Store, iter_stmts, stmt_exprs

from ..kernel import BuildError
from .ir_queries import AXES, contains_thread_loop, flatten
from .plan import CudaPlan, Guard, KernelPlan

__all__ = ["plan_sync"]


def plan_sync(plan: CudaPlan) -> None:
    """Fill ``barriers`` and ``guards`` of every bound kernel of ``plan`` (see the module
    docstring); raises BuildError where a needed barrier would be divergent.

    >>> from codegen.cuda import examples
    >>> from codegen.cuda.passes import plan_cuda
    >>> from codegen.kernel import make_params
    >>> ex = examples.softmax_block()
    >>> nest = ex.nest.copy().prepare_for_codegen()
    >>> plan = plan_cuda(nest, make_params(nest, ex.args), "sm", upto="cuda_memory_scopes")
    >>> plan_sync(plan)
    >>> k = plan.kernels[0]
    >>> len(k.barriers), [g.cond for g in k.guards.values()]
    (4, ['threadIdx.x == 0', 'threadIdx.x == 0'])
    """
    for k in plan.kernels:
        if k.bound:
            _Uniform(plan, k).visit(k.region, {}, _Ctx())


class _Ctx:
    """Where the walk is: the thread axes bound by enclosing thread loops, whether inside one,
    and the variables whose values differ between threads (thread loop variables and what is
    computed from them)."""

    __slots__ = ("bound_axes", "in_thread", "tdep")

    def __init__(self, bound_axes: frozenset = frozenset(), in_thread: bool = False,
                 tdep: frozenset = frozenset()):
        self.bound_axes = bound_axes
        self.in_thread = in_thread
        self.tdep = tdep


def _merge(a: dict, b: dict) -> dict:
    out = {k: [v[0], set(v[1])] for k, v in a.items()}
    for k, v in b.items():
        if k in out:
            out[k][1] |= v[1]
        else:
            out[k] = [v[0], set(v[1])]
    return out


def _conflict(a: dict, b: dict) -> str | None:
    """The name of a buffer one side writes and the other touches, else None."""
    for k, (buf, ma) in a.items():
        if k in b:
            if "w" in ma or "w" in b[k][1]:
                return buf.name
    return None


def _accesses(plan: CudaPlan, s: Stmt) -> dict:
    """{id(buffer): [buffer, modes]} of the non-thread-local buffers ``s`` touches."""
    out: dict[int, list] = {}

    def add(b, mode):
        if plan.scope(b) != "local":
            out.setdefault(id(b), [b, set()])[1].add(mode)

    for x in iter_stmts(s):
        if isinstance(x, Store):
            add(x.buffer, "w")
        for ld in loads(stmt_exprs(x)):
            add(ld.buffer, "r")
    return out


def _header_accesses(plan: CudaPlan, exprs) -> dict:
    """Like :func:`_accesses`, for the loads of a compound statement's header ``exprs``."""
    out: dict[int, list] = {}
    for ld in loads(exprs):
        if plan.scope(ld.buffer) != "local":
            out.setdefault(id(ld.buffer), [ld.buffer, set()])[1].add("r")
    return out


class _Uniform(Functor):
    """The walk over the code of one kernel that every thread of the block reaches together,
    where barriers may go: ``visit(s, pending, ctx)`` returns the accesses made since the last
    barrier (``pending``: those made before ``s``). Barriers are appended to ``k.barriers`` as
    the printed text would hold them; the tentative walks of a serial loop are undone by
    truncating it. Statements whose threads run apart go to :class:`_PerThread`."""

    def __init__(self, plan: CudaPlan, k: KernelPlan):
        self.plan = plan
        self.k = k
        self.per_thread = _PerThread(plan, k)

    def barrier_if(self, pending: dict, acc: dict, at: Stmt) -> dict:
        if self.k.thread_axes and _conflict(pending, acc) is not None:
            self.k.barriers.append(at)
            return {}
        return pending

    def visit_Block(self, s: Block, pending: dict, ctx: _Ctx) -> dict:
        stmts = list(s.stmts)
        i = 0
        while i < len(stmts):
            x = stmts[i]
            if isinstance(x, (Allocate, Free)) or contains_thread_loop(x):
                pending = self.visit(x, pending, ctx)
                i += 1
                continue
            # a run of statements without thread-bound loops: one guard around them
            j = i
            while j < len(stmts) and not isinstance(stmts[j], (Allocate, Free)) \
                    and not contains_thread_loop(stmts[j]):
                j += 1
            acc = _accesses(self.plan, Block(tuple(stmts[i:j])))
            pending = self.barrier_if(pending, acc, x)
            self.per_thread.single_or_distributed(stmts[i:j], ctx)
            pending = _merge(pending, acc)
            i = j
        return pending

    def visit_Allocate(self, s, pending: dict, ctx: _Ctx) -> dict:
        return pending

    visit_Free = visit_Allocate

    def visit_For(self, s: For, pending: dict, ctx: _Ctx) -> dict:
        if s.kind == ForKind.GPU_THREAD:
            if id(s) not in self.k.guarded and contains_thread_loop(s.body):
                # every thread runs the body once: still uniform, barriers allowed inside
                inner = _Ctx(ctx.bound_axes | {s.axis}, True, ctx.tdep | {id(s.var)})
                return self.visit(s.body, pending, inner)
            return self.generic(s, pending, ctx)
        if self._runs_apart(s, [s.start, s.stop], ctx):
            return self.generic(s, pending, ctx)
        return self.uniform_for(s, self._after_header(s, [s.start, s.stop], pending), ctx)

    def visit_Cond(self, s: Cond, pending: dict, ctx: _Ctx) -> dict:
        if self._runs_apart(s, [s.cond], ctx):
            return self.generic(s, pending, ctx)
        pending = self._after_header(s, [s.cond], pending)
        r1 = self.visit(s.then, dict(pending), ctx)
        r2 = self.visit(s.otherwise, dict(pending), ctx) if s.otherwise is not None and s.otherwise.stmts \
            else None
        return _merge(r1, r2 if r2 is not None else pending)

    def visit_LetStmt(self, s: LetStmt, pending: dict, ctx: _Ctx) -> dict:
        if self._runs_apart(s, [s.value], ctx):
            return self.generic(s, pending, ctx)
        pending = self._after_header(s, [s.value], pending)
        _check_scalar_let(s)
        return self.visit(s.body, dict(pending), ctx)

    def generic(self, s: Stmt, pending: dict, ctx: _Ctx) -> dict:
        """A statement whose threads run apart (a store, a guarded thread loop, a compound
        statement without uniform thread-bound loops inside): a barrier before it if needed."""
        acc = _accesses(self.plan, s)
        pending = self.barrier_if(pending, acc, s)
        self.per_thread.single_or_distributed([s], ctx)
        return _merge(pending, acc)

    @staticmethod
    def _runs_apart(s: Stmt, head: list, ctx: _Ctx) -> bool:
        """Whether the compound statement ``s`` with header expressions ``head`` is per-thread
        code: it holds no thread-bound loop, or its header differs between threads."""
        return not contains_thread_loop(s) or any(id(v) in ctx.tdep for v in free_vars(head))

    def _after_header(self, s: Stmt, head: list, pending: dict) -> dict:
        acc = _header_accesses(self.plan, head)
        return _merge(self.barrier_if(pending, acc, s), acc)

    def uniform_for(self, s: For, pending: dict, ctx: _Ctx) -> dict:
        """A serial loop around thread-bound loops, in uniform code.

        When what is pending before the loop conflicts with the body, one barrier before the
        loop (run once) replaces the one the body would otherwise get on every iteration --
        unless the body needs as many barriers anyway for the accesses its iterations
        exchange, in which case the loop is left as it is."""
        if _conflict(pending, _accesses(self.plan, s.body)) is None:
            return self.serial_loop(s, pending, ctx)
        mark = len(self.k.barriers)
        self.serial_loop(s, pending, ctx)
        inside = len(self.k.barriers) - mark
        del self.k.barriers[mark:]
        self.k.barriers.append(s)
        end = self.serial_loop(s, {}, ctx)
        if len(self.k.barriers) - mark - 1 < inside:
            return end
        del self.k.barriers[mark:]
        return self.serial_loop(s, pending, ctx)

    def serial_loop(self, s: For, pending: dict, ctx: _Ctx) -> dict:
        """Walk the serial loop ``s``, its body starting with ``pending``; returns the accesses
        left pending after it (the body may run zero times)."""
        # loop-carried: iteration n+1 starts with what iteration n left pending
        mark = len(self.k.barriers)
        end1 = self.visit(s.body, dict(pending), ctx)
        del self.k.barriers[mark:]
        end2 = self.visit(s.body, _merge(pending, end1), ctx)
        return _merge(pending, end2)


class _PerThread(Functor):
    """The walk over code that threads run apart, where no barrier can go:
    :meth:`single_or_distributed` takes sibling statements, ``visit(s, ctx)`` goes into a
    statement that holds thread-bound loops."""

    def __init__(self, plan: CudaPlan, k: KernelPlan):
        self.plan = plan
        self.k = k

    def single_or_distributed(self, run: list, ctx: _Ctx) -> None:
        """``run`` (sibling statements) executed per thread: if it stores while thread axes
        are unbound around it, only the threads with index 0 on those axes store."""
        unbound = tuple(a for a in self.k.thread_axes if a not in ctx.bound_axes)
        x = run[0]
        if len(run) == 1 and isinstance(x, (Allocate, Free)):
            return
        if len(run) == 1 and contains_thread_loop(x):
            self.visit(x, ctx)
            return
        stores = {self.plan.scope(y.buffer) for z in run for y in iter_stmts(z) if isinstance(y, Store)}
        if not unbound or not (stores - {"local"}):
            return
        self.k.guards[id(x)] = Guard(unbound, "local" not in stores, len(run))

    def visit_For(self, s: For, ctx: _Ctx) -> None:
        if s.kind == ForKind.GPU_THREAD:
            self.thread_body(s.body, _Ctx(ctx.bound_axes | {s.axis}, True, ctx.tdep | {id(s.var)}))
        else:
            self._body(s.body, _Ctx(ctx.bound_axes, ctx.in_thread, ctx.tdep | {id(s.var)}))

    def visit_Cond(self, s: Cond, ctx: _Ctx) -> None:
        self._body(s.then, ctx)
        if s.otherwise is not None and s.otherwise.stmts:
            self._body(s.otherwise, ctx)

    def visit_LetStmt(self, s: LetStmt, ctx: _Ctx) -> None:
        _check_scalar_let(s)
        self._body(s.body, _Ctx(ctx.bound_axes, ctx.in_thread, ctx.tdep | {id(s.var)}))

    def visit_Block(self, s: Block, ctx: _Ctx) -> None:
        for y in s.stmts:
            self.single_or_distributed([y], ctx)

    def thread_body(self, body: Block, ctx: _Ctx) -> None:
        """Statements reached per thread. Threads on the axes not bound yet run this code
        redundantly: stores are guarded to one of them, and data exchanged between parts
        that distribute over those axes cannot be synchronised, so it is refused."""
        unbound = [a for a in self.k.thread_axes if a not in ctx.bound_axes]
        if not unbound:
            return
        stmts = flatten(body)
        parts = [x for x in stmts if not isinstance(x, (Allocate, Free))]
        accs = [_accesses(self.plan, x) for x in parts]
        for i in range(len(parts)):
            for j in range(i + 1, len(parts)):
                conflict = _conflict(accs[i], accs[j])
                if conflict is not None:
                    bound = ", ".join(f"threadIdx.{AXES[a]}" for a in sorted(ctx.bound_axes)) or "(none)"
                    raise BuildError(
                        f"inside gpu_thread loop(s) {bound}, two statements exchange data "
                        f"through buffer {conflict} while threadIdx.{'/'.join(AXES[a] for a in unbound)} is not "
                        "bound around them, and a __syncthreads() there would be divergent (a thread loop "
                        "around them is guarded, or a condition depends on the thread index). Give the "
                        "thread loops extents equal to the block size, or make the loops that write and "
                        "read the buffer siblings at block level")
        for x in stmts:
            self.single_or_distributed([x], ctx)

    def _body(self, b: Block, ctx: _Ctx) -> None:
        if ctx.in_thread:
            self.thread_body(b, ctx)
        else:
            self.visit_Block(b, ctx)


def _check_scalar_let(s: LetStmt) -> None:
    if s.var.dtype.is_vector:
        raise BuildError(f"vector let {s.var.name} around GPU-bound loops is not supported")
