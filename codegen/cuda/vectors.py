"""The CUDA step ``cuda_vector_access``: which loads and stores are whole CUDA vector accesses.

A vector store (or vector ``LetStmt``) is printed lane by lane: every lane of the value is
computed into a temporary, then stored. This step decides which of its memory accesses move
whole 2- to 16-byte vectors instead of single lanes, and records them in the plan
(``plan.hoisted``, ``plan.wide_stores``, ``plan.param_alignment``):

* **Buffers of vector elements** (``float32x4``, ``float16x2``, ``int8x4``...) are arrays of
  their CUDA vector type (``codegen.cuda.types.vector_type``), so an element is always one
  aligned access: a store writes whole elements (its value covers every lane of them), and
  a load is read whole.
* **Contiguous runs of a scalar global or shared buffer** -- an index ``ramp(base, 1, n)``, as a
  vectorized innermost loop makes -- are read and written as ``float2``/``float4`` (or the
  vector type of the same bytes for other element types: ``__half2``, ``char4``, ...) in
  chunks of ``c`` lanes, the widest with ``c * itemsize`` of 4, 8 or 16 bytes dividing
  ``n``, when alignment is provable: ``base`` is a multiple of ``c`` (``known_multiple``)
  and the buffer's pointer is aligned to ``c * itemsize`` bytes (the launcher allocates
  aligned memory and checks the pointers of device arrays it is given against
  ``plan.param_alignment``; shared and thread-local arrays are declared 16-byte aligned, and
  the index of a promoted array drops only terms of the thread variables, each a multiple of
  the chunk when the whole base is). Otherwise lanes
  are accessed one at a time. A store whose value is a load of the same type with the
  same chunks is a copy of whole vectors, with no conversion (``float16`` stays bits).

A load is read whole before the lanes are computed ("hoisted") only when it is evaluated
unconditionally -- not inside a branch of a ``select``/``if_then_else``, which may guard
an out-of-bounds read -- and its index loads nothing and uses no variable bound inside the
value; loads structurally equal to a hoisted one, also inside branches, read the same
temporary. Every other load of a vector element reads its lane alone.

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> from codegen.kernel import make_params
>>> from codegen.cuda.passes import plan_cuda
>>> A = Buffer("A", (64,), "float32")
>>> B = Compute("B", (64,), lambda i: A[i] * 2.0)
>>> nest = LoopNest([B])
>>> _, inner, _ = nest.split_with_tail(nest.get_loops_for(B)[0], 4)
>>> _ = nest.vectorize(inner)
>>> nest = nest.prepare_for_codegen()
>>> print(plan_cuda(nest, make_params(nest, [A, B]), "twice").describe_vectors())
load A[ramp(i_outer * 4, 1, 4)]: 1 x float4 (16 B aligned)
store B[ramp(i_outer * 4, 1, 4)]: 1 x float4 (16 B aligned)
pointers checked at launch: A 16 B aligned, B 16 B aligned
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from te import expr as E
from te.expr import Expr, Load
from te.queries import fold_int, free_vars, has_load, structural_key
from loopnest.stmt import LetStmt, Store, iter_stmts

from .plan import CudaPlan
from .types import MAX_VECTOR_BYTES, VectorType, vector_type

__all__ = ["WideAccess", "plan_vector_accesses", "known_multiple", "wide_copy_source"]


@dataclass(frozen=True)
class WideAccess:
    """A load or store done as ``chunks`` whole accesses of the CUDA type ``vtype``.

    For a buffer of vector elements chunk ``j`` is the element at lane ``j`` of ``index``
    (its only lane when scalar); for a scalar buffer ``index`` is ``ramp(base, 1, n)`` and
    chunk ``j`` holds the ``vtype.lanes`` scalars from ``base + j * vtype.lanes``.

    >>> from te import Buffer, Var
    >>> from codegen.cuda.types import VectorType
    >>> w = WideAccess(Buffer("A", (8,), "float32x4"), Var("i"), VectorType("float4", "float", 4, 16), 1)
    >>> w.element_buffer, w.nbytes
    (True, 16)
    """

    buffer: Any
    index: Expr
    vtype: VectorType
    chunks: int
    base: Expr | None = None

    @property
    def element_buffer(self) -> bool:
        """The buffer holds vector elements (each chunk is one element)."""
        return self.buffer.dtype.is_vector

    @property
    def nbytes(self) -> int:
        return self.vtype.nbytes * self.chunks


def known_multiple(e: Expr) -> int:
    """A number the integer ``e`` is a multiple of, from its form alone (0 when ``e`` is 0):
    constants, sums (the gcd), products (the product), integer casts.

    >>> from te import Var
    >>> i, j = Var("i"), Var("j")
    >>> known_multiple((i * 32 + j) * 4), known_multiple(i * 16 + 8), known_multiple(i + 1)
    (4, 8, 1)
    """
    t = type(e)
    if t is E.IntImm:
        return abs(e.value)
    if t in (E.Add, E.Sub):
        return math.gcd(known_multiple(e.a), known_multiple(e.b))
    if t is E.Mul:
        return known_multiple(e.a) * known_multiple(e.b)
    if t is E.Cast and e.value.dtype.is_integer:
        return known_multiple(e.value)
    return 1


def _divides(c: int, e: Expr) -> bool:
    return known_multiple(e) % c == 0


def wide_access(plan: CudaPlan, buf, index: Expr) -> WideAccess | None:
    """The whole-vector form of an access ``buf[index]`` (see the module docstring), or None."""
    if buf.dtype.is_vector:
        return WideAccess(buf, index, vector_type(buf.dtype), index.dtype.lanes)
    scope = plan.scope(buf)
    if scope not in ("param", "global", "shared", "local") or buf.dtype.is_bool or type(index) is not E.Ramp:
        return None
    if fold_int(index.stride) != 1:
        return None
    n, size = index.dtype.lanes, buf.dtype.itemsize
    # a shared array is declared 16-byte aligned; a sliced one starts each slice at a
    # multiple of its size
    slice_bytes = buf.static_size() * size if scope == "shared" and plan.placements[id(buf)].slice_axes else None
    c = MAX_VECTOR_BYTES // size
    while c >= 2 and c * size >= 4:
        if n % c == 0 and _divides(c, index.base) and (slice_bytes is None or slice_bytes % (c * size) == 0):
            return WideAccess(buf, index, vector_type(buf.dtype.with_lanes(c)), n // c, index.base)
        c //= 2
    return None


def _let_vars(value: Expr) -> set[int]:
    out = set()
    stack = [value]
    while stack:
        n = stack.pop()
        if isinstance(n, E.Let):
            out.add(id(n.var))
        if isinstance(n, Expr):
            stack.extend(n.children())
    return out


def _unconditional_loads(value: Expr) -> list[Load]:
    """The loads of ``value`` evaluated whatever the conditions (not in a branch)."""
    out, stack = [], [value]
    while stack:
        n = stack.pop()
        if isinstance(n, Load):
            out.append(n)
        if isinstance(n, (E.Select, E.IfThenElse)):
            stack.append(n.cond)
        elif isinstance(n, Expr):
            stack.extend(reversed(n.children()))
    return out


def _all_loads(value: Expr) -> list[Load]:
    out, stack = [], [value]
    while stack:
        n = stack.pop()
        if isinstance(n, Load):
            out.append(n)
        if isinstance(n, Expr):
            stack.extend(n.children())
    return out


def _hoistable(ld: Load, bound: set[int]) -> bool:
    return len(ld.indices) == 1 and not has_load(ld.indices[0]) and \
        not any(id(v) in bound for v in free_vars(ld.indices[0]))


def _hoist(plan: CudaPlan, value: Expr) -> list[tuple[WideAccess, list[int]]]:
    """The whole-vector loads to read before the lanes of ``value``: each with the ids of
    the load nodes that read it."""
    bound = _let_vars(value)
    groups: dict[Any, tuple[WideAccess, list[int]]] = {}
    for ld in _unconditional_loads(value):
        if not _hoistable(ld, bound):
            continue
        key = (id(ld.buffer), structural_key(ld, vars_by_identity=True))
        if key not in groups:
            w = wide_access(plan, ld.buffer, ld.indices[0])
            if w is None:
                continue
            groups[key] = (w, [])
    if groups:
        for ld in _all_loads(value):
            key = (id(ld.buffer), structural_key(ld, vars_by_identity=True))
            if key in groups and _hoistable(ld, bound):
                groups[key][1].append(id(ld))
    return list(groups.values())


def plan_vector_accesses(plan: CudaPlan) -> None:
    """Record the whole-vector loads and stores of every vector store and vector
    ``LetStmt`` of the plan's kernels, and the alignment each buffer argument's pointer
    needs (see the module docstring)."""
    param_index = {id(p.buffer): i for i, p in enumerate(plan.buffer_params)}
    need: dict[int, int] = {}

    def require(buf, align: int) -> None:
        if id(buf) in param_index:
            i = param_index[id(buf)]
            need[i] = max(need.get(i, 1), align)

    for p in plan.buffer_params:
        if p.buffer.dtype.is_vector:
            require(p.buffer, vector_type(p.buffer.dtype).align)
    for k in plan.kernels:
        for s in iter_stmts(k.stmt):
            if isinstance(s, Store) and len(s.indices) == 1 and s.value.dtype.is_vector:
                w = wide_access(plan, s.buffer, s.indices[0])
                if w is not None:
                    plan.wide_stores[id(s)] = w
                    require(s.buffer, w.vtype.align)
                value = s.value
            elif isinstance(s, LetStmt) and s.var.dtype.is_vector:
                value = s.value
            else:
                continue
            hoisted = _hoist(plan, value)
            if hoisted:
                plan.hoisted[id(s)] = hoisted
                for w, _ in hoisted:
                    require(w.buffer, w.vtype.align)
    plan.param_alignment = dict(sorted(need.items()))


def wide_copy_source(plan: CudaPlan, s) -> tuple[WideAccess, WideAccess] | None:
    """``(stored, loaded)`` whole-vector accesses when the store ``s`` copies, unchanged, a
    load of the same element type read in the same chunks (no conversion of the lanes: the
    bits move as they are), else None."""
    w = plan.wide_stores.get(id(s))
    v = s.value
    if w is None:
        return None
    if type(v) is E.MakeVector:     # scalarized (as the printer sees it): the lanes of one load, in order
        first = v.values[0].value if type(v.values[0]) is E.ExtractLane else None
        if first is not None and all(type(x) is E.ExtractLane and x.lane == k and E.structural_equal(x.value, first)
                                     for k, x in enumerate(v.values)):
            v = first
    if type(v) is not E.Load or v.buffer.dtype != s.buffer.dtype:
        return None
    hoisted = [h for h, ids in plan.hoisted.get(id(s), []) if id(v) in ids]
    if len(hoisted) != 1 or hoisted[0].vtype != w.vtype or hoisted[0].chunks != w.chunks:
        return None
    return w, hoisted[0]
