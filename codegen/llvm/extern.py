"""External calls (``loopnest.stmt.ExternCall``) in LLVM code: the call of a C function with
the ABI of ``te.extern.EXTERN_C_ABI``::

    int32_t f(int32_t nbufs, void **data, const int32_t *ndims, const int64_t *shapes,
              const int64_t *strides);

The argument arrays live in the kernel's stack frame; the buffers are passed in call order
(the inputs, then the outputs), with row-major element strides. The function's address is a
constant of the code (the compile cache keys on it). A non-zero result frees the kernel's
heap buffers and returns ``EXTERN_FAILED + k`` for the k-th external call of the kernel,
which the kernel object turns into a RuntimeError naming the function.

>>> EXTERN_FAILED > 2
True
"""
from __future__ import annotations

from llvmlite import ir

from ..kernel import BuildError
from .decls import declare
from .types import I32, I64, PTR

__all__ = ["EXTERN_FAILED", "emit_extern_call"]

#: kernel return code of a failed external call (plus the index of the call in the kernel)
EXTERN_FAILED = 16

_ABI = ir.FunctionType(I32, [I32, PTR, PTR, PTR, PTR])


def emit_extern_call(em, st, s, k: int) -> None:
    """Emit the call of the external function of ``s`` (the ``k``-th of the kernel) into ``st``."""
    addr = s.func.address
    if addr is None:
        raise BuildError(f"the external call {s.func.name} has only a Python function (py_fn); the LLVM backend "
                         "calls a C function: pass c_fn= (a ctypes function or CFUNCTYPE callback) or "
                         "library= and symbol= to Extern")
    if st.in_parallel:
        raise BuildError(f"the external call {s.func.name} is inside a parallel loop; it must stand at the top level")
    b = st.b
    bufs = s.buffers
    total = sum(x.ndim for x in bufs)
    name = s.func.name
    data = st.alloca(ir.ArrayType(PTR, len(bufs)), name=f"{name}_data")
    ndims = st.alloca(ir.ArrayType(I32, len(bufs)), name=f"{name}_ndims")
    shapes = st.alloca(ir.ArrayType(I64, max(total, 1)), name=f"{name}_shapes")
    strides = st.alloca(ir.ArrayType(I64, max(total, 1)), name=f"{name}_strides")

    def slot(array, k: int):
        return b.gep(array, [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True,
                     source_etype=array.allocated_type)

    pos = 0
    for n, buf in enumerate(bufs):
        p = st.bufs.get(id(buf))
        if p is None:
            raise BuildError(f"the external call {name} passes {buf.name}, which has no storage here")
        b.store(p, slot(data, n))
        b.store(ir.Constant(I32, buf.ndim), slot(ndims, n))
        dims = [em.index(st, d) for d in buf.dims]
        stride = ir.Constant(I64, 1)
        for d in reversed(range(buf.ndim)):
            b.store(dims[d], slot(shapes, pos + d))
            b.store(stride, slot(strides, pos + d))
            stride = b.mul(stride, dims[d])
        pos += buf.ndim
    # a typed function pointer, which LLVM's parser reads as ``ptr``: llvmlite takes the callee's type from it
    fptr = b.inttoptr(ir.Constant(I64, addr), _ABI.as_pointer(), name=f"{name}_fn")
    rc = b.call(fptr, [ir.Constant(I32, len(bufs)), data, ndims, shapes, strides], name=f"{name}_rc")
    failed = st.fn.append_basic_block(f"{name}_failed")
    ok = st.fn.append_basic_block(f"{name}_done")
    b.cbranch(b.icmp_signed("!=", rc, ir.Constant(I32, 0)), failed, ok)
    b.position_at_end(failed)
    for p in st.heap.values():
        b.call(declare(st.fn.module, "free", ir.VoidType(), [PTR]), [p])
    b.ret(ir.Constant(I32, EXTERN_FAILED + k))
    b.position_at_end(ok)
