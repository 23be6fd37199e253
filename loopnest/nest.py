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
implementations live in ``loopnest.transforms`` (one module per family); they work on the
state below them (``loopnest.state``, ``loopnest.loop``), and this module sits above them.
"""
from __future__ import annotations

import functools
import json
import os
from typing import Any, Callable, Sequence

from te.recursion import recursion_guard

from .auto.gpu import auto_schedule_gpu as _auto_schedule_gpu
from .auto.schedule import auto_schedule as _auto_schedule
from .errors import ScheduleError
from .history import encode_call, replay as replay_history
from .loop import Loop
from .passes import run_passes, simplify_stmt
from .printer import stmt_to_str
from .state import NestState
from .stmt import ForKind, stmt_depth
from .transforms import cache as _cache
from .transforms import compute_at as _compute_at
from .transforms import store_at as _store_at
from .transforms import dead_stores as _dead_stores
from .transforms import distribute as _distribute
from .transforms import fuse as _fuse
from .transforms import inline as _inline
from .transforms import loop_kinds as _loop_kinds
from .transforms import prefetch as _prefetch
from .transforms import privacy as _privacy
from .transforms import privatize as _privatize
from .transforms import gpu_matmul as _gpu_matmul
from .transforms import gpu_wgmma as _gpu_wgmma  # noqa: F401  (the tree of gpu_matmul(wgmma=True))
from .transforms import tensorize as _tensorize
from .transforms import tensorize_wgmma as _tensorize_wgmma  # noqa: F401  (registers the warpgroup MMA's check)
from .transforms import reorder as _reorder
from .transforms import specialize as _specialize
from .transforms import rfactor as _rfactor
from .transforms import split as _split
from .verify import verify as verify_tree

__all__ = ["LoopNest", "Loop"]


#: transforms that check the parallel and GPU loops they change themselves, or change only
#: kinds of loops; every other one is followed by ``refuse_lost_privacy``
_CHECKS_CONCURRENT_LOOPS = frozenset({"vectorize", "parallelize", "set_gpu_block_index", "set_gpu_thread_index",
                                      "reorder", "reorder_axis", "tensorize", "specialize"})

#: the guard of the nest's entry points: the error names the nesting depth of its tree
_deep_safe = recursion_guard(depth=lambda self, *args, **kwargs: stmt_depth(self.root))


def _transform(fn: Callable) -> Callable:
    """Make a method a recorded, all-or-nothing transform.

    The method receives resolved arguments; if it raises, the nest's state is restored.
    On success the call is appended to the history (unless ``_record=False``); a method with
    a ``resolve_args(nest, args, kwargs)`` attribute (see ``_resolving``) first has its
    arguments resolved by it (a default that depends on the machine becomes the value used),
    so the history records what was applied. Being all-or-nothing, a transform that runs out
    of recursion on a deep tree runs again on a deep thread (``te.recursion``).
    """
    name = fn.__name__
    resolve = getattr(fn, "resolve_args", None)

    @functools.wraps(fn)
    @_deep_safe
    def wrapper(self: "LoopNest", *args, **kwargs):
        if self._prepared:
            raise ScheduleError(f"{name}: the nest was prepared for codegen; transforms must come before "
                                "prepare_for_codegen()")
        record = kwargs.pop("_record", True)
        if resolve is not None:
            args, kwargs = resolve(self, args, kwargs)
        saved = self._snapshot()
        saved_root, saved_facts = self.root, self._private_facts
        depth = self._transform_depth
        self._transform_depth += 1
        try:
            result = fn(self, *args, **kwargs)
            if depth == 0 and name in _privacy.KEEPS_ITERATIONS:
                _privacy.carry_private_facts(self, saved_root, name)
            if depth == 0 and name not in _CHECKS_CONCURRENT_LOOPS:
                _privacy.refuse_lost_privacy(self, saved_root, name)
            if depth == 0 and any(f.kind == ForKind.GPU_THREAD for f in self.loop_index().loops):
                _loop_kinds.check_kernel_blocks(self, name)
            if depth == 0 and self._versions:
                _specialize.refuse_gpu(self, op=name)
            if depth == 0 and self._tensorized:
                _tensorize.check_tensorized(self, name)
        except Exception:
            self._restore(saved)
            self._private_facts = saved_facts
            raise
        finally:
            self._transform_depth = depth
        if record and depth == 0:
            self.history.append(encode_call(self, name, args, kwargs))
        return result

    wrapper.is_transform = True
    return wrapper


def _resolving(resolve: Callable) -> Callable:
    """Give a transform method the ``resolve_args`` that ``_transform`` applies before the call."""
    def mark(fn: Callable) -> Callable:
        fn.resolve_args = resolve
        return fn
    return mark


def _privatize_args(nest, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``privatize``'s arguments with ``parts`` resolved to a number (the cores by default)."""
    if len(args) > 2:
        return args[:2] + (_privatize.resolve_parts(args[2]),) + args[3:], kwargs
    return args, {**kwargs, "parts": _privatize.resolve_parts(kwargs.get("parts"))}


def _specialize_args(nest, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``specialize``'s arguments with a version given as a history built (the history then
    records the version's own history, whichever way it was given)."""
    def built(version):
        return _specialize.version_of(nest, version) if isinstance(version, (str, bytes, list)) else version
    if len(args) > 1:
        return args[:1] + (built(args[1]),) + args[2:], kwargs
    if "version" in kwargs:
        return args, {**kwargs, "version": built(kwargs["version"])}
    return args, kwargs


class LoopNest(NestState):
    """The loop nest computing ``outputs`` (Tensors), with everything they read: its state and
    loop queries (``loopnest.state.NestState``) plus the transforms as recorded methods.

    Intermediate tensors (read by the outputs but not outputs themselves) are computed
    too and get their storage allocated inside the kernel by ``prepare_for_codegen``.

    >>> from te import Buffer, Compute
    >>> A = Buffer("A", (8,), "float32")
    >>> nest = LoopNest([Compute("B", (8,), lambda i: A[i] * 2.0)])
    >>> _ = nest.vectorize(nest.get_loops_for("B")[0])
    >>> print(nest.prepare_for_codegen())
    B[ramp(0, 1, 8)] = A[ramp(0, 1, 8)] * broadcast(2.0f, 8);

    ``LoopNest(stmt, outputs=[B, ...])`` (or ``LoopNest.from_stmt``) builds the nest from a
    statement written by hand instead of from tensors.
    """

    @classmethod
    def from_stmt(cls, stmt, outputs) -> "LoopNest":
        """The nest of a statement written by hand (For, Store, Block, Cond, Let, or a list of
        them) whose ``outputs`` are the buffers the caller passes and reads back: a scan, an
        in-place update, a histogram. ``loopnest.stmt_nest`` checks the statement and sorts
        its buffers into inputs, outputs and intermediates (``StatementError`` otherwise).
        Every transform works on it with the same legality analysis as a nest of tensors
        (``compute_inline``, ``compute_at`` and ``rfactor`` need tensors and refuse).

        The history names loops and buffers by name, so it replays on a nest built from the
        same statement (or one with the same names), as it does on a nest of the same tensors.

        >>> from te import Buffer, Var
        >>> from loopnest.stmt import Block, For, Store
        >>> A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "float32"); i = Var("i")
        >>> scan = Block([Store(B, (0,), A[0]), For(i, 0, 7, Store(B, (i + 1,), B[i] + A[i + 1]))])
        >>> nest = LoopNest.from_stmt(scan, outputs=[B])
        >>> nest.parallelize(i)
        Traceback (most recent call last):
          ...
        loopnest.errors.ScheduleError: cannot parallelize loop i: `B[i + 1] = B[i] + A[i + 1]` reads B[i], written by the same statement (as B[i + 1]) in the previous iteration of loop i (flow dependence on B carried by loop i)
        >>> _ = nest.split_with_mask(i, 4)
        >>> str(LoopNest(scan, outputs=[B]).replay(nest.history_json())) == str(nest)
        True
        """
        return cls(stmt, outputs=outputs)

    # ------------------------------------------------------------------------------
    # printing, verification, simplification
    # ------------------------------------------------------------------------------
    @_deep_safe
    def __str__(self) -> str:
        """The statements, then a comment per ``prefetch`` still to be placed (by
        ``prepare_for_codegen``, which prints them where they go)."""
        text = stmt_to_str(_specialize.display_root(self) if self._versions and not self._prepared else self.root)
        if not self._prepared:
            text += "".join(f"\n// prefetch {b.name} at loop {v.name}, {d} iteration{'s' if d > 1 else ''} ahead"
                            for b, v, d in self._prefetches)
        return text

    def __repr__(self) -> str:
        return f"LoopNest(outputs={[t.name for t in self.outputs]})\n{self}"

    @_deep_safe
    def verify(self) -> None:
        """Check the tree's structure; raises VerifyError naming the problem."""
        verify_tree(self.root, self)

    @_transform
    def simplify(self) -> "LoopNest":
        """Simplify every expression (constant folding, canonical index arithmetic, the uses
        of a loop variable of extent 1 replaced by its start). Recorded in the history like
        the other transforms, so a replayed history makes the same nest.

        >>> from te import Buffer, Compute
        >>> A = Buffer("A", (1, 4), "float32")
        >>> nest = LoopNest([Compute("B", (1, 4), lambda i, j: A[i, j] * 2.0)]).simplify()
        >>> nest.history
        [{'op': 'simplify', 'args': [], 'kwargs': {}}]
        >>> str(LoopNest(nest.outputs).replay(nest.history_json())) == str(nest)
        True
        """
        self.root = simplify_stmt(self.root)
        return self

    @_deep_safe
    def prepare_for_codegen(self, dump: bool | None = None) -> "LoopNest":
        """Lower to what backends take: vectorized loops to Ramp/Broadcast, indices
        flattened through layouts, Allocate/Free around intermediates, simplified.

        The passes are listed in ``loopnest.passes.PASSES``; with ``dump=True`` (or the
        environment variable ``LOOPNEST_DUMP_PASSES=1``) the IR is printed before and after each.
        """
        if self._prepared:
            return self
        if dump is None:
            dump = os.environ.get("LOOPNEST_DUMP_PASSES", "") not in ("", "0")
        self.root = _specialize.merged_root(
            self, lambda n: run_passes(n, dump=dump) if n is self else n.prepare_for_codegen(dump).root)
        self._prepared = True
        return self

    # ------------------------------------------------------------------------------
    # the automatic scheduler
    # ------------------------------------------------------------------------------
    @_deep_safe
    def auto_schedule(self, target=None):
        """Schedule this (unscheduled) nest for ``target`` (a ``Target``; None: this machine)
        without search, in a fraction of a second: element-wise intermediates inlined or
        computed per row of their consumer, contractions register-blocked for the target's
        vector registers, reductions accumulated in vector lanes, innermost loops vectorized
        at the native width, outer loops parallel when there is work for several cores.
        Valid for symbolic sizes. Every transform applied is in ``history``; the returned
        report (kept as ``auto_schedule_report``) prints one line per tensor: the choice and
        its reason. See ``loopnest.auto.schedule``. ``target="cuda"`` binds the nest to a GPU
        with the CUDA templates' defaults instead (``loopnest.auto.gpu.auto_schedule_gpu``).

        >>> from te import Buffer, Compute
        >>> from loopnest import Target
        >>> A = Buffer("A", (64, 64), "float32")
        >>> nest = LoopNest([Compute("B", (64, 64), lambda i, j: A[i, j] + 1.0)])
        >>> print(nest.auto_schedule(Target(vector_bits=256, cores=1)))
        B: vectorized 8 wide (element-wise)
        >>> str(LoopNest(nest.outputs).replay(nest.history_json())) == str(nest)
        True
        """
        if isinstance(target, str) and target == "cuda":
            _specialize.refuse_gpu(self, op="auto_schedule('cuda')", binding=True)
            return _auto_schedule_gpu(self)
        return _auto_schedule(self, target)

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
        replay_history(self, history)
        return self

    def history_json(self) -> str:
        """``history`` as JSON text."""
        return json.dumps(self.history)

    # ------------------------------------------------------------------------------
    # transforms (implementations in loopnest.transforms)
    # ------------------------------------------------------------------------------
    @_transform
    def split_with_tail(self, loop, factor: int):
        """Split ``loop`` into ``outer`` x ``inner`` (extent ``factor``) plus a ``tail`` loop for
        the remainder (None when ``factor`` divides a constant extent). See transforms.split."""
        return _split.split_with_tail(self, self.loop(loop), factor)

    @_transform
    def split_with_mask(self, loop, factor: int):
        """Split ``loop`` into ``outer`` x ``inner`` with a guard instead of a tail loop."""
        return _split.split_with_mask(self, self.loop(loop), factor)

    @_transform
    def split_with_overlap(self, loop, factor: int):
        """Split ``loop`` into ``outer`` x ``inner`` with the last tile shifted back inside the
        loop (it runs some iterations again), where that is legal. See transforms.split."""
        return _split.split_with_overlap(self, self.loop(loop), factor)

    @_transform
    def tile(self, x, y, x_factor: int, y_factor: int):
        """Tile two perfectly nested loops: returns (xo, yo, xi, yi)."""
        return _split.tile(self, self.loop(x), self.loop(y), x_factor, y_factor)

    @_transform
    def reorder(self, loops, permutation: Sequence[int]):
        """Reorder a perfect nest: ``permutation[d]`` is the index in ``loops`` of the loop placed at depth d."""
        return _reorder.reorder(self, [self.loop(l) for l in loops], list(permutation))

    @_transform
    def reorder_axis(self, a, b):
        """Swap two loops of one perfect nest."""
        return _reorder.reorder_axis(self, self.loop(a), self.loop(b))

    @_transform
    def fuse(self, loops):
        """Fuse sibling loops with equal bounds into one loop (returns its handle)."""
        return _fuse.fuse(self, [self.loop(l) for l in loops])

    @_transform
    def flatten(self, loops):
        """Collapse a perfect nest of loops into one loop (returns its handle)."""
        return _fuse.flatten(self, [self.loop(l) for l in loops])

    @_transform
    def distribute(self, loop, keep: int = 0):
        """Loop fission: one loop per statement of the body (returns the new loops); the loop of
        statement ``keep`` keeps the variable and handle."""
        return _distribute.distribute(self, self.loop(loop), keep)

    @_transform
    def vectorize(self, loop, check: bool = True):
        """Mark ``loop`` vectorized (constant extent; no lane may write what another reads)."""
        return _loop_kinds.vectorize(self, self.loop(loop), check=check)

    @_transform
    def unroll(self, loop, factor: int | None = None, late: bool = False):
        """Unroll fully (factor None) or by ``factor``; ``late=True`` marks the loop
        ``unrolled`` and leaves the copies to code generation (faster compiles; see
        ``loopnest.transforms.loop_kinds.unroll``).

        >>> from te import Buffer, Compute
        >>> A = Buffer("A", (8, 4), "float32")
        >>> nest = LoopNest([Compute("B", (8, 4), lambda i, j: A[i, j] * 2.0)])
        >>> nest.unroll(nest.get_loops_for("B")[1], late=True)
        >>> print(nest)
        for (int i = 0; i < 8; i++) {
          unrolled for (int j = 0; j < 4; j++) {
            B[i, j] = A[i, j] * 2.0f;
          }
        }
        """
        return _loop_kinds.unroll(self, self.loop(loop), factor, late)

    @_transform
    def prefetch(self, buffer, loop, distance: int = 1):
        """Fetch into the cache, while iteration ``v`` of ``loop`` runs, what iteration
        ``v + distance`` will access of ``buffer`` (an input or output): one prefetch beside
        the loop's last store to it (for writing), else its last load, inside the same inner
        loops, so the next iterations' lines arrive while this one computes. A hint: no
        value changes. Placed when the nest is prepared (``transforms.prefetch``), so the
        transforms of the loops inside may come before or after it; those replacing
        ``loop`` itself (split, fuse, unroll) must come before. Refused (ScheduleError): an
        intermediate, a distance that is not an int of at least 1, a vectorized or GPU loop,
        a buffer the loop does not access at indices it can follow.

        >>> from te import Buffer, Compute
        >>> X = Buffer("X", (64, 32), "float32")
        >>> nest = LoopNest([Compute("Y", (64, 32), lambda i, j: X[i, j] * 2.0)])
        >>> i, j = nest.get_loops_for("Y")
        >>> nest.prefetch("X", i); nest.prefetch("Y", i)
        >>> print(str(nest).splitlines()[-1])
        // prefetch Y at loop i, 1 iteration ahead
        >>> print(nest.prepare_for_codegen())
        for (int i = 0; i < 64; i++) {
          for (int j = 0; j < 32; j++) {
            prefetch X[min(i + 1, 63) * 32 + j];
            prefetch for write Y[min(i + 1, 63) * 32 + j];
            Y[i * 32 + j] = X[i * 32 + j] * 2.0f;
          }
        }
        """
        return _prefetch.prefetch(self, buffer, self.loop(loop), distance)

    @_transform
    def parallelize(self, loop, check: bool = True):
        """Run the iterations of ``loop`` on several threads (no loop-carried dependence)."""
        return _loop_kinds.parallelize(self, self.loop(loop), check=check)

    @_transform
    def tensorize(self, loop, intrinsic: str = "mma_m16n8k16") -> None:
        """Declare ``loop`` a warp MMA written lane by lane (``mma_m16n8k16``: float16 or
        bfloat16 operands, float32 accumulators); checked now, a mismatch raises
        ``ScheduleError`` naming it. The CUDA build prints the nest with tensor cores
        (``ldmatrix`` + ``mma.sync``) or refuses with a ``BuildError``; IREval and LLVM run it
        as written. See ``loopnest.transforms.tensorize`` (an example there) and
        ``codegen.cuda.mma_matmul`` (a matmul built of such nests)."""
        return _tensorize.tensorize(self, self.loop(loop), intrinsic)

    @_transform
    def gpu_matmul(self, tensor_cores: bool | None = None, **tiles) -> None:
        """Replace the loops of a fresh nest's lone matmul by a GPU tree: tensor cores
        (``mma.sync``, declared with ``tensorize``) for float16 / bfloat16 / float8 operands --
        float32 too, as tf32, with ``tensor_cores=True`` -- or shared-memory register tiles
        for float32. ``tiles``: ``BM, BN, BK, WM, WN`` (tensor cores) or ``BM, BN, BK, TM, TN``.
        Recorded in ``history`` like every transform, so a tuned schedule replays. See
        ``loopnest.transforms.gpu_matmul``.

        >>> from te import Buffer, Reduce, Sum, cast, float32
        >>> A, B = Buffer("A", (64, 64), "float16"), Buffer("B", (64, 64), "float16")
        >>> C = Reduce("C", (64, 64), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (64,))
        >>> nest = LoopNest([C])
        >>> nest.gpu_matmul(BM=64, BN=64, BK=32, WM=32, WN=32)
        >>> nest.tensorized, [h["op"] for h in nest.history]
        ({'kk': 'mma_m16n8k16'}, ['gpu_matmul'])
        """
        return _gpu_matmul.gpu_matmul(self, tensor_cores, **tiles)

    @property
    def tensorized(self) -> dict[str, str]:
        """The loops ``tensorize`` declared: loop name -> intrinsic."""
        return {v.name: i for v, i in self._tensorized.items()}

    @_transform
    def set_gpu_block_index(self, loop, dim: int, check: bool = True):
        """Bind ``loop`` to blockIdx.{x,y,z}[dim] (``check=False`` skips the dependence check)."""
        return _loop_kinds.set_gpu_index(self, self.loop(loop), dim, ForKind.GPU_BLOCK, check=check)

    @_transform
    def set_gpu_thread_index(self, loop, dim: int, check: bool = True):
        """Bind ``loop`` to threadIdx.{x,y,z}[dim] (``check=False`` skips the dependence check)."""
        return _loop_kinds.set_gpu_index(self, self.loop(loop), dim, ForKind.GPU_THREAD, check=check)

    @_transform
    def slice_head(self, loop, factor: int):
        """Peel the first ``factor`` iterations into their own loop: returns (head, tail)."""
        return _split.slice_head(self, self.loop(loop), factor)

    @_transform
    def slice_tail(self, loop, factor: int):
        """Peel the last ``factor`` iterations into their own loop: returns (head, tail)."""
        return _split.slice_tail(self, self.loop(loop), factor)

    @_transform
    def normalize(self, loop):
        """Make ``loop`` start at 0."""
        return _split.normalize(self, self.loop(loop))

    @_transform
    def compute_inline(self, t):
        """Replace every read of tensor ``t`` by its defining expression and drop its loops."""
        return _inline.compute_inline(self, self.buffer(t))

    @_transform
    def compute_at(self, t, loop):
        """Compute the region of ``t`` needed by one iteration of ``loop`` inside it."""
        return _compute_at.compute_at(self, self.buffer(t), self.loop(loop))

    @_transform
    def store_at(self, t, loop):
        """Size the storage of ``t`` for one iteration of ``loop`` (None: the whole buffer);
        ``compute_at`` stores at its loop. See transforms.store_at."""
        return _store_at.store_at(self, self.buffer(t), None if loop is None else self.loop(loop))

    @_transform
    def cache_accesses(self, buffer, name: str, loop, order=None):
        """A local buffer for the region of ``buffer`` that ``loop`` touches (returns it);
        ``order`` permutes its dimensions (``(1, 0)``: a transposed copy)."""
        return _cache.cache_accesses(self, self.buffer(buffer), name, self.loop(loop), order)

    @_transform
    def rfactor(self, t, loop):
        """Split the reduction of ``t`` at reduction ``loop`` into partial results (returns the buffer)."""
        return _rfactor.rfactor(self, self.buffer(t), self.loop(loop))

    @_transform
    @_resolving(_privatize_args)
    def privatize(self, buffer, loop, parts: int | None = None, parallel: bool = False):
        """Give each of ``parts`` chunks of ``loop`` (None: the machine's cores, recorded as the
        number) its own copy of ``buffer``, which the loop only updates with one associative
        and commutative operator (a histogram's ``H[k] += 1``), and combine the copies after
        the loop; returns the chunk loop, legal to parallelize (``parallel=True`` does it).
        See transforms.privatize.

        >>> from te import Buffer, Var
        >>> from loopnest.stmt import For, Store
        >>> P, H = Buffer("P", (100,), "int32"), Buffer("H", (8,), "int32"); i = Var("i")
        >>> nest = LoopNest(For(i, 0, 100, Store(H, (P[i],), H[P[i]] + 1)), outputs=[H])
        >>> nest.privatize(H, i, parts=4, parallel=True)
        Loop(i_part)
        >>> nest.history
        [{'op': 'privatize', 'args': [{'buffer': 'H'}, {'loop': 'i'}], 'kwargs': {'parts': 4, 'parallel': True}}]
        """
        return _privatize.privatize(self, self.buffer(buffer), self.loop(loop), parts, parallel)

    @_transform
    @_resolving(_specialize_args)
    def specialize(self, condition, version) -> None:
        """Where ``condition`` (a boolean expression of the nest's sizes or scalar parameters)
        holds when the kernel runs, run ``version`` instead: a ``LoopNest`` of the same tensors
        (or statement) scheduled on its own, or its history. The nest's own statements stay
        as they are and its later transforms go on scheduling the general case; several
        specializations are tested in the order they were made. Refused (ScheduleError): a
        condition that is not such an expression, a version of another computation or
        already prepared, a nest bound to the GPU (and any GPU binding after it:
        ``transforms.specialize.refuse_gpu``). See ``transforms.specialize``.

        >>> from te import Buffer, Reduce, Sum, Var
        >>> M = Var("M"); A = Buffer("A", (M, 64), "float32")
        >>> S = Reduce("S", (M,), Sum(), lambda i, k: A[i, k], (64,))
        >>> one_row = LoopNest([S]); _ = one_row.split_with_tail(one_row.get_loops_for(S)[1], 16)
        >>> nest = LoopNest([S]); nest.specialize(M == 1, one_row)
        >>> nest.history[0]["args"][0]
        {'expr': ['eq', {'var': 'M'}, 1]}
        >>> str(LoopNest([S]).replay(nest.history_json())) == str(nest)
        True
        """
        return _specialize.specialize(self, condition, version)

    @_transform
    def eliminate_dead_stores(self):
        """Remove stores to intermediates that nothing reads."""
        return _dead_stores.eliminate_dead_stores(self)
