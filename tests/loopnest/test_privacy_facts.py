"""What the analysis showed of one tree (an intermediate private to a loop) carried through
the transforms that keep every loop's iterations and their order (``privacy.carry_private_facts``),
and dropped where a transform moves an access out of the loop."""
from __future__ import annotations

import numpy as np

from codegen import build
from loopnest import LoopNest
from loopnest.analysis.legality import privatizable
from te import Buffer, Compute, float32


def _row_pipeline():
    A = Buffer("A", (4, 8), float32)
    T1 = Compute("T1", (4, 8), lambda i, j: A[i, j] + 1.0)
    T2 = Compute("T2", (4, 8), lambda i, j: T1[i, j] * 2.0 + T1[i, 7 - j])
    return A, T1, T2


def _facts(nest):
    facts = nest._private_facts
    return {} if facts is None or facts[0] is not nest.root else facts[1]


def _check(nest, A, T2):
    a = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    want = (a + 1.0) * 2.0 + (a[:, ::-1] + 1.0)
    for target, opts in (("ireval", {"check_races": True, "poison": True}), ("llvm", {})):
        got = np.zeros((4, 8), np.float32)
        build(nest, [A, T2], target=target, **opts)(a, got)
        np.testing.assert_allclose(got, want, rtol=1e-6)


def _count_analyses(monkeypatch) -> list:
    """Count the questions ``privatizable`` puts to the analyses (not answered by a fact):
    to the statements' shape (``privately_computed``) and to isl."""
    from loopnest.analysis import legality
    calls: list = []
    for name in ("_privatizable", "privately_computed"):
        real = getattr(legality, name)
        monkeypatch.setattr(legality, name, lambda *a, real=real: calls.append(a) or real(*a))
    return calls


def test_splits_and_kind_changes_inside_the_loop_keep_the_fact(monkeypatch):
    A, T1, T2 = _row_pipeline()
    nest = LoopNest([T2])
    i = nest.get_loops_for(T2)[0]
    nest.compute_at(T1, i)
    nest.parallelize(i)
    assert privatizable(nest, T1, i)          # asked of the analysis, and kept for this root
    key = (id(T1), id(i.var))
    calls = _count_analyses(monkeypatch)
    nest.split_with_tail(nest.get_loops_for(T1)[-1], 3)
    nest.vectorize(nest.get_loops_for(T2)[-1])
    assert key in _facts(nest) and privatizable(nest, T1, i)
    assert calls == []                        # carried: the analysis was not asked again
    _check(nest, A, T2)


def test_an_unroll_around_the_loop_drops_the_fact_of_the_accesses_it_copies_out():
    """T1 computed per element of j is private to j; unrolling i by 2 copies j, so T1's
    accesses are then in j and in its copy: no longer all inside j, and the fact goes."""
    A, T1, T2 = _row_pipeline()
    nest = LoopNest([T2])
    i, j = nest.get_loops_for(T2)
    nest.compute_at(T1, j)
    assert privatizable(nest, T1, j)
    nest.unroll(i, 2)
    assert (id(T1), id(j.var)) not in _facts(nest)
    assert not privatizable(nest, T1, j)
    _check(nest, A, T2)


def test_a_transform_outside_the_set_does_not_carry(monkeypatch):
    A, T1, T2 = _row_pipeline()
    nest = LoopNest([T2])
    i = nest.get_loops_for(T2)[0]
    nest.compute_at(T1, i)
    assert privatizable(nest, T1, i)
    calls = _count_analyses(monkeypatch)
    nest.cache_accesses(A, "A_row", i)
    assert privatizable(nest, T1, i) and len(calls) == 1     # asked of the analysis again
    _check(nest, A, T2)
