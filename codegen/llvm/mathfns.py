"""Vectorisable math functions emitted inline as LLVM IR.

LLVM lowers ``llvm.exp.v8f32`` to eight scalar ``expf`` calls (llvmlite cannot point LLVM's
vectoriser at a vector math library), which makes ``exp``-heavy kernels (softmax, sigmoid)
several times slower than vectorised libraries. ``exp_f32`` computes float32 ``exp`` with
plain arithmetic instead, so the loop vectoriser (and explicit vector code) runs it 8 lanes
at a time; its error is within 1 ulp of the correctly rounded result over the whole
float32 range (checked against float64 in the tests), subnormal results and the
overflow/underflow limits included, and NaN/Inf follow IEEE (``exp(-inf) = 0``).

Method (Cephes ``expf``): ``n = round(x / ln 2)``, ``r = x - n ln 2`` in two steps (exact
high part), ``exp(r)`` by a degree-7 polynomial, then the result is scaled by ``2**n`` in
two multiplications by powers of two (so results that are subnormal round only once). On
CPUs with FMA the reduction and the polynomial use fused multiply-adds (``fused=True``);
the clamping of the argument compiles to one min and one max instruction.

>>> from llvmlite import ir
>>> m = ir.Module(); f = ir.Function(m, ir.FunctionType(ir.FloatType(), [ir.FloatType()]), "f")
>>> b = ir.IRBuilder(f.append_basic_block())
>>> _ = b.ret(exp_f32(b, f.args[0], lambda name, args: b.call(_intrinsic(m, name, args[0].type), args)))
"""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

from .types import I32, intrinsic_suffix, splat_const

__all__ = ["exp_f32"]

_LOG2E = 1.44269504088896341
_LN2_HI = 0.693359375           # exact in float32 (few mantissa bits): n * _LN2_HI is exact
_LN2_LO = -2.12194440e-4
_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
         5.0000001201e-1)
_X_MAX = 89.0                   # exp(89) overflows float32
_X_MIN = -104.0                 # exp(-104) rounds to 0


def _intrinsic(m: ir.Module, name: str, t: ir.Type) -> ir.Function:
    full = f"{name}.{intrinsic_suffix(t)}"
    fn = m.globals.get(full)
    return fn if fn is not None else ir.Function(m, ir.FunctionType(t, [t]), full)


#: the AVX-512 ``vscalefps`` intrinsic for vectors of each width: ``x * 2**floor(n)``, rounded
#: once (16 lanes with AVX-512F; 8 and 4 with AVX-512VL too)
SCALEF = {16: ("llvm.x86.avx512.mask.scalef.ps.512", 16), 8: ("llvm.x86.avx512.mask.scalef.ps.256", 8),
          4: ("llvm.x86.avx512.mask.scalef.ps.128", 8)}


def _scalef(b: ir.IRBuilder, y: ir.Value, n: ir.Value) -> ir.Value:
    """``y * 2**n`` (``n`` an integral float vector) with one ``vscalefps``."""
    t = y.type
    name, mask_bits = SCALEF[t.count]
    mask = ir.IntType(mask_bits)
    args = [t, t, t, mask] + ([I32] if t.count == 16 else [])
    fn = b.module.globals.get(name) or ir.Function(b.module, ir.FunctionType(t, args), name)
    rest = [ir.Constant(mask, -1)] + ([ir.Constant(I32, 4)] if t.count == 16 else [])   # 4: current rounding
    return b.call(fn, [y, n, ir.Constant(t, ir.Undefined), *rest])


def exp_f32(b: ir.IRBuilder, x: ir.Value, call: Callable[[str, list], ir.Value], fused: bool = False,
            scalef: tuple = ()) -> ir.Value:
    """``exp(x)`` for a float32 (or ``<n x float>``) value ``x``; ``call(name, args)`` emits a
    call of the LLVM intrinsic ``name`` (``llvm.roundeven``, and ``llvm.fma`` when ``fused``).

    ``fused`` (for CPUs with FMA instructions) evaluates the argument reduction and the
    polynomial with fused multiply-adds: fewer instructions, and each step rounds once
    instead of twice (the result stays within 1 ulp). ``scalef``: the vector widths for
    which the CPU has ``vscalefps`` (AVX-512): there the scaling by ``2**n`` is one
    instruction instead of nine, with the same result (one rounding, subnormals included)."""
    t = x.type
    it = ir.VectorType(I32, t.count) if isinstance(t, ir.VectorType) else I32

    def c(v):
        return splat_const(t, v)
    isnan = b.fcmp_unordered("uno", x, x)
    # clamp to [_X_MIN, _X_MAX]; written as "x < max ? x : max", which maps to one min
    # instruction on x86 and sends NaN to _X_MAX (its result is replaced by NaN at the end)
    xc = b.select(b.fcmp_ordered("<", x, c(_X_MAX)), x, c(_X_MAX))
    xc = b.select(b.fcmp_ordered(">", xc, c(_X_MIN)), xc, c(_X_MIN))
    def madd(u, v, w):      # u * v + w
        return call("llvm.fma", [u, v, w]) if fused else b.fadd(b.fmul(u, v), w)
    nf = call("llvm.roundeven", [b.fmul(xc, c(_LOG2E))])
    r = madd(nf, c(-_LN2_HI), xc)              # exact either way: nf * _LN2_HI is exact
    r = madd(nf, c(-_LN2_LO), r)
    z = b.fmul(r, r)
    p = c(_POLY[0])
    for k in _POLY[1:]:
        p = madd(p, r, c(k))
    y = b.fadd(madd(p, z, r), c(1.0))
    if isinstance(t, ir.VectorType) and t.count in scalef:
        return b.select(isnan, x, _scalef(b, y, nf))
    n = b.fptosi(nf, it)                       # in [-150, 129]
    n1 = b.ashr(n, splat_const(it, 1))
    n2 = b.sub(n, n1)                          # both in [-75, 65]: 2**n1, 2**n2 are normal floats

    def pow2(k):
        return b.bitcast(b.shl(b.add(k, splat_const(it, 127)), splat_const(it, 23)), t)
    out = b.fmul(b.fmul(y, pow2(n1)), pow2(n2))
    return b.select(isnan, x, out)
