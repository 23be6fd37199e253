"""Compile CUDA C with nvcc: cubin/PTX for launching, and ``ptxas -v`` resource reports.

Works without a GPU and without a driver (only nvcc is needed). Results are cached in
memory, keyed by the SHA-256 of the source, the architecture and the compiler options, so
compiling the same kernel twice in a process costs one nvcc run.

>>> src = 'extern "C" __global__ void k(float* a) { a[threadIdx.x] += 1.0f; }'
>>> rep = ptxas_report(src, "sm_90")          # doctest: +SKIP
>>> rep["kernels"]["k"]["registers"] > 0       # doctest: +SKIP
True

Flags: ``-std=c++17 -O3``, plus ``--use_fast_math`` only for ``fast_math=True``. nvcc's
default FMA contraction stays on, so float32/float64 results may differ from IREval in the
last bits (within float rounding, as the contract allows); integer and low-precision
results (rounded after every operation) are exact.

``compile_cubin(source, arch)`` returns the cubin bytes (what the launcher loads);
``ptxas_report(source, archs)`` compiles for one or several architectures in one nvcc run
and returns, per kernel, registers, static shared memory, stack, spills and constant memory.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from typing import Iterable, Sequence

from ..kernel import BuildError

__all__ = ["find_nvcc", "nvcc_available", "compile_cubin", "compile_ptx", "ptxas_report",
           "parse_ptxas_log", "source_hash", "clear_cache", "CompileError"]


class CompileError(BuildError):
    """nvcc rejected the generated CUDA C (the message holds its diagnostics)."""


_CACHE: dict[tuple, object] = {}
_LOCK = threading.Lock()


def clear_cache() -> None:
    """Forget every compiled result of this process."""
    with _LOCK:
        _CACHE.clear()


def source_hash(source: str) -> str:
    """SHA-256 hex digest of a source text (the cache key, with arch and options)."""
    return hashlib.sha256(source.encode()).hexdigest()


def find_nvcc() -> str | None:
    """Path of nvcc: ``$NVCC``, then PATH, then ``$CUDA_HOME/bin`` and /usr/local/cuda/bin."""
    cands = [os.environ.get("NVCC"), shutil.which("nvcc")]
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            cands.append(os.path.join(home, "bin", "nvcc"))
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def nvcc_available() -> bool:
    """True when an nvcc executable can be found."""
    return find_nvcc() is not None


def _check_arch(arch: str) -> str:
    if not re.fullmatch(r"sm_\d{2,3}[af]?", arch):
        raise ValueError(f"architecture must look like 'sm_90', got {arch!r}")
    return arch


def _flags(fast_math: bool, extra: Sequence[str]) -> list[str]:
    flags = ["-std=c++17", "-O3"]
    if fast_math:
        flags.append("--use_fast_math")
    return flags + list(extra)


def _run_nvcc(source: str, args: list[str], out_name: str) -> tuple[bytes, str]:
    nvcc = find_nvcc()
    if nvcc is None:
        raise CompileError("nvcc was not found (looked at $NVCC, PATH, $CUDA_HOME/bin, /usr/local/cuda/bin): "
                           "install the CUDA toolkit to compile CUDA kernels")
    with tempfile.TemporaryDirectory(prefix="tc_cuda_") as d:
        src = os.path.join(d, "kernel.cu")
        out = os.path.join(d, out_name)
        with open(src, "w") as f:
            f.write(source)
        cmd = [nvcc, *args, "-o", out, src]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired as exc:  # pragma: no cover
            raise CompileError(f"nvcc timed out after {exc.timeout} s") from None
        log = (p.stdout or "") + (p.stderr or "")
        if p.returncode != 0:
            raise CompileError(f"nvcc failed (exit {p.returncode}):\n{log.strip()}\n"
                               f"--- generated source ---\n{_numbered(source)}")
        with open(out, "rb") as f:
            data = f.read()
    return data, log


def _numbered(source: str) -> str:
    return "\n".join(f"{k + 1:4d}  {line}" for k, line in enumerate(source.splitlines()))


#: what a source that needs sm_90a's arch-specific features (the warpgroup MMA) says
ARCH_SPECIFIC_MARK = "__CUDA_ARCH_FEAT_SM90_ALL"


def arch_for(source: str, arch: str) -> str:
    """The architecture to build ``source`` for on an ``arch`` device: ``sm_90a`` instead
    of ``sm_90`` when the source uses sm_90a's features (its code runs on sm_90 devices
    only, which is what it was asked for); ``arch`` otherwise.

    >>> arch_for("#if defined(__CUDA_ARCH_FEAT_SM90_ALL)", "sm_90"), arch_for("", "sm_90")
    ('sm_90a', 'sm_90')
    """
    return arch + "a" if arch == "sm_90" and ARCH_SPECIFIC_MARK in source else arch


def compile_cubin(source: str, arch: str = "sm_90", *, fast_math: bool = False,
                  options: Sequence[str] = ()) -> bytes:
    """The cubin of ``source`` for ``arch`` (cached; ``sm_90a`` where the source needs it,
    :func:`arch_for`). Raises CompileError on nvcc errors."""
    arch = arch_for(source, _check_arch(arch))
    key = ("cubin", source_hash(source), arch, fast_math, tuple(options))
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
    data, log = _run_nvcc(source, ["-cubin", f"-arch={arch}", "-Xptxas", "-v", *_flags(fast_math, options)],
                          "kernel.cubin")
    with _LOCK:
        _CACHE[key] = data
        rep = dict(parse_ptxas_log(log).get(arch, {"arch": arch, "kernels": {}, "registers": 0,
                                                   "shared_bytes": 0, "spill_stores": 0}))
        rep["log"] = log
        _CACHE.setdefault(("report", source_hash(source), arch, fast_math, tuple(options)), rep)
    return data


def compile_ptx(source: str, arch: str = "sm_90", *, fast_math: bool = False,
                options: Sequence[str] = ()) -> str:
    """The PTX text of ``source`` for ``arch`` (cached)."""
    arch = _check_arch(arch)
    key = ("ptx", source_hash(source), arch, fast_math, tuple(options))
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
    data, _ = _run_nvcc(source, ["--ptx", f"-arch={arch}", *_flags(fast_math, options)], "kernel.ptx")
    text = data.decode()
    with _LOCK:
        _CACHE[key] = text
    return text


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")
_BARRIERS = re.compile(r"used (\d+) barriers")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def parse_ptxas_log(log: str) -> dict[str, dict]:
    """Parse ``ptxas -v`` output into ``{arch: {"arch", "kernels": {name: info}}}``.

    ``info`` has ``registers``, ``shared_bytes`` (static shared memory), ``stack_bytes``,
    ``spill_stores``, ``spill_loads``, ``cmem_bytes`` and ``barriers``.

    >>> log = '''ptxas info    : Compiling entry function 'k0' for 'sm_90'
    ... ptxas info    : Function properties for k0
    ...     8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ... ptxas info    : Used 12 registers, used 1 barriers, 512 bytes smem, 372 bytes cmem[0]'''
    >>> parse_ptxas_log(log)["sm_90"]["kernels"]["k0"]["registers"]
    12
    """
    out: dict[str, dict] = {}
    cur: dict | None = None
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            name, arch = m.group(1), m.group(2)
            rep = out.setdefault(arch, {"arch": arch, "kernels": {}})
            cur = rep["kernels"].setdefault(name, {"registers": 0, "shared_bytes": 0, "stack_bytes": 0,
                                                   "spill_stores": 0, "spill_loads": 0, "cmem_bytes": 0,
                                                   "barriers": 0})
            continue
        if cur is None:
            continue
        m = _FRAME.search(line)
        if m:
            cur["stack_bytes"], cur["spill_stores"], cur["spill_loads"] = map(int, m.groups())
        m = _USED.search(line)
        if m:
            cur["registers"] = int(m.group(1))
            for rx, key in ((_SMEM, "shared_bytes"), (_CMEM, "cmem_bytes"), (_BARRIERS, "barriers")):
                mm = rx.search(line)
                if mm:
                    cur[key] = int(mm.group(1))
    for rep in out.values():
        ks = rep["kernels"].values()
        rep["registers"] = max((k["registers"] for k in ks), default=0)
        rep["shared_bytes"] = max((k["shared_bytes"] for k in ks), default=0)
        rep["spill_stores"] = sum(k["spill_stores"] for k in ks)
    return out


def ptxas_report(source: str, archs: str | Iterable[str] = "sm_90", *, fast_math: bool = False,
                 options: Sequence[str] = ()) -> dict:
    """Resource usage of every kernel of ``source`` from ``ptxas -v``.

    With one architecture, returns ``{"arch", "kernels": {name: info}, "registers",
    "shared_bytes", "spill_stores", "log"}``; with several, a dict of those by arch
    (compiled in a single nvcc run). Cached per (source, arch, options).
    """
    single = isinstance(archs, str)
    arch_list = [_check_arch(a) for a in ([archs] if single else list(archs))]
    h = source_hash(source)
    keys = {a: ("report", h, a, fast_math, tuple(options)) for a in arch_list}
    with _LOCK:
        missing = [a for a in arch_list if keys[a] not in _CACHE]
    if missing:
        gencode = []
        for a in missing:
            num = a[3:]
            gencode += ["-gencode", f"arch=compute_{num},code={a}"]
        _, log = _run_nvcc(source, ["-fatbin", *gencode, "-Xptxas", "-v", *_flags(fast_math, options)],
                           "kernel.fatbin")
        parsed = parse_ptxas_log(log)
        with _LOCK:
            for a in missing:
                rep = dict(parsed.get(a, {"arch": a, "kernels": {}, "registers": 0, "shared_bytes": 0,
                                          "spill_stores": 0}))
                rep["log"] = log
                _CACHE[keys[a]] = rep
    with _LOCK:
        reps = {a: _CACHE[keys[a]] for a in arch_list}
    return reps[arch_list[0]] if single else reps
