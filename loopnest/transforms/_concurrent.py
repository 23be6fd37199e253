"""A check shared by transforms that add accesses inside parallel or GPU loops."""
from __future__ import annotations

from te.tensor import Buffer

from ..errors import ScheduleError
from ..kinds import ForKind
from ..lazy_analysis import dependence_analysis, legality_checks
from ..queries import stmt_writes

__all__ = ["refuse_sharing_by_concurrent_loops"]


def refuse_sharing_by_concurrent_loops(nest, buf: Buffer, what: str, chain: list, hint: str) -> None:
    """After a transform put new writes of ``buf`` inside the loops ``chain`` (For statements,
    outermost first): raise ScheduleError (``what`` ... ``hint``) when the iterations of a
    parallel or GPU loop among them now share elements of ``buf`` that they write, unless
    ``buf`` is an intermediate each iteration may keep to itself (``privatizable``).

    Two cases the random tester found: ``cache_accesses`` copying a region that holds
    elements the body does not access (seed 68, case 363), and ``compute_at`` of a tensor
    whose reads the analysis cannot show covered by the iteration's own writes (seed 72,
    case 848): the concurrent iterations then shared one buffer.
    """
    for g in chain:
        if g.kind not in ForKind.CONCURRENT:
            continue
        loop = nest.loop(g.var)
        body = loop.stmt.body
        if not stmt_writes(body, buf):          # read only: the iterations may share it
            continue
        unshown = legality_checks().unshown_buffers(loop.stmt, loop.var)
        if unshown is not None and not any(b is buf for b in unshown):
            continue                            # its accesses show no dependence carried by the loop
        if not dependence_analysis().buffers_carried_by(nest, loop, buffers=[buf]):
            continue
        if buf in nest.intermediates and legality_checks().privatizable(nest, buf, loop):
            continue
        raise ScheduleError(f"{what} would make the iterations of the {loop.stmt.kind} loop {loop.name} share "
                            f"elements of {buf.name} that they write; {hint}")
