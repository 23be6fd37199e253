"""Tensor views and partition views (the Tile IR document's view types), usable from Compute.

A ``TensorView`` looks at the memory of a base buffer through its own shape, element strides
and offset; a ``PartitionView`` tiles a view (or buffer) into power-of-two tiles. Indexing a
partition view with a tile index and an element index reads that element, or the padding
value where the tile hangs over the edge of the view.

>>> from te import Buffer, Compute
>>> A = Buffer("A", (6, 8), "float32")
>>> At = TensorView(A, (8, 6), (1, 8), name="At")        # the transpose, without a copy
>>> print(At[2, 3])
At[2, 3]
>>> P = PartitionView(A, (4, 4), padding=0.0)             # a 2 x 2 grid of 4 x 4 tiles
>>> P.grid_shape
(2, 2)
>>> T = Compute("T", (2, 2, 4, 4), lambda I, J, i, j: P[I, J, i, j])

Views are read-only windows on kernel inputs: the base must be a Buffer passed to the kernel
(not a computed tensor), which is what keeps dependence analysis exact (nothing the nest
writes can alias a view). When the kernel runs, the base buffer's array is passed as usual.
"""
from __future__ import annotations

from typing import Any, Sequence

from .expr import Expr, IfThenElse, IntImm, Load, as_expr, const
from .tensor import Buffer, Tensor, _as_dim

__all__ = ["TensorView", "PartitionView", "view_root"]


class TensorView(Buffer):
    """A view of ``base``: element ``[i0, ..., in]`` lives at memory element
    ``offset + sum(i_m * strides[m])`` of the base buffer's storage.

    Strides and offset are in elements and may be symbolic expressions.

    >>> A = Buffer("A", (4, 4), "float32")
    >>> diag = TensorView(A, (4,), (5,), name="diag")   # A[0,0], A[1,1], ...
    >>> diag.strides
    (5,)
    """

    def __init__(self, base: Buffer, shape: Sequence[Any], strides: Sequence[Any], offset: Any = 0,
                 name: str | None = None):
        if not isinstance(base, Buffer):
            raise TypeError(f"a TensorView needs a Buffer as its base, got {type(base).__name__}")
        if isinstance(base, Tensor):
            raise TypeError(f"views of computed tensors are not supported ({base.name} is a tensor); "
                            "view a kernel input Buffer instead")
        if isinstance(shape, (int, Expr)):
            shape = (shape,)
        if isinstance(strides, (int, Expr)):
            strides = (strides,)
        if len(strides) != len(shape):
            raise ValueError(f"view of {base.name}: {len(shape)} dimension(s) but {len(strides)} stride(s)")
        super().__init__(name or f"{base.name}_view", shape, base.dtype)
        self.base = base
        self._strides = tuple(_as_dim(s, self.name + " stride", k) for k, s in enumerate(strides))
        self.offset = _as_dim(offset, self.name + " offset", 0)

    @property
    def strides(self) -> tuple:
        return tuple(s.value if isinstance(s, IntImm) else s for s in self._strides)

    def memory_offset(self, indices: Sequence[Expr]) -> Expr:
        """The element offset in the root buffer's storage of ``self[indices]``."""
        off = self.offset
        for ix, st in zip(indices, self._strides):
            off = off + as_expr(ix) * st
        if isinstance(self.base, TensorView):
            return self.base.offset_of_flat(off)
        return off

    def offset_of_flat(self, flat: Expr) -> Expr:
        # A view of a view: its base's strides already map to memory; a flat element
        # offset of the inner view is relative to the base view's own origin.
        return self.offset + flat if not isinstance(self.base, TensorView) else self.base.offset_of_flat(
            self.offset + flat)

    def __repr__(self) -> str:
        return f"TensorView({self.name} of {self.base.name}, shape={self.shape}, strides={self.strides})"


def view_root(buf: Buffer) -> Buffer:
    """The buffer whose storage a (possibly nested) view reads."""
    while isinstance(buf, TensorView):
        buf = buf.base
    return buf


def _ceildiv(a: Expr, b: int) -> Any:
    if isinstance(a, IntImm):
        return -(-a.value // b)
    return (a + (b - 1)) // b


class PartitionView:
    """``view`` partitioned into a grid of non-overlapping tiles of ``tile_shape`` (powers of two).

    The grid (index space) has ``ceildiv(S_k, T_k)`` tiles along dimension k: every tile holding
    at least one element of the view. ``P[I..., i...]`` (tile index, then element index within
    the tile) reads view element ``I_k * T_k + i_k``; where that lies outside the view it gives
    ``padding`` (0 when no padding value is given: the document leaves it unspecified).
    ``dim_map[k]`` names the view dimension that tile dimension k runs along.

    >>> from te import Buffer
    >>> P = PartitionView(Buffer("V", (64, 256), "float32"), (128, 128))
    >>> P.grid_shape
    (1, 2)
    """

    def __init__(self, view: Buffer, tile_shape: Sequence[int], padding: Any = None,
                 dim_map: Sequence[int] | None = None):
        if not isinstance(view, Buffer):
            raise TypeError(f"a PartitionView partitions a Buffer or TensorView, got {type(view).__name__}")
        tile_shape = tuple(tile_shape)
        if len(tile_shape) != view.ndim:
            raise ValueError(f"tile shape {tile_shape} has rank {len(tile_shape)}, the view {view.name} has "
                             f"rank {view.ndim}")
        for t in tile_shape:
            if not isinstance(t, int) or t < 1 or t & (t - 1):
                raise ValueError(f"tile sizes must be powers of two, got {tile_shape}")
        dim_map = tuple(range(view.ndim)) if dim_map is None else tuple(dim_map)
        if sorted(dim_map) != list(range(view.ndim)):
            raise ValueError(f"dim_map {dim_map} must be a permutation of 0..{view.ndim - 1}")
        self.view = view
        self.tile_shape = tile_shape
        self.dim_map = dim_map
        self.padding = padding
        self.dtype = view.dtype

    @property
    def grid_shape(self) -> tuple:
        """Tiles along each tile dimension: ceildiv(S, T)."""
        return tuple(_ceildiv(self.view.dims[self.dim_map[k]], t) for k, t in enumerate(self.tile_shape))

    @property
    def ndim(self) -> int:
        return len(self.tile_shape)

    def element_indices(self, tile: Sequence[Any], elem: Sequence[Any]) -> list[Expr]:
        """View indices (in view dimension order) of element ``elem`` of tile ``tile``."""
        out: list[Any] = [None] * self.ndim
        for k, (I, i, t) in enumerate(zip(tile, elem, self.tile_shape)):
            out[self.dim_map[k]] = as_expr(I) * t + as_expr(i)
        return out

    def in_bounds(self, idx: Sequence[Expr]) -> Expr:
        cond = None
        for ix, d in zip(idx, self.view.dims):
            c = ix < d
            cond = c if cond is None else cond & c
        return cond

    def __getitem__(self, key) -> Expr:
        if not isinstance(key, tuple) or len(key) != 2 * self.ndim:
            raise IndexError(f"a partition view of rank {self.ndim} is indexed with {self.ndim} tile indices "
                             f"then {self.ndim} element indices, got {key!r}")
        tile, elem = key[:self.ndim], key[self.ndim:]
        idx = self.element_indices(tile, elem)
        pad = const(0 if self.padding is None else self.padding, self.dtype)
        return IfThenElse(self.in_bounds(idx), Load(self.view, tuple(idx)), pad)

    def __repr__(self) -> str:
        return f"PartitionView({self.view.name}, tile={self.tile_shape}, grid={self.grid_shape})"
