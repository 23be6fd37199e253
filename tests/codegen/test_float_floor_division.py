"""Float floordiv / floormod are ``floor(a / b)`` and ``a - floor(a / b) * b`` with every step
rounded, bit for bit the same on IREval, LLVM (contraction on, its default) and the CUDA
host emulation. A remainder computed through ``fmod`` (exact) or an fma-contracted
``a - q * b`` differs in the last bits, and the fma even leaves residues of the wrong sign
where ``a`` is a multiple of ``b``."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import build
from codegen.cuda import nvcc_available
from codegen.cuda.emulate import host_compiler, run_on_host
from loopnest import LoopNest
from te import Buffer, Compute, floordiv, floormod

TARGETS = ["llvm"] + (["cuda"] if host_compiler() is not None and nvcc_available() else [])


def _inputs(dtype):
    rng = np.random.default_rng(5)
    a = np.concatenate([rng.standard_normal(500) * 8, np.arange(-12, 12) * 0.75, [0.0, -0.0, 1e-30, -1e-30]])
    b = np.concatenate([rng.standard_normal(500) * 2 + 0.1, np.full(24, 0.75), [0.75, -0.75, 0.75, 0.75]])
    return a.astype(dtype), b.astype(dtype)


def _run(target, dtype, a, b):
    n = len(a)
    A, B = Buffer("A", (n,), dtype), Buffer("B", (n,), dtype)
    Q = Compute("Q", (n,), lambda i: floordiv(A[i], B[i]))
    R = Compute("R", (n,), lambda i: floormod(A[i], B[i]))
    k = build(LoopNest([Q, R]), [A, B, Q, R], target=target)
    q, r = np.zeros(n, dtype), np.zeros(n, dtype)
    (run_on_host if target == "cuda" else lambda k, *xs: k(*xs))(k, a, b, q, r)
    return q, r


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_floor_division_is_bit_identical_to_ireval(target, dtype):
    a, b = _inputs(dtype)
    q0, r0 = _run("ireval", dtype, a, b)
    q, r = _run(target, dtype, a, b)
    assert np.array_equal(q.view(np.uint8), q0.view(np.uint8))
    assert np.array_equal(r.view(np.uint8), r0.view(np.uint8)), np.flatnonzero(r != r0)[:8]
    # the definition, step by step in the dtype
    with np.errstate(all="ignore"):
        expect = a - np.floor(a / b) * b
    assert np.array_equal(r0, expect)
    exact_multiples = slice(500, 524)
    assert (r0[exact_multiples] == 0).all()
