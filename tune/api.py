"""The entry points: ``autotune`` a computation, ``apply_best`` a stored schedule.

>>> import numpy as np, tempfile, os
>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> A = Buffer("A", (64,), "float32")
>>> B = Compute("B", (64,), lambda i: A[i] * 2.0)
>>> db = os.path.join(tempfile.mkdtemp(), "records.db")
>>> kernel, record = autotune([B], [A, B], target="ireval", trials=3, db=db, progress=False)  # doctest: +SKIP
>>> nest = apply_best(LoopNest([B]), db, target="ireval")   # doctest: +SKIP
"""
from __future__ import annotations

import concurrent.futures as cf
import os
import statistics
import time
from typing import Any, Callable, Mapping, Sequence

from te.tensor import Tensor

from .builder import build_candidate
from .database import Database, Record
from .device import device_fingerprint
from .errors import TuneError
from .executor import LocalExecutor
from .runner import MeasureOptions, Runner
from .space import ScheduleSpace
from .task import Task, workload_key
from .timing import time_callable
from .tuner import Tuner, TuneResult

__all__ = ["autotune", "apply_best", "confirm_best", "open_db", "tune_task", "CONFIRM_MARGIN"]


def open_db(db: str | os.PathLike | Database | None) -> Database:
    """A Database from a path (created if missing), an open Database, or None (in memory)."""
    if isinstance(db, Database):
        return db
    return Database(":memory:" if db is None else db)


def _make_executor(executor: Any) -> tuple[cf.Executor, bool]:
    if executor is None or executor == "local":
        return LocalExecutor(max_workers=1), True
    if executor == "ray":
        from .ray_executor import RayExecutor
        return RayExecutor(), True
    if isinstance(executor, cf.Executor):
        return executor, False
    raise ValueError(f"executor must be None, 'local', 'ray' or a concurrent.futures.Executor, got {executor!r}")


def tune_task(task: Task, space: ScheduleSpace, trials: int, db: Database, strategy: Any = "model",
              build_timeout: float | None = 60.0, run_timeout: float | None = 30.0, executor: Any = None,
              options: MeasureOptions | None = None, seed: int = 0, progress: bool = True,
              batch_size: int | None = None, on_record: Callable[[Record], None] | None = None,
              label: str = "", time_budget_s: float | None = None) -> TuneResult:
    """Tune a prepared Task (the lower-level form of ``autotune``, without the final build);
    ``time_budget_s`` stops the search after that many seconds even if ``trials`` are not done."""
    ex, own = _make_executor(executor)
    runner = Runner(ex, build_timeout=build_timeout, run_timeout=run_timeout)
    try:
        tuner = Tuner(task, space, db, strategy=strategy, runner=runner,
                      options=options or MeasureOptions(target=task.target), seed=seed, progress=progress,
                      batch_size=batch_size, on_record=on_record, label=label)
        return tuner.tune(trials, time_budget_s=time_budget_s)
    finally:
        if own:
            ex.shutdown()


def autotune(outputs: Sequence[Tensor] | Tensor, args: Sequence[Any], target: str = "llvm", trials: int = 20,
             db: str | os.PathLike | Database | None = None, space: Any = None, strategy: Any = "model",
             timeout: float | None = None, *, sizes: Mapping[str, int] | None = None,
             inputs: Mapping[str, Any] | None = None, reference: Any = None, seed: int = 0,
             build_timeout: float | None = None, run_timeout: float | None = None, executor: Any = None,
             repeats: int = 5, warmup: int = 1, min_repeat_s: float = 0.01, build_options: dict | None = None,
             progress: bool = True, return_result: bool = False, time_budget_s: float | None = None,
             confirm: int = 3):
    """Tune the schedule of ``outputs`` and return ``(kernel, record)``: the best kernel, built
    for ``target``, and its database record.

    ``space`` is None (the automatic space, ``auto_space``), a ``ScheduleSpace``, or a
    schedule function ``fn(cfg, nest)``. ``strategy`` is "model" (default), "evolutionary",
    "random", "grid" or a Strategy. ``timeout`` limits building and running each candidate
    (``build_timeout`` / ``run_timeout`` set them apart; defaults 60 s and 30 s). ``sizes``
    gives concrete values to size variables; ``inputs`` and ``reference`` fix the data and
    the expected outputs (see ``Task``). Every candidate is recorded in ``db`` (a path, a
    Database, or None for memory only); running again with the same ``db`` resumes. A
    damaged database raises ``DatabaseError`` before anything is measured; one that fails
    during the run costs no measurement (see ``TuneResult.unsaved``).
    ``time_budget_s`` ends the search after that many seconds from this call (counting the
    reference computation), whichever of it and ``trials`` comes first; the final build
    comes after. ``return_result=True`` returns ``(kernel, record, TuneResult)``.

    The search measures each candidate once, in a worker, so on a busy machine two
    candidates a few percent apart can trade places by chance. ``confirm`` (default 3)
    candidates, the fastest recorded ones within ``CONFIRM_MARGIN`` of the best, are timed
    again in this process in alternating rounds (``confirm_best``: each sees the same load)
    and the fastest of those rounds is returned (after ``time_budget_s``, like the final
    build); the database keeps what the search measured. ``confirm=1`` returns the best
    record as measured.

    >>> # kernel, record = autotune([C], [A, B, C], trials=50, db="matmul.db")
    """
    from .auto import auto_space
    if isinstance(confirm, bool) or not isinstance(confirm, int) or confirm < 1:
        raise ValueError(f"confirm must be a positive int (how many of the fastest candidates to time again; "
                         f"1: none), got {confirm!r}")
    started = time.monotonic()
    if isinstance(outputs, Tensor):
        outputs = [outputs]
    outputs = list(outputs)
    database = open_db(db)
    task = Task(outputs, args, sizes=sizes, inputs=inputs, reference=reference, target=target, seed=seed)
    if space is None and target == "cuda":     # the tiles the device and the shared memory allow
        from .device import gpu_description
        space = auto_space(outputs, target, arch=(gpu_description() or {}).get("arch"),
                           max_shared_bytes=(build_options or {}).get("max_shared_bytes"))
    elif space is None:
        space = auto_space(outputs, target=target)
    elif callable(space) and not isinstance(space, ScheduleSpace):
        space = ScheduleSpace(space, outputs)
    if not isinstance(space, ScheduleSpace):
        raise TypeError(f"space must be None, a ScheduleSpace or a schedule function, got {space!r}")
    options = MeasureOptions(target=target, warmup=warmup, repeats=repeats, min_repeat_s=min_repeat_s,
                             build_options=dict(build_options or {}))
    bt = build_timeout if build_timeout is not None else (timeout if timeout is not None else 60.0)
    rt = run_timeout if run_timeout is not None else (timeout if timeout is not None else 30.0)
    result = tune_task(task, space, trials, database, strategy=strategy, build_timeout=bt, run_timeout=rt,
                       executor=executor, options=options, seed=seed, progress=progress,
                       time_budget_s=None if time_budget_s is None else
                       time_budget_s - (time.monotonic() - started))
    stored = database.best(task.key, target, device_fingerprint(target)[0]) if result.db_error is None else None
    best = stored or result.best
    if best is None:
        raise TuneError(f"no candidate of {[t.name for t in outputs]} built and ran correctly in {trials} trials; "
                        f"failures: {result.errors()}; first error: "
                        f"{next((r.error for r in result.records if r.error), 'none')}")
    candidates = ([stored] if stored is not None else []) + result.records
    best, kernel = confirm_best(task, candidates, confirm, options, progress)
    if kernel is None:
        kernel = build_candidate(task, best.trace, target, dict(build_options or {}))
    if return_result:
        return kernel, best, result
    return kernel, best


#: candidates measured within this factor of the best recorded time are timed again by ``confirm_best``
CONFIRM_MARGIN = 1.25


def confirm_best(task: Task, records: Sequence[Record], count: int, options: MeasureOptions,
                 progress: bool = False, rounds: int = 7) -> tuple[Record, Any]:
    """The fastest of ``records`` (successful ones, each schedule once) when timed again here:
    the ``count`` fastest recorded ones within ``CONFIRM_MARGIN`` of the best are built and
    run in ``rounds`` alternating rounds (each round calls each kernel for at least
    ``options.min_repeat_s``; the median round decides). Returns ``(record, kernel)``; the
    kernel is None when only one candidate qualified (nothing was built).

    >>> from tune.database import Record
    >>> r = Record(workload_key="w", target="llvm", device="d", trace="[]", point={}, median=1.0)
    >>> confirm_best(None, [r], 3, MeasureOptions())
    (Record(...), None)
    """
    ok = sorted((r for r in records if r.ok), key=lambda r: r.cost)
    finalists: list[Record] = []
    for r in ok:
        if len(finalists) >= count or r.cost > ok[0].cost * CONFIRM_MARGIN:
            break
        if all(f.trace != r.trace for f in finalists):
            finalists.append(r)
    if len(finalists) < 2:
        return ok[0], None
    builder = options.builder or build_candidate
    kernels = [builder(task, r.trace, options.target, dict(options.build_options)) for r in finalists]
    calls = []
    for kernel in kernels:
        kwargs = task.call_kwargs(task.fresh_arrays())
        calls.append(lambda k=kernel, kw=kwargs: k(**kw))
    numbers = [time_callable(call, warmup=options.warmup, repeats=1, min_repeat_s=options.min_repeat_s).number
               for call in calls]
    seconds: list[list[float]] = [[] for _ in calls]
    for _ in range(rounds):
        for call, number, out in zip(calls, numbers, seconds):
            t = time.perf_counter()
            for _ in range(number):
                call()
            out.append((time.perf_counter() - t) / number)
    medians = [statistics.median(s) for s in seconds]
    pick = min(range(len(finalists)), key=medians.__getitem__)
    if progress:
        timed = ", ".join(f"{m * 1e3:.3f} ms" for m in medians)
        print(f"confirmed the {len(finalists)} fastest candidates in {rounds} alternating rounds: {timed}; "
              f"kept candidate {pick + 1} (recorded {finalists[pick].cost * 1e3:.3f} ms)", flush=True)
    return finalists[pick], kernels[pick]


def apply_best(nest, db: str | os.PathLike | Database, target: str = "llvm", device: str | None = None,
               sizes: Mapping[str, int] | None = None):
    """Replay the best stored schedule of this computation onto ``nest`` (a fresh LoopNest);
    returns ``nest``, or None when the database has no successful record for it.

    The computation is recognised by its workload key (``sizes`` must match the ones it was
    tuned at when it has size variables); ``device`` defaults to this machine's fingerprint
    for ``target`` (``"any"`` accepts records from every device).
    """
    if nest.history:
        raise ValueError(f"apply_best needs a fresh nest; this one already has {len(nest.history)} transforms "
                         "applied (make a new LoopNest of the same outputs)")
    database = open_db(db)
    key = workload_key(nest.outputs, sizes)
    dev = None if device == "any" else (device or device_fingerprint(target)[0])
    best = database.best(key, target, dev)
    if best is None:
        return None
    nest.replay(best.trace)
    return nest
