"""Kernel arguments and the aliasing facts the CUDA C declares about them.

Each kernel takes the build arguments it uses (in build order), then the launcher-allocated
global buffers it uses, then the size variables its code and launch dimensions need.

The rule for ``const`` and ``__restrict__``, conservative on purpose:

* a buffer argument that some kernel of the module writes -- an output, or an intermediate
  in launcher-allocated global memory -- is a plain ``T*`` in *every* kernel, including the
  kernels that only read it;
* a buffer no kernel of the module writes is ``const T* __restrict__`` -- except in a kernel
  where a choice (a ``select`` / ``if_then_else`` expression, or a ``Cond`` with an
  ``else``) loads it on one side and loads a written global buffer on the other: there it is
  ``const T*`` only (a *select hazard*).

Why: nvcc issues loads through ``__restrict__`` pointers it sees no store through on the
non-coherent read-only path (``ld.global.nc``). It also merges the two loads of a select
into one load through a selected pointer -- and that merged load kept the read-only path
when one side was a ``const __restrict__`` input and the other an intermediate the same
kernel had just written, which then read stale memory (wrong results on an H100; checked
in the PTX with nvcc 13 for sm_80 and sm_90: dropping ``__restrict__`` from the written
buffer alone does not avoid it, dropping it from the read-only side of the select does).
Written buffers never get ``__restrict__``, so no pointer to written memory is declared
free of aliases; read-only inputs keep both qualifiers, and the read-only cache, wherever
no select can mix them with written memory. Shared and local arrays are not pointers and
cannot be mixed with global ones. As before, the arguments of one call must not overlap
(the launcher passes separate allocations for numpy arrays; device arrays must be distinct).

Before (IR)::

    for (...) { T1[i] = B[i]; }
    for (...) { T2[i] = select(T1[i] <= -0.25f, B[i], T1[i]); }

After (plan; the doctest below shows the same for two kernels)::

    B: const __restrict__ (no kernel writes it)
      only const in k0_T2: a select loads it on one side and T1, which the module writes, on the other
    T2: neither const nor __restrict__ (written by k0_T2)
    T1 (scratch): neither const nor __restrict__ (written by k0_T2)
    k0_T2(B, T2, T1)

>>> from te import Buffer, Compute, select
>>> from loopnest import LoopNest
>>> from codegen.kernel import make_params
>>> from codegen.cuda.passes import plan_cuda
>>> B = Buffer("B", (8,), "float32")
>>> T1 = Compute("T1", (8,), lambda i: B[i] * 2.0)
>>> T2 = Compute("T2", (8,), lambda i: select(T1[i] <= -0.25, B[i], T1[i]))
>>> nest = LoopNest([T2]).prepare_for_codegen()
>>> print(plan_cuda(nest, make_params(nest, [B, T2]), "f").describe_arguments())
B: const __restrict__ (no kernel writes it)
  only const in k1_f: a select loads it on one side and T1, which the module writes, on the other
T1 (scratch): neither const nor __restrict__ (written by k0_f)
T2: neither const nor __restrict__ (written by k1_f)
k0_f(B, T1)
k1_f(B, T2, T1)
"""
from __future__ import annotations

from typing import Any

from te.expr import ExprVisitor
from te.queries import free_vars
from te.functor import Functor
from loopnest.queries import stmt_free_vars, stmt_loaded_buffers, stmt_stored_buffers
from loopnest.stmt import Cond, StmtVisitor

from ..kernel import BuildError
from .ir_queries import extent
from .plan import ArgRef, CudaPlan, KernelPlan

__all__ = ["plan_arguments"]


def plan_arguments(plan: CudaPlan) -> None:
    """Fill ``args`` and ``select_hazards`` of every kernel and ``plan.readonly`` /
    ``plan.written_by`` (see the module docstring); refuses buffers that are neither
    arguments nor allocated, and variables that are neither bound nor size arguments.

    >>> from codegen.cuda import examples
    >>> from codegen.cuda.passes import plan_cuda
    >>> from codegen.kernel import make_params
    >>> ex = examples.elementwise()
    >>> nest = ex.nest.copy().prepare_for_codegen()
    >>> plan = plan_cuda(nest, make_params(nest, ex.args), "f", upto="cuda_sync")
    >>> plan_arguments(plan)
    >>> [(a.kind, a.name, a.readonly, a.restrict) for a in plan.kernels[0].args]
    [('param', 'X', True, True), ('param', 'Y', False, False), ('size', 'N', False, False)]
    """
    param_index = {id(p.buffer): k for k, p in enumerate(plan.buffer_params)}
    used_by = []
    for k in plan.kernels:
        used, written = _buffers(k)
        for b in used.values():
            if id(b) not in param_index and id(b) not in plan.placements:
                raise BuildError(f"buffer {b.name} is used by the nest but is neither an argument of build nor "
                                 "allocated in the nest")
        for bid in written:
            plan.written_by.setdefault(bid, []).append(k.name)
        used_by.append((used, written))
    every = {bid: b for used, _ in used_by for bid, b in used.items()}
    plan.readonly = {bid for bid in every if bid not in plan.written_by}
    written_global = {bid for bid in plan.written_by if plan.scope(every[bid]) in ("param", "global")}
    for k, (used, written) in zip(plan.kernels, used_by):
        k.select_hazards = _select_hazards(k, plan.readonly, written_global)
        order = sorted((b for b in used.values() if id(b) in param_index), key=lambda b: param_index[id(b)])
        order += sorted((b for b in used.values() if plan.scope(b) == "global" and id(b) not in param_index),
                        key=lambda b: plan.placements[id(b)].scratch)
        for b in order:
            ro = id(b) in plan.readonly
            facts = dict(written=id(b) in written, readonly=ro, restrict=ro and id(b) not in k.select_hazards)
            if id(b) in param_index:
                k.args.append(ArgRef("param", param_index[id(b)], name=b.name, **facts))
            else:
                k.args.append(ArgRef("scratch", plan.placements[id(b)].scratch, name=b.name, **facts))
            k.arg_objects.append(b)
        known = plan.launch_ids(k)
        for v in _size_vars(plan, k):
            if id(v) not in known:
                raise BuildError(f"variable {v.name} is used by the nest but is neither bound by a loop nor a "
                                 "size argument of build")
            if v.dtype.is_vector:
                raise BuildError(f"scalar argument {v.name} has the vector dtype {v.dtype}; pass a buffer of "
                                 f"{v.dtype.lanes} {v.dtype.element} elements instead")
            k.args.append(ArgRef("size", var=v, name=v.name))
            k.arg_objects.append(v)


def _select_hazards(k: KernelPlan, readonly: set[int], written: set[int]) -> dict[int, tuple]:
    """``{id(R): (R, W)}`` for the read-only buffers ``R`` that a choice of kernel ``k`` loads
    on one side while it loads the written global buffer ``W`` on the other."""
    out: dict[int, tuple] = {}

    def check(one: list, other: list) -> None:
        w = next((b for b in other if id(b) in written), None)
        if w is None:
            return
        for r in one:
            if id(r) in readonly:
                out.setdefault(id(r), (r, w))

    def on_choice(t: list, f: list) -> None:
        check(t, f)
        check(f, t)

    _Choices(on_choice).visit(k.stmt)
    return out


class _Choices(StmtVisitor):
    """Calls ``on_choice(one side, other side)`` with the buffers loaded on the two sides of
    every choice in a statement tree, in pre-order: ``select`` / ``if_then_else`` expressions
    and ``Cond`` statements with an ``else``.

    >>> from te import Buffer, Var, select
    >>> from loopnest.stmt import Store
    >>> A, B, C = (Buffer(n, (8,), "float32") for n in "ABC"); i = Var("i")
    >>> st = Store(C, (i,), select(i < 4, A[i], B[i]))
    >>> _Choices(lambda t, f: print([b.name for b in t], [b.name for b in f])).visit(st)
    ['A'] ['B']
    """

    def __init__(self, on_choice):
        self.on_choice = on_choice
        self.exprs = _SelectChoices(on_choice)

    def visit_expr(self, e) -> None:
        self.exprs.visit(e)

    def visit_Cond(self, s: Cond) -> None:
        self.visit_expr(s.cond)
        if s.otherwise is not None and s.otherwise.stmts:
            self.on_choice(stmt_loaded_buffers(s.then), stmt_loaded_buffers(s.otherwise))
        self.visit(s.then)
        if s.otherwise is not None:
            self.visit(s.otherwise)


class _SelectChoices(ExprVisitor):
    """The expression side of :class:`_Choices`. The buffers of each side come from one
    bottom-up pass (``_LoadedBuffers``), so a chain of nested selects takes linear time."""

    def __init__(self, on_choice):
        self.on_choice = on_choice
        self.loaded = _LoadedBuffers()

    def visit_Select(self, e) -> None:
        self.on_choice(list(self.loaded.visit(e.t).values()), list(self.loaded.visit(e.f).values()))
        self.generic(e)

    visit_IfThenElse = visit_Select


class _LoadedBuffers(Functor):
    """``visit(e)``: ``{id(buffer): buffer}`` for the buffers ``e`` loads, in the order of
    ``te.queries.loaded_buffers``; each node is visited once (the result must not be changed).

    >>> from te import Buffer, Var
    >>> A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "int32"); i = Var("i")
    >>> [b.name for b in _LoadedBuffers().visit(A[B[i]] * 2.0 + A[i]).values()]
    ['A', 'B']
    """

    memoize = True
    _NONE: dict = {}

    def visit_Var(self, e) -> dict:
        return self._NONE

    visit_IntImm = visit_FloatImm = visit_Var

    def visit_Load(self, e) -> dict:
        out = {id(e.buffer): e.buffer}
        for x in e.indices:
            out.update(self.visit(x))
        return out

    def generic(self, e) -> dict:
        out: dict = {}
        for c in e.children():
            out.update(self.visit(c))
        return out


def _buffers(k: KernelPlan) -> tuple[dict[int, Any], set[int]]:
    """The buffers kernel ``k`` touches (those it stores to in order of first store, then the
    others in order of first load) and the ids of those it stores to."""
    stored = stmt_stored_buffers(k.stmt)
    used = {id(b): b for b in stored}
    for b in stmt_loaded_buffers(k.stmt):
        used.setdefault(id(b), b)
    return used, {id(b) for b in stored}


def _size_vars(plan: CudaPlan, k: KernelPlan) -> list:
    """The free variables of the kernel's code and thread extents, in order of appearance, then
    those of the slice sizes of its global buffers sliced per thread."""
    out = stmt_free_vars(k.stmt, [extent(f) for f in k.thread_loops], allocations=False)
    seen = {id(v) for v in out}
    for b in _buffers(k)[0].values():
        p = plan.placements.get(id(b))
        if p is not None and p.slice_stride is not None:
            for v in free_vars(p.slice_stride):
                if id(v) not in seen:
                    seen.add(id(v))
                    out.append(v)
    return out
