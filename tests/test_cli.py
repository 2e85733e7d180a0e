"""The command line: outputs, exit codes, one-line errors (never a traceback)."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from nsysdoc.testing import Capture


from .conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent


def run(*args, cwd=None):
    return run_cli(*args, cwd=cwd)


def assert_one_line_error(proc, *needles):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.startswith("nsysdoc: error:")]
    assert len(lines) == 1, proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.mark.slow  # issue 50: report commands in processes (1 s of CPU); .ci/run runs it
def test_sample_report_json_to_stdout():
    proc = run("report", "--sample", "--no-cache", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["summary"]["step_count"] == 12
    assert [f["rule"] for f in data["findings"]] == ["data-starvation", "pageable-memcpy", "tiny-kernels"]


@pytest.mark.slow  # issue 50: report commands in processes (1 s of CPU); .ci/run runs it
def test_output_file(tmp_path):
    out = tmp_path / "r.json"
    proc = run("report", "--sample", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["source"]["nsys_version"] == "2026.2.1.210"  # format from the suffix
    assert f"Report: {out}" in proc.stdout  # the terminal summary names the file


@pytest.mark.slow  # issue 50: report commands in processes (0.9 s of CPU); .ci/run runs it
def test_several_inputs_to_directory(tmp_path, build):
    a = build("healthy_training")
    b = build("sync_storm")
    proc = run("report", a, b, "-o", tmp_path / "out", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["healthy_training.nsysdoc.json",
                                                                   "sync_storm.nsysdoc.json"]


def test_missing_file(tmp_path):
    assert_one_line_error(run("report", tmp_path / "missing.sqlite"), "no such file")


def test_not_sqlite(tmp_path):
    p = tmp_path / "notes.sqlite"
    p.write_text("not a database")
    assert_one_line_error(run("report", p), "not an SQLite file")


def test_truncated(tmp_path, build):
    good = build("healthy_training")
    bad = tmp_path / "cut.sqlite"
    bad.write_bytes(good.read_bytes()[:9000])
    assert_one_line_error(run("report", bad), "truncated")


def test_sqlite_but_not_nsys(tmp_path):
    p = tmp_path / "app.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE t(x)")
    con.commit()
    con.close()
    assert_one_line_error(run("report", p), "not an Nsight Systems export")


def test_empty_capture(tmp_path):
    cap = Capture(trace=())
    cap.process()
    assert_one_line_error(run("report", cap.write(tmp_path / "e.sqlite")), "capture is empty")


@pytest.mark.slow  # issue 50: report commands in processes (0.8 s of CPU); .ci/run runs it
def test_bad_step_marker_regex(build):
    assert_one_line_error(run("report", build("healthy_training"), "--step-marker", "step(["), "--step-marker")


@pytest.mark.slow  # issue 50: report commands in processes (1.8 s of CPU); .ci/run runs it
def test_custom_step_marker(build, tmp_path):
    cap = Capture()
    t = cap.process().thread()
    for i in range(3):
        with t.range(f"chunk-{i}"):   # no step pattern match, and no step-like name
            t.launch("k", 100)
    p = cap.write(tmp_path / "custom.sqlite")
    default = json.loads(run("report", p, "--format", "json").stdout)
    custom = json.loads(run("report", p, "--format", "json", "--step-marker", r"chunk-\d+").stdout)
    assert default["summary"]["step_count"] == 0
    assert custom["summary"]["step_count"] == 3
    assert custom["capture"]["steps_found_by"] == "pattern"


@pytest.mark.slow  # issue 50: report commands in processes (0.9 s of CPU); .ci/run runs it
def test_partial_failure_still_reports_others(tmp_path, build):
    good = build("healthy_training")
    proc = run("report", good, tmp_path / "missing.sqlite", "-o", tmp_path / "o", "--format", "json")
    assert proc.returncode == 2
    assert (tmp_path / "o" / "healthy_training.nsysdoc.json").exists()


def test_no_input_is_usage_error():
    proc = run("report")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


def test_unknown_option_is_usage_error():
    proc = run("report", "--sample", "--bogus")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


def test_version():
    proc = run("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("nsysdoc ")


@pytest.mark.slow  # issue 50: report commands in processes (1.1 s of CPU); .ci/run runs it
def test_input_file_untouched_by_report(build, tmp_path):
    p = build("healthy_training")
    before = (p.read_bytes(), p.stat().st_mtime_ns)
    assert run("report", p, "-o", tmp_path / "x.json").returncode == 0
    assert (p.read_bytes(), p.stat().st_mtime_ns) == before


@pytest.mark.slow  # issue 50: report commands in processes (1.1 s of CPU); .ci/run runs it
def test_default_is_html_next_to_cwd_with_terminal_summary(tmp_path, build):
    p = build("dataloader_starvation")
    proc = run("report", p, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    html = tmp_path / "dataloader_starvation.nsysdoc.html"
    assert html.exists() and html.read_text().lstrip().lower().startswith("<!doctype html")
    assert "DataLoader starvation" in proc.stdout and str(html) in proc.stdout


@pytest.mark.slow  # issue 50: report commands in processes (1 s of CPU); .ci/run runs it
def test_markdown_to_stdout(build):
    proc = run("report", build("sync_storm"), "--format", "md")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("#") and "Host-blocking synchronisation" in proc.stdout


def test_folder_without_traces_and_a_file_output_is_one_error(tmp_path):
    (tmp_path / "empty").mkdir()
    r = run_cli("report", tmp_path / "empty", "-o", tmp_path / "out.json")
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("nsysdoc: error")]
    assert len(lines) == 1 and "no .nsys-rep or .sqlite files" in lines[0], r.stderr


@pytest.mark.slow  # issue 50: report commands in processes (1.2 s of CPU); .ci/run runs it
def test_rules_folder_without_rule_files_warns(tmp_path):
    (tmp_path / "team").mkdir()
    (tmp_path / "team" / "x.cases.yaml").write_text("rule: x\ncases: []\n")
    r = run_cli("report", "--sample", "--rules", tmp_path / "team", "-o", tmp_path / "s.json", "--no-config")
    assert r.returncode == 0
    assert "holds no rule files" in r.stderr


def test_help_shows_the_pyproject_table_name():
    r = run_cli("report", "--help")
    assert "[tool.nsysdoc]" in " ".join(r.stdout.split()), r.stdout


def test_fixture_builder_help_does_not_write_a_folder(tmp_path):
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    r = subprocess.run([sys.executable, str(root / "fixtures" / "build.py"), "--help"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "OUT_DIR" in r.stdout
    assert list(tmp_path.iterdir()) == []
