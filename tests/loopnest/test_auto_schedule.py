"""LoopNest.auto_schedule: a deterministic schedule without search for the benchmark kernels
(static and symbolic sizes), equal to numpy on LLVM and IREval, replayable, explained."""
import re
import numpy as np
import pytest

from bench.kernels import (make_blur, make_conv2d, make_elementwise, make_layernorm, make_matmul, make_row_sum,
                           make_softmax, make_transpose)
from bench.pipelines import STENCIL_HALO, make_pyramid, make_stencil
from codegen import build
from loopnest import LoopNest, ScheduleError, Target
from loopnest.stmt import Block, For, Store
from te import Buffer, Compute, Reduce, Sum, Var, exp, maximum

AVX2 = Target(cpu="avx2", vector_bits=256, vector_registers=16, cores=2)
AVX512 = Target(cpu="avx512", vector_bits=512, vector_registers=32, cores=2)

CASES = {
    "matmul": (make_matmul, 40),            # 40 = 6 x 6 + 4 rows, columns not a multiple of the tiles
    "conv2d": (make_conv2d, (1, 3, 6, 11, 5)),
    "conv2d_tiles": (make_conv2d, (1, 3, 8, 20, 8)),   # tiles divide the channels and rows, not the columns
    "conv2d_channels": (make_conv2d, (1, 3, 4, 12, 32)),   # vectors divide the channels, not the columns
    "softmax": (make_softmax, (5, 64)),
    "layernorm": (make_layernorm, (5, 64)),
    "row_sum": (make_row_sum, (6, 96)),
    "transpose": (make_transpose, (40, 36)),
    "elementwise": (make_elementwise, 1000),
    "blur": (make_blur, (12, 20)),
    "stencil": (make_stencil, (40, 24)),     # more rows than one strip, and a strip cut short
    "pyramid": (make_pyramid, (64, 96)),
}


def _run(nest, spec, target):
    # NaN, not zeros: a sum whose init were lost would still be right on zeroed outputs
    outs = {n: np.full(s, np.nan, np.float32) for n, s in spec.out_shapes.items()}
    build(nest, spec.args, target=target)(**spec.inputs, **outs)
    return outs


def _check(outs, spec):
    ref = spec.reference(spec.inputs)
    for n, v in outs.items():
        np.testing.assert_allclose(v, ref[n], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("cpu", [AVX2, AVX512], ids=["avx2", "avx512"])
def test_auto_schedule_computes_the_reference(name, cpu):
    make, size = CASES[name]
    spec = make(size)
    nest = LoopNest(spec.outputs)
    report = nest.auto_schedule(cpu)
    assert report is nest.auto_schedule_report and nest.history
    assert len(str(report).splitlines()) == len(nest.tensors)
    assert {c.name for c in report.choices} == {t.name for t in nest.tensors}
    _check(_run(nest, spec, "llvm"), spec)
    _check(_run(nest, spec, "ireval"), spec)
    assert str(LoopNest(spec.outputs).replay(nest.history_json())) == str(nest)


def test_auto_schedule_is_deterministic():
    spec = make_softmax((4, 32))
    a, b = LoopNest(spec.outputs), LoopNest(spec.outputs)
    assert str(a.auto_schedule(AVX2)) == str(b.auto_schedule(AVX2))
    assert a.history == b.history


def test_matmul_with_a_symbolic_size():
    N = Var("N")
    A, B = Buffer("A", (N, N), "float32"), Buffer("B", (N, N), "float32")
    C = Reduce("C", (N, N), Sum(), lambda i, j, k: A[i, k] * B[k, j], (N,))
    nest = LoopNest([C])
    report = nest.auto_schedule(AVX512)
    assert "register-blocked" in report["C"].choice
    rng = np.random.default_rng(0)
    for target, sizes in (("llvm", (37, 70)), ("ireval", (13,))):
        kernel = build(nest, [A, B, C, N], target=target)
        for n in sizes:          # not multiples of the 6-row, 64-column tiles
            a, b = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
            c = np.zeros((n, n), np.float32)
            kernel(a, b, c, n)
            np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    assert str(LoopNest([C]).replay(nest.history_json())) == str(nest)


def test_symbolic_softmax_and_elementwise_chain():
    M, N = Var("M"), Var("N")
    X = Buffer("X", (M, N), "float32")
    from te import Max
    mx = Reduce("mx", (M,), Max(), lambda i, k: X[i, k], (N,))
    e = Compute("e", (M, N), lambda i, j: exp(X[i, j] - mx[i]))
    s = Reduce("s", (M,), Sum(), lambda i, k: e[i, k], (N,))
    Y = Compute("Y", (M, N), lambda i, j: e[i, j] / s[i])
    t1 = Compute("t1", (M, N), lambda i, j: X[i, j] * 2.0)
    t2 = Compute("t2", (M, N), lambda i, j: maximum(t1[i, j] + 1.0, 0.0))
    Z = Compute("Z", (M, N), lambda i, j: t2[i, j] * 3.0)
    x = np.random.default_rng(1).standard_normal((5, 45)).astype(np.float32)
    for outs, args, ref in (([Y], [X, Y, M, N], lambda v: np.exp(v - v.max(1, keepdims=True)) /
                             np.exp(v - v.max(1, keepdims=True)).sum(1, keepdims=True)),
                            ([Z], [X, Z, M, N], lambda v: np.maximum(v * 2 + 1, 0) * 3)):
        nest = LoopNest(outs)
        report = nest.auto_schedule(AVX2)
        assert len(str(report).splitlines()) == len(nest.tensors)
        for target in ("llvm", "ireval"):
            y = np.zeros_like(x)
            build(nest, args, target=target)(x, y, 5, 45)
            np.testing.assert_allclose(y, ref(x.astype(np.float64)), rtol=1e-4, atol=1e-5)
        if Y in outs:   # the row reductions of a symbolic row length: masked vector lanes
            assert "partial results in vector lanes" in report["mx"].choice
            assert "partial results in vector lanes" in report["s"].choice
    assert report["t1"].choice == "inlined" and report["t2"].choice == "inlined"


def test_target_width_sets_the_vector_lanes():
    spec = make_softmax((8, 64))
    nest = LoopNest(spec.outputs)
    nest.auto_schedule(Target(vector_bits=256, vector_registers=16, cores=1))
    vec = [lp.extent for lp in nest.get_all_loops() if lp.kind == "vectorized"]
    assert vec and 8 in vec and 16 not in vec
    assert "vectorized for (int" in str(nest) and "< 8; " in str(nest)
    wide = LoopNest(spec.outputs)
    wide.auto_schedule(Target(vector_bits=512, vector_registers=32, cores=1))
    assert 16 in [lp.extent for lp in wide.get_all_loops() if lp.kind == "vectorized"]


@pytest.mark.parametrize("cores,blocks", [(2, 2), (4, 4), (3, None), (1, None)])
def test_contraction_panels_run_in_one_block_per_core(cores, blocks):
    """Where the cores divide the column panels (``parallel_blocks``), the parallel loop runs
    one block of consecutive panels per core; otherwise every panel is an iteration of its
    own. Either way the product is exact."""
    spec = make_matmul(256)       # 8 panels of 32 columns on AVX-512 (A fits in L2: 8 x 2 vectors)
    nest = LoopNest(spec.outputs)
    nest.auto_schedule(Target(vector_bits=512, vector_registers=32, cores=cores, l2_bytes=2 << 20))
    parallel = [lp.extent for lp in nest.get_all_loops() if lp.kind == "parallel"]
    assert parallel == ([blocks] if blocks else [8] if cores > 1 else [])
    outs = _run(nest, spec, "llvm")
    assert spec.error(outs) <= spec.tol


def test_row_tiles_in_blocks_when_one_panel_holds_every_column():
    """One 32-column panel (8 rows x 2 vectors on AVX-512): the row tiles are the parallel
    loop, in one block per core, and the packed operand goes above it."""
    A = Buffer("A", (64, 48), "float32")
    B = Buffer("B", (32, 48), "float32")
    C = Reduce("C", (64, 32), Sum(), lambda i, j, k: A[i, k] * B[j, k], (48,))
    nest = LoopNest([C])
    nest.auto_schedule(AVX512)
    assert [lp.extent for lp in nest.get_all_loops() if lp.kind == "parallel"] == [2]
    text = str(nest)
    assert text.index("B_pack[") < text.index("parallel for")      # one copy, before the row tiles split
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 48)).astype(np.float32), rng.standard_normal((32, 48)).astype(np.float32)
    c = np.full((64, 32), np.nan, np.float32)
    build(nest, [A, B, C], target="llvm")(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.T, rtol=1e-4, atol=1e-4)


def test_matmul_reduction_slices_follow_the_caches():
    """The k slices of a matmul are as deep as the target's caches allow (``matmul_kc``, the
    hand schedule's rule): 2048 with 48 KiB of L1 at 4096, 1024 with half that L1, none
    where all of k fits (1152 once ran in 9 slices of 128: 11.4 ms against 8.8 in one)."""
    def slices(n, l1):
        nest = LoopNest(make_matmul(n).outputs)
        report = str(nest.auto_schedule(Target(vector_bits=512, vector_registers=32, cores=2, l1_bytes=l1,
                                               l2_bytes=2 << 20)))
        return report.split("reduction slices of ")[1].split(",")[0] if "reduction slices" in report else None
    assert slices(4096, 48 * 1024) == "2048"
    assert slices(4096, 24 * 1024) == "1024"
    assert slices(2048, 48 * 1024) is None
    assert slices(1152, 48 * 1024) is None and slices(960, 48 * 1024) is None


def test_matmul_leftover_columns_are_row_blocked():
    """The columns the vector tiles leave over run in tiles of the register tile's rows,
    unrolled inside the reduction (independent accumulators: matmul 1020 7.27 -> 6.64 ms);
    the rows those tiles leave over get one accumulator each (``C_corner``). Values for
    constant and symbolic sizes."""
    rng = np.random.default_rng(0)
    # rows, columns, depth, and whether rows are left over by the 8-row tiles (5 rows: one tile)
    for rows, cols, depth, corner in ((50, 70, 33, True), (48, 70, 16, False), (5, 70, 9, False)):
        A, B = Buffer("A", (rows, depth), "float32"), Buffer("B", (depth, cols), "float32")
        C = Reduce("C", (rows, cols), Sum(), lambda i, j, k: A[i, k] * B[k, j], (depth,))
        nest = LoopNest([C])
        nest.auto_schedule(AVX512)
        text = str(nest)
        assert "unrolled for" in text[text.index("C_cols["):] and ("C_corner" in text) == corner, text
        a = rng.standard_normal((rows, depth), dtype=np.float32)
        b = rng.standard_normal((depth, cols), dtype=np.float32)
        c = np.full((rows, cols), np.nan, np.float32)
        build(nest, [A, B, C], target="llvm")(a, b, c)
        np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    N = Var("N")
    A, B = Buffer("A", (N, N), "float32"), Buffer("B", (N, N), "float32")
    C = Reduce("C", (N, N), Sum(), lambda i, j, k: A[i, k] * B[k, j], (N,))
    nest = LoopNest([C])
    nest.auto_schedule(AVX512)
    assert "C_corner" in str(nest)
    kernel = build(nest, [A, B, C, N], target="llvm")
    for n in (1, 5, 6, 70, 100, 131):
        a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
        c = np.full((n, n), np.nan, np.float32)
        kernel(a, b, c, n)
        np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_symbolic_leftover_columns_are_masked_register_tiles():
    """With a symbolic N the columns the 64-wide tiles leave over (0 to 63 of them) run in
    tiles of one vector, the last one masked, each a register tile of 6 rows accumulated over
    the whole reduction; on LLVM the partial tile is vector code too (masked loads of B), so
    no column runs as scalars (symbolic 1020: 11.3 -> 7.2 ms, PyTorch 6.8). Values at every
    kind of remainder: none, below one vector, one vector and more, with rows left over."""
    N = Var("N")
    A, B = Buffer("A", (N, N), "float32"), Buffer("B", (N, N), "float32")
    C = Reduce("C", (N, N), Sum(), lambda i, j, k: A[i, k] * B[k, j], (N,))
    nest = LoopNest([C])
    nest.auto_schedule(AVX512)
    ops = [op["op"] for op in nest.history]
    assert "split_with_mask" in ops and "fuse" in ops, ops
    text = str(nest)
    cols = text[text.index("C_cols["):text.index("C_corner")]
    assert "if (j_tail" in cols and "vectorized for" in cols and "unrolled for" in cols, text
    kernel = build(nest, [A, B, C, N], target="llvm")
    rng = np.random.default_rng(2)
    for n in (1, 6, 15, 16, 17, 64, 76, 100, 127, 131):
        a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
        c = np.full((n, n), np.nan, np.float32)
        kernel(a, b, c, n)
        np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_matmul_leftover_rows_read_the_packed_panel():
    """With a symbolic N the rows the row tiles leave over run inside the column tile loop,
    after the row tiles, and read its packed panel of B while it is in cache rather than B
    from memory (symbolic 1030: 10.16 -> 9.83 ms, PyTorch 7.00). Their values:
    ``test_matmul_leftover_columns_are_row_blocked`` (N = 70, 100, 131 leave rows over)."""
    N = Var("N")
    A, B = Buffer("A", (N, N), "float32"), Buffer("B", (N, N), "float32")
    C = Reduce("C", (N, N), Sum(), lambda i, j, k: A[i, k] * B[k, j], (N,))
    nest = LoopNest([C])
    nest.auto_schedule(AVX512)
    rest = [line for line in str(nest).splitlines() if line.strip().startswith("C_rest[") and "= C_rest[" in line]
    assert rest and all("B_pack[" in line and "B[" not in line for line in rest), str(nest)


def test_statement_nest_is_left_as_written():
    A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "float32")
    i = Var("i")
    scan = Block([Store(B, (0,), A[0]), For(i, 0, 7, Store(B, (i + 1,), B[i] + A[i + 1]))])
    nest = LoopNest(scan, outputs=[B])
    before = str(nest)
    report = nest.auto_schedule(AVX2)
    assert str(nest) == before and nest.history == [] and len(str(report).splitlines()) == 1
    a = np.arange(8, dtype=np.float32)
    b = np.zeros(8, np.float32)
    build(nest, [A, B], target="llvm")(a, b)
    np.testing.assert_allclose(b, np.cumsum(a))


def test_a_scheduled_nest_is_refused():
    spec = make_elementwise(64)
    nest = LoopNest(spec.outputs)
    nest.parallelize(nest.get_loops_for(spec.outputs[0])[0])
    with pytest.raises(ScheduleError, match="unscheduled nest"):
        nest.auto_schedule(AVX2)
    assert len(nest.history) == 1


def test_build_with_schedule_auto_leaves_the_nest_alone():
    spec = make_row_sum((8, 128))
    nest = LoopNest(spec.outputs)
    kernel = build(nest, spec.args, target="llvm", schedule="auto")
    assert nest.history == [] and kernel.schedule_history
    assert str(kernel.auto_schedule_report).startswith("S: ")
    outs = {"S": np.zeros(8, np.float32)}
    kernel(**spec.inputs, **outs)
    _check(outs, spec)
    k2 = build(LoopNest(spec.outputs), spec.args, target="ireval", schedule=AVX2)
    assert "partial results" in str(k2.auto_schedule_report)
    with pytest.raises(ValueError, match="schedule must be"):
        build(LoopNest(spec.outputs), spec.args, target="llvm", schedule="fast")


def test_stencil_strips_are_twice_the_recomputed_halo():
    spec = make_stencil((64, 32))
    nest = LoopNest(spec.outputs)
    report = nest.auto_schedule(AVX512)
    assert STENCIL_HALO[0] == 16
    assert str(report["S1"]).startswith("S1: computed at strips of 32 rows of S13, vectorized")
    assert "read at neighbouring rows" in report["S12"].reason


def test_pyramid_rows_that_gather_are_not_vectorized():
    spec = make_pyramid((64, 96))
    nest = LoopNest(spec.outputs)
    report = nest.auto_schedule(AVX512)
    # dx reads its rows at 2x - 1 .. 2x + 2 (edges clamped), uox and ugx at x // 2
    for name in ("dx1", "uox0", "ugx0"):
        assert report[name].choice.startswith("not vectorized"), report[name]
        assert "would gather" in report[name].reason
        assert "vectorized" not in {lp.kind for lp in nest.get_loops_for(name)}
    # g reads dx at clamped rows but contiguously along them; out0 reads uox0 and ugx0 by rows
    for name in ("g1", "out0"):
        assert "vectorized 16 wide" in report[name].choice, report[name]
        assert "vectorized" in {lp.kind for lp in nest.get_loops_for(name)}
    _check(_run(nest, spec, "llvm"), spec)


def test_convolution_columns_left_over_get_the_register_tile():
    """20 columns on 16 lanes: the 4 left over accumulate in a 4 channels x 4 rows tile too
    (unrolled late, the reduction around it), not one vector at a time; the tile initialises
    its accumulator itself (Y is not zeroed first and copied in)."""
    spec = make_conv2d((1, 3, 8, 20, 8))
    nest = LoopNest(spec.outputs)
    nest.auto_schedule(AVX512)
    text = str(nest)
    assert "Y_cols[0, co_inner_1_1, y_1_inner_1_1, x_1_tail_1] = 0.0f;" in text     # one batch: index 0
    assert "= Y[" not in text and not re.search(r"^ *Y\[.*\] = 0\.0f;", text, re.M)
    tile = re.search(r"unrolled for \(int ry_1 = 0; ry_1 < 3.*\n.*\n"
                     r" *unrolled for \(int co_inner_1 = 0; co_inner_1 < 4.*\n"
                     r" *unrolled for \(int y_1_inner_1 = 0; y_1_inner_1 < 4.*\n *vectorized for \(int x_1_tail ", text)
    assert tile, text     # the tile and the filter's 3 rows unrolled by code generation
    _check(_run(nest, spec, "llvm"), spec)


def test_row_reductions_fold_their_vector_partials_before_the_serial_sum():
    """64 partial sums per row (four AVX-512 vectors, ``REDUCE_VECTORS``) are added into 8 by
    vector operations, so the serial sum at the end of each row has 8 terms (layernorm 4096 x
    1024: auto / hand 0.91 -> 1.0)."""
    spec = make_layernorm((5, 256))
    nest = LoopNest(spec.outputs)
    report = str(nest.auto_schedule(AVX512))
    assert report.count("64 partial results in vector lanes, added into 8") == 2
    short = LoopNest(make_layernorm((5, 64)).outputs)      # rows of four vectors: two vectors of partials
    assert str(short.auto_schedule(AVX512)).count("32 partial results in vector lanes, added into 8") == 2
    assert "mean_rf_lanes" in str(nest) and "mean_rf_1_lanes" in str(nest)
    _check(_run(nest, spec, "llvm"), spec)
    _check(_run(nest, spec, "ireval"), spec)


def test_a_refused_template_drops_the_unrolls_it_noted():
    """Inside ``deferred_unrolls`` a template notes its full unrolls; a template refused after
    noting one is undone, its unrolls with it, so none is applied to a loop that is gone."""
    from loopnest.auto.schedule import AutoScheduleReport, _Planner
    from loopnest.auto.templates import deferred_unrolls, reduction
    A = Buffer("A", (4, 8), "float32")
    R = Reduce("R", (4,), Sum(), lambda i, k: A[i, k], (8,))
    nest = LoopNest([R])
    target = Target(vector_bits=256, cores=1)
    planner = _Planner(nest, target, AutoScheduleReport(target))

    noted = []

    def noted_then_refused():
        reduction(nest, R, {"unroll_k": 2})          # splits k_inner by 2, notes the unroll
        noted.append([lp.name for lp in pending])
        raise ScheduleError("refused after its unroll was noted")
    with deferred_unrolls() as pending:
        assert planner.attempt(reduction, nest, R, {"unroll_k": 4})
        kept = list(pending)
        assert not planner.attempt(noted_then_refused)
    assert noted == [["k_inner", "k_inner_inner"]]
    assert [lp.name for lp in kept] == ["k_inner"] and pending == kept
    assert [s["op"] for s in nest.history] == ["split_with_tail"]


def test_a_symbolic_transpose_has_a_strip_of_tiles_for_every_core():
    """With symbolic sizes the transpose's tiles are square, so that the parallel loop over
    their strips has work for every core at any size above one tile (strips of 1024 rows
    left one of two cores idle below 2048 rows: 4000 x 1000 in 2.9 ms, 1.8 with square
    tiles)."""
    M, N = Var("M"), Var("N")
    A = Buffer("A", (M, N), "float32")
    T = Compute("T", (N, M), lambda j, i: A[i, j])
    nest = LoopNest([T])
    assert "64x64 tiles" in str(nest.auto_schedule(AVX512))
    par = nest.root.stmts[0]
    assert par.kind == "parallel" and "floordiv(N + 63, 64)" in str(par.stop), str(nest)
    kernel = build(nest, [A, T, M, N], target="llvm")
    for m, n in ((70, 130), (1, 5), (64, 64)):
        a = np.random.default_rng(m).standard_normal((m, n)).astype(np.float32)
        t = np.full((n, m), np.nan, np.float32)
        kernel(a, t, m, n)
        np.testing.assert_array_equal(t, a.T)


def _small_product(rows: int, transposed: bool):
    """(nest, reference) of x @ W.T (W 80 x 96) or x @ B (B 96 x 80) with ``rows`` rows of x,
    auto-scheduled for AVX-512; the reference runs it on LLVM against numpy."""
    rng = np.random.default_rng(rows)
    x = Buffer("x", (rows, 96), "float32")
    W = Buffer("W", (80, 96) if transposed else (96, 80), "float32")
    Y = Reduce("Y", (rows, 80), Sum(), (lambda i, j, k: x[i, k] * W[j, k]) if transposed
               else (lambda i, j, k: x[i, k] * W[k, j]), (96,))
    nest = LoopNest([Y])
    report = str(nest.auto_schedule(AVX512))

    def check():
        a, w = rng.standard_normal((rows, 96), dtype=np.float32), rng.standard_normal(W.shape, dtype=np.float32)
        y = np.full((rows, 80), np.nan, np.float32)
        build(nest, [x, W, Y], target="llvm")(a, w, y)
        np.testing.assert_allclose(y, a.astype(np.float64) @ (w.T if transposed else w), rtol=1e-5, atol=1e-5)
    return nest, report, check


def test_a_one_row_matrix_product_is_dot_products_and_a_one_tile_one_reads_in_place():
    """``x @ W.T`` with one row of x is a dot product of x with each row of W (a reduction in
    vector lanes, W read once, not packed first: 0.158 -> 0.052 ms at 1024, PyTorch 0.052),
    with a few rows (``FEW_ROWS``) tiles of x's rows x a few of W's rows x vector lanes of
    partial sums in registers (``dot_product_tiles``: 5 rows 0.185 -> 0.08 ms, PyTorch 0.10);
    ``x @ B`` with rows that fit one register tile reads B's panels in place, each once
    (5 rows: 0.243 -> 0.164 ms)."""
    cases = ((1, True, "(reduction)"), (3, True, "tiles of 3 rows x 8 rows of W x 16 lanes"),
             (10, True, "tiles of 10 rows x 2 rows of W"), (5, False, "register-blocked 5 rows"))
    for rows, transposed, words in cases:
        nest, report, check = _small_product(rows, transposed)
        assert words in report and "W_pack" not in str(nest), str(nest)
        check()


def test_a_few_row_product_streams_b_in_slices_of_rows_per_core():
    """``x @ B`` with at most ``FEW_ROWS`` rows is one register tile of all the rows (up to
    ``STREAM_MAX_ROWS``, row tiles that divide them), B's rows in slices of ``STREAM_SLICE``,
    each core's block of columns outside the slices (1024 x 1024, 12 rows: 0.54 -> 1.02 of
    PyTorch); more rows, a number of them no tile divides, or columns that do not cut into
    whole tiles per core keep the packed tiles."""
    from loopnest.auto.schedule import STREAM_SLICE
    rng = np.random.default_rng(11)
    cases = ((2, 128, True), (5, 256, True), (12, 64, True), (16, 64, True), (20, 128, True), (13, 128, False),
             (25, 128, False), (5, 80, False))
    for rows, cols, streamed in cases:
        x, B = Buffer("x", (rows, 4 * STREAM_SLICE), "float32"), Buffer("B", (4 * STREAM_SLICE, cols), "float32")
        Y = Reduce("Y", (rows, cols), Sum(), lambda i, j, k: x[i, k] * B[k, j], (4 * STREAM_SLICE,))
        nest = LoopNest([Y])
        report = str(nest.auto_schedule(AVX512))
        assert (f"B streamed in slices of {STREAM_SLICE} rows" in report) == streamed, report
        if streamed:
            loops = [(lp.name, lp.kind) for lp in nest.get_loops_for(Y)]
            # the columns of a core, then the slices, then its column tiles (where it has several)
            assert loops[0][0].startswith("j_outer") and loops[0][1] == "parallel", str(nest)
            assert loops[1][0] == "k_outer" and loops[2][0] in ("j_outer_inner", "i_outer"), str(nest)
            tile = {16: 8, 20: 5}.get(rows, rows)      # the rows of a tile: all of them up to FEW_ROWS
            assert f"register-blocked {tile} rows" in report
            assert "B_pack" not in str(nest)
        a, b = rng.standard_normal(x.shape, dtype=np.float32), rng.standard_normal(B.shape, dtype=np.float32)
        y = np.full((rows, cols), np.nan, np.float32)
        build(nest, [x, B, Y], target="llvm")(a, b, y)
        np.testing.assert_allclose(y, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)


def test_a_reduction_to_a_scalar_is_scheduled_and_right():
    A = Buffer("A", (100,), "float32")
    S = Reduce("S", (), Sum(), lambda k: A[k], (100,))
    nest = LoopNest([S])
    nest.auto_schedule(AVX512)
    a = np.random.default_rng(5).standard_normal(100).astype(np.float32)
    s = np.full((), np.nan, np.float32)
    build(nest, [A, S], target="llvm")(a, s)
    np.testing.assert_allclose(s, a.astype(np.float64).sum(), rtol=1e-5)


def test_a_tiny_innermost_dimension_under_a_costly_body_is_unrolled_below_a_vector_loop():
    """RoPE over interleaved pairs: the pair dimension (2) is unrolled, the one above it
    vectorized (the copies share their sin and cos, the ``c == 0`` tests go), and the values
    are numpy's in float64; a cheap body over the same shape is flattened as before."""
    import te
    from te import cast, float32, select
    seq, half = 40, 32
    X = Buffer("X", (seq, half, 2), float32)
    F = Buffer("F", (half,), float32)

    def turn(p, k, c):
        a = cast(p, float32) * F[k]
        return select(c == 0, X[p, k, 0] * te.cos(a) - X[p, k, 1] * te.sin(a),
                      X[p, k, 0] * te.sin(a) + X[p, k, 1] * te.cos(a))
    Y = Compute("Y", (seq, half, 2), turn)
    nest = LoopNest([Y])
    report = nest.auto_schedule(Target(vector_bits=512, vector_registers=32, cores=2))
    assert "innermost dimension of 2 unrolled, the one above vectorized 16 wide" in str(report)
    assert "select" not in str(nest) and str(nest).count("vectorized for") == 1
    rng = np.random.default_rng(0)
    x = rng.standard_normal((seq, half, 2)).astype(np.float32)
    f = (10000.0 ** (-np.arange(half) / half)).astype(np.float32)
    y = np.full_like(x, np.nan)
    build(nest, [X, F, Y], target="llvm")(x, f, y)
    a = (np.arange(seq, dtype=np.float32)[:, None] * f).astype(np.float64)     # the float32 angle
    want = np.stack([x[..., 0] * np.cos(a) - x[..., 1] * np.sin(a), x[..., 0] * np.sin(a) + x[..., 1] * np.cos(a)], -1)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    cheap = Compute("C", (seq, half, 2), lambda p, k, c: X[p, k, c] * 2.0)
    plain = LoopNest([cheap])
    assert "flattened" in str(plain.auto_schedule(Target(vector_bits=512, vector_registers=32, cores=2)))
