"""End to end: tune a small matmul on the best available target, check the kernel's values
against numpy, replay the best schedule onto a fresh nest with apply_best; task keys."""
import importlib.util

import numpy as np
import pytest

from loopnest import LoopNest
from tune import Database, apply_best, autotune
from tune.features import FEATURE_COUNT, nest_features
from tune.serialize import dumps_computation, loads_computation
from tune.task import Task, check_outputs, workload_key
from tune.workloads import matmul, softmax

TARGET = "llvm" if importlib.util.find_spec("codegen.llvm") else "ireval"


def _have_target():
    try:
        if TARGET == "llvm":
            from codegen.llvm import build_llvm  # noqa: F401
        else:
            from codegen.ireval import build_ireval  # noqa: F401
    except Exception as e:
        pytest.skip(f"target {TARGET} is not available yet: {e}")


def test_autotune_small_matmul_end_to_end(tmp_path):
    _have_target()
    w = matmul(16, 16, 16)
    dbp = tmp_path / "mm.db"
    kernel, record, result = autotune(w.outputs, w.args, target=TARGET, trials=10, db=dbp, strategy="evolutionary",
                                      reference=w.reference, repeats=2, min_repeat_s=0.001, progress=False,
                                      return_result=True, timeout=60, confirm=1)
    assert record.ok and record.median > 0 and record.target == TARGET
    assert len(result.records) == 10 and result.records[0].point == {"baseline": True}
    assert record.median == min(r.median for r in result.records if r.ok)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((16, 16)).astype(np.float32)
    b = rng.standard_normal((16, 16)).astype(np.float32)
    c = np.zeros((16, 16), np.float32)
    kernel(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    db = Database(dbp)
    # one record per distinct schedule (points that give the same trace are measured once)
    assert db.count() == len({r.trace for r in result.records}) >= 5
    # apply_best replays the stored schedule onto a fresh nest
    nest = apply_best(LoopNest(w.outputs), dbp, target=TARGET)
    assert nest is not None and nest.history == LoopNest(w.outputs).replay(record.trace).history
    from codegen import build
    k2 = build(nest, w.args, target=TARGET)
    c2 = np.zeros_like(c)
    k2(a, b, c2)
    np.testing.assert_allclose(c2, c, rtol=1e-5, atol=1e-5)
    # a second run with the same database re-measures nothing
    _, record2, result2 = autotune(w.outputs, w.args, target=TARGET, trials=10, db=dbp, strategy="evolutionary",
                                   reference=w.reference, progress=False, return_result=True, confirm=1)
    assert result2.measured == 0 and result2.reused == 10 and record2.trace == record.trace


def test_apply_best_without_records_and_on_used_nests(tmp_path):
    w = matmul(8, 8, 8)
    assert apply_best(LoopNest(w.outputs), tmp_path / "empty.db") is None
    nest = LoopNest(w.outputs)
    nest.split_with_tail(nest.get_loops_for(w.outputs[0])[0], 2)
    with pytest.raises(ValueError, match="fresh nest"):
        apply_best(nest, tmp_path / "empty.db")


def test_workload_key_is_structural_and_survives_serialisation():
    w1, w2 = matmul(8, 8, 8), matmul(8, 8, 8)
    assert workload_key(w1.outputs) == workload_key(w2.outputs)
    assert workload_key(w1.outputs) != workload_key(matmul(8, 8, 16).outputs)
    outs, args = loads_computation(dumps_computation(w1.outputs, w1.args))
    assert workload_key(outs) == workload_key(w1.outputs)
    s = softmax(4, 8)     # Max and Sum reducers travel as expressions
    outs, _ = loads_computation(dumps_computation(s.outputs, s.args))
    assert str(LoopNest(outs)) == str(LoopNest(s.outputs))


def test_task_payload_round_trip_and_reference():
    w = matmul(4, 4, 4)
    t = Task(w.outputs, w.args, reference=w.reference, seed=3)
    t2 = Task.from_payload(t.payload())
    assert t2.key == t.key and np.array_equal(t2.inputs["A"], t.inputs["A"])
    want = t.inputs["A"].astype(np.float64) @ t.inputs["B"]
    np.testing.assert_allclose(t.reference["C"], want, rtol=1e-6)
    assert check_outputs({"C": t.reference["C"]}, t.reference) is None
    assert "differs" in check_outputs({"C": t.reference["C"] + 1}, t.reference)
    with pytest.raises(ValueError, match="concrete sizes"):
        from te import Buffer, Compute, Var
        N = Var("N")
        A = Buffer("A", (N,), "float32")
        B = Compute("B", (N,), lambda i: A[i] + 1.0)
        Task([B], [A, B], reference=lambda ins: ins["A"] + 1)


def test_features_of_scheduled_nests_differ():
    w = matmul(32, 32, 32)
    n0 = LoopNest(w.outputs)
    n1 = LoopNest(w.outputs)
    i, j, k = n1.get_loops_for(w.outputs[0])
    try:
        n1.split_with_tail(j, 8)
    except Exception as e:
        pytest.skip(f"split unavailable: {e}")
    f0, f1 = nest_features(n0), nest_features(n1)
    assert f0.shape == f1.shape == (FEATURE_COUNT,)
    assert np.isfinite(f0).all() and not np.array_equal(f0, f1)
    assert f0[0] == pytest.approx(np.log2(32 * 32 * 32 + 32 * 32))


@pytest.mark.parametrize("reference", [None, "ireval", TARGET])
def test_default_reference_is_the_unscheduled_nest(reference):
    try:
        from codegen.ireval import build_ireval  # noqa: F401
    except Exception as e:
        pytest.skip(f"IREval is not available yet: {e}")
    w = matmul(4, 6, 5)
    t = Task(w.outputs, w.args, reference=reference, target=TARGET)
    want = t.inputs["A"].astype(np.float64) @ t.inputs["B"]
    np.testing.assert_allclose(t.reference["C"], want, rtol=1e-5, atol=1e-5)
    assert "unscheduled nest" in t.reference_source


def _vec_or_not(cfg, nest):
    """A schedule with a knob that changes nothing: points (v, False) and (v, True) give the same trace."""
    i, j = nest.get_loops_for(nest.outputs[0])
    f = cfg.split("v", None, [4, 8])
    cfg.flag("unused")
    if not cfg.defining:
        nest.vectorize(nest.split_with_tail(j, f)[1])


def test_points_with_the_same_schedule_in_one_batch_are_measured_once(tmp_path):
    _have_target()
    from tune.space import ScheduleSpace
    from tune.workloads import elementwise
    w = elementwise(8, 16)
    space = ScheduleSpace(_vec_or_not, w.outputs)
    assert space.size == 4
    _, _, result = autotune(w.outputs, w.args, target=TARGET, trials=5, db=tmp_path / "d.db", space=space,
                            strategy="grid", reference=w.reference, repeats=1, min_repeat_s=0.0, progress=False,
                            return_result=True)
    # the baseline and the 4 points in one batch: 3 distinct schedules, each measured once
    assert len(result.records) == 5 and result.measured == 3 and result.reused == 2
    assert Database(tmp_path / "d.db").count() == 3
    # a repeat reports the record of the candidate measured with it
    traces = [r.trace for r in result.records]
    assert traces[0] == "[]" and traces[1] == traces[3] != traces[2] == traces[4] != "[]"
    assert result.records[3] is result.records[1] and result.records[4] is result.records[2]
