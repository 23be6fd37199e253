"""The automatic scheduler's convolution tile along the output channels
(``templates.channel_contraction``, chosen by ``schedule.channel_params``): where the native
vectors divide the channels but not the columns, every vector is full."""
import numpy as np
import pytest

from bench.kernels import make_conv2d
from codegen import build
from loopnest import LoopNest, ScheduleError, Target
from loopnest.auto import channel_params
from loopnest.auto.templates import channel_contraction
from te import Buffer, Reduce, Sum, Var

AVX2 = Target(cpu="avx2", vector_bits=256, vector_registers=16, cores=2)
AVX512 = Target(cpu="avx512", vector_bits=512, vector_registers=32, cores=2)


def _conv(n=1, c=4, h=6, w=12, k=32, dims=None):
    X = Buffer("X", (n, c, h + 2, w + 2), "float32")
    W = Buffer("W", (k, c, 3, 3), "float32")
    Y = Reduce("Y", dims or (n, k, h, w), Sum(), lambda b, co, y, x, ci, ry, rx:
               X[b, ci, y + ry, x + rx] * W[co, ci, ry, rx], (c, 3, 3))
    return X, W, Y


def _reference(x, w):
    n, c, hp, wp = x.shape
    k, h, wd = w.shape[0], hp - 2, wp - 2
    out = np.zeros((n, k, h, wd))
    for ry in range(3):
        for rx in range(3):
            out += np.einsum("nchw,kc->nkhw", x[:, :, ry:ry + h, rx:rx + wd].astype(np.float64), w[:, :, ry, rx])
    return out


@pytest.mark.parametrize("n,k,params", [
    (1, 32, {"lanes": 8, "vec_c": 2, "cols": 4, "par": True, "cores": 2}),    # the rows in two parallel blocks
    (2, 16, {"lanes": 8, "vec_c": 1, "cols": 6, "par": True}),      # the batch loop parallel, a pack per image
    (4, 16, {"lanes": 8, "vec_c": 1, "cols": 6, "par": True, "cores": 2}),     # the images in two blocks
    (1, 32, {"lanes": 4, "vec_c": 4, "cols": 3, "par": False}),
])
@pytest.mark.parametrize("target", ["llvm", "ireval"])
def test_channel_tiles_compute_the_convolution(n, k, params, target):
    X, W, Y = _conv(n=n, k=k)
    nest = LoopNest([Y])
    channel_contraction(nest, Y, params)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 4, 8, 14)).astype(np.float32)
    w = rng.standard_normal((k, 4, 3, 3)).astype(np.float32)
    y = np.full((n, k, 6, 12), np.nan, np.float32)
    build(nest, [X, W, Y], target=target)(x, w, y)
    np.testing.assert_allclose(y, _reference(x, w), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", ["llvm", "ireval"])
def test_column_tiles_in_blocks_when_one_row_and_one_channel_tile(target):
    """One output row and one tile of channels: the column tiles are the parallel loop, in one
    block per core, and the accumulator goes inside the block's loop."""
    X, W, Y = _conv(h=1, w=16, k=16)
    nest = LoopNest([Y])
    channel_contraction(nest, Y, {"lanes": 8, "vec_c": 2, "cols": 4, "par": True, "cores": 2})
    assert [lp.extent for lp in nest.get_all_loops() if lp.kind == "parallel"] == [2]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 4, 3, 18)).astype(np.float32)
    w = rng.standard_normal((16, 4, 3, 3)).astype(np.float32)
    y = np.full((1, 16, 1, 16), np.nan, np.float32)
    build(nest, [X, W, Y], target=target)(x, w, y)
    np.testing.assert_allclose(y, _reference(x, w), rtol=1e-4, atol=1e-4)


def test_a_tile_that_does_not_divide_is_refused_before_any_change():
    _, _, Y = _conv(k=32)
    nest = LoopNest([Y])
    before = str(nest)
    with pytest.raises(ScheduleError, match="does not divide Y's 32 channels x 12 columns"):
        channel_contraction(nest, Y, {"lanes": 8, "vec_c": 2, "cols": 5, "par": False})
    assert str(nest) == before and not nest.history
    with pytest.raises(ScheduleError, match="takes a batch dimension"):
        X = Buffer("X", (4, 8, 14), "float32"); W = Buffer("W", (16, 4, 3, 3), "float32")
        Y3 = Reduce("Y3", (16, 6, 12), Sum(), lambda co, y, x, ci, ry, rx: X[ci, y + ry, x + rx] * W[co, ci, ry, rx],
                    (4, 3, 3))
        channel_contraction(LoopNest([Y3]), Y3, {"lanes": 8, "vec_c": 1, "cols": 4, "par": False})


def test_an_operand_read_by_an_expression_of_the_channel_is_refused_before_any_change():
    X = Buffer("X", (1, 4, 8, 14), "float32"); W = Buffer("W", (33, 4, 3, 3), "float32")
    Y = Reduce("Y", (1, 32, 6, 12), Sum(), lambda b, co, y, x, ci, ry, rx:
               X[b, ci, y + ry, x + rx] * W[co + 1, ci, ry, rx], (4, 3, 3))
    nest = LoopNest([Y])
    with pytest.raises(ScheduleError, match="reads W by its output channel otherwise"):
        channel_contraction(nest, Y, {"lanes": 8, "vec_c": 2, "cols": 4, "par": False})
    assert not nest.history
    assert channel_params(Y, AVX512) is None


def test_where_the_channel_tiles_apply():
    _, _, Y = _conv(w=56, k=64)
    assert channel_params(Y, AVX512) == {"lanes": 16, "vec_c": 2, "cols": 8, "par": True, "cores": 2}
    assert channel_params(Y, AVX2) is None                            # 8 lanes divide 56 columns
    _, _, odd = _conv(w=28, k=48)                                     # three vectors of channels
    assert channel_params(odd, AVX512) == {"lanes": 16, "vec_c": 1, "cols": 14, "par": True, "cores": 2}
    _, _, narrow = _conv(w=12, k=8)                                   # half a vector of channels
    assert channel_params(narrow, AVX512) is None
    _, _, prime = _conv(w=13, k=32)                                   # no divisor of 13 from 4 to 8 columns
    assert channel_params(prime, AVX512) is None
    N = Var("N")
    _, _, symbolic = _conv(w=12, k=32, dims=(1, 32, 6, N))
    assert channel_params(symbolic, AVX512) is None


def test_the_automatic_schedule_reports_the_channel_tile():
    spec = make_conv2d((1, 8, 4, 12, 32))
    nest = LoopNest(spec.outputs)
    report = nest.auto_schedule(AVX512)
    assert report["Y"].choice == \
        "register-blocked 2 vectors of 16 channels x 6 columns, W packed channels last, parallel"
    assert "12 columns leave a partial vector of 16 lanes" in report["Y"].reason
    outs = {"Y": np.full(spec.out_shapes["Y"], np.nan, np.float32)}
    build(nest, spec.args, target="llvm")(**spec.inputs, **outs)
    np.testing.assert_allclose(outs["Y"], spec.reference(spec.inputs)["Y"], rtol=1e-4, atol=1e-4)


def test_the_elementwise_template_parallelizes_the_first_loop_with_work():
    """A padding copy of a batch of one: ``par`` makes the channel loop parallel, not the batch
    loop of one iteration (the tuning space's convolution was 4% slower than auto_schedule's)."""
    from te import Buffer, Compute, if_then_else
    from loopnest import LoopNest
    from loopnest.auto.templates import elementwise
    X = Buffer("X", (1, 8, 6, 6), "float32")
    P = Compute("P", (1, 8, 8, 8), lambda b, c, y, x: if_then_else(
        (y >= 1) & (y <= 6) & (x >= 1) & (x <= 6), X[b, c, y - 1, x - 1], 0.0))
    nest = LoopNest([P])
    elementwise(nest, P, {"vec": 4, "par": True})
    assert [lp.kind for lp in nest.get_loops_for(P)] == ["serial", "parallel", "serial", "serial", "vectorized"]
