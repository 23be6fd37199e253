"""The stable, readable C-like text of a loop nest (``print(nest)``).

>>> from te import Buffer, Var
>>> from loopnest.stmt import For, Store, Block
>>> A = Buffer("A", (4,), "int32"); i = Var("i")
>>> print(stmt_to_str(For(i, 0, 4, Block([Store(A, (i,), i * 2)]))))
for (int i = 0; i < 4; i++) {
  A[i] = i * 2;
}
"""
from __future__ import annotations

from te.printer import expr_to_str

from .stmt import Allocate, Block, Cond, For, ForKind, Free, Let, Stmt, Store

_C_TYPES = {"int32": "int", "int64": "int64_t"}
_KIND_PREFIX = {ForKind.SERIAL: "", ForKind.PARALLEL: "parallel ", ForKind.VECTORIZED: "vectorized ",
                ForKind.UNROLLED: "unrolled ", ForKind.GPU_BLOCK: "gpu_block.{axis} ",
                ForKind.GPU_THREAD: "gpu_thread.{axis} "}
_AXES = "xyz"


def _lines(s: Stmt, ind: str, out: list[str]) -> None:
    if isinstance(s, Block):
        for x in s.stmts:
            _lines(x, ind, out)
    elif isinstance(s, For):
        v = s.var.name
        ctype = _C_TYPES.get(s.var.dtype.name, s.var.dtype.name)
        prefix = _KIND_PREFIX[s.kind].format(axis=_AXES[s.axis] if s.axis is not None else "?")
        out.append(f"{ind}{prefix}for ({ctype} {v} = {expr_to_str(s.start)}; {v} < {expr_to_str(s.stop)}; {v}++) {{")
        _lines(s.body, ind + "  ", out)
        out.append(f"{ind}}}")
    elif isinstance(s, Store):
        idx = ", ".join(expr_to_str(i) for i in s.indices)
        out.append(f"{ind}{s.buffer.name}[{idx}] = {expr_to_str(s.value)};")
    elif isinstance(s, Cond):
        out.append(f"{ind}if ({expr_to_str(s.cond)}) {{")
        _lines(s.then, ind + "  ", out)
        if s.otherwise is not None and s.otherwise.stmts:
            out.append(f"{ind}}} else {{")
            _lines(s.otherwise, ind + "  ", out)
        out.append(f"{ind}}}")
    elif isinstance(s, Let):
        ctype = _C_TYPES.get(s.var.dtype.name, s.var.dtype.name)
        out.append(f"{ind}{{ {ctype} {s.var.name} = {expr_to_str(s.value)};")
        _lines(s.body, ind + "  ", out)
        out.append(f"{ind}}}")
    elif isinstance(s, Allocate):
        dims = ", ".join(expr_to_str(d) for d in s.buffer.dims)
        scope = "" if s.scope == "global" else f" /* {s.scope} */"
        out.append(f"{ind}{s.buffer.dtype.name} {s.buffer.name}[{dims}]; // alloc{scope}")
    elif isinstance(s, Free):
        out.append(f"{ind}free({s.buffer.name});")
    else:
        out.append(f"{ind}<{type(s).__name__}>")


def stmt_to_str(s: Stmt) -> str:
    """C-like text of a statement tree; two-space indentation, one statement per line."""
    out: list[str] = []
    _lines(s, "", out)
    return "\n".join(out)
