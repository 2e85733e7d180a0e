"""Shared test fixtures."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Real nsys exports live beside the repository (never copied into it); tests skip without them.
SHARED_TRACES = Path(os.environ.get("NSYSDOC_SHARED_TRACES", ROOT.parent / "shared" / "traces"))


# --- issue 49: tests that need ../shared -------------------------------------------------------
#: The one skip message of every test that needs the folder beside the checkout.
SHARED_SKIP = "needs ../shared/traces (real captures beside the checkout): not in this checkout"


def shared_missing(*paths) -> bool:
    """True when ``SHARED_TRACES`` is absent, or one of ``paths`` (relative to it, or absolute) is."""
    if not SHARED_TRACES.is_dir():
        return True
    return any(not (SHARED_TRACES / p).exists() for p in paths)


class _NeedsShared:
    """The ``real`` marker and a skip with :data:`SHARED_SKIP` when the files are absent: a
    decorator (``@needs_shared()``, ``@needs_shared("kineto/x.pt.trace.json.gz")``), or its
    ``marks`` for ``pytestmark = needs_shared().marks`` / ``pytest.param(..., marks=needs_shared().marks)``."""

    def __init__(self, paths) -> None:
        self.marks = [pytest.mark.real, pytest.mark.skipif(shared_missing(*paths), reason=SHARED_SKIP)]

    def __call__(self, fn):
        for m in self.marks:
            fn = m(fn)
        return fn


def needs_shared(*paths) -> _NeedsShared:
    """How a test that reads ../shared says so (see :class:`_NeedsShared`): ``pytest -m real`` runs
    exactly these tests, ``pytest -m "not real"`` the others; without the folder they skip with
    :data:`SHARED_SKIP` (a test marked only ``@pytest.mark.real`` does too: :func:`pytest_runtest_setup`)."""
    return _NeedsShared(paths)


def skip_without_shared(*paths) -> None:
    """Inside a test or fixture: skip with :data:`SHARED_SKIP` when a file it reads is absent."""
    if shared_missing(*paths):
        pytest.skip(SHARED_SKIP)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Every ``real`` test skips with the one message when ../shared/traces is absent, before any
    other skip (an empty parameter list from a glob of the folder included)."""
    if item.get_closest_marker("real") is not None and not SHARED_TRACES.is_dir():
        pytest.skip(SHARED_SKIP)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Never touch the user's ~/.cache during tests."""
    monkeypatch.setenv("NSYSDOC_CACHE_DIR", str(tmp_path_factory.mktemp("nsysdoc-cache")))


@pytest.fixture
def build(tmp_path):
    """Write a Capture (or a named scenario) to an SQLite file and return its path."""
    from nsysdoc.testing.scenarios import SCENARIOS

    def _build(capture_or_name, name: str | None = None, **kwargs) -> Path:
        if isinstance(capture_or_name, str):
            cap = SCENARIOS[capture_or_name](**kwargs)
            name = name or capture_or_name
        else:
            cap = capture_or_name
        return cap.write(tmp_path / f"{name or 'capture'}.sqlite")

    return _build


def real_traces() -> list[Path]:
    if not SHARED_TRACES.is_dir():
        return []
    return sorted(SHARED_TRACES.glob("*.sqlite"))


def analyze_path(path, **kwargs) -> dict:
    from nsysdoc.analysis import analyze
    from nsysdoc.trace import load_trace

    return analyze(load_trace(path, cache=False), **kwargs).to_dict()


def diagnose_path(path, **kwargs) -> dict:
    """The full JSON result of ``nsysdoc report``: metrics, findings of the built-in rules (no project
    config) and the verdict."""
    from nsysdoc.analysis import analyze
    from nsysdoc.rules import apply_rules, load_rules
    from nsysdoc.trace import load_trace

    return apply_rules(analyze(load_trace(path, cache=False), **kwargs).to_dict(), load_rules())


def run_cli(*args, cwd=None, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run ``python -m nsysdoc ARGS`` in a fresh process that imports this checkout's package."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "nsysdoc", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, env=env)
