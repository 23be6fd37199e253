"""Helpers shared by the IREval interpreter (``codegen.ireval``) and its batch planner
(``codegen.ireval_batch``): the frame conventions, the flat index of an access, and the
access checks with their error messages (the IR queries both make are ``te.queries`` and
``loopnest.queries``). Neither of those modules is imported here, so both can import this
one.

A *frame* is the list of slots a compiled program runs over (variables and buffers); in a
batch a variable's slot holds an array with one value per batched iteration.

>>> import numpy as np
>>> _restrict([True, np.arange(4)], np.arange(4) % 2 == 0, [(1, 0)])[1].tolist()
[0, 2]
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from te import expr as E

from .kernel import BuildError

_ALLOW = 0                # frame slot: may this call batch loops (False when arguments alias)

Fn = Callable[[list], Any]


def _flat_idx(indices) -> E.Expr:
    if len(indices) == 0:
        return E.IntImm(0)
    if len(indices) != 1:
        raise BuildError(f"IREval takes prepared nests (one flat index per access); found an access "
                         f"with {len(indices)} indices: run nest.prepare_for_codegen() first")
    return indices[0]


def _oob(kind: str, name: str, idx, n: int, where: str):
    arr = np.asarray(idx).reshape(-1)
    bad = arr[(arr < 0) | (arr >= n)]
    first = bad[0] if bad.size else idx
    return IndexError(f"IREval: out-of-bounds {kind} {name}: flat element index {int(first)} is outside "
                      f"[0, {n}) in `{where}`")


def _unallocated(name: str):
    return RuntimeError(f"IREval: buffer {name} is accessed outside its allocation (before its "
                        f"Allocate or after its Free)")


def _check_access(arr, i, kind: str, name: str, where: str) -> None:
    """Raise unless buffer ``name`` is allocated (``arr`` is not None) and the flat element
    index ``i`` (a scalar, or an array of a batch's indices) lies in ``[0, len(arr))``.
    ``kind`` ("load from" / "store to") and ``where`` word the out-of-bounds error.

    The serial (scalar-index) paths guard the call with an inline ``arr is None or not
    0 <= i < len(arr)`` test, so an in-bounds scalar access costs no extra call; the helper
    then only runs to raise.

    >>> _check_access(np.zeros(3), np.array([0, 2]), "load from", "A", "A[i]")
    >>> _check_access(np.zeros(3), 3, "store to", "A", "A[i] = ...")
    Traceback (most recent call last):
    ...
    IndexError: IREval: out-of-bounds store to A: flat element index 3 is outside [0, 3) in `A[i] = ...`
    """
    if arr is None:
        raise _unallocated(name)
    n = arr.shape[0]
    if type(i) is np.ndarray:
        if i.size and (i.min() < 0 or i.max() >= n):
            raise _oob(kind, name, i, n, where)
    elif i < 0 or i >= n:
        raise _oob(kind, name, i, n, where)


def _restrict(fr: list, mask: np.ndarray, slots: Sequence[tuple[int, int]]) -> list:
    """The frame of the batch iterations selected by ``mask``."""
    sub = fr.copy()
    for s, nd in slots:
        v = fr[s]
        if type(v) is np.ndarray and v.ndim > nd:
            sub[s] = v[mask]
    return sub
