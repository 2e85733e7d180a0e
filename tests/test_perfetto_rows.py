"""``nsysdoc.assembly.perfetto_rows`` (issue 51): the rows the Perfetto export formats, read from the
capture and its analysis, so that ``views.perfetto`` imports no engine or reader.

The capture is ``tests.test_perfetto._tiny`` (builder timing model, tests/test_judgement_scenarios.py):
process 4242, thread "main" starting at 1 s; each of 4 steps is a ``ProfilerStep#i`` range holding
a launch call (5 µs), a stream sync returning 2 µs after its kernel ends (the kernel starts 0.6 x 5
+ 2 = 5 µs after the launch call's start and runs 1,000 µs), then 3,000 µs of host work. So step 0
is [1,000,000,000, 1,004,007,000) ns: the launch call [1,000,000,000, 1,000,005,000), the sync
[1,000,005,000, 1,001,007,000) (kernel end 1,001,005,000 + 2 µs).
"""
from __future__ import annotations

import numpy as np

from nsysdoc.assembly.perfetto_rows import ExportSource, api_name, host_ids
from nsysdoc.testing.builder import global_tid
from tests.test_perfetto import _analysis, _tiny

S0, S1 = 1_000_000_000, 1_004_007_000


def test_host_ids_split_a_global_thread_id():
    # <hw:8><vm:8><pid:24><tid:24>: hw 1, pid 4242, tid 77 -> process part (hw, vm, pid bits), pid, tid
    g = global_tid(4242, 77, hw=1)
    assert host_ids(g) == ((1 << 56) | (4242 << 24), 4242, 77)


def test_api_calls_and_nvtx_ranges_of_the_first_step(tmp_path):
    src = ExportSource(_analysis(_tiny(tmp_path / "tiny.sqlite")))
    none = lambda start, lo: np.zeros(len(start), dtype=bool)  # noqa: E731 - nothing written before
    api = src.api_calls(S0, S1, False, none)
    assert api["start"].tolist() == [S0, 1_000_005_000]
    assert api["end"].tolist() == [1_000_005_000, 1_001_007_000]
    assert api["sync"].tolist() == [0, 1]  # the stream sync blocks; the launch does not
    assert set(api["gtid"].tolist()) == {global_tid(4242, 4242)}
    names = [api_name(str(x)) for x in src.lookup(api["name_id"])]
    assert names[0] == "cudaLaunchKernel" and names[1].startswith("cudaStreamSynchronize")
    nv = src.nvtx_ranges(S0, S1, False, none)
    assert nv["text"].tolist() == ["ProfilerStep#0"]
    assert (nv["start"].tolist(), nv["end"].tolist()) == ([S0], [S1])
    # before=True at 2 µs into the step: the rows started before it and still running at it
    lo = S0 + 2_000
    api = src.api_calls(lo, S1, True, none)
    assert (api["start"].tolist(), api["end"].tolist()) == ([S0], [1_000_005_000])
    assert src.nvtx_ranges(lo, S1, True, none)["text"].tolist() == ["ProfilerStep#0"]
    # ... but not those an earlier interval of the selection already wrote
    assert src.api_calls(lo, S1, True, lambda start, lo: start >= S0) is None


def test_the_replayed_slices_hold_every_kernel_once(tmp_path):
    src = ExportSource(_analysis(_tiny(tmp_path / "tiny.sqlite")))
    starts = [int(x) for st in src.slices(S0, S1 + 3 * 4_007_000) for x in st.ops.start_ns]
    # kernels at 1 s + 5 µs + k x 4,007 µs (k = 0..3)
    assert sorted(starts) == [S0 + 5_000 + k * 4_007_000 for k in range(4)]
