"""The machine a schedule is written for: vector width, vector registers, caches and cores.

A :class:`Target` is a plain description, read from the host by :func:`host_target` (LLVM's
CPU name and features, ``os.sched_getaffinity``, the cache sizes in ``/sys``) and overridable
field by field, so that the automatic scheduler, the tuning space and the benchmark's hand
schedules take their widths and tile sizes from one place instead of assuming an ISA.

>>> t = Target(cpu="generic", vector_bits=256, vector_registers=16)
>>> t.lanes("float32"), t.lanes("float64"), t.lanes("int8")
(8, 4, 32)
>>> t.replace(vector_bits=512).lanes("float32")
16
>>> host_target().vector_bits in (128, 256, 512)
True
"""
from __future__ import annotations

import dataclasses
import os
from functools import lru_cache
from pathlib import Path

from te.dtypes import Dtype, as_dtype

__all__ = ["Target", "host_target", "resolve_target"]


@dataclasses.dataclass(frozen=True)
class Target:
    """A CPU as the schedulers see it.

    ``vector_bits``: the width of the widest native vector register that arithmetic uses;
    ``vector_registers``: how many of them there are (a register tile must fit);
    ``l1_bytes`` / ``l2_bytes`` / ``l3_bytes``: data cache sizes per core (L3: shared);
    ``cores``: the threads a parallel loop gets;
    ``line_bytes``: the data cache line (what one prefetch brings in).

    >>> Target(cpu="x", vector_bits=512, vector_registers=32, cores=4).cores
    4
    """
    cpu: str = "generic"
    vector_bits: int = 256
    vector_registers: int = 16
    l1_bytes: int = 32 * 1024
    l2_bytes: int = 1024 * 1024
    l3_bytes: int = 8 * 1024 * 1024
    cores: int = 1
    features: frozenset = dataclasses.field(default=frozenset(), repr=False)
    line_bytes: int = dataclasses.field(default=64, repr=False)

    def __post_init__(self):
        for name in ("vector_bits", "vector_registers", "l1_bytes", "l2_bytes", "l3_bytes", "cores", "line_bytes"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"Target.{name} must be a positive int, got {v!r}")
        if self.vector_bits % 8:
            raise ValueError(f"Target.vector_bits must be a multiple of 8, got {self.vector_bits}")

    def lanes(self, dt: Dtype | str) -> int:
        """Elements of ``dt`` in one native vector register (at least 1).

        >>> Target(vector_bits=512).lanes("float16")
        32
        """
        return max(1, self.vector_bits // as_dtype(dt).bits)

    def replace(self, **changes) -> "Target":
        """A copy with some fields changed (the override of a detected value).

        >>> host_target().replace(cores=1).cores
        1
        """
        return dataclasses.replace(self, **changes)


def _x86_vector(features: frozenset) -> tuple[int, int]:
    if "avx512f" in features:
        return 512, 32
    if "avx" in features:
        return 256, 16
    return 128, 16


def _cache_sizes() -> dict[str, int]:
    """Data/unified cache sizes of cpu0 from ``/sys``, and the L1 data cache's line size (empty
    where not readable)."""
    out: dict[str, int] = {}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    if not base.is_dir():
        return out
    for d in sorted(base.glob("index*")):
        try:
            level = int((d / "level").read_text())
            kind = (d / "type").read_text().strip()
            size = (d / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            continue
        if level == 1:
            try:
                out["line_bytes"] = int((d / "coherency_line_size").read_text())
            except (OSError, ValueError):
                pass
        mult = {"K": 1024, "M": 1024 * 1024, "G": 1024 ** 3}.get(size[-1:].upper(), 1)
        try:
            out[f"l{level}_bytes"] = int(size.rstrip("KMGkmg")) * mult
        except ValueError:
            continue
    return out


@lru_cache(maxsize=1)
def host_target() -> Target:
    """The machine this process runs on, as LLVM sees it (cached).

    >>> host_target().cores >= 1
    True
    """
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    try:
        feats = frozenset(k for k, v in llvm.get_host_cpu_features().items() if v)
    except RuntimeError:      # pragma: no cover - some platforms cannot report features
        feats = frozenset()
    triple = llvm.get_process_triple()
    if triple.startswith(("x86_64", "i686", "i386")):
        bits, regs = _x86_vector(feats)
    elif triple.startswith(("aarch64", "arm64")):
        bits, regs = 128, 32
    else:
        bits, regs = 128, 16
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:    # pragma: no cover - not on Linux
        cores = os.cpu_count() or 1
    return Target(cpu=llvm.get_host_cpu_name(), vector_bits=bits, vector_registers=regs, cores=max(1, cores),
                  features=feats, **_cache_sizes())


def resolve_target(target=None) -> Target:
    """``None``, ``"llvm"``, ``"ireval"`` or ``"host"``: the host; a :class:`Target`: itself.

    >>> resolve_target("llvm") is host_target()
    True
    >>> resolve_target(Target(vector_bits=128)).vector_bits
    128
    """
    if target is None or (isinstance(target, str) and target in ("llvm", "ireval", "host", "cpu")):
        return host_target()
    if isinstance(target, Target):
        return target
    raise TypeError(f"target: expected a Target or one of 'llvm', 'ireval', 'host', got {target!r}; "
                    "describe another CPU with loopnest.Target(...) or host_target().replace(...)")
