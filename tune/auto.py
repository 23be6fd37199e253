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
  parallelizing; rows and columns left over by the tiles get nests of their own. Seed
  points (``ScheduleSpace.seeds``) are measured first;
- **reduction** (e.g. the row max and sum of softmax): parallelize the outer loop, split
  and unroll the reduction loop;
- **elementwise**: optionally flatten the loops, split the innermost by a vector width
  and vectorize it, parallelize the outermost;
- **extern** (computed by an external call, ``te.extern``): nothing to schedule, and the
  tensors it reads keep their place.

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

from te.expr import IntImm
from te.queries import loads, uses_var
from te.extern import ExternTensor
from te.tensor import Tensor

from .errors import SpaceError
from .space import Config, ScheduleSpace

__all__ = ["auto_space", "classify", "CONTRACTION_ORDERS"]

# orders of the tile loops of a contraction: i = row tiles, j = vector (column) tiles,
# K = reduction slices (with the reduction loops before the sliced one)
CONTRACTION_ORDERS = ("jKi", "ijK", "Kji", "iKj")
_ORDERS_WITHOUT_K = ("jKi", "ijK")    # the distinct orders when there are no K loops
VECTOR_WIDTHS = (4, 8, 16)


def _extent(d) -> int | None:
    return d.value if isinstance(d, IntImm) else None


def _sliced_loop(t: Tensor) -> int:
    """The position of a contraction's largest reduction loop (the one cut into slices)."""
    red = [_extent(d) for d in t.reduce_dims]
    return max(range(len(red)), key=lambda r: red[r] or 0)


def classify(t: Tensor) -> str:
    """``"contraction"``, ``"reduction"``, ``"elementwise"`` or ``"extern"`` (computed by an
    external call, ``te.extern``: no loops to schedule)."""
    if isinstance(t, ExternTensor):
        return "extern"
    if not t.is_reduction:
        return "elementwise"
    if len(t.args) >= 2:
        body_loads = loads(t.body)
        last = t.args[-1]
        if len(body_loads) >= 2 and any(not any(uses_var(i, last) for i in ld.indices) for ld in body_loads):
            return "contraction"
    return "reduction"


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
                    k["vec"] = cfg.choice(f"{t.name}.vec", [0] + [w for w in VECTOR_WIDTHS if inner is None or
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
        ``unroll_r`` unrolls the small reduction loops, ``par`` parallelizes the outermost
        tile loop that is not a reduction.
        """
        name = t.name
        red = [_extent(d) for d in t.reduce_dims]
        kk = _sliced_loop(t)
        ns = len(dims)
        lanes = max(1, 256 // t.dtype.bits) if t.dtype.is_float else 1
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
        k["pack_buffer"] = self._pack_candidate(t)
        k["pack"] = cfg.flag(f"{name}.pack") if k["pack_buffer"] else False
        k["unroll_r"] = cfg.flag(f"{name}.unroll_r") if kk + 1 < len(red) else False
        k["par"] = cfg.flag(f"{name}.par")
        return k

    def _pack_candidate(self, t: Tensor) -> str | None:
        """The operand of ``t`` whose loads do not use the second-last output index (matmul's
        B), if it is a buffer the nest keeps (an input or a tensor computed at the root)."""
        row = t.args[-2]
        for ld in loads(t.body):
            if not any(uses_var(i, row) for i in ld.indices) and ld.buffer.name not in {p.name for p in self.placeable}:
                return ld.buffer.name
        return None

    def seeds(self, space: ScheduleSpace) -> list[dict[str, Any]]:
        """Starting points the strategies measure first: register tiles of 8 to 12 vector
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
        for reg_o, reg_i, vec_n, order, kc in ((1, 6, 2, "jKi", 256), (4, 2, 1, "iKj", 16), (4, 2, 1, "ijK", 0),
                                               (4, 3, 1, "iKj", 16), (1, 4, 2, "jKi", 256), (2, 4, 1, "ijK", 0)):
            v = dict(common)
            for t in self.tensors:
                n = t.name
                if self.kinds[n] != "contraction":
                    continue
                v.update(pick(f"{n}.reg_o", reg_o))
                v.update(pick(f"{n}.reg_i", reg_i))
                v.update(pick(f"{n}.vec_n", vec_n, 1))
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
        """The register-blocked schedule (see ``_contraction_knobs``); returns the outermost loop."""
        from loopnest import ScheduleError
        loops = self._separate_init(nest, t)
        ns = len(t.args)
        spatial, red = list(loops[:ns]), list(loops[ns:])
        kk = k["kk"]
        # 1. the vector dimension (last spatial): tiles of vec_n native vectors
        lanes, vec_n = k["lanes"], k["vec_n"]
        j_tile = j_vec = j_lane = None
        if vec_n:
            j_tile, jin, j_rest = nest.split_with_tail(spatial[-1], lanes * vec_n)
            j_vec, j_lane, _ = nest.split_with_tail(jin, lanes)
            if j_rest is not None:
                spatial = self._leftover_columns(nest, t, spatial, j_rest, len(red), k["par"])
        else:
            j_tile = spatial[-1]
        # 2. the register tile of the third-last spatial dimension (divisors only)
        o_tile = o_in = None
        if ns >= 3 and k["reg_o"] > 1:
            o_tile, o_in, _ = nest.split_with_tail(spatial[-3], k["reg_o"])
        # 3. the reduction slice
        if k["kc"]:
            ko, ki, tail = nest.split_with_tail(red[kk], k["kc"])
            if tail is not None:
                raise ScheduleError(f"kc {k['kc']} does not divide the reduction loop of {t.name}")
        else:
            ko, ki = None, red[kk]
        # 4. the register tile of the second-last spatial dimension; rows left over get a nest of
        #    their own, register-blocked the same way (``_leftover_rows``)
        i_tile, i_in, i_tail = nest.split_with_tail(spatial[-2], k["reg_i"]) if k["reg_i"] > 1 \
            else (spatial[-2], None, None)
        outer_fixed = list(spatial[:-3]) + ([o_tile if o_tile is not None else spatial[-3]] if ns >= 3 else [])
        tail_outer = None
        if i_tail is not None:
            # give the main rows and the leftover rows loops of their own (innermost first)
            tail_first = tail_outer = i_tail
            if o_in is not None:
                o_in, tail_first = nest.distribute(o_in)[:2]
                tail_outer = tail_first
            for n in range(len(outer_fixed) - 1, -1, -1):
                outer_fixed[n], tail_outer = nest.distribute(outer_fixed[n])[:2]
            self._leftover_rows(nest, t, k, tail_outer, tail_first, i_tail, len(red) + (ko is not None))
        # 5. the loop order: outer tile loops, inner reduction loops, the register tile
        groups = {"i": [i_tile], "j": [j_tile], "K": list(red[:kk]) + ([ko] if ko is not None else [])}
        order = [ch for ch in k["order"] if groups[ch]]
        tile_outer = outer_fixed + [lp for ch in order for lp in groups[ch]]
        inner_red = [ki] + list(red[kk + 1:])
        reg = [lp for lp in (o_in, i_in, j_vec, j_lane) if lp is not None]
        top = (outer_fixed + [lp for lp in (o_in, i_tile) if lp is not None])[0]
        current = [nest.loop(top)] + nest.get_inner_loops(top)    # the main nest (not the leftover rows)
        wanted = tile_outer + inner_red + reg
        pos = {lp.var: n for n, lp in enumerate(current)}
        perm = [pos[lp.var] for lp in wanted]
        if perm != list(range(len(perm))):
            nest.reorder(current, perm)
        # 6. parallel loops first: the local buffers created below are then allocated inside
        #    them (private to each iteration) and the legality check has less to analyse
        if k["par"]:
            par_loop = next((lp for lp in tile_outer if lp.extent > 1 and lp not in groups["K"]), None)
            if par_loop is not None:
                nest.parallelize(par_loop)
        # 7. the local accumulator: one register tile, kept across the whole reduction when the
        #    reduction slices run inside the tile loops
        last = order[-1] if order else None
        acc_at = tile_outer[-1] if last != "K" else tile_outer[-1 - len(groups["K"])]
        nest.cache_accesses(nest.buffer(t.name), f"{t.name}_local", acc_at)
        # 8. pack the operand that does not follow the row tile, above the row tile loop
        if k["pack"] and k["pack_buffer"]:
            pos_i = tile_outer.index(i_tile)
            if pos_i > 0:
                nest.cache_accesses(nest.buffer(k["pack_buffer"]), f"{k['pack_buffer']}_pack", tile_outer[pos_i - 1])
        if j_lane is not None:
            nest.vectorize(j_lane)
        for lp in (j_vec, i_in, o_in):
            if lp is not None and lp.extent > 1:
                nest.unroll(lp)
        if k["unroll_r"]:
            for lp in inner_red[1:][::-1]:
                nest.unroll(lp)
        return tile_outer[0]

    @staticmethod
    def _leftover_columns(nest, t: Tensor, spatial: list, j_rest, n_red: int, par: bool) -> list:
        """Give the columns left over by the vector tiles a nest of their own (the loops above
        them distributed), with the reduction outside the leftover columns, those vectorized
        and accumulated in a local buffer (registers); ``par`` parallelizes its outermost
        loop of more than one iteration. Returns the main nest's spatial loops."""
        spatial = list(spatial)
        rest_top = j_rest
        for n in range(len(spatial) - 2, -1, -1):
            spatial[n], rest_top = nest.distribute(spatial[n])[:2]
        chain = [nest.loop(rest_top)] + nest.get_inner_loops(rest_top)
        ns = len(chain) - n_red
        want = chain[:ns - 1] + chain[ns:] + [chain[ns - 1]]
        nest.reorder(chain, [chain.index(lp) for lp in want])
        nest.vectorize(chain[ns - 1])
        if par:
            outer = next((lp for lp in chain[:ns - 1] if lp.extent > 1), None)
            if outer is not None:
                nest.parallelize(outer)
        if ns >= 2:
            nest.cache_accesses(nest.buffer(t.name), f"{t.name}_cols", chain[ns - 2])
        return spatial

    @staticmethod
    def _leftover_rows(nest, t: Tensor, k: dict, top, first, i_tail, n_red: int) -> None:
        """Schedule the rows left over by the row tile like the main tile: one tile of vectors
        per column tile, the reduction inside it, the leftover rows (and the third-last
        dimension's tile) unrolled, accumulated in a local buffer; ``top`` is the outermost
        loop of the leftover nest (``first`` or a loop around it)."""
        chain = [nest.loop(first)] + nest.get_inner_loops(first)
        pos_i = [lp.var for lp in chain].index(i_tail.var)
        reg_outer, j_tile = chain[:pos_i + 1], chain[pos_i + 1]
        j_inner = chain[pos_i + 2:len(chain) - n_red]
        red = chain[len(chain) - n_red:]
        want = [j_tile] + red + reg_outer + j_inner
        nest.reorder(chain, [chain.index(lp) for lp in want])
        if k["par"]:
            top = j_tile if top is first else top
            par = next((lp for lp in [nest.loop(top)] + nest.get_inner_loops(top) if lp.extent > 1), None)
            if par is not None and par.var is not red[0].var:
                nest.parallelize(par)
        nest.cache_accesses(nest.buffer(t.name), f"{t.name}_rest", j_tile)
        if k["vec_n"]:
            nest.vectorize(j_inner[-1])
        for lp in j_inner[:-1] + reg_outer:
            if lp.extent > 1:
                nest.unroll(lp)
        if k["unroll_r"]:
            for lp in red[len(red) - k["n_small_red"]:][::-1]:
                nest.unroll(lp)

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
    space = ScheduleSpace(tmpl, list(outputs), name=tmpl.__name__)
    space.set_seeds(tmpl.seeds(space))
    return space
