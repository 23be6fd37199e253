"""External calls (te.extern): IREval and LLVM against numpy, the refused transforms, the
verifier, the analyses and the bounds checks with an ExternCall in the nest."""
import ctypes

import numpy as np
import pytest

from codegen import BuildError, build
from loopnest import LoopNest, ScheduleError, VerifyError
from loopnest.analysis.bounds import access_bounds
from loopnest.analysis.dependences import compute_dependences
from loopnest.queries import external_buffers, stmt_free_vars, stmt_loaded_buffers, stmt_reads, stmt_stored_buffers
from loopnest.stmt import Block, ExternCall, For
from loopnest.verify import verify
from te import Buffer, Compute, Extern, Var
from te.extern import ExternFunc, extern_c_fn


def _view(ptr, shape, dtype=np.float32):
    """A numpy view of ``shape`` over the address ``ptr``."""
    n = int(np.prod(shape))
    buf = (ctypes.c_byte * (n * np.dtype(dtype).itemsize)).from_address(ptr)
    return np.frombuffer(buf, dtype).reshape(shape)


def _transpose_py(a, out):
    out[...] = a.T


def _transpose_shim(nbufs, data, ndims, shapes, strides):
    assert nbufs == 2 and ndims[0] == 2 and ndims[1] == 2
    m, n = shapes[0], shapes[1]
    assert (shapes[2], shapes[3]) == (n, m) and (strides[0], strides[1], strides[2], strides[3]) == (n, 1, m, 1)
    _view(data[1], (n, m))[...] = _view(data[0], (m, n)).T
    return 0


_TRANSPOSE_C = extern_c_fn(_transpose_shim)


def _transpose_nest(m=3, n=5):
    A = Buffer("A", (m, n), "float32")
    T = Extern("T", (n, m), [A], _transpose_py, c_fn=_TRANSPOSE_C, func_name="transpose")
    B = Compute("B", (n, m), lambda i, j: T[i, j] * 2.0 + 1.0)
    return A, T, B


def test_lowered_as_one_statement_and_printed():
    A, T, B = _transpose_nest()
    nest = LoopNest([B])
    assert isinstance(nest.root.stmts[0], ExternCall)
    assert str(nest).splitlines()[0] == "T = extern transpose(A);"
    assert nest.get_loops_for(T) == [] and len(nest.get_loops_for(B)) == 2
    nest.verify()


@pytest.mark.parametrize("target", ["ireval", "llvm"])
def test_extern_then_epilogue_matches_numpy(target):
    A, T, B = _transpose_nest()
    nest = LoopNest([B])
    nest.vectorize(nest.get_loops_for(B)[1])
    k = build(nest.prepare_for_codegen(), [A, B], target=target)
    a = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    b = np.zeros((5, 3), np.float32)
    k(a, b)
    np.testing.assert_allclose(b, a.T * 2 + 1, rtol=1e-6)


@pytest.mark.parametrize("target", ["ireval", "llvm"])
def test_extern_output_is_a_kernel_output_and_symbolic_shapes(target):
    m, n = Var("m"), Var("n")
    A = Buffer("A", (m, n), "float32")
    T = Extern("T", (n, m), [A], _transpose_py, c_fn=_TRANSPOSE_C)
    B = Compute("B", (n, m), lambda i, j: T[i, j] + 1.0)
    k = build(LoopNest([B, T]).prepare_for_codegen(), [A, B, T, m, n], target=target)
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    b, t = np.zeros((3, 4), np.float32), np.zeros((3, 4), np.float32)
    k(a, b, t, 4, 3)
    np.testing.assert_array_equal(t, a.T)
    np.testing.assert_array_equal(b, a.T + 1)


@pytest.mark.parametrize("target", ["ireval", "llvm"])
def test_extern_reads_a_computed_tensor(target):
    A = Buffer("A", (3, 5), "float32")
    P = Compute("P", (3, 5), lambda i, j: A[i, j] - 1.0)
    T = Extern("T", (5, 3), [P], _transpose_py, c_fn=_TRANSPOSE_C)
    B = Compute("B", (5, 3), lambda i, j: T[i, j] * 3.0)
    k = build(LoopNest([B]).prepare_for_codegen(), [A, B], target=target)
    a = np.arange(15, dtype=np.float32).reshape(3, 5)
    b = np.zeros((5, 3), np.float32)
    k(a, b)
    np.testing.assert_array_equal(b, (a - 1).T * 3)


def test_library_symbol_by_name():
    libc = ctypes.CDLL(None)
    f = ExternFunc("abs", library=None, c_fn=libc.abs)
    assert f.address == ctypes.cast(libc.abs, ctypes.c_void_p).value
    with pytest.raises(ValueError, match="cannot load"):
        ExternFunc("nope", library="libc.so.6", symbol="no_such_symbol_xyz")


def test_nonzero_status_raises():
    A = Buffer("A", (4,), "float32")
    bad = extern_c_fn(lambda *args: 3)
    T = Extern("T", (4,), [A], c_fn=bad, func_name="failing")
    B = Compute("B", (4,), lambda i: T[i] + 1.0)
    k = build(LoopNest([B]).prepare_for_codegen(), [A, B], target="llvm")
    with pytest.raises(RuntimeError, match="external function failing returned a non-zero status"):
        k(np.zeros(4, np.float32), np.zeros(4, np.float32))


def test_missing_backend_function_refused():
    A = Buffer("A", (4,), "float32")
    T = Extern("T", (4,), [A], lambda a, o: None)
    B = Compute("B", (4,), lambda i: T[i] + 1.0)
    nest = LoopNest([B]).prepare_for_codegen()
    with pytest.raises(BuildError, match="LLVM backend calls a C function"):
        build(nest, [A, B], target="llvm")
    T2 = Extern("T2", (4,), [A], c_fn=_TRANSPOSE_C)
    B2 = Compute("B2", (4,), lambda i: T2[i] + 1.0)
    with pytest.raises(BuildError, match="pass py_fn"):
        build(LoopNest([B2]).prepare_for_codegen(), [A, B2], target="ireval")


def test_cuda_refused():
    A, T, B = _transpose_nest()
    with pytest.raises(BuildError, match="external calls are not supported on the CUDA backend"):
        build(LoopNest([B]).prepare_for_codegen(), [A, B], target="cuda")


def test_extern_arguments_checked():
    A = Buffer("A", (4,), "float32")
    with pytest.raises(TypeError, match="needs a function"):
        Extern("T", (4,), [A])
    with pytest.raises(TypeError, match="must be Buffers or Tensors"):
        Extern("T", (4,), [1.0], lambda a, o: None)


def test_inline_and_compute_at_refused_naming_the_call():
    A = Buffer("A", (3, 5), "float32")
    P = Compute("P", (3, 5), lambda i, j: A[i, j] - 1.0)
    T = Extern("T", (5, 3), [P], _transpose_py, func_name="transpose")
    B = Compute("B", (5, 3), lambda i, j: T[i, j] * 3.0)
    nest = LoopNest([B])
    before = str(nest)
    with pytest.raises(ScheduleError, match="external call transpose"):
        nest.compute_inline(T)
    with pytest.raises(ScheduleError, match="external call transpose"):
        nest.compute_at(T, nest.get_loops_for(B)[0])
    with pytest.raises(ScheduleError, match="external call transpose reads it whole"):
        nest.compute_inline(P)
    with pytest.raises(ScheduleError, match="external call transpose reads it whole"):
        nest.compute_at(P, nest.get_loops_for(B)[0])
    assert str(nest) == before and nest.history == []


def test_fuse_across_the_call_refused():
    A = Buffer("A", (3, 5), "float32")
    P = Compute("P", (5, 3), lambda i, j: A[j, i] - 1.0)
    T = Extern("T", (3, 5), [P], _transpose_py, func_name="transpose")
    B = Compute("B", (5, 3), lambda i, j: T[j, i] * 3.0 + P[i, j])
    nest = LoopNest([B])
    before = str(nest)
    with pytest.raises(ScheduleError):
        nest.fuse([nest.get_loops_for(P)[0], nest.get_loops_for(B)[0]])
    assert str(nest) == before


def test_transforms_on_other_loops_still_work():
    A, T, B = _transpose_nest(8, 16)
    nest = LoopNest([B])
    i, j = nest.get_loops_for(B)
    io, ii, _ = nest.split_with_tail(i, 4)
    nest.reorder_axis(ii, j)
    nest.parallelize(io)
    nest.eliminate_dead_stores()
    k = build(nest.prepare_for_codegen(), [A, B], target="llvm")
    a = np.arange(128, dtype=np.float32).reshape(8, 16)
    b = np.zeros((16, 8), np.float32)
    k(a, b)
    np.testing.assert_array_equal(b, a.T * 2 + 1)


def test_dependences_and_bounds_see_whole_buffers():
    A, T, B = _transpose_nest(3, 5)
    nest = LoopNest([B])
    deps = [d for d in compute_dependences(nest) if d.buffer is T]
    assert [d.kind for d in deps] == ["flow"]
    assert str(deps[0]).startswith("flow dependence on T: `B[i, j] = T[i, j] * 2.0f + 1.0f` may read T[i, j], "
                                   "written by `T = extern transpose(A)`"), str(deps[0])
    call = nest.root.stmts[0]
    (lo0, hi0), (lo1, hi1) = [(b.min, b.max) for b in access_bounds(call, T)]
    assert (str(lo0), str(hi0), str(lo1), str(hi1)) == ("0", "4", "0", "2")
    assert [(str(b.min), str(b.max)) for b in access_bounds(call, A)] == [("0", "2"), ("0", "4")]


def test_queries_and_verifier():
    n = Var("n")
    A, T = Buffer("A", (n,), "float32"), Buffer("T", (n,), "float32")
    call = ExternCall(ExternFunc("f", py_fn=print), (T,), (A,))
    assert stmt_reads(call, A) and not stmt_reads(call, T)
    assert stmt_stored_buffers(call) == [T] and stmt_loaded_buffers(call) == [A]
    assert external_buffers(call) == [A, T] and stmt_free_vars(call) == [n]
    i = Var("i")
    with pytest.raises(VerifyError, match="external call f is inside a loop"):
        verify(Block([For(i, 0, 4, Block([call]))]))


@pytest.mark.parametrize("target", ["ireval", "llvm"])
def test_bounds_check_with_an_extern(target):
    m = Var("m")
    A = Buffer("A", (m, 5), "float32")
    T = Extern("T", (5, m), [A], _transpose_py, c_fn=_TRANSPOSE_C)
    B = Compute("B", (5, m), lambda i, j: T[i, j] * 2.0 + 1.0)
    k = build(LoopNest([B]).prepare_for_codegen(), [A, B, m], target=target, bounds_check=True)
    a = np.ones((3, 5), np.float32)
    b = np.zeros((5, 3), np.float32)
    k(a, b, 3)
    np.testing.assert_array_equal(b, np.full((5, 3), 3.0, np.float32))
    with pytest.raises(Exception):
        k(a, np.zeros((5, 2), np.float32), 3)


def test_auto_space_leaves_the_call_and_its_inputs_in_place():
    from tune.auto import auto_space, classify
    A = Buffer("A", (8, 16), "float32")
    P = Compute("P", (8, 16), lambda i, j: A[i, j] - 1.0)
    T = Extern("T", (16, 8), [P], _transpose_py, c_fn=_TRANSPOSE_C)
    B = Compute("B", (16, 8), lambda i, j: T[i, j] * 2.0)
    assert classify(T) == "extern"
    space = auto_space([B])
    names = [k.name for k in space.knobs]
    assert not any(n.startswith(("T.", "P.place")) for n in names), names
    rng = np.random.default_rng(0)
    for _ in range(4):
        nest = space.apply(space.sample(rng))
        assert any(isinstance(s, ExternCall) for s in nest.root.stmts)


def _split_shim(nbufs, data, ndims, shapes, strides):
    assert nbufs == 3 and [ndims[k] for k in range(3)] == [1, 1, 1]
    n = shapes[0]
    a = _view(data[0], (n,))
    _view(data[1], (n,))[...] = np.minimum(a, 0)
    _view(data[2], (n,))[...] = np.maximum(a, 0)
    return 0


_SPLIT_C = extern_c_fn(_split_shim)


@pytest.mark.parametrize("target", ["ireval", "llvm"])
def test_one_call_with_two_outputs(target):
    A = Buffer("A", (6,), "float32")

    def split(a, lo, hi):
        np.minimum(a, 0, out=lo)
        np.maximum(a, 0, out=hi)
    Lo, Hi = Extern(["Lo", "Hi"], [(6,), (6,)], [A], split, c_fn=_SPLIT_C)
    B = Compute("B", (6,), lambda i: Hi[i] * 2.0 - Lo[i])
    nest = LoopNest([B])
    assert str(nest).splitlines()[0] == "Lo, Hi = extern split(A);"
    assert sum(isinstance(s, ExternCall) for s in nest.root.stmts) == 1
    k = build(nest.prepare_for_codegen(), [A, B], target=target)
    a = np.array([-3, -1, 0, 1, 2, 5], np.float32)
    b = np.zeros(6, np.float32)
    k(a, b)
    np.testing.assert_array_equal(b, np.maximum(a, 0) * 2 - np.minimum(a, 0))
    lo = np.zeros(6, np.float32)
    only_lo = LoopNest([Lo])                 # Hi is an intermediate nothing reads: the call still writes it
    assert only_lo.eliminate_dead_stores() == [] and only_lo.intermediates == [Hi]
    k2 = build(only_lo.prepare_for_codegen(), [A, Lo], target=target)
    k2(a, lo)
    np.testing.assert_array_equal(lo, np.minimum(a, 0))
