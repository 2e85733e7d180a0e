"""Issue 46 (Judgement III), items 1 and 4: idle gaps ended by an operation nobody launched are read
from the device's launching thread; a host sync costs only the idle while the host is blocked plus
the refill up to the next launch.

Every expected number is computed by hand from the scenario code
(``nsysdoc/testing/gap_scenarios.py``), the builder's timing model (header of
``tests/test_judgement_scenarios.py``; capture start T0 = 1e9 ns, queue latency 2,000 ns) and
``docs/glossary.md`` ("Idle gaps and what the host was doing"); never from the tool's output.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from nsysdoc.metrics import gpu as gpu_m  # noqa: E402
from nsysdoc.testing.builder import MS, Capture  # noqa: E402
from nsysdoc.testing.gap_scenarios import (KMEANS_ASSIGN, sync_copy_then_mpi_host_work,  # noqa: E402
                                           unified_memory_migrations_host_bound)
from tests.conftest import diagnose_path  # noqa: E402

A = 6e-5  # JSON rounds to 4 decimals


def approx(x: float, tol: float = A):
    return pytest.approx(x, abs=tol)


def fired(r: dict) -> set[str]:
    return {f["rule"] for f in r["findings"]}


def finding(r: dict, rule: str) -> dict:
    (f,) = [x for x in r["findings"] if x["rule"] == rule]
    return f


# ----------------------------------------------------------------------------------------------
# 1. unified_memory_migrations_host_bound (defaults: 5 iterations, 2 ms kernel, 20 ms CPU,
#    10 migrations of 50 µs, the first 0.5 ms after the sync returns, then every 1.5 ms)
# ----------------------------------------------------------------------------------------------
# Iteration i starts at S = T0 + i * L:
#   launch API [S, S+5,000); kernel [S+5,000, S+2,005,000) (S + 0.6*5,000 + 2,000 = S+5,000)
#   cudaDeviceSynchronize [S+5,000, S+2,007,000) (kernel end + 2,000): back = S+2,007,000
#   migrations (no runtime row) at m_k = back + 500,000 + 1,500,000 k, k = 0..9, each 50,000
#   CPU 20 ms -> next iteration at S' = back + 20,000,000 = S + 22,007,000 = L
# A closing kernel after the loop is launched at S_5 like the others, so every iteration is alike.
# Steps (NVTX "iteration i") [S_i, S_i+1): 22.007 ms each; window = 5 x 22.007 = 110.035 ms.
# Per step, busy = kernel 2,000,000 + 10 x 50,000 = 2,500,000; the idle 19,507,000 splits:
#   [S, S+5,000): the launch call of the step's kernel (the previous gap's end)   launch     5,000
#   gap [S+2,005,000, m_0 = back+500,000) ends in a migration: nobody launched it; the device's
#     launching thread (the main thread: it launched the kernel before the gap) was in the blocking sync
#     until back (row 5)                                                          sync       2,000
#     then ran CPU code with no CUDA call: 500,000 — under 1 ms, but no dispatch window (there is
#     no launching call), so host, not launch                                     host     500,000
#   9 gaps between migrations, 1,500,000 - 50,000 each, all CPU code               host  13,050,000
#   gap [m_9 + 50,000 = back+14,050,000, S'+5,000) ends in the main thread's launch at a = S':
#     [back+14,050,000, S') nothing, long window                                  host   5,950,000
#     [S', S'+5,000) the launch call: in the next step (counted above)
#   host per step = 500,000 + 13,050,000 + 5,950,000 = 19,500,000; sum 2,000 + 5,000 + 19,500,000
#   = 19,507,000 = the idle. Nothing is unattributed.
# Before issue 46 the gap ending in m_0 and the 9 gaps between migrations were unattributed:
#   502,000 + 13,050,000 = 13,552,000 per step (67.76 ms in the window).
UM_STEP_MS = 22.007
UM_WINDOW_MS = 5 * UM_STEP_MS                       # 110.035
UM_HOST_STEP_MS = 19.5
UM_HOST_MS = 5 * UM_HOST_STEP_MS                    # 97.5
UM_HOST_PCT = UM_HOST_MS / UM_WINDOW_MS * 100       # 88.6082 %
UM_SYNC_MS = 5 * 0.002                              # 0.01 ms -> 0.009%: no host-sync finding


def test_unified_memory_migrations_are_read_from_the_launching_thread(tmp_path):
    r = diagnose_path(unified_memory_migrations_host_bound().write(tmp_path / "um.sqlite"))
    assert r["capture"]["window"]["duration_ms"] == approx(UM_WINDOW_MS)
    steps = [s for s in r["steps"] if s.get("primary", True)]
    assert len(steps) == 5
    for s in steps:
        b = s["breakdown_ms"]
        assert s["duration_ms"] == approx(UM_STEP_MS)
        assert b["compute"] == approx(2.0) and b["copy"] == approx(0.5)
        assert b["idle_sync"] == approx(0.002)
        assert b["idle_launch"] == approx(0.005)
        assert b["idle_host"] == approx(UM_HOST_STEP_MS)
        assert b.get("idle_unattributed", 0.0) == approx(0.0)
    v = r["metrics"]["values"]
    assert v["idle_unattributed_ms"] == approx(0.0) and v["idle_unattributed_pct"] == approx(0.0)
    assert v["idle_host_ms"] == approx(UM_HOST_MS)
    assert v["idle_sync_ms"] == approx(UM_SYNC_MS)
    (dev,) = r["devices"]
    assert dev["idle_ms_by_cause"]["unattributed"] == approx(0.0)
    assert dev["idle_ms_by_cause"]["host"] == approx(UM_HOST_MS)
    # the expert reading: host-bound, not set-up, no host-sync warning
    assert r["verdict"]["headline"] == "host-bound"
    f = finding(r, "host-bound")
    assert f["impact_ms"] == approx(UM_HOST_MS)
    assert f["impact_pct"] == approx(UM_HOST_PCT)
    assert f["severity"] == "critical"
    assert "host-sync" not in fired(r) and "one-time-setup" not in fired(r)


def migrations_on_a_device_nobody_launches_to() -> Capture:
    """3 iterations on device 0 (launch a 1 ms kernel, cudaDeviceSynchronize, 5 ms of CPU code) and
    one closing kernel; during each CPU phase two unified-memory migrations of 50 µs run on device
    1, 1 ms and 3 ms after the sync returns. No thread ever launches anything on device 1."""
    cap = Capture()
    p = cap.process(pid=6100, name="um_two_gpus")
    t = p.thread()
    for i in range(3):
        with t.range(f"iteration {i}"):
            t.launch(KMEANS_ASSIGN, 1000.0)
            t.sync_device()
            back = t.now_ns
            for off_ms in (1.0, 3.0):
                p.unlaunched_copy(back + int(off_ms * MS), 50.0, kind="UVM DtoH", device=1)
            t.cpu(us=5000.0)
    t.launch(KMEANS_ASSIGN, 1000.0)
    t.sync_device()
    return cap


def test_gaps_stay_unattributed_only_without_a_launching_thread_on_the_device(tmp_path):
    """Iteration i at S = T0 + i * L: launch [S, S+5,000), kernel [S+5,000, S+1,005,000), sync until
    S+1,007,000 = back, CPU 5 ms: L = 6,007,000. Window = 3 steps [S_0, S_3) = 18.021 ms.
    Device 0 is read as before (its ops have launching calls): no unattributed idle.
    Device 1: migrations [back+1,000,000, +50,000) and [back+3,000,000, +50,000) per iteration,
    busy 6 x 50,000 = 300,000. After the last one (ends S_2 + 4,057,000) nothing runs on device 1
    up to the window end S_3 = S_2 + 6,007,000: tail 1,950,000. Every other idle instant of device 1
    (18,021,000 - 300,000 - 1,950,000 = 15,771,000) lies in gaps ended by a migration on a device
    where no operation has a known launching call: unattributed."""
    r = diagnose_path(migrations_on_a_device_nobody_launches_to().write(tmp_path / "um2.sqlite"))
    assert r["capture"]["window"]["duration_ms"] == approx(18.021)
    devs = {d["device"]: d for d in r["devices"]} if "device" in r["devices"][0] else dict(enumerate(r["devices"]))
    d0, d1 = devs[min(devs)], devs[max(devs)]
    assert d0["idle_ms_by_cause"]["unattributed"] == approx(0.0)
    assert d1["idle_ms_by_cause"]["unattributed"] == approx(15.771)
    assert d1["idle_ms_by_cause"]["tail"] == approx(1.95)


# ----------------------------------------------------------------------------------------------
# 2. sync_copy_then_mpi_host_work (defaults: 5 iterations, 262,144,000 B each way at 12 GB/s,
#    1 ms saxpy, 170 ms of MPI/CPU code)
# ----------------------------------------------------------------------------------------------
# Copy time D = int(262,144,000 / 12) = 21,845,333 ns. Iteration i starts at S:
#   cudaMemcpy HtoD (blocking) API [S, S+21,852,933); copy [S+5,600, S+21,850,933)
#   launch API [S+21,852,933, S+21,857,933); saxpy [S+21,857,933, S+22,857,933)
#   cudaMemcpy DtoH API [S+21,857,933, S+44,705,266) (copy end + 2,000); copy [S+22,857,933,
#   S+44,703,266) (queued behind the kernel)
#   CPU 170 ms -> S' = S + 214,705,266 = L
# Steps [S_i, S_i+1) (214.7053 ms); window = 5 L = 1,073.5263 ms.
# Per step (i < 4), busy = 2 D + 1,000,000 = 44,690,666; the idle 170,014,600 splits:
#   [S, S+5,600): the step's HtoD cudaMemcpy, a blocking call (row 5)              sync      5,600
#   gap [S+21,850,933, S+21,857,933): in the HtoD copy call until S+21,852,933     sync      2,000
#     then the launch call, a short window                                         launch    5,000
#   gap [S+44,703,266, S'+5,600): in the DtoH copy call until S+44,705,266         sync      2,000
#     the sync returned at r = S+44,705,266 and the next launching call is at a = S':
#     a - r = 170,000,000 > 1 ms: no refill; nothing on the thread, long window     host 170,000,000
#     [S', S'+5,600): next step
#   sync 9,600 = 0.0096 ms, launch 0.005 ms, host 170.0 ms per step.
# The last step: the same 5,600 + 2,000 = 7,600 of sync, launch 5,000, and its final gap
#   (nothing follows) is tail: 214,705,266 - 44,690,666 - 7,600 - 5,000 = 170,002,000.
# Before issue 46 the sync budget charged min(B, a - g0) of the host part to the sync whatever
#   followed, B = the DtoH call's S+44,705,266 - (S+21,857,933) = 22,847,333: per step 5,600 +
#   2,000 + 22,847,333 = 22,854,933, x 4 + 7,600 = 91.4273 ms of sync: a host-sync warning.
MPI_STEP_MS = 214.705266
MPI_WINDOW_MS = 5 * MPI_STEP_MS                     # 1,073.52633
MPI_HOST_MS = 4 * 170.0                             # 680.0
MPI_SYNC_MS = 4 * 0.0096 + 0.0076                   # 0.046


def test_sync_copy_then_host_work_charges_the_sync_only_its_blocked_idle(tmp_path):
    r = diagnose_path(sync_copy_then_mpi_host_work().write(tmp_path / "mpi.sqlite"))
    assert r["capture"]["window"]["duration_ms"] == approx(MPI_WINDOW_MS)
    steps = [s for s in r["steps"] if s.get("primary", True)]
    assert len(steps) == 5
    for i, s in enumerate(steps):
        b = s["breakdown_ms"]
        last = i == 4
        assert s["duration_ms"] == approx(MPI_STEP_MS)
        assert b["idle_sync"] == approx(0.0076 if last else 0.0096)
        assert b["idle_launch"] == approx(0.005)
        assert b["idle_host"] == approx(0.0 if last else 170.0)
        assert b["idle_tail"] == approx(170.002 if last else 0.0)
    v = r["metrics"]["values"]
    assert v["idle_sync_ms"] == approx(MPI_SYNC_MS)
    assert v["idle_host_ms"] == approx(MPI_HOST_MS)
    assert "host-sync" not in fired(r)
    assert r["verdict"]["headline"] == "host-bound"
    f = finding(r, "host-bound")
    assert f["impact_ms"] == approx(MPI_HOST_MS)
    assert f["impact_pct"] == approx(MPI_HOST_MS / MPI_WINDOW_MS * 100)   # 63.3426 %


def test_item_then_straight_back_to_launching_stays_sync(tmp_path):
    """``.item()`` then 50 µs of Python then the next launch: the refill is the sync's.

    kernel A: launch [T0, T0+5,000), kernel [T0+5,000, T0+1,005,000); item(): DtoH async API
    [T0+5,000, T0+11,000), copy [T0+1,005,000, T0+1,006,000); cudaStreamSynchronize [T0+11,000,
    T0+1,008,000); CPU 50 µs; launch B [T0+1,058,000, +5,000), kernel [T0+1,063,000, T0+2,063,000);
    item() again; then a closing range end. Gap [T0+1,006,000, T0+1,063,000): sync call until
    T0+1,008,000 (2,000); the sync returned at r = T0+1,008,000 and the launch is at
    a = T0+1,058,000: a - r = 50,000 <= 1 ms: the refill is the first min(B = 997,000,
    a - g0 = 52,000) of the host part, all of [g0, a): sync 52,000; the launch call [a, a+5,000)
    is launch. 0 host."""
    cap = Capture()
    t = cap.process(pid=6200).thread()
    with t.range("iteration 0"):
        t.launch(KMEANS_ASSIGN, 1000.0)
        t.item()
        t.cpu(us=50.0)
        t.launch(KMEANS_ASSIGN, 1000.0)
        t.item()
    r = diagnose_path(cap.write(tmp_path / "item.sqlite"))
    (s,) = [x for x in r["steps"] if x.get("primary", True)]
    b = s["breakdown_ms"]
    # the first gap [T0, T0+5,000) is the launch call of A (launch); after the second item() the
    # last copy ends at T0+2,064,000 and the range at T0+2,066,000: 2,000 of tail (nothing follows)
    assert b["idle_sync"] == approx(0.052)
    assert b.get("idle_host", 0.0) == approx(0.0)
    assert b["idle_launch"] == approx(0.010)
    assert b["idle_tail"] == approx(0.002)


# ----------------------------------------------------------------------------------------------
# 3. The sync refill bound, on both sides (unit: classify_found_gaps through the engine is
#    covered above; here the constant itself)
# ----------------------------------------------------------------------------------------------
def test_refill_bound_is_the_dispatch_bound():
    assert gpu_m.SYNC_REFILL_MAX_NS == gpu_m.DISPATCH_MAX_NS == 1_000_000


@pytest.mark.parametrize("python_us, sync_ms, host_ms", [
    # refill a - r = python_us: 999 µs <= 1 ms -> sync; 1,001 µs > 1 ms -> host
    (999.0, 0.002 + 0.999, 0.0),
    (1001.0, 0.002, 1.001),
])
def test_refill_bound_both_sides(tmp_path, python_us, sync_ms, host_ms):
    """launch A [T0, T0+5,000), kernel [T0+5,000, T0+1,005,000); cudaStreamSynchronize
    [T0+5,000, T0+1,007,000) (kernel end + 2,000); Python ``python_us``; launch B at
    a = T0+1,007,000 + python_us, its kernel 5,000 later; then a closing cudaStreamSynchronize.
    Gap [T0+1,005,000, a+5,000): sync call 2,000 (B = 1,002,000); [r = T0+1,007,000, a): when
    a - r <= 1 ms the refill is the first min(B, a - g0 = python_us + 2 µs) of the host part: all
    of [g0, a) (sync 1.001 ms for 999 µs); else host (the host window a - g0 = 1,003 µs is long,
    so uncovered time is host, not dispatch); the launch call 5,000 is launch."""
    cap = Capture()
    t = cap.process(pid=6300).thread()
    with t.range("iteration 0"):
        t.launch(KMEANS_ASSIGN, 1000.0)
        t.sync_stream()
        t.cpu(us=python_us)
        t.launch(KMEANS_ASSIGN, 1000.0)
        t.sync_stream()
    r = diagnose_path(cap.write(tmp_path / "refill.sqlite"))
    (s,) = [x for x in r["steps"] if x.get("primary", True)]
    b = s["breakdown_ms"]
    assert b["idle_sync"] == approx(sync_ms)
    assert b.get("idle_host", 0.0) == approx(host_ms)
    # the launch calls of A ([T0, T0+5,000), before A's kernel) and of B
    assert b["idle_launch"] == approx(0.010)


def test_launching_thread_lookup_without_a_known_launch_in_the_slice():
    """No operation of the slice has a known launching call: the earlier slices' launcher of the
    device (``prev``) is used, and 0 (unattributed) without one."""
    from nsysdoc.metrics.gpu import _launching_thread

    class NoLaunch:
        api = np.array([-1, -1])
        device = np.array([0, 0])
        start_ns = np.array([10, 20])

    assert _launching_thread(NoLaunch(), np.array([0]), np.array([0]), None).tolist() == [0]
    assert _launching_thread(NoLaunch(), np.array([0, 1]), np.array([0, 0]), np.array([77, 0])).tolist() == [77, 0]


def test_gap_ended_by_a_migration_is_read_from_the_thread_that_launched_before_it(tmp_path):
    """Thread A launches k1 at T0: API [T0, T0+5,000), kernel [T0+5,000, T0+105,000). A migration
    nobody launched runs [T0+300,000, T0+350,000). Thread B (whose NVTX range is the step) sits in
    cudaMalloc [T0+110,000, T0+410,000), then launches k2: API [T0+410,000, +5,000), kernel
    [T0+415,000, T0+515,000), and synchronizes until T0+517,000.
    Gap [105,000, 300,000) ends in the migration: the last operation before it on the device with
    a known launching call is k1, launched by A, so A's activity splits it: nothing on A ->
    host 195 (no dispatch window without a launching call). (Read from B, the launcher of the
    next op, it would be 5 host + 190 alloc.)
    Gap [350,000, 415,000) ends in k2 (B): cudaMalloc until 410,000 -> alloc 60; launch call -> 5.
    Gap [T0, T0+5,000) ends in k1 (A's call) -> launch 5; [515,000, 517,000) tail 2.
    Totals (µs): host 195, alloc 60, launch 10, tail 2, unattributed 0."""
    cap = Capture()
    p = cap.process(pid=6400)
    a = p.thread()
    b = p.thread(tid=6401)
    a.launch(KMEANS_ASSIGN, 100.0)
    p.unlaunched_copy(cap.start_ns + 300_000, 50.0, kind="UVM HtoD")
    with b.range("iteration 0"):
        b.at(cap.start_ns + 110_000)
        b.malloc(us=300.0)
        b.launch(KMEANS_ASSIGN, 100.0)
        b.sync_stream()
    r = diagnose_path(cap.write(tmp_path / "two.sqlite"))
    (dev,) = r["devices"]
    c = dev["idle_ms_by_cause"]
    assert c["host"] == approx(0.195)
    assert c["alloc"] == approx(0.060)
    assert c["launch"] == approx(0.010)
    assert c["unattributed"] == approx(0.0)


def test_the_reading_does_not_depend_on_where_slices_are_cut(tmp_path, monkeypatch):
    """The unified-memory scenario analysed in slices of 8 operations (most gaps then end in a
    slice whose known launches all lie in earlier slices) gives the same idle split as in one
    slice: 97.5 ms host, 0.01 ms sync, 0.025 ms launch, nothing unattributed (hand numbers above)."""
    from nsysdoc.analysis import analyze
    from nsysdoc.trace import load_trace

    path = unified_memory_migrations_host_bound().write(tmp_path / "um.sqlite")
    out = []
    for rows in (None, 8):
        if rows is None:
            monkeypatch.delenv("NSYSDOC_SLICE_ROWS", raising=False)
        else:
            monkeypatch.setenv("NSYSDOC_SLICE_ROWS", str(rows))
        out.append(analyze(load_trace(path, cache=False)).to_dict()["devices"][0]["idle_ms_by_cause"])
    for c in out:
        assert c["host"] == approx(UM_HOST_MS)
        assert c["sync"] == approx(UM_SYNC_MS)
        assert c["launch"] == approx(0.025)
        assert c["unattributed"] == approx(0.0)


def test_glossary_example_operation_nobody_launched(tmp_path):
    """docs/glossary.md, "Operation nobody launched" (µs from T0): T launches a kernel at 0 (call
    [0, 5), kernel [5, 1,000)), then runs CPU code; migrations (no runtime row) [1,500, 1,550) and
    [3,050, 3,100); T launches the next kernel at 6,000 (kernel [6,005, 6,105)) and synchronizes
    (returns at 6,107). Gaps: [0, 5) the first launch call -> launch 5; [1,000, 1,500) and
    [1,550, 3,050) end in migrations, read from T (it launched the kernel before them), nothing on T ->
    host 500 + 1,500 (the first under 1 ms, still host); [3,100, 6,005): host 2,900, the launch call
    [6,000, 6,005) launch 5; [6,105, 6,107) tail 2. Host 4.9 ms, launch 10 µs, unattributed 0."""
    cap = Capture()
    p = cap.process(pid=6500)
    t = p.thread()
    with t.range("iteration 0"):
        t.launch(KMEANS_ASSIGN, 995.0)
        p.unlaunched_copy(cap.start_ns + 1_500_000, 50.0)
        p.unlaunched_copy(cap.start_ns + 3_050_000, 50.0)
        t.at(cap.start_ns + 6_000_000)
        t.launch(KMEANS_ASSIGN, 100.0)
        t.sync_stream()
    r = diagnose_path(cap.write(tmp_path / "gl.sqlite"))
    (dev,) = r["devices"]
    c = dev["idle_ms_by_cause"]
    assert c["host"] == approx(4.9)
    assert c["launch"] == approx(0.010)
    assert c["tail"] == approx(0.002)
    assert c["unattributed"] == approx(0.0)
