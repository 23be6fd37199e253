"""LoopNest: the lowered statement tree of some tensors, its loop handles, its transforms
and their history.

>>> from te import Buffer, Compute
>>> A = Buffer("A", (16,), "float32")
>>> B = Compute("B", (16,), lambda i: A[i] + 1.0)
>>> nest = LoopNest([B])
>>> i, = nest.get_loops_for(B)
>>> print(nest)
for (int i = 0; i < 16; i++) {
  B[i] = A[i] + 1.0f;
}

Transforms are methods; each checks its legality, applies, and records itself in
``nest.history``; a refused transform raises ``ScheduleError`` and changes nothing. The
implementations live in ``loopnest.transforms`` (one module per family).
"""
from __future__ import annotations

import functools
import os
from typing import Any, Callable, Sequence

from te.expr import Expr, IntImm, Var
from te.tensor import Buffer, Tensor

from .errors import ScheduleError
from .lower import input_buffers, lower_tensor, tensors_in_order
from .stmt import Block, For, ForKind, Stmt, Store, iter_stmts

__all__ = ["LoopNest", "Loop"]


class Loop:
    """A stable handle on a loop of a LoopNest.

    It names the loop by its variable, so it stays valid through transforms that keep
    that loop (even when the tree around it is rebuilt). ``loop.stmt`` is the current For.

    >>> from te import Buffer, Compute
    >>> B = Compute("B", (8,), lambda i: i * 2)
    >>> nest = LoopNest([B]); i, = nest.get_loops_for(B)
    >>> i.name, i.extent
    ('i', 8)
    """

    __slots__ = ("nest", "var")

    def __init__(self, nest: "LoopNest", var: Var):
        self.nest = nest
        self.var = var

    @property
    def name(self) -> str:
        return self.var.name

    @property
    def stmt(self) -> For:
        """The current For statement; ScheduleError if the loop no longer exists."""
        f = self.nest._find_loop(self.var)
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
        return self.nest._find_loop(self.var) is not None

    def __eq__(self, other):
        return isinstance(other, Loop) and other.var is self.var and other.nest is self.nest

    def __hash__(self):
        return hash(id(self.var))

    def __repr__(self) -> str:
        return f"Loop({self.name})"


def _transform(fn: Callable) -> Callable:
    """Make a method a recorded, all-or-nothing transform.

    The method receives resolved arguments; if it raises, the nest's state is restored.
    On success the call is appended to the history (unless ``_record=False``).
    """
    name = fn.__name__

    @functools.wraps(fn)
    def wrapper(self: "LoopNest", *args, **kwargs):
        if self._prepared:
            raise ScheduleError(f"{name}: the nest was prepared for codegen; transforms must come before "
                                "prepare_for_codegen()")
        record = kwargs.pop("_record", True)
        saved = self._snapshot()
        depth = self._transform_depth
        self._transform_depth += 1
        try:
            result = fn(self, *args, **kwargs)
        except Exception:
            self._restore(saved)
            raise
        finally:
            self._transform_depth = depth
        if record and depth == 0:
            from .history import encode_call
            self.history.append(encode_call(self, name, args, kwargs))
        return result

    wrapper.is_transform = True
    return wrapper


class LoopNest:
    """The loop nest computing ``outputs`` (Tensors), with everything they read.

    Intermediate tensors (read by the outputs but not outputs themselves) are computed
    too and get their storage allocated inside the kernel by ``prepare_for_codegen``.
    """

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
        """A loop/buffer name not yet used in this nest: ``base``, else ``base_1``, ``base_2``..."""
        name = base
        k = 1
        while name in self._used_names:
            name = f"{base}_{k}"
            k += 1
        self._used_names.add(name)
        return name

    def add_buffer(self, buf: Buffer, intermediate: bool = True) -> Buffer:
        """Register a buffer made by a transform (a cache, an rfactor partial)."""
        self.buffers[buf.name] = buf
        self._used_names.add(buf.name)
        if intermediate and buf not in self.intermediates:
            self.intermediates.append(buf)
        return buf

    def buffer(self, x: Any) -> Buffer:
        """Resolve a Buffer/Tensor (or its name) of this nest."""
        name = x if isinstance(x, str) else getattr(x, "name", None)
        b = self.buffers.get(name)
        if b is None or (not isinstance(x, str) and b is not x):
            raise ScheduleError(f"{x!r} is not a buffer of this nest; its buffers are {sorted(self.buffers)}")
        return b

    @property
    def root_stmt(self) -> Block:
        return self.root

    @property
    def prepared(self) -> bool:
        return self._prepared

    def copy(self) -> "LoopNest":
        """An independent nest with the same state (statements are immutable and shared)."""
        new = LoopNest.__new__(LoopNest)
        new.__dict__.update(self.__dict__)
        new.buffers = dict(self.buffers)
        new.intermediates = list(self.intermediates)
        new._used_names = set(self._used_names)
        new._tensor_loops = dict(self._tensor_loops)
        new.history = list(self.history)
        return new

    # ------------------------------------------------------------------------------
    # queries
    # ------------------------------------------------------------------------------
    def _find_loop(self, var: Var) -> For | None:
        for s in iter_stmts(self.root):
            if isinstance(s, For) and s.var is var:
                return s
        return None

    def loop(self, x: Any) -> Loop:
        """A handle from a handle, a For statement or a loop name."""
        if isinstance(x, Loop):
            if x.nest is not self:
                x = Loop(self, x.var)
            x.stmt  # raises if gone
            return x
        if isinstance(x, For):
            return Loop(self, x.var)
        if isinstance(x, str):
            for s in iter_stmts(self.root):
                if isinstance(s, For) and s.var.name == x:
                    return Loop(self, s.var)
            raise ScheduleError(f"no loop named {x!r} in this nest; loops are "
                                f"{[l.name for l in self.get_all_loops()]}")
        raise TypeError(f"expected a loop handle, got {x!r}")

    def get_all_loops(self) -> list[Loop]:
        """Every loop, pre-order."""
        return [Loop(self, s.var) for s in iter_stmts(self.root) if isinstance(s, For)]

    def get_loops_for(self, t: Any) -> list[Loop]:
        """The loops enclosing the computation of ``t``, outermost first (for a reduction,
        the loops around its accumulating store, reduction loops included).

        >>> from te import Buffer, Reduce, Sum
        >>> A = Buffer("A", (4, 8), "float32")
        >>> C = Reduce("C", (4,), Sum(), lambda i, k: A[i, k], (8,))
        >>> LoopNest([C]).get_loops_for(C)
        [Loop(i), Loop(k)]
        """
        buf = self.buffer(t)
        paths = self._store_paths(buf)
        if not paths:
            raise ScheduleError(f"{buf.name} is not computed in this nest (it was inlined, or is an input)")
        return [Loop(self, f.var) for f in paths[-1]]

    def _store_paths(self, buf: Buffer) -> list[list[For]]:
        out: list[list[For]] = []

        def rec(s: Stmt, path: list[For]):
            if isinstance(s, Store):
                if s.buffer is buf:
                    out.append(path)
                return
            if isinstance(s, For):
                rec(s.body, path + [s])
                return
            for f in ("stmts",):
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
        """The loops around ``loop`` (outermost first), ``loop`` included."""
        var = self.loop(loop).var
        found: list[For] = []

        def rec(s, path):
            if isinstance(s, For):
                path = path + [s]
                if s.var is var:
                    found.extend(path)
                    return True
            for attr in ("stmts", "body", "then", "otherwise"):
                c = getattr(s, attr, None)
                if c is None:
                    continue
                for x in (c if attr == "stmts" else (c,)):
                    if rec(x, path):
                        return True
            return False
        rec(self.root, [])
        return [Loop(self, f.var) for f in found]

    def get_parent_loop(self, loop: Any) -> Loop | None:
        """The loop directly enclosing ``loop`` (None at top level)."""
        chain = self.get_enclosing_loops(loop)
        return chain[-2] if len(chain) > 1 else None

    def get_inner_loops(self, loop: Any) -> list[Loop]:
        """The chain of singly-nested loops below ``loop`` (while the body is one For)."""
        out = []
        s = self.loop(loop).stmt
        while len(s.body.stmts) == 1 and isinstance(s.body.stmts[0], For):
            s = s.body.stmts[0]
            out.append(Loop(self, s.var))
        return out

    # ------------------------------------------------------------------------------
    # printing, verification, simplification
    # ------------------------------------------------------------------------------
    def __str__(self) -> str:
        from .printer import stmt_to_str
        return stmt_to_str(self.root)

    def __repr__(self) -> str:
        return f"LoopNest(outputs={[t.name for t in self.outputs]})\n{self}"

    def verify(self) -> None:
        """Check the tree's structure; raises VerifyError naming the problem."""
        from .verify import verify
        verify(self.root, self)

    def simplify(self) -> "LoopNest":
        """Simplify every expression (constant folding, canonical index arithmetic)."""
        from .passes import simplify_stmt
        self.root = simplify_stmt(self.root)
        return self

    def prepare_for_codegen(self, dump: bool | None = None) -> "LoopNest":
        """Lower to what backends take: vectorized loops to Ramp/Broadcast, indices
        flattened through layouts, Allocate/Free around intermediates, simplified.

        The passes are listed in ``loopnest.passes.PASSES``; with ``dump=True`` (or the
        environment variable ``LOOPNEST_DUMP_PASSES=1``) the IR is printed before and after each.
        """
        if self._prepared:
            return self
        from .passes import run_passes
        if dump is None:
            dump = os.environ.get("LOOPNEST_DUMP_PASSES", "") not in ("", "0")
        self.root = run_passes(self, dump=dump)
        self._prepared = True
        return self

    # ------------------------------------------------------------------------------
    # history
    # ------------------------------------------------------------------------------
    def replay(self, history: Any) -> "LoopNest":
        """Apply a recorded history (a list of calls, or its JSON text) to this nest.

        >>> from te import Compute
        >>> B = Compute("B", (16,), lambda i: i + 1)
        >>> a = LoopNest([B]); _ = a.split_with_tail(a.get_loops_for(B)[0], 4)
        >>> b = LoopNest([B]).replay(a.history_json())
        >>> str(a) == str(b)
        True
        """
        from .history import replay
        replay(self, history)
        return self

    def history_json(self) -> str:
        """``history`` as JSON text."""
        import json
        return json.dumps(self.history)

    # ------------------------------------------------------------------------------
    # transforms (implementations in loopnest.transforms)
    # ------------------------------------------------------------------------------
    @_transform
    def split_with_tail(self, loop, factor: int):
        """Split ``loop`` into ``outer`` x ``inner`` (extent ``factor``) plus a ``tail`` loop for
        the remainder (None when ``factor`` divides a constant extent). See transforms.split."""
        from .transforms.split import split_with_tail
        return split_with_tail(self, self.loop(loop), factor)

    @_transform
    def split_with_mask(self, loop, factor: int):
        """Split ``loop`` into ``outer`` x ``inner`` with a guard instead of a tail loop."""
        from .transforms.split import split_with_mask
        return split_with_mask(self, self.loop(loop), factor)

    @_transform
    def tile(self, x, y, x_factor: int, y_factor: int):
        """Tile two perfectly nested loops: returns (xo, yo, xi, yi)."""
        from .transforms.split import tile
        return tile(self, self.loop(x), self.loop(y), x_factor, y_factor)

    @_transform
    def reorder(self, loops, permutation: Sequence[int]):
        """Reorder a perfect nest: ``permutation[d]`` is the index in ``loops`` of the loop placed at depth d."""
        from .transforms.reorder import reorder
        return reorder(self, [self.loop(l) for l in loops], list(permutation))

    @_transform
    def reorder_axis(self, a, b):
        """Swap two loops of one perfect nest."""
        from .transforms.reorder import reorder_axis
        return reorder_axis(self, self.loop(a), self.loop(b))

    @_transform
    def fuse(self, loops):
        """Fuse sibling loops with equal bounds into one loop (returns its handle)."""
        from .transforms.fuse import fuse
        return fuse(self, [self.loop(l) for l in loops])

    @_transform
    def flatten(self, loops):
        """Collapse a perfect nest of loops into one loop (returns its handle)."""
        from .transforms.fuse import flatten
        return flatten(self, [self.loop(l) for l in loops])

    @_transform
    def distribute(self, loop):
        """Loop fission: one loop per statement of the body (returns the new loops)."""
        from .transforms.fuse import distribute
        return distribute(self, self.loop(loop))

    @_transform
    def vectorize(self, loop, check: bool = True):
        """Mark ``loop`` vectorized (constant extent; no lane may write what another reads)."""
        from .transforms.loop_kinds import vectorize
        return vectorize(self, self.loop(loop), check=check)

    @_transform
    def unroll(self, loop, factor: int | None = None):
        """Unroll fully (factor None) or by ``factor``."""
        from .transforms.loop_kinds import unroll
        return unroll(self, self.loop(loop), factor)

    @_transform
    def parallelize(self, loop, check: bool = True):
        """Run the iterations of ``loop`` on several threads (no loop-carried dependence)."""
        from .transforms.loop_kinds import parallelize
        return parallelize(self, self.loop(loop), check=check)

    @_transform
    def set_gpu_block_index(self, loop, dim: int, check: bool = True):
        """Bind ``loop`` to blockIdx.{x,y,z}[dim] (``check=False`` skips the dependence check)."""
        from .transforms.loop_kinds import set_gpu_index
        return set_gpu_index(self, self.loop(loop), dim, ForKind.GPU_BLOCK, check=check)

    @_transform
    def set_gpu_thread_index(self, loop, dim: int, check: bool = True):
        """Bind ``loop`` to threadIdx.{x,y,z}[dim] (``check=False`` skips the dependence check)."""
        from .transforms.loop_kinds import set_gpu_index
        return set_gpu_index(self, self.loop(loop), dim, ForKind.GPU_THREAD, check=check)

    @_transform
    def slice_head(self, loop, factor: int):
        """Peel the first ``factor`` iterations into their own loop: returns (head, tail)."""
        from .transforms.split import slice_head
        return slice_head(self, self.loop(loop), factor)

    @_transform
    def slice_tail(self, loop, factor: int):
        """Peel the last ``factor`` iterations into their own loop: returns (head, tail)."""
        from .transforms.split import slice_tail
        return slice_tail(self, self.loop(loop), factor)

    @_transform
    def normalize(self, loop):
        """Make ``loop`` start at 0."""
        from .transforms.split import normalize
        return normalize(self, self.loop(loop))

    @_transform
    def compute_inline(self, t):
        """Replace every read of tensor ``t`` by its defining expression and drop its loops."""
        from .transforms.inline import compute_inline
        return compute_inline(self, self.buffer(t))

    @_transform
    def compute_at(self, t, loop):
        """Compute the region of ``t`` needed by one iteration of ``loop`` inside it."""
        from .transforms.compute_at import compute_at
        return compute_at(self, self.buffer(t), self.loop(loop))

    @_transform
    def cache_accesses(self, buffer, name: str, loop):
        """A local buffer for the region of ``buffer`` that ``loop`` touches (returns it)."""
        from .transforms.cache import cache_accesses
        return cache_accesses(self, self.buffer(buffer), name, self.loop(loop))

    @_transform
    def rfactor(self, t, loop):
        """Split the reduction of ``t`` at reduction ``loop`` into partial results (returns the buffer)."""
        from .transforms.rfactor import rfactor
        return rfactor(self, self.buffer(t), self.loop(loop))

    @_transform
    def eliminate_dead_stores(self):
        """Remove stores to intermediates that nothing reads."""
        from .transforms.dead_stores import eliminate_dead_stores
        return eliminate_dead_stores(self)
