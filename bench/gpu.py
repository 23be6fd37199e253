"""GPU benchmarks: ``python -m bench.gpu [--quick] [--only NAME ...] [--repeats N]``.

Entries, each checked against numpy before it is timed (CUDA events, median of samples):

* ``device_copy``: device-to-device copy bandwidth (``cudaMemcpy``), the ceiling for
  memory-bound kernels, measured in the same run;
* ``elementwise``: the elementwise chain's GPU schedule; GB/s and the fraction of the copy
  bandwidth (aim: 0.8 or more);
* ``matmul_float32``: the shared-memory, register-tiled hand schedule against cuBLAS through
  CuPy or PyTorch (aim at 4096: 0.9 of cuBLAS or more);
* ``matmul_float16`` / ``matmul_bfloat16`` / ``matmul_tf32``: the tensor-core schedule
  (:mod:`codegen.cuda.mma_matmul`: ldmatrix and mma.sync; tf32 for float32 inputs, opt-in)
  against cuBLAS's tensor-core GEMM (CuPy, or PyTorch for bfloat16 and TF32); aim: 0.7 of it;
* ``softmax``: one block per row against ``torch.softmax`` (aim: at least as fast), or
  CuPy's composed kernels when PyTorch is missing (reported, but the aim is not judged);
* ``gelu`` (tanh approximation), ``layernorm``, ``row_sum``, ``sum`` (of a whole matrix), ``column_sum``, ``transpose``,
  ``linear`` (``A @ B.T``, float32: the automatic GPU schedule's reduction template, a block
  per output), ``conv1d``, ``conv2d``, ``blur``, ``stencil``, ``pyramid``
  (``WORKLOAD_ENTRIES``): each benchmark workload's GPU schedule
  against its PyTorch version on the GPU, eager and through ``torch.compile``
  (``--no-torch-compile`` leaves that out);
  aim: at least as fast as the faster of the two. PyTorch runs a float32 convolution on the
  tensor cores in TF32 by default (``torch.backends.cudnn.allow_tf32``); ``conv2d``
  (``CUDNN_WORKLOADS``) is also timed eagerly with TF32 off, the precision ours computes in,
  and the aim is judged against the fastest of the three.

Aims are judged only at the full sizes and against the peer they name (``aim_met`` is
None otherwise); ``--quick`` runs smaller sizes and reports ratios only.

Results: a table on stdout and in ``bench/results/gpu.txt``, everything in
``bench/results/gpu.json``. Without a GPU (or without CuPy and PyCUDA) it prints why and
exits with status 0.

Kernels run through CuPy when it is installed (the cubin from ``codegen.cuda.compile``
loaded as a ``RawModule``, arguments prepared once, so a launch costs microseconds), else
through PyCUDA (``kernel(...)`` with GPU arrays, which re-checks arguments on every call).

On the lent GPU machine (CuPy and nvcc, but no islpy, which the schedules' transforms need)
install islpy from the wheelhouse described in ``../shared/gpu/README.md`` first.

>>> rows = run(sizes=SIZES["quick"], only=["device_copy", "elementwise"])   # doctest: +SKIP
>>> print(format_table(rows, find_backend().device_info()))                # doctest: +SKIP
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from codegen import build
from codegen.cuda.plan import STATIC_SHARED_BYTES

from .gpu_schedules import (WGMMA_ARCHS, WGMMA_MIN_BLOCKS, WGMMA_TF32_TILES, gpu_nest, make_matmul_lowp,
                            tf32_wgmma_matmul)
from .kernels import WORKLOADS, Spec

__all__ = ["NoGPU", "Backend", "CupyBackend", "PycudaBackend", "find_backend", "GpuTiming", "ENTRIES", "SIZES",
           "WORKLOAD_ENTRIES", "entry_device_copy", "entry_elementwise", "entry_matmul", "entry_softmax",
           "entry_workload", "peer_torch", "CUDNN_WORKLOADS", "run", "format_table", "main"]

RESULTS = Path(__file__).resolve().parent / "results"


class NoGPU(RuntimeError):
    """No usable CUDA GPU (or no CuPy / PyCUDA to drive one); the message says which."""


@dataclass
class GpuTiming:
    """Seconds per call measured with CUDA events: median and best over the samples."""

    median: float
    best: float
    samples: int


def _sample(run_batch: Callable[[int], float], repeats: int, warmup: int = 2) -> GpuTiming:
    """``run_batch(k)`` runs ``k`` calls and returns their seconds; calls per sample are
    chosen so a sample lasts about 2 ms (launch overhead and event resolution amortised)."""
    run_batch(warmup)
    one = max(run_batch(1), 1e-7)
    inner = max(1, min(1000, int(2e-3 / one)))
    times = sorted(run_batch(inner) / inner for _ in range(max(1, repeats)))
    return GpuTiming(statistics.median(times), times[0], len(times))


# ---------------------------------------------------------------------------------------
# backends: device memory, launching our kernels, event timing
# ---------------------------------------------------------------------------------------
class Backend:
    """What an entry needs from the GPU runtime (see :class:`CupyBackend`)."""

    name = "abstract"

    def device_info(self) -> dict:
        raise NotImplementedError

    def arch(self) -> str:
        raise NotImplementedError

    def max_shared_bytes(self) -> int:
        """The shared memory a block may opt in to (dynamic shared memory beyond 48 KiB)."""
        return STATIC_SHARED_BYTES

    def to_device(self, a: np.ndarray) -> Any:
        raise NotImplementedError

    def empty(self, shape, dtype) -> Any:
        raise NotImplementedError

    def to_host(self, d: Any) -> np.ndarray:
        raise NotImplementedError

    def copy(self, dst: Any, src: Any) -> None:
        """Device-to-device copy of ``src`` into ``dst`` (same size), asynchronous."""
        raise NotImplementedError

    def load(self, kernel, arrays: dict) -> Callable[[], None]:
        """A zero-argument callable launching ``kernel`` on the device ``arrays`` (by name)."""
        raise NotImplementedError

    def time(self, fn: Callable[[], None], repeats: int = 10) -> GpuTiming:
        raise NotImplementedError


class CupyBackend(Backend):
    """CuPy arrays; our kernels are nvcc cubins loaded with ``cupy.RawModule``."""

    name = "cupy"

    def __init__(self):
        try:
            import cupy
        except Exception as exc:  # ImportError, or a CUDA library missing
            raise NoGPU(f"CuPy is not usable: {exc}") from exc
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:
            raise NoGPU(f"CuPy finds no CUDA driver or device: {exc}") from exc
        if count == 0:
            raise NoGPU("CuPy reports no CUDA device")
        self.cp = cupy
        self._tmp = tempfile.mkdtemp(prefix="bench_gpu_")

    def device_info(self) -> dict:
        cp = self.cp
        dev = cp.cuda.Device()
        props = cp.cuda.runtime.getDeviceProperties(dev.id)
        name = props.get("name", b"")
        return {"name": name.decode() if isinstance(name, bytes) else str(name), "arch": self.arch(),
                "sms": props.get("multiProcessorCount"), "memory_bytes": props.get("totalGlobalMem"),
                "launcher": self.name, "cupy": cp.__version__,
                "cupy_tf32": os.environ.get("CUPY_TF32", "0")}

    def arch(self) -> str:
        return f"sm_{self.cp.cuda.Device().compute_capability}"

    def max_shared_bytes(self) -> int:
        props = self.cp.cuda.runtime.getDeviceProperties(self.cp.cuda.Device().id)
        return int(props.get("sharedMemPerBlockOptin", STATIC_SHARED_BYTES))

    def to_device(self, a):
        return self.cp.asarray(a)

    def empty(self, shape, dtype):
        return self.cp.empty(shape, dtype)

    def to_host(self, d):
        return self.cp.asnumpy(d)

    def copy(self, dst, src):
        rt = self.cp.cuda.runtime
        rt.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes, rt.memcpyDeviceToDevice,
                       self.cp.cuda.get_current_stream().ptr)

    def load(self, kernel, arrays: dict):
        from codegen.cuda.compile import arch_for, compile_cubin, source_hash
        cp = self.cp
        arch = arch_for(kernel.source, self.arch())
        path = os.path.join(self._tmp, f"{source_hash(kernel.source)[:24]}_{arch}.cubin")
        if not os.path.exists(path):
            with open(path, "wb") as f:
                f.write(compile_cubin(kernel.source, arch, fast_math=kernel.fast_math))
        module = cp.RawModule(path=path)
        bound, sizes = kernel.bind((), arrays)          # validates shapes and dtypes
        scratch = [cp.empty(n, cp.uint8) for n in kernel.module.scratch_nbytes(sizes)]
        launches = []
        for ks, env in kernel.module.launches(sizes):
            grid, block = ks.dims(env)
            if 0 in grid or 0 in block:
                continue
            args = []
            for a in ks.args:
                if a.kind == "param":
                    args.append(bound[a.index].obj)
                elif a.kind == "scratch":
                    args.append(scratch[a.index])
                else:
                    args.append(a.var.dtype.numpy.type(env[id(a.var)]))
            fn = module.get_function(ks.name)
            if ks.dynamic_shared:      # beyond 48 KiB the kernel must opt in before its launch
                fn.max_dynamic_shared_size_bytes = ks.dynamic_shared
            launches.append((fn, grid, block, tuple(args), ks.dynamic_shared))

        def run():
            for fn, grid, block, args, shared in launches:
                fn(grid, block, args, shared_mem=shared)
        run.keep = (module, scratch, arrays)     # alive as long as the callable
        return run

    def time(self, fn, repeats=10):
        return _cupy_time(self.cp, fn, repeats)


class PycudaBackend(Backend):
    """PyCUDA GPU arrays; our kernels are called as ``kernel(**arrays)`` (sync off)."""

    name = "pycuda"

    def __init__(self):
        try:
            from codegen.cuda.launch import device_info, get_driver
            self.drv = get_driver()
            self.info = device_info()
            import pycuda.gpuarray as gpuarray
        except Exception as exc:
            raise NoGPU(f"PyCUDA is not usable: {str(exc).split(';')[0]}") from exc
        self.gpuarray = gpuarray

    def device_info(self) -> dict:
        import pycuda
        return {"name": self.info["name"], "arch": self.info["arch"], "launcher": self.name,
                "pycuda": pycuda.VERSION_TEXT}

    def arch(self) -> str:
        return self.info["arch"]

    def max_shared_bytes(self) -> int:
        return self.info["max_shared_bytes_optin"]

    def to_device(self, a):
        return self.gpuarray.to_gpu(np.ascontiguousarray(a))

    def empty(self, shape, dtype):
        return self.gpuarray.empty(shape, dtype)

    def to_host(self, d):
        return d.get()

    def copy(self, dst, src):
        self.drv.memcpy_dtod_async(dst.gpudata, src.gpudata, src.nbytes)

    def load(self, kernel, arrays: dict):
        kernel.sync = False
        kernel.bind((), arrays)
        return lambda: kernel(**arrays)

    def time(self, fn, repeats=10):
        drv = self.drv

        def batch(k):
            start, end = drv.Event(), drv.Event()
            start.record()
            for _ in range(k):
                fn()
            end.record()
            end.synchronize()
            return end.time_since(start) / 1e3
        return _sample(batch, repeats)


def find_backend(prefer: str | None = None) -> Backend:
    """CuPy if it finds a GPU, else PyCUDA; raises NoGPU saying why neither works."""
    order = [CupyBackend, PycudaBackend]
    if prefer == "pycuda":
        order.reverse()
    reasons = []
    for cls in order:
        try:
            return cls()
        except NoGPU as exc:
            reasons.append(str(exc))
    raise NoGPU("no CUDA GPU to benchmark on: " + "; ".join(reasons))


# ---------------------------------------------------------------------------------------
# peers: cuBLAS (CuPy or PyTorch), PyTorch softmax
# ---------------------------------------------------------------------------------------
def _cupy():
    try:
        import cupy
        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:
        return None


def _torch_cuda():
    try:
        import torch
        return torch if torch.cuda.is_available() else None
    except Exception:
        return None


def _cupy_time(cp, fn, repeats) -> GpuTiming:
    """Seconds per ``fn()`` from CuPy events on the current stream."""
    def batch(k):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(k):
            fn()
        end.record()
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end) / 1e3
    return _sample(batch, repeats)


def _torch_time(torch, fn, repeats) -> GpuTiming:
    """Seconds per ``fn()`` from PyTorch CUDA events."""
    def batch(k):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(k):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    return _sample(batch, repeats)


def peer_matmul(a: np.ndarray, b: np.ndarray, repeats: int, tf32: bool = False) -> dict | None:
    """cuBLAS on the same inputs: CuPy first (PyTorch for bfloat16, which CuPy lacks, and for
    ``tf32``: cuBLAS's TF32 tensor-core GEMM), then PyTorch (TF32 as ``tf32``). None when
    neither."""
    cp = _cupy()
    if cp is not None and a.dtype.name != "bfloat16" and not tf32:
        da, db = cp.asarray(a), cp.asarray(b)
        out = cp.matmul(da, db)
        t = _cupy_time(cp, lambda: cp.matmul(da, db, out=out), repeats)
        return {"peer": f"cuBLAS via CuPy ({a.dtype} GEMM)", "peer_s": t.median, "peer_out": cp.asnumpy(out)}
    torch = _torch_cuda()
    if torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        if a.dtype.name == "bfloat16":   # numpy has no bfloat16: the bits travel as int16
            ta, tb = (torch.from_numpy(x.view(np.int16)).cuda().view(torch.bfloat16) for x in (a, b))
        else:
            ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        out = torch.matmul(ta, tb)
        t = _torch_time(torch, lambda: torch.matmul(ta, tb, out=out), repeats)
        torch.backends.cuda.matmul.allow_tf32 = False
        return {"peer": f"cuBLAS via PyTorch ({'TF32' if tf32 else a.dtype} GEMM)", "peer_s": t.median,
                "peer_out": out.float().cpu().numpy()}
    return None


def peer_softmax(x: np.ndarray, repeats: int) -> dict | None:
    """``torch.softmax`` on the GPU, else CuPy's composed kernels (labelled as such)."""
    torch = _torch_cuda()
    if torch is not None:
        tx = torch.from_numpy(x).cuda()
        out = torch.softmax(tx, dim=1)
        t = _torch_time(torch, lambda: torch.softmax(tx, dim=1), repeats)
        return {"peer": "PyTorch CUDA softmax", "peer_s": t.median, "peer_out": out.cpu().numpy()}
    cp = _cupy()
    if cp is not None:
        dx = cp.asarray(x)

        def f():
            e = cp.exp(dx - dx.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)
        out = f()
        t = _cupy_time(cp, f, repeats)
        return {"peer": "CuPy composed kernels (PyTorch not installed)", "peer_s": t.median,
                "peer_out": cp.asnumpy(out)}
    return None


def _peer(fn, *args):
    """``fn(*args)``; a failing peer is reported (``{"peer": "failed: ..."}``), not raised, so
    our own measurement still counts."""
    try:
        return fn(*args)
    except Exception as exc:
        return {"peer": f"{fn.__name__} failed: {type(exc).__name__}: {exc}"}


# ---------------------------------------------------------------------------------------
# entries
# ---------------------------------------------------------------------------------------
def _rel_err(got: np.ndarray, want: np.ndarray) -> float:
    scale = max(1.0, float(np.max(np.abs(want))))
    return float(np.max(np.abs(got.astype(np.float64) - want))) / scale


def _ours(be: Backend, name: str, spec: Spec, **params):
    """Build the workload's GPU schedule and load it on device copies of the inputs (a
    kernel may take the device's whole opt-in shared memory)."""
    t0 = time.perf_counter()
    kernel = build(gpu_nest(name, spec, **params), spec.args, target="cuda", max_shared_bytes=be.max_shared_bytes())
    compile_s = time.perf_counter() - t0
    dev = {k: be.to_device(v) for k, v in spec.inputs.items()}
    for k, shape in spec.out_shapes.items():
        dev[k] = be.empty(shape, np.float32)
    run = be.load(kernel, dev)
    return kernel, run, dev, {"build_s": compile_s, "resources": _resources(be, kernel),
                              "launch": kernel.launch_dims()}


def _resources(be: Backend, kernel) -> dict:
    """Registers, shared memory and spills of each of ``kernel``'s CUDA kernels (ptxas)."""
    try:
        rep = kernel.compile(be.arch())
        return {k: {f: v[f] for f in ("registers", "shared_bytes", "spill_stores")} for k, v in rep["kernels"].items()}
    except Exception as exc:  # the report is informative only
        return {"error": str(exc)}


def _tf32_wgmma_default(be: Backend, n: int) -> bool:
    """Whether the ``n x n`` tf32 matmul takes the warpgroup MMA by default: on sm_90, where
    the sizes divide into at least ``WGMMA_MIN_BLOCKS`` of its blocks."""
    t = WGMMA_TF32_TILES
    return (be.arch() in WGMMA_ARCHS and n % t["BN"] == 0 and n % t["BM"] == 0
            and (n // t["BM"]) * (n // t["BN"]) >= WGMMA_MIN_BLOCKS)


def _ours_tf32_wgmma(be: Backend, spec: Spec, max_shared_bytes: int, **tiles):
    """:func:`~bench.gpu_schedules.tf32_wgmma_matmul`'s two kernels (B transposed, then the
    warpgroup tree) built with ``max_shared_bytes`` and loaded on device copies of the inputs,
    launched one after the other by the returned ``run``: ``(None, run, dev, info)`` as
    :func:`_ours`."""
    A, B = spec.args[0], spec.args[1]
    t0 = time.perf_counter()
    built = [(build(nest, args, target="cuda", max_shared_bytes=max_shared_bytes), args)
             for nest, args in tf32_wgmma_matmul(A, B, **tiles)]
    compile_s = time.perf_counter() - t0
    dev = {k: be.to_device(v) for k, v in spec.inputs.items()}
    dev["BT"] = be.empty((int(B.shape[1]), int(B.shape[0])), np.float32)
    dev["C"] = be.empty(spec.out_shapes["C"], np.float32)
    runs = [be.load(kernel, {a.name: dev[a.name] for a in args}) for kernel, args in built]

    def run():
        for launch in runs:
            launch()
    resources, launch = {}, []
    for kernel, _ in built:
        resources.update(_resources(be, kernel))
        launch += kernel.launch_dims()
    return None, run, dev, {"build_s": compile_s, "resources": resources, "launch": launch,
                            "schedule": "tf32 warpgroup MMA after a transposing kernel (B to N x K)"}


def entry_device_copy(be: Backend, n_bytes: int, repeats: int = 10, keep: bool = False) -> dict:
    """Device-to-device copy of ``n_bytes``: GB/s counts the bytes read plus written."""
    n = n_bytes // 4
    src = be.to_device(np.arange(n, dtype=np.float32))
    dst = be.empty((n,), np.float32)
    be.copy(dst, src)
    got = be.to_host(dst)
    ok = bool(np.array_equal(got, np.arange(n, dtype=np.float32)))
    t = be.time(lambda: be.copy(dst, src), repeats)
    row = {"name": "device_copy", "size": f"{n_bytes / 2 ** 20:.3g} MiB", "time_s": t.median,
           "gbs": 2 * n * 4 / t.median / 1e9, "correct": ok, "max_rel_err": 0.0 if ok else 1.0}
    if keep:
        row["output"] = got
    return row


def entry_elementwise(be: Backend, n: int, repeats: int = 10, copy_gbs: float | None = None,
                      keep: bool = False) -> dict:
    """The elementwise chain (16 bytes moved per element) as a fraction of copy bandwidth."""
    spec = WORKLOADS["elementwise"].make(n)
    _, run, dev, info = _ours(be, "elementwise", spec)
    run()
    got = be.to_host(dev["Y"])
    err = _rel_err(got, spec.reference(spec.inputs)["Y"])
    t = be.time(run, repeats)
    gbs = spec.bytes / t.median / 1e9
    row = {"name": "elementwise", "size": spec.label, "time_s": t.median, "gbs": gbs, "max_rel_err": err,
           "correct": err <= spec.tol, "copy_gbs": copy_gbs, "ratio": gbs / copy_gbs if copy_gbs else None,
           "ratio_of": "device copy bandwidth", **info}
    if keep:
        row["output"] = got
    return row


def _sample_rows(m: int, k: int = 64) -> np.ndarray:
    return np.unique(np.random.default_rng(1).integers(0, m, min(m, k)))


def entry_matmul(be: Backend, n: int, dtype: str = "float32", repeats: int = 10, keep: bool = False,
                 **params) -> dict:
    """``n x n`` matmul with the hand schedule (``params`` override its tiles) vs cuBLAS;
    ``dtype="tf32"``: float32 inputs on the tensor cores (``tensor_cores=True``) against
    cuBLAS's TF32 GEMM, within tf32's rounding (relative error 1e-3); on sm_90 the warpgroup
    MMA, after a kernel that transposes B (:func:`~bench.gpu_schedules.tf32_wgmma_matmul`:
    ``wgmma=False`` keeps ``mma.sync``, the tiles ``BM, BN, BK, stages, ahead, swizzle``
    override its own, ``max_shared_bytes`` the device's opt-in limit it is built with);
    ``tensor_cores=False`` with tf32 raises ``ValueError`` (that is ``dtype="float32"``).
    Checked against numpy float64 on a sample of rows (all rows when ``n <= 512``)."""
    tf32 = dtype == "tf32"
    spec = WORKLOADS["matmul"].make(n) if dtype in ("float32", "tf32") else make_matmul_lowp(n, dtype)
    if tf32 and not params.pop("tensor_cores", True):
        raise ValueError("entry_matmul: dtype='tf32' runs on the tensor cores; tensor_cores=False is a float32 "
                         "SIMT matmul: pass dtype='float32'")
    wgmma = params.pop("wgmma", None) if tf32 else None
    if tf32 and (wgmma if wgmma is not None else _tf32_wgmma_default(be, n)):
        shared = params.pop("max_shared_bytes", None) or be.max_shared_bytes()
        _, run, dev, info = _ours_tf32_wgmma(be, spec, shared, **params)
    else:
        if tf32:
            params = dict(params, tensor_cores=True)
        else:
            params.setdefault("arch", be.arch())        # sm_90: the warpgroup MMA for float16 / bfloat16
        params.setdefault("max_shared_bytes", be.max_shared_bytes())
        _, run, dev, info = _ours(be, "matmul", spec, **params)
    run()
    got = be.to_host(dev["C"])
    a, b = spec.inputs["A"], spec.inputs["B"]
    rows = np.arange(n) if n <= 512 else _sample_rows(n)
    want = a[rows].astype(np.float64) @ b.astype(np.float64)
    err = _rel_err(got[rows], want)
    t = be.time(run, repeats)
    row = {"name": f"matmul_{dtype}", "size": spec.label, "time_s": t.median,
           "tflops": spec.flops / t.median / 1e12, "max_rel_err": err,
           "correct": err <= (1e-3 if tf32 else spec.tol), **info}
    peer = _peer(peer_matmul, a, b, repeats, tf32)
    if peer is not None and "peer_out" in peer:
        peer_out = peer.pop("peer_out")
        row.update(peer, ratio=peer["peer_s"] / t.median, ratio_of="cuBLAS time / ours",
                   peer_tflops=spec.flops / peer["peer_s"] / 1e12,
                   peer_max_rel_err=_rel_err(peer_out[rows], want))
    else:
        row.update(peer=(peer or {}).get("peer", "none (neither CuPy nor PyTorch with CUDA)"), ratio=None)
    if keep:
        row["output"] = got
    return row


class _TorchOnCuda:
    """``torch`` for a workload's ``torch_fn``: ``from_numpy`` and the tensor factories put
    their tensors on the GPU."""

    FACTORIES = ("full", "zeros", "ones", "empty", "tensor", "arange")

    def __init__(self, torch):
        self._torch = torch

    def from_numpy(self, a):
        return self._torch.from_numpy(a).cuda()

    def __getattr__(self, name):
        attr = getattr(self._torch, name)
        if name in self.FACTORIES:
            return lambda *args, **kw: attr(*args, **dict(kw, device="cuda"))
        return attr


#: workloads PyTorch computes through cuDNN, whose float32 default is TF32 (10-bit mantissas)
CUDNN_WORKLOADS = {"conv2d"}


def peer_torch(spec: Spec, repeats: int, torch_compile: bool = True,
               cudnn_float32: bool = False) -> list[tuple[str, float]]:
    """``(label, seconds)`` of the workload's PyTorch version on the GPU, eager and (with
    ``torch_compile``) through ``torch.compile``; empty without PyTorch or a torch version.
    ``cudnn_float32``: also eager with cuDNN's TF32 off (full float32 products, as ours)."""
    torch = _torch_cuda()
    if torch is None or spec.torch_fn is None:
        return []
    fn = spec.torch_fn(_TorchOnCuda(torch), spec.inputs)
    eager = f"PyTorch {torch.__version__.split('+')[0]} eager"
    out = [(eager, _torch_time(torch, fn, repeats).median)]
    if cudnn_float32:
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False
        try:
            out.append((f"{eager}, cuDNN TF32 off", _torch_time(torch, fn, repeats).median))
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
    if torch_compile:
        compiled = torch.compile(fn)
        out.append(("PyTorch torch.compile", _torch_time(torch, compiled, repeats).median))
    return out


def entry_workload(be: Backend, name: str, size, repeats: int = 10, keep: bool = False,
                   torch_compile: bool = True) -> dict:
    """A benchmark workload (``bench.kernels.WORKLOADS``) with its GPU schedule, checked
    against the numpy reference, against PyTorch eager and ``torch.compile`` (the ratio is
    the faster peer's time over ours)."""
    spec = WORKLOADS[name].make(size)
    _, run, dev, info = _ours(be, name, spec)
    run()
    outs = {k: be.to_host(dev[k]) for k in spec.out_shapes}
    err = spec.error(outs)
    t = be.time(run, repeats)
    row = {"name": name, "size": spec.label, "time_s": t.median, "max_rel_err": err, "correct": err <= spec.tol,
           "gbs": spec.bytes / t.median / 1e9 if spec.bytes else None,
           "tflops": spec.flops / t.median / 1e12 if spec.flops else None, **info}
    peers = _peer(peer_torch, spec, repeats, torch_compile, name in CUDNN_WORKLOADS)
    if isinstance(peers, dict):       # the peer failed: say so
        row.update(peers, ratio=None)
    elif peers:
        label, best = min(peers, key=lambda p: p[1])
        row.update(peer=label, peer_s=best, ratio=best / t.median, ratio_of="faster PyTorch time / ours",
                   peers={lab: sec for lab, sec in peers})
    else:
        row.update(peer="none (no PyTorch with CUDA, or no PyTorch version)", ratio=None)
    if keep:
        row["outputs"] = outs
    return row


def entry_softmax(be: Backend, shape, repeats: int = 10, keep: bool = False) -> dict:
    """Row softmax (one block per row) vs PyTorch CUDA."""
    spec = WORKLOADS["softmax"].make(tuple(shape))
    _, run, dev, info = _ours(be, "softmax", spec)
    run()
    got = be.to_host(dev["Y"])
    err = _rel_err(got, spec.reference(spec.inputs)["Y"])
    t = be.time(run, repeats)
    row = {"name": "softmax", "size": spec.label, "time_s": t.median, "gbs": spec.bytes / t.median / 1e9,
           "max_rel_err": err, "correct": err <= spec.tol, **info}
    peer = _peer(peer_softmax, spec.inputs["X"], repeats)
    if peer is not None and "peer_out" in peer:
        peer_out = peer.pop("peer_out")
        row.update(peer, ratio=peer["peer_s"] / t.median, ratio_of="peer time / ours",
                   peer_max_rel_err=_rel_err(peer_out, spec.reference(spec.inputs)["Y"]))
    else:
        row.update(peer=(peer or {}).get("peer", "none (neither PyTorch nor CuPy with CUDA)"), ratio=None)
    if keep:
        row["output"] = got
    return row


#: sizes: full (the issue's benchmark sizes) and quick
SIZES = {
    "full": {"device_copy": 256 << 20, "elementwise": 1 << 24, "matmul_float32": 4096, "matmul_float16": 4096,
             "matmul_bfloat16": 4096, "matmul_tf32": 4096, "softmax": (4096, 1024)},
    "quick": {"device_copy": 32 << 20, "elementwise": 1 << 22, "matmul_float32": 1024, "matmul_float16": 1024,
              "matmul_bfloat16": 1024, "matmul_tf32": 1024, "softmax": (1024, 1024)},
}

#: the benchmark workloads measured by :func:`entry_workload` (their GPU schedules from
#: ``bench.gpu_schedules``), at the workloads' first full / small size
WORKLOAD_ENTRIES = ["gelu", "layernorm", "row_sum", "sum", "column_sum", "transpose", "linear", "linear_batch", "conv1d",
                    "conv2d", "blur", "stencil", "pyramid"]
for _name in WORKLOAD_ENTRIES:
    SIZES["full"][_name] = WORKLOADS[_name].full[0]
    SIZES["quick"][_name] = WORKLOADS[_name].small[0]

ENTRIES = ["device_copy", "elementwise", "matmul_float32", "matmul_float16", "matmul_bfloat16", "matmul_tf32",
           "softmax",
           *WORKLOAD_ENTRIES]

#: the issue's aims: entry -> the ratio it must reach (at the full sizes)
AIMS = {"elementwise": 0.8, "matmul_float32": 0.9, "softmax": 1.0,
        "matmul_float16": 0.7, "matmul_bfloat16": 0.7, "matmul_tf32": 0.7}
#: entry -> the peer an aim is stated against (a row with another peer is not judged)
AIM_PEERS = {"matmul_float32": "cuBLAS", "softmax": "PyTorch", "matmul_float16": "cuBLAS",
             "matmul_bfloat16": "cuBLAS", "matmul_tf32": "cuBLAS"}
for _name in WORKLOAD_ENTRIES:   # at least as fast as the faster of PyTorch eager and torch.compile
    AIMS[_name], AIM_PEERS[_name] = 1.0, "PyTorch"


def run(backend: Backend | None = None, sizes: dict | None = None, only=None, repeats: int = 10,
        keep: bool = False, log=print, torch_compile: bool = True, matmul_params: dict | None = None) -> list[dict]:
    """Run the entries (``only``: a subset of ``ENTRIES``) and return their rows; an entry
    that fails is reported in its row (``error``) and the others still run.
    ``torch_compile=False`` leaves ``torch.compile`` out of the workload entries' peers.
    ``matmul_params`` override the matmul entries' schedule (``bench.gpu_schedules.matmul_gpu``:
    tiles, ``stages``, ``wgmma=True`` for Hopper's warpgroup tree...)."""
    be = backend or find_backend()
    sizes = sizes or SIZES["full"]
    rows: list[dict] = []
    copy_gbs = None
    for name in only or ENTRIES:
        log(f"  {name} {sizes[name]} ...")
        try:
            if name == "device_copy":
                row = entry_device_copy(be, sizes[name], repeats, keep)
                copy_gbs = row["gbs"]
            elif name == "elementwise":
                if copy_gbs is None:
                    copy_gbs = entry_device_copy(be, 4 * 4 * sizes[name], repeats)["gbs"]
                row = entry_elementwise(be, sizes[name], repeats, copy_gbs, keep)
            elif name.startswith("matmul_"):
                row = entry_matmul(be, sizes[name], name.split("_", 1)[1], repeats, keep, **(matmul_params or {}))
            elif name == "softmax":
                row = entry_softmax(be, sizes[name], repeats, keep)
            elif name in WORKLOAD_ENTRIES:
                row = entry_workload(be, name, sizes[name], repeats, keep, torch_compile)
            else:
                raise KeyError(f"unknown entry {name!r}; entries: {ENTRIES}")
        except Exception as exc:
            row = {"name": name, "size": str(sizes.get(name)), "error": f"{type(exc).__name__}: {exc}"}
            if os.environ.get("BENCH_DEBUG"):
                traceback.print_exc()
        aim = AIMS.get(name)
        if aim is not None and "error" not in row:
            # judged at the sizes only (and only with a peer to compare with)
            r = row.get("ratio")
            row["aim"] = aim
            at_size = sizes.get(name) == SIZES["full"][name]
            right_peer = str(row.get("peer", "")).startswith(AIM_PEERS.get(name, ""))
            row["aim_met"] = (None if r is None or not at_size or not right_peer
                              else bool(r >= aim and row.get("correct")))
        rows.append(row)
    return rows


def format_table(rows: list[dict], device: dict) -> str:
    lines = [f"device: {device.get('name')} ({device.get('arch')}), launcher {device.get('launcher')}", ""]
    hdr = f"{'entry':<15} {'size':<20} {'ours ms':>9} {'GB/s':>8} {'TFLOP/s':>8} | {'peer':<44} " \
          f"{'peer ms':>9} {'ratio':>6} {'aim':>5} ok"
    lines += [hdr, "-" * len(hdr)]
    for r in rows:
        base = f"{r['name']:<15} {str(r.get('size')):<20} "
        if "error" in r:
            lines.append(base + "ERROR " + r["error"][:90])
            continue
        peer = r.get("peer") or ("device copy" if r.get("copy_gbs") else "")
        peer_ms = r.get("peer_s", None)
        if peer_ms is None and r.get("copy_gbs"):
            peer = f"device copy {r['copy_gbs']:.0f} GB/s"
        aim = r.get("aim")
        met = r.get("aim_met")
        lines.append(base + f"{r['time_s'] * 1e3:>9.4f} {(r.get('gbs') or float('nan')):>8.1f} "
                     f"{(r.get('tflops') or float('nan')):>8.2f} | {peer[:44]:<44} "
                     f"{(peer_ms * 1e3 if peer_ms else float('nan')):>9.4f} "
                     f"{(r['ratio'] if r.get('ratio') is not None else float('nan')):>6.2f} "
                     f"{(f'{aim:.1f}' if aim else ''):>5} "
                     f"{'yes' if r.get('correct') else 'NO'}"
                     + ("" if met is None else ("  aim met" if met else "  aim MISSED")))
    return "\n".join(lines)


def _jsonable(rows):
    return [{k: v for k, v in r.items() if k != "output"} for r in rows]


def _json_object(text: str) -> dict:
    """``--matmul-params``: a JSON object.

    >>> _json_object('{"wgmma": true, "stages": 4}')
    {'wgmma': True, 'stages': 4}
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"expected a JSON object such as '{{\"stages\": 4}}', got {text!r}: {exc}")
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object such as '{{\"stages\": 4}}', got {text!r}")
    return value


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.gpu", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="smaller sizes (a minute or so)")
    p.add_argument("--only", nargs="*", choices=ENTRIES, help="entries to run")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--launcher", choices=["cupy", "pycuda"], help="prefer this launcher")
    p.add_argument("--out", default=str(RESULTS))
    p.add_argument("--no-torch-compile", action="store_true",
                   help="leave torch.compile out of the workloads' peers (it compiles for seconds each)")
    p.add_argument("--matmul-params", type=_json_object, default=None, metavar="JSON",
                   help='schedule parameters of the matmul entries, e.g. \'{"wgmma": false}\' (mma.sync on sm_90)')
    args = p.parse_args(argv)
    try:
        be = find_backend(args.launcher)
    except NoGPU as exc:
        print(f"bench.gpu: {exc}. Nothing to benchmark (the CUDA C is still checked by "
              "tests/codegen/test_bench_cuda.py wherever nvcc exists).")
        return 0
    t0 = time.perf_counter()
    device = be.device_info()
    print(f"benchmarking on {device.get('name')} ({device.get('arch')}) through {be.name} ...", flush=True)
    sizes = SIZES["quick" if args.quick else "full"]
    rows = run(be, sizes, args.only, args.repeats, log=lambda s: print(s, flush=True),
               torch_compile=not args.no_torch_compile, matmul_params=args.matmul_params)
    table = format_table(rows, device)
    print()
    print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu.txt").write_text(table + "\n")
    (out / "gpu.json").write_text(json.dumps({"device": device, "sizes": {k: sizes[k] for k in sizes},
                                              "aims": AIMS, "rows": _jsonable(rows), "table": table},
                                             indent=1, default=str))
    print(f"\nresults: {out / 'gpu.json'}  ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
