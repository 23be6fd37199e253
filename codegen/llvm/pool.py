"""The "pool" parallel runtime: a native thread pool written in LLVM IR, JIT-compiled once
per process.

Why not libgomp: ``GOMP_parallel`` ends with a barrier that waits for *every* thread of
the team, including threads the OS has not scheduled yet. On a machine shared with other
processes (more runnable threads than cores) that join regularly costs a scheduler time
slice (about a millisecond) per parallel loop, and libgomp's busy-waiting makes it worse:
its waiting threads spin on the core the late thread needs. Measured on the 2-core
development machine under load: a 64-iteration parallel loop took 0.5-1 ms with libgomp
(``GOMP_SPINCOUNT=20000``), 14-20 us with passive libgomp, 40-70 us with the Python thread
pool, and about 5 us with this pool.

How it works. ``te_llvm_pool_parallel_for(body, lo, hi, ctx, nthreads)`` publishes a job
(body, ctx, [lo, hi)) in global variables, then the calling thread and the workers claim
chunks from one atomic counter until none is left. Chunks are guided: each claim takes
``1 / (GUIDED_FACTOR * threads)`` of the iterations still unclaimed, so the first chunks are
large (few claims, contiguous data) and the last ones small (threads finish together).
The caller never waits for a worker that has not started: it waits only for chunks
already claimed to finish (``remaining`` reaches 0). So a worker that wakes late finds
less (or nothing) to do, and the loop costs what its chunks cost.

* The claim counter is ``generation << 40 | next offset``; a claim is a compare-and-swap
  from the value read before reading the job fields, so a worker that read the fields of an
  old job cannot claim a chunk of a new one (the generation differs).
* Workers (``nthreads - 1`` of them, created on first use with ``pthread_create``) spin
  for ``SPIN_CYCLES`` time-stamp cycles after each job (back-to-back parallel loops need no
  wake-up), then sleep on a futex that the next job wakes.
* One job at a time: a parallel loop started while another runs (another Python thread
  calling a kernel, or a nested parallel loop) runs serially in its caller.
* After ``fork`` the child has no workers; ``runtime`` resets the pool there, and the next
  parallel loop starts new ones.

Linux on x86-64 and AArch64 only (futex system call numbers); ``available()`` says.

>>> available() in (True, False)
True
"""
from __future__ import annotations

import ctypes
import sys

import llvmlite.binding as llvm
from llvmlite import ir

__all__ = ["available", "install", "ENTRY_SYMBOL", "GUIDED_FACTOR", "SPIN_CYCLES", "reset_after_fork",
           "set_default_threads", "set_spin_cycles"]

ENTRY_SYMBOL = "te_llvm_pool_parallel_for"
#: a claim takes 1 / (GUIDED_FACTOR * threads) of the unclaimed iterations (at least one)
GUIDED_FACTOR = 2
#: time-stamp-counter cycles a worker spins waiting for the next job before it sleeps (~0.1 ms)
SPIN_CYCLES = 300_000

_GEN_SHIFT = 40
_OFF_MASK = (1 << _GEN_SHIFT) - 1
_GEN_MASK = (1 << (64 - _GEN_SHIFT)) - 1
_FUTEX_WAIT_PRIVATE, _FUTEX_WAKE_PRIVATE = 128, 129
_SYS_FUTEX = {"x86_64": 202, "aarch64": 98}

I1, I32, I64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
VOID = ir.VoidType()

_state: dict = {"engine": None, "globals": {}}


def _arch(triple: str) -> str | None:
    for a in _SYS_FUTEX:
        if triple.startswith(a):
            return a
    return None


def available() -> bool:
    """True where the pool can run (Linux, x86-64 or AArch64)."""
    from . import jit
    return sys.platform.startswith("linux") and _arch(jit.host_info()["triple"]) is not None


class _Gen:
    """Emits the pool module."""

    def __init__(self, triple: str, data_layout: str):
        self.arch = _arch(triple)
        m = self.m = ir.Module(name="te_llvm_pool")
        m.triple, m.data_layout = triple, data_layout
        self.g = {}
        for name, t, init, align in (
                ("claim", I64, 0, 64), ("remaining", I64, 0, 64), ("gen", I32, 0, 64), ("sleepers", I32, 0, 4),
                ("busy", I32, 0, 64), ("started", I32, 0, 4), ("default_threads", I32, 1, 4),
                ("spin", I64, SPIN_CYCLES, 8), ("guided_factor", I64, GUIDED_FACTOR, 8),
                ("fn", PTR, None, 64), ("ctx", PTR, None, 8), ("start", I64, 0, 8), ("n", I64, 0, 8),
                ("divisor", I64, 1, 8), ("active", I32, 0, 4)):
            gv = ir.GlobalVariable(m, t, f"te_llvm_pool_{name}")
            gv.initializer = ir.Constant(t, init) if t is not PTR else ir.Constant(t, None)
            gv.align = align
            self.g[name] = gv
        self.body_t = ir.FunctionType(VOID, [I64, I64, PTR])
        self.syscall = ir.Function(m, ir.FunctionType(I64, [I64], var_arg=True), "syscall")
        self.sched_yield = ir.Function(m, ir.FunctionType(I32, []), "sched_yield")
        self.pthread_create = ir.Function(m, ir.FunctionType(I32, [PTR, PTR, PTR, PTR]), "pthread_create")
        self.pthread_detach = ir.Function(m, ir.FunctionType(I32, [I64]), "pthread_detach")
        self.cycles = ir.Function(m, ir.FunctionType(I64, []), "llvm.readcyclecounter")
        if self.arch == "x86_64":
            self.pause_fn = ir.Function(m, ir.FunctionType(VOID, []), "llvm.x86.sse2.pause")
        else:
            self.pause_fn = ir.Function(m, ir.FunctionType(VOID, [I32]), "llvm.aarch64.hint")

    # -- helpers -------------------------------------------------------------------------
    def pause(self, b):
        if self.arch == "x86_64":
            b.call(self.pause_fn, [])
        else:
            b.call(self.pause_fn, [ir.Constant(I32, 1)])   # "yield" hint

    def ld(self, b, name, order="monotonic"):
        gv = self.g[name]
        return b.load_atomic(gv, order, _size(gv), name=name, typ=gv.value_type)

    def st(self, b, name, value, order="monotonic"):
        gv = self.g[name]
        # IRBuilder.store_atomic wants a typed pointer; opaque pointers need the instruction itself
        b._insert(ir.instructions.StoreAtomicInstr(b.block, value, gv, order, _size(gv)))

    def futex(self, b, op, val):
        nr = ir.Constant(I64, _SYS_FUTEX[self.arch])
        b.call(self.syscall, [nr, self.g["gen"], ir.Constant(I64, op), val,
                              ir.Constant(PTR, None), ir.Constant(PTR, None), ir.Constant(I64, 0)])

    # -- run_chunks(wid) -> the last claim value seen ---------------------------------------
    def run_chunks(self):
        fn = ir.Function(self.m, ir.FunctionType(I64, [I32]), "te_llvm_pool_run_chunks")
        fn.linkage = "internal"
        wid = fn.args[0]
        entry, top, claim_bb, run, out = (fn.append_basic_block(n) for n in ("entry", "top", "claim", "run", "out"))
        b = ir.IRBuilder(entry)
        b.branch(top)
        b.position_at_end(top)
        c = self.ld(b, "claim", "acquire")
        off = b.and_(c, ir.Constant(I64, _OFF_MASK), name="off")
        n = self.ld(b, "n")
        divisor = self.ld(b, "divisor")
        body = self.ld(b, "fn")
        ctx = self.ld(b, "ctx")
        start = self.ld(b, "start")
        active = self.ld(b, "active")
        # the caller (wid -1) always takes part; worker w only when w < active
        joins = b.icmp_signed("<", wid, active)
        has_work = b.icmp_signed("<", off, n)
        b.cbranch(b.and_(joins, has_work), claim_bb, out)
        b.position_at_end(claim_bb)
        left = b.sub(n, off)
        chunk = b.udiv(b.add(left, b.sub(divisor, ir.Constant(I64, 1))), divisor, name="chunk")   # >= 1
        pair = b.cmpxchg(self.g["claim"], c, b.add(c, chunk), "acq_rel", "acquire")
        ok = b.extract_value(pair, 1)
        b.cbranch(ok, run, top)
        b.position_at_end(run)
        end = b.add(off, chunk)
        end = b.select(b.icmp_signed("<", end, n), end, n)
        b.call(_Callee(body, self.body_t), [b.add(start, off), b.add(start, end), ctx])
        b.atomic_rmw("sub", self.g["remaining"], b.sub(end, off), "release")
        b.branch(top)
        b.position_at_end(out)
        b.ret(c)
        return fn

    # -- worker(arg) ------------------------------------------------------------------------
    def worker(self, run_chunks):
        fn = ir.Function(self.m, ir.FunctionType(PTR, [PTR]), "te_llvm_pool_worker")
        fn.linkage = "internal"
        bbs = {n: fn.append_basic_block(n) for n in ("entry", "work", "spin", "spin_check", "sleep", "wait",
                                                      "woke")}
        b = ir.IRBuilder(bbs["entry"])
        wid = b.trunc(b.ptrtoint(fn.args[0], I64), I32, name="wid")
        b.branch(bbs["work"])
        b.position_at_end(bbs["work"])
        last = b.call(run_chunks, [wid], name="last")
        gen_seen = b.lshr(last, ir.Constant(I64, _GEN_SHIFT))
        t0 = b.call(self.cycles, [])
        spin = self.ld(b, "spin")
        b.branch(bbs["spin"])
        # spin: until a new generation appears (-> work) or the spin time is over (-> sleep)
        b.position_at_end(bbs["spin"])
        cur = self.ld(b, "claim", "acquire")
        new_job = b.icmp_unsigned("!=", b.lshr(cur, ir.Constant(I64, _GEN_SHIFT)), gen_seen)
        b.cbranch(new_job, bbs["work"], bbs["spin_check"])
        b.position_at_end(bbs["spin_check"])
        self.pause(b)
        elapsed = b.sub(b.call(self.cycles, []), t0)
        b.cbranch(b.icmp_unsigned("<", elapsed, spin), bbs["spin"], bbs["sleep"])
        # sleep: sleepers += 1; read the futex word; sleep unless a new job was published
        b.position_at_end(bbs["sleep"])
        b.atomic_rmw("add", self.g["sleepers"], ir.Constant(I32, 1), "seq_cst")
        gw = self.ld(b, "gen", "seq_cst")
        cur = self.ld(b, "claim", "seq_cst")
        still = b.icmp_unsigned("==", b.lshr(cur, ir.Constant(I64, _GEN_SHIFT)), gen_seen)
        b.cbranch(still, bbs["wait"], bbs["woke"])
        b.position_at_end(bbs["wait"])
        self.futex(b, _FUTEX_WAIT_PRIVATE, b.zext(gw, I64))
        b.branch(bbs["woke"])
        b.position_at_end(bbs["woke"])
        b.atomic_rmw("sub", self.g["sleepers"], ir.Constant(I32, 1), "seq_cst")
        # woken (maybe spuriously): back to work, which finds the new job or nothing
        cur = self.ld(b, "claim", "acquire")
        new_job = b.icmp_unsigned("!=", b.lshr(cur, ir.Constant(I64, _GEN_SHIFT)), gen_seen)
        b.cbranch(new_job, bbs["work"], bbs["sleep"])
        return fn

    # -- parallel_for(body, lo, hi, ctx, nthreads) ------------------------------------------
    def parallel_for(self, run_chunks, worker):
        fn = ir.Function(self.m, ir.FunctionType(VOID, [PTR, I64, I64, PTR, I32]), ENTRY_SYMBOL)
        body, lo, hi, ctx, nthr = fn.args
        names = ("entry", "serial", "try", "spawn_check", "spawn", "spawned", "publish", "wake", "run", "wait",
                 "wait_more", "yield", "done")
        bb = {n: fn.append_basic_block(n) for n in names}
        b = ir.IRBuilder(bb["entry"])
        tid = b.alloca(I64, name="tid")
        n = b.sub(hi, lo, name="n")
        dflt = self.ld(b, "default_threads")
        nthr = b.select(b.icmp_signed("<=", nthr, ir.Constant(I32, 0)), dflt, nthr, name="nthreads")
        few = b.or_(b.icmp_signed("<=", nthr, ir.Constant(I32, 1)), b.icmp_signed("<=", n, ir.Constant(I64, 1)))
        # the claim counter holds offsets below 2**40: longer loops (never seen) run serially
        few = b.or_(few, b.icmp_unsigned(">=", n, ir.Constant(I64, 1 << (_GEN_SHIFT - 1))))
        b.cbranch(few, bb["serial"], bb["try"])

        b.position_at_end(bb["serial"])
        b.call(_Callee(body, self.body_t), [lo, hi, ctx])
        b.ret_void()

        # take the pool, or run serially when another job holds it
        b.position_at_end(bb["try"])
        want = b.sub(nthr, ir.Constant(I32, 1), name="want")
        pair = b.cmpxchg(self.g["busy"], ir.Constant(I32, 0), ir.Constant(I32, 1), "acquire", "monotonic")
        b.cbranch(b.extract_value(pair, 1), bb["spawn_check"], bb["serial"])

        # start workers up to nthreads - 1
        b.position_at_end(bb["spawn_check"])
        started = self.ld(b, "started")
        b.cbranch(b.icmp_signed("<", started, want), bb["spawn"], bb["publish"])
        b.position_at_end(bb["spawn"])
        arg = b.inttoptr(b.zext(started, I64), PTR)
        rc = b.call(self.pthread_create, [tid, ir.Constant(PTR, None), worker, arg])
        b.cbranch(b.icmp_signed("!=", rc, ir.Constant(I32, 0)), bb["publish"], bb["spawned"])
        b.position_at_end(bb["spawned"])
        b.call(self.pthread_detach, [b.load(tid, typ=I64)])
        self.st(b, "started", b.add(started, ir.Constant(I32, 1)))
        b.branch(bb["spawn_check"])

        # publish the job
        b.position_at_end(bb["publish"])
        started = self.ld(b, "started")
        active = b.select(b.icmp_signed("<", started, want), started, want, name="active")
        divisor = b.mul(b.zext(b.add(active, ir.Constant(I32, 1)), I64), self.ld(b, "guided_factor"),
                        name="divisor")
        self.st(b, "fn", body)
        self.st(b, "ctx", ctx)
        self.st(b, "start", lo)
        self.st(b, "n", n)
        self.st(b, "divisor", divisor)
        self.st(b, "active", active)
        self.st(b, "remaining", n, "seq_cst")
        old = self.ld(b, "claim", "seq_cst")
        gen = b.and_(b.add(b.lshr(old, ir.Constant(I64, _GEN_SHIFT)), ir.Constant(I64, 1)),
                     ir.Constant(I64, _GEN_MASK))
        self.st(b, "claim", b.shl(gen, ir.Constant(I64, _GEN_SHIFT)), "seq_cst")
        b.atomic_rmw("add", self.g["gen"], ir.Constant(I32, 1), "seq_cst")
        sleepers = self.ld(b, "sleepers", "seq_cst")
        b.cbranch(b.icmp_signed(">", sleepers, ir.Constant(I32, 0)), bb["wake"], bb["run"])
        b.position_at_end(bb["wake"])
        self.futex(b, _FUTEX_WAKE_PRIVATE, ir.Constant(I64, 0x7FFFFFFF))
        b.branch(bb["run"])

        # work, then wait for the chunks other threads claimed
        b.position_at_end(bb["run"])
        b.call(run_chunks, [ir.Constant(I32, -1)])
        b.branch(bb["wait"])
        b.position_at_end(bb["wait"])
        spins = b.phi(I32, name="spins")
        spins.add_incoming(ir.Constant(I32, 0), bb["run"])
        left = self.ld(b, "remaining", "acquire")
        b.cbranch(b.icmp_signed(">", left, ir.Constant(I64, 0)), bb["wait_more"], bb["done"])
        b.position_at_end(bb["wait_more"])
        self.pause(b)
        nxt = b.add(spins, ir.Constant(I32, 1))
        b.cbranch(b.icmp_signed(">", nxt, ir.Constant(I32, 4000)), bb["yield"], bb["wait"])
        spins.add_incoming(nxt, bb["wait_more"])
        b.position_at_end(bb["yield"])        # the thread we wait for may need this core
        b.call(self.sched_yield, [])
        b.branch(bb["wait"])
        spins.add_incoming(nxt, bb["yield"])
        b.position_at_end(bb["done"])
        self.st(b, "busy", ir.Constant(I32, 0), "release")
        b.ret_void()
        return fn

    def module(self) -> ir.Module:
        rc = self.run_chunks()
        w = self.worker(rc)
        self.parallel_for(rc, w)
        return self.m


class _Callee:
    """A function pointer value with its function type, for an indirect ``call`` (llvmlite's
    builder takes the callee's type from the value, which an opaque ``ptr`` does not carry)."""

    def __init__(self, value, fnty: ir.FunctionType):
        self.value, self.function_type, self.type = value, fnty, value.type

    def get_reference(self) -> str:
        return self.value.get_reference()


def _size(gv) -> int:
    t = gv.value_type
    return 8 if t in (I64, PTR) else 4


def install() -> int:
    """Compile the pool (once per process) and make ``ENTRY_SYMBOL`` resolvable by kernels;
    returns its address."""
    if _state["engine"] is not None:
        return _state["address"]
    from . import jit
    h = jit.host_info()
    if not available():
        raise RuntimeError(f"the pool runtime needs Linux on x86-64 or AArch64, not {sys.platform} {h['triple']}")
    libc = ctypes.CDLL(None)
    for sym in ("syscall", "sched_yield", "pthread_create", "pthread_detach"):
        llvm.add_symbol(sym, ctypes.cast(getattr(libc, sym), ctypes.c_void_p).value)
    text = str(_Gen(h["triple"], jit.data_layout()).module())
    # compiled here rather than through jit.compile_ir: the runtime is not a kernel (no
    # compile-cache entry, no disk cache, not counted in jit.cache_stats())
    with jit._lock:
        mod = llvm.parse_assembly(text)
        mod.verify()
        jit._optimize(mod, 2)
        engine = llvm.create_mcjit_compiler(mod, jit._target_machine(2))
        engine.finalize_object()
    address = engine.get_function_address(ENTRY_SYMBOL)
    _state["engine"] = engine
    _state["address"] = address
    _state["globals"] = {name: engine.get_global_value_address(f"te_llvm_pool_{name}")
                         for name in ("busy", "started", "sleepers", "remaining", "default_threads", "spin",
                                      "guided_factor")}
    llvm.add_symbol(ENTRY_SYMBOL, address)
    return address


def _global(name: str, ctype):
    addr = _state["globals"].get(name)
    return None if addr is None else ctype.from_address(addr)


def set_default_threads(n: int) -> None:
    """The team size used when a kernel passes 0 threads (the runtime's default)."""
    g = _global("default_threads", ctypes.c_int32)
    if g is not None:
        g.value = max(1, int(n))


def set_spin_cycles(cycles: int) -> None:
    """How long (time-stamp cycles) idle workers spin before sleeping."""
    g = _global("spin", ctypes.c_int64)
    if g is not None:
        g.value = max(0, int(cycles))


def reset_after_fork() -> None:
    """In a forked child: the workers did not survive the fork; forget them."""
    for name in ("busy", "started", "sleepers"):
        g = _global(name, ctypes.c_int32)
        if g is not None:
            g.value = 0
    g = _global("remaining", ctypes.c_int64)
    if g is not None:
        g.value = 0
