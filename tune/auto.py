"""The automatic search space: a schedule template chosen from the shape of the computation.

``auto_space(outputs)`` classifies every tensor of the nest:

- **contraction** (a reduction with at least two output dimensions and an operand that
  does not depend on the innermost one, e.g. matmul, conv2d): separate the initialisation
  from the accumulation (``distribute``), ``tile`` the two innermost output loops, split
  the largest reduction loop, choose a loop order among a few register/cache-blocking
  orders, vectorize the innermost loop, unroll the one around it, parallelize the
  outermost, and optionally accumulate in a local tile (``cache_accesses``);
- **reduction** (e.g. the row max and sum of softmax): parallelize the outer loop, split
  and unroll the reduction loop;
- **elementwise**: optionally flatten the loops, split the innermost by a vector width
  and vectorize it, parallelize the outermost.

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

from te.expr import IntImm, Load, Var, walk
from te.tensor import Tensor

from .errors import SpaceError
from .space import Config, ScheduleSpace, split_candidates

__all__ = ["auto_space", "classify", "CONTRACTION_ORDERS"]

# loop orders of a tiled contraction: X, Y = outer tile loops; x, y = inner tile loops;
# K = outer part of the split reduction loop (with the other reduction loops); k = its inner part
CONTRACTION_ORDERS = ("XYKkxy", "XYKxky", "XKYkxy", "XYxKky")
VECTOR_WIDTHS = (4, 8, 16)


def _extent(d) -> int | None:
    return d.value if isinstance(d, IntImm) else None


def _uses(e, v: Var) -> bool:
    found = []
    walk(e, lambda n: found.append(1) if n is v else None)
    return bool(found)


def classify(t: Tensor) -> str:
    """``"contraction"``, ``"reduction"`` or ``"elementwise"``."""
    if not t.is_reduction:
        return "elementwise"
    if len(t.args) >= 2:
        loads: list[Load] = []
        walk(t.body, lambda n: loads.append(n) if isinstance(n, Load) else None)
        last = t.args[-1]
        if len(loads) >= 2 and any(not any(_uses(i, last) for i in ld.indices) for ld in loads):
            return "contraction"
    return "reduction"


def _tiles(extent: int | None, top: int) -> list[int]:
    return split_candidates(extent if extent is not None else 1 << 20, max_factor=top, divisors_only=True) \
        if extent is not None else [1, 2, 4, 8, 16, 32]


class _Template:
    """The schedule function of an automatic space (picklable data, no closures)."""

    def __init__(self, outputs: Sequence[Tensor], target: str):
        from loopnest import LoopNest
        self.target = target
        nest = LoopNest(list(outputs))
        self.tensors: list[Tensor] = list(nest.tensors)
        self.outputs = {t.name for t in outputs}
        self.kinds = {t.name: classify(t) for t in self.tensors}
        consumers: dict[str, list[str]] = {t.name: [] for t in self.tensors}
        for t in self.tensors:
            for b in t.inputs():
                if b.name in consumers:
                    consumers[b.name].append(t.name)
        self.consumers = consumers
        # intermediates whose placement is tuned: elementwise, read by exactly one tensor
        self.placeable = [t for t in self.tensors if t.name not in self.outputs and self.kinds[t.name] == "elementwise"]
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
            if kind == "contraction":
                red = [_extent(d) for d in t.reduce_dims]
                kk = max(range(len(red)), key=lambda r: red[r] or 0)
                k["tile_x"] = cfg.split(f"{t.name}.tile_x", None, _tiles(dims[-2], 64))
                k["tile_y"] = cfg.split(f"{t.name}.tile_y", None, _tiles(dims[-1], 128))
                k["tile_k"] = cfg.split(f"{t.name}.tile_k", None, _tiles(red[kk], 64))
                k["order"] = cfg.choice(f"{t.name}.order", CONTRACTION_ORDERS)
                k["vec"] = cfg.flag(f"{t.name}.vec")
                k["unroll"] = cfg.flag(f"{t.name}.unroll")
                k["par"] = cfg.flag(f"{t.name}.par")
                k["cache"] = cfg.flag(f"{t.name}.cache")
                k["kk"] = kk
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
                    k["vec"] = cfg.choice(f"{t.name}.vec", [0] + [w for w in VECTOR_WIDTHS if inner is None or
                                                                   w <= max(inner, 1) or len(dims) >= 2])
                    k["par"] = cfg.flag(f"{t.name}.par")
        return knobs

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
            if t.name in placed_at:
                continue    # scheduled where its consumer computes it
            if kind == "contraction":
                outer = self._contraction(nest, t, k)
            elif kind == "reduction":
                outer = self._reduction(nest, t, k)
            else:
                outer = self._elementwise(nest, t, k)
            for name, consumer in placed_at.items():
                if consumer == t.name and outer is not None:
                    nest.compute_at(nest.buffer(name), outer)

    @staticmethod
    def _separate_init(nest, t: Tensor) -> list:
        """Distribute the output loops so the accumulation of ``t`` is a perfect nest; its loops."""
        loops = nest.get_loops_for(t)
        n_spatial = len(t.args)
        for d in range(n_spatial - 1, -1, -1):
            loops = nest.get_loops_for(t)
            if len(loops[d].stmt.body.stmts) > 1:
                nest.distribute(loops[d])
        return nest.get_loops_for(t)

    def _contraction(self, nest, t: Tensor, k: dict):
        loops = self._separate_init(nest, t)
        ns = len(t.args)
        spatial, red = loops[:ns], loops[ns:]
        xo, yo, xi, yi = nest.tile(spatial[-2], spatial[-1], k["tile_x"], k["tile_y"])
        ko, ki, tail = nest.split_with_tail(red[k["kk"]], k["tile_k"])
        if tail is not None:
            from loopnest import ScheduleError
            raise ScheduleError(f"tile_k {k['tile_k']} does not divide the reduction loop of {t.name}")
        # reduction loops keep their relative order (reordering them would reassociate the sum)
        kk = k["kk"]
        groups = {"X": [xo], "Y": [yo], "x": [xi], "y": [yi], "K": list(red[:kk]) + [ko],
                  "k": [ki] + list(red[kk + 1:])}
        current = nest.get_loops_for(t)
        wanted = list(spatial[:-2]) + [l for ch in k["order"] for l in groups[ch]]
        pos = {l.var: j for j, l in enumerate(current)}
        perm = [pos[l.var] for l in wanted]
        if perm != list(range(len(perm))):
            nest.reorder(current, perm)
        chain = nest.get_loops_for(t)
        if k["cache"]:
            first_red = next(j for j, l in enumerate(chain) if any(l.var is r.var for r in groups["K"] + groups["k"]))
            if first_red > 0:
                # the compute loops keep their handles (get_loops_for would now find the copy-out loops)
                nest.cache_accesses(nest.buffer(t.name), f"{t.name}_local", chain[first_red - 1])
        if k["vec"]:
            nest.vectorize(chain[-1])
        if k["unroll"] and len(chain) >= 2:
            nest.unroll(chain[-2])
        if k["par"]:
            nest.parallelize(chain[0])
        return chain[0]

    @staticmethod
    def _reduction(nest, t: Tensor, k: dict):
        loops = nest.get_loops_for(t)
        f = k.get("unroll_k", 0)
        if f:
            _, inner, _ = nest.split_with_tail(loops[-1], f)
            nest.unroll(inner)
        if k.get("par"):
            nest.parallelize(loops[0])
        return loops[0] if loops else None

    @staticmethod
    def _elementwise(nest, t: Tensor, k: dict):
        loops = nest.get_loops_for(t)
        if k.get("flatten"):
            loops = [nest.flatten(loops)]
        w = k.get("vec", 0)
        outer_handle = loops[0]
        if w:
            outer, inner, _tail = nest.split_with_tail(loops[-1], w)
            nest.vectorize(inner)
            if len(loops) == 1:
                outer_handle = outer
        if k.get("par"):
            nest.parallelize(outer_handle)
        return outer_handle


def auto_space(outputs: Sequence[Tensor] | Tensor, target: str = "llvm") -> ScheduleSpace:
    """The automatic search space of the computation of ``outputs`` (CPU targets)."""
    if isinstance(outputs, Tensor):
        outputs = [outputs]
    if target == "cuda":
        raise SpaceError("auto_space schedules for CPU targets (llvm, ireval); for cuda, write a schedule "
                         "function that binds GPU blocks and threads and pass it as space=")
    tmpl = _Template(list(outputs), target)
    return ScheduleSpace(tmpl, list(outputs), name=tmpl.__name__)
