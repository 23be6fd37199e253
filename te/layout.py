"""CuTe-style hierarchical layouts and hidet-style layout constructors.

A :class:`Layout` is a pair of *IntTuples* -- a ``shape`` and a congruent ``stride`` -- and
is a function from coordinates to indices (offsets into a 1-D array).  An IntTuple is either
an ``int`` or a (possibly nested) ``tuple`` of IntTuples, e.g. ``6``, ``(2,)``, ``(4, 3)``,
``(3, (6, 2), 8)``.

Evaluation follows CuTe exactly.  Every layout accepts three kinds of coordinate, all ordered
*colexicographically* (the leftmost entry varies fastest):

* a 1-D index ``i`` with ``0 <= i < size(layout)``;
* an R-D coordinate, a tuple with one entry per top-level mode (``R == rank(layout)``); an
  entry may itself be a 1-D index into a hierarchical mode;
* an h-D (hierarchical) coordinate, congruent to the shape.

The index is the inner product of the (hierarchical) coordinate with the stride.

>>> L = Layout((2, (2, 2)), (4, (2, 1)))
>>> L
(2,(2,2)):(4,(2,1))
>>> [L(i) for i in range(size(L))]
[0, 4, 2, 6, 1, 5, 3, 7]
>>> L(1, 2), L((1, (0, 1)))
(5, 5)

The layout algebra (``coalesce``, ``composition``, ``complement``, ``logical_divide``,
``logical_product``, ``make_layout``) follows CuTe's definitions and admissibility
conditions; inadmissible inputs raise :class:`ValueError`.

hidet-style constructors (``row_major``, ``column_major``, ``strided_layout``) return plain
:class:`Layout` objects: hidet's ``row_major(m, n)`` is the CuTe layout ``(m,n):(n,1)``.  For
R-D coordinates hidet's indexing ``layout[c0, ..., c_{R-1}]`` and CuTe's ``layout(c0, ...,
c_{R-1})`` agree, so ``Layout.__call__`` serves both; :meth:`Layout.index_of` is the strict
hidet-style entry point.  ``Layout.__mul__`` is hidet's layout product ``outer * inner``
(not CuTe composition, which is :func:`composition` / :meth:`Layout.compose`).

This module is self-contained: it imports nothing from the rest of the project.
"""
from __future__ import annotations

import numbers
from typing import Any, Iterator, Optional, Sequence, Tuple, Union

__all__ = [
    "IntTuple", "Layout", "Tiler",
    "size", "rank", "depth", "cosize", "flatten",
    "make_layout", "coalesce", "composition", "complement", "logical_divide", "logical_product",
    "row_major", "column_major", "strided_layout",
]

IntTuple = Union[int, Tuple[Any, ...]]
"""An ``int`` or a (possibly nested) tuple of IntTuples, e.g. ``(3, (6, 2), 8)``."""

Tiler = Union["Layout", int, Tuple[Any, ...], None]
"""Second argument of composition / divide / product: a Layout, an int ``n`` (meaning the
layout ``n:1``), ``None`` (keep that mode unchanged), or a tuple of tilers applied by-mode."""


# ----------------------------------------------------------------------------------------
# IntTuple helpers
# ----------------------------------------------------------------------------------------

def _is_int(x: Any) -> bool:
    """True for Python / numpy integers, False for bool and everything else."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _normalize(t: Any, what: str) -> IntTuple:
    """Convert lists to tuples and numpy ints to int; reject anything else."""
    if _is_int(t):
        return int(t)
    if isinstance(t, (tuple, list)):
        return tuple(_normalize(e, what) for e in t)
    raise TypeError(f"{what} must be an int or a (nested) tuple of ints, got "
                    f"{type(t).__name__} {t!r}")


def _congruent(a: IntTuple, b: IntTuple) -> bool:
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(
            _congruent(x, y) for x, y in zip(a, b))
    return not isinstance(b, tuple)


def _flat(t: Any) -> tuple:
    """Flatten a nested tuple into a tuple of leaves (a leaf stays a 1-tuple)."""
    if isinstance(t, (tuple, list)):
        out: list = []
        for e in t:
            out.extend(_flat(e))
        return tuple(out)
    return (t,)


def _product(t: IntTuple) -> int:
    p = 1
    for v in _flat(t):
        p *= v
    return p


def _depth(t: IntTuple) -> int:
    if isinstance(t, tuple):
        return 1 + max((_depth(e) for e in t), default=0)
    return 0


def _unflatten(flat: Sequence[int], profile: IntTuple) -> IntTuple:
    """Rebuild a nested tuple with the structure of ``profile`` from its leaves."""
    it = iter(flat)

    def build(p: IntTuple) -> IntTuple:
        if isinstance(p, tuple):
            return tuple(build(e) for e in p)
        return next(it)

    return build(profile)


def _fmt(t: IntTuple) -> str:
    if isinstance(t, tuple):
        return "(" + ",".join(_fmt(e) for e in t) + ")"
    return str(t)


def _compact_col_major(shape: IntTuple) -> IntTuple:
    """CuTe's default ("LayoutLeft") stride: exclusive prefix products of the leaves."""
    strides = []
    acc = 1
    for s in _flat(shape):
        strides.append(acc)
        acc *= s
    return _unflatten(strides, shape)


def _get_path(x: Any, path: Sequence[int], what: str) -> Any:
    """``get<I0, I1, ...>(x)`` for a Layout or an IntTuple."""
    for i in path:
        if not _is_int(i):
            raise TypeError(f"mode index must be an int, got {type(i).__name__} {i!r}")
        if isinstance(x, Layout):
            x = x[int(i)]
        elif isinstance(x, tuple):
            if not -len(x) <= i < len(x):
                raise IndexError(f"mode {i} out of range for {what} {_fmt(x)} of rank {len(x)}")
            x = x[i]
        else:
            if i != 0:
                raise IndexError(f"mode {i} out of range for integral {what} {x} (rank 1): "
                                 "expected 0")
    return x


def _as_int_tuple(x: Any, fn: str) -> IntTuple:
    if isinstance(x, Layout):
        return x.shape
    return _normalize(x, f"argument of {fn}()")


# ----------------------------------------------------------------------------------------
# Free functions on IntTuples and Layouts
# ----------------------------------------------------------------------------------------

def size(x: Union["Layout", IntTuple], *modes: int) -> int:
    """Product of all entries of an IntTuple, or ``size(shape(layout))``.

    ``size(x, i, j)`` is CuTe's ``size<i,j>(x)``: the size of ``get<i,j>(x)``.

    >>> size((3, (6, 2), 8)), size(Layout((4, 2), (2, 1))), size((3, (6, 2), 8), 1)
    (288, 8, 12)
    """
    if isinstance(x, Layout):
        return _get_path(x, modes, "layout").size
    return _product(_get_path(_as_int_tuple(x, "size"), modes, "IntTuple"))


def rank(x: Union["Layout", IntTuple], *modes: int) -> int:
    """Number of top-level elements (modes): 1 for an integer, ``len`` for a tuple.

    ``rank(x, i)`` is CuTe's ``rank<i>(x)``.

    >>> rank(6), rank((4, 3)), rank((3, (6, 2), 8)), rank((3, (6, 2), 8), 1)
    (1, 2, 3, 2)
    """
    x = x if isinstance(x, Layout) else _as_int_tuple(x, "rank")
    t = _get_path(x, modes, "layout" if isinstance(x, Layout) else "IntTuple")
    t = t.shape if isinstance(t, Layout) else t
    return len(t) if isinstance(t, tuple) else 1


def depth(x: Union["Layout", IntTuple], *modes: int) -> int:
    """Nesting depth: 0 for an integer, 1 for a tuple of integers, 2 for a tuple containing a
    tuple of integers, and so on.  ``depth(x, i)`` is CuTe's ``depth<i>(x)``.

    >>> depth(6), depth((4, 3)), depth((3, (6, 2), 8)), depth(Layout((2, (2, 2))))
    (0, 1, 2, 2)
    """
    x = x if isinstance(x, Layout) else _as_int_tuple(x, "depth")
    t = _get_path(x, modes, "layout" if isinstance(x, Layout) else "IntTuple")
    t = t.shape if isinstance(t, Layout) else t
    return _depth(t)


def cosize(layout: "Layout", *modes: int) -> int:
    """Size of the codomain: ``layout(size(layout) - 1) + 1`` for non-negative strides.

    Computed as ``1 + sum((s - 1) * |d|)`` over the flattened modes, i.e. one more than the
    largest index the layout produces (when strides are non-negative).

    >>> cosize(Layout((4, 2), (1, 4))), cosize(Layout(8, 2)), cosize(Layout((2, 2), (1, 6)))
    (8, 15, 8)
    """
    if not isinstance(layout, Layout):
        raise TypeError(f"cosize() expects a Layout, got {type(layout).__name__}")
    return _get_path(layout, modes, "layout").cosize


def flatten(x: Union["Layout", IntTuple]) -> Union["Layout", IntTuple]:
    """Remove all nesting: an IntTuple becomes a flat tuple (an int stays an int); a Layout
    becomes a depth <= 1 layout with the same function.

    >>> flatten((3, (6, 2), 8))
    (3, 6, 2, 8)
    >>> flatten(Layout((2, (2, 2)), (4, (2, 1))))
    (2,2,2):(4,2,1)
    """
    if isinstance(x, Layout):
        return x.flatten()
    t = _as_int_tuple(x, "flatten")
    return _flat(t) if isinstance(t, tuple) else t


# ----------------------------------------------------------------------------------------
# Coordinate evaluation
# ----------------------------------------------------------------------------------------

def _crd2idx(coord: Any, shape: IntTuple, stride: IntTuple) -> int:
    """CuTe ``crd2idx`` on ints, without bounds checks (the last mode absorbs overflow)."""
    if isinstance(coord, tuple):
        if isinstance(shape, tuple):
            if len(coord) != len(shape):
                raise ValueError(
                    f"coordinate {_fmt(coord)} has {len(coord)} entries but the shape "
                    f"{_fmt(shape)} has rank {len(shape)}: expected a 1-D index, a coordinate "
                    f"with {len(shape)} entries, or a hierarchical coordinate congruent to the "
                    "shape")
            return sum(_crd2idx(c, s, d) for c, s, d in zip(coord, shape, stride))
        if len(coord) == 1:  # (i,) against an integral mode
            return _crd2idx(coord[0], shape, stride)
        raise ValueError(f"coordinate {_fmt(coord)} has {len(coord)} entries but the mode "
                         f"{shape} is an integer: expected a single index")
    # integral coordinate: colexicographic split over the modes of `shape`
    if isinstance(shape, tuple):
        idx = 0
        n = len(shape)
        for k, (s, d) in enumerate(zip(shape, stride)):
            if k == n - 1:
                idx += _crd2idx(coord, s, d)
            else:
                sz = _product(s)
                idx += _crd2idx(coord % sz, s, d)
                coord //= sz
        return idx
    return coord * stride


def _check_coord(coord: Any, shape: IntTuple, where: str = "") -> Any:
    """Normalise lists to tuples, check entries are ints in range; return the coordinate."""
    if isinstance(coord, (tuple, list)):
        coord = tuple(coord)
        if isinstance(shape, tuple):
            if len(coord) != len(shape):
                raise ValueError(
                    f"coordinate {_fmt(coord)}{where} has {len(coord)} entries but the shape "
                    f"{_fmt(shape)} has rank {len(shape)}: expected a 1-D index, a coordinate "
                    f"with {len(shape)} entries, or a hierarchical coordinate congruent to the "
                    "shape")
            return tuple(_check_coord(c, s, f"{where}[{k}]")
                         for k, (c, s) in enumerate(zip(coord, shape)))
        if len(coord) == 1:
            return (_check_coord(coord[0], shape, where + "[0]"),)
        raise ValueError(f"coordinate {coord!r}{where} has {len(coord)} entries but the mode "
                         f"{shape} is an integer: expected a single index")
    if not _is_int(coord):
        raise TypeError(
            f"coordinate entry{where} must be an int, got {type(coord).__name__} {coord!r}; "
            "use Layout.offset_expr() for symbolic coordinates")
    n = _product(shape)
    if not 0 <= coord < n:
        raise IndexError(f"index {coord}{where} out of range for mode of shape {_fmt(shape)}: "
                         f"expected 0 <= index < {n}")
    return int(coord)


def _idx2crd(idx: int, shape: IntTuple) -> IntTuple:
    """Inverse of the colexicographic 1-D enumeration: 1-D index -> h-D coordinate."""
    if isinstance(shape, tuple):
        out = []
        for s in shape:
            sz = _product(s)
            out.append(_idx2crd(idx % sz, s))
            idx //= sz
        return tuple(out)
    return idx


# ----------------------------------------------------------------------------------------
# Layout
# ----------------------------------------------------------------------------------------

class Layout:
    """A CuTe layout: a ``shape`` IntTuple and a congruent ``stride`` IntTuple.

    ``stride`` defaults to the compact column-major ("LayoutLeft") stride: the exclusive
    prefix products of the flattened shape (a size-1 mode gets the running product, as
    with CuTe's dynamic integers; static CuTe would give it stride 0 -- the function is the
    same).  Shape entries must be positive ints; stride entries are ints (the algebra
    functions additionally require non-negative strides).  Lists are accepted and
    converted to tuples; numpy integers are converted to ``int``.

    Unlike CuTe, evaluation checks bounds: out-of-range coordinates raise ``IndexError``.

    Printing matches CuTe: ``shape:stride`` with nested tuples in parentheses and no spaces.

    >>> Layout((4, 2))
    (4,2):(1,4)
    >>> Layout(8, 2)
    8:2
    >>> L = Layout(((2, 2), 2), ((4, 1), 2))
    >>> [[L(m, n) for n in range(2)] for m in range(4)]
    [[0, 2], [4, 6], [1, 3], [5, 7]]
    """

    __slots__ = ("_shape", "_stride", "_hash")

    def __init__(self, shape: IntTuple, stride: Optional[IntTuple] = None) -> None:
        shape = _normalize(shape, "Layout shape")
        for s in _flat(shape):
            if s < 1:
                raise ValueError(f"Layout shape entries must be positive ints, got {s} in "
                                 f"shape {_fmt(shape)}")
        if stride is None:
            stride = _compact_col_major(shape)
        else:
            stride = _normalize(stride, "Layout stride")
            if not _congruent(shape, stride):
                raise ValueError(f"Layout stride {_fmt(stride)} is not congruent with shape "
                                 f"{_fmt(shape)}: expected the same nesting structure")
        self._shape: IntTuple = shape
        self._stride: IntTuple = stride
        self._hash: Optional[int] = None

    # -- basic properties ------------------------------------------------------------------
    @property
    def shape(self) -> IntTuple:
        """The shape IntTuple.

        >>> Layout((4, (2, 3)), (1, (4, 8))).shape
        (4, (2, 3))
        """
        return self._shape

    @property
    def stride(self) -> IntTuple:
        """The stride IntTuple (congruent with ``shape``).

        >>> Layout((4, 2)).stride
        (1, 4)
        """
        return self._stride

    @property
    def size(self) -> int:
        """Number of coordinates: the product of the shape.

        >>> Layout((4, (2, 3))).size
        24
        """
        return _product(self._shape)

    @property
    def rank(self) -> int:
        """Number of top-level modes (1 for an integral shape).

        >>> Layout((4, (2, 3))).rank, Layout(8).rank
        (2, 1)
        """
        return len(self._shape) if isinstance(self._shape, tuple) else 1

    @property
    def depth(self) -> int:
        """Nesting depth of the shape (0 for an integral shape).

        >>> Layout((4, (2, 3))).depth, Layout((4, 2)).depth, Layout(8).depth
        (2, 1, 0)
        """
        return _depth(self._shape)

    @property
    def cosize(self) -> int:
        """One more than the largest index produced (for non-negative strides).

        >>> Layout((4, 2), (2, 1)).cosize
        8
        """
        return 1 + sum((s - 1) * abs(d) for s, d in zip(_flat(self._shape), _flat(self._stride)))

    @property
    def extents(self) -> Tuple[int, ...]:
        """Size of each top-level mode: the hidet-style (flat) tensor shape.

        >>> (row_major(2, 1) * column_major(2, 2)).extents
        (4, 2)
        """
        if isinstance(self._shape, tuple):
            return tuple(_product(s) for s in self._shape)
        return (self._shape,)

    # -- modes ----------------------------------------------------------------------------
    def __getitem__(self, idx: Union[int, slice, Tuple[int, ...]]) -> "Layout":
        """Sub-layout: ``L[i]`` is CuTe's ``layout<i>(L)``; ``L[i, j]`` is ``layout<i,j>(L)``;
        a slice selects a range of top-level modes.

        >>> L = Layout((4, (2, 3)), (1, (4, 8)))
        >>> L[1], L[1, 0], L[0:1]
        ((2,3):(4,8), 2:4, (4):(1))
        """
        if isinstance(idx, tuple):
            out = self
            for i in idx:
                out = out[i]
            return out
        if isinstance(idx, slice):
            if not isinstance(self._shape, tuple):
                raise TypeError(f"cannot slice the integral layout {self!r}: expected a layout "
                                "with a tuple shape")
            return Layout(self._shape[idx], self._stride[idx])
        if not _is_int(idx):
            raise TypeError(f"Layout index must be an int, a tuple of ints or a slice, got "
                            f"{type(idx).__name__}")
        if isinstance(self._shape, tuple):
            n = len(self._shape)
            if not -n <= idx < n:
                raise IndexError(f"mode {idx} out of range for layout {self!r} of rank {n}")
            return Layout(self._shape[idx], self._stride[idx])
        if idx not in (0, -1):
            raise IndexError(f"mode {idx} out of range for integral layout {self!r}: expected 0")
        return self

    def __iter__(self) -> Iterator["Layout"]:
        """Iterate over the top-level modes.

        >>> list(Layout((4, 2), (2, 1)))
        [4:2, 2:1]
        """
        for i in range(self.rank):
            yield self[i]

    # -- equality / printing ---------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        """Structural equality of shape and stride (not functional equality).

        >>> Layout((4, 2)) == Layout((4, 2), (1, 4)), Layout(8) == Layout((8,))
        (True, False)
        """
        if not isinstance(other, Layout):
            return NotImplemented
        return self._shape == other._shape and self._stride == other._stride

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(("Layout", self._shape, self._stride))
        return self._hash

    def __repr__(self) -> str:
        """CuTe's printed form ``shape:stride``.

        >>> Layout((4, (2, 3)), (1, (4, 8)))
        (4,(2,3)):(1,(4,8))
        """
        return f"{_fmt(self._shape)}:{_fmt(self._stride)}"

    __str__ = __repr__

    # -- evaluation ------------------------------------------------------------------------
    def __call__(self, *coord: Any) -> int:
        """Evaluate the layout (CuTe convention, integers only).

        * ``L(i)`` -- 1-D index, colexicographic over all modes;
        * ``L(c0, c1, ...)`` or ``L((c0, c1, ...))`` -- R-D coordinate, one entry per mode
          (an entry can be a 1-D index into a hierarchical mode, or a nested tuple);
        * a hierarchical coordinate congruent to the shape.

        Raises ``IndexError`` for out-of-range entries and ``TypeError`` for non-int entries
        (use :meth:`offset_expr` for symbolic coordinates).

        >>> L = Layout((2, (2, 2)), (4, (2, 1)))
        >>> L(3), L(1, 1), L((1, (1, 0)))
        (6, 6, 6)
        """
        if len(coord) == 1:
            c = coord[0]
        else:
            c = tuple(coord)
        if isinstance(c, (tuple, list)):
            c = _check_coord(c, self._shape)
        else:
            if not _is_int(c):
                raise TypeError(f"layout index must be an int or a tuple, got "
                                f"{type(c).__name__} {c!r}; use Layout.offset_expr() for "
                                "symbolic coordinates")
            if not 0 <= c < self.size:
                raise IndexError(f"1-D index {c} out of range for layout {self!r}: expected "
                                 f"0 <= index < {self.size}")
            c = int(c)
        return _crd2idx(c, self._shape, self._stride)

    def index_of(self, coord: Sequence[Any]) -> int:
        """hidet-style indexing ``layout[c0, ..., c_{R-1}]``: a coordinate with exactly one
        entry per top-level mode (``R == rank``).

        Same result as ``self(*coord)``: for R-D coordinates hidet's and CuTe's conventions
        coincide (``row_major(m, n).index_of((i, j)) == i * n + j``).  Unlike ``__call__``,
        a bare 1-D index is rejected, since hidet layouts have no 1-D coordinate space.

        >>> c = strided_layout((2, 2, 2), ranks=(0, 2, 1))
        >>> c.index_of((0, 0, 1)), c.index_of((1, 1, 0))
        (2, 5)
        """
        if not isinstance(coord, (tuple, list)):
            raise TypeError(f"index_of() expects a coordinate with {self.rank} entries (one "
                            f"per mode), got {type(coord).__name__} {coord!r}")
        if len(coord) != self.rank:
            raise ValueError(f"index_of() expects a coordinate with {self.rank} entries (one "
                             f"per mode) for layout {self!r}, got {len(coord)}")
        if isinstance(self._shape, tuple):
            return self(tuple(coord))
        return self(coord[0])

    def get_hier_coord(self, idx: int) -> IntTuple:
        """The hierarchical coordinate (congruent to the shape) of 1-D index ``idx``.

        >>> Layout((2, (2, 2))).get_hier_coord(5)
        (1, (0, 1))
        """
        if not _is_int(idx) or not 0 <= idx < self.size:
            raise IndexError(f"1-D index {idx!r} out of range for layout {self!r}: expected an "
                             f"int with 0 <= index < {self.size}")
        return _idx2crd(int(idx), self._shape)

    def offset_expr(self, coord: Any) -> Any:
        """``sum(c_i * d_i)`` for coordinates that may be symbolic expressions.

        Coordinate entries may be any objects supporting ``+`` and ``*`` with ints; they are
        never converted with ``int()``.  Accepted coordinates:

        * a tuple with one entry per top-level mode (an int entry may be a 1-D index into a
          hierarchical mode; a symbolic entry must address a mode with at most one
          flattened sub-mode of size > 1);
        * a tuple with one entry per *flattened* mode (``len(flatten(shape))`` entries), or
          equivalently a hierarchical coordinate congruent to the shape;
        * a single entry, only if the layout has exactly one flattened mode of size > 1.

        Terms with stride 0 are dropped, stride-1 terms are not multiplied, integer terms are
        folded into one constant added last (so ``int + expr`` is never evaluated).  A
        symbolic 1-D index into a multi-mode layout raises ``TypeError`` (it would need
        div/mod).

        >>> Layout((4, 3), (3, 1)).offset_expr((2, 1))
        7
        >>> class S(str):
        ...     def __mul__(self, k): return S(f"{self}*{k}")
        ...     def __add__(self, o): return S(f"{self} + {o}")
        >>> Layout((4, (2, 3)), (1, (4, 8))).offset_expr((S("i"), S("j"), S("k")))
        'i + j*4 + k*8'
        """
        if isinstance(coord, list):
            coord = tuple(coord)
        shape, stride = self._shape, self._stride
        terms: list = []
        if isinstance(coord, tuple) and isinstance(shape, tuple) and len(coord) != len(shape):
            flat_c = _flat(coord)
            flat_s = _flat(shape)
            if len(flat_c) != len(flat_s):
                raise ValueError(
                    f"offset_expr() coordinate has {len(coord)} entries ({len(flat_c)} after "
                    f"flattening) but layout {self!r} has {len(shape)} modes and {len(flat_s)} "
                    "flattened modes: expected one of those counts")
            for c, s, d in zip(flat_c, flat_s, _flat(stride)):
                self._offset_walk(c, s, d, terms)
        else:
            self._offset_walk(coord, shape, stride, terms)
        const = 0
        sym: list = []
        for t in terms:
            if _is_int(t):
                const += int(t)
            else:
                sym.append(t)
        if not sym:
            return const
        acc = sym[0]
        for t in sym[1:]:
            acc = acc + t
        if const != 0:
            acc = acc + const
        return acc

    def _offset_walk(self, coord: Any, shape: IntTuple, stride: IntTuple, terms: list) -> None:
        if isinstance(coord, list):
            coord = tuple(coord)
        if isinstance(coord, tuple):
            if isinstance(shape, tuple):
                if len(coord) != len(shape):
                    raise ValueError(f"coordinate entry {coord!r} has {len(coord)} entries but "
                                     f"the mode {_fmt(shape)} has rank {len(shape)}")
                for c, s, d in zip(coord, shape, stride):
                    self._offset_walk(c, s, d, terms)
                return
            if len(coord) == 1:
                self._offset_walk(coord[0], shape, stride, terms)
                return
            raise ValueError(f"coordinate entry {coord!r} has {len(coord)} entries but the "
                             f"mode {shape} is an integer: expected a single index")
        if _is_int(coord):
            c = _check_coord(coord, shape)
            terms.append(_crd2idx(c, shape, stride))
            return
        # size-1 leaves always get coordinate 0, so they do not count as modes here
        leaves = [(s, d) for s, d in zip(_flat(shape), _flat(stride)) if s != 1]
        if len(leaves) > 1:
            raise TypeError(
                f"symbolic 1-D index {coord!r} into the multi-mode (sub)layout "
                f"{_fmt(shape)}:{_fmt(stride)} would need div/mod: pass one coordinate entry "
                f"per flattened mode ({len(_flat(shape))} entries) instead")
        d = leaves[0][1] if leaves else 0
        if d == 0:
            return
        terms.append(coord if d == 1 else coord * d)

    # -- structure helpers -----------------------------------------------------------------
    def flatten(self) -> "Layout":
        """Same function with all nesting removed (depth <= 1).

        >>> Layout((4, (2, 3)), (1, (4, 8))).flatten()
        (4,2,3):(1,4,8)
        """
        if isinstance(self._shape, tuple):
            return Layout(_flat(self._shape), _flat(self._stride))
        return self

    def is_row_major(self) -> bool:
        """True if evaluating R-D coordinates gives hidet's row-major formula over
        :attr:`extents` (``index = c0*E1*...*E_{R-1} + ... + c_{R-1}``).

        Hierarchical modes are allowed as long as they are compact inside (colexicographic);
        strides of extent-1 (sub)modes are ignored, as numpy does for contiguity flags.

        >>> row_major(3, 4).is_row_major(), column_major(3, 4).is_row_major()
        (True, False)
        """
        ext = self.extents
        modes = list(self)
        bases = [1] * len(ext)
        for i in range(len(ext) - 2, -1, -1):
            bases[i] = bases[i + 1] * ext[i + 1]
        return all(_mode_is_compact(m, b) for m, b in zip(modes, bases))

    def is_column_major(self) -> bool:
        """True if evaluating R-D coordinates gives hidet's column-major formula over
        :attr:`extents` (``index = c0 + c1*E0 + ...``), i.e. the layout is, as a function,
        CuTe's compact LayoutLeft over its extents.

        >>> column_major(3, 4).is_column_major(), Layout((3, 4)).is_column_major()
        (True, True)
        """
        ext = self.extents
        bases = []
        acc = 1
        for e in ext:
            bases.append(acc)
            acc *= e
        return all(_mode_is_compact(m, b) for m, b in zip(list(self), bases))

    def numpy_strides(self, itemsize: int) -> Tuple[int, ...]:
        """Byte strides of a numpy array with this layout's (depth <= 1) shape.

        ``np.lib.stride_tricks.as_strided(buf, shape, layout.numpy_strides(buf.itemsize))``
        views a 1-D buffer ``buf`` so that ``view[c] == buf[layout(c)]``.  Raises
        ``ValueError`` for hierarchical layouts (numpy has no nested dimensions).

        >>> row_major(2, 3).numpy_strides(4)
        (12, 4)
        """
        if not _is_int(itemsize) or itemsize < 1:
            raise ValueError(f"itemsize must be a positive int, got {itemsize!r}")
        if self.depth > 1:
            raise ValueError(f"numpy_strides() needs a layout of depth <= 1, got {self!r} of "
                             f"depth {self.depth}; flatten() or coalesce() it first")
        return tuple(int(d) * int(itemsize) for d in _flat(self._stride))

    # -- algebra ---------------------------------------------------------------------------
    def compose(self, other: Tiler) -> "Layout":
        """CuTe functional composition ``self o other`` (see :func:`composition`).

        >>> Layout(20, 2).compose(Layout((5, 4), (4, 1)))
        (5,4):(8,2)
        """
        return composition(self, other)

    def __mul__(self, inner: "Layout") -> "Layout":
        """hidet's layout product ``outer * inner`` (``self`` is the outer layout).

        ``h(c) = outer(c // s_inner) * size(inner) + inner(c % s_inner)`` element-wise over
        the R modes, so ``h.extents`` is the element-wise product of the extents.  As a CuTe
        layout, mode ``i`` of ``h`` is ``(inner_i, outer_i * size(inner))`` (inner part
        first: colexicographic), coalesced by mode.  ``n_g`` is ``size(inner)`` as in hidet's
        definition ("the number of elements in the inner layout"); for the compact layouts
        hidet builds this equals ``cosize(inner)``, while a non-compact inner layout would
        make replicas overlap or leave gaps.  The product is associative, not commutative.

        >>> d = row_major(2, 1) * column_major(2, 2)
        >>> d, d.extents, [d(i, 0) for i in range(4)]
        (((2,2),2):((1,4),2), (4, 2), [0, 1, 4, 5])
        """
        if not isinstance(inner, Layout):
            return NotImplemented
        if self.rank != inner.rank:
            raise ValueError(f"hidet layout product needs layouts of the same rank: outer "
                             f"{self!r} has rank {self.rank}, inner {inner!r} has rank "
                             f"{inner.rank}")
        n = inner.size
        modes = []
        for f, g in zip(self, inner):
            scaled = Layout(f.shape, _scale(f.stride, n))
            modes.append(coalesce(make_layout(g, scaled)))
        if not isinstance(self._shape, tuple) and not isinstance(inner._shape, tuple):
            return modes[0]
        return make_layout(*modes)


def _scale(t: IntTuple, k: int) -> IntTuple:
    if isinstance(t, tuple):
        return tuple(_scale(e, k) for e in t)
    return t * k


def _mode_is_compact(mode: Layout, base: int) -> bool:
    acc = base
    for s, d in zip(_flat(mode.shape), _flat(mode.stride)):
        if s != 1 and d != acc:
            return False
        acc *= s
    return True


# ----------------------------------------------------------------------------------------
# Layout algebra
# ----------------------------------------------------------------------------------------

def make_layout(*layouts: Layout) -> Layout:
    """Concatenate layouts as the modes of a new layout (CuTe ``make_layout(L0, L1, ...)``).

    >>> make_layout(Layout(4, 1), Layout((2, 3), (4, 8)))
    (4,(2,3)):(1,(4,8))
    """
    for k, a in enumerate(layouts):
        if not isinstance(a, Layout):
            raise TypeError(f"make_layout() argument {k} must be a Layout, got "
                            f"{type(a).__name__} {a!r}; build layouts from a shape and stride "
                            "with Layout(shape, stride)")
    return Layout(tuple(a.shape for a in layouts), tuple(a.stride for a in layouts))


def _coalesce_flat(shapes: Sequence[int], strides: Sequence[int]) -> Layout:
    rs: list = []
    rd: list = []
    for s, d in zip(shapes, strides):
        if s == 1:
            continue
        if rs and rs[-1] * rd[-1] == d:
            rs[-1] *= s
        else:
            rs.append(s)
            rd.append(d)
    if not rs:
        return Layout(1, 0)
    if len(rs) == 1:
        return Layout(rs[0], rd[0])
    return Layout(tuple(rs), tuple(rd))


def coalesce(layout: Layout, profile: Optional[IntTuple] = None) -> Layout:
    """Simplify a layout without changing it as a function of 1-D indices.

    The result has the same size, depth <= 1, and merges adjacent modes ``s0:d0, s1:s0*d0``
    into ``s0*s1:d0`` and drops size-1 modes (all size-1 gives ``1:0``).  With a tuple
    ``profile`` coalescing is applied by-mode at the terminals of the profile (CuTe's
    ``coalesce(layout, trg_profile)``), preserving the top-level rank.

    >>> coalesce(Layout((2, (1, 6)), (1, (6, 2))))
    12:1
    >>> coalesce(Layout((2, (1, 6)), (1, (6, 2))), (1, 1))
    (2,6):(1,2)
    """
    if not isinstance(layout, Layout):
        raise TypeError(f"coalesce() expects a Layout, got {type(layout).__name__}")
    if profile is not None and isinstance(profile, (tuple, list)):
        profile = tuple(profile)
        if len(profile) > layout.rank:
            raise ValueError(f"coalesce() profile {profile!r} has {len(profile)} modes but "
                             f"layout {layout!r} has rank {layout.rank}: expected at most "
                             f"{layout.rank}")
        modes = [coalesce(layout[i], p) for i, p in enumerate(profile)]
        modes += [layout[i] for i in range(len(profile), layout.rank)]
        return make_layout(*modes)
    return _coalesce_flat(_flat(layout.shape), _flat(layout.stride))


def _shape_div(a: int, b: int, condition: str, context: str) -> int:
    """CuTe ``shape_div`` with the (weak) divisibility check of the static case."""
    if a % b != 0 and b % a != 0:
        raise ValueError(f"{condition} divisibility condition violated in {context}: expected "
                         f"{a} to divide {b} or {b} to divide {a}")
    q = a // b
    return q if q != 0 else 1


def _compose_1d(a: Layout, s: int, d: int) -> Layout:
    """``a o s:d`` for integral ``s``, ``d`` (CuTe ``composition_impl``)."""
    if d == 0:
        return Layout(s, 0)
    if d < 0:
        raise ValueError(f"composition needs non-negative strides in the right operand, got "
                         f"{s}:{d}")
    flat_a = coalesce(a)
    if not isinstance(flat_a.shape, tuple):
        return Layout(s, d * flat_a.stride)
    shapes = list(flat_a.shape)
    strides = list(flat_a.stride)
    ctx = f"composition({a!r}, {s}:{d})"
    # 1. divide the stride d out of the shape of A, from the left
    rest_stride = d
    new_shapes = []
    new_strides = []
    for ai, ei in zip(shapes[:-1], strides[:-1]):
        ai_new = _shape_div(ai, rest_stride, "stride", ctx)
        new_shapes.append(ai_new)
        new_strides.append(ei * (ai // ai_new))
        rest_stride = _shape_div(rest_stride, ai, "stride", ctx)
    # 2. keep the first s elements: "mod out" the shape s, from the left
    rest_shape = s
    kept = []
    for ai in new_shapes:
        kept.append(min(ai, rest_shape))
        rest_shape = _shape_div(rest_shape, ai, "shape", ctx)
    return _coalesce_flat(kept + [rest_shape], new_strides + [rest_stride * strides[-1]])


def _as_tiler_layout(b: Any, fn: str) -> Optional[Layout]:
    if b is None or isinstance(b, Layout):
        return b
    if _is_int(b):
        return Layout(int(b))
    raise TypeError(f"{fn}() tiler must be a Layout, an int, None or a tuple of those, got "
                    f"{type(b).__name__} {b!r}")


def _by_mode(fn, a: Layout, tiler: tuple, name: str) -> Layout:
    if len(tiler) > a.rank:
        raise ValueError(f"{name}() tiler {tiler!r} has {len(tiler)} modes but layout {a!r} "
                         f"has rank {a.rank}: expected at most {a.rank}")
    modes = [fn(a[i], t) for i, t in enumerate(tiler)]
    modes += [a[i] for i in range(len(tiler), a.rank)]
    return make_layout(*modes)


def composition(a: Layout, b: Tiler) -> Layout:
    """CuTe functional composition ``R = a o b``: ``R(c) == a(b(c))`` for every coordinate
    ``c`` of ``b``, and ``R`` has a shape compatible with ``b``.

    ``b`` may be a Layout (1-D composition, distributed over ``b``'s modes), an int ``n``
    (meaning ``n:1``), ``None`` (identity), or a tuple of those (a *tiler*: by-mode
    composition of ``a``'s first modes).  Raises ``ValueError`` when CuTe's stride or shape
    divisibility condition fails (e.g. ``(6,2):(1,6) o 4:1``: 4 and 6 do not divide one
    another).

    >>> composition(Layout((6, 2), (8, 2)), Layout((4, 3), (3, 1)))
    ((2,2),3):((24,2),8)
    >>> composition(Layout((12, (4, 8)), (59, (13, 1))), (Layout(3, 4), Layout(8, 2)))
    (3,(2,4)):(236,(26,1))
    """
    if not isinstance(a, Layout):
        raise TypeError(f"composition() left operand must be a Layout, got {type(a).__name__}")
    if isinstance(b, (tuple, list)):
        return _by_mode(composition, a, tuple(b), "composition")
    bl = _as_tiler_layout(b, "composition")
    if bl is None:
        return a
    if isinstance(bl.shape, tuple):
        return make_layout(*(composition(a, m) for m in bl))
    return _compose_1d(a, bl.shape, bl.stride)


def complement(layout: Layout, cosize_hi: Optional[Union[int, IntTuple]] = None) -> Layout:
    """CuTe ``complement(layout, cotarget)``: the ordered layout ``R`` of the "rest" so that
    ``(layout, R)`` is injective and its cosize is at least ``size(cosize_hi)``.

    ``cosize_hi`` defaults to ``cosize(layout)``; a shape is accepted (its size is used).
    Stride-0 and size-1 modes of ``layout`` are ignored.  Admissibility (else ``ValueError``):
    non-negative strides and, with the modes sorted by stride, each stride is divisible by
    the previous mode's ``shape*stride`` (so the layout is injective and its holes can be
    filled by a layout).

    >>> complement(Layout(4, 2), 24)
    (2,3):(1,8)
    >>> complement(Layout((2, 2), (1, 6)), 24)
    (3,2):(2,12)
    """
    if not isinstance(layout, Layout):
        raise TypeError(f"complement() expects a Layout, got {type(layout).__name__}")
    if cosize_hi is None:
        target = layout.cosize
    elif isinstance(cosize_hi, Layout):
        raise TypeError("complement() cosize_hi must be an int or a shape, got a Layout; "
                        "pass size(...) or cosize(...) explicitly")
    else:
        target = _product(_normalize(cosize_hi, "complement() cosize_hi"))
    if target < 1:
        raise ValueError(f"complement() cosize_hi must be positive, got {target}")
    modes = []
    for s, d in zip(_flat(layout.shape), _flat(layout.stride)):
        if d < 0:
            raise ValueError(f"complement() needs non-negative strides, got {layout!r}")
        if s != 1 and d != 0:
            modes.append((d, s))
    modes.sort()
    rs: list = []
    rd: list = []
    current = 1
    for d, s in modes:
        if d % current != 0:
            raise ValueError(
                f"complement({layout!r}, {target}) is not admissible: with modes sorted by "
                f"stride, stride {d} must be a multiple of the previous shape*stride {current} "
                "(the layout overlaps itself or leaves a hole no layout can fill)")
        rs.append(d // current)
        rd.append(current)
        current = s * d
    rs.append(-(-target // current))
    rd.append(current)
    return _coalesce_flat(rs, rd)


def logical_divide(a: Layout, tiler: Tiler) -> Layout:
    """CuTe ``logical_divide(a, b) = a o (b, complement(b, size(a)))``.

    Mode 0 of the result holds the elements selected by the tile ``b``; mode 1 iterates over
    the tiles.  A tuple ``tiler`` divides ``a``'s modes by-mode; an int ``n`` means ``n:1``;
    ``None`` leaves a mode unchanged.

    >>> logical_divide(Layout((4, 2, 3), (2, 1, 8)), Layout(4, 2))
    ((2,2),(2,3)):((4,1),(2,8))
    """
    if not isinstance(a, Layout):
        raise TypeError(f"logical_divide() left operand must be a Layout, got "
                        f"{type(a).__name__}")
    if isinstance(tiler, (tuple, list)):
        return _by_mode(logical_divide, a, tuple(tiler), "logical_divide")
    b = _as_tiler_layout(tiler, "logical_divide")
    if b is None:
        return a
    return composition(a, make_layout(b, complement(b, a.size)))


def logical_product(a: Layout, tiler: Tiler) -> Layout:
    """CuTe ``logical_product(a, b) = (a, complement(a, size(a)*cosize(b)) o b)``.

    Mode 0 of the result is ``a``; mode 1 places ``size(b)`` unique replicas of ``a``
    ordered by ``b``.  A tuple ``tiler`` applies the product by-mode; an int ``n`` means
    ``n:1``; ``None`` leaves a mode unchanged.

    >>> logical_product(Layout((2, 2), (4, 1)), Layout(6, 1))
    ((2,2),(2,3)):((4,1),(2,8))
    """
    if not isinstance(a, Layout):
        raise TypeError(f"logical_product() left operand must be a Layout, got "
                        f"{type(a).__name__}")
    if isinstance(tiler, (tuple, list)):
        return _by_mode(logical_product, a, tuple(tiler), "logical_product")
    b = _as_tiler_layout(tiler, "logical_product")
    if b is None:
        return a
    return make_layout(a, composition(complement(a, a.size * b.cosize), b))


# ----------------------------------------------------------------------------------------
# hidet constructors
# ----------------------------------------------------------------------------------------

def _dims(shape: tuple, fn: str) -> Tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    dims = []
    for k, s in enumerate(shape):
        if not _is_int(s):
            raise TypeError(f"{fn}() dimension {k} must be an int, got {type(s).__name__} "
                            f"{s!r}")
        if s < 1:
            raise ValueError(f"{fn}() dimension {k} must be positive, got {s}")
        dims.append(int(s))
    return tuple(dims)


def row_major(*shape: int) -> Layout:
    """hidet's row-major layout: ``index = c0*s1*...*s_{n-1} + ... + c_{n-1}``.

    Returns the CuTe layout ``(s0,...,s_{n-1}):(s1*...*s_{n-1}, ..., 1)``.  Accepts
    ``row_major(m, n)`` or ``row_major((m, n))``.

    >>> row_major(2, 3), row_major(2, 3)(1, 2)
    ((2,3):(3,1), 5)
    """
    dims = _dims(shape, "row_major")
    strides = [1] * len(dims)
    for i in range(len(dims) - 2, -1, -1):
        strides[i] = strides[i + 1] * dims[i + 1]
    return Layout(dims, tuple(strides))


def column_major(*shape: int) -> Layout:
    """hidet's column-major layout: ``index = c0 + c1*s0 + ... + c_{n-1}*s0*...*s_{n-2}``.

    Returns the CuTe layout ``(s0,...):(1, s0, s0*s1, ...)`` (CuTe's default LayoutLeft).

    >>> column_major(2, 3), column_major(2, 3)(1, 2)
    ((2,3):(1,2), 5)
    """
    dims = _dims(shape, "column_major")
    return Layout(dims)


def strided_layout(shape: Sequence[int], ranks: Optional[Sequence[int]] = None) -> Layout:
    """hidet's strided layout: ``ranks[i]`` is the position of dimension ``i`` in the order
    from the slowest-changing (rank 0) to the fastest-changing (rank n-1) dimension.

    ``ranks=[0, 1, ..., n-1]`` (the default) is row-major; ``[n-1, ..., 0]`` column-major.

    >>> strided_layout([2, 2, 2], ranks=[0, 2, 1])
    (2,2,2):(4,1,2)
    """
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"strided_layout() shape must be a list or tuple of ints, got "
                        f"{type(shape).__name__}")
    dims = _dims(tuple(shape), "strided_layout")
    n = len(dims)
    if ranks is None:
        ranks = list(range(n))
    ranks = list(ranks)
    if len(ranks) != n or sorted(ranks) != list(range(n)) or not all(_is_int(r) for r in ranks):
        raise ValueError(f"strided_layout() ranks must be a permutation of 0..{n - 1} (one per "
                         f"dimension of shape {list(dims)}), got {ranks}")
    order = sorted(range(n), key=lambda i: ranks[i])  # slowest ... fastest
    strides = [0] * n
    acc = 1
    for i in reversed(order):
        strides[i] = acc
        acc *= dims[i]
    return Layout(dims, tuple(strides))
