"""Splitting loops: split_with_tail, split_with_mask, split_with_overlap, tile, slice_head,
slice_tail, normalize.

Every function takes the nest and resolved ``Loop`` handles, builds the new tree and
assigns ``nest.root``; it raises ``ScheduleError`` before assigning anything when refused.

Splitting a loop only renumbers its iterations (their order is unchanged), so
split_with_tail, split_with_mask, slice_head, slice_tail and normalize are legal wherever
the loops around them are serial; inside a parallel or GPU loop they are refused where the
analysis can then no longer show that loop's intermediates private to its iterations
(``transforms.privacy``; ``slice_head`` / ``slice_tail`` check those loops themselves).
``tile`` also interchanges loops and is checked by the dependence analysis.

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> A = Buffer("A", (20,), "float32")
>>> B = Compute("B", (20,), lambda i: A[i] * 2.0)
>>> nest = LoopNest([B])
>>> outer, inner, tail = nest.split_with_tail(nest.get_loops_for(B)[0], 8)
>>> print(nest)
for (int i_outer = 0; i_outer < 2; i_outer++) {
  for (int i_inner = 0; i_inner < 8; i_inner++) {
    B[i_outer * 8 + i_inner] = A[i_outer * 8 + i_inner] * 2.0f;
  }
}
for (int i_tail = 0; i_tail < 4; i_tail++) {
  B[i_tail + 16] = A[i_tail + 16] * 2.0f;
}
"""
from __future__ import annotations

from te.expr import And, Expr, IntImm, LT, Max, Min, Var
from te.queries import fold_int, free_vars

from ..errors import ScheduleError
from ..lazy_analysis import dependence_analysis, legality_checks
from ..loop import Loop
from ..stmt import Block, Cond, For, ForKind, Store, iter_stmts
from .distribute import distribute_out_of_the_way
from ._rewrite import (add, clone_fresh, floordiv_c, floormod_c, mul, nonnegative_extent,
                       replace_loop, sub, substitute_stmt, tidy)

__all__ = ["split_with_tail", "split_with_mask", "split_with_overlap", "tile", "slice_head", "slice_tail",
           "normalize"]


def _check_factor(factor, op: str, loop) -> int:
    if isinstance(factor, bool) or not isinstance(factor, int) and not hasattr(factor, "__index__"):
        raise ScheduleError(f"{op}({loop.name}, {factor!r}): the factor must be a positive int, "
                            f"got {type(factor).__name__}")
    factor = int(factor)
    if factor < 1:
        raise ScheduleError(f"{op}({loop.name}, {factor}): the factor must be >= 1")
    if loop.stmt.kind in (ForKind.GPU_BLOCK, ForKind.GPU_THREAD):
        # the pieces would be serial loops around the block or thread loops inside: a kernel's
        # grid and blocks must be its outermost loops (the CUDA build would refuse it)
        raise ScheduleError(f"{op}({loop.name}, {factor}): {loop.name} is bound to a GPU index; "
                            f"{op.split('_')[0]} it before binding")
    dtype = loop.var.dtype
    if factor > int(dtype.max_value()):
        raise ScheduleError(f"{op}({loop.name}, {factor}): the factor does not fit the loop variable's type "
                            f"{dtype} (at most {int(dtype.max_value())}); use a factor no larger than the "
                            "loop's extent")
    return factor


def _extent(f: For) -> Expr:
    return tidy(sub(f.stop, f.start))


def _new_var(nest, base: str, like: Var) -> Var:
    return Var(nest.fresh_name(base), like.dtype)


def split_with_tail(nest, loop, factor: int):
    """Split ``loop`` into ``outer`` x ``inner`` (``factor`` iterations) and a ``tail`` loop for
    the remaining ``extent % factor`` iterations.

    Before / after ``split_with_tail(i, 8)`` on a loop of 20 iterations::

        for (int i = 0; i < 20; i++) {        for (int i_outer = 0; i_outer < 2; i_outer++) {
          B[i] = A[i] * 2.0f;                   for (int i_inner = 0; i_inner < 8; i_inner++) {
        }                                         B[i_outer * 8 + i_inner] = A[i_outer * 8 + i_inner] * 2.0f;
                                                }
                                              }
                                              for (int i_tail = 0; i_tail < 4; i_tail++) {
                                                B[i_tail + 16] = A[i_tail + 16] * 2.0f;
                                              }

    Returns ``(outer, inner, tail)``; ``tail`` is None when ``factor`` divides a constant
    extent. With a symbolic extent ``N`` the outer loop runs ``floordiv(N, factor)`` times
    and (for ``factor > 1``) a tail loop of ``floormod(N, factor)`` iterations always exists;
    an extent that may be negative (the loop then runs no iteration) is split as
    ``max(N, 0)``. The loop ``loop`` itself disappears (its handle becomes stale); the new
    loops are serial. Legal as the module docstring says (iterations keep their order);
    ScheduleError for a factor that is not an int >= 1.
    """
    factor = _check_factor(factor, "split_with_tail", loop)
    f = loop.stmt
    v = f.var
    ext = nonnegative_extent(nest, f)
    e = fold_int(ext)
    outer = _new_var(nest, f"{v.name}_outer", v)
    inner = _new_var(nest, f"{v.name}_inner", v)
    if e is not None:
        n_outer: Expr = IntImm(e // factor, v.dtype)
        n_tail: Expr | None = IntImm(e % factor, v.dtype) if e % factor else None
    else:
        n_outer = floordiv_c(ext, factor)
        n_tail = floormod_c(ext, factor) if factor > 1 else None
    index = tidy(add(add(mul(outer, factor), inner), f.start))
    body = substitute_stmt(f.body, {v: index})
    main = For(outer, IntImm(0, v.dtype), n_outer,
               Block((For(inner, IntImm(0, v.dtype), IntImm(factor, v.dtype), body),)))
    new = [main]
    tail = None
    if n_tail is not None:
        tail = _new_var(nest, f"{v.name}_tail", v)
        offset = tidy(add(mul(n_outer, factor), f.start))
        renamed: dict = {}
        tail_body = clone_fresh(f.body, nest.fresh_name, {v: tidy(add(tail, offset))}, renamed)
        new.append(For(tail, IntImm(0, v.dtype), n_tail, tail_body))
    nest.root = replace_loop(nest.root, v, lambda _: new)
    _relink_tails(nest, v, inner, outer)
    if tail is not None:
        nest._tail_of[tail] = (inner, outer)
        nest._tail_of.update((new_var, (old,)) for old, new_var in renamed.items())
    return Loop(nest, outer), Loop(nest, inner), (Loop(nest, tail) if tail is not None else None)


def _relink_tails(nest, v: Var, inner: Var, outer: Var) -> None:
    """A tail loop that corresponded to ``v`` (split into ``outer`` x ``inner``) now
    corresponds to the split's loops (``nest._tail_of``, for compute_at)."""
    for g, mains in list(nest._tail_of.items()):
        if any(m is v for m in mains):
            nest._tail_of[g] = (inner, outer)


def _mask_parts(f: For, factor: int):
    """(outer trip count, guard needed?) of a masked split of ``f`` by ``factor``."""
    ext = _extent(f)
    e = fold_int(ext)
    if e is not None:
        return IntImm(-(-e // factor), f.var.dtype), e % factor != 0, ext
    return floordiv_c(add(ext, factor - 1), factor), factor > 1, ext


def split_with_mask(nest, loop, factor: int):
    """Split ``loop`` into ``outer`` (``ceil(extent / factor)`` iterations) x ``inner``
    (``factor``), guarding the body with ``if (outer * factor + inner < extent)`` unless
    ``factor`` divides a constant extent.

    Before / after ``split_with_mask(i, 8)`` on a loop of 20 iterations::

        for (int i = 0; i < 20; i++) {        for (int i_outer = 0; i_outer < 3; i_outer++) {
          B[i] = A[i] * 2.0f;                   for (int i_inner = 0; i_inner < 8; i_inner++) {
        }                                         if (i_outer * 8 + i_inner < 20) {
                                                    B[i_outer * 8 + i_inner] = A[i_outer * 8 + i_inner] * 2.0f;
                                                  }
                                                }
                                              }

    Returns ``(outer, inner)``; ``loop``'s handle becomes stale. Legal as the module
    docstring says.
    """
    factor = _check_factor(factor, "split_with_mask", loop)
    f = loop.stmt
    v = f.var
    n_outer, guarded, ext = _mask_parts(f, factor)
    outer = _new_var(nest, f"{v.name}_outer", v)
    inner = _new_var(nest, f"{v.name}_inner", v)
    rel = tidy(add(mul(outer, factor), inner))
    body = substitute_stmt(f.body, {v: tidy(add(rel, f.start))})
    if guarded:
        body = Block((Cond(LT(rel, ext), body),))
    main = For(outer, IntImm(0, v.dtype), n_outer,
               Block((For(inner, IntImm(0, v.dtype), IntImm(factor, v.dtype), body),)))
    nest.root = replace_loop(nest.root, v, lambda _: main)
    _relink_tails(nest, v, inner, outer)
    return Loop(nest, outer), Loop(nest, inner)


def split_with_overlap(nest, loop, factor: int):
    """Split ``loop`` into ``outer`` (``ceil(extent / factor)`` iterations) x ``inner``
    (``factor``) with neither a tail loop nor a guard: the last tile is shifted back to end
    at the loop's end, so it runs again the iterations it shares with the tile before it
    (Halide's "shift inwards" tail strategy). The body is not copied, as ``split_with_tail``
    copies it for its tail, and not guarded, as ``split_with_mask`` guards it: a
    register-blocked body is compiled once and every tile is a full one.

    Before / after ``split_with_overlap(i, 8)`` on a loop of 20 iterations (the last tile
    runs iterations 12 to 19; 12 to 15 a second time)::

        for (int i = 0; i < 20; i++) {        for (int i_outer = 0; i_outer < 3; i_outer++) {
          B[i] = A[i] * 2.0f;                   for (int i_inner = 0; i_inner < 8; i_inner++) {
        }                                         B[min(i_outer * 8, 12) + i_inner] = ...;
                                                }
                                              }

    Returns ``(outer, inner)``; ``loop``'s handle becomes stale. Where ``factor`` divides the
    extent (or the loop runs no iteration) it is a plain split. Otherwise it needs a constant
    extent of at least ``factor``, and it is legal only where running an iteration again,
    after later ones, changes nothing: the iterations are independent (``parallelize`` would
    be legal: no iteration reads or writes what another one writes, up to intermediates
    private to an iteration), and every value an iteration reads from a buffer it writes, it
    wrote itself earlier in the same iteration (``C[i] = 0`` then ``C[i] += ...`` runs again
    as it ran; ``B[i] = B[i] * 2`` would double twice). Refused with ScheduleError otherwise, naming what breaks.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (20,), "float32")
    >>> B = Compute("B", (20,), lambda i: A[i] * 2.0)
    >>> nest = LoopNest([B])
    >>> outer, inner = nest.split_with_overlap(nest.get_loops_for(B)[0], 8)
    >>> outer.extent, inner.extent
    (3, 8)
    """
    factor = _check_factor(factor, "split_with_overlap", loop)
    f = loop.stmt
    v = f.var
    e = fold_int(_extent(f))
    op = f"split_with_overlap({loop.name}, {factor})"
    if e is None:
        raise ScheduleError(f"{op}: the extent of {loop.name} is symbolic ({_extent(f)}); the shifted last "
                            "tile needs a constant extent of at least the factor: use split_with_tail or "
                            "split_with_mask")
    e = max(e, 0)
    if e % factor and e < factor:
        raise ScheduleError(f"{op}: {loop.name} runs {e} iteration{'' if e == 1 else 's'}, fewer than one tile of "
                            f"{factor}; use a factor no larger than the extent, or split_with_tail")
    if e % factor:
        _check_overlap_legal(nest, loop, op)
    outer = _new_var(nest, f"{v.name}_outer", v)
    inner = _new_var(nest, f"{v.name}_inner", v)
    base = mul(outer, factor)
    if e % factor:
        base = Min(base, IntImm(e - factor, v.dtype))
    body = substitute_stmt(f.body, {v: tidy(add(add(base, inner), f.start))})
    main = For(outer, IntImm(0, v.dtype), IntImm(-(-e // factor), v.dtype),
               Block((For(inner, IntImm(0, v.dtype), IntImm(factor, v.dtype), body),)))
    nest.root = replace_loop(nest.root, v, lambda _: main)
    _relink_tails(nest, v, inner, outer)
    return Loop(nest, outer), Loop(nest, inner)


def _check_overlap_legal(nest, loop, op: str) -> None:
    """Refuse ``split_with_overlap`` where running an iteration of ``loop`` again, after
    later ones, could change what the nest computes (see ``split_with_overlap``)."""
    deps = legality_checks().blocking_parallel(nest, loop)
    if deps:
        raise ScheduleError(f"{op}: the last tile runs some iterations of {loop.name} again after later ones, "
                            f"which needs independent iterations; {deps[0].describe(loop)}. Use split_with_tail")
    written = {id(s.buffer): s.buffer for s in iter_stmts(loop.stmt.body) if isinstance(s, Store)}
    for buf in written.values():
        if not dependence_analysis().reads_written_in_iteration(nest, buf, loop):
            raise ScheduleError(f"{op}: an iteration of {loop.name} reads {buf.name} where it may not have written "
                                "it earlier in the same iteration, so running it again would read its own result "
                                f"(as in `{buf.name}[i] = {buf.name}[i] * 2`); use split_with_tail")


def _check_tile_legal(nest, x, y) -> None:
    """Tiling runs the iterations of the band (x, y) tile by tile. With lexicographically
    positive distances (dx, dy), a reversed pair must have dx > 0 and dy < 0, exactly the
    pairs that forbid interchanging x and y: so tiling is legal when interchange is."""
    try:
        legality_checks().check_reorder(nest, [x, y], [1, 0])
    except ScheduleError as e:
        msg = str(e)
        prefix = f"cannot reorder loops ({x.name}, {y.name}) to ({y.name}, {x.name}): "
        detail = msg[len(prefix):] if msg.startswith(prefix) else msg
        detail = detail.split("; ")[0]
        raise ScheduleError(f"cannot tile loops {x.name} and {y.name}: {detail}; in a tile, an iteration of "
                            f"{y.name} would run before an iteration of an earlier {x.name} that it depends on") \
            from None


def tile(nest, x, y, x_factor: int, y_factor: int):
    """Tile the perfectly nested loops ``x`` (outer) and ``y`` (its only statement) into
    ``xo, yo, xi, yi`` (in that nest order), masking partial tiles with one guard.

    Before / after ``tile(i, j, 4, 8)`` on a 10 x 16 nest::

        for (int i = 0; i < 10; i++) {        for (int i_outer = 0; i_outer < 3; i_outer++) {
          for (int j = 0; j < 16; j++) {        for (int j_outer = 0; j_outer < 2; j_outer++) {
            C[i, j] = A[i, j] + 1.0f;             for (int i_inner = 0; i_inner < 4; i_inner++) {
          }                                         for (int j_inner = 0; j_inner < 8; j_inner++) {
        }                                             if (i_outer * 4 + i_inner < 10) {
                                                        C[i_outer * 4 + i_inner, j_outer * 8 + j_inner] = ...;
                                                      }
                                                    }
                                                  }
                                                }
                                              }

    Statements in ``x``'s body besides ``y`` (a reduction's init store) are first
    distributed into loops of their own when that is legal, as ``reorder`` does.

    Legality: the iterations of ``x`` and ``y`` are visited in a new order (an interchange
    of ``x_inner`` and ``y_outer``), so no dependence between two iterations may be reversed
    (every carried dependence has non-negative distances along both ``x`` and ``y``). Refused
    with ScheduleError when ``y`` is not directly inside ``x``, when a statement in the way
    cannot be distributed out, when ``y``'s bounds depend on ``x``, or when a dependence
    forbids it.
    """
    xf = _check_factor(x_factor, "tile", x)
    yf = _check_factor(y_factor, "tile", y)
    if x.var is y.var:
        raise ScheduleError(f"tile({x.name}, {y.name}): the two loops must be different")
    parent = nest.get_parent_loop(y)
    if parent is not None and parent.var is x.var:
        distribute_out_of_the_way(nest, x, y, f"tile({x.name}, {y.name})")
    fx, fy = x.stmt, y.stmt
    if not (len(fx.body.stmts) == 1 and fx.body.stmts[0] is fy):
        raise ScheduleError(f"tile({x.name}, {y.name}): {y.name} must be the only statement in the body of "
                            f"{x.name} (a perfect nest, {x.name} outside {y.name})")
    if any(v is fx.var for v in free_vars([fy.start, fy.stop])):
        raise ScheduleError(f"tile({x.name}, {y.name}): the bounds of {y.name} depend on {x.name} "
                            "(a non-rectangular nest cannot be tiled)")
    vx, vy = fx.var, fy.var
    nx, gx, ex = _mask_parts(fx, xf)
    ny, gy, ey = _mask_parts(fy, yf)
    xo = _new_var(nest, f"{vx.name}_outer", vx)
    yo = _new_var(nest, f"{vy.name}_outer", vy)
    xi = _new_var(nest, f"{vx.name}_inner", vx)
    yi = _new_var(nest, f"{vy.name}_inner", vy)
    rx = tidy(add(mul(xo, xf), xi))
    ry = tidy(add(mul(yo, yf), yi))
    body = substitute_stmt(fy.body, {vx: tidy(add(rx, fx.start)), vy: tidy(add(ry, fy.start))})
    conds = ([LT(rx, ex)] if gx else []) + ([LT(ry, ey)] if gy else [])
    if conds:
        c = conds[0] if len(conds) == 1 else And(conds[0], conds[1])
        body = Block((Cond(c, body),))
    zero_x, zero_y = IntImm(0, vx.dtype), IntImm(0, vy.dtype)
    new = For(xo, zero_x, nx, Block((
        For(yo, zero_y, ny, Block((
            For(xi, zero_x, IntImm(xf, vx.dtype), Block((
                For(yi, zero_y, IntImm(yf, vy.dtype), body),))),))),)))
    _check_tile_legal(nest, x, y)
    nest.root = replace_loop(nest.root, vx, lambda _: new)
    return Loop(nest, xo), Loop(nest, yo), Loop(nest, xi), Loop(nest, yi)


def _piece_kind(f: For, extent: Expr) -> str:
    if f.kind == ForKind.VECTORIZED and fold_int(extent) is None:
        return ForKind.SERIAL
    return f.kind


def _check_slice(nest, loop, factor, op):
    factor = _check_factor(factor, op, loop)
    f = loop.stmt
    if f.kind in (ForKind.GPU_BLOCK, ForKind.GPU_THREAD):
        raise ScheduleError(f"{op}({loop.name}, {factor}): {loop.name} is bound to a GPU index; slice it "
                            "before binding")
    return factor, f


def _slice_cut(f: For, factor: int, ext, side: str) -> Expr:
    """Where the peeled ``side`` ("head" or "tail") of ``f`` meets the rest: ``factor``
    iterations from its start or its stop, clamped to the loop when the extent is symbolic."""
    if side == "head":
        cut = tidy(add(f.start, factor))
        return cut if ext is not None else tidy(Min(cut, f.stop))
    cut = tidy(sub(f.stop, factor))
    return cut if ext is not None else tidy(Max(cut, f.start))


def _slice(nest, loop, factor, side: str):
    """slice_head (``side`` "head") or slice_tail ("tail"): peel ``factor`` iterations off
    that end of ``loop`` into a fresh ``<var>_<side>`` loop; ``loop`` keeps the others.
    Returns ``(head, tail)``, with ``None`` for the peeled side when nothing changes."""
    factor, f = _check_slice(nest, loop, factor, f"slice_{side}")
    v = f.var
    ext = fold_int(_extent(f))
    if ext is not None and factor >= ext:
        return (loop, None) if side == "head" else (None, loop)
    cut = _slice_cut(f, factor, ext, side)
    pv = _new_var(nest, f"{v.name}_{side}", v)
    body = clone_fresh(f.body, nest.fresh_name, {v: pv})
    kind = _piece_kind(f, IntImm(factor) if ext is not None else cut)
    if side == "head":
        piece, rest = For(pv, f.start, cut, body, kind, f.axis), f.replace(start=cut)
    else:
        piece, rest = For(pv, cut, f.stop, body, kind, f.axis), f.replace(stop=cut)
    if ext is None and f.kind == ForKind.VECTORIZED:
        rest = rest.replace(kind=ForKind.SERIAL)
    pieces = [piece, rest] if side == "head" else [rest, piece]
    new_root = replace_loop(nest.root, v, lambda _: pieces)
    # slicing keeps the order of every iteration, but the analysis of a parallel loop around
    # it may no longer show an intermediate private to that loop's iterations (a bound
    # min(...) of the sliced loop); its allocation would then be shared: refuse
    around = [g.var for g in nest.loop_index().enclosing(v) if g.var is not v]
    legality_checks().check_kinds_after(nest, new_root, around, f"slice_{side}",
                                        f"with loop {v.name} sliced")
    nest.root = new_root
    return (Loop(nest, pv), loop) if side == "head" else (loop, Loop(nest, pv))


def slice_head(nest, loop, factor: int):
    """Peel the first ``factor`` iterations of ``loop`` into a ``head`` loop before it.

    Before / after ``slice_head(i, 2)``::

        for (int i = 0; i < 10; i++) {        for (int i_head = 0; i_head < 2; i_head++) {
          B[i] = A[i];                          B[i_head] = A[i_head];
        }                                     }
                                              for (int i = 2; i < 10; i++) {
                                                B[i] = A[i];
                                              }

    Returns ``(head, tail)``: the tail is ``loop`` itself (its handle stays valid, as do the
    handles of loops inside it; the head's inner loops are fresh copies). When ``factor``
    covers a constant extent nothing changes and ``(loop, None)`` is returned. With a
    symbolic extent the head stops at ``min(start + factor, stop)``. It keeps the order of
    every iteration; it is refused only where the analysis of a parallel loop around it -- or,
    for a parallel ``loop``, of the loop and its new piece (``refuse_lost_privacy``) -- can
    then no longer show that loop's intermediates private to its iterations.
    """
    return _slice(nest, loop, factor, "head")


def slice_tail(nest, loop, factor: int):
    """Peel the last ``factor`` iterations of ``loop`` into a ``tail`` loop after it.

    Before / after ``slice_tail(i, 2)``::

        for (int i = 0; i < 10; i++) {        for (int i = 0; i < 8; i++) {
          B[i] = A[i];                          B[i] = A[i];
        }                                     }
                                              for (int i_tail = 8; i_tail < 10; i_tail++) {
                                                B[i_tail] = A[i_tail];
                                              }

    Returns ``(head, tail)``: the head is ``loop`` itself (its handle and its inner loops'
    handles stay valid). When ``factor`` covers a constant extent nothing changes and
    ``(None, loop)`` is returned. With a symbolic extent the tail starts at
    ``max(stop - factor, start)``. Refused as ``slice_head`` is.
    """
    return _slice(nest, loop, factor, "tail")


def normalize(nest, loop):
    """Make ``loop`` start at 0, substituting ``var -> var + start`` in its body.

    Before / after ``normalize(i)``::

        for (int i = 2; i < 10; i++) {        for (int i = 0; i < 8; i++) {
          B[i] = A[i];                          B[i + 2] = A[i + 2];
        }                                     }

    The loop keeps its variable (handles stay valid). Legal as the module docstring says.
    """
    f = loop.stmt
    if fold_int(f.start) == 0:
        return loop
    v = f.var
    body = substitute_stmt(f.body, {v: tidy(add(v, f.start))})
    new = f.replace(start=IntImm(0, v.dtype), stop=_extent(f), body=body)
    nest.root = replace_loop(nest.root, v, lambda _: new)
    return loop
