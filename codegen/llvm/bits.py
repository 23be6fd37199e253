"""Integer bit operations, shifts and ``bitcast`` (``te.bitops``) on register values.

Shift amounts arrive already reduced modulo the width (``loopnest.legalize.mask_shift_amounts``),
so ``shl`` / ``ashr`` / ``lshr`` never see a poison amount. bfloat16 is held in a float32
register: its bits are the register's top half.

>>> from llvmlite import ir
>>> from te.dtypes import as_dtype
>>> m = ir.Module(); f = ir.Function(m, ir.FunctionType(ir.IntType(32), [ir.FloatType()]), "f")
>>> b = ir.IRBuilder(f.append_basic_block())
>>> _ = b.ret(bitcast(b, as_dtype("float32"), as_dtype("int32"), f.args[0]))
>>> "bitcast float" in str(m)
True
"""
from __future__ import annotations

from typing import Sequence

from llvmlite import ir

from te.dtypes import Dtype

from .types import F32, I16, I32, splat_const, value_type

__all__ = ["bitop", "bitcast"]


def bitop(b: ir.IRBuilder, name: str, dt: Dtype, args: Sequence[ir.Value]) -> ir.Value:
    """The bit operation ``name`` on integer operands of dtype ``dt``."""
    x = args[0]
    if name == "bitwise_not":
        return b.not_(x)
    y = args[1]
    if name == "bitwise_and":
        return b.and_(x, y)
    if name == "bitwise_or":
        return b.or_(x, y)
    if name == "bitwise_xor":
        return b.xor(x, y)
    if name == "shift_left":
        return b.shl(x, y)
    if name == "shift_right":
        return b.ashr(x, y) if dt.is_int else b.lshr(x, y)
    raise KeyError(name)


def _lanes(t: ir.Type, elem: ir.Type) -> ir.Type:
    return ir.VectorType(elem, t.count) if isinstance(t, ir.VectorType) else elem


def bitcast(b: ir.IRBuilder, src: Dtype, dst: Dtype, x: ir.Value) -> ir.Value:
    """The bits of ``x`` (dtype ``src``) as a value of ``dst``, a dtype of the same width."""
    if src.kind == "bfloat":
        bits = b.lshr(b.bitcast(x, _lanes(x.type, I32)), splat_const(_lanes(x.type, I32), 16))
        x = b.trunc(bits, _lanes(x.type, I16))
    if dst.kind == "bfloat":
        wide = b.zext(b.bitcast(x, _lanes(x.type, I16)), _lanes(x.type, I32))
        return b.bitcast(b.shl(wide, splat_const(wide.type, 16)), _lanes(x.type, F32))
    return b.bitcast(x, value_type(dst))
