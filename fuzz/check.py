"""The checks of one program (:func:`check_program`) and of one schedule of it
(:func:`check_schedule`).

Per program: the unscheduled nest on IREval equals the float64 numpy reference, and
``auto_schedule`` takes the unscheduled nest for each CPU of ``AUTO_TARGETS``
(:func:`check_auto_schedules`: a refusal or an exception is a failure; the schedule is only
built by the schedules that draw it). A program
whose index data is out of range (``Case.expected`` is "error" or "any") must, for one nest,
raise IndexError on every target (IREval, LLVM, the CUDA host emulation) or on none, and give
the reference values where it does not raise. (Whether a nest reads the element depends on
the schedule and the simplifier: ``max(2, x % 2)`` is 2 whatever ``x`` loads, and inlining a
tensor whose value does not depend on an index drops the read at that index.)
Per schedule, step by step: a refused step raises ScheduleError and leaves ``str(nest)``
and the history unchanged; an accepted step leaves a nest that verifies; any other
exception is a crash. Then, per target, the scheduled program equals the unscheduled one
on IREval (``ireval`` with poisoned allocations, and again where the nest has parallel or
GPU loops, recording which iterations touch each element: two iterations of one run of such
a loop sharing an element, one writing it, is a race that a serial run hides (IREval's
``check_races``); ``llvm``; ``cuda``: the emitted source, run on the host emulation where
g++ and the CUDA headers exist, compiled with nvcc on request), and the history replayed
onto a fresh nest prints the same nest.

The fuzzer observes failures, so it catches every exception a check raises (``except
Exception`` below) and reports it as a :class:`Failure`.

>>> from fuzz.programs import Program, TensorSpec
>>> p = Program({}, [TensorSpec("A", "int32", [[4, 0]]),
...                  TensorSpec("B", "int32", [[4, 0]], ["add", ["ld", "A", [["i", 0]]], ["c", 1, "int32"]])],
...             ["B"], 0)
>>> case = Case(p)
>>> check_program(case)
[]
>>> steps = [{"op": "split_with_tail", "args": [{"loop": "i0"}, 3], "kwargs": {}}]
>>> check_schedule(case, steps, ("ireval", "llvm")).failures
[]
"""
from __future__ import annotations

import contextlib
import os
import random
import re
import sys
import tempfile
import zlib
from dataclasses import dataclass, field

import numpy as np

from codegen import BuildError, build
from codegen.llvm import evex_check, streaming_store_threshold
from loopnest import LoopNest, ScheduleError
from loopnest.kinds import ForKind
from loopnest.stmt import For, iter_stmts

from .limits import TimeLimit
from .programs import Program, to_te
from .reference import evaluate, expected_outcome, input_data
from .schedules import GPU_OPS, VECTOR_FINISH_PROBABILITY, DrawState, apply_step, draw_step, draw_vector_step

TARGETS = ("ireval", "llvm", "cuda")

#: the CPUs every program is scheduled for by ``auto_schedule`` (``check_auto_schedules``): narrow
#: and wide vectors, one to four cores, tiny and real caches; a schedule draws it as its first
#: step in one of six, for a random CPU, and builds and runs it
AUTO_TARGETS = ({"vector_bits": 128, "vector_registers": 8, "cores": 1, "l1_bytes": 512, "l2_bytes": 4096},
                {"vector_bits": 256, "vector_registers": 16, "cores": 2, "l1_bytes": 32768, "l2_bytes": 1 << 20},
                {"vector_bits": 512, "vector_registers": 32, "cores": 4, "l1_bytes": 64, "l2_bytes": 256})


@dataclass
class Failure:
    """One failed check. ``kind``: crash (a transform raised something other than
    ScheduleError), refusal (a refused transform changed the nest, or ``auto_schedule``
    refused an unscheduled nest), invalid (an accepted
    transform left a nest that does not verify), build (an accepted schedule does not
    build, or LLVM printed a diagnostic building it), run (the kernel raised), wrong (values
    differ from the unscheduled program), reference (the unscheduled program differs from
    numpy), replay (the history does not replay to the same nest), noerror (a target ran
    where another raised IndexError on index data out of range). ``where``: the transform
    or target."""
    kind: str
    where: str
    error: str
    message: str

    @property
    def signature(self) -> str:
        """What makes two failures the same class (kind, where, exception type)."""
        return f"{self.kind}:{self.where}:{self.error}" if self.error else f"{self.kind}:{self.where}"

    def __str__(self) -> str:
        return f"{self.signature}: {self.message.splitlines()[0][:300] if self.message else ''}"


@dataclass
class Result:
    """What one schedule did: its steps, how many were applied / refused, its failures."""
    steps: list
    applied: int = 0
    refused: int = 0
    failures: list = field(default_factory=list)
    skipped: list = field(default_factory=list)


def _error(e: BaseException) -> Failure:
    return Failure("", "", type(e).__name__, f"{type(e).__name__}: {e}")


class Case:
    """A program with its te tensors, input data, numpy reference, what a run must do
    (``expected``: values, error or any, see ``fuzz.reference.expected_outcome``), and the
    outputs of the unscheduled nest on IREval (None when that failed or raised IndexError)."""

    def __init__(self, program: Program):
        self.program = program
        self.te_error = None
        self.llvm_diagnostics: list = []   # what LLVM printed building the last llvm kernel (Case.run)
        try:
            self.outputs, self.inputs, self.sizes = to_te(program)
        except Exception as e:  # the fuzzer reports every exception (check_program does)
            self.te_error = e
            self.outputs, self.inputs, self.sizes = [], [], {}
        self.data = input_data(program)
        values = evaluate(program, self.data, strict=True)
        self.reference = [values[n].astype(program.tensor(n).dtype) for n in program.outputs]
        self.expected = expected_outcome(program, self.data) if program.bad_index is not None else "values"
        self.baseline = None

    @staticmethod
    def dtype(t):
        return np.dtype(str(t.dtype))

    @property
    def args(self) -> list:
        return self.inputs + self.outputs + list(self.sizes)

    def run(self, nest, target: str, **options) -> list:
        """Build ``nest`` for ``target`` and run it on the case's data; the outputs. On LLVM
        every output the kernel only writes gets streaming stores (``streaming_store_threshold``),
        and the outputs start 0, 16 or one element past a 64-byte boundary (by the data
        seed): each of the stores' alignment paths is taken. Outputs start filled with
        ``OUTPUT_FILL`` bytes on every target."""
        shapes = [self.program.shape(self.program.tensor(t.name)) for t in self.outputs]
        if target == "llvm":
            offset = (0, 16, None)[self.program.data_seed % 3]
            outs = [_output_at(shape, self.dtype(t), offset) for shape, t in zip(shapes, self.outputs)]
            with streaming_store_threshold(1), stderr_of_native_code() as printed:
                kernel = build(nest, self.args, target=target, **options)
            self.llvm_diagnostics = [line for line in printed["text"].splitlines() if LLVM_DIAGNOSTIC in line]
        else:
            outs = [_output_at(shape, self.dtype(t)) for shape, t in zip(shapes, self.outputs)]
            if target == "ireval":
                options = {"poison": True, **options}
            kernel = build(nest, self.args, target=target, **options)
        kernel(*[self.data[b.name] for b in self.inputs], *outs, *self.sizes.values())
        return outs


#: what begins every diagnostic LLVM prints about IR without debug locations (``warning: <unknown>:0:0:
#: loop not vectorized: ...``): a build must print none
LLVM_DIAGNOSTIC = "<unknown>:0:0:"


@contextlib.contextmanager
def stderr_of_native_code():
    """Capture what is written to file descriptor 2 in the block (by LLVM, which prints its
    diagnostics there, not through ``sys.stderr``): ``with stderr_of_native_code() as printed``
    leaves the text in ``printed["text"]``, and writes it to ``sys.stderr`` too.

    >>> with stderr_of_native_code() as printed:
    ...     _ = os.write(2, b"written by native code\\n")
    >>> printed["text"]
    'written by native code\\n'
    """
    printed = {"text": ""}
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as tmp:
            os.dup2(tmp.fileno(), 2)
            try:
                yield printed
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                tmp.seek(0)
                printed["text"] = tmp.read().decode(errors="replace")
    finally:
        os.close(saved)
    if printed["text"]:
        sys.stderr.write(printed["text"])


#: the byte every output starts filled with: not zero, so an element the kernel leaves
#: unwritten, or a sum whose init is lost, differs from the reference
OUTPUT_FILL = 0x5A


def _output_at(shape, dtype: np.dtype, offset: int | None = 0) -> np.ndarray:
    """An output array filled with ``OUTPUT_FILL`` bytes whose data starts ``offset`` bytes
    past a multiple of 64 (None: one element past).

    >>> a = _output_at((3, 5), np.dtype("int32"), 16)
    >>> a.shape, a.ctypes.data % 64, hex(int(a[0, 0]))
    ((3, 5), 16, '0x5a5a5a5a')
    """
    offset = dtype.itemsize if offset is None else offset
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.full(nbytes + 128, OUTPUT_FILL, np.uint8)
    start = -raw.ctypes.data % 64 + offset
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def agree(got: np.ndarray, want: np.ndarray, ulps: int = 0) -> np.ndarray:
    """Where ``got`` and ``want`` agree: equal (NaN with NaN), or within ``ulps`` units in
    the last place of the larger of the two in their dtype.

    >>> one = np.float32(1)
    >>> agree(np.array([1, np.nan, 1], np.float32), np.array([1, np.nan, 2], np.float32)).tolist()
    [True, True, False]
    >>> agree(np.array([one + 3 * np.spacing(one)]), np.array([one]), ulps=4).tolist()
    [True]
    """
    g, w = got.astype(np.float64), want.astype(np.float64)
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    if not ulps:
        return same
    with np.errstate(invalid="ignore"):
        unit = np.spacing(np.maximum(np.abs(got), np.abs(want))).astype(np.float64)
        return same | (np.abs(g - w) <= ulps * unit)


def _differs(got: list, want: list, names: list, ulps: int = 0) -> str:
    for g, w, n in zip(got, want, names):
        bad = np.argwhere(~agree(g, w, ulps))
        if bad.size:
            at = tuple(int(x) for x in bad[0])
            return f"{n}{list(at)}: got {g[at] if at else g}, want {w[at] if at else w} ({len(bad)} elements differ)"
    return ""


def _outcome(case: Case, outs: list | None, want: list, where: str, kind: str) -> list:
    """The failures of a run that gave ``outs`` (None: it raised IndexError) where ``want``
    are the values expected (values that differ are a failure of ``kind``)."""
    if outs is None:
        if case.expected == "values":
            return [Failure("run", where, "IndexError", "IndexError: raised on index data that is in range")]
        return []
    diff = _differs(outs, want, [t.name for t in case.outputs], case.program.ulps)
    return [Failure(kind, where, "", diff)] if diff else []


def _agreement(case: Case, raised: dict) -> list:
    """``noerror`` failures of the targets that ran where another raised IndexError
    (``raised``: target -> whether it raised)."""
    if len(set(raised.values())) < 2:
        return []
    which = ", ".join(t for t, r in raised.items() if r)
    return [Failure("noerror", t, "", f"no IndexError where {which} raised it on index data out of range "
                    f"(bad_index {case.program.bad_index})") for t, r in raised.items() if not r]


def check_program(case: Case) -> list:
    """The unscheduled program on IREval against the numpy reference (or the IndexError its
    index data calls for); sets case.baseline."""
    if case.te_error is not None:
        f = _error(case.te_error)
        return [Failure("crash", "te", f.error, f.message)]
    raised: dict = {}
    found: list = []
    for target in ("ireval",) if case.expected == "values" else ("ireval", "llvm"):
        try:
            outs = case.run(LoopNest(case.outputs), target)
        except IndexError as e:
            if case.expected == "values":
                f = _error(e)
                return [Failure("crash", "unscheduled", f.error, f.message)]
            outs = None
        except Exception as e:  # the fuzzer reports every exception
            f = _error(e)
            return [Failure("crash", "unscheduled", f.error, f.message)]
        raised[target] = outs is None
        if case.expected == "values":
            case.baseline = outs
        found += _outcome(case, outs, case.reference, target, "reference")
    return found + [Failure(f.kind, "unscheduled", f.error, f"{f.where}: {f.message}") for f in _agreement(case, raised)]


def check_auto_schedules(case: Case) -> list:
    """``[(steps, failure)]``: ``auto_schedule`` of the unscheduled nest for each of
    ``AUTO_TARGETS``, the step applied as a schedule applies it (a refusal of an unscheduled
    nest, an exception, or a nest that does not verify is a failure); ``steps`` is that one
    step, for the campaign's minimiser and reproducer."""
    if case.te_error is not None:   # reported by check_program
        return []
    found: list = []
    for target in AUTO_TARGETS:
        step = {"op": "auto_schedule", "args": [{"target": target}], "kwargs": {}}
        result = Result([step])
        _apply(LoopNest(case.outputs), step, result)
        found += [([step], f) for f in result.failures]
    return found


def _gpu_bound(nest) -> bool:
    return any(isinstance(s, For) and s.kind in (ForKind.GPU_BLOCK, ForKind.GPU_THREAD) for s in iter_stmts(nest.root))


def _apply(nest, step: dict, result: Result) -> bool:
    """Apply one step; False when the schedule must stop (a crash)."""
    before, history = str(nest), list(nest.history)
    try:
        apply_step(nest, step)
    except ScheduleError as e:
        result.refused += 1
        if str(nest) != before or nest.history != history:
            result.failures.append(Failure("refusal", step["op"], "", f"{step} was refused but changed the nest"))
        elif step["op"] == "auto_schedule" and not history and "external call" not in str(e):
            # the automatic schedules take every unscheduled nest of tensors the backend runs
            result.failures.append(Failure("refusal", "auto_schedule", "ScheduleError",
                                           f"auto_schedule refused an unscheduled nest: {e}"))
        return True
    except Exception as e:  # the fuzzer reports every exception
        f = _error(e)
        result.failures.append(Failure("crash", step["op"], f.error, f.message))
        return False
    result.applied += 1
    try:
        nest.verify()
    except Exception as e:  # the fuzzer reports every exception
        f = _error(e)
        result.failures.append(Failure("invalid", step["op"], f.error, f.message))
        return False
    return True


def _thread_bound(nest, message: str) -> bool:
    """Whether the block loop that ``message`` names (the CUDA refusal "gpu_block loop X is
    not among the outermost loops...") holds a thread-bound loop: binding that thread loop
    checked X's grid, so the refusal is a failure. A thread loop elsewhere in the nest
    checked other loops' grids only (seed 118, case 38). Without a name, any thread loop
    of the nest counts."""
    m = re.search(r"gpu_block loop (\S+) is not among", message)
    loops = [s for s in iter_stmts(nest.root) if isinstance(s, For)]
    if m is not None:
        named = [f for f in loops if f.var.name == m.group(1)]
        if named:
            loops = [s for s in iter_stmts(named[0].body) if isinstance(s, For)]
    return any(f.kind == ForKind.GPU_THREAD for f in loops)


def _check_target(case: Case, nest, target: str, result: Result, nvcc: bool, emulate) -> bool | None:
    """Run ``nest`` on ``target`` and note its failures; whether it raised IndexError (None:
    it did not run, or failed otherwise). ``emulate``: how CUDA kernels run -- False (emitted
    only), True (the host emulation) or ``"gpu"`` (the device)."""
    if target == "llvm" and _gpu_bound(nest):
        result.skipped.append(target)
        return None
    try:
        if target == "cuda":
            kernel = build(nest, case.args, target="cuda")
            if nvcc:
                kernel.compile("sm_80")
            if not emulate:
                return None
            outs = [_output_at(case.program.shape(case.program.tensor(t.name)), case.dtype(t)) for t in case.outputs]
            args = [*[case.data[b.name] for b in case.inputs], *outs, *case.sizes.values()]
            if emulate == "gpu":        # a real GPU (fuzz --gpu)
                kernel(*args)
            else:
                from codegen.cuda.emulate import run_on_host
                run_on_host(kernel, *args)
        else:
            outs = case.run(nest, target)
            if target == "llvm":
                result.failures += _llvm_encoding(case, nest)
                result.failures += _llvm_vector_widths(case, nest)
                if case.llvm_diagnostics:
                    result.failures.append(Failure("build", "llvm", "LLVMDiagnostic",
                                                   f"LLVM printed: {case.llvm_diagnostics[0]}"))
    except IndexError as e:
        if case.expected == "values":
            f = _error(e)
            result.failures.append(Failure("run", target, f.error, f.message))
            return None
        return True
    except BuildError as e:
        if target == "cuda" and "is not among the outermost loops" in str(e) and not _thread_bound(nest, str(e)):
            # block loops under a serial loop under block loops, with no thread bound yet in
            # their nest: the schedule API checks the grid once threads are bound there (block
            # loops may be bound in any order before that), so CUDA alone refuses this one, at
            # build time (a serial loop above every block loop is a host loop, and builds)
            result.skipped.append(target)
            return None
        result.failures.append(Failure("build", target, "BuildError", f"BuildError: {e}"))
        return None
    except Exception as e:  # the fuzzer reports every exception
        f = _error(e)
        result.failures.append(Failure("run", target, f.error, f.message))
        return None
    if case.expected == "values" and case.baseline is None:   # the unscheduled run failed: reported
        return None
    want = case.baseline if case.expected == "values" else case.reference
    result.failures += _outcome(case, outs, want, target, "wrong")
    if target == "ireval" and case.expected == "values" and _concurrent(nest):
        result.failures += _races(case, nest, want, result)
    return False


def _concurrent(nest) -> bool:
    """Whether ``nest`` has a parallel or GPU-bound loop."""
    return any(isinstance(s, For) and s.kind in ForKind.CONCURRENT for s in iter_stmts(nest.root))


def _races(case: Case, nest, want: list, result: Result) -> list:
    """The failures of ``nest`` on IREval with ``check_races``: iterations of one run of a
    concurrent loop that share an element (a scratch buffer allocated outside the loop, say)
    raise ``DataRaceError``, which a serial run hides.

    The race check interprets every iteration on its own (no batching): a schedule that
    recomputes a stage in each of hundreds of GPU threads ran 50 times longer than IREval's
    plain run, which has already given the right values. Where it runs past the case's time
    limit, the check is cut short (``result.skipped`` names it) rather than reported; the
    rest of the case then runs under the wall-clock limit alone (``limits.time_limit``)."""
    where = "ireval-races"
    try:
        outs = case.run(nest, "ireval", check_races=True)
    except TimeLimit:
        result.skipped.append(where)
        return []
    except Exception as e:  # the fuzzer reports every exception
        f = _error(e)
        return [Failure("run", where, f.error, f.message)]
    return _outcome(case, outs, want, where, "wrong")


#: the share of LLVM kernels whose machine code the tester prints to look for the AVX-512
#: encoding defect (one in ENCODING_CHECK_EVERY, chosen by the IR's hash: printing the
#: assembly of every kernel took an eighth of a campaign's time)
ENCODING_CHECK_EVERY = 4


def _llvm_encoding(case: Case, nest) -> list:
    """A failure where the host code of ``nest`` has LLVM 22's AVX-512 encoding defect and
    the compiler's check (``codegen.llvm.evex_check.at_risk``) did not look for it (for one
    kernel in ``ENCODING_CHECK_EVERY``)."""
    kernel = build(nest, case.args, target="llvm")     # the build of the run just made: cached
    ir = kernel.optimized_source or ""
    if zlib.crc32(ir.encode()) % ENCODING_CHECK_EVERY:
        return []
    lines = evex_check.escaped(ir)
    if not lines:
        return []
    return [Failure("build", "llvm", "EVEXEncoding", "a VEX-only instruction names a register of xmm16-31 "
                    f"and evex_check.at_risk did not flag the kernel: {lines[0]}")]


_VECTOR_ACCESS = re.compile(r"(?:= load|store) <(\d+) x (i\d+|half|bfloat|float|double)>")
_TYPE_BITS = {"half": 16, "bfloat": 16, "float": 32, "double": 64}


def wide_odd_vectors(ir: str, vector_bits: int) -> list[str]:
    """The vector loads and stores of the LLVM IR ``ir`` whose lanes are not a power of two and
    take more than one ``vector_bits`` register: LLVM takes such a vector apart element by
    element (a 6 x 48 matmul tile ran 30 times slower than 6 x 64), so the vectorize lowering
    computes them in pieces (``loopnest.vectorize_lowering.lane_pieces``).

    >>> wide_odd_vectors("%a = load <48 x float>, ptr %p\\n store <16 x float> %b, ptr %q", 512)
    ['<48 x float>']
    >>> wide_odd_vectors("%a = load <12 x float>, ptr %p", 512)
    []
    """
    out = []
    for m in _VECTOR_ACCESS.finditer(ir):
        lanes, t = int(m.group(1)), m.group(2)
        bits = _TYPE_BITS.get(t) or int(t[1:])
        if lanes & (lanes - 1) and lanes * bits > vector_bits:
            out.append(f"<{lanes} x {t}>")
    return out


def _llvm_vector_widths(case: Case, nest) -> list:
    """A failure where the LLVM IR of ``nest`` loads or stores a vector ``wide_odd_vectors``
    names."""
    from loopnest.target import host_target
    kernel = build(nest, case.args, target="llvm")     # the build of the run just made: cached
    odd = wide_odd_vectors(kernel.source, host_target().vector_bits)
    if not odd:
        return []
    return [Failure("build", "llvm", "WideVector", f"the IR loads or stores {odd[0]}: more than one vector register "
                    "of lanes that are not a power of two, which LLVM takes apart element by element")]


def _check_replay(case: Case, nest, result: Result) -> None:
    try:
        again = LoopNest(case.outputs).replay(nest.history_json())
    except Exception as e:  # the fuzzer reports every exception
        f = _error(e)
        result.failures.append(Failure("replay", "replay", f.error, f.message))
        return
    if str(again) != str(nest):
        result.failures.append(Failure("replay", "replay", "", "the replayed history prints another nest"))


def check_schedule(case: Case, steps: list | None, targets=TARGETS, rnd: random.Random | None = None,
                   nsteps: int = 0, nvcc: bool = False, emulate: bool = False) -> Result:
    """Apply ``steps`` (or, with ``rnd``, draw ``nsteps`` steps) to a fresh nest of ``case``
    and check it. Drawn schedules bind loops to the GPU in 30% of the cases (all of them when
    llvm is not a target); LLVM skips GPU-bound nests, IREval and CUDA run them."""
    drawing = steps is None
    result = Result([] if drawing else list(steps))
    if case.te_error is not None:   # reported by check_program
        return result
    try:
        nest = LoopNest(case.outputs)
    except Exception:  # the unscheduled nest fails too: check_program reports it
        return result
    state = DrawState()
    gpu = "llvm" not in targets or rnd is not None and rnd.random() < 0.3
    for k in range(nsteps if drawing else len(result.steps)):
        if drawing:
            step = draw_step(nest, rnd, gpu, state)
            result.steps.append(step)
        else:
            step = result.steps[k]
        if not _apply(nest, step, result):
            return result
        state.update(nest, step["op"])
    if drawing and not gpu and rnd.random() < VECTOR_FINISH_PROBABILITY:
        for _ in range(2):          # split an innermost loop if need be, then vectorize
            step = draw_vector_step(nest, rnd)
            result.steps.append(step)
            if not _apply(nest, step, result):
                return result
            if step["op"] == "vectorize":
                break
    raised = {}
    for target in targets:
        r = _check_target(case, nest, target, result, nvcc, emulate)
        if r is not None:
            raised[target] = r
    result.failures += _agreement(case, raised)
    _check_replay(case, nest, result)
    return result


def uses_gpu(steps: list) -> bool:
    """Whether a step list binds loops to the GPU (a GPU transform, or ``auto_schedule("cuda")``)."""
    return any(s["op"] in GPU_OPS or (s["op"] == "auto_schedule" and s["args"] == ["cuda"]) for s in steps)
