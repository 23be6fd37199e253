"""Launching generated CUDA kernels through PyCUDA.

PyCUDA is imported lazily, on the first launch, so the package (emission, nvcc compiles)
works without it. Modules are compiled to cubin with nvcc for the device's architecture
and cached by (source hash, architecture, options, device).

Arguments: numpy arrays are copied to the device before the kernels run and the buffers the
kernels write are copied back afterwards; device arrays (a PyCUDA ``GPUArray``, or any
object with ``__cuda_array_interface__`` such as CuPy arrays and PyTorch CUDA tensors)
are passed by pointer, without copies. Intermediates allocated at the top level of the
nest are device allocations made for the duration of the call.

Errors: no driver / no device raises ``RuntimeError``; a grid or block the device cannot
run, or more shared memory than it has, raises ``ValueError`` before anything is launched;
a failing launch raises :class:`CudaLaunchError` naming the kernel. With ``sync=True``
(the default) the launcher synchronises after each kernel, so an asynchronous fault is
reported against the kernel that caused it.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..kernel import KernelArgumentError
from .compile import compile_cubin, source_hash
from .emit import AXES, CudaModuleSpec, KernelSpec

__all__ = ["CudaLaunchError", "LaunchLimitError", "DeviceArray", "as_device_array", "get_driver", "device_info",
           "Launcher", "check_scratch", "memory_bytes", "scalar_value", "scalar_arg"]


class CudaLaunchError(RuntimeError):
    """A kernel launch (or the work it started) failed; the message names the kernel."""


class LaunchLimitError(ValueError):
    """A launch needs more than the device has (threads per block, grid or block extent,
    shared memory); raised before anything runs. A ``ValueError`` for callers catching that."""


def check_scratch(name: str, nbytes: list[int], free_bytes: int) -> None:
    """Refuse a launch whose global scratch buffers (``module.scratch_nbytes``: the buffers
    sized at launch inside GPU loops, one slice per block and per thread) need more than the
    ``free_bytes`` the device has free, with a :class:`LaunchLimitError` raised before
    anything is allocated, instead of the driver's out-of-memory error.

    >>> check_scratch("f", [1 << 20], 1 << 30)
    >>> check_scratch("f", [1 << 30, 1 << 30], 1 << 30)
    Traceback (most recent call last):
    ...
    codegen.cuda.launch.LaunchLimitError: f needs 2147483648 bytes of global scratch memory at these sizes ...
    """
    total = sum(nbytes)
    if total > free_bytes:
        raise LaunchLimitError(f"{name} needs {total} bytes of global scratch memory at these sizes (its buffers sized "
                               f"at launch, one slice per block and per thread), more than the {free_bytes} bytes "
                               "free on the device; cache smaller regions, or bind fewer blocks or threads around "
                               "the cached buffers")


_NO_DRIVER = ("no CUDA device/driver is available ({why}); kernel.source holds the CUDA C and "
              "kernel.compile() checks it with nvcc, but running it needs an NVIDIA GPU and PyCUDA "
              "(pip install pycuda)")

#: the device global that a failed ``tc_check_index`` sets (``codegen.cuda.helpers``)
INDEX_ERROR_FLAG = "tc_index_error"

_STATE: dict[str, Any] = {}
_LOCK = threading.Lock()


def get_driver():
    """``pycuda.driver`` with a current context (the device's primary context, shared with
    CuPy and PyTorch). Raises RuntimeError when PyCUDA, the driver or a device is missing."""
    with _LOCK:
        if "drv" in _STATE:
            return _STATE["drv"]
        try:
            import pycuda.driver as drv
        except Exception as exc:  # ImportError, or OSError/ImportError for a missing libcuda
            raise RuntimeError(_NO_DRIVER.format(why=f"import pycuda.driver failed: {exc}")) from exc
        try:
            drv.init()
            if drv.Device.count() == 0:
                raise RuntimeError(_NO_DRIVER.format(why="the driver reports no device"))
            if drv.Context.get_current() is None:
                try:
                    import pycuda.autoprimaryctx  # noqa: F401  (retains and pushes the primary context)
                except ImportError:  # pragma: no cover - old PyCUDA
                    import pycuda.autoinit  # noqa: F401
        except RuntimeError:
            raise
        except Exception as exc:
            raise RuntimeError(_NO_DRIVER.format(why=f"CUDA initialisation failed: {exc}")) from exc
        _STATE["drv"] = drv
        return drv


def _optin_shared(dev, A) -> int:
    """The device's opt-in limit of shared memory per block (its default limit where the
    driver does not report one)."""
    try:
        return dev.get_attribute(A.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
    except AttributeError:  # pragma: no cover - an old PyCUDA without the attribute
        return dev.get_attribute(A.MAX_SHARED_MEMORY_PER_BLOCK)


def device_info() -> dict:
    """Architecture and limits of the current device (``arch``, ``max_threads_per_block``,
    ``max_shared_bytes``, ``max_shared_bytes_optin`` (what a kernel may ask for as dynamic
    shared memory), ``max_block_dims``, ``max_grid_dims``, ``name``, ``bus_id``)."""
    with _LOCK:
        info = _STATE.get("info")
    if info is not None:
        return info
    drv = get_driver()
    dev = drv.Context.get_device()
    A = drv.device_attribute
    major, minor = dev.compute_capability()
    info = {
        "arch": f"sm_{major}{minor}",
        "name": dev.name(),
        "bus_id": dev.pci_bus_id(),
        "max_threads_per_block": dev.get_attribute(A.MAX_THREADS_PER_BLOCK),
        "max_shared_bytes": dev.get_attribute(A.MAX_SHARED_MEMORY_PER_BLOCK),
        "max_shared_bytes_optin": _optin_shared(dev, A),
        "max_block_dims": (dev.get_attribute(A.MAX_BLOCK_DIM_X), dev.get_attribute(A.MAX_BLOCK_DIM_Y),
                           dev.get_attribute(A.MAX_BLOCK_DIM_Z)),
        "max_grid_dims": (dev.get_attribute(A.MAX_GRID_DIM_X), dev.get_attribute(A.MAX_GRID_DIM_Y),
                          dev.get_attribute(A.MAX_GRID_DIM_Z)),
    }
    with _LOCK:
        _STATE["info"] = info
    return info


# ------------------------------------------------------------------------------------
# device arrays
# ------------------------------------------------------------------------------------
@dataclass
class DeviceArray:
    """A device buffer passed without copies: pointer, shape, numpy dtype and strides
    (bytes, None when C-contiguous); ``obj`` keeps the owner alive during the call."""

    ptr: int
    shape: tuple
    dtype: np.dtype
    strides: tuple | None
    obj: Any

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    def c_contiguous(self) -> bool:
        if self.strides is None or self.size <= 1:
            return True
        want, acc = [], self.itemsize
        for n in reversed(self.shape):
            want.append(acc)
            acc *= n
        return all(s == w for s, w, n in zip(self.strides, reversed(want), self.shape) if n > 1)


def as_device_array(a: Any) -> DeviceArray | None:
    """Describe a device array (``__cuda_array_interface__`` or a PyCUDA GPUArray), or
    None when ``a`` is not one."""
    cai = getattr(a, "__cuda_array_interface__", None)
    if cai is not None:
        ptr = int(cai["data"][0] or 0)
        typestr = cai["typestr"]
        try:
            dt = np.dtype(typestr)
        except TypeError:
            dt = np.dtype(f"V{int(typestr[2:])}")
        strides = cai.get("strides")
        return DeviceArray(ptr, tuple(int(x) for x in cai["shape"]), dt,
                           tuple(int(s) for s in strides) if strides else None, a)
    gpudata = getattr(a, "gpudata", None)
    if gpudata is not None and hasattr(a, "shape") and hasattr(a, "dtype"):
        strides = getattr(a, "strides", None)
        return DeviceArray(int(gpudata), tuple(a.shape), np.dtype(a.dtype),
                           tuple(strides) if strides is not None else None, a)
    return None


def dtype_matches(have: np.dtype, want: np.dtype) -> bool:
    """Device arrays of ml_dtypes types (bfloat16, float8) come as raw ``V2``/``V1``
    (or unsigned) type strings: accept any of those of the same width."""
    if have == want:
        return True
    if want.kind == "V" or want.char in "EG" or want.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        return have.itemsize == want.itemsize and have.kind in "Vu"
    return False


# ------------------------------------------------------------------------------------
# launching
# ------------------------------------------------------------------------------------
_MODULES: dict[tuple, Any] = {}


class Launcher:
    """Runs the kernels of one CUDA module (see the module docstring)."""

    def __init__(self, module: CudaModuleSpec, buffer_params, *, fast_math: bool = False,
                 arch: str | None = None, sync: bool = True, name: str = "kernel"):
        self.module = module
        self.buffer_params = list(buffer_params)
        self.fast_math = fast_math
        self.arch = arch
        self.sync = sync
        self.name = name
        self._functions: dict[tuple, list] = {}
        self._error_flags: dict[tuple, int | None] = {}
        written = set()
        for k in module.kernels:
            for a in k.args:
                if a.kind == "param" and a.written:
                    written.add(a.index)
        self.written_params = written

    def functions(self):
        """The loaded PyCUDA functions, the device info and the address of the module's index-error
        flag (None without IndexChecks), compiling and loading the module on first use."""
        drv = get_driver()
        info = device_info()
        arch = self.arch or info["arch"]
        key = (source_hash(self.module.source), arch, self.fast_math, info["bus_id"])
        fns = self._functions.get(key)
        if fns is not None:
            return fns, info, self._error_flags[key]
        mod = _MODULES.get(key)
        if mod is None:
            cubin = compile_cubin(self.module.source, arch, fast_math=self.fast_math)
            try:
                mod = drv.module_from_buffer(cubin)
            except drv.Error as exc:
                raise CudaLaunchError(f"loading the CUDA module of {self.name} ({arch}) failed: {exc}") from exc
            _MODULES[key] = mod
        fns = [mod.get_function(k.name) for k in self.module.kernels]
        self._functions[key] = fns
        self._error_flags[key] = mod.get_global("tc_index_error")[0] if INDEX_ERROR_FLAG in self.module.source else None
        return fns, info, self._error_flags[key]

    def _check_dims(self, k: KernelSpec, fn, grid, block, info, drv) -> None:
        threads = math.prod(block)
        limit = info["max_threads_per_block"]
        try:
            limit = min(limit, fn.get_attribute(drv.function_attribute.MAX_THREADS_PER_BLOCK))
        except Exception:  # pragma: no cover - attribute query unsupported
            pass
        if threads > limit:
            raise LaunchLimitError(f"kernel {k.name} of {self.name}: block {block} has {threads} threads, more than "
                             f"the {limit} this kernel can run per block on {info['name']}")
        for a in range(3):
            if block[a] > info["max_block_dims"][a]:
                raise LaunchLimitError(f"kernel {k.name} of {self.name}: {block[a]} threads on axis {AXES[a]} exceed "
                                 f"the device limit {info['max_block_dims'][a]}")
            if grid[a] > info["max_grid_dims"][a]:
                raise LaunchLimitError(f"kernel {k.name} of {self.name}: {grid[a]} blocks on axis {AXES[a]} exceed "
                                 f"the device limit {info['max_grid_dims'][a]}")
        limit = info["max_shared_bytes_optin"] if k.dynamic_shared else info["max_shared_bytes"]
        if k.shared_bytes > limit:
            raise LaunchLimitError(f"kernel {k.name} of {self.name} uses {k.shared_bytes} bytes of shared memory, "
                             f"more than the device's {limit}")

    def run(self, arrays: list, sizes: dict) -> None:
        """Launch every kernel in order (``module.launches``: host loops repeat theirs) with the
        bound ``arrays`` and ``sizes``."""
        drv = get_driver()
        fns, info, error_flag = self.functions()
        fn_of = {k.name: fn for k, fn in zip(self.module.kernels, fns)}
        runs = []
        for k, env in self.module.launches(sizes):
            grid, block = k.dims(env)
            self._check_dims(k, fn_of[k.name], grid, block, info, drv)
            runs.append((k, fn_of[k.name], grid, block, env))
        scratch_bytes = self.module.scratch_nbytes(sizes)
        if scratch_bytes:
            check_scratch(self.name, scratch_bytes, drv.mem_get_info()[0])
        allocations = []
        try:
            ptrs: list[int] = []
            copy_back = []
            for idx, a in enumerate(arrays):
                if isinstance(a, np.ndarray):
                    host = memory_bytes(a)
                    mem = drv.mem_alloc(max(host.nbytes, 1))
                    allocations.append(mem)
                    if host.nbytes:
                        drv.memcpy_htod(mem, host)
                    ptrs.append(int(mem))
                    if idx in self.written_params and host.nbytes:
                        copy_back.append((host, mem))
                else:
                    ptrs.append(a.ptr)
            if error_flag is not None:
                drv.memset_d32(error_flag, 0, 1)
            scratch = []
            for nbytes in scratch_bytes:
                mem = drv.mem_alloc(nbytes)
                allocations.append(mem)
                scratch.append(int(mem))
            for k, fn, grid, block, env in runs:
                if 0 in grid or 0 in block:
                    continue  # an empty loop: nothing to run
                args = []
                for a in k.args:
                    if a.kind == "param":
                        args.append(np.uintp(ptrs[a.index]))
                    elif a.kind == "scratch":
                        args.append(np.uintp(scratch[a.index]))
                    else:
                        v = env.get(id(a.var))
                        if v is None:
                            raise KernelArgumentError(f"size {a.var.name} of {self.name} is not bound")
                        args.append(scalar_arg(a.var, v, self.name))
                try:
                    if k.dynamic_shared:
                        fn.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, k.dynamic_shared)
                    fn(*args, grid=grid, block=block, shared=k.dynamic_shared)
                    if self.sync:
                        drv.Context.synchronize()
                except drv.Error as exc:
                    raise CudaLaunchError(f"CUDA kernel {k.name} of {self.name} (grid {grid}, block {block}) "
                                          f"failed: {exc}") from exc
            if error_flag is not None:
                self._raise_index_error(drv, error_flag)
            try:
                for host, mem in copy_back:
                    drv.memcpy_dtoh(host, mem)
            except drv.Error as exc:
                raise CudaLaunchError(f"copying the results of {self.name} back from the device failed "
                                      f"(a kernel may have faulted): {exc}") from exc
        finally:
            for m in allocations:
                try:
                    m.free()
                except Exception:  # pragma: no cover - context already gone
                    pass


    def _raise_index_error(self, drv, error_flag: int) -> None:
        """Raise ``IndexError`` when an ``IndexCheck`` of the last launch failed (the flag
        ``tc_index_error`` of ``codegen.cuda.helpers``); the arrays are not copied back."""
        flag = np.zeros(1, np.uint32)
        drv.Context.synchronize()
        drv.memcpy_dtoh(flag, error_flag)
        if flag[0]:
            sites = self.module.index_checks
            where = (f"{sites[flag[0] - 1][0]} is outside the buffer in dimension {sites[flag[0] - 1][1]}"
                     if flag[0] <= len(sites) else "an index is outside its buffer")
            raise IndexError(f"{self.name}: a data-dependent index of {where} (an IndexCheck failed on the GPU; the "
                             "output arrays were not copied back); keep the data in range, clamp the index, or "
                             "build with bounds_check=False to skip the checks")


def scalar_value(var, v, kernel_name: str = "kernel"):
    """The value a scalar parameter ``var`` takes for the bound argument ``v``: an int for
    integer dtypes (range-checked), 0 or 1 for bool, and for float dtypes ``v`` rounded once
    to the dtype (float16, bfloat16, tf32 and float8 parameters are declared with their
    compute type ``float`` and get the rounded value). NaN and infinities pass; a finite
    value beyond the dtype's range raises ``ValueError``.

    >>> from te import Var, bfloat16, int8
    >>> scalar_value(Var("s", bfloat16), 1.0 + 2.0 ** -8 + 2.0 ** -30), scalar_value(Var("n", int8), 5)
    (1.0078125, 5)
    >>> scalar_value(Var("n", int8), 300)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: argument n of kernel: n = 300 does not fit its dtype int8 (range [-128, 127]); pass a value ...
    """
    dt = var.dtype
    if dt.is_bool:
        return 1 if v else 0
    lo, hi = dt.min_value(), dt.max_value()
    if dt.is_float:
        v = float(v)
    if not lo <= v <= hi and not (dt.is_float and not math.isfinite(v)):
        raise ValueError(f"argument {var.name} of {kernel_name}: {var.name} = {v} does not fit its dtype {dt} "
                         f"(range [{lo}, {hi}]); pass a value in range or use a wider dtype")
    if not dt.is_float:
        return int(v)
    if dt.kind == "float" and dt.bits in (32, 64):
        return float(dt.numpy.type(v))
    from te.lowprec import convert
    return float(np.asarray(convert(np.array([v], np.float64), "float64", dt.scalar_name), np.float64)[0])


def scalar_arg(var, v, kernel_name: str = "kernel") -> np.generic:
    """The numpy scalar PyCUDA packs for the scalar parameter ``var`` (declared with the C
    type ``compute_type(var.dtype)``): the integer type, ``uint8`` for bool (a C ``bool`` is
    one byte, and PyCUDA packs only ``np.number``), ``float32`` for float32 and the
    low-precision floats, ``float64`` for float64.

    >>> from te import Var, bool_, float16, int64
    >>> [repr(scalar_arg(Var(n, d), x)) for n, d, x in (("b", bool_, True), ("h", float16, 0.1), ("n", int64, 7))]
    ['np.uint8(1)', 'np.float32(0.099975586)', 'np.int64(7)']
    """
    dt = var.dtype
    value = scalar_value(var, v, kernel_name)
    if dt.is_bool:
        return np.uint8(value)
    if dt.is_integer:
        return dt.numpy.type(value)
    return np.float64(value) if dt.kind == "float" and dt.bits == 64 else np.float32(value)


def memory_bytes(a: np.ndarray) -> np.ndarray:
    """A writable uint8 view of the memory an array occupies, in memory order -- what a
    kernel indexes, also for a buffer whose layout is not row-major (a column-major or
    padded array). ml_dtypes arrays do not export buffers, hence views, not memoryviews.

    >>> memory_bytes(np.arange(4, dtype=np.int16).reshape(2, 2).T).view(np.int16).tolist()
    [0, 1, 2, 3]
    """
    if a.size == 0:
        return np.zeros(0, np.uint8)
    if a.flags.c_contiguous:
        return a.reshape(-1).view(np.uint8)
    if a.flags.f_contiguous:
        return a.T.reshape(-1).view(np.uint8)
    if any(st < 0 for st in a.strides):
        raise ValueError(f"arrays with negative strides cannot be passed to a CUDA kernel (strides {a.strides})")
    span = sum((n - 1) * st for n, st in zip(a.shape, a.strides)) + a.itemsize
    if span % a.itemsize:
        raise ValueError(f"array strides {a.strides} are not multiples of the item size {a.itemsize}")
    flat = np.lib.stride_tricks.as_strided(a, shape=(span // a.itemsize,), strides=(a.itemsize,))
    return flat.view(np.uint8)
