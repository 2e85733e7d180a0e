"""Attribution slice by slice (``nsysdoc.engine.attribute_sliced``, used from 4 M NVTX rows on)
gives every number the whole-capture attribution gives: the full JSON result is compared both ways
on scenarios built here and in ``nsysdoc.testing.scenarios``, at several slice sizes (a few rows
per slice puts ranges across many slice edges), and on the real exports when present.

``NSYSDOC_ATTR_SLICED_ROWS=1`` makes every Nsight Systems capture take the sliced path."""
from __future__ import annotations

import json

import numpy as np
import pytest

from nsysdoc.testing import scenarios as SC
from nsysdoc.testing.builder import Capture

from .conftest import SHARED_TRACES, diagnose_path, needs_shared, skip_without_shared

TRACES = SHARED_TRACES
GEMM = "ampere_sgemm_128x64_nn"


def outer_range_crossing_regions(steps: int = 6) -> Capture:
    """A ``train`` range over the whole run (open across every slice edge); per step a step marker,
    ``forward`` > ``aten::conv2d`` (its first call launches a kernel whose launch call takes 3 ms:
    a set-up launch, so that first call is set-up) and ``aten::linear`` > ``aten::addmm``
    (seq-numbered); a zero-length range; a ``data`` domain range that overlaps ``aten::relu``
    without nesting; on the autograd thread the backward nodes of both seq numbers, launching
    their kernels."""
    cap = Capture()
    p = cap.process()
    main = p.thread()
    bwd = p.thread(tid=4243, name="autograd")
    with main.range("train"):
        for i in range(steps):
            with main.range(f"ProfilerStep#{i}"):
                with main.range("forward"):
                    with main.op("aten::conv2d", seq=10 * i + 1):
                        main.launch("conv_kernel", us=40, api_us=3000 if i == 0 else 5)
                    with main.op("aten::linear", seq=10 * i + 2):
                        main.cpu(us=7)
                        with main.op("aten::addmm", seq=10 * i + 2):
                            main.launch(GEMM, us=120)
                    with main.range("empty"):
                        pass
                    a = main.now_ns
                    main.cpu(us=3)
                    with main.op("aten::relu"):
                        main.launch("relu_kernel", us=15)
                        b = main.now_ns
                        main.cpu(us=4)
                    # a push/pop range [a, b + 2 us) in another domain (its own stack): overlaps
                    # aten::relu without nesting in it
                    cap._nvtx.append(dict(start=a, end=b + 2000, type=59, text="prefetch", tid=main.global_tid,
                                          domain="data", registered=False, kind="range", seq=None, op_id=None,
                                          backward=False))
                main.launch("tail_kernel", us=25)
                bwd.at(main.now_ns)
                for s, name in ((10 * i + 2, "AddmmBackward0"), (10 * i + 1, "ConvolutionBackward0")):
                    with bwd.op(f"autograd::engine::evaluate_function: {name}", seq=s, backward=True), \
                            bwd.op(name, seq=s, backward=True), bwd.op("aten::mm"):
                        bwd.launch("bwd_kernel", us=90)
                main.at(bwd.now_ns)
                main.sync_device()
                main.cpu(us=150)
    return cap


def _json(path, monkeypatch, sliced: bool, rows: int | None) -> dict:
    if sliced:
        monkeypatch.setenv("NSYSDOC_ATTR_SLICED_ROWS", "1")
    else:
        monkeypatch.setenv("NSYSDOC_ATTR_SLICED_ROWS", str(1 << 60))
    if rows:
        monkeypatch.setenv("NSYSDOC_SLICE_ROWS", str(rows))
    else:
        monkeypatch.delenv("NSYSDOC_SLICE_ROWS", raising=False)
    r = diagnose_path(path)
    r.pop("timing", None)
    return json.loads(json.dumps(r, sort_keys=True, default=str))


def _same_both_ways(path, monkeypatch, rows_list) -> dict:
    base = _json(path, monkeypatch, False, None)
    for rows in rows_list:
        for sliced in (False, True):
            if not sliced and not rows:
                continue
            assert _json(path, monkeypatch, sliced, rows) == base, (sliced, rows)
    return base


@pytest.fixture(scope="module")
def crossing(tmp_path_factory):
    return outer_range_crossing_regions().write(tmp_path_factory.mktemp("sliced") / "crossing.sqlite")


def test_sliced_path_is_taken_and_counts_open_ranges(crossing, monkeypatch):
    """The test below compares something: with the switch, the plan's attributor is the sliced one,
    and with 5 rows a slice the ``train`` range (and others) stay open across slice edges."""
    from nsysdoc.analysis import analyze
    from nsysdoc.engine import attribute_sliced as AS
    from nsysdoc.trace import load_trace

    monkeypatch.setenv("NSYSDOC_ATTR_SLICED_ROWS", "1")
    monkeypatch.setenv("NSYSDOC_SLICE_ROWS", "5")
    seen = {"open": 0, "slices": 0}
    orig = AS.SliceView.count_ranges

    def count(self):
        before = len(self.owner.open)
        orig(self)
        seen["slices"] += 1
        seen["open"] = max(seen["open"], len(self.owner.open), before)

    monkeypatch.setattr(AS.SliceView, "count_ranges", count)
    res = analyze(load_trace(crossing, cache=False))
    plan = res.engine.plan
    assert isinstance(plan.attr, AS.SlicedAttributor)
    assert seen["slices"] > 10 and seen["open"] >= 2  # train and a step's forward at least
    assert plan.attr.open == {}  # every range closed by the last slice
    assert plan.attr.fwd.found.all()  # every backward seq found its forward operator
    assert any("first call of aten::conv2d" in str(t) for t in plan.setup_texts)


@pytest.mark.parametrize("rows", [None, 5, 23])
def test_sliced_attribution_equals_the_whole_capture_one(crossing, monkeypatch, rows):
    base = _same_both_ways(crossing, monkeypatch, [rows])
    ops = {r["name"]: r for r in base["metrics"]["operators"]["rows"]}
    # by hand, for the numbers the sliced path adds up differently: the backward nodes take their
    # forward operator's module; aten::addmm's GPU time is its 6 GEMMs; train holds all GPU time
    assert ops["aten::addmm"]["gpu_ms"] == pytest.approx(6 * 0.120)
    assert ops["aten::addmm"]["calls"] == 6 and ops["aten::linear"]["gpu_ms"] == pytest.approx(6 * 0.120)
    assert ops["aten::mm"]["self_gpu_ms"] == pytest.approx(12 * 0.090)
    assert ops["train"]["gpu_ms"] == pytest.approx(6 * (0.040 + 0.120 + 0.015 + 0.025))
    assert ops["empty"]["calls"] == 6 and ops["empty"]["cpu_ms"] == 0


@pytest.mark.slow  # issue 50: six scenarios twice each, sample_training 5.8 s of CPU; .ci/run runs them
@pytest.mark.parametrize("name", ["operators_forward_backward", "where_tiny_kernels_and_item", "sample_training",
                                  "seed_case_large_model", "native_app_backtraces", "dataloader_starvation"])
def test_scenarios_same_json_sliced_or_not(name, monkeypatch, tmp_path):
    cap = getattr(SC, name)()
    path = cap.write(tmp_path / f"{name}.sqlite")
    _same_both_ways(path, monkeypatch, [None, 7])


REAL = ["mmagic_vsr_a100_forward.sqlite", "fastvideo_h100x2_sp2_slice.sqlite", "nvfuser_matmul_h100.sqlite",
        "nvfuser_pytest_h200.sqlite"]


@needs_shared()
@pytest.mark.parametrize("name", REAL)
def test_real_traces_same_json_sliced_or_not(name, monkeypatch):
    path = TRACES / name
    skip_without_shared(name)
    _same_both_ways(path, monkeypatch, [None, 3000])


def test_kineto_keeps_the_whole_capture_attributor(monkeypatch, tmp_path):
    from nsysdoc.engine import attribute_sliced as AS
    from nsysdoc.trace import load_trace

    monkeypatch.setenv("NSYSDOC_ATTR_SLICED_ROWS", "1")
    path = SC.operators_forward_backward().write_kineto(tmp_path / "fb.json")
    assert not AS.use_sliced(load_trace(path, cache=False))


def test_fwd_map_lookup_by_hand():
    from nsysdoc.engine.attribute import FwdMap

    fm = FwdMap(np.array([1, 1, 2]), np.array([5, 9, 5]))
    fm.name[:] = [10, 11, 12]
    fm.mod[:] = [-1, 3, 4]
    fm.frame[:] = [7, -1, -1]
    name, mod, frame = fm.lookup(np.array([2, 1, 1, 3]), np.array([5, 9, 6, 5]))
    assert name.tolist() == [12, 11, -1, -1]
    assert mod.tolist() == [4, 3, -1, -1]
    assert frame.tolist() == [-1, -1, -1, -1]
