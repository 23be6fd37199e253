"""Loop handles (``loopnest.loop``) and the nest state below the transforms
(``loopnest.state``): handles resolve through one loop index per root, and keep their
contract through transforms."""
from __future__ import annotations

import doctest
import importlib

import pytest

import loopnest.state
from loopnest import Block, LoopNest, ScheduleError
from loopnest.loop import Loop, LoopIndex
from te import Buffer, Compute, float32


def _nest():
    A = Buffer("A", (16, 12), float32)
    B = Compute("B", (16, 12), lambda i, j: A[i, j] * 2.0)
    C = Compute("C", (16, 12), lambda i, j: B[i, j] + 1.0)
    return LoopNest([B, C]), B, C


class _CountingIndex(LoopIndex):
    built = 0

    def __init__(self, root):
        type(self).built += 1
        super().__init__(root)


def test_handle_queries_reuse_one_index_per_root(monkeypatch):
    monkeypatch.setattr(loopnest.state, "LoopIndex", _CountingIndex)
    _CountingIndex.built = 0
    nest, B, _ = _nest()
    i, j = nest.get_loops_for(B)
    for _ in range(50):
        assert (i.extent, j.extent, i.kind, j.start.value) == (16, 12, "serial", 0)
    nest.get_all_loops()
    nest.get_enclosing_loops(j)
    assert _CountingIndex.built == 1
    nest.split_with_mask(j, 4)
    for _ in range(50):
        assert i.extent == 16
    assert _CountingIndex.built == 2


def test_assigning_the_root_invalidates_the_index():
    nest, B, _ = _nest()
    i, _ = nest.get_loops_for(B)
    before = nest.loop_index()
    nest.root = Block(())
    assert nest.loop_index() is not before
    assert not i.exists()
    with pytest.raises(ScheduleError, match="loop i no longer exists"):
        i.extent


def test_handles_survive_transforms_that_keep_their_loops():
    nest, B, C = _nest()
    i, j = nest.get_loops_for(B)
    ci, cj = nest.get_loops_for(C)
    jo, ji = nest.split_with_mask(j, 4)
    _, _, tail = nest.split_with_tail(cj, 5)
    assert (i.extent, ci.extent, tail.extent) == (16, 16, 2)
    nest.reorder([i, jo], [1, 0])
    nest.parallelize(ci)
    nest.vectorize(ji)
    assert [l.name for l in nest.get_enclosing_loops(ji)] == ["j_outer", "i", "j_inner"]
    assert (i.kind, ci.kind, ji.kind, tail.extent) == ("serial", "parallel", "vectorized", 2)


def test_a_handle_of_a_removed_loop_says_so():
    nest, B, _ = _nest()
    i, j = nest.get_loops_for(B)
    nest.split_with_tail(j, 4)
    assert not j.exists()
    with pytest.raises(ScheduleError, match="loop j no longer exists in this nest"):
        j.extent
    with pytest.raises(ScheduleError, match="loop j no longer exists in this nest"):
        nest.unroll(j)
    assert i.exists()


def test_a_refused_transform_leaves_handles_valid():
    nest, B, _ = _nest()
    i, j = nest.get_loops_for(B)
    with pytest.raises(ScheduleError):
        nest.split_with_tail(j, 0)
    assert (i.extent, j.extent) == (16, 12)


def test_copies_resolve_handles_against_their_own_root():
    nest, B, _ = _nest()
    i, j = nest.get_loops_for(B)
    other = nest.copy()
    other.split_with_tail(other.loop(j), 4)
    assert j.extent == 12
    assert not Loop(other, j.var).exists()
    assert other.loop(i).extent == 16


def test_loops_are_found_by_name_in_program_order():
    nest, B, C = _nest()
    assert nest.loop("i") == nest.get_loops_for(B)[0]
    assert nest.loop("i_1") == nest.get_loops_for(C)[0]
    with pytest.raises(ScheduleError, match="no loop named 'k'"):
        nest.loop("k")
    with pytest.raises(TypeError):
        nest.loop(3)


@pytest.mark.parametrize("module", ["loopnest.loop", "loopnest.state", "loopnest.nest", "loopnest.history",
                                    "loopnest.lazy_analysis", "loopnest.vectorize_lowering",
                                    "loopnest.transforms.loop_kinds", "loopnest.transforms.reorder",
                                    "loopnest.transforms.fuse"])
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
