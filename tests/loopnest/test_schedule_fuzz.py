"""The differential schedule fuzzer: random transform sequences on random small programs,
each compared with the unscheduled program on IREval.

Every transform of the LoopNest API is drawn (splits, tile, slices, normalize, reorder,
fuse, flatten, distribute, vectorize, unroll, parallelize, GPU binding on IREval,
compute_inline, compute_at, store_at, cache_accesses, rfactor, privatize, eliminate_dead_stores,
simplify). A draw the nest refuses must raise ScheduleError and leave the nest exactly as it was; anything else
is a failure. Inputs are small integers in float32, so every sum is exact whatever the
order (rfactor, reordered reductions) and results are compared bit for bit. Each
schedule is also replayed from its JSON history onto a fresh nest, which must print the
same.
"""
from __future__ import annotations

import random

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from codegen import build
from loopnest import LoopNest, ScheduleError
from loopnest.stmt import Block, For, iter_stmts
from te import Buffer, Compute, Max, Reduce, Sum, Var, float32, int32, maximum

SMALL = [1, 2, 3, 5, 7, 8]


# ------------------------------------------------------------------------------------
# random programs
# ------------------------------------------------------------------------------------
def program(rnd: random.Random):
    """(outputs, inputs, size vars, {var: value}, arrays by name) of a random small program."""
    kind = rnd.choice(["stencil", "matmul", "rowmax", "sum2", "chain"])
    n, m, k = rnd.choice(SMALL), rnd.choice(SMALL), rnd.choice(SMALL)
    sizes = {}
    if kind == "stencil":
        s = rnd.choice([1, 2])
        N = Var("N", int32) if rnd.random() < 0.5 else n
        if isinstance(N, Var):
            sizes[N] = n
        A = Buffer("A", (N, m + s), float32)
        B = Compute("B", (N, m + s), lambda i, j: A[i, j] * 2.0 + 1.0)
        C = Compute("C", (N, m), lambda i, j: B[i, j] + B[i, j + s])
        return [C], [A], sizes
    if kind == "matmul":
        M = Buffer("M", (n, k), float32)
        K = Buffer("K", (k, m), float32)
        P = Reduce("P", (n, m), Sum(), lambda i, j, r: M[i, r] * K[r, j], (k,))
        Q = Compute("Q", (n, m), lambda i, j: P[i, j] + 1.0)
        return [Q], [M, K], sizes
    if kind == "rowmax":
        A = Buffer("A", (n, m), float32)
        R = Reduce("R", (n,), Max(), lambda i, j: A[i, j], (m,))
        S = Compute("S", (n, m), lambda i, j: A[i, j] - R[i])
        return [S], [A], sizes
    if kind == "sum2":
        A = Buffer("A", (n, m, k), float32)
        B = Compute("B", (n, m, k), lambda i, j, l: maximum(A[i, j, l], 0.0))
        C = Reduce("C", (n,), Sum(), lambda i, j, l: B[i, j, l], (m, k))
        return [C], [A], sizes
    A = Buffer("A", (n,), float32)
    B = Compute("B", (n,), lambda i: A[i] + 1.0)
    C = Compute("C", (n,), lambda i: B[i] * 2.0)
    D = Compute("D", (n,), lambda i: C[i] - B[i])
    return [D, C], [A], sizes


def run(nest, outputs, inputs, sizes, data, backend):
    args = inputs + outputs + list(sizes)
    outs = [np.zeros(tuple(_dim(d, sizes) for d in t.dims), np.float32) for t in outputs]
    opts = {"poison": True} if backend == "ireval" else {}
    build(nest, args, target=backend, **opts)(*[data[b.name] for b in inputs], *outs, *sizes.values())
    return outs


def _dim(d, sizes):
    from te.expr import IntImm
    return d.value if isinstance(d, IntImm) else sizes[d]


# ------------------------------------------------------------------------------------
# random transforms
# ------------------------------------------------------------------------------------
def _siblings(nest) -> list[list]:
    """Pairs of adjacent sibling loops (candidates for fuse)."""
    out = []
    for s in iter_stmts(nest.root):
        if isinstance(s, Block):
            fors = s.stmts
            for a, b in zip(fors, fors[1:]):
                if isinstance(a, For) and isinstance(b, For):
                    out.append([nest.loop(a), nest.loop(b)])
    return out


def random_step(nest, rnd: random.Random, gpu: bool, counter: list) -> str:
    loops = nest.get_all_loops()
    ops = ["split_with_tail", "split_with_mask", "split_with_overlap", "tile", "slice_head", "slice_tail", "normalize",
           "reorder", "reorder_axis", "fuse", "flatten", "distribute", "vectorize", "unroll", "parallelize",
           "compute_inline", "compute_at", "compute_at", "store_at", "cache_accesses", "rfactor", "privatize",
           "eliminate_dead_stores", "simplify", "prefetch", "specialize"]
    if gpu:  # GPU-bound loops run serially on IREval; CPU compilers do not take them
        ops += ["set_gpu_block_index", "set_gpu_thread_index", "tensorize", "gpu_matmul"]
    op = rnd.choice(ops)
    if not loops and op not in ("eliminate_dead_stores",):
        return "none"
    pick = lambda: rnd.choice(loops)  # noqa: E731
    tensors = [t for t in nest.tensors if t not in nest.outputs]
    if op in ("split_with_tail", "split_with_mask", "split_with_overlap", "slice_head", "slice_tail"):
        getattr(nest, op)(pick(), rnd.randint(1, 4))
    elif op == "tile":
        x = pick()
        inner = nest.get_inner_loops(x)
        nest.tile(x, inner[0] if inner else pick(), rnd.randint(1, 4), rnd.randint(1, 4))
    elif op == "normalize":
        nest.normalize(pick())
    elif op in ("reorder", "reorder_axis", "flatten"):
        x = pick()
        chain = [x] + nest.get_inner_loops(x)[:2]
        if op == "reorder":
            perm = list(range(len(chain)))
            rnd.shuffle(perm)
            nest.reorder(chain, perm)
        elif op == "reorder_axis":
            nest.reorder_axis(x, rnd.choice(chain))
        else:
            nest.flatten(chain[:rnd.randint(1, len(chain))])
    elif op == "fuse":
        pairs = _siblings(nest)
        if not pairs:
            return "none"
        nest.fuse(rnd.choice(pairs))
    elif op == "distribute":
        nest.distribute(pick())
    elif op == "vectorize":
        nest.vectorize(pick())
    elif op == "unroll":
        nest.unroll(pick(), rnd.choice([None, 2, 3]))
    elif op == "parallelize":
        nest.parallelize(pick())
    elif op in ("set_gpu_block_index", "set_gpu_thread_index"):
        getattr(nest, op)(pick(), rnd.randint(0, 2))
    elif op == "compute_inline":
        if not tensors:
            return "none"
        nest.compute_inline(rnd.choice(tensors))
    elif op == "compute_at":
        if not tensors:
            return "none"
        nest.compute_at(rnd.choice(tensors), pick())
    elif op == "store_at":
        if not tensors:
            return "none"
        nest.store_at(rnd.choice(tensors), rnd.choice([pick(), None]))
    elif op == "cache_accesses":
        counter[0] += 1
        buf = rnd.choice(sorted(nest.buffers.values(), key=lambda b: b.name))
        nest.cache_accesses(buf, f"cache{counter[0]}", pick())
    elif op == "rfactor":
        reds = [t for t in nest.tensors if t.is_reduction]
        if not reds:
            return "none"
        nest.rfactor(rnd.choice(reds), pick())
    elif op == "privatize":
        reds = [t for t in nest.tensors if t.is_reduction]
        nest.privatize(rnd.choice(reds or list(nest.buffers.values())), pick(), rnd.randint(1, 4),
                       parallel=rnd.random() < 0.5)
    elif op == "simplify":
        nest.simplify()
    elif op == "prefetch":
        buffers = sorted(list(nest.inputs) + list(nest.outputs), key=lambda b: b.name)
        nest.prefetch(rnd.choice(buffers), pick(), rnd.randint(1, 3))
    elif op == "specialize":    # a version of one or two random steps, on a side of a size (or none)
        sizes = sorted(nest.sizes().values(), key=lambda v: v.name)
        version = nest.unscheduled()
        for _ in range(rnd.randint(1, 2)):
            try:
                random_step(version, rnd, False, counter)
            except ScheduleError:
                pass
        condition = rnd.choice(sizes) <= rnd.randint(1, 8) if sizes else Var("N", int32) <= 4
        nest.specialize(condition, version)
    elif op == "tensorize":     # random nests are not warp MMAs: a named refusal, the nest unchanged
        nest.tensorize(pick())
    elif op == "gpu_matmul":    # takes a fresh nest of one matmul: refused on the others
        nest.gpu_matmul()
    else:
        nest.eliminate_dead_stores()
    return op


# ------------------------------------------------------------------------------------
# the fuzzer
# ------------------------------------------------------------------------------------
@settings(max_examples=50, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rnd=st.randoms(use_true_random=False), steps=st.integers(1, 7))
def test_random_schedules_preserve_results(backend, rnd, steps):
    outputs, inputs, sizes = program(rnd)
    data = {b.name: np.asarray(rnd.choices(range(-3, 4), k=int(np.prod([_dim(d, sizes) for d in b.dims]))),
                               np.float32).reshape(tuple(_dim(d, sizes) for d in b.dims)) for b in inputs}
    want = run(LoopNest(outputs), outputs, inputs, sizes, data, "ireval")
    nest = LoopNest(outputs)
    counter = [0]
    applied = []
    for _ in range(steps):
        before, hist = str(nest), list(nest.history)
        try:
            applied.append(random_step(nest, rnd, backend == "ireval", counter))
        except ScheduleError:
            assert str(nest) == before and nest.history == hist, "a refused transform changed the nest"
    got = run(nest, outputs, inputs, sizes, data, backend)
    for w, g, t in zip(want, got, outputs):
        np.testing.assert_array_equal(g, w, err_msg=f"{t.name} after {applied}:\n{nest}")
    again = LoopNest(outputs).replay(nest.history_json())
    assert str(again) == str(nest)


def test_fuzzer_draws_every_transform():
    """The op list covers every transform method of LoopNest (so new transforms get fuzzed)."""
    import inspect
    from loopnest.nest import LoopNest as LN
    methods = {n for n, f in inspect.getmembers(LN) if getattr(f, "is_transform", False)}
    src = inspect.getsource(random_step)
    missing = {m for m in methods if f'"{m}"' not in src}
    assert not missing, f"the fuzzer does not draw {sorted(missing)}"
