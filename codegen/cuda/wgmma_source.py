"""CUDA C for Hopper's warpgroup MMA, generated from the model of :mod:`codegen.cuda.wgmma`.

:func:`wgmma_function` is the device function of one ``wgmma.mma_async.m64nNk16`` (the
accumulators updated in place); ``tc_wgmma`` (:mod:`codegen.cuda.helpers`) holds the
fences, the commit and wait, and the descriptor of an unswizzled operand.
:func:`warpgroup_tile_source` is a one-warpgroup test kernel: it stages a 64 x 16 A and a
16 x N B into shared memory in the canonical layouts (the offsets printed from
:func:`codegen.cuda.wgmma.canonical_offset`), multiplies, and writes D through the
accumulator layout (:func:`codegen.cuda.wgmma.acc_coord`), so a GPU checks the model.

>>> name, src = wgmma_function(64, "f16", True)
>>> name
'tc_wgmma_m64n64k16_f16_tn'
>>> "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16" in src
True
>>> name, src = wgmma_function(256, "tf32")
>>> name, "m64n256k8.f32.tf32.tf32" in src
('tc_wgmma_m64n256k8_tf32_tt', True)
>>> "fence.proxy.async.shared::cta" in warpgroup_tile_source(16)
True
"""
from __future__ import annotations

from .wgmma import WGMMA_DTYPE_K, WGMMA_K, acc_values, tile_offsets

__all__ = ["WGMMA_GUARD", "wgmma_function", "warpgroup_tile_source", "canonical_offset_c", "acc_coord_c"]

#: the preprocessor condition under which wgmma exists (sm_90a: arch-specific features)
WGMMA_GUARD = "defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)"


def wgmma_function(n: int, dtype: str = "f16", trans_b: bool = False) -> tuple[str, str]:
    """``(name, source)`` of ``void name(float* d, unsigned long long desc_a, unsigned long long
    desc_b)``: ``d[0 .. n/2) += A * B`` for one warpgroup (A K-major; B MN-major with
    ``trans_b``, else K-major), guarded by :data:`WGMMA_GUARD`. ``dtype``: ``"f16"``,
    ``"bf16"`` (k 16) or ``"tf32"`` (k 8, both operands K-major: the instruction has no
    transpose operands)."""
    values = acc_values(n)
    if dtype not in WGMMA_DTYPE_K:
        raise ValueError(f"wgmma operands must be 'f16', 'bf16' or 'tf32', got {dtype!r}")
    if dtype == "tf32" and trans_b:
        raise ValueError("the tf32 wgmma reads B K-major only (trans_b=False)")
    k = WGMMA_DTYPE_K[dtype]
    name = f"tc_wgmma_m64n{n}k{k}_{dtype}_{'tn' if trans_b else 'tt'}"
    regs = ", ".join(f"%{i}" for i in range(values))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(values))
    # scale-d 1, scale-a 1, scale-b 1, then (16-bit types only) transpose-a 0 and transpose-b
    imms = "1, 1, 1" if dtype == "tf32" else f"1, 1, 1, 0, {int(trans_b)}"
    src = (f"#if {WGMMA_GUARD}\n"
           f"__device__ __forceinline__ void {name}(float* d, unsigned long long desc_a, "
           f"unsigned long long desc_b) {{\n"
           f'  asm volatile("wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{dtype}.{dtype} '
           f'{{{regs}}}, %{values}, %{values + 1}, {imms};\\n"\n'
           f'               : {outs}\n               : "l"(desc_a), "l"(desc_b));\n}}\n#endif')
    return name, src


def canonical_offset_c(major: str, row: str, col: str, lbo: int, sbo: int) -> str:
    """The C expression of :func:`codegen.cuda.wgmma.canonical_offset` (16-bit elements, in
    elements rather than bytes) for unsigned ``row``/``col`` expressions.

    >>> canonical_offset_c("K", "r", "k", 128, 256)
    '((r) % 8) * 8 + ((r) / 8) * 128 + ((k) % 8) + ((k) / 8) * 64'
    """
    inner, outer = (sbo, lbo) if major == "K" else (lbo, sbo)
    return (f"(({row}) % 8) * 8 + (({row}) / 8) * {inner // 2} + (({col}) % 8) + "
            f"(({col}) / 8) * {outer // 2}")


def acc_coord_c(thread: str, v: int) -> tuple[str, str]:
    """C expressions of :func:`codegen.cuda.wgmma.acc_coord` for a constant value ``v``.

    >>> acc_coord_c("t", 6)
    ('(t / 32) * 16 + (t % 32) / 4 + 8', '8 + ((t % 32) % 4) * 2')
    """
    row = f"({thread} / 32) * 16 + ({thread} % 32) / 4"
    col = f"(({thread} % 32) % 4) * 2"
    r0, c0 = 8 * ((v // 2) % 2), 8 * (v // 4) + v % 2
    return (f"{row} + {r0}" if r0 else row), (f"{c0} + {col}" if c0 else col)


def warpgroup_tile_source(n: int, dtype: str = "f16", trans_b: bool = True) -> str:
    """CUDA C of ``wgmma_tile_kernel(A, B, D)`` for one warpgroup (128 threads): ``D(64 x n) =
    A(64 x 16) * B`` with A, B dense row-major 16-bit arrays (B 16 x n with ``trans_b``, else
    n x 16) and D float32 row-major."""
    from .helpers import HELPERS

    fn, fn_src = wgmma_function(n, dtype, trans_b)
    a_lbo, a_sbo = tile_offsets("K", 64, WGMMA_K)
    b_major = "MN" if trans_b else "K"
    b_lbo, b_sbo = tile_offsets(b_major, WGMMA_K, n) if trans_b else tile_offsets("K", n, WGMMA_K)
    b_rc = ("i / %d" % n, "i %% %d" % n) if trans_b else ("i / 16", "i % 16")
    b_at = canonical_offset_c(b_major, *b_rc, b_lbo, b_sbo) if trans_b else \
        canonical_offset_c("K", *b_rc, b_lbo, b_sbo)
    stores = "\n".join(f"  D[({r}) * {n} + {c}] = d[{v}];" for v in range(acc_values(n))
                       for r, c in [acc_coord_c("t", v)])
    return "\n".join([
        HELPERS["tc_wgmma"][1], fn_src,
        f'extern "C" __global__ void __launch_bounds__(128) wgmma_tile_kernel(const unsigned short* __restrict__ A, '
        f"const unsigned short* __restrict__ B, float* __restrict__ D) {{",
        f"  __shared__ __align__(128) unsigned short sA[{64 * WGMMA_K}];",
        f"  __shared__ __align__(128) unsigned short sB[{WGMMA_K * n}];",
        "  const unsigned t = threadIdx.x;",
        f"  for (unsigned i = t; i < {64 * WGMMA_K}; i += 128) "
        f"sA[{canonical_offset_c('K', 'i / 16', 'i % 16', a_lbo, a_sbo)}] = A[i];",
        f"  for (unsigned i = t; i < {WGMMA_K * n}; i += 128) sB[{b_at}] = B[i];",
        f"  float d[{acc_values(n)}];",
        f"  for (int v = 0; v < {acc_values(n)}; ++v) d[v] = 0.0f;",
        f"#if {WGMMA_GUARD}",
        "  tc_fence_proxy_async();",
        "  __syncthreads();",
        "  tc_wgmma_fence();",
        f"  {fn}(d, tc_wgmma_desc(sA, {a_lbo}, {a_sbo}), tc_wgmma_desc(sB, {b_lbo}, {b_sbo}));",
        "  tc_wgmma_commit();",
        "  tc_wgmma_wait<0>();",
        "#endif",
        stores, "}", ""])
