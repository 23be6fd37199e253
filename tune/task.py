"""A tuning task: one computation with concrete sizes, its inputs, its reference output,
and the workload key that names it in the records database.

The key is a structural hash: the printed unscheduled LoopNest of the outputs, plus the
shape, dtype and layout of every buffer, plus the concrete sizes. Two processes (or two
machines) that define the same computation get the same key.

>>> from te import Buffer, Compute
>>> A = Buffer("A", (8,), "float32")
>>> B = Compute("B", (8,), lambda i: A[i] * 2.0)
>>> task = Task([B], [A, B], reference=lambda ins: {"B": ins["A"] * 2})
>>> len(task.key), task.shapes["B"]
(64, (8,))
"""
from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from te.expr import Expr, Var
from te.queries import free_vars
from te.tensor import Buffer, Tensor

from .serialize import dumps_computation, loads_computation

__all__ = ["Task", "TaskRef", "workload_key", "check_outputs", "tolerance_for"]

# below this many innermost iterations the reference is computed with IREval by default
IREVAL_REFERENCE_LIMIT = 1 << 16


def _size_vars(buffers: Sequence[Buffer]) -> dict[str, Var]:
    out: dict[str, Var] = {}
    for b in buffers:
        for v in free_vars(b.dims):
            out.setdefault(v.name, v)
    return out


def _eval_dim(d: Expr, sizes: Mapping[str, int]) -> int:
    from codegen.kernel import eval_int_expr
    env = {id(v): int(sizes[v.name]) for v in free_vars(d) if v.name in sizes}
    return int(eval_int_expr(d, env))


def _all_buffers(outputs: Sequence[Tensor]) -> list[Buffer]:
    from loopnest.lower import input_buffers, tensors_in_order
    tensors = tensors_in_order(list(outputs))
    return input_buffers(tensors) + tensors


def workload_key(outputs: Sequence[Tensor], sizes: Mapping[str, int] | None = None) -> str:
    """The sha256 naming the computation of ``outputs`` at ``sizes``.

    >>> from te import Buffer, Compute
    >>> A = Buffer("A", (8,), "float32")
    >>> workload_key([Compute("B", (8,), lambda i: A[i] + 1.0)])[:8] == \\
    ...     workload_key([Compute("B", (8,), lambda i: A[i] + 1.0)])[:8]
    True
    """
    return hashlib.sha256(workload_text(outputs, sizes).encode()).hexdigest()


def workload_text(outputs: Sequence[Tensor], sizes: Mapping[str, int] | None = None) -> str:
    """The text hashed by ``workload_key`` (useful to see why two keys differ)."""
    from loopnest import LoopNest
    outputs = list(outputs)
    lines = [str(LoopNest(outputs)), "outputs: " + ",".join(t.name for t in outputs)]
    for b in sorted(_all_buffers(outputs), key=lambda b: b.name):
        lines.append(f"buffer {b.name} {tuple(str(d) for d in b.dims)} {b.dtype} {b.layout!r}")
    for name, v in sorted((sizes or {}).items()):
        lines.append(f"size {name}={int(v)}")
    return "\n".join(lines)


def tolerance_for(dtype) -> float:
    """Relative tolerance used to compare a floating output of ``dtype`` to the reference."""
    bits = {"float64": 1e-6, "float32": 1e-3, "tf32": 1e-2, "float16": 2e-2, "bfloat16": 5e-2}
    return bits.get(getattr(dtype, "scalar_name", str(dtype)), 0.25)


def check_outputs(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray],
                  dtypes: Mapping[str, Any] | None = None) -> str | None:
    """None when every output matches its reference, else a message naming the first mismatch.

    Integers and booleans must be equal; floats must agree within ``tolerance_for(dtype)``
    relative to the output's largest magnitude (reductions may be reassociated).
    """
    for name, ref in want.items():
        out = got.get(name)
        if out is None:
            return f"output {name} was not produced"
        out = np.asarray(out)
        ref = np.asarray(ref)
        if out.shape != ref.shape:
            return f"output {name} has shape {out.shape}, expected {ref.shape}"
        if ref.dtype.kind in "biu":
            bad = np.flatnonzero(out.ravel() != ref.ravel())
            if bad.size:
                k = int(bad[0])
                return (f"output {name} differs at {bad.size} of {ref.size} elements; first at flat index {k}: "
                        f"got {out.ravel()[k]}, expected {ref.ravel()[k]}")
            continue
        o = out.astype(np.float64)
        r = ref.astype(np.float64)
        dt = (dtypes or {}).get(name, ref.dtype.name)
        rtol = tolerance_for(dt)
        scale = float(np.nanmax(np.abs(r[np.isfinite(r)]))) if np.isfinite(r).any() else 1.0
        ok = np.isclose(o, r, rtol=rtol, atol=rtol * max(scale, 1e-30), equal_nan=True)
        ok |= (o == r)   # equal infinities
        if not ok.all():
            k = int(np.flatnonzero(~ok.ravel())[0])
            return (f"output {name} differs at {int((~ok).sum())} of {ref.size} elements; first at flat index "
                    f"{k}: got {o.ravel()[k]!r}, expected {r.ravel()[k]!r} (rtol {rtol})")
    return None


def _random_array(rng: np.random.Generator, shape: tuple, dtype) -> np.ndarray:
    nd = dtype.numpy
    if dtype.is_bool:
        return rng.random(shape) < 0.5
    if dtype.is_integer:
        lo = 0 if dtype.is_uint else -8
        return rng.integers(lo, 9, size=shape).astype(nd)
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32).astype(nd)


def _unwritten(shape: tuple, dtype) -> np.ndarray:
    """An output array filled with a value no correct kernel leaves behind (NaN, or a sentinel)."""
    nd = dtype.numpy
    if dtype.is_float:
        return np.full(shape, np.nan, dtype=np.float32).astype(nd)
    if dtype.is_bool:
        return np.zeros(shape, dtype=nd)
    return np.full(shape, 77, dtype=nd)


class Task:
    """One computation to tune: ``outputs`` (Tensors), the kernel's ``args`` (Buffers, Tensors,
    Vars) and concrete ``sizes`` for its size variables.

    ``inputs`` maps input buffer names to arrays (random, seeded, when not given).
    ``reference`` gives the expected outputs: a dict of arrays, a function of the input dict
    returning such a dict (or one array for one output), a target name whose unscheduled
    nest computes it (``"ireval"``, ``"llvm"``), or None: IREval for small workloads, else
    the unscheduled nest on ``target``.
    """

    def __init__(self, outputs: Sequence[Tensor], args: Sequence[Any], sizes: Mapping[str, int] | None = None,
                 inputs: Mapping[str, np.ndarray] | None = None, reference: Any = None,
                 target: str = "llvm", seed: int = 0):
        if isinstance(outputs, Tensor):
            outputs = [outputs]
        self.outputs: list[Tensor] = list(outputs)
        self.args: list[Any] = list(args)
        self.target = target
        self.seed = seed
        buffers = [a for a in self.args if isinstance(a, Buffer)]
        svars = _size_vars(buffers)
        sizes = {str(k): int(v) for k, v in (sizes or {}).items()}
        if inputs:   # read sizes off given arrays
            for b in buffers:
                if b.name in inputs:
                    for d, n in zip(b.dims, np.shape(inputs[b.name])):
                        if isinstance(d, Var):
                            sizes.setdefault(d.name, int(n))
        missing = sorted(set(svars) - set(sizes))
        if missing:
            raise ValueError(f"tuning needs concrete sizes for {missing}: pass sizes={{{missing[0]!r}: ...}} "
                             "or input arrays")
        self.sizes: dict[str, int] = {k: sizes[k] for k in sorted(sizes) if k in svars}
        out_names = {t.name for t in self.outputs}
        self.shapes: dict[str, tuple] = {b.name: tuple(_eval_dim(d, self.sizes) for d in b.dims) for b in buffers}
        self.dtypes = {b.name: b.dtype for b in buffers}
        self.input_names = [b.name for b in buffers if b.name not in out_names]
        self.output_names = [t.name for t in self.outputs]
        for name in self.output_names:
            if name not in self.shapes:
                raise ValueError(f"output {name} is not in the argument list {[self._name(a) for a in self.args]}")
        self.key = workload_key(self.outputs, self.sizes)
        rng = np.random.default_rng(seed)
        self.inputs: dict[str, np.ndarray] = {}
        for b in buffers:
            if b.name in out_names:
                continue
            if inputs and b.name in inputs:
                a = np.ascontiguousarray(inputs[b.name], dtype=b.dtype.numpy)
                if a.shape != self.shapes[b.name]:
                    raise ValueError(f"input {b.name} has shape {a.shape}, expected {self.shapes[b.name]}")
                self.inputs[b.name] = a
            else:
                self.inputs[b.name] = _random_array(rng, self.shapes[b.name], b.dtype)
        self.reference_source = ""
        self.reference: dict[str, np.ndarray] = self._compute_reference(reference)

    @staticmethod
    def _name(a) -> str:
        return getattr(a, "name", repr(a))

    # -- arrays -----------------------------------------------------------------------
    def fresh_arrays(self) -> dict[str, np.ndarray]:
        """Copies of the inputs and unwritten output arrays, by buffer name."""
        arrays = {k: v.copy() for k, v in self.inputs.items()}
        for name in self.output_names:
            arrays[name] = _unwritten(self.shapes[name], self.dtypes[name])
        return arrays

    def call_kwargs(self, arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """Keyword arguments for a Kernel: arrays by buffer name, sizes by variable name."""
        kw: dict[str, Any] = {}
        for a in self.args:
            if isinstance(a, Buffer):
                kw[a.name] = arrays[a.name]
            elif isinstance(a, Var):
                kw[a.name] = self.sizes[a.name]
        return kw

    def iterations(self) -> int:
        """Innermost iterations of the unscheduled computation (a size estimate)."""
        from loopnest.lower import tensors_in_order
        total = 0
        for t in tensors_in_order(self.outputs):
            n = 1
            for d in tuple(t.dims) + tuple(t.reduce_dims):
                n *= _eval_dim(d, self.sizes)
            total += n
        return total

    def flops_estimate(self) -> int:
        """2 x innermost iterations: the flop count of a matmul-like kernel (for GFLOP/s)."""
        return 2 * self.iterations()

    # -- reference --------------------------------------------------------------------
    def _compute_reference(self, reference: Any) -> dict[str, np.ndarray]:
        if isinstance(reference, Mapping):
            self.reference_source = "given arrays"
            return {k: np.asarray(reference[k]) for k in self.output_names}
        if callable(reference):
            out = reference({k: v.copy() for k, v in self.inputs.items()})
            if not isinstance(out, Mapping):
                if len(self.output_names) != 1:
                    raise ValueError("a reference function for several outputs must return a dict by name")
                out = {self.output_names[0]: out}
            self.reference_source = getattr(reference, "__name__", "function")
            return {k: np.asarray(out[k]).astype(self.dtypes[k].numpy).reshape(self.shapes[k])
                    for k in self.output_names}
        if reference is None:
            reference = "ireval" if self.iterations() <= IREVAL_REFERENCE_LIMIT else self.target
        if not isinstance(reference, str):
            raise TypeError(f"reference must be a dict, a function, a target name or None; got {reference!r}")
        from codegen import build
        from loopnest import LoopNest
        kernel = build(LoopNest(self.outputs), self.args, target=reference)
        arrays = self.fresh_arrays()
        kernel(**self.call_kwargs(arrays))
        self.reference_source = f"unscheduled nest on {reference}"
        return {k: arrays[k] for k in self.output_names}

    # -- shipping to workers ----------------------------------------------------------
    def payload(self) -> bytes:
        """Everything a worker needs, as bytes (see ``TaskRef``)."""
        return pickle.dumps({
            "key": self.key, "computation": dumps_computation(self.outputs, self.args), "sizes": self.sizes,
            "inputs": self.inputs, "reference": self.reference, "target": self.target, "seed": self.seed,
        }, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def from_payload(cls, data: bytes) -> "Task":
        d = pickle.loads(data)
        outputs, args = loads_computation(d["computation"])
        return cls(outputs, args, d["sizes"], inputs=d["inputs"], reference=d["reference"], target=d["target"],
                   seed=d["seed"])

    def save(self, directory: str | None = None) -> "TaskRef":
        """Write the payload to a file and return a small reference to it for workers."""
        fd, path = tempfile.mkstemp(prefix=f"tune-task-{self.key[:12]}-", suffix=".pkl", dir=directory)
        with os.fdopen(fd, "wb") as f:
            f.write(self.payload())
        return TaskRef(self.key, path)


_CACHE: dict[str, Task] = {}


@dataclass(frozen=True)
class TaskRef:
    """A cheap-to-send handle on a saved Task: ``load()`` reads it once per process.

    ``data`` carries the payload itself where workers share no file system (Ray).
    """

    key: str
    path: str | None = None
    data: bytes | None = field(default=None, repr=False, compare=False)

    def load(self) -> Task:
        t = _CACHE.get(self.key)
        if t is None:
            if self.data is not None:
                t = Task.from_payload(self.data)
            else:
                with open(self.path, "rb") as f:
                    t = Task.from_payload(f.read())
            _CACHE.clear()          # one task at a time per worker keeps memory bounded
            _CACHE[self.key] = t
        return t

    def inline(self) -> "TaskRef":
        """This reference with the payload carried along."""
        if self.data is not None:
            return self
        with open(self.path, "rb") as f:
            return TaskRef(self.key, None, f.read())
