"""Every exception and error kind of the tuning layer.

Measurement failures are not raised to the tuner: they are recorded with one of the
``ErrorKind`` strings, so a bad candidate costs one trial and never the tuning run.

>>> ErrorKind.RUN_TIMEOUT
'RunTimeout'
>>> ErrorKind.is_build_error("BuildTimeout")
True

Only some exceptions become records: ``loopnest.ScheduleError`` (an illegal schedule),
``codegen.BuildError`` (a refused or failed compilation), a crashed or timed-out worker,
and the resource errors of ``RESOURCE_ERRORS``; any other exception is a bug and
propagates out of the tuning run.

>>> issubclass(MemoryError, RESOURCE_ERRORS), issubclass(KeyError, RESOURCE_ERRORS)
(True, False)
"""
from __future__ import annotations

__all__ = ["TuneError", "SpaceError", "DatabaseError", "ErrorKind", "WorkerCrashed", "WorkerTimeout",
           "WorkerError", "RESOURCE_ERRORS"]

#: Exceptions that say a candidate needs more than the process has, not that the code is
#: wrong: recorded like the candidate's other failures. ``MemoryError`` (a buffer or the
#: compiler's data past the worker's memory limit). ``RecursionError``: some candidates
#: (large unroll factors, deep splits) make expression trees deep enough for Python's
#: recursion limit in lowering or code generation, which the other candidates of the same
#: task stay under; a recursion bug shows up on every candidate, so the records still show it.
#: Every other exception is a bug in the tuner, the space or the compiler and propagates.
RESOURCE_ERRORS: tuple[type[BaseException], ...] = (MemoryError, RecursionError)


class TuneError(Exception):
    """Base class of the tuning layer's exceptions."""


class SpaceError(TuneError):
    """A search space or a point of it is malformed (unknown knob, value out of its domain)."""


class DatabaseError(TuneError):
    """The records database cannot be opened, or a record is malformed."""


class ErrorKind:
    """The kinds of failure a measured candidate can be recorded with."""

    INVALID_SCHEDULE = "InvalidSchedule"   # a transform raised ScheduleError (never built)
    BUILD_ERROR = "BuildError"             # replay, lowering or compilation failed
    BUILD_TIMEOUT = "BuildTimeout"         # building took longer than the build timeout
    RUN_ERROR = "RunError"                 # the kernel raised while running
    RUN_TIMEOUT = "RunTimeout"             # running took longer than the run timeout
    WRONG_RESULT = "WrongResult"           # the output differs from the reference
    CRASH = "Crash"                        # the worker process died (segfault, abort, out of memory)

    ALL = (INVALID_SCHEDULE, BUILD_ERROR, BUILD_TIMEOUT, RUN_ERROR, RUN_TIMEOUT, WRONG_RESULT, CRASH)

    @staticmethod
    def is_build_error(kind: str | None) -> bool:
        return kind in (ErrorKind.BUILD_ERROR, ErrorKind.BUILD_TIMEOUT, ErrorKind.INVALID_SCHEDULE)


class WorkerError(TuneError):
    """A task could not complete in its worker process."""

    def __init__(self, message: str, phase: str | None = None):
        super().__init__(message)
        self.phase = phase


class WorkerCrashed(WorkerError):
    """The worker process died while running a task (a signal, an abort, or exhausted memory)."""

    def __init__(self, message: str, phase: str | None = None, exitcode: int | None = None):
        super().__init__(message, phase)
        self.exitcode = exitcode


class WorkerTimeout(WorkerError):
    """A task's phase ran past its time limit; the worker was killed."""

    def __init__(self, message: str, phase: str | None = None, seconds: float | None = None):
        super().__init__(message, phase)
        self.seconds = seconds
