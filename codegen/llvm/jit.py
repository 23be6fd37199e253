"""Optimise and JIT-compile LLVM IR for the host CPU; the compile caches.

* The host target: ``llvm.get_process_triple()``, ``get_host_cpu_name()`` and
  ``get_host_cpu_features()``, optimisation level 3 through the new pass manager with the
  loop and SLP vectorisers on. Code at risk of a known LLVM 22 miscompilation of AVX-512 code
  is checked and generated again without AVX-512 where it has it (``evex_check``).
* Code generation by one target machine per optimisation level (``tm.emit_object``), then
  one MCJIT engine per kernel that only loads that object code (the engine owns the code;
  it is freed with the last kernel using it; the IR module is dropped once loaded).
* An in-memory cache (``lookup``/``remember``), keyed by the caller (the structural key of a
  prepared statement, see ``cache_key``), so building the same nest twice compiles once.
* An optional on-disk object cache (``cache_dir=`` or ``TE_LLVM_CACHE_DIR``, see
  ``disk_cache``): object code keyed by the sha256 of the IR text, the CPU name and features
  and the llvmlite version, verified against a checksum before it is loaded. Only object
  files (and the optimised IR text, for ``kernel.optimized_source``) are stored, never
  pickles.

``cache_stats()`` reports counters: ``memory_hits``, ``memory_misses``, ``compiles`` (LLVM
optimisation + codegen runs), ``disk_hits``, ``disk_writes``, ``evex_fallbacks`` (kernels
generated again without AVX-512, see ``evex_check``).

>>> sorted(cache_stats())
['compiles', 'disk_hits', 'disk_writes', 'evex_fallbacks', 'memory_hits', 'memory_misses']
"""
from __future__ import annotations

import ctypes.util
import hashlib
import threading
import weakref
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

import llvmlite
import llvmlite.binding as llvm
from llvmlite.binding import ffi as _ffi
from llvmlite.binding.newpassmanagers import NewPassManager as _NewPassManager

from ..kernel import BuildError
from . import disk_cache, evex_check

__all__ = ["Compiled", "compile_ir", "cache_stats", "clear_cache", "host_info", "lookup", "remember",
           "MEMORY_CACHE_SIZE", "close_pass_manager"]

MEMORY_CACHE_SIZE = 512
_lock = threading.RLock()
_init_done = False
_stats = {"memory_hits": 0, "memory_misses": 0, "compiles": 0, "disk_hits": 0, "disk_writes": 0,
          "evex_fallbacks": 0}
_memory: "OrderedDict[Any, Any]" = OrderedDict()


#: LLVM command-line options set once per process (they hold for every module this process
#: compiles). ``-enable-if-conversion=false``: LLVM's loop vectorizer leaves loops with
#: conditional blocks alone (the schedule's ``vectorize`` emits its own vector code). LLVM
#: 22's vectorizer predicated a remainder on lane 0 of a mask and then gathered through its
#: result under the whole mask: a kernel of two stages with an ``if_then_else`` crashed
#: (tests/codegen/test_llvm_vectorizer_workaround.py).
LLVM_OPTIONS = ("-enable-if-conversion=false",)


def _init() -> None:
    global _init_done
    if _init_done:
        return
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    for option in LLVM_OPTIONS:
        llvm.set_option("", option)
    libm = ctypes.util.find_library("m")
    if libm:
        try:
            llvm.load_library_permanently(libm)
        except RuntimeError:  # pragma: no cover - libm symbols are usually in the process anyway
            pass
    _init_done = True


_host: dict | None = None


def host_info() -> dict:
    """``{"triple", "cpu", "features"}`` of the machine code we generate.

    >>> sorted(host_info())
    ['cpu', 'features', 'triple']
    """
    global _host
    if _host is None:
        with _lock:
            _init()
            try:
                features = llvm.get_host_cpu_features().flatten()
            except RuntimeError:  # pragma: no cover - some platforms cannot report features
                features = ""
            _host = {"triple": llvm.get_process_triple(), "cpu": llvm.get_host_cpu_name(), "features": features}
    return _host


def _target_machine(opt: int = 3, extra_features: str = "") -> llvm.TargetMachine:
    h = host_info()
    target = llvm.Target.from_triple(h["triple"])
    features = f"{h['features']},{extra_features}" if extra_features else h["features"]
    return target.create_target_machine(cpu=h["cpu"], features=features, opt=opt, jit=True,
                                        codemodel="jitdefault")


_pass_tm: dict[tuple[int, str], llvm.TargetMachine] = {}


def _shared_tm(opt: int, extra_features: str = "") -> llvm.TargetMachine:
    """The target machine that optimises and generates code at level ``opt`` (for the host CPU
    with ``extra_features`` appended to its features), one per level for the process: its
    subtarget (instruction tables, lowering) costs about 700 KB, which a target machine per
    kernel would keep for each live kernel."""
    tm = _pass_tm.get((opt, extra_features))
    if tm is None:
        tm = _pass_tm[opt, extra_features] = _target_machine(opt, extra_features)
    return tm


def data_layout() -> str:
    """The data layout string of the host target machine."""
    with _lock:
        return str(_shared_tm(3).target_data)


def _optimize(mod: llvm.ModuleRef, opt: int, tm: llvm.TargetMachine | None = None) -> None:
    """Run LLVM's optimisation pipeline at level ``opt`` on ``mod`` for the target machine
    ``tm`` (the host's by default)."""
    tm = tm or _shared_tm(opt)
    pto = llvm.create_pipeline_tuning_options(speed_level=opt)
    pto.loop_vectorization = opt >= 2
    pto.slp_vectorization = opt >= 2
    pto.loop_unrolling = opt >= 2
    pb = llvm.create_pass_builder(tm, pto)
    mpm = pb.getModulePassManager()
    try:
        mpm.run(mod, pb)
    finally:
        close_pass_manager(mpm)


def close_pass_manager(pm) -> None:
    """Free the llvmlite pass manager ``pm`` (a ``ModulePassManager`` or ``FunctionPassManager``) now.

    Up to llvmlite 0.50 ``pm.close()`` (and garbage collection) frees nothing: ``ObjectRef``
    comes before ``NewPassManager`` in the pass managers' base classes, so its empty
    ``_dispose`` hides the one that deletes the C++ object, and every O3 pipeline (about
    85 KB with what its passes keep after a run) stayed allocated for the life of the process.

    >>> pto = llvm.create_pipeline_tuning_options(speed_level=3)
    >>> mpm = llvm.create_pass_builder(_target_machine(3), pto).getModulePassManager()
    >>> close_pass_manager(mpm); mpm.closed
    True
    """
    if type(pm)._dispose is _ffi.ObjectRef._dispose:
        _NewPassManager._dispose(pm)
        pm.detach()
    else:  # a fixed llvmlite
        pm.close()


@dataclass
class Compiled:
    """A loaded kernel: the engine owning its code, the kernel's addresses, and what is
    needed to load the same code again (``reload``)."""

    engine: Any
    address: int
    optimized_ir: str | None
    from_disk: bool = False
    py_address: int = 0
    obj: bytes = b""
    symbol: str = ""
    py_symbol: str | None = None
    kernel_name: str = ""
    opt: int = 3
    extra: dict = field(default_factory=dict)

    def reload(self) -> "Compiled":
        """A new engine holding another copy of the same object code."""
        return _load(self.obj, self.symbol, self.py_symbol, self.kernel_name, self.opt, self.optimized_ir, False)


@dataclass
class _Remembered:
    """An in-memory cache entry: the IR texts (zlib-compressed: the optimised IR of an unrolled
    loop is tens of KB, ten times its object code) and the object code; ``live`` refers to
    the last ``Compiled`` made from it, reused while some kernel still holds it."""

    source: bytes
    optimized_ir: bytes | None
    compiled: Compiled
    live: Any

    def texts(self) -> tuple[str, str | None]:
        opt = zlib.decompress(self.optimized_ir).decode() if self.optimized_ir is not None else None
        return zlib.decompress(self.source).decode(), opt


def cache_stats() -> dict:
    """A copy of the cache counters (see the module docstring).

    >>> clear_cache(); cache_stats()["compiles"]
    0
    """
    return dict(_stats)


def clear_cache(reset_stats: bool = True) -> None:
    """Drop the in-memory cache (kernels already built keep working)."""
    with _lock:
        _memory.clear()
        if reset_stats:
            for k in _stats:
                _stats[k] = 0


def lookup(key) -> tuple[str, Compiled] | None:
    """``(source, compiled)`` remembered under ``key`` (counts a memory hit or miss), else None.

    The cache holds object code, not engines: while a kernel built from the entry is alive its
    engine is shared, else the code is loaded into a new engine (about a millisecond), so the
    engines of kernels nobody holds are freed.
    """
    with _lock:
        entry = _memory.get(key)
        if entry is None:
            _stats["memory_misses"] += 1
            return None
        _memory.move_to_end(key)
        _stats["memory_hits"] += 1
        source, optimized = entry.texts()
        compiled = entry.live()
        if compiled is None:
            compiled = entry.compiled.reload()
            compiled.optimized_ir = optimized
            entry.live = weakref.ref(compiled)
        return source, compiled


def remember(key, source: str, compiled: Compiled) -> None:
    """Remember the IR text and object code of ``compiled`` under ``key`` (least recently used
    entries beyond ``MEMORY_CACHE_SIZE`` are dropped)."""
    with _lock:
        stripped = Compiled(None, 0, None, False, 0, compiled.obj, compiled.symbol, compiled.py_symbol,
                            compiled.kernel_name, compiled.opt)
        opt_z = zlib.compress(compiled.optimized_ir.encode(), 1) if compiled.optimized_ir is not None else None
        _memory[key] = _Remembered(zlib.compress(source.encode(), 1), opt_z, stripped, weakref.ref(compiled))
        _memory.move_to_end(key)
        while len(_memory) > MEMORY_CACHE_SIZE:
            _memory.popitem(last=False)


#: part of every disk-cache key: raised when the same IR on the same LLVM compiles to other
#: code (2: kernels with LLVM 22's AVX-512 encoding defect are compiled again, ``evex_check``;
#: objects cached before may hold the defect; 3: ``LLVM_OPTIONS``, objects cached before may
#: hold the loop vectorizer's mis-predicated gathers)
CODEGEN_REVISION = 3


def content_hash(ir_text: str, opt: int) -> str:
    """The disk-cache key of an IR module compiled for this host (and ``CODEGEN_REVISION``)."""
    h = host_info()
    m = hashlib.sha256()
    for part in (ir_text, h["triple"], h["cpu"], h["features"], llvmlite.__version__,
                 ".".join(map(str, llvm.llvm_version_info)), str(opt), f"revision {CODEGEN_REVISION}"):
        m.update(part.encode())
        m.update(b"\0")
    return m.hexdigest()


def compile_ir(ir_text: str, symbol: str, kernel_name: str, opt: int = 3, cache_dir=None,
               py_symbol: str | None = None, fallback_ir: Callable[[], str] | None = None) -> Compiled:
    """Parse, verify, optimise and compile ``ir_text`` (or take its object code from the disk
    cache) and load it; return the engine and ``@symbol``'s address. ``fallback_ir`` gives the
    IR to compile without AVX-512 where the code would have LLVM's EVEX defect (``ir_text``
    itself by default; IR with AVX-512 intrinsics must give another).

    Raises ``BuildError`` naming ``kernel_name`` (with LLVM's message) when the IR does not
    parse or verify, or code generation fails; ``cache_dir`` is checked by
    ``disk_cache.directory`` (a file there raises ``BuildError``).
    """
    with _lock:
        _init()
        directory = disk_cache.directory(cache_dir)
        digest = content_hash(ir_text, opt) if directory else None
        cached = disk_cache.load(directory, digest) if directory else None
        if cached is not None:
            _stats["disk_hits"] += 1
            return _load(cached.obj, symbol, py_symbol, kernel_name, opt, cached.ir, True)
        try:
            mod = llvm.parse_assembly(ir_text)
            mod.verify()
        except RuntimeError as exc:
            raise BuildError(f"LLVM rejected the IR of kernel {kernel_name}: {str(exc).strip()}") from None
        try:
            optimized, obj = _generate(mod, ir_text, opt, fallback_ir)
        except RuntimeError as exc:
            raise BuildError(f"LLVM failed to optimise or generate code for kernel {kernel_name}: {exc}") from None
        _stats["compiles"] += 1
        if directory and disk_cache.store(directory, digest, obj, optimized):
            _stats["disk_writes"] += 1
        return _load(obj, symbol, py_symbol, kernel_name, opt, optimized, False)


def _generate(mod: llvm.ModuleRef, ir_text: str, opt: int,
              fallback_ir: Callable[[], str] | None = None) -> tuple[str, bytes]:
    """Optimise the module ``mod`` parsed from ``ir_text`` and generate its object code for the
    host; return the optimised IR text and the object code. ``mod`` is closed here.

    Where the code may have LLVM 22's AVX-512 encoding defect (``evex_check.at_risk``), its
    assembly is checked; if it has the defect, ``fallback_ir()`` (default ``ir_text``) is
    compiled again without AVX-512 (at once, without the check, for a module over
    ``evex_check.CHECK_MAX_LINES`` lines).
    """
    h = host_info()
    tm = _shared_tm(opt)
    try:
        mod.triple = h["triple"]
        mod.data_layout = str(tm.target_data)
        _optimize(mod, opt)
        optimized = str(mod)
        if evex_check.at_risk(h["triple"], h["features"], optimized) and (
                optimized.count("\n") > evex_check.CHECK_MAX_LINES or _has_evex_defect(optimized, tm)):
            _stats["evex_fallbacks"] += 1
            mod.close()
            tm = _shared_tm(opt, evex_check.FALLBACK_FEATURES)
            mod = llvm.parse_assembly(fallback_ir() if fallback_ir is not None else ir_text)
            mod.triple = h["triple"]
            mod.data_layout = str(tm.target_data)
            _optimize(mod, opt, tm)
            optimized = str(mod)
        return optimized, tm.emit_object(mod)
    finally:
        mod.close()


def _has_evex_defect(optimized: str, tm: llvm.TargetMachine) -> bool:
    """Whether the assembly ``tm`` generates for the optimised IR ``optimized`` has a VEX-only
    instruction naming xmm16-31 / ymm16-31 (printed from a copy: code generation changes the IR)."""
    probe = llvm.parse_assembly(optimized)
    try:
        return bool(evex_check.vex_with_high_registers(tm.emit_assembly(probe)))
    finally:
        probe.close()


def _load(obj: bytes, symbol: str, py_symbol: str | None, kernel_name: str, opt: int, optimized: str | None,
          from_disk: bool) -> Compiled:
    """Load the object code ``obj`` into a new MCJIT engine (which owns a target machine of its
    own but generates no code, so it stays small: about 60 KB)."""
    empty = llvm.parse_assembly("")
    empty.triple = host_info()["triple"]
    try:
        engine = llvm.create_mcjit_compiler(empty, _target_machine(opt))
        engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        engine.finalize_object()
    except RuntimeError as exc:
        raise BuildError(f"LLVM could not load the code of kernel {kernel_name}: {exc}") from None
    addr = engine.get_function_address(symbol)
    if not addr:
        raise BuildError(f"kernel {kernel_name}: the JIT did not export the function {symbol}")
    py_addr = engine.get_function_address(py_symbol) if py_symbol else 0
    return Compiled(engine, addr, optimized, from_disk, py_addr or 0, obj, symbol, py_symbol, kernel_name, opt)
