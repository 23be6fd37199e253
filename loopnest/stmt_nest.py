"""Loop nests written by hand: the checks ``LoopNest.from_stmt`` runs on a statement (For,
Store, Block, Cond, Let) and the roles it gives the buffers the statement touches.

A scan, an in-place update or a histogram is not a Compute (each element is not one
expression of the indices); it is written as statements, with the buffers the caller
sees named as outputs:

>>> from te import Buffer, Var
>>> from loopnest.stmt import Block, For, Store
>>> A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "float32")
>>> i = Var("i")
>>> scan = Block([Store(B, (0,), A[0]), For(i, 0, 7, Store(B, (i + 1,), B[i] + A[i + 1]))])
>>> parts = check_statement(scan, [B])
>>> [b.name for b in parts.inputs], [b.name for b in parts.outputs], parts.intermediates
(['A'], ['B'], [])

Roles: an output is a buffer the statement writes and the caller passes (or leaves out to
have it allocated); an input is a buffer whose values on entry the statement may read: every
buffer it reads and does not write, and the outputs that some read may see before any write
(an in-place update, a histogram's bins; the dependence analysis decides, conservatively for
data-dependent indices). The caller must pass an output that is also an input. A buffer the statement writes that is not an output is an intermediate, allocated
inside the kernel like an intermediate tensor (its contents start undefined).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from te.expr import Let as LetExpr, Var, walk
from te.tensor import Buffer

from .lazy_analysis import dependence_analysis
from .errors import StatementError, VerifyError
from .queries import external_buffers, stmt_free_vars, stmt_loaded_buffers, stmt_stored_buffers
from .stmt import Allocate, Block, For, ForKind, Free, Let, Prefetch, Stmt, as_block, iter_stmts, stmt_exprs
from .verify import verify

__all__ = ["StatementParts", "check_statement"]


@dataclass
class StatementParts:
    """What ``check_statement`` found: the statement as a Block and the buffers by role, each
    list in order of first access.

    >>> from te import Buffer, Var
    >>> from loopnest.stmt import For, Store
    >>> H = Buffer("H", (4,), "int32"); i = Var("i")
    >>> check_statement(For(i, 0, 4, Store(H, (i,), 0)), [H]).root
    for (int i = 0; i < 4; i++) {
      H[i] = 0;
    }
    """

    root: Block
    outputs: list
    inputs: list
    intermediates: list
    #: the names of the variables (bound and free) the statement uses
    var_names: set


def _as_root(stmt: Any) -> Block:
    if isinstance(stmt, Stmt):
        return as_block(stmt)
    if isinstance(stmt, (list, tuple)) and stmt and all(isinstance(s, Stmt) for s in stmt):
        return as_block(stmt)
    raise StatementError(f"LoopNest.from_stmt takes a statement (For, Store, Block, Cond, Let) or a list of "
                         f"statements, got {stmt!r}")


def _check_binders(root: Block) -> set[str]:
    """Every loop and let variable bound by exactly one statement, under a name no other
    binder, free variable or buffer uses (loops are named by their variable's name)."""
    seen: dict[int, str] = {}
    names: dict[str, str] = {}

    def bind(v: Var, what: str) -> None:
        if id(v) in seen:
            raise StatementError(f"variable {v.name} is bound by {seen[id(v)]} and again by {what}; give each "
                                 "loop and let its own Var")
        if v.name in names:
            raise StatementError(f"{what} and {names[v.name]} both use the name {v.name!r}; loops are named by "
                                 "their variable's name (handles, history), so give them distinct names")
        seen[id(v)] = names[v.name] = what

    for s in iter_stmts(root):
        if isinstance(s, (Allocate, Free)):
            raise StatementError(f"the statement holds {type(s).__name__}({s.buffer.name}); storage is "
                                 "allocated by prepare_for_codegen: write to the buffer and leave it out of "
                                 "outputs to make it an intermediate")
        if isinstance(s, Prefetch):
            raise StatementError(f"the statement holds a prefetch of {s.buffer.name}; prefetches are placed by "
                                 "prepare_for_codegen, inside the buffer, for nest.prefetch(buffer, loop): "
                                 "leave it out and call that")
        if isinstance(s, For):
            if s.kind != ForKind.SERIAL:
                raise StatementError(f"loop {s.var.name} is {s.kind}; write serial loops and use the transforms "
                                     "(parallelize, vectorize, unroll, ...), which check that the kind is legal")
            bind(s.var, f"loop {s.var.name}")
        elif isinstance(s, Let):
            bind(s.var, f"let {s.var.name}")
        for e in stmt_exprs(s):
            walk(e, lambda n: bind(n.var, f"let expression {n.var.name}") if isinstance(n, LetExpr) else None)
    for v in stmt_free_vars(root):
        if v.name in names:
            raise StatementError(f"the free variable {v.name} has the name of {names[v.name]}; rename one of them")
    return set(names) | {v.name for v in stmt_free_vars(root)}


def _check_buffers(root: Block, outputs: Sequence[Any]) -> tuple[list, list, list]:
    stored = stmt_stored_buffers(root)
    loaded = stmt_loaded_buffers(root)
    by_name: dict[str, Any] = {}
    for b in stored + loaded:
        if by_name.setdefault(b.name, b) is not b:
            raise StatementError(f"two different buffers are named {b.name!r}; buffer names must be unique")
    if isinstance(outputs, Buffer):
        outputs = [outputs]
    outputs = list(outputs)
    if not outputs:
        raise StatementError("LoopNest.from_stmt needs the output buffers: outputs=[B, ...] (the buffers the "
                             "caller passes and reads back)")
    for b in outputs:
        if not isinstance(b, Buffer):
            raise StatementError(f"outputs must be Buffers, got {b!r}")
        if not any(s is b for s in stored):
            near = by_name.get(b.name)
            extra = " (a different Buffer object of that name is)" if near is not None and near is not b else ""
            raise StatementError(f"output {b.name} is not written by the statement{extra}; the statement writes "
                                 f"{[s.name for s in stored]}")
    if len({b.name for b in outputs}) != len(outputs):
        raise StatementError(f"outputs {[b.name for b in outputs]} list a buffer twice")
    out_ids = {id(b) for b in outputs}
    loaded_ids = {id(b) for b in loaded}
    intermediates = [b for b in stored if id(b) not in out_ids]
    inter_ids = {id(b) for b in intermediates}
    reads_initial = dependence_analysis().reads_initial_values
    inputs = [b for b in external_buffers(root) if id(b) in loaded_ids and id(b) not in inter_ids
              and (id(b) not in out_ids or reads_initial(root, b))]
    return outputs, inputs, intermediates


def check_statement(stmt: Any, outputs: Sequence[Any]) -> StatementParts:
    """Check a hand-written statement and sort its buffers into outputs, inputs and
    intermediates (see the module text). Raises ``StatementError`` naming the problem: a
    statement that is not For / Store / Block / Cond / Let (Allocate and Free are made by
    ``prepare_for_codegen``), a loop that is not serial, a variable bound twice or used
    outside its loop, two loops of one name, an access with the wrong number of indices or a
    non-integer index, no outputs, or an output the statement never writes.

    >>> from te import Buffer, Var
    >>> from loopnest.stmt import For, Store
    >>> A = Buffer("A", (4, 4), "float32"); i = Var("i")
    >>> check_statement(For(i, 0, 4, Store(A, (i,), 1.0)), [A])
    Traceback (most recent call last):
      ...
    loopnest.errors.StatementError: store to A has 1 index(es), expected 2
    >>> loop = For(i, 0, 4, Store(A, (i, 0), 1.0))
    >>> check_statement([loop, loop], [A])
    Traceback (most recent call last):
      ...
    loopnest.errors.StatementError: variable i is bound by loop i and again by loop i; give each loop and let its own Var
    """
    root = _as_root(stmt)
    var_names = _check_binders(root)
    try:
        verify(root)
    except VerifyError as e:
        raise StatementError(str(e)) from None
    outs, inputs, intermediates = _check_buffers(root, outputs)
    return StatementParts(root, outs, inputs, intermediates, var_names)
