"""bench/gpu.py's entries on a real GPU at small sizes, their outputs checked against numpy.
Skipped without a GPU (or without CuPy and PyCUDA to drive it)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from bench import gpu as bench_gpu
from bench.gpu_schedules import TEST_SIZES, make_matmul_lowp
from bench.kernels import WORKLOADS


@pytest.fixture(scope="module")
def be():
    try:
        return bench_gpu.find_backend()
    except bench_gpu.NoGPU as exc:
        pytest.skip(str(exc))


def _close(got, want, rtol, atol, what):
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol, err_msg=what)


def test_device_copy_copies_and_measures_bandwidth(be):
    row = bench_gpu.entry_device_copy(be, 8 << 20, repeats=3, keep=True)
    np.testing.assert_array_equal(row["output"], np.arange((8 << 20) // 4, dtype=np.float32))
    assert row["correct"] and row["gbs"] > 10


@pytest.mark.parametrize("n", [1 << 16, 100_003])
def test_elementwise_entry_agrees_with_numpy(be, n):
    row = bench_gpu.entry_elementwise(be, n, repeats=3, copy_gbs=1000.0, keep=True)
    spec = WORKLOADS["elementwise"].make(n)
    _close(row["output"], spec.reference(spec.inputs)["Y"], 1e-5, 1e-6, f"elementwise n={n}")
    assert row["correct"] and row["gbs"] > 0 and row["ratio"] == pytest.approx(row["gbs"] / 1000.0)


TILE128 = {"BM": 128, "BN": 128, "TM": 8, "TN": 8}


@pytest.mark.parametrize("n,dtype,params", [(256, "float32", {}), (256, "float32", TILE128),
                                            (128, "float16", TILE128), (96, "float32", {}),
                                            (256, "float16", {}), (256, "bfloat16", {}), (256, "tf32", {})])
def test_matmul_entry_agrees_with_numpy(be, n, dtype, params):
    row = bench_gpu.entry_matmul(be, n, dtype, repeats=3, keep=True, **params)
    spec = WORKLOADS["matmul"].make(n) if dtype in ("float32", "tf32") else make_matmul_lowp(n, dtype)
    want = spec.inputs["A"].astype(np.float64) @ spec.inputs["B"].astype(np.float64)
    tol = (5e-3, 5e-2) if dtype == "tf32" else (1e-4, 1e-3)     # tf32 rounds the operands
    _close(row["output"], want, *tol, f"matmul {n} {dtype} {params}")
    assert row["correct"] and row["tflops"] > 0
    if row.get("ratio") is not None:
        assert row["peer_max_rel_err"] < 1e-2   # the peer computed the same product


def test_tf32_matmul_entry_on_sm90_transposes_b_then_takes_the_warpgroup_tree(be):
    if be.arch() not in ("sm_90", "sm_90a"):
        pytest.skip(f"the warpgroup MMA needs sm_90, the device is {be.arch()}")
    n = 1024
    row = bench_gpu.entry_matmul(be, n, "tf32", repeats=3, keep=True, wgmma=True)
    spec = WORKLOADS["matmul"].make(n)
    want = spec.inputs["A"].astype(np.float64) @ spec.inputs["B"].astype(np.float64)
    _close(row["output"], want, 5e-3, 5e-2, "tf32 warpgroup matmul")
    assert row["correct"] and [name for name, _, _ in row["launch"]] == ["k0_BT", "k0_C"]


@pytest.mark.parametrize("shape", [(64, 1024), (33, 300)])
def test_softmax_entry_agrees_with_numpy(be, shape):
    row = bench_gpu.entry_softmax(be, shape, repeats=3, keep=True)
    spec = WORKLOADS["softmax"].make(shape)
    _close(row["output"], spec.reference(spec.inputs)["Y"], 1e-5, 1e-7, f"softmax {shape}")
    assert row["correct"]


@pytest.mark.parametrize("name", bench_gpu.WORKLOAD_ENTRIES)
def test_workload_entries_agree_with_numpy_and_time_pytorch(be, name):
    row = bench_gpu.entry_workload(be, name, TEST_SIZES[name], repeats=2, torch_compile=False)
    assert row["correct"], row["max_rel_err"]
    if row.get("ratio") is not None:
        assert row["peer"].startswith("PyTorch") and row["peer_s"] > 0


def test_main_writes_the_table_and_json(be, tmp_path, monkeypatch):
    small = {"device_copy": 4 << 20, "elementwise": 1 << 18, "matmul_float32": 256, "matmul_float16": 256,
             "matmul_bfloat16": 256, "matmul_tf32": 256, "softmax": (256, 1024),
             **{name: TEST_SIZES[name] for name in bench_gpu.WORKLOAD_ENTRIES}}
    monkeypatch.setitem(bench_gpu.SIZES, "quick", small)
    assert bench_gpu.main(["--quick", "--repeats", "2", "--no-torch-compile", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "gpu.json").read_text())
    assert [r["name"] for r in data["rows"]] == bench_gpu.ENTRIES
    assert all("error" not in r and r["correct"] for r in data["rows"]), data["rows"]
    assert "matmul_float32" in (tmp_path / "gpu.txt").read_text()
