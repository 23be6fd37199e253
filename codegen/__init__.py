"""codegen: turn a prepared loop nest into a callable Kernel.

Targets: ``"ireval"`` (the reference interpreter), ``"llvm"`` (CPU JIT through llvmlite)
and ``"cuda"`` (CUDA C launched through PyCUDA).

>>> import numpy as np
>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> A = Buffer("A", (3,), "int32")
>>> B = Compute("B", (3,), lambda i: A[i] * 3)
>>> k = build(LoopNest([B]), [A, B])
>>> b = np.zeros(3, np.int32); k(np.array([1, 2, 3], np.int32), b); b.tolist()
[3, 6, 9]
"""
from __future__ import annotations

from typing import Any, Sequence

from .kernel import BuildError, Kernel, KernelArgumentError, Param, make_params

TARGETS = ("ireval", "llvm", "cuda")

__all__ = ["build", "Kernel", "BuildError", "KernelArgumentError", "TARGETS"]


def build(nest, args: Sequence[Any], target: str = "ireval", **options) -> Kernel:
    """Compile ``nest`` into a Kernel whose parameters are ``args`` (Buffers, Tensors, Vars).

    The nest is prepared for codegen first if it was not (a prepared copy is used, so
    ``nest`` itself stays schedulable). ``options`` are target specific (for example
    ``fast_math=True`` for llvm / cuda).
    """
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; expected one of {TARGETS}")
    if not getattr(nest, "prepared", False):
        nest = nest.copy().prepare_for_codegen()
    from loopnest.passes import legalize_for_target
    nest = legalize_for_target(nest, target)
    params = make_params(nest, list(args))
    if target == "ireval":
        from .ireval import build_ireval
        return build_ireval(nest, params, **options)
    if target == "llvm":
        from .llvm import build_llvm
        return build_llvm(nest, params, **options)
    from .cuda import build_cuda
    return build_cuda(nest, params, **options)
