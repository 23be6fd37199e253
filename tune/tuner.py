"""The tuning loop: propose points, schedule them, measure what is new, remember everything.

Each trial: the strategy proposes a point; the space schedules a fresh nest with it (in
this process: cheap, no compilation); a schedule that raises ``ScheduleError`` (or runs
past ``prepare_timeout``, or exhausts a resource: ``errors.RESOURCE_ERRORS``) is recorded as
``InvalidSchedule`` and does not use up a trial (any other exception from the space is a bug
in it or in the transforms, and propagates); a schedule already in the database (same
workload, target, device and trace) reuses its stored result, so a run that was killed
resumes where it stopped; the rest are measured in worker processes. The unscheduled
nest is always measured first, as the baseline and the fallback.

A measurement is never lost to the database: when a write (or a lookup) fails, the run
warns and goes on without the database, keeping the records it could not store in
``TuneResult.unsaved``; at the end they are also written as JSON lines next to the
database file (``TuneResult.unsaved_path``), ready for ``Database.import_jsonl``.
"""
from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
import uuid
import warnings
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from .database import Database, Record, trace_key, write_jsonl
from .device import device_fingerprint, library_versions
from loopnest import ScheduleError

from .errors import RESOURCE_ERRORS, DatabaseError, ErrorKind
from .features import FEATURE_COUNT, nest_features
from .progress import Progress
from .runner import MeasureOptions, MeasureResult, Runner
from .space import Point, ScheduleSpace
from .strategies import Strategy, make_strategy
from .task import Task

__all__ = ["Tuner", "TuneResult", "Prepared"]


class ScheduleTimeout(Exception):
    """Scheduling a point (in the tuner process) took longer than ``prepare_timeout``."""


@contextlib.contextmanager
def _time_limit(seconds: float | None):
    """Raise ScheduleTimeout after ``seconds`` (main thread on POSIX only; elsewhere no limit)."""
    if not seconds or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def on_alarm(signum, frame):
        raise ScheduleTimeout(f"scheduling took longer than {seconds} s")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Prepared:
    """A point scheduled in the tuner process: its trace and features, or why it is illegal."""

    point: Point | None
    values: dict
    trace: str | None
    features: np.ndarray | None
    error: str | None = None

    @property
    def valid(self) -> bool:
        return self.trace is not None


@dataclass
class TuneResult:
    """What a tuning run did: its records (one per trial, in order) and the best one."""

    records: list[Record] = field(default_factory=list)
    best: Record | None = None
    measured: int = 0     # candidates measured in this run
    reused: int = 0       # candidates whose result came from the database
    invalid: int = 0      # points whose schedule raised (not counted as trials)
    out_of_time: bool = False   # stopped by ``time_budget_s`` before ``trials`` were done
    db_error: str | None = None         # why the database stopped taking records, if it did
    unsaved: list[Record] = field(default_factory=list)   # records the database did not take
    unsaved_path: str | None = None     # the JSON-lines file holding ``unsaved``, if written

    @property
    def costs(self) -> list[float]:
        """Per-trial median seconds (``inf`` for failures), for ``plot_tuning_curve``."""
        return [r.cost for r in self.records]

    def errors(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.records:
            if r.error_kind:
                out[r.error_kind] = out.get(r.error_kind, 0) + 1
        return out


class Tuner:
    """Tunes one ``Task`` over one ``ScheduleSpace``.

    >>> # Tuner(task, space, db=Database("r.db"), strategy="model").tune(trials=50)
    """

    def __init__(self, task: Task, space: ScheduleSpace, db: Database | None = None,
                 strategy: str | Strategy = "model", runner: Runner | None = None,
                 options: MeasureOptions | None = None, seed: int = 0, batch_size: int | None = None,
                 progress: bool | Progress = True, include_baseline: bool = True,
                 on_record: Callable[[Record], None] | None = None, label: str = "",
                 prepare_timeout: float | None = 20.0):
        self.task = task
        self.prepare_timeout = prepare_timeout
        self.space = space
        self.db = db if db is not None else Database(":memory:")
        self.options = options or MeasureOptions(target=task.target)
        self.target = self.options.target
        self.device, self.device_desc = device_fingerprint(self.target)
        self.runner = runner
        self.seed = seed
        self.batch_size = batch_size
        self.progress = progress
        self.include_baseline = include_baseline
        self.on_record = on_record
        self.label = label or ",".join(task.output_names)
        self.run_id = uuid.uuid4().hex[:12]
        self._prepared: dict[Point, Prepared] = {}
        opts = {"featurize": self.featurize} if strategy == "model" else {}
        self.strategy = make_strategy(strategy, space, seed=seed, **opts)

    # -- scheduling in this process -----------------------------------------------------
    def prepare(self, point: Point) -> Prepared:
        """Schedule ``point`` on a fresh nest (cached): its trace and features, or its error."""
        p = self._prepared.get(point)
        if p is not None:
            return p
        values = self.space.values(point)
        try:
            with _time_limit(self.prepare_timeout):
                nest = self.space.apply(point)
            trace = json.dumps(nest.history)
        except (ScheduleError, ScheduleTimeout, *RESOURCE_ERRORS) as e:
            p = Prepared(point, values, None, None, f"{type(e).__name__}: {e}")
        else:
            try:
                feats = nest_features(nest, self.task.sizes)
            except RESOURCE_ERRORS:   # features only guide the search: the nest still gets measured
                feats = np.full(FEATURE_COUNT, np.nan)
            p = Prepared(point, values, trace, feats)
        self._prepared[point] = p
        return p

    def featurize(self, points: Sequence[Point]) -> np.ndarray:
        """Features of the scheduled nests of ``points`` (a NaN row for an illegal schedule)."""
        rows = []
        for pt in points:
            p = self.prepare(tuple(pt))
            rows.append(p.features if p.valid else np.full(FEATURE_COUNT, np.nan))
        return np.asarray(rows).reshape(len(rows), FEATURE_COUNT)

    # -- records --------------------------------------------------------------------------
    def _record(self, prep: Prepared, res: MeasureResult | None, error_kind: str | None = None,
                error: str | None = None) -> Record:
        stats = res.stats if res is not None and res.ok else None
        kind = error_kind or (res.error_kind if res is not None else None)
        return Record(
            workload_key=self.task.key, workload=self.label, target=self.target, device=self.device,
            device_desc=self.device_desc, versions=library_versions(), point=prep.values,
            trace=prep.trace if prep.trace is not None else "[]",
            median=stats.median if stats else None, mean=stats.mean if stats else None,
            std=stats.std if stats else None, min=stats.min if stats else None, max=stats.max if stats else None,
            number=stats.number if stats else 0, costs=list(stats.costs) if stats else [],
            build_s=res.build_s if res is not None else 0.0, run_s=res.run_s if res is not None else 0.0,
            error_kind=kind, error=error if error is not None else (res.error if res is not None else None),
            run_id=self.run_id)

    # -- the loop ---------------------------------------------------------------------------
    def tune(self, trials: int, time_budget_s: float | None = None) -> TuneResult:
        """Run ``trials`` trials (database hits included) and return what happened.

        With ``time_budget_s`` the run also stops once that many seconds have passed: no
        new candidate starts after the deadline (candidates are then measured a few at a
        time, as many as the executor runs at once, so the overrun is at most one
        candidate's build and run time limits).
        """
        result = TuneResult()
        deadline = None if time_budget_s is None else time.monotonic() + max(0.0, time_budget_s)

        def out_of_time() -> bool:
            if deadline is not None and time.monotonic() >= deadline:
                result.out_of_time = True
            return result.out_of_time
        own_runner = self.runner is None
        runner = self.runner or Runner()
        ref = None
        bar = self.progress if isinstance(self.progress, Progress) else Progress(
            trials, label=f"tuning {self.label}", enabled=bool(self.progress))
        seen_traces: dict[str, Record] = {}
        try:
            pending: list[Prepared] = []
            if self.include_baseline and trials > 0:
                pending.append(Prepared(None, {"baseline": True}, "[]", None))
            invalid_budget = max(100, 20 * trials)
            while len(result.records) < trials and not out_of_time():
                room = trials - len(result.records) - len(pending)
                if room > 0:
                    batch = max(1, self.batch_size or min(room, 8))
                    pts = self.strategy.propose(min(batch, room))
                    if not pts and not pending:
                        break
                    for pt in pts:
                        prep = self.prepare(pt)
                        if prep.valid:
                            pending.append(prep)
                            continue
                        result.invalid += 1
                        self._store(result, self._record(prep, None, ErrorKind.INVALID_SCHEDULE, prep.error))
                        self.strategy.update([pt], [float("inf")])
                    if result.invalid > invalid_budget:
                        break
                    if not pending:
                        continue
                todo: list[Prepared] = []
                todo_keys: set[str] = set()
                again: list[Prepared] = []      # same schedule as a candidate of this batch
                for prep in pending:
                    key = trace_key(prep.trace)
                    stored = seen_traces.get(key) or self._lookup(result, key)
                    if stored is not None:
                        result.reused += 1
                        self._finish(result, prep, stored, bar)
                    elif key in todo_keys:
                        again.append(prep)
                    else:
                        todo_keys.add(key)
                        todo.append(prep)
                pending = again        # measured once, with the first of them, then reused
                if todo and ref is None:
                    ref = self.task.save()
                step = max(1, len(todo))
                if deadline is not None:
                    step = max(1, getattr(runner.executor, "max_workers", 1) or 1)
                for start in range(0, len(todo), step):
                    if start and out_of_time():
                        break
                    chunk = todo[start:start + step]
                    measured = runner.run(ref, [p.trace for p in chunk], self.options)
                    for prep, res in zip(chunk, measured):
                        rec = self._record(prep, res)
                        self._store(result, rec)
                        seen_traces[rec.trace_key] = rec
                        result.measured += 1
                        self._finish(result, prep, rec, bar)
        finally:
            bar.close()
            self._save_unsaved(result)
            if own_runner:
                runner.close()
            if ref is not None and ref.path:
                import os
                try:
                    os.unlink(ref.path)
                except OSError:
                    pass
        ok = [r for r in result.records if r.ok]
        result.best = min(ok, key=lambda r: r.median) if ok else None
        return result

    # -- the database ---------------------------------------------------------------------
    def _db_failed(self, result: TuneResult, e: DatabaseError) -> None:
        result.db_error = str(e)
        warnings.warn(f"{e}. The tuning run goes on without the database; its records are kept in "
                      "TuneResult.unsaved and written as JSON lines at the end", RuntimeWarning, stacklevel=3)

    def _store(self, result: TuneResult, rec: Record) -> None:
        """Add ``rec`` to the database, or to ``result.unsaved`` once the database has failed."""
        if result.db_error is None:
            try:
                self.db.add(rec)
                return
            except DatabaseError as e:
                self._db_failed(result, e)
        result.unsaved.append(rec)

    def _lookup(self, result: TuneResult, key: str) -> Record | None:
        """The stored record of the candidate ``key`` (None once the database has failed)."""
        if result.db_error is not None:
            return None
        try:
            return self.db.get(self.task.key, self.target, self.device, key)
        except DatabaseError as e:
            self._db_failed(result, e)
            return None

    def _save_unsaved(self, result: TuneResult) -> None:
        """Write the records the database did not take next to its file, and say where."""
        if not result.unsaved:
            return
        where = "they are only in TuneResult.unsaved"
        if self.db.path not in ("", ":memory:"):
            path = f"{self.db.path}.unsaved-{self.run_id}.jsonl"
            try:
                write_jsonl(result.unsaved, path)
                result.unsaved_path = path
                where = (f"they are written to {path} (add them to a sound database with "
                         "Database.import_jsonl) and kept in TuneResult.unsaved")
            except OSError as e:
                where += f" (writing them to {path} failed: {e})"
        warnings.warn(f"{len(result.unsaved)} records of this tuning run could not be stored in the database "
                      f"{self.db.path!r} ({result.db_error}); {where}", RuntimeWarning, stacklevel=2)

    def _finish(self, result: TuneResult, prep: Prepared, rec: Record, bar: Progress) -> None:
        result.records.append(rec)
        if prep.point is not None:
            self.strategy.update([prep.point], [rec.cost])
        bar.update(best=rec.median if rec.ok else None, error=not rec.ok)
        if self.on_record is not None:
            self.on_record(rec)
