"""Every tutorial runs to completion (they assert their own results)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = sorted((ROOT / "tutorials").glob("*.py"))


@pytest.mark.parametrize("path", TUTORIALS, ids=[p.name for p in TUTORIALS])
def test_tutorial_runs(path):
    # TUTORIAL_SMALL: a tutorial may check a smaller problem than the one it shows
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg", TUTORIAL_SMALL="1")
    proc = subprocess.run([sys.executable, str(path)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"{path.name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "OK" in proc.stdout
