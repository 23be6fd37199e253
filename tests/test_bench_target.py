"""The benchmark's hand schedules take their vector widths and tile shapes from a Target:
written for AVX2 (8 float lanes, 16 registers) or AVX-512 (16 lanes, 32 registers), each
computes the right values on LLVM (whatever the host's own width) and its loop nest shows
the widths of that target."""
import re

import pytest

pytest.importorskip("codegen.llvm")

from bench.kernels import WORKLOADS, transpose_tile  # noqa: E402
from bench.schedules import conv2d_tile, matmul_kc, matmul_tile  # noqa: E402
from codegen import build  # noqa: E402
from loopnest import LoopNest, Target, host_target  # noqa: E402

AVX2 = Target(cpu="avx2", vector_bits=256, vector_registers=16, l1_bytes=32 * 1024, l2_bytes=256 * 1024)
AVX512 = Target(cpu="avx512", vector_bits=512, vector_registers=32, l1_bytes=48 * 1024, l2_bytes=2 << 20)

#: kernel -> (size, widths of the vectorized loops on AVX2, on AVX-512)
CASES = {
    "elementwise": (4096 * 2, {16}, {16}),                      # a cache line a statement
    "gelu": (4096 * 2, {16}, {16}),
    # element-wise lanes; 4 vectors of partial results, summed by vector adds into 8 at the end
    "softmax": ((6, 256), {32, 8}, {64, 16, 8}),
    "layernorm": ((6, 256), {32, 8}, {64, 16, 8}),
    "row_sum": ((4, 256), {32, 8}, {64, 8}),
    "transpose": ((256, 256), {8}, {16}),
    # 6 x 2 vectors / 8 x 2 (A, 64 KB, fits half of AVX-512's L2: narrower panels), the tail rows too
    "matmul": (128, {16}, {32}),
    "linear": (128, {16}, {32}),                                # the same tiles; B packed transposed
    "linear_batch": ((5, 128), {16, 8}, {64, 16}),              # and a version of dot products in vector lanes
    "sum": ((40, 100), {32, 8}, {64, 8}),                      # partial sums per core, folded into 8
    "column_sum": ((40, 100), {8}, {16}),                       # tiles of native vectors, and the leftover columns
    "conv1d": ((200, 31), {8}, {16}),                           # tiles of output vectors, the taps inside
    "conv2d": ((1, 8, 12, 40, 8), {8}, {16}),                   # 40 columns: 5 x 8 / 2 x 16 + a tail tile of 8
    "blur": ((16, 64), {8}, {16}),
    "stencil": ((32, 64), {8}, {16}),
    "pyramid": ((64, 64), {8}, {16}),                           # the vertical downsamplings only
}


def test_every_workload_is_covered():
    assert set(CASES) == set(WORKLOADS)


def _vector_widths(nest: LoopNest) -> set:
    """The widths of the vectorized loops, but the tails (narrower vectors of what is left)."""
    return {int(n) for name, n in re.findall(r"vectorized for \(int (\w+) = 0; \w+ < (\d+);", str(nest))
            if "_tail" not in name}


def _run_checked(name, size, target):
    w = WORKLOADS[name]
    spec = w.make(size)
    nest = LoopNest(spec.outputs)
    w.hand_schedule(nest, spec, target=target)
    outs, _ = spec.run(build(nest, spec.args, target="llvm"))
    assert spec.error(outs) <= spec.tol, (name, size, target)
    return nest


@pytest.mark.parametrize("target", [AVX2, AVX512], ids=["avx2", "avx512"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_hand_schedule_follows_the_target(name, target):
    size, avx2, avx512 = CASES[name]
    nest = _run_checked(name, size, target)
    assert _vector_widths(nest) == (avx2 if target is AVX2 else avx512), str(nest)


def test_no_target_means_the_host():
    lanes = host_target().lanes("float32")
    nest = _run_checked("transpose", (256, 256), None)
    assert _vector_widths(nest) == {lanes}


def test_tile_shapes_follow_registers_and_caches():
    assert matmul_tile(AVX2) == (6, 16) and matmul_tile(AVX512) == (6, 64)
    rows, vectors = matmul_tile(AVX512)[0], matmul_tile(AVX512)[1] // 16
    assert rows * vectors + vectors + 1 <= AVX512.vector_registers     # accumulators, a row of B, a of A
    assert matmul_kc(AVX512, 6, 64, 4096) == 2048                      # 6 x 2048 floats of A: all of L1
    assert matmul_kc(AVX512, 6, 64, 2048) == 0                         # all of k in one slice
    assert matmul_kc(AVX2, 6, 16, 2048) == 1024
    assert matmul_kc(AVX2, 6, 16, 300) == 0                            # all of k in one slice
    assert matmul_kc(AVX2, 6, 16, 1400) == 0                           # no power-of-two slice of 16 or more divides it
    # A that every column panel reads again fits in less than half of L2: half the vectors, 8 rows
    # (AVX-512); with 8 x 1 vectors a k step would issue more loads than multiply-adds, so AVX2 keeps 6 x 2
    half_l2 = AVX512.l2_bytes // 2
    assert matmul_tile(AVX512, streamed_bytes=half_l2 - 4) == (8, 32)
    assert matmul_tile(AVX512, streamed_bytes=half_l2) == (6, 64)
    assert matmul_tile(AVX2, streamed_bytes=1024) == (6, 16)
    assert conv2d_tile(AVX2) == (4, 2, 8) and conv2d_tile(AVX512) == (4, 4, 16)
    assert transpose_tile(AVX2) == (1024, 64) and transpose_tile(AVX512) == (1024, 64)


def test_a_matmul_tile_shape_given_by_hand_is_not_narrowed():
    """A fits in half of L2 at 128 (8 x 32 by default), but ``rows=6`` given keeps 4 vectors."""
    from bench.schedules import matmul_schedule
    spec = WORKLOADS["matmul"].make(128)
    default, by_hand = LoopNest(spec.outputs), LoopNest(spec.outputs)
    matmul_schedule(default, spec.outputs[0], target=AVX512)
    matmul_schedule(by_hand, spec.outputs[0], rows=6, target=AVX512)
    assert _vector_widths(default) == {32} and _vector_widths(by_hand) == {64}
    outs, _ = spec.run(build(by_hand, spec.args, target="llvm"))
    assert spec.error(outs) <= spec.tol


@pytest.mark.parametrize("shift", [True, False], ids=["shifted", "tail"])
@pytest.mark.parametrize("n", [4, 20, 136])
def test_hand_matmul_rows_left_over_by_the_tile(n, shift, monkeypatch):
    """The rows a 6-row tile leaves over: the last tile shifted back over the one before it
    (20 and 136 rows), or rows of their own where there are fewer than a tile (4) or the
    shift is refused (``row_tiles`` made to refuse it here): the values agree either way."""
    import bench.schedules as schedules
    if not shift:
        tiles = schedules.row_tiles
        monkeypatch.setattr(schedules, "row_tiles",
                            lambda nest, loop, rows, overlap=True: tiles(nest, loop, rows, False))
    spec = WORKLOADS["matmul"].make(n)
    nest = LoopNest(spec.outputs)
    schedules.matmul_schedule(nest, spec.outputs[0], rows=6, target=AVX512)
    text = str(nest)
    assert ("min(" in text) == (shift and n > 6) and ("i_tail" in text) == (n % 6 != 0 and not (shift and n > 6))
    outs, _ = spec.run(build(nest, spec.args, target="llvm"))
    assert spec.error(outs) <= spec.tol


def test_matmul_narrows_its_tile_to_the_width():
    nest = _run_checked("matmul", 40, AVX512)       # 40 columns: not a multiple of 64, 48, 32 or 16
    assert _vector_widths(nest) == {8}


@pytest.mark.parametrize("target", [AVX2, AVX512], ids=["avx2", "avx512"])
def test_conv2d_vectorizes_its_channels_where_the_columns_leave_a_partial_vector(target):
    """32 output channels, 12 columns: 4 (AVX2) or 6 (AVX-512) columns x 2 vectors of channels
    a tile, the filter packed with its channels last, the accumulator too."""
    nest = _run_checked("conv2d", (1, 8, 6, 12, 32), target)
    lanes = target.lanes("float32")
    assert _vector_widths(nest) == {lanes}
    assert "W_pack[W_pack_i0, W_pack_i1, W_pack_i2, W_pack_i3] = W[W_pack_i3, W_pack_i0" in str(nest)
    assert re.search(rf"W_pack\[\w+, ry, rx, \w+ \* {2 * lanes} \+ \w+ \* {lanes} \+ \w+\];", str(nest))


def test_conv2d_along_the_columns_or_the_channels_on_request():
    from bench.schedules import conv2d_schedule
    spec = WORKLOADS["conv2d"].make((1, 8, 6, 12, 32))
    Y = spec.outputs[0]
    columns = LoopNest(spec.outputs)
    conv2d_schedule(columns, Y, target=AVX512, along="columns")
    assert "W_pack" not in str(columns) and "vectorized for (int x_1_tail = 0; x_1_tail < 12;" in str(columns)
    outs, _ = spec.run(build(columns, spec.args, target="llvm"))
    assert spec.error(outs) <= spec.tol
    with pytest.raises(ValueError, match="along is 'auto', 'channels' or 'columns'"):
        conv2d_schedule(LoopNest(spec.outputs), Y, along="rows")
    narrow = WORKLOADS["conv2d"].make((1, 8, 6, 12, 8))       # 8 channels: half a vector of 16
    nest = LoopNest(narrow.outputs)
    with pytest.raises(ValueError, match="cannot be vectorized along its channels"):
        conv2d_schedule(nest, narrow.outputs[0], target=AVX512, along="channels")
    assert not nest.history
