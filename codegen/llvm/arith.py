"""Arithmetic, comparisons and math functions on register values.

The instructions of one operator (``binop``) or intrinsic (``call``) applied to values
already in registers, with the semantics of the TIR spec: integers wrap around, ``Div`` /
``Mod`` are C division, ``FloorDiv`` / ``FloorMod`` adjust it when the signs differ;
float ``Min`` / ``Max`` are IEEE 754-2019 ``minimum`` / ``maximum``. Arithmetic on float16,
bfloat16, tf32 and float8 never reaches these functions: ``loopnest.legalize.lower_low_precision``
rewrote it into float32 arithmetic between casts (``casts`` rounds); comparisons, min/max and
``isnan`` on those formats are exact and emitted on their registers.

>>> from llvmlite import ir
>>> from te import expr as E
>>> from te.dtypes import as_dtype
>>> from codegen.llvm.types import F32
>>> m = ir.Module(); f = ir.Function(m, ir.FunctionType(F32, [F32, F32]), "f")
>>> b = ir.IRBuilder(f.append_basic_block())
>>> mode = FloatMode(contract=("contract",))
>>> _ = b.ret(binop(b, mode, E.Mul, as_dtype("float32"), *f.args))
>>> "fmul contract float" in str(m)
True
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from llvmlite import ir

from te import expr as E
from te.dtypes import Dtype

from ..kernel import BuildError
from . import mathfns
from .decls import declare, intrinsic
from .types import F32, I1, I32, intrinsic_suffix, splat_const

__all__ = ["FloatMode", "binop", "int_division", "compare", "call", "exp"]

#: intrinsics that are one LLVM intrinsic call
_SIMPLE = {"exp": "llvm.exp", "exp2": "llvm.exp2", "log": "llvm.log", "log2": "llvm.log2", "sqrt": "llvm.sqrt",
           "abs": "llvm.fabs", "floor": "llvm.floor", "ceil": "llvm.ceil", "round": "llvm.roundeven",
           "sin": "llvm.sin", "cos": "llvm.cos", "pow": "llvm.pow", "log10": "llvm.log10",
           "trunc": "llvm.trunc", "copysign": "llvm.copysign"}
#: intrinsics that are a libm call (``asinf`` / ``asin``), made lane by lane on vectors
_LIBM = ("tanh", "erf", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tan", "log1p", "expm1",
         "erfc", "lgamma")
#: the float32 intrinsics emitted inline (``mathfns``) rather than through libm
_INLINE_F32 = ("log", "log2", "log10", "log1p", "exp2", "expm1", "tanh", "erf", "sin", "cos", "tan", "atan", "atan2",
               "asin", "acos", "sinh", "cosh", "pow")
_PREDICATES = {E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">="}


@dataclass(frozen=True)
class FloatMode:
    """How float operations are emitted."""

    #: fast-math flags of every float instruction
    fast: tuple = ()
    #: extra flags of ``fadd`` / ``fsub`` / ``fmul``: ``("contract",)`` lets LLVM fuse a multiply
    #: and the add using it into one FMA
    contract: tuple = ()
    #: the target has fused multiply-add instructions (inline math uses them)
    fma: bool = False
    #: the float32 vector widths with an AVX-512 ``vscalefps`` (inline ``exp`` scales with it)
    scalef: tuple = ()

    @classmethod
    def of(cls, options) -> "FloatMode":
        """The mode of an ``emit.EmitOptions``.

        >>> from codegen.llvm.emit import EmitOptions
        >>> FloatMode.of(EmitOptions(triple="aarch64-unknown-linux-gnu"))
        FloatMode(fast=(), contract=('contract',), fma=True, scalef=())
        """
        features = {f[1:]: f[0] == "+" for f in options.cpu_features.split(",") if f}   # the last one counts
        fma = options.triple.startswith(("aarch64", "arm64")) or features.get("fma", False)
        scalef = ((16,) + ((8, 4) if features.get("avx512vl") else ())) if features.get("avx512f") else ()
        return cls(("fast",) if options.fast_math else (),
                   ("contract",) if options.fp_contract and not options.fast_math else (), fma, scalef)


def _refuse_low_precision(what: str, dt: Dtype) -> None:
    if dt.is_lowp_float:
        raise BuildError(f"{what} on {dt} reached the LLVM printer: low-precision arithmetic is computed in "
                         "float32 by the lower_low_precision pass; build through codegen.build or run "
                         "loopnest.passes.legalize_for_target(nest, 'llvm') first")


def binop(b: ir.IRBuilder, mode: FloatMode, cls: type, dt: Dtype, a: ir.Value, y: ir.Value) -> ir.Value:
    """``a <cls> y`` (``cls``: a binary expression class, ``E.Add`` ... ``E.GE``) on operands of dtype ``dt``."""
    if issubclass(cls, E.CmpOp):
        return compare(b, mode, cls, dt, a, y)
    if dt.is_bool:
        if cls is E.Max:
            return b.or_(a, y)
        if cls is E.Min:
            return b.and_(a, y)
        raise BuildError(f"arithmetic {cls.__name__} on bool operands is not defined")
    if dt.is_float:
        fm = mode.fast
        if cls in (E.FloorDiv, E.FloorMod):
            _refuse_low_precision(cls.__name__, dt)
            return _float_floor_div_mod(b, mode, cls, a, y)

        fmc = fm + mode.contract

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
        if cls in (E.Min, E.Max):  # exactly IEEE 754-2019 minimum / maximum; nothing to round
            return _fcall(b, mode, "llvm.minimum" if cls is E.Min else "llvm.maximum", [a, y])
        _refuse_low_precision(cls.__name__, dt)
        return op(a, y)
    signed = dt.is_int
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
        return int_division(b, cls, signed, a, y)
    raise BuildError(f"{cls.__name__} is not supported on {dt}")  # pragma: no cover


def _float_floor_div_mod(b: ir.IRBuilder, mode: FloatMode, cls: type, a: ir.Value, y: ir.Value) -> ir.Value:
    """floor(a / b) and a - floor(a / b) * b (float32 / float64, as IREval)."""
    fm = mode.fast
    q = _fcall(b, mode, "llvm.floor", [b.fdiv(a, y, flags=fm)])
    if cls is E.FloorDiv:
        return q
    return b.fsub(a, b.fmul(q, y, flags=fm), flags=fm)


def _log2_constant(y: ir.Value) -> int | None:
    """``k`` when ``y`` is the scalar integer constant ``2**k`` with ``k >= 1``."""
    if isinstance(y, ir.Constant) and isinstance(y.type, ir.IntType) and isinstance(y.constant, int):
        c = y.constant
        if c > 1 and c & (c - 1) == 0:
            return c.bit_length() - 1
    return None


def int_division(b: ir.IRBuilder, cls: type, signed: bool, a: ir.Value, y: ir.Value) -> ir.Value:
    """C division / remainder and their floor variants. The divisor is never 0 nor, for
    signed types, -1: ``loopnest.legalize.guard_int_division`` rewrote those cases.

    A signed division by a constant ``2**k`` is written with shifts (what the code generator
    makes of it anyway): floor division is ``a >> k``, floor remainder ``a & (2**k - 1)``, C
    division ``(a + (2**k - 1 if a < 0 else 0)) >> k``. LLVM 22's loop vectorizer, built with
    assertions as in llvmlite, aborts the process on Intel CPUs when its two cost models
    disagree about an ``sdiv`` by a power of two whose value repeats across lanes
    (``A[(r / 2 + 1) / 2]``); the shifts cost the same in both.

    >>> m = ir.Module(); f = ir.Function(m, ir.FunctionType(ir.IntType(32), [ir.IntType(32)]), "f")
    >>> b = ir.IRBuilder(f.append_basic_block())
    >>> _ = b.ret(int_division(b, E.Div, True, f.args[0], ir.Constant(ir.IntType(32), 4)))
    >>> "sdiv" in str(m), "ashr i32" in str(m)
    (False, True)
    """
    zero, one = splat_const(a.type, 0), splat_const(a.type, 1)
    k = _log2_constant(y) if signed else None
    if k is not None and cls is not E.Mod:
        if cls is E.FloorDiv:
            return b.ashr(a, ir.Constant(a.type, k))
        if cls is E.FloorMod:
            return b.and_(a, ir.Constant(a.type, (1 << k) - 1))
        bits = a.type.width
        bias = b.lshr(b.ashr(a, ir.Constant(a.type, bits - 1)), ir.Constant(a.type, bits - k))
        return b.ashr(b.add(a, bias), ir.Constant(a.type, k))
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


def compare(b: ir.IRBuilder, mode: FloatMode, cls: type, dt: Dtype, a: ir.Value, y: ir.Value) -> ir.Value:
    """The ``i1`` result of comparison ``cls`` (``E.EQ`` ... ``E.GE``); float ``NE`` is unordered
    (true for NaN), the others ordered. Exact on every float format (float16 on ``half``)."""
    op = _PREDICATES[cls]
    if dt.is_float:
        if cls is E.NE:
            return b.fcmp_unordered("!=", a, y, flags=mode.fast)
        return b.fcmp_ordered(op, a, y, flags=mode.fast)
    if dt.is_int:
        return b.icmp_signed(op, a, y)
    return b.icmp_unsigned(op, a, y)


def call(b: ir.IRBuilder, mode: FloatMode, name: str, dt: Dtype, args: Sequence[ir.Value]) -> ir.Value:
    """The intrinsic ``name`` (``te.Call``) of arguments of dtype ``dt``."""
    if name == "abs" and dt.is_integer:
        x = args[0]
        if not dt.is_int:
            return x
        fn = declare(b.module, f"llvm.abs.{intrinsic_suffix(x.type)}", x.type, [x.type, I1])
        return b.call(fn, [x, ir.Constant(I1, 0)])  # abs(MIN) wraps to MIN
    if not dt.is_float:
        raise BuildError(f"intrinsic {name} needs a float argument, got {dt}")
    fm = mode.fast

    def op(*xs):
        if name == "exp":
            return exp(b, mode, xs[0])
        inline = _inline_f32(b, mode, name, xs)
        if inline is not None:
            return inline
        if name in _SIMPLE:
            return _fcall(b, mode, _SIMPLE[name], xs)
        x = xs[0]
        one = splat_const(x.type, 1.0)
        if name == "rsqrt":
            return b.fdiv(one, _fcall(b, mode, "llvm.sqrt", [x]), flags=fm)
        if name == "sigmoid":
            ex = exp(b, mode, b.fneg(x, flags=fm))
            return b.fdiv(one, b.fadd(one, ex, flags=fm), flags=fm)
        if name in _LIBM:
            return _libm(b, name, xs)
        if name == "fmod":
            return b.frem(x, xs[1], flags=fm)        # LLVM's frem is C's fmod
        raise BuildError(f"unknown intrinsic {name!r}")
    if name == "isnan":
        return b.fcmp_unordered("uno", args[0], args[0])
    _refuse_low_precision(f"the intrinsic {name}", dt)
    return op(*args)


def exp(b: ir.IRBuilder, mode: FloatMode, x: ir.Value) -> ir.Value:
    """float32 exp inline (vectorisable, see ``mathfns``); float64 through ``llvm.exp``."""
    et = x.type.element if isinstance(x.type, ir.VectorType) else x.type
    if et == F32:
        return mathfns.exp_f32(b, x, lambda name, args: _fcall(b, mode, name, args), fused=mode.fma,
                               scalef=mode.scalef)
    return _fcall(b, mode, "llvm.exp", [x])


def _inline_f32(b: ir.IRBuilder, mode: FloatMode, name: str, xs: Sequence[ir.Value]) -> ir.Value | None:
    """float32 ``_INLINE_F32`` functions of ``xs`` inline (vectorisable, ``mathfns``: a libm call
    per lane made them 7-35 times slower than PyTorch's vector code), else None."""
    x = xs[0]
    et = x.type.element if isinstance(x.type, ir.VectorType) else x.type
    if et != F32 or name not in _INLINE_F32:
        return None

    def call(n, args):
        return _fcall(b, mode, n, args)
    if name in ("log", "log2", "log10"):
        return mathfns.log_f32(b, x, call, fused=mode.fma, base={"log2": 2, "log10": 10}.get(name))
    if name == "log1p":
        return mathfns.log1p_f32(b, x, call, fused=mode.fma)
    if name in ("sin", "cos"):
        return mathfns.sincos_f32(b, x, name == "cos", call, lambda v: _libm(b, name, [v]), fused=mode.fma)
    if name == "tan":
        return mathfns.tan_f32(b, x, call, lambda v: _libm(b, name, [v]))
    if name in ("asin", "acos"):
        return mathfns.asin_acos_f32(b, x, name == "acos", call)
    if name == "atan":
        return mathfns.atan_f32(b, x, call, fused=mode.fma)
    if name == "atan2":
        return mathfns.atan2_f32(b, x, xs[1], call)
    if name == "pow":
        return mathfns.pow_f32(b, x, xs[1], call)
    fn = {"tanh": mathfns.tanh_f32, "erf": mathfns.erf_f32, "exp2": mathfns.exp2_f32, "expm1": mathfns.expm1_f32,
          "sinh": mathfns.sinh_f32, "cosh": mathfns.cosh_f32}[name]
    return fn(b, x, call, fused=mode.fma, scalef=mode.scalef)


def _fcall(b: ir.IRBuilder, mode: FloatMode, name: str, args: Sequence[ir.Value]) -> ir.Value:
    fn = intrinsic(b.module, name, args[0].type, len(args))
    return b.call(fn, list(args), fastmath=mode.fast)


def _libm(b: ir.IRBuilder, base: str, xs: Sequence[ir.Value]) -> ir.Value:
    """A libm function (``tanhf``/``tanh``) of ``xs``, called lane by lane on vectors."""
    t = xs[0].type
    et = t.element if isinstance(t, ir.VectorType) else t
    fn = declare(b.module, base + ("f" if et == F32 else ""), et, [et] * len(xs))
    if not isinstance(t, ir.VectorType):
        return b.call(fn, list(xs))
    out = ir.Constant(t, ir.Undefined)
    for k in range(t.count):
        ck = ir.Constant(I32, k)
        out = b.insert_element(out, b.call(fn, [b.extract_element(x, ck) for x in xs]), ck)
    return out
