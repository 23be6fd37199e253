"""Expression nodes (the TIR expression grammar) and their Python operators.

Nodes are small immutable objects: assigning (or deleting) any attribute of a constructed
node raises ``AttributeError``; build a changed copy with ``e.replace(field=...)``.
Comparison operators build comparison nodes: ``i == 0`` is the ``EQ`` node ``i.eq(0)`` and
``i != 0`` the ``NE`` node ``i.ne(0)``, as ``<``, ``<=``, ``>``, ``>=`` build theirs. Hashing is
by identity, and the truth value of a node built by ``==`` / ``!=`` is the identity of its
operands, so expressions and variables still key dictionaries, fill sets and are found by
``in`` and ``list.index`` exactly as identity-compared objects are (TVM's design). A condition
that is a Python bool (say ``n == 0`` with ``n`` a Python int) is refused with a TypeError.

>>> from te import Var, select
>>> c, j = Var("c"), Var("j")
>>> print(select(c == 0, j * 10, j))
select(c == 0, j * 10, j)
>>> {c: "row"}[c], c in [j, c], bool(c == j)
('row', True, False)

No concrete node class derives from another one, so ``isinstance(e, And)`` is true only for
``And`` (``Or`` is a sibling) and ``isinstance(e, Select)`` only for ``Select`` (not
``IfThenElse``); test ``isinstance(e, (And, Or))`` / ``isinstance(e, (Select, IfThenElse))``
to accept either.

>>> from te import Var, int32
>>> i = Var("i", int32)
>>> e = (i + 1) * 2
>>> e.dtype
int32
>>> print(e)
(i + 1) * 2

Integer operators follow the spec: ``/`` is C division (truncates toward zero), ``%`` has
the sign of the dividend, ``//`` is floor division; ``floordiv`` / ``floormod`` / ``truncdiv``
/ ``truncmod`` name each one explicitly. On integers ``&``, ``|``, ``^``, ``~``, ``<<`` and ``>>``
are bit operations (``te.bitops``); on bools ``&``, ``|`` and ``~`` are logical and ``^`` is xor.
``**``, ``abs()`` and ``round()`` build ``te.intrinsics.power``, ``abs`` and ``round``.
"""
from __future__ import annotations

import math
import numbers
import re
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .dtypes import Dtype, as_dtype, bool_, float32, int32
from .functor import Functor

__all__ = [
    "Expr", "Var", "IntImm", "FloatImm", "Cast", "BinaryOp", "Add", "Sub", "Mul", "Div", "Mod",
    "FloorDiv", "FloorMod", "Min", "Max", "CmpOp", "EQ", "NE", "LT", "LE", "GT", "GE", "And",
    "Or", "Not", "Select", "IfThenElse", "Load", "Let", "Call", "Ramp", "Broadcast", "MakeVector",
    "ExtractLane", "IndexCheck",
    "as_expr", "const", "floordiv", "floormod", "truncdiv", "truncmod", "if_then_else",
    "logical_and", "logical_or", "logical_not", "ExprMutator", "ExprVisitor", "walk",
    "substitute", "structural_key", "structural_equal", "IDENTIFIER_RE", "check_identifier",
    "Incomparable", "check_condition",
]

#: A whole user-given name (``\Z``, not ``$``: ``$`` also matches before a final newline).
IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")


def check_identifier(name: Any, what: str) -> str:
    """Validate a user-given name: letters, digits, ``_`` and ``.``, not starting with a digit.

    Names reach generated code (after sanitising ``.``), so anything else is rejected.

    >>> check_identifier("A_1", "buffer")
    'A_1'
    >>> check_identifier("A\\n", "buffer")
    Traceback (most recent call last):
      ...
    ValueError: invalid buffer name 'A\\n': expected an identifier of letters, digits, '_' and '.', starting with a letter or '_' (at most 128 characters)
    """
    if not isinstance(name, str) or not IDENTIFIER_RE.fullmatch(name) or len(name) > 128:
        raise ValueError(f"invalid {what} name {name!r}: expected an identifier of letters, digits, "
                         "'_' and '.', starting with a letter or '_' (at most 128 characters)")
    return name


# ``Expr.__setattr__`` always raises, so constructors set their slot fields through the slots'
# own C-level setters, bound once after each class by ``_slot_setters`` (about twice as fast
# as ``object.__setattr__``, which remains for the generic cases).
_set = object.__setattr__


def _slot_setters(cls: type, *names: str) -> tuple:
    """The setters of ``cls``'s slots ``names``: ``setter(node, value)`` sets a field."""
    return tuple(getattr(cls, n).__set__ for n in names)


class Expr:
    """Base class of expressions. Every expression has a ``dtype``.

    Expressions are immutable: once constructed, assigning or deleting any attribute
    raises ``AttributeError``. Derive a changed node with ``replace`` (subclasses set their
    fields in ``__init__`` with ``object.__setattr__``). Copying and pickling work (a copy
    of a ``Var`` is a new variable, as with any identity-compared object).

    >>> i = Var("i")
    >>> e = i + 1
    >>> e.b = i
    Traceback (most recent call last):
        ...
    AttributeError: Add expressions are immutable: cannot set 'b'; build a new node instead (e.g. e.replace(b=...))
    >>> print(e.replace(b=i))
    i + i
    """

    __slots__ = ("dtype",)
    _fields: tuple[str, ...] = ()

    # -- immutability ---------------------------------------------------------------
    def __setattr__(self, name, value):
        hint = f" (e.g. e.replace({name}=...))" if name in self._fields else ""
        raise AttributeError(f"{type(self).__name__} expressions are immutable: cannot set {name!r}; "
                             f"build a new node instead{hint}")

    def __delattr__(self, name):
        raise AttributeError(f"{type(self).__name__} expressions are immutable: cannot delete {name!r}")

    def __setstate__(self, state):
        """Restore the fields of a node being unpickled or copied (only on a blank node)."""
        if hasattr(self, "dtype"):
            raise AttributeError(f"{type(self).__name__} expressions are immutable: cannot restore the "
                                 "state of a constructed node")
        slots = state[1] if isinstance(state, tuple) else state
        for k, v in (slots or {}).items():
            _set(self, k, v)

    # -- structure ----------------------------------------------------------------
    def children(self) -> list["Expr"]:
        """The sub-expressions, in field order.

        >>> [str(c) for c in (Var("i") + 1).children()]
        ['i', '1']
        """
        out = []
        for f in self._fields:
            v = getattr(self, f)
            if isinstance(v, Expr):
                out.append(v)
            elif isinstance(v, tuple):
                out.extend(x for x in v if isinstance(x, Expr))
        return out

    def replace(self, **changes) -> "Expr":
        """A copy with some fields replaced; ``self`` when nothing changes.

        >>> i, j = Var("i"), Var("j")
        >>> print((i + 1).replace(a=j))
        j + 1
        """
        if all(getattr(self, k) is v for k, v in changes.items()):
            return self
        vals = {f: getattr(self, f) for f in self._fields}
        vals.update(changes)
        return type(self)._rebuild(vals, self)

    @classmethod
    def _rebuild(cls, vals: dict, old: "Expr") -> "Expr":
        return cls(**vals)

    def __bool__(self):
        raise TypeError(f"the truth value of the symbolic expression `{self}` is unknown: use it as "
                        "the condition of te.select / if_then_else (te.structural_equal compares "
                        "two expressions' structure)")

    def __repr__(self) -> str:
        from .printer import expr_to_str
        return expr_to_str(self)

    __str__ = __repr__

    # -- operators -----------------------------------------------------------------
    def __add__(self, o): return _binop(Add, self, o)
    def __radd__(self, o): return _binop(Add, o, self)
    def __sub__(self, o): return _binop(Sub, self, o)
    def __rsub__(self, o): return _binop(Sub, o, self)
    def __mul__(self, o): return _binop(Mul, self, o)
    def __rmul__(self, o): return _binop(Mul, o, self)
    def __truediv__(self, o): return _binop(Div, self, o)
    def __rtruediv__(self, o): return _binop(Div, o, self)
    def __floordiv__(self, o): return _binop(FloorDiv, self, o)
    def __rfloordiv__(self, o): return _binop(FloorDiv, o, self)
    def __mod__(self, o): return _binop(Mod, self, o)
    def __rmod__(self, o): return _binop(Mod, o, self)
    def __neg__(self):
        return _binop(Sub, 0, self)
    def __pos__(self): return self
    def __lt__(self, o): return _binop(LT, self, o)
    def __le__(self, o): return _binop(LE, self, o)
    def __gt__(self, o): return _binop(GT, self, o)
    def __ge__(self, o): return _binop(GE, self, o)
    # & | ~ are logical on bool operands and bitwise on integers (te.bitops); ^ on bools is xor
    def __and__(self, o): return _logic_or_bits(And, "bitwise_and", self, o, True)
    def __rand__(self, o): return _logic_or_bits(And, "bitwise_and", o, self, False)
    def __or__(self, o): return _logic_or_bits(Or, "bitwise_or", self, o, True)
    def __ror__(self, o): return _logic_or_bits(Or, "bitwise_or", o, self, False)
    def __xor__(self, o): return _logic_or_bits(NE, "bitwise_xor", self, o, True)
    def __rxor__(self, o): return _logic_or_bits(NE, "bitwise_xor", o, self, False)

    def __invert__(self):
        if self.dtype.is_bool:
            return Not(self)
        from .bitops import bitwise_not
        return bitwise_not(self)

    def __lshift__(self, o): return _bits("shift_left", self, o)
    def __rlshift__(self, o): return _bits("shift_left", o, self)
    def __rshift__(self, o): return _bits("shift_right", self, o)
    def __rrshift__(self, o): return _bits("shift_right", o, self)

    def __pow__(self, o):
        """``x ** n``: repeated multiplication for an integer ``x`` and a non-negative integer
        constant ``n`` (wrapping as ``*`` does); ``te.pow`` for floats.

        >>> print(Var("i") ** 3)
        i * i * i
        >>> print(Var("f", "float32") ** 0.5)
        pow(f, 0.5f)
        """
        from .intrinsics import power
        return power(self, o)

    def __rpow__(self, o):
        from .intrinsics import power
        return power(o, self)

    def __abs__(self):
        """``abs(x)`` is ``te.abs(x)`` (integer abs wraps at INT_MIN).

        >>> print(abs(Var("i")))
        abs(i)
        """
        from .intrinsics import abs as abs_
        return abs_(self)

    def __round__(self, ndigits=None):
        """``round(x)``: ``te.round`` (half to even, numpy.round's rule) for floats; an
        integer expression is returned unchanged, as Python's ``round`` does for ints.

        >>> print(round(Var("f", "float32")))
        round(f)
        """
        if ndigits is not None:
            raise TypeError(f"round(`{self}`, {ndigits!r}): only round(x) (to an integral value) is supported")
        if self.dtype.is_integer:
            return self
        from .intrinsics import round as round_
        return round_(self)

    def __eq__(self, o):
        """``self == o`` builds an ``EQ`` node whose truth value is ``self is o``.

        >>> i, j = Var("i"), Var("j")
        >>> c = i == 0
        >>> print(c)
        i == 0
        >>> isinstance(c, EQ), bool(c), bool(i == i), bool(i == j)
        (True, False, True, False)
        >>> i in [j, i], [j, i].index(i), {i: 1}[i], len({i, j, i})
        (True, 1, 1, 2)
        """
        return _compare(EQ, self, o)

    def __ne__(self, o):
        """``self != o`` builds an ``NE`` node whose truth value is ``self is not o``.

        >>> i = Var("i")
        >>> print(i != 1)
        i != 1
        >>> bool(i != i), bool(i != 1)
        (False, True)
        """
        return _compare(NE, self, o)

    __hash__ = object.__hash__  # defining __eq__ would otherwise make expressions unhashable

    def eq(self, o) -> "Expr":
        """``self == o`` as an expression (the same node ``==`` builds).

        >>> print(Var("i").eq(3))
        i == 3
        """
        return _binop(EQ, self, o)

    def ne(self, o) -> "Expr":
        """``self != o`` as an expression (the same node ``!=`` builds).

        >>> print(Var("i").ne(3))
        i != 3
        """
        return _binop(NE, self, o)


_set_dtype, = _slot_setters(Expr, "dtype")


# ------------------------------------------------------------------------------------
# leaves
# ------------------------------------------------------------------------------------
class Var(Expr):
    """A named scalar variable: loop indices, symbolic sizes, let-bound values.

    >>> N = Var("N", int32)
    >>> N.dtype
    int32
    """

    __slots__ = ("name",)
    _fields = ("name",)

    def __init__(self, name: str, dtype: Any = int32):
        _set_var_name(self, check_identifier(name, "variable"))
        _set_dtype(self, as_dtype(dtype))

    def replace(self, **changes):  # variables are identities: never copied implicitly
        if not changes:
            return self
        return Var(changes.get("name", self.name), changes.get("dtype", self.dtype))


_set_var_name, = _slot_setters(Var, "name")


class IntImm(Expr):
    """An integer (or bool) constant of a given dtype; the value is range-checked.

    >>> IntImm(3, int32).value
    3
    """

    __slots__ = ("value",)
    _fields = ("value",)

    def __init__(self, value: int, dtype: Any = int32):
        dtype = as_dtype(dtype)
        if not (dtype.is_integer or dtype.is_bool) or dtype.is_vector:
            raise TypeError(f"IntImm needs a scalar integer or bool dtype, got {dtype}")
        value = int(value)
        lo, hi = int(dtype.min_value()), int(dtype.max_value())
        if not lo <= value <= hi:
            raise TypeError(f"integer constant {value} is out of range for {dtype} [{lo}, {hi}]")
        _set_int_value(self, value)
        _set_dtype(self, dtype)

    @classmethod
    def _rebuild(cls, vals, old):
        return IntImm(vals["value"], old.dtype)


_set_int_value, = _slot_setters(IntImm, "value")


class FloatImm(Expr):
    """A floating-point constant of a given float dtype.

    >>> FloatImm(0.5, "float32").value
    0.5
    """

    __slots__ = ("value",)
    _fields = ("value",)

    def __init__(self, value: float, dtype: Any = float32):
        dtype = as_dtype(dtype)
        if not dtype.is_float or dtype.is_vector:
            raise TypeError(f"FloatImm needs a scalar float dtype, got {dtype}")
        value = float(value)
        if math.isfinite(value) and abs(value) > dtype.max_value():
            raise TypeError(f"float constant {value} is out of range for {dtype} (max {dtype.max_value()})")
        _set_float_value(self, _round_to(value, dtype))
        _set_dtype(self, dtype)

    @classmethod
    def _rebuild(cls, vals, old):
        return FloatImm(vals["value"], old.dtype)


_set_float_value, = _slot_setters(FloatImm, "value")


def _round_to(value: float, dtype: Dtype) -> float:
    """``value`` rounded to the nearest value representable in float ``dtype``."""
    if dtype.kind == "float" and dtype.bits == 64:
        return value
    if dtype.kind == "float" and dtype.bits == 32:
        return float(np.float32(value))
    from .lowprec import convert
    name = {"float": "float16", "bfloat": "bfloat16"}.get(dtype.kind, dtype.kind)
    stored = convert(np.array([value], np.float64), "float64", name)
    return float(convert(stored, name, "float64")[0])


def const(value: Any, dtype: Any) -> Expr:
    """A constant of ``dtype`` (IntImm for integer/bool types, FloatImm for floats; a
    Broadcast for vector types).

    >>> const(1, "float32")
    1.0f
    """
    dtype = as_dtype(dtype)
    if dtype.is_vector:
        return Broadcast(const(value, dtype.element), dtype.lanes)
    if dtype.is_float:
        return FloatImm(value, dtype)
    if dtype.is_bool:
        return IntImm(1 if value else 0, dtype)
    if isinstance(value, float) and not value.is_integer():
        raise TypeError(f"cannot make a {dtype} constant from the non-integral float {value}")
    return IntImm(int(value), dtype)


def as_expr(x: Any, like: Expr | None = None) -> Expr:
    """Convert a Python value to an expression; literals take ``like``'s dtype when given.

    >>> as_expr(3)
    3
    """
    if isinstance(x, Expr):
        return x
    if hasattr(x, "as_expr"):  # Tensor / Buffer scalars, Loop handles
        return x.as_expr()
    if isinstance(x, (bool, np.bool_)):
        if like is not None and not like.dtype.is_bool:
            raise TypeError(f"cannot combine the bool literal {x} with {like.dtype} expression `{like}`")
        return const(bool(x), bool_ if like is None else like.dtype)
    if isinstance(x, numbers.Integral):
        x = int(x)
        if like is None:
            return IntImm(x, int32 if -(2**31) <= x < 2**31 else "int64")
        if like.dtype.is_bool:
            raise TypeError(f"cannot combine the int literal {x} with bool expression `{like}`")
        return const(x, like.dtype)
    if isinstance(x, numbers.Real):
        x = float(x)
        if like is None:
            return FloatImm(x, float32)
        if like.dtype.is_bool or (like.dtype.is_integer and not x.is_integer()):
            raise TypeError(f"cannot combine the float literal {x} with {like.dtype} expression `{like}`: "
                            "cast the expression first, e.g. te.cast(e, 'float32')")
        return const(x, like.dtype)
    raise TypeError(f"cannot convert {x!r} (a {type(x).__name__}) to an expression")


# ------------------------------------------------------------------------------------
# operators
# ------------------------------------------------------------------------------------
class Cast(Expr):
    """Convert ``value`` to ``dtype`` (C semantics: float -> int truncates; int -> int wraps).

    >>> Cast("float32", Var("i")).dtype
    float32
    """

    __slots__ = ("value",)
    _fields = ("value",)

    def __init__(self, dtype: Any, value: Expr):
        dtype = as_dtype(dtype)
        value = as_expr(value)
        if dtype.lanes != value.dtype.lanes:
            raise TypeError(f"cast of `{value}` ({value.dtype}) to {dtype}: lane counts differ")
        _set_dtype(self, dtype)
        _set_cast_value(self, value)

    @classmethod
    def _rebuild(cls, vals, old):
        return Cast(old.dtype, vals["value"])


_set_cast_value, = _slot_setters(Cast, "value")


class BinaryOp(Expr):
    """Abstract base of the two-operand nodes; both operands must have the same dtype.

    Class flags: ``int_only`` (integer operands), ``bool_only`` (bool operands),
    ``result_bool`` (the result is bool, e.g. comparisons).

    >>> e = Var("i") - 1
    >>> isinstance(e, BinaryOp), e.symbol
    (True, '-')
    """

    __slots__ = ("a", "b")
    _fields = ("a", "b")
    symbol = "?"
    int_only = False
    bool_only = False
    result_bool = False

    def __init__(self, a: Expr, b: Expr):
        if not isinstance(a, Expr):
            a = as_expr(a)
        if not isinstance(b, Expr):
            b = as_expr(b)
        dt = a.dtype
        if dt is not b.dtype and dt != b.dtype:  # identity first: Dtype equality is slow
            raise TypeError(f"operands of {type(self).__name__} have different dtypes: `{a}` is {dt}, "
                            f"`{b}` is {b.dtype}; cast one of them with te.cast")
        if self.int_only and not dt.is_integer:
            raise TypeError(f"{type(self).__name__} needs integer operands, got {dt} (`{a}`, `{b}`)")
        if self.bool_only and not dt.is_bool:
            raise TypeError(f"{type(self).__name__} needs bool operands, got {dt} (`{a}`)")
        _set_bin_a(self, a)
        _set_bin_b(self, b)
        if self.result_bool:
            dt = bool_ if dt.lanes == 1 else bool_.with_lanes(dt.lanes)
        _set_dtype(self, dt)

    @classmethod
    def _rebuild(cls, vals, old):
        return cls(vals["a"], vals["b"])


_set_bin_a, _set_bin_b = _slot_setters(BinaryOp, "a", "b")


class Add(BinaryOp):
    __slots__ = ()
    symbol = "+"


class Sub(BinaryOp):
    __slots__ = ()
    symbol = "-"


class Mul(BinaryOp):
    __slots__ = ()
    symbol = "*"


class Div(BinaryOp):
    """Division: C (truncating) for integers, IEEE for floats."""
    __slots__ = ()
    symbol = "/"


class Mod(BinaryOp):
    """C remainder: the sign of the dividend (integers only)."""
    __slots__ = ()
    symbol = "%"
    int_only = True


class FloorDiv(BinaryOp):
    """Floor division (rounds toward minus infinity); for floats, floor(a / b)."""
    __slots__ = ()
    symbol = "floordiv"


class FloorMod(BinaryOp):
    """Floor remainder ``a - floordiv(a, b) * b``: never negative for b > 0."""
    __slots__ = ()
    symbol = "floormod"


class Min(BinaryOp):
    __slots__ = ()
    symbol = "min"


class Max(BinaryOp):
    __slots__ = ()
    symbol = "max"


class CmpOp(BinaryOp):
    __slots__ = ()
    result_bool = True


class EQ(CmpOp):
    """``a == b``. Built by ``a == b`` (then its truth value is ``a is b``, so that lookups in
    dicts, sets and lists keep identity semantics) or by ``a.eq(b)``.

    >>> i = Var("i")
    >>> print(i == 2)
    i == 2
    >>> bool(i == i), bool(i.eq(2) == i.eq(2))
    (True, False)
    """
    __slots__ = ("_same",)
    symbol = "=="

    def __bool__(self):
        return _identity_truth(self, True)


class NE(CmpOp):
    """``a != b``. Built by ``a != b`` (then its truth value is ``a is not b``) or by ``a.ne(b)``.

    >>> i = Var("i")
    >>> print(i != 2)
    i != 2
    >>> bool(i != i), bool(i != 2)
    (False, True)
    """
    __slots__ = ("_same",)
    symbol = "!="

    def __bool__(self):
        return _identity_truth(self, False)


class LT(CmpOp):
    __slots__ = ()
    symbol = "<"


class LE(CmpOp):
    __slots__ = ()
    symbol = "<="


class GT(CmpOp):
    __slots__ = ()
    symbol = ">"


class GE(CmpOp):
    __slots__ = ()
    symbol = ">="


class And(BinaryOp):
    """Logical and of bool operands (short-circuit for scalars). ``Or`` is a sibling class,
    not a subclass: test ``isinstance(e, (And, Or))`` for either.

    >>> i = Var("i")
    >>> print((i >= 0) & (i < 8))
    i >= 0 && i < 8
    """
    __slots__ = ()
    symbol = "&&"
    bool_only = True


class Or(BinaryOp):
    """Logical or of bool operands (short-circuit for scalars).

    >>> i = Var("i")
    >>> e = (i < 2) | (i >= 6)
    >>> print(e)
    i < 2 || i >= 6
    >>> isinstance(e, And)
    False
    """
    __slots__ = ()
    symbol = "||"
    bool_only = True


class Not(Expr):
    """Logical negation of a bool expression."""

    __slots__ = ("a",)
    _fields = ("a",)

    def __init__(self, a: Expr):
        a = check_condition(a, "the operand of Not")
        if not a.dtype.is_bool:
            raise TypeError(f"Not needs a bool operand, got {a.dtype} (`{a}`)")
        _set_not_a(self, a)
        _set_dtype(self, a.dtype)


_set_not_a, = _slot_setters(Not, "a")


def _identity_truth(node, want_same: bool) -> bool:
    """The truth value of an ``EQ`` / ``NE`` node: identity of the operands of the ``==`` /
    ``!=`` that built it; any other node has no truth value."""
    try:
        same = node._same
    except AttributeError:  # built by .eq() / .ne() or rebuilt by a pass: symbolic
        return Expr.__bool__(node)
    return same is want_same


_set_eq_same, = _slot_setters(EQ, "_same")
_set_ne_same, = _slot_setters(NE, "_same")
_SAME_SETTER = {EQ: _set_eq_same, NE: _set_ne_same}


class Incomparable:
    """What ``a == b`` / ``a != b`` gives when no comparison node can be built from the
    operands (their dtypes differ, or a literal does not fit ``a``'s dtype). Its truth value is
    identity, as for a comparison node, so lookups in lists and dicts still work; used as an
    expression (a condition, an operand) it raises the TypeError that ``a.eq(b)`` raises.

    >>> i, n = Var("i"), Var("n", "int64")
    >>> c = i == n
    >>> bool(c), bool(i != n)
    (False, True)
    >>> Select(c, 1, 0)
    Traceback (most recent call last):
        ...
    TypeError: operands of EQ have different dtypes: `i` is int32, `n` is int64; cast one of them with te.cast
    """

    __slots__ = ("op", "a", "b", "same")

    def __init__(self, op: type, a: Expr, b: Any, same: bool):
        self.op, self.a, self.b, self.same = op, a, b, same

    def __bool__(self):
        return self.same is (self.op is EQ)

    def as_expr(self) -> Expr:
        """Build the comparison node: raises the TypeError that says why it cannot be built."""
        return _binop(self.op, self.a, self.b)

    def __and__(self, o): return self.as_expr() & o
    def __rand__(self, o): return o & self.as_expr()
    def __or__(self, o): return self.as_expr() | o
    def __ror__(self, o): return o | self.as_expr()
    def __xor__(self, o): return self.as_expr() ^ o
    def __rxor__(self, o): return o ^ self.as_expr()
    def __invert__(self): return ~self.as_expr()

    def __repr__(self) -> str:
        return f"<{self.op.__name__} of `{self.a}` and {self.b!r} that cannot be built>"


def _compare(op: type, a: Expr, b: Any):
    """``a == b`` / ``a != b`` (``op`` EQ / NE): a comparison node whose truth value is the
    identity of ``a`` and ``b``; an ``Incomparable`` when the node cannot be built;
    ``NotImplemented`` (Python's identity fallback) for operands that are no expressions."""
    if isinstance(b, Expr):
        dt = a.dtype
        if dt is b.dtype and dt.lanes == 1:  # fast path: `in` and list.index compare this way
            node = op.__new__(op)
            _set_bin_a(node, a)
            _set_bin_b(node, b)
            _set_dtype(node, bool_)
            _SAME_SETTER[op](node, a is b)
            return node
        if dt is not b.dtype and dt != b.dtype and dt.lanes == b.dtype.lanes:
            return Incomparable(op, a, b, False)  # checked first: the node's error message costs
    elif not isinstance(b, (numbers.Number, np.bool_)) and not hasattr(b, "as_expr"):
        return NotImplemented
    try:
        node = _binop(op, a, b)
    except TypeError:
        return Incomparable(op, a, b, a is b)
    _SAME_SETTER[op](node, a is b)
    return node


def check_condition(cond: Any, what: str) -> Expr:
    """``cond`` as an expression, for ``what`` (a condition, an operand of ``&``); a Python
    bool is refused: it is a comparison Python evaluated to a constant, almost always a mistake.

    >>> i = Var("i")
    >>> print(check_condition(i == 0, "select's condition"))
    i == 0
    >>> check_condition(i is None, "select's condition")
    Traceback (most recent call last):
        ...
    TypeError: select's condition is the Python bool False, not an expression: Python evaluated the comparison itself (no operand was a te expression, e.g. a Python int, or it was written with `is`); build it from expressions, e.g. a.eq(b) / a.ne(b), or write te.const(False, 'bool') for a constant condition
    """
    if isinstance(cond, (bool, np.bool_)):
        raise TypeError(f"{what} is the Python bool {bool(cond)}, not an expression: Python evaluated "
                        "the comparison itself (no operand was a te expression, e.g. a Python int, or "
                        "it was written with `is`); build it from expressions, e.g. a.eq(b) / a.ne(b), "
                        f"or write te.const({bool(cond)}, 'bool') for a constant condition")
    return as_expr(cond)


def _check_cond(cond: Expr, t: Expr, what: str):
    if not cond.dtype.is_bool:
        raise TypeError(f"{what} condition `{cond}` must be bool, got {cond.dtype}")
    if cond.dtype.lanes not in (1, t.dtype.lanes):
        raise TypeError(f"{what} condition has {cond.dtype.lanes} lanes, values have {t.dtype.lanes}")


def _unify(a: Any, b: Any) -> tuple[Expr, Expr]:
    if isinstance(a, Expr) or hasattr(a, "as_expr"):
        a = as_expr(a)
        b = as_expr(b, a)
    else:
        b = as_expr(b)
        a = as_expr(a, b)
    if a.dtype.lanes != b.dtype.lanes:
        if a.dtype.lanes == 1 and isinstance(a, (IntImm, FloatImm)):
            a = Broadcast(a, b.dtype.lanes)
        elif b.dtype.lanes == 1 and isinstance(b, (IntImm, FloatImm)):
            b = Broadcast(b, a.dtype.lanes)
    return a, b


class _Conditional(Expr):
    """Abstract base of ``Select`` and ``IfThenElse``: the fields ``cond``, ``t``, ``f`` and
    their type checks. Test ``isinstance(e, (Select, IfThenElse))`` for either node."""

    __slots__ = ("cond", "t", "f")
    _fields = ("cond", "t", "f")

    def __init__(self, cond: Expr, t: Expr, f: Expr):
        cond = check_condition(cond, f"{_COND_WHAT.get(type(self), type(self).__name__)}'s condition")
        t, f = _unify(t, f)
        if t.dtype is not f.dtype and t.dtype != f.dtype:
            raise TypeError(f"select branches have different dtypes: `{t}` is {t.dtype}, `{f}` is {f.dtype}")
        _check_cond(cond, t, type(self).__name__)
        _set_cond_cond(self, cond)
        _set_cond_t(self, t)
        _set_cond_f(self, f)
        _set_dtype(self, t.dtype)


_set_cond_cond, _set_cond_t, _set_cond_f = _slot_setters(_Conditional, "cond", "t", "f")


class Select(_Conditional):
    """``cond ? t : f`` evaluating both sides (no short circuit).

    >>> i = Var("i")
    >>> Select(i < 3, i, 3).dtype
    int32
    """

    __slots__ = ()


class IfThenElse(_Conditional):
    """``cond ? t : f`` evaluating only the taken side (guards out-of-bounds reads). A
    sibling of ``Select``, not a subclass.

    >>> i = Var("i")
    >>> e = IfThenElse(i < 3, i, 3)
    >>> print(e)
    if_then_else(i < 3, i, 3)
    >>> isinstance(e, Select)
    False
    """
    __slots__ = ()


_COND_WHAT = {Select: "select", IfThenElse: "if_then_else"}


class Load(Expr):
    """Read ``buffer[indices]``; a vector (Ramp) last index reads several lanes.

    Built by indexing a Buffer or Tensor: ``A[i, j]``.
    """

    __slots__ = ("buffer", "indices")
    _fields = ("indices",)

    def __init__(self, buffer, indices: Sequence[Any]):
        indices = tuple(as_expr(i) for i in indices)
        for k, ix in enumerate(indices):
            if not ix.dtype.is_integer:
                raise TypeError(f"index {k} of {buffer.name} is `{ix}` of dtype {ix.dtype}; indices must be integers")
            if ix.dtype.is_vector and k != len(indices) - 1:
                raise TypeError(f"only the last index of {buffer.name} may be a vector, index {k} is {ix.dtype}")
        _set_load_buffer(self, buffer)
        _set_load_indices(self, indices)
        lanes = indices[-1].dtype.lanes if indices else 1
        _set_dtype(self, buffer.dtype.with_lanes(lanes * buffer.dtype.lanes))

    @classmethod
    def _rebuild(cls, vals, old):
        return Load(old.buffer, vals["indices"])


_set_load_buffer, _set_load_indices = _slot_setters(Load, "buffer", "indices")


class Let(Expr):
    """``let var = value in body``."""

    __slots__ = ("var", "value", "body")
    _fields = ("var", "value", "body")

    def __init__(self, var: Var, value: Expr, body: Expr):
        value = as_expr(value)
        if var.dtype is not value.dtype and var.dtype != value.dtype:
            raise TypeError(f"let {var.name}: variable is {var.dtype}, value `{value}` is {value.dtype}")
        body = as_expr(body)
        _set_let_var(self, var)
        _set_let_value(self, value)
        _set_let_body(self, body)
        _set_dtype(self, body.dtype)


_set_let_var, _set_let_value, _set_let_body = _slot_setters(Let, "var", "value", "body")


class Call(Expr):
    """An intrinsic call such as ``exp(x)``; see ``te.intrinsics`` for the list."""

    __slots__ = ("name", "args")
    _fields = ("args",)

    def __init__(self, name: str, args: Sequence[Expr], dtype: Any):
        _set_call_name(self, name)
        _set_call_args(self, tuple(as_expr(a) for a in args))
        _set_dtype(self, as_dtype(dtype))

    @classmethod
    def _rebuild(cls, vals, old):
        return Call(old.name, vals["args"], old.dtype)


_set_call_name, _set_call_args = _slot_setters(Call, "name", "args")


class Ramp(Expr):
    """The vector ``[base, base + stride, ..., base + (lanes-1) * stride]``."""

    __slots__ = ("base", "stride", "lanes")
    _fields = ("base", "stride")

    def __init__(self, base: Expr, stride: Any, lanes: int):
        base = as_expr(base)
        stride = as_expr(stride, base)
        if lanes < 2:
            raise TypeError(f"Ramp needs at least 2 lanes, got {lanes}")
        if base.dtype != stride.dtype or base.dtype.is_vector or not base.dtype.is_integer:
            raise TypeError(f"Ramp base and stride must be scalar integers of one dtype, got {base.dtype}, {stride.dtype}")
        lanes = int(lanes)
        _set_ramp_base(self, base)
        _set_ramp_stride(self, stride)
        _set_ramp_lanes(self, lanes)
        _set_dtype(self, base.dtype.with_lanes(lanes))

    @classmethod
    def _rebuild(cls, vals, old):
        return Ramp(vals["base"], vals["stride"], old.lanes)


_set_ramp_base, _set_ramp_stride, _set_ramp_lanes = _slot_setters(Ramp, "base", "stride", "lanes")


class Broadcast(Expr):
    """``value`` repeated over ``lanes`` lanes."""

    __slots__ = ("value", "lanes")
    _fields = ("value",)

    def __init__(self, value: Expr, lanes: int):
        value = as_expr(value)
        if value.dtype.is_vector or lanes < 2:
            raise TypeError(f"Broadcast needs a scalar value and at least 2 lanes, got {value.dtype}, {lanes}")
        lanes = int(lanes)
        _set_bc_value(self, value)
        _set_bc_lanes(self, lanes)
        _set_dtype(self, value.dtype.with_lanes(lanes))

    @classmethod
    def _rebuild(cls, vals, old):
        return Broadcast(vals["value"], old.lanes)


_set_bc_value, _set_bc_lanes = _slot_setters(Broadcast, "value", "lanes")


class MakeVector(Expr):
    """The vector whose lane ``k`` is the scalar ``values[k]`` (at least 2, of one dtype).
    ``loopnest.legalize_vectors`` builds it from expressions computed lane by lane.

    >>> i = Var("i")
    >>> v = MakeVector([i, i + 1])
    >>> print(v)
    make_vector(i, i + 1)
    >>> v.dtype.name
    'int32x2'
    """

    __slots__ = ("values",)
    _fields = ("values",)

    def __init__(self, values: Sequence[Any]):
        values = tuple(as_expr(v) for v in values)
        if len(values) < 2 or any(v.dtype.is_vector or v.dtype != values[0].dtype for v in values):
            raise TypeError("MakeVector needs at least 2 scalar values of one dtype, got "
                            f"{[v.dtype.name for v in values]}")
        _set_mv_values(self, values)
        _set_dtype(self, values[0].dtype.with_lanes(len(values)))


_set_mv_values, = _slot_setters(MakeVector, "values")


class ExtractLane(Expr):
    """Lane ``lane`` (an int) of the vector ``value``, a scalar.

    >>> print(ExtractLane(Ramp(Var("i"), 1, 4), 2))
    extract_lane(ramp(i, 1, 4), 2)
    """

    __slots__ = ("value", "lane")
    _fields = ("value",)

    def __init__(self, value: Expr, lane: int):
        value = as_expr(value)
        if not value.dtype.is_vector or not 0 <= lane < value.dtype.lanes:
            raise TypeError(f"ExtractLane needs a vector and a lane inside it, got {value.dtype} and lane {lane}")
        _set_el_value(self, value)
        _set_el_lane(self, int(lane))
        _set_dtype(self, value.dtype.element)

    @classmethod
    def _rebuild(cls, vals, old):
        return ExtractLane(vals["value"], old.lane)


_set_el_value, _set_el_lane = _slot_setters(ExtractLane, "value", "lane")


class IndexCheck(Expr):
    """``index``, checked at run time to lie in ``[0, extent)``: dimension ``dim`` of the
    buffer named ``buffer`` (a vector ``index`` is checked in every lane). Out of range, the
    kernel stops with an ``IndexError``. ``loopnest.index_checks`` puts these around the
    data-dependent indices of loads and stores, one per dimension, before flattening.

    >>> i = Var("i")
    >>> c = IndexCheck(i + 1, 4, "H", 1)
    >>> print(c)
    check_index(i + 1, 4, H, 1)
    >>> c.dtype, c.buffer, c.dim
    (int32, 'H', 1)
    """

    __slots__ = ("index", "extent", "buffer", "dim")
    _fields = ("index", "extent")

    def __init__(self, index: Expr, extent: Any, buffer: str, dim: int):
        index = as_expr(index)
        extent = as_expr(extent)
        if not index.dtype.is_integer or not extent.dtype.is_integer or extent.dtype.is_vector:
            raise TypeError(f"IndexCheck needs an integer index and a scalar integer extent, got "
                            f"`{index}` ({index.dtype}) and `{extent}` ({extent.dtype})")
        _set_ic_index(self, index)
        _set_ic_extent(self, extent)
        _set_ic_buffer(self, str(buffer))
        _set_ic_dim(self, int(dim))
        _set_dtype(self, index.dtype)

    @classmethod
    def _rebuild(cls, vals, old):
        return IndexCheck(vals["index"], vals["extent"], old.buffer, old.dim)


_set_ic_index, _set_ic_extent, _set_ic_buffer, _set_ic_dim = _slot_setters(IndexCheck, "index", "extent",
                                                                           "buffer", "dim")


def _binop(cls, a, b) -> Expr:
    a, b = _unify(a, b)
    return cls(a, b)


def _logic_or_bits(logical: type, bitwise: str, a, b, self_first: bool) -> Expr:
    """``a op b`` for ``&`` / ``|`` / ``^``: the logical node ``logical`` when the expression
    operand is bool (a Python bool operand refused), the bit operation ``bitwise`` otherwise."""
    e = a if self_first else b
    if as_expr(e).dtype.is_bool:
        sym = BIT_SYMBOL[bitwise]
        if self_first:
            return _binop(logical, a, check_condition(b, f"the right operand of {sym}"))
        return _binop(logical, check_condition(a, f"the left operand of {sym}"), b)
    return _bits(bitwise, a, b)


BIT_SYMBOL = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^"}


def _bits(name: str, a, b) -> Expr:
    from . import bitops
    return getattr(bitops, name)(a, b)


def floordiv(a, b) -> Expr:
    """Floor division: ``floordiv(-5, 2) == -3``."""
    return _binop(FloorDiv, a, b)


def floormod(a, b) -> Expr:
    """Floor remainder: ``floormod(-5, 2) == 1``."""
    return _binop(FloorMod, a, b)


def truncdiv(a, b) -> Expr:
    """C division: ``truncdiv(-5, 2) == -2``."""
    return _binop(Div, a, b)


def truncmod(a, b) -> Expr:
    """C remainder: ``truncmod(-5, 2) == -1``."""
    return _binop(Mod, a, b)


def if_then_else(cond, t, f) -> Expr:
    """``cond ? t : f`` evaluating only the taken branch."""
    return IfThenElse(cond, t, f)


def logical_and(a, b) -> Expr:
    """``a && b`` (a Python bool operand is refused)."""
    return _binop(And, check_condition(a, "logical_and's first operand"),
                  check_condition(b, "logical_and's second operand"))


def logical_or(a, b) -> Expr:
    """``a || b`` (a Python bool operand is refused)."""
    return _binop(Or, check_condition(a, "logical_or's first operand"),
                  check_condition(b, "logical_or's second operand"))


def logical_not(a) -> Expr:
    """``!a`` (a Python bool operand is refused)."""
    return Not(check_condition(a, "logical_not's operand"))


# ------------------------------------------------------------------------------------
# traversal
# ------------------------------------------------------------------------------------
class ExprVisitor(Functor):
    """Visit every node; override ``visit_<ClassName>`` and call ``generic`` to recurse
    (dispatch through ``te.functor.Functor``)."""

    def generic(self, e: Expr):
        for c in e.children():
            self.visit(c)


class ExprMutator(Functor):
    """Rebuild an expression bottom-up; override ``visit_<ClassName>``.

    Unchanged subtrees are returned as the same objects.
    """

    def generic(self, e: Expr) -> Expr:
        changes = {}
        for f in e._fields:
            v = getattr(e, f)
            if isinstance(v, Expr):
                nv = self.visit(v)
                if nv is not v:
                    changes[f] = nv
            elif isinstance(v, tuple) and any(isinstance(x, Expr) for x in v):
                nv = tuple(self.visit(x) if isinstance(x, Expr) else x for x in v)
                if any(a is not b for a, b in zip(nv, v)):
                    changes[f] = nv
        return e.replace(**changes) if changes else e


def walk(e: Expr, fn: Callable[[Expr], None]) -> None:
    """Call ``fn`` on every node of ``e`` (pre-order)."""
    stack = [e]
    while stack:
        x = stack.pop()
        fn(x)
        stack.extend(reversed(x.children()))


class _Substituter(ExprMutator):
    def __init__(self, mapping):
        self.mapping = mapping

    def visit_Var(self, e):
        return self.mapping.get(e, e)


def substitute(e: Expr, mapping: dict) -> Expr:
    """Replace variables: ``substitute(i + 1, {i: j * 2})`` is ``j * 2 + 1``."""
    if not mapping:
        return e
    return _Substituter({k: as_expr(v, k) for k, v in mapping.items()}).visit(e)


def structural_key(e: Any, *, vars_by_identity: bool = False):
    """A hashable key equal for structurally equal expressions: variables compared by name
    and dtype, or by identity with ``vars_by_identity`` (buffers of loads by name either way;
    non-expressions are their own key). ``te.queries`` re-exports it.

    >>> i, j = Var("i"), Var("i")
    >>> structural_key(i + 1) == structural_key(j + 1)
    True
    >>> structural_key(i + 1, vars_by_identity=True) == structural_key(j + 1, vars_by_identity=True)
    False
    """
    return _key_by_id(e) if vars_by_identity else _key_by_name(e)


def _key_by_name(e: Any):
    return _key(e, lambda v: v.name)


def _key_by_id(e: Any):
    return _key(e, id)


def _key(e: Any, var_key):
    """The structural key of ``e``, a variable standing for ``var_key(var)``."""
    if isinstance(e, Var):
        return ("Var", var_key(e), e.dtype.name)
    if isinstance(e, (IntImm, FloatImm)):
        return (type(e).__name__, e.value, e.dtype.name)
    if isinstance(e, Load):
        return ("Load", e.buffer.name, tuple(_key(i, var_key) for i in e.indices))
    if isinstance(e, Call):
        return ("Call", e.name, e.dtype.name, tuple(_key(a, var_key) for a in e.args))
    if isinstance(e, IndexCheck):
        return ("IndexCheck", e.buffer, e.dim, _key(e.index, var_key), _key(e.extent, var_key))
    if isinstance(e, Expr):
        extra = tuple(getattr(e, s) for s in ("lanes", "lane") if hasattr(e, s))
        return (type(e).__name__, e.dtype.name, extra, tuple(_key(c, var_key) for c in e.children()))
    return e


def structural_equal(a: Expr, b: Expr) -> bool:
    """True when ``a`` and ``b`` have the same structure (vars compared by name)."""
    return structural_key(a) == structural_key(b)
