"""The ``cuda_index_division`` step: floor division and remainder of provably non-negative
indices by positive constants become C ``/`` and ``%`` in the IR (shown in the pass dump),
and the CUDA printer only spells the nodes it is given."""
from __future__ import annotations

import io

import numpy as np
import pytest

from codegen import build
from codegen.cuda import nvcc_available
from codegen.cuda.emulate import host_compiler, run_on_host
from codegen.cuda.index_division import lower_index_division
from codegen.cuda.passes import plan_cuda
from codegen.kernel import make_params
from loopnest import LoopNest
from loopnest.stmt import Block, For, ForKind, Store
from te import Buffer, Compute, Var, floordiv, floormod, int32

HAVE_EMU = host_compiler() is not None and nvcc_available()


def _nest():
    """A thread loop from 0 (its floor divisions in indices become C ones) and a serial loop
    from -4 (they stay floor divisions), plus a floor remainder in a stored value (left alone:
    value arithmetic wraps)."""
    A = Buffer("A", (24,), int32)
    B = Compute("B", (8,), lambda i: A[i])
    C = Compute("C", (8,), lambda i: A[i])
    t, i = Var("t"), Var("i")
    nest = LoopNest([B, C])
    nest.root = Block((
        For(t, 0, 8, Block([Store(B, (floormod(t * 3, 8),), A[floordiv(t * 5 + 1, 2)] + floormod(A[t], 3))]),
            ForKind.GPU_THREAD, 0),
        For(i, -4, 4, Block([Store(C, (i + 4,), A[floordiv(i, 2) + 8])])),
    ))
    return nest, [A, B, C]


def test_index_division_golden():
    nest, _ = _nest()
    assert str(lower_index_division(nest.root)) == (
        "gpu_thread.x for (int t = 0; t < 8; t++) {\n"
        "  B[t * 3 % 8] = A[(t * 5 + 1) / 2] + floormod(A[t], 3);\n"
        "}\n"
        "for (int i = -4; i < 4; i++) {\n"
        "  C[i + 4] = A[floordiv(i, 2) + 8];\n"
        "}")


def test_the_step_shows_in_the_dump_and_the_printer_spells_its_nodes():
    nest, args = _nest()
    out = io.StringIO()
    plan_cuda(nest.root, make_params(nest, args), "k", dump=True, out=out, upto="cuda_index_division")
    after = out.getvalue().split("// ---- after cuda_index_division ----")[1]
    assert "A[(t * 5 + 1) / 2]" in after and "floordiv(i, 2)" in after
    src = build(nest, args, target="cuda").source
    assert "tc_floordiv<int>(" in src          # the loop from -4: floor division stays a helper
    assert "tc_floormod<int>(" in src          # the stored value: wrapping arithmetic
    assert " / 2)" in src and " % 8)" in src


@pytest.mark.skipif(not HAVE_EMU, reason="host emulation needs g++ and the CUDA headers")
def test_host_emulation_agrees_with_ireval():
    nest, args = _nest()
    a = np.arange(-12, 12, dtype=np.int32)
    results = []
    for run in (build(nest, args, target="ireval"), lambda *xs: run_on_host(build(nest, args, target="cuda"), *xs)):
        b, c = np.zeros(8, np.int32), np.zeros(8, np.int32)
        run(a, b, c)
        results.append((b, c))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
    t = np.arange(8)
    np.testing.assert_array_equal(results[0][1], a[(t - 4) // 2 + 8])
