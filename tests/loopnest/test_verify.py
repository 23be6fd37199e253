"""The IR verifier: each invariant it checks, and that the lowering passes keep them."""
from __future__ import annotations

import pytest

from loopnest import LoopNest
from loopnest.errors import VerifyError
from loopnest.passes import run_passes
from loopnest.stmt import Allocate, Block, For, ForKind, Free, Store
from loopnest.verify import verify
from te import Buffer, Compute, Var, float32, int32


def test_an_access_outside_its_allocation_is_refused():
    T = Buffer("T", (4,), float32)
    i = Var("i")
    verify(Block([Allocate(T), For(i, 0, 4, Block([Store(T, (i,), 1.0)])), Free(T)]))
    with pytest.raises(VerifyError, match="store to T outside its allocation"):
        verify(Block([Allocate(T), Free(T), For(i, 0, 4, Block([Store(T, (i,), 1.0)]))]))
    with pytest.raises(VerifyError, match="load of T outside its allocation"):
        O = Buffer("O", (4,), float32)
        verify(Block([For(i, 0, 4, Block([Store(O, (i,), T[i])])), Allocate(T), Free(T)]))


def test_gpu_loops_nested_on_one_axis_are_refused():
    A = Buffer("A", (4, 4), float32)
    i, j = Var("i"), Var("j")
    inner = For(j, 0, 4, Block([Store(A, (i, j), 1.0)]), ForKind.GPU_THREAD, 0)
    verify(For(i, 0, 4, Block([inner]), ForKind.GPU_BLOCK, 0))       # block x around thread x: fine
    with pytest.raises(VerifyError, match="same axis x"):
        verify(For(i, 0, 4, Block([inner]), ForKind.GPU_THREAD, 0))


def test_a_variable_outside_its_loop_is_refused():
    A = Buffer("A", (4,), int32)
    i = Var("i")
    with pytest.raises(VerifyError, match="variable i is used in a Store statement outside"):
        verify(Block([For(i, 0, 4, Block([])), Store(A, (0,), i)]))


def test_a_pass_that_breaks_an_invariant_is_named(monkeypatch):
    monkeypatch.setenv("LOOPNEST_VERIFY", "1")
    A = Buffer("A", (4,), float32)
    B = Compute("B", (4,), lambda i: A[i] * 2.0)
    nest = LoopNest([B])
    i = nest.get_loops_for(B)[0].var

    def bad_pass(nest, root):   # a store after the loop, using the loop's variable
        return Block([root, Store(B, (i,), 1.0)])
    with pytest.raises(VerifyError, match="after pass bad_pass"):
        run_passes(nest, passes=[("bad_pass", bad_pass)])
