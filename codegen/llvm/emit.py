"""Prepared loop nest -> LLVM IR module (``llvmlite.ir``).

The kernel becomes one external function::

    i32 @te_<outputs>(ptr %A, ptr %B, ..., i32 %N, ...)

taking a pointer per buffer parameter and a value per scalar parameter or size variable
(of any scalar dtype, passed as ``types.arg_type`` says), and returning 0, 1
when a heap allocation failed, or ``ALIASED`` (with ``noalias``: the code is in
``@te_<outputs>_impl`` whose pointer arguments are ``noalias``, and the entry first checks
that no written array overlaps another argument; if one does it returns ``ALIASED`` and the
caller runs a variant compiled without ``noalias``). ``@te_<outputs>_py`` takes the numpy
array objects instead of data pointers. Semantics follow the TIR spec and the interpreter:

* integers wrap around (``add``/``sub``/``mul`` without ``nsw``); ``Div``/``Mod`` are C
  (``sdiv``/``srem``, ``udiv``/``urem``); ``FloorDiv``/``FloorMod`` adjust the C result when
  the signs differ. Division by 0 and ``MIN / -1`` never reach the printer:
  ``loopnest.legalize.guard_int_division`` spelled them out (docs/semantics.md).
* float -> int casts saturate (``llvm.fptosi.sat``): NaN -> 0, out of range -> min/max.
* float16 arithmetic is done in float32 and rounded back after each operation; bfloat16,
  tf32 and float8 values live in float32 registers, rounded to their format (nearest
  even, see ``lowp``) after each operation; bool is ``i1`` in registers, ``i8`` in memory.
* float ``Min``/``Max`` arrive as selects (``loopnest.legalize.expand_float_min_max``).
* a buffer of vector elements (``float32x4``) is stored as consecutive scalars: ``A[i]`` is a
  ``<4 x float>`` load from scalar ``4 * i``; a Ramp index of ``k`` lanes reads ``4 * k``.
* casts: a float -> float conversion returns a quiet NaN keeping the sign and leading payload
  (as ``te.lowprec.convert``); loads and stores copy NaNs bit-exactly.
* intrinsics are LLVM intrinsics (``llvm.sqrt``, ``llvm.floor``, ``llvm.roundeven``...), libm
  (``tanhf``, ``erff``), or inline arithmetic: float32 ``exp`` (and ``sigmoid``) use
  ``mathfns.exp_f32`` (within 1 ulp), which vectorises; ``rsqrt`` is ``1 / sqrt``.
* allocations are not initialised (the spec leaves them undefined; IREval zeroes them).
* ``Select`` evaluates both sides; ``IfThenElse`` and scalar ``And``/``Or`` only what is
  needed (branches and phis), so they can guard out-of-bounds loads.
* Index expressions of loads and stores are evaluated in 64 bits (32- and 64-bit
  ``+ - *`` without wraparound: an index that would overflow its own dtype is out of bounds
  either way; 8/16-bit index arithmetic wraps as the spec says).

Loops: serial loops are counted loops on an i64 induction variable; ``unrolled`` loops with
a constant extent of at most ``UNROLL_LIMIT`` are copied, others get
``llvm.loop.unroll.count``; loops still ``vectorized`` after preparation get
``llvm.loop.vectorize.enable``; ``parallel`` loops are outlined into
``void body(i64 lo, i64 hi, ptr ctx)`` and run through ``runtime`` (the native ``pool``,
libgomp or a Python thread pool); a parallel loop inside a parallel body runs serially.
Allocations of a constant size up to ``STACK_LIMIT`` bytes are ``alloca``s in the entry
block of the function (per thread inside a parallel body), others ``malloc``/``free``.

Streaming stores: a contiguous vector store to an output argument that the kernel never
reads, of a constant size of at least ``EmitOptions.nontemporal_min_bytes`` (half the
last-level cache, see ``build.streaming_store_bytes``), carries ``!nontemporal``: the data
goes to memory without first reading each cache line, a third less traffic for streaming
kernels. Those stores are weakly ordered, so every function using them ends with a store
fence (``sfence``) before returning or finishing its part of a parallel loop.

Every user name that reaches the IR goes through ``sanitize_name``.

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> A = Buffer("A", (4,), "float32")
>>> nest = LoopNest([Compute("B", (4,), lambda i: A[i] + 1.0)]).prepare_for_codegen()
>>> from codegen.kernel import make_params
>>> mod = emit_module("te_B", nest.root, make_params(nest, [A, nest.outputs[0]]), [], EmitOptions())
>>> "fadd contract float" in str(mod)
True
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from llvmlite import ir

from te import expr as E
from te.dtypes import Dtype
from te.expr import Expr, IntImm, Var
from te.queries import has_load
from loopnest.queries import stmt_loaded_buffers, stmt_stored_buffers
from loopnest.stmt import Allocate, Block, Cond, For, ForKind, Free, Let, Stmt, Store

from ..kernel import BuildError, Param, sanitize_name
from . import lowp, mathfns
from .types import (F32, F64, HALF, I1, I8, I32, I64, PTR, VOID, arg_type, const, intrinsic_suffix,
                    is_bit_float, scalar_storage_type, splat_const, storage_type, value_type)

__all__ = ["EmitOptions", "emit_module", "UNROLL_LIMIT", "STACK_LIMIT", "RUNTIMES"]

UNROLL_LIMIT = 64          # unrolled loops up to this constant extent are copied in the IR
UNROLL_COUNT = 8           # llvm.loop.unroll.count for longer / symbolic unrolled loops
STACK_LIMIT = 64 * 1024    # bytes: larger (or symbolic) allocations use malloc
STACK_BUDGET = 256 * 1024  # bytes of allocas per function before falling back to malloc
RUNTIMES = ("pool", "gomp", "threads", "serial")

NUM_THREADS_SYMBOL = "te_llvm_num_threads"
FORKED_SYMBOL = "te_llvm_gomp_forked"    # nonzero in a child forked after libgomp ran: gomp is unusable
PARALLEL_FOR_SYMBOL = "te_llvm_parallel_for"
POOL_SYMBOL = "te_llvm_pool_parallel_for"     # the native pool of ``pool`` (runtime "pool")
ALIASED = 2                              # kernel return code: arguments overlap, use the safe variant
RESERVED_SYMBOLS = frozenset({NUM_THREADS_SYMBOL, FORKED_SYMBOL, PARALLEL_FOR_SYMBOL, POOL_SYMBOL})


@dataclass(frozen=True)
class EmitOptions:
    """Code generation choices.

    ``parallel_runtime``: "pool" (the native thread pool of ``pool``), "gomp" (GOMP_parallel),
    "threads" (the Python thread pool of ``runtime``) or "serial" (parallel loops run as
    serial loops).
    """

    fast_math: bool = False
    #: let LLVM fuse a float multiply and the add or subtract that uses it into one FMA
    #: (``contract`` flags; one rounding instead of two, as nvcc does by default)
    fp_contract: bool = True
    parallel_runtime: str = "serial"
    #: when set, also emit ``@<symbol>_py`` taking the numpy array objects (PyObject*) and reading
    #: each array's data pointer at this byte offset (see ``build._array_data_offset``)
    array_data_offset: int | None = None
    triple: str = ""
    data_layout: str = ""
    #: mark buffer arguments ``noalias`` (better loops), behind a run-time overlap check that
    #: returns ``ALIASED`` so the caller can fall back to a variant built with ``noalias=False``
    noalias: bool = False
    #: streaming stores: contiguous vector stores to an output the kernel never reads go
    #: around the caches (``!nontemporal``) when that output has at least this many bytes
    #: and all the arguments together at least twice as many (0: never); see ``streaming_outputs``
    nontemporal_min_bytes: int = 0
    #: the target CPU's LLVM feature string (``+avx2,+fma,...``): inline math uses FMA when present
    cpu_features: str = ""


def emit_module(symbol: str, root: Stmt, buffer_params: Sequence[Param], scalar_vars: Sequence[Var],
                options: EmitOptions) -> ir.Module:
    """The LLVM module of a prepared statement; the kernel function is ``@symbol``.

    ``buffer_params`` become pointer arguments, ``scalar_vars`` value arguments, in order.
    """
    return _Emitter(symbol, buffer_params, scalar_vars, options).run(root)


# ----------------------------------------------------------------------------------------
# per-function state
# ----------------------------------------------------------------------------------------
class _Fn:
    """One LLVM function being emitted: builders, variable and buffer bindings."""

    def __init__(self, fn: ir.Function, in_parallel: bool, status_ptr: ir.Value | None = None):
        self.fn = fn
        self.in_parallel = in_parallel
        self.entry = fn.append_basic_block("entry")
        self.alloca_b = ir.IRBuilder(self.entry)
        start = fn.append_basic_block("start")
        self.b = ir.IRBuilder(start)
        self.start_block = start
        self.vars: dict[int, ir.Value] = {}
        self.ivs: dict[int, ir.Value] = {}      # loop var -> its i64 induction variable
        self.bufs: dict[int, ir.Value] = {}
        self.heap: dict[int, ir.Value] = {}     # malloc'd buffers still live
        self.stack_bytes = 0
        self.status_ptr = status_ptr            # outlined bodies report failures here
        self._fail: ir.Block | None = None

    def fail_block(self) -> ir.Block:
        """A block that reports an allocation failure and returns."""
        if self._fail is None:
            self._fail = self.fn.append_basic_block("alloc_failed")
            fb = ir.IRBuilder(self._fail)
            if self.status_ptr is not None:
                fb.store(ir.Constant(I32, 1), self.status_ptr)
            if isinstance(self.fn.function_type.return_type, ir.VoidType):
                fb.ret_void()
            else:
                fb.ret(ir.Constant(I32, 1))
        return self._fail

    def alloca(self, t: ir.Type, name: str = "", align: int | None = None) -> ir.Value:
        """An alloca in the entry block, typed as an opaque ``ptr`` (LLVM has no typed pointers)."""
        p = self.alloca_b.alloca(t, name=name)
        p.type = PTR
        if align is not None:
            p.align = align
        return p

    def finish(self):
        self.alloca_b.position_at_end(self.entry)
        self.alloca_b.branch(self.start_block)


def _is_signed(dt: Dtype) -> bool:
    return dt.is_int


class _Emitter:
    def __init__(self, symbol: str, buffer_params: Sequence[Param], scalar_vars: Sequence[Var],
                 options: EmitOptions):
        if options.parallel_runtime not in RUNTIMES:
            raise BuildError(f"unknown parallel runtime {options.parallel_runtime!r}; expected one of {RUNTIMES}")
        self.symbol = symbol
        self.opts = options
        self.fast = ("fast",) if options.fast_math else ()
        self.contract = ("contract",) if options.fp_contract and not options.fast_math else ()
        self.module = ir.Module(name=symbol)
        self.module.triple = options.triple
        self.module.data_layout = options.data_layout
        self.buffer_params = list(buffer_params)
        self.scalar_vars = list(scalar_vars)
        self._n_outlined = 0
        self._funcs: dict[str, ir.Function] = {}
        self.nt_bufs: frozenset = frozenset()   # streaming-store outputs (set by run)
        #: the target has fused multiply-add instructions (inline math uses them)
        self.has_fma = options.triple.startswith(("aarch64", "arm64")) or "+fma" in options.cpu_features.split(",")

    # ------------------------------------------------------------------------------------
    # module-level helpers
    # ------------------------------------------------------------------------------------
    def declare(self, name: str, ret: ir.Type, args: Sequence[ir.Type], var_arg=False) -> ir.Function:
        fn = self._funcs.get(name)
        if fn is None:
            fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, list(args), var_arg=var_arg), name=name)
        self._funcs[name] = fn
        return fn

    def intrinsic(self, base: str, t: ir.Type, nargs: int = 1, ret: ir.Type | None = None,
                  overloads: Sequence[ir.Type] | None = None) -> ir.Function:
        ovl = overloads if overloads is not None else [t]
        name = ".".join([base] + [intrinsic_suffix(x) for x in ovl])
        return self.declare(name, ret if ret is not None else t, [t] * nargs)

    def loop_md(self, *props) -> ir.MDValue:
        """A self-referential ``!llvm.loop`` node with ``(name, constants...)`` properties."""
        m = self.module
        ops = [m.add_metadata([ir.MetaDataString(m, p[0])] + list(p[1:])) for p in props]
        node = ir.values.MDValue(m, ops, name=str(len(m.metadata)))
        node.operands = (node,) + tuple(node.operands)
        return node

    # ------------------------------------------------------------------------------------
    # entry point
    # ------------------------------------------------------------------------------------
    def run(self, root: Stmt) -> ir.Module:
        self.nt_bufs = streaming_outputs(root, self.buffer_params, self.opts.nontemporal_min_bytes)
        args = [PTR] * len(self.buffer_params) + [arg_type(v.dtype) for v in self.scalar_vars]
        fnty = ir.FunctionType(I32, args)
        noalias = self.opts.noalias
        fn = ir.Function(self.module, fnty, name=self.symbol + "_impl" if noalias else self.symbol)
        fn.attributes.add("nounwind")
        if noalias:
            fn.linkage = "internal"
        st = _Fn(fn, in_parallel=False)
        for p, a in zip(self.buffer_params, fn.args):
            a.name = sanitize_name(p.name)
            if noalias:
                a.add_attribute("noalias")
            st.bufs[id(p.buffer)] = a
        for v, a in zip(self.scalar_vars, fn.args[len(self.buffer_params):]):
            a.name = sanitize_name(v.name)
        self.bind_scalar_args(st, fn.args[len(self.buffer_params):])
        self.stmt(st, root)
        if not st.b.block.is_terminated:
            for bid, p in list(st.heap.items()):  # defensive: free what an unmatched Allocate left
                self.free_heap(st, bid)
            self.store_fence(st)
            st.b.ret(ir.Constant(I32, 0))
        st.finish()
        entry = self.emit_alias_check(fn, root) if noalias else fn
        if self.opts.array_data_offset is not None:
            self.emit_py_wrapper(entry)
        return self.module

    def emit_alias_check(self, impl: ir.Function, root: Stmt) -> ir.Function:
        """``i32 @<symbol>(...)``: returns ``ALIASED`` when a buffer the kernel writes overlaps
        another buffer argument in memory (the caller then runs a variant compiled without
        ``noalias``), else calls ``@<symbol>_impl``, whose pointer arguments are ``noalias``."""
        fn = ir.Function(self.module, impl.function_type, name=self.symbol)
        fn.attributes.add("nounwind")
        st = _Fn(fn, in_parallel=False)
        b = st.b
        nbuf = len(self.buffer_params)
        for k, a in enumerate(fn.args):
            a.name = impl.args[k].name
        self.bind_scalar_args(st, fn.args[nbuf:])
        written = {id(b) for b in stmt_stored_buffers(root)}
        # [lo, hi) byte range and "written" flag of each argument, in three small arrays
        arr_t = ir.ArrayType(I64, nbuf)
        los, his, wrs = st.alloca(arr_t, "lo"), st.alloca(arr_t, "hi"), st.alloca(arr_t, "written")
        for k, (p, a) in enumerate(zip(self.buffer_params, fn.args)):
            count = ir.Constant(I64, p.buffer.dtype.itemsize * p.buffer.dtype.lanes)
            for d in p.buffer.dims:
                count = b.mul(count, self.index(st, d))
            lo = b.ptrtoint(a, I64)
            for arr, v in ((los, lo), (his, b.add(lo, count)), (wrs, ir.Constant(I64, int(id(p.buffer) in written)))):
                b.store(v, b.gep(arr, [ir.Constant(I64, 0), ir.Constant(I64, k)], inbounds=True, source_etype=arr_t))

        def elem(arr, i):
            return b.load(b.gep(arr, [ir.Constant(I64, 0), i], inbounds=True, source_etype=arr_t), typ=I64)
        no_unroll = self.loop_md(("llvm.loop.unroll.disable",))
        found = st.alloca(I1, "found")
        b.store(ir.Constant(I1, 0), found)

        def outer(x):
            def inner(y):
                check = b.and_(b.icmp_unsigned("!=", b.or_(elem(wrs, x), elem(wrs, y)), ir.Constant(I64, 0)),
                               b.and_(b.icmp_unsigned("<", elem(los, x), elem(his, y)),
                                      b.icmp_unsigned("<", elem(los, y), elem(his, x))))
                b.store(b.or_(b.load(found, typ=I1), check), found)
            self.counted_loop(st, b.add(x, ir.Constant(I64, 1)), ir.Constant(I64, nbuf), "y", inner, no_unroll)
        self.counted_loop(st, ir.Constant(I64, 0), ir.Constant(I64, nbuf), "x", outer, no_unroll)
        aliased = b.load(found, typ=I1)
        run_bb = fn.append_basic_block("distinct")
        alias_bb = fn.append_basic_block("aliased")
        b.cbranch(aliased, alias_bb, run_bb)
        b.position_at_end(alias_bb)
        b.ret(ir.Constant(I32, ALIASED))
        b.position_at_end(run_bb)
        b.ret(b.call(impl, list(fn.args)))
        st.finish()
        return fn

    def bind_scalar_args(self, st: _Fn, args: Sequence[ir.Value]) -> None:
        """Bind each scalar parameter to its register value, converted from how it is passed
        (``types.arg_type``: bool as ``i8``, float16 as an exactly representable ``float``)."""
        for v, a in zip(self.scalar_vars, args):
            want = value_type(v.dtype)
            if want is I1:
                a = st.b.icmp_unsigned("!=", a, ir.Constant(I8, 0), name=a.name + "_b")
            elif want is HALF:
                a = st.b.fptrunc(a, HALF, name=a.name + "_h")
            st.vars[id(v)] = a

    def emit_py_wrapper(self, kernel: ir.Function) -> None:
        """``i32 @<symbol>_py(ptr arrays..., sizes...)``: reads each numpy array's data pointer
        from the PyArrayObject and calls the kernel entry (saves the per-call pointer lookups in
        Python)."""
        fn = ir.Function(self.module, kernel.function_type, name=self.symbol + "_py")
        fn.attributes.add("nounwind")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        args = []
        nbuf = len(self.buffer_params)
        off = ir.Constant(I64, self.opts.array_data_offset)
        for k, a in enumerate(fn.args):
            a.name = kernel.args[k].name + ("_obj" if k < nbuf else "")
            if k < nbuf:
                field = b.gep(a, [off], inbounds=True, source_etype=I8)
                args.append(b.load(field, typ=PTR, name=kernel.args[k].name + "_data"))
            else:
                args.append(a)
        b.ret(b.call(kernel, args))

    # ------------------------------------------------------------------------------------
    # statements
    # ------------------------------------------------------------------------------------
    def stmt(self, st: _Fn, s: Stmt) -> None:
        h = getattr(self, "s_" + type(s).__name__, None)
        if h is None:
            raise BuildError(f"the LLVM backend cannot compile the statement {type(s).__name__}")
        h(st, s)

    def s_Block(self, st: _Fn, s: Block):
        for x in s.stmts:
            self.stmt(st, x)

    def s_LetStmt(self, st: _Fn, s: Let):
        v = self.expr(st, s.value)
        old = st.vars.get(id(s.var))
        st.vars[id(s.var)] = v
        self.stmt(st, s.body)
        if old is None:
            st.vars.pop(id(s.var), None)
        else:
            st.vars[id(s.var)] = old

    def s_Cond(self, st: _Fn, s: Cond):
        b = st.b
        c = self.expr(st, s.cond)
        then_bb = st.fn.append_basic_block("then")
        merge_bb = st.fn.append_basic_block("endif")
        else_bb = st.fn.append_basic_block("else") if s.otherwise is not None and s.otherwise.stmts else merge_bb
        b.cbranch(c, then_bb, else_bb)
        b.position_at_end(then_bb)
        self.stmt(st, s.then)
        if not b.block.is_terminated:
            b.branch(merge_bb)
        if else_bb is not merge_bb:
            b.position_at_end(else_bb)
            self.stmt(st, s.otherwise)
            if not b.block.is_terminated:
                b.branch(merge_bb)
        b.position_at_end(merge_bb)

    def s_Store(self, st: _Fn, s: Store):
        if len(s.indices) != 1:
            raise BuildError(f"store to {s.buffer.name} has {len(s.indices)} indices; the LLVM backend needs a "
                             "prepared nest (one flat index per access): call nest.prepare_for_codegen()")
        value = self.expr(st, s.value)
        self.store(st, s.buffer, s.indices[0], value, s.value.dtype)

    def s_Allocate(self, st: _Fn, s: Allocate):
        buf = s.buffer
        elem = scalar_storage_type(buf.dtype)      # vector elements are stored as consecutive scalars
        itemsize = buf.dtype.itemsize * buf.dtype.lanes
        n = buf.static_size()
        name = sanitize_name(buf.name)
        if n is not None and n * itemsize <= STACK_LIMIT and st.stack_bytes + n * itemsize <= STACK_BUDGET:
            p = st.alloca(ir.ArrayType(elem, max(n * buf.dtype.lanes, 1)), name=name, align=64)
            st.stack_bytes += n * itemsize
            st.bufs[id(buf)] = p
            return
        b = st.b
        count = ir.Constant(I64, 1)
        for d in buf.dims:
            count = b.mul(count, self.index(st, d))
        nbytes = b.mul(count, ir.Constant(I64, itemsize))
        nbytes = b.select(b.icmp_signed("<", nbytes, ir.Constant(I64, 1)), ir.Constant(I64, 1), nbytes)
        malloc = self.declare("malloc", PTR, [I64])
        p = b.call(malloc, [nbytes], name=name)
        ok = st.fn.append_basic_block(f"{name}_allocated")
        b.cbranch(b.icmp_unsigned("==", p, ir.Constant(PTR, None)), st.fail_block(), ok)
        b.position_at_end(ok)
        st.heap[id(buf)] = p
        st.bufs[id(buf)] = p

    def s_Free(self, st: _Fn, s: Free):
        if id(s.buffer) in st.heap:
            self.free_heap(st, id(s.buffer))

    def free_heap(self, st: _Fn, bid: int):
        p = st.heap.pop(bid)
        st.b.call(self.declare("free", VOID, [PTR]), [p])

    # -- loops -----------------------------------------------------------------------------
    def s_For(self, st: _Fn, s: For):
        kind = s.kind
        if kind in (ForKind.GPU_BLOCK, ForKind.GPU_THREAD):
            raise BuildError(f"loop {s.var.name} is bound to a GPU {kind} index; the llvm target runs on the CPU "
                             "(build it with target='cuda', or leave the loop serial)")
        if kind == ForKind.UNROLLED:
            ext = _const_extent(s)
            if ext is not None and ext <= UNROLL_LIMIT:
                self.unrolled(st, s, ext)
                return
            md = self.loop_md(("llvm.loop.unroll.count", ir.Constant(I32, UNROLL_COUNT)))
            self.serial_loop(st, s, md)
            return
        if kind == ForKind.VECTORIZED:
            md = self.loop_md(("llvm.loop.vectorize.enable", ir.Constant(I1, 1)))
            self.serial_loop(st, s, md)
            return
        if kind == ForKind.PARALLEL and not st.in_parallel and self.opts.parallel_runtime != "serial":
            self.parallel_loop(st, s)
            return
        self.serial_loop(st, s, None)

    def bounds64(self, st: _Fn, s: For) -> tuple[ir.Value, ir.Value]:
        return self.index(st, s.start), self.index(st, s.stop)

    def bind_loop_var(self, st: _Fn, var: Var, iv: ir.Value):
        st.ivs[id(var)] = iv
        t = value_type(var.dtype)
        st.vars[id(var)] = iv if t == I64 else st.b.trunc(iv, t, name=f"{sanitize_name(var.name)}.{t}")

    def unbind_loop_var(self, st: _Fn, var: Var):
        st.ivs.pop(id(var), None)
        st.vars.pop(id(var), None)

    def serial_loop(self, st: _Fn, s: For, md):
        lo, hi = self.bounds64(st, s)

        def body(iv):
            self.bind_loop_var(st, s.var, iv)
            self.stmt(st, s.body)
            self.unbind_loop_var(st, s.var)
        self.counted_loop(st, lo, hi, sanitize_name(s.var.name), body, md)

    def counted_loop(self, st: _Fn, lo: ir.Value, hi: ir.Value, name: str, body: Callable[[ir.Value], None], md):
        b = st.b
        pre = b.block
        body_bb = st.fn.append_basic_block(f"{name}_loop")
        exit_bb = st.fn.append_basic_block(f"{name}_exit")
        b.cbranch(b.icmp_signed("<", lo, hi), body_bb, exit_bb)
        b.position_at_end(body_bb)
        iv = b.phi(I64, name=name)
        iv.add_incoming(lo, pre)
        body(iv)
        nxt = b.add(iv, ir.Constant(I64, 1), name=f"{name}_next", flags=("nsw",))  # iv < hi: no overflow
        iv.add_incoming(nxt, b.block)
        br = b.cbranch(b.icmp_signed("<", nxt, hi), body_bb, exit_bb)
        if md is not None:
            br.set_metadata("llvm.loop", md)
        b.position_at_end(exit_bb)

    def unrolled(self, st: _Fn, s: For, extent: int):
        start = s.start.value if isinstance(s.start, IntImm) else None
        if start is None:
            lo = self.index(st, s.start)
        for k in range(extent):
            if start is not None:
                iv = ir.Constant(I64, start + k)
                st.ivs[id(s.var)] = iv
                st.vars[id(s.var)] = const(start + k, s.var.dtype)
            else:
                self.bind_loop_var(st, s.var, st.b.add(lo, ir.Constant(I64, k), flags=("nsw",)))
            self.stmt(st, s.body)
        self.unbind_loop_var(st, s.var)

    def parallel_loop(self, st: _Fn, s: For):
        from .outline import captures
        b = st.b
        lo, hi = self.bounds64(st, s)
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
        body_fn = self.outline(s, ctx_t, cbufs, cvars)
        # one iteration, or one thread (set_num_threads(1)): call the body directly
        vname = sanitize_name(s.var.name)
        nthr = b.load(self.external_i32(NUM_THREADS_SYMBOL), typ=I32, name="num_threads")
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
        if self.opts.parallel_runtime == "gomp":
            self.call_gomp(st, body_fn, lo, hi, ctx, nthr)
        elif self.opts.parallel_runtime == "pool":
            pool_for = self.declare(POOL_SYMBOL, VOID, [PTR, I64, I64, PTR, I32])
            b.call(pool_for, [body_fn, lo, hi, ctx, nthr])
        else:
            pf = self.declare(PARALLEL_FOR_SYMBOL, VOID, [PTR, I64, I64, PTR])
            b.call(pf, [body_fn, lo, hi, ctx])
        b.branch(done_bb)
        b.position_at_end(done_bb)
        ok = st.fn.append_basic_block(f"{vname}_joined")
        failed = b.icmp_unsigned("!=", b.load(status, typ=I32), ir.Constant(I32, 0))
        b.cbranch(failed, st.fail_block(), ok)
        b.position_at_end(ok)

    def outline(self, s: For, ctx_t: ir.Type, cbufs, cvars) -> ir.Function:
        """``void body(i64 lo, i64 hi, ptr ctx)``: unpacks the captured values and calls
        ``body_loop(lo, hi, status, buffers..., values...)`` (always inlined; its buffer
        arguments are ``noalias`` when the kernel's are, which inlining keeps as alias scopes)."""
        self._n_outlined += 1
        name = f"{self.symbol}_{sanitize_name(s.var.name)}_par{self._n_outlined}"
        arg_types = [I64, I64, PTR] + [PTR] * len(cbufs) + [value_type(v.dtype) for v in cvars]
        loop_fn = ir.Function(self.module, ir.FunctionType(VOID, arg_types), name=name + "_loop")
        loop_fn.linkage = "internal"
        loop_fn.attributes.add("nounwind")
        loop_fn.attributes.add("alwaysinline")
        lo, hi, status = loop_fn.args[:3]
        lo.name, hi.name, status.name = "lo", "hi", "status"
        sub = _Fn(loop_fn, in_parallel=True, status_ptr=status)
        for buf, a in zip(cbufs, loop_fn.args[3:]):
            a.name = sanitize_name(buf.name)
            if self.opts.noalias:
                a.add_attribute("noalias")
            sub.bufs[id(buf)] = a
        for v, a in zip(cvars, loop_fn.args[3 + len(cbufs):]):
            a.name = sanitize_name(v.name)
            sub.vars[id(v)] = a

        def body(iv):
            self.bind_loop_var(sub, s.var, iv)
            self.stmt(sub, s.body)
        self.counted_loop(sub, lo, hi, sanitize_name(s.var.name), body, None)
        for bid in list(sub.heap):
            self.free_heap(sub, bid)
        self.store_fence(sub)
        sub.b.ret_void()
        sub.finish()

        fn = ir.Function(self.module, ir.FunctionType(VOID, [I64, I64, PTR]), name=name)
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
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

    def call_gomp(self, st: _Fn, body_fn: ir.Function, lo, hi, ctx, nthr):
        b = st.b
        data_t = ir.LiteralStructType([I64, I64, PTR, I64])   # start, stop, ctx, next unclaimed iteration
        data = st.alloca(data_t, name="omp_data")
        for k, v in enumerate((lo, hi, ctx, lo)):
            b.store(v, b.gep(data, [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True, source_etype=data_t))
        forked = b.load(self.external_i32(FORKED_SYMBOL), typ=I32, name="gomp_forked")
        use_pool = st.fn.append_basic_block("after_fork")
        use_gomp = st.fn.append_basic_block("gomp")
        joined = st.fn.append_basic_block("gomp_joined")
        b.cbranch(b.icmp_unsigned("!=", forked, ir.Constant(I32, 0)), use_pool, use_gomp)
        b.position_at_end(use_pool)  # libgomp cannot run in a forked child: use the thread-pool runtime
        b.call(self.declare(PARALLEL_FOR_SYMBOL, VOID, [PTR, I64, I64, PTR]), [body_fn, lo, hi, ctx])
        b.branch(joined)
        b.position_at_end(use_gomp)
        gomp = self.declare("GOMP_parallel", VOID, [PTR, PTR, I32, I32])
        b.call(gomp, [self.omp_trampoline(body_fn, data_t), data, nthr, ir.Constant(I32, 0)])
        b.branch(joined)
        b.position_at_end(joined)

    def external_i32(self, name: str) -> ir.GlobalVariable:
        g = self.module.globals.get(name)
        if g is None:
            g = ir.GlobalVariable(self.module, I32, name)
            g.linkage = "external"
        return g

    def omp_trampoline(self, body: ir.Function, data_t: ir.Type) -> ir.Function:
        """``void <body>_omp(ptr data)``, run by every thread of the OpenMP team: claim chunks of
        [start, stop) from a shared atomic counter until none is left (dynamic schedule, about
        four chunks per thread, so a thread the OS delays does not hold the others up)."""
        fn = ir.Function(self.module, ir.FunctionType(VOID, [PTR]), name=body.name + "_omp")
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
        nt = b.sext(b.call(self.declare("omp_get_num_threads", I32, []), []), I64, name="nthreads")
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

    # ------------------------------------------------------------------------------------
    # memory
    # ------------------------------------------------------------------------------------
    def pointer(self, st: _Fn, buf, idx64: ir.Value, component: int = 0) -> ir.Value:
        """The address of element ``idx64`` of ``buf`` (of lane ``component`` of it, for a buffer of
        vector elements, which are stored as ``lanes`` consecutive scalars)."""
        base = st.bufs.get(id(buf))
        if base is None:
            raise BuildError(f"buffer {buf.name} is accessed but has no storage here (not a parameter and not "
                             "allocated by an Allocate in scope)")
        lanes = buf.dtype.lanes
        if lanes > 1:
            idx64 = st.b.mul(idx64, ir.Constant(I64, lanes), flags=("nsw",))
            if component:
                idx64 = st.b.add(idx64, ir.Constant(I64, component), flags=("nsw",))
        return st.b.gep(base, [idx64], inbounds=True, source_etype=scalar_storage_type(buf.dtype))

    def to_storage(self, st: _Fn, dt: Dtype, v: ir.Value) -> ir.Value:
        """Register value -> memory representation."""
        b = st.b
        if dt.is_bool:
            return b.zext(v, storage_type(dt))
        if is_bit_float(dt) and dt.kind != "tf32":
            return lowp.encode(b, v, lowp.format_name(dt), store=True)
        return v

    def from_storage(self, st: _Fn, dt: Dtype, v: ir.Value) -> ir.Value:
        b = st.b
        if dt.is_bool:
            return b.icmp_unsigned("!=", v, splat_const(v.type, 0))
        if is_bit_float(dt) and dt.kind != "tf32":
            return lowp.decode(b, v, lowp.format_name(dt))
        return v

    def load(self, st: _Fn, e: E.Load, lane) -> ir.Value:
        buf = e.buffer
        if len(e.indices) != 1:
            raise BuildError(f"load of {buf.name} has {len(e.indices)} indices; the LLVM backend needs a prepared "
                             "nest (one flat index per access): call nest.prepare_for_codegen()")
        if buf.dtype.lanes != 1:
            return self.vector_element_load(st, e, lane)
        idx = e.indices[0]
        b = st.b
        edt = buf.dtype
        st_t = scalar_storage_type(edt)
        align = max(1, edt.itemsize)
        if idx.dtype.lanes == 1 or lane is not None:
            p = self.pointer(st, buf, self.index(st, idx, lane))
            return self.from_storage(st, edt, b.load(p, typ=st_t, align=align))
        lanes = idx.dtype.lanes
        vdt = edt.with_lanes(lanes)
        ramp = _ramp_parts(idx)
        if ramp is not None and ramp[1] == 1:
            p = self.pointer(st, buf, self.index(st, ramp[0]))
            return self.from_storage(st, vdt, b.load(p, typ=storage_type(vdt), align=align))
        if ramp is not None and ramp[1] == 0:
            p = self.pointer(st, buf, self.index(st, ramp[0]))
            v = self.from_storage(st, edt, b.load(p, typ=st_t, align=align))
            return self.splat(st, v, lanes)
        ivec = self.index(st, idx)
        out = ir.Constant(storage_type(vdt), ir.Undefined)
        for k in range(lanes):
            p = self.pointer(st, buf, b.extract_element(ivec, ir.Constant(I32, k)))
            out = b.insert_element(out, b.load(p, typ=st_t, align=align), ir.Constant(I32, k))
        return self.from_storage(st, vdt, out)

    def vector_element_load(self, st: _Fn, e: E.Load, lane) -> ir.Value:
        """A load from a buffer of vector elements (``float32x4``): ``<lanes x T>`` read from the
        scalars ``lanes * i ...``; a vector index of ``k`` lanes reads ``k * lanes`` lanes."""
        buf = e.buffer
        b = st.b
        edt = buf.dtype
        lanes = edt.lanes
        st_t = scalar_storage_type(edt)
        align = max(1, edt.itemsize)
        idx = e.indices[0]
        k = idx.dtype.lanes
        if lane is not None:                      # one lane of the loaded vector
            kk, comp = divmod(lane, lanes)
            p = self.pointer(st, buf, self.index(st, idx, kk if k > 1 else None), comp)
            return self.from_storage(st, edt.element, b.load(p, typ=st_t, align=align))
        vdt = edt.with_lanes(k * lanes)
        ramp = _ramp_parts(idx) if k > 1 else (idx, 1)
        if ramp is not None and ramp[1] == 1:     # contiguous
            p = self.pointer(st, buf, self.index(st, ramp[0]))
            return self.from_storage(st, vdt, b.load(p, typ=storage_type(vdt), align=align))
        ivec = self.index(st, idx)
        out = ir.Constant(storage_type(vdt), ir.Undefined)
        for j in range(k):
            ij = b.extract_element(ivec, ir.Constant(I32, j))
            for c in range(lanes):
                v = b.load(self.pointer(st, buf, ij, c), typ=st_t, align=align)
                out = b.insert_element(out, v, ir.Constant(I32, j * lanes + c))
        return self.from_storage(st, vdt, out)

    def vector_element_store(self, st: _Fn, buf, idx: Expr, sv: ir.Value):
        """Store the storage-typed value ``sv`` to a buffer of vector elements (see
        ``vector_element_load``)."""
        b = st.b
        align = max(1, buf.dtype.itemsize)
        lanes = buf.dtype.lanes
        k = idx.dtype.lanes
        ramp = _ramp_parts(idx) if k > 1 else (idx, 1)
        if ramp is not None and ramp[1] == 1:
            b.store(sv, self.pointer(st, buf, self.index(st, ramp[0])), align=align)
            return
        ivec = self.index(st, idx)
        for j in range(k):
            ij = b.extract_element(ivec, ir.Constant(I32, j))
            for c in range(lanes):
                b.store(b.extract_element(sv, ir.Constant(I32, j * lanes + c)), self.pointer(st, buf, ij, c),
                        align=align)

    def store_fence(self, st: _Fn) -> None:
        """Order this function's streaming stores before whatever follows its return (they are
        weakly ordered: another thread, or the caller, must see them once the loop is done)."""
        if not self.nt_bufs:
            return
        if self.opts.triple.startswith(("x86_64", "i386", "i686")):
            st.b.call(self.declare("llvm.x86.sse.sfence", VOID, []), [])
        else:
            st.b.fence("seq_cst")

    def store(self, st: _Fn, buf, idx: Expr, value: ir.Value, vdt: Dtype):
        if buf.dtype.lanes != 1:
            self.vector_element_store(st, buf, idx, self.to_storage(st, vdt, value))
            return
        b = st.b
        align = max(1, buf.dtype.itemsize)
        sv = self.to_storage(st, vdt, value)
        if idx.dtype.lanes == 1:
            b.store(sv, self.pointer(st, buf, self.index(st, idx)), align=align)
            return
        ramp = _ramp_parts(idx)
        if ramp is not None and ramp[1] == 1:
            inst = b.store(sv, self.pointer(st, buf, self.index(st, ramp[0])), align=align)
            if id(buf) in self.nt_bufs:
                inst.set_metadata("nontemporal", self.module.add_metadata([ir.Constant(I32, 1)]))
            return
        ivec = self.index(st, idx)
        for k in range(idx.dtype.lanes):
            ck = ir.Constant(I32, k)
            b.store(b.extract_element(sv, ck), self.pointer(st, buf, b.extract_element(ivec, ck)), align=align)

    def splat(self, st: _Fn, v: ir.Value, lanes: int) -> ir.Value:
        b = st.b
        vt = ir.VectorType(v.type, lanes)
        if isinstance(v, ir.Constant):
            return ir.Constant(vt, [v] * lanes)
        one = b.insert_element(ir.Constant(vt, ir.Undefined), v, ir.Constant(I32, 0))
        return b.shuffle_vector(one, ir.Constant(vt, ir.Undefined),
                                ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))

    # ------------------------------------------------------------------------------------
    # index arithmetic (64-bit)
    # ------------------------------------------------------------------------------------
    def index(self, st: _Fn, e: Expr, lane=None) -> ir.Value:
        """``e`` as an i64 (or ``<n x i64>``) for addressing and loop bounds."""
        if lane is not None and e.dtype.lanes == 1:
            lane = None
        b = st.b
        lanes = 1 if lane is not None else e.dtype.lanes
        t64 = I64 if lanes == 1 else ir.VectorType(I64, lanes)
        if isinstance(e, IntImm):
            return ir.Constant(I64, e.value)
        if isinstance(e, Var) and id(e) in st.ivs and e.dtype.lanes == 1:
            return st.ivs[id(e)]
        if isinstance(e, (E.Add, E.Sub, E.Mul)) and e.dtype.is_integer and e.dtype.bits >= 32:
            # 8/16-bit arithmetic keeps its wraparound (a table lookup T[x + 10] on uint8 x may rely
            # on it); 32/64-bit index arithmetic that overflows would be out of bounds anyway
            x, y = self.index(st, e.a, lane), self.index(st, e.b, lane)
            op = {E.Add: b.add, E.Sub: b.sub, E.Mul: b.mul}[type(e)]
            return op(x, y, flags=("nsw",))
        if isinstance(e, E.Ramp):
            base, stride = self.index(st, e.base), self.index(st, e.stride)
            if lane is not None:
                return b.add(base, b.mul(stride, ir.Constant(I64, lane)), flags=("nsw",))
            steps = ir.Constant(t64, [ir.Constant(I64, k) for k in range(e.lanes)])
            return b.add(self.splat(st, base, e.lanes), b.mul(self.splat(st, stride, e.lanes), steps, flags=("nsw",)),
                         flags=("nsw",))
        if isinstance(e, E.Broadcast):
            v = self.index(st, e.value)
            return v if lane is not None else self.splat(st, v, e.lanes)
        v = self.expr(st, e, lane)
        if v.type == t64:
            return v
        if not (e.dtype.is_integer or e.dtype.is_bool):
            raise BuildError(f"index `{e}` has dtype {e.dtype}; indices must be integers")
        return b.sext(v, t64) if _is_signed(e.dtype) else b.zext(v, t64)

    # ------------------------------------------------------------------------------------
    # expressions
    # ------------------------------------------------------------------------------------
    def expr(self, st: _Fn, e: Expr, lane: int | None = None) -> ir.Value:
        """The register value of ``e``; with ``lane``, the scalar value of that lane of a vector."""
        if lane is not None and e.dtype.lanes == 1:
            lane = None
        h = getattr(self, "e_" + type(e).__name__, None)
        if h is None:
            raise BuildError(f"the LLVM backend cannot compile the expression {type(e).__name__} (`{e}`)")
        return h(st, e, lane)

    @staticmethod
    def _dt(e: Expr, lane) -> Dtype:
        return e.dtype if lane is None else e.dtype.element

    def e_Var(self, st, e: Var, lane):
        v = st.vars.get(id(e))
        if v is None:
            raise BuildError(f"variable {e.name} is used but not bound (not a loop variable, a let, or a size "
                             "parameter of the kernel)")
        if lane is not None:
            return st.b.extract_element(v, ir.Constant(I32, lane))
        return v

    def e_IntImm(self, st, e: IntImm, lane):
        return const(e.value, e.dtype)

    def e_FloatImm(self, st, e, lane):
        return const(e.value, e.dtype)

    def e_Broadcast(self, st, e: E.Broadcast, lane):
        v = self.expr(st, e.value)
        return v if lane is not None else self.splat(st, v, e.lanes)

    def e_Ramp(self, st, e: E.Ramp, lane):
        dt = e.base.dtype
        base, stride = self.expr(st, e.base), self.expr(st, e.stride)
        if lane is not None:
            return st.b.add(base, st.b.mul(stride, const(lane, dt)))
        steps = ir.Constant(value_type(e.dtype), [const(k, dt) for k in range(e.lanes)])
        return st.b.add(self.splat(st, base, e.lanes), st.b.mul(self.splat(st, stride, e.lanes), steps))

    def e_Load(self, st, e: E.Load, lane):
        return self.load(st, e, lane)

    def e_Let(self, st, e: E.Let, lane):
        v = self.expr(st, e.value)
        old = st.vars.get(id(e.var))
        st.vars[id(e.var)] = v
        out = self.expr(st, e.body, lane)
        if old is None:
            st.vars.pop(id(e.var), None)
        else:
            st.vars[id(e.var)] = old
        return out

    def e_Cast(self, st, e: E.Cast, lane):
        src = e.value.dtype if lane is None else e.value.dtype.element
        return self.cast(st, src, self._dt(e, lane), self.expr(st, e.value, lane))

    def e_Not(self, st, e: E.Not, lane):
        v = self.expr(st, e.a, lane)
        return st.b.xor(v, splat_const(v.type, 1))

    def e_Select(self, st, e: E.Select, lane):
        c = self.expr(st, e.cond, lane)
        t = self.expr(st, e.t, lane)
        f = self.expr(st, e.f, lane)
        return st.b.select(c, t, f)

    def e_IfThenElse(self, st, e: E.IfThenElse, lane):
        if not (has_load(e.t) or has_load(e.f)):
            return self.e_Select(st, e, lane)
        b = st.b
        if e.cond.dtype.lanes > 1 and lane is None:  # a vector condition: lane by lane
            out = ir.Constant(value_type(e.dtype), ir.Undefined)
            for k in range(e.dtype.lanes):
                out = b.insert_element(out, self.e_IfThenElse(st, e, k), ir.Constant(I32, k))
            return out
        c = self.expr(st, e.cond, lane)
        return self.branch_value(st, c, lambda: self.expr(st, e.t, lane), lambda: self.expr(st, e.f, lane),
                                 "ite")

    def branch_value(self, st: _Fn, c, then_fn, else_fn, name: str) -> ir.Value:
        b = st.b
        then_bb = st.fn.append_basic_block(f"{name}_then")
        else_bb = st.fn.append_basic_block(f"{name}_else")
        merge_bb = st.fn.append_basic_block(f"{name}_end")
        b.cbranch(c, then_bb, else_bb)
        b.position_at_end(then_bb)
        tv = then_fn()
        t_end = b.block
        b.branch(merge_bb)
        b.position_at_end(else_bb)
        fv = else_fn()
        f_end = b.block
        b.branch(merge_bb)
        b.position_at_end(merge_bb)
        phi = b.phi(tv.type)
        phi.add_incoming(tv, t_end)
        phi.add_incoming(fv, f_end)
        return phi

    def e_And(self, st, e, lane):
        return self._logical(st, e, lane, is_and=True)

    def e_Or(self, st, e, lane):
        return self._logical(st, e, lane, is_and=False)

    def _logical(self, st, e, lane, is_and: bool):
        b = st.b
        a = self.expr(st, e.a, lane)
        if self._dt(e, lane).lanes > 1 or not has_load(e.b):
            y = self.expr(st, e.b, lane)
            return b.and_(a, y) if is_and else b.or_(a, y)
        short = ir.Constant(I1, 0 if is_and else 1)
        return self.branch_value(st, a, (lambda: self.expr(st, e.b, lane)) if is_and else (lambda: short),
                                 (lambda: short) if is_and else (lambda: self.expr(st, e.b, lane)),
                                 "and" if is_and else "or")

    def _binary(self, st, e, lane):
        dt = e.a.dtype if lane is None else e.a.dtype.element
        a = self.expr(st, e.a, lane)
        y = self.expr(st, e.b, lane)
        return self.binop(st, type(e), dt, a, y)

    e_Add = e_Sub = e_Mul = e_Div = e_Mod = e_FloorDiv = e_FloorMod = e_Min = e_Max = _binary
    e_EQ = e_NE = e_LT = e_LE = e_GT = e_GE = _binary

    def e_Call(self, st, e: E.Call, lane):
        args = [self.expr(st, a, lane) for a in e.args]
        adt = e.args[0].dtype if lane is None else e.args[0].dtype.element
        return self.call(st, e.name, adt, args)

    # ------------------------------------------------------------------------------------
    # value-level operations
    # ------------------------------------------------------------------------------------
    def float_compute(self, st: _Fn, dt: Dtype, args: Sequence[ir.Value], fn: Callable) -> ir.Value:
        """Apply ``fn`` to float values of dtype ``dt``: float16 through float32, the bit formats
        rounded back to their format afterwards."""
        b = st.b
        if dt.kind == "float" and dt.bits == 16:
            ft = F32 if dt.lanes == 1 else ir.VectorType(F32, dt.lanes)
            r = fn(*[b.fpext(a, ft) for a in args])
            return b.fptrunc(r, value_type(dt)) if r.type == ft else r
        r = fn(*args)
        if is_bit_float(dt) and not _is_i1(r.type):
            return lowp.round_to(b, r, lowp.format_name(dt))
        return r

    def binop(self, st: _Fn, cls, dt: Dtype, a: ir.Value, y: ir.Value) -> ir.Value:
        b = st.b
        if issubclass(cls, E.CmpOp):
            return self.compare(st, cls, dt, a, y)
        if dt.is_bool:
            if cls is E.Max:
                return b.or_(a, y)
            if cls is E.Min:
                return b.and_(a, y)
            raise BuildError(f"arithmetic {cls.__name__} on bool operands is not defined")
        if dt.is_float:
            fm = self.fast
            if cls in (E.FloorDiv, E.FloorMod):
                return self.float_floor_div_mod(st, cls, dt, a, y)

            fmc = fm + self.contract

            def op(x, z):
                if cls is E.Add:
                    return b.fadd(x, z, flags=fmc)
                if cls is E.Sub:
                    return b.fsub(x, z, flags=fmc)
                if cls is E.Mul:
                    return b.fmul(x, z, flags=fmc)
                if cls is E.Div:
                    return b.fdiv(x, z, flags=fm)
                raise BuildError(f"{cls.__name__} is not defined on float operands")
            if cls in (E.Min, E.Max):
                raise BuildError(f"a float {cls.__name__} reached the LLVM printer: the nest was not legalized "
                                 "(loopnest.passes.legalize_for_target(nest, 'llvm') spells it out as selects)")
            return self.float_compute(st, dt, [a, y], op)
        signed = _is_signed(dt)
        if cls is E.Add:
            return b.add(a, y)
        if cls is E.Sub:
            return b.sub(a, y)
        if cls is E.Mul:
            return b.mul(a, y)
        if cls in (E.Min, E.Max):
            pred = "<" if cls is E.Min else ">"
            c = b.icmp_signed(pred, a, y) if signed else b.icmp_unsigned(pred, a, y)
            return b.select(c, a, y)
        if cls in (E.Div, E.Mod, E.FloorDiv, E.FloorMod):
            return self.int_division(st, cls, signed, a, y)
        raise BuildError(f"{cls.__name__} is not supported on {dt}")  # pragma: no cover

    def float_floor_div_mod(self, st: _Fn, cls, dt: Dtype, a: ir.Value, y: ir.Value) -> ir.Value:
        """floor(a / b) and a - floor(a / b) * b, rounding to ``dt`` after every step (as IREval)."""
        b = st.b
        fm = self.fast
        rnd = self.float_compute

        def div(x, z):
            return rnd(st, dt, [x, z], lambda p, q: b.fdiv(p, q, flags=fm))
        q = rnd(st, dt, [div(a, y)], lambda p: self.fcall(st, "llvm.floor", [p]))
        if cls is E.FloorDiv:
            return q
        qb = rnd(st, dt, [q, y], lambda p, r: b.fmul(p, r, flags=fm))
        return rnd(st, dt, [a, qb], lambda p, r: b.fsub(p, r, flags=fm))

    def int_division(self, st: _Fn, cls, signed: bool, a: ir.Value, y: ir.Value) -> ir.Value:
        """C division / remainder and their floor variants. The divisor is never 0 nor, for
        signed types, -1: ``loopnest.legalize.guard_int_division`` rewrote those cases."""
        b = st.b
        zero, one = splat_const(a.type, 0), splat_const(a.type, 1)
        if cls is E.Div or (cls is E.FloorDiv and not signed):
            return b.sdiv(a, y) if signed else b.udiv(a, y)
        r = b.srem(a, y) if signed else b.urem(a, y)
        if cls is E.Mod or not signed:
            return r
        # floor variants for signed operands: adjust when the remainder and divisor differ in sign
        adjust = b.and_(b.icmp_unsigned("!=", r, zero), b.icmp_signed("<", b.xor(r, y), zero))
        if cls is E.FloorDiv:
            q = b.sdiv(a, y)
            return b.select(adjust, b.sub(q, one), q)
        return b.select(adjust, b.add(r, y), r)

    def compare(self, st: _Fn, cls, dt: Dtype, a: ir.Value, y: ir.Value) -> ir.Value:
        b = st.b
        op = {E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">="}[cls]
        if dt.is_float:
            if dt.kind == "float" and dt.bits == 16:
                ft = F32 if dt.lanes == 1 else ir.VectorType(F32, dt.lanes)
                a, y = b.fpext(a, ft), b.fpext(y, ft)
            if cls is E.NE:
                return b.fcmp_unordered("!=", a, y, flags=self.fast)
            return b.fcmp_ordered(op, a, y, flags=self.fast)
        if _is_signed(dt):
            return b.icmp_signed(op, a, y)
        return b.icmp_unsigned(op, a, y)

    def fcall(self, st: _Fn, name: str, args: Sequence[ir.Value]) -> ir.Value:
        t = args[0].type
        fn = self.intrinsic(name, t, len(args))
        return st.b.call(fn, list(args), fastmath=self.fast)

    def exp(self, st: _Fn, x: ir.Value) -> ir.Value:
        """float32 exp inline (vectorisable, see ``mathfns``); float64 through ``llvm.exp``."""
        et = x.type.element if isinstance(x.type, ir.VectorType) else x.type
        if et == F32:
            return mathfns.exp_f32(st.b, x, lambda name, args: self.fcall(st, name, args), fused=self.has_fma)
        return self.fcall(st, "llvm.exp", [x])

    def libm(self, st: _Fn, base: str, x: ir.Value) -> ir.Value:
        """A libm function (``tanhf``/``tanh``), called lane by lane on vectors."""
        b = st.b
        t = x.type
        et = t.element if isinstance(t, ir.VectorType) else t
        name = base + ("f" if et == F32 else "")
        fn = self.declare(name, et, [et])
        if not isinstance(t, ir.VectorType):
            return b.call(fn, [x])
        out = ir.Constant(t, ir.Undefined)
        for k in range(t.count):
            ck = ir.Constant(I32, k)
            out = b.insert_element(out, b.call(fn, [b.extract_element(x, ck)]), ck)
        return out

    def call(self, st: _Fn, name: str, dt: Dtype, args: Sequence[ir.Value]) -> ir.Value:
        b = st.b
        if name == "abs" and dt.is_integer:
            x = args[0]
            if not _is_signed(dt):
                return x
            fn = self.declare(f"llvm.abs.{intrinsic_suffix(x.type)}", x.type, [x.type, I1])
            return b.call(fn, [x, ir.Constant(I1, 0)])  # abs(MIN) wraps to MIN
        if not dt.is_float:
            raise BuildError(f"intrinsic {name} needs a float argument, got {dt}")
        fm = self.fast
        simple = {"exp": "llvm.exp", "exp2": "llvm.exp2", "log": "llvm.log", "log2": "llvm.log2",
                  "sqrt": "llvm.sqrt", "abs": "llvm.fabs", "floor": "llvm.floor", "ceil": "llvm.ceil",
                  "round": "llvm.roundeven", "sin": "llvm.sin", "cos": "llvm.cos", "pow": "llvm.pow"}

        def op(*xs):
            if name == "exp":
                return self.exp(st, xs[0])
            if name in simple:
                return self.fcall(st, simple[name], xs)
            x = xs[0]
            one = splat_const(x.type, 1.0)
            if name == "rsqrt":
                return b.fdiv(one, self.fcall(st, "llvm.sqrt", [x]), flags=fm)
            if name == "sigmoid":
                ex = self.exp(st, b.fneg(x, flags=fm))
                return b.fdiv(one, b.fadd(one, ex, flags=fm), flags=fm)
            if name in ("tanh", "erf"):
                return self.libm(st, name, x)
            if name == "isnan":
                return b.fcmp_unordered("uno", x, x)
            raise BuildError(f"unknown intrinsic {name!r}")
        if name == "isnan":
            return b.fcmp_unordered("uno", args[0], args[0])
        return self.float_compute(st, dt, args, op)

    # -- casts -------------------------------------------------------------------------------
    def cast(self, st: _Fn, src: Dtype, dst: Dtype, v: ir.Value) -> ir.Value:
        b = st.b
        if src == dst:
            return v
        tt = value_type(dst)
        lanes = dst.lanes
        f32t = F32 if lanes == 1 else ir.VectorType(F32, lanes)
        f64t = F64 if lanes == 1 else ir.VectorType(F64, lanes)
        if dst.is_bool:
            if src.is_float:
                return b.fcmp_unordered("!=", self.widen_float(st, src, v), splat_const(self._wide_t(src, lanes), 0.0))
            return b.icmp_unsigned("!=", v, splat_const(v.type, 0))
        if dst.is_integer:
            if src.is_bool:
                return b.zext(v, tt)
            if src.is_integer:
                sb, db = src.bits, dst.bits
                if db < sb:
                    return b.trunc(v, tt)
                if db > sb:
                    return b.sext(v, tt) if _is_signed(src) else b.zext(v, tt)
                return v
            w = self.widen_float(st, src, v)
            base = "llvm.fptosi.sat" if _is_signed(dst) else "llvm.fptoui.sat"
            name = f"{base}.{intrinsic_suffix(tt)}.{intrinsic_suffix(w.type)}"
            return b.call(self.declare(name, tt, [w.type]), [w])
        # float destination
        if src.is_bool or src.is_integer:
            conv = b.uitofp if (src.is_bool or src.is_uint) else b.sitofp
            if dst.kind == "float" and dst.bits in (32, 64):
                return conv(v, tt)
            if dst.kind == "float" and dst.bits == 16 and src.bits <= 16:
                return b.fptrunc(conv(v, f32t), tt)  # exact in float32, one rounding to half
            w = conv(v, f64t)
            if src.bits == 64:
                w = self.int64_to_f64_round_odd(st, src, v, w)
            return self.narrow_float(st, dst, w, f64t)
        w = self.widen_float(st, src, v)            # exact float32 / float64 value of the source
        if dst.kind == "float" and dst.bits == 64:
            return w if w.type == f64t else b.fpext(w, f64t)
        if dst.kind == "float" and dst.bits == 32:
            if w.type != f32t:
                return b.fptrunc(w, f32t)
            # the register already holds the value; a conversion quietens a NaN (as fpext does)
            bits = b.bitcast(w, _int_like(w.type))
            quiet = b.bitcast(b.or_(bits, splat_const(bits.type, 0x400000)), w.type)
            return b.select(b.fcmp_unordered("uno", w, w), quiet, w)
        return self.narrow_float(st, dst, w, f64t)

    def int64_to_f64_round_odd(self, st: _Fn, src: Dtype, v: ir.Value, x: ir.Value) -> ir.Value:
        """Turn ``x``, the nearest-even float64 of the 64-bit integer ``v``, into the float64
        rounded to odd (so a second rounding to a narrow format is exact)."""
        b = st.b
        signed = _is_signed(src)
        base = "llvm.fptosi.sat" if signed else "llvm.fptoui.sat"
        back = b.call(self.declare(f"{base}.{intrinsic_suffix(v.type)}.{intrinsic_suffix(x.type)}", v.type,
                                   [x.type]), [x])
        inexact = b.icmp_unsigned("!=", back, v)
        limit = splat_const(x.type, 2.0 ** 63 if signed else 2.0 ** 64)
        too_big = b.fcmp_ordered(">=", x, limit)        # rounded up past the integer range
        if signed:
            away = b.or_(too_big, b.select(b.icmp_signed("<", v, splat_const(v.type, 0)),
                                           b.icmp_signed("<", back, v), b.icmp_signed(">", back, v)))
        else:
            away = b.or_(too_big, b.icmp_unsigned(">", back, v))
        inexact = b.or_(inexact, too_big)
        it = v.type
        bits = b.bitcast(x, it)
        bits = b.select(away, b.sub(bits, splat_const(it, 1)), bits)
        bits = b.select(inexact, b.or_(bits, splat_const(it, 1)), bits)
        return b.bitcast(bits, x.type)

    @staticmethod
    def _wide_t(src: Dtype, lanes: int) -> ir.Type:
        base = F64 if (src.kind == "float" and src.bits == 64) else F32
        return base if lanes == 1 else ir.VectorType(base, lanes)

    def widen_float(self, st: _Fn, src: Dtype, v: ir.Value) -> ir.Value:
        """The exact float32 (float64 for float64) value of a float register value."""
        if src.kind == "float" and src.bits == 16:
            return st.b.fpext(v, F32 if src.lanes == 1 else ir.VectorType(F32, src.lanes))
        return v

    def narrow_float(self, st: _Fn, dst: Dtype, w: ir.Value, f64t) -> ir.Value:
        """Round an exact float32/float64 value ``w`` once to the narrow float ``dst``."""
        b = st.b
        if w.type == f64t:
            w = lowp.narrow_f64_round_odd(b, w)
        if dst.kind == "float" and dst.bits == 16:
            return b.fptrunc(w, value_type(dst))
        return lowp.round_to(b, w, lowp.format_name(dst))


def _int_like(t: ir.Type) -> ir.Type:
    """The integer (vector) type of the same width as float (vector) type ``t``."""
    if isinstance(t, ir.VectorType):
        return ir.VectorType(_int_like(t.element), t.count)
    return I64 if t == F64 else I32


def streaming_outputs(root: Stmt, buffer_params: Sequence[Param], min_bytes: int) -> frozenset:
    """The ids of the buffer parameters whose contiguous vector stores should be streaming
    (non-temporal) stores: outputs the kernel writes but never reads, of a constant size of
    at least ``min_bytes``, in a kernel whose constant-size arguments add up to at least
    ``2 * min_bytes``. Such an output is too large to be still in cache when anything reads
    it, so writing around the caches saves reading each line before it is written (a third
    of the memory traffic of a copy). Empty when ``min_bytes`` is 0."""
    if min_bytes <= 0:
        return frozenset()
    read = {id(b) for b in stmt_loaded_buffers(root)}
    written = {id(b) for b in stmt_stored_buffers(root)}
    sizes = {}
    for p in buffer_params:
        buf = p.buffer
        if all(isinstance(d, IntImm) for d in buf.dims):
            n = buf.dtype.itemsize * buf.dtype.lanes
            for d in buf.dims:
                n *= d.value
            sizes[id(buf)] = n
    if sum(sizes.values()) < 2 * min_bytes:
        return frozenset()
    return frozenset(b for b, n in sizes.items() if n >= min_bytes and b in written and b not in read)


def _is_i1(t: ir.Type) -> bool:
    return t == I1 or (isinstance(t, ir.VectorType) and t.element == I1)


def _const_extent(s: For) -> int | None:
    ext = s.extent
    if isinstance(ext, IntImm):
        return ext.value
    if isinstance(s.start, IntImm) and isinstance(s.stop, IntImm):
        return s.stop.value - s.start.value
    stop = s.stop
    if isinstance(stop, E.Add) and isinstance(stop.b, IntImm) and E.structural_equal(stop.a, s.start):
        return stop.b.value
    return None


def _ramp_parts(e: Expr):
    """``(base, stride)`` with an int stride when the vector index ``e`` is affine in the lane."""
    if isinstance(e, E.Ramp):
        return (e.base, e.stride.value) if isinstance(e.stride, IntImm) else None
    if isinstance(e, E.Broadcast):
        return (e.value, 0)
    if isinstance(e, (E.Add, E.Sub)):
        pa, pb = _ramp_parts(e.a), _ramp_parts(e.b)
        if pa is None or pb is None:
            return None
        if isinstance(e, E.Add):
            return (E.Add(pa[0], pb[0]), pa[1] + pb[1])
        return (E.Sub(pa[0], pb[0]), pa[1] - pb[1])
    if isinstance(e, E.Mul):
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if isinstance(y, E.Broadcast) and isinstance(y.value, IntImm):
                px = _ramp_parts(x)
                if px is not None:
                    return (E.Mul(px[0], y.value), px[1] * y.value.value)
    return None
