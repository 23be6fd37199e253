"""Barriers and staged (multi-buffered) shared tiles (``codegen.cuda.sync``).

Accesses to distinct stages of a staged buffer -- ``S[(ko + a) % n, ...]`` for one serial
loop variable ``ko`` and different ``a``, or different constant stages -- need no barrier
between them; everything else keeps its barriers: stages that may be the same, stages keyed
by another variable or by another form, and the stages one iteration leaves to a later one.
"""
from __future__ import annotations

import numpy as np
import pytest

from codegen import build
from codegen.cuda import nvcc_available
from codegen.cuda.emulate import host_compiler, run_on_host
from loopnest import LoopNest
from loopnest.stmt import Block, For, ForKind, Store
from te import Buffer, Compute, Reduce, Sum, Var, cast, float32
from te.expr import FloorMod, IntImm

requires_emu = pytest.mark.skipif(not (nvcc_available() and host_compiler() is not None),
                                  reason="g++ or the CUDA headers not found")


def _staged_matmul(size: int = 128):
    A = Buffer("A", (size, size), "float16")
    B = Buffer("B", (size, size), "float16")
    C = Reduce("C", (size, size), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (size,))
    nest = LoopNest([C])
    nest.gpu_matmul(stages=2, BM=64, BN=64, BK=32, WM=32, WN=32)
    return build(nest, [A, B, C], target="cuda"), A, B


def test_the_double_buffered_tensor_core_matmul_gets_one_barrier_per_k_step():
    k, _, _ = _staged_matmul()
    kp = k.module.plan.kernels[0]
    assert len(kp.barriers) == 1
    # the one barrier is inside the K loop, before the multiply of the current stage
    assert k.module.plan.describe_sync().splitlines()[1].startswith("  __syncthreads() before: gpu_thread.x for")
    src = k.source
    loop = src.index("for (int v_ko = 0;")
    assert src.count("__syncthreads();") == 1 and src.index("__syncthreads();") > loop


@requires_emu
def test_the_double_buffered_tensor_core_matmul_matches_numpy_on_host_emulation():
    k, _, _ = _staged_matmul()
    rng = np.random.default_rng(3)
    a = rng.integers(-4, 5, (128, 128)).astype(np.float16)
    b = rng.integers(-4, 5, (128, 128)).astype(np.float16)
    c = np.zeros((128, 128), np.float32)
    run_on_host(k, A=a, B=b, C=c)
    np.testing.assert_array_equal(c, a.astype(np.float32) @ b.astype(np.float32))


# ------------------------------------------------------------------------------------
# hand-built kernels: one block of 64 threads, a serial loop ko over 8 rows of A; each
# iteration writes a stage of the shared S (2 x 64 or 4 x 64) and reads one, reversed,
# into the row of Y
# ------------------------------------------------------------------------------------
def _staged_nest(write_stage, read_stage, *, stages: int = 2, write_first: bool = True, prologue=None,
                 inner: bool = False):
    """``write_stage(ko)`` / ``read_stage(ko)`` (or ``read_stage(ko, ki)`` with ``inner``: the
    read in a serial loop ki of 2 iterations inside ko): the stage expressions; ``prologue``:
    the stage written from row 0 before the loop (none when None)."""
    A = Buffer("A", (9, 64), float32)
    Y = Compute("Y", (8, 64), lambda i, j: A[i, 63 - j])
    S = Buffer("S", (stages, 64), float32)
    b, ko, ki = Var("b"), Var("ko"), Var("ki")
    tx, tx2, tx3 = Var("tx"), Var("tx2"), Var("tx3")
    write = For(tx, 0, 64, Block([Store(S, (write_stage(ko), tx), A[ko + 1, tx])]), ForKind.GPU_THREAD, 0)
    if inner:
        read = For(ki, 0, 2, Block([For(tx2, 0, 64, Block([Store(Y, (ko, tx2), S[read_stage(ko, ki), 63 - tx2])]),
                                        ForKind.GPU_THREAD, 0)]))
    else:
        read = For(tx2, 0, 64, Block([Store(Y, (ko, tx2), S[read_stage(ko), 63 - tx2])]), ForKind.GPU_THREAD, 0)
    body = [write, read] if write_first else [read, write]
    top = [] if prologue is None else \
        [For(tx3, 0, 64, Block([Store(S, (prologue, tx3), A[0, tx3])]), ForKind.GPU_THREAD, 0)]
    nest = LoopNest([Y])
    nest.add_buffer(S)
    nest.root = Block((For(b, 0, 1, Block(top + [For(ko, 0, 8, Block(body))]), ForKind.GPU_BLOCK, 0),))
    return nest, [A, Y]


def _sync(nest_args):
    k = build(*nest_args, target="cuda")
    assert "__shared__ __align__(16) float b_S[" in k.source
    return k.module.plan.describe_sync().splitlines()


def _barrier_targets(lines):
    return [ln.split("for (int ")[1].split(" ")[0] for ln in lines[1:] if "__syncthreads()" in ln]


def test_prefetching_into_the_other_stage_needs_one_barrier_per_iteration():
    # read stage ko % 2, then write stage (ko + 1) % 2: the barrier at the top of an
    # iteration orders the previous write of the stage read now and the previous read of the
    # stage written now
    lines = _sync(_staged_nest(lambda ko: (ko + 1) % 2, lambda ko: ko % 2, write_first=False, prologue=0))
    assert _barrier_targets(lines) == ["tx2"]


def test_a_stage_written_for_the_next_iteration_keeps_its_loop_carried_barrier():
    # write (ko + 1) % 2, then read ko % 2: disjoint within one iteration, but iteration
    # ko + 1 reads what iteration ko wrote (and writes what it read): one barrier stays
    lines = _sync(_staged_nest(lambda ko: (ko + 1) % 2, lambda ko: ko % 2, prologue=0))
    assert _barrier_targets(lines) == ["tx"]


def test_floor_remainder_stages_are_told_apart_too():
    lines = _sync(_staged_nest(lambda ko: FloorMod(ko + 1, IntImm(2)), lambda ko: FloorMod(ko, IntImm(2)),
                               write_first=False, prologue=0))
    assert _barrier_targets(lines) == ["tx2"]


def test_the_same_stage_keeps_its_barriers():
    # one stage for all iterations: the write waits for the previous read, the read for the write
    lines = _sync(_staged_nest(lambda ko: 0, lambda ko: 0))
    assert _barrier_targets(lines) == ["tx", "tx2"]
    # stage ko % 2 written, then read: the read waits for the write; iteration ko + 1 writes
    # the other stage, and ko + 2 writes this one after the barrier of ko + 1
    lines = _sync(_staged_nest(lambda ko: ko % 2, lambda ko: ko % 2))
    assert _barrier_targets(lines) == ["tx2"]


def test_a_stage_of_another_loop_variable_keeps_the_barrier():
    # S[ko % 2] written, S[(ki + 1) % 2] read: the same stage when ki + 1 and ko agree mod 2
    lines = _sync(_staged_nest(lambda ko: ko % 2, lambda ko, ki: (ki + 1) % 2, inner=True))
    assert "tx2" in _barrier_targets(lines)


@pytest.mark.parametrize("write_stage", [lambda ko: (ko * 2) % 2, lambda ko: (ko * 3 + 1) % 2],
                         ids=["ko*2", "ko*3+1"])
def test_a_stage_of_another_form_keeps_the_barrier(write_stage):
    # stage 0 (or (3 ko + 1) % 2) written, (ko + 1) % 2 read: the same stage on some iterations
    lines = _sync(_staged_nest(write_stage, lambda ko: (ko + 1) % 2))
    assert _barrier_targets(lines) == ["tx", "tx2"]


@pytest.mark.parametrize("stages", [4, 16])
def test_a_stage_reused_iterations_later_keeps_a_barrier(stages):
    # write ko % n, read (ko + n/2) % n: iterations ko and ko + 1 touch distinct stages, but
    # ko + n/2 reads (and ko + n writes) what ko wrote -- a barrier per iteration. With 16
    # stages the 8 iterations never wrap (the simplifier drops both mods: stages ko and
    # ko + 8), so no iteration reads what another wrote: the barrier stays only where the
    # stage analysis keeps one at the loop's start
    lines = _sync(_staged_nest(lambda ko: ko % stages, lambda ko: (ko + stages // 2) % stages, stages=stages))
    assert len(_barrier_targets(lines)) == 1


def test_distinct_constant_stages_need_no_barrier_between_them():
    # stage 0 written from row ko + 1, stage 1 read: no barrier between them in one iteration
    lines = _sync(_staged_nest(lambda ko: 0, lambda ko: 1))
    assert _barrier_targets(lines) == ["tx"]       # the loop-carried write-after-write of stage 0


@requires_emu
@pytest.mark.parametrize("write_first", [False, True], ids=["read-then-write", "write-then-read"])
def test_the_double_buffered_copy_matches_numpy_on_host_emulation(write_first):
    nest, args = _staged_nest(lambda ko: (ko + 1) % 2, lambda ko: ko % 2, write_first=write_first, prologue=0)
    k = build(nest, args, target="cuda")
    a = np.arange(9 * 64, dtype=np.float32).reshape(9, 64)
    y = np.zeros((8, 64), np.float32)
    run_on_host(k, A=a, Y=y)
    np.testing.assert_array_equal(y, a[:8, ::-1])
