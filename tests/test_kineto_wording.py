"""Issue 29, item 7: a page made from a PyTorch Profiler (Kineto) trace speaks PyTorch.

Every output (HTML, Markdown, terminal summary, the JSON's human strings) of a Kineto trace never
says "Open in the Nsight Systems GUI", "nsys shortName" or "Capture: nsys unknown"; it says where to
find a range in a trace viewer (ui.perfetto.dev, chrome://tracing, TensorBoard) in the viewer's own
seconds, and names torch.profiler switches. The same scenario as an nsys export still says the nsys
things, so each test fails both ways.
"""
from __future__ import annotations

import html as html_m
import json
import re

import pytest

from nsysdoc.testing.scenarios import SCENARIOS, dataloader_starvation, launch_bound_small_kernels, no_step_markers

from .conftest import SHARED_TRACES, run_cli
from .conftest import needs_shared  # issue 49

FORBIDDEN = ("Open in the Nsight Systems GUI", "nsys shortName", "Capture: nsys unknown", "Nsight Systems GUI",
             "--trace=", "--python-backtrace", "nsys stats", "NVTX ranges (top by total time)", "NVTX range totals")
REAL = sorted((SHARED_TRACES / "kineto").glob("*.pt.trace.json.gz")) if (SHARED_TRACES / "kineto").is_dir() else []


def _outputs(tmp_path, path) -> dict[str, str]:
    """HTML (visible text, without the glossary, which defines nsys and Kineto fields alike), Markdown,
    terminal summary and the JSON result's human strings of one report."""
    out = {}
    p = run_cli("report", path, "-o", tmp_path / "r.html", "--no-config", "--no-cache")
    assert p.returncode == 0, p.stderr
    out["terminal"] = p.stdout + p.stderr
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    page = re.sub(r'<section id="glossary".*?</section>', "", page, flags=re.S)
    page = re.sub(r"<script.*?</script>", "", page, flags=re.S)
    out["html"] = re.sub(r"\s+", " ", html_m.unescape(re.sub(r"<[^>]+>", " ", page)))
    p = run_cli("report", path, "-f", "md", "-q", "--no-config", "--no-cache")
    assert p.returncode == 0, p.stderr
    out["md"] = p.stdout.replace("\\", "")  # markdown escapes (chrome\://tracing, \#) read as the text
    p = run_cli("report", path, "-f", "json", "-q", "--no-config", "--no-cache")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    out["json"] = "\n".join(str(f.get(k) or "") for f in r["findings"]
                            for k in ("title", "message", "verify", "fix", "where_note"))
    return out


def _no_nsys_words(outs: dict[str, str]) -> None:
    for kind, text in outs.items():
        for phrase in FORBIDDEN:
            assert phrase not in text, f"{kind} says {phrase!r}"


@pytest.mark.slow  # issue 50: every page of two traces in two forms (12 s of CPU); .ci/run runs it
@pytest.mark.parametrize("make", [launch_bound_small_kernels, dataloader_starvation])
def test_kineto_pages_never_speak_nsys_and_nsys_pages_still_do(tmp_path, make):
    (tmp_path / "k").mkdir()
    (tmp_path / "s").mkdir()
    k = _outputs(tmp_path / "k", make().write_kineto(tmp_path / "run.pt.trace.json"))
    _no_nsys_words(k)
    assert "Capture: PyTorch Profiler (Kineto) trace (schemaVersion 1)" in k["md"]
    assert "made by PyTorch Profiler (Kineto) trace, schemaVersion 1" in k["html"]
    assert "CPU operators and user annotations (record_function)" in k["html"]
    assert "ProfilerActivity.CUDA" in k["html"] and "prof.step()" in k["html"]  # Capture again: torch.profiler code
    s = _outputs(tmp_path / "s", make().write(tmp_path / "run.sqlite"))
    assert "Capture: nsys " in s["md"] and "NVTX ranges (top by total time)" in s["html"]
    assert "nsys profile --trace=cuda,nvtx,osrt" in s["html"] and "ui.perfetto.dev" not in s["html"] + s["md"]


@pytest.mark.slow  # issue 50: report commands in processes (6.2 s of CPU); .ci/run runs it
def test_finding_ranges_point_to_a_trace_viewer_in_its_seconds(tmp_path):
    path = launch_bound_small_kernels().write_kineto(tmp_path / "run.pt.trace.json")
    k = _outputs(tmp_path, path)
    assert "Find in the trace viewer (Perfetto, chrome://tracing, TensorBoard)" in k["html"]
    assert "seconds from the trace's start" in k["html"]
    looks = [ln for ln in k["md"].splitlines() if ln.startswith("- *Where to look:*")]
    assert looks and all("ui.perfetto.dev or chrome://tracing" in ln for ln in looks)
    assert "Where to look (finding 1): open the trace in ui.perfetto.dev" in k["terminal"]
    # launch-bound's verify names the viewer; the nsys export's names the GUI
    assert "Open the time range in the trace viewer (ui.perfetto.dev" in k["json"]
    (tmp_path / "s").mkdir()
    s = _outputs(tmp_path / "s", launch_bound_small_kernels().write(tmp_path / "run.sqlite"))
    assert "Open the time range in the Nsight Systems GUI" in s["json"] and "Open in the Nsight Systems GUI" in s["html"]
    assert "Where to look" not in s["md"] + s["terminal"]


def test_viewer_seconds_count_from_the_profiler_span(tmp_path):
    """A trace on a baseTimeNanoseconds clock: the page's seconds are from the profiler's span start,
    where Perfetto and chrome://tracing put 0, not the trace's raw times."""
    from nsysdoc.analysis import analyze
    from nsysdoc.views.render import render_markdown
    from nsysdoc.rules import apply_rules, load_rules
    from nsysdoc.trace import load_trace

    path = launch_bound_small_kernels().write_kineto(tmp_path / "run.pt.trace.json")
    doc = json.loads(path.read_text())
    shift = 3_600_000_000  # µs: move every event an hour later on the trace's clock
    for e in doc["traceEvents"]:
        if isinstance(e.get("ts"), (int, float)):
            e["ts"] = e["ts"] + shift
    doc["baseTimeNanoseconds"] = 1_700_000_000_000_000_000
    path.write_text(json.dumps(doc))
    t = load_trace(path, cache=False)
    spans = [e["ts"] for e in doc["traceEvents"] if e.get("cat") == "Trace"] or \
        [min(e["ts"] for e in doc["traceEvents"] if "ts" in e)]
    assert t.viewer_origin_ns == int(round(min(spans) * 1000))
    a = analyze(t)
    apply_rules(a.to_dict(), load_rules())
    md = render_markdown(a)
    secs = [float(x) for x in re.findall(r"go to (\d+\.\d+) s", md)]
    assert secs and all(0 <= x < 100 for x in secs)  # not 3600 s and more


@pytest.mark.slow  # issue 50: report commands in processes (5.7 s of CPU); .ci/run runs it
def test_kineto_capture_advice_names_torch_profiler_switches(tmp_path):
    path = no_step_markers().write_kineto(tmp_path / "run.pt.trace.json")
    k = _outputs(tmp_path, path)
    _no_nsys_words(k)
    assert "prof.step()" in k["json"]  # capture-quality's fix
    assert "torch.profiler.profile call that wrote the trace" in k["json"]  # capture-quality's verify
    assert "ProfilerStep#N ranges, which prof.step() writes" in k["json"]
    (tmp_path / "s").mkdir()
    s = _outputs(tmp_path / "s", no_step_markers().write(tmp_path / "run.sqlite"))
    assert "Diagnostics Summary of the report in the Nsight Systems GUI" in s["json"]
    assert "torch.cuda.nvtx.range" in s["json"]


@pytest.mark.slow  # issue 50: every scenario as a Kineto trace (3.4 s of CPU); .ci/run runs it
def test_every_scenario_as_kineto_names_no_nsys_switch_in_rule_texts(tmp_path):
    """Every fixture scenario, played as a Kineto trace: the findings' texts name no nsys GUI, nsys
    flag or nsys command (the rules engine fills the Kineto wording)."""
    from nsysdoc.analysis import analyze
    from nsysdoc.rules import apply_rules, load_rules
    from nsysdoc.trace import load_trace

    rules = load_rules()
    for name, make in sorted(SCENARIOS.items()):
        try:
            path = make().write_kineto(tmp_path / f"{name}.pt.trace.json")
        except ValueError:  # several processes in one capture: torch.profiler writes one trace per process
            continue
        r = analyze(load_trace(path, cache=False)).to_dict()
        apply_rules(r, rules)
        for f in r["findings"]:
            text = " ".join(str(f.get(k) or "") for k in ("message", "verify", "fix", "where_note"))
            for phrase in ("Nsight Systems GUI", "Nsight Systems timeline", "--trace=", "--python-backtrace",
                           "nsys stats", "nsys analyze", "nsys memory kind", "--capture-range", "CUDA HW row",
                           "--cpu-sampling", "NVTX (--trace"):
                assert phrase not in text, f"{name}/{f['rule']}: {phrase!r}"


@needs_shared("kineto")
@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name.split(".")[0])
def test_real_kineto_traces_speak_pytorch(tmp_path, path):
    k = _outputs(tmp_path, path)
    _no_nsys_words(k)
    assert "Capture: PyTorch Profiler (Kineto) trace (schemaVersion 1)" in k["md"]
    assert "Where to look:* open the trace in ui.perfetto.dev or chrome://tracing" in k["md"]
    assert "Find in the trace viewer (Perfetto, chrome://tracing, TensorBoard)" in k["html"]
    # both traces have absolute epoch times: the viewer's 0 is the profiler span's start, so the
    # seconds shown lie within the trace's duration (about 0.5 s and 1.1 s)
    secs = [float(x) for x in re.findall(r"go to (\d+\.\d+) s", k["md"])]
    assert secs and all(0 <= x < 2 for x in secs)


def test_report_help_lists_pytorch_profiler_traces():
    p = run_cli("report", "--help")
    assert p.returncode == 0
    text = re.sub(r"[\s│]+", " ", p.stdout)
    assert ".pt.trace.json" in text and "torch.profiler" in text
