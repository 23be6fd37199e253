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
  ``tile`` picks the block and warp (or thread) tiles; for a device of ``arch`` sm_90 the
  warpgroup-MMA tree's tiles come first (float16 / bfloat16), those that fit
  ``max_shared_bytes`` (what the candidates are built with: ``autotune`` passes its
  ``build_options``' and the device's arch);
* **direct 2-D convolution** (``Y[b, co, y, x] = sum X[b, ci, y + ry, x + rx] * W[co, ci, ry,
  rx]``, static sizes, ``X`` an input or an element-wise tensor of inputs such as a zero
  padding, the only other tensor): ``loopnest.auto.gpu.direct_conv2d``, its input windows in
  shared memory; ``channels`` and ``pixels`` per thread and ``threads`` per block.

The templates are ``loopnest.auto.gpu.GpuPlan``'s: other contractions (and a matmul no tile
divides) take the reduction template, and a tensor whose template step is refused gets one
thread per output; an external call is a ``SpaceError``. The seed is the templates' defaults:
the benchmark's hand schedules, and what ``build(..., target="cuda", schedule="auto")`` builds.

>>> from te import Buffer, Compute
>>> A = Buffer("A", (1 << 16,), "float32")
>>> space = gpu_space([Compute("B", (1 << 16,), lambda i: A[i] * 2.0)])
>>> space.knob("B.threads").options, space.knob("B.per").options
((64, 128, 256, 512), (1, 2, 4))
"""
from __future__ import annotations

from typing import Any, Sequence

from te.tensor import Tensor

from loopnest.auto.gpu import MMA_TILES, SIMT_TILES, GpuPlan
from loopnest.errors import ScheduleError

from .errors import SpaceError
from .space import Config, ScheduleSpace

__all__ = ["gpu_space", "MMA_TILES", "SIMT_TILES", "CONV_KNOBS", "KNOB_OPTIONS"]

#: the options of each knob of each template (the defaults, ``loopnest.auto.gpu.DEFAULT_KNOBS``,
#: among them: the seed); the matmul's ``tile`` indexes the tiles that divide it
KNOB_OPTIONS = {"elementwise": {"threads": [64, 128, 256, 512], "per": [1, 2, 4]},
                "reduction": {"threads": [32, 64, 128, 256, 512, 1024]},
                "conv": {"channels": [2, 1, 4], "pixels": [1, 2], "threads": [128, 64, 256]}}
#: the convolution's knobs (on an H100 at 1 x 64 x 56 x 56 -> 64: two output channels and one
#: pixel per thread, blocks of 128)
CONV_KNOBS = KNOB_OPTIONS["conv"]


class _GpuTemplate:
    """The schedule function of the CUDA space (picklable data, no closures): the templates of
    ``loopnest.auto.gpu.GpuPlan`` with their knobs declared."""

    def __init__(self, outputs: Sequence[Tensor], arch: str | None = None, max_shared_bytes: int | None = None):
        try:
            self.plan = GpuPlan(list(outputs), arch, max_shared_bytes)
            self.n_tiles = len(self.plan.matmul_tiles()[1]) if self.plan.matmul is not None else 0
        except ScheduleError as exc:
            raise SpaceError(f"{exc}; or pass a schedule function as space=") from None
        self.__name__ = "auto_cuda:" + ",".join(sorted(self.plan.outputs))

    def declare(self, cfg: Config) -> dict[str, dict[str, Any]]:
        knobs: dict[str, dict[str, Any]] = {}
        for name, kind in self.plan.kind_of.items():
            if kind == "matmul":
                knobs[name] = {"tile": cfg.choice(f"{name}.tile", list(range(self.n_tiles)))}
            else:
                knobs[name] = {k: cfg.choice(f"{name}.{k}", options) for k, options in KNOB_OPTIONS[kind].items()}
        return knobs

    def seeds(self, space: ScheduleSpace) -> list[dict[str, Any]]:
        """The templates' defaults (the benchmark's choices): ``schedule="auto"``'s schedule."""
        return [{f"{name}.{k}": v for name, knobs in self.plan.defaults().items() for k, v in knobs.items()}]

    def __call__(self, cfg: Config, nest) -> None:
        knobs = self.declare(cfg)
        if not cfg.defining:
            self.plan.apply(nest, knobs)


def gpu_space(outputs: Sequence[Tensor] | Tensor, arch: str | None = None,
              max_shared_bytes: int | None = None) -> ScheduleSpace:
    """The CUDA search space of the computation of ``outputs`` (see the module docstring) for
    a device of ``arch`` (None: unknown) and kernels built with ``max_shared_bytes``.

    >>> from te import Buffer, Reduce, Sum, cast, float32
    >>> A, B = Buffer("A", (512, 512), "float16"), Buffer("B", (512, 512), "float16")
    >>> C = Reduce("C", (512, 512), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (512,))
    >>> len(gpu_space([C]).knob("C.tile").options), len(gpu_space([C], "sm_90", 227 * 1024).knob("C.tile").options)
    (5, 8)
    """
    if isinstance(outputs, Tensor):
        outputs = [outputs]
    tmpl = _GpuTemplate(list(outputs), arch, max_shared_bytes)
    space = ScheduleSpace(tmpl, list(outputs), name=tmpl.__name__)
    space.set_seeds(tmpl.seeds(space))
    return space
