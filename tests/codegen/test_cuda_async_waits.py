"""How far each barrier lets ``cp.async`` copies run ahead (``codegen.cuda.async_wait``).

The host emulation defers every ``cp.async`` copy until a wait completes it, so a wait that
lets a copy run on past the statement that reads it gives wrong values there (or values that
depend on the order of the threads, which the emulation reports as a race): the tests check
the analysis both ways, with its waits (right values) and with each wait one group looser
(wrong values, or a race)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from codegen import build
from codegen.cuda import nvcc_available, passes
from codegen.cuda.emulate import EmulationError, host_compiler, run_on_host
from codegen.cuda.mma_matmul import mma_matmul_example
from loopnest import LoopNest
from loopnest.stmt import Block, For, Store
from te import Buffer, MinExpr, Var, floormod

HAVE_EMU = host_compiler() is not None and nvcc_available()
requires_emu = pytest.mark.skipif(not HAVE_EMU, reason="g++ or the CUDA headers not found")
TILES = dict(BM=64, BN=64, BK=32, WM=32, WN=32)


def _shows_the_loose_wait(kernel, arrays: dict, out: str, expected) -> bool:
    """Whether the emulation shows a wait that lets copies run on too long: wrong values in
    ``arrays[out]``, or a race (the values depend on the order of the threads)."""
    try:
        run_on_host(kernel, **arrays)
    except EmulationError as exc:
        return "data race" in str(exc)
    return not np.allclose(arrays[out], expected, rtol=1e-5, atol=1e-4)


def _waits(kernel) -> list:
    plan = kernel.module.plan
    return [plan.async_waits.get(id(b), 0) for k in plan.kernels for b in k.barriers]


@pytest.mark.parametrize("stages, wait", [(2, 0), (3, 2), (4, 4)])
def test_the_pipelined_matmul_leaves_the_later_tiles_in_flight(stages, wait):
    ex = mma_matmul_example(64, 64, 256, stages=stages, prefetch="shared", **TILES)
    kernel = build(ex.nest, ex.args, target="cuda")
    # one group per copy statement: A and B of tiles 0 .. stages-2 before the K loop, then two per step
    assert len(kernel.module.plan.async_commits) == 2 * stages
    assert _waits(kernel) == [wait]
    src = kernel.source
    assert src.count("tc_cp_async_commit();") == 2 * stages
    assert ("tc_cp_async_wait_all();" in src) is (wait == 0)
    assert (f"tc_cp_async_wait_group<{wait}>();" in src) is (wait > 0)
    assert "cp.async.wait_group" in kernel.module.plan.describe_async_waits() or wait == 0


def _staged_stream(stages: int, ahead: int, tiles: int = 6, read_stage_ahead: int = 0, read_first: bool = False,
                   fill: bool = False, rounds: int = 0):
    """One block of 16 threads streams ``tiles`` tiles of 64 floats through a shared buffer of
    ``stages`` stages, copying tile ``ko + ahead`` (clamped) while it writes tile ``ko`` out
    reversed (each thread reads what others copied); the read takes stage ``(ko +
    read_stage_ahead) % stages``, the copies stage ``(ko + ahead) % stages``. ``read_first``:
    the read comes before the copy in each step; ``fill``: every stage gets tile 0 first (so
    nothing reads a stage never written); ``rounds``: all of it that many times in a serial
    loop, round ``r`` streaming the ``r``-th ``tiles`` tiles (copies of a round may still
    travel when the next one starts)."""
    total = tiles * max(rounds, 1)
    In = Buffer("In", (total * 64,), "float32")
    Out = Buffer("Out", (total * 64,), "float32")
    r = Var("r")
    base = r * tiles if rounds else 0
    S = Buffer("S", (stages, 64), "float32")
    blk, ko = Var("blk"), Var("ko")
    counter = iter(range(100))
    threads, lanes = ["tr"], ["er"]

    def copy(tile, stage):
        t, e = Var(f"t{next(counter)}"), Var(f"e{next(counter)}")
        threads.append(t.name)
        lanes.append(e.name)
        body = Store(S, (stage, t * 4 + e), In[(base + tile) * 64 + t * 4 + e])
        return For(t, 0, 16, Block([For(e, 0, 4, Block([body]))]))

    t, e = Var("tr"), Var("er")
    read = For(t, 0, 16, Block([For(e, 0, 4, Block([Store(
        Out, ((base + ko) * 64 + t * 4 + e,), S[floormod(ko + read_stage_ahead, stages), 63 - (t * 4 + e)] * 2.0)]))]))
    prologue = [copy(0, j) for j in range(stages)] if fill else []
    prologue += [copy(min(j, tiles - 1), j) for j in range(ahead)]
    body = [copy(MinExpr(ko + ahead, tiles - 1), floormod(ko + ahead, stages)), read]
    step = For(ko, 0, tiles, Block(body[::-1] if read_first else body))
    work = prologue + [step]
    if rounds:
        work = [For(r, 0, rounds, Block(tuple(work)))]
    nest = LoopNest(Block((For(blk, 0, 1, Block(tuple(work))),)), outputs=[Out])
    nest.set_gpu_block_index(nest.loop("blk"), 0)
    for name in lanes:
        nest.vectorize(nest.loop(name))
    for name in threads:
        nest.set_gpu_thread_index(nest.loop(name), 0)
    return nest, [In, Out]


def _expected(tiles: int = 6) -> np.ndarray:
    a = np.arange(tiles * 64, dtype=np.float32)
    return (a.reshape(tiles, 64)[:, ::-1] * 2).reshape(-1)


@pytest.mark.parametrize("stages, ahead, wait", [(2, 1, 0), (3, 2, 1), (4, 3, 2), (4, 2, 1), (3, 1, 0)])
def test_a_hand_written_pipeline_waits_for_the_tile_it_reads(stages, ahead, wait):
    nest, args = _staged_stream(stages, ahead)
    kernel = build(nest, args, target="cuda")
    assert len(kernel.module.plan.async_copies) == ahead + 1
    assert wait in _waits(kernel)
    if HAVE_EMU:
        a, out = np.arange(6 * 64, dtype=np.float32), np.zeros(6 * 64, np.float32)
        run_on_host(kernel, a, out)
        np.testing.assert_array_equal(out, _expected())


def test_reading_the_tile_just_copied_waits_for_every_copy():
    nest, args = _staged_stream(3, 2, read_stage_ahead=2)
    kernel = build(nest, args, target="cuda")
    assert 0 in _waits(kernel)
    assert "tc_cp_async_wait_all();" in kernel.source


@pytest.fixture
def looser_waits(monkeypatch):
    """Every wait the analysis computes leaves one more group in flight."""
    steps = [(name, fn, section) for name, fn, section in passes.CUDA_STEPS]
    i = [name for name, _, _ in steps].index("cuda_async_waits")
    real = steps[i][1]

    def looser(plan):
        real(plan)
        for sid, n in list(plan.async_waits.items()):
            plan.async_waits[sid] = 1 if n is None else n + 1
        for k in plan.kernels:
            for b in k.barriers:
                plan.async_waits.setdefault(id(b), 1)
    steps[i] = (steps[i][0], looser, steps[i][2])
    monkeypatch.setattr(passes, "CUDA_STEPS", steps)


@requires_emu
@pytest.mark.parametrize("stages", [2, 3, 4])
def test_the_emulation_shows_a_wait_one_group_too_loose(looser_waits, stages):
    ex = mma_matmul_example(64, 64, 256, stages=stages, prefetch="shared", **TILES)
    kernel = build(ex.nest, ex.args, target="cuda")
    assert re.search(r"tc_cp_async_wait_group<\d+>", kernel.source)
    arrays, expected = ex.make(np.random.default_rng(stages))
    assert _shows_the_loose_wait(kernel, arrays, "C", expected["C"])


@requires_emu
def test_the_emulation_shows_a_hand_written_pipeline_waiting_too_little(looser_waits):
    nest, args = _staged_stream(3, 2)
    kernel = build(nest, args, target="cuda")
    arrays = {p.name: v for p, v in zip(args, (np.arange(6 * 64, dtype=np.float32), np.zeros(6 * 64, np.float32)))}
    assert _shows_the_loose_wait(kernel, arrays, args[1].name, _expected())


@requires_emu
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stages=st.integers(1, 4), data=st.data())
def test_random_pipelines_give_on_the_emulation_what_ireval_gives(stages, data):
    """Random staged streams (stage counts, prefetch distances, the stage read, the order of
    copy and read, the tile count, one round or two in a serial loop): the emulation, which completes each cp.async copy only
    when a wait lets it, matches IREval whatever waits the analysis chose."""
    ahead = data.draw(st.integers(0, stages - 1))
    read_ahead = data.draw(st.integers(0, stages - 1))
    tiles = data.draw(st.integers(1, 5))
    read_first = data.draw(st.booleans())
    rounds = data.draw(st.sampled_from([0, 2]))
    nest, args = _staged_stream(stages, ahead, tiles, read_ahead, read_first, fill=True, rounds=rounds)
    a = np.arange(tiles * max(rounds, 1) * 64, dtype=np.float32)
    want = np.zeros_like(a)
    build(nest, args, target="ireval")(a, want)
    got = np.zeros_like(want)
    run_on_host(build(nest, args, target="cuda"), a, got)
    np.testing.assert_array_equal(got, want)
