"""Warp-level MMA fragment layouts of the PTX ISA, and an exact CPU model of ``mma.sync`` and
``ldmatrix``.

A *fragment layout* says which matrix element each of the 32 lanes of a warp holds in each of
its fragment values. It is a CuTe thread-value layout ``(lane, value) -> index``, exactly as
CUTLASS's ``MMA_Traits`` write them (``include/cute/atom/mma_traits_sm80.hpp``): the index is
column-major into CuTe's operand matrix, ``(M, K)`` for A, ``(N, K)`` for B, ``(M, N)`` for C/D.
:meth:`Fragment.coord` turns it into the PTX ISA's ``(row, col)`` of A (M x K), B (K x N) and
C/D (M x N) ("Matrix Fragments for mma.m16n8k16" / "mma.m16n8k8"), and
:func:`ptx_fragment_coord` writes the ISA's own formulas (``groupID = laneid >> 2``,
``threadID_in_group = laneid % 4``) so that the two are checked against each other.

>>> spec = mma_spec("m16n8k16", "f16")
>>> spec.a.tv
((4,8),(2,2,2)):((32,1),(16,8,128))
>>> [spec.a.coord(0, i) for i in range(8)]      # lane 0: a0..a7
[(0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9), (8, 8), (8, 9)]
>>> import numpy as np
>>> A = np.arange(256.0).reshape(16, 16); B = np.ones((16, 8)); C = np.zeros((16, 8))
>>> bool((warp_mma(A, B, C, "m16n8k16", "f16") == (A @ B).astype(np.float32)).all())
True

The model (:func:`warp_mma`) scatters the matrices into the lanes' fragment values, computes
every output value of every lane from the A and B values gathered from whichever lanes hold
them (the exchange the hardware does inside the warp), and gathers D back. It rounds the
inputs to the operand format and the exactly-computed sum once to float32; the ISA leaves the
order and internal precision of the hardware's accumulation unspecified, so a GPU result is
compared with a tolerance (exact for small-integer data).

``ldmatrix`` is modelled from a shared-memory array (:func:`ldmatrix`): lane ``8*j + i``
gives the address of row ``i`` of matrix ``j``; each lane receives, per matrix, one 32-bit
register with two 16-bit elements (:func:`ldmatrix_result_layout`). The row-address rules
that make ``ldmatrix`` produce exactly the A and B fragments are :func:`ldmatrix_row_address`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Sequence, Tuple

import numpy as np

from te import lowprec
from te.layout import Layout

__all__ = ["Fragment", "MmaSpec", "MMA_SPECS", "mma_spec", "ptx_fragment_coord", "round_operand",
           "scatter", "gather", "warp_mma", "mma_fragments", "ldmatrix", "ldmatrix_result_layout",
           "ldmatrix_row_address", "LDMATRIX_OPERANDS", "WARP", "Swizzle",
           "ldmatrix_wavefronts"]

WARP = 32


@dataclass(frozen=True)
class Fragment:
    """One operand's fragment: ``tv`` maps ``(lane, value)`` to the column-major index into
    CuTe's ``cute_shape`` matrix; ``transposed`` is True for B, whose CuTe matrix is (N, K)
    while the PTX ISA's is K x N.

    >>> f = mma_spec("m16n8k8", "tf32").b
    >>> f.shape, f.values, f.coord(5, 1)       # lane 5 = group 1, thread 1: b1 = B[1+4][1]
    ((8, 8), 2, (5, 1))
    """
    operand: str
    tv: Layout
    cute_shape: Tuple[int, int]
    transposed: bool = False
    _owner: Dict[Tuple[int, int], Tuple[int, int]] = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        owner = {}
        for lane in range(WARP):
            for v in range(self.values):
                rc = self.coord(lane, v)
                if rc in owner:
                    raise ValueError(f"fragment {self.operand}: element {rc} is held by both "
                                     f"(lane, value) {owner[rc]} and {(lane, v)}; expected a bijection")
                owner[rc] = (lane, v)
        rows, cols = self.shape
        if len(owner) != rows * cols:
            raise ValueError(f"fragment {self.operand}: {len(owner)} elements held, expected {rows * cols}")
        object.__setattr__(self, "_owner", owner)

    @property
    def values(self) -> int:
        """Fragment values per lane (``size(tv) // 32``)."""
        return self.tv.size // WARP

    @property
    def shape(self) -> Tuple[int, int]:
        """The PTX ISA's (rows, cols) of the operand: M x K, K x N or M x N."""
        r, c = self.cute_shape
        return (c, r) if self.transposed else (r, c)

    def coord(self, lane: int, value: int) -> Tuple[int, int]:
        """The PTX ``(row, col)`` of the element that ``lane`` holds as fragment value ``value``.

        >>> mma_spec("m16n8k16", "bf16").c.coord(31, 3)    # c3 of lane 31: row 7+8, col 2*3+1
        (15, 7)
        """
        idx = self.tv(lane, value)
        x, y = idx % self.cute_shape[0], idx // self.cute_shape[0]
        return (y, x) if self.transposed else (x, y)

    def owner(self, row: int, col: int) -> Tuple[int, int]:
        """The ``(lane, value)`` that holds element ``(row, col)`` (the inverse of :meth:`coord`).

        >>> mma_spec("m16n8k16", "f16").a.owner(8, 9)
        (0, 7)
        """
        return self._owner[(row, col)]

    def table(self) -> np.ndarray:
        """``(32, values, 2)`` int array of the ``(row, col)`` of every lane's values.

        >>> mma_spec("m16n8k16", "f16").b.table()[4].tolist()   # lane 4: b0..b3 = B[0,1,8,9][1]
        [[0, 1], [1, 1], [8, 1], [9, 1]]
        """
        return np.array([[self.coord(l, v) for v in range(self.values)] for l in range(WARP)])


@dataclass(frozen=True)
class MmaSpec:
    """One ``mma.sync`` variant: shape ``m n k``, input format, fragments and the PTX opcode.

    >>> s = mma_spec("m16n8k8", "tf32"); (s.m, s.n, s.k, s.a_regs, s.b_regs)
    (16, 8, 8, 4, 2)
    >>> s.instruction
    'mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32'
    """
    shape: str
    dtype: str
    m: int
    n: int
    k: int
    a: Fragment
    b: Fragment
    c: Fragment
    element_bits: int

    @property
    def instruction(self) -> str:
        """The PTX opcode (A row-major, B column-major, float32 accumulators)."""
        return f"mma.sync.aligned.{self.shape}.row.col.f32.{self.dtype}.{self.dtype}.f32"

    @property
    def a_regs(self) -> int:
        """32-bit registers of A per lane."""
        return self.a.values * self.element_bits // 32

    @property
    def b_regs(self) -> int:
        """32-bit registers of B per lane."""
        return self.b.values * self.element_bits // 32


# (lane, value) -> (M16, N8): CUTLASS's SM80_16x8_Row, the C/D layout of every variant here.
_C_16x8 = Layout(((4, 8), (2, 2)), ((32, 1), (16, 8)))


def _k16(dtype: str) -> MmaSpec:
    a = Fragment("A", Layout(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128))), (16, 16))
    b = Fragment("B", Layout(((4, 8), (2, 2)), ((16, 1), (8, 64))), (8, 16), transposed=True)
    return MmaSpec("m16n8k16", dtype, 16, 8, 16, a, b, Fragment("C", _C_16x8, (16, 8)), 16)


def _tf32() -> MmaSpec:
    a = Fragment("A", Layout(((4, 8), (2, 2)), ((16, 1), (8, 64))), (16, 8))
    b = Fragment("B", Layout(((4, 8), 2), ((8, 1), 32)), (8, 8), transposed=True)
    return MmaSpec("m16n8k8", "tf32", 16, 8, 8, a, b, Fragment("C", _C_16x8, (16, 8)), 32)


MMA_SPECS: Dict[Tuple[str, str], MmaSpec] = {
    ("m16n8k16", "f16"): _k16("f16"),
    ("m16n8k16", "bf16"): _k16("bf16"),
    ("m16n8k8", "tf32"): _tf32(),
}
"""The supported ``(shape, input format)`` variants, all with float32 accumulation."""


def mma_spec(shape: str, dtype: str) -> MmaSpec:
    """The :class:`MmaSpec` of ``shape`` and ``dtype``; ValueError names the supported ones.

    >>> mma_spec("m16n8k16", "f32")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: no mma variant m16n8k16 with f32 inputs: expected one of m16n8k16/f16, ...
    """
    try:
        return MMA_SPECS[(shape, dtype)]
    except KeyError:
        known = ", ".join(f"{s}/{d}" for s, d in MMA_SPECS)
        raise ValueError(f"no mma variant {shape} with {dtype} inputs: expected one of {known}") from None


def ptx_fragment_coord(shape: str, dtype: str, operand: str, lane: int, i: int) -> Tuple[int, int]:
    """The PTX ISA's formula for the ``(row, col)`` of element ``i`` (``a_i``, ``b_i``, ``c_i``)
    of ``lane``, transcribed from "Matrix Fragments for mma.m16n8k16 / mma.m16n8k8".

    Independent of the CuTe layouts of :data:`MMA_SPECS`, which the tests compare with it.

    >>> ptx_fragment_coord("m16n8k16", "f16", "A", 5, 6)   # group 1, thread 1: a6 = A[1+8][2+8]
    (9, 10)
    """
    mma_spec(shape, dtype)
    g, t = lane >> 2, lane % 4
    if operand == "C":
        return (g + 8 * (i >= 2), t * 2 + (i & 1))
    if shape == "m16n8k16":
        if operand == "A":
            return (g + 8 * (i in (2, 3, 6, 7)), t * 2 + (i & 1) + 8 * (i >= 4))
        if operand == "B":
            return (t * 2 + (i & 1) + 8 * (i >= 2), g)
    else:  # m16n8k8 tf32
        if operand == "A":
            return (g + 8 * (i in (1, 3)), t + 4 * (i >= 2))
        if operand == "B":
            return (t + 4 * i, g)
    raise ValueError(f"operand must be 'A', 'B' or 'C', got {operand!r}")


def round_operand(x, dtype: str) -> np.ndarray:
    """``x`` rounded (nearest-even) to the operand format, as float32 values.

    >>> round_operand([1 + 2.0 ** -11, 3.0], "tf32").tolist()
    [1.0, 3.0]
    """
    conv = {"f16": lowprec.to_float16, "bf16": lowprec.to_bfloat16, "tf32": lowprec.round_to_tf32}
    if dtype not in conv:
        raise ValueError(f"operand format must be one of {sorted(conv)}, got {dtype!r}")
    return np.asarray(conv[dtype](np.asarray(x, np.float64)), np.float64).astype(np.float32)


def scatter(frag: Fragment, matrix) -> np.ndarray:
    """The ``(32, values)`` fragment values of every lane for ``matrix`` (the PTX shape).

    >>> scatter(mma_spec("m16n8k16", "f16").c, np.arange(128).reshape(16, 8))[1].tolist()
    [2, 3, 66, 67]
    """
    m = np.asarray(matrix)
    if m.shape != frag.shape:
        raise ValueError(f"operand {frag.operand} must be {frag.shape[0]}x{frag.shape[1]}, "
                         f"got shape {m.shape}")
    t = frag.table()
    return m[t[..., 0], t[..., 1]]


def gather(frag: Fragment, regs) -> np.ndarray:
    """The matrix that the ``(32, values)`` fragment values ``regs`` hold (inverse of :func:`scatter`).

    >>> f = mma_spec("m16n8k8", "tf32").a; M = np.arange(128).reshape(16, 8)
    >>> bool((gather(f, scatter(f, M)) == M).all())
    True
    """
    r = np.asarray(regs)
    t = frag.table()
    out = np.empty(frag.shape, r.dtype)
    out[t[..., 0], t[..., 1]] = r
    return out


def warp_mma(A, B, C, shape: str = "m16n8k16", dtype: str = "f16") -> np.ndarray:
    """``D = A @ B + C`` as one warp's ``mma.sync`` computes it, from the lanes' fragments.

    A (M x K) and B (K x N) are rounded to ``dtype`` first; C (M x N) is float32. Each lane's
    output value ``D[r][c]`` gathers ``A[r][k]`` and ``B[k][c]`` from the (lane, value) that
    holds them, sums the exact products in float64 and rounds once to float32.

    >>> A = np.eye(16); B = np.arange(128.0).reshape(16, 8); C = np.ones((16, 8))
    >>> warp_mma(A, B, C)[2].tolist()
    [17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0]
    """
    spec = mma_spec(shape, dtype)
    a = scatter(spec.a, round_operand(A, dtype))
    b = scatter(spec.b, round_operand(B, dtype))
    c = scatter(spec.c, np.asarray(C, np.float32))
    return gather(spec.c, mma_fragments(spec, a, b, c))


def mma_fragments(spec: MmaSpec, a, b, c) -> np.ndarray:
    """The ``(32, 4)`` D fragment values from the lanes' A, B and C fragment values.

    Per lane and output value ``D[r][col]``, each ``A[r][k]`` and ``B[k][col]`` is read from
    the (lane, value) that holds it: the warp-wide exchange of ``mma.sync``. A and B values
    must already be in the operand format (see :func:`round_operand`).

    >>> s = mma_spec("m16n8k8", "tf32")
    >>> a = scatter(s.a, np.ones((16, 8))); b = scatter(s.b, np.ones((8, 8)))
    >>> mma_fragments(s, a, b, np.zeros((32, 4)))[0].tolist()
    [8.0, 8.0, 8.0, 8.0]
    """
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    c = np.asarray(c, np.float64)
    for frag, regs in ((spec.a, a), (spec.b, b), (spec.c, c)):
        if regs.shape != (WARP, frag.values):
            raise ValueError(f"{frag.operand} fragments must have shape {(WARP, frag.values)}, "
                             f"got {regs.shape}")
    d = np.empty((WARP, spec.c.values), np.float32)
    for lane in range(WARP):
        for v in range(spec.c.values):
            r, col = spec.c.coord(lane, v)
            acc = c[lane, v]
            for k in range(spec.k):
                acc += a[spec.a.owner(r, k)] * b[spec.b.owner(k, col)]
            d[lane, v] = acc
    return d


# ----------------------------------------------------------------------------------------
# ldmatrix
# ----------------------------------------------------------------------------------------

def ldmatrix_result_layout(num: int, trans: bool = False) -> Layout:
    """``(lane, (half, matrix)) -> matrix*64 + row*8 + col``: which element of which 8x8
    matrix each lane receives from ``ldmatrix.m8n8.x{num}[.trans]`` (``half`` 0 is the low
    16 bits of the lane's register for that matrix).

    >>> L = ldmatrix_result_layout(4)
    >>> L
    ((4,8),(2,4)):((2,8),(1,64))
    >>> divmod(L(5, (1, 2)) - 128, 8)       # lane 5, high half of r2: row 1, col 3 of matrix 2
    (1, 3)
    >>> divmod(ldmatrix_result_layout(2, trans=True)(5, (1, 0)), 8)   # transposed: row 3, col 1
    (3, 1)
    """
    if num not in (1, 2, 4):
        raise ValueError(f"ldmatrix loads 1, 2 or 4 matrices, got {num}")
    if trans:
        return Layout(((4, 8), (2, num)), ((16, 1), (8, 64)))
    return Layout(((4, 8), (2, num)), ((2, 8), (1, 64)))


def ldmatrix(smem, row_address: Sequence[int], num: int, trans: bool = False) -> np.ndarray:
    """What ``ldmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16`` gives each lane.

    ``smem`` is shared memory as a 1-D array of 16-bit elements and ``row_address[lane]`` the
    element offset that lane supplies; lanes ``8*j .. 8*j+7`` give the rows of matrix ``j``
    (the other lanes' addresses are not used). Returns ``(32, num, 2)``: per lane, per
    matrix, the low and high element of the received register.

    >>> smem = np.arange(64, dtype=np.uint16)
    >>> ldmatrix(smem, [8 * (l % 8) for l in range(32)], 1)[5].tolist()   # row 1, cols 2-3
    [[10, 11]]
    >>> ldmatrix(smem, [8 * (l % 8) for l in range(32)], 1, trans=True)[5].tolist()
    [[17, 25]]
    """
    s = np.asarray(smem)
    if s.ndim != 1 or s.dtype.itemsize != 2:
        raise ValueError(f"shared memory must be a 1-D array of 16-bit elements, got {s.dtype} {s.shape}")
    layout = ldmatrix_result_layout(num, trans)
    mats = np.empty((num, 8, 8), s.dtype)
    for j in range(num):
        for i in range(8):
            addr = int(row_address[8 * j + i])
            if addr % 8 or not 0 <= addr <= s.size - 8:
                raise ValueError(f"lane {8 * j + i}: row address {addr} must be a multiple of 8 "
                                 f"elements (16 bytes) inside shared memory of {s.size} elements")
            mats[j, i] = s[addr:addr + 8]
    flat = mats.reshape(-1)
    out = np.empty((WARP, num, 2), s.dtype)
    for lane in range(WARP):
        for j in range(num):
            for h in range(2):
                out[lane, j, h] = flat[layout(lane, (h, j))]
    return out


LDMATRIX_OPERANDS = {
    # operand: (matrices, .trans, lane shape, per lane mode the (row, col) step of the address)
    "A": (4, False, (16, 2), ((1, 0), (0, 8))),
    "B_kn": (2, True, (16, 2), ((1, 0), (0, 0))),
    "B_nk": (2, False, (8, 2, 2), ((1, 0), (0, 8), (0, 0))),
    # two B tiles side by side (columns n..n+15) in one x4: registers 0-1 the first, 2-3 the second
    "B_kn_pair": (4, True, (16, 2), ((1, 0), (0, 8))),
    "B_nk_pair": (4, False, (8, 2, 2), ((1, 0), (0, 8), (8, 0))),
}
"""How ldmatrix loads the m16n8k16 fragments: A (16 x 16, row-major in shared memory) with
``x4``; B stored K x N row-major (``B_kn``) with ``x2.trans``; B stored N x K row-major
(``B_nk``, i.e. column-major B) with ``x2``. ``B_kn_pair`` and ``B_nk_pair`` load two B
tiles eight columns apart with one ``x4``: half the instructions. The layouts have (row,
col) pair strides: use :func:`ldmatrix_row_address` for the element offset with a leading
dimension."""


def ldmatrix_row_address(operand: str, ld: int) -> Layout:
    """``lane -> element offset`` of the row that ``lane`` gives to ldmatrix, for an operand
    tile stored row-major with leading dimension ``ld`` (a multiple of 8 elements).

    >>> ldmatrix_row_address("A", 24)          # lane l: row l % 16, column 8 * (l // 16)
    (16,2):(24,8)
    >>> ldmatrix_row_address("B_nk", 16)(9)    # lane 9: row 1, column 8
    24
    """
    if operand not in LDMATRIX_OPERANDS:
        raise ValueError(f"operand must be one of {sorted(LDMATRIX_OPERANDS)}, got {operand!r}")
    if ld % 8:
        raise ValueError(f"leading dimension {ld} must be a multiple of 8 elements: ldmatrix rows "
                         "are 16-byte aligned")
    _, _, shape, steps = LDMATRIX_OPERANDS[operand]
    return Layout(shape, tuple(r * ld + c for r, c in steps))


@dataclass(frozen=True)
class Swizzle:
    """CuTe's ``Swizzle<bits, base, shift>`` on element offsets: the ``bits`` bits above
    ``base + shift`` are XORed into the ``bits`` bits above ``base``.

    ``Swizzle(3, 3, 3)`` on 16-bit elements of 64-element (128-byte) rows permutes each row's
    eight 16-byte chunks by the row index mod 8, so the eight rows of an ldmatrix phase fall
    into distinct banks (see :func:`ldmatrix_wavefronts`). It keeps each 8-element chunk
    contiguous, so a swizzled row address is the swizzle of the unswizzled one.

    >>> sw = Swizzle(3, 3, 3)
    >>> [sw(64 * r) for r in range(4)], sw(64 * 9 + 8 * 2 + 5)    # row 9: chunk 2 -> 2 ^ 1
    ([0, 72, 144, 216], 605)
    """
    bits: int
    base: int
    shift: int

    def __call__(self, offset: int) -> int:
        """The swizzled offset."""
        mask = ((1 << self.bits) - 1) << (self.base + self.shift)
        return offset ^ ((offset & mask) >> self.shift)


def ldmatrix_wavefronts(row_address: Sequence[int], num: int, element_bytes: int = 2) -> int:
    """Shared-memory wavefronts of one ``ldmatrix.x{num}``: each matrix (8 rows of 16 bytes,
    one per lane ``8*j .. 8*j+7``) is one phase over the 32 four-byte banks, and a phase takes
    as many wavefronts as the most distinct rows that share a bank. ``num`` is conflict-free.

    >>> ldmatrix_wavefronts([24 * (l % 16) for l in range(32)], 4)    # rows of 48 bytes
    4
    >>> ldmatrix_wavefronts([64 * (l % 16) for l in range(32)], 4)    # rows of 128 bytes
    32
    """
    total = 0
    for j in range(num):
        rows = {int(row_address[8 * j + i]) * element_bytes for i in range(8)}
        per_group: Dict[int, int] = {}
        for byte in rows:
            group = (byte // 16) % 8          # the four banks that a 16-byte row occupies
            per_group[group] = per_group.get(group, 0) + 1
        total += max(per_group.values())
    return total
