"""The automatic search space: a schedule template chosen from the shape of the computation.

``auto_space(outputs)`` classifies every tensor of the nest:

- **contraction** (a reduction with at least two output dimensions and an operand that
  does not depend on the innermost one, e.g. matmul, conv2d): a register-blocked
  schedule. The initialisation is separated from the accumulation (``distribute``); a
  register tile of rows x native vectors (x output channels, for three or more output
  dimensions) accumulates in a local buffer that LLVM keeps in registers while the
  reduction runs, the largest reduction loop optionally cut into slices; knobs choose the
  tile sizes, the slice, the order of the tile loops, packing the operand that does not
  follow the rows, unrolling the small reduction loops (a filter window) and
  parallelizing; rows and columns left over by the tiles get nests of their own. A
  convolution whose columns leave a partial vector (``loopnest.auto.channel_params``) also
  gets the choice of vectorizing its output channels instead (``along``: a tile of
  ``vec_c`` vectors of channels x ``cols`` columns, ``templates.channel_contraction``). Seed
  points (``ScheduleSpace.seeds``) are measured first;
- **reduction** (e.g. the row max and sum of softmax): parallelize the outer loop, split
  and unroll the reduction loop;
- **elementwise**: optionally flatten the loops, split the innermost by a vector width
  and vectorize it, parallelize the outermost;
- **extern** (computed by an external call, ``te.extern``): nothing to schedule, and the
  tensors it reads keep their place.

The schedules themselves are ``loopnest.auto.templates`` (shared with ``LoopNest.auto_schedule``);
this module declares their parameters as knobs. Vector widths, the contraction's lanes and
the seeds' register tiles come from the target CPU (``loopnest.Target``, the host by default).

Intermediate elementwise tensors get a placement knob (kept, inlined, or computed at the
consumer's outer loop). Every knob is declared before any transform, with first options
that schedule nothing, so the define pass always succeeds; a point whose schedule is
illegal raises ``ScheduleError`` and the tuner just records it as such.

>>> from te import Buffer, Compute
>>> A = Buffer("A", (64, 32), "float32")
>>> B = Compute("B", (64, 32), lambda i, j: A[i, j] * 2.0)
>>> space = auto_space([B])
>>> [k.name for k in space.knobs]
['B.flatten', 'B.vec', 'B.par']
"""
from __future__ import annotations

from typing import Any, Sequence

from loopnest.auto import (channel_params, classify, consumers_of, const_extent as _extent, register_tile,
                           sliced_loop as _sliced_loop)
from loopnest.auto import templates
from loopnest.target import Target, resolve_target
from te.extern import ExternTensor
from te.tensor import Tensor

from .errors import SpaceError
from .space import Config, ScheduleSpace

__all__ = ["auto_space", "classify", "vector_widths", "CONTRACTION_ORDERS"]

# orders of the tile loops of a contraction: i = row tiles, j = vector (column) tiles,
# K = reduction slices (with the reduction loops before the sliced one)
CONTRACTION_ORDERS = ("jKi", "ijK", "Kji", "iKj")
_ORDERS_WITHOUT_K = ("jKi", "ijK")    # the distinct orders when there are no K loops


def vector_widths(cpu: Target, dtype="float32") -> tuple[int, ...]:
    """The vector widths an element-wise tensor may take: half, one and two native vectors.

    >>> vector_widths(Target(vector_bits=256)), vector_widths(Target(vector_bits=512))
    ((4, 8, 16), (8, 16, 32))
    """
    lanes = cpu.lanes(dtype)
    return tuple(w for w in (lanes // 2, lanes, 2 * lanes) if w >= 2)


class _Template:
    """The schedule function of an automatic space (picklable data, no closures)."""

    def __init__(self, outputs: Sequence[Tensor], target: str, cpu: Target):
        from loopnest import LoopNest
        self.target = target
        self.cpu = cpu
        nest = LoopNest(list(outputs))
        self.tensors: list[Tensor] = list(nest.tensors)
        self.outputs = {t.name for t in outputs}
        self.kinds = {t.name: classify(t) for t in self.tensors}
        self.consumers = consumers_of(self.tensors)
        # intermediates whose placement is tuned: elementwise, read by exactly one tensor
        extern_reads = {b.name for t in self.tensors if isinstance(t, ExternTensor) for b in t.extern_inputs}
        self.placeable = [t for t in self.tensors if t.name not in self.outputs and self.kinds[t.name] == "elementwise"
                          and t.name not in extern_reads]     # an external call reads its inputs whole
        self.__name__ = "auto:" + ",".join(sorted(self.outputs))

    # -- knobs ----------------------------------------------------------------------------
    def declare(self, cfg: Config) -> dict[str, dict[str, Any]]:
        knobs: dict[str, dict[str, Any]] = {}
        for t in self.placeable:
            opts = ["root", "inline"] + (["at"] if len(self.consumers[t.name]) == 1 else [])
            knobs[t.name] = {"place": cfg.choice(f"{t.name}.place", opts)}
        for t in self.tensors:
            k = knobs.setdefault(t.name, {})
            kind = self.kinds[t.name]
            dims = [_extent(d) for d in t.dims]
            if kind == "extern":
                continue
            if kind == "contraction":
                k.update(self._contraction_knobs(cfg, t, dims))
            elif kind == "reduction":
                red = [_extent(d) for d in t.reduce_dims]
                k["unroll_k"] = cfg.choice(f"{t.name}.unroll_k", [0] + [f for f in (2, 4, 8) if (red[-1] or 8) >= f])
                if dims:
                    k["par"] = cfg.flag(f"{t.name}.par")
            else:
                if len(dims) >= 2:
                    k["flatten"] = cfg.flag(f"{t.name}.flatten")
                inner = dims[-1] if dims else None
                if dims:
                    k["vec"] = cfg.choice(f"{t.name}.vec", [0] + [w for w in vector_widths(self.cpu, t.dtype)
                                                                   if inner is None or
                                                                   w <= max(inner, 1) or len(dims) >= 2])
                    k["par"] = cfg.flag(f"{t.name}.par")
        return knobs

    def _contraction_knobs(self, cfg: Config, t: Tensor, dims: list) -> dict[str, Any]:
        """Knobs of the register-blocked contraction schedule.

        The last output dimension is cut into tiles of ``vec_n`` native vectors (``lanes``
        elements each), the second-last into tiles of ``reg_i`` rows (leftover rows get a
        vectorized nest of their own) and, for three or more output dimensions, the
        third-last into tiles of ``reg_o``; the largest reduction loop is cut into slices of
        ``kc`` (0: not cut). The tile loops run in ``order`` (``i``: row tiles, ``j``: vector
        tiles, ``K``: reduction slices), then the rest of the reduction, then the register
        tile: its rows and vectors unrolled, its lanes vectorized, accumulated in a local
        buffer (``cache_accesses``) that LLVM keeps in registers. ``pack`` copies the operand
        that does not follow the rows into a contiguous buffer above the row tile loop,
        ``unroll_r`` unrolls the small reduction loops but the innermost, ``par`` parallelizes the outermost
        tile loop that is not a reduction (one block of it per core where the cores divide it).
        """
        name = t.name
        red = [_extent(d) for d in t.reduce_dims]
        kk = _sliced_loop(t)
        ns = len(dims)
        lanes = self.cpu.lanes(t.dtype) if t.dtype.is_float else 1
        k: dict[str, Any] = {"kk": kk, "lanes": lanes, "reg_o": 1, "n_small_red": len(red) - kk - 1}
        if ns >= 3:
            k["reg_o"] = cfg.split(f"{name}.reg_o", None, [f for f in (1, 2, 4, 8) if dims[-3] and dims[-3] % f == 0])
        k["reg_i"] = cfg.split(f"{name}.reg_i", None, [f for f in (1, 2, 3, 4, 6, 8) if f <= (dims[-2] or 8)])
        # tiles that divide the width; only when none does, tiles with leftover columns
        width = dims[-1] or 1 << 20
        fits = [v for v in (1, 2, 3, 4) if lanes * v <= width] if lanes > 1 else []
        vec_opts = [v for v in fits if width % (lanes * v) == 0] or fits
        k["vec_n"] = cfg.choice(f"{name}.vec_n", vec_opts or [0])
        kcs = [0] + [c for c in (16, 32, 64, 128, 256, 512) if red[kk] and red[kk] % c == 0 and c < red[kk]]
        k["kc"] = cfg.choice(f"{name}.kc", kcs)
        # without reduction slices or reduction loops before the sliced one there are no K
        # loops: "Kji" would schedule what "jKi" does, "iKj" what "ijK" does
        k["order"] = cfg.choice(f"{name}.order", CONTRACTION_ORDERS if kk or len(kcs) > 1 else _ORDERS_WITHOUT_K)
        k["pack_buffer"] = templates.pack_candidate(t, [p.name for p in self.placeable])
        k["pack"] = cfg.flag(f"{name}.pack") if k["pack_buffer"] else False
        k["unroll_r"] = cfg.flag(f"{name}.unroll_r") if kk + 1 < len(red) else False
        k["par"] = cfg.flag(f"{name}.par")
        k["cores"] = self.cpu.cores          # parallel tile loops in one block per core (templates.parallel_blocks)
        if channel_params(t, self.cpu) is not None:
            vectors = dims[-3] // lanes
            k["along"] = cfg.choice(f"{name}.along", ["columns", "channels"])
            k["vec_c"] = cfg.choice(f"{name}.vec_c", [v for v in (1, 2, 4) if vectors % v == 0])
            k["cols"] = cfg.choice(f"{name}.cols", [c for c in range(4, 17) if dims[-1] % c == 0])
        return k

    def seeds(self, space: ScheduleSpace) -> list[dict[str, Any]]:
        """Starting points the strategies measure first: first, for a convolution whose columns
        leave a partial vector, the automatic schedule's tile along the output channels
        (``loopnest.auto.channel_params``); then the register tile that fills the
        target's vector registers (``loopnest.auto.register_tile``: 6 x 2 with 16 registers,
        6 x 4 with 32), then tiles of 8 to 12 vector
        accumulators (6 rows x 2 vectors with the column tiles outermost, as BLIS-style
        matmul kernels, with reduction slices of 256; 4 x 2 x 1 and 4 x 3 x 1 over three
        dimensions with the row tiles outermost, as direct convolutions, with input-channel
        slices of 16 that keep the input rows they read in L1), the packed operand,
        parallel outer loops, small reduction loops unrolled; elementwise tensors vectorized
        and parallel. Values a knob does not offer are left out."""
        names = {kn.name for kn in space.knobs}

        def pick(name, *wanted):
            if name not in names:
                return {}
            opts = space.knob(name).options
            return next(({name: w} for w in wanted if w in opts), {})

        common: dict[str, Any] = {}
        for t in self.tensors:
            n = t.name
            if self.kinds[n] == "elementwise":
                common.update(pick(f"{n}.vec", 8, 4))
            common.update(pick(f"{n}.par", True))
            common.update(pick(f"{n}.unroll_r", True))
            common.update(pick(f"{n}.pack", True))
        out = []
        channels = {t.name: channel_params(t, self.cpu) for t in self.tensors if self.kinds[t.name] == "contraction"}
        if any(channels.values()):      # first the automatic schedule's tile along the channels
            v = dict(common)
            for n, c in channels.items():
                if c is not None:
                    v.update({f"{n}.along": "channels", **pick(f"{n}.vec_c", c["vec_c"]),
                              **pick(f"{n}.cols", c["cols"])})
            out.append(v)
        rows, vecs = register_tile(self.cpu)
        tiles = [(1, rows, vecs, "jKi", 256), (1, 6, 2, "jKi", 256), (4, 2, 1, "iKj", 16), (4, 2, 1, "ijK", 0),
                 (4, 3, 1, "iKj", 16), (1, 4, 2, "jKi", 256), (2, 4, 1, "ijK", 0)]
        if self.cpu.vector_registers >= 32:
            tiles.insert(3, (4, 4, 1, "ijK", 0))
        for reg_o, reg_i, vec_n, order, kc in tiles:
            v = dict(common)
            for t in self.tensors:
                n = t.name
                if self.kinds[n] != "contraction":
                    continue
                v.update(pick(f"{n}.reg_o", reg_o))
                v.update(pick(f"{n}.reg_i", reg_i))
                v.update(pick(f"{n}.vec_n", *range(vec_n, 0, -1)))
                v.update(pick(f"{n}.kc", kc, 256, 0))
                if not v.get(f"{n}.kc") and not _sliced_loop(t):
                    # no K loops: the order without K ("iKj" schedules what "ijK" does)
                    order = next(o for o in _ORDERS_WITHOUT_K if o.replace("K", "") == order.replace("K", ""))
                v.update(pick(f"{n}.order", order))
            if v not in out:
                out.append(v)
        return out

    # -- the schedule -----------------------------------------------------------------------
    def __call__(self, cfg: Config, nest) -> None:
        knobs = self.declare(cfg)
        if cfg.defining:
            return
        placed_at: dict[str, str] = {}
        for t in self.placeable:
            place = knobs[t.name]["place"]
            if place == "inline":
                nest.compute_inline(t)
            elif place == "at":
                placed_at[t.name] = self.consumers[t.name][0]
        for t in self.tensors:
            if t.name in knobs and knobs[t.name].get("place") == "inline":
                continue
            k = knobs[t.name]
            kind = self.kinds[t.name]
            if t.name in placed_at or kind == "extern":
                continue    # scheduled where its consumer computes it / one call, no loops
            if kind == "contraction":
                along_channels = k.get("along") == "channels"
                outer = (templates.channel_contraction if along_channels else templates.contraction)(nest, t, k)
            elif kind == "reduction":
                outer = templates.reduction(nest, t, k)
            else:
                outer = templates.elementwise(nest, t, k)
            for name, consumer in placed_at.items():
                if consumer == t.name and outer is not None:
                    nest.compute_at(nest.buffer(name), outer)

def auto_space(outputs: Sequence[Tensor] | Tensor, target: str | Target = "llvm", *, arch: str | None = None,
               max_shared_bytes: int | None = None) -> ScheduleSpace:
    """The automatic search space of the computation of ``outputs``: for the CPU targets here,
    for ``"cuda"`` the GPU templates of ``tune.gpu_space`` (for a device of ``arch`` and
    kernels built with ``max_shared_bytes``: the warpgroup-MMA tiles on sm_90).

    ``target`` is a codegen target name (``"llvm"``, ``"ireval"``: the widths and tiles of
    this machine) or a ``loopnest.Target`` describing another CPU (vector width and
    registers: the vector widths, the contraction lanes and the seeds' register tiles).

    >>> from te import Buffer, Compute
    >>> A = Buffer("A", (64, 32), "float32")
    >>> space = auto_space([Compute("B", (64, 32), lambda i, j: A[i, j] * 2.0)], Target(vector_bits=512))
    >>> space.knob("B.vec").options
    (0, 8, 16, 32)
    """
    if isinstance(outputs, Tensor):
        outputs = [outputs]
    if target == "cuda":
        from .gpu_space import gpu_space
        return gpu_space(outputs, arch, max_shared_bytes)
    cpu = resolve_target(target)
    tmpl = _Template(list(outputs), target if isinstance(target, str) else "llvm", cpu)
    space = ScheduleSpace(tmpl, list(outputs), name=tmpl.__name__)
    space.set_seeds(tmpl.seeds(space))
    return space
