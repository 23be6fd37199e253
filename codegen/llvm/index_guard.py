"""Run-time checks of data-dependent indices: the accesses that bounds inference cannot check.

The call-time bounds checks (``loopnest.analysis.regions``) cover every access whose index is
an affine function of the loop variables and sizes. An index that depends on data (a load:
a histogram's ``H[A[i]]``, a variable bound to a load, a loop whose bounds are loaded) is
left out of them; the LLVM kernel checks such an access as it runs instead: the flat index
must lie in ``[0, number of elements)``, else the kernel stops and returns
``INDEX_OUT_OF_RANGE`` (the call raises ``IndexError``; what was written before stays
written). ``build(..., bounds_check=False)`` turns the checks off.

>>> from te import Buffer, Var
>>> from loopnest.stmt import Block, For, Let, Store
>>> A, H = Buffer("A", (8,), "int32"), Buffer("H", (4,), "int32")
>>> i, k = Var("i"), Var("k")
>>> root = For(i, 0, 8, Block([Let(k, A[i] % 4, Block([Store(H, (k,), H[k] + 1)]))]))
>>> dd = data_dependent_vars(root)
>>> [v.name for v in dd.values()], needs_check(H[k].indices[0], dd), needs_check(A[i].indices[0], dd)
(['k'], True, False)
>>> [b.name for b in checked_buffers(root)]
['H']
"""
from __future__ import annotations

from te import expr as E
from te.queries import free_vars, has_load

from loopnest.stmt import For, Let, Stmt, Store, iter_stmts, stmt_exprs

__all__ = ["INDEX_OUT_OF_RANGE", "data_dependent_vars", "needs_check", "checked_buffers"]

#: kernel return code: a data-dependent index left its buffer
INDEX_OUT_OF_RANGE = 3


def _binders(root: Stmt) -> list[tuple[E.Var, list]]:
    """(variable, the expressions that define it) for every For, Let statement and Let expression."""
    out: list[tuple[E.Var, list]] = []
    for s in iter_stmts(root):
        if isinstance(s, For):
            out.append((s.var, [s.start, s.stop]))
        elif isinstance(s, Let):
            out.append((s.var, [s.value]))
        for e in stmt_exprs(s):
            E.walk(e, lambda n: out.append((n.var, [n.value])) if isinstance(n, E.Let) else None)
    return out


def data_dependent_vars(root: Stmt) -> dict[int, E.Var]:
    """The variables of ``root`` whose values depend on loaded data (by ``id``)."""
    binders = _binders(root)
    dd: dict[int, E.Var] = {}
    changed = True
    while changed:
        changed = False
        for v, exprs in binders:
            if id(v) not in dd and any(needs_check(e, dd) for e in exprs):
                dd[id(v)] = v
                changed = True
    return dd


def needs_check(index: E.Expr, dd: dict[int, E.Var]) -> bool:
    """Whether ``index`` depends on loaded data: it loads, or uses a variable of ``dd``."""
    return has_load(index) or any(id(v) in dd for v in free_vars(index))


def checked_buffers(root: Stmt) -> list:
    """The buffers ``root`` accesses through a data-dependent index (in order of first access)."""
    dd = data_dependent_vars(root)
    out: dict[int, object] = {}
    for s in iter_stmts(root):
        if isinstance(s, Store) and any(needs_check(ix, dd) for ix in s.indices):
            out.setdefault(id(s.buffer), s.buffer)
        for e in stmt_exprs(s):
            E.walk(e, lambda n: out.setdefault(id(n.buffer), n.buffer)
                   if isinstance(n, E.Load) and any(needs_check(ix, dd) for ix in n.indices) else None)
    return list(out.values())
