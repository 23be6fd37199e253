"""bench.gpu_schedules.transpose_gpu(shared=True): the tiled transpose through a padded shared
tile -- one barrier, both sides coalesced -- agrees with numpy on IREval and the host emulation."""
from __future__ import annotations

import numpy as np
import pytest

from bench.gpu_schedules import gpu_nest
from bench.kernels import WORKLOADS
from codegen import build
from codegen.cuda import nvcc_available
from codegen.cuda.emulate import host_compiler, run_on_host


@pytest.mark.parametrize("tile,rows", [(32, 8), (32, 4)])
def test_the_shared_tile_transpose_is_exact(tile, rows):
    spec = WORKLOADS["transpose"].make((64, 96))
    nest = gpu_nest("transpose", spec, tile=tile, rows=rows, shared=True)
    outs, _ = spec.run(build(nest, spec.args, target="ireval"))
    assert spec.error(outs) == 0
    k = build(nest, spec.args, target="cuda")
    assert k.launch_dims() == [("k0_T", (3, 2, 1), (tile, rows, 1))]
    assert "__shared__ __align__(16) float b_A_tile[1056];" in k.source and k.source.count("__syncthreads()") == 1
    if nvcc_available() and host_compiler() is not None:
        t = np.full((96, 64), np.nan, np.float32)
        run_on_host(k, spec.inputs["A"], t)
        np.testing.assert_array_equal(t, spec.inputs["A"].T)


def test_sizes_off_the_tile_are_refused():
    spec = WORKLOADS["transpose"].make((40, 72))
    with pytest.raises(ValueError, match="multiples of the tile 64"):
        gpu_nest("transpose", spec, shared=True)


def test_the_default_takes_the_shared_tile_where_the_sizes_allow():
    big = WORKLOADS["transpose"].make((128, 192))
    assert "b_A_tile" in build(gpu_nest("transpose", big), big.args, target="cuda").source
    odd = WORKLOADS["transpose"].make((40, 72))
    assert "b_A_tile" not in build(gpu_nest("transpose", odd), odd.args, target="cuda").source
