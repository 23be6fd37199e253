"""``python -m fuzz``: run the random tester for a time budget (or a count of schedules)
from a seed, print progress and a summary, and write one minimised reproducer script per
failure class into ``--out``. Exit status 1 when anything failed.

    python -m fuzz --seconds 600 --seed 1 --out fuzz-out --targets ireval,llvm,cuda
"""
from __future__ import annotations

import argparse
import os
import sys


def main(argv: list | None = None) -> int:
    """Parse the command line and run a campaign."""
    ap = argparse.ArgumentParser(prog="python -m fuzz", description="The random program and schedule tester: "
                                 "random programs, random schedules, every check, minimal reproducers.")
    ap.add_argument("--seconds", type=float, help="time budget (default 60 unless --count or --case)")
    ap.add_argument("--count", type=int, help="number of schedules to run (deterministic for a seed)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--case-seconds", type=float, default=60.0,
                    help="time limit of one schedule in seconds of CPU time (and 4 times that of wall time, "
                         "which catches a hang); a schedule running longer is a failure (0: none)")
    ap.add_argument("--case", type=int, action="append", help="rerun only this case of the seed (repeatable)")
    ap.add_argument("--out", help="directory for the reproducer scripts (one per failure class)")
    ap.add_argument("--targets", default="ireval,llvm", help="comma-separated: ireval, llvm, cuda")
    ap.add_argument("--nvcc", action="store_true", help="cuda: also compile every kernel with nvcc (slow)")
    ap.add_argument("--no-emulate", action="store_true",
                    help="cuda: emit the source only, without running it on the host emulation")
    ap.add_argument("--gpu", action="store_true", help="cuda: run every kernel on the GPU (PyCUDA and a device)")
    ap.add_argument("--no-verify", action="store_true", help="do not verify the IR after every lowering pass")
    args = ap.parse_args(argv)
    if not args.no_verify:
        os.environ.setdefault("LOOPNEST_VERIFY", "1")
    import faulthandler
    faulthandler.enable()       # a crash in generated code prints where it happened
    from .campaign import run_campaign
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    emulate = "cuda" in targets and not args.no_emulate
    if emulate and args.gpu:
        emulate = "gpu"
    elif emulate:
        from codegen.cuda import nvcc_available
        from codegen.cuda.emulate import host_compiler
        if host_compiler() is None or not nvcc_available():
            print("cuda: no g++ or CUDA headers here, emitting the source without running it", file=sys.stderr)
            emulate = False
    seconds = args.seconds if args.seconds is not None or args.count is not None or args.case else 60.0
    summary = run_campaign(args.seed, count=args.count, seconds=seconds, targets=targets, out=args.out,
                           nvcc=args.nvcc, emulate=emulate, cases=args.case,
                           case_seconds=args.case_seconds or None)
    print(summary.report())
    return 1 if summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
