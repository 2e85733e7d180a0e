"""Issue 49: the per-event tables of the API, ``Report.gpu_ops`` / ``iter_gpu_ops`` (one row per
kernel, copy and memset of the analysis window) and ``Report.all_gaps()`` / ``iter_gaps`` (every
idle gap), streamed from the slices (docs/api.md, "Per-event tables").

Expected values are computed by hand from the builder's timing model (header of
tests/test_judgement_scenarios.py): ``launch(us)`` at host time ``a``: API ``[a, a+5000)``, the
kernel at ``max(a + 5000, stream free)``; T0 = 1e9 ns.
"""
from __future__ import annotations

import pytest

import nsysdoc
from nsysdoc import api
from nsysdoc.testing import Capture
from nsysdoc.testing.scenarios import SCENARIOS, operators_forward_backward

T0 = 1_000_000_000


def _two_steps_with_copy() -> Capture:
    """Two marked steps: gemm 100 µs, relu 20 µs, a 1 MiB pinned HtoD copy, 200 µs of CPU."""
    cap = Capture()
    t = cap.process(pid=100).thread()
    for i in range(2):
        with t.range(f"ProfilerStep#{i}"):
            t.launch("gemm_kernel", us=100)
            t.launch("relu_kernel", us=20)
            t.memcpy("HtoD", nbytes=1 << 20)
            t.cpu(us=200)
    return cap


@pytest.fixture(scope="module", params=["nsys", "kineto"])
def two_steps(request, tmp_path_factory):
    d = tmp_path_factory.mktemp("events")
    cap = _two_steps_with_copy()
    path = cap.write(d / "two.sqlite") if request.param == "nsys" else cap.write_kineto(d / "two.pt.trace.json")
    return request.param, nsysdoc.report(str(path), no_config=True, cache=False)


def test_gpu_ops_rows_are_the_window_s_operations_by_hand(two_steps):
    # Step 0 (push at 0): gemm API [0,5000) -> GPU [5000,105000); relu API [5000,10000) -> GPU
    # [105000,125000); memcpy at 10000: API [10000,16000) (async pinned), GPU at max(10000+5600,
    # 125000) = 125000, lasting 1 MiB / 12 GB/s = 1048576 / 12 = 87381 ns -> [125000,212381);
    # cpu 200 µs: pop at 16000 + 200000 = 216000. Step 1 starts at 216000: gemm API [216000,
    # 221000) -> GPU [221000,321000); relu -> [321000,341000); copy API at 226000 -> GPU
    # [341000,428381); pop at 432000.
    fmt, r = two_steps
    g = r.gpu_ops
    assert [(c, d) for c, d in g.dtypes.items()] == [(c, d) for c, d in api.GPU_OP_COLUMNS]
    rel = [(s - T0, e - T0) for s, e in zip(g["start_ns"], g["end_ns"])]
    assert rel == [(5000, 105000), (105000, 125000), (125000, 212381),
                   (221000, 321000), (321000, 341000), (341000, 428381)]
    assert g["kind"].tolist() == ["kernel", "kernel", "memcpy"] * 2
    assert g["name"].tolist() == ["gemm_kernel", "relu_kernel", "Memcpy HtoD"] * 2
    assert g["step"].tolist() == [0, 0, 0, 1, 1, 1]
    # one correlation id per launch, none shared
    assert g["correlation"].notna().all() and g["correlation"].nunique() == 6
    if fmt == "nsys":  # no operator ranges in this capture
        assert g["operator"].isna().all() and g["module"].isna().all()
    else:  # the Kineto writer wraps each call in a cpu_op (nsysdoc/testing/kineto.py, ATEN_OP)
        assert g["operator"].tolist() == ["aten::mm", "aten::mm", "aten::copy_"] * 2
    assert g["pid"].tolist() == [100] * 6 and g["stream"].tolist() == [7] * 6
    # the rows are the report's: its kernel and copy counts
    (dev,) = r.devices.to_dict("records")
    assert (g["kind"] == "kernel").sum() == dev["kernel_count"] == 4 and (g["kind"] == "memcpy").sum() == 2


def test_every_gap_by_hand_and_the_longest_are_report_gaps(two_steps):
    # Busy: [5000,212381) and [221000,428381); window = the steps [0,432000). Gaps, by end:
    # [0,5000) before the first launch's kernel (5 µs, launch), [212381,221000) (8.619 µs), and
    # [428381,432000) after the last operation (3.619 µs, tail).
    fmt, r = two_steps
    a = r.all_gaps()
    assert [(c, d) for c, d in a.dtypes.items()] == [(c, d) for c, d in api.GAP_COLUMNS]
    assert [(s - T0, e - T0) for s, e in zip(a["start_ns"], a["end_ns"])] == [
        (0, 5000), (212381, 221000), (428381, 432000)]
    assert a["duration_ms"].tolist() == pytest.approx([0.005, 0.008619, 0.003619], abs=1e-12)
    assert a["cause"].iloc[-1] == "tail" and a["tail_ms"].iloc[-1] == pytest.approx(0.003619, abs=1e-12)
    assert len(a) == r.to_dict()["metrics"]["idle_gaps"]["count"] == 3
    # each gap's split sums to its length
    parts = a[[f"{c}_ms" for c in api.IDLE_CAUSES]].sum(axis=1)
    assert parts.tolist() == pytest.approx(a["duration_ms"].tolist(), abs=1e-12)
    top = a.sort_values(["duration_ms", "start_ns"], ascending=[False, True])
    assert top[["start_ns", "end_ns", "cause"]].values.tolist() == r.gaps[["start_ns", "end_ns", "cause"]].values.tolist()


def test_chunks_hold_at_most_chunk_rows_and_add_up_to_the_whole(two_steps):
    fmt, r = two_steps
    chunks = list(r.iter_gpu_ops(chunk_rows=4))
    assert [len(c) for c in chunks] == [4, 2]
    import pandas as pd

    assert pd.concat(chunks, ignore_index=True).equals(r.gpu_ops)
    assert [len(c) for c in r.iter_gaps(chunk_rows=2)] == [2, 1]


def test_chunks_of_several_slices_parts_are_cut_at_chunk_rows():
    from nsysdoc.engine.events import _rechunk
    import numpy as np

    parts = [{"x": np.arange(a, b)} for a, b in ((0, 3), (3, 4), (4, 9))]  # 3 + 1 + 5 rows
    got = list(_rechunk(iter(parts), 4))
    assert [c["x"].tolist() for c in got] == [[0, 1, 2, 3], [4, 5, 6, 7], [8]]
    assert list(_rechunk(iter([]), 4)) == []


@pytest.mark.parametrize("bad", [0, -1, 2.5, "10", True, None])
def test_a_bad_chunk_rows_is_an_error_naming_the_parameter(two_steps, bad):
    fmt, r = two_steps
    for call in (r.iter_gpu_ops, r.iter_gaps):
        with pytest.raises(nsysdoc.NsysdocError, match="chunk_rows"):
            next(iter(call(chunk_rows=bad)))


@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
def test_operator_module_and_frame_are_the_where_attribution(fmt, tmp_path):
    # operators_forward_backward: per step, gemm (300 µs) launched in aten::addmm under
    # Linear_0 / model.py:12, relu (20 µs) in aten::relu, orphan (50 µs) outside every operator,
    # gemm_bwd (400 µs) in aten::mm on the autograd thread (AddmmBackward0, seq 7).
    cap = operators_forward_backward()
    path = cap.write(tmp_path / "ofb.sqlite") if fmt == "nsys" else cap.write_kineto(tmp_path / "ofb.pt.trace.json")
    r = nsysdoc.report(str(path), no_config=True, cache=False)
    g = r.gpu_ops
    assert g["name"].tolist() == ["gemm_kernel", "relu_kernel", "orphan_kernel", "gemm_bwd_kernel"] * 2
    assert g["operator"].tolist() == ["aten::addmm", "aten::relu", None, "aten::mm"] * 2
    assert g["step"].tolist() == [0] * 4 + [1] * 4
    # the module and frame are the operator view's (Where's) for the same operator
    ops = r.operators.set_index("name")
    for _, row in g[g["operator"].notna()].iterrows():
        assert row["module"] == ops.loc[row["operator"], "module"]
    if fmt == "kineto":  # the profiler records nn.Module and Python frames (with_stack, with_modules)
        assert set(g["module"].dropna()) == {"nn.Module: Linear_0"}
        assert set(g["frame"].dropna()) == {"model.py:12 in forward"}
    assert g.loc[g["name"] == "orphan_kernel", ["module", "frame"]].isna().all().all()


def test_operations_outside_the_analysis_window_are_left_out(tmp_path):
    # jit_warmup_then_steady: the warm-up (module load, first launches) is excluded from the
    # window; the table holds exactly the window's operations, as the report counts them.
    path = SCENARIOS["jit_warmup_then_steady"]().write(tmp_path / "jit.sqlite")
    r = nsysdoc.report(str(path), no_config=True, cache=False)
    d = r.to_dict()
    assert d["capture"]["excluded"][0]["kind"] == "warm-up"
    w0, w1 = d["capture"]["window"]["start_ns"], d["capture"]["window"]["end_ns"]
    g = r.gpu_ops
    assert len(g) == sum(x["kernel_count"] + x["copy_count"] for x in d["devices"])
    assert (g["start_ns"] >= w0).all() and (g["start_ns"] < w1).all()
    assert len(g) < r._rows().trace.count("kernels")  # the warm-up's kernels are in the capture
    a = r.all_gaps()
    assert (a["start_ns"] >= w0).all() and (a["end_ns"] <= w1).all()


def test_a_gap_the_window_cuts_keeps_its_part_inside_and_that_part_s_cause(tmp_path):
    # A 100 µs kernel launched before the first step marker: API [0,5000) -> GPU [5000,105000);
    # 3 ms of CPU work (no CUDA call) -> push ProfilerStep#0 at 3005000, launch: API
    # [3005000,3010000) -> GPU [3010000,3110000); cpu 150 µs -> pop at 3160000. The window is the
    # steps, from 3005000. The gap [105000,3010000) is mostly host time (a pause over 1 ms: its
    # cause is host, 2.9 ms), but only [3005000,3010000) lies inside: 5 µs of launch, so its
    # cause there is launch.
    cap = Capture()
    t = cap.process(pid=7).thread()
    t.launch("before_kernel", us=100)
    t.cpu(us=3000)
    for i in range(2):
        with t.range(f"ProfilerStep#{i}"):
            t.launch("step_kernel", us=100)
            t.cpu(us=150)
    r = nsysdoc.report(str(cap.write(tmp_path / "cut.sqlite")), no_config=True, cache=False)
    assert r.steps["start_ns"].iloc[0] == T0 + 3_005_000
    a = r.all_gaps()
    first = a.iloc[0]
    assert (first["start_ns"] - T0, first["end_ns"] - T0) == (3_005_000, 3_010_000)
    assert first["cause"] == "launch" and first["launch_ms"] == pytest.approx(0.005, abs=1e-12)
    assert first["host_ms"] == 0
    assert r.gpu_ops["name"].tolist() == ["step_kernel", "step_kernel"]  # before_kernel is outside
    top = a.sort_values(["duration_ms", "device", "start_ns"], ascending=[False, True, True], kind="stable").head(20)
    assert top[["start_ns", "end_ns", "cause"]].values.tolist() == r.gaps[["start_ns", "end_ns", "cause"]].values.tolist()


@pytest.mark.parametrize("name", ["launch_bound_small_kernels", "ddp_nccl", "dataloader_starvation",
                                  "no_step_markers", "weight_streaming"])
def test_many_slices_give_the_one_slice_rows(name, tmp_path, monkeypatch):
    """Slices of 50 rows (many slices: gaps spanning slices, operations still running) give the
    rows of one slice, in time order; every gap counted once (``idle_gaps.count``) and the 20
    longest are ``Report.gaps``."""
    path = SCENARIOS[name]().write(tmp_path / f"{name}.sqlite")
    one = nsysdoc.report(str(path), no_config=True, cache=False)
    monkeypatch.setenv("NSYSDOC_SLICE_ROWS", "50")
    many = nsysdoc.report(str(path), no_config=True, cache=False)
    assert many._rows().engine.slices > 3  # the analysis the rows are read from (issue 51: read again)
    page, text = many.to_html(), many.to_json()
    g1, gm = one.gpu_ops, many.gpu_ops
    assert gm.equals(g1)
    assert gm["start_ns"].is_monotonic_increasing
    a1, am = one.all_gaps(), many.all_gaps()
    assert am.equals(a1)
    assert len(am) == many.to_dict()["metrics"]["idle_gaps"]["count"]
    assert am["end_ns"].is_monotonic_increasing
    top = am.sort_values(["duration_ms", "device", "start_ns"], ascending=[False, True, True], kind="stable").head(20)
    assert top[["start_ns", "end_ns", "cause"]].values.tolist() == \
        many.gaps[["start_ns", "end_ns", "cause"]].values.tolist()
    # running the slices again changes nothing the report shows
    assert many.to_json() == text and many.to_html() == page


def test_a_capture_with_no_gpu_work_gives_empty_tables_with_the_columns(tmp_path):
    cap = Capture()
    t = cap.process(pid=1).thread()
    with t.range("only_cpu"):
        t.cpu(us=500)
    t.os_call("poll", us=100)
    r = nsysdoc.report(str(cap.write(tmp_path / "cpu.sqlite")), no_config=True, cache=False)
    assert list(r.gpu_ops.columns) == [c for c, _ in api.GPU_OP_COLUMNS] and len(r.gpu_ops) == 0
    assert list(r.all_gaps().columns) == [c for c, _ in api.GAP_COLUMNS] and len(r.all_gaps()) == 0
