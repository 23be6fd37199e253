"""Where measurements run: an Executor-style interface with per-task time limits.

``LocalExecutor`` is a pool of worker processes (``spawn`` by default) that it can kill
and restart: a task that segfaults, aborts, exhausts its memory limit or runs past its
time limit fails with ``WorkerCrashed`` / ``WorkerTimeout`` on its future, the worker is
replaced, and the other tasks go on. ``RayExecutor`` (in ``tune.ray_executor``) runs the
same tasks on a Ray cluster.

A task may have phases with their own time limits: ``phases={"build": 30, "run": 10}``
starts the task in phase ``"build"``; code in the worker calls ``enter_phase("run")`` to
start the next phase's clock (``exclusive_phase`` also waits for the executor's turn, so
timings never overlap even when several workers build in parallel).

>>> import math
>>> with LocalExecutor(max_workers=1) as ex:
...     ex.submit(math.sqrt, 16.0).result()
4.0
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import itertools
import multiprocessing as mp
import os
import pickle
import threading
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import wait as mp_wait
from typing import Any, Callable, Mapping

from .errors import WorkerCrashed, WorkerError, WorkerTimeout

__all__ = ["LocalExecutor", "enter_phase", "exclusive_phase", "in_worker", "default_memory_limit"]

# how long a fresh worker may take to start (imports) before it counts as crashed
STARTUP_TIMEOUT_S = 120.0

# -------------------------------------------------------------------------------------------
# worker side
# -------------------------------------------------------------------------------------------
_conn = None          # the worker's end of its pipe (None outside a LocalExecutor worker)
_task_id = None


def in_worker() -> bool:
    """True inside a LocalExecutor worker process."""
    return _conn is not None


def enter_phase(name: str) -> None:
    """Start phase ``name`` of the current task (its own time limit starts now). No-op outside a worker."""
    if _conn is not None and _task_id is not None:
        _conn.send(("phase", _task_id, name))


@contextlib.contextmanager
def exclusive_phase(name: str):
    """Run phase ``name`` while no other worker of the executor runs an exclusive phase
    (e.g. timing runs, so that measurements never overlap).

    The parent process grants the turn, so a worker killed in its turn cannot block the
    others; the phase's clock starts once the turn is granted (waiting costs no time limit).
    """
    if _conn is None or _task_id is None:
        yield
        return
    _conn.send(("acquire", _task_id, name))
    msg = _conn.recv()
    if msg != ("go", _task_id):
        raise RuntimeError(f"worker protocol error: expected the turn for task {_task_id}, got {msg!r}")
    try:
        yield
    finally:
        _conn.send(("release", _task_id, name))


def _set_limits(memory_limit: int | None) -> None:
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))   # a crashing candidate leaves no core file
        if memory_limit:
            soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            lim = memory_limit if hard == resource.RLIM_INFINITY else min(memory_limit, hard)
            resource.setrlimit(resource.RLIMIT_AS, (lim, hard))
    except (ImportError, ValueError, OSError):   # pragma: no cover - non-POSIX
        pass


def _worker_main(conn, memory_limit: int | None, sys_path: list[str]) -> None:
    global _conn, _task_id
    import sys
    for p in reversed(sys_path):
        if p not in sys.path:
            sys.path.insert(0, p)
    _set_limits(memory_limit)
    _conn = conn
    conn.send(("ready", None, os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        task_id, blob = msg
        _task_id = task_id
        try:
            try:
                fn, args, kwargs = pickle.loads(blob)   # may import modules: not counted in any phase
            except AttributeError as e:
                if "__main__" in str(e) or "__mp_main__" in str(e):
                    raise WorkerError(f"{e}: a worker does not run the main script; define the function in an "
                                      "importable module, or use LocalExecutor(import_main=True)") from e
                raise
            conn.send(("start", task_id, None))
            value = fn(*args, **kwargs)
            out = ("done", task_id, (True, value))
        except BaseException as e:   # the task's own failure is its result, not the worker's
            out = ("done", task_id, (False, _portable_exception(e)))
        _task_id = None
        try:
            conn.send(out)
        except Exception as e:  # an unpicklable result
            conn.send(("done", task_id, (False, WorkerError(f"the task's result could not be sent back: {e!r}"))))


def _portable_exception(e: BaseException) -> BaseException:
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    try:
        pickle.loads(pickle.dumps(e))
        e.worker_traceback = tb
        return e
    except Exception:   # not picklable (any error of its reduction): the future gets it by name
        err = WorkerError(f"{type(e).__name__}: {e}")
        err.worker_traceback = tb
        return err


# -------------------------------------------------------------------------------------------
# parent side
# -------------------------------------------------------------------------------------------
_starting = threading.local()      # set while this thread starts a worker that skips __main__
_original_preparation = None


def _install_preparation_hook() -> None:
    """Let workers start without re-running the user's ``__main__`` script.

    A spawned child normally re-imports the parent's main script, which re-runs an
    unguarded script's top level (and its ``autotune`` call) in every worker. The tasks
    this executor runs are importable functions, so workers skip it; the hook acts only
    in the thread that starts such a worker and changes nothing for anyone else.
    """
    global _original_preparation
    from multiprocessing import spawn
    if _original_preparation is not None:
        return
    _original_preparation = spawn.get_preparation_data

    def get_preparation_data(name):
        d = _original_preparation(name)
        if getattr(_starting, "skip_main", False):
            d.pop("init_main_from_name", None)
            d.pop("init_main_from_path", None)
        return d
    spawn.get_preparation_data = get_preparation_data


def default_memory_limit(max_workers: int = 1) -> int:
    """Address-space limit per worker: half the machine's memory shared by the workers, at least 2 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        total = 8 << 30
    return max(2 << 30, total // (2 * max(1, max_workers)))


@dataclass
class _Job:
    id: int
    blob: bytes
    future: cf.Future
    phases: dict[str, float | None]
    phase: str | None = None
    deadline: float | None = None


@dataclass
class _Worker:
    proc: Any
    conn: Any
    ready: bool = False
    started: float = field(default_factory=time.monotonic)
    job: _Job | None = None


class LocalExecutor(cf.Executor):
    """A pool of ``max_workers`` restartable worker processes.

    ``submit(fn, *args, **kwargs)`` runs ``fn`` (picklable: a module-level function) in a
    worker; ``submit_limited(fn, args, phases=..., timeout=...)`` adds time limits. A dead
    or timed-out worker is killed and replaced; its future fails with ``WorkerCrashed`` or
    ``WorkerTimeout`` (``.phase`` says in which phase).

    ``memory_limit`` (bytes, RLIMIT_AS) caps each worker; None picks ``default_memory_limit``,
    0 sets none. ``mp_context`` is ``"spawn"`` (default) or ``"forkserver"``. Workers do not
    re-run the main script (``import_main=False``), so a script without an
    ``if __name__ == "__main__":`` guard works; functions defined in ``__main__`` then cannot
    be sent to workers (define them in a module, or pass ``import_main=True``).
    """

    def __init__(self, max_workers: int = 1, mp_context: str = "spawn", memory_limit: int | None = None,
                 startup_timeout: float = STARTUP_TIMEOUT_S, import_main: bool = False):
        self.import_main = import_main
        self._startup_failures = 0
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        if mp_context not in ("spawn", "forkserver"):
            raise ValueError(f"mp_context must be 'spawn' or 'forkserver' (fork is unsafe with threads), "
                             f"got {mp_context!r}")
        self.max_workers = max_workers
        self._ctx = mp.get_context(mp_context)
        self.memory_limit = default_memory_limit(max_workers) if memory_limit is None else (memory_limit or None)
        self.startup_timeout = startup_timeout
        self._holder: _Worker | None = None     # the worker in an exclusive phase
        self._waiting: list[tuple[_Worker, str]] = []
        self._pending: list[_Job] = []
        self._workers: list[_Worker] = []
        self._ids = itertools.count()
        self._cv = threading.Condition()
        self._shutdown = False
        self._thread: threading.Thread | None = None
        self.restarts = 0   # workers replaced after a crash or timeout

    # -- public ---------------------------------------------------------------------------
    def submit(self, fn: Callable, /, *args, **kwargs) -> cf.Future:
        return self.submit_limited(fn, args, kwargs)

    def submit_limited(self, fn: Callable, args: tuple = (), kwargs: Mapping | None = None, *,
                       phases: Mapping[str, float | None] | None = None, timeout: float | None = None) -> cf.Future:
        """Run ``fn(*args, **kwargs)`` in a worker with time limits.

        ``phases`` maps phase names to seconds (None: unlimited); the task starts in the
        first one. Without phases, ``timeout`` limits the whole task.
        """
        phases = dict(phases) if phases else {"task": timeout}
        blob = pickle.dumps((fn, tuple(args), dict(kwargs or {})), protocol=pickle.HIGHEST_PROTOCOL)
        fut: cf.Future = cf.Future()
        with self._cv:
            if self._shutdown:
                raise RuntimeError("cannot submit to an executor that was shut down")
            self._pending.append(_Job(next(self._ids), blob, fut, phases))
            self._ensure_thread()
            self._cv.notify_all()
        return fut

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._cv:
            self._shutdown = True
            if cancel_futures:
                for j in self._pending:
                    j.future.cancel()
                self._pending = [j for j in self._pending if not j.future.cancelled()]
            self._cv.notify_all()
        t = self._thread
        if t is not None and wait:
            t.join()
        elif t is None:
            self._stop_workers()

    # -- dispatcher -----------------------------------------------------------------------
    def _ensure_thread(self):
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="tune-executor", daemon=True)
            self._thread.start()

    def _start_worker(self) -> _Worker:
        import sys
        parent, child = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(target=_worker_main, args=(child, self.memory_limit, list(sys.path)),
                                 daemon=True, name="tune-worker")
        if not self.import_main:
            _install_preparation_hook()
        _starting.skip_main = not self.import_main
        try:
            proc.start()
        finally:
            _starting.skip_main = False
        child.close()
        w = _Worker(proc, parent)
        self._workers.append(w)
        return w

    # -- exclusive phases: one worker at a time, granted here ---------------------------------
    def _release(self, w: _Worker) -> None:
        self._waiting = [(x, p) for x, p in self._waiting if x is not w]
        if self._holder is w:
            self._holder = None
        while self._holder is None and self._waiting:
            nxt, phase = self._waiting.pop(0)
            if nxt.job is None or nxt not in self._workers:
                continue
            try:
                nxt.conn.send(("go", nxt.job.id))
            except OSError:   # its pipe is gone: the worker died, and _poll reports it
                continue
            self._holder = nxt
            self._enter(nxt.job, phase)

    def _kill(self, w: _Worker) -> None:
        self._release(w)
        with contextlib.suppress(Exception):
            w.proc.kill()
        with contextlib.suppress(Exception):
            w.proc.join(5)
        with contextlib.suppress(Exception):
            w.conn.close()
        if w in self._workers:
            self._workers.remove(w)

    def _stop_workers(self):
        for w in list(self._workers):
            with contextlib.suppress(Exception):
                w.conn.send(None)
            with contextlib.suppress(Exception):
                w.proc.join(2)
            self._kill(w)

    def _assign(self):
        with self._cv:
            pending = [j for j in self._pending if not j.future.cancelled()]
            self._pending = pending
            while self._pending:
                idle = [w for w in self._workers if w.ready and w.job is None]
                if not idle:
                    if len(self._workers) < self.max_workers:
                        self._start_worker()
                    return
                job = self._pending.pop(0)
                if not job.future.set_running_or_notify_cancel():
                    continue
                w = idle[0]
                w.job = job
                try:
                    w.conn.send((job.id, job.blob))
                except OSError as e:  # the worker died between tasks (a broken or closed pipe)
                    self._fail(w, WorkerCrashed(f"worker could not take the task: {e!r}", None, w.proc.exitcode))

    def _fail(self, w: _Worker, exc: BaseException):
        job = w.job
        w.job = None
        self._kill(w)
        self.restarts += 1
        if job is not None and not job.future.done():
            job.future.set_exception(exc)

    def _loop(self):
        try:
            while True:
                with self._cv:
                    if self._shutdown and not self._pending and all(w.job is None for w in self._workers):
                        break
                    if not self._pending and all(w.job is None for w in self._workers):
                        self._cv.wait(0.5)
                        continue
                self._assign()
                self._poll()
        finally:
            self._stop_workers()

    def _poll(self):
        waitables = {}
        for w in self._workers:
            waitables[w.conn] = w
            waitables[w.proc.sentinel] = w
        if not waitables:
            time.sleep(0.01)
            return
        now = time.monotonic()
        deadlines = [w.job.deadline for w in self._workers if w.job is not None and w.job.deadline is not None]
        deadlines += [w.started + self.startup_timeout for w in self._workers if not w.ready]
        wait_s = 0.2 if not deadlines else max(0.0, min(0.2, min(deadlines) - now))
        ready = mp_wait(list(waitables), timeout=wait_s)
        handled = set()
        for obj in ready:
            w = waitables[obj]
            if id(w) in handled or w not in self._workers:
                continue
            if obj is w.conn or w.conn.poll():
                self._drain(w)
            if w in self._workers and not w.proc.is_alive():
                self._died(w)
            handled.add(id(w))
        now = time.monotonic()
        for w in list(self._workers):
            if not w.ready and now - w.started > self.startup_timeout:
                self._fail(w, WorkerCrashed(f"worker did not start within {self.startup_timeout:.0f} s", "startup"))
            elif w.job is not None and w.job.deadline is not None and now > w.job.deadline:
                j = w.job
                limit = j.phases.get(j.phase)
                self._fail(w, WorkerTimeout(f"phase {j.phase!r} ran past its limit of {limit} s", j.phase, limit))

    def _drain(self, w: _Worker):
        while w in self._workers:
            try:
                if not w.conn.poll():
                    return
                kind, task_id, value = w.conn.recv()
            except (EOFError, OSError):
                self._died(w)
                return
            except Exception as e:   # a result that cannot be unpickled here
                job = w.job
                w.job = None
                if job is not None and not job.future.done():
                    job.future.set_exception(WorkerError(f"the task's result could not be read: {e!r}"))
                continue
            job = w.job
            if kind == "ready":
                w.ready = True
                self._startup_failures = 0
            elif job is None or task_id != job.id:
                continue
            elif kind == "start":
                self._enter(job, next(iter(job.phases)))
            elif kind == "phase":
                self._enter(job, value)
            elif kind == "acquire":
                self._enter(job, None)        # waiting for the turn: no time limit
                self._waiting.append((w, value))
                self._release(None)
            elif kind == "release":
                self._release(w)
            elif kind == "done":
                self._release(w)
                w.job = None
                ok, payload = value
                if not job.future.done():
                    if ok:
                        job.future.set_result(payload)
                    else:
                        job.future.set_exception(payload)

    @staticmethod
    def _enter(job: _Job, phase: str | None):
        job.phase = phase
        limit = job.phases.get(phase) if phase is not None else None
        job.deadline = None if limit is None else time.monotonic() + float(limit)

    def _died(self, w: _Worker):
        if w.proc.exitcode is None:
            w.proc.join(timeout=2.0)   # its pipe can close before the process is reaped
        code = w.proc.exitcode
        job = w.job
        phase = job.phase if job is not None else None
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        if job is None:
            self._kill(w)   # an idle worker died: replace it (but not forever if none can start)
            if not w.ready:
                self._startup_failures += 1
                if self._startup_failures >= 3:
                    self._startup_failures = 0
                    with self._cv:
                        pending, self._pending = self._pending, []
                    for j in pending:
                        if j.future.set_running_or_notify_cancel():
                            j.future.set_exception(WorkerCrashed(
                                f"worker processes fail to start ({how}); run the script directly to see why", "startup",
                                code))
            return
        self._fail(w, WorkerCrashed(f"worker process died ({how}) in phase {phase!r}", phase, code))
