"""Real exports from public projects (nsys 2022.4 to 2026.2) in ../shared/traces.

Every file must give a report or a clear one-line "cannot diagnose"; the numbers must agree
with what the rows say, recomputed here independently with plain SQL and Python.
"""
from __future__ import annotations

import sqlite3

import pytest

from nsysdoc.errors import EmptyCaptureError
from nsysdoc.trace import load_trace
from nsysdoc.trace.open import readonly_uri

from .conftest import SHARED_SKIP, SHARED_TRACES, analyze_path, needs_shared, real_traces

pytestmark = needs_shared().marks  # issue 49: the real marker and the one skip message
TRACES = real_traces() or [None]


def q(path, sql):
    con = sqlite3.connect(readonly_uri(path), uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def tables(path):
    return {r[0] for r in q(path, "SELECT name FROM sqlite_master WHERE type='table'")}


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name if p else "none")
def test_every_real_trace_reports_or_says_why(path):
    try:
        d = analyze_path(path)
    except EmptyCaptureError as exc:
        assert "capture is empty" in exc.message
        assert "\n" not in exc.message
        return
    t = tables(path)
    meta = "META_DATA_EXPORT" if "META_DATA_EXPORT" in t else "EXPORT_META_DATA"
    version = q(path, f"SELECT value FROM {meta} WHERE name = 'EXPORT_PRODUCT_VERSION'")[0][0]
    assert d["source"]["nsys_version"] == version
    n_kernels = q(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE start > 0")[0][0] \
        if "CUPTI_ACTIVITY_KIND_KERNEL" in t else 0
    # without step markers the window spans all GPU work, so every kernel is counted
    if not d["capture"]["has_step_markers"]:
        assert d["summary"]["kernel_count"] == n_kernels
    assert d["capture"]["gpu_activity"] == bool(
        n_kernels or any(x in t for x in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")))


def _merged_busy(rows, lo, hi):
    """Independent union length: sort and sweep in plain Python."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in rows if min(e, hi) > max(s, lo)):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


@pytest.mark.parametrize("path", [p for p in TRACES if p and p.stat().st_size > 500_000] or [None],
                         ids=lambda p: p.name if p else "none")
def test_busy_matches_independent_union(path):
    t = tables(path)
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in t:
        pytest.skip("no kernels")
    d = analyze_path(path)
    w = d["capture"]["window"]
    parts = [f'SELECT deviceId, start, "end" FROM {x} WHERE start > 0' for x in
             ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET") if x in t]
    rows = q(path, " UNION ALL ".join(parts))
    for dev in d["devices"]:
        mine = [(s, e) for dv, s, e in rows if str(dv) == dev["label"]]
        busy = _merged_busy(mine, w["start_ns"], w["end_ns"])
        assert dev["busy_pct"] == pytest.approx(busy / (w["end_ns"] - w["start_ns"]) * 100, abs=1e-3)


def test_failed_capture_explains_injection_error():
    path = SHARED_TRACES / "failed_capture_injection_error.sqlite"
    if not path.exists():
        pytest.skip(SHARED_SKIP)
    with pytest.raises(EmptyCaptureError) as err:
        load_trace(path, cache=False)
    assert "libToolsInjection" in (err.value.hint or "")


def test_nvtx_only_capture_reports_no_gpu_activity():
    path = SHARED_TRACES / "tensorrt_nvtx_only_titanrtx.sqlite"
    if not path.exists():
        pytest.skip(SHARED_SKIP)
    d = analyze_path(path)
    assert d["capture"]["gpu_activity"] is False
    assert d["capture"]["traced"]["nvtx"] and not d["capture"]["traced"]["cuda_kernels"]
    assert any("no GPU activity" in w for w in d["capture"]["warnings"])


def test_multi_gpu_capture_has_two_devices_and_nccl():
    path = SHARED_TRACES / "fastvideo_torchrun_h100x2_before.sqlite"
    if not path.exists():
        pytest.skip(SHARED_SKIP)
    d = analyze_path(path)
    assert [x["label"] for x in d["devices"]] == ["0", "1"]
    nccl = q(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
                   "WHERE s.value LIKE 'nccl%'")[0][0]
    assert d["metrics"]["kernels"]["nccl_count"] == nccl
    assert d["metrics"]["communication"]["comm_ms"] > 0


def test_correlation_join_matches_sql():
    """Launch API time from the join equals the SQL join on (process, correlationId)."""
    path = SHARED_TRACES / "mmagic_vsr_a100_forward.sqlite"
    if not path.exists():
        pytest.skip(SHARED_SKIP)
    rows = q(path, 'SELECT r."end" - r.start, k.start - r."end" FROM CUPTI_ACTIVITY_KIND_KERNEL k '
                   'JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId '
                   'AND (r.globalTid & ~16777215) = k.globalPid WHERE r.eventClass != 67')
    api = sorted(a for a, _ in rows)
    d = analyze_path(path)
    assert d["metrics"]["launch"]["launch_count"] == len(rows)
    import numpy as np

    assert d["metrics"]["launch"]["launch_api_us_median"] == pytest.approx(float(np.median(api)) / 1e3, abs=1e-3)


def test_fp32_ffma_gemms_on_h100_are_found():
    """The FastVideo slice runs cuBLAS FP32 GEMMs (sm80_xmma_gemm_f32f32_..._ffma): the fp32-gemm
    rule must fire, with the share of kernel time the rows say."""
    path = SHARED_TRACES / "fastvideo_h100x2_sp2_slice.sqlite"
    if not path.exists():
        pytest.skip(SHARED_SKIP)
    from nsysdoc.rules import apply_rules, load_rules

    (fp32, total), = q(path, 'SELECT sum(CASE WHEN s.value LIKE \'%gemm%ffma%\' THEN k."end" - k.start ELSE 0 END), '
                             'sum(k."end" - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k '
                             'JOIN StringIds s ON s.id = k.demangledName WHERE k.start > 0')
    d = apply_rules(analyze_path(path), load_rules())
    assert d["metrics"]["values"]["fp32_gemm_share_pct"] == pytest.approx(fp32 / total * 100, abs=0.01)
    assert "fp32-gemm" in [f["rule"] for f in d["findings"]]
