"""Optimise and JIT-compile LLVM IR for the host CPU; the compile caches.

* The host target: ``llvm.get_process_triple()``, ``get_host_cpu_name()`` and
  ``get_host_cpu_features()``, optimisation level 3 through the new pass manager with the
  loop and SLP vectorisers on.
* One MCJIT engine per compiled module (the engine owns the code; it is freed with the
  last kernel using it).
* An in-memory cache (``lookup``/``remember``), keyed by the caller (the structural key of a
  prepared statement, see ``cache_key``), so building the same nest twice compiles once.
* An optional on-disk object cache (``cache_dir=`` or ``TE_LLVM_CACHE_DIR``): object code
  keyed by the sha256 of the IR text, the CPU name and features and the llvmlite version.
  Only object files (and the optimised IR text, for ``kernel.optimized_source``) are
  stored, never pickles.

``cache_stats()`` reports counters: ``memory_hits``, ``memory_misses``, ``compiles`` (LLVM
optimisation + codegen runs), ``disk_hits``, ``disk_writes``.

>>> sorted(cache_stats())
['compiles', 'disk_hits', 'disk_writes', 'memory_hits', 'memory_misses']
"""
from __future__ import annotations

import ctypes.util
import hashlib
import os
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import llvmlite
import llvmlite.binding as llvm

from ..kernel import BuildError

__all__ = ["Compiled", "compile_ir", "cache_stats", "clear_cache", "host_info", "lookup", "remember",
           "MEMORY_CACHE_SIZE"]

MEMORY_CACHE_SIZE = 512
_lock = threading.RLock()
_init_done = False
_stats = {"memory_hits": 0, "memory_misses": 0, "compiles": 0, "disk_hits": 0, "disk_writes": 0}
_memory: "OrderedDict[Any, Any]" = OrderedDict()


def _init() -> None:
    global _init_done
    if _init_done:
        return
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
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


def _target_machine(opt: int = 3) -> llvm.TargetMachine:
    h = host_info()
    target = llvm.Target.from_triple(h["triple"])
    return target.create_target_machine(cpu=h["cpu"], features=h["features"], opt=opt, jit=True,
                                        codemodel="jitdefault")


_pass_tm: dict[int, llvm.TargetMachine] = {}


def data_layout() -> str:
    """The data layout string of the host target machine."""
    with _lock:
        tm = _pass_tm.get(3)
        if tm is None:
            tm = _pass_tm[3] = _target_machine(3)
        return str(tm.target_data)


def _optimize(mod: llvm.ModuleRef, opt: int) -> None:
    tm = _pass_tm.get(opt)
    if tm is None:
        tm = _pass_tm[opt] = _target_machine(opt)
    pto = llvm.create_pipeline_tuning_options(speed_level=opt)
    pto.loop_vectorization = opt >= 2
    pto.slp_vectorization = opt >= 2
    pto.loop_unrolling = opt >= 2
    pb = llvm.create_pass_builder(tm, pto)
    mpm = pb.getModulePassManager()
    mpm.run(mod, pb)


@dataclass
class Compiled:
    """A JIT-compiled module: the engine owning the code and the kernel's address."""

    engine: Any
    address: int
    optimized_ir: str | None
    from_disk: bool = False
    py_address: int = 0
    extra: dict = field(default_factory=dict)


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


def lookup(key) -> Any:
    """The value remembered under ``key`` (counts a memory hit or miss), else None."""
    with _lock:
        v = _memory.get(key)
        if v is None:
            _stats["memory_misses"] += 1
            return None
        _memory.move_to_end(key)
        _stats["memory_hits"] += 1
        return v


def remember(key, value) -> None:
    with _lock:
        _memory[key] = value
        _memory.move_to_end(key)
        while len(_memory) > MEMORY_CACHE_SIZE:
            _memory.popitem(last=False)


def content_hash(ir_text: str, opt: int) -> str:
    """The disk-cache key of an IR module compiled for this host."""
    h = host_info()
    m = hashlib.sha256()
    for part in (ir_text, h["triple"], h["cpu"], h["features"], llvmlite.__version__,
                 ".".join(map(str, llvm.llvm_version_info)), str(opt)):
        m.update(part.encode())
        m.update(b"\0")
    return m.hexdigest()


def _resolve_cache_dir(cache_dir) -> str | None:
    if cache_dir is None:
        cache_dir = os.environ.get("TE_LLVM_CACHE_DIR") or None
    if cache_dir in (None, False, ""):
        return None
    return os.fspath(cache_dir)


def _write_atomic(path: str, data: bytes) -> None:
    d = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def compile_ir(ir_text: str, symbol: str, kernel_name: str, opt: int = 3, cache_dir=None,
               py_symbol: str | None = None) -> Compiled:
    """Parse, verify, optimise and JIT ``ir_text``; return the engine and ``@symbol``'s address.

    Raises ``BuildError`` naming ``kernel_name`` (with LLVM's message) when the IR does not
    parse or verify, or code generation fails.
    """
    with _lock:
        _init()
        cache_dir = _resolve_cache_dir(cache_dir)
        digest = content_hash(ir_text, opt) if cache_dir else None
        obj_path = os.path.join(cache_dir, digest + ".o") if cache_dir else None
        cached_obj = None
        if obj_path and os.path.exists(obj_path):
            try:
                with open(obj_path, "rb") as f:
                    cached_obj = f.read()
            except OSError:
                cached_obj = None
        try:
            mod = llvm.parse_assembly(ir_text)
            mod.verify()
        except RuntimeError as exc:
            raise BuildError(f"LLVM rejected the IR of kernel {kernel_name}: {str(exc).strip()}") from None
        h = host_info()
        tm = _target_machine(opt)
        mod.triple = h["triple"]
        mod.data_layout = str(tm.target_data)
        optimized = None
        if cached_obj is None:
            try:
                _optimize(mod, opt)
                optimized = str(mod)
            except RuntimeError as exc:  # pragma: no cover - LLVM passes rarely fail
                raise BuildError(f"LLVM failed to optimise kernel {kernel_name}: {exc}") from None
        else:
            try:
                with open(obj_path[:-2] + ".ll", "r") as f:
                    optimized = f.read()
            except OSError:
                optimized = None
        try:
            engine = llvm.create_mcjit_compiler(mod, tm)
        except RuntimeError as exc:
            raise BuildError(f"LLVM could not create a JIT for kernel {kernel_name}: {exc}") from None
        used_disk = {"hit": False}
        if cache_dir:
            os.makedirs(cache_dir, exist_ok=True)

            def notify(module, buffer):
                try:
                    _write_atomic(obj_path, bytes(buffer))
                    if optimized is not None:
                        _write_atomic(obj_path[:-2] + ".ll", optimized.encode())
                    _stats["disk_writes"] += 1
                except OSError:  # a read-only cache directory must not fail the build
                    pass

            def getbuffer(module):
                if cached_obj is not None:
                    used_disk["hit"] = True
                    _stats["disk_hits"] += 1
                return cached_obj
            engine.set_object_cache(notify, getbuffer)
        try:
            engine.finalize_object()
        except RuntimeError as exc:
            raise BuildError(f"LLVM failed to generate code for kernel {kernel_name}: {exc}") from None
        if not used_disk["hit"]:
            _stats["compiles"] += 1
        addr = engine.get_function_address(symbol)
        if not addr:
            raise BuildError(f"kernel {kernel_name}: the JIT did not export the function {symbol}")
        py_addr = engine.get_function_address(py_symbol) if py_symbol else 0
        return Compiled(engine, addr, optimized, from_disk=used_disk["hit"], py_address=py_addr or 0)
