"""Loop handles: ``Loop`` names a loop of a nest by its variable, ``LoopIndex`` finds the
loops of one statement tree, and ``resolve_loop`` turns what a caller passes for a loop (a
handle, a For, a loop name) into a handle.

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> B = Compute("B", (4, 8), lambda i, j: i + j)
>>> nest = LoopNest([B])
>>> resolve_loop(nest, "j")
Loop(j)
"""
from __future__ import annotations

from typing import Any

from te.expr import Expr, IntImm, Var

from .errors import ScheduleError
from .stmt import Block, For, Stmt

__all__ = ["Loop", "LoopIndex", "resolve_loop"]


def _children(s: Stmt) -> tuple:
    if isinstance(s, Block):
        return s.stmts
    return tuple(c for c in (getattr(s, "body", None), getattr(s, "then", None), getattr(s, "otherwise", None))
                 if c is not None)


class LoopIndex:
    """The loops of one statement tree, found in one walk: in pre-order, by variable, by name
    (the first loop of that name) and with the loops around each.

    Trees are immutable, so an index stays right for as long as its ``root`` is the tree.

    >>> from te import Var
    >>> from loopnest.stmt import Block, For
    >>> i, j = Var("i"), Var("j")
    >>> idx = LoopIndex(Block((For(i, 0, 4, Block((For(j, 0, 8, Block(())),))),)))
    >>> [f.var.name for f in idx.enclosing(j)], idx.named("i").var is i
    (['i', 'j'], True)
    """

    __slots__ = ("root", "loops", "_by_var", "_by_name", "_chains")

    def __init__(self, root: Stmt):
        self.root = root
        loops: list[For] = []
        self._by_var: dict[Var, For] = {}
        self._by_name: dict[str, For] = {}
        self._chains: dict[Var, tuple] = {}
        stack: list[tuple[Stmt, tuple]] = [(root, ())]
        while stack:
            s, path = stack.pop()
            if isinstance(s, For):
                path = path + (s,)
                loops.append(s)
                self._by_var.setdefault(s.var, s)
                self._by_name.setdefault(s.var.name, s)
                self._chains.setdefault(s.var, path)
            stack.extend((c, path) for c in reversed(_children(s)))
        #: every For of the tree, pre-order
        self.loops: tuple[For, ...] = tuple(loops)

    def get(self, var: Var) -> For | None:
        """The For binding ``var``, or None."""
        return self._by_var.get(var)

    def named(self, name: str) -> For | None:
        """The first For (pre-order) whose variable is called ``name``, or None."""
        return self._by_name.get(name)

    def enclosing(self, var: Var) -> tuple[For, ...]:
        """The Fors around the loop of ``var``, outermost first, that loop included (empty
        when there is no such loop)."""
        return self._chains.get(var, ())


class Loop:
    """A stable handle on a loop of a LoopNest.

    It names the loop by its variable, so it stays valid through transforms that keep
    that loop (even when the tree around it is rebuilt). ``loop.stmt`` is the current For;
    on a loop a transform removed it raises ScheduleError.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> B = Compute("B", (8,), lambda i: i * 2)
    >>> nest = LoopNest([B]); i, = nest.get_loops_for(B)
    >>> i.name, i.extent, i.kind
    ('i', 8, 'serial')
    >>> _ = nest.split_with_tail(i, 4)
    >>> i.exists()
    False
    """

    __slots__ = ("nest", "var")

    def __init__(self, nest: Any, var: Var):
        self.nest = nest
        self.var = var

    @property
    def name(self) -> str:
        return self.var.name

    @property
    def stmt(self) -> For:
        """The current For statement; ScheduleError if the loop no longer exists."""
        f = self.nest.loop_index().get(self.var)
        if f is None and self.var in getattr(self.nest, "_removed", {}):
            raise ScheduleError(f"loop {self.name} was removed by {self.nest._removed[self.var]} (fully unrolled "
                                "into copies of its body); it has no loop left to transform, and the other "
                                "loops keep their handles")
        if f is None:
            raise ScheduleError(f"loop {self.name} no longer exists in this nest (it was removed by a "
                                "transform, e.g. split, fuse, unroll or inline); get fresh handles with "
                                "nest.get_loops_for(...)")
        return f

    @property
    def start(self) -> Expr:
        return self.stmt.start

    @property
    def stop(self) -> Expr:
        return self.stmt.stop

    @property
    def extent(self):
        """The trip count: an int when constant, else an expression."""
        e = self.stmt.extent
        return e.value if isinstance(e, IntImm) else e

    @property
    def kind(self) -> str:
        return self.stmt.kind

    def exists(self) -> bool:
        return self.nest.loop_index().get(self.var) is not None

    def __eq__(self, other):
        return isinstance(other, Loop) and other.var is self.var and other.nest is self.nest

    def __hash__(self):
        return hash(id(self.var))

    def __repr__(self) -> str:
        return f"Loop({self.name})"


def resolve_loop(nest: Any, x: Any) -> Loop:
    """A handle on a loop of ``nest`` from a handle (ScheduleError when its loop is gone), a
    For statement, a loop variable (the Var of a For written by hand) or a loop name.

    >>> from te import Compute
    >>> from loopnest import LoopNest
    >>> B = Compute("B", (8,), lambda i: i * 2)
    >>> nest = LoopNest([B])
    >>> resolve_loop(nest, "k")
    Traceback (most recent call last):
      ...
    loopnest.errors.ScheduleError: no loop named 'k' in this nest; loops are ['i']
    >>> resolve_loop(nest, LoopNest([B]).get_loops_for(B)[0])
    Traceback (most recent call last):
      ...
    loopnest.errors.ScheduleError: the handle of loop i belongs to another LoopNest, not this one; get handles from this nest (nest.get_loops_for(...), nest.loop(name)) or pass the loop's name
    """
    if isinstance(x, Loop):
        if x.nest is not nest:
            # a copy of a nest shares its loop variables, so its handles are valid here
            if nest.loop_index().get(x.var) is None and x.var not in getattr(nest, "_removed", {}):
                raise ScheduleError(f"the handle of loop {x.name} belongs to another LoopNest, not this one; "
                                    "get handles from this nest (nest.get_loops_for(...), nest.loop(name)) "
                                    "or pass the loop's name")
            x = Loop(nest, x.var)
        x.stmt  # raises if gone
        return x
    if isinstance(x, For):
        return Loop(nest, x.var)
    if isinstance(x, Var):
        h = Loop(nest, x)
        h.stmt  # raises when no loop of the nest has this variable
        return h
    if isinstance(x, str):
        f = nest.loop_index().named(x)
        if f is None:
            raise ScheduleError(f"no loop named {x!r} in this nest; loops are "
                                f"{[l.name for l in nest.get_all_loops()]}")
        return Loop(nest, f.var)
    raise TypeError(f"expected a loop handle, got {x!r}")
