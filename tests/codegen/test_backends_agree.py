"""Property test: random elementwise expression trees give the same result on IREval and LLVM.

Trees mix arithmetic, min/max, select, comparisons, casts between float32 and integers, and
exp/tanh on bounded inputs; integer division and remainder take raw divisors, and a quarter of
the input elements are edge values (0, -1, INT_MIN, INT_MAX; 0.0, -0.0, NaN, infinities), so
the language's edge cases (docs/semantics.md) are drawn every run, over random shapes (1, primes, small 2-D) and random loop kinds
(serial, vectorized, unrolled, parallel). LLVM builds with ``fp_contract=False`` so it rounds
every operation as IREval does (a fused multiply-add followed by a cancellation, a comparison
or a cast to an integer could differ by far more than an ulp). Integers must agree bit for
bit; float32 within 1e-5 relative (basic float32 arithmetic is IEEE in both and agrees
exactly; only libm vs numpy transcendental results may differ by an ulp, which later
operations can spread).
"""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import te
from codegen import build
from loopnest import LoopNest
from loopnest.stmt import ForKind, StmtMutator
from te import Buffer, Compute, cast, float32, floordiv, floormod, int8, int32, int64, select, uint8, uint32

INT_DTYPES = [int8, int32, int64, uint8, uint32]
KINDS = [ForKind.SERIAL, ForKind.VECTORIZED, ForKind.UNROLLED, ForKind.PARALLEL]
SHAPES = [(1,), (2,), (7,), (13,), (31,), (64,), (3, 5), (1, 17), (6, 8)]


# ------------------------------------------------------------------------------------
# random trees: ("op", children...) tuples, built into te expressions per kernel
# ------------------------------------------------------------------------------------
def float_tree(depth):
    leaf = st.one_of(st.just(("fload", 0)), st.just(("fload", 1)),
                     st.floats(-4, 4, allow_nan=False, width=32).map(lambda v: ("fconst", v)),
                     st.just(("icast",)))
    if depth == 0:
        return leaf
    sub = float_tree(depth - 1)
    isub = int_tree(depth - 1)
    return st.one_of(
        leaf,
        st.tuples(st.sampled_from(["add", "sub", "mul", "div", "min", "max"]), sub, sub),
        st.tuples(st.just("select"), sub, sub, sub, sub),
        st.tuples(st.sampled_from(["exp", "tanh", "abs", "floor"]), sub),
        st.tuples(st.just("from_int"), isub),
    )


def int_tree(depth):
    leaf = st.one_of(st.just(("iload", 0)), st.just(("iload", 1)), st.just(("index",)),
                     st.integers(-100, 100).map(lambda v: ("iconst", v)))
    if depth == 0:
        return leaf
    sub = int_tree(depth - 1)
    return st.one_of(
        leaf,
        st.tuples(st.sampled_from(["add", "sub", "mul", "min", "max", "div", "mod", "floordiv", "floormod"]),
                  sub, sub),
        st.tuples(st.just("select"), sub, sub, sub, sub),
        st.tuples(st.just("from_float"), float_tree(depth - 1)),
    )


def build_float(t, env):
    op = t[0]
    F, I, idx = env["F"], env["I"], env["idx"]
    if op == "fload":
        return F[t[1]][idx]
    if op == "fconst":
        return te.FloatImm(float(np.float32(t[1])), float32)
    if op == "icast":
        return cast(env["flat"], float32)
    if op == "from_int":
        return cast(build_int(t[1], env), float32)
    args = [build_float(c, env) for c in t[1:]]
    if op == "add":
        return args[0] + args[1]
    if op == "sub":
        return args[0] - args[1]
    if op == "mul":
        return args[0] * args[1]
    if op == "div":
        return args[0] / (te.abs(args[1]) + 0.5)       # bounded away from zero
    if op == "min":
        return te.minimum(args[0], args[1])
    if op == "max":
        return te.maximum(args[0], args[1])
    if op == "select":
        return select(args[0] < args[1], args[2], args[3])
    if op == "exp":
        return te.exp(te.tanh(args[0]))                 # bounded input
    if op == "tanh":
        return te.tanh(args[0])
    if op == "abs":
        return te.abs(args[0])
    if op == "floor":
        return te.floor(args[0])
    raise AssertionError(op)


def build_int(t, env):
    op = t[0]
    dt = env["idt"]
    I, idx = env["I"], env["idx"]
    if op == "iload":
        return I[t[1]][idx]
    if op == "iconst":
        return te.const(int(t[1]) % (1 << dt.bits) if dt.is_uint else max(min(t[1], dt.max_value()),
                                                                           dt.min_value()), dt)
    if op == "index":
        return cast(env["flat"], dt)
    if op == "from_float":
        return cast(build_float(t[1], env), dt)
    args = [build_int(c, env) for c in t[1:]]
    a, b = args[0], args[-1] if len(args) == 2 else None
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "min":
        return te.minimum(a, b)
    if op == "max":
        return te.maximum(a, b)
    if op == "select":
        return select(args[0] < args[1], args[2], args[3])
    # raw divisors: 0, -1 and INT_MIN / -1 occur (the data holds edge values), and every
    # backend must give the rule of docs/semantics.md
    if op == "div":
        return a / b
    if op == "mod":
        return a % b
    if op == "floordiv":
        return floordiv(a, b)
    if op == "floormod":
        return floormod(a, b)
    raise AssertionError(op)


class SetKinds(StmtMutator):
    def __init__(self, kinds):
        self.kinds = list(kinds)
        self.k = 0

    def visit_For(self, s):
        kind = self.kinds[self.k % len(self.kinds)]
        self.k += 1
        s2 = self.generic(s)
        return s2.replace(kind=kind)


def run_both(tree, make, out_dtype, idt, shape, kinds, seed):
    F = [Buffer(f"F{k}", shape, float32) for k in range(2)]
    I = [Buffer(f"I{k}", shape, idt) for k in range(2)]
    holder = {}

    def body(*ix):
        flat = ix[0]
        for d, v in zip(shape[1:], ix[1:]):
            flat = flat * d + v
        env = {"F": F, "I": I, "idx": ix, "flat": flat, "idt": idt}
        e = make(tree, env)
        holder["e"] = e
        return e
    Out = Compute("Out", shape, body, dtype=out_dtype)
    nest = LoopNest([Out])
    used = [b for b in F + I if b in nest.inputs]
    args = used + [Out]
    rng = np.random.default_rng(seed)
    info = np.iinfo(idt.numpy)
    data = {}
    for b in used:
        if b.dtype == float32:
            a = (rng.standard_normal(shape) * 2).astype(np.float32)
            edges = np.array([0.0, -0.0, np.nan, np.inf, -np.inf], np.float32)
        else:
            a = rng.integers(info.min, info.max, shape, dtype=idt.numpy, endpoint=True)
            edges = np.array(sorted({0, 1, info.max, info.min, -1 if info.min < 0 else 2}), idt.numpy)
        pick = rng.random(shape) < 0.25       # a quarter of the elements are edge values
        a[pick] = rng.choice(edges, int(pick.sum()))
        data[b.name] = a
    ref = np.zeros(shape, out_dtype.numpy)
    build(nest, args, target="ireval")(*[data[b.name] for b in used], ref)
    prepared = nest.copy().prepare_for_codegen()
    prepared.root = SetKinds(kinds).visit(prepared.root)
    got = np.zeros(shape, out_dtype.numpy)
    k = build(prepared, args, target="llvm", fp_contract=False)
    k(*[data[b.name] for b in used], got)
    return ref, got, holder.get("e")


settings_ = settings(max_examples=int(__import__("os").environ.get("AGREE_EXAMPLES", 30)), deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                             HealthCheck.data_too_large])


@settings_
@given(tree=float_tree(3), idt=st.sampled_from(INT_DTYPES), shape=st.sampled_from(SHAPES),
       kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=2), seed=st.integers(0, 2**16))
def test_float_expressions_agree(tree, idt, shape, kinds, seed):
    ref, got, e = run_both(tree, build_float, float32, idt, shape, kinds, seed)
    r, g = ref.astype(np.float64), got.astype(np.float64)
    scale = 1.0 + np.nanmax(np.abs(r[np.isfinite(r)]), initial=0.0)
    with np.errstate(invalid="ignore"):     # inf - inf: the r == g term decides
        ok = (np.abs(r - g) <= 1e-5 * np.abs(r) + 1e-6 * scale) | (np.isnan(r) & np.isnan(g)) | (r == g)
    ok &= ~((r == 0) & (g == 0) & (np.signbit(r) != np.signbit(g)))     # zeros agree on their sign
    assert ok.all(), f"{e}: ireval {r[~ok][:4]} llvm {g[~ok][:4]}"


@settings_
@given(tree=int_tree(3), idt=st.sampled_from(INT_DTYPES), shape=st.sampled_from(SHAPES),
       kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=2), seed=st.integers(0, 2**16))
def test_integer_expressions_agree_bit_for_bit(tree, idt, shape, kinds, seed):
    ref, got, e = run_both(tree, build_int, idt, idt, shape, kinds, seed)
    assert np.array_equal(ref, got), f"{e}: ireval {ref.ravel()[:6]} llvm {got.ravel()[:6]}"
