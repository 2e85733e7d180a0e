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


# --- 2: a cache entry is served only for the capture it was made from ----------------------------
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
