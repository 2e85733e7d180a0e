"""Kernels that cannot fill the GPU (issue 28): the occupancy arithmetic on hand-computed examples,
the launch key the loaders pack, the idle-SM sweep, and the values an analysis reports.

Every expected number is worked out in the comments from the CUDA occupancy calculator's rules
(docs/glossary.md, "Under-filled GPU") and the builder's timing model (tests/test_glossary_examples.py)."""
from __future__ import annotations

import gzip
import json
import math
import sqlite3

import numpy as np
import pytest

from nsysdoc.analysis import analyze
from nsysdoc.metrics import occupancy as O
from nsysdoc.testing import Capture
from nsysdoc.trace import load_trace
from nsysdoc.trace import schema as S

from tests.conftest import SHARED_TRACES, needs_shared  # noqa: E402  (issue 49)

TRACES = SHARED_TRACES
A100 = O.device_limits(108, 8.0)
H100 = O.device_limits(132, 9.0)


# ------------------------------------------------------------------------------------------
# SM fill and theoretical occupancy
# ------------------------------------------------------------------------------------------
def test_sm_fill_is_blocks_over_sms_capped_at_one():
    # one block (of one thread) on a 28-SM GPU uses 1 SM of 28
    assert O.sm_fill(1, 28) == pytest.approx(1 / 28)
    assert O.sm_fill(27, 28) == pytest.approx(27 / 28)
    assert O.sm_fill(28, 28) == 1.0 and O.sm_fill(5000, 108) == 1.0
    assert math.isnan(O.sm_fill(-1, 28)) and math.isnan(O.sm_fill(4, 0))


def test_a100_256_threads_64_registers_is_half_occupancy():
    # A100: 64 warps, 65,536 registers, 164 KB shared memory, 32 blocks per SM.
    # 256 threads = 8 warps. Warps: 64 // 8 = 8 blocks. Registers: 64 x 32 = 2,048 per warp (a
    # multiple of 256); a sub-partition holds 65,536 / 4 = 16,384 -> 8 warps, x 4 = 32 warps -> 4
    # blocks. Shared memory: 0 + the 1 KB reserve = 1,024 -> 167,936 // 1,024 = 164 blocks. Cap 32.
    # min = 4 blocks x 8 warps = 32 of 64 warps = 50%.
    assert O.blocks_per_sm(256, 64, 0, A100) == 4
    assert O.theoretical_occupancy(256, 64, 0, A100) == pytest.approx(50.0)


def test_shared_memory_limits_a_cutlass_tile():
    # cutlass 64x64 tile on an A100: 128 threads (4 warps), 90 registers, 48 KB static shared memory.
    # Shared memory: 49,152 + 1,024 = 50,176 (a multiple of 128) -> 167,936 // 50,176 = 3 blocks.
    # Registers: 90 x 32 = 2,880 -> 3,072 per warp; 16,384 // 3,072 = 5 warps per sub-partition
    # -> 20 warps -> 5 blocks. Warps: 16. Cap 32. min = 3 blocks x 4 warps = 12 / 64 = 18.75%.
    assert O.blocks_per_sm(128, 90, 49152, A100) == 3
    assert O.theoretical_occupancy(128, 90, 49152, A100) == pytest.approx(18.75)


def test_registers_limit_a_volta_kernel():
    # V100 (7.0: 64 warps, 96 KB, no reserve): 128 threads, 128 registers, 16 KB shared memory.
    # Registers: 4,096 per warp -> 16,384 // 4,096 = 4 warps per sub-partition -> 16 warps -> 4
    # blocks; shared memory 98,304 // 16,384 = 6; warps 16 -> 4 blocks x 4 warps = 25% (what the
    # PyTorch Profiler trace of such a kernel, volta_scudnn_128x64, estimates too).
    v100 = O.device_limits(80, 7.0)
    assert v100.reserved_smem_per_block == 0
    assert O.theoretical_occupancy(128, 128, 16384, v100) == pytest.approx(25.0)


def test_warps_and_the_block_cap_limit():
    # RTX 3080 (8.6: 48 warps): 1,024 threads = 32 warps -> 48 // 32 = 1 block -> 32 / 48 = 66.7%
    rtx = O.device_limits(68, 8.6)
    assert O.theoretical_occupancy(1024, 16, 0, rtx) == pytest.approx(100 * 32 / 48)
    # A100, 32 threads, 16 registers: warps allow 64 blocks, registers 512 per warp -> 32 per
    # sub-partition -> 128 blocks, shared memory 164, the cap 32 -> 32 warps / 64 = 50%
    assert O.blocks_per_sm(32, 16, 0, A100) == 32
    assert O.theoretical_occupancy(32, 16, 0, A100) == pytest.approx(50.0)


def test_launches_that_cannot_run_and_unknown_fields():
    assert O.blocks_per_sm(128, 256, 0, A100) == 0          # more than 255 registers per thread
    assert O.blocks_per_sm(1025, 16, 0, A100) == 0          # more than 1,024 threads
    assert O.blocks_per_sm(1024, 128, 0, A100) == 0         # 128 x 1,024 registers > 64 K per block
    got = O.theoretical_occupancy([-1, 256, 256], [32, -1, 32], [0, 0, -1], A100)
    assert np.isnan(got).all()
    unknown_gpu = O.device_limits(108, None)                 # no compute capability, no limits
    assert not unknown_gpu.occupancy_known and np.isnan(O.theoretical_occupancy(256, 32, 0, unknown_gpu))


def test_device_limits_prefer_recorded_values():
    # recorded values win over the compute capability's; the reserve is per-SM minus per-block
    lim = O.device_limits(46, 8.9, max_warps_per_sm=40, smem_per_sm=102400, smem_per_block_optin=101376)
    assert (lim.max_warps_per_sm, lim.max_blocks_per_sm, lim.regs_per_sm) == (40, 24, 65536)
    assert lim.reserved_smem_per_block == 1024 and lim.sm_count == 46
    # Turing records no reserve (64 KB per SM and per block)
    assert O.device_limits(72, 7.5).reserved_smem_per_block == 0
    # junk is unknown, not a crash
    assert O.device_limits("x", float("nan"), max_warps_per_sm=-3).sm_count is None


def test_low_occupancy_is_fewer_warps_than_schedulers():
    # H100: 32 threads with 200,000 B of dynamic shared memory: 201,024 -> 201,088 allocated; one
    # block per SM = 1 warp < 4 schedulers. The same block with 1 KB: 32 blocks = 32 warps.
    keys = S.pack_launch([1024, 1024], [32, 32], [32, 32], [200_000, 1024])
    t = O.launch_table(keys, [H100])
    assert t.low_occupancy[0].tolist() == [True, False]
    assert t.occupancy_pct[0, 0] == pytest.approx(100 / 64)
    assert not t.under[0].any()  # 1,024 blocks on 132 SMs fill every SM


# ------------------------------------------------------------------------------------------
# the packed launch key: numpy and SQLite agree
# ------------------------------------------------------------------------------------------
def test_pack_and_unpack_round_trip_with_unknown_fields():
    k = S.pack_launch([1, 3 * 2 * 5, 10**12, -1], [1, 256, 1024, 2000], [0, 64, 255, 300], [0, 49152, 232448, -5])
    f = S.unpack_launch(k)
    assert f["blocks"].tolist() == [1, 30, S.LAUNCH_BLOCKS_CAP, -1]   # capped, unknown
    assert f["threads"].tolist() == [1, 256, 1024, -1]               # 2,000 threads cannot be
    assert f["regs"].tolist() == [0, 64, 255, -1]
    assert f["smem"].tolist() == [0, 49152, 232448, -1]
    assert S.unpack_launch(S.LAUNCH_UNKNOWN) == {"blocks": -1, "threads": -1, "regs": -1, "smem": -1} or \
        all(int(v) == -1 for v in S.unpack_launch(S.LAUNCH_UNKNOWN).values())


ROWS = [  # gridX, gridY, gridZ, blockX, blockY, blockZ, regs, static, dynamic -> expected fields
    ((1, 1, 1, 1, 1, 1, 32, 0, 0), (1, 1, 32, 0)),
    ((16, 8, 2, 128, 2, 1, 90, 49152, 1024), (256, 256, 90, 50176)),
    ((2**31 - 1, 65535, 65535, 32, 1, 1, 0, 0, 0), (S.LAUNCH_BLOCKS_CAP, 32, 0, 0)),  # product > 2^63
    ((0, 1, 1, 1, 1, 1, 256, 300000, 0), (-1, 1, -1, 300000 & 262143)),  # no grid, 256 regs; smem masked
    ((5, 1, 1, 2048, 1, 1, 32, 0, 0), (5, -1, 32, 0)),           # a block of 2,048 threads
    ((None, 1, 1, 32, 1, 1, 32, 0, 0), (-1, -1, -1, -1)),         # NULL: the whole key is unknown
    ((-2, 1, 1, 32, 1, 1, 32, 0, 0), (-1, -1, -1, -1)),           # a negative grid: a negative key
    (("12", 1, 1, "abc", 1, 1, 32.5, 0, 0), (12, -1, 32, 0)),    # text read as a number (or 0), reals cut
]


def test_launch_key_sql_matches_pack_launch():
    con = sqlite3.connect(":memory:")
    con.execute(f"CREATE TABLE k ({', '.join(S.KERNEL_LAUNCH_COLUMNS)})")
    con.executemany(f"INSERT INTO k VALUES ({','.join('?' * 9)})", [r for r, _ in ROWS])
    # NULL becomes the unknown key, as the loader's column default
    keys = [S.LAUNCH_UNKNOWN if v is None else v
            for (v,) in con.execute(f"SELECT {S.launch_key_sql(S.KERNEL_LAUNCH_COLUMNS)} FROM k")]
    f = S.unpack_launch(keys)
    got = list(zip(f["blocks"].tolist(), f["threads"].tolist(), f["regs"].tolist(), f["smem"].tolist()))
    assert got == [e for _, e in ROWS]
    # the first two as numpy packs them
    assert keys[:2] == [S.pack_launch(1, 1, 32, 0), S.pack_launch(256, 256, 90, 50176)]


def test_launch_key_sql_without_the_columns():
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE k (gridX, gridY, blockX, blockY, blockZ)")   # no gridZ, no regs/smem
    con.execute("INSERT INTO k VALUES (4, 4, 64, 1, 1)")
    (key,), = con.execute(f"SELECT {S.launch_key_sql(['gridX', 'gridY', 'blockX', 'blockY', 'blockZ'])} FROM k")
    f = S.unpack_launch([key])
    assert (f["blocks"][0], f["threads"][0], f["regs"][0], f["smem"][0]) == (-1, 64, -1, -1)


# ------------------------------------------------------------------------------------------
# the idle-SM sweep
# ------------------------------------------------------------------------------------------
def _sweep(kernels, sm=108):
    d, s, e, b, under = zip(*[(0, s, e, min(b, sm), b < sm) for s, e, b in kernels])
    return O.FillSweep(d, s, e, b, under, np.array([sm]))


def test_one_kernel_alone_loses_d_times_one_minus_fill():
    # 1 block on 28 SMs for 1,040 ns: 1,040 x 27/28 = 1,002.857 idle-SM ns
    sw = _sweep([(0, 1040, 1)], sm=28)
    assert sw.recoverable_ns([0], [0], [2000])[0] == pytest.approx(1040 * 27 / 28)
    assert sw.wall_ns([0], [0], [2000])[0] == 1040
    # half the range: [0, 520) -> half of it
    assert sw.recoverable_ns([0], [-5], [520])[0] == pytest.approx(520 * 27 / 28)


def test_a_concurrent_full_kernel_leaves_nothing_idle():
    # 1 block [0, 100); a 4,096-block kernel on another stream [40, 200): idle only in [0, 40)
    sw = _sweep([(0, 100, 1), (40, 200, 4096)])
    assert sw.recoverable_ns([0], [0], [300])[0] == pytest.approx(40 * 107 / 108)
    assert sw.wall_ns([0], [0], [300])[0] == 100


def test_two_underfilled_kernels_share_the_idle_sms():
    # 10 blocks [0, 100) and 20 blocks [50, 150) on 108 SMs:
    # [0, 50): 98 idle, one kernel; [50, 100): 78 idle, two kernels; [100, 150): 88 idle, one
    sw = _sweep([(0, 100, 10), (50, 150, 20)])
    total = (50 * 98 + 50 * 78 + 50 * 88) / 108
    assert sw.recoverable_ns([0], [0], [150])[0] == pytest.approx(total)
    a = sw.share_ns([0], [0], [100])[0]      # first kernel: 50 x 98 + 50 x 78 / 2
    b = sw.share_ns([0], [50], [150])[0]     # second: 50 x 78 / 2 + 50 x 88
    assert a == pytest.approx((50 * 98 + 25 * 78) / 108) and b == pytest.approx((25 * 78 + 50 * 88) / 108)
    assert a + b == pytest.approx(total)
    assert sw.inside(0, np.array([-1, 0, 149, 150])).tolist() == [False, True, True, False]


# ------------------------------------------------------------------------------------------
# loaders: what is read, and what is missing
# ------------------------------------------------------------------------------------------
def _capture(variant="2026", **gpu) -> Capture:
    cap = Capture(variant=variant, **gpu)
    t = cap.process(pid=31).thread()
    for i in range(2):
        with t.range(f"ProfilerStep#{i}"):
            t.launch("one_thread(float*)", 10_000, grid=1, block=1)
            t.launch("tile(float*)", 2_000, grid=(16, 2, 2), block=(128, 2), registers=90, shared_mem=49152,
                     dynamic_shared_mem=1024)
            t.launch("big(float*)", 2_000)
            t.item()
    return cap


@pytest.mark.parametrize("variant", ["2026", "2024", "2022"])
def test_loader_reads_the_launch_configuration(variant, tmp_path):
    tr = load_trace(_capture(variant, sm_count=108, compute_capability=(8, 0)).write(tmp_path / "c.sqlite"),
                    cache=False)
    f = S.unpack_launch(tr.derived["launch_keys"])
    code = tr.store.get("kernels").read_all(["launch", "name_id"])
    by_name = {tr.strings.get(int(n)): int(c) for n, c in zip(code["name_id"], code["launch"])}
    one, tile, big = by_name["one_thread(float*)"], by_name["tile(float*)"], by_name["big(float*)"]
    assert (f["blocks"][one], f["threads"][one]) == (1, 1)
    assert (f["blocks"][tile], f["threads"][tile], f["regs"][tile], f["smem"][tile]) == (64, 256, 90, 50176)
    assert (f["blocks"][big], f["threads"][big], f["regs"][big], f["smem"][big]) == (1024, 256, 32, 0)
    assert (tr.derived["launch_est_occupancy"] == -1).all()
    dev = tr.devices.row(0)
    assert dev["sm_count"] == 108 and dev["compute_capability"] == 8.0
    # the per-SM limits: in the 2026/2024 layouts, absent (null) in the 2022 one
    limits = [dev[c] for c in S.GPU_LIMIT_COLUMNS]
    if variant == "2022":
        assert all(v is None or v != v for v in limits)
    else:
        assert limits == [64, 32, 65536, 167936, 166912]


def test_the_same_numbers_with_or_without_recorded_limits(tmp_path):
    """Without the per-SM limit columns (the 2022 layout) the compute capability supplies them."""
    got = []
    for variant in ("2026", "2022"):
        path = _capture(variant, sm_count=108, compute_capability=(8, 0)).write(tmp_path / f"{variant}.sqlite")
        uf = analyze(load_trace(path, cache=False)).to_dict()["metrics"]["underfilled"]
        got.append(uf)
    assert got[0] == got[1]
    rows = {r["name"]: r for r in got[0]["kernels"]}
    # 256 threads (8 warps), 90 registers, 49,152 + 1,024 B: shared memory 167,936 // (50,176 +
    # the 1 KB reserve = 51,200) = 3 blocks; registers 3,072 per warp -> 5 warps per sub-partition
    # -> 20 warps -> 2 blocks; warps 8 -> 2 blocks x 8 warps / 64 = 25%
    assert rows["tile(float*)"]["theoretical_occupancy_pct"] == pytest.approx(25.0)
    assert rows["tile(float*)"]["sm_fill_pct"] == pytest.approx(100 * 64 / 108, abs=1e-4)


def test_export_without_launch_columns_counts_kernels_as_filling(tmp_path):
    path = _capture(sm_count=28, compute_capability=(8, 6)).write(tmp_path / "c.sqlite")
    con = sqlite3.connect(path)
    for c in S.KERNEL_LAUNCH_COLUMNS:
        con.execute(f'ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN "{c}"')
    con.commit()
    con.close()
    tr = load_trace(path, cache=False)
    assert set(tr.derived["launch_keys"].tolist()) == {S.LAUNCH_UNKNOWN}
    d = analyze(tr).to_dict()
    v = d["metrics"]["values"]
    # an unknown grid counts as filling the GPU: nothing under-filled, nothing recoverable
    assert v["sm_count"] == 28 and v["underfilled_kernel_ms"] == 0 and v["underfilled_recoverable_ms"] == 0
    assert d["metrics"]["underfilled"]["kernels"] == []


def test_text_or_impossible_launch_values_are_unknown_not_a_crash(tmp_path):
    path = _capture(sm_count=28, compute_capability=(8, 6)).write(tmp_path / "c.sqlite")
    con = sqlite3.connect(path)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET gridX = 'many', registersPerThread = 300")
    con.commit()
    con.close()
    tr = load_trace(path, cache=False)
    f = S.unpack_launch(tr.derived["launch_keys"])
    assert (f["blocks"] == -1).all() and (f["regs"] == -1).all() and (f["threads"] > 0).all()
    # unknown grids count as filling the GPU: nothing under-filled
    assert analyze(tr).to_dict()["metrics"]["values"]["underfilled_recoverable_ms"] == 0


def test_kineto_args_and_device_properties(tmp_path):
    cap = _capture(sm_count=108, compute_capability=(8, 0))
    tr = load_trace(cap.write_kineto(tmp_path / "c.pt.trace.json"), cache=False)
    f = S.unpack_launch(tr.derived["launch_keys"])
    combos = set(zip(f["blocks"].tolist(), f["threads"].tolist(), f["regs"].tolist(), f["smem"].tolist()))
    assert combos == {(1, 1, 32, 0), (64, 256, 90, 50176), (1024, 256, 32, 0)}
    # Kineto's estimate, min(warps per SM / 64, theoretical occupancy): 1 block of 1 warp over 108
    # SMs = 0.009 warps per SM -> 0%; 1,024 blocks of 8 warps = 75.9 warps per SM (118.5%), and 256
    # threads x 32 registers on an A100 are 100% theoretical (warps allow 8 blocks, registers
    # 1,024 per warp -> 16 per sub-partition -> 64 warps -> 8 blocks) -> 100%
    est = dict(zip(f["blocks"].tolist(), tr.derived["launch_est_occupancy"].tolist()))
    assert est[1] == 0 and est[1024] == 100
    dev = tr.devices.row(0)
    assert [dev[c] for c in ("sm_count", "max_warps_per_sm", "regs_per_sm", "smem_per_sm", "smem_per_block_optin")] \
        == [108, 64, 65536, 167936, 166912]
    assert dev["max_blocks_per_sm"] is None or dev["max_blocks_per_sm"] != dev["max_blocks_per_sm"]


def test_kineto_damaged_launch_args(tmp_path):
    path = tmp_path / "bad.json"
    events = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 100 + i * 50, "dur": 20,
               "args": {"device": 0, "stream": 7, "correlation": 0, **a}}
              for i, a in enumerate([{"grid": "abc", "block": [1, 2], "registers per thread": -5},
                                     {"grid": [[1], 1, 1], "block": [32, 1, 1], "shared memory": 1.5,
                                      "est. achieved occupancy %": float("nan")},
                                     {"grid": [2, 2, 2], "block": [0, 1, 1], "registers per thread": 300}])]
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [{"id": 0, "numSms": 8}],
                                "traceEvents": events}).replace("NaN", "1e999"))
    tr = load_trace(path, cache=False)
    f = S.unpack_launch(tr.derived["launch_keys"])
    # a list inside a dimension makes the whole event's configuration unknown (as the first, whose
    # grid is text and block has two dimensions); the third keeps its valid grid only
    assert sorted(zip(f["blocks"].tolist(), f["threads"].tolist(), f["regs"].tolist(), f["smem"].tolist())) == \
        [(-1, -1, -1, -1), (8, -1, -1, -1)]
    assert tr.derived["launch_est_occupancy"].tolist() == [-1, -1]


@needs_shared("kineto/hta_a100_rank3of8.pt.trace.json.gz")
def test_real_kineto_trace_launch_fields():
    """Every kernel event's args, packed by hand, against the codes the loader kept per kernel."""
    path = TRACES / "kineto" / "hta_a100_rank3of8.pt.trace.json.gz"
    with gzip.open(path) as fh:
        events = [e for e in json.load(fh)["traceEvents"] if e.get("cat") == "kernel"]
    want = {}
    for e in events:
        a = e["args"]
        key = S.pack_launch(int(np.prod(a["grid"])), int(np.prod(a["block"])), a["registers per thread"],
                            a["shared memory"])
        want[key, a["est. achieved occupancy %"]] = want.get((key, a["est. achieved occupancy %"]), 0) + 1
    tr = load_trace(path, cache=False)
    codes = tr.store.get("kernels").read_all(["launch"])["launch"]
    keys, est = tr.derived["launch_keys"], tr.derived["launch_est_occupancy"]
    got = {}
    for c, n in zip(*np.unique(codes, return_counts=True)):
        got[int(keys[c]), int(est[c])] = int(n)
    assert got == want and len(events) == 8568


# ------------------------------------------------------------------------------------------
# the analysis: per GPU, per step, evidence, GPU metrics
# ------------------------------------------------------------------------------------------
def test_values_are_per_gpu_and_per_step(tmp_path):
    """Two processes on two 28-SM GPUs, 2 steps each; only device 0 runs a one-thread kernel of
    5 ms per step. Device 0 loses 2 x 5 x 27/28 = 9.643 ms; device 1 nothing -> 4.821 ms per GPU."""
    cap = Capture(sm_count=28, compute_capability=(8, 6))
    for dev in (0, 1):
        t = cap.process(pid=40 + dev, device=dev).thread()
        for i in range(2):
            with t.range(f"ProfilerStep#{i}"):
                if dev == 0:
                    t.launch("one_thread(float*)", 5_000, grid=1, block=1)
                t.launch("big(float*)", 1_000)
                t.item()
    d = analyze(load_trace(cap.write(tmp_path / "c.sqlite"), cache=False)).to_dict()
    v = d["metrics"]["values"]
    assert v["underfilled_recoverable_ms"] == pytest.approx(2 * 5 * 27 / 28 / 2, abs=1e-4)
    assert v["underfilled_kernel_ms"] == pytest.approx(5.0, abs=1e-4)          # 10 ms on one of 2 GPUs
    assert v["underfilled_kernel_count"] == 2
    # per step: the primary steps of both processes; device 0's lose 4.821 ms each, device 1's none
    assert v["underfilled_ms_per_step"] == pytest.approx((4.8214 * 2 + 0 * 2) / 4, abs=1e-3)
    (row,) = d["metrics"]["underfilled"]["kernels"]
    assert (row["name"], row["blocks"], row["threads_per_block"], row["count"]) == ("one_thread(float*)", 1, 1, 2)
    assert row["time_ms"] == pytest.approx(5.0, abs=1e-4) and row["recoverable_ms"] == pytest.approx(4.8214, abs=1e-4)
    assert row["sm_fill_pct"] == pytest.approx(100 / 28, abs=1e-4)
    assert v["top_underfilled_name"] == "one_thread(float*)" and v["underfilled_sm_fill_pct"] == pytest.approx(
        100 / 28, abs=1e-3)
    assert v["underfilled_sm_active_pct"] is None and v["underfilled_gpu_metrics_note"] is None


def test_gpu_metrics_disagree_when_sm_active_is_high(tmp_path):
    """The builder's SM Active follows each kernel's ``sm_active``: a one-block kernel that claims
    80% SM Active disagrees with the 1/108 its grid can use."""
    cap = Capture(sm_count=108, compute_capability=(8, 0), gpu_metrics_hz=1000)
    t = cap.process(pid=50).thread()
    for i in range(3):
        with t.range(f"ProfilerStep#{i}"):
            t.launch("small_reduce(float*)", 20_000, grid=1, block=256, sm_active=0.8)
            t.item()
    v = analyze(load_trace(cap.write(tmp_path / "c.sqlite"), cache=False)).to_dict()["metrics"]["values"]
    assert v["underfilled_sm_active_pct"] == pytest.approx(80, abs=1.5)
    assert v["underfilled_gpu_metrics_note"].startswith("GPU metrics disagree: SM Active averaged")


def test_sweep_against_its_definition_on_random_kernels():
    """Brute force, one nanosecond at a time: idle SMs = max(0, S - sum of min(blocks, S) of the
    running kernels) while an under-filled kernel runs; checked for mixes where few kernels are
    under-filled (the sweep then keeps only the kernels beside them) and where most are."""
    rng = np.random.default_rng(7)
    for trial in range(40):
        sm = int(rng.integers(4, 40))
        n = int(rng.integers(1, 30))
        s = rng.integers(0, 300, n)
        e = s + rng.integers(0, 60, n)
        few = rng.random(n) < (0.2 if trial % 2 else 0.8)
        blocks = np.where(few, rng.integers(1, sm, n), rng.integers(sm, 3 * sm, n))
        under = blocks < sm
        dev = rng.integers(0, 2, n)
        sw = O.FillSweep(dev, s, e, np.minimum(blocks, sm), under, np.array([sm, sm]))
        for d in (0, 1):
            idle = wall = 0
            share = np.zeros(n)
            for t in range(0, 400):
                run = (dev == d) & (s <= t) & (t < e)
                k = run & under
                if k.any():
                    x = max(0, sm - int(np.minimum(blocks[run], sm).sum()))
                    idle += x
                    wall += 1
                    share[k] += x / k.sum()
            assert sw.recoverable_ns([d], [0], [400])[0] == pytest.approx(idle / sm)
            assert sw.wall_ns([d], [0], [400])[0] == wall
            mine = np.flatnonzero((dev == d) & under)
            if len(mine):
                got = sw.share_ns(np.full(len(mine), d), s[mine], e[mine])
                assert got == pytest.approx(share[mine] / sm)
            # a part of the range: [100, 200)
            part = sum(max(0, sm - int(np.minimum(blocks[(dev == d) & (s <= t) & (t < e)], sm).sum()))
                       for t in range(100, 200) if ((dev == d) & under & (s <= t) & (t < e)).any())
            assert sw.recoverable_ns([d], [100], [200])[0] == pytest.approx(part / sm)


@pytest.mark.parametrize("rows", [1, 3, 7])
def test_slicing_does_not_change_the_numbers(rows, tmp_path, monkeypatch):
    """Kernels running across slice edges, on two streams and two GPUs, with steps and a window
    that leaves a warm-up out: the same metrics.underfilled, values and step costs in slices of a
    few rows as in one slice."""
    cap = Capture(sm_count=28, compute_capability=(8, 6), gpu_metrics_hz=2000)
    for dev in (0, 1):
        t = cap.process(pid=60 + dev, device=dev).thread()
        for i in range(4):
            with t.range(f"ProfilerStep#{i}"):
                t.launch("one_block(float*)", 3_000, grid=1, block=128, stream=7, sm_active=0.04)
                t.launch("half(float*)", 1_500, grid=14, block=256, stream=9, sm_active=0.5)
                t.launch("full(float*)", 800, grid=4096, stream=9)
                t.launch("tile(float*)", 400, grid=1024, block=32, dynamic_shared_mem=90_000, stream=7)
                t.item()
    path = cap.write(tmp_path / "c.sqlite")

    def numbers():
        d = analyze(load_trace(path, cache=False)).to_dict()
        keys = [k for k in d["metrics"]["values"] if "underfilled" in k or "occupancy" in k]
        return d["metrics"]["underfilled"], {k: d["metrics"]["values"][k] for k in keys}

    monkeypatch.delenv("NSYSDOC_SLICE_ROWS", raising=False)
    whole = numbers()
    monkeypatch.setenv("NSYSDOC_SLICE_ROWS", str(rows))
    assert numbers() == whole
    assert whole[0]["recoverable_ms"] > 0 and whole[0]["low_occupancy_ms"] > 0 and whole[0]["sm_active_pct"] is not None


@pytest.mark.slow  # issue 50: a capture in slices twice (3 s of CPU); .ci/run runs it
@pytest.mark.parametrize("rows", [1, 5])
def test_slicing_with_a_warm_up_left_out(rows, tmp_path, monkeypatch):
    """No step markers: the steady-state window leaves the warm-up out (slices at its edge run
    again for the new window); an under-filled kernel inside the warm-up does not count."""
    cap = Capture(sm_count=28, compute_capability=(8, 6))
    t = cap.process(pid=70).thread()
    t.launch("warm_one_block(float*)", 40_000, grid=1, block=64)   # in the warm-up
    t.api("cuModuleLoadData", us=50_000)
    t.launch("gemm(float*)", 500, api_us=300_000)                 # the first launch JITs
    for i in range(800):
        t.launch("one_block(float*)" if i % 4 == 0 else "gemm(float*)", 500, grid=1 if i % 4 == 0 else 4096)
    t.sync_device()
    path = cap.write(tmp_path / "c.sqlite")

    def numbers():
        d = analyze(load_trace(path, cache=False)).to_dict()
        return d["capture"]["window"], d["metrics"]["underfilled"]

    monkeypatch.delenv("NSYSDOC_SLICE_ROWS", raising=False)
    window, uf = numbers()
    assert window["kind"] == "steady-state"
    # 200 one-block kernels of 0.5 ms, back to back with the others: 100 ms, 100 x 27/28 idle
    assert [r["name"] for r in uf["kernels"]] == ["one_block(float*)"]
    assert uf["kernel_ms"] == pytest.approx(100.0, abs=1e-4)
    assert uf["recoverable_ms"] == pytest.approx(100 * 27 / 28, abs=1e-4)
    monkeypatch.setenv("NSYSDOC_SLICE_ROWS", str(rows))
    assert numbers() == (window, uf)


def test_kineto_grid_without_block(tmp_path):
    """A kernel event with a grid but no block keeps its grid."""
    path = tmp_path / "nob.json"
    ev = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 100, "dur": 20,
          "args": {"device": 0, "stream": 7, "grid": [3, 2, 1], "registers per thread": 40}}
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [{"id": 0, "numSms": 8}], "traceEvents": [ev]}))
    f = S.unpack_launch(load_trace(path, cache=False).derived["launch_keys"])
    got = (f["blocks"].tolist(), f["threads"].tolist(), f["regs"].tolist(), f["smem"].tolist())
    assert got == ([6], [-1], [40], [-1])
