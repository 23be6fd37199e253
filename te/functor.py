"""The one dispatch mechanism for IR visitors, mutators, analyses and printers.

A ``Functor`` subclass handles a node class ``C`` with a method ``visit_C(node, *args)``. The
method is found once per (functor class, node class) pair and kept in a table, so a visit is
one dictionary lookup. Only the node's exact class is looked up (node classes do not inherit
from one another); a node without a method goes to ``generic``. Extra positional arguments
are passed through (a printer's precedence, a code generator's builder state...). Methods are
bound into the table on first use: a test that replaces one afterwards also resets ``_table``.

``memoize = True`` on a subclass caches results by node identity for one functor object: a
subexpression shared by several parents is visited once, and a mutator maps it to one
rebuilt node. Use it only when the result depends on the node alone (no extra arguments, no
scope-dependent state).

>>> from te import Var
>>> class Count(Functor):
...     def visit_Var(self, e): return 1
...     def generic(self, e): return sum(self.visit(c) for c in e.children())
>>> i = Var("i")
>>> Count().visit(i * i + 2)
2
"""
from __future__ import annotations

from typing import Any, Callable, ClassVar

__all__ = ["Functor"]


class Functor:
    """Dispatch ``visit(node, *args)`` to ``visit_<class name of node>``, else ``generic``.

    >>> from te import Var, IntImm
    >>> class Leaves(Functor):
    ...     def visit_Var(self, e): return [e.name]
    ...     def visit_IntImm(self, e): return [e.value]
    ...     def generic(self, e): return [x for c in e.children() for x in self.visit(c)]
    >>> Leaves().visit(Var("n") + IntImm(1))
    ['n', 1]
    """

    memoize: ClassVar[bool] = False
    _table: ClassVar[dict[type, Callable]] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._table = {}

    def visit(self, node, *args) -> Any:
        """The result of this functor on ``node``."""
        if self.memoize:
            memo = self.__dict__.setdefault("_functor_memo", {})
            hit = memo.get(id(node))
            if hit is not None and hit[0] is node:
                return hit[1]
        fn = self._table.get(type(node))
        if fn is None:
            fn = self._resolve(type(node))
        out = fn(self, node, *args)
        if self.memoize:
            memo[id(node)] = (node, out)     # the node is kept alive, so its id stays unique
        return out

    @classmethod
    def _resolve(cls, node_cls: type) -> Callable:
        fn = getattr(cls, "visit_" + node_cls.__name__, None) or cls.generic
        cls._table[node_cls] = fn
        return fn

    def generic(self, node, *args) -> Any:
        """What nodes without a ``visit_<Class>`` method get; subclasses define it."""
        raise NotImplementedError(f"{type(self).__name__} has no visit_{type(node).__name__} and no generic")
