"""Deep expressions: running the recursive passes where a long chain cannot crash them.

The compiler's passes (lowering, printing, simplification, the transforms' analyses, the
code generators, IREval) recurse once per level of nesting, so a long chain such as a
5,000-term sum needs about 20,000 nested calls: far past Python's default recursion limit
(1,000), and raising that limit alone would let the C stack of an ordinary thread overflow,
which crashes the interpreter instead of raising.

``recursion_guard`` marks the public entry points of the pipeline: building a ``LoopNest``,
its transforms, printing, simplifying, preparing for codegen and building a kernel. A
guarded call runs on the calling thread, so shallow programs pay nothing; only if it runs
out of recursion there (``RecursionError``) does it run once more, on a fresh thread with a
large stack (``STACK_BYTES``) and a raised recursion limit (``RECURSION_LIMIT``). The
guarded calls leave nothing changed when they raise (a transform restores its nest, the
others build new objects), so running one again is exact. Calls nested in a guarded call
are not guarded again: the outermost one runs again, once. ``run_deep`` runs a function on
such a thread directly; an IREval kernel uses it for deep trees, decided when it is built,
since its calls write their outputs and cannot be run twice.

Past what that thread holds, ``ExpressionDepthError`` (a ``RecursionError``) names the
nesting depth and what to do about it.

While a call runs on a deep thread, the calling thread waits for it and the recursion limit
is raised for the whole process (CPython has one limit for every thread). An exception
raised in the waiting thread (Ctrl-C, a signal handler's time limit) is raised in the deep
thread too, which unwinds (a transform restores its nest) before the caller sees it.

>>> from te import Var
>>> i = Var("i")
>>> e = i
>>> for k in range(3000):
...     e = e + k
>>> def depth(x):                      # an ordinary recursive function: 3,001 calls deep
...     return 1 + max((depth(c) for c in x.children()), default=0)
>>> run_deep(depth, (e,))
3001
>>> str(e)[:20]                       # printing is guarded: it runs again on a deep thread
'i + 0 + 1 + 2 + 3 + '
"""
from __future__ import annotations

import contextlib
import contextvars
import ctypes
import functools
import sys
import threading
from typing import Any, Callable

__all__ = ["ExpressionDepthError", "recursion_guard", "run_deep", "STACK_BYTES", "RECURSION_LIMIT",
           "SHALLOW_DEPTH"]

#: stack of a deep thread; only the pages a call touches are committed (a 5,000-term sum
#: through the whole pipeline touches a few MiB)
STACK_BYTES = 512 << 20
#: recursion limit while a deep thread runs: about 5 KiB of C stack per Python call, where
#: the passes need a few hundred bytes (the interpreter's own default, 1,000 calls on an
#: 8 MiB main thread, allows 8 KiB)
RECURSION_LIMIT = 100_000
#: nesting depth up to which a call that cannot be run twice (an IREval kernel's) runs on the
#: calling thread: the passes make at most a few nested calls per level, well inside the
#: default limit of 1,000 with room for the caller's own frames
SHALLOW_DEPTH = 200

_local = threading.local()          # .active: a guarded call runs on this thread; .deep: a deep thread
_limit_lock = threading.Lock()
_limit_users = 0
_saved_limit = 0
_start_lock = threading.Lock()


class ExpressionDepthError(RecursionError):
    """An expression (or statement tree) nested more deeply than the compiler's recursive
    passes can follow, even on a deep thread. ``depth`` is the nesting depth of the input
    when known (``te.queries.expr_depth``), else ``None``.

    >>> err = ExpressionDepthError("LoopNest", 250000)
    >>> isinstance(err, RecursionError), err.depth
    (True, 250000)
    >>> print(str(err)[:68])
    LoopNest: the IR is nested too deeply (depth 250000) for the compile
    """

    def __init__(self, what: str, depth: int | None = None):
        self.depth = depth
        at = f" (depth {depth})" if depth is not None else ""
        super().__init__(
            f"{what}: the IR is nested too deeply{at} for the compiler's recursive passes, which ran "
            f"out of {RECURSION_LIMIT:,} nested calls on a thread with a {STACK_BYTES >> 20} MiB stack; "
            "build the computation in stages so that no expression is that deep: intermediate Compute "
            "tensors holding partial results (sums of a few thousand terms each, then their sum), or a "
            "Reduce over an axis instead of a long chain of terms")


def recursion_guard(fn: Callable | None = None, *, depth: Callable[..., int] | None = None):
    """Decorate a pipeline entry point: a call that runs out of recursion on its thread runs
    again on a deep thread (see the module docstring). Use it only on functions that leave
    nothing changed when they raise. ``depth(*args, **kwargs)`` gives the nesting depth of
    the arguments, for the message of ``ExpressionDepthError``.

    >>> from te import Var
    >>> @recursion_guard
    ... def size(x):
    ...     return 1 + sum(size(c) for c in x.children())
    >>> e = Var("i")
    >>> for k in range(3000):
    ...     e = e * 2
    >>> size(e)
    6001
    """
    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def guarded(*args, **kwargs):
            local = _local
            if getattr(local, "active", False):
                return fn(*args, **kwargs)
            local.active = True
            try:
                return fn(*args, **kwargs)
            except ExpressionDepthError:
                raise
            except RecursionError:
                pass    # run again below, from this frame: the failed attempt's stack is unwound
            finally:
                local.active = False
            return run_deep(fn, args, kwargs, depth=depth)
        return guarded
    return decorate(fn) if fn is not None else decorate


def run_deep(fn: Callable, args: tuple = (), kwargs: dict | None = None, *,
             depth: int | Callable[..., int] | None = None) -> Any:
    """``fn(*args, **kwargs)`` on a deep thread (directly when this thread is one): its
    result, or its exception raised here. A ``RecursionError`` becomes
    ``ExpressionDepthError``, naming ``depth`` (an int, or a function of the arguments that
    gives it). Example in the module docstring.
    """
    kwargs = kwargs or {}
    if getattr(_local, "deep", False):
        return fn(*args, **kwargs)
    try:
        return _on_deep_thread(fn, args, kwargs)
    except ExpressionDepthError:
        raise
    except RecursionError:
        pass    # raised below, without the exhausted traceback as its context
    d = depth(*args, **kwargs) if callable(depth) else depth
    raise ExpressionDepthError(getattr(fn, "__qualname__", repr(fn)), d)


def _on_deep_thread(fn: Callable, args: tuple, kwargs: dict) -> Any:
    ctx = contextvars.copy_context()
    box: dict[str, Any] = {}
    started, done = threading.Event(), threading.Event()   # (not Thread.join: see below)

    def target():
        try:
            box["ident"] = threading.get_ident()
            started.set()
            _local.deep = _local.active = True
            box["value"] = ctx.run(fn, *args, **kwargs)
        except BaseException as exc:    # handed over to the calling thread, which raises it
            box["error"] = exc
        finally:
            done.set()

    thread = threading.Thread(target=target, name="te-deep-recursion", daemon=True)
    with _raised_limit():
        try:
            with _start_lock:
                old = threading.stack_size(STACK_BYTES)
                try:
                    thread.start()
                finally:
                    threading.stack_size(old)
            while not done.wait(0.05):
                pass    # a wait that times out lets this thread run signal handlers: a signal
                # that the OS delivers to the deep thread does not wake a thread blocked in a wait
        except BaseException as exc:    # Ctrl-C or a signal handler's exception: stop the deep call too
            # (an interrupted Thread.join marks a running thread as stopped in Python 3.11, so
            # the waits are on events)
            if started.wait(1.0):       # (unless it never started)
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(box["ident"]),
                                                           ctypes.py_object(type(exc)))
                done.wait()
            raise
    if "error" in box:
        exc = box.pop("error")
        try:
            raise exc
        finally:
            del exc
    return box["value"]


@contextlib.contextmanager
def _raised_limit():
    global _limit_users, _saved_limit
    with _limit_lock:
        if _limit_users == 0:
            _saved_limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_saved_limit, RECURSION_LIMIT))
        _limit_users += 1
    try:
        yield
    finally:
        with _limit_lock:
            _limit_users -= 1
            if _limit_users == 0:
                sys.setrecursionlimit(_saved_limit)
