"""What rule expressions can name: metric values, evidence tables, time-range kinds.

Values come from ``result["metrics"]["values"]`` (computed by ``nsysdoc.analysis``; each defined
in ``docs/glossary.md`` under "Rule values"). Tables are rows of the JSON result.
"""
from __future__ import annotations

from ..idle_causes import IDLE_CAUSES

#: every name in ``metrics.values``
VALUE_NAMES: tuple[str, ...] = (
    "window_ms", "window_kind", "device_count", "has_step_markers", "has_steps", "steps_inferred", "step_count", "step_time_ms_median",
    "gpu_busy_pct", "gpu_activity", "enough_gpu_work", "gpu_op_count", "host_wait_pct", "kernel_count", "tiny_kernels_per_gpu",
    "kernels_per_step_median", "kernel_mean_us", "kernel_median_us", "kernel_under_10us_pct", "tiny_kernel_count",
    "nvtx_traced", "osrt_traced", "cuda_api_traced", "os_wait_note", "gpu_metrics_present", "profiler_overhead_pct",
    "diagnostic_warning_count", "diagnostic_error_count", "lost_event_notes", "cuda_trace_notes",
    "launch_call_count", "module_load_count", "busy_ms", "compute_ms", "compute_pct", "copy_only_ms", "copy_only_pct",
    "copy_only_ms_per_step",
    *(f"idle_{c}_{u}" for c in IDLE_CAUSES for u in ("ms", "pct", "ms_per_step")),
    "idle_pct", "dependency_waited_on", "dependency_launched_ms_before", "alloc_steps_pct", "launch_gap_count", "launch_gap_us_mean", "launch_gap_us_median", "launch_gap_to_kernel_ratio",
    "host_gap_count", "host_gap_ms_max", "host_gap_ms_median", "idle_before_first_op_ms_median",
    "step_start_idle_pct_median", "host_sync_ms_per_step_median", "scalar_reads_per_step_median",
    "scalar_read_count", "sync_call_count", "host_sync_ms_max_thread", "alloc_call_count", "alloc_api_ms",
    # allocation churn or growth (nsysdoc.metrics.alloc)
    "alloc_count", "alloc_release_count", "alloc_repeat_count", "alloc_growth_count", "alloc_first_call_count",
    "alloc_repeat_steps", "alloc_repeat_steps_pct", "alloc_growth_ms",
    "span_ms", "setup_ms", "setup_pct", "setup_before_ms", "setup_span_ms", "capture_ms", "busy_capture_pct",
    "outside_window_pct", "unrecorded_call_count", "unrecorded_call_name", "unrecorded_call_ms",
    "unrecorded_covered_ms", "unrecorded_gpu_ms", "gpu_work_sliver", "busy_capture_share_pct", "program_ms",
    "host_outside_window_ms", "host_outside_window_pct", "host_outside_before_ms", "host_outside_after_ms",
    "host_outside_phase_count", "warmup_ms", "top_setup_name", "top_setup_ms", "comm_ms",
    "exposed_comm_ms", "comm_overlapped_pct", "exposed_comm_pct", "exposed_comm_ms_per_step", "copy_count",
    "copy_ms", "copy_bytes", "copy_gbps", "top_copy_kind", "top_copy_host_memory", "top_copy_ms",
    "top_copy_bytes", "top_copy_gib", "top_copy_count", "top_copy_gbps", "pageable_copy_count",
    "pageable_copy_ms", "pageable_copy_bytes", "pageable_copy_gib", "pageable_gbps", "pinned_gbps",
    "pinned_gbps_typical", "pinned_gbps_reference", "pinned_gbps_measured", "pageable_saving_ms", "dtoh_bytes",
    "dtoh_ms", "dtoh_count", "dtoh_bytes_per_step_median", "dtoh_mib_per_step_median", "dtoh_ms_per_step_median",
    "dtoh_ms_per_step", "top_kernel_name", "top_kernel_share_pct",
    "top_kernel_count", "top_kernel_total_ms", "top_kernel_mean_us", "top_kernel_short_name",
    "top_kernel_calls_per_step", "top_kernel_instance_share_pct", "top_kernel_window_pct", "fp32_gemm_ms", "fp32_gemm_share_pct",
    "compute_capability", "tf32_capable", "time_busy_pct_median", "sm_active_pct_median", "sm_issue_pct_median",
    "tensor_active_pct_median", "dram_read_pct_median",
    # kernels that cannot fill the GPU (nsysdoc.metrics.occupancy)
    "sm_count", "underfilled_kernel_ms", "underfilled_kernel_pct", "underfilled_recoverable_ms",
    "underfilled_recoverable_pct", "underfilled_ms_per_step", "underfilled_kernel_count", "underfilled_sm_fill_pct",
    "underfilled_sm_active_pct", "underfilled_gpu_metrics_note", "low_occupancy_kernel_ms", "low_occupancy_kernel_pct",
    "low_occupancy_note", "top_underfilled_name", "top_underfilled_blocks", "top_underfilled_threads",
    "top_underfilled_count", "top_underfilled_ms", "top_underfilled_recoverable_ms", "top_underfilled_sm_fill_pct",
    "top_underfilled_occupancy_pct", "top_underfilled_est_occupancy_pct",
    # hardware counters per kernel (issue 47; nsysdoc.metrics.gpu_metrics)
    "top_kernel_bound", "top_kernel_bound_note", "latency_bound_kernel_count", "latency_bound_kernel_ms",
    "latency_bound_note", "unclassified_kernel_pct",
    # gradient zeroing repeated within one optimizer step (nsysdoc.metrics.optimizer; issue 47)
    "zero_grad_calls", "optimizer_step_calls", "zero_grad_per_step_max", "zero_grad_extra_calls",
    "zero_grad_extra_gpu_ops", "zero_grad_extra_gpu_ms", "zero_grad_extra_gpu_pct", "zero_grad_extra_gpu_ms_per_step",
    "zero_grad_optimizer",
    # added by the engine
    "ncu_command", "capture_problems", "capture_problem_count", "fp32_advice", "fp32_fix",
    "warmup_note", "capture_fix", "launch_ratio_note", "pageable_cost_note",
    # wording by the tool that made the capture (nsysdoc.rules.evaluate.TOOL_WORDING)
    "trace_viewer", "trace_timeline", "capture_check",
    "stack_switch", "copy_rows", "kernel_summary_cmd", "pageable_check", "cpu_sampling_capture", "host_ranges", "steady_capture",
)

#: values that are text, not numbers (format specs are checked against this at load time)
STRING_VALUES = frozenset({"dependency_waited_on", "unrecorded_call_name", "top_kernel_name", "top_kernel_short_name", "ncu_command", "capture_problems", "window_kind",
                           "top_setup_name", "top_copy_kind", "top_copy_host_memory", "fp32_advice", "fp32_fix",
                           "warmup_note", "capture_fix", "os_wait_note", "launch_ratio_note",
                           "pageable_cost_note", "top_underfilled_name", "underfilled_gpu_metrics_note",
                           "low_occupancy_note", "trace_viewer", "trace_timeline", "capture_check",
                           "stack_switch", "copy_rows", "kernel_summary_cmd", "pageable_check", "cpu_sampling_capture", "host_ranges", "steady_capture",
                           "top_kernel_bound", "top_kernel_bound_note", "latency_bound_note"})

#: issue 47: the memory view's values and evidence tables (nsysdoc.assembly.memory; kept here as
#: text so that rule loading does not import numpy)
VALUE_NAMES = VALUE_NAMES + (
    "memory_recorded", "memory_baseline", "memory_lower_bound", "memory_peak_allocated_gib",
    "memory_growth_device", "memory_growth_mib_per_step", "memory_growth_total_mib", "memory_growth_steps",
    "memory_rising_steps", "memory_growth_peak_pct", "memory_growth_level_gib", "memory_device_gib",
    "memory_steps_to_full", "memory_full_device", "memory_full_peak_kind", "memory_full_peak_gib",
    "memory_full_device_gib", "memory_full_pct", "memory_top_op", "memory_top_op_gib",
)
STRING_VALUES = STRING_VALUES | {"memory_baseline", "memory_full_peak_kind", "memory_top_op"}
#: the optimizer's class in its record_function name (issue 47, zero-grad-repeated)
STRING_VALUES = STRING_VALUES | {"zero_grad_optimizer"}

# issue 47: operators' input shapes across steps (rule dynamic-shapes) and fixed convolution shapes
# with the convolution kernels' share (rule cudnn-benchmark); nsysdoc.engine.shapes
VALUE_NAMES = VALUE_NAMES + (
    "operator_shapes_recorded", "shape_steps_compared", "shape_changing_op_count", "shape_changing_steps",
    "shape_change_ms", "shape_change_pct", "shape_modal_step_ms", "shape_changed_step_ms", "shape_change_note",
    "conv_shapes_fixed", "conv_kernel_share_pct",
)
STRING_VALUES = STRING_VALUES | {"shape_change_note"}

#: evidence tables: name -> columns
TABLE_COLUMNS: dict[str, list[str]] = {
    "steps": ["step", "index", "name", "pid", "tid", "start_ns", "end_ns", "step_time_ms", "duration_ms", "device",
              "kernel_count", "time_busy_pct", "idle_before_first_op_ms", "host_sync_ms", "scalar_reads",
              "sm_active_pct", "sm_issue_pct", "tensor_active_pct", "dram_read_pct",
              *(f"idle_{c}_ms" for c in IDLE_CAUSES), "exposed_comm_ms", "compute_ms", "copy_ms"],
    "devices": ["label", "name", "compute_capability", "busy_pct", "compute_pct", "comm_pct", "exposed_comm_pct",
                "copy_only_pct", "idle_pct", "busy_ms", "compute_ms", "copy_only_ms", "comm_ms", "exposed_comm_ms",
                "kernel_count", "copy_count", "gap_count"],
    "kernels": ["name", "count", "total_ms", "mean_us", "median_us", "p95_us", "share_of_kernel_time_pct",
                "under_10us_pct", "is_nccl", "fp32_gemm", "tensor_cores"],
    "kernels_by_name": ["name", "count", "total_ms", "mean_us", "median_us", "p95_us", "share_of_kernel_time_pct",
                        "under_10us_pct", "is_nccl", "fp32_gemm", "tensor_cores",
                        "sm_active_pct", "sm_issue_pct", "tensor_active_pct", "dram_bandwidth_pct", "counter_samples",
                        "bound"],
    "copies": ["kind", "host_memory", "count", "bytes", "time_ms", "gbps"],
    "sync_calls": ["api", "count", "total_ms", "max_ms"],
    "sync_threads": ["pid", "tid", "host_sync_ms", "share_of_window_pct"],
    "alloc_calls": ["api", "count", "total_ms", "max_ms"],
    "setup_events": ["name", "kind", "count", "total_ms", "max_ms"],
    "gaps": ["device", "start_ns", "end_ns", "duration_ms", "cause", "pid", "tid",
             *(f"{c}_ms" for c in IDLE_CAUSES)],
    "dependency_waits": ["device", "start_ns", "end_ns", "duration_ms", "dependency_ms", "stream", "waiting_op",
                         "op_start_ns", "launch_api", "launched_ms_before", "pid", "tid", "producer",
                         "producer_device", "producer_stream", "producer_end_ns", "host_call", "host_call_us_before"],
    "host_outside_phases": ["where", "name", "start_ns", "end_ns", "duration_ms"],
    "underfilled_kernels": ["name", "blocks", "threads_per_block", "registers_per_thread", "shared_memory_bytes",
                            "sm_count", "sm_fill_pct", "theoretical_occupancy_pct", "est_achieved_occupancy_pct",
                            "low_occupancy", "count", "time_ms", "recoverable_ms", "share_of_window_pct"],
}
#: issue 47: the memory rules' evidence (nsysdoc.metrics.memory.memory_tables)
TABLE_COLUMNS["memory_devices"] = ["device", "peak_allocated_mib", "peak_reserved_mib", "device_memory_gib",
                                   "growth_mib_per_step", "rising_steps", "growth_steps"]
TABLE_COLUMNS["memory_top_ops"] = ["op", "module", "frame", "allocated_mib", "allocations"]

#: ``time_ranges`` kinds: ``gaps:<cause>`` (longest gaps of that cause), ``worst_step``,
#: ``median_step``, ``window``, ``evidence`` (rows of the evidence table that have start/end),
#: ``setup`` (the warm-up left out of the window, then the gaps with the most set-up time),
#: ``exposed_comm`` (issue 49: the longest stretches of ``metrics.exposed_comm`` of the slowest step
#: or the window; the slowest step when none is known).
TIME_RANGE_KINDS = ("gaps", "worst_step", "median_step", "window", "evidence", "setup", "exposed_comm")
