"""The CUDA steps after ``prepare_for_codegen``: analyses that fill a :class:`CudaPlan`.

They run through ``loopnest.passes.run_passes`` like the shared passes, so
``LOOPNEST_DUMP_PASSES=1`` (or ``build(..., target="cuda", dump=True)``) prints the IR
before and after each and then what the step recorded in the plan:

0. ``cuda_index_division`` (``codegen.cuda.index_division``): rewrites floor division and
   remainder of non-negative indices by positive constants into C ``/`` and ``%``;
1. ``cuda_outline_kernels`` (``codegen.cuda.outline``): kernels, bound loops, grid and block;
2. ``cuda_memory_scopes`` (``codegen.cuda.memory``): global / shared / local memory, register
   promotion, shared bytes per kernel;
3. ``cuda_tensor_cores`` (``codegen.cuda.tensor_cores``): the loop nests that are warp MMAs
   written lane by lane, printed as ``ldmatrix`` and ``mma.sync``;
4. ``cuda_sync`` (``codegen.cuda.sync``): ``__syncthreads()`` positions and one-thread sections;
   then ``cuda_wgmma_overlap`` (``codegen.cuda.wgmma_overlap``): the warpgroup MMAs that stay in
   flight across an iteration of their K loop;
5. ``cuda_arguments`` (``codegen.cuda.aliasing``): kernel arguments and the const /
   ``__restrict__`` facts;
6. ``cuda_vector_access`` (``codegen.cuda.vectors``): the loads and stores done as whole
   CUDA vectors (``float4``, ``__half2``, elements of vector dtypes), and the alignment the
   buffer arguments' pointers need;
7. ``cuda_async_copies`` (``codegen.cuda.async_copy``): the global-to-shared copies issued
   as ``cp.async``;
8. ``cuda_async_waits`` (``codegen.cuda.async_wait``): where their groups are committed and
   how many groups each barrier leaves in flight.

Step 0 rewrites the IR; the others do not (``cuda_outline_kernels`` takes a fresh copy of it,
so that facts can be keyed by statement identity); the printer (``codegen.cuda.emit``) only spells the plan out.

>>> import io
>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> from codegen.kernel import make_params
>>> A = Buffer("A", (8,), "float32")
>>> B = Compute("B", (8,), lambda i: A[i] * 2.0)
>>> nest = LoopNest([B]).prepare_for_codegen()
>>> out = io.StringIO()
>>> plan = plan_cuda(nest, make_params(nest, [A, B]), "double", dump=True, out=out)
>>> print("\\n".join(l for l in out.getvalue().splitlines() if l.startswith("// ----")))
// ---- before cuda_index_division ----
// ---- after cuda_index_division ----
// ---- before cuda_outline_kernels ----
// ---- after cuda_outline_kernels ----
// ---- cuda_outline_kernels: plan ----
// ---- before cuda_memory_scopes ----
// ---- after cuda_memory_scopes ----
// ---- cuda_memory_scopes: plan ----
// ---- before cuda_tensor_cores ----
// ---- after cuda_tensor_cores ----
// ---- cuda_tensor_cores: plan ----
// ---- before cuda_sync ----
// ---- after cuda_sync ----
// ---- cuda_sync: plan ----
// ---- before cuda_wgmma_overlap ----
// ---- after cuda_wgmma_overlap ----
// ---- cuda_wgmma_overlap: plan ----
// ---- before cuda_arguments ----
// ---- after cuda_arguments ----
// ---- cuda_arguments: plan ----
// ---- before cuda_vector_access ----
// ---- after cuda_vector_access ----
// ---- cuda_vector_access: plan ----
// ---- before cuda_async_copies ----
// ---- after cuda_async_copies ----
// ---- cuda_async_copies: plan ----
// ---- before cuda_async_waits ----
// ---- after cuda_async_waits ----
// ---- cuda_async_waits: plan ----
>>> print(plan.describe_kernels())
kernel k0_double: a single thread <<<1, 1>>> (no loop is bound to the GPU)
"""
from __future__ import annotations

import os
from typing import Callable, Sequence

from loopnest.passes import run_passes

from ..kernel import BuildError, Param, sanitize_name
from .aliasing import plan_arguments
from .async_copy import plan_async_copies
from .async_wait import plan_async_waits
from .index_division import lower_index_division
from .memory import assign_memory_scopes
from .outline import MAX_SHARED_BYTES, MAX_THREADS_PER_BLOCK, outline_kernels
from .plan import CudaPlan
from .sync import plan_sync
from .tensor_cores import plan_tensor_cores
from .vectors import plan_vector_accesses
from .wgmma_overlap import plan_wgmma_overlap

__all__ = ["CUDA_STEPS", "cuda_passes", "plan_cuda"]

#: (pass name, analysis, plan section it records or None for a rewrite of ``plan.root``), in order.
CUDA_STEPS: list[tuple[str, Callable[[CudaPlan], None], str]] = [
    ("cuda_index_division", lambda plan: setattr(plan, "root", lower_index_division(plan.root)), None),
    ("cuda_outline_kernels", outline_kernels, "kernels"),
    ("cuda_memory_scopes", assign_memory_scopes, "memory"),
    ("cuda_tensor_cores", plan_tensor_cores, "tensor_cores"),
    ("cuda_sync", plan_sync, "sync"),
    ("cuda_wgmma_overlap", plan_wgmma_overlap, "wgmma_overlap"),
    ("cuda_arguments", plan_arguments, "arguments"),
    ("cuda_vector_access", plan_vector_accesses, "vectors"),
    ("cuda_async_copies", plan_async_copies, "async_copies"),
    ("cuda_async_waits", plan_async_waits, "async_waits"),
]


def cuda_passes(plan: CudaPlan, upto: str | None = None) -> list[tuple]:
    """The CUDA steps as ``run_passes`` entries ``(name, fn, show)`` filling ``plan``, up to
    and including the step named ``upto`` (all by default).

    >>> [p[0] for p in cuda_passes(None, upto="cuda_memory_scopes")]
    ['cuda_index_division', 'cuda_outline_kernels', 'cuda_memory_scopes']
    """
    names = [name for name, _, _ in CUDA_STEPS]
    if upto is not None and upto not in names:
        raise BuildError(f"unknown CUDA step {upto!r}; expected one of {names}")
    out = []
    for name, analysis, section in CUDA_STEPS:
        if section is None:
            out.append((name, _step(plan, analysis, None)))
        else:
            out.append((name, _step(plan, analysis, section), _show(plan, section)))
        if name == upto:
            break
    return out


def _step(plan: CudaPlan, analysis, section: str):
    def fn(nest, root):
        analysis(plan)
        if section is not None:
            plan.done.append(section)
        return plan.root
    return fn


def _show(plan: CudaPlan, section: str):
    return lambda: getattr(plan, f"describe_{section}")()


def plan_cuda(nest, params: Sequence[Param], name: str, *, max_threads_per_block: int = MAX_THREADS_PER_BLOCK,
              max_shared_bytes: int = MAX_SHARED_BYTES, dump: bool | None = None, out=None,
              upto: str | None = None) -> CudaPlan:
    """Run the CUDA steps over the prepared ``nest`` (a LoopNest, or its root statement) with
    kernel arguments ``params``; ``name`` is the base of the kernel names. ``dump`` (default:
    ``LOOPNEST_DUMP_PASSES``) prints each step to ``out`` (default stderr). See the module
    example."""
    root = nest.root if hasattr(nest, "root") else nest
    if dump is None:
        dump = os.environ.get("LOOPNEST_DUMP_PASSES", "") not in ("", "0")
    plan = CudaPlan(root, list(params), sanitize_name(name)[:32], max_threads_per_block, max_shared_bytes)
    plan.tensorized = dict(getattr(nest, "_tensorized", {}))
    run_passes(nest, dump=dump, out=out, passes=cuda_passes(plan, upto), root=root)
    return plan
