"""compute_inline: replace every read of a tensor by its defining expression.

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> A = Buffer("A", (8,), "float32")
>>> B = Compute("B", (8,), lambda i: A[i] * 2.0)
>>> C = Compute("C", (8,), lambda i: B[i] + 1.0)
>>> nest = LoopNest([C]); nest.compute_inline(B)
>>> print(nest)
for (int i_1 = 0; i_1 < 8; i_1++) {
  C[i_1] = A[i_1] * 2.0f + 1.0f;
}
"""
from __future__ import annotations

from te.expr import Expr, ExprMutator, IndexCheck, IntImm, Load, substitute
from te.intrinsics import cast
from te.queries import has_load, loaded_buffers
from te.extern import ExternTensor
from te.tensor import Buffer, Tensor

from ..errors import ScheduleError
from ..queries import stores_to
from ..stmt import Block, Cond, ExternCall, For, Let, Stmt, StmtMutator, Store, iter_stmts, stmt_exprs
from ._rewrite import remove_stores, tidy

__all__ = ["compute_inline", "check_inputs_ready", "check_movable_tensor", "current_definition",
           "definition_inputs"]


def check_movable_tensor(nest, buf: Buffer, action: str) -> Tensor:
    """The checks shared by compute_inline and compute_at: ``buf`` is an intermediate tensor
    computed in the nest. ``action`` completes "cannot ..." (e.g. "inline B")."""
    if isinstance(buf, ExternTensor):
        raise ScheduleError(f"cannot {action}: it is computed by the external call {buf.func.name}, which writes "
                            "it whole in one call that no transform moves or splits; compute it where it is")
    readers = [s.func.name for s in iter_stmts(nest.root)
               if isinstance(s, ExternCall) and any(b is buf for b in s.inputs)]
    if readers:
        raise ScheduleError(f"cannot {action}: the external call {readers[0]} reads it whole (as an array), so all "
                            "of its elements must be stored before that call; leave it where it is")
    if not isinstance(buf, Tensor):
        if not getattr(nest, "tensors", True):
            made = (" (this nest was written as statements, LoopNest(stmt, outputs=...); its buffers have "
                    "no definition to move)")
        elif any(b is buf for b in nest.intermediates):
            made = " (it was made by a transform such as cache_accesses or rfactor)"
        else:
            made = " (it is an input buffer)"
        raise ScheduleError(f"cannot {action}: it is not a tensor defined by Compute or Reduce{made}")
    if any(t is buf for t in nest.outputs):
        raise ScheduleError(f"cannot {action}: it is an output of the nest, so all of its elements "
                            "must be stored where the caller can read them")
    if not stores_to(nest.root, buf):
        raise ScheduleError(f"cannot {action}: it is not computed in this nest any more "
                            "(it was inlined, or nothing reads it)")
    if buf.group is not None:
        others = ", ".join(t.name for t in buf.group.members if t is not buf)
        raise ScheduleError(f"cannot {action}: it is computed together with {others} by one loop nest (a "
                            "multi-output Compute or a tuple reduction), which moves only as a whole; define it "
                            "by a Compute/Reduce of its own to inline it or compute it at a loop")
    return buf


def _paths(root: Stmt, pred) -> list[tuple]:
    """Positional paths (child indices from the root) of the statements matching ``pred``.

    A For or Let contributes its body (0); a Cond its then (0) or otherwise (1) branch;
    a Block the index of the child.
    """
    out = []

    def rec(s, path):
        if pred(s):
            out.append(path)
        if isinstance(s, Block):
            for k, x in enumerate(s.stmts):
                rec(x, path + (k,))
        elif isinstance(s, (For, Let)):
            rec(s.body, path + (0,))
        elif isinstance(s, Cond):
            rec(s.then, path + (0,))
            if s.otherwise is not None:
                rec(s.otherwise, path + (1,))
    rec(root, ())
    return out


def _container_kinds(root: Stmt, path: tuple) -> list[type]:
    kinds = []
    s = root
    for k in path:
        kinds.append(type(s))
        if isinstance(s, Block):
            s = s.stmts[k]
        elif isinstance(s, Cond):
            s = s.then if k == 0 else s.otherwise
        else:
            s = s.body
    return kinds


def check_inputs_ready(root: Stmt, tensor: Tensor, sites, op: str) -> None:
    """Every buffer that ``tensor``'s current definition reads and that the nest computes must be
    complete before each of ``sites`` (statements of ``root`` that now evaluate the
    definition): each of its stores must come earlier in the innermost block holding both.

    This is the legality of moving a computation later in program order for programs whose
    buffers are each computed once (every tensor of a LoopNest): a store that comes earlier
    in that block has already produced, in the current iteration of the loops around the
    block, what the moved computation reads.
    """
    inputs = definition_inputs(root, tensor)
    site_ids = {id(s) for s in sites}
    site_paths = _paths(root, lambda s: id(s) in site_ids)
    for x in inputs:
        xp = _paths(root, lambda s, x=x: isinstance(s, Store) and s.buffer is x)
        for p in xp:
            for q in site_paths:
                n = 0
                while n < min(len(p), len(q)) and p[n] == q[n]:
                    n += 1
                kinds = _container_kinds(root, p[:n + 1])
                ok = n < len(p) and n < len(q) and kinds[n] is Block and p[n] < q[n]
                if not ok:
                    raise ScheduleError(
                        f"cannot {op}: {tensor.name} reads {x.name}, which would not be fully computed where "
                        f"{tensor.name} is now evaluated ({x.name} is stored after that point, or in another "
                        f"branch); move {x.name}'s computation first or choose another place")


class _Inliner(ExprMutator):
    """Replace each read of a tensor of ``defs`` (id -> (tensor, body)) by the body at the
    read's indices. A data-dependent index (one that loads) is checked against the tensor's
    dimension (an ``IndexCheck`` of it, see ``loopnest.index_checks``): the read of ``T[I[i]]``
    out of T's range must still raise IndexError where T's body reads a larger buffer."""

    def __init__(self, defs: dict):
        self.defs = defs
        self.count = 0

    def visit_Load(self, e: Load) -> Expr:
        idx = tuple(self.visit(i) for i in e.indices)
        d = self.defs.get(id(e.buffer))
        if d is not None:
            self.count += 1
            t, body = d
            idx = tuple(IndexCheck(ix, t.dims[k], t.name, k) if has_load(ix) and not (
                isinstance(ix, IndexCheck) and (ix.buffer, ix.dim) == (t.name, k)) else ix for k, ix in enumerate(idx))
            # an index of another integer type than the tensor's variable (T[0] of an int64
            # dimension) takes the variable's type: the body's arithmetic is in it
            idx = tuple(ix if ix.dtype == a.dtype else _as_index(ix, a.dtype) for ix, a in zip(idx, t.args))
            return substitute(body, dict(zip(t.args, idx)))
        return e.replace(indices=idx) if any(a is not b for a, b in zip(idx, e.indices)) else e


def _as_index(ix: Expr, dtype) -> Expr:
    """``ix`` as an index of integer type ``dtype`` (a constant stays a constant)."""
    return IntImm(ix.value, dtype) if isinstance(ix, IntImm) else cast(ix, dtype)


def current_definition(root: Stmt, t: Tensor) -> Expr:
    """The expression ``t``'s stores in ``root`` compute, over ``t.args``: ``t.body`` with
    every read of a tensor that ``root`` no longer stores (one inlined earlier) replaced by
    that tensor's current definition. Transforms that rebuild ``t`` (compute_inline,
    compute_at) start from it, never from ``t.body`` alone.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (8,), "float32")
    >>> B = Compute("B", (8,), lambda i: A[i] * 2.0)
    >>> C = Compute("C", (8,), lambda i: B[i] + 1.0)
    >>> D = Compute("D", (8,), lambda i: C[i] - A[i])
    >>> nest = LoopNest([D]); nest.compute_inline(B)
    >>> print(current_definition(nest.root, C))
    A[i] * 2.0f + 1.0f
    """
    return _resolve(root, t, {})


def _resolve(root: Stmt, t: Tensor, memo: dict) -> Expr:
    gone = {}
    for b in loaded_buffers(t.body):
        if isinstance(b, Tensor) and b is not t and not b.is_reduction and not stores_to(root, b):
            if id(b) not in memo:
                memo[id(b)] = _resolve(root, b, memo)
            gone[id(b)] = (b, memo[id(b)])
    return _Inliner(gone).visit(t.body) if gone else t.body


def definition_inputs(root: Stmt, t: Tensor) -> list[Buffer]:
    """The buffers ``t``'s current definition (``current_definition``) reads, ``t`` excluded.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (8,), "float32")
    >>> B = Compute("B", (8,), lambda i: A[i] * 2.0)
    >>> C = Compute("C", (8,), lambda i: B[i] + 1.0)
    >>> D = Compute("D", (8,), lambda i: C[i] - A[i])
    >>> nest = LoopNest([D])
    >>> [b.name for b in definition_inputs(nest.root, C)]
    ['B']
    >>> nest.compute_inline(B); [b.name for b in definition_inputs(nest.root, C)]
    ['A']
    """
    body = current_definition(root, t)
    return [b for b in loaded_buffers([body, *t.dims, *t.reduce_dims]) if b is not t]


class _InlineStmt(StmtMutator):
    def __init__(self, tensor: Tensor, body: Expr):
        self.ex = _Inliner({id(tensor): (tensor, body)})
        self.sites: list[Stmt] = []

    def visit_expr(self, e):
        before = self.ex.count
        ne = self.ex.visit(e)
        return tidy(ne) if self.ex.count != before else ne

    def generic(self, s):
        out = super().generic(s)
        if out is not s and any(a is not b for a, b in zip(stmt_exprs(out), stmt_exprs(s))):
            self.sites.append(out)  # its own expressions read the tensor
        return out


def _check_legal(nest, tensor: Tensor, new_root: Stmt, sites: list[Stmt]) -> None:
    """The legality hook of compute_inline: the definition's inputs are ready where it is
    now evaluated."""
    check_inputs_ready(new_root, tensor, sites, f"inline {tensor.name}")


def compute_inline(nest, buf: Buffer) -> None:
    """Replace every read ``B[e0, e1]`` of the tensor ``B`` by its defining expression with
    the indices substituted, and drop B's loops and store. The expression is the one the
    nest now computes (``current_definition``: what was inlined into B stays inlined).

    Before / after ``compute_inline(B)``::

        for (int i = 0; i < 8; i++) {         for (int i_1 = 0; i_1 < 8; i_1++) {
          B[i] = A[i] * 2.0f;                   C[i_1] = A[i_1] * 2.0f + 1.0f;
        }                                     }
        for (int i_1 = 0; i_1 < 8; i_1++) {
          C[i_1] = B[i_1] + 1.0f;
        }

    Legality: ``B`` must be an intermediate ``Compute`` tensor (not a reduction, not an
    output, not an input or a buffer made by a transform) computed by exactly one store
    (not split with a tail loop or sliced), and every buffer its definition reads must be
    complete where B is read. B stops being an intermediate of the nest (nothing is
    allocated for it). Refused with ScheduleError otherwise; the nest is unchanged.
    """
    check_movable_tensor(nest, buf, f"inline {buf.name}")
    t: Tensor = buf
    if t.is_reduction:
        raise ScheduleError(f"cannot inline {t.name}: it is a reduction (its value is accumulated over loops, "
                            "it is not one expression); use compute_at to compute it next to its consumer")
    stores = stores_to(nest.root, t)
    if len(stores) != 1:
        raise ScheduleError(f"cannot inline {t.name}: it is computed by {len(stores)} stores (its loops were split "
                            "with a tail or sliced); inline needs the single store of its definition: inline "
                            "before splitting its loops, or split with split_with_mask")
    store = stores[0]
    body = current_definition(nest.root, t)
    root = remove_stores(nest.root, lambda s: s is store)
    m = _InlineStmt(t, body)
    new_root = m.visit(root)
    if m.ex.count == 0:
        raise ScheduleError(f"cannot inline {t.name}: nothing in the nest reads it")
    _check_legal(nest, t, new_root, m.sites)
    nest.root = new_root
    nest.intermediates = [b for b in nest.intermediates if b is not t]
