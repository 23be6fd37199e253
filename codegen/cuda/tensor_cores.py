"""The CUDA step ``cuda_tensor_cores``: loop nests that are warp MMAs, written lane by lane.

A loop nest inside a kernel is printed as tensor-core instructions when it is, for every
lane of a warp, exactly what ``mma.sync.m16n8k16`` computes for that lane
(:mod:`codegen.cuda.mma`), repeated over tiles::

    lane (the loop bound to threadIdx.x, extent 32)
      for t... (tile loops, each moving the A tile or the B tile, not both)
        for v in 0..4:  for k in 0..16:
          acc[c(lane, v)] += f32(A[a0 + row(lane, v) * lda + k]) * f32(B[b0 + k * ldb + col(lane, v)])

with ``A`` and ``B`` float16 (or both bfloat16) tiles in shared memory (B either K x N or
N x K row-major), ``acc`` float32 in registers, ``row``/``col`` the accumulator fragment
layout; the matching (:func:`loopnest.transforms.tensorize.match_mma`) evaluates every index
at every point of the nest. IREval and LLVM run the nest as written; here it becomes one
``ldmatrix`` per A tile and per B tile and one ``mma.sync`` per (A tile, B tile) pair, in
the nest's order. A nest that does not match is printed as ordinary per-lane code (correct,
without tensor cores) -- unless ``nest.tensorize`` declared it: then the build stops with a
``BuildError`` naming the mismatch. The step records what it matched;
``LOOPNEST_DUMP_PASSES=1`` prints it.

A nest declared ``tensorize(..., "wgmma_m64nNk16")`` is matched as Hopper's warpgroup MMA
instead (:mod:`loopnest.transforms.tensorize_wgmma`, inside a threadIdx.y loop of the 4 warps
of a warpgroup; blocks of 32 x 4 threads) and printed, on sm_90a, as one ``wgmma.mma_async``
per MMA with shared-memory descriptors (:mod:`codegen.cuda.wgmma_source`).

>>> from codegen import build
>>> from codegen.cuda.mma_matmul import mma_matmul_example
>>> ex = mma_matmul_example(128, 128, 64)
>>> k = build(ex.nest, ex.args, target="cuda")
>>> print(k.module.plan.describe_tensor_cores())
kernel k0_C: 1 warp MMA nest(s)
  m16n8k16 f16: 8 A tile(s) (As, ld 40), 16 B tile(s) (Bs K x N, ld 136), 64 mma.sync per nest
>>> "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in k.source
True
"""
from __future__ import annotations

from te.expr import IntImm
from te.layout import Layout
from te.queries import uses_var
from te.simplify import is_const_int, simplify
from loopnest.stmt import Block, Cond, For, ForKind, Store, iter_stmts
from loopnest.transforms.tensorize import MmaMatch, NotAnMma, match_mma
from loopnest.transforms.tensorize_wgmma import match_wgmma

from ..kernel import BuildError
from .ir_queries import extent
from .mma import LDMATRIX_OPERANDS, ldmatrix_row_address, mma_spec
from .mma_source import fragment_index, layout_c_expr
from .memory import align_shared
from .wgmma import SWIZZLE_ATOM_BYTES, SWIZZLE_MODES
from .wgmma_source import WGMMA_GUARD, wgmma_function

__all__ = ["MmaNest", "plan_tensor_cores", "match_mma_nest", "print_mma_nest", "print_wgmma_nest", "needs_proxy_fence"]

#: a matched nest (``loopnest.transforms.tensorize.MmaMatch``)
MmaNest = MmaMatch


def _flat_index(buf, indices):
    return indices[0] if indices else IntImm(0)


def match_mma_nest(loop: For, lane, scope) -> MmaNest | None:
    """The :class:`MmaNest` that ``loop`` of a prepared nest (inside the threadIdx.x loop of
    ``lane``) is, or None. ``scope(buffer)`` is a buffer's memory scope."""
    try:
        return match_mma(loop, lane, _flat_index, scope)
    except NotAnMma:
        return None


_NOT_A_WARP = ("the 32 lanes of a warp do not reach it together (it must be inside a threadIdx.x loop of 32 "
               "iterations, outside branches and loops whose bounds depend on the lane)")


def plan_tensor_cores(plan) -> None:
    """Record in ``plan.mma`` (id(loop) -> :class:`MmaNest`) every nest of every kernel that
    is a warp MMA (see the module docstring); refuse a nest ``tensorize`` declared
    (``plan.tensorized``) that is not one."""
    for k in plan.kernels:
        _walk(plan, k, k.region, None)
    # a declared nest is printed when it is one, or lies inside a larger nest that is one
    # (a loop around it, moved inside the warp by a reorder, made a tile loop of the MMA)
    done = {f.var for m in plan.mma.values() for f in iter_stmts(m.root) if isinstance(f, For)}
    for var, intrinsic in plan.tensorized.items():
        if var not in done:
            spilled = list(dict.fromkeys(p.buffer.name for p in plan.placements.values() if p.spilled))
            hint = (f" ({', '.join(spilled)} moved to global memory: the kernel's shared buffers need more than "
                    f"{plan.max_shared} bytes; use smaller tiles, or a larger max_shared_bytes)" if spilled else "")
            raise BuildError(f"loop {var.name} was tensorized as {intrinsic}, but the CUDA backend cannot print it "
                             f"with tensor cores: {plan.mma_refusals.get(var, _NOT_A_WARP)}{hint}")


def _runs_from_zero(s: For, n: int) -> bool:
    e = extent(s)
    return isinstance(e, IntImm) and e.value == n and isinstance(s.start, IntImm) and s.start.value == 0


def _match_wgmma(plan, kernel, s: For, lane, warp, intrinsic: str):
    """The warpgroup MMA that ``s`` is (:mod:`loopnest.transforms.tensorize_wgmma`): its
    threads must be whole warpgroups -- blocks of 32 x 4 threads (x, y), ``lane`` and
    ``warp`` bound to them."""
    if warp is None:
        raise NotAnMma("the warpgroup MMA must be inside a loop bound to threadIdx.y with 4 iterations (the warps "
                       "of a warpgroup) around the threadIdx.x loop of 32")
    block = tuple(b.value if isinstance(b, IntImm) else b for b in kernel.block[:2])
    if block != (32, 4):
        raise NotAnMma(f"the kernel's blocks are {block[0]} x {block[1]} threads (x, y); a warpgroup MMA needs "
                       "32 x 4, so that threadIdx.z numbers the warpgroups")
    return match_wgmma(s, lane, warp, _flat_index, plan.scope, intrinsic)


def _walk(plan, kernel, s, lane, warp=None) -> None:
    if isinstance(s, Block):
        for x in s.stmts:
            _walk(plan, kernel, x, lane, warp)
        return
    if isinstance(s, For):
        if s.kind == ForKind.GPU_THREAD and s.axis == 0:
            _walk(plan, kernel, s.body, s.var if _runs_from_zero(s, 32) else None, warp)
            return
        if s.kind == ForKind.GPU_THREAD and s.axis == 1:
            _walk(plan, kernel, s.body, lane, s.var if _runs_from_zero(s, 4) else None)
            return
        if lane is not None and s.kind in (ForKind.SERIAL, ForKind.UNROLLED):
            intrinsic = plan.tensorized.get(s.var, "mma_m16n8k16")
            try:
                if intrinsic.startswith("wgmma"):
                    m = _match_wgmma(plan, kernel, s, lane, warp, intrinsic)
                else:
                    m = match_mma(s, lane, _flat_index, plan.scope, intrinsic)
            except NotAnMma as exc:
                plan.mma_refusals[s.var] = str(exc)
            else:
                plan.mma[id(s)] = m
                plan.mma_by_kernel.setdefault(kernel.name, []).append(m)
                if getattr(m, "swizzled_buffers", None):
                    align_shared(plan, kernel, m.swizzled_buffers, SWIZZLE_ATOM_BYTES)
                return
        # mma.sync needs the whole warp: nothing under a loop whose trip count differs per lane
        diverges = lane is not None and uses_var([s.start, s.stop], lane)
        _walk(plan, kernel, s.body, None if diverges else lane, warp)
        return
    if isinstance(s, Cond):   # a branch may leave lanes out: no MMA inside one
        lane = None
    for child in ("then", "otherwise", "body"):
        sub = getattr(s, child, None)
        if sub is not None:
            _walk(plan, kernel, sub, lane, warp)


# ------------------------------------------------------------------------------------
# printing
# ------------------------------------------------------------------------------------
def _load_operand(em, nest: MmaNest, operand: str, origin, lane: str) -> str:
    """Declare and load one operand fragment (``operand``: ``"A"``, ``"B_kn"``, ``"B_nk"``, or
    ``"B_kn_pair"``/``"B_nk_pair"`` for two B tiles) of the tile at ``origin``; returns the
    register array's name. 16-bit operands come with one ldmatrix; tf32 ones element by
    element from the fragment layout, rounded to tf32."""
    buf, ld = (nest.a, nest.lda) if operand == "A" else (nest.b, nest.ldb)
    base = em.expr(origin, True)
    r = em.tmp("ma" if operand == "A" else "mb")
    if nest.dtype == "tf32":
        spec = mma_spec("m16n8k8", "tf32")
        frag = spec.a if operand == "A" else spec.b
        em.emit(f"unsigned {r}[{frag.values}];")
        for v in range(frag.values):
            ix = fragment_index(frag, v, ld, lane, swap=operand == "B_nk")
            em.emit(f"{r}[{v}] = tc_to_tf32({em.elem(buf, f'{base} + {ix}')});")
        return r
    num, trans, shape, steps = LDMATRIX_OPERANDS[operand]
    em.emit(f"unsigned {r}[{num}];")
    # an ldmatrix row is 16 bytes: 8 16-bit elements, or 16 8-bit ones (float8: columns twice as far)
    per_row = 16 // buf.dtype.itemsize
    rows = ldmatrix_row_address(operand, ld) if per_row == 8 else \
        Layout(shape, tuple(dr * ld + dc * per_row // 8 for dr, dc in steps))
    row = layout_c_expr(rows, lane)
    em.emit(f"tc_ldmatrix_x{num}{'_trans' if trans else ''}({r}, &{em.elem(buf, f'{base} + {row}')});")
    return r


def _side_by_side(nest: MmaNest, i: int) -> bool:
    """Whether B tiles ``i`` and ``i + 1`` are eight columns apart (one ``x4`` loads both)."""
    if nest.dtype not in ("f16", "bf16") or i + 1 >= len(nest.b_tiles):
        return False
    step = 8 if nest.b_storage == "B_kn" else 8 * nest.ldb
    return is_const_int(simplify(nest.b_tiles[i + 1] - nest.b_tiles[i]), step)


def _load_b_operands(em, nest: MmaNest, lane: str) -> list:
    """The register arrays of the B tiles, in order; tiles eight columns apart share one
    ``ldmatrix.x4`` (``B_kn_pair``/``B_nk_pair``) whose registers 2-3 are the second's."""
    regs, i = [], 0
    while i < len(nest.b_tiles):
        if _side_by_side(nest, i):
            r = _load_operand(em, nest, nest.b_storage + "_pair", nest.b_tiles[i], lane)
            regs += [r, f"{r} + 2"]
            i += 2
        else:
            regs.append(_load_operand(em, nest, nest.b_storage, nest.b_tiles[i], lane))
            i += 1
    return regs


def print_mma_nest(em, nest: MmaNest, plain) -> None:
    """Print ``nest`` with the CUDA emitter ``em``: ldmatrix and mma.sync on sm_80 and later
    (sm_89 for float8), ``plain()`` (the nest as ordinary per-lane code) elsewhere (older GPUs,
    host emulation)."""
    if getattr(nest, "kind", "mma") == "wgmma":
        print_wgmma_nest(em, nest, plain)
        return
    em.helpers.need("tc_mma")
    lane = em.var(nest.lane)
    arch = 890 if nest.shape == "m16n8k32" else 800
    em.emit(f"#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= {arch}")
    em.emit("{")
    em.indent += 1
    # the warp's lanes read each other's tile elements: what lanes of this warp stored to the
    # tiles (with no barrier, the nest reading only its own) must be visible to the others
    em.emit("__syncwarp();")
    a_regs = [_load_operand(em, nest, "A", origin, lane) for origin in nest.a_tiles]
    b_regs = _load_b_operands(em, nest, lane)
    for ai, bi, accs in nest.mmas:
        refs = ", ".join(em.elem(nest.acc, em.expr(em._private_index(nest.acc, c), True)) for c in accs)
        em.emit(f"tc_mma_{nest.dtype}({refs}, {a_regs[ai]}, {b_regs[bi]});")
    em.indent -= 1
    em.emit("}")
    em.emit("#else")
    plain()
    em.emit("#endif")


def needs_proxy_fence(plan, kernel) -> bool:
    """Whether ``kernel``'s barriers must fence the async proxy: it holds a warpgroup MMA
    whose operands the threads also write with plain stores (``wgmma`` reads shared memory
    through the async proxy; the ``cp.async`` copies, as in CUTLASS's cp.async mainloops,
    need only their wait and the barrier)."""
    operands = {id(b) for m in plan.mma_by_kernel.get(kernel.name, ()) if getattr(m, "kind", "mma") == "wgmma"
                for b in (m.a, m.b)}
    return bool(operands) and any(isinstance(s, Store) and id(s.buffer) in operands and id(s) not in plan.async_copies
                                  for s in iter_stmts(kernel.region))


def print_wgmma_nest(em, nest, plain) -> None:
    """Print a warpgroup MMA nest (:class:`~loopnest.transforms.tensorize_wgmma.WgmmaMatch`):
    on sm_90a a descriptor per operand tile and one ``wgmma.mma_async`` per MMA of the nest,
    fenced, committed and waited for at the end of the nest; ``plain()`` elsewhere."""
    em.helpers.need("tc_wgmma")
    fn, src = wgmma_function(nest.n, nest.dtype, nest.b_major == "MN")
    em.helpers.define(fn, src)
    em.emit(f"#if {WGMMA_GUARD}")
    em.emit("{")
    em.indent += 1
    descs = []
    for tiles, buf, lbo, sbo, swizzle, tag in ((nest.a_tiles, nest.a, nest.a_lbo, nest.a_sbo, nest.a_swizzle, "da"),
                                               (nest.b_tiles, nest.b, nest.b_lbo, nest.b_sbo, nest.b_swizzle, "db")):
        names = []
        mode = f", {SWIZZLE_MODES[swizzle]}" if swizzle else ""
        for origin in tiles:
            d = em.tmp(tag)
            em.emit(f"const unsigned long long {d} = tc_wgmma_desc(&{em.elem(buf, em.expr(origin, True))}, "
                    f"{lbo}, {sbo}{mode});")
            names.append(d)
        descs.append(names)
    em.emit("tc_wgmma_fence();")
    for ai, bi, c0 in nest.mmas:
        acc = em.elem(nest.acc, em.expr(em._private_index(nest.acc, c0), True))
        em.emit(f"{fn}(&{acc}, {descs[0][ai]}, {descs[1][bi]});")
    em.emit("tc_wgmma_commit();")
    em.emit(f"tc_wgmma_wait<{getattr(nest, 'in_flight', 0)}>();")
    em.indent -= 1
    em.emit("}")
    em.emit("#else")
    plain()
    em.emit("#endif")
