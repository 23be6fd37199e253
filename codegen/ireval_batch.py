"""Batching for IREval: run a whole loop nest at once on numpy arrays when that provably
gives the serial result.

The interpreter (``codegen.ireval``) compiles every statement into a closure over a frame
whose values may be numpy scalars (one iteration) or arrays (one value per iteration of a
batch), so the same closures run serially or batched. For every loop it compiles it asks
``plan_batch`` for a closure that batches the perfect nest of loops from that loop down,
``chunk`` iterations (``build_ireval``'s option, 65536 by default) at a time. A nest is
batched when one of these holds, otherwise it runs serially:

* map batches: every access (load or store) to a buffer written in the nest touches, in each
  iteration, the same element, and different iterations touch different elements (checked
  on the actual index arrays of each chunk before anything is written; a chunk that fails
  the check, or whose index computation raises an ``ArithmeticError``, runs serially). The
  indices of those accesses must not read memory, nor depend on loops inside the body.
  Loops inside the batched body (the ``k`` loop of a matmul batched over ``i, j``) run
  serially, each step on all batched iterations, when the elements they write do not depend
  on their own loop variables; a cost estimate picks this or batching the inner loops alone;
* reduction batches: a body with no loops of its own that is ``C[e] = C[e] op x`` (op in
  + - * min max on native scalar dtypes, the accumulator on either side of + and *), possibly
  under guards without an else branch, with ``e`` invariant in the loops and neither ``x``
  nor the guards reading ``C``; it is accumulated with ``ufunc.accumulate``, which is exactly
  the serial left-to-right order (bit-identical float sums).

A nest is never batched when the bounds of one of its loops depend on an outer loop of the
nest or read memory, when its body allocates, or when the bounds of a loop inside the body
depend on the batched loops or on values bound in the body (they are evaluated once for the
whole batch). A call runs it serially when its arguments share memory, when the nest runs
inside a batch (the serial inner loops of a map batch), when the nest has a single
iteration, or when the loops below the outermost one have more than 2**22 iterations
together (``_MAX_INNER``). ``batch=False`` turns batching off (every loop serial).

>>> import numpy as np
>>> from te import Buffer, Reduce, Sum, float32
>>> from loopnest import LoopNest
>>> from codegen import build
>>> A = Buffer("A", (1000,), float32)
>>> S = Reduce("S", (1,), Sum(), lambda i, k: A[k], (1000,))
>>> a = np.random.default_rng(0).random(1000, dtype=np.float32)
>>> batched, serial = np.empty(1, np.float32), np.empty(1, np.float32)
>>> build(LoopNest([S]), [A, S], target="ireval")(a, batched)
>>> build(LoopNest([S]), [A, S], target="ireval", batch=False)(a, serial)
>>> batched.tobytes() == serial.tobytes()        # the same float sum, bit for bit
True
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from loopnest.stmt import Allocate, Block, Cond, For, Free, LetStmt, Stmt, Store, iter_stmts
from te import expr as E
from te.functor import Functor
from te.queries import free_vars, has_load, loads as loads_in, structural_key, uses_var

from .ireval_common import _ALLOW, Fn, _flat_idx, _oob, _restrict, _unallocated
from .kernel import BuildError

if TYPE_CHECKING:
    from .ireval import _Compiler

__all__ = ["plan_batch"]

_MAX_INNER = 1 << 22      # a batch whose inner loops alone exceed this runs the outer loop serially
_REDUCE_UFUNC = {E.Add: np.add, E.Mul: np.multiply, E.Min: np.minimum, E.Max: np.maximum,
                 E.Sub: np.subtract}


def _loads_named(e: E.Expr, name: str) -> bool:
    """Whether ``e`` loads from a buffer named ``name``: IREval gives a buffer its frame slot
    by name, so buffers of one name are one memory (``te.queries.has_load`` compares by identity).

    >>> from te import Buffer
    >>> A, A2 = Buffer("A", (8,), "float32"), Buffer("A", (8,), "float32")
    >>> _loads_named(A2[0] + 1.0, "A"), _loads_named(A2[0] + 1.0, "B")
    (True, False)
    """
    return any(ld.buffer.name == name for ld in loads_in(e))


def _uses_any(exprs, vars_) -> bool:
    """Whether one of the variables ``vars_`` occurs in ``exprs`` (``te.queries.uses_var``)."""
    return any(uses_var(exprs, v) for v in vars_)


def _chain(s: For):
    """The perfect nest of loops from ``s`` down, and the loops inside its innermost body.

    Returns ``(loops, inner)`` or None when the nest cannot be batched: the bounds of a loop
    of the nest depend on an outer loop of the nest or read memory, the body allocates, or
    the bounds of a loop inside the body depend on the batched loops or on values bound in
    the body (they are evaluated once for the whole batch).
    """
    loops = [s]
    cur = s
    while len(cur.body.stmts) == 1 and isinstance(cur.body.stmts[0], For):
        nxt = cur.body.stmts[0]
        bounds = (nxt.start, nxt.stop)
        if _uses_any(bounds, [f.var for f in loops]) or has_load(bounds):
            return None
        loops.append(nxt)
        cur = nxt
    batched = [f.var for f in loops]
    inner = []
    for x in iter_stmts(cur.body):
        if isinstance(x, (Allocate, Free)):
            return None
        if isinstance(x, LetStmt):
            batched.append(x.var)
    for x in iter_stmts(cur.body):
        if isinstance(x, For):
            bounds = (x.start, x.stop)
            if _uses_any(bounds, batched) or has_load(bounds):
                return None
            inner.append(x)
    return loops, inner


class _Accesses(Functor):
    """``visit(body, {})`` collects the accesses of a loop body: ``stores`` (the Store and its
    flat index) and ``loads`` (the buffer name and the flat index), indices with the
    let-bound variables in scope substituted (the second argument maps them to their
    values), and ``loop_vars``, the variables of the loops inside the body. A statement that
    a batch cannot hold (Allocate, Free) is a BuildError.

    >>> from te import Buffer, Var
    >>> from loopnest.stmt import Block, LetStmt, Store
    >>> A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "float32")
    >>> i, t = Var("i"), Var("t")
    >>> acc = _Accesses()
    >>> acc.visit(Block([LetStmt(t, i + 1, Block([Store(B, (t,), A[t * 2])]))]), {})
    >>> [(b, str(ix)) for b, ix in acc.loads], [(s.buffer.name, str(ix)) for s, ix in acc.stores]
    ([('A', '(i + 1) * 2')], [('B', 'i + 1')])
    """

    def __init__(self):
        self.stores: list[tuple[Store, E.Expr]] = []
        self.loads: list[tuple[str, E.Expr]] = []
        self.loop_vars: list[E.Var] = []

    # -- expressions --------------------------------------------------------------------
    def visit_Let(self, e: E.Let, m: dict) -> None:
        self.visit(e.value, m)
        self.visit(e.body, _bind(m, e.var, e.value))

    def visit_Load(self, e: E.Load, m: dict) -> None:
        self.loads.append((e.buffer.name, _sub(_flat_idx(e.indices), m)))
        for c in e.children():
            self.visit(c, m)

    def generic(self, node, m: dict) -> None:
        if isinstance(node, Stmt):
            raise BuildError(f"unexpected {type(node).__name__} in a loop body")
        for c in node.children():
            self.visit(c, m)

    # -- statements ---------------------------------------------------------------------
    def visit_Block(self, s: Block, m: dict) -> None:
        for x in s.stmts:
            self.visit(x, m)

    def visit_Store(self, s: Store, m: dict) -> None:
        for e in list(s.indices) + [s.value]:
            self.visit(e, m)
        self.stores.append((s, _sub(_flat_idx(s.indices), m)))

    def visit_Prefetch(self, s, m: dict) -> None:
        for e in s.indices:      # a hint: it reads and writes no value
            self.visit(e, m)

    def visit_Cond(self, s: Cond, m: dict) -> None:
        self.visit(s.cond, m)
        self.visit(s.then, m)
        if s.otherwise is not None:
            self.visit(s.otherwise, m)

    def visit_LetStmt(self, s: LetStmt, m: dict) -> None:
        self.visit(s.value, m)
        self.visit(s.body, _bind(m, s.var, s.value))

    def visit_For(self, s: For, m: dict) -> None:
        self.loop_vars.append(s.var)
        self.visit(s.body, m)


def _sub(e: E.Expr, m: dict) -> E.Expr:
    return E.substitute(e, m) if m else e


def _bind(m: dict, var: E.Var, value: E.Expr) -> dict:
    """``m`` and ``var`` bound to ``value`` with the bindings of ``m`` substituted."""
    m2 = dict(m)
    m2[var] = _sub(value, m)
    return m2


def _work_estimate(c: _Compiler, inner: list[For]):
    """Bound closures of the perfect nests of the top-level loops in a body: their trip counts
    estimate the serial work of one batched iteration."""
    inner_vars = [f.var for f in inner]
    nested = {id(x) for f in inner for x in iter_stmts(f.body) if isinstance(x, For)}
    nests = []
    for f in inner:
        if id(f) in nested:
            continue
        bounds = []
        cur = f
        while True:
            if not _uses_any((cur.start, cur.stop), inner_vars):
                bounds.append((c.expr(cur.start), c.expr(cur.stop)))
            if len(cur.body.stmts) != 1 or not isinstance(cur.body.stmts[0], For):
                break
            cur = cur.body.stmts[0]
        nests.append(bounds)
    tops = [f for f in inner if id(f) not in nested]

    def estimate(fr) -> int:
        total = 0
        for bounds in nests:
            p = 1
            for fa, fb in bounds:
                p *= max(0, int(fb(fr)) - int(fa(fr)))
            total += p
        return total
    return estimate, tops


def _set_chain_vars(fr, slots, dtypes, o0, o1, inner_grids, n_inner):
    fr[slots[0]] = np.repeat(np.arange(o0, o1, dtype=dtypes[0]), n_inner)
    reps = o1 - o0
    for s, g in zip(slots[1:], inner_grids):
        fr[s] = np.tile(g, reps)


def _inner_grids(bounds, dtypes):
    """Flattened row-major index arrays of the inner loops of a chain."""
    axes = [np.arange(a, b, dtype=dt) for (a, b), dt in zip(bounds, dtypes)]
    if not axes:
        return []
    mesh = np.meshgrid(*axes, indexing="ij")
    return [m.reshape(-1) for m in mesh]


def _injective(idx: np.ndarray, n: int) -> bool:
    """Are the in-bounds values of ``idx`` pairwise distinct?"""
    flat = idx.reshape(-1)
    flat = flat[(flat >= 0) & (flat < n)]
    if flat.size < 2:
        return True
    d = np.diff(flat.astype(np.int64))
    if (d > 0).all() or (d < 0).all():
        return True
    if n <= 8 * flat.size:
        seen = np.zeros(n, np.bool_)
        seen[flat] = True
        return int(seen.sum()) == flat.size
    return np.unique(flat).size == flat.size


def plan_batch(c: _Compiler, s: For, serial_range) -> Fn | None:
    """The batched closure of loop ``s`` (compiled with ``c``), or None when its nest is
    never batched (see the module docstring for when it is).

    ``s.var`` is already bound in ``c``; ``serial_range(fr, a, b)`` runs iterations
    ``a <= s.var < b`` serially, which the closure falls back to where a batch would not
    give the serial result. The closure has ``is_plan = True``.

    >>> from te import Buffer, Var, float32, int32
    >>> from loopnest.stmt import For, Store
    >>> from codegen.ireval import _Compiler
    >>> A, B, P = Buffer("A", (8,), float32), Buffer("B", (8,), float32), Buffer("P", (8,), int32)
    >>> i = Var("i", int32)
    >>> c = _Compiler(batch=True, poison=False, chunk=1 << 16)
    >>> _ = c.bind_var(i)
    >>> plan_batch(c, For(i, 0, 8, Store(B, (i,), A[i] * 2.0)), None).is_plan     # a map
    True
    >>> print(plan_batch(c, For(i, 0, 8, Store(B, (P[i],), A[i])), None))  # B[P[i]]: index reads memory
    None
    """
    info = _chain(s)
    if info is None:
        return None
    loops, inner = info
    body = loops[-1].body
    for f in loops[1:]:
        c.bind_var(f.var)
    slots = [c.var_slots[id(f.var)] for f in loops]
    dtypes = [f.var.dtype.numpy for f in loops]
    fstart, fstop = c.expr(s.start), c.expr(s.stop)
    inner_bounds = [(c.expr(f.start), c.expr(f.stop)) for f in loops[1:]]
    acc = _Accesses()
    try:
        acc.visit(body, {})
    except BuildError:
        return None
    reduction = None if inner else _reduction_plan(c, body, [f.var for f in loops])
    estimate = None
    if reduction is not None:
        run_chunk, finish = reduction
        check = None
    else:
        check = _map_check(c, acc.stores, acc.loads, acc.loop_vars)
        if check is None:
            return None
        body_fn = c.stmt(body)
        finish = None
        if not inner:
            run_chunk = lambda fr, n, state: body_fn(fr)                # noqa: E731
        else:
            # the loops inside the body run serially, on all the batched iterations at once
            def run_chunk(fr, n, state):
                fr[_ALLOW] = False
                body_fn(fr)
                fr[_ALLOW] = True
            est, tops = _work_estimate(c, inner)
            if all(getattr(c.stmt(f), "is_plan", False) for f in tops):
                estimate = est       # the inner loops batch well alone: pick the cheaper way
    chunk = c.chunk

    def batched(fr):
        a0, b0 = int(fstart(fr)), int(fstop(fr))
        if b0 <= a0:
            return
        if not fr[_ALLOW]:
            return serial_range(fr, a0, b0)
        bounds = [(int(fa(fr)), int(fb(fr))) for fa, fb in inner_bounds]
        n_inner = 1
        for a, b in bounds:
            n_inner *= max(0, b - a)
        if n_inner == 0:
            return
        total = (b0 - a0) * n_inner
        if total <= 1 or n_inner > _MAX_INNER:
            return serial_range(fr, a0, b0)
        if estimate is not None and 4 * total < estimate(fr):
            return serial_range(fr, a0, b0)
        grids = _inner_grids(bounds, dtypes[1:])
        step = max(1, chunk // n_inner)
        state: dict = {}
        for o0 in range(a0, b0, step):
            o1 = min(o0 + step, b0)
            _set_chain_vars(fr, slots, dtypes, o0, o1, grids, n_inner)
            n = (o1 - o0) * n_inner
            if check is None or check(fr, n):
                run_chunk(fr, n, state)
            else:
                serial_range(fr, o0, o1)
        if finish is not None:
            finish(fr, state)
    batched.is_plan = True
    return batched


def _map_check(c: _Compiler, stores, loads, inner_vars: list):
    """The run-time legality check of a map batch, or None when it can never be legal."""
    by_buf: dict[str, list] = {}
    for st, idx in stores:
        by_buf.setdefault(st.buffer.name, []).append((st, idx))
    checks = []
    for name, sts in by_buf.items():
        st, sidx = sts[0]
        lidx = [ix for b, ix in loads if b == name] + [ix for _, ix in sts[1:]]
        if any(has_load(ix) or _uses_any(ix, inner_vars) for ix in [sidx] + lidx):
            return None
        lanes = sidx.dtype.lanes
        if any(ix.dtype.lanes != lanes for ix in lidx):
            return None
        same = structural_key(sidx, vars_by_identity=True)
        fl = [c.expr(ix) for ix in lidx                        # identical forms need no check
              if structural_key(ix, vars_by_identity=True) != same]
        checks.append((c.buf_slot(st.buffer), c.expr(sidx), fl, lanes))

    def check(fr, n):
        try:
            for bs, fs, fl, lanes in checks:
                shape = (n, lanes) if lanes > 1 else (n,)
                si = np.broadcast_to(fs(fr), shape)
                arr = fr[bs]
                if arr is None or not _injective(si, arr.shape[0]):
                    return False
                for f in fl:
                    if not np.array_equal(np.broadcast_to(f(fr), shape), si):
                        return False
        except ArithmeticError:     # e.g. a division by zero that a guard would have avoided
            return False
        return True
    return check


def _reduction_plan(c: _Compiler, body: Block, chain_vars: list):
    """``C[e] = C[e] op x(k)`` under then-only guards, ``e`` invariant in the batched loops."""
    conds = []
    node = body
    while True:
        if len(node.stmts) != 1:
            return None
        s = node.stmts[0]
        if isinstance(s, Cond) and (s.otherwise is None or not s.otherwise.stmts):
            conds.append(s.cond)
            node = s.then
            continue
        if not isinstance(s, Store):
            return None
        break
    st = s
    dt = st.buffer.dtype
    v = st.value
    op = type(v)
    if op not in _REDUCE_UFUNC or dt.lanes != 1 or v.dtype.lanes != 1 or dt.is_bool or dt.is_lowp_float:
        return None
    if op in (E.Min, E.Max) and dt.is_float:    # numpy's ufuncs order signed zeros otherwise than IEEE
        return None
    sidx = _flat_idx(st.indices)
    if has_load(sidx) or _uses_any(sidx, chain_vars):
        return None
    name = st.buffer.name
    skey = structural_key(sidx, vars_by_identity=True)

    def is_acc(x):
        return (isinstance(x, E.Load) and x.buffer.name == name
                and structural_key(_flat_idx(x.indices), vars_by_identity=True) == skey)
    if is_acc(v.a):
        x = v.b
    elif is_acc(v.b) and op in (E.Add, E.Mul):       # exactly commutative in IEEE arithmetic
        x = v.a
    else:
        return None
    if _loads_named(x, name) or any(_loads_named(cd, name) for cd in conds):
        return None
    ufunc = _REDUCE_UFUNC[op]
    npdt = dt.numpy
    bs = c.buf_slot(st.buffer)
    fidx = c.expr(sidx)
    fx = c.expr(x)
    fconds = []
    for k, cd in enumerate(conds):
        rest = conds[k + 1:] + [x]
        fconds.append((c.expr(cd), c.restrict_slots(free_vars(rest))))
    where = f"{name}[{sidx}]"

    def run_chunk(fr, n, state):
        sub = fr
        for fc, slots in fconds:
            cv = fc(sub)
            if type(cv) is np.ndarray and cv.ndim:
                if not cv.all():
                    sub = _restrict(sub, cv, slots)
                    n = int(cv.sum())
            elif not cv:
                n = 0
            if n == 0:
                return
        xs = fx(sub)
        xs = np.broadcast_to(np.asarray(xs, npdt), (n,))
        if "acc" not in state:
            arr = fr[bs]
            if arr is None:
                raise _unallocated(name)
            i = fidx(fr)
            if i < 0 or i >= arr.shape[0]:
                raise _oob("load from", name, i, arr.shape[0], where)
            state["arr"], state["i"], state["acc"] = arr, i, arr[i]
        seq = np.empty(n + 1, npdt)
        seq[0] = state["acc"]
        seq[1:] = xs
        state["acc"] = ufunc.accumulate(seq, dtype=npdt)[-1]

    def finish(fr, state):
        if "acc" in state:
            state["arr"][state["i"]] = state["acc"]
    return run_chunk, finish
