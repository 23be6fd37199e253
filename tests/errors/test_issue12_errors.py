"""The error contract on hostile input: refusals are ScheduleError and change nothing, a
replay is all or nothing, a size that divides by zero, a name with a trailing newline and a
loop handle of another nest each get a typed error that says what is wrong."""
from __future__ import annotations

import importlib.util
import json
import re

import numpy as np
import pytest

from codegen import build
from codegen.kernel import KernelArgumentError
from loopnest import Loop, LoopNest, ScheduleError
from te import Buffer, Compute, Var, float32

TARGETS = ["ireval"] + (["llvm"] if importlib.util.find_spec("codegen.llvm") else [])

A = Buffer("A", (64, 64), float32)
B = Compute("B", (64, 64), lambda i, j: A[i, j] + 1.0)


def refused(nest, f, match):
    text, hist = str(nest), list(nest.history)
    with pytest.raises(ScheduleError, match=match):
        f()
    assert str(nest) == text and nest.history == hist


@pytest.mark.parametrize("op", ["split_with_tail", "split_with_mask", "slice_head", "slice_tail"])
def test_a_factor_beyond_the_loop_type_is_a_schedule_error(op):
    n = LoopNest([B])
    i = n.get_loops_for(B)[0]
    refused(n, lambda: getattr(n, op)(i, 2 ** 40),
            rf"{op}\(i, 1099511627776\): the factor does not fit the loop variable's type int32 "
            r"\(at most 2147483647\); use a factor no larger than the loop's extent")


def test_a_tile_factor_beyond_the_loop_type_is_a_schedule_error():
    n = LoopNest([B])
    refused(n, lambda: n.tile(*n.get_loops_for(B), 2 ** 40, 4), r"tile\(i, 1099511627776\): the factor does not fit")
    refused(n, lambda: n.tile(*n.get_loops_for(B), 4, 2 ** 31), r"tile\(j, 2147483648\): the factor does not fit")


def test_the_largest_factor_of_the_loop_type_is_accepted():
    n = LoopNest([B])
    outer, inner, tail = n.split_with_tail(n.get_loops_for(B)[0], 2 ** 31 - 1)
    assert (outer.extent, inner.extent, tail.extent) == (0, 2 ** 31 - 1, 64)


@pytest.mark.parametrize("loops", [[], ["i"]])
def test_fuse_of_fewer_than_two_loops_is_a_schedule_error(loops):
    n = LoopNest([B])
    refused(n, lambda: n.fuse(loops), r"fuse needs at least two loops, got \[")


def test_a_replay_that_fails_partway_changes_nothing():
    n = LoopNest([B])
    n.split_with_tail(n.get_loops_for(B)[0], 8)
    hist = json.loads(json.dumps(n.history))
    hist.append(dict(hist[0]))           # the same split again: its loop no longer exists
    fresh = LoopNest([B])
    refused(fresh, lambda: fresh.replay(hist), "no loop named 'i' in this nest")
    # a nest with a history of its own keeps it, and the replay can then be done right
    fresh.vectorize(fresh.get_loops_for(B)[1])
    refused(fresh, lambda: fresh.replay(json.dumps(hist)), "no loop named 'i' in this nest")
    assert len(fresh.history) == 1
    fresh.replay(hist[:1])
    assert [r["op"] for r in fresh.history] == ["vectorize", "split_with_tail"]


def test_a_replay_of_an_unknown_record_changes_nothing():
    n = LoopNest([B])
    hist = [{"op": "split_with_tail", "args": [{"loop": "i"}, 8], "kwargs": {}}, {"op": "explode"}]
    refused(n, lambda: n.replay(hist), "history record 1 names no transform")


@pytest.mark.parametrize("target", TARGETS)
def test_a_size_that_divides_by_zero_is_a_typed_error(target):
    N, M = Var("N"), Var("M")
    X = Buffer("X", (N // M,), float32)
    Y = Compute("Y", (N // M,), lambda i: X[i] + 1.0)
    k = build(LoopNest([Y]), [X, Y, N, M], target=target)
    x, y = np.ones(4, np.float32), np.zeros(4, np.float32)
    with pytest.raises(KernelArgumentError, match=r"the size expression floordiv\(N, M\) divides by zero: M = 0 "
                                                  r"for the sizes given; give sizes for which M is not 0"):
        k(x, y, 8, 0)
    k(x, y, 8, 2)
    assert (y == 2).all()


@pytest.mark.parametrize("make", [lambda name: Buffer(name, (4,), float32), lambda name: Var(name),
                                  lambda name: Compute(name, (4,), lambda i: i)])
@pytest.mark.parametrize("name", ["A\n", "A\r\n", "\nA", "A B"])
def test_a_name_with_a_newline_or_space_is_refused(make, name):
    with pytest.raises(ValueError, match=rf"invalid \w+ name {re.escape(repr(name))}: expected an identifier"):
        make(name)


def test_a_loop_handle_of_another_nest_says_so():
    n, other = LoopNest([B]), LoopNest([B])
    i_other = other.get_loops_for(B)[0]
    refused(n, lambda: n.split_with_tail(i_other, 4),
            "the handle of loop i belongs to another LoopNest, not this one; get handles from this nest "
            r"\(nest.get_loops_for\(...\), nest.loop\(name\)\) or pass the loop's name")
    # a removed loop of this nest is still reported as removed
    i = n.get_loops_for(B)[0]
    n.split_with_tail(i, 4)
    refused(n, lambda: n.unroll(i), "loop i no longer exists in this nest \\(it was removed by a transform")


def test_handles_of_a_copy_stay_valid():
    n = LoopNest([B])
    i, j = n.get_loops_for(B)
    c = n.copy()                          # shares the loops: the original's handles work on it
    assert c.loop(j).nest is c and c.loop(j).exists()
    c.split_with_tail(i, 4)
    assert i.exists() and [l.name for l in c.get_loops_for(B)][:2] == ["i_outer", "i_inner"]
    with pytest.raises(ScheduleError, match="loop i no longer exists in this nest"):
        c.unroll(Loop(c, i.var))          # a handle of the copy on its removed loop
    with pytest.raises(ScheduleError, match="the handle of loop i belongs to another LoopNest"):
        c.unroll(i)                       # the loop i of n is not in its changed copy
