"""Vectorized loops guarded by an ``if`` (``split_with_mask``) or holding an ``if_then_else``
whose condition varies across the lanes (the border of a padded input): the LLVM target's
pass ``version_guarded_vectors`` versions them (``loopnest.vectorize_lowering.versioned``):
vector statements where the conditions hold for every lane, elsewhere (the last, partial
vector; the vectors that straddle a border) the vector statements with the lanes masked where
they store to a buffer of their thread (``masked_lanes``), else the loop run serially.

LLVM's loop vectorizer does not if-convert (``codegen.llvm.jit.LLVM_OPTIONS``), so before
this a guarded vectorized loop stayed scalar (a row sum over a symbolic N under
``schedule="auto"`` ran 3x slower) and LLVM printed "loop not vectorized" warnings on stderr
for it. Every result is checked against numpy, on IREval and LLVM.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codegen import build
from loopnest import LoopNest
from loopnest.stmt import Block, Cond, For, ForKind, Store, iter_stmts
from loopnest.passes import legalize_for_target
from loopnest.vectorize_lowering import lower_vectorized_loops, version_guarded_loops
from te import Buffer, Compute, Reduce, Sum, Var, cast, float32, if_then_else, int32, maximum, minimum

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _masked_scale(n: int, lanes: int):
    A = Buffer("A", (n,), float32)
    B = Compute("B", (n,), lambda i: A[i] * 2.0 + 1.0)
    nest = LoopNest([B])
    (i,) = nest.get_loops_for(B)
    _, inner = nest.split_with_mask(i, lanes)
    nest.vectorize(inner)
    return nest, A, B


def test_the_masked_loop_becomes_a_vector_statement_and_a_serial_remainder():
    nest, _, _ = _masked_scale(1000, 64)
    prepared = nest.prepare_for_codegen()
    assert "vectorized for" in str(prepared)     # versioned for LLVM only: CUDA keeps the loop
    text = str(legalize_for_target(prepared, "llvm"))
    assert "if (i_outer * 64 < 1000 && i_outer * 64 + 63 < 1000 && i_outer * 64 <= i_outer * 64 + 63) {" in text
    assert "B[ramp(i_outer * 64, 1, 64)] = A[ramp(i_outer * 64, 1, 64)] * broadcast(2.0f, 64)" in text
    assert "vectorized" not in text and "for (int i_inner = 0; i_inner < 64; i_inner++) {" in text


@pytest.mark.parametrize("n,lanes", [(1000, 64), (1024, 64), (5, 8), (8, 8), (17, 16), (1, 4)])
@pytest.mark.parametrize("target", ["ireval", "llvm"])
def test_masked_vector_loops_compute_every_element_once(n, lanes, target):
    nest, A, B = _masked_scale(n, lanes)
    a = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    b = np.full(n, np.nan, np.float32)
    build(nest, [A, B], target=target)(a, b)
    np.testing.assert_allclose(b, a.astype(np.float64) * 2 + 1, rtol=1e-6)


@pytest.mark.parametrize("n", [1, 15, 16, 1000, 1027])
def test_symbolic_row_sum_under_auto_is_vector_code_and_right(n):
    N = Var("N")
    A = Buffer("A", (8, N), float32)
    S = Reduce("S", (8,), Sum(), lambda i, k: A[i, k], (N,))
    k = build(LoopNest([S]), [A, S], target="llvm", schedule="auto")
    assert any(op["op"] == "split_with_mask" for op in k.schedule_history)
    assert "fadd contract <64 x float>" in k.optimized_source, "the masked reduction lanes were left scalar"
    a = np.random.default_rng(n).standard_normal((8, n)).astype(np.float32)
    s = np.zeros(8, np.float32)
    k(a, s)
    np.testing.assert_allclose(s, a.astype(np.float64).sum(axis=1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", ["ireval", "llvm"])
def test_vectorized_padding_is_vector_code_inside_and_right_at_the_borders(target):
    h, w = 13, 29
    X = Buffer("X", (3, h, w), float32)
    P = Compute("P", (3, h + 2, w + 2), lambda c, y, x: if_then_else(
        (y >= 1) & (y <= h) & (x >= 1) & (x <= w), X[c, y - 1, x - 1], 0.0))
    nest = LoopNest([P])
    _, inner, _ = nest.split_with_tail(nest.get_loops_for(P)[2], 8)
    nest.vectorize(inner)
    k = build(nest, [X, P], target=target)
    if target == "llvm":
        assert "load <8 x float>" in k.optimized_source
    x = np.random.default_rng(1).standard_normal((3, h, w)).astype(np.float32)
    p = np.full((3, h + 2, w + 2), np.nan, np.float32)
    k(x, p)
    np.testing.assert_array_equal(p, np.pad(x, ((0, 0), (1, 1), (1, 1))))


def test_a_guard_that_wraps_between_the_lanes_takes_the_serial_path():
    """``i * 268435456 >= -1073741824`` holds at lanes 0 and 15 of int32 and not at 8-11,
    where the product wraps past 2^31: checking the ends alone stored A there."""
    A = Buffer("A", (64,), float32)
    B = Compute("B", (64,), lambda i: if_then_else(i * 268435456 >= -1073741824, A[i], -1.0))
    nest = LoopNest([B])
    _, inner, _ = nest.split_with_tail(nest.get_loops_for(B)[0], 16)
    nest.vectorize(inner)
    a = np.arange(64, dtype=np.float32)
    holds = np.arange(64, dtype=np.int32) * np.int32(268435456) >= -1073741824
    assert not holds[8] and holds[0] and holds[15]
    for target in ("ireval", "llvm"):
        b = np.zeros(64, np.float32)
        build(nest, [A, B], target=target)(a, b)
        np.testing.assert_array_equal(b, np.where(holds, a, -1.0).astype(np.float32), err_msg=target)


def test_a_vectorized_loop_around_a_vectorized_loop_asks_llvm_nothing():
    """Seed 103, case 26: a vectorized loop of 9 around another stays a loop whose body
    computes on 9-lane vectors (gathers, conversions, a max); LLVM's loop vectorizer takes
    scalar code only, and printed "loop not vectorized: instruction return type cannot be
    vectorized" when asked."""
    from fuzz.check import stderr_of_native_code
    A, T = Buffer("A", (10, 7), float32), Buffer("T", (9, 9), float32)
    B = Compute("B", (9, 9), lambda i, j: maximum(cast(T[8 - j, minimum(i, 8)], "int32"),
                                                  cast(A[i % 3, minimum(j, 6)], "int32")))
    nest = LoopNest([B])
    i, j = nest.get_loops_for(B)
    nest.vectorize(j)
    nest.vectorize(i)
    with stderr_of_native_code() as printed:
        kernel = build(nest, [A, T, B], target="llvm", cache=False)
    assert "not vectorized" not in printed["text"], printed["text"]
    rng = np.random.default_rng(103)
    a = rng.integers(-3, 4, (10, 7)).astype(np.float32)
    t = rng.integers(-3, 4, (9, 9)).astype(np.float32)
    b = np.zeros((9, 9), np.int32)
    kernel(a, t, b)
    ii, jj = np.meshgrid(np.arange(9), np.arange(9), indexing="ij")
    np.testing.assert_array_equal(b, np.maximum(t[8 - jj, np.minimum(ii, 8)], a[ii % 3, np.minimum(jj, 6)]))


def test_llvm_prints_no_vectorizer_warnings():
    """Neither a masked vectorized loop nor one whose ``if_then_else`` keeps it a loop (its
    body is several blocks, which LLVM cannot vectorize without if-conversion) makes LLVM
    write "loop not vectorized" to stderr."""
    script = textwrap.dedent("""
        import numpy as np
        from te import Buffer, Compute, if_then_else
        from loopnest import LoopNest
        from codegen import build
        A = Buffer("A", (4096,), "float32")
        B = Compute("B", (4096,), lambda i: A[i] * 2.0)
        C = Compute("C", (4096,), lambda i: if_then_else(A[i] > 0.0, A[(i * 7) % 4096], 0.0))  # data dependent
        nest = LoopNest([B, C])
        _, inner = nest.split_with_mask(nest.get_loops_for(B)[0], 64)
        nest.vectorize(inner)
        _, inner, _ = nest.split_with_tail(nest.get_loops_for(C)[0], 64)
        nest.vectorize(inner)
        k = build(nest, [A, B, C], target="llvm", cache=False)
        a = np.random.default_rng(0).standard_normal(4096).astype(np.float32)
        b, c = np.zeros_like(a), np.zeros_like(a)
        k(a, b, c)
        idx = (np.arange(4096) * 7) % 4096
        assert np.array_equal(b, a * 2) and np.array_equal(c, np.where(a > 0, a[idx], 0))
        print("ok")
    """)
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("TE_LLVM_CACHE_DIR", None)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    assert "not vectorized" not in out.stderr, out.stderr


def test_conditions_that_are_not_intervals_stay_loops():
    A, B = Buffer("A", (64,), float32), Buffer("B", (64,), float32)
    i, o = Var("i"), Var("o")
    guards = [i % 2 == 0,                          # not affine
              o * 8 + i != 5,                      # != : not an interval
              cast(o * 8 + i, "uint32") - 3 < 4,   # wraps
              A[i] > 0.0]                          # loads
    for guard in guards:
        body = Block((Cond(guard, Block((Store(B, (o * 8 + i,), A[o * 8 + i] + 1.0),))),))
        out = version_guarded_loops(lower_vectorized_loops(Block((For(i, 0, 8, body, ForKind.VECTORIZED),))))
        kinds = [s.kind for s in iter_stmts(out) if isinstance(s, For)]
        assert kinds == [ForKind.VECTORIZED], f"{guard}: {out}"


@settings(max_examples=60, deadline=None)
@given(a=st.one_of(st.integers(-3, 3), st.sampled_from([1 << 28, -(1 << 28), 3 << 28, 1 << 30])),
       b=st.integers(-20, 20), c=st.integers(-(1 << 30), 40), d=st.integers(-20, 20),
       op=st.sampled_from(["<", "<=", ">", ">=", "=="]), both=st.booleans(),
       lanes=st.sampled_from([2, 4, 8, 16]), outer=st.integers(1, 5), as_select=st.booleans())
def test_versioned_loops_run_exactly_the_iterations_the_guard_allows(a, b, c, d, op, both, lanes, outer, as_select):
    """Random affine guards over an outer x vector nest, as an ``if`` around the store or an
    ``if_then_else`` in its value, some with steps that make int32 wrap inside a vector:
    the lowered nest (IREval) and the LLVM kernel store exactly where the guard holds, as
    numpy evaluates it with the same wrapping arithmetic."""
    n = outer * lanes
    A, B = Buffer("A", (n,), int32), Buffer("B", (n,), int32)
    o, i = Var("o"), Var("i")
    x = o * lanes + i
    lhs = x * a + b
    guard = {"<": lhs < c, "<=": lhs <= c, ">": lhs > c, ">=": lhs >= c, "==": lhs == c}[op]
    if both:
        guard = guard & (x >= d)
    if as_select:
        body = Block((Store(B, (x,), if_then_else(guard, A[x] * 3 + 1, -99)),))
    else:
        body = Block((Cond(guard, Block((Store(B, (x,), A[x] * 3 + 1),))),))
    root = Block((For(o, 0, outer, Block((For(i, 0, lanes, body, ForKind.VECTORIZED),))),))
    lowered = version_guarded_loops(lower_vectorized_loops(root))

    class Nest:
        prepared = True
        inputs, outputs, intermediates = [A], [B], []
    nest = Nest()
    nest.root = lowered
    unlowered = Nest()
    unlowered.root = root               # LLVM versions it in its own pass
    av = np.arange(n, dtype=np.int32) * 5 - 7
    xs = np.arange(n, dtype=np.int32)
    lv = xs * np.int32(a) + np.int32(b)     # wraps as int32 does
    want = {"<": lv < c, "<=": lv <= c, ">": lv > c, ">=": lv >= c, "==": lv == c}[op]
    if both:
        want &= xs >= d
    for target, tree in (("ireval", nest), ("llvm", unlowered)):
        bv = np.full(n, -99, np.int32)
        build(tree, [A, B], target=target)(av, bv)
        np.testing.assert_array_equal(bv, np.where(want, av * 3 + 1, -99), err_msg=target)


def test_a_vectorized_loop_of_48_lanes_is_computed_as_vectors_of_32_and_16():
    """LLVM took a <48 x float> accumulator apart element by element (a 6 x 48 matmul tile ran
    at 5 GFLOP/s, a 6 x 64 one at 150): lanes that are not a power of two go in pieces."""
    from bench.schedules import matmul_schedule
    m, n, k = 12, 96, 16
    A, B = Buffer("A", (m, k), float32), Buffer("B", (k, n), float32)
    C = Reduce("C", (m, n), Sum(), lambda i, j, r: A[i, r] * B[r, j], (k,))
    nest = LoopNest([C])
    matmul_schedule(nest, C, rows=6, cols=48)
    prepared = str(nest.copy().prepare_for_codegen())
    assert "ramp(i_inner * 48, 1, 32)" in prepared and "ramp(i_inner * 48 + 32, 1, 16)" in prepared
    assert ", 48)" not in prepared
    kernel = build(nest, [A, B, C], target="llvm")
    assert "x float>" in kernel.source and "<48 x float>" not in kernel.source
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    kernel(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def _column_sums_in_masked_tiles():
    """Column sums of a 3 x N input in tiles of 16 columns, the last one masked, each tile
    accumulated in a local buffer (registers) over the rows."""
    N = Var("N")
    A = Buffer("A", (3, N), float32)
    S = Reduce("S", (N,), Sum(), lambda j, i: A[i, j], (3,))
    nest = LoopNest([S])
    j, i = nest.get_loops_for(S)
    nest.reorder([j, i], [1, 0])                  # the init store gets a loop of its own
    init, rows = [nest.loop(s.var) for s in nest.root.stmts]
    (j,) = nest.get_inner_loops(rows)
    jo, ji = nest.split_with_mask(j, 16)
    nest.reorder([rows, jo], [1, 0])
    init_o, init_i = nest.split_with_mask(init, 16)
    jo = nest.fuse([init_o, jo])
    nest.cache_accesses(nest.buffer("S"), "S_tile", jo)
    nest.vectorize(init_i)
    nest.vectorize(ji)
    return nest, A, S, N


def test_a_masked_tile_of_a_local_buffer_is_vector_code_and_right():
    """Where the guarded lanes store to a buffer private to the thread (allocated inside it)
    and inside it in every lane, the partial vector is vector code too (``masked_lanes``):
    the store keeps the old value in the lanes outside the guard (``select``), a load that
    may leave its buffer reads only the guard's lanes (``if_then_else``, an
    ``llvm.masked.load``). A store to the output, an argument, stays a loop."""
    nest, A, S, N = _column_sums_in_masked_tiles()
    text = str(legalize_for_target(nest.prepare_for_codegen(), "llvm"))
    accumulate = [line for line in text.splitlines() if line.strip().startswith("S_tile[ramp(0, 1, 16)] = select(")]
    assert len(accumulate) == 2 and "if_then_else(ramp(" in accumulate[1], text     # the init, the sum
    assert "] = S_tile[S_tile_i0];" in text          # the copy out to the output: a serial loop
    kernel = build(nest, [A, S, N], target="llvm", cache=False)
    assert "llvm.masked.load" in kernel.optimized_source
    reference = build(nest, [A, S, N], target="ireval")
    rng = np.random.default_rng(3)
    for n in (0, 1, 15, 16, 17, 33, 40):
        a = rng.standard_normal((3, n)).astype(np.float32)
        s, s_ref = np.full(n, np.nan, np.float32), np.full(n, np.nan, np.float32)
        kernel(a, s, n)
        reference(a, s_ref, n)
        np.testing.assert_array_equal(s, s_ref)
        np.testing.assert_allclose(s, a.astype(np.float64).sum(axis=0), rtol=1e-6, atol=1e-6)


def test_a_vector_if_then_else_that_loads_is_one_masked_load_on_llvm_only():
    """``if_then_else(mask, A[ramp], 0)`` stays whole for LLVM (``llvm.masked.load``); CUDA
    computes it lane by lane."""
    nest, _, _, _ = _column_sums_in_masked_tiles()
    prepared = nest.prepare_for_codegen()
    assert "if_then_else(ramp(" in str(legalize_for_target(prepared, "llvm"))
    assert "if_then_else(ramp(" not in str(legalize_for_target(prepared, "cuda"))
