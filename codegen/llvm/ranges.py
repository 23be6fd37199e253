"""Which integer expressions are provably non-negative, for the emitter's choice of
unsigned division.

C division and remainder (``Div``, ``Mod``) and their floor variants agree with unsigned
division when the dividend is >= 0 and the divisor a positive constant, and unsigned
division by a constant is cheaper (a power of two is one shift, where signed division needs
four instructions to round toward zero). It also keeps a signed division of a loop counter
(``A[r / 2]``) away from LLVM 22's loop vectorizer, whose two cost models disagree about it on
Intel CPUs, which an LLVM built with assertions (llvmlite's) turns into an abort of the
process (``arith.int_division`` writes the signed divisions by powers of two left with
shifts, for the same reason).

The query is exact for wrapping integer arithmetic: ``+``, ``-`` and ``*`` may overflow into
negative values, so only constants, loop variables counting up from a non-negative start,
unsigned values and division, remainder, ``min`` and ``max`` of those count.

>>> from te import Var, floordiv
>>> i, j = Var("i"), Var("j")
>>> nonneg(i / 2, {id(i)}), nonneg(floordiv(i, 4) % 3, {id(i)}), nonneg(i + 1, {id(i)}), nonneg(j, {id(i)})
(True, True, False, False)
"""
from __future__ import annotations

from te.expr import Expr
from te.functor import Functor
from te.queries import fold_int

__all__ = ["nonneg"]


def nonneg(e: Expr, nonneg_vars: set[int]) -> bool:
    """Whether the integer expression ``e`` is >= 0 for every value of its variables, given the
    ids of the variables known to be >= 0 (see the module docstring).

    >>> from te import Var, uint32
    >>> nonneg(Var("u", uint32), set()), nonneg(Var("n") - 1, set())
    (True, False)
    """
    return _NONNEG.visit(e, nonneg_vars)


class _NonNeg(Functor):
    def visit_IntImm(self, e, nonneg_vars):
        return e.value >= 0

    def visit_Var(self, e, nonneg_vars):
        return e.dtype.is_uint or (e.dtype.lanes == 1 and id(e) in nonneg_vars)

    def _by_positive_constant(self, e, nonneg_vars):
        k = fold_int(e.b)
        return k is not None and k > 0 and self.visit(e.a, nonneg_vars)

    visit_Div = visit_FloorDiv = visit_Mod = _by_positive_constant

    def visit_FloorMod(self, e, nonneg_vars):
        k = fold_int(e.b)
        return k is not None and k > 0

    def visit_Min(self, e, nonneg_vars):
        return self.visit(e.a, nonneg_vars) and self.visit(e.b, nonneg_vars)

    def visit_Max(self, e, nonneg_vars):
        return self.visit(e.a, nonneg_vars) or self.visit(e.b, nonneg_vars)

    def generic(self, e, nonneg_vars):
        return False


_NONNEG = _NonNeg()
