"""The schedule templates of the automatic scheduler and of the tuning space: plain
functions that schedule one tensor of a nest from a dict of parameters.

``loopnest.auto.schedule`` picks the parameters from the target without search;
``tune.auto`` declares them as knobs and searches them. A template applies nest methods
only, so every step is recorded in ``nest.history``; one that raises ``ScheduleError``
leaves the steps before it applied (the callers decide what to do: the tuner records the
point as illegal, ``auto_schedule`` works on a copy and falls back to a simpler choice).

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> A = Buffer("A", (64, 32), "float32")
>>> B = Compute("B", (64, 32), lambda i, j: A[i, j] * 2.0)
>>> nest = LoopNest([B])
>>> _ = elementwise(nest, B, {"vec": 8, "par": True})
>>> [op["op"] for op in nest.history]
['split_with_tail', 'vectorize', 'parallelize']
"""
from __future__ import annotations

import contextlib
import contextvars

from te import expr as E
from te.queries import loads, uses_var
from te.tensor import Tensor

from ..errors import ScheduleError
from ..loop import Loop
from ..queries import stmt_reads
from ..stmt import Block, For, ForKind, Store, iter_stmts
from ..transforms.loop_kinds import MAX_LATE_UNROLL
from .classify import const_extent

__all__ = ["accumulation_chain", "reorder_accumulation", "contraction", "channel_contraction", "reduction",
           "elementwise", "vector_reduction", "reduction_parts", "vectorize_split", "pack_candidate", "several",
           "deferred_unrolls", "unroll_fully", "pending_unrolls", "parallel_blocks", "row_tiles"]

_PENDING: contextvars.ContextVar = contextvars.ContextVar("pending_unrolls", default=None)


@contextlib.contextmanager
def deferred_unrolls():
    """Within the block the templates note their full unrolls instead of applying them: the
    list yielded receives the loops, in order, for the caller to unroll after its other
    transforms, whose legality checks then analyse the loops rolled (the automatic
    scheduler's checks of a convolution's padding copy ran over the 48 unrolled copies of
    the convolution's body: 619 -> 218 ms to schedule it). Outside such a block the
    templates unroll at once.

    >>> from te import Buffer, Reduce, Sum
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (4, 8), "float32")
    >>> R = Reduce("R", (4,), Sum(), lambda i, k: A[i, k], (8,))
    >>> nest = LoopNest([R])
    >>> with deferred_unrolls() as pending:
    ...     _ = reduction(nest, R, {"unroll_k": 4})
    >>> [lp.name for lp in pending], [s["op"] for s in nest.history]
    (['k_inner'], ['split_with_tail'])
    """
    pending: list = []
    token = _PENDING.set(pending)
    try:
        yield pending
    finally:
        _PENDING.reset(token)


def pending_unrolls() -> list | None:
    """The list of an active ``deferred_unrolls`` block, else None.

    >>> pending_unrolls() is None
    True
    >>> with deferred_unrolls() as pending:
    ...     pending_unrolls() is pending
    True
    """
    return _PENDING.get()


def _unroll(nest, loop) -> None:
    """``unroll_fully(nest, loop)``, or noted for later inside ``deferred_unrolls``."""
    pending = _PENDING.get()
    if pending is None:
        unroll_fully(nest, loop)
    else:
        pending.append(loop)


def unroll_fully(nest, loop) -> None:
    """Unroll ``loop`` fully: late (``nest.unroll(loop, late=True)``, the copies made by code
    generation) where it can be, a serial loop of at most ``MAX_LATE_UNROLL`` iterations, else
    at once.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (8, 4), "float32")
    >>> nest = LoopNest([Compute("B", (8, 4), lambda i, j: A[i, j] + 1.0)])
    >>> unroll_fully(nest, nest.get_loops_for("B")[1])
    >>> nest.get_loops_for("B")[1].kind
    'unrolled'
    """
    n = const_extent(loop.extent)
    if loop.kind == ForKind.SERIAL and n is not None and n <= MAX_LATE_UNROLL:
        nest.unroll(loop, late=True)
    else:
        nest.unroll(loop)


def several(lp) -> bool:
    """Whether loop ``lp`` may run more than one iteration (a symbolic extent may).

    >>> from te import Compute
    >>> from loopnest import LoopNest
    >>> nest = LoopNest([Compute("B", (1, 4), lambda i, j: i + j)])
    >>> [several(lp) for lp in nest.get_loops_for("B")]
    [False, True]
    """
    n = const_extent(lp.extent)
    return n is None or n > 1


def parallelize_first(nest, loops):
    """Parallelize the first of ``loops`` that may run more than once (``several``); returns
    it, or None where none does.

    >>> from te import Compute
    >>> from loopnest import LoopNest
    >>> nest = LoopNest([Compute("B", (1, 4), lambda i, j: i + j)])
    >>> parallelize_first(nest, nest.get_loops_for("B")).name
    'j'
    """
    first = next((lp for lp in loops if several(lp)), None)
    if first is not None:
        nest.parallelize(first)
    return first


def parallel_blocks(nest, loop, cores: int):
    """Parallelize ``loop``; where ``cores`` (more than one) divides its constant trip count,
    as one block of consecutive iterations per core: the parallel loop runs ``cores``
    iterations over a new serial loop, which is returned (None otherwise). The pool's
    guided chunks hand a core other iterations on every call; a fixed block keeps the data
    of its iterations in that core's cache from one call to the next and ends the cores
    together. Measured on AVX-512 (2 cores), same process, medians, blocks against guided
    chunks: the register-tiled matmul 17% faster at 256, 1-4% at 512, 0-1% at 1024 and
    2048; ``x @ W.T`` 1024 3-4%; conv2d 1 x 64 x 56 x 56 (rows in 2 blocks) 5-11%.

    >>> from te import Compute
    >>> from loopnest import LoopNest
    >>> nest = LoopNest([Compute("B", (8, 4), lambda i, j: i + j)])
    >>> inner = parallel_blocks(nest, nest.get_loops_for("B")[0], 2)
    >>> [(lp.kind, lp.extent) for lp in nest.get_loops_for("B")]
    [('parallel', 2), ('serial', 4), ('serial', 4)]
    """
    n = const_extent(nest.loop(loop).extent)
    inner = None
    if cores > 1 and n is not None and n > cores and n % cores == 0:
        loop, inner, _ = nest.split_with_tail(loop, n // cores)
    nest.parallelize(loop)
    return inner


def accumulation_chain(nest, top) -> list:
    """Loop ``top`` and the loops below it down to the innermost, stepping over a reduction's
    init stores: below a body of one loop, or of one loop and stores (``C[i, j] = 0`` beside
    the reduction loop ``k``), the chain goes on into that loop. A ``reorder`` of the chain
    distributes the stores in the way at the outermost loop that moves.

    >>> from te import Buffer, Reduce, Sum
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (4, 8), "float32")
    >>> R = Reduce("R", (4,), Sum(), lambda i, k: A[i, k], (8,))
    >>> nest = LoopNest([R])
    >>> [lp.name for lp in nest.get_inner_loops("i")], [lp.name for lp in accumulation_chain(nest, "i")]
    ([], ['i', 'k'])
    """
    out = [nest.loop(top)]
    while True:
        stmts = out[-1].stmt.body.stmts
        fors = [s for s in stmts if isinstance(s, For)]
        if len(fors) != 1 or not all(isinstance(s, (For, Store)) for s in stmts):
            return out
        out.append(Loop(nest, fors[0].var))


def pack_candidate(t: Tensor, placed=()) -> str | None:
    """The operand of contraction ``t`` whose loads do not use the second-last output index
    (matmul's B), unless it is one of the tensor names ``placed`` (inlined or computed
    elsewhere), else None.

    >>> from te import Buffer, Reduce, Sum
    >>> A = Buffer("A", (8, 8), "float32"); B = Buffer("B", (8, 8), "float32")
    >>> pack_candidate(Reduce("C", (8, 8), Sum(), lambda i, j, k: A[i, k] * B[k, j], (8,)))
    'B'
    """
    row = t.args[-2]
    for ld in loads(t.body):
        if not any(uses_var(i, row) for i in ld.indices) and ld.buffer.name not in set(placed):
            return ld.buffer.name
    return None


def columns_last(t: Tensor, operand) -> tuple | None:
    """The order of dimensions that packs ``operand`` of contraction ``t`` with the dimension
    its loads index by ``t``'s last output index (the vectorized columns) last, where that
    dimension is another one (``B`` of ``A @ B.T``); None when it is already last or no
    single dimension is.

    >>> from te import Buffer, Reduce, Sum
    >>> A = Buffer("A", (8, 16), "float32"); B = Buffer("B", (4, 16), "float32")
    >>> columns_last(Reduce("C", (8, 4), Sum(), lambda i, j, k: A[i, k] * B[j, k], (16,)), B)
    (1, 0)
    """
    dims = {d for ld in loads(t.body) if ld.buffer is operand
            for d, index in enumerate(ld.indices) if uses_var(index, t.args[-1])}
    if len(dims) != 1 or dims == {operand.ndim - 1}:
        return None
    (d,) = dims
    return tuple(x for x in range(operand.ndim) if x != d) + (d,)


def vectorize_split(nest, loop, lanes: int):
    """Split ``loop`` by ``lanes`` (a tail loop for the rest) and vectorize the inner loop;
    returns ``(outer, inner, tail)``. A loop of ``lanes`` constant iterations is vectorized
    as it is (``(None, loop, None)``). A tail of constant extent (2 or more) is vectorized
    too, as one narrower vector: the same code, a fraction of the IR of a scalar loop that
    LLVM unrolls and vectorizes again (70 of the 13-stage stencil's 530 ms of compile time).

    >>> from te import Buffer, Compute, Var
    >>> from loopnest import LoopNest
    >>> N = Var("N"); A = Buffer("A", (N,), "float32")
    >>> nest = LoopNest([Compute("B", (N,), lambda i: A[i] + 1.0)])
    >>> outer, inner, tail = vectorize_split(nest, nest.get_loops_for("B")[0], 8)
    >>> inner.kind, tail.kind                  # a tail of N % 8 iterations stays a loop
    ('vectorized', 'serial')
    >>> nest = LoopNest([Compute("B", (20,), lambda i: A[i] + 1.0)])
    >>> outer, inner, tail = vectorize_split(nest, nest.get_loops_for("B")[0], 8)
    >>> inner.kind, tail.kind, tail.extent
    ('vectorized', 'vectorized', 4)
    """
    if const_extent(loop.extent) == lanes:
        nest.vectorize(loop)
        return None, loop, None
    outer, inner, tail = nest.split_with_tail(loop, lanes)
    nest.vectorize(inner)
    if tail is not None and (const_extent(tail.extent) or 0) >= 2:
        nest.vectorize(tail)
    return outer, inner, tail


def vectorize_copy(nest, buffer: str, lanes: int) -> None:
    """Vectorize the innermost loop of the copy that fills the local buffer ``buffer`` (made
    by ``cache_accesses``): whole where its extent is a constant of at most ``4 * lanes``,
    else by ``vectorize_split``. The copy runs along the last dimension of the local buffer:
    its stores are contiguous, and so are its loads unless the copy is permuted. A scalar
    copy loop is left to LLVM, which turns each row into a ``memcpy`` whose code generation
    costs about a millisecond (matmul 1024: 7 of 100 ms of build).

    A transposed copy (the source's last index follows the copy's row loop, not its inner
    loop: a linear layer's packed ``W.T``) would load vectors of scattered elements, one
    cache line each. Instead its row loop is split by ``lanes`` and that part moved
    innermost, left scalar: LLVM loads each run of ``lanes`` source elements as one vector
    and stores them one by one (x @ W.T 1024 in 6.62 ms instead of 7.00; PyTorch 6.78).

    >>> from te import Buffer, Reduce, Sum
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (8, 32), "float32"); B = Buffer("B", (32, 32), "float32")
    >>> nest = LoopNest([Reduce("C", (8, 32), Sum(), lambda i, j, k: A[i, k] * B[k, j], (32,))])
    >>> _ = nest.cache_accesses("B", "B_pack", nest.get_loops_for("C")[1])
    >>> vectorize_copy(nest, "B_pack", 8)
    >>> [lp.kind for lp in nest.get_loops_for("B_pack")]
    ['serial', 'serial', 'vectorized']
    """
    loops = nest.get_loops_for(nest.buffer(buffer))
    if not loops:       # a copy of one element
        return
    inner = loops[-1]
    if len(loops) >= 2 and _transposed(buffer, loops[-2], inner) and \
            (const_extent(loops[-2].extent) or 0) >= 2 * lanes:
        _, run, _ = nest.split_with_tail(loops[-2], lanes)
        nest.reorder([run, inner], [1, 0])
        return
    extent = const_extent(inner.extent)
    if extent is not None and extent <= 4 * lanes:
        if extent >= 2:     # each iteration copies its own element: no dependence to check
            nest.vectorize(inner, check=False)
    else:
        vectorize_split(nest, inner, lanes)


def _transposed(buffer: str, row, inner) -> bool:
    """Whether the copy into ``buffer`` reads along its ``row`` loop: ``row`` holds only the
    loop ``inner``, which holds only the copy, and the last index of the element it loads
    uses ``row``'s variable and not ``inner``'s."""
    body = row.stmt.body
    parts = body.stmts if isinstance(body, Block) else (body,)
    if len(parts) != 1 or parts[0] is not inner.stmt:
        return False
    leaves = [s for s in iter_stmts(inner.stmt.body) if not isinstance(s, Block)]
    if len(leaves) != 1 or not isinstance(leaves[0], Store) or leaves[0].buffer.name != buffer \
            or not isinstance(leaves[0].value, E.Load):
        return False
    last = leaves[0].value.indices[-1]
    return uses_var(last, row.var) and not uses_var(last, inner.var)


def row_tiles(nest, loop, rows: int, overlap: bool = True):
    """``(outer, inner, tail)``: ``loop`` in tiles of ``rows``. Where ``rows`` leaves some of a
    constant extent over, the last tile is shifted back over the one before it
    (``split_with_overlap``: ``tail`` is None, and the register-blocked body is compiled once,
    every tile a full one), where that is legal and ``overlap`` asks for it; elsewhere
    ``split_with_tail``. (A caller that will move a reduction loop outside the tiles passes
    ``overlap=False``: the tiles would then accumulate a slice at a time, and the shifted
    tile would add its rows' slice twice; the move would be refused.)

    Measured on AVX-512 (2 cores), matmul 1024 with a 6 x 4-vector tile: the shifted tile
    builds the hand schedule in 45 ms against 58-61 ms with a nest for the 4 rows left over.

    >>> from te import Buffer, Reduce, Sum
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (20, 8), "float32"); B = Buffer("B", (8, 16), "float32")
    >>> C = Reduce("C", (20, 16), Sum(), lambda i, j, k: A[i, k] * B[k, j], (8,))
    >>> nest = LoopNest([C])
    >>> outer, inner, tail = row_tiles(nest, nest.get_loops_for(C)[0], 6)
    >>> outer.extent, inner.extent, tail
    (4, 6, None)
    """
    extent = const_extent(loop.extent)
    if overlap and extent is not None and extent > rows and extent % rows:
        try:
            return (*nest.split_with_overlap(loop, rows), None)
        except ScheduleError:
            pass        # iterations that may not run twice: a tail loop
    return nest.split_with_tail(loop, rows)


def stream_row_tiles(nest, t: Tensor, rows, tile: int, vectorized: bool) -> tuple:
    """Cut ``rows`` (a loop of a symbolic count whose body is a reduction slice around the
    column tile: ``k { j... }``) into tiles of ``tile`` rows with the slice outside each
    tile's rows (a register tile), and the rows left over into tiles of half as many rows,
    down to single rows (``_leftover_stream_rows``: each accumulated in a buffer of its own,
    its rows and columns unrolled and, when ``vectorized``, the last vectorized); returns
    ``(tile loop, the tile's rows)``, the rows' accumulator still to be cached at the tile
    loop.

    >>> from te import Buffer, Var
    >>> from loopnest import LoopNest
    >>> from loopnest.stmt import For, Store
    >>> M, i, j, k = Var("M"), Var("i"), Var("j"), Var("k")
    >>> X, B, Y = Buffer("X", (M, 64), "float32"), Buffer("B", (64, 32), "float32"), Buffer("Y", (M, 32), "float32")
    >>> slice_ = For(k, 0, 64, For(j, 0, 32, Store(Y, (i, j), Y[i, j] + X[i, k] * B[k, j])))
    >>> nest = LoopNest(For(i, 0, M, slice_), outputs=[Y])
    >>> tiles, tile_rows = stream_row_tiles(nest, Y, i, 4, vectorized=False)
    >>> print(nest)
    for (int i_outer = 0; i_outer < floordiv(M, 4); i_outer++) {
      for (int k = 0; k < 64; k++) {
        for (int i_inner = 0; i_inner < 4; i_inner++) {
          for (int j = 0; j < 32; j++) {
            Y[i_outer * 4 + i_inner, j] = Y[i_outer * 4 + i_inner, j] + X[i_outer * 4 + i_inner, k] * B[k, j];
          }
        }
      }
    }
    for (int i_tail_outer = 0; i_tail_outer < floordiv(floormod(M, 4), 2); i_tail_outer++) {
      for (int Y_rest2_i0 = 0; Y_rest2_i0 < 2; Y_rest2_i0++) {
        for (int Y_rest2_i1 = 0; Y_rest2_i1 < 32; Y_rest2_i1++) {
          Y_rest2[Y_rest2_i0, Y_rest2_i1] = Y[floordiv(M, 4) * 4 + Y_rest2_i0, Y_rest2_i1];
        }
      }
      for (int k_1 = 0; k_1 < 64; k_1++) {
        unrolled for (int i_tail_inner = 0; i_tail_inner < 2; i_tail_inner++) {
          unrolled for (int j_1 = 0; j_1 < 32; j_1++) {
            Y_rest2[i_tail_outer * 2 + i_tail_inner, j_1] = Y_rest2[i_tail_outer * 2 + i_tail_inner, j_1] + X[i_tail_outer * 2 + i_tail_inner + floordiv(M, 4) * 4, k_1] * B[k_1, j_1];
          }
        }
      }
      for (int Y_rest2_i0_1 = 0; Y_rest2_i0_1 < 2; Y_rest2_i0_1++) {
        for (int Y_rest2_i1_1 = 0; Y_rest2_i1_1 < 32; Y_rest2_i1_1++) {
          Y[floordiv(M, 4) * 4 + Y_rest2_i0_1, Y_rest2_i1_1] = Y_rest2[Y_rest2_i0_1, Y_rest2_i1_1];
        }
      }
    }
    for (int i_tail_tail = 0; i_tail_tail < floormod(floormod(M, 4), 2); i_tail_tail++) {
      for (int Y_rest_i1 = 0; Y_rest_i1 < 32; Y_rest_i1++) {
        Y_rest[0, Y_rest_i1] = Y[floordiv(M + 1, 2) * 2 - 2, Y_rest_i1];
      }
      for (int k_1_1 = 0; k_1_1 < 64; k_1_1++) {
        unrolled for (int j_1_1 = 0; j_1_1 < 32; j_1_1++) {
          Y_rest[0, j_1_1] = Y_rest[0, j_1_1] + X[i_tail_tail + floordiv(floormod(M, 4), 2) * 2 + floordiv(M, 4) * 4, k_1_1] * B[k_1_1, j_1_1];
        }
      }
      for (int Y_rest_i1_1 = 0; Y_rest_i1_1 < 32; Y_rest_i1_1++) {
        Y[floordiv(M + 1, 2) * 2 - 2, Y_rest_i1_1] = Y_rest[0, Y_rest_i1_1];
      }
    }
    """
    outer, inner, tail = nest.split_with_tail(rows, tile)
    nest.reorder_axis(inner, nest.get_inner_loops(inner)[0])
    if tail is not None:
        _leftover_stream_rows(nest, t, tail, tile // 2, vectorized)
    return outer, inner


def _leftover_stream_rows(nest, t: Tensor, rows, tile: int, vectorized: bool) -> None:
    """The rows a tile of ``stream_row_tiles`` leaves over (loop ``rows``): tiles of ``tile``
    rows, each accumulated in a buffer of its own, then of half as many, down to single rows
    (``{t.name}_rest``). Three rows left over by tiles of 4, 1024 x 1024 on AVX-512, against
    PyTorch: 1.02 -> 1.15 as a tile of 2 and a row (2 rows 1.18 -> 1.37, 6 0.98 -> 1.17)."""
    if tile < 2:
        loops = nest.get_inner_loops(rows)[1:]                   # the columns, below the slice
        nest.cache_accesses(nest.buffer(t.name), f"{t.name}_rest", rows)
    else:
        outer, inner, tail = nest.split_with_tail(rows, tile)
        nest.reorder_axis(inner, nest.get_inner_loops(inner)[0])
        loops = nest.get_inner_loops(outer)[1:]                  # the tile's rows, then its columns
        nest.cache_accesses(nest.buffer(t.name), f"{t.name}_rest{tile}", outer)
    if vectorized:
        nest.vectorize(loops[-1])
    for lp in loops[:-1] if vectorized else loops:
        if several(lp):
            _unroll(nest, lp)
    if tile >= 2 and tail is not None:
        _leftover_stream_rows(nest, t, tail, tile // 2, vectorized)


def contraction(nest, t: Tensor, k: dict):
    """The register-blocked schedule of contraction ``t``; returns its outermost loop.

    The parameters ``k``: ``lanes`` (elements of one vector), ``vec_n`` (vectors per column
    tile, 0: no column tiles), ``reg_i`` (rows of the register tile), ``reg_o`` (tile of the
    third-last output dimension), ``kk`` (the reduction loop cut into slices of ``kc``; 0:
    not cut), ``n_small_red`` (reduction loops after it), ``order`` (of the tile loops:
    ``i`` row tiles, ``j`` column tiles, ``K`` reduction slices), ``pack`` and
    ``pack_buffer`` (copy the operand that does not follow the rows into a contiguous
    buffer above the row tile loop), ``unroll_r`` (unroll the small reduction loops but the innermost),
    ``par`` (parallelize the outermost tile loop that is not a reduction, in one block of
    iterations per core where ``cores`` divides it: ``parallel_blocks``), ``stream`` (with
    ``par``, the column tiles in one block per core outside the reduction slices:
    ``schedule.stream_tile``).

    The register tile accumulates in a local buffer that LLVM keeps in registers; columns
    and rows left over by the tiles get nests of their own (``_leftover_columns``,
    ``_leftover_rows``; with three or more output dimensions whose row and third-last tiles
    divide, the leftover columns get the main register tile, as narrow as they are:
    ``_blocked_leftover_columns``).

    >>> from te import Buffer, Reduce, Sum
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (12, 16), "float32"); B = Buffer("B", (16, 16), "float32")
    >>> C = Reduce("C", (12, 16), Sum(), lambda i, j, k: A[i, k] * B[k, j], (16,))
    >>> nest = LoopNest([C])
    >>> p = dict(kk=0, lanes=8, vec_n=2, reg_i=6, reg_o=1, kc=0, order="jKi", n_small_red=0,
    ...          pack=True, pack_buffer="B", unroll_r=False, par=False)
    >>> contraction(nest, C, p).kind
    'serial'
    """
    # the init store stays beside the reduction loops: the reorder below distributes it
    # inside the register tile, which then initialises its accumulator itself (no separate
    # pass over the output, no copy of it into the accumulator)
    loops = nest.get_loops_for(t)
    ns = len(t.args)
    spatial, red = list(loops[:ns]), list(loops[ns:])
    kk = k["kk"]
    # 1. the vector dimension (last spatial): tiles of vec_n native vectors
    lanes, vec_n = k["lanes"], k["vec_n"]
    j_vec = j_lane = j_rest = None
    blocked_rest = blocks_leftover_columns(t, k)
    if vec_n:
        j_tile, jin, j_rest = nest.split_with_tail(spatial[-1], lanes * vec_n)
        j_vec, j_lane, _ = nest.split_with_tail(jin, lanes)
        if j_rest is not None and not blocked_rest:
            spatial = _leftover_columns(nest, t, spatial, j_rest, len(red), k["par"], lanes, rows=k["reg_i"])
            j_rest = None
    else:
        j_tile = spatial[-1]
    # 2. the register tile of the third-last spatial dimension (divisors only)
    o_tile = o_in = None
    if ns >= 3 and k["reg_o"] > 1:
        o_tile, o_in, _ = nest.split_with_tail(spatial[-3], k["reg_o"])
    # 3. the reduction slice
    if k["kc"]:
        ko, ki, tail = nest.split_with_tail(red[kk], k["kc"])
        if tail is not None:
            raise ScheduleError(f"kc {k['kc']} does not divide the reduction loop of {t.name}")
    else:
        ko, ki = None, red[kk]
    # 4. the register tile of the second-last spatial dimension: the last row tile shifted
    #    back over the one before it where the rows leave some over (``row_tiles``), else a
    #    nest of their own for the rows left over, register-blocked the same way
    #    (``_leftover_rows``)
    #    Not where reduction loops run outside the row tiles (a row run again would add a
    #    slice's terms to C twice: the reorder below would be refused), nor where the row
    #    tiles are to be the parallel loop (two of them would write the rows they share).
    red_outside = (kk > 0 or bool(k["kc"])) and k["order"].index("K") < k["order"].index("i")
    fixed = list(spatial[:-3]) + ([o_tile if o_tile is not None else spatial[-3]] if ns >= 3 else [])
    lead = next((ch for ch in k["order"] if ch == "i" or ch == "j" and several(j_tile)), "i")
    rows_parallel = k["par"] and lead == "i" and not any(several(lp) for lp in fixed)
    overlap = not red_outside and not rows_parallel
    i_tile, i_in, i_tail = row_tiles(nest, spatial[-2], k["reg_i"], overlap=overlap) if k["reg_i"] > 1 \
        else (spatial[-2], None, None)
    outer_fixed = list(spatial[:-3]) + ([o_tile if o_tile is not None else spatial[-3]] if ns >= 3 else [])
    if j_rest is not None:
        above = outer_fixed + [lp for lp in (o_in, i_tile, i_in) if lp is not None]
        tile = {above.index(lp) for lp in (o_in, i_in) if lp is not None}
        above = _blocked_leftover_columns(nest, t, k, above, tile, j_rest, len(red))
        n_fixed = len(outer_fixed)
        outer_fixed = above[:n_fixed]
        o_in = above[n_fixed] if o_in is not None else None
        i_tile = above[n_fixed + (o_in is not None)]
        i_in = above[-1] if i_in is not None else None
    if i_tail is not None:
        # give the main rows and the leftover rows loops of their own (innermost first)
        tail_first = tail_outer = i_tail
        if o_in is not None:
            o_in, tail_first = nest.distribute(o_in)[:2]
            tail_outer = tail_first
        for n in range(len(outer_fixed) - 1, -1, -1):
            outer_fixed[n], tail_outer = nest.distribute(outer_fixed[n])[:2]
        share = _shares_the_pack(t, k, outer_fixed)
        tail_j = _leftover_rows(nest, t, k, tail_outer, tail_first, i_tail, len(red) + (ko is not None),
                                parallel=not share)
    # 5. the loop order: outer tile loops, inner reduction loops, the register tile; where the
    #    operand is streamed (``stream``), each core's block of column tiles outside the
    #    reduction slices (order "Kji"), so a core reads a slice's rows of its columns in order
    top = (outer_fixed + [lp for lp in (o_in, i_tile) if lp is not None])[0]
    column_tiles = [j_tile]
    if k.get("stream") and k["par"]:
        n = const_extent(j_tile.extent)
        if n is not None and n >= k["cores"] and n % k["cores"] == 0:
            if n > k["cores"]:
                j_block, j_tile, _ = nest.split_with_tail(j_tile, n // k["cores"])
                column_tiles = [j_tile]
            else:
                j_block, column_tiles = j_tile, []      # a column tile per core
            outer_fixed = outer_fixed + [j_block]
    groups = {"i": [i_tile], "j": column_tiles, "K": list(red[:kk]) + ([ko] if ko is not None else [])}
    order = [ch for ch in k["order"] if groups[ch]]
    tile_outer = outer_fixed + [lp for ch in order for lp in groups[ch]]
    inner_red = [ki] + list(red[kk + 1:])
    reg = [lp for lp in (o_in, i_in, j_vec, j_lane) if lp is not None]
    #    in two steps: the output loops among themselves (the init store moves with them),
    #    then the reduction loops into place, which distributes the init at the outermost
    #    loop they pass: inside the tile loops when the reduction runs inside them
    reorder_accumulation(nest, accumulation_chain(nest, top), tile_outer + inner_red + reg,
                          groups["K"] + inner_red)
    if i_tail is not None and share:
        # the leftover rows inside the column tile loop, after the row tiles: they read the
        # same packed copy of the operand (``_shares_the_pack``)
        tile_outer[0] = nest.fuse([tile_outer[0], tail_j])
    # 6. parallel loops first: the local buffers created below are then allocated inside
    #    them (private to each iteration) and the legality check has less to analyse
    if k["par"]:
        par_loop = next((lp for lp in tile_outer if several(lp) and lp not in groups["K"]), None)
        if par_loop is not None:
            blocks = parallel_blocks(nest, par_loop, k.get("cores", 1))
            if blocks is not None:
                tile_outer[tile_outer.index(par_loop)] = blocks
                i_tile = blocks if par_loop == i_tile else i_tile
    # 7. the local accumulator: one register tile, kept across the whole reduction when the
    #    reduction slices run inside the tile loops
    last = order[-1] if order else None
    acc_at = tile_outer[-1] if last != "K" else tile_outer[-1 - len(groups["K"])]
    if k.get("stream_rows"):
        # a symbolic count of rows, streamed: row tiles of ``stream_rows``, the rows left over
        # in tiles of fewer rows, all inside the column tile (its slice of B stays in cache)
        acc_at, i_in = stream_row_tiles(nest, t, i_tile, k["stream_rows"], vectorized=j_lane is not None)
    nest.cache_accesses(nest.buffer(t.name), f"{t.name}_local", acc_at)
    # 8. pack the operand that does not follow the row tile, above the row tile loop
    if k["pack"] and k["pack_buffer"]:
        pos_i = tile_outer.index(i_tile)
        if pos_i > 0:
            packed = nest.buffer(k["pack_buffer"])
            nest.cache_accesses(packed, f"{packed.name}_pack", tile_outer[pos_i - 1],
                                order=columns_last(t, packed))
            vectorize_copy(nest, f"{packed.name}_pack", lanes)
    if j_lane is not None:
        nest.vectorize(j_lane)
    for lp in (j_vec, i_in, o_in):
        if lp is not None and several(lp):
            _unroll(nest, lp)
    if k["unroll_r"]:
        _unroll_small_reductions(nest, inner_red[1:])
    return tile_outer[0]


def channel_contraction(nest, t: Tensor, k: dict):
    """The register-blocked schedule of a convolution ``t`` (``batch..., channels, rows,
    columns`` outputs) vectorized along its output channels rather than its columns; returns
    its outermost loop. For widths the vectors do not divide (56 columns of 16 lanes leave
    an 8-wide tile at half speed): every vector is full.

    The parameters ``k``: ``lanes`` (elements of one vector), ``vec_c`` (vectors of channels
    per tile), ``cols`` (columns per tile, a divisor of the width), ``par`` (parallelize the
    outermost tile loop that runs more than once, in one block of iterations per core where
    ``cores`` divides it: ``parallel_blocks``). The operands read by channel (the
    filter) are packed once per batch loop iteration with the channels last (a vector load
    each), the other operand (the input) is broadcast, one element per column, and the
    ``vec_c`` x ``cols`` tile accumulates in a local buffer, channels last, that LLVM keeps in
    registers while the reduction runs over the input channels and the filter window (both
    window loops stay loops: a tile is one output row, so unrolled filter rows would share
    no input row; conv2d 64 x 56 x 56 builds in 175 instead of 210 ms, as fast)::

        for b:
          W_pack[ci, ry, rx, co] = W[co, ci, ry, rx]
          parallel for y: for c_outer: for x_outer:
            Y_local[x_i, c] = 0
            for ci: for ry: for rx: unrolled for c_vec, x_i: vectorized for c_lane:
              Y_local[x_i, c] += P[b, ci, y + ry, x_outer * cols + x_i + rx] * W_pack[ci, ry, rx, c]
            Y[b, c, y, x_outer * cols + x_i] = Y_local[x_i, c]

    >>> from te import Buffer, Reduce, Sum
    >>> from loopnest import LoopNest
    >>> X = Buffer("X", (1, 4, 10, 10), "float32"); W = Buffer("W", (16, 4, 3, 3), "float32")
    >>> Y = Reduce("Y", (1, 16, 8, 8), Sum(), lambda b, co, y, x, ci, ry, rx:
    ...            X[b, ci, y + ry, x + rx] * W[co, ci, ry, rx], (4, 3, 3))
    >>> nest = LoopNest([Y])
    >>> channel_contraction(nest, Y, {"lanes": 8, "vec_c": 2, "cols": 4, "par": False}).name
    'b'
    >>> [lp.kind for lp in nest.get_loops_for("Y_local")][-3:]
    ['unrolled', 'unrolled', 'vectorized']
    """
    loops = nest.get_loops_for(t)
    ns = len(t.args)
    if ns < 4:
        raise ScheduleError(f"channel_contraction: {t.name} has {ns} output dimensions; it takes a batch "
                            f"dimension, channels, rows and columns (pack the filter once per batch)")
    lanes = k["lanes"]
    channels, width = const_extent(t.dims[-3]), const_extent(t.dims[-1])
    if channels is None or width is None or channels % (lanes * k["vec_c"]) or width % k["cols"]:
        raise ScheduleError(f"channel_contraction: a tile of {lanes * k['vec_c']} channels x {k['cols']} columns "
                            f"does not divide {t.name}'s {t.dims[-3]} channels x {t.dims[-1]} columns; "
                            f"take tile sizes that divide them")
    packed = {op.name: channel_dimension(t, op) for op in channel_operands(t)}
    if None in packed.values():
        raise ScheduleError(f"channel_contraction: {t.name} reads "
                            f"{', '.join(n for n, d in packed.items() if d is None)} by its output channel "
                            f"otherwise than as one index of its own; the tile along the channels packs such "
                            f"an operand with that index last (use contraction)")
    spatial, red = list(loops[:ns]), list(loops[ns:])
    c_tile, c_lane, _ = nest.split_with_tail(spatial[-3], lanes * k["vec_c"])
    x_tile, x_in, _ = nest.split_with_tail(spatial[-1], k["cols"])
    c_vec, c_lane, _ = nest.split_with_tail(c_lane, lanes)
    tile_outer = spatial[:-3] + [spatial[-2], c_tile, x_tile]
    reg = [c_vec, x_in, c_lane]
    reorder_accumulation(nest, accumulation_chain(nest, tile_outer[0]), tile_outer + red + reg, red)
    if k["par"]:
        par_loop = next((lp for lp in tile_outer if several(lp)), None)
        if par_loop is not None:
            blocks = parallel_blocks(nest, par_loop, k.get("cores", 1))
            if blocks is not None:      # the packs stay inside the loop they were at: one per iteration
                tile_outer[tile_outer.index(par_loop)] = blocks
                x_tile = blocks if par_loop == x_tile else x_tile
    for name, dim in packed.items():
        operand = nest.buffer(name)
        nest.cache_accesses(operand, f"{name}_pack", tile_outer[0], order=_dimension_last(operand.ndim, dim))
    nest.cache_accesses(nest.buffer(t.name), f"{t.name}_local", x_tile, order=_dimension_last(ns, ns - 3))
    nest.vectorize(c_lane)
    for lp in (c_vec, x_in):
        if several(lp):
            _unroll(nest, lp)
    return tile_outer[0]


def _dimension_last(ndim: int, dim: int) -> tuple:
    """The permutation of ``ndim`` dimensions that moves ``dim`` last."""
    return tuple(d for d in range(ndim) if d != dim) + (dim,)


def channel_dimension(t: Tensor, operand) -> int | None:
    """The dimension of ``operand`` that every load of it in contraction ``t`` indexes with
    the output channel variable (``t.args[-3]``) itself; None when a load uses the channel
    otherwise (in an expression, or in two indices), or none uses it.

    >>> from te import Buffer, Reduce, Sum
    >>> X = Buffer("X", (1, 4, 10, 10), "float32"); W = Buffer("W", (16, 4, 3, 3), "float32")
    >>> Y = Reduce("Y", (1, 16, 8, 8), Sum(), lambda b, co, y, x, ci, ry, rx:
    ...            X[b, ci, y + ry, x + rx] * W[co, ci, ry, rx], (4, 3, 3))
    >>> channel_dimension(Y, W), channel_dimension(Y, X)
    (0, None)
    """
    channel = t.args[-3]
    dims = set()
    for ld in loads(t.body):
        if ld.buffer.name != operand.name:
            continue
        using = [d for d, index in enumerate(ld.indices) if uses_var(index, channel)]
        if len(using) != 1 or ld.indices[using[0]] is not channel:
            return None
        dims.add(using[0])
    return dims.pop() if len(dims) == 1 else None


def channel_operands(t: Tensor) -> list:
    """The operands of contraction ``t`` that it reads by output channel (to pack, channels
    last), in the order of their first load.

    >>> from te import Buffer, Reduce, Sum
    >>> X = Buffer("X", (1, 4, 10, 10), "float32"); W = Buffer("W", (16, 4, 3, 3), "float32")
    >>> Y = Reduce("Y", (1, 16, 8, 8), Sum(), lambda b, co, y, x, ci, ry, rx:
    ...            X[b, ci, y + ry, x + rx] * W[co, ci, ry, rx], (4, 3, 3))
    >>> [b.name for b in channel_operands(Y)]
    ['W']
    """
    channel = t.args[-3]
    out = []
    for ld in loads(t.body):
        if uses_var(ld.indices, channel) and all(ld.buffer.name != b.name for b in out):
            out.append(ld.buffer)
    return out


def _unroll_small_reductions(nest, loops: list) -> None:
    """Unroll the small reduction loops ``loops`` (a convolution's filter window), innermost
    first, but the innermost: the filter's columns stay a loop (unrolling them too doubled
    the build of conv2d 64 x 56 x 56, 0.8 -> 1.5-1.9 s, for the same speed), its rows are
    unrolled (neighbouring output rows share their input rows)."""
    for lp in loops[:-1][::-1]:
        _unroll(nest, lp)


def reorder_accumulation(nest, chain: list, wanted: list, reduction: list) -> None:
    """Reorder ``chain`` (an ``accumulation_chain``) into the order of ``wanted`` (the same
    loops) in two steps: the output loops among themselves (the init store moves with them),
    then the ``reduction`` loops into place, which distributes the init at the outermost loop
    they pass, so that it runs inside the loops the reduction stays inside.

    >>> from te import Buffer, Reduce, Sum
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (4, 8), "float32"); B = Buffer("B", (8, 4), "float32")
    >>> C = Reduce("C", (4, 4), Sum(), lambda i, j, k: A[i, k] * B[k, j], (8,))
    >>> nest = LoopNest([C]); i, j, k = nest.get_loops_for(C)
    >>> reorder_accumulation(nest, [i, j, k], [j, k, i], [k])
    >>> print(nest)
    for (int j = 0; j < 4; j++) {
      for (int i_1 = 0; i_1 < 4; i_1++) {
        C[i_1, j] = 0.0f;
      }
      for (int k = 0; k < 8; k++) {
        for (int i = 0; i < 4; i++) {
          C[i, j] = C[i, j] + A[i, k] * B[k, j];
        }
      }
    }
    """
    red = {id(lp.var) for lp in reduction}
    spatial = [lp for lp in wanted if id(lp.var) not in red]
    _reorder_to(nest, [lp for lp in chain if id(lp.var) not in red], spatial)
    _reorder_to(nest, accumulation_chain(nest, spatial[0]), wanted)


def _reorder_to(nest, chain: list, wanted: list) -> None:
    """Reorder the loops of ``chain`` (outermost first) into the order of ``wanted`` (the same
    loops), if it differs."""
    pos = {id(lp.var): n for n, lp in enumerate(chain)}
    missing = [lp.name for lp in wanted if id(lp.var) not in pos]
    if missing:     # a statement beside the loops (an intermediate computed inside them) ends the chain
        raise ScheduleError(f"cannot reorder loops {[lp.name for lp in chain]} into {[lp.name for lp in wanted]}: "
                            f"{', '.join(missing)} not nested directly inside the others")
    perm = [pos[id(lp.var)] for lp in wanted]
    if perm != list(range(len(perm))):
        nest.reorder(chain, perm)


def _leftover_columns(nest, t: Tensor, spatial: list, j_rest, n_red: int, par: bool, lanes: int = 8,
                      rows: int = 1) -> list:
    """Give the columns left over by the vector tiles (loop ``j_rest``) a nest of their own
    (the loops above them distributed), with the reduction outside the leftover columns,
    those vectorized (split by ``lanes`` first when their count is symbolic) and accumulated
    in a local buffer (registers); ``par`` parallelizes its outermost loop of more than one
    iteration. With ``rows`` > 1 the row loop around the columns is cut into tiles of
    ``rows`` rows, unrolled inside the reduction: each step then updates ``rows``
    independent accumulators instead of waiting on one (matmul 1020, whose 12 leftover
    columns added one multiply-add per step to a single accumulator: 7.27 -> 6.64 ms,
    PyTorch 6.64-6.70; 1000: 6.62 -> 6.38 ms, PyTorch 6.11-6.20); the rows the tiles leave
    over keep one accumulator each. Returns the main nest's spatial loops."""
    spatial = list(spatial)
    rest_top = j_rest
    for n in range(len(spatial) - 2, -1, -1):
        spatial[n], rest_top = nest.distribute(spatial[n])[:2]
    chain = accumulation_chain(nest, rest_top)
    ns = len(chain) - n_red
    n_rows = const_extent(chain[ns - 2].extent) if ns >= 2 else None
    if rows > 1 and ns >= 2 and (n_rows is None or n_rows >= rows):
        outer = chain[:ns - 2]
        r_out, row_tile, row_tail = nest.split_with_tail(chain[ns - 2], rows)
        sub = accumulation_chain(nest, r_out)         # row tiles, rows, columns, reduction
        nest.reorder(sub, [0] + list(range(3, len(sub))) + [1, 2])
        if const_extent(sub[2].extent) is None:
            masked_column_tiles(nest, t, sub[3], outer + [sub[0]], par, lanes, 1, f"{t.name}_cols")
        else:
            _columns_nest(nest, t, outer + [sub[0]], sub[2], par, lanes, f"{t.name}_cols")
        _unroll(nest, row_tile)
        if row_tail is not None:
            # the rows the tiles leave over (fewer than a tile: not parallel)
            tail = accumulation_chain(nest, row_tail)     # rows, columns, reduction
            nest.reorder(tail, [0] + list(range(2, len(tail))) + [1])
            _columns_nest(nest, t, [tail[0]], tail[1], False, lanes, f"{t.name}_corner")
    else:
        nest.reorder(chain, [chain.index(lp) for lp in chain[:ns - 1] + chain[ns:] + [chain[ns - 1]]])
        _columns_nest(nest, t, chain[:ns - 1], chain[ns - 1], par, lanes, f"{t.name}_cols")
    return spatial


def masked_column_tiles(nest, t: Tensor, red_top, outer: list, par: bool, lanes: int, vectors: int,
                        name: str):
    """Column tiles of ``vectors`` vectors of ``lanes``, the last tile masked
    (``split_with_mask``), for reduction ``t`` whose loops are: an init nest (its last loop
    the columns) just before the reduction loop ``red_top``, below which the columns are
    the innermost loop. Each tile is a register tile of its own: the local buffer ``name``
    (what the loops between the reduction and the columns cover, x the tile) is
    initialised, accumulated over the whole reduction, and copied out once; the tile's
    vectors unrolled. The LLVM target runs the masked tile as vector code too
    (``masked_lanes``). ``par`` parallelizes the outermost loop of ``outer`` (the loops
    around the tiles) and the tile loop of more than one iteration. Returns the tile loop.

    Where the tiles leave columns over, there is then no nest for them (with a symbolic N,
    the leftover columns of a matmul ran inside the reduction with accumulators in memory,
    the last partial vector as scalars: 11.3 ms at 1020, PyTorch 6.9; a column sum over
    1000 columns ran its last 40 on one core).

    >>> from te import Buffer, Reduce, Sum
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (4, 40), "float32")
    >>> S = Reduce("S", (40,), Sum(), lambda j, i: A[i, j], (4,))
    >>> nest = LoopNest([S]); j, i = nest.get_loops_for(S)
    >>> reorder_accumulation(nest, [j, i], [i, j], [i])
    >>> masked_column_tiles(nest, S, i, [], False, 8, 2, "S_tile").extent
    3
    """
    red_top = nest.loop(red_top)
    around = nest.get_enclosing_loops(red_top)[:-1]
    stmts = around[-1].stmt.body.stmts if around else nest.root.stmts
    fors = [s for s in stmts if isinstance(s, For)]
    at = next(n for n, s in enumerate(fors) if s.var is red_top.var)
    if at == 0:
        raise ScheduleError(f"masked_column_tiles: no init nest of {t.name} just before its reduction loop "
                            f"{red_top.name}; reorder the reduction inside the columns first (reorder_accumulation)")
    init = accumulation_chain(nest, Loop(nest, fors[at - 1].var))         # ..., columns
    comp = accumulation_chain(nest, red_top)
    co, cl = nest.split_with_mask(comp[-1], lanes * vectors)
    cv = None
    if vectors > 1:
        cv, cl, _ = nest.split_with_tail(cl, lanes)
    comp = accumulation_chain(nest, red_top)[:len(comp)]        # reduction, ..., column tiles
    nest.reorder(comp, [len(comp) - 1] + list(range(len(comp) - 1)))
    ico, icl = nest.split_with_mask(init[-1], lanes * vectors)
    if len(init) > 1:
        nest.reorder(init[:-1] + [ico], [len(init) - 1] + list(range(len(init) - 1)))
    tile = nest.fuse([ico, co])
    if par:
        parallelize_first(nest, list(outer) + [tile])
    nest.cache_accesses(nest.buffer(t.name), name, tile)
    nest.vectorize(cl)
    if cv is not None:
        _unroll(nest, cv)
        _, icl, _ = nest.split_with_tail(icl, lanes)
    nest.vectorize(icl)
    out = [Loop(nest, s.var) for s in nest.loop(tile).stmt.body.stmts if isinstance(s, For)][-1]
    _, out_lanes = nest.split_with_mask(accumulation_chain(nest, out)[-1], lanes)
    nest.vectorize(out_lanes)
    return tile


def _columns_nest(nest, t: Tensor, outer: list, cols, par: bool, lanes: int, name: str) -> None:
    """The leftover columns ``cols`` of ``_leftover_columns``, inside the reduction and the
    loops ``outer``: the outermost of those of more than one iteration parallel (``par``),
    the accumulator (the local buffer ``name``) local to the innermost, the columns
    vectorized."""
    if par:
        parallelize_first(nest, outer)
    if outer:
        nest.cache_accesses(nest.buffer(t.name), name, outer[-1])
    if const_extent(cols.extent) is None:
        # fewer than one column tile, a symbolic count: vectors of ``lanes``, then single columns
        vectorize_split(nest, cols, lanes)
    else:
        nest.vectorize(cols)


def column_reduction(nest, t: Tensor, lanes: int, vectors: int, par: bool) -> None:
    """The schedule of a reduction ``t`` whose operands are read along its last output index
    and not along the reduction's (a column sum, ``S[j] = sum_i A[i, j]``): the last output
    loop is cut into tiles of ``vectors`` vectors of ``lanes`` (fewer where the loop is
    shorter), the reduction runs inside each tile, whose partial results stay in registers
    (a local buffer) across the whole reduction, the tile's vectors unrolled; where the
    tiles do not divide the columns (or their count is symbolic), the last tile is masked
    (``masked_column_tiles``: 4000 x 1000 in 0.35 ms against 0.45 with its last 40 columns
    in a nest of their own, on one core; PyTorch 0.39-0.44). ``par`` parallelizes the
    outermost output loop of more than one iteration. Every output element adds its terms
    in the order of the unscheduled program: the same values.

    >>> from te import Buffer, Reduce, Sum
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (100, 64), "float32")
    >>> S = Reduce("S", (64,), Sum(), lambda j, i: A[i, j], (100,))
    >>> nest = LoopNest([S])
    >>> column_reduction(nest, S, 8, 4, par=False)
    >>> print(nest)
    for (int j_outer = 0; j_outer < 2; j_outer++) {
      for (int j_inner_outer_1 = 0; j_inner_outer_1 < 4; j_inner_outer_1++) {
        for (int j_inner_inner_1 = 0; j_inner_inner_1 < 8; j_inner_inner_1++) {
          S_local[j_inner_outer_1 * 8 + j_inner_inner_1] = 0.0f;
        }
      }
      for (int i = 0; i < 100; i++) {
        unrolled for (int j_inner_outer = 0; j_inner_outer < 4; j_inner_outer++) {
          vectorized for (int j_inner_inner = 0; j_inner_inner < 8; j_inner_inner++) {
            S_local[j_inner_outer * 8 + j_inner_inner] = S_local[j_inner_outer * 8 + j_inner_inner] + A[i, j_outer * 32 + j_inner_outer * 8 + j_inner_inner];
          }
        }
      }
      for (int S_local_i0 = 0; S_local_i0 < 32; S_local_i0++) {
        S[j_outer * 32 + S_local_i0] = S_local[S_local_i0];
      }
    }
    """
    loops = nest.get_loops_for(t)
    ns = len(t.args)
    spatial, red = list(loops[:ns]), list(loops[ns:])
    columns = const_extent(spatial[-1].extent)
    if columns is not None and columns < lanes:     # fewer than one vector: the reduction outside them
        reorder_accumulation(nest, accumulation_chain(nest, spatial[0]), spatial[:-1] + red + spatial[-1:], red)
        if par:
            parallelize_first(nest, spatial[:-1])
        nest.vectorize(spatial[-1])
        return
    if columns is not None:
        vectors = max(1, min(vectors, columns // lanes))
    if columns is None or columns % (lanes * vectors):
        # the tiles leave columns over: the last tile masked
        reorder_accumulation(nest, accumulation_chain(nest, spatial[0]), spatial[:-1] + red + spatial[-1:], red)
        masked_column_tiles(nest, t, red[0], spatial[:-1], par, lanes, vectors, f"{t.name}_local")
        return
    jo, ji, _ = nest.split_with_tail(spatial[-1], lanes * vectors)
    jv, jl, _ = nest.split_with_tail(ji, lanes)
    outer = list(spatial[:-1]) + [jo]
    reorder_accumulation(nest, accumulation_chain(nest, outer[0]), outer + red + [jv, jl], red)
    if par:
        parallelize_first(nest, outer)
    nest.cache_accesses(nest.buffer(t.name), f"{t.name}_local", jo)
    nest.vectorize(jl)
    if several(jv):
        _unroll(nest, jv)


def column_stream(nest, t: Tensor, lanes: int, cores: int, l1_bytes: int, rows: int = 1) -> None:
    """A reduction along the columns (as for ``column_reduction``) that streams its rows: the
    reduction runs outside the last output loop, which is vectorized, so the rows are read
    in memory order and the outputs accumulate in place, in L1. With ``cores`` > 1 and no
    other output loop to run in parallel, the columns are cut into one chunk per core.
    Raises ``ScheduleError`` before it changes the nest (the caller then takes
    ``column_reduction``) where a core's outputs would take more than half of ``l1_bytes``,
    or the columns do not cut into chunks of whole vectors. A column sum of 4096^2 on 2 cores: 1.12 ms, against 2.04 ms
    for tiles of 4 vectors held in registers (the tiles step through a page per row).
    ``rows`` rows at a time are added to each vector of outputs (the innermost reduction loop
    split by ``rows``, its inner part unrolled inside the vector loop; the rest in a loop of
    its own), so the outputs are loaded and stored once per ``rows`` rows; each output still
    adds its terms in order (4096^2: 1.15 against 1.33 ms row by row, same process).

    >>> from te import Buffer, Reduce, Sum
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (100, 64), "float32")
    >>> S = Reduce("S", (64,), Sum(), lambda j, i: A[i, j], (100,))
    >>> nest = LoopNest([S])
    >>> column_stream(nest, S, 8, 2, 48 * 1024, rows=4)
    >>> [lp.name for lp in nest.get_loops_for(S)]
    ['j_outer', 'i_outer', 'j_inner_outer', 'i_inner', 'j_inner_inner']
    >>> [lp.kind for lp in nest.get_loops_for(S)]
    ['parallel', 'serial', 'serial', 'unrolled', 'vectorized']
    """
    loops = nest.get_loops_for(t)
    ns = len(t.args)
    spatial, red = list(loops[:ns]), list(loops[ns:])
    columns = const_extent(spatial[-1].extent)
    outer = next((lp for lp in spatial[:-1] if several(lp)), None)
    chunks = cores if cores > 1 and outer is None else 1
    if columns is None or columns % (chunks * lanes) or columns * t.dtype.itemsize // chunks > l1_bytes // 2:
        raise ScheduleError(f"column_stream({t.name}): the columns ({spatial[-1].extent}) do not cut into "
                            f"{chunks} chunks of whole {lanes}-lane vectors that fit half of L1")
    if chunks > 1:
        jo, ji, _ = nest.split_with_tail(spatial[-1], columns // chunks)
        wanted = spatial[:-1] + [jo] + red + [ji]
        reorder_accumulation(nest, accumulation_chain(nest, wanted[0]), wanted, red)
        nest.parallelize(jo)
    else:
        ji = spatial[-1]
        reorder_accumulation(nest, accumulation_chain(nest, spatial[0]), spatial[:-1] + red + [ji], red)
        if cores > 1 and outer is not None:
            nest.parallelize(outer)
    vectors, _, _ = vectorize_split(nest, ji, lanes)
    row = red[-1]           # directly around the columns' loops
    extent = const_extent(row.extent)
    if rows > 1 and (extent is None or extent >= rows):
        _, ri, _ = nest.split_with_tail(row, rows)
        if vectors is not None:     # the rows inside the loop over the vectors
            nest.reorder([ri, vectors], [1, 0])
        _unroll(nest, ri)


def blocks_leftover_columns(t: Tensor, k: dict) -> bool:
    """Whether ``contraction`` gives the columns of ``t`` left over by its vector tiles the
    main register tile (``_blocked_leftover_columns``): three or more output dimensions of
    constant extents, the row and third-last dimension tiles of ``k`` dividing theirs, no
    reduction slices.

    >>> from te import Buffer, Reduce, Sum
    >>> P = Buffer("P", (8, 30, 30), "float32"); W = Buffer("W", (16, 8, 3, 3), "float32")
    >>> Y = Reduce("Y", (16, 28, 28), Sum(), lambda co, y, x, ci, ry, rx: P[ci, y + ry, x + rx] * W[co, ci, ry, rx],
    ...            (8, 3, 3))
    >>> [blocks_leftover_columns(Y, dict(reg_i=rows, reg_o=4, kc=0)) for rows in (4, 3)]
    [True, False]
    """
    dims = [const_extent(d) for d in t.dims]
    return len(dims) >= 3 and not k["kc"] and None not in dims[-3:] and dims[-2] % max(1, k["reg_i"]) == 0 \
        and dims[-3] % max(1, k["reg_o"]) == 0


def _blocked_leftover_columns(nest, t: Tensor, k: dict, above: list, tile: set, j_rest, n_red: int) -> list:
    """Give the columns left over by the vector tiles (loop ``j_rest``) a nest of their own,
    register-blocked like the main tile. ``above`` are the loops around ``j_rest``, outermost
    first, each distributed here into a main and a leftover copy; ``tile`` the positions in
    ``above`` of the register tile's loops (the inner loops of the row and third-last
    dimension splits). In the leftover nest the reduction runs inside the other loops and
    around the tile, which accumulates in a local buffer, its tile loops unrolled and its
    columns vectorized. Returns the main nest's copies of ``above``."""
    main, rest = list(above), [None] * len(above)
    for n in range(len(main) - 1, -1, -1):
        main[n], rest[n] = nest.distribute(main[n])[:2]
    chain = accumulation_chain(nest, rest[0])
    red, cols = chain[len(chain) - n_red:], chain[len(chain) - n_red - 1]
    outer = [nest.loop(lp) for n, lp in enumerate(rest) if n not in tile]
    inner = [nest.loop(lp) for n, lp in enumerate(rest) if n in tile]
    reorder_accumulation(nest, chain, outer + red + inner + [cols], red)
    if k["par"]:
        parallelize_first(nest, outer)
    nest.cache_accesses(nest.buffer(t.name), f"{t.name}_cols", outer[-1])
    nest.vectorize(cols)
    for lp in inner:
        if several(lp):
            _unroll(nest, lp)
    if k["unroll_r"]:
        _unroll_small_reductions(nest, red[1:])
    return main


def _shares_the_pack(t: Tensor, k: dict, outer_fixed: list) -> bool:
    """Whether the leftover rows of a 2-D contraction go inside the column tile loop of the
    main rows, to read the packed copy of its operand (``B`` of ``A @ B`` or ``A @ B.T``)
    while it is in cache: the column tiles must be the outermost tile loop. Read in place, B
    came from memory once more (a symbolic N at 1024, 4 rows left over: 6.98 against 6.83 ms,
    PyTorch 6.66; at 1030, 10.16 against 9.83, PyTorch 7.00); transposed again, more
    (``x @ W.T`` 1024: 7.4 against 6.9 ms)."""
    if outer_fixed or k["order"][:1] != "j" or not (k["vec_n"] and k.get("pack") and k.get("pack_buffer")):
        return False
    return any(ld.buffer.name == k["pack_buffer"] for ld in loads(t.body))


def _leftover_rows(nest, t: Tensor, k: dict, top, first, i_tail, n_red: int, parallel: bool = True):
    """Schedule the rows left over by the row tile like the main tile: one tile of vectors
    per column tile, the reduction inside it, the leftover rows (and the third-last
    dimension's tile) unrolled when their count is constant, accumulated in a local buffer;
    ``top`` is the outermost loop of the leftover nest (``first`` or a loop around it).
    Returns the column tile loop (outermost, not parallel unless ``parallel``)."""
    chain = accumulation_chain(nest, first)
    pos_i = [lp.var for lp in chain].index(i_tail.var)
    reg_outer, j_tile = chain[:pos_i + 1], chain[pos_i + 1]
    j_inner = chain[pos_i + 2:len(chain) - n_red]
    red = chain[len(chain) - n_red:]
    reorder_accumulation(nest, chain, [j_tile] + red + reg_outer + j_inner, red)
    if k["par"] and parallel:
        top = j_tile if top is first else top
        par = next((lp for lp in [nest.loop(top)] + nest.get_inner_loops(top) if several(lp)), None)
        if par is not None and par.var is not red[0].var:
            nest.parallelize(par)
    nest.cache_accesses(nest.buffer(t.name), f"{t.name}_rest", j_tile)
    if k["vec_n"]:
        nest.vectorize(j_inner[-1])
    for lp in j_inner[:-1] + reg_outer:
        n = const_extent(lp.extent)
        if n is not None and n > 1:
            _unroll(nest, lp)
    if k["unroll_r"]:
        _unroll_small_reductions(nest, red[len(red) - k["n_small_red"]:])
    return j_tile


def dot_product_tiles(nest, t: Tensor, lanes: int, cols: int, par: bool):
    """The schedule of ``x @ W.T`` with few rows of ``x`` (``Y[i, j] = sum_k x[i, k] *
    W[j, k]``): ``cols`` rows of W at a time (the tile loop, parallel with ``par``), all of
    x's rows, and the reduction in vectors of ``lanes`` partial sums (``rfactor``), so each
    vector of W is loaded once for every row of x and each vector of x once for ``cols``
    rows of W; the rows x ``cols`` x ``lanes`` partial sums stay in registers (a local
    buffer, the rows and W's rows unrolled) and are added up once per output. Refused
    (ScheduleError) unless the extents are constant and ``cols`` and ``lanes`` divide them.
    Against dot products one output at a time (1024 x 1024, AVX-512, 2 cores): 2 rows
    0.088 -> 0.062 ms, 3 rows 0.107 -> 0.067, 5 rows 0.149 -> 0.077, 6 rows 0.161 -> 0.087
    (PyTorch 0.059, 0.067, 0.101, 0.108). Returns the tile loop.

    >>> from te import Buffer, Reduce, Sum
    >>> from loopnest import LoopNest
    >>> x, W = Buffer("x", (3, 32), "float32"), Buffer("W", (8, 32), "float32")
    >>> Y = Reduce("Y", (3, 8), Sum(), lambda i, j, k: x[i, k] * W[j, k], (32,))
    >>> nest = LoopNest([Y]); dot_product_tiles(nest, Y, 16, 4, par=True).kind
    'parallel'
    """
    loops = nest.get_loops_for(t)
    if len(loops) != 3:
        raise ScheduleError(f"dot_product_tiles: {t.name} has {len(loops)} loops, not rows, columns and one reduction")
    i, j, k = loops
    for loop, f in ((i, 1), (j, cols), (k, lanes)):
        n = const_extent(loop.extent)
        if n is None or n % f:
            raise ScheduleError(f"dot_product_tiles: the extent {loop.extent} of {loop.name} is not a constant "
                                f"multiple of {f}")
    nest.reorder([i, j], [1, 0])
    jo, ji, _ = nest.split_with_tail(j, cols)
    ko, kl, _ = nest.split_with_tail(k, lanes)
    rf = nest.rfactor(t, kl)
    nest.distribute(i)
    parts = nest.distribute(ji)
    chains = [accumulation_chain(nest, p) for p in parts]
    comp = next(c for c in chains if any(lp.var is ko.var for lp in c))      # W's rows, rows, k, lanes
    nest.reorder(comp[:3], [2, 1, 0])
    comp = accumulation_chain(nest, comp[2])                                  # k, rows, W's rows, lanes
    nest.cache_accesses(nest.buffer(rf.name), f"{rf.name}_tile", jo)
    nest.vectorize(comp[3])
    for loop in (comp[2], comp[1]):
        if several(loop):
            _unroll(nest, loop)
    if par:
        nest.parallelize(jo)
    return nest.loop(jo)


def dot_product_row_tiles(nest, t: Tensor, lanes: int, cols: int, rows: int, par: bool):
    """``dot_product_tiles`` for a symbolic count of rows of ``x``: in each tile of ``cols``
    rows of W (the tile loop, parallel with ``par``), tiles of ``rows`` rows of x, then the
    rows left over in tiles of half as many rows, down to single rows; each tile's partial
    sums (rows x ``cols`` vectors) stay in registers and are added up once per output. Refused
    (ScheduleError) unless the columns and the reduction are constants that ``cols`` and
    ``lanes`` divide. Returns the tile loop.

    >>> from te import Buffer, Reduce, Sum, Var
    >>> from loopnest import LoopNest
    >>> M = Var("M"); x, W = Buffer("x", (M, 32), "float32"), Buffer("W", (8, 32), "float32")
    >>> Y = Reduce("Y", (M, 8), Sum(), lambda i, j, k: x[i, k] * W[j, k], (32,))
    >>> nest = LoopNest([Y]); _ = dot_product_row_tiles(nest, Y, 16, 4, 2, par=False)
    >>> sorted(b.name for b in nest.intermediates)
    ['Y_rf', 'Y_rf_rest', 'Y_rf_tile']
    >>> [b.shape for b in nest.intermediates if b.name != "Y_rf"]
    [(2, 4, 16), (1, 4, 16)]
    """
    loops = nest.get_loops_for(t)
    if len(loops) != 3:
        raise ScheduleError(f"dot_product_row_tiles: {t.name} has {len(loops)} loops, not rows, columns and one "
                            "reduction")
    i, j, k = loops
    for loop, f in ((j, cols), (k, lanes)):
        n = const_extent(loop.extent)
        if n is None or n % f:
            raise ScheduleError(f"dot_product_row_tiles: the extent {loop.extent} of {loop.name} is not a constant "
                                f"multiple of {f}")
    x = next(ld.buffer for ld in loads(t.body) if uses_var(ld.indices, t.args[0]))
    nest.reorder([i, j], [1, 0])
    jo, ji, _ = nest.split_with_tail(j, cols)
    ko, kl, _ = nest.split_with_tail(k, lanes)
    rf = nest.rfactor(t, kl)
    nest.reorder([ji, i], [1, 0])               # each tile of W's rows: the rows of x, W's rows
    _, ii, it = nest.split_with_tail(i, rows)

    def partial_sums(row_loop, name, tile):
        """The rows of x at ``row_loop`` (the rows of a tile, with ``tile``; else one row):
        their loop of W's rows distributed around its statements (and the rows' loop too, in
        a tile), the reduction outside W's rows (and the tile's rows) where x is read, the
        partial sums cached around the reduction, in registers."""
        parts = nest.distribute(nest.get_inner_loops(row_loop)[0])
        if tile:
            parts = nest.distribute(row_loop)
        comp = next(accumulation_chain(nest, p) for p in parts if stmt_reads(nest.loop(p).stmt, x))
        red = len(comp) - 2                     # the reduction slices' loop: before the lanes
        nest.reorder(comp[:red + 1], [red] + list(range(red)))
        comp = accumulation_chain(nest, comp[red])
        nest.cache_accesses(rf, name, nest.get_parent_loop(comp[0]))
        nest.vectorize(comp[-1])
        for lp in comp[1:-1]:
            if several(lp):
                _unroll(nest, lp)

    partial_sums(ii, f"{rf.name}_tile", tile=True)
    size = rows // 2                            # the rows left over: tiles of half as many, down to one
    while it is not None and size >= 2:
        _, inner, it = nest.split_with_tail(it, size)
        partial_sums(inner, f"{rf.name}_rest{size}", tile=True)
        size //= 2
    if it is not None:
        partial_sums(it, f"{rf.name}_rest", tile=False)
    if par:
        nest.parallelize(jo)
    return nest.loop(jo)


def reduction(nest, t: Tensor, k: dict):
    """A plain reduction: the innermost reduction loop split by ``unroll_k`` and unrolled,
    the outermost loop parallel (``par``); returns the outermost loop (None: no loops).

    >>> from te import Buffer, Reduce, Sum
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (4, 8), "float32")
    >>> R = Reduce("R", (4,), Sum(), lambda i, k: A[i, k], (8,))
    >>> nest = LoopNest([R]); reduction(nest, R, {"unroll_k": 4, "par": True}).name
    'i'
    """
    loops = nest.get_loops_for(t)
    f = k.get("unroll_k", 0)
    if f:
        _, inner, _ = nest.split_with_tail(loops[-1], f)
        _unroll(nest, inner)
    if k.get("par"):
        nest.parallelize(loops[0])
    return loops[0] if loops else None


def vector_reduction(nest, t: Tensor, at, lanes: int, fold: int = 0) -> str | bool:
    """Vectorize the innermost reduction loop of ``t`` through ``lanes`` partial results:
    split it by ``lanes``, ``rfactor`` at the inner part (the partials accumulate side by
    side: a reassociation that rfactor makes legal for Sum / Max / Min), keep the partials
    in a local buffer at loop ``at`` (registers) and vectorize their accumulation. A
    constant extent that ``lanes`` divides is split exactly; any other extent (a symbolic
    one included) is split with a mask (``split_with_mask``: the last partial vector is
    guarded). With ``fold``, the partials are then added into ``fold`` partials by vector
    operations (a second rfactor) where ``fold`` divides ``lanes``, so the serial reduction
    left adds up only ``fold`` of them. Returns the name of the local buffer of the
    ``lanes`` partials (what the reduction's update accumulates into), or False (and
    changes nothing) when the extent is a constant no larger than ``lanes``.

    >>> from te import Buffer, Reduce, Sum, Var
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (4, 64), "float32")
    >>> R = Reduce("R", (4,), Sum(), lambda i, k: A[i, k], (64,))
    >>> nest = LoopNest([R]); vector_reduction(nest, R, nest.get_loops_for(R)[0], 16)
    'R_rf_lanes'
    >>> N = Var("N"); B = Buffer("B", (4, N), "float32")
    >>> S = Reduce("S", (4,), Sum(), lambda i, k: B[i, k], (N,))
    >>> nest = LoopNest([S]); vector_reduction(nest, S, nest.get_loops_for(S)[0], 16)
    'S_rf_lanes'
    >>> nest = LoopNest([R]); vector_reduction(nest, R, nest.get_loops_for(R)[0], 32, fold=8)
    'R_rf_lanes'
    >>> [lp.extent for lp in nest.get_loops_for(R)]     # the row, then the 8 partials left
    [4, 8]
    """
    k = nest.get_loops_for(t)[-1]
    n = const_extent(k.extent)
    if n is not None and n <= lanes:
        return False
    if n is not None and n % lanes == 0:
        _, ki, _ = nest.split_with_tail(k, lanes)
    else:
        _, ki = nest.split_with_mask(k, lanes)
    rf = nest.rfactor(t, ki)
    partials = rf.name + "_lanes"
    nest.cache_accesses(rf, partials, at)
    nest.vectorize(ki)
    if fold and fold < lanes and lanes % fold == 0:
        _, fi, _ = nest.split_with_tail(nest.get_loops_for(t)[-1], fold)
        rf = nest.rfactor(t, fi)
        nest.cache_accesses(rf, rf.name + "_lanes", at)
        nest.vectorize(fi)
    return partials


def reduction_parts(nest, t: Tensor, buffer: str, cores: int):
    """Run the reduction of ``t`` on ``cores`` cores when it has too few outputs to share out
    (a sum of a whole array): ``buffer`` -- ``t``'s own name, or the partial results its
    update accumulates into (the vector lanes of :func:`vector_reduction`) -- gets a copy
    for each of ``cores`` parts of its outermost reduction loop that runs several times
    (``privatize``), the parts run in parallel and are added after it. Returns the loop of
    the parts; raises ScheduleError (the nest unchanged by the caller's ``attempt``) when no
    reduction loop runs several times.

    >>> from te import Buffer, Reduce, Sum
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (64, 64), "float32")
    >>> T = Reduce("T", (1,), Sum(), lambda z, i, j: A[i, j], (64, 64))
    >>> nest = LoopNest([T]); reduction_parts(nest, T, "T", 2)
    Loop(i_part)
    >>> [(lp.name, lp.kind) for lp in nest.get_loops_for("T_part")][:3]
    [('z', 'serial'), ('i_part', 'parallel'), ('i_inner', 'serial')]
    """
    loops = nest.get_loops_for(buffer)
    outer = next((lp for lp in loops[len(t.args):] if lp.kind == "serial" and several(lp)), None)
    if outer is None:
        raise ScheduleError(f"{t.name}'s reduction has no serial loop that runs several times to split among cores")
    return nest.privatize(buffer, outer, parts=cores, parallel=True)


def elementwise(nest, t: Tensor, k: dict):
    """An element-wise tensor: ``flatten`` its loops, split the innermost by ``vec`` and
    vectorize it (0: not), parallelize the outermost loop that runs more than once (``par``;
    a batch of one is not); returns the outermost loop.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (4, 8), "float32")
    >>> B = Compute("B", (4, 8), lambda i, j: A[i, j] + 1.0)
    >>> nest = LoopNest([B]); elementwise(nest, B, {"flatten": True, "vec": 8}).extent
    4
    """
    loops = nest.get_loops_for(t)
    if k.get("flatten"):
        loops = [nest.flatten(loops)]
    w = k.get("vec", 0)
    outer_handle = loops[0]
    serial = list(loops)
    if w:
        outer, inner, _tail = nest.split_with_tail(loops[-1], w)
        nest.vectorize(inner)
        serial[-1] = outer
        if len(loops) == 1:
            outer_handle = outer
    if k.get("par"):
        parallelize_first(nest, serial)
    return outer_handle
