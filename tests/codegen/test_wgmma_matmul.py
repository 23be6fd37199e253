"""Hopper's warpgroup-MMA matmul tree (loopnest.transforms.gpu_wgmma): it runs on IREval and the
host emulation, the CUDA step cuda_tensor_cores recognises its nests and prints them as
wgmma.mma_async with descriptors that, on the CPU model of the instruction
(codegen.cuda.wgmma), compute what the nest says; what does not fit is refused. On a GPU,
tests/gpu/test_wgmma_matmul.py runs the kernels."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import BuildError, build
from codegen.cuda.compile import compile_ptx, nvcc_available
from codegen.cuda.emulate import host_compiler, run_on_host
from codegen.cuda.mma_matmul import mma_matmul_example, wgmma_matmul_example
from codegen.cuda.wgmma import descriptor, warpgroup_mma
from loopnest import LoopNest, ScheduleError
from loopnest.transforms.tensorize import _evaluate, _perfect_nest, _product_operands
from loopnest.transforms.tensorize_wgmma import why_not_a_wgmma
from te import Buffer, Reduce, Sum, cast, float32
from te.queries import free_vars

HAVE_NVCC = nvcc_available()
SMALL = dict(M=128, N=64, K=64, BN=64, BK=32, stages=2)
TF32 = dict(M=128, N=64, K=96, BN=64, BK=32, stages=2, dtype="float32", b_layout="nk")


@pytest.mark.parametrize("kw", [dict(SMALL), dict(M=64, N=64, K=64, BM=64, BN=64, BK=16, stages=1, b_layout="nk",
                                                      dtype="bfloat16"), TF32])
def test_the_thread_by_thread_nest_is_a_matmul_on_ireval(kw):
    ex = wgmma_matmul_example(**kw)
    arrays, expected = ex.make(np.random.default_rng(1))
    build(ex.nest, ex.args, target="ireval")(**arrays)
    np.testing.assert_allclose(arrays["C"], expected["C"], rtol=1e-4, atol=1e-3)


def test_cuda_prints_the_nest_as_wgmma_with_descriptors_for_sm90a():
    ex = wgmma_matmul_example(**SMALL)
    k = build(ex.nest, ex.args, target="cuda")
    assert k.module.plan.describe_tensor_cores().splitlines()[1] == (
        "  wgmma m64n64k16 f16: 2 A tile(s) (As, K-major), 2 B tile(s) (Bs, MN-major), 2 wgmma per nest")
    assert k.source.count("tc_wgmma_m64n64k16_f16_tn(&b_acc[0], ") == 2
    assert "tc_wgmma_desc(&b_As[" in k.source and "tc_wgmma_wait<0>();" in k.source
    assert "#else" in k.source            # plain per-thread loops for other GPUs and the host emulation
    # its tiles arrive by cp.async, which the barriers wait for: no async-proxy fence needed
    assert "tc_fence_proxy_async();" not in k.source and "tc_cp_async16(" in k.source


@pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not installed")
def test_the_kernel_compiles_for_sm90a_without_spills_and_plain_elsewhere():
    ex = wgmma_matmul_example(512, 512, 256, BM=128, BN=256, BK=64, stages=4)
    k = build(ex.nest, ex.args, target="cuda", max_shared_bytes=227 * 1024)
    rep = k.compile("sm_90")                     # built for sm_90a: the source needs it
    assert rep["arch"] == "sm_90a" and rep["spill_stores"] == 0 and rep["registers"] <= 255, rep
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16" in compile_ptx(k.source, "sm_90a")
    assert "wgmma.mma_async" not in compile_ptx(k.source, "sm_80")


def test_tf32_prints_k8_wgmmas_on_k_major_swizzled_tiles():
    ex = wgmma_matmul_example(**TF32)
    k = build(ex.nest, ex.args, target="cuda")
    assert k.module.plan.describe_tensor_cores().splitlines()[1] == (
        "  wgmma m64n64k8 tf32: 4 A tile(s) (As, K-major, 128-byte swizzle), 4 B tile(s) (Bs, K-major, 128-byte "
        "swizzle), 4 wgmma per nest")
    assert k.source.count("tc_wgmma_m64n64k8_tf32_tt(&b_acc[0], ") == 4
    assert "__align__(1024)" in k.source


@pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not installed")
def test_the_tf32_kernel_compiles_for_sm90a_without_spills():
    ex = wgmma_matmul_example(512, 512, 1024, dtype="float32", b_layout="nk", BM=128, BN=256, BK=32, stages=4)
    k = build(ex.nest, ex.args, target="cuda", max_shared_bytes=227 * 1024)
    rep = k.compile("sm_90")
    assert rep["arch"] == "sm_90a" and rep["spill_stores"] == 0 and rep["registers"] <= 255, rep
    assert "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32" in compile_ptx(k.source, "sm_90a")


@pytest.mark.skipif(not (HAVE_NVCC and host_compiler() is not None), reason="g++ or the CUDA headers not found")
@pytest.mark.parametrize("kw", [SMALL, TF32])
def test_host_emulation_runs_the_plain_per_thread_code(kw):
    ex = wgmma_matmul_example(**kw)
    arrays, expected = ex.make(np.random.default_rng(2))
    run_on_host(build(ex.nest, ex.args, target="cuda"), **arrays)
    np.testing.assert_allclose(arrays["C"], expected["C"], rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype,b_layout,tiles", [
    ("float16", "kn", dict(M=64, N=64, K=32, BN=64, BK=32)), ("float16", "nk", dict(M=64, N=64, K=32, BN=64, BK=32)),
    ("float16", "kn", dict(M=64, N=128, K=128, BN=128, BK=128)),
    ("float16", "nk", dict(M=64, N=128, K=128, BN=128, BK=128)),
    ("float32", "nk", dict(M=64, N=64, K=64, BN=64, BK=64))])
def test_the_printed_wgmmas_compute_what_the_nest_says_on_the_instruction_model(dtype, b_layout, tiles):
    """Each printed wgmma, run on the CPU model of the instruction (descriptors decoded against
    a random shared-memory image), gives every thread the sums the nest's loops compute: with
    interleaved core matrices (k-tiles of 32) and in 128-byte swizzled atoms (k-tiles of 128:
    two atoms along K, and for a K x N B two along N; tf32: k-tiles of 64, two atoms of 32
    along K)."""
    ex = wgmma_matmul_example(BM=64, stages=1, b_layout=b_layout, dtype=dtype, **tiles)
    k = build(ex.nest, ex.args, target="cuda")
    (m,) = k.module.plan.mma_by_kernel["k0_C"]
    loops = _perfect_nest(m.root)
    store = loops[-1].body.stmts[0]
    _, x, y = _product_operands(store, lambda buf, ix: ix[0])
    rng = np.random.default_rng(5)
    npdt = np.float16 if dtype == "float16" else np.float32        # small integers: exact in tf32
    size = np.dtype(npdt).itemsize
    a_elems = rng.integers(-4, 5, x.buffer.static_size()).astype(npdt)
    b_elems = rng.integers(-4, 5, y.buffer.static_size()).astype(npdt)
    b_base = size * a_elems.size + 1024
    smem = np.zeros(b_base + size * b_elems.size, np.uint8)
    smem[:size * a_elems.size] = a_elems.view(np.uint8)
    smem[b_base:] = b_elems.view(np.uint8)
    env0 = {id(v): np.int64(0) for v in free_vars([x.indices[0], y.indices[0]])}
    swizzled = tiles["BK"] >= 64
    assert m.mmas and (m.a_swizzle, m.b_swizzle) == ((128, 128) if swizzled else (0, 0))
    for t, (ai, bi, _) in enumerate(m.mmas):
        a0 = int(_evaluate(m.a_tiles[ai], env0))
        b0 = int(_evaluate(m.b_tiles[bi], env0))
        acc = warpgroup_mma(smem, descriptor(size * a0, m.a_lbo, m.a_sbo, m.a_swizzle),
                            descriptor(b_base + size * b0, m.b_lbo, m.b_sbo, m.b_swizzle),
                            np.zeros((128, m.n // 2), np.float32), m.n, m.dtype, m.b_major == "MN")
        grids = np.meshgrid(np.arange(4), np.arange(32), np.arange(m.n // 2), np.arange(m.k), indexing="ij")
        env = dict(env0)
        env.update({id(v): g for v, g in zip([m.warp, m.lane, loops[-2].var, loops[-1].var], grids)})
        env[id(loops[0].var)] = np.int64(t)
        prods = a_elems[_evaluate(x.indices[0], env)].astype(np.float64) * b_elems[_evaluate(y.indices[0], env)]
        sums = prods.sum(axis=-1).reshape(128, m.n // 2)              # thread = 32 * warp + lane
        np.testing.assert_array_equal(acc, sums)


def test_refusals_name_what_does_not_fit_and_leave_the_nest_unchanged():
    A, B = Buffer("A", (128, 64), "float16"), Buffer("B", (64, 96), "float16")
    C = Reduce("C", (128, 96), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (64,))
    nest = LoopNest([C])
    before = str(nest.root)
    with pytest.raises(ScheduleError, match=r"BN \(48\) a multiple of 32 up to 256"):
        nest.gpu_matmul(True, wgmma=True, BN=48, BK=32)
    with pytest.raises(ScheduleError, match=r"multiples of BM, BN, BK \(128, 64, 64\)"):
        nest.gpu_matmul(True, wgmma=True, BN=64)
    with pytest.raises(ScheduleError, match="needs tensor_cores"):
        nest.gpu_matmul(False, wgmma=True)
    with pytest.raises(ScheduleError, match=r"128-byte swizzle needs BK \(64\) and BN \(32\) to be multiples of 64"):
        nest.gpu_matmul(True, wgmma=True, BN=32, BK=64, swizzle=128)
    with pytest.raises(ScheduleError, match=r"swizzle must be 0 \(interleaved core matrices\) or 128 bytes, got 64"):
        nest.gpu_matmul(True, wgmma=True, BN=32, BK=64, swizzle=64)
    assert str(nest.root) == before and not nest.history
    F = Buffer("F", (128, 64), "float32")
    G = Buffer("G", (64, 64), "float32")
    H = Reduce("H", (128, 64), Sum(), lambda i, j, k: F[i, k] * G[k, j], (64,))
    with pytest.raises(ScheduleError, match=r"B must be N x K \(b_layout='nk'\)"):
        LoopNest([H]).gpu_matmul(True, wgmma=True, BN=64)
    T = Reduce("T", (128, 64), Sum(), lambda i, j, k: F[i, k] * G[j, k], (64,))
    with pytest.raises(ScheduleError, match="swizzled layout only"):
        LoopNest([T]).gpu_matmul(True, wgmma=True, BN=64, swizzle=0)
    G96 = Buffer("G96", (64, 96), "float32")
    T96 = Reduce("T96", (128, 64), Sum(), lambda i, j, k: Buffer("F96", (128, 96), "float32")[i, k] * G96[j, k],
                 (96,))
    with pytest.raises(ScheduleError, match=r"needs BK \(48\) to be multiples of 32$"):
        LoopNest([T96]).gpu_matmul(True, wgmma=True, BN=64, BK=48, stages=1)
    I = Buffer("I", (64, 64), "float16")
    with pytest.raises(ScheduleError, match="float16, bfloat16 or float32"):
        LoopNest([Reduce("U", (128, 64), Sum(), lambda i, j, k: F[i, k] * cast(I[j, k], float32), (64,))]).gpu_matmul(
            True, wgmma=True, BN=64)
    # the warp-level mma.sync tree is not a warpgroup MMA: it says which loop is missing
    mma = mma_matmul_example(64, 64, 64, BM=64, BN=64, BK=32, WM=32, WN=32).nest
    assert "threadIdx.y with 4" in why_not_a_wgmma(mma, mma.loop("kk"))


def test_the_bench_matmul_schedule_takes_the_warpgroup_tree_with_its_own_tiles():
    from bench.gpu_schedules import gpu_nest, make_matmul_lowp
    nest = gpu_nest("matmul", make_matmul_lowp(256), wgmma=True, BN=128, BK=32, stages=2)
    assert nest.tensorized == {"kk": "wgmma_m64nNk16"}
    assert [b.shape for b in nest.intermediates if b.name == "acc"] == [(2, 4, 32, 64)]


def test_the_bench_matmul_schedule_takes_the_warpgroup_tree_on_sm90_only():
    from bench.gpu_schedules import WGMMA_TILES, gpu_nest, make_matmul_lowp
    spec, big = make_matmul_lowp(512), 227 * 1024

    def acc_shapes(**kw):
        return [b.shape for b in gpu_nest("matmul", spec, max_shared_bytes=big, **kw).intermediates if b.name == "acc"]
    assert acc_shapes(arch="sm_80") == acc_shapes() != acc_shapes(arch="sm_90", wgmma=True)
    assert acc_shapes(arch="sm_90", wgmma=True) == [(2, 4, 32, 128)]
    assert acc_shapes(arch="sm_90", wgmma=False) == acc_shapes()
    # 512^2 makes 8 blocks of 128 x 256: too few for the warpgroup tree by default
    assert acc_shapes(arch="sm_90") == acc_shapes()
    assert WGMMA_TILES["stages"] == 4 and WGMMA_TILES["BN"] == 256


def test_a_tree_off_the_accumulator_layout_is_refused_by_tensorize(monkeypatch):
    """The same tree with the accumulator rows of half the values wrong (no ``+ 8``): every
    index still in range, IREval would run it, but it is not the instruction."""
    import loopnest.transforms.gpu_wgmma as tree
    from te import floordiv
    monkeypatch.setattr(tree, "warpgroup_row", lambda w, lane, v: w * 16 + floordiv(lane, 4))
    A, B = Buffer("A", (64, 32), "float16"), Buffer("B", (32, 64), "float16")
    C = Reduce("C", (64, 64), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (32,))
    nest = LoopNest([C])
    before = str(nest.root)
    with pytest.raises(ScheduleError, match=r"tensorize\(kk, 'wgmma_m64nNk16'\): As's index is neither the "
                                            r"K-major interleaved layout nor the K-major 128-byte swizzled"):
        nest.gpu_matmul(True, wgmma=True, BM=64, BN=64, BK=32, stages=2)
    assert str(nest.root) == before and not nest.history


def test_tiles_over_the_shared_memory_limit_refuse_the_build_and_say_why():
    ex = wgmma_matmul_example(128, 256, 128, BM=128, BN=256, BK=64, stages=2)     # 96 KiB of tiles
    with pytest.raises(BuildError, match=r"loop kk was tensorized as wgmma_m64nNk16, but .* Bs is in global memory"
                                         r".* use smaller tiles, or a larger max_shared_bytes"):
        build(ex.nest, ex.args, target="cuda")
    assert "wgmma" in build(ex.nest, ex.args, target="cuda", max_shared_bytes=227 * 1024).source


@pytest.mark.parametrize("kw", [dict(dtype="float16", K=512, BK=64), dict(dtype="float32", K=256, BK=32)])
def test_the_trees_tiles_are_private_to_a_block_where_the_analysis_runs_out_of_budget(kw):
    """Eight k-tiles over four stages with an N x K B: the value-flow analysis of Bs's swizzled
    (XOR) reads runs over its isl budget, but gpu_matmul made the tree, whose blocks fill their
    tiles before reading them: Bs stays in shared memory. Once another transform changes the
    nest, the analysis decides again (here it cannot show the tiles private after unrolling
    kk, so the unroll is refused and the nest stays as it was)."""
    from loopnest.transforms.privacy import private_to
    ex = wgmma_matmul_example(512, 512, b_layout="nk", BM=128, BN=256, stages=4, **kw)
    k = build(ex.nest, ex.args, target="cuda", max_shared_bytes=227 * 1024)
    assert "  Bs: shared" in k.module.plan.describe_memory()
    by = ex.nest.loop("by")
    assert private_to(ex.nest, ex.nest.buffer("Bs"), by.stmt)
    root = ex.nest.root
    with pytest.raises(ScheduleError, match="would share one As"):
        ex.nest.unroll(ex.nest.loop("kk"))
    assert ex.nest.root is root and ex.nest._tree_private[0] is root
