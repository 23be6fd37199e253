"""Declarations in an LLVM module: external functions and intrinsics, external ``i32``
globals, and ``!llvm.loop`` metadata.

Each function or global is declared once per module; asking again returns the first one.

>>> from llvmlite import ir
>>> from codegen.llvm.types import F32
>>> m = ir.Module()
>>> intrinsic(m, "llvm.sqrt", ir.VectorType(F32, 4)).name
'llvm.sqrt.v4f32'
>>> declare(m, "free", ir.VoidType(), [ir.PointerType()]) is declare(m, "free", ir.VoidType(), [])
True
"""
from __future__ import annotations

from typing import Sequence

from llvmlite import ir

from .types import I32, intrinsic_suffix

__all__ = ["declare", "intrinsic", "external_i32", "loop_md"]


def declare(module: ir.Module, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
    """The function ``name`` of ``module``, declared as ``ret name(args...)`` if it is not yet there."""
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, list(args)), name=name)
    return fn


def intrinsic(module: ir.Module, base: str, t: ir.Type, nargs: int = 1, ret: ir.Type | None = None,
              overloads: Sequence[ir.Type] | None = None) -> ir.Function:
    """The LLVM intrinsic ``base`` overloaded on ``overloads`` (default ``[t]``), taking ``nargs``
    arguments of type ``t`` and returning ``ret`` (default ``t``)."""
    ovl = overloads if overloads is not None else [t]
    name = ".".join([base] + [intrinsic_suffix(x) for x in ovl])
    return declare(module, name, ret if ret is not None else t, [t] * nargs)


def external_i32(module: ir.Module, name: str) -> ir.GlobalVariable:
    """The external ``i32`` global ``name`` (defined by the runtime, see ``runtime``).

    >>> m = ir.Module(); str(external_i32(m, "te_llvm_num_threads")).strip()
    '@"te_llvm_num_threads" = external global i32'
    """
    g = module.globals.get(name)
    if g is None:
        g = ir.GlobalVariable(module, I32, name)
        g.linkage = "external"
    return g


def loop_md(module: ir.Module, *props) -> ir.MDValue:
    """A self-referential ``!llvm.loop`` node with ``(name, constants...)`` properties.

    >>> m = ir.Module(); _ = loop_md(m, ("llvm.loop.unroll.disable",)); len(m.metadata)
    2
    """
    ops = [module.add_metadata([ir.MetaDataString(module, p[0])] + list(p[1:])) for p in props]
    node = ir.values.MDValue(module, ops, name=str(len(module.metadata)))
    node.operands = (node,) + tuple(node.operands)
    return node
