"""Tensor cores: the lane-by-lane MMA nests of codegen.cuda.mma_matmul run on IREval, the CUDA
step cuda_tensor_cores recognises them, and what it prints (ldmatrix addresses, operand
layouts, accumulators) computes what the nest says, checked with the CPU model of the PTX
fragment layouts (codegen.cuda.mma). On a GPU, tests/gpu runs the kernels themselves."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import build
from codegen.kernel import BuildError
from codegen.cuda.compile import nvcc_available
from codegen.cuda.emulate import host_compiler, run_on_host
from codegen.cuda.mma import ldmatrix, ldmatrix_row_address, mma_fragments, mma_spec
from codegen.cuda.mma_matmul import fragment_col, fragment_row, mma_matmul, mma_matmul_example
from codegen.cuda.tensor_cores import match_mma_nest
from codegen.ireval import evaluate
from codegen.cuda.examples import _hand_nest
from te import Buffer, Reduce, Sum, cast, float32, floormod
from te.queries import free_vars

HAVE_NVCC = nvcc_available()
SMALL = dict(BM=64, BN=64, BK=32, WM=32, WN=32)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_lane_by_lane_nest_is_a_matmul_on_ireval(dtype):
    ex = mma_matmul_example(64, 64, 64, dtype=dtype, **SMALL)
    arrays, expected = ex.make(np.random.default_rng(1))
    build(ex.nest, ex.args, target="ireval")(**arrays)
    np.testing.assert_allclose(arrays["C"], expected["C"], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype,tag", [("float16", "f16"), ("bfloat16", "bf16")])
def test_cuda_prints_the_nest_as_ldmatrix_and_mma_sync(dtype, tag):
    ex = mma_matmul_example(64, 64, 64, dtype=dtype, **SMALL)
    k = build(ex.nest, ex.args, target="cuda")
    assert k.module.plan.describe_tensor_cores().splitlines() == [
        "kernel k0_C: 1 warp MMA nest(s)",
        f"  m16n8k16 {tag}: 4 A tile(s) (As, ld 40), 8 B tile(s) (Bs K x N, ld 72), 16 mma.sync per nest"]
    assert k.source.count(f"tc_mma_{tag}(b_acc[") == 16
    assert f"mma.sync.aligned.m16n8k16.row.col.f32.{tag}.{tag}.f32" in k.source
    assert "#else" in k.source     # the plain per-lane loops for older GPUs and the host emulation
    # the tiles are copied to shared memory 16 bytes at a time, as bits (no conversion)
    vt = "tc_float16x8" if dtype == "float16" else "tc_bfloat16x8"
    assert f"*reinterpret_cast<{vt}*>(&b_As[" in k.source and f"*reinterpret_cast<{vt}*>(&b_Bs[" in k.source
    assert "_st(b_" not in k.source and "_st(tc_" not in k.source


def test_operands_moved_out_of_shared_memory_by_the_limit_refuse_the_tensorized_build_and_say_why():
    ex = mma_matmul_example(64, 64, 64, dtype="float16", **SMALL)      # As and Bs: 9728 bytes
    with pytest.raises(BuildError, match=r"loop kk was tensorized as mma_m16n8k16, but .* As is in global memory; "
                                         r".* \(As moved to global memory: the kernel's shared buffers need more "
                                         r"than 6000 bytes; use smaller tiles, or a larger max_shared_bytes\)"):
        build(ex.nest, ex.args, target="cuda", max_shared_bytes=6000)


def test_the_printed_mmas_compute_what_the_nest_says_on_the_fragment_model():
    """Each printed mma.sync, run on the CPU model of ldmatrix and of the instruction with
    random shared memory, gives every lane the sums the nest's per-lane loops compute."""
    ex = mma_matmul_example(64, 64, 64, **SMALL)
    plan = build(ex.nest, ex.args, target="cuda").module.plan
    (nest,) = plan.mma.values()
    rng = np.random.default_rng(3)
    sa = rng.standard_normal(nest.a.static_size()).astype(np.float16)
    sb = rng.standard_normal(nest.b.static_size()).astype(np.float16)
    spec = mma_spec("m16n8k16", "f16")
    env = {w: 1 for w in free_vars(nest.a_tiles + nest.b_tiles)}    # warp (1, 1), second k step
    lanes = np.arange(32)
    for ai, bi, _ in nest.mmas:
        a0, b0 = (int(evaluate(e, env)) for e in (nest.a_tiles[ai], nest.b_tiles[bi]))
        a_rows = [a0 + ldmatrix_row_address("A", nest.lda)(int(l)) for l in lanes]
        b_rows = [b0 + ldmatrix_row_address(nest.b_storage, nest.ldb)(int(l)) for l in lanes]
        a = ldmatrix(sa.view(np.uint16), a_rows, 4).view(np.float16).reshape(32, 8).astype(np.float64)
        b = ldmatrix(sb.view(np.uint16), b_rows, 2, trans=nest.b_storage == "B_kn").view(np.float16)
        d = mma_fragments(spec, a, b.reshape(32, 4).astype(np.float64), np.zeros((32, 4)))
        want = np.zeros((32, 4))
        for v in range(4):
            r, c = fragment_row(lanes, v), fragment_col(lanes, v)
            for kk in range(16):
                want[:, v] += sa[a0 + r * nest.lda + kk].astype(np.float64) * sb[b0 + kk * nest.ldb + c]
        np.testing.assert_allclose(d, want, rtol=1e-6, atol=1e-6)


def test_a_nest_off_the_fragment_layout_is_not_taken_for_an_mma(monkeypatch):
    """B's column from the row formula instead of the column one: printed as plain code."""
    import loopnest.transforms.gpu_matmul as mm
    A = Buffer("A", (64, 64), "float16")
    B = Buffer("B", (64, 64), "float16")
    C = Reduce("C", (64, 64), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (64,))
    monkeypatch.setattr(mm, "fragment_col", lambda lane, v: floormod(fragment_row(lane, v), 8))
    root, bufs = mma_matmul(A, B, C, **SMALL)
    nest = _hand_nest([C], root, bufs)
    k = build(nest, [A, B, C], target="cuda")
    assert not k.module.plan.mma and "tc_mma_" not in k.source


@pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found")
def test_the_tensor_core_kernel_compiles_for_sm80_and_sm90_without_spills():
    ex = mma_matmul_example(512, 512, 512, BK=64)
    k = build(ex.nest, ex.args, target="cuda")
    for arch in ("sm_80", "sm_90"):
        info = k.compile(arch)
        assert info["spill_stores"] == 0 and info["registers"] <= 255, (arch, info)


@pytest.mark.skipif(not (HAVE_NVCC and host_compiler() is not None), reason="g++ or the CUDA headers not found")
def test_host_emulation_runs_the_plain_per_lane_code():
    ex = mma_matmul_example(64, 64, 32, dtype="bfloat16", **SMALL)
    arrays, expected = ex.make(np.random.default_rng(2))
    run_on_host(build(ex.nest, ex.args, target="cuda"), **arrays)
    np.testing.assert_allclose(arrays["C"], expected["C"], rtol=1e-4, atol=1e-4)


def test_float32_runs_on_tf32_tensor_cores_only_when_declared():
    ex = mma_matmul_example(64, 64, 64, dtype="float32", BM=64, BN=64, BK=16, WM=32, WN=32)
    assert ex.nest.tensorized == {"kk": "mma_m16n8k8_tf32"}
    arrays, expected = ex.make(np.random.default_rng(4))
    build(ex.nest, ex.args, target="ireval")(**arrays)      # IREval runs the nest in float32
    np.testing.assert_allclose(arrays["C"], expected["C"], rtol=1e-4, atol=1e-4)
    k = build(ex.nest, ex.args, target="cuda")
    assert "m16n8k8 tf32" in k.module.plan.describe_tensor_cores()
    assert k.source.count("tc_mma_tf32(b_acc[") == 2 * 2 * 4 and "tc_to_tf32(b_As[" in k.source
    # the same nest undeclared keeps float32 precision: plain per-lane code
    A = Buffer("A", (64, 64), "float32"); B = Buffer("B", (64, 64), "float32")
    C = Reduce("C", (64, 64), Sum(), lambda i, j, k: A[i, k] * B[k, j], (64,))
    root, bufs = mma_matmul(A, B, C, BM=64, BN=64, BK=16, WM=32, WN=32)
    plain = build(_hand_nest([C], root, bufs), [A, B, C], target="cuda")
    assert not plain.module.plan.mma and "tc_mma_" not in plain.source


@pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found")
def test_the_tf32_kernel_compiles_for_sm80_and_sm90_without_spills():
    ex = mma_matmul_example(512, 512, 512, dtype="float32", BK=32, WN=32)
    k = build(ex.nest, ex.args, target="cuda")
    for arch in ("sm_80", "sm_90"):
        info = k.compile(arch)
        assert info["spill_stores"] == 0 and info["registers"] <= 255, (arch, info)


@pytest.mark.parametrize("dtype,tag", [("float8_e4m3", "e4m3"), ("float8_e5m2", "e5m2")])
def test_float8_runs_on_m16n8k32_with_b_stored_n_by_k(dtype, tag):
    ex = mma_matmul_example(64, 64, 64, dtype=dtype, BM=64, BN=64, BK=64, WM=32, WN=32)
    arrays, expected = ex.make(np.random.default_rng(5))
    build(ex.nest, ex.args, target="ireval")(**arrays)
    np.testing.assert_allclose(arrays["C"], expected["C"], rtol=1e-5, atol=1e-5)
    k = build(ex.nest, ex.args, target="cuda")
    assert f"m16n8k32 {tag}: 4 A tile(s) (As, ld 80), 8 B tile(s) (Bs N x K, ld 80)" in \
        k.module.plan.describe_tensor_cores()
    assert f"mma.sync.aligned.m16n8k32.row.col.f32.{tag}.{tag}.f32" in k.source
    assert "__CUDA_ARCH__ >= 890" in k.source      # float8 MMAs need Ada or later
    if HAVE_NVCC:
        info = k.compile("sm_90")
        assert info["spill_stores"] == 0, info


def test_a_warp_tile_under_a_lane_dependent_branch_stays_plain_code():
    """mma.sync needs every lane of the warp: under ``if (lane < 16)`` the nest is not printed
    as one (and a declared one is refused)."""
    from loopnest import LoopNest
    from loopnest.stmt import Block, Cond, For, Store
    from te import Var
    from loopnest.transforms.tensorize import fragment_row as row, fragment_col as col
    As, Bs = Buffer("As", (16, 16), "float16"), Buffer("Bs", (16, 8), "float16")
    acc = Buffer("acc", (32, 4), "float32")
    lane, v, k = Var("lane"), Var("v"), Var("k")
    body = Store(acc, (lane, v), acc[lane, v] + cast(As[row(lane, v), k], float32) * cast(Bs[k, col(lane, v)], float32))
    tile = For(v, 0, 4, Block([For(k, 0, 16, Block([body]))]))
    nest = LoopNest(For(lane, 0, 32, Block([Cond(lane < 16, Block([tile]))])), outputs=[acc])
    nest.set_gpu_thread_index(lane, 0)
    assert "tc_mma_" not in build(nest, [As, Bs, acc], target="cuda").source
    nest.tensorize(v)
    with pytest.raises(BuildError, match="the 32 lanes of a warp do not reach it together"):
        build(nest, [As, Bs, acc], target="cuda")


@pytest.mark.parametrize("tiles", [dict(BM=16, BN=16, BK=32, WM=16, WN=16), dict(BM=16, BN=32, BK=32, WM=16, WN=16),
                                   dict(BM=32, BN=16, BK=32, WM=16, WN=16, stages=3, prefetch="shared")])
def test_one_warp_on_an_axis_keeps_the_accumulators_in_registers(tiles):
    """A block of one warp row or column has a thread loop of extent 1, whose variable the
    simplifier may drop from the accumulator's index: the tile still goes to registers and
    the MMA prints (the random tester's matmul programs found these refused at build)."""
    from codegen.cuda.mma_matmul import mma_matmul_example
    ex = mma_matmul_example(32, 32, 64, **tiles)
    kernel = build(ex.nest, ex.args, target="cuda")
    acc = next(p for p in kernel.module.plan.placements.values() if p.buffer.name == "acc")
    assert acc.scope == "local" and "mma.sync.aligned" in kernel.source
    if HAVE_NVCC and host_compiler() is not None:
        arrays, expected = ex.make(np.random.default_rng(0))
        run_on_host(kernel, **arrays)
        np.testing.assert_allclose(arrays["C"], expected["C"], rtol=1e-5, atol=1e-4)


def _prints_the_mma_and_gives_the_matmul(ex) -> None:
    """``ex`` (an ``mma_matmul_example``, rescheduled) builds with ``mma.sync`` and, where it can
    be emulated, gives the matmul's values."""
    kernel = build(ex.nest, ex.args, target="cuda")
    assert "mma.sync.aligned" in kernel.source
    if HAVE_NVCC and host_compiler() is not None:
        arrays, expected = ex.make(np.random.default_rng(0))
        run_on_host(kernel, **arrays)
        np.testing.assert_allclose(arrays["C"], expected["C"], rtol=1e-5, atol=1e-4)


def test_a_split_of_the_accumulator_initialisation_keeps_the_tile_in_registers():
    """Seed 65, case 147: split_with_tail of a loop of extent 1 in the accumulators' zeroing
    left a main loop of no iteration, whose loose index range kept the tile out of
    registers and the MMA from printing; loops that never run are left out of the check."""
    from codegen.cuda.mma_matmul import mma_matmul_example
    ex = mma_matmul_example(64, 32, 32, dtype="bfloat16", BM=16, BN=16, WM=16, WN=8, BK=32, prefetch="shared",
                            stages=2)
    ex.nest.split_with_tail(next(lp for lp in ex.nest.get_all_loops() if lp.name.startswith("tj")), 4)
    _prints_the_mma_and_gives_the_matmul(ex)


def test_a_masked_split_of_the_write_back_keeps_the_tile_in_registers():
    """Seed 68, case 41: split_with_mask by 4 of the write-back loop of extent 2 gave an index
    range of 0..3 under the mask's guard (0..1 where the guard holds): the tile stayed out of
    registers and the MMA could not print. Register promotion narrows ranges by the guards
    around an access."""
    from codegen.cuda.mma_matmul import mma_matmul_example
    ex = mma_matmul_example(32, 32, 64, dtype="float16", BM=32, BN=16, WM=16, WN=16, BK=32, prefetch="shared",
                            stages=4)
    tj = [lp for lp in ex.nest.get_all_loops() if lp.name.startswith("tj")][-1]     # the write-back's
    ex.nest.split_with_mask(tj, 4)
    _prints_the_mma_and_gives_the_matmul(ex)
