"""Every exception the loop-nest layer raises.

>>> try:
...     raise ScheduleError("cannot parallelize i: B[i] reads B[i - 1]")
... except ScheduleError as e:
...     print(e)
cannot parallelize i: B[i] reads B[i - 1]
"""


class LoopNestError(Exception):
    """Base class of loop-nest errors."""


class ScheduleError(LoopNestError):
    """A transform was refused: illegal (it would change the result) or malformed
    (a stale loop handle, a bad factor). The nest is left exactly as it was."""


class VerifyError(LoopNestError):
    """The statement tree is malformed (a verifier finding; indicates a bug or bad input IR)."""


class LoweringError(LoopNestError):
    """The tensors cannot be lowered to a loop nest (e.g. a dependence cycle)."""


class StatementError(LoweringError):
    """A statement given to ``LoopNest.from_stmt`` is malformed: a loop variable bound twice,
    an access with the wrong number of indices, an output the statement never writes...

    >>> issubclass(StatementError, LoweringError)
    True
    """
