"""eliminate_dead_stores: remove what is computed into intermediates nobody reads.

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> A = Buffer("A", (8,), "float32")
>>> B = Compute("B", (8,), lambda i: A[i] * 2.0)
>>> C = Compute("C", (8,), lambda i: B[i] + 1.0)
>>> nest = LoopNest([C])
>>> nest.eliminate_dead_stores()   # B is read by C: nothing to remove
[]
"""
from __future__ import annotations

from te.queries import loads

from ..queries import stmt_writes
from ..stmt import ExternCall, Store, iter_stmts, stmt_exprs
from ._rewrite import remove_stores

__all__ = ["eliminate_dead_stores"]


def _read_buffers(root) -> set[int]:
    out: set[int] = set()
    for s in iter_stmts(root):
        if isinstance(s, ExternCall):
            out.update(id(b) for b in s.inputs)
        for ld in loads(stmt_exprs(s)):
            if not (isinstance(s, Store) and s.buffer is ld.buffer):
                out.add(id(ld.buffer))
    return out


def eliminate_dead_stores(nest) -> list[str]:
    """Remove every store to an intermediate buffer that no other statement reads, then the
    loops, conditions and lets left empty; repeat until nothing changes (removing a store
    can make the buffers it read dead). Returns the names of the buffers removed, which
    also stop being intermediates (nothing is allocated for them).

    Before / after (``T`` is an intermediate that nothing reads; a store reading its own
    buffer, like a reduction's accumulation, does not keep it alive)::

        for (int i = 0; i < 8; i++) {         for (int i_1 = 0; i_1 < 8; i_1++) {
          T[i] = A[i] * 2.0f;                   C[i_1] = A[i_1] + 1.0f;
        }                                     }
        for (int i_1 = 0; i_1 < 8; i_1++) {
          C[i_1] = A[i_1] + 1.0f;
        }

    Always legal: outputs and input buffers are never touched; an external call is kept
    (it may have effects outside the nest), and the buffers it reads stay alive.
    """
    removed: list[str] = []
    root = nest.root
    while True:
        live = _read_buffers(root)
        dead = [b for b in nest.intermediates if id(b) not in live and b.name not in removed]
        dead = [b for b in dead if any(isinstance(s, Store) and s.buffer is b for s in iter_stmts(root))]
        if not dead:
            break
        ids = {id(b) for b in dead}
        root = remove_stores(root, lambda s, ids=ids: id(s.buffer) in ids)
        removed.extend(b.name for b in dead)
    gone = set(removed)
    unused = [b for b in nest.intermediates if id(b) not in _read_buffers(root) and not stmt_writes(root, b)]
    nest.root = root
    nest.intermediates = [b for b in nest.intermediates if b.name not in gone and b not in unused]
    return removed
