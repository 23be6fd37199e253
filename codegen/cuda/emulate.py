"""Run generated CUDA C on the CPU: a testing aid for machines without a GPU.

The kernel's CUDA source is compiled as C++20 with g++ behind a small prelude:
``__global__``/``__device__`` vanish, ``__shared__`` becomes ``static`` (blocks run one at a
time, so a function-static array is the block's shared memory), and every thread of a block
is a fiber (``ucontext``) of one OS thread: the threads run in a fixed order, each until it
reaches ``__syncthreads()`` or returns, and a barrier is released once every thread of the
block waits at it. The CUDA headers' host implementations provide the
float16/bfloat16/float8 conversions; the few device-only intrinsics the emitter uses
(``__int_as_float``, ``rsqrtf``, ``__expf``...) get host versions here.

Each access of global or shared memory goes through a race check (the emitter's
``note_accesses``; ``emulation_source`` is the source compiled): two threads that touch one
byte between the same barriers, or from different blocks of one launch, one of them changing it,
are an ``EmulationError`` naming the element and both threads. Storing the value already there
is no race (every thread computing the same value and storing it is a pattern the code
generator uses), nor is a read ordered after the element's last write (by its own thread, or by
its block before a barrier): it sees that value, which every concurrent store shares. Every
run is also made twice, at once in two forked children: the threads and blocks in order, and
in reverse order; results that differ are a race too. A thread that
returns while others of its block wait at a barrier is an ``EmulationError`` (on a GPU,
undefined behaviour). All of it shows on every run, whatever the operating system's
scheduling.

It checks indexing, guards, barrier placement and helper semantics of the emitted code --
not the GPU's own math library or memory model. The kernel's CUDA includes and the prelude
are precompiled once per process into a header that every kernel with the same includes
shares (parsing the CUDA headers took half of each compile), and the fibers and the race
check are a runtime library built once per process that every kernel links to (``_RUNTIME``):
a kernel compiles in about 0.07 s.

>>> import numpy as np
>>> from codegen.cuda import examples
>>> from codegen import build
>>> ex = examples.elementwise(300)
>>> k = build(ex.nest, ex.args, target="cuda")
>>> arrays, expected = ex.make(np.random.default_rng(0))
>>> run_on_host(k, **arrays)                                  # doctest: +SKIP
>>> np.allclose(arrays["Y"], expected["Y"], rtol=1e-5)        # doctest: +SKIP
True

Each run happens in forked children (with ``timeout`` seconds), so a deadlock or an
out-of-bounds access fails the call instead of the calling process.
"""
from __future__ import annotations

import ctypes
import hashlib
import math
import mmap
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import numpy as np

from loopnest.transforms.loop_kinds import MAX_BLOCK_THREADS
from te.recursion import recursion_guard

from ..kernel import BuildError
from .emit import CudaEmitter
from .types import compute_type, storage_type
from .launch import memory_bytes, scalar_value

__all__ = ["host_compiler", "run_on_host", "emulation_source", "EmulationError"]


#: the exit status of an emulating child whose ``tc_check_index`` failed (see ``_PRELUDE``)
_INDEX_TRAP = 86
#: the exit status of an emulating child in which threads of a block returned while others wait at a barrier
_BARRIER_TRAP = 87
#: the exit status of an emulating child whose race check found two conflicting accesses
_RACE_TRAP = 88


class EmulationError(RuntimeError):
    """The host emulation failed: compile error, crash, or timeout."""


_PRELUDE = r"""
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
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
// The emulation's runtime (_RUNTIME: the threads of a block as fibers, the race check), built
// once per process into a library every emulated kernel links to.
struct tc_dim3 { unsigned x, y, z; };
extern "C" {
extern tc_dim3 threadIdx, blockIdx, blockDim, gridDim;
extern unsigned tc_current;                       // the running thread's index in its block
extern void (*tc_on_thread_start)(unsigned);      // per-thread state of the helpers (async copies)
void tc_note_read(int kind, const void* p, size_t n);
void tc_note_write(int kind, const void* p, size_t n, const void* old);
void __syncthreads();
void tc_run_grid(const unsigned* g, const unsigned* b, void (*fn)(void*), void* ctx);
}
// the race check's notes of each access the emitter marks (CudaEmitter's note_accesses)
template <typename T> static inline const T& tc_rdg(const T& x) { tc_note_read(0, &x, sizeof(T)); return x; }
template <typename T> static inline const T& tc_rds(const T& x) { tc_note_read(1, &x, sizeof(T)); return x; }
template <typename T> struct tc_written {
  T* p;
  int kind;
  template <typename V> T& operator=(const V& v) {
    unsigned char old[sizeof(T)];
    std::memcpy(old, (const void*)p, sizeof(T));
    *p = v;
    tc_note_write(kind, p, sizeof(T), old);
    return *p;
  }
};
template <typename T> static inline tc_written<T> tc_wrg(T& x) { return {&x, 0}; }
template <typename T> static inline tc_written<T> tc_wrs(T& x) { return {&x, 1}; }
"""


#: the emulation's runtime, built once per process (``_runtime``) into the library each emulated
#: kernel links to: the fibers that run a block's threads, the race check, the launch
_RUNTIME = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <sys/mman.h>
#include <ucontext.h>
#include <unordered_map>
// The threads of a block are fibers (ucontext) of one OS thread, run in a fixed order, each
// until it reaches __syncthreads() or returns; a barrier is released once every thread of the
// block waits at it. The blocks run one after another. tc_reverse runs threads and blocks in
// reverse order: run_on_host runs both orders and compares them, so a race (two threads
// touching one element between barriers, one of them writing it) shows deterministically.
struct tc_dim3 { unsigned x, y, z; };
extern "C" {                                    // what the kernels use (declared in _PRELUDE)
tc_dim3 threadIdx;                              // the running thread's
tc_dim3 blockIdx, blockDim, gridDim;
unsigned tc_current;                            // the running thread's index in its block
void (*tc_on_thread_start)(unsigned) = nullptr;   // per-thread state of the helpers (async copies)
}
enum { TC_READY, TC_AT_BARRIER, TC_DONE };
struct tc_fiber { ucontext_t ctx; tc_dim3 t; int state; };
static tc_fiber* tc_fibers;
static ucontext_t tc_scheduler;
static int tc_reverse;
static void (*tc_fn)(void*);
static void* tc_ctx;
#define TC_STACK_BYTES (1u << 20)
// The race check. Every access of global (kind 0) or shared (kind 1) memory that the emitter
// notes (CudaEmitter's note_accesses: tc_rdg / tc_rds, tc_wrg / tc_wrs) is checked against the
// byte's last write, last write that changed it, and its reads by the last two threads: two
// accesses conflict when they are made in one launch by threads of different blocks, or by
// threads of one block between the same barriers, and at least one of them writes a value
// that changes the byte. (A write of the value already there -- every thread storing the
// same value -- is no race.) A conflict ends the child with status 88 and the two accesses
// in tc_report.
struct tc_stamp { unsigned long long launch, block, phase; unsigned thread; };
struct tc_cell { tc_stamp w, wc, r0, r1; unsigned char has; };    // has: 1 w, 2 wc, 4 r0, 8 r1
enum { TC_HAS_W = 1, TC_HAS_WC = 2, TC_HAS_R0 = 4, TC_HAS_R1 = 8 };
struct tc_race_report { unsigned long long addr; int kind, first_wrote, then_wrote;
                        unsigned first_thread[3], first_block[3], then_thread[3], then_block[3]; };
static tc_race_report* tc_report;                   // in memory shared with run_on_host
static unsigned long long tc_launch_no, tc_block_no, tc_phase_no;
static std::unordered_map<uintptr_t, tc_cell> tc_shadow[2];
static inline tc_stamp tc_now();
static inline bool tc_same_thread(const tc_stamp& a, const tc_stamp& b) {
  return a.launch == b.launch && a.block == b.block && a.thread == b.thread;
}
static inline bool tc_concurrent(const tc_stamp& a, const tc_stamp& b) {
  return a.launch == b.launch && (a.block != b.block || (a.phase == b.phase && a.thread != b.thread));
}
static void tc_coords(unsigned long long linear, const tc_dim3& d, unsigned* out) {
  out[0] = (unsigned)(linear % d.x); out[1] = (unsigned)(linear / d.x % d.y); out[2] = (unsigned)(linear / d.x / d.y);
}
static void tc_race(int kind, uintptr_t addr, const tc_stamp& first, bool first_wrote, bool then_wrote) {
  if (tc_report) {
    const tc_stamp now = tc_now();
    tc_report->addr = addr; tc_report->kind = kind;
    tc_report->first_wrote = first_wrote; tc_report->then_wrote = then_wrote;
    tc_coords(first.thread, blockDim, tc_report->first_thread); tc_coords(first.block, gridDim, tc_report->first_block);
    tc_coords(now.thread, blockDim, tc_report->then_thread); tc_coords(now.block, gridDim, tc_report->then_block);
  }
  std::fflush(nullptr);
  std::_Exit(88);
}
extern "C" void tc_note_read(int kind, const void* p, size_t n) {
  const tc_stamp now = tc_now();
  for (size_t i = 0; i < n; ++i) {
    const uintptr_t a = (uintptr_t)p + i;
    tc_cell& c = tc_shadow[kind][a];
    // The last write is ordered before this read (this thread's, or its block's before a barrier):
    // the read sees that write's value, which equals any concurrent change (else that write raced).
    const bool own = (c.has & TC_HAS_W) && !tc_concurrent(c.w, now);
    if (!own && (c.has & TC_HAS_WC) && tc_concurrent(c.wc, now)) tc_race(kind, a, c.wc, true, false);
    if ((c.has & TC_HAS_R0) && tc_same_thread(c.r0, now)) { c.r0 = now; continue; }
    if (c.has & TC_HAS_R0) { c.r1 = c.r0; c.has |= TC_HAS_R1; }
    c.r0 = now;
    c.has |= TC_HAS_R0;
  }
}
extern "C" void tc_note_write(int kind, const void* p, size_t n, const void* old) {
  const tc_stamp now = tc_now();
  for (size_t i = 0; i < n; ++i) {
    const uintptr_t a = (uintptr_t)p + i;
    tc_cell& c = tc_shadow[kind][a];
    const bool changed = ((const unsigned char*)old)[i] != ((const unsigned char*)p)[i];
    if (changed) {
      if ((c.has & TC_HAS_W) && tc_concurrent(c.w, now)) tc_race(kind, a, c.w, true, true);
      if ((c.has & TC_HAS_R0) && tc_concurrent(c.r0, now)) tc_race(kind, a, c.r0, false, true);
      if ((c.has & TC_HAS_R1) && tc_concurrent(c.r1, now)) tc_race(kind, a, c.r1, false, true);
      c.wc = now;
      c.has |= TC_HAS_WC;
    }
    c.w = now;
    c.has |= TC_HAS_W;
  }
}
// a thread returned while others of its block wait at a barrier (run_on_host: EmulationError)
static inline void tc_barrier_trap() { std::fflush(nullptr); std::_Exit(87); }
extern "C" void __syncthreads() {
  tc_fibers[tc_current].state = TC_AT_BARRIER;
  swapcontext(&tc_fibers[tc_current].ctx, &tc_scheduler);
}
static inline tc_stamp tc_now() { return {tc_launch_no, tc_block_no, tc_phase_no, tc_current}; }
static void tc_fiber_main() {
  if (tc_on_thread_start) tc_on_thread_start(tc_current);
  tc_fn(tc_ctx);
  tc_fibers[tc_current].state = TC_DONE;    // returns to the scheduler (uc_link)
}
extern "C" void tc_run_grid(const unsigned* g, const unsigned* b, void (*fn)(void*), void* ctx) {
  static char* stacks = nullptr;
  static unsigned capacity = 0;
  gridDim = {g[0], g[1], g[2]};
  blockDim = {b[0], b[1], b[2]};
  const unsigned n = b[0] * b[1] * b[2];
  const unsigned long long blocks = (unsigned long long)g[0] * g[1] * g[2];
  if (n > capacity) {
    if (stacks) munmap(stacks, (size_t)capacity * TC_STACK_BYTES);
    std::free(tc_fibers);
    stacks = (char*)mmap(nullptr, (size_t)n * TC_STACK_BYTES, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    tc_fibers = (tc_fiber*)std::malloc(sizeof(tc_fiber) * n);
    if (stacks == MAP_FAILED || !tc_fibers) std::abort();
    capacity = n;
  }
  tc_fn = fn;
  ++tc_launch_no;
  tc_shadow[0].clear();
  tc_ctx = ctx;
  for (unsigned long long q = 0; q < blocks; ++q) {
    const unsigned long long blk = tc_reverse ? blocks - 1 - q : q;
    blockIdx = {(unsigned)(blk % g[0]), (unsigned)(blk / g[0] % g[1]), (unsigned)(blk / g[0] / g[1])};
    tc_block_no = blk;
    tc_phase_no = 0;
    tc_shadow[1].clear();
    for (unsigned k = 0; k < n; ++k) {
      tc_fiber& f = tc_fibers[k];
      f.t = {k % b[0], k / b[0] % b[1], k / b[0] / b[1]};
      f.state = TC_READY;
      getcontext(&f.ctx);
      f.ctx.uc_stack.ss_sp = stacks + (size_t)k * TC_STACK_BYTES;
      f.ctx.uc_stack.ss_size = TC_STACK_BYTES;
      f.ctx.uc_link = &tc_scheduler;
      makecontext(&f.ctx, tc_fiber_main, 0);
    }
    for (;;) {
      unsigned done = 0;
      for (unsigned j = 0; j < n; ++j) {
        const unsigned k = tc_reverse ? n - 1 - j : j;
        if (tc_fibers[k].state == TC_READY) {
          tc_current = k;
          threadIdx = tc_fibers[k].t;
          swapcontext(&tc_scheduler, &tc_fibers[k].ctx);
        }
        done += tc_fibers[k].state == TC_DONE;
      }
      if (done == n) break;
      if (done) tc_barrier_trap();
      for (unsigned k = 0; k < n; ++k) tc_fibers[k].state = TC_READY;
      ++tc_phase_no;
    }
  }
}
extern "C" void tc_set_reverse(int reverse) { tc_reverse = reverse; }
extern "C" void tc_set_report(void* report) { tc_report = (tc_race_report*)report; }
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


#: the runtime's compile flags: it runs every emulated thread, so it is optimised
_RUNTIME_FLAGS = ["-std=c++20", "-O2", "-fPIC", "-pthread", "-w", "-shared"]
_RUNTIMES: dict[str, str] = {}


def _runtime(cxx: str) -> str:
    """The path of the emulation's runtime library (``_RUNTIME``), built once per process.
    Kernels link to it by this path, so each compiles only its own code: the race check's
    hash map is no longer instantiated and optimised in every kernel (g++ 0.2 -> 0.1 s a
    kernel)."""
    with _HEADER_LOCK:
        path = _RUNTIMES.get(cxx)
        if path is None:
            h = hashlib.sha256((cxx + _RUNTIME).encode()).hexdigest()[:24]
            path = os.path.join(_workdir(), f"libtc_emulation_{h}.so")
            cpp = path[:-3] + ".cpp"
            with open(cpp, "w") as f:
                f.write(_RUNTIME)
            made = subprocess.run([cxx, *_RUNTIME_FLAGS, cpp, "-o", path + ".part"], capture_output=True, text=True)
            if made.returncode != 0:
                raise EmulationError(f"g++ could not compile the emulation's runtime:\n{made.stderr[-4000:]}")
            os.replace(path + ".part", path)
            _RUNTIMES[cxx] = path
        return path


def emulation_source(kernel) -> str:
    """The CUDA C the emulation compiles: ``kernel.source`` with every access of global or
    shared memory noted for the race check (``tc_rdg(b_X[i])``, ``tc_wrs(s_T[j]) = ...``;
    the emitter's ``note_accesses``), printed once per kernel from its plan.

    >>> from codegen import build
    >>> from codegen.cuda import examples
    >>> ex = examples.elementwise(300)
    >>> k = build(ex.nest, ex.args, target="cuda")
    >>> "tc_rdg(b_X[" in emulation_source(k), "tc_rdg(" in k.source
    (True, False)
    """
    source = getattr(kernel, "_emulation_source", None)
    if source is None:
        source = kernel._emulation_source = _print_noted(kernel.module.plan, kernel.fast_math)
    return source


@recursion_guard
def _print_noted(plan, fast_math: bool) -> str:
    """The CUDA C of ``plan`` with its accesses noted (a deep expression prints on a deep
    thread, as in ``build``)."""
    return CudaEmitter(plan, fast_math=fast_math, note_accesses=True).run().source


def _build(kernel) -> str:
    cxx = host_compiler()
    if cxx is None:
        raise EmulationError("no host C++ compiler (g++) found for the CUDA emulation")
    # the CUDA headers the kernel includes go first, before the prelude's macros
    source = emulation_source(kernel)
    includes = [ln for ln in source.splitlines() if ln.startswith("#include")]
    body = "\n".join(ln for ln in source.splitlines() if not ln.startswith("#include"))
    head = "\n".join(includes) + _PRELUDE
    src = body + "\n" + _driver(kernel)
    runtime = _runtime(cxx)
    h = hashlib.sha256((head + src + runtime).encode()).hexdigest()[:24]
    if h in _LIBS:
        return _LIBS[h]
    path = os.path.join(_workdir(), f"k_{h}.so")
    cpp = os.path.join(_workdir(), f"k_{h}.cpp")
    with open(cpp, "w") as f:
        f.write(src)
    # the runtime, named by its path (it has no soname), is loaded with the kernel from there
    cmd = [cxx, *_CXXFLAGS, "-shared", f"-I{_cuda_include()}", "-include", _header(cxx, head), cpp, runtime,
           "-o", path]
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
    Raises EmulationError on a race (naming the element and both threads), on threads that
    leave a block while others wait at a barrier, on a crash, or after ``timeout`` seconds;
    IndexError where an index check fails, as on a GPU. The arrays are written only when the
    run succeeds. Example in the module docstring."""
    if getattr(kernel, "target", None) != "cuda":
        raise BuildError("run_on_host takes a kernel built with target='cuda'")
    return kernel._call(args, kwargs, lambda arrays, sizes: _run(kernel, arrays, sizes, timeout))


def _run(kernel, arrays: list, sizes: dict, timeout: float) -> None:
    """Run the bound ``arrays`` of ``kernel`` through the emulation (``run_on_host``): twice,
    at once, in two forked children, the threads and blocks in order and in reverse order;
    results that differ are a race (EmulationError)."""
    for p, a in zip(kernel._buffer_params, arrays):
        if not isinstance(a, np.ndarray):
            raise EmulationError(f"argument {p.name}: the host emulation takes numpy arrays")
    launches = []
    for ks, env in kernel.module.launches(sizes):
        grid, block = ks.dims(env)
        if 0 in grid or 0 in block:
            continue
        if math.prod(block) > MAX_BLOCK_THREADS:
            raise EmulationError(f"kernel {ks.name} of {kernel.name}: a block of {math.prod(block)} threads "
                                 f"{tuple(block)}; CUDA runs at most {MAX_BLOCK_THREADS} threads a block")
        launches.append((ks, env, grid, block))
    if not launches:        # nothing runs (a nest left empty, or empty grids): nothing to compile
        return
    lib_path = _build(kernel)
    memory = [memory_bytes(a) for a in arrays]      # what the kernel indexes, in memory order
    scratch_bytes = kernel.module.scratch_nbytes(sizes)
    runs = [_start(kernel, lib_path, memory, scratch_bytes, launches, reverse) for reverse in (False, True)]
    deadline = time.monotonic() + timeout
    running = [run[0] for run in runs]
    statuses = []
    try:
        for pid in list(running):
            statuses.append(_wait(pid, deadline, kernel.name, timeout))
            running.remove(pid)
    finally:
        for pid in running:     # past the deadline, or interrupted
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    for status, run in zip(statuses, runs):
        _raise_for(status, kernel, run)
    (_, forward, _, _), (_, reverse, _, _) = runs
    racy = [p.name for p, f, r in zip(kernel._buffer_params, forward, reverse) if not np.array_equal(f, r)]
    if racy:
        raise EmulationError(f"the emulated kernel {kernel.name} has a data race: {', '.join(racy)} differ(s) "
                             "between running the threads and blocks in order and in reverse order (two threads "
                             "access one element between barriers, at least one of them writing it)")
    for m, f in zip(memory, forward):
        m[...] = f


def _start(kernel, lib_path: str, memory: list, scratch_bytes: list, launches: list, reverse: bool):
    """Fork a child that runs ``launches`` on copies of ``memory`` shared with it (threads and
    blocks in reverse order with ``reverse``); returns its pid, the shared copies, the scratch
    buffers and the race report it fills."""
    shared = [_shared_copy(m) for m in memory]
    scratch = [_aligned_zeros(n) for n in scratch_bytes]
    report = _RaceReport.from_buffer(mmap.mmap(-1, ctypes.sizeof(_RaceReport)))
    calls = []
    for ks, env, grid, block in launches:
        vals = []
        for a in ks.args:
            if a.kind == "param":
                vals.append(shared[a.index].ctypes.data)
            elif a.kind == "scratch":
                vals.append(scratch[a.index].ctypes.data)
            else:
                vals.append(_slot(a.var, env[id(a.var)], kernel.name))
        calls.append((ks.name, vals, grid, block))
    pid = os.fork()
    if pid == 0:  # child: run and exit without returning into the caller's stack
        code = 1
        try:
            import faulthandler
            faulthandler.disable()  # a crash is reported by the parent, not dumped here
            lib = ctypes.CDLL(lib_path)
            lib.tc_set_reverse(int(reverse))
            lib.tc_set_report(ctypes.c_void_p(ctypes.addressof(report)))
            for name, vals, grid, block in calls:
                fn = getattr(lib, f"tc_launch_{name}")
                fn((ctypes.c_longlong * len(vals))(*vals), (ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block))
            code = 0
        finally:
            os._exit(code)
    return pid, shared, scratch, report


def _wait(pid: int, deadline: float, name: str, timeout: float) -> int:
    """The exit status of child ``pid``; EmulationError past ``deadline`` (``_run`` then kills
    the children still running)."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > deadline:
            raise EmulationError(f"the emulated kernel {name} did not finish in {timeout} s (deadlock?)")
        time.sleep(0.002)


class _RaceReport(ctypes.Structure):
    """The two accesses of a race, as the emulation's ``tc_race`` writes them."""
    _fields_ = [("addr", ctypes.c_ulonglong), ("kind", ctypes.c_int), ("first_wrote", ctypes.c_int),
                ("then_wrote", ctypes.c_int), ("first_thread", ctypes.c_uint * 3), ("first_block", ctypes.c_uint * 3),
                ("then_thread", ctypes.c_uint * 3), ("then_block", ctypes.c_uint * 3)]


def _race_message(kernel, run) -> str:
    """What the race a child reported touched, and which threads did what."""
    _, shared, scratch, r = run
    where = "an element of shared memory"
    if r.kind == 0:
        named = [(p.buffer, m) for p, m in zip(kernel._buffer_params, shared)]
        named += list(zip(kernel.module.scratch, scratch))
        for buf, mem in named:
            start = mem.ctypes.data
            if start <= r.addr < start + mem.nbytes:
                where = f"{buf.name}[{(r.addr - start) // buf.dtype.itemsize}] (in memory order)"
                break
        else:
            where = "an element of global memory"

    def who(thread, block, wrote):
        return f"thread {tuple(thread)} of block {tuple(block)} {'wrote' if wrote else 'read'} it"
    return (f"the emulated kernel {kernel.name} has a data race on {where}: "
            f"{who(r.first_thread, r.first_block, r.first_wrote)}, then {who(r.then_thread, r.then_block, r.then_wrote)}"
            f"{', changing it' if r.then_wrote else ''}, with no barrier between (on a GPU the result depends on "
            "the timing of the threads)")


def _raise_for(status: int, kernel, run) -> None:
    """Raise the error an emulating child's exit ``status`` stands for, if any."""
    name = kernel.name
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == _RACE_TRAP:
        raise EmulationError(_race_message(kernel, run))
    if os.WIFSIGNALED(status):
        raise EmulationError(f"the emulated kernel {name} crashed with signal {os.WTERMSIG(status)} "
                             "(out-of-bounds access?)")
    if os.WEXITSTATUS(status) == _INDEX_TRAP:
        raise IndexError(f"the emulated kernel {name}: a data-dependent index is outside its dimension "
                         "(an IndexCheck failed; on a GPU the launcher raises IndexError too); keep the data in range, or "
                         "clamp the index")
    if os.WEXITSTATUS(status) == _BARRIER_TRAP:
        raise EmulationError(f"the emulated kernel {name}: some threads of a block returned while others wait at "
                             "__syncthreads() (a barrier under a condition that differs between threads; on a GPU, "
                             "undefined behaviour)")
    if os.WEXITSTATUS(status) != 0:
        raise EmulationError(f"the emulated kernel {name} failed (exit status {os.WEXITSTATUS(status)})")
