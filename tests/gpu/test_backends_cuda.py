"""Every backend-parametrised test of the suite, run on the CUDA target.

The tests taking a ``backend`` argument are imported from their modules and collected here,
where ``backend`` is ``"cuda"`` (tests/gpu/conftest.py). Nests those tests leave unbound
run as single-thread kernels: correct, not fast. Without a GPU the module is skipped
before anything is imported.

Each source module is imported as pytest imports it when it collects it (the default
``prepend`` import mode): its directory goes first on ``sys.path``, so the helpers next to
it (``tests/loopnest/nests.py``, ``tests/tune/tune_fakes.py``) import as they do in a
whole-suite run, also when only ``tests/gpu`` is collected.
"""
from __future__ import annotations

import importlib.util
import inspect
import pathlib
import sys

import pytest



def _cuda_device_available() -> bool:
    try:
        import pycuda.driver as drv
        drv.init()
        return drv.Device.count() > 0
    except Exception:
        return False


if not _cuda_device_available():
    pytest.skip("no CUDA device available", allow_module_level=True)

_TESTS = pathlib.Path(__file__).resolve().parents[1]
_SOURCES = sorted(p for p in _TESTS.rglob("test_*.py") if "gpu" not in p.parts)


def _reexport():
    out = {}
    for path in _SOURCES:
        text = path.read_text()
        if "backend" not in text:
            continue
        name = "cuda_rerun_" + "_".join(path.relative_to(_TESTS).with_suffix("").parts)
        folder = str(path.parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        for attr, fn in vars(mod).items():
            if not attr.startswith("test_") or not callable(fn):
                continue
            try:
                params = inspect.signature(fn).parameters
            except (TypeError, ValueError):
                continue
            if "backend" in params:
                out[f"test_{name[len('cuda_rerun_'):]}__{attr[5:]}"] = fn
    return out


globals().update(_reexport())
