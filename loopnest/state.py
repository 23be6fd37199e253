"""The state of a loop nest and the queries on it: the root statement, the buffers
(inputs, outputs, intermediates), the names in use, and the loops (``Loop`` handles,
resolved through a ``LoopIndex`` rebuilt only when the root changes).

Transforms (``loopnest.transforms``) take a ``NestState`` and assign ``root``;
``LoopNest`` (``loopnest.nest``) is the facade that adds the transforms as methods.

>>> from te import Buffer, Compute
>>> A = Buffer("A", (4, 8), "float32")
>>> B = Compute("B", (4, 8), lambda i, j: A[i, j] + 1.0)
>>> state = NestState([B])
>>> state.get_loops_for(B), [b.name for b in state.inputs]
([Loop(i), Loop(j)], ['A'])
"""
from __future__ import annotations

from typing import Any, Sequence

from te.expr import Var
from te.queries import expr_depth
from te.recursion import recursion_guard
from te.tensor import Buffer, Tensor

from .errors import ScheduleError
from .loop import Loop, LoopIndex, resolve_loop
from .lower import input_buffers, lower_tensor, tensors_in_order
from .stmt import Block, For, Stmt, Store

__all__ = ["NestState"]


class NestState:
    """The statement tree computing ``outputs`` (Tensors), with everything they read.

    Intermediate tensors (read by the outputs but not outputs themselves) are computed
    too and get their storage allocated inside the kernel by ``prepare_for_codegen``.

    >>> from te import Compute
    >>> B = Compute("B", (8,), lambda i: i * 2)
    >>> NestState([B]).root
    for (int i = 0; i < 8; i++) {
      B[i] = i * 2;
    }
    """

    @recursion_guard(depth=lambda self, outputs, **_: expr_depth(
        [t.body for t in ([outputs] if isinstance(outputs, Tensor) else outputs) if isinstance(t, Tensor)]))
    def __init__(self, outputs: Sequence[Tensor], *, _empty: bool = False):
        if isinstance(outputs, Tensor):
            outputs = [outputs]
        outputs = list(outputs)
        for t in outputs:
            if not isinstance(t, Tensor):
                raise TypeError(f"LoopNest outputs must be tensors made by Compute/Reduce, got {t!r}")
        if len({t.name for t in outputs}) != len(outputs):
            raise ValueError("LoopNest outputs must be distinct tensors")
        self.outputs: list[Tensor] = outputs
        self.tensors: list[Tensor] = tensors_in_order(outputs)
        names: dict[str, Buffer] = {}
        for b in self.tensors + input_buffers(self.tensors):
            if b.name in names and names[b.name] is not b:
                raise ValueError(f"two different buffers are named {b.name!r}; buffer names must be unique")
            names[b.name] = b
        self.inputs: list[Buffer] = input_buffers(self.tensors)
        #: every buffer of the nest by name (inputs, tensors, and buffers made by transforms)
        self.buffers: dict[str, Buffer] = names
        #: buffers allocated inside the kernel (intermediate tensors, caches, rfactor partials)
        self.intermediates: list[Buffer] = [t for t in self.tensors if t not in outputs]
        self._used_names: set[str] = set(names)
        self.history: list[dict] = []
        self._prepared = False
        self._transform_depth = 0
        self._index: LoopIndex | None = None
        stmts = []
        self._tensor_loops: dict[str, list[Var]] = {}
        if not _empty:
            for t in self.tensors:
                s, loops = lower_tensor(t, self.fresh_name)
                self._tensor_loops[t.name] = loops
                stmts.append(s)
        self.root: Block = Block(tuple(stmts))

    # ------------------------------------------------------------------------------
    # state
    # ------------------------------------------------------------------------------
    def _snapshot(self):
        return (self.root, dict(self.buffers), list(self.intermediates), set(self._used_names),
                dict(self._tensor_loops))

    def _restore(self, s):
        self.root, self.buffers, self.intermediates, self._used_names, self._tensor_loops = (
            s[0], dict(s[1]), list(s[2]), set(s[3]), dict(s[4]))

    def fresh_name(self, base: str) -> str:
        """A loop/buffer name not yet used in this nest: ``base``, else ``base_1``, ``base_2``...

        >>> from te import Compute
        >>> state = NestState([Compute("B", (8,), lambda i: i)])
        >>> state.fresh_name("i"), state.fresh_name("i"), state.fresh_name("t")
        ('i_1', 'i_2', 't')
        """
        name = base
        k = 1
        while name in self._used_names:
            name = f"{base}_{k}"
            k += 1
        self._used_names.add(name)
        return name

    def add_buffer(self, buf: Buffer, intermediate: bool = True) -> Buffer:
        """Register a buffer made by a transform (a cache, an rfactor partial).

        >>> from te import Buffer, Compute
        >>> state = NestState([Compute("B", (8,), lambda i: i)])
        >>> T = state.add_buffer(Buffer("T", (8,), "int32"))
        >>> state.buffer("T") is T, [b.name for b in state.intermediates]
        (True, ['T'])
        """
        self.buffers[buf.name] = buf
        self._used_names.add(buf.name)
        if intermediate and buf not in self.intermediates:
            self.intermediates.append(buf)
        return buf

    def buffer(self, x: Any) -> Buffer:
        """Resolve a Buffer/Tensor (or its name) of this nest.

        >>> from te import Buffer, Compute
        >>> A = Buffer("A", (8,), "float32")
        >>> state = NestState([Compute("B", (8,), lambda i: A[i])])
        >>> state.buffer("A") is A
        True
        """
        name = x if isinstance(x, str) else getattr(x, "name", None)
        b = self.buffers.get(name)
        if b is None or (not isinstance(x, str) and b is not x):
            raise ScheduleError(f"{x!r} is not a buffer of this nest; its buffers are {sorted(self.buffers)}")
        return b

    @property
    def root_stmt(self) -> Block:
        """The root statement (``root``).

        >>> from te import Compute
        >>> state = NestState([Compute("B", (8,), lambda i: i)])
        >>> state.root_stmt is state.root
        True
        """
        return self.root

    @property
    def prepared(self) -> bool:
        """Whether ``prepare_for_codegen`` ran (no transform may follow it).

        >>> from te import Compute
        >>> NestState([Compute("B", (8,), lambda i: i)]).prepared
        False
        """
        return self._prepared

    def copy(self):
        """An independent nest with the same state (statements are immutable and shared).

        >>> from te import Compute
        >>> a = NestState([Compute("B", (8,), lambda i: i)])
        >>> b = a.copy(); _ = b.fresh_name("t")
        >>> a.fresh_name("t")
        't'
        """
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.buffers = dict(self.buffers)
        new.intermediates = list(self.intermediates)
        new._used_names = set(self._used_names)
        new._tensor_loops = dict(self._tensor_loops)
        new.history = list(self.history)
        return new

    # ------------------------------------------------------------------------------
    # loops
    # ------------------------------------------------------------------------------
    def loop_index(self) -> LoopIndex:
        """The loops of the current root; built once per root (a transform assigns a new
        root, which is rebuilt only when next asked for), so handle lookups do not rescan
        the tree.

        >>> from te import Compute
        >>> state = NestState([Compute("B", (4, 8), lambda i, j: i + j)])
        >>> state.loop_index() is state.loop_index()
        True
        >>> [f.var.name for f in state.loop_index().loops]
        ['i', 'j']
        """
        index = self._index
        if index is None or index.root is not self.root:
            index = self._index = LoopIndex(self.root)
        return index

    def _find_loop(self, var: Var) -> For | None:
        return self.loop_index().get(var)

    def loop(self, x: Any) -> Loop:
        """A handle from a handle, a For statement or a loop name (see ``resolve_loop``).

        >>> from te import Compute
        >>> NestState([Compute("B", (4, 8), lambda i, j: i + j)]).loop("j")
        Loop(j)
        """
        return resolve_loop(self, x)

    def get_all_loops(self) -> list[Loop]:
        """Every loop, pre-order.

        >>> from te import Compute
        >>> NestState([Compute("B", (4, 8), lambda i, j: i + j)]).get_all_loops()
        [Loop(i), Loop(j)]
        """
        return [Loop(self, f.var) for f in self.loop_index().loops]

    def get_loops_for(self, t: Any) -> list[Loop]:
        """The loops enclosing the computation of ``t``, outermost first (for a reduction,
        the loops around its accumulating store, reduction loops included).

        >>> from te import Buffer, Reduce, Sum
        >>> A = Buffer("A", (4, 8), "float32")
        >>> C = Reduce("C", (4,), Sum(), lambda i, k: A[i, k], (8,))
        >>> NestState([C]).get_loops_for(C)
        [Loop(i), Loop(k)]
        """
        buf = self.buffer(t)
        paths = self._store_paths(buf)
        if not paths:
            raise ScheduleError(f"{buf.name} is not computed in this nest (it was inlined, or is an input)")
        return [Loop(self, f.var) for f in paths[-1]]

    def _store_paths(self, buf: Buffer) -> list[list[For]]:
        """For each store to ``buf``, in program order, the Fors around it."""
        out: list[list[For]] = []

        def rec(s: Stmt, path: list[For]):
            if isinstance(s, Store):
                if s.buffer is buf:
                    out.append(path)
                return
            if isinstance(s, For):
                rec(s.body, path + [s])
                return
            if isinstance(s, Block):
                for x in s.stmts:
                    rec(x, path)
                return
            for attr in ("then", "otherwise", "body"):
                c = getattr(s, attr, None)
                if c is not None:
                    rec(c, path)
        rec(self.root, [])
        return out

    def get_enclosing_loops(self, loop: Any) -> list[Loop]:
        """The loops around ``loop`` (outermost first), ``loop`` included.

        >>> from te import Compute
        >>> NestState([Compute("B", (4, 8), lambda i, j: i + j)]).get_enclosing_loops("j")
        [Loop(i), Loop(j)]
        """
        var = self.loop(loop).var
        return [Loop(self, f.var) for f in self.loop_index().enclosing(var)]

    def get_parent_loop(self, loop: Any) -> Loop | None:
        """The loop directly enclosing ``loop`` (None at top level).

        >>> from te import Compute
        >>> state = NestState([Compute("B", (4, 8), lambda i, j: i + j)])
        >>> state.get_parent_loop("j"), state.get_parent_loop("i")
        (Loop(i), None)
        """
        chain = self.get_enclosing_loops(loop)
        return chain[-2] if len(chain) > 1 else None

    def get_inner_loops(self, loop: Any) -> list[Loop]:
        """The chain of singly-nested loops below ``loop`` (while the body is one For).

        >>> from te import Compute
        >>> NestState([Compute("B", (2, 4, 8), lambda i, j, k: i + j + k)]).get_inner_loops("i")
        [Loop(j), Loop(k)]
        """
        out = []
        s = self.loop(loop).stmt
        while len(s.body.stmts) == 1 and isinstance(s.body.stmts[0], For):
            s = s.body.stmts[0]
            out.append(Loop(self, s.var))
        return out
