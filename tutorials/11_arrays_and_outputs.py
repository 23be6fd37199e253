"""Tutorial 11: the arrays you already have, and outputs the kernel allocates.

    python tutorials/11_arrays_and_outputs.py

The story: an elementwise layer ``Y = relu(2 X + bias)`` gets its data from another library:
with PyTorch installed the arrays are CPU tensors, otherwise numpy arrays. We
1. pass them as they are: anything with ``__dlpack__`` is read without a copy, and its device
   is checked against the target;
2. pass strided views (a step slice, a transpose, a flip): they are bound through their
   strides, inputs and outputs alike;
3. leave the outputs out: ``y = k(x, bias)`` allocates and returns them (the caller's array
   type when it came through DLPack), one output as an array, several as a tuple; passing
   them still writes in place;
4. see the typed errors: an array on another device, an output whose size no input gives.
Every step runs on the reference interpreter and on LLVM and checks numpy.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from codegen import build  # noqa: E402
from codegen.kernel import ArgumentDeviceError, OutputShapeError  # noqa: E402
from loopnest import LoopNest  # noqa: E402
from te import Buffer, Compute, Var, float32, int32, maximum  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

TARGETS = ["ireval", "llvm"]
LIB = "torch" if torch is not None else "numpy"
rng = np.random.default_rng(11)


def array(values):
    """An array of the library in use (a CPU tensor with PyTorch, else numpy)."""
    values = np.asarray(values, np.float32)
    return torch.from_numpy(values.copy()) if torch is not None else values.copy()


def as_numpy(x):
    """A numpy view of a DLPack array (PyTorch tensor or numpy array), no copy."""
    return np.from_dlpack(x)


print(f"== arrays from {LIB} ==")
R, C = Var("R", int32), Var("C", int32)
X = Buffer("X", (R, C), float32)
bias = Buffer("bias", (C,), float32)
Y = Compute("Y", (R, C), lambda i, j: maximum(X[i, j] * 2.0 + bias[j], 0.0))
Z = Compute("Z", (R, C), lambda i, j: X[i, j] - bias[j])

for target in TARGETS:
    print(f"\n--- {target} ---")
    k = build(LoopNest([Y]), [X, bias, Y], target=target)
    x = array(rng.standard_normal((6, 8)))
    b = array(rng.standard_normal(8))
    want = lambda xx: np.maximum(as_numpy(xx) * 2 + as_numpy(b), 0)  # noqa: E731

    print("1. DLPack in: the kernel reads the caller's memory")
    y = array(np.zeros((6, 8)))
    k(x, b, y)                                          # in place, as always
    assert np.allclose(as_numpy(y), want(x))
    as_numpy(x)[0, 0] = 50.0                            # change the caller's array ...
    k(x, b, y)
    assert as_numpy(y)[0, 0] == max(100.0 + float(as_numpy(b)[0]), 0.0)   # ... the kernel sees it: no copy
    print("   x changed in place -> y[0, 0] =", float(as_numpy(y)[0, 0]))

    print("2. strided views, bound through their strides")
    big = array(rng.standard_normal((12, 16)))
    views = [("big[::2, ::2]", big[::2, ::2]), ("big[:8, :6].T", big[:8, :6].T), ("big[:6, 3:11]", big[:6, 3:11])]
    if torch is None:                                  # PyTorch has no negative strides
        views.append(("big[5::-1, ::-2]", big[5::-1, ::-2]))
    for name, view in views:
        out = k(view, b)                               # output allocated and returned
        assert np.allclose(as_numpy(out), want(view)), name
        print(f"   {name:<16} strides {as_numpy(view).strides} -> ok")
    wide = array(np.zeros((6, 16)))
    k(x, b, wide[:, ::2])                              # a strided output is written through its strides
    assert np.allclose(as_numpy(wide)[:, ::2], want(x)) and not as_numpy(wide)[:, 1::2].any()
    print("   strided output wide[:, ::2] written, the other columns untouched")

    print("3. returned outputs")
    y = k(x, b)
    print(f"   k(x, bias) returned a {type(y).__module__}.{type(y).__name__} of shape {tuple(y.shape)}")
    assert type(y) is type(x) and np.allclose(as_numpy(y), want(x))
    k2 = build(LoopNest([Y, Z]), [X, bias, Y, Z], target=target)
    y, z = k2(x, b)                                    # several outputs: a tuple in argument order
    assert np.allclose(as_numpy(z), as_numpy(x) - as_numpy(b))
    z_mine = array(np.zeros((6, 8)))
    y, z = k2(x, b, Z=z_mine)                          # Z given (in place), Y allocated
    assert z is z_mine and np.allclose(as_numpy(z_mine), as_numpy(x) - as_numpy(b))
    print("   k2(x, bias) -> (Y, Z); k2(x, bias, Z=z) fills z and returns (new Y, z)")

    print("4. typed errors")

    class OnGpu:
        """What a CUDA tensor reports through DLPack."""

        def __dlpack__(self, **kwargs):
            raise AssertionError("never read: the device is checked first")

        def __dlpack_device__(self):
            return (2, 0)

    try:
        k(OnGpu(), b)
    except ArgumentDeviceError as e:
        print("   ArgumentDeviceError:", e)
    else:
        raise AssertionError("an array on cuda:0 was taken by a CPU kernel")
    N = Var("N", int32)
    A = Buffer("A", (16,), float32)
    head = Compute("head", (N,), lambda i: A[i] * 3.0)
    k3 = build(LoopNest([head]), [A, head, N], target=target)
    a = array(np.arange(16))
    assert np.allclose(as_numpy(k3(a, 5)), np.arange(5) * 3)   # N given: head is allocated with 5
    try:
        k3(A=a)
    except OutputShapeError as e:
        print("   OutputShapeError:", e)
    else:
        raise AssertionError("head was allocated without knowing N")

print("\nOK")
