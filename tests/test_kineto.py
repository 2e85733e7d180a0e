"""PyTorch Profiler (Kineto) traces as a second input (issue 14): the same diagnosis as nsys.

1. Every builder scenario written both ways (``Capture.write`` and ``Capture.write_kineto``) gives
   the same summary and the same fired findings; what Kineto cannot record is skipped, with the
   reason, never passed.
2. The two real traces in ``../shared/traces/kineto`` (old and new category names): kernel and
   step counts and GPU busy % against an independent computation straight over the JSON.
3. Refusals: not JSON, JSON but not a trace, truncated gzip, empty trace -> one error line, exit 2.
4. ``diff`` and ``job`` over Kineto traces, end to end.
"""
from __future__ import annotations

import gzip
import json
import re

import numpy as np
import pytest

from nsysdoc.errors import CorruptFileError, InputError
from nsysdoc.inputs import expand_inputs
from nsysdoc.rules import apply_rules, load_rules
from nsysdoc.testing.scenarios import SCENARIOS, ddp_job, healthy_training, steady_training
from nsysdoc.trace import load_trace
from nsysdoc.trace import tables as F
from nsysdoc.trace import kineto as K
from nsysdoc.trace.cache_entry import wait_for_cache_writes

from .conftest import SHARED_TRACES, diagnose_path, run_cli
from .conftest import needs_shared, skip_without_shared  # issue 49

KINETO_DIR = SHARED_TRACES / "kineto"
NOT_RECORDED = "not recorded by the PyTorch Profiler"
#: Scenarios a single Kineto trace cannot express, and why.
CANNOT_EXPRESS = {
    "ddp_nccl": "one capture holding two processes (two ranks): torch.profiler writes one trace per process, "
                "so the ranks are per-file traces (test_job_over_two_ranks_takes_ranks_from_distributed_info)",
}
#: scenarios also written in the old (PyTorch 1.8-1.12) form: integer microseconds, Kernel/Runtime/Operator
OLD_FORM = ("healthy_training", "sample_training", "seed_case_augmentation", "allocator_churn")


def _fired(result: dict) -> dict[str, dict]:
    return {f["rule"]: f for f in result["findings"]}


def _status(result: dict) -> dict[str, dict]:
    return {r["rule"]: r for r in result["rules"]}


# ---------------------------------------------------------------------------------------------
# 1. the same scenario, two input forms
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def both_forms(tmp_path_factory):
    d = tmp_path_factory.mktemp("kineto-scenarios")
    out = {}
    for name, make in SCENARIOS.items():
        if name in CANNOT_EXPRESS:
            continue
        cap = make()
        forms = {"sqlite": diagnose_path(cap.write(d / f"{name}.sqlite")),
                 "new": diagnose_path(cap.write_kineto(d / f"{name}.pt.trace.json.gz"))}
        if name in OLD_FORM:
            forms["old"] = diagnose_path(cap.write_kineto(d / f"{name}_old.pt.trace.json", form="old"))
        out[name] = forms
    return out


def _ops_in_window(result: dict) -> int:
    return sum(dev["kernel_count"] + dev["copy_count"] for dev in result["devices"])


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_summary_agrees_between_sqlite_and_kineto(both_forms, name):
    if name in CANNOT_EXPRESS:
        pytest.skip(CANNOT_EXPRESS[name])
    forms = both_forms[name]
    a = forms["sqlite"]
    for form, b in forms.items():
        if form == "sqlite":
            continue
        assert b["source"]["tool"] == "pytorch-profiler" and a["source"]["tool"] == "nsys"
        sa, sb = a["summary"], b["summary"]
        for key in ("step_count", "kernel_count", "kernels_per_step_median"):
            assert sb[key] == sa[key], (form, key)
        if form == "new":
            # PyTorch >= 2.0 writes nanoseconds ("{}.{:03}" microseconds): the numbers are the same
            tol_busy, tol_step = 1e-4, 1e-4
        else:
            # old traces store whole microseconds (truncated): every start and end moves by < 1 µs, so
            # each operation's share of the busy union by < 2 µs, and a step time by < 2 µs
            window_us = a["capture"]["window"]["duration_ms"] * 1000
            tol_busy = 100 * 2 * (_ops_in_window(a) + 1) / window_us
            tol_step = 0.002
        if sa["gpu_busy_pct"] is None:
            assert sb["gpu_busy_pct"] is None
        else:
            assert sb["gpu_busy_pct"] == pytest.approx(sa["gpu_busy_pct"], abs=tol_busy), form
        if sa["step_time_ms_median"] is None:
            assert sb["step_time_ms_median"] is None
        else:
            assert sb["step_time_ms_median"] == pytest.approx(sa["step_time_ms_median"], abs=tol_step), form
        # the device list holds only GPUs that ran work, though deviceProperties lists two more
        assert [dev["label"] for dev in b["devices"]] == [dev["label"] for dev in a["devices"]]
        assert [dev["compute_capability"] for dev in b["devices"]] == [dev["compute_capability"] for dev in a["devices"]]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_findings_agree_and_what_kineto_cannot_record_is_skipped(both_forms, name):
    if name in CANNOT_EXPRESS:
        pytest.skip(CANNOT_EXPRESS[name])
    forms = both_forms[name]
    a = forms["sqlite"]
    fa = _fired(a)
    for form, b in forms.items():
        if form == "sqlite":
            continue
        fb, sb = _fired(b), _status(b)
        # a rule that fired on the nsys export but not here was skipped because Kineto cannot record its data
        for rule in set(fa) - set(fb):
            assert sb[rule]["status"] == "skipped" and NOT_RECORDED in sb[rule]["reason"], (form, rule, sb[rule])
        # the only finding Kineto adds says what it does not record
        for rule in set(fb) - set(fa):
            assert rule == "capture-quality", (form, rule)
            assert "OS runtime calls" in fb[rule]["message"] and NOT_RECORDED in fb[rule]["message"]
        for rule in set(fa) & set(fb):
            assert fb[rule]["severity"] == fa[rule]["severity"], (form, rule)
            if form == "new" and fa[rule]["impact_ms"] is not None:
                assert fb[rule]["impact_ms"] == pytest.approx(fa[rule]["impact_ms"], abs=1e-3), (form, rule)
        # never "passed" on data the trace cannot hold
        assert sb["pseudo-busy"]["status"] == "skipped" and "GPU metrics" in sb["pseudo-busy"]["reason"]
        assert b["capture"]["traced"]["osrt"] is False and b["capture"]["traced"]["gpu_metrics"] is False
        assert {n["kind"] for n in b["capture"]["not_recorded"]} >= {"osrt", "gpu_metrics"}
        if b["verdict"]["status"] != "too-little-work":
            assert b["verdict"]["headline"] == a["verdict"]["headline"], form


def test_the_pseudo_busy_scenario_fires_on_nsys_and_is_skipped_on_kineto(both_forms):
    """The one scenario whose diagnosis needs GPU metrics: proof that the skip above is exercised."""
    forms = both_forms["pseudo_busy"]
    assert "pseudo-busy" in _fired(forms["sqlite"])
    st = _status(forms["new"])["pseudo-busy"]
    assert st["status"] == "skipped" and st["reason"].startswith("needs GPU metrics") and NOT_RECORDED in st["reason"]


def test_rules_needing_os_runtime_are_skipped_with_the_reason(tmp_path):
    team = tmp_path / "team"
    team.mkdir()
    (team / "os-waits.yaml").write_text(
        "id: os-waits\ntitle: OS waits\ncategory: input-pipeline\nsummary: any OS wait time.\n"
        "requires: [osrt]\nwhen: idle_input_ms >= 0\nseverity: info\nmessage: waits.\nverify: look.\nfix: fix.\n",
        encoding="utf-8")
    rules = load_rules([team])
    cap = healthy_training()  # its main thread polls in the DataLoader: an OSRT table on the nsys side
    sq = apply_rules(diagnose_path(cap.write(tmp_path / "h.sqlite")), rules)
    kt = apply_rules(diagnose_path(cap.write_kineto(tmp_path / "h.pt.trace.json")), rules)
    assert _status(sq)["os-waits"]["status"] == "fired"
    st = _status(kt)["os-waits"]
    assert st["status"] == "skipped"
    assert st["reason"] == f"needs OS runtime calls (poll, futex, read, ...); {NOT_RECORDED}"
    # and the capture section says which tool made the trace and what it did not record
    assert any("OS runtime calls" in w and "PyTorch Profiler" in w for w in kt["capture"]["warnings"])


@pytest.mark.slow  # issue 50: report commands in processes (1.9 s of CPU); .ci/run runs it
def test_the_page_says_which_tool_made_the_trace(tmp_path):
    path = healthy_training().write_kineto(tmp_path / "h.pt.trace.json")
    p = run_cli("report", path, "-o", tmp_path / "h.html", "-q", "--no-config", "--no-cache")
    assert p.returncode == 0, p.stderr
    page = (tmp_path / "h.html").read_text(encoding="utf-8")
    assert "<dt>made by</dt><dd>PyTorch Profiler (Kineto) trace, schemaVersion 1</dd>" in page
    assert "What the PyTorch Profiler does not record" in page and "OS runtime calls (poll, futex, read, ...)" in page
    sq = healthy_training().write(tmp_path / "h.sqlite")
    run_cli("report", sq, "-o", tmp_path / "s.html", "-q", "--no-config", "--no-cache")
    page = (tmp_path / "s.html").read_text(encoding="utf-8")
    assert "<dt>made by</dt><dd>Nsight Systems</dd>" in page and "does not record" not in page


def test_evidence_that_differs_by_source_is_said_in_the_finding(both_forms):
    a, b = both_forms["dataloader_starvation"]["sqlite"], both_forms["dataloader_starvation"]["new"]
    assert "OS runtime calls were not recorded" not in _fired(a)["data-starvation"]["message"]
    assert "OS runtime calls were not recorded in this capture, so input waits are seen only inside DataLoader " \
           "ranges" in _fired(b)["data-starvation"]["message"]


def test_frames_are_exactly_the_nsys_loaders(tmp_path):
    path = healthy_training().write_kineto(tmp_path / "h.pt.trace.json.gz")
    fresh = load_trace(path, cache_dir=tmp_path / "cache")
    wait_for_cache_writes()
    again = load_trace(path, cache_dir=tmp_path / "cache")
    assert not fresh.from_cache and again.from_cache and again.source_tool == "pytorch-profiler"
    for name, cols in F.FRAME_COLUMNS.items():
        assert tuple(getattr(fresh, name).columns) == cols, name
        assert tuple(getattr(again, name).columns) == cols, name
        for c in cols:
            assert getattr(again, name)[c].tolist() == getattr(fresh, name)[c].tolist(), (name, c)
    assert again.traced == fresh.traced and again.not_recorded == fresh.not_recorded
    assert fresh.session_start_utc_ns == healthy_training().utc_epoch_ns  # baseTimeNanoseconds


# ---------------------------------------------------------------------------------------------
# 2. the real traces, against an independent computation over the JSON
# ---------------------------------------------------------------------------------------------
REAL = {"hta_a100_rank3of8.pt.trace.json.gz": {"steps": 6, "kernels": 8568, "rank": 3},
        "kineto_resnet50_v100_oldformat.pt.trace.json.gz": {"steps": 6, "kernels": 8772, "rank": None}}


def _independent(path) -> dict:
    """Straight from the JSON, per the glossary: steps are ProfilerStep#N ranges; a GPU operation
    belongs to the step in which its launch call (same correlation id) starts; a step ends at the
    later of its range end and the end of its last GPU operation; the window runs from the first
    step start to the last step end; GPU busy = |union of kernel, memcpy and memset intervals on the
    device, clipped to the window| / window."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    events = doc["traceEvents"]
    # these traces hold whole microseconds since the epoch (ints: a float would lose nanoseconds)
    ns = lambda v: v * 1000 if isinstance(v, int) else int(round(v * 1000))  # noqa: E731
    launch = {e["args"]["correlation"]: ns(e["ts"]) for e in events
              if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "Runtime") and "correlation" in e.get("args", {})}
    ops = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["args"]["device"], e["args"].get("correlation"), e["cat"])
           for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel", "gpu_memcpy", "Memcpy",
                                                                          "gpu_memset", "Memset")]
    steps = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in events
                   if e.get("ph") == "X" and re.fullmatch(r"ProfilerStep#\d+", str(e.get("name"))))
    ends = []
    for s, e in steps:
        inside = [oe for (os_, oe, _, c, _) in ops if s <= launch.get(c, os_) < e]
        ends.append(max([e] + inside))
    w0, w1 = steps[0][0], max(ends)
    devices = {d for (_, _, d, _, _) in ops}
    busy = {}
    for dev in devices:
        iv = sorted((max(s, w0), min(e, w1)) for (s, e, d, _, _) in ops if d == dev and min(e, w1) > max(s, w0))
        total, cur_s, cur_e = 0, None, None
        for s, e in iv:
            if cur_e is None or s > cur_e:
                total += (cur_e - cur_s) if cur_e is not None else 0
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        total += (cur_e - cur_s) if cur_e is not None else 0
        busy[dev] = total / (w1 - w0) * 100
    kernels = [o for o in ops if o[4] in ("kernel", "Kernel")]
    return {"kernels": len(kernels), "kernels_in_window": sum(w0 <= s < w1 for (s, *_rest) in kernels),
            "steps": len(steps), "busy_pct": float(np.mean(list(busy.values()))), "devices": devices,
            "listed_gpus": len(doc["deviceProperties"]), "window_ms": (w1 - w0) / 1e6}


@needs_shared()
@pytest.mark.parametrize("name", sorted(REAL))
def test_real_kineto_trace_against_an_independent_computation(name):
    path = KINETO_DIR / name
    skip_without_shared("kineto/" + name)
    truth = _independent(path)
    assert truth["kernels"] == REAL[name]["kernels"] and truth["steps"] == REAL[name]["steps"]
    trace = load_trace(path, cache=False)
    assert len(trace.kernels) == truth["kernels"]
    r = diagnose_path(path)
    s = r["summary"]
    assert s["step_count"] == truth["steps"]
    assert s["kernel_count"] == truth["kernels_in_window"]
    assert r["capture"]["window"]["duration_ms"] == pytest.approx(truth["window_ms"], abs=1e-6)
    assert s["gpu_busy_pct"] == pytest.approx(truth["busy_pct"], abs=1e-3)
    # several GPUs listed in deviceProperties, work on one: busy is that GPU's, not a mean over all
    assert truth["listed_gpus"] > 1 and len(truth["devices"]) == 1
    assert r["capture"]["device_count"] == 1 and len(r["devices"]) == 1
    assert r["devices"][0]["label"] == str(next(iter(truth["devices"])))
    assert r["source"]["tool"] == "pytorch-profiler"
    assert (r["capture"]["distributed"] or {}).get("rank") == REAL[name]["rank"]
    assert r["capture"]["dropped_rows"] == []


# ---------------------------------------------------------------------------------------------
# 3. refusals
# ---------------------------------------------------------------------------------------------
def _one_error(p) -> str:
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("nsysdoc: error:")]
    assert len(errors) == 1, p.stderr
    return errors[0]


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory):
    return steady_training(steps=4).write_kineto(tmp_path_factory.mktemp("small") / "s.pt.trace.json.gz")


@pytest.mark.slow  # issue 50: report commands in processes (1.8 s of CPU); .ci/run runs it
def test_refuses_what_is_not_json(tmp_path):
    p = tmp_path / "notes.pt.trace.json"
    p.write_text("this is not JSON\n")
    assert "not JSON" in _one_error(run_cli("report", p, "-f", "json", "--no-config"))
    g = tmp_path / "binary.pt.trace.json.gz"
    g.write_bytes(gzip.compress(b"\x00\x01 not json either"))
    assert "not JSON" in _one_error(run_cli("report", g, "-f", "json", "--no-config"))
    e = tmp_path / "empty.pt.trace.json"
    e.write_bytes(b"")
    assert "file is empty" in _one_error(run_cli("report", e, "-f", "json", "--no-config"))


@pytest.mark.slow  # issue 50: report commands in processes (1.9 s of CPU); .ci/run runs it
def test_refuses_json_that_is_not_a_trace(tmp_path):
    for text in ('{"schemaVersion": 1, "deviceProperties": [], "events": []}', "[1, 2, 3]", '"a string"'):
        p = tmp_path / "x.json"
        p.write_text(text)
        assert "JSON, but not a PyTorch Profiler trace" in _one_error(run_cli("report", p, "-f", "json", "--no-config"))


@pytest.mark.slow  # issue 50: report commands in processes (1.4 s of CPU); .ci/run runs it
def test_refuses_a_truncated_gzip_and_a_truncated_json(tmp_path, small_trace):
    data = small_trace.read_bytes()
    cut = tmp_path / "cut.pt.trace.json.gz"
    cut.write_bytes(data[: len(data) // 2])
    assert "truncated gzip" in _one_error(run_cli("report", cut, "-f", "json", "--no-config"))
    text = gzip.decompress(data)
    half = tmp_path / "half.pt.trace.json"
    half.write_bytes(text[: len(text) // 2])
    assert "truncated JSON" in _one_error(run_cli("report", half, "-f", "json", "--no-config"))


@pytest.mark.slow  # issue 50: report commands in processes (1.3 s of CPU); .ci/run runs it
def test_refuses_an_empty_trace(tmp_path):
    p = tmp_path / "empty.pt.trace.json"
    p.write_text('{"schemaVersion": 1, "deviceProperties": [], "traceEvents": [\n'
                 '{"name": "process_name", "ph": "M", "ts": 0, "pid": 1, "tid": 0, "args": {"name": "python"}}]}')
    assert "empty trace" in _one_error(run_cli("report", p, "-f", "json", "--no-config"))
    p.write_text('{"traceEvents": []}')
    assert "empty trace" in _one_error(run_cli("report", p, "-f", "json", "--no-config"))


def test_refusals_are_input_errors_in_the_library(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"a": 1}')
    with pytest.raises(K.NotATraceError):
        load_trace(p, cache=False)
    p.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "dur": 2} oops')
    with pytest.raises(CorruptFileError, match="damaged trace JSON"):
        load_trace(p, cache=False)
    assert issubclass(K.EmptyTraceError, InputError) and issubclass(K.TruncatedTraceError, InputError)


# ---------------------------------------------------------------------------------------------
# 4. diff and job
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow  # issue 50: diff commands in processes (4.2 s of CPU); .ci/run runs it
def test_diff_of_two_kineto_traces(tmp_path):
    base = steady_training().write_kineto(tmp_path / "base.pt.trace.json")  # plain JSON: told from a report
    cand = steady_training(gemm_us=1650).write_kineto(tmp_path / "cand.pt.trace.json.gz")
    p = run_cli("diff", base, cand, "-f", "json", "--no-config", "--no-cache")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["verdict"] == "slower" and d["per"] == "step"
    st = d["step_time_ms_median"]
    assert st["candidate"] - st["base"] == pytest.approx(1.2, abs=1e-3)  # 8 GEMMs, each 150 µs longer
    # the same pair as nsys exports gives the same numbers
    sq = run_cli("diff", steady_training().write(tmp_path / "base.sqlite"),
                 steady_training(gemm_us=1650).write(tmp_path / "cand.sqlite"), "-f", "json", "--no-config", "--no-cache")
    ds = json.loads(sq.stdout)
    assert st["base"] == ds["step_time_ms_median"]["base"] and st["candidate"] == ds["step_time_ms_median"]["candidate"]
    # a saved report JSON is still a report, not a trace
    saved = tmp_path / "base.nsysdoc.json"
    saved.write_text(run_cli("report", base, "-f", "json", "--no-config").stdout)
    p2 = run_cli("diff", saved, cand, "-f", "json", "--no-config", "--no-cache")
    assert p2.returncode == 0 and json.loads(p2.stdout)["verdict"] == "slower", p2.stderr


@pytest.mark.slow  # issue 50: a job command in a process (1.4 s of CPU); .ci/run runs it
def test_job_over_two_ranks_takes_ranks_from_distributed_info(tmp_path):
    caps = ddp_job(ranks=2, steps=6, slow_rank=1, ranks_per_node=1)
    folder = tmp_path / "prof"
    folder.mkdir()
    # names claim the opposite ranks: the traces' own distributedInfo wins
    for r, cap in enumerate(caps):
        cap.write_kineto(folder / f"rank{1 - r}.pt.trace.json.gz",
                         distributed={"backend": "nccl", "rank": r, "world_size": 2})
    (folder / "job.nsysdoc.json").write_text("{}")  # nsysdoc's own output in the folder is not an input
    p = run_cli("job", folder, "-f", "json", "-q", "--no-config", "--no-cache", "-j", "1")
    assert p.returncode == 0, p.stderr
    j = json.loads(p.stdout)
    assert j["rank_source"] == "distributedInfo" and j["rank_count"] == 2
    by_rank = {r["rank"]: r for r in j["ranks"]}
    assert by_rank[1]["file"].endswith("rank0.pt.trace.json.gz")
    s = j["straggler"]
    assert s is not None and s["rank"] == 1 and s["cause"] == "idle_input"
    assert s["wait_ms_per_step"] == pytest.approx(10.0, abs=1e-3)  # 12 ms vs 2 ms of input per step
    # node clocks: baseTimeNanoseconds is each rank's session start
    assert j["clock"]["method"] == "collective ends"


# ---------------------------------------------------------------------------------------------
# units: times, detection, folders, flows, bad rows
# ---------------------------------------------------------------------------------------------
def test_microseconds_become_exact_nanoseconds():
    assert K.us_to_ns("5203460419.456") == 5203460419456
    assert K.us_to_ns("1684000000000000.123") == 1684000000000000123  # a float64 cannot hold this
    assert K.us_to_ns(1661203462598738) == 1661203462598738000
    assert K.us_to_ns("0.000") == 0 and K.us_to_ns("-0.005") == -5
    assert K.us_to_ns("1.0005") == 1000 and K.us_to_ns("1.0015") == 1002  # half-even to the ns
    assert K.us_to_ns("1e3") == 1_000_000
    for bad in (None, True, "abc", "nan", "inf", [1], 10 ** 30):
        assert K.us_to_ns(bad) == F.BAD
    text = [f"{1_700_000_000_000_000 + i}.{i % 1000:03d}" for i in range(0, 5000, 7)]
    got = [K.us_to_ns(t) for t in text]
    assert got == sorted(got) and len(set(got)) == len(got)


def test_short_kernel_names_are_nsys_like():
    assert K.short_kernel_name("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::"
                               "(anonymous namespace)::TensorListMetadata<4>, float>(int, volatile int*)") \
        == "multi_tensor_apply_kernel"
    assert K.short_kernel_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)") \
        == "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
    assert K.short_kernel_name("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<"
                               "at::native::X>(at::TensorIteratorBase&, X const&)::{lambda(int)#1}>(int, Y)") \
        == "elementwise_kernel"
    assert K.short_kernel_name("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n") == "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n"


def test_detection_sniffs_without_loading(tmp_path, small_trace):
    assert K.is_kineto_trace(small_trace)
    report = tmp_path / "r.nsysdoc.json"
    report.write_text(json.dumps({"nsysdoc_version": "0.1.0", "contract": 2, "source": {}}))
    assert not K.is_kineto_trace(report)
    assert not K.is_kineto_trace(tmp_path)  # a folder
    assert not K.routes_here(tmp_path / "missing.json")  # left to the nsys path's own "no such file"
    db = healthy_training().write(tmp_path / "h.sqlite")
    assert not K.routes_here(db) and not K.is_kineto_trace(db)


def test_folders_pick_traces_and_tensorboard_runs_but_not_reports(tmp_path, small_trace):
    folder = tmp_path / "logs"
    run = folder / "plugins" / "profile" / "2026_01_01"
    run.mkdir(parents=True)
    (folder / "w0.pt.trace.json.gz").write_bytes(small_trace.read_bytes())
    (run / "w1.pt.trace.json").write_bytes(gzip.decompress(small_trace.read_bytes()))
    (folder / "w0.nsysdoc.json").write_text("{}")
    (folder / "other.json").write_text("{}")
    got = [p.replace(str(folder), "") for p in expand_inputs([folder])]
    assert got == ["/plugins/profile/2026_01_01/w1.pt.trace.json", "/w0.pt.trace.json.gz"]


def _strip_correlation(src, dst):
    with gzip.open(src, "rt") as fh:
        doc = json.load(fh)
    for e in doc["traceEvents"]:
        if isinstance(e.get("args"), dict):
            e["args"].pop("correlation", None)
    dst.write_text(json.dumps(doc))
    return dst


def test_ac2g_flows_join_launches_when_correlation_args_are_missing(tmp_path, small_trace):
    plain = diagnose_path(small_trace)
    flows_only = diagnose_path(_strip_correlation(small_trace, tmp_path / "flows.pt.trace.json"))
    assert plain["metrics"]["launch"]["launch_count"] > 0
    assert flows_only["metrics"]["launch"] == plain["metrics"]["launch"]
    assert flows_only["summary"] == plain["summary"]


def test_rows_no_session_can_hold_are_dropped_and_counted(tmp_path, small_trace):
    with gzip.open(small_trace, "rt") as fh:
        doc = json.load(fh)
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    kernels[0]["dur"] = -5
    kernels[1]["ts"] = "soon"
    kernels[2]["args"]["device"] = -1
    bad = tmp_path / "bad.pt.trace.json"
    bad.write_text(json.dumps(doc))
    t = load_trace(bad, cache=False)
    assert len(t.kernels) == len(kernels) - 3
    reasons = {d["reason"]: d["rows"] for d in t.dropped_rows if d["table"] == "kernel"}
    device = [r for r in reasons if r.startswith("deviceId")]  # the nsys loader's own reason text
    assert reasons == {"end before start": 1, "start or end NULL or not an integer": 1, device[0]: 1}


# ---------------------------------------------------------------------------------------------
# 5. the fast paths (pyarrow's JSON reader, and msgspec, a window at a time) read exactly what
#    the slow path reads
# ---------------------------------------------------------------------------------------------
def _read(path, monkeypatch, *, window: int | None = None, mode: str = "arrow"):
    """(the accumulators of ``_parse``, or the refusal it raised; the windows each path read).
    ``mode``: "arrow" (as shipped: pyarrow, else msgspec, else the slow path), "msgspec" (no
    pyarrow), "slow" (the one-event-at-a-time reader alone)."""
    with monkeypatch.context() as m:
        if window is not None:
            m.setattr(K.windows, "FAST_CHARS", window)  # (the window scheduler's settings)
        m.setattr(K.windows, "ARROW", mode == "arrow")
        if mode == "slow":
            def refuse(evs, acc):
                raise ValueError("slow path only")
            m.setattr(K.parse_msgspec, "_chunk", refuse)  # (the msgspec engine's rows)
        try:
            top, acc = K._parse(path)
        except (InputError, CorruptFileError) as exc:
            return f"{type(exc).__name__}: {exc}", None
    cols = lambda d: {k: list(v) for k, v in d.items()}  # noqa: E731
    return {"top": top, "events": acc.events, "ignored": acc.ignored, "names": list(acc.names),
            "threads": list(acc.threads), "gpu": {k: cols(d) for k, d in acc.gpu.items()}, "rt": cols(acc.rt),
            "host": cols(acc.host), "flow_s": cols(acc.flow_s), "flow_f": cols(acc.flow_f), "spans": acc.spans,
            "overhead": acc.overhead, "proc": acc.proc_names, "thread_names": acc.thread_names,
            "kinds": acc.kinds, "launch": acc.launch_codes, "mem": cols(acc.mem)}, acc.paths


def _accumulated(path, monkeypatch, *, window: int | None = None, slow_only: bool = False) -> dict:
    return _read(path, monkeypatch, window=window, mode="slow" if slow_only else "arrow")[0]


@pytest.mark.parametrize("form", ["new", "old"])
def test_fast_and_slow_paths_read_the_same(tmp_path, monkeypatch, form):
    path = healthy_training().write_kineto(tmp_path / f"{form}.json", form=form)
    slow = _accumulated(path, monkeypatch, slow_only=True)
    assert slow["events"] > 100
    for window in (None, 700, 5000):  # small windows: many cuts, each window's last event left to the slow path
        got, paths = _read(path, monkeypatch, window=window)
        assert got == slow
        if form == "new" and window is not None:  # (a window with the span, whose pid is text, is
            assert paths["arrow"] > 0                # msgspec's; the old form mixes number and text tids)
        assert _read(path, monkeypatch, window=window, mode="msgspec")[0] == slow


def test_fast_path_hands_odd_windows_to_the_slow_path(tmp_path, monkeypatch):
    """Values the vectorised columns do not take (times as strings, other decimals, a name with
    '},' in it, unhashable ids, a non-object args, NaN, a huge integer) give the slow path's rows."""
    text = healthy_training().write_kineto(tmp_path / "k.json").read_text()
    odd = [
        '{"ph": "X", "cat": "kernel", "name": "k},\\u000a{x", "pid": 0, "tid": 7, "ts": "12.5", "dur": 1.25, '
        '"args": {"device": "0", "stream": 7.0, "correlation": 99, "grid": [1.0, 1, 1], "block": [32, 1, 1]}}',
        '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": [1], "tid": 2, "ts": 1e3, "dur": 2, '
        '"args": {"Sequence number": 7}}',
        '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 10.0001, '
        '"dur": NaN, "args": "none"}',
        '{"ph": "s", "cat": "ac2g", "id": 99, "pid": 1, "tid": {"a": 1}, "ts": 5.5}',
        '{"ph": "X", "cat": "kernel", "name": 5, "pid": 0, "tid": "stream 9", "ts": ' + "9" * 40 + ', "dur": 1}',
        '{"ph": "M", "cat": "x", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}}',
    ]
    path = _with_events(tmp_path / "odd.json", text, odd)
    slow = _accumulated(path, monkeypatch, slow_only=True)
    for window in (None, 400, 5000):
        assert _accumulated(path, monkeypatch, window=window) == slow
        assert _read(path, monkeypatch, window=window, mode="msgspec")[0] == slow


def _with_events(path, text: str, events: list[str], sep: str = ",\n", after: int = 0):
    """``text`` (a Kineto trace) with ``events`` (JSON texts) in its traceEvents, first or
    ``after`` that many events."""
    i = text.index('"traceEvents": [') + len('"traceEvents": [')
    for _ in range(after):
        i = text.index("},\n", i) + 2
    path.write_text(text[:i] + "\n" + sep.join(events) + sep + text[i:])
    return path


#: events pyarrow reads into other values than the json module, or does not read at all, or
#: reads where the json module refuses: the Arrow path must leave each window holding one to the
#: msgspec (or the slow) path, which give the slow path's rows (or refusal)
ARROW_ODD = {
    "pid as text": '{"ph": "X", "cat": "cpu_op", "name": "aten::a", "pid": "4100", "tid": 4100, "ts": 1.000, "dur": 1.000}',
    "4 decimals": '{"ph": "X", "cat": "cpu_op", "name": "aten::b", "pid": 4100, "tid": 4100, "ts": 1.2345, "dur": 0.0015}',
    "time as text": '{"ph": "X", "cat": "cpu_op", "name": "aten::c", "pid": 4100, "tid": 4100, "ts": "12.5", "dur": "1e3"}',
    "exponents": '{"ph": "X", "cat": "cpu_op", "name": "aten::d", "pid": 4100, "tid": 4100, "ts": 1.5e2, "dur": 0e5}',
    "negative": '{"ph": "X", "cat": "cpu_op", "name": "aten::e", "pid": 4100, "tid": 4100, "ts": -5.250, "dur": -0.0}',
    # over 100 characters: out of range for the slow path; 1500 ns to pyarrow
    "zero-padded time": '{"ph": "X", "cat": "cpu_op", "name": "aten::f", "pid": 4100, "tid": 4100, "ts": 2.000, '
                        '"dur": "' + "0" * 120 + '1.5"}',
    "exponent zeros": '{"ph": "X", "cat": "cpu_op", "name": "aten::g", "pid": 4100, "tid": 4100, "ts": 2.000, '
                      '"dur": 1e' + "0" * 120 + '3}',
    "beyond 2^62 ns": '{"ph": "X", "cat": "cpu_op", "name": "aten::h", "pid": 4100, "tid": 4100, "ts": 4611686018427387.904, '
                      '"dur": 99999999999999999999.999}',
    "device null": '{"ph": "X", "cat": "kernel", "name": "k0", "pid": 0, "tid": 7, "ts": 3.000, "dur": 1.000, '
                   '"args": {"device": null, "stream": 7, "correlation": 5}}',
    "device missing": '{"ph": "X", "cat": "kernel", "name": "k1", "pid": 1, "tid": 7, "ts": 3.000, "dur": 1.000, '
                      '"args": {"stream": 7, "correlation": 6}}',
    "escaped device null": '{"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 3.000, "dur": 1.000, '
                           '"args": {"d\\u0065vice": null, "stream": 7}}',
    "odd launch": '{"ph": "X", "cat": "kernel", "name": "k3", "pid": 0, "tid": 8, "ts": 3.000, "dur": 1.000, '
                  '"args": {"device": 0, "grid": [1, null, 2], "block": [64, 1], "registers per thread": 300, '
                  '"est. achieved occupancy %": 101, "shared memory": -1}}',
    "float grid": '{"ph": "X", "cat": "kernel", "name": "k4", "pid": 0, "tid": 8, "ts": 3.000, "dur": 1.000, '
                  '"args": {"device": 0, "grid": [1.0, 1, 1], "block": [64, 1, 1], "est. achieved occupancy %": 12.5}}',
    "nested },\\n": '{"ph": "X", "cat": "kernel", "args": {"device": 0, "stream": 9},\n "name": "k5", "pid": 0, '
                   '"tid": 9, "ts": 4.000, "dur": 1.000}',
    "duplicate key": '{"ph": "X", "cat": "cpu_op", "cat": "kernel", "name": "k6", "pid": 0, "tid": 9, "ts": 4.000, '
                     '"dur": 1.000, "args": {"device": 0}}',
    "escaped key": '{"ph": "X", "c\\u0061t": "cpu_op", "name": "aten::i", "pid": 4100, "tid": 4100, "ts": 5.000, "dur": 1.000}',
    "NaN ignored": '{"ph": "X", "cat": "cpu_op", "name": "aten::j", "pid": 4100, "tid": 4100, "ts": 5.000, "dur": 1.000, '
                   '"args": {"x": NaN, "y": [Infinity, -Infinity]}}',
    "digit run ignored": '{"ph": "X", "cat": "cpu_op", "name": "aten::k", "pid": 4100, "tid": 4100, "ts": 5.000, '
                         '"dur": 1.000, "args": {"x": ' + "7" * 40 + '}}',
    "nested 600 deep": '{"ph": "X", "cat": "cpu_op", "name": "aten::l", "pid": 4100, "tid": 4100, "ts": 5.000, '
                       '"dur": 1.000, "args": {"x": ' + "[" * 600 + "]" * 600 + '}}',
    "sequence numbers": '{"ph": "X", "cat": "cpu_op", "name": null, "pid": 4100, "tid": 4100, "ts": 6.000, "dur": 1.000, '
                        '"args": {"Sequence number": 3}}',
    "call stack": '{"ph": "X", "cat": "cpu_op", "name": "aten::m", "pid": 4100, "tid": 4100, "ts": 6.000, "dur": 1.000, '
                  '"args": {"Sequence number": -1, "Call stack": "lib/torch/x.py(1): f;train.py(40): <module>"}}',
    "flows": '{"ph": "s", "cat": "ac2g", "id": 0, "pid": 4100, "tid": 4100, "ts": 1.000},\n'
             '{"ph": "f", "cat": "async", "id": 4294967296, "pid": 0, "tid": 7, "ts": 1.000},\n'
             '{"ph": "f", "cat": "ac2g", "id": 77, "pid": 70000, "tid": 7, "ts": 1.000},\n'
             '{"ph": "f", "cat": "ac2g", "id": 78, "pid": 0, "tid": null, "ts": 1.000},\n'
             '{"ph": "s", "cat": "ac2g", "id": 79, "pid": null, "tid": 4100, "ts": 1.000}',
    "metadata": '{"ph": "M", "name": "process_name", "pid": 9, "args": null},\n'
                '{"ph": "M", "name": "thread_name", "pid": 9, "tid": 3, "args": {"name": "t3"}},\n'
                '{"ph": "M", "cat": "x", "name": "process_name", "pid": null, "args": {"name": "p"}}',
    "null event": "null",
    "not objects": '[1, 2],\n"text",\n5',
    "unicode": '{"ph": "X", "cat": "cpu_op", "name": "aten::\\u00e9\\ud83d\\ude00 \u00e9", "pid": 4100, "tid": 4100, '
               '"ts": 7.000, "dur": 1.000}',
    "lone surrogate": '{"ph": "X", "cat": "cpu_op", "name": "aten::\\ud800", "pid": 4100, "tid": 4100, "ts": 7.000, '
                      '"dur": 1.000}',
}
#: the same, where the json module (so the slow path) refuses the whole file
ARROW_REFUSED = {
    "Inf ignored": '{"ph": "X", "cat": "cpu_op", "name": "aten::n", "pid": 4100, "tid": 4100, "ts": 5.000, "dur": 1.000, '
                   '"args": {"x": Inf}}',
    "-NaN ignored": '{"ph": "X", "cat": "cpu_op", "name": "aten::o", "pid": 4100, "tid": 4100, "ts": 5.000, "dur": 1.000, '
                    '"args": {"x": [-NaN]}}',
    "nested 3000 deep": '{"ph": "X", "cat": "cpu_op", "name": "aten::p", "pid": 4100, "tid": 4100, "ts": 5.000, '
                        '"dur": 1.000, "args": {"x": ' + "[" * 3000 + "]" * 3000 + '}}',
    "raw newline in a string": '{"ph": "X", "cat": "cpu_op", "name": "aten::q\nr", "pid": 4100, "tid": 4100, '
                               '"ts": 5.000, "dur": 1.000}',
    "missing comma": '{"ph": "X", "cat": "cpu_op" "name": "aten::s", "pid": 4100, "tid": 4100, "ts": 5.000, "dur": 1.000}',
}


@pytest.mark.parametrize("after", [0, 40])
@pytest.mark.parametrize("name", list(ARROW_ODD) + list(ARROW_REFUSED))
def test_arrow_path_leaves_what_it_cannot_read_exactly_to_the_other_paths(tmp_path, monkeypatch, name, after):
    """Each odd event among ordinary ones (first in the list, where the window also holds the
    span, whose pid is text; and after the first 40 events, among events pyarrow reads), with
    small and large windows: the rows (or the refusal) of the slow path, and the ordinary
    windows still read by pyarrow."""
    text = healthy_training().write_kineto(tmp_path / "k.json").read_text()
    ev = ARROW_ODD.get(name) or ARROW_REFUSED[name]
    path = _with_events(tmp_path / "odd.json", text, [ev], after=after)
    slow = _read(path, monkeypatch, mode="slow")[0]
    assert isinstance(slow, str) == (name in ARROW_REFUSED), slow
    for window in (None, 300, 2000, 8000):
        got, paths = _read(path, monkeypatch, window=window)
        assert got == slow, (name, window)
        if paths is not None and window == 2000:
            assert paths["arrow"] > 0  # the ordinary windows


def test_arrow_guards_refuse_what_pyarrow_reads_otherwise():
    """Windows pyarrow would read where the json module refuses, or reads other values, are
    refused before pyarrow sees them (each alone, so this cannot pass by another check); those
    of other types than the schema's, pyarrow refuses; the rest it reads."""
    ok = b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1.000, "dur": 1.000}'
    for good in (ok, ok + b",\n" + ok):
        assert K._arrow_text(good) is not None and K._arrow_read(good)[0].num_rows == good.count(b"{")
    for bad in (ok + b",\n" + ok.replace(b'"dur"', b'"x": Inf, "dur"'),
                ok.replace(b'"dur"', b'"x": -NaN, "dur"'), ok.replace(b'"dur"', b'"x": [-Inf], "dur"'),
                b"null,\n" + ok, b"  null\n" + ok,  # (pyarrow 26 crashes on a leading null)
                ok.replace(b'"dur": 1.000', b'"dur": "' + b"0" * 120 + b'1.5"'),
                ok.replace(b'"dur": 1.000', b'"dur": 1e' + b"0" * 120 + b"3"),
                ok.replace(b'"dur"', b'"x": ' + b"[" * 600 + b"]" * 600 + b', "dur"'),
                ok.replace(b'"dur"', b'"x": ' + b'{"a": ' * 600 + b"1" + b"}" * 600 + b', "dur"'),
                ok + b",\r\n" + ok,
                ok.replace(b'"dur"', b'"x": [Infinity, -Infinity], "dur"')):  # (taken alike, but refused as Inf is)
        assert K._arrow_text(bad) is None, bad[:120]
    for bad in (ok.replace(b'"ts"', b'"args": {"a": 1},\n"ts"'), ok.replace(b'"ts": 1.000', b'"ts": 1.0001'),
                ok.replace(b'"pid": 1', b'"pid": "1"'), ok.replace(b'"ts"', b'"ph": "X", "ts"'),
                ok.replace(b'"ts": 1.000', b'"ts": true'), ok.replace(b'"ts": 1.000', b'"ts": " 1.5"')):
        assert K._arrow_text(bad) is not None and K._arrow_read(bad) is None, bad[:120]
    # what the json module takes alike stays with pyarrow: names with Inf and NaN in them, NaN as
    # an (ignored) value, long events with few brackets, 17-digit doubles
    for good in (ok.replace(b'"a"', b'"cudaStreamGetCaptureInfo NaN"'), ok.replace(b'"dur"', b'"x": NaN, "dur"'),
                 ok.replace(b'"dur"', b'"x": "' + b"y" * 5000 + b'", "dur"'),
                 ok.replace(b'"dur"', b'"bw": 0.20512820512820512, "dur"'),
                 ok.replace(b'"dur"', b'"x": ' + b"[" * 100 + b"]" * 100 + b', "dur"')):
        assert K._arrow_read(good) is not None, good[:120]
    # the events before one of another type are pyarrow's, the rest msgspec's
    table, tid, end = K._arrow_read(ok + b",\n" + ok + b",\n" + ok.replace(b'"pid": 1', b'"pid": "1"') + b",\n" + ok)
    assert table.num_rows == 2 and end == 2 * len(ok) + 2


@pytest.mark.slow  # issue 50: many mutated windows read twice (1.3 s of CPU); .ci/run runs it
def test_arrow_path_reads_the_same_on_mutated_windows(tmp_path, monkeypatch):
    """Random edits of a trace's events (tokens inserted, bytes deleted or changed, pieces
    copied): the Arrow path gives what the slow path gives, rows or refusal, every time."""
    import random

    text = healthy_training().write_kineto(tmp_path / "k.json").read_text()
    i = text.index('"traceEvents": [') + len('"traceEvents": [')
    head, events = text[:i], text[i:]
    tokens = ["null", "[", "]", "{", "}", ",", "\n", "NaN", "-Inf", "\\u00e9", '"', ":", "0", "-", "1e5", "true",
              "},\n", '"args": 5', '"grid": [1, 2]', '"ts": "1.5"', '"pid": "x"', '"device": null', "1.2345"]
    rng = random.Random(33)
    path = tmp_path / "m.json"
    arrow_windows = 0
    for _ in range(60):
        b = list(events[:6000])
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(b))
            op = rng.random()
            if op < 0.3:
                del b[at:at + rng.randint(1, 10)]
            elif op < 0.8:
                b[at:at] = rng.choice(tokens)
            else:
                b[at:at] = b[rng.randrange(len(b)):][:rng.randint(1, 80)]
        path.write_text(head + "".join(b) + events[6000:])
        slow = _read(path, monkeypatch, mode="slow")[0]
        got, paths = _read(path, monkeypatch, window=900)
        assert got == slow
        arrow_windows += paths["arrow"] if paths else 0
    assert arrow_windows > 0


def test_thread_numbers_match_numbering_each_pid_tid_tuple():
    from types import SimpleNamespace as Ev

    rng = np.random.default_rng(3)
    cases = [[Ev(pid=int(p), tid=int(t)) for p, t in zip(rng.integers(-3, 3, 300), rng.integers(-5, 1 << 40, 300) % 7)],
             [Ev(pid=1, tid=1 << 70), Ev(pid=1, tid=2), Ev(pid=1, tid=1 << 70)],  # beyond 64 bits
             [Ev(pid=True, tid=1), Ev(pid=1, tid=1), Ev(pid="Spans", tid="x")],  # not all ints
             []]
    for evs in cases:
        for known in ({}, {(1, 2): 0, (0, 0): 1}):
            a, b = dict(known), dict(known)
            got = K._thread_numbers(a, evs)
            want = K._numbered(b, [(e.pid, e.tid) for e in evs])
            assert got.tolist() == want.tolist() and list(a) == list(b) and list(a.values()) == list(b.values())
