"""The float64 numpy reference of a program, computed from its description alone (no te,
no loop nest, no backend), and the program's input data.

Each stage is evaluated over the full grid of its indices (and reduction indices) at once.
Integer ``+ - *`` (and sums) wrap to their width, computed exactly in int64 first.
Integer division follows the language's definition (docs/semantics.md): ``/`` truncates,
``%`` takes the dividend's sign, floordiv / floormod round down, and a division by zero
gives 0. Shifts take their amount modulo the width, ``>>`` is arithmetic, ``<<`` wraps.
Floats are IEEE 754: a float32 division is rounded to float32, every operation of a
float16 / bfloat16 stage to its format (computed in float64, one rounding: the same value
as float32 arithmetic rounded back, as double rounding through float32 is exact for
these formats), and ``maximum`` / ``minimum`` order -0.0 below +0.0. A load under
``if_then_else`` reads only where its condition holds.

A math function (``["fn", name, a, ...]``) is numpy's or ``math``'s in float64, rounded once.

A load whose index reads data (a gather ``A[I[i]]``) may be out of range when the program
has a ``bad_index``; :func:`expected_outcome` says what the compiled program must then do:
raise ``IndexError`` where an output element needs the read (its value, a reduction over
it, the taken side of a ``select`` or ``if_then_else``), and either raise it or give the
reference values where only elements that no output needs read out of range.

>>> from fuzz.programs import Program, TensorSpec
>>> p = Program({}, [TensorSpec("A", "int32", [[4, 0]]),
...                  TensorSpec("B", "int32", [[4, 0]], ["div", ["ld", "A", [["i", 0]]], ["c", -2, "int32"]])],
...             ["B"], 0)
>>> evaluate(p, {"A": np.array([-3, -1, 4, 5], np.int32)})["B"].tolist()
[1.0, 0.0, -2.0, -2.0]
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from .programs import Program, dtype_of

_NUMPY = {"float32": np.float32, "int32": np.int32, "int64": np.int64, "float16": np.float16,
          "bfloat16": ml_dtypes.bfloat16}
_WIDTH = {"int32": 32, "int64": 64}
#: the largest magnitude below which every integer is exact in a low-precision format
_EXACT_BELOW = {"float16": 2.0 ** 11, "bfloat16": 2.0 ** 8}


class Inexact(ValueError):
    """A low-precision value of the program was rounded (the program is not drawn: its
    results would depend on the evaluation order)."""


def numpy_dtype(name: str):
    """The numpy dtype of a program dtype.

    >>> numpy_dtype("bfloat16").name
    'bfloat16'
    """
    return np.dtype(_NUMPY[name])


def input_data(program: Program) -> dict:
    """{input name: array} of small integers in [-3, 3] (an index input: in its ``values``
    range) drawn from ``program.data_seed``, with ``program.bad_index`` set.

    >>> from fuzz.programs import Program, TensorSpec
    >>> p = Program({"N": 2}, [TensorSpec("A", "float32", [["N", 1]])], [], 7)
    >>> input_data(p)["A"].shape
    (3,)
    >>> p = Program({}, [TensorSpec("I", "int32", [[3, 0]], values=[0, 1])], [], 7, bad_index=["I", 2, -1])
    >>> input_data(p)["I"].tolist()[2]
    -1
    """
    rng = np.random.default_rng(program.data_seed)
    data = {}
    for t in program.inputs:
        low, high = t.values if t.values is not None else (-3, 3)
        data[t.name] = rng.integers(low, high + 1, size=program.shape(t)).astype(_NUMPY[t.dtype])
    if program.bad_index is not None:
        name, position, value = program.bad_index
        data[name].reshape(-1)[position] = value
    return data


def _trunc_div(a, b):
    safe = np.where(b == 0, 1.0, b)
    return np.where(b == 0, 0.0, np.trunc(a / safe))


def _floor_div(a, b):
    safe = np.where(b == 0, 1.0, b)
    return np.where(b == 0, 0.0, np.floor(a / safe))


def _ieee_max(a, b):
    a, b = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
    return np.where((a == b) & (a == 0), np.where(np.signbit(a), b, a), np.maximum(a, b))


def _ieee_min(a, b):
    a, b = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
    return np.where((a == b) & (a == 0), np.where(np.signbit(a), a, b), np.minimum(a, b))


def _ints(a):
    return np.asarray(a, np.float64).astype(np.int64)


def _wrap(v, dtype: str):
    """Integers (int64) wrapped to ``dtype``'s width, as float64."""
    if dtype == "int32":
        v = v.astype(np.int32)   # two's complement truncation
    return v.astype(np.float64)


def _shift(a, b, dtype: str, left: bool):
    width = _WIDTH[dtype]
    amount = _ints(b) & (width - 1)
    x = _ints(a)
    return _wrap(np.left_shift(x, amount) if left else np.right_shift(x, amount), dtype)


_BIN = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply,
    "fdiv": _floor_div, "fmod": lambda a, b: np.where(b == 0, 0.0, a - b * _floor_div(a, b)),
    "mod": lambda a, b: np.where(b == 0, 0.0, a - b * _trunc_div(a, b)),
    "and": lambda a, b: (_ints(a) & _ints(b)).astype(np.float64),
    "or": lambda a, b: (_ints(a) | _ints(b)).astype(np.float64),
    "xor": lambda a, b: (_ints(a) ^ _ints(b)).astype(np.float64),
}
#: the float64 math functions of ``fuzz.programs.FUNCTIONS``
_FUNCTIONS = {"exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2,
              "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x),
              "tanh": np.tanh, "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "sin": np.sin, "cos": np.cos,
              "tan": np.tan, "erf": np.frompyfunc(math.erf, 1, 1), "erfc": np.frompyfunc(math.erfc, 1, 1),
              "atan": np.arctan, "asin": np.arcsin, "acos": np.arccos, "sinh": np.sinh, "cosh": np.cosh,
              "pow": np.power, "atan2": np.arctan2}
_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
        "ge": np.greater_equal}


def _bitcast(v, src: str, dst: str):
    if src.startswith("int"):
        bits = _ints(v).astype(_NUMPY[src])
    else:
        bits = np.asarray(v, np.float64).astype(_NUMPY[src])
    return np.asarray(bits.view(_NUMPY[dst]), np.float64)


def _loads(node) -> bool:
    """Whether an index expression reads data."""
    return node[0] == "ld" or any(isinstance(x, list) and _loads(x) for x in node[1:])


def _restrict(mask, cond):
    return cond if mask is None else mask & cond


class _Evaluator:
    """Evaluates one stage over its grid. ``poison``: {stage name: bool array}, the elements
    that need an out-of-range read; ``needs_bad`` collects this stage's (over its grid) and
    ``read_bad`` whether any evaluated load (an untaken ``select`` side too) was out of range."""

    def __init__(self, program: Program, arrays: dict, grid: list, dtypes: dict, strict: bool, poison: dict):
        self.program, self.arrays, self.grid, self.dtypes = program, arrays, grid, dtypes
        self.strict = strict
        self.poison = poison
        self.needs_bad = np.zeros(grid[0].shape, bool)
        self.read_bad = False

    def round(self, v, dtype: str):
        """``v`` rounded to the float format ``dtype``; a low-precision rounding that changes
        a value raises Inexact when strict."""
        if dtype not in ("float32",) + tuple(_EXACT_BELOW):
            return v
        r = np.asarray(np.asarray(v, np.float64).astype(_NUMPY[dtype]), np.float64)
        if self.strict and dtype in _EXACT_BELOW and not np.array_equal(r, v, equal_nan=True):
            raise Inexact(f"a {dtype} value was rounded")
        return r

    def eval(self, node, where=None, need=None):
        """The value of ``node`` over the grid; ``where`` (bool array or None) marks the
        points where it is evaluated (a load outside it may be out of range), ``need`` those
        where its value is used (``select`` evaluates both sides, uses one)."""
        tag = node[0]
        rec = lambda x, w=where, n=need: self.eval(x, w, n)  # noqa: E731
        if tag == "c":
            return np.float64(node[1])
        if tag == "i":
            return self.grid[node[1]].astype(np.float64)
        if tag == "n":
            return np.float64(self.program.sizes[node[1]])
        if tag == "ld":
            arr = self.arrays[node[1]]
            idx = [np.broadcast_to(rec(x), self.grid[0].shape).astype(np.int64) for x in node[2]]
            inside = np.ones(self.grid[0].shape, bool)
            for d, ix in enumerate(idx):
                in_dim = (ix >= 0) & (ix < arr.shape[d])
                # only an index that reads data may be out of range: the others are the
                # program's own (the compiler refuses them, ValueError, at this size)
                assert _loads(node[2][d]) or (in_dim if where is None else in_dim | ~where).all(), \
                    f"the program reads {node[1]} out of range in dimension {d}, whose index reads no data"
                inside &= in_dim
            outside = ~inside if where is None else ~inside & where
            if outside.any():
                self.read_bad = True
                self.needs_bad |= _restrict(need, outside)
            if arr.size == 0:   # every point reads out of range (or there is none)
                return np.zeros(self.grid[0].shape)
            at = tuple(np.clip(ix, 0, n - 1) for ix, n in zip(idx, arr.shape))
            if node[1] in self.poison:
                self.needs_bad |= _restrict(need, self.poison[node[1]][at] & inside)
            return arr[at]
        if tag == "cmp":
            return _CMP[node[1]](rec(node[3]), rec(node[4]))
        if tag in ("sel", "ite"):
            cond = np.broadcast_to(rec(node[1]), self.grid[0].shape)
            w, wn = (_restrict(where, cond), _restrict(where, ~cond)) if tag == "ite" else (where, where)
            return np.where(cond, rec(node[2], w, _restrict(need, cond)), rec(node[3], wn, _restrict(need, ~cond)))
        dtype = dtype_of(node, self.dtypes)
        if tag == "sum":
            total = rec(node[1][0])
            for x in node[1][1:]:
                total = self.round(total + rec(x), dtype)
            return total
        if tag == "cast":
            v = rec(node[2])
            if dtype.startswith("int"):
                return np.trunc(v)
            if dtype_of(node[2], self.dtypes).startswith("int"):
                v = v + 0.0     # an integer's -0.0 (a product of zero and a negative) is +0.0
            return self.round(v, dtype)
        if tag == "bitcast":
            return _bitcast(rec(node[2]), dtype_of(node[2], self.dtypes), dtype)
        if tag == "not":
            return (~_ints(rec(node[1]))).astype(np.float64)
        if tag == "fn":
            with np.errstate(all="ignore"):
                return self.round(np.asarray(_FUNCTIONS[node[1]](*[rec(x) for x in node[2:]]), np.float64), dtype)
        a, b = rec(node[1]), rec(node[2])
        if tag in ("shl", "shr"):
            return _shift(a, b, dtype, tag == "shl")
        if tag in ("max", "min"):
            return (_ieee_max if tag == "max" else _ieee_min)(a, b)
        if tag == "div":
            return self.round(a / b, dtype) if not dtype.startswith("int") else _trunc_div(a, b)
        if tag in ("add", "sub", "mul") and dtype in _WIDTH:     # exact in int64, then wrapped
            with np.errstate(over="ignore"):
                return _wrap(_BIN[tag](_ints(a), _ints(b)), dtype)
        return self.round(_BIN[tag](a, b), dtype) if tag in ("add", "sub", "mul") else _BIN[tag](a, b)


def _reduce(reducer: str, v, axes: tuple, dtype: str):
    """A reduction as the compiler computes it: a Sum starts from +0.0, Max and Min order
    -0.0 below +0.0; Max and Min of nothing are the lowest and highest values of ``dtype``."""
    if reducer == "Sum" and dtype in _WIDTH:     # wrapping adds: the exact sum, wrapped
        with np.errstate(over="ignore"):
            return _wrap(np.sum(_ints(v), axis=axes), dtype)
    if reducer == "Sum":
        return np.sum(v, axis=axes) + 0.0
    zeros = v == 0
    ints = np.iinfo(_NUMPY[dtype]) if dtype.startswith("int") else None
    if reducer == "Max":
        r = np.max(v, axis=axes, initial=-np.inf if ints is None else float(ints.min))
        return np.where(r == 0, np.where(np.any(zeros & ~np.signbit(v), axis=axes), 0.0, -0.0), r)
    r = np.min(v, axis=axes, initial=np.inf if ints is None else float(ints.max))
    return np.where(r == 0, np.where(np.any(zeros & np.signbit(v), axis=axes), -0.0, 0.0), r)


def _exact_below(dtype: str, values) -> float:
    """The magnitude below which every sum of ``values`` is exact in the low-precision
    ``dtype``: the exact integers' bound, halved for each binary fraction digit the values
    need (a sum of halves is exact in float16 only below 2 ** 10); 0 where they need more
    than 24.

    >>> _exact_below("float16", np.array([3.0, -1.0])), _exact_below("float16", np.array([0.5, 432.5]))
    (2048.0, 1024.0)
    """
    for bits in range(25):
        if np.all(np.mod(np.asarray(values, np.float64) * 2.0 ** bits, 1.0) == 0):
            return _EXACT_BELOW[dtype] / 2.0 ** bits
    return 0.0


def evaluate(program: Program, data: dict, strict: bool = False) -> dict:
    """{tensor name: float64 array} of every tensor of ``program`` on ``data``. ``strict``:
    raise Inexact where a low-precision stage rounds a value (or a low-precision sum could
    round a partial sum, in some order). Out-of-range gathers read a clamped index."""
    return _evaluate(program, data, strict)[0]


def expected_outcome(program: Program, data: dict) -> str:
    """What the compiled program must do on ``data``: ``"values"`` (give the reference
    values), ``"error"`` (raise IndexError: an output needs an out-of-range read) or
    ``"any"`` (raise IndexError or give the reference values: only elements that no output
    needs read out of range).

    >>> from fuzz.programs import Program, TensorSpec
    >>> p = Program({}, [TensorSpec("A", "int32", [[4, 0]]), TensorSpec("I", "int32", [[2, 0]], values=[0, 3]),
    ...                  TensorSpec("B", "int32", [[2, 0]], ["ld", "A", [["ld", "I", [["i", 0]]]]])], ["B"], 0)
    >>> expected_outcome(p, input_data(p)), expected_outcome(p, {**input_data(p), "I": np.array([0, 4], np.int32)})
    ('values', 'error')
    """
    _, poison, read_bad = _evaluate(program, data, False)
    if any(poison[n].any() for n in program.outputs if n in poison):
        return "error"
    return "any" if read_bad else "values"


def _evaluate(program: Program, data: dict, strict: bool) -> tuple[dict, dict, bool]:
    """(arrays, {stage: the elements that need an out-of-range read}, whether any read was out of range)."""
    arrays = {name: np.asarray(np.asarray(a), np.float64) for name, a in data.items()}
    poison: dict = {}
    read_bad = False
    dtypes = {t.name: t.dtype for t in program.tensors}
    for t in program.tensors:
        if t.body is None:
            continue
        shape = program.shape(t)
        rshape = tuple(program.extent(d) for d in t.rdims)
        grid = list(np.indices(shape + rshape, dtype=np.int64)) if shape + rshape else []
        if not grid:
            grid = [np.zeros((), np.int64)]
        ev = _Evaluator(program, arrays, grid, dtypes, strict, poison)
        value = np.broadcast_to(ev.eval(t.body), shape + rshape)
        bad = np.broadcast_to(ev.needs_bad, shape + rshape)
        read_bad |= ev.read_bad
        if t.reducer is not None:
            axes = tuple(range(len(shape), len(shape) + len(rshape)))
            if strict and t.reducer == "Sum" and t.dtype in _EXACT_BELOW and \
                    np.abs(value).sum(axis=axes).max(initial=0.0) >= _exact_below(t.dtype, value):
                raise Inexact(f"a partial sum of {t.name} may round")
            value = _reduce(t.reducer, value, axes, t.dtype)
            bad = np.any(bad, axis=axes)
        poison[t.name] = np.array(bad, bool)
        if t.dtype in _EXACT_BELOW and strict and np.abs(value).max(initial=0.0) >= _EXACT_BELOW[t.dtype]:
            raise Inexact(f"{t.name} holds values beyond the exact integers of {t.dtype}")
        arrays[t.name] = np.array(value, np.float64)
    return arrays, poison, read_bad
