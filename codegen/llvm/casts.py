"""Dtype conversions of register values, as ``te.lowprec.convert`` and the interpreter do them.

* to bool: ``!= 0`` (a NaN is true);
* float -> int saturates (``llvm.fptosi.sat``): NaN -> 0, out of range -> min / max;
* int -> narrow float rounds once: through float32 when that is exact, else through float64
  rounded to odd (``int64_to_f64_round_odd``, ``lowp.narrow_f64_round_odd``), so the final
  rounding to the narrow format is the only one that counts;
* float -> float returns a quiet NaN keeping the sign and leading payload.

float16 registers are ``half``; bfloat16, tf32 and float8 values live in float32 registers.

>>> from llvmlite import ir
>>> from te.dtypes import as_dtype
>>> from codegen.llvm.types import F32, I32
>>> m = ir.Module(); f = ir.Function(m, ir.FunctionType(I32, [F32]), "f")
>>> b = ir.IRBuilder(f.append_basic_block())
>>> _ = b.ret(cast(b, as_dtype("float32"), as_dtype("int32"), f.args[0]))
>>> "llvm.fptosi.sat.i32.f32" in str(m)
True
"""
from __future__ import annotations

from llvmlite import ir

from te.dtypes import Dtype

from . import lowp
from .decls import declare
from .types import F32, F64, I32, I64, intrinsic_suffix, splat_const, value_type

__all__ = ["cast", "int64_to_f64_round_odd", "widen_float", "narrow_float"]


def cast(b: ir.IRBuilder, src: Dtype, dst: Dtype, v: ir.Value) -> ir.Value:
    """The register value ``v`` of dtype ``src`` converted to ``dst``."""
    if src == dst:
        return v
    tt = value_type(dst)
    lanes = dst.lanes
    f32t = F32 if lanes == 1 else ir.VectorType(F32, lanes)
    f64t = F64 if lanes == 1 else ir.VectorType(F64, lanes)
    if dst.is_bool:
        if src.is_float:
            return b.fcmp_unordered("!=", widen_float(b, src, v), splat_const(_wide_t(src, lanes), 0.0))
        return b.icmp_unsigned("!=", v, splat_const(v.type, 0))
    if dst.is_integer:
        if src.is_bool:
            return b.zext(v, tt)
        if src.is_integer:
            sb, db = src.bits, dst.bits
            if db < sb:
                return b.trunc(v, tt)
            if db > sb:
                return b.sext(v, tt) if src.is_int else b.zext(v, tt)
            return v
        w = widen_float(b, src, v)
        base = "llvm.fptosi.sat" if dst.is_int else "llvm.fptoui.sat"
        name = f"{base}.{intrinsic_suffix(tt)}.{intrinsic_suffix(w.type)}"
        return b.call(declare(b.module, name, tt, [w.type]), [w])
    # float destination
    if src.is_bool or src.is_integer:
        conv = b.uitofp if (src.is_bool or src.is_uint) else b.sitofp
        if dst.kind == "float" and dst.bits in (32, 64):
            return conv(v, tt)
        if dst.kind == "float" and dst.bits == 16 and src.bits <= 16:
            return b.fptrunc(conv(v, f32t), tt)  # exact in float32, one rounding to half
        w = conv(v, f64t)
        if src.bits == 64:
            w = int64_to_f64_round_odd(b, src, v, w)
        return narrow_float(b, dst, w, f64t)
    w = widen_float(b, src, v)            # exact float32 / float64 value of the source
    if dst.kind == "float" and dst.bits == 64:
        return w if w.type == f64t else b.fpext(w, f64t)
    if dst.kind == "float" and dst.bits == 32:
        if w.type != f32t:
            return b.fptrunc(w, f32t)
        # the register already holds the value; a conversion quietens a NaN (as fpext does)
        bits = b.bitcast(w, _int_like(w.type))
        quiet = b.bitcast(b.or_(bits, splat_const(bits.type, 0x400000)), w.type)
        return b.select(b.fcmp_unordered("uno", w, w), quiet, w)
    return narrow_float(b, dst, w, f64t)


def int64_to_f64_round_odd(b: ir.IRBuilder, src: Dtype, v: ir.Value, x: ir.Value) -> ir.Value:
    """Turn ``x``, the nearest-even float64 of the 64-bit integer ``v``, into the float64
    rounded to odd (so a second rounding to a narrow format is exact)."""
    signed = src.is_int
    base = "llvm.fptosi.sat" if signed else "llvm.fptoui.sat"
    back = b.call(declare(b.module, f"{base}.{intrinsic_suffix(v.type)}.{intrinsic_suffix(x.type)}", v.type,
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


def widen_float(b: ir.IRBuilder, src: Dtype, v: ir.Value) -> ir.Value:
    """The exact float32 (float64 for float64) value of a float register value."""
    if src.kind == "float" and src.bits == 16:
        return b.fpext(v, F32 if src.lanes == 1 else ir.VectorType(F32, src.lanes))
    return v


def narrow_float(b: ir.IRBuilder, dst: Dtype, w: ir.Value, f64t: ir.Type) -> ir.Value:
    """Round an exact float32/float64 value ``w`` once to the narrow float ``dst`` (``f64t``:
    the float64 type of ``w``'s shape)."""
    if w.type == f64t:
        w = lowp.narrow_f64_round_odd(b, w)
    if dst.kind == "float" and dst.bits == 16:
        return b.fptrunc(w, value_type(dst))
    return lowp.round_to(b, w, lowp.format_name(dst))


def _wide_t(src: Dtype, lanes: int) -> ir.Type:
    base = F64 if (src.kind == "float" and src.bits == 64) else F32
    return base if lanes == 1 else ir.VectorType(base, lanes)


def _int_like(t: ir.Type) -> ir.Type:
    """The integer (vector) type of the same width as float (vector) type ``t``."""
    if isinstance(t, ir.VectorType):
        return ir.VectorType(_int_like(t.element), t.count)
    return I64 if t == F64 else I32
