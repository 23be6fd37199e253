"""A fuzzing campaign: programs and schedules drawn from a seed, checked, counted, and
(with an output directory) one minimised reproducer script per failure class.

Case ``k`` of seed ``s`` draws from ``random.Random(f"{s}/{k}")`` alone, so a campaign
bounded by a count draws the same programs and schedules on every machine, and one case
can be rerun by itself (``python -m fuzz --seed s --case k``).

>>> summary = run_campaign(seed=3, count=2, targets=("ireval", "llvm"), quiet=True)
>>> summary.schedules
2
"""
from __future__ import annotations

import collections
import os
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from .check import TARGETS, Case, Failure, check_auto_schedules, check_program, check_schedule
from .limits import WALL_FACTOR, TimeLimit, time_limit  # noqa: F401 -- part of this module's API
from .minimize import minimize, minimize_program, reproducer_source
from .programs import INDEX_NAME, random_program

SCHEDULES_PER_PROGRAM = 3
MAX_STEPS = 8
#: failures of one signature minimised (each distinct set of remaining transforms is a class)
MINIMISED_PER_SIGNATURE = 4


@dataclass
class Found:
    """One failure of a campaign with what reproduces it."""
    case: int
    failure: Failure
    steps: list
    program: object


@dataclass
class Summary:
    """Counts of a campaign, its failures by signature (signature -> count), one example
    failure per signature, the reproducer scripts written (by class), and every failure found.
    ``drawn`` counts programs by feature: gathers (an index input), index errors (out-of-range
    index data that an output needs), empty (an extent of 0), constant sizes (sizes built as
    constants, ``Program.constant_sizes``); ``races_cut``, the race checks
    cut short by the time limit (``check._races``)."""
    seed: int
    programs: int = 0
    drawn: collections.Counter = field(default_factory=collections.Counter)
    schedules: int = 0
    steps: int = 0
    refused: int = 0
    by_kind: collections.Counter = field(default_factory=collections.Counter)
    classes: collections.Counter = field(default_factory=collections.Counter)
    examples: dict = field(default_factory=dict)
    reproducers: dict = field(default_factory=dict)
    found: list = field(default_factory=list)
    minimised: collections.Counter = field(default_factory=collections.Counter)
    races_cut: int = 0

    @property
    def failures(self) -> int:
        return sum(self.classes.values())

    def line(self, elapsed: float) -> str:
        k = self.by_kind
        crashes = k["crash"] + k["run"] + k["build"] + k["invalid"] + k["refusal"]
        return (f"[{elapsed:6.0f}s] programs {self.programs}  schedules {self.schedules}  steps {self.steps} "
                f"(refused {self.refused})  wrong values {k['wrong'] + k['reference']}  crashes {crashes}  "
                f"missing IndexErrors {k['noerror']}  "
                f"replay mismatches {k['replay']}")

    def report(self) -> str:
        lines = [f"seed {self.seed}: {self.programs} programs, {self.schedules} schedules, {self.steps} steps "
                 f"({self.refused} refused)",
                 f"  programs with gathers {self.drawn['gathers']}, with index data out of range that an "
                 f"output needs {self.drawn['index errors']}, with an extent of 0 {self.drawn['empty']}, "
                 f"with constant sizes {self.drawn['constant sizes']}"]
        if self.races_cut:
            lines.append(f"  race checks cut short by the time limit {self.races_cut} (IREval's plain run checked "
                         f"those schedules' values)")
        for kind in ("wrong", "reference", "noerror", "crash", "run", "build", "invalid", "refusal", "replay"):
            lines.append(f"  {kind:10s} {self.by_kind[kind]}")
        for sig, n in self.classes.most_common():
            lines.append(f"  {n:5d} x {self.examples[sig]}")
        if self.reproducers:
            lines.append("reproducers (failure class: signature + the transforms that remain):")
            lines += [f"  {cls}: {path}" for cls, path in sorted(self.reproducers.items())]
        return "\n".join(lines)


def _file_name(sig: str, case: int) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", sig).strip("_") + f"_case{case}.py"


def _record(summary: Summary, failures: list, case: Case, steps: list, k: int, targets, out: Path | None,
            options: dict, case_seconds: float | None = None) -> None:
    """Count ``failures``; with ``out``, minimise the first few of each signature and write
    a reproducer for each new class (signature and the transforms left after minimising;
    each trial of the minimising under the campaign's per-case time limit)."""
    for f in failures:
        summary.found.append(Found(k, f, steps, case.program))
        summary.by_kind[f.kind] += 1
        summary.classes[f.signature] += 1
        summary.examples.setdefault(f.signature, f"{f} (case {k})")
        if out is None or summary.minimised[f.signature] >= MINIMISED_PER_SIGNATURE:
            continue
        summary.minimised[f.signature] += 1
        if f.error == TimeLimit.__name__:   # each minimising trial would run as long: written as found
            path = out / _file_name(f.signature, k)
            (out / (path.stem + ".stack.txt")).write_text(f.message)
            path.write_text(reproducer_source(case, steps, f, targets, f"{f.signature} (seed {summary.seed}, case {k})"))
            summary.reproducers.setdefault(f.signature, str(path))
            continue
        small = minimize(case, steps, f, targets, seconds=case_seconds, **options)
        cls = "+".join([f.signature] + sorted({s["op"] for s in small}))
        if cls in summary.reproducers:
            continue
        small_case = minimize_program(case, small, f, targets, seconds=case_seconds, **options)
        small = minimize(small_case, small, f, targets, seconds=case_seconds, **options)
        path = out / _file_name(cls, k)
        path.write_text(reproducer_source(small_case, small, f, targets, f"{cls} (seed {summary.seed}, case {k})"))
        summary.reproducers[cls] = str(path)


def _count_features(summary: Summary, case: Case) -> None:
    p = case.program
    summary.drawn["gathers"] += any(t.name == INDEX_NAME for t in p.inputs)
    summary.drawn["index errors"] += case.expected == "error"
    summary.drawn["empty"] += any(p.extent(d) == 0 for t in p.tensors for d in t.dims + t.rdims)
    summary.drawn["constant sizes"] += p.constant_sizes


#: the file in ``--out`` naming the case being run (the command that reruns it alone)
IN_PROGRESS = "IN_PROGRESS"


def run_campaign(seed: int, count: int | None = None, seconds: float | None = None, targets=("ireval", "llvm"),
                 out: str | os.PathLike | None = None, nvcc: bool = False, emulate: bool = False,
                 cases: list | None = None, quiet: bool = False, progress_every: float = 10.0,
                 case_seconds: float | None = None) -> Summary:
    """Run schedules until ``count`` of them ran or ``seconds`` passed (cases ``0, 1, ...``
    or the given ``cases``); write reproducers into ``out`` when given. ``case_seconds``
    bounds each schedule (and each program's own check): one running longer is a failure.

    Kernels run in this process, so a kernel that crashes it (a fault in generated code)
    ends the campaign before a reproducer is written: ``out/IN_PROGRESS`` names the seed and
    case running at any time (removed when the campaign ends), to rerun with ``--case``."""
    targets = tuple(targets)
    unknown = set(targets) - set(TARGETS)
    if unknown:
        raise ValueError(f"unknown targets {sorted(unknown)}; expected some of {TARGETS}")
    if count is None and seconds is None and cases is None:
        raise ValueError("give a count of schedules, a time budget in seconds, or cases")
    out_dir = Path(out) if out is not None else None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    options = {"nvcc": nvcc, "emulate": emulate}
    summary = Summary(seed)
    start = last = time.monotonic()
    k = -1
    while True:
        k += 1
        if cases is not None:
            if k >= len(cases):
                break
            case_id = cases[k]
        else:
            case_id = k
        if count is not None and summary.schedules >= count:
            break
        if seconds is not None and time.monotonic() - start >= seconds:
            break
        if out_dir is not None:
            (out_dir / IN_PROGRESS).write_text(f"python -m fuzz --seed {seed} --case {case_id} "
                                               f"--targets {','.join(targets)}\n")
        rnd = random.Random(f"{seed}/{case_id}")
        case = Case(random_program(rnd))
        summary.programs += 1
        _count_features(summary, case)
        with time_limit(case_seconds):
            found = check_program(case)
        _record(summary, found, case, [], case_id, targets, out_dir, options, case_seconds)
        with time_limit(case_seconds):
            automatic = check_auto_schedules(case)
        for steps, failure in automatic:
            _record(summary, [failure], case, steps, case_id, targets, out_dir, options, case_seconds)
        for _ in range(SCHEDULES_PER_PROGRAM):
            if count is not None and summary.schedules >= count:
                break
            with time_limit(case_seconds):
                result = check_schedule(case, None, targets, rnd, rnd.randint(1, MAX_STEPS), **options)
            summary.schedules += 1
            summary.steps += len(result.steps)
            summary.refused += result.refused
            summary.races_cut += "ireval-races" in result.skipped
            _record(summary, result.failures, case, result.steps, case_id, targets, out_dir, options, case_seconds)
        if not quiet and time.monotonic() - last >= progress_every:
            last = time.monotonic()
            print(summary.line(last - start), flush=True)
    if out_dir is not None:
        (out_dir / IN_PROGRESS).unlink(missing_ok=True)
    if not quiet:
        print(summary.line(time.monotonic() - start), flush=True)
    return summary
