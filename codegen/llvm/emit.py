"""Prepared loop nest -> LLVM IR module (``llvmlite.ir``): the printer of statements and
expressions.

The kernel becomes one external function::

    i32 @te_<outputs>(ptr %A, ptr %B, ..., i32 %N, ...)

taking a pointer per buffer parameter and a value per scalar parameter or size variable
(of any scalar dtype, passed as ``types.arg_type`` says), and returning 0, 1
when a heap allocation failed, or ``entry.ALIASED`` (with ``noalias``: the code is in
``@te_<outputs>_impl`` whose pointer arguments are ``noalias``, behind an overlap check,
see ``entry``). ``@te_<outputs>_py`` takes the numpy array objects instead of data
pointers. Semantics follow the TIR spec and the interpreter:

* integers wrap around; division as ``arith`` says. Division by 0 and ``MIN / -1`` never
  reach the printer: ``loopnest.legalize.guard_int_division`` spelled them out, and
  ``loopnest.legalize.lower_low_precision`` turned float16 / bfloat16 / tf32 / float8
  arithmetic into float32 arithmetic between casts (docs/semantics.md); the divisions done
  unsigned are those ``loopnest.legalize.unsigned_division`` wrote on the unsigned type.
* casts as ``casts`` says (float -> int saturates; NaNs stay quiet NaNs); loads and stores
  copy NaNs bit-exactly. bool is ``i1`` in registers, ``i8`` in memory.
* float ``Min``/``Max`` are ``llvm.minimum``/``llvm.maximum`` (IEEE 754-2019: NaN propagates,
  ``-0.0 < +0.0``), the IR's meaning exactly.
* a buffer of vector elements (``float32x4``) is stored as consecutive scalars: ``A[i]`` is a
  ``<4 x float>`` load from scalar ``4 * i``; a Ramp index of ``k`` lanes reads ``4 * k``.
* intrinsics are LLVM intrinsics (``llvm.sqrt``, ``llvm.floor``, ``llvm.roundeven``...), libm
  (``tanhf``, ``erff``), or inline arithmetic: float32 ``exp`` (and ``sigmoid``) use
  ``mathfns.exp_f32`` (within 1 ulp), which vectorises; ``rsqrt`` is ``1 / sqrt``.
* allocations are not initialised (the spec leaves them undefined; IREval zeroes them).
* ``Select``, ``And`` and ``Or`` evaluate both sides; ``IfThenElse`` only what is needed
  (branches and phis), so it can guard out-of-bounds loads: ``loopnest.legalize.short_circuit``
  made a scalar ``And``/``Or`` that must not always read its right side an ``IfThenElse``.
  Every handler emits the whole value of its node: ``loopnest.legalize_vectors`` turned an
  ``IfThenElse`` that loads nothing into a ``Select``, and one with a vector condition into a
  ``MakeVector`` of per-lane scalar ones.
* Index expressions of loads and stores are evaluated in 64 bits (32- and 64-bit
  ``+ - *`` without wraparound: an index that would overflow its own dtype is out of bounds
  either way; 8/16-bit index arithmetic wraps as the spec says).

Loops: serial loops are counted loops on an i64 induction variable; ``unrolled`` loops with
a constant extent of at most ``UNROLL_LIMIT`` are copied, others get
``llvm.loop.unroll.count``; loops still ``vectorized`` after preparation get
``llvm.loop.vectorize.enable`` where their body is one basic block of scalar code (LLVM does
not if-convert others, ``jit.LLVM_OPTIONS``, nor vectorize vector code); other serial loops
carry the unrolling hint of ``loop_hints`` (left to LLVM, unrolled twice, or not unrolled: LLVM's own unrolling of
outer loops costs compile time and gains nothing); ``parallel`` loops are outlined and run
through a parallel runtime (``parallel``); a parallel loop inside a parallel body runs serially.
Allocations of a constant size up to ``STACK_LIMIT`` bytes are ``alloca``s in the entry
block of the function (per thread inside a parallel body), others ``aligned_alloc``/``free``
(once per chunk of a parallel loop's iterations where it allocates at the top of its body a
buffer whose size does not change with them, ``parallel.chunk_allocations``); both start on a
multiple of ``buffer_alignment()`` bytes (``malloc`` aligns to 16, which can put every
native-vector load of a packed matmul panel across two cache lines: matmul 1024 on AVX-512 ran
at 0.91 of PyTorch with ``malloc``, 0.98-0.99 aligned, in fresh processes).
Loads and stores (contiguous vectors, gathers and scatters, vector elements, index checks)
are printed by ``memory``. Contiguous vector stores to large outputs that are never read are
streaming stores (``streaming``; the threshold is ``EmitOptions.nontemporal_min_bytes``).

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

import dataclasses
from dataclasses import dataclass
from typing import Sequence

from llvmlite import ir

from te import expr as E
from te.bitops import BIT_CALLS
from te.dtypes import Dtype, float32
from te.expr import Expr, IntImm, Var
from te.functor import Functor
from loopnest.legalize import needs_short_circuit
from loopnest.legalize_vectors import is_masked_load
from loopnest.stmt import Allocate, Block, Cond, For, ForKind, Free, Let, Stmt, Store
from loopnest.target import host_target
from loopnest.transforms.loop_kinds import MAX_LATE_UNROLL

from ..kernel import BuildError, Param, sanitize_name
from . import arith, bits
from .casts import cast, widen_float
from .decls import declare, loop_md
from .extern import emit_extern_call
from .entry import bind_scalar_args, emit_alias_check, emit_py_wrapper
from .fnstate import FnState
from .loop_hints import unroll_hint
from .memory import check_index, index_sites, load, masked_load, prefetch, splat, store
from .parallel import RUNTIMES, parallel_loop
from .streaming import store_fence, streaming_outputs
from .types import I1, I32, I64, PTR, arg_type, const, scalar_storage_type, splat_const, value_type

__all__ = ["EmitOptions", "emit_module", "UNROLL_LIMIT", "STACK_LIMIT"]
UNROLL_LIMIT = MAX_LATE_UNROLL   # unrolled loops up to this constant extent are copied in the IR
UNROLL_COUNT = 8           # llvm.loop.unroll.count for longer / symbolic unrolled loops
STACK_LIMIT = 64 * 1024    # bytes: larger (or symbolic) allocations are on the heap
STACK_BUDGET = 256 * 1024  # bytes of allocas per function before falling back to the heap
CACHE_LINE = 64            # bytes: the cache line of x86-64 and of most AArch64 cores


def buffer_alignment() -> int:
    """The alignment in bytes of every intermediate buffer: a cache line, or the host's
    native vector where that is wider, so that no native-vector load of a buffer aligned to
    its start crosses a cache line.

    >>> buffer_alignment() >= 64
    True
    """
    return max(CACHE_LINE, host_target().vector_bits // 8)


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
    #: and all the arguments together at least twice as many (0: never); see ``streaming``
    nontemporal_min_bytes: int = 0
    #: the target CPU's LLVM feature string (``+avx2,+fma,...``): inline math uses FMA when present
    cpu_features: str = ""


def emit_module(symbol: str, root: Stmt, buffer_params: Sequence[Param], scalar_vars: Sequence[Var],
                options: EmitOptions) -> ir.Module:
    """The LLVM module of a prepared statement; the kernel function is ``@symbol``.

    ``buffer_params`` become pointer arguments, ``scalar_vars`` value arguments, in order.
    """
    return _Emitter(symbol, buffer_params, scalar_vars, options).run(root)


class _Emitter(Functor):
    """Statements and expressions -> instructions of the function of a ``FnState``:
    ``visit(s, st)`` emits statement ``s``; ``expr(st, e)`` returns the value of ``e``."""

    def __init__(self, symbol: str, buffer_params: Sequence[Param], scalar_vars: Sequence[Var],
                 options: EmitOptions):
        if options.parallel_runtime not in RUNTIMES:
            raise BuildError(f"unknown parallel runtime {options.parallel_runtime!r}; expected one of {RUNTIMES}")
        self.symbol = symbol
        self.opts = options
        self.mode = arith.FloatMode.of(options)
        self.exact_mode = dataclasses.replace(self.mode, contract=())
        self.module = ir.Module(name=symbol)
        self.module.triple = options.triple
        self.module.data_layout = options.data_layout
        self.buffer_params = list(buffer_params)
        self.argument_ids = frozenset(id(p.buffer) for p in self.buffer_params)
        self.scalar_vars = list(scalar_vars)
        self.n_outlined = 0                     # parallel loop bodies outlined so far
        self.n_extern = 0                       # external calls emitted so far
        self.nt_bufs: frozenset = frozenset()   # streaming-store outputs (set by run)
        self._index = _Index(self)

    def run(self, root: Stmt) -> ir.Module:
        self.nt_bufs = streaming_outputs(root, self.buffer_params, self.opts.nontemporal_min_bytes)
        self.index_sites = {site: k for k, site in enumerate(index_sites(root))}
        args = [PTR] * len(self.buffer_params) + [arg_type(v.dtype) for v in self.scalar_vars]
        noalias = self.opts.noalias
        name = self.symbol + "_impl" if noalias else self.symbol
        fn = ir.Function(self.module, ir.FunctionType(I32, args), name=name)
        fn.attributes.add("nounwind")
        if noalias:
            fn.linkage = "internal"
        st = FnState(fn, in_parallel=False)
        for p, a in zip(self.buffer_params, fn.args):
            a.name = sanitize_name(p.name)
            if noalias:
                a.add_attribute("noalias")
            st.bufs[id(p.buffer)] = a
        for v, a in zip(self.scalar_vars, fn.args[len(self.buffer_params):]):
            a.name = sanitize_name(v.name)
        bind_scalar_args(st, self.scalar_vars, fn.args[len(self.buffer_params):])
        self.visit(root, st)
        if not st.b.block.is_terminated:
            st.free_all()   # defensive: what an unmatched Allocate left
            self.store_fence(st)
            st.b.ret(ir.Constant(I32, 0))
        st.finish()
        entry = emit_alias_check(self, fn, root) if noalias else fn
        if self.opts.array_data_offset is not None:
            emit_py_wrapper(entry, len(self.buffer_params), self.opts.array_data_offset)
        return self.module

    def store_fence(self, st: FnState) -> None:
        """End ``st``'s streaming stores (see ``streaming.store_fence``), if the kernel has any."""
        if self.nt_bufs:
            store_fence(st.b, self.opts.triple)

    def generic(self, node, st: FnState):
        if isinstance(node, Expr):
            raise BuildError(f"the LLVM backend cannot compile the expression {type(node).__name__} (`{node}`)")
        raise BuildError(f"the LLVM backend cannot compile the statement {type(node).__name__}")

    # ------------------------------------------------------------------------------------
    # statements: visit_<Class>(s, st)
    # ------------------------------------------------------------------------------------
    def visit_Block(self, s: Block, st: FnState):
        for x in s.stmts:
            self.visit(x, st)

    def visit_LetStmt(self, s: Let, st: FnState):
        v = self.expr(st, s.value)
        old = st.vars.get(id(s.var))
        st.vars[id(s.var)] = v
        self.visit(s.body, st)
        if old is None:
            st.vars.pop(id(s.var), None)
        else:
            st.vars[id(s.var)] = old

    def visit_Cond(self, s: Cond, st: FnState):
        b = st.b
        c = self.expr(st, s.cond)
        then_bb = st.fn.append_basic_block("then")
        merge_bb = st.fn.append_basic_block("endif")
        else_bb = st.fn.append_basic_block("else") if s.otherwise is not None and s.otherwise.stmts else merge_bb
        b.cbranch(c, then_bb, else_bb)
        b.position_at_end(then_bb)
        self.visit(s.then, st)
        if not b.block.is_terminated:
            b.branch(merge_bb)
        if else_bb is not merge_bb:
            b.position_at_end(else_bb)
            self.visit(s.otherwise, st)
            if not b.block.is_terminated:
                b.branch(merge_bb)
        b.position_at_end(merge_bb)

    def visit_Store(self, s: Store, st: FnState):
        if len(s.indices) != 1:
            raise BuildError(f"store to {s.buffer.name} has {len(s.indices)} indices; the LLVM backend needs a "
                             "prepared nest (one flat index per access): call nest.prepare_for_codegen()")
        value = self.expr(st, s.value)
        store(self, st, s.buffer, s.indices[0], value, s.value.dtype)

    def visit_Prefetch(self, s, st: FnState):
        prefetch(self, st, s.buffer, s.indices[0], s.write)

    def visit_ExternCall(self, s, st: FnState):
        emit_extern_call(self, st, s, self.n_extern)
        self.n_extern += 1

    def visit_Allocate(self, s: Allocate, st: FnState):
        buf = s.buffer
        elem = scalar_storage_type(buf.dtype)      # vector elements are stored as consecutive scalars
        itemsize = buf.dtype.itemsize * buf.dtype.lanes
        n = buf.static_size()
        name = sanitize_name(buf.name)
        if n is not None and n * itemsize <= STACK_LIMIT and st.stack_bytes + n * itemsize <= STACK_BUDGET:
            p = st.alloca(ir.ArrayType(elem, max(n * buf.dtype.lanes, 1)), name=name, align=buffer_alignment())
            st.stack_bytes += n * itemsize
            st.bufs[id(buf)] = p
            return
        b = st.b
        count = ir.Constant(I64, 1)
        for d in buf.dims:
            count = b.mul(count, self.index(st, d))
        nbytes = b.mul(count, ir.Constant(I64, itemsize))
        nbytes = b.select(b.icmp_signed("<", nbytes, ir.Constant(I64, 1)), ir.Constant(I64, 1), nbytes)
        align = buffer_alignment()
        nbytes = b.and_(b.add(nbytes, ir.Constant(I64, align - 1)), ir.Constant(I64, -align))  # a multiple, as C11 asks
        p = b.call(declare(self.module, "aligned_alloc", PTR, [I64, I64]), [ir.Constant(I64, align), nbytes], name=name)
        ok = st.fn.append_basic_block(f"{name}_allocated")
        b.cbranch(b.icmp_unsigned("==", p, ir.Constant(PTR, None)), st.fail_block(), ok)
        b.position_at_end(ok)
        st.heap[id(buf)] = p
        st.bufs[id(buf)] = p

    def visit_Free(self, s: Free, st: FnState):
        if id(s.buffer) in st.heap:
            st.free(id(s.buffer))

    def visit_For(self, s: For, st: FnState):
        kind = s.kind
        if kind in (ForKind.GPU_BLOCK, ForKind.GPU_THREAD):
            raise BuildError(f"loop {s.var.name} is bound to a GPU {kind} index; the llvm target runs on the CPU "
                             "(build it with target='cuda', or leave the loop serial)")
        if kind == ForKind.UNROLLED:
            ext = _const_extent(s)
            if ext is not None and ext <= UNROLL_LIMIT:
                self.unrolled(st, s, ext)
                return
            self.serial_loop(st, s, loop_md(self.module, ("llvm.loop.unroll.count", ir.Constant(I32, UNROLL_COUNT))))
            return
        if kind == ForKind.VECTORIZED:
            # LLVM warns on stderr about a loop that asks for vectorization and is more than one
            # block, or already computes on vectors (a vectorized loop inside: seed 103, case 26)
            self.serial_loop(st, s, lambda block: loop_md(self.module, ("llvm.loop.vectorize.enable",
                                                                          ir.Constant(I1, 1)))
                             if block is not None and not _vector_valued(block)
                             else unroll_hint(self.module, s, self.argument_ids))
            return
        if kind == ForKind.PARALLEL and not st.in_parallel and self.opts.parallel_runtime != "serial":
            parallel_loop(self, st, s)
            return
        self.serial_loop(st, s, unroll_hint(self.module, s, self.argument_ids))

    def serial_loop(self, st: FnState, s: For, md):
        lo, hi = self.index(st, s.start), self.index(st, s.stop)

        def body(iv):
            st.bind_loop_var(s.var, iv)
            self.visit(s.body, st)
            st.unbind_loop_var(s.var)
        st.counted_loop(lo, hi, sanitize_name(s.var.name), body, md)

    def unrolled(self, st: FnState, s: For, extent: int):
        start = s.start.value if isinstance(s.start, IntImm) else None
        if start is None:
            lo = self.index(st, s.start)
        for k in range(extent):
            if start is not None:
                st.ivs[id(s.var)] = ir.Constant(I64, start + k)
                st.vars[id(s.var)] = const(start + k, s.var.dtype)
            else:
                st.bind_loop_var(s.var, st.b.add(lo, ir.Constant(I64, k), flags=("nsw",)))
            self.visit(s.body, st)
        st.unbind_loop_var(s.var)

    # ------------------------------------------------------------------------------------
    # memory: loads and stores are printed by ``memory``, indices by ``_Index``
    # ------------------------------------------------------------------------------------
    def index(self, st: FnState, e: Expr) -> ir.Value:
        """``e`` as an i64 (or ``<n x i64>``) for addressing and loop bounds (see ``_Index``)."""
        return self._index.visit(e, st)

    # ------------------------------------------------------------------------------------
    # expressions: visit_<Class>(e, st) returns the whole value of e (scalar or vector)
    # ------------------------------------------------------------------------------------
    def expr(self, st: FnState, e: Expr) -> ir.Value:
        """The register value of ``e``."""
        return self.visit(e, st)

    def visit_Var(self, e: Var, st: FnState):
        v = st.vars.get(id(e))
        if v is None:
            raise BuildError(f"variable {e.name} is used but not bound (not a loop variable, a let, or a size "
                             "parameter of the kernel)")
        return v

    def visit_IntImm(self, e: IntImm, st: FnState):
        return const(e.value, e.dtype)

    def visit_FloatImm(self, e: E.FloatImm, st: FnState):
        return const(e.value, e.dtype)

    def visit_Broadcast(self, e: E.Broadcast, st: FnState):
        return splat(st.b, self.expr(st, e.value), e.lanes)

    def visit_Ramp(self, e: E.Ramp, st: FnState):
        dt = e.base.dtype
        base, stride = self.expr(st, e.base), self.expr(st, e.stride)
        steps = ir.Constant(value_type(e.dtype), [const(k, dt) for k in range(e.lanes)])
        return st.b.add(splat(st.b, base, e.lanes), st.b.mul(splat(st.b, stride, e.lanes), steps))

    def visit_Load(self, e: E.Load, st: FnState):
        return load(self, st, e)

    def visit_IndexCheck(self, e: E.IndexCheck, st: FnState):
        return check_index(self, st, e)

    def visit_MakeVector(self, e: E.MakeVector, st: FnState):
        out = ir.Constant(value_type(e.dtype), ir.Undefined)
        for k, x in enumerate(e.values):
            out = st.b.insert_element(out, self.expr(st, x), ir.Constant(I32, k))
        return out

    def visit_ExtractLane(self, e: E.ExtractLane, st: FnState):
        return st.b.extract_element(self.expr(st, e.value), ir.Constant(I32, e.lane))

    def visit_Let(self, e: E.Let, st: FnState):
        v = self.expr(st, e.value)
        old = st.vars.get(id(e.var))
        st.vars[id(e.var)] = v
        out = self.expr(st, e.body)
        if old is None:
            st.vars.pop(id(e.var), None)
        else:
            st.vars[id(e.var)] = old
        return out

    def visit_Cast(self, e: E.Cast, st: FnState):
        src = e.value.dtype
        x = e.value
        if type(x) in (E.Add, E.Sub, E.Mul) and _narrows(x.dtype, e.dtype):
            # rounded to a narrower format at once: not contracted (LLVM would narrow the multiply
            # and fuse it into the add that uses the rounded value, skipping this rounding)
            v = arith.binop(st.b, self.exact_mode, type(x), src, self.operand(st, x.a), self.operand(st, x.b))
        else:
            v = self.expr(st, x)
        return cast(st.b, src, e.dtype, v)

    def visit_Not(self, e: E.Not, st: FnState):
        v = self.expr(st, e.a)
        return st.b.xor(v, splat_const(v.type, 1))

    def visit_Select(self, e: E.Select, st: FnState):
        return st.b.select(self.expr(st, e.cond), self.expr(st, e.t), self.expr(st, e.f))

    def visit_IfThenElse(self, e: E.IfThenElse, st: FnState):
        if e.cond.dtype.lanes > 1:
            if is_masked_load(e):
                return masked_load(self, st, e)
            raise BuildError(f"if_then_else with the vector condition `{e.cond}` reached the LLVM printer; run "
                             "loopnest.passes.legalize_for_target(nest, 'llvm') first (it computes it lane by lane)")
        return self.branch_value(st, self.expr(st, e.cond), lambda: self.expr(st, e.t),
                                 lambda: self.expr(st, e.f), "ite")

    def branch_value(self, st: FnState, c, then_fn, else_fn, name: str) -> ir.Value:
        """``c ? then_fn() : else_fn()`` through branches and a phi (only one side runs)."""
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

    def visit_And(self, e: E.And, st: FnState):
        return self._logical(e, st, is_and=True)

    def visit_Or(self, e: E.Or, st: FnState):
        return self._logical(e, st, is_and=False)

    def _logical(self, e, st: FnState, is_and: bool):
        """Both sides are computed: a scalar right side that loads what the left side did not was
        made an ``if_then_else`` by the ``short_circuit`` pass (``loopnest.legalize``)."""
        if needs_short_circuit(e):
            raise BuildError(f"the scalar `{e}` loads on its right side and reached the LLVM printer: run "
                             "loopnest.passes.legalize_for_target(nest, 'llvm') first (its short_circuit pass "
                             "evaluates the right side only when needed)")
        b = st.b
        a, y = self.expr(st, e.a), self.expr(st, e.b)
        return b.and_(a, y) if is_and else b.or_(a, y)

    def _binary(self, e, st: FnState, operand=None):
        operand = operand or self.expr
        return arith.binop(st.b, self.mode, type(e), e.a.dtype, operand(st, e.a), operand(st, e.b))

    def _arith(self, e, st: FnState):
        return self._binary(e, st, self.operand)

    visit_Add = visit_Sub = visit_Mul = visit_Div = visit_Mod = visit_FloorDiv = visit_FloorMod = _arith
    visit_Min = visit_Max = visit_EQ = visit_NE = visit_LT = visit_LE = visit_GT = visit_GE = _binary

    def operand(self, st: FnState, e: Expr) -> ir.Value:
        """The value of an operand of arithmetic or of a math intrinsic. A float32 cast of a
        low-precision value (``lower_low_precision`` puts one around every such operand) is only
        widened: the NaN quieting that the cast means is done by the operation itself, which
        quietens a NaN operand (so the code is that of computing on the value directly)."""
        if type(e) is E.Cast and e.value.dtype.is_lowp_float and e.dtype.element == float32:
            return widen_float(st.b, e.value.dtype, self.expr(st, e.value))
        return self.expr(st, e)

    def visit_Call(self, e: E.Call, st: FnState):
        operand = self.expr if e.name in ("abs", "isnan") else self.operand   # fabs keeps a signalling NaN
        args = [operand(st, a) for a in e.args]
        adt = e.args[0].dtype
        if e.name == "bitcast":
            return bits.bitcast(st.b, adt, e.dtype, args[0])
        if e.name in BIT_CALLS:
            return bits.bitop(st.b, e.name, adt, args)
        return arith.call(st.b, self.mode, e.name, adt, args)


class _Index(Functor):
    """``visit(e, st)``: the index expression ``e`` as an i64 (``<n x i64>``) value of the
    emitter ``em``. 32- and 64-bit ``+ - *`` are done in 64 bits (``nsw``), ramps and
    broadcasts built from 64-bit parts; anything else is the value of ``e`` (``em.expr``),
    sign- or zero-extended.

    An index operation already computed in the current basic block from the same operands
    is that value again (local value numbering): the accesses of one statement repeat the
    row offsets of their indices (a third of the IR of the hand conv2d).

    >>> from te import Buffer, float32
    >>> A, i = Buffer("A", (64,), float32), Var("i")
    >>> row = i * 8
    >>> store = Store(A, (row + 1,), A[row] + A[row + 2])     # a flat (prepared) statement
    >>> str(emit_module("k", store, [Param("A", A)], [i], EmitOptions())).count("mul nsw i64")
    1
    """

    def __init__(self, em: _Emitter):
        self.em = em
        self._numbered: dict = {}     # (block id, operation, operand keys) -> value

    def _numbered_op(self, st: FnState, op: str, build, *operands) -> ir.Value:
        key = (id(st.b.block), op) + tuple(_operand_key(x) for x in operands)
        hit = self._numbered.get(key)
        if hit is None:
            hit = self._numbered[key] = build(*operands)
        return hit

    def visit_IntImm(self, e: IntImm, st: FnState):
        return ir.Constant(I64, e.value)

    def visit_Var(self, e: Var, st: FnState):
        iv = st.ivs.get(id(e))
        if iv is not None and e.dtype.lanes == 1:
            return iv
        return self.generic(e, st)

    def visit_Cast(self, e: E.Cast, st: FnState):
        # a loop variable widened (the flat offsets of buffers with symbolic sizes are int64):
        # its i64 induction variable holds the value already, as the loop's int32 (uint32)
        # bounds keep it in the variable's range; extending the truncated value instead hid
        # the induction variable from LLVM (a sign extension in every iteration of the
        # symbolic matmul's k loop)
        v = e.value
        iv = st.ivs.get(id(v)) if isinstance(v, Var) and v.dtype.lanes == 1 else None
        if iv is not None and e.dtype.is_integer and v.dtype.is_integer and e.dtype.bits >= v.dtype.bits \
                and (e.dtype.is_int == v.dtype.is_int or e.dtype.bits > v.dtype.bits and v.dtype.is_uint):
            return iv
        return self.generic(e, st)

    def _arith(self, e, st: FnState):
        if not (e.dtype.is_integer and e.dtype.bits >= 32):
            # 8/16-bit arithmetic keeps its wraparound (a table lookup T[x + 10] on uint8 x may rely
            # on it); 32/64-bit index arithmetic that overflows would be out of bounds anyway
            return self.generic(e, st)
        x, y = self.em.index(st, e.a), self.em.index(st, e.b)
        folded = _fold_index_arith(type(e), x, y)
        if folded is not None:
            return folded
        op = {E.Add: st.b.add, E.Sub: st.b.sub, E.Mul: st.b.mul}[type(e)]
        return self._numbered_op(st, type(e).__name__, lambda a, b: op(a, b, flags=("nsw",)), x, y)

    visit_Add = visit_Sub = visit_Mul = _arith

    def visit_Ramp(self, e: E.Ramp, st: FnState):
        b = st.b

        def ramp(base, stride):
            steps = ir.Constant(ir.VectorType(I64, e.lanes), [ir.Constant(I64, k) for k in range(e.lanes)])
            return b.add(splat(b, base, e.lanes), b.mul(splat(b, stride, e.lanes), steps, flags=("nsw",)),
                         flags=("nsw",))
        return self._numbered_op(st, f"ramp{e.lanes}", ramp, self.em.index(st, e.base), self.em.index(st, e.stride))

    def visit_Broadcast(self, e: E.Broadcast, st: FnState):
        return self._numbered_op(st, f"splat{e.lanes}", lambda v: splat(st.b, v, e.lanes), self.em.index(st, e.value))

    def generic(self, e: Expr, st: FnState):
        t64 = I64 if e.dtype.lanes == 1 else ir.VectorType(I64, e.dtype.lanes)
        v = self.em.expr(st, e)
        if v.type == t64:
            return v
        if not (e.dtype.is_integer or e.dtype.is_bool):
            raise BuildError(f"index `{e}` has dtype {e.dtype}; indices must be integers")
        extend = st.b.sext if e.dtype.is_int else st.b.zext
        return self._numbered_op(st, extend.__name__, lambda x: extend(x, t64), v)


def _fold_index_arith(kind, x: ir.Value, y: ir.Value) -> ir.Value | None:
    """``x kind y`` (``E.Add``, ``E.Sub`` or ``E.Mul`` of 64-bit indices) where it needs no
    instruction: both operands constant (an unrolled loop's copies index with its constant
    variable), or an identity (``+ 0``, ``- 0``, ``* 1``); else None.

    >>> c = lambda v: ir.Constant(I64, v)
    >>> _fold_index_arith(E.Mul, c(3), c(64)).constant, _fold_index_arith(E.Sub, c(3), c(64)).constant
    (192, -61)
    >>> _fold_index_arith(E.Add, c(1), ir.Argument(ir.Function(ir.Module(), ir.FunctionType(I64, [I64]), "f"), I64))
    """
    xc = x.constant if isinstance(x, ir.Constant) and x.type == I64 else None
    yc = y.constant if isinstance(y, ir.Constant) and y.type == I64 else None
    if isinstance(xc, int) and isinstance(yc, int):
        value = xc + yc if kind is E.Add else xc - yc if kind is E.Sub else xc * yc
        return ir.Constant(I64, value) if -2 ** 63 <= value < 2 ** 63 else None
    if yc == 0 and kind in (E.Add, E.Sub) or yc == 1 and kind is E.Mul:
        return x
    if xc == 0 and kind is E.Add or xc == 1 and kind is E.Mul:
        return y
    return None


def _operand_key(v: ir.Value):
    """A key equal for the same LLVM value: constants by type and value, others by identity
    (the emitter keeps them alive in the module)."""
    if isinstance(v, ir.Constant):
        return ("const", str(v.type), str(v.constant))
    return id(v)


def _narrows(src: Dtype, dst: Dtype) -> bool:
    """A float -> float cast that rounds: to a low-precision format, or float64 -> float32."""
    return src.is_float and dst.is_float and (dst.is_lowp_float or dst.bits < src.bits)


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


def _vector_valued(block: ir.Block) -> bool:
    """Whether an instruction of ``block`` has a vector type: LLVM's loop vectorizer takes
    scalar code only ("instruction return type cannot be vectorized").

    >>> fn = ir.Function(ir.Module(), ir.FunctionType(ir.VoidType(), [ir.VectorType(I32, 4)]), "f")
    >>> block = fn.append_basic_block(); b = ir.IRBuilder(block)
    >>> _ = b.add(fn.args[0], fn.args[0]); _vector_valued(block)
    True
    """
    return any(isinstance(i.type, ir.VectorType) for i in block.instructions)
