"""Tutorial 7: low-precision types: float16, bfloat16, tf32 and float8 casts in a kernel.

    python tutorials/07_low_precision.py

The story: quantise a float32 signal to each low-precision format and back, in one kernel per
format, and compare with the conversion rules of ``te.lowprec`` (round to nearest even;
float8 saturates to finite, e4m3 has no NaN).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from te import Buffer, Compute, cast, float32
from te import lowprec
from loopnest import LoopNest
from codegen import build

x = np.array([0.1, 1.0, 3.14159, 300.0, 500.0, 70000.0, -1e-6, np.inf, np.nan], np.float32)
A = Buffer("A", (x.size,), float32)

print(f"{'format':<14}" + " ".join(f"{v:>10.5g}" for v in x))
for fmt in ["float16", "bfloat16", "tf32", "float8_e4m3", "float8_e5m2"]:
    Q = Compute("Q", (x.size,), lambda i: cast(cast(A[i], fmt), float32))   # quantise, widen back
    kernel = build(LoopNest([Q]), [A, Q], target="ireval")
    q = np.empty_like(x)
    kernel(x, q)
    want = lowprec.convert(lowprec.convert(x, "float32", fmt), fmt, "float32")
    assert np.array_equal(q, want, equal_nan=True), (fmt, q, want)
    print(f"{fmt:<14}" + " ".join(f"{v:>10.5g}" for v in q))

# e4m3 saturates: no infinities, and NaN becomes +448 (its largest normal number)
e4m3 = lowprec.convert(np.array([np.inf, np.nan, 1000.0], np.float32), "float32", "float8_e4m3")
assert e4m3.astype(np.float32).tolist() == [448.0, 448.0, 448.0]
print("\ne4m3 of [inf, nan, 1000] =", e4m3.astype(np.float32).tolist())
print("OK")
