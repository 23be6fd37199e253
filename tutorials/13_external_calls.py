"""Tutorial 13: external calls -- a BLAS sgemm for the matmul, a compiled epilogue around it.

    python tutorials/13_external_calls.py

The story: a dense layer ``relu(x @ w + bias)``. The matmul is what BLAS libraries do best,
so the nest calls one: ``te.Extern`` makes a tensor that a function outside the compiler
fills, and the bias-add + ReLU epilogue that reads it is an ordinary Compute this project
schedules and compiles. The loop nest holds the call as one statement (``MM = extern
sgemm(X, W);``) that reads its inputs and writes its output whole; transforms work on the
other loops, and the ones that would move the call are refused.

The BLAS is the OpenBLAS that numpy ships (``numpy.libs/libscipy_openblas*.so`` in numpy's
wheels; its ``cblas_sgemm`` is exported as ``scipy_cblas_sgemm64_``, with 64-bit integers),
loaded with ctypes -- no scipy, no compiler. The LLVM kernel calls it through a small Python
shim with the C signature ``te.extern.EXTERN_C_ABI`` (a ctypes callback: it runs holding the
GIL, which costs microseconds, not the matmul's milliseconds). IREval runs ``py_fn``, a
numpy function, instead. When no BLAS symbol can be found, the tutorial says so and runs the
IREval part only.
"""
import ctypes
import glob
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from te import Buffer, Compute, Extern, maximum
from te.extern import extern_c_fn
from loopnest import LoopNest, ScheduleError
from codegen import build

M, K, N = 256, 512, 384
rng = np.random.default_rng(0)
x = rng.standard_normal((M, K)).astype(np.float32)
w = rng.standard_normal((K, N)).astype(np.float32)
bias = rng.standard_normal(N).astype(np.float32)
want = np.maximum(x @ w + bias, 0)


# -- 1. find numpy's BLAS ----------------------------------------------------------------
def find_sgemm():
    """(library path, symbol, integer type) of a cblas_sgemm in numpy's bundled OpenBLAS, or None."""
    root = os.path.dirname(np.__file__)
    libs = []
    for d in (os.path.join(root, os.pardir, "numpy.libs"), os.path.join(root, ".libs"), os.path.join(root, "core"),
              os.path.join(root, "_core")):
        libs += sorted(glob.glob(os.path.join(d, "*openblas*.so*")) + glob.glob(os.path.join(d, "*openblas*.dylib")))
    symbols = (("scipy_cblas_sgemm64_", ctypes.c_int64), ("cblas_sgemm64_", ctypes.c_int64),
               ("scipy_cblas_sgemm", ctypes.c_int), ("cblas_sgemm", ctypes.c_int))
    for path in libs:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for sym, int_t in symbols:
            if hasattr(lib, sym):
                return path, getattr(lib, sym), sym, int_t
    return None


found = find_sgemm()
if found is None:
    print("no cblas_sgemm found in numpy's bundled libraries: the LLVM part is skipped, IREval runs numpy's matmul")
else:
    path, sgemm, sym, int_t = found
    print(f"BLAS: {sym} from {os.path.basename(path)}")
    sgemm.restype = None
    sgemm.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, int_t, int_t, int_t, ctypes.c_float,
                      ctypes.c_void_p, int_t, ctypes.c_void_p, int_t, ctypes.c_float, ctypes.c_void_p, int_t]
ROW_MAJOR, NO_TRANS = 101, 111


# -- 2. the shim: the project's extern ABI -> cblas_sgemm ---------------------------------
def sgemm_shim(nbufs, data, ndims, shapes, strides):
    """``int32_t f(int32_t nbufs, void **data, const int32_t *ndims, const int64_t *shapes,
    const int64_t *strides)``: buffers X (m, k), W (k, n), then the output MM (m, n)."""
    if nbufs != 3 or ndims[0] != 2 or ndims[1] != 2 or ndims[2] != 2:
        return 1                                          # the kernel raises RuntimeError naming sgemm
    m, k, n = shapes[0], shapes[1], shapes[3]
    lda, ldb, ldc = strides[0], strides[2], strides[4]    # row strides, in elements
    sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, m, n, k, 1.0, data[0], lda, data[1], ldb, 0.0, data[2], ldc)
    return 0


def numpy_matmul(a, b, out):                              # what IREval runs
    np.matmul(a, b, out=out)


# -- 3. the nest: an external matmul, a compiled epilogue ---------------------------------
X, W, Bias = Buffer("X", (M, K), "float32"), Buffer("W", (K, N), "float32"), Buffer("Bias", (N,), "float32")
c_fn = extern_c_fn(sgemm_shim) if found is not None else None
MM = Extern("MM", (M, N), [X, W], numpy_matmul, c_fn=c_fn, func_name="sgemm")
Y = Compute("Y", (M, N), lambda i, j: maximum(MM[i, j] + Bias[j], 0.0))

nest = LoopNest([Y])
i, j = nest.get_loops_for(Y)
jo, ji, _ = nest.split_with_tail(j, 8)
nest.vectorize(ji)
nest.parallelize(i)
try:
    nest.compute_inline(MM)
except ScheduleError as exc:                          # the call is not an expression to inline
    print("refused:", exc)
print(nest)
nest.prepare_for_codegen()

# -- 4. run and check against numpy -------------------------------------------------------
targets = ["ireval"] + (["llvm"] if found is not None else [])
for target in targets:
    k = build(nest, [X, W, Bias, Y], target=target)
    y = np.zeros((M, N), np.float32)
    k(x, w, bias, y)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-3)
    print(f"{target:6} relu(x @ w + bias) matches numpy")
    if target == "llvm":
        def per_call(f, n=5):
            f()
            t0 = time.perf_counter()
            for _ in range(n):
                f()
            return (time.perf_counter() - t0) / n * 1e3
        t_kernel = per_call(lambda: k(x, w, bias, y))
        t_numpy = per_call(lambda: np.maximum(x @ w + bias, 0))
        print(f"llvm   {M}x{K} @ {K}x{N}, BLAS + compiled epilogue: {t_kernel:.2f} ms per call "
              f"(numpy, same BLAS: {t_numpy:.2f} ms)")

print("OK")
