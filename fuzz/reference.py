"""The float64 numpy reference of a program, computed from its description alone (no te,
no loop nest, no backend), and the program's input data.

Each stage is evaluated over the full grid of its indices (and reduction indices) at once.
Integer division follows the language's definition (docs/semantics.md): ``/`` truncates,
``%`` takes the dividend's sign, floordiv / floormod round down, and a division by zero
gives 0. A load under ``if_then_else`` reads only where its condition holds.

>>> from fuzz.programs import Program, TensorSpec
>>> p = Program({}, [TensorSpec("A", "int32", [[4, 0]]),
...                  TensorSpec("B", "int32", [[4, 0]], ["div", ["ld", "A", [["i", 0]]], ["c", -2, "int32"]])],
...             ["B"], 0)
>>> evaluate(p, {"A": np.array([-3, -1, 4, 5], np.int32)})["B"].tolist()
[1.0, 0.0, -2.0, -2.0]
"""
from __future__ import annotations

import numpy as np

from .programs import Program, dtype_of

_NUMPY = {"float32": np.float32, "int32": np.int32}


def input_data(program: Program) -> dict:
    """{input name: array} of small integers in [-3, 3] drawn from ``program.data_seed``.

    >>> from fuzz.programs import Program, TensorSpec
    >>> p = Program({"N": 2}, [TensorSpec("A", "float32", [["N", 1]])], [], 7)
    >>> input_data(p)["A"].shape
    (3,)
    """
    rng = np.random.default_rng(program.data_seed)
    return {t.name: rng.integers(-3, 4, size=program.shape(t)).astype(_NUMPY[t.dtype]) for t in program.inputs}


def _trunc_div(a, b):
    safe = np.where(b == 0, 1.0, b)
    return np.where(b == 0, 0.0, np.trunc(a / safe))


def _floor_div(a, b):
    safe = np.where(b == 0, 1.0, b)
    return np.where(b == 0, 0.0, np.floor(a / safe))


_BIN = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum,
    "fdiv": _floor_div, "fmod": lambda a, b: np.where(b == 0, 0.0, a - b * _floor_div(a, b)),
    "mod": lambda a, b: np.where(b == 0, 0.0, a - b * _trunc_div(a, b)),
}
_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
        "ge": np.greater_equal}


class _Evaluator:
    def __init__(self, program: Program, arrays: dict, grid: list, dtypes: dict):
        self.program, self.arrays, self.grid, self.dtypes = program, arrays, grid, dtypes

    def eval(self, node, where=None):
        """The value of ``node`` over the grid; ``where`` (bool array or None) marks the
        points where it is used (a load outside it may be out of range)."""
        tag = node[0]
        if tag == "c":
            return np.float64(node[1])
        if tag == "i":
            return self.grid[node[1]].astype(np.float64)
        if tag == "n":
            return np.float64(self.program.sizes[node[1]])
        if tag == "ld":
            arr = self.arrays[node[1]]
            idx = [np.broadcast_to(self.eval(x, where), self.grid[0].shape).astype(np.int64) for x in node[2]]
            inside = np.ones(self.grid[0].shape, bool)
            for d, ix in enumerate(idx):
                inside &= (ix >= 0) & (ix < arr.shape[d])
            used = inside if where is None else inside | ~where
            assert used.all(), f"the program reads {node[1]} out of range where the value is used"
            return arr[tuple(np.clip(ix, 0, n - 1) for ix, n in zip(idx, arr.shape))]
        if tag == "cmp":
            return _CMP[node[1]](self.eval(node[3], where), self.eval(node[4], where))
        if tag == "sel":
            return np.where(self.eval(node[1], where), self.eval(node[2], where), self.eval(node[3], where))
        if tag == "ite":
            cond = np.broadcast_to(self.eval(node[1], where), self.grid[0].shape)
            w = cond if where is None else cond & where
            wn = ~cond if where is None else ~cond & where
            return np.where(cond, self.eval(node[2], w), self.eval(node[3], wn))
        if tag == "sum":
            return sum(self.eval(x, where) for x in node[1])
        if tag == "cast":
            v = self.eval(node[2], where)
            return np.trunc(v) if node[1].startswith("int") else v
        a, b = self.eval(node[1], where), self.eval(node[2], where)
        if tag == "div":
            integer = dtype_of(node, self.dtypes) != "float32"
            return _trunc_div(a, b) if integer else a / b
        return _BIN[tag](a, b)


def evaluate(program: Program, data: dict) -> dict:
    """{tensor name: float64 array} of every tensor of ``program`` on ``data``."""
    arrays = {name: np.asarray(a, np.float64) for name, a in data.items()}
    dtypes = {t.name: t.dtype for t in program.tensors}
    for t in program.tensors:
        if t.body is None:
            continue
        shape = program.shape(t)
        rshape = tuple(program.extent(d) for d in t.rdims)
        grid = list(np.indices(shape + rshape, dtype=np.int64)) if shape + rshape else []
        if not grid:
            grid = [np.zeros((), np.int64)]
        value = np.broadcast_to(_Evaluator(program, arrays, grid, dtypes).eval(t.body), shape + rshape)
        if t.reducer is not None:
            axes = tuple(range(len(shape), len(shape) + len(rshape)))
            value = {"Sum": np.sum, "Max": np.max, "Min": np.min}[t.reducer](value, axis=axes)
        arrays[t.name] = np.array(value, np.float64)
    return arrays

