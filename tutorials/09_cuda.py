"""Tutorial 9: CUDA C from a GPU-bound loop nest.

    python tutorials/09_cuda.py

The story: a row softmax bound to the GPU: one block per row, threads across the columns.
We print the CUDA C, compile it with nvcc for two architectures when nvcc is installed
(no GPU needed: registers and shared memory come from ptxas), check the GPU-bound nest on
the interpreter (GPU axes run as serial loops), run it on the GPU when there is one, and on
the host emulation (with its race check) when there is none.
Then a running sum down the rows: each row needs the one before, so the row loop stays
serial and runs on the host, launching the column kernel once per row (a host loop).
Then a convolution from the CUDA tuning space (what `autotune(..., target="cuda")`
searches): its knobs, and its first seed (the benchmark's GPU schedule) on the interpreter.
Last, the same softmax with no schedule written: `schedule="auto"` applies those templates'
defaults for CUDA; and the sum of a whole array, which they split over two kernels.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from te import Buffer, Compute, Max, Reduce, Sum, Var, exp, float32
from loopnest import LoopNest
from loopnest.stmt import Block, For, Store
from codegen import build
from codegen.cuda import nvcc_available

M, N = 8, 256
X = Buffer("X", (M, N), float32)
mx = Reduce("mx", (M,), Max(), lambda i, k: X[i, k], (N,))
e = Compute("e", (M, N), lambda i, j: exp(X[i, j] - mx[i]))
s = Reduce("s", (M,), Sum(), lambda i, k: e[i, k], (N,))
Y = Compute("Y", (M, N), lambda i, j: e[i, j] / s[i])

nest = LoopNest([Y])
# Each tensor: rows on blocks; the elementwise ones put columns on threads.
for t in (mx, e, s, Y):
    loops = nest.get_loops_for(t)
    nest.set_gpu_block_index(loops[0], 0)
    if not t.is_reduction:
        nest.set_gpu_thread_index(loops[1], 0)
print(nest)

kernel = build(nest, [X, Y], target="cuda")
print("\n== CUDA C (first kernel) ==")
src = kernel.source
print(src[src.index("__global__"):][:600])
print("\nlaunches (name, grid, block):", kernel.launch_dims())

if nvcc_available():
    for arch in ("sm_80", "sm_90"):
        report = kernel.compile(arch)
        regs = {name: k["registers"] for name, k in sorted(report["kernels"].items())}
        print(f"{arch}: registers per kernel {regs}, shared memory {report['shared_bytes']} bytes, "
              f"spills {report['spill_stores']}")
else:
    print("nvcc not found: compile check skipped")

x = np.random.default_rng(0).standard_normal((M, N)).astype(np.float32)
y = np.empty_like(x)
build(nest, [X, Y], target="ireval")(x, y)
z = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
assert np.allclose(y, z / z.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
print("\nthe GPU-bound nest agrees with numpy on IREval")

try:
    y_gpu = np.empty_like(x)
    kernel(x, y_gpu)
    assert np.allclose(y_gpu, y, rtol=1e-5, atol=1e-7)
    print("ran on the GPU: agrees")
except RuntimeError as err:
    print("no GPU here:", str(err).splitlines()[0])

# Without a GPU, the host emulation runs the CUDA C itself on the CPU (g++ and the CUDA
# headers): each thread a fiber, run in a fixed order, every access of global or shared
# memory checked for races (two threads touching one element between barriers, one of them
# changing it, would be an EmulationError naming the element and both threads). A schedule
# that races is refused when it is written; the check guards the code generator itself, and
# the random tester runs its CUDA schedules through it.
from codegen.cuda.emulate import host_compiler, run_on_host
if host_compiler() is not None and nvcc_available():
    y_emu = np.empty_like(x)
    run_on_host(kernel, x, y_emu)
    assert np.allclose(y_emu, y, rtol=1e-5, atol=1e-7)
    print("ran on the host emulation: agrees, no race")
else:
    print("g++ or the CUDA headers not found: host emulation skipped")

# A host loop: S[i + 1, j] = S[i, j] + X[i + 1, j]. The columns of a row run in parallel on
# the GPU; the serial row loop around them is run by the launcher, one launch per row.
S = Buffer("S", (M, N), float32)
i, j, j0 = Var("i"), Var("j"), Var("j0")
scan = LoopNest(Block([For(j0, 0, N, Store(S, (0, j0), X[0, j0])),
                       For(i, 0, M - 1, For(j, 0, N, Store(S, (i + 1, j), S[i, j] + X[i + 1, j])))]),
                outputs=[S])
for var in (j0, j):
    jo, ji = scan.split_with_mask(scan.loop(var), 128)
    scan.set_gpu_block_index(jo, 0)
    scan.set_gpu_thread_index(ji, 0)
scan_kernel = build(scan, [X, S], target="cuda")
print("\n" + scan_kernel.module.plan.describe_kernels())
print("launches:", len(scan_kernel.launch_dims()))
s_out = np.empty_like(x)
build(scan, [X, S], target="ireval")(x, s_out)
assert np.allclose(s_out, np.cumsum(x, axis=0), rtol=1e-5, atol=1e-5)
print("the running sum agrees with numpy on IREval")

# A 3x3 convolution: the CUDA space gives it the direct-convolution template (each block
# copies the input window of one input channel at a time into shared memory; output
# channels and pixels per thread, and threads per block, are the knobs).
from tune import auto_space

Xc = Buffer("Xc", (1, 4, 10, 10), float32)
Wc = Buffer("Wc", (8, 4, 3, 3), float32)
Yc = Reduce("Yc", (1, 8, 8, 8), Sum(), lambda b, k, y, x, c, r, t: Xc[b, c, y + r, x + t] * Wc[k, c, r, t], (4, 3, 3))
space = auto_space([Yc], "cuda")
print("\nconvolution knobs:", {k.name: k.options for k in space.knobs})
conv = space.apply(space.seeds[0])
print(build(conv, [Xc, Wc, Yc], target="cuda").module.plan.describe_kernels())
rng = np.random.default_rng(0)
xc, wc = rng.standard_normal((1, 4, 10, 10)).astype(np.float32), rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
yc = np.zeros((1, 8, 8, 8), np.float32)
build(conv, [Xc, Wc, Yc], target="ireval")(xc, wc, yc)
want = sum(np.einsum("bchw,kc->bkhw", xc[:, :, r:r + 8, t:t + 8], wc[:, :, r, t]) for r in range(3) for t in range(3))
assert np.allclose(yc, want, rtol=1e-4, atol=1e-4)
print("the seed's convolution agrees with numpy on IREval")

# No schedule written: build(..., target="cuda", schedule="auto") schedules a copy of the nest
# with the templates' defaults (the CUDA space's seed) and keeps the per-tensor report.
auto_kernel = build(LoopNest([Y]), [X, Y], target="cuda", schedule="auto")
print("\n" + str(auto_kernel.auto_schedule_report))
print("launches (name, grid, block):", auto_kernel.launch_dims())

# The sum of a whole array has one output: a block for it would leave the GPU idle. The
# templates split its terms over many blocks of partial sums, then add the partials in a
# second kernel (loopnest.auto.gpu.grid_reduce).
Big = Buffer("Big", (2048, 1024), "float32")
Total = Reduce("Total", (1,), Sum(), lambda z, i, j: Big[i, j], (2048, 1024))
sum_kernel = build(LoopNest([Total]), [Big, Total], target="cuda", schedule="auto")
print("\n" + str(sum_kernel.auto_schedule_report))
print("launches (name, grid, block):", sum_kernel.launch_dims())
print("OK")
