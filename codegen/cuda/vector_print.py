"""How the CUDA emitter prints whole-vector accesses (``codegen.cuda.vectors`` decides them):
chunk references, loads read whole before the lanes, vector stores and copies. Functions of
the emitter ``em`` (a :class:`codegen.cuda.emit.CudaEmitter`).

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> from codegen import build
>>> A = Buffer("A", (64,), "float32")
>>> B = Compute("B", (64,), lambda i: A[i] * 2.0)
>>> nest = LoopNest([B])
>>> _, inner, _ = nest.split_with_tail(nest.get_loops_for(B)[0], 4)
>>> _ = nest.vectorize(inner)
>>> src = build(nest, [A, B], target="cuda").source
>>> "*reinterpret_cast<const float4*>(&b_A[" in src and "*reinterpret_cast<float4*>(&b_B[" in src
True
"""
from __future__ import annotations

from te import expr as E
from loopnest.stmt import Stmt, Store

from .types import c_type
from .vectors import wide_copy_source

__all__ = ["chunk_ref", "hoist_loads", "wide_copy", "wide_store"]


def chunk_ref(em, w, j: int, write: bool, noted: bool = True) -> str:
    """The lvalue of chunk ``j`` of the whole-vector access ``w`` (codegen.cuda.vectors),
    through the host emulation's race check where the emitter notes accesses (``noted``)."""
    vt = em.storage_type(w.buffer.dtype.with_lanes(w.vtype.lanes))
    if w.element_buffer:
        index = em._private_index(w.buffer, w.index)
        ref = em.elem(w.buffer, em.lane(index, j, True) if index.dtype.is_vector else em.expr(index, True))
    else:
        start = em.expr(em._private_index(w.buffer, w.base), True) + (f" + {j * w.vtype.lanes}" if j else "")
        ref = f"*reinterpret_cast<{'' if write else 'const '}{vt}*>(&{em.elem(w.buffer, start)})"
    if not noted:
        return ref
    return em.written(w.buffer, ref) if write else em.read(w.buffer, ref)


def hoist_loads(em, s: Stmt) -> None:
    """Read the whole-vector loads of statement ``s`` (``plan.hoisted``) into arrays."""
    for w, load_ids in em.plan.hoisted.get(id(s), []):
        vt = em.storage_type(w.buffer.dtype.with_lanes(w.vtype.lanes))
        t = em.tmp("e")
        chunks = ", ".join(chunk_ref(em, w, j, False) for j in range(w.chunks))
        em.emit(f"const {vt} {t}[{w.chunks}] = {{{chunks}}};")
        for i in load_ids:
            em._hoisted[i] = t


def wide_copy(em, s: Store) -> bool:
    """Print ``s`` as whole-vector copies when it stores, unchanged, a load of the same
    element type read in the same chunks (``vectors.wide_copy_source``); False otherwise.
    A copy the plan issues asynchronously (``codegen.cuda.async_copy``) is ``cp.async`` on
    sm_80 and later (and deferred until waited for in the host emulation)."""
    if type(s.value) is not E.MakeVector:   # the printer takes scalarized values only (scalarize_vectors)
        return False
    copy = wide_copy_source(em.plan, s)
    if copy is None:
        return False
    w, src = copy
    plain = [f"{chunk_ref(em, w, j, True)} = {chunk_ref(em, src, j, False)};" for j in range(w.chunks)]
    if id(s) not in em.plan.async_copies:
        for line in plain:
            em.emit(line)
        return True
    em.helpers.need("tc_cp_async")
    em.emit("#ifdef TC_CP_ASYNC")
    for j in range(w.chunks):
        em.emit(f"tc_cp_async16(&{chunk_ref(em, w, j, True, False)}, &{chunk_ref(em, src, j, False, False)});")
    em.emit("#else")
    for line in plain:
        em.emit(line)
    em.emit("#endif")
    return True


def wide_store(em, w, values: str, lanes: int) -> None:
    """Store the computed lanes ``values`` as the whole vectors of ``w``."""
    vt = em.storage_type(w.buffer.dtype.with_lanes(w.vtype.lanes))
    em.helpers.need("tc_lanes")
    t = em.tmp("w")
    em.emit(f"{vt} {t}[{w.chunks}];")
    em.emit("#pragma unroll")
    em.emit(f"for (int tc_l = 0; tc_l < {lanes}; ++tc_l) tc_set<{c_type(w.buffer.dtype)}>({t}, tc_l, "
              f"{em._store_value(w.buffer, f'{values}[tc_l]')});")
    for j in range(w.chunks):
        em.emit(f"{chunk_ref(em, w, j, True)} = {t}[{j}];")
