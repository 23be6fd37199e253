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

from typing import TYPE_CHECKING

from te.functor import Functor
from te.printer import expr_to_str

from .kinds import ForKind

if TYPE_CHECKING:   # the statement module imports this one (Stmt.__str__); dispatch is by class name
    from .stmt import Allocate, Block, Cond, For, Free, Let, Stmt, Store

_C_TYPES = {"int32": "int", "int64": "int64_t"}
_KIND_PREFIX = {ForKind.SERIAL: "", ForKind.PARALLEL: "parallel ", ForKind.VECTORIZED: "vectorized ",
                ForKind.UNROLLED: "unrolled ", ForKind.GPU_BLOCK: "gpu_block.{axis} ",
                ForKind.GPU_THREAD: "gpu_thread.{axis} "}
_AXES = "xyz"


class _Lines(Functor):
    """``visit(s, ind)`` appends the lines of ``s``, indented by ``ind``, to ``self.out``."""

    def __init__(self):
        self.out: list[str] = []

    def visit_Block(self, s: Block, ind: str):
        for x in s.stmts:
            self.visit(x, ind)

    def visit_For(self, s: For, ind: str):
        v = s.var.name
        ctype = _C_TYPES.get(s.var.dtype.name, s.var.dtype.name)
        prefix = _KIND_PREFIX[s.kind].format(axis=_AXES[s.axis] if s.axis is not None else "?")
        self.out.append(f"{ind}{prefix}for ({ctype} {v} = {expr_to_str(s.start)}; {v} < {expr_to_str(s.stop)}; "
                        f"{v}++) {{")
        self.visit(s.body, ind + "  ")
        self.out.append(f"{ind}}}")

    def visit_Store(self, s: Store, ind: str):
        idx = ", ".join(expr_to_str(i) for i in s.indices)
        self.out.append(f"{ind}{s.buffer.name}[{idx}] = {expr_to_str(s.value)};")

    def visit_Prefetch(self, s, ind: str):
        idx = ", ".join(expr_to_str(i) for i in s.indices)
        self.out.append(f"{ind}prefetch{' for write' if s.write else ''} {s.buffer.name}[{idx}];")

    def visit_Cond(self, s: Cond, ind: str):
        self.out.append(f"{ind}if ({expr_to_str(s.cond)}) {{")
        self.visit(s.then, ind + "  ")
        if s.otherwise is not None and s.otherwise.stmts:
            self.out.append(f"{ind}}} else {{")
            self.visit(s.otherwise, ind + "  ")
        self.out.append(f"{ind}}}")

    def visit_LetStmt(self, s: Let, ind: str):
        ctype = _C_TYPES.get(s.var.dtype.name, s.var.dtype.name)
        self.out.append(f"{ind}{{ {ctype} {s.var.name} = {expr_to_str(s.value)};")
        self.visit(s.body, ind + "  ")
        self.out.append(f"{ind}}}")

    def visit_Allocate(self, s: Allocate, ind: str):
        dims = ", ".join(expr_to_str(d) for d in s.buffer.dims)
        scope = "" if s.scope == "global" else f" /* {s.scope} */"
        self.out.append(f"{ind}{s.buffer.dtype.name} {s.buffer.name}[{dims}]; // alloc{scope}")

    def visit_Free(self, s: Free, ind: str):
        self.out.append(f"{ind}free({s.buffer.name});")

    def visit_ExternCall(self, s, ind: str):
        outs = ", ".join(b.name for b in s.outputs)
        self.out.append(f"{ind}{outs} = extern {s.func.name}({', '.join(b.name for b in s.inputs)});")

    def generic(self, s: Stmt, ind: str):
        self.out.append(f"{ind}<{type(s).__name__}>")


def stmt_to_str(s: Stmt) -> str:
    """C-like text of a statement tree; two-space indentation, one statement per line."""
    lines = _Lines()
    lines.visit(s, "")
    return "\n".join(lines.out)
