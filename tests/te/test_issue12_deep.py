"""Deep expressions (thousands of nested operations, as generated code and polynomials have)
go through the whole pipeline: LoopNest, printing, simplification, transforms, preparation,
IREval, LLVM and CUDA emission. Past what the deep thread holds, a typed error names the
depth (``te.recursion``)."""
from __future__ import annotations

import signal
import sys
import threading
import time

import numpy as np
import pytest

import te.recursion
from codegen import build
from loopnest import LoopNest
from te import Buffer, Compute, ExpressionDepthError, Var, float32, int32, maximum, select, simplify
from te.queries import expr_depth
from te.recursion import recursion_guard

N = 5000
A = Buffer("A", (8,), float32)


def _long_sum(i):
    e = A[i]
    for k in range(N):
        e = e + A[i] * float(k % 7)
    return e


def _sum_reference(a: np.ndarray) -> np.ndarray:
    acc = a.copy()
    for k in range(N):                       # the same order and float32 rounding as the tree
        acc = acc + a * np.float32(k % 7)
    return acc


@pytest.fixture(scope="module")
def long_sum():
    B = Compute("B", (8,), _long_sum)
    return B, LoopNest([B])


def test_5000_term_sum_builds_and_runs_on_ireval_and_llvm(long_sum):
    B, nest = long_sum
    assert expr_depth(B.body) == N + 3           # N additions over A[i] * k
    text = str(nest)
    assert text.startswith("for (int i = 0; i < 8; i++) {") and text.count("A[i]") == N + 1
    a = np.linspace(-1, 1, 8).astype(np.float32)
    want = _sum_reference(a)
    for target in ("ireval", "llvm"):
        out = np.zeros(8, np.float32)
        build(nest, [A, B], target=target)(a, out)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-3, err_msg=target)


def test_5000_term_sum_emits_cuda(long_sum):
    B, nest = long_sum
    src = build(nest, [A, B], target="cuda").source
    assert src.count("A[") >= N and "B[" in src


def test_deep_selects_and_max_chains_transform_and_agree():
    def body(i):
        e = A[i]
        for k in range(1500):                # a chain: each step uses the previous one once
            e = select(A[i] > float(k % 11 - 5), e + 1.0, A[i] * 0.5) if k % 2 else maximum(e, A[i] * -0.5)
        return e
    B = Compute("B", (8,), body)
    nest = LoopNest([B])
    i, = nest.get_loops_for(B)
    _, inner, _ = nest.split_with_tail(i, 4)
    nest.vectorize(inner)
    assert [h["op"] for h in nest.history] == ["split_with_tail", "vectorize"]   # each recorded once
    nest.simplify()
    prepared = nest.copy().prepare_for_codegen()
    assert "ramp(" in str(prepared)
    a = np.linspace(-6, 6, 8).astype(np.float32)
    outs = {}
    for target in ("ireval", "llvm"):
        outs[target] = np.zeros(8, np.float32)
        build(nest, [A, B], target=target)(a, outs[target])
    np.testing.assert_array_equal(outs["llvm"], outs["ireval"])
    want = a.copy()
    for k in range(1500):
        want = (np.where(a > np.float32(k % 11 - 5), want + np.float32(1), a * np.float32(0.5)) if k % 2
                else np.maximum(want, a * np.float32(-0.5)))
    np.testing.assert_array_equal(outs["ireval"], want)


def test_deep_integer_polynomial_simplifies():
    x = Var("x", int32)
    e = x
    for k in range(N):
        e = e + x * (k % 3) + 1
    s = simplify(e)                       # linear in x: folds to one term
    assert str(s) == f"x * {1 + sum(k % 3 for k in range(N))} + {N}"


def test_shallow_calls_stay_on_the_calling_thread():
    seen = []

    @recursion_guard
    def where(x):
        seen.append(threading.current_thread())
        return x

    assert where(1) == 1 and seen == [threading.current_thread()]


def test_too_deep_raises_a_typed_error_naming_the_depth(monkeypatch):
    monkeypatch.setattr(te.recursion, "RECURSION_LIMIT", 3000)
    x = Var("x")
    e = x
    for _ in range(4000):
        e = e * 2
    with pytest.raises(ExpressionDepthError, match=r"expr_to_str: the IR is nested too deeply \(depth 4001\)"
                                                   r".*3,000 nested calls.*Compute") as info:
        str(e)
    assert isinstance(info.value, RecursionError) and info.value.depth == 4001


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs POSIX interval timers")
def test_an_interrupt_stops_the_deep_thread_before_it_propagates():
    """A signal handler's exception (a time limit, Ctrl-C) in the waiting thread is raised in
    the deep thread too, which has unwound when the caller sees it."""
    limit = sys.getrecursionlimit()
    unwound = []

    @recursion_guard
    def down(n):
        if n == 0:
            try:
                while True:                     # until interrupted
                    time.sleep(0.01)
            finally:
                unwound.append(threading.current_thread().name)
        return down(n - 1) + 1

    def on_alarm(signum, frame):
        raise TimeoutError("time limit")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        with pytest.raises(TimeoutError, match="time limit"):
            down(3000)                          # past the limit on this thread: runs on a deep one
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert unwound == ["te-deep-recursion"]
    assert sys.getrecursionlimit() == limit


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs POSIX interval timers")
def test_a_cpu_time_limit_stops_a_busy_deep_thread_at_once():
    """The CPU-time signal goes to the thread that runs (the deep one), which does not wake a
    caller blocked in a wait; the caller waits in short slices, so its handler runs within one
    slice of the limit, not when the deep call ends (random tester, seed 51: a case ran for
    minutes past its limit)."""
    finished = []

    def busy():
        end = time.monotonic() + 10
        while time.monotonic() < end:           # computing, on the deep thread
            pass
        finished.append(True)                   # reached only where the limit did not stop it

    def on_prof(signum, frame):
        raise TimeoutError("time limit")

    old = signal.signal(signal.SIGPROF, on_prof)
    signal.setitimer(signal.ITIMER_PROF, 0.2)
    try:
        with pytest.raises(TimeoutError, match="time limit"):
            te.recursion.run_deep(busy)
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)
    assert finished == []
