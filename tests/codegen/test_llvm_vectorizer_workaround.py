"""LLVM 22's loop vectorizer predicated a remainder on lane 0 of a mask and gathered through
its result under the whole mask: this two-stage program (every index in range) crashed the
process. ``codegen.llvm.jit.LLVM_OPTIONS`` keeps the vectorizer off loops with conditional
blocks. The kernel runs in a subprocess, so a regression fails the test instead of killing
the run. Found by the random tester (seed 87, case 342), reduced by hand."""
from __future__ import annotations

import subprocess
import sys

PROGRAM = r'''
import numpy as np
from te import Buffer, Min, Reduce, Var, cast, floormod, if_then_else
from loopnest import LoopNest
from codegen import build
M = Var("M", "int32")
A = Buffer("A", (M + 4, M + 2), "int32")
T1 = Reduce("T1", (M + 2, M + 1), Min(), lambda i0, i1, r0, r1: cast(A[r0, floormod(r1, M + 2)], "float32")
            + if_then_else(i1 >= 2, cast(A[i1 - 2, r1 / 2], "float32"), 0.0), (3, 3))
T2 = Reduce("T2", (2,), Min(), lambda i0, r0, r1: cast(T1[floormod(i0, M + 2), r0 + 2], "int64"), (3, 3))
a = np.random.default_rng(0).integers(-3, 4, (11, 9)).astype(np.int32)
got = {}
for target in ("ireval", "llvm"):
    got[target] = np.zeros(2, np.int64)
    build(LoopNest([T2]), [A, T2, M], target=target)(a, got[target], 7)
assert np.array_equal(got["ireval"], got["llvm"]), got
print("same")
'''


def test_a_guarded_remainder_in_a_vectorizable_loop_runs_and_agrees_with_ireval():
    proc = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("same"), (proc.returncode, proc.stderr[-2000:])


def test_llvm_leaves_loops_with_conditional_blocks_to_the_schedule():
    """The option is in effect: an unscheduled loop with an ``if_then_else`` is not vectorized
    by LLVM (without the option LLVM 22 makes it a ``vector.body`` of 8 or 16 lanes), and it
    still gives the right values."""
    import numpy as np
    from codegen import build
    from loopnest import LoopNest
    from te import Buffer, Compute, if_then_else
    A = Buffer("A", (1024,), "float32")
    B = Compute("B", (1024,), lambda i: if_then_else(i >= 2, A[i - 2] * 2.0, 0.0))
    k = build(LoopNest([B]), [A, B], target="llvm")
    assert "vector.body" not in k.optimized_source
    a = np.arange(1024, dtype=np.float32)
    b = np.full(1024, np.nan, np.float32)
    k(a, b)
    np.testing.assert_array_equal(b, np.concatenate([[0, 0], a[:-2] * 2]).astype(np.float32))
