"""The kernel's entry points around the function holding its code.

* ``emit_alias_check``: with ``noalias``, the code is in ``@<symbol>_impl`` whose pointer
  arguments are ``noalias``; ``@<symbol>`` first checks that no buffer the kernel writes
  overlaps another argument, returns ``ALIASED`` if one does (the caller then runs a variant
  compiled without ``noalias``) and else calls ``_impl``.
* ``emit_py_wrapper``: ``@<symbol>_py`` takes the numpy array objects instead of data
  pointers and reads each data pointer itself.
* ``bind_scalar_args``: scalar arguments, converted from how they are passed
  (``types.arg_type``) to register values.

>>> from llvmlite import ir
>>> from codegen.llvm.types import I32, I64, PTR
>>> m = ir.Module()
>>> k = ir.Function(m, ir.FunctionType(I32, [PTR, I64]), "te_B"); k.args[0].name, k.args[1].name = "B", "N"
>>> py = emit_py_wrapper(k, 1, 16)          # the data pointer is at byte 16 of the array object
>>> py.name, [a.name for a in py.args]
('te_B_py', ['B_obj', 'N'])
>>> '%"B_data" = load ptr, ptr' in str(py)
True
"""
from __future__ import annotations

from typing import Sequence

from llvmlite import ir

from te.expr import Var
from loopnest.queries import stmt_stored_buffers
from loopnest.stmt import Stmt

from .fnstate import FnState
from .types import HALF, I1, I8, I32, I64, PTR, value_type

__all__ = ["ALIASED", "emit_alias_check", "emit_py_wrapper", "bind_scalar_args"]

ALIASED = 2                              # kernel return code: arguments overlap, use the safe variant


def emit_alias_check(em, impl: ir.Function, root: Stmt) -> ir.Function:
    """``i32 @<symbol>(...)``: returns ``ALIASED`` when a buffer that ``root`` writes overlaps
    another buffer argument in memory, else calls ``impl``. ``em`` is the emitter
    (``emit._Emitter``: its buffer parameters and scalar variables, ``em.index`` for sizes)."""
    fn = ir.Function(em.module, impl.function_type, name=em.symbol)
    fn.attributes.add("nounwind")
    fn.attributes.add("noinline")        # else LLVM copies the whole kernel into ``@<symbol>_py`` too
    st = FnState(fn, in_parallel=False)
    b = st.b
    nbuf = len(em.buffer_params)
    for k, a in enumerate(fn.args):
        a.name = impl.args[k].name
    bind_scalar_args(st, em.scalar_vars, fn.args[nbuf:])
    written = {id(b) for b in stmt_stored_buffers(root)}
    ranges = []                          # the [lo, hi) byte range of each argument
    for p, a in zip(em.buffer_params, fn.args):
        count = ir.Constant(I64, p.buffer.dtype.itemsize * p.buffer.dtype.lanes)
        for d in p.buffer.dims:
            count = b.mul(count, em.index(st, d))
        lo = b.ptrtoint(a, I64)
        ranges.append((lo, b.add(lo, count), id(p.buffer) in written))
    # straight-line code over the pairs with a written buffer: no loops for LLVM's loop passes
    aliased = ir.Constant(I1, 0)
    for x, (lo_x, hi_x, wr_x) in enumerate(ranges):
        for lo_y, hi_y, wr_y in ranges[x + 1:]:
            if wr_x or wr_y:
                overlap = b.and_(b.icmp_unsigned("<", lo_x, hi_y), b.icmp_unsigned("<", lo_y, hi_x))
                aliased = b.or_(aliased, overlap)
    run_bb = fn.append_basic_block("distinct")
    alias_bb = fn.append_basic_block("aliased")
    b.cbranch(aliased, alias_bb, run_bb)
    b.position_at_end(alias_bb)
    b.ret(ir.Constant(I32, ALIASED))
    b.position_at_end(run_bb)
    b.ret(b.call(impl, list(fn.args)))
    st.finish()
    return fn


def bind_scalar_args(st: FnState, scalar_vars: Sequence[Var], args: Sequence[ir.Value]) -> None:
    """Bind each scalar parameter to its register value, converted from how it is passed
    (``types.arg_type``: bool as ``i8``, float16 as an exactly representable ``float``)."""
    for v, a in zip(scalar_vars, args):
        want = value_type(v.dtype)
        if want is I1:
            a = st.b.icmp_unsigned("!=", a, ir.Constant(I8, 0), name=a.name + "_b")
        elif want is HALF:
            a = st.b.fptrunc(a, HALF, name=a.name + "_h")
        st.vars[id(v)] = a


def emit_py_wrapper(kernel: ir.Function, nbuf: int, array_data_offset: int) -> ir.Function:
    """``i32 @<kernel>_py(ptr arrays..., sizes...)``: reads the data pointer of each of the
    ``nbuf`` numpy array objects (a ``PyArrayObject`` field at byte ``array_data_offset``) and
    calls ``kernel`` (saves the per-call pointer lookups in Python)."""
    fn = ir.Function(kernel.module, kernel.function_type, name=kernel.name + "_py")
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    args = []
    off = ir.Constant(I64, array_data_offset)
    for k, a in enumerate(fn.args):
        a.name = kernel.args[k].name + ("_obj" if k < nbuf else "")
        if k < nbuf:
            field = b.gep(a, [off], inbounds=True, source_etype=I8)
            args.append(b.load(field, typ=PTR, name=kernel.args[k].name + "_data"))
        else:
            args.append(a)
    b.ret(b.call(kernel, args))
    return fn
