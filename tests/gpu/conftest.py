"""GPU fixtures: tests here skip cleanly without PyCUDA, a driver or a device.

``backend`` is overridden to ``"cuda"`` for the tests collected in this directory, so the
backend-parametrised tests that ``test_backends_cuda.py`` re-exports run on the GPU.
"""
from __future__ import annotations

import functools

import pytest


@functools.lru_cache(maxsize=None)
def cuda_device_available() -> bool:
    """True when PyCUDA imports, the driver initialises and reports at least one device."""
    try:
        import pycuda.driver as drv
        drv.init()
        return drv.Device.count() > 0
    except Exception:  # ImportError, a missing libcuda, no device
        return False


@pytest.fixture(scope="session")
def cuda_device() -> dict:
    """The current device's architecture and limits (skips the test without a GPU)."""
    pytest.importorskip("pycuda.driver")
    if not cuda_device_available():
        pytest.skip("no CUDA device available")
    from codegen.cuda.launch import device_info
    return device_info()


@pytest.fixture
def backend(cuda_device) -> str:
    """Inside tests/gpu every backend-parametrised test runs on the CUDA target."""
    return "cuda"
