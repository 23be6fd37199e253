"""Hopper's warpgroup MMA (``wgmma.mma_async``, sm_90a): an exact CPU model of its accumulator
fragment, of the shared-memory operand layouts its descriptors describe, and of the
descriptors themselves.

A *warpgroup* is four consecutive warps (128 threads). ``wgmma.mma_async.m64nNk16`` computes
``D(64 x N) += A(64 x 16) * B(16 x N)`` with A and B read from shared memory through 64-bit
*matrix descriptors* and D held in registers, ``N / 2`` float32 values per thread:
thread ``t`` (warp ``t / 32``, lane ``t % 32``) holds value ``v`` at row
``16 * warp + lane / 4 + 8 * ((v / 2) % 2)`` and column ``8 * (v / 4) + 2 * (lane % 4) + v % 2``
(:func:`acc_coord`; CuTe's ``((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512))`` over the
column-major 64 x N tile, :func:`acc_layout`, which the tests compare with it).

The operands lie in shared memory in a *canonical layout*. Without swizzling
("interleaved") it is made of *core matrices*: eight rows of 16 bytes, stored contiguously
(128 bytes). A K-major operand (A as M x K, or B as N x K: k contiguous) has a core matrix
per 8 rows x 8 k (16-bit types); an MN-major one (B as K x N: n contiguous, the ``trans-b``
form, 16-bit types only) per 8 k x 8 n. The descriptor gives the distance in bytes between
core matrices along K (the *leading* byte offset, LBO) and along M or N (the *stride*
byte offset, SBO) -- :func:`canonical_offset`::

    K-major:  byte(r, k) = (r % 8) * 16 + (r / 8) * SBO + (k % 8) * 2 + (k / 8) * LBO
    MN-major: byte(k, n) = (k % 8) * 16 + (k / 8) * LBO + (n % 8) * 2 + (n / 8) * SBO

With 128-byte swizzling (:data:`SWIZZLE_128B`) the unit is a 1024-byte *atom*: eight rows of
128 bytes, each row 64 elements along the contiguous dimension (K for a K-major operand, N
for an MN-major one), and the 16-byte chunk ``c`` of row ``r`` stored at chunk ``c ^ r``:
on the absolute shared-memory address, bits 4-6 are XORed with bits 7-9 (:func:`swizzled`),
so the atoms must be 1024-byte aligned. SBO is the distance between groups of eight rows;
for an MN-major operand LBO is the distance between atoms along N (unused for K-major,
whose 16 k of one instruction lie inside a row: the start address moves 32 bytes per k step)::

    K-major:  byte(r, k) = (r % 8) * 128 + (r / 8) * SBO + (k % 64) * 2 + (k / 64) * LBO
    MN-major: byte(k, n) = (k % 8) * 128 + (k / 8) * SBO + (n % 64) * 2 + (n / 64) * LBO

tf32 (``m64nNk8``, 4-byte elements) takes both operands K-major only: a core matrix is 8
rows of 4 elements, an atom row 32 elements, and one instruction's 8 of K are again 32 bytes.

A row of 128 bytes is one contiguous row of a K-major tile 64 elements deep (or of an
MN-major tile's 64 columns): a warp copies whole rows of global memory into whole rows of
the atom, which ``cp.async`` needs to run at full speed (interleaved core matrices scatter
each 128-byte row of global memory over eight core matrices: about a third of the speed).

:func:`descriptor` packs a start address and the two offsets (bits 0-13: address / 16,
16-29: LBO / 16, 32-45: SBO / 16, 62-63: swizzle mode, 1 for 128 bytes); :func:`warpgroup_mma` decodes
descriptors against a shared-memory image and computes what the instruction does, so the
code the CUDA backend prints from the same functions is checked against a plain matmul on
every machine (and on a GPU by ``tests/gpu``).

>>> acc_coord(0, 0), acc_coord(37, 5), acc_coord(127, 63)
((0, 0), (17, 11), (63, 127))
>>> canonical_offset("K", 9, 10, lbo=128, sbo=256)     # row 9: core matrix 1; k 10: core matrix 1
404
>>> hex(descriptor(1024, lbo=128, sbo=256))
'0x1000080040'
"""
from __future__ import annotations

import numpy as np

from te.layout import Layout

from .mma import round_operand

__all__ = ["WARPGROUP", "WGMMA_K", "WGMMA_DTYPE_K", "WGMMA_N", "SWIZZLE_128B", "SWIZZLE_ATOM_BYTES", "SWIZZLE_MODES",
           "acc_coord", "acc_layout", "acc_values", "canonical_offset", "swizzled", "descriptor", "decode_descriptor",
           "descriptor_swizzle", "warpgroup_mma", "tile_offsets"]

WARPGROUP = 128
#: the k extent of one 16-bit wgmma
WGMMA_K = 16
#: operand type -> the k extent of one wgmma (32 bytes of K: tf32 takes 8)
WGMMA_DTYPE_K = {"f16": 16, "bf16": 16, "tf32": 8}
#: operand type -> bytes per element
_ITEMSIZE = {"f16": 2, "bf16": 2, "tf32": 4}
#: the N extents of ``wgmma.m64nNk16``
WGMMA_N = tuple(range(8, 257, 8))
#: the 128-byte swizzle (descriptor mode 1): its atom is 8 rows of 128 bytes
SWIZZLE_128B = 128
#: the bytes of a 128-byte swizzle's atom (8 rows), and the alignment it needs
SWIZZLE_ATOM_BYTES = 1024
#: swizzle in bytes -> the descriptor's mode (bits 62-63)
SWIZZLE_MODES = {0: 0, SWIZZLE_128B: 1}


def acc_values(n: int) -> int:
    """float32 accumulator values per thread of ``m64n{n}k16``.

    >>> acc_values(256)
    128
    """
    if n not in WGMMA_N:
        raise ValueError(f"wgmma's N must be a multiple of 8 from 8 to 256, got {n}")
    return n // 2


def acc_coord(thread, v):
    """``(row, col)`` in the 64 x N tile of accumulator value ``v`` of warpgroup thread
    ``thread`` (0..127); ints or integer arrays.

    >>> acc_coord(4, 2)            # warp 0, lane 4: row 1, and value 2 adds 8 rows
    (9, 0)
    """
    warp, lane = thread // 32, thread % 32
    return 16 * warp + lane // 4 + 8 * ((v // 2) % 2), 8 * (v // 4) + 2 * (lane % 4) + v % 2


def acc_layout(n: int) -> Layout:
    """The CuTe thread-value layout of the accumulators: ``(thread, value)`` to the
    column-major index into the 64 x ``n`` tile.

    >>> acc_layout(16)
    ((4,8,4),(2,2,2)):((128,1,16),(64,8,512))
    """
    return Layout(((4, 8, 4), (2, 2, acc_values(n) // 4)), ((128, 1, 16), (64, 8, 512)))


def canonical_offset(major: str, row, col, lbo: int, sbo: int, itemsize: int = 2, swizzle: int = 0):
    """Byte offset of element ``(row, col)`` in a canonical layout, before any swizzle (see
    :func:`swizzled`): for ``major="K"`` the operand is MN x K (``row`` in M or N, ``col``
    in K); for ``"MN"`` it is K x N (``row`` in K, ``col`` in N). ``swizzle``: 0
    (interleaved core matrices) or 128 (rows of 128-byte atoms).

    >>> canonical_offset("MN", 9, 10, lbo=128, sbo=256)   # k 9: core matrix 1 along K; n 10: 1 along N
    404
    >>> canonical_offset("MN", 9, 70, lbo=8192, sbo=1024, swizzle=128)   # k 9: row 1 of atom 1; n 70: atom 1
    9356
    """
    if swizzle == SWIZZLE_128B:
        per = 128 // itemsize       # elements in a 128-byte atom row
        if major not in ("K", "MN"):
            raise ValueError(f"major must be 'K' or 'MN', got {major!r}")
        # rows (M or N for K-major, K for MN-major) of 128 bytes along the contiguous dimension
        return (row % 8) * 128 + (row // 8) * sbo + (col % per) * itemsize + (col // per) * lbo
    if swizzle != 0:
        raise ValueError(f"swizzle must be 0 or {SWIZZLE_128B}, got {swizzle!r}")
    per = 16 // itemsize            # elements in a 16-byte core-matrix row
    if major == "K":
        return (row % 8) * 16 + (row // 8) * sbo + (col % per) * itemsize + (col // per) * lbo
    if major == "MN":
        return (row % 8) * 16 + (row // 8) * lbo + (col % per) * itemsize + (col // per) * sbo
    raise ValueError(f"major must be 'K' or 'MN', got {major!r}")


def tile_offsets(major: str, rows: int, cols: int, itemsize: int = 2):
    """``(lbo, sbo)`` of a dense ``rows x cols`` tile in the interleaved layout, its core
    matrices ordered K fastest: a K-major M x K tile puts the K / 8 core matrices of each
    eight rows side by side; an MN-major K x N tile puts those of each eight columns.

    >>> tile_offsets("K", 128, 64)        # 8 core matrices of 128 bytes per 8 rows
    (128, 1024)
    >>> tile_offsets("MN", 64, 256)       # K x N: 8 core matrices along K per 8 columns
    (128, 1024)
    """
    per = 16 // itemsize
    k = cols if major == "K" else rows
    if rows % 8 or cols % 8 or k % per:
        raise ValueError(f"a {rows} x {cols} tile is not made of whole core matrices")
    return 128, 128 * (k // per if major == "K" else k // 8)


def swizzled(address, swizzle: int = SWIZZLE_128B):
    """Where the tensor cores find byte ``address`` (absolute, in shared memory) of a
    ``swizzle``-byte swizzled operand: for 128, bits 4-6 XOR bits 7-9 (the 16-byte chunk of
    a 128-byte row XOR the row's place in its 1024-byte atom); ints or integer arrays.

    >>> swizzled(0x3a0), swizzled(0x3a0, 0)      # row 7 of an atom, chunk 2: stored at chunk 5
    (976, 928)
    """
    if swizzle == 0:
        return address
    if swizzle != SWIZZLE_128B:
        raise ValueError(f"swizzle must be 0 or {SWIZZLE_128B}, got {swizzle!r}")
    return address ^ (((address >> 7) & 7) << 4)


def descriptor(address: int, lbo: int, sbo: int, swizzle: int = 0) -> int:
    """The 64-bit matrix descriptor of an operand at shared-memory byte ``address`` with the
    given byte offsets (multiples of 16, below 2**18), interleaved (``swizzle=0``) or in
    128-byte swizzled atoms (``swizzle=128``).

    >>> decode_descriptor(descriptor(4096, 128, 2048))
    (4096, 128, 2048)
    >>> descriptor_swizzle(descriptor(4096, 16, 1024, swizzle=128))
    128
    """
    for name, x in (("address", address), ("lbo", lbo), ("sbo", sbo)):
        if x % 16 or not 0 <= x < 1 << 18:
            raise ValueError(f"descriptor {name} {x} must be a multiple of 16 below {1 << 18}")
    if swizzle not in SWIZZLE_MODES:
        raise ValueError(f"swizzle must be one of {sorted(SWIZZLE_MODES)}, got {swizzle!r}")
    return (address >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (SWIZZLE_MODES[swizzle] << 62)


def decode_descriptor(desc: int):
    """``(address, lbo, sbo)`` of a descriptor (its swizzle: :func:`descriptor_swizzle`)."""
    return (desc & 0x3FFF) << 4, ((desc >> 16) & 0x3FFF) << 4, ((desc >> 32) & 0x3FFF) << 4


def descriptor_swizzle(desc: int) -> int:
    """The swizzle of a descriptor in bytes (0 or 128); ValueError for the 32- and 64-byte
    modes, which the model does not take."""
    mode = desc >> 62
    for swizzle, m in SWIZZLE_MODES.items():
        if m == mode:
            return swizzle
    raise ValueError(f"descriptor {desc:#x} has swizzle mode {mode}; the model takes modes 0 and 1 (128 bytes)")


def _read(smem: np.ndarray, major: str, desc: int, rows: int, cols: int, dtype: str) -> np.ndarray:
    addr, lbo, sbo = decode_descriptor(desc)
    swizzle = descriptor_swizzle(desc)
    size = _ITEMSIZE[dtype]
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    off = swizzled(addr + canonical_offset(major, r, c, lbo, sbo, size, swizzle), swizzle)
    raw = smem[off[..., None] + np.arange(size)].astype(np.uint32)      # the bytes of each element, little-endian
    bits = sum(raw[..., i] << (8 * i) for i in range(size))
    if dtype == "tf32":
        return bits.astype(np.uint32).view(np.float32)
    bits = bits.astype(np.uint16)
    if dtype == "f16":
        return bits.view(np.float16).astype(np.float32)
    return (bits.astype(np.uint32) << 16).view(np.float32)      # bfloat16: the high half of a float32


def warpgroup_mma(smem, desc_a: int, desc_b: int, acc, n: int, dtype: str = "f16", trans_b: bool = False):
    """What ``wgmma.mma_async.m64n{n}k16.f32.{dtype}.{dtype}`` leaves in the accumulators
    ``acc`` (``(128, n / 2)`` float32, every thread's values) given the shared-memory image
    ``smem`` (uint8) and the two descriptors: A is K-major; B K-major (N x K) or, with
    ``trans_b``, MN-major (K x N, 16-bit types only). The products are summed exactly and
    rounded once to float32 (the ISA leaves the hardware's internal order unspecified).
    ``dtype="tf32"``: ``m64n{n}k8`` on float32 elements, rounded to tf32 (the ISA leaves how
    the low mantissa bits are dropped to the hardware: tests use values tf32 holds exactly).

    >>> rng = np.random.default_rng(0)
    >>> A = rng.integers(-3, 4, (64, 16)).astype(np.float16); B = rng.integers(-3, 4, (16, 8)).astype(np.float16)
    >>> smem = np.zeros(4096, np.uint8)
    >>> r, c = np.meshgrid(range(64), range(16), indexing="ij")
    >>> for (i, j), x in np.ndenumerate(A):
    ...     smem[canonical_offset("K", i, j, 128, 256):][:2] = np.frombuffer(x.tobytes(), np.uint8)
    >>> for (i, j), x in np.ndenumerate(B):
    ...     smem[2048 + canonical_offset("MN", i, j, 128, 256):][:2] = np.frombuffer(x.tobytes(), np.uint8)
    >>> acc = warpgroup_mma(smem, descriptor(0, 128, 256), descriptor(2048, 128, 256), np.zeros((128, 4)), 8,
    ...                     trans_b=True)
    >>> t, v = np.meshgrid(range(128), range(4), indexing="ij")
    >>> D = np.zeros((64, 8)); D[acc_coord(t, v)] = acc
    >>> bool((D == A.astype(np.float64) @ B).all())
    True
    """
    smem = np.asarray(smem, np.uint8)
    values = acc_values(n)
    acc = np.asarray(acc, np.float64)
    if acc.shape != (WARPGROUP, values):
        raise ValueError(f"acc must be (128, {values}), got {acc.shape}")
    if dtype not in WGMMA_DTYPE_K:
        raise ValueError(f"dtype must be 'f16', 'bf16' or 'tf32', got {dtype!r}")
    if dtype == "tf32" and trans_b:
        raise ValueError("the tf32 wgmma reads B K-major only (trans_b=False)")
    k = WGMMA_DTYPE_K[dtype]
    a = _read(smem, "K", desc_a, 64, k, dtype).astype(np.float64)
    b = _read(smem, "MN", desc_b, k, n, dtype) if trans_b else _read(smem, "K", desc_b, n, k, dtype).T
    a, b = round_operand(a, dtype).astype(np.float64), round_operand(b, dtype).astype(np.float64)
    t, v = np.meshgrid(np.arange(WARPGROUP), np.arange(values), indexing="ij")
    rows, cols = acc_coord(t, v)
    return (acc + (a @ b)[rows, cols]).astype(np.float32)
