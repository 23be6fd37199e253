"""The benchmark's image pipelines (``bench.pipelines``): the 13-stage stencil chain and the
5-level pyramid compute their numpy float64 reference under the hand schedule on LLVM and
on IREval, unscheduled too, and ``bench.bench_compile`` runs in its quick mode."""
import pytest

from bench import bench_compile
from bench.kernels import WORKLOADS
from bench.pipelines import PYRAMID_LEVELS, STENCIL_HALO, STENCIL_STAGES, make_pyramid
from codegen import build
from loopnest import LoopNest, Target

LLVM_SIZES = {"stencil": [(16, 40), (13, 21), (1, 3)], "pyramid": [(32, 96), (64, 32)]}
IREVAL_SIZES = {"stencil": [(5, 9)], "pyramid": [(32, 32)]}


def _run(name, size, target, scheduled=True, **params):
    w = WORKLOADS[name]
    spec = w.make(size)
    nest = LoopNest(spec.outputs)
    if scheduled:
        w.hand_schedule(nest, spec, **params)
    outs, _ = spec.run(build(nest, spec.args, target=target))
    err = spec.error(outs)
    assert err <= spec.tol, f"{name} {size} on {target}: differs from numpy by {err:.3g}"
    return nest


@pytest.mark.parametrize("name,size", [(n, s) for n, sizes in LLVM_SIZES.items() for s in sizes])
def test_hand_schedule_matches_numpy_on_llvm(name, size):
    # the pyramid's levels run in parallel from a million elements: a lower threshold here
    params = {"min_parallel_work": 64} if name == "pyramid" else {}
    nest = _run(name, size, "llvm", **params)
    assert any(lp.kind == "parallel" for lp in nest.get_all_loops()) or min(size) < 16


def test_hand_pyramid_vectorizes_contiguous_rows_only():
    spec = make_pyramid((64, 64))
    nest = LoopNest(spec.outputs)
    WORKLOADS["pyramid"].hand_schedule(nest, spec, target=Target(vector_bits=256))
    kept = [t for t in nest.tensors if not t.name.startswith(("ug", "uo")) and t.name != "g0"]     # inlined
    kinds = {t.name: {lp.kind for lp in nest.get_loops_for(t)} for t in kept}
    vectorized = {n for n, k in kinds.items() if "vectorized" in k}
    assert vectorized == {"g1", "g2", "g3"}        # g4 and g5 are narrower than 8 lanes
    assert not any("parallel" in k for k in kinds.values())     # levels of 4096 elements at most


@pytest.mark.parametrize("name,size", [(n, s) for n, sizes in IREVAL_SIZES.items() for s in sizes])
@pytest.mark.parametrize("scheduled", [True, False])
def test_pipeline_matches_numpy_on_ireval(name, size, scheduled):
    _run(name, size, "ireval", scheduled)


def test_pipelines_have_their_stages():
    spec = WORKLOADS["stencil"].make((4, 6))
    assert spec.inputs["A"].shape == (4 + STENCIL_HALO[0], 6 + STENCIL_HALO[1])
    assert len(LoopNest(spec.outputs).tensors) == STENCIL_STAGES + 1
    spec = make_pyramid((32, 32))
    names = {t.name for t in LoopNest(spec.outputs).tensors}
    assert {f"g{lv}" for lv in range(PYRAMID_LEVELS + 1)} <= names and "out0" in names


def test_pyramid_refuses_sizes_it_cannot_halve():
    with pytest.raises(ValueError, match="multiples of 32"):
        make_pyramid((48, 40))


def test_bench_compile_quick_mode(capsys):
    rows = bench_compile.run(quick=True)
    assert [r["case"] for r in rows] == list(bench_compile.CASES)
    assert all(r["runs"] == 1 and r["median_s"] > 0 and r["median_cpu_s"] > 0 for r in rows)
    assert bench_compile.main(["--quick", "--only", "stencil"]) == 0
    out = capsys.readouterr().out
    assert "stencil" in out and "aim ms" in out
