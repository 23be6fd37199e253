"""The warp MMA fragment layouts against the PTX ISA, the CPU model of mma.sync and ldmatrix
against numpy, and the generated CUDA C (its lane index math run on the CPU model; compiled
with nvcc for sm_80 and sm_90 where nvcc is installed)."""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from codegen.cuda import compile as cuda_compile, nvcc_available
from codegen.cuda.mma import (MMA_SPECS, WARP, Swizzle, gather, ldmatrix, ldmatrix_result_layout,
                              ldmatrix_row_address, ldmatrix_wavefronts, mma_fragments, mma_spec,
                              ptx_fragment_coord, round_operand, scatter, warp_mma)
from codegen.cuda.mma_source import kernel_name, layout_c_expr, split_rows_cols, warp_tile_source
from te.layout import Layout
from te.lowprec import round_to_tf32

SPECS = sorted(MMA_SPECS)
OPERANDS = ("A", "B", "C")


def _frag(spec, op):
    return {"A": spec.a, "B": spec.b, "C": spec.c}[op]


@pytest.mark.parametrize("key", SPECS)
@pytest.mark.parametrize("op", OPERANDS)
def test_every_fragment_is_a_bijection_of_lanes_values_and_elements(key, op):
    frag = _frag(MMA_SPECS[key], op)
    t = frag.table().reshape(-1, 2)
    rows, cols = frag.shape
    assert len(t) == rows * cols == WARP * frag.values
    assert len({tuple(rc) for rc in t}) == rows * cols
    assert t[:, 0].min() == 0 and t[:, 0].max() == rows - 1
    assert t[:, 1].min() == 0 and t[:, 1].max() == cols - 1
    for lane in range(WARP):
        for v in range(frag.values):
            assert frag.owner(*frag.coord(lane, v)) == (lane, v)


@pytest.mark.parametrize("key", SPECS)
@pytest.mark.parametrize("op", OPERANDS)
def test_cute_layouts_agree_with_the_ptx_isa_formulas(key, op):
    frag = _frag(MMA_SPECS[key], op)
    for lane in range(WARP):
        for i in range(frag.values):
            assert frag.coord(lane, i) == ptx_fragment_coord(*key, op, lane, i), (lane, i)


def test_cute_layouts_print_as_cutlass_mma_traits():
    k16, tf32 = mma_spec("m16n8k16", "f16"), mma_spec("m16n8k8", "tf32")
    assert repr(k16.a.tv) == "((4,8),(2,2,2)):((32,1),(16,8,128))"
    assert repr(k16.b.tv) == "((4,8),(2,2)):((16,1),(8,64))"
    assert repr(k16.c.tv) == "((4,8),(2,2)):((32,1),(16,8))"       # SM80_16x8_Row
    assert repr(tf32.a.tv) == "((4,8),(2,2)):((16,1),(8,64))"
    assert repr(tf32.b.tv) == "((4,8),2):((8,1),32)"
    assert mma_spec("m16n8k16", "bf16").a.tv == k16.a.tv


def test_documented_lanes_of_the_ptx_isa_tables():
    s = mma_spec("m16n8k16", "f16")
    # lane 0: a0,a1 = A[0][0..1], a2,a3 = A[8][0..1], a4,a5 = A[0][8..9], a6,a7 = A[8][8..9]
    assert [s.a.coord(0, i) for i in range(8)] == [(0, 0), (0, 1), (8, 0), (8, 1),
                                                   (0, 8), (0, 9), (8, 8), (8, 9)]
    # lane 7 (group 1, thread 3): a0 = A[1][6], a7 = A[9][15]
    assert s.a.coord(7, 0) == (1, 6) and s.a.coord(7, 7) == (9, 15)
    # B: lane 0 b0,b1 = B[0..1][0], b2,b3 = B[8..9][0]; lane 31: b3 = B[15][7]
    assert [s.b.coord(0, i) for i in range(4)] == [(0, 0), (1, 0), (8, 0), (9, 0)]
    assert s.b.coord(31, 3) == (15, 7)
    # C/D: lane 0 c0,c1 = C[0][0..1], c2,c3 = C[8][0..1]; lane 5: c0 = C[1][2]
    assert [s.c.coord(0, i) for i in range(4)] == [(0, 0), (0, 1), (8, 0), (8, 1)]
    assert s.c.coord(5, 0) == (1, 2)
    t = mma_spec("m16n8k8", "tf32")
    # tf32 lane 0: a0 = A[0][0], a1 = A[8][0], a2 = A[0][4], a3 = A[8][4]; b0 = B[0][0], b1 = B[4][0]
    assert [t.a.coord(0, i) for i in range(4)] == [(0, 0), (8, 0), (0, 4), (8, 4)]
    assert [t.b.coord(0, i) for i in range(2)] == [(0, 0), (4, 0)]
    assert t.a.coord(6, 3) == (9, 6)


@pytest.mark.parametrize("key", SPECS)
@pytest.mark.parametrize("op", OPERANDS)
def test_scatter_and_gather_are_inverse(key, op):
    frag = _frag(MMA_SPECS[key], op)
    m = np.arange(frag.shape[0] * frag.shape[1]).reshape(frag.shape)
    regs = scatter(frag, m)
    assert regs.shape == (WARP, frag.values)
    np.testing.assert_array_equal(gather(frag, regs), m)


def _reference_round(x, dtype):
    """Rounding through ml_dtypes / numpy, independent of te.lowprec's bit manipulation."""
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "bf16":
        return x.astype(ml_dtypes.bfloat16).astype(np.float32)
    return round_to_tf32(x.astype(np.float32))


@pytest.mark.parametrize("key", SPECS)
def test_warp_mma_equals_numpy_matmul(key):
    shape, dtype = key
    spec = mma_spec(shape, dtype)
    rng = np.random.default_rng(sum(map(ord, shape + dtype)))
    A = rng.standard_normal((spec.m, spec.k)).astype(np.float32)
    B = rng.standard_normal((spec.k, spec.n)).astype(np.float32)
    C = rng.standard_normal((spec.m, spec.n)).astype(np.float32)
    Ar, Br = _reference_round(A, dtype), _reference_round(B, dtype)
    np.testing.assert_array_equal(round_operand(A, dtype), Ar)
    D = warp_mma(A, B, C, shape, dtype)
    assert D.dtype == np.float32 and D.shape == (spec.m, spec.n)
    np.testing.assert_allclose(D, Ar @ Br + C, rtol=1e-5, atol=1e-5)
    exact = (Ar.astype(np.float64) @ Br.astype(np.float64) + C).astype(np.float32)
    np.testing.assert_array_equal(D, exact)
    # small integers: every format holds them exactly and every sum is exact
    Ai = rng.integers(-8, 9, (spec.m, spec.k)).astype(np.float32)
    Bi = rng.integers(-8, 9, (spec.k, spec.n)).astype(np.float32)
    Ci = rng.integers(-64, 65, (spec.m, spec.n)).astype(np.float32)
    np.testing.assert_array_equal(warp_mma(Ai, Bi, Ci, shape, dtype), Ai @ Bi + Ci)


def test_warp_mma_rounds_the_inputs_to_the_operand_format():
    A = np.full((16, 16), 1 + 2.0 ** -12, np.float32)      # 1.0 in f16, bf16
    B = np.zeros((16, 8), np.float32)
    B[0, 0] = 1.0
    assert warp_mma(A, B, np.zeros((16, 8)), "m16n8k16", "bf16")[3, 0] == 1.0
    assert warp_mma(A[:, :8], B[:8], np.zeros((16, 8)), "m16n8k8", "tf32")[3, 0] == 1.0


def test_model_refuses_wrong_shapes_and_variants():
    with pytest.raises(ValueError, match="operand A must be 16x16"):
        warp_mma(np.zeros((16, 8)), np.zeros((16, 8)), np.zeros((16, 8)))
    with pytest.raises(ValueError, match="expected one of m16n8k16/f16"):
        warp_mma(np.zeros((16, 16)), np.zeros((16, 8)), np.zeros((16, 8)), "m16n8k16", "f32")
    spec = mma_spec("m16n8k16", "f16")
    with pytest.raises(ValueError, match=r"A fragments must have shape \(32, 8\)"):
        mma_fragments(spec, np.zeros((32, 4)), np.zeros((32, 4)), np.zeros((32, 4)))


# ----------------------------------------------------------------------------------------
# ldmatrix
# ----------------------------------------------------------------------------------------

def _smem_tile(rows, cols, ld, base=1000):
    """A row-major tile of distinct 16-bit values at offset 0 with leading dimension ld."""
    smem = np.zeros(rows * ld, np.uint16)
    tile = (base + np.arange(rows * cols)).astype(np.uint16).reshape(rows, cols)
    smem.reshape(rows, ld)[:, :cols] = tile
    return smem, tile


def test_ldmatrix_result_layout_is_a_bijection_per_lane_and_register():
    for num in (1, 2, 4):
        for trans in (False, True):
            L = ldmatrix_result_layout(num, trans)
            assert sorted(L(i) for i in range(L.size)) == list(range(64 * num))


@pytest.mark.parametrize("ld", [16, 24, 64])
def test_ldmatrix_x4_gives_the_a_fragment(ld):
    spec = mma_spec("m16n8k16", "f16")
    smem, A = _smem_tile(16, 16, ld)
    addr = ldmatrix_row_address("A", ld)
    regs = ldmatrix(smem, [addr(l) for l in range(WARP)], 4)
    np.testing.assert_array_equal(regs.reshape(WARP, 8), scatter(spec.a, A))


@pytest.mark.parametrize("ld", [8, 16, 24])
def test_ldmatrix_x2_trans_gives_the_b_fragment_of_a_k_by_n_tile(ld):
    spec = mma_spec("m16n8k16", "bf16")
    smem, B = _smem_tile(16, 8, ld)
    addr = ldmatrix_row_address("B_kn", ld)
    regs = ldmatrix(smem, [addr(l) for l in range(WARP)], 2, trans=True)
    np.testing.assert_array_equal(regs.reshape(WARP, 4), scatter(spec.b, B))


@pytest.mark.parametrize("ld", [16, 24])
def test_ldmatrix_x2_gives_the_b_fragment_of_an_n_by_k_tile(ld):
    spec = mma_spec("m16n8k16", "f16")
    smem, Bt = _smem_tile(8, 16, ld)
    addr = ldmatrix_row_address("B_nk", ld)
    regs = ldmatrix(smem, [addr(l) for l in range(WARP)], 2)
    np.testing.assert_array_equal(regs.reshape(WARP, 4), scatter(spec.b, Bt.T))


@pytest.mark.parametrize("ld", [16, 24, 136])
def test_ldmatrix_x4_trans_gives_two_side_by_side_b_fragments_of_a_k_by_n_tile(ld):
    spec = mma_spec("m16n8k16", "f16")
    smem, B = _smem_tile(16, 16, ld)
    addr = ldmatrix_row_address("B_kn_pair", ld)
    regs = ldmatrix(smem, [addr(l) for l in range(WARP)], 4, trans=True).reshape(WARP, 8)
    np.testing.assert_array_equal(regs[:, :4], scatter(spec.b, B[:, :8]))
    np.testing.assert_array_equal(regs[:, 4:], scatter(spec.b, B[:, 8:]))


@pytest.mark.parametrize("ld", [16, 24, 72])
def test_ldmatrix_x4_gives_two_side_by_side_b_fragments_of_an_n_by_k_tile(ld):
    spec = mma_spec("m16n8k16", "bf16")
    smem, Bt = _smem_tile(16, 16, ld)
    addr = ldmatrix_row_address("B_nk_pair", ld)
    regs = ldmatrix(smem, [addr(l) for l in range(WARP)], 4).reshape(WARP, 8)
    np.testing.assert_array_equal(regs[:, :4], scatter(spec.b, Bt[:8].T))
    np.testing.assert_array_equal(regs[:, 4:], scatter(spec.b, Bt[8:].T))


def test_ldmatrix_refuses_misaligned_rows_and_bad_operands():
    smem = np.zeros(256, np.uint16)
    with pytest.raises(ValueError, match="lane 3: row address 4 must be a multiple of 8"):
        ldmatrix(smem, [0, 8, 16, 4] + [0] * 28, 1)
    with pytest.raises(ValueError, match="16-bit elements"):
        ldmatrix(np.zeros(64, np.float32), [0] * 32, 1)
    with pytest.raises(ValueError, match="multiple of 8 elements"):
        ldmatrix_row_address("A", 20)
    with pytest.raises(ValueError, match="1, 2 or 4"):
        ldmatrix_result_layout(3)


# ----------------------------------------------------------------------------------------
# generated CUDA C
# ----------------------------------------------------------------------------------------

def _eval_c(expr: str, **env) -> int:
    """Evaluate a generated unsigned C index expression (``/`` is integer division)."""
    assert re.fullmatch(r"[\w\s+*/%()]+", expr), expr
    return eval(expr.replace("/", "//"), {}, env)


@pytest.mark.parametrize("layout", [Layout((16, 2), (24, 8)), Layout(((4, 8), 2), ((8, 1), 32)),
                                    Layout((8, 2, 2), (16, 8, 0)), Layout((4, 8), (0, 1))])
def test_layout_c_expr_evaluates_to_the_layout(layout):
    expr = layout_c_expr(layout, "lane")
    assert [_eval_c(expr, lane=l) for l in range(layout.size)] == [layout(l) for l in range(layout.size)]


@pytest.mark.parametrize("key", SPECS)
@pytest.mark.parametrize("op", OPERANDS)
def test_split_rows_cols_reproduces_the_fragment(key, op):
    frag = _frag(MMA_SPECS[key], op)
    rows, cols = split_rows_cols(frag)
    for lane in range(WARP):
        for v in range(frag.values):
            r0, c0 = frag.coord(0, v)
            assert frag.coord(lane, v) == (rows(lane) + r0, cols(lane) + c0)


def _run_generated_on_model(dtype, b_storage, A, B, C):
    """Execute the generated warp function's data movement on the CPU model: the ldmatrix /
    element loads, the C loads and the D stores use the index expressions printed in the source."""
    src = warp_tile_source(dtype, b_storage)
    spec = mma_spec("m16n8k8" if dtype == "tf32" else "m16n8k16", dtype)
    lda, ldb = map(int, re.search(r"smem ld (\d+)\) \* B\(\w+, smem ld (\d+)\)", src).groups())
    b_tile = B if b_storage == "B_kn" else B.T
    if dtype == "tf32":
        sA, sB = np.zeros(16 * lda, np.float32), np.zeros(b_tile.shape[0] * ldb, np.float32)
    else:
        sA, sB = np.zeros(16 * lda, np.uint16), np.zeros(b_tile.shape[0] * ldb, np.uint16)
    sA.reshape(16, lda)[:, :A.shape[1]] = A.view(sA.dtype) if dtype != "tf32" else A
    sB.reshape(-1, ldb)[:, :b_tile.shape[1]] = (b_tile.view(sB.dtype) if dtype != "tf32" else b_tile)
    a = np.zeros((WARP, spec.a.values), np.float32)
    b = np.zeros((WARP, spec.b.values), np.float32)
    as_float = (lambda bits: bits.view(np.float16).astype(np.float32)) if dtype == "f16" else \
        (lambda bits: bits.view(ml_dtypes.bfloat16).astype(np.float32))
    if dtype == "tf32":
        for reg, smem, frag in (("a", sA, spec.a), ("b", sB, spec.b)):
            for v, expr in re.findall(rf"  {reg}\[(\d)\] = to_tf32\(s\w\[(.*)\]\);", src):
                for lane in range(WARP):
                    (a if reg == "a" else b)[lane, int(v)] = round_to_tf32(smem[_eval_c(expr, lane=lane)])
    else:
        for reg, smem, out in (("a", sA, a), ("b", sB, b)):
            (fn, expr), = re.findall(rf"  (ldmatrix_\w+)\({reg}, s\w \+ (.*)\);", src)
            num, trans = int(fn[len("ldmatrix_x")]), fn.endswith("_trans")
            regs = ldmatrix(smem, [_eval_c(expr, lane=l) for l in range(WARP)], num, trans)
            out[:] = as_float(regs.reshape(WARP, -1))
    c = np.zeros((WARP, 4), np.float32)
    for v, expr in re.findall(r"  c\[(\d)\] = C\[(.*)\];", src):
        for lane in range(WARP):
            c[lane, int(v)] = C.reshape(-1)[_eval_c(expr, lane=lane, ldc=8)]
    d = mma_fragments(spec, a, b, c)
    D = np.full(C.size, np.nan, np.float32)
    stores = re.findall(r"  D\[(.*)\] = d\[(\d)\];", src)
    assert len(stores) == 4
    for expr, v in stores:
        for lane in range(WARP):
            D[_eval_c(expr, lane=lane, ldc=8)] = d[lane, int(v)]
    return D.reshape(C.shape)


@pytest.mark.parametrize("dtype", ["f16", "bf16", "tf32"])
@pytest.mark.parametrize("b_storage", ["B_kn", "B_nk"])
def test_generated_index_math_computes_the_tile_on_the_model(dtype, b_storage):
    k = 8 if dtype == "tf32" else 16
    rng = np.random.default_rng(7)
    store = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "tf32": np.float32}[dtype]
    A = rng.standard_normal((16, k)).astype(store)
    B = rng.standard_normal((k, 8)).astype(store)
    C = rng.standard_normal((16, 8)).astype(np.float32)
    if dtype == "tf32":
        A, B = round_to_tf32(A), round_to_tf32(B)
    D = _run_generated_on_model(dtype, b_storage, A, B, C)
    expected = A.astype(np.float64) @ B.astype(np.float64) + C
    np.testing.assert_allclose(D, expected, rtol=1e-5, atol=1e-5)


def test_generator_refuses_unknown_storage_and_formats():
    with pytest.raises(ValueError, match="b_storage must be"):
        warp_tile_source("f16", "B_col")
    with pytest.raises(ValueError, match="no mma variant m16n8k16 with e4m3 inputs"):
        warp_tile_source("e4m3")


requires_nvcc = pytest.mark.skipif(not nvcc_available(), reason="nvcc not found")


@requires_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_generated_ptx_has_ldmatrix_and_mma(arch):
    ptx = cuda_compile.compile_ptx(warp_tile_source("f16", "B_kn"), arch)
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
    assert "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16" in ptx
    ptx = cuda_compile.compile_ptx(warp_tile_source("bf16", "B_nk"), arch)
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in ptx
    assert re.search(r"ldmatrix\.sync\.aligned\.m8n8\.x2\.shared\.b16", ptx)
    ptx = cuda_compile.compile_ptx(warp_tile_source("tf32", "B_kn"), arch)
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in ptx


@requires_nvcc
@pytest.mark.parametrize("dtype", ["f16", "bf16", "tf32"])
@pytest.mark.parametrize("b_storage", ["B_kn", "B_nk"])
def test_ptxas_compiles_the_tile_kernels_without_spills_for_sm80_sm90_sm90a(dtype, b_storage):
    reps = cuda_compile.ptxas_report(warp_tile_source(dtype, b_storage), ["sm_80", "sm_90", "sm_90a"])
    for arch, rep in reps.items():
        info = rep["kernels"][kernel_name(dtype, b_storage)]
        assert info["spill_stores"] == 0 and info["spill_loads"] == 0, (arch, info)
        assert info["stack_bytes"] == 0, (arch, info)
        assert 0 < info["registers"] <= 64, (arch, info)


@pytest.mark.parametrize("b_storage", ["B_kn", "B_nk"])
def test_generated_ldmatrix_addresses_are_bank_conflict_free(b_storage):
    src = warp_tile_source("f16", b_storage)
    for reg, num in (("a", 4), ("b", 2)):
        (expr,) = re.findall(rf"  ldmatrix_\w+\({reg}, s\w \+ (.*)\);", src)
        addrs = [_eval_c(expr, lane=l) for l in range(WARP)]
        assert ldmatrix_wavefronts(addrs, num) == num, (reg, expr)


def test_swizzled_tile_keeps_the_fragments_and_removes_bank_conflicts():
    spec, sw, ld = mma_spec("m16n8k16", "f16"), Swizzle(3, 3, 3), 64
    A = (np.arange(16 * 64) + 1).astype(np.uint16).reshape(16, 64)   # 128-byte rows, no padding
    plain = A.reshape(-1)
    swizzled = np.zeros_like(plain)
    swizzled[[sw(i) for i in range(plain.size)]] = plain
    for k0 in range(0, 64, 16):
        rows = [ldmatrix_row_address("A", ld)(l) + k0 for l in range(WARP)]
        assert ldmatrix_wavefronts(rows, 4) == 32                    # 8-way conflicts
        rows_sw = [sw(r) for r in rows]
        assert ldmatrix_wavefronts(rows_sw, 4) == 4
        regs = ldmatrix(swizzled, rows_sw, 4).reshape(WARP, 8)
        np.testing.assert_array_equal(regs, scatter(spec.a, A[:, k0:k0 + 16]))
        np.testing.assert_array_equal(regs, ldmatrix(plain, rows, 4).reshape(WARP, 8))
