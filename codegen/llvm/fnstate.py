"""One LLVM function being emitted: its builders, the IR values bound to variables and
buffers, the heap buffers still to free, and the block that reports an allocation failure.

Allocas go to the entry block (``alloca``), code to the blocks after it (``b``); ``finish``
links the two once the function is complete.

>>> from llvmlite import ir
>>> from codegen.llvm.types import I32, I64
>>> m = ir.Module()
>>> st = FnState(ir.Function(m, ir.FunctionType(I32, [I64]), "f"), in_parallel=False)
>>> st.counted_loop(ir.Constant(I64, 0), st.fn.args[0], "i", lambda iv: None, None)
>>> _ = st.b.ret(ir.Constant(I32, 0)); st.finish()
>>> ir_text = str(m)
>>> '%"i" = phi  i64 [0, %"start"], [%"i_next", %"i_loop"]' in ir_text
True
>>> '%"i_next" = add nsw i64 %"i", 1' in ir_text
True
"""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

from te.expr import Var

from ..kernel import sanitize_name
from .decls import declare
from .types import I32, I64, PTR, VOID, value_type

__all__ = ["FnState"]


class FnState:
    """Builders and bindings of the function ``fn``; ``in_parallel``: ``fn`` is (part of) an
    outlined parallel loop body, which reports failures through ``status_ptr``."""

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
        self.heap: dict[int, ir.Value] = {}     # heap buffers (aligned_alloc) still live
        self.stack_bytes = 0
        self.status_ptr = status_ptr
        self._fail: dict[int, ir.Block] = {}

    def fail_block(self, code: int = 1) -> ir.Block:
        """A block that reports failure ``code`` (1: an allocation failed; see
        ``memory.INDEX_OUT_OF_RANGE`` and up) and returns."""
        block = self._fail.get(code)
        if block is None:
            block = self._fail[code] = self.fn.append_basic_block("alloc_failed" if code == 1 else f"failed_{code}")
            self._report(ir.IRBuilder(block), ir.Constant(I32, code))
        return block

    def forward_block(self, code: ir.Value) -> ir.Block:
        """A block that reports the failure code ``code`` (an i32 value, e.g. the status an
        outlined parallel body left) and returns."""
        block = self.fn.append_basic_block("forward_failure")
        self._report(ir.IRBuilder(block), code)
        return block

    def _report(self, fb: ir.IRBuilder, code: ir.Value) -> None:
        if self.status_ptr is not None:
            fb.store(code, self.status_ptr)
        if isinstance(self.fn.function_type.return_type, ir.VoidType):
            fb.ret_void()
        else:
            fb.ret(code)

    def alloca(self, t: ir.Type, name: str = "", align: int | None = None) -> ir.Value:
        """An alloca in the entry block, typed as an opaque ``ptr`` (LLVM has no typed pointers)."""
        p = self.alloca_b.alloca(t, name=name)
        p.type = PTR
        if align is not None:
            p.align = align
        return p

    def free(self, buffer_id: int) -> None:
        """``free`` the heap buffer ``buffer_id`` (an ``id`` of a buffer in ``heap``)."""
        p = self.heap.pop(buffer_id)
        self.b.call(declare(self.fn.module, "free", VOID, [PTR]), [p])

    def free_all(self) -> None:
        """``free`` every heap buffer still live (one an unmatched ``Allocate`` left)."""
        for bid in list(self.heap):
            self.free(bid)

    def bind_loop_var(self, var: Var, iv: ir.Value) -> None:
        """Bind ``var`` to the i64 induction variable ``iv`` (truncated to its dtype for values)."""
        self.ivs[id(var)] = iv
        t = value_type(var.dtype)
        self.vars[id(var)] = iv if t == I64 else self.b.trunc(iv, t, name=f"{sanitize_name(var.name)}.{t}")

    def unbind_loop_var(self, var: Var) -> None:
        self.ivs.pop(id(var), None)
        self.vars.pop(id(var), None)

    def counted_loop(self, lo: ir.Value, hi: ir.Value, name: str, body: Callable[[ir.Value], None],
                     md: "ir.MDValue | Callable[[bool], ir.MDValue | None] | None") -> None:
        """``for (i64 iv = lo; iv < hi; ++iv) body(iv)``, with ``md`` as its ``!llvm.loop``
        (a callable ``md`` is called with the body's basic block, None when the body is
        several blocks, and gives it)."""
        b = self.b
        pre = b.block
        body_bb = self.fn.append_basic_block(f"{name}_loop")
        exit_bb = self.fn.append_basic_block(f"{name}_exit")
        b.cbranch(b.icmp_signed("<", lo, hi), body_bb, exit_bb)
        b.position_at_end(body_bb)
        iv = b.phi(I64, name=name)
        iv.add_incoming(lo, pre)
        body(iv)
        nxt = b.add(iv, ir.Constant(I64, 1), name=f"{name}_next", flags=("nsw",))  # iv < hi: no overflow
        iv.add_incoming(nxt, b.block)
        br = b.cbranch(b.icmp_signed("<", nxt, hi), body_bb, exit_bb)
        if callable(md):
            md = md(body_bb if b.block is body_bb else None)
        if md is not None:
            br.set_metadata("llvm.loop", md)
        b.position_at_end(exit_bb)

    def finish(self) -> None:
        """Branch from the entry block (its allocas) to the code."""
        self.alloca_b.position_at_end(self.entry)
        self.alloca_b.branch(self.start_block)
