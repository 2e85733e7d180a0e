"""Issue 45 "Hardening III", trust: what nsysdoc reads without being asked (a project config found
walking up, a shared cache's entries, a config's rule folders) and the one-line errors of the rule
tools. One test per bug; each builds its own input in a temporary folder, runs nsysdoc (a
subprocess with an isolated cache folder, or the library) and checks the exit code, the one error
line, the numbers and that no input changed.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nsysdoc.testing import Capture
from nsysdoc.testing.scenarios import pageable_h2d
from tests.hostile_cases import run_nsysdoc, sandbox_env

# issue 50: every test runs nsysdoc commands in processes (0.7-4.7 s of CPU each, 20 s in all); README's command leaves them to .ci/run
pytestmark = pytest.mark.slow

#: this checkout (the subprocesses import it, not an installed nsysdoc)
ROOT = Path(__file__).resolve().parent.parent
OTHER_UID = 12345
BUILTIN_RULES = ROOT / "rules"


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    return sandbox_env(tmp / "cache", {"PYTHONPATH": str(ROOT), **extra})


def _sha(paths) -> dict[str, str]:
    return {str(p): hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in paths}


def _error_line(stderr: str) -> str:
    """The one ``nsysdoc: error:`` line (optionally followed by one hint line), no traceback."""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    assert lines and lines[0].startswith("nsysdoc: error: "), stderr
    assert len(lines) == 1 or (len(lines) == 2 and lines[1].startswith("nsysdoc: hint: ")), stderr
    return lines[0]


def _kernels(n: int) -> Capture:
    """``n`` kernels of 100 us, one per step: ``summary.kernel_count`` is ``n``."""
    cap = Capture()
    t = cap.process(pid=4000).thread()
    for i in range(n):
        with t.range(f"ProfilerStep#{i}"):
            t.cpu(us=20)
            t.launch("gemm_kernel", us=100)
    return cap


# --- 1: a project config found walking up is read only when it can be trusted -------------------
@pytest.mark.slow  # issue 50: report commands in processes (2.7 s of CPU); .ci/run runs it
def test_planted_parent_config_is_ignored_named_and_a_fifo_never_blocks(tmp_path):
    shared = tmp_path / "shared"  # a world-writable parent, as /tmp or a team scratch folder
    proj = shared / "proj"
    proj.mkdir(parents=True)
    shared.chmod(0o777)
    planted = shared / "nsysdoc.yaml"
    planted.write_text("rules:\n" + "".join(f"  {r}: {{enabled: false}}\n" for r in (
        "transfer-bound", "pageable-memcpy", "host-sync", "data-starvation", "launch-bound")))
    os.chown(planted, OTHER_UID, OTHER_UID)
    cap = pageable_h2d(steps=4).write(proj / "cap.sqlite")  # two critical findings
    before = _sha([cap, planted])
    out = tmp_path / "out.json"
    argv = ["report", cap, "-f", "json", "-o", out, "-q", "--fail-on", "critical"]

    run = run_nsysdoc(argv, cwd=proj, env=_env(tmp_path))
    assert run.rc == 1, run.describe()  # the planted file would have disabled both: 0 findings, exit 0
    result = json.loads(out.read_text())
    assert [f["rule"] for f in result["findings"] if f["severity"] == "critical"] == \
        ["transfer-bound", "pageable-memcpy"]
    cfg = result["config"]  # every report says which config and rule folders it used
    assert cfg["path"] is None and cfg["rule_dirs"] == []
    assert cfg["ignored"] == [{"path": str(planted), "reason": f"it is owned by another user (uid {OTHER_UID})"}]
    from nsysdoc.rules.evaluate import discover_config, ignored_warning

    found = discover_config(proj)
    assert found.path is None

    assert [ignored_warning(i) for i in found.ignored] == [
        f"{planted}: configuration not read: it is owned by another user (uid {OTHER_UID}); if you trust it, "
        "pass it with --config"]

    # our own file in a folder others can write to is not read either
    os.chown(planted, 0, 0)
    assert discover_config(proj).ignored[0]["reason"] == f"its folder {shared} can be written by other users"

    # a FIFO at the name: passed over (never opened), the run is not an input error
    fifo = proj / "nsysdoc.yaml"
    os.mkfifo(fifo)
    run = run_nsysdoc(argv, cwd=proj, env=_env(tmp_path), timeout=60)
    assert run.rc == 1, run.describe()
    assert json.loads(out.read_text())["config"]["ignored"][0] == {
        "path": str(fifo), "reason": "it is a named pipe (FIFO), not a regular file"}
    fifo.unlink()

    # a config of our own in the project is read, and the report names it
    own = proj / "nsysdoc.yaml"
    own.write_text("rules:\n  pageable-memcpy: {enabled: false}\n")
    run = run_nsysdoc(argv, cwd=proj, env=_env(tmp_path))
    assert run.rc == 1, run.describe()
    result = json.loads(out.read_text())
    assert [f["rule"] for f in result["findings"] if f["severity"] == "critical"] == ["transfer-bound"]
    assert result["config"]["path"] == str(own) and result["config"]["origin"] == "found"
    assert _sha([cap, planted]) == before


def test_config_discovery_from_a_removed_current_folder(tmp_path):
    """Walking up from a current folder that was removed finds nothing (it was a traceback)."""
    cap = _kernels(5).write(tmp_path / "cap.sqlite")
    gone = tmp_path / "gone"
    gone.mkdir()
    out = tmp_path / "out.json"
    code = (f"import os, runpy, sys; os.chdir({str(gone)!r}); os.rmdir({str(gone)!r}); "
            f"sys.argv = ['nsysdoc', 'report', {str(cap)!r}, '-f', 'json', '-o', {str(out)!r}, '-q']; "
            "runpy.run_module('nsysdoc', run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", code], check=False, cwd=tmp_path, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert json.loads(out.read_text())["config"] == {"path": None, "origin": None, "rule_dirs": [], "ignored": []}


# --- 2: a cache entry is served only for the capture it was made from ----------------------------
@pytest.mark.slow  # issue 50: report commands in processes (4.7 s of CPU); .ci/run runs it
def test_cache_entry_of_another_capture_renamed_to_the_key_is_not_served(tmp_path):
    many = _kernels(75).write(tmp_path / "many.sqlite")
    victim = _kernels(20).write(tmp_path / "victim.sqlite")
    before = _sha([many, victim])
    cache = tmp_path / "cache"
    env = _env(tmp_path)
    out = tmp_path / "out.json"

    def report(path) -> dict:
        run = run_nsysdoc(["report", path, "-f", "json", "-o", out, "-q", "--no-config"], cwd=tmp_path, env=env)
        assert run.rc == 0, run.describe()
        return json.loads(out.read_text())

    def entries() -> set[str]:
        return {p.name for p in cache.iterdir() if p.name.startswith("trace-")}

    assert report(many)["summary"]["kernel_count"] == 75
    (many_entry,) = entries()
    assert report(victim)["summary"]["kernel_count"] == 20
    (victim_entry,) = entries() - {many_entry}
    # the other capture's entry, renamed to the victim's key
    shutil.rmtree(cache / victim_entry)
    os.rename(cache / many_entry, cache / victim_entry)
    assert report(victim)["summary"]["kernel_count"] == 20  # was 75: the planted entry was served

    # the same, made by another user and sealed with the victim's key: not read either
    assert report(many)["summary"]["kernel_count"] == 75
    (many_entry,) = entries() - {victim_entry}
    shutil.rmtree(cache / victim_entry)
    os.rename(cache / many_entry, cache / victim_entry)
    seal = cache / victim_entry / "entry-key"
    if seal.exists():
        seal.write_text(victim_entry)
    for root, dirs, files in os.walk(cache / victim_entry):
        for name in [root, *(os.path.join(root, f) for f in files)]:
            os.chown(name, OTHER_UID, OTHER_UID)
    assert report(victim)["summary"]["kernel_count"] == 20
    assert _sha([many, victim]) == before


def test_cache_key_depends_on_the_content_not_only_on_stat(tmp_path):
    """Two captures whose ``stat`` fields coincide (made-up inode numbers, an image layer) get
    different keys: the key hashes the whole file up to 8 MiB, else its header, tail and pages
    spread over it."""
    from nsysdoc import cache

    small = tmp_path / "small.bin"
    big = tmp_path / "big.bin"
    small.write_bytes(bytes(1000))
    big.write_bytes(bytes(cache.FINGERPRINT_WHOLE + (1 << 20)))
    seen = set()
    for path, offsets in ((small, [0, 500, 999]), (big, [0, 100, big.stat().st_size - 1])):
        base = cache.content_fingerprint(path)
        seen.add(base)
        for off in offsets:
            data = bytearray(path.read_bytes())
            data[off] ^= 0xFF
            other = tmp_path / "other.bin"
            other.write_bytes(bytes(data))
            fp = cache.content_fingerprint(other)
            assert fp != base and fp not in seen, (path.name, off)
            seen.add(fp)
    ident = cache.file_identity(small)
    assert ident["content"] == cache.content_fingerprint(small)
    assert cache.entry_key(ident, "trace", 1) != cache.entry_key({**ident, "content": "0" * 32}, "trace", 1)


# --- 3: a config's rule folder outside the project ------------------------------------------------
def test_config_rule_dirs_outside_the_project_refused_without_quoting_it(tmp_path):
    secrets = tmp_path / "home" / ".secrets"
    secrets.mkdir(parents=True)
    secret = secrets / "token.yaml"
    secret.write_text("id: token\ntitle: SECRETHASH-title\ncategory: SECRETHASH-value\nwhen: true\n"
                      "severity: info\nmessage: m\nverify: v\nfix: f\n")
    proj = tmp_path / "proj"
    proj.mkdir()
    cfg = proj / "nsysdoc.yaml"
    cfg.write_text("fail_on: critical\nrule_dirs:\n  - rules\n  - ../home/.secrets\n")
    (proj / "rules").mkdir()
    cap = _kernels(5).write(proj / "cap.sqlite")
    before = _sha([secret, cfg, cap])
    run = run_nsysdoc(["report", cap, "-f", "json", "-o", tmp_path / "out.json"], cwd=proj, env=_env(tmp_path))
    assert run.rc == 2, run.describe()
    line = _error_line(run.stderr)
    assert "SECRETHASH" not in run.stderr + run.stdout
    assert line.startswith(f"nsysdoc: error: {cfg}:4: rule_dirs.1: '../home/.secrets' is outside the project folder"), line
    assert _sha([secret, cfg, cap]) == before
    # a folder inside the project is read, and the report names it
    cfg.write_text("fail_on: critical\nrule_dirs:\n  - rules\n")
    run = run_nsysdoc(["report", cap, "-f", "json", "-o", tmp_path / "out.json", "-q"], cwd=proj, env=_env(tmp_path))
    assert run.rc == 0, run.describe()
    assert json.loads((tmp_path / "out.json").read_text())["config"]["rule_dirs"] == [str(proj / "rules")]


# --- 4: rules check linear, rules test capped and one line ----------------------------------------
def test_rules_check_reads_each_file_once(tmp_path, monkeypatch):
    import nsysdoc.testing.rule_cases as cases
    from nsysdoc.testing.rule_cases import check_folder

    src = (BUILTIN_RULES / "host-sync.yaml").read_text()
    folder = tmp_path / "team"
    folder.mkdir()
    n = 400
    for i in range(n):
        (folder / f"team-{i}.yaml").write_text(src.replace("id: host-sync", f"id: team-{i}"))
        if i % 2 == 0:
            (folder / f"team-{i}.cases.yaml").write_text(
                f"rule: team-{i}\ncases:\n  - name: quiet\n    scenario: healthy_training\n    expect: {{fires: false}}\n")
    calls = {"load_cases": 0, "find_case_files": 0}
    real_load, real_find = cases.load_cases, cases.find_case_files

    def load(path):
        calls["load_cases"] += 1
        return real_load(path)

    def find(path):
        calls["find_case_files"] += 1
        return real_find(path)

    monkeypatch.setattr(cases, "load_cases", load)
    monkeypatch.setattr(cases, "find_case_files", find)
    chk = check_folder(folder, {"host-sync"})
    assert len(chk.rules) == n and chk.case_count == n // 2
    assert calls == {"load_cases": n // 2, "find_case_files": 1}  # the command read them once per rule
    assert len(chk.warnings) == n // 2
    assert chk.warnings[0] == f"{folder / 'team-1.yaml'}: no test cases for team-1 (add team-1.cases.yaml)"


def test_rules_test_scenario_arguments_under_the_action_cap(tmp_path):
    folder = tmp_path / "team"
    folder.mkdir()
    shutil.copy(BUILTIN_RULES / "host-sync.yaml", folder)
    cases_file = folder / "host-sync.cases.yaml"
    cases_file.write_text("rule: host-sync\ncases:\n  - name: huge\n    scenario: sync_storm\n"
                          "    args: {steps: 100000000}\n    expect: {fires: true}\n")
    before = _sha([cases_file])
    # the cap lowered to 20,000 so that reaching it takes well under a second (1,000,000: ~20 s);
    # without the cap this plays 100 M steps: the memory cap or the timeout stops it
    code = ("import sys, nsysdoc.testing.rule_cases as c; c.MAX_ACTIONS = 20_000; from nsysdoc.cli import main; "
            f"sys.argv = ['nsysdoc', 'rules', 'test', {str(folder)!r}]; main()")
    import resource

    def cap_memory():
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    try:
        proc = subprocess.run([sys.executable, "-c", code], check=False, cwd=tmp_path, env=_env(tmp_path),
                              capture_output=True, text=True, timeout=30, preexec_fn=cap_memory)
    except subprocess.TimeoutExpired:
        pytest.fail("rules test played the scenario's 100,000,000 steps (no cap)")
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = _error_line(proc.stderr)
    assert line == (f"nsysdoc: error: {cases_file}:3: args: scenario sync_storm would play more than 20,000 actions "
                    "with these arguments (the cap of an inline capture); a rule case needs a few hundred")
    assert _sha([cases_file]) == before


@pytest.mark.parametrize("case, expected", [
    ("capture: {processes: [{pid: 1, do: [{launch: {name: k, us: 1.0e+18}}, {item: {}}]}]}",
     "the case's capture cannot be written (OverflowError"),
    ("capture: {processes: [{pid: 1, do: [{launch: {name: k, us: 1e18}}]}]}", "capture: cannot play it (TypeError"),
    ("capture: {processes: [{pid: 1, do: [{launch: {name: k, us: abc}}]}]}", "capture: cannot play it (TypeError"),
    ("capture: {processes: [{pid: 1, do: [{launch: {name: k, us: .inf}}]}]}", "capture: cannot play it (OverflowError"),
    ("scenario: sync_storm\n    args: {stepz: 3}", "args: scenario sync_storm has no argument 'stepz'; did you mean 'steps'?"),
    ("scenario: sync_storm\n    args: {steps: abc}", "args: scenario sync_storm cannot use these arguments (TypeError"),
], ids=["us-1e18-float", "us-1e18-text", "us-abc", "us-inf", "unknown-arg", "text-arg"])
def test_rules_test_bad_case_values_are_one_line(tmp_path, case, expected):
    folder = tmp_path / "team"
    folder.mkdir()
    shutil.copy(BUILTIN_RULES / "host-sync.yaml", folder)
    cases_file = folder / "host-sync.cases.yaml"
    cases_file.write_text(f"rule: host-sync\ncases:\n  - name: c\n    {case}\n    expect: {{fires: false}}\n")
    run = run_nsysdoc(["rules", "test", folder], cwd=tmp_path, env=_env(tmp_path))
    assert run.rc == 2, run.describe()
    line = _error_line(run.stderr)
    assert line.startswith(f"nsysdoc: error: {cases_file}:3: {expected}"), line


# --- 5: NSYSDOC_CACHE_MAX_MB=inf -------------------------------------------------------------------
def test_cache_max_mb_not_a_finite_size_is_one_line(tmp_path):
    from nsysdoc import cache

    for raw in ("inf", "-inf", "nan", "1e400", "-5", "lots"):
        env = {cache.MAX_ENV: raw}
        assert cache.max_bytes(env) == cache.DEFAULT_MAX_MB << 20
        (problem,) = cache.settings_problems(env)
        assert problem.startswith(f"NSYSDOC_CACHE_MAX_MB={raw!r} is not a size in MB"), problem
    assert cache.settings_problems({cache.MAX_ENV: "512"}) == [] and cache.max_bytes({cache.MAX_ENV: "0.5"}) == 1 << 19
    run = run_nsysdoc(["cache", "info"], cwd=tmp_path, env=_env(tmp_path, NSYSDOC_CACHE_MAX_MB="inf"))
    assert run.rc == 0 and "Traceback" not in run.stderr, run.describe()
    assert "of 4,096.0 MB" in run.stdout
    cap = _kernels(5).write(tmp_path / "cap.sqlite")  # a report's cache writes (eviction) too
    run = run_nsysdoc(["report", cap, "-f", "json", "-o", tmp_path / "out.json", "-q", "--no-config"],
                      cwd=tmp_path, env=_env(tmp_path, NSYSDOC_CACHE_MAX_MB="inf"))
    assert run.rc == 0 and "Traceback" not in run.stderr, run.describe()
    assert [p.name[:6] for p in (tmp_path / "cache").iterdir()] == ["trace-"]


# --- 6: the same rule id in two --rules folders ------------------------------------------------------
def test_same_rule_id_in_two_rule_folders_is_refused_naming_both(tmp_path):
    src = (BUILTIN_RULES / "host-sync.yaml").read_text().replace("id: host-sync", "id: team-sync")
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        (d / "team-sync.yaml").write_text(src)
    cap = _kernels(5).write(tmp_path / "cap.sqlite")
    argv = ["report", cap, "-f", "json", "-o", tmp_path / "out.json", "-q", "--no-config"]
    run = run_nsysdoc([*argv, "--rules", a, "--rules", b], cwd=tmp_path, env=_env(tmp_path))
    assert run.rc == 2, run.describe()
    line = _error_line(run.stderr)
    assert line == (f"nsysdoc: error: {b / 'team-sync.yaml'}:1: id: rule 'team-sync' is also defined in "
                    f"{a / 'team-sync.yaml'}; a rule id may come from one team rules folder only")
    # one folder named twice is one folder
    run = run_nsysdoc([*argv, "--rules", a, "--rules", f"{a}/"], cwd=tmp_path, env=_env(tmp_path))
    assert run.rc == 0, run.describe()
    assert json.loads((tmp_path / "out.json").read_text())["config"]["rule_dirs"] == [str(a)]


# --- 7: time_ranges with an unknown gap cause ---------------------------------------------------------
def test_time_ranges_unknown_gap_cause_refused_at_load(tmp_path):
    folder = tmp_path / "team"
    folder.mkdir()
    text = (BUILTIN_RULES / "host-sync.yaml").read_text()
    assert "time_ranges: gaps:sync" in text
    rule = folder / "host-sync.yaml"
    rule.write_text(text.replace("time_ranges: gaps:sync", "time_ranges: gaps:zzz"))
    line_no = rule.read_text().splitlines().index("time_ranges: gaps:zzz") + 1
    run = run_nsysdoc(["rules", "check", folder], cwd=tmp_path, env=_env(tmp_path))
    assert run.rc == 2, run.describe()
    line = _error_line(run.stderr)
    assert line.startswith(f"nsysdoc: error: {rule}:{line_no}: time_ranges: unknown idle class 'zzz' in "
                           "'gaps:zzz'; gaps takes one of sync, input,"), line
    rule.write_text(text.replace("time_ranges: gaps:sync", "time_ranges: worst_step:sync"))
    run = run_nsysdoc(["rules", "check", folder], cwd=tmp_path, env=_env(tmp_path))
    assert run.rc == 2 and "time_ranges: worst_step takes no ':sync'" in _error_line(run.stderr), run.describe()


def test_rules_check_command_reads_each_cases_file_once(tmp_path, monkeypatch):
    """The command, not only check_folder: 40 team rules, half with a cases file; it used to
    re-read every cases file for every rule (40 x 20 = 800 reads instead of 20)."""
    import nsysdoc.testing.rule_cases as cases
    from typer.testing import CliRunner

    from nsysdoc.cli import app

    src = (BUILTIN_RULES / "host-sync.yaml").read_text()
    folder = tmp_path / "team"
    folder.mkdir()
    for i in range(40):
        (folder / f"team-{i}.yaml").write_text(src.replace("id: host-sync", f"id: team-{i}"))
        if i % 2 == 0:
            (folder / f"team-{i}.cases.yaml").write_text(
                f"rule: team-{i}\ncases:\n  - name: quiet\n    scenario: healthy_training\n    expect: {{fires: false}}\n")
    calls = {"n": 0}
    real = cases.load_cases

    def load(path):
        calls["n"] += 1
        return real(path)

    monkeypatch.setattr(cases, "load_cases", load)
    res = CliRunner().invoke(app, ["rules", "check", str(folder)])
    assert res.exit_code == 0, res.output
    assert calls["n"] == 20
    assert "40 rule(s) OK" in res.output
