"""The LLVM CPU backend: prepared loop nests -> LLVM IR (llvmlite) -> host machine code.

``build(nest, args, target="llvm", **options)`` calls ``build_llvm``; the kernel it returns
is called like every other kernel. Options: ``fast_math`` (default False), ``fp_contract``
(default True: a float multiply and the add using it may fuse into one FMA, one rounding),
``parallel_runtime`` ("pool", "gomp", "threads" or "serial"; default: the native pool on
Linux x86-64/AArch64, else gomp when libgomp is installed, or ``TE_LLVM_PARALLEL_RUNTIME``), ``opt_level`` (0-3, default 3), ``cache`` (in-memory
compile cache, default True), ``cache_dir`` (on-disk object cache, also
``TE_LLVM_CACHE_DIR``: a directory of this user's that others cannot write, else a
``CacheWarning`` and no caching; a file there raises ``BuildError``; see ``disk_cache``),
``noalias`` (default: assume distinct arrays, checked per call with a fallback variant for
overlapping ones), ``name`` (kernel name). ``set_num_threads(n)`` sets
the threads of parallel loops; ``cache_stats()`` / ``clear_cache()`` inspect the compile cache.

>>> import numpy as np
>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> from codegen import build
>>> A = Buffer("A", (8,), "float32")
>>> B = Compute("B", (8,), lambda i: A[i] * 2.0)
>>> k = build(LoopNest([B]), [A, B], target="llvm")
>>> b = np.zeros(8, np.float32); k(np.arange(8, dtype=np.float32), b); b[:3].tolist()
[0.0, 2.0, 4.0]
>>> "fmul contract float" in k.source
True

Modules: ``emit`` (statements and expressions -> ``llvmlite.ir``), ``fnstate`` (the function
being emitted), ``arith`` (operators and intrinsics on register values), ``casts`` (dtype
conversions), ``lowp`` (bfloat16 / tf32 / float8 conversions in integer IR), ``mathfns``
(inline vectorisable float32 exp), ``parallel`` (outlined parallel loops and their runtime
calls), ``outline`` (captures of parallel bodies), ``entry`` (overlap check and Python entry
point), ``streaming`` (non-temporal stores), ``decls`` (declarations), ``types``, ``jit``
(target machine, O3 pipeline, MCJIT, caches), ``disk_cache`` (the checked on-disk object
cache), ``runtime``
(parallel loops), ``pool`` (the native thread pool), ``cache_key`` (structural keys),
``build`` (``build_llvm`` and ``LLVMKernel``).
"""
from .build import LLVMKernel, build_llvm, streaming_store_threshold
from .jit import cache_stats, clear_cache
from .runtime import get_num_threads, set_num_threads

__all__ = ["build_llvm", "LLVMKernel", "cache_stats", "clear_cache", "set_num_threads", "get_num_threads",
           "streaming_store_threshold"]
