"""Device fingerprints and library versions: what makes two measurements comparable.

A fingerprint is a short hash of the processor (CPU model name, instruction-set flags and
usable core count, or GPU name and compute capability); measurements from different
machines therefore never mix in the records database.

>>> fp, desc = device_fingerprint("llvm")
>>> len(fp), "cpu" in desc
(16, True)
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import subprocess
import sys

__all__ = ["device_fingerprint", "library_versions", "cpu_description", "gpu_description"]


@functools.lru_cache(maxsize=None)
def cpu_description() -> dict:
    """CPU model name, flags (sorted) and usable cores, from /proc/cpuinfo where present."""
    model, flags = platform.processor() or platform.machine(), []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "Processor", "cpu model") and model in ("", platform.machine(),
                                                                                  platform.processor()):
                    model = value.strip()
                elif key in ("flags", "Features") and not flags:
                    flags = sorted(value.split())
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        cores = os.cpu_count() or 1
    return {"cpu": model, "flags": flags, "cores": cores, "machine": platform.machine()}


@functools.lru_cache(maxsize=None)
def gpu_description() -> dict | None:
    """GPU name and compute capability (PyCUDA, else nvidia-smi); None without a GPU."""
    try:
        import pycuda.driver as drv
    except (ImportError, OSError):   # no PyCUDA, or no libcuda for it to load
        drv = None
    if drv is not None:
        try:
            drv.init()
            d = drv.Device(0)
            return {"gpu": d.name(), "arch": "sm_%d%d" % d.compute_capability()}
        except drv.Error:   # no driver or no device: ask nvidia-smi
            pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            name, _, cap = out.stdout.strip().splitlines()[0].partition(",")
            return {"gpu": name.strip(), "arch": "sm_" + cap.strip().replace(".", "")}
    except (OSError, subprocess.SubprocessError):
        pass
    return None


def device_fingerprint(target: str = "llvm") -> tuple[str, dict]:
    """``(fingerprint, description)`` of the device ``target`` runs on."""
    if target == "cuda":
        desc = gpu_description() or {"gpu": "none"}
    else:
        desc = cpu_description()
    text = json.dumps(desc, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16], desc


@functools.lru_cache(maxsize=None)
def library_versions() -> dict:
    """Versions of python, numpy, llvmlite (and pycuda when importable)."""
    out = {"python": sys.version.split()[0]}
    for mod in ("numpy", "llvmlite", "pycuda"):
        try:
            out[mod] = __import__(mod).__version__
        except (ImportError, OSError, AttributeError):   # not installed, unloadable, or unversioned
            pass
    return out
