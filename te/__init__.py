"""te: the tensor-expression language (dtypes, expressions, buffers, tensors, reductions).

>>> from te import Var, Buffer, Compute, Reduce, Sum, float32, int32
>>> N = Var("N", int32)
>>> A = Buffer("A", (N, 64), float32)
>>> B = Compute("B", (N, 64), lambda i, j: A[i, j] * 2.0 + 1.0)
>>> C = Reduce("C", (N,), Sum(), lambda i, k: B[i, k], (64,))
"""
from .dtypes import (ALL_SCALAR_DTYPES, Dtype, as_dtype, bfloat16, bool_, float8_e4m3, float8_e5m2,
                     float16, float32, float64, int8, int16, int32, int64, tf32, uint8, uint16, uint32,
                     uint64)
from .expr import (Add, And, Broadcast, Call, Cast, CmpOp, Div, EQ, Expr, ExtractLane, FloatImm, FloorDiv,
                   FloorMod, GE, GT, IfThenElse, IntImm, LE, LT, Let, Load, MakeVector, Mod, Mul, NE, Not, Or,
                   Ramp, Select, Sub, Var, as_expr, const, floordiv, floormod, if_then_else, logical_and, logical_not,
                   logical_or, structural_equal, structural_key, substitute, truncdiv, truncmod)
from .expr import Max as MaxExpr, Min as MinExpr
from .intrinsics import (abs, acos, asin, atan, atan2, cast, ceil, clamp, copysign, cos, cosh, erf, erfc,
                         exp, exp2, expm1, floor, fmod, isnan, lerp, lgamma, log, log10, log1p, log2,
                         maximum, minimum, pow, power, round, rsqrt, select, sigmoid, sin, sinh, sqrt,
                         tan, tanh, trunc)
from .bitops import (bitcast, bitwise_and, bitwise_not, bitwise_or, bitwise_xor, shift_left,
                     shift_right)
from .tensor import Buffer, Compute, Max, Min, Prod, Reduce, Reducer, Sum, Tensor
from .multi import ArgMax, ArgMin, TupleReducer, argmax, argmin
from .simplify import simplify
from .extern import Extern, ExternFunc, ExternTensor
from .recursion import ExpressionDepthError

__all__ = [name for name in dir() if not name.startswith("_")]
