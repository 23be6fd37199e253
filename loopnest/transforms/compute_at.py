"""compute_at: compute the part of a tensor one iteration of a consumer loop needs, inside it.

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> A = Buffer("A", (4, 10), "float32")
>>> B = Compute("B", (4, 10), lambda i, j: A[i, j] * 2.0)
>>> C = Compute("C", (4, 8), lambda i, j: B[i, j] + B[i, j + 2])
>>> nest = LoopNest([C])
>>> i, j = nest.get_loops_for(C)
>>> nest.compute_at(B, i)
>>> print(nest)
for (int i_1 = 0; i_1 < 4; i_1++) {
  for (int j_2 = 0; j_2 < 10; j_2++) {
    B[i_1, j_2] = A[i_1, j_2] * 2.0f;
  }
  for (int j_1 = 0; j_1 < 8; j_1++) {
    C[i_1, j_1] = B[i_1, j_1] + B[i_1, j_1 + 2];
  }
}
"""
from __future__ import annotations

from te.expr import IntImm, Load, Var, substitute
from te.queries import fold_int, has_load, loads
from te.tensor import Buffer, Tensor

from ..errors import ScheduleError
from ..lazy_analysis import bounds_inference
from ..loop import Loop
from ..queries import stores_to
from ..stmt import Block, For, ForKind, Stmt, Store, iter_stmts, stmt_exprs
from ._rewrite import find_loop, loop_path, remove_stores, replace_loop, tidy
from .inline import check_inputs_ready, check_movable_tensor, current_definition, definition_inputs

__all__ = ["compute_at", "compute_at_candidates"]


class _Refused(Exception):
    """A reason compute_at cannot place the tensor at one loop."""


def _consumer_reads(root: Stmt, t: Tensor) -> list[Stmt]:
    """Statements (other than ``t``'s own stores) whose expressions read ``t``."""
    out = []
    for s in iter_stmts(root):
        if isinstance(s, Store) and s.buffer is t:
            continue
        if has_load(stmt_exprs(s), t):
            out.append(s)
    return out


def _check_pristine(root: Stmt, t: Tensor) -> None:
    """``t``'s stores compute its current definition: they read no buffer made by a transform
    (a cache of cache_accesses, a partial result of rfactor), which rebuilding ``t`` from the
    definition would lose."""
    allowed = {id(b) for b in definition_inputs(root, t)} | {id(t)}
    for s in stores_to(root, t):
        for ld in loads([*s.indices, s.value]):
            if id(ld.buffer) not in allowed:
                raise _Refused(f"the store `{str(s).strip()}` reads {ld.buffer.name}, which {t.name}'s "
                               f"definition does not read ({ld.buffer.name} was made by a transform such as "
                               "rfactor or cache_accesses); apply compute_at before that transform")


def _region_loops(nest, t: Tensor, definition, bounds) -> Stmt:
    """The statements computing ``t`` (whose current definition is the expression
    ``definition`` over ``t.args``) over the region ``bounds`` (one DimBounds per dim); a
    dimension of extent 1 becomes no loop."""
    idx = []
    loops = []
    for a, b in zip(t.args, bounds):
        if fold_int(b.extent) == 1:
            idx.append(b.min)
            continue
        v = Var(nest.fresh_name(a.name), a.dtype)
        idx.append(v)
        loops.append((v, b.min, b.stop))
    mapping = dict(zip(t.args, idx))
    if t.is_reduction:
        rvars = [Var(nest.fresh_name(r.name), r.dtype) for r in t.reduce_args]
        mapping.update(zip(t.reduce_args, rvars))
        body = tidy(substitute(definition, mapping))
        index = tuple(idx)
        inner: Stmt = Store(t, index, t.reducer.combine(Load(t, index), body))
        for v, d in reversed(list(zip(rvars, t.reduce_dims))):
            inner = For(v, IntImm(0, v.dtype), d, Block((inner,)))
        stmts: tuple = (Store(t, index, t.reducer.identity(t.dtype)), inner)
    else:
        stmts = (Store(t, tuple(idx), tidy(substitute(definition, mapping))),)
    out: Stmt = Block(stmts)
    for v, lo, hi in reversed(loops):
        out = Block((For(v, lo, hi, out),))
    return out.stmts[0] if len(out.stmts) == 1 else out


def _plan(nest, t: Tensor, loop_var: Var) -> Stmt:
    """The new root with ``t`` computed inside the loop of ``loop_var``; raises _Refused."""
    root = nest.root
    f = find_loop(root, loop_var)
    if f.kind == ForKind.VECTORIZED:
        raise _Refused(f"loop {f.var.name} is vectorized (its body must stay one vector statement)")
    readers = _consumer_reads(root, t)
    inside = _consumer_reads(f.body, t)
    if not inside:
        raise _Refused(f"nothing inside loop {f.var.name} reads {t.name}")
    if len(inside) != len(readers):
        out = [s for s in readers if all(s is not x for x in inside)]
        raise _Refused(f"{t.name} is also read outside loop {f.var.name}, by `{_one_line(out[0])}`")
    _check_pristine(root, t)
    pruned = remove_stores(root, lambda s: isinstance(s, Store) and s.buffer is t)
    f0 = find_loop(pruned, loop_var)
    chain = next(p for p in loop_path(pruned, lambda s: s is f0)) + [f0]
    ranges = {g.var: (g.start, g.stop) for g in chain}
    bounds = bounds_inference().access_bounds(f0.body, t, [g.var for g in chain], writes=False,
                                              outer_ranges=ranges)
    compute = _region_loops(nest, t, current_definition(root, t), bounds)
    body = f0.body.stmts
    first = next(k for k, s in enumerate(body) if _consumer_reads(s, t))
    new_f = f0.replace(body=Block(body[:first] + (compute,) + body[first:]))
    new_root = replace_loop(pruned, loop_var, lambda _: new_f)
    _check_legal(nest, t, new_root, compute)
    return new_root


def _check_legal(nest, t: Tensor, new_root: Stmt, compute: Stmt) -> None:
    """The legality hook of compute_at: every buffer ``t`` reads is complete where ``t`` is
    now computed (``t``'s readers were checked to all be inside the loop by ``_plan``)."""
    sites = [s for s in iter_stmts(compute) if isinstance(s, Store)]
    try:
        check_inputs_ready(new_root, t, sites, "compute_at")
    except ScheduleError as e:
        raise _Refused(str(e).split(": ", 1)[1]) from None


def _one_line(s: Stmt) -> str:
    text = str(s).strip().splitlines()
    return text[0] if len(text) == 1 else text[0].rstrip(" {") + " ..."


def compute_at_candidates(nest, t: Tensor) -> list:
    """The loops (handles, outermost first) at which ``compute_at(t, loop)`` is legal."""
    out = []
    readers = _consumer_reads(nest.root, t)
    if not readers:
        return out
    for f in (s for s in iter_stmts(nest.root) if isinstance(s, For)):
        if len(_consumer_reads(f.body, t)) != len(readers):
            continue
        saved = set(nest._used_names)
        try:
            _plan(nest, t, f.var)
            out.append(Loop(nest, f.var))
        except (_Refused, ScheduleError):
            pass
        finally:
            nest._used_names = saved
    return out


def compute_at(nest, buf: Buffer, loop) -> None:
    """Compute, inside ``loop`` and before the statements that read it, the region of the
    tensor ``buf`` that one iteration of ``loop`` reads.

    Before / after ``compute_at(B, i)`` (C reads ``B[i, j]`` and ``B[i, j + 2]``)::

        for (int i = 0; i < 4; i++) {              for (int i_1 = 0; i_1 < 4; i_1++) {
          for (int j = 0; j < 10; j++) {             for (int j_2 = 0; j_2 < 10; j_2++) {
            B[i, j] = A[i, j] * 2.0f;                  B[i_1, j_2] = A[i_1, j_2] * 2.0f;
          }                                          }
        }                                            for (int j_1 = 0; j_1 < 8; j_1++) {
        for (int i_1 = 0; i_1 < 4; i_1++) {            C[i_1, j_1] = B[i_1, j_1] + B[i_1, j_1 + 2];
          for (int j_1 = 0; j_1 < 8; j_1++) {        }
            C[i_1, j_1] = B[i_1, j_1] + B[i_1, j_1 + 2];
          }                                        }
        }

    The region comes from bounds inference (``analysis.bounds``): exact for affine
    indices, as expressions of the loops enclosing and including ``loop`` (clamped to the
    shape of B), else the whole dimension. B's loops are generated afresh over that region
    from its current definition (``current_definition``: what was inlined into B stays
    inlined); a dimension of extent 1 gets no loop, a reduction gets its initialisation and
    reduction loops. Earlier schedules of B's loops are dropped, so schedule them after
    compute_at (``nest.get_loops_for(B)``). B is stored at ``loop`` (``store_at``):
    ``prepare_for_codegen`` gives it a buffer of the size of the region one iteration of
    ``loop`` touches, its indices rebased, allocated once outside ``loop`` (per iteration of
    a parallel loop); ``store_at(B, outer)`` hoists the storage. Elements needed by several
    iterations are recomputed by each.

    Legality: B must be an intermediate tensor (not an output, an input, or a buffer made
    by a transform), every read of B must be inside ``loop``, ``loop`` must not be
    vectorized, B's stores must not read a buffer made by a transform (rfactor,
    cache_accesses), and every buffer B reads must be complete where B is now computed.
    When refused, the ScheduleError lists the loops where compute_at would be legal.
    """
    check_movable_tensor(nest, buf, f"compute {buf.name} at loop {loop.name}")
    t: Tensor = buf
    try:
        new_root = _plan(nest, t, loop.var)
    except _Refused as e:
        saved = set(nest._used_names)
        legal = [l.name for l in compute_at_candidates(nest, t)]
        nest._used_names = saved
        where = (f"compute_at({t.name}, ...) would be legal at loop{'s' if len(legal) > 1 else ''} "
                 f"{', '.join(legal)}") if legal else f"there is no loop where compute_at({t.name}, ...) is legal"
        raise ScheduleError(f"cannot compute {t.name} at loop {loop.name}: {e}; {where}") from None
    nest.root = new_root
    nest._store_at[t.name] = loop.var
