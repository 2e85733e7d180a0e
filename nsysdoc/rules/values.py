"""What rule expressions can name: metric values, evidence tables, time-range kinds.

Values come from ``result["metrics"]["values"]`` (computed by ``nsysdoc.analysis``; each defined
in ``docs/glossary.md`` under "Rule values"). Tables are rows of the JSON result.
"""
from __future__ import annotations

#: every name in ``metrics.values``
VALUE_NAMES: tuple[str, ...] = (
    "window_ms", "device_count", "has_step_markers", "step_count", "step_time_ms_median", "gpu_busy_pct",
    "gpu_activity", "host_wait_pct", "kernel_count", "kernels_per_step_median", "kernel_mean_us",
    "kernel_median_us", "kernel_under_10us_pct", "tiny_kernel_count", "nvtx_traced", "osrt_traced",
    "cuda_api_traced", "gpu_metrics_present", "profiler_overhead_pct", "diagnostic_warning_count",
    "diagnostic_error_count",
    "idle_sync_ms", "idle_sync_pct", "idle_input_ms", "idle_input_pct", "idle_launch_ms", "idle_launch_pct",
    "idle_host_ms", "idle_host_pct", "idle_dependency_ms", "idle_dependency_pct", "idle_tail_ms", "idle_tail_pct",
    "idle_unattributed_ms", "idle_unattributed_pct", "idle_pct",
    "late_launch_idle_ms", "late_launch_idle_pct", "late_gap_us_median", "late_gap_us_mean", "late_gap_to_kernel_ratio",
    "idle_before_first_op_ms_median", "step_start_idle_pct_median",
    "host_sync_ms_per_step_median", "scalar_reads_per_step_median", "scalar_read_count", "sync_call_count",
    "comm_ms", "exposed_comm_ms", "comm_overlapped_pct", "exposed_comm_pct", "exposed_comm_ms_per_step",
    "pageable_copy_count", "pageable_copy_ms", "pageable_copy_bytes", "pageable_gbps", "pinned_gbps",
    "dtoh_bytes", "dtoh_ms", "dtoh_count", "dtoh_bytes_per_step_median", "dtoh_ms_per_step_median",
    "top_kernel_name", "top_kernel_share_pct", "top_kernel_count", "top_kernel_total_ms", "top_kernel_mean_us",
    "top_kernel_short_name", "top_kernel_calls_per_step", "top_kernel_instance_share_pct",
    "fp32_gemm_ms", "fp32_gemm_share_pct",
    "time_busy_pct_median", "sm_active_pct_median", "sm_issue_pct_median", "tensor_active_pct_median",
    "dram_read_pct_median",
    # added by the engine
    "ncu_command", "capture_problems", "capture_problem_count",
)

#: values that are text, not numbers (format specs are checked against this at load time)
STRING_VALUES = frozenset({"top_kernel_name", "top_kernel_short_name", "ncu_command", "capture_problems"})

#: evidence tables: name -> columns
TABLE_COLUMNS: dict[str, list[str]] = {
    "steps": ["step", "index", "name", "pid", "tid", "start_ns", "end_ns", "step_time_ms", "duration_ms", "device",
              "kernel_count", "time_busy_pct", "idle_before_first_op_ms", "host_sync_ms", "scalar_reads",
              "sm_active_pct", "sm_issue_pct", "tensor_active_pct", "dram_read_pct", "idle_input_ms",
              "idle_sync_ms", "idle_launch_ms", "idle_host_ms", "exposed_comm_ms", "compute_ms", "copy_ms"],
    "devices": ["label", "name", "busy_pct", "compute_pct", "comm_pct", "exposed_comm_pct", "copy_only_pct",
                "idle_pct", "comm_ms", "exposed_comm_ms", "kernel_count", "copy_count", "gap_count"],
    "kernels": ["name", "count", "total_ms", "mean_us", "median_us", "p95_us", "share_of_kernel_time_pct",
                "under_10us_pct", "is_nccl", "fp32_gemm", "tensor_cores"],
    "kernels_by_name": ["name", "count", "total_ms", "mean_us", "median_us", "p95_us", "share_of_kernel_time_pct",
                        "under_10us_pct", "is_nccl", "fp32_gemm", "tensor_cores"],
    "copies": ["kind", "host_memory", "count", "bytes", "time_ms", "gbps"],
    "sync_calls": ["api", "count", "total_ms", "max_ms"],
    "sync_threads": ["pid", "tid", "host_sync_ms", "share_of_window_pct"],
    "gaps": ["device", "start_ns", "end_ns", "duration_ms", "cause", "pid", "tid"],
}

#: ``time_ranges`` kinds: ``gaps:<cause>`` (longest gaps of that cause), ``worst_step``,
#: ``median_step``, ``window``, ``evidence`` (rows of the evidence table that have start/end).
TIME_RANGE_KINDS = ("gaps", "worst_step", "median_step", "window", "evidence")
