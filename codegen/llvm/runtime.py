"""The parallel-loop runtime of LLVM kernels.

A parallel loop is outlined into ``void body(i64 lo, i64 hi, ptr ctx)``; the kernel then
hands ``[start, stop)`` to one of three runtimes:

* ``"pool"`` (default on Linux x86-64 / AArch64): a native thread pool JIT-compiled from
  LLVM IR (``pool``): the caller and the workers claim chunks from an atomic counter, and
  the caller waits only for chunks already claimed, never for a worker the OS has not
  scheduled yet, so a parallel loop costs microseconds even on a loaded machine.
* ``"gomp"`` (the default where the pool is unavailable and libgomp is installed): the
  kernel calls ``GOMP_parallel`` with a trampoline through which the OpenMP threads claim
  chunks. Everything stays in native code; the team size is ``get_num_threads()``. Its
  closing barrier waits for every team thread, which costs about a scheduler time slice
  (~1 ms) per loop when the machine has more runnable threads than cores.
* ``"threads"``: the kernel calls back into Python (``te_llvm_parallel_for``), which splits
  the range into ``get_num_threads()`` chunks and runs them on a pool of Python threads
  through ctypes (ctypes releases the GIL during the foreign call). Slower to start
  (tens of microseconds per parallel loop), but it needs no OpenMP and is fork-safe.

libgomp is not fork-safe: a child forked after a parallel region ran hangs in its next
one. So gomp kernels check a flag that this module sets in forked children
(``os.register_at_fork``) and then use the ``"threads"`` runtime instead, and new builds in
such a child default to ``"threads"`` (or ``"pool"``). The pool forgets its workers in a
forked child and starts new ones there.

>>> set_num_threads(2); get_num_threads()
2
>>> set_num_threads(None)   # back to the default (all cores, or OMP_NUM_THREADS)
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import llvmlite.binding as llvm

__all__ = ["set_num_threads", "get_num_threads", "default_runtime", "ensure_runtime", "gomp_available",
           "pool_available"]

_NUM_THREADS = ctypes.c_int32(0)   # read by generated code through te_llvm_num_threads
_GOMP_FORKED = ctypes.c_int32(0)   # set in a child forked after libgomp ran (te_llvm_gomp_forked)
_lock = threading.Lock()
_state = {"gomp": None, "threads_installed": False, "forked": False}
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_BODY = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)
_PFOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)


def _default_threads() -> int:
    env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def set_num_threads(n: int | None) -> None:
    """Threads used by parallel loops of LLVM kernels from now on (``None``: the default,
    ``OMP_NUM_THREADS`` or every core this process may use).

    >>> set_num_threads(1)   # run parallel loops serially, e.g. to measure the speedup
    >>> set_num_threads(None)
    """
    if n is not None and (not isinstance(n, int) or n < 1):
        raise ValueError(f"set_num_threads expects a positive int or None, got {n!r}")
    _NUM_THREADS.value = 0 if n is None else n


def get_num_threads() -> int:
    """The number of threads a parallel loop uses."""
    return _NUM_THREADS.value or _default_threads()


def gomp_available() -> bool:
    """True when libgomp can be loaded into this process."""
    return _load_gomp() is not None


#: libgomp's idle threads spin this many iterations before sleeping (its default, 300000, is
#: milliseconds of busy waiting after every parallel loop, which slows whatever runs next on
#: those cores, numpy's BLAS threads included); set only when the user set neither
#: OMP_WAIT_POLICY nor GOMP_SPINCOUNT, and only before libgomp is first loaded.
GOMP_SPINCOUNT_DEFAULT = "20000"


def _load_gomp():
    if _state["gomp"] is None:
        path = ctypes.util.find_library("gomp")
        lib = False
        if path and "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
            os.environ["GOMP_SPINCOUNT"] = GOMP_SPINCOUNT_DEFAULT
        if path:
            try:
                llvm.load_library_permanently(path)
                lib = ctypes.CDLL(path)
            except (OSError, RuntimeError):
                lib = False
        _state["gomp"] = lib
    return _state["gomp"] or None


def pool_available() -> bool:
    """True when the native ``pool`` runtime can run here (Linux, x86-64 or AArch64)."""
    from . import pool
    return pool.available()


def default_runtime() -> str:
    """The runtime new kernels use: ``TE_LLVM_PARALLEL_RUNTIME`` if set, else "pool" where
    it runs, else "gomp" when available (and the process was not forked after using it),
    else "threads"."""
    env = os.environ.get("TE_LLVM_PARALLEL_RUNTIME", "").strip()
    if env:
        return env
    if pool_available():
        return "pool"
    if not _state["forked"] and gomp_available():
        return "gomp"
    return "threads"


def _run_chunks(fn_addr: int, start: int, stop: int, ctx: int) -> None:
    body = _BODY(fn_addr)
    n = stop - start
    nthreads = min(get_num_threads(), n)
    if nthreads <= 1 or threading.current_thread().name.startswith("te-llvm-worker"):
        body(start, stop, ctx)
        return
    pool = _get_pool(nthreads)
    chunk = -(-n // nthreads)
    futures = [pool.submit(body, lo, min(lo + chunk, stop), ctx)
               for lo in range(start + chunk, stop, chunk)]
    body(start, start + chunk, ctx)
    for f in futures:
        f.result()


def _parallel_for(fn_addr, start, stop, ctx):
    try:
        _run_chunks(fn_addr, start, stop, ctx)
    except BaseException as exc:  # pragma: no cover - cannot propagate through C frames
        import sys
        print(f"codegen.llvm.runtime: parallel loop failed: {exc!r}", file=sys.stderr)


_PFOR_CB = _PFOR(_parallel_for)


def _get_pool(n: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size < n - 1:
            old = _pool
            _pool = ThreadPoolExecutor(max_workers=max(n - 1, 1), thread_name_prefix="te-llvm-worker")
            _pool_size = max(n - 1, 1)
            if old is not None:
                old.shutdown(wait=False)
        return _pool


def ensure_runtime(runtime: str) -> None:
    """Make the symbols a kernel built for ``runtime`` links against resolvable."""
    from .parallel import FORKED_SYMBOL, NUM_THREADS_SYMBOL, PARALLEL_FOR_SYMBOL
    with _lock:
        if not _state["threads_installed"]:
            llvm.add_symbol(NUM_THREADS_SYMBOL, ctypes.addressof(_NUM_THREADS))
            llvm.add_symbol(FORKED_SYMBOL, ctypes.addressof(_GOMP_FORKED))
            llvm.add_symbol(PARALLEL_FOR_SYMBOL, ctypes.cast(_PFOR_CB, ctypes.c_void_p).value)
            _state["threads_installed"] = True
    if runtime == "pool":
        from . import pool
        with _lock:
            if _state.get("pool") is None:
                try:
                    pool.install()
                except RuntimeError as exc:
                    from ..kernel import BuildError
                    raise BuildError(f"parallel_runtime='pool' is unavailable: {exc}; "
                                     "use parallel_runtime='gomp' or 'threads'") from None
                pool.set_default_threads(_default_threads())
                _state["pool"] = pool
    if runtime == "gomp":
        if _load_gomp() is None:
            from ..kernel import BuildError
            raise BuildError("parallel_runtime='gomp' needs libgomp, which was not found; "
                             "use parallel_runtime='threads'")
        _state["gomp_used"] = True


def _after_fork_in_child():
    global _pool, _pool_size, _lock
    _state["forked"] = bool(_state.get("gomp_used"))
    if _state["forked"]:
        _GOMP_FORKED.value = 1   # compiled gomp kernels switch to the thread pool
    _pool, _pool_size = None, 0
    _lock = threading.Lock()
    if _state.get("pool") is not None:
        _state["pool"].reset_after_fork()   # its workers did not survive the fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
