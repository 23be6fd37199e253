"""The records database: WAL mode, insert/query, failures never best, JSON-lines exchange."""
import json
import sqlite3

import pytest

from tune.database import Database, Record, trace_key
from tune.errors import DatabaseError


def rec(trace, median=None, error_kind=None, workload="w1", device="dev", target="llvm", **kw):
    return Record(workload_key=workload, target=target, device=device, trace=trace, median=median,
                  costs=[median] if median else [], error_kind=error_kind,
                  error="boom" if error_kind else None, **kw)


@pytest.fixture
def db(tmp_path):
    d = Database(tmp_path / "records.db")
    yield d
    d.close()


def test_wal_mode_is_set(db, tmp_path):
    assert db.journal_mode == "wal"
    con = sqlite3.connect(tmp_path / "records.db")
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_insert_query_best(db):
    t1 = json.dumps([{"op": "split_with_tail", "args": [{"loop": "i"}, 4], "kwargs": {}}])
    t2 = json.dumps([{"op": "split_with_tail", "args": [{"loop": "i"}, 8], "kwargs": {}}])
    assert db.add(rec(t1, 3e-3, point={"f": 4}))
    assert db.add(rec(t2, 1e-3, point={"f": 8}))
    assert db.add(rec("[]", None, "Crash"))                  # a crash: stored, never best
    assert db.add(rec("[]", 1e-6, workload="w2"))            # another workload
    assert db.add(rec("[]", 1e-7, device="other"))           # another machine
    assert not db.add(rec(t1, 9.0))                          # same candidate again: ignored
    best = db.best("w1", "llvm", "dev")
    assert best.trace == t2 and best.median == 1e-3 and best.point == {"f": 8}
    assert [r.median for r in db.top("w1", "llvm", "dev", k=5)] == [1e-3, 3e-3]
    assert db.count("w1") == 4 and len(db) == 5
    assert db.get("w1", "llvm", "dev", trace_key(t1)).median == 3e-3
    assert db.get("w1", "llvm", "dev", trace_key("[9]")) is None
    assert db.best("w1", "llvm", "nowhere") is None


def test_trace_key_is_canonical():
    a = '[{"op": "x", "args": [1], "kwargs": {}}]'
    b = '[{"kwargs": {}, "args": [1], "op": "x"}]'
    assert trace_key(a) == trace_key(b) != trace_key("[]")


def test_only_failures_means_no_best(db):
    db.add(rec("[1]", None, "WrongResult"))
    db.add(rec("[2]", None, "RunTimeout"))
    assert db.best("w1") is None


def test_jsonl_export_import_round_trip(db, tmp_path):
    db.add(rec("[]", 2e-3, point={"a": 1}, device_desc={"cpu": "x"}, versions={"numpy": "2"}))
    db.add(rec("[1]", None, "BuildError"))
    path = tmp_path / "r.jsonl"
    assert db.export_jsonl(path) == 2
    other = Database(tmp_path / "other.db")
    assert other.import_jsonl(path) == 2
    assert other.import_jsonl(path) == 0                       # already there
    a, b = db.records(), other.records()
    assert [r.to_json() for r in a] == [r.to_json() for r in b]
    assert b[0].point == {"a": 1} and b[0].device_desc == {"cpu": "x"} and b[1].error_kind == "BuildError"


def test_malformed_jsonl_is_reported(db, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"workload_key": "w", "target": "llvm", "device": "d"}\nnot json\n')
    with pytest.raises(DatabaseError, match="bad.jsonl:2"):
        db.import_jsonl(bad)
    bad.write_text('{"workload_key": "w", "target": "llvm", "device": "d", "colour": 1}\n')
    with pytest.raises(DatabaseError, match="unknown fields"):
        db.import_jsonl(bad)


def test_not_a_database(tmp_path):
    p = tmp_path / "junk.db"
    p.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(DatabaseError, match="cannot open"):
        Database(p)


def test_a_second_connection_reads_while_one_writes(db, tmp_path):
    reader = Database(tmp_path / "records.db")
    db.add(rec("[]", 1e-3))
    assert reader.count() == 1
    db.add(rec("[1]", 5e-4))
    assert reader.best("w1").median == 5e-4
