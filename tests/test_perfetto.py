"""``nsysdoc report -f perfetto`` (docs/perfetto.md) and the folder report's ``index.html``.

The export is checked against a JSON schema of the Chrome Trace Event format written here (the
fields each phase needs, as ui.perfetto.dev and chrome://tracing read them): no Perfetto UI runs
offline, so this structural check is what stands for "opens in a viewer"."""
from __future__ import annotations

import json
import re
import sqlite3
from html import unescape
from urllib.parse import unquote
from pathlib import Path

import jsonschema
import pytest

from nsysdoc.analysis import analyze
from nsysdoc.views.perfetto import FINDINGS_PID, GAP_TID, GPU_PID_BASE, chrome_trace, jstr, selection_for
from nsysdoc.rules import apply_rules, load_rules
from nsysdoc.testing import Capture
from nsysdoc.testing.scenarios import SCENARIOS
from nsysdoc.trace import load_trace

from .conftest import run_cli

_NUM = {"type": "number", "minimum": 0}
#: The Chrome Trace Event format (JSON object form), as far as this export uses it.
CHROME_TRACE_SCHEMA = {
    "type": "object",
    "required": ["traceEvents"],
    "properties": {
        "traceEvents": {"type": "array", "items": {"oneOf": [
            {"type": "object", "required": ["name", "ph", "ts", "dur", "pid", "tid"],
             "properties": {"ph": {"const": "X"}, "name": {"type": "string"}, "cat": {"type": "string"},
                            "ts": _NUM, "dur": _NUM, "pid": {"type": "integer"}, "tid": {"type": "integer"},
                            "args": {"type": "object"}}},
            {"type": "object", "required": ["name", "ph", "pid", "args"],
             "properties": {"ph": {"const": "M"},
                            "name": {"enum": ["process_name", "thread_name", "process_sort_index",
                                              "thread_sort_index"]},
                            "pid": {"type": "integer"}, "tid": {"type": "integer"},
                            "args": {"type": "object", "minProperties": 1}},
             "allOf": [{"if": {"properties": {"name": {"enum": ["process_name", "thread_name"]}}},
                        "then": {"properties": {"args": {"required": ["name"],
                                                         "properties": {"name": {"type": "string"}}}}},
                        "else": {"properties": {"args": {"required": ["sort_index"],
                                                         "properties": {"sort_index": {"type": "integer"}}}}}},
                       {"if": {"properties": {"name": {"enum": ["thread_name", "thread_sort_index"]}}},
                        "then": {"required": ["tid"]}}]},
            {"type": "object", "required": ["name", "cat", "ph", "id", "ts", "pid", "tid"], "additionalProperties": False,
             "properties": {"ph": {"enum": ["s", "f"]}, "name": {"type": "string"}, "cat": {"type": "string"},
                            "id": {"type": "integer", "minimum": 1}, "ts": _NUM, "pid": {"type": "integer"},
                            "tid": {"type": "integer"}, "bp": {"const": "e"}},
             "if": {"properties": {"ph": {"const": "f"}}}, "then": {"required": ["bp"]}},
        ]}},
        "displayTimeUnit": {"enum": ["ms", "ns"]},
        "otherData": {"type": "object"},
    },
}

GPU_CATS = {"kernel", "kernel,nccl", "memcpy", "memset"}


def _analysis(path):
    a = analyze(load_trace(path, cache=False))
    apply_rules(a.to_dict(), load_rules())
    return a


def _export(a, time_range=None, steps=None) -> dict:
    text = "".join(chrome_trace(a, selection_for(a, time_range, steps)))
    data = json.loads(text)
    jsonschema.validate(data, CHROME_TRACE_SCHEMA)
    # every track an X event uses is named (its thread_name, and its process's process_name)
    names = {(e["pid"], e.get("tid")) for e in data["traceEvents"] if e["ph"] == "M"
             and e["name"] in ("process_name", "thread_name")}
    for e in data["traceEvents"]:
        if e["ph"] == "X":
            assert (e["pid"], None) in names and (e["pid"], e["tid"]) in names, e
    _check_flows(data)
    return data


def _binds(data) -> dict:
    """The X events of each track (pid, tid), for :func:`_enclosing`."""
    out: dict = {}
    for e in data["traceEvents"]:
        if e["ph"] == "X":
            out.setdefault((e["pid"], e["tid"]), []).append(e)
    return out


def _enclosing(tracks: dict, ev) -> list[dict]:
    """The X events of ``ev``'s track that hold its time (a flow event binds to the innermost:
    the last to start), innermost last."""
    got = [x for x in tracks.get((ev["pid"], ev["tid"]), [])
           if x["ts"] <= ev["ts"] < x["ts"] + x["dur"] or x["ts"] == ev["ts"]]
    return sorted(got, key=lambda x: (x["ts"], -x["dur"]))


def _check_flows(data) -> None:
    """Every flow has one start and one end with its id and category; both bind to an event of
    the export (none dangles): a launch flow from a CUDA call to a GPU operation, an operator
    flow from a host range to a CUDA call. The counts in otherData match."""
    flows: dict = {}
    for e in data["traceEvents"]:
        if e["ph"] in ("s", "f"):
            flows.setdefault((e["cat"], e["id"]), []).append(e)
    tracks = _binds(data)
    ids = set()
    for (cat, fid), evs in flows.items():
        assert sorted(x["ph"] for x in evs) == ["f", "s"], evs
        assert fid not in ids  # ids are unique across both kinds of flow
        ids.add(fid)
        s_ev = next(x for x in evs if x["ph"] == "s")
        f_ev = next(x for x in evs if x["ph"] == "f")
        src, dst = _enclosing(tracks, s_ev), _enclosing(tracks, f_ev)
        assert src and dst, evs
        if cat == "launch":
            assert src[-1]["cat"].startswith("cuda_api") and dst[-1]["cat"] in GPU_CATS, (src[-1], dst[-1])
        else:
            assert cat == "operator"
            assert src[-1]["cat"] in ("nvtx", "cpu_op") and dst[-1]["cat"].startswith("cuda_api"), (src[-1], dst[-1])
    n = data["otherData"]["events"]
    assert n["launch_flow"] == sum(c == "launch" for c, _ in flows)
    assert n["operator_flow"] == sum(c == "operator" for c, _ in flows)


def _gpu(data) -> list[dict]:
    return [e for e in data["traceEvents"] if e["ph"] == "X" and e.get("cat") in GPU_CATS]


def _sql_ops(path, w0, w1) -> int:
    """GPU operations starting in the window, counted from the export itself (the analysis's
    rule: start in [w0, w1), plus zero-length operations at w1)."""
    con = sqlite3.connect(path)
    n = 0
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        if t in tables:
            n += con.execute(f"SELECT count(*) FROM {t} WHERE start >= ? AND (start < ? OR (start = ? AND end = ?))",
                             (w0, w1, w1, w1)).fetchone()[0]
    con.close()
    return n


#: issue 50: 0.2-9 s of CPU per scenario (26 s in all); README's command runs these three, .ci/run the
#: others (marked slow).
EXPORT_FAST = ("healthy_training", "ddp_nccl", "operators_forward_backward")


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in EXPORT_FAST else pytest.mark.slow)
                                  for n in sorted(SCENARIOS)])
def test_every_scenario_exports_every_window_op(name, tmp_path):
    path = SCENARIOS[name]().write(tmp_path / f"{name}.sqlite")
    a = _analysis(path)
    data = _export(a)
    win = a.to_dict()["capture"]["window"]
    expected = _sql_ops(path, win["start_ns"], win["end_ns"]) if win and win.get("start_ns") is not None else 0
    assert len(_gpu(data)) == expected
    assert data["otherData"]["events"]["kernel"] + data["otherData"]["events"]["memcpy"] + \
        data["otherData"]["events"]["memset"] == expected


def _tiny(path):
    """Four steps: a 1 ms kernel, a stream sync, 3 ms of host work (numbers in the test below)."""
    cap = Capture()
    t = cap.process(pid=4242, name="python train.py").thread(name="main")
    for i in range(4):
        with t.range(f"ProfilerStep#{i}"):
            t.launch("gemm_kernel", us=1000)
            t.sync_stream()
            t.cpu(us=3000)
    return cap.write(path)


def test_hand_computed_example(tmp_path):
    a = _analysis(_tiny(tmp_path / "tiny.sqlite"))
    data = _export(a)
    ev = data["traceEvents"]
    meta = {(e["name"], e["pid"], e.get("tid")): e["args"] for e in ev if e["ph"] == "M"}
    gpu = GPU_PID_BASE
    assert meta[("process_name", gpu, None)] == {"name": "GPU 0 (NVIDIA H100 80GB HBM3)"}
    assert meta[("thread_name", gpu, 1)] == {"name": "stream 7"}
    assert meta[("thread_name", gpu, GAP_TID)] == {"name": "idle gaps"}
    assert meta[("process_name", 4242, None)] == {"name": "python train.py (pid 4242)"}
    assert meta[("thread_name", 4242, 4242)] == {"name": "main"}
    assert meta[("thread_name", 4242, (1 << 24) + 4242)] == {"name": "main CUDA API"}
    assert meta[("process_name", FINDINGS_PID, None)] == {"name": "nsysdoc findings"}
    # the thread starts at 1 s; a launch call takes 5 us and its kernel starts 0.6 * 5 us + 2 us
    # (the builder's queue delay) after the call's start; the sync returns 2 us after the kernel's
    # end; then 3 ms of host work: each step is 5 + 1002 + 3000 = 4007 us long
    kernels = [(e["ts"], e["dur"], e["tid"], e["name"]) for e in _gpu(data)]
    assert kernels == [(1_000_005, 1000, 1, "gemm_kernel"), (1_004_012, 1000, 1, "gemm_kernel"),
                       (1_008_019, 1000, 1, "gemm_kernel"), (1_012_026, 1000, 1, "gemm_kernel")]
    steps = [(e["ts"], e["dur"], e["name"]) for e in ev if e.get("cat") == "nvtx"]
    assert steps == [(1_000_000 + 4007 * i, 4007, f"ProfilerStep#{i}") for i in range(4)]
    syncs = [(e["ts"], e["dur"]) for e in ev if e.get("cat") == "cuda_api,sync"]
    assert syncs[0] == (1_000_005, 1002)
    # the idle gap between kernel 0's end (1,001,005 us) and kernel 1's start (1,004,012 us):
    # mostly the host's 3 ms of work, so its class is host
    gaps = [e for e in ev if e.get("cat") == "idle"]
    g = next(e for e in gaps if e["ts"] == 1_001_005)
    assert (g["name"], g["dur"], g["pid"], g["tid"]) == ("idle: host", 3007, gpu, GAP_TID)
    assert g["args"]["class"] == "host" and g["args"]["gap_ms"] == 3.007
    assert abs(sum(g["args"]["split_ms"].values()) - 3.007) < 1e-9
    # the window ends 2 ms after the last sync (the capture's end): a tail gap
    assert gaps[-1]["name"] == "idle: tail" and gaps[-1]["ts"] == 1_013_026
    # a finding: its time ranges are the host gaps, its args the message and impact
    res = a.to_dict()["findings"]
    hb = next(f for f in res if f["rule"] == "host-bound")
    fe = [e for e in ev if e.get("cat") == "finding" and e["name"].startswith("host-bound: ")]
    assert [(e["ts"], e["dur"]) for e in fe] == [(1_001_005, 3007), (1_005_012, 3007), (1_009_019, 3007)]
    assert fe[0]["args"]["message"] == hb["message"] and fe[0]["args"]["impact_ms"] == hb["impact_ms"]
    assert fe[0]["args"]["rule"] == "host-bound" and fe[0]["pid"] == FINDINGS_PID


def test_range_and_steps_limit_the_events(tmp_path):
    a = _analysis(_tiny(tmp_path / "tiny.sqlite"))
    # seconds on the capture's timeline: [1.004, 1.009) holds kernels 1 and 2 (they start in it)
    d = _export(a, time_range="1.004:1.009")
    assert [e["ts"] for e in _gpu(d)] == [1_004_012, 1_008_019]
    assert d["otherData"]["intervals_ns"] == [[1_004_000_000, 1_009_000_000]]
    # every X event overlaps the range; gaps are clipped to it
    for e in d["traceEvents"]:
        if e["ph"] == "X" and e.get("cat") != "finding":
            assert e["ts"] < 1_009_000 and e["ts"] + e["dur"] > 1_004_000 or e["dur"] == 0, e
    assert all(1_004_000 <= e["ts"] and e["ts"] + e["dur"] <= 1_009_000 for e in d["traceEvents"]
               if e.get("cat") == "idle")
    assert len([e for e in d["traceEvents"] if e.get("cat") == "nvtx"]) == 3  # steps 0 (running), 1 and 2
    # steps: the median and worst steps as the report picks them; step i's kernel starts at
    # 1,000,005 + 4007 i us
    from nsysdoc.metrics.steps import pick_steps

    med, worst = pick_steps(a.steps.table)
    assert [e["ts"] for e in _gpu(_export(a, steps="median"))] == [1_000_005 + 4007 * med]
    assert [e["ts"] for e in _gpu(_export(a, steps="worst,median"))] == \
        sorted({1_000_005 + 4007 * med, 1_000_005 + 4007 * worst})
    d = _export(a, steps="1,3")
    assert [e["ts"] for e in _gpu(d)] == [1_004_012, 1_012_026]
    assert len([e for e in d["traceEvents"] if e.get("cat") == "nvtx"]) == 2
    d = _export(a, steps="1-3")
    assert len(_gpu(d)) == 3
    assert len(_gpu(_export(a, time_range="2:3"))) == 0


def test_chunks_hold_a_bounded_batch_of_events(tmp_path, monkeypatch):
    """The export never holds a slice's events as text: each chunk holds at most
    EVENTS_PER_CHUNK events (plus the metadata of the tracks they use first), whatever a slice
    holds, and the chunks join to the same trace as with the default batch."""
    from nsysdoc.views import perfetto
    from nsysdoc.testing.scenarios import launch_bound_small_kernels

    a = _analysis(launch_bound_small_kernels().write(tmp_path / "lb.sqlite"))
    sel = selection_for(a)
    whole = json.loads("".join(chrome_trace(a, sel)))
    n_x = sum(e["ph"] == "X" for e in whole["traceEvents"])
    monkeypatch.setattr(perfetto, "EVENTS_PER_CHUNK", 7, raising=False)
    chunks = list(chrome_trace(a, sel))
    per_chunk = [c.count('"ph":"X"') for c in chunks]
    assert max(per_chunk) <= 7
    assert len(chunks) > n_x // 7  # one slice here holds all of its hundreds of operations
    meta = [c.count('"ph":"M"') for c in chunks]
    assert max(meta) <= 4 * 7  # at most four metadata events per new track an event uses
    batched = json.loads("".join(chunks))
    assert sorted(map(json.dumps, batched["traceEvents"])) == sorted(map(json.dumps, whole["traceEvents"]))
    assert batched["otherData"] == whole["otherData"]


def test_overlap_detection_follows_nesting(tmp_path):
    """Perfetto nests the events of a track as a stack: an event crossing the innermost open one
    (not only the furthest-reaching) goes to the twin track; stacks carry over between calls."""
    from nsysdoc.views.perfetto import _overlapping
    import numpy as np

    key = np.zeros(5, dtype=np.int64)
    s = np.array([0, 10, 40, 100, 100], dtype=np.int64)
    e = np.array([100, 50, 60, 100, 120], dtype=np.int64)
    # [0,100) holds [10,50); [40,60) crosses [10,50) though it ends before 100; [100,120) follows
    # and [100,100) nests in it (longer first at equal starts)
    assert _overlapping(key, s, e, {}).tolist() == [False, False, True, False, False]
    # sequential events (a GPU stream): nothing overlaps; a carried open event is checked
    stacks: dict = {}
    assert not _overlapping(key[:3], np.array([0, 5, 9]), np.array([5, 9, 20]), stacks).any()
    assert _overlapping(key[:2], np.array([15, 20]), np.array([25, 30]), stacks).tolist() == [True, False]


def test_hostile_text_stays_valid_json(tmp_path):
    cap = Capture()
    t = cap.process(pid=7).thread()
    weird = 'k"\\\x00\x1f\u202e</script>'
    for i in range(3):
        with t.range(f"ProfilerStep#{i} {weird}"):
            t.launch(weird, us=500)
            t.sync_stream()
    path = cap.write(tmp_path / "weird.sqlite")
    con = sqlite3.connect(path)  # bytes that are not UTF-8, as a real trace may hold them
    con.execute("UPDATE NVTX_EVENTS SET text = text || CAST(x'fffe41' AS TEXT) WHERE text IS NOT NULL")
    con.execute("UPDATE StringIds SET value = value || CAST(x'ff' AS TEXT) WHERE value LIKE 'k%'")
    con.commit()
    con.close()
    a = _analysis(path)
    text = "".join(chrome_trace(a, selection_for(a)))
    text.encode("utf-8")  # no lone surrogate left
    data = json.loads(text)
    jsonschema.validate(data, CHROME_TRACE_SCHEMA)
    assert any("\ufffd" in e["name"] and "\x00" in e["name"] for e in data["traceEvents"] if e.get("cat") == "nvtx")
    assert json.loads(jstr("a\udcffb")) == "a\ufffdb"


def test_kineto_trace_times_from_the_viewer_origin(tmp_path):
    from nsysdoc.testing.scenarios import operators_forward_backward

    path = operators_forward_backward().write_kineto(tmp_path / "ops.pt.trace.json")
    a = _analysis(path)
    d = _export(a)
    assert d["otherData"]["tool"] == "pytorch-profiler"
    assert any(e.get("cat") == "cpu_op" for e in d["traceEvents"])
    assert _gpu(d) and min(e["ts"] for e in d["traceEvents"] if e["ph"] == "X") >= 0


@pytest.mark.slow  # issue 50: report commands in processes (7.3 s of CPU); .ci/run runs it
def test_cli_perfetto_output_and_default_name(tmp_path):
    sample = ["report", "--sample", "--no-cache", "-q"]
    proc = run_cli(*sample, "-f", "perfetto", "-o", tmp_path / "x.json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / "x.json").read_text(encoding="utf-8"))
    jsonschema.validate(data, CHROME_TRACE_SCHEMA)
    assert data["otherData"]["events"]["kernel"] == 3516
    # the format from the name; one input without -o: standard output, as json and md
    proc = run_cli(*sample, "-o", tmp_path / "y.perfetto.json")
    assert proc.returncode == 0 and json.loads((tmp_path / "y.perfetto.json").read_text())["traceEvents"]
    proc = run_cli(*sample, "-f", "perfetto", "--steps", "worst")
    assert proc.returncode == 0 and json.loads(proc.stdout)["otherData"]["selection"] == "steps"
    # several inputs: <name>.nsysdoc.perfetto.json in the folder
    proc = run_cli("report", "--no-cache", "-q", "-f", "perfetto", "--sample", tmp_path / "x.json", "-o",
                   f"{tmp_path / 'out'}/")
    assert (tmp_path / "out" / "sample_training.nsysdoc.perfetto.json").is_file()


@pytest.mark.parametrize("args, needle", [
    (["--range", "2:1"], "end must be after"),
    (["--range", "abc"], "START_S:END_S"),
    (["--range", "1:x"], "not a number"),
    (["--range", "nan:1"], "not a usable number"),
    (["--steps", "fast"], "not median, worst"),
    (["--steps", "99"], "no step 99"),
    (["--steps", "1", "--range", "1:2"], "exclude each other"),
])
def test_cli_bad_export_options(args, needle):
    proc = run_cli("report", "--sample", "--no-cache", "-q", "-f", "perfetto", *args)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.startswith("nsysdoc: error:")]
    assert len(lines) == 1 and needle in lines[0], proc.stderr


def test_cli_range_needs_perfetto():
    proc = run_cli("report", "--sample", "--no-cache", "-q", "--range", "1:2", "-f", "json")
    assert proc.returncode == 2 and "-f perfetto" in proc.stderr


@pytest.mark.slow  # issue 50: report commands in processes (1.4 s of CPU); .ci/run runs it
def test_folder_report_writes_index(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    _tiny(src / "good.sqlite")
    hostile = "a<script>alert(1)<!--#x.sqlite"  # no '/' (a folder) in a file name
    _tiny(src / hostile)
    (src / "broken.sqlite").write_bytes(b"not a database at all" * 10)
    out = tmp_path / "out"
    proc = run_cli("report", "--no-cache", "-q", src, "-o", f"{out}/")
    assert proc.returncode == 2  # the broken input
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "broken.<wbr>sqlite" in page  # issue 49: file names wrap between their parts only
    page = page.replace("<wbr>", "")
    assert "<script" not in page  # the hostile name is escaped, and the page runs no script
    assert "a&lt;script&gt;alert(1)&lt;!--#x.sqlite" in page
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "script-src" not in csp and unescape(csp).startswith("default-src 'none';")
    links = re.findall(r'<a href="([^"]+)">', page)
    assert len(links) == 2
    for link in links:
        assert not link.startswith("/") and (out / unquote(unescape(link))).is_file(), link
    assert "good.nsysdoc.html" in links
    # verdict and worst severity per input, the failed input with its error line
    tiny = _analysis(src / "good.sqlite").to_dict()
    assert tiny["verdict"]["sentence"].split(".")[0] in page.replace("&#39;", "'")
    assert "critical" in page or "warning" in page
    row = next(r for r in page.split("<tr>") if "broken.sqlite" in r)
    assert "failed:" in row and "not" in row
    err = [x for x in proc.stderr.splitlines() if x.startswith("nsysdoc: error:")]
    assert len(err) == 1


@pytest.mark.slow  # issue 50: report commands in processes (1.2 s of CPU); .ci/run runs it
def test_single_report_writes_no_index(tmp_path):
    proc = run_cli("report", "--sample", "--no-cache", "-q", "-o", tmp_path / "one.html")
    assert proc.returncode == 0
    assert not (tmp_path / "index.html").exists()


# ---------------------------------------------------------------------------------------------
# issue 49: flows and args
# ---------------------------------------------------------------------------------------------
def _launch_refs(path: Path, form: str) -> tuple[dict, dict]:
    """From the file itself (SQL, or the Kineto JSON): correlation id -> (launching call's start,
    end) and -> (GPU operation's start), in the file's own µs."""
    calls, gpu = {}, {}
    if form == "nsys":
        con = sqlite3.connect(path)
        for c, a, b in con.execute("SELECT correlationId, start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME"):
            calls[c] = (a / 1000, b / 1000)
        for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
            if con.execute("SELECT count(*) FROM sqlite_master WHERE name = ?", (t,)).fetchone()[0]:
                for c, a in con.execute(f"SELECT correlationId, start FROM {t}"):
                    gpu[c] = a / 1000
        con.close()
    else:
        raw = json.loads(Path(path).read_text())
        for e in raw["traceEvents"]:
            c = (e.get("args") or {}).get("correlation")
            if e.get("ph") != "X" or c is None:
                continue
            if e.get("cat") == "cuda_runtime":
                calls[c] = (e["ts"], e["ts"] + e["dur"])
            elif e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
                gpu[c] = e["ts"]
    return calls, gpu


@pytest.mark.parametrize("form", ["nsys", "kineto"])
def test_every_launched_gpu_op_has_one_flow_from_its_call(form, tmp_path):
    """operators_forward_backward (2 steps): per step gemm_kernel (aten::addmm), relu_kernel
    (aten::relu), orphan_kernel (under the step marker only: no operator) on the main thread and
    gemm_bwd_kernel (aten::mm in AddmmBackward0) on the autograd thread: 8 kernels, each launched
    by its own cudaLaunchKernel, so 8 launch flows; 3 launches a step are inside an operator, so 6
    operator flows. Each launch flow starts inside the call with the kernel's correlation id (read
    from the file, not from the tool) and ends on the kernel; launch configuration: the builder's
    default grid (1024, 1, 1) = 1024 blocks of (256, 1, 1) = 256 threads, 32 registers, 0 bytes of
    shared memory."""
    from nsysdoc.testing.scenarios import operators_forward_backward

    cap = operators_forward_backward(steps=2)
    path = cap.write(tmp_path / "fb.sqlite") if form == "nsys" else cap.write_kineto(tmp_path / "fb.pt.trace.json")
    data = _export(_analysis(path))
    calls, gpu_ref = _launch_refs(path, form)
    kernels = _gpu(data)
    assert len(kernels) == 8
    # the export's times are the file's shifted by one offset (0 for nsys; the viewer origin for Kineto)
    off = {round(e["ts"] - gpu_ref[e["args"]["correlation"]], 3) for e in kernels}
    assert len(off) == 1 and (form == "kineto" or off == {0})
    off = off.pop()
    flows = [e for e in data["traceEvents"] if e["ph"] in ("s", "f")]
    tracks = _binds(data)
    launch_s = {e["id"]: e for e in flows if e["cat"] == "launch" and e["ph"] == "s"}
    for k in kernels:
        ends = [e for e in flows if e["ph"] == "f" and e["cat"] == "launch" and k in _enclosing(tracks, e)]
        assert len(ends) == 1, k  # exactly one flow ends on each kernel
        f = ends[0]
        assert (f["pid"], f["tid"]) == (k["pid"], k["tid"]) and k["ts"] <= f["ts"] < k["ts"] + k["dur"]
        s = launch_s[f["id"]]  # ids match
        c0, c1 = calls[k["args"]["correlation"]]
        assert c0 + off <= s["ts"] < c1 + off, (s, c0, c1)  # the flow starts inside the launching call
        assert s["pid"] == 4242 and s["tid"] - (1 << 24) in (4242, 4243)  # the thread's CUDA API track
        call = _enclosing(tracks, s)[-1]
        assert call["name"] == "cudaLaunchKernel" and call["ts"] == pytest.approx(c0 + off)
        a = k["args"]
        assert (a["device"], a["stream"], a["grid"], a["block"], a["registers per thread"], a["shared memory"]) == \
            ("0", 7, 1024, 256, 32, 0)
    assert len(launch_s) == 8 and data["otherData"]["events"]["launch_flow"] == 8
    by_name = {}
    for k in kernels:
        by_name.setdefault(k["name"], []).append(k["args"])
    module = "forward" if form == "nsys" else "nn.Module: Linear_0"
    for a in by_name["gemm_kernel"]:
        assert a["operator"] == "aten::addmm" and a["module"] == module
        assert a.get("python frame") == (None if form == "nsys" else "model.py:12 in forward")
    assert all(a["operator"] == "aten::relu" for a in by_name["relu_kernel"])
    assert all("operator" not in a for a in by_name["orphan_kernel"])
    for a in by_name["gemm_bwd_kernel"]:
        assert (a["operator"], a["backward node"]) == ("aten::mm", "AddmmBackward0")
    # operator flows: from the innermost operator range (on the launching thread's track) to the call
    op_s = [e for e in flows if e["cat"] == "operator" and e["ph"] == "s"]
    op_f = {e["id"]: e for e in flows if e["cat"] == "operator" and e["ph"] == "f"}
    # (an nsys export's range texts carry PyTorch's per-call fields: "aten::addmm, seq = 7, op_id = 2")
    assert sorted(_enclosing(tracks, e)[-1]["name"].split(",")[0] for e in op_s) == \
        sorted(["aten::addmm", "aten::relu", "aten::mm"] * 2)
    starts = {(e["pid"], e["tid"], e["ts"]) for e in launch_s.values()}
    assert all((op_f[e["id"]]["pid"], op_f[e["id"]]["tid"], op_f[e["id"]]["ts"]) in starts for e in op_s)


def test_copy_and_memset_args_and_no_flow_for_a_call_outside_the_range(tmp_path):
    """A pageable 24 MiB HtoD copy under ``aten::copy_`` and a 1 MiB memset under ``aten::zero_``,
    each step. Their args carry the bytes (24 MiB = 25,165,824; 1 MiB = 1,048,576), the copy kind
    and host memory. With ``--range`` starting where step 1's memset starts on the GPU, its call
    (``[a, a + 4 us)``; the memset starts at ``a + 0.6 * 4 us + 2 us = a + 4.4 us``: the builder's
    queue delay) is not in the export, so that memset has no flow and no flow dangles; the 4 later
    operations (step 1's kernel, step 2's copy, memset and kernel) keep theirs."""
    cap = Capture()
    t = cap.process(pid=4242, name="python").thread(name="main")
    for i in range(3):
        with t.range(f"ProfilerStep#{i}"):
            with t.op("aten::copy_"):
                t.memcpy("HtoD", nbytes=24 << 20, pageable=True)
            with t.op("aten::zero_"):
                t.memset(1 << 20)
            t.launch("k", us=200)
            t.sync_device()
    path = cap.write(tmp_path / "cp.sqlite")
    a = _analysis(path)
    data = _export(a, time_range=":")
    ops = _gpu(data)
    copies = [e for e in ops if e["cat"] == "memcpy"]
    sets = [e for e in ops if e["cat"] == "memset"]
    assert len(copies) == 3 and len(sets) == 3
    for e in copies:
        assert e["args"]["bytes"] == 25_165_824 and e["args"]["copy kind"] == "HtoD"
        assert e["args"]["host memory"] == "pageable" and e["args"]["operator"] == "aten::copy_"
    for e in sets:
        assert e["args"]["bytes"] == 1_048_576 and e["args"]["operator"] == "aten::zero_"
        assert "copy kind" not in e["args"]
    assert data["otherData"]["events"]["launch_flow"] == 9
    # a range from step 1's memset start (ns on the capture's timeline) to the end
    lo = round(sets[1]["ts"] * 1000)
    calls, _ = _launch_refs(path, "nsys")
    _c0, c1 = calls[sets[1]["args"]["correlation"]]
    assert c1 + 0.4 == pytest.approx(sets[1]["ts"])  # the call is over when the memset starts
    d = _export(a, time_range=f"{lo / 1e9!r}:")
    kept = sorted(_gpu(d), key=lambda e: e["ts"])
    assert kept[0]["ts"] == sets[1]["ts"] and len(kept) == 5
    tracks = _binds(d)
    ends = [e for e in d["traceEvents"] if e["ph"] == "f" and e["cat"] == "launch"]
    flowed = {id(x) for e in ends for x in _enclosing(tracks, e)}
    assert id(kept[0]) not in flowed and all(id(x) in flowed for x in kept[1:])
    assert d["otherData"]["events"]["launch_flow"] == 4


def test_findings_track_names_rule_severity_and_impact(tmp_path):
    """The findings are a process of their own, "nsysdoc findings", a track per finding named by
    its rule id, each event's args with the rule, severity and impact (the finding's cost)."""
    a = _analysis(_tiny(tmp_path / "tiny.sqlite"))
    data = _export(a)
    ev = data["traceEvents"]
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"].endswith("_name")}
    assert names[(FINDINGS_PID, None)] == "nsysdoc findings"
    res = {f["rule"]: f for f in a.to_dict()["findings"]}
    fe = [e for e in ev if e.get("cat") == "finding"]
    assert fe
    for e in fe:
        f = res[e["args"]["rule"]]
        assert names[(FINDINGS_PID, e["tid"])] == f["rule"]
        assert (e["args"]["severity"], e["args"]["impact_ms"]) == (f["severity"], f["impact_ms"])
