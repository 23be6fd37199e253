"""CUDA C for one warp's MMA tile, generated from the fragment layouts of :mod:`codegen.cuda.mma`.

Every lane-dependent index in the generated code (ldmatrix row addresses, accumulator loads
and stores, tf32 fragment loads) is printed from a CuTe layout by :func:`layout_c_expr`, so the
code and the CPU model of :mod:`codegen.cuda.mma` share one source of truth.

>>> src = warp_tile_source("f16", b_storage="B_kn")
>>> "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in src
True
>>> "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in src and ".x2.trans.shared.b16" in src
True

:func:`warp_tile_source` returns a device function ``<name>(sA, sB, C, D, ldc)`` (a warp
computes the 16 x 8 tile ``D = A(16 x 16) * B(16 x 8) + C`` with A and B in shared memory) and
a test kernel ``<name>_kernel(A, B, C, D)`` that stages A and B from global memory into
shared memory and calls it with one warp (``A``, ``B`` dense row-major; ``C``, ``D`` 16 x 8
float32 row-major).
"""
from __future__ import annotations

from typing import Tuple

from te.layout import Layout, flatten

from .mma import Fragment, ldmatrix_row_address, mma_spec, LDMATRIX_OPERANDS, WARP

__all__ = ["layout_c_expr", "split_rows_cols", "fragment_index", "warp_tile_source", "kernel_name", "conflict_free_ld"]


def layout_c_expr(layout: Layout, var: str) -> str:
    """The C expression of ``layout(var)`` for an unsigned 1-D index ``0 <= var < size``.

    >>> layout_c_expr(Layout((16, 2), (24, 8)), "lane")
    '(lane % 16) * 24 + (lane / 16) * 8'
    >>> layout_c_expr(Layout((4, 8), (0, 1)), "lane")
    '(lane / 4)'
    >>> layout_c_expr(Layout(1, 0), "lane")
    '0'
    """
    flat = flatten(layout)
    shapes = flat.shape if isinstance(flat.shape, tuple) else (flat.shape,)
    strides = flat.stride if isinstance(flat.stride, tuple) else (flat.stride,)
    terms = []
    below = 1
    for k, (s, d) in enumerate(zip(shapes, strides)):
        if s != 1 and d != 0:
            e = var if below == 1 else f"{var} / {below}"
            last = all(ss == 1 for ss in shapes[k + 1:])
            if not last:
                e = f"{e} % {s}"
            e = f"({e})"
            terms.append(e if d == 1 else f"{e} * {d}")
        below *= s
    return " + ".join(terms) if terms else "0"


def split_rows_cols(frag: Fragment) -> Tuple[Layout, Layout]:
    """``lane -> row`` and ``lane -> col`` layouts of a fragment's lane part, in PTX orientation.

    Each lane mode of the CuTe layout steps either rows or columns of the operand; value
    ``v`` then adds the constant ``frag.coord(0, v)``. ValueError if a mode mixes the two.

    >>> from codegen.cuda.mma import mma_spec
    >>> split_rows_cols(mma_spec("m16n8k16", "f16").c)
    ((4,8):(0,1), (4,8):(2,0))
    """
    lanes = flatten(frag.tv[0])
    rows0 = frag.cute_shape[0]
    xs, ys = [], []
    for s, d in zip(lanes.shape, lanes.stride):
        if d < rows0 and (s - 1) * d < rows0:
            xs.append(d), ys.append(0)
        elif d % rows0 == 0:
            xs.append(0), ys.append(d // rows0)
        else:
            raise ValueError(f"fragment {frag.operand}: lane mode {s}:{d} steps both rows and columns "
                             f"of the {rows0}-row CuTe matrix")
    rx, ry = Layout(lanes.shape, tuple(xs)), Layout(lanes.shape, tuple(ys))
    rows, cols = (ry, rx) if frag.transposed else (rx, ry)
    for lane in range(WARP):
        for v in range(frag.values):
            r0, c0 = frag.coord(0, v)
            if frag.coord(lane, v) != (rows(lane) + r0, cols(lane) + c0):
                raise ValueError(f"fragment {frag.operand}: value {v} of lane {lane} is not the lane "
                                 "offset plus the value offset")
    return rows, cols


def _plus(expr: str, k: int) -> str:
    return f"{expr} + {k}" if k else expr


def fragment_index(frag: Fragment, v: int, ld, lane: str = "lane", swap: bool = False) -> str:
    """C index of value ``v`` of ``lane`` in a row-major tile (column-major when ``swap``)."""
    rows, cols = split_rows_cols(frag)
    r0, c0 = frag.coord(0, v)
    r, c = _plus(layout_c_expr(rows, lane), r0), _plus(layout_c_expr(cols, lane), c0)
    if swap:
        r, c = c, r
    return f"({r}) * {ld} + {c}"


def kernel_name(dtype: str, b_storage: str) -> str:
    """Name of the test kernel that :func:`warp_tile_source` defines.

    >>> kernel_name("bf16", "B_nk")
    'warp_mma_bf16_B_nk_kernel'
    """
    return f"warp_mma_{dtype}_{b_storage}_kernel"


_HELPERS = r"""
__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
"""


def _ldmatrix_fn(num: int, trans: bool) -> str:
    regs = ", ".join(f"%{i}" for i in range(num))
    outs = ", ".join(f'"=r"(r[{i}])' for i in range(num))
    suffix = ".trans" if trans else ""
    return (f"__device__ __forceinline__ void ldmatrix_x{num}{'_trans' if trans else ''}"
            f"(unsigned* r, const void* row) {{\n"
            f'  asm volatile("ldmatrix.sync.aligned.m8n8.x{num}{suffix}.shared.b16 {{{regs}}}, [%{num}];\\n"\n'
            f'               : {outs} : "r"(smem_u32(row)));\n}}\n')


def _mma_fn(spec, fn: str) -> str:
    na, nb = spec.a_regs, spec.b_regs
    d = ", ".join(f"%{i}" for i in range(4))
    a = ", ".join(f"%{4 + i}" for i in range(na))
    b = ", ".join(f"%{4 + na + i}" for i in range(nb))
    c = ", ".join(f"%{4 + na + nb + i}" for i in range(4))
    outs = ", ".join(f'"=f"(d[{i}])' for i in range(4))
    ins = ", ".join([f'"r"(a[{i}])' for i in range(na)] + [f'"r"(b[{i}])' for i in range(nb)]
                    + [f'"f"(c[{i}])' for i in range(4)])
    return (f"__device__ __forceinline__ void {fn}(float* d, const unsigned* a, const unsigned* b, "
            f"const float* c) {{\n"
            f'  asm volatile("{spec.instruction} {{{d}}}, {{{a}}}, {{{b}}}, {{{c}}};\\n"\n'
            f"               : {outs}\n               : {ins});\n}}\n")


def conflict_free_ld(cols: int) -> int:
    """The smallest leading dimension (16-bit elements) >= ``cols`` whose rows are an odd number
    of 16-byte chunks: the 8 rows of an ldmatrix phase then occupy 8 distinct bank groups.

    >>> [conflict_free_ld(c) for c in (8, 16, 32)]
    [8, 24, 40]
    """
    ld = -(-cols // 8) * 8
    return ld if (ld // 8) % 2 else ld + 8


def warp_tile_source(dtype: str = "f16", b_storage: str = "B_kn", lda: int = 0, ldb: int = 0) -> str:
    """CUDA C of a warp's ``D = A * B + C`` tile and of its one-warp test kernel.

    ``dtype`` is ``"f16"``/``"bf16"`` (m16n8k16, fragments loaded with ldmatrix) or ``"tf32"``
    (m16n8k8, K = 8, fragments loaded element by element from the layouts and rounded with
    ``cvt.rna.tf32.f32``). ``b_storage`` is how B lies in shared memory: ``"B_kn"`` (K x N
    row-major) or ``"B_nk"`` (N x K row-major). ``lda``/``ldb`` are the shared-memory leading
    dimensions in elements (0: :func:`conflict_free_ld` of the row length).

    >>> src = warp_tile_source("tf32", "B_nk")
    >>> "cvt.rna.tf32.f32" in src and "m16n8k8.row.col.f32.tf32.tf32.f32" in src
    True
    >>> warp_tile_source("f16", "B_mn")
    Traceback (most recent call last):
    ...
    ValueError: b_storage must be 'B_kn' (K x N row-major) or 'B_nk' (N x K row-major), got 'B_mn'
    """
    spec = mma_spec("m16n8k8" if dtype == "tf32" else "m16n8k16", dtype)
    if b_storage not in ("B_kn", "B_nk"):
        raise ValueError(f"b_storage must be 'B_kn' (K x N row-major) or 'B_nk' (N x K row-major), "
                         f"got {b_storage!r}")
    m, n, k = spec.m, spec.n, spec.k
    b_rows, b_cols = (k, n) if b_storage == "B_kn" else (n, k)
    lda = lda or conflict_free_ld(k)
    ldb = ldb or conflict_free_ld(b_cols)
    elem = "float" if dtype == "tf32" else "unsigned short"
    name = kernel_name(dtype, b_storage)
    fn = name[: -len("_kernel")]
    mma_fn = f"mma_{spec.shape}_{dtype}"
    parts = [f"// Generated from the PTX fragment layouts ({spec.instruction}).\n", _HELPERS,
             _mma_fn(spec, mma_fn)]
    body = ["  const unsigned lane = threadIdx.x % 32;",
            f"  unsigned a[{spec.a_regs}], b[{spec.b_regs}];",
            "  float c[4], d[4];"]
    if dtype == "tf32":
        parts.append("__device__ __forceinline__ unsigned to_tf32(float x) {\n  unsigned r;\n"
                     '  asm("cvt.rna.tf32.f32 %0, %1;\\n" : "=r"(r) : "f"(x));\n  return r;\n}\n')
        for v in range(spec.a.values):
            body.append(f"  a[{v}] = to_tf32(sA[{fragment_index(spec.a, v, lda)}]);")
        for v in range(spec.b.values):
            idx = fragment_index(spec.b, v, ldb, swap=b_storage == "B_nk")
            body.append(f"  b[{v}] = to_tf32(sB[{idx}]);")
    else:
        for op, ld, reg in (("A", lda, "a"), (b_storage, ldb, "b")):
            num, trans, _, _ = LDMATRIX_OPERANDS[op]
            parts.append(_ldmatrix_fn(num, trans))
            src = "sA" if op == "A" else "sB"
            addr = layout_c_expr(ldmatrix_row_address(op, ld), "lane")
            body.append(f"  ldmatrix_x{num}{'_trans' if trans else ''}({reg}, {src} + {addr});")
    for v in range(spec.c.values):
        body.append(f"  c[{v}] = C[{fragment_index(spec.c, v, 'ldc')}];")
    body.append(f"  {mma_fn}(d, a, b, c);")
    for v in range(spec.c.values):
        body.append(f"  D[{fragment_index(spec.c, v, 'ldc')}] = d[{v}];")
    parts.append(f"// One warp: D({m}x{n}) = A({m}x{k}, smem ld {lda}) * B({b_storage}, smem ld {ldb}) + C.\n"
                 f"__device__ __forceinline__ void {fn}(const {elem}* sA, const {elem}* sB, "
                 f"const float* C, float* D, unsigned ldc) {{\n" + "\n".join(body) + "\n}\n")
    parts.append(
        f'extern "C" __global__ void __launch_bounds__(32) {name}(const {elem}* __restrict__ A, '
        f"const {elem}* __restrict__ B, const float* __restrict__ C, float* __restrict__ D) {{\n"
        f"  __shared__ __align__(16) {elem} sA[{m * lda}];\n"
        f"  __shared__ __align__(16) {elem} sB[{b_rows * ldb}];\n"
        f"  for (unsigned i = threadIdx.x; i < {m * k}; i += 32) sA[(i / {k}) * {lda} + i % {k}] = A[i];\n"
        f"  for (unsigned i = threadIdx.x; i < {b_rows * b_cols}; i += 32) "
        f"sB[(i / {b_cols}) * {ldb} + i % {b_cols}] = B[i];\n"
        f"  __syncwarp();\n"
        f"  {fn}(sA, sB, C, D, {n});\n}}\n")
    return "".join(parts)
