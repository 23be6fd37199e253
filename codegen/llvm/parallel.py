"""Parallel loops: the loop body outlined into a function, run through a parallel runtime.

``parallel_loop`` stores what the body captures (``outline.captures``) in a context struct,
outlines the body into ``void body(i64 lo, i64 hi, ptr ctx)`` and calls it on ``[start,
stop)`` through the runtime of ``EmitOptions.parallel_runtime``: the native thread pool
(``pool``, symbol ``POOL_SYMBOL``), libgomp (``GOMP_parallel`` with a dynamically scheduled
trampoline; the Python thread pool in a child forked after libgomp ran) or the Python
thread pool of ``runtime`` (``PARALLEL_FOR_SYMBOL``). One iteration, or one thread, calls
the body directly. A failed allocation in the body is reported through a status word and
makes the kernel return 1.

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> from codegen.kernel import make_params
>>> from codegen.llvm.emit import EmitOptions, emit_module
>>> A = Buffer("A", (64,), "float32")
>>> nest = LoopNest([Compute("B", (64,), lambda i: A[i] + 1.0)])
>>> _ = nest.parallelize(nest.get_loops_for(nest.outputs[0])[0])
>>> nest = nest.prepare_for_codegen()
>>> params = make_params(nest, [A, nest.outputs[0]])
>>> m = emit_module("te_B", nest.root, params, [], EmitOptions(parallel_runtime="gomp"))
>>> sorted(f.name for f in m.functions if f.name.startswith("te_B_"))
['te_B_i_par1', 'te_B_i_par1_loop', 'te_B_i_par1_omp']
"""
from __future__ import annotations

from llvmlite import ir

from loopnest.stmt import Allocate, Block, For, Free
from te.queries import free_vars

from ..kernel import BuildError, sanitize_name
from .decls import declare, external_i32
from .fnstate import FnState
from .loop_hints import unroll_hint
from .outline import captures
from .types import I32, I64, PTR, VOID, value_type

__all__ = ["parallel_loop", "chunk_allocations", "RUNTIMES", "RESERVED_SYMBOLS", "NUM_THREADS_SYMBOL", "FORKED_SYMBOL",
           "PARALLEL_FOR_SYMBOL", "POOL_SYMBOL"]

RUNTIMES = ("pool", "gomp", "threads", "serial")
NUM_THREADS_SYMBOL = "te_llvm_num_threads"
FORKED_SYMBOL = "te_llvm_gomp_forked"    # nonzero in a child forked after libgomp ran: gomp is unusable
PARALLEL_FOR_SYMBOL = "te_llvm_parallel_for"
POOL_SYMBOL = "te_llvm_pool_parallel_for"     # the native pool of ``pool`` (runtime "pool")
RESERVED_SYMBOLS = frozenset({NUM_THREADS_SYMBOL, FORKED_SYMBOL, PARALLEL_FOR_SYMBOL, POOL_SYMBOL})


def parallel_loop(em, st: FnState, s: For) -> None:
    """Emit the parallel loop ``s`` into ``st``. ``em`` is the emitter (``emit._Emitter``):
    it evaluates the bounds (``em.index``) and emits the outlined body (``em.visit``)."""
    b = st.b
    lo, hi = em.index(st, s.start), em.index(st, s.stop)
    cvars, cbufs = captures(s)
    for v in cvars:
        if id(v) not in st.vars:
            raise BuildError(f"variable {v.name} is used in parallel loop {s.var.name} but is not bound")
    for buf in cbufs:
        if id(buf) not in st.bufs:
            raise BuildError(f"buffer {buf.name} is used in parallel loop {s.var.name} but has no storage")
    field_types = [PTR] + [PTR] * len(cbufs) + [value_type(v.dtype) for v in cvars]
    ctx_t = ir.LiteralStructType(field_types)
    ctx = st.alloca(ctx_t, name=f"{sanitize_name(s.var.name)}_ctx")
    status = st.alloca(I32, name="par_status")
    b.store(ir.Constant(I32, 0), status)
    values = [status] + [st.bufs[id(x)] for x in cbufs] + [st.vars[id(v)] for v in cvars]
    for k, v in enumerate(values):
        b.store(v, b.gep(ctx, [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True, source_etype=ctx_t))
    body_fn = _outline(em, s, ctx_t, cbufs, cvars)
    # one iteration, or one thread (set_num_threads(1)): call the body directly
    vname = sanitize_name(s.var.name)
    nthr = b.load(external_i32(em.module, NUM_THREADS_SYMBOL), typ=I32, name="num_threads")
    single = b.or_(b.icmp_signed("<=", b.sub(hi, lo), ir.Constant(I64, 1)),
                   b.icmp_unsigned("==", nthr, ir.Constant(I32, 1)))
    direct_bb = st.fn.append_basic_block(f"{vname}_direct")
    launch_bb = st.fn.append_basic_block(f"{vname}_launch")
    done_bb = st.fn.append_basic_block(f"{vname}_done")
    b.cbranch(single, direct_bb, launch_bb)
    b.position_at_end(direct_bb)
    b.call(body_fn, [lo, hi, ctx])
    b.branch(done_bb)
    b.position_at_end(launch_bb)
    runtime = em.opts.parallel_runtime
    if runtime == "gomp":
        _call_gomp(st, body_fn, lo, hi, ctx, nthr)
    elif runtime == "pool":
        b.call(declare(em.module, POOL_SYMBOL, VOID, [PTR, I64, I64, PTR, I32]), [body_fn, lo, hi, ctx, nthr])
    else:
        b.call(declare(em.module, PARALLEL_FOR_SYMBOL, VOID, [PTR, I64, I64, PTR]), [body_fn, lo, hi, ctx])
    b.branch(done_bb)
    b.position_at_end(done_bb)
    ok = st.fn.append_basic_block(f"{vname}_joined")
    code = b.load(status, typ=I32)
    failed = b.icmp_unsigned("!=", code, ir.Constant(I32, 0))
    b.cbranch(failed, st.forward_block(code), ok)
    b.position_at_end(ok)


def chunk_allocations(body: Block, bound: dict) -> list:
    """The ``Allocate`` statements of a parallel loop's ``body`` that its outlined function makes
    once per call, for its whole chunk of iterations, rather than once per iteration: those at
    the top of the body, freed there too, whose sizes use only the values in ``bound`` (ids of
    the variables bound outside the loop). A buffer of a symbolic size is on the heap: one
    ``aligned_alloc`` and ``free`` per row of a symbolic softmax took a fifth of its time.
    Each thread still has its own; an iteration finds there what the one before it left,
    as it would find whatever the allocator gives (the program writes before it reads).

    >>> from te import Buffer, Var
    >>> from loopnest.stmt import Store
    >>> n, i = Var("n"), Var("i")
    >>> row = Buffer("row", (n,), "float32")
    >>> body = Block((Allocate(row), Store(row, (0,), 1.0), Free(row)))
    >>> [a.buffer.name for a in chunk_allocations(body, {id(n): None})], chunk_allocations(body, {})
    (['row'], [])
    """
    freed = {id(x.buffer) for x in body.stmts if isinstance(x, Free)}
    return [x for x in body.stmts if isinstance(x, Allocate) and id(x.buffer) in freed
            and all(id(v) in bound for d in x.buffer.dims for v in free_vars(d))]


def _outline(em, s: For, ctx_t: ir.Type, cbufs, cvars) -> ir.Function:
    """``void body(i64 lo, i64 hi, ptr ctx)``: unpacks the captured values and calls
    ``body_loop(lo, hi, status, buffers..., values...)`` (always inlined; its buffer
    arguments are ``noalias`` when the kernel's are, which inlining keeps as alias scopes)."""
    em.n_outlined += 1
    name = f"{em.symbol}_{sanitize_name(s.var.name)}_par{em.n_outlined}"
    arg_types = [I64, I64, PTR] + [PTR] * len(cbufs) + [value_type(v.dtype) for v in cvars]
    loop_fn = ir.Function(em.module, ir.FunctionType(VOID, arg_types), name=name + "_loop")
    loop_fn.linkage = "internal"
    loop_fn.attributes.add("nounwind")
    loop_fn.attributes.add("alwaysinline")
    lo, hi, status = loop_fn.args[:3]
    lo.name, hi.name, status.name = "lo", "hi", "status"
    sub = FnState(loop_fn, in_parallel=True, status_ptr=status)
    for buf, a in zip(cbufs, loop_fn.args[3:]):
        a.name = sanitize_name(buf.name)
        if em.opts.noalias:
            a.add_attribute("noalias")
        sub.bufs[id(buf)] = a
    for v, a in zip(cvars, loop_fn.args[3 + len(cbufs):]):
        a.name = sanitize_name(v.name)
        sub.vars[id(v)] = a

    hoisted = chunk_allocations(s.body, sub.vars)
    for a in hoisted:
        em.visit(a, sub)
    moved = {id(a.buffer) for a in hoisted}
    loop_body = Block(tuple(x for x in s.body.stmts if not (isinstance(x, (Allocate, Free)) and id(x.buffer) in moved)))

    def body(iv):
        sub.bind_loop_var(s.var, iv)
        em.visit(loop_body, sub)
    sub.counted_loop(lo, hi, sanitize_name(s.var.name), body, unroll_hint(em.module, s, em.argument_ids))
    sub.free_all()
    em.store_fence(sub)
    sub.b.ret_void()
    sub.finish()

    fn = ir.Function(em.module, ir.FunctionType(VOID, [I64, I64, PTR]), name=name)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    fn.attributes.add("noinline")   # else LLVM copies the whole body into the kernel's one-thread path
    flo, fhi, ctx = fn.args
    flo.name, fhi.name, ctx.name = "lo", "hi", "ctx"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    fields = []
    for k, t in enumerate(ctx_t.elements):
        p = b.gep(ctx, [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True, source_etype=ctx_t)
        fields.append(b.load(p, typ=t))
    b.call(loop_fn, [flo, fhi] + fields)
    b.ret_void()
    return fn


def _call_gomp(st: FnState, body_fn: ir.Function, lo, hi, ctx, nthr) -> None:
    """Run ``body_fn`` on ``[lo, hi)`` through ``GOMP_parallel`` (through the Python thread pool
    in a child forked after libgomp ran, where libgomp cannot run)."""
    b = st.b
    module = st.fn.module
    data_t = ir.LiteralStructType([I64, I64, PTR, I64])   # start, stop, ctx, next unclaimed iteration
    data = st.alloca(data_t, name="omp_data")
    for k, v in enumerate((lo, hi, ctx, lo)):
        b.store(v, b.gep(data, [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True, source_etype=data_t))
    forked = b.load(external_i32(module, FORKED_SYMBOL), typ=I32, name="gomp_forked")
    use_pool = st.fn.append_basic_block("after_fork")
    use_gomp = st.fn.append_basic_block("gomp")
    joined = st.fn.append_basic_block("gomp_joined")
    b.cbranch(b.icmp_unsigned("!=", forked, ir.Constant(I32, 0)), use_pool, use_gomp)
    b.position_at_end(use_pool)
    b.call(declare(module, PARALLEL_FOR_SYMBOL, VOID, [PTR, I64, I64, PTR]), [body_fn, lo, hi, ctx])
    b.branch(joined)
    b.position_at_end(use_gomp)
    gomp = declare(module, "GOMP_parallel", VOID, [PTR, PTR, I32, I32])
    b.call(gomp, [_omp_trampoline(body_fn, data_t), data, nthr, ir.Constant(I32, 0)])
    b.branch(joined)
    b.position_at_end(joined)


def _omp_trampoline(body: ir.Function, data_t: ir.Type) -> ir.Function:
    """``void <body>_omp(ptr data)``, run by every thread of the OpenMP team: claim chunks of
    [start, stop) from a shared atomic counter until none is left (dynamic schedule, about
    four chunks per thread, so a thread the OS delays does not hold the others up)."""
    module = body.module
    fn = ir.Function(module, ir.FunctionType(VOID, [PTR]), name=body.name + "_omp")
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    data = fn.args[0]
    data.name = "data"

    def field(k):
        return b.gep(data, [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True, source_etype=data_t)
    start = b.load(field(0), typ=I64, name="start")
    stop = b.load(field(1), typ=I64, name="stop")
    ctx = b.load(field(2), typ=PTR, name="ctx")
    nt = b.sext(b.call(declare(module, "omp_get_num_threads", I32, []), []), I64, name="nthreads")
    n = b.sub(stop, start)
    parts = b.mul(nt, ir.Constant(I64, 4))
    chunk = b.sdiv(b.add(n, b.sub(parts, ir.Constant(I64, 1))), parts, name="chunk")
    grab = fn.append_basic_block("grab")
    run = fn.append_basic_block("run")
    done = fn.append_basic_block("done")
    b.branch(grab)
    b.position_at_end(grab)
    lo = b.atomic_rmw("add", field(3), chunk, "monotonic", name="lo")
    b.cbranch(b.icmp_signed("<", lo, stop), run, done)
    b.position_at_end(run)
    hi0 = b.add(lo, chunk)
    hi = b.select(b.icmp_signed("<", hi0, stop), hi0, stop, name="hi")
    b.call(body, [lo, hi, ctx])
    b.branch(grab)
    b.position_at_end(done)
    b.ret_void()
    return fn
