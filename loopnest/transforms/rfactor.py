"""rfactor: split a reduction at one of its reduction loops into partial results.

>>> from te import Buffer, Reduce, Sum
>>> from loopnest import LoopNest
>>> A = Buffer("A", (4, 8), "float32")
>>> C = Reduce("C", (4,), Sum(), lambda i, k: A[i, k], (8,))
>>> nest = LoopNest([C]); i, k = nest.get_loops_for(C)
>>> C_rf = nest.rfactor(C, k)
>>> print(nest)
for (int i = 0; i < 4; i++) {
  for (int k_rf = 0; k_rf < 8; k_rf++) {
    C_rf[i, k_rf] = 0.0f;
  }
  for (int k = 0; k < 8; k++) {
    C_rf[i, k] = C_rf[i, k] + A[i, k];
  }
  C[i] = 0.0f;
  for (int k_1 = 0; k_1 < 8; k_1++) {
    C[i] = C[i] + C_rf[i, k_1];
  }
}
"""
from __future__ import annotations

from te.expr import Expr, ExprMutator, IntImm, Load, Var, structural_equal
from te.queries import free_vars, has_load, loads
from te.tensor import Buffer, Tensor

from ..errors import ScheduleError
from ..queries import stores_to
from ..stmt import Block, For, Stmt, StmtMutator, Store, iter_stmts, stmt_exprs
from ._rewrite import loop_path, sub, tidy

__all__ = ["rfactor"]


def _refuse(t, loop, why: str):
    raise ScheduleError(f"cannot rfactor {t.name} at loop {loop.name}: {why}")


def _same_indices(a, b) -> bool:
    return len(a) == len(b) and all(x is y or structural_equal(x, y) for x, y in zip(a, b))


class _Rewrite(StmtMutator):
    """Init store -> partial init loop; update store -> accumulate into the partial buffer;
    the statement holding the update (in the common block) is followed by the final reduction."""

    def __init__(self, init, update, container_child, replace_init, new_update, finals):
        self.init, self.update = init, update
        self.child = container_child
        self.replace_init, self.new_update, self.finals = replace_init, new_update, finals

    def visit_Store(self, s):
        if s is self.init:
            return self.replace_init
        if s is self.update:
            return self.new_update
        return s

    def visit_Block(self, b: Block):
        out = []
        changed = False
        for x in b.stmts:
            nx = self.visit(x)
            changed |= nx is not x
            if isinstance(nx, Block) and not isinstance(x, Block):
                out.extend(nx.stmts)
            else:
                out.append(nx)
            if x is self.child:
                out.extend(self.finals)
                changed = True
        return Block(tuple(out)) if changed else b


def rfactor(nest, buf: Buffer, loop) -> Buffer:
    """Split the reduction of ``C`` at its reduction loop ``loop`` (variable ``r``): a new
    buffer ``C_rf`` with one more dimension holds one partial result per iteration of
    ``r`` (accumulating over the other reduction loops), and a final loop reduces them into
    ``C``. The rfactor'd loop then carries no dependence on C, so it can be reordered
    outwards and parallelized or vectorized.

    Before / after ``rfactor(C, k)``::

        for (int i = 0; i < 4; i++) {          for (int i = 0; i < 4; i++) {
          C[i] = 0.0f;                           for (int k_rf = 0; k_rf < 8; k_rf++) {
          for (int k = 0; k < 8; k++) {            C_rf[i, k_rf] = 0.0f;
            C[i] = C[i] + A[i, k];               }
          }                                      for (int k = 0; k < 8; k++) {
        }                                          C_rf[i, k] = C_rf[i, k] + A[i, k];
                                                 }
                                                 C[i] = 0.0f;
                                                 for (int k_1 = 0; k_1 < 8; k_1++) {
                                                   C[i] = C[i] + C_rf[i, k_1];
                                                 }
                                               }

    Legality: the reducer must be associative and commutative (Sum, Prod, Max, Min and
    user reducers are assumed to be; floating-point sums are reassociated, so results
    may differ in rounding). ``C`` must be a reduction computed by one initialising store
    and one accumulating store (split its reduction loops with split_with_mask, not with a
    tail), ``loop`` one of its reduction loops (around the accumulation, not the
    initialisation, its variable not an index of C) with bounds that do not depend on other
    loops, and nothing else inside the reduction may read C. Returns ``C_rf`` (an
    intermediate of the nest).
    """
    t = buf
    if not isinstance(t, Tensor) or not t.is_reduction:
        _refuse(t, loop, f"{t.name} is not a reduction (rfactor splits the reduction loops of a Reduce tensor)")
    if t.group is not None:
        _refuse(t, loop, f"{t.name} is one value of the tuple reduction of {', '.join(m.name for m in t.group.members)}"
                         " (argmax, argmin, a TupleReducer), whose partial results rfactor cannot combine; split "
                         "and reorder its loops, or parallelize/vectorize its spatial loops instead")
    stores = stores_to(nest.root, t)
    inits = [s for s in stores if not has_load(s.value, t)]
    updates = [s for s in stores if has_load(s.value, t)]
    if len(inits) != 1 or len(updates) != 1:
        _refuse(t, loop, f"{t.name} is computed by {len(inits)} initialising and {len(updates)} accumulating "
                         "stores; rfactor needs one of each (split reduction loops with split_with_mask, and "
                         "apply rfactor before compute_at or slicing)")
    init, update = inits[0], updates[0]
    idx = update.indices
    acc_loads = loads(update.value, t)
    if not _same_indices(init.indices, idx) or any(not _same_indices(ld.indices, idx) for ld in acc_loads):
        _refuse(t, loop, f"the stores of {t.name} do not all access the same element")
    f = loop.stmt
    up_path = next(iter(loop_path(nest.root, lambda s: s is update)))
    init_path = next(iter(loop_path(nest.root, lambda s: s is init)))
    if all(g is not f for g in up_path):
        _refuse(t, loop, f"loop {loop.name} does not enclose the accumulation of {t.name}")
    if any(g is f for g in init_path) or any(v is f.var for v in free_vars(idx)):
        _refuse(t, loop, f"loop {loop.name} is not a reduction loop of {t.name} (it indexes {t.name}, or encloses "
                         "its initialisation); rfactor needs a reduction loop")
    outer_ids = {id(g.var) for g in up_path}
    if any(id(v) in outer_ids for v in free_vars([f.start, f.stop])):
        _refuse(t, loop, f"the bounds of loop {loop.name} depend on other loops; its extent must be fixed")
    # the init's loops must all enclose the update too (the others are reduction loops)
    if len(up_path) < len(init_path) or any(g is not h for g, h in zip(up_path, init_path)):
        _refuse(t, loop, f"the initialisation and the accumulation of {t.name} are not in the same loops")
    container = _block_holding(nest.root, init)
    child = next((s for s in container.stmts if s is not init and _contains(s, update)), None)
    if child is None or not _contains(child, f):
        _refuse(t, loop, f"the accumulation of {t.name} is not next to its initialisation")
    for s in iter_stmts(child):
        if s is update:
            continue
        if has_load(stmt_exprs(s), t) or (isinstance(s, Store) and s.buffer is t):
            _refuse(t, loop, f"{t.name} is also accessed inside its reduction loops (`{str(s).splitlines()[0]}`), "
                             "so its partial values are observed")
    ext = tidy(sub(f.stop, f.start))
    rf = Buffer(nest.fresh_name(f"{t.name}_rf"), tuple(t.dims) + (ext,), t.dtype)
    r = f.var
    rel = tidy(sub(r, f.start))
    rf_idx = tuple(idx) + (rel,)
    rv = Var(nest.fresh_name(f"{r.name}_rf"), r.dtype)
    zero = IntImm(0, r.dtype)
    rf_init = For(rv, zero, ext, Block((Store(rf, tuple(idx) + (rv,), init.value),)))
    acc = _ReplaceAcc(t, rf, rf_idx).visit(update.value)
    new_update = Store(rf, rf_idx, acc)
    fv = Var(nest.fresh_name(r.name), r.dtype)
    final = For(fv, zero, ext, Block((Store(t, idx, t.reducer.combine(Load(t, idx), Load(rf, tuple(idx) + (fv,)))),)))
    finals = [Store(t, idx, init.value), final]
    new_root = _Rewrite(init, update, child, rf_init, new_update, finals).visit(nest.root)
    nest.root = new_root
    nest.add_buffer(rf)
    return rf


def _block_holding(root: Stmt, s: Stmt) -> Block | None:
    """The Block that has ``s`` as a direct child."""
    for x in iter_stmts(root):
        if isinstance(x, Block) and any(y is s for y in x.stmts):
            return x
    return None


def _contains(s: Stmt, target: Stmt) -> bool:
    return any(x is target for x in iter_stmts(s))


class _ReplaceAcc(ExprMutator):
    def __init__(self, t, rf, rf_idx):
        self.t, self.rf, self.rf_idx = t, rf, rf_idx

    def visit_Load(self, e: Load) -> Expr:
        if e.buffer is self.t:
            return Load(self.rf, self.rf_idx)
        return self.generic(e)
