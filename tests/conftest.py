"""Shared fixtures: ``backend`` runs a test on every CPU target that is available."""
from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("HYPOTHESIS_PROFILE", "ci")
# verify the IR after every lowering pass, so a pass that breaks an invariant fails by name
os.environ.setdefault("LOOPNEST_VERIFY", "1")
try:
    from hypothesis import HealthCheck, settings

    settings.register_profile("ci", max_examples=40, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])
except ImportError:  # pragma: no cover
    pass


def _available_cpu_targets() -> list[str]:
    targets = ["ireval"]
    try:
        importlib.import_module("codegen.llvm")
        targets.append("llvm")
    except Exception:  # the LLVM backend is optional until it lands
        pass
    return targets


CPU_TARGETS = _available_cpu_targets()


@pytest.fixture(params=CPU_TARGETS)
def backend(request) -> str:
    """The name of a codegen target: every test using it runs once per CPU backend."""
    return request.param
