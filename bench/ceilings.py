"""Machine ceilings measured in the same run: memory copy bandwidth and numpy BLAS GFLOP/s
(best of several samples, like the kernels' times).

>>> bw = copy_bandwidth_gbs(1 << 20)
>>> bw > 0
True
"""
from __future__ import annotations

import os
import platform

import numpy as np

from .harness import time_call


def copy_bandwidth_gbs(n_bytes: int = 256 << 20) -> float:
    """Measured memory bandwidth (GB/s, read + write bytes) of a large numpy copy."""
    n = n_bytes // 4
    src = np.ones(n, np.float32)
    dst = np.empty_like(src)
    t = time_call(lambda: np.copyto(dst, src), repeats=7, warmup=1)
    return 2 * src.nbytes / t.best / 1e9


def blas_gflops(n: int = 1024) -> float:
    """numpy (BLAS) float32 matmul GFLOP/s at n x n x n."""
    a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((n, n)).astype(np.float32)
    t = time_call(lambda: a @ b, repeats=7, warmup=1)
    return 2 * n ** 3 / t.best / 1e9


def machine_info() -> dict:
    """CPU model, core count and library versions, for the report."""
    model = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info = {"cpu": model, "cores": os.cpu_count(), "numpy": np.__version__, "python": platform.python_version()}
    try:
        import llvmlite
        info["llvmlite"] = llvmlite.__version__
    except ImportError:
        pass
    try:
        import torch
        info["torch"] = torch.__version__
    except ImportError:
        info["torch"] = None
    return info
