"""What nsysdoc knows about the nsys SQLite export schema. The only module that names nsys tables.

Sources: NVIDIA "SQLite Schema Reference" and "SQLite Schema Event Values" (Nsight Systems User and
Analysis Guides), and real exports from nsys 2022.4 to 2026.2 (see ``docs/loader.md``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# --- tables ----------------------------------------------------------------------------------
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
NVTX = "NVTX_EVENTS"
OSRT = "OSRT_API"
STRINGS = "StringIds"
GPU_METRICS = "GPU_METRICS"
GPU_METRICS_INFO = "TARGET_INFO_GPU_METRICS"
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")

#: trace type -> tables whose presence shows it was traced (tables are created lazily by nsys,
#: so "absent" means "not traced or no events").
TRACE_TYPES = {
    "cuda_api": (RUNTIME,),
    "cuda_kernels": (KERNEL,),
    "cuda_memcpy": (MEMCPY,),
    "cuda_memset": (MEMSET,),
    "cuda_sync": (SYNC,),
    "nvtx": (NVTX,),
    "osrt": (OSRT,),
    "gpu_metrics": (GPU_METRICS,),
    "cpu_sampling": ("COMPOSITE_EVENTS",),
    "cudnn": ("CUDNN_EVENTS",),
    "cublas": ("CUBLAS_EVENTS",),
    "mpi": ("MPI_P2P_EVENTS", "MPI_COLLECTIVES_EVENTS", "MPI_OTHER_EVENTS"),
    "cuda_graphs": ("CUPTI_ACTIVITY_KIND_GRAPH_TRACE",),
}

#: Tables whose presence identifies an nvprof/NVVP database (same CUPTI_* names, other layout).
NVPROF_MARKERS = ("StringTable", "Version")


@dataclass(frozen=True)
class Col:
    """A column nsysdoc reads: canonical name, nsys source column(s) in preference order, the
    value used for NULL or a missing optional column, and the in-memory dtype."""

    name: str
    sources: tuple[str, ...]
    required: bool = True
    default: int = -1
    dtype: str = "int64"


#: dtype of each canonical column (times and 64-bit ids stay int64; small ids are narrowed).
DTYPES = {"correlation_id": "uint32", "device_id": "int32", "context_id": "int32", "stream_id": "int32", "name_id": "int32",
          "short_id": "int32", "copy_kind": "int8", "src_kind": "int8", "dst_kind": "int8",
          "mem_kind": "int8", "sync_type": "int8", "event_class": "int16", "event_type": "int16"}


def col(name: str, *sources: str, required: bool = True, default: int = -1) -> Col:
    return Col(name, sources or (name,), required, default, DTYPES.get(name, "int64"))


KERNEL_COLS = (
    col("start_ns", "start"), col("end_ns", "end"), col("device_id", "deviceId"),
    col("context_id", "contextId"), col("stream_id", "streamId"),
    col("correlation_id", "correlationId", required=False, default=0),
    col("global_pid", "globalPid", required=False, default=0),
    col("name_id", "demangledName", "shortName"), col("short_id", "shortName", "demangledName"),
)
#: A kernel's launch configuration, packed into one int64 by SQLite itself while the kernel table
#: is read: one output column instead of nine (each column the driver converts costs about as
#: much as SQLite's own decoding of the nine, ~0.4 us per row). Bits, lowest first, and the value
#: that means "unknown":
#:
#: * ``smem``: 18 bits, static + dynamic shared memory per block in bytes; ``LAUNCH_SMEM_UNKNOWN``
#: * ``regs``: 9 bits, registers per thread + 1 (0-255 -> 1-256); 0
#: * ``threads``: 11 bits, threads per block (blockX * blockY * blockZ, 1-1024); 0
#: * ``blocks``: 24 bits, blocks in the grid (gridX * gridY * gridZ), capped at 2^24 - 1; 0
#:
#: SQLite only masks each field to its bits (a CASE per field to validate it cost 80% more per
#: row): a value no launch can have is found when unpacked (:func:`unpack_launch`), a grid of
#: negative or zero size gives a negative or zero key (unknown), NULL gives NULL (unknown).
LAUNCH_SMEM_BITS, LAUNCH_REGS_BITS, LAUNCH_THREADS_BITS, LAUNCH_BLOCKS_BITS = 18, 9, 11, 24
LAUNCH_REGS_SHIFT = LAUNCH_SMEM_BITS
LAUNCH_THREADS_SHIFT = LAUNCH_REGS_SHIFT + LAUNCH_REGS_BITS
LAUNCH_BLOCKS_SHIFT = LAUNCH_THREADS_SHIFT + LAUNCH_THREADS_BITS
LAUNCH_SMEM_UNKNOWN = (1 << LAUNCH_SMEM_BITS) - 1
LAUNCH_BLOCKS_CAP = (1 << LAUNCH_BLOCKS_BITS) - 1
#: the key of a kernel whose configuration is wholly unknown
LAUNCH_UNKNOWN = LAUNCH_SMEM_UNKNOWN
KERNEL_LAUNCH_COLUMNS = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread",
                         "staticSharedMemory", "dynamicSharedMemory")


def launch_key_sql(present) -> str:
    """The SQL expression of :data:`KERNEL_LAUNCH_COLUMNS` packed as described above, from the
    kernel table's columns that exist (a missing column makes its field unknown). SQLite reads a
    text or blob value as a number (0 unless it spells one) and a product too large for 64 bits
    as a real number, which ``min`` caps."""
    present = set(present)

    def q(c: str) -> str:
        return f'"{c}"'

    blocks = (f'min({q("gridX")} * {q("gridY")} * {q("gridZ")}, {LAUNCH_BLOCKS_CAP})'
              if {"gridX", "gridY", "gridZ"} <= present else "0")
    threads = (f'(({q("blockX")} * {q("blockY")} * {q("blockZ")}) & {(1 << LAUNCH_THREADS_BITS) - 1})'
               if {"blockX", "blockY", "blockZ"} <= present else "0")
    regs = (f'(({q("registersPerThread")} + 1) & {(1 << LAUNCH_REGS_BITS) - 1})'
            if "registersPerThread" in present else "0")
    sm = [q(c) for c in ("staticSharedMemory", "dynamicSharedMemory") if c in present]
    smem = f'(({" + ".join(sm)}) & {LAUNCH_SMEM_UNKNOWN})' if sm else str(LAUNCH_SMEM_UNKNOWN)
    return (f"({blocks} << {LAUNCH_BLOCKS_SHIFT}) | ({threads} << {LAUNCH_THREADS_SHIFT}) | "
            f"({regs} << {LAUNCH_REGS_SHIFT}) | {smem}")


def pack_launch(blocks, threads, regs, smem):
    """A launch key in numpy (PyTorch Profiler traces, tests): equal to :func:`launch_key_sql`'s
    for values a launch can have; ``-1`` (or any value a launch cannot have) marks an unknown
    field. Works on ints and int arrays."""
    import numpy as np

    b = np.asarray(blocks, dtype=np.int64)
    t = np.asarray(threads, dtype=np.int64)
    r = np.asarray(regs, dtype=np.int64)
    s = np.asarray(smem, dtype=np.int64)
    b = np.where(b >= 1, np.minimum(b, LAUNCH_BLOCKS_CAP), 0)
    t = np.where((t >= 1) & (t <= 1024), t, 0)
    r = np.where((r >= 0) & (r <= 255), r + 1, 0)
    s = np.where((s >= 0) & (s < LAUNCH_SMEM_UNKNOWN), s, LAUNCH_SMEM_UNKNOWN)
    out = (b << LAUNCH_BLOCKS_SHIFT) | (t << LAUNCH_THREADS_SHIFT) | (r << LAUNCH_REGS_SHIFT) | s
    return int(out) if out.ndim == 0 else out


def unpack_launch(keys) -> dict:
    """Fields of packed launch keys as int64 arrays: ``blocks``, ``threads`` (per block), ``regs``
    (per thread) and ``smem`` (bytes per block), each ``-1`` when unknown."""
    import numpy as np

    k = np.asarray(keys, dtype=np.int64)
    blocks = (k >> LAUNCH_BLOCKS_SHIFT) & LAUNCH_BLOCKS_CAP
    threads = (k >> LAUNCH_THREADS_SHIFT) & ((1 << LAUNCH_THREADS_BITS) - 1)
    regs = ((k >> LAUNCH_REGS_SHIFT) & ((1 << LAUNCH_REGS_BITS) - 1)) - 1
    smem = k & LAUNCH_SMEM_UNKNOWN
    bad = k < 0  # a grid of negative size
    return {"blocks": np.where((blocks == 0) | bad, -1, blocks),
            "threads": np.where((threads == 0) | (threads > 1024) | bad, -1, threads),
            "regs": np.where((regs > 255) | bad, -1, regs),
            "smem": np.where((smem == LAUNCH_SMEM_UNKNOWN) | bad, -1, smem)}


#: Per-SM limits of ``TARGET_INFO_GPU`` (in exports from nsys 2022.4 on; older ones may lack
#: them): devices-table column <- source column. The occupancy calculator falls back to the
#: compute capability's values for a missing one (``nsysdoc.metrics.occupancy``).
GPU_LIMIT_COLUMNS = {"max_warps_per_sm": "maxWarpsPerSm", "max_blocks_per_sm": "maxBlocksPerSm",
                     "regs_per_sm": "maxRegistersPerSm", "smem_per_sm": "maxShmemPerSm",
                     "smem_per_block_optin": "maxShmemPerBlockOptin"}

MEMCPY_COLS = (
    col("start_ns", "start"), col("end_ns", "end"), col("device_id", "deviceId"),
    col("context_id", "contextId"), col("stream_id", "streamId"),
    col("correlation_id", "correlationId", required=False, default=0),
    col("global_pid", "globalPid", required=False, default=0),
    col("bytes", "bytes"), col("copy_kind", "copyKind"),
    col("src_kind", "srcKind", required=False), col("dst_kind", "dstKind", required=False),
)
MEMSET_COLS = (
    col("start_ns", "start"), col("end_ns", "end"), col("device_id", "deviceId"),
    col("context_id", "contextId"), col("stream_id", "streamId"),
    col("correlation_id", "correlationId", required=False, default=0),
    col("global_pid", "globalPid", required=False, default=0),
    col("bytes", "bytes"), col("mem_kind", "memKind", required=False),
)
RUNTIME_COLS = (
    col("start_ns", "start"), col("end_ns", "end"),
    col("global_tid", "globalTid", required=False, default=0),
    col("correlation_id", "correlationId", required=False, default=0),
    col("name_id", "nameId"), col("event_class", "eventClass", required=False, default=0),
)
SYNC_COLS = (
    col("start_ns", "start"), col("end_ns", "end"), col("device_id", "deviceId"),
    col("context_id", "contextId", required=False, default=0), col("stream_id", "streamId"), col("correlation_id", "correlationId", required=False, default=0),
    col("global_pid", "globalPid", required=False, default=0),
    # syncType is current; older exports had only what is now deprecatedSyncType.
    col("sync_type", "syncType", "deprecatedSyncType", required=False, default=0),
)
OSRT_COLS = (
    col("start_ns", "start"), col("end_ns", "end"),
    col("global_tid", "globalTid", required=False, default=0), col("name_id", "nameId"),
)
NVTX_COLS = (
    col("start_ns", "start"), col("end_ns", "end", required=False),
    col("event_type", "eventType"), col("global_tid", "globalTid", required=False, default=0),
    col("text_id", "textId", required=False), col("domain_id", "domainId", required=False, default=0),
)

# --- enums (nsys numbering; used when the ENUM_* tables are absent in old exports) ----------
#: ENUM_CUDA_MEMCPY_OPER
COPY_KIND_LABELS = {
    0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
    8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "UVM HtoD", 12: "UVM DtoH", 13: "UVM DtoD",
}
COPY_HTOD, COPY_DTOH, COPY_DTOD, COPY_PTOP = 1, 2, 8, 10
#: ENUM_CUDA_MEM_KIND — nsys numbering: 0 is PAGEABLE (CUPTI's own enum differs; do not use it).
MEM_KIND_LABELS = {0: "pageable", 1: "pinned", 2: "device", 3: "array", 4: "managed",
                   5: "device static", 6: "managed static", 7: "unknown"}
MEM_PAGEABLE, MEM_PINNED = 0, 1
#: ENUM_NSYS_EVENT_TYPE values for NVTX (stable numeric contract).
NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND, NVTX_DOMAIN_CREATE = 34, 59, 60, 75
NVTXT_PUSHPOP, NVTXT_STARTEND = 70, 71
NVTX_RANGE_TYPES = (NVTX_PUSHPOP, NVTX_STARTEND, NVTXT_PUSHPOP, NVTXT_STARTEND)
NVTX_PUSHPOP_TYPES = (NVTX_PUSHPOP, NVTXT_PUSHPOP)
#: ENUM_NSYS_EVENT_CLASS: OS runtime call rows.
OSRT_EVENT_CLASS = 27
#: ENUM_CUPTI_SYNC_TYPE
SYNC_TYPE_LABELS = {0: "unknown", 1: "event sync", 2: "stream wait event", 3: "stream sync", 4: "context sync"}
#: ENUM_DIAGNOSTIC_SEVERITY_LEVEL (observed: 1 Info, 2 Warning, 3 Error)
DIAG_SEVERITY = {1: "info", 2: "warning", 3: "error"}

# --- globalTid / globalPid layout: <hw:8><vm:8><pid:24><tid:24> -----------------------------
TID_MASK = 0xFFFFFF
PID_SHIFT = 24
PROCESS_MASK = ~TID_MASK  # keeps hw, vm and pid bits


def decode_pid(global_id):
    """OS process id from a globalTid/globalPid (works on numpy int64 arrays and ints)."""
    return (global_id >> PID_SHIFT) & 0xFFFFFF


def decode_tid(global_tid):
    return global_tid & TID_MASK


def decode_host(global_id):
    """hw and vm bytes (bits 48-63): which machine/VM a row came from."""
    return (global_id >> 48) & 0xFFFF


# --- names -----------------------------------------------------------------------------------
_VERSION_SUFFIX = re.compile(r"_v\d+$")


def strip_api_suffix(name: str) -> str:
    """``cudaLaunchKernel_v7000`` -> ``cudaLaunchKernel`` (nsys appends the API version)."""
    return _VERSION_SUFFIX.sub("", name)


#: Kernel names: communication kernels (NCCL <= 2.18 ``ncclKernel_*``, >= 2.19 ``ncclDevKernel_*``;
#: RCCL, NCCL's ROCm port, the same names and ``ncclDevKernel_Generic_1``, and its MSCCL
#: ``mscclKernel_*`` kernels).
NCCL_KERNEL = re.compile(r"^(void\s+)?(nccl|msccl)", re.IGNORECASE)

#: CUDA API classification (names after suffix stripping). Each class also holds the HIP twins
#: (AMD ROCm; PyTorch Profiler traces from AMD GPUs record HIP runtime calls as ``cuda_runtime``
#: events): the HIP call that does what the CUDA call does has the same class. HIP's per-thread
#: default-stream variants end in ``_spt`` as CUDA's end in ``_ptsz``; ``hipDrv*`` copies are the
#: driver-style twins of ``cuMemcpy*``.
LAUNCH_APIS = re.compile(
    r"^(cudaLaunch\w*|cuLaunch\w*|cudaGraphLaunch\w*|cuGraphLaunch\w*|cudaMemcpy\w*|cuMemcpy\w*|"
    r"cudaMemset\w*|cuMemset\w*|"
    r"hipLaunch\w*|hipExtLaunch\w*|hipModuleLaunch\w*|hipExtModuleLaunch\w*|hipHccModuleLaunch\w*|"
    r"hipGraphLaunch\w*|hip(Drv)?Memcpy\w*|hipMemset\w*)$"
)
SYNC_ALWAYS_BLOCKING = re.compile(
    r"^(cudaDeviceSynchronize|cudaStreamSynchronize|cudaEventSynchronize|cudaThreadSynchronize|"
    r"cuCtxSynchronize|cuStreamSynchronize|cuEventSynchronize)(_ptsz)?$|"
    r"^(hipDeviceSynchronize|hipStreamSynchronize|hipEventSynchronize|hipCtxSynchronize)(_spt)?$"
)
#: Codes of ``runtime.api_kind``.
API_OTHER, API_LAUNCH, API_SYNC, API_SYNC_COPY, API_SYNC_MEMSET, API_ASYNC_COPY, API_ALLOC, API_SETUP = range(8)
#: Device, pinned-host and managed memory allocation and release (runtime and driver, incl. the
#: virtual-memory API behind PyTorch's expandable segments and stream-ordered pools).
ALLOC_APIS = re.compile(
    r"^(cudaMalloc\w*|cudaFree\w*|cudaHostAlloc|cudaHostRegister|cudaHostUnregister|cudaMemPool(Create|Destroy|Trim\w*)|"
    r"cuMemAlloc\w*|cuMemFree\w*|cuMemHostAlloc|cuMemHostRegister\w*|cuMemHostUnregister|cuMemCreate|cuMemRelease|"
    r"cuMemMap|cuMemMapArrayAsync|cuMemUnmap|cuMemAddressReserve|cuMemAddressFree|cuMemSetAccess|"
    r"cuMemPool(Create|Destroy|Trim\w*))(_ptsz)?$|"
    r"^(hipMalloc\w*|hipExtMalloc\w*|hipFree\w*|hipHostMalloc|hipHostAlloc|hipHostFree|hipHostRegister|"
    r"hipHostUnregister|hipMemAlloc\w*|hipMemPool(Create|Destroy|Trim\w*)|hipMemCreate|hipMemRelease|hipMemMap|"
    r"hipMemMapArrayAsync|hipMemUnmap|hipMemAddressReserve|hipMemAddressFree|hipMemSetAccess)(_spt)?$"
)
#: One-time set-up and tear-down: module/library loading and JIT linking, context and stream
#: creation, driver entry-point lookup, device queries, peer access, CUDA-graph instantiation.
#: (Per-launch queries such as cuKernelGetAttribute or the occupancy calculator are not set-up.)
SETUP_APIS = re.compile(
    r"^(cuModuleLoad\w*|cuModuleUnload|cuModuleGetFunction|cuModuleGetGlobal\w*|cuModuleGetLoadingMode|"
    r"cuLibraryLoad\w*|cuLibraryUnload|cuLibraryGetKernel|cuLibraryGetModule|cuKernelGetFunction|cuLink\w*|"
    r"cuInit|cuCtxCreate\w*|cuCtxDestroy\w*|cuDevicePrimaryCtx\w*|cudaSetDevice|cudaInitDevice|cudaDeviceReset|"
    r"cudaGetDeviceProperties\w*|cuGetProcAddress\w*|cudaGetDriverEntryPoint\w*|cudaStreamCreate\w*|"
    r"cudaStreamDestroy|cuStreamCreate\w*|cuStreamDestroy\w*|cudaDeviceSetLimit|cudaDeviceEnablePeerAccess|"
    r"cuCtxEnablePeerAccess|cudaIpcOpenMemHandle|cuIpcOpenMemHandle\w*|cudaGraphInstantiate\w*|"
    r"cuGraphInstantiate\w*|cudaGraphUpload|cuGraphUpload|cudaProfilerStart|cudaProfilerStop)(_ptsz)?$|"
    r"^(hipModuleLoad\w*|hipModuleUnload|hipModuleGetFunction|hipModuleGetGlobal|hipLibraryLoad\w*|"
    r"hipLibraryUnload|hipLink\w*|hipInit|hipCtxCreate|hipCtxDestroy|hipDevicePrimaryCtx\w*|hipSetDevice|"
    r"hipDeviceReset|hipGetDeviceProperties\w*|hipGetProcAddress|hipStreamCreate\w*|hipExtStreamCreate\w*|"
    r"hipStreamDestroy|hipDeviceSetLimit|hipDeviceEnablePeerAccess|hipCtxEnablePeerAccess|hipIpcOpenMemHandle|"
    r"hipGraphInstantiate\w*|hipGraphUpload|hipProfilerStart|hipProfilerStop)(_spt)?$"
)
#: Calls a library makes while it initialises the driver API for itself (cuBLAS, cuDNN ...):
#: never part of a training loop's steady state, so a run of them is one library's set-up.
LIB_INIT_APIS = re.compile(r"^(cuInit|cuGetProcAddress\w*|cudaGetDriverEntryPoint\w*|cuModuleGetLoadingMode|"
                           r"cuDriverGetVersion|hipInit|hipGetProcAddress)$")
#: A kernel or graph launch call at least this long that is the first launch of one of its kernels
#: in its process is set-up work (lazy module loading, JIT); ordinary launch calls take
#: microseconds, and a later launch this long waits on a full launch queue (perhaps of another GPU
#: the same thread feeds): launch time. A long launch whose kernels are unknown counts as set-up
#: (found while loading: ``nsysdoc.trace.tables.FirstLaunches``).
SETUP_LAUNCH_MIN_NS = 1_000_000
#: Kernel and graph launches (a launch call this long while the GPU is idle is set-up work: see
#: ``SETUP_LAUNCH_MIN_NS`` above).
KERNEL_LAUNCH_APIS = re.compile(r"^(cudaLaunch\w*|cuLaunch\w*|cudaGraphLaunch\w*|cuGraphLaunch\w*|hipLaunch\w*|"
                                r"hipExtLaunch\w*|hipModuleLaunch\w*|hipExtModuleLaunch\w*|hipHccModuleLaunch\w*|"
                                r"hipGraphLaunch\w*)$")
#: Synchronous copies / memsets: no "Async" in the name. ``hipMemcpyWithStream`` (PyTorch's
#: synchronous copy on ROCm) is synchronous despite its stream argument.
SYNC_COPY = re.compile(r"^(cudaMemcpy(?!\w*Async)\w*|cuMemcpy(?!\w*Async)\w*|hip(Drv)?Memcpy(?!\w*Async)\w*)$")
SYNC_MEMSET = re.compile(r"^(cudaMemset(?!\w*Async)\w*|cuMemset(?!\w*Async)\w*|hipMemset(?!\w*Async)\w*)$")
ASYNC_COPY = re.compile(r"^(cudaMemcpy\w*Async\w*|cuMemcpy\w*Async\w*|hip(Drv)?Memcpy\w*Async\w*)$")
#: Never host-blocking although they are about synchronisation.
NON_BLOCKING_SYNC = re.compile(r"^(cudaStreamWaitEvent|cuStreamWaitEvent|cudaStreamQuery|cudaEventQuery|"
                               r"cuStreamQuery|cuEventQuery|cudaEventRecord\w*|cuEventRecord\w*)$|"
                               r"^(hipStreamWaitEvent|hipStreamQuery|hipEventQuery|hipEventRecord\w*)(_spt)?$")

#: OS runtime calls that mean "this thread is waiting" (for input, a lock, a worker ...).
OS_WAIT_CALLS = re.compile(
    r"^(poll|ppoll|select|pselect6?|epoll_wait|epoll_pwait2?|read|readv|pread(64)?|recv|recvfrom|recvmsg|"
    r"futex|sem_wait|sem_timedwait|pthread_cond_wait|pthread_cond_timedwait|pthread_cond_clockwait|"
    r"pthread_mutex_lock|pthread_mutex_timedlock|pthread_rwlock_\w*lock|pthread_join|nanosleep|"
    r"clock_nanosleep|usleep|sleep|wait|waitpid|wait4|waitid|accept4?|pipe_read)$"
)

#: NVTX text of compilation, JIT, autotuning and warm-up ranges (nvFuser, NVRTC, Triton autotune,
#: user "warmup" ranges). "Compiled ..." alone (torch.compile's compiled-region *execution*) is not.
SETUP_NVTX = re.compile(r"compil(e|ing|ation)(?!d)|nvrtc|\bjit\b|autotun|warm[ _-]?up|\blower(ing)?\b|"
                        r"codegen|cudnnFind|ncclCommInit|ncclCommSplit", re.IGNORECASE)

#: NVTX text of a set-up phase at the start of a program (``init_model``, ``setup``, ``load_weights``,
#: ``build_model``, ``prepare``): a range of such a name that starts before the first kernel is
#: framing, not the steady state (glossary "Steady-state window").
PHASE_NVTX = re.compile(r"^\W*(init|initiali[sz]e|initiali[sz]ation|setup|set[ _-]up|load|loading|build|prepare|"
                        r"download)(?![a-z])", re.IGNORECASE)
#: The PyTorch Profiler's operator and Python-frame domains (docs/kineto.md): no user annotation.
KINETO_OP_DOMAINS = frozenset({"cpu_op", "python_function"})

#: NVTX text of a range around the measured loop (``benchmark_loop``, ``train``, ``training loop``):
#: without step markers, the window starts where such a range does (glossary "Steady-state window")
LOOP_NVTX = re.compile(r"(^|[^a-z])(loop|benchmark|bench|train|training)([^a-z]|$)", re.IGNORECASE)

#: NVTX text of data-loading ranges (PyTorch's DataLoader iterator, or user ranges).
DATALOADER_NVTX = re.compile(r"dataloader|data_loader|data loading|_MultiProcessingDataLoaderIter|"
                             r"_SingleProcessDataLoaderIter|__next__|\bget_batch\b|\bnext_batch\b|\bfetch\b",
                             re.IGNORECASE)

#: Per-call parts of PyTorch's NVTX range texts (torch.autograd.profiler.emit_nvtx), and the
#: ``stack =`` field nsysdoc's Kineto reader adds for a 2021 trace's ``Call stack`` argument:
#: "aten::addmm, seq = 2, op_id = 5, sizes = [[1, 2], [2, 3]], input_op_ids = [(1, 0)]".
_NVTX_CALL_FIELDS = re.compile(r",\s*(?:seq|op_id)\s*=\s*\d+|,\s*(?:sizes|input_op_ids|stack)\s*=.*$")
_NVTX_NUMBER = re.compile(r"(?<![A-Za-z0-9])\d+(?![A-Za-z0-9])")


def fold_nvtx_text(text: str) -> str:
    """One name for the ranges of one operation: PyTorch's per-call fields (seq, op_id, sizes,
    input_op_ids) dropped, and numbers standing alone shown as N ("blocks.15" -> "blocks.N",
    "ProfilerStep#12" -> "ProfilerStep#N"; "conv2d" and "fp16" keep their digits)."""
    return _NVTX_NUMBER.sub("N", _NVTX_CALL_FIELDS.sub("", text)).strip()


#: NVTX domains owned by libraries: their ranges never mark training steps.
LIBRARY_NVTX_DOMAINS = frozenset({
    "nccl", "cub", "cudnn", "cublas", "cublaslt", "cufft", "cusparse", "cusolver", "nvshmem",
    "tensorrt", "nvfuser", "thrust", "nvjpeg", "dali", "mpi", "ucx", "triton", "cutlass",
})

#: Default step marker: the whole NVTX text must match (case-insensitive).
DEFAULT_STEP_PATTERN = r"(ProfilerStep#\d+|(train[_ ]?)?step[ _#]?\d+|iter(ation)?[ _#]?\d+)"

#: Words a step-like range's name ends with (before a trailing number): ``Warm-up Step 3``,
#: ``train_step``, ``benchmark iteration 12``, ``train``. Glossary: "Step-like ranges".
STEP_LIKE_LAST_WORDS = frozenset({"step", "iter", "iteration", "train", "training", "trainstep", "batch"})
#: Words that make a range part of a step, not a step (``optimizer.step``, ``lr_scheduler.step``).
STEP_LIKE_EXCLUDED_WORDS = frozenset({"optimizer", "optim", "scheduler", "sched", "lr", "zero", "grad", "backward",
                                      "forward", "dataloader", "loader", "data", "fetch", "next", "get", "load",
                                      "collate", "prefetch", "ema", "scaler", "amp"})
_STEP_LIKE_SPLIT = re.compile(r"[^a-z]+")


def is_step_like(text: str) -> bool:
    """A range name that reads like a training step although the step pattern does not match it:
    its last word (ignoring a trailing number) is one of :data:`STEP_LIKE_LAST_WORDS`, none of
    its words is in :data:`STEP_LIKE_EXCLUDED_WORDS`, and it is no operator (``aten::``,
    ``a::b``) or data text (``{``, ``[``, several lines)."""
    t = str(text).strip()
    if not t or len(t) > 80 or "::" in t or t[0] in "{[<" or "\n" in t or "." in t or DATALOADER_NVTX.search(t):
        return False
    words = [w for w in _STEP_LIKE_SPLIT.split(t.lower()) if w]
    return bool(words) and words[-1] in STEP_LIKE_LAST_WORDS and not any(w in STEP_LIKE_EXCLUDED_WORDS for w in words)

#: GPU metric names (TARGET_INFO_GPU_METRICS.metricName) nsysdoc summarises, by prefix.
GPU_METRIC_PREFIXES = {
    "sm_active_pct": ("sm active", "sms active"),
    "sm_issue_pct": ("sm issue",),
    "tensor_active_pct": ("tensor active",),
    "dram_read_pct": ("dram read bandwidth",),
    "dram_write_pct": ("dram write bandwidth",),
}
