"""Structural verifier for statement trees.

Checks that every variable is bound where used (loop variables, let variables, or the
nest's free size variables), that no loop variable is bound twice, that every access has
the buffer's rank (or one index once flattened) with integer indices (an ``IndexCheck``
of the buffer, before flattening, checks the dimension it stands in; one of another buffer
is an inlined tensor's: ``compute_inline`` keeps the check of a data-dependent read of it) and happens while its
buffer is allocated, that Allocate/Free pair up in a Block, that stored values have their
buffer's element type, and that GPU loops have an axis and do not nest on the same one.
With ``LOOPNEST_VERIFY=1`` (the test suite sets it) it runs after every lowering pass.

>>> from te import Compute
>>> from loopnest import LoopNest
>>> n = LoopNest([Compute("B", (4,), lambda i: i)])
>>> n.verify()
"""
from __future__ import annotations

from te.expr import Expr, IndexCheck, Load, Var, walk
from te.functor import Functor

from .errors import VerifyError
from .queries import stmt_free_vars
from .stmt import Allocate, Block, Cond, For, ForKind, Free, Let, Stmt, Store, iter_stmts, stmt_exprs


def _binders(root: Stmt) -> set[int]:
    """ids of every variable bound by a For, a Let statement or a Let expression in ``root``."""
    from te.expr import Let as LetExpr
    out: set[int] = set()
    for s in iter_stmts(root):
        if isinstance(s, (For, Let)):
            out.add(id(s.var))
        for e in stmt_exprs(s) + ([s.start, s.stop] if isinstance(s, For) else []):
            walk(e, lambda n: out.add(id(n.var)) if isinstance(n, LetExpr) else None)
    return out


#: the kernel's scalar parameters: ``loopnest.queries.stmt_free_vars`` (name kept for importers)
free_vars = stmt_free_vars


class _Verifier(Functor):
    """``visit(node, scope)`` checks a statement or an expression; ``scope`` holds the ids of
    the variables bound around it. ``live`` holds the buffers whose Allocate is in effect."""

    def __init__(self, root: Stmt, flattened: bool):
        self.flattened = flattened
        self.binders = _binders(root)
        self.allocated = {id(s.buffer) for s in iter_stmts(root) if isinstance(s, Allocate)}
        self.live: set[int] = set()
        self.gpu_axes: dict[tuple, str] = {}      # (kind, axis) -> the enclosing loop bound to it
        self.where = ""

    # -- expressions ----------------------------------------------------------------
    def expr(self, e: Expr, scope: frozenset, where: str) -> None:
        self.where = where
        self.visit(e, scope)

    def generic(self, e: Expr, scope: frozenset) -> None:
        for c in e.children():
            self.visit(c, scope)

    def visit_Var(self, e: Var, scope: frozenset) -> None:
        if id(e) in self.binders and id(e) not in scope:
            raise VerifyError(f"variable {e.name} is used in {self.where} outside the loop or let that binds it")

    def visit_Let(self, e, scope: frozenset) -> None:
        self.visit(e.value, scope)
        self.visit(e.body, scope | {id(e.var)})

    def visit_Load(self, e: Load, scope: frozenset) -> None:
        self._access("load of", e.buffer, e.indices)
        self.generic(e, scope)

    def _access(self, what: str, buf, indices) -> None:
        want = 1 if self.flattened else buf.ndim
        if len(indices) != want and not (self.flattened and buf.ndim == 0 and len(indices) <= 1):
            raise VerifyError(f"{what} {buf.name} has {len(indices)} index(es), expected {want}")
        for k, ix in enumerate(indices):
            if not ix.dtype.is_integer:
                raise VerifyError(f"{what} {buf.name}: index {k} `{ix}` is {ix.dtype}, expected an integer")
            if type(ix) is IndexCheck and not self.flattened and ix.buffer == buf.name and ix.dim != k:
                raise VerifyError(f"{what} {buf.name}: index {k} is `{ix}`, a check of dimension {ix.dim} of "
                                  f"{ix.buffer}; an IndexCheck must check the dimension it indexes")
        if id(buf) in self.allocated and id(buf) not in self.live:
            raise VerifyError(f"{what} {buf.name} outside its allocation (before its Allocate or after its Free)")

    # -- statements -----------------------------------------------------------------
    def visit_Block(self, s: Block, scope: frozenset) -> None:
        mine: set[int] = set()
        for x in s.stmts:
            if isinstance(x, Allocate):
                mine.add(id(x.buffer))
                self.live.add(id(x.buffer))
            elif isinstance(x, Free):
                if id(x.buffer) not in mine:
                    raise VerifyError(f"free({x.buffer.name}) without a matching allocation in its block")
                mine.discard(id(x.buffer))
                self.live.discard(id(x.buffer))
            self.visit(x, scope)
        if mine:
            raise VerifyError("an allocation is not freed in its block")

    def visit_For(self, s: For, scope: frozenset) -> None:
        if id(s.var) in scope:
            raise VerifyError(f"loop variable {s.var.name} is bound twice in nested loops")
        self.expr(s.start, scope, f"the bounds of loop {s.var.name}")
        self.expr(s.stop, scope, f"the bounds of loop {s.var.name}")
        key = None
        if s.kind in (ForKind.GPU_BLOCK, ForKind.GPU_THREAD):
            if s.axis not in (0, 1, 2):
                raise VerifyError(f"{s.kind} loop {s.var.name} has GPU axis {s.axis!r}, expected 0, 1 or 2")
            key = (s.kind, s.axis)
            if key in self.gpu_axes:
                raise VerifyError(f"{s.kind} loop {s.var.name} is inside loop {self.gpu_axes[key]}, which is bound "
                                  f"to the same axis {'xyz'[s.axis]}")
            self.gpu_axes[key] = s.var.name
        try:
            self.visit(s.body, scope | {id(s.var)})
        finally:
            if key is not None:
                del self.gpu_axes[key]

    def visit_LetStmt(self, s: Let, scope: frozenset) -> None:
        self.expr(s.value, scope, f"let {s.var.name}")
        self.visit(s.body, scope | {id(s.var)})

    def visit_Store(self, s: Store, scope: frozenset) -> None:
        self._access("store to", s.buffer, s.indices)
        if s.value.dtype.element != s.buffer.dtype.element:
            raise VerifyError(f"store to {s.buffer.name}: the value is {s.value.dtype}, the buffer holds "
                              f"{s.buffer.dtype}")
        for e in stmt_exprs(s):
            self.expr(e, scope, "a Store statement")

    def visit_Prefetch(self, s, scope: frozenset) -> None:
        self._access("prefetch of", s.buffer, s.indices)
        for e in s.indices:
            self.expr(e, scope, "a Prefetch statement")

    def visit_Cond(self, s: Cond, scope: frozenset) -> None:
        self.expr(s.cond, scope, "a Cond statement")
        self.visit(s.then, scope)
        if s.otherwise is not None:
            self.visit(s.otherwise, scope)

    def visit_Allocate(self, s: Allocate, scope: frozenset) -> None:
        pass

    def visit_ExternCall(self, s, scope: frozenset) -> None:
        if scope:
            raise VerifyError(f"the external call {s.func.name} is inside a loop or let; it must stand at the "
                              "top level of the nest (it reads and writes whole buffers)")
        for b in s.buffers:
            if id(b) in self.allocated and id(b) not in self.live:
                raise VerifyError(f"the external call {s.func.name} passes {b.name} outside its allocation "
                                  "(before its Allocate or after its Free)")

    visit_Free = visit_Allocate


def verify(root: Stmt, nest=None, flattened: bool = False) -> None:
    """Raise VerifyError on the first problem found in ``root``: a variable used outside the
    loop or let that binds it (or bound twice by nested loops), an access with the wrong
    number of indices or a non-integer index, an access to an allocated buffer outside its
    Allocate / Free, Allocate and Free that do not pair up in a Block, a stored value of
    another element type than its buffer, and GPU loops with a bad axis or nested on the same
    axis.

    >>> from te import Buffer, Var
    >>> from loopnest.stmt import Allocate, Block, For, Free, Store
    >>> T = Buffer("T", (4,), "float32"); i = Var("i")
    >>> verify(Block([Allocate(T), Free(T), For(i, 0, 4, Block([Store(T, (i,), 1.0)]))]))
    Traceback (most recent call last):
    ...
    loopnest.errors.VerifyError: store to T outside its allocation (before its Allocate or after its Free)
    """
    _Verifier(root, flattened).visit(root, frozenset())
