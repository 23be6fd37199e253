"""The automatic scheduler: ``classify`` a tensor, the schedule ``templates`` shared with the
tuning space, and ``auto_schedule`` (also ``LoopNest.auto_schedule``).

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest, Target
>>> A = Buffer("A", (256,), "float32")
>>> nest = LoopNest([Compute("B", (256,), lambda i: A[i] + 1.0)])
>>> print(auto_schedule(nest, Target(vector_bits=256, cores=1)))
B: vectorized 8 wide (element-wise)
"""
from .classify import classify, const_extent, consumers_of, sliced_loop
from .schedule import (AutoScheduleReport, TensorChoice, auto_schedule, channel_params, contraction_params,
                       register_tile, vector_lanes)

__all__ = ["classify", "const_extent", "consumers_of", "sliced_loop", "auto_schedule", "AutoScheduleReport",
           "TensorChoice", "channel_params", "contraction_params", "register_tile", "vector_lanes"]
