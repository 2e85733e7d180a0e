"""End to end: ``nsysdoc capture -- python -c ...`` and ``nsysdoc report x.nsys-rep`` with a fake nsys."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# issue 50: every test runs capture/report with a fake nsys in processes (1-1.8 s of CPU each); README's command leaves them to .ci/run
pytestmark = pytest.mark.slow

FAKE_SRC = Path(__file__).parent / "fake_nsys" / "nsys"
ROOT = Path(__file__).resolve().parent.parent


def _with_package(e: dict) -> dict:
    """Subprocesses run in other folders: make sure they import this checkout's nsysdoc."""
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), e.get("PYTHONPATH")]))
    return e


@pytest.fixture
def env(tmp_path, build):
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    target = bin_dir / "nsys"
    target.write_text(f"#!{sys.executable}\n" + FAKE_SRC.read_text().split("\n", 1)[1])
    target.chmod(0o755)
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_NSYS") and k != "NSYS"}
    e["PATH"] = f"{bin_dir}{os.pathsep}{e.get('PATH', '')}"
    e["FAKE_NSYS_LOG"] = str(tmp_path / "log.jsonl")
    e["FAKE_NSYS_EXPORT_FIXTURE"] = str(build("sync_storm"))
    return _with_package(e)


def nsysdoc(args, env, cwd, **kw):
    return subprocess.run([sys.executable, "-m", "nsysdoc", *map(str, args)], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120, **kw)


def logged(env) -> list[list[str]]:
    return [json.loads(line)["argv"] for line in Path(env["FAKE_NSYS_LOG"]).read_text().splitlines()]


def test_capture_profiles_exports_and_reports(env, tmp_path):
    out = tmp_path / "runs"
    proc = nsysdoc(["capture", "--output-dir", out, "--output-name", "train", "--",
                    sys.executable, "-c", "print('hello from training')"], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "hello from training" in proc.stdout  # the program's output is streamed through
    assert (out / "train.nsys-rep").exists() and (out / "train.sqlite").exists()
    assert (out / "train.nsysdoc.html").exists()
    report = json.loads((out / "train.nsysdoc.json").read_text())
    assert report["summary"]["step_count"] == 5
    profile = next(a for a in logged(env) if len(a) > 1 and a[1] == "profile" and "--help" not in a)
    assert "--trace=cuda,nvtx,osrt" in profile and "--stats=false" in profile and "--force-overwrite=true" in profile
    assert profile[-3:] == [sys.executable, "-c", "print('hello from training')"]
    export = next(a for a in logged(env) if len(a) > 1 and a[1] == "export")
    assert "--type=sqlite" in export or ["--type", "sqlite"] == export[export.index("--type"):export.index("--type") + 2]


def test_program_failure_is_propagated_and_still_reported(env, tmp_path):
    proc = nsysdoc(["capture", "--output-dir", tmp_path, "--output-name", "bad", "--",
                    sys.executable, "-c", "import sys; sys.exit(3)"], env, tmp_path)
    assert proc.returncode == 3
    assert "program failed (exit code 3)" in proc.stderr
    assert (tmp_path / "bad.nsysdoc.json").exists()


def test_nsys_not_found(tmp_path):
    e = {k: v for k, v in os.environ.items() if k != "NSYS"}
    e["PATH"] = str(tmp_path)  # nothing there
    _with_package(e)
    proc = subprocess.run([sys.executable, "-m", "nsysdoc", "capture", "--", "python", "-c", "pass"], env=e,
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "nsys" in proc.stderr and ("NSYS" in proc.stderr or "--nsys" in proc.stderr)


def test_nsys_failure_shows_stderr(env, tmp_path):
    env["FAKE_NSYS_MODE"] = "fail-profile"
    proc = nsysdoc(["capture", "--output-dir", tmp_path, "--", sys.executable, "-c", "pass"], env, tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


def _sigint_as_a_terminal_gives_it() -> None:
    """A shell without job control starts background jobs with SIGINT ignored (``pytest &``,
    nohup batches), and Python keeps it ignored: Ctrl-C would never reach nsysdoc."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_still_reports(env, tmp_path):
    env["FAKE_NSYS_MODE"] = "sleep"
    p = subprocess.Popen([sys.executable, "-m", "nsysdoc", "capture", "--output-dir", str(tmp_path), "--output-name",
                          "int", "--", sys.executable, "-c", "pass"], env=env, cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=_sigint_as_a_terminal_gives_it)
    deadline = time.time() + 20
    while time.time() < deadline and not any(len(a) > 1 and a[1] == "profile" and "--help" not in a
                                             for a in (logged(env) if Path(env["FAKE_NSYS_LOG"]).exists() else [])):
        time.sleep(0.1)
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "interrupted" in err
    assert (tmp_path / "int.nsysdoc.json").exists()


@pytest.mark.slow  # issue 50: report and fake nsys in processes (1.8 s of CPU); .ci/run runs it
def test_report_on_nsys_rep_exports_first(env, tmp_path):
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"fake report")
    proc = nsysdoc(["report", rep, "-o", tmp_path / "r.json"], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "run.sqlite").exists()
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["step_count"] == 5
    # a second report reuses the export (newer than the report): no second nsys export
    proc = nsysdoc(["report", rep, "-o", tmp_path / "r2.json"], env, tmp_path)
    assert proc.returncode == 0
    assert sum(1 for a in logged(env) if len(a) > 1 and a[1] == "export") == 1


def test_report_directory_argument(env, tmp_path, build):
    d = tmp_path / "ranks"
    d.mkdir()
    for name in ("healthy_training", "sync_storm"):
        (d / f"{name}.sqlite").write_bytes(build(name).read_bytes())
    proc = nsysdoc(["report", d, "-o", tmp_path / "out", "--format", "json"], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len(list((tmp_path / "out").glob("*.nsysdoc.json"))) == 2


def test_diff_exports_a_nsys_rep_side(env, tmp_path, build):
    """``nsysdoc diff run.nsys-rep base.sqlite``: the .nsys-rep side is exported with nsys export
    (the fake writes the sync_storm fixture), then compared."""
    rep = tmp_path / "after.nsys-rep"
    rep.write_bytes(b"fake report")
    base = build("healthy_training")
    proc = nsysdoc(["diff", base, rep, "-f", "json", "-q", "--no-config"], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert d["candidate"]["input"] == str(rep) and d["candidate"]["path"].endswith("after.sqlite")
    assert any(argv[1] == "export" and argv[-1] == str(rep) for argv in logged(env))
    # sync_storm reads 40 scalars per step where healthy_training reads one
    assert d["sync_calls_per_step"] == {"base": 1.0, "candidate": 40.0}
    assert "host-sync" in {f["rule"] for f in d["findings"]["new"]}
