"""Issue 49: the API as users meet it in plain scripts and notebooks.

* ``nsysdoc.job(paths, jobs=2)`` from a plain script without ``if __name__ == "__main__":`` runs
  the script once (the workers never re-import it) and gives the ``jobs=1`` result;
* a worker that fails is reported as what it is, naming its input (a corrupted capture, a worker
  process that dies), never as "two inputs claim rank N";
* ``_repr_html_`` is a compact summary (verdict, findings with Where, key numbers), under 20 KB,
  escaping trace-controlled names;
* errors the API raises name API parameters (``step_marker=``), the command's name its flags.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import nsysdoc
from nsysdoc.api import api_wording
from nsysdoc.jobs.run import WorkerPool
from nsysdoc.testing import Capture
from nsysdoc.testing.scenarios import SCENARIOS
from nsysdoc.views.notebook import report_summary_html

from .conftest import ROOT, run_cli


def _run_script(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    """``python script.py`` as a user runs it: this tree first on the path, the script's folder as
    its working folder (a plain file, no main guard)."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("NSYSDOC_DEBUG", None)
    return subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)


def _two_ranks(tmp_path: Path) -> list[Path]:
    a = SCENARIOS["steady_training"]().write(tmp_path / "rank0.sqlite")
    b = SCENARIOS["steady_training"](gemm_us=1800).write(tmp_path / "rank1.sqlite")  # rank 1 is slower
    return [a, b]


def _stable(d: dict) -> dict:
    d = dict(d)
    d.pop("nsysdoc_version", None)
    return d


# ---------------------------------------------------------------------------------------------
# a plain script, jobs=2
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow  # issue 50: a script in a process pool (2.9 s of CPU); .ci/run runs it
def test_a_plain_script_without_main_guard_runs_once_and_equals_jobs_1(tmp_path):
    """Before: the script ran again in each spawned worker (its line printed three times), each
    worker's own nsysdoc.job() hit the "bootstrapping phase" RuntimeError, and the job failed."""
    paths = _two_ranks(tmp_path)
    run = _run_script(tmp_path, f"""
        import json
        import nsysdoc
        print("script body ran")
        j = nsysdoc.job({[str(p) for p in paths]!r}, jobs=2, no_config=True, cache=False)
        open("jobs2.json", "w").write(j.to_json())
        print("done")
        """)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.splitlines() == ["script body ran", "done"]
    assert "bootstrapping" not in run.stderr and "Traceback" not in run.stderr, run.stderr[-2000:]
    one = nsysdoc.job([str(p) for p in paths], jobs=1, no_config=True, cache=False).to_dict()
    two = json.loads((tmp_path / "jobs2.json").read_text())
    assert _stable(two) == _stable(one)
    assert [r["rank"] for r in two["ranks"]] == [0, 1] and all(r["ok"] for r in two["ranks"])


@pytest.mark.slow  # issue 50: a script in a process pool (3 s of CPU); .ci/run runs it
def test_a_corrupted_input_is_named_and_the_rest_still_read(tmp_path):
    """One of three captures is not a database: the job still reads the other two, with jobs=2 as
    with jobs=1, and its warnings name the broken file on one line."""
    paths = _two_ranks(tmp_path)
    bad = tmp_path / "rank2.sqlite"
    bad.write_bytes(b"this is not a database\n" * 100)
    files = [str(p) for p in paths] + [str(bad)]
    run = _run_script(tmp_path, f"""
        import nsysdoc
        j = nsysdoc.job({files!r}, jobs=2, no_config=True, cache=False)
        open("jobs2.json", "w").write(j.to_json())
        for w in j.warnings:
            print("WARNING", w)
        """)
    assert run.returncode == 0, run.stderr[-2000:]
    two = json.loads((tmp_path / "jobs2.json").read_text())
    one = nsysdoc.job(files, jobs=1, no_config=True, cache=False).to_dict()
    assert _stable(two) == _stable(one)
    assert [r["ok"] for r in two["ranks"]] == [True, True, False]
    named = [ln for ln in run.stdout.splitlines() if ln.startswith("WARNING") and "rank2.sqlite" in ln]
    assert len(named) == 1, run.stdout
    assert "worker failed" not in named[0]  # it is the capture's fault, said as the capture's error


def _die_on_marked(path: str, options: dict):
    """A worker task for the test below: the process dies (as if killed, out of memory) on a
    path containing "die", else the real summary."""
    if "die" in Path(path).name:
        os._exit(9)
    from nsysdoc.jobs.summary import summarize_file

    return summarize_file(path, options)


@pytest.mark.slow  # issue 50: a script in a process pool (2.7 s of CPU); .ci/run runs it
def test_a_worker_that_dies_fails_only_its_input_named(tmp_path):
    """The second of three tasks kills its worker process: that input alone fails, with
    ``worker failed`` and the exit status, naming it; a fresh worker reads the third."""
    a, b = _two_ranks(tmp_path)
    dying = tmp_path / "die.sqlite"
    dying.write_bytes(a.read_bytes())
    files = [str(a), str(dying), str(b)]
    pool = WorkerPool(1)  # one worker: the third task needs the replacement
    try:
        got = dict(pool.map(f"{__name__}:_die_on_marked", [(f, {"no_cache": True}) for f in files], label=files))
    finally:
        pool.close()
    assert sorted(got) == [0, 1, 2]
    assert got[0][0]["ok"] and got[2][0]["ok"]
    (rec,) = got[1]
    assert rec["ok"] is False and rec["file"] == str(dying)
    assert rec["error"].startswith("worker failed: the worker process ended (exit status 9)")
    assert "die.sqlite" in rec["error"] and "\n" not in rec["error"]


@pytest.mark.slow  # issue 50: a process pool over the inputs (4.4 s of CPU); .ci/run runs it
def test_unreadable_inputs_are_the_error_not_a_rank_collision(tmp_path):
    """Both file names claim rank 1 and one capture cannot be read: the error names that input
    and what is wrong with it. Before: "two inputs claim rank 1", which hid the real problem."""
    good = SCENARIOS["steady_training"]().write(tmp_path / "a_rank1.sqlite")
    bad = tmp_path / "b_rank1.sqlite"
    bad.write_bytes(b"garbage" * 1000)
    with pytest.raises(nsysdoc.NsysdocError) as exc:
        nsysdoc.job([str(good), str(bad)], jobs=2, no_config=True, cache=False)
    msg = exc.value.message
    assert msg.startswith("1 of 2 inputs could not be read (b_rank1.sqlite: "), msg
    assert "two inputs claim" not in msg and "\n" not in msg
    assert "two inputs claim rank 1" in exc.value.hint
    # both readable: the collision itself is still the error
    SCENARIOS["steady_training"]().write(bad)
    with pytest.raises(nsysdoc.NsysdocError, match="two inputs claim rank 1"):
        nsysdoc.job([str(good), str(bad)], jobs=2, no_config=True, cache=False)


# ---------------------------------------------------------------------------------------------
# _repr_html_: a compact summary
# ---------------------------------------------------------------------------------------------
EVIL = "<script>alert(1)</script>"


def _hostile_names_capture() -> Capture:
    """3 steps; per step a 3 ms kernel named ``<script>…`` in operator ``aten::<script>…``, 300
    tiny 4 us kernels in ``aten::add_`` and a ``loss.item()``: several findings whose Where and
    verdict carry the hostile names."""
    cap = Capture(cuda_backtrace=True)
    main = cap.process().thread()
    for i in range(3):
        with main.range(f"ProfilerStep#{i}"):
            with main.frame("train.py", 50, "<module>"), main.op(f"aten::{EVIL}"):
                main.launch(f"{EVIL}_gemm_kernel", us=3000)
            with main.frame("train.py", 55, "<module>"):
                for _ in range(300):
                    with main.op("aten::add_"):
                        main.launch("add_kernel", us=4, api_us=3)
            with main.frame("train.py", 60, "<module>"), main.op("aten::item"), \
                    main.op("aten::_local_scalar_dense"):
                main.item()
            main.cpu(us=800)
    return cap


def test_repr_html_is_a_compact_escaped_summary(tmp_path):
    r = nsysdoc.report(str(_hostile_names_capture().write(tmp_path / "evil.sqlite")), no_config=True, cache=False)
    shown = r._repr_html_()
    page = r.to_html()
    assert len(shown.encode()) < 20_000 < len(page.encode())
    assert "<script" not in shown.lower() and "<iframe" not in shown.lower()
    assert "&lt;script&gt;" in shown
    import html as _html

    assert _html.escape(r.verdict) in shown
    assert len(r.findings) >= 2
    for f in r.findings:  # each finding's title and severity
        assert _html.escape(f.title) in shown and f">{f.severity}<" in shown
    assert "report.to_html()" in shown


def test_repr_html_caps_findings_and_names():
    """40 findings, each with 5 sites of 2,000-character names: 8 findings are listed (then
    "and 32 more findings"), 2 sites each, names cut at 90 characters: still a few KB."""
    long = "void at::native::" + "x" * 2000
    findings = [{"rule": f"rule-{i}", "severity": "warning", "title": f"finding {i}", "impact_ms_per_step": 1.0,
                 "impact_pct": 5.0, "where": [{"op": long, "module": long, "frame": long, "share_pct": 20.0}] * 5}
                for i in range(40)]
    result = {"verdict": {"sentence": "Slow."}, "summary": {"step_time_ms_median": 12.5, "step_count": 7,
                                                            "gpu_busy_pct": 50.0, "kernel_count": 1234},
              "findings": findings, "source": {"path": "/x/run.sqlite"}}
    shown = report_summary_html(result)
    assert shown.count("<tr>") == 1 + 8 and "and 32 more findings" in shown
    assert "finding 7<" in shown.replace(" <span", "<") and "finding 8<" not in shown.replace(" <span", "<")
    assert len(shown.encode()) < 20_000
    # the key numbers as the glossary defines them, formatted: 12.50 ms, 7 steps, 50.0%, 1,234
    for text in ("<b>12.50 ms</b>", "<b>7</b>", "<b>50.0%</b>", "<b>1,234</b>"):
        assert text in shown


def test_job_and_diff_repr_html_are_compact(tmp_path):
    paths = _two_ranks(tmp_path)
    j = nsysdoc.job([str(p) for p in paths], jobs=1, no_config=True, cache=False)
    d = nsysdoc.diff(str(paths[0]), str(paths[1]), no_config=True, cache=False)
    import html as _html

    for obj in (j, d):
        shown = obj._repr_html_()
        assert len(shown.encode()) < 20_000 < len(obj.to_html().encode())
        assert "<iframe" not in shown
    assert _html.escape(j.verdict) in j._repr_html_()
    assert _html.escape(d.headline) in d._repr_html_()


# ---------------------------------------------------------------------------------------------
# errors name API parameters
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow  # issue 50: scripts in processes (1.6 s of CPU); .ci/run runs it
def test_api_errors_name_parameters_and_the_command_names_flags(tmp_path):
    path = SCENARIOS["steady_training"]().write(tmp_path / "run.sqlite")
    with pytest.raises(nsysdoc.NsysdocError) as exc:
        nsysdoc.report(str(path), step_marker="(", no_config=True, cache=False)
    assert exc.value.message.startswith("step_marker='(': not a valid regular expression")
    assert "--step-marker" not in exc.value.message
    run = run_cli("report", str(path), "--step-marker", "(", "--no-config", "--no-cache", "-f", "json",
                  "-o", str(tmp_path / "o.json"))
    assert run.returncode == 2 and "nsysdoc: error: --step-marker '(': not a valid regular expression" in run.stderr

    other = SCENARIOS["steady_training"]().write(tmp_path / "run2.sqlite")
    with pytest.raises(nsysdoc.NsysdocError) as exc:
        nsysdoc.job([str(path), str(other)], rank_pattern="(", no_config=True, cache=False)
    assert exc.value.message.startswith("rank_pattern='(': not a valid regular expression")
    run = run_cli("job", str(path), str(other), "--rank-pattern", "(", "--no-config", "-f", "json",
                  "-o", str(tmp_path / "j.json"))
    assert run.returncode == 2 and "nsysdoc: error: --rank-pattern '(': not a valid" in run.stderr

    r = nsysdoc.report(str(path), no_config=True, cache=False)
    with pytest.raises(nsysdoc.NsysdocError) as exc:
        r.to_perfetto(tmp_path / "t.json", steps="zz")
    assert exc.value.message.startswith("steps='zz': ") and "--" not in exc.value.message


@pytest.mark.parametrize("cli, api", [
    ("--step-marker '(': not a valid regular expression", "step_marker='(': not a valid regular expression"),
    ("pass the address: --dask tcp://HOST:8786", "pass the address: dask=tcp://HOST:8786"),
    ("--range and --steps exclude each other", "time_range= and steps= exclude each other"),
    ("name the rank with --rank-pattern", "name the rank with rank_pattern="),
    ("--range '1:x': 'x' is not a number", "time_range='1:x': 'x' is not a number"),
    ("nsys --trace=cuda and --step-markers-x stay", "nsys --trace=cuda and --step-markers-x stay"),
])
def test_api_wording(cli, api):
    assert api_wording(cli) == api


def test_no_worker_process_falls_back_to_this_process_with_one_line(tmp_path, monkeypatch):
    """An interpreter that cannot start workers (here ``sys.executable`` is ``false``, as in an
    application embedding Python): the job runs in this process, same result, after one notice."""
    from nsysdoc.jobs.run import run_local

    paths = [str(p) for p in _two_ranks(tmp_path)]
    expected = run_local(paths, {"no_cache": True}, jobs=1)
    monkeypatch.setattr(sys, "executable", "/bin/false")
    heard: list[str] = []
    got = run_local(paths, {"no_cache": True}, jobs=2, notice=heard.append)
    assert got == expected
    assert len(heard) == 1 and "\n" not in heard[0]
    assert heard[0].startswith("warning: cannot start worker processes (/bin/false did not start a worker: exit "
                               "status 1)") and heard[0].endswith("running the 2 captures one at a time in this process")
