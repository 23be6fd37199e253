"""The transforms' one way into ``loopnest.analysis``, imported on first use.

The analysis (legality checks, bounds inference) runs on islpy: importing it costs about
45 ms, several times all the rest of loopnest, and only a legality check or a bounds
inference needs it. The transforms and the vector lowering call these accessors instead of
importing it, so ``import loopnest`` stays fast and the first check loads it.

>>> legality_checks().check_parallelize.__name__
'check_parallelize'
"""
from __future__ import annotations

from types import ModuleType

__all__ = ["legality_checks", "bounds_inference", "polyhedral_domains", "dependence_analysis", "islpy"]


def legality_checks() -> ModuleType:
    """``loopnest.analysis.legality``.

    >>> legality_checks().__name__
    'loopnest.analysis.legality'
    """
    from .analysis import legality
    return legality


def bounds_inference() -> ModuleType:
    """``loopnest.analysis.bounds``.

    >>> bounds_inference().__name__
    'loopnest.analysis.bounds'
    """
    from .analysis import bounds
    return bounds


def dependence_analysis() -> ModuleType:
    """``loopnest.analysis.dependences``.

    >>> dependence_analysis().__name__
    'loopnest.analysis.dependences'
    """
    from .analysis import dependences
    return dependences


def polyhedral_domains() -> ModuleType:
    """``loopnest.analysis.domains``.

    >>> polyhedral_domains().__name__
    'loopnest.analysis.domains'
    """
    from .analysis import domains
    return domains


def islpy() -> ModuleType:
    """The ``islpy`` module (for transforms that build isl sets themselves).

    >>> islpy().Set("{ [i] : 0 <= i < 4 }").count_val().to_python()
    4
    """
    import islpy as isl
    return isl
