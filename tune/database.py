"""The tuning-records database: SQLite in WAL mode, one row per measured candidate.

Each record holds the workload key, the target, the device fingerprint (and its
description), library versions, the knob values and the schedule trace (history JSON),
time statistics and any error. A candidate is identified by (workload, target, device,
trace), so a resumed run finds what it already measured; ``best`` never returns a failed
record. Records move between machines as JSON lines.

>>> import os, tempfile
>>> db = Database(os.path.join(tempfile.mkdtemp(), "records.db"))
>>> db.journal_mode
'wal'
>>> db.add(Record(workload_key="w", target="llvm", device="d", trace="[]", median=1e-3, costs=[1e-3]))
True
>>> db.best("w", "llvm", "d").median
0.001
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Iterable, Iterator

from .errors import DatabaseError

__all__ = ["Database", "Record", "trace_key"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    workload_key TEXT NOT NULL,
    workload TEXT NOT NULL DEFAULT '',
    target TEXT NOT NULL,
    device TEXT NOT NULL,
    device_desc TEXT NOT NULL DEFAULT '{}',
    versions TEXT NOT NULL DEFAULT '{}',
    point TEXT NOT NULL DEFAULT '{}',
    trace TEXT NOT NULL,
    trace_key TEXT NOT NULL,
    median REAL, mean REAL, std REAL, min REAL, max REAL,
    number INTEGER NOT NULL DEFAULT 0,
    costs TEXT NOT NULL DEFAULT '[]',
    build_s REAL NOT NULL DEFAULT 0,
    run_s REAL NOT NULL DEFAULT 0,
    error_kind TEXT,
    error TEXT,
    created REAL NOT NULL,
    run_id TEXT NOT NULL DEFAULT '',
    UNIQUE (workload_key, target, device, trace_key)
);
CREATE INDEX IF NOT EXISTS records_best ON records (workload_key, target, device, error_kind, median);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
"""


def trace_key(trace: str | list, point: dict | None = None, invalid: bool = False) -> str:
    """The identity of a schedule: sha256 of its canonical trace JSON (of the point, for a
    schedule that could not be applied)."""
    if invalid:
        text = "point:" + json.dumps(point or {}, sort_keys=True, separators=(",", ":"))
    else:
        obj = json.loads(trace) if isinstance(trace, str) else trace
        text = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Record:
    """One measured (or failed) candidate."""

    workload_key: str
    target: str
    device: str
    trace: str = "[]"
    point: dict = field(default_factory=dict)
    workload: str = ""
    device_desc: dict = field(default_factory=dict)
    versions: dict = field(default_factory=dict)
    median: float | None = None
    mean: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    number: int = 0
    costs: list = field(default_factory=list)
    build_s: float = 0.0
    run_s: float = 0.0
    error_kind: str | None = None
    error: str | None = None
    created: float = field(default_factory=time.time)
    run_id: str = ""
    trace_key: str = ""
    id: int | None = None

    def __post_init__(self):
        if not self.trace_key:
            self.trace_key = trace_key(self.trace, self.point, invalid=self.error_kind == "InvalidSchedule")

    @property
    def ok(self) -> bool:
        return self.error_kind is None and self.median is not None

    @property
    def cost(self) -> float:
        """The median time, ``inf`` for a failed candidate."""
        return self.median if self.ok else float("inf")

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("id")
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Record":
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise DatabaseError(f"record has unknown fields {sorted(unknown)}; expected fields of {sorted(names)}")
        for req in ("workload_key", "target", "device"):
            if req not in d:
                raise DatabaseError(f"record lacks the field {req!r}: {str(d)[:200]}")
        d = dict(d)
        d.pop("id", None)
        return cls(**d)


_JSON_COLS = ("point", "device_desc", "versions", "costs")
_COLS = [f.name for f in fields(Record) if f.name != "id"]


class Database:
    """Tuning records in an SQLite file (WAL mode: readers never block the writer).

    >>> # db = Database("records.db"); db.best(task.key, "llvm", device)
    """

    def __init__(self, path: str | os.PathLike, timeout: float = 30.0):
        self.path = os.fspath(path)
        d = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(d, exist_ok=True)
        try:
            self._con = sqlite3.connect(self.path, timeout=timeout, check_same_thread=False)
            self.journal_mode = self._con.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            self._con.execute("PRAGMA synchronous=NORMAL")
            self._con.executescript(_SCHEMA)
            self._con.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            self._con.commit()
        except sqlite3.DatabaseError as e:
            raise DatabaseError(f"cannot open the tuning database {self.path!r}: {e}") from e

    # -- writing ----------------------------------------------------------------------
    def add(self, rec: Record) -> bool:
        """Store ``rec``; False (and nothing changes) when this candidate is already stored."""
        row = [json.dumps(getattr(rec, c)) if c in _JSON_COLS else getattr(rec, c) for c in _COLS]
        cur = self._con.execute(
            f"INSERT OR IGNORE INTO records ({', '.join(_COLS)}) VALUES ({', '.join('?' * len(_COLS))})", row)
        self._con.commit()
        if cur.rowcount:
            rec.id = cur.lastrowid
        return bool(cur.rowcount)

    # -- reading ----------------------------------------------------------------------
    def _rows(self, sql: str, params: Iterable[Any] = ()) -> list[Record]:
        cur = self._con.execute(sql, tuple(params))
        names = [d[0] for d in cur.description]
        out = []
        for row in cur.fetchall():
            d = dict(zip(names, row))
            for c in _JSON_COLS:
                d[c] = json.loads(d[c])
            rid = d.pop("id")
            r = Record(**d)
            r.id = rid
            out.append(r)
        return out

    @staticmethod
    def _where(workload_key=None, target=None, device=None, ok_only=False):
        conds, params = [], []
        for col, v in (("workload_key", workload_key), ("target", target), ("device", device)):
            if v is not None:
                conds.append(f"{col} = ?")
                params.append(v)
        if ok_only:
            conds.append("error_kind IS NULL AND median IS NOT NULL")
        return (" WHERE " + " AND ".join(conds) if conds else ""), params

    def get(self, workload_key: str, target: str, device: str, key: str) -> Record | None:
        """The stored record of one candidate (by its ``trace_key``), or None."""
        rows = self._rows("SELECT * FROM records WHERE workload_key=? AND target=? AND device=? AND trace_key=?",
                          (workload_key, target, device, key))
        return rows[0] if rows else None

    def records(self, workload_key: str | None = None, target: str | None = None,
                device: str | None = None) -> list[Record]:
        """Records in insertion order, optionally filtered."""
        where, params = self._where(workload_key, target, device)
        return self._rows(f"SELECT * FROM records{where} ORDER BY id", params)

    def top(self, workload_key: str, target: str | None = None, device: str | None = None,
            k: int = 1) -> list[Record]:
        """The ``k`` fastest successful records (failed candidates are never returned)."""
        where, params = self._where(workload_key, target, device, ok_only=True)
        return self._rows(f"SELECT * FROM records{where} ORDER BY median, id LIMIT ?", list(params) + [int(k)])

    def best(self, workload_key: str, target: str | None = None, device: str | None = None) -> Record | None:
        """The fastest successful record, or None."""
        r = self.top(workload_key, target, device, 1)
        return r[0] if r else None

    def count(self, workload_key: str | None = None, target: str | None = None, device: str | None = None) -> int:
        where, params = self._where(workload_key, target, device)
        return self._con.execute(f"SELECT COUNT(*) FROM records{where}", params).fetchone()[0]

    def __len__(self) -> int:
        return self.count()

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    # -- exchange ---------------------------------------------------------------------
    def export_jsonl(self, path: str | os.PathLike, workload_key: str | None = None) -> int:
        """Write records as JSON lines; returns how many."""
        recs = self.records(workload_key)
        with open(path, "w") as f:
            for r in recs:
                f.write(json.dumps(r.to_json(), sort_keys=True) + "\n")
        return len(recs)

    def import_jsonl(self, path: str | os.PathLike) -> int:
        """Add the records of a JSON-lines file (already stored ones are skipped); returns how many were new."""
        n = 0
        with open(path) as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    d = json.loads(line)
                except json.JSONDecodeError as e:
                    raise DatabaseError(f"{path}:{lineno}: not a JSON record: {e}") from e
                n += self.add(Record.from_json(d))
        return n

    def close(self) -> None:
        self._con.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
