"""Write a builder :class:`~nsysdoc.testing.Capture` as a PyTorch Profiler (Kineto) trace.

The same scenario then exists in both of nsysdoc's input forms, an nsys SQLite export
(``Capture.write``) and a Kineto Chrome-trace JSON (``Capture.write_kineto``), so tests can check
that both give the same diagnosis. What the program did maps to what ``torch.profiler`` records:

* CUDA runtime rows -> ``cuda_runtime`` events (driver calls ``cu*`` -> ``cuda_driver``), without
  nsys's ``_vNNNN`` suffix; each inside a ``cpu_op`` (``aten::mm``, ``aten::copy_`` ...), as the
  ATen op that made the call;
* kernels, copies and memsets -> ``kernel``, ``gpu_memcpy`` (``Memcpy HtoD (Pinned -> Device)``),
  ``gpu_memset`` events with device, context, stream, correlation and bytes; an ``ac2g`` flow
  links each launch to its GPU operation;
* NVTX push/pop and start/end ranges -> ``user_annotation`` ranges (``record_function``), on the
  thread that opened them; NVTX marks and domains have no Kineto counterpart and are left out;
* OS runtime calls, synchronization records, GPU metrics, nsys diagnostics: not written (Kineto
  does not record them).

Two forms: ``"new"`` (PyTorch >= 2.0: categories ``kernel``/``cuda_runtime``/``cpu_op``/
``gpu_memcpy``, ``baseTimeNanoseconds`` and microsecond times relative to it with 3 decimals,
``External id``, ``ac2g`` flows, ``distributedInfo``) and ``"old"`` (PyTorch 1.8-1.12:
``Kernel``/``Runtime``/``Operator``/``Memcpy``, absolute integer microseconds since the UNIX
epoch, ``external id``, string thread ids, ``stream N`` GPU rows, ``async`` flows). A path ending
in ``.gz`` is written gzip-compressed.

Two runtimes: ``"cuda"`` (NVIDIA) and ``"hip"``, what ``torch.profiler`` records on an AMD GPU
(Kineto's ROCm back end, ``libkineto/src/RocprofActivity*.h`` and ``RoctracerActivity*.h``): each
CUDA call becomes its HIP twin (:func:`hip_name`), still a ``cuda_runtime`` event (HIP has no
driver category) with ``cid``/``correlation`` args; copies are ``Memcpy DtoH (Device -> Host)``
(ROCm names no pinned or pageable memory) with device, stream, correlation, kind and bytes; memsets
``Memset (Device)`` without bytes; kernels carry ``kind: "Dispatch Kernel"``, no context; the
devices are AMD GPUs (``warpSize`` 64, gfx version 9.4 as compute major/minor, no CUPTI fields).
``api_names`` renames calls in either runtime (``{"cudaMemcpy": "hipMemcpyWithStream"}``).
"""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import IO

import numpy as np

from ..trace import schema as S
from ..trace.tables import api_kind_codes
from ..trace.model import StringTable

FORMS = ("new", "old")
#: nsys ENUM_CUDA_MEM_KIND -> Kineto's (CUPTI's) memory kind names
MEM_KIND_NAMES = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static",
                  6: "Managed Static"}
#: the ATen op around each CUDA call (the host range Kineto records as ``cpu_op``)
ATEN_OP = {S.API_LAUNCH: "aten::mm", S.API_ASYNC_COPY: "aten::copy_", S.API_SYNC_COPY: "aten::copy_",
           S.API_SYNC_MEMSET: "aten::fill_", S.API_ALLOC: "aten::empty", S.API_SYNC: "aten::_local_scalar_dense"}
CATS = {"new": {"kernel": "kernel", "memcpy": "gpu_memcpy", "memset": "gpu_memset", "runtime": "cuda_runtime",
                "driver": "cuda_driver", "op": "cpu_op", "annotation": "user_annotation", "flow": "ac2g"},
        "old": {"kernel": "Kernel", "memcpy": "Memcpy", "memset": "Memset", "runtime": "Runtime",
                "driver": "Runtime", "op": "Operator", "annotation": "Operator", "flow": "async"}}


RUNTIMES = ("cuda", "hip")
#: CUDA calls whose HIP twin is not the same name with ``hip`` for ``cuda``/``cu``
HIP_NAMES = {"cudaMallocHost": "hipHostMalloc", "cudaHostAlloc": "hipHostMalloc", "cudaFreeHost": "hipHostFree",
             "cudaThreadSynchronize": "hipDeviceSynchronize", "cuLaunchKernel": "hipModuleLaunchKernel",
             "cuMemAlloc": "hipMalloc", "cuMemFree": "hipFree"}
#: ROCm's copy names: (kind, source, destination)
HIP_COPY = {S.COPY_HTOD: ("HtoD", "Host", "Device"), S.COPY_DTOH: ("DtoH", "Device", "Host"),
            S.COPY_DTOD: ("DtoD", "Device", "Device"), S.COPY_PTOP: ("DtoD", "Device", "Device")}


def hip_name(name: str) -> str:
    """The HIP call doing what CUDA call ``name`` does: :data:`HIP_NAMES`, else ``cuda``/``cu``
    replaced by ``hip`` (``cudaStreamSynchronize`` -> ``hipStreamSynchronize``, ``cuModuleLoadData``
    -> ``hipModuleLoadData``)."""
    if name in HIP_NAMES:
        return HIP_NAMES[name]
    for prefix in ("cuda", "cu"):
        if name.startswith(prefix):
            return "hip" + name[len(prefix):]
    return name


def _dumps(v) -> str:
    return json.dumps(v, ensure_ascii=False)


class KinetoWriter:
    """Streams a Kineto trace: :meth:`header`, then events, then :meth:`close`. Times are
    integer nanoseconds on the capture's timeline; ``base_ns`` is the UTC epoch of timeline 0."""

    def __init__(self, fh: IO[str], form: str = "new", base_ns: int = 0) -> None:
        if form not in FORMS:
            raise ValueError(f"unknown Kineto form {form!r}; choose from {FORMS}")
        self.fh, self.form, self.base_ns = fh, form, int(base_ns)
        self.cat = CATS[form]
        self.first = True
        self.ext = 0

    # -- times ----------------------------------------------------------------------------
    def ts(self, ns: int) -> str:
        """A timestamp as Kineto writes it: µs with 3 decimals relative to ``baseTimeNanoseconds``
        (new), or integer µs since the epoch (old, truncated as old Kineto did)."""
        if self.form == "new":
            return f"{ns // 1000}.{ns % 1000:03d}"
        return str((self.base_ns + ns) // 1000)

    def dur(self, start_ns: int, end_ns: int) -> str:
        d = end_ns - start_ns
        if self.form == "new":
            return f"{d // 1000}.{d % 1000:03d}"
        return str((self.base_ns + end_ns) // 1000 - (self.base_ns + start_ns) // 1000)

    def tid(self, tid: int):
        return tid if self.form == "new" else str(tid)

    def stream_tid(self, stream: int):
        return stream if self.form == "new" else f"stream {stream}"

    # -- document ---------------------------------------------------------------------------
    def header(self, devices: dict[int, str], distributed: dict | None = None, compute: tuple[int, int] = (9, 0),
               sms: int = 132, runtime: str = "cuda") -> None:
        from ..metrics.occupancy import CC_LIMITS

        if runtime == "hip":  # Kineto's ROCm device properties (hipDeviceProp_t): an MI300X
            props = [{"id": d, "name": name, "totalGlobalMem": 206141652992, "computeMajor": 9, "computeMinor": 4,
                      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536,
                      "warpSize": 64, "sharedMemPerBlock": 65536, "numSms": 304,
                      "maxSharedMemoryPerMultiProcessor": 65536} for d, name in sorted(devices.items())]
        else:
            warps, _blocks, regs, smem, optin = CC_LIMITS.get(tuple(compute), CC_LIMITS[(9, 0)])
            props = [{"id": d, "name": name, "totalGlobalMem": 85899345920, "computeMajor": compute[0],
                      "computeMinor": compute[1], "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": warps * 32,
                      "regsPerBlock": 65536, "regsPerMultiprocessor": regs, "warpSize": 32, "sharedMemPerBlock": 49152,
                      "sharedMemPerMultiprocessor": smem, "numSms": sms, "sharedMemPerBlockOptin": optin}
                     for d, name in sorted(devices.items())]
        w = self.fh.write
        w('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    ')
        w(",\n    ".join(_dumps(p) for p in props))
        w("\n  ],")
        if self.form == "new":
            if distributed:
                w(f'\n  "distributedInfo": {_dumps(distributed)},')
            if runtime == "cuda":
                w('\n  "cupti_version": 24, "cuda_runtime_version": 12040, "cuda_driver_version": 12040,')
            w(f'\n  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": {self.base_ns},')
        w('\n  "traceEvents": [')

    def event(self, text: str) -> None:
        self.fh.write(("\n  " if self.first else ",\n  ") + text)
        self.first = False

    def close(self, end_ns: int, trace_name: str = "nsysdoc-fixture") -> None:
        self.event('{"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", '
                   f'"ts": {self.ts(end_ns)}}}')
        self.fh.write(f'\n  ],\n  "traceName": {_dumps(trace_name)}\n}}\n')

    # -- events -----------------------------------------------------------------------------
    def x(self, cat: str, name: str, pid, tid, start_ns: int, end_ns: int, args: dict | None = None) -> None:
        """A complete ("X") event."""
        a = f', "args": {_dumps(args)}' if args else ""
        self.event(f'{{"ph": "X", "cat": {_dumps(cat)}, "name": {_dumps(name)}, "pid": {_dumps(pid)}, '
                   f'"tid": {_dumps(tid)}, "ts": {self.ts(start_ns)}, "dur": {self.dur(start_ns, end_ns)}{a}}}')

    def flow(self, phase: str, flow_id: int, pid, tid, ts_ns: int) -> None:
        name = "ac2g" if self.form == "new" else "launch"
        bp = ', "bp": "e"' if phase == "f" else ""
        self.event(f'{{"ph": "{phase}", "id": {flow_id}, "pid": {_dumps(pid)}, "tid": {_dumps(tid)}, '
                   f'"ts": {self.ts(ts_ns)}, "cat": "{self.cat["flow"]}", "name": "{name}"{bp}}}')

    def meta(self, what: str, pid, tid, value: str) -> None:
        key = "labels" if what == "process_labels" else "name"
        self.event(f'{{"name": "{what}", "ph": "M", "ts": {self.ts(0) if self.form == "new" else 0}, '
                   f'"pid": {_dumps(pid)}, "tid": {_dumps(tid)}, "args": {{{_dumps(key)}: {_dumps(value)}}}}}')

    def ext_key(self) -> str:
        return "External id" if self.form == "new" else "external id"


def _open(path: Path) -> IO[str]:
    if path.name.endswith(".gz"):
        return gzip.open(path, "wt", encoding="utf-8", compresslevel=6)
    return open(path, "w", encoding="utf-8")


def _kernel_args(op, sms: int, compute) -> dict:
    """A kernel event's launch arguments as Kineto writes them: blocks and warps per SM over the
    whole GPU, and the estimated achieved occupancy min(warps per SM / max warps, theoretical)."""
    from ..metrics.occupancy import device_limits, theoretical_occupancy

    blocks = op.grid[0] * op.grid[1] * op.grid[2]
    threads = op.block[0] * op.block[1] * op.block[2]
    smem = op.shared_mem + op.dynamic_shared_mem
    lim = device_limits(sms, float(f"{compute[0]}.{compute[1]}"))
    warps_sm = blocks / sms * -(-threads // 32)
    theo = float(theoretical_occupancy(threads, op.registers, smem, lim))
    est = min(warps_sm / lim.max_warps_per_sm * 100, theo) if lim.max_warps_per_sm and theo == theo else 0.0
    return {"registers per thread": op.registers, "shared memory": smem, "blocks per SM": round(blocks / sms, 7),
            "warps per SM": round(warps_sm, 7), "grid": list(op.grid), "block": list(op.block),
            "est. achieved occupancy %": int(round(est))}


def write_kineto(cap, path: str | os.PathLike, form: str = "new", distributed: dict | None = None,
                 extra_devices: int = 2, runtime: str = "cuda", api_names: dict[str, str] | None = None) -> Path:
    """Write ``cap`` (a :class:`~nsysdoc.testing.Capture`) as a Kineto trace at ``path``.

    ``distributed`` is written as ``distributedInfo`` (new form only), e.g. ``{"backend": "nccl",
    "rank": 1, "world_size": 2}``. ``deviceProperties`` lists ``extra_devices`` GPUs beyond those
    of the capture, as a node's trace lists every GPU it sees (they run nothing). ``runtime``:
    ``"cuda"`` or ``"hip"`` (module docstring); ``api_names`` renames calls (CUDA name -> name)."""
    if runtime not in RUNTIMES:
        raise ValueError(f"unknown runtime {runtime!r}; choose from {RUNTIMES}")
    hip = runtime == "hip"
    if len(cap.processes) > 1:
        raise ValueError("a Kineto trace is one process's: write each process (rank) of this capture as its own "
                         "Capture")
    path = Path(path)
    if path.exists():
        path.unlink()
    devices = {d: "AMD Instinct MI300X" for d in cap.gpu_names} if hip else dict(cap.gpu_names)
    top = max(devices, default=-1)
    for d in range(top + 1, top + 1 + extra_devices):
        devices[d] = devices.get(0, "AMD Instinct MI300X" if hip else "NVIDIA GPU")
    gpu = sorted(cap._gpu, key=lambda o: (o.start, o.device, o.stream))
    calls = sorted(cap._runtime)
    ranges = [n for n in cap._nvtx if n.get("type") in (S.NVTX_PUSHPOP, S.NVTX_STARTEND) and n.get("end") is not None]
    times = [op.start for op in gpu] + [r[0] for r in calls] + [n["start"] for n in ranges]
    ends = [op.end for op in gpu] + [r[1] for r in calls] + [n["end"] for n in ranges]
    t0 = min(times, default=cap.start_ns)
    stop = max(ends, default=cap.start_ns) + 1_000_000
    by_corr = {(op.global_pid & S.PROCESS_MASK, op.correlation_id): op for op in gpu}
    with _open(path) as fh:
        w = KinetoWriter(fh, form, cap.utc_epoch_ns)
        w.header(devices, distributed if form == "new" else None, compute=cap.compute_capability or (9, 0),
                 sms=cap.sm_count or 132, runtime=runtime)
        cat = w.cat
        for p in cap.processes:
            w.meta("process_name", p.pid, 0, p.name)
            w.meta("process_labels", p.pid, 0, "CPU")
            for t in p.threads:
                w.meta("thread_name", p.pid, w.tid(t.tid), f"thread {t.tid} ({p.name})")
        for d in sorted(devices):
            w.meta("process_name", d, 0, cap.processes[0].name if cap.processes else "python")
            w.meta("process_labels", d, 0, f"GPU {d}")
        # the profiler's own span (Kineto writes one per profiling cycle)
        w.event(f'{{"ph": "X", "cat": "Trace", "ts": {w.ts(t0)}, "dur": {w.dur(t0, stop)}, "pid": "Spans", '
                f'"tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {{"Op count": 0}}}}')
        # host side: annotations, then each CUDA call inside its ATen op, then its flow start
        op_spans: dict[int, list[tuple[int, int]]] = {}
        for n in sorted(ranges, key=lambda n: (n["start"], -n["end"])):
            pid, tid = S.decode_pid(n["tid"]), S.decode_tid(n["tid"])
            w.ext += 1
            if n.get("kind") == "op":
                args = {w.ext_key(): w.ext}
                if n.get("seq") is not None:
                    args.update({"Sequence number": n["seq"], "Fwd thread id": 1 if n.get("backward") else 0})
                if n.get("shapes") is not None:  # record_shapes=True
                    args["Input Dims"] = n["shapes"]
                if form == "old":  # PyTorch 1.8-1.12: the op's Python stack, innermost first
                    around = sorted((f for f in cap._pyframes if f["tid"] == n["tid"] and f["start"] <= n["start"]
                                     and n["end"] <= f["end"] and not f["text"].startswith("nn.Module: ")),
                                    key=lambda f: (-f["start"], f["end"]))
                    if around:
                        args["Call stack"] = ";".join(f["text"] for f in around)
                w.x(cat["op"], n["text"], pid, w.tid(tid), n["start"], n["end"], args)
                op_spans.setdefault(n["tid"], []).append((n["start"], n["end"]))
            else:
                w.x(cat["annotation"], n["text"], pid, w.tid(tid), n["start"], n["end"], {w.ext_key(): w.ext})
        # Python frames (with_stack=True): python_function events with ids and parent ids
        if form == "new":
            for i, f in enumerate(sorted(cap._pyframes, key=lambda f: (f["start"], -f["end"]))):
                pid, tid = S.decode_pid(f["tid"]), S.decode_tid(f["tid"])
                w.x("python_function", f["text"], pid, w.tid(tid), f["start"], f["end"],
                    {"Python id": i + 1, "Python parent id": None})
        cuda_names = sorted({S.strip_api_suffix(r[4]) for r in calls})
        codes = api_kind_codes(StringTable(np.arange(len(cuda_names)), np.array(cuda_names, dtype=object)))(
            np.arange(len(cuda_names))) if cuda_names else []
        kind_of = dict(zip(cuda_names, (int(c) for c in codes)))
        for start, end, gtid, corr, raw_name in calls:
            name = S.strip_api_suffix(raw_name)
            pid, tid = S.decode_pid(gtid), S.decode_tid(gtid)
            w.ext += 1
            ext = w.ext
            op_name = ATEN_OP.get(kind_of.get(name, -1))
            if op_spans:
                op_name = None  # the scenario names its operators: no made-up one around any call
            if op_name:
                w.x(cat["op"], op_name, pid, w.tid(tid), start, end, {w.ext_key(): ext})
            driver = name.startswith("cu") and not name.startswith("cuda") and not hip
            shown = (api_names or {}).get(name) or (hip_name(name) if hip else name)
            w.x(cat["driver" if driver else "runtime"], shown, pid, w.tid(tid), start, end,
                {w.ext_key(): ext, "cid": 0, "correlation": corr} if hip else
                {w.ext_key(): ext, "cbid": 0, "correlation": corr})
            if (gpu_op := by_corr.get((gtid & S.PROCESS_MASK, corr))) is not None:
                w.flow("s", corr, pid, w.tid(tid), start)
                gpu_op._kineto_ext = ext  # type: ignore[attr-defined]
        # issue 47: the allocator's [memory] events (profile_memory=True)
        for m in cap.memory_events():
            args = {"Device Type": 1, "Device Id": m["device"], "Bytes": m["bytes"]}
            if form == "new":  # PyTorch >= 1.10: the running totals and the block's address
                args = {"Total Reserved": m["reserved"], "Total Allocated": m["allocated"], "Bytes": m["bytes"],
                        "Addr": m["address"], **{k: args[k] for k in ("Device Id", "Device Type")}}
            cat_mem = '"cat": "cpu_instant_event", ' if form == "new" else ""
            w.event(f'{{"ph": "i", {cat_mem}"s": "t", "name": "[memory]", "pid": {m["pid"]}, "tid": {m["tid"]}, '
                    f'"ts": {w.ts(m["ts"])}, "args": {_dumps(args)}}}')
        # device side
        for op in gpu:
            ext = getattr(op, "_kineto_ext", 0)
            args = {w.ext_key(): ext} if ext else {}
            if hip:  # Kineto's ROCm GPU rows: no context; a kind on every row
                args.update({"device": op.device, "stream": op.stream, "correlation": op.correlation_id})
            else:
                args.update({"device": op.device, "context": op.context, "stream": op.stream,
                             "correlation": op.correlation_id})
            if op.table == "kernel":
                if hip:
                    args.update({"kind": "Dispatch Kernel", "grid": list(op.grid), "block": list(op.block)})
                else:
                    args.update(_kernel_args(op, cap.sm_count or 132, cap.compute_capability or (9, 0)))
                w.x(cat["kernel"], op.name, op.device, w.stream_tid(op.stream), op.start, op.end, args)
            elif op.table == "memcpy" and hip:
                kind, src, dst = HIP_COPY.get(op.copy_kind, ("<unknown>", "?", "?"))
                args.update({"kind": kind, "bytes": op.bytes,
                             "memory bandwidth (GB/s)": round(op.bytes / max(op.end - op.start, 1), 6)})
                w.x(cat["memcpy"], f"Memcpy {kind} ({src} -> {dst})", op.device, w.stream_tid(op.stream),
                    op.start, op.end, args)
            elif op.table == "memcpy":
                kind = S.COPY_KIND_LABELS.get(op.copy_kind, "Unknown")
                src = MEM_KIND_NAMES.get(op.src_kind if op.src_kind is not None else -1, "Unknown")
                dst = MEM_KIND_NAMES.get(op.dst_kind if op.dst_kind is not None else -1, "Unknown")
                args.update({"bytes": op.bytes,
                             "memory bandwidth (GB/s)": round(op.bytes / max(op.end - op.start, 1), 6)})
                w.x(cat["memcpy"], f"Memcpy {kind} ({src} -> {dst})", op.device, w.stream_tid(op.stream),
                    op.start, op.end, args)
            elif hip:
                args["kind"] = "Device"
                w.x(cat["memset"], "Memset (Device)", op.device, w.stream_tid(op.stream), op.start, op.end, args)
            else:
                args.update({"bytes": op.bytes,
                             "memory bandwidth (GB/s)": round(op.bytes / max(op.end - op.start, 1), 6)})
                w.x(cat["memset"], f"Memset ({MEM_KIND_NAMES.get(op.mem_kind, 'Device')})", op.device,
                    w.stream_tid(op.stream), op.start, op.end, args)
            if ext:
                w.flow("f", op.correlation_id, op.device, w.stream_tid(op.stream), op.start)
        w.close(stop)
    return path
