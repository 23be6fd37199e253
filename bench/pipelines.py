"""Two Halide-style image pipelines for the benchmark: a 13-stage stencil chain and a
5-level image pyramid (a local-Laplacian-like detail boost), each with a hand schedule and
a numpy float64 reference, in the shape of ``bench.kernels``' workloads.

* ``make_stencil((h, w))``: thirteen stages over a 2-D image, each reading the previous one
  at neighbouring offsets: horizontal 3-tap blurs, vertical 3-tap blurs and 3 x 3 sharpens,
  in turn; every stage shrinks the domain by its halo, so the input is larger than the
  output (``STENCIL_HALO``) and no index is ever clamped.
* ``make_pyramid((h, w))``: a Gaussian pyramid of ``PYRAMID_LEVELS`` levels (each level
  downsampled by 2 with the [1 3 3 1] / 8 filter in x, then in y, indices clamped at the
  edges), then upsampled back level by level (linear interpolation, [1 3] / 4 and [3 1] / 4
  taps) and combined with the Laplacian of each level scaled by ``PYRAMID_BOOST``. The
  height and width must be multiples of ``2 ** PYRAMID_LEVELS``.

>>> spec = make_stencil((16, 24))
>>> spec.inputs["A"].shape, spec.out_shapes
((32, 42), {'S13': (16, 24)})
>>> spec = make_pyramid((32, 64))
>>> spec.out_shapes
{'out0': (32, 64)}
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from te import Buffer, Compute, float32, maximum, minimum
from loopnest import LoopNest, Target
from loopnest.target import resolve_target

# bench.kernels imports this module to list its workloads: its names are imported where
# they are used, so either module may be imported first
if TYPE_CHECKING:
    from .kernels import Spec

__all__ = ["STENCIL_STAGES", "STENCIL_KINDS", "STENCIL_HALO", "stencil_kinds", "make_stencil",
           "hand_stencil", "PYRAMID_LEVELS", "PYRAMID_BOOST", "make_pyramid", "hand_pyramid"]

# ---------------------------------------------------------------------------------------
# the stencil chain
# ---------------------------------------------------------------------------------------
STENCIL_STAGES = 13
#: the stage kinds in turn: a horizontal 3-tap blur, a vertical one, a 3 x 3 sharpen
STENCIL_KINDS = ("x", "y", "xy")


def stencil_kinds() -> list[str]:
    """The kind of each stage of the stencil chain, ``S1`` first.

    >>> stencil_kinds()[:4]
    ['x', 'y', 'xy', 'x']
    """
    return [STENCIL_KINDS[s % len(STENCIL_KINDS)] for s in range(STENCIL_STAGES)]


def _halo() -> tuple[int, int]:
    kinds = stencil_kinds()
    return 2 * sum(k in ("y", "xy") for k in kinds), 2 * sum(k in ("x", "xy") for k in kinds)


#: (rows, columns) the input has beyond the output: two per stage reading in that direction
STENCIL_HALO = _halo()


def _stage_expr(kind: str, p, y, x):
    if kind == "x":
        return p[y, x] * 0.25 + p[y, x + 1] * 0.5 + p[y, x + 2] * 0.25
    if kind == "y":
        return p[y, x] * 0.25 + p[y + 1, x] * 0.5 + p[y + 2, x] * 0.25
    return p[y + 1, x + 1] * 2.0 - (p[y, x + 1] + p[y + 2, x + 1] + p[y + 1, x] + p[y + 1, x + 2]) * 0.25


def _stage_numpy(kind: str, p: np.ndarray) -> np.ndarray:
    if kind == "x":
        return p[:, :-2] * 0.25 + p[:, 1:-1] * 0.5 + p[:, 2:] * 0.25
    if kind == "y":
        return p[:-2] * 0.25 + p[1:-1] * 0.5 + p[2:] * 0.25
    return p[1:-1, 1:-1] * 2.0 - (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:]) * 0.25


def make_stencil(shape) -> Spec:
    """The 13-stage stencil chain producing an ``h x w`` image ``S13`` from an input ``A`` of
    ``(h, w) + STENCIL_HALO``; stage ``S<k>`` reads stage ``S<k-1>`` (``S0`` is the input
    scaled to [0, 1])."""
    from .kernels import Spec, _rng
    h, w = shape
    hy, hx = STENCIL_HALO
    A = Buffer("A", (h + hy, w + hx), float32)
    prev = Compute("S0", (h + hy, w + hx), lambda y, x: A[y, x] * (1.0 / 255))
    ph, pw = h + hy, w + hx
    for s, kind in enumerate(stencil_kinds(), start=1):
        ph -= 2 if kind in ("y", "xy") else 0
        pw -= 2 if kind in ("x", "xy") else 0
        prev = Compute(f"S{s}", (ph, pw), lambda y, x, p=prev, k=kind: _stage_expr(k, p, y, x))
    d = {"A": _rng().uniform(0, 255, (h + hy, w + hx)).astype(np.float32)}

    def run(a, dt):
        p = a.astype(dt) * dt(1.0 / 255)
        for kind in stencil_kinds():
            p = _stage_numpy(kind, p)
        return p

    def torch_fn(t, x):       # the same slices and arithmetic on tensors
        a = t.from_numpy(x["A"])

        def call():
            p = a * (1.0 / 255)
            for kind in stencil_kinds():
                p = _stage_numpy(kind, p)
            return p
        return call

    return Spec(f"{h}x{w}", [prev], [A, prev], d, {prev.name: (h, w)},
                lambda x: {prev.name: run(x["A"], np.float64)}, lambda x: run(x["A"], np.float32), torch_fn,
                flops=STENCIL_STAGES * 5 * h * w, bytes=4 * ((h + hy) * (w + hx) + h * w), tol=1e-4)


def hand_stencil(nest: LoopNest, spec: Spec, rows: int = 16, target: Target | None = None) -> None:
    """Halide's schedule for a stencil chain: the input scaling inlined, every other stage
    computed per strip of ``rows`` output rows (each strip recomputes the halo rows it
    needs, in strip-sized buffers per thread), strips in parallel, rows vectorized at the
    float32 lanes of ``target`` (``None``: the host)."""
    from .kernels import _tensors, vectorize_innermost
    lanes = resolve_target(target).lanes("float32")
    t = _tensors(nest)
    (out,) = spec.outputs
    nest.compute_inline(t["S0"])
    y, _ = nest.get_loops_for(out)
    yo, _ = nest.split_with_mask(y, rows)
    for s in range(STENCIL_STAGES - 1, 0, -1):      # consumers first
        nest.compute_at(t[f"S{s}"], yo)
    nest.parallelize(yo)
    for s in range(1, STENCIL_STAGES + 1):
        vectorize_innermost(nest, t[f"S{s}"], lanes)


# ---------------------------------------------------------------------------------------
# the pyramid
# ---------------------------------------------------------------------------------------
PYRAMID_LEVELS = 5
#: the factor of each level's detail (Laplacian) in the output
PYRAMID_BOOST = 1.5


def _down(name: str, f, axis: int, shape):
    """``f`` downsampled by 2 along ``axis`` with the [1 3 3 1] / 8 filter (edges clamped)."""
    n = f.shape[axis]

    def tap(idx, off):
        j = idx * 2 + off
        return maximum(j, 0) if off < 0 else (minimum(j, n - 1) if off > 1 else j)

    if axis == 1:
        return Compute(name, shape, lambda y, x: (f[y, tap(x, -1)] + f[y, tap(x, 2)]) * 0.125
                       + (f[y, x * 2] + f[y, x * 2 + 1]) * 0.375)
    return Compute(name, shape, lambda y, x: (f[tap(y, -1), x] + f[tap(y, 2), x]) * 0.125
                   + (f[y * 2, x] + f[y * 2 + 1, x]) * 0.375)


def _up(name: str, f, axis: int, shape):
    """``f`` upsampled by 2 along ``axis`` by linear interpolation: output ``2i`` is
    ``(f[i - 1] + 3 f[i]) / 4``, output ``2i + 1`` is ``(3 f[i] + f[i + 1]) / 4`` (edges clamped)."""
    n = f.shape[axis]

    def near(idx):
        return idx // 2

    def far(idx):           # i - 1 for an even output, i + 1 for an odd one
        return minimum(maximum(idx // 2 - 1 + (idx % 2) * 2, 0), n - 1)

    if axis == 1:
        return Compute(name, shape, lambda y, x: f[y, near(x)] * 0.75 + f[y, far(x)] * 0.25)
    return Compute(name, shape, lambda y, x: f[near(y), x] * 0.75 + f[far(y), x] * 0.25)


def make_pyramid(shape) -> Spec:
    """The ``PYRAMID_LEVELS``-level pyramid of an ``h x w`` image ``A``: levels ``g0`` (the
    input scaled to [0, 1]) to ``g5``, each through a horizontal ``dx<l>`` then a vertical
    downsampling; then from the coarsest level up, ``out<l>`` is ``out<l+1>`` upsampled
    (``uox<l>``, ``uo<l>``) plus ``PYRAMID_BOOST`` times the level's Laplacian ``g<l>`` minus
    ``g<l+1>`` upsampled (``ugx<l>``, ``ug<l>``). ``out0`` is the output."""
    from .kernels import Spec, _rng
    h, w = shape
    m = 1 << PYRAMID_LEVELS
    if h % m or w % m or h <= 0 or w <= 0:
        raise ValueError(f"make_pyramid: the sizes {h} x {w} must be positive multiples of {m} "
                         f"(2 ** PYRAMID_LEVELS)")
    A = Buffer("A", (h, w), float32)
    g = [Compute("g0", (h, w), lambda y, x: A[y, x] * (1.0 / 255))]
    for lv in range(1, PYRAMID_LEVELS + 1):
        ph, pw = g[-1].shape
        dx = _down(f"dx{lv}", g[-1], 1, (ph, pw // 2))
        g.append(_down(f"g{lv}", dx, 0, (ph // 2, pw // 2)))
    out = g[-1]
    for lv in range(PYRAMID_LEVELS - 1, -1, -1):
        ph, pw = g[lv].shape
        ugx = _up(f"ugx{lv}", g[lv + 1], 1, (ph // 2, pw))
        ug = _up(f"ug{lv}", ugx, 0, (ph, pw))
        uox = _up(f"uox{lv}", out, 1, (ph // 2, pw))
        uo = _up(f"uo{lv}", uox, 0, (ph, pw))
        out = Compute(f"out{lv}", (ph, pw), lambda y, x, gl=g[lv], ug=ug, uo=uo:
                      uo[y, x] + (gl[y, x] - ug[y, x]) * PYRAMID_BOOST)
    d = {"A": _rng().uniform(0, 255, (h, w)).astype(np.float32)}

    def run(a, dt):
        gs = [a.astype(dt) * dt(1.0 / 255)]
        for _ in range(PYRAMID_LEVELS):
            gs.append(_np_down(_np_down(gs[-1], 1), 0))
        o = gs[-1]
        for lv in range(PYRAMID_LEVELS - 1, -1, -1):
            o = _np_up(_np_up(o, 1), 0) + (gs[lv] - _np_up(_np_up(gs[lv + 1], 1), 0)) * dt(PYRAMID_BOOST)
        return o

    pixels = h * w * 4 / 3         # every level together
    return Spec(f"{h}x{w}", [out], [A, out], d, {"out0": (h, w)},
                lambda x: {"out0": run(x["A"], np.float64)}, lambda x: run(x["A"], np.float32),
                flops=30 * pixels, bytes=8 * h * w, tol=1e-4)


def _np_down(f: np.ndarray, axis: int) -> np.ndarray:
    f = np.moveaxis(f, axis, 0)
    n = f.shape[0]
    i = np.arange(n // 2)
    r = (f[np.maximum(2 * i - 1, 0)] + f[np.minimum(2 * i + 2, n - 1)]) * 0.125 + (f[2 * i] + f[2 * i + 1]) * 0.375
    return np.moveaxis(r, 0, axis)


def _np_up(f: np.ndarray, axis: int) -> np.ndarray:
    f = np.moveaxis(f, axis, 0)
    n = f.shape[0]
    o = np.arange(2 * n)
    far = np.clip(o // 2 - 1 + (o % 2) * 2, 0, n - 1)
    return np.moveaxis(f[o // 2] * 0.75 + f[far] * 0.25, 0, axis)


def hand_pyramid(nest: LoopNest, spec: Spec, target: Target | None = None,
                 min_parallel_work: int = 1 << 20) -> None:
    """The scaling of the input and the Laplacian's upsampling of each level (``ugx``, ``ug``)
    and the output's vertical upsampling (``uo``) inlined into their consumers (``out``
    then reads ``g<l+1>`` and ``uox<l>`` directly); every other stage computed over its whole
    level, its rows in parallel where the level has at least ``min_parallel_work`` elements.

    Only the rows that read contiguously are vectorized (at the float32 lanes of ``target``,
    ``None``: the host): the vertical downsamplings ``g<l>``. The other stages read
    their rows at ``2x - 1 .. 2x + 2`` or ``x // 2`` with the edges clamped, and vectorizing
    them by force makes gathers (four times slower than LLVM's own choice); computing the
    stages of a level per strip of rows of its consumer measured slower too, at both sizes.
    """
    from .kernels import _tensors, vectorize_innermost
    lanes = resolve_target(target).lanes("float32")
    t = _tensors(nest)
    nest.compute_inline(t["g0"])
    for lv in range(PYRAMID_LEVELS):
        for name in ("ug", "ugx", "uo"):
            nest.compute_inline(t[f"{name}{lv}"])
    kept = [f"{n}{lv}" for lv in range(1, PYRAMID_LEVELS + 1) for n in ("dx", "g")]
    kept += [f"{n}{lv}" for lv in range(PYRAMID_LEVELS - 1, -1, -1) for n in ("uox", "out")]
    for name in kept:
        tensor = t[name]
        h, w = tensor.shape
        if h * w >= min_parallel_work:
            nest.parallelize(nest.get_loops_for(tensor)[0])
        if name.startswith("g"):
            vectorize_innermost(nest, tensor, lanes)
