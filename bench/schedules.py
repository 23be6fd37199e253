"""Hand schedules for the benchmark kernels that need more than a line or two.

>>> from te import Buffer, Reduce, Sum
>>> from loopnest import LoopNest
>>> A = Buffer("A", (64, 64), "float32"); B = Buffer("B", (64, 64), "float32")
>>> C = Reduce("C", (64, 64), Sum(), lambda i, j, k: A[i, k] * B[k, j], (64,))
>>> nest = LoopNest([C]); matmul_schedule(nest, C)
"""
from __future__ import annotations

from loopnest import LoopNest


def separate_init(nest: LoopNest, t) -> list:
    """Distribute the output loops of reduction ``t`` so its accumulation is a perfect nest
    (the init stores get loops of their own); returns the accumulation's loops.

    ``reorder`` and ``tile`` distribute the init out of the way by themselves; the schedules
    below call this first because they split the output loops before reordering, and a
    split of a loop shared with the init would split (and tail) the init too."""
    for d in range(len(t.args) - 1, -1, -1):
        loops = nest.get_loops_for(t)
        if len(loops[d].stmt.body.stmts) > 1:
            nest.distribute(loops[d])
    return nest.get_loops_for(t)


def _buffer(nest: LoopNest, name: str):
    return next(b for b in list(nest.inputs) + list(nest.buffers.values()) if b.name == name)


def matmul_schedule(nest: LoopNest, C, rows: int = 6, cols: int = 16, kc: int = 256, pack_b: bool = True,
                    parallel: bool = True) -> None:
    """A register-blocked matmul in the style of BLIS micro-kernels: a ``rows`` x ``cols``
    tile of C (6 x 16 floats: 12 of the 16 AVX registers) accumulates in a local buffer that
    LLVM keeps in registers while k runs over a ``kc``-deep slice of the reduction; the
    ``kc`` x ``cols`` panel of B that the slice needs is first copied to a contiguous buffer
    (``cache_accesses``: it stays in L1 while every row tile uses it); the tile's rows are
    unrolled and its columns vectorized; the column panels run in parallel. Rows left over
    when ``rows`` does not divide the size get a vectorized loop of their own.

        parallel for jo:                          (columns jo*16 .. jo*16+15)
          for ko:                                 (k slice ko*kc .. ko*kc+kc-1)
            B_pack[kc, cols] = B[slice, panel]
            for io:
              C_local[rows, cols] = C[...]
              for ki:
                unrolled for ii: vectorized for ji:
                  C_local[ii, ji] += A[io*rows + ii, ko*kc + ki] * B_pack[ki, ji]
              C[...] = C_local
        for i_tail: for k: vectorized for j: C[i, j] += A[i, k] * B[k, j]
    """
    i, j, k = separate_init(nest, C)
    io, ii, itail = nest.split_with_tail(i, rows)
    if itail is not None:
        tj, tk = nest.get_inner_loops(itail)
        nest.reorder([itail, tj, tk], [0, 2, 1])
        _, tji, _ = nest.split_with_tail(tj, 8)
        nest.vectorize(tji)
    if isinstance(j.extent, int):
        while cols > 8 and j.extent % cols:
            cols //= 2                      # 16 -> 8 columns when 16 does not divide the width
    if not isinstance(j.extent, int) or j.extent % cols:
        raise ValueError(f"matmul_schedule: the column count {j.extent} is not a multiple of {cols}")
    jo, ji, _ = nest.split_with_tail(j, cols)
    if kc and isinstance(k.extent, int) and k.extent > kc and k.extent % kc == 0:
        ko, ki, _ = nest.split_with_tail(k, kc)
        nest.reorder([io, ii, jo, ji, ko, ki], [2, 4, 0, 5, 1, 3])     # jo, ko, io, ki, ii, ji
        row_tile, panel = io, ko
    else:
        nest.reorder([io, ii, jo, ji, k], [2, 0, 4, 1, 3])             # jo, io, k, ii, ji
        row_tile, panel = io, jo
    if parallel:       # before the local buffers exist: a cheaper legality check, same result
        nest.parallelize(jo)
    nest.cache_accesses(C, "C_local", row_tile)
    if pack_b:
        nest.cache_accesses(_buffer(nest, "B"), "B_pack", panel)
    nest.vectorize(ji)
    nest.unroll(ii)


def conv2d_schedule(nest: LoopNest, Y, co_tile: int = 4, y_tile: int = 2, cols: int = 8, parallel: bool = True) -> None:
    """Direct convolution with register blocking: the zero-padded input is materialized
    once (so the convolution's loads need no bounds tests and vectorize), then a tile of
    ``co_tile`` output channels x ``y_tile`` output rows x ``cols`` output columns (4 x 2 x 8:
    eight AVX registers) accumulates in registers while the reduction runs over the input
    channels, with the 3 x 3 filter window unrolled (neighbouring rows share their input
    loads); the tile's channels and rows are unrolled and its columns vectorized; channel
    tiles run in parallel. Columns left over when ``cols`` does not divide the width get
    their own (vectorized) loop; ``y_tile`` falls back to 1 when it does not divide the height.

        for b, co_o:                             (co_o parallel)
          for y_o, x_o:
            Y_local[co_tile, y_tile, cols] = Y[...]
            for ci:
              unrolled for ry, rx, co_i, y_i: vectorized for x_i:
                Y_local[co_i, y_i, x_i] += P[b, ci, y_o*y_tile + y_i + ry, x_o*cols + x_i + rx]
                                           * W[co_o*co_tile + co_i, ci, ry, rx]
            Y[...] = Y_local
    """
    P = next((t for t in nest.tensors if t.name == "P"), None)
    b, co, y, x, ci, ry, rx = separate_init(nest, Y)
    if P is not None and parallel:
        nest.parallelize(nest.get_loops_for(P)[1])          # input channels of the padding copy
    if not isinstance(co.extent, int) or co.extent % co_tile:
        co_tile = 1
    if not isinstance(y.extent, int) or y.extent % y_tile:
        y_tile = 1
    coo, coi, _ = nest.split_with_tail(co, co_tile)
    yo, yi, _ = nest.split_with_tail(y, y_tile)
    xo, xi, xtail = nest.split_with_tail(x, cols)
    if xtail is not None:
        # the leftover columns: x_tail, ci, ry, rx -> ci, ry, rx, x_tail with x_tail vectorized
        tl = [xtail] + nest.get_inner_loops(xtail)
        nest.reorder(tl, [1, 2, 3, 0])
        nest.vectorize(xtail)
        # give the main columns loops of their own, apart from the tail's (legal: they
        # write different columns)
        yi = nest.distribute(yi)[0]
        yo = nest.distribute(yo)[0]
        coi = nest.distribute(coi)[0]
        coo, coo_tail = nest.distribute(coo)[:2]
        if parallel:
            nest.parallelize(coo_tail)
    loops = [coo, coi, yo, yi, xo, xi, ci, ry, rx]
    order = [coo, yo, xo, ci, ry, rx, coi, yi, xi]
    nest.reorder(loops, [loops.index(lp) for lp in order])
    if parallel:       # before the local buffer exists: a cheaper legality check, same result
        nest.parallelize(coo)
    nest.cache_accesses(Y, "Y_local", xo)
    nest.vectorize(xi)
    for lp in (yi, coi, rx, ry):
        if lp.extent > 1:
            nest.unroll(lp)
