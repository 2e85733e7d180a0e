"""The public face (issue 51): one options object through the pipeline, the command line through
the public API only, one resolver of what a path holds, the assembly reading the engine's run
once, one findings table for the notebook's summaries.

Every expected value below is written by hand from the definitions in the docstrings it names."""
from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

import nsysdoc
from nsysdoc import api, formats, pipeline
from nsysdoc.errors import NsysdocError, UsageError
from nsysdoc.options import DEFAULT_OPTIONS, ReportOptions, options_of

ROOT = Path(__file__).resolve().parents[1]


# --- one options object -----------------------------------------------------------------------
def test_the_job_fields_are_the_workers_plain_keys_and_come_back_whole():
    """``job_fields``: ``no_cache`` is ``not cache``, the cache folder a string, no callback (a
    worker process gets a pickle, a Dask worker too)."""
    o = ReportOptions(step_marker="train.*", cache=False, cache_dir=Path("/c"), nsys="/opt/nsys",
                      progress=print)
    assert o.job_fields() == {"step_marker": "train.*", "no_cache": True, "cache_dir": "/c", "nsys": "/opt/nsys"}
    back = ReportOptions.from_job_fields(o.job_fields())
    assert back == ReportOptions(step_marker="train.*", cache=False, cache_dir="/c", nsys="/opt/nsys")
    assert ReportOptions.from_job_fields({}) == DEFAULT_OPTIONS
    assert ReportOptions.from_job_fields({"no_cache": False, "cache_dir": None}).cache is True


def test_fields_named_as_keywords_replace_those_of_the_options():
    base = ReportOptions(step_marker="s", cache=False)
    assert options_of(None) is DEFAULT_OPTIONS
    assert options_of(base) is base
    assert options_of(base, cache=True) == ReportOptions(step_marker="s", cache=True)
    assert options_of(None, nsys="n") == ReportOptions(nsys="n")
    with pytest.raises(TypeError):
        options_of(None, stepmarker="typo")  # a misspelt field is the caller's bug, not an option
    with pytest.raises(Exception):
        base.cache = True  # frozen: one object, read by every layer, changed by none


def test_the_api_builds_one_options_object_from_its_keywords_and_hands_it_down(tmp_path, monkeypatch):
    """``nsysdoc.report(path, step_marker=..., cache=..., cache_dir=..., nsys=..., progress=...)``
    (keywords unchanged) reaches ``pipeline.diagnose`` as one ReportOptions with exactly those
    values; ``diff`` hands the same object to both sides."""
    seen = []

    class Stop(Exception):
        pass

    def fake_diagnose(path, ruleset, options=None, **fields):
        seen.append((Path(path).name, options, fields))
        raise Stop

    monkeypatch.setattr(pipeline, "diagnose", fake_diagnose)
    cap = tmp_path / "run.sqlite"
    cap.write_bytes(b"")
    say = []
    with pytest.raises(Stop):
        nsysdoc.report(cap, no_config=True, step_marker="iter.*", cache=False, cache_dir=tmp_path / "c",
                       nsys="/opt/nsys", progress=say.append)
    assert seen == [("run.sqlite", ReportOptions(step_marker="iter.*", cache=False, cache_dir=tmp_path / "c",
                                                 nsys="/opt/nsys", progress=say.append), {})]
    seen.clear()
    with pytest.raises(Stop):
        nsysdoc.diff(cap, cap, no_config=True, step_marker="x")
    assert seen == [("run.sqlite", ReportOptions(step_marker="x"), {})]  # the first side stops it


def test_a_wrong_option_is_one_usage_error_before_any_work(tmp_path):
    cap = tmp_path / "run.sqlite"
    cap.write_bytes(b"")
    with pytest.raises(UsageError, match="step_marker must be a string"):
        api.report_options(step_marker=5)
    with pytest.raises(UsageError, match="progress must be a function"):
        nsysdoc.report(cap, progress=5)
    assert api.report_options(cache=0) == ReportOptions(cache=False)


# --- the command line uses only the public API -------------------------------------------------
#: what the command line may import besides ``nsysdoc.api``: the ground floor, its own option
#: parsing, the terminal and file writers, and the libraries of the commands that are not a run
#: (``cache``, ``rules``, ``capture``'s nsys runner)
CLI_MAY_IMPORT = {"severity", "version", "errors", "cli_params", "outputs", "lazy_pandas", "cache", "nsys",
                  "rules", "rules.docs", "rules.evaluate", "testing.rule_cases", "api"}


def _cli_imports(source: str) -> list[tuple[str, str]]:
    """(module under nsysdoc, name) of every relative import in the command line's source."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            for a in node.names:
                out.append((node.module or "", a.name))
    return out


def test_the_command_line_imports_only_public_api_names():
    """Before issue 51 cli.py imported ``api._report``, ``api._reads_for``, ``pipeline.load_ruleset``
    and ``empty_rule_dirs``, ``inputs.expand_inputs``, ``jobs.ranks``, ``views.index_page`` and
    ``views.perfetto``: each is now a public function of ``nsysdoc.api`` (docs/api.md)."""
    found = _cli_imports((ROOT / "nsysdoc" / "cli.py").read_text())
    assert ("api", "report_file") in found  # the check can see an import
    wrong = [(m, n) for m, n in found if m not in CLI_MAY_IMPORT and m != ""]
    assert not wrong, wrong
    private = [n for m, n in found if m == "api" and (n.startswith("_") or n not in api.__all__)]
    assert not private, private


def test_the_cli_check_refuses_what_cli_py_imported_before():
    old = "from .api import _report\nfrom .pipeline import empty_rule_dirs\nfrom .views.index_page import index_row\n"
    found = _cli_imports(old)
    assert [(m, n) for m, n in found if m not in CLI_MAY_IMPORT] == [("pipeline", "empty_rule_dirs"),
                                                                      ("views.index_page", "index_row")]
    assert [n for m, n in found if m == "api" and n.startswith("_")] == ["_report"]


def test_every_public_function_the_cli_calls_is_documented():
    text = (ROOT / "docs" / "api.md").read_text()
    for name in ("ReportOptions", "load_ruleset", "empty_rule_folders", "input_files", "report_file",
                 "check_outputs", "check_perfetto_options", "rank_report_path", "index_html"):
        assert name in api.__all__ and f"`{name}(" in text, name


def test_load_ruleset_and_empty_rule_folders(tmp_path):
    """An empty team folder loads (only the built-in rules run) and is named by
    ``empty_rule_folders``; a folder holding only a cases file is empty too (cases are not rules)."""
    empty, cases_only = tmp_path / "team", tmp_path / "cases"
    empty.mkdir()
    cases_only.mkdir()
    (cases_only / "x.cases.yaml").write_text("cases: []\n")
    rs = api.load_ruleset([empty, cases_only], no_config=True)
    builtin = api.load_ruleset(no_config=True)
    assert [r.id for r in rs.rules.rules] == [r.id for r in builtin.rules.rules]
    assert rs.config_path is None and rs.warnings == []
    assert api.empty_rule_folders([empty, cases_only], rs) == [empty, cases_only]
    with pytest.raises(UsageError):
        api.load_ruleset(5)


def test_input_files_expand_folders_and_drop_a_file_seen_before(tmp_path):
    """A folder stands for its nsys files, sorted (``notes.txt`` is none); with one ``seen`` set
    the file named again in a second call is dropped."""
    for n in ("b.sqlite", "a.sqlite", "notes.txt"):
        (tmp_path / n).write_bytes(b"")
    seen: set = set()
    assert [Path(f).name for f in api.input_files([tmp_path], seen)] == ["a.sqlite", "b.sqlite"]
    assert api.input_files([tmp_path / "a.sqlite"], seen) == []
    with pytest.raises(NsysdocError):
        api.input_files([tmp_path / "missing.sqlite"])


def test_report_file_is_report_after_its_checks(build):
    path = build("sync_storm")
    rs = api.load_ruleset(no_config=True)
    a = api.report_file(path, rs, ReportOptions(step_marker="iteration_.*", cache=False))
    b = nsysdoc.report(path, no_config=True, step_marker="iteration_.*", cache=False)
    assert a.to_json() == b.to_json()
    assert a.result["capture"]["step_pattern"] == "iteration_.*"  # the options reached the analysis
    assert json.loads(a.to_json())["findings"]


def test_check_outputs_refuses_an_output_over_an_input(tmp_path):
    cap = tmp_path / "run.sqlite"
    cap.write_bytes(b"")
    api.check_outputs([tmp_path / "run.nsysdoc.html", None], [cap], None)  # fine: nothing is replaced
    with pytest.raises(NsysdocError, match="run.sqlite"):
        api.check_outputs([cap], [cap], None)


def test_check_perfetto_options():
    api.check_perfetto_options("perfetto", "1.25:1.40", None)
    api.check_perfetto_options("html", None, None)  # nothing asked: nothing to check
    with pytest.raises(UsageError, match="choose what -f perfetto exports"):
        api.check_perfetto_options("html", "1:2", None)
    with pytest.raises(UsageError, match="exclude each other"):
        api.check_perfetto_options("perfetto", "1:2", "median")


def test_rank_report_path_drops_the_whole_capture_suffix(tmp_path):
    assert api.rank_report_path(tmp_path, "/x/rank3.pt.trace.json.gz") == tmp_path / "rank3.nsysdoc.html"
    assert api.rank_report_path(tmp_path, Path("node1.nsys-rep")) == tmp_path / "node1.nsysdoc.html"


def test_index_html_lists_each_input_and_escapes_its_error(tmp_path):
    page = api.index_html([("a<b>.sqlite", None, None, "not an <nsys> export")], tmp_path)
    assert "a&lt;b&gt;.<wbr>sqlite" in page and "failed: not an &lt;nsys&gt; export" in page
    assert "<nsys>" not in page


# --- one resolver of what a path holds ---------------------------------------------------------
def test_input_kind_tells_a_saved_report_only_when_asked(tmp_path):
    """By the order of nsysdoc.formats: a saved report starts with ``{`` and is not a Kineto trace
    (no top-level ``traceEvents``); without ``saved_report`` it is JSON, for the Kineto reader to
    refuse; a Kineto trace stays a capture even when asked; a name ending .nsys-rep is a report
    whatever it holds."""
    saved = tmp_path / "run.nsysdoc.json"
    saved.write_text(json.dumps({"nsysdoc_version": "x", "contract": 4}))
    kin = tmp_path / "t.pt.trace.json"
    kin.write_text(json.dumps({"schemaVersion": 1, "traceEvents": []}))
    rep = tmp_path / "r.nsys-rep"
    rep.write_text("{}")
    assert formats.input_kind(saved, saved_report=True) == "saved-report"
    assert formats.input_kind(saved) == "kineto"
    assert formats.input_kind(kin, saved_report=True) == "kineto"
    assert formats.input_kind(rep) == "nsys-report"
    assert formats.input_kind(tmp_path, saved_report=True) == "other"  # a folder: never read
    assert pipeline.is_saved_report(saved) and not pipeline.is_saved_report(kin)


def _calls(path: Path) -> set[str]:
    return {n.func.id if isinstance(n.func, ast.Name) else n.func.attr
            for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)
            and isinstance(n.func, (ast.Name, ast.Attribute))}


def test_the_entry_points_ask_the_one_resolver():
    """The pipeline (export a report first? a saved report on a diff side?) and the trace loader
    (which reader?) ask ``input_kind``; none decides by itself with the sniffers it is made of."""
    sniffers = {"is_report_name", "is_sqlite", "routes_here", "is_saved_report_head", "is_kineto_trace"}
    for rel in ("nsysdoc/pipeline.py", "nsysdoc/trace/loader.py"):
        calls = _calls(ROOT / rel)
        assert "input_kind" in calls, rel
        assert not calls & sniffers, (rel, calls & sniffers)


# --- the assembly reads the engine's run once ----------------------------------------------------
def test_the_assembly_takes_the_run_without_its_plan_beside_it():
    from nsysdoc.assembly import assemble
    from nsysdoc.assembly.inputs import Inputs

    assert list(inspect.signature(assemble).parameters) == ["trace", "run", "step_pattern"]
    run = SimpleNamespace(plan=SimpleNamespace(steps="the plan's steps", span=(10, 90)),
                          excluded=[{"kind": "warm-up", "start_ns": 10, "end_ns": 30}])
    a = Inputs(trace=None, engine=run, step_pattern="step.*")
    assert (a.steps, a.span, a.excluded) == ("the plan's steps", (10, 90), run.excluded)
    assert a.excluded is run.excluded  # read from the run, not a copy passed next to it
    with pytest.raises(TypeError):
        Inputs(trace=None, engine=run, step_pattern="s", span=(0, 1))  # no second way in


# --- one findings table for the notebook's summaries ---------------------------------------------
def _headers(page: str) -> list[str]:
    import re

    return re.findall(r"<th [^>]*>([^<]*)</th>", page)


def test_the_report_and_job_summaries_share_one_findings_table():
    """Severity and finding first, then each summary's own columns; 2 findings are 2 rows; 12 are
    MAX_FINDINGS (8) rows and "4 more findings"; none is no table."""
    from nsysdoc.views import notebook as nb

    f = {"rule": "host-sync", "title": "Host <waits>", "severity": "warning", "impact_ms_per_step": 1.5,
         "impact_pct": 12.0, "rank_count": 2, "impact_ms_per_step_median": 2.25}
    rep = nb.report_summary_html({"findings": [f, f]})
    assert _headers(rep) == ["severity", "finding", "impact per step", "of the step", "Where"]
    assert rep.count("<tr><td") == 2 and "Host &lt;waits&gt;" in rep and "1.50 ms" in rep and "12.0%" in rep
    job = nb.job_summary_html({"rank_count": 4, "findings": [f] * 12})
    assert _headers(job) == ["severity", "finding", "ranks", "median impact per step"]
    assert job.count("<tr><td") == nb.MAX_FINDINGS == 8 and "2 of 4" in job and "2.25 ms" in job
    assert "4 more findings" in job
    assert nb._findings_table({"findings": []}, ()) == ""
