"""Lowering: tensors to one For nest per tensor, in dependency order.

A Compute becomes a perfect nest with a Store of its body; a Reduce becomes an
initialising Store of the reducer's identity followed by the reduction loops that
accumulate into the element:

    for (int i = 0; i < N; i++) {
      C[i] = 0.0f;
      for (int k = 0; k < 64; k++) {
        C[i] = C[i] + B[i, k];
      }
    }

The tensors of one group (``te.multi``: a multi-output Compute, a tuple reduction) are
lowered together into one nest holding a store to each; a tuple reduction initialises every
accumulator, then stores each new value in the group's ``update_order``, so that each is
computed from the old accumulators (argmax stores the index before the value it compares):

    for (int i = 0; i < N; i++) {
      AM_index[i] = 0;
      AM_value[i] = -inff;
      for (int k = 0; k < 64; k++) {
        AM_index[i] = select(B[i, k] > AM_value[i] || ..., k, AM_index[i]);
        AM_value[i] = select(B[i, k] > AM_value[i] || ..., B[i, k], AM_value[i]);
      }
    }
"""
from __future__ import annotations

from te.expr import Expr, IntImm, Load, Var, substitute
from te.extern import ExternTensor
from te.tensor import Buffer, Tensor

from .errors import LoweringError
from .stmt import Block, ExternCall, For, Stmt, Store


def tensors_in_order(outputs: list[Tensor]) -> list[Tensor]:
    """Every tensor reachable from ``outputs``, producers before consumers.

    Raises LoweringError on a dependence cycle.
    """
    order: list[Tensor] = []
    state: dict[int, int] = {}  # 1 = visiting, 2 = done

    def visit(t: Tensor, path: list[str]):
        s = state.get(id(t))
        if s == 2:
            return
        if s == 1:
            raise LoweringError(f"tensors depend on each other in a cycle: {' -> '.join(path + [t.name])}")
        members = t.group.members if t.group is not None else (t,)   # a group is lowered as one
        for m in members:
            state[id(m)] = 1
        for b in t.inputs():
            if isinstance(b, Tensor):
                visit(b, path + [t.name])
        for m in members:
            state[id(m)] = 2
            order.append(m)
        for o in getattr(t, "extern_outputs", ()):    # the other outputs of one external call, next to it
            if state.get(id(o)) != 2:
                state[id(o)] = 2
                order.append(o)

    for t in outputs:
        visit(t, [])
    return order


def input_buffers(tensors: list[Tensor]) -> list[Buffer]:
    """Buffers read by the tensors that are not computed by them (kernel inputs)."""
    from te.view import view_root
    seen: dict[int, Buffer] = {}
    for t in tensors:
        for b in t.inputs():
            b = view_root(b)
            if not isinstance(b, Tensor):
                seen.setdefault(id(b), b)
    return list(seen.values())


def lower_tensor(t: Tensor, fresh_name) -> tuple[Stmt, list[Var]]:
    """The loop nest computing ``t``; ``fresh_name(base)`` returns a name unique in the nest.

    Returns the statement and the new loop variables (output dims, then reduction dims).
    The statement of a tensor of a group (``te.multi``) computes the whole group; an external
    tensor (``te.extern``) is one ExternCall statement without loops, made for the first output
    of the call (the statement is None for the others).
    """
    if isinstance(t, ExternTensor):   # one call for all its outputs, at the first of them
        if t.extern_outputs[0] is not t:
            return None, []
        return ExternCall(t.func, t.extern_outputs, t.extern_inputs), []
    if t.group is not None:
        return _lower_group(t.group, fresh_name)
    loop_vars = [Var(fresh_name(a.name), a.dtype) for a in t.args]
    red_vars = [Var(fresh_name(a.name), a.dtype) for a in t.reduce_args]
    mapping = dict(zip(t.args, loop_vars))
    mapping.update(zip(t.reduce_args, red_vars))
    body = substitute(t.body, mapping)
    idx = tuple(loop_vars)
    if t.is_reduction:
        acc = Load(t, idx)
        update: Stmt = Store(t, idx, t.reducer.combine(acc, body))
        for v, d in reversed(list(zip(red_vars, t.reduce_dims))):
            update = For(v, IntImm(0, v.dtype), d, Block((update,)))
        inner: Stmt = Block((Store(t, idx, t.reducer.identity(t.dtype)), update))
    else:
        inner = Block((Store(t, idx, body),))
    for v, d in reversed(list(zip(loop_vars, t.dims))):
        inner = For(v, IntImm(0, v.dtype), d, inner if isinstance(inner, Block) else Block((inner,)))
    return inner, loop_vars + red_vars


def _lower_group(group, fresh_name) -> tuple[Stmt, list[Var]]:
    """The loop nest computing every tensor of ``group`` (see the module docstring)."""
    first = group.members[0]
    loop_vars = [Var(fresh_name(a.name), a.dtype) for a in first.args]
    red_vars = [Var(fresh_name(a.name), a.dtype) for a in first.reduce_args]
    mapping = dict(zip(first.args, loop_vars))
    mapping.update(zip(first.reduce_args, red_vars))
    bodies = [substitute(t.body, mapping) for t in group.members]
    idx = tuple(loop_vars)
    if group.reducer is not None:
        accs = [Load(t, idx) for t in group.members]
        new = group.reducer.combine(accs, bodies)
        update: Stmt = Block(tuple(Store(group.members[k], idx, new[k]) for k in group.update_order))
        for v, d in reversed(list(zip(red_vars, first.reduce_dims))):
            update = For(v, IntImm(0, v.dtype), d, update if isinstance(update, Block) else Block((update,)))
        identity = group.reducer.identity([t.dtype for t in group.members])
        inner: Stmt = Block(tuple(Store(t, idx, e) for t, e in zip(group.members, identity)) + (update,))
    else:
        inner = Block(tuple(Store(t, idx, b) for t, b in zip(group.members, bodies)))
    for v, d in reversed(list(zip(loop_vars, first.dims))):
        inner = For(v, IntImm(0, v.dtype), d, inner if isinstance(inner, Block) else Block((inner,)))
    return inner, loop_vars + red_vars
