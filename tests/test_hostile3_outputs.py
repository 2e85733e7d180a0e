"""Issue 45 "Hardening III", outputs: one output guard for every writer, nsys' output read with a
cap, the terminal width clamped, no traceback for bad arguments, and every printed line free of
terminal escapes.

Each test builds its own input in a temporary folder, runs ``python -m nsysdoc`` in a subprocess
(``tests/hostile_cases.run_nsysdoc``: memory cap, timeout, peak RSS, isolated cache) or calls the
API, and checks the documented behaviour: exit code, one ``nsysdoc: error:`` line (and at most one
hint), every file the run reads unchanged (sha256, mode, owner), and time and memory bounded where
the bug was time or memory. The bug number of issue 45 is in each test's name.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from .hostile_cases import Skip, run_nsysdoc, sandbox_env, unprivileged_wrap

# issue 50: every test runs nsysdoc commands in processes (0.6-2 s of CPU each, 35 s in all); README's command leaves them to .ci/run
pytestmark = pytest.mark.slow

FAKE_NSYS = Path(__file__).parent / "fake_nsys" / "nsys"
#: an unprivileged user that "plants" links in shared folders (root is needed to chown to it)
OTHER_UID = 65534
STEPS = 16
KERNELS = STEPS * 3  # the capture below: 16 steps of 3 kernels (64 ms of GPU work: enough to judge)
#: a kernel name a latin-1 terminal cannot show ("convolution kernel" in Russian)
CYRILLIC = "ядро_свёртки"
#: what an attacker writes into a file name or a rule title: OSC 52 (set the clipboard), BEL, BS,
#: a C1 CSI (0x9b) colouring the rest red, a 7-bit CSI clearing the screen, a DCS string
ESCAPES = "\x1b]52;c;UEFZTE9BRA==\x07\x08\x9b31m\x1b[2J\x1bPqDCS\x1b\\"
PAYLOADS = ("52;c;", "UEFZTE9BRA", "31m", "2J", "qDCS")


# ---------------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------------
def _capture(kernel: str = "gemm_kernel"):
    from nsysdoc.testing import Capture

    cap = Capture()
    t = cap.process(pid=7100).thread()
    for i in range(STEPS):
        with t.range(f"ProfilerStep#{i}"):
            t.cpu(us=40)
            t.launch(kernel, us=4000)  # the dominant kernel: named in the summary
            t.launch("small_kernel_a", us=30)
            t.launch("small_kernel_b", us=30)
            t.sync_stream()
    return cap


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("h3-captures")
    return {"plain": _capture().write(d / "plain.sqlite"), "cyrillic": _capture(CYRILLIC).write(d / "cyr.sqlite")}


def _copy(captures, name: str, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(captures[name], dest)
    return dest


def _sha(p: Path) -> str:
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def _state(*paths: Path) -> dict:
    """What must not change: content, permission bits and owner of each file (links not followed
    for the entry itself, followed for the content)."""
    out = {}
    for p in paths:
        st = os.lstat(p)
        out[str(p)] = (stat.S_ISLNK(st.st_mode), st.st_uid, stat.S_IMODE(os.stat(p).st_mode), _sha(p))
    return out


def _env(tmp: Path, **extra) -> dict:
    return sandbox_env(tmp / "cache", {k: str(v) for k, v in extra.items()})


def _no_work(tmp: Path) -> bool:
    """Nothing was loaded: a report fills the (isolated) cache with the capture's tables."""
    cache = tmp / "cache"
    return not cache.exists() or not any(cache.iterdir())


def _assert_refused(run, *words: str) -> str:
    assert run.rc == 2, run.describe()
    lines = run.stderr.splitlines()
    assert lines and lines[0].startswith("nsysdoc: error: "), run.describe()
    assert len(lines) == 1 or (len(lines) == 2 and lines[1].startswith("nsysdoc: hint: ")), run.describe()
    assert "Traceback" not in run.stderr and "internal error" not in run.stderr, run.describe()
    for w in words:
        assert w in lines[0], (w, run.describe())
    return lines[0]


def _fake_nsys(tmp: Path, wrapper: str = "") -> dict:
    """A fake ``nsys`` on PATH (tests/fake_nsys), optionally behind a wrapper that runs first."""
    bin_dir = tmp / "fakebin"
    bin_dir.mkdir(exist_ok=True)
    real = bin_dir / "nsys-real"
    real.write_text(f"#!{sys.executable}\n" + FAKE_NSYS.read_text().split("\n", 1)[1])
    real.chmod(0o755)
    nsys = bin_dir / "nsys"
    if wrapper:
        nsys.write_text(f"#!{sys.executable}\nimport os, subprocess, sys\n{wrapper}\n"
                        f"os.execv(sys.executable, [sys.executable, {str(real)!r}, *sys.argv[1:]])\n")
        nsys.chmod(0o755)
    else:
        real.rename(nsys)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "FAKE_NSYS_LOG": str(tmp / "nsys.log"),
            "FAKE_NSYS_MODE": ""}


def _nsys_rep(folder: Path) -> Path:
    rep = folder / "run.nsys-rep"
    rep.write_text("FAKE NSYS REPORT\n")
    return rep


def _need_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: links owned by another user are made with lchown")


# ---------------------------------------------------------------------------------------------
# 1: the API's writers use the command line's guard
# ---------------------------------------------------------------------------------------------
def test_bug1_api_to_perfetto_refuses_what_the_report_read(captures, tmp_path):
    import nsysdoc
    from nsysdoc.errors import NsysdocError

    cap = _copy(captures, "plain", tmp_path / "run.sqlite")
    rules = tmp_path / "team"
    rules.mkdir()
    rule = rules / "team-probe.yaml"
    rule.write_text("id: team-probe\ntitle: Team probe\ncategory: gpu-utilization\nsummary: A team rule.\n"
                    "requires: [kernels]\nwhen: \"kernel_count > 0\"\nseverity: info\n"
                    "message: \"Kernels: {kernel_count}.\"\nverify: Look.\nfix: Fix.\n")
    before = _state(cap, rule)
    r = nsysdoc.report(cap, rules=[rules], no_config=True)
    for target in (cap, str(cap), rule, Path(f"{cap}-wal")):
        with pytest.raises(NsysdocError) as e:
            r.to_perfetto(target)
        assert "\n" not in e.value.message and "would overwrite" in e.value.message
    assert _state(cap, rule) == before and not Path(f"{cap}-wal").exists()
    out = r.to_perfetto(tmp_path / "trace.perfetto.json")  # anything else is written as before
    assert json.loads(out.read_text())["traceEvents"]


# ---------------------------------------------------------------------------------------------
# 2: -o over the export a .nsys-rep was exported to (and reused from)
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow  # issue 50: report commands in processes (2 s of CPU); .ci/run runs it
def test_bug2_report_of_nsys_rep_never_writes_over_its_export(captures, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    rep = _nsys_rep(work)
    env = _env(tmp_path, FAKE_NSYS_EXPORT_FIXTURE=captures["plain"], **_fake_nsys(tmp_path))
    first = run_nsysdoc(["report", rep, "-f", "json", "-o", tmp_path / "first.json"], cwd=work, env=env)
    assert first.rc in (0, 1), first.describe()
    export, marker = work / "run.sqlite", work / "run.sqlite.nsysdoc"
    assert export.is_file() and marker.is_file()  # exported beside the report, marked as nsysdoc's
    before = _state(rep, export, marker)
    for out in ("run.sqlite", "run.sqlite.nsysdoc", "run.sqlite-wal"):
        run = run_nsysdoc(["report", rep, "-f", "json", "-o", out], cwd=work, env=env)
        _assert_refused(run, out, "would overwrite")
        assert _state(rep, export, marker) == before
    assert not (work / "run.sqlite-wal").exists()


# ---------------------------------------------------------------------------------------------
# 3: -o over a file the same run reads, refused before any work
# ---------------------------------------------------------------------------------------------
def _wal_capture(captures, folder: Path) -> Path:
    """A capture whose ``-wal`` holds a committed transaction the database file lacks: the
    ``small_kernel_b`` launches deleted (a copy of both files taken while the writer still had
    them open, so the log was not checkpointed)."""
    src = _copy(captures, "plain", folder / "src" / "run.sqlite")
    con = sqlite3.connect(src)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    cur = con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE demangledName IN "
                      "(SELECT id FROM StringIds WHERE value = 'small_kernel_b')")
    assert cur.rowcount == STEPS
    con.commit()
    dest = folder / "run.sqlite"
    shutil.copyfile(src, dest)
    shutil.copyfile(f"{src}-wal", f"{dest}-wal")
    con.close()
    shutil.rmtree(src.parent)
    assert os.path.getsize(f"{dest}-wal") > 0
    return dest


@pytest.mark.parametrize("which", ["rules", "config", "found-config", "wal", "shm", "journal"])
def test_bug3_output_over_a_file_the_run_reads_is_refused_before_any_work(captures, tmp_path, which):
    work = tmp_path / "work"
    work.mkdir()
    cap = _wal_capture(captures, work) if which == "wal" else _copy(captures, "plain", work / "run.sqlite")
    args = ["report", cap, "-f", "json"]
    if which == "rules":
        d = work / "team"
        d.mkdir()
        target = d / "team-probe.yaml"
        target.write_text("id: team-probe\ntitle: Team probe\ncategory: gpu-utilization\nsummary: A team rule.\n"
                          "requires: [kernels]\nwhen: \"kernel_count > 0\"\nseverity: info\n"
                          "message: \"Kernels: {kernel_count}.\"\nverify: Look.\nfix: Fix.\n")
        args += ["--rules", d]
    elif which in ("config", "found-config"):
        target = work / ("team.yaml" if which == "config" else "nsysdoc.yaml")
        target.write_text("fail_on: critical\n")
        if which == "config":
            args += ["--config", target]
    else:
        target = Path(f"{cap}-{which}")
        if which != "wal":
            target.write_bytes(b"")  # SQLite's own: present beside the capture
    watched = [cap, target] + ([Path(f"{cap}-wal")] if which == "wal" else [])
    before = _state(*watched)
    run = run_nsysdoc([*args, "-o", target], cwd=work, env=_env(tmp_path))
    _assert_refused(run, "would overwrite")
    assert _state(*watched) == before
    assert _no_work(tmp_path), "refused only after reading the capture"
    if which == "wal":  # the transaction the -wal holds still counts: one kernel per step fewer
        ok = run_nsysdoc(["report", cap, "-f", "json", "-o", "-"], cwd=work, env=_env(tmp_path))
        assert ok.rc in (0, 1), ok.describe()
        assert json.loads(ok.stdout)["metrics"]["kernels"]["count"] == KERNELS - STEPS


# ---------------------------------------------------------------------------------------------
# 4: another user's link in a shared folder, the previous file's mode, the export marker
# ---------------------------------------------------------------------------------------------
def _victim(tmp: Path) -> Path:
    private = tmp / "private"
    private.mkdir(mode=0o700)
    victim = private / "secret.txt"
    victim.write_text("root's secret\n")
    os.chmod(victim, 0o600)
    return victim


def _shared(tmp: Path) -> Path:
    shared = tmp / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # sticky, world-writable: /tmp
    return shared


def _plant(link: Path, target: Path) -> None:
    link.symlink_to(target)
    os.lchown(link, OTHER_UID, OTHER_UID)


@pytest.mark.slow  # issue 50: report commands in processes (1.7 s of CPU); .ci/run runs it
def test_bug4_output_never_follows_another_users_link_in_a_shared_folder(captures, tmp_path):
    _need_root()
    cap = _copy(captures, "plain", tmp_path / "in" / "run.sqlite")
    victim = _victim(tmp_path)
    shared = _shared(tmp_path)
    _plant(shared / "report.html", victim)
    _plant(shared / "dir", victim.parent)  # a planted folder link on the way is no better
    before = _state(victim, cap)
    for out in (shared / "report.html", shared / "dir" / "secret.txt"):
        run = run_nsysdoc(["report", cap, "-o", out], cwd=tmp_path, env=_env(tmp_path))
        _assert_refused(run, "symbolic link owned by another user")
        assert _state(victim, cap) == before and os.path.islink(shared / "report.html")
        assert _no_work(tmp_path)
    # the same links owned by this user are followed, as documented (the link stays a link)
    mine = tmp_path / "mine.html"
    mine.symlink_to(tmp_path / "real.html")
    run = run_nsysdoc(["report", cap, "-q", "-o", mine], cwd=tmp_path, env=_env(tmp_path))
    assert run.rc in (0, 1) and mine.is_symlink() and "<html" in (tmp_path / "real.html").read_text()[:500]


def test_bug4_rewritten_output_keeps_its_mode(captures, tmp_path):
    cap = _copy(captures, "plain", tmp_path / "run.sqlite")
    out = tmp_path / "private.json"
    out.write_text("{}")
    os.chmod(out, 0o600)
    run = run_nsysdoc(["report", cap, "-q", "-f", "json", "-o", out], cwd=tmp_path, env=_env(tmp_path))
    assert run.rc in (0, 1), run.describe()
    assert json.loads(out.read_text())["summary"] and stat.S_IMODE(out.stat().st_mode) == 0o600
    new = tmp_path / "new.json"  # a new file: 0666 less the umask, not mkstemp's 0600
    run = run_nsysdoc(["report", cap, "-q", "-f", "json", "-o", new], cwd=tmp_path, env=_env(tmp_path))
    umask = os.umask(0o022)
    os.umask(umask)
    assert run.rc in (0, 1) and stat.S_IMODE(new.stat().st_mode) == 0o666 & ~umask


def test_bug4_export_marker_never_follows_a_planted_link(captures, tmp_path):
    _need_root()
    victim = _victim(tmp_path)
    shared = _shared(tmp_path)
    rep = _nsys_rep(shared)
    _plant(shared / "run.sqlite.nsysdoc", victim)
    before = _state(victim, rep)
    env = _env(tmp_path, FAKE_NSYS_EXPORT_FIXTURE=captures["plain"], **_fake_nsys(tmp_path))
    run = run_nsysdoc(["report", rep, "-q", "-f", "json", "-o", tmp_path / "out.json"], cwd=tmp_path, env=env)
    assert run.rc in (0, 1), run.describe()
    assert _state(victim, rep) == before
    assert json.loads((tmp_path / "out.json").read_text())["summary"]


# ---------------------------------------------------------------------------------------------
# 5: capture never replaces an existing report unless asked
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow  # issue 50: capture commands in processes (1.5 s of CPU); .ci/run runs it
def test_bug5_capture_refuses_an_existing_report_unless_forced(captures, tmp_path):
    out = tmp_path / "runs"
    out.mkdir()
    old = out / "train.nsys-rep"
    old.write_text("LAST WEEK'S RUN\n")
    env = _env(tmp_path, FAKE_NSYS_EXPORT_FIXTURE=captures["plain"], **_fake_nsys(tmp_path))
    cmd = ["capture", "--output-dir", out, "--output-name", "train", "--", sys.executable, "-c", "pass"]
    run = run_nsysdoc(cmd, cwd=tmp_path, env=env)
    line = _assert_refused(run, "train.nsys-rep", "already exists")
    assert "--force" in run.stderr and old.read_text() == "LAST WEEK'S RUN\n"
    log = Path(env["FAKE_NSYS_LOG"])
    assert not log.exists() or not any(json.loads(x)["argv"][1:2] == ["profile"] and "--help" not in x
                                       for x in log.read_text().splitlines()), line
    forced = run_nsysdoc([cmd[0], "--force", *cmd[1:]], cwd=tmp_path, env=env)
    assert forced.rc in (0, 1), forced.describe()
    assert old.read_text().startswith("FAKE NSYS REPORT") and "replaced" in forced.stderr


# ---------------------------------------------------------------------------------------------
# 6: nsys' output is read with a cap, and nsysdoc waits on nsys, not on the end of its output
# ---------------------------------------------------------------------------------------------
FLOOD_MB = 600


def test_bug6_nsys_export_output_is_read_with_a_cap(captures, tmp_path):
    flood = (f"if sys.argv[1:2] == ['export']:\n"
             f"    block = b'x' * (1 << 20)\n"
             f"    for _ in range({FLOOD_MB}):\n"
             f"        os.write(1, block)\n"
             f"        os.write(2, block)")
    work = tmp_path / "work"
    work.mkdir()
    rep = _nsys_rep(work)
    env = _env(tmp_path, FAKE_NSYS_EXPORT_FIXTURE=captures["plain"], **_fake_nsys(tmp_path, flood))
    run = run_nsysdoc(["report", rep, "-q", "-f", "json", "-o", tmp_path / "out.json"], cwd=work, env=env,
                      timeout=60)
    assert run.rc in (0, 1), run.describe()
    assert run.max_rss_mb is not None and run.max_rss_mb < 400, run.describe()  # 2 x 600 MB printed
    assert json.loads((tmp_path / "out.json").read_text())["summary"]


def test_bug6_a_child_holding_nsys_pipes_is_not_waited_for(captures, tmp_path):
    linger = "if sys.argv[1:2] == ['export']:\n    subprocess.Popen(['sleep', '60'])  # keeps stdout and stderr"
    work = tmp_path / "work"
    work.mkdir()
    rep = _nsys_rep(work)
    env = _env(tmp_path, FAKE_NSYS_EXPORT_FIXTURE=captures["plain"], **_fake_nsys(tmp_path, linger))
    run = run_nsysdoc(["report", rep, "-q", "-f", "json", "-o", tmp_path / "out.json"], cwd=work, env=env,
                      timeout=25)
    assert not run.timed_out and run.rc in (0, 1), run.describe()
    assert run.seconds < 15, run.describe()


# ---------------------------------------------------------------------------------------------
# 7: the terminal width Typer and Rich use is clamped
# ---------------------------------------------------------------------------------------------
def test_bug7_huge_columns_help_is_fast_and_small(tmp_path):
    run = run_nsysdoc(["--help"], cwd=tmp_path, env=_env(tmp_path, COLUMNS=100_000_000, LINES=100_000_000),
                      timeout=20)
    assert run.rc == 0 and not run.timed_out, run.describe()
    assert "report" in run.stdout and len(run.stdout) < 200_000 and run.stderr == ""
    assert run.seconds < 10 and (run.max_rss_mb or 0) < 500, run.describe()


# ---------------------------------------------------------------------------------------------
# 8: no traceback: outputs checked before the work, printing, API arguments, ""
# ---------------------------------------------------------------------------------------------
def test_bug8_output_path_over_path_max_is_refused_before_the_work(captures, tmp_path):
    cap = _copy(captures, "plain", tmp_path / "run.sqlite")
    deep = Path(tmp_path, *(["d" * 200] * 22), "r.html")  # 22 names of 200 bytes: over 4096
    run = run_nsysdoc(["report", cap, "-o", deep], cwd=tmp_path, env=_env(tmp_path))
    _assert_refused(run, "bytes long")
    assert _no_work(tmp_path) and not (tmp_path / ("d" * 200)).exists()


def test_bug8_unwritable_output_folder_is_refused_before_the_work(captures, tmp_path):
    try:
        wrap = unprivileged_wrap()
    except Skip as exc:
        pytest.skip(str(exc))
    cap = _copy(captures, "plain", tmp_path / "run.sqlite")
    locked = tmp_path / "locked"
    locked.mkdir()
    os.chmod(locked, 0o555)
    try:
        run = run_nsysdoc(["report", cap, "-o", locked / "out.html"], cwd=tmp_path, env=_env(tmp_path), wrap=wrap)
    finally:
        os.chmod(locked, 0o755)
    line = _assert_refused(run)
    assert _no_work(tmp_path), "refused only after reading the capture"
    assert "permission denied" in line.lower() and list(locked.iterdir()) == []


@pytest.mark.slow  # issue 50: report commands in processes (1.8 s of CPU); .ci/run runs it
def test_bug8_non_latin_kernel_on_a_strict_latin1_terminal(captures, tmp_path):
    cap = _copy(captures, "cyrillic", tmp_path / "run.sqlite")
    env = _env(tmp_path, PYTHONIOENCODING="latin-1:strict")
    for args in (["report", cap, "-o", tmp_path / "out.html"], ["report", cap, "-f", "md", "-o", "-"]):
        run = run_nsysdoc(args, cwd=tmp_path, env=env)
        assert run.rc in (0, 1), run.describe()
        assert "Traceback" not in run.stderr and "EncodeError" not in run.stderr, run.describe()
        shown = run.stdout + run.stderr
        assert "Verdict" in shown and "?" * 4 in shown  # the name, replaced letter by letter
    assert CYRILLIC in (tmp_path / "out.html").read_text(encoding="utf-8")  # files stay UTF-8


def test_bug8_api_arguments_of_the_wrong_type_raise_nsysdoc_errors(captures, tmp_path):
    import nsysdoc
    from nsysdoc.errors import NsysdocError, UsageError

    cap = _copy(captures, "plain", tmp_path / "run.sqlite")
    calls = {
        "rules=5": lambda: nsysdoc.report(cap, rules=5),
        "step_marker=123": lambda: nsysdoc.report(cap, step_marker=123),
        "progress=5": lambda: nsysdoc.report(cap, progress=5),
        "job(5)": lambda: nsysdoc.job(5),
        "NUL in a path": lambda: nsysdoc.report(f"{cap}\x00.sqlite"),
        "NUL in rules": lambda: nsysdoc.reports([cap], rules=["a\x00b"]),
        "report('')": lambda: nsysdoc.report(""),
        "diff('')": lambda: nsysdoc.diff("", cap),
        "job([''])": lambda: nsysdoc.job([""]),
        "to_perfetto(5)": lambda: nsysdoc.report(cap).to_perfetto(5),
    }
    for what, call in calls.items():
        with pytest.raises(NsysdocError) as e:
            call()
        assert isinstance(e.value, UsageError), (what, type(e.value), e.value.message)
        msg = e.value.message
        assert msg and "\n" not in msg and "damaged" not in msg and "\x00" not in msg, (what, msg)
    assert "progress" in _message(lambda: nsysdoc.report(cap, progress=5))


def _message(call) -> str:
    from nsysdoc.errors import NsysdocError

    try:
        call()
    except NsysdocError as exc:
        return exc.message
    raise AssertionError("no error")


def test_bug8_empty_input_argument_is_refused(captures, tmp_path):
    _copy(captures, "plain", tmp_path / "run.sqlite")  # what "" (the current folder) would report
    for args in (["report", ""], ["diff", "", "run.sqlite"], ["job", ""], ["report", "run.sqlite", "-o", ""]):
        run = run_nsysdoc(args, cwd=tmp_path, env=_env(tmp_path))
        _assert_refused(run, "empty")
        assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["run.sqlite"]
        assert _no_work(tmp_path)


# ---------------------------------------------------------------------------------------------
# 9: -o /dev/stdout into a closed pipe ends quietly, like -o -
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow  # issue 50: report commands in processes (2.1 s of CPU); .ci/run runs it
def test_bug9_dev_stdout_into_head_ends_quietly(captures, tmp_path):
    cap = _copy(captures, "plain", tmp_path / "run.sqlite")
    env = _env(tmp_path)
    for out in ("/dev/stdout", "-"):
        p1 = subprocess.Popen([sys.executable, "-m", "nsysdoc", "report", str(cap), "-f", "html", "-o", out],
                              cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p2 = subprocess.Popen(["head", "-c", "15"], stdin=p1.stdout, stdout=subprocess.PIPE)
        p1.stdout.close()
        head, _ = p2.communicate(timeout=60)
        err = p1.stderr.read().decode()
        p1.stderr.close()
        rc = p1.wait(timeout=60)
        assert head.startswith(b"<!"), head
        assert rc == 141 and "error" not in err and "Traceback" not in err, (out, rc, err)


def test_bug8_config_passed_over_is_said_in_one_line(captures, tmp_path):
    """A configuration found walking up that is not trusted (another user's file: issue 45,
    engine B) is left unread and said on the command line: one warning line, even with -q."""
    _need_root()
    project = tmp_path / "project"
    work = project / "run"
    cap = _copy(captures, "plain", work / "run.sqlite")
    planted = project / "nsysdoc.yaml"
    planted.write_text("fail_on: info\n")
    os.chown(planted, OTHER_UID, OTHER_UID)
    run = run_nsysdoc(["report", cap, "-q", "-f", "json", "-o", tmp_path / "out.json"], cwd=work, env=_env(tmp_path))
    assert run.rc == 0, run.describe()  # fail_on: info was not applied
    warnings = [x for x in run.stderr.splitlines() if x.startswith("nsysdoc: warning: ")]
    assert len(warnings) == 1 and str(planted) in warnings[0] and "not read" in warnings[0], run.describe()


# ---------------------------------------------------------------------------------------------
# 10: no terminal escape reaches the terminal
# ---------------------------------------------------------------------------------------------
def _assert_clean(text: str, what: str) -> None:
    bad = [f"U+{ord(c):04X}" for c in text if (ord(c) < 32 and c not in "\n") or 0x7f <= ord(c) <= 0x9f]
    assert not bad, (what, bad, text[-400:])
    for p in PAYLOADS:
        assert p not in text, (what, p, text[-400:])


def test_bug10_error_lines_with_file_names_carry_no_escapes(tmp_path):
    run = run_nsysdoc(["report", f"missing{ESCAPES}.sqlite"], cwd=tmp_path, env=_env(tmp_path))
    line = _assert_refused(run, "missing")
    assert line.endswith(".sqlite: no such file or directory"), line
    _assert_clean(run.stderr, "error line")


def test_bug10_job_progress_carries_no_escapes(captures, tmp_path):
    ranks = tmp_path / "ranks"
    for i in range(2):
        _copy(captures, "plain", ranks / f"rank{i}{ESCAPES}.sqlite")
    run = run_nsysdoc(["job", ranks, "-j", "1", "-o", tmp_path / "job.html"], cwd=tmp_path, env=_env(tmp_path))
    assert run.rc in (0, 1), run.describe()
    assert "[1/2] rank0" in run.stderr and "[2/2] rank1" in run.stderr, run.describe()
    _assert_clean(run.stderr, "job progress")
    _assert_clean(run.stdout, "job summary")


def test_bug10_rules_list_and_explain_carry_no_escapes(tmp_path):
    team = tmp_path / "team"
    team.mkdir()
    (team / "team-probe.yaml").write_text(
        f"id: team-probe\ntitle: {json.dumps('Team ' + ESCAPES + 'probe')}\ncategory: gpu-utilization\n"
        f"summary: {json.dumps('Sums ' + ESCAPES)}\nrequires: [kernels]\nwhen: \"kernel_count > 0\"\n"
        f"severity: info\nmessage: \"Kernels: {{kernel_count}}.\"\nverify: {json.dumps('Look ' + ESCAPES)}\n"
        f"fix: Fix.\n", encoding="utf-8")
    listed = run_nsysdoc(["rules", "list", "--rules", team], cwd=tmp_path, env=_env(tmp_path))
    assert listed.rc == 0, listed.describe()
    line = next(x for x in listed.stdout.splitlines() if x.startswith("team-probe"))
    assert re.search(r"Team\s*probe", line), line
    explained = run_nsysdoc(["rules", "explain", "team-probe", "--rules", team], cwd=tmp_path, env=_env(tmp_path))
    assert explained.rc == 0 and "Team" in explained.stdout, explained.describe()
    for run, what in ((listed, "rules list"), (explained, "rules explain")):
        _assert_clean(run.stdout, what)
        _assert_clean(run.stderr, what)


def test_bug10_one_sanitiser_removes_whole_sequences():
    """The sanitiser itself (nsysdoc.outputs.terminal_text), which every printed line and the
    terminal summary go through: sequences go whole, text around them stays."""
    from nsysdoc.outputs import terminal_text
    from nsysdoc.views.render import _clean

    assert terminal_text(f"a{ESCAPES}b\tc\nd\x7f\x85\re") == "ab\tc\nde"
    assert terminal_text("x\x1b]8;;http://evil/\x1b\\link\x1b]8;;\x1b\\y") == "xlinky"  # OSC 8 hyperlink
    assert terminal_text("open\x1b]0;title") == "open"  # an unterminated string ends the line
    assert terminal_text("ünïcødé ядро") == "ünïcødé ядро"
    assert _clean(f"k{ESCAPES}ernel\nname") == "kernel name"
