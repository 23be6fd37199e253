"""The automatic search space for the CUDA target: ``auto_space(outputs, "cuda")``.

Element-wise intermediates are inlined into their readers; each remaining tensor gets a GPU
template with a few knobs:

* **element-wise**: its loops flattened into one, cut into blocks of ``threads`` threads
  that each compute ``per`` elements ``threads`` apart (coalesced);
* **reduction**: one block per output element (its loops flattened), the reduction spread
  over ``threads`` threads and combined as a tree in shared memory
  (``loopnest.auto.gpu.block_reduce``);
* **matmul** (``C[i, j] = sum_k A[i, k] * B[k, j]`` of two inputs, static sizes, the only
  tensor): ``nest.gpu_matmul`` (``loopnest.transforms.gpu_matmul``): float16 / bfloat16 /
  float8 operands on the tensor cores, float32 on the shared-memory register-tiled tree;
  ``tile`` picks the block and warp (or thread) tiles;
* **direct 2-D convolution** (``Y[b, co, y, x] = sum X[b, ci, y + ry, x + rx] * W[co, ci, ry,
  rx]``, static sizes, ``X`` an input or an element-wise tensor of inputs such as a zero
  padding, the only other tensor): ``loopnest.auto.gpu.direct_conv2d``, its input windows in
  shared memory; ``channels`` and ``pixels`` per thread and ``threads`` per block.

Other contractions have no template yet: ``SpaceError`` says so, and a schedule function
passed as ``space=`` tunes them. The first seed is the benchmark's hand schedule.

>>> from te import Buffer, Compute
>>> A = Buffer("A", (1 << 16,), "float32")
>>> space = gpu_space([Compute("B", (1 << 16,), lambda i: A[i] * 2.0)])
>>> space.knob("B.threads").options, space.knob("B.per").options
((64, 128, 256, 512), (1, 2, 4))
"""
from __future__ import annotations

from typing import Any, Sequence

from te.tensor import Tensor

from loopnest.auto.gpu import conv2d_operands
from loopnest.transforms.gpu_matmul import matmul_operands

from .errors import SpaceError
from .space import Config, ScheduleSpace

__all__ = ["gpu_space", "MMA_TILES", "SIMT_TILES", "CONV_KNOBS"]

#: block and warp tiles of the tensor-core matmul, fastest first (measured on an H100 at 4096)
MMA_TILES = [dict(BM=128, BN=128, BK=64, WM=64, WN=32), dict(BM=128, BN=128, BK=64, WM=64, WN=64),
             dict(BM=128, BN=128, BK=32, WM=64, WN=32), dict(BM=64, BN=64, BK=32, WM=32, WN=32),
             dict(BM=128, BN=128, BK=64, WM=32, WN=32)]
#: block and per-thread tiles of the float32 register-tiled matmul, double-buffered, fastest first
#: (on an H100: the first at 4096, the second at 1024; 128-bit loads where the tiles allow)
SIMT_TILES = [dict(BM=128, BN=128, BK=16, TM=8, TN=8, stages=2, vector=4),
              dict(BM=64, BN=64, BK=16, TM=4, TN=4, stages=2, vector=4),
              dict(BM=128, BN=128, BK=8, TM=8, TN=8, stages=2), dict(BM=64, BN=64, BK=8, TM=4, TN=4, stages=2),
              dict(BM=128, BN=64, BK=8, TM=8, TN=4, stages=2), dict(BM=32, BN=32, BK=8, TM=2, TN=2, stages=2)]

#: the knobs of the direct convolution and their options, the benchmark's choice first (on an
#: H100 at 1 x 64 x 56 x 56 -> 64: two output channels and one pixel per thread, blocks of 128)
CONV_KNOBS = {"channels": [2, 1, 4], "pixels": [1, 2], "threads": [128, 64, 256]}


def _int(d) -> int:
    return d if isinstance(d, int) else int(d.value)


class _GpuTemplate:
    """The schedule function of the CUDA space (picklable data, no closures)."""

    def __init__(self, outputs: Sequence[Tensor]):
        from loopnest import LoopNest
        from loopnest.auto import classify
        nest = LoopNest(list(outputs))
        self.tensors = list(nest.tensors)
        self.outputs = {t.name for t in outputs}
        self.kinds = {t.name: classify(t) for t in self.tensors}
        self.conv = next((t for t in self.tensors if self._is_conv(t)), None)
        window = conv2d_operands(self.conv)[0].name if self.conv is not None else None
        self.inlined = [t.name for t in self.tensors if t.name not in self.outputs and t.name != window
                        and self.kinds[t.name] == "elementwise"]
        self.kept = [t for t in self.tensors if t.name not in self.inlined]
        self.matmul = None
        for t in self.kept:
            kind = self.kinds[t.name]
            if kind == "extern":
                raise SpaceError(f"tensor {t.name} is an external call, which the CUDA backend does not run")
            if t is self.conv:
                continue
            if kind == "contraction" or (kind == "reduction" and matmul_operands(t)):
                if matmul_operands(t) is None or len(self.tensors) != 1:
                    raise SpaceError(f"tensor {t.name} is a contraction that is neither a lone matmul "
                                     "(C[i, j] = sum_k A[i, k] * B[k, j] of two inputs, static sizes) nor a lone direct "
                                     "2-D convolution (Y[b, co, y, x] = sum X[b, ci, y + ry, x + rx] * W[co, ci, ry, rx]); "
                                     "the CUDA space has no template for it yet: pass a schedule function as space=")
                self.matmul = t
        self.__name__ = "auto_cuda:" + ",".join(sorted(self.outputs))

    def _is_conv(self, t: Tensor) -> bool:
        """Whether ``t`` is a direct convolution this space schedules: an output, the only tensor
        but for its window when that is an element-wise tensor of inputs (a zero padding)."""
        ops = conv2d_operands(t) if t.name in self.outputs else None
        if ops is None:
            return False
        window = ops[0]
        others = [u for u in self.tensors if u is not t]
        if not others:
            return True
        return (len(others) == 1 and others[0].name == window.name and window.name not in self.outputs
                and self.kinds[window.name] == "elementwise" and not any(isinstance(b, Tensor) for b in window.inputs()))

    def _matmul_tiles(self) -> tuple[str, list[dict]]:
        A, B, _ = matmul_operands(self.matmul)
        m, k = (_int(d) for d in A.shape)
        n = _int(self.matmul.dims[1])
        lowp = str(A.dtype) in ("float16", "bfloat16", "float8_e4m3", "float8_e5m2") and A.dtype == B.dtype
        tiles = MMA_TILES if lowp else SIMT_TILES
        ok = [c for c in tiles if m % c["BM"] == 0 and n % c["BN"] == 0 and k % c["BK"] == 0]
        if not ok:
            raise SpaceError(f"matmul {self.matmul.name} ({m} x {n} x {k}): no {'tensor-core' if lowp else 'SIMT'} "
                             f"tile divides it; the smallest is {tiles[-1]}")
        return ("mma" if lowp else "simt"), ok

    def declare(self, cfg: Config) -> dict[str, dict[str, Any]]:
        knobs: dict[str, dict[str, Any]] = {}
        if self.conv is not None:
            name = self.conv.name
            knobs[name] = {k: cfg.choice(f"{name}.{k}", options) for k, options in CONV_KNOBS.items()}
            return knobs
        if self.matmul is not None:
            kind, tiles = self._matmul_tiles()
            knobs[self.matmul.name] = {"kind": kind, "tile": cfg.choice(f"{self.matmul.name}.tile",
                                                                        list(range(len(tiles)))), "tiles": tiles}
            return knobs
        for t in self.kept:
            if self.kinds[t.name] == "elementwise":
                knobs[t.name] = {"threads": cfg.choice(f"{t.name}.threads", [64, 128, 256, 512]),
                                 "per": cfg.choice(f"{t.name}.per", [1, 2, 4])}
            else:
                knobs[t.name] = {"threads": cfg.choice(f"{t.name}.threads", [32, 64, 128, 256, 512, 1024])}
        return knobs

    def seeds(self, space: ScheduleSpace) -> list[dict[str, Any]]:
        """The benchmark's choices: 256 threads of 4 elements, 256 threads per reduction row,
        the fastest matmul tile, the first option of each convolution knob."""
        if self.conv is not None:
            return [{f"{self.conv.name}.{k}": options[0] for k, options in CONV_KNOBS.items()}]
        out: dict[str, Any] = {}
        names = {kn.name for kn in space.knobs}
        for n, v in ((f"{t.name}.{k}", val) for t in self.kept for k, val in (("threads", 256), ("per", 4),
                                                                              ("tile", 0))):
            if n in names and v in space.knob(n).options:
                out[n] = v
        return [out]

    def __call__(self, cfg: Config, nest) -> None:
        from loopnest.auto.gpu import block_reduce, cache_rows, direct_conv2d, thread_strided

        knobs = self.declare(cfg)
        if cfg.defining:
            return
        if self.matmul is not None:
            self._schedule_matmul(nest, knobs[self.matmul.name])
            return
        if self.conv is not None:
            direct_conv2d(nest, self.conv, **knobs[self.conv.name])
            return
        for name in self.inlined:
            nest.compute_inline(nest.buffer(name))
        for t in self.kept:
            k = knobs[t.name]
            loops = nest.get_loops_for(t)
            n_out = len(t.dims)
            outer = loops[:n_out]
            if len(outer) > 1:
                outer = [nest.flatten(outer)]
            if self.kinds[t.name] == "elementwise":
                if not outer:
                    continue
                blocks, inner = nest.split_with_mask(outer[0], k["threads"] * k["per"])
                nest.set_gpu_block_index(blocks, 0)
                thread_strided(nest, inner, k["threads"])
            else:
                if outer:
                    nest.set_gpu_block_index(outer[0], 0)
                parts = block_reduce(nest, nest.buffer(t.name), k["threads"])
                if outer:
                    cache_rows(nest, parts, outer[0])

    def _schedule_matmul(self, nest, k: dict) -> None:
        nest.gpu_matmul(tensor_cores=k["kind"] == "mma", **k["tiles"][k["tile"]])


def gpu_space(outputs: Sequence[Tensor] | Tensor) -> ScheduleSpace:
    """The CUDA search space of the computation of ``outputs`` (see the module docstring)."""
    if isinstance(outputs, Tensor):
        outputs = [outputs]
    tmpl = _GpuTemplate(list(outputs))
    space = ScheduleSpace(tmpl, list(outputs), name=tmpl.__name__)
    space.set_seeds(tmpl.seeds(space))
    return space
