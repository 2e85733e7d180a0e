"""Issue 49: every test that needs ../shared (the real captures beside the checkout) carries the
``real`` marker (``pytest -m real`` runs exactly them, ``pytest -m "not real"`` the rest) and,
without the folder, skips with one message, :data:`tests.conftest.SHARED_SKIP`.

How a new test says it needs the folder (tests/conftest.py):

    from tests.conftest import needs_shared, skip_without_shared

    @needs_shared()                                  # or needs_shared("kineto/x.pt.trace.json.gz")
    def test_x(): ...
    pytestmark = needs_shared().marks                # a whole module
    pytest.param(path, marks=pytest.mark.real)       # one case of a mixed parameter list
    skip_without_shared("some.sqlite")               # inside a test, for one file
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT, SHARED_SKIP, needs_shared

TESTS = ROOT / "tests"
#: what marks a test file as one that reads ../shared
USES_SHARED = re.compile(r"SHARED_TRACES|needs_shared|pytest\.mark\.real|\"shared\" / \"traces\"|/work/shared")


def _shared_files() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in TESTS.glob("test_*.py")
                  if p.name != Path(__file__).name and USES_SHARED.search(p.read_text(encoding="utf-8")))


def _pytest(*args: str, shared: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    if shared is not None:
        env["NSYSDOC_SHARED_TRACES"] = str(shared)
    return subprocess.run([sys.executable, "-m", "pytest", "--import-mode=importlib", "-p", "no:cacheprovider",
                           "-q", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=1800)


def _ids(out: str) -> set[str]:
    return {line.strip() for line in out.splitlines() if "::" in line and not line.startswith(("SKIPPED", "ERROR"))}


def test_the_marker_is_registered_and_the_skip_message_names_the_folder():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^\s*"real: needs \.\./shared/traces', text, flags=re.M)
    assert "../shared/traces" in SHARED_SKIP and "not in this checkout" in SHARED_SKIP


def test_no_other_skip_message_speaks_of_the_shared_folder():
    """Source scan: a skip reason about absent shared captures is the one message, never its own
    wording (``pytest.skip("file absent")``, ``reason="shared traces absent"``)."""
    own = re.compile(r"""(?:pytest\.skip\(|reason=)\s*f?["'][^"']*(?:shared|absent|not present|no real traces|"""
                     r"""not here|not on this machine)""", re.I)
    found = [f"{p.name}:{n}" for p in TESTS.glob("*.py") if p.name != Path(__file__).name for n, line in
             enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if own.search(line)]
    assert found == []


@pytest.mark.slow  # issue 50: pytest in a process (4.4 s of CPU); .ci/run runs it
def test_without_the_folder_every_real_test_skips_with_the_one_message(tmp_path):
    missing = tmp_path / "no-shared" / "traces"
    files = _shared_files()
    assert len(files) >= 20, files
    run = _pytest("-m", "real", "-rs", *files, shared=missing)
    assert run.returncode in (0, 5), run.stdout[-3000:] + run.stderr[-3000:]
    assert re.search(r"\b\d+ skipped\b", run.stdout) and not re.search(r"\b\d+ (?:passed|failed|errors?)\b",
                                                                      run.stdout), run.stdout[-3000:]
    reasons = set(re.findall(r"^SKIPPED \[\d+\] [^:]+:\d+: (.*)$", run.stdout, flags=re.M))
    assert reasons == {SHARED_SKIP}, reasons


@needs_shared()
def test_the_rest_is_the_same_with_or_without_the_folder(tmp_path):
    """``-m "not real"`` collects the same tests with the folder and without it: every test whose
    cases come from the folder (a glob of it) is marked ``real``; and ``-m real`` holds tests."""
    files = _shared_files()
    with_ = _pytest("--collect-only", "-m", "not real", *files)
    without = _pytest("--collect-only", "-m", "not real", *files, shared=tmp_path / "no-shared" / "traces")
    assert with_.returncode == without.returncode == 0, with_.stdout[-2000:] + without.stdout[-2000:]
    assert _ids(with_.stdout) == _ids(without.stdout)
    real = _pytest("--collect-only", "-m", "real", *files)
    assert real.returncode == 0 and len(_ids(real.stdout)) > 100
    assert not _ids(real.stdout) & _ids(with_.stdout)
