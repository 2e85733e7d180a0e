"""The Kineto event vocabulary: which ``ph``/``cat`` makes which kind of row.

One place for what a Chrome-trace event of the PyTorch Profiler means to nsysdoc (``docs/kineto.md``):
the categories of the complete (``X``) events of PyTorch >= 1.13 and 1.8-1.12, the flow categories
that tie a launch to its GPU operation, the ``[memory]`` instant events, and the kind codes every
parser engine (:mod:`.parse_slow`, :mod:`.parse_msgspec`, :mod:`.parse_arrow`) and the table
mapping (:mod:`.mapping`) share. No parsing here.
"""
from __future__ import annotations

#: What Kineto cannot record (``traced`` key -> what it is); ``cuda_sync`` only when absent.
NOT_RECORDED = {
    "osrt": "OS runtime calls (poll, futex, read, ...)",
    "gpu_metrics": "GPU metrics (SM active, tensor-core activity)",
    "cuda_sync": "CUDA synchronization records",
}

# event kinds (by ``cat``: PyTorch >= 1.13 names, and the 1.8-1.12 names)
K_KERNEL, K_MEMCPY, K_MEMSET, K_RUNTIME, K_DRIVER, K_SYNC, K_HOST, K_SPAN, K_OVERHEAD = range(9)
CATEGORIES = {
    "kernel": K_KERNEL, "Kernel": K_KERNEL,
    "gpu_memcpy": K_MEMCPY, "Memcpy": K_MEMCPY,
    "gpu_memset": K_MEMSET, "Memset": K_MEMSET,
    "cuda_runtime": K_RUNTIME, "Runtime": K_RUNTIME,
    "cuda_driver": K_DRIVER, "Driver": K_DRIVER,
    "cuda_sync": K_SYNC,
    "cpu_op": K_HOST, "Operator": K_HOST, "user_annotation": K_HOST, "python_function": K_HOST,
    "Trace": K_SPAN,
    "overhead": K_OVERHEAD,
}
#: ``domain`` of host ranges by category (user annotations are like NVTX ranges of no domain).
HOST_DOMAIN = {"cpu_op": "cpu_op", "Operator": "cpu_op", "user_annotation": "", "python_function": "python_function"}
#: PyTorch's allocator events (``profile_memory=True``): instant events (``ph: "i"``) named
#: ``[memory]``, whatever their ``cat`` (none before PyTorch 1.13, ``cpu_instant_event`` after);
#: a row of the memory table (issue 47), outside the X kinds and the flow/metadata codes
K_MEM = 12
MEMORY_EVENT = "[memory]"
#: canonical category name of each kind (``Trace.tables``, dropped-row labels)
TABLE_NAMES = {K_KERNEL: "kernel", K_MEMCPY: "gpu_memcpy", K_MEMSET: "gpu_memset", K_RUNTIME: "cuda_runtime",
               K_DRIVER: "cuda_driver", K_SYNC: "cuda_sync", K_HOST: "host ranges"}
#: flow categories that link a launch call to its GPU operation (PyTorch >= 1.13, and before)
FLOW_CATEGORIES = frozenset({"ac2g", "async"})


_DOMAINS = ("", "cpu_op", "python_function")
_DOM_CODE = {d: i for i, d in enumerate(_DOMAINS)}
_DOM_OP = _DOM_CODE["cpu_op"]

_F_START, _F_END, _META, _IGNORED = 9, 10, 11, -1
#: (ph, cat) -> kind of the row an event makes
_KIND = {("X", c): k for c, k in CATEGORIES.items()} | {("s", c): _F_START for c in FLOW_CATEGORIES} \
    | {("f", c): _F_END for c in FLOW_CATEGORIES} | {("M", None): _META}
#: ``_KIND`` of the "X" events, by ``cat`` alone (one string look-up, not a tuple's)
_X_KIND = {c: k for (ph, c), k in _KIND.items() if ph == "X"}
_HOST_DOM = {c: _DOM_CODE[d] for c, d in HOST_DOMAIN.items()}
_NAMED = (K_KERNEL, K_MEMCPY, K_MEMSET, K_SYNC, K_RUNTIME, K_DRIVER, K_HOST)
_THREADED = (K_RUNTIME, K_DRIVER, K_HOST, K_MEM)
