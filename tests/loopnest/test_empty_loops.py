"""The LLVM target pass ``guard_empty_loops``: a serial or parallel loop around loops of
symbolic trip counts runs only where one of them does (the reduction loop around the leftover
columns or rows of a symbolic matmul, and the loop around that), and is left alone where its
body does something else, where an inner loop always runs, where the inner bounds move with a
loop inside or load, or where the loop is of another kind. Values on LLVM agree with numpy at
sizes the tiles divide and do not."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import build
from loopnest import LoopNest
from loopnest.empty_loops import guard_empty_loops
from loopnest.kinds import ForKind
from loopnest.stmt import Allocate, Block, Cond, For, Free, Store
from te import Buffer, Reduce, Sum, Var


def test_symbolic_matmul_skips_its_empty_leftover_loops():
    N = Var("N")
    A, B = Buffer("A", (N, N), "float32"), Buffer("B", (N, N), "float32")
    C = Reduce("C", (N, N), Sum(), lambda i, j, k: A[i, k] * B[k, j], (N,))
    nest = LoopNest([C])
    nest.auto_schedule()
    kernel = build(nest, [A, B, C, N], target="llvm")
    guards = [line.strip() for line in str(kernel.stmt).splitlines() if line.strip().startswith("if (0 <")]
    assert guards, str(kernel.stmt)
    rng = np.random.default_rng(0)
    for n in (1, 6, 16, 64, 65, 70, 128, 131):
        a, b = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
        c = np.full((n, n), np.nan, np.float32)
        kernel(a, b, c, n)
        np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def _loop(inner_stop, kind=ForKind.SERIAL, extra=()):
    A = Buffer("A", (64,), "float32")
    k, j = Var("k"), Var("j")
    inner = For(j, 0, inner_stop(k), Block((Store(A, (j,), A[j] + 1.0),)))
    return For(k, 0, Var("N"), Block((inner,) + tuple(extra)), kind), A


@pytest.mark.parametrize("case", ["guarded", "moves", "constant", "empty", "parallel", "unrolled", "store", "load",
                                  "storage"])
def test_which_loops_get_a_guard(case):
    M = Var("M")
    stops = {"moves": lambda k: k % 8, "constant": lambda k: 4, "empty": lambda k: 0}
    kind = {"parallel": ForKind.PARALLEL, "unrolled": ForKind.UNROLLED}.get(case, ForKind.SERIAL)
    f, A = _loop(stops.get(case, lambda k: M % 8), kind)
    if case == "store":
        f, A = _loop(lambda k: M % 8, extra=(Store(A, (0,), 0.0),))
    if case == "load":
        I = Buffer("I", (4,), "int32")
        j = Var("j")
        f = f.replace(body=Block((For(j, 0, I[0], Block((Store(A, (j,), 1.0),))),)))
    if case == "storage":       # the storage of a buffer of the loops inside does nothing by itself
        T = Buffer("T", (8,), "float32")
        f = f.replace(body=Block((Allocate(T),) + f.body.stmts + (Free(T),)))
    out = guard_empty_loops(None, f)
    assert isinstance(out, Cond) == (case in ("guarded", "parallel", "storage")), str(out)
    if isinstance(out, Cond):
        assert str(out.cond) == "0 < M % 8" and out.then.stmts[0] is f


def test_a_loop_around_guarded_loops_takes_their_conditions():
    """Innermost first: the loop around a guarded loop runs only where that guard holds."""
    M = Var("M")
    f, A = _loop(lambda k: M % 8)
    i = Var("i")
    outer = guard_empty_loops(None, For(i, 0, M, Block((f,))))
    assert isinstance(outer, Cond) and str(outer.cond) == "0 < M % 8"
    loop = outer.then.stmts[0]
    assert isinstance(loop, For) and isinstance(loop.body.stmts[0], Cond)
