"""Minimal reproducers: drop steps of a failing schedule while the failure (same
signature) persists, then write a standalone script that rebuilds the program, applies
the remaining steps through the public API, and checks what the fuzzer checks.

The script prints PASS once the defect is fixed and FAIL (exit status 1) while it is not.

>>> from fuzz.programs import Program, TensorSpec
>>> from fuzz.check import Case, Failure
>>> p = Program({}, [TensorSpec("A", "int32", [[4, 0]]),
...                  TensorSpec("B", "int32", [[4, 0]], ["add", ["ld", "A", [["i", 0]]], ["c", 1, "int32"]])],
...             ["B"], 0)
>>> src = reproducer_source(Case(p), [], Failure("reference", "ireval", "", "example"), ("ireval",), "example")
>>> compile(src, "repro.py", "exec") is not None
True
"""
from __future__ import annotations

import dataclasses
import json
import time

import numpy as np

from .check import Case, Failure, check_program, check_schedule, uses_gpu
from .limits import TimeLimit, time_limit
from .programs import FUNCTIONS, MAX_MAGNITUDE, Program, dtype_of, to_source
from .reference import Inexact
from .schedules import step_source


def reproduces(case: Case, steps: list, failure: Failure, targets, seconds: float | None = None, **options) -> bool:
    """Whether applying ``steps`` to ``case`` fails with ``failure``'s signature (a trial
    running past ``seconds``, the per-case time limit, does not)."""
    try:
        with time_limit(seconds):
            if failure.kind == "reference" or failure.where == "unscheduled":
                return any(f.signature == failure.signature for f in check_program(case))
            result = check_schedule(case, steps, targets, **options)
    except TimeLimit:
        return False
    return any(f.signature == failure.signature for f in result.failures)


def minimize(case: Case, steps: list, failure: Failure, targets, seconds: float | None = None, **options) -> list:
    """The shortest step list found by dropping one step at a time, from the last, while
    the failure persists (repeated until no single step can go); each trial within
    ``seconds`` (see :func:`reproduces`)."""
    steps = list(steps)
    changed = True
    while changed:
        changed = False
        for k in reversed(range(len(steps))):
            trial = steps[:k] + steps[k + 1:]
            if reproduces(case, trial, failure, targets, seconds, **options):
                steps, changed = trial, True
    return steps


def _value_paths(node, path=()):
    """Paths (index tuples) of the value subexpressions of ``node``, outermost first; the
    index expressions of loads are left alone (changing them could leave the buffer)."""
    yield path
    tag = node[0]
    if tag in ("c", "i", "n", "ld", "sum"):
        return
    children = {"cmp": (3, 4), "sel": (1, 2, 3), "ite": (2, 3), "cast": (2,), "bitcast": (2,), "not": (1,),
                "fn": (2,)}.get(tag, (1, 2))
    for k in children:
        yield from _value_paths(node[k], path + (k,))


def _get(node, path):
    for k in path:
        node = node[k]
    return node


def _replaced(node, path, new):
    if not path:
        return new
    out = list(node)
    out[path[0]] = _replaced(node[path[0]], path[1:], new)
    return out


def _simpler(node, dtypes: dict) -> list:
    """Candidate replacements of ``node``: a child of the same dtype, then a constant."""
    dtype = dtype_of(node, dtypes)
    tag = node[0]
    if tag == "c" or dtype == "bool":
        return []
    if tag == "sum":
        terms = node[1]
        return [["sum", terms[:len(terms) // 2]]] if len(terms) > 1 else [terms[0]]
    children = {"sel": (2, 3), "ite": (2, 3), "cast": (), "bitcast": (), "ld": (), "i": (), "n": (),
                "not": (1,), "fn": (2,)}.get(tag, (1, 2))
    out = [node[k] for k in children if dtype_of(node[k], dtypes) == dtype]
    return out + [["c", 1, dtype]]


def _case_of(program: Program) -> Case | None:
    """A Case of ``program``, or None when its reference reads out of range or grows too large."""
    try:
        case = Case(program)
    except (AssertionError, Inexact):
        return None
    # a math function's values (the last stage's, read by nothing) may be any
    if any(abs(r.astype(np.float64)).max(initial=0.0) >= MAX_MAGNITUDE
           for r, name in zip(case.reference, program.outputs) if program.tensor(name).body[0] != "fn"):
        return None
    return case


def minimize_program(case: Case, steps: list, failure: Failure, targets, budget: float = 120.0,
                     seconds: float | None = None, **options) -> Case:
    """Simplify the stages' expressions (a subexpression becomes one of its children or a
    constant) and drop extra outputs while ``steps`` still fail with ``failure``'s signature;
    stops after ``budget`` seconds (each trial within ``seconds``, see :func:`reproduces`)."""
    deadline = time.monotonic() + budget

    def keeps(program: Program) -> Case | None:
        trial = _case_of(program)
        if trial is None:
            return None
        if failure.kind != "reference" and failure.where != "unscheduled":
            try:
                with time_limit(seconds):
                    if check_program(trial):
                        return None
            except TimeLimit:
                return None
        return trial if reproduces(trial, steps, failure, targets, seconds, **options) else None

    program = case.program
    if len(program.outputs) > 1:
        for keep in program.outputs:
            trial = keeps(dataclasses.replace(program, outputs=[keep]))
            if trial is not None:
                case, program = trial, trial.program
                break
    dtypes = {t.name: t.dtype for t in program.tensors}
    for pos, t in enumerate(program.tensors):
        if t.body is None:
            continue
        paths = list(_value_paths(t.body))
        k = 0
        while k < len(paths) and time.monotonic() < deadline:
            body = program.tensors[pos].body
            for new in _simpler(_get(body, paths[k]), dtypes):
                tensors = list(program.tensors)
                tensors[pos] = dataclasses.replace(t, body=_replaced(body, paths[k], new))
                trial = keeps(dataclasses.replace(program, tensors=tensors))
                if trial is not None:
                    case, program = trial, trial.program
                    paths = list(_value_paths(program.tensors[pos].body))
                    break
            else:
                k += 1
    trial = keeps(_reachable_only(program))
    return trial if trial is not None else case


def _reachable_only(program: Program) -> Program:
    """``program`` without the tensors its outputs do not read, and the sizes nothing uses."""
    reads = {t.name: {n for n in (x.name for x in program.tensors) if f'["ld", "{n}",' in json.dumps(t.body)}
             for t in program.tensors}
    keep, todo = set(), list(program.outputs)
    while todo:
        name = todo.pop()
        if name not in keep:
            keep.add(name)
            todo.extend(reads[name])
    tensors = [t for t in program.tensors if t.name in keep]
    text = json.dumps([[t.dims, t.rdims, t.body] for t in tensors])
    sizes = {n: v for n, v in program.sizes.items() if f'"{n}"' in text}
    bad_index = program.bad_index if program.bad_index is not None and program.bad_index[0] in keep else None
    return dataclasses.replace(program, tensors=tensors, sizes=sizes, bad_index=bad_index)


_TEMPLATE = '''"""Reproducer written by the random tester (python -m fuzz): {title}

{message}

The program below, scheduled with the steps below, must give on every target the values of the
unscheduled program on IREval, which must equal the float64 numpy reference WANT (computed
from the program's description, not by the compiler); where EXPECT is "error" or "any" (index
data out of range) a run may raise IndexError instead, but the targets must agree on the
scheduled nest; a refused step must leave the nest unchanged; the history must replay to the
same nest. Prints PASS when all hold, else FAIL.
"""
import sys
import traceback

import ml_dtypes  # noqa: F401 -- bfloat16 arrays
import numpy as np

from codegen import build
from loopnest import LoopNest, ScheduleError, Target
import functools
import operator

from te import (Buffer, Compute, Max, Min, Reduce, Sum, Var, bitcast, cast, const, floordiv, floormod,
                if_then_else, int32, int64, maximum, minimum, select)
from te import {functions}

try:   # building the program is checked too
{program}
except Exception:
    traceback.print_exc()
    print("FAIL")
    sys.exit(1)

OUTPUTS = [{outputs}]
INPUTS = [{inputs}]
SIZES = {{{sizes}}}
DATA = {data}
WANT = {want}
TARGETS = {targets}
CUDA = {cuda}
EXPECT = {expect!r}
ULPS = {ulps}    # units in the last place a value may differ by (a math function's rounding)


def output(shape, dtype):   # filled with 0x5A bytes, not zeros: an unwritten element shows
    return np.full(int(np.prod(shape)) * np.dtype(dtype).itemsize, 0x5A, np.uint8).view(dtype).reshape(shape)


def run(nest, target):
    outs = [output(WANT[t.name][1], WANT[t.name][2]) for t in OUTPUTS]
    options = {{"ireval": {{"poison": True}},
               "ireval-races": {{"poison": True, "check_races": True}}}}.get(target, {{}})
    build(nest, INPUTS + OUTPUTS + list(SIZES), target=target.split("-")[0], **options)(
        *[np.array(DATA[b.name][0], DATA[b.name][2]).reshape(DATA[b.name][1]) for b in INPUTS], *outs,
        *SIZES.values())
    return outs


def close(g, w):
    a, b = g.astype(np.float64), w.astype(np.float64)
    with np.errstate(invalid="ignore"):
        unit = np.spacing(np.maximum(np.abs(g), np.abs(w))).astype(np.float64) if ULPS else 0.0
        return ((a == b) | (np.isnan(a) & np.isnan(b)) | (np.abs(a - b) <= ULPS * unit)).all()


def same(got, want):
    return all(close(g, w) for g, w in zip(got, want))


RAISED = {{}}


def attempt(what, call):
    """The outputs of ``call()``, or None where it raised IndexError ("bad" where it must not)."""
    try:
        got = call()
    except IndexError as e:
        print(f"{{what}}: IndexError: {{e}}")
        RAISED[what] = True
        if EXPECT == "values":
            print(f"{{what}} raised IndexError on index data that is in range")
            return "bad"
        return None
    RAISED[what] = False
    return got


def step(call):
    before, history = str(nest), list(nest.history)
    try:
        call()
    except ScheduleError as e:
        print(f"refused: {{e}}")
        assert str(nest) == before and nest.history == history, "a refused transform changed the nest"


bad = False
want = [np.array(WANT[t.name][0], WANT[t.name][2]).reshape(WANT[t.name][1]) for t in OUTPUTS]
try:
    base = attempt("the unscheduled program on IREval", lambda: run(LoopNest(OUTPUTS), "ireval"))
    RAISED.clear()
    bad = isinstance(base, str)
    if base is not None and not bad and not same(base, want):
        print(f"the unscheduled program on IREval differs from numpy:\\n{{base}}\\nwant\\n{{want}}")
        bad = True
    if EXPECT != "values" or bad:
        base = want
    nest = LoopNest(OUTPUTS)
{steps}
    print(nest)
    for target in TARGETS:
        got = attempt(target, lambda: run(nest, target))
        bad = bad or isinstance(got, str)
        if got is not None and not isinstance(got, str) and not same(got, base):
            print(f"{{target}}: got\\n{{got}}\\nthe unscheduled program on IREval gives\\n{{base}}")
            bad = True
    if CUDA:
        kernel = build(nest, INPUTS + OUTPUTS + list(SIZES), target="cuda")
        print(kernel.source)
        from codegen.cuda.emulate import host_compiler, run_on_host
        if host_compiler() is not None:
            got = [output(WANT[t.name][1], WANT[t.name][2]) for t in OUTPUTS]

            def emulate():
                run_on_host(kernel, *[np.array(DATA[b.name][0], DATA[b.name][2]).reshape(DATA[b.name][1])
                                      for b in INPUTS], *got, *SIZES.values())
                return got
            got = attempt("cuda (host emulation)", emulate)
            bad = bad or isinstance(got, str)
            if got is not None and not isinstance(got, str) and not same(got, base):
                print(f"cuda (host emulation): got\\n{{got}}\\nthe unscheduled program on IREval gives\\n{{base}}")
                bad = True
    if len(set(RAISED.values())) > 1:
        print(f"the targets disagree on raising IndexError: {{RAISED}}")
        bad = True
    replayed = LoopNest(OUTPUTS).replay(nest.history_json())
    if str(replayed) != str(nest):
        print(f"the history replays to another nest:\\n{{replayed}}")
        bad = True
except Exception:
    traceback.print_exc()
    bad = True
print("FAIL" if bad else "PASS")
sys.exit(1 if bad else 0)
'''


def _array(a: np.ndarray) -> list:
    values = a.ravel() if a.dtype.kind in "iu" else a.ravel().astype(np.float64)
    return [values.tolist(), list(a.shape), str(a.dtype)]


def reproducer_source(case: Case, steps: list, failure: Failure, targets, title: str) -> str:
    """A standalone script reproducing ``failure`` of ``steps`` on ``case``."""
    p = case.program
    cpu = [t for t in targets if t in ("ireval", "llvm")]
    if failure.where in ("ireval", "llvm", "ireval-races"):
        cpu = [failure.where]
    if uses_gpu(steps):   # GPU-bound loops run on IREval and CUDA only
        cpu = [t for t in cpu if t != "llvm"]
    message = "\n".join(line[:200] for line in str(failure).splitlines()[:6])
    return _TEMPLATE.format(
        title=title, message=message, program="\n".join("    " + line for line in to_source(p).splitlines()),
        outputs=", ".join(p.outputs), inputs=", ".join(t.name for t in p.inputs),
        sizes="" if p.constant_sizes else ", ".join(f"{n}: {v}" for n, v in p.sizes.items()),
        data=json.dumps({n: _array(a) for n, a in case.data.items()}),
        want=json.dumps({t.name: _array(r) for t, r in zip(case.outputs, case.reference)}),
        targets=repr(cpu or ["ireval"]), cuda=failure.where == "cuda", expect=case.expected, ulps=p.ulps,
        functions=", ".join(FUNCTIONS),
        steps="\n".join(f"    step(lambda: {step_source(s)})" for s in steps) or "    pass")
