"""Random schedules: steps drawn from every transform of the LoopNest API, plus
``simplify``, as records in the history's format
(``{"op": "split_with_tail", "args": [{"loop": "i0"}, 2], "kwargs": {}}``).

A step is drawn from the nest's current state (its loops, sibling loops, tensors,
buffers), so inline / compute_at chains in any order, fuses of loops whose bodies read
each other through non-identity indices, and cache_accesses over split and masked loops
come up often. Steps are applied with the public API (:func:`apply_step`), so a step list
is also a script (:func:`step_source`).

>>> import random
>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> A = Buffer("A", (8,), "float32")
>>> nest = LoopNest([Compute("B", (8,), lambda i: A[i] + 1.0)])
>>> step = {"op": "split_with_mask", "args": [{"loop": "i"}, 4], "kwargs": {}}
>>> _ = apply_step(nest, step)
>>> step_source(step)
'nest.split_with_mask(nest.loop("i"), 4)'
>>> draw_step(nest, random.Random(0), gpu=True, state=DrawState())["op"] in OPS
True
"""
from __future__ import annotations

import importlib
import random

from loopnest import ScheduleError, Target
from loopnest.stmt import Block, For, Store, iter_stmts, stmt_children
from te.queries import expr_size, fold_int, loads

#: every drawn operation with its weight: the transforms of LoopNest, and simplify
OPS = {
    "split_with_tail": 3, "split_with_mask": 3, "split_with_overlap": 2, "tile": 1, "slice_head": 1, "slice_tail": 1,
    "normalize": 1,
    "reorder": 1, "reorder_axis": 1, "fuse": 4, "flatten": 1, "distribute": 1, "vectorize": 2, "unroll": 1,
    "parallelize": 1, "set_gpu_block_index": 1, "set_gpu_thread_index": 1, "compute_inline": 4,
    "compute_at": 4, "store_at": 2, "cache_accesses": 3, "rfactor": 2, "privatize": 2, "eliminate_dead_stores": 1,
    "simplify": 1, "tensorize": 1, "gpu_matmul": 1, "auto_schedule": 1, "prefetch": 1, "specialize": 1,
}
GPU_OPS = ("set_gpu_block_index", "set_gpu_thread_index", "tensorize", "gpu_matmul", "grid_reduce")
#: steps that are functions of the nest (``fn(nest, *args)``, all or nothing as a method) rather
#: than its methods: ``loopnest.auto.gpu.grid_reduce``, the two-kernel reduction that ``auto_schedule``
#: takes only from a million terms, far above the random programs' sizes
NEST_FUNCTIONS = {"grid_reduce": "loopnest.auto.gpu"}
#: the operations drawn more often right after an operation (where defects hide: chains of
#: inlining, cache buffers of split and masked loops, splits of cache loops; vectorized
#: split loops, whose strided loads are gathers and whose stores may stream)
FOLLOW_UPS = {
    "split_with_mask": ("cache_accesses", "split_with_tail", "compute_at", "vectorize"),
    "split_with_tail": ("cache_accesses", "split_with_mask", "compute_at", "vectorize"),
    "split_with_overlap": ("cache_accesses", "compute_at", "vectorize", "unroll"),
    "tile": ("vectorize", "cache_accesses"),
    "cache_accesses": ("split_with_tail", "split_with_mask", "cache_accesses", "compute_at"),
    "compute_inline": ("compute_inline", "compute_at", "fuse"),
    "compute_at": ("compute_inline", "compute_at", "fuse", "cache_accesses", "store_at"),
    "fuse": ("compute_at", "fuse", "compute_inline"),
    "prefetch": ("vectorize", "split_with_mask", "unroll"),
}


class DrawState:
    """What draws remember between steps: the last operation, the loops it created (drawn
    more often next), and a counter naming cache buffers."""

    def __init__(self):
        self.last_op = ""
        self.recent: list = []
        self.caches = 0
        self._known: set = set()

    def update(self, nest, op: str) -> None:
        """Note the nest after ``op``."""
        names = [lp.name for lp in nest.get_all_loops()]
        self.recent = [n for n in names if n not in self._known]
        self._known = set(names)
        self.last_op = op


def _loop(name: str) -> dict:
    return {"loop": name}


def _buffer(name: str) -> dict:
    return {"buffer": name}


def _sibling_pairs(nest) -> list:
    """Names of adjacent sibling loops (the candidates of fuse)."""
    out = []
    for s in iter_stmts(nest.root):
        if isinstance(s, Block):
            for a, b in zip(s.stmts, s.stmts[1:]):
                if isinstance(a, For) and isinstance(b, For):
                    out.append([a.var.name, b.var.name])
    return out


#: the largest expression (in nodes, shared subexpressions counted at every use) that a
#: ``compute_inline`` the tester draws may create: seed 48, case 96 inlined a 40-node stage into
#: the 260 terms of a deep sum read twice (36,000 nodes), which LLVM's optimiser took minutes over
#: (slow, not wrong; a user who inlines that much waits as long)
INLINE_MAX_NODES = 4000


def _inlined_nodes(nest, name: str) -> int:
    """Nodes that inlining tensor ``name`` would put in its consumers: its largest stored value
    times the loads of it in the nest's other stores.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (8,), "float32")
    >>> T = Compute("T", (8,), lambda i: A[i] * 2.0 + 1.0)
    >>> U = Compute("U", (8,), lambda i: T[i] + T[7 - i])
    >>> _inlined_nodes(LoopNest([U]), "T")     # A[i] * 2.0 + 1.0: 6 nodes (the index too), read twice
    12
    """
    stores = [s for s in iter_stmts(nest.root) if isinstance(s, Store)]
    sizes = [expr_size(s.value) for s in stores if s.buffer.name == name]
    reads = sum(1 for s in stores if s.buffer.name != name for ld in loads([s.value, *s.indices])
                if ld.buffer.name == name)
    return max(sizes, default=0) * reads


def _consumer_loops(nest, name: str) -> list:
    """Names of the loops around a store that reads tensor ``name`` (the loops ``compute_at``
    of ``name`` takes), outermost first.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (8,), "float32")
    >>> T = Compute("T", (8,), lambda i: A[i] * 2.0)
    >>> U = Compute("U", (8,), lambda i: T[i] + 1.0)
    >>> nest = LoopNest([U])
    >>> _consumer_loops(nest, "T") == [nest.get_loops_for(U)[0].name]
    True
    """
    out: list = []

    def visit(s, around: list) -> None:
        if isinstance(s, Store) and s.buffer.name != name and \
                any(ld.buffer.name == name for ld in loads([s.value, *s.indices])):
            out.extend(n for n in around if n not in out)
        inside = around + [s.var.name] if isinstance(s, For) else around
        for c in stmt_children(s):
            visit(c, inside)

    visit(nest.root, [])
    return out


def _lone_matmul(nest) -> bool:
    """Whether ``nest`` is one matmul tensor (what ``gpu_matmul`` takes)."""
    from loopnest.transforms.gpu_matmul import matmul_operands
    return len(nest.tensors) == 1 and matmul_operands(nest.tensors[0]) is not None


def _matmul_tiles(nest, rnd: random.Random) -> dict:
    """Random tiles for ``gpu_matmul`` of the nest's matmul, mostly ones that fit its sizes:
    the warpgroup-MMA tree (float16 / bfloat16 with M a multiple of 64, in about one draw of
    three, copying 0 to stages - 1 k-tiles ahead in half of them, k-tiles of 64 in 128-byte
    swizzled atoms in three of four; for float32 with an N x K B its tf32 form, k-tiles of 32 or
    64; some of its tiles do not split over its threads, a named refusal), the tensor-core
    tree (float16 / bfloat16; tf32 for float32 in one draw of three) with its
    prefetch through registers or shared memory and 1 to 4 stages, else the SIMT tree, single-
    or double-buffered, with 1, 2 or 4 elements per global load (4 refused where a thread's
    share of a tile is not a multiple of it)."""
    from loopnest.transforms.gpu_matmul import matmul_operands
    (C,) = nest.tensors
    m, n, k = (d if isinstance(d, int) else fold_int(d) for d in (*C.shape, C.reduce_dims[0]))
    dtype = str(nest.buffer("A").dtype)
    fits = lambda size, options: [t for t in options if size % t == 0] or [options[0]]  # noqa: E731
    if dtype == "float32" and matmul_operands(C)[2] == "nk" and m % 64 == 0 and rnd.random() < 0.3:
        bk = rnd.choice(fits(k, [32, 64]))
        stages = rnd.randint(1, 2 if bk == 32 else 1)           # within the default 48 KiB of shared memory
        return {"tensor_cores": True, "wgmma": True, "BM": 64, "BN": rnd.choice(fits(n, [32, 64])), "BK": bk,
                "stages": stages}
    if dtype != "float32" and m % 64 == 0 and n % 32 == 0 and rnd.random() < 0.3:
        bk = rnd.choice(fits(k, [16, 32, 64]))
        stages = rnd.randint(1, 2 if bk == 64 else 4)           # within the default 48 KiB of shared memory
        tiles = {"tensor_cores": True, "wgmma": True, "BM": 64, "BN": rnd.choice(fits(n, [32, 64])),
                 "BK": bk, "stages": stages}
        if rnd.random() < 0.5:
            tiles["ahead"] = rnd.randint(0, stages - 1)       # else its default (overlapped MMAs from 3 stages)
        if bk == 64 and rnd.random() < 0.25:
            tiles["swizzle"] = 0                                # else swizzled atoms where the tiles allow
        return tiles
    if dtype != "float32" or rnd.random() < 1 / 3:
        bm, bn = rnd.choice(fits(m, [16, 32, 64])), rnd.choice(fits(n, [16, 32, 64]))
        tiles = {"tensor_cores": True, "BM": bm, "BN": bn, "WM": rnd.choice(fits(bm, [16, 32])),
                 "WN": rnd.choice(fits(bn, [8, 16, 32])), "BK": rnd.choice(fits(k, [16, 32]))}
        if dtype == "float32":
            tiles["BK"] = rnd.choice(fits(k, [8, 16]))
        prefetch = rnd.choice(["registers", "shared"])
        tiles.update(prefetch=prefetch, stages=rnd.randint(1, 2) if prefetch == "registers" else rnd.randint(2, 4))
        return tiles
    bm, bn = rnd.choice(fits(m, [16, 32])), rnd.choice(fits(n, [16, 32]))
    return {"tensor_cores": False, "BM": bm, "BN": bn, "BK": rnd.choice(fits(k, [4, 8])),
            "TM": rnd.choice(fits(bm, [1, 2, 4])), "TN": rnd.choice(fits(bn, [1, 2, 4])),
            "stages": rnd.randint(1, 2), "vector": rnd.choice([1, 1, 2, 4])}


def _target(rnd: random.Random) -> dict:
    """A random CPU for ``auto_schedule``: vector width, registers, cores and caches small
    enough that the random programs' small sizes get tiled, blocked and parallelized."""
    return {"vector_bits": rnd.choice([128, 256, 512]), "vector_registers": rnd.choice([8, 16, 32]),
            "cores": rnd.choice([1, 2, 3]), "l1_bytes": rnd.choice([64, 512, 32768]),
            "l2_bytes": rnd.choice([256, 4096, 1 << 20])}


#: the share of CPU schedules that end by vectorizing an innermost loop (``draw_vector_step``):
#: vectorized loops reach gathers, vector tails and the streaming stores of the LLVM backend
VECTOR_FINISH_PROBABILITY = 0.4


def draw_vector_step(nest, rnd: random.Random) -> dict:
    """A step towards a vectorized innermost loop: vectorize one of a constant extent, else
    split an innermost loop by 2 to 8 (a constant inner loop for the next step).

    >>> from te import Buffer, Compute, Var
    >>> from loopnest import LoopNest
    >>> N = Var("N"); A = Buffer("A", (N,), "float32")
    >>> nest = LoopNest([Compute("B", (N,), lambda i: A[i] + 1.0)])
    >>> draw_vector_step(nest, random.Random(0))["op"]
    'split_with_tail'
    """
    innermost = [lp for lp in nest.get_all_loops() if not nest.get_inner_loops(lp)]
    const = [lp.name for lp in innermost if isinstance(lp.extent, int) and lp.extent > 1]
    if const:
        return {"op": "vectorize", "args": [_loop(rnd.choice(const))], "kwargs": {}}
    pick = rnd.choice(innermost).name if innermost else None
    if pick is None:
        return {"op": "simplify", "args": [], "kwargs": {}}
    return {"op": "split_with_tail", "args": [_loop(pick), rnd.randint(2, 8)], "kwargs": {}}


def draw_step(nest, rnd: random.Random, gpu: bool, state: DrawState) -> dict:
    """A random step for ``nest`` (not applied; call ``state.update`` after applying it).
    ``gpu``: draw GPU bindings too. A schedule's first step is ``auto_schedule`` in one
    draw of six (later, the step is refused: it takes an unscheduled nest), for a random CPU,
    or with ``gpu`` half the time for CUDA (the GPU templates' defaults)."""
    ops = [op for op in OPS if gpu or op not in GPU_OPS]
    op = rnd.choices(ops, [OPS[o] for o in ops])[0]
    if not nest.history and not state.last_op and rnd.random() < 1 / 6:
        op = "auto_schedule"
    if gpu and not nest.history and not state.last_op and _lone_matmul(nest) and rnd.random() < 0.7:
        return {"op": "gpu_matmul", "args": [], "kwargs": _matmul_tiles(nest, rnd)}
    reductions = sorted(t.name for t in nest.tensors if t.is_reduction)
    if gpu and not nest.history and not state.last_op and reductions and rnd.random() < 0.15:
        threads = rnd.choice([32, 64, 128])
        return {"op": "grid_reduce", "args": [_buffer(rnd.choice(reductions)), threads,
                                              threads * rnd.choice([1, 2, 4]) // rnd.choice([1, 4])],
                "kwargs": {}}
    if state.last_op in FOLLOW_UPS and rnd.random() < 0.5:
        op = rnd.choice(FOLLOW_UPS[state.last_op])
    loops = [lp.name for lp in nest.get_all_loops()]
    if not loops:
        op = rnd.choice(["eliminate_dead_stores", "simplify"])
    recent = [n for n in state.recent if n in loops]
    pick = lambda: _loop(rnd.choice(recent if recent and rnd.random() < 0.5 else loops))  # noqa: E731
    inner = lambda x: [lp.name for lp in nest.get_inner_loops(x["loop"])]  # noqa: E731
    intermediates = sorted(t.name for t in nest.tensors if t not in nest.outputs)
    args: list = []
    if op in ("split_with_tail", "split_with_mask", "split_with_overlap", "slice_head", "slice_tail"):
        args = [pick(), rnd.randint(1, 4)]
    elif op == "tile":
        x = pick()
        ys = inner(x)
        args = [x, _loop(ys[0]) if ys else pick(), rnd.randint(1, 4), rnd.randint(1, 4)]
    elif op == "vectorize":     # mostly an innermost loop of a constant extent: the ones that vectorize
        inner_const = [lp.name for lp in nest.get_all_loops()
                       if isinstance(lp.extent, int) and not nest.get_inner_loops(lp)]
        args = [_loop(rnd.choice(inner_const)) if inner_const and rnd.random() < 0.6 else pick()]
    elif op in ("normalize", "distribute", "parallelize"):
        args = [pick()]
    elif op in ("reorder", "reorder_axis", "flatten"):
        x = pick()
        chain = [x] + [_loop(n) for n in inner(x)[:2]]
        if op == "reorder":
            perm = list(range(len(chain)))
            rnd.shuffle(perm)
            args = [chain, perm]
        elif op == "reorder_axis":
            args = [x, rnd.choice(chain)]
        else:
            args = [chain[:rnd.randint(1, len(chain))]]
    elif op == "fuse":
        pairs = _sibling_pairs(nest)
        names = rnd.choice(pairs) if pairs and rnd.random() < 0.9 else rnd.sample(loops, min(2, len(loops)))
        args = [[_loop(n) for n in names]]
    elif op == "unroll":
        factor = rnd.choice([None, 2, 3, "late"])
        args = [pick(), None, True] if factor == "late" else [pick(), factor]
    elif op == "prefetch":      # an input or output, one to three iterations ahead
        names = sorted({b.name for b in list(nest.inputs) + list(nest.outputs)})
        args = [_buffer(rnd.choice(names)), pick(), rnd.randint(1, 3)]
    elif op == "tensorize":     # a random loop is rarely a warp MMA: a named refusal
        args = [pick()]
    elif op == "gpu_matmul":    # a fresh nest of one plain matmul only
        args = []
    elif op == "auto_schedule":
        args = ["cuda"] if gpu and rnd.random() < 0.5 else [{"target": _target(rnd)}]
    elif op in GPU_OPS:
        args = [pick(), rnd.randint(0, 2)]
    elif op in ("compute_inline", "compute_at"):
        if op == "compute_inline":
            intermediates = [n for n in intermediates if _inlined_nodes(nest, n) <= INLINE_MAX_NODES]
        if not intermediates:
            return draw_step(nest, rnd, gpu, state)
        name = rnd.choice(intermediates)
        if op == "compute_inline":
            args = [_buffer(name)]
        else:   # mostly a loop of a consumer (a random loop is rarely one), often one just made
            around = _consumer_loops(nest, name)
            fresh = [n for n in around if n in recent]
            where = rnd.choice(fresh if fresh and rnd.random() < 0.5 else around) \
                if around and rnd.random() < 0.8 else pick()["loop"]
            args = [_buffer(name), _loop(where)]
    elif op == "store_at":
        if not intermediates:
            return draw_step(nest, rnd, gpu, state)
        args = [_buffer(rnd.choice(intermediates)), pick() if rnd.random() < 0.9 else None]
    elif op == "cache_accesses":     # a third of them with the copy's dimensions permuted (a transposed pack)
        state.caches += 1
        name = rnd.choice(sorted(nest.buffers))
        args = [_buffer(name), f"cache{state.caches}", pick()]
        ndim = nest.buffers[name].ndim
        if ndim >= 2 and rnd.random() < 0.33:
            order = list(range(ndim))
            rnd.shuffle(order)
            return {"op": op, "args": args, "kwargs": {"order": order}}
    elif op == "rfactor":
        reductions = sorted(t.name for t in nest.tensors if t.is_reduction)
        if not reductions:
            return draw_step(nest, rnd, gpu, state)
        args = [_buffer(rnd.choice(reductions)), pick()]
    elif op == "specialize":
        drawn = draw_specialize(nest, rnd)
        return drawn if drawn is not None else draw_step(nest, rnd, gpu, state)
    elif op == "privatize":     # a reduction at one of its loops, or any buffer at any loop (mostly refused)
        reductions = sorted(t.name for t in nest.tensors if t.is_reduction)
        names = reductions if reductions and rnd.random() < 0.8 else sorted(nest.buffers)
        return {"op": op, "args": [_buffer(rnd.choice(names)), pick(), rnd.randint(1, 4)],
                "kwargs": {"parallel": rnd.random() < 0.5}}
    return {"op": op, "args": args, "kwargs": {}}


#: the most steps of the schedule of a version that ``specialize`` draws
VERSION_STEPS = 3


def draw_specialize(nest, rnd: random.Random) -> dict | None:
    """A ``specialize`` step: a condition on one of the nest's sizes (``N <= c``, ``N == c``,
    ``N >= c`` or ``N % 2 == 0``, c from 1 to 8: the random programs' sizes are about that,
    so either side runs) and a version of 1 to ``VERSION_STEPS`` random CPU steps, drawn on
    the nest as built; None when the nest has no size. A version step that is refused is
    left out; one that fails otherwise is kept, and ends the version (replaying it then
    fails the same way, reported as the ``specialize`` step's crash).

    >>> from te import Buffer, Compute, Var
    >>> from loopnest import LoopNest
    >>> N = Var("N"); A = Buffer("A", (N,), "float32")
    >>> nest = LoopNest([Compute("B", (N,), lambda i: A[i] + 1.0)])
    >>> step = draw_specialize(nest, random.Random(1))
    >>> step["op"], step["args"][0]
    ('specialize', {'expr': ['ge', {'var': 'N'}, 2]})
    """
    from loopnest.history import encode_expr
    sizes = sorted(nest.sizes().items())
    ints = [v for _, v in sizes if v.dtype.is_integer]
    if not ints:
        return None
    v, c = rnd.choice(ints), rnd.randint(1, 8)
    condition = rnd.choice([lambda: v <= c, lambda: v == c, lambda: v >= c, lambda: v % 2 == 0])()
    version, state, steps = nest.unscheduled(), DrawState(), []
    for _ in range(rnd.randint(1, VERSION_STEPS)):
        step = draw_step(version, rnd, False, state)
        if step["op"] == "specialize":
            continue
        try:
            apply_step(version, step)
        except ScheduleError:
            continue
        except Exception:  # noqa: BLE001  (kept: the replay in specialize reports it)
            steps.append(step)
            break
        steps.append(step)
        state.update(version, step["op"])
    return {"op": "specialize", "args": [{"expr": encode_expr(condition)}, {"schedule": steps}], "kwargs": {}}


def version_from_steps(nest, steps: list):
    """The version of ``nest`` that a drawn ``specialize`` step names: the nest as built with
    ``steps`` applied (steps of this module's format: ``auto_schedule`` with a target too).

    >>> from te import Buffer, Compute, Var
    >>> from loopnest import LoopNest
    >>> N = Var("N"); A = Buffer("A", (N,), "float32")
    >>> nest = LoopNest([Compute("B", (N,), lambda i: A[i] + 1.0)])
    >>> version_from_steps(nest, [{"op": "split_with_tail", "args": [{"loop": "i"}, 4], "kwargs": {}}]).history
    [{'op': 'split_with_tail', 'args': [{'loop': 'i'}, 4], 'kwargs': {}}]
    """
    version = nest.unscheduled()
    for step in steps:
        apply_step(version, step)
    return version


def _decode(nest, x):
    if isinstance(x, dict) and "target" in x:
        return Target(**x["target"])
    if isinstance(x, dict) and "expr" in x:
        from loopnest.history import decode_expr
        return decode_expr(x["expr"], nest.sizes())
    if isinstance(x, dict) and "schedule" in x:
        return version_from_steps(nest, x["schedule"])
    if isinstance(x, dict):
        return nest.loop(x["loop"]) if "loop" in x else nest.buffer(x["buffer"])
    if isinstance(x, list):
        return [_decode(nest, v) for v in x]
    return x


def apply_step(nest, step: dict):
    """Apply ``step`` to ``nest`` through the public API (a loop or buffer that no longer
    exists raises ScheduleError, as any refused transform does)."""
    args = [_decode(nest, a) for a in step["args"]]
    kwargs = {k: _decode(nest, v) for k, v in step.get("kwargs", {}).items()}
    if step["op"] in NEST_FUNCTIONS:
        fn = getattr(importlib.import_module(NEST_FUNCTIONS[step["op"]]), step["op"])
        return fn(nest, *args, **kwargs)
    return getattr(nest, step["op"])(*args, **kwargs)


def _arg_source(x) -> str:
    if isinstance(x, dict) and "target" in x:
        return "Target(" + ", ".join(f"{k}={v!r}" for k, v in x["target"].items()) + ")"
    if isinstance(x, dict) and "expr" in x:
        return f"__import__('loopnest.history', fromlist=['_']).decode_expr({x['expr']!r}, nest.sizes())"
    if isinstance(x, dict) and "schedule" in x:
        return f"__import__('fuzz.schedules', fromlist=['_']).version_from_steps(nest, {x['schedule']!r})"
    if isinstance(x, dict):
        return f'nest.loop("{x["loop"]}")' if "loop" in x else f'nest.buffer("{x["buffer"]}")'
    if isinstance(x, list):
        return "[" + ", ".join(_arg_source(v) for v in x) + "]"
    return repr(x)


def step_source(step: dict) -> str:
    """The API call of ``step`` as Python source (the nest is called ``nest``)."""
    args = [_arg_source(a) for a in step["args"]] + [f"{k}={_arg_source(v)}" for k, v in step.get("kwargs", {}).items()]
    if step["op"] in NEST_FUNCTIONS:     # the function's module imported in the expression
        module = NEST_FUNCTIONS[step["op"]]
        return f"__import__({module!r}, fromlist=['_']).{step['op']}({', '.join(['nest'] + args)})"
    return f"nest.{step['op']}({', '.join(args)})"
