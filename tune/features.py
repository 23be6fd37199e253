"""Features of a scheduled loop nest, for the cost model.

One fixed-length vector per nest: global counts (stores, loops, guards, intermediates,
total iterations), and for the *main* store (the one executed most often) the loops
around it, innermost first (log2 extent and kind), the strides of its accesses along the
innermost loop, its arithmetic, and the data footprint (bytes) touched below each loop
level, which tells a cache-friendly tiling from a thrashing one.

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> A = Buffer("A", (64, 64), "float32")
>>> B = Compute("B", (64, 64), lambda i, j: A[j, i] + 1.0)
>>> f = nest_features(LoopNest([B]))
>>> f.shape == (FEATURE_COUNT,), float(f[0])
(True, 12.0)
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from te import expr as E
from te.expr import Expr, IntImm, Var, walk
from te.queries import free_vars, loads

__all__ = ["nest_features", "FEATURE_COUNT", "FEATURE_NAMES", "linear_coefficient"]

DEPTH = 8                  # loop levels described, innermost first
KINDS = ("serial", "parallel", "vectorized", "unrolled", "gpu_block", "gpu_thread")


def _names() -> list[str]:
    names = ["log2_iterations", "n_stores", "n_loops", "n_conds", "n_allocs", "n_intermediates",
             "log2_parallel_extent", "main_depth", "n_loads", "n_arith", "n_calls", "n_div_mod",
             "stride0", "stride1", "stride_small", "stride_large", "stride_unknown", "vector_lanes",
             "main_is_reduction", "n_tail_loops"]
    for d in range(DEPTH):
        names += [f"L{d}_log2_extent", f"L{d}_is_reduction"] + [f"L{d}_{k}" for k in KINDS[:4]]
        names += [f"L{d}_log2_footprint"]
    return names


FEATURE_NAMES = _names()
FEATURE_COUNT = len(FEATURE_NAMES)

_ARITH = (E.Add, E.Sub, E.Mul, E.Div, E.Min, E.Max, E.Select, E.IfThenElse)
_DIVMOD = (E.FloorDiv, E.FloorMod, E.Mod)


def _vars_of(e: Expr) -> set[int]:
    return {id(v) for v in free_vars(e)}


def _const_value(e: Expr, env: Mapping[str, int]) -> int | None:
    from codegen.kernel import KernelArgumentError, eval_int_expr
    ids: dict[int, int] = {}
    for v in free_vars(e):
        if v.name not in env:
            return None
        ids[id(v)] = int(env[v.name])
    try:
        return int(eval_int_expr(e, ids))
    except KernelArgumentError:   # not a size expression, or a division by 0
        return None


def linear_coefficient(e: Expr, v: Var, env: Mapping[str, int] | None = None) -> int | None:
    """The coefficient of ``v`` in ``e`` when ``e`` is linear in ``v``, else None.

    >>> from te import Var
    >>> i, j = Var("i"), Var("j")
    >>> linear_coefficient(i * 64 + j, i), linear_coefficient(i * 64 + j, j), linear_coefficient(i // 4, i)
    (64, 1, None)
    """
    env = env or {}
    if isinstance(e, Var):
        return 1 if e is v else 0
    if isinstance(e, (IntImm, E.FloatImm)):
        return 0
    if id(v) not in _vars_of(e):
        return 0
    if isinstance(e, E.Cast):
        return linear_coefficient(e.value, v, env)
    if isinstance(e, (E.Add, E.Sub)):
        a, b = linear_coefficient(e.a, v, env), linear_coefficient(e.b, v, env)
        if a is None or b is None:
            return None
        return a + b if isinstance(e, E.Add) else a - b
    if isinstance(e, E.Mul):
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if id(v) not in _vars_of(x):
                c = _const_value(x, env)
                k = linear_coefficient(y, v, env)
                return None if c is None or k is None else c * k
        return None
    if isinstance(e, (E.FloorDiv, E.Div)) and id(v) not in _vars_of(e.b):
        c, k = _const_value(e.b, env), linear_coefficient(e.a, v, env)
        if c and k is not None and k % c == 0:
            return k // c
    return None


def _loop_extent(f, env: Mapping[str, int]) -> int:
    start = _const_value(f.start, env)
    stop = _const_value(f.stop, env)
    if start is None or stop is None:   # bounds depending on outer loops: take them at 0
        zero = dict(env)
        for e in (f.start, f.stop):
            for v in free_vars(e):
                zero.setdefault(v.name, 0)
        start, stop = _const_value(f.start, zero), _const_value(f.stop, zero)
    if start is None or stop is None:
        return 1
    return max(1, stop - start)


def _collect(root, env):
    """(stores with their loop chains, loop count, cond count, alloc count)."""
    from loopnest.stmt import Allocate, Block, Cond, For, Let, Store
    stores: list[tuple[Any, list]] = []
    counts = {"loops": 0, "conds": 0, "allocs": 0, "tails": 0}

    def rec(s, chain):
        if isinstance(s, Store):
            stores.append((s, chain))
        elif isinstance(s, For):
            counts["loops"] += 1
            if "tail" in s.var.name:
                counts["tails"] += 1
            rec(s.body, chain + [(s, _loop_extent(s, env))])
        elif isinstance(s, Block):
            for x in s.stmts:
                rec(x, chain)
        elif isinstance(s, Cond):
            counts["conds"] += 1
            rec(s.then, chain)
            if s.otherwise is not None:
                rec(s.otherwise, chain)
        elif isinstance(s, Let):
            rec(s.body, chain)
        elif isinstance(s, Allocate):
            counts["allocs"] += 1
    rec(root, [])
    return stores, counts


def _accesses(store) -> list[tuple[Any, tuple]]:
    return [(store.buffer, tuple(store.indices))] + [(ld.buffer, tuple(ld.indices)) for ld in loads(store.value)]


def _flat_stride(buf, indices, v, env) -> int | None:
    dims = [(_const_value(d, env) or 1) for d in buf.dims]
    stride, total = 1, 0
    for k in range(len(indices) - 1, -1, -1):
        c = linear_coefficient(indices[k], v, env)
        if c is None:
            return None
        total += c * stride
        stride *= dims[k] if k < len(dims) else 1
    return total


def nest_features(nest, sizes: Mapping[str, int] | None = None) -> np.ndarray:
    """The feature vector (length ``FEATURE_COUNT``) of ``nest`` at concrete ``sizes``."""
    env = dict(sizes or {})
    stores, counts = _collect(nest.root, env)
    f = np.zeros(FEATURE_COUNT, dtype=np.float64)
    if not stores:
        return f
    trips = [math.prod(e for _, e in chain) for _, chain in stores]
    main = int(np.argmax(trips))
    store, chain = stores[main]
    par = math.prod(e for fr, e in chain if fr.kind in ("parallel", "gpu_block", "gpu_thread")) if chain else 1
    accesses = _accesses(store)
    n_arith = n_calls = n_div = 0

    def count(n):
        nonlocal n_arith, n_calls, n_div
        if isinstance(n, _ARITH):
            n_arith += 1
        elif isinstance(n, E.Call):
            n_calls += 1
        elif isinstance(n, _DIVMOD):
            n_div += 1
    walk(store.value, count)
    store_vars = set().union(*(_vars_of(i) for i in store.indices)) if store.indices else set()
    strides = np.zeros(5)
    lanes = 1
    if chain:
        inner, ext = chain[-1]
        if inner.kind == "vectorized":
            lanes = ext
        for buf, idx in accesses:
            s = _flat_stride(buf, idx, inner.var, env)
            if s is None:
                strides[4] += 1
            elif s == 0:
                strides[0] += 1
            elif abs(s) == 1:
                strides[1] += 1
            elif abs(s) <= 16:
                strides[2] += 1
            else:
                strides[3] += 1
    head = [math.log2(max(1, sum(trips))), len(stores), counts["loops"], counts["conds"], counts["allocs"],
            len(getattr(nest, "intermediates", [])), math.log2(max(1, par)), len(chain), len(accesses) - 1,
            n_arith, n_calls, n_div, *strides, lanes,
            float(bool(chain) and id(chain[-1][0].var) not in store_vars), counts["tails"]]
    f[:len(head)] = head
    pos = len(head)
    per = 7
    rev = list(reversed(chain))
    for d in range(min(DEPTH, len(rev))):
        fr, ext = rev[d]
        inner_loops = rev[: d + 1]
        footprint = 0.0
        for buf, idx in accesses:
            elems = 1
            for k, ix in enumerate(idx):
                span = 1
                for lf, le in inner_loops:
                    c = linear_coefficient(ix, lf.var, env)
                    if c is None:
                        c = 1 if id(lf.var) in _vars_of(ix) else 0
                    span += abs(c) * (le - 1)
                if k < len(buf.dims):
                    dim = _const_value(buf.dims[k], env)
                    if dim:
                        span = min(span, dim)
                elems *= span
            footprint += elems * buf.dtype.itemsize
        kinds = [1.0 if fr.kind == k else 0.0 for k in KINDS[:4]]
        f[pos + d * per: pos + (d + 1) * per] = [math.log2(ext), float(id(fr.var) not in store_vars), *kinds,
                                                 math.log2(max(1.0, footprint))]
    return f
