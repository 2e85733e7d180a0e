"""What-if per finding (issue 48, milestone 2; ``docs/glossary.md``, "What-if").

Two kinds of checks:

* **Predictions checked against the fix.** Each pair of ``nsysdoc/testing/what_if_scenarios.py`` is
  the capture with a cause and the same capture (same parameters) with the cause removed; the
  what-if of the cause's rule computed on the first must predict the second's median step within
  10 %, and must save a real share of the step (so that "no change" would fail).
* **Hand-computed replays** on the builder's timing model (header of
  ``tests/test_critical_path.py``): ``launch(us, api_us)`` at ``a``: call ``[a, a+api_us)``, kernel
  at ``max(a + 0.6*api_us + 2 us, stream free)``; ``sync_stream`` ends 2 us after the stream's work.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from nsysdoc.assembly.critical_path import what_if_all  # noqa: E402
from nsysdoc.metrics import critical_path as cp  # noqa: E402
from nsysdoc.metrics import what_if as wi  # noqa: E402
from nsysdoc.rules.verdict import rank_findings, what_if_text  # noqa: E402
from nsysdoc.testing.critical_path_scenarios import CP_SCENARIOS  # noqa: E402
from nsysdoc.testing.what_if_scenarios import WHAT_IF_PAIRS  # noqa: E402
from tests.conftest import diagnose_path  # noqa: E402

A = 6e-5  # JSON rounds to 4 decimals


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    d = tmp_path_factory.mktemp("what-if")
    out = {}
    for name, (f, rule) in WHAT_IF_PAIRS.items():
        out[name] = (diagnose_path(f().write(d / f"{name}.sqlite")),
                     diagnose_path(f(fixed=True).write(d / f"{name}_fixed.sqlite")), rule)
    return out


def median_ms(r: dict) -> float:
    return r["metrics"]["critical_path"]["median_step"]["length_ms"]


@pytest.mark.parametrize("name", sorted(WHAT_IF_PAIRS))
def test_what_if_predicts_the_capture_with_the_cause_removed(pairs, name):
    """The what-if of the pair's rule on the capture with the cause predicts the fixed capture's
    median step within 10 %, and saves at least 20 % of the step (the cause is real)."""
    before, after, rule = pairs[name]
    w = before["metrics"]["critical_path"]["what_if"][rule]
    assert w["step_ms_before"] == pytest.approx(median_ms(before), abs=A)
    assert w["step_ms_after"] == pytest.approx(median_ms(after), rel=0.10)
    assert w["saved_ms_per_step"] >= 0.2 * w["step_ms_before"]


def test_launch_floor_replayed_by_hand(pairs):
    """python_between_tiny_kernels: 50 x (40 us Python, 5 us launch, 4 us kernel): launch k's call
    at S+45k+40, kernel at S+45k+45 (us); step = last kernel end S+2254 + 2 us sync = 2.256 ms.
    Launch floor: no host time, 2 us calls: call k at S+2k (the first call's 40 us gap after the last
    step's sync is cut too); kernel k at max(call start + (5 - 3) us, previous kernel end) =
    S+2+4k (the first at S+2; then the stream binds: 4 us each); the 50th ends S+2+200 = S+202, the
    sync returns 2 us later: 0.204 ms (saved 2.052)."""
    before, _, _ = pairs["python_between_tiny_kernels"]
    w = before["metrics"]["critical_path"]["what_if"]["launch-bound"]
    assert (w["step_ms_before"], w["step_ms_after"], w["saved_ms_per_step"]) == pytest.approx((2.256, 0.204, 2.052), abs=A)
    f = next(x for x in before["findings"] if x["rule"] == "launch-bound")
    assert f["what_if"] == w


def test_exposed_all_reduce_replayed_by_hand(pairs):
    """all_reduce_after_the_whole_backward: GEMM A [S+5, S+505), GEMM B [S+505, S+1005) (us), the
    all-reduce waits on B: [S+1005, S+1405), Adam waits on it: [S+1405, S+1605), the sync returns at
    S+1607: 1.607 ms. Communication hidden (its kernel lasts 0): Adam starts after B (its stream
    predecessor) at S+1005, ends S+1205, sync S+1207: 1.207 ms. The fixed capture (the all-reduce
    waits on A, runs [S+505, S+905) under B) has the same 1.207 ms."""
    before, after, _ = pairs["all_reduce_after_the_whole_backward"]
    w = before["metrics"]["critical_path"]["what_if"]["nccl-exposed"]
    assert (w["step_ms_before"], w["step_ms_after"]) == pytest.approx((1.607, 1.207), abs=A)
    assert median_ms(after) == pytest.approx(1.207, abs=A)


def test_data_wait_removed_saves_the_wait(pairs):
    """waiting_for_the_next_batch: the step starts with 30 ms in poll + futex before the first CUDA
    call; removing it moves every node 30 ms earlier: saved 30 ms exactly."""
    before, _, _ = pairs["waiting_for_the_next_batch"]
    w = before["metrics"]["critical_path"]["what_if"]["data-starvation"]
    assert w["saved_ms_per_step"] == pytest.approx(30.0, abs=A)


def test_two_fixes_of_the_same_kernel_are_not_a_sum(tmp_path):
    """one_kernel_dominates_the_step: the 6 ms convolution is both the dominant kernel and an FP32
    GEMM/conv; each fix makes it 2x faster (saves 3 ms of the 7.227 ms step); both together are one
    change (the kernel 2x faster once): 3 ms, not 6."""
    before = diagnose_path(WHAT_IF_PAIRS["one_kernel_dominates_the_step"][0]().write(tmp_path / "c.sqlite"))
    wis = before["metrics"]["critical_path"]["what_if"]
    assert wis["dominant-kernel"]["saved_ms_per_step"] == pytest.approx(3.0, abs=A)
    assert wis["fp32-gemm"]["saved_ms_per_step"] == pytest.approx(3.0, abs=A)
    both = what_if_all(before, ["dominant-kernel", "fp32-gemm"])
    assert both["rules"] == ["dominant-kernel", "fp32-gemm"]
    assert both["saved_ms_per_step"] == pytest.approx(3.0, abs=A)


def test_two_different_fixes_together_are_one_replay(tmp_path):
    """item_after_every_gemm: 20 x (GEMM 200 us, elementwise 30 us, .item(), 150 us Python). Without
    the syncs the GPU runs back to back (20 x 231 us: the item copies of 1 us stay); with the GEMMs
    also 2x faster (dominant-kernel) the GPU needs 20 x 131 us = 2.62 ms but the host needs
    20 x (5 + 5 + 6 + 2 + 150) us = 3.36 ms (launches, the copy call, the sync's return, Python):
    together the step is host-bound at about 3.36 ms, which neither single what-if nor their sum
    says (their sum would save more than the step allows the host to)."""
    before = diagnose_path(WHAT_IF_PAIRS["item_after_every_gemm"][0]().write(tmp_path / "c.sqlite"))
    wis = before["metrics"]["critical_path"]["what_if"]
    both = what_if_all(before, ["host-sync", "dominant-kernel"])
    assert both["step_ms_after"] == pytest.approx(3.36, rel=0.02)
    total = wis["host-sync"]["saved_ms_per_step"] + wis["dominant-kernel"]["saved_ms_per_step"]
    assert both["saved_ms_per_step"] < total
    assert both["saved_ms_per_step"] >= max(wis["host-sync"]["saved_ms_per_step"], wis["dominant-kernel"]["saved_ms_per_step"])


@pytest.mark.parametrize("name", sorted(CP_SCENARIOS))
def test_unchanged_replay_gives_back_the_capture(tmp_path, name):
    """With no change the replay puts every call and operation of the step back at its recorded
    times (so a what-if's saving comes from its change alone)."""
    from nsysdoc.analysis import analyze
    from nsysdoc.assembly.critical_path import step_path
    from nsysdoc.trace import load_trace

    a = analyze(load_trace(CP_SCENARIOS[name]().write(tmp_path / "c.sqlite"), cache=False))
    s = a.steps.table
    t0, t1 = int(np.asarray(s["start_ns"])[1]), int(np.asarray(s["start_ns"])[2])
    g, _ = step_path(a.trace, t0, t1, None)
    r = wi.prepare(g, t0, t1)
    cs, ce, os_, oe = wi.replay(r, wi.Change("nothing"))
    assert cs.tolist() == g.c_start.tolist() and ce.tolist() == g.c_end.tolist()
    assert os_.tolist() == g.o_start.tolist() and oe.tolist() == g.o_end.tolist()


def test_ranking_within_a_severity_follows_the_what_if():
    """Two warnings: A costs 10 ms in the window (2 ms per step) but its fix saves 0.5 ms per step;
    B costs 8 ms (2 ms per step) and its fix saves 2 ms per step. Ranked by what the fix saves, in
    the window's terms (10 x 0.5 / 2 = 2.5 ms vs 8 x 2 / 2 = 8 ms): B first. A critical finding stays
    before both whatever its what-if."""
    a = {"rule": "a", "severity": "warning", "impact_ms": 10.0, "impact_ms_per_step": 2.0,
         "what_if": {"step_ms_before": 5.0, "step_ms_after": 4.5, "saved_ms_per_step": 0.5, "change": "x"}}
    b = {"rule": "b", "severity": "warning", "impact_ms": 8.0, "impact_ms_per_step": 2.0,
         "what_if": {"step_ms_before": 5.0, "step_ms_after": 3.0, "saved_ms_per_step": 2.0, "change": "y"}}
    c = {"rule": "c", "severity": "critical", "impact_ms": 20.0, "impact_ms_per_step": 4.0,
         "what_if": {"step_ms_before": 5.0, "step_ms_after": 5.0, "saved_ms_per_step": 0.0, "change": "z"}}
    assert [f["rule"] for f in rank_findings([a, b, c])] == ["c", "b", "a"]
    assert [f["rule"] for f in rank_findings([dict(a, what_if=None), dict(b, what_if=None)])] == ["a", "b"]


def test_verdict_sentence_states_the_what_if():
    """The sentence uses the what-if's own numbers (fmt_ms: 2 decimals under 10 ms)."""
    f = {"what_if": {"step_ms_before": 7.763, "step_ms_after": 4.625, "saved_ms_per_step": 3.138,
                     "change": "the blocking syncs removed"}}
    assert "from 7.76 ms to 4.62 ms (the blocking syncs removed)" in what_if_text(f)
    f["what_if"].update(step_ms_after=7.763, saved_ms_per_step=0.0)
    assert "would not shorten" in what_if_text(f)
    assert what_if_text({"what_if": None}) == ""


def test_change_combines_the_strongest_of_each():
    """combine: per operation the smaller scale, per call the smaller cap (-1 = none), the larger
    cut, either flag."""
    x = wi.Change("x", op_scale=np.array([0.5, 1.0]), call_ns=np.array([-1, 2000]), lag_cut_ns=np.array([0, 5]))
    y = wi.Change("y", op_scale=np.array([1.0, 0.0]), call_ns=np.array([3000, -1]), lag_cut_ns=np.array([7, 1]),
                  producers_off=True)
    z = wi.combine([x, y], "both")
    assert z.op_scale.tolist() == [0.5, 0.0] and z.call_ns.tolist() == [3000, 2000]
    assert z.lag_cut_ns.tolist() == [7, 5] and z.producers_off
    assert wi.Change("none").empty() and not z.empty()


_WALK_CASES = [(n, None) for n in sorted(CP_SCENARIOS)] + [(n, fx) for n in sorted(WHAT_IF_PAIRS) for fx in (False, True)]


@pytest.mark.parametrize("name,fixed", _WALK_CASES, ids=[f"{n}{'' if fx is None else ('-fixed' if fx else '-cause')}"
                                                          for n, fx in _WALK_CASES])
def test_vectorised_walk_is_the_reference_walk(tmp_path, name, fixed):
    """The vectorised critical path (every node's last arrival at once, the cursor as a running
    minimum) gives the reference walk's path node for node: segments, time per operation and call,
    pieces, on every step of the scenario."""
    from nsysdoc.analysis import analyze
    from nsysdoc.assembly.critical_path import step_path
    from nsysdoc.trace import load_trace

    build = CP_SCENARIOS[name] if fixed is None else (lambda: WHAT_IF_PAIRS[name][0](fixed=fixed))
    a = analyze(load_trace(build().write(tmp_path / "c.sqlite"), cache=False))
    s = a.steps.table
    for t0, t1 in zip(np.asarray(s["start_ns"]).tolist(), np.asarray(s["end_ns"]).tolist()):
        g, p = step_path(a.trace, t0, t1, None)
        ref = cp.critical_path_reference(g, t0, t1)
        assert p.segments_ns.tolist() == ref.segments_ns.tolist()
        assert p.op_ns.tolist() == ref.op_ns.tolist() and p.call_ns.tolist() == ref.call_ns.tolist()
        assert p.pieces == ref.pieces and p.truncated == ref.truncated


def _random_graph(seed: int):
    """A random step of 2 threads and 3 streams: calls in time order per thread (some launches, some
    blocking syncs), each launch's operation queued on its stream after the launch, some starting
    late (waits nothing records), times on a coarse grid so that ties happen."""
    rng = np.random.default_rng(seed)
    cs, ce, th, kind, ckey = [], [], [], [], []
    os_, oe, st, seg, name, okey = [], [], [], [], [], []
    free = {7: 0, 9: 0, 13: 0}
    for t in (0, 1):
        now = int(rng.integers(0, 5)) * 10_000
        for _ in range(int(rng.integers(5, 40))):
            now += int(rng.choice([0, 5_000, 10_000, 40_000, 2_000_000]))
            k = int(rng.choice([cp.CALL_LAUNCH, cp.CALL_LAUNCH, cp.CALL_OTHER, cp.CALL_SYNC]))
            d = int(rng.choice([5_000, 10_000, 20_000]))
            key = len(cs) + 1
            if k == cp.CALL_LAUNCH:
                s = int(rng.choice([7, 9, 13]))
                start = max(now + d, free[s]) + int(rng.choice([0, 0, 10_000, 100_000]))
                dur = int(rng.choice([10_000, 50_000, 300_000]))
                free[s] = start + dur
                os_.append(start); oe.append(start + dur); st.append(s); okey.append(key)
                seg.append(cp.COMM if s == 13 else cp.KERNEL); name.append(s)
            elif k == cp.CALL_SYNC:
                d = max(d, max(free.values()) + 2_000 - now)
            cs.append(now); ce.append(now + d); th.append(t); kind.append(k); ckey.append(key)
            now += d
    return cp.build_graph(cs, ce, th, kind, ckey, os_, oe, st, seg, name, okey)


@pytest.mark.parametrize("seed", range(40))
def test_vectorised_walk_on_random_graphs(seed):
    """Random graphs (ties, late starts with and without a producer, hand-offs after long idle
    gaps, blocking syncs): the vectorised walk is the reference walk, over several windows."""
    g = _random_graph(seed)
    ends = np.concatenate([g.c_end, g.o_end])
    hi = int(ends.max()) if len(ends) else 1
    for t0, t1 in ((0, hi), (hi // 3, hi), (hi // 4, hi // 2), (0, hi + 50_000)):
        g._bindings = None
        p, ref = cp.critical_path(g, t0, t1), cp.critical_path_reference(g, t0, t1)
        assert p.segments_ns.tolist() == ref.segments_ns.tolist(), (t0, t1)
        assert p.op_ns.tolist() == ref.op_ns.tolist() and p.call_ns.tolist() == ref.call_ns.tolist()
        assert p.pieces == ref.pieces and p.truncated == ref.truncated
        r = wi.prepare(g, t0, t1)
        cs_, ce_, os2, oe2 = wi.replay(r, wi.Change("nothing"))
        assert ce_.tolist() == g.c_end.tolist() and oe2.tolist() == g.o_end.tolist()
        assert cs_.tolist() == g.c_start.tolist() and os2.tolist() == g.o_start.tolist()


def _changes(g, t0):
    rng = np.random.default_rng(t0 % 1000)
    out = [wi.launch_floor(g, t0), wi.syncs_removed(g, t0), wi.input_wait_removed(g, t0), wi.comm_hidden(g),
           wi.waits_removed(g), wi.ops_faster(g, rng.random(len(g.o_start)) < 0.5, 2.0, "half 2x")]
    return out + [wi.combine(out[:3], "a"), wi.combine(out, "all")]


@pytest.mark.parametrize("seed", range(40))
def test_chain_replay_is_the_node_replay_on_random_graphs(seed):
    """The vectorised replay (chains solved by running maxima, swept until nothing changes) gives
    the one-node-at-a-time replay's times for every change, on random graphs and windows."""
    g = _random_graph(seed)
    ends = np.concatenate([g.c_end, g.o_end])
    hi = int(ends.max()) if len(ends) else 1
    for t0, t1 in ((0, hi), (hi // 3, hi), (hi // 4, hi // 2)):
        g._bindings = None
        r = wi.prepare(g, t0, t1)
        for ch in [wi.Change("nothing")] + _changes(g, t0):
            fast, slow = wi.replay_chains(r, ch), wi.replay(r, ch)
            assert fast is not None
            for x, y in zip(fast, slow):
                assert x.tolist() == y.tolist(), ch.text


def test_chain_by_pointer_jumping():
    """_chain follows the pointers to the end: from 5 in [-1, 0, 1, 2, 3, 4] the chain is 5 4 3 2 1 0;
    from 0 it is [0]; a cycle (1 -> 0 -> 1) has no end: None (the walk then falls back to the
    reference, which stops on its step limit)."""
    nxt = np.array([-1, 0, 1, 2, 3, 4])
    assert cp._chain(nxt, 5).tolist() == [5, 4, 3, 2, 1, 0]
    assert cp._chain(nxt, 0).tolist() == [0]
    assert cp._chain(np.array([1, 0, 1]), 2) is None


def test_dependency_on_the_path_names_the_copy(tmp_path):
    """copy_stream_feeds_compute: the GEMM on stream 7 waits on the copy on stream 9. It was ready
    when its launch call returned (S+15 us; the stream's previous GEMM ended in the last step) and
    started when the copy ended (S+1005.6 us): a wait of 990.6 us, on the critical path."""
    r = diagnose_path(CP_SCENARIOS["copy_stream_feeds_compute"]().write(tmp_path / "c.sqlite"))
    dep = r["metrics"]["critical_path"]["dependency"]
    assert dep["waits"] == [{"stream": 7, "waited_on_stream": 9, "producer": "memcpy", "kind": "copy", "count": 1,
                             "wait_ms": pytest.approx(0.9906, abs=A), "on_path_ms": pytest.approx(0.9906, abs=A)}]
    assert sum(dep["path_instead_ms"].values()) == 0


def test_dependency_off_the_path_says_what_ran_instead(tmp_path):
    """nccl_overlapped: the all-reduce (stream 13) waits on the first GEMM (stream 7): its call
    returns at S+17 us (GEMM call 5 us, event record + wait 4 us, NCCL call 8 us) and the GEMM ends
    at S+505 us: 488 us of waiting, off the critical path (the path runs through the GEMMs and
    Adam); during it the path ran the GEMM itself: kernel 0.488 ms."""
    r = diagnose_path(CP_SCENARIOS["nccl_overlapped"]().write(tmp_path / "c.sqlite"))
    dep = r["metrics"]["critical_path"]["dependency"]
    (w,) = dep["waits"]
    assert (w["stream"], w["waited_on_stream"], w["kind"], w["count"]) == (13, 7, "kernel", 1)
    assert (w["wait_ms"], w["on_path_ms"]) == pytest.approx((0.488, 0.0), abs=A)
    assert dep["path_instead_ms"]["kernel"] == pytest.approx(0.488, abs=A)
    assert sum(dep["path_instead_ms"].values()) == pytest.approx(0.488, abs=A)


def test_a_median_step_over_the_what_if_budget_gets_none_and_says_so(tmp_path, monkeypatch):
    """issue 50: the replays are skipped when the median step (or the window without steps) holds
    more calls and operations than ``WHAT_IF_EVENTS_BUDGET``. python_between_tiny_kernels' step
    holds 50 launch calls and 50 kernels (100 nodes, more with the sync): with the budget at 10
    no finding has a what-if, ``missing`` names the count, and the path itself is still computed."""
    import nsysdoc.assembly.critical_path as acp

    path = WHAT_IF_PAIRS["python_between_tiny_kernels"][0]().write(tmp_path / "c.sqlite")
    full = diagnose_path(path)
    assert full["metrics"]["critical_path"]["what_if"]
    monkeypatch.setattr(acp, "WHAT_IF_EVENTS_BUDGET", 10)
    lean = diagnose_path(path)
    cpm = lean["metrics"]["critical_path"]
    assert "what_if" not in cpm and cpm["median_step"] == full["metrics"]["critical_path"]["median_step"]
    said = [m for m in cpm["missing"] if m.startswith("what-if not computed: the median step holds ")]
    assert said and int(said[0].split(" holds ")[1].split()[0]) >= 100
    assert not any(f.get("what_if") for f in lean["findings"])
@pytest.mark.parametrize("form", ["sqlite", "kineto"])
def test_comm_held_compute_behind_a_pageable_copy_replayed_by_hand(tmp_path, form):
    """tolist_after_comm_held_compute (the HTA trace's shape), step at S (us): SendRecv call [S,
    S+8), kernel [S+6.8, S+3006.8) on stream 13; event record + wait [S+8, S+12); GEMM call [S+12,
    S+17), the GEMM waits on the SendRecv: [S+3006.8, S+3506.8); the pageable device-to-host copy's
    call [S+17, ...) (4 KiB at 3 GB/s: 1.365 us) copies after the GEMM [S+3506.8, S+3508.165) and
    returns 2 us later, S+3510.165; Python 200 us; 4 GEMM calls from S+3710.165, kernels back to
    back from S+3715.165 to S+7715.165; the device sync returns S+7717.165: 7.717165 ms.
    Path (last arrivals): sync wait 2 us; 4 GEMMs 4000 (kernel); launch edge 5; Python 200 (cpu);
    the copy call's 2 us after its copy (wait); the copy 1.365 (copy); the first GEMM 500
    (kernel); the SendRecv 3000 (comm, the GEMM's producer); its launch edge 6.8: cpu 0.2, launch
    0.0118, kernel 4.5, copy 0.0014, comm 3.0, wait 0.004 ms.
    Communication hidden (0 us): the first GEMM starts at its launch's end S+17 (the producer
    arrives at S+6.8), ends S+517; the copy follows [S+517, S+518.365), the call returns S+520.365
    (the host no longer waits 3 ms), Python to S+720.365, GEMMs S+725.365..S+4725.365, sync
    S+4727.365: 4.727365 ms. The fixed capture (all-to-all under the later GEMMs): the GEMM
    [S+5, S+505), copy [S+505, S+506.365), call returns S+508.365, Python to S+708.365, the SendRecv
    call [S+708.365, S+716.365), GEMMs from S+721.365 to S+4721.365, sync S+4723.365: 4.723365 ms.
    Reading the copy call as a launch (not blocking), the host never waits and the what-if saves
    nothing."""
    f = WHAT_IF_PAIRS["tolist_after_comm_held_compute"][0]
    path = f().write(tmp_path / "c.sqlite") if form == "sqlite" else f().write_kineto(tmp_path / "c.pt.trace.json.gz")
    before = diagnose_path(path)
    cpm = before["metrics"]["critical_path"]
    assert cpm["median_step"]["segments_ms"] == pytest.approx(
        {"cpu": 0.2, "launch": 0.0118, "kernel": 4.5, "copy": 0.0014, "comm": 3.0, "wait": 0.004}, abs=A)
    w = cpm["what_if"]["nccl-exposed"]
    assert (w["step_ms_before"], w["step_ms_after"]) == pytest.approx((7.7172, 4.7274), abs=A)
    fixed = f(fixed=True).write(tmp_path / "f.sqlite") if form == "sqlite" \
        else f(fixed=True).write_kineto(tmp_path / "f.pt.trace.json.gz")
    assert median_ms(diagnose_path(fixed)) == pytest.approx(4.7234, abs=A)


def test_what_if_of_a_window_without_steps_names_the_window():
    """A capture without steps replays its analysis window: the sentence says so, not "median step"."""
    f = {"what_if": {"step_ms_before": 969.4476, "step_ms_after": 961.5361, "saved_ms_per_step": 7.9115,
                     "change": "the FP32 GEMM/conv kernels 2x faster"}}
    assert what_if_text(f, steps=False) == (" Fixing it would take the analysis window from 969.4 ms to 961.5 ms "
                                            "(the FP32 GEMM/conv kernels 2x faster).")
    f["what_if"].update(step_ms_after=969.4476, saved_ms_per_step=0.0)
    assert "on the window's dependency graph" in what_if_text(f, steps=False)
    assert "median step" not in what_if_text(f, steps=False)


def test_each_finding_card_and_markdown_state_its_what_if(tmp_path):
    """item_after_every_gemm: the page's card of every finding with a what-if says, with the
    finding's own numbers, what fixing it would do to the median step; the Markdown likewise."""
    from nsysdoc.analysis import analyze
    from nsysdoc.rules import apply_rules, load_rules
    from nsysdoc.trace import load_trace
    from nsysdoc.views import render_html, render_markdown
    from nsysdoc.fmt import fmt_ms

    path = WHAT_IF_PAIRS["item_after_every_gemm"][0]().write(tmp_path / "c.sqlite")
    a = analyze(load_trace(str(path), cache=False))
    apply_rules(a.to_dict(), load_rules())
    html, md = render_html(a), render_markdown(a)
    with_wi = [f for f in a.to_dict()["findings"] if (f.get("what_if") or {}).get("saved_ms_per_step")]
    assert with_wi
    import html as H
    cards = re.findall(r'<p class="what-if" data-testid="what-if">(.*?)</p>', html)
    assert len(cards) == len(with_wi)
    for f in with_wi:
        w = f["what_if"]
        text = f"Fixing it would take the median step from {fmt_ms(w['step_ms_before'])} to {fmt_ms(w['step_ms_after'])}"
        assert any(H.unescape(c).startswith(text) for c in cards), (text, cards)
        assert text in md.replace("\\", "")
