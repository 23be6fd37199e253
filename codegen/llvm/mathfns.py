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

The other functions work the same way, each within 1-2 ulps (their docstrings): ``exp2_f32``
and ``expm1_f32`` on exp's polynomial, ``log_f32`` (also log2 and log10) and ``log1p_f32``,
``tanh_f32``, ``erf_f32``, ``sinh_f32`` and ``cosh_f32`` (on exp's reduction), ``atan_f32``,
``sincos_f32`` (in float32 below 2**16 where the CPU has FMA, else in float64; libm past 2**24),
and in float64, rounded once: ``tan_f32`` (libm past 2**24), ``asin_acos_f32``, ``atan2_f32``
and ``pow_f32``.

>>> text = example(lambda b, x, call: exp_f32(b, x, call))     # plain arithmetic: no libm call
>>> '@"expf"' in text, "llvm.roundeven.f32" in text
(False, True)
"""
from __future__ import annotations

import math
from typing import Callable

from llvmlite import ir

from .types import F32, I32, I64, intrinsic_suffix, splat_const

__all__ = ["example", "exp_f32", "exp2_f32", "expm1_f32", "log_f32", "log1p_f32", "tanh_f32", "erf_f32", "sincos_f32",
           "tan_f32", "atan_f32", "atan2_f32", "asin_acos_f32", "sinh_f32", "cosh_f32", "pow_f32"]

_LOG2E = 1.44269504088896341
_LN2_HI = 0.693359375           # exact in float32 (few mantissa bits): n * _LN2_HI is exact
_LN2_LO = -2.12194440e-4
_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
         5.0000001201e-1)
_X_MAX = 89.0                   # exp(89) overflows float32
_X_MIN = -104.0                 # exp(-104) rounds to 0


def example(emit: Callable, arguments: int = 1) -> str:
    """The LLVM IR of ``float f(float x)`` returning ``emit(b, x, call)`` (with ``arguments=2``,
    ``float f(float x, float y)`` returning ``emit(b, x, y, call)``; ``call(name, args)`` calls
    the LLVM intrinsic ``name``, or the libm function of that name), checked by LLVM's
    verifier: how the docstrings here show what a function emits.

    >>> text = example(lambda b, x, call: exp_f32(b, x, call, fused=True))
    >>> "llvm.fma.f32" in text, "expf" in text
    (True, False)
    """
    import llvmlite.binding as llvm
    m = ir.Module()
    f = ir.Function(m, ir.FunctionType(F32, [F32] * arguments), "f")
    b = ir.IRBuilder(f.append_basic_block())

    def call(name, args):
        t = args[0].type
        full = f"{name}.{intrinsic_suffix(t)}" if name.startswith("llvm.") else name
        fn = m.globals.get(full) or ir.Function(m, ir.FunctionType(t, [a.type for a in args]), full)
        return b.call(fn, args)
    b.ret(emit(b, *f.args, call))
    llvm.parse_assembly(str(m)).verify()
    return str(m)


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


class _Ops:
    """The arithmetic of the inline functions below on values of type ``t`` (float32 or a
    vector of float32): constants, multiply-adds (fused where the CPU has FMA) and
    polynomials in Horner form."""

    def __init__(self, b: ir.IRBuilder, t: ir.Type, call: Callable[[str, list], ir.Value], fused: bool):
        self.b, self.t, self.call, self.fused = b, t, call, fused
        self.it = ir.VectorType(I32, t.count) if isinstance(t, ir.VectorType) else I32

    @staticmethod
    def float64(b: ir.IRBuilder, t: ir.Type, call: Callable[[str, list], ir.Value]) -> "_Ops":
        """The fused operations on float64 values of ``t``'s shape (a float32 or a vector of
        them): the functions computed in float64 and rounded once."""
        dt = ir.VectorType(ir.DoubleType(), t.count) if isinstance(t, ir.VectorType) else ir.DoubleType()
        return _Ops(b, dt, call, True)

    def c(self, v) -> ir.Constant:
        return splat_const(self.t, v)

    def i(self, v) -> ir.Constant:
        return splat_const(self.it, v)

    def madd(self, u, v, w):
        """``u * v + w``."""
        return self.call("llvm.fma", [u, v, w]) if self.fused else self.b.fadd(self.b.fmul(u, v), w)

    def poly(self, u, coefficients):
        """``sum c_k u**k``, the coefficients highest degree first."""
        p = self.c(coefficients[0])
        for k in coefficients[1:]:
            p = self.madd(p, u, self.c(k))
        return p

    def fabs(self, x):
        return self.call("llvm.fabs", [x])

    def copysign(self, x, sign):
        return self.call("llvm.copysign", [x, sign])


def exp_f32(b: ir.IRBuilder, x: ir.Value, call: Callable[[str, list], ir.Value], fused: bool = False,
            scalef: tuple = ()) -> ir.Value:
    """``exp(x)`` for a float32 (or ``<n x float>``) value ``x``; ``call(name, args)`` emits a
    call of the LLVM intrinsic ``name`` (``llvm.roundeven``, and ``llvm.fma`` when ``fused``).

    ``fused`` (for CPUs with FMA instructions) evaluates the argument reduction and the
    polynomial with fused multiply-adds: fewer instructions, and each step rounds once
    instead of twice (the result stays within 1 ulp). ``scalef``: the vector widths for
    which the CPU has ``vscalefps`` (AVX-512): there the scaling by ``2**n`` is one
    instruction instead of nine, with the same result (one rounding, subnormals included)."""
    o = _Ops(b, x.type, call, fused)
    isnan = b.fcmp_unordered("uno", x, x)
    # clamp to [_X_MIN, _X_MAX]; written as "x < max ? x : max", which maps to one min
    # instruction on x86 and sends NaN to _X_MAX (its result is replaced by NaN at the end)
    xc = b.select(b.fcmp_ordered("<", x, o.c(_X_MAX)), x, o.c(_X_MAX))
    xc = b.select(b.fcmp_ordered(">", xc, o.c(_X_MIN)), xc, o.c(_X_MIN))
    nf = call("llvm.roundeven", [b.fmul(xc, o.c(_LOG2E))])
    r = o.madd(nf, o.c(-_LN2_HI), xc)          # exact either way: nf * _LN2_HI is exact
    r = o.madd(nf, o.c(-_LN2_LO), r)
    return b.select(isnan, x, _exp_reduced(o, r, nf, scalef))


def _exp_reduced(o: _Ops, r: ir.Value, nf: ir.Value, scalef: tuple) -> ir.Value:
    """``exp(r) * 2**nf`` for ``|r| <= ln(2) / 2`` and an integral float ``nf`` in [-150, 129]:
    :func:`exp_f32`'s polynomial and scaling."""
    b = o.b
    z = b.fmul(r, r)
    y = b.fadd(o.madd(o.poly(r, _POLY), z, r), o.c(1.0))
    if isinstance(o.t, ir.VectorType) and o.t.count in scalef:
        return _scalef(b, y, nf)
    n = b.fptosi(nf, o.it)                     # in [-150, 129]
    n1 = b.ashr(n, o.i(1))
    n2 = b.sub(n, n1)                          # both in [-75, 65]: 2**n1, 2**n2 are normal floats

    def pow2(k):
        return b.bitcast(b.shl(b.add(k, o.i(127)), o.i(23)), o.t)
    return b.fmul(b.fmul(y, pow2(n1)), pow2(n2))


def exp2_f32(b: ir.IRBuilder, x: ir.Value, call: Callable[[str, list], ir.Value], fused: bool = False,
             scalef: tuple = ()) -> ir.Value:
    """``2**x`` for a float32 (or ``<n x float>``) value: ``x = n + f`` (``f`` exact, in
    [-1/2, 1/2]), ``2**f = exp(f ln 2)`` by :func:`exp_f32`'s polynomial, scaled by ``2**n``.
    Within 1.5 ulps (checked against float64 in the tests); NaN stays NaN, ``2**-inf = 0``.
    Arguments as for :func:`exp_f32`.

    >>> text = example(lambda b, x, call: exp2_f32(b, x, call))
    >>> "exp2f" in text, "llvm.roundeven.f32" in text
    (False, True)
    """
    o = _Ops(b, x.type, call, fused)
    xc = b.select(b.fcmp_ordered("<", x, o.c(129.0)), x, o.c(129.0))      # 2**129 overflows; NaN: 129
    xc = b.select(b.fcmp_ordered(">", xc, o.c(-150.0)), xc, o.c(-150.0))  # 2**-150 rounds to 0
    nf = call("llvm.roundeven", [xc])
    f = b.fsub(xc, nf)
    r = o.madd(f, o.c(_LN2_HI), b.fmul(f, o.c(_LN2_LO)))
    return b.select(b.fcmp_unordered("uno", x, x), x, _exp_reduced(o, r, nf, scalef))


#: Cephes ``logf``: ``log(1 + f) = f - f**2 / 2 + f**3 P(f)`` for ``1 + f`` in [sqrt(1/2), sqrt(2))
_LOG_POLY = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
             -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)
_SQRT_HALF = 0.707106781186547524
_MIN_NORMAL = 1.1754943508222875e-38


#: log10(2) in two parts, the first exact in a few bits (``e * hi`` is exact), and 1 / ln(10)
_LOG10_2_HI, _LOG10_2_LO = 0.30078125, 2.48745663981198e-4
_LOG10E = 0.4342944819032518
#: what float32 leaves of 1 / ln(10) and 1 / ln(2)
_LOG10E_LO, _LOG2E_LO = _LOG10E - 0.4342944920063019, _LOG2E - 1.4426950216293335


def log_f32(b: ir.IRBuilder, x: ir.Value, call: Callable[[str, list], ir.Value], fused: bool = False,
            base: int | None = None) -> ir.Value:
    """``log(x)`` for a float32 (or ``<n x float>``) value, inline and branch-free (Cephes
    ``logf``): ``x = m * 2**e`` with ``m`` in [sqrt(1/2), sqrt(2)) (subnormal ``x`` scaled by
    2**23 first), ``log(m)`` by a degree-9 polynomial in ``m - 1`` (exact: Sterbenz), ``e ln 2``
    added in two parts. Within 1 ulp over the float32 range (checked against float64 in the
    tests); ``log(0) = -inf``, ``log(x < 0) = NaN``, ``log(inf) = inf``, NaN stays NaN.
    ``call`` and ``fused`` as for :func:`exp_f32`. ``base`` 2 or 10: ``log2(x) = e + log(m) /
    ln 2`` and ``log10(x) = e log10(2) + log(m) / ln 10`` (the exponent's part exact or in two
    parts), within 1.5 ulps.

    >>> text = example(lambda b, x, call: log_f32(b, x, call, base=10))
    >>> "log10f" in text, "llvm.fma" in text
    (False, False)
    """
    o = _Ops(b, x.type, call, fused)
    sub = b.fcmp_ordered("<", x, o.c(_MIN_NORMAL))
    xs = b.select(sub, b.fmul(x, o.c(float(1 << 23))), x)
    bits = b.bitcast(xs, o.it)
    e = b.sub(b.lshr(bits, o.i(23)), b.select(sub, o.i(126 + 23), o.i(126)))
    m = b.bitcast(b.or_(b.and_(bits, o.i(0x007FFFFF)), o.i(0x3F000000)), x.type)      # in [0.5, 1)
    low = b.fcmp_ordered("<", m, o.c(_SQRT_HALF))
    ef = b.fsub(b.sitofp(e, x.type), b.select(low, o.c(1.0), o.c(0.0)))
    f = b.fsub(b.select(low, b.fadd(m, m), m), o.c(1.0))
    z = b.fmul(f, f)
    y = b.fmul(b.fmul(o.poly(f, _LOG_POLY), f), z)
    if base in (2, 10):
        # (f + corr) / ln(base): f times the constant in two parts, so f is never rounded with corr
        inv, inv_lo = (_LOG2E, _LOG2E_LO) if base == 2 else (_LOG10E, _LOG10E_LO)
        corr = o.madd(z, o.c(-0.5), y)
        r = o.madd(f, o.c(inv), o.madd(corr, o.c(inv), b.fmul(f, o.c(inv_lo))))
        if base == 2:
            r = b.fadd(r, ef)
        else:
            r = o.madd(ef, o.c(_LOG10_2_HI), o.madd(ef, o.c(_LOG10_2_LO), r))
    else:
        y = o.madd(ef, o.c(_LN2_LO), y)
        y = o.madd(z, o.c(-0.5), y)
        r = o.madd(ef, o.c(_LN2_HI), b.fadd(f, y))
    r = b.select(b.fcmp_ordered("==", x, o.c(float("inf"))), x, r)
    r = b.select(b.fcmp_ordered("==", x, o.c(0.0)), o.c(float("-inf")), r)
    return b.select(b.fcmp_unordered("<", x, o.c(0.0)), o.c(float("nan")), r)     # x < 0 or NaN


#: ``tanh(x) = x + x**3 P(x**2)`` for ``|x| < _TANH_SMALL`` (a relative least-squares fit, refined
#: towards minimax: 1.8e-8 relative error of P), else ``1 - 2 / (exp(2|x|) + 1)``
_TANH_SMALL = 0.9
_TANH_POLY = (-5.204234096431738e-4, 2.7592922381930343e-3, -8.451031427655225e-3, 2.175947720331967e-2,
              -5.395390248811208e-2, 1.333326193312511e-1, -3.333333274546197e-1)


def tanh_f32(b: ir.IRBuilder, x: ir.Value, call: Callable[[str, list], ir.Value], fused: bool = False,
             scalef: tuple = ()) -> ir.Value:
    """``tanh(x)`` for a float32 (or ``<n x float>``) value, inline and branch-free: an odd
    polynomial below ``_TANH_SMALL``, ``1 - 2 / (exp(2|x|) + 1)`` (:func:`exp_f32`) with the
    sign of ``x`` above it (1 from about 9 on). Within 1.5 ulps (checked against float64 in the
    tests); ``tanh(-0) = -0``, NaN stays NaN. Arguments as for :func:`exp_f32`.

    >>> text = example(lambda b, x, call: tanh_f32(b, x, call, fused=True))
    >>> "tanhf" in text, "llvm.copysign.f32" in text
    (False, True)
    """
    o = _Ops(b, x.type, call, fused)
    z = o.fabs(x)
    x2 = b.fmul(x, x)
    small = o.madd(b.fmul(x2, x), o.poly(x2, _TANH_POLY), x)
    e = exp_f32(b, b.fadd(z, z), call, fused, scalef)
    large = b.fsub(o.c(1.0), b.fdiv(o.c(2.0), b.fadd(e, o.c(1.0))))
    r = b.select(b.fcmp_ordered("<", z, o.c(_TANH_SMALL)), small, b.select(b.fcmp_unordered("uno", x, x), x, large))
    return o.copysign(r, x)     # the sign of x, zeros included (the polynomial gives tanh(-0) = +0)


#: ``erf(x) = x + x (P(x**2) - 1)`` for ``|x| < _ERF_SMALL``; above it ``1 - exp(-x**2) Q(1/|x| - _ERF_MID)``
#: (``erfc(x) exp(x**2)`` fitted over [_ERF_SMALL, 4] in ``1/x`` about the middle of its range, where
#: the coefficients stay small: 1.0 ulp in a float32 emulation); 1 from 4 on. Relative fits,
#: refined towards minimax: 2.9e-10 and 3.6e-8 relative error.
_ERF_SMALL = 0.9
_ERF_POLY = (8.513094731061714e-05, -8.175637008392784e-4, 5.203858950112658e-3, -2.6860508374160614e-2,
             1.1283715031136238e-1, -3.7612634979728876e-1, 1.1283791667643506 - 1)
_ERF_MID = 0.6805555555555556
_ERFC_POLY = (0.017638051983651943, 0.00033081681635177524, -0.025948811279857233, 0.035242361913654034,
              -0.03383497658733272, 0.012028666189146251, 0.047625505621308094, -0.1647405949780331,
              0.3635481503326926, 0.3266665927516174)
_ERF_ONE = 4.0


def erf_f32(b: ir.IRBuilder, x: ir.Value, call: Callable[[str, list], ir.Value], fused: bool = False,
            scalef: tuple = ()) -> ir.Value:
    """``erf(x)`` for a float32 (or ``<n x float>``) value, inline and branch-free: an odd
    polynomial below ``_ERF_SMALL``, ``1 - exp(-x**2) Q(1/|x|)`` (:func:`exp_f32`) with the
    sign of ``x`` above it (``|x|`` clamped to 4, where erf rounds to 1). Within 1.5 ulps
    (checked against float64 in the tests); ``erf(-0) = -0``, NaN stays NaN. Arguments as
    for :func:`exp_f32`.

    >>> text = example(lambda b, x, call: erf_f32(b, x, call))
    >>> "erff" in text, "fdiv" in text
    (False, True)
    """
    o = _Ops(b, x.type, call, fused)
    x2 = b.fmul(x, x)
    small = o.madd(x, o.poly(x2, _ERF_POLY), x)          # x + x (P - 1): only the correction rounds
    z = o.fabs(x)
    zc = b.select(b.fcmp_ordered("<", z, o.c(_ERF_ONE)), z, o.c(_ERF_ONE))    # NaN: 4 (replaced below)
    q = o.poly(b.fsub(b.fdiv(o.c(1.0), zc), o.c(_ERF_MID)), _ERFC_POLY)
    tail = b.fmul(exp_f32(b, b.fneg(b.fmul(zc, zc)), call, fused, scalef), q)
    large = o.copysign(b.fsub(o.c(1.0), tail), x)
    return b.select(b.fcmp_ordered("<", z, o.c(_ERF_SMALL)), small, b.select(b.fcmp_unordered("uno", x, x), x, large))


#: sin, cos and tan call libm for ``|x|`` from ``_TRIG_LIMIT`` on (a vector with one such lane
#: reaches a block that does)
_TRIG_LIMIT = float(1 << 24)
#: tan reduces ``x`` by multiples of pi/2 in float64 (``x - n pi/2`` with pi/2 in two parts,
#: fused: exact to far below float32's precision), with the Taylor polynomials (highest degree
#: first) ``sin r = r + r**3 S(r**2)`` and ``cos r = C(r**2)`` (|r| <= pi/4: the first term left
#: out is below 2e-12 of the result)
_TWO_OVER_PI = 0.6366197723675814
_PI_2_HI = 1.5707963267948966
_PI_2_LO = 6.123233995736766e-17
_SIN_POLY = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(5, 0, -1))
_COS_POLY = tuple((-1) ** k / math.factorial(2 * k) for k in range(6, -1, -1))
#: sin and cos in float64 reduce by pi (in two parts), with ``sin r = r + r z P(z)``,
#: ``z = r**2``, for ``|r| <= pi/2 + 0.01`` (a relative fit: 2.6e-11)
_SIN_PI_POLY = (-2.3874100307098483e-08, 2.7524558208723293e-06, -0.00019840852423776384, 0.008333330990611516,
                -0.1666666662343042)
_PI_HI, _PI_LO = math.pi, 1.2246467991473532e-16
#: sin and cos in float32 reduce by pi/2 with pi as three float32 parts (halved: their sum is
#: pi to 2e-23) below ``_TRIG_F32_LIMIT`` (``n`` below 2**16: its low bits exact, ``n pi/2`` far
#: within the parts' precision), with Cephes ``sinf`` and ``cosf`` for ``|r| <= pi/4``:
#: ``sin r = r + r z P(z)``, ``cos r = 1 - z / 2 + z**2 Q(z)``
_PI_F32 = (3.1415927410125732, -8.742277657347586e-08, -3.4302490200117637e-15)
_TRIG_F32_LIMIT = 65536.0
_SIN_F32_POLY = (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)
_COS_F32_POLY = (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2)


def sincos_f32(b: ir.IRBuilder, x: ir.Value, cosine: bool, call: Callable[[str, list], ir.Value],
               libm: Callable[[ir.Value], ir.Value], fused: bool = False) -> ir.Value:
    """``sin(x)`` (``cos(x)`` where ``cosine``) for a float32 (or ``<n x float>``) value.
    With ``fused`` (FMA) and ``|x|`` below ``_TRIG_F32_LIMIT`` in every lane, in float32:
    ``x = n pi/2 + r`` by three fused multiply-adds with pi/2 in three parts (72 bits: ``r``
    to its last bits however close ``x`` is to a multiple of pi/2), Cephes' polynomials of
    ``sin r`` and ``cos r`` (``|r| <= pi/4``; ``1 - r**2 / 2`` rounded once), chosen and signed
    by ``n mod 4``: within 1.6 ulps (1.5 measured: the rounding of ``r`` is one ulp of a result
    in the binade below). Else in float64, rounded once (within 1 ulp), in a block of its own
    that only such values reach: ``x = m pi + r`` (``m`` an integer, or for cos an integer and
    a half, so that ``cos x = +-sin r``), one odd polynomial of ``sin r`` for ``|r| <= pi/2``,
    signed by the parity of ``m`` (checked against float64 in the tests; 4M elements on 2 cores with
    AVX-512: the float64 path 1.85 ms, the float32 one 0.9 ms). Where ``|x|`` is at least
    ``_TRIG_LIMIT`` the result is ``libm(x)`` instead, computed in a block of its own too.
    NaN and infinities give NaN. ``call`` as for :func:`exp_f32`.

    >>> text = example(lambda b, x, call: sincos_f32(b, x, False, call, lambda v: call("sinf", [v]), fused=True))
    >>> text.count('call float @"sinf"'), "fpext float" in text, "trig_libm" in text    # libm past 2**24 only
    (1, True, True)
    """
    if not fused:
        return _sincos_f64(b, x, cosine, call, libm)
    o = _Ops(b, x.type, call, True)
    n = call("llvm.roundeven", [b.fmul(x, o.c(2 / math.pi))])
    r = o.madd(b.fneg(n), o.c(_PI_F32[0] / 2), x)
    r = o.madd(b.fneg(n), o.c(_PI_F32[1] / 2), r)
    r = o.madd(b.fneg(n), o.c(_PI_F32[2] / 2), r)
    z = b.fmul(r, r)
    sin_r = o.madd(b.fmul(r, z), o.poly(z, _SIN_F32_POLY), r)
    # 1 - r**2 / 2 rounded once (from r, not from z = r**2 rounded): the larger part of cos r
    cos_r = o.madd(b.fmul(z, z), o.poly(z, _COS_F32_POLY), o.madd(b.fmul(r, o.c(-0.5)), r, o.c(1.0)))
    q = b.fptosi(b.select(b.fcmp_ordered("<", o.fabs(n), o.c(_TRIG_LIMIT)), n, o.c(0.0)), o.it)
    if cosine:
        q = b.add(q, o.i(1))                   # cos x = sin(x + pi/2)
    v = b.select(b.icmp_signed("!=", b.and_(q, o.i(1)), o.i(0)), cos_r, sin_r)
    fast = b.select(b.icmp_signed("!=", b.and_(q, o.i(2)), o.i(0)), b.fneg(v), v)
    if not cosine:          # sin(-0) = -0 (the reduction gives +0)
        fast = b.select(b.fcmp_ordered("==", x, o.c(0.0)), x, fast)
    big = b.fcmp_unordered(">=", o.fabs(x), o.c(_TRIG_F32_LIMIT))     # NaN too: NaN either way
    return _where_any(b, big, fast, lambda: _sincos_f64(b, x, cosine, call, libm), "trig_f64")


def _signed_sin(b: ir.IRBuilder, o: _Ops, r: ir.Value, n: ir.Value, x: ir.Value, cosine: bool) -> ir.Value:
    """``+-sin r`` of ``x = m pi + r`` in float64 (``o``), negative for an odd ``n`` (``n + 1``
    for cos), rounded to ``x``'s type; ``sin(-0) = -0``. ``n`` is read where it is below
    ``_TRIG_LIMIT`` (its low bit exact: the lanes of larger ``x`` are replaced)."""
    z = b.fmul(r, r)
    v = o.madd(b.fmul(r, z), o.poly(z, _SIN_PI_POLY), r)
    small = b.fcmp_ordered("<", o.fabs(n), o.c(_TRIG_LIMIT))
    k = b.fptosi(b.select(small, n, o.c(0.0)), o.it)
    if cosine:
        k = b.add(k, o.i(1))
    v = b.select(b.icmp_signed("!=", b.and_(k, o.i(1)), o.i(0)), b.fneg(v), v)
    if v.type != x.type:
        v = b.fptrunc(v, x.type)
    if not cosine:          # sin(-0) = -0 (the reduction gives +0)
        v = b.select(b.fcmp_ordered("==", x, splat_const(x.type, 0.0)), x, v)
    return v


def _sincos_f64(b: ir.IRBuilder, x: ir.Value, cosine: bool, call: Callable[[str, list], ir.Value],
                libm: Callable[[ir.Value], ir.Value]) -> ir.Value:
    """:func:`sincos_f32` in float64, rounded once; ``libm(x)`` past ``_TRIG_LIMIT``."""
    d = _Ops.float64(b, x.type, call)
    xd = b.fpext(x, d.t)
    q = b.fmul(xd, d.c(1 / math.pi))
    n = call("llvm.roundeven", [b.fsub(q, d.c(0.5)) if cosine else q])
    m = b.fadd(n, d.c(0.5)) if cosine else n          # cos((n + 1/2) pi + r) = (-1)**(n + 1) sin r
    r = d.madd(b.fneg(m), d.c(_PI_HI), xd)
    r = d.madd(b.fneg(m), d.c(_PI_LO), r)
    return _libm_past_trig_limit(b, x, d, xd, _signed_sin(b, d, r, n, x, cosine), libm)


def _trig_reduce(b: ir.IRBuilder, x: ir.Value, call: Callable[[str, list], ir.Value]) -> tuple:
    """``(d, xd, n, sin r, cos r)``: ``x = n pi/2 + r`` in float64 (``d``: the float64
    operations, ``xd``: ``x`` in float64) and the Taylor polynomials of ``r``, for
    :func:`tan_f32` (meaningful below ``_TRIG_LIMIT``)."""
    d = _Ops.float64(b, x.type, call)
    xd = b.fpext(x, d.t)
    n = call("llvm.roundeven", [b.fmul(xd, d.c(_TWO_OVER_PI))])
    r = d.madd(b.fneg(n), d.c(_PI_2_HI), xd)
    r = d.madd(b.fneg(n), d.c(_PI_2_LO), r)
    r2 = b.fmul(r, r)
    return d, xd, n, d.madd(b.fmul(r2, r), d.poly(r2, _SIN_POLY), r), d.poly(r2, _COS_POLY)


def _libm_past_trig_limit(b: ir.IRBuilder, x: ir.Value, d: _Ops, xd: ir.Value, fast: ir.Value,
                          libm: Callable[[ir.Value], ir.Value]) -> ir.Value:
    """``fast``, with the lanes where ``|x|`` is at least ``_TRIG_LIMIT`` replaced by ``libm(x)``
    (NaN and infinities are not: the reduction gives NaN for them already)."""
    return _where_any(b, b.fcmp_ordered(">=", d.fabs(xd), d.c(_TRIG_LIMIT)), fast, lambda: libm(x), "trig_libm")


def _where_any(b: ir.IRBuilder, lanes: ir.Value, fast: ir.Value, slow: Callable[[], ir.Value], name: str) -> ir.Value:
    """``fast`` with the ``lanes`` (an i1 or vector of i1) replaced by ``slow()``, which is
    emitted in a block of its own (``name``) that only values with such a lane reach."""
    t = fast.type
    if isinstance(t, ir.VectorType):
        mask = ir.IntType(t.count)
        any_lane = b.icmp_unsigned("!=", b.bitcast(lanes, mask), ir.Constant(mask, 0))
    else:
        any_lane = lanes
    fn = b.block.parent
    start = b.block
    slow_bb = fn.append_basic_block(name)
    done_bb = fn.append_basic_block(name + "_done")
    b.cbranch(any_lane, slow_bb, done_bb)
    b.position_at_end(slow_bb)
    replaced = b.select(lanes, slow(), fast)    # the other lanes as in the fast path
    slow_end = b.block
    b.branch(done_bb)
    b.position_at_end(done_bb)
    out = b.phi(t)
    out.add_incoming(fast, start)
    out.add_incoming(replaced, slow_end)
    return out


def tan_f32(b: ir.IRBuilder, x: ir.Value, call: Callable[[str, list], ir.Value],
            libm: Callable[[ir.Value], ir.Value]) -> ir.Value:
    """``tan(x)`` for a float32 (or ``<n x float>``) value: ``x = n pi/2 + r`` in float64, then
    ``sin r / cos r`` (``n`` even) or ``-cos r / sin r`` (``n`` odd) by their polynomials in
    float64, rounded once to float32 (within 1 ulp, checked against float64 in the tests);
    ``libm(x)`` where ``|x|`` is at least ``_TRIG_LIMIT``, as for sin. NaN and infinities give
    NaN, ``tan(-0) = -0``. ``call`` as for :func:`sincos_f32`.

    >>> text = example(lambda b, x, call: tan_f32(b, x, call, lambda v: call("tanf", [v])))
    >>> text.count('call float @"tanf"'), "fdiv double" in text
    (1, True)
    """
    d, xd, n, s, c = _trig_reduce(b, x, call)
    small = b.fcmp_ordered("<", d.fabs(xd), d.c(_TRIG_LIMIT))
    q = b.fptosi(b.select(small, n, d.c(0.0)), d.it)
    odd = b.icmp_signed("!=", b.and_(q, d.i(1)), d.i(0))
    v = b.fdiv(b.select(odd, b.fneg(c), s), b.select(odd, s, c))
    fast = b.fptrunc(v, x.type)
    fast = b.select(b.fcmp_ordered("==", x, splat_const(x.type, 0.0)), x, fast)
    return _libm_past_trig_limit(b, x, d, xd, fast, libm)


def log1p_f32(b: ir.IRBuilder, x: ir.Value, call: Callable[[str, list], ir.Value], fused: bool = False) -> ir.Value:
    """``log(1 + x)`` for a float32 (or ``<n x float>``) value: ``u = 1 + x`` rounded, then
    ``log(u) + (x - (u - 1)) / u`` (:func:`log_f32`; the second term is what the rounding of
    ``u`` lost, to first order). Within 2 ulps (checked against float64 in the tests);
    ``log1p(-1) = -inf``, NaN below -1, ``log1p(inf) = inf``, ``log1p(-0) = -0``.

    >>> text = example(lambda b, x, call: log1p_f32(b, x, call))
    >>> "log1pf" in text, "fdiv" in text
    (False, True)
    """
    o = _Ops(b, x.type, call, fused)
    u = b.fadd(x, o.c(1.0))
    lost = b.fsub(x, b.fsub(u, o.c(1.0)))
    r = b.fadd(log_f32(b, u, call, fused), b.fdiv(lost, u))
    r = b.select(b.fcmp_ordered("==", x, o.c(float("inf"))), x, r)
    r = b.select(b.fcmp_ordered("==", x, o.c(-1.0)), o.c(float("-inf")), r)
    return b.select(b.fcmp_ordered("==", x, o.c(0.0)), x, r)          # the sign of zero


def expm1_f32(b: ir.IRBuilder, x: ir.Value, call: Callable[[str, list], ir.Value], fused: bool = False,
              scalef: tuple = ()) -> ir.Value:
    """``exp(x) - 1`` for a float32 (or ``<n x float>``) value: ``x = n ln 2 + r`` as in
    :func:`exp_f32`, ``exp(r) - 1 = r + r**2 P(r)`` by its polynomial without the final 1,
    then ``2**n (exp(r) - 1) + (2**n - 1)`` in one fused step (``x`` clamped to [-30, 16]);
    above 16, ``exp(x) - 1``. Within 1.5 ulps (checked against float64 in the tests);
    ``expm1(-inf) = -1``, ``expm1(inf) = inf``, NaN stays NaN, ``expm1(-0) = -0``.
    Arguments as for :func:`exp_f32`.

    >>> text = example(lambda b, x, call: expm1_f32(b, x, call, fused=True))
    >>> "expm1f" in text, "llvm.fma.f32" in text
    (False, True)
    """
    o = _Ops(b, x.type, call, fused)
    xc = b.select(b.fcmp_ordered("<", x, o.c(16.0)), x, o.c(16.0))       # NaN: 16 (replaced below)
    xc = b.select(b.fcmp_ordered(">", xc, o.c(-30.0)), xc, o.c(-30.0))
    nf = call("llvm.roundeven", [b.fmul(xc, o.c(_LOG2E))])
    r = o.madd(nf, o.c(-_LN2_HI), xc)
    r = o.madd(nf, o.c(-_LN2_LO), r)
    em1 = o.madd(o.poly(r, _POLY), b.fmul(r, r), r)                  # exp(r) - 1
    t = b.bitcast(b.shl(b.add(b.fptosi(nf, o.it), o.i(127)), o.i(23)), x.type)   # 2**n, n in [-44, 24]
    small = o.madd(t, em1, b.fsub(t, o.c(1.0)))
    large = b.fsub(exp_f32(b, x, call, fused, scalef), o.c(1.0))
    out = b.select(b.fcmp_ordered(">", x, o.c(16.0)), large, small)
    out = b.select(b.fcmp_unordered("uno", x, x), x, out)
    return b.select(b.fcmp_ordered("==", x, o.c(0.0)), x, out)           # the sign of zero


#: ``atan(t) = t + t z P(z)``, ``z = t**2``, for ``|t| <= tan(3 pi/16)`` (a relative fit, refined
#: towards minimax: 7.0e-10); larger arguments are reduced to it by ``atan(a) = pi/4 +
#: atan((a - 1) / (a + 1))`` below ``tan(3 pi/8)`` and ``pi/2 - atan(1 / a)`` above, where the
#: results are at least 0.58 and 1.17: the reduced argument's rounding is a small part of them
#: (reducing from ``tan(pi/8)`` on, the result near 0.4 took the error of a ``t`` near -0.41
#: whole: 2 ulps)
_ATAN_POLY = (-0.017316950474294986, 0.050918361814411506, -0.08266802447557885, 0.10958144096310903,
              -0.14270038771700422, 0.19999224899512108, -0.33333320235720754)
_TAN_3PI_16, _TAN_3PI_8 = 0.6681786379192989, 2.414213562373095
#: pi/2 and pi/4 as a float32 and what it leaves
_PI_2_F32, _PI_2_F32_LO = 1.5707963705062866, -4.371139006309477e-08
_PI_4_F32, _PI_4_F32_LO = 0.7853981852531433, -2.1855695031547384e-08


def atan_f32(b: ir.IRBuilder, x: ir.Value, call: Callable[[str, list], ir.Value], fused: bool = False) -> ir.Value:
    """``atan(x)`` for a float32 (or ``<n x float>``) value, inline and branch-free: ``|x|``
    reduced to ``|t| <= tan(3 pi/16)`` (one division), ``atan(t)`` by an odd polynomial, the
    offset (0, pi/4 or pi/2) added in two parts, the sign of ``x`` restored. Within 1 ulp
    (checked against float64 in the tests); ``atan(+-inf) = +-pi/2``, ``atan(-0) = -0``, NaN
    stays NaN. ``call`` and ``fused`` as for :func:`exp_f32`.

    >>> text = example(lambda b, x, call: atan_f32(b, x, call))
    >>> "atanf" in text, text.count("fdiv")
    (False, 1)
    """
    o = _Ops(b, x.type, call, fused)
    a = o.fabs(x)
    big = b.fcmp_ordered(">", a, o.c(_TAN_3PI_8))
    mid = b.fcmp_ordered(">", a, o.c(_TAN_3PI_16))
    num = b.select(big, o.c(-1.0), b.select(mid, b.fsub(a, o.c(1.0)), a))
    den = b.select(big, a, b.select(mid, b.fadd(a, o.c(1.0)), o.c(1.0)))
    t = b.fdiv(num, den)
    hi = b.select(big, o.c(_PI_2_F32), b.select(mid, o.c(_PI_4_F32), o.c(0.0)))
    lo = b.select(big, o.c(_PI_2_F32_LO), b.select(mid, o.c(_PI_4_F32_LO), o.c(0.0)))
    z = b.fmul(t, t)
    p = o.madd(b.fmul(t, z), o.poly(z, _ATAN_POLY), b.fadd(t, lo))
    return o.copysign(b.fadd(hi, p), x)        # NaN: the division's NaN


#: ``sinh(x) = x + x z P(z)``, ``z = x**2``, for ``|x| < 1`` (a relative fit: 5.2e-11)
_SINH_POLY = (2.8169507777798026e-06, 1.983615987307119e-4, 8.333350057561934e-3, 1.666666649757219e-1)
#: cosh and sinh overflow float32 from about 89.42 on: exp(|x|) / 2 of the argument clamped here is inf
_HALF_EXP_MAX = 90.0


def _half_exp(o: _Ops, a: ir.Value, scalef: tuple) -> ir.Value:
    """``exp(a) / 2`` for ``a >= 0`` (not NaN), rounded once: :func:`exp_f32` scaling by
    ``2**(n - 1)``, so it overflows only where ``exp(a) / 2`` does."""
    b = o.b
    ac = b.select(b.fcmp_ordered("<", a, o.c(_HALF_EXP_MAX)), a, o.c(_HALF_EXP_MAX))
    nf = o.call("llvm.roundeven", [b.fmul(ac, o.c(_LOG2E))])
    r = o.madd(nf, o.c(-_LN2_HI), ac)
    r = o.madd(nf, o.c(-_LN2_LO), r)
    return _exp_reduced(o, r, b.fsub(nf, o.c(1.0)), scalef)


def cosh_f32(b: ir.IRBuilder, x: ir.Value, call: Callable[[str, list], ir.Value], fused: bool = False,
             scalef: tuple = ()) -> ir.Value:
    """``cosh(x)`` for a float32 (or ``<n x float>``) value: ``h + 1 / (4 h)`` with
    ``h = exp(|x|) / 2`` (:func:`exp_f32`'s reduction, scaled by ``2**(n - 1)``: no overflow
    before cosh's own, at about 89.42). Within 1.5 ulps (checked against float64 in the
    tests); ``cosh(+-inf) = inf``, NaN stays NaN. Arguments as for :func:`exp_f32`.

    >>> text = example(lambda b, x, call: cosh_f32(b, x, call))
    >>> "coshf" in text, "llvm.roundeven.f32" in text
    (False, True)
    """
    o = _Ops(b, x.type, call, fused)
    h = _half_exp(o, o.fabs(x), scalef)
    r = b.fadd(h, b.fdiv(o.c(0.25), h))
    return b.select(b.fcmp_unordered("uno", x, x), x, r)


def sinh_f32(b: ir.IRBuilder, x: ir.Value, call: Callable[[str, list], ir.Value], fused: bool = False,
             scalef: tuple = ()) -> ir.Value:
    """``sinh(x)`` for a float32 (or ``<n x float>``) value: an odd polynomial below 1,
    ``h - 1 / (4 h)`` above it (``h = exp(|x|) / 2`` as in :func:`cosh_f32`) with the sign of
    ``x``. Within 2 ulps (checked against float64 in the tests); ``sinh(+-inf) = +-inf``,
    ``sinh(-0) = -0``, NaN stays NaN. Arguments as for :func:`exp_f32`.

    >>> text = example(lambda b, x, call: sinh_f32(b, x, call))
    >>> "sinhf" in text, "llvm.copysign.f32" in text
    (False, True)
    """
    o = _Ops(b, x.type, call, fused)
    a = o.fabs(x)
    z = b.fmul(a, a)
    small = o.madd(b.fmul(a, z), o.poly(z, _SINH_POLY), a)
    h = _half_exp(o, a, scalef)
    large = b.fsub(h, b.fdiv(o.c(0.25), h))
    r = b.select(b.fcmp_ordered("<", a, o.c(1.0)), small, large)
    return b.select(b.fcmp_unordered("uno", x, x), x, o.copysign(r, x))


#: ``asin(t) = t + t z P(z)``, ``z = t**2``, for ``|t| <= 1/2`` (a relative fit: 2.8e-10, evaluated
#: in float64 here); above 1/2, ``asin(a) = pi/2 - 2 asin(sqrt((1 - a) / 2))``
_ASIN_POLY = (0.037515988223594025, 0.014438961482256596, 0.03180761531589324, 0.04451696884750425,
              0.0750050410416041, 0.16666659992859234)


def asin_acos_f32(b: ir.IRBuilder, x: ir.Value, cosine: bool, call: Callable[[str, list], ir.Value]) -> ir.Value:
    """``asin(x)`` (``acos(x)`` where ``cosine``) for a float32 (or ``<n x float>``) value,
    computed in float64 and rounded once (within 1 ulp, checked against float64 in the
    tests; ``1 - a`` is exact and the square root far more precise than float32): with
    ``a = |x|``, ``p = asin(a)`` by its polynomial up to 1/2 and ``p = asin(sqrt((1 - a) /
    2))`` above it, then ``asin(x) = +-p`` or ``+-(pi/2 - 2p)``, ``acos(x) = pi/2 - asin(x)``
    or ``2p`` (``x > 1/2``) or ``pi - 2p`` (``x < -1/2``). NaN outside [-1, 1] and for NaN,
    ``asin(-0) = -0``. ``call`` as for :func:`sincos_f32`.

    >>> text = example(lambda b, x, call: asin_acos_f32(b, x, True, call))
    >>> "acosf" in text, "llvm.sqrt.f64" in text
    (False, True)
    """
    d = _Ops.float64(b, x.type, call)
    xd = b.fpext(x, d.t)
    a = d.fabs(xd)
    big = b.fcmp_ordered(">", a, d.c(0.5))
    z = b.select(big, b.fmul(b.fsub(d.c(1.0), a), d.c(0.5)), b.fmul(a, a))    # > 1: sqrt gives NaN
    u = b.select(big, call("llvm.sqrt", [z]), a)
    p = d.madd(b.fmul(u, z), d.poly(z, _ASIN_POLY), u)
    two_p = b.fadd(p, p)
    if not cosine:
        r = d.copysign(b.select(big, b.fsub(d.c(math.pi / 2), two_p), p), xd)
    else:
        side = b.select(b.fcmp_ordered(">", xd, d.c(0.0)), two_p, b.fsub(d.c(math.pi), two_p))
        r = b.select(big, side, b.fsub(d.c(math.pi / 2), d.copysign(p, xd)))
    return b.fptrunc(r, x.type)


def atan2_f32(b: ir.IRBuilder, y: ir.Value, x: ir.Value, call: Callable[[str, list], ir.Value]) -> ir.Value:
    """``atan2(y, x)`` for float32 (or ``<n x float>``) values, in float64 and rounded once
    (within 1 ulp, checked against float64 in the tests): ``q = atan(|y| / |x|)`` by
    :func:`atan_f32`'s reduction and polynomial (one float64 division: ``|y| / |x|``, ``(|y| -
    |x|) / (|y| + |x|)`` or ``-|x| / |y|``, each exact to float64 rounding), ``pi - q`` where
    ``x`` is negative or -0, the sign of ``y``. C's special values: ``atan2(+-0, +0) = +-0``,
    ``atan2(+-0, -0) = +-pi``, ``atan2(+-inf, +-inf) = +-pi/4`` or ``+-3 pi/4``, NaN for NaN.
    ``call`` as for :func:`sincos_f32`.

    >>> text = example(lambda b, y, x, call: atan2_f32(b, y, x, call), arguments=2)
    >>> "atan2f" in text, text.count("fdiv double")
    (False, 1)
    """
    d = _Ops.float64(b, y.type, call)
    yd, xd = b.fpext(y, d.t), b.fpext(x, d.t)
    ay, ax = d.fabs(yd), d.fabs(xd)
    big = b.fcmp_ordered(">", ay, b.fmul(ax, d.c(_TAN_3PI_8)))
    mid = b.fcmp_ordered(">", ay, b.fmul(ax, d.c(_TAN_3PI_16)))
    num = b.select(big, b.fneg(ax), b.select(mid, b.fsub(ay, ax), ay))
    den = b.select(big, ay, b.select(mid, b.fadd(ay, ax), ax))
    u = b.fdiv(num, den)
    z = b.fmul(u, u)
    q = d.madd(b.fmul(u, z), d.poly(z, _ATAN_POLY), u)
    q = b.fadd(b.select(big, d.c(math.pi / 2), b.select(mid, d.c(math.pi / 4), d.c(0.0))), q)
    # 0 / 0 and inf / inf: the angle of the axis or the diagonal
    q = b.select(b.fcmp_ordered("==", ay, ax), b.select(b.fcmp_ordered("==", ax, d.c(0.0)), d.c(0.0),
                                                         d.c(math.pi / 4)), q)
    west = b.icmp_signed("<", b.bitcast(x, d.it), d.i(0))      # x < 0 or x = -0
    q = b.select(west, b.fsub(d.c(math.pi), q), q)
    return b.fptrunc(d.copysign(q, yd), y.type)


#: ``log(m) = 2 s (1 + z P(z))``, ``s = (m - 1) / (m + 1)``, ``z = s**2 <= 0.0295`` (the series
#: of ``atanh``: the first term left out is below 2e-12 of the result)
_LOG_ATANH_POLY = tuple(1 / (2 * k + 1) for k in range(6, 0, -1))
#: ``exp(u)`` for ``|u| <= ln(2) / 2`` by its Taylor polynomial (the first term left out: 2.2e-13)
_EXP_TAYLOR = tuple(1 / math.factorial(k) for k in range(10, -1, -1))
#: ``2**w`` for ``|w|`` past this is 0 or infinite in float32 (and exact in float64's range)
_POW_W_LIMIT = 200.0


def pow_f32(b: ir.IRBuilder, x: ir.Value, y: ir.Value, call: Callable[[str, list], ir.Value]) -> ir.Value:
    """``pow(x, y)`` for float32 (or ``<n x float>``) values, in float64 and rounded once
    (within 1 ulp, checked against float64 in the tests): ``2**(y log2|x|)`` with ``log2|x|``
    from the exponent and a series in ``(m - 1) / (m + 1)`` of the mantissa ``m`` (one
    float64 division), ``2**w`` by a polynomial and the exponent's bits, the sign of ``x`` for
    an odd integer ``y``. C's special values: ``pow(x, 0) = pow(1, y) = 1`` (NaN included),
    ``pow(-1, +-inf) = 1``, NaN for a finite negative ``x`` and a ``y`` that is not an integer,
    ``pow(+-0, y)`` and ``pow(+-inf, y)`` zero or infinite, signed for an odd integer ``y``.
    ``call`` as for :func:`sincos_f32`.

    >>> text = example(lambda b, x, y, call: pow_f32(b, x, y, call), arguments=2)
    >>> "powf" in text, text.count("fdiv double")
    (False, 1)
    """
    d = _Ops.float64(b, x.type, call)
    dt = d.t
    lt = ir.VectorType(I64, dt.count) if isinstance(dt, ir.VectorType) else I64
    ll = lambda v: splat_const(lt, v)  # noqa: E731
    xd, yd = b.fpext(x, dt), b.fpext(y, dt)
    ax = d.fabs(xd)
    # log2|x|: |x| = m 2**e with m in [sqrt(1/2), sqrt(2)) (float32 subnormals are normal here)
    bits = b.bitcast(ax, lt)
    e = b.sitofp(b.sub(b.lshr(bits, ll(52)), ll(1023)), dt)
    m = b.bitcast(b.or_(b.and_(bits, ll((1 << 52) - 1)), ll(1023 << 52)), dt)       # in [1, 2)
    high = b.fcmp_ordered(">", m, d.c(math.sqrt(2.0)))
    m = b.select(high, b.fmul(m, d.c(0.5)), m)
    e = b.select(high, b.fadd(e, d.c(1.0)), e)
    s = b.fdiv(b.fsub(m, d.c(1.0)), b.fadd(m, d.c(1.0)))
    z = b.fmul(s, s)
    log_m = b.fmul(d.madd(b.fmul(s, z), d.poly(z, _LOG_ATANH_POLY), s), d.c(2.0))
    log2x = d.madd(log_m, d.c(1 / math.log(2)), e)
    log2x = b.select(b.fcmp_ordered("==", ax, d.c(0.0)), d.c(float("-inf")), log2x)
    log2x = b.select(b.fcmp_ordered("==", ax, d.c(float("inf"))), d.c(float("inf")), log2x)
    # 2**w, w clamped where float32 is 0 or infinite (inf * 0 gives NaN: replaced below)
    w = b.fmul(yd, log2x)
    w = b.select(b.fcmp_ordered("<", w, d.c(_POW_W_LIMIT)), w, d.c(_POW_W_LIMIT))
    w = b.select(b.fcmp_ordered(">", w, d.c(-_POW_W_LIMIT)), w, d.c(-_POW_W_LIMIT))
    n = call("llvm.roundeven", [w])
    p = d.poly(b.fmul(b.fsub(w, n), d.c(math.log(2))), _EXP_TAYLOR)
    scale = b.bitcast(b.shl(b.add(b.fptosi(n, lt), ll(1023)), ll(52)), dt)
    r = b.fmul(p, scale)
    # the sign, and the special values
    integer = b.fcmp_ordered("==", yd, call("llvm.trunc", [yd]))
    half = b.fmul(yd, d.c(0.5))
    odd = b.and_(integer, b.fcmp_ordered("!=", half, call("llvm.trunc", [half])))
    west = b.icmp_signed("<", b.bitcast(xd, lt), ll(0))                          # x < 0 or x = -0
    r = b.select(b.and_(west, odd), b.fneg(r), r)
    finite_negative = b.and_(b.fcmp_ordered("<", xd, d.c(0.0)), b.fcmp_ordered("!=", ax, d.c(float("inf"))))
    r = b.select(b.and_(finite_negative, b.not_(integer)), d.c(float("nan")), r)
    r = b.select(b.and_(b.fcmp_ordered("==", xd, d.c(-1.0)), b.fcmp_ordered("==", d.fabs(yd), d.c(float("inf")))),
                 d.c(1.0), r)
    r = b.select(b.fcmp_unordered("uno", xd, yd), d.c(float("nan")), r)
    r = b.select(b.or_(b.fcmp_ordered("==", yd, d.c(0.0)), b.fcmp_ordered("==", xd, d.c(1.0))), d.c(1.0), r)
    return b.fptrunc(r, x.type)
