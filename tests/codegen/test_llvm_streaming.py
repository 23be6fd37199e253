"""Streaming (non-temporal) stores of the LLVM backend: which outputs get them, and that
kernels using them, serial and parallel, still compute the right values.

The threshold is lowered for the tests (``build._STREAMING``) so small arrays qualify.
"""
from __future__ import annotations

import platform

import numpy as np
import pytest

from codegen import build
from codegen.kernel import make_params
from codegen.llvm import build as llvm_build
from codegen.llvm import set_num_threads
from codegen.llvm.emit import streaming_outputs
from loopnest import LoopNest
from te import Buffer, Compute, Reduce, Sum, Var, float32


@pytest.fixture
def small_threshold():
    saved = list(llvm_build._STREAMING)
    llvm_build._STREAMING[:] = [4096]
    yield 4096
    llvm_build._STREAMING[:] = saved


def _vector_nest(outputs, lanes=8, parallel=True):
    nest = LoopNest(outputs)
    for t in outputs:
        loops = nest.get_loops_for(t)
        _, vi, _ = nest.split_with_tail(loops[-1], lanes)
        nest.vectorize(vi)
        if parallel:
            nest.parallelize(nest.get_loops_for(t)[0])
    return nest


def test_only_large_write_only_outputs_stream():
    A = Buffer("A", (64, 64), float32)
    B = Compute("B", (64, 64), lambda i, j: A[i, j] * 2.0)
    C = Compute("C", (64, 64), lambda i, j: B[i, j] + 1.0)        # reads B: B must not stream
    nest = LoopNest([B, C]).prepare_for_codegen()
    params = make_params(nest, [A, B, C])
    ids = streaming_outputs(nest.root, params, 4096)
    assert ids == frozenset({id(C)})
    assert streaming_outputs(nest.root, params, 0) == frozenset()
    assert streaming_outputs(nest.root, params, 1 << 20) == frozenset()   # arguments too small
    N = Var("N")
    D = Buffer("D", (N,), float32)
    E = Compute("E", (N,), lambda i: D[i] + 1.0)                         # symbolic size: only at 1 byte
    nest2 = LoopNest([E]).prepare_for_codegen()
    assert streaming_outputs(nest2.root, make_params(nest2, [D, E]), 2) == frozenset()
    # 1 byte (the random tester's threshold): every output never read, whatever its size
    assert streaming_outputs(nest2.root, make_params(nest2, [D, E]), 1) == frozenset({id(E)})


@pytest.mark.parametrize("parallel", [False, True])
def test_streaming_kernel_values(small_threshold, parallel):
    n = 4099                               # a vector tail, and rows split across threads
    A = Buffer("A", (n,), float32)
    Bb = Buffer("Bb", (n,), float32)
    Y = Compute("Y", (n,), lambda i: A[i] * 2.0 + Bb[i])
    k = build(_vector_nest([Y], parallel=parallel), [A, Bb, Y], target="llvm")
    assert "!nontemporal" in k.source and "sfence" in k.source
    rng = np.random.default_rng(0)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    set_num_threads(2)
    try:
        for _ in range(20):
            y = np.full(n, np.nan, np.float32)
            k(a, b, y)
            assert np.array_equal(y, a * 2 + b)
    finally:
        set_num_threads(None)


def test_streaming_output_unaligned_view(small_threshold):
    n = 2048
    A = Buffer("A", (n,), float32)
    Y = Compute("Y", (n,), lambda i: A[i] - 3.0)
    Z = Buffer("Z", (n,), float32)
    W = Compute("W", (n,), lambda i: Z[i] * 0.5)
    k = build(_vector_nest([Y, W], parallel=False), [A, Z, Y, W], target="llvm")
    assert "!nontemporal" in k.source
    a = np.arange(n + 1, dtype=np.float32)
    out = np.zeros(2 * n + 1, np.float32)
    y, w = out[1:n + 1], out[n + 1:]        # 4-byte aligned views: streaming stores must not need more
    k(a[1:], a[:n], y, w)
    assert np.array_equal(y, a[1:] - 3) and np.array_equal(w, a[:n] * 0.5)


def test_reduction_output_does_not_stream(small_threshold):
    A = Buffer("A", (64, 256), float32)
    S = Reduce("S", (64,), Sum(), lambda i, k: A[i, k], (256,))
    nest = LoopNest([S])
    k = build(nest, [A, S], target="llvm")
    assert "!nontemporal" not in k.source
    a = np.ones((64, 256), np.float32)
    s = np.zeros(64, np.float32)
    k(a, s)
    assert np.array_equal(s, np.full(64, 256, np.float32))


def _aligned_view(n: int, byte_offset: int) -> np.ndarray:
    """A float32 array of ``n`` elements whose address is ``byte_offset`` past a multiple of 64."""
    raw = np.zeros(n + 64, np.float32)
    start = (-raw.ctypes.data % 64 + byte_offset) // 4
    return raw[start:start + n]


@pytest.mark.parametrize("offset", [0, 16, 32, 4])
def test_streaming_stores_at_every_alignment(small_threshold, offset):
    """A 64-byte vector store streams whole where its address is 64-byte aligned, in 16-byte
    pieces where it is 16-byte aligned (numpy's large arrays), plainly elsewhere: the same
    values on every path, and no 8-byte ``movnti`` stores of general registers."""
    n = 1024 + 16 + 3
    A = Buffer("A", (n,), float32)
    Y = Compute("Y", (n,), lambda i: A[i] * 2.0 + 1.0)
    k = build(_vector_nest([Y], lanes=16, parallel=False), [A, Y], target="llvm")
    assert k.source.count("!nontemporal") >= 2
    a = np.arange(n, dtype=np.float32)
    y = _aligned_view(n, offset)
    k(a, y)
    assert np.array_equal(y, a * 2 + 1)
    if platform.machine() in ("x86_64", "AMD64"):
        from llvmlite import binding as llvm
        from codegen.llvm import jit
        asm = jit._shared_tm(3).emit_assembly(llvm.parse_assembly(k.optimized_source))
        assert "movntps" in asm and "movnti" not in asm


def test_the_threshold_is_half_the_last_level_cache_of_the_host(monkeypatch):
    """``streaming_store_bytes`` reads the cache sizes through ``loopnest.target.host_target``
    (a reader of its own once stopped at ``/sys``'s ``uevent`` entry and fell back to 16 MiB
    on every machine); ``TE_LLVM_STREAMING_STORES`` overrides it."""
    from loopnest.target import host_target
    monkeypatch.delenv("TE_LLVM_STREAMING_STORES", raising=False)
    monkeypatch.setattr(llvm_build, "_STREAMING", [])
    t = host_target()
    assert llvm_build.streaming_store_bytes() == max(t.l2_bytes, t.l3_bytes) // 2
    monkeypatch.setenv("TE_LLVM_STREAMING_STORES", "12345")
    monkeypatch.setattr(llvm_build, "_STREAMING", [])
    assert llvm_build.streaming_store_bytes() == 12345


@pytest.mark.parametrize("bad", [-1, 2.5, True, "4096"])
def test_a_threshold_that_is_not_a_byte_count_is_refused(bad):
    from codegen.llvm import streaming_store_threshold
    saved = list(llvm_build._STREAMING)
    with pytest.raises(ValueError, match="byte count of at least 0"):
        with streaming_store_threshold(bad):
            pass
    assert llvm_build._STREAMING == saved
