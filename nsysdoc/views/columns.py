"""Human column headers (with units) and cell formats for the evidence tables of findings.

The JSON keeps the machine names (``idle_before_first_op_ms``); the page shows "Idle before first
op (ms)". Times are in ms or µs as the header says, timestamps in seconds with ns precision (as
typed into the Nsight Systems GUI), ids without thousands separators, sizes in binary units
(KiB/MiB/GiB), bandwidth in GB/s (10^9 bytes per second).
"""
from __future__ import annotations

import math

from ..fmt import fmt_bytes, fmt_s, is_num
from ..idle_causes import IDLE_CAUSE_SHORT_NAMES

#: machine name -> (header, kind); kind decides the cell format
COLUMNS: dict[str, tuple[str, str]] = {
    "step": ("Step #", "id"), "index": ("Index", "id"), "name": ("Name", "text"), "pid": ("PID", "id"),
    "tid": ("TID", "id"), "start_ns": ("Start (s)", "ts"), "end_ns": ("End (s)", "ts"),
    "step_time_ms": ("Step time (ms)", "ms"), "duration_ms": ("Duration (ms)", "ms"), "device": ("Device", "text"),
    "kernel_count": ("Kernels", "count"), "time_busy_pct": ("Time-busy (%)", "pct"),
    "idle_before_first_op_ms": ("Idle before first op (ms)", "ms"), "host_sync_ms": ("Host sync (ms)", "ms"),
    "scalar_reads": ("Scalar reads", "count"), "sm_active_pct": ("SM Active (%)", "pct"),
    "blocks": ("Blocks (grid)", "count"), "threads_per_block": ("Threads per block", "count"),
    "sm_count": ("SMs", "count"), "sm_fill_pct": ("SM fill (%)", "pct"),
    "theoretical_occupancy_pct": ("Theoretical occupancy (%)", "pct"),
    "est_achieved_occupancy_pct": ("Est. achieved occupancy (%)", "pct"), "recoverable_ms": ("Recoverable (ms)", "ms"),
    "registers_per_thread": ("Registers per thread", "count"), "shared_memory_bytes": ("Shared memory (bytes)", "count"),
    "low_occupancy": ("Under 4 warps per SM", "text"),
    "dram_bandwidth_pct": ("DRAM bandwidth (%)", "pct"), "counter_samples": ("GPU metrics samples", "count"),
    "bound": ("Class (GPU metrics)", "text"),
    "sm_issue_pct": ("SM Issue (%)", "pct"), "tensor_active_pct": ("Tensor Active (%)", "pct"),
    "dram_read_pct": ("DRAM read (%)", "pct"), "exposed_comm_ms": ("Exposed comm (ms)", "ms"),
    "compute_ms": ("Compute (ms)", "ms"), "copy_ms": ("Copies only (ms)", "ms"),
    "label": ("Device", "text"), "compute_capability": ("Compute capability", "cc"),
    "busy_pct": ("Busy (%)", "pct"), "compute_pct": ("Compute (%)", "pct"), "comm_pct": ("Comm (%)", "pct"),
    "exposed_comm_pct": ("Exposed comm (%)", "pct"), "copy_only_pct": ("Copies only (%)", "pct"),
    "idle_pct": ("Idle (%)", "pct"), "busy_ms": ("Busy (ms)", "ms"), "copy_only_ms": ("Copies only (ms)", "ms"),
    "comm_ms": ("Comm (ms)", "ms"), "copy_count": ("Copies", "count"), "gap_count": ("Idle gaps", "count"),
    "count": ("Count", "count"), "total_ms": ("Total (ms)", "ms"), "mean_us": ("Mean (µs)", "us"),
    "median_us": ("Median (µs)", "us"), "p95_us": ("p95 (µs)", "us"),
    "share_of_kernel_time_pct": ("Share of kernel time (%)", "pct"), "under_10us_pct": ("Under 10 µs (%)", "pct"),
    "is_nccl": ("NCCL", "bool"), "fp32_gemm": ("FP32 GEMM", "bool"), "tensor_cores": ("Tensor cores", "bool"),
    "kind": ("Kind", "text"), "host_memory": ("Host memory", "text"), "bytes": ("Size", "bytes"),
    "time_ms": ("Time (ms)", "ms"), "gbps": ("Bandwidth (GB/s)", "gbps"), "api": ("API", "text"),
    "max_ms": ("Longest (ms)", "ms"), "share_of_window_pct": ("Share of window (%)", "pct"),
    "cause": ("Largest class", "text"),
    # what the GPU waited on (gpu-dependency's evidence)
    "stream": ("Stream", "id"), "waiting_op": ("Waiting operation", "text"), "op_start_ns": ("Op start (s)", "ts"),
    "launch_api": ("Launching call", "text"), "launched_ms_before": ("Launched before it ran (ms)", "ms"),
    "producer": ("Producer (ended when the wait did)", "text"), "producer_device": ("Producer device", "text"),
    "producer_stream": ("Producer stream", "id"), "producer_end_ns": ("Producer end (s)", "ts"),
    "host_call": ("Wait/record/graph call before the launch", "text"),
    "host_call_us_before": ("That call before the launch (µs)", "us"),
    "where": ("Where", "text"),
    **{f"idle_{c}_ms": (f"Idle: {n} (ms)", "ms") for c, n in IDLE_CAUSE_SHORT_NAMES.items()},
    **{f"{c}_ms": (f"{n[:1].upper() + n[1:]} (ms)", "ms") for c, n in IDLE_CAUSE_SHORT_NAMES.items()},
}

#: issue 47: the memory rules' evidence (nsysdoc.metrics.memory.memory_tables)
COLUMNS.update({
    "peak_allocated_mib": ("Peak allocated (MiB)", "pct"), "peak_reserved_mib": ("Peak reserved (MiB)", "pct"),
    "device_memory_gib": ("Device memory (GiB)", "pct"), "growth_mib_per_step": ("Growth per step (MiB)", "pct"),
    "rising_steps": ("Steps rising", "count"), "growth_steps": ("Steps", "count"), "op": ("Operator", "text"),
    "module": ("Module", "text"), "frame": ("Python frame", "text"), "allocated_mib": ("Allocated (MiB)", "pct"),
    "allocations": ("Allocations", "count"),
})


def header(name: str) -> str:
    """The header shown for a column (unknown names, e.g. a team table's, as they are)."""
    return COLUMNS.get(name, (name, ""))[0]


def _ms(v: float) -> str:
    a = abs(v)
    return f"{v:,.3f}" if a < 1 else f"{v:,.2f}" if a < 100 else f"{v:,.1f}"


def cell(name: str, value) -> str:
    """A value formatted for its column."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    kind = COLUMNS.get(name, ("", ""))[1]
    if isinstance(value, bool):
        return "yes" if value else "no"
    if not is_num(value):
        return str(value)
    if kind == "id":
        return str(int(value))
    if kind == "ts":
        return fmt_s(value)
    if kind in ("ms", "us"):
        return _ms(value)
    if kind in ("pct", "gbps"):
        return f"{value:,.1f}"
    if kind == "bytes":
        return fmt_bytes(value)
    if kind == "cc":
        return f"{value:.1f}"
    if kind == "count":
        return f"{int(value):,}"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e-3 or abs(value) >= 1e6 else f"{round(value, 3):,}"
    return str(value)


# --- issue 49: kernel names in evidence tables ----------------------------------------------------
#: columns whose cells may hold a kernel's full demangled signature
KERNEL_NAME_COLUMNS = frozenset({"name", "waiting_op", "producer"})
#: longest short name shown in a cell (the full signature is on hover, ``title=``)
SHORT_NAME_MAX = 80


def _looks_like_signature(s: str) -> bool:
    """A C++ kernel signature (``void ns::k<...>(...)``), not a step, NVTX or host-phase name."""
    return s.startswith("void ") or "::" in s or "<" in s


def short_cell(name: str, value) -> tuple[str, str]:
    """(text shown, hover title) of an evidence cell: a kernel-name column's C++ signature is shown
    by its short name (the kernels table's display name: nsys's shortName, or for generic names like
    ``Kernel`` the identity from the template arguments) with the full signature as the title; any
    other cell is :func:`cell` with no title. The JSON keeps the full signature."""
    text = cell(name, value)
    if name not in KERNEL_NAME_COLUMNS or not isinstance(value, str) or not _looks_like_signature(value.strip()):
        return text, ""
    from ..metrics.kernels import display_name, short_kernel_name

    full = value.strip()
    short = display_name(short_kernel_name(full), full) or full
    if len(short) > SHORT_NAME_MAX:
        short = short[: SHORT_NAME_MAX - 1] + "…"
    return (short, full) if short != full else (text, "")
