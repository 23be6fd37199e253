"""Import time: how long ``import te, loopnest, codegen`` takes in a fresh interpreter, the
wait before a user's first line runs.

    python -m bench.bench_import [--runs 7]

Each measurement starts a new Python process; the best of ``runs`` is kept (other processes
on the machine only ever add time). One unmeasured run first writes the bytecode cache
(``__pycache__``), as any first import does; ``PYTHONDONTWRITEBYTECODE`` is lifted for that
run only, since a shell that sets it would otherwise make every measured run compile every
module from source. For scale, the same is measured for the interpreter alone and for the
third-party modules we import (numpy, ml_dtypes). The aim is under 0.2 s.

>>> r = run(runs=1)
>>> sorted(r) == ["aim_s", "import_s", "interpreter_s", "ours_s", "third_party_s"]
True
>>> 0 < r["interpreter_s"] < r["import_s"]
True
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

AIM_IMPORT_S = 0.2
_OURS = "import te, loopnest, codegen"
_THIRD_PARTY = "import numpy, ml_dtypes"


def _best_of(code: str, runs: int) -> float:
    """The shortest wall time, in seconds, of ``runs`` fresh interpreters running ``code``."""
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        best = min(best, time.perf_counter() - t0)
    return best


def run(runs: int = 7) -> dict:
    """Best-of-``runs`` wall times of a fresh interpreter (``interpreter_s``), of it importing
    numpy and ml_dtypes (``third_party_s``) and of it importing te, loopnest and codegen
    (``import_s``); ``ours_s`` is the difference of the last two."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-c", _OURS], check=True, env=env)
    interpreter = _best_of("pass", runs)
    third_party = _best_of(_THIRD_PARTY, runs)
    ours = _best_of(_OURS, runs)
    return {"import_s": ours, "interpreter_s": interpreter, "third_party_s": third_party,
            "ours_s": ours - third_party, "aim_s": AIM_IMPORT_S}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.bench_import", description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=7, help="fresh interpreters per measurement (best kept)")
    r = run(runs=p.parse_args(argv).runs)
    print(f"import te, loopnest, codegen: {r['import_s'] * 1e3:.0f} ms (aim under {r['aim_s'] * 1e3:.0f} ms); "
          f"the interpreter alone {r['interpreter_s'] * 1e3:.0f} ms, with numpy and ml_dtypes "
          f"{r['third_party_s'] * 1e3:.0f} ms, so our modules {r['ours_s'] * 1e3:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
