"""The API's tables (issue 51: apart from ``nsysdoc.api``, which grew past 1,000 lines): the
documented DataFrame columns and dtypes of every ``Report``/``Diff``/``Job`` table (docs/api.md,
"DataFrame columns"; tests/test_api.py parses them from there), :func:`_frame` that builds a
DataFrame with exactly those columns, and the builders of the per-event tables' chunks.
``nsysdoc.api`` re-exports every name (``nsysdoc.api.STEP_COLUMNS`` ...). pandas is imported only
when a DataFrame is built."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Sequence

from .errors import UsageError
#: idle causes, in the order the report lists them (columns of ``Report.devices`` / ``Report.gaps``)
from .idle_causes import IDLE_CAUSES

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

#: parts of a step's exclusive split (columns of ``Report.steps``, in ms)
STEP_PARTS = ("compute", "exposed_comm", "copy", "idle_sync", "idle_input", "idle_alloc", "idle_setup",
              "idle_launch", "idle_api", "idle_host", "idle_dependency", "idle_tail", "idle_unattributed")


def _frame(rows: Iterable[dict], columns: Sequence[tuple[str, str]]) -> "pd.DataFrame":
    """A DataFrame with exactly ``columns`` (name, dtype), in that order, whatever the rows hold.

    dtypes: ``int64``, ``Int64`` (nullable integer), ``float64`` (missing = NaN), ``bool``,
    ``boolean`` (nullable), ``object`` (str, or None when missing)."""
    from .lazy_pandas import pandas

    pd = pandas()
    rows = list(rows)
    data = {}
    for name, dtype in columns:
        values = [r.get(name) for r in rows]
        if dtype == "float64":
            values = [float("nan") if v is None else float(v) for v in values]
        data[name] = pd.Series(values, dtype=dtype if rows or dtype != "object" else "object")
    return pd.DataFrame(data, columns=[c for c, _ in columns])


STEP_COLUMNS: tuple[tuple[str, str], ...] = (
    ("step", "int64"), ("index", "int64"), ("name", "object"), ("primary", "bool"),
    ("pid", "Int64"), ("tid", "Int64"), ("device", "object"),
    ("start_ns", "int64"), ("end_ns", "int64"), ("step_time_ms", "float64"), ("duration_ms", "float64"),
    ("kernel_count", "Int64"), ("time_busy_pct", "float64"), ("idle_before_first_op_ms", "float64"),
    ("host_sync_ms", "float64"), ("scalar_reads", "Int64"), ("sm_active_pct", "float64"),
    ("sm_issue_pct", "float64"), ("tensor_active_pct", "float64"), ("dram_read_pct", "float64"),
) + tuple((f"{p}_ms", "float64") for p in STEP_PARTS)

KERNEL_COLUMNS: tuple[tuple[str, str], ...] = (
    ("name", "object"), ("count", "int64"), ("total_ms", "float64"), ("mean_us", "float64"),
    ("median_us", "float64"), ("p95_us", "float64"), ("share_of_kernel_time_pct", "float64"),
    ("under_10us_pct", "float64"), ("is_nccl", "bool"),
    # hardware counters per kernel (issue 47; NaN / 0 / "unknown" without GPU metrics)
    ("sm_active_pct", "float64"), ("sm_issue_pct", "float64"), ("tensor_active_pct", "float64"),
    ("dram_bandwidth_pct", "float64"), ("counter_samples", "int64"), ("bound", "object"),
)

#: ``Report.operators_by_shape`` (issue 47)
OPERATOR_SHAPE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("name", "object"), ("input_dims", "object"), ("calls", "Int64"), ("self_gpu_ms", "float64"),
    ("gpu_ms", "float64"), ("self_cpu_ms", "float64"), ("cpu_ms", "float64"), ("kernels", "Int64"),
)
OPERATOR_COLUMNS: tuple[tuple[str, str], ...] = (
    ("name", "object"), ("calls", "Int64"), ("gpu_ms", "float64"), ("self_gpu_ms", "float64"),
    ("cpu_ms", "float64"), ("self_cpu_ms", "float64"), ("kernels", "Int64"), ("top_kernel", "object"),
    ("module", "object"), ("frame", "object"),
    # issue 47: the CPU-side view (rows by CPU time too; per call, and CPU dispatch slower than the GPU)
    ("cpu_us_per_call", "float64"), ("gpu_us_per_call", "float64"), ("cpu_exceeds_gpu", "boolean"),
    ("cpu_wait_ms", "float64"), ("outer_calls", "Int64"),
)

DEVICE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("device", "int64"), ("label", "object"), ("name", "object"), ("compute_capability", "float64"),
    ("busy_pct", "float64"), ("compute_pct", "float64"), ("comm_pct", "float64"),
    ("exposed_comm_pct", "float64"), ("copy_only_pct", "float64"), ("idle_pct", "float64"),
    ("busy_ms", "float64"), ("compute_ms", "float64"), ("copy_only_ms", "float64"), ("comm_ms", "float64"),
    ("exposed_comm_ms", "float64"), ("kernel_count", "int64"), ("copy_count", "int64"), ("gap_count", "int64"),
) + tuple((f"idle_{c}_ms", "float64") for c in IDLE_CAUSES)

GAP_COLUMNS: tuple[tuple[str, str], ...] = (
    ("device", "object"), ("start_ns", "int64"), ("end_ns", "int64"), ("duration_ms", "float64"),
    ("cause", "object"), ("pid", "Int64"), ("tid", "Int64"),
) + tuple((f"{c}_ms", "float64") for c in IDLE_CAUSES)

RANK_COLUMNS: tuple[tuple[str, str], ...] = (
    ("rank", "int64"), ("file", "object"), ("ok", "bool"), ("error", "object"), ("pids", "object"),
    ("devices", "object"), ("gpu_models", "object"), ("step_source", "object"), ("steps", "Int64"),
    ("step_time_ms_median", "float64"), ("gpu_busy_pct", "float64"), ("compute_pct", "float64"),
    ("exposed_comm_pct", "float64"), ("copy_only_pct", "float64"), ("clock_offset_ms", "float64"),
    ("clock_mad_us", "float64"), ("last_count", "Int64"), ("wait_ms_per_step", "float64"),
    ("kernel_count", "Int64"), ("verdict", "object"), ("report", "object"),
)

DIFF_KERNEL_COLUMNS: tuple[tuple[str, str], ...] = (
    ("name", "object"), ("status", "object"), ("base_ms_per_step", "float64"),
    ("candidate_ms_per_step", "float64"), ("delta_ms_per_step", "float64"),
    ("base_count_per_step", "float64"), ("candidate_count_per_step", "float64"),
    ("base_mean_us", "float64"), ("candidate_mean_us", "float64"),
)



#: issue 47: ``Report.memory`` and ``Report.memory_ops``
MEMORY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("time_ns", "int64"), ("device", "int64"), ("bytes", "int64"), ("allocated_bytes", "int64"),
    ("reserved_bytes", "Int64"), ("pid", "Int64"), ("tid", "Int64"),
)
MEMORY_OP_COLUMNS: tuple[tuple[str, str], ...] = (
    ("op", "object"), ("module", "object"), ("frame", "object"), ("allocated_bytes", "int64"),
    ("allocations", "int64"),
)
#: issue 48: ``Report.critical_path``
CRITICAL_PATH_SEGMENTS = ("cpu", "launch", "kernel", "copy", "comm", "wait")
CRITICAL_PATH_COLUMNS: tuple[tuple[str, str], ...] = (
    ("step", "Int64"), ("start_ns", "int64"), ("length_ms", "float64"),
    *((f"{k}_ms", "float64") for k in CRITICAL_PATH_SEGMENTS),
)



# --- issue 49: per-event tables -----------------------------------------------------------------
#: ``Report.gpu_ops`` / ``Report.iter_gpu_ops``
GPU_OP_COLUMNS: tuple[tuple[str, str], ...] = (
    ("start_ns", "int64"), ("end_ns", "int64"), ("device", "object"), ("stream", "Int64"), ("name", "object"),
    ("kind", "object"), ("correlation", "Int64"), ("operator", "object"), ("module", "object"), ("step", "Int64"),
    ("frame", "object"), ("device_id", "Int64"), ("pid", "Int64"),
)


def _chunk_rows(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"chunk_rows must be a positive integer, got {value!r}",
                         hint="e.g. chunk_rows=1_000_000 (rows per DataFrame)")
    return value


def _nullable_int(pd, values, missing):
    import numpy as np

    v = np.asarray(values, dtype=np.int64)
    return pd.arrays.IntegerArray(v, v == missing) if len(v) else pd.array([], dtype="Int64")


def _gpu_op_frame(chunk: dict) -> "pd.DataFrame":
    from .lazy_pandas import pandas

    pd = pandas()
    data = {}
    for name, dtype in GPU_OP_COLUMNS:
        v = chunk[name]
        if dtype == "Int64":
            # unknown: stream/device -1, step -1 (outside every step), correlation 0 (none recorded)
            data[name] = _nullable_int(pd, v, 0 if name == "correlation" else -1)
        else:
            data[name] = pd.Series(v, dtype=dtype)
    return pd.DataFrame(data, columns=[c for c, _ in GPU_OP_COLUMNS])


def _gap_frame(chunk: dict, labels: list) -> "pd.DataFrame":
    import numpy as np

    from .lazy_pandas import pandas
    from .trace import schema as S

    pd = pandas()
    dev = chunk["device"]
    th = chunk["thread"]
    split = chunk["split_ns"]
    data = {"device": pd.Series([labels[d] if 0 <= d < len(labels) else None for d in dev.tolist()], dtype="object"),
            "start_ns": pd.Series(chunk["start_ns"], dtype="int64"), "end_ns": pd.Series(chunk["end_ns"], dtype="int64"),
            "duration_ms": pd.Series((chunk["end_ns"] - chunk["start_ns"]) / 1e6, dtype="float64"),
            "cause": pd.Series([IDLE_CAUSES[c] for c in chunk["cause"].tolist()], dtype="object"),
            "pid": pd.arrays.IntegerArray(np.asarray(S.decode_pid(th), dtype=np.int64), th == 0),
            "tid": pd.arrays.IntegerArray(np.asarray(S.decode_tid(th), dtype=np.int64), th == 0)}
    for j, c in enumerate(IDLE_CAUSES):
        data[f"{c}_ms"] = pd.Series(split[:, j] / 1e6, dtype="float64")
    return pd.DataFrame(data, columns=[c for c, _ in GAP_COLUMNS])


def _concat_frames(frames: list, columns) -> "pd.DataFrame":
    if not frames:
        return _frame([], columns)
    if len(frames) == 1:
        return frames[0]
    from .lazy_pandas import pandas

    return pandas().concat(frames, ignore_index=True)

