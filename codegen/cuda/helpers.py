"""Device helper functions the CUDA emitter puts in front of the kernels it generates.

Each helper is a small ``__device__ __forceinline__`` function that gives one spec
operation its exact meaning on the GPU (wrapping integer arithmetic, floor division,
saturating float -> int casts, integer min/max, low-precision rounding).
Only the helpers a module uses are emitted, after the ones they depend on.

>>> h = HelperSet()
>>> h.need("tc_floordiv")
'tc_floordiv'
>>> "tc_floordiv" in h.source()
True

Names all start with ``tc_``; user names reaching the source are prefixed with ``v_``,
``b_`` or ``k``, so the two never collide.
"""
from __future__ import annotations

__all__ = ["HelperSet", "HELPERS", "LOWP_INFO"]

# name -> (dependencies, source)
HELPERS: dict[str, tuple[tuple[str, ...], str]] = {}


def _h(name: str, src: str, deps: tuple[str, ...] = ()) -> None:
    HELPERS[name] = (deps, src.strip("\n"))


_h("tc_wrap", r"""
// Two's complement wrapping arithmetic: signed overflow is undefined in C++, so the
// arithmetic is done on the unsigned type U and converted back (modular on CUDA).
template <typename T, typename U> __device__ __forceinline__ T tc_add(T a, T b) { return (T)((U)a + (U)b); }
template <typename T, typename U> __device__ __forceinline__ T tc_sub(T a, T b) { return (T)((U)a - (U)b); }
template <typename T, typename U> __device__ __forceinline__ T tc_mul(T a, T b) { return (T)((U)a * (U)b); }
""")

_h("tc_check_index", r"""
// An IndexCheck (loopnest.index_checks): a data-dependent index outside [0, n) stores the
// check's code (its buffer and dimension, CudaModuleSpec.index_checks) in the module's error
// flag, which the launcher reads after the kernels (IndexError), and uses element 0 instead, so the kernel stays inside its memory and the context stays usable
// (a __trap would fail the launch and every later call in the context).
__device__ unsigned int tc_index_error;
template <typename T> __device__ __forceinline__ T tc_check_index(T i, long long n, unsigned code) {
  if ((unsigned long long)(long long)i >= (unsigned long long)n) {
#ifdef TC_HOST_EMULATION
    tc_trap();
#endif
    tc_index_error = code;
    return (T)0;
  }
  return i;
}
""")


_h("tc_cp_async", r"""
// Asynchronous copies (codegen.cuda.async_copy, sm_80 and later): 16 bytes from global to
// shared memory through L2 (cp.async.cg), completed before the barrier that publishes them:
// all of them (tc_cp_async_wait_all), or all but the N newest committed groups
// (tc_cp_async_wait_group<N>, codegen.cuda.async_wait). The host emulation defers each copy
// until a wait completes it, so a wait that lets a copy the code reads run on gives wrong values.
#if defined(TC_HOST_EMULATION) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
#define TC_CP_ASYNC 1
#endif
#if defined(TC_HOST_EMULATION)
#include <vector>
struct tc_async_copy { void* dst; unsigned char bytes[16]; long long group; };
// per emulated thread (codegen.cuda.emulate runs a block's threads, at most 1024, as fibers of one OS thread)
static std::vector<tc_async_copy> tc_async_pending_of[1024];        // the copies in flight
static long long tc_async_committed_of[1024];                       // the groups committed so far
#define tc_async_pending tc_async_pending_of[tc_current]
#define tc_async_committed tc_async_committed_of[tc_current]
static void tc_async_thread_start(unsigned k) { tc_async_pending_of[k].clear(); tc_async_committed_of[k] = 0; }
static const int tc_async_hooked = (tc_on_thread_start = tc_async_thread_start, 0);
inline void tc_cp_async16(void* smem, const void* gmem) {
  tc_async_copy c;
  c.dst = smem;
  tc_note_read(0, gmem, 16);          // the race check (codegen.cuda.emulate)
  std::memcpy(c.bytes, gmem, 16);
  c.group = -1;     // not committed yet
  tc_async_pending.push_back(c);
}
inline void tc_cp_async_commit() {
  for (auto& c : tc_async_pending) if (c.group < 0) c.group = tc_async_committed;
  ++tc_async_committed;
}
inline void tc_cp_async_complete(long long before) {   // the copies of groups < before (all: -1)
  std::vector<tc_async_copy> rest;
  for (auto& c : tc_async_pending) {
    if (before < 0 || (c.group >= 0 && c.group < before)) {
      unsigned char old[16];
      std::memcpy(old, c.dst, 16);
      std::memcpy(c.dst, c.bytes, 16);
      tc_note_write(1, c.dst, 16, old);
    } else {
      rest.push_back(c);
    }
  }
  tc_async_pending.swap(rest);
}
inline void tc_cp_async_wait_all() { tc_cp_async_complete(-1); }
template <int N> inline void tc_cp_async_wait_group() { tc_cp_async_complete(tc_async_committed - N); }
#elif defined(TC_CP_ASYNC)
__device__ __forceinline__ void tc_cp_async16(void* smem, const void* gmem) {
  unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void tc_cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
__device__ __forceinline__ void tc_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void tc_cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}
#endif
""")


def _mma_fn(dt: str, shape: str) -> str:
    """``tc_mma_<dt>``: one warp's ``mma.sync.<shape>`` with ``dt`` operands (four A registers,
    two B registers) into four float32 accumulators updated in place."""
    return (f"__device__ __forceinline__ void tc_mma_{dt}(float& d0, float& d1, float& d2, float& d3, "
            f"const unsigned* a, const unsigned* b) {{\n"
            f"  asm volatile(\"mma.sync.aligned.{shape}.row.col.f32.{dt}.{dt}.f32 {{%0, %1, %2, %3}}, "
            f"{{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};\\n\"\n"
            f"               : \"+f\"(d0), \"+f\"(d1), \"+f\"(d2), \"+f\"(d3)\n"
            f"               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), "
            f"\"r\"(b[1]));\n}}")


def _mma_helpers() -> str:
    ld = []
    for num, trans in ((4, False), (4, True), (2, False), (2, True)):
        regs = ", ".join(f"%{i}" for i in range(num))
        outs = ", ".join(f'"=r"(r[{i}])' for i in range(num))
        ld.append(f"__device__ __forceinline__ void tc_ldmatrix_x{num}{'_trans' if trans else ''}(unsigned* r, "
                  f"const void* row) {{\n  asm volatile(\"ldmatrix.sync.aligned.m8n8.x{num}"
                  f"{'.trans' if trans else ''}.shared.b16 {{{regs}}}, [%{num}];\\n\"\n"
                  f"               : {outs} : \"r\"(tc_smem_u32(row)));\n}}")
    mma = [_mma_fn(dt, "m16n8k16") for dt in ("f16", "bf16")]
    mma.append("__device__ __forceinline__ unsigned tc_to_tf32(float x) {\n  unsigned r;\n"
               "  asm(\"cvt.rna.tf32.f32 %0, %1;\\n\" : \"=r\"(r) : \"f\"(x));\n  return r;\n}")
    mma.append(_mma_fn("tf32", "m16n8k8"))
    fp8 = [_mma_fn(dt, "m16n8k32") for dt in ("e4m3", "e5m2")]
    mma += ["#if __CUDA_ARCH__ >= 890   // float8 operands: Ada and later", *fp8, "#endif"]
    return "\n".join([
        "// Tensor cores (codegen.cuda.tensor_cores): ldmatrix loads of 8 x 8 16-bit tiles from shared",
        "// memory and the warp's m16n8k16 multiply-accumulate, float32 accumulators updated in place.",
        "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800",
        "__device__ __forceinline__ unsigned tc_smem_u32(const void* p) {",
        "  return static_cast<unsigned>(__cvta_generic_to_shared(p));",
        "}", *ld, *mma, "#endif"])


_h("tc_mma", _mma_helpers())


_h("tc_wgmma", r"""
// Hopper's warpgroup MMA (codegen.cuda.wgmma, sm_90a): the descriptor of a shared-memory
// operand (address, leading and stride byte offsets, each in 16-byte units, and the swizzle
// mode: 0 interleaved, 1 the 128-byte swizzle), the fence that orders the accumulators'
// register accesses before the asynchronous MMAs, the commit and wait of a group of them,
// and the proxy fence that makes what the threads stored in shared memory visible to the
// tensor cores' reads.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ unsigned long long tc_wgmma_desc(const void* p, unsigned lbo, unsigned sbo,
                                                            unsigned mode = 0) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  return (unsigned long long)((a & 0x3FFFF) >> 4) | ((unsigned long long)(lbo >> 4) << 16)
       | ((unsigned long long)(sbo >> 4) << 32) | ((unsigned long long)mode << 62);
}
__device__ __forceinline__ void tc_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void tc_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void tc_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}
__device__ __forceinline__ void tc_fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
#endif
""")


_h("tc_floordiv", r"""
// Floor division and remainder for signed integers (rounding toward minus infinity).
template <typename T> __device__ __forceinline__ T tc_floordiv(T a, T b) {
  T q = a / b, r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? (T)(q - 1) : q;
}
template <typename T> __device__ __forceinline__ T tc_floormod(T a, T b) {
  T r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? (T)(r + b) : r;
}
""")

_h("tc_floormodf", r"""
// Float floor remainder as the language defines it, a - floor(a / b) * b, each step rounded
// (no contraction into an fma, which could leave a residue of the wrong sign).
__device__ __forceinline__ float tc_floormodf(float a, float b) {
  return __fsub_rn(a, __fmul_rn(floorf(__fdiv_rn(a, b)), b));
}
__device__ __forceinline__ double tc_floormodf(double a, double b) {
  return __dsub_rn(a, __dmul_rn(floor(__ddiv_rn(a, b)), b));
}
""")

_h("tc_minmax", r"""
// Integer min/max (float maximum / minimum are compares and selects: the expand_float_min_max pass).
template <typename T> __device__ __forceinline__ T tc_min(T a, T b) { return b < a ? b : a; }
template <typename T> __device__ __forceinline__ T tc_max(T a, T b) { return b > a ? b : a; }
""")

_h("tc_abs", r"""
// |x| for signed integers; the minimum value wraps to itself.
template <typename T, typename U> __device__ __forceinline__ T tc_abs(T a) { return a < 0 ? (T)((U)0 - (U)a) : a; }
""")

_h("tc_f2i", r"""
// Float -> integer: truncate toward zero, saturate out-of-range values, NaN -> 0
// (the semantics of te.lowprec.float_to_int). lo and hi_excl are -2^(b-1) / 2^(b-1)
// (0 / 2^b unsigned), exact in float and double, so no conversion is out of range.
template <typename I, typename F> __device__ __forceinline__ I tc_f2i(F x, F lo, F hi_excl, I imin, I imax) {
  return x != x ? (I)0 : (x < lo ? imin : (x >= hi_excl ? imax : (I)x));
}
""")

_h("tc_bitcast", r"""
// The bits of x reinterpreted as a To of the same width (te.bitcast).
template <typename To, typename From> __device__ __forceinline__ To tc_bitcast(From x) {
  static_assert(sizeof(To) == sizeof(From), "bitcast needs types of one width");
  To r; memcpy(&r, &x, sizeof(To)); return r;
}
""")

_h("tc_sigmoid", r"""
__device__ __forceinline__ float tc_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ double tc_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
__device__ __forceinline__ float tc_sigmoid_fast(float x) { return __fdividef(1.0f, 1.0f + __expf(-x)); }
""")

_h("tc_f16", r"""
// float16: stored as __half, computed in float; every result is rounded to nearest-even.
// A NaN keeps its sign and leading payload bits and is quiet (te.lowprec), where CUDA's
// conversions would give the canonical NaN.
__device__ __forceinline__ float tc_f16_ld(__half x) {
  const unsigned h = __half_as_ushort(x);
  if ((h & 0x7c00u) == 0x7c00u && (h & 0x03ffu))
    return __uint_as_float(((h & 0x8000u) << 16) | 0x7fc00000u | ((h & 0x03ffu) << 13));
  return __half2float(x);
}
__device__ __forceinline__ __half tc_f16_st(float x) {
  if (x != x) {
    const unsigned u = __float_as_uint(x);
    return __ushort_as_half((unsigned short)(((u >> 16) & 0x8000u) | 0x7e00u | ((u >> 13) & 0x03ffu)));
  }
  return __float2half_rn(x);
}
__device__ __forceinline__ float tc_rnd_f16(float x) { return tc_f16_ld(tc_f16_st(x)); }
__device__ __forceinline__ float tc_rndd_f16(double x) {
  return x != x ? tc_rnd_f16((float)x) : __half2float(__double2half(x));
}
__device__ __forceinline__ float tc_rndll_f16(long long x) { return __half2float(__ll2half_rn(x)); }
__device__ __forceinline__ float tc_rndull_f16(unsigned long long x) { return __half2float(__ull2half_rn(x)); }
""")

_h("tc_bf16", r"""
// bfloat16: stored as __nv_bfloat16, computed in float; results rounded to nearest-even.
// A NaN keeps its sign and leading payload bits and is quiet (as float16's).
__device__ __forceinline__ float tc_bf16_ld(__nv_bfloat16 x) {
  return __uint_as_float((unsigned)__bfloat16_as_ushort(x) << 16);
}
__device__ __forceinline__ __nv_bfloat16 tc_bf16_st(float x) {
  if (x != x) return __ushort_as_bfloat16((unsigned short)((__float_as_uint(x) | 0x00400000u) >> 16));
  return __float2bfloat16_rn(x);
}
__device__ __forceinline__ float tc_rnd_bf16(float x) { return tc_bf16_ld(tc_bf16_st(x)); }
__device__ __forceinline__ float tc_rndd_bf16(double x) {
  return x != x ? tc_rnd_bf16((float)x) : __bfloat162float(__double2bfloat16(x));
}
__device__ __forceinline__ float tc_rndll_bf16(long long x) { return __bfloat162float(__ll2bfloat16_rn(x)); }
__device__ __forceinline__ float tc_rndull_bf16(unsigned long long x) { return __bfloat162float(__ull2bfloat16_rn(x)); }
""")

_h("tc_tf32", r"""
// tf32: stored as float with the low 13 mantissa bits zero; rounded to nearest-even by
// bit manipulation (cvt.rna.tf32 would round ties away). NaN stays a quiet NaN.
__device__ __forceinline__ float tc_tf32_ld(float x) { return x; }
__device__ __forceinline__ float tc_rnd_tf32(float x) {
  unsigned u = __float_as_uint(x);
  if ((u & 0x7f800000u) == 0x7f800000u)
    return (u & 0x007fffffu) ? __uint_as_float((u | 0x00400000u) & 0xffffe000u) : x;
  u += 0x0fffu + ((u >> 13) & 1u);
  return __uint_as_float(u & 0xffffe000u);
}
__device__ __forceinline__ float tc_tf32_st(float x) { return tc_rnd_tf32(x); }
__device__ __forceinline__ float tc_rndd_tf32(double x) {
  // round once from the double: keep 10 of its 52 mantissa bits (normal float range);
  // below the float32 normal range the value goes through float first.
  if (!(fabs(x) >= 1.1754943508222875e-38) || fabs(x) > 3.5e38) return tc_rnd_tf32((float)x);
  unsigned long long u = (unsigned long long)__double_as_longlong(x);
  u += 0x1ffffffffffull + ((u >> 42) & 1ull);
  return (float)__longlong_as_double((long long)(u & ~0x3ffffffffffull));
}
__device__ __forceinline__ float tc_rndll_tf32(long long x) { return tc_rndd_tf32((double)x); }
__device__ __forceinline__ float tc_rndull_tf32(unsigned long long x) { return tc_rndd_tf32((double)x); }
""")

for _k, _interp, _nanfix in (("e4m3", "__NV_E4M3", "0x7e"), ("e5m2", "__NV_E5M2", None)):
    if _nanfix:
        _nan = _nand = f"x != x ? (__nv_fp8_storage_t){_nanfix} : "
        _ld = f"__half(__nv_cvt_fp8_to_halfraw(x, {_interp}))"
    else:   # e5m2 is float16's top byte: a NaN keeps its sign and leading payload bit, quiet
        _nan = ("x != x ? (__nv_fp8_storage_t)(((__float_as_uint(x) >> 24) & 0x80u) | 0x7eu | "
                "((__float_as_uint(x) >> 21) & 1u)) : ")
        _nand = f"x != x ? tc_{_k}_st((float)x) : "
        _ld = "__ushort_as_half((unsigned short)(x << 8))"
    _h(f"tc_{_k}", rf"""
// float8 {_k}: stored as one byte, computed in float; conversions saturate to the largest
// finite value{' and NaN becomes +448 (e4m3 has no NaN)' if _nanfix else ''}.
__device__ __forceinline__ float tc_{_k}_ld(__nv_fp8_storage_t x) {{
  return tc_f16_ld({_ld});
}}
__device__ __forceinline__ __nv_fp8_storage_t tc_{_k}_st(float x) {{
  return {_nan}__nv_cvt_float_to_fp8(x, __NV_SATFINITE, {_interp});
}}
__device__ __forceinline__ __nv_fp8_storage_t tc_{_k}_std(double x) {{
  return {_nand}__nv_cvt_double_to_fp8(x, __NV_SATFINITE, {_interp});
}}
__device__ __forceinline__ float tc_rnd_{_k}(float x) {{ return tc_{_k}_ld(tc_{_k}_st(x)); }}
__device__ __forceinline__ float tc_rndd_{_k}(double x) {{ return tc_{_k}_ld(tc_{_k}_std(x)); }}
__device__ __forceinline__ float tc_rndll_{_k}(long long x) {{ return tc_rndd_{_k}((double)x); }}
__device__ __forceinline__ float tc_rndull_{_k}(unsigned long long x) {{ return tc_rndd_{_k}((double)x); }}
""", ("tc_f16",))

_h("tc_lanes", r"""
// One lane of a vector element (a CUDA vector type, a generated struct of lanes, or an array
// of either): the lanes of type E lie contiguously from the object's address.
template <typename E, typename V> __device__ __forceinline__ E tc_get(const V& v, int l) {
  return reinterpret_cast<const E*>(&v)[l];
}
template <typename E, typename V> __device__ __forceinline__ void tc_set(V& v, int l, E x) {
  reinterpret_cast<E*>(&v)[l] = x;
}
""")

#: low-precision kind -> (helper, short name, header, storage C type)
LOWP_INFO: dict[str, tuple[str, str, str | None, str]] = {
    "float16": ("tc_f16", "f16", "cuda_fp16.h", "__half"),
    "bfloat16": ("tc_bf16", "bf16", "cuda_bf16.h", "__nv_bfloat16"),
    "tf32": ("tc_tf32", "tf32", None, "float"),
    "float8_e4m3": ("tc_e4m3", "e4m3", "cuda_fp8.h", "__nv_fp8_storage_t"),
    "float8_e5m2": ("tc_e5m2", "e5m2", "cuda_fp8.h", "__nv_fp8_storage_t"),
}


class HelperSet:
    """The helpers (and headers) one CUDA module needs, in first-request order."""

    def __init__(self):
        self._names: list[str] = []
        self._headers: list[str] = []
        self._defined: dict[str, str] = {}

    def need(self, name: str) -> str:
        """Request helper ``name`` (and its dependencies); returns ``name``."""
        if name not in HELPERS:
            raise KeyError(f"unknown CUDA helper {name!r}")
        if name not in self._names:
            for d in HELPERS[name][0]:
                self.need(d)
            self._names.append(name)
        return name

    def lowp(self, dt) -> tuple[str, str, str | None, str]:
        """Request what the low-precision float dtype ``dt`` (or a vector of it) needs -- its
        load/store helpers and header -- and return its ``LOWP_INFO`` entry.

        >>> from te.dtypes import as_dtype
        >>> h = HelperSet()
        >>> h.lowp(as_dtype("float16x2"))
        ('tc_f16', 'f16', 'cuda_fp16.h', '__half')
        >>> h.headers
        ['cuda_fp16.h']
        """
        info = LOWP_INFO[dt.element.scalar_name]
        self.need(info[0])
        if info[2]:
            if info[2] == "cuda_fp8.h":
                self.header("cuda_fp16.h")
            self.header(info[2])
        return info

    def define(self, name: str, source: str) -> str:
        """Request a generated definition (a vector struct type): ``source`` is emitted once,
        after the headers and before the helpers; returns ``name``.

        >>> h = HelperSet()
        >>> h.define("tc_boolx4", "struct __align__(4) tc_boolx4 { bool v[4]; };")
        'tc_boolx4'
        >>> h.source().strip()
        'struct __align__(4) tc_boolx4 { bool v[4]; };'
        """
        self._defined.setdefault(name, source)
        return name

    def header(self, h: str) -> None:
        """Request ``#include <h>``."""
        if h not in self._headers:
            self._headers.append(h)

    @property
    def headers(self) -> list[str]:
        return list(self._headers)

    def snapshot(self) -> tuple[int, int, int]:
        return len(self._names), len(self._headers), len(self._defined)

    def source(self) -> str:
        """The ``#include`` lines and helper definitions, ready to precede the kernels."""
        lines = [f"#include <{h}>" for h in self._headers]
        if lines:
            lines.append("")
        if self._defined:
            lines.extend(self._defined.values())
            lines.append("")
        for n in self._names:
            lines.append(HELPERS[n][1])
            lines.append("")
        return "\n".join(lines)
