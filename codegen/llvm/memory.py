"""Loads and stores of the LLVM printer: element addresses, contiguous vector accesses (a
Ramp index of stride 1), broadcast loads, gathers and scatters (any other vector index, one
scalar access per lane), buffers of vector elements (``float32x4``, stored as consecutive
scalars), streaming stores (``streaming``) and the run-time index checks (``te.expr.IndexCheck``
nodes, placed by ``loopnest.index_checks``). ``em`` is the emitter (``emit._Emitter``): its
``index`` gives an index expression as i64.

>>> from te import Ramp, Var
>>> i = Var("i")
>>> base, stride = ramp_parts(Ramp(i * 4, 1, 8) + Ramp(i, 2, 8))
>>> str(base), stride
('i * 4 + i', 3)
"""
from __future__ import annotations

from llvmlite import ir

from te import expr as E
from te.dtypes import Dtype
from te.expr import Expr, IntImm
from te.functor import Functor
from loopnest.stmt import iter_stmts, stmt_exprs

from ..kernel import BuildError, sanitize_name
from . import lowp
from .fnstate import FnState
from .decls import declare
from .types import (I8, I32, I64, PTR, VOID, intrinsic_suffix, is_bit_float, scalar_storage_type, splat_const,
                    storage_type)

__all__ = ["pointer", "load", "masked_load", "store", "prefetch", "check_index", "index_sites", "ramp_parts", "splat",
           "INDEX_OUT_OF_RANGE"]

#: kernel return codes from this on: the ``IndexCheck`` of site ``code - INDEX_OUT_OF_RANGE``
#: (:func:`index_sites`) failed -- a data-dependent index left that buffer's dimension
INDEX_OUT_OF_RANGE = 1 << 20


def index_sites(root) -> list[tuple[str, int]]:
    """The distinct ``(buffer, dimension)`` of the ``IndexCheck`` nodes under ``root``, in a
    fixed (pre-order) order: a failed check returns ``INDEX_OUT_OF_RANGE`` plus its position,
    so the error names the buffer and dimension.

    >>> from te import Buffer, Var
    >>> from te.expr import IndexCheck
    >>> from loopnest.stmt import For, Store
    >>> H, A = Buffer("H", (4,), "int32"), Buffer("A", (8,), "int32"); i = Var("i")
    >>> index_sites(For(i, 0, 8, Store(H, (IndexCheck(A[i], 4, "H", 0),), 1)))
    [('H', 0)]
    """
    sites: dict = {}
    for s in iter_stmts(root):
        for e in stmt_exprs(s):
            E.walk(e, lambda n: sites.setdefault((n.buffer, n.dim), None) if isinstance(n, E.IndexCheck) else None)
    return list(sites)


def pointer(st: FnState, buf, idx64: ir.Value, component: int = 0) -> ir.Value:
    """The address of element ``idx64`` of ``buf`` (of lane ``component`` of it, for a buffer of
    vector elements, which are stored as ``lanes`` consecutive scalars)."""
    base = st.bufs.get(id(buf))
    if base is None:
        raise BuildError(f"buffer {buf.name} is accessed but has no storage here (not a parameter and not "
                         "allocated by an Allocate in scope)")
    lanes = buf.dtype.lanes
    if lanes > 1:
        idx64 = st.b.mul(idx64, ir.Constant(I64, lanes), flags=("nsw",))
        if component:
            idx64 = st.b.add(idx64, ir.Constant(I64, component), flags=("nsw",))
    return st.b.gep(base, [idx64], inbounds=True, source_etype=scalar_storage_type(buf.dtype))


def load(em, st: FnState, e: E.Load) -> ir.Value:
    """The value of the load ``e`` (one flat index, scalar or vector)."""
    buf = e.buffer
    if len(e.indices) != 1:
        raise BuildError(f"load of {buf.name} has {len(e.indices)} indices; the LLVM backend needs a prepared "
                         "nest (one flat index per access): call nest.prepare_for_codegen()")
    if buf.dtype.lanes != 1:
        return _vector_element_load(em, st, e)
    idx = e.indices[0]
    b = st.b
    edt = buf.dtype
    st_t = scalar_storage_type(edt)
    align = max(1, edt.itemsize)
    if idx.dtype.lanes == 1:
        p = pointer(st, buf, em.index(st, idx))
        return _from_storage(b, edt, b.load(p, typ=st_t, align=align))
    lanes = idx.dtype.lanes
    vdt = edt.with_lanes(lanes)
    ramp = ramp_parts(idx)
    if ramp is not None and ramp[1] == 1:
        p = pointer(st, buf, em.index(st, ramp[0]))
        return _from_storage(b, vdt, b.load(p, typ=storage_type(vdt), align=align))
    if ramp is not None and ramp[1] == 0:
        p = pointer(st, buf, em.index(st, ramp[0]))
        v = _from_storage(b, edt, b.load(p, typ=st_t, align=align))
        return splat(b, v, lanes)
    if ramp is not None and abs(ramp[1]) * lanes < 1 << 31:     # constant offsets from one address
        base = pointer(st, buf, em.index(st, ramp[0]))
        offsets = ir.Constant(ir.VectorType(I32, lanes), [k * ramp[1] for k in range(lanes)])
    else:
        base, offsets = pointer(st, buf, ir.Constant(I64, 0)), em.index(st, idx)
    return _from_storage(b, vdt, _gather(st, buf, base, offsets, storage_type(vdt), align))


def _gather(st: FnState, buf, base: ir.Value, offsets: ir.Value, vtype: ir.VectorType, align: int) -> ir.Value:
    """The elements of ``buf`` (scalar elements) at the vector of element offsets ``offsets``
    from the address ``base``, as one ``llvm.masked.gather`` of every lane: LLVM makes it the
    target's gather instruction where that is fast, else one load per lane (CPUs whose
    gathers are slow are marked so in LLVM; a 4096^2 transpose on AVX-512: 8% faster than a
    load and an insert per lane)."""
    b = st.b
    ptrs = ir.instructions.GEPInstr(b.block, base, [offsets], inbounds=True, name="",
                                    source_etype=scalar_storage_type(buf.dtype))
    ptrs.type = ir.VectorType(base.type, vtype.count)  # a vector of addresses (llvmlite types it scalar)
    b._insert(ptrs)
    mask = ir.VectorType(ir.IntType(1), vtype.count)
    fn = declare(b.module, f"llvm.masked.gather.{intrinsic_suffix(vtype)}.{intrinsic_suffix(ptrs.type)}", vtype,
                 [ptrs.type, I32, mask, vtype])
    return b.call(fn, [ptrs, ir.Constant(I32, align), ir.Constant(mask, [1] * vtype.count),
                       ir.Constant(vtype, ir.Undefined)])


def masked_load(em, st: FnState, e: E.IfThenElse) -> ir.Value:
    """``if_then_else(mask, A[ramp(base, 1, n)], c)`` (``loopnest.legalize_vectors.is_masked_load``)
    as one ``llvm.masked.load``: it reads only the lanes of the mask, the others are ``c``."""
    ld = e.t
    buf = ld.buffer
    b = st.b
    vdt = buf.dtype.with_lanes(e.dtype.lanes)
    vt = storage_type(vdt)
    p = pointer(st, buf, em.index(st, ramp_parts(ld.indices[0])[0]))
    mask = em.expr(st, e.cond)
    other = _to_storage(b, vdt, em.expr(st, e.f))
    fn = declare(b.module, f"llvm.masked.load.{intrinsic_suffix(vt)}.{intrinsic_suffix(p.type)}", vt,
                 [p.type, I32, mask.type, vt])
    return _from_storage(b, vdt, b.call(fn, [p, ir.Constant(I32, max(1, buf.dtype.itemsize)), mask, other]))


def _vector_element_load(em, st: FnState, e: E.Load) -> ir.Value:
    """A load from a buffer of vector elements (``float32x4``): ``<lanes x T>`` read from the
    scalars ``lanes * i ...``; a vector index of ``k`` lanes reads ``k * lanes`` lanes."""
    buf = e.buffer
    b = st.b
    edt = buf.dtype
    lanes = edt.lanes
    st_t = scalar_storage_type(edt)
    align = max(1, edt.itemsize)
    idx = e.indices[0]
    k = idx.dtype.lanes
    vdt = edt.with_lanes(k * lanes)
    ramp = ramp_parts(idx) if k > 1 else (idx, 1)
    if ramp is not None and ramp[1] == 1:     # contiguous
        p = pointer(st, buf, em.index(st, ramp[0]))
        return _from_storage(b, vdt, b.load(p, typ=storage_type(vdt), align=align))
    ivec = em.index(st, idx)
    out = ir.Constant(storage_type(vdt), ir.Undefined)
    for j in range(k):
        ij = b.extract_element(ivec, ir.Constant(I32, j))
        for c in range(lanes):
            v = b.load(pointer(st, buf, ij, c), typ=st_t, align=align)
            out = b.insert_element(out, v, ir.Constant(I32, j * lanes + c))
    return _from_storage(b, vdt, out)


def _vector_element_store(em, st: FnState, buf, idx: Expr, sv: ir.Value):
    """Store the storage-typed value ``sv`` to a buffer of vector elements (see
    ``_vector_element_load``)."""
    b = st.b
    align = max(1, buf.dtype.itemsize)
    lanes = buf.dtype.lanes
    k = idx.dtype.lanes
    ramp = ramp_parts(idx) if k > 1 else (idx, 1)
    if ramp is not None and ramp[1] == 1:
        b.store(sv, pointer(st, buf, em.index(st, ramp[0])), align=align)
        return
    ivec = em.index(st, idx)
    for j in range(k):
        ij = b.extract_element(ivec, ir.Constant(I32, j))
        for c in range(lanes):
            b.store(b.extract_element(sv, ir.Constant(I32, j * lanes + c)), pointer(st, buf, ij, c),
                    align=align)


def check_index(em, st: FnState, e: E.IndexCheck) -> ir.Value:
    """The value of ``e``: its index, after stopping the kernel with ``INDEX_OUT_OF_RANGE``
    plus the check's site (``em.index_sites``) when the index (any of its lanes) is outside
    ``[0, extent)``: one unsigned compare."""
    b = st.b
    iv = em.index(st, e.index)
    count = em.index(st, e.extent)
    if isinstance(iv.type, ir.VectorType):
        n = iv.type.count
        inside = b.icmp_unsigned("<", iv, splat(b, count, n))
        ok = b.icmp_unsigned("==", b.bitcast(inside, ir.IntType(n)), ir.Constant(ir.IntType(n), -1))
    else:
        ok = b.icmp_unsigned("<", iv, count)
    cont = st.fn.append_basic_block(f"{sanitize_name(e.buffer)}_index_ok")
    b.cbranch(ok, cont, st.fail_block(INDEX_OUT_OF_RANGE + em.index_sites[(e.buffer, e.dim)]))
    b.position_at_end(cont)
    t = storage_type(e.dtype)
    return iv if iv.type == t else b.trunc(iv, t)


def store(em, st: FnState, buf, idx: Expr, value: ir.Value, vdt: Dtype):
    """Store ``value`` (the register value of dtype ``vdt``) to ``buf`` at the flat index ``idx``."""
    b = st.b
    if buf.dtype.lanes != 1:
        _vector_element_store(em, st, buf, idx, _to_storage(b, vdt, value))
        return
    align = max(1, buf.dtype.itemsize)
    sv = _to_storage(b, vdt, value)
    if idx.dtype.lanes == 1:
        b.store(sv, pointer(st, buf, em.index(st, idx)), align=align)
        return
    ramp = ramp_parts(idx)
    if ramp is not None and ramp[1] == 1:
        ptr = pointer(st, buf, em.index(st, ramp[0]))
        if id(buf) in em.nt_bufs:
            _streaming_store(em, st, sv, ptr, align, align * idx.dtype.lanes)
        else:
            b.store(sv, ptr, align=align)
        return
    ivec = em.index(st, idx)
    for k in range(idx.dtype.lanes):
        ck = ir.Constant(I32, k)
        b.store(b.extract_element(sv, ck), pointer(st, buf, b.extract_element(ivec, ck)), align=align)


def prefetch(em, st: FnState, buf, idx: Expr, write: bool) -> None:
    """``llvm.prefetch`` of element ``idx`` of ``buf`` into the data cache (for writing when
    ``write``): one per cache line that a contiguous vector index spans, one per lane of any
    other vector index. None to be written into a buffer of streaming stores (they go around
    the caches)."""
    if write and id(buf) in em.nt_bufs:
        return
    from loopnest.target import host_target
    b = st.b
    fn = declare(b.module, "llvm.prefetch.p0", VOID, [PTR, I32, I32, I32])
    hint = [ir.Constant(I32, int(write)), ir.Constant(I32, 3), ir.Constant(I32, 1)]  # keep in all levels; data
    lanes = idx.dtype.lanes
    ramp = ramp_parts(idx) if lanes > 1 else (idx, 0)
    if ramp is not None and ramp[1] in (0, 1):
        first = pointer(st, buf, em.index(st, ramp[0]))
        span = buf.dtype.itemsize * buf.dtype.lanes * (lanes if ramp[1] else 1)
        line = host_target().line_bytes
        ptrs = [first] + [b.gep(first, [ir.Constant(I64, at)], inbounds=True, source_etype=I8)
                          for at in range(line, span, line)]
    else:
        ivec = em.index(st, idx)
        ptrs = [pointer(st, buf, b.extract_element(ivec, ir.Constant(I32, k))) for k in range(lanes)]
    for p in ptrs:
        b.call(fn, [p] + hint)


#: the widest streaming store x86 has (``vmovntps`` of a zmm register, 64 bytes), and the
#: narrowest vector one (an xmm register, 16 bytes)
STREAMING_ALIGN, STREAMING_CHUNK = 64, 16


def _streaming_store(em, st: FnState, value: ir.Value, ptr: ir.Value, align: int, nbytes: int) -> None:
    """Store the vector ``value`` (``nbytes`` bytes) at ``ptr`` around the caches: whole where
    ``ptr`` is aligned to the vector (to ``STREAMING_ALIGN`` bytes for wider ones), in
    16-byte streaming stores where it is 16-byte aligned (numpy's large arrays start 16 bytes
    into a page), else as a plain store. A streaming store LLVM cannot prove aligned becomes
    8-byte ``movnti`` stores of general registers on x86 (an element-wise chain on AVX-512:
    1.2x slower than the 16-byte pieces); the address tests are predictable branches."""
    b = st.b
    want = min(nbytes & -nbytes, STREAMING_ALIGN)        # the largest power of two dividing the size
    if want <= align:
        _nontemporal(em, b.store(value, ptr, align=align))
        return
    if want < STREAMING_CHUNK:          # no vector streaming store this narrow
        b.store(value, ptr, align=align)
        return
    address = b.ptrtoint(ptr, I64)
    plain_bb, done_bb = st.fn.append_basic_block("cached"), st.fn.append_basic_block("stored")
    sizes = (want, STREAMING_CHUNK) if want > STREAMING_CHUNK else (want,)
    for size in sizes:
        stream_bb = st.fn.append_basic_block("stream")
        next_bb = plain_bb if size == sizes[-1] else st.fn.append_basic_block("unaligned")
        low = b.and_(address, ir.Constant(I64, size - 1))
        b.cbranch(b.icmp_unsigned("==", low, ir.Constant(I64, 0)), stream_bb, next_bb)
        b.position_at_end(stream_bb)
        if size == want:
            _nontemporal(em, b.store(value, ptr, align=want))
        else:               # 16-byte pieces
            lanes, etype = value.type.count, value.type.element
            per = size * lanes // nbytes
            for k in range(0, lanes, per):
                part = b.shuffle_vector(value, ir.Constant(value.type, None),
                                        ir.Constant(ir.VectorType(I32, per), list(range(k, k + per))))
                at = b.gep(ptr, [ir.Constant(I64, k)], inbounds=True, source_etype=etype)
                _nontemporal(em, b.store(part, at, align=size))
        b.branch(done_bb)
        b.position_at_end(next_bb)
    b.store(value, ptr, align=align)
    b.branch(done_bb)
    b.position_at_end(done_bb)


def _nontemporal(em, inst) -> None:
    inst.set_metadata("nontemporal", em.module.add_metadata([ir.Constant(I32, 1)]))


class _RampParts(Functor):
    """``visit(e)``: ``(base, stride)`` with an int stride when the vector index ``e`` is affine
    in the lane (lane ``k`` is ``base + k * stride``), else None."""

    def visit_Ramp(self, e: E.Ramp):
        return (e.base, e.stride.value) if isinstance(e.stride, IntImm) else None

    def visit_Broadcast(self, e: E.Broadcast):
        return (e.value, 0)

    def visit_Add(self, e: E.Add):
        pa, pb = self.visit(e.a), self.visit(e.b)
        if pa is None or pb is None:
            return None
        return (E.Add(pa[0], pb[0]), pa[1] + pb[1])

    def visit_Sub(self, e: E.Sub):
        pa, pb = self.visit(e.a), self.visit(e.b)
        if pa is None or pb is None:
            return None
        return (E.Sub(pa[0], pb[0]), pa[1] - pb[1])

    def visit_Mul(self, e: E.Mul):
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if isinstance(y, E.Broadcast) and isinstance(y.value, IntImm):
                px = self.visit(x)
                if px is not None:
                    return (E.Mul(px[0], y.value), px[1] * y.value.value)
        return None

    def generic(self, e: Expr):
        return None


ramp_parts = _RampParts().visit


def _to_storage(b: ir.IRBuilder, dt: Dtype, v: ir.Value) -> ir.Value:
    """Register value -> memory representation."""
    if dt.is_bool:
        return b.zext(v, storage_type(dt))
    if is_bit_float(dt) and dt.kind != "tf32":
        return lowp.encode(b, v, lowp.format_name(dt), store=True)
    return v


def _from_storage(b: ir.IRBuilder, dt: Dtype, v: ir.Value) -> ir.Value:
    """Memory representation -> register value."""
    if dt.is_bool:
        return b.icmp_unsigned("!=", v, splat_const(v.type, 0))
    if is_bit_float(dt) and dt.kind != "tf32":
        return lowp.decode(b, v, lowp.format_name(dt))
    return v


def splat(b: ir.IRBuilder, v: ir.Value, lanes: int) -> ir.Value:
    """``v`` in every lane of a ``lanes``-wide vector."""
    vt = ir.VectorType(v.type, lanes)
    if isinstance(v, ir.Constant):
        return ir.Constant(vt, [v] * lanes)
    one = b.insert_element(ir.Constant(vt, ir.Undefined), v, ir.Constant(I32, 0))
    return b.shuffle_vector(one, ir.Constant(vt, ir.Undefined), ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))
