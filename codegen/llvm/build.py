"""``build_llvm``: a prepared loop nest -> a JIT-compiled ``LLVMKernel``.

>>> import numpy as np
>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> from codegen.kernel import make_params
>>> A = Buffer("A", (4,), "float32")
>>> B = Compute("B", (4,), lambda i: A[i] * 2.0 + 1.0)
>>> nest = LoopNest([B]).prepare_for_codegen()
>>> k = build_llvm(nest, make_params(nest, [A, B]))
>>> b = np.empty(4, np.float32); k(np.arange(4, dtype=np.float32), b); b.tolist()
[1.0, 3.0, 5.0, 7.0]
>>> k.source.splitlines()[0]
'; ModuleID = "te_B"'
"""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import math
import os
from typing import Any, Sequence

import numpy as np

from te import expr as E
from te.expr import IntImm, Var
from te.queries import free_vars
from te.tensor import Buffer, Tensor
from loopnest.index_checks import drop_index_checks
from loopnest.passes import legalize_for_target
from loopnest.queries import external_buffers, stmt_free_vars, stmt_stored_buffers
from loopnest.stmt import ExternCall, For, ForKind, Stmt, iter_stmts, stmt_exprs
from loopnest.target import host_target

from ..kernel import BuildError, Kernel, Param, sanitize_name
from . import evex_check, jit
from .cache_key import stmt_key
from .emit import EmitOptions, emit_module
from .entry import ALIASED
from .extern import EXTERN_FAILED
from .memory import INDEX_OUT_OF_RANGE, index_sites
from .parallel import RESERVED_SYMBOLS, RUNTIMES
from .types import arg_type, round_to_dtype

__all__ = ["build_llvm", "LLVMKernel", "streaming_store_threshold"]

_INT_CTYPES = {"int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32, "int64": ctypes.c_int64,
               "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32,
               "uint64": ctypes.c_uint64}


def _arg_ctype(dt) -> type:
    """The ctypes type of a scalar parameter, matching ``types.arg_type`` (bool: a byte;
    float16, bfloat16, tf32, float8: a C float holding the value rounded to the dtype)."""
    if dt.is_bool:
        return ctypes.c_uint8
    if dt.is_integer:
        return _INT_CTYPES[dt.name]
    return ctypes.c_double if str(arg_type(dt)) == "double" else ctypes.c_float


def _scalar_converter(var: Var, kernel_name: str):
    """A function turning a bound scalar (``Kernel.bind`` gives ints, floats and bools) into
    the value passed to the compiled entry point, or raising ``ValueError`` when it does not
    fit the dtype. Float values are rounded once to the dtype, as a ``Cast`` of a constant
    (float16 and bfloat16 included: the kernel sees the rounded value); NaN and infinities
    pass through, finite values beyond the dtype's largest finite value are refused (as IREval
    refuses them) instead of silently becoming infinite."""
    dt = var.dtype
    lo, hi = dt.min_value(), dt.max_value()

    def refuse(v):
        return ValueError(f"argument {var.name} of {kernel_name}: {var.name} = {v} does not fit its dtype {dt} "
                          f"(range [{lo}, {hi}]); pass a value in range or use a wider dtype")
    if dt.is_bool:
        return lambda v: 1 if v else 0
    if dt.is_integer:
        def to_int(v):
            if not lo <= v <= hi:
                raise refuse(v)
            return v
        return to_int

    def to_float(v):
        v = float(v)
        if not lo <= v <= hi and math.isfinite(v):
            raise refuse(v)
        return float(round_to_dtype(v, dt))
    return to_float


class LLVMKernel(Kernel):
    """A kernel compiled to host machine code through LLVM.

    ``source`` is the readable LLVM IR before optimisation, ``optimized_source`` the IR after
    the O3 pipeline (None when the object code came from the disk cache without it).
    ``symbol`` is the name of the kernel function in the IR.

    Calls with positional numpy arrays of the right dtype, rank and shape (the common case)
    take a fast path that checks exactly what ``Kernel.bind`` checks in a few attribute
    reads, with the sizes passed too where each equals the dimension it is read off (a
    symbolic 1024 x 1024 product of 1 row: 12 us less per call than the general binding);
    anything else (keywords, sizes that are not read off a shape, omitted outputs, strided or
    DLPack arrays, and every error) goes through ``Kernel.bind``, so the messages are the same.
    """

    target = "llvm"

    def __init__(self, name: str, params: list[Param], stmt, source: str, optimized_source: str | None,
                 compiled: jit.Compiled, symbol: str, scalar_vars: Sequence[Var], fast_math: bool,
                 parallel_runtime: str, pyobject_entry: bool):
        super().__init__(name, params, stmt, source)
        self.optimized_source = optimized_source
        self.symbol = symbol
        self.fast_math = fast_math
        self.parallel_runtime = parallel_runtime
        self.scalar_vars = list(scalar_vars)
        self._compiled = compiled  # keeps the JIT engine (and the code) alive
        scalar_ct = [_arg_ctype(v.dtype) for v in scalar_vars]
        nbuf = len(self._buffer_params)
        self._cfunc = ctypes.CFUNCTYPE(ctypes.c_int32, *([ctypes.c_void_p] * nbuf + scalar_ct))(compiled.address)
        self._pyfunc = None
        if pyobject_entry and compiled.py_address:
            self._pyfunc = ctypes.CFUNCTYPE(ctypes.c_int32, *([ctypes.py_object] * nbuf + scalar_ct))(
                compiled.py_address)
        self._scalar_ids = [id(v) for v in scalar_vars]
        self._scalar_conv = [_scalar_converter(v, name) for v in scalar_vars]
        # upper bounds of the sizes the fast path reads off shapes (those are always integers)
        self._size_max = [int(v.dtype.max_value()) if v.dtype.is_integer else None for v in scalar_vars]
        self._safe: LLVMKernel | None = None
        self._build_safe = lambda: self  # replaced by build_llvm when the kernel assumes no aliasing
        written = {id(b) for b in stmt_stored_buffers(stmt)}
        self._written = [id(p.buffer) in written for p in self._buffer_params]
        self._fast = self._fast_plan()
        self._size_reads = self._size_read_plan() if self._fast is not None else None

    def _size_read_plan(self):
        """For calls that pass the sizes too, in the order of ``params``: the positions of
        the arrays, and per size its position, the array position and the axis it is read
        off; None when a size is not read off an array's shape."""
        arrays, sizes = [], []
        for pos, p in enumerate(self.params):
            if p.is_buffer:
                arrays.append(pos)
                continue
            where = next(((bpos, k) for bpos, q in enumerate(self.params) if q.is_buffer
                          for k, d in enumerate(q.buffer.dims) if d is p.var), None)
            if where is None:
                return None
            sizes.append((pos, *where))
        return (tuple(arrays), tuple(sizes)) if sizes else None

    def _without_sizes(self, args: tuple) -> tuple | None:
        """``args`` (every parameter, in order) less the sizes, when each size is an int equal
        to the array dimension it would be read off (the call is then the same without them);
        None otherwise (the general binding checks and reports)."""
        arrays, sizes = self._size_reads
        for pos, bpos, axis in sizes:
            v, a = args[pos], args[bpos]
            if type(v) is not int or type(a) is not np.ndarray or a.ndim <= axis or a.shape[axis] != v:
                return None
        return tuple(args[pos] for pos in arrays)

    def _fast_plan(self):
        """Per buffer param: (numpy dtype, ndim, ((axis, const), ...), ((axis, slot), ...)), or
        None when some param needs the general binding (layouts, derived dimensions)."""
        if not self._buffer_params:
            return None
        slots: dict[int, int] = {}
        plan = []
        written_ids = {id(p.buffer) for p, w in zip(self._buffer_params, self._written) if w}
        for p in self._buffer_params:
            buf = p.buffer
            if buf.layout is not None:
                return None
            consts, vars_ = [], []
            for k, d in enumerate(buf.dims):
                if isinstance(d, IntImm):
                    consts.append((k, d.value))
                elif isinstance(d, Var):
                    vars_.append((k, slots.setdefault(id(d), len(slots))))
                else:
                    return None
            ndim = buf.ndim
            if buf.dtype.lanes > 1:   # vector elements: the lanes are the array's last axis
                consts.append((ndim, buf.dtype.lanes))
                ndim += 1
            plan.append((buf.dtype.numpy, ndim, tuple(consts), tuple(vars_), id(buf) in written_ids))
        var_slot = {vid: s for vid, s in slots.items()}
        scalar_slots = []
        for v in self.scalar_vars:
            if id(v) not in var_slot or not v.dtype.is_integer:
                return None  # a size that must be passed explicitly
            scalar_slots.append(var_slot[id(v)])
        self._n_slots = len(slots)
        self._scalar_slots = scalar_slots
        return tuple(plan)

    def __call__(self, *args, **kwargs):
        plan = self._fast
        if self._size_reads is not None and not kwargs and len(args) == len(self.params):
            args = self._without_sizes(args) or args
        if plan is not None and not kwargs and len(args) == len(plan):
            vals = [None] * self._n_slots
            ok = True
            for a, (dt, ndim, consts, vars_, written) in zip(args, plan):
                if type(a) is not np.ndarray or (a.dtype is not dt and a.dtype != dt) or a.ndim != ndim:
                    ok = False
                    break
                flags = a.flags
                if not flags.c_contiguous or (written and not flags.writeable):
                    if not written and not flags.c_contiguous:
                        # a strided input: the same call on its contiguous copy (Kernel docstring)
                        return self(*[np.ascontiguousarray(x) if x is a else x for x in args])
                    ok = False
                    break
                shape = a.shape
                for k, c in consts:
                    if shape[k] != c:
                        ok = False
                for k, slot in vars_:
                    v = vals[slot]
                    if v is None:
                        vals[slot] = shape[k]
                    elif v != shape[k]:
                        ok = False
                if not ok:
                    break
            if ok:
                sizes = [vals[s] for s in self._scalar_slots]
                for v, hi in zip(sizes, self._size_max):
                    if v > hi:
                        ok = False   # the general path reports it
            if ok:
                if self._guard is not None:   # call-time checks (codegen.kernel): vals is in size_order
                    self._guard(vals)
                if self._pyfunc is not None:
                    rc = self._pyfunc(*args, *sizes)
                else:
                    rc = self._cfunc(*[a.__array_interface__["data"][0] for a in args], *sizes)
                if rc:
                    if rc == ALIASED:
                        self._aliased_variant()(*args)
                        return
                    self._failed(rc)
                return
        return self._call(args, kwargs)

    def _launch(self, arrays: list, sizes: dict) -> None:
        for p, a, w in zip(self._buffer_params, arrays, self._written):
            if w and not a.flags.writeable:
                raise ValueError(f"argument {p.name} of {self.name} is written by the kernel but the array "
                                 "is read-only")
        scalars = [conv(sizes[k]) for conv, k in zip(self._scalar_conv, self._scalar_ids)]
        if self._pyfunc is not None and all(type(a) is np.ndarray for a in arrays):
            rc = self._pyfunc(*arrays, *scalars)
        else:
            rc = self._cfunc(*[a.__array_interface__["data"][0] for a in arrays], *scalars)
        if rc:
            if rc == ALIASED:
                self._aliased_variant()._launch(arrays, sizes)
                return
            self._failed(rc)

    def _aliased_variant(self) -> "LLVMKernel":
        """The same kernel compiled without ``noalias`` (built on the first call whose arrays
        overlap in memory; compiled code assumes distinct arguments otherwise)."""
        if self._safe is None:
            self._safe = self._build_safe()
        return self._safe

    def _failed(self, rc: int):
        """Raise the error a non-zero kernel result ``rc`` stands for."""
        if rc >= INDEX_OUT_OF_RANGE:
            sites = index_sites(self.stmt)
            k = rc - INDEX_OUT_OF_RANGE
            where = (f"{sites[k][0]} is outside the buffer in dimension {sites[k][1]}" if k < len(sites)
                     else "an index is outside its buffer")
            raise IndexError(f"kernel {self.name}: a data-dependent index (one that loads, e.g. H[A[i]]) of "
                             f"{where}; the kernel stopped there (what it wrote before stays written); keep the "
                             "data in range, or clamp the index")
        if rc >= EXTERN_FAILED:
            calls = [s for s in iter_stmts(self.stmt) if isinstance(s, ExternCall)]
            name = calls[rc - EXTERN_FAILED].func.name if rc - EXTERN_FAILED < len(calls) else "?"
            raise RuntimeError(f"kernel {self.name}: the external function {name} returned a non-zero status; "
                               "the outputs are incomplete")
        self._alloc_failed()

    def _alloc_failed(self):
        from loopnest.stmt import Allocate
        from .emit import STACK_LIMIT
        bufs = {id(s.buffer): s.buffer for s in iter_stmts(self.stmt) if isinstance(s, Allocate)}.values()
        heap = [b.name for b in bufs if b.static_size() is None
                or b.static_size() * b.dtype.itemsize * b.dtype.lanes > STACK_LIMIT] or [b.name for b in bufs]
        raise MemoryError(f"kernel {self.name}: the allocation of the intermediate buffer "
                          f"{' or '.join(heap)} returned NULL; free memory, raise the process's memory limit or call the kernel "
                          "with smaller sizes")


_STREAMING: list = []


def streaming_store_bytes() -> int:
    """The streaming-store threshold (``EmitOptions.nontemporal_min_bytes``, see
    ``streaming.streaming_outputs``): half the last-level cache of this machine
    (``loopnest.target.host_target``), the part of it a kernel can count on keeping.
    ``TE_LLVM_STREAMING_STORES=0`` turns streaming stores off; another integer sets the
    threshold in bytes."""
    if not _STREAMING:
        env = os.environ.get("TE_LLVM_STREAMING_STORES", "").strip()
        if env.isdigit():
            _STREAMING.append(int(env))
        else:
            t = host_target()
            _STREAMING.append(max(t.l2_bytes, t.l3_bytes) // 2)
    return _STREAMING[0]


@contextlib.contextmanager
def streaming_store_threshold(min_bytes: int):
    """Within the block, kernels built (in this thread or any other) take ``min_bytes`` as the
    streaming-store threshold instead of ``streaming_store_bytes()``: 1 streams every output
    a kernel never reads, whatever its size (the random tester uses it to reach the streaming
    stores with small arrays), 0 none. ``min_bytes`` must be an int of at least 0.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> from codegen import build
    >>> A = Buffer("A", (64,), "float32"); B = Compute("B", (64,), lambda i: A[i] + 1.0)
    >>> nest = LoopNest([B]); _, v, _ = nest.split_with_tail(nest.get_loops_for(B)[0], 16)
    >>> _ = nest.vectorize(v)
    >>> with streaming_store_threshold(1):
    ...     "!nontemporal" in build(nest, [A, B], target="llvm").source
    True
    >>> with streaming_store_threshold(-1):
    ...     pass
    Traceback (most recent call last):
    ...
    ValueError: streaming_store_threshold takes a byte count of at least 0 (0: no streaming stores, 1: every output never read), got -1
    """
    if isinstance(min_bytes, bool) or not isinstance(min_bytes, int) or min_bytes < 0:
        raise ValueError("streaming_store_threshold takes a byte count of at least 0 (0: no streaming stores, "
                         f"1: every output never read), got {min_bytes!r}")
    saved = list(_STREAMING)
    _STREAMING[:] = [min_bytes]
    try:
        yield
    finally:
        _STREAMING[:] = saved


_DATA_OFFSET: list = []


def _array_data_offset() -> int | None:
    """The byte offset of the data pointer in a numpy array object (PyArrayObject.data),
    verified on several arrays; None when it cannot be established (then kernels read
    ``__array_interface__`` per call instead)."""
    if not _DATA_OFFSET:
        import sys
        found = None
        # reading inside the array objects is safe: every offset probed lies within the
        # PyArrayObject header of CPython (elsewhere ``id`` is no address, so never probe)
        if sys.implementation.name == "cpython":
            samples = [np.zeros(3, np.float32), np.ones((2, 5), np.int8), np.zeros(0, np.float64),
                       np.zeros((), np.int64), np.arange(10)[2:]]
            for off in range(8, 80, 8):
                if all(ctypes.c_void_p.from_address(id(a) + off).value == a.__array_interface__["data"][0]
                       for a in samples):
                    found = off
                    break
        _DATA_OFFSET.append(found)
    return _DATA_OFFSET[0]


def _kernel_name(nest, params: Sequence[Param]) -> str:
    outs = getattr(nest, "outputs", None) or []
    names = [o.name for o in outs] or [p.name for p in params if p.is_buffer][-1:] or ["kernel"]
    return sanitize_name("_".join(names))


def _has_parallel(root) -> bool:
    return any(isinstance(s, For) and s.kind == ForKind.PARALLEL for s in iter_stmts(root))


def _scalar_vars(root, params: Sequence[Param], name: str) -> list[Var]:
    """The kernel's scalar arguments: the Var params in order, then every other free variable
    of ``root``, which must be a dimension of a buffer parameter (bound from its shape), then
    the size variables of buffer shapes that the statement does not use: the ``noalias``
    overlap check computes every argument's extent from its shape, so those sizes are passed
    too (a size that appears only in a shape, like ``M`` of ``A[M]`` read at ``i < N``)."""
    buffer_params = [p for p in params if p.is_buffer]
    param_bufs = {id(p.buffer) for p in buffer_params}
    for b in external_buffers(root):
        if id(b) not in param_bufs:
            raise BuildError(f"kernel {name}: buffer {b.name} is accessed but is neither a parameter nor "
                             "allocated in the nest (was the nest prepared with prepare_for_codegen()?)")
    out = [p.var for p in params if not p.is_buffer]
    have = {id(v) for v in out}
    shape_vars = {id(d): d for p in buffer_params for d in p.buffer.dims if isinstance(d, Var)}
    for v in stmt_free_vars(root):
        if id(v) in have:
            continue
        if id(v) not in shape_vars:
            raise BuildError(f"kernel {name}: variable {v.name} is used but is neither a parameter nor a "
                             "dimension of a buffer parameter; add it to build's argument list")
        out.append(v)
        have.add(id(v))
    for p in buffer_params:
        for v in free_vars(p.buffer.dims):
            if id(v) not in have:
                out.append(v)
                have.add(id(v))
    for v in out:
        if v.dtype.lanes != 1:
            raise BuildError(f"kernel {name}: scalar parameter {v.name} has the vector dtype {v.dtype}; kernel "
                             f"parameters are scalars or buffers: pass a buffer of {v.dtype.element} instead")
    return out


def _check_half_support(source: str, name: str) -> None:
    h = jit.host_info()
    if " half" in source and h["triple"].startswith(("x86_64", "i386", "i686")) and "+f16c" not in h["features"]:
        raise BuildError(f"kernel {name} uses float16, which needs the F16C instructions this CPU "
                         f"({h['cpu']}) lacks on the llvm target")


def build_llvm(nest, params: list[Param], fast_math: bool = False, *, fp_contract: bool = True,
               parallel_runtime: str | None = None,
               opt_level: int = 3, cache: bool = True, cache_dir: Any = None, name: str | None = None,
               noalias: bool | None = None, index_checks: bool = True) -> LLVMKernel:
    """Compile a prepared nest (anything with ``.root`` and ``.outputs``) to an ``LLVMKernel``.

    ``fast_math`` puts LLVM's ``fast`` flags on float operations (reassociation, no NaN/Inf
    guarantees); off by default. ``fp_contract`` (default on) lets LLVM fuse a float multiply
    with the add or subtract that consumes it into one FMA instruction (a single rounding, so
    float results may differ from IREval in the last bits, as nvcc's default contraction does
    on CUDA); ``fp_contract=False`` rounds every operation. ``parallel_runtime`` is "pool",
    "gomp", "threads" or "serial" (default: ``runtime.default_runtime()``). ``opt_level`` is LLVM's 0-3. ``cache=False``
    skips the in-memory compile cache; ``cache_dir`` (or ``TE_LLVM_CACHE_DIR``) enables the
    on-disk object cache (``disk_cache``: entries are checked against a checksum before they
    are loaded; a directory another user owns or others can write is not used, with a
    ``CacheWarning``; a path that is a file raises ``BuildError``). ``name`` overrides the
    kernel name (default: the output names).

    ``noalias`` (default: on when every buffer argument is a plain row-major buffer) compiles
    the kernel assuming its array arguments do not overlap, which lets LLVM keep values in
    registers and skip run-time alias checks; the kernel checks that assumption on every call
    (a few comparisons of address ranges) and runs a variant compiled with ``noalias=False``
    when a written array overlaps another one, so aliasing arguments stay correct.

    Scalar parameters (Vars in the argument list) may have any scalar dtype. The kernel
    takes integers as C integers, bool as a byte, float64 as a double and the other floats as
    a C float holding the value rounded once to the dtype (float16, bfloat16, tf32, float8:
    what a ``Cast`` of the constant gives); NaN and infinities pass, a finite value outside
    the dtype's range raises ``ValueError``. Every size variable of a buffer's shape is passed
    too, also one the loops never use (the ``noalias`` overlap check needs each extent).

    ``index_checks`` (default on) keeps the run-time checks of data-dependent indices that
    ``loopnest.index_checks`` put into the nest: a histogram's bin outside its dimension
    raises ``IndexError`` instead of writing outside the array or into another row;
    ``index_checks=False`` removes them (``build(..., bounds_check=False)`` removes them first).

    Options of the wrong type raise ``BuildError`` naming the option.

    >>> import numpy as np
    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> from codegen.kernel import make_params
    >>> A = Buffer("A", (4,), "float32")
    >>> nest = LoopNest([Compute("B", (4,), lambda i: A[i] * A[i] - 1.0)]).prepare_for_codegen()
    >>> k = build_llvm(nest, make_params(nest, [A, nest.outputs[0]]), fp_contract=False)
    >>> "contract" in k.source      # every operation rounded, as IREval does
    False
    >>> b = np.zeros(4, np.float32); k(np.arange(4, dtype=np.float32), b); b.tolist()
    [-1.0, 0.0, 3.0, 8.0]
    >>> build_llvm(nest, make_params(nest, [A, nest.outputs[0]]), fp_contract="no")
    Traceback (most recent call last):
    ...
    codegen.kernel.BuildError: fp_contract must be a bool, got 'no'
    """
    from . import runtime
    root = getattr(nest, "root", None)
    if not isinstance(root, Stmt):
        raise BuildError(f"build_llvm needs a prepared LoopNest (with a root statement), got {nest!r}")
    if getattr(nest, "prepared", False):     # unprepared nests are refused by the emitter
        nest = legalize_for_target(nest, "llvm")
        root = nest.root
    if not isinstance(index_checks, bool):
        raise BuildError(f"index_checks must be a bool, got {index_checks!r}")
    if not index_checks:
        root = drop_index_checks(nest, root)
    name = sanitize_name(name) if name else _kernel_name(nest, params)
    symbol = f"te_{name}"
    if symbol in RESERVED_SYMBOLS:
        symbol += "_kernel"
    if not isinstance(fast_math, bool):
        raise BuildError(f"fast_math must be a bool, got {fast_math!r}")
    if not isinstance(fp_contract, bool):
        raise BuildError(f"fp_contract must be a bool, got {fp_contract!r}")
    if isinstance(opt_level, bool) or opt_level not in (0, 1, 2, 3):
        raise BuildError(f"opt_level must be 0, 1, 2 or 3, got {opt_level!r}")
    if not isinstance(cache, bool):
        raise BuildError(f"cache must be a bool, got {cache!r}")
    if noalias is not None and not isinstance(noalias, bool):
        raise BuildError(f"noalias must be a bool or None, got {noalias!r}")
    if cache_dir is not None and cache_dir is not False and not isinstance(cache_dir, (str, os.PathLike)):
        raise BuildError(f"cache_dir must be a path (str or os.PathLike), got {cache_dir!r}")
    if parallel_runtime is not None and parallel_runtime not in RUNTIMES:
        raise BuildError(f"unknown parallel_runtime {parallel_runtime!r}; expected one of {RUNTIMES}")
    rt = "serial"
    if _has_parallel(root):
        rt = parallel_runtime or runtime.default_runtime()
        if rt not in RUNTIMES:
            raise BuildError(f"unknown parallel runtime {rt!r} (from TE_LLVM_PARALLEL_RUNTIME); "
                             f"expected one of {RUNTIMES}")
        runtime.ensure_runtime(rt)
    buffer_params = [p for p in params if p.is_buffer]
    scalar_vars = _scalar_vars(root, params, name)
    plain = all(type(p.buffer) in (Buffer, Tensor) and p.buffer.layout is None for p in buffer_params)
    if noalias is None:
        noalias = plain
    elif noalias and not plain:
        raise BuildError(f"kernel {name}: noalias=True needs plain row-major buffer arguments (a buffer with a "
                         "layout or a view may span memory its shape does not describe)")
    noalias = bool(noalias) and len(buffer_params) > 1
    nt_bytes = streaming_store_bytes() if plain else 0
    key = None
    hit = None
    if cache:
        key = (stmt_key(root, [p.buffer for p in buffer_params], scalar_vars), symbol, fast_math, fp_contract, rt,
               opt_level, noalias, nt_bytes, index_checks)
        hit = jit.lookup(key)
    if hit is not None:
        source, compiled = hit
    else:
        try:
            h = jit.host_info()
            opts = EmitOptions(fast_math=fast_math, fp_contract=fp_contract, parallel_runtime=rt,
                               array_data_offset=_array_data_offset(), triple=h["triple"],
                               data_layout=jit.data_layout(), noalias=noalias, nontemporal_min_bytes=nt_bytes,
                               cpu_features=h["features"])
            module = emit_module(symbol, root, buffer_params, scalar_vars, opts)
        except BuildError as exc:
            raise BuildError(f"kernel {name}: {exc}") from None
        source = str(module)
        _check_half_support(source, name)
        def without_avx512() -> str:    # the IR jit.compile_ir compiles for a CPU without AVX-512
            plain = dataclasses.replace(opts, cpu_features=f"{opts.cpu_features},{evex_check.FALLBACK_FEATURES}")
            return str(emit_module(symbol, root, buffer_params, scalar_vars, plain))
        compiled = jit.compile_ir(source, symbol, name, opt=opt_level, cache_dir=cache_dir,
                                  py_symbol=symbol + "_py" if opts.array_data_offset is not None else None,
                                  fallback_ir=without_avx512)
        if key is not None:
            jit.remember(key, source, compiled)
    kernel = LLVMKernel(name, list(params), root, source, compiled.optimized_ir, compiled, symbol, scalar_vars,
                        fast_math, rt, pyobject_entry=True)
    kernel.noalias = noalias
    if noalias:
        kernel._build_safe = lambda: build_llvm(nest, params, fast_math, fp_contract=fp_contract, parallel_runtime=rt,
                                                opt_level=opt_level, cache=cache, cache_dir=cache_dir, name=name,
                                                noalias=False, index_checks=index_checks)
    return kernel
