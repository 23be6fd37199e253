"""Tutorial 17: tensor cores -- a warp MMA written lane by lane, checked, printed as mma.sync.

    python tutorials/17_tensor_cores.py

The story: a tensor core multiplies a 16 x 16 tile of A by a 16 x 8 tile of B with the 32
lanes of a warp, each lane holding four of the 128 results. We write exactly that as a
loop nest -- for each lane, its four accumulators, the sum over k -- and `tensorize` checks
it against the instruction's fragment layout, naming what does not match. IREval runs the
nest as written (a small matmul per lane), so the result is checked on any machine; the CUDA
backend prints it as `ldmatrix` + `mma.sync`. Then a whole matmul: `nest.gpu_matmul()` puts
a tensor-core tree (warps of such tiles, shared-memory staging) in place of the loops (for
float32 without tensor cores, a register-tiled tree) -- or, with `wgmma=True`, a tree for
Hopper's warpgroup MMA -- and `autotune(..., target="cuda")` searches its tiles when a GPU is
present.
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from te import Buffer, Reduce, Sum, Var, cast, float32
from loopnest import LoopNest, ScheduleError
from loopnest.stmt import Block, For, Store
from loopnest.transforms.tensorize import fragment_col, fragment_row
from codegen import BuildError, build
from codegen.cuda import nvcc_available

# -- one warp tile, lane by lane -----------------------------------------------------------
As, Bs = Buffer("As", (16, 16), "float16"), Buffer("Bs", (16, 8), "float16")
acc = Buffer("acc", (32, 4), "float32")
lane, v, k = Var("lane"), Var("v"), Var("k")
body = Store(acc, (lane, v), acc[lane, v] + cast(As[fragment_row(lane, v), k], float32)
             * cast(Bs[k, fragment_col(lane, v)], float32))
nest = LoopNest(For(lane, 0, 32, Block([For(v, 0, 4, Block([For(k, 0, 16, Block([body]))]))])), outputs=[acc])
nest.set_gpu_thread_index(lane, 0)
try:
    nest.tensorize(k)                       # the wrong loop: the refusal says why
except ScheduleError as exc:
    print("refused:", exc)
nest.tensorize(v)
print("declared:", nest.tensorized)

rng = np.random.default_rng(0)
a = rng.standard_normal((16, 16)).astype(np.float16)
b = rng.standard_normal((16, 8)).astype(np.float16)
out = np.zeros((32, 4), np.float32)
build(nest, [As, Bs, acc], target="ireval")(As=a, Bs=b, acc=out)
want = a.astype(np.float64) @ b.astype(np.float64)
lanes = np.arange(32)
got = np.zeros((16, 8))
for vv in range(4):
    got[fragment_row(lanes, vv), fragment_col(lanes, vv)] = out[:, vv]
assert np.allclose(got, want, rtol=1e-5, atol=1e-5)
print("the lanes' accumulators make the 16 x 8 product")

# -- a whole matmul on tensor cores ---------------------------------------------------------
n = 128
A, B = Buffer("A", (n, n), "float16"), Buffer("B", (n, n), "float16")
C = Reduce("C", (n, n), Sum(), lambda i, j, kk: cast(A[i, kk], float32) * cast(B[kk, j], float32), (n,))
mm = LoopNest([C])
mm.gpu_matmul(BM=64, BN=64, BK=32, WM=32, WN=32)     # four warps of 32 x 32, k-tiles of 32
print("\nhistory:", [h["op"] for h in mm.history], "tensorized:", mm.tensorized)
kernel = build(mm, [A, B, C], target="cuda")
print(kernel.module.plan.describe_tensor_cores())
assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in kernel.source
start = kernel.source.index("tc_ldmatrix_x4(tc_")
print("\n".join(kernel.source[start:].splitlines()[:3]))
if nvcc_available():
    info = kernel.compile("sm_90")
    print(f"sm_90: {info['registers']} registers, {info['shared_bytes']} B shared, {info['spill_stores']} spills")

# -- larger tiles, deeper pipelines: more than 48 KiB of shared memory -----------------------
# 128 x 128 tiles with four k-stages copied by cp.async need 74 KiB. Over the limit (48 KiB by
# default), the largest shared buffers move to global memory; tensor cores read their operands
# from shared memory only, so this build is refused, and the message says why. With a larger
# max_shared_bytes the tiles stay in shared memory, declared as dynamic shared memory (the
# launch asks the device for it)
big = LoopNest([C])
big.gpu_matmul(BM=128, BN=128, BK=32, WM=64, WN=32, stages=4, prefetch="shared")
try:
    build(big, [A, B, C], target="cuda")
except BuildError as exc:
    print("\nrefused:", exc)
deep = build(big, [A, B, C], target="cuda", max_shared_bytes=160 * 1024)
print("dynamic shared memory:", deep.module.kernels[0].dynamic_shared, "bytes")
assert "extern __shared__" in deep.source
# each K step copies tile ko + 3 while the warps multiply tile ko: the barriers wait only for
# the copies read before the next barrier, leaving the later tiles' copy groups in flight
print(deep.module.plan.describe_async_waits())
assert "tc_cp_async_wait_group<" in deep.source

# -- float32 without tensor cores: the register-tiled tree ----------------------------------
# gpu_matmul(False, ...) keeps a TM x TN tile of C per thread in registers. stages=2 loads the
# next k-tile into registers while this one is multiplied (one barrier per k-tile), vector=4
# reads each thread's share in 128-bit loads: 0.96 of cuBLAS at 4096 on an H100
A32, B32 = Buffer("A32", (64, 64), "float32"), Buffer("B32", (64, 64), "float32")
C32 = Reduce("C32", (64, 64), Sum(), lambda i, j, kk: A32[i, kk] * B32[kk, j], (64,))
simt = LoopNest([C32])
simt.gpu_matmul(False, BM=64, BN=64, BK=16, TM=4, TN=4, stages=2, vector=4)
simt_kernel = build(simt, [A32, B32, C32], target="cuda")
k_loop = simt_kernel.source[simt_kernel.source.index("for (int v_ko"):]
assert k_loop.count("__syncthreads();") == 1 and "float4" in k_loop
a32, b32 = rng.standard_normal((64, 64)).astype(np.float32), rng.standard_normal((64, 64)).astype(np.float32)
c32 = np.zeros((64, 64), np.float32)
build(simt, [A32, B32, C32], target="ireval")(A32=a32, B32=b32, C32=c32)
assert np.allclose(c32, a32.astype(np.float64) @ b32.astype(np.float64), rtol=1e-4, atol=1e-4)
print("\nfloat32 register tiles: one barrier per k-tile, IREval matches numpy")

if os.environ.get("TUTORIAL_SMALL"):  # the test runner: IREval runs the tree in Python, seconds at n = 128
    n = 64                             # the same tiles on one block of four warps
    A, B = Buffer("A", (n, n), "float16"), Buffer("B", (n, n), "float16")
    C = Reduce("C", (n, n), Sum(), lambda i, j, kk: cast(A[i, kk], float32) * cast(B[kk, j], float32), (n,))
    mm = LoopNest([C])
    mm.gpu_matmul(BM=64, BN=64, BK=32, WM=32, WN=32)
    kernel = build(mm, [A, B, C], target="cuda")
a = rng.standard_normal((n, n)).astype(np.float16)
b = rng.standard_normal((n, n)).astype(np.float16)
c = np.zeros((n, n), np.float32)
build(mm, [A, B, C], target="ireval")(A=a, B=b, C=c)        # the same tree, lane by lane
assert np.allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-3)
print("IREval matches numpy")

# -- Hopper's warpgroup MMA: four warps, operands read from shared memory by descriptor --------
# gpu_matmul(wgmma=True) writes the same matmul for wgmma.mma_async.m64nNk16: each thread of a
# warpgroup holds N / 2 accumulators; the tiles lie in shared memory in the instruction's
# 128-byte swizzled layout (k-tiles of 64: rows of 128 bytes, each row's 16-byte chunks
# permuted; swizzle=0 takes interleaved core matrices). IREval runs it thread by thread; on
# sm_90 the CUDA build prints one wgmma per 16 of K (compiled for sm_90a), plain per-thread
# code elsewhere. With 3 stages the copies run one k-tile ahead, so the MMAs of one iteration
# may run on beside the next one's copies (wgmma.wait_group 1): the cuda_wgmma_overlap step
# checks that nothing overwrites what they read.
wg = LoopNest([C])
wg.gpu_matmul(True, wgmma=True, BM=64, BN=64, BK=64, stages=3)
print("\nwarpgroup MMA:", wg.tensorized)
c[:] = 0
build(wg, [A, B, C], target="ireval")(A=a, B=b, C=c)
assert np.allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-3)
wg_kernel = build(wg, [A, B, C], target="cuda")
print(wg_kernel.module.plan.describe_tensor_cores().splitlines()[1].strip())
print(wg_kernel.module.plan.describe_wgmma_overlap() or "(each iteration waits for its MMAs)")
print("IREval matches numpy")

# float32 operands take the warpgroup MMA's tf32 form (m64nNk8, operands rounded to tf32: asked
# for with tensor_cores=True), which reads both operands K-major: B stored N x K.
F = Buffer("F", (64, 64), "float32")
G = Buffer("G", (64, 64), "float32")                               # N x K
T = Reduce("T", (64, 64), Sum(), lambda i, j, k: F[i, k] * G[j, k], (64,))
tf = LoopNest([T])
tf.gpu_matmul(True, wgmma=True, BM=64, BN=64, BK=32, stages=2)
print("tf32 warpgroup MMA:", tf.tensorized)
f, g = (np.random.default_rng(s).standard_normal((64, 64)).astype(np.float32) for s in (4, 5))
t_out = np.zeros((64, 64), np.float32)
build(tf, [F, G, T], target="ireval")(F=f, G=g, T=t_out)     # IREval: float32 products, not rounded
assert np.allclose(t_out, f.astype(np.float64) @ g.T.astype(np.float64), rtol=1e-5, atol=1e-4)
print(build(tf, [F, G, T], target="cuda").module.plan.describe_tensor_cores().splitlines()[1].strip())

try:                                                           # on a GPU: run it, and tune it
    from codegen.cuda.launch import device_info
    device_info()
except Exception as exc:
    print("no GPU here, so nothing runs on one:", str(exc).split(";")[0])
else:
    c[:] = 0
    kernel(A=a, B=b, C=c)
    assert np.allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-2)
    print("the GPU matches numpy")
    from tune import autotune
    tuned, record = autotune([C], [A, B, C], target="cuda", trials=3, progress=False)
    print("tuned:", record.trace[-1])
print("OK")
