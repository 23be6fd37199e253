"""``LoopNest.specialize``: another schedule of the same computation for the sizes where a
condition holds, chosen when the kernel runs.

A nest whose sizes are symbolic has one schedule for every size; the best schedule for a
product of 1 row is not the best for 1,000. ``nest.specialize(M <= 16, few)`` keeps
``few`` (a ``LoopNest`` of the same tensors, scheduled on its own) and, when the nest is
prepared for codegen, puts both in one kernel::

    if (M <= 16) {
      <few, prepared>
    } else {
      <the nest itself, prepared>
    }

Each schedule is prepared with its own state (its caches, its allocations, what its
analysis showed), then the loops and the buffers allocated in the versions get names that
no other part of the kernel uses. The transforms applied to the nest after ``specialize``
go on scheduling the general version (``nest.root``); several specializations are tested
in the order they were made, the first whose condition holds runs. The history records
the condition and the version's own history, so ``replay`` rebuilds both.

>>> from te import Buffer, Reduce, Sum, Var
>>> from loopnest import LoopNest
>>> N = Var("N")
>>> A = Buffer("A", (N, 8), "float32")
>>> S = Reduce("S", (N,), Sum(), lambda i, k: A[i, k], (8,))
>>> few = LoopNest([S])
>>> _ = few.unroll(few.get_loops_for(S)[1])
>>> nest = LoopNest([S]); nest.specialize(N <= 2, few)
>>> print(nest)
if (N <= 2) {
  for (int i = 0; i < N; i++) {
    S[i] = 0.0f;
    S[i] = S[i] + A[i, 0];
    S[i] = S[i] + A[i, 1];
    S[i] = S[i] + A[i, 2];
    S[i] = S[i] + A[i, 3];
    S[i] = S[i] + A[i, 4];
    S[i] = S[i] + A[i, 5];
    S[i] = S[i] + A[i, 6];
    S[i] = S[i] + A[i, 7];
  }
} else {
  for (int i = 0; i < N; i++) {
    S[i] = 0.0f;
    for (int k = 0; k < 8; k++) {
      S[i] = S[i] + A[i, k];
    }
  }
}
>>> prepared = nest.prepare_for_codegen().root
>>> [f.var.name for f in iter_stmts(prepared) if isinstance(f, For)]
['i_1', 'i', 'k']
"""
from __future__ import annotations

import copy
from typing import Any

from te.expr import Expr, ExprMutator, IndexCheck, Load, Var
from te.queries import free_vars, loads

from ..errors import ScheduleError
from ..history import encode_expr
from ..kinds import ForKind
from ..printer import stmt_to_str
from ..stmt import Allocate, Block, Cond, ExternCall, For, LetStmt, Stmt, StmtMutator, iter_stmts
from ._rewrite import clone_fresh

__all__ = ["check_condition", "version_of", "specialize", "refuse_gpu", "merged_root", "display_root"]


def check_condition(nest, condition: Any) -> Expr:
    """``condition`` if it is a scalar boolean expression of the nest's sizes (and scalar
    parameters), else ScheduleError saying what was found.

    >>> from te import Buffer, Compute, Var
    >>> from loopnest import LoopNest
    >>> N = Var("N"); A = Buffer("A", (N,), "float32")
    >>> nest = LoopNest([Compute("B", (N,), lambda i: A[i] + 1.0)])
    >>> check_condition(nest, N % 8 == 0)
    N % 8 == 0
    >>> check_condition(nest, Var("M") < 4)
    Traceback (most recent call last):
      ...
    loopnest.errors.ScheduleError: specialize: the condition `M < 4` uses M, which is not a size or parameter of this nest (its sizes and parameters: ['N'])
    """
    if not isinstance(condition, Expr) or not condition.dtype.is_bool or condition.dtype.lanes != 1:
        found = f"`{condition}` ({condition.dtype})" if isinstance(condition, Expr) else repr(condition)
        raise ScheduleError(f"specialize: the condition must be a boolean expression of the nest's sizes, such as "
                            f"`N <= 24` or `N % 16 == 0`; got {found}")
    if loads(condition):
        raise ScheduleError(f"specialize: the condition `{condition}` reads a buffer; it may only use the nest's "
                            "sizes and scalar parameters")
    sizes = nest.sizes()
    for v in free_vars(condition):
        if sizes.get(v.name) is not v:
            raise ScheduleError(f"specialize: the condition `{condition}` uses {v.name}, which is not a size or "
                                f"parameter of this nest (its sizes and parameters: {sorted(sizes)})")
    encode_expr(condition)      # refused now if the history cannot record it, before anything changes
    return condition


def _computation(nest) -> tuple:
    """What identifies the computation of a nest: its statement as built, its outputs and
    its inputs (the buffers themselves)."""
    origin = nest._origin
    return (stmt_to_str(origin.root), tuple(id(b) for b in nest.outputs),
            frozenset(id(b) for b in nest.inputs))


def version_of(nest, version: Any):
    """The version that ``specialize`` keeps: a private copy of ``version`` (a LoopNest of
    the same computation, not prepared) or the nest as built with ``version`` (a history:
    records or their JSON text) replayed on it. ScheduleError when it computes something
    else or was prepared for codegen.

    >>> from te import Buffer, Compute, Var
    >>> from loopnest import LoopNest
    >>> N = Var("N"); A = Buffer("A", (N,), "float32")
    >>> nest = LoopNest([Compute("B", (N,), lambda i: A[i] + 1.0)])
    >>> step = {"op": "split_with_tail", "args": [{"loop": "i"}, 4], "kwargs": {}}
    >>> [lp.name for lp in version_of(nest, [step]).get_all_loops()]
    ['i_outer', 'i_inner', 'i_tail']
    """
    if isinstance(version, (str, bytes, list)):
        built = nest.unscheduled()
        built.replay(version)
        return built
    if not hasattr(version, "_origin") or not hasattr(version, "history"):
        raise ScheduleError(f"specialize: the version must be a LoopNest of the same tensors (scheduled on its own) "
                            f"or its history; got {type(version).__name__}")
    if version is nest:
        raise ScheduleError("specialize: the version must be another LoopNest (LoopNest(<the same tensors>)), "
                            "not the nest itself")
    if version.prepared:
        raise ScheduleError("specialize: the version was prepared for codegen; pass it before "
                            "prepare_for_codegen() (or build(), which prepares a copy)")
    if _computation(version) != _computation(nest):
        raise ScheduleError(f"specialize: the version computes {[b.name for b in version.outputs]} from "
                            f"{sorted(b.name for b in version.inputs)} as another statement than this nest does "
                            f"({[b.name for b in nest.outputs]} from {sorted(b.name for b in nest.inputs)}); "
                            "build it as a LoopNest of the same tensors (or statement) and schedule that")
    return version.copy()


def specialize(nest, condition: Any, version: Any) -> None:
    """Where ``condition`` holds when the kernel runs, run ``version`` instead of the nest
    (see the module docstring). The nest's own statements do not change.

    >>> from te import Buffer, Compute, Var
    >>> from loopnest import LoopNest
    >>> N = Var("N"); A = Buffer("A", (N,), "float32")
    >>> nest = LoopNest([Compute("B", (N,), lambda i: A[i] + 1.0)])
    >>> specialize(nest, N == 1, nest.unscheduled())
    >>> [str(c) for c, _ in nest._versions]
    ['N == 1']
    """
    condition = check_condition(nest, condition)
    kept = version_of(nest, version)
    for n in (nest, kept):
        refuse_gpu(n)
    nest._versions.append((condition, kept))


def refuse_gpu(nest, op: str = "specialize", binding: bool = False) -> None:
    """ScheduleError where ``nest`` (or a version of it) has loops bound to the GPU and is
    specialized, or ``binding`` (the caller is about to bind it) and is specialized: the CUDA
    backend launches one grid per kernel, so a specialized nest stays on the CPU. Run after
    every transform of a specialized nest, so the binding is refused, not the build.

    >>> from te import Buffer, Compute, Var
    >>> from loopnest import LoopNest
    >>> N = Var("N"); A = Buffer("A", (N,), "float32")
    >>> nest = LoopNest([Compute("B", (N,), lambda i: A[i] + 1.0)])
    >>> nest.specialize(N < 8, nest.unscheduled())
    >>> nest.set_gpu_block_index(nest.get_loops_for("B")[0], 0)
    Traceback (most recent call last):
      ...
    loopnest.errors.ScheduleError: set_gpu_block_index: the nest is specialized (specialize), and a specialized nest cannot be bound to the GPU (the CUDA backend launches one grid per kernel); bind the loops of a nest without versions, or build one CUDA kernel per case
    """
    bound = any(f.kind in (ForKind.GPU_BLOCK, ForKind.GPU_THREAD) for f in iter_stmts(nest.root)
                if isinstance(f, For))
    if op == "specialize" and bound:
        raise ScheduleError("specialize: a nest bound to the GPU cannot be specialized (the CUDA backend launches "
                            "one grid per kernel); specialize CPU nests, or build one CUDA kernel per case")
    if nest._versions and (bound or binding):
        raise ScheduleError(f"{op}: the nest is specialized (specialize), and a specialized nest cannot be bound to "
                            "the GPU (the CUDA backend launches one grid per kernel); bind the loops of a nest "
                            "without versions, or build one CUDA kernel per case")


def display_root(nest) -> Stmt:
    """The statement ``print(nest)`` shows: the nest's root, under the tests of its
    versions when it has some (each version shown as it is scheduled, not yet prepared).

    >>> from te import Buffer, Compute, Var
    >>> from loopnest import LoopNest
    >>> N = Var("N"); A = Buffer("A", (N,), "float32")
    >>> nest = LoopNest([Compute("B", (N,), lambda i: A[i] + 1.0)])
    >>> nest.specialize(N < 8, nest.unscheduled())
    >>> print(display_root(nest))
    if (N < 8) {
      for (int i = 0; i < N; i++) {
        B[i] = A[i] + 1.0f;
      }
    } else {
      for (int i = 0; i < N; i++) {
        B[i] = A[i] + 1.0f;
      }
    }
    """
    root = nest.root
    for condition, version in reversed(nest._versions):
        root = Block((Cond(condition, display_root(version), root),))
    return root


def _names_in(root: Stmt) -> set[str]:
    """The names of the loops, lets and allocated buffers of ``root``."""
    out = set()
    for s in iter_stmts(root):
        if isinstance(s, (For, LetStmt)):
            out.add(s.var.name)
        elif isinstance(s, Allocate):
            out.add(s.buffer.name)
    return out


class _RenameLoads(ExprMutator):
    def __init__(self, moves: dict, renamed: dict):
        self.moves, self.renamed = moves, renamed

    def visit_Load(self, e: Load) -> Expr:
        idx = tuple(self.visit(i) for i in e.indices)
        buf = self.moves.get(id(e.buffer), e.buffer)
        if buf is e.buffer and all(a is b for a, b in zip(idx, e.indices)):
            return e
        return Load(buf, idx)

    def visit_IndexCheck(self, e: IndexCheck) -> Expr:
        return IndexCheck(self.visit(e.index), self.visit(e.extent), self.renamed.get(e.buffer, e.buffer), e.dim)


class _RenameBuffers(StmtMutator):
    """Every access of a buffer of ``moves`` (id -> buffer) goes to the buffer it maps to
    (the names in index checks' messages too)."""

    def __init__(self, moves: dict, renamed: dict):
        self.moves = moves
        self.exprs = _RenameLoads(moves, renamed)

    def visit_expr(self, e):
        return self.exprs.visit(e)

    def _buf(self, b):
        return self.moves.get(id(b), b)

    def _moved(self, s):
        """``s`` (a statement with one ``buffer``) with its expressions and its buffer moved."""
        s = self.generic(s)
        return s.replace(buffer=self._buf(s.buffer)) if id(s.buffer) in self.moves else s

    visit_Store = visit_Allocate = visit_Free = visit_Prefetch = _moved

    def visit_ExternCall(self, s: ExternCall):
        s = self.generic(s)
        if not any(id(b) in self.moves for b in s.buffers()):
            return s
        return s.replace(outputs=tuple(map(self._buf, s.outputs)), inputs=tuple(map(self._buf, s.inputs)))


def _renamed(nest, root: Stmt, names) -> Stmt:
    """``root`` (a prepared version) with its loops and the buffers it allocates renamed by
    ``names``; the new buffers become intermediates of ``nest``."""
    root = clone_fresh(root, names)
    moves, renamed = {}, {}
    for s in iter_stmts(root):
        if isinstance(s, Allocate) and id(s.buffer) not in moves:
            buf = copy.copy(s.buffer)
            buf.name = renamed[s.buffer.name] = names(s.buffer.name)
            moves[id(s.buffer)] = buf
            nest.add_buffer(buf)
    return _RenameBuffers(moves, renamed).visit(root) if moves else root


def merged_root(nest, prepare) -> Stmt:
    """The prepared root of a nest with versions: ``prepare(n)`` gives the prepared root of
    one schedule ``n`` (the nest or a copy of a version); the versions' loops and buffers
    are renamed apart from the nest's and each other's, and tested in order.

    >>> from te import Buffer, Compute, Var
    >>> from loopnest import LoopNest
    >>> N = Var("N"); A = Buffer("A", (N,), "float32")
    >>> nest = LoopNest([Compute("B", (N,), lambda i: A[i] + 1.0)])
    >>> nest.specialize(N < 8, nest.unscheduled())
    >>> print(merged_root(nest, lambda n: n.root))
    if (N < 8) {
      for (int i_1 = 0; i_1 < N; i_1++) {
        B[i_1] = A[i_1] + 1.0f;
      }
    } else {
      for (int i = 0; i < N; i++) {
        B[i] = A[i] + 1.0f;
      }
    }
    """
    if not nest._versions:
        return prepare(nest)
    refuse_gpu(nest, op="prepare_for_codegen")
    own = prepare(nest)
    nest._used_names |= _names_in(own)        # names the passes made in the nest's own root
    names = nest.fresh_name
    branches = []
    for condition, version in nest._versions:
        branches.append((condition, _renamed(nest, prepare(version.copy()), names)))
    root = own
    for condition, branch in reversed(branches):
        root = Block((Cond(condition, branch, root),))
    return root
