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
shape or dtype raises ``TypeError`` / ``ValueError`` naming it.
Then, once the sizes are bound, the call-time checks run (``check_call``): every
intermediate's allocation size (``MemoryError`` past ``allocation_limit()``), and, for
kernels made by ``build``, the region of each argument the kernel touches (``ValueError``
naming the buffer, the dimension, the region and the shape). Both are compiled into small
closures over the size values when the kernel is made.

A buffer of vector elements (dtype ``float32x4``, shape ``(n,)``) takes a numpy array of the
element type with the lanes as a trailing axis: shape ``(n, 4)``, dtype float32.

Outputs that are not passed are allocated and returned (see ``Kernel``):

>>> k(a).tolist()
[0.0, 2.0, 4.0, 6.0]
"""
from __future__ import annotations

import math
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from te.expr import Expr, IntImm, Var, walk
from te.tensor import Buffer, Tensor

__all__ = ["Kernel", "Param", "make_params", "KernelArgumentError", "ArgumentDeviceError",
           "OutputShapeError", "BuildError", "sanitize_name",
           "eval_int_expr", "size_order", "compile_int_expr", "allocation_limit", "bounds_checks"]


class BuildError(Exception):
    """Building a kernel failed (bad arguments to build, or a backend compile error)."""


class KernelArgumentError(TypeError):
    """Raised for malformed calls (kept a TypeError subclass for callers catching TypeError)."""


class ArgumentDeviceError(KernelArgumentError):
    """An argument's memory lives on a device the kernel's target cannot read (a CUDA array
    given to an LLVM or IREval kernel, say), as its ``__dlpack_device__`` reports.

    >>> issubclass(ArgumentDeviceError, TypeError)
    True
    """


class OutputShapeError(KernelArgumentError):
    """An output was left out of a call for the kernel to allocate, but its shape depends on
    a size that neither an input's shape nor a size argument gives.

    >>> issubclass(OutputShapeError, KernelArgumentError)
    True
    """


#: DLPack device types whose memory the CPU reads directly (CPU, CUDA / ROCm pinned host
#: memory, CUDA managed memory), and names for the messages
_HOST_DEVICES = (1, 3, 11, 13)
_DEVICE_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 9: "vpi",
                 10: "rocm", 11: "rocm_host", 13: "cuda_managed", 14: "oneapi", 15: "webgpu", 16: "hexagon"}


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
    output: bool = False    # an output of the nest: a call may leave it out to have it allocated

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
    out_names = {b.name for b in nest.outputs}
    for a in args:
        if isinstance(a, Var):
            p = Param(a.name, var=a)
        elif isinstance(a, Buffer):
            if a in nest.intermediates:
                raise BuildError(f"{a.name} is an intermediate of the nest (allocated inside the kernel); "
                                 f"make it an output of LoopNest([...]) to pass it as an argument")
            # an output the nest also reads on entry (an in-place update) cannot be left out
            p = Param(a.name, buffer=a, output=a.name in out_names and not any(a is b for b in nest.inputs))
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
    """Evaluate an integer size expression with Python ints (used for shapes); ``env`` maps
    ``id(var)`` to its value. KernelArgumentError for an unbound variable or a division by 0.

    >>> from te import Var
    >>> N, M = Var("N"), Var("M")
    >>> eval_int_expr(N // M, {id(N): 8, id(M): 2})
    4
    >>> eval_int_expr(N // M, {id(N): 8, id(M): 0})
    Traceback (most recent call last):
      ...
    codegen.kernel.KernelArgumentError: the size expression floordiv(N, M) divides by zero: M = 0 for the sizes given; give sizes for which M is not 0
    """
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
    if b == 0 and t in (E.FloorDiv, E.FloorMod, E.Div, E.Mod):
        raise KernelArgumentError(f"the size expression {e} divides by zero: {e.b} = 0 for the sizes given; "
                                  f"give sizes for which {e.b} is not 0")
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

    **Arrays.** An argument is a numpy array, or any object with ``__dlpack__`` (a PyTorch
    CPU tensor, a JAX array, ...): it is viewed through ``np.from_dlpack`` without a copy,
    after its ``__dlpack_device__`` is checked against the target (memory the target cannot
    read raises ``ArgumentDeviceError``). The CUDA target also takes device arrays with
    ``__cuda_array_interface__``.

    **Strided arrays.** A C-contiguous array is passed to the compiled code as it is (the
    LLVM fast path costs one flags read for it). A non-contiguous one (a view ``a[::2]``, a
    transpose ``a.T``, negative strides) is bound through its strides by the binding
    layer: an input is copied to a contiguous array once per call (``np.ascontiguousarray``,
    which reads it in its own stride order), and the kernel runs on that copy; an output or
    other written argument is copied in, computed, and copied back through its strides after
    the kernel ran. So a strided call costs exactly what the caller's
    ``np.ascontiguousarray`` and a contiguous call would (``bench/bench_strided.py`` measures
    it), and a contiguous call costs what it did before strided arrays were accepted. The
    kernel is not specialised per stride tuple: a compiled variant per stride pattern would
    save the copy, at the price of a compile per new pattern. Buffers with a ``layout``
    still need arrays whose strides are that layout's.

    **Returned outputs.** An output of the nest (a tensor of ``LoopNest([...])``) may be left
    out of the call: it is allocated (``np.empty``; its shape from the sizes the other
    arguments give) and the call returns the outputs in build's argument order, one array
    for one output, a tuple for several (passed outputs are returned as given). A call
    that passes every output writes into them and returns None, as before. Positional
    arguments are read, in build's argument order, as the first parameters, or the buffers
    only (sizes read off shapes), or the parameters without the outputs, or the inputs only;
    the first of these readings that puts arrays on buffers and scalars on sizes and leaves
    no input out is taken (with ``build(nest, [A, C, N])``, C an output, ``k(a, c)``,
    ``k(a, c, 5)``, ``k(a, 5)`` and ``k(a, N=5)`` all work; with ``[A, S, B, D]``, S and D
    outputs, ``k(a, b)`` reads A and B). When an argument came through DLPack, the allocated
    outputs are returned as the ``from_dlpack`` of the module that defines its type
    (``torch.from_dlpack`` for a PyTorch tensor, zero-copy) when that module has one, numpy
    arrays otherwise (the first such argument decides). An output whose shape needs a size no
    argument gives raises ``OutputShapeError`` naming the size.

    >>> import numpy as np
    >>> from te import Buffer, Compute, Var
    >>> from loopnest import LoopNest
    >>> from codegen import build
    >>> N = Var("N"); A = Buffer("A", (N,), "float32")
    >>> B = Compute("B", (N,), lambda i: A[i] + 1.0); C = Compute("C", (N,), lambda i: A[i] * 2.0)
    >>> k = build(LoopNest([B, C]), [A, B, C])
    >>> b, c = k(np.arange(6, dtype=np.float32)[::2])      # strided input, both outputs returned
    >>> b.tolist(), c.tolist()
    ([1.0, 3.0, 5.0], [0.0, 4.0, 8.0])
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
        self._size_vars = size_order(params)
        self._size_ids = [id(v) for v in self._size_vars]
        self._alloc_checks = _allocation_checks(stmt, self._size_vars)
        self._bounds_checks: list = []
        self._guard = _make_guard(self)
        self._written_names = _written_buffer_names(stmt)
        outs = [p for p in params if p.output]
        self._inputs = ins = [p for p in self._buffer_params if not p.output]
        # the positional readings of a call, in order of preference (see the class docstring)
        self._orders = [o for o in (self._buffer_params, [p for p in params if not p.output], ins)
                        if outs or o is self._buffer_params]

    @property
    def arg_names(self) -> list[str]:
        return [p.name for p in self.params]

    def __repr__(self):
        return f"<{type(self).__name__} {self.name}({', '.join(self.arg_names)}) target={self.target}>"

    # -- binding --------------------------------------------------------------------
    def bind(self, args: tuple, kwargs: dict) -> tuple[list, dict]:
        """Validate a call and return (arrays in buffer-param order, {id(var): int}).

        Outputs left out are allocated; a strided array is replaced by a contiguous copy
        (copying a written one back is ``__call__``'s part)."""
        arrays, sizes, _ = self._bind(args, kwargs)
        return arrays, sizes

    def _positional(self, args: tuple, kwargs: dict) -> list[Param]:
        """The params the positional ``args`` stand for: the first reading (see the class
        docstring) that puts arrays on buffers and scalars on sizes, and leaves no input out."""
        n_pos = len(args)
        if n_pos > len(self.params):
            raise KernelArgumentError(f"{self.name} takes at most {len(self.params)} arguments "
                                      f"({', '.join(self.arg_names)}), got {n_pos}")
        if n_pos == len(self.params) or n_pos == 0:
            return self.params[:n_pos]
        first = self.params[:n_pos]
        if n_pos == len(self._buffer_params) and n_pos < len(self.params):
            first = self._buffer_params     # sizes omitted: positional args are the arrays
        candidates = [first] + [self.params[:n_pos]] + [o for o in self._orders if len(o) == n_pos]
        for order in candidates:
            named = {p.name for p in order}.union(kwargs)
            if all(p.is_buffer != _is_scalar(v) for p, v in zip(order, args)) and \
                    all(p.name in named for p in self._inputs):
                return order
        return first    # nothing fits: the usual reading gives the usual messages

    def _bind(self, args: tuple, kwargs: dict) -> tuple[list, dict, "_Returns | None"]:
        values: dict[str, Any] = {}
        for p, v in zip(self._positional(args, kwargs), args):
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
        arrays: list = []
        missing: list[int] = []
        writebacks: list = []
        caller_type = None
        for p in self._buffer_params:
            if p.name not in values:
                if not p.output:
                    raise KernelArgumentError(f"missing argument {p.name} of {self.name}({', '.join(self.arg_names)})")
                missing.append(len(arrays))
                arrays.append(None)
                continue
            v = values[p.name]
            a = self._check_array(p, v, sizes)
            if type(a) is np.ndarray and not a.flags.c_contiguous and p.buffer.layout is None:
                a = self._contiguous(p, a, writebacks)
            if caller_type is None and type(a) is np.ndarray and not isinstance(v, np.ndarray):
                caller_type = type(v)
            arrays.append(a)
        for k in missing:
            arrays[k] = self._allocate(self._buffer_params[k], sizes)
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
        if self._guard is not None:
            self._guard([sizes.get(k) for k in self._size_ids])
        post = None
        if missing or writebacks:
            outputs = [(k, values.get(p.name)) for k, p in enumerate(self._buffer_params) if p.output]
            post = _Returns(writebacks, outputs if missing else None, frozenset(missing), caller_type)
        return arrays, sizes, post

    def _contiguous(self, p: Param, a: np.ndarray, writebacks: list) -> np.ndarray:
        """The contiguous array the kernel runs on for the strided ``a`` (a copy; recorded in
        ``writebacks`` to be copied back when the kernel writes ``p``)."""
        written = p.buffer.name in self._written_names
        if written and not a.flags.writeable:
            raise ValueError(f"argument {p.name} of {self.name} is written by the kernel but the array "
                             "is read-only")
        c = np.ascontiguousarray(a)
        if written:
            writebacks.append((a, c))
        return c

    def _allocate(self, p: Param, sizes: dict) -> np.ndarray:
        """A new array for the output ``p`` that the call left out."""
        buf = p.buffer
        if buf.layout is not None:
            raise KernelArgumentError(f"output {p.name} of {self.name} has the layout {buf.layout} and is not "
                                      f"allocated by the kernel; allocate its storage and pass it")
        shape = []
        for k, d in enumerate(buf.dims):
            unbound = [v.name for v in _vars_in([d]) if id(v) not in sizes]
            if unbound:
                given = [n for n in unbound if n in self._by_name]
                how = f"pass {p.name}" + (f" or the size {' and '.join(given)}" if given else "")
                raise OutputShapeError(
                    f"output {p.name} of {self.name} was left out, but dimension {k} of its shape {buf.shape} "
                    f"needs {', '.join(unbound)}, which no input's shape or size argument gives; {how}")
            n = eval_int_expr(d, sizes)
            if n < 0:
                raise ValueError(f"output {p.name} of {self.name}: dimension {k} ({d}) is {n} for the sizes "
                                 f"given; a shape cannot be negative")
            shape.append(n)
        if buf.dtype.lanes > 1:
            shape.append(buf.dtype.lanes)
        return np.empty(tuple(shape), buf.dtype.numpy)

    # -- call-time checks -------------------------------------------------------------
    def add_bounds_checks(self, checks: list) -> None:
        """Check the argument regions of ``bounds_checks(...)`` on every call (``build`` does)."""
        self._bounds_checks = list(checks)
        self._guard = _make_guard(self)

    def check_call(self, values: Sequence[int]) -> None:
        """Run the call-time checks for size values given in ``size_order(params)``: raises
        ``MemoryError`` for an allocation that cannot be made, ``ValueError`` for an argument
        region outside its array. ``bind`` calls it, so every call runs it.

        >>> from te import Buffer, Compute, Var
        >>> from loopnest import LoopNest
        >>> from codegen import build
        >>> N = Var("N"); A = Buffer("A", (8,), "float32")
        >>> B = Compute("B", (N,), lambda i: A[i])
        >>> k = build(LoopNest([B]), [A, B])
        >>> k.check_call([9])
        Traceback (most recent call last):
        ...
        ValueError: kernel ireval_B: argument A is accessed at indices [0, 8] of dimension 0 (region [0, N - 1] for N = 9), ...
        """
        if self._guard is not None:
            self._guard(list(values))

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
            if coerced is not None:
                return coerced
            a = self._from_dlpack(p, a)
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

    def _from_dlpack(self, p: Param, a: Any) -> np.ndarray:
        """The numpy view of a DLPack object ``a`` in host memory (no copy); a typed error for
        an object that is no array, or one on a device the target cannot read."""
        if not hasattr(a, "__dlpack__"):
            raise KernelArgumentError(f"argument {p.name} of {self.name} must be a numpy array or an array "
                                      f"with __dlpack__ (a PyTorch tensor, a JAX array, ...), got {type(a).__name__}")
        device = a.__dlpack_device__() if hasattr(a, "__dlpack_device__") else (1, 0)
        if int(device[0]) not in _HOST_DEVICES:
            where = _DEVICE_NAMES.get(int(device[0]), f"DLPack device type {int(device[0])}")
            if self.target == "cuda":
                fix = ("pass an array with __cuda_array_interface__ (a CuPy array, a PyTorch CUDA tensor), "
                       "or a CPU array")
            else:
                fix = "copy it to the CPU first (e.g. .cpu() or np.asarray), or build the kernel for that device"
            raise ArgumentDeviceError(f"argument {p.name} of {self.name} lives on {where}:{int(device[1])}, but "
                                      f"the {self.target} kernel reads host memory; {fix}")
        try:
            return np.from_dlpack(a)
        except (BufferError, TypeError, ValueError) as exc:   # e.g. a dtype numpy has no type for
            raise KernelArgumentError(f"argument {p.name} of {self.name}: its DLPack data cannot be read as a "
                                      f"numpy array ({exc}); convert it to a supported dtype first") from exc

    def _check_strides(self, p: Param, a: np.ndarray) -> None:
        """Strides a ``layout`` prescribes (arrays of buffers without one may have any
        strides: ``_bind`` copies a non-contiguous one)."""
        layout = p.buffer.layout
        if layout is None:
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
        return self._call(args, kwargs)

    def _call(self, args: tuple, kwargs: dict, launch: Callable | None = None):
        """Bind, run ``launch`` (default ``_launch``) and finish the call: copy strided
        written arrays back, return the outputs when some were allocated."""
        arrays, sizes, post = self._bind(args, kwargs)
        (launch or self._launch)(arrays, sizes)
        return None if post is None else post.finish(arrays)

    def _launch(self, arrays: list, sizes: dict) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


def _is_scalar(v: Any) -> bool:
    return isinstance(v, (int, float, bool, np.generic))


def _written_buffer_names(stmt) -> frozenset:
    from loopnest.queries import stmt_stored_buffers
    if stmt is None:
        return frozenset()
    return frozenset(b.name for b in stmt_stored_buffers(stmt))


@dataclass(frozen=True)
class _Returns:
    """What a call does after the kernel ran: copy strided written arrays back (``writebacks``:
    (caller's array, contiguous copy) pairs) and, when outputs were allocated, return them."""

    writebacks: list
    outputs: list | None            # (buffer-param index, the value passed or None) per output
    allocated: frozenset
    caller_type: type | None        # the type of the first argument that came through DLPack

    def finish(self, arrays: list):
        for dst, src in self.writebacks:
            dst[...] = src
        if self.outputs is None:
            return None
        wrap = _from_dlpack_of(self.caller_type)
        out = [(wrap(arrays[k]) if wrap is not None else arrays[k]) if k in self.allocated else v
               for k, v in self.outputs]
        return out[0] if len(out) == 1 else tuple(out)


def _from_dlpack_of(cls: type | None) -> Callable | None:
    """``from_dlpack`` of the module defining ``cls`` (or of its top-level package), if any."""
    if cls is None:
        return None
    name = getattr(cls, "__module__", "") or ""
    for mod in (name, name.partition(".")[0]):
        fn = getattr(sys.modules.get(mod), "from_dlpack", None)
        if callable(fn):
            return fn
    return None


# ------------------------------------------------------------------------------------
# call-time checks: allocation sizes and argument regions, compiled to closures
# ------------------------------------------------------------------------------------
def size_order(params: Sequence[Param]) -> list[Var]:
    """The size variables in the order the call-time checks read them: the Var dimensions
    of the buffer params in order of first appearance (the size slots of the LLVM kernel's
    fast path, which passes its slot list as it is), then the other Var params.

    >>> from te import Buffer, Var
    >>> N, M = Var("N"), Var("M")
    >>> [v.name for v in size_order([Param("A", buffer=Buffer("A", (N, M))), Param("B", buffer=Buffer("B", (M,)))])]
    ['N', 'M']
    """
    out: dict[int, Var] = {}
    for p in params:
        if p.is_buffer:
            for d in p.buffer.dims:
                if isinstance(d, Var):
                    out.setdefault(id(d), d)
    for p in params:
        if p.var is not None:
            out.setdefault(id(p.var), p.var)
    return list(out.values())


class _NotCompilable(Exception):
    """An expression ``compile_int_expr`` does not handle (internal)."""


def compile_int_expr(e: Expr, positions: dict) -> Callable[[Sequence[int]], Any]:
    """A closure computing the integer or bool expression ``e`` with Python ints (no
    wraparound) from a sequence of size values; ``positions`` maps ``id(var)`` to its place
    in that sequence. Affine parts become one specialised closure; division by zero gives 0.
    Raises ``ValueError`` for an expression it cannot compile (a load, a float, an unbound
    variable).

    >>> from te import Var
    >>> N, M = Var("N"), Var("M")
    >>> f = compile_int_expr(N * 4 + M - 1 >= 10, {id(N): 0, id(M): 1})
    >>> f([2, 3]), f([1, 3])
    (True, False)
    """
    try:
        return _compile(e, positions)
    except _NotCompilable as exc:
        raise ValueError(f"cannot compile the size expression `{e}` for the call-time checks: {exc}") from None


def _linear(e: Expr, positions: dict) -> tuple[dict, int] | None:
    """``({position: coefficient}, constant)`` when ``e`` is affine in the sizes."""
    from te import expr as E
    t = type(e)
    if t is IntImm:
        return ({}, e.value) if not e.dtype.is_bool else None
    if t is Var:
        if id(e) not in positions:
            raise _NotCompilable(f"variable {e.name} is not a size of the kernel")
        return {positions[id(e)]: 1}, 0
    if t is E.Cast and e.dtype.is_integer and e.value.dtype.is_integer:
        return _linear(e.value, positions)
    if t is E.Add or t is E.Sub:
        a, b = _linear(e.a, positions), _linear(e.b, positions)
        if a is None or b is None:
            return None
        s = -1 if t is E.Sub else 1
        terms = dict(a[0])
        for k, c in b[0].items():
            terms[k] = terms.get(k, 0) + s * c
        return {k: c for k, c in terms.items() if c}, a[1] + s * b[1]
    if t is E.Mul:
        a, b = _linear(e.a, positions), _linear(e.b, positions)
        if a is None or b is None or (a[0] and b[0]):
            return None
        (terms, c0), k = (a, b[1]) if not b[0] else (b, a[1])
        return {p: c * k for p, c in terms.items() if c * k}, c0 * k
    return None


def _affine_closure(terms: dict, c0: int) -> Callable:
    items = tuple(terms.items())
    if not items:
        return lambda v: c0
    if len(items) == 1:
        (p, c), = items
        if c == 1:
            return lambda v: v[p] + c0
        return lambda v: c * v[p] + c0
    if len(items) == 2:
        (p, c), (q, d) = items
        return lambda v: c * v[p] + d * v[q] + c0
    return lambda v: sum(c * v[p] for p, c in items) + c0


def _nonneg_closure(terms: dict, c0: int) -> Callable:
    """``sum(c * v[p]) + c0 >= 0`` as one closure."""
    items = tuple(terms.items())
    k = -c0
    if not items:
        return lambda v: 0 >= k
    if len(items) == 1:
        (p, c), = items
        if c == 1:
            return lambda v: v[p] >= k
        if c == -1:
            return lambda v: -v[p] >= k
        return lambda v: c * v[p] >= k
    if len(items) == 2:
        (p, c), (q, d) = items
        return lambda v: c * v[p] + d * v[q] >= k
    return lambda v: sum(c * v[p] for p, c in items) >= k


def _cdiv(a: int, b: int) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _compile(e: Expr, positions: dict) -> Callable:
    from te import expr as E
    t = type(e)
    lin = _linear(e, positions) if e.dtype.is_integer else None
    if lin is not None:
        return _affine_closure(*lin)
    if t is IntImm:
        value = bool(e.value) if e.dtype.is_bool else e.value
        return lambda v: value
    if t in (E.LT, E.LE, E.GT, E.GE, E.EQ, E.NE) and e.a.dtype.is_integer and not e.a.dtype.is_vector:
        a, b = _linear(e.a, positions), _linear(e.b, positions)
        if a is not None and b is not None and t not in (E.EQ, E.NE):
            # integers: a < b is b - a - 1 >= 0, a <= b is b - a >= 0, ...
            hi, lo, off = (b, a, -1) if t is E.LT else (b, a, 0) if t is E.LE else (a, b, -1) if t is E.GT \
                else (a, b, 0)
            terms = dict(hi[0])
            for k, c in lo[0].items():
                terms[k] = terms.get(k, 0) - c
            return _nonneg_closure({k: c for k, c in terms.items() if c}, hi[1] - lo[1] + off)
        fa, fb = _compile(e.a, positions), _compile(e.b, positions)
        cmp = {E.LT: int.__lt__, E.LE: int.__le__, E.GT: int.__gt__, E.GE: int.__ge__,
               E.EQ: int.__eq__, E.NE: int.__ne__}[t]
        return lambda v: cmp(fa(v), fb(v))
    if t is E.And or t is E.Or or t is E.Not:
        if t is E.Not:
            fa = _compile(e.a, positions)
            return lambda v: not fa(v)
        fa, fb = _compile(e.a, positions), _compile(e.b, positions)
        return (lambda v: fa(v) and fb(v)) if t is E.And else (lambda v: fa(v) or fb(v))
    if t is E.Cast and e.dtype.is_integer and e.value.dtype.is_integer:
        return _compile(e.value, positions)
    binary = {E.Add: int.__add__, E.Sub: int.__sub__, E.Mul: int.__mul__, E.Min: min, E.Max: max,
              E.FloorDiv: lambda a, b: a // b if b else 0, E.FloorMod: lambda a, b: a % b if b else 0,
              E.Div: _cdiv, E.Mod: lambda a, b: a - b * _cdiv(a, b) if b else 0}
    if t in binary and e.dtype.is_integer and not e.dtype.is_vector:
        fa, fb, op = _compile(e.a, positions), _compile(e.b, positions), binary[t]
        return lambda v: op(fa(v), fb(v))
    raise _NotCompilable(f"{type(e).__name__} nodes are not size arithmetic")


_LIMIT: list = []


def allocation_limit() -> int:
    """The most bytes one intermediate allocation may take: the machine's physical memory
    (``SC_PAGE_SIZE * SC_PHYS_PAGES``), and never more than ``2**63 - 1`` (what a signed
    64-bit size holds). A larger allocation raises ``MemoryError`` before the kernel runs.

    >>> 0 < allocation_limit() <= 2**63 - 1
    True
    """
    if not _LIMIT:
        limit = 2**63 - 1
        try:
            limit = min(limit, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        except (ValueError, OSError, AttributeError):   # not a POSIX system: the size bound only
            pass
        _LIMIT.append(limit)
    return _LIMIT[0]


@dataclass(frozen=True)
class _Check:
    """One call-time check: ``test(values)`` is true when ``fail(kernel name, values)`` must
    raise."""

    test: Callable
    fail: Callable


def _make_guard(kernel: "Kernel") -> Callable | None:
    """One function running every check of ``kernel`` on a list of size values (None when
    there is nothing to check)."""
    name = kernel.name
    checks = tuple((c.test, c.fail) for c in kernel._alloc_checks + kernel._bounds_checks)
    if not checks:
        return None
    if len(checks) == 1:
        (test, fail), = checks

        def guard_one(v):
            if test(v):
                fail(name, v)
        return guard_one

    def guard(v):
        for test, fail in checks:
            if test(v):
                fail(name, v)
    return guard


def _allocation_checks(stmt, size_vars: list) -> list:
    """A check per intermediate allocated in ``stmt`` whose byte count (itemsize times the
    product of its dimensions, negative dimensions counting as 0) can exceed
    ``allocation_limit()``."""
    from loopnest.stmt import Allocate, iter_stmts
    if stmt is None:
        return []
    positions = {id(v): k for k, v in enumerate(size_vars)}
    seen: set = set()
    out = []
    for s in iter_stmts(stmt):
        if not isinstance(s, Allocate) or id(s.buffer) in seen:
            continue
        buf = s.buffer
        seen.add(id(buf))
        itemsize = buf.dtype.itemsize * buf.dtype.lanes
        try:
            dims = [compile_int_expr(d, positions) for d in buf.dims]
        except ValueError:
            continue   # a dimension of unknown variables: the backend's own checks apply
        consts = [d.value for d in buf.dims if isinstance(d, IntImm)]
        if len(consts) == len(dims):
            if itemsize * math.prod(max(c, 0) for c in consts) <= allocation_limit():
                continue
        out.append(_allocation_check(buf, dims, itemsize))
    return out


def _allocation_check(buf, dims: list, itemsize: int) -> _Check:
    limit = allocation_limit()

    def nbytes(v):
        n = itemsize
        for d in dims:
            n *= max(d(v), 0)
        return n

    def fail(name, v):
        shape = tuple(d(v) for d in dims)
        n = nbytes(v)
        why = (f"more than this machine's physical memory ({limit} bytes)" if limit < 2**63 - 1
               else "more than a signed 64-bit size holds")
        raise MemoryError(f"kernel {name}: the intermediate buffer {buf.name} of shape {shape} ({buf.dtype}) needs "
                          f"{n} bytes, {why}; call the kernel with smaller sizes, or schedule it so the "
                          f"intermediate is smaller (compute_at, compute_inline)")
    return _Check(lambda v: nbytes(v) > limit, fail)


def bounds_checks(regions, params: Sequence[Param], kernel: str) -> list:
    """Turn ``loopnest.analysis.regions.argument_regions(...)`` into call-time checks for a
    kernel with ``params``; raises ``BuildError`` when a region is outside its buffer for
    every size at which the kernel touches any argument. Regions whose violation condition cannot be written as size
    arithmetic (or uses a variable that is not a size of the kernel) are not checked.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> from loopnest.analysis.regions import argument_regions
    >>> A = Buffer("A", (8,), "float32"); C = Compute("C", (8,), lambda i: A[i + 100000000])
    >>> params = [Param("A", buffer=A), Param("C", buffer=C)]
    >>> bounds_checks(argument_regions(LoopNest([C]).root, [A, C]), params, "C")
    Traceback (most recent call last):
    ...
    codegen.kernel.BuildError: kernel C: argument A (shape (8,)) is accessed at indices [100000000, 100000007] of dimension 0, outside its valid indices [0, 7] whatever the sizes: A[i + 100000000]. ...
    """
    order = size_order(params)
    positions = {id(v): k for k, v in enumerate(order)}
    out = []
    for r in regions.axes:
        if not r.needs_check:
            continue
        if r.always_violated(regions.touched):
            raise BuildError(_always_message(r, kernel))
        cond = r.violation_condition()
        if cond is None:
            continue
        try:
            test = compile_int_expr(cond, positions)
        except ValueError:
            continue
        out.append(_Check(test, _region_failure(r, order)))
    return out


def _vars_of(e: Expr) -> list[Var]:
    return _vars_in([e])


def _what(r) -> str:
    return "element offsets" if r.axis is None else "indices"


def _valid(r, limit) -> str:
    if r.axis is None:
        return f"its storage holds {limit} elements"
    return f"valid indices are [0, {limit - 1}]" if isinstance(limit, int) else f"valid indices are [0, {limit} - 1]"


def _region_text(r) -> str:
    lo, hi = r.min_expr(), r.max_expr()
    return f"[{lo}, {hi}]" if lo is not None and hi is not None else "(not expressible)"


def _always_message(r, kernel: str) -> str:
    from te.simplify import simplify
    where = f"of dimension {r.axis}" if r.axis is not None else "into its storage"
    if r.params:
        span, when = _region_text(r), "for every size that runs the kernel"
    else:
        lo, hi = r.region_at({})
        span, when = f"[{lo}, {hi}]", "whatever the sizes"
    last = simplify(r.limit - 1) if not isinstance(r.limit, IntImm) else r.limit.value - 1
    bad = r.accesses_out_of_range({})
    return (f"kernel {kernel}: argument {r.buffer.name} (shape {r.buffer.shape}) is accessed at {_what(r)} {span} "
            f"{where}, outside its valid {_what(r)} [0, {last}] {when}: {', '.join(bad)}. Fix the index "
            f"expressions or the buffer's shape (build(..., bounds_check=False) builds it anyway)")


def _region_failure(r, order: list) -> Callable:
    def fail(name, v):
        values = {id(var): x for var, x in zip(order, v) if x is not None}
        span = r.region_at(values)
        shape = tuple(eval_int_expr(d, values) for d in r.buffer.dims)
        limit = eval_int_expr(r.limit, values) if r.limit is not None else None
        shown = {id(n) for e in (r.min_expr(), r.max_expr(), r.limit) if e is not None
                 for n in _vars_of(e)}
        given = ", ".join(f"{var.name} = {values[id(var)]}" for var in r.params if id(var) in values and id(var) in shown)
        where = f"of dimension {r.axis}" if r.axis is not None else "into its storage"
        at = f"[{span[0]}, {span[1]}]" if span is not None else "outside the buffer"
        bad = r.accesses_out_of_range(values)
        raise ValueError(f"kernel {name}: argument {r.buffer.name} is accessed at {_what(r)} {at} {where} "
                         f"(region {_region_text(r)}{' for ' + given if given else ''}), but its shape is {shape}: "
                         f"{_valid(r, limit)}; out of range: {', '.join(bad)}. Pass arrays whose shapes contain "
                         f"the region (or fix the index expressions); build(..., bounds_check=False) skips this check")
    return fail
