"""Build schema-faithful Nsight Systems SQLite exports from a short scenario description.

A scenario is written as what the *program* did on the host, and the builder plays it through a
small model of the CUDA runtime to produce the rows nsys would have exported:

* every host thread has a clock (``Thread.now_ns``); each call advances it;
* a launch (kernel, memcpy, memset) is a runtime API row on the thread plus a GPU row that starts
  at ``max(api_start + 0.6 * api_time + queue_ns, time the stream becomes free)`` — so a kernel
  may start before its launch call returns; streams run their work in order, different streams
  overlap;
* blocking calls (stream/device/event synchronize, synchronous copies, pageable async copies)
  keep the thread inside the API row until the GPU work they wait for has finished;
* NVTX push/pop and start/end ranges, OS-runtime calls (poll, futex, read, ...) and GPU-metric
  samples are written as nsys writes them.

Everything is integer nanoseconds and deterministic, so tests can compute expected numbers by
hand. Used by nsysdoc's own tests, the bundled sample capture, the benchmark, and by teams who
want to test their YAML rules::

    from nsysdoc.testing import Capture
    cap = Capture()
    main = cap.process(pid=4242).thread()
    for i in range(3):
        with main.range(f"ProfilerStep#{i}"):
            main.cpu(us=50)
            main.launch("gemm_kernel", us=900)
            main.item()               # loss.item(): tiny DtoH copy + stream sync
    cap.write("three_steps.sqlite")
"""
from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from . import ddl

US = 1_000
MS = 1_000_000
#: Host time an operator, Python frame or module call takes on entry and again on exit (so that
#: nested ranges never share a start or an end, as in real captures)
ENTER_NS = 1_000

COPY_KINDS = {"HtoD": 1, "DtoH": 2, "DtoD": 8, "HtoH": 9, "PtoP": 10, "UVM HtoD": 11, "UVM DtoH": 12}
MEM_PAGEABLE, MEM_PINNED, MEM_DEVICE = 0, 1, 2

SYNC_EVENT, SYNC_STREAM_WAIT, SYNC_STREAM, SYNC_CONTEXT = 1, 2, 3, 4


def global_tid(pid: int, tid: int, hw: int = 0, vm: int = 0) -> int:
    """Serialized thread id: ``<hw:8><vm:8><pid:24><tid:24>`` as a signed SQLite INTEGER."""
    value = (hw << 56) | (vm << 48) | ((pid & 0xFFFFFF) << 24) | (tid & 0xFFFFFF)
    return value - (1 << 64) if value >= (1 << 63) else value


@dataclass
class _Stream:
    device: int
    stream: int
    free_at: int = 0


@dataclass
class GpuOp:
    """One GPU row as written (kernel, memcpy or memset)."""

    table: str
    start: int
    end: int
    device: int
    stream: int
    correlation_id: int
    global_pid: int
    name: str = ""
    short_name: str = ""
    bytes: int = 0
    copy_kind: int = 0
    src_kind: int | None = None
    dst_kind: int | None = None
    mem_kind: int | None = None
    sm_active: float = 0.8
    tensor_active: float = 0.0
    context: int = 1
    #: kernels: launch configuration (a grid of more blocks than any GPU has SMs by default)
    grid: tuple[int, int, int] = (1024, 1, 1)
    block: tuple[int, int, int] = (256, 1, 1)
    registers: int = 32
    shared_mem: int = 0
    dynamic_shared_mem: int = 0
    #: GPU metrics of this kernel (issue 47), as fractions of peak, when a test sets them on the
    #: launched op: SM Issue, DRAM Read and DRAM Write. None: SM Issue = 0.6 x and DRAM Read =
    #: 0.3 x ``sm_active``, no DRAM Write (the samples of captures written before these fields)
    sm_issue: float | None = None
    dram_read: float | None = None
    dram_write: float | None = None


class Thread:
    """The host timeline of one thread. Methods advance ``now_ns`` and return what they wrote."""

    def __init__(self, process: "Process", tid: int, name: str) -> None:
        self.process = process
        self.tid = tid
        self.name = name
        self.now_ns = process.capture.start_ns
        self._stack: list[dict] = []
        self._pystack: list = []

    # -- identity -------------------------------------------------------------------------
    @property
    def global_tid(self) -> int:
        return global_tid(self.process.pid, self.tid, self.process.hw)

    @property
    def cap(self) -> "Capture":
        return self.process.capture

    # -- plain host activity --------------------------------------------------------------
    def cpu(self, us: float = 0, ns: int | None = None) -> "Thread":
        """Host busy in untraced code (Python, CPU work) for the given time."""
        self.now_ns += int(ns if ns is not None else round(us * US))
        return self

    def at(self, ns: int) -> "Thread":
        """Move this thread's clock forward to an absolute time (never backwards)."""
        self.now_ns = max(self.now_ns, int(ns))
        return self

    def os_call(self, name: str = "poll", us: float = 100.0) -> tuple[int, int]:
        """An OS-runtime call (``poll``, ``futex``, ``read``, ``pthread_cond_wait`` ...)."""
        start = self.now_ns
        end = start + int(round(us * US))
        self.cap._osrt.append((start, end, self.global_tid, name))
        self.now_ns = end
        return start, end

    # -- NVTX -----------------------------------------------------------------------------
    def push(self, text: str, domain: str | None = None, registered: bool = False) -> None:
        self._stack.append({"text": text, "domain": domain, "start": self.now_ns, "registered": registered})

    def pop(self) -> tuple[int, int]:
        item = self._stack.pop()
        self.cap._nvtx.append(
            dict(start=item["start"], end=self.now_ns, type=59, text=item["text"], tid=self.global_tid,
                 domain=item["domain"], registered=item["registered"], kind=item.get("kind", "range"),
                 seq=item.get("seq"), op_id=item.get("op_id"), backward=item.get("backward", False))
        )
        if item.get("shapes") is not None:
            self.cap._nvtx[-1]["shapes"] = item["shapes"]
        return item["start"], self.now_ns

    @contextlib.contextmanager
    def range(self, text: str, domain: str | None = None, registered: bool = False) -> Iterator["Thread"]:
        """NVTX push/pop range around the block (``torch.cuda.nvtx.range``)."""
        self.push(text, domain, registered)
        try:
            yield self
        finally:
            self.pop()

    @contextlib.contextmanager
    def op(self, name: str, seq: int | None = None, backward: bool = False,
           shapes: list | None = None) -> Iterator["Thread"]:
        """A PyTorch operator around the block (``aten::mm``, ``MmBackward0``), taking ``ENTER_NS`` on
        entry and on exit: in an nsys export an
        NVTX range as ``--pytorch=autograd-nvtx`` writes it (``aten::mm, seq = 3, op_id = 17``), in a
        Kineto trace a ``cpu_op`` with ``Sequence number`` and ``Fwd thread id`` (1 on backward ops).
        ``shapes`` (``record_shapes=True``: one list of dimensions per input, ``[]`` for a
        non-tensor): Kineto's ``Input Dims``, and ``sizes = [[2, 3], [3, 4]]`` after the op id in
        the NVTX text as ``--pytorch=autograd-shapes-nvtx`` writes it."""
        self.cap._op_id += 1
        self._stack.append({"text": name, "domain": None, "start": self.now_ns, "registered": False,
                            "kind": "op", "seq": seq, "op_id": self.cap._op_id, "backward": backward})
        if shapes is not None:
            self._stack[-1]["shapes"] = shapes
        self.now_ns += ENTER_NS
        try:
            yield self
        finally:
            self.now_ns += ENTER_NS
            self.pop()

    def frame(self, file: str, line: int, func: str):
        """A Python frame ``file(line): func`` around the block: Kineto ``python_function`` events
        (``with_stack=True``); in an nsys export, the Python part of the call stack of every CUDA
        call made inside it (``--python-backtrace=cuda``, when ``Capture.cuda_backtrace``)."""
        return self._py(f"{file}({line}): {func}", (file, line, func))

    @contextlib.contextmanager
    def native(self, symbol: str, module: str) -> Iterator["Thread"]:
        """A native (C/C++) frame ``symbol`` of ``module`` around the block: in an nsys export, part
        of the call stack of every CUDA call made inside it (``CUDA_CALLCHAINS``, when
        ``Capture.cuda_backtrace``). Kineto records no native frames. Takes no time."""
        self._pystack.append(("native", symbol, module))
        try:
            yield self
        finally:
            self._pystack.pop()

    def module(self, name: str):
        """An ``nn.Module`` call (``Linear_3``): Kineto's ``nn.Module: Linear_3`` frame."""
        return self._py(f"nn.Module: {name}", None)

    @contextlib.contextmanager
    def _py(self, text: str, where) -> Iterator["Thread"]:
        start = self.now_ns
        self._pystack.append(where)
        self.now_ns += ENTER_NS
        try:
            yield self
        finally:
            self.now_ns += ENTER_NS
            self._pystack.pop()
            self.cap._pyframes.append(dict(start=start, end=self.now_ns, tid=self.global_tid, text=text))

    def start_end_range(self, text: str, start_ns: int, end_ns: int, domain: str | None = None,
                        end_thread: "Thread | None" = None) -> None:
        """NVTX start/end range (``nvtxRangeStart``/``End``), possibly ended on another thread."""
        self.cap._nvtx.append(
            dict(start=int(start_ns), end=int(end_ns), type=60, text=text, tid=self.global_tid,
                 end_tid=(end_thread or self).global_tid, domain=domain, registered=False)
        )

    def mark(self, text: str) -> None:
        self.cap._nvtx.append(dict(start=self.now_ns, end=None, type=34, text=text, tid=self.global_tid,
                                   domain=None, registered=False))

    # -- CUDA runtime ---------------------------------------------------------------------
    def _api(self, name: str, us: float, blocking_until: int | None = None,
             return_us: float = 2.0) -> tuple[int, int, int]:
        corr = self.process.next_correlation()
        start = self.now_ns
        end = start + int(round(us * US))
        if blocking_until is not None and blocking_until + int(return_us * US) > end:
            end = blocking_until + int(return_us * US)
        self.cap._runtime.append((start, end, self.global_tid, corr, name))
        if self.cap.cuda_backtrace:
            # native frames innermost first (Python frames are not in the SQLite export)
            frames = [f[1:] for f in self._pystack if isinstance(f, tuple) and f and f[0] == "native"]
            self.cap._callstacks[(self.global_tid, corr)] = frames[::-1]
        self.now_ns = end
        return start, end, corr

    def _enqueue(self, op: GpuOp, api_end: int, dur_ns: int, stream: _Stream) -> GpuOp:
        op.start = max(api_end + self.cap.queue_ns, stream.free_at)
        op.end = op.start + dur_ns
        stream.free_at = op.end
        self.cap._gpu.append(op)
        return op

    def launch(self, name: str, us: float = 10.0, *, stream: int = 7, device: int | None = None,
               api_us: float = 5.0, api: str = "cudaLaunchKernel_v7000", short_name: str | None = None,
               sm_active: float = 0.8, tensor_active: float = 0.0, grid=(1024, 1, 1), block=(256, 1, 1),
               registers: int = 32, shared_mem: int = 0, dynamic_shared_mem: int = 0) -> GpuOp:
        """``cudaLaunchKernel`` of a kernel that runs ``us`` microseconds on the GPU, launched with
        ``grid`` blocks of ``block`` threads (an int or 1-3 dimensions), ``registers`` per thread
        and ``shared_mem`` (static) + ``dynamic_shared_mem`` bytes of shared memory per block."""
        dev = self.process.default_device if device is None else device
        s = self.process.stream(dev, stream)
        a0, a1, corr = self._api(api, api_us)
        op = GpuOp("kernel", 0, 0, dev, stream, corr, self.process.global_pid, name=name,
                   short_name=short_name or _short(name), sm_active=sm_active, tensor_active=tensor_active,
                   grid=_dims(grid), block=_dims(block), registers=int(registers), shared_mem=int(shared_mem),
                   dynamic_shared_mem=int(dynamic_shared_mem))
        return self._enqueue(op, a0 + int(api_us * US * 0.6), int(round(us * US)), s)

    def nccl(self, collective: str = "AllReduce", us: float = 500.0, *, stream: int = 13,
             device: int | None = None, api_us: float = 8.0, grid=(24, 1, 1), block=(640, 1, 1)) -> GpuOp:
        """An NCCL collective kernel (``ncclDevKernel_<coll>...``) on the communication stream, with
        one block per channel, as NCCL launches them (fewer blocks than SMs, on purpose)."""
        name = f"ncclDevKernel_{collective}_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
        return self.launch(name, us, stream=stream, device=device, api_us=api_us,
                           short_name=f"ncclDevKernel_{collective}_Sum_f32_RING_LL", sm_active=0.1, grid=grid,
                           block=block)

    def memcpy(self, kind: str = "HtoD", nbytes: int = 1 << 20, *, asynchronous: bool = True,
               pageable: bool = False, stream: int = 7, device: int | None = None,
               gbps: float | None = None, api_us: float = 6.0) -> GpuOp:
        """A host<->device copy. Synchronous copies and pageable async copies block the thread."""
        dev = self.process.default_device if device is None else device
        s = self.process.stream(dev, stream)
        host_kind = MEM_PAGEABLE if pageable else MEM_PINNED
        src, dst = {"HtoD": (host_kind, MEM_DEVICE), "DtoH": (MEM_DEVICE, host_kind),
                    "DtoD": (MEM_DEVICE, MEM_DEVICE), "PtoP": (MEM_DEVICE, MEM_DEVICE),
                    "HtoH": (host_kind, host_kind)}[kind]
        if gbps is None:
            gbps = {"HtoD": 3.0 if pageable else 12.0, "DtoH": 3.0 if pageable else 12.0}.get(kind, 500.0)
        dur = max(1_000, int(nbytes / gbps))  # bytes / (GB/s) = ns
        api = "cudaMemcpyAsync_v3020" if asynchronous else "cudaMemcpy_v3020"
        blocks = (not asynchronous) or (pageable and kind in ("HtoD", "DtoH"))
        # Predict when the copy will end so a blocking API row lasts until then.
        a0 = self.now_ns
        start = max(a0 + int(api_us * US * 0.6) + self.cap.queue_ns, s.free_at)
        a0, a1, corr = self._api(api, api_us, blocking_until=(start + dur) if blocks else None)
        op = GpuOp("memcpy", 0, 0, dev, stream, corr, self.process.global_pid, bytes=nbytes,
                   copy_kind=COPY_KINDS[kind], src_kind=src, dst_kind=dst)
        op = self._enqueue(op, a0 + int(api_us * US * 0.6), dur, s)
        return op

    def memset(self, nbytes: int = 1 << 20, *, stream: int = 7, device: int | None = None,
               us: float = 5.0, api_us: float = 4.0) -> GpuOp:
        dev = self.process.default_device if device is None else device
        s = self.process.stream(dev, stream)
        a0, a1, corr = self._api("cudaMemsetAsync_v3020", api_us)
        op = GpuOp("memset", 0, 0, dev, stream, corr, self.process.global_pid, bytes=nbytes,
                   mem_kind=MEM_DEVICE)
        return self._enqueue(op, a0 + int(api_us * US * 0.6), int(us * US), s)

    def sync_stream(self, stream: int = 7, device: int | None = None, api_us: float = 3.0) -> tuple[int, int]:
        """``cudaStreamSynchronize``: blocks until the stream's queued work has finished."""
        dev = self.process.default_device if device is None else device
        s = self.process.stream(dev, stream)
        a0, a1, corr = self._api("cudaStreamSynchronize_v3020", api_us, blocking_until=s.free_at)
        self.cap._sync.append((a0, a1, dev, stream, corr, self.process.global_pid, SYNC_STREAM))
        return a0, a1

    def sync_device(self, device: int | None = None, api_us: float = 3.0) -> tuple[int, int]:
        """``cudaDeviceSynchronize``: blocks until every stream of the device is idle."""
        dev = self.process.default_device if device is None else device
        until = max([st.free_at for (d, _), st in self.process.streams.items() if d == dev], default=0)
        a0, a1, corr = self._api("cudaDeviceSynchronize_v3020", api_us, blocking_until=until)
        self.cap._sync.append((a0, a1, dev, 0, corr, self.process.global_pid, SYNC_CONTEXT))
        return a0, a1

    def sync_event(self, stream: int = 7, device: int | None = None, api_us: float = 3.0) -> tuple[int, int]:
        """``cudaEventSynchronize`` on an event recorded at the stream's current tail."""
        dev = self.process.default_device if device is None else device
        s = self.process.stream(dev, stream)
        self._api("cudaEventRecord_v3020", 2.0)
        a0, a1, corr = self._api("cudaEventSynchronize_v3020", api_us, blocking_until=s.free_at)
        self.cap._sync.append((a0, a1, dev, stream, corr, self.process.global_pid, SYNC_EVENT))
        return a0, a1

    def wait_event(self, waiting_stream: int, on_stream: int, device: int | None = None,
                   api_us: float = 2.0, on_device: int | None = None) -> tuple[int, int]:
        """``cudaStreamWaitEvent``: a *device-side* wait; the host returns at once. The event is
        recorded on ``on_stream`` of ``on_device`` (default: the waiting stream's device; another
        GPU's stream is a cross-device wait)."""
        dev = self.process.default_device if device is None else device
        w = self.process.stream(dev, waiting_stream)
        o = self.process.stream(dev if on_device is None else on_device, on_stream)
        self._api("cudaEventRecord_v3020", 2.0)
        a0, a1, corr = self._api("cudaStreamWaitEvent_v3020", api_us)
        w.free_at = max(w.free_at, o.free_at)
        self.cap._sync.append((a0, a1, dev, waiting_stream, corr, self.process.global_pid, SYNC_STREAM_WAIT))
        return a0, a1

    def api(self, name: str, us: float = 5.0) -> tuple[int, int]:
        """Any other CUDA API call on this thread (no GPU work): ``cudaMalloc``, ``cudaFree``,
        ``cuModuleLoadData``, ``cudaStreamCreate``, ``cudaEventQuery`` ... The ``_vNNNN`` suffix is
        optional; runtime calls are written as nsys names them."""
        a0, a1, _ = self._api(name, us)
        return a0, a1

    def malloc(self, us: float = 200.0, api: str = "cudaMalloc_v3020") -> tuple[int, int]:
        """``cudaMalloc`` (or another allocation call) taking ``us`` on the host."""
        return self.api(api, us)

    def free(self, us: float = 300.0, api: str = "cudaFree_v3020") -> tuple[int, int]:
        """``cudaFree`` (synchronising, expensive) taking ``us`` on the host."""
        return self.api(api, us)

    def item(self, stream: int = 7, device: int | None = None, nbytes: int = 4) -> GpuOp:
        """``tensor.item()``: a tiny DtoH copy followed by ``cudaStreamSynchronize``."""
        op = self.memcpy("DtoH", nbytes, asynchronous=True, pageable=False, stream=stream, device=device)
        self.sync_stream(stream, device)
        return op

    # -- issue 47: memory ------------------------------------------------------------------
    def alloc_event(self, nbytes: int, *, device: int | None = None, api_us: float | None = None,
                    address: int | None = None) -> int:
        """The allocator takes (``nbytes`` > 0) or gives back (``nbytes`` < 0) device memory on
        this thread now: a Kineto ``[memory]`` event (``profile_memory=True``; the new form with
        ``Total Allocated`` and ``Total Reserved``, the old form with ``Bytes`` only) and an nsys
        ``CUDA_GPU_MEMORY_USAGE_EVENTS`` row (``--cuda-memory-usage=true``). With ``api_us``, a
        ``cudaMalloc``/``cudaFree`` call of that length is made first (the nsys row carries its
        correlation id: the thread); the event is at the call's start, else at ``now_ns`` (the
        clock does not move). Returns the event's time. Running totals per device are kept in
        time order: allocated = the sum of ``nbytes`` so far, reserved = the highest allocated so
        far (a caching allocator keeps the memory it reserved)."""
        dev = self.process.default_device if device is None else device
        corr = 0
        at = self.now_ns
        if api_us is not None:
            at, _end, corr = self._api("cudaMalloc_v3020" if nbytes >= 0 else "cudaFree_v3020", api_us)
        self.cap._mem.append({"ts": at, "gtid": self.global_tid, "pid": self.process.pid, "tid": self.tid,
                              "device": dev, "bytes": int(nbytes), "corr": corr,
                              "address": address if address is not None else 0x7F0000000000 + 512 * len(self.cap._mem),
                              "global_pid": self.process.global_pid})
        return at


class Process:
    def __init__(self, capture: "Capture", pid: int, name: str, device: int, hw: int) -> None:
        self.capture = capture
        self.pid = pid
        self.name = name
        self.default_device = device
        self.hw = hw
        self.threads: list[Thread] = []
        self.streams: dict[tuple[int, int], _Stream] = {}
        self._corr = 0

    @property
    def global_pid(self) -> int:
        return global_tid(self.pid, 0, self.hw)

    def next_correlation(self) -> int:
        self._corr += 1
        return self._corr

    def unlaunched_copy(self, start_ns: int, us: float, *, kind: str = "UVM HtoD", nbytes: int = 65536,
                        device: int | None = None, stream: int = 0) -> GpuOp:
        """A copy no API call launched, as nsys writes a unified-memory page-fault migration (copy
        kind 11/12, ``[CUDA Unified Memory memcpy HtoD]``) or a driver copy: a MEMCPY row at
        ``start_ns`` lasting ``us`` whose correlation id no CUPTI_ACTIVITY_KIND_RUNTIME row has
        (the id is taken from the process's counter but no runtime row is written for it)."""
        dev = self.default_device if device is None else device
        start = int(start_ns)
        src, dst = (MEM_PAGEABLE, MEM_DEVICE) if kind.endswith("HtoD") else (MEM_DEVICE, MEM_PAGEABLE)
        op = GpuOp("memcpy", start, start + int(round(us * US)), dev, stream, self.next_correlation(),
                   self.global_pid, bytes=int(nbytes), copy_kind=COPY_KINDS[kind], src_kind=src, dst_kind=dst)
        s = self.stream(dev, stream)
        s.free_at = max(s.free_at, op.end)
        self.capture._gpu.append(op)
        return op

    def stream(self, device: int, stream: int) -> _Stream:
        key = (device, stream)
        if key not in self.streams:
            self.streams[key] = _Stream(device, stream)
        return self.streams[key]

    def thread(self, tid: int | None = None, name: str | None = None) -> Thread:
        """A host thread; the first one is the main thread (tid == pid)."""
        tid = self.pid if tid is None else tid
        for t in self.threads:
            if t.tid == tid:
                return t
        t = Thread(self, tid, name or ("python" if tid == self.pid else f"thread-{tid}"))
        self.threads.append(t)
        return t


@dataclass
class Capture:
    """A whole capture: processes, their threads, and what the exporter should write.

    ``variant`` picks the schema generation (see :mod:`nsysdoc.testing.ddl`); ``trace`` lists the
    trace types that were on (``cuda``, ``nvtx``, ``osrt``): tables of a type that was off are not
    written at all, as nsys does.
    """

    variant: str = "2026"
    trace: tuple[str, ...] = ("cuda", "nvtx", "osrt")
    start_ns: int = 1_000_000_000
    #: TARGET_INFO_SESSION_START_TIME.utcEpochNs: the wall clock (of the capturing node) at session start
    utc_epoch_ns: int = 1_764_000_000_000_000_000
    queue_ns: int = 2_000
    gpu_names: dict[int, str] = field(default_factory=lambda: {0: "NVIDIA H100 80GB HBM3"})
    #: TARGET_INFO_GPU of every device: SM count and compute capability (the per-SM limits are
    #: written for it, except in the "2022" variant, whose table lacks those columns)
    sm_count: int | None = 132
    compute_capability: tuple[int, int] | None = (9, 0)
    gpu_metrics_hz: int | None = None
    diagnostics: list[tuple[int, int, str]] = field(default_factory=list)
    overhead: list[tuple[int, int, str]] = field(default_factory=list)
    #: record the Python call stack of every CUDA call (nsys --cudabacktrace=all --python-backtrace=cuda)
    cuda_backtrace: bool = False
    #: write timestamps on the UTC wall clock, as ``nsys export --ts-normalize=true`` does: every
    #: time column (``start``, ``end``, ``timestamp``, ``ANALYSIS_DETAILS.startTime/stopTime``) is
    #: shifted by ``utc_epoch_ns``; ``utcEpochNs`` itself and ``duration`` are unchanged
    absolute_timestamps: bool = False

    def __post_init__(self) -> None:
        if self.variant not in ddl.VARIANTS:
            raise ValueError(f"unknown variant {self.variant!r}; choose from {ddl.VARIANTS}")
        self.processes: list[Process] = []
        self._runtime: list[tuple] = []
        self._gpu: list[GpuOp] = []
        self._sync: list[tuple] = []
        self._nvtx: list[dict] = []
        self._osrt: list[tuple] = []
        self._pyframes: list[dict] = []
        self._callstacks: dict[tuple[int, int], list] = {}
        self._op_id = 0
        self._mem: list[dict] = []  # issue 47: Thread.alloc_event

    def process(self, pid: int = 4242, name: str = "python", device: int = 0, hw: int = 0) -> Process:
        p = Process(self, pid, name, device, hw)
        self.processes.append(p)
        if device not in self.gpu_names:
            self.gpu_names[device] = self.gpu_names.get(0, "NVIDIA GPU")
        return p

    def diagnostic(self, text: str, severity: int = 2, at_ns: int | None = None) -> None:
        """A DIAGNOSTIC_EVENT row (1 info, 2 warning, 3 error)."""
        self.diagnostics.append((self.start_ns if at_ns is None else at_ns, severity, text))

    def profiler_overhead(self, start_ns: int, end_ns: int, name: str = "CUDA profiling data flush overhead") -> None:
        self.overhead.append((start_ns, end_ns, name))

    # -- writing --------------------------------------------------------------------------
    def write(self, path: str | os.PathLike) -> Path:
        """Write the export. Overwrites ``path``."""
        path = Path(path)
        if path.exists():
            path.unlink()
        w = _Writer(path, self.variant)
        try:
            self._write_all(w)
            if self.absolute_timestamps:
                w.shift_times(self.utc_epoch_ns)
            w.con.commit()
        finally:
            w.con.close()
        return path

    def write_kineto(self, path: str | os.PathLike, form: str = "new", distributed: dict | None = None,
                     runtime: str = "cuda", api_names: dict[str, str] | None = None) -> Path:
        """Write the capture as a PyTorch Profiler (Kineto) trace instead: ``form`` "new" (PyTorch
        >= 2.0) or "old" (1.8-1.12); ``runtime`` "cuda" or "hip" (an AMD GPU: HIP call names);
        ``api_names`` renames calls; ``.gz`` compresses. See :mod:`nsysdoc.testing.kineto`."""
        from .kineto import write_kineto

        return write_kineto(self, path, form=form, distributed=distributed, runtime=runtime, api_names=api_names)

    def _write_all(self, w: "_Writer") -> None:
        v = self.variant
        all_ends = [op.end for op in self._gpu] + [r[1] for r in self._runtime] + [n["end"] or n["start"] for n in self._nvtx]
        all_ends += [o[1] for o in self._osrt]
        stop = max(all_ends, default=self.start_ns) + 1 * MS
        product, schema = ddl.VERSIONS[v]
        w.meta(product, schema)
        w.table("ANALYSIS_DETAILS", ddl.OTHER_TABLES["ANALYSIS_DETAILS"], [(0, stop - 0, 0, stop)])
        w.table("TARGET_INFO_SESSION_START_TIME", ddl.OTHER_TABLES["TARGET_INFO_SESSION_START_TIME"],
                [(self.utc_epoch_ns, "2026-11-29 00:00:00", "2026-11-29 00:00:00")])
        w.table("TARGET_INFO_GPU", ddl.target_info_gpu_columns(v), [self._gpu_row(d, name)
                                                                    for d, name in sorted(self.gpu_names.items())])
        w.table("PROCESSES", ddl.OTHER_TABLES["PROCESSES"], [(p.global_pid, p.pid, p.name) for p in self.processes])
        w.table("ThreadNames", ddl.OTHER_TABLES["ThreadNames"],
                [(w.sid(t.name), 0, t.global_tid) for p in self.processes for t in p.threads])
        if v != "2022":
            for name, rows in ddl.ENUM_TABLES.items():
                w.table(name, [("id", "INTEGER NOT NULL PRIMARY KEY"), ("name", "TEXT NOT NULL"),
                               ("label", "TEXT NOT NULL")], rows)
        if self.diagnostics:
            w.table("DIAGNOSTIC_EVENT", ddl.OTHER_TABLES["DIAGNOSTIC_EVENT"],
                    [(ts, 0, 1, sev, text, None) for ts, sev, text in self.diagnostics])
        if self.overhead:
            tid = self.processes[0].threads[0].global_tid if self.processes and self.processes[0].threads else 0
            w.table("PROFILER_OVERHEAD", ddl.OTHER_TABLES["PROFILER_OVERHEAD"],
                    [(s, e, tid, w.sid(n), 0) for s, e, n in self.overhead])
        if "cuda" in self.trace:
            self._write_cuda(w)
        if "nvtx" in self.trace and self._nvtx:
            self._write_nvtx(w)
        if "osrt" in self.trace and self._osrt:
            w.table("OSRT_API", ddl.OSRT_COLUMNS,
                    [(s, e, 27, tid, w.sid(n), 0, 0, 0) for s, e, tid, n in sorted(self._osrt)])
        if self.gpu_metrics_hz and "cuda" in self.trace:
            self._write_gpu_metrics(w, stop)
        if self._mem and "cuda" in self.trace:
            self._write_memory(w)
        w.strings()

    def _gpu_row(self, d: int, name: str) -> tuple:
        major, minor = self.compute_capability if self.compute_capability else (None, None)
        row = [0, d, name, f"0000:{d:02x}:00.0", 85899345920, 3352320000000, self.sm_count, major, minor, d]
        if self.variant != "2022":
            from ..metrics.occupancy import CC_LIMITS

            lim = CC_LIMITS.get((major, minor)) if major is not None else None
            warps, blocks, regs, smem, optin = lim if lim else (None,) * 5
            row += [32, warps, blocks, regs, smem, optin, 1024]
        return tuple(row)

    def _write_cuda(self, w: "_Writer") -> None:
        v = self.variant
        green = v != "2022"
        if self._runtime:
            chains, chain_rows = {}, []
            rows = []
            for s, e, tid, corr, n in sorted(self._runtime):
                cid = None
                stack = self._callstacks.get((tid, corr))
                if stack is not None:
                    # as nsys --cudabacktrace writes it: the driver leaf, the runtime entry point,
                    # the program's native frames, then the C runtime start-up (stackDepth 0 = leaf)
                    frames = [("0x7f3a1c2d4e5f", "libcuda.so.1", 1), (n.split("_v")[0], "libcudart.so.12", 0),
                              *[(sym, mod, 0) for sym, mod in stack],
                              ("__libc_start_main", "libc.so.6", 0), ("_start", "python3.11", 0)]
                    key = tuple(frames)
                    cid = chains.get(key)
                    if cid is None:
                        cid = chains[key] = len(chains) + 1
                        for depth, (sym, mod, unres) in enumerate(frames):
                            chain_rows.append((cid, w.sid(sym), w.sid(mod), unres, 0, depth))
                rows.append((s, e, 0 if n.startswith("cuda") else 1, tid, corr, w.sid(n), 0, cid))
            w.table("CUPTI_ACTIVITY_KIND_RUNTIME", ddl.RUNTIME_COLUMNS, rows)
            if chain_rows:
                w.table("CUDA_CALLCHAINS", ddl.CUDA_CALLCHAINS_COLUMNS, chain_rows)
        kernels, copies, sets = [], [], []
        grid_id = 0
        for op in sorted(self._gpu, key=lambda o: (o.start, o.device, o.stream)):
            base = [op.start, op.end, op.device, op.context] + ([None] if green else []) + [
                op.stream, op.correlation_id, op.global_pid]
            if op.table == "kernel":
                grid_id += 1
                dn, sn = w.sid(op.name), w.sid(op.short_name)
                row = base + [dn, sn] + ([w.sid("_Z" + op.short_name)] if green else []) + [
                    1, 0, op.registers, *op.grid, *op.block, op.shared_mem, op.dynamic_shared_mem, 0, 0, grid_id,
                    op.shared_mem + op.dynamic_shared_mem, None, 0]
                kernels.append(tuple(row))
            elif op.table == "memcpy":
                copies.append(tuple(base + [op.bytes, op.copy_kind, None, op.src_kind, op.dst_kind,
                                            op.device, op.context, op.device, op.context, None, None, None]))
            else:
                sets.append(tuple(base + [0, op.bytes, None, op.mem_kind]))
        if kernels:
            w.table("CUPTI_ACTIVITY_KIND_KERNEL", ddl.kernel_columns(v), kernels)
        if copies:
            w.table("CUPTI_ACTIVITY_KIND_MEMCPY", ddl.memcpy_columns(v), copies)
        if sets:
            w.table("CUPTI_ACTIVITY_KIND_MEMSET", ddl.memset_columns(v), sets)
        if self._sync:
            rows = []
            for s, e, dev, stream, corr, gpid, kind in sorted(self._sync):
                row = [s, e, dev, 1] + ([None] if green else []) + [stream, corr, gpid]
                if v == "2026":
                    row.append(None)
                rows.append(tuple(row + [kind, 0]))
            w.table("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", ddl.sync_columns(v), rows)

    def _write_nvtx(self, w: "_Writer") -> None:
        v = self.variant
        domains: dict[tuple[int, str], int] = {}
        rows = []
        ncols = len(ddl.nvtx_columns(v))
        for n in self._nvtx:
            dom_id = 0
            if n.get("domain"):
                pid_bits = n["tid"] & ~0xFFFFFF
                key = (pid_bits, n["domain"])
                if key not in domains:
                    domains[key] = len(domains) + 1
                    row = [n["start"], None, 75, None, None, None, n["domain"], pid_bits, None, None,
                           domains[key]]
                    rows.append(tuple(row + [None] * (ncols - len(row))))
                dom_id = domains[key]
            text, text_id = n["text"], None
            if n.get("kind") == "op":  # as --pytorch=autograd-nvtx writes an operator's range
                text = text + (f", seq = {n['seq']}" if n.get("seq") is not None else "") + f", op_id = {n['op_id']}"
                if n.get("shapes") is not None:  # --pytorch=autograd-shapes-nvtx
                    text += f", sizes = {json.dumps(n['shapes'])}"
            if n.get("registered") and v != "2022":
                text, text_id = None, w.sid(n["text"])
            row = [n["start"], n["end"], n["type"], None, None, None, text, n["tid"],
                   n.get("end_tid", n["tid"] if n["end"] is not None else None), text_id, dom_id]
            rows.append(tuple(row + [None] * (ncols - len(row))))
        rows.sort(key=lambda r: r[0])
        w.table("NVTX_EVENTS", ddl.nvtx_columns(v), rows)

    def _write_gpu_metrics(self, w: "_Writer", stop: int) -> None:
        """Samples of SM Active / SM Issue / Tensor Active / DRAM Read per device.

        A sample at time t covers (t - period, t]; its value is the time-weighted share of that
        period covered by kernels times each kernel's ``sm_active`` (resp. ``tensor_active``).
        """
        import numpy as np

        period = int(1e9 // self.gpu_metrics_hz)
        names = ["SM Active [Throughput %]", "SM Issue [Throughput %]", "Tensor Active [Throughput %]",
                 "DRAM Read Bandwidth [Throughput %]"]
        info, samples = [], []
        for dev in sorted({op.device for op in self._gpu}):
            type_id = dev  # low byte = device, as nsys2prv decodes it
            for mid, name in enumerate(names):
                info.append((type_id, 0, "GPU", mid, name))
            ks = [op for op in self._gpu if op.device == dev and op.table == "kernel"]
            t0 = self.start_ns
            ts = np.arange(t0 + period, stop + period, period, dtype=np.int64)
            sm = np.zeros(len(ts))
            tc = np.zeros(len(ts))
            for op in ks:
                i0 = max(0, int((op.start - t0) // period))
                i1 = min(len(ts) - 1, int((op.end - t0) // period))
                for i in range(i0, i1 + 1):
                    lo, hi = ts[i] - period, ts[i]
                    ov = max(0, min(hi, op.end) - max(lo, op.start))
                    sm[i] += ov / period * op.sm_active
                    tc[i] += ov / period * op.tensor_active
            sm = np.minimum(sm, 1.0)
            tc = np.minimum(tc, 1.0)
            if any(getattr(op, f) is not None for op in ks for f in ("sm_issue", "dram_read", "dram_write")):
                samples += self._gpu_metrics_per_kernel(ks, ts, period, type_id, sm, tc, info)
                continue
            for i, t in enumerate(ts):
                vals = [sm[i] * 100, sm[i] * 60, tc[i] * 100, sm[i] * 30]
                for mid, val in enumerate(vals):
                    samples.append((int(t), type_id, mid, int(round(val))))
        w.table("TARGET_INFO_GPU_METRICS", ddl.OTHER_TABLES["TARGET_INFO_GPU_METRICS"], info)
        w.table("GPU_METRICS", ddl.OTHER_TABLES["GPU_METRICS"], samples)

    def memory_events(self) -> list[dict]:
        """Issue 47: the memory events of :meth:`Thread.alloc_event` in time order, each with the
        device's running ``allocated`` and ``reserved`` totals after it."""
        alloc: dict[int, int] = {}
        resv: dict[int, int] = {}
        out = []
        for m in sorted(self._mem, key=lambda m: m["ts"]):
            d = m["device"]
            alloc[d] = alloc.get(d, 0) + m["bytes"]
            resv[d] = max(resv.get(d, 0), alloc[d])
            out.append({**m, "allocated": alloc[d], "reserved": resv[d]})
        return out

    def _write_memory(self, w: "_Writer") -> None:
        """``CUDA_GPU_MEMORY_USAGE_EVENTS`` (issue 47): sizes positive, the operation type says
        allocation (0) or deallocation (1); device memory (``memKind`` 2)."""
        rows = [(m["ts"], m["global_pid"], m["device"], 1, m["address"], 0, abs(m["bytes"]), MEM_DEVICE,
                 0 if m["bytes"] >= 0 else 1, None, m["corr"] or None, 7, None, None, None, None, None, None)
                for m in self.memory_events()]
        w.table("CUDA_GPU_MEMORY_USAGE_EVENTS", ddl.MEMORY_USAGE_COLUMNS, rows)

    def _gpu_metrics_per_kernel(self, ks, ts, period: int, type_id: int, sm, tc, info: list) -> list:
        """Samples of a device where some kernel sets its own SM Issue / DRAM Read / DRAM Write
        (issue 47): each sample is the overlap-weighted sum over the kernels of each one's value (SM
        Issue defaulting to 0.6 x and DRAM Read to 0.3 x its ``sm_active``, DRAM Write to 0), at most
        100%; a "DRAM Write Bandwidth" metric (id 4) is added when a kernel sets ``dram_write``."""
        import numpy as np

        write = any(op.dram_write is not None for op in ks)
        if write:
            info.append((type_id, 0, "GPU", 4, "DRAM Write Bandwidth [Throughput %]"))
        issue, rd, wr = np.zeros(len(ts)), np.zeros(len(ts)), np.zeros(len(ts))
        t0 = self.start_ns
        for op in ks:
            i0 = max(0, int((op.start - t0) // period))
            i1 = min(len(ts) - 1, int((op.end - t0) // period))
            for i in range(i0, i1 + 1):
                ov = max(0, min(ts[i], op.end) - max(ts[i] - period, op.start)) / period
                issue[i] += ov * (op.sm_issue if op.sm_issue is not None else 0.6 * op.sm_active)
                rd[i] += ov * (op.dram_read if op.dram_read is not None else 0.3 * op.sm_active)
                wr[i] += ov * (op.dram_write or 0.0)
        out = []
        for i, t in enumerate(ts):
            vals = [sm[i], min(issue[i], 1.0), tc[i], min(rd[i], 1.0)] + ([min(wr[i], 1.0)] if write else [])
            for mid, val in enumerate(vals):
                out.append((int(t), type_id, mid, int(round(val * 100))))
        return out


class _Writer:
    def __init__(self, path: Path, variant: str) -> None:
        self.con = sqlite3.connect(path)
        self.variant = variant
        self._strings: dict[str, int] = {}
        for base in ("[Unknown]", "[kernel.kallsyms]", "[Max depth]"):
            self.sid(base)

    def sid(self, value: str) -> int:
        if value not in self._strings:
            self._strings[value] = len(self._strings)
        return self._strings[value]

    def table(self, name: str, columns: list[tuple[str, str]], rows: list[tuple]) -> None:
        self.con.execute(ddl.create_sql(name, columns))
        if rows:
            marks = ",".join("?" * len(columns))
            self.con.executemany(f"INSERT INTO {name} VALUES ({marks})", rows)

    #: the columns that hold times (ns) on the session timeline, in any table that has them
    TIME_COLUMNS = ("start", "end", "timestamp", "startTime", "stopTime")

    def shift_times(self, shift_ns: int) -> None:
        """Add ``shift_ns`` to every time column of every table written (NULLs stay NULL)."""
        tables = [r[0] for r in self.con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for t in tables:
            cols = {r[1] for r in self.con.execute(f'PRAGMA table_info("{t}")')}
            for c in self.TIME_COLUMNS:
                if c in cols:
                    self.con.execute(f'UPDATE "{t}" SET "{c}" = "{c}" + ? WHERE "{c}" IS NOT NULL', (shift_ns,))

    def meta(self, product: str, schema: str) -> None:
        table = ddl.META_TABLE[self.variant]
        major, minor, micro = schema.split(".")
        rows = [
            ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"),
            ("EXPORT_PRODUCT_VERSION", product),
            ("EXPORT_SCHEMA_VERSION", schema),
            ("EXPORT_SCHEMA_VERSION_MAJOR", major),
            ("EXPORT_SCHEMA_VERSION_MINOR", minor),
            ("EXPORT_SCHEMA_VERSION_MICRO", micro),
        ]
        self.table(table, [("name", "TEXT"), ("value", "TEXT")], rows)

    def strings(self) -> None:
        self.table("StringIds", ddl.OTHER_TABLES["StringIds"],
                   [(i, s) for s, i in sorted(self._strings.items(), key=lambda kv: kv[1])])


def _dims(v) -> tuple[int, int, int]:
    """A grid or block size given as an int or 1-3 dimensions, as (x, y, z)."""
    if isinstance(v, int):
        return (v, 1, 1)
    d = [int(x) for x in v]
    if not 1 <= len(d) <= 3:
        raise ValueError(f"a grid or block has 1 to 3 dimensions, got {v!r}")
    return tuple(d + [1] * (3 - len(d)))  # type: ignore[return-value]


def _short(name: str) -> str:
    """Base name of a demangled kernel name: drop template args, parameters and return type."""
    base = name.split("(")[0]
    depth, out = 0, []
    for ch in base:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    text = "".join(out).strip()
    text = text.split(" ")[-1]
    return text.split("::")[-1] or name
