"""Invariants of the frame (issue 44) on every capture we have: every scenario of
``nsysdoc/testing/scenarios.py`` and ``nsysdoc/testing/frame_scenarios.py`` (each public function
that returns a Capture, or a list of Captures, called with its defaults) and every real trace in
``../shared/traces`` (skipped when absent).

What must hold whatever the capture (``docs/glossary.md``):

(a) steps partition their thread's timeline: a primary step ends no later than the next one on
    its thread starts, every primary step lies inside the window, and the primary steps of one
    process add up to no more than the window;
(b) each step's breakdown sums to its duration, and step time = step duration;
(c) a cost per step is never more than the mean step time, and cost per step x steps per process
    is never more than the cost in the window; without steps nothing is per step;
(d) findings are ordered by severity (critical, warning, info);
(e) a capture with kernels is never "no GPU activity";
(f) a device's split adds up: compute + exposed communication + copy-only = busy, busy + idle = 100;
(g) the summary's step time is the median step's (``metrics.step_picks.median_step``);
(h) a main bottleneck costs at least 5% of what it is measured over.

Tolerances are the JSON's rounding to 4 decimals (half a unit per rounded term).
"""
from __future__ import annotations

import inspect
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from nsysdoc.testing import frame_scenarios, scenarios  # noqa: E402
from tests.conftest import SHARED_TRACES, diagnose_path  # noqa: E402

HALF = 0.5e-4        # half a unit in the 4th decimal
EPS = 1e-9
SEV = {"critical": 2, "warning": 1, "info": 0}
#: real traces that are no capture to report (the loader refuses them with an input error)
NOT_A_CAPTURE = {"failed_capture_injection_error.sqlite"}


def _scenario_cases(mod) -> list[tuple]:
    """(id, module, function name, index into a list result or None, form) for every public
    function of ``mod`` that takes no required argument and returns a Capture or a list of them."""
    cases = []
    for name, fn in inspect.getmembers(mod, inspect.isfunction):
        if name.startswith("_") or fn.__module__ != mod.__name__:
            continue
        sig = inspect.signature(fn)
        if any(p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in sig.parameters.values()):
            continue
        ret = str(sig.return_annotation)
        short = mod.__name__.rsplit(".", 1)[-1]
        if ret in ("Capture", "nsysdoc.testing.builder.Capture") or ret.endswith(".Capture'>"):
            cases.append((f"{short}.{name}", mod, name, None, "sqlite"))
            if name in getattr(mod, "KINETO_SCENARIOS", ()):
                cases.append((f"{short}.{name}[kineto]", mod, name, None, "kineto"))
        elif ret in ("list[Capture]",):
            n = len(fn())   # builds the captures only (milliseconds): how many there are
            cases += [(f"{short}.{name}[{i}]", mod, name, i, "sqlite") for i in range(n)]
    return cases


def _real_cases() -> list[tuple]:
    if not SHARED_TRACES.is_dir():
        return []
    paths = sorted(p for p in SHARED_TRACES.glob("*.sqlite") if p.name not in NOT_A_CAPTURE)
    paths += sorted((SHARED_TRACES / "kineto").glob("*.pt.trace.json.gz"))
    return [(f"real.{p.name}", None, str(p), None, "file") for p in paths]


CASES = _scenario_cases(scenarios) + _scenario_cases(frame_scenarios) + _real_cases()
IDS = [c[0] for c in CASES]


def test_discovery_found_the_scenarios():
    ids = set(IDS)
    # the two modules' scenarios, the job scenario by rank, and the Kineto form of the GPU-only one
    for must in ("scenarios.healthy_training", "scenarios.layered_training", "scenarios.ddp_job[0]",
                 "frame_scenarios.one_step_with_layers", "frame_scenarios.markerless_loop_input_wait_h2d",
                 "frame_scenarios.gpu_only_kineto_ddp_backward[kineto]"):
        assert must in ids
    assert not [i for i in ids if i.endswith((".compute_block", ".launch_each"))]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return {"dir": tmp_path_factory.mktemp("frame-invariants"), "reports": {}, "kernels": {}}


@pytest.fixture
def report(store, request) -> dict:
    case = request.param
    cid, mod, name, index, form = case
    if cid not in store["reports"]:
        if form == "file":
            path = Path(name)
        else:
            cap = getattr(mod, name)()
            if index is not None:
                cap = cap[index]
            safe = cid.replace("[", "_").replace("]", "")
            if form == "kineto":
                path = cap.write_kineto(store["dir"] / f"{safe}.pt.trace.json.gz",
                                        distributed={"backend": "nccl", "rank": 0, "world_size": 2})
            else:
                path = cap.write(store["dir"] / f"{safe}.sqlite")
        store["reports"][cid] = diagnose_path(path)
        store["kernels"][cid] = _kernels_in(Path(path))
    request.node.capture_kernels = store["kernels"][cid]
    return store["reports"][cid]


def _kernels_in(path: Path) -> int:
    """Kernels in the capture file itself, read without nsysdoc (the window may hold none)."""
    import gzip
    import json
    import sqlite3

    if path.suffix == ".sqlite":
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return db.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        except sqlite3.OperationalError:  # no kernel table
            return 0
        finally:
            db.close()
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        d = json.load(fh)
    return sum(1 for e in d.get("traceEvents") or [] if e.get("cat") in ("kernel", "Kernel"))


def cases(fn):
    # issue 49: the real traces' cases carry the ``real`` marker
    params = [pytest.param(c, marks=pytest.mark.real) if c[0].startswith("real.") else c for c in CASES]
    return pytest.mark.parametrize("report", params, ids=IDS, indirect=True)(fn)


def primary(r: dict) -> list[dict]:
    return [s for s in r["steps"] if s.get("primary")]


def primary_step_times(r: dict) -> list[float]:
    """Every primary step's time: the step records, or ``step_series`` when the records are cut."""
    if r.get("steps_truncated"):
        return list(r["step_series"]["step_time_ms"])
    return [s["step_time_ms"] for s in primary(r)]


def primary_pids(r: dict) -> list:
    if r.get("steps_truncated"):
        return list(r["step_series"]["pid"])
    return [s["pid"] for s in primary(r)]


# (a) ------------------------------------------------------------------------------------------
@cases
def test_steps_partition_their_thread_and_fit_the_window(report):
    r = report
    w = r["capture"]["window"]
    threads: dict = {}
    for s in primary(r):
        threads.setdefault((s["pid"], s["tid"]), []).append(s)
        assert w["start_ns"] <= s["start_ns"] and s["end_ns"] <= w["end_ns"], (s["name"], s["start_ns"], s["end_ns"], w)
    for key, steps in threads.items():
        steps.sort(key=lambda s: s["start_ns"])
        for a, b in zip(steps, steps[1:]):
            assert a["end_ns"] <= b["start_ns"], f"steps {a['name']!r} and {b['name']!r} of {key} overlap"
    per_pid: dict = {}
    for pid, t in zip(primary_pids(r), primary_step_times(r)):
        per_pid.setdefault(pid, []).append(t)
    for pid, times in per_pid.items():
        assert sum(times) <= w["duration_ms"] + HALF * (len(times) + 1) + EPS, \
            f"process {pid}: steps add up to {sum(times)} ms, more than the {w['duration_ms']} ms window"


# (b) ------------------------------------------------------------------------------------------
@cases
def test_breakdown_sums_to_the_step_and_step_time_is_its_duration(report):
    for s in report["steps"]:
        assert s["duration_ms"] == pytest.approx(s["step_time_ms"], abs=EPS), s["name"]
        b = s.get("breakdown_ms")
        if b is None:
            assert not s["primary"], f"primary step {s['name']!r} has no breakdown"
            continue
        assert sum(b.values()) == pytest.approx(s["duration_ms"], abs=HALF * (len(b) + 1)), (s["name"], b)


# (c) ------------------------------------------------------------------------------------------
@cases
def test_cost_per_step_fits_in_a_step_and_in_the_window(report):
    r = report
    times = primary_step_times(r)
    per_step = [f for f in r["findings"] if isinstance(f.get("impact_ms_per_step"), (int, float))]
    if not times:
        assert not per_step, [(f["rule"], f["impact_ms_per_step"]) for f in per_step]   # nothing is per step
        return
    mean = statistics.fmean(times)
    # the engine's step count (the most steps on one thread): per step x steps is never more
    # than the cost in the window, whatever the processes' step counts
    steps = max(r["summary"]["step_count"], len(times) / len(set(primary_pids(r))))
    for f in per_step:
        assert f["impact_ms_per_step"] <= mean + 2 * HALF, (f["rule"], f["impact_ms_per_step"], mean)
        if isinstance(f.get("impact_ms"), (int, float)):
            assert f["impact_ms_per_step"] * steps <= f["impact_ms"] + HALF * (steps + 1), \
                (f["rule"], f["impact_ms_per_step"], steps, f["impact_ms"])


# (d) ------------------------------------------------------------------------------------------
@cases
def test_findings_are_ordered_by_severity(report):
    ranks = [SEV[f["severity"]] for f in report["findings"]]
    assert ranks == sorted(ranks, reverse=True), [(f["rule"], f["severity"]) for f in report["findings"]]


# (e) ------------------------------------------------------------------------------------------
@cases
def test_a_capture_with_kernels_is_never_no_gpu_activity(report, request):
    # kernels anywhere in the capture file (read without nsysdoc), not only in the window: markers
    # that frame none of them must not make "no GPU kernel ran"
    if not request.node.capture_kernels:
        pytest.skip("no kernel in this capture")
    assert report["verdict"]["headline"] != "no-gpu-activity"
    assert report["verdict"]["status"] != "no-gpu"
    assert "no-gpu-activity" not in {f["rule"] for f in report["findings"]}


# (f) ------------------------------------------------------------------------------------------
@cases
def test_device_split_adds_up(report):
    devs = [d for d in report["devices"] if d.get("busy_pct") is not None]
    for d in devs:
        parts = d["compute_pct"] + d["exposed_comm_pct"] + d["copy_only_pct"]
        assert parts == pytest.approx(d["busy_pct"], abs=4 * HALF), d
        assert d["busy_pct"] + d["idle_pct"] == pytest.approx(100.0, abs=3 * HALF), d


# (g) ------------------------------------------------------------------------------------------
@cases
def test_summary_step_time_is_the_median_steps(report):
    r = report
    if not r["summary"]["step_count"]:
        assert r["summary"]["step_time_ms_median"] is None
        return
    med_id = r["metrics"]["step_picks"]["median_step"]
    assert med_id is not None
    by_id = {s["step"]: s for s in r["steps"]}
    if med_id not in by_id:
        pytest.skip("the median step is not among the step records shown")
    med = by_id[med_id]
    assert med["primary"]
    assert r["summary"]["step_time_ms_median"] == pytest.approx(med["step_time_ms"], abs=EPS)


# (i) ------------------------------------------------------------------------------------------
@cases
def test_steps_frame_the_window(report):
    """With step markers: analysis window = first primary step start -> last primary step end, kind
    "steps". With inferred steps the window stays the one without markers (GPU span or its steady
    state) and every primary step lies inside it. step_count = the most primary steps on one thread."""
    r = report
    steps = primary(r)
    if r.get("steps_truncated") or not steps:
        assert steps or r["capture"]["window"]["kind"] != "steps"
        return
    w = r["capture"]["window"]
    if r["capture"]["step_source"] == "markers":
        assert w["kind"] == "steps", (r["capture"]["step_source"], w)
        assert (w["start_ns"], w["end_ns"]) == (min(s["start_ns"] for s in steps), max(s["end_ns"] for s in steps))
    else:
        assert r["capture"]["step_source"] == "inferred"
        assert w["kind"] in ("gpu-span", "steady-state"), w
        assert w["start_ns"] <= min(s["start_ns"] for s in steps) and max(s["end_ns"] for s in steps) <= w["end_ns"]
    per_thread: dict = {}
    for s in steps:
        per_thread[(s["pid"], s["tid"])] = per_thread.get((s["pid"], s["tid"]), 0) + 1
    assert r["summary"]["step_count"] == max(per_thread.values())


# (h) ------------------------------------------------------------------------------------------
@cases
def test_a_main_bottleneck_costs_at_least_5_percent(report):
    v = report["verdict"]
    if v["status"] != "bottleneck":
        return
    assert isinstance(v["impact_pct"], (int, float)) and v["impact_pct"] >= 5.0, v
    main = [f for f in report["findings"] if f["rule"] == v["rule"]]
    assert main and main[0]["severity"] in ("warning", "critical")


# (i) issue 48 ------------------------------------------------------------------------------------
@cases
def test_critical_path_is_the_step_time(report):
    """The critical path of each computed step (``metrics.critical_path``, glossary "Critical path"):
    its length is the step's duration (step time) within 1 us, its segments sum to the length and
    none is negative, and no top item has more time per step than the longest path; without
    steps, one path over the analysis window."""
    cpm = report["metrics"]["critical_path"]
    rows = cpm["steps"]
    durs = {s["step"]: s["duration_ms"] for s in primary(report)}
    for s in rows:
        segs = s["segments_ms"]
        assert min(segs.values()) >= 0, s
        assert sum(segs.values()) == pytest.approx(s["length_ms"], abs=HALF * 7 + EPS)
        if s["step"] is None:
            w = report["capture"]["window"]
            assert s["length_ms"] == pytest.approx((w["end_ns"] - w["start_ns"]) / 1e6, abs=1e-3)
        elif s["step"] in durs:
            assert s["length_ms"] == pytest.approx(durs[s["step"]], abs=1e-3)
    if rows:
        longest = max(s["length_ms"] for s in rows)
        assert all(x["ms_per_step"] <= longest + HALF for x in cpm["top"])


# (j) issue 48, milestone 2 --------------------------------------------------------------------------
@cases
def test_what_if_never_gains_more_than_the_step(report):
    """Each what-if (``metrics.critical_path.what_if``, glossary "What-if") is on the median step: its
    step before is that step's path length, the step after is no longer than before and not negative,
    the saving is their difference and at most the step; every finding of a rule with a what-if
    carries it (the same numbers); the fixes together (``what_if_all``) save no more than the step
    and at least the largest single saving of the rules they combine (the replay is monotone: more
    changes never lengthen a step), and they combine only findings that have a what-if."""
    cpm = report["metrics"]["critical_path"]
    wis = cpm.get("what_if") or {}
    med = cpm.get("median_step")
    for rid, w in wis.items():
        assert med is not None, rid
        assert w["step_ms_before"] == pytest.approx(med["length_ms"], abs=HALF * 2 + EPS), rid
        assert -EPS <= w["step_ms_after"] <= w["step_ms_before"] + EPS, (rid, w)
        assert w["saved_ms_per_step"] == pytest.approx(w["step_ms_before"] - w["step_ms_after"], abs=HALF * 3 + EPS)
        assert 0 <= w["saved_ms_per_step"] <= w["step_ms_before"] + EPS, (rid, w)
        assert isinstance(w["change"], str) and w["change"], rid
    for f in report["findings"]:
        if f["rule"] in wis:
            assert f["what_if"] == wis[f["rule"]], f["rule"]
        else:
            assert f.get("what_if") is None, f["rule"]
    both = cpm.get("what_if_all")
    if both is not None:
        assert len(both["rules"]) >= 2 and all(r in wis for r in both["rules"]), both
        singles = max(wis[r]["saved_ms_per_step"] for r in both["rules"])
        assert singles - HALF * 3 - EPS <= both["saved_ms_per_step"] <= both["step_ms_before"] + EPS, both
        assert both["step_ms_after"] <= min(wis[r]["step_ms_after"] for r in both["rules"]) + HALF * 3 + EPS, both
