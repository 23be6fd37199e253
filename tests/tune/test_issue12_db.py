"""A damaged tuning database is found when it is opened, before anything is measured, and
reported as one typed error (one line from the command line); a database that fails during
a run costs no measurement."""
import importlib.util
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tune.cli import main
from tune.database import Database, Record
from tune.errors import DatabaseError, TuneError
from tune.executor import LocalExecutor
from tune.runner import MeasureOptions, Runner
from tune.tuner import Tuner
from tune_fakes import BehaviourSpace, fake_builder, tiny_task

ROOT = Path(__file__).resolve().parents[2]
TARGET = "llvm" if importlib.util.find_spec("codegen.llvm") else "ireval"
CLI = ["elementwise", "-p", "rows=8", "-p", "cols=16", "--trials", "2", "--target", TARGET,
       "--strategy", "random", "--repeats", "1", "--quiet"]


def rec(k):
    return Record(workload_key="w", target="llvm", device="d", trace=f"[{k}]", median=1e-3, costs=[1e-3],
                  error="x" * 200)


def filled_db(path, n=300):
    db = Database(path)
    for k in range(n):
        db.add(rec(k))
    db.close()
    return path.read_bytes()


def damaged_pages(data):
    return data[:4096] + os.urandom(4096) + data[8192:]


DAMAGES = {
    "damaged pages": (damaged_pages, "it is damaged (integrity check"),
    "truncated": (lambda data: data[:len(data) // 2], "it is damaged"),
    "empty": (lambda data: b"", "empty file (0 bytes)"),
    "not sqlite": (lambda data: b"this is not sqlite" * 100, "not an SQLite database"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_database_is_refused_when_opened(tmp_path, damage):
    make, what = DAMAGES[damage]
    bad = make(filled_db(tmp_path / "good.db"))
    path = tmp_path / "bad.db"
    path.write_bytes(bad)
    with pytest.raises(DatabaseError) as e:
        Database(path)
    msg = str(e.value)
    assert isinstance(e.value, TuneError)
    assert str(path) in msg and what in msg and "move it aside or delete it" in msg and "\n" not in msg
    assert path.read_bytes() == bad and sorted(os.listdir(tmp_path)) == ["bad.db", "good.db"]  # left as it was


def test_a_missing_path_is_a_new_database_made_whole(tmp_path):
    path = tmp_path / "sub" / "new.db"
    db = Database(path)
    assert db.add(rec(1)) and len(db) == 1
    db.close()
    assert path.read_bytes()[:16] == b"SQLite format 3\x00"
    assert sorted(os.listdir(path.parent)) == ["new.db"]        # no temporary file left behind
    assert len(Database(path)) == 1


def test_a_sqlite_file_of_something_else_is_refused(tmp_path):
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE records (x)")
    con.commit()
    con.close()
    with pytest.raises(DatabaseError, match="not a tuning database"):
        Database(path)


def test_sqlite_failures_of_queries_are_typed(tmp_path):
    db = Database(tmp_path / "r.db")
    db._con.execute("PRAGMA query_only=ON")
    with pytest.raises(DatabaseError, match=r"writing to the tuning database .*r\.db.* failed: attempt to write"):
        db.add(rec(1))


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_the_command_line_prints_one_line_and_measures_nothing(tmp_path, capsys, damage):
    path = tmp_path / "bad.db"
    path.write_bytes(DAMAGES[damage][0](filled_db(tmp_path / "good.db")))
    assert main(CLI + ["--db", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("python -m tune: error: cannot open the tuning database") and str(path) in err


def test_the_command_line_on_a_damaged_database_has_no_traceback(tmp_path):
    path = tmp_path / "bad.db"
    path.write_bytes(damaged_pages(filled_db(tmp_path / "good.db")))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "tune"] + CLI + ["--db", str(path)], capture_output=True,
                       text=True, timeout=300, cwd=ROOT, env=env)
    assert p.returncode == 1 and "Traceback" not in p.stderr and p.stdout == ""
    assert "it is damaged" in p.stderr


def test_a_database_failing_during_the_run_loses_no_measurement(tmp_path):
    path = tmp_path / "r.db"
    db = Database(path)
    behaviours = ["ok", "wrong", "build_error", "illegal"]
    space = BehaviourSpace(behaviours, speeds=(1, 2))
    ex = LocalExecutor(max_workers=1)
    opts = MeasureOptions(target="fake", repeats=1, min_repeat_s=0.0, builder=fake_builder)
    stored = []

    def break_the_database(r):
        stored.append(r)
        if len(stored) == 2:       # from now on every write fails, as on a full or read-only disk
            db._con.execute("PRAGMA query_only=ON")

    tuner = Tuner(tiny_task(), space, db, strategy="grid", runner=Runner(ex, build_timeout=30, run_timeout=30),
                  options=opts, progress=False, on_record=break_the_database)
    try:
        with pytest.warns(RuntimeWarning) as warned:
            result = tuner.tune(trials=6)
    finally:
        ex.shutdown()
    assert len(result.records) == 6 and "attempt to write a readonly database" in result.db_error
    assert str(path) in result.db_error
    db._con.execute("PRAGMA query_only=OFF")
    kept = {r.trace_key for r in db.records()}
    unsaved = {r.trace_key for r in result.unsaved}
    assert result.unsaved and not kept & unsaved
    assert {r.trace_key for r in result.records} <= kept | unsaved      # every measurement is somewhere
    assert result.unsaved_path == f"{path}.unsaved-{tuner.run_id}.jsonl"
    assert db.import_jsonl(result.unsaved_path) == len(result.unsaved)
    assert {r.trace_key for r in result.records} <= {r.trace_key for r in db.records()}
    texts = [str(w.message) for w in warned]
    assert any("goes on without the database" in t for t in texts)
    assert any(result.unsaved_path in t and "Database.import_jsonl" in t for t in texts)


def test_the_command_line_reports_a_database_that_failed_during_the_run(tmp_path, capsys, monkeypatch):
    path = tmp_path / "r.db"
    add = Database.add
    calls = []

    def failing_add(self, r):
        calls.append(r)
        if len(calls) > 1:
            raise DatabaseError(f"writing to the tuning database {self.path!r} failed: disk full")
        return add(self, r)
    monkeypatch.setattr(Database, "add", failing_add)
    with pytest.warns(RuntimeWarning, match="disk full"):
        rc = main(CLI + ["--trials", "3", "--db", str(path)])
    out, err = capsys.readouterr()
    assert rc == 1 and "best:" in out
    assert err.count("\n") == 1 and "the database failed during the run" in err
    unsaved = err.split("are written to ")[1].strip()
    assert unsaved.startswith(str(path) + ".unsaved-") and os.path.exists(unsaved)
    monkeypatch.setattr(Database, "add", add)
    db = Database(path)
    assert len(calls) == 2                # once a write failed, the run stops writing
    assert len(db) == 1 and db.import_jsonl(unsaved) == 2 and len(db) == 3     # the 3 trials
