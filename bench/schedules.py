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
    (the init stores get loops of their own); returns the accumulation's loops."""
    for d in range(len(t.args) - 1, -1, -1):
        loops = nest.get_loops_for(t)
        if len(loops[d].stmt.body.stmts) > 1:
            nest.distribute(loops[d])
    return nest.get_loops_for(t)


def matmul_schedule(nest: LoopNest, C, rows: int = 4, cols: int = 32, parallel: bool = True) -> None:
    """A register-blocked matmul: a ``rows`` x ``cols`` tile of C accumulates in a local buffer
    (kept in vector registers) while k runs over the whole reduction; the tile's rows are
    unrolled and its columns vectorized; row tiles run in parallel.

        for io, jo:                       (io parallel)
          C_local[rows, cols] = C[...]
          for k:
            unrolled for ii: vectorized for ji:
              C_local[ii, ji] += A[io*rows + ii, k] * B[k, jo*cols + ji]
          C[...] = C_local
    """
    i, j, k = separate_init(nest, C)
    io, jo, ii, ji = nest.tile(i, j, rows, cols)
    loops = nest.get_loops_for(C)              # io, jo, ii, ji, k
    order = [loops.index(x) for x in (io, jo, k, ii, ji)]
    nest.reorder(loops, order)
    nest.cache_accesses(C, "C_local", jo)
    nest.vectorize(ji)
    nest.unroll(ii)
    if parallel:
        nest.parallelize(io)


def conv2d_schedule(nest: LoopNest, Y, cols: int = 8) -> None:
    """Direct convolution: padding computed per input channel plane, output rows in parallel,
    the innermost output columns vectorized."""
    for t in list(nest.tensors):
        if t.name == "P":
            nest.compute_inline(t)
    loops = separate_init(nest, Y)                 # b, co, y, x, ci, ry, rx
    b, co, y, x, ci, ry, rx = loops
    xo, xi, _ = nest.split_with_tail(x, cols)
    loops = nest.get_loops_for(Y)                  # b, co, y, xo, xi, ci, ry, rx
    order = [loops.index(v) for v in (b, co, y, xo, ci, ry, rx, xi)]
    nest.reorder(loops, order)
    nest.vectorize(xi)
    nest.parallelize(co)
