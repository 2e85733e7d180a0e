"""Issue 47, items 3 and 5: the CPU-side operator view (rows kept by CPU time, per-call times),
launch-bound's Where naming "CPU dispatch slower than the GPU", and gradient zeroing repeated
within one optimizer step (zero-grad-repeated).

Expected numbers are computed by hand from the scenarios (``nsysdoc/testing/scenarios.py``), the
builder's timing model and docs/glossary.md, never from the tool:

* ``op(name)`` takes 1 µs on entry and 1 µs on exit (``ENTER_NS``); ``range(text)`` takes none.
* ``launch(us, api_us=5)`` at host time ``a``: API ``[a, a+5000)``; kernel at ``max(a+5000, free)``.
* ``cpu(us)`` advances the host clock.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from nsysdoc.testing import Capture  # noqa: E402
from nsysdoc.testing.scenarios import launch_bound_dispatch_heavy_ops, zero_grad_every_micro_batch  # noqa: E402
from tests.conftest import diagnose_path  # noqa: E402

FORMS = ("nsys", "new", "old")


def _write(cap, form, tmp_path, name):
    if form == "nsys":
        return cap.write(tmp_path / f"{name}.sqlite")
    return cap.write_kineto(tmp_path / f"{name}_{form}.json", form=form)


def _finding(r: dict, rule: str) -> dict | None:
    found = [f for f in r["findings"] if f["rule"] == rule]
    assert len(found) <= 1
    return found[0] if found else None


# ---------------------------------------------------------------------------------------------
# launch-bound's Where: CPU dispatch slower than the GPU
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=FORMS)
def dispatch(request, tmp_path_factory):
    path = _write(launch_bound_dispatch_heavy_ops(), request.param, tmp_path_factory.mktemp("dh"), "dispatch")
    return request.param, diagnose_path(path)


def test_operator_rows_carry_per_call_cpu_and_gpu_times(dispatch):
    _form, r = dispatch
    rows = {x["name"]: x for x in r["metrics"]["operators"]["rows"]}
    # aten::add_: 3 steps x 200 calls; per call 1 (enter) + 40 (Python) + 5 (launch) + 1 (exit)
    # = 47 us of CPU, and one 4 us kernel
    add = rows["aten::add_"]
    assert add["calls"] == 600
    assert add["cpu_us_per_call"] == pytest.approx(47.0)
    assert add["gpu_us_per_call"] == pytest.approx(4.0)
    assert add["cpu_exceeds_gpu"] is True
    # aten::mm: 1 + 5 + 1 = 7 us of CPU per call, a 3000 us GEMM: the GPU is the slower side
    mm = rows["aten::mm"]
    assert mm["cpu_us_per_call"] == pytest.approx(7.0) and mm["gpu_us_per_call"] == pytest.approx(3000.0)
    assert mm["cpu_exceeds_gpu"] is False
    # work with no operator has no calls: no per-call times, never flagged
    none = rows["(no operator)"]
    assert none["cpu_us_per_call"] is None and none["cpu_exceeds_gpu"] is False


def test_launch_bound_where_names_the_operator_whose_dispatch_is_slower_than_its_kernel(dispatch):
    _form, r = dispatch
    f = _finding(r, "launch-bound")
    assert f is not None
    named = [w for w in f["where"] if w["via"] == "CPU dispatch slower than the GPU"]
    # only aten::add_ (47 us of CPU per call vs 4 us of GPU); aten::mm (7 us vs 3000 us) is not named
    assert [w["op"] for w in named] == ["aten::add_"]
    (w,) = named
    assert w["cpu_us_per_call"] == pytest.approx(47.0) and w["gpu_us_per_call"] == pytest.approx(4.0)
    assert w["count"] == 600
    # ranked by the CPU time in excess of the GPU work: (47 - 4) us x 600 calls = 25.8 ms
    assert w["excess_ms"] == pytest.approx(25.8)
    # host time, not a share of the launch gaps: no share, no time per GPU
    assert w["share_pct"] is None and w["ms"] is None
    # the gap rows still add up to 100% of the selection
    assert sum(x["share_pct"] for x in f["where"] if x["via"] != "CPU dispatch slower than the GPU") == \
        pytest.approx(100.0, abs=0.01)


def test_dispatch_rows_rank_by_excess_time_and_skip_operators_without_gpu_work():
    from nsysdoc.rules.evaluate import DISPATCH_MAX, dispatch_rows

    rows = [
        # (cpu - gpu) totals: 5 - 1 = 4 ms, 10 - 2 = 8 ms, 3 - 0.5 = 2.5 ms, 9 - 1 = 8 ms (name breaks the tie)
        {"name": "a", "calls": 10, "cpu_ms": 5.0, "gpu_ms": 1.0, "cpu_exceeds_gpu": True},
        {"name": "c", "calls": 10, "cpu_ms": 10.0, "gpu_ms": 2.0, "cpu_exceeds_gpu": True},
        {"name": "d", "calls": 10, "cpu_ms": 3.0, "gpu_ms": 0.5, "cpu_exceeds_gpu": True},
        {"name": "b", "calls": 10, "cpu_ms": 9.0, "gpu_ms": 1.0, "cpu_exceeds_gpu": True},
        # launched nothing / GPU slower: never named
        {"name": "aten::view", "calls": 10, "cpu_ms": 50.0, "gpu_ms": 0.0, "cpu_exceeds_gpu": False},
        {"name": "aten::mm", "calls": 10, "cpu_ms": 1.0, "gpu_ms": 30.0, "cpu_exceeds_gpu": False},
    ]
    got = dispatch_rows(rows)
    assert DISPATCH_MAX == 3
    assert [g["op"] for g in got] == ["b", "c", "a"]
    assert [g["excess_ms"] for g in got] == [8.0, 8.0, 4.0]


def test_launch_bound_where_and_markdown_show_the_dispatch_row(tmp_path):
    from nsysdoc.analysis import analyze
    from nsysdoc.rules import apply_rules, load_rules
    from nsysdoc.trace import load_trace
    from nsysdoc.views.render import render_html, render_markdown

    path = launch_bound_dispatch_heavy_ops(steps=2, calls=100).write(tmp_path / "d.sqlite")
    a = analyze(load_trace(path, cache=False))
    apply_rules(a.result, load_rules())
    html = render_html(a)
    # 47 us of CPU per call vs 4 us of GPU work; (47 - 4) x 200 calls = 8.6 ms in excess
    assert "CPU dispatch slower than the GPU: 47.0 µs of CPU per call vs 4.0 µs of GPU work" in html
    assert "CPU / call (µs)" in html and "GPU / call (µs)" in html
    md = render_markdown(a.result)
    assert "- *CPU dispatch slower than the GPU:* `aten::add_` (47.0 µs of CPU vs 4.0 µs of GPU per call)" in md


# ---------------------------------------------------------------------------------------------
# rows kept by CPU time as well as by self GPU time
# ---------------------------------------------------------------------------------------------
def _gpu_heavy_and_one_cpu_heavy() -> Capture:
    """Operators g1..g5: ``cpu(k us)`` then a 100·k µs kernel (CPU 1 + k + 5 + 1 = 7 + k µs); then
    ``cpu_heavy``: 500 µs of CPU, no GPU work (CPU 1 + 500 + 1 = 502 µs)."""
    cap = Capture()
    t = cap.process(pid=4730).thread()
    with t.range("ProfilerStep#0"):
        for k in range(1, 6):
            with t.op(f"aten::g{k}"):
                t.cpu(us=k)
                t.launch("gemm_kernel", 100 * k)
        with t.op("aten::cpu_heavy"):
            t.cpu(us=500)
        t.sync_stream()
    return cap


@pytest.mark.parametrize("form", ("nsys", "new"))
def test_cpu_heavy_operator_without_gpu_work_is_kept_when_rows_are_capped(form, tmp_path, monkeypatch):
    from nsysdoc.engine import attribute_operators as att  # where ROWS_MAX is read (issue 51 split)

    monkeypatch.setattr(att, "ROWS_MAX", 3)
    r = diagnose_path(_write(_gpu_heavy_and_one_cpu_heavy(), form, tmp_path, "cpuheavy"))
    ops = r["metrics"]["operators"]
    # by self GPU time the first 3 are g5, g4, g3 (500, 400, 300 us); by CPU time cpu_heavy
    # (502 us), g5 (12 us), g4 (11 us): the union adds cpu_heavy after the GPU rows
    assert [x["name"] for x in ops["rows"]] == ["aten::g5", "aten::g4", "aten::g3", "aten::cpu_heavy"]
    assert ops["row_count"] == 6
    heavy = ops["rows"][-1]
    assert heavy["cpu_ms"] == pytest.approx(0.502) and heavy["gpu_ms"] == 0
    assert heavy["cpu_us_per_call"] == pytest.approx(502.0) and heavy["gpu_us_per_call"] == 0
    # no GPU work: its CPU time is no "dispatch slower than the GPU"
    assert heavy["cpu_exceeds_gpu"] is False


def test_page_shows_the_top_rows_by_either_time(monkeypatch):
    from nsysdoc.views import tables  # issue 51: the page's tables left views/build.py

    monkeypatch.setattr(tables, "OPERATORS_SHOWN", 2)
    rows = [{"name": "g5", "self_gpu_ms": 5.0, "cpu_ms": 0.012}, {"name": "g4", "self_gpu_ms": 4.0, "cpu_ms": 0.011},
            {"name": "g3", "self_gpu_ms": 3.0, "cpu_ms": 0.010}, {"name": "(no operator)", "self_gpu_ms": 1.0,
                                                                   "cpu_ms": None},
            {"name": "cpu_heavy", "self_gpu_ms": 0.0, "cpu_ms": 0.502}]
    # top 2 by self GPU time: g5, g4; top 2 by CPU: cpu_heavy, g5 -> g5, g4, cpu_heavy in JSON order
    assert [x["name"] for x in tables.operator_rows_shown(rows)] == ["g5", "g4", "cpu_heavy"]
    shown = tables.operator_tables({"metrics": {"operators": {"source": "kineto", "rows": rows, "row_count": 5}}})
    main = shown[0]
    assert [row[0].sort for row in main.rows] == ["g5", "g4", "cpu_heavy"]
    assert main.columns[-2].label == "CPU / call (µs)"


# ---------------------------------------------------------------------------------------------
# zero-grad-repeated
# ---------------------------------------------------------------------------------------------
# zero_grad_every_micro_batch(steps=3, micro=4): per step s (ranges have no enter cost):
#   micro m: zero_grad range [a, a+15000): 10 us of Python, then a fill kernel launch (5 us API)
#            whose 20 us kernel runs inside the GPU queue; then a 1000 us GEMM launch (5 us API)
#   host after 4 micro-batches: s + 80,000; GPU: 4 x (20 + 1000) = 4080 us from s + 15,000
#   step range: 100 us kernel -> GPU ends at s + 4,195,000; item(): DtoH 1 us to s + 4,196,000,
#   cudaStreamSynchronize until s + 4,198,000 = the range's end. 3 steps: window 12.594 ms.
# Per step 4 zero_grad calls before one step: 3 extra, each one 20 us fill kernel:
#   9 extra calls, 9 GPU operations, 9 x 20 us = 0.18 ms (one GPU), 0.06 ms per step,
#   0.18 / 12.594 x 100 = 1.4293% of the window (below the warning band: info).
ZG_WINDOW_MS = 3 * 4.198
ZG_EXTRA_MS = 9 * 0.020


@pytest.mark.parametrize("form", FORMS)
def test_zero_grad_on_every_micro_batch_of_4_fires_with_the_extra_calls_gpu_time(form, tmp_path):
    r = diagnose_path(_write(zero_grad_every_micro_batch(), form, tmp_path, "zg"))
    assert r["capture"]["window"]["duration_ms"] == pytest.approx(ZG_WINDOW_MS)
    v = r["metrics"]["values"]
    assert (v["zero_grad_calls"], v["optimizer_step_calls"], v["zero_grad_per_step_max"]) == (12, 3, 4)
    assert (v["zero_grad_extra_calls"], v["zero_grad_extra_gpu_ops"]) == (9, 9)
    assert v["zero_grad_extra_gpu_ms"] == pytest.approx(ZG_EXTRA_MS)
    assert v["zero_grad_extra_gpu_ms_per_step"] == pytest.approx(ZG_EXTRA_MS / 3)
    assert v["zero_grad_extra_gpu_pct"] == pytest.approx(ZG_EXTRA_MS / ZG_WINDOW_MS * 100, abs=1e-4)
    assert v["zero_grad_optimizer"] == "SGD"
    f = _finding(r, "zero-grad-repeated")
    assert f is not None and f["severity"] == "info"
    assert f["impact_ms"] == pytest.approx(ZG_EXTRA_MS)
    assert "ran up to 4 times" in f["message"] and "12 calls for 3 SGD steps" in f["message"]


@pytest.mark.parametrize("form", FORMS)
def test_zero_grad_once_per_step_is_quiet(form, tmp_path):
    r = diagnose_path(_write(zero_grad_every_micro_batch(every=False), form, tmp_path, "zg1"))
    v = r["metrics"]["values"]
    # one call before each of the 3 steps: nothing extra
    assert (v["zero_grad_calls"], v["zero_grad_per_step_max"], v["zero_grad_extra_calls"]) == (3, 1, 0)
    assert _finding(r, "zero-grad-repeated") is None


def test_zero_grad_with_set_to_none_launches_nothing_and_is_quiet(tmp_path):
    r = diagnose_path(zero_grad_every_micro_batch(set_to_none=True).write(tmp_path / "zgn.sqlite"))
    v = r["metrics"]["values"]
    assert (v["zero_grad_extra_calls"], v["zero_grad_extra_gpu_ops"], v["zero_grad_extra_gpu_ms"]) == (9, 0, 0)
    assert _finding(r, "zero-grad-repeated") is None


def test_zero_grad_intervals_by_hand():
    from nsysdoc.metrics.optimizer import clipped_ns, launched_inside, zero_grad_repeats

    # thread 1: steps start at 100 and 200; zero_grads at 10, 20 (before the first step: 2),
    # 150 (1), 210, 220, 230 (after the last: 3). Thread 2: zero_grads, no step: not counted.
    zt = [1, 1, 1, 1, 1, 1, 2, 2]
    zs = [20, 10, 150, 230, 210, 220, 5, 6]
    got = zero_grad_repeats(zt, zs, [1, 1], [200, 100])
    assert got.zero_grad_calls == 6 and got.step_calls == 2 and got.per_step_max == 3
    # extra: all but the last of each interval -> 10 (not 20), 210 and 220 (not 230)
    assert got.extra.tolist() == [False, True, False, False, True, True, False, False]
    # no step anywhere: nothing measured
    none = zero_grad_repeats([1], [5], [], [])
    assert none.per_step_max is None and not none.extra.any()
    # launches inside [10, 15) and [210, 215) on thread 1: at 10 (in), 15 (end: out), 212 (in);
    # on thread 2 at 12: another thread, out
    inside = launched_inside([1, 1], [10, 210], [15, 215], [1, 1, 1, 2], [10, 15, 212, 12])
    assert inside.tolist() == [True, False, True, False]
    # [0, 10) and [95, 120) clipped to [5, 100): 5 + 5 = 10
    assert clipped_ns(np.array([0, 95]), np.array([10, 120]), 5, 100) == 10


@pytest.mark.parametrize("sliced", (False, True))
def test_per_call_times_divide_by_calls_not_inside_a_call_of_the_same_name(sliced, tmp_path, monkeypatch):
    """``aten::to`` inside ``aten::to`` (as ``.to()`` re-enters itself): 4 steps, each an outer call of
    1 (enter) + 2 (Python) + [1 + 5 (launch of a 10 us kernel) + 1] (inner call) + 1 (exit) = 11 us.
    calls = 8 (both levels, as key_averages counts them); CPU and GPU totals leave out the inner
    calls (4 x 11 us, 4 x 10 us), so per call: 11 us of CPU vs 10 us of GPU - not 5.5 vs 5."""
    monkeypatch.setenv("NSYSDOC_ATTR_SLICED_ROWS", "1" if sliced else str(1 << 60))
    if sliced:
        monkeypatch.setenv("NSYSDOC_SLICE_ROWS", "5")
    cap = Capture()
    t = cap.process(pid=4740).thread()
    for i in range(4):
        with t.range(f"ProfilerStep#{i}"):
            with t.op("aten::to"):
                t.cpu(us=2)
                with t.op("aten::to"):
                    t.launch("copy_kernel", 10)
            t.sync_stream()
    r = diagnose_path(cap.write(tmp_path / "to.sqlite"))
    (row,) = [x for x in r["metrics"]["operators"]["rows"] if x["name"] == "aten::to"]
    assert row["calls"] == 8 and row["cpu_ms"] == pytest.approx(0.044) and row["gpu_ms"] == pytest.approx(0.040)
    assert row["cpu_us_per_call"] == pytest.approx(11.0) and row["gpu_us_per_call"] == pytest.approx(10.0)
    assert row["cpu_exceeds_gpu"] is True
    # the 4 outer calls are what the per-call times divide by: 0.044 ms / 4 = 11 us
    assert row["outer_calls"] == 4


def test_dispatch_where_counts_the_outer_calls_of_an_operator_nested_in_itself():
    """``aten::to`` inside ``aten::to``: 8 calls, 4 outer ones; per outer call 11 us of CPU (2 of them
    waiting) and 4 us of GPU. excess_ms = (11 - 2 - 4) us x 4 outer calls = 20 us = 0.02 ms, which is
    cpu_ms - cpu_wait_ms - gpu_ms = 0.044 - 0.008 - 0.016; the Where row's count is 4 (the calls the
    per-call values are per), not 8 - with 8, count x (CPU - wait - GPU per call) would be 0.04."""
    from nsysdoc.rules.evaluate import dispatch_rows

    row = {"name": "aten::to", "calls": 8, "outer_calls": 4, "cpu_ms": 0.044, "cpu_wait_ms": 0.008,
           "gpu_ms": 0.016, "cpu_us_per_call": 11.0, "gpu_us_per_call": 4.0, "cpu_exceeds_gpu": True}
    (got,) = dispatch_rows([row])
    assert got["count"] == 4 and got["excess_ms"] == pytest.approx(0.02)
    assert got["cpu_wait_us_per_call"] == pytest.approx(2.0)
    per_call = got["cpu_us_per_call"] - got["cpu_wait_us_per_call"] - got["gpu_us_per_call"]
    assert per_call * got["count"] / 1000 == pytest.approx(got["excess_ms"])


def test_two_optimizers_each_zeroing_once_per_step_are_not_repeats():
    from nsysdoc.metrics.optimizer import zero_grad_repeats

    # per iteration: Adagrad.zero_grad (name 0) and FusedAdam.zero_grad (name 1), then both steps
    # (starts 100, 110 and 300, 310); zero_grads at 10, 20 and 210, 220: one per optimizer per step
    got = zero_grad_repeats([1, 1, 1, 1], [10, 20, 210, 220], [1, 1, 1, 1], [100, 110, 300, 310], zg_name=[0, 1, 0, 1])
    assert got.per_step_max == 1 and not got.extra.any()
    # the same calls as one optimizer: 2 per step, the first of each pair extra
    same = zero_grad_repeats([1, 1, 1, 1], [10, 20, 210, 220], [1, 1, 1, 1], [100, 110, 300, 310])
    assert same.per_step_max == 2 and same.extra.tolist() == [True, False, True, False]


# launch_bound_dispatch_heavy_ops(steps=3, calls=20, item_op=True), per step s:
#   aten::mm: enter s+1000, GEMM launch [s+1000, s+6000), kernel [s+6000, s+3,006,000), exit s+7000
#   aten::item: enter to s+8000; DtoH copy call [s+8000, s+14,000), its 1 us copy queued after the
#     GEMM [s+3,006,000, s+3,007,000); cudaStreamSynchronize [s+14,000, s+3,009,000): 2995 us of
#     waiting; exit to s+3,010,000. CPU per call 1 + 6 + 2995 + 1 = 3003 us; GPU 1 us.
#   Inclusive CPU less the wait: 8 us > 1 us: still slower than its GPU work, but by
#   (3003 - 2995 - 1) x 3 = 21 us in all, not (3003 - 1) x 3 = 9006 us.
#   aten::add_: (47 - 4) x 60 = 2580 us: first.
@pytest.mark.parametrize("form", ("nsys", "new"))
def test_time_waiting_in_a_sync_is_not_dispatch(form, tmp_path):
    from nsysdoc.rules.evaluate import dispatch_rows

    r = diagnose_path(_write(launch_bound_dispatch_heavy_ops(calls=20, item_op=True), form, tmp_path, "item"))
    rows = {x["name"]: x for x in r["metrics"]["operators"]["rows"]}
    item = rows["aten::item"]
    assert item["calls"] == 3
    assert item["cpu_us_per_call"] == pytest.approx(3003.0) and item["gpu_us_per_call"] == pytest.approx(1.0)
    assert item["cpu_wait_ms"] == pytest.approx(3 * 2.995)
    assert item["cpu_exceeds_gpu"] is True
    assert rows["aten::add_"]["cpu_wait_ms"] == 0
    got = dispatch_rows(list(rows.values()))
    assert [g["op"] for g in got] == ["aten::add_", "aten::item"]
    assert got[0]["excess_ms"] == pytest.approx(2.58)
    assert got[1]["excess_ms"] == pytest.approx(0.021)
    assert got[1]["cpu_wait_us_per_call"] == pytest.approx(2995.0)


def test_waits_inside_an_operator_s_ranges_by_hand():
    from nsysdoc.metrics.dispatch import overlap_ns, union_per_thread

    # thread 1: [0, 10) holding a nested [2, 5), and [20, 30); thread 2: [0, 100)
    runs = union_per_thread([1, 1, 1, 2], [0, 2, 20, 0], [10, 5, 30, 100])
    assert [x.tolist() for x in runs] == [[1, 1, 2], [0, 20, 0], [10, 30, 100]]
    # calls: thread 1 [8, 25): 2 (8-10) + 5 (20-25) = 7; thread 1 [40, 50): 0; thread 2 [50, 60): 10;
    # thread 3 (no range) [0, 5): 0 -> 17
    assert overlap_ns(*runs, [1, 1, 2, 3], [8, 40, 50, 0], [25, 50, 60, 5]) == 17


@pytest.mark.parametrize("form", ("nsys", "new"))
def test_time_blocked_in_a_pageable_copy_is_not_dispatch(form, tmp_path):
    """``.item()`` into pageable memory waits inside ``cudaMemcpyAsync`` itself (the PyTorch
    Profiler trace of HTA: 4712 us of a 4723 us ``aten::item``). Per step s: ``aten::mm`` launches
    a 3000 us GEMM (kernel [s+6000, s+3,006,000)); ``aten::item`` enters at s+8000, its 4-byte
    pageable DtoH copy call starts there, the copy runs after the GEMM [s+3,006,000, s+3,007,000)
    and the call returns 2 us later, at s+3,009,000: 3001 us, all blocking. CPU per call 1 + 3001 +
    1 = 3003 us, wait 3001 us, GPU 1 us: 2 us of dispatch vs 1 us, excess (2 - 1) x 3 = 0.003 ms."""
    from nsysdoc.rules.evaluate import dispatch_rows

    cap = Capture()
    t = cap.process(pid=4750).thread()
    for i in range(3):
        with t.range(f"ProfilerStep#{i}"):
            with t.op("aten::mm"):
                t.launch("gemm_kernel", 3000)
            with t.op("aten::item"):
                t.memcpy("DtoH", 4, asynchronous=True, pageable=True)
            t.sync_stream()
    r = diagnose_path(_write(cap, form, tmp_path, "pageable_item"))
    (item,) = [x for x in r["metrics"]["operators"]["rows"] if x["name"] == "aten::item"]
    assert item["cpu_us_per_call"] == pytest.approx(3003.0) and item["gpu_us_per_call"] == pytest.approx(1.0)
    assert item["cpu_wait_ms"] == pytest.approx(3 * 3.001)
    (got,) = dispatch_rows([item])
    assert got["excess_ms"] == pytest.approx(0.003) and got["cpu_wait_us_per_call"] == pytest.approx(3001.0)


def test_zero_grad_extra_operations_are_counted_in_the_window_only(tmp_path):
    """zero_grad_every_micro_batch(): 9 extra zero_grad calls, each launching one 20 us fill kernel.
    With a window that holds none of them (it starts after the capture's last GPU operation) the
    extra calls still count (12 calls for 3 steps: a habit of the whole capture) but their GPU
    operations in the window are 0, as their time is 0 ms - so the rule cannot fire on operations
    all outside the window. With the window over the whole capture: 9 operations, 9 x 20 us."""
    from nsysdoc.assembly.values import _zero_grad_values
    from nsysdoc.testing.scenarios import zero_grad_every_micro_batch
    from nsysdoc.trace import load_trace

    t = load_trace(zero_grad_every_micro_batch().write(tmp_path / "zg.sqlite"), cache=False)
    k = t.store.get("kernels")
    end = int(max(int(b["end_ns"].max()) for b in k.iter_blocks(["end_ns"])))
    start = int(min(int(b["start_ns"].min()) for b in k.iter_blocks(["start_ns"])))
    after = _zero_grad_values(t, {"start_ns": end + 1000, "end_ns": end + 2000}, 3, 1, 1.0)
    assert after["zero_grad_extra_calls"] == 9
    assert after["zero_grad_extra_gpu_ops"] == 0 and after["zero_grad_extra_gpu_ms"] == 0
    whole = _zero_grad_values(t, {"start_ns": start, "end_ns": end}, 3, 1, 100.0)
    assert whole["zero_grad_extra_gpu_ops"] == 9 and whole["zero_grad_extra_gpu_ms"] == pytest.approx(0.18)
