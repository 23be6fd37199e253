"""Scheduling transforms, one module per family; LoopNest methods call these.

split.py (split_with_tail, split_with_mask, tile, slice_head, slice_tail, normalize),
reorder.py, fuse.py (fuse, flatten), distribute.py (distribute, and the distribution of the
statements in the way that reorder and tile run), loop_kinds.py (vectorize, unroll,
parallelize, GPU binding), inline.py, compute_at.py, cache.py, rfactor.py, privatize.py (a
private copy of an accumulated buffer per chunk of a loop), dead_stores.py.

They take the nest's state and ``Loop`` handles (``loopnest.state``, ``loopnest.loop``,
below them) and never import the ``LoopNest`` facade (``loopnest.nest``, above them).
"""
