"""External calls: a tensor computed by a function outside the compiler.

``Extern(name, shape, inputs, ...)`` makes a tensor that one call of an outside function
fills, whole (or several tensors one call fills). Other tensors read it like any tensor; the
loop nest holds the call as one ``ExternCall`` statement (``loopnest.stmt``) that reads every
element of its inputs and writes every element of its outputs, and that no schedule
transform moves.

The callee, one per backend:

* IREval: ``py_fn(*inputs, out)``, a Python callable given numpy arrays of the buffers'
  shapes (the inputs, then the output -- or the outputs) that writes ``out`` in place.
* LLVM: a C function with the ABI ``EXTERN_C_ABI``::

      int32_t f(int32_t nbufs, void **data, const int32_t *ndims,
                const int64_t *shapes, const int64_t *strides);

  ``data[k]`` is the address of buffer ``k`` (the inputs in order, then the outputs),
  ``ndims[k]`` its rank, and ``shapes`` / ``strides`` hold the dimensions and the element
  strides (not bytes) of every buffer one after the other (``sum(ndims)`` entries each).
  Buffers are row-major. A non-zero result stops the kernel, which raises
  ``RuntimeError`` naming the call and the code. Give it as ``c_fn``: a ctypes function
  (``ctypes.CDLL(path).symbol``, or a ``CFUNCTYPE`` callback wrapping Python code, which
  runs holding the GIL) or an integer address; ``library`` + ``symbol`` load it by name.

>>> from te import Buffer, Compute
>>> A = Buffer("A", (4,), "float32")
>>> S = Extern("S", (4,), [A], py_fn=lambda a, out: out.__setitem__(slice(None), a[::-1]))
>>> B = Compute("B", (4,), lambda i: S[i] + 1.0)
>>> S.inputs()
[Buffer(A, (4), float32)]
"""
from __future__ import annotations

import ctypes
from typing import Any, Callable, Sequence

from .dtypes import as_dtype
from .expr import Expr, check_identifier
from .tensor import Buffer, Tensor

__all__ = ["Extern", "ExternFunc", "ExternTensor", "EXTERN_C_ABI", "extern_c_fn"]

#: The C signature of an external function called by the LLVM backend.
EXTERN_C_ABI = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p),
                                ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int64),
                                ctypes.POINTER(ctypes.c_int64))


def extern_c_fn(py_shim: Callable[..., int]):
    """Wrap a Python function of the ``EXTERN_C_ABI`` arguments as a C callback (keep the
    result alive as long as kernels use it: ``Extern`` holds it).

    >>> f = extern_c_fn(lambda nbufs, data, ndims, shapes, strides: 0)
    >>> isinstance(ExternFunc("f", c_fn=f).address, int)
    True
    """
    return EXTERN_C_ABI(py_shim)


class ExternFunc:
    """The function of an external call: its name, the Python callable IREval runs and the
    address of the C function the LLVM backend calls (either may be missing; a backend
    without its form refuses to build).

    >>> ExternFunc("f", py_fn=print).address is None
    True
    """

    def __init__(self, name: str, py_fn: Callable | None = None, c_fn: Any = None,
                 library: str | None = None, symbol: str | None = None):
        self.name = check_identifier(name, "external function")
        if py_fn is not None and not callable(py_fn):
            raise TypeError(f"py_fn of {name} must be callable, got {type(py_fn).__name__}")
        self.py_fn = py_fn
        if (library is None) != (symbol is None):
            raise TypeError(f"external function {name}: give both library and symbol, or neither")
        if library is not None:
            if c_fn is not None:
                raise TypeError(f"external function {name}: give c_fn or library + symbol, not both")
            try:
                c_fn = getattr(ctypes.CDLL(library), symbol)
            except (OSError, AttributeError) as exc:
                raise ValueError(f"external function {name}: cannot load {symbol} from {library}: {exc}") from None
        self.c_fn = c_fn            # held: a CFUNCTYPE callback must outlive the kernels calling it
        self.address: int | None = _address(c_fn, name)

    def __repr__(self) -> str:
        return f"ExternFunc({self.name})"


def _address(c_fn: Any, name: str) -> int | None:
    if c_fn is None:
        return None
    if isinstance(c_fn, bool):
        raise TypeError(f"c_fn of {name} must be a ctypes function or an address, got {c_fn!r}")
    if isinstance(c_fn, int):
        addr = c_fn
    elif isinstance(c_fn, ctypes._CFuncPtr):
        addr = ctypes.cast(c_fn, ctypes.c_void_p).value
    else:
        addr = getattr(c_fn, "value", None) if isinstance(c_fn, ctypes.c_void_p) else None
        if addr is None:
            raise TypeError(f"c_fn of {name} must be a ctypes function (CDLL symbol or CFUNCTYPE) or an "
                            f"integer address, got {type(c_fn).__name__}")
    if not addr:
        raise ValueError(f"c_fn of {name} is a NULL function pointer")
    return int(addr)


class ExternTensor(Tensor):
    """A tensor filled by one call of an ``ExternFunc`` (made by ``Extern``); it has no index
    variables and no body: ``func`` reads ``extern_inputs`` whole and writes the tensor whole.

    >>> A = Buffer("A", (2, 3), "float32")
    >>> T = Extern("T", (3, 2), [A], py_fn=lambda a, out: None)
    >>> T, T.func
    (Extern(T, (3, 2), float32), ExternFunc(T))
    """

    def __init__(self, name, dims, dtype, func: ExternFunc, inputs: Sequence[Buffer]):
        super().__init__(name, dims, dtype, (), None)
        self.func = func
        self.extern_inputs: tuple = tuple(inputs)
        #: every output of the call, in argument order (this tensor among them)
        self.extern_outputs: tuple = (self,)

    def inputs(self) -> list[Buffer]:
        """The buffers (and tensors) the call reads, in argument order."""
        from .queries import loaded_buffers
        return list(self.extern_inputs) + [b for b in loaded_buffers(list(self.dims))
                                           if b not in self.extern_inputs]

    def __repr__(self) -> str:
        return f"Extern({self.name}, ({', '.join(str(d) for d in self.dims)}), {self.dtype})"


def Extern(name: str | Sequence[str], shape: Sequence[Any], inputs: Sequence[Buffer], py_fn: Callable | None = None,
           *, c_fn: Any = None, library: str | None = None, symbol: str | None = None,
           dtype: Any = "float32", func_name: str | None = None) -> ExternTensor | tuple:
    """A tensor of ``shape`` and ``dtype`` computed by an external function of ``inputs``
    (Buffers or Tensors, passed whole, row-major): ``py_fn`` on IREval, the C function
    ``c_fn`` (or ``symbol`` of the shared ``library``) on LLVM; see the module docstring
    for both calling conventions. At least one of them must be given.

    Several outputs of one call: ``name`` a list of names, ``shape`` a list of shapes (and
    ``dtype`` one dtype or a list); the result is a tuple of tensors, passed to the function
    after the inputs, in order.

    >>> A = Buffer("A", (4,), "float32")
    >>> def split(a, lo, hi): lo[:] = a.clip(max=0); hi[:] = a.clip(min=0)
    >>> Lo, Hi = Extern(["Lo", "Hi"], [(4,), (4,)], [A], split)
    >>> Lo.extern_outputs == Hi.extern_outputs == (Lo, Hi)
    True

    >>> import numpy as np
    >>> from te import Buffer, Compute
    >>> A = Buffer("A", (3,), "float32")
    >>> def cumsum(a, out): out[:] = np.cumsum(a)
    >>> S = Extern("S", (3,), [A], cumsum)
    >>> B = Compute("B", (3,), lambda i: S[i] * 2.0)
    >>> from loopnest import LoopNest
    >>> print(LoopNest([B]))
    S = extern cumsum(A);
    for (int i = 0; i < 3; i++) {
      B[i] = S[i] * 2.0f;
    }
    """
    several = not isinstance(name, str)
    names = list(name) if several else [name]
    shapes = list(shape) if several else [shape]
    if several and (not names or len(shapes) != len(names)):
        raise TypeError(f"extern {names}: give one shape per output name, got {len(shapes)} shape(s)")
    dtypes = list(dtype) if isinstance(dtype, (list, tuple)) else [dtype] * len(names)
    if len(dtypes) != len(names):
        raise TypeError(f"extern {names}: give one dtype, or one per output, got {len(dtypes)}")
    for n in names:
        check_identifier(n, "tensor")
    shapes = [(s,) if isinstance(s, (int, Expr)) else s for s in shapes]
    name = names[0]
    if isinstance(inputs, Buffer):
        inputs = [inputs]
    inputs = list(inputs)
    for b in inputs:
        if not isinstance(b, Buffer) or type(b).__name__ in ("TensorView", "PartitionView"):
            raise TypeError(f"the inputs of extern {name} must be Buffers or Tensors, got {b!r}")
        if b.layout is not None:
            raise TypeError(f"extern {name}: input {b.name} has a layout; external functions take row-major "
                            "buffers (copy it into a Compute first)")
        if b.dtype.lanes > 1:
            raise TypeError(f"extern {name}: input {b.name} has vector elements ({b.dtype}); external functions "
                            "take buffers of scalars")
    if py_fn is None and c_fn is None and library is None:
        raise TypeError(f"extern {name} needs a function: py_fn (IREval), c_fn or library + symbol (LLVM)")
    fname = func_name or getattr(py_fn, "__name__", None) or symbol or name
    if fname == "<lambda>":
        fname = name
    func = ExternFunc(fname, py_fn, c_fn, library, symbol)
    outs = []
    for n, shp, d in zip(names, shapes, dtypes):
        dt = as_dtype(d)
        if dt.lanes > 1:
            raise TypeError(f"extern {n}: the output dtype must be a scalar type, got {dt}")
        outs.append(ExternTensor(n, shp, dt, func, inputs))
    for t in outs:
        t.extern_outputs = tuple(outs)
    return tuple(outs) if several else outs[0]
