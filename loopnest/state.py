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
from te.queries import expr_depth, free_vars
from te.recursion import recursion_guard
from te.tensor import Buffer, Tensor

from .errors import ScheduleError
from .loop import Loop, LoopIndex, resolve_loop
from .lower import input_buffers, lower_tensor, tensors_in_order
from .queries import stmt_free_vars
from .stmt_nest import check_statement
from .stmt import Block, ExternCall, For, Stmt, Store, iter_stmts, stmt_depth

__all__ = ["NestState"]


def _input_depth(tensors: Any, outputs: Any) -> int:
    """The nesting depth of what a nest is built from (tensor bodies or statements)."""
    items = tensors if tensors is not None else outputs
    items = [items] if isinstance(items, (Tensor, Stmt)) else list(items or [])
    return max([expr_depth([t.body for t in items if isinstance(t, Tensor)])]
               + [stmt_depth(s) for s in items if isinstance(s, Stmt)])


class NestState:
    """The statement tree computing ``outputs`` (Tensors), with everything they read; or,
    built as ``NestState(stmt, outputs=[B, ...])``, a statement written by hand whose output
    buffers are named (``loopnest.stmt_nest``).

    Intermediate tensors (read by the outputs but not outputs themselves) are computed
    too and get their storage allocated inside the kernel by ``prepare_for_codegen``.

    >>> from te import Compute
    >>> B = Compute("B", (8,), lambda i: i * 2)
    >>> NestState([B]).root
    for (int i = 0; i < 8; i++) {
      B[i] = i * 2;
    }
    """

    @recursion_guard(depth=lambda self, tensors=None, outputs=None, **_: _input_depth(tensors, outputs))
    def __init__(self, tensors: Any = None, outputs: Sequence[Buffer] | None = None, *, _empty: bool = False):
        is_stmt = isinstance(tensors, Stmt) or (isinstance(tensors, (list, tuple)) and tensors
                                                and all(isinstance(s, Stmt) for s in tensors))
        if is_stmt and outputs is None:
            raise TypeError("a LoopNest built from a statement needs its output buffers: "
                            "LoopNest(stmt, outputs=[B, ...])")
        if tensors is not None and outputs is not None:
            self._init_from_stmt(tensors, outputs)      # StatementError when it is not a statement
            return
        if tensors is None:
            tensors = outputs       # LoopNest(outputs=[C]): the tensors by keyword
        if isinstance(tensors, Tensor):
            tensors = [tensors]
        outputs = list(tensors) if tensors is not None else []
        for t in outputs:
            if not isinstance(t, Tensor):
                raise TypeError(f"LoopNest outputs must be tensors made by Compute/Reduce, got {t!r} (a nest "
                                "written as statements is LoopNest(stmt, outputs=[...]))")
        if len({t.name for t in outputs}) != len(outputs):
            raise ValueError("LoopNest outputs must be distinct tensors")
        tensor_list = tensors_in_order(outputs)
        names: dict[str, Buffer] = {}
        for b in tensor_list + input_buffers(tensor_list):
            if b.name in names and names[b.name] is not b:
                raise ValueError(f"two different buffers are named {b.name!r}; buffer names must be unique")
            names[b.name] = b
        self._init_state(outputs, tensor_list, input_buffers(tensor_list),
                         [t for t in tensor_list if t not in outputs], names)
        stmts = []
        if not _empty:
            for t in self.tensors:
                if t.name in self._tensor_loops:    # lowered with its group
                    continue
                s, loops = lower_tensor(t, self.fresh_name)
                for m in (t.group.members if t.group is not None else (t,)):
                    self._tensor_loops[m.name] = loops
                if s is not None:                   # None: an external call's other outputs
                    stmts.append(s)
        self.root: Block = Block(tuple(stmts))
        self._keep_origin()

    def _init_state(self, outputs: list, tensors: list, inputs: list, intermediates: list,
                    names: dict[str, Buffer]) -> None:
        self.outputs: list[Buffer] = outputs
        #: the tensors lowered into the nest, producers first (none for a nest built from a statement)
        self.tensors: list[Tensor] = tensors
        #: the buffers the kernel reads from its arguments
        self.inputs: list[Buffer] = inputs
        #: every buffer of the nest by name (inputs, tensors, and buffers made by transforms)
        self.buffers: dict[str, Buffer] = names
        #: buffers allocated inside the kernel (intermediate tensors, caches, rfactor partials)
        self.intermediates: list[Buffer] = intermediates
        self._used_names: set[str] = set(names)
        self.history: list[dict] = []
        self._prepared = False
        self._transform_depth = 0
        self._index: LoopIndex | None = None
        #: loops a full unroll removed: variable -> the call that removed it (for error messages)
        self._removed: dict[Var, str] = {}
        #: where a removed loop stood in ``get_loops_for``'s list: (variable, buffer name, the
        #: loop before it, the loop after it), in the order they were removed
        self._placeholders: list[tuple[Var, str, Var | None, Var | None]] = []
        #: the loops of the second and later copies an unroll made of a body -> the loop they copy
        self._copies: dict[Var, Var] = {}
        #: the loops of a tail nest split_with_tail made -> the loops of the main nest they
        #: correspond to: the tail loop -> (the inner loop, the outer loop); a loop cloned into
        #: the tail -> (the loop it copies,). compute_at computes at both.
        self._tail_of: dict[Var, tuple[Var, ...]] = {}
        #: loops ``tensorize`` checked as warp MMAs: variable -> intrinsic
        self._tensorized: dict[Var, str] = {}
        #: intermediates stored at a loop (compute_at, store_at): buffer name -> the loop's
        #: variable (None: the whole buffer)
        self._store_at: dict[str, Var | None] = {}
        #: buffers made by the pass shrink_storage (by id) -> the loops their Allocate goes
        #: inside (those around the innermost parallel loop at or around the storage loop)
        self._local_storage: dict[int, frozenset] = {}
        #: buffers made by cache_accesses (id -> the buffer, kept so that the id stays its own):
        #: each iteration of the loop they are cached at fills them before it reads them, so
        #: they are private to every loop around that
        self._cache_buffers: dict[int, Buffer] = {}
        #: id(cache buffer) -> (the variable of the loop it was made at, ids of the variables
        #: of that loop and the loops around it then): ``passes._filled_in_each_iteration``
        self._cache_loops: dict[int, tuple] = {}
        #: (root, ids of buffers, ids of loop variables) of a ``gpu_matmul`` tree while the root
        #: is the one it made: each iteration of those (block) loops fills those buffers before
        #: it reads them, by construction (``privacy.private_to``)
        self._tree_private: tuple | None = None
        #: (root, {(id(buffer), id(loop variable)): (buffer, variable)}, the root's loop places
        #: or None): the intermediates the analysis showed private to a loop of that root
        #: (``legality.privatizable``), carried to the root of a transform that keeps every
        #: loop's iterations and their order (``privacy.carry_private_facts``)
        self._private_facts: tuple | None = None
        self._tensor_loops: dict[str, list[Var]] = {}
        #: (buffer, loop variable, distance) of ``prefetch``, placed by ``passes.insert_prefetches``
        self._prefetches: list[tuple] = []
        #: (condition, nest) of ``specialize``, in the order they are tested
        self._versions: list[tuple] = []

    def _init_from_stmt(self, stmt: Any, outputs: Sequence[Buffer]) -> None:
        parts = check_statement(stmt, outputs)
        names = {b.name: b for b in parts.outputs + parts.inputs + parts.intermediates}
        self._init_state(parts.outputs, [], parts.inputs, parts.intermediates, names)
        self._used_names.update(parts.var_names)
        self.root = parts.root
        self._keep_origin()

    def _keep_origin(self) -> None:
        """Keep the nest as built (``_origin``), from which ``specialize`` builds a version
        from its history."""
        origin = self.copy()
        origin._origin = origin
        self._origin = origin

    # ------------------------------------------------------------------------------
    # state
    # ------------------------------------------------------------------------------
    def _snapshot(self):
        return (self.root, dict(self.buffers), list(self.intermediates), set(self._used_names),
                dict(self._tensor_loops), dict(self._removed), list(self._placeholders), dict(self._copies),
                dict(self._store_at), dict(self._tail_of), dict(self._tensorized), list(self._prefetches),
                list(self._versions))

    def _restore(self, s):
        (self.root, self.buffers, self.intermediates, self._used_names, self._tensor_loops, self._removed,
         self._placeholders, self._copies, self._store_at, self._tail_of, self._tensorized, self._prefetches,
         self._versions) = (
            s[0], dict(s[1]), list(s[2]), set(s[3]), dict(s[4]), dict(s[5]), list(s[6]), dict(s[7]), dict(s[8]),
            dict(s[9]), dict(s[10]), list(s[11]), list(s[12]))

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
        new._removed = dict(self._removed)
        new._placeholders = list(self._placeholders)
        new._copies = dict(self._copies)
        new._store_at = dict(self._store_at)
        new._tail_of = dict(self._tail_of)
        new._tensorized = dict(self._tensorized)
        new._local_storage = dict(self._local_storage)
        new._cache_buffers = dict(self._cache_buffers)
        new._cache_loops = dict(self._cache_loops)
        new._prefetches = list(self._prefetches)
        new._versions = list(self._versions)
        new.history = list(self.history)
        return new

    def sizes(self) -> dict:
        """The nest's run-time values by name: the sizes of its inputs and outputs and the
        free variables of its statements (scalar parameters); what a condition of
        ``LoopNest.specialize`` may use.

        >>> from te import Buffer, Compute, Var
        >>> N = Var("N"); A = Buffer("A", (N, 4), "float32")
        >>> sorted(NestState([Compute("B", (N, 4), lambda i, j: A[i, j])]).sizes())
        ['N']
        """
        dims = [d for b in list(self.inputs) + list(self.outputs) for d in b.dims]
        out = {v.name: v for v in free_vars(dims)}
        out.update((v.name, v) for v in stmt_free_vars(self.root))
        return out

    def unscheduled(self):
        """A new nest of the same computation as this one was built (no transform applied):
        the start of a version for ``LoopNest.specialize``.

        >>> from te import Compute
        >>> a = NestState([Compute("B", (8,), lambda i: i)])
        >>> a.root = a.root.stmts[0].body     # as a transform would replace it
        >>> print(a.unscheduled().root)
        for (int i = 0; i < 8; i++) {
          B[i] = i;
        }
        """
        return self._origin.copy()

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

        A loop that a full ``unroll`` removed keeps its place in the list, as a handle that
        raises ScheduleError when used, and the loops inside it are those of the first copy
        of its body (the loops that kept their variables), so positions read before an
        unroll still name the same loops after it.

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
        originals = [p for p in paths if not any(f.var in self._copies for f in p)]
        loops = [f.var for f in (originals or paths)[-1]]
        pending = [p for p in self._placeholders if p[1] == buf.name]
        while pending:      # a placeholder may stand next to another one, placed in a later round
            left = []
            for var, _, before, after in pending:
                ids = [id(v) for v in loops]
                if before is None:
                    loops.insert(0, var)
                elif id(before) in ids:
                    loops.insert(ids.index(id(before)) + 1, var)
                elif after is not None and id(after) in ids:
                    loops.insert(ids.index(id(after)), var)
                else:
                    left.append((var, _, before, after))
            if len(left) == len(pending):
                break
            pending = left
        return [Loop(self, v) for v in loops]

    def _note_copies(self, body: Stmt, copy: Stmt) -> None:
        """Record the loops of ``copy``, a second or later copy of ``body`` that an unroll
        made, as copies of the loops of ``body`` (``get_loops_for`` lists the loops of the
        first copy; unrolling a loop unrolls its copies too)."""
        originals = [s.var for s in iter_stmts(body) if isinstance(s, For)]
        copies = [s.var for s in iter_stmts(copy) if isinstance(s, For)]
        for o, c in zip(originals, copies):
            self._copies[c] = self._copies.get(o, o)

    def _copies_of(self, var: Var) -> list[For]:
        """The loops that exist and copy the loop of ``var`` (made by unrolls around it)."""
        index = self.loop_index()
        return [f for c, o in self._copies.items() if o is var and (f := index.get(c)) is not None]

    def _note_removed(self, var: Var, call: str) -> None:
        """Record that ``call`` (a full unroll) removes the loop of ``var``: its handles then
        raise naming ``call``, and it keeps its place in ``get_loops_for``'s lists. Call it
        before the loop is removed."""
        f = self._find_loop(var)
        names = {s.buffer.name for s in iter_stmts(f) if isinstance(s, Store)}
        for name in sorted(names):
            loops = [l.var for l in self.get_loops_for(name)]
            ids = [id(v) for v in loops]
            if id(var) in ids:
                k = ids.index(id(var))
                self._placeholders.append((var, name, loops[k - 1] if k else None,
                                           loops[k + 1] if k + 1 < len(loops) else None))
        self._removed[var] = call

    def _store_paths(self, buf: Buffer) -> list[list[For]]:
        """For each store to ``buf``, in program order, the Fors around it."""
        out: list[list[For]] = []

        def rec(s: Stmt, path: list[For]):
            if isinstance(s, Store):
                if s.buffer is buf:
                    out.append(path)
                return
            if isinstance(s, ExternCall):
                if any(b is buf for b in s.outputs):
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
