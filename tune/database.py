"""The tuning-records database: SQLite in WAL mode, one row per measured candidate.

Each record holds the workload key, the target, the device fingerprint (and its
description), library versions, the knob values and the schedule trace (history JSON),
time statistics and any error. A candidate is identified by (workload, target, device,
trace), so a resumed run finds what it already measured; ``best`` never returns a failed
record. Records move between machines as JSON lines.

A database file is checked when it is opened (``PRAGMA quick_check``, and that it is an
SQLite file with the records table): a damaged one raises ``DatabaseError`` before anything
is measured. A path that does not exist is a new database; an existing empty file is not
(it is what a crash or a full disk leaves), so it is reported as damaged too. Every SQLite
failure of a query is a ``DatabaseError`` naming the file.

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

import contextlib
import hashlib
import json
import os
import sqlite3
import time
import uuid
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Iterable, Iterator

from .errors import DatabaseError

__all__ = ["Database", "Record", "trace_key", "write_jsonl"]

SCHEMA_VERSION = 1

_SQLITE_HEADER = b"SQLite format 3\x00"

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


def write_jsonl(records: Iterable[Record], path: str | os.PathLike) -> int:
    """Write ``records`` as JSON lines (``Database.import_jsonl`` reads them back); returns how many.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "r.jsonl")
    >>> write_jsonl([Record(workload_key="w", target="llvm", device="d")], path)
    1
    """
    n = 0
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r.to_json(), sort_keys=True) + "\n")
            n += 1
    return n


def _damage_advice(path: str, recoverable: bool = True) -> str:
    advice = "move it aside or delete it to start a new database"
    return advice + (f" (`sqlite3 {path} .recover` may save its readable records)" if recoverable else "")


def _is_damage(e: sqlite3.DatabaseError) -> bool:
    """Whether SQLite reports a damaged file (rather than a lock, a full disk, a permission)."""
    return getattr(e, "sqlite_errorname", None) in ("SQLITE_CORRUPT", "SQLITE_NOTADB")


def _check_header(path: str) -> str | None:
    """What is wrong with the existing file ``path`` as an SQLite database, or None."""
    with open(path, "rb") as f:
        head = f.read(len(_SQLITE_HEADER))
    if not head:
        return "it is an empty file (0 bytes), not a database"
    if head != _SQLITE_HEADER:
        return "it is not an SQLite database (it does not start with the SQLite header)"
    return None


class Database:
    """Tuning records in an SQLite file (WAL mode: readers never block the writer).

    >>> # db = Database("records.db"); db.best(task.key, "llvm", device)
    """

    def __init__(self, path: str | os.PathLike, timeout: float = 30.0):
        self.path = os.fspath(path)
        in_memory = self.path in ("", ":memory:")
        if not in_memory:
            try:
                os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
                if not os.path.exists(self.path):
                    _create(self.path)
                problem = _check_header(self.path)
            except (OSError, sqlite3.DatabaseError) as e:
                raise DatabaseError(f"cannot open the tuning database {self.path!r}: {e}") from e
            if problem is not None:
                raise self._damaged(problem, recoverable=False)
        try:
            self._con = sqlite3.connect(self.path, timeout=timeout, check_same_thread=False)
        except sqlite3.DatabaseError as e:
            raise DatabaseError(f"cannot open the tuning database {self.path!r}: {e}") from e
        try:
            if not in_memory:
                self._check_integrity()
            self.journal_mode = _init(self._con)
        except sqlite3.DatabaseError as e:
            self._con.close()
            if _is_damage(e):
                raise self._damaged(f"it is damaged ({e})") from e
            raise DatabaseError(f"cannot open the tuning database {self.path!r}: {e}") from e
        except DatabaseError:
            self._con.close()
            raise

    def _damaged(self, problem: str, recoverable: bool = True) -> DatabaseError:
        return DatabaseError(f"cannot open the tuning database {self.path!r}: {problem}; "
                             + _damage_advice(self.path, recoverable))

    def _check_integrity(self) -> None:
        rows = [r[0] for r in self._con.execute("PRAGMA quick_check(3)").fetchall()]
        if rows != ["ok"]:
            found = "; ".join(line.strip() for r in rows for line in str(r).splitlines() if line.strip())
            raise self._damaged(f"it is damaged (integrity check: {found})")
        cols = {r[1] for r in self._con.execute("PRAGMA table_info(records)")}
        missing = sorted(set(_COLS) - cols)
        if cols and missing:
            raise DatabaseError(f"cannot open the tuning database {self.path!r}: it is an SQLite database but "
                                f"its records table lacks the columns {', '.join(missing[:4])}"
                                f"{', ...' if len(missing) > 4 else ''}; it is not "
                                "a tuning database (or one of another version): give another path")

    @contextlib.contextmanager
    def _query(self, doing: str):
        """Turn SQLite failures into DatabaseError naming the file."""
        try:
            yield
        except sqlite3.ProgrammingError:   # a misuse (a closed database): a bug, not the file
            raise
        except sqlite3.DatabaseError as e:
            advice = "; it is damaged: " + _damage_advice(self.path) if _is_damage(e) else ""
            raise DatabaseError(f"{doing} the tuning database {self.path!r} failed: {e}{advice}") from e

    # -- writing ----------------------------------------------------------------------
    def add(self, rec: Record) -> bool:
        """Store ``rec``; False (and nothing changes) when this candidate is already stored."""
        row = [json.dumps(getattr(rec, c)) if c in _JSON_COLS else getattr(rec, c) for c in _COLS]
        with self._query("writing to"):
            try:
                cur = self._con.execute(
                    f"INSERT OR IGNORE INTO records ({', '.join(_COLS)}) VALUES ({', '.join('?' * len(_COLS))})",
                    row)
                self._con.commit()
            except sqlite3.DatabaseError:
                self._con.rollback()
                raise
        if cur.rowcount:
            rec.id = cur.lastrowid
        return bool(cur.rowcount)

    # -- reading ----------------------------------------------------------------------
    def _rows(self, sql: str, params: Iterable[Any] = ()) -> list[Record]:
        with self._query("reading"):
            cur = self._con.execute(sql, tuple(params))
            rows = cur.fetchall()
        names = [d[0] for d in cur.description]
        out = []
        for row in rows:
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
        with self._query("reading"):
            return self._con.execute(f"SELECT COUNT(*) FROM records{where}", params).fetchone()[0]

    def __len__(self) -> int:
        return self.count()

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    # -- exchange ---------------------------------------------------------------------
    def export_jsonl(self, path: str | os.PathLike, workload_key: str | None = None) -> int:
        """Write records as JSON lines; returns how many."""
        return write_jsonl(self.records(workload_key), path)

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


def _init(con: sqlite3.Connection) -> str:
    """Set WAL mode and create the tables (when missing); returns the journal mode."""
    mode = con.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    con.execute("PRAGMA synchronous=NORMAL")
    con.executescript(_SCHEMA)
    con.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
    con.commit()
    return mode


def _create(path: str) -> None:
    """Create a new database at ``path`` whole: made under a temporary name, then linked into
    place, so another process never finds it empty (an empty file is reported as damaged).
    When ``path`` appears meanwhile, that database is kept."""
    tmp = f"{path}.{uuid.uuid4().hex[:12]}.new"
    try:
        con = sqlite3.connect(tmp)
        try:
            _init(con)
        finally:
            con.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:          # a file system without hard links: move it unless one appeared
            if not os.path.exists(path):
                os.replace(tmp, path)
    finally:
        for p in (tmp, tmp + "-wal", tmp + "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)
