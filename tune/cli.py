"""Command line: ``python -m tune <kernel> --trials N --db FILE``.

Tunes one of the built-in kernels (``tune.workloads``: matmul, conv2d, softmax,
elementwise), prints the progress line, the best time (and GFLOP/s), its knobs and its
scheduled loop nest; ``--plot`` saves the tuning curve; ``--export`` writes the records
as JSON lines. Kernel parameters are set with ``-p NAME=VALUE`` (e.g. ``-p M=256``).

A tuning error (a damaged database, no candidate that built and ran) is printed as one line
on stderr, exit status 1; so is a database that failed during the run, after the results
(the records it did not take are saved as JSON lines, see ``tune.tuner``).

>>> main(["--list"])
matmul conv2d softmax elementwise
0
"""
from __future__ import annotations

import argparse
import inspect
import sys
from typing import Sequence

from .errors import TuneError
from .workloads import WORKLOADS

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tune", description="Autotune a built-in kernel's schedule.")
    p.add_argument("kernel", nargs="?", choices=sorted(WORKLOADS), help="kernel to tune")
    p.add_argument("--trials", type=int, default=20, help="candidates to try (default 20)")
    p.add_argument("--db", default=None, help="records database file (SQLite); omit for memory only")
    p.add_argument("--target", default="llvm", choices=["llvm", "ireval"],
                   help="codegen target (the automatic space schedules CPU targets; tune CUDA kernels from a "
                        "script with a schedule function that binds blocks and threads)")
    p.add_argument("--strategy", default="model", choices=["model", "evolutionary", "random", "grid"])
    p.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                   help="kernel parameter, e.g. -p M=256 (see --list-params)")
    p.add_argument("--timeout", type=float, default=None, help="seconds allowed to build and to run a candidate")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=5, help="timed repeats per candidate")
    p.add_argument("--plot", default=None, help="save the tuning curve to this image file")
    p.add_argument("--export", default=None, help="write the database's records as JSON lines to this file")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.add_argument("--list", action="store_true", help="list the kernels and exit")
    p.add_argument("--list-params", action="store_true", help="list the kernel's parameters and exit")
    return p


def _params(kernel: str, items: Sequence[str]) -> dict:
    fn = WORKLOADS[kernel]
    sig = inspect.signature(fn)
    out = {}
    for it in items:
        name, sep, value = it.partition("=")
        if not sep or name not in sig.parameters or name == "dtype":
            raise SystemExit(f"bad parameter {it!r}: expected NAME=INT with NAME one of "
                             f"{[n for n in sig.parameters if n != 'dtype']}")
        try:
            out[name] = int(value)
        except ValueError:
            raise SystemExit(f"bad parameter {it!r}: {value!r} is not an integer") from None
    return out


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except TuneError as e:
        print(f"python -m tune: error: {e}", file=sys.stderr)
        return 1


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if args.list:
        print(" ".join(WORKLOADS))
        return 0
    if args.kernel is None:
        build_parser().print_usage(sys.stderr)
        print("python -m tune: a kernel is required (see --list)", file=sys.stderr)
        return 2
    if args.list_params:
        sig = inspect.signature(WORKLOADS[args.kernel])
        print(" ".join(f"{n}={p.default}" for n, p in sig.parameters.items() if n != "dtype"))
        return 0
    from loopnest import LoopNest
    from .api import autotune
    from .plot import plot_tuning_curve
    from .progress import format_time
    w = WORKLOADS[args.kernel](**_params(args.kernel, args.param))
    kernel, best, result = autotune(w.outputs, w.args, target=args.target, trials=args.trials, db=args.db,
                                    strategy=args.strategy, timeout=args.timeout, seed=args.seed,
                                    reference=w.reference, repeats=args.repeats, progress=not args.quiet,
                                    return_result=True)
    print(f"kernel: {args.kernel}  target: {args.target}  trials: {len(result.records)} "
          f"(measured {result.measured}, from the database {result.reused}, illegal schedules {result.invalid})")
    if result.errors():
        print("failed candidates: " + ", ".join(f"{k} {v}" for k, v in sorted(result.errors().items())))
    print(f"best: {format_time(best.median)}  ({w.flops / best.median / 1e9:.2f} GFLOP/s)")
    print("knobs: " + ", ".join(f"{k}={v}" for k, v in best.point.items()))
    print(LoopNest(w.outputs).replay(best.trace))
    if args.plot:
        if plot_tuning_curve(result.costs, args.plot, flops=w.flops, title=f"{args.kernel} ({args.target})"):
            print(f"tuning curve: {args.plot}")
    if result.db_error is not None:
        saved = f"written to {result.unsaved_path}" if result.unsaved_path else "not saved"
        print(f"python -m tune: error: the database failed during the run ({result.db_error}); "
              f"{len(result.unsaved)} records it did not take are {saved}", file=sys.stderr)
        return 1
    if args.export:
        from .api import open_db
        n = open_db(args.db).export_jsonl(args.export)
        print(f"exported {n} records to {args.export}")
    return 0
