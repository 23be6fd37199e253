"""Statement nodes of the loop-nest IR: For, Store, Cond, Block, Let, Allocate, Free, ExternCall,
Prefetch.

Statements are immutable; ``replace`` returns the same object when nothing changes, so a
transform that rebuilds a tree shares every untouched subtree with the old one.

>>> from te import Buffer, Var
>>> A = Buffer("A", (8,), "float32")
>>> i = Var("i")
>>> loop = For(i, 0, 8, Block([Store(A, (i,), A[i] + 1.0)]))
>>> print(loop)
for (int i = 0; i < 8; i++) {
  A[i] = A[i] + 1.0f;
}
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable, Iterator, Sequence

from te.expr import Expr, Var, as_expr, check_condition, const
from te.functor import Functor
from te.queries import expr_depth
from te.recursion import recursion_guard

from .kinds import ForKind
from .printer import stmt_to_str

__all__ = ["ForKind", "Stmt", "For", "Store", "Cond", "Block", "Let", "LetStmt", "Allocate", "Free", "ExternCall",
           "Prefetch",
           "StmtMutator", "StmtVisitor", "iter_stmts", "stmt_children", "stmt_depth", "as_block"]


class Stmt:
    """Base class of statements."""

    __slots__ = ()

    def replace(self, **changes) -> "Stmt":
        """A copy with fields replaced; ``self`` when every new value is the old object."""
        if all(getattr(self, k) is v for k, v in changes.items()):
            return self
        vals = {f.name: getattr(self, f.name) for f in fields(self)}
        vals.update(changes)
        return type(self)(**vals)

    def __str__(self) -> str:
        return _stmt_str(self)

    def __repr__(self) -> str:
        return self.__str__()


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class Block(Stmt):
    """A sequence of statements."""

    stmts: tuple = ()

    def __post_init__(self):
        if not isinstance(self.stmts, tuple):
            object.__setattr__(self, "stmts", tuple(self.stmts))
        for s in self.stmts:
            if not isinstance(s, Stmt):
                raise TypeError(f"Block holds statements, got {type(s).__name__}")


def as_block(s: Stmt | Sequence[Stmt] | None) -> Block:
    """Wrap a statement (or a list of them) in a Block; Blocks pass through."""
    if s is None:
        return Block(())
    if isinstance(s, Block):
        return s
    if isinstance(s, Stmt):
        return Block((s,))
    return Block(tuple(s))


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class For(Stmt):
    """``for (var = start; var < stop; var++) body`` with a loop ``kind``.

    ``axis`` is the GPU dimension (0, 1, 2 for x, y, z) of gpu_block / gpu_thread loops.
    ``unroll_factor`` is set on partially unrolled loops.
    """

    var: Var
    start: Expr
    stop: Expr
    body: Block
    kind: str = ForKind.SERIAL
    axis: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "start", as_expr(self.start, self.var))
        object.__setattr__(self, "stop", as_expr(self.stop, self.var))
        if not isinstance(self.body, Block):
            object.__setattr__(self, "body", as_block(self.body))
        if self.kind not in ForKind.ALL:
            raise ValueError(f"unknown loop kind {self.kind!r}; expected one of {ForKind.ALL}")
        for what, e in (("start", self.start), ("stop", self.stop)):
            if e.dtype != self.var.dtype:
                raise TypeError(f"loop {self.var.name}: {what} `{e}` is {e.dtype}, the variable is {self.var.dtype}")

    @property
    def extent(self) -> Expr:
        from te.expr import IntImm
        from te.simplify import simplify
        if isinstance(self.start, IntImm) and self.start.value == 0:
            return self.stop
        return simplify(self.stop - self.start)


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class Store(Stmt):
    """``buffer[indices] = value``."""

    buffer: Any
    indices: tuple
    value: Expr

    def __post_init__(self):
        idx = tuple(as_expr(i) for i in self.indices)
        object.__setattr__(self, "indices", idx)
        value = self.value if isinstance(self.value, Expr) else const(self.value, self.buffer.dtype)
        lanes = idx[-1].dtype.lanes if idx else 1
        want = self.buffer.dtype.with_lanes(lanes * self.buffer.dtype.lanes)
        if value.dtype != want:
            if value.dtype.element == want.element and value.dtype.lanes == 1 and want.lanes > 1:
                from te.expr import Broadcast
                value = Broadcast(value, want.lanes)
            else:
                raise TypeError(f"store to {self.buffer.name}: value `{value}` is {value.dtype}, "
                                f"the buffer element is {want}")
        object.__setattr__(self, "value", value)


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class Cond(Stmt):
    """``if (cond) then else otherwise``."""

    cond: Expr
    then: Block
    otherwise: Block | None = None

    def __post_init__(self):
        if not isinstance(self.then, Block):
            object.__setattr__(self, "then", as_block(self.then))
        if self.otherwise is not None and not isinstance(self.otherwise, Block):
            object.__setattr__(self, "otherwise", as_block(self.otherwise))
        if not isinstance(self.cond, Expr):
            object.__setattr__(self, "cond", check_condition(self.cond, "Cond's condition"))
        if not self.cond.dtype.is_bool or self.cond.dtype.is_vector:
            raise TypeError(f"condition `{self.cond}` must be a scalar bool, got {self.cond.dtype}")


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class LetStmt(Stmt):
    """``var = value`` bound for ``body``. Exported as ``Let`` too; the class is named
    ``LetStmt`` so that no statement class shares its name with an expression class
    (``te.Let``): one functor can dispatch on both (``visit_LetStmt``, ``visit_Let``).
    """

    var: Var
    value: Expr
    body: Block

    def __post_init__(self):
        if not isinstance(self.body, Block):
            object.__setattr__(self, "body", as_block(self.body))
        if self.var.dtype != self.value.dtype:
            raise TypeError(f"let {self.var.name}: variable is {self.var.dtype}, value is {self.value.dtype}")


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class Allocate(Stmt):
    """Storage for ``buffer`` from here until the matching ``Free`` in the same Block.

    ``scope`` is "global" by default; "shared" / "local" on GPUs.
    """

    buffer: Any
    scope: str = "global"


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class Free(Stmt):
    """Release the storage of ``buffer``."""

    buffer: Any


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class ExternCall(Stmt):
    """One call of an external function (``te.extern.ExternFunc``) that reads every element of
    ``inputs`` and writes every element of ``outputs`` (tuples of buffers). It holds no
    expressions and no statements: walkers pass over it, and the analyses treat it as touching
    whole buffers. It stands at the top level of a nest (no transform moves it into a loop).

    >>> from te import Buffer
    >>> from te.extern import ExternFunc
    >>> A, B = Buffer("A", (4,), "float32"), Buffer("B", (4,), "float32")
    >>> print(ExternCall(ExternFunc("f", py_fn=print), (B,), (A,)))
    B = extern f(A);
    """

    func: Any
    outputs: tuple
    inputs: tuple

    def __post_init__(self):
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "inputs", tuple(self.inputs))

    @property
    def buffers(self) -> tuple:
        """The buffers in call order: the inputs, then the outputs."""
        return self.inputs + self.outputs


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class Prefetch(Stmt):
    """A cache hint: bring the element(s) ``buffer[indices]`` (every lane of a vector index) into
    the data cache, to be written when ``write``. It changes no value and backends may drop
    it (IREval checks its indices and does nothing else; CUDA drops it). The pass
    ``insert_prefetches`` makes them (``LoopNest.prefetch``), with indices that the nest
    itself accesses, so a prefetch never leaves its buffer.

    >>> from te import Buffer, Var
    >>> A = Buffer("A", (8, 16), "float32"); i = Var("i")
    >>> print(Prefetch(A, (i + 1, 0), write=True))
    prefetch for write A[i + 1, 0];
    """

    buffer: Any
    indices: tuple
    write: bool = False

    def __post_init__(self):
        object.__setattr__(self, "indices", tuple(as_expr(i) for i in self.indices))


# ------------------------------------------------------------------------------------
# traversal
# ------------------------------------------------------------------------------------
Let = LetStmt

_EXPR_FIELDS = {For: ("start", "stop"), Store: ("indices", "value"), Cond: ("cond",), Let: ("value",),
                Prefetch: ("indices",)}
_STMT_FIELDS = {For: ("body",), Cond: ("then", "otherwise"), Let: ("body",), Block: ("stmts",)}


class StmtMutator(Functor):
    """Rebuild a statement tree. Override ``visit_<Class>`` or ``visit_expr`` (called on every
    top-level expression of a statement; identity by default). Unchanged subtrees are shared.
    """

    def visit_expr(self, e: Expr) -> Expr:
        return e

    def generic(self, s: Stmt) -> Stmt | None:
        changes = {}
        for f in _EXPR_FIELDS.get(type(s), ()):
            v = getattr(s, f)
            if isinstance(v, tuple):
                nv = tuple(self.visit_expr(x) for x in v)
                if any(a is not b for a, b in zip(nv, v)):
                    changes[f] = nv
            else:
                nv = self.visit_expr(v)
                if nv is not v:
                    changes[f] = nv
        for f in _STMT_FIELDS.get(type(s), ()):
            v = getattr(s, f)
            if v is None:
                continue
            if f == "stmts":
                out = []
                changed = False
                for x in v:
                    nx = self.visit(x)
                    changed |= nx is not x
                    if nx is None:
                        continue
                    if isinstance(nx, Block) and not isinstance(x, Block):
                        out.extend(nx.stmts)  # a statement replaced by several is spliced in
                    else:
                        out.append(nx)
                if changed:
                    changes[f] = tuple(out)
            else:
                nv = self.visit(v)
                if nv is not v:
                    changes[f] = as_block(nv) if nv is not None else (None if f == "otherwise" else Block(()))
        return s.replace(**changes) if changes else s


class StmtVisitor(Functor):
    """Walk a statement tree; override ``visit_<Class>`` and call ``generic`` to recurse."""

    def visit_expr(self, e: Expr):
        pass

    def generic(self, s: Stmt):
        for f in _EXPR_FIELDS.get(type(s), ()):
            v = getattr(s, f)
            for x in (v if isinstance(v, tuple) else (v,)):
                self.visit_expr(x)
        for f in _STMT_FIELDS.get(type(s), ()):
            v = getattr(s, f)
            if v is None:
                continue
            for x in (v if f == "stmts" else (v,)):
                self.visit(x)


def stmt_children(s: Stmt) -> list[Stmt]:
    """The statements directly inside ``s``, in order.

    >>> from te import Buffer, Var
    >>> A = Buffer("A", (8,), "float32"); i = Var("i")
    >>> s = Store(A, (i,), 1.0)
    >>> stmt_children(For(i, 0, 8, Block([s]))), stmt_children(s)
    ([A[i] = 1.0f;], [])
    """
    kids = []
    for f in _STMT_FIELDS.get(type(s), ()):
        v = getattr(s, f)
        if v is not None:
            kids.extend(v if f == "stmts" else (v,))
    return kids


def iter_stmts(s: Stmt, skip: Callable[[Stmt], bool] | None = None) -> Iterator[Stmt]:
    """Every statement of the tree, pre-order; a statement for which ``skip`` holds is left
    out with everything inside it. (One Store object may stand at several places of a tree:
    a transform shares the subtrees it does not change, so "outside loop f" is the walk
    skipping f, not a comparison with the statements inside f.)

    >>> from te import Buffer, Var
    >>> A = Buffer("A", (8,), "float32"); i = Var("i")
    >>> s = Store(A, (0,), 1.0); root = Block([s, For(i, 0, 8, Block([s]))])
    >>> len(list(iter_stmts(root))), len(list(iter_stmts(root, skip=lambda x: isinstance(x, For))))
    (5, 2)
    """
    stack = [s]
    while stack:
        x = stack.pop()
        if skip is not None and skip(x):
            continue
        yield x
        stack.extend(reversed(stmt_children(x)))


def stmt_exprs(s: Stmt) -> list[Expr]:
    """The expressions held directly by one statement (not its children)."""
    out = []
    for f in _EXPR_FIELDS.get(type(s), ()):
        v = getattr(s, f)
        out.extend(v if isinstance(v, tuple) else (v,))
    return out


def stmt_depth(root: Stmt) -> int:
    """The nesting depth of ``root``: over its statements, the most statements enclosing one
    (itself included) plus the ``te.queries.expr_depth`` of its expressions. Computed without
    recursion; recursive passes over ``root`` need about this many nested calls.

    >>> from te import Buffer, Var
    >>> A = Buffer("A", (8,), "float32"); i = Var("i")
    >>> stmt_depth(Store(A, (0,), A[1] + 1.0)), stmt_depth(Block([For(i, 0, 8, Block([Store(A, (i,), 1.0)]))]))
    (4, 5)
    """
    best = 0
    stack = [(root, 1)]
    while stack:
        s, level = stack.pop()
        best = max(best, level + expr_depth(stmt_exprs(s)))
        for f in _STMT_FIELDS.get(type(s), ()):
            v = getattr(s, f)
            if v is not None:
                stack.extend((x, level + 1) for x in (v if f == "stmts" else (v,)))
    return best


#: printing a statement recurses through its expressions (a deep one runs on a deep thread)
_stmt_str = recursion_guard(stmt_to_str, depth=stmt_depth)
