"""CUDA C from a prepared loop nest and its :class:`~codegen.cuda.plan.CudaPlan`.

The decisions are taken by the CUDA steps (``codegen.cuda.passes``: kernel outlining and
launch dimensions, memory scopes and register promotion, barriers and one-thread sections,
kernel arguments with their const / ``__restrict__`` facts); this module prints them.

Kernels
    Each kernel of the plan is one ``__global__`` function, launched in order. Loops of kind
    ``gpu_block`` / ``gpu_thread`` become ``blockIdx`` / ``threadIdx`` (``axis`` 0/1/2 =
    x/y/z); a bound loop starting at ``s`` binds ``v = s + blockIdx.x``, declared in the
    loop variable's own type (``long long`` for int64 variables: the cast comes before any
    arithmetic). Thread loops shorter than the block run under ``if (threadIdx.x <
    extent)``. Unbound loops stay ``for`` loops (``unrolled`` / ``vectorized`` ones get
    ``#pragma unroll``; ``parallel`` runs serially inside the thread).

Semantics (the spec's, exactly)
    Integer ``+ - *`` wrap (done on the unsigned type), ``/`` and ``%`` are C's (with
    ``INT_MIN / -1`` wrapping), floor division/remainder use helpers; index arithmetic
    (inside ``[]`` and loop bounds) is plain C in the index's own type (an int64 index --
    a Cast to int64 before the multiply -- is ``long long`` arithmetic, literals get
    ``LL``). float -> int casts truncate, saturate and give 0 for NaN
    (``te.lowprec.float_to_int``) through explicit comparisons, relying on nothing
    undocumented about ``cvt``. float16/bfloat16/tf32/float8 are stored in their format and
    held in float; their arithmetic arrives as float arithmetic between casts
    (``loopnest.legalize.lower_low_precision``), a cast to the format rounding to nearest
    even. Float ``min``/``max`` arrive as compares and selects
    (``loopnest.legalize.expand_float_min_max``). Math intrinsics map to CUDA's precise
    functions (``expf``, ``rintf`` for round-half-even, ...); the ``__expf``-style fast
    variants only with ``fast_math=True``.
    Vector expressions (Ramp/Broadcast, values of vector dtypes) arrive computed lane by
    lane (``loopnest.legalize_vectors.scalarize_vectors``: the value of a vector store or
    let is a ``make_vector`` of scalar lanes); the lanes initialise a temporary array, then
    are stored (so reads see the values before the store, as in the spec).

Vector accesses
    A buffer of vector elements (``float32x4``, ``float16x2``...) is an array of its CUDA
    vector type (``codegen.cuda.types``: ``float4``, ``__half2``, ``char4`` or a generated
    aligned struct); ``tc_get``/``tc_set`` read and write one lane of such a value. The loads
    and stores that ``codegen.cuda.vectors`` made whole-vector accesses are printed as such:
    the loads into ``const`` arrays of the vector type before the lanes are computed, the
    stores from one after (a vectorized loop over a float32 buffer is a ``float4`` load and
    store when its alignment is provable).

Names
    User names are sanitised (``codegen.kernel.sanitize_name``), made unique and prefixed
    (``v_`` variables, ``b_`` buffers, ``k<n>_`` kernels); generated names start with
    ``tc_``. No user name can collide with a CUDA keyword, builtin or helper.

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> from codegen.kernel import make_params
>>> A = Buffer("A", (8,), "float32")
>>> B = Compute("B", (8,), lambda i: A[i] * 2.0)
>>> nest = LoopNest([B]).prepare_for_codegen()
>>> mod = emit_cuda(nest, make_params(nest, [A, B]), "double")
>>> print(mod.kernels[0].name, mod.kernels[0].grid, mod.kernels[0].block)
k0_double (1, 1, 1) (1, 1, 1)
>>> print(mod.source.split("// k0_double")[1].strip())      # doctest: +NORMALIZE_WHITESPACE
: single-thread kernel: no loop is bound to the GPU
extern "C" __global__ void __launch_bounds__(1) k0_double(const float* __restrict__ b_A, float* b_B) {
  for (int v_i = 0; v_i < 8; ++v_i) {
    b_B[v_i] = (b_A[v_i] * 2.0f);
  }
}
"""
from __future__ import annotations

import dataclasses
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence


from te import expr as E
from te.dtypes import Dtype
from te.expr import Expr, IntImm, Var
from te.functor import Functor
from te.queries import fold_int
from loopnest.legalize import needs_short_circuit
from loopnest.stmt import Allocate, Block, Cond, For, ForKind, Free, LetStmt, Stmt, Store

from ..kernel import BuildError, Param, eval_int_expr, sanitize_name
from .helpers import HelperSet
from .types import c_type, compute_type, storage_type, vector_type
from .ir_queries import AXES, extent
from .memory import private_index
from .outline import MAX_BLOCK_DIMS, MAX_GRID_DIMS, MAX_SHARED_BYTES, MAX_THREADS_PER_BLOCK
from .passes import plan_cuda
from .tensor_cores import needs_proxy_fence, print_mma_nest
from .wgmma_source import WGMMA_GUARD
from .vector_print import chunk_ref, hoist_loads, wide_copy, wide_store
from .plan import ArgRef, CudaPlan, KernelPlan, KernelSpec, launches
from .scalar import (call_text, cast_text, float_literal, int_literal, is_narrow, refuse_low_precision,
                     unsigned_of)

__all__ = ["emit_cuda", "CudaModuleSpec", "KernelSpec", "ArgRef", "c_type", "MAX_THREADS_PER_BLOCK",
           "MAX_SHARED_BYTES", "MAX_BLOCK_DIMS", "MAX_GRID_DIMS"]


@dataclass
class CudaModuleSpec:
    """The emitted module: CUDA C ``source``, its kernels in text order, the global
    buffers (``scratch``) the launcher allocates for the duration of a call, the ``plan`` it
    was printed from (``print(k.module.plan)`` shows the CUDA decisions), and the launch
    ``schedule``: kernel indices and host loops (``plan.HostLoop``), in order; None: each
    kernel once, in order (``launches`` walks it).

    >>> from te import Buffer, Var
    >>> n = Var("n")
    >>> CudaModuleSpec("", [], [Buffer("t", (n, 4), "float32")]).scratch_nbytes({id(n): 3})
    [48]
    """

    source: str
    kernels: list[KernelSpec]
    scratch: list[Any]
    headers: list[str] = field(default_factory=list)
    plan: CudaPlan | None = field(default=None, repr=False)
    index_checks: list[tuple[str, int]] = field(default_factory=list)   # (buffer, dimension) per check code - 1
    schedule: list | None = None

    def launches(self, sizes: dict):
        """Every launch of a call with sizes ``{id(var): int}``, in order: ``(KernelSpec, env)``,
        ``env`` being ``sizes`` with the values of the host loops around the launch (for the
        launch dimensions and the kernel's scalar arguments).

        >>> from te import Var
        >>> from codegen.cuda.plan import HostLoop
        >>> i = Var("i")
        >>> ks = [KernelSpec(f"k{n}", (1, 1, 1), (1, 1, 1), [], 0, False) for n in range(2)]
        >>> mod = CudaModuleSpec("", ks, [], schedule=[0, HostLoop(i, 0, 2, [1])])
        >>> [(k.name, env.get(id(i))) for k, env in mod.launches({})]
        [('k0', None), ('k1', 0), ('k1', 1)]
        """
        schedule = range(len(self.kernels)) if self.schedule is None else self.schedule
        for index, env in launches(schedule, sizes):
            yield self.kernels[index], env

    def scratch_nbytes(self, sizes: dict) -> list[int]:
        """Bytes to allocate for each ``scratch`` buffer for sizes ``{id(var): int}`` (at
        least 1, so every allocation has an address)."""
        return [max(math.prod(eval_int_expr(d, sizes) for d in b.dims) * b.dtype.itemsize * b.dtype.lanes, 1)
                for b in self.scratch]

    @property
    def param_alignment(self) -> dict[int, int]:
        """``{buffer argument index: bytes}``: the alignment the pointers of those arguments
        need (their elements or runs of them are accessed as CUDA vector types)."""
        return dict(self.plan.param_alignment) if self.plan is not None else {}


#: the extern array of a kernel's shared buffers when it takes dynamic shared memory
DYNAMIC_SHARED = "tc_smem"

_CMP = {E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">="}
_ARITH = {E.Add: "+", E.Sub: "-", E.Mul: "*"}
_WRAP_FN = {E.Add: "tc_add", E.Sub: "tc_sub", E.Mul: "tc_mul"}


def _has_index_check(e: Expr) -> bool:
    found = []
    E.walk(e, lambda n: found.append(n) if type(n) is E.IndexCheck else None)
    return bool(found)


class CudaEmitter(Functor):
    """Prints the CUDA C of a :class:`CudaPlan` (use :func:`emit_cuda`): names, types,
    literals, expressions and statements; the decisions come from the plan.

    A :class:`~te.functor.Functor` over expression and statement nodes alike:
    ``visit(e, idx)`` returns the C text of a whole expression (through :meth:`expr`, which
    refuses vector values: their lanes come as ``make_vector`` / ``extract_lane`` from the
    pass ``scalarize_vectors``), ``visit(s)`` appends the lines of a statement.
    ``note_accesses`` (the host emulation's race check, ``codegen.cuda.emulate``) prints each
    read and write of global or shared memory through ``tc_rd*`` / ``tc_wr*``.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> from codegen.kernel import make_params
    >>> A = Buffer("A", (4,), "int64")
    >>> B = Compute("B", (4,), lambda i: A[i] + 1)
    >>> nest = LoopNest([B]).prepare_for_codegen()
    >>> mod = CudaEmitter(plan_cuda(nest, make_params(nest, [A, B]), "inc")).run()
    >>> "b_B[v_i] = tc_add<long long, unsigned long long>(b_A[v_i], 1LL);" in mod.source
    True
    """

    def __init__(self, plan: CudaPlan, *, fast_math: bool = False, note_accesses: bool = False):
        self.plan = plan
        self.fast_math = fast_math
        self.note_accesses = note_accesses    # the host emulation's race check (read / written)
        self.helpers = HelperSet()
        self._names: dict[int, str] = {}
        self._taken: set[str] = set()
        self._tmp = 0
        self.lines: list[str] = []
        self.indent = 0
        self.kernel: KernelPlan | None = None
        self._barriers: Counter = Counter()   # id(stmt) -> __syncthreads() before it, in this kernel
        self._waits_async = False             # this kernel issues cp.async: its barriers wait for them
        self._proxy_fence = False             # its barriers fence the async proxy (a warpgroup MMA's operands)
        self._slices: dict[int, str] = {}     # id(buffer) -> offset of this thread's slice
        self._store_guard: str | None = None  # guard for stores to non-local buffers
        self._hoisted: dict[int, str] = {}    # id(load) -> the array its whole vectors were read into
        self._index_checks: list[tuple[str, int]] = []   # (buffer, dimension) of each check code - 1

    # -- names --------------------------------------------------------------------
    def name_of(self, obj, base: str, prefix: str) -> str:
        key = id(obj)
        n = self._names.get(key)
        if n is None:
            cand = prefix + sanitize_name(base).lstrip("_")
            if cand == prefix:
                cand = prefix + "x"
            n, k = cand, 1
            while n in self._taken:
                n = f"{cand}_{k}"
                k += 1
            self._taken.add(n)
            self._names[key] = n
        return n

    def var(self, v: Var) -> str:
        return self.name_of(v, v.name, "v_")

    def buf(self, b) -> str:
        return self.name_of(b, b.name, "b_")

    def tmp(self, base: str = "t") -> str:
        self._tmp += 1
        return f"tc_{base}{self._tmp}"

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.indent + line)

    # -- types --------------------------------------------------------------------
    def storage_type(self, dt: Dtype) -> str:
        """The C type of an element of a buffer of ``dt``, with what it needs declared."""
        if dt.element.is_lowp_float:
            self.helpers.lowp(dt)
        if dt.is_vector:
            vt = vector_type(dt)
            if vt.builtin:
                self.helpers.header("vector_types.h")      # implicit under nvcc, not in the emulation
            else:
                self.helpers.define(vt.name, vt.definition)
        return storage_type(dt)

    # ==============================================================================
    # expressions
    # ==============================================================================
    def expr(self, e: Expr, idx: bool = False) -> str:
        """C text of the scalar ``e`` in its compute type; ``idx`` marks index arithmetic
        (plain C, no wrapping helpers)."""
        if isinstance(e, Expr) and e.dtype.is_vector:   # other objects: generic
            raise BuildError(f"vector expression `{e}` ({e.dtype}) outside a vector store or let; vector "
                             "values are computed lane by lane (loopnest.legalize_vectors.scalarize_vectors)")
        return self.visit(e, idx)

    def lanes(self, e: Expr) -> str:
        """The C initializer list of the lanes of the value of a vector store or let, a
        ``make_vector`` (the ``scalarize_vectors`` pass)."""
        if type(e) is not E.MakeVector:
            raise BuildError(f"vector value `{e}` ({e.dtype}) reached the CUDA printer unscalarized; build "
                             "through codegen.build or run loopnest.passes.legalize_for_target(nest, 'cuda') first")
        return self.visit(e, False)

    def generic(self, node, *args):
        """Nodes the CUDA backend has no translation for (no ``visit_<Class>``): a BuildError.

        >>> CudaEmitter(None).visit(1.5)          # a Python number, not a te.FloatImm
        Traceback (most recent call last):
        codegen.kernel.BuildError: the CUDA backend cannot emit the expression float: `1.5`
        """
        what = "statement" if isinstance(node, Stmt) else "expression"
        raise BuildError(f"the CUDA backend cannot emit the {what} {type(node).__name__}: `{node}`")

    def visit_Var(self, e: Var, idx):
        return self.var(e)

    def visit_IntImm(self, e, idx):
        return int_literal(e.value, e.dtype)

    def visit_FloatImm(self, e, idx):
        return float_literal(e.value, e.dtype)

    def visit_MakeVector(self, e: E.MakeVector, idx):
        return "{" + ", ".join(self.expr(v, idx) for v in e.values) + "}"

    def visit_ExtractLane(self, e: E.ExtractLane, idx):
        return self.lane(e.value, e.lane, idx)

    def lane(self, v: Expr, k: int, idx: bool = False) -> str:
        """Lane ``k`` of the vector ``v``: of a ramp, a broadcast or a make_vector; an element
        of a vector ``let`` array; a lane of a vector load (:meth:`_lane_load`)."""
        t = type(v)
        if t is E.Ramp:
            return f"({self.expr(v.base, idx)} + ({compute_type(v.dtype)})({k}) * {self.expr(v.stride, idx)})"
        if t is E.Broadcast:
            return self.expr(v.value, idx)
        if t is E.MakeVector:
            return self.expr(v.values[k], idx)
        if t is Var:
            return f"{self.var(v)}[{k}]"
        if t is E.Load:
            return self._lane_load(v, k)
        raise BuildError(f"lane {k} of `{v}` ({v.dtype}): the CUDA printer takes lanes of ramps, broadcasts, "
                         "make_vector, vector let variables and loads only (loopnest.legalize_vectors.scalarize_vectors)")

    def visit_Load(self, e: E.Load, idx):
        if len(e.indices) > 1:
            raise BuildError(f"load of {e.buffer.name} has {len(e.indices)} indices: the CUDA backend "
                             "takes a prepared nest (nest.prepare_for_codegen())")
        dt = e.buffer.dtype
        ix = self.expr(self._private_index(e.buffer, e.indices[0]), True) if e.indices else "0"
        ref = self.read(e.buffer, self.elem(e.buffer, ix))
        if dt.is_lowp_float:
            info = self.helpers.lowp(dt)
            return f"{info[0]}_ld({ref})"
        return ref

    def _lane_load(self, e: E.Load, k: int) -> str:
        """Lane ``k`` of a vector load: of the array it was read whole into before the lanes
        (``self._hoisted``), of the element of a buffer of vector elements it falls in, or
        the scalar at lane ``k`` of the index."""
        dt = e.buffer.dtype
        lane_t = c_type(dt)
        arr = self._hoisted.get(id(e))
        index = self._private_index(e.buffer, e.indices[0]) if e.indices else IntImm(0)
        if arr is not None or dt.is_vector:
            self.helpers.need("tc_lanes")
        if arr is not None:
            ref = f"tc_get<{lane_t}>({arr}, {k})"
        elif not dt.is_vector:
            ref = self.read(e.buffer, self.elem(e.buffer, self.lane(index, k, True)))
        elif index.dtype.is_vector:   # lane k // L of the index, lane k % L of that element
            elem = self.read(e.buffer, self.elem(e.buffer, self.lane(index, k // dt.lanes, True)))
            ref = f"tc_get<{lane_t}>({elem}, {k % dt.lanes})"
        else:
            ref = f"tc_get<{lane_t}>({self.read(e.buffer, self.elem(e.buffer, self.expr(index, True)))}, {k})"
        if dt.is_lowp_float:
            return f"{self.helpers.lowp(dt)[0]}_ld({ref})"
        return ref

    def visit_Let(self, e: E.Let, idx):
        """A chain of lets is one lambda with a local per variable (nested lambdas, one per
        let, make nvcc branch where it would select)."""
        rt = compute_type(e.dtype)
        decls = []
        while isinstance(e, E.Let):
            decls.append(f"const {compute_type(e.value.dtype)} {self.var(e.var)} = {self.expr(e.value, idx)}; ")
            e = e.body
        return f"([&]() -> {rt} {{ {''.join(decls)}return {self.expr(e, idx)}; }}())"

    def visit_Cast(self, e: E.Cast, idx):
        return cast_text(self.helpers, self.expr(e.value, idx), e.value.dtype.element, e.dtype.element)

    def visit_Call(self, e: E.Call, idx):
        return call_text(self.helpers, e, [self.expr(a, idx) for a in e.args], self.fast_math)

    # -- binary operators: the operands' dtype picks the C form ------------------------------
    def _operands(self, e, idx) -> tuple[Dtype, str, str]:
        return e.a.dtype.element, self.expr(e.a, idx), self.expr(e.b, idx)

    @staticmethod
    def _refuse_bool(e, dt: Dtype) -> None:
        if dt.is_bool:
            raise BuildError(f"{type(e).__name__} on bool operands is not supported (`{e}`)")

    def _compare(self, e, idx):
        _, a, b = self._operands(e, idx)
        return f"({a} {_CMP[type(e)]} {b})"

    visit_EQ = visit_NE = visit_LT = visit_LE = visit_GT = visit_GE = _compare

    def _logical(self, e, idx, op: str):
        """Both sides are computed (``&`` / ``|`` on bools: no branch): a scalar right side that
        loads what the left side did not was made an ``if_then_else`` by the ``short_circuit``
        pass (``loopnest.legalize``)."""
        if needs_short_circuit(e):
            raise BuildError(f"the scalar `{e}` loads on its right side and reached the CUDA printer: run "
                             "loopnest.passes.legalize_for_target(nest, 'cuda') first (its short_circuit pass "
                             "evaluates the right side only when needed)")
        _, a, b = self._operands(e, idx)
        return f"({a} {op} {b})"

    def visit_And(self, e, idx):
        return self._logical(e, idx, "&")

    def visit_Or(self, e, idx):
        return self._logical(e, idx, "|")

    def _add_sub_mul(self, e, idx):
        dt, a, b = self._operands(e, idx)
        op = _ARITH[type(e)]
        self._refuse_bool(e, dt)
        if dt.is_float:
            refuse_low_precision(type(e).__name__, dt)
            return f"({a} {op} {b})"
        if idx or (dt.is_uint and not is_narrow(dt)):
            return f"({a} {op} {b})"
        self.helpers.need("tc_wrap")
        return f"{_WRAP_FN[type(e)]}<{compute_type(dt)}, {unsigned_of(dt)}>({a}, {b})"

    visit_Add = visit_Sub = visit_Mul = _add_sub_mul

    def _div_mod(self, e, idx):
        dt, a, b = self._operands(e, idx)
        div = type(e) is E.Div
        self._refuse_bool(e, dt)
        if dt.is_float:
            if not div:
                raise BuildError(f"Mod is not defined on {dt} (`{e}`)")
            refuse_low_precision("Div", dt)
            return f"({a} / {b})"
        # plain C: guard_int_division (loopnest.legalize) leaves no divisor that is 0 or -1
        r = f"({a} {'/' if div else '%'} {b})"
        return f"(({compute_type(dt)}){r})" if is_narrow(dt) else r

    visit_Div = visit_Mod = _div_mod

    def _floor_div_mod(self, e, idx):
        dt, a, b = self._operands(e, idx)
        div = type(e) is E.FloorDiv
        self._refuse_bool(e, dt)
        ct = compute_type(dt)
        if dt.is_float:
            refuse_low_precision(type(e).__name__, dt)
            if div:
                return f"{'floor' if ct == 'double' else 'floorf'}({a} / {b})"
            self.helpers.need("tc_floormodf")
            return f"tc_floormodf({a}, {b})"
        op, narrow = "/" if div else "%", is_narrow(dt)
        if dt.is_uint:
            r = f"({a} {op} {b})"
            return f"(({ct}){r})" if narrow else r
        self.helpers.need("tc_floordiv")
        fn = "tc_floordiv" if div else "tc_floormod"
        if narrow:
            return f"(({ct}){fn}<int>({a}, {b}))"
        return f"{fn}<{ct}>({a}, {b})"

    visit_FloorDiv = visit_FloorMod = _floor_div_mod

    def _min_max(self, e, idx):
        dt, a, b = self._operands(e, idx)
        which = "min" if type(e) is E.Min else "max"
        if dt.is_bool:
            return f"({a} {'&&' if which == 'min' else '||'} {b})"
        if dt.is_float:
            raise BuildError(f"the float {which}imum `{e}` reached the CUDA printer: its NaN and signed-zero rule "
                             "is written out by the expand_float_min_max pass; build through codegen.build or run "
                             "loopnest.passes.legalize_for_target(nest, 'cuda') first")
        self.helpers.need("tc_minmax")
        return f"tc_{which}<{compute_type(dt)}>({a}, {b})"

    visit_Min = visit_Max = _min_max

    def visit_Not(self, e, idx):
        return f"(!{self.expr(e.a, idx)})"

    def visit_IndexCheck(self, e: E.IndexCheck, idx):
        self.helpers.need("tc_check_index")
        site = (e.buffer, e.dim)
        if site not in self._index_checks:
            self._index_checks.append(site)
        code = self._index_checks.index(site) + 1
        return f"tc_check_index({self.expr(e.index, idx)}, (long long)({self.expr(e.extent, True)}), {code}u)"

    def visit_Select(self, e, idx):
        c = self.expr(e.cond, idx)
        t, f = self.expr(e.t, idx), self.expr(e.f, idx)
        if _has_index_check(e.t) or _has_index_check(e.f):
            # select evaluates both sides: an index check in the side not taken still runs
            ct = compute_type(e.dtype)
            return f"([&]() -> {ct} {{ const {ct} tc_t = {t}; const {ct} tc_f = {f}; return {c} ? tc_t : tc_f; }}())"
        return f"({c} ? {t} : {f})"

    def visit_IfThenElse(self, e, idx):
        c = self.expr(e.cond, idx)
        return f"({c} ? {self.expr(e.t, idx)} : {self.expr(e.f, idx)})"

    # ==============================================================================
    # statements
    # ==============================================================================
    def visit_Block(self, s: Block):
        """Siblings, with the plan's barriers before them and its one-thread guards around them."""
        stmts = s.stmts
        i = 0
        while i < len(stmts):
            x = stmts[i]
            for _ in range(self._barriers[id(x)]):
                if self._waits_async:
                    self._async_wait(self.plan.async_waits.get(id(x), 0))
                if self._proxy_fence:
                    # what this thread stored in shared memory, made visible to the tensor cores' reads
                    self.emit(f"#if {WGMMA_GUARD}")
                    self.emit("tc_fence_proxy_async();")
                    self.emit("#endif")
                self.emit("__syncthreads();")
            g = self.kernel.guards.get(id(x)) if self.kernel is not None else None
            if g is None:
                self.visit(x)
                if id(x) in self.plan.async_commits:
                    self._cp_async_only("tc_cp_async_commit();")
                i += 1
                continue
            group = stmts[i:i + g.span]
            if g.whole:
                self.emit(f"if ({g.cond}) {{")
                self.indent += 1
                for y in group:
                    self.visit(y)
                self.indent -= 1
                self.emit("}")
            else:
                saved, self._store_guard = self._store_guard, g.cond
                try:
                    for y in group:
                        self.visit(y)
                finally:
                    self._store_guard = saved
            i += g.span

    def _async_wait(self, n) -> None:
        """The wait for this thread's ``cp.async`` copies before a barrier: all of them
        (``n`` 0), all but the ``n`` newest groups, or none (``n`` None)."""
        if n is not None:
            self._cp_async_only("tc_cp_async_wait_all();" if n == 0 else f"tc_cp_async_wait_group<{n}>();")

    def _cp_async_only(self, line: str) -> None:
        """``line`` where copies are ``cp.async`` (``TC_CP_ASYNC``: sm_80 and later, and the
        host emulation's deferred copies)."""
        self.emit("#ifdef TC_CP_ASYNC")
        self.emit(line)
        self.emit("#endif")

    def visit_Free(self, s: Free):
        pass

    def visit_Allocate(self, s: Allocate):
        b = s.buffer
        p = self.plan.placements[id(b)]
        if p.scope == "global":
            return  # launcher-allocated
        size = p.private_size if p.private_size is not None else b.static_size()
        st = self.storage_type(b.dtype)
        n = self.buf(b)
        if p.scope == "shared" and self.kernel.spec().dynamic_shared:
            self.emit(f"{st}* const {n} = reinterpret_cast<{st}*>({DYNAMIC_SHARED} + {p.offset});")
        elif p.scope == "shared":
            self.emit(f"__shared__ __align__({p.align}) {st} {n}[{max(size, 1) * p.slices}];")
        else:
            self.emit(f"__align__(16) {st} {n}[{max(size, 1)}];")

    def visit_LetStmt(self, s: LetStmt):
        ct = compute_type(s.value.dtype)
        n = self.var(s.var)
        self.emit("{")
        self.indent += 1
        if s.var.dtype.is_vector:
            hoist_loads(self, s)
            self.emit(f"{ct} {n}[{s.var.dtype.lanes}] = {self.lanes(s.value)};")
            self._hoisted.clear()
        else:
            self.emit(f"const {ct} {n} = {self.expr(s.value)};")
        self.visit(s.body)
        self.indent -= 1
        self.emit("}")

    def visit_Cond(self, s: Cond):
        self.emit(f"if ({self.expr(s.cond)}) {{")
        self.indent += 1
        self.visit(s.then)
        self.indent -= 1
        if s.otherwise is not None and s.otherwise.stmts:
            self.emit("} else {")
            self.indent += 1
            self.visit(s.otherwise)
            self.indent -= 1
        self.emit("}")

    def _private_index(self, buf, ix: Expr) -> Expr:
        p = self.plan.placements.get(id(buf))
        if p is None or p.private_size is None:
            return ix
        return private_index(self.kernel, ix, p.private_strides, p.private_slots)

    def elem(self, buf, ix: str) -> str:
        """``buf[ix]``; a shared buffer with one slice per thread of the bound axes is
        offset to the current thread's slice."""
        off = self._slice_offset(buf)
        return f"{self.buf(buf)}[{ix}]" if off is None else f"{self.buf(buf)}[{off} + {ix}]"

    def read(self, buf, ref: str) -> str:
        """``ref``, an element of ``buf`` that is read: with ``note_accesses``, through the host
        emulation's race check when ``buf`` is in global or shared memory."""
        kind = self._noted(buf)
        return ref if kind is None else f"tc_rd{kind}({ref})"

    def written(self, buf, ref: str) -> str:
        """``ref``, an element of ``buf`` that is assigned (see ``read``)."""
        kind = self._noted(buf)
        return ref if kind is None else f"tc_wr{kind}({ref})"

    def _noted(self, buf) -> str | None:
        if not self.note_accesses:
            return None
        scope = self.plan.scope(buf)
        return "s" if scope == "shared" else "g" if scope in ("param", "global") else None

    def _slice_offset(self, buf) -> str | None:
        if id(buf) not in self._slices:
            p = self.plan.placements.get(id(buf))
            if p is not None and p.slice_stride is not None:
                self._slices[id(buf)] = self._global_slice_offset(p)
            if p is None or not p.slice_axes or p.slice_stride is not None:
                return self._slices.get(id(buf))
            terms, stride = [], 1
            for ax, d in zip(p.slice_axes, p.slice_dims):
                terms.append(f"(int)threadIdx.{AXES[ax]}" + ("" if stride == 1 else f" * {stride}"))
                stride *= d
            self._slices[id(buf)] = f"({' + '.join(terms)}) * {max(buf.static_size(), 1)}"
        return self._slices[id(buf)]

    def _global_slice_offset(self, p) -> str:
        """The offset of this block's and thread's slice of a global buffer with one slice per
        block and per thread of ``p.slice_axes`` (``codegen.cuda.memory``)."""
        ll = "(long long)"
        block = f"({ll}blockIdx.x + {ll}gridDim.x * ({ll}blockIdx.y + {ll}gridDim.y * {ll}blockIdx.z))"
        thread, threads = "0", "1"
        for ax in reversed(p.slice_axes):
            thread = f"({ll}threadIdx.{AXES[ax]} + {ll}blockDim.{AXES[ax]} * {thread})"
            threads = f"{ll}blockDim.{AXES[ax]} * {threads}"
        return f"(({block} * {threads} + {thread}) * ({self.expr(p.slice_stride, True)}))"

    def _store_value(self, buf, value: str) -> str:
        dt = buf.dtype
        if dt.is_lowp_float:
            return f"{self.helpers.lowp(dt)[0]}_st({value})"
        return value

    def visit_Store(self, s: Store):
        if len(s.indices) > 1:
            raise BuildError(f"store to {s.buffer.name} has {len(s.indices)} indices: the CUDA backend "
                             "takes a prepared nest (nest.prepare_for_codegen())")
        index = self._private_index(s.buffer, s.indices[0]) if s.indices else IntImm(0)
        lanes = max(index.dtype.lanes, s.value.dtype.lanes)
        guard = self._store_guard if self.plan.scope(s.buffer) != "local" else None
        if guard:
            self.emit(f"if ({guard}) {{")
            self.indent += 1
        if lanes == 1:
            self.emit(f"{self.written(s.buffer, self.elem(s.buffer, self.expr(index, True)))} = "
                      f"{self._store_value(s.buffer, self.expr(s.value))};")
        elif wide_copy(self, s):
            pass
        else:
            # vector store: every lane is computed before any is written
            ct = compute_type(s.value.dtype)
            self.emit("{")
            self.indent += 1
            t = self.tmp("v")
            hoist_loads(self, s)
            self.emit(f"{ct} {t}[{lanes}] = {self.lanes(s.value)};")
            self._hoisted.clear()
            w = self.plan.wide_stores.get(id(s))
            if w is not None:
                wide_store(self, w, t, lanes)
            else:
                for k in range(lanes):
                    ix = self.lane(index, k, True) if index.dtype.is_vector else self.expr(index, True)
                    ref = self.written(s.buffer, self.elem(s.buffer, ix))
                    self.emit(f"{ref} = {self._store_value(s.buffer, f'{t}[{k}]')};")
            self.indent -= 1
            self.emit("}")
        if guard:
            self.indent -= 1
            self.emit("}")

    def visit_For(self, s: For, plain: bool = False):
        v = self.var(s.var)
        vt = compute_type(s.var.dtype)
        if s.kind == ForKind.GPU_THREAD:
            self._thread_loop(s)
            return
        lo, hi = fold_int(s.start), fold_int(s.stop)
        if lo is not None and hi is not None and hi <= lo:
            # no iteration (a split's main loop that its tail does all the work of): nothing to
            # print, and its indices into registers need not name a register (memory._Accesses)
            return
        mma = None if plain else self.plan.mma.get(id(s))
        if mma is not None:
            print_mma_nest(self, mma, lambda: self.visit_For(s, plain=True))
            return
        if s.kind in (ForKind.UNROLLED, ForKind.VECTORIZED):
            self.emit("#pragma unroll")
        start, stop = self.expr(s.start, True), self.expr(s.stop, True)
        self.emit(f"for ({vt} {v} = {start}; {v} < {stop}; ++{v}) {{")
        self.indent += 1
        self.visit(s.body)
        self.indent -= 1
        self.emit("}")
        if id(s) in self.plan.wgmma_drains:
            # the warpgroup MMAs left in flight by the last iteration (codegen.cuda.wgmma_overlap)
            self.emit(f"#if {WGMMA_GUARD}")
            self.emit("tc_wgmma_wait<0>();")
            self.emit("#endif")

    def _bound_var_line(self, s: For, index: str) -> str:
        """The declaration of a GPU-bound loop variable: the index is converted to the
        variable's type before anything is added (``long long`` for int64 variables)."""
        v = self.var(s.var)
        vt = compute_type(s.var.dtype)
        zero = isinstance(s.start, IntImm) and s.start.value == 0
        return f"const {vt} {v} = ({vt}){index}" + ("" if zero else f" + {self.expr(s.start, True)}") + ";"

    def _thread_loop(self, s: For):
        vt = compute_type(s.var.dtype)
        self.emit("{")
        self.indent += 1
        self.emit(self._bound_var_line(s, f"threadIdx.{AXES[s.axis]}"))
        guard = id(s) in self.kernel.guarded
        if guard:
            self.emit(f"if (({vt})threadIdx.{AXES[s.axis]} < {self.expr(extent(s), True)}) {{")
            self.indent += 1
        self.visit(s.body)
        if guard:
            self.indent -= 1
            self.emit("}")
        self.indent -= 1
        self.emit("}")

    # ==============================================================================
    # kernels
    # ==============================================================================
    def _kernel(self, k: KernelPlan) -> KernelSpec:
        self.kernel = k
        self._barriers = Counter(id(x) for x in k.barriers)
        self._waits_async = self.plan.kernel_has_async_copies(k)
        self._proxy_fence = needs_proxy_fence(self.plan, k)
        self._taken.add(k.name)
        body_mark = len(self.lines)
        self.indent = 1
        if k.spec().dynamic_shared:
            # one extern array holds every shared buffer (visit_Allocate points into it); the
            # host emulation, which runs one block at a time, gives it a static array
            align = max([16] + [p.align for p in self.plan.placements.values()
                                if p.scope == "shared" and p.kernel == k.index])
            self.lines += ["#ifdef TC_HOST_EMULATION",
                           f"  static __align__({align}) unsigned char {DYNAMIC_SHARED}[{k.shared_bytes}];",
                           "#else",
                           f"  extern __shared__ __align__({align}) unsigned char {DYNAMIC_SHARED}[];",
                           "#endif"]
        for f in k.block_loops:
            self.emit(self._bound_var_line(f, f"blockIdx.{AXES[f.axis]}"))
        self.visit(k.region)
        body = self.lines[body_mark:]
        del self.lines[body_mark:]
        self.indent = 0
        args: list[ArgRef] = []
        sig: list[str] = []
        for a, obj in zip(k.args, k.arg_objects):
            if a.kind == "size":
                n = self.var(obj)
                sig.append(f"{compute_type(obj.dtype)} {n}")
            else:
                n = self.buf(obj)
                st = self.storage_type(obj.dtype)
                sig.append(("const " if a.readonly else "") + st + ("* __restrict__ " if a.restrict else "* ") + n)
            args.append(dataclasses.replace(a, name=n))
        spec = dataclasses.replace(k.spec(), args=args)
        threads = spec.static_threads
        lb = f"__launch_bounds__({threads}) " if threads else ""

        def show(dims):  # user names stay out of comments: symbolic sizes print as "?"
            return ", ".join(str(d) if isinstance(d, int) else "?" for d in dims)
        what = ("single-thread kernel: no loop is bound to the GPU" if not k.bound else
                f"grid ({show(k.grid)}), block ({show(k.block)})")
        self.emit(f"// {k.name}: {what}")
        self.emit(f'extern "C" __global__ void {lb}{k.name}({", ".join(sig)}) {{')
        self.lines.extend(body)
        self.emit("}")
        self.emit("")
        self.kernel = None
        return spec

    def run(self) -> CudaModuleSpec:
        """Print every kernel of the plan and assemble the module."""
        kernels = [self._kernel(k) for k in self.plan.kernels]
        head = ["// CUDA C generated by codegen.cuda from a prepared loop nest", ""]
        src = "\n".join(head) + self.helpers.source() + "\n".join(self.lines)
        return CudaModuleSpec(src.rstrip() + "\n", kernels, list(self.plan.scratch), self.helpers.headers, self.plan,
                              list(self._index_checks), list(self.plan.schedule))


def emit_cuda(nest, params: Sequence[Param], name: str, *, fast_math: bool = False, **options) -> CudaModuleSpec:
    """CUDA C for the prepared ``nest`` with kernel arguments ``params`` (see the module example).

    ``fast_math`` selects ``__expf``-style intrinsics; the other ``options`` go to
    ``codegen.cuda.passes.plan_cuda``: ``max_threads_per_block`` (default 1024) and
    ``max_shared_bytes`` (default 48 KiB) -- a nest over those limits is refused with a
    BuildError -- and ``dump`` / ``out`` to print the CUDA steps.
    """
    if not getattr(nest, "prepared", True):
        raise BuildError("emit_cuda takes a prepared nest: call nest.prepare_for_codegen() first")
    plan = plan_cuda(nest, params, name, **options)
    return CudaEmitter(plan, fast_math=fast_math).run()
