"""Fault tests through the whole tuner: candidates that segfault, hang, exhaust memory,
fail to build or return wrong values cost one trial each; the run finishes, the database
stays readable, and none of them is chosen. A killed run resumes without re-measuring."""
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tune.database import Database
from tune.errors import ErrorKind
from tune.executor import LocalExecutor
from tune.runner import MeasureOptions, Runner
from tune.tuner import Tuner
from tune_fakes import BehaviourSpace, fake_builder, tiny_task

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

FAULTS = {"segv": ErrorKind.CRASH, "abort": ErrorKind.CRASH, "hang": ErrorKind.RUN_TIMEOUT,
          "wrong": ErrorKind.WRONG_RESULT, "oom": ErrorKind.RUN_ERROR, "build_error": ErrorKind.BUILD_ERROR,
          "build_hang": ErrorKind.BUILD_TIMEOUT, "build_segv": ErrorKind.CRASH}


def test_faulty_candidates_are_recorded_and_never_chosen(tmp_path):
    task = tiny_task()
    behaviours = ["ok"] + list(FAULTS) + ["illegal"]
    space = BehaviourSpace(behaviours, speeds=(30, 1))
    db = Database(tmp_path / "faults.db")
    ex = LocalExecutor(max_workers=2, memory_limit=2 << 30)
    runner = Runner(ex, build_timeout=1.0, run_timeout=1.0)
    opts = MeasureOptions(target="fake", repeats=3, min_repeat_s=0.0, builder=fake_builder)
    # the slow "ok" sleeps 3 ms against 0.1 ms: no timing jitter can swap the two
    points = [space.point({"behaviour": b, "speed": 1}) for b in behaviours] + \
        [space.point({"behaviour": "ok", "speed": 30})]
    from tune.strategies import Strategy

    class Fixed(Strategy):
        def _propose(self, n):
            out = [p for p in points if p not in self.proposed][:n]
            return out

    tuner = Tuner(task, space, db, strategy=Fixed(space), runner=runner, options=opts, progress=False,
                  include_baseline=False, batch_size=len(points))
    try:
        t0 = time.monotonic()
        result = tuner.tune(trials=len(points) - 1)     # the illegal point is not a trial
        elapsed = time.monotonic() - t0
    finally:
        ex.shutdown()
    assert elapsed < 60
    kinds = {r.point["behaviour"]: r.error_kind for r in result.records if r.point["speed"] == 1}
    assert kinds == {"ok": None, **FAULTS}
    assert result.invalid == 1
    best = result.best
    assert best.ok and best.point == {"behaviour": "ok", "speed": 1}
    # the database is readable by a fresh connection and agrees
    fresh = Database(tmp_path / "faults.db")
    assert fresh.best(task.key).point == {"behaviour": "ok", "speed": 1}
    stored = {(r.point["behaviour"], r.point["speed"]): r.error_kind for r in fresh.records(task.key)}
    assert stored[("illegal", 1)] == ErrorKind.INVALID_SCHEDULE and stored[("wrong", 1)] == ErrorKind.WRONG_RESULT
    assert len(stored) == len(points)
    assert all(r.error for r in fresh.records(task.key) if r.error_kind)
    assert "differs" in next(r.error for r in fresh.records(task.key) if r.error_kind == ErrorKind.WRONG_RESULT)


RESUME_SCRIPT = textwrap.dedent("""
    import sys
    sys.path[:0] = [{root!r}, {here!r}]
    from tune.database import Database
    from tune.runner import MeasureOptions, Runner
    from tune.tuner import Tuner
    from tune.executor import LocalExecutor
    from tune_fakes import BehaviourSpace, fake_builder, tiny_task

    if __name__ == "__main__":
        space = BehaviourSpace(["ok"], speeds=tuple(range(1, 13)))
        ex = LocalExecutor(1)
        opts = MeasureOptions(target="fake", repeats=1, min_repeat_s=0.0, builder=fake_builder,
                              build_options={{"log": {log!r}, "slow_s": float(sys.argv[1])}})
        tuner = Tuner(tiny_task(), space, Database({db!r}), strategy="random", seed=5, runner=Runner(ex),
                      options=opts, progress=False, batch_size=1)
        res = tuner.tune(trials=10)
        print("RESULT", res.measured, res.reused, res.best.point["speed"])
        ex.shutdown()
""")


def test_killed_run_resumes_without_remeasuring(tmp_path):
    log, dbp = tmp_path / "builds.log", tmp_path / "resume.db"
    script = tmp_path / "resume.py"
    script.write_text(RESUME_SCRIPT.format(root=str(ROOT), here=str(HERE), log=str(log), db=str(dbp)))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, str(script), "0.3"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:       # kill it once 4 candidates are stored
            if dbp.exists() and Database(dbp).count() >= 4:
                break
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)     # the tuner and its worker, mid-run
        proc.wait()
    stored = Database(dbp).count()
    assert 4 <= stored < 11, stored
    built_before = log.read_text().splitlines()
    out = subprocess.run([sys.executable, str(script), "0"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    measured, reused, best_speed = out.stdout.split("RESULT")[1].split()
    built_after = log.read_text().splitlines()[len(built_before):]
    # the baseline and the stored candidates come from the database
    assert int(reused) == stored and int(measured) == 10 - stored
    assert len(built_after) == 10 - stored
    assert not set(built_after) & set(built_before[:stored])
    db = Database(dbp)
    assert db.count() == 10
    assert db.best(db.records()[0].workload_key).point["speed"] == int(best_speed)
