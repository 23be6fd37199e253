"""``auto_schedule``: a schedule for any nest, chosen from the shape of its computation and
the target CPU, without search.

For each tensor, producers before consumers:

- **inline** an element-wise intermediate that is cheap, or read once by its only consumer;
- **compute at** the consumer's row loop an intermediate whose consumers all read it row
  by row (softmax's max, exponentials and sum), or at neighbouring rows (a blur's
  horizontal pass, a stencil chain): then per strip of at least twice the rows the chain
  recomputes around a strip (8 to ``MAX_STRIP_ROWS``); else compute it at the **root**;
- **contractions** (matmul, convolution) get the register-blocked template with tiles sized
  for the vector registers of the target (``contraction_params``);
- **reductions** accumulate through vector lanes (``rfactor``) when the reduction extent
  allows, their outer loop parallel, or, with fewer outputs than cores (a sum of a whole
  array), the reduction split into a part per core (``reduction_parts``); a reduction
  whose reads run along its last output index and not along the reduction's (a column
  sum) streams its rows into outputs that stay in L1 (``column_stream``), else keeps a
  tile of output vectors in registers while the reduction runs inside it
  (``column_reduction``), as does a reduction of few terms reading along its last output
  index (``short_window``: a 1-D convolution);
- **element-wise** tensors vectorize the contiguous innermost loop at the native width
  (tiles when a read is transposed), flatten small rows, and parallelize the outer loop
  when there is enough work for the target's cores; a row that would be read by gathers
  (a downsampling's ``2x + c``, an upsampling's ``x // 2``, clamped edges: ``gathers``) is
  not vectorized by force but left to LLVM's cost model.

A choice whose transforms are refused (``ScheduleError``, e.g. a vectorization of a
symbolic extent) is undone and the next simpler choice is tried, down to leaving the
tensor as it is; every transform applied is recorded in ``nest.history``. The report says
what was chosen for each tensor and why.

>>> from te import Buffer, Reduce, Sum
>>> from loopnest import LoopNest, Target
>>> A = Buffer("A", (64, 64), "float32"); B = Buffer("B", (64, 64), "float32")
>>> C = Reduce("C", (64, 64), Sum(), lambda i, j, k: A[i, k] * B[k, j], (64,))
>>> nest = LoopNest([C])
>>> print(auto_schedule(nest, Target(vector_bits=256, vector_registers=16, cores=2)))
C: register-blocked 6 rows x 2 vectors of 8 lanes, B packed, parallel (contraction: rows x vectors accumulators fit 16 vector registers)
>>> len(nest.history) > 5
True
"""
from __future__ import annotations

from dataclasses import dataclass, field

from te.dtypes import as_dtype
from te.expr import Add, IntImm, Sub, Var, substitute
from te.extern import ExternTensor
from te.functor import Functor
from te.queries import int_value, loads, uses_var
from te.simplify import simplify
from te.tensor import Tensor

from ..errors import ScheduleError
from ..queries import stmt_loads
from ..target import Target, resolve_target
from .templates import (blocks_leftover_columns, channel_contraction, channel_dimension, channel_operands,
                        column_reduction, column_stream, columns_last, contraction, dot_product_row_tiles,
                        dot_product_tiles,
                        deferred_unrolls, pack_candidate, pending_unrolls, several, reduction as plain_reduction,
                        reduction_parts, unroll_fully, vector_reduction, vectorize_split)
from .classify import classify, const_extent, consumers_of, sliced_loop

__all__ = ["auto_schedule", "AutoScheduleReport", "TensorChoice", "channel_params", "contraction_params", "gathers",
           "matmul_kc", "REDUCE_VECTORS", "STREAM_ROWS", "SHORT_REDUCTION", "reduction_terms", "short_window",
           "along_columns", "register_tile", "transpose_tile", "vector_lanes"]

#: iterations below which a loop nest is not worth running on several threads
PARALLEL_MIN_WORK = 1 << 15
#: rows per strip of a consumer that reads its producer at neighbouring rows (stencils)
STRIP_ROWS = 8
#: the most rows per strip: a strip is at least twice the rows the chain adds to it (its
#: recomputed halo), so that at most a third of the rows computed are recomputed
MAX_STRIP_ROWS = 32
#: elements per parallel block of a one-dimensional element-wise loop
BLOCK = 4096
#: the largest innermost extent that an element-wise tensor not flattened unrolls
#: (``_Planner.tiny_innermost``)
TINY_INNER = 4
#: why a row whose reads gather is left to LLVM's own vectorizer
_GATHER = "strided or clamped reads along the row would gather"
#: bytes of a cache line (the transpose tiles are whole lines wide)
CACHE_LINE = 64


@dataclass
class TensorChoice:
    """What ``auto_schedule`` did with one tensor: ``choice`` and the ``reason`` for it.

    >>> print(TensorChoice("S", "outer loop parallel", "reduction"))
    S: outer loop parallel (reduction)
    """

    name: str
    choice: str
    reason: str

    def __str__(self) -> str:
        return f"{self.name}: {self.choice} ({self.reason})"


@dataclass
class AutoScheduleReport:
    """The choices of ``auto_schedule`` (``target`` the CPU's ``Target``) or of
    ``loopnest.auto.gpu.auto_schedule_gpu`` (``target`` ``"cuda"``), one per tensor; ``str()``
    prints one line each.

    >>> r = AutoScheduleReport(Target(vector_bits=128))
    >>> r.add("B", "inlined", "cheap")
    >>> print(r)
    B: inlined (cheap)
    """

    target: Target | str
    choices: list = field(default_factory=list)

    def add(self, name: str, choice: str, reason: str) -> None:
        self.choices.append(TensorChoice(name, choice, reason))

    def __getitem__(self, name: str) -> TensorChoice:
        return next(c for c in self.choices if c.name == name)

    def __str__(self) -> str:
        return "\n".join(str(c) for c in self.choices)


# ---------------------------------------------------------------------------------------------
# parameters from the target
# ---------------------------------------------------------------------------------------------
def transpose_tile(target: Target, dtype="float32") -> tuple[int, int]:
    """``(rows, columns)`` of a tile of an element-wise tensor that reads its input
    transposed: each row of the tile is four cache lines of the output (at least one native
    vector), read down a strip of 16 times as many rows, so that the gathered input side is
    read in long runs the hardware prefetcher follows. On AVX-512 (4096^2 floats) 1024 x 64
    tiles were 2.1x faster than 32 x 32 ones.

    >>> transpose_tile(Target(vector_bits=512)), transpose_tile(Target(vector_bits=256), "float64")
    ((1024, 64), (512, 32))
    """
    cols = max(target.lanes(dtype), 4 * CACHE_LINE // as_dtype(dtype).itemsize)
    return 16 * cols, cols


def register_tile(target: Target, width: int | None = None, lanes: int = 8,
                  streamed_bytes: int | None = None) -> tuple[int, int]:
    """``(rows, vectors)`` of a matmul register tile: as many accumulators as the vector
    registers hold next to one row of operand vectors and a broadcast
    (``rows * vectors + vectors + 1 <= vector_registers``), no wider than ``width`` columns;
    among those, tiles whose width divides ``width`` (a power of two of vectors when it is
    unknown) first, then more accumulators, then more rows. Rows the tile leaves over are
    the contraction template's concern (``templates.row_tiles``: the last tile shifted back).

    ``streamed_bytes``: the bytes of the operand every column panel reads again (A, rows x
    K). Where it fits in less than half of L2, the tile takes at most half the vectors (more
    rows, narrower panels): the panel of B that each row tile reads from L2 halves, while A
    stays in L2 -- provided a k step still issues at least as many multiply-adds as loads
    (``rows * vectors >= rows + vectors``), or the loads become the limit. Measured on
    AVX-512 (2 MB of L2, 2 cores, blocks of panels per core), 8 x 2 vectors against 6 x 4:
    0.10 against 0.11 ms at 256 (A 256 KB; PyTorch 0.11), 0.37 against 0.38 ms at 384; at
    512 (A 1 MB, half of L2) 6 x 4 is faster, 0.81-0.85 against 0.86-0.87 ms (PyTorch 0.81-0.82),
    as at 1024 and 2048 (where 4 x 4, whose rows divide, ran 7-11% slower than 6 x 4 with its
    last tile shifted back). With 8-lane vectors, 8 x 1 (8 multiply-adds, 9 loads) took 0.24
    against 0.17 ms for 6 x 2 at 256: no narrowing there.

    >>> register_tile(Target(vector_registers=16)), register_tile(Target(vector_registers=32))
    ((6, 2), (6, 4))
    >>> register_tile(Target(vector_registers=32), width=32, lanes=16)
    (8, 2)
    >>> register_tile(Target(vector_registers=32, l2_bytes=2 << 20), 512, 16, streamed_bytes=256 * 256 * 4)
    (8, 2)
    >>> register_tile(Target(vector_registers=32, l2_bytes=2 << 20), 512, 16, streamed_bytes=512 * 512 * 4)
    (6, 4)
    >>> register_tile(Target(vector_registers=16, l2_bytes=2 << 20), 512, 8, streamed_bytes=256 * 256 * 4)
    (6, 2)
    """
    def rank(rv):
        rows, vecs = rv
        fits = vecs in (1, 2, 4) if width is None else width % (vecs * lanes) == 0
        return (fits, rows * vecs, rows)
    cands = [(rows, vecs) for vecs in (4, 3, 2, 1) for rows in (8, 6, 4, 3, 2, 1)
             if rows * vecs + vecs + 1 <= target.vector_registers and (width is None or vecs * lanes <= width)]
    best = max(cands, key=rank, default=(1, 1))
    if streamed_bytes is not None and streamed_bytes < target.l2_bytes // 2 and best[1] > 1:
        best = max((c for c in cands if c[1] <= best[1] // 2 and c[0] * c[1] >= c[0] + c[1]), key=rank, default=best)
    return best


def vector_lanes(target: Target, dtype, width: int | None) -> int:
    """The vector width for rows of ``width`` elements: the native lanes of ``dtype``, or half
    of them when full vectors would leave more than 5% of a constant row to a scalar tail
    and half vectors leave less (an empty row gets the native lanes).

    >>> t = Target(vector_bits=512)
    >>> [vector_lanes(t, "float32", w) for w in (None, 0, 28, 56, 64, 1000)]
    [16, 16, 8, 8, 16, 16]
    """
    lanes = target.lanes(dtype)
    if not width or lanes < 8:
        return lanes
    cands = (lanes, lanes // 2)
    cover = [(width // w) * w / width for w in cands]
    return next((w for w, c in zip(cands, cover) if c >= 0.95), cands[0] if cover[0] >= cover[1] else cands[1])


def matmul_kc(target: Target, rows: int, cols: int, k: int, itemsize: int = 4) -> int:
    """The depth of the k slices (0: no slicing): 0 when ``k`` fits in one slice, whose
    ``rows`` x ``kc`` sliver of A fits L1 and whose ``kc`` x ``cols`` packed panel of B fits
    half of L2; else the largest power of two that does, halved until it divides ``k`` (0
    below 16). Each slice after the first reads the tile of C back into registers: at 2048
    on AVX-512, one slice of 2048 is 5-9% faster than two of 1024 (slices were as deep as
    half of L1 allowed); 1152, which fits one slice, ran 11.4 ms in slices of 128 against
    8.8 in one (PyTorch 9.0), 960 in slices of 64 5.7 against 5.1 ms (PyTorch 5.2).

    >>> t = Target(l1_bytes=48 * 1024, l2_bytes=2 << 20)
    >>> matmul_kc(t, 6, 64, 4096), matmul_kc(t, 6, 64, 2048), matmul_kc(t, 8, 48, 960), matmul_kc(t, 6, 64, 3072)
    (2048, 0, 0, 1024)
    """
    limit = min(target.l1_bytes // (rows * itemsize), target.l2_bytes // 2 // (cols * itemsize))
    if k <= limit:
        return 0
    kc = 1
    while kc * 2 <= limit:
        kc *= 2
    while kc > 1 and k % kc:
        kc //= 2
    return kc if kc >= 16 else 0


def _pack_layout(t: Tensor, name: str) -> str:
    """The report's words for the layout of contraction ``t``'s packed operand ``name``."""
    operand = next(ld.buffer for ld in loads(t.body) if ld.buffer.name == name)
    if columns_last(t, operand) is None:
        return ""
    return " transposed" if operand.ndim == 2 else " with its dimensions reordered"


def _batched(t: Tensor) -> bool:
    """Whether contraction ``t`` (three or more output dimensions) is a batched matmul rather
    than a convolution: the operand read along the columns (by the last output index) also
    depends on the third-last output index, so a tile of that index shares no vectors
    (a convolution's input rows serve every output channel of the tile).

    >>> from te import Buffer, Reduce, Sum
    >>> A = Buffer("A", (4, 8, 8), "float32"); B = Buffer("B", (4, 8, 8), "float32")
    >>> _batched(Reduce("C", (4, 8, 8), Sum(), lambda b, i, j, k: A[b, i, k] * B[b, k, j], (8,)))
    True
    """
    cols, third = t.args[-1], t.args[-3]
    return any(uses_var(ld.indices[-1], cols) and uses_var(ld.indices, third)
               for ld in loads(t.body) if ld.indices)


def _panel_in_place(t: Tensor, name: str | None) -> bool:
    """Whether contraction ``t`` reads operand ``name`` along its rows: the last output index
    in the operand's last index only, stepping by 1 (``B[k, j]``, not ``B[j, k]``).

    >>> from te import Buffer, Reduce, Sum
    >>> A = Buffer("A", (8, 8), "float32"); B = Buffer("B", (8, 32), "float32")
    >>> _panel_in_place(Reduce("C", (8, 32), Sum(), lambda i, j, k: A[i, k] * B[k, j], (8,)), "B")
    True
    """
    cols = t.args[-1]
    reads = [ld for ld in loads(t.body) if ld.buffer.name == name and ld.indices]
    return bool(reads) and all(_step(ld.indices[-1], cols) == 1
                               and not any(uses_var(i, cols) for i in ld.indices[:-1]) for ld in reads)


def contraction_params(t: Tensor, target: Target, placed=(), symbolic_rows: bool = False) -> dict:
    """The parameters of ``templates.contraction`` for ``t`` on ``target``: for two output
    dimensions (matmul) a ``register_tile`` of rows x vectors, the column tiles outermost,
    reduction slices sized to the caches (``matmul_kc``); for three or more (convolution) 4
    output channels x 2 rows (4 rows with 32 registers) x 1 vector (of the native lanes
    where the columns left over get a register tile too:
    ``templates.blocks_leftover_columns``), row tiles outermost,
    the filter's rows unrolled (its columns stay a loop); a batched matmul (``_batched``)
    gets the matmul's tile, its batch loops outside. A product of few rows that reads its
    other operand along its rows streams it (``stream_tile``; with ``symbolic_rows``, a
    symbolic row count too).

    >>> from te import Buffer, Reduce, Sum
    >>> A = Buffer("A", (64, 2048), "float32"); B = Buffer("B", (2048, 64), "float32")
    >>> C = Reduce("C", (64, 64), Sum(), lambda i, j, k: A[i, k] * B[k, j], (2048,))
    >>> p = contraction_params(C, Target(vector_bits=256, vector_registers=16, l1_bytes=32768))
    >>> p["reg_i"], p["vec_n"], p["lanes"], p["kc"], p["order"]
    (6, 2, 8, 1024, 'jKi')
    """
    dims = [const_extent(d) for d in t.dims]
    red = [const_extent(d) for d in t.reduce_dims]
    kk = sliced_loop(t)
    ns = len(dims)
    lanes = vector_lanes(target, t.dtype, dims[-1]) if t.dtype.is_float else 1
    k = {"kk": kk, "lanes": lanes, "reg_o": 1, "n_small_red": len(red) - kk - 1, "kc": 0,
         "pack_buffer": pack_candidate(t, placed), "pack": True, "unroll_r": kk + 1 < len(red),
         "par": target.cores > 1, "cores": target.cores}
    if ns >= 3 and not _batched(t):
        k["reg_o"] = next(f for f in (4, 2, 1) if dims[-3] is not None and dims[-3] % f == 0) \
            if dims[-3] is not None else 1
        k["reg_i"] = 4 if target.vector_registers >= 32 else 2
        if lanes > 1 and blocks_leftover_columns(t, k) and dims[-1] >= target.lanes(t.dtype):
            k["lanes"] = lanes = target.lanes(t.dtype)    # leftover columns get a register tile too
        k["vec_n"] = 1 if lanes > 1 and (dims[-1] is None or dims[-1] >= lanes) else 0
        k["order"] = "ijK"
    else:
        streamed = dims[-2] * red[kk] * t.dtype.itemsize if dims[-2] is not None and red[kk] else None
        rows, vecs = register_tile(target, dims[-1], lanes, streamed)
        k["narrowed"] = vecs != register_tile(target, dims[-1], lanes)[1]
        k["reg_i"] = rows if dims[-2] is None or dims[-2] >= rows else max(1, dims[-2])
        k["vec_n"] = vecs if lanes > 1 and (dims[-1] is None or dims[-1] >= lanes) else 0
        if k["vec_n"] and dims[-1] == k["vec_n"] * lanes and _panel_in_place(t, k["pack_buffer"]):
            k["pack"] = False       # its rows are one tile wide: the packed panel would be the same layout
        if dims[-2] is not None and dims[-2] <= k["reg_i"] and _panel_in_place(t, k["pack_buffer"]):
            k["pack"] = False       # one row tile: each panel is read once, packing would read it twice
        n = red[kk]
        k["kc"] = matmul_kc(target, k["reg_i"], max(1, k["vec_n"]) * lanes, n, t.dtype.itemsize) if n else 0
        k["order"] = "jKi"
        streamed = stream_tile(t, target, lanes, symbolic_rows)
        if streamed is not None:
            k.update(reg_i=streamed[0], vec_n=streamed[1], kc=STREAM_SLICE, pack=False, stream=True, order="Kji",
                     narrowed=False)
            if dims[-2] is None:       # row tiles inside the column tiles, then tiles of fewer rows
                k.update(reg_i=1, stream_rows=streamed[0])
    return k


#: the rows of the operand that a few-row product streams (``stream_tile``) per slice. 1 to 12
#: rows x 1024 x 1024 on AVX-512, 2 cores, ratios to PyTorch in the same runs: slices of 32
#: rows 1.02-1.37; of 16 0.90-1.10 and of 64 0.71-1.19 (of 8: 0.83-1.08)
STREAM_SLICE = 32
#: the most rows of a product that streams its other operand (``stream_tile``)
STREAM_MAX_ROWS = 24
#: the most rows of a symbolic row count that streams (``few_rows_version``): 1024 x 1024 on
#: AVX-512, 2 cores, against PyTorch, streamed / packed: 16 rows 0.82-0.85 / 0.73-0.78, 17-19
#: 0.75-0.84 / 0.70-0.92, 21-23 0.70-0.75 / 0.76-0.79, 24 0.82 / 0.93
STREAM_MAX_SYMBOLIC_ROWS = 16
#: the rows of a register tile of a symbolic row count that streams (``stream_tile``), the
#: rows left over in tiles of half as many rows, down to single rows. 1024 x 1024 on AVX-512,
#: 2 cores, ratios to PyTorch in the same runs: 1 to 12 rows 1.03-1.22, 16 rows 0.93 (the
#: packed schedule: 0.46-0.80, 0.67); single rows only: 0.82-0.93 up to 2 rows, 0.35 at 16;
#: tiles of 8: 0.78 at 16, with up to 7 single rows left over
STREAM_ROW_TILE = 4


def stream_tile(t: Tensor, target: Target, lanes: int, symbolic_rows: bool = False) -> tuple[int, int] | None:
    """``(rows, vectors)`` of the register tile of a product of at most ``STREAM_MAX_ROWS``
    rows that reads its other operand along its rows (``x @ B``), where
    ``templates.contraction`` streams it (``stream``): one tile of all the rows up to
    ``FEW_ROWS``, else row tiles of the most rows (8 to 4) that divide them; as many vectors as
    the registers hold next to one row of operand vectors and a broadcast, at least 2. B's rows
    go in slices of ``STREAM_SLICE``, each core passing its block of columns of a slice column
    tile by column tile (every row tile in turn), so B is read a few rows at a time, each row
    in memory order. None where that does not apply: more rows, or a number of them no tile
    divides, a symbolic size, a reduction the slices do not divide, columns that do not cut
    into whole tiles per core. With ``symbolic_rows``, a symbolic row count (the version
    of the nest for few rows that ``auto_schedule`` makes: ``few_rows_version``) streams too,
    in tiles of ``STREAM_ROW_TILE`` rows, the rows left over in tiles of half as many
    (``templates.stream_row_tiles``).

    Measured on AVX-512 (2 cores), 1024 x 1024, ratios to PyTorch in the same runs (the tile
    of 8 rows x 2 vectors over the whole reduction before, each k step a row of B's pages;
    from 10 rows on B packed, read the same way): 2 rows 0.78-0.99 -> 1.14-1.37, 3 0.99 ->
    1.29, 5 0.82-0.93 -> 1.05-1.10, 8 0.61-0.98 -> 1.05-1.10, 10 0.48 -> 1.03, 12 0.54 -> 1.02;
    16 0.73-0.78 -> 1.14-1.18, 24 0.82-0.86 -> 1.02-1.03; 32 and 48 rows in tiles of 8: 0.78
    and 0.73 against 0.79 and 0.81 packed, not taken.

    >>> from te import Buffer, Reduce, Sum
    >>> X = Buffer("X", (5, 1024), "float32"); B = Buffer("B", (1024, 1024), "float32")
    >>> Y = Reduce("Y", (5, 1024), Sum(), lambda i, j, k: X[i, k] * B[k, j], (1024,))
    >>> stream_tile(Y, Target(vector_bits=512, vector_registers=32, cores=2), 16)
    (5, 4)
    >>> M = Var("M"); X = Buffer("X", (M, 1024), "float32")
    >>> Y = Reduce("Y", (M, 1024), Sum(), lambda i, j, k: X[i, k] * B[k, j], (1024,))
    >>> stream_tile(Y, Target(vector_bits=512, vector_registers=32, cores=2), 16, symbolic_rows=True)
    (4, 4)
    """
    dims = [const_extent(d) for d in t.dims]
    red = [const_extent(d) for d in t.reduce_dims]
    if len(dims) != 2 or len(red) != 1 or dims[1] is None or red[0] is None or lanes < 2:
        return None
    rows, cols = dims
    if rows is None and not (symbolic_rows and isinstance(t.dims[0], Var)):
        return None
    if rows is not None and not 2 <= rows <= STREAM_MAX_ROWS or red[0] % STREAM_SLICE or red[0] < 2 * STREAM_SLICE \
            or not _panel_in_place(t, pack_candidate(t)):
        return None
    if rows is None:
        tile = STREAM_ROW_TILE
    else:
        tile = rows if rows <= FEW_ROWS else next((r for r in (8, 7, 6, 5, 4) if rows % r == 0), None)
    cores = max(1, target.cores)
    vecs = next((v for v in (4, 2) if tile and tile * v + v + 1 <= target.vector_registers
                 and cols % (v * lanes * cores) == 0), None)
    return None if vecs is None else (tile, vecs)


def channel_params(t: Tensor, target: Target) -> dict | None:
    """The parameters of ``templates.channel_contraction`` for convolution ``t`` on
    ``target``, or None where it does not apply or the column-vectorized ``contraction``
    does as well: constant sizes, a batch dimension, the native vectors dividing the output
    channels but not the columns (where the last column tile would be a partial vector: 56
    columns of 16 lanes, three full tiles and one at half speed), filters that fit half of
    L2. The tile: two vectors of channels (one where the channels are an odd number of
    vectors) x the most columns dividing the width that keep half of the vector registers
    as accumulators, at least 4.

    Measured on AVX-512 (2 cores), conv2d 1 x 64 x 56 x 56, 3 x 3, 64 output channels:
    2 x 16 channels x 8 columns 0.78-0.81 ms (1 x 16 x 14 the same, 4 x 16 x 4 0.89, 4 x 16 x 7
    1.07: 28 accumulators spill) against 0.85 ms for the column tiles; PyTorch 0.80-0.84 ms.

    >>> from te import Buffer, Reduce, Sum
    >>> X = Buffer("X", (1, 64, 58, 58), "float32"); W = Buffer("W", (64, 64, 3, 3), "float32")
    >>> Y = Reduce("Y", (1, 64, 56, 56), Sum(), lambda b, co, y, x, ci, ry, rx:
    ...            X[b, ci, y + ry, x + rx] * W[co, ci, ry, rx], (64, 3, 3))
    >>> channel_params(Y, Target(vector_bits=512, vector_registers=32, cores=2))
    {'lanes': 16, 'vec_c': 2, 'cols': 8, 'par': True, 'cores': 2}
    >>> channel_params(Y, Target(vector_bits=256, vector_registers=16, cores=2)) is None   # 8 lanes divide 56
    True
    """
    dims = [const_extent(d) for d in t.dims]
    if len(dims) < 4 or None in dims[-3:] or not t.dtype.is_float or _batched(t):
        return None
    lanes = target.lanes(t.dtype)
    channels, width = dims[-3], dims[-1]
    if lanes < 2 or channels % lanes or width % lanes == 0:
        return None
    operands = channel_operands(t)
    if not operands or any(channel_dimension(t, op) is None for op in operands):
        return None
    sizes = [op.static_size() for op in operands]
    if None in sizes or sum(sizes) * t.dtype.itemsize > target.l2_bytes // 2:
        return None
    vec_c = 2 if (channels // lanes) % 2 == 0 else 1
    cols = next((c for c in range(target.vector_registers // 2 // vec_c, 3, -1) if width % c == 0), None)
    if cols is None:
        return None
    return {"lanes": lanes, "vec_c": vec_c, "cols": cols, "par": target.cores > 1, "cores": target.cores}


# ---------------------------------------------------------------------------------------------
# the plan
# ---------------------------------------------------------------------------------------------
#: the largest body (operations, as ``_Cost`` counts them) of a contraction that gets a
#: register tile; a costlier one is scheduled as a plain reduction
CONTRACTION_MAX_COST = 32

#: native vectors of partial results a row reduction keeps in registers (rfactor lanes):
#: independent accumulators that hide the latency of the vector add or max (softmax 4096 x
#: 1024 on AVX-512: auto / hand 0.95 -> 1.0 against two vectors)
REDUCE_VECTORS = 4

#: rows a streamed reduction along the columns adds to its outputs at a time (``column_stream``)
STREAM_ROWS = 4
#: at most this many terms per output: a reduction reading along its last output index is
#: vectorized across its outputs (``short_window``)
SHORT_REDUCTION = 64
#: partial results of a vector reduction are added into this many by vector operations
#: before the serial sum at the end of each row (layernorm 4096 x 1024 on AVX-512: auto / hand
#: 0.91 -> 1.0 with the partials folded to 8)
FOLD = 8


def _reduction_widths(lanes: int) -> list[int]:
    """The partial results a row reduction tries, most first: ``REDUCE_VECTORS`` native
    vectors of ``lanes``, then half as many, down to one vector (rows too short for more).

    >>> _reduction_widths(16)
    [64, 32, 16]
    """
    return [lanes * (REDUCE_VECTORS >> s) for s in range(REDUCE_VECTORS.bit_length())]


def _partials(lanes: int) -> str:
    """The report's words for a reduction through ``lanes`` partial results (``FOLD`` of them
    at the end where ``templates.vector_reduction`` folds them)."""
    folded = f", added into {FOLD}" if FOLD < lanes and lanes % FOLD == 0 else ""
    return f"{lanes} partial results in vector lanes{folded}"


class _Cost(Functor):
    """Operations of an expression; a conditional or a call (exp, sqrt...) counts as expensive."""

    def visit_IfThenElse(self, e):
        return 100

    def visit_Select(self, e):
        return 100

    def visit_Call(self, e):
        return 10 + sum(self.visit(c) for c in e.children())

    def visit_Load(self, e):
        return 1

    def generic(self, e):
        return 1 + sum(self.visit(c) for c in e.children())


def _row_offset(index, row: Var) -> int | None:
    """``c`` when ``index`` is ``row + c`` (``c`` constant), else None."""
    if isinstance(index, Var):
        return 0 if index is row else None
    if isinstance(index, (Add, Sub)) and index.a is row and isinstance(index.b, IntImm):
        return index.b.value if isinstance(index, Add) else -index.b.value
    return None


def _row_reads(producer: Tensor, consumer: Tensor) -> list[int] | None:
    """The row offsets at which ``consumer`` reads ``producer`` (its first index the
    consumer's first index plus a constant), or None when some read is not of that form."""
    if not consumer.args or not producer.dims:
        return None
    offs = []
    for ld in loads(consumer.body, producer):
        off = _row_offset(ld.indices[0], consumer.args[0])
        if off is None:
            return None
        offs.append(off)
    return offs


def gathers(loop) -> bool:
    """Whether vectorizing ``loop`` would gather: a load in its body whose last index uses the
    loop's variable other than as ``var + c`` (a stride-2 downsampling, an upsampling's
    ``var // 2``, an index clamped at the edges). LLVM's cost model decides for such loops.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (8, 16), "float32")
    >>> nest = LoopNest([Compute("B", (8, 8), lambda y, x: A[y, x * 2] + A[y, x + 1])])
    >>> gathers(nest.get_loops_for("B")[-1]), gathers(nest.get_loops_for("B")[0])
    (True, False)
    >>> F = Buffer("F", (128,), "float32")
    >>> nest = LoopNest([Compute("C", (8, 16), lambda y, x: F[y * 16 + x] + F[y])])
    >>> gathers(nest.get_loops_for("C")[-1])
    False
    """
    var = loop.var
    return any(ld.indices and _step(ld.indices[-1], var) not in (0, 1) for ld in stmt_loads(loop.stmt))


def along_columns(t: Tensor, window: bool = False) -> bool:
    """Whether reduction ``t`` reads its operands along its last output index and not along
    any reduction index (a column sum, ``x @ A``): every load that uses the last output
    index uses it in its last index only, stepping by 1 with it and by 0 with each
    reduction index (at least one load does; with ``window``, by anything with the
    reduction indices: a sliding window, ``S[i + k]``); a load that does not use it
    (``x[k]``) is one value for every column.

    >>> from te import Buffer, Reduce, Sum
    >>> A = Buffer("A", (8, 16), "float32"); x = Buffer("x", (8,), "float32")
    >>> along_columns(Reduce("S", (16,), Sum(), lambda j, i: A[i, j], (8,)))
    True
    >>> along_columns(Reduce("z", (16,), Sum(), lambda j, k: x[k] * A[k, j], (8,)))
    True
    >>> along_columns(Reduce("R", (8,), Sum(), lambda i, k: A[i, k], (16,)))
    False
    """
    if not t.args or not t.reduce_args:
        return False
    cols = t.args[-1]
    found = False
    for ld in loads(t.body):
        if not ld.indices or not uses_var(ld.indices, cols):
            continue
        last = ld.indices[-1]
        if any(uses_var(i, cols) for i in ld.indices[:-1]) or _step(last, cols) != 1 or \
                not window and any(_step(last, r) != 0 for r in t.reduce_args):
            return False
        found = True
    return found


def reduction_terms(t: Tensor) -> int | None:
    """The terms each output of reduction ``t`` adds up, when that is a constant.

    >>> from te import Buffer, Reduce, Sum
    >>> A = Buffer("A", (4, 8, 3), "float32")
    >>> reduction_terms(Reduce("R", (4,), Sum(), lambda i, k, r: A[i, k, r], (8, 3)))
    24
    """
    n = 1
    for d in t.reduce_dims:
        c = const_extent(d)
        if c is None:
            return None
        n *= c
    return n


def short_window(t: Tensor) -> bool:
    """Whether reduction ``t`` adds up at most ``SHORT_REDUCTION`` terms per output and reads
    along its last output index (``along_columns(t, window=True)``: a 1-D convolution,
    ``C[i] = sum_k S[i + k] * w[k]``): then a vector of its outputs costs a vector operation
    per term, where vector lanes of its few terms would cost a horizontal sum per output.

    >>> from te import Buffer, Reduce, Sum
    >>> S = Buffer("S", (1030,), "float32"); w = Buffer("w", (7,), "float32")
    >>> short_window(Reduce("C", (1024,), Sum(), lambda i, k: S[i + k] * w[k], (7,)))
    True
    >>> A = Buffer("A", (64, 1024), "float32")
    >>> short_window(Reduce("R", (64,), Sum(), lambda i, k: A[i, k], (1024,)))
    False
    """
    n = reduction_terms(t)
    return n is not None and n <= SHORT_REDUCTION and along_columns(t, window=True)


def _step(index, var: Var) -> int | None:
    """How much ``index`` grows when ``var`` grows by one, when that is a constant, else None."""
    if not uses_var(index, var):
        return 0
    return int_value(simplify(substitute(index, {var: var + 1}) - index))


def _outermost_several(loops: list):
    """The outermost of ``loops`` that may run more than once (the first one if none does)."""
    return next((lp for lp in loops if several(lp)), loops[0])


def _outputs(t: Tensor) -> int:
    """The elements of ``t`` (a symbolic dimension counts as large)."""
    n = 1
    for d in t.dims:
        n *= const_extent(d) or PARALLEL_MIN_WORK
    return n


def _work(t: Tensor) -> int:
    """Innermost iterations of ``t`` (a symbolic extent counts as large)."""
    n = 1
    for d in tuple(t.dims) + tuple(t.reduce_dims):
        n *= const_extent(d) or PARALLEL_MIN_WORK
    return n


#: a product ``x @ W.T`` (W read along the reduction) of at most this many rows is dot
#: products of x's rows with W's: tiles of all of x's rows x a few of W's rows x vector lanes of
#: partial sums in registers (``templates.dot_product_tiles``), else one output at a time with
#: the rows inside the loop over W's rows; no transposed copy of W. 1024 x 1024 on AVX-512, the
#: register-blocked tile with W packed against the dot-product tiles, ratios to PyTorch in the
#: same runs: 2 rows 0.41 -> 0.91-0.95, 5 rows 0.54 -> 1.20-1.27, 8 rows 0.80 -> 1.07, 10 rows
#: 0.80 -> 1.17, 12 rows 0.76 -> 1.00; at 16 rows the packed tile wins (1.08 against 0.57)
FEW_ROWS = 12


class _Planner:
    def __init__(self, nest, target: Target, report: AutoScheduleReport, symbolic_rows: bool = False):
        self.nest = nest
        self.target = target
        self.report = report
        #: stream the operand of products with a symbolic row count (``few_rows_version``)
        self.symbolic_rows = symbolic_rows
        self.tensors: list[Tensor] = list(nest.tensors)
        self.by_name = {t.name: t for t in self.tensors}
        self.kinds = {t.name: classify(t) for t in self.tensors}
        # a register tile unrolls its body rows x vectors times: for a multiply-add, not for a
        # body of hundreds of operations (code that takes LLVM minutes to compile)
        self.too_big = {t.name for t in self.tensors
                        if self.kinds[t.name] == "contraction" and _Cost().visit(t.body) > CONTRACTION_MAX_COST}
        self.kinds.update({name: "reduction" for name in self.too_big})
        # a matrix times a matrix of one row is a vector's dot products with the rows or the
        # columns of the other: no tile to block in registers, nothing worth packing (x @ W.T,
        # 1 x 1024 x 1024: 0.158 ms register-blocked with W packed, 0.052 as dot products,
        # PyTorch 0.052; x @ B streams B's rows as a column reduction: 0.103, PyTorch 0.107)
        self.kinds.update({t.name: "reduction" for t in self.tensors
                           if self.kinds[t.name] == "contraction" and len(t.dims) == 2
                           and const_extent(t.dims[0]) == 1})
        self.few_rows = {t.name for t in self.tensors
                         if self.kinds[t.name] == "contraction" and len(t.dims) == 2
                         and ((const_extent(t.dims[0]) or FEW_ROWS + 1) <= FEW_ROWS
                              or symbolic_rows and isinstance(t.dims[0], Var))
                         and not _panel_in_place(t, pack_candidate(t))}
        self.kinds.update({name: "reduction" for name in self.few_rows})
        self.consumers = consumers_of(self.tensors)
        self.outputs = {b.name for b in nest.outputs}
        self.extern_reads = {b.name for t in self.tensors if isinstance(t, ExternTensor) for b in t.extern_inputs}
        self.inlined: set[str] = set()
        self.last_result = None     # what the last step ``attempt`` ran returned

    # -- undo on refusal ---------------------------------------------------------------------
    def attempt(self, fn, *args) -> bool:
        """Run ``fn(*args)``; on ScheduleError undo everything it applied and return False, else
        True unless ``fn`` returned False (it declined and changed nothing). What ``fn``
        returned is kept in ``self.last_result``."""
        saved, n = self.nest._snapshot(), len(self.nest.history)
        pending = pending_unrolls()
        noted = len(pending) if pending is not None else 0
        try:
            result = fn(*args)
        except ScheduleError:
            self.nest._restore(saved)
            del self.nest.history[n:]
            if pending is not None:
                del pending[noted:]
            return False
        self.last_result = result
        return result is not False

    def should_parallelize(self, t: Tensor) -> bool:
        return self.target.cores > 1 and _work(t) >= PARALLEL_MIN_WORK

    # -- placement -----------------------------------------------------------------------------
    def inline_reason(self, t: Tensor) -> str | None:
        if t.name in self.outputs or self.kinds[t.name] != "elementwise" or t.name in self.extern_reads:
            return None
        cons = [self.by_name[c] for c in self.consumers[t.name]]
        if not cons or any(self.kinds[c.name] in ("contraction", "extern") for c in cons):
            return None
        cost = _Cost().visit(t.body)
        reads = sum(len(loads(c.body, t)) for c in cons)
        if reads == 1 and cost < 100:
            return "read once by its only consumer"
        if cost <= 4:
            return f"cheap ({cost} operations) for {reads} reads"
        return None

    def row_group(self, out: Tensor) -> tuple[list[Tensor], int]:
        """The producers of ``out`` computed inside its row loop (consumers first) and the
        rows of a strip (1: row by row)."""
        group: list[Tensor] = []
        members = {out.name}
        halo: dict[str, int] = {}      # rows of each member beyond a strip of ``out``
        rows = 1
        if len(out.args) < 2 and not out.is_reduction:
            return group, rows      # a row of a one-dimensional element-wise tensor is one element
        for t in reversed(self.tensors):
            if t.name in members or t.name in self.outputs or t.name in self.inlined:
                continue
            if self.kinds[t.name] in ("contraction", "extern") or t.name in self.extern_reads:
                continue
            cons = self.consumers[t.name]
            if not cons or any(c not in members or self.kinds[c] == "contraction" for c in cons):
                continue
            offsets = [_row_reads(t, self.by_name[c]) for c in cons]
            if any(o is None for o in offsets):
                continue
            spread = [halo.get(c, 0) + max(offs, default=0) - min(offs, default=0) for c, offs in zip(cons, offsets)]
            halo[t.name] = max(spread)
            group.append(t)
            members.add(t.name)
        most = max(halo.values(), default=0)
        if most:
            rows = STRIP_ROWS
            while rows < 2 * most and rows < MAX_STRIP_ROWS:
                rows *= 2
        return group, rows

    # -- the whole nest ------------------------------------------------------------------------
    def run(self) -> None:
        # the templates' full unrolls come last: the legality checks of everything else then
        # analyse the loops rolled (the schedule is the same)
        with deferred_unrolls() as pending:
            self._schedule_tensors()
        for loop in pending:
            self.attempt(unroll_fully, self.nest, loop)
        order = {t.name: n for n, t in enumerate(self.tensors)}
        self.report.choices.sort(key=lambda c: order.get(c.name, len(order)))

    def _schedule_tensors(self) -> None:
        for t in reversed(self.tensors):
            reason = self.inline_reason(t)
            if reason and self.attempt(self.nest.compute_inline, t):
                self.inlined.add(t.name)
                self.report.add(t.name, "inlined", reason)
        done: set[str] = set(self.inlined)
        for t in reversed(self.tensors):
            if t.name in done:
                continue
            if self.kinds[t.name] == "extern":
                self.report.add(t.name, "left as it is", "computed by an external call")
                done.add(t.name)
                continue
            group, rows = self.row_group(t) if t.name in self.outputs or not self.consumers[t.name] else ([], 1)
            placed = self.place_group(t, group, rows)
            done.update(p.name for p in placed)
            self.schedule_root(t, placed)
            if placed and rows == 1:
                self.prefetch_rows(t, placed)
            done.add(t.name)
        self.attempt(self.nest.eliminate_dead_stores)

    def place_group(self, out: Tensor, group: list[Tensor], rows: int) -> list[Tensor]:
        """``compute_at`` the producers of ``group`` at the row loop of ``out`` (a strip of
        ``rows`` rows); schedule each inside it. Returns the producers placed."""
        if not group:
            return []
        nest = self.nest
        anchor = nest.get_loops_for(out)[0]
        if rows > 1:
            if not self.attempt(nest.split_with_mask, anchor, rows):
                return []
            anchor = nest.get_loops_for(out)[0]
        placed = []
        for p in group:
            if self.attempt(nest.compute_at, p, anchor):
                placed.append(p)
        where = f"strips of {rows} rows of {out.name}" if rows > 1 else f"each row of {out.name}"
        for p in reversed(placed):
            choice, reason = self.schedule_inside(p, anchor)
            self.report.add(p.name, f"computed at {where}" + (f", {choice}" if choice else ""),
                            reason + ("" if rows == 1 else "; read at neighbouring rows"))
        return placed

    def prefetch_rows(self, out: Tensor, placed: list[Tensor]) -> None:
        """Where the row loop of ``out`` makes several passes over an input's row (``placed``
        producers and ``out`` read it), prefetch the next row of those inputs and of ``out``
        (``LoopNest.prefetch``): the later passes run from L1 while the next row arrives.
        Not where everything fits in L2 (symbolic sizes: prefetched)."""
        passes = [out] + placed
        inputs = [b for b in self.nest.inputs if sum(bool(loads(t.body, b)) for t in passes) >= 2]
        if not inputs:
            return
        buffers = inputs + [b for b in self.nest.outputs if b.name == out.name]
        sizes = [b.static_size() for b in buffers]
        if None not in sizes and sum(n * b.dtype.itemsize for n, b in zip(sizes, buffers)) <= self.target.l2_bytes:
            return
        row = self.nest.get_loops_for(out)[0]
        done = [b.name for b in buffers if self.attempt(self.nest.prefetch, b, row)]
        if done:
            c = self.report[out.name]
            c.choice += f"; next row prefetched: {', '.join(done)}"
            c.reason += f"; {len(passes)} passes over a row"

    def schedule_inside(self, p: Tensor, anchor) -> tuple[str, str]:
        lanes = vector_lanes(self.target, p.dtype, None)
        if self.kinds[p.name] == "reduction":
            for w in _reduction_widths(lanes):
                if self.attempt(vector_reduction, self.nest, p, anchor, w, FOLD):
                    return _partials(w), "its consumers read it row by row"
            return "", "its consumers read it row by row; the reduction extent does not allow vector lanes"
        loops = self.nest.get_loops_for(p)
        inner = loops[-1]
        if inner.var is anchor.var:
            return "", "its consumers read it row by row"
        if gathers(inner):
            return "not vectorized", f"its consumers read it row by row; {_GATHER}"
        w = vector_lanes(self.target, p.dtype, const_extent(inner.extent))
        if self.attempt(vectorize_split, self.nest, inner, w):
            return f"vectorized {w} wide", "its consumers read it row by row"
        return "", "its consumers read it row by row"

    # -- tensors computed at the root ------------------------------------------------------------
    def schedule_root(self, t: Tensor, placed: list[Tensor]) -> None:
        kind = self.kinds[t.name]
        if kind == "contraction":
            choice, reason = self.contraction(t)
        elif kind == "reduction":
            choice, reason = self.reduction(t, bool(placed))
        else:
            choice, reason = self.elementwise(t, bool(placed))
        if t.name in self.too_big:
            reason = f"{reason}; not register-blocked: a body of {_Cost().visit(t.body)} operations " \
                     f"(more than {CONTRACTION_MAX_COST}) unrolled per accumulator"
        if t.name not in self.outputs:
            why = "a contraction keeps its own tiles" if kind == "contraction" else \
                "its consumers do not all read it row by row"
            reason = f"{reason}; computed at the root: {why}"
        self.report.add(t.name, choice, reason)

    def contraction(self, t: Tensor) -> tuple[str, str]:
        regs = self.target.vector_registers
        c = channel_params(t, self.target)
        if c is not None:
            c["par"] = c["par"] and self.should_parallelize(t)
            if self.attempt(channel_contraction, self.nest, t, c):
                packed = ", ".join(op.name for op in channel_operands(t))
                return (f"register-blocked {c['vec_c']} vector{'s' if c['vec_c'] > 1 else ''} of {c['lanes']} "
                        f"channels x {c['cols']} columns, {packed} packed channels last"
                        f"{', parallel' if c['par'] else ''}",
                        f"convolution: {t.dims[-1]} columns leave a partial vector of {c['lanes']} lanes, "
                        f"the {t.dims[-3]} channels none; channels x columns accumulators fit {regs} vector "
                        f"registers")
        p = contraction_params(t, self.target, self.inlined, self.symbolic_rows)
        p["par"] = p["par"] and self.should_parallelize(t)
        tries = [p]
        if p["kc"]:
            tries.append(dict(p, kc=0))
        if p["pack"]:
            tries.append(dict(p, kc=0, pack=False))
        tries.append(dict(p, kc=0, pack=False, par=False))
        for q in tries:
            if self.attempt(contraction, self.nest, t, q):
                rows = q.get("stream_rows") or q["reg_i"]
                tile = f"{rows} rows x {q['vec_n']} vector{'s' if q['vec_n'] > 1 else ''} of {q['lanes']} lanes" + \
                    (", the rows left over in tiles of half as many" if q.get("stream_rows") else "")
                if q["reg_o"] > 1:
                    tile = f"{q['reg_o']} x {tile}"
                extra = "".join([f", {q['pack_buffer']} streamed in slices of {q['kc']} rows" if q.get("stream")
                                 else f", reduction slices of {q['kc']}" if q["kc"] else "",
                                 f", {q['pack_buffer']} packed{_pack_layout(t, q['pack_buffer'])}"
                                 if q["pack"] and q["pack_buffer"] else "",
                                 ", parallel" if q["par"] else ""])
                narrow = "; half the vectors: the rows x k operand fits in less than half of L2" \
                    if q.get("narrowed") else ""
                most = STREAM_MAX_SYMBOLIC_ROWS if q.get("stream_rows") else STREAM_MAX_ROWS
                few = f"; {t.dims[-2]} rows (at most {most}) streaming {q['pack_buffer']}" \
                    if q.get("stream") else ""
                return (f"register-blocked {tile}{extra}",
                        f"contraction: rows x vectors accumulators fit {regs} vector registers{narrow}{few}")
        return "left as it is", "contraction: the register-blocked schedule was refused"

    def reduction(self, t: Tensor, fused: bool) -> tuple[str, str]:
        nest = self.nest
        loops = nest.get_loops_for(t)
        n_sp = len(t.args)
        parts, reasons = [], []
        columns = n_sp and along_columns(t)
        if columns or n_sp and short_window(t):
            lanes = self.target.lanes(t.dtype)
            par = self.should_parallelize(t)
            why = ("reduction along the columns: its reads step along the last output index, not the reduction's"
                   if columns else f"a reduction of {reduction_terms(t)} terms whose reads step along the last output "
                   "index: vectorized across its outputs rather than its few terms")
            if columns and self.attempt(column_stream, nest, t, lanes, self.target.cores if par else 1,
                                        self.target.l1_bytes, STREAM_ROWS):
                par = any(lp.kind == "parallel" for lp in nest.get_loops_for(t))
                return (f"rows streamed {STREAM_ROWS} at a time, the columns vectorized {lanes} wide"
                        + (", parallel" if par else ""), why + "; a core's outputs fit half of L1")
            if self.attempt(column_reduction, nest, t, lanes, REDUCE_VECTORS, par):
                par = any(lp.kind == "parallel" for lp in nest.get_loops_for(t))
                return (f"tiles of up to {REDUCE_VECTORS} vectors of {lanes} lanes in registers, the reduction "
                        f"inside each tile" + (", parallel" if par else ""), why)
        accumulator = t.name
        rows = const_extent(t.dims[0]) if t.name in self.few_rows else None
        if rows is not None and rows > 1 and t.dtype.is_float:
            lanes = self.target.lanes(t.dtype)
            room = (self.target.vector_registers - 8) // rows
            cols = next((c for c in (8, 4, 2) if c <= room and (const_extent(t.dims[1]) or 1) % c == 0), 1)
            par = self.should_parallelize(t)
            if self.attempt(dot_product_tiles, nest, t, lanes, cols, par):
                return (f"dot products in tiles of {rows} rows x {cols} rows of {pack_candidate(t)} x {lanes} "
                        f"lanes" + (", parallel" if par else ""),
                        f"a product of {rows} rows with a matrix read along the reduction")
        if rows is None and t.name in self.few_rows and t.dtype.is_float:
            lanes = self.target.lanes(t.dtype)
            tile = DOT_ROW_TILE
            room = (self.target.vector_registers - 8) // tile
            cols = next((c for c in (8, 4, 2) if c <= room and (const_extent(t.dims[1]) or 1) % c == 0), 1)
            par = self.should_parallelize(t)
            if self.attempt(dot_product_row_tiles, nest, t, lanes, cols, tile, par):
                return (f"dot products in tiles of {tile} rows x {cols} rows of {pack_candidate(t)} x {lanes} lanes, "
                        "the rows left over in tiles of half as many" + (", parallel" if par else ""),
                        f"a product of {t.dims[0]} rows (at most {DOT_MAX_ROWS}) with a matrix read along the "
                        "reduction")
        if t.name in self.few_rows and self.attempt(nest.reorder, loops[:2], [1, 0]):
            loops = nest.get_loops_for(t)
            parts.append("the rows innermost")
        if n_sp:
            lanes = self.target.lanes(t.dtype)
            row = loops[n_sp - 1]
            done = next((w for w in _reduction_widths(lanes) if t.dtype.is_float
                         and self.attempt(vector_reduction, nest, t, row, w, FOLD)), None)
            if done is not None:
                parts.append(_partials(done))
                accumulator = self.last_result      # the partial results the reduction accumulates into
            elif self.attempt(plain_reduction, nest, t, {"unroll_k": 4}):
                parts.append("reduction unrolled by 4")
                reasons.append("the reduction extent does not allow vector lanes")
        if n_sp and self.should_parallelize(t):
            cores = self.target.cores
            if not fused and _outputs(t) < cores and \
                    self.attempt(reduction_parts, nest, t, accumulator, cores):
                parts.append(f"the reduction split into {cores} parts run in parallel")
                reasons.append(f"{_outputs(t)} output(s) for {cores} cores")
            elif self.attempt(nest.parallelize, _outermost_several(nest.get_loops_for(t)[:n_sp])):
                parts.append("outer loop parallel")
        return ", ".join(parts) or "left as it is", "; ".join(["reduction"] + reasons)

    def _transposed(self, t: Tensor) -> bool:
        if len(t.args) < 2:
            return False
        last = t.args[-1]
        return any(ld.indices and not uses_var(ld.indices[-1], last) and uses_var(ld.indices, last)
                   for ld in loads(t.body))

    def elementwise(self, t: Tensor, fused: bool) -> tuple[str, str]:
        nest = self.nest
        loops = nest.get_loops_for(t)
        if not loops:
            return "left as it is", "no loops"
        par = self.should_parallelize(t)
        if self._transposed(t) and len(loops) >= 2 and not fused:
            lanes = vector_lanes(self.target, t.dtype, const_extent(loops[-1].extent))
            rows, cols = transpose_tile(self.target, t.dtype)
            extent = const_extent(loops[-2].extent)
            if extent is not None:      # a strip of tile rows for every core at least
                rows = min(rows, max(cols, extent // self.target.cores))
            elif par:
                # a symbolic extent: square tiles, strips for every core (strips of 1024 rows
                # left one core idle below 2048: 4000 x 1000 in 2.9 ms against 1.1 at constant sizes)
                rows = cols

            def tiled():
                xo, yo, xi, yi = nest.tile(loops[-2], loops[-1], rows, cols)
                vectorize_split(nest, yi, lanes)
                if par:
                    nest.parallelize(nest.get_loops_for(t)[0])
            if self.attempt(tiled):
                return (f"{rows}x{cols} tiles, vectorized {lanes} wide" + (", parallel" if par else ""),
                        "element-wise with a transposed read")
        if gathers(loops[-1]):
            return self.gathering(t, par, fused)
        inner = const_extent(loops[-1].extent)
        flat = False
        # small rows: one long loop instead (not where the body tests the indices: a padding copy)
        if len(loops) >= 2 and not fused and inner is not None and inner < 4 * self.target.lanes(t.dtype) and \
                all(const_extent(lp.extent) is not None for lp in loops) and _Cost().visit(t.body) < 100:
            flat = self.attempt(lambda: nest.flatten(loops))
            loops = nest.get_loops_for(t)
        parts = ["flattened"] if flat else []
        if not flat and len(loops) >= 2 and not fused and inner is not None and inner <= TINY_INNER:
            unrolled = self.tiny_innermost(t, loops)
            if unrolled:
                return unrolled, "element-wise, a tiny innermost dimension"
        lanes = vector_lanes(self.target, t.dtype, const_extent(loops[-1].extent))
        if len(loops) == 1 and par:
            def blocks():
                outer, inner_l, tail = nest.split_with_tail(loops[0], BLOCK)
                vectorize_split(nest, inner_l, lanes)
                if tail is not None:
                    vectorize_split(nest, tail, lanes)
                nest.parallelize(outer)
            if self.attempt(blocks):
                return ", ".join(parts + [f"parallel blocks of {BLOCK}, vectorized {lanes} wide"]), "element-wise"
        if t.dtype.is_float or t.dtype.is_integer:
            if self.attempt(vectorize_split, nest, loops[-1], lanes):
                parts.append(f"vectorized {lanes} wide")
        if par and not fused and self.attempt(nest.parallelize, _outermost_several(nest.get_loops_for(t))):
            parts.append("outer loop parallel")
        if fused and par and self.attempt(nest.parallelize, nest.get_loops_for(t)[0]):
            parts.append("rows parallel")
        return ", ".join(parts) or "left as it is", "element-wise"

    def tiny_innermost(self, t: Tensor, loops: list) -> str:
        """An element-wise ``t`` whose innermost dimension has ``TINY_INNER`` elements or fewer
        (an interleaved pair, a pixel's channels) and that is not flattened (a body too costly,
        or symbolic extents): that dimension unrolled, the loop above it vectorized, the outer
        loops parallel (a vector along the tiny dimension would be mostly empty); what was
        done ("" where refused). The unrolled copies share their common subexpressions and
        lose the tests of the index (RoPE, ``select(c == 0, ...)`` over pairs of 64 x 4096:
        0.35 ms against 0.88 vectorized along the pair, PyTorch 1.3)."""
        nest = self.nest
        above, tiny = loops[-2], const_extent(loops[-1].extent)
        lanes = vector_lanes(self.target, t.dtype, const_extent(above.extent))

        def unrolled():
            nest.unroll(loops[-1])
            vectorize_split(nest, above, lanes)
        if not self.attempt(unrolled):
            return ""
        parts = [f"innermost dimension of {tiny} unrolled", f"the one above vectorized {lanes} wide"]
        if self.should_parallelize(t) and self.attempt(nest.parallelize, _outermost_several(nest.get_loops_for(t))):
            parts.append("outer loop parallel")
        return ", ".join(parts)

    def gathering(self, t: Tensor, par: bool, fused: bool) -> tuple[str, str]:
        """An element-wise ``t`` whose rows gather: not vectorized (nor flattened), rows
        in parallel when there is enough work."""
        nest = self.nest
        parts = ["not vectorized"]
        if par and self.attempt(nest.parallelize, nest.get_loops_for(t)[0] if fused else
                                _outermost_several(nest.get_loops_for(t))):
            parts.append("rows parallel" if fused else "outer loop parallel")
        return ", ".join(parts), f"element-wise; {_GATHER}"


#: the rows of a tile of dot products of a symbolic row count (``few_rows_version``,
#: ``templates.dot_product_row_tiles``), the rows left over in tiles of half as many
DOT_ROW_TILE = 4
#: the most rows of ``x @ W.T`` (a symbolic count) computed as dot products (``few_rows_version``)
DOT_MAX_ROWS = 12


def few_rows_version(nest, target: Target) -> tuple | None:
    """``(condition, version, choices)`` where ``nest`` has products whose rows are a symbolic
    size ``M``: the nest as built, scheduled for few rows (``choices``: what the scheduler
    reported for those products), to run where ``M`` is at most ``STREAM_MAX_SYMBOLIC_ROWS``
    (``x @ B``, which streams B: ``stream_tile``) or ``DOT_MAX_ROWS`` (``x @ W.T``, dot products in
    row tiles: ``templates.dot_product_row_tiles``), the smaller where both are there
    (``specialize``); None when there are none, their rows are several sizes, or the few-row
    schedule was refused. ``auto_schedule`` specializes the nest with it: the packed
    schedule, good for many rows, reads the whole operand twice for a single row (1 x 1024
    x 1024 against PyTorch: ``x @ B`` 0.46, streamed 1.03; ``x @ W.T`` 0.41, as dot products
    1.11).

    >>> from te import Buffer, Reduce, Sum, Var
    >>> from loopnest import LoopNest
    >>> M = Var("M"); X = Buffer("X", (M, 256), "float32"); B = Buffer("B", (256, 512), "float32")
    >>> Y = Reduce("Y", (M, 512), Sum(), lambda i, j, k: X[i, k] * B[k, j], (256,))
    >>> target = Target(vector_bits=512, vector_registers=32, cores=2)
    >>> condition, version, choices = few_rows_version(LoopNest([Y]), target)
    >>> print(condition); print(choices[0])
    M <= 16
    Y: register-blocked 4 rows x 4 vectors of 16 lanes, the rows left over in tiles of half as many, B streamed in slices of 32 rows, parallel (contraction: rows x vectors accumulators fit 32 vector registers; M rows (at most 16) streaming B)
    """
    def most_rows(t: Tensor) -> int | None:
        """The most rows for which ``t`` gets the few-row schedule; None: not such a product."""
        if classify(t) != "contraction" or len(t.dims) != 2 or not isinstance(t.dims[0], Var) or not t.dtype.is_float:
            return None
        if not _panel_in_place(t, pack_candidate(t)):
            return DOT_MAX_ROWS
        lanes = vector_lanes(target, t.dtype, const_extent(t.dims[1]))
        return STREAM_MAX_SYMBOLIC_ROWS if stream_tile(t, target, lanes, True) is not None else None
    products = {t.name: (t, n) for t in nest.tensors if (n := most_rows(t)) is not None}
    rows = {id(t.dims[0]): t.dims[0] for t, _ in products.values()}
    if len(rows) != 1:
        return None
    version, report = nest.unscheduled(), AutoScheduleReport(target)
    _Planner(version, target, report, symbolic_rows=True).run()
    choices = [report[name] for name in products]
    if not all("streamed" in c.choice or "dot products" in c.choice for c in choices):
        return None
    return next(iter(rows.values())) <= min(n for _, n in products.values()), version, choices


def auto_schedule(nest, target=None) -> AutoScheduleReport:
    """Schedule ``nest`` (an unscheduled ``LoopNest``) for ``target`` (a ``Target``; None or
    ``"llvm"``: this machine) without search; returns the report (also stored as
    ``nest.auto_schedule_report``). See the module docstring for the choices.

    A nest written as statements (``LoopNest(stmt, outputs=...)``) is left as it is.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest, Target
    >>> A = Buffer("A", (1024,), "float32")
    >>> nest = LoopNest([Compute("B", (1024,), lambda i: A[i] * 2.0)])
    >>> print(auto_schedule(nest, Target(vector_bits=512, cores=1)))
    B: vectorized 16 wide (element-wise)
    """
    tgt = resolve_target(target)
    applied = [rec for rec in nest.history if rec["op"] != "specialize"]    # versions leave the nest as it is
    if applied:
        raise ScheduleError(f"auto_schedule needs an unscheduled nest; this one has {len(applied)} "
                            "transforms applied (make a new LoopNest of the same outputs)")
    report = AutoScheduleReport(tgt)
    if not nest.tensors:
        for b in nest.outputs:
            report.add(b.name, "left as it is", "written as statements: no tensor definition to schedule from")
    else:
        saved, recorded = nest._snapshot(), len(nest.history)
        try:
            few = few_rows_version(nest, tgt)
            _Planner(nest, tgt, report).run()
            if few is not None:
                condition, version, streamed = few
                nest.specialize(condition, version)
                for c in streamed:
                    report.add(c.name, f"where {condition}: {c.choice}", c.reason)
        except BaseException:       # all or nothing: a failure (or a retry on a deep thread) starts afresh
            nest._restore(saved)
            del nest.history[recorded:]
            raise
    nest.auto_schedule_report = report
    return report
