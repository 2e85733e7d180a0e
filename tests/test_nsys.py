"""Tests for nsysdoc.nsys (capture + export), run against the fake nsys in tests/fake_nsys/."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from datetime import datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from nsysdoc import nsys as N  # noqa: E402
from nsysdoc.errors import InputError, NsysFailedError, NsysNotFoundError, UsageError  # noqa: E402

FAKE_SRC = ROOT / "tests" / "fake_nsys" / "nsys"
NOW = datetime(2026, 11, 29, 11, 46, 30)
PY = sys.executable
BASE = ["--trace=cuda,nvtx,osrt", "--sample=none", "--cuda-memory-usage=false", "--stats=false"]


class Fake:
    """The fake nsys installed first on PATH; ``log()`` returns its recorded invocations."""

    def __init__(self, bin_dir: Path, log_path: Path) -> None:
        self.bin_dir = bin_dir
        self.path = str(bin_dir / "nsys")
        self.log_path = log_path

    def log(self, sub: str | None = None) -> list[dict]:
        if not self.log_path.exists():
            return []
        entries = [json.loads(line) for line in self.log_path.read_text().splitlines() if line.strip()]
        if sub is not None:
            entries = [e for e in entries if len(e["argv"]) > 1 and e["argv"][1] == sub and "--help" not in e["argv"]]
        return entries


@pytest.fixture
def fake(tmp_path, monkeypatch) -> Fake:
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    # Copy with this interpreter as shebang and the exec bit set, whatever the checkout kept.
    body = FAKE_SRC.read_text().split("\n", 1)[1]
    target = bin_dir / "nsys"
    target.write_text(f"#!{PY}\n{body}")
    target.chmod(0o755)
    log_path = tmp_path / "nsys-log.jsonl"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_NSYS_LOG", str(log_path))
    for var in ("FAKE_NSYS_MODE", "FAKE_NSYS_EXPORT_FIXTURE", "FAKE_NSYS_HELP", "FAKE_NSYS_VERSION_TEXT",
                "NSYS", "NSYS_NVTX_PROFILER_REGISTER_ONLY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NSYSDOC_CACHE_DIR", str(tmp_path / "cache"))
    return Fake(bin_dir, log_path)


@pytest.fixture
def quiet():
    with open(os.devnull, "w") as sink:
        yield sink


def argv_of(opts: N.CaptureOptions, cmd=("python", "train.py"), **kw) -> list[str]:
    return N.build_profile_argv("nsys", opts, list(cmd), now=NOW, **kw)


# --------------------------------------------------------------------------------------------
# argv building
# --------------------------------------------------------------------------------------------

def test_profile_argv_defaults():
    assert argv_of(N.CaptureOptions()) == [
        "nsys", "profile", *BASE,
        "--output=nsysdoc-train-20261129-114630", "--force-overwrite=true",
        "python", "train.py",
    ]


def test_profile_argv_every_option():
    opts = N.CaptureOptions(
        output_dir="runs", output_name="myrun.nsys-rep", trace_cudnn=True, trace_cublas=True,
        cpu_sampling=True, delay_s=5, duration_s=30.0, capture_range="cudaprofilerapi",
        capture_range_end="stop", gpu_metrics_devices="0,1", cuda_graph_node=True,
        python_backtrace=True, extra_args=["--trace-fork-before-exec=true", "--cpuctxsw=none"],
    )
    assert argv_of(opts, cmd=["torchrun", "--nproc_per_node=2", "train.py", "--lr", "3e-4"]) == [
        "nsys", "profile",
        "--trace=cuda,nvtx,osrt,cudnn,cublas", "--sample=process-tree",
        "--cuda-memory-usage=false", "--stats=false",
        f"--output={os.path.join('runs', 'myrun')}", "--force-overwrite=true",
        "--delay=5", "--duration=30",
        "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
        "--gpu-metrics-devices=0,1",
        "--cuda-graph-trace=node",
        "--cudabacktrace=sync", "--python-backtrace=cuda",
        "--trace-fork-before-exec=true", "--cpuctxsw=none",
        "torchrun", "--nproc_per_node=2", "train.py", "--lr", "3e-4",
    ]


def test_profile_argv_nvtx_capture_range():
    opts = N.CaptureOptions(output_name="r", capture_range="nvtx", nvtx_capture="train_step@*")
    assert argv_of(opts) == [
        "nsys", "profile", *BASE, "--output=r", "--force-overwrite=true",
        "--capture-range=nvtx", "--nvtx-capture=train_step@*", "python", "train.py",
    ]


def test_python_backtrace_turns_on_cpu_sampling():
    argv = argv_of(N.CaptureOptions(output_name="r", python_backtrace=True))
    assert "--sample=process-tree" in argv and "--sample=none" not in argv
    assert argv.index("--cudabacktrace=sync") < argv.index("--python-backtrace=cuda") < argv.index("python")


def test_cpu_sampling_alone():
    argv = argv_of(N.CaptureOptions(output_name="r", cpu_sampling=True))
    assert "--sample=process-tree" in argv and not any(a.startswith("--cudabacktrace") for a in argv)


def test_old_nsys_spellings():
    opts = N.CaptureOptions(output_name="r", cpu_sampling=True, gpu_metrics_devices="all")
    old_switches = N.parse_profile_switches("--trace= --output= --sample= --gpu-metrics-device= --stats=")
    argv = argv_of(opts, version=(2021, 4, 1), switches=old_switches)
    assert "--sample=cpu" in argv and "--gpu-metrics-device=all" in argv
    argv = argv_of(opts, version=(2024, 6, 2))
    assert "--sample=process-tree" in argv and "--gpu-metrics-devices=all" in argv


def test_gpu_metrics_none_emits_nothing():
    assert not any("gpu-metrics" in a for a in argv_of(N.CaptureOptions(output_name="r", gpu_metrics_devices="none")))


def test_delay_zero_is_omitted():
    assert not any(a.startswith("--delay") for a in argv_of(N.CaptureOptions(output_name="r", delay_s=0)))


@pytest.mark.parametrize("kwargs, needle", [
    (dict(nvtx_capture="step"), "--nvtx-capture needs --capture-range=nvtx"),
    (dict(nvtx_capture="step", capture_range="cudaProfilerApi"), "--nvtx-capture needs"),
    (dict(capture_range="nvtx"), "needs --nvtx-capture"),
    (dict(capture_range="hotkey"), "--capture-range must be"),
    (dict(capture_range_end="stop"), "--capture-range-end needs"),
    (dict(capture_range="cudaProfilerApi", capture_range_end="sometimes"), "--capture-range-end must be"),
    (dict(duration_s=0), "--duration must be > 0"),
    (dict(delay_s=-1), "--delay must be >= 0"),
    (dict(duration_s=2.5), "whole seconds"),
    (dict(gpu_metrics_devices="help"), "only lists devices"),
    (dict(gpu_metrics_devices="gpu0"), "--gpu-metrics-devices must be"),
    (dict(output_name="run-%p"), "may not contain '%'"),
    (dict(extra_args=["-o", "elsewhere"]), "would move the report"),
    (dict(extra_args=["--output=elsewhere"]), "would move the report"),
])
def test_inconsistent_options_are_usage_errors(kwargs, needle):
    kwargs.setdefault("output_name", "r")
    with pytest.raises(UsageError) as exc:
        argv_of(N.CaptureOptions(**kwargs))
    assert needle in exc.value.message
    assert "\n" not in exc.value.message


def test_empty_command_is_usage_error():
    with pytest.raises(UsageError, match="no command"):
        N.build_profile_argv("nsys", N.CaptureOptions(), [], now=NOW)


@pytest.mark.parametrize("cmd, name", [
    (["python", "train.py"], "nsysdoc-train-20261129-114630"),
    (["python3.11", "-u", "scripts/pretrain_gpt.py", "--x"], "nsysdoc-pretrain_gpt-20261129-114630"),
    (["python", "-m", "torch.distributed.run", "--nproc_per_node", "8", "-m", "mypkg.train"],
     "nsysdoc-run-20261129-114630"),
    (["torchrun", "--nproc_per_node=8", "train_llm.py"], "nsysdoc-train_llm-20261129-114630"),
    (["./bin/my trainer!"], "nsysdoc-my-trainer-20261129-114630"),
    (["bash", "-c", "true"], "nsysdoc-true-20261129-114630"),
])
def test_default_output_name(cmd, name):
    assert N.default_output_name(cmd, NOW) == name


def test_export_argv():
    assert N.build_export_argv("/opt/nsys", "a/run.nsys-rep", "a/run.sqlite") == [
        "/opt/nsys", "export", "--type=sqlite", "--output=a/run.sqlite", "--force-overwrite=true", "a/run.nsys-rep",
    ]


def test_check_flag_support():
    argv = argv_of(N.CaptureOptions(output_name="r", python_backtrace=True))
    N.check_flag_support((2024, 6, 2), argv, None)  # nothing known: no complaint
    old = N.parse_profile_switches("-t, --trace= -o, --output= -s, --sample= --cudabacktrace= --stats= "
                                   "--cuda-memory-usage= --force-overwrite=")
    with pytest.raises(NsysFailedError) as exc:
        N.check_flag_support((2023, 1, 2), argv, old)
    assert exc.value.message == "nsys 2023.1.2 is too old for --python-backtrace (not listed by `nsys profile --help`)"
    # an unrecognisable help text never blocks a capture
    N.check_flag_support((2023, 1, 2), argv, frozenset({"--foo"}))
    assert "--python-backtrace" not in old
    # documented minimum: --sample=process-tree (2022.1 guide; 2021.4 documented --sample=cpu)
    with pytest.raises(NsysFailedError, match=r"nsys 2021\.3 is too old for --sample=process-tree \(needs 2022\.1\)"):
        N.check_flag_support((2021, 3), ["nsys", "profile", "--sample=process-tree", "x"])


# --------------------------------------------------------------------------------------------
# finding nsys, version
# --------------------------------------------------------------------------------------------

def test_find_nsys_precedence(fake, tmp_path):
    other = tmp_path / "other" / "nsys"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    env = {"PATH": str(fake.bin_dir), "NSYS": str(other)}
    assert N.find_nsys(None, env) == str(other)
    assert N.find_nsys(fake.path, env) == fake.path
    assert N.find_nsys(None, {"PATH": str(fake.bin_dir)}) == fake.path
    with pytest.raises(NsysNotFoundError, match="--nsys /nope/nsys"):
        N.find_nsys("/nope/nsys", env)
    with pytest.raises(NsysNotFoundError, match="NSYS=/nope"):
        N.find_nsys(None, {"PATH": str(fake.bin_dir), "NSYS": "/nope"})


def test_find_nsys_not_installed():
    with pytest.raises(NsysNotFoundError) as exc:
        N.find_nsys(None, {"PATH": ""}, fallback_globs=())
    err = exc.value
    assert "not found" in err.message and "\n" not in err.message
    for needle in ("CUDA Toolkit", "standalone", "NSYS=/path/to/nsys", "--nsys PATH"):
        assert needle in err.hint


def test_find_nsys_fallback_dirs(fake):
    assert N.find_nsys(None, {"PATH": ""}, fallback_globs=[str(fake.bin_dir / "ns*")]) == fake.path


def test_nsys_version(fake, monkeypatch):
    assert N.nsys_version(fake.path) == (2024, 6, 2, 225)
    monkeypatch.setenv("FAKE_NSYS_VERSION_TEXT", "NVIDIA Nsight Systems version 2023.1.2.43-32377213v0")
    assert N.nsys_version(fake.path) == (2023, 1, 2, 43)
    monkeypatch.setenv("FAKE_NSYS_VERSION_TEXT", "garbage")
    assert N.nsys_version(fake.path) is None
    assert N.nsys_version("/no/such/nsys") is None
    assert N.parse_nsys_version("NVIDIA Nsight Systems version 2025.1.1.65-251135540420v0") == (2025, 1, 1, 65)


def test_profile_switches_from_help(fake, monkeypatch):
    assert {"--python-backtrace", "--gpu-metrics-devices", "--trace"} <= N.nsys_profile_switches(fake.path)
    monkeypatch.setenv("FAKE_NSYS_HELP", "old")
    old = N.nsys_profile_switches(fake.path)
    assert "--python-backtrace" not in old and "--gpu-metrics-device" in old


# --------------------------------------------------------------------------------------------
# run_capture
# --------------------------------------------------------------------------------------------

def test_capture_streams_output_and_exports(fake, tmp_path, capfd):
    opts = N.CaptureOptions(output_dir=str(tmp_path / "out"), output_name="ok")
    res = N.run_capture(fake.path, opts, [PY, "-c", "import sys; print('hello from the program'); "
                                                    "print('to stderr', file=sys.stderr)"])
    out, err = capfd.readouterr()
    assert "hello from the program" in out  # inherited stdout
    assert "to stderr" in err and "Collecting data..." in err  # forwarded stderr
    assert res.program_exit_code == 0 and not res.interrupted
    assert res.rep_path == str(tmp_path / "out" / "ok.nsys-rep") and Path(res.rep_path).is_file()
    assert res.sqlite_path == str(tmp_path / "out" / "ok.sqlite") and N.is_nsys_export(res.sqlite_path)
    assert Path(res.sqlite_path + ".nsysdoc").is_file()  # ownership marker
    assert res.diagnosis is None and res.export_error is None
    assert "Generated:" in res.nsys_stderr_tail
    assert res.nsys_version == (2024, 6, 2, 225)
    (profile,) = fake.log("profile")
    assert profile["argv"] == res.argv
    (export,) = fake.log("export")
    assert export["argv"][:3] == [fake.path, "export", "--type=sqlite"]


def test_capture_propagates_exit_code_and_still_exports(fake, tmp_path, quiet):
    opts = N.CaptureOptions(output_dir=str(tmp_path), output_name="fails")
    res = N.run_capture(fake.path, opts, [PY, "-c", "import sys; sys.exit(3)"], stderr_sink=quiet)
    assert res.program_exit_code == 3
    assert Path(res.rep_path).is_file() and res.sqlite_path and N.is_nsys_export(res.sqlite_path)
    assert len(fake.log("export")) == 1


def test_capture_nsys_fails_without_report(fake, tmp_path, monkeypatch, quiet):
    monkeypatch.setenv("FAKE_NSYS_MODE", "fail-profile")
    opts = N.CaptureOptions(output_dir=str(tmp_path), output_name="broken")
    with pytest.raises(NsysFailedError) as exc:
        N.run_capture(fake.path, opts, ["true"], stderr_sink=quiet)
    assert "wrote no report" in exc.value.message and "exit 1" in exc.value.message
    assert "Failed to start the profiling session" in exc.value.hint
    assert "fake line 1" in exc.value.hint  # the stderr tail
    assert fake.log("export") == []


def test_capture_export_failure_keeps_report(fake, tmp_path, monkeypatch, quiet):
    monkeypatch.setenv("FAKE_NSYS_MODE", "fail-export")
    res = N.run_capture(fake.path, N.CaptureOptions(output_dir=str(tmp_path), output_name="x"), ["true"],
                        stderr_sink=quiet)
    assert Path(res.rep_path).is_file() and res.sqlite_path is None
    assert "nsys export failed" in res.export_error and "fake export failure" in res.export_error
    assert not list(tmp_path.glob("*.sqlite")) and not list(tmp_path.glob(".*tmp*"))


def test_capture_cupti_error_is_diagnosed(fake, tmp_path, monkeypatch, quiet):
    monkeypatch.setenv("FAKE_NSYS_MODE", "cupti-error")
    res = N.run_capture(fake.path, N.CaptureOptions(output_dir=str(tmp_path), output_name="c"), ["true"],
                        stderr_sink=quiet)
    assert res.sqlite_path and "driver" in res.diagnosis and "mismatch" in res.diagnosis


def test_capture_without_cuda_tables_suggests_fork_tracing(fake, tmp_path, monkeypatch, quiet):
    monkeypatch.setenv("FAKE_NSYS_MODE", "no-cuda")
    res = N.run_capture(fake.path, N.CaptureOptions(output_dir=str(tmp_path), output_name="n"), ["true"],
                        stderr_sink=quiet)
    assert "--trace-fork-before-exec=true" in res.diagnosis


def test_capture_nvtx_range_enables_unregistered_strings(fake, tmp_path, quiet):
    opts = N.CaptureOptions(output_dir=str(tmp_path), output_name="v", capture_range="nvtx", nvtx_capture="step@*")
    N.run_capture(fake.path, opts, ["true"], stderr_sink=quiet)
    (profile,) = fake.log("profile")
    assert profile["env"]["NSYS_NVTX_PROFILER_REGISTER_ONLY"] == "0"
    assert "--nvtx-capture=step@*" in profile["argv"]


def test_capture_refuses_flags_old_nsys_lacks(fake, tmp_path, monkeypatch, quiet):
    monkeypatch.setenv("FAKE_NSYS_HELP", "old")
    monkeypatch.setenv("FAKE_NSYS_VERSION_TEXT", "NVIDIA Nsight Systems version 2023.1.2.43-32377213v0")
    opts = N.CaptureOptions(output_dir=str(tmp_path), output_name="o", python_backtrace=True)
    with pytest.raises(NsysFailedError, match=r"nsys 2023\.1\.2\.43 is too old for --python-backtrace"):
        N.run_capture(fake.path, opts, ["true"])
    assert fake.log("profile") == []
    # and it picks the old --gpu-metrics-device spelling there
    opts = N.CaptureOptions(output_dir=str(tmp_path), output_name="g", gpu_metrics_devices="all")
    res = N.run_capture(fake.path, opts, ["true"], stderr_sink=quiet)
    assert "--gpu-metrics-device=all" in res.argv


CTRL_C_SCRIPT = textwrap.dedent("""
    import json, signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with SIGINT ignored
    sys.path.insert(0, sys.argv[1])
    from nsysdoc import nsys as N
    res = N.run_capture(N.find_nsys(), N.CaptureOptions(output_dir=sys.argv[2], output_name="cc"),
                        ["sleep", "30"])
    print(json.dumps({"rep": res.rep_path, "sqlite": res.sqlite_path, "interrupted": res.interrupted,
                      "code": res.program_exit_code}))
""")


def test_ctrl_c_stops_nsys_once_and_exports(fake, tmp_path):
    env = dict(os.environ, FAKE_NSYS_MODE="sleep")
    child = subprocess.Popen([PY, "-c", CTRL_C_SCRIPT, str(ROOT), str(tmp_path)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 15
        while not fake.log("profile"):
            assert time.monotonic() < deadline, "fake nsys never started"
            assert child.poll() is None, child.communicate()
            time.sleep(0.02)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err
    res = json.loads(out.strip().splitlines()[-1])
    assert res["interrupted"] is True and res["code"] == 130
    assert Path(res["rep"]).is_file() and N.is_nsys_export(res["sqlite"])
    assert "Stopping data collection (SIGINT)." in err
    assert len(fake.log("export")) == 1


# --------------------------------------------------------------------------------------------
# explain_capture_failure
# --------------------------------------------------------------------------------------------

CUDA = {"StringIds", "META_DATA_EXPORT", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"}


@pytest.mark.parametrize("stderr, tables, needle", [
    ("nsys: unrecognised option '--python-backtrace=cuda'", None, "too old for that option"),
    ("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission", CUDA, "--cap-add SYS_ADMIN"),
    ("None of the installed GPUs are supported: ... Insufficient privilege", CUDA, "--privileged"),
    ("error CUPTI_ERROR_INSUFFICIENT_PRIVILEGES.", None, "/dev/nvidia*"),
    ("python: symbol lookup error: /opt/nsys/libToolsInjection64.so: undefined symbol: cuGetProcAddress_v2",
     None, "driver"),
    ("CUPTI_ERROR_NOT_INITIALIZED", {"StringIds"}, "mismatch"),
    ("Unable to initialize CUPTI", None, "mismatch"),
    ("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED", CUDA, "torch.profiler"),
    ("Collecting data...\nGenerated:", {"StringIds", "META_DATA_EXPORT", "OSRT_API"}, "--trace-fork-before-exec=true"),
    ("WARNING: CPU IP/backtrace sampling not supported, disabling.\n"
     "Try the 'nsys status --environment' command to learn more.", CUDA, "perf_event_paranoid"),
])
def test_explain_capture_failure(stderr, tables, needle):
    line = N.explain_capture_failure(stderr, tables)
    assert line is not None and needle in line and "\n" not in line


def test_explain_capture_failure_clean_run():
    assert N.explain_capture_failure("Collecting data...\nGenerated:\n  run.nsys-rep", CUDA) is None
    assert N.explain_capture_failure("", None) is None


# --------------------------------------------------------------------------------------------
# ensure_sqlite
# --------------------------------------------------------------------------------------------

def make_rep(folder: Path, name="run") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rep = folder / f"{name}.nsys-rep"
    rep.write_text("FAKE NSYS REPORT\n")
    return rep


def make_export(path: Path, *, mtime_from: Path | None = None, offset_s: float = 0.0) -> Path:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    con.execute("CREATE TABLE EXPORT_META_DATA (name TEXT, value TEXT)")  # older spelling
    con.commit()
    con.close()
    if mtime_from is not None:
        t = mtime_from.stat().st_mtime + offset_s
        os.utime(path, (t, t))
    return path


def test_ensure_sqlite_reuses_fresh_export_without_nsys(tmp_path, fake):
    rep = make_rep(tmp_path / "d")
    db = make_export(tmp_path / "d" / "run.sqlite", mtime_from=rep, offset_s=5)
    assert N.ensure_sqlite(rep, nsys="/no/such/nsys") == str(db)
    assert fake.log() == []


def test_ensure_sqlite_exports_next_to_report(tmp_path, fake):
    rep = make_rep(tmp_path / "d")
    out = N.ensure_sqlite(rep)
    assert out == str(tmp_path / "d" / "run.sqlite") and N.is_nsys_export(out)
    assert N.owned_by_us(out, rep)
    assert N.ensure_sqlite(rep) == out  # second call: reused
    assert len(fake.log("export")) == 1


def test_ensure_sqlite_reexports_its_own_stale_export(tmp_path, fake):
    rep = make_rep(tmp_path / "d")
    out = N.ensure_sqlite(rep)
    t = Path(out).stat().st_mtime + 10  # the report is re-captured: newer than our export
    os.utime(rep, (t, t))
    assert N.ensure_sqlite(rep) == out
    assert len(fake.log("export")) == 2
    assert N.owned_by_us(out, rep)


@pytest.mark.parametrize("kind", ["stale-export", "other-sqlite", "not-sqlite"])
def test_ensure_sqlite_never_overwrites_users_file(tmp_path, fake, kind):
    rep = make_rep(tmp_path / "d")
    user = tmp_path / "d" / "run.sqlite"
    if kind == "stale-export":
        make_export(user, mtime_from=rep, offset_s=-60)
    elif kind == "other-sqlite":
        con = sqlite3.connect(user)
        con.execute("CREATE TABLE notes (x)")
        con.commit()
        con.close()
    else:
        user.write_text("my notes, not a database")
    before = user.read_bytes(), user.stat().st_mtime_ns
    out = N.ensure_sqlite(rep)
    assert Path(out).parent.parent == tmp_path / "cache"  # NSYSDOC_CACHE_DIR from the fixture
    assert N.is_nsys_export(out)
    assert (user.read_bytes(), user.stat().st_mtime_ns) == before
    assert N.ensure_sqlite(rep) == out and len(fake.log("export")) == 1  # cache reused


def test_ensure_sqlite_user_modified_our_export(tmp_path, fake):
    rep = make_rep(tmp_path / "d")
    out = Path(N.ensure_sqlite(rep))
    con = sqlite3.connect(out)  # the user adds a table: no longer "ours"
    con.execute("CREATE TABLE my_notes (x)")
    con.commit()
    con.close()
    t = out.stat().st_mtime - 30
    os.utime(out, (t, t))
    t = out.stat().st_mtime + 60
    os.utime(rep, (t, t))  # report newer again -> needs an export, but not over the user's edit
    assert not N.owned_by_us(out, rep)
    assert Path(N.ensure_sqlite(rep)).parent.parent == tmp_path / "cache"


def test_ensure_sqlite_unwritable_folder_goes_to_cache(tmp_path, fake):
    rep = make_rep(tmp_path / "ro")
    out = N.ensure_sqlite(rep, is_writable=lambda folder: False, cache_dir=tmp_path / "c2")
    assert Path(out).parent.parent == tmp_path / "c2" and Path(out).name == "run.sqlite"
    assert not (tmp_path / "ro" / "run.sqlite").exists()
    assert N.ensure_sqlite(rep, is_writable=lambda folder: False, cache_dir=tmp_path / "c2") == out
    assert len(fake.log("export")) == 1


def test_ensure_sqlite_chmod_readonly_folder(tmp_path, fake):
    rep = make_rep(tmp_path / "ro")
    (tmp_path / "ro").chmod(0o555)
    try:
        if os.access(tmp_path / "ro", os.W_OK):
            pytest.skip("running as root: chmod does not block writes (covered by is_writable injection)")
        out = N.ensure_sqlite(rep)
        assert Path(out).parent.parent == tmp_path / "cache"
    finally:
        (tmp_path / "ro").chmod(0o755)


def test_ensure_sqlite_cache_key_changes_with_report(tmp_path):
    rep = make_rep(tmp_path)
    a = N.cache_path_for(rep, tmp_path / "c")
    rep.write_text("FAKE NSYS REPORT, captured again with more data\n")
    assert N.cache_path_for(rep, tmp_path / "c") != a


def test_default_cache_dir():
    assert N.default_cache_dir({"NSYSDOC_CACHE_DIR": "/x/c", "XDG_CACHE_HOME": "/y"}) == Path("/x/c")
    assert N.default_cache_dir({"XDG_CACHE_HOME": "/y"}) == Path("/y/nsysdoc")
    assert N.default_cache_dir({}) == Path("~/.cache/nsysdoc").expanduser()


def test_ensure_sqlite_errors(tmp_path, fake, monkeypatch):
    with pytest.raises(InputError, match="no such file"):
        N.ensure_sqlite(tmp_path / "missing.nsys-rep")
    rep = make_rep(tmp_path / "d")
    with pytest.raises(NsysNotFoundError):
        N.ensure_sqlite(rep, nsys=str(tmp_path / "nope"))
    monkeypatch.setenv("FAKE_NSYS_MODE", "fail-export")
    with pytest.raises(NsysFailedError) as exc:
        N.ensure_sqlite(rep)
    assert "fake export failure" in exc.value.hint
    assert not (tmp_path / "d" / "run.sqlite").exists()


def test_is_nsys_export(tmp_path):
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"\x00" * 2048)
    assert not N.is_nsys_export(junk)
    assert not N.is_nsys_export(tmp_path / "absent.sqlite")
    assert N.is_nsys_export(make_export(tmp_path / "ok.sqlite"))


# --------------------------------------------------------------------------------------------
# expand_inputs
# --------------------------------------------------------------------------------------------

def test_expand_inputs_directory(tmp_path):
    d = tmp_path / "caps"
    a_rep = make_rep(d, "a")
    make_export(d / "a.sqlite", mtime_from=a_rep, offset_s=10)  # newer sqlite wins
    b_rep = make_rep(d, "b")
    make_export(d / "b.sqlite", mtime_from=b_rep, offset_s=-10)  # stale sqlite: the report wins
    make_export(d / "c.sqlite")
    make_rep(d, "d")
    (d / "notes.txt").write_text("x")
    (d / "a.sqlite.nsysdoc").write_text("{}")
    (d / ".a.nsysdoc-tmp-1.sqlite").write_text("")
    assert N.expand_inputs([d]) == [
        str(d / "a.sqlite"), str(d / "b.nsys-rep"), str(d / "c.sqlite"), str(d / "d.nsys-rep"),
    ]


def test_expand_inputs_files_and_errors(tmp_path):
    one = make_rep(tmp_path, "one")
    two = make_export(tmp_path / "two.sqlite")
    assert N.expand_inputs([str(two), str(one), str(two)]) == [str(two), str(one)]
    with pytest.raises(InputError, match="no such file or directory"):
        N.expand_inputs([str(one), str(tmp_path / "missing.nsys-rep")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no .nsys-rep or .sqlite files"):
        N.expand_inputs([tmp_path / "empty"])


# --------------------------------------------------------------------------------------------
# --where: what attribution needs, when this nsys has it
# --------------------------------------------------------------------------------------------
def test_where_asks_for_operator_ranges_and_backtraces_with_cpu_sampling(fake, tmp_path, quiet):
    res = N.run_capture(fake.path, N.CaptureOptions(output_dir=str(tmp_path), output_name="w", where=True), ["true"],
                        stderr_sink=quiet)
    argv = fake.log("profile")[0]["argv"]
    assert "--pytorch=autograd-nvtx" in argv
    assert "--cudabacktrace=all" in argv and "--python-backtrace=cuda" in argv
    assert "--sample=process-tree" in argv  # backtraces need CPU sampling
    assert argv.index("--python-backtrace=cuda") < argv.index("true")
    assert res.where_missing == []


def test_where_on_an_older_nsys_uses_only_what_it_lists(fake, tmp_path, monkeypatch, quiet):
    monkeypatch.setenv("FAKE_NSYS_HELP", "old")  # no --pytorch, no --python-backtrace
    res = N.run_capture(fake.path, N.CaptureOptions(output_dir=str(tmp_path), output_name="w", where=True), ["true"],
                        stderr_sink=quiet)
    argv = fake.log("profile")[0]["argv"]
    assert not any(a.startswith(("--pytorch", "--python-backtrace", "--cudabacktrace")) for a in argv)
    assert "--sample=none" in argv
    assert res.where_missing == ["--pytorch", "--python-backtrace"]


def test_without_where_the_capture_is_a_baseline():
    argv = argv_of(N.CaptureOptions(output_name="r"))
    assert not any(a.startswith(("--pytorch", "--python-backtrace", "--cudabacktrace")) for a in argv)


def test_ensure_sqlite_cached_export_is_reused_only_when_sealed_as_ours(tmp_path, fake):
    """Issue 45 (bug 2, the export side): an export entry in the cache is reused only when it is
    this user's private folder sealed with its own key. A folder at that key that was not sealed
    (another capture's export renamed to the key) is exported again; one that another user can
    write to is refused in one line."""
    rep = make_rep(tmp_path / "ro")
    cdir = tmp_path / "c3"
    out = Path(N.ensure_sqlite(rep, is_writable=lambda folder: False, cache_dir=cdir))
    assert len(fake.log("export")) == 1
    # planted: the seal removed (an entry renamed from another key carries the other key's seal)
    for f in out.parent.iterdir():
        if f.name != out.name:
            f.unlink()
    assert N.ensure_sqlite(rep, is_writable=lambda folder: False, cache_dir=cdir) == str(out)
    assert len(fake.log("export")) == 2  # exported again, not served
    # a folder others can write to at the key: refused, nothing written into it
    out.parent.chmod(0o777)
    with pytest.raises(NsysFailedError, match="not a private folder of this user"):
        N.ensure_sqlite(rep, is_writable=lambda folder: False, cache_dir=cdir)


# --------------------------------------------------------------------------------------------
# --memory: GPU memory usage (issue 47), when this nsys has it
# --------------------------------------------------------------------------------------------
def test_memory_asks_for_cuda_memory_usage_when_nsys_lists_it(fake, tmp_path, quiet):
    res = N.run_capture(fake.path, N.CaptureOptions(output_dir=str(tmp_path), output_name="m", memory=True), ["true"],
                        stderr_sink=quiet)
    argv = fake.log("profile")[0]["argv"]
    assert "--cuda-memory-usage=true" in argv and "--cuda-memory-usage=false" not in argv
    assert argv.index("--cuda-memory-usage=true") < argv.index("true")
    assert res.memory_missing is False


def test_memory_on_an_nsys_without_the_switch_leaves_it_out(fake, tmp_path, monkeypatch, quiet):
    monkeypatch.setenv("FAKE_NSYS_HELP", "nomem")  # the help text does not list --cuda-memory-usage
    res = N.run_capture(fake.path, N.CaptureOptions(output_dir=str(tmp_path), output_name="m", memory=True), ["true"],
                        stderr_sink=quiet)
    argv = fake.log("profile")[0]["argv"]
    assert not any(a.startswith("--cuda-memory-usage") for a in argv)
    assert res.memory_missing is True


def test_without_memory_the_capture_keeps_memory_usage_off():
    assert "--cuda-memory-usage=false" in argv_of(N.CaptureOptions(output_name="r"))
    listed = N.parse_profile_switches("--trace= --output= --sample= --stats= --cuda-memory-usage=")
    assert "--cuda-memory-usage=true" in argv_of(N.CaptureOptions(output_name="r", memory=True), switches=listed)
