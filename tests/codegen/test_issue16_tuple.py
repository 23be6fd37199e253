"""Tuple reductions (argmax, argmin, a user TupleReducer) and multi-output Compute: on
IREval, LLVM (unscheduled and scheduled) and CUDA (emitted C, host emulation), against
numpy, with numpy's tie and NaN rules; and the transforms they refuse."""
from __future__ import annotations

import numpy as np
import pytest

import te
from codegen import build
from codegen.cuda import nvcc_available
from codegen.cuda.emulate import host_compiler, run_on_host
from loopnest import LoopNest, ScheduleError
from te import ArgMax, ArgMin, Buffer, Compute, Reduce, TupleReducer, select

HAVE_EMU = host_compiler() is not None and nvcc_available()
TARGETS = ["ireval", "llvm", "cuda"]
N, K = 12, 10


def _run(nest, args, arrays, target):
    """Build ``nest`` for ``target`` and run it on ``arrays`` (inputs then outputs, in place)."""
    if target == "cuda":
        if not HAVE_EMU:
            pytest.skip("no nvcc / host compiler for CUDA emulation")
        loops = nest.get_loops_for(args[-1])
        outer, inner, _ = nest.split_with_tail(loops[0], 4)
        nest.set_gpu_block_index(outer, 0)
        nest.set_gpu_thread_index(inner, 0)
        run_on_host(build(nest, args, target="cuda"), *arrays)
    else:
        build(nest, args, target=target)(*arrays)


def _float_input(dtype="float32"):
    rng = np.random.default_rng(7)
    a = rng.integers(-3, 4, (N, K)).astype(dtype)     # small integers: many ties
    a[1, 3] = a[1, 6] = np.nan                         # the first NaN wins
    a[2, :] = np.nan                                   # all NaN
    a[3, :] = -np.inf                                  # all -inf: index 0 for argmax
    a[4, :] = np.inf
    a[5, :] = 2.0                                      # all equal: index 0
    a[6, 0] = np.inf
    a[6, 9] = np.nan
    return a


def _check_arg(kind, a, got_i, got_v):
    ref_i = np.argmax(a, axis=1) if kind is ArgMax else np.argmin(a, axis=1)
    np.testing.assert_array_equal(got_i, ref_i)
    np.testing.assert_array_equal(got_v, a[np.arange(a.shape[0]), ref_i])


# ------------------------------------------------------------------------------------
# argmax / argmin
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kind", [ArgMax, ArgMin])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_argmax_argmin_ties_and_nan_match_numpy(target, kind, dtype):
    A = Buffer("A", (N, K), dtype)
    I, V = Reduce("AM", (N,), kind(), lambda i, k: A[i, k], (K,))
    assert (I.name, I.dtype, V.name, V.dtype) == ("AM_index", te.int32, "AM_value", te.as_dtype(dtype))
    a = _float_input(dtype)
    got_i, got_v = np.full(N, -7, np.int32), np.zeros(N, dtype)
    _run(LoopNest([I, V]), [A, I, V], [a, got_i, got_v], target)
    _check_arg(kind, a, got_i, got_v)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["int32", "uint8", "int64"])
def test_argmin_integers_match_numpy(target, dtype):
    A = Buffer("A", (N, K), dtype)
    I, V = te.argmin("Am", (N,), lambda i, k: A[i, k], (K,))
    info = np.iinfo(dtype)
    a = np.random.default_rng(3).integers(0, 5, (N, K)).astype(dtype)
    a[0, :] = info.max                                 # the identity itself: index 0
    a[1, 4] = info.min
    got_i, got_v = np.zeros(N, np.int32), np.zeros(N, dtype)
    _run(LoopNest([I, V]), [A, I, V], [a, got_i, got_v], target)
    _check_arg(ArgMin, a, got_i, got_v)


@pytest.mark.parametrize("target", ["ireval", "llvm"])
def test_argmax_over_two_reduction_dims_gives_the_row_major_index(target):
    A = Buffer("A", (N, 3, 4), "float32")
    I, V = te.argmax("AM", (N,), lambda i, r, c: A[i, r, c], (3, 4))
    a = np.random.default_rng(1).integers(-2, 3, (N, 3, 4)).astype(np.float32)
    got_i, got_v = np.zeros(N, np.int32), np.zeros(N, np.float32)
    _run(LoopNest([I, V]), [A, I, V], [a, got_i, got_v], target)
    _check_arg(ArgMax, a.reshape(N, 12), got_i, got_v)


@pytest.mark.parametrize("schedule", ["split_vectorize", "split_parallel", "reorder", "split_reduction",
                                      "split_mask_reduction"])
def test_argmax_llvm_scheduled(schedule):
    A = Buffer("A", (N, K), "float32")
    I, V = Reduce("AM", (N,), ArgMax(), lambda i, k: A[i, k], (K,))
    nest = LoopNest([I, V])
    i, k = nest.get_loops_for(I)
    if schedule == "split_vectorize":
        _, inner, _ = nest.split_with_tail(i, 4)
        nest.vectorize(inner)
    elif schedule == "split_parallel":
        outer, _, _ = nest.split_with_tail(i, 4)
        nest.parallelize(outer)
    elif schedule == "reorder":
        nest.reorder_axis(i, k)
    elif schedule == "split_reduction":
        nest.split_with_tail(k, 3)
    else:
        nest.split_with_mask(k, 4)
    a = _float_input()
    got_i, got_v = np.zeros(N, np.int32), np.zeros(N, np.float32)
    build(nest, [A, I, V], target="llvm")(a, got_i, got_v)
    _check_arg(ArgMax, a, got_i, got_v)


@pytest.mark.parametrize("target", ["ireval", "llvm"])
def test_argmax_index_alone_and_read_by_a_consumer(target):
    A = Buffer("A", (N, K), "float32")
    I, V = te.argmax("AM", (N,), lambda i, k: A[i, k], (K,))
    Y = Compute("Y", (N,), lambda i: I[i] * 2 + 1)
    nest = LoopNest([Y])
    assert {b.name for b in nest.intermediates} == {"AM_index", "AM_value"}
    a = _float_input()
    y = np.zeros(N, np.int32)
    build(nest, [A, Y], target=target)(a, y)
    np.testing.assert_array_equal(y, np.argmax(a, axis=1) * 2 + 1)
    nest = LoopNest([I])                     # the value is an intermediate of the index's nest
    got = np.zeros(N, np.int32)
    build(nest, [A, I], target=target)(a, got)
    np.testing.assert_array_equal(got, np.argmax(a, axis=1))


def test_cuda_source_updates_the_index_before_the_value():
    A = Buffer("A", (N, K), "float32")
    I, V = te.argmax("AM", (N,), lambda i, k: A[i, k], (K,))
    nest = LoopNest([I, V])
    nest.set_gpu_block_index(nest.get_loops_for(I)[0], 0)
    src = build(nest, [A, I, V], target="cuda").source
    assert "isnan" in src
    assert src.index("AM_index[") < src.rindex("AM_value[")


def test_the_value_store_reads_the_old_value():
    A = Buffer("A", (N, K), "float32")
    I, V = te.argmax("AM", (N,), lambda i, k: A[i, k], (K,))
    text = str(LoopNest([I, V]))
    update = text[text.index("for (int k"):]
    assert update.index("AM_index[i] = select") < update.index("AM_value[i] = select")


# ------------------------------------------------------------------------------------
# a user-defined tuple reducer
# ------------------------------------------------------------------------------------
def _sum_and_last_positive():
    return TupleReducer(lambda a, x: (a[0] + x[0], select(x[0] > 0.0, x[1], a[1])), (0.0, -1),
                        names=("sum", "last"))


@pytest.mark.parametrize("target", TARGETS)
def test_user_tuple_reducer(target):
    A = Buffer("A", (N, K), "float32")
    S, L = Reduce("S", (N,), _sum_and_last_positive(), lambda i, k: (A[i, k], k), (K,))
    a = np.random.default_rng(2).integers(-3, 2, (N, K)).astype(np.float32)
    a[0, :] = -1.0
    got_s, got_l = np.zeros(N, np.float32), np.zeros(N, np.int32)
    _run(LoopNest([S, L]), [A, S, L], [a, got_s, got_l], target)
    np.testing.assert_allclose(got_s, a.sum(axis=1))
    want = np.array([max((k for k in range(K) if row[k] > 0), default=-1) for row in a])
    np.testing.assert_array_equal(got_l, want)


def test_tuple_reducer_whose_values_read_each_other_is_refused():
    A = Buffer("A", (N, K), "float32")
    swap = TupleReducer(lambda a, x: (a[1] + x[0], a[0] + x[1]), (0.0, 0.0))
    with pytest.raises(ValueError, match="cycle"):
        Reduce("W", (N,), swap, lambda i, k: (A[i, k], A[i, k]), (K,))


def test_tuple_reducer_misuse_is_refused():
    A = Buffer("A", (N, K), "float32")
    with pytest.raises(TypeError, match="one value compared"):
        Reduce("AM", (N,), ArgMax(), lambda i, k: (A[i, k], k), (K,))
    with pytest.raises(TypeError, match="tuple of expressions"):
        Reduce("S", (N,), _sum_and_last_positive(), lambda i, k: A[i, k], (K,))
    with pytest.raises(TypeError, match="names 2 values"):
        Reduce("S", (N,), _sum_and_last_positive(), lambda i, k: (A[i, k], k, k), (K,))
    with pytest.raises(ValueError, match="2 outputs, 3 names"):
        Reduce(("a", "b", "c"), (N,), ArgMax(), lambda i, k: A[i, k], (K,))
    with pytest.raises(TypeError, match="identity must be a tuple of 2"):
        Reduce("S", (N,), TupleReducer(lambda a, x: (a[0] + x[0], a[1]), 0.0), lambda i, k: (A[i, k], k), (K,))


# ------------------------------------------------------------------------------------
# transforms on tuple reductions
# ------------------------------------------------------------------------------------
def _argmax_nest():
    A = Buffer("A", (N, K), "float32")
    I, V = te.argmax("AM", (N,), lambda i, k: A[i, k], (K,))
    Y = Compute("Y", (N,), lambda i: I[i] + 1)
    return LoopNest([Y]), I, V


@pytest.mark.parametrize("op", ["rfactor", "vectorize_k", "parallelize_k", "compute_at", "inline"])
def test_refused_transforms_leave_the_nest_unchanged(op):
    nest, I, V = _argmax_nest()
    before = str(nest)
    i, k = nest.get_loops_for(I)
    with pytest.raises(ScheduleError) as err:
        if op == "rfactor":
            nest.rfactor(I, k)
        elif op == "vectorize_k":
            nest.vectorize(k)
        elif op == "parallelize_k":
            nest.parallelize(k)
        elif op == "compute_at":
            nest.compute_at(V, nest.get_loops_for("Y")[0])
        else:
            nest.compute_inline(I)
    assert str(nest) == before
    msg = str(err.value)
    if op == "rfactor":
        assert "tuple reduction" in msg and "AM_value" in msg
    elif op in ("compute_at", "inline"):
        assert "computed together with" in msg


def test_reordering_the_reduction_outside_keeps_both_accumulators_legal():
    nest, I, V = _argmax_nest()
    i, k = nest.get_loops_for(I)
    nest.reorder_axis(i, k)
    text = str(nest)
    assert text.index("] = 0;") < text.index("for (int k")   # the inits are distributed out
    a = _float_input()
    y = np.zeros(N, np.int32)
    build(nest, [nest.inputs[0], nest.outputs[0]], target="llvm")(a, y)
    np.testing.assert_array_equal(y, np.argmax(a, axis=1) + 1)


# ------------------------------------------------------------------------------------
# multi-output Compute
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
def test_multi_output_compute(target):
    B = Buffer("B", (N,), "int32")
    Q, R = Compute(("Q", "R"), (N,), lambda i: (te.floordiv(B[i], 3), te.floormod(B[i], 3)))
    nest = LoopNest([Q, R])
    assert str(nest).count("for (") == 1
    b = np.arange(-5, N - 5, dtype=np.int32)
    q, r = np.zeros(N, np.int32), np.zeros(N, np.int32)
    _run(nest, [B, Q, R], [b, q, r], target)
    np.testing.assert_array_equal(q, b // 3)
    np.testing.assert_array_equal(r, b % 3)


@pytest.mark.parametrize("target", ["ireval", "llvm"])
def test_multi_output_compute_dtypes_schedule_and_consumer(target):
    A = Buffer("A", (N, 8), "float32")
    S, C = Compute(("S", "C"), (N, 8), lambda i, j: (te.sin(A[i, j]), A[i, j] * 2.0), dtype=(None, "float64"))
    assert (S.dtype, C.dtype) == (te.float32, te.float64)
    Y = Compute("Y", (N, 8), lambda i, j: S[i, j] + te.cast(C[i, j], "float32"))
    nest = LoopNest([Y, S])
    i, j = nest.get_loops_for(S)
    nest.vectorize(j)
    nest.parallelize(i)
    a = np.random.default_rng(4).uniform(-2, 2, (N, 8)).astype(np.float32)
    y, s = np.zeros((N, 8), np.float32), np.zeros((N, 8), np.float32)
    build(nest, [A, Y, S], target=target)(a, y, s)
    np.testing.assert_allclose(s, np.sin(a), rtol=1e-6)
    np.testing.assert_allclose(y, np.sin(a) + a * 2, rtol=1e-6)


def test_multi_output_compute_misuse_is_refused():
    A = Buffer("A", (N,), "float32")
    with pytest.raises(TypeError, match="tuple of 2 expressions"):
        Compute(("Q", "R"), (N,), lambda i: A[i])
    with pytest.raises(TypeError, match="give a tuple of names"):
        Compute("Q", (N,), lambda i: (A[i], A[i]))
    with pytest.raises(ValueError, match="distinct names"):
        Compute(("Q", "Q"), (N,), lambda i: (A[i], A[i]))
    with pytest.raises(TypeError, match="tuple of 2 dtypes"):
        Compute(("Q", "R"), (N,), lambda i: (A[i], A[i]), dtype="float64")
    Q, R = Compute(("Q", "R"), (N,), lambda i: (A[i] + 1.0, A[i] * 2.0))
    Y = Compute("Y", (N,), lambda i: Q[i] + R[i])
    nest = LoopNest([Y])
    with pytest.raises(ScheduleError, match="computed together with R"):
        nest.compute_inline(Q)


@pytest.mark.parametrize("target", ["ireval", "llvm"])
def test_argmax_signed_zeros_and_empty_reduction(target):
    Kv = te.Var("Kv", te.int32)
    A = Buffer("A", (3, Kv), "float32")
    I, V = te.argmax("AM", (3,), lambda i, k: A[i, k], (Kv,))
    kernel = build(LoopNest([I, V]), [A, I, V, Kv], target=target)
    a = np.array([[-0.0, 0.0], [0.0, -0.0], [np.nan, np.nan]], np.float32)
    got_i, got_v = np.full(3, 5, np.int32), np.zeros(3, np.float32)
    kernel(a, got_i, got_v, 2)
    np.testing.assert_array_equal(got_i, np.argmax(a, axis=1))
    assert np.signbit(got_v[0]) and not np.signbit(got_v[1])     # the first of equal zeros
    empty = np.zeros((3, 0), np.float32)
    kernel(empty, got_i, got_v, 0)                                 # numpy raises; here the identity
    np.testing.assert_array_equal(got_i, 0)
    np.testing.assert_array_equal(got_v, -np.inf)


@pytest.mark.parametrize("target", ["ireval", "llvm"])
def test_argmin_two_spatial_dims_reordered_and_tiled(target):
    A = Buffer("A", (6, 8, K), "float32")
    I, V = te.argmin("Am", (6, 8), lambda i, j, k: A[i, j, k], (K,))
    nest = LoopNest([I, V])
    i, j, k = nest.get_loops_for(I)
    nest.reorder_axis(i, j)
    j, i, k = nest.get_loops_for(I)
    nest.tile(j, i, 4, 3)
    a = np.random.default_rng(9).integers(-2, 3, (6, 8, K)).astype(np.float32)
    a[2, 5, 4] = np.nan
    got_i, got_v = np.zeros((6, 8), np.int32), np.zeros((6, 8), np.float32)
    build(nest, [A, I, V], target=target)(a, got_i, got_v)
    np.testing.assert_array_equal(got_i, np.argmin(a, axis=2))
    np.testing.assert_array_equal(got_v, np.min(a, axis=2))
