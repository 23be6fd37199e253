"""Tuning with symbolic sizes: the automatic space and its seeds schedule a nest whose
extents are size variables, and ``autotune(..., sizes=...)`` measures at those sizes a
schedule that stays correct at every size."""
import numpy as np
import pytest

from codegen import build
from loopnest import LoopNest, ScheduleError, Target
from te import Buffer, Compute, Reduce, Sum, Var
from tune import autotune
from tune.auto import auto_space

AVX2 = Target(cpu="avx2", vector_bits=256, vector_registers=16, cores=2)
AVX512 = Target(cpu="avx512", vector_bits=512, vector_registers=32, cores=2)


def _matmul():
    N = Var("N")
    A, B = Buffer("A", (N, N), "float32"), Buffer("B", (N, N), "float32")
    C = Reduce("C", (N, N), Sum(), lambda i, j, k: A[i, k] * B[k, j], (N,))
    return N, A, B, C


def _check_matmul(kernel, sizes):
    rng = np.random.default_rng(2)
    for n in sizes:
        a, b = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
        c = np.zeros((n, n), np.float32)
        kernel(a, b, c, n)
        np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cpu", [AVX2, AVX512], ids=["avx2", "avx512"])
def test_every_seed_schedules_a_symbolic_matmul(cpu):
    N, A, B, C = _matmul()
    space = auto_space([C], cpu)
    assert space.seeds
    for p in space.seeds:
        nest = space.apply(p)            # no ScheduleError: the seeds are legal for every N
        assert any(lp.kind == "vectorized" for lp in nest.get_all_loops())
    _check_matmul(build(space.apply(space.seeds[0]), [A, B, C, N], target="llvm"), (1, 7, 37))


def test_symbolic_elementwise_and_reduction_points():
    N = Var("N")
    A = Buffer("A", (N, 16), "float32")
    E = Compute("E", (N, 16), lambda i, j: A[i, j] * 2.0)
    R = Reduce("R", (N,), Sum(), lambda i, k: E[i, k], (16,))
    space = auto_space([R], AVX2)
    rng = np.random.default_rng(0)
    built = 0
    for p in list(space.seeds) + [space.sample(rng) for _ in range(6)]:
        try:
            nest = space.apply(p)
        except ScheduleError:
            continue
        a = rng.standard_normal((11, 16)).astype(np.float32)
        r = np.zeros(11, np.float32)
        build(nest, [A, R, N], target="llvm")(a, r, 11)
        np.testing.assert_allclose(r, (2 * a.astype(np.float64)).sum(1), rtol=1e-4, atol=1e-4)
        built += 1
    assert built >= 2


def test_autotune_at_given_sizes_keeps_a_schedule_for_every_size():
    N, A, B, C = _matmul()
    kernel, record, result = autotune([C], [A, B, C, N], target="llvm", trials=4, sizes={"N": 48}, repeats=2,
                                      min_repeat_s=0.001, progress=False, return_result=True, timeout=60)
    tuned = [r for r in result.records if r.point != {"baseline": True}]
    assert any(r.ok for r in tuned), [r.error for r in tuned]
    _check_matmul(kernel, (48, 23, 5))
    assert record.trace and LoopNest([C]).replay(record.trace).history
