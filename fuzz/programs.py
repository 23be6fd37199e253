"""Random programs as data: a :class:`Program` describes inputs, stages and outputs with a
tiny expression language of nested lists, so that one description can be

* built as te tensors (:func:`to_te`),
* printed as the Python source a user would write (:func:`to_source`, used by reproducers),
* evaluated in float64 numpy without the compiler (``fuzz.reference``).

Expressions (JSON-able lists, the first element names the node)::

    ["c", value, dtype]        constant             ["i", k]             index variable k
    ["n", name]                size variable        ["ld", tensor, [index expressions]]
    [op, a, b]                 op in add sub mul max min div mod fdiv fmod and or xor shl shr
                               (div / mod: C ``/`` and ``%``; fdiv / fmod: floordiv / floormod;
                               and .. shr: the bit operations ``&`` ``|`` ``^`` ``<<`` ``>>``)
    ["not", a]                 ``~a``               ["bitcast", dtype, a]  te.bitcast
    ["cmp", op, spelling, a, b]  op in eq ne lt le gt ge; spelling "op" writes ``a == b``,
                               "method" writes ``a.eq(b)``
    ["sel", c, a, b]           te.select            ["ite", c, a, b]     te.if_then_else
    ["cast", dtype, a]         ["sum", [terms]]     a left-nested sum (deep expressions)
    ["fn", name, a, ...]       a math function of te (``te.tanh(a)``, ``te.pow(a, b)``...), float32

Index variables are numbered over the stage's dimensions, then its reduction dimensions.
Some programs have an index input ``I`` (int32 or int64, ``TensorSpec.values`` bounds its
data) that loads read through: a gather ``A[I[i]]``, clamped ``A[min(max(I[i], 0), n - 1)]``
or wrapped ``A[floormod(I[i], n)]``. Its data is in range, except in programs with a
``Program.bad_index`` (one element set out of range): those must raise IndexError wherever
the out-of-range element is read (``fuzz.reference.expected_outcome``). Sizes and constant
extents are sometimes 0: the kernels must then run as no-ops.
Programs keep every value a small integer (or a half of one) in float32 / int32 / int64 /
float16 / bfloat16, so any evaluation order gives the same bits and results can be
compared exactly; the exceptions are rounded exactly once where nothing reorders them: a
division by a non-integer divisor truncated to an integer or stored as the last stage's
value, and a math function (``FUNCTIONS``) of the last stage's value: its results are within a
few units in the last place of the float64 reference, not exact (``Program.ulps`` says how
many a comparison allows). Sizes are int32 or, in some programs, int64 (``Program.index_dtype``).
Conditions may compare an index variable scaled by a large int32 constant, a product that
wraps within the loop (only the comparison's outcome is used, never the product).

>>> import random
>>> p = random_program(random.Random(3))
>>> [t.name for t in p.tensors if t.body is None] != [] and p.outputs != []
True
>>> outputs, inputs, sizes = to_te(p)
>>> [o.name for o in outputs] == p.outputs
True
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
import operator
import random
from dataclasses import dataclass, field
from typing import Any

import te
from te import Buffer, Compute, Reduce, Var

ARITH = ("add", "sub", "mul", "max", "min")
INT_DIVISION = ("div", "mod", "fdiv", "fmod")
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
REDUCERS = ("Sum", "Max", "Min")
DTYPES = ("float32", "int32")
#: int32 multipliers whose products with small index values wrap (``wrapping_condition``)
WRAPPING_MULTIPLIERS = (1 << 28, (1 << 28) + 3, 3 << 27, (1 << 30) - 1, -(1 << 28))
#: every element dtype drawn, with its weight (low precision and int64 now and then)
DTYPE_WEIGHTS = {"float32": 10, "int32": 10, "int64": 1, "float16": 0.7, "bfloat16": 0.7}
LOW_PRECISION = ("float16", "bfloat16")
#: the probability that a program's sizes (and so its loop variables) are int64
INT64_SIZES_PROBABILITY = 0.08
#: the probability that the last stage (when not a reduction) divides by a non-integer divisor
FRACTION_PROBABILITY = 0.08
#: the probability that the last stage (float32, not a reduction, not divided) is a math
#: function of its value, rounded once and read by nothing (``_with_function``)
FUNCTION_PROBABILITY = 0.3
#: the math functions drawn: te's float functions of one argument, and pow and atan2 with a
#: constant second one (``SECOND_ARGUMENTS``), whose float32 results every backend computes
#: within ``FUNCTION_ULPS`` of the float64 ones (lgamma, less accurate near its roots, is left out)
FUNCTIONS = ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "tanh", "sigmoid",
             "sin", "cos", "tan", "erf", "erfc", "atan", "asin", "acos", "sinh", "cosh", "pow", "atan2")
#: the second arguments of the functions of two (``pow``: exponents integer and not, of either
#: sign; ``atan2``: x of either sign, zeros included): constants, exact in float32
SECOND_ARGUMENTS = {"pow": (0.5, 1.5, 2.5, 3.0, -1.0, -1.5, -2.0), "atan2": (1.0, -2.5, 0.0, -0.0, 3.0)}
#: constants (exact in float32) that scale a function's argument in half the draws: the
#: product, rounded once the same way everywhere, takes the argument out of the small integers
#: (past 2**24 for sin and cos: their reduction of large arguments)
FUNCTION_SCALES = (0.0078125, 0.25, 3.0, 37.5, 1000.5, 12345.0)
#: how many units in the last place a math function's result may differ from the reference's
FUNCTION_ULPS = 4
#: divisors whose quotients are not exact in float32
INEXACT_DIVISORS = (3.0, 1.5, 0.75, -6.0, 10.0)
SIZE_NAMES = ("N", "M")
#: the probability that a stage is one deep sum (hundreds of terms)
DEEP_PROBABILITY = 0.02
#: the probability that a stage is a stencil: a sum of 3 to 6 loads of the previous stage
STENCIL_PROBABILITY = 0.15
#: magnitude bound of every value (float32 represents integers exactly up to 2**24)
MAX_MAGNITUDE = 2.0 ** 20
#: the probability that a program has an index input that loads read through (gathers)
GATHER_PROGRAM_PROBABILITY = 0.3
#: the probability that a dimension of a load, in such a program, reads through it
GATHER_PROBABILITY = 0.35
#: the probability that one element of the index input is out of range
BAD_INDEX_PROBABILITY = 0.3
#: the name of the index input
INDEX_NAME = "I"
#: the probability that a size or a constant extent is 0
ZERO_PROBABILITY = 0.05
#: the probability that a reduction stage reduces to a scalar (no output dimensions: the
#: automatic scheduler once read the first dimension of every reduction)
SCALAR_PROBABILITY = 0.08
#: a program that is one matmul (float16, bfloat16 or float32 inputs, float32 sums, sizes in
#: multiples of 16) for the GPU matmul trees (``gpu_matmul``: tensor cores, cp.async stages)
MATMUL_PROBABILITY = 0.06
#: the rows of a few-row matmul program (``matmul_program``): the automatic scheduler's
#: few-row products (``FEW_ROWS``, ``STREAM_MAX_ROWS``: 20 rows in tiles of 5)
FEW_ROWS_DRAWS = (2, 5, 12, 20)
#: a program that is one direct convolution (``conv_program``): the automatic scheduler's
#: convolution templates, along the columns or the output channels
CONV_PROBABILITY = 0.03


@dataclass
class TensorSpec:
    """An input (``body`` is None) or a stage of a program.

    ``dims`` and ``rdims`` are ``[base, extra]`` pairs: the extent is ``base + extra`` where
    ``base`` is a constant or the name of a size variable.

    >>> TensorSpec("A", "float32", [["N", 1]]).rank
    1
    """
    name: str
    dtype: str
    dims: list
    body: Any = None
    reducer: str | None = None
    rdims: list = field(default_factory=list)
    #: an index input's data range ``[low, high]`` (inclusive); None: the usual [-3, 3]
    values: list | None = None

    @property
    def rank(self) -> int:
        return len(self.dims)


@dataclass
class Program:
    """Sizes (size variable -> its value), tensors (inputs, then stages in order), the
    output names, the seed of the input data, the dtype of sizes and loop variables,
    ``bad_index``: None or ``[input name, flat position, value]``, an element of an index
    input set out of range after the data is drawn, and ``constant_sizes``: whether the
    program is built with its sizes as constants (every extent known to the compiler).

    >>> p = Program({"N": 3}, [TensorSpec("A", "int32", [["N", 0]]),
    ...                        TensorSpec("B", "int32", [["N", 0]], ["add", ["ld", "A", [["i", 0]]], ["c", 1, "int32"]])],
    ...             ["B"], 0)
    >>> Program.from_json(p.to_json()) == p
    True
    """
    sizes: dict
    tensors: list
    outputs: list
    data_seed: int
    index_dtype: str = "int32"
    bad_index: list | None = None
    #: the sizes are built as constants, not size variables (``to_te``)
    constant_sizes: bool = False

    def tensor(self, name: str) -> TensorSpec:
        return next(t for t in self.tensors if t.name == name)

    @property
    def ulps(self) -> int:
        """How many units in the last place a computed value may differ from the reference:
        0 (exact) unless a stage is a math function (``FUNCTION_ULPS``).

        >>> a = TensorSpec("A", "float32", [[4, 0]])
        >>> body = ["ld", "A", [["i", 0]]]
        >>> Program({}, [a, TensorSpec("B", "float32", [[4, 0]], body)], ["B"], 0).ulps
        0
        >>> Program({}, [a, TensorSpec("B", "float32", [[4, 0]], ["fn", "tanh", body])], ["B"], 0).ulps
        4
        """
        return FUNCTION_ULPS if any(t.body is not None and t.body[0] == "fn" for t in self.tensors) else 0

    @property
    def inputs(self) -> list:
        return [t for t in self.tensors if t.body is None]

    def extent(self, dim) -> int:
        """The value of a ``[base, extra]`` dimension."""
        base, extra = dim
        return (self.sizes[base] if isinstance(base, str) else base) + extra

    def shape(self, t: TensorSpec) -> tuple:
        return tuple(self.extent(d) for d in t.dims)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @staticmethod
    def from_json(text: str) -> "Program":
        d = json.loads(text)
        return Program(d["sizes"], [TensorSpec(**t) for t in d["tensors"]], d["outputs"], d["data_seed"],
                       d.get("index_dtype", "int32"), d.get("bad_index"), d.get("constant_sizes", False))


# ------------------------------------------------------------------------------------
# building te tensors and Python source
# ------------------------------------------------------------------------------------
def _te_extent(dim, sizes: dict, index_dtype: str):
    base, extra = dim
    if isinstance(base, str):
        return sizes[base] + extra if extra else sizes[base]
    return base + extra if index_dtype == "int32" else te.const(base + extra, index_dtype)


def _te_expr(node, idx: list, tensors: dict, sizes: dict):
    tag = node[0]
    rec = lambda n: _te_expr(n, idx, tensors, sizes)  # noqa: E731
    if tag == "c":
        return te.const(node[1], node[2])
    if tag == "i":
        return idx[node[1]]
    if tag == "n":
        return sizes[node[1]]
    if tag == "ld":
        return tensors[node[1]][tuple(rec(x) for x in node[2])]
    if tag == "cmp":
        _, op, spelling, a, b = node
        a, b = rec(a), rec(b)
        if op in ("eq", "ne") and spelling == "method":
            return a.eq(b) if op == "eq" else a.ne(b)
        return {"eq": lambda: a == b, "ne": lambda: a != b, "lt": lambda: a < b, "le": lambda: a <= b,
                "gt": lambda: a > b, "ge": lambda: a >= b}[op]()
    if tag == "sel":
        return te.select(rec(node[1]), rec(node[2]), rec(node[3]))
    if tag == "ite":
        return te.if_then_else(rec(node[1]), rec(node[2]), rec(node[3]))
    if tag == "cast":
        return te.cast(rec(node[2]), node[1])
    if tag == "bitcast":
        return te.bitcast(rec(node[2]), node[1])
    if tag == "not":
        return ~rec(node[1])
    if tag == "fn":
        return getattr(te, node[1])(*[rec(x) for x in node[2:]])
    if tag == "sum":
        return functools.reduce(operator.add, [rec(x) for x in node[1]])
    a, b = rec(node[1]), rec(node[2])
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "max": lambda: te.maximum(a, b),
            "min": lambda: te.minimum(a, b), "div": lambda: a / b, "mod": lambda: a % b,
            "fdiv": lambda: te.floordiv(a, b), "fmod": lambda: te.floormod(a, b), "and": lambda: a & b,
            "or": lambda: a | b, "xor": lambda: a ^ b, "shl": lambda: a << b, "shr": lambda: a >> b}[tag]()


def dtype_of(node, dtypes: dict) -> str:
    """The dtype of an expression (``dtypes``: tensor name -> dtype); "bool" for a comparison.

    >>> dtype_of(["cast", "float32", ["i", 0]], {})
    'float32'
    """
    tag = node[0]
    if tag == "c":
        return node[2]
    if tag in ("i", "n"):
        return "int32"
    if tag == "ld":
        return dtypes[node[1]]
    if tag in ("cast", "bitcast"):
        return node[1]
    if tag == "fn":
        return dtype_of(node[2], dtypes)
    if tag in ("sel", "ite"):
        return dtype_of(node[2], dtypes)
    if tag == "sum":
        return dtype_of(node[1][0], dtypes)
    if tag == "cmp":
        return "bool"
    return dtype_of(node[1], dtypes)


def to_te(program: Program, constant_sizes: bool | None = None) -> tuple[list, list, dict]:
    """(output Tensors, input Buffers, {size Var: value}) of ``program``; with
    ``constant_sizes`` (default: the program's), every size is its value (a constant) and
    the map is empty.

    >>> outputs, _, sizes = to_te(random_program(random.Random(3)), constant_sizes=True)
    >>> sizes, [t.shape for t in outputs]
    ({}, [(6,)])
    """
    if constant_sizes is None:
        constant_sizes = program.constant_sizes
    if constant_sizes:
        sizes = {name: te.const(v, program.index_dtype) for name, v in program.sizes.items()}
    else:
        sizes = {name: Var(name, program.index_dtype) for name in program.sizes}
    tensors: dict = {}
    for t in program.tensors:
        shape = tuple(_te_extent(d, sizes, program.index_dtype) for d in t.dims)
        if t.body is None:
            tensors[t.name] = Buffer(t.name, shape, t.dtype)
            continue
        names = index_names(t)
        if t.reducer is None:
            fn = _lambda(names, lambda *ivs, t=t: _te_expr(t.body, list(ivs), tensors, sizes))
            tensors[t.name] = Compute(t.name, shape, fn)
        else:
            fn = _lambda(names, lambda *ivs, t=t: _te_expr(t.body, list(ivs), tensors, sizes))
            rshape = tuple(_te_extent(d, sizes, program.index_dtype) for d in t.rdims)
            tensors[t.name] = Reduce(t.name, shape, getattr(te, t.reducer)(), fn, rshape)
    inputs = [tensors[t.name] for t in program.inputs]
    known = {} if constant_sizes else {sizes[n]: v for n, v in program.sizes.items()}
    return [tensors[n] for n in program.outputs], inputs, known


def _lambda(names: list, fn):
    """``fn`` with the positional parameter names ``names`` (te names loops after them)."""
    src = f"lambda {', '.join(names)}: fn({', '.join(names)})"
    return eval(src, {"fn": fn})  # noqa: S307 -- names are generated identifiers


def index_names(t: TensorSpec) -> list:
    """The index variable names of a stage: i0, i1, ... then r0, r1, ...

    >>> index_names(TensorSpec("T", "int32", [[2, 0]], ["c", 0, "int32"], "Sum", [[3, 0]]))
    ['i0', 'r0']
    """
    return [f"i{k}" for k in range(t.rank)] + [f"r{k}" for k in range(len(t.rdims))]


_SRC_BIN = {"add": "({} + {})", "sub": "({} - {})", "mul": "({} * {})", "max": "maximum({}, {})",
            "min": "minimum({}, {})", "div": "({} / {})", "mod": "({} % {})", "fdiv": "floordiv({}, {})",
            "fmod": "floormod({}, {})", "and": "({} & {})", "or": "({} | {})", "xor": "({} ^ {})",
            "shl": "({} << {})", "shr": "({} >> {})"}
_SRC_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def expr_source(node, names: list) -> str:
    """Python source of an expression, as a user writes it with te.

    >>> expr_source(["sel", ["cmp", "eq", "op", ["i", 0], ["c", 0, "int32"]], ["ld", "A", [["fdiv", ["i", 0], ["c", 2, "int32"]]]], ["c", 1.0, "float32"]], ["i0"])
    'select((i0 == 0), A[floordiv(i0, 2)], 1.0)'
    >>> below_3 = ["cmp", "lt", "op", ["i", 0], ["c", 3, "int32"]]
    >>> expr_source(["sel", below_3, ["c", 1, "bfloat16"], ["c", 2, "bfloat16"]], ["i0"])
    "select((i0 < 3), const(1.0, 'bfloat16'), const(2.0, 'bfloat16'))"
    """
    rec = lambda n: expr_source(n, names)  # noqa: E731
    tag = node[0]
    if tag == "c":
        return repr(float(node[1])) if node[2].startswith(("float", "bfloat")) else repr(int(node[1]))
    if tag == "i":
        return names[node[1]]
    if tag == "n":
        return node[1]
    if tag == "ld":     # a tensor of no dimensions (a reduction to a scalar) is read as T[()]
        return f"{node[1]}[{', '.join(rec(x) for x in node[2]) or '()'}]"
    if tag == "cmp":
        _, op, spelling, a, b = node
        left = _const_source(a) if a[0] == "c" else rec(a)   # a te expression, never a Python number
        if op in ("eq", "ne") and spelling == "method":
            return f"{left}.{op}({rec(b)})"
        return f"({left} {_SRC_CMP[op]} {rec(b)})"
    if tag in ("sel", "ite"):
        fn = "select" if tag == "sel" else "if_then_else"
        # two Python numbers take no type from each other: written as te constants
        side = _const_source if node[2][0] == "c" and node[3][0] == "c" else rec
        return f"{fn}({rec(node[1])}, {side(node[2])}, {side(node[3])})"
    if tag in ("cast", "bitcast"):       # a cast's operand takes no type from it: a constant is typed
        return f"{tag}({_const_source(node[2]) if node[2][0] == 'c' else rec(node[2])}, {node[1]!r})"
    if tag == "not":
        return f"(~{_const_source(node[1]) if node[1][0] == 'c' else rec(node[1])})"
    if tag == "fn":
        return f"{node[1]}({', '.join(_const_source(x) if x[0] == 'c' else rec(x) for x in node[2:])})"
    if tag == "sum":
        return f"functools.reduce(operator.add, [{', '.join(rec(x) for x in node[1])}])"
    left = _const_source(node[1]) if node[1][0] == "c" and node[2][0] == "c" else rec(node[1])
    return _SRC_BIN[tag].format(left, rec(node[2]))


def _const_source(node) -> str:
    return f"const({expr_source(node, [])}, {node[2]!r})"


def _extent_source(dim, index_dtype: str = "int32") -> str:
    base, extra = dim
    if isinstance(base, str):
        return f"{base} + {extra}" if extra else base
    return str(base + extra) if index_dtype == "int32" else f"const({base + extra}, {index_dtype!r})"


def to_source(program: Program) -> str:
    """The te source that builds ``program`` (size Vars, or constants with
    ``constant_sizes``; Buffers, Computes, Reduces).

    >>> p = Program({"N": 3}, [TensorSpec("A", "int32", [["N", 0]]),
    ...                        TensorSpec("B", "int32", [["N", 0]], ["add", ["ld", "A", [["i", 0]]], ["c", 1, "int32"]])],
    ...             ["B"], 0)
    >>> print(to_source(p))
    N = Var("N", int32)
    A = Buffer("A", (N,), "int32")
    B = Compute("B", (N,), lambda i0: (A[i0] + 1))
    """
    ix = program.index_dtype
    if program.constant_sizes:
        lines = [f"{n} = const({v}, {ix})" for n, v in program.sizes.items()]
    else:
        lines = [f'{n} = Var("{n}", {ix})' for n in program.sizes]
    for t in program.tensors:
        shape = "(" + ", ".join(_extent_source(d, ix) for d in t.dims) + ("," if t.rank == 1 else "") + ")"
        if t.body is None:
            lines.append(f'{t.name} = Buffer("{t.name}", {shape}, "{t.dtype}")')
            continue
        names = index_names(t)
        body = f"lambda {', '.join(names)}: {expr_source(t.body, names)}"
        if t.reducer is None:
            lines.append(f'{t.name} = Compute("{t.name}", {shape}, {body})')
        else:
            rshape = "(" + ", ".join(_extent_source(d, ix) for d in t.rdims) + ("," if len(t.rdims) == 1 else "") + ")"
            lines.append(f'{t.name} = Reduce("{t.name}", {shape}, {t.reducer}(), {body}, {rshape})')
    return "\n".join(lines)


# ------------------------------------------------------------------------------------
# random programs
# ------------------------------------------------------------------------------------
class _Generator:
    """Draws one program; every load index is in range for the drawn size values."""

    def __init__(self, rnd: random.Random):
        self.rnd = rnd
        self.sizes: dict = {}
        self.bases: list = []
        self.tensors: list = []
        self.grid: list = []     # the dimensions of the stage being drawn
        self.ix = "int64" if rnd.random() < INT64_SIZES_PROBABILITY else "int32"
        self.index_input: TensorSpec | None = None
        #: the smallest extent that the index input's data indexes directly (None: none)
        self.gather_limit: int | None = None

    def extent(self, dim) -> int:
        base, extra = dim
        return (self.sizes[base] if isinstance(base, str) else base) + extra

    def dim(self, extra_choices=(0, 0, 0, 1, 2)) -> list:
        return [self.rnd.choice(self.bases), self.rnd.choice(extra_choices)]

    def size(self) -> int:
        return 0 if self.rnd.random() < ZERO_PROBABILITY else self.rnd.randint(1, 8)

    def loadable(self, t: TensorSpec, ivars: list) -> bool:
        """Whether a stage over ``ivars`` (the dimensions ``self.grid``) can load ``t``: it has
        elements, or the stage has none. A tensor of a constant extent 0 only where the stage
        has a constant extent 0 too (else every size that runs the stage reads outside it,
        which build refuses)."""
        if all(self.extent(d) > 0 for d in t.dims):
            return True
        if any(self.extent(d) == 0 and not isinstance(d[0], str) for d in self.grid):
            return True
        return any(e == 0 for _, e in ivars) and all(isinstance(d[0], str) or self.extent(d) > 0 for d in t.dims)

    def extent_ast(self, dim):
        base, extra = dim
        if isinstance(base, str):
            return ["add", ["n", base], ["c", extra, "int32"]] if extra else ["n", base]
        return ["c", base + extra, "int32"]

    # -- index relations -------------------------------------------------------------
    def index(self, dim, ivars: list, prefer=None):
        """An index expression into ``dim`` from the index variables ``ivars`` (pairs of
        (k, extent value)); in range for every value of the variables. Returns
        (expression, guard) where guard, when not None, is the condition that makes the
        index valid (the caller wraps the load in if_then_else)."""
        rnd, ep = self.rnd, self.extent(dim)
        cands = []   # (weight, expression, guard)
        pool = [prefer] if prefer is not None else ivars
        for k, ek in pool:
            i = ["i", k]
            if ek <= ep:
                cands += [(6, i, None), (1, ["sub", ["sub", self.extent_ast(dim), ["c", 1, "int32"]], i], None)]
            for c in (1, 2):
                if ek + c <= ep:
                    cands.append((3, ["add", i, ["c", c, "int32"]], None))
                if ek - 1 - c < ep and ek > c:
                    cands.append((1, ["sub", i, ["c", c, "int32"]], ["cmp", "ge", "op", i, ["c", c, "int32"]]))
            if (ek - 1) // 2 < ep:
                cands += [(2, ["fdiv", i, ["c", 2, "int32"]], None), (1, ["div", i, ["c", 2, "int32"]], None)]
            if 2 * (ek - 1) < ep:
                cands.append((1, ["mul", i, ["c", 2, "int32"]], None))
            cands += [(1, ["fmod", i, self.extent_ast(dim)], None),
                      (1, ["min", i, ["sub", self.extent_ast(dim), ["c", 1, "int32"]]], None)]
            if ep >= 3:
                cands.append((1, ["mod", i, ["c", 3, "int32"]], None))
        if prefer is None:
            for (k1, e1), (k2, e2) in zip(ivars, ivars[1:]):
                if e1 + e2 - 1 <= ep:
                    cands.append((2, ["add", ["i", k1], ["i", k2]], None))
            cands.append((1, ["c", 0, "int32"], None))
        weights = [w for w, _, _ in cands]
        _, expr, guard = rnd.choices(cands, weights)[0]
        return expr, guard

    def gather(self, dim, ivars: list, prefer=None):
        """An index into ``dim`` read from the index input (as :meth:`index` returns it):
        ``I[k]``, ``min(max(I[k], 0), n - 1)`` or ``floormod(I[k], n)``."""
        rnd, src = self.rnd, self.index_input
        k, guard = self.index(src.dims[0], ivars, prefer)
        node = ["ld", src.name, [k]]
        if src.dtype != self.ix:
            node = ["cast", self.ix, node]
        form = rnd.choices(["direct", "clamp", "wrap"], [4, 1, 1])[0]
        if form == "clamp":
            return ["min", ["max", node, ["c", 0, "int32"]], ["sub", self.extent_ast(dim), ["c", 1, "int32"]]], guard
        if form == "wrap":
            return ["fmod", node, self.extent_ast(dim)], guard
        if all(e > 0 for _, e in ivars):   # the data must index this dimension
            ep = self.extent(dim)
            self.gather_limit = ep if self.gather_limit is None else min(self.gather_limit, ep)
        return node, guard

    def load(self, t: TensorSpec, dtype: str, ivars: list, reduce_vars: list):
        """A load of ``t`` cast to ``dtype``; one dimension reads a reduction variable if any."""
        forced = self.rnd.randrange(t.rank) if reduce_vars and t.rank else None
        src = self.index_input
        gathers = src is not None and self.loadable(src, ivars)
        idx, guards = [], []
        for d, dim in enumerate(t.dims):
            prefer = self.rnd.choice(reduce_vars) if d == forced else None
            if gathers and self.rnd.random() < GATHER_PROBABILITY:
                e, g = self.gather(dim, ivars, prefer)
            else:
                e, g = self.index(dim, ivars, prefer)
            idx.append(e)
            if g is not None:
                guards.append(g)
        node = ["ld", t.name, idx]
        if t.dtype != dtype:
            node = ["cast", dtype, node]
        for g in guards:
            node = ["ite", g, node, ["c", 0, dtype]]
        return node

    def dtype(self) -> str:
        return self.rnd.choices(list(DTYPE_WEIGHTS), list(DTYPE_WEIGHTS.values()))[0]

    def operand(self, t: TensorSpec, dtype: str, ivars: list, reduce_vars: list):
        """A load of ``t``, or of another tensor where ``t`` is empty and the stage is not,
        or a constant where every tensor is empty."""
        if not self.loadable(t, ivars):
            choices = [u for u in self.tensors if self.loadable(u, ivars)]
            if not choices:
                return ["c", self.rnd.choice([1, 2, -1, 3]), dtype]
            t = self.rnd.choice(choices)
        return self.load(t, dtype, ivars, reduce_vars)

    def expr(self, dtype: str, depth: int, ivars: list, reduce_vars: list):
        rnd = self.rnd
        leaf = lambda: self.operand(rnd.choice(self.tensors), dtype, ivars, reduce_vars)  # noqa: E731
        if depth == 0 or rnd.random() < 0.25:
            return leaf() if rnd.random() < 0.85 else ["c", rnd.choice([1, 2, -1, 3]), dtype]
        integer = dtype.startswith("int")
        kind = rnd.choices(["arith", "scale", "divide", "select", "cast", "bits"],
                           [5, 1, 2 if integer else 0, 2, 1, 1 if integer else 0.2 if dtype == "float32" else 0])[0]
        sub = lambda: self.expr(dtype, depth - 1, ivars, reduce_vars)  # noqa: E731
        if kind == "bits":
            return self.bits(dtype, sub, leaf, depth, ivars, reduce_vars)
        if kind == "arith":
            op = rnd.choice(("add", "sub", "max", "min", "add", "mul"))
            if op == "mul":   # one factor stays small, so values stay exact
                return ["mul", sub(), ["c", rnd.choice([2, -1, 3]), dtype] if rnd.random() < 0.5 else leaf()]
            return [op, sub(), sub()]
        if kind == "scale":
            if not integer:
                return rnd.choice([["mul", sub(), ["c", 0.5, dtype]], ["div", sub(), ["c", 2.0, dtype]]])
            return ["mul", sub(), ["c", 2, dtype]]
        if kind == "divide":
            op = rnd.choice(INT_DIVISION)
            divisor = ["c", rnd.choice([2, 3, -2, 4]), dtype] if rnd.random() < 0.5 else leaf()
            return [op, sub(), divisor]
        if kind == "select":
            op = rnd.choice(COMPARISONS)
            draw = rnd.random()
            if draw < 0.4:   # a condition on an index (the spelling users write: i == 0)
                k, ek = rnd.choice(ivars)
                cond = ["cmp", op, rnd.choice(["op", "method"]), ["i", k], ["c", rnd.randrange(max(ek, 1)), "int32"]]
            elif draw < 0.55:
                cond = self.wrapping_condition(op, ivars)
            else:
                cdt = rnd.choice(DTYPES)
                cond = ["cmp", op, rnd.choice(["op", "method"]), self.expr(cdt, 1, ivars, reduce_vars),
                        self.expr(cdt, 0, ivars, reduce_vars)]
            # if_then_else: a guard that code generation may turn into control flow (a
            # vectorized loop versioned on it); select evaluates both sides
            return ["ite" if rnd.random() < 0.3 else "sel", cond, sub(), sub()]
        other = rnd.choice([d for d in DTYPE_WEIGHTS if d != dtype]) if rnd.random() < 0.3 else \
            "int32" if dtype == "float32" else "float32"
        value = self.expr(other, depth - 1, ivars, reduce_vars)
        if integer and other == "float32" and rnd.random() < 0.2:   # rounded once, then truncated
            value = ["div", value, ["c", rnd.choice(INEXACT_DIVISORS), "float32"]]
        return ["cast", dtype, value]

    def wrapping_condition(self, op: str, ivars: list):
        """A comparison of an index variable scaled by a large int32 constant, whose product
        wraps inside the loop (``i * 2**28`` passes 2**31 at i = 8): one side of the guard is
        not monotonic in the variable, so holding at the first and last lane of a vector says
        nothing of the lanes between (the test a versioned vector loop must not rely on)."""
        rnd = self.rnd
        k, _ = rnd.choice(ivars)
        i = ["i", k] if self.ix == "int32" else ["cast", "int32", ["i", k]]
        side = ["mul", i, ["c", rnd.choice(WRAPPING_MULTIPLIERS), "int32"]]
        if rnd.random() < 0.5:
            side = ["add", side, ["c", rnd.choice([1 << 30, -(1 << 30), 7]), "int32"]]
        return ["cmp", op, "op", side, ["c", rnd.choice([-(1 << 30), 0, 1 << 29, -1]), "int32"]]

    def bits(self, dtype: str, sub, leaf, depth: int, ivars: list, reduce_vars: list):
        """A bit operation of ``dtype`` (an integer; float32: a power of two made by bitcast)."""
        rnd = self.rnd
        width = 64 if dtype == "int64" else 32
        if dtype == "float32":   # 2 ** (k - 3) for k in [0, 8): exponent bits shifted into place
            k = ["and", self.expr("int32", depth - 1, ivars, reduce_vars), ["c", 7, "int32"]]
            return ["bitcast", "float32", ["shl", ["add", k, ["c", 124, "int32"]], ["c", 23, "int32"]]]
        op = rnd.choice(["and", "or", "xor", "not", "shl", "shr", "shr", "bitcast"])
        if op == "not":
            return ["not", sub()]
        if op in ("and", "or", "xor"):
            return [op, sub(), ["c", rnd.choice([1, 3, 7, -2, 255]), dtype] if rnd.random() < 0.6 else leaf()]
        if op == "shl":   # amounts are taken modulo the width: these shift by 1 to 3
            return ["shl", sub(), ["c", rnd.choice([1, 2, 3, width + 1, 1 - width]), dtype]]
        if op == "shr":
            amount = ["c", rnd.choice([1, 2, width - 1, width, width + 1, -1]), dtype] if rnd.random() < 0.7 else leaf()
            return ["shr", sub(), amount]
        if dtype != "int32":
            return ["not", sub()]
        # the sign and exponent bits of a float32 (its -0.0 and +0.0 differ)
        return ["shr", ["bitcast", "int32", self.expr("float32", depth - 1, ivars, reduce_vars)],
                ["c", rnd.choice([23, 20, 16]), "int32"]]

    def program(self, data_seed: int) -> Program:
        rnd = self.rnd
        for name in SIZE_NAMES[:rnd.choice([1, 2])]:
            if rnd.random() < 0.4:
                self.sizes[name] = self.rnd.randint(1, 8)   # 0 later (random_program): relations
                self.bases.append(name)                      # drawn at 0 need not hold at any other value
            else:
                self.bases.append(self.size())
        shape = [self.dim() for _ in range(rnd.choice([1, 1, 2]))]
        for k in range(rnd.choice([1, 1, 2, 3])):
            dims = [[b, e + rnd.choice([0, 1, 2])] for b, e in shape] if rnd.random() < 0.7 else \
                [self.dim() for _ in range(rnd.choice([1, 2]))]
            self.tensors.append(TensorSpec("ABC"[k], self.dtype(), dims))
        if rnd.random() < GATHER_PROGRAM_PROBABILITY:
            dtype = self.ix if rnd.random() < 0.7 else rnd.choice(["int32", "int64"])
            self.index_input = TensorSpec(INDEX_NAME, dtype, [self.dim((0, 0, 1, 3))])
        for s in range(rnd.randint(2, 5)):
            if rnd.random() < 0.3:
                shape = [self.dim() for _ in range(rnd.choice([1, 1, 2]))]
            dtype = self.dtype()
            prev = self.tensors[-1]
            deep_before = prev.body is not None and prev.body[0] == "sum" and len(prev.body[1]) >= 100
            # no reduction over a deep sum: inlined, its hundreds of terms would be repeated
            # at every reduction step (minutes of interpretation, not a deeper test)
            rdims = [self.dim((0, 0, 1)) for _ in range(rnd.choice([1, 1, 2]))] \
                if rnd.random() < 0.3 and not deep_before else []
            out_shape = [] if rdims and rnd.random() < SCALAR_PROBABILITY else shape
            ivars = [(k, self.extent(d)) for k, d in enumerate(out_shape + rdims)]
            self.grid = out_shape + rdims
            rvars = ivars[len(out_shape):]
            body = [rnd.choice(ARITH), self.operand(prev, dtype, ivars, rvars), self.expr(dtype, 2, ivars, rvars)]
            draw = rnd.random()
            stencil_before = prev.body is not None and prev.body[0] == "sum" or not self.loadable(prev, ivars)
            if draw < DEEP_PROBABILITY and not stencil_before and not rdims:
                # generated code and polynomials are this deep (not over a stencil: inlining it
                # multiplies the deep sum's terms by its own; not as a reduction's body: LLVM's
                # code generation of a 378-term sum in a reduction took 30 s, seed 51, case 278)
                body = ["sum", [self.load(prev, dtype, ivars, rvars) for _ in range(rnd.randint(100, 700))]]
            elif draw < DEEP_PROBABILITY + STENCIL_PROBABILITY and not stencil_before:
                # one tensor read at several offsets (not two stencils in a row: inlining one
                # into the other multiplies their terms)
                body = ["sum", [self.load(prev, dtype, ivars, rvars) for _ in range(rnd.randint(3, 5))]]
            reducer = rnd.choice(REDUCERS) if rdims else None
            if rdims and any(self.extent(d) == 0 for d in rdims) and all(self.extent(d) > 0 for d in out_shape):
                reducer = "Sum"   # Max and Min of nothing are infinite (or the integer extremes)
            self.tensors.append(TensorSpec(f"T{s + 1}", dtype, [list(d) for d in out_shape], body, reducer, rdims))
        last = self.tensors[-1]
        if last.dtype == "float32" and last.reducer is None and rnd.random() < FRACTION_PROBABILITY:
            # rounded once, stored, read by nothing: any schedule gives the same bits
            last.body = ["div", last.body, ["c", rnd.choice(INEXACT_DIVISORS), "float32"]]
        outputs = [last.name]
        stages = [t.name for t in self.tensors[:-1] if t.body is not None]
        if stages and rnd.random() < 0.25:
            outputs.append(rnd.choice(stages))
        bad_index = None
        if self.index_input is not None:
            self.tensors = [t for t in self.tensors if t.body is None] + [self.index_input] + \
                [t for t in self.tensors if t.body is not None]
            limit = self.gather_limit
            self.index_input.values = [0, limit - 1] if limit is not None else [-3, 10]
            count = self.extent(self.index_input.dims[0])
            if count and rnd.random() < BAD_INDEX_PROBABILITY:
                top = self.index_input.values[1]
                bad_index = [INDEX_NAME, rnd.randrange(count), rnd.choice([-1, top + 1, top + 3, 2 ** 31 - 1, -2 ** 31])]
        text = json.dumps([[t.dims, t.rdims, t.body] for t in self.tensors])
        used = {n for n in self.sizes if f'"{n}"' in text}
        if self.ix == "int64":
            for t in self.tensors:
                t.body = _index_constants(t.body, "int64") if t.body is not None else None
        return Program({n: v for n, v in self.sizes.items() if n in used}, self.tensors, outputs, data_seed,
                       self.ix, bad_index)


def _retyped(node, dtype: str):
    """An index expression with its integer constants of ``dtype``."""
    if node[0] == "c":
        return ["c", node[1], dtype]
    if node[0] == "ld":
        return ["ld", node[1], [_retyped(x, dtype) for x in node[2]]]
    return [node[0]] + [_retyped(x, dtype) if isinstance(x, list) else x for x in node[1:]]


def _index_constants(node, dtype: str):
    """``node`` with the constants of its index expressions (load indices, comparisons of
    an index variable) of ``dtype``, the loop variables' dtype.

    >>> _index_constants(["ld", "A", [["add", ["i", 0], ["c", 1, "int32"]]]], "int64")
    ['ld', 'A', [['add', ['i', 0], ['c', 1, 'int64']]]]
    """
    tag = node[0]
    if tag == "ld":
        return ["ld", node[1], [_retyped(x, dtype) for x in node[2]]]
    if tag == "cmp" and node[3][0] == "i":
        return node[:4] + [_retyped(node[4], dtype)]
    if tag == "sum":
        return ["sum", [_index_constants(x, dtype) for x in node[1]]]
    if tag in ("c", "i", "n"):
        return node
    return [tag] + [_index_constants(x, dtype) if isinstance(x, list) else x for x in node[1:]]


#: one random program in this many is built with constant sizes
CONSTANT_SIZES_ONE_IN = 4


def random_program(rnd: random.Random) -> Program:
    """A random program whose values stay below ``MAX_MAGNITUDE`` on its input data, and
    exact in its low-precision stages.

    >>> p = random_program(random.Random(0))
    >>> 2 <= len([t for t in p.tensors if t.body is not None]) <= 5
    True
    """
    program = _random_program(rnd)
    # one program in CONSTANT_SIZES_ONE_IN has its sizes as constants (the compiler's paths
    # for known extents); decided by its data seed, so the random stream stays as it was
    constant = bool(program.sizes) and program.data_seed % CONSTANT_SIZES_ONE_IN == 0
    return dataclasses.replace(program, constant_sizes=True) if constant else program


def _random_program(rnd: random.Random) -> Program:
    from .reference import Inexact, evaluate, input_data
    draw = rnd.random()
    if draw < MATMUL_PROBABILITY:
        return matmul_program(rnd)
    if draw < MATMUL_PROBABILITY + CONV_PROBABILITY:
        return conv_program(rnd)
    while True:
        program = _Generator(rnd).program(rnd.randrange(2 ** 31))
        try:
            values = evaluate(program, input_data(program), strict=True)
        except Inexact:
            continue
        if all(abs(v).max(initial=0.0) < MAX_MAGNITUDE for v in values.values()):
            if program.sizes and rnd.random() < 2 * ZERO_PROBABILITY:
                program = _zero_size(program, rnd)
            return _with_function(program, rnd)


def _with_function(program: Program, rnd: random.Random) -> Program:
    """``program`` with its last stage a math function of its value (or of its value times
    one of ``FUNCTION_SCALES``; ``pow`` and ``atan2`` with a constant of ``SECOND_ARGUMENTS``
    second), with probability ``FUNCTION_PROBABILITY`` where that
    stage is float32, not a reduction and not divided (the argument is rounded the same way
    everywhere: only the function's own rounding differs between backends); else ``program``.

    >>> p = Program({}, [TensorSpec("A", "float32", [[4, 0]]),
    ...                  TensorSpec("B", "float32", [[4, 0]], ["ld", "A", [["i", 0]]])], ["B"], 0)
    >>> [_with_function(p, random.Random(s)).tensor("B").body[0] for s in range(40)].count("fn") > 0
    True
    """
    last = program.tensors[-1]
    if last.dtype != "float32" or last.reducer is not None or last.body[0] == "div" or \
            rnd.random() >= FUNCTION_PROBABILITY:
        return program
    argument = last.body if rnd.random() < 0.5 else ["mul", last.body, ["c", rnd.choice(FUNCTION_SCALES), "float32"]]
    name = rnd.choice(FUNCTIONS)
    second = [["c", rnd.choice(SECOND_ARGUMENTS[name]), "float32"]] if name in SECOND_ARGUMENTS else []
    stage = dataclasses.replace(last, body=["fn", name, argument, *second])
    return dataclasses.replace(program, tensors=program.tensors[:-1] + [stage])


def matmul_program(rnd: random.Random) -> Program:
    """``C[i, j] = sum_k f32(A[i, k]) * f32(B[k, j])`` with A and B float16, bfloat16 or
    float32 and M, N, K multiples of 16 (what the GPU matmul trees tile); in one draw of three
    B is N x K, read as ``B[j, k]`` (a linear layer's ``A @ B.T``); in one of four M is a few
    rows (``FEW_ROWS_DRAWS``: the automatic scheduler's few-row products, which stream B or
    take dot-product tiles) and N may be 128. The inputs are small integers, so every
    summation order gives the same bits.

    >>> p = matmul_program(random.Random(1))
    >>> [t.name for t in p.tensors], p.tensor("C").reducer, p.tensor("C").dtype
    (['A', 'B', 'C'], 'Sum', 'float32')
    """
    dtype = rnd.choice(["float16", "bfloat16", "float32"])
    m, n, k = (rnd.choice([16, 32, 64]) for _ in range(3))
    if rnd.random() < 1 / 4:
        m, n = rnd.choice(FEW_ROWS_DRAWS), rnd.choice([n, 128])
    f32 = lambda e: e if dtype == "float32" else ["cast", "float32", e]  # noqa: E731
    nk = rnd.random() < 1 / 3
    b_index, b_shape = ([["i", 1], ["i", 2]], [[n, 0], [k, 0]]) if nk else ([["i", 2], ["i", 1]], [[k, 0], [n, 0]])
    body = ["mul", f32(["ld", "A", [["i", 0], ["i", 2]]]), f32(["ld", "B", b_index])]
    return Program({}, [TensorSpec("A", dtype, [[m, 0], [k, 0]]), TensorSpec("B", dtype, b_shape),
                        TensorSpec("C", "float32", [[m, 0], [n, 0]], body, reducer="Sum", rdims=[[k, 0]])],
                   ["C"], rnd.randrange(2 ** 31))


def conv_program(rnd: random.Random) -> Program:
    """``Y[b, co, y, x] = sum_{ci, ry, rx} X[b, ci, y + ry, x + rx] * W[co, ci, ry, rx]``
    (float32, NCHW, stride 1, X as large as the window needs): a batch of 1 or 2, output
    channels a multiple of 4 (of the vector lanes, often), widths that often leave a
    partial vector; the shapes of the automatic scheduler's convolution tiles, along the
    columns or the output channels (``loopnest.auto.channel_params``). The inputs are small
    integers, so every summation order gives the same bits.

    >>> p = conv_program(random.Random(0))
    >>> [t.name for t in p.tensors], p.tensor("Y").rank, len(p.tensor("Y").rdims)
    (['X', 'W', 'Y'], 4, 3)
    """
    batch, cin, cout = rnd.choice([1, 2]), rnd.choice([1, 2, 3]), rnd.choice([4, 8, 16, 32])
    height, width, window = rnd.choice([1, 2, 3, 5]), rnd.choice([4, 5, 6, 7, 12, 20]), rnd.choice([1, 2, 3])
    b, co, y, x, ci, ry, rx = (["i", k] for k in range(7))
    body = ["mul", ["ld", "X", [b, ci, ["add", y, ry], ["add", x, rx]]], ["ld", "W", [co, ci, ry, rx]]]
    pad = window - 1
    return Program({}, [TensorSpec("X", "float32", [[batch, 0], [cin, 0], [height + pad, 0], [width + pad, 0]]),
                        TensorSpec("W", "float32", [[cout, 0], [cin, 0], [window, 0], [window, 0]]),
                        TensorSpec("Y", "float32", [[batch, 0], [cout, 0], [height, 0], [width, 0]], body,
                                   reducer="Sum", rdims=[[cin, 0], [window, 0], [window, 0]])],
                   ["Y"], rnd.randrange(2 ** 31))


def _zero_size(program: Program, rnd: random.Random) -> Program:
    """``program`` with one size variable bound to 0, where its loads stay in range at 0 (they
    are drawn in range for the drawn value), else ``program`` itself."""
    from .reference import Inexact, _evaluate, input_data
    trial = dataclasses.replace(program, sizes={**program.sizes, rnd.choice(sorted(program.sizes)): 0})
    if trial.bad_index is not None:
        name, position, _ = trial.bad_index
        if position >= math.prod(trial.shape(trial.tensor(name))):
            return program
    try:
        values, _, read_bad = _evaluate(trial, input_data(trial), True)
    except (AssertionError, Inexact):   # a load out of range at 0, or a rounded value
        return program
    if read_bad and trial.bad_index is None or \
            not all(abs(v).max(initial=0.0) < MAX_MAGNITUDE for v in values.values()):
        return program
    return trial
