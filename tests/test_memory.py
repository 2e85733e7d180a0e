"""Issue 47, item 1: the memory view (``metrics.memory``, the memory table, the memory rules).

Expected numbers are computed by hand from the scenarios (``nsysdoc/testing/memory_scenarios.py``)
and the definitions of ``docs/glossary.md`` ("Memory"); the real trace's by a few lines of
independent JSON code. MiB = 2**20 bytes, GiB = 2**30.
"""
from __future__ import annotations

import collections
import gzip
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from nsysdoc.testing import Capture  # noqa: E402
from nsysdoc.testing.memory_scenarios import (memory_churn_no_growth, memory_leak_per_step,  # noqa: E402
                                              memory_near_capacity)
from tests.conftest import diagnose_path  # noqa: E402

MIB = 1 << 20
GIB = 1 << 30
from tests.conftest import SHARED_TRACES, needs_shared  # noqa: E402  (issue 49)

RESNET = SHARED_TRACES / "kineto" / "kineto_resnet50_v100_oldformat.pt.trace.json.gz"
FORMS = ("nsys", "kineto-new", "kineto-old")


def _write(cap, tmp_path: Path, form: str) -> Path:
    if form == "nsys":
        return cap.write(tmp_path / "m.sqlite")
    return cap.write_kineto(tmp_path / f"m-{form}.pt.trace.json", form=form.split("-")[1])


def _memory(result: dict) -> dict:
    return result["metrics"]["memory"]


def _finding(result: dict, rule: str):
    got = [f for f in result["findings"] if f["rule"] == rule]
    return got[0] if got else None


def _invariants(mm: dict) -> None:
    """Window peak <= capture peak; top_ops bytes <= all bytes allocated; reserved >= allocated."""
    for d in mm["devices"]:
        assert d["window_peak_allocated_bytes"] <= d["peak_allocated_bytes"]
        if d["peak_reserved_bytes"] is not None:
            assert d["peak_reserved_bytes"] >= d["peak_allocated_bytes"]
        tl = d["timeline"]
        assert max(tl["allocated_max"]) == d["peak_allocated_bytes"]  # the chart never loses the peak
    assert sum(r["allocated_bytes"] for r in mm["top_ops"]) <= mm["op_allocated_bytes"] <= mm["allocated_bytes"]


# ---------------------------------------------------------------------------------------------
# a leak of a known size per step, in the three forms
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("form", FORMS)
def test_leak_of_8_mib_per_step(tmp_path, form):
    """4 steps; each allocates 64 MiB in aten::mm, keeps 8 MiB from aten::cat, frees the 64 MiB.
    Levels after each event (MiB): 64 72 8 | 72 80 16 | 80 88 24 | 88 96 32. Peak 96 MiB (step 3's
    aten::cat), levels at the steps' ends 8, 16, 24, 32 -> growth (32 - 8) / 3 = 8 MiB per step,
    rising in 3 of 3. Allocations: aten::mm 4 x 64 = 256 MiB, aten::cat 4 x 8 = 32 MiB, 288 MiB in
    all. Reserved (the builder: the highest allocated so far) is written only by the new Kineto
    form, whose running totals are absolute; nsys and the old form give sums of bytes since the
    capture's start (their reserved is unknown)."""
    res = diagnose_path(_write(memory_leak_per_step(steps=4, churn_mib=64, leak_mib=8), tmp_path, form))
    mm = _memory(res)
    (d,) = mm["devices"]
    assert d["device"] == 0 and d["events"] == 12
    assert d["peak_allocated_bytes"] == 96 * MIB
    assert d["baseline"] == ("absolute" if form == "kineto-new" else "capture_start")
    assert d["peak_reserved_bytes"] == (96 * MIB if form == "kineto-new" else None)
    assert d["step_end_allocated_bytes"] == [8 * MIB, 16 * MIB, 24 * MIB, 32 * MIB]
    assert d["growth_bytes_per_step"] == 8 * MIB and d["rising_steps"] == 3 and d["growth_steps"] == 4
    assert d["device_memory_bytes"] == 80 * GIB  # the builder's H100 (TARGET_INFO_GPU / deviceProperties)
    assert mm["allocated_bytes"] == 288 * MIB
    assert mm["missing"] is None
    # allocated_at_end - allocated_at_start = the bytes of the events in the window (every event is in it)
    assert d["allocated_at_start_bytes"] == 0 and d["allocated_at_end_bytes"] == 32 * MIB
    _invariants(mm)
    f = _finding(res, "memory-growth")
    assert f is not None and f["severity"] == "warning" and f.get("impact_ms") is None
    # (80 GiB - 32 MiB) / 8 MiB = 10,240 - 4 = 10,236 steps
    v = res["metrics"]["values"]
    assert v["memory_steps_to_full"] == 10236 and v["memory_growth_mib_per_step"] == 8
    assert "8.0 MiB per step" in f["message"] and "10,236" in f["message"]
    assert res["verdict"]["headline"] != "memory-growth"


@pytest.mark.parametrize("form", FORMS)
def test_churn_without_growth_is_quiet(tmp_path, form):
    """The same steps freeing all they allocate: every step ends at 0 -> growth 0, no finding."""
    res = diagnose_path(_write(memory_churn_no_growth(steps=4, churn_mib=64), tmp_path, form))
    (d,) = _memory(res)["devices"]
    assert d["step_end_allocated_bytes"] == [0, 0, 0, 0] and d["growth_bytes_per_step"] == 0
    assert d["peak_allocated_bytes"] == 64 * MIB
    assert _finding(res, "memory-growth") is None


@pytest.mark.parametrize("form", ("kineto-new", "kineto-old"))
def test_allocation_inside_a_known_operator_and_frame(tmp_path, form):
    """top_ops: aten::mm (256 MiB, 4 allocations) then aten::cat (32 MiB, 4), both inside the
    Python frame train.py(42): train_step (the new form's python_function events, the old form's
    Call stack); every allocated byte is inside an operator."""
    res = diagnose_path(_write(memory_leak_per_step(steps=4, churn_mib=64, leak_mib=8), tmp_path, form))
    mm = _memory(res)
    assert [(r["op"], r["allocated_bytes"], r["allocations"]) for r in mm["top_ops"]] == [
        ("aten::mm", 256 * MIB, 4), ("aten::cat", 32 * MIB, 4)]
    assert all(r["frame"] == "train.py:42 in train_step" for r in mm["top_ops"])
    assert mm["op_allocated_bytes"] == mm["allocated_bytes"] == 288 * MIB


@pytest.mark.parametrize("form", ("kineto-new", "kineto-old"))
def test_allocation_at_an_operators_end_belongs_to_the_enclosing_one(tmp_path, form):
    """An operator holds the times start <= t < end (the Where attribution's rule): 2 MiB at
    aten::outer's start + 1 us (= aten::inner's start, so inner's), 1 MiB at the instant aten::inner
    ends (outer's: inner no longer holds it), 4 MiB at the instant aten::outer ends (no operator)."""
    cap = Capture()
    t = cap.process(pid=4740).thread()
    with t.range("ProfilerStep#0"):
        with t.op("aten::outer"):
            with t.op("aten::inner"):
                t.alloc_event(2 * MIB)
                t.launch("gemm_kernel", 100)
            t.alloc_event(1 * MIB)
            t.cpu(us=5)
        t.alloc_event(4 * MIB)
        t.item()
    mm = _memory(diagnose_path(_write(cap, tmp_path, form)))
    assert [(r["op"], r["allocated_bytes"]) for r in mm["top_ops"]] == [("aten::inner", 2 * MIB),
                                                                         ("aten::outer", 1 * MIB)]
    assert mm["op_allocated_bytes"] == 3 * MIB and mm["allocated_bytes"] == 7 * MIB


@pytest.mark.parametrize("sliced", (False, True), ids=("one-slice", "slices-of-7-rows"))
def test_nsys_rows_take_the_thread_of_their_cuda_call(tmp_path, monkeypatch, sliced):
    """nsys's rows have no thread: they take that of the CUDA call with their correlation id
    (cudaMalloc inside aten::empty, 3 MiB; cudaFree inside aten::mm: not an allocation)."""
    cap = Capture()
    t = cap.process(pid=4730).thread()
    for i in range(3):
        with t.range(f"ProfilerStep#{i}"):
            with t.op("aten::empty"):
                t.alloc_event(3 * MIB, api_us=10)
            with t.op("aten::mm"):
                t.launch("gemm_kernel", 500)
                t.alloc_event(-3 * MIB, api_us=20)
            t.item()
    if sliced:  # (an nsys export's operator ranges are read a slice at a time: here slices of 7 rows,
        monkeypatch.setenv("NSYSDOC_SLICE_ROWS", "7")  # the queries falling in many slices): the same answer
    res = diagnose_path(cap.write(tmp_path / "n.sqlite"))
    mm = _memory(res)
    assert mm["source"] == "CUDA_GPU_MEMORY_USAGE_EVENTS"
    assert [(r["op"], r["allocated_bytes"], r["allocations"]) for r in mm["top_ops"]] == [("aten::empty", 9 * MIB, 3)]
    (d,) = mm["devices"]
    assert d["peak_allocated_bytes"] == 3 * MIB and d["step_end_allocated_bytes"] == [0, 0, 0]


@pytest.mark.parametrize("form", FORMS)
def test_near_capacity(tmp_path, form):
    """75 GiB of weights + 512 MiB per step on an 80 GiB GPU: peak 75.5 GiB = 94.375% -> the rule
    fires (with relative levels too: they are a lower bound); at 40 GiB (50.625%) it is quiet."""
    res = diagnose_path(_write(memory_near_capacity(weights_gib=75, churn_mib=512), tmp_path, form))
    # the window is the 4 steps: the weights came before it (level 75 GiB at its start and end, the
    # activations freed each step); the window's peak is 75 GiB + 512 MiB, the capture's too
    (d,) = _memory(res)["devices"]
    assert res["capture"]["window"]["kind"] == "steps"
    assert d["allocated_at_start_bytes"] == d["allocated_at_end_bytes"] == 75 * GIB
    assert d["window_peak_allocated_bytes"] == d["peak_allocated_bytes"] == 75 * GIB + 512 * MIB
    v = res["metrics"]["values"]
    assert v["memory_full_pct"] == pytest.approx(94.375, abs=1e-4)
    assert v["memory_full_peak_kind"] == ("reserved" if form == "kineto-new" else "allocated")
    f = _finding(res, "memory-near-capacity")
    assert f is not None and f["severity"] == "warning" and f.get("impact_ms") is None
    assert "94.4%" in f["message"]
    assert res["verdict"]["headline"] != "memory-near-capacity"
    res = diagnose_path(_write(memory_near_capacity(weights_gib=40, churn_mib=512), tmp_path, form))
    assert res["metrics"]["values"]["memory_full_pct"] == pytest.approx(50.625, abs=1e-4)
    assert _finding(res, "memory-near-capacity") is None


@pytest.mark.parametrize("form", ("nsys", "kineto-new"))
def test_without_memory_events_says_which_switch_records_them(tmp_path, form):
    from nsysdoc.testing.scenarios import healthy_training

    mm = _memory(diagnose_path(_write(healthy_training(steps=2), tmp_path, form)))
    assert mm["devices"] == [] and mm["top_ops"] == []
    switch = "--cuda-memory-usage=true" if form == "nsys" else "profile_memory=True"
    assert switch in mm["missing"]


def test_memory_metrics_on_a_hand_timeline():
    """Pure functions: device 0 gets +100, +50, -120, +30 (t = 10, 20, 30, 40); device 1 is CPU.
    Levels 100, 150, 30, 60: peak 150 at t=20; window [25, 45): level at 25 is 150, inside 30, 60
    -> window peak 150; level at 45 is 60. Steps ending at 15, 35, 45: levels 100, 30, 60 ->
    growth (60 - 100) / 2 = -20, rising 1 (30 -> 60)."""
    from nsysdoc.metrics import memory as M

    (s,) = M.device_series([10, 20, 30, 40, 5], [1, 1, 1, 1, 0], [0, 0, 0, 0, -1], [100, 50, -120, 30, 7],
                           [-1] * 5, [-1] * 5)
    assert s.baseline == "capture_start" and s.reserved is None
    assert M.peak(s) == (150, 20)
    assert M.window_peak(s, 25, 45) == 150
    assert s.level_at(np.array([0, 25, 45])).tolist() == [0, 150, 60]
    g = M.step_growth(s, np.array([35, 15, 45]))
    assert g["levels"].tolist() == [100, 30, 60] and g["growth"] == -20 and g["rising"] == 1
    # absolute totals: the level before the first event is its total less its bytes
    (s,) = M.device_series([10, 20], [1, 1], [0, 0], [-10, 5], [990, 995], [2000, 2000])
    assert s.before_first == 1000 and M.peak(s) == (1000, None) and s.reserved.max() == 2000
    # top_allocators: per operator, frees and no-operator allocations left out
    rows = M.top_allocators([3, 3, 5, -1, 5], [-1, -1, 2, -1, 2], [7, 8, 9, -1, 9], [10, 30, 25, 99, -25])
    assert rows == [(3, -1, 8, 40, 2), (5, -1 + 3, 9, 25, 1)]


# ---------------------------------------------------------------------------------------------
# the real ResNet-50 trace (old format: Bytes only), against independent JSON code
# ---------------------------------------------------------------------------------------------
def _independent(path: Path) -> tuple[dict, list]:
    """Peak of the running sum of Bytes per CUDA device (time order), and the innermost Operator
    event (start <= ts < end; latest start, then shortest) on the same tid holding each
    allocation (Bytes > 0): bytes and count per operator name, most bytes first."""
    with gzip.open(path) as fh:
        ev = json.load(fh)["traceEvents"]
    mem = sorted((e for e in ev if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1),
                 key=lambda e: e["ts"])
    total, peak = collections.Counter(), {}
    for e in mem:
        dv = e["args"]["Device Id"]
        total[dv] += e["args"]["Bytes"]
        peak[dv] = max(peak.get(dv, 0), total[dv])
    ops = collections.defaultdict(list)
    for e in ev:
        if e.get("ph") == "X" and e.get("cat") == "Operator":
            ops[int(e["tid"])].append((e["ts"], e["ts"] + e["dur"], e["name"]))
    nbytes, count = collections.Counter(), collections.Counter()
    for e in mem:
        if e["args"]["Bytes"] <= 0:
            continue
        inner = None
        for s, t, name in ops[int(e["tid"])]:
            if s <= e["ts"] < t and (inner is None or s > inner[0] or (s == inner[0] and t <= inner[1])):
                inner = (s, t, name)
        if inner is not None:
            nbytes[inner[2]] += e["args"]["Bytes"]
            count[inner[2]] += 1
    return peak, [(name, b, count[name]) for name, b in nbytes.most_common(5)]


@needs_shared("kineto/" + RESNET.name)
def test_resnet50_peak_and_top5_allocating_operators_match_independent_code():
    peak, top5 = _independent(RESNET)
    res = diagnose_path(RESNET)
    mm = _memory(res)
    assert {d["device"]: d["peak_allocated_bytes"] for d in mm["devices"]} == peak
    assert [(r["op"], r["allocated_bytes"], r["allocations"]) for r in mm["top_ops"][:5]] == top5
    (d,) = mm["devices"]
    assert d["baseline"] == "capture_start" and d["peak_reserved_bytes"] is None  # Bytes only: never invented
    assert d["device_memory_bytes"] == 34084028416  # deviceProperties[0].totalGlobalMem
    _invariants(mm)
    # end - start = the bytes of the device's events inside the window [start, end)
    from nsysdoc.trace import load_trace

    m = load_trace(RESNET, cache=False).memory
    w = res["capture"]["window"]
    inside = (m["device_type"] == 1) & (m["device_id"] == 0) & (m["timestamp_ns"] >= w["start_ns"]) & \
        (m["timestamp_ns"] < w["end_ns"])
    assert inside.sum() > 0
    assert d["allocated_at_end_bytes"] - d["allocated_at_start_bytes"] == int(m["bytes"][inside].sum())


# ---------------------------------------------------------------------------------------------
# the reader: three engines alike, hostile values, the cache
# ---------------------------------------------------------------------------------------------
ODD_MEMORY = [
    '{"ph": "i", "s": "t", "name": "[memory]", "pid": 4710, "tid": 4710, "ts": 1.5, '
    '"args": {"Bytes": 1.5, "Device Type": 1, "Device Id": 0}}',
    '{"ph": "i", "name": "[memory]", "pid": 4710, "tid": 4710, "ts": 2, '
    '"args": {"Bytes": "12", "Device Type": true, "Device Id": "0", "Total Allocated": -5}}',
    '{"ph": "i", "name": "[memory]", "pid": 4710, "tid": 4710, "ts": 3, '
    '"args": {"Bytes": 99999999999999999999999, "Addr": 18446744073709551615, "Device Type": 1, "Device Id": 0}}',
    '{"ph": "i", "name": "[memory]", "pid": 4710, "tid": [1], "ts": 4, "args": "none"}',
    '{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 4710, "tid": 4710, "ts": "x", '
    '"args": {"Bytes": -4096, "Device Type": 1, "Device Id": 70000, "Total Reserved": 8192}}',
    '{"ph": "i", "name": "not memory", "pid": 4710, "tid": 4710, "ts": 5, "args": {"Bytes": 7}}',
]


@pytest.mark.parametrize("form", ("new", "old"))
def test_memory_rows_same_from_every_reader_path(tmp_path, monkeypatch, form):
    from tests.test_kineto import _read, _with_events

    path = memory_leak_per_step(steps=3).write_kineto(tmp_path / f"{form}.json", form=form)
    slow = _read(path, monkeypatch, mode="slow")[0]
    assert len(slow["mem"]["s"]) == 9
    for window in (None, 700, 5000):
        got, paths = _read(path, monkeypatch, window=window)
        assert got == slow
        if form == "new" and window is not None:
            assert paths["arrow"] > 0
        assert _read(path, monkeypatch, window=window, mode="msgspec")[0] == slow
    odd = _with_events(tmp_path / f"odd-{form}.json", path.read_text(), ODD_MEMORY, after=5)
    slow = _read(odd, monkeypatch, mode="slow")[0]
    assert len(slow["mem"]["s"]) == 9 + 5
    for window in (None, 400, 5000):
        assert _read(odd, monkeypatch, window=window)[0] == slow
        assert _read(odd, monkeypatch, window=window, mode="msgspec")[0] == slow


#: well-formed events at the edges of each column's range (CPU memory: Device Type 0, Device Id -1;
#: zero totals and address; a free of 2^62 - 1 bytes): every path reads them as they are
EDGE_MEMORY = [
    '{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4710, "tid": 4710, "ts": 1.000, '
    '"args": {"Total Reserved": 0, "Total Allocated": 0, "Bytes": 0, "Addr": 0, "Device Id": -1, "Device Type": 0}}',
    '{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4710, "tid": 4710, "ts": 2.000, '
    '"args": {"Total Reserved": 4611686018427387903, "Total Allocated": 4611686018427387903, '
    '"Bytes": -4611686018427387903, "Addr": 4611686018427387903, "Device Id": 65535, "Device Type": 255}}',
    '{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4710, "tid": 4710, "ts": 3.000, '
    '"args": {"Total Reserved": 4611686018427387904, "Total Allocated": -1, "Bytes": -4611686018427387904, '
    '"Addr": -1, "Device Id": -2, "Device Type": 256}}',
]


def test_memory_edge_values_read_alike_by_pyarrow(tmp_path, monkeypatch):
    """The edges of each column's range, read by pyarrow (a window of them alone), by msgspec and
    by the slow path alike: kept at the lowest and highest valid value, unknown (or no size) one
    past them."""
    from nsysdoc.trace import kineto as K
    from tests.test_kineto import _read, _with_events

    body = ",\n".join(EDGE_MEMORY).encode()
    got = K._arrow_read(body)
    assert got is not None and got[0].num_rows == 3
    part = K._arrow_part(body, got)
    assert part is not None and part.paths["arrow"] == 1 and part.paths["msgspec"] == 0
    path = memory_leak_per_step(steps=2).write_kineto(tmp_path / "k.json")
    edge = _with_events(tmp_path / "edge.json", path.read_text(), EDGE_MEMORY)
    m = _read(edge, monkeypatch, mode="slow")[0]["mem"]
    assert {k: list(v) for k, v in part.mem.items() if k != "thr"} == {k: v[:3] for k, v in m.items() if k != "thr"}
    assert _read(edge, monkeypatch, mode="msgspec")[0]["mem"] == m
    assert (m["dtype"][:3], m["dev"][:3]) == ([0, 255, -1], [-1, 65535, -2])
    assert (m["alloc"][:3], m["resv"][:3], m["addr"][:3]) == ([0, (1 << 62) - 1, -1], [0, (1 << 62) - 1, -1],
                                                              [0, (1 << 62) - 1, -1])
    assert m["bytes"][:3] == [0, -(1 << 62) + 1, K.BAD]


def test_odd_memory_values_are_dropped_or_unknown_never_a_traceback(tmp_path):
    """Of the odd events: a float or text Bytes, and a Bytes beyond 2^62, make no row (no size);
    a text ts makes no row (no time); the list tid one keeps its row only if it has a Bytes (none:
    args is not an object). The valid events stay."""
    from nsysdoc.trace.kineto import load_kineto
    from tests.test_kineto import _with_events

    path = memory_leak_per_step(steps=3).write_kineto(tmp_path / "k.json")
    odd = _with_events(tmp_path / "odd.json", path.read_text(), ODD_MEMORY, after=5)
    t = load_kineto(odd, cache=False)
    assert len(t.memory) == 9
    # the text ts: no time; Bytes 1.5, "12", 10^23 (and the args that are no object): no size
    assert {(d["reason"], d["rows"]) for d in t.dropped_rows if d["table"] == "[memory]"} == {
        ("start or end NULL or not an integer", 1), ("Bytes missing, not an integer or beyond 2^62", 4)}
    res = diagnose_path(odd)
    assert len(_memory(res)["devices"]) == 1


def test_old_cache_entries_without_the_memory_table_are_rebuilt(tmp_path):
    from nsysdoc.trace.kineto import load_kineto

    path = memory_leak_per_step(steps=2).write_kineto(tmp_path / "k.json")
    first = load_kineto(path, cache_dir=tmp_path / "cache")
    assert not first.from_cache and len(first.memory) == 6
    again = load_kineto(path, cache_dir=tmp_path / "cache")
    assert again.from_cache and len(again.memory) == 6 and again.device_memory["total_bytes"].tolist()[0] == 80 * GIB
    # an entry written before the memory tables (no memory.parquet): read as a miss, rebuilt
    entry = next(p for p in (tmp_path / "cache").rglob("memory.parquet")).parent
    (entry / "memory.parquet").unlink()
    (entry / "device_memory.parquet").unlink()
    third = load_kineto(path, cache_dir=tmp_path / "cache")
    assert not third.from_cache and len(third.memory) == 6
    shutil.rmtree(tmp_path / "cache", ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# the API and the verdict
# ---------------------------------------------------------------------------------------------
def test_report_memory_and_memory_ops(tmp_path):
    """Report.memory: the 12 events of memory_leak_per_step (3 steps shown: 9) with the levels of
    the glossary example (64, 72, 8 MiB after step 0's events), the thread that allocated; reserved
    from the new Kineto form (72 MiB: the highest so far after the free). Report.memory_ops =
    metrics.memory.top_ops."""
    import nsysdoc

    path = memory_leak_per_step(steps=3).write_kineto(tmp_path / "k.json")
    r = nsysdoc.report(str(path), cache=False, no_config=True)
    m = r.memory
    assert len(m) == 9
    assert (m["allocated_bytes"][:3] // MIB).tolist() == [64, 72, 8]
    assert (m["reserved_bytes"][:3] // MIB).tolist() == [64, 72, 72]
    assert m["bytes"].sum() == 24 * MIB and set(m["tid"]) == {4710}
    ops = r.memory_ops
    assert ops["op"].tolist() == ["aten::mm", "aten::cat"] and ops["allocated_bytes"].tolist() == [192 * MIB, 24 * MIB]
    path = memory_leak_per_step(steps=3).write(tmp_path / "n.sqlite")
    m = nsysdoc.report(str(path), cache=False, no_config=True).memory
    assert m["reserved_bytes"].isna().all() and m["tid"].isna().all()  # nsys: no totals; no CUDA call to join


def test_a_memory_warning_does_not_keep_set_up_from_the_headline():
    """Memory is not time: with only a memory warning beside a framing (set-up) finding that costs
    time, the set-up finding is the main one (a steady-state time warning would come first)."""
    from nsysdoc.rules.verdict import main_finding

    setup = {"rule": "one-time-setup", "severity": "warning", "impact_ms": 50.0, "impact_pct": 40.0,
             "phase": "framing", "category": "capture-setup"}
    for rule in ("memory-growth", "memory-near-capacity"):
        mem = {"rule": rule, "severity": "warning", "impact_ms": None, "category": "memory-transfer"}
        assert main_finding([mem, setup]) is setup
    steady = {"rule": "host-sync", "severity": "warning", "impact_ms": None, "category": "synchronization"}
    assert main_finding([steady, setup]) is None


def test_page_memory_section_draws_each_gpu_and_escapes_operator_names(tmp_path):
    """The memory section: one chart per GPU whose band reaches the peak (96 MiB at the plot's
    top edge, y = 12), step starts marked (4 steps), the top allocating operators with a name the
    trace controls escaped; without memory events it says which switch records them."""
    import re

    import nsysdoc
    from nsysdoc.testing.scenarios import healthy_training

    cap = Capture()
    t = cap.process(pid=4750).thread()
    for i in range(4):
        with t.range(f"ProfilerStep#{i}"):
            with t.op("aten::<b>evil</b>"):
                t.alloc_event(64 * MIB)
                t.launch("gemm_kernel", 1000)
            with t.op("aten::cat"):
                t.alloc_event(8 * MIB)
            with t.op("aten::mm"):
                t.alloc_event(-64 * MIB)
            t.item()
    html = nsysdoc.report(str(cap.write_kineto(tmp_path / "k.json")), cache=False, no_config=True).to_html()
    sec = html[html.index('<section id="memory"'):]
    sec = sec[:sec.index("</section>")]
    assert sec.count('<svg class="memory-chart"') == 1 and "peak allocated 96.0 MiB" in sec
    band = re.search(r'<polygon class="band" points="([^"]*)"', sec).group(1).split()
    assert min(float(p.split(",")[1]) for p in band) == 12.0  # TOP: the plot's top is the peak
    assert sec.count('<line class="step"') == 4
    assert "<b>evil</b>" not in html and "aten::&lt;b&gt;evil&lt;/b&gt;" in sec
    html = nsysdoc.report(str(healthy_training(steps=2).write(tmp_path / "h.sqlite")), cache=False,
                          no_config=True).to_html()
    sec = html[html.index('<section id="memory"'):]
    assert "nsys profile --cuda-memory-usage=true" in sec[:sec.index("</section>")]


def test_nsys_memory_rows_read_once_and_odd_rows_left_out(tmp_path):
    """An export where a runtime row shares a memory row's correlation id with its call (same
    process) still gives the row once; rows with a text start, a text size or an unknown
    operation type are left out, never a traceback."""
    import sqlite3

    from nsysdoc.trace import load_trace

    cap = Capture()
    t = cap.process(pid=4760).thread()
    with t.op("aten::empty"):
        t.alloc_event(5 * MIB, api_us=10)
    t.launch("gemm_kernel", 100)
    t.item()
    path = cap.write(tmp_path / "d.sqlite")
    con = sqlite3.connect(path)
    con.execute('INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME '
                'WHERE correlationId = (SELECT correlationId FROM CUDA_GPU_MEMORY_USAGE_EVENTS)')
    for row in ("('t', 0, 0, 1, 0, 0, 7, 2, 0, NULL, NULL, 7, NULL, NULL, NULL, NULL, NULL, NULL)",
                "(1000000100, 0, 0, 1, 0, 0, 'x', 2, 0, NULL, NULL, 7, NULL, NULL, NULL, NULL, NULL, NULL)",
                "(1000000200, 0, 0, 1, 0, 0, 9, 2, 5, NULL, NULL, 7, NULL, NULL, NULL, NULL, NULL, NULL)"):
        con.execute(f"INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES {row}")
    con.commit()
    con.close()
    tr = load_trace(path, cache=False)
    assert tr.memory["bytes"].tolist() == [5 * MIB]
    mm = _memory(diagnose_path(path))
    assert [(r["op"], r["allocated_bytes"]) for r in mm["top_ops"]] == [("aten::empty", 5 * MIB)]
    # issue 47 review: the 3 odd rows are counted as dropped rows of the table
    assert {(d["table"], d["rows"]) for d in tr.dropped_rows if d["table"] == "CUDA_GPU_MEMORY_USAGE_EVENTS"} == \
        {("CUDA_GPU_MEMORY_USAGE_EVENTS", 3)}


@pytest.mark.parametrize("form", ("nsys", "kineto-new"))
def test_memory_events_recorded_but_all_unreadable_are_not_called_unrecorded(tmp_path, form):
    """memory_leak_per_step(steps=3) writes 3 events a step (64 MiB in, 8 MiB kept, 64 MiB out): 9 in
    all. With every size made unreadable (Kineto: Bytes "NaN", a text; nsys: bytes a text) no event
    is left, and `missing` says they were recorded but unreadable, with the 9 dropped - not that
    memory was not recorded (which would send the user to a switch already on)."""
    import re
    import sqlite3

    path = _write(memory_leak_per_step(steps=3), tmp_path, form)
    if form == "nsys":
        con = sqlite3.connect(path)
        con.execute("UPDATE CUDA_GPU_MEMORY_USAGE_EVENTS SET bytes = 'x'")
        con.commit()
        con.close()
    else:
        text = re.sub(r'"Bytes": -?[0-9]+', '"Bytes": "NaN"', path.read_text())
        path.write_text(text)
    res = diagnose_path(path)
    mm = _memory(res)
    assert mm["devices"] == []
    assert mm["missing"].startswith("GPU memory events were recorded but none could be read: 9 dropped (")
    # and both memory rules say skipped, for the same reason (item 13)
    st = {s["rule"]: s for s in res["rules"]}
    for rule in ("memory-growth", "memory-near-capacity"):
        assert st[rule]["status"] == "skipped" and "GPU memory events" in st[rule]["reason"], st[rule]


@pytest.mark.parametrize("form", ("nsys", "kineto-new"))
def test_without_memory_both_memory_rules_are_skipped_not_one_passed(tmp_path, form):
    from nsysdoc.testing.scenarios import healthy_training

    res = diagnose_path(_write(healthy_training(steps=3), tmp_path, form))
    st = {s["rule"]: s for s in res["rules"]}
    assert st["memory-growth"]["status"] == st["memory-near-capacity"]["status"] == "skipped"
    assert st["memory-growth"]["reason"] == st["memory-near-capacity"]["reason"]


@pytest.mark.parametrize("form", ("nsys", "kineto-new"))
def test_page_memory_note_mentions_the_dashed_line_only_when_reserved_is_drawn(tmp_path, form):
    """An nsys export has no running totals (capture-start levels, no reserved level): the note says
    reserved memory is not recorded and never that a dashed line is reserved memory; a Kineto trace
    with Total Reserved draws the dashed line and says what it is."""
    import nsysdoc

    html = nsysdoc.report(str(_write(memory_leak_per_step(steps=3), tmp_path, form)), cache=False,
                          no_config=True).to_html()
    sec = html[html.index('<section id="memory"'):]
    sec = sec[:sec.index("</section>")]
    if form == "nsys":
        assert "reserved memory is not recorded" in sec and "dashed line" not in sec
        assert '<polyline class="reserved"' not in sec
    else:
        assert "the dashed line is reserved memory" in sec
