"""Run generated CUDA C on the CPU: a testing aid for machines without a GPU.

The kernel's exact CUDA source is compiled as C++20 with g++ behind a small prelude:
``__global__``/``__device__`` vanish, ``__shared__`` becomes ``static`` (blocks run one at a
time, so a function-static array is the block's shared memory), every thread of a block is
a ``std::thread`` with a ``thread_local threadIdx``, and ``__syncthreads()`` is a
``std::barrier`` shared by the block's threads. The CUDA headers' host implementations
provide the float16/bfloat16/float8 conversions; the few device-only intrinsics the
emitter uses (``__int_as_float``, ``rsqrtf``, ``__expf``...) get host versions here.

It checks indexing, guards, barrier placement and helper semantics of the emitted code --
not the GPU's own math library or memory model -- and it is slow (a thread per GPU thread).
The kernel's CUDA includes and the prelude are precompiled once per process into a header
that every kernel with the same includes shares (parsing the CUDA headers took half of
each compile).

>>> import numpy as np
>>> from codegen.cuda import examples
>>> from codegen import build
>>> ex = examples.elementwise(300)
>>> k = build(ex.nest, ex.args, target="cuda")
>>> arrays, expected = ex.make(np.random.default_rng(0))
>>> run_on_host(k, **arrays)                                  # doctest: +SKIP
>>> np.allclose(arrays["Y"], expected["Y"], rtol=1e-5)        # doctest: +SKIP
True

Each run happens in a forked child (with ``timeout`` seconds), so a deadlock or an
out-of-bounds access fails the call instead of the calling process.
"""
from __future__ import annotations

import ctypes
import hashlib
import mmap
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import numpy as np

from ..kernel import BuildError
from .types import compute_type, storage_type
from .launch import memory_bytes, scalar_value

__all__ = ["host_compiler", "run_on_host", "EmulationError"]


#: the exit status of an emulating child whose ``tc_check_index`` failed (see ``_PRELUDE``)
_INDEX_TRAP = 86


class EmulationError(RuntimeError):
    """The host emulation failed: compile error, crash, or timeout."""


_PRELUDE = r"""
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <pthread.h>
#undef __global__
#undef __device__
#undef __forceinline__
#undef __shared__
#undef __launch_bounds__
#undef __align__
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// a failed IndexCheck ends the emulating child with this status (run_on_host: IndexError)
#define TC_HOST_EMULATION
static inline void tc_trap() { std::fflush(nullptr); std::_Exit(86); }
struct tc_dim3 { unsigned x, y, z; };
static thread_local tc_dim3 threadIdx;
static tc_dim3 blockIdx, blockDim, gridDim;
static pthread_barrier_t tc_bar;
static inline void __syncthreads() { pthread_barrier_wait(&tc_bar); }
static inline float __int_as_float(int x) { float f; std::memcpy(&f, &x, 4); return f; }
static inline float __uint_as_float(unsigned x) { float f; std::memcpy(&f, &x, 4); return f; }
static inline int __float_as_int(float f) { int x; std::memcpy(&x, &f, 4); return x; }
static inline unsigned __float_as_uint(float f) { unsigned x; std::memcpy(&x, &f, 4); return x; }
static inline double __longlong_as_double(long long x) { double f; std::memcpy(&f, &x, 8); return f; }
static inline long long __double_as_longlong(double f) { long long x; std::memcpy(&x, &f, 8); return x; }
// a float scalar parameter travels in its argument slot as the bits of a double
static inline double tc_slot_double(long long x) { double f; std::memcpy(&f, &x, 8); return f; }
static inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
static inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
#define __expf(x) expf(x)
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __powf(x, y) powf(x, y)
#define __tanf(x) tanf(x)
#define __log10f(x) log10f(x)
#define __fdividef(x, y) ((x) / (y))
#define __fdiv_rn(x, y) ((x) / (y))
#define __fmul_rn(x, y) ((x) * (y))
#define __fsub_rn(x, y) ((x) - (y))
#define __ddiv_rn(x, y) ((x) / (y))
#define __dmul_rn(x, y) ((x) * (y))
#define __dsub_rn(x, y) ((x) - (y))
using std::isnan;
struct tc_thread { tc_dim3 t; void (*fn)(void*); void* ctx; };
static void* tc_thread_main(void* p) {
  tc_thread* th = (tc_thread*)p;
  threadIdx = th->t;
  th->fn(th->ctx);
  return nullptr;
}
// run fn(ctx) on every thread of every block, blocks one after another
static void tc_run_grid(const unsigned* g, const unsigned* b, void (*fn)(void*), void* ctx) {
  gridDim = {g[0], g[1], g[2]};
  blockDim = {b[0], b[1], b[2]};
  const unsigned n = b[0] * b[1] * b[2];
  tc_thread* ths = (tc_thread*)std::malloc(sizeof(tc_thread) * n);
  pthread_t* ids = (pthread_t*)std::malloc(sizeof(pthread_t) * n);
  for (unsigned bz = 0; bz < g[2]; ++bz) for (unsigned by = 0; by < g[1]; ++by) for (unsigned bx = 0; bx < g[0]; ++bx) {
    blockIdx = {bx, by, bz};
    pthread_barrier_init(&tc_bar, nullptr, n);
    unsigned k = 0;
    for (unsigned tz = 0; tz < b[2]; ++tz) for (unsigned ty = 0; ty < b[1]; ++ty) for (unsigned tx = 0; tx < b[0]; ++tx, ++k) {
      ths[k] = tc_thread{{tx, ty, tz}, fn, ctx};
      if (pthread_create(&ids[k], nullptr, tc_thread_main, &ths[k]) != 0) std::abort();
    }
    for (unsigned j = 0; j < n; ++j) pthread_join(ids[j], nullptr);
    pthread_barrier_destroy(&tc_bar);
  }
  std::free(ths);
  std::free(ids);
}
"""


def host_compiler() -> str | None:
    """The g++ used for emulation (``$CXX`` or g++ on PATH), or None."""
    for c in (os.environ.get("CXX"), shutil.which("g++")):
        if c and shutil.which(c):
            return shutil.which(c)
    return None


def _cuda_include() -> str:
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.path.isfile(os.path.join(home, "include", "cuda_fp16.h")):
            return os.path.join(home, "include")
    nvcc = shutil.which("nvcc")
    if nvcc:
        cand = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "include")
        if os.path.isfile(os.path.join(cand, "cuda_fp16.h")):
            return cand
    raise EmulationError("the CUDA headers (cuda_fp16.h) were not found; set CUDA_HOME")


_LIBS: dict[str, str] = {}
_DIR = None


def _arg_ctype(kernel, a) -> str:
    if a.kind == "param":
        return storage_type(kernel._buffer_params[a.index].buffer.dtype) + "*"
    if a.kind == "scratch":
        return storage_type(kernel.module.scratch[a.index].dtype) + "*"
    return compute_type(a.var.dtype)


def _driver(kernel) -> str:
    out = []
    for ks in kernel.kernels:
        casts = []
        for n, a in enumerate(ks.args):
            t = _arg_ctype(kernel, a)
            if t.endswith("*"):
                casts.append(f"({t})(uintptr_t)a[{n}]")
            elif a.kind == "size" and a.var.dtype.is_float:
                casts.append(f"({t})tc_slot_double(a[{n}])")
            else:
                casts.append(f"({t})a[{n}]")
        out.append(f"""
static void tc_body_{ks.name}(void* ctx) {{
  const long long* a = (const long long*)ctx;
  {ks.name}({", ".join(casts)});
}}
extern "C" int tc_launch_{ks.name}(const long long* args, const unsigned* g, const unsigned* b) {{
  tc_run_grid(g, b, tc_body_{ks.name}, (void*)args);
  return 0;
}}""")
    return "\n".join(out)


def _slot(var, v, kernel_name: str) -> int:
    """The 64-bit argument slot of a scalar parameter: the integer, or for a float dtype the
    bits of the double holding the value rounded to the dtype (exact in the C type the
    driver converts it to)."""
    value = scalar_value(var, v, kernel_name)
    if var.dtype.is_float:
        return int(np.array(value, np.float64).view(np.int64))
    return int(value)


def _workdir() -> str:
    global _DIR
    if _DIR is None:
        import atexit
        _DIR = tempfile.mkdtemp(prefix="tc_cuda_emu_")
        atexit.register(shutil.rmtree, _DIR, True)
    return _DIR


#: the flags of every emulation compile (a precompiled header is used only with the flags it was made with)
_CXXFLAGS = ["-std=c++20", "-O0", "-fPIC", "-pthread", "-w"]

#: header text -> the header's path (precompiled beside it when g++ managed to)
_HEADERS: dict[str, str] = {}
_HEADER_LOCK = threading.Lock()


def _header(cxx: str, text: str) -> str:
    """The path of a header holding ``text`` (the kernel's CUDA includes, then the prelude),
    precompiled once per process: parsing the CUDA headers is most of a kernel's compile
    time. A header g++ fails to precompile is still included as text."""
    with _HEADER_LOCK:
        path = _HEADERS.get(text)
        if path is None:
            h = hashlib.sha256(text.encode()).hexdigest()[:24]
            path = os.path.join(_workdir(), f"prelude_{h}.h")
            with open(path, "w") as f:
                f.write(text)
            part = path + ".gch.part"      # renamed into place whole: g++ never sees half a header
            made = subprocess.run([cxx, *_CXXFLAGS, f"-I{_cuda_include()}", "-x", "c++-header", path, "-o", part],
                                  capture_output=True)
            if made.returncode == 0:
                os.replace(part, path + ".gch")
            _HEADERS[text] = path
        return path


def _build(kernel) -> str:
    cxx = host_compiler()
    if cxx is None:
        raise EmulationError("no host C++ compiler (g++) found for the CUDA emulation")
    # the CUDA headers the kernel includes go first, before the prelude's macros
    includes = [ln for ln in kernel.source.splitlines() if ln.startswith("#include")]
    body = "\n".join(ln for ln in kernel.source.splitlines() if not ln.startswith("#include"))
    head = "\n".join(includes) + _PRELUDE
    src = body + "\n" + _driver(kernel)
    h = hashlib.sha256((head + src).encode()).hexdigest()[:24]
    if h in _LIBS:
        return _LIBS[h]
    path = os.path.join(_workdir(), f"k_{h}.so")
    cpp = os.path.join(_workdir(), f"k_{h}.cpp")
    with open(cpp, "w") as f:
        f.write(src)
    cmd = [cxx, *_CXXFLAGS, "-shared", f"-I{_cuda_include()}", "-include", _header(cxx, head), cpp, "-o", path]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise EmulationError(f"g++ could not compile the emulated kernel:\n{p.stderr[-4000:]}")
    _LIBS[h] = path
    return path


def _shared_copy(mem: np.ndarray) -> np.ndarray:
    """The bytes ``mem`` in memory shared with a forked child."""
    buf = mmap.mmap(-1, max(mem.nbytes, 1))
    out = np.frombuffer(buf, dtype=np.uint8, count=mem.nbytes)
    out[...] = mem
    return out


def _aligned_zeros(nbytes: int, align: int = 256) -> np.ndarray:
    """``nbytes`` zero bytes at an address aligned as cudaMalloc's are."""
    raw = np.zeros(nbytes + align, np.uint8)
    skip = -raw.ctypes.data % align
    return raw[skip:skip + nbytes]


def run_on_host(kernel, *args, timeout: float = 120.0, **kwargs):
    """Call the CUDA ``kernel`` (numpy arguments, as for ``kernel(...)``) on the CPU through
    the emulation; returns what ``kernel(...)`` returns (the outputs left out, allocated).
    Raises EmulationError on a crash or after ``timeout`` seconds."""
    if getattr(kernel, "target", None) != "cuda":
        raise BuildError("run_on_host takes a kernel built with target='cuda'")
    return kernel._call(args, kwargs, lambda arrays, sizes: _run(kernel, arrays, sizes, timeout))


def _run(kernel, arrays: list, sizes: dict, timeout: float) -> None:
    """Run the bound ``arrays`` of ``kernel`` through the emulation (``run_on_host``)."""
    for p, a in zip(kernel._buffer_params, arrays):
        if not isinstance(a, np.ndarray):
            raise EmulationError(f"argument {p.name}: the host emulation takes numpy arrays")
    lib_path = _build(kernel)
    memory = [memory_bytes(a) for a in arrays]      # what the kernel indexes, in memory order
    shared = [_shared_copy(m) for m in memory]
    scratch = [_aligned_zeros(n) for n in kernel.module.scratch_nbytes(sizes)]
    launches = []
    for ks, env in kernel.module.launches(sizes):
        grid, block = ks.dims(env)
        if 0 in grid or 0 in block:
            continue
        vals = []
        for a in ks.args:
            if a.kind == "param":
                vals.append(shared[a.index].ctypes.data)
            elif a.kind == "scratch":
                vals.append(scratch[a.index].ctypes.data)
            else:
                vals.append(_slot(a.var, env[id(a.var)], kernel.name))
        launches.append((ks.name, vals, grid, block))
    pid = os.fork()
    if pid == 0:  # child: run and exit without returning into the caller's stack
        code = 1
        try:
            import faulthandler
            faulthandler.disable()  # a crash is reported by the parent, not dumped here
            lib = ctypes.CDLL(lib_path)
            for name, vals, grid, block in launches:
                fn = getattr(lib, f"tc_launch_{name}")
                fn((ctypes.c_longlong * len(vals))(*vals), (ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block))
            code = 0
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise EmulationError(f"the emulated kernel {kernel.name} did not finish in {timeout} s (deadlock?)")
        time.sleep(0.002)
    if os.WIFSIGNALED(status):
        raise EmulationError(f"the emulated kernel {kernel.name} crashed with signal {os.WTERMSIG(status)} "
                             "(out-of-bounds access?)")
    if os.WEXITSTATUS(status) == _INDEX_TRAP:
        raise IndexError(f"the emulated kernel {kernel.name}: a data-dependent index is outside its dimension "
                         "(an IndexCheck failed; on a GPU the launcher raises IndexError too); keep the data in range, or "
                         "clamp the index")
    if os.WEXITSTATUS(status) != 0:
        raise EmulationError(f"the emulated kernel {kernel.name} failed (exit status {os.WEXITSTATUS(status)})")
    for m, s in zip(memory, shared):
        m[...] = s
