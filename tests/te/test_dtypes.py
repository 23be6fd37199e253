import numpy as np
import ml_dtypes
import pytest

from te import Dtype, as_dtype, bfloat16, bool_, float16, float32, float64, int8, int32, int64, uint8, uint64
from te.dtypes import ALL_SCALAR_DTYPES, float8_e4m3, float8_e5m2, tf32


@pytest.mark.parametrize("dt", ALL_SCALAR_DTYPES)
def test_name_round_trip(dt):
    assert as_dtype(dt.name) is dt or as_dtype(dt.name) == dt
    assert as_dtype(dt) is dt


def test_vector_names():
    v = float32.with_lanes(4)
    assert str(v) == "float32x4"
    assert v.lanes == 4 and v.element == float32
    assert as_dtype("int8x16") == Dtype("int", 8, 16)
    assert as_dtype("float16x2").lanes == 2


@pytest.mark.parametrize("np_dt,dt", [(np.float32, float32), (np.float64, float64), (np.int8, int8),
                                      (np.int32, int32), (np.int64, int64), (np.uint8, uint8),
                                      (np.uint64, uint64), (np.bool_, bool_), (np.float16, float16),
                                      (ml_dtypes.bfloat16, bfloat16), (ml_dtypes.float8_e4m3fn, float8_e4m3),
                                      (ml_dtypes.float8_e5m2, float8_e5m2)])
def test_numpy_round_trip(np_dt, dt):
    assert as_dtype(np_dt) == dt
    assert as_dtype(np.dtype(np_dt)) == dt
    assert dt.numpy == np.dtype(np_dt)


def test_tf32_is_stored_as_float32():
    assert tf32.numpy == np.dtype(np.float32)
    assert tf32.is_float and tf32.itemsize == 4


@pytest.mark.parametrize("bad", ["float13", "complex64", None, 3, "int32x", "int32x1", object()])
def test_unknown_dtype_raises_type_error(bad):
    with pytest.raises(TypeError):
        as_dtype(bad)


def test_ranges():
    assert int8.min_value() == -128 and int8.max_value() == 127
    assert uint8.max_value() == 255
    assert float16.max_value() == 65504.0
    assert bfloat16.is_lowp_float and not float32.is_lowp_float


def test_bad_construction():
    with pytest.raises(TypeError):
        Dtype("int", 7)
    with pytest.raises(TypeError):
        Dtype("float", 32, 0)
