"""Which indices depend on loaded data: the accesses that bounds inference cannot check.

The call-time bounds checks (``loopnest.analysis.regions``) cover every access whose index is
an affine function of the loop variables and sizes. An index that depends on data (a load:
a histogram's ``H[A[i]]``, a variable bound to a load, a loop whose bounds are loaded) is
left out of them; ``loopnest.index_checks`` checks such an index as the kernel runs instead,
per dimension.

>>> from te import Buffer, Var
>>> from loopnest.stmt import Block, For, Let, Store
>>> A, H = Buffer("A", (8,), "int32"), Buffer("H", (4,), "int32")
>>> i, k = Var("i"), Var("k")
>>> root = For(i, 0, 8, Block([Let(k, A[i] % 4, Block([Store(H, (k,), H[k] + 1)]))]))
>>> dd = data_dependent_vars(root)
>>> [v.name for v in dd.values()], needs_check(H[k].indices[0], dd), needs_check(A[i].indices[0], dd)
(['k'], True, False)
"""
from __future__ import annotations

from te import expr as E
from te.queries import free_vars, has_load

from .stmt import For, Let, Stmt, iter_stmts, stmt_exprs

__all__ = ["data_dependent_vars", "needs_check"]


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
