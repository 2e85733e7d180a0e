"""The assembly's kernel statistics run on a thread of their own while the other sections are
computed (issue 50, warm fixed costs): the critical path's step graphs are walked before that
thread has finished, and only its what-ifs wait for the statistics (``kernels`` given to
:func:`nsysdoc.assembly.critical_path.critical_path_metrics` as a function).

The capture is ``one_kernel_dominates_the_step`` of ``nsysdoc/testing/what_if_scenarios.py``: one
6 ms convolution, the step's dominant kernel, then 4 GEMMs of 0.3 ms and a synchronize. By hand
(the docstring of ``test_two_fixes_of_the_same_kernel_are_not_a_sum`` in tests/test_what_if.py):
the dominant-kernel what-if makes the convolution twice as fast, 6 ms -> 3 ms, on the path: saves
3.0 ms per step. That what-if exists only if the critical path read the kernel statistics (the
rules' top kernel is their ``by_name`` table's first compute kernel).
"""
from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import nsysdoc.assembly as assembly  # noqa: E402
from nsysdoc.testing.what_if_scenarios import WHAT_IF_PAIRS  # noqa: E402
from tests.conftest import diagnose_path  # noqa: E402


def test_slow_kernel_statistics_still_feed_the_critical_path_what_ifs(tmp_path, monkeypatch):
    """The kernel thread is made 0.3 s slow: the critical path (computed meanwhile on the main
    thread) must wait for its statistics at its what-ifs, not read a missing table; the
    dominant-kernel what-if saves 3.0 ms of the step (module docstring), as without the delay."""
    orig = assembly._kernel_metrics
    threads = []

    def slow(*args, **kwargs):
        threads.append(threading.current_thread().name)
        time.sleep(0.3)
        return orig(*args, **kwargs)

    monkeypatch.setattr(assembly, "_kernel_metrics", slow)
    r = diagnose_path(WHAT_IF_PAIRS["one_kernel_dominates_the_step"][0]().write(tmp_path / "c.sqlite"))
    assert threads and threads[0].startswith("nsysdoc-kernels")  # the statistics ran on their thread
    wis = r["metrics"]["critical_path"]["what_if"]
    assert wis["dominant-kernel"]["saved_ms_per_step"] == pytest.approx(3.0, abs=6e-5)
    assert r["metrics"]["kernels"]["count"] == 4 * 5  # 4 steps x (1 convolution + 4 GEMMs)

