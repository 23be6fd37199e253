"""CUDA C from a prepared loop nest (one flat index per access, Allocate/Free in place).

Kernels
    Each top-level statement of the root Block becomes one ``__global__`` kernel, launched
    in order. Loops of kind ``gpu_block`` / ``gpu_thread`` become ``blockIdx`` /
    ``threadIdx`` (``axis`` 0/1/2 = x/y/z); a bound loop starting at ``s`` binds
    ``v = s + blockIdx.x``. Grid and block sizes are the loop extents, kept as expressions
    of the size variables and evaluated at launch. Block-bound loops must be the outermost
    loops of their statement (a chain of single-statement bodies). When several
    thread-bound loops of a kernel use one axis, the block size is the largest extent and
    the shorter loops are guarded with ``if (threadIdx.x < extent)``. Unbound loops stay
    ``for`` loops (``unrolled`` / ``vectorized`` ones get ``#pragma unroll``; ``parallel``
    runs serially inside the thread). A top-level statement with no GPU-bound loop runs as
    a single-thread kernel (``<<<1, 1>>>``): correct, but slow -- bind its loops.

Memory
    * ``Allocate`` at the top level of the root (an intermediate shared by kernels), or
      anywhere inside a single-thread kernel, is global memory allocated by the launcher
      and passed as an extra kernel argument.
    * ``Allocate`` inside the block-bound loops but outside every thread-bound loop is
      ``__shared__`` (static size required, 48 KiB per kernel unless told otherwise).
    * ``Allocate`` inside thread-bound loops is a thread-local array (registers / local
      memory) -- unless thread-bound loops nested inside its scope (on other axes) use it:
      then the threads of those inner loops share it, and it is a ``__shared__`` array with
      one slice per thread of the outer thread loops (``threadIdx.y * size + index``).
    * An ``Allocate`` inside GPU-bound loops whose size is only known at launch (e.g. the
      full-size intermediate ``compute_at`` leaves in the loop) becomes one global buffer
      of that size, shared by every thread instead of fresh per iteration. That is exact
      when each iteration reads only elements it wrote and iterations that write the same
      element write the same value -- what ``compute_at`` produces for a ``Compute``
      tensor; a reduction computed at a thread-bound loop must not overlap between threads.

Threads and barriers
    Code outside thread-bound loops (but inside the kernel) is executed by every thread of
    the block, so its stores are guarded to run on one thread (``threadIdx == 0`` on the
    axes not bound around them; stores to thread-local arrays are made by every thread).
    Where every thread of the block arrives together -- block level, the body of a
    thread-bound loop whose extent is the block size, serial loops / conds / lets whose
    headers do not depend on thread indices -- ``__syncthreads()`` is placed between two
    statements that touch the same shared or global buffer (one of them writing); in a
    serial loop the check includes the previous iteration (loop-carried reuse of a shared
    tile), and data written before the loop and read in it gets its barrier before the loop
    (once) unless the body needs one on every iteration anyway. Where threads diverge (a guarded thread loop, thread-dependent control flow),
    statements that would need a barrier are refused with a BuildError.

Semantics (the spec's, exactly)
    Integer ``+ - *`` wrap (done on the unsigned type), ``/`` and ``%`` are C's (with
    ``INT_MIN / -1`` wrapping), floor division/remainder use helpers; index arithmetic
    (inside ``[]`` and loop bounds) is plain C. float -> int casts truncate, saturate and
    give 0 for NaN (``te.lowprec.float_to_int``) through explicit comparisons, relying on
    nothing undocumented about ``cvt``. float16/bfloat16/tf32/float8 are stored in their
    format and computed in float, every result rounded to the format (round to nearest
    even) -- the same per-operation rounding as numpy's float16. ``min``/``max`` on floats
    propagate NaN. Math intrinsics map to CUDA's precise functions (``expf``, ``rintf`` for
    round-half-even, ...); the ``__expf``-style fast variants only with ``fast_math=True``.
    Vector expressions (Ramp/Broadcast) are evaluated lane by lane into a temporary array
    and then stored (so reads see the values before the store, as in the spec); no
    ``float4`` accesses are emitted.

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
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from te import expr as E
from te.dtypes import Dtype
from te.expr import Expr, IntImm, Var, structural_equal, walk
from loopnest.stmt import Allocate, Block, Cond, For, ForKind, Free, Let, Stmt, Store, iter_stmts, stmt_exprs

from ..kernel import BuildError, KernelArgumentError, Param, eval_int_expr, sanitize_name
from .helpers import LOWP_INFO, HelperSet

__all__ = ["emit_cuda", "CudaModuleSpec", "KernelSpec", "ArgRef", "c_type", "MAX_THREADS_PER_BLOCK",
           "MAX_SHARED_BYTES", "MAX_BLOCK_DIMS", "MAX_GRID_DIMS"]

AXES = "xyz"
MAX_THREADS_PER_BLOCK = 1024
MAX_SHARED_BYTES = 48 * 1024
MAX_BLOCK_DIMS = (1024, 1024, 64)
MAX_GRID_DIMS = (2 ** 31 - 1, 65535, 65535)

_INT_C = {("int", 8): "signed char", ("int", 16): "short", ("int", 32): "int", ("int", 64): "long long",
          ("uint", 8): "unsigned char", ("uint", 16): "unsigned short", ("uint", 32): "unsigned int",
          ("uint", 64): "unsigned long long"}


def c_type(dt: Dtype) -> str:
    """The C storage type of a scalar dtype (what a buffer element is in memory).

    >>> from te import float16, int64
    >>> c_type(float16), c_type(int64)
    ('__half', 'long long')
    """
    dt = dt.element
    if dt.is_bool:
        return "bool"
    if dt.is_integer:
        return _INT_C[(dt.kind, dt.bits)]
    if dt.kind == "float" and dt.bits == 32:
        return "float"
    if dt.kind == "float" and dt.bits == 64:
        return "double"
    return LOWP_INFO[dt.scalar_name][3]


def compute_type(dt: Dtype) -> str:
    """The C type values of ``dt`` are computed in (float for the low-precision floats)."""
    dt = dt.element
    if dt.is_lowp_float:
        return "float"
    return c_type(dt)


def _unsigned_of(dt: Dtype) -> str:
    return "unsigned long long" if dt.bits == 64 else "unsigned int"


def _is_narrow(dt: Dtype) -> bool:
    return dt.is_integer and dt.bits < 32


def _const_int(e: Expr) -> int | None:
    """The value of a constant integer expression, else None."""
    try:
        return eval_int_expr(e, {})
    except (KernelArgumentError, AttributeError, TypeError, ZeroDivisionError):
        return None


def _extent(f: For) -> Expr:
    if isinstance(f.start, IntImm) and f.start.value == 0:
        return f.stop
    c = _const_int(f.stop - f.start)
    return IntImm(c, f.var.dtype) if c is not None else f.stop - f.start


def _free_vars(exprs, bound: set[int]) -> list[Var]:
    out: dict[int, Var] = {}
    for e in exprs:
        walk(e, lambda n: out.setdefault(id(n), n) if isinstance(n, Var) and id(n) not in bound else None)
    return list(out.values())


# ------------------------------------------------------------------------------------
# results
# ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ArgRef:
    """One kernel argument: a user buffer (``param`` index into the Kernel's buffer params),
    a launcher-allocated global buffer (``scratch`` index) or a size variable."""

    kind: str              # "param" | "scratch" | "size"
    index: int = -1
    var: Var | None = None
    name: str = ""         # the C name, for messages
    written: bool = False  # the kernel stores to this buffer


@dataclass
class KernelSpec:
    """One ``__global__`` function and how to launch it."""

    name: str
    grid: tuple            # three ints or size expressions (evaluated at launch)
    block: tuple
    args: list[ArgRef]
    shared_bytes: int
    bound: bool            # False: a single-thread kernel (no GPU-bound loops)
    stmt: Stmt = field(default=None, repr=False)

    @property
    def static_threads(self) -> int | None:
        """Threads per block when every block dimension is constant, else None."""
        vals = [_const_int(d) if isinstance(d, Expr) else d for d in self.block]
        return math.prod(vals) if all(v is not None for v in vals) else None

    def dims(self, sizes: dict) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """(grid, block) for sizes ``{id(var): int}``; negative extents count as 0."""
        def ev(d):
            return max(0, d if isinstance(d, int) else eval_int_expr(d, sizes))
        return tuple(ev(d) for d in self.grid), tuple(ev(d) for d in self.block)


@dataclass
class CudaModuleSpec:
    """The emitted module: CUDA C ``source``, its kernels in launch order, and the global
    buffers (``scratch``) the launcher allocates for the duration of a call."""

    source: str
    kernels: list[KernelSpec]
    scratch: list[Any]
    headers: list[str] = field(default_factory=list)

    def scratch_nbytes(self, sizes: dict) -> list[int]:
        """Bytes to allocate for each ``scratch`` buffer for sizes ``{id(var): int}`` (at
        least 1, so every allocation has an address)."""
        return [max(math.prod(eval_int_expr(d, sizes) for d in b.dims) * b.dtype.itemsize, 1) for b in self.scratch]


# ------------------------------------------------------------------------------------
# kernel analysis
# ------------------------------------------------------------------------------------
def _contains_thread_loop(s: Stmt) -> bool:
    return any(isinstance(x, For) and x.kind == ForKind.GPU_THREAD for x in iter_stmts(s))


def _has_store(s: Stmt) -> bool:
    return any(isinstance(x, Store) for x in iter_stmts(s))


class _KernelInfo:
    """Where the GPU-bound loops of one top-level statement are and what they imply."""

    def __init__(self, stmt: Stmt, index: int):
        self.stmt = stmt
        self.index = index
        self.block_loops: list[For] = []
        self.thread_loops: list[For] = []
        self.region: Stmt = stmt          # executed by every thread of a block
        s = stmt
        while isinstance(s, For) and s.kind == ForKind.GPU_BLOCK:
            self.block_loops.append(s)
            if len(s.body.stmts) == 1 and isinstance(s.body.stmts[0], For) \
                    and s.body.stmts[0].kind == ForKind.GPU_BLOCK:
                s = s.body.stmts[0]
                continue
            self.region = s.body
            break
        chain = {id(f) for f in self.block_loops}
        for x in iter_stmts(stmt):
            if isinstance(x, For) and x.kind == ForKind.GPU_BLOCK and id(x) not in chain:
                raise BuildError(
                    f"gpu_block loop {x.var.name} is not among the outermost loops of its nest: "
                    "block-bound loops must enclose everything else of a top-level nest, each "
                    "the single statement of the one above (a kernel has one grid)")
        axes = [f.axis for f in self.block_loops]
        for f in self.block_loops:
            if f.axis not in (0, 1, 2):
                raise BuildError(f"gpu_block loop {f.var.name} has axis {f.axis!r}; expected 0, 1 or 2")
        if len(set(axes)) != len(axes):
            raise BuildError(f"two gpu_block loops of one nest are bound to the same axis "
                             f"({', '.join(f'{f.var.name}->blockIdx.{AXES[f.axis]}' for f in self.block_loops)})")
        self._find_threads(self.region, ())
        self.thread_axes = sorted({f.axis for f in self.thread_loops})
        self.bound = bool(self.block_loops or self.thread_loops)

    def _find_threads(self, s: Stmt, outer: tuple):
        if isinstance(s, For) and s.kind == ForKind.GPU_THREAD:
            if s.axis not in (0, 1, 2):
                raise BuildError(f"gpu_thread loop {s.var.name} has axis {s.axis!r}; expected 0, 1 or 2")
            for o in outer:
                if o.axis == s.axis:
                    raise BuildError(f"gpu_thread loop {s.var.name} is nested inside gpu_thread loop "
                                     f"{o.var.name}, both bound to threadIdx.{AXES[s.axis]}")
            self.thread_loops.append(s)
            outer = outer + (s,)
        for f in ("body", "then", "otherwise"):
            c = getattr(s, f, None)
            if c is not None:
                self._find_threads(c, outer)
        if isinstance(s, Block):
            for x in s.stmts:
                self._find_threads(x, outer)


# ------------------------------------------------------------------------------------
# the emitter
# ------------------------------------------------------------------------------------
_MATH = {  # name -> (float, double, fast float)
    "exp": ("expf", "exp", "__expf"), "exp2": ("exp2f", "exp2", "exp2f"),
    "log": ("logf", "log", "__logf"), "log2": ("log2f", "log2", "__log2f"),
    "sqrt": ("sqrtf", "sqrt", "sqrtf"), "rsqrt": ("rsqrtf", "rsqrt", "rsqrtf"),
    "tanh": ("tanhf", "tanh", "tanhf"), "floor": ("floorf", "floor", "floorf"),
    "ceil": ("ceilf", "ceil", "ceilf"), "round": ("rintf", "rint", "rintf"),
    "sin": ("sinf", "sin", "__sinf"), "cos": ("cosf", "cos", "__cosf"),
    "erf": ("erff", "erf", "erff"), "pow": ("powf", "pow", "__powf"),
    "abs": ("fabsf", "fabs", "fabsf"),
}

_CMP = {E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">="}
_ARITH = {E.Add: "+", E.Sub: "-", E.Mul: "*"}
_WRAP_FN = {E.Add: "tc_add", E.Sub: "tc_sub", E.Mul: "tc_mul"}


class _Ctx:
    """Emission state of one region: the thread axes bound by enclosing thread loops, and the
    variables whose values differ between threads (thread loop variables and what is
    computed from them)."""

    __slots__ = ("bound_axes", "in_thread", "tdep")

    def __init__(self, bound_axes: frozenset = frozenset(), in_thread: bool = False,
                 tdep: frozenset = frozenset()):
        self.bound_axes = bound_axes
        self.in_thread = in_thread
        self.tdep = tdep


class CudaEmitter:
    """Turns a prepared nest into a :class:`CudaModuleSpec` (use :func:`emit_cuda`)."""

    def __init__(self, nest, params: Sequence[Param], name: str, *, fast_math: bool = False,
                 max_threads_per_block: int = MAX_THREADS_PER_BLOCK,
                 max_shared_bytes: int = MAX_SHARED_BYTES):
        self.nest = nest
        self.params = list(params)
        self.base = sanitize_name(name)[:32]
        self.fast_math = fast_math
        self.max_threads = max_threads_per_block
        self.max_shared = max_shared_bytes
        self.helpers = HelperSet()
        self._names: dict[int, str] = {}
        self._taken: set[str] = set()
        self._tmp = 0
        self.lines: list[str] = []
        self.indent = 0
        # buffers
        self.buffer_params = [p for p in self.params if p.is_buffer]
        self._param_index = {id(p.buffer): k for k, p in enumerate(self.buffer_params)}
        self.scratch: list[Any] = []
        self._scratch_index: dict[int, int] = {}
        self._scope: dict[int, str] = {}      # id(buffer) -> "global" | "shared" | "local"
        self._vector_vars: set[int] = set()   # vector Let vars held in arrays
        self._lane_scalar: set[int] = set()   # vector vars that are scalars inside a lane lambda
        self.kinfo: _KernelInfo | None = None
        self._slices: dict[int, str] = {}     # id(buffer) -> offset of this thread's slice
        self._private_size: dict[int, int] = {}  # promoted buffers: id -> elements per thread
        self._nonneg_vars: set[int] = set()     # loop variables known to be >= 0
        self._slice_factor: dict[int, int] = {}
        self._store_guard: str | None = None  # guard for stores to non-local buffers

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
    def lowp(self, dt: Dtype):
        info = LOWP_INFO[dt.element.scalar_name]
        self.helpers.need(info[0])
        if info[2]:
            if info[2] == "cuda_fp8.h":
                self.helpers.header("cuda_fp16.h")
            self.helpers.header(info[2])
        return info

    def storage_type(self, dt: Dtype) -> str:
        if dt.element.is_lowp_float:
            self.lowp(dt)
        if dt.is_vector:
            raise BuildError(f"buffers of vector element type ({dt}) are not supported by the CUDA backend")
        return c_type(dt)

    # -- literals -----------------------------------------------------------------
    def int_lit(self, value: int, dt: Dtype) -> str:
        dt = dt.element
        if dt.is_bool:
            return "true" if value else "false"
        ct = c_type(dt)
        if dt.is_uint:
            suf = "ull" if dt.bits == 64 else "u"
            s = f"{value}{suf}"
            return s if dt.bits >= 32 else f"(({ct}){s})"
        suf = "LL" if dt.bits == 64 else ""
        if value == dt.min_value():
            s = f"(-{-value - 1}{suf} - 1)"
        elif value < 0:
            s = f"({value}{suf})"
        else:
            s = f"{value}{suf}"
        return s if dt.bits >= 32 else f"(({ct}){s})"

    def float_lit(self, value: float, dt: Dtype) -> str:
        dt = dt.element
        if dt.is_lowp_float:
            value = _round_to(value, dt)
        dbl = dt.kind == "float" and dt.bits == 64
        if math.isnan(value):
            return "__longlong_as_double(0x7ff8000000000000LL)" if dbl else "__int_as_float(0x7fc00000)"
        if math.isinf(value):
            if dbl:
                return f"__longlong_as_double({'(long long)0xfff0000000000000ULL' if value < 0 else '0x7ff0000000000000LL'})"
            return f"__int_as_float({'(int)0xff800000u' if value < 0 else '0x7f800000'})"
        if dbl:
            s = repr(float(value))
        else:
            s = repr(float(np.float32(value)))
        if "e" not in s and "." not in s and "inf" not in s:
            s += ".0"
        s = s + ("" if dbl else "f")
        return f"({s})" if s.startswith("-") else s

    # ==============================================================================
    # expressions
    # ==============================================================================
    def expr(self, e: Expr, lane: str | None = None, idx: bool = False) -> str:
        """C text of ``e`` in its compute type; ``lane`` selects one lane of a vector
        expression; ``idx`` marks index arithmetic (plain C, no wrapping helpers)."""
        m = getattr(self, "_x_" + type(e).__name__, None)
        if m is None:
            raise BuildError(f"the CUDA backend cannot emit the expression {type(e).__name__}: `{e}`")
        if e.dtype.is_vector and lane is None:
            raise BuildError(f"vector expression `{e}` ({e.dtype}) outside a vector store; "
                             "vector values must be stored lane by lane")
        return m(e, lane, idx)

    def _x_Var(self, e: Var, lane, idx):
        n = self.var(e)
        if e.dtype.is_vector and id(e) in self._vector_vars and id(e) not in self._lane_scalar:
            return f"{n}[{lane}]"
        return n

    def _x_IntImm(self, e, lane, idx):
        return self.int_lit(e.value, e.dtype)

    def _x_FloatImm(self, e, lane, idx):
        return self.float_lit(e.value, e.dtype)

    def _x_Ramp(self, e: E.Ramp, lane, idx):
        b = self.expr(e.base, lane, idx)
        s = self.expr(e.stride, lane, idx)
        ct = compute_type(e.dtype)
        return f"({b} + ({ct})({lane}) * {s})"

    def _x_Broadcast(self, e: E.Broadcast, lane, idx):
        return self.expr(e.value, None, idx)

    def _x_Load(self, e: E.Load, lane, idx):
        if len(e.indices) > 1:
            raise BuildError(f"load of {e.buffer.name} has {len(e.indices)} indices: the CUDA backend "
                             "takes a prepared nest (nest.prepare_for_codegen())")
        self._check_buffer(e.buffer)
        ix = self.expr(self._private_index(e.buffer, e.indices[0]), lane, True) if e.indices else "0"
        ref = self.elem(e.buffer, ix)
        dt = e.buffer.dtype
        if dt.is_lowp_float:
            info = self.lowp(dt)
            return f"{info[0]}_ld({ref})"
        return ref

    def _x_Let(self, e: E.Let, lane, idx):
        ct = compute_type(e.value.dtype)
        val = self.expr(e.value, lane if e.value.dtype.is_vector else None, idx)
        name = self.var(e.var)
        scal = e.var.dtype.is_vector
        if scal:
            self._lane_scalar.add(id(e.var))
        try:
            body = self.expr(e.body, lane, idx)
        finally:
            if scal:
                self._lane_scalar.discard(id(e.var))
        rt = compute_type(e.dtype)
        return f"([&]() -> {rt} {{ const {ct} {name} = {val}; return {body}; }}())"

    def _x_Cast(self, e: E.Cast, lane, idx):
        src, dst = e.value.dtype.element, e.dtype.element
        x = self.expr(e.value, lane, idx)
        return self.cast(x, src, dst)

    def cast(self, x: str, src: Dtype, dst: Dtype) -> str:
        """Convert the C value ``x`` (compute type of ``src``) to ``dst``'s compute type."""
        if src == dst:
            return x
        if dst.is_bool:
            return f"({x} != 0)"
        if dst.is_lowp_float:
            k = self.lowp(dst)[1]
            if src.is_lowp_float or (src.kind == "float" and src.bits == 32):
                return f"tc_rnd_{k}({x})"
            if src.kind == "float" and src.bits == 64:
                return f"tc_rndd_{k}({x})"
            if src.is_bool or (src.is_integer and src.bits < 64):
                return f"tc_rndd_{k}((double)({x}))"
            if src.is_int:
                return f"tc_rndll_{k}({x})"
            return f"tc_rndull_{k}({x})"
        ct = compute_type(dst)
        if dst.is_float:  # float32 / float64 from anything
            return f"(({ct})({x}))"
        # integer destination
        if src.is_float:
            self.helpers.need("tc_f2i")
            ft = "double" if (src.kind == "float" and src.bits == 64) else "float"
            if dst.is_int:
                lo, hi = -(2 ** (dst.bits - 1)), 2 ** (dst.bits - 1)
            else:
                lo, hi = 0, 2 ** dst.bits
            fl = (lambda v: f"{float(v)!r}" + ("" if ft == "double" else "f"))
            return (f"tc_f2i<{ct}, {ft}>({x}, {fl(lo)}, {fl(hi)}, {self.int_lit(dst.min_value(), dst)}, "
                    f"{self.int_lit(dst.max_value(), dst)})")
        return f"(({ct})({x}))"

    def _x_binary(self, e, lane, idx):
        dt = e.a.dtype.element
        a = self.expr(e.a, lane, idx)
        b = self.expr(e.b, lane, idx)
        t = type(e)
        ct = compute_type(dt)
        if t in _CMP:
            return f"({a} {_CMP[t]} {b})"
        if t is E.And:
            return f"({a} && {b})"
        if t is E.Or:
            return f"({a} || {b})"
        if dt.is_bool:
            if t in (E.Min, E.Max):
                return f"({a} {'&&' if t is E.Min else '||'} {b})"
            raise BuildError(f"{t.__name__} on bool operands is not supported (`{e}`)")
        if dt.is_float:
            if t in _ARITH or t is E.Div:
                r = f"({a} {_ARITH.get(t, '/')} {b})"
            elif t is E.Min or t is E.Max:
                self.helpers.need("tc_minmax")
                r = f"tc_f{'min' if t is E.Min else 'max'}({a}, {b})"
            elif t is E.FloorDiv:
                fn = "floor" if ct == "double" else "floorf"
                r = f"{fn}({a} / {b})"
            elif t is E.FloorMod:
                self.helpers.need("tc_floormodf")
                r = f"tc_floormodf({a}, {b})"
            else:
                raise BuildError(f"{t.__name__} is not defined on {dt} (`{e}`)")
            if dt.is_lowp_float and t not in (E.Min, E.Max):
                r = f"tc_rnd_{self.lowp(dt)[1]}({r})"
            return r
        # integers
        narrow = _is_narrow(dt)
        if t in _ARITH:
            if idx:
                return f"({a} {_ARITH[t]} {b})"
            if dt.is_uint and not narrow:
                return f"({a} {_ARITH[t]} {b})"
            self.helpers.need("tc_wrap")
            return f"{_WRAP_FN[t]}<{ct}, {_unsigned_of(dt)}>({a}, {b})"
        if t is E.Div or t is E.Mod:
            op = "/" if t is E.Div else "%"
            if idx or dt.is_uint or narrow:
                r = f"({a} {op} {b})"
                return f"(({ct}){r})" if narrow else r
            self.helpers.need("tc_div")
            return f"tc_div<{ct}, {_unsigned_of(dt)}>({a}, {b})" if t is E.Div else f"tc_mod<{ct}>({a}, {b})"
        if t is E.FloorDiv or t is E.FloorMod:
            op = "/" if t is E.FloorDiv else "%"
            k = _const_int(e.b)
            if idx and k is not None and k > 0 and self._nonneg(e.a):
                return f"({a} {op} {b})"   # same as floor division for a >= 0, b > 0
            if dt.is_uint:
                r = f"({a} {op} {b})"
                return f"(({ct}){r})" if narrow else r
            self.helpers.need("tc_floordiv")
            fn = "tc_floordiv" if t is E.FloorDiv else "tc_floormod"
            if narrow:
                return f"(({ct}){fn}<int>({a}, {b}))"
            return f"{fn}<{ct}>({a}, {b})"
        if t is E.Min or t is E.Max:
            self.helpers.need("tc_minmax")
            return f"tc_{'min' if t is E.Min else 'max'}<{ct}>({a}, {b})"
        raise BuildError(f"unsupported integer operator {t.__name__} (`{e}`)")

    _x_Add = _x_Sub = _x_Mul = _x_Div = _x_Mod = _x_FloorDiv = _x_FloorMod = _x_binary
    _x_Min = _x_Max = _x_EQ = _x_NE = _x_LT = _x_LE = _x_GT = _x_GE = _x_And = _x_Or = _x_binary

    def _x_Not(self, e, lane, idx):
        return f"(!{self.expr(e.a, lane, idx)})"

    def _x_Select(self, e, lane, idx):
        c = self.expr(e.cond, lane if e.cond.dtype.is_vector else None, idx)
        return f"({c} ? {self.expr(e.t, lane, idx)} : {self.expr(e.f, lane, idx)})"

    _x_IfThenElse = _x_Select

    def _x_Call(self, e: E.Call, lane, idx):
        args = [self.expr(a, lane, idx) for a in e.args]
        adt = e.args[0].dtype.element if e.args else e.dtype.element
        name = e.name
        if name == "isnan":
            if not adt.is_float:
                return "false"
            return f"isnan({args[0]})"
        if name == "abs" and adt.is_integer:
            if adt.is_uint:
                return args[0]
            if _is_narrow(adt):
                return f"(({c_type(adt)})({args[0]} < 0 ? -({args[0]}) : ({args[0]})))"
            self.helpers.need("tc_abs")
            return f"tc_abs<{c_type(adt)}, {_unsigned_of(adt)}>({args[0]})"
        if name == "sigmoid":
            self.helpers.need("tc_sigmoid")
            dbl = adt.kind == "float" and adt.bits == 64
            fn = "tc_sigmoid_fast" if (self.fast_math and not dbl) else "tc_sigmoid"
            r = f"{fn}({args[0]})"
        elif name in _MATH:
            if not adt.is_float:
                raise BuildError(f"{name} needs a float argument, got {adt} (`{e}`)")
            f32, f64, fast = _MATH[name]
            dbl = adt.kind == "float" and adt.bits == 64
            fn = f64 if dbl else (fast if self.fast_math else f32)
            r = f"{fn}({', '.join(args)})"
        else:
            raise BuildError(f"the CUDA backend has no translation for the intrinsic {name!r}")
        if e.dtype.element.is_lowp_float:
            r = f"tc_rnd_{self.lowp(e.dtype)[1]}({r})"
        return r

    # ==============================================================================
    # statements
    # ==============================================================================
    def _check_buffer(self, b) -> None:
        if id(b) in self._param_index or id(b) in self._scope:
            return
        raise BuildError(f"buffer {b.name} is used by the nest but is neither an argument of build nor "
                         "allocated in the nest")

    def stmt(self, s: Stmt, ctx: _Ctx) -> None:
        m = getattr(self, "_s_" + type(s).__name__)
        m(s, ctx)

    def _s_Block(self, s: Block, ctx):
        for x in s.stmts:
            self.stmt(x, ctx)

    def _s_Free(self, s: Free, ctx):
        pass

    def _s_Allocate(self, s: Allocate, ctx):
        b = s.buffer
        scope = self._scope.get(id(b))
        if scope in ("global", None):
            return  # launcher-allocated
        size = self._private_size.get(id(b), b.static_size())
        st = self.storage_type(b.dtype)
        n = self.buf(b)
        if scope == "shared":
            total = max(size, 1) * self._slice_factor.get(id(b), 1)
            self.emit(f"__shared__ __align__(16) {st} {n}[{total}];")
        else:
            self.emit(f"{st} {n}[{max(size, 1)}];")

    def _s_Let(self, s: Let, ctx):
        ct = compute_type(s.value.dtype)
        n = self.var(s.var)
        self.emit("{")
        self.indent += 1
        if s.var.dtype.is_vector:
            lanes = s.var.dtype.lanes
            self._vector_vars.add(id(s.var))
            self.emit(f"{ct} {n}[{lanes}];")
            self.emit("#pragma unroll")
            self.emit(f"for (int tc_l = 0; tc_l < {lanes}; ++tc_l) {n}[tc_l] = {self.expr(s.value, 'tc_l')};")
        else:
            self.emit(f"const {ct} {n} = {self.expr(s.value)};")
        self.stmt(s.body, ctx)
        self.indent -= 1
        self.emit("}")

    def _s_Cond(self, s: Cond, ctx):
        self.emit(f"if ({self.expr(s.cond)}) {{")
        self.indent += 1
        self.stmt(s.then, ctx)
        self.indent -= 1
        if s.otherwise is not None and s.otherwise.stmts:
            self.emit("} else {")
            self.indent += 1
            self.stmt(s.otherwise, ctx)
            self.indent -= 1
        self.emit("}")

    def _private_index(self, buf, ix: Expr) -> Expr:
        """For a buffer promoted to registers, the index within the thread's own slice."""
        if id(buf) not in self._private_size:
            return ix
        from te.simplify import simplify
        return simplify(E.substitute(ix, {f.var: IntImm(0, f.var.dtype) for f in self.kinfo.thread_loops}))

    def _nonneg(self, e: Expr) -> bool:
        """Whether ``e`` is provably >= 0 (loop variables counting up from >= 0 starts)."""
        t = type(e)
        if t is IntImm:
            return e.value >= 0
        if t is Var:
            return id(e) in self._nonneg_vars or (e.dtype.is_uint)
        if t in (E.Add, E.Mul, E.Min, E.Max):
            return self._nonneg(e.a) and self._nonneg(e.b)
        if t in (E.FloorDiv, E.Div):
            k = _const_int(e.b)
            return k is not None and k > 0 and self._nonneg(e.a)
        if t is E.FloorMod:
            k = _const_int(e.b)
            return k is not None and k > 0
        return False

    def elem(self, buf, ix: str) -> str:
        """``buf[ix]``; a shared buffer with one slice per thread of the bound axes is
        offset to the current thread's slice."""
        off = self._slices.get(id(buf))
        return f"{self.buf(buf)}[{ix}]" if off is None else f"{self.buf(buf)}[{off} + {ix}]"

    def _store_value(self, buf, value: str) -> str:
        dt = buf.dtype
        if dt.is_lowp_float:
            return f"{self.lowp(dt)[0]}_st({value})"
        return value

    def _s_Store(self, s: Store, ctx):
        if len(s.indices) > 1:
            raise BuildError(f"store to {s.buffer.name} has {len(s.indices)} indices: the CUDA backend "
                             "takes a prepared nest (nest.prepare_for_codegen())")
        self._check_buffer(s.buffer)
        n = self.buf(s.buffer)
        index = self._private_index(s.buffer, s.indices[0]) if s.indices else IntImm(0)
        lanes = max(index.dtype.lanes, s.value.dtype.lanes)
        guard = self._store_guard if self._scope.get(id(s.buffer)) != "local" else None
        if guard:
            self.emit(f"if ({guard}) {{")
            self.indent += 1
        if lanes == 1:
            self.emit(f"{self.elem(s.buffer, self.expr(index, None, True))} = "
                      f"{self._store_value(s.buffer, self.expr(s.value))};")
            if guard:
                self.indent -= 1
                self.emit("}")
            return
        # vector store: every lane is computed before any is written
        ct = compute_type(s.value.dtype)
        t = self.tmp("v")
        self.emit("{")
        self.indent += 1
        self.emit(f"{ct} {t}[{lanes}];")
        self.emit("#pragma unroll")
        self.emit(f"for (int tc_l = 0; tc_l < {lanes}; ++tc_l) {t}[tc_l] = {self.expr(s.value, 'tc_l')};")
        ix = self.expr(index, "tc_l" if index.dtype.is_vector else None, True)
        self.emit("#pragma unroll")
        self.emit(f"for (int tc_l = 0; tc_l < {lanes}; ++tc_l) {self.elem(s.buffer, ix)} = "
                  f"{self._store_value(s.buffer, f'{t}[tc_l]')};")
        self.indent -= 1
        self.emit("}")
        if guard:
            self.indent -= 1
            self.emit("}")

    def _s_For(self, s: For, ctx):
        v = self.var(s.var)
        vt = compute_type(s.var.dtype)
        if s.kind == ForKind.GPU_BLOCK:
            raise BuildError(f"gpu_block loop {s.var.name} is not among the outermost loops of its nest")
        if s.kind == ForKind.GPU_THREAD:
            self._thread_loop(s, ctx)
            return
        if s.kind in (ForKind.UNROLLED, ForKind.VECTORIZED):
            self.emit("#pragma unroll")
        start, stop = self.expr(s.start, None, True), self.expr(s.stop, None, True)
        self.emit(f"for ({vt} {v} = {start}; {v} < {stop}; ++{v}) {{")
        self.indent += 1
        self.stmt(s.body, ctx)
        self.indent -= 1
        self.emit("}")

    # -- GPU structure ---------------------------------------------------------------
    #
    # Two ways of emitting statements inside a kernel with thread-bound loops:
    #
    # * uniform (``_uniform``): code every thread of the block reaches together -- the block
    #   level, the body of an unguarded thread loop, serial loops / conds / lets whose
    #   headers do not depend on thread indices. ``__syncthreads()`` may be placed here, so
    #   statements exchanging data through shared or global memory are separated by one.
    # * per thread (``_thread_loop`` / ``_thread_body``): inside a guarded thread loop or
    #   thread-dependent control flow. No barrier is possible; statements that would need
    #   one are refused.
    #
    # In both, stores executed while some thread axes are not bound around them would be
    # made by every thread of those axes: they are guarded to run once.

    def _thread_var_line(self, s: For) -> str:
        v = self.var(s.var)
        vt = compute_type(s.var.dtype)
        start = self.expr(s.start, None, True)
        return f"const {vt} {v} = ({vt})threadIdx.{AXES[s.axis]}" + ("" if start == "0" else f" + {start}") + ";"

    def _thread_loop(self, s: For, ctx: _Ctx):
        """A thread loop emitted per thread (its body cannot hold barriers)."""
        vt = compute_type(s.var.dtype)
        self.emit("{")
        self.indent += 1
        self.emit(self._thread_var_line(s))
        guard = id(s) in self._guarded
        if guard:
            self.emit(f"if (({vt})threadIdx.{AXES[s.axis]} < {self.expr(_extent(s), None, True)}) {{")
            self.indent += 1
        inner = _Ctx(ctx.bound_axes | {s.axis}, True, ctx.tdep | {id(s.var)})
        self._thread_body(s.body, inner)
        if guard:
            self.indent -= 1
            self.emit("}")
        self.indent -= 1
        self.emit("}")

    def _thread_body(self, body: Block, ctx: _Ctx):
        """Statements reached per thread. Threads on the axes not bound yet run this code
        redundantly: stores are guarded to one of them, and data exchanged between parts
        that distribute over those axes cannot be synchronised, so it is refused."""
        k = self.kinfo
        unbound = [a for a in k.thread_axes if a not in ctx.bound_axes]
        if not unbound:
            self.stmt(body, ctx)
            return
        stmts = _flatten(body)
        parts = [x for x in stmts if not isinstance(x, (Allocate, Free))]
        accs = [self._accesses(x) for x in parts]
        for i in range(len(parts)):
            for j in range(i + 1, len(parts)):
                conflict = _conflict(accs[i], accs[j])
                if conflict is not None:
                    raise BuildError(
                        f"inside gpu_thread loop(s) {self._bound_names(ctx)}, two statements exchange data "
                        f"through buffer {conflict} while threadIdx.{'/'.join(AXES[a] for a in unbound)} is not "
                        "bound around them, and a __syncthreads() there would be divergent (a thread loop "
                        "around them is guarded, or a condition depends on the thread index). Give the "
                        "thread loops extents equal to the block size, or make the loops that write and "
                        "read the buffer siblings at block level")
        for x in stmts:
            self._single_or_distributed(x, ctx)

    def _bound_names(self, ctx):
        return ", ".join(f"threadIdx.{AXES[a]}" for a in sorted(ctx.bound_axes)) or "(none)"

    def _single_or_distributed(self, x: Stmt, ctx: _Ctx):
        """Emit ``x`` per thread; if it stores while thread axes are unbound around it, only
        the threads with index 0 on those axes store (stores to thread-local buffers are
        made by every thread, which keeps its own copy)."""
        k = self.kinfo
        unbound = [a for a in k.thread_axes if a not in ctx.bound_axes]
        if isinstance(x, (Allocate, Free)):
            self.stmt(x, ctx)
            return
        if _contains_thread_loop(x):
            if isinstance(x, For) and x.kind == ForKind.GPU_THREAD:
                self._thread_loop(x, ctx)
            elif isinstance(x, For):
                inner = _Ctx(ctx.bound_axes, ctx.in_thread, ctx.tdep | {id(x.var)})
                self._s_For_shell(x, ctx, lambda b: self._thread_body_or_block(b, inner))
            elif isinstance(x, Cond):
                self._s_Cond_shell(x, lambda b: self._thread_body_or_block(b, ctx))
            elif isinstance(x, Let):
                inner = _Ctx(ctx.bound_axes, ctx.in_thread, ctx.tdep | {id(x.var)})
                self._s_Let_shell(x, lambda b: self._thread_body_or_block(b, inner))
            elif isinstance(x, Block):
                for y in x.stmts:
                    self._single_or_distributed(y, ctx)
            else:  # pragma: no cover - only compound statements hold loops
                self.stmt(x, ctx)
            return
        stores = self._stored_scopes(x)
        if not unbound or not (stores - {"local"}):
            self.stmt(x, ctx)
            return
        cond = " && ".join(f"threadIdx.{AXES[a]} == 0" for a in unbound)
        if "local" not in stores:
            self.emit(f"if ({cond}) {{")
            self.indent += 1
            self.stmt(x, ctx)
            self.indent -= 1
            self.emit("}")
            return
        saved = self._store_guard
        self._store_guard = cond
        try:
            self.stmt(x, ctx)
        finally:
            self._store_guard = saved

    def _stored_scopes(self, x: Stmt) -> set:
        return {self._scope.get(id(y.buffer), "param") for y in iter_stmts(x) if isinstance(y, Store)}

    def _thread_body_or_block(self, b: Block, ctx: _Ctx):
        if ctx.in_thread:
            self._thread_body(b, ctx)
        else:
            for y in b.stmts:
                self._single_or_distributed(y, ctx)

    # shells: emit the header of a compound statement and a callback for its body
    def _s_For_shell(self, s: For, ctx, body_fn):
        if s.kind == ForKind.GPU_BLOCK:
            raise BuildError(f"gpu_block loop {s.var.name} is not among the outermost loops of its nest")
        v = self.var(s.var)
        vt = compute_type(s.var.dtype)
        if s.kind in (ForKind.UNROLLED, ForKind.VECTORIZED):
            self.emit("#pragma unroll")
        self.emit(f"for ({vt} {v} = {self.expr(s.start, None, True)}; {v} < {self.expr(s.stop, None, True)}; ++{v}) {{")
        self.indent += 1
        r = body_fn(s.body)
        self.indent -= 1
        self.emit("}")
        return r

    def _s_Cond_shell(self, s: Cond, body_fn):
        self.emit(f"if ({self.expr(s.cond)}) {{")
        self.indent += 1
        r1 = body_fn(s.then)
        self.indent -= 1
        r2 = None
        if s.otherwise is not None and s.otherwise.stmts:
            self.emit("} else {")
            self.indent += 1
            r2 = body_fn(s.otherwise)
            self.indent -= 1
        self.emit("}")
        return r1, r2

    def _s_Let_shell(self, s: Let, body_fn):
        if s.var.dtype.is_vector:
            raise BuildError(f"vector let {s.var.name} around GPU-bound loops is not supported")
        ct = compute_type(s.value.dtype)
        self.emit("{")
        self.indent += 1
        self.emit(f"const {ct} {self.var(s.var)} = {self.expr(s.value)};")
        r = body_fn(s.body)
        self.indent -= 1
        self.emit("}")
        return r

    # -- uniform code: barriers ------------------------------------------------------------
    def _accesses(self, s) -> dict:
        """{id(buffer): [buffer, modes]} of the non-thread-local buffers ``s`` touches."""
        out: dict[int, list] = {}

        def add(b, mode):
            if self._scope.get(id(b)) == "local":
                return
            out.setdefault(id(b), [b, set()])[1].add(mode)

        for x in iter_stmts(s):
            if isinstance(x, Store):
                add(x.buffer, "w")
            for e in stmt_exprs(x):
                walk(e, lambda n: add(n.buffer, "r") if isinstance(n, E.Load) else None)
        return out

    def _header_accesses(self, exprs) -> dict:
        out: dict[int, list] = {}
        for e in exprs:
            walk(e, lambda n: out.setdefault(id(n.buffer), [n.buffer, set()])[1].add("r")
                 if isinstance(n, E.Load) and self._scope.get(id(n.buffer)) != "local" else None)
        return out

    def _uniform_exprs(self, exprs, ctx: _Ctx) -> bool:
        """Whether ``exprs`` have the same value in every thread (no thread-dependent vars)."""
        bad = []
        for e in exprs:
            walk(e, lambda n: bad.append(n) if isinstance(n, Var) and id(n) in ctx.tdep else None)
        return not bad

    def _uniform(self, s: Stmt, pending: dict, ctx: _Ctx) -> dict:
        """Emit ``s``, reached by every thread of the block together; returns the accesses
        made since the last barrier."""
        if isinstance(s, Block):
            stmts = list(s.stmts)
            i = 0
            while i < len(stmts):
                x = stmts[i]
                if isinstance(x, (Allocate, Free)) or _contains_thread_loop(x):
                    pending = self._uniform(x, pending, ctx)
                    i += 1
                    continue
                # a run of statements without thread-bound loops: one guard around them
                j = i
                while j < len(stmts) and not isinstance(stmts[j], (Allocate, Free)) \
                        and not _contains_thread_loop(stmts[j]):
                    j += 1
                run = Block(tuple(stmts[i:j]))
                acc = self._accesses(run)
                pending = self._barrier_if(pending, acc)
                self._single_or_distributed(run, ctx)
                pending = _merge(pending, acc)
                i = j
            return pending
        if isinstance(s, (Allocate, Free)):
            self.stmt(s, ctx)
            return pending
        if isinstance(s, For) and s.kind == ForKind.GPU_THREAD:
            if id(s) not in self._guarded and _contains_thread_loop(s.body):
                # every thread runs the body once: still uniform, barriers allowed inside
                self.emit("{")
                self.indent += 1
                self.emit(self._thread_var_line(s))
                inner = _Ctx(ctx.bound_axes | {s.axis}, True, ctx.tdep | {id(s.var)})
                pending = self._uniform(s.body, pending, inner)
                self.indent -= 1
                self.emit("}")
                return pending
            acc = self._accesses(s)
            pending = self._barrier_if(pending, acc)
            self._thread_loop(s, ctx)
            return _merge(pending, acc)
        if not _contains_thread_loop(s):
            acc = self._accesses(s)
            pending = self._barrier_if(pending, acc)
            self._single_or_distributed(s, ctx)
            return _merge(pending, acc)
        # a compound statement with thread-bound loops inside
        head_exprs = {For: lambda: [s.start, s.stop], Cond: lambda: [s.cond], Let: lambda: [s.value]}[type(s)]()
        if not self._uniform_exprs(head_exprs, ctx):
            acc = self._accesses(s)
            pending = self._barrier_if(pending, acc)
            self._single_or_distributed(s, ctx)
            return _merge(pending, acc)
        head = self._header_accesses(head_exprs)
        pending = _merge(self._barrier_if(pending, head), head)
        if isinstance(s, For):
            return self._uniform_for(s, pending, ctx)
        if isinstance(s, Cond):
            p = dict(pending)
            r1, r2 = self._s_Cond_shell(s, lambda b: self._uniform(b, dict(p), ctx))
            return _merge(r1, r2 if r2 is not None else p)
        p = dict(pending)
        return self._s_Let_shell(s, lambda b: self._uniform(b, dict(p), ctx))

    def _uniform_for(self, s: For, pending: dict, ctx: _Ctx) -> dict:
        """A serial loop around thread-bound loops, in uniform code.

        When what is pending before the loop conflicts with the body, one barrier before
        the loop (run once) replaces the one the body would otherwise get on every
        iteration -- unless the body needs as many barriers anyway for the accesses its
        iterations exchange, in which case the loop is left as it is."""
        if _conflict(pending, self._accesses(s.body)) is None:
            return self._serial_loop(s, pending, ctx)
        mark = self._mark()
        self._serial_loop(s, pending, ctx)
        inside = self._barriers_since(mark)
        self._reset(mark)
        self.emit("__syncthreads();")
        end = self._serial_loop(s, {}, ctx)
        if self._barriers_since(mark) - 1 < inside:
            return end
        self._reset(mark)
        return self._serial_loop(s, pending, ctx)

    def _serial_loop(self, s: For, pending: dict, ctx: _Ctx) -> dict:
        """Emit the serial loop ``s``, its body starting with ``pending``; returns the
        accesses left pending after it (the body may run zero times)."""
        # loop-carried: iteration n+1 starts with what iteration n left pending
        mark = self._mark()
        end1 = self._s_For_shell(s, ctx, lambda b: self._uniform(b, dict(pending), ctx))
        self._reset(mark)
        start_state = _merge(pending, end1)
        end2 = self._s_For_shell(s, ctx, lambda b: self._uniform(b, dict(start_state), ctx))
        return _merge(pending, end2)

    def _barriers_since(self, mark) -> int:
        return sum(1 for line in self.lines[mark[0]:] if line.strip() == "__syncthreads();")

    def _barrier_if(self, pending: dict, acc: dict) -> dict:
        if self.kinfo.thread_axes and _conflict(pending, acc) is not None:
            self.emit("__syncthreads();")
            return {}
        return pending

    def _mark(self):
        return (len(self.lines), self.indent, self._tmp, self.helpers.snapshot())

    def _reset(self, mark):
        del self.lines[mark[0]:]
        self.indent = mark[1]
        self._tmp = mark[2]

    # ==============================================================================
    # kernels
    # ==============================================================================
    # -- register promotion -------------------------------------------------------------
    def _promote_private(self, k: _KernelInfo, block) -> None:
        """Block-level (``__shared__``) buffers that each thread uses privately become
        thread-local arrays (registers).

        A buffer qualifies when every access to it sits inside thread-bound loops on all
        of the kernel's thread axes (each starting at 0), its flat index is
        ``sum(c_a * t_a) + r`` in those loop variables with the same coefficients ``c_a``
        at every access, ``r`` does not depend on thread indices and lies in ``[0, R)``,
        and the coefficients give each thread a disjoint slice (sorted, ``c_1 >= R`` and
        ``c_(k+1) >= c_k * extent_k``). Each thread then keeps ``R`` elements, indexed by
        ``r`` -- the usual per-thread accumulator tile of a matmul, which must live across
        the serial K loop that holds the shared-memory copies.
        """
        cands = {id(b): b for b in self._buffers_with_scope(k, "shared") if id(b) not in self._slices}
        if not cands or not k.thread_axes:
            return
        info: dict[int, dict] = {i: {"coef": None, "R": 0, "ext": {}, "ok": True} for i in cands}

        def visit_index(bid, ix: Expr, threads: dict, ranges: dict):
            st = info[bid]
            if not st["ok"]:
                return
            if set(threads) != set(k.thread_axes) or any(not (isinstance(f.start, IntImm) and f.start.value == 0)
                                                       for f in threads.values()):
                st["ok"] = False
                return
            coef = {}
            rest = ix
            for ax, f in threads.items():
                c = _linear_coeff(ix, f.var)
                if c is None:
                    st["ok"] = False
                    return
                coef[ax] = c
                ext = _const_int(_extent(f))
                if ext is None:
                    st["ok"] = False
                    return
                st["ext"][ax] = max(st["ext"].get(ax, 0), ext)
                rest = E.substitute(rest, {f.var: IntImm(0, f.var.dtype)})
            if st["coef"] is None:
                st["coef"] = coef
            elif st["coef"] != coef:
                st["ok"] = False
                return
            tvars = {id(f.var) for f in threads.values()}
            if _free_vars([rest], set()) and any(id(v) in tvars for v in _free_vars([rest], set())):
                st["ok"] = False
                return
            lo_hi = _interval(rest, ranges)
            if lo_hi is None or lo_hi[0] < 0:
                st["ok"] = False
                return
            st["R"] = max(st["R"], lo_hi[1] + 1)

        def rec(s, threads: dict, ranges: dict):
            if isinstance(s, For):
                if s.kind == ForKind.GPU_THREAD:
                    threads = {**threads, s.axis: s}
                lo, hi = _const_int(s.start), _const_int(s.stop)
                ranges = {**ranges, id(s.var): (lo, hi - 1) if lo is not None and hi is not None else None}
            for e in stmt_exprs(s):
                walk(e, lambda n: visit_index(id(n.buffer), n.indices[0] if n.indices else IntImm(0), threads,
                                              ranges) if isinstance(n, E.Load) and id(n.buffer) in info else None)
            if isinstance(s, Store) and id(s.buffer) in info:
                visit_index(id(s.buffer), s.indices[0] if s.indices else IntImm(0), threads, ranges)
            if isinstance(s, Block):
                for x in s.stmts:
                    rec(x, threads, ranges)
            for f in ("body", "then", "otherwise"):
                c = getattr(s, f, None)
                if c is not None:
                    rec(c, threads, ranges)
        rec(k.stmt, {}, {})
        for bid, st in info.items():
            if not st["ok"] or st["coef"] is None:
                continue
            axes = sorted(st["coef"], key=lambda ax: st["coef"][ax])
            need = st["R"]
            disjoint = True
            for ax in axes:
                c = st["coef"][ax]
                if c < need:
                    disjoint = False
                    break
                need = c * st["ext"][ax]
            if not disjoint:
                continue
            self._scope[bid] = "local"
            self._private_size[bid] = st["R"]

    def _classify_allocs(self, k: _KernelInfo, block) -> None:
        """Scope of every Allocate inside the kernel (see the module docstring)."""
        def rec(s, bound: frozenset):
            if isinstance(s, Block):
                for n, x in enumerate(s.stmts):
                    if isinstance(x, Allocate):
                        self._classify(k, x, bound, s.stmts[n + 1:], block)
                    else:
                        rec(x, bound)
                return
            if isinstance(s, For) and s.kind == ForKind.GPU_THREAD:
                bound = bound | {s.axis}
            for f in ("body", "then", "otherwise"):
                c = getattr(s, f, None)
                if c is not None:
                    rec(c, bound)
        rec(k.stmt, frozenset())

    def _classify(self, k: _KernelInfo, a: Allocate, bound: frozenset, after, block) -> None:
        b = a.buffer
        scope_range = []
        for x in after:
            if isinstance(x, Free) and x.buffer is b:
                break
            scope_range.append(x)
        slices = None
        if not k.bound:
            scope = "global"
        elif not bound:
            scope = "shared"
        elif set(k.thread_axes) <= bound or not any(
                isinstance(y, For) and y.kind == ForKind.GPU_THREAD and self._accesses(y).get(id(b))
                for x in scope_range for y in iter_stmts(x)):
            scope = "local"
        else:
            # threads of the axes bound around the allocation each have their own copy, which
            # the nested thread loops share: a shared array with one slice per such thread
            scope = "shared"
            dims = [block[ax] for ax in sorted(bound)]
            if not all(isinstance(d, int) for d in dims) or b.static_size() is None:
                raise BuildError(f"buffer {b.name} is allocated inside gpu_thread loop(s) on "
                                 f"{', '.join('threadIdx.' + AXES[ax] for ax in sorted(bound))} and shared by the "
                                 "thread loops nested in them: it needs a constant size and constant block "
                                 "dimensions (one shared slice per thread of the outer loops)")
            slices = (sorted(bound), dims)
        want = a.scope if a.scope in ("shared", "local") else None
        if want and want != scope:
            raise BuildError(f"buffer {b.name} is allocated with scope {want!r} but sits where the CUDA backend "
                             f"needs {scope!r} memory ("
                             + ("inside a thread-bound loop" if bound else "outside thread-bound loops") + ")")
        if scope != "global" and b.static_size() is None:
            # a size known only at launch: one global buffer, shared by all threads
            # (see the module docstring for when that is exact)
            scope = "global"
        self._scope[id(b)] = scope
        if scope == "global":
            self._add_scratch(b)
        if slices is not None:
            axes, dims = slices
            terms, stride = [], 1
            for ax, d in zip(axes, dims):
                terms.append(f"(int)threadIdx.{AXES[ax]}" + ("" if stride == 1 else f" * {stride}"))
                stride *= d
            self._slice_factor[id(b)] = stride
            self._slices[id(b)] = f"({' + '.join(terms)}) * {max(b.static_size(), 1)}"

    def _add_scratch(self, b) -> None:
        if id(b) not in self._scratch_index:
            self._scratch_index[id(b)] = len(self.scratch)
            self.scratch.append(b)

    def _dims(self, k: _KernelInfo):
        grid: list[Any] = [1, 1, 1]
        for f in k.block_loops:
            grid[f.axis] = self._launch_extent(f, "gpu_block", k)
        block: list[Any] = [1, 1, 1]
        self._guarded: set[int] = set()
        for a in range(3):
            loops = [f for f in k.thread_loops if f.axis == a]
            if not loops:
                continue
            exts = [self._launch_extent(f, "gpu_thread", k) for f in loops]
            consts = [_const_int(x) for x in exts]
            if all(c is not None for c in consts):
                m = max(consts)
                block[a] = IntImm(m)
                self._guarded |= {id(f) for f, c in zip(loops, consts) if c != m}
            elif all(structural_equal(x, exts[0]) for x in exts):
                block[a] = exts[0]
            else:
                d = exts[0]
                for x in exts[1:]:
                    d = E.Max(d, x) if d.dtype == x.dtype else d
                block[a] = d
                self._guarded |= {id(f) for f in loops}
        grid = tuple(_const_int(g) if isinstance(g, Expr) and _const_int(g) is not None else g for g in grid)
        block = tuple(_const_int(b) if isinstance(b, Expr) and _const_int(b) is not None else b for b in block)
        for a, (g, lim) in enumerate(zip(grid, MAX_GRID_DIMS)):
            if isinstance(g, int) and g > lim:
                raise BuildError(f"kernel {k.index}: the grid has {g} blocks on axis {AXES[a]}, more than the "
                                 f"CUDA limit {lim}")
        for a, (b, lim) in enumerate(zip(block, MAX_BLOCK_DIMS)):
            if isinstance(b, int) and b > lim:
                raise BuildError(f"kernel {k.index}: {b} threads on axis {AXES[a]} exceed the CUDA limit {lim} "
                                 f"(loops {', '.join(f.var.name for f in k.thread_loops if f.axis == a)})")
        if all(isinstance(b, int) for b in block) and math.prod(block) > self.max_threads:
            raise BuildError(f"kernel {k.index} binds {' x '.join(map(str, block))} = {math.prod(block)} threads per "
                             f"block, more than the limit of {self.max_threads} (thread-bound loops "
                             f"{', '.join(f'{f.var.name}->threadIdx.{AXES[f.axis]}' for f in k.thread_loops)}); "
                             "split them further and keep the outer parts serial or bound to blocks")
        return grid, block

    def _launch_extent(self, f: For, what: str, k: _KernelInfo) -> Expr:
        ext = _extent(f)
        sizes = self._size_ids
        bad = [v for v in _free_vars([ext], set()) if id(v) not in sizes]
        if bad:
            raise BuildError(f"the extent of {what} loop {f.var.name} ({ext}) depends on "
                             f"{', '.join(v.name for v in bad)}, which is not a size argument: grid and block "
                             "sizes must be known at launch (split with a mask rather than a tail, or bind an "
                             "outer loop)")
        return ext

    def _kernel(self, s: Stmt, index: int) -> KernelSpec:
        k = _KernelInfo(s, index)
        self.kinfo = k
        grid, block = self._dims(k)
        self._classify_allocs(k, block)
        self._promote_private(k, block)
        # each __shared__ array is 16-byte aligned: count its padded size
        shared = sum(-(-self._shared_size(b) // 16) * 16 for b in self._buffers_with_scope(k, "shared"))
        if shared > self.max_shared:
            names = ", ".join(f"{b.name} ({self._shared_size(b)} B)"
                              for b in self._buffers_with_scope(k, "shared"))
            raise BuildError(f"kernel {index} needs {shared} bytes of shared memory ({names}), more than the "
                             f"limit of {self.max_shared} bytes; use smaller tiles")
        name = f"k{index}_{self.base}"
        self._taken.add(name)
        for x in iter_stmts(s):  # pre-order: outer loops are known before inner ones
            if isinstance(x, For) and self._nonneg(x.start):
                self._nonneg_vars.add(id(x.var))
        # body
        body_mark = len(self.lines)
        self.indent = 1
        for f in k.block_loops:
            v = self.var(f.var)
            vt = compute_type(f.var.dtype)
            start = self.expr(f.start, None, True)
            self.emit(f"const {vt} {v} = ({vt})blockIdx.{AXES[f.axis]}" + ("" if start == "0" else f" + {start}") + ";")
        if k.bound:
            self._uniform(k.region, {}, _Ctx())
        else:
            self.stmt(s, _Ctx())
        body = self.lines[body_mark:]
        del self.lines[body_mark:]
        self.indent = 0
        # arguments: buffers used (params, then scratch), then size variables
        used: dict[int, Any] = {}
        written: set[int] = set()
        bound_vars: set[int] = set()
        exprs = []
        for x in iter_stmts(s):
            if isinstance(x, Store):
                used.setdefault(id(x.buffer), x.buffer)
                written.add(id(x.buffer))
            if isinstance(x, (For, Let)):
                bound_vars.add(id(x.var))
            exprs.extend(stmt_exprs(x))
        for e in exprs:
            walk(e, lambda n: used.setdefault(id(n.buffer), n.buffer) if isinstance(n, E.Load) else None)
            walk(e, lambda n: bound_vars.add(id(n.var)) if isinstance(n, E.Let) else None)
        for f in k.thread_loops:
            exprs.append(_extent(f))
        args: list[ArgRef] = []
        sig: list[str] = []
        order = sorted((b for b in used.values() if id(b) in self._param_index),
                       key=lambda b: self._param_index[id(b)])
        order += sorted((b for b in used.values() if id(b) in self._scratch_index),
                        key=lambda b: self._scratch_index[id(b)])
        for b in order:
            n = self.buf(b)
            st = self.storage_type(b.dtype)
            const = "" if id(b) in written else "const "
            sig.append(f"{const}{st}* __restrict__ {n}")
            w = id(b) in written
            if id(b) in self._param_index:
                args.append(ArgRef("param", self._param_index[id(b)], name=n, written=w))
            else:
                args.append(ArgRef("scratch", self._scratch_index[id(b)], name=n, written=w))
        for v in _free_vars(exprs, bound_vars):
            if id(v) not in self._size_ids:
                raise BuildError(f"variable {v.name} is used by the nest but is neither bound by a loop nor a "
                                 "size argument of build")
            if v.dtype.is_vector or not v.dtype.is_integer:
                raise BuildError(f"size variable {v.name} must be a scalar integer, got {v.dtype}")
            n = self.var(v)
            sig.append(f"{compute_type(v.dtype)} {n}")
            args.append(ArgRef("size", var=v, name=n))
        threads = KernelSpec(name, grid, block, args, shared, k.bound, s).static_threads
        lb = f"__launch_bounds__({threads}) " if threads else ""
        def show(dims):  # user names stay out of comments: symbolic sizes print as "?"
            return ", ".join(str(d) if isinstance(d, int) else "?" for d in dims)
        what = ("single-thread kernel: no loop is bound to the GPU" if not k.bound else
                f"grid ({show(grid)}), block ({show(block)})")
        self.emit(f"// {name}: {what}")
        self.emit(f'extern "C" __global__ void {lb}{name}({", ".join(sig)}) {{')
        self.lines.extend(body)
        self.emit("}")
        self.emit("")
        self.kinfo = None
        return KernelSpec(name, grid, block, args, shared, k.bound, s)

    def _shared_size(self, b) -> int:
        return b.static_size() * b.dtype.itemsize * self._slice_factor.get(id(b), 1)

    def _buffers_with_scope(self, k: _KernelInfo, scope: str):
        seen = {}
        for x in iter_stmts(k.stmt):
            if isinstance(x, Allocate) and self._scope.get(id(x.buffer)) == scope:
                seen[id(x.buffer)] = x.buffer
        return list(seen.values())

    def run(self, root: Stmt) -> CudaModuleSpec:
        """Emit every kernel of ``root`` and assemble the module."""
        self._size_ids: set[int] = set()
        for p in self.params:
            if p.var is not None:
                self._size_ids.add(id(p.var))
            if p.buffer is not None:
                for d in p.buffer.dims:
                    walk(d, lambda n: self._size_ids.add(id(n)) if isinstance(n, Var) else None)
        for p in self.buffer_params:
            if p.buffer.dtype.is_vector:
                raise BuildError(f"argument {p.name} has a vector element type ({p.buffer.dtype}); "
                                 "the CUDA backend takes scalar element types")
        kernels = []
        for s in _flatten(root):
            if isinstance(s, Allocate):
                self._scope[id(s.buffer)] = "global"
                self._add_scratch(s.buffer)
                continue
            if isinstance(s, Free):
                continue
            kernels.append(self._kernel(s, len(kernels)))
        for b in self.scratch:
            bad = [v for v in _free_vars(b.dims, set()) if id(v) not in self._size_ids]
            if bad:
                raise BuildError(f"the size of intermediate {b.name} depends on {', '.join(v.name for v in bad)}, "
                                 "which is not a size argument")
        head = ["// CUDA C generated by codegen.cuda from a prepared loop nest", ""]
        src = "\n".join(head) + self.helpers.source() + "\n".join(self.lines)
        return CudaModuleSpec(src.rstrip() + "\n", kernels, list(self.scratch), self.helpers.headers)


def _contains(e: Expr, v: Var) -> bool:
    found = []
    walk(e, lambda n: found.append(1) if n is v else None)
    return bool(found)


def _linear_coeff(e: Expr, v: Var) -> int | None:
    """``c`` when ``e == c * v + (terms without v)`` with a constant ``c``, else None."""
    if not _contains(e, v):
        return 0
    if e is v:
        return 1
    t = type(e)
    if t in (E.Add, E.Sub):
        a, b = _linear_coeff(e.a, v), _linear_coeff(e.b, v)
        if a is None or b is None:
            return None
        return a + b if t is E.Add else a - b
    if t is E.Mul:
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if not _contains(y, v):
                c, k = _linear_coeff(x, v), _const_int(y)
                return None if c is None or k is None else c * k
    return None


def _interval(e: Expr, ranges: dict) -> tuple[int, int] | None:
    """Integer bounds of ``e`` given ``ranges`` ({id(var): (lo, hi)}), or None."""
    t = type(e)
    if t is IntImm:
        return e.value, e.value
    if t is Var:
        return ranges.get(id(e))
    if t in (E.Add, E.Sub, E.Mul, E.Min, E.Max):
        a, b = _interval(e.a, ranges), _interval(e.b, ranges)
        if a is None or b is None:
            return None
        if t is E.Add:
            return a[0] + b[0], a[1] + b[1]
        if t is E.Sub:
            return a[0] - b[1], a[1] - b[0]
        if t is E.Min:
            return min(a[0], b[0]), min(a[1], b[1])
        if t is E.Max:
            return max(a[0], b[0]), max(a[1], b[1])
        prods = [x * y for x in a for y in b]
        return min(prods), max(prods)
    if t in (E.FloorDiv, E.FloorMod):
        a, k = _interval(e.a, ranges), _const_int(e.b)
        if a is None or not k or k <= 0:
            return None
        return (a[0] // k, a[1] // k) if t is E.FloorDiv else (0, k - 1)
    return None


def _flatten(s: Stmt) -> list[Stmt]:
    if isinstance(s, Block):
        out = []
        for x in s.stmts:
            out.extend(_flatten(x))
        return out
    return [s]


def _merge(a: dict, b: dict) -> dict:
    out = {k: [v[0], set(v[1])] for k, v in a.items()}
    for k, v in b.items():
        if k in out:
            out[k][1] |= v[1]
        else:
            out[k] = [v[0], set(v[1])]
    return out


def _conflict(a: dict, b: dict) -> str | None:
    """The name of a buffer one side writes and the other touches, else None."""
    for k, (buf, ma) in a.items():
        if k in b:
            mb = b[k][1]
            if "w" in ma or "w" in mb:
                return buf.name
    return None


def _round_to(value: float, dt: Dtype) -> float:
    """``value`` rounded to the low-precision format ``dt`` (as te.lowprec does)."""
    if math.isnan(value) or math.isinf(value):
        return value
    try:
        from te.lowprec import convert
        return float(np.asarray(convert(np.array([value], np.float64), "float64", dt.scalar_name),
                                dtype=np.float64)[0]) if dt.kind != "tf32" else \
            float(np.asarray(convert(np.array([value], np.float64), "float64", "tf32"))[0])
    except Exception:  # pragma: no cover - fall back to numpy/ml_dtypes rounding
        return float(np.array([value]).astype(dt.numpy).astype(np.float64)[0])


def emit_cuda(nest, params: Sequence[Param], name: str, **options) -> CudaModuleSpec:
    """CUDA C for the prepared ``nest`` with kernel arguments ``params``.

    Options: ``fast_math`` (``__expf``-style intrinsics), ``max_threads_per_block``
    (default 1024) and ``max_shared_bytes`` (default 48 KiB): a nest over those limits is
    refused with a BuildError.
    """
    if not getattr(nest, "prepared", True):
        raise BuildError("emit_cuda takes a prepared nest: call nest.prepare_for_codegen() first")
    root = nest.root if hasattr(nest, "root") else nest
    em = CudaEmitter(nest, params, name, **options)
    return em.run(root)
