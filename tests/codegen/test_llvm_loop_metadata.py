"""The unrolling hints of serial loops in the LLVM IR (codegen/llvm/loop_hints.py): golden
checks of the ``!llvm.loop`` node on each loop's back edge, and the kernels still compute the
same results."""
from __future__ import annotations

import re

import numpy as np

from codegen import build
from loopnest import LoopNest
from loopnest.stmt import For, Store
from te import Buffer, Compute, IntImm, Ramp, Reduce, Sum, Var, float32

from codegen.llvm.loop_hints import unroll_choice

_BRANCH = re.compile(r'br i1 %"?[\w.]+"?, label %"(\w+)_loop", label %"\w+_exit"(?:, !llvm\.loop !(\d+))?')
_NODE = re.compile(r'^!(\d+) = (?:distinct )?!\{ ?(.*?) ?\}$', re.M)


def loop_hints(ir_text: str) -> dict[str, tuple]:
    """Loop name -> the properties of its ``!llvm.loop`` node, as strings (() without one)."""
    nodes = {k: [op.strip() for op in body.split(",")] for k, body in _NODE.findall(ir_text)}

    def props(k):
        out = []
        for ref in nodes[k][1:]:
            ops = nodes[ref.lstrip("!")]
            out.append(" ".join(o.strip('!"') for o in ops))
        return tuple(out)
    return {name: props(k) if k else () for name, k in _BRANCH.findall(ir_text)}


def kernel(outputs, args):
    nest = LoopNest(outputs)
    return build(nest, args, target="llvm", cache=False)


DISABLE = ("llvm.loop.unroll.disable",)
TWICE = ("llvm.loop.unroll.count i32 2",)


def test_streaming_loop_twice_and_its_outer_loop_never():
    N = Var("N")
    A = Buffer("A", (N, 64), float32)
    C = Compute("C", (N, 64), lambda i, j: A[i, j] * 2.0)
    k = kernel([C], [A, C])
    hints = loop_hints(k.source)
    assert (hints["i"], hints["j"]) == (DISABLE, TWICE)
    a = np.arange(5 * 64, dtype=np.float32).reshape(5, 64)
    c = np.empty_like(a)
    k(a, c)
    np.testing.assert_array_equal(c, a * 2)


def test_small_copy_and_short_loops_left_to_llvm():
    A = Buffer("A", (6, 16), float32)
    B = Compute("B", (6, 16), lambda i, j: A[i, j])
    C = Compute("C", (2, 8), lambda i, j: A[i, j] + 1.0)
    k = kernel([B, C], [A, B, C])
    hints = loop_hints(k.source)
    nest_loops = [name for name in hints if name not in ("x", "y")]    # x, y: the alias check
    assert len(nest_loops) == 4 and all(hints[name] == () for name in nest_loops), hints
    a = np.arange(96, dtype=np.float32).reshape(6, 16)
    b, c = np.empty_like(a), np.empty((2, 8), np.float32)
    k(a, b, c)
    np.testing.assert_array_equal(b, a)
    np.testing.assert_array_equal(c, a[:2, :8] + 1)


def test_accumulating_innermost_loop_left_to_llvm():
    N = Var("N")
    A = Buffer("A", (N, 100), float32)
    S = Reduce("S", (N,), Sum(), lambda i, r: A[i, r], (100,))
    k = kernel([S], [A, S])
    hints = loop_hints(k.source)
    inner = [name for name in hints if name not in ("i", "x", "y") and hints[name] == ()]
    assert hints["i"] == DISABLE and inner, hints
    a = np.random.default_rng(0).random((3, 100), dtype=np.float32)
    s = np.empty(3, np.float32)
    k(a, s)
    np.testing.assert_allclose(s, a.sum(axis=1), rtol=1e-5)


def test_strided_vector_load_never_unrolled():
    A = Buffer("A", (4096,), float32)
    B = Buffer("B", (1024,), float32)
    x = Var("x")
    gather = Store(B, (Ramp(x * 8, IntImm(1), 8),), A[Ramp(x * 16, IntImm(2), 8)] * 2.0)
    contiguous = Store(B, (Ramp(x * 8, IntImm(1), 8),), A[Ramp(x * 8, IntImm(1), 8)] * 2.0)
    scalar = Store(B, (x,), A[x * 2] * 2.0)
    assert unroll_choice(For(x, IntImm(0), IntImm(128), gather)) == "never"
    assert unroll_choice(For(x, IntImm(0), IntImm(1024), scalar)) == "twice"


def test_loop_of_vector_statements_never_unrolled():
    """A vector statement is as wide as the schedule chose: unrolling its loop again only
    adds to LLVM's time (the 13-stage stencil built in 33 ms more, for a run time within 2%)."""
    A = Buffer("A", (1024,), float32)
    B = Buffer("B", (1024,), float32)
    x = Var("x")
    contiguous = Store(B, (Ramp(x * 8, IntImm(1), 8),), A[Ramp(x * 8, IntImm(1), 8)] * 2.0)
    assert unroll_choice(For(x, IntImm(0), IntImm(128), contiguous)) == "never"


def test_packs_larger_than_a_register_tile_get_the_hints_of_other_loops():
    """A register tile's copy is left to LLVM (unrolled completely, the tile stays in
    registers), and so is a copy between the kernel's arguments (a transpose, which LLVM's
    unrolling speeds up); a copy that fills an intermediate of more than ``REGISTER_TILE``
    elements (a packed panel or filter) gets the hints of any other loop: the transposing
    pack of a 64 x 64 x 3 x 3 filter, left to LLVM, became 72 gathers."""
    from codegen.llvm.loop_hints import REGISTER_TILE
    W, P = Buffer("W", (64, 576), float32), Buffer("P", (576, 64), float32)
    tile = Buffer("tile", (6, 64), float32)
    i, j = Var("i"), Var("j")
    pack = For(i, IntImm(0), IntImm(576), For(j, IntImm(0), IntImm(64), Store(P, (i, j), W[j, i])))
    assert 576 * 64 > REGISTER_TILE >= 6 * 64
    assert unroll_choice(pack) == "never" and unroll_choice(pack.body.stmts[0]) == "twice"
    assert unroll_choice(pack, frozenset({id(P), id(W)})) == "llvm"        # P an argument: a transpose
    for copy in (Store(tile, (i, j), P[i, j]), Store(P, (i, j), tile[i, j])):
        nest = For(i, IntImm(0), IntImm(6), For(j, IntImm(0), IntImm(64), copy))
        assert unroll_choice(nest, frozenset({id(P)})) == "llvm"
        assert unroll_choice(nest.body.stmts[0], frozenset({id(P)})) == "llvm"


def test_register_tile_reduction_twice():
    """The reduction loop around a matmul's register tile (vectorized, unrolled) is unrolled
    twice: its addressing and loop overhead are paid once per two steps. With a symbolic N,
    LLVM adds the remainder step for an odd N."""
    N = Var("N")
    A, B = Buffer("A", (N, N), float32), Buffer("B", (N, N), float32)
    C = Reduce("C", (N, N), Sum(), lambda i, j, k: A[i, k] * B[k, j], (N,))
    nest = LoopNest([C])
    nest.auto_schedule()
    k = build(nest, [A, B, C, N], target="llvm", cache=False)
    hints = loop_hints(k.source)
    assert hints["k"] == TWICE, hints
    rng = np.random.default_rng(0)
    for n in (1, 7, 67, 133):
        a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
        c = np.empty((n, n), np.float32)
        k(a, b, c, n)
        np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
