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

import copy
import os
from typing import Any, Sequence

from loopnest.stmt import stmt_depth
from te.recursion import recursion_guard

from .kernel import (ArgumentDeviceError, BuildError, Kernel, KernelArgumentError, OutputShapeError, Param,
                     make_params)

TARGETS = ("ireval", "llvm", "cuda")

__all__ = ["build", "Kernel", "BuildError", "KernelArgumentError", "ArgumentDeviceError", "OutputShapeError", "TARGETS"]


@recursion_guard(depth=lambda nest, *args, **kwargs: stmt_depth(nest.root))
def build(nest, args: Sequence[Any], target: str = "ireval", bounds_check: bool = True, schedule: Any = None,
          **options) -> Kernel:
    """Compile ``nest`` into a Kernel whose parameters are ``args`` (Buffers, Tensors, Vars).

    The nest is prepared for codegen first if it was not (a prepared copy is used, so
    ``nest`` itself stays schedulable). ``options`` are target specific (for example
    ``fast_math=True`` for llvm / cuda).

    ``bounds_check`` (on by default, every target): bounds inference gives, per dimension of
    every argument buffer, the region the final schedule touches, as a function of the sizes.
    A region outside its buffer for every size that runs the kernel (touches any argument)
    raises ``BuildError`` here; one that leaves the buffer only for some sizes is checked on
    each call, after the shapes are bound and before anything runs, and raises
    ``ValueError`` naming the buffer, the dimension, the region and the shape. Accesses
    bounds inference cannot represent are checked as the kernel runs where their index is
    data dependent (``A[B[i]]``): the pass ``guard_data_dependent_indices`` checks each such
    index against its own dimension
    (``loopnest.index_checks``); IREval and LLVM raise ``IndexError``, CUDA traps (IREval
    also checks every flat access). Non-affine indices without loads (``A[i * N]``) are not
    checked on the compiled targets. ``bounds_check=False`` skips all of these checks.
    Allocation sizes of intermediates are always checked on each call (``MemoryError``, see
    ``codegen.kernel.allocation_limit``).

    ``schedule="auto"`` schedules a copy of ``nest`` (an unscheduled nest; ``nest`` itself is
    left as it is) with ``LoopNest.auto_schedule`` for this machine, or for the
    ``loopnest.Target`` given as ``schedule=``; the kernel keeps the report as
    ``kernel.auto_schedule_report`` and the schedule as ``kernel.schedule_history``. For
    ``target="cuda"``, ``schedule="auto"`` applies the GPU templates' default choices instead
    (``loopnest.auto.gpu.auto_schedule_gpu``: blocks and threads for element-wise tensors and
    reductions, the matmul trees, the direct convolution), and raises ``ScheduleError`` for an
    external call (the CUDA backend does not run them). The default (None) builds the nest as it
    is scheduled.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> X = Buffer("X", (64,), "float32"); Y = Compute("Y", (64,), lambda i: X[i] + 1.0)
    >>> k = build(LoopNest([Y]), [X, Y], target="llvm", schedule="auto")
    >>> print(k.auto_schedule_report)
    Y: vectorized ... wide (element-wise)

    Deep expressions (thousands of nested operations) build like any others: a build that
    runs out of recursion runs again on a thread with a large stack (``te.recursion``).

    >>> import numpy as np
    >>> from te import Buffer, Compute, Var
    >>> from loopnest import LoopNest
    >>> N = Var("N"); A = Buffer("A", (8,), "float32")
    >>> C = Compute("C", (N,), lambda i: A[i] * 2.0)
    >>> k = build(LoopNest([C]), [A, C])
    >>> k(np.zeros(8, np.float32), np.zeros(9, np.float32))
    Traceback (most recent call last):
    ...
    ValueError: kernel ireval_C: argument A is accessed at indices [0, 8] of dimension 0 (region [0, N - 1] for N = 9), but its shape is (8,): valid indices are [0, 7]; out of range: A[i]. ...
    """
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; expected one of {TARGETS}")
    report = None
    if schedule is not None:
        nest, report = _auto_scheduled(nest, target, schedule)
    flattened = bool(getattr(nest, "prepared", False))
    scheduled_root = nest.root
    scheduled_history = getattr(nest, "history", [])
    if not flattened:
        nest = nest.copy().prepare_for_codegen()
    from loopnest.passes import legalize_for_target
    nest = legalize_for_target(nest, target)
    if not bounds_check:
        nest = _without_index_checks(nest)
    params = make_params(nest, list(args))
    checks = _bounds_checks(scheduled_root, flattened, nest, params, options) if bounds_check else []
    if target == "ireval":
        from .ireval import build_ireval
        kernel = build_ireval(nest, params, **options)
    elif target == "llvm":
        from .llvm import build_llvm
        kernel = build_llvm(nest, params, **options)
    else:
        from .cuda import build_cuda
        kernel = build_cuda(nest, params, **options)
    if checks:
        kernel.add_bounds_checks(checks)
    if report is not None:
        kernel.auto_schedule_report = report
        kernel.schedule_history = list(scheduled_history)
    return kernel


def _without_index_checks(nest):
    """A copy of the prepared ``nest`` without the run-time index checks that
    ``loopnest.index_checks`` put in (``bounds_check=False``), shown by the pass dumps."""
    from loopnest.index_checks import drop_index_checks
    from loopnest.passes import run_passes
    dump = os.environ.get("LOOPNEST_DUMP_PASSES", "") not in ("", "0")
    new = nest.copy() if hasattr(nest, "copy") else copy.copy(nest)   # hand-built nests in tests
    new.root = run_passes(nest, dump=dump, passes=[("drop_index_checks", drop_index_checks)])
    return new


def _auto_scheduled(nest, target: str, schedule: Any):
    """A copy of ``nest`` scheduled by ``auto_schedule`` for ``schedule`` ("auto": the host, or
    a ``loopnest.Target``), and the report."""
    from loopnest.target import Target
    if target == "cuda" and schedule != "auto":
        raise ValueError(f"for target 'cuda', schedule must be None or 'auto' (a loopnest.Target describes a CPU), "
                         f"got {schedule!r}")
    if not (schedule == "auto" or isinstance(schedule, Target)):
        raise ValueError(f"schedule must be None, 'auto' or a loopnest.Target, got {schedule!r}")
    if getattr(nest, "prepared", False):
        raise ValueError("schedule='auto' needs a nest that was not prepared for codegen")
    scheduled = nest.copy()
    report = scheduled.auto_schedule("cuda" if target == "cuda" else None if schedule == "auto" else schedule)
    return scheduled, report


def _bounds_checks(root, flattened: bool, nest, params: list, options: dict) -> list:
    """The call-time region checks of a kernel (``BuildError`` for a region out of range
    for every size), from the scheduled tree before preparation when there is one."""
    from loopnest.analysis.regions import argument_regions
    from .kernel import bounds_checks, sanitize_name
    regions = argument_regions(root, [p.buffer for p in params if p.is_buffer], flattened=flattened)
    name = options.get("name") or "_".join(o.name for o in getattr(nest, "outputs", [])) or "kernel"
    return bounds_checks(regions, params, sanitize_name(str(name)))
