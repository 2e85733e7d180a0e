"""The Python API (docs/api.md): the same answers as the commands, typed DataFrames, errors.

* ``to_dict()`` equals the command's JSON for every fixture scenario and every shared trace;
* DataFrame columns and dtypes are exactly the documented ones (parsed from docs/api.md), and a
  hand-computed capture gives hand-computed values;
* bad input raises ``NsysdocError`` whose message is the command's error line;
* ``_repr_html_`` is a compact summary (issue 49), not the page ``to_html()`` returns;
* ``import nsysdoc`` loads no pandas or numpy, and a report loads pandas only for a DataFrame;
* docs/examples/explore.py runs.
"""
from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import nsysdoc
from nsysdoc import api
from nsysdoc.testing import Capture
from nsysdoc.testing.scenarios import SCENARIOS, ddp_job

from .conftest import ROOT, SHARED_TRACES, run_cli
from .conftest import needs_shared  # issue 49

T0 = 1_000_000_000


def _cli_json(*args, cwd=None) -> dict:
    out = Path(args[-1])
    run = run_cli(*args[:-1], "-f", "json", "-o", str(out), "-q", cwd=cwd)
    assert run.returncode in (0, 1), run.stderr
    return json.loads(out.read_text())


# ---------------------------------------------------------------------------------------------
# to_dict() is the CLI's JSON
# ---------------------------------------------------------------------------------------------
#: issue 50: a command per scenario is 0.8-1 s of CPU each; README's command runs these three (one
#: and two GPUs, operators), .ci/run the others (marked slow).
CLI_FAST = ("healthy_training", "ddp_nccl", "operators_forward_backward")


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in CLI_FAST else pytest.mark.slow)
                                  for n in sorted(SCENARIOS)])
def test_to_dict_equals_the_cli_json_for_every_scenario(name, build, tmp_path):
    path = build(name)
    cli = _cli_json("report", str(path), "--no-config", "--no-cache", tmp_path / "cli.json")
    rep = nsysdoc.report(str(path), no_config=True, cache=False)
    assert rep.to_dict() == cli
    assert rep.to_json() == (tmp_path / "cli.json").read_text()


def _shared_inputs() -> list[Path]:
    if not SHARED_TRACES.is_dir():
        return []
    return sorted(SHARED_TRACES.glob("*.sqlite")) + sorted((SHARED_TRACES / "kineto").glob("*.json*"))


@needs_shared()
def test_to_dict_equals_the_cli_json_for_every_shared_trace(tmp_path):
    checked = refused = 0
    for path in _shared_inputs():
        out = tmp_path / f"{path.name}.json"
        run = run_cli("report", str(path), "--no-config", "-f", "json", "-o", str(out), "-q")
        if run.returncode == 2:  # refused by the command: the API raises with the same line
            with pytest.raises(nsysdoc.NsysdocError) as exc:
                nsysdoc.report(str(path), no_config=True)
            assert f"nsysdoc: error: {' '.join(exc.value.message.split())}" in run.stderr
            refused += 1
            continue
        assert run.returncode in (0, 1), run.stderr
        # the command filled the cache: the API reads it, and must still say the same
        assert nsysdoc.report(str(path), no_config=True).to_dict() == json.loads(out.read_text()), path.name
        checked += 1
    assert checked >= 10 and refused >= 1


@pytest.mark.slow  # issue 50: diff and job commands in processes (2.8 s of CPU); .ci/run runs it
def test_diff_and_job_equal_the_cli_json(tmp_path):
    a = SCENARIOS["steady_training"]().write(tmp_path / "a.sqlite")
    b = SCENARIOS["steady_training"](gemm_us=1800).write(tmp_path / "b.sqlite")
    cli = _cli_json("diff", str(a), str(b), "--no-config", "--no-cache", tmp_path / "d.json")
    d = nsysdoc.diff(str(a), str(b), no_config=True, cache=False)
    assert d.to_dict() == cli
    assert d.headline == cli["headline"] and d.verdict == "slower" and d.regression(3.0)
    assert not d.regression(50.0)
    # the same sides as Report objects, and as a saved report + a capture
    ra, rb = (nsysdoc.report(str(p), no_config=True, cache=False) for p in (a, b))
    assert nsysdoc.diff(ra, rb).to_dict() == cli
    saved = tmp_path / "a.json"
    saved.write_text(ra.to_json())
    from_saved = nsysdoc.diff(str(saved), rb).to_dict()
    assert from_saved["step_time_ms_median"] == cli["step_time_ms_median"]
    assert from_saved["verdict"] == cli["verdict"] and from_saved["kernels"] == cli["kernels"]

    ranks = tmp_path / "job"
    ranks.mkdir()
    for r, cap in enumerate(ddp_job(ranks=4, steps=4, slow_rank=2, ranks_per_node=2)):
        cap.write(ranks / f"rank{r}.sqlite")
    cli_job = _cli_json("job", str(ranks), "--no-config", "--no-cache", "-j", "1", tmp_path / "j.json")
    j = nsysdoc.job(str(ranks), jobs=1, no_config=True, cache=False)
    got = j.to_dict()
    got.pop("nsysdoc_version"), cli_job.pop("nsysdoc_version")
    assert got == cli_job
    assert j.straggler is not None and j.straggler["rank"] == 2
    assert list(j.ranks["rank"]) == [0, 1, 2, 3]
    assert j.ranks["step_time_ms_median"].tolist() == [x["step_time_ms_median"] for x in cli_job["ranks"]]
    assert j.ranks["file"].tolist() == [x["file"] for x in cli_job["ranks"]]


# ---------------------------------------------------------------------------------------------
# DataFrames: documented columns and dtypes, hand-computed values
# ---------------------------------------------------------------------------------------------
def _documented_tables() -> dict[str, list[tuple[str, str]]]:
    """docs/api.md: each DataFrame heading (`Report.steps` —) followed by a column table."""
    text = (ROOT / "docs" / "api.md").read_text()
    tables: dict[str, list[tuple[str, str]]] = {}
    for m in re.finditer(r"^`(\w+\.\w+)` —(?:.|\n)*?\n\n\| column \| dtype \| meaning \|\n\|---\|---\|---\|\n"
                         r"((?:\|[^\n]*\|\n)+)", text, flags=re.M):
        rows = [line.split("|")[1:3] for line in m.group(2).splitlines()]
        tables[m.group(1)] = [(c.strip(), d.strip()) for c, d in rows]
    return tables


def test_docs_list_every_dataframe_with_the_code_s_columns():
    docs = _documented_tables()
    code = {"Report.steps": api.STEP_COLUMNS, "Report.kernels": api.KERNEL_COLUMNS,
            "Report.operators": api.OPERATOR_COLUMNS, "Report.devices": api.DEVICE_COLUMNS,
            "Report.gaps": api.GAP_COLUMNS, "Diff.kernels": api.DIFF_KERNEL_COLUMNS,
            "Job.ranks": api.RANK_COLUMNS, "Diff.breakdown": None}
    code.update({"Report.memory": api.MEMORY_COLUMNS, "Report.memory_ops": api.MEMORY_OP_COLUMNS})
    code["Report.operators_by_shape"] = api.OPERATOR_SHAPE_COLUMNS  # issue 47
    code["Report.critical_path"] = api.CRITICAL_PATH_COLUMNS  # issue 48
    code["Report.gpu_ops"] = api.GPU_OP_COLUMNS  # issue 49
    assert set(docs) == set(code)
    for name, cols in code.items():
        if cols is not None:
            assert docs[name] == list(cols), name


def _two_steps() -> Capture:
    cap = Capture()
    t = cap.process(pid=100).thread()
    for i in range(2):
        with t.range(f"ProfilerStep#{i}"):
            t.launch("gemm_kernel", us=100)
            t.launch("relu_kernel", us=20)
            t.cpu(us=200)
    return cap


@pytest.fixture(scope="module")
def hand_report(tmp_path_factory):
    path = _two_steps().write(tmp_path_factory.mktemp("hand") / "hand.sqlite")
    return nsysdoc.report(str(path), no_config=True, cache=False)


def _dtypes(df) -> list[tuple[str, str]]:
    return [(c, str(t)) for c, t in df.dtypes.items()]


def test_dataframes_have_the_documented_columns_and_dtypes(hand_report, tmp_path):
    docs = _documented_tables()
    r = hand_report
    for attr in ("steps", "kernels", "operators", "devices", "gaps", "operators_by_shape"):
        assert _dtypes(getattr(r, attr)) == docs[f"Report.{attr}"], attr
    # an empty table keeps its columns and dtypes
    empty = api._frame([], api.STEP_COLUMNS)
    assert _dtypes(empty) == docs["Report.steps"]
    # each property is a fresh copy: editing it does not change the report
    s = r.steps
    s.loc[:, "step_time_ms"] = -1.0
    assert (r.steps["step_time_ms"] > 0).all()


def test_dataframes_hold_hand_computed_values(hand_report):
    # Builder timing (tests/test_glossary_examples.py): launch(us) at host time a: API [a, a+5 µs],
    # kernel at max(API end, stream free). Step 0 (push at 0): gemm API [0,5000] GPU [5000,105000];
    # relu API [5000,10000] GPU [105000,125000]; cpu 200 µs -> pop at 210000. Step 1 at 210000:
    # gemm GPU [215000,315000], relu [315000,335000], pop at 420000. Window = the steps [0,420000].
    r = hand_report
    st = r.steps
    assert list(st["step"]) == [0, 1] and list(st["name"]) == ["ProfilerStep#0", "ProfilerStep#1"]
    assert list(st["start_ns"]) == [T0, T0 + 210_000] and list(st["end_ns"]) == [T0 + 210_000, T0 + 420_000]
    assert list(st["step_time_ms"]) == [0.21, 0.21] and list(st["kernel_count"]) == [2, 2]
    # step 0: compute 120 µs; idle [0,5000) launch + [125000,210000) launch (a host pause under
    # 1 ms before a launch) = 90 µs. Step 1: compute 120 µs; [210000,215000) launch 5 µs;
    # [335000,420000) after the last operation: tail 85 µs.
    assert list(st["compute_ms"]) == [0.12, 0.12]
    assert list(st["idle_launch_ms"]) == [0.09, 0.005] and list(st["idle_tail_ms"]) == [0.0, 0.085]
    parts = [f"{p}_ms" for p in api.STEP_PARTS]
    assert st[parts].sum(axis=1).round(6).tolist() == [0.21, 0.21]
    k = r.kernels
    assert k[["name", "count", "total_ms", "mean_us"]].values.tolist() == [
        ["gemm_kernel", 2, 0.2, 100.0], ["relu_kernel", 2, 0.04, 20.0]]
    assert k["share_of_kernel_time_pct"].tolist() == [83.3333, 16.6667]  # 0.2 / 0.24, 0.04 / 0.24
    (dev,) = r.devices.to_dict("records")
    # busy = union [5000,125000] + [215000,335000] = 240 µs of 420 µs = 57.1429 %
    assert dev["busy_ms"] == 0.24 and dev["busy_pct"] == 57.1429 and dev["idle_pct"] == 42.8571
    assert dev["kernel_count"] == 4 and dev["gap_count"] == 3
    assert dev["idle_launch_ms"] == 0.095 and dev["idle_tail_ms"] == 0.085
    g = r.gaps  # longest first: 90 µs launch, 85 µs tail, 5 µs launch
    assert g["duration_ms"].tolist() == [0.09, 0.085, 0.005]
    assert g["cause"].tolist() == ["launch", "tail", "launch"]
    assert g["start_ns"].tolist() == [T0 + 125_000, T0 + 335_000, T0]
    assert g["launch_ms"].tolist() == [0.09, 0.0, 0.005] and g["pid"].isna().tolist() == [False, True, False]


def test_kernels_frame_holds_every_name_beyond_the_json_top(tmp_path):
    cap = Capture()
    t = cap.process(pid=1).thread()
    for i in range(60):  # 60 distinct kernels, the JSON keeps the top 50 by total time
        t.launch(f"k{i:02d}_kernel", us=10 + i)
    r = nsysdoc.report(str(cap.write(tmp_path / "many.sqlite")), no_config=True, cache=False)
    by_name = r.to_dict()["metrics"]["kernels"]["by_name"]
    assert len(by_name) == 50 and len(r.kernels) == 60
    # NaN in the frame where the JSON has null (the GPU-metrics counters of a capture without them)
    assert [{k: None if v != v else v for k, v in row.items()} for row in r.kernels.head(50).to_dict("records")] \
        == by_name
    assert r.kernels["name"].iloc[-1] == "k00_kernel"


# ---------------------------------------------------------------------------------------------
# renderings, findings, repr
# ---------------------------------------------------------------------------------------------
def test_repr_html_is_a_compact_summary_not_the_page(hand_report):
    """Issue 49: a notebook display is the verdict, key numbers and findings (a few KB), not the
    whole page per display (tests/test_api_scripts.py checks escaping and caps)."""
    page = hand_report.to_html()
    shown = hand_report._repr_html_()
    assert html.escape(hand_report.verdict) in shown and "report.to_html()" in shown
    assert len(shown) < 20_000 < len(page) and "<iframe" not in shown and "<script" not in shown
    assert page.startswith("<!DOCTYPE html>") and "Content-Security-Policy" in page


def test_findings_and_renderings_match_the_result(build):
    r = nsysdoc.report(str(build("sample_training")), no_config=True, cache=False)
    d = r.to_dict()
    assert [f.rule for f in r.findings] == [f["rule"] for f in d["findings"]]
    f = r.findings[0]
    assert (f.severity, f.impact_ms_per_step, f.message) == (
        d["findings"][0]["severity"], d["findings"][0]["impact_ms_per_step"], d["findings"][0]["message"])
    assert r.verdict == d["verdict"]["sentence"] and r.headline == d["verdict"]["headline"]
    assert r.fails("warning") and not r.fails("never")
    with pytest.raises(nsysdoc.NsysdocError):
        r.fails("severe")
    assert r.to_markdown().startswith("#") and r.verdict.split(":")[0] in r.summary_text()
    assert "Report sample_training.sqlite" in repr(r)


# ---------------------------------------------------------------------------------------------
# errors: NsysdocError with the command's line
# ---------------------------------------------------------------------------------------------
def _bad_inputs(tmp: Path) -> dict[str, Path]:
    text = tmp / "notes.sqlite"
    text.write_text("not a database\n")
    empty_dir = tmp / "empty"
    empty_dir.mkdir()
    import sqlite3

    other = tmp / "other.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    return {"missing": tmp / "missing.sqlite", "not sqlite": text, "not nsys": other, "empty folder": empty_dir}


@pytest.mark.slow  # issue 50: report commands in processes (2 s of CPU); .ci/run runs it
def test_bad_input_raises_nsysdoc_error_with_the_cli_line(tmp_path):
    for what, path in _bad_inputs(tmp_path).items():
        with pytest.raises(nsysdoc.NsysdocError) as exc:
            nsysdoc.report(str(path), no_config=True)
        run = run_cli("report", str(path), "--no-config", "-f", "json", "-o", str(tmp_path / "o.json"))
        assert run.returncode == 2, what
        assert f"nsysdoc: error: {exc.value.message}" in run.stderr, (what, exc.value.message, run.stderr)


def test_bad_options_raise_nsysdoc_error(tmp_path, build):
    good = str(build("healthy_training"))
    bad_rules = tmp_path / "rules"
    bad_rules.mkdir()
    (bad_rules / "x.yaml").write_text("id: [unclosed\n")
    cases = [
        lambda: nsysdoc.report(good, rules=[bad_rules], no_config=True),
        lambda: nsysdoc.report(good, step_marker="(", no_config=True, cache=False),
        lambda: nsysdoc.report(42),
        lambda: nsysdoc.reports([str(tmp_path / "nope.sqlite")]),
        lambda: nsysdoc.diff(good, str(tmp_path / "nope.sqlite"), no_config=True, cache=False),
        lambda: nsysdoc.diff({"a": 1}, good),
        lambda: nsysdoc.job([str(tmp_path / "nope.sqlite")], no_config=True),
        lambda: nsysdoc.job([good], jobs=0),
    ]
    for i, call in enumerate(cases):
        with pytest.raises(nsysdoc.NsysdocError) as exc:
            call()
        assert exc.value.message and "\n" not in exc.value.message, i


def test_a_folder_of_several_captures_names_reports(tmp_path, build):
    folder = tmp_path / "runs"
    folder.mkdir()
    for name in ("healthy_training", "sync_storm"):
        SCENARIOS[name]().write(folder / f"{name}.sqlite")
    with pytest.raises(nsysdoc.NsysdocError, match="holds 2 captures") as exc:
        nsysdoc.report(str(folder), no_config=True)
    assert "nsysdoc.reports()" in exc.value.hint
    reps = nsysdoc.reports(str(folder), no_config=True, cache=False)
    assert [Path(r.path).name for r in reps] == ["healthy_training.sqlite", "sync_storm.sqlite"]


# ---------------------------------------------------------------------------------------------
# light import, the example notebook
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow  # issue 50: imports in a fresh process (1.3 s of CPU); .ci/run runs it
def test_import_is_light_and_pandas_waits_for_a_dataframe():
    sample = ROOT / "nsysdoc" / "sample" / "sample_training.sqlite"
    code = (
        "import sys, nsysdoc\n"
        "assert not [m for m in sys.modules if m.split('.')[0] in ('pandas', 'numpy', 'pyarrow', 'jinja2')], "
        "sorted(sys.modules)\n"
        f"r = nsysdoc.report({str(sample)!r}, no_config=True, cache=False)\n"
        "r.to_html(); r.to_json(); r.findings\n"
        "assert 'pandas' not in sys.modules\n"
        "r.steps\n"
        "assert 'pandas' in sys.modules\n"
        "print('OK', sorted(nsysdoc.__all__) == sorted(['report', 'reports', 'diff', 'job', 'Report', 'Finding', "
        "'Diff', 'Job', 'NsysdocError', 'API_VERSION', '__version__']))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "OK True"


@pytest.mark.slow  # issue 50: the example notebook in a process (1.3 s of CPU); .ci/run runs it
def test_the_example_notebook_runs(tmp_path):
    run = subprocess.run([sys.executable, str(ROOT / "docs" / "examples" / "explore.py")], capture_output=True,
                         text=True, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "Main bottleneck: The GPU waits for input data" in out
    assert "Slower: 17.6% more time per step (strong evidence)" in out
    assert "regression over 3%: True" in out and "refused: no-such-capture.sqlite" in out


# --- the JSON text ---------------------------------------------------------------------------
def _random_text(rnd) -> str:
    # astral, BMP, lone surrogates (Python's "surrogateescape" file names: run\udcff.sqlite),
    # control characters, quotes and backslashes
    pool = ["a", "Z", " ", "\"", "\\", "/", "\n", "\t", "\x00", "\x1f", "\x7f", "\u00e9", "\u2028", "\ufeff",
            "\U0001f600", "\udcff", "\ud800", "\udfff", "\u4e2d"]
    return "".join(rnd.choice(pool) for _ in range(rnd.randrange(0, 8)))


def _random_leaf(rnd):
    kind = rnd.randrange(7)
    if kind == 0:
        return rnd.choice([None, True, False])
    if kind == 1:
        return rnd.randint(-2**70, 2**70)
    if kind == 2:
        return rnd.choice([0.0, -0.0, 1e-7, 1.5e-300, 1e22, 2.5, -3.75, 1 / 3, 5e-324, 1.7976931348623157e308])
    if kind == 3:
        return rnd.uniform(-1e6, 1e6)
    return _random_text(rnd)


def _random_doc(rnd, depth: int = 0):
    if depth > 3 or rnd.random() < 0.35:
        return _random_leaf(rnd)
    if rnd.random() < 0.5:
        return [_random_doc(rnd, depth + 1) for _ in range(rnd.randrange(0, 4))]
    return {_random_text(rnd): _random_doc(rnd, depth + 1) for _ in range(rnd.randrange(0, 4))}


def test_json_text_is_the_standard_library_s_indented_text():
    """The fast writer is a speed-up, not a new format: 500 generated documents (astral and
    lone-surrogate text, control characters, big integers, -0.0, tiny and huge floats, empty
    containers at any depth) come out exactly as ``json.dumps(indent=2)`` writes them."""
    import random

    rnd = random.Random(33)
    for _ in range(500):
        doc = {"d": _random_doc(rnd)}
        assert api._json_text(doc) == json.dumps(doc, indent=2, allow_nan=False) + "\n"


def test_json_text_of_a_lone_surrogate_is_the_standard_library_s():
    doc = {"source": {"path": "run\udcff.sqlite"}, "x": ["\ud83d", 1.5]}
    assert api._json_text(doc) == json.dumps(doc, indent=2, allow_nan=False) + "\n"


def test_json_text_still_refuses_nan():
    with pytest.raises(ValueError):
        api._json_text({"a": [1.0, float("nan")]})


def test_critical_path_frame_has_the_documented_dtypes(hand_report):
    """Issue 48: ``Report.critical_path`` of the two-step capture: one row per step with the
    documented columns and dtypes."""
    df = hand_report.critical_path
    assert _dtypes(df) == _documented_tables()["Report.critical_path"]
    assert df["step"].tolist() == [0, 1]
