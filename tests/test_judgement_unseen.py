"""Issue 28 ("Judgement II: right on captures it has never seen"): one scenario per item, built
from a description here, with the numbers computed by hand in the comments."""
from __future__ import annotations

import pytest

from nsysdoc.testing import Capture

from .conftest import diagnose_path

approx = pytest.approx


def run(cap: Capture, tmp_path, name="c") -> dict:
    return diagnose_path(cap.write(tmp_path / f"{name}.sqlite"))


def fired(r) -> dict[str, dict]:
    return {f["rule"]: f for f in r["findings"]}


# ---------------------------------------------------------------------------------------------
# 1. Framing: time outside the analysis window
# ---------------------------------------------------------------------------------------------

def one_long_kernel_after_startup() -> Capture:
    """A program that starts (950 ms of Python with no CUDA call), creates its CUDA context inside
    a 160 ms cudaMalloc, loads a module (40 ms), runs one 124 ms kernel, then spends 300 ms on the
    host before exiting. The capture starts at 0 (the builder's thread starts at ``start_ns``)."""
    cap = Capture(start_ns=0)
    t = cap.process().thread()
    t.cpu(us=950_000)                       # 0 .. 950 ms: process start-up
    t.malloc(us=160_000)                    # 950 .. 1110 ms: context creation
    t.api("cuModuleLoadData", us=40_000)    # 1110 .. 1150 ms: module loading
    t.launch("solver_kernel", us=124_000, api_us=5)  # kernel starts 3 us into the 5 us call + queue
    t.cpu(us=124_000 + 300_000)             # waits on the host, then 300 ms of host work
    t.api("cudaDeviceSynchronize", us=1)    # a last call so the capture ends after the host work
    return cap


def test_framing_states_the_capture_and_what_the_window_left_out(tmp_path):
    r = run(one_long_kernel_after_startup(), tmp_path)
    fr = r["capture"]["framing"]
    # the kernel: 124 ms; it starts about 1,150.005 ms into the capture (after the 5 us launch call
    # begins, plus the queue delay): the window is the GPU span, 124 ms long
    assert fr["window_ms"] == approx(124.0, abs=0.01)
    # the capture ends with the last call: 1,150 + 0.005 + 424 + 0.001 ms ~ 1,574 ms
    assert fr["capture_ms"] == approx(1574.0, abs=0.05)
    # process start-up: 0 -> the first CUDA call (the cudaMalloc) = 950 ms
    assert fr["startup_ms"] == approx(950.0, abs=0.01)
    # context creation: the first non-launch call of 1 ms or more, the 160 ms cudaMalloc
    assert fr["context_ms"] == approx(160.0, abs=0.01) and fr["context_call"] == "cudaMalloc"
    # set-up before the first GPU operation: cudaMalloc (160) + cuModuleLoadData (40) = 200 ms
    assert fr["setup_before_ms"] == approx(200.0, abs=0.01)
    # busy over the capture: 124 / 1,574 = 7.9 %; over the window: 100 %
    assert fr["busy_capture_pct"] == approx(124.0 / fr["capture_ms"] * 100, abs=0.01)
    assert r["summary"]["gpu_busy_pct"] == approx(100.0, abs=0.01)
    v = r["verdict"]
    # one kernel is never "compute-bound"; the 200 ms of set-up are 62% of the span and the set-up
    # before it (200 / (124 + 200)): a warning, the main bottleneck of this capture
    assert v["headline"] == "one-time-setup", v
    assert fired(r)["one-time-setup"]["impact_pct"] == approx(200 / 324 * 100, abs=0.01)
    text = v["framing"]
    assert "1,574 ms" in text and "124.0 ms" in text
    assert "950.0 ms of process start-up" in text
    assert "200.0 ms of set-up before the first GPU operation" in text and "cudaMalloc: 160.0 ms" in text
    assert "300.0 ms after the window" in text
    assert "busy 7.9%" in text and "(over the window: 100.0%)" in text


def test_one_kernel_is_never_compute_bound(tmp_path):
    # the same program without the slow context creation and module load: 950 ms of start-up, one
    # 124 ms kernel, 300 ms of host work; busy over the capture 124 / 1,374 = 9.0 %
    cap = Capture(start_ns=0)
    t = cap.process().thread()
    t.cpu(us=950_000)
    t.launch("solver_kernel", us=124_000, api_us=5)
    t.cpu(us=124_000 + 300_000)
    t.api("cudaDeviceSynchronize", us=1)
    r = run(cap, tmp_path)
    v = r["verdict"]
    assert r["summary"]["gpu_busy_pct"] == approx(100.0, abs=0.01)
    assert v["status"] == "bound" and v["headline"] == "gpu-idle", v
    cap_ms = r["capture"]["framing"]["capture_ms"]
    assert cap_ms == approx(1374.0, abs=0.05)
    assert f"busy {124 / cap_ms * 100:.1f}%" in v["sentence"] and "1 GPU operation(s)" in v["sentence"]


def test_setup_before_the_first_gpu_operation_counts_as_one_time_setup(tmp_path):
    # a 347 ms first launch (lazy module loading) before the first kernel runs, then 60 warm
    # launches of 1 ms kernels back to back: before the fix the set-up cost left out the 347 ms
    cap = Capture(start_ns=0)
    t = cap.process().thread()
    t.cpu(us=10_000)
    t.launch("first_kernel", us=1000, api_us=347_000)
    for _ in range(60):
        t.launch("k", us=1000, api_us=5)
    r = run(cap, tmp_path)
    v = r["metrics"]["values"]
    # the first launch's call starts at 10 ms; its kernel starts 0.6 x 347 ms later (the builder
    # places a kernel's start 60% into its launch call): 208.2 ms of it lies before the first GPU
    # operation, and the GPU is idle for the rest of the call (138.8 ms)
    assert v["setup_before_ms"] == approx(347.0 * 0.6, abs=0.01)
    f = fired(r)["one-time-setup"]
    assert f["impact_ms"] == approx(v["setup_before_ms"] + v["setup_span_ms"], abs=0.01)
    assert f["impact_ms"] >= 340.0
    assert f["impact_of"] == "GPU span and the set-up before it"


def test_a_long_capture_around_a_short_window_is_said_in_the_terminal_summary(tmp_path):
    from nsysdoc.views.render import render_markdown, terminal_summary

    cap = one_long_kernel_after_startup()
    r = run(cap, tmp_path)
    term = terminal_summary(r)
    assert "The capture lasts 1,574 ms" in term
    assert "n/a" not in term and "no step markers" in term
    md = render_markdown(r)
    assert "The capture lasts 1,574 ms" in md and "n/a" not in md


# ---------------------------------------------------------------------------------------------
# 3. Kernels that were not traced
# ---------------------------------------------------------------------------------------------

def test_copies_without_kernels_say_the_kernels_were_not_captured(tmp_path):
    # a driver-API program whose launches were not traced: 12 module loads, then 270 rounds of
    # one 1 MiB HtoD copy and one memset with 1 ms of host work between them (540 GPU operations,
    # GPU idle ~90%): nothing may be ranked as a bottleneck from copies alone
    cap = Capture()
    t = cap.process().thread()
    for _ in range(12):
        t.api("cuModuleLoadData", us=500)
    for _ in range(270):
        t.memcpy("HtoD", 1 << 20)
        t.memset(1 << 16)
        t.cpu(us=1000)
    r = run(cap, tmp_path)
    assert r["summary"]["kernel_count"] == 0
    v = r["verdict"]
    assert v["status"] == "no-gpu" and v["headline"] == "no-gpu-activity", v
    assert "no kernel was captured, only 540 copy/memset operation(s)" in v["sentence"]
    f = fired(r)
    assert f["no-gpu-activity"]["severity"] in ("warning", "critical")
    q = f["capture-quality"]
    assert q["severity"] == "warning"
    assert "12 module/library load call(s)" in q["message"] and "not traced" in q["message"]
    for rule in ("transfer-bound", "host-bound", "launch-bound", "host-sync", "data-starvation"):
        assert rule not in f or f[rule]["severity"] == "info", (rule, f[rule])
    assert r["summary"]["gpu_busy_pct"] is None


# ---------------------------------------------------------------------------------------------
# 4. Long launch calls are not per-launch overhead; messages agree with their numbers
# ---------------------------------------------------------------------------------------------

def test_a_launch_call_blocking_for_milliseconds_is_not_launch_overhead(tmp_path):
    # 400 launches of 20 us kernels, each after 30 us of Python (launch-bound), and every 40th
    # launch call blocks 5 ms while the GPU is idle (a driver lock; not a first launch: the kernel
    # ran before). Per-launch time: 400 x (30 us Python + 5 us call ...) ; the ten 5 ms calls
    # (50 ms of GPU idle) are driver work ("api"), never launch-bound time.
    cap = Capture()
    t = cap.process().thread()
    for i in range(400):
        t.cpu(us=30)
        t.launch("k", us=20, api_us=5000 if i % 40 == 39 else 5)
    r = run(cap, tmp_path)
    d = r["devices"][0]["idle_ms_by_cause"]
    # each blocking call lasts 5 ms and its 20 us kernel runs 3 ms into it (the builder submits at
    # 60% of the call), so the GPU idles through the whole call but the kernel: 5 - 0.02 = 4.98 ms.
    # The last blocking call's remainder after its kernel is tail (no GPU work follows):
    # 9 x 4.98 + 3.0 = 47.82 ms of "api" (driver work), and none of it is launch
    assert d["api"] == approx(9 * 4.98 + 3.0, abs=0.05)
    # launch-bound counts the dispatch-limited gaps only: 5.8 ms of the 61.9 ms window (9.4%), under
    # its 10% threshold; the blocking calls are reported as driver work
    assert d["launch"] < 6.0
    assert "launch-bound" not in fired(r)
    f = fired(r)["driver-stall"]
    assert f["impact_ms"] == approx(d["api"], abs=0.01) and f["severity"] == "critical"
    assert r["verdict"]["headline"] == "driver-stall"


@pytest.mark.parametrize("kernel_us", [4, 30, 200])
def test_launch_bound_words_agree_with_the_ratio(tmp_path, kernel_us):
    # 300 launches after 40 us of Python each, kernels of 4, 30 or 200 us: whatever the ratio of
    # the mean launch gap to the median kernel, the words beside it say what it means
    cap = Capture()
    t = cap.process().thread()
    for _ in range(300):
        t.cpu(us=40)
        t.launch("k", us=kernel_us, api_us=5)
    r = run(cap, tmp_path)
    f = fired(r).get("launch-bound")
    v = r["metrics"]["values"]
    if f is None:
        assert v["idle_launch_pct"] < 10
        return
    ratio = v["launch_gap_us_mean"] / v["kernel_median_us"]
    assert v["launch_gap_to_kernel_ratio"] == approx(ratio, rel=1e-3)
    words = ("the CPU sets the pace" if ratio >= 3 else "about as long" if ratio >= 1 else
             "shorter than the median kernel")
    assert words in f["message"] and f"{ratio:.1f}x" in f["message"], f["message"]


# ---------------------------------------------------------------------------------------------
# 6. Tiny blocking readbacks are a sync cost, not pageable memcpy
# ---------------------------------------------------------------------------------------------

def test_tiny_blocking_readbacks_are_host_synchronisation(tmp_path):
    # 2000 x (50 us kernel, synchronous 27-byte pageable DtoH readback, 20 us of Python): the GPU
    # waits on the host after every readback; pinning 27 bytes would save nothing
    cap = Capture()
    t = cap.process().thread()
    for _ in range(2000):
        t.launch("k", us=50)
        t.memcpy("DtoH", 27, pageable=True, asynchronous=False)
        t.cpu(us=20)
    r = run(cap, tmp_path)
    f = fired(r)
    assert "pageable-memcpy" not in f
    rows = {(c["kind"], c["host_memory"]): c for c in r["metrics"]["copies"]}
    assert rows[("DtoH", "pageable, small")]["count"] == 2000
    assert r["metrics"]["values"]["pageable_copy_count"] == 0
    # the copy call blocks until the 1 us copy ends, so the idle time after it is the host's:
    # the sync class holds the readbacks' share of the gaps
    sync = r["devices"][0]["idle_ms_by_cause"]["sync"]
    # per readback: 20 us of Python plus the refill before the next kernel starts (~22 us), x 2000
    assert 40.0 < sync < 48.0
    assert f["host-sync"]["impact_ms"] == approx(sync, abs=0.01) and f["host-sync"]["severity"] == "critical"


# ---------------------------------------------------------------------------------------------
# 9. A --step-marker that matches nothing says so, and names ranges that look like steps
# ---------------------------------------------------------------------------------------------

def test_a_step_marker_that_matches_nothing_names_the_ranges_that_look_like_steps(tmp_path):
    from nsysdoc.analysis import analyze
    from nsysdoc.rules import apply_rules, load_rules
    from nsysdoc.trace import load_trace

    cap = Capture()
    t = cap.process().thread()
    for i in range(6):
        with t.range(f"train_iter {i}"):
            with t.range("forward"):
                t.launch("gemm_kernel", us=2000)
            t.cpu(us=500)
    path = cap.write(tmp_path / "c.sqlite")

    def diagnose(marker):
        return apply_rules(analyze(load_trace(path, cache=False), step_pattern=marker).to_dict(), load_rules())

    r = diagnose(r"iteration_\d+")
    q = next(f for f in r["findings"] if f["rule"] == "capture-quality")
    assert r"no NVTX range matches the step marker 'iteration_\d+' (--step-marker)" in q["message"]
    assert "no training-step markers" not in q["message"]
    # "train_iter N": 6 host ranges of ~505 us (a 5 us launch call and 500 us of Python; the kernel
    # runs asynchronously), the most time among the repeated ones, listed first
    import re
    m = re.search(r"ranges that repeat like steps: 'train_iter N' \(6x, ([\d.]+) us each\)", q["message"])
    assert m and 500 <= float(m.group(1)) <= 510, q["message"]
    suggestion = re.search(r"for example --step-marker '([^']+)'", q["message"]).group(1)
    assert suggestion == r"train_iter\ \d+"
    # the suggestion works
    assert diagnose(suggestion)["summary"]["step_count"] == 6


# ---------------------------------------------------------------------------------------------
# 5. One-time allocation is not allocation churn
# ---------------------------------------------------------------------------------------------

def _steps_allocating(alloc_steps, free: bool = False) -> Capture:
    """8 steps of 10 x (1 ms kernel); in the steps ``alloc_steps``, a 2 ms cudaMalloc after each
    (and, with ``free``, a 300 us cudaFree after it: the memory is released and allocated again)."""
    cap = Capture()
    t = cap.process().thread()
    for i in range(8):
        with t.range(f"step {i}"):
            for _ in range(10):
                t.launch("gemm_kernel", us=1000)
                if i in alloc_steps:
                    t.malloc(us=2000)
                    if free:
                        t.free()
    return cap


def test_allocation_in_the_first_step_only_is_not_churn(tmp_path):
    # step 0: the caching allocator grows (10 x cudaMalloc of 2 ms between kernels); steps 1-7 reuse
    # its memory. 20 ms of allocation idle is 1/8 of the steps: one-time, not churn.
    r = run(_steps_allocating({0}), tmp_path)
    v = r["metrics"]["values"]
    assert v["alloc_steps_pct"] == approx(12.5)
    assert v["idle_alloc_pct"] >= 1          # the time is there, the repetition is not
    assert "allocation-churn" not in fired(r)


def test_allocation_and_free_every_step_is_churn(tmp_path):
    r = run(_steps_allocating(range(8), free=True), tmp_path)
    assert r["metrics"]["values"]["alloc_steps_pct"] == approx(100.0)
    assert fired(r)["allocation-churn"]["severity"] == "critical"


def test_allocation_every_step_without_frees_is_growth_not_churn(tmp_path):
    # issue 46: churn is allocation and free repeating; 80 cudaMalloc and no cudaFree is the
    # allocator growing (or a leak), never released memory allocated again
    r = run(_steps_allocating(range(8)), tmp_path)
    v = r["metrics"]["values"]
    assert v["alloc_steps_pct"] == approx(100.0)
    assert v["alloc_count"] == 80 and v["alloc_release_count"] == 0 and v["alloc_repeat_count"] == 0
    assert "allocation-churn" not in fired(r)


def test_allocation_inside_nccl_communicator_set_up_is_set_up(tmp_path):
    # ncclCommInitRank (NCCL's NVTX domain) allocates and registers its buffers: 3 x cudaMalloc of
    # 5 ms and a cudaHostRegister of 5 ms while the GPU waits, inside the GPU span (no step
    # markers: the window is first to last GPU operation); then 50 kernels of 2 ms
    cap = Capture()
    t = cap.process().thread()
    t.launch("warm_kernel", us=100)
    with t.range("ncclCommInitRank", domain="NCCL"):
        for _ in range(3):
            t.malloc(us=5000)
        t.api("cudaHostRegister", us=5000)
    for _ in range(50):
        t.launch("gemm_kernel", us=2000)
    r = run(cap, tmp_path)
    # the 20 ms of communicator set-up (GPU idle from the 0.1 ms warm kernel's end) are set-up:
    # the window leaves them out as a warm-up, and the one-time-setup total counts them
    (warm,) = r["capture"]["excluded"]
    assert warm["kind"] == "warm-up" and warm["setup_ms"] == approx(19.9, abs=0.05)
    assert r["metrics"]["values"]["setup_span_ms"] == approx(19.9, abs=0.05)
    assert "allocation-churn" not in fired(r)
