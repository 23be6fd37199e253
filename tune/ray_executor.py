"""Measurement on a Ray cluster: the same tasks as ``LocalExecutor``, as Ray tasks.

Ray is optional (the ``distributed`` extra: ``pip install ray``); importing this module
without it works, constructing a ``RayExecutor`` raises ``ImportError`` saying so.

Each candidate is one Ray task (``max_retries=0``: a crashing candidate is not re-run).
A task's phases cannot be watched from outside its worker, so the time limit is the sum of
the phase limits, and a timed-out task is cancelled with ``force=True`` (its worker process
is killed) and reported as ``WorkerTimeout`` in the last phase (a run timeout). A worker
that dies (segfault, out of memory) is reported as ``WorkerCrashed``. Task payloads
(``TaskRef``) are put in the object store once, so remote machines need no shared files.
Workers on other machines must be able to import this project (same code, e.g. through a
Ray ``runtime_env``); the device fingerprint is taken where the candidate is measured.

>>> # with RayExecutor(address="auto") as ex: autotune(..., executor=ex)
"""
from __future__ import annotations

import concurrent.futures as cf
import threading
from typing import Any, Callable, Mapping

from .errors import WorkerCrashed, WorkerError, WorkerTimeout
from .task import TaskRef

__all__ = ["RayExecutor", "ray_available"]


def ray_available() -> bool:
    """True when ``import ray`` works."""
    try:
        import ray  # noqa: F401
        return True
    except ImportError:
        return False


def _call(fn, *args, **kwargs):
    return fn(*args, **kwargs)


class RayExecutor(cf.Executor):
    """A ``concurrent.futures.Executor`` over Ray tasks, with ``submit_limited`` time limits.

    ``address`` is passed to ``ray.init`` (None starts a local Ray instance unless one is
    already initialised); ``num_cpus`` per candidate task defaults to 1.
    """

    def __init__(self, address: str | None = None, num_cpus: float = 1, init_kwargs: Mapping | None = None):
        try:
            import ray
        except ImportError as e:
            raise ImportError("RayExecutor needs Ray: pip install 'ray' (the project's 'distributed' extra)") from e
        self._ray = ray
        self._own = False
        if not ray.is_initialized():
            ray.init(address=address, **dict(init_kwargs or {"include_dashboard": False, "log_to_driver": False}))
            self._own = True
        self._remote = ray.remote(max_retries=0, num_cpus=num_cpus)(_call)
        self._refs: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._shutdown = False

    def _ship(self, a: Any) -> Any:
        if isinstance(a, TaskRef):
            with self._lock:
                if a.key not in self._refs:
                    self._refs[a.key] = self._ray.put(a.inline())
                return self._refs[a.key]
        return a

    def submit(self, fn: Callable, /, *args, **kwargs) -> cf.Future:
        return self.submit_limited(fn, args, kwargs)

    def submit_limited(self, fn: Callable, args: tuple = (), kwargs: Mapping | None = None, *,
                       phases: Mapping[str, float | None] | None = None, timeout: float | None = None) -> cf.Future:
        if self._shutdown:
            raise RuntimeError("cannot submit to an executor that was shut down")
        limits = list((phases or {"task": timeout}).values())
        total = None if any(v is None for v in limits) else float(sum(limits))
        last = list(phases)[-1] if phases else "task"
        shipped = tuple(self._ship(a) for a in args)   # top-level object refs are resolved by Ray
        ref = self._remote.remote(fn, *shipped, **dict(kwargs or {}))
        fut: cf.Future = cf.Future()
        fut.set_running_or_notify_cancel()
        t = threading.Thread(target=self._wait, args=(ref, fut, total, last), daemon=True)
        t.start()
        self._threads.append(t)
        return fut

    def _wait(self, ref, fut: cf.Future, total: float | None, last: str) -> None:
        ray = self._ray
        ready, _ = ray.wait([ref], timeout=total)
        if not ready:
            ray.cancel(ref, force=True)
            fut.set_exception(WorkerTimeout(f"the task ran past its limit of {total} s", last, total))
            return
        try:
            fut.set_result(ray.get(ref))
        except Exception as e:   # RayTaskError wraps the task's own exception
            crashed = tuple(getattr(ray.exceptions, n) for n in ("WorkerCrashedError", "OutOfMemoryError",
                                                                  "NodeDiedError") if hasattr(ray.exceptions, n))
            if isinstance(e, crashed):
                fut.set_exception(WorkerCrashed(f"the Ray worker died: {type(e).__name__}: {e}", None))
            else:
                cause = getattr(e, "cause", None)
                fut.set_exception(cause if isinstance(cause, Exception) else WorkerError(f"{type(e).__name__}: {e}"))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._shutdown = True
        if wait:
            for t in self._threads:
                t.join()
        if self._own:
            self._ray.shutdown()

