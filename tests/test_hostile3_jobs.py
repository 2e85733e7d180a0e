"""Hardening III (issue 45), the job, diff and page side: one test per bug, each building its own
input and failing before its fix.

1. a Dask worker's result is checked (type, fields, finite numbers) before anything reads it;
2. ``job --dask`` against a scheduler with no worker fails after a timeout instead of waiting forever;
3. a saved report with impossible numbers (1e-300 ms steps, negative or endless durations) is refused;
4. hard-linked (or symlinked) rank files are refused, a directory named like a rank is a named failure;
6. every ``href`` of every page is percent-encoded, with a scheme whitelist;
7. what the job hands the command line to print (worker errors, refusals) is one printable line.

Captures come from ``nsysdoc.testing.scenarios`` (``ddp_job``, ``steady_training``); Dask clusters
are real (``distributed.LocalCluster``): one with no worker, one whose worker runs a "hostile"
``summarize_file`` installed by a preload script. The command line runs in a subprocess of this
checkout (``python -m nsysdoc``); every input's sha256 is compared before and after.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

from nsysdoc.errors import InputError
from nsysdoc.testing.scenarios import ddp_job, steady_training

from .conftest import ROOT


def _distributed():
    if os.environ.get("NSYSDOC_REQUIRE_DASK") == "1":
        return __import__("distributed")
    return pytest.importorskip("distributed")


def cli(*args, cwd=None, env=None, timeout: float = 60) -> subprocess.CompletedProcess:
    """``python -m nsysdoc ARGS`` importing this checkout, with extra environment ``env``."""
    e = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "nsysdoc", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, env=e)


def sha(paths) -> dict:
    return {str(p): hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in paths}


def error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("nsysdoc: error:")]


def printable(text: str) -> bool:
    """No control character (terminal escapes, BEL, carriage returns) in any line."""
    return not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", text)


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("two")
    return [c.write(folder / f"rank{r}.sqlite") for r, c in enumerate(ddp_job(ranks=2, steps=3, slow_rank=None))]


# ---------------------------------------------------------------------------------------------
# a Dask cluster whose worker runs a hostile summarize_file (modes read from a file per call)
# ---------------------------------------------------------------------------------------------
HOSTILE = '''
import nsysdoc.jobs.summary as S

_real = getattr(S, "_honest_summarize_file", S.summarize_file)  # the preload may run twice
S._honest_summarize_file = _real
MODE = {mode!r}


def summarize_file(path, options=None):
    mode = open(MODE).read().strip()
    if not str(path).endswith("rank1.sqlite") or mode == "honest":
        return _real(path, options)
    if mode == "raise":
        raise RuntimeError("boom \\x1b]0;owned\\x07\\x1b[2J\\nsecond line")
    if mode == "not-a-list":
        return {{"file": path, "ok": True}}
    recs = _real(path, options)
    r = recs[0]
    if mode == "nan-step":
        r["steps"][0]["step_time_ms"] = float("nan")
    elif mode == "string-pids":
        r["pids"] = "1; rm -rf /"
    elif mode == "extra-field":
        r["\\x1b[31mpwned"] = 1
    elif mode == "other-file":
        r["file"] = "/etc/passwd"
    elif mode == "report-link":
        r["report"] = "javascript:alert(1)"
    elif mode == "huge-int":
        r["session_start_utc_ns"] = 1 << 80
    elif mode == "bad-collective":
        r["collectives"] = {{"ncclDevKernel_AllReduce": {{"start_ns": [1, 2], "end_ns": [3]}}}}
    return recs


S.summarize_file = summarize_file
'''


@pytest.fixture(scope="module")
def hostile_cluster(tmp_path_factory):
    distributed = _distributed()
    folder = tmp_path_factory.mktemp("hostile")
    mode = folder / "mode.txt"
    mode.write_text("honest")
    preload = folder / "hostile_worker.py"
    preload.write_text(textwrap.dedent(HOSTILE.format(mode=str(mode))))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50, preload=[str(preload)]) as cluster:
        yield cluster.scheduler_address, mode


def _stable(d: dict) -> dict:
    d = copy.deepcopy(d)
    d.pop("nsysdoc_version", None)
    return d


@pytest.mark.slow  # issue 50: a Dask cluster (16 s of wall time); .ci/run runs it
def test_1_a_malformed_dask_result_is_refused_naming_the_rank(hostile_cluster, two_ranks):
    from nsysdoc.jobs import run_job

    address, mode = hostile_cluster
    files = [str(p) for p in two_ranks]
    before = sha(files)
    # control: the honest worker gives the local result, so a refusal below is the check's
    mode.write_text("honest")
    assert _stable(run_job(files, {"no_cache": True}, dask=address)) == _stable(run_job(files, {"no_cache": True},
                                                                                          jobs=1))
    fields = {"nan-step": "steps[0].step_time_ms", "string-pids": "pids", "extra-field": "pwned",
              "other-file": "file", "report-link": "report", "huge-int": "session_start_utc_ns",
              "bad-collective": "collectives", "not-a-list": "the result"}
    for kind, field in fields.items():
        mode.write_text(kind)
        seen: list = []
        with pytest.raises(InputError) as e:
            run_job(files, {"no_cache": True}, dask=address, progress=lambda d, t, recs: seen.extend(recs))
        msg = e.value.message
        assert msg.startswith("the Dask worker's result for rank 1 (rank1.sqlite) is malformed: "), (kind, msg)
        assert field in msg and "\n" not in msg and printable(msg), (kind, msg)
        assert "docs/job.md" in e.value.hint
        assert all(r.get("file") != files[1] for r in seen), kind  # never shown as progress
    # the command line: exit 2, one error line naming the rank, nothing written, inputs unchanged
    mode.write_text("nan-step")
    p = cli("job", *files, "--dask", address, "-f", "json", "--no-config", "--no-cache", timeout=120)
    assert p.returncode == 2, p.stderr
    assert len(error_lines(p.stderr)) == 1 and "rank 1 (rank1.sqlite) is malformed" in p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""
    assert sha(files) == before
    # the docs say what --dask trusts
    doc = (ROOT / "docs" / "job.md").read_text(encoding="utf-8")
    assert "## Trusting a Dask cluster" in doc and "Unpickling runs code" in doc


# ---------------------------------------------------------------------------------------------
# 2. a scheduler with no worker
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow  # issue 50: waits for a Dask timeout (14 s of wall time); .ci/run runs it
def test_2_a_scheduler_without_workers_fails_after_the_timeout(two_ranks, tmp_path):
    distributed = _distributed()
    from nsysdoc.jobs import run_job

    files = [str(p) for p in two_ranks]
    before = sha(files)
    with distributed.LocalCluster(n_workers=0, processes=True, dashboard_address=None, silence_logs=50) as cluster:
        address = cluster.scheduler_address
        assert address.startswith("tcp://")
        p = cli("job", *files, "--dask", address, "-o", tmp_path / "job.html", "--no-config", "--no-cache",
                env={"NSYSDOC_DASK_WORKER_TIMEOUT": "1.5"}, timeout=30)
        assert p.returncode == 2, p.stderr
        errs = error_lines(p.stderr)
        assert len(errs) == 1 and "has no worker: no worker has joined it in 1.5 s (0 of 2 ranks done)" in errs[0]
        # while it waits, the command line says so (the API's notice)
        assert f"nsysdoc: waiting for a Dask worker: the scheduler at {address} has none" in p.stderr
        assert "Traceback" not in p.stderr and not (tmp_path / "job.html").exists()
        # a timeout that is no number of seconds: one line, at once
        p = cli("job", *files, "--dask", address, "-f", "json", "--no-config",
                env={"NSYSDOC_DASK_WORKER_TIMEOUT": "soon"}, timeout=30)
        assert p.returncode == 2 and len(error_lines(p.stderr)) == 1 and "NSYSDOC_DASK_WORKER_TIMEOUT" in p.stderr
        # the API says it is waiting (the command line prints these notices) and gives up
        notes: list[str] = []
        with pytest.raises(InputError, match="has no worker"):
            run_job(files, {"no_cache": True}, dask=address, notice=notes.append, dask_timeout=1.0)
        assert notes and notes[0].startswith(f"waiting for a Dask worker: the scheduler at {address} has none")
    assert sha(files) == before


# ---------------------------------------------------------------------------------------------
# 3. impossible numbers in a saved report
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def saved_report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("saved")
    cap = steady_training(steps=6).write(folder / "run.sqlite")
    out = folder / "run.json"
    p = cli("report", cap, "-f", "json", "-o", out, "--no-config", "-q")
    assert p.returncode == 0, p.stderr
    return out


def _forge(report: Path, folder: Path, name: str, edit) -> Path:
    d = json.loads(report.read_text())
    edit(d)
    out = folder / f"{name}.json"
    out.write_text(json.dumps(d))
    return out


def _all_steps(value):
    def edit(d):
        for s in d["steps"]:
            s["step_time_ms"] = value
    return edit


def _series(d):
    d["step_series"] = {"index": [s["index"] for s in d["steps"]], "pid": [s["pid"] for s in d["steps"]],
                        "step_time_ms": [s["step_time_ms"] for s in d["steps"]]}
    d["step_series"]["step_time_ms"][2] = 1e-9
    d["steps_truncated"] = True


def _set(path: str, value):
    def edit(d):
        *head, last = path.split(".")
        node = d
        for k in head:
            node = node[int(k)] if k.isdigit() else node[k]
        node[int(last) if last.isdigit() else last] = value
    return edit


@pytest.mark.parametrize("name, edit, field", [
    ("tiny-steps", _all_steps(1e-300), "steps[0].step_time_ms is 1e-300 ms, under 1 ns"),
    ("negative-step", _set("steps.3.step_time_ms", -5.0), "steps[3].step_time_ms is negative"),
    ("endless-step", _set("steps.1.step_time_ms", 1e15), "steps[1].step_time_ms is 1e+15 ms, over"),
    ("tiny-series", _series, "step_series.step_time_ms[2] is 1e-09 ms, under 1 ns"),
    ("tiny-window", _set("capture.window.duration_ms", 1e-200), "capture.window.duration_ms is 1e-200 ms"),
    ("negative-kernel", _set("metrics.kernels.names.0.total_ms", -1e17), "metrics.kernels.names[0].total_ms is negative"),
    ("negative-count", _set("metrics.kernels.names.0.count", -3), "metrics.kernels.names[0].count is negative"),
    ("negative-part", _set("steps.0.breakdown_ms.compute", -2.0), "steps[0].breakdown_ms.compute is negative"),
])
def test_3_impossible_numbers_in_a_saved_report_are_refused(saved_report, tmp_path, name, edit, field):
    forged = _forge(saved_report, tmp_path, name, edit)
    before = sha([saved_report, forged])
    p = cli("diff", forged, saved_report, "-f", "md", "--no-config", "--fail-on-regression", "3")
    assert p.returncode == 2, (p.returncode, p.stdout[:300])
    errs = error_lines(p.stderr)
    assert len(errs) == 1 and f"base: malformed nsysdoc report: {field}" in errs[0], p.stderr
    assert p.stdout == "" and "Traceback" not in p.stderr
    assert sha([saved_report, forged]) == before


@pytest.mark.slow  # issue 50: job commands in processes (1.4 s of CPU); .ci/run runs it
def test_3_the_real_report_and_a_zero_step_are_still_read(saved_report, tmp_path):
    """Control for the refusals above: the unforged report diffs as identical, and a step of 0 ms
    (two markers at the same nanosecond) is a step without time, as before."""
    p = cli("diff", saved_report, saved_report, "-f", "json", "--no-config")
    assert p.returncode == 0 and json.loads(p.stdout)["verdict"] == "identical", p.stderr
    zero = _forge(saved_report, tmp_path, "zero", _set("steps.5.step_time_ms", 0.0))
    p = cli("diff", zero, saved_report, "-f", "json", "--no-config")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["step_time_ms"]["base_steps"] == 5


# ---------------------------------------------------------------------------------------------
# 4. hard-linked and directory ranks
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow  # issue 50: job commands in processes (2.5 s of CPU); .ci/run runs it
def test_4_linked_ranks_are_refused_and_a_directory_rank_is_named(tmp_path):
    caps = ddp_job(ranks=2, steps=3, slow_rank=None)
    linked = tmp_path / "linked"
    linked.mkdir()
    files = [c.write(linked / f"rank{r}.sqlite") for r, c in enumerate(caps)]
    for r in range(2, 6):  # four more "ranks", all rank0's file
        os.link(files[0], linked / f"rank{r}.sqlite")
    before = sha(files)
    p = cli("job", linked, "-f", "json", "--no-config", "--no-cache", "-j", "1")
    assert p.returncode == 2, p.stderr
    errs = error_lines(p.stderr)
    assert len(errs) == 1 and f"{linked / 'rank0.sqlite'} and {linked / 'rank2.sqlite'} are one file (hard links)" \
        in errs[0], p.stderr
    assert p.stdout == "" and sha(files) == before
    # a symbolic link given beside its target: named too
    (tmp_path / "alias.sqlite").symlink_to(files[1])
    p = cli("job", files[0], files[1], tmp_path / "alias.sqlite", "-f", "json", "--no-config", "--no-cache", "-j", "1")
    assert p.returncode == 2 and "are one file (a symbolic link)" in p.stderr, p.stderr
    # the same path twice (a folder and a file in it) still counts once
    from nsysdoc.inputs import expand_inputs

    assert expand_inputs([linked / "rank1.sqlite", tmp_path / "alias.sqlite"]) == [str(linked / "rank1.sqlite")]
    assert expand_inputs([files[1], f"{files[1].parent}/./{files[1].name}"], same_file="refuse") == [str(files[1])]

    # a directory named like rank 1: a failed rank, named, and the job goes on
    folder = tmp_path / "withdir"
    folder.mkdir()
    ok = [caps[0].write(folder / "rank0.sqlite"), caps[1].write(folder / "rank2.sqlite")]
    (folder / "rank1.sqlite").mkdir()
    before = sha(ok)
    p = cli("job", folder, "-f", "json", "--no-config", "--no-cache", "-j", "1")
    assert p.returncode in (0, 1), p.stderr
    d = json.loads(p.stdout)
    assert d["rank_count"] == 2 and d["failed_count"] == 1
    bad = [r for r in d["ranks"] if not r["ok"]]
    assert [(r["rank"], Path(r["file"]).name, r["error"]) for r in bad] == \
        [(1, "rank1.sqlite", "is a directory, not a capture file")]
    assert any("rank1.sqlite" in w and "is a directory" in w for w in d["warnings"])
    assert "nsysdoc: [1/3] rank1.sqlite: failed: is a directory, not a capture file" in p.stderr.splitlines()
    assert sha(ok) == before and (folder / "rank1.sqlite").is_dir()


# ---------------------------------------------------------------------------------------------
# 6. hrefs: percent-encoded, scheme whitelist, on every page
# ---------------------------------------------------------------------------------------------
HOSTILE_NAMES = ["javascript:alert(1);rank0", "data:text,<b>\"q'&rank1"]
_ANCHOR = re.compile(r"^#[A-Za-z0-9._~%-]*$")
_PATH = re.compile(r"^(?!//)[A-Za-z0-9._~%/-]+$")


class _Hrefs(HTMLParser):
    """The href of every element, as the browser reads it (entities decoded); text that merely
    shows 'href=' (an escaped NVTX range) is no attribute."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.found += [v or "" for k, v in attrs if k.lower() in ("href", "xlink:href", "action", "formaction", "src")]

    handle_startendtag = handle_starttag


def hrefs(page: str) -> list[str]:
    parser = _Hrefs()
    parser.feed(page)
    parser.close()
    return parser.found


def assert_safe_hrefs(page: str, where: str) -> list[str]:
    found = hrefs(page)
    for h in found:
        assert not re.match(r"^\s*[A-Za-z][A-Za-z0-9+.-]*:", h), f"{where}: href with a scheme: {h!r}"
        assert _ANCHOR.match(h) or _PATH.match(h), f"{where}: href not percent-encoded: {h!r}"
    return found


def _hostile_capture(kernel: str, steps: int = 4):
    from nsysdoc.testing import Capture

    cap = Capture()
    t = cap.process(pid=4242, name="javascript:alert(1)").thread()
    for i in range(steps):
        with t.range(f"ProfilerStep#{i}"):
            with t.range("<a href=\"javascript:alert(1)\">x</a>"):
                t.os_call("poll", us=3000)
                t.launch(kernel, us=900)
                t.launch("gemm_kernel", us=400)
            t.item()
    return cap


@pytest.mark.slow  # issue 50: job and report commands in processes (4.3 s of CPU); .ci/run runs it
def test_6_every_href_of_every_page_is_percent_encoded(tmp_path):
    # the job page, with each rank's report beside it (relative links that start with the names)
    jobdir, out = tmp_path / "job", tmp_path / "out"
    jobdir.mkdir()
    files = [c.write(jobdir / f"{n}.sqlite") for n, c in zip(HOSTILE_NAMES, ddp_job(ranks=2, steps=3, slow_rank=None))]
    before = sha(files)
    p = cli("job", jobdir, "-o", out / "job.html", "--rank-reports", out, "--no-config", "--no-cache", "-j", "1")
    assert p.returncode in (0, 1), p.stderr
    page = (out / "job.html").read_text(encoding="utf-8")
    links = [h for h in assert_safe_hrefs(page, "job page") if h.endswith(".nsysdoc.html")]
    assert sorted(unquote(h) for h in links) == sorted(f"{n}.nsysdoc.html" for n in HOSTILE_NAMES)
    assert all((out / unquote(h)).is_file() for h in links)  # the encoded link still names the file
    for report in out.glob("*.nsysdoc.html"):  # the rank reports are report pages
        assert_safe_hrefs(report.read_text(encoding="utf-8"), report.name)

    # the index page and report pages, of captures with hostile names inside and out
    caps = tmp_path / "caps"
    caps.mkdir()
    a = _hostile_capture("javascript:alert(document.domain)").write(caps / "javascript:alert(1).sqlite")
    b = _hostile_capture("data:text/html,<script>alert(1)</script>").write(caps / "x\"<img src=x>'#?%.sqlite")
    before.update(sha([a, b]))
    p = cli("report", a, b, "-o", tmp_path / "pages/", "--no-config", "--no-cache", "-q")
    assert p.returncode in (0, 1), p.stderr
    index = (tmp_path / "pages" / "index.html").read_text(encoding="utf-8")
    assert len([h for h in assert_safe_hrefs(index, "index") if h.endswith(".nsysdoc.html")]) == 2
    for page_path in (tmp_path / "pages").glob("*.nsysdoc.html"):
        assert len(assert_safe_hrefs(page_path.read_text(encoding="utf-8"), page_path.name)) > 5

    # the diff page
    p = cli("diff", a, b, "-o", tmp_path / "diff.html", "--no-config", "--no-cache", "-q")
    assert p.returncode in (0, 1), p.stderr
    assert len(assert_safe_hrefs((tmp_path / "diff.html").read_text(encoding="utf-8"), "diff page")) > 3
    assert sha(before) == before

    # the encoders themselves
    from nsysdoc.views.build import anchor_href, path_href, safe_href

    assert path_href("javascript:alert(1).html") == "javascript%3Aalert%281%29.html"
    assert path_href("//evil.example/x.html") == "/evil.example/x.html"
    assert path_href("d/a\"<b>'#?%.html") == "d/a%22%3Cb%3E%27%23%3F%25.html"
    assert anchor_href("glossary-x\"><script>") == "#glossary-x%22%3E%3Cscript%3E"
    for bad in ("javascript:alert(1)", "JavaScript:alert(1)", "data:text/html,x", "http://docs.nvidia.com/x",
                "https://evil.example/", "https://docs.nvidia.com.evil.example/", "https://user@pytorch.org/",
                "//docs.nvidia.com/x", "vbscript:x", "https://pytorch.org:444/"):
        assert safe_href(bad) is None, bad
    assert safe_href("https://docs.nvidia.com/nsight-systems/UserGuide/index.html#cuda-trace") == \
        "https://docs.nvidia.com/nsight-systems/UserGuide/index.html#cuda-trace"
    assert safe_href("https://pytorch.org/docs/stable/profiler.html?a=<b>") == \
        "https://pytorch.org/docs/stable/profiler.html?a=%3Cb%3E"
    assert safe_href("#glossary-a b") == "#glossary-a%20b"


# ---------------------------------------------------------------------------------------------
# 7. what the job hands the command line to print is one printable line
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow  # issue 50: a Dask cluster (6.3 s of CPU); .ci/run runs it
def test_7_worker_errors_and_refusals_are_one_printable_line(hostile_cluster, two_ranks):
    from nsysdoc.jobs import run_job

    address, mode = hostile_cluster
    files = [str(p) for p in two_ranks]
    mode.write_text("raise")  # the worker's exception text holds escapes and a newline
    d = run_job(files, {"no_cache": True}, dask=address)
    err = next(r["error"] for r in d["ranks"] if not r["ok"])
    assert err.startswith("Dask task failed: RuntimeError: boom") and "second line" in err
    assert printable(err) and "\n" not in err, repr(err)
    assert all(printable(w) for w in d["warnings"])
    p = cli("job", *files, "--dask", address, "-f", "json", "--no-config", "--no-cache", timeout=120)
    assert p.returncode in (0, 1), p.stderr
    assert re.search(r"^nsysdoc: \[[12]/2\] rank1\.sqlite: failed: Dask task failed: RuntimeError: boom .*second line$",
                     p.stderr, re.MULTILINE), p.stderr
    assert printable(p.stderr), repr(p.stderr)
    mode.write_text("extra-field")  # a field name with an escape: the refusal quotes it printable
    with pytest.raises(InputError) as e:
        run_job(files, {"no_cache": True}, dask=address)
    assert "pwned" in e.value.message and printable(e.value.message)
