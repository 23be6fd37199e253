"""Parallel loops on the LLVM backend: every runtime gives the serial result, every time.

Loops are marked parallel by rewriting the For kinds of a prepared nest (the legality
checks of ``nest.parallelize`` are the transforms' business; here the loops are legal by
construction). Each kernel runs many times to catch races.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import te
from codegen import build
from codegen.llvm import get_num_threads, set_num_threads
from codegen.llvm.runtime import gomp_available, pool_available
from loopnest import LoopNest
from loopnest.stmt import Allocate, Block, For, ForKind, Free, StmtMutator, Store
from te import Buffer, Compute, Load, Reduce, Sum, Var, cast, float32, int32

RUNTIMES = ["threads"] + (["gomp"] if gomp_available() else []) + (["pool"] if pool_available() else [])
REPEATS = 30


@pytest.fixture(params=RUNTIMES)
def runtime(request):
    return request.param


@pytest.fixture(autouse=True)
def _two_threads_at_least():
    set_num_threads(max(2, get_num_threads()))   # exercise the threaded path even on one core
    yield
    set_num_threads(None)


class Parallel(StmtMutator):
    def __init__(self, names):
        self.names = set(names)

    def visit_For(self, s):
        s2 = self.generic(s)
        return s2.replace(kind=ForKind.PARALLEL) if s.var.name in self.names else s2


class HandNest:
    prepared = True

    def __init__(self, root, inputs, outputs, intermediates=()):
        self.root = root if isinstance(root, Block) else Block((root,))
        self.inputs, self.outputs, self.intermediates = list(inputs), list(outputs), list(intermediates)


def parallel_nest(outputs, names):
    nest = LoopNest(outputs).prepare_for_codegen()
    nest.root = Parallel(names).visit(nest.root)
    return nest


def test_parallel_elementwise(runtime):
    N = Var("N")
    A = Buffer("A", (N,), float32)
    B = Compute("B", (N,), lambda i: A[i] * 2.0 + cast(i, float32))
    k = build(parallel_nest([B], ["i"]), [A, B], target="llvm", parallel_runtime=runtime)
    assert k.parallel_runtime == runtime
    for n in (0, 1, 2, 3, 1001):
        a = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        want = a * 2 + np.arange(n, dtype=np.float32)
        for _ in range(REPEATS if n > 3 else 3):
            b = np.full(n, np.nan, np.float32)
            k(a, b)
            assert np.array_equal(b, want)


def test_parallel_rows_around_a_serial_reduction(runtime):
    N = Var("N")
    A = Buffer("A", (N, 300), float32)
    C = Reduce("C", (N,), Sum(), lambda i, k: A[i, k] * A[i, k], (300,))
    k = build(parallel_nest([C], ["i"]), [A, C], target="llvm", parallel_runtime=runtime)
    kref = build(LoopNest([C]), [A, C], target="llvm")
    a = np.random.default_rng(0).standard_normal((257, 300)).astype(np.float32)
    want = np.zeros(257, np.float32)
    kref(a, want)                                  # same summation order, serially
    assert np.allclose(want, (a.astype(np.float64) ** 2).sum(1), rtol=1e-5)
    for _ in range(REPEATS):
        c = np.zeros(257, np.float32)
        k(a, c)
        assert np.array_equal(c, want)


def test_nested_parallel_loops(runtime):
    A = Buffer("A", (37, 41), int32)
    B = Compute("B", (37, 41), lambda i, j: A[i, j] * 3 + i * 100 + j)
    C = Reduce("C", (37,), Sum(), lambda i, k: B[i, k], (41,))
    k = build(parallel_nest([B, C], ["i", "j", "i_1"]), [A, B, C], target="llvm", parallel_runtime=runtime)
    a = np.arange(37 * 41, dtype=np.int32).reshape(37, 41)
    want_b = a * 3 + np.arange(37)[:, None] * 100 + np.arange(41)
    for _ in range(REPEATS):
        b = np.zeros((37, 41), np.int32)
        c = np.zeros(37, np.int32)
        k(a, b, c)
        assert np.array_equal(b, want_b) and np.array_equal(c, want_b.sum(1))


@pytest.mark.parametrize("width", [64, 20000])   # stack (alloca) and heap (aligned_alloc) scratch
def test_parallel_body_with_its_own_intermediate(runtime, width):
    rows = 24
    A = Buffer("A", (rows, width), float32)
    B = Buffer("B", (rows, width), float32)
    T = Buffer("T", (width,), float32)
    i, j, j2 = Var("i"), Var("j"), Var("j2")
    root = For(i, 0, rows, Block([
        Allocate(T),
        For(j, 0, width, Block([Store(T, (j,), Load(A, (i * width + j,)) * 2.0)])),
        For(j2, 0, width, Block([Store(B, (i * width + j2,), Load(T, (j2,)) + Load(T, (width - 1 - j2,)))])),
        Free(T)]), kind=ForKind.PARALLEL)
    nest = HandNest(root, [A], [B], [T])
    k = build(nest, [A, B], target="llvm", parallel_runtime=runtime)
    assert ("aligned_alloc" in k.source) == (width * 4 > 64 * 1024)
    if width * 4 > 64 * 1024:      # once per call of the outlined body (a chunk of rows), not once per row
        body = k.source[k.source.index('_loop"(i64 %"lo"'):]
        assert body.index("aligned_alloc") < body.index("i_loop:") < body.index("i_exit:") < body.index('@"free"')
    a = np.random.default_rng(1).standard_normal((rows, width)).astype(np.float32)
    want = a * 2 + (a * 2)[:, ::-1]
    for _ in range(REPEATS // 3):
        b = np.zeros((rows, width), np.float32)
        k(a, b)
        assert np.array_equal(b, want)


def test_parallel_loop_inside_a_serial_loop_with_symbolic_bounds(runtime):
    N, M = Var("N"), Var("M")
    A = Buffer("A", (N, M), float32)
    B = Compute("B", (N, M), lambda i, j: te.exp(A[i, j]) - 1.0)
    k = build(parallel_nest([B], ["j"]), [A, B], target="llvm", parallel_runtime=runtime)
    kr = build(LoopNest([B]), [A, B], target="llvm")
    for n, m in ((3, 1), (2, 5), (6, 333)):
        a = np.random.default_rng(m).standard_normal((n, m)).astype(np.float32)
        want = np.zeros((n, m), np.float32)
        kr(a, want)
        for _ in range(5):
            b = np.zeros((n, m), np.float32)
            k(a, b)
            assert np.array_equal(b, want)


def test_one_thread_gives_the_same_result(runtime):
    A = Buffer("A", (500,), float32)
    B = Compute("B", (500,), lambda i: te.sqrt(A[i]) + 1.0)
    k = build(parallel_nest([B], ["i"]), [A, B], target="llvm", parallel_runtime=runtime)
    a = np.arange(500, dtype=np.float32)
    outs = []
    for n in (1, 2, 3):
        set_num_threads(n)
        assert get_num_threads() == n
        b = np.zeros(500, np.float32)
        k(a, b)
        outs.append(b)
    assert all(np.array_equal(outs[0], o) for o in outs) and np.array_equal(outs[0], np.sqrt(a) + 1)


def test_serial_runtime_and_source_shape():
    A = Buffer("A", (64,), float32)
    B = Compute("B", (64,), lambda i: A[i] + 1.0)
    nest = parallel_nest([B], ["i"])
    ks = build(nest, [A, B], target="llvm", parallel_runtime="serial")
    assert "_par" not in ks.source
    kt = build(nest, [A, B], target="llvm", parallel_runtime="threads")
    assert "te_llvm_parallel_for" in kt.source and "internal" in kt.source
    if gomp_available():
        kg = build(nest, [A, B], target="llvm", parallel_runtime="gomp")
        assert "GOMP_parallel" in kg.source
    a = np.arange(64, dtype=np.float32)
    for k in (ks, kt):
        b = np.zeros(64, np.float32)
        k(a, b)
        assert np.array_equal(b, a + 1)


def test_outlined_body_is_not_copied_into_the_one_thread_path(runtime):
    """The body a parallel loop outlines is called from the kernel's one-thread path, not
    inlined there: a copy would double the code LLVM optimises and generates."""
    A = Buffer("A", (256,), float32)
    B = Compute("B", (256,), lambda i: te.sqrt(A[i]) * 3.0 + A[255 - i])
    k = build(parallel_nest([B], ["i"]), [A, B], target="llvm", parallel_runtime=runtime)
    ir = k.optimized_source
    kernel = ir[ir.index("define i32 @te_" + k.name + "("):]
    kernel = kernel[:kernel.index("\n}\n")]
    assert "sqrt" in ir and "sqrt" not in kernel, "the loop body was copied into the kernel"
    assert "_par1(" in kernel
    a = np.arange(256, dtype=np.float32)
    b = np.zeros(256, np.float32)
    set_num_threads(1)
    k(a, b)
    assert np.allclose(b, np.sqrt(a) * 3 + a[::-1])


def _run_fork_script(runtime: str, child_calls: int, **env) -> subprocess.CompletedProcess:
    """Build ``B = A * 2`` with a parallel loop on ``runtime`` in a fresh interpreter, run it,
    fork, run it ``child_calls`` times in the child and print the child's exit code (0: every
    result right)."""
    script = textwrap.dedent(f"""
        import os, sys, numpy as np
        from loopnest import LoopNest
        from loopnest.stmt import ForKind, StmtMutator
        from te import Buffer, Compute, float32
        from codegen import build
        from codegen.llvm import set_num_threads
        class P(StmtMutator):
            def visit_For(self, s):
                return self.generic(s).replace(kind=ForKind.PARALLEL)
        set_num_threads(2)
        A = Buffer("A", (1000,), float32); B = Compute("B", (1000,), lambda i: A[i] * 2.0)
        nest = LoopNest([B]).prepare_for_codegen(); nest.root = P().visit(nest.root)
        k = build(nest, [A, B], target="llvm", parallel_runtime={runtime!r})
        a = np.arange(1000, dtype=np.float32); b = np.zeros(1000, np.float32); k(a, b)
        assert np.array_equal(b, a * 2)
        pid = os.fork()
        if pid == 0:
            ok = True
            for _ in range({child_calls}):
                c = np.zeros(1000, np.float32); k(a, c)
                ok = ok and np.array_equal(c, a * 2)
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
    """)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root, TE_LLVM_PARALLEL_RUNTIME="", **env)
    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not gomp_available() or not hasattr(os, "fork"), reason="needs libgomp and fork")
def test_gomp_kernels_keep_working_in_a_forked_child():
    # libgomp hangs in a child forked after it ran; the kernels switch to the thread pool there
    proc = _run_fork_script("gomp", 1, OMP_NUM_THREADS="2")
    assert "child 0" in proc.stdout, proc.stdout + proc.stderr


def test_concurrent_callers_from_python_threads(runtime):
    import threading
    A = Buffer("A", (4000,), float32)
    B = Compute("B", (4000,), lambda i: A[i] * 3.0 - 1.0)
    k = build(parallel_nest([B], ["i"]), [A, B], target="llvm", parallel_runtime=runtime)
    a = np.arange(4000, dtype=np.float32)
    want = a * 3 - 1
    errors = []

    def worker():
        for _ in range(REPEATS):
            b = np.zeros(4000, np.float32)
            k(a, b)
            if not np.array_equal(b, want):
                errors.append(b)
    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


@pytest.mark.skipif(not pool_available(), reason="the native pool needs Linux on x86-64 or AArch64")
def test_pool_many_short_loops_with_changing_team_sizes():
    # back-to-back jobs of every size, with the team growing and shrinking between them:
    # a worker claiming a chunk of a finished job, or missing one, shows as a wrong sum
    N = Var("N")
    A = Buffer("A", (N, 8), int32)
    C = Reduce("C", (N,), Sum(), lambda i, k: A[i, k] * (k + 1), (8,))
    k = build(parallel_nest([C], ["i"]), [A, C], target="llvm", parallel_runtime="pool")
    assert "te_llvm_pool_parallel_for" in k.source
    rng = np.random.default_rng(3)
    for rep in range(300):
        set_num_threads(1 + rep % 4)
        n = int(rng.integers(0, 70))
        a = rng.integers(-100, 100, (n, 8)).astype(np.int32)
        c = np.full(n, -7, np.int32)
        k(a, c)
        assert np.array_equal(c, (a * np.arange(1, 9)).sum(1)), rep


@pytest.mark.skipif(not pool_available() or not hasattr(os, "fork"), reason="needs the pool and fork")
def test_pool_kernels_keep_working_in_a_forked_child():
    # the pool's workers do not survive fork: the child starts its own
    proc = _run_fork_script("pool", 50)
    assert "child 0" in proc.stdout, proc.stdout + proc.stderr
