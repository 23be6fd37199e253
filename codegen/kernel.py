"""The Kernel object every backend returns, and argument binding/validation.

>>> import numpy as np
>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> from codegen import build
>>> A = Buffer("A", (4,), "float32")
>>> B = Compute("B", (4,), lambda i: A[i] * 2.0)
>>> k = build(LoopNest([B]), [A, B], target="ireval")
>>> a = np.arange(4, dtype=np.float32); b = np.empty(4, np.float32)
>>> k(a, b); b.tolist()
[0.0, 2.0, 4.0, 6.0]
>>> k(A=a, B=b)   # by name

Arguments are checked before any memory is touched: a missing argument, a wrong rank,
shape or dtype, or a non-contiguous array raises ``TypeError`` / ``ValueError`` naming it.

A buffer of vector elements (dtype ``float32x4``, shape ``(n,)``) takes a numpy array of the
element type with the lanes as a trailing axis: shape ``(n, 4)``, dtype float32.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from te.expr import Expr, IntImm, Var, walk
from te.tensor import Buffer, Tensor

__all__ = ["Kernel", "Param", "make_params", "KernelArgumentError", "BuildError", "sanitize_name",
           "eval_int_expr"]


class BuildError(Exception):
    """Building a kernel failed (bad arguments to build, or a backend compile error)."""


class KernelArgumentError(TypeError):
    """Raised for malformed calls (kept a TypeError subclass for callers catching TypeError)."""


_SAFE = re.compile(r"[^A-Za-z0-9_]")


def sanitize_name(name: str) -> str:
    """A C/LLVM-safe identifier for a user name (``.`` and anything unusual become ``_``).

    >>> sanitize_name("i.outer")
    'i_outer'
    """
    s = _SAFE.sub("_", name)
    if not s or s[0].isdigit():
        s = "_" + s
    return s


@dataclass(frozen=True)
class Param:
    """One kernel parameter: a buffer (passed as an array) or a scalar size variable."""

    name: str
    buffer: Buffer | None = None
    var: Var | None = None

    @property
    def is_buffer(self) -> bool:
        return self.buffer is not None


def _vars_in(exprs) -> list[Var]:
    out: dict[int, Var] = {}
    for e in exprs:
        walk(e, lambda n: out.setdefault(id(n), n) if isinstance(n, Var) else None)
    return list(out.values())


def make_params(nest, args: Sequence[Any]) -> list[Param]:
    """Check ``build``'s argument list against the nest and turn it into Params.

    Every input buffer and output tensor of the nest must be listed; intermediates must
    not be (they are allocated inside the kernel); size variables are optional when they
    can be read off an array's shape.
    """
    params: list[Param] = []
    seen: set[str] = set()
    for a in args:
        if isinstance(a, Var):
            p = Param(a.name, var=a)
        elif isinstance(a, Buffer):
            if a in nest.intermediates:
                raise BuildError(f"{a.name} is an intermediate of the nest (allocated inside the kernel); "
                                 f"make it an output of LoopNest([...]) to pass it as an argument")
            p = Param(a.name, buffer=a)
        else:
            raise BuildError(f"build arguments must be Buffers, Tensors or Vars, got {a!r}")
        if p.name in seen:
            raise BuildError(f"argument {p.name!r} is listed twice")
        seen.add(p.name)
        params.append(p)
    listed = {p.name for p in params}
    for b in list(nest.inputs) + list(nest.outputs):
        if b.name not in listed:
            role = "read" if b in nest.inputs else "computed"
            raise BuildError(f"buffer {b.name} is {role} by the nest but is not in build's argument list "
                             f"{[p.name for p in params]}")
    # every free size variable must be a parameter or inferable from a buffer's shape
    shape_vars = {id(v) for p in params if p.is_buffer for d in p.buffer.dims if isinstance(d, Var) for v in [d]}
    var_params = {id(p.var) for p in params if p.var is not None}
    dims = [d for p in params if p.is_buffer for d in p.buffer.dims]
    for v in _vars_in(dims):
        if id(v) not in shape_vars and id(v) not in var_params:
            raise BuildError(f"size variable {v.name} cannot be read off any argument's shape; "
                             "add it to build's argument list")
    from loopnest.verify import free_vars
    for v in free_vars(nest.root):
        if id(v) not in shape_vars and id(v) not in var_params:
            raise BuildError(f"variable {v.name} is used by the nest but is neither in build's argument list "
                             f"{[p.name for p in params]} nor a dimension of an argument")
    return params


def eval_int_expr(e: Expr, env: dict) -> int:
    """Evaluate an integer size expression with Python ints (used for shapes)."""
    from te import expr as E
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, Var):
        if id(e) in env:
            return env[id(e)]
        raise KernelArgumentError(f"size variable {e.name} is not bound")
    a = eval_int_expr(e.a, env) if hasattr(e, "a") else None
    b = eval_int_expr(e.b, env) if hasattr(e, "b") else None
    t = type(e)
    if t is E.Add: return a + b
    if t is E.Sub: return a - b
    if t is E.Mul: return a * b
    if t is E.FloorDiv: return a // b
    if t is E.FloorMod: return a % b
    if t is E.Div: return -(abs(a) // abs(b)) if (a < 0) != (b < 0) else a // b
    if t is E.Mod: return a - b * (-(abs(a) // abs(b)) if (a < 0) != (b < 0) else a // b)
    if t is E.Min: return min(a, b)
    if t is E.Max: return max(a, b)
    if t is E.Cast: return eval_int_expr(e.value, env)
    raise KernelArgumentError(f"cannot evaluate the size expression {e}")


class Kernel:
    """A compiled kernel: call it with arrays (positionally, or by buffer/var name).

    ``source`` holds the generated code (LLVM IR, CUDA C, or the IR text for IREval).
    Subclasses implement ``_launch(arrays, sizes)`` where ``arrays`` follows the buffer
    params in order and ``sizes`` maps each size Var's id to its int value.
    """

    target = "?"

    def __init__(self, name: str, params: list[Param], stmt, source: str):
        self.name = name
        self.params = params
        self.stmt = stmt
        self.source = source
        self._buffer_params = [p for p in params if p.is_buffer]
        self._var_params = [p for p in params if not p.is_buffer]
        self._by_name = {p.name: p for p in params}

    @property
    def arg_names(self) -> list[str]:
        return [p.name for p in self.params]

    def __repr__(self):
        return f"<{type(self).__name__} {self.name}({', '.join(self.arg_names)}) target={self.target}>"

    # -- binding --------------------------------------------------------------------
    def bind(self, args: tuple, kwargs: dict) -> tuple[list, dict]:
        """Validate a call and return (arrays in buffer-param order, {id(var): int})."""
        values: dict[str, Any] = {}
        n_pos = len(args)
        if n_pos > len(self.params):
            raise KernelArgumentError(f"{self.name} takes at most {len(self.params)} arguments "
                                      f"({', '.join(self.arg_names)}), got {n_pos}")
        if n_pos == len(self._buffer_params) and n_pos < len(self.params):
            order = self._buffer_params     # sizes omitted: positional args are the arrays
        else:
            order = self.params[:n_pos]
        for p, v in zip(order, args):
            values[p.name] = v
        for k, v in kwargs.items():
            if k not in self._by_name:
                raise KernelArgumentError(f"{self.name} has no argument named {k!r}; arguments are {self.arg_names}")
            if k in values:
                raise KernelArgumentError(f"argument {k} of {self.name} given twice")
            values[k] = v
        sizes: dict[int, int] = {}
        for p in self._var_params:
            if p.name in values:
                sizes[id(p.var)] = self._check_scalar(p, values[p.name])
        arrays = []
        for p in self._buffer_params:
            if p.name not in values:
                raise KernelArgumentError(f"missing argument {p.name} of {self.name}({', '.join(self.arg_names)})")
            arrays.append(self._check_array(p, values[p.name], sizes))
        # check derived dims now that every var is bound
        for p, a in zip(self._buffer_params, arrays):
            for k, d in enumerate(p.buffer.dims):
                if not isinstance(d, (IntImm, Var)):
                    want = eval_int_expr(d, sizes)
                    if a.shape[k] != want:
                        raise ValueError(f"argument {p.name} of {self.name}: dimension {k} is {a.shape[k]}, "
                                         f"expected {d} = {want}")
        for p in self._var_params:
            if id(p.var) not in sizes:
                raise KernelArgumentError(f"missing argument {p.name} of {self.name}: it is not given and "
                                          "cannot be read off a shape")
        return arrays, sizes

    def _check_scalar(self, p: Param, v: Any):
        """A scalar argument: an int for integer variables (range-checked), a float for float
        variables, a bool for bool variables."""
        dt = p.var.dtype
        if dt.is_float:
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
                raise KernelArgumentError(f"argument {p.name} of {self.name} is a {dt} scalar and must be a "
                                          f"number, got {type(v).__name__}")
            return float(v)
        if dt.is_bool:
            if not isinstance(v, (bool, np.bool_)):
                raise KernelArgumentError(f"argument {p.name} of {self.name} is a bool scalar, got {type(v).__name__}")
            return bool(v)
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise KernelArgumentError(f"argument {p.name} of {self.name} is a size and must be an int, "
                                      f"got {type(v).__name__}")
        v = int(v)
        if not dt.min_value() <= v <= dt.max_value():
            raise ValueError(f"argument {p.name} of {self.name}: {p.name} = {v} does not fit its dtype {dt}")
        return v

    def _check_array(self, p: Param, a: Any, sizes: dict) -> Any:
        buf = p.buffer
        if not isinstance(a, np.ndarray):
            coerced = self._coerce_array(p, a)
            if coerced is None:
                raise KernelArgumentError(f"argument {p.name} of {self.name} must be a numpy array, "
                                          f"got {type(a).__name__}")
            return coerced
        want_dt = buf.dtype.numpy
        if a.dtype != want_dt:
            raise KernelArgumentError(f"argument {p.name} of {self.name} has dtype {a.dtype}, expected "
                                      f"{buf.dtype} ({want_dt})")
        lanes = buf.dtype.lanes
        if lanes > 1:   # vector elements: the lanes are a trailing axis of the array
            if a.ndim != buf.ndim + 1 or a.shape[-1] != lanes:
                raise ValueError(f"argument {p.name} of {self.name} has shape {a.shape}, expected rank "
                                 f"{buf.ndim + 1} with shape {buf.shape + (lanes,)}: a buffer of {buf.dtype} "
                                 f"elements is an array of {buf.dtype.element} with a last axis of {lanes} lanes")
        elif a.ndim != buf.ndim:
            raise ValueError(f"argument {p.name} of {self.name} has rank {a.ndim} (shape {a.shape}), "
                             f"expected rank {buf.ndim} (shape {buf.shape})")
        self._bind_shape(p, tuple(a.shape), sizes)
        self._check_strides(p, a)
        return a

    def _bind_shape(self, p: Param, shape: tuple, sizes: dict) -> None:
        """Check ``shape`` against the constant dims of ``p``'s buffer and bind its size Vars
        (consistently across arguments) into ``sizes``."""
        buf = p.buffer
        for k, d in enumerate(buf.dims):
            if isinstance(d, IntImm) and shape[k] != d.value:
                raise ValueError(f"argument {p.name} of {self.name} has shape {shape}, expected "
                                 f"{buf.shape} (dimension {k} differs)")
            if isinstance(d, Var):
                old = sizes.setdefault(id(d), shape[k])
                if old != shape[k]:
                    raise ValueError(f"argument {p.name} of {self.name}: dimension {k} ({d.name}) is "
                                     f"{shape[k]} but {d.name} = {old} from another argument")

    def _check_strides(self, p: Param, a: np.ndarray) -> None:
        layout = p.buffer.layout
        if layout is None:
            if not a.flags.c_contiguous:
                raise ValueError(f"argument {p.name} of {self.name} must be C-contiguous (row-major); "
                                 "use np.ascontiguousarray")
            return
        lanes = p.buffer.dtype.lanes
        try:
            want = layout.numpy_strides(a.itemsize * lanes)
            if lanes > 1:
                want = tuple(want) + (a.itemsize,)
        except ValueError:
            # a hierarchical layout has no numpy strides: the array is its storage, in order
            if not a.flags.c_contiguous or a.size < layout.cosize * lanes:
                raise ValueError(f"argument {p.name} of {self.name} must be a C-contiguous array holding the "
                                 f"{layout.cosize} elements of its layout {layout}") from None
            return
        if a.size > 1 and tuple(s for s, n in zip(a.strides, a.shape) if n > 1) != \
                tuple(s for s, n in zip(want, a.shape) if n > 1):
            raise ValueError(f"argument {p.name} of {self.name} has strides {a.strides}, but its layout "
                             f"{layout} needs strides {tuple(want)}")

    def _coerce_array(self, p: Param, a: Any):
        """Backends that take device arrays override this; by default only numpy arrays."""
        return None

    # -- call -----------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        arrays, sizes = self.bind(args, kwargs)
        self._launch(arrays, sizes)

    def _launch(self, arrays: list, sizes: dict) -> None:  # pragma: no cover - abstract
        raise NotImplementedError
