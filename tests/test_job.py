"""``nsysdoc job``: rank ids, clock offsets, straggler and roll-up on hand-computed DDP fixtures,
scale-out (process pool and a real Dask cluster give the same JSON), bad inputs, the page.

Fixtures come from ``ddp_job`` (nsysdoc/testing/scenarios.py). Per step, every rank waits 2 ms for
input (rank 5: 12 ms), then the same GPU work, then an all-reduce that ends 3 ms after the last
rank joins. So rank 5 joins every all-reduce 12 − 2 = 10 ms after the others, each other rank
waits 10 ms per step, and rank 5's input wait exceeds the others' median by 10 ms per step. Ranks
4–7 sit on a second node whose wall clock is 37.5 ms ahead: clock offsets 0 and +37.5 ms.
"""
from __future__ import annotations

import copy
import json
import os

import numpy as np
import pytest

from nsysdoc.errors import InputError
from nsysdoc.jobs import analyze_job, assign_ranks, rank_from_name, run_job
from nsysdoc.jobs.align import clock_offsets, match_collectives
from nsysdoc.testing.scenarios import ddp_job, three_node_job_two_allreduces, unrelated_captures

from .conftest import SHARED_TRACES, run_cli
from .conftest import needs_shared  # issue 49


def _write(caps, folder, name="rank{r}.sqlite"):
    folder.mkdir(parents=True, exist_ok=True)
    return [c.write(folder / name.format(r=r)) for r, c in enumerate(caps)]


@pytest.fixture(scope="module")
def slow_job(tmp_path_factory):
    return _write(ddp_job(), tmp_path_factory.mktemp("slow"))


@pytest.fixture(scope="module")
def slow_result(slow_job):
    return run_job([str(p) for p in slow_job], {"no_cache": True}, jobs=1)


@pytest.fixture(scope="module")
def balanced_job(tmp_path_factory):
    return _write(ddp_job(slow_rank=None, jitter_us=200, seed=3), tmp_path_factory.mktemp("balanced"))


# ---------------------------------------------------------------------------------------------
# rank ids
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, rank", [
    ("rank5.sqlite", 5), ("rank_5.nsys-rep", 5), ("Rank-05.sqlite", 5), ("trace.rank.12.sqlite", 12),
    ("job-r5.sqlite", 5), ("job_r5_node2.sqlite", 5), ("report_7.sqlite", 7), ("prof.3.nsys-rep", 3),
    ("profile.sqlite", None), ("myrank5x.sqlite", None), ("train.sqlite", None),
])
def test_rank_from_file_name(name, rank):
    assert rank_from_name(name) == rank


def test_rank_pattern_order_and_collisions():
    assert assign_ranks(["a/node1-gpu3.sqlite", "a/node1-gpu0.sqlite"], r"gpu(\d+)") == ([3, 0], "pattern")
    assert assign_ranks(["x.sqlite", "rank1.sqlite"]) == ([0, 1], "order")  # one name without a rank: order
    assert assign_ranks(["rank1.sqlite", "rank0.sqlite"]) == ([1, 0], "file name")
    with pytest.raises(InputError, match="two inputs claim rank 1"):
        assign_ranks(["a/rank1.sqlite", "b/rank_1.sqlite"])
    with pytest.raises(InputError, match="finds no rank number"):
        assign_ranks(["rank1.sqlite", "other.sqlite"], r"gpu(\d+)")
    with pytest.raises(InputError, match="not a valid regular expression"):
        assign_ranks(["rank1.sqlite"], "(")


# ---------------------------------------------------------------------------------------------
# the slow-rank job: offsets, straggler, cause, roll-up, verdict
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow  # issue 50: the slow-node job (1.1 s of CPU); .ci/run runs it
def test_clock_offsets_are_the_second_nodes_skew(slow_result):
    d = slow_result
    assert d["clock"]["method"] == "collective ends" and d["clock"]["session_start_used"]
    offs = {r["rank"]: r["clock_offset_ms"] for r in d["ranks"]}
    assert offs == {0: 0, 1: 0, 2: 0, 3: 0, 4: 37.5, 5: 37.5, 6: 37.5, 7: 37.5}


def test_straggler_wait_and_cause_are_hand_computed(slow_result):
    s = slow_result["straggler"]
    assert s["rank"] == 5 and s["late_pct"] == 100 and s["matched_collectives"] == 8
    assert s["wait_ms_per_step"] == pytest.approx(10.0, abs=1e-6)
    assert s["cause"] == "idle_input"
    assert s["cause_excess_ms_per_step"] == pytest.approx(10.0, abs=1e-6)
    ranks = {r["rank"]: r for r in slow_result["ranks"]}
    for r in range(8):
        assert ranks[r]["wait_ms_per_step"] == pytest.approx(0.0 if r == 5 else 10.0, abs=1e-6)
        assert ranks[r]["last_count"] == (8 if r == 5 else 0)
    heat = slow_result["heatmap"]
    assert heat["wait_ms"][5] == [0.0] * 8 and heat["wait_ms"][0] == [pytest.approx(10.0)] * 8
    assert slow_result["verdict"]["status"] == "straggler"
    assert slow_result["verdict"]["sentence"].startswith("Limited by a straggler: rank 5 joins last in 100%")
    assert "waiting for input data: 10.00 ms per step" in slow_result["verdict"]["sentence"]


def test_findings_roll_up_once_with_their_ranks(slow_result):
    f = {x["rule"]: x for x in slow_result["findings"]}
    assert f["nccl-exposed"]["ranks"] == list(range(8))
    # exposed NCCL: 13 ms on the 7 waiting ranks (10 ms wait + 3 ms all-reduce), 3 ms on rank 5
    assert f["nccl-exposed"]["impact_ms_per_step_median"] == pytest.approx(13.0, abs=1e-3)
    assert f["data-starvation"]["rank_count"] == 8 and f["data-starvation"]["severity"] == "critical"
    assert "mostly this wait" in slow_result["verdict"]["detail"]


def test_balanced_job_has_no_straggler(balanced_job):
    d = run_job([str(p) for p in balanced_job], {"no_cache": True}, jobs=1)
    assert d["straggler"] is None
    c = d["straggler_candidate"]
    assert c["wait_pct"] < 3  # joins differ by the 0-200 µs input jitter only
    assert d["verdict"]["status"] == "communication"  # the 3 ms all-reduce is exposed on every rank
    assert {r["rank"]: r["clock_offset_ms"] for r in d["ranks"]}[6] == 37.5


def test_one_capture_with_two_processes(tmp_path):
    path = ddp_job(ranks=2, slow_rank=1, one_capture=True)[0].write(tmp_path / "ddp.sqlite")
    d = run_job([str(path)], {"no_cache": True})
    assert d["rank_source"] == "processes" and d["clock"]["method"] == "same capture"
    assert [(r["rank"], r["pids"], r["devices"], r["clock_offset_ms"]) for r in d["ranks"]] == \
        [(0, [6000], ["0"], 0), (1, [6001], ["1"], 0)]
    s = d["straggler"]
    assert s["rank"] == 1 and s["wait_ms_per_step"] == pytest.approx(10.0, abs=1e-6)
    assert s["cause"] == "idle_input" and s["cause_excess_ms_per_step"] == pytest.approx(10.0, abs=1e-6)
    assert all(f["scope"] == "capture" for f in d["findings"])


# ---------------------------------------------------------------------------------------------
# alignment on hand examples
# ---------------------------------------------------------------------------------------------
def _rank(utc, ends, starts=None, name="ncclAllReduce"):
    starts = starts if starts is not None else [e - 1000 for e in ends]
    return {"ok": True, "rank": 0, "file": "r.sqlite", "session_start_utc_ns": utc, "steps": [],
            "collectives": {name: {"start_ns": list(starts), "end_ns": list(ends)}}}


def test_offset_survives_a_capture_that_starts_one_collective_later():
    # irregular collective times (not periodic): rank 1's capture misses the first one, its clock is
    # +2 ms ahead and its session started 5 ms later: its timestamps are (true - 5 ms)
    true_ends = [10_000_000, 23_000_000, 31_000_000, 52_000_000, 60_500_000, 77_000_000]
    ref = _rank(1_000_000_000_000, true_ends)
    other = _rank(1_000_000_000_000 + 5_000_000 + 2_000_000, [e - 5_000_000 for e in true_ends[1:]])
    clock = clock_offsets([ref, other], one_clock=False)
    assert clock["offsets_ns"] == [0, 2_000_000] and clock["shift"][1] == -1
    m = match_collectives([ref, other], clock)
    assert len(m["join_ns"]) == 5  # the first collective is not on rank 1


def test_no_shared_collective_means_no_straggler():
    a = _rank(10, [1_000_000, 2_000_000, 3_000_000], name="ncclAllReduce")
    b = _rank(10, [1_000_000, 2_000_000, 3_000_000], name="ncclAllGather")
    a["rank"], b["rank"] = 0, 1
    d = analyze_job([a, b], "order", one_clock=False)
    assert d["straggler"] is None and d["clock"]["method"] == "session start"
    assert any("no collective kernel that every rank runs" in w for w in d["warnings"])


def test_two_or_three_instances_pair_by_the_smallest_offset():
    """Three periodic all-reduces, rank 1's clock +1 ms with ±100 µs of end noise: s = 0 gives
    differences 0.9, 1.1, 1.0 ms (median 1.0); with only 3 instances the MAD cannot choose the
    pairing, the smallest offset does. Without the first instance, pairs (1.1, 1.0): 1.05 ms."""
    from nsysdoc.jobs.align import _offset

    ref = [0, 100_000_000, 200_000_000]
    other = [1_000_000 - 100_000, 101_000_000 + 100_000, 201_000_000]
    assert _offset(np.array(ref), np.array(other))[::2] == (1_000_000, 0)
    assert _offset(np.array(ref), np.array(other[1:]))[::2] == (1_050_000, -1)


def _job_of(joins_ms, ends_ms=None):
    """Summaries of ranks (one clock) whose all-reduces start at ``joins_ms[r][k]`` and end together."""
    out = []
    for r, joins in enumerate(joins_ms):
        ends = ends_ms or [max(j[k] for j in joins_ms) + 3 for k in range(len(joins))]
        s = _rank(10, [int(e * 1e6) for e in ends], [int(j * 1e6) for j in joins])
        s["rank"], s["window_ms"] = r, 1000.0
        out.append(s)
    return out


def test_a_straggler_in_two_collectives_must_be_last_in_both():
    # 2 all-reduces 100 ms apart; rank 2 joins 10 ms late in both: the others wait 10 ms per
    # collective, 10% of the 100 ms interval -> named (critical from 15%: a warning)
    d = analyze_job(_job_of([[100, 200], [100, 200], [110, 210]]), "order", one_clock=False)
    s = d["straggler"]
    assert s["rank"] == 2 and s["basis"] == "collective interval" and s["severity"] == "warning"
    assert s["wait_ms_per_collective"] == pytest.approx(10.0) and s["wait_pct_of_step"] == pytest.approx(10.0)
    # last in one of two: not named; one collective alone: not named
    assert analyze_job(_job_of([[100, 210], [100, 200], [110, 200]]), "order", one_clock=False)["straggler"] is None
    d = analyze_job(_job_of([[100], [100], [110]]), "order", one_clock=False)
    assert d["straggler"] is None and d["straggler_candidate"]["rank"] == 2


# ---------------------------------------------------------------------------------------------
# a 9-rank, 3-node job with only 2 all-reduces, no step markers (issue 29)
# ---------------------------------------------------------------------------------------------
#: clock offset of each rank to rank 0 by construction: node error + rank error − rank 0's (0),
#: plus the rank's all-reduce end skew (r * 7 % 10 µs) — ms
NINE_TRUTH = {r: [0.0, 0.6, 1.1][r // 3] + [0, 20, -30, 10, -40, 35, -15, 25, 40][r] / 1000 for r in range(9)}


@pytest.mark.parametrize("absolute", [True, False], ids=["ts-normalize", "session"])
def test_nine_rank_job_offsets_and_straggler(absolute, tmp_path):
    """Absolute timestamps used to count the session start twice (offsets of tens of ms and no
    straggler); aligned on one clock, offsets are the clock errors, and rank 4, last into both
    all-reduces by 10 ms, is the straggler."""
    files = _write(three_node_job_two_allreduces(absolute_timestamps=absolute), tmp_path)
    d = run_job([str(p) for p in files], {"no_cache": True}, jobs=1)
    assert d["clock"]["timestamps"] == ("absolute" if absolute else "session")
    assert d["clock"]["method"] == "collective ends" and d["collectives"]["matched"] == 2
    got = {r["rank"]: r["clock_offset_ms"] for r in d["ranks"]}
    for r in range(9):
        assert got[r] == pytest.approx(NINE_TRUTH[r], abs=0.3), r
        assert got[r] == pytest.approx(NINE_TRUTH[r] + ((r * 7 % 10) / 1000), abs=0.002), r  # end skew too
    s = d["straggler"]
    assert s["rank"] == 4 and s["last_count"] == 2 and s["basis"] == "collective interval"
    assert s["wait_ms_per_collective"] == pytest.approx(10.0, abs=0.05)
    assert d["verdict"]["status"] == "straggler"
    assert not any("process ids" in w for w in d["warnings"])


# ---------------------------------------------------------------------------------------------
# can the inputs be one job?
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow  # issue 50: a job of several captures (3.1 s of CPU); .ci/run runs it
def test_unrelated_captures_on_different_gpus_are_refused(tmp_path):
    files = _write(unrelated_captures(), tmp_path)
    with pytest.raises(InputError, match="not one job: different GPU models .*no collective kernel"):
        run_job([str(p) for p in files], {"no_cache": True}, jobs=1)
    p = run_cli("job", *files, "-f", "json", "--no-config", "--no-cache")
    assert p.returncode == 2 and "not one job" in p.stderr and "Traceback" not in p.stderr
    assert [ln for ln in p.stderr.splitlines() if "[" not in ln][0].startswith("nsysdoc: error: these captures")


def test_captures_hours_apart_are_refused(tmp_path):
    same = ("NVIDIA H100 80GB HBM3",) * 2
    files = _write(unrelated_captures(hours_apart=3, gpus=same), tmp_path)
    with pytest.raises(InputError, match=r"rank 1's session \(rank1.sqlite\) started 3.0 hours after rank 0's"):
        run_job([str(p) for p in files], {"no_cache": True}, jobs=1)


def test_independent_processes_on_one_gpu_model_only_warn(tmp_path):
    """Same GPU model, sessions a minute apart, no NCCL: maybe independent processes of one job
    (gloo, or no communication): compared, with the warning that nothing aligns them."""
    same = ("NVIDIA H100 80GB HBM3",) * 2
    files = _write(unrelated_captures(hours_apart=1 / 60, gpus=same), tmp_path)
    d = run_job([str(p) for p in files], {"no_cache": True}, jobs=1)
    assert d["straggler"] is None and d["rank_count"] == 2
    assert any("no collective kernel that every rank runs" in w for w in d["warnings"])


@needs_shared()
def test_the_shared_traces_folder_is_not_one_job():
    """11 unrelated captures from different machines and nsys versions (years apart)."""
    p = run_cli("job", SHARED_TRACES, "-f", "json", "-q", "--no-config", timeout=900)
    assert p.returncode == 2 and "these captures are not one job" in p.stderr and "Traceback" not in p.stderr


# ---------------------------------------------------------------------------------------------
# rank ids that look like process ids; the page and progress
# ---------------------------------------------------------------------------------------------
def test_rank_ids_that_look_like_process_ids_are_warned(tmp_path):
    """``nsys profile -o report_%p``: report_7000.sqlite .. report_7001.sqlite hold pids 7000/7001
    (ddp_job's pids are 7000 + rank): the ids equal the captures' pids. Another name, rank ids 0-1,
    gives no warning."""
    caps = ddp_job(ranks=2, steps=2, slow_rank=None, ranks_per_node=2)
    files = _write(caps, tmp_path / "pid", name="report_{r}.sqlite")
    files = [f.rename(f.with_name(f"report_{7000 + r}.sqlite")) for r, f in enumerate(files)]
    d = run_job([str(p) for p in files], {"no_cache": True}, jobs=1)
    assert [r["rank"] for r in d["ranks"]] == [7000, 7001]
    assert any(w.startswith("rank ids 7000, 7001 were taken from file names and look like process ids; "
                            "pass --rank-pattern") for w in d["warnings"])
    from nsysdoc.jobs.ranks import pid_like_ranks

    assert pid_like_ranks([12345, 12399], [[1], [2]]) == [12345, 12399]  # big against 2 inputs
    assert pid_like_ranks([0, 1, 5], [[4242], [4243], [5]]) == [5]  # its own capture's pid
    assert pid_like_ranks([3, 900], [[1], [2]]) == []


@pytest.mark.slow  # issue 50: a job command in a process (1.6 s of CPU); .ci/run runs it
def test_page_wording_and_one_progress_line_per_rank(tmp_path):
    """Per-node captures of two processes each: the findings note does not speak of 'the one
    capture', the device column is named for what it holds, and progress names each rank's pid."""
    files = [ddp_job(ranks=2, steps=2, slow_rank=1, one_capture=True)[0].write(tmp_path / f"node{n}.sqlite")
             for n in range(2)]
    p = run_cli("job", *files, "-o", tmp_path / "job.html", "--no-config", "--no-cache", "--jobs", "1")
    assert p.returncode in (0, 1), p.stderr
    html = (tmp_path / "job.html").read_text()
    assert "the one capture" not in html and ">GPUs<" not in html and "Device ids" in html
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("nsysdoc: [")]
    assert lines == ["nsysdoc: [1/2] node0.sqlite (pid 6000): ok", "nsysdoc: [1/2] node0.sqlite (pid 6001): ok",
                     "nsysdoc: [2/2] node1.sqlite (pid 6000): ok", "nsysdoc: [2/2] node1.sqlite (pid 6001): ok"]


# ---------------------------------------------------------------------------------------------
# scale-out: same JSON in one process, on a pool, on Dask
# ---------------------------------------------------------------------------------------------
def _stable(d):
    d = copy.deepcopy(d)
    d.pop("nsysdoc_version", None)
    return d


@pytest.mark.slow  # issue 50: a process pool over the ranks (3.2 s of CPU); .ci/run runs it
def test_process_pool_gives_the_same_json(slow_job, slow_result):
    d = run_job([str(p) for p in slow_job], {"no_cache": True}, jobs=2)
    assert _stable(d) == _stable(slow_result)


@pytest.mark.slow  # issue 50: starts a Dask cluster (7 s of CPU, more wall); .ci/run runs it
def test_dask_cluster_gives_the_same_json(slow_job, slow_result):
    """A real scheduler and two worker processes on localhost."""
    distributed = pytest.importorskip("distributed") if os.environ.get("NSYSDOC_REQUIRE_DASK") != "1" \
        else __import__("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as cluster:
        seen = []
        d = run_job([str(p) for p in slow_job], {"no_cache": True}, dask=cluster.scheduler_address,
                    progress=lambda done, total, recs: seen.append((done, total)))
        assert len(seen) == 8 and seen[-1] == (8, 8)
        assert _stable(d) == _stable(slow_result)
        p = run_cli("job", *slow_job, "--dask", cluster.scheduler_address, "-f", "json", "-q", "--no-config",
                    "--no-cache")
        assert p.returncode == 0, p.stderr
        assert _stable(json.loads(p.stdout)) == _stable(slow_result)


@pytest.mark.slow  # issue 50: waits for a Dask connection to fail; .ci/run runs it
def test_dask_without_a_scheduler_is_one_line(slow_job):
    pytest.importorskip("distributed")
    p = run_cli("job", *slow_job[:2], "--dask", "tcp://127.0.0.1:9", "-f", "json", "--no-config", timeout=120)
    assert p.returncode == 2 and "cannot connect to the Dask scheduler" in p.stderr and "Traceback" not in p.stderr


# ---------------------------------------------------------------------------------------------
# CLI, bad inputs, page
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow  # issue 50: a process pool over the ranks (4.7 s of CPU); .ci/run runs it
def test_a_corrupt_rank_is_reported_and_the_job_goes_on(slow_job, tmp_path):
    bad = tmp_path / "rank8.sqlite"
    bad.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    empty = tmp_path / "rank9.sqlite"
    empty.write_bytes(b"")
    p = run_cli("job", *slow_job, bad, empty, "-f", "json", "-q", "--no-config", "--no-cache")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["rank_count"] == 8 and d["failed_count"] == 2
    failed = {r["rank"]: r["error"] for r in d["ranks"] if not r["ok"]}
    assert set(failed) == {8, 9} and all(failed.values())
    assert d["straggler"]["rank"] == 5
    p = run_cli("job", bad, empty, "-f", "json", "--no-config")
    assert p.returncode == 2 and "no rank could be read" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.slow  # issue 50: a job command in a process (3.5 s of CPU); .ci/run runs it
def test_two_files_claiming_one_rank_exit_2(slow_job, tmp_path):
    other = tmp_path / "x"
    other.mkdir()
    twin = other / "rank_3.sqlite"
    twin.write_bytes(slow_job[3].read_bytes())
    p = run_cli("job", *slow_job, twin, "--no-config")
    assert p.returncode == 2 and "two inputs claim rank 3" in p.stderr


@pytest.mark.slow  # issue 50: a job of rank processes (8 s of CPU); .ci/run runs it
def test_cli_page_with_rank_reports_and_fail_on(slow_job, tmp_path):
    p = run_cli("job", *slow_job, "-o", tmp_path / "job.html", "--rank-reports", tmp_path / "ranks",
                "--fail-on", "critical", "--no-config", "--no-cache")
    assert p.returncode == 1, p.stderr  # critical findings rolled up
    html = (tmp_path / "job.html").read_text()
    assert 'id="verdict-sentence">Limited by a straggler: rank 5' in html
    assert 'href="ranks/rank5.nsysdoc.html"' in html and (tmp_path / "ranks" / "rank5.nsysdoc.html").is_file()
    assert "<script src" not in html and 'http-equiv="Content-Security-Policy"' in html
    assert "[8/8]" in p.stderr
    md = run_cli("job", *slow_job, "-f", "md", "-q", "--no-config")
    assert md.returncode == 0 and md.stdout.startswith("### nsysdoc job: 8 ranks")
    assert "| 5 | 27.98 ms |" in md.stdout


# ---------------------------------------------------------------------------------------------
# real capture: two ranks of one torchrun job in one export
# ---------------------------------------------------------------------------------------------
REAL = SHARED_TRACES / "fastvideo_torchrun_h100x2_before.sqlite"


@needs_shared(REAL.name)
def test_real_two_rank_capture():
    """SQL (docs/job.md): of 33 ncclDevKernel_SendRecv pairs, pid 145 (rank 1) starts later in 22;
    pid 144 waits 10.9 ms in total in the 300 ms window = 36.3 ms/s (3.6%): a mild straggler,
    whose GPU idles on launches more (9.3% vs 6.8% of the window)."""
    d = run_job([str(REAL)], {"no_cache": True})
    assert [r["pids"] for r in d["ranks"]] == [[144], [145]]
    s = d["straggler"]
    assert s["rank"] == 1 and s["last_count"] == 22 and s["matched_collectives"] == 33
    assert s["wait_ms_per_s"] == pytest.approx(36.34, abs=0.05)
    assert s["severity"] == "warning" and s["cause"] == "idle_launch"
    assert d["verdict"]["sentence"].startswith("A straggler: rank 1")


AFTER = SHARED_TRACES / "fastvideo_torchrun_h100x2_after.sqlite"


@needs_shared(AFTER.name)
def test_real_two_rank_capture_after_the_fix_has_no_straggler():
    """SQL: rank 1 is last in 16 of 31 SendRecv pairs but rank 0 waits only 4.3 ms in 0.3 s: no
    straggler; both ranks share the launch-bound finding. The capture has no step markers; its
    steps are inferred (14 per process, a 157-operation unit: tests/test_step_inference.py), so the
    wait is per step: 4.27 ms / 14 = 0.305 ms of a 19.47 ms median job step (the longer process
    per step index; a step begins where the GPU reaches it, issue 44: it was 20.16 ms when steps
    began at their launch) = 1.57% (it was 1.43% of the window before steps were inferred)."""
    d = run_job([str(AFTER)], {"no_cache": True})
    assert d["straggler"] is None
    assert [r["step_source"] for r in d["ranks"]] == ["inferred", "inferred"]
    assert any("were inferred from their repeating GPU work" in w for w in d["warnings"])
    c = d["straggler_candidate"]
    assert c["basis"] == "step" and c["wait_ms_per_step"] * 14 == pytest.approx(4.27, abs=0.01)
    assert c["rank"] == 1 and c["wait_pct"] == pytest.approx(0.3048 / d["step_time_ms_median"] * 100, abs=0.01)
    assert d["step_time_ms_median"] == pytest.approx(19.47, abs=0.05) and c["wait_pct"] == pytest.approx(1.57, abs=0.02)
    assert d["verdict"]["status"] == "shared" and d["verdict"]["rule"] == "launch-bound"


def test_dask_missing_gives_an_install_hint(monkeypatch):
    import sys

    from nsysdoc.jobs.run import run_dask

    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    with pytest.raises(InputError) as e:
        run_dask(["rank0.sqlite"], {}, "tcp://127.0.0.1:8786")
    assert "not installed" in e.value.message and "nsysdoc[dask]" in e.value.hint


def test_per_node_captures_of_several_processes_number_ranks_in_order(tmp_path):
    """Two captures of two GPU processes each (one per node): four ranks, file order then pid order."""
    files = [ddp_job(ranks=2, slow_rank=1, one_capture=True)[0].write(tmp_path / f"node{n}.sqlite") for n in range(2)]
    d = run_job([str(f) for f in files], {"no_cache": True}, jobs=1)
    assert d["rank_source"] == "processes"
    assert [(r["rank"], r["file"].endswith(f"node{r['rank'] // 2}.sqlite"), r["pids"]) for r in d["ranks"]] == \
        [(0, True, [6000]), (1, True, [6001]), (2, True, [6000]), (3, True, [6001])]


def _markerless_rank(rank: int, first_step: int, steps: int, slow_step: int | None):
    """One rank of a markerless job: per iteration a 2 ms input wait, an H2D copy, 4 GEMMs of
    1 ms, an all-reduce of 0.5 ms, Adam, item(). Iteration i starts at true time 1 s + i x P on
    every rank; the capture of ``rank`` starts at iteration ``first_step``. Iteration ``slow_step``
    waits 6 ms more for its input on this rank."""
    from nsysdoc.testing import Capture
    from nsysdoc.testing.scenarios import ADAM, GEMM

    cap = Capture()
    t = cap.process(pid=300 + rank, device=0).thread()
    period_ns = 20_000_000
    for i in range(first_step, first_step + steps):
        t.at(1_000_000_000 + i * period_ns)
        t.os_call("poll", us=2000 + (6000 if i == slow_step else 0))
        t.memcpy("HtoD", 1 << 20, pageable=False)
        for _ in range(4):
            t.cpu(us=10)
            t.launch(GEMM, 1000)
        t.nccl("AllReduce", 500)
        t.launch(ADAM, 100)
        t.item()
    return cap


@pytest.mark.slow  # issue 50: a job of several captures (2.7 s of CPU); .ci/run runs it
def test_inferred_steps_of_ranks_are_matched_by_time_not_order(tmp_path):
    """Rank 1's capture starts one iteration later than rank 0's, so its inferred step k is rank
    0's step k + 1. Iteration 3 waits 6 ms more for input on rank 1; an inferred step starts at
    the H2D copy that follows the wait (the anchor), so that wait closes the step of iteration 2:
    matched by time, rank 1's slow step is job step 2; matched by order it would be step 1."""
    caps = [_markerless_rank(0, 0, 8, None), _markerless_rank(1, 1, 7, 3)]
    paths = _write(caps, tmp_path)
    d = run_job([str(p) for p in paths], {"no_cache": True})
    assert [r["step_source"] for r in d["ranks"]] == ["inferred", "inferred"]
    assert any("matched with the reference rank's steps by their start" in w for w in d["warnings"])
    heat = d["heatmap"]
    assert heat["steps"] == list(range(8))
    row0, row1 = heat["step_time_ms"]
    assert row1[0] is None  # rank 1 did not capture iteration 0
    slow = max(range(1, 8), key=lambda k: row1[k] or 0)
    assert slow == 2
    assert row1[2] == pytest.approx(26.0, abs=0.1)   # 20 ms period + 6 ms more wait
    assert row0[2] == pytest.approx(20.0, abs=0.1)
