"""The CUDA Kernel: CUDA C source, nvcc resource reports, and PyCUDA launches.

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> from codegen import build
>>> A = Buffer("A", (256,), "float32")
>>> B = Compute("B", (256,), lambda i: A[i] + 1.0)
>>> k = build(LoopNest([B]), [A, B], target="cuda")    # no GPU needed to build
>>> "__global__" in k.source
True
>>> k.compile("sm_90")["registers"] > 0                 # doctest: +SKIP
True

Calling the kernel needs a GPU and PyCUDA; without them it raises ``RuntimeError``.
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from ..kernel import Kernel, KernelArgumentError, Param
from .compile import arch_for, ptxas_report
from .emit import CudaModuleSpec, KernelSpec
from .launch import Launcher, as_device_array, dtype_matches

__all__ = ["CudaKernel"]


class CudaKernel(Kernel):
    """A built CUDA module: ``source`` is the CUDA C, ``kernels`` the ``__global__``
    functions in launch order (name, grid and block as size expressions, arguments).

    Options kept from ``build``: ``fast_math``, ``arch`` (default: the device's), ``sync``
    (synchronise after each kernel so faults name their kernel; default True).
    """

    target = "cuda"

    def __init__(self, name: str, params: list[Param], stmt, module: CudaModuleSpec, *,
                 fast_math: bool = False, arch: str | None = None, sync: bool = True):
        super().__init__(name, params, stmt, module.source)
        self.module = module
        self.fast_math = fast_math
        self.arch = arch
        self._launcher = Launcher(module, self._buffer_params, fast_math=fast_math, arch=arch, sync=sync,
                                  name=name)

    @property
    def kernels(self) -> list[KernelSpec]:
        return self.module.kernels

    @property
    def sync(self) -> bool:
        return self._launcher.sync

    @sync.setter
    def sync(self, value: bool) -> None:
        self._launcher.sync = bool(value)

    def launch_dims(self, **sizes: int) -> list[tuple[str, tuple, tuple]]:
        """``[(kernel name, grid, block)]`` for the given size values (by variable name), one
        per launch (a kernel inside a host loop once per iteration).

        >>> k.launch_dims(N=1000)    # doctest: +SKIP
        [('k0_B', (8, 1, 1), (128, 1, 1))]
        """
        env = {}
        for p in self.params:
            if p.var is not None and p.var.name in sizes:
                env[id(p.var)] = sizes[p.var.name]
            if p.buffer is not None:
                from te.expr import Var
                for d in p.buffer.dims:
                    if isinstance(d, Var) and d.name in sizes:
                        env[id(d)] = sizes[d.name]
        return [(k.name, *k.dims(e)) for k, e in self.module.launches(env)]

    def compile(self, arch: str | Iterable[str] = "sm_90") -> dict:
        """Compile with nvcc (no GPU needed) and return the ``ptxas -v`` report: for one
        architecture ``{"arch", "kernels": {name: {"registers", "shared_bytes", ...}},
        "registers", "shared_bytes", "spill_stores", "log"}``; for several, such dicts by arch."""
        if isinstance(arch, str):
            arch = arch_for(self.source, arch)      # sm_90a for the warpgroup MMA
        return ptxas_report(self.source, arch, fast_math=self.fast_math)

    # -- binding device arrays ------------------------------------------------------------
    def _check_array(self, p: Param, a: Any, sizes: dict) -> Any:
        if isinstance(a, np.ndarray):
            return super()._check_array(p, a, sizes)
        d = as_device_array(a)
        if d is None and hasattr(a, "__dlpack__"):
            return super()._check_array(p, a, sizes)     # host memory through DLPack, or a device error
        if d is None:
            raise KernelArgumentError(f"argument {p.name} of {self.name} must be a numpy array or a device array "
                                      f"(__cuda_array_interface__ or a PyCUDA GPUArray), got {type(a).__name__}")
        buf = p.buffer
        want = buf.dtype.numpy
        if not dtype_matches(d.dtype, want):
            raise KernelArgumentError(f"argument {p.name} of {self.name} has dtype {d.dtype}, expected "
                                      f"{buf.dtype} ({want})")
        lanes = buf.dtype.lanes
        rank = buf.ndim + (lanes > 1)      # vector elements: the lanes are a trailing axis
        if d.ndim != rank or (lanes > 1 and d.shape[-1] != lanes):
            want_shape = tuple(buf.shape) + ((lanes,) if lanes > 1 else ())
            raise ValueError(f"argument {p.name} of {self.name} has rank {d.ndim} (shape {d.shape}), expected "
                             f"rank {rank} (shape {want_shape})")
        self._bind_shape(p, tuple(d.shape[:buf.ndim]), sizes)
        if buf.layout is None and not d.c_contiguous():
            raise ValueError(f"argument {p.name} of {self.name} must be C-contiguous (row-major); its strides "
                             f"are {d.strides}")
        if buf.layout is not None and d.strides is not None and d.size > 1:
            want_st = tuple(buf.layout.numpy_strides(d.itemsize * lanes)) + ((d.itemsize,) if lanes > 1 else ())
            if tuple(s for s, n in zip(d.strides, d.shape) if n > 1) != \
                    tuple(s for s, n in zip(want_st, d.shape) if n > 1):
                raise ValueError(f"argument {p.name} of {self.name} has strides {d.strides}, but its layout "
                                 f"needs strides {tuple(want_st)}")
        align = self.module.param_alignment.get(self._buffer_params.index(p), 1)
        if d.ptr % align:
            raise ValueError(f"argument {p.name} of {self.name} is at address {d.ptr:#x}, which is not a multiple "
                             f"of {align} bytes: the kernel accesses it as {align}-byte CUDA vectors "
                             "(k.module.plan.describe_vectors() lists them); pass an array that starts on "
                             "such a boundary (a fresh allocation does)")
        return d

    def _launch(self, arrays: list, sizes: dict) -> None:
        self._launcher.run(arrays, sizes)
