"""Hand schedules for the benchmark kernels that need more than a line or two.

>>> from te import Buffer, Reduce, Sum
>>> from loopnest import LoopNest
>>> A = Buffer("A", (64, 64), "float32"); B = Buffer("B", (64, 64), "float32")
>>> C = Reduce("C", (64, 64), Sum(), lambda i, j, k: A[i, k] * B[k, j], (64,))
>>> nest = LoopNest([C]); matmul_schedule(nest, C)

Tile shapes come from a :class:`loopnest.Target` (``target=None``: the host):

>>> from loopnest import Target
>>> avx2 = Target(vector_bits=256, vector_registers=16, l1_bytes=32 * 1024, l2_bytes=256 * 1024)
>>> avx512 = Target(vector_bits=512, vector_registers=32, l1_bytes=48 * 1024, l2_bytes=2 << 20)
>>> matmul_tile(avx2), matmul_tile(avx512)
((6, 16), (6, 64))
"""
from __future__ import annotations

from loopnest import LoopNest, Target
from loopnest.auto import channel_params
from loopnest.auto.schedule import matmul_kc, register_tile
from loopnest.auto.templates import accumulation_chain, columns_last, reorder_accumulation, row_tiles, vectorize_copy
from loopnest.target import resolve_target


def matmul_tile(target: Target | None = None, dtype="float32", streamed_bytes: int | None = None) -> tuple[int, int]:
    """(rows, columns) of the register tile of C for ``target``: ``vectors`` native vectors
    per row (a quarter of the register count: 2 of 16, 4 of 32) and as many rows as leave
    room for the row of B (``vectors`` registers) and the broadcast element of A (one), so
    6 x 2 vectors on AVX2 and 6 x 4 on AVX-512 -- or, where A (``streamed_bytes``, which
    every column panel reads again) fits in less than half of L2, half the vectors and 8
    rows (``loopnest.auto.schedule.register_tile``, where the measurements are).

    >>> matmul_tile(Target(vector_bits=128, vector_registers=32))
    (6, 16)
    >>> matmul_tile(Target(vector_bits=512, vector_registers=32, l2_bytes=2 << 20), streamed_bytes=256 << 10)
    (8, 32)
    >>> matmul_tile(Target(vector_bits=512, vector_registers=32))
    (6, 64)
    """
    t = resolve_target(target)
    rows, vectors = register_tile(t, None, t.lanes(dtype), streamed_bytes)
    return rows, vectors * t.lanes(dtype)


def _buffer(nest: LoopNest, name: str):
    return next(b for b in list(nest.inputs) + list(nest.buffers.values()) if b.name == name)


def matmul_schedule(nest: LoopNest, C, rows: int | None = None, cols: int | None = None, kc: int | None = None,
                    pack_b: bool = True, parallel: bool = True, target: Target | None = None) -> None:
    """A register-blocked matmul in the style of BLIS micro-kernels: a ``rows`` x ``cols``
    tile of C (``matmul_tile(target)``: 6 x 16 floats, 12 of the 16 AVX2 registers; 6 x 64,
    24 of the 32 AVX-512 ones, or 8 x 32 where A fits in less than half of L2; a ``rows`` or
    ``cols`` given keeps the other at ``matmul_tile``'s unnarrowed value) accumulates in a local
    buffer that LLVM keeps in registers while k runs over a ``kc``-deep slice of the
    reduction (``matmul_kc``; 0: all of k); the ``kc`` x ``cols`` panel of B that the slice
    needs is first copied to a contiguous buffer (``cache_accesses``, the copy vectorized,
    transposed where C reads B as ``B[j, k]``: it stays in cache while every row tile uses
    it); the tile's rows are unrolled and its columns vectorized; the column panels run in
    parallel. Where ``rows`` does not divide the size, the last row tile is shifted back over
    the one before it (``row_tiles``: 1024 rows are 171 tiles of 6, the last one from row
    1018); with k slices, symbolic sizes or fewer rows than a tile, the rows left over get a
    vectorized loop of their own. When ``cols`` does not divide the width, the tile narrows
    by whole vectors, then to half a vector, and so on.

        parallel for jo:                          (columns jo*cols .. jo*cols+cols-1)
          C[rows, panel] = 0                      (with slices only)
          for ko:                                 (k slice ko*kc .. ko*kc+kc-1)
            B_pack[kc, cols] = B[slice, panel]
            for io:
              C_local[rows, cols] = C[...]        (without slices: = 0, and C is not read)
              for ki:
                unrolled for ii: vectorized for ji:
                  C_local[ii, ji] += A[io*rows + ii, ko*kc + ki] * B_pack[ki, ji]
              C[...] = C_local
        parallel for j_tail_outer: for i_tail:
          C[i, j block] = 0
          for k: vectorized for j: C[i, j] += A[i, k] * B[k, j]     (C's columns stay in registers)

    (For ``x @ W.T`` without slices the leftover rows run inside ``jo``, after ``io``, and
    read its transposed ``B_pack``.)

    The init of C stays beside the reduction until the reorders, which distribute it inside
    the tile loops (``reorder_accumulation``): no separate pass zeroes C (matmul 256, 1024:
    4-13% and 1-5% faster).
    """
    t = resolve_target(target)
    lanes = t.lanes(C.dtype)
    i, j, k = nest.get_loops_for(C)     # the init stays beside k: each tile initialises C_local itself
    # A, which every column panel reads again (narrows the tile where it fits in less than half of L2,
    # unless a shape is given)
    streamed = i.extent * k.extent * C.dtype.itemsize \
        if rows is None and cols is None and isinstance(i.extent, int) and isinstance(k.extent, int) else None
    tile_rows, tile_cols = matmul_tile(t, C.dtype, streamed)
    rows = rows or tile_rows
    cols = cols or tile_cols
    if not isinstance(j.extent, int):
        raise ValueError(f"matmul_schedule: the column count {j.extent} is not a constant")
    widths = [cols] + [v * lanes for v in range(cols // lanes, 0, -1)] + \
        [lanes >> s for s in range(1, lanes.bit_length()) if lanes >> s >= 4]
    cols = next((w for w in widths if j.extent % w == 0), None)
    if cols is None:
        raise ValueError(f"matmul_schedule: the column count {j.extent} is not a multiple of {widths[-1]}")
    if kc is None:
        kc = matmul_kc(t, rows, cols, k.extent, C.dtype.itemsize) if isinstance(k.extent, int) else 0
    sliced = bool(kc) and isinstance(k.extent, int) and k.extent > kc and k.extent % kc == 0
    b = _buffer(nest, "B")
    # the leftover rows inside the column panel loop, reading its packed B, where that pack
    # transposes B (x @ W.T): read in place, all of B was transposed again (1024: 0.5 ms)
    share = pack_b and not sliced and columns_last(C, b) is not None
    if not sliced and isinstance(i.extent, int) and i.extent >= rows:
        # the column panels outside the rows first, then the rows in tiles (the last one
        # shifted back: ``row_tiles``), then k inside the row tile: each reorder is read off
        # the indices, where isl would be asked about the shifted tile's min(...)
        jo, ji, _ = nest.split_with_tail(j, cols)
        reorder_accumulation(nest, [i, jo, ji, k], [jo, i, ji, k], [k])
        io, ii, itail = row_tiles(nest, i, rows)
        reorder_accumulation(nest, [ii, ji, k], [k, ii, ji], [k])
        if itail is not None:       # the rows left over inside the panel, after the row tiles
            _, tj, tk = accumulation_chain(nest, itail)
            reorder_accumulation(nest, [itail, tj, tk], [itail, tk, tj], [tk])
            nest.vectorize(tj)
        tail_panel = None
        row_tile, panel = io, jo
    else:
        io, ii, itail = nest.split_with_tail(i, rows)
        tail_panel = _matmul_tail_rows(nest, itail, cols, parallel and not share) if itail is not None else None
        jo, ji, _ = nest.split_with_tail(j, cols)
        if sliced:
            ko, ki, _ = nest.split_with_tail(k, kc)
            reorder_accumulation(nest, [io, ii, jo, ji, ko, ki], [jo, ko, io, ki, ii, ji], [ko, ki])
            row_tile, panel = io, ko
        else:
            reorder_accumulation(nest, [io, ii, jo, ji, k], [jo, io, k, ii, ji], [k])
            row_tile, panel = io, jo
    if share and tail_panel is not None:
        jo = panel = nest.fuse([jo, tail_panel])
    if parallel:       # before the local buffers exist: a cheaper legality check, same result
        nest.parallelize(jo)
    nest.cache_accesses(C, "C_local", row_tile)
    if pack_b:      # transposed where B's columns are its rows (x @ W.T)
        nest.cache_accesses(b, "B_pack", panel, order=columns_last(C, b))
        vectorize_copy(nest, "B_pack", lanes)
    nest.vectorize(ji)
    nest.unroll(ii, late=True)


def _matmul_tail_rows(nest: LoopNest, itail, cols: int, parallel: bool):
    """The rows left over by the row tiles: ``cols``-wide column blocks (in parallel), each
    row's block accumulating in vector registers while k runs (``i_tail, j, k`` ->
    ``j_outer, i_tail, k, j_inner``: C's block is invariant in k, so LLVM keeps it in
    registers; 1.6x faster at n = 1024 than rows updating C in memory). Returns the loop of
    the column blocks."""
    _, tj, tk = accumulation_chain(nest, itail)
    tjo, tji, _ = nest.split_with_tail(tj, cols)
    reorder_accumulation(nest, [itail, tjo, tji, tk], [tjo, itail, tk, tji], [tk])
    if parallel:
        nest.parallelize(tjo)
    nest.vectorize(tji)
    return tjo


def conv2d_tile(target: Target | None = None, dtype="float32") -> tuple[int, int, int]:
    """(output channels, output rows, output columns) of the register tile of a direct
    convolution for ``target``: one native vector of columns, and channels x rows using
    half of the vector registers as accumulators (the other half holds the shifted input
    rows and the broadcast weights): 4 x 2 x 8 on AVX2, 4 x 4 x 16 on AVX-512.

    >>> conv2d_tile(Target(vector_bits=256, vector_registers=16))
    (4, 2, 8)
    >>> conv2d_tile(Target(vector_bits=512, vector_registers=32))
    (4, 4, 16)
    """
    t = resolve_target(target)
    accumulators = max(1, t.vector_registers // 2)
    co_tile = min(4, accumulators)
    return co_tile, max(1, accumulators // co_tile), t.lanes(dtype)


def _largest_divisor(n, at_most: int) -> int:
    if not isinstance(n, int):
        return 1
    return next(d for d in range(max(1, at_most), 0, -1) if n % d == 0)


def conv2d_schedule(nest: LoopNest, Y, co_tile: int | None = None, y_tile: int | None = None, cols: int | None = None,
                    parallel: bool = True, target: Target | None = None, along: str = "auto") -> None:
    """Direct convolution with register blocking, vectorized along the output channels
    (``along="channels"``, ``conv2d_channels_schedule``) or the columns (``"columns"``);
    ``"auto"``: the channels where the vectors divide them but not the columns
    (``loopnest.auto.channel_params``: 56 columns of 16 lanes), unless a tile size is given.

    Along the columns: the zero-padded input is materialized
    once (so the convolution's loads need no bounds tests and vectorize), then a tile of
    ``co_tile`` output channels x ``y_tile`` output rows x ``cols`` output columns
    (``conv2d_tile(target)``: 4 x 2 x 8, eight AVX2 registers; 4 x 4 x 16, sixteen AVX-512
    ones) accumulates in registers while the reduction runs over the input channels, with
    the filter's rows unrolled (neighbouring rows share their input loads); the tile's
    channels and rows are unrolled and its columns vectorized; channel tiles run in
    parallel. Columns left over when ``cols`` does not divide the width get a register
    tile of their own, as many columns wide as are left (56 columns on AVX-512: three tiles
    of 16 and one of 8, 1.4x faster than seven tiles of 8); ``co_tile`` and ``y_tile`` fall
    back to their largest divisors of the channel count and the height.

        for b, co_o:                             (co_o parallel)
          for y_o, x_o:
            Y_local[co_tile, y_tile, cols] = 0
            for ci:
              unrolled for ry: for rx: unrolled for co_i, y_i: vectorized for x_i:
                Y_local[co_i, y_i, x_i] += P[b, ci, y_o*y_tile + y_i + ry, x_o*cols + x_i + rx]
                                           * W[co_o*co_tile + co_i, ci, ry, rx]
            Y[...] = Y_local
    """
    if along not in ("auto", "channels", "columns"):
        raise ValueError(f"conv2d_schedule: along is 'auto', 'channels' or 'columns', not {along!r}")
    t = resolve_target(target)
    sized = co_tile is not None or y_tile is not None or cols is not None
    if along == "channels" or along == "auto" and not sized:
        params = channel_params(Y, t)
        if params is not None or along == "channels":
            if params is None:
                raise ValueError(f"conv2d_schedule: {Y.name} cannot be vectorized along its channels on this "
                                 f"target (loopnest.auto.channel_params: constant sizes, a batch dimension, "
                                 f"channels a multiple of {t.lanes(Y.dtype)} lanes, columns that are not)")
            conv2d_channels_schedule(nest, Y, params["vec_c"], params["cols"], parallel, t)
            return
    tile = conv2d_tile(t, Y.dtype)
    co_tile, y_tile, cols = co_tile or tile[0], y_tile or tile[1], cols or tile[2]
    P = next((t for t in nest.tensors if t.name == "P"), None)
    b, co, y, x, ci, ry, rx = nest.get_loops_for(Y)     # the init stays: each tile initialises its accumulator
    if P is not None and parallel:
        nest.parallelize(nest.get_loops_for(P)[1])          # input channels of the padding copy
    co_tile = _largest_divisor(co.extent, co_tile)
    y_tile = _largest_divisor(y.extent, y_tile)
    coo, coi, _ = nest.split_with_tail(co, co_tile)
    yo, yi, _ = nest.split_with_tail(y, y_tile)
    xo, xi, xtail = nest.split_with_tail(x, cols)
    if xtail is not None:
        # give the main columns and the leftover ones loops of their own inside each channel
        # tile (legal: they write different columns), then block the leftover columns like
        # the main ones; one parallel loop of channel tiles runs both (one fork and join a
        # call, not two: about 2% faster)
        yi, yi_tail = nest.distribute(yi)[:2]
        yo, yo_tail = nest.distribute(yo)[:2]
        coi, coi_tail = nest.distribute(coi)[:2]
        if parallel:
            nest.parallelize(coo)
        _, ci_t, ry_t, rx_t = accumulation_chain(nest, xtail)
        unroll = _register_block(nest, Y, "Y_tail", [None, coi_tail, yo_tail, yi_tail, None, xtail, ci_t, ry_t, rx_t],
                                 False)
        coo = None      # parallel already, and the main tile's loops are reordered below it
    else:
        unroll = []
    unroll += _register_block(nest, Y, "Y_local", [coo, coi, yo, yi, xo, xi, ci, ry, rx], parallel)
    for lp in unroll:      # last: the legality checks above then analyse the loops rolled
        nest.unroll(lp, late=True)


def conv2d_channels_schedule(nest: LoopNest, Y, vectors: int, cols: int, parallel: bool = True,
                             target: Target | None = None) -> None:
    """Direct convolution vectorized along the output channels: a tile of ``vectors`` native
    vectors of channels x ``cols`` columns of one output row accumulates in registers while
    the reduction runs over the input channels and the 3 x 3 window (both window loops stay
    loops: a tile is one output row, so unrolled filter rows would share no input row, and
    the build is a fifth shorter for the same speed); the filter is first copied with its
    output channels last (one vector load per tap and vector of channels), the padded input
    is broadcast, one element per column, and every vector is full however many columns
    there are. Rows run in parallel.

        W_pack[ci, ry, rx, co] = W[co, ci, ry, rx]
        parallel for y: for co_o, x_o:
          Y_local[x_i, co] = 0
          for ci: for ry: for rx: unrolled for co_v, x_i: vectorized for co_l:
            Y_local[x_i, co] += P[b, ci, y + ry, x_o*cols + x_i + rx] * W_pack[ci, ry, rx, co]
          Y[b, co, y, x_o*cols + x_i] = Y_local[x_i, co]

    On AVX-512, 64 x 56 x 56: 2 vectors x 8 columns, 0.78-0.81 ms against 0.85 ms along the
    columns (56 columns: three tiles of 16 and one of 8 at half speed).

    >>> from bench.kernels import make_conv2d
    >>> spec = make_conv2d((1, 4, 6, 12, 16))
    >>> nest = LoopNest(spec.outputs)
    >>> conv2d_channels_schedule(nest, spec.outputs[0], 2, 4, target=Target(vector_bits=256))
    >>> [lp.kind for lp in nest.get_loops_for("Y_local")][-3:]
    ['unrolled', 'unrolled', 'vectorized']
    """
    lanes = resolve_target(target).lanes(Y.dtype)
    P = next((t for t in nest.tensors if t.name == "P"), None)
    if P is not None and parallel:
        nest.parallelize(nest.get_loops_for(P)[1])          # input channels of the padding copy
    b, co, y, x, ci, ry, rx = nest.get_loops_for(Y)
    co_o, co_in, _ = nest.split_with_tail(co, vectors * lanes)
    co_v, co_l, _ = nest.split_with_tail(co_in, lanes)
    x_o, x_i, _ = nest.split_with_tail(x, cols)
    reorder_accumulation(nest, [b, co_o, co_v, co_l, y, x_o, x_i, ci, ry, rx],
                         [b, y, co_o, x_o, ci, ry, rx, co_v, x_i, co_l], [ci, ry, rx])
    if parallel:
        nest.parallelize(y)
    nest.cache_accesses("W", "W_pack", b, order=(1, 2, 3, 0))
    nest.cache_accesses(Y, "Y_local", x_o, order=(0, 2, 3, 1))
    nest.vectorize(co_l)
    for lp in (co_v, x_i):
        if lp.extent > 1:
            nest.unroll(lp, late=True)


def _register_block(nest: LoopNest, Y, local: str, loops: list, parallel: bool) -> list:
    """Reorder ``coo, coi, yo, yi, xo, xi, ci, ry, rx`` (``coo`` and ``xo`` may be None) to
    ``coo, yo, xo, ci, ry, rx, coi, yi, xi``, keep the tile of Y in a local buffer ``local``
    (in registers once unrolled) and vectorize the columns; returns the loops to unroll: the
    rest of the tile and the filter's rows (neighbouring output rows share their input
    rows). The filter's columns stay a loop: unrolling them too gave no speed (and, unrolled
    at schedule time, doubled the compile time)."""
    coo, coi, yo, yi, xo, xi, ci, ry, rx = loops
    order = [lp for lp in (coo, yo, xo, ci, ry, rx, coi, yi, xi) if lp is not None]
    reorder_accumulation(nest, [lp for lp in loops if lp is not None], order, [ci, ry, rx])
    if parallel and coo is not None:       # before the local buffer exists: a cheaper legality check
        nest.parallelize(coo)
    nest.cache_accesses(Y, local, xo if xo is not None else yo)
    nest.vectorize(xi)
    return [lp for lp in (yi, coi, ry) if lp.extent > 1]
