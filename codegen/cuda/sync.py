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

Accesses to distinct stages of a staged (multi-buffered) buffer do not need a barrier
between them. A stage is read off the flat index: a term ``(v + c) % S * m`` (C or floor
remainder) with ``v`` the variable of a serial loop of uniform code and the other terms
provably in ``[0, m)``, or a whole index provably within one slice of the first dimension
(a constant stage). Stages ``(v + a) % S`` and ``(v + b) % S`` of one ``v`` are distinct when
``a`` and ``b`` differ modulo ``S``; anything else may be the whole buffer. Across
iterations of the loop of ``v``, what iteration n leaves at stage ``(v + a) % S`` is stage
``(v + a - 1) % S`` of iteration n+1 (and after the loop, the whole buffer). Loops step by
one, so this holds whatever their start. Before (``mma_matmul(..., stages=2)``; the K loop
multiplies stage ``ko % 2`` and stores the next tiles into stage ``(ko + 1) % 2``)::

    for (ko ...) { global -> ra, rb; __syncthreads(); mma(As[ko % 2], Bs[ko % 2]);
                   __syncthreads(); As[(ko + 1) % 2] = ra; Bs[(ko + 1) % 2] = rb; }

After: the second barrier is gone; the first orders both the previous iteration's stores
into the stage read now and its reads of the stage written now.

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

The double-buffered tensor-core matmul (one barrier, in its K loop):

>>> from te import Buffer, Reduce, Sum, cast, float32
>>> from loopnest import LoopNest
>>> A, B = Buffer("A", (128, 128), "float16"), Buffer("B", (128, 128), "float16")
>>> C = Reduce("C", (128, 128), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (128,))
>>> mm = LoopNest([C])
>>> mm.gpu_matmul(stages=2, BM=64, BN=64, BK=32, WM=32, WN=32)
>>> nest = mm.copy().prepare_for_codegen()
>>> print(plan_cuda(nest, make_params(nest, [A, B, C]), "mm", upto="cuda_sync").describe_sync().splitlines()[0])
kernel k0_mm: 1 barrier(s), 0 one-thread section(s)
"""
from __future__ import annotations

from te.expr import Add, FloorMod, Mod, Mul, Ramp, Sub, Var
from te.functor import Functor
from te.queries import fold_int, free_vars, loads
from loopnest.stmt import Allocate, Block, Cond, For, ForKind, Free, LetStmt, Stmt, Store, iter_stmts, stmt_exprs

from ..kernel import BuildError
from .ir_queries import AXES, contains_thread_loop, flatten, interval, loop_ranges
from .plan import CudaPlan, Guard, KernelPlan

#: the access bookkeeping the other passes that order shared memory (``cuda_async_waits``,
#: ``cuda_wgmma_overlap``) share with this one
__all__ = ["plan_sync", "SyncContext", "shared_accesses", "header_accesses", "stage_key", "parts_disjoint",
           "access_conflict", "rekey_accesses"]

_MAX_CARRY_WALKS = 8


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
            _Uniform(plan, k).visit(k.region, {}, SyncContext())


class SyncContext:
    """Where the walk is: the thread axes bound by enclosing thread loops, whether inside one,
    the variables whose values differ between threads (thread loop variables and what is
    computed from them), and the variables of the enclosing serial loops of uniform code
    (the same on every thread: the stages of a staged buffer may be told apart by them).

    >>> SyncContext().but(in_thread=True).in_thread
    True
    """

    __slots__ = ("bound_axes", "in_thread", "tdep", "stage_vars")

    def __init__(self, bound_axes: frozenset = frozenset(), in_thread: bool = False,
                 tdep: frozenset = frozenset(), stage_vars: frozenset = frozenset()):
        self.bound_axes = bound_axes
        self.in_thread = in_thread
        self.tdep = tdep
        self.stage_vars = stage_vars

    def but(self, **kw) -> "SyncContext":
        vals = {f: getattr(self, f) for f in self.__slots__}
        vals.update(kw)
        return SyncContext(**vals)


# Accesses: {id(buffer): [buffer, {(mode, key)}]}, mode "r" or "w". ``key`` names the part of
# the buffer touched (None: any part). ("const", k, m): elements [k*m, (k+1)*m); ("mod", id(v),
# a, S, m): elements [s*m, (s+1)*m) for the stage s = (v + a) mod S of a serial loop variable v
# (C or floor remainder: either way s is congruent to v + a modulo S).


def _merge(a: dict, b: dict) -> dict:
    out = {k: [v[0], set(v[1])] for k, v in a.items()}
    for k, v in b.items():
        if k in out:
            out[k][1] |= v[1]
        else:
            out[k] = [v[0], set(v[1])]
    return out


def parts_disjoint(ka, kb) -> bool:
    """Whether the parts of one buffer named by the keys ``ka`` and ``kb`` share no element.

    >>> parts_disjoint(("const", 0, 64), ("const", 1, 64)), parts_disjoint(("const", 0, 64), None)
    (True, False)
    >>> parts_disjoint(("mod", 7, 0, 3, 64), ("mod", 7, 1, 3, 64))      # stages (v) % 3 and (v + 1) % 3
    True
    """
    if ka is None or kb is None or ka[0] != kb[0]:
        return False
    if ka[0] == "const":
        return ka[2] == kb[2] and ka[1] != kb[1]
    return ka[1] == kb[1] and ka[3:] == kb[3:] and ka[2] != kb[2]


def access_conflict(a: dict, b: dict) -> str | None:
    """The name of a buffer one side writes and the other touches (the same part of it),
    else None.

    >>> from te import Buffer
    >>> S = Buffer("S", (2, 64), "float32")
    >>> access_conflict({id(S): [S, {("w", ("const", 0, 64))}]}, {id(S): [S, {("r", ("const", 1, 64))}]})
    >>> access_conflict({id(S): [S, {("w", ("const", 0, 64))}]}, {id(S): [S, {("r", None)}]})
    'S'
    """
    for k, (buf, ma) in a.items():
        if k in b:
            for mode_a, key_a in ma:
                for mode_b, key_b in b[k][1]:
                    if "w" in (mode_a, mode_b) and not parts_disjoint(key_a, key_b):
                        return buf.name
    return None


def rekey_accesses(acc: dict, var, shift: bool) -> dict:
    """``acc`` with the keys on the loop variable ``var`` moved to the next iteration
    (``shift``: stage (n + a) mod S is (n + 1 + a - 1) mod S), or made whole-buffer.

    >>> from te import Buffer, Var
    >>> S, v = Buffer("S", (3, 64), "float32"), Var("v")
    >>> acc = {id(S): [S, {("w", ("mod", id(v), 1, 3, 64))}]}
    >>> [key[2] for _, key in rekey_accesses(acc, v, True)[id(S)][1]], rekey_accesses(acc, v, False)[id(S)][1]
    ([0], {('w', None)})
    """
    def one(key):
        if key is None or key[0] != "mod" or key[1] != id(var):
            return key
        if not shift:
            return None
        _, v, a, S, m = key
        return ("mod", v, (a - 1) % S, S, m)
    return {k: [buf, {(mode, one(key)) for mode, key in modes}] for k, (buf, modes) in acc.items()}


def shared_accesses(plan: CudaPlan, s: Stmt, ctx: SyncContext | None = None, ranges: dict | None = None) -> dict:
    """The accesses (see above) of the non-thread-local buffers ``s`` touches; parts are told
    apart by the stage variables of ``ctx`` not bound again inside ``s``.

    >>> from types import SimpleNamespace
    >>> from te import Buffer, Var
    >>> from te.expr import Load
    >>> from loopnest.stmt import Store
    >>> S, v, t = Buffer("S", (2, 64), "float32"), Var("v"), Var("t")      # flat indices, as after lowering
    >>> copy = Store(S, (v % 2 * 64 + t,), Load(S, (t * 2,)))
    >>> acc = shared_accesses(SimpleNamespace(scope=lambda b: "shared"), copy,
    ...                       SyncContext(stage_vars=frozenset({id(v)})), {id(v): (0, 9), id(t): (0, 63)})
    >>> sorted(acc[id(S)][1], key=str)      # writes stage v % 2; reads anywhere in S
    [('r', None), ('w', ('mod', ..., 0, 2, 64))]
    """
    out: dict[int, list] = {}
    stage_vars = ctx.stage_vars if ctx is not None else frozenset()
    if stage_vars:
        stage_vars = stage_vars - {id(x.var) for x in iter_stmts(s) if isinstance(x, (For, LetStmt))}

    def add(node, mode):
        b = node.buffer
        if plan.scope(b) != "local":
            key = stage_key(b, node.indices, stage_vars, ranges)
            out.setdefault(id(b), [b, set()])[1].add((mode, key))

    for x in iter_stmts(s):
        if isinstance(x, Store):
            add(x, "w")
        for ld in loads(stmt_exprs(x)):
            add(ld, "r")
    return out


def header_accesses(plan: CudaPlan, exprs) -> dict:
    """Like :func:`shared_accesses`, for the loads of a compound statement's header ``exprs``.

    >>> from types import SimpleNamespace
    >>> from te import Buffer
    >>> N = Buffer("N", (1,), "int32")
    >>> header_accesses(SimpleNamespace(scope=lambda b: "shared"), [N[0] + 1])[id(N)][1]
    {('r', None)}
    """
    out: dict[int, list] = {}
    for ld in loads(exprs):
        if plan.scope(ld.buffer) != "local":
            out.setdefault(id(ld.buffer), [ld.buffer, set()])[1].add(("r", None))
    return out


def stage_key(buf, indices, stage_vars: frozenset, ranges: dict | None):
    """The key of the part of ``buf`` that the (flat) index ``indices`` touches: a term
    ``(v + c) mod S * m`` of the index, with ``v`` in ``stage_vars``, next to terms provably in
    [0, m); or a whole index provably within [k*m, (k+1)*m), m the size of a slice of the
    first dimension. Either within the buffer. None when neither is proven.

    >>> from te import Buffer, Var
    >>> S, v, t = Buffer("S", (3, 64), "float32"), Var("v"), Var("t")
    >>> key = stage_key(S, [(v + 1) % 3 * 64 + t], frozenset({id(v)}), {id(v): (0, 9), id(t): (0, 63)})
    >>> key[0], key[2:], stage_key(S, [t * 3], frozenset(), {id(t): (0, 63)})
    ('mod', (1, 3, 64), None)
    """
    dims = [d if isinstance(d, int) else fold_int(d) for d in buf.shape]
    if ranges is None or len(indices) != 1 or len(dims) < 2 or any(d is None or d <= 0 for d in dims):
        return None     # (an empty buffer has no parts)
    size = 1
    for d in dims:
        size *= d
    ix = indices[0]
    lo_span = hi_span = 0
    if isinstance(ix, Ramp):
        st = fold_int(ix.stride)
        if st is None:
            return None
        lo_span, hi_span = min(0, st * (ix.lanes - 1)), max(0, st * (ix.lanes - 1))
        ix = ix.base
    if ix.dtype.is_vector:
        return None
    terms = _terms(ix, 1)
    for i, (sign, t) in enumerate(terms):
        stage = _stage_term(t, stage_vars, ranges) if sign > 0 else None
        if stage is None:
            continue
        v, c, S, m = stage
        r = _sum_interval(terms[:i] + terms[i + 1:], ranges)
        if r is not None and r[0] + lo_span >= 0 and r[1] + hi_span < m and S * m <= size:
            return ("mod", id(v), c % S, S, m)
    m = size // dims[0]
    for i, (sign, t) in enumerate(terms):
        # ``v * m``, m a slice of the first dimension, where the simplifier dropped the
        # ``mod S`` of a stage index ``(v + c) mod S`` that never wraps (fewer k-tiles than
        # stages): the same part of the buffer as that stage
        v = _stage_var_times(t, m, stage_vars) if sign > 0 else None
        r = _sum_interval(terms[:i] + terms[i + 1:], ranges) if v is not None else None
        if r is None or id(v) not in ranges:
            continue
        c = (r[0] + lo_span) // m
        S, (lo, hi) = dims[0], ranges[id(v)]
        if (r[1] + hi_span) // m == c and 0 <= lo + c and hi + c < S:
            return ("mod", id(v), c % S, S, m)
    r = interval(ix, ranges)
    if m > 0 and r is not None and r[0] + lo_span >= 0 and r[1] + hi_span < size \
            and (r[0] + lo_span) // m == (r[1] + hi_span) // m:
        return ("const", (r[0] + lo_span) // m, m)
    return None


def _terms(e, sign: int) -> list:
    """``[(sign, term)]`` of the sum ``e`` (times ``sign``)."""
    if isinstance(e, Add):
        return _terms(e.a, sign) + _terms(e.b, sign)
    if isinstance(e, Sub):
        return _terms(e.a, sign) + _terms(e.b, -sign)
    return [(sign, e)]


def _sum_interval(terms: list, ranges: dict):
    lo = hi = 0
    for sign, t in terms:
        r = interval(t, ranges)
        if r is None:
            return None
        lo, hi = (lo + r[0], hi + r[1]) if sign > 0 else (lo - r[1], hi - r[0])
    return lo, hi


def _stage_var_times(t, m: int, stage_vars: frozenset):
    """The stage variable ``v`` when ``t`` is ``v * m`` (either order), else None."""
    if not isinstance(t, Mul):
        return None
    for x, y in ((t.a, t.b), (t.b, t.a)):
        if isinstance(x, Var) and id(x) in stage_vars and fold_int(y) == m:
            return x
    return None


def _stage_term(t, stage_vars: frozenset, ranges: dict):
    """``(v, c, S, m)`` when ``t`` is ``(v + c) mod S * m`` (or ``v mod S * m``; a C remainder
    only where ``v + c >= 0``) with ``v`` in ``stage_vars`` and constants ``c``, ``S > 0``,
    ``m > 0``: a stage in [0, S)."""
    if not isinstance(t, Mul):
        return None
    for x, y in ((t.a, t.b), (t.b, t.a)):
        m = fold_int(y)
        if m is None or m <= 0 or not isinstance(x, (Mod, FloorMod)):
            continue
        S = fold_int(x.b)
        if S is None or S <= 0:
            continue
        v, c = x.a, 0
        if isinstance(v, Add):
            if isinstance(v.a, Var) and fold_int(v.b) is not None:
                v, c = v.a, fold_int(v.b)
            elif isinstance(v.b, Var) and fold_int(v.a) is not None:
                v, c = v.b, fold_int(v.a)
        elif isinstance(v, Sub) and isinstance(v.a, Var) and fold_int(v.b) is not None:
            v, c = v.a, -fold_int(v.b)
        if isinstance(v, Var) and id(v) in stage_vars and \
                (isinstance(x, FloorMod) or id(v) in ranges and ranges[id(v)][0] + c >= 0):
            return v, c, S, m
    return None


class _Uniform(Functor):
    """The walk over the code of one kernel that every thread of the block reaches together,
    where barriers may go: ``visit(s, pending, ctx)`` returns the accesses made since the last
    barrier (``pending``: those made before ``s``). Barriers are appended to ``k.barriers`` as
    the printed text would hold them; the tentative walks of a serial loop are undone by
    truncating it. Statements whose threads run apart go to :class:`_PerThread`."""

    def __init__(self, plan: CudaPlan, k: KernelPlan):
        self.plan = plan
        self.k = k
        self.ranges = loop_ranges(k.stmt)
        self.per_thread = _PerThread(plan, k, self.ranges)

    def barrier_if(self, pending: dict, acc: dict, at: Stmt) -> dict:
        if self.k.thread_axes and access_conflict(pending, acc) is not None:
            self.k.barriers.append(at)
            return {}
        return pending

    def visit_Block(self, s: Block, pending: dict, ctx: SyncContext) -> dict:
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
            acc = shared_accesses(self.plan, Block(tuple(stmts[i:j])), ctx, self.ranges)
            pending = self.barrier_if(pending, acc, x)
            self.per_thread.single_or_distributed(stmts[i:j], ctx)
            pending = _merge(pending, acc)
            i = j
        return pending

    def visit_Allocate(self, s, pending: dict, ctx: SyncContext) -> dict:
        return pending

    visit_Free = visit_Allocate

    def visit_For(self, s: For, pending: dict, ctx: SyncContext) -> dict:
        if s.kind == ForKind.GPU_THREAD:
            if id(s) not in self.k.guarded and contains_thread_loop(s.body):
                # every thread runs the body once: still uniform, barriers allowed inside
                inner = ctx.but(bound_axes=ctx.bound_axes | {s.axis}, in_thread=True, tdep=ctx.tdep | {id(s.var)},
                                stage_vars=ctx.stage_vars - {id(s.var)})
                return self.visit(s.body, pending, inner)
            return self.generic(s, pending, ctx)
        if self._runs_apart(s, [s.start, s.stop], ctx):
            return self.generic(s, pending, ctx)
        return self.uniform_for(s, self._after_header(s, [s.start, s.stop], pending), ctx)

    def visit_Cond(self, s: Cond, pending: dict, ctx: SyncContext) -> dict:
        if self._runs_apart(s, [s.cond], ctx):
            return self.generic(s, pending, ctx)
        pending = self._after_header(s, [s.cond], pending)
        r1 = self.visit(s.then, dict(pending), ctx)
        r2 = self.visit(s.otherwise, dict(pending), ctx) if s.otherwise is not None and s.otherwise.stmts \
            else None
        return _merge(r1, r2 if r2 is not None else pending)

    def visit_LetStmt(self, s: LetStmt, pending: dict, ctx: SyncContext) -> dict:
        if self._runs_apart(s, [s.value], ctx):
            return self.generic(s, pending, ctx)
        pending = self._after_header(s, [s.value], pending)
        _check_scalar_let(s)
        return self.visit(s.body, dict(pending), ctx.but(stage_vars=ctx.stage_vars - {id(s.var)}))

    def generic(self, s: Stmt, pending: dict, ctx: SyncContext) -> dict:
        """A statement whose threads run apart (a store, a guarded thread loop, a compound
        statement without uniform thread-bound loops inside): a barrier before it if needed."""
        acc = shared_accesses(self.plan, s, ctx, self.ranges)
        pending = self.barrier_if(pending, acc, s)
        self.per_thread.single_or_distributed([s], ctx)
        return _merge(pending, acc)

    @staticmethod
    def _runs_apart(s: Stmt, head: list, ctx: SyncContext) -> bool:
        """Whether the compound statement ``s`` with header expressions ``head`` is per-thread
        code: it holds no thread-bound loop, or its header differs between threads."""
        return not contains_thread_loop(s) or any(id(v) in ctx.tdep for v in free_vars(head))

    def _after_header(self, s: Stmt, head: list, pending: dict) -> dict:
        acc = header_accesses(self.plan, head)
        return _merge(self.barrier_if(pending, acc, s), acc)

    def uniform_for(self, s: For, pending: dict, ctx: SyncContext) -> dict:
        """A serial loop around thread-bound loops, in uniform code.

        When what is pending before the loop conflicts with the body, one barrier before the
        loop (run once) replaces the one the body would otherwise get on every iteration --
        unless the body needs as many barriers anyway for the accesses its iterations
        exchange, in which case the loop is left as it is."""
        outer = ctx.but(stage_vars=ctx.stage_vars - {id(s.var)})
        if access_conflict(pending, shared_accesses(self.plan, s.body, outer, self.ranges)) is None:
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

    def serial_loop(self, s: For, pending: dict, ctx: SyncContext) -> dict:
        """Walk the serial loop ``s``, its body starting with ``pending``; returns the accesses
        left pending after it (the body may run zero times).

        Loop-carried: iteration n+1 starts with what iteration n left pending, its stages
        renamed to the terms of n+1 (what an earlier iteration left and no barrier cleared
        moves on by one more each time), until that start holds all it can: the barriers of
        the last walk serve every iteration."""
        inner = ctx.but(stage_vars=ctx.stage_vars | {id(s.var)})
        pending = rekey_accesses(pending, s.var, False)     # a variable bound again: its old stages are gone
        start, walks = pending, 0
        while True:
            mark = len(self.k.barriers)
            end = self.visit(s.body, dict(start), inner)
            walks += 1
            # many stages: after a few walks, the carried parts become the whole buffer
            nxt = _merge(start, rekey_accesses(end, s.var, walks < _MAX_CARRY_WALKS))
            if all(k in start and start[k][1] == v[1] for k, v in nxt.items()):
                return _merge(pending, rekey_accesses(end, s.var, False))
            del self.k.barriers[mark:]
            start = nxt


class _PerThread(Functor):
    """The walk over code that threads run apart, where no barrier can go:
    :meth:`single_or_distributed` takes sibling statements, ``visit(s, ctx)`` goes into a
    statement that holds thread-bound loops."""

    def __init__(self, plan: CudaPlan, k: KernelPlan, ranges: dict):
        self.plan = plan
        self.k = k
        self.ranges = ranges

    def single_or_distributed(self, run: list, ctx: SyncContext) -> None:
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

    def visit_For(self, s: For, ctx: SyncContext) -> None:
        if s.kind == ForKind.GPU_THREAD:
            self.thread_body(s.body, ctx.but(bound_axes=ctx.bound_axes | {s.axis}, in_thread=True,
                                             tdep=ctx.tdep | {id(s.var)}, stage_vars=ctx.stage_vars - {id(s.var)}))
        else:
            # threads may run different iterations of this loop: no stages told apart by it
            self._body(s.body, ctx.but(tdep=ctx.tdep | {id(s.var)}, stage_vars=ctx.stage_vars - {id(s.var)}))

    def visit_Cond(self, s: Cond, ctx: SyncContext) -> None:
        self._body(s.then, ctx)
        if s.otherwise is not None and s.otherwise.stmts:
            self._body(s.otherwise, ctx)

    def visit_LetStmt(self, s: LetStmt, ctx: SyncContext) -> None:
        _check_scalar_let(s)
        self._body(s.body, ctx.but(tdep=ctx.tdep | {id(s.var)}, stage_vars=ctx.stage_vars - {id(s.var)}))

    def visit_Block(self, s: Block, ctx: SyncContext) -> None:
        for y in s.stmts:
            self.single_or_distributed([y], ctx)

    def thread_body(self, body: Block, ctx: SyncContext) -> None:
        """Statements reached per thread. Threads on the axes not bound yet run this code
        redundantly: stores are guarded to one of them, and data exchanged between parts
        that distribute over those axes cannot be synchronised, so it is refused."""
        unbound = [a for a in self.k.thread_axes if a not in ctx.bound_axes]
        if not unbound:
            return
        stmts = flatten(body)
        parts = [x for x in stmts if not isinstance(x, (Allocate, Free))]
        accs = [shared_accesses(self.plan, x, ctx, self.ranges) for x in parts]
        for i in range(len(parts)):
            for j in range(i + 1, len(parts)):
                conflict = access_conflict(accs[i], accs[j])
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

    def _body(self, b: Block, ctx: SyncContext) -> None:
        if ctx.in_thread:
            self.thread_body(b, ctx)
        else:
            self.visit_Block(b, ctx)


def _check_scalar_let(s: LetStmt) -> None:
    if s.var.dtype.is_vector:
        raise BuildError(f"vector let {s.var.name} around GPU-bound loops is not supported")
