"""What kind of computation a tensor is, as the automatic schedules see it.

>>> from te import Buffer, Compute, Reduce, Sum
>>> A = Buffer("A", (8, 8), "float32"); B = Buffer("B", (8, 8), "float32")
>>> classify(Reduce("C", (8, 8), Sum(), lambda i, j, k: A[i, k] * B[k, j], (8,)))
'contraction'
>>> classify(Reduce("R", (8,), Sum(), lambda i, k: A[i, k], (8,)))
'reduction'
>>> classify(Compute("E", (8, 8), lambda i, j: A[i, j] + 1.0))
'elementwise'
"""
from __future__ import annotations

from te.expr import IntImm
from te.extern import ExternTensor
from te.queries import loads, uses_var
from te.tensor import Tensor

__all__ = ["classify", "const_extent", "sliced_loop", "consumers_of"]


def const_extent(d) -> int | None:
    """The value of a constant extent (an ``IntImm``, an int, or a loop handle's extent), else None.

    >>> from te import Var
    >>> const_extent(IntImm(4, "int32")), const_extent(Var("N"))
    (4, None)
    """
    if isinstance(d, int) and not isinstance(d, bool):
        return d
    return d.value if isinstance(d, IntImm) else None


def classify(t: Tensor) -> str:
    """``"contraction"``, ``"reduction"``, ``"elementwise"`` or ``"extern"``.

    A **contraction** is a reduction with at least two output dimensions and an operand
    that does not depend on the innermost one (matmul, convolution): it is register-blocked.
    A **reduction** is any other reduction (a row sum, the row max of softmax); an
    **extern** tensor is computed by an external call (``te.extern``: no loops to schedule).

    >>> from te import Buffer, Compute
    >>> classify(Compute("E", (4,), lambda i: Buffer("A", (4,), "float32")[i]))
    'elementwise'
    """
    if isinstance(t, ExternTensor):
        return "extern"
    if not t.is_reduction:
        return "elementwise"
    if len(t.args) >= 2:
        body_loads = loads(t.body)
        last = t.args[-1]
        if len(body_loads) >= 2 and any(not any(uses_var(i, last) for i in ld.indices) for ld in body_loads):
            return "contraction"
    return "reduction"


def sliced_loop(t: Tensor) -> int:
    """The position of a contraction's largest reduction loop (the one cut into slices;
    the first one when the extents are symbolic).

    >>> from te import Buffer, Reduce, Sum
    >>> A = Buffer("A", (4, 4, 3, 3), "float32")
    >>> sliced_loop(Reduce("S", (4,), Sum(), lambda i, c, y, x: A[i, c, y, x], (4, 3, 3)))
    0
    """
    red = [const_extent(d) for d in t.reduce_dims]
    return max(range(len(red)), key=lambda r: red[r] or 0)


def consumers_of(tensors) -> dict[str, list[str]]:
    """For each tensor of ``tensors`` (by name), the names of the tensors among them that read it.

    >>> from te import Buffer, Compute
    >>> A = Buffer("A", (4,), "float32")
    >>> B = Compute("B", (4,), lambda i: A[i] + 1.0); C = Compute("C", (4,), lambda i: B[i] * 2.0)
    >>> consumers_of([B, C])
    {'B': ['C'], 'C': []}
    """
    out: dict[str, list[str]] = {t.name: [] for t in tensors}
    for t in tensors:
        for b in t.inputs():
            if b.name in out and t.name not in out[b.name]:
                out[b.name].append(t.name)
    return out
