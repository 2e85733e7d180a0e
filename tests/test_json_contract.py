"""The JSON output is a contract: keys, types, nulls, and what each scenario must show."""
from __future__ import annotations

import json
import math

import pytest

from nsysdoc.testing.scenarios import SCENARIOS

from .conftest import analyze_path

SUMMARY_KEYS = ["gpu_busy_pct", "step_count", "step_time_ms_median", "step_time_ms_mean", "kernel_count",
                "kernels_per_step_median"]
TOP_KEYS = {"nsysdoc_version", "contract", "source", "capture", "summary", "devices", "steps", "metrics", "findings"}


def _plain(value, path="$"):
    """Only JSON types; floats finite."""
    if isinstance(value, dict):
        for k, v in value.items():
            assert isinstance(k, str), path
            _plain(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _plain(v, f"{path}[{i}]")
    elif isinstance(value, float):
        assert math.isfinite(value), path
    else:
        assert value is None or isinstance(value, (str, int, bool)), (path, type(value))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_contract_on_every_scenario(build, name):
    d = analyze_path(build(name))
    assert TOP_KEYS <= set(d)
    assert list(d["summary"]) == SUMMARY_KEYS
    assert set(d["source"]) == {"path", "tool", "nsys_version", "schema_version"}
    assert d["source"]["tool"] == "nsys" and d["capture"]["not_recorded"] == []
    assert {"duration_ms", "traced", "warnings"} <= set(d["capture"])
    assert isinstance(d["findings"], list)
    _plain(d)
    json.dumps(d, allow_nan=False)
    for step in d["steps"]:
        if step["breakdown_ms"] is not None:
            total = sum(step["breakdown_ms"].values())
            assert total == pytest.approx(step["duration_ms"], abs=1e-3)
    for dev in d["devices"]:
        if dev["busy_pct"] is not None:
            assert 0 <= dev["busy_pct"] <= 100
            parts = dev["compute_pct"] + dev["exposed_comm_pct"] + dev["copy_only_pct"]
            assert parts == pytest.approx(dev["busy_pct"], abs=1e-3)


def test_contract_version_and_every_kernel_name(build):
    """``contract`` is what ``nsysdoc diff`` checks; ``kernels.names`` lists every short name, so
    its counts and times add up to the window's kernels (the top-50 tables do not)."""
    from nsysdoc.analysis import CONTRACT

    d = analyze_path(build("sample_training"))
    assert d["contract"] == CONTRACT == 4
    k = d["metrics"]["kernels"]
    assert sum(r["count"] for r in k["names"]) == k["count"]
    assert sum(r["total_ms"] for r in k["names"]) == pytest.approx(k["total_ms"], abs=1e-3)
    assert len({r["name"] for r in k["names"]}) == len(k["names"])
    # NVTX: step markers folded into one row; 12 steps
    rows = {r["text"]: r for r in d["metrics"]["nvtx"]}
    assert rows["ProfilerStep#N"]["count"] == 12


def test_absent_numbers_are_null(build):
    d = analyze_path(build("irregular_work"))  # no steps: neither markers nor repeating work
    assert d["summary"]["step_count"] == 0
    assert d["summary"]["step_time_ms_median"] is None
    assert d["summary"]["kernels_per_step_median"] is None
    assert d["steps"] == []
    assert any("no step markers" in w for w in d["capture"]["warnings"])


# --- what the scenarios must show (the situations they are named after) -----------------------
def idle(d):
    return d["metrics"]["idle_gaps"]["idle_ms_by_cause"]


def test_dataloader_starvation_is_input_wait(build):
    d = analyze_path(build("dataloader_starvation", steps=6, wait_ms=40.0))
    by = idle(d)
    assert by["input"] == max(by.values())
    # every step starts with ~40 ms of GPU idle while the host waits in the DataLoader range
    for s in d["steps"][1:]:
        assert s["idle_before_first_op_ms"] == pytest.approx(40.0, rel=0.05)


def test_sync_storm_is_sync(build):
    d = analyze_path(build("sync_storm", steps=5, items_per_step=40))
    assert idle(d)["sync"] == max(idle(d).values())
    assert d["metrics"]["sync"]["scalar_read_count"] == 200
    assert all(s["scalar_reads"] == 40 for s in d["steps"])


def test_launch_bound_is_host_side_not_sync(build):
    d = analyze_path(build("launch_bound_small_kernels", steps=5, kernels=300, kernel_us=4.0, python_us=40.0))
    by = idle(d)
    assert by["host"] + by["launch"] > 10 * (by["sync"] + by["input"])
    assert d["metrics"]["kernels"]["under_10us_pct"] == 100.0
    assert d["summary"]["kernels_per_step_median"] == 300


def test_exposed_vs_overlapped_nccl(build):
    exposed = analyze_path(build("ddp_nccl", name="exposed", overlapped=False))
    overlapped = analyze_path(build("ddp_nccl", name="overlapped", overlapped=True))
    # per GPU (mean over the 2 ranks), never summed over GPUs: 4 steps x 6 ms
    assert exposed["metrics"]["communication"]["comm_ms"] == pytest.approx(4 * 6.0, rel=1e-6)
    assert exposed["metrics"]["communication"]["exposed_comm_ms"] == pytest.approx(24.0, rel=1e-6)
    # overlapped: each of the 4 buckets' all-reduce (1.5 ms) runs under the next bucket's backward
    # GEMM, except the last one, which the optimizer waits for: 1.5 ms exposed per step and rank
    assert overlapped["metrics"]["communication"]["comm_ms"] == pytest.approx(24.0, rel=1e-6)
    assert overlapped["metrics"]["communication"]["exposed_comm_ms"] == pytest.approx(4 * 1.5, rel=1e-6)
    assert overlapped["metrics"]["communication"]["overlapped_pct"] == pytest.approx(75.0, abs=0.01)


def test_pageable_copies_are_reported_pageable(build):
    d = analyze_path(build("pageable_h2d", steps=4, nbytes=64 << 20))
    rows = {(r["kind"], r["host_memory"]): r for r in d["metrics"]["copies"]}
    assert rows[("HtoD", "pageable")]["count"] == 4
    assert rows[("HtoD", "pageable")]["bytes"] == 4 * (64 << 20)
    assert ("HtoD", "pinned") not in rows


def test_healthy_training_is_busy(build):
    d = analyze_path(build("healthy_training"))
    assert d["summary"]["gpu_busy_pct"] > 95
    assert d["metrics"]["sync"]["scalar_reads_per_step_median"] == 1


def test_pseudo_busy_shows_low_sm_activity(build):
    d = analyze_path(build("pseudo_busy"))
    for s in d["steps"]:
        assert s["time_busy_pct"] > 90
        assert s["sm_active_pct"] < 20


def test_seed_case_large_model(build):
    d = analyze_path(build("seed_case_large_model", steps=4, input_wait_ms=800.0, logits_mb=512, items=12))
    by = idle(d)
    assert by["input"] == max(by.values())
    assert d["metrics"]["sync"]["scalar_reads_per_step_median"] == 12
    # 4 full-logits copies (512 MiB, synchronous cudaMemcpy) + 48 four-byte .item() reads
    (dtoh,) = [r for r in d["metrics"]["copies"] if r["kind"] == "DtoH"]
    assert dtoh["count"] == 4 + 4 * 12
    assert dtoh["bytes"] == 4 * (512 << 20) + 48 * 4


@pytest.mark.parametrize("name", ["operators_forward_backward", "where_tiny_kernels_and_item", "sync_storm"])
def test_operators_and_where_keys(build, name):
    """Contract 3: metrics.operators rows and every finding's where entries have the documented keys."""
    from .conftest import diagnose_path

    d = diagnose_path(build(name))
    ops = d["metrics"]["operators"]
    assert {"source", "rows", "row_count", "gpu_ms", "attributed_pct", "modules", "frames", "missing"} <= set(ops)
    for r in ops["rows"]:
        # issue 47 added the per-call times at the end
        assert list(r) == ["name", "calls", "self_gpu_ms", "gpu_ms", "self_cpu_ms", "cpu_ms", "kernels", "top_kernel",
                           "module", "frame", "cpu_us_per_call", "gpu_us_per_call", "cpu_exceeds_gpu", "cpu_wait_ms",
                           # issue 47: hardware counters of the kernels it launched itself
                           "sm_active_pct", "sm_issue_pct", "tensor_active_pct", "dram_bandwidth_pct",
                           "counter_samples", "bound",
                           # issue 47 review: the calls the per-call times divide by
                           "outer_calls"]
    # (fewer than 500 rows: every row is among the first by self GPU time; rows by CPU time come after those)
    assert [r["self_gpu_ms"] for r in ops["rows"]] == sorted((r["self_gpu_ms"] for r in ops["rows"]), reverse=True)
    for f in d["findings"]:
        assert "where" in f and "where_note" in f
        # sites first (by share), then the operators whose CPU dispatch is slower than the GPU (issue 47)
        sites = [w for w in f["where"] if w.get("via") != "CPU dispatch slower than the GPU"]
        assert f["where"][:len(sites)] == sites
        assert [w["share_pct"] for w in sites] == sorted((w["share_pct"] for w in sites), reverse=True)
        for w in f["where"]:
            assert {"op", "module", "frame", "share_pct", "ms"} <= set(w)
    _plain(d)
