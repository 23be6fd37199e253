"""Low-precision float conversions emitted as LLVM integer code.

These implement the rules of ``te.lowprec`` (round to nearest even, IEEE overflow to
Inf for bfloat16/tf32, saturation to the largest finite value for float8, quiet NaNs
that keep the leading payload bits, float8_e4m3 NaN -> +448) on float32 values held in
registers, so no libcall (``__truncsfbf2`` ...) is needed. Every helper works on scalars
and on vectors alike.

The register value of a bfloat16 / tf32 / float8 number is the float32 holding it
exactly; ``round_to(b, x, fmt)`` rounds a float32 to the nearest value of ``fmt`` and
returns it as float32 again, ``encode``/``decode`` convert to and from the storage bits.

A float64 is first narrowed to float32 with round-to-odd (``narrow_f64_round_odd``), which
makes the second rounding exact: float32 keeps more than two extra bits over every target.

>>> from llvmlite import ir
>>> m = ir.Module(); f = ir.Function(m, ir.FunctionType(ir.FloatType(), [ir.FloatType()]), "f")
>>> b = ir.IRBuilder(f.append_basic_block())
>>> _ = b.ret(round_to(b, f.args[0], "bfloat16"))
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from .types import F32, splat_const

__all__ = ["FORMATS", "round_to", "encode", "decode", "narrow_f64_round_odd", "format_name"]


@dataclass(frozen=True)
class _Fmt:
    exp_bits: int
    man_bits: int
    ieee: bool          # has Inf and NaN (all-ones exponent); False for e4m3
    saturate: bool      # overflow and Inf go to +-max finite
    storage_bits: int

    @property
    def bias(self) -> int:
        return (1 << (self.exp_bits - 1)) - 1

    @property
    def max_bits(self) -> int:
        e, m = self.exp_bits, self.man_bits
        if self.ieee:
            return (((1 << e) - 2) << m) | ((1 << m) - 1)
        return (((1 << e) - 1) << m) | ((1 << m) - 2)

    @property
    def inf_bits(self) -> int:
        return ((1 << self.exp_bits) - 1) << self.man_bits


FORMATS = {
    "bfloat16": _Fmt(8, 7, True, False, 16),
    "tf32": _Fmt(8, 10, True, False, 32),
    "float16": _Fmt(5, 10, True, False, 16),
    "float8_e4m3": _Fmt(4, 3, False, True, 8),
    "float8_e5m2": _Fmt(5, 2, True, True, 8),
}


def format_name(dt) -> str:
    """The ``FORMATS`` key of a te dtype (``bfloat16``, ``tf32``, ``float8_e4m3`` ...)."""
    return {"bfloat": "bfloat16", "float": f"float{dt.bits}"}.get(dt.kind, dt.kind)


def _ity(v: ir.Value, bits: int = 32) -> ir.Type:
    t = v.type
    return ir.VectorType(ir.IntType(bits), t.count) if isinstance(t, ir.VectorType) else ir.IntType(bits)


def _fty(v: ir.Value, base: ir.Type = F32) -> ir.Type:
    t = v.type
    return ir.VectorType(base, t.count) if isinstance(t, ir.VectorType) else base


def _c(v_or_t, value):
    t = v_or_t if isinstance(v_or_t, ir.Type) else v_or_t.type
    return splat_const(t, value)


def _round_bits_simple(b: ir.IRBuilder, bits: ir.Value, drop: int) -> ir.Value:
    """Round the float32 bit pattern ``bits`` to ``23 - drop`` mantissa bits (nearest even),
    keeping the result as a float32 pattern with the low ``drop`` bits zero. Exact for
    formats sharing float32's exponent range (bfloat16, tf32)."""
    lsb = b.and_(b.lshr(bits, _c(bits, drop)), _c(bits, 1))
    rounded = b.add(b.add(bits, _c(bits, (1 << (drop - 1)) - 1)), lsb)
    return b.and_(rounded, _c(bits, (-1 << drop) & 0xFFFFFFFF))


def round_to(b: ir.IRBuilder, x: ir.Value, fmt: str) -> ir.Value:
    """Round float32 ``x`` (scalar or vector) to the nearest value of ``fmt``; float32 result."""
    if fmt == "float32":
        return x
    if fmt in ("bfloat16", "tf32"):
        drop = 16 if fmt == "bfloat16" else 13
        bits = b.bitcast(x, _ity(x))
        rounded = _round_bits_simple(b, bits, drop)
        nan = b.and_(b.or_(bits, _c(bits, 0x00400000)), _c(bits, (-1 << drop) & 0xFFFFFFFF))
        isnan = b.fcmp_unordered("uno", x, x)
        return b.bitcast(b.select(isnan, nan, rounded), x.type)
    return decode(b, encode(b, x, fmt), fmt)


def encode(b: ir.IRBuilder, x: ir.Value, fmt: str, store: bool = False) -> ir.Value:
    """The storage bits (i16 / i8, or float32 for tf32) of float32 ``x`` rounded to ``fmt``.

    ``store=True`` writes a register value to memory the way the interpreter does: exact
    for values of the format (what registers hold; a NaN keeps its payload and is not
    quietened, so a copy is bit-exact), and
    for the specials that can reach a store unrounded (a loaded Inf/NaN passed through
    min/max): float8 does not saturate, e5m2 keeps Inf, e4m3 writes its NaN pattern for
    NaN, Inf and overflow.
    """
    f = FORMATS[fmt]
    if fmt == "tf32":
        return round_to(b, x, fmt)
    if fmt == "bfloat16":
        bits = b.bitcast(round_to(b, x, fmt), _ity(x))
        if store:  # a NaN of the format is stored as it is (a signalling NaN stays signalling)
            raw = b.bitcast(x, _ity(x))
            keep = b.and_(b.fcmp_unordered("uno", x, x),
                          b.icmp_unsigned("!=", b.and_(raw, _c(raw, 0x007F0000)), _c(raw, 0)))
            bits = b.select(keep, raw, bits)
        return b.trunc(b.lshr(bits, _c(bits, 16)), _ity(x, 16))
    e, m = f.exp_bits, f.man_bits
    bits = b.bitcast(x, _ity(x))
    sign = b.shl(b.lshr(bits, _c(bits, 31)), _c(bits, e + m))
    a = b.and_(bits, _c(bits, 0x7FFFFFFF))
    absf = b.bitcast(a, x.type)
    # normal range of the target: round the float32 mantissa, then rebias the exponent
    shift = 23 - m
    lsb = b.and_(b.lshr(a, _c(a, shift)), _c(a, 1))
    rn = b.lshr(b.add(b.add(a, _c(a, (1 << (shift - 1)) - 1)), lsb), _c(a, shift))
    mag_n = b.sub(rn, _c(a, (127 - f.bias) << m))
    # subnormal range: adding 2**(emin - m + 23) makes the FPU round to the subnormal quantum
    emin = 1 - f.bias
    magic = float(2.0 ** (emin - m + 23))
    s = b.fadd(absf, _c(x, magic))
    mag_s = b.sub(b.bitcast(s, _ity(x)), _c(a, _f32_bits(magic)))
    tiny = b.fcmp_ordered("<", absf, _c(x, float(2.0 ** emin)))
    mag = b.select(tiny, mag_s, mag_n)
    is_inf = b.icmp_unsigned("==", a, _c(a, 0x7F800000))
    is_nan = b.icmp_unsigned(">", a, _c(a, 0x7F800000))
    over = b.or_(b.icmp_signed(">", mag, _c(a, f.max_bits)), is_inf)
    if store and not f.ieee:  # e4m3fn storage: NaN, Inf and overflow become S.1111.111
        special = b.or_(over, is_nan)
        out = b.or_(sign, b.select(special, _c(a, (1 << (e + m)) - 1), mag))
        return b.trunc(out, _ity(x, f.storage_bits))
    saturate = f.saturate and not store
    mag = b.select(over, _c(a, f.max_bits if saturate else f.inf_bits), mag)
    if f.ieee:
        payload = b.lshr(b.and_(a, _c(a, 0x007FFFFF)), _c(a, 23 - m))
        if store:  # a NaN of the format is stored as it is (quietened only if its payload is lost)
            quiet = b.select(b.icmp_unsigned("==", payload, _c(a, 0)), _c(a, 1 << (m - 1)), _c(a, 0))
            nan_mag = b.or_(b.or_(payload, quiet), _c(a, f.inf_bits))
        else:
            nan_mag = b.or_(payload, _c(a, f.inf_bits | (1 << (m - 1))))
        out = b.or_(sign, b.select(is_nan, nan_mag, mag))
    else:  # e4m3 has no NaN: NaN -> +max
        out = b.select(is_nan, _c(a, f.max_bits), b.or_(sign, mag))
    return b.trunc(out, _ity(x, f.storage_bits))


def _f32_bits(v: float) -> int:
    import struct
    return struct.unpack("<I", struct.pack("<f", v))[0]


def decode(b: ir.IRBuilder, raw: ir.Value, fmt: str) -> ir.Value:
    """The float32 value of the storage bits ``raw`` of ``fmt`` (exact)."""
    f = FORMATS[fmt]
    if fmt == "tf32":
        return raw
    i32 = _ity(raw)
    bits = b.zext(raw, i32)
    if fmt == "bfloat16":
        return b.bitcast(b.shl(bits, _c(i32, 16)), _fty(raw))
    e, m = f.exp_bits, f.man_bits
    sign = b.shl(b.lshr(bits, _c(i32, e + m)), _c(i32, 31))
    ex = b.and_(b.lshr(bits, _c(i32, m)), _c(i32, (1 << e) - 1))
    man = b.and_(bits, _c(i32, (1 << m) - 1))
    normal = b.or_(b.shl(b.add(ex, _c(i32, 127 - f.bias)), _c(i32, 23)), b.shl(man, _c(i32, 23 - m)))
    sub = b.fmul(b.uitofp(man, _fty(raw)), _c(_fty(raw), float(2.0 ** (1 - f.bias - m))))
    mag = b.select(b.icmp_unsigned("==", ex, _c(i32, 0)), b.bitcast(sub, i32), normal)
    # a NaN keeps its payload and stays signalling if it was (a cast quietens it, a copy does not)
    nan_bits = b.or_(b.shl(man, _c(i32, 23 - m)), _c(i32, 0x7F800000))
    all_ones = b.icmp_unsigned("==", ex, _c(i32, (1 << e) - 1))
    if f.ieee:
        special = b.select(b.icmp_unsigned("==", man, _c(i32, 0)), _c(i32, 0x7F800000), nan_bits)
        mag = b.select(all_ones, special, mag)
    else:  # float8_e4m3fn storage: S.1111.111 reads as NaN
        isnan = b.and_(all_ones, b.icmp_unsigned("==", man, _c(i32, (1 << m) - 1)))
        mag = b.select(isnan, nan_bits, mag)
    return b.bitcast(b.or_(sign, mag), _fty(raw))


def narrow_f64_round_odd(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """float64 -> float32 rounding to odd (truncate, then set the last bit when inexact).

    Rounding that float32 once more to a format with at most 21 mantissa bits gives the
    correctly rounded result of the float64 value (no double-rounding error).
    """
    ft = _fty(x)
    t = b.fptrunc(x, ft)
    back = b.fpext(t, x.type)
    inexact = b.fcmp_ordered("!=", back, x)
    bits = b.bitcast(t, _ity(x))
    fabs = _fabs(b, x)
    away = b.fcmp_ordered(">", _fabs(b, back), fabs)
    bits = b.select(away, b.sub(bits, _c(bits, 1)), bits)
    bits = b.select(inexact, b.or_(bits, _c(bits, 1)), bits)
    return b.bitcast(bits, ft)


def _fabs(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    m = b.module
    from .types import intrinsic_suffix
    name = f"llvm.fabs.{intrinsic_suffix(x.type)}"
    fn = m.globals.get(name) or ir.Function(m, ir.FunctionType(x.type, [x.type]), name)
    return b.call(fn, [x])
