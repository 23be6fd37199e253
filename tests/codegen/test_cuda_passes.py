"""The CUDA steps after prepare_for_codegen (``codegen.cuda.passes``), without a GPU.

Golden prints of what each step records in the plan (kernels and launch dimensions, memory
scopes, barriers and one-thread sections, arguments with their const / ``__restrict__``
facts), the pass dumps, the aliasing rule checked in nvcc's PTX (no read-only-path load
through a selected pointer), 64-bit index arithmetic and int64 loop variables, and the
docstring examples of the CUDA modules.
"""
from __future__ import annotations

import doctest
import importlib
import re

import numpy as np
import pytest

from codegen import BuildError, build
from codegen.cuda import examples, nvcc_available
from codegen.cuda.emit import emit_cuda
from codegen.cuda.emulate import host_compiler, run_on_host
from codegen.cuda.passes import CUDA_STEPS, cuda_passes, plan_cuda
from codegen.kernel import make_params
from loopnest import LoopNest
from loopnest.stmt import Block, Cond, For, ForKind, Store
from te import Buffer, Compute, Var, cast, float32, float64, int8, int64, select
from te.expr import IntImm

HAVE_NVCC = nvcc_available()
HAVE_EMU = HAVE_NVCC and host_compiler() is not None
requires_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found")
requires_emu = pytest.mark.skipif(not HAVE_EMU, reason="g++ or the CUDA headers not found")


def _plan(nest, args):
    return build(nest, args, target="cuda").module.plan


# ------------------------------------------------------------------------------------
# nests
# ------------------------------------------------------------------------------------
def _guarded_nest():
    """One block loop; 64 x-threads copy a row of A, then 32 of them double its first half."""
    A = Buffer("A", (4, 64), float32)
    Y = Compute("Y", (4, 64), lambda i, j: A[i, j])
    b, t, u = Var("b"), Var("t"), Var("u")
    body = [For(t, 0, 64, Block([Store(Y, (b, t), A[b, t])]), ForKind.GPU_THREAD, 0),
            For(u, 0, 32, Block([Store(Y, (b, u), Y[b, u] * 2.0)]), ForKind.GPU_THREAD, 0)]
    nest = LoopNest([Y])
    nest.root = Block((For(b, 0, 4, Block(body), ForKind.GPU_BLOCK, 0),))
    return nest, [A, Y]


def _sliced_nest():
    """8 threadIdx.y rows, each with its own 64-element S that its x threads fill and read
    reversed: S is shared memory with one slice per threadIdx.y."""
    A = Buffer("A", (8, 64), float32)
    Y = Compute("Y", (8, 64), lambda i, j: A[i, 63 - j])
    S = Buffer("S", (64,), float32)
    b, ty, tx, tx2 = Var("b"), Var("ty"), Var("tx"), Var("tx2")
    row = [For(tx, 0, 64, Block([Store(S, (tx,), A[ty, tx])]), ForKind.GPU_THREAD, 0),
           For(tx2, 0, 64, Block([Store(Y, (ty, tx2), S[63 - tx2])]), ForKind.GPU_THREAD, 0)]
    nest = LoopNest([Y])
    nest.add_buffer(S)
    nest.root = Block((For(b, 0, 1, Block([For(ty, 0, 8, Block(row), ForKind.GPU_THREAD, 1)]),
                           ForKind.GPU_BLOCK, 0),))
    return nest, [A, Y]


def _select_hazard_nest():
    """``shared/repros/cuda_select_nc_load.py``: T2 = select(T1 <= -0.25, B[j], T1), T1 written
    by the same (single-thread) kernel."""
    B = Buffer("B", (32,), float64)
    T1 = Compute("T1", (31, 19), lambda i, j: B[i])
    T2 = Compute("T2", (31, 19), lambda i, j: select(cast(T1[i, j], float32) <= -0.25,
                                                     cast(B[j], float32), cast(T1[i, j], float32)))
    nest = LoopNest([T2])
    nest.fuse([nest.get_loops_for(T2)[0], nest.get_loops_for(T1)[0]])
    return nest, [B, T2]


# ------------------------------------------------------------------------------------
# golden prints of each step
# ------------------------------------------------------------------------------------
def test_outline_records_kernels_launch_dimensions_and_guarded_thread_loops():
    ex = examples.softmax_rows()
    assert _plan(ex.nest, ex.args).describe_kernels() == """\
kernel k0_Y: grid (floordiv(R + 31, 32), 1, 1), block (32, 1, 1)
  blockIdx.x: r_outer
  threadIdx.x: r_inner (extent 32)
kernel k1_Y: grid (floordiv(R + 31, 32), 1, 1), block (32, 1, 1)
  blockIdx.x: r_1_outer
  threadIdx.x: r_1_inner (extent 32)
kernel k2_Y: grid (floordiv(R + 31, 32), 1, 1), block (32, 1, 1)
  blockIdx.x: r_2_outer
  threadIdx.x: r_2_inner (extent 32)
kernel k3_Y: grid (floordiv(R + 31, 32), 1, 1), block (32, 1, 1)
  blockIdx.x: r_3_outer
  threadIdx.x: r_3_inner (extent 32)"""
    assert _plan(*_guarded_nest()).describe_kernels() == """\
kernel k0_Y: grid (4, 1, 1), block (64, 1, 1)
  blockIdx.x: b
  threadIdx.x: t (extent 64)
  threadIdx.x: u (extent 32, guarded: threadIdx.x < 32)"""


def test_memory_scopes_record_global_shared_sliced_and_promoted_buffers():
    ex = examples.softmax_rows()
    assert _plan(ex.nest, ex.args).describe_memory().splitlines()[0] == \
        "global, allocated by the launcher: mx[R], e[R, 50], s[R]"
    ex = examples.matmul_register_tiled(64, 128, 16)
    assert _plan(ex.nest, ex.args).describe_memory() == """\
kernel k0_C: 4096 B of shared memory
  acc: local, promoted from shared: 16 x float32 per thread
  As: shared, 512 x float32 (2048 B)
  Bs: shared, 512 x float32 (2048 B)"""
    assert _plan(*_sliced_nest()).describe_memory() == """\
kernel k0_Y: 2048 B of shared memory
  S: shared, one slice of 64 x float32 per thread of threadIdx.y (2048 B)"""


def test_sync_records_barriers_and_one_thread_sections():
    ex = examples.softmax_block()
    assert _plan(ex.nest, ex.args).describe_sync() == """\
kernel k0_Y: 4 barrier(s), 2 one-thread section(s)
  __syncthreads() before: stat[0] = -inff;
  __syncthreads() before: gpu_thread.x for (int t2 = 0; t2 < 64; t2++) {
  __syncthreads() before: stat[1] = 0.0f;
  __syncthreads() before: gpu_thread.x for (int t3 = 0; t3 < 64; t3++) {
  if (threadIdx.x == 0) runs: stat[0] = -inff; (+1 more)
  if (threadIdx.x == 0) runs: stat[1] = 0.0f; (+1 more)"""
    assert _plan(*_guarded_nest()).describe_sync() == """\
kernel k0_Y: 1 barrier(s), 0 one-thread section(s)
  __syncthreads() before: gpu_thread.x for (int u = 0; u < 32; u++) {"""


def test_arguments_record_the_const_and_restrict_facts():
    ex = examples.softmax_rows()
    assert _plan(ex.nest, ex.args).describe_arguments() == """\
X: const __restrict__ (no kernel writes it)
mx (scratch): neither const nor __restrict__ (written by k0_Y)
e (scratch): neither const nor __restrict__ (written by k1_Y)
s (scratch): neither const nor __restrict__ (written by k2_Y)
Y: neither const nor __restrict__ (written by k3_Y)
k0_Y(X, mx, R)
k1_Y(X, mx, e, R)
k2_Y(e, s, R)
k3_Y(Y, e, s, R)"""


def test_the_printer_spells_out_the_plan():
    k = build(*_guarded_nest(), target="cuda")
    assert k.source.split("// k0_Y")[1] == """\
: grid (4, 1, 1), block (64, 1, 1)
extern "C" __global__ void __launch_bounds__(64) k0_Y(const float* __restrict__ b_A, float* b_Y) {
  const int v_b = (int)blockIdx.x;
  {
    const int v_t = (int)threadIdx.x;
    b_Y[((v_b * 64) + v_t)] = b_A[((v_b * 64) + v_t)];
  }
  __syncthreads();
  {
    const int v_u = (int)threadIdx.x;
    if ((int)threadIdx.x < 32) {
      b_Y[((v_b * 64) + v_u)] = (b_Y[((v_b * 64) + v_u)] * 2.0f);
    }
  }
}
"""
    assert [(a.kind, a.name, a.readonly, a.restrict, a.written) for a in k.kernels[0].args] == \
        [("param", "b_A", True, True, False), ("param", "b_Y", False, False, True)]


# ------------------------------------------------------------------------------------
# dumps
# ------------------------------------------------------------------------------------
def test_dump_passes_shows_the_cuda_steps_and_their_plan(monkeypatch, capsys):
    monkeypatch.setenv("LOOPNEST_DUMP_PASSES", "1")
    ex = examples.matmul_tiled()
    build(ex.nest, ex.args, target="cuda")
    err = capsys.readouterr().err
    # the shared passes come first, then the CUDA steps, each with its plan
    assert err.index("// ---- after final_simplify ----") < err.index("// ---- before cuda_outline_kernels ----")
    for name, _, section in CUDA_STEPS:   # a rewriting step (no section) shows its result in the IR
        assert f"// ---- after {name} ----" in err
        assert (f"// ---- {name}: plan ----" in err) == (section is not None)
    plan = lambda name: err.split(f"// ---- {name}: plan ----\n")[1].split("// ----")[0]
    assert plan("cuda_outline_kernels").startswith("kernel k0_C: grid (3, 4, 1), block (16, 16, 1)\n")
    assert "As: shared, 256 x float32 (1024 B)" in plan("cuda_memory_scopes")
    assert plan("cuda_sync").startswith("kernel k0_C: 2 barrier(s), 0 one-thread section(s)\n")
    assert plan("cuda_arguments").startswith("A: const __restrict__ (no kernel writes it)\n")


def test_build_option_dump_prints_the_cuda_steps(capsys):
    ex = examples.elementwise()
    build(ex.nest, ex.args, target="cuda", dump=True)
    err = capsys.readouterr().err
    assert "// ---- cuda_outline_kernels: plan ----\nkernel k0_Y: grid (floordiv(N + 127, 128), 1, 1)" in err
    assert "// ---- before simplify ----" not in err          # only the CUDA steps: the option is build_cuda's


def test_plan_cuda_stops_after_a_step_and_refuses_unknown_steps():
    ex = examples.elementwise()
    nest = ex.nest.copy().prepare_for_codegen()
    plan = plan_cuda(nest, make_params(nest, ex.args), "f", upto="cuda_memory_scopes")
    assert plan.done == ["kernels", "memory"] and plan.kernels[0].args == []
    assert [p[0] for p in cuda_passes(plan)] == [name for name, _, _ in CUDA_STEPS]
    with pytest.raises(BuildError, match="unknown CUDA step 'cuda_bogus'"):
        cuda_passes(plan, upto="cuda_bogus")


# ------------------------------------------------------------------------------------
# const / __restrict__
# ------------------------------------------------------------------------------------
def test_written_buffers_get_neither_const_nor_restrict_in_any_kernel():
    ex = examples.softmax_rows()
    src = build(ex.nest, ex.args, target="cuda").source
    sigs = re.findall(r"void __launch_bounds__\(\d+\) (k\d_Y\([^)]*\))", src)
    assert sigs == ["k0_Y(const float* __restrict__ b_X, float* b_mx, int v_R)",
                    "k1_Y(const float* __restrict__ b_X, float* b_mx, float* b_e, int v_R)",
                    "k2_Y(float* b_e, float* b_s, int v_R)",
                    "k3_Y(float* b_Y, float* b_e, float* b_s, int v_R)"]


def test_select_hazards_are_found_in_cond_statements_too():
    """A Cond whose branches store a written buffer's load and an input's load may become a
    select of the two pointers: the input loses __restrict__ in that kernel only."""
    A = Buffer("A", (16,), float32)
    Y = Compute("Y", (16,), lambda i: A[i])
    Z = Compute("Z", (16,), lambda i: A[i])
    i, j = Var("i"), Var("j")
    nest = LoopNest([Y, Z])
    nest.root = Block((
        For(i, 0, 16, Block([Store(Y, (i,), A[i] * 2.0)])),
        For(j, 0, 16, Block([Cond(A[j] > 0.0, Block([Store(Z, (j,), Y[j])]), Block([Store(Z, (j,), A[15 - j])]))])),
    ))
    k = build(nest, [A, Y, Z], target="cuda")
    assert [list(kp.select_hazards) for kp in k.module.plan.kernels] == [[], [id(A)]]
    assert "k0_Y_Z(const float* __restrict__ b_A, float* b_Y)" in k.source
    assert "k1_Y_Z(const float* b_A, float* b_Y, float* b_Z)" in k.source


@requires_nvcc
def test_no_read_only_path_load_through_a_selected_pointer():
    """The PTX of the repro: no ``ld.global.nc`` through a pointer made by ``selp.b64`` (nvcc
    merged the select's two loads, one of them of the intermediate T1 the kernel writes);
    an input elsewhere keeps the read-only path."""
    from codegen.cuda.compile import compile_ptx
    k = build(*_select_hazard_nest(), target="cuda")
    assert "k0_T2(const double* b_B, float* b_T2, double* b_T1)" in k.source
    for arch in ("sm_80", "sm_90"):
        ptx = compile_ptx(k.source, arch)
        selected = set(re.findall(r"selp\.b64\s+(%rd\d+)", ptx))
        bad = [ln for ln in ptx.splitlines()
               if "ld.global.nc" in ln and any(re.search(re.escape(r) + r"[\]+]", ln) for r in selected)]
        assert not bad, bad[:3]
    ptx = compile_ptx(build(*_guarded_nest(), target="cuda").source, "sm_90")
    assert "ld.global.nc.f32" in ptx          # A: const __restrict__, read through the read-only path


@requires_emu
def test_select_hazard_kernel_computes_the_reference_on_host_emulation():
    nest, args = _select_hazard_nest()
    k = build(nest, args, target="cuda")
    b = np.random.default_rng(0).uniform(-16, 16, 32)
    out = np.zeros((31, 19), np.float32)
    run_on_host(k, b, out)
    t1 = np.repeat(b[:31, None], 19, axis=1).astype(np.float32)
    np.testing.assert_array_equal(out, np.where(t1 <= -0.25, np.broadcast_to(b[:19].astype(np.float32), (31, 19)),
                                                t1))


# ------------------------------------------------------------------------------------
# statement identity: facts keyed by statement survive a statement object used twice
# ------------------------------------------------------------------------------------
def test_a_statement_object_used_twice_gets_the_facts_of_each_place():
    A = Buffer("A", (128,), float32)
    Z = Compute("Z", (4,), lambda b: A[b * 32])
    Y = Compute("Y", (128,), lambda i: A[i])
    b, t = Var("b"), Var("t")
    st = Store(Z, (b,), A[b * 32])                        # made by one thread, at two places
    use = For(t, 0, 32, Block([Store(Y, (b * 32 + t,), A[b * 32 + t] + Z[b])]), ForKind.GPU_THREAD, 0)
    root = Block((For(b, 0, 4, Block([st, use, st]), ForKind.GPU_BLOCK, 0),))
    nest = LoopNest([Y, Z])
    params = make_params(nest, [A, Y, Z])
    src = emit_cuda(root, params, "twice").source
    body = src.split("k0_twice(")[1]
    # a barrier before the thread loop (it reads Z) and before the second store only
    assert body.count("__syncthreads();") == 2
    assert body.index("b_Z[v_b] = ") < body.index("__syncthreads();")
    assert body.count("if (threadIdx.x == 0) {") == 2


# ------------------------------------------------------------------------------------
# 64-bit indices
# ------------------------------------------------------------------------------------
def _int8_43000_by_50000():
    """B = 2 * A over a 43000 x 50000 int8 array (2.15e9 elements), A indexed by hand in
    int64: the row index is cast to int64 before the multiply by the row length."""
    R, C = 43000, 50000
    A = Buffer("A", (R * C,), int8)
    B = Compute("B", (R, C), lambda i, j: A[cast(i, int64) * IntImm(C, int64) + cast(j, int64)] * 2)
    nest = LoopNest([B])
    i, j = nest.get_loops_for(B)
    jo, ji = nest.split_with_mask(j, 256)
    nest.set_gpu_block_index(i, 1)
    nest.set_gpu_block_index(jo, 0)
    nest.set_gpu_thread_index(ji, 0)
    return build(nest, [A, B], target="cuda")


def test_int64_index_arithmetic_is_printed_as_long_long():
    k = _int8_43000_by_50000()
    assert k.launch_dims() == [("k0_B", (196, 43000, 1), (256, 1, 1))]
    assert "b_A[((((long long)(v_i)) * 50000LL) + " in k.source


@requires_nvcc
def test_int64_index_arithmetic_is_64_bit_in_the_ptx():
    from codegen.cuda.compile import compile_ptx
    ptx = compile_ptx(_int8_43000_by_50000().source, "sm_90")
    # the row offset i * 50000 (up to 2.15e9) is a 64-bit product ...
    assert re.search(r"(mul\.wide\.[su]32|mul\.lo\.[su]64|mad\.wide\.[su]32)\s+%rd\d+, %r\w+, 50000;", ptx), ptx
    # ... and never a 32-bit one
    assert not re.search(r"(mul|mad)\.lo\.[su]32\s+[^;]*50000", ptx)
    for op in re.findall(r"(?:ld|st)\.global\S*\s+[^;]*", ptx):
        assert re.search(r"\[%rd\d+(\+\d+)?\]", op), op      # 64-bit addresses


def _int64_loops_nest():
    """Hand-built loops whose variables are int64: a block loop over N (an int64 size), two
    thread loops (the second shorter, so guarded) and a serial loop."""
    L = lambda v: IntImm(v, int64)  # noqa: E731
    N = Var("N", int64)
    X = Buffer("X", (256,), float32)
    Y = Compute("Y", (256,), lambda j: X[j] + 1.0)
    bi, t, t2, kk = (Var(n, int64) for n in ("bi", "t", "t2", "kk"))
    at = bi * L(64) + t * L(2) + kk
    body = [For(t, L(0), L(32), Block([For(kk, L(0), L(2), Block([Store(Y, (at,), X[at] + 1.0)]))]),
                ForKind.GPU_THREAD, 0),
            For(t2, L(0), L(16), Block([Store(Y, (bi * L(64) + t2,), Y[bi * L(64) + t2] * 2.0)]),
                ForKind.GPU_THREAD, 0)]
    nest = LoopNest([Y])
    nest.root = Block((For(bi, L(0), N, Block(body), ForKind.GPU_BLOCK, 0),))
    return nest, [X, Y, N]


def test_int64_loop_variables_are_declared_long_long():
    nest, args = _int64_loops_nest()
    k = build(nest, args, target="cuda")
    src = k.source
    assert "k0_Y(const float* __restrict__ b_X, float* b_Y, long long v_N)" in src
    assert "const long long v_bi = (long long)blockIdx.x;" in src
    assert "const long long v_t = (long long)threadIdx.x;" in src
    assert "for (long long v_kk = 0LL; v_kk < 2LL; ++v_kk) {" in src
    assert "if ((long long)threadIdx.x < 16LL) {" in src
    assert "(int)" not in src.split("k0_Y(")[1]
    assert k.launch_dims(N=4) == [("k0_Y", (4, 1, 1), (32, 1, 1))]


@requires_emu
def test_int64_loop_variables_run_on_host_emulation_like_ireval():
    nest, args = _int64_loops_nest()
    x = np.arange(256, dtype=np.float32)
    got, want = np.zeros_like(x), np.zeros_like(x)
    run_on_host(build(nest, args, target="cuda"), x, got, 4)
    build(nest, args, target="ireval")(x, want, 4)
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------------------------
# docstring examples
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("module", ["codegen.cuda.plan", "codegen.cuda.outline", "codegen.cuda.memory",
                                    "codegen.cuda.sync", "codegen.cuda.aliasing", "codegen.cuda.passes",
                                    "codegen.cuda.ir_queries", "codegen.cuda.emit"])
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
