"""CUDA backend: CUDA C from GPU-bound loop nests, compiled with nvcc, launched with PyCUDA.

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> from codegen import build
>>> A = Buffer("A", (1024,), "float32")
>>> B = Compute("B", (1024,), lambda i: A[i] * 2.0)
>>> nest = LoopNest([B])
>>> i, = nest.get_loops_for(B)
>>> bo, bi = nest.split_with_mask(i, 128)
>>> _ = nest.set_gpu_block_index(bo, 0), nest.set_gpu_thread_index(bi, 0)
>>> k = build(nest, [A, B], target="cuda")               # no GPU needed to build
>>> k.launch_dims()
[('k0_B', (8, 1, 1), (128, 1, 1))]
>>> "blockIdx.x" in k.source and "threadIdx.x" in k.source
True

* ``passes``: the CUDA steps after ``prepare_for_codegen`` -- kernel outlining and launch
  dimensions (``outline``), memory scopes (``memory``), barriers and one-thread sections
  (``sync``), arguments with their const / ``__restrict__`` facts (``aliasing``), whole-vector
  loads and stores (``vectors``) -- filling a ``plan.CudaPlan`` that ``LOOPNEST_DUMP_PASSES=1``
  (or ``dump=True``) prints.
* ``types``: the C types of dtypes; vector dtypes (``float32x4``, ``float16x2``, ``int8x4``...)
  as CUDA vector types (``float4``, ``__half2``, ``char4``...) or aligned structs.
* ``emit``: prints the plan as CUDA C, each node whole (vector values arrive as lanes from
  ``loopnest.legalize_vectors.scalarize_vectors``); ``scalar``: the C text of literals, casts
  and intrinsic calls.
* ``compile``: nvcc -> cubin / PTX, and the ``ptxas -v`` report (no GPU needed).
* ``launch``: PyCUDA launches (imported lazily; calling without a GPU raises RuntimeError).
* ``examples``: GPU schedules used by the tests and benchmarks.
* ``emulate``: runs the generated CUDA C on CPU threads (g++), a testing aid without a GPU.
* ``mma``: the warp matrix-multiply fragments of ``mma.sync`` (m16n8k16 float16 / bfloat16,
  m16n8k8 tf32) and ``ldmatrix`` as CuTe thread-value layouts, with an exact CPU model of both;
  ``mma_source``: a warp tile's CUDA C printed from those layouts (the building block of
  tensor-core schedules; no transform emits it yet).

Building needs neither a GPU nor PyCUDA.
"""
from __future__ import annotations

from typing import Sequence

from loopnest.passes import legalize_for_target
from loopnest.stmt import ExternCall, iter_stmts

from ..kernel import BuildError, Param
from .compile import CompileError, nvcc_available, ptxas_report
from .emit import CudaModuleSpec, KernelSpec, emit_cuda
from .kernel import CudaKernel
from .launch import CudaLaunchError

__all__ = ["build_cuda", "CudaKernel", "CudaLaunchError", "CompileError", "emit_cuda", "nvcc_available",
           "ptxas_report", "CudaModuleSpec", "KernelSpec"]

_OPTIONS = ("fast_math", "arch", "sync", "name", "max_threads_per_block", "max_shared_bytes", "dump")


def build_cuda(nest, params: Sequence[Param], **options) -> CudaKernel:
    """A :class:`CudaKernel` for the prepared ``nest`` with arguments ``params``.

    Options: ``fast_math`` (fast intrinsics and ``--use_fast_math``; default False),
    ``arch`` (e.g. ``"sm_90"``; default: the device's at launch), ``sync`` (default True),
    ``name`` (kernel name; default from the outputs), ``max_threads_per_block`` (default
    1024) and ``max_shared_bytes`` (default 48 KiB): a nest over those limits is refused
    with a BuildError here, before anything runs. Raise ``max_shared_bytes`` (up to the
    device's opt-in limit: 163 KiB on sm_80, 227 KiB on sm_90) for kernels that need more than
    48 KiB: they declare it as dynamic shared memory and the launch asks the device for it.
    ``dump`` (default: the environment variable ``LOOPNEST_DUMP_PASSES``) prints the CUDA
    steps and their plan to stderr.
    External calls (``te.extern``) are refused with a BuildError.
    """
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise BuildError(f"unknown option(s) for target 'cuda': {unknown}; known: {list(_OPTIONS)}")
    root = getattr(nest, "root", None)
    if root is not None and any(isinstance(s, ExternCall) for s in iter_stmts(root)):
        raise BuildError("external calls are not supported on the CUDA backend (build with target='llvm' or "
                         "'ireval', or compute the tensor with Compute/Reduce)")
    name = options.get("name") or "_".join(t.name for t in getattr(nest, "outputs", [])) or "kernel"
    fast_math = bool(options.get("fast_math", False))
    emit_opts = {k: options[k] for k in ("max_threads_per_block", "max_shared_bytes", "dump") if k in options}
    if getattr(nest, "prepared", False):     # unprepared nests are refused by the emitter
        nest = legalize_for_target(nest, "cuda")
    module = emit_cuda(nest, params, name, fast_math=fast_math, **emit_opts)
    return CudaKernel(name, list(params), nest.root, module, fast_math=fast_math, arch=options.get("arch"),
                      sync=options.get("sync", True))
