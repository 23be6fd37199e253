"""Tutorial 19: math functions in vector code -- a GELU, and how accurate its tanh is.

    python tutorials/19_math_functions.py

The story: a transformer's MLP applies GELU to every activation. In its tanh form,

    gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))

the cost is the tanh. LLVM would call libm's ``tanhf`` once per vector lane; the LLVM
backend instead computes float32 ``exp``, ``exp2``, ``expm1``, ``log``, ``log2``, ``log10``,
``log1p``, ``tanh``, ``erf``, ``sin``, ``cos``, ``tan``, ``asin``, ``acos``, ``atan``, ``atan2``,
``sinh``, ``cosh`` and ``pow`` with plain vector arithmetic
(``codegen/llvm/mathfns.py``), within 1 to 2 ulps of the correctly rounded result, with
libm's special values (``log(0) = -inf``, ``tanh(-0) = -0``...). Nothing to ask for: any
kernel that uses them gets them.

We build GELU, check it against numpy in float64, measure tanh's error in ulps over a range
of arguments (and atan's, asin's, acos's, sinh's and cosh's), look for libm calls in the LLVM
IR, and time GELU against numpy's and (where
installed) PyTorch's.
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

import te
from te import Buffer, Compute, float32
from bench.harness import time_interleaved
from codegen import build
from loopnest import LoopNest

N = 1 << 16 if os.environ.get("TUTORIAL_SMALL") else 1 << 22
SCALE = 0.7978845608028654     # sqrt(2 / pi)

# 1. GELU, scheduled automatically (blocks of rows in parallel, 16-lane vectors on AVX-512).
X = Buffer("X", (N,), float32)
Y = Compute("Y", (N,), lambda i: 0.5 * X[i] * (1.0 + te.tanh(SCALE * (X[i] + 0.044715 * X[i] * X[i] * X[i]))))
nest = LoopNest([Y])
print(nest.auto_schedule())
gelu = build(nest, [X, Y], target="llvm")
print("libm calls in the kernel:", gelu.source.count("@tanhf("))

x = (np.random.default_rng(0).standard_normal(N) * 3).astype(np.float32)
y = np.empty_like(x)
gelu(x, y)
x64 = x.astype(np.float64)
want = 0.5 * x64 * (1 + np.tanh(SCALE * (x64 + 0.044715 * x64 ** 3)))
print(f"GELU: largest difference from numpy float64: {np.abs(y - want).max():.2e}")
assert np.allclose(y, want, rtol=1e-5, atol=1e-6)

# 2. tanh alone: its error in ulps of the float32 result, over [-10, 10] and near 0.
T = Compute("T", (N,), lambda i: te.tanh(X[i]))
tanh = build(LoopNest([T]), [X, T], target="llvm")
args = np.concatenate([np.linspace(-10, 10, N // 2), np.geomspace(1e-30, 1, N // 2)]).astype(np.float32)
got = np.empty_like(args)
tanh(args, got)
exact = np.tanh(args.astype(np.float64))
ulps = np.abs(got - exact) / np.spacing(np.abs(exact).astype(np.float32))
print(f"tanh: at most {ulps.max():.2f} ulps from the correctly rounded result")
assert ulps.max() <= 1.5

# 3. The inverse trigonometric and hyperbolic functions are vector code too: no libm call in
#    their kernels, each within 2 ulps of the correctly rounded result here.
for name, numpy_name, lo, hi in (("atan", "arctan", -50, 50), ("asin", "arcsin", -1, 1), ("acos", "arccos", -1, 1),
                                 ("sinh", "sinh", -20, 20), ("cosh", "cosh", -20, 20)):
    F = Compute("F", (N,), lambda i: getattr(te, name)(X[i]))
    kernel = build(LoopNest([F]), [X, F], target="llvm")
    v = np.linspace(lo, hi, N).astype(np.float32)
    out = np.empty_like(v)
    kernel(v, out)
    exact = getattr(np, numpy_name)(v.astype(np.float64))
    err = (np.abs(out - exact) / np.spacing(np.abs(exact).astype(np.float32))).max()
    print(f"{name}: at most {err:.2f} ulps; libm calls: {kernel.source.count(name + 'f')}")
    assert err <= 2 and name + "f" not in kernel.source

# 4. Time GELU against numpy (and PyTorch's gelu(approximate="tanh") where installed), in
#    interleaved rounds (bench.harness: the benchmark's timer), so the ratios come from one run.
peers = {"ours": lambda: gelu(x, y),
         "numpy": lambda: 0.5 * x * (1 + np.tanh(np.float32(SCALE) * (x + np.float32(0.044715) * x * x * x)))}
try:
    import torch
    tx = torch.from_numpy(x)
    peers["PyTorch"] = lambda: torch.nn.functional.gelu(tx, approximate="tanh")
except ImportError:
    print("(PyTorch is not installed)")
times = {name: t.median for name, t in time_interleaved(peers, rounds=5).items()}
print(f"GELU over {N} elements: ours {times['ours'] * 1e3:.2f} ms; "
      + ", ".join(f"{name} {sec * 1e3:.2f} ms ({sec / times['ours']:.1f}x our time)"
                  for name, sec in times.items() if name != "ours"))
print("OK")
