"""Catch a known LLVM miscompilation of AVX-512 code before the code runs.

LLVM 22's X86 EVEX compression pass rewrites ``VPMOV{B,D,Q}2M`` followed by ``KMOV`` into
the VEX-only ``VPMOVMSKB`` / ``VMOVMSKPS`` / ``VMOVMSKPD`` without checking that the vector
operand is one of xmm0-15 / ymm0-15. Where the register allocator put it in xmm16-31 (which
AVX512VL allows, under register pressure), the encoder drops the register number's high bit
and the instruction reads another register: wrong values, no error. The random tester found it
as a vectorised floormod whose lane signs were read from the wrong register (seed 45, case 565).

Turning the responsible features off is not an option: LLVM 22 cannot select code for some
combinations (AVX512VL without AVX512DQ, say: ``Cannot select`` aborts the process). So
``jit.compile_ir`` checks instead. Where the optimised IR has what can become ``VPMOV*2M`` (a
signed vector compare or a truncation to a vector of ``i1``: ``at_risk``), it prints the
assembly as well and looks for a VEX-only instruction naming a high register
(``vex_with_high_registers``); if it finds one, it generates the kernel again without AVX-512
(``FALLBACK_FEATURES``), which has no such registers. Kernels without the pattern cost nothing
more; the others about one more code generation. The random tester checks that ``at_risk``
misses no kernel with the defect (``escaped``).
"""
from __future__ import annotations

import re

import llvmlite.binding as llvm

__all__ = ["CHECK_MAX_LINES", "FALLBACK_FEATURES", "at_risk", "escaped", "vex_with_high_registers"]

# LLVM versions whose EVEX compression has the defect
AFFECTED_LLVM = frozenset({22})

# appended to the CPU's features for the second generation: no AVX-512 at all (a "-name"
# also turns off every feature that builds on it)
FALLBACK_FEATURES = "-avx512f"

#: an optimised module longer than this (lines) that is at risk is compiled without AVX-512 at
#: once: printing its assembly to check it would double a code generation that already takes
#: long (30 s for a 7,000-line reduction of a 378-term sum, random tester seed 51, case 278)
CHECK_MAX_LINES = 4000

# instructions with a VEX encoding and no EVEX one: they can only name vector registers 0-15
_VEX_ONLY = re.compile(r"^\s*v(movmskp[sd]|pmovmskb|blendvp[sd]|pblendvb|p?maskmov\w*|testp[sd]|ptest|"
                       r"p?h(add|sub)\w*|dpp[sd]|mpsadbw|lddqu)\b(?P<operands>.*)$", re.MULTILINE)
_HIGH_REGISTER = re.compile(r"%[xy]mm(1[6-9]|2\d|3[01])\b")

# IR that instruction selection can turn into VPMOV*2M: a signed compare of integer vectors
# (the sign test x < 0 among them) or a truncation of an integer vector to i1 lanes
_MASK_FROM_SIGN = re.compile(r"= (icmp s(lt|gt|le|ge) <\d+ x i\d+>|trunc <\d+ x i\d+> .* to <\d+ x i1>)")
# any vector of i1 computed at run time: what the random tester checks (``escaped``)
_ANY_VECTOR_MASK = re.compile(r"= ([if]cmp \w+ <\d+ x |trunc <\d+ x i\d+> .* to <\d+ x i1>)")


def at_risk(triple: str, features: str, optimized_ir: str) -> bool:
    """Whether code generated from ``optimized_ir`` for an x86-64 CPU with ``features`` (LLVM's
    ``+name,-name`` list) may have the defect, so its assembly must be checked.

    >>> at_risk("x86_64-unknown-linux-gnu", "+avx2", "%c = icmp slt <4 x i32> %x, zeroinitializer")
    False
    """
    return (llvm.llvm_version_info[0] in AFFECTED_LLVM and triple.startswith("x86_64")
            and "+avx512vl" in features.split(",") and _MASK_FROM_SIGN.search(optimized_ir) is not None)


def vex_with_high_registers(assembly: str) -> list[str]:
    """The lines of ``assembly`` (AT&T syntax, as LLVM prints it) where a VEX-only instruction
    names xmm16-31 or ymm16-31: code that cannot be encoded, which LLVM's encoder gets wrong
    without an error.

    >>> vex_with_high_registers("\\tvmovmskps\\t%xmm17, %r13d\\n\\tvmovmskps\\t%xmm7, %eax\\n")
    ['vmovmskps\\t%xmm17, %r13d']
    """
    return [m.group(0).strip() for m in _VEX_ONLY.finditer(assembly) if _HIGH_REGISTER.search(m.group("operands"))]


def escaped(optimized_ir: str) -> list[str]:
    """For the random tester: the defect's lines in the host's code for the optimised IR of a
    kernel that ``at_risk`` did not flag (so ``compile_ir`` did not check its code); empty
    where there are none, where ``at_risk`` flags the IR, or where the host cannot have the
    defect. Prints the assembly only for IR with a run-time vector of ``i1``.

    >>> escaped("define void @f() {\\n  ret void\\n}\\n")
    []
    """
    from . import jit
    h = jit.host_info()
    flagged_if_compared = at_risk(h["triple"], h["features"], "= icmp slt <2 x i32>")
    if (not flagged_if_compared or at_risk(h["triple"], h["features"], optimized_ir)
            or not _ANY_VECTOR_MASK.search(optimized_ir)):
        return []
    mod = llvm.parse_assembly(optimized_ir)
    try:
        return vex_with_high_registers(jit._shared_tm(3).emit_assembly(mod))
    finally:
        mod.close()
