"""The random tester reaches the LLVM backend's vector paths: schedules that end by
vectorizing an innermost loop (``fuzz.schedules.draw_vector_step``), strided loads as
gathers, and streaming stores to outputs at every alignment (``fuzz.check.Case.run``)."""
from __future__ import annotations

import random

import numpy as np
import pytest

from codegen import build
from codegen.llvm import streaming_store_threshold
from fuzz.check import Case, check_schedule
from fuzz.programs import Program, TensorSpec
from fuzz.schedules import apply_step, draw_vector_step
from loopnest import LoopNest


def _program(data_seed: int) -> Program:
    """B[i] = A[2 i] + 1 over i < N (a strided load), N = 13."""
    load = ["ld", "A", [["mul", ["i", 0], ["c", 2, "int32"]]]]
    return Program({"N": 13}, [TensorSpec("A", "float32", [["N", 13]]),
                               TensorSpec("B", "float32", [["N", 0]], ["add", load, ["c", 1.0, "float32"]])],
                   ["B"], data_seed)


def _vectorized(case: Case) -> LoopNest:
    """The steps ``draw_vector_step`` draws: split the innermost loop (by 8 here), vectorize it."""
    nest = LoopNest(case.outputs)
    apply_step(nest, {"op": "split_with_tail", "args": [{"loop": "i0"}, 8], "kwargs": {}})
    step = draw_vector_step(nest, random.Random(0))
    assert step["op"] == "vectorize"
    apply_step(nest, step)
    return nest


@pytest.mark.parametrize("data_seed", [0, 1, 2])     # outputs 64-byte, 16-byte, one element aligned
def test_vectorized_strided_kernel_with_streaming_stores_at_each_alignment(data_seed):
    case = Case(_program(data_seed))
    nest = _vectorized(case)
    with streaming_store_threshold(1):
        source = build(nest, case.args, target="llvm").source
    assert "!nontemporal" in source and "llvm.masked.gather" in source
    (got,) = case.run(nest, "llvm")
    np.testing.assert_array_equal(got, case.reference[0])


@pytest.mark.filterwarnings("ignore:the prefetch of")      # a drawn transform replacing a prefetched loop
def test_drawn_cpu_schedules_end_vectorized_often():
    case = Case(_program(0))
    rnd = random.Random(7)
    ends = [check_schedule(case, None, ("ireval", "llvm"), rnd=rnd, nsteps=2) for _ in range(12)]
    assert not [f for r in ends for f in r.failures]
    assert sum(any(s["op"] == "vectorize" for s in r.steps) for r in ends) >= 3
