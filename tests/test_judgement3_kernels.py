"""Issue 46, item 8: dominant kernels and kernel floods (``rules/dominant-kernel.yaml``,
``rules/tiny-kernels.yaml``), on the scenarios of ``nsysdoc/testing/scenarios.py``.

Every expected number is computed by hand from the scenario code and the builder's timing model
(header of ``tests/test_judgement_scenarios.py``): a launch at host time ``a`` (api_us=5) starts
its kernel at ``max(a + 5 us, stream free)``; the host launches every 5 us, so once a kernel of
more than 5 us runs the GPU runs the rest back to back. ``item()`` = a 1 us DtoH copy on the same
stream, then a stream sync returning 2 us after it.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from nsysdoc.metrics.kernels import is_communication_kernel, top_compute_kernel  # noqa: E402
from nsysdoc.rules import text  # noqa: E402
from nsysdoc.rules.policy import by_impact  # noqa: E402
from nsysdoc.testing.scenarios import SCENARIOS  # noqa: E402
from tests.conftest import diagnose_path  # noqa: E402

from tests.test_judgement_scenarios import approx, finding  # noqa: E402 - one copy of the helpers


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    cache: dict = {}

    def _run(name: str, **kwargs) -> dict:
        key = (name, tuple(sorted(kwargs.items())))
        if key not in cache:
            path = tmp_path_factory.mktemp("j3k") / f"{name}.sqlite"
            SCENARIOS[name](**kwargs).write(path)
            cache[key] = diagnose_path(path)
        return cache[key]
    return _run


# -- dominant-kernel ------------------------------------------------------------------------------

def test_one_kernel_76pct_without_steps_is_info(run):
    """prep_a..prep_d of 600 us (2,400 us) and solver_kernel of 7,600 us: kernel time 10,000 us,
    the solver 7,600 / 10,000 = 76.0%. No markers and nothing repeats: no steps, so the share alone
    decides: >= 50% -> fires, < 90% -> info. Before issue 46 it needed 90% without steps (quiet)."""
    r = run("one_kernel_76pct_no_steps")
    v = r["metrics"]["values"]
    assert v["has_steps"] is False
    assert v["top_kernel_share_pct"] == approx(76.0)
    # the kernels run back to back from the first: window 10,000 us, the solver 76% of it (>= 10%)
    assert v["window_ms"] == approx(10.0)
    assert v["top_kernel_window_pct"] == approx(76.0)
    f = finding(r, "dominant-kernel")
    assert f is not None and f["severity"] == "info"
    assert "76% of all kernel time: solver_kernel (1 launches, 7.60 ms each)" in f["message"]
    assert "per step" not in f["message"]


def test_one_kernel_92pct_is_a_warning(run):
    """Per step big_kernel 9,200 us + 8 x 100 us = 10,000 us of kernels: 92.0% (>= 90: warning).
    Step (GPU reaches one step's first kernel to the next's): 10,000 us of kernels + the 1 us copy
    of item() + its sync returning 2 us later + 5 us from the next launch to its kernel = 10,008 us;
    one launch = 9,200 / 10,008 = 91.9265% of a step (>= 20%). 3 launches / 3 steps = 1 per step,
    printed as a whole number."""
    r = run("one_kernel_92pct")
    v = r["metrics"]["values"]
    assert v["top_kernel_share_pct"] == approx(92.0)
    assert v["step_time_ms_median"] == approx(10.008)
    assert v["top_kernel_instance_share_pct"] == approx(9200 / 10008 * 100)
    # window: the steps, from the first step's range start (host 0, 5 us before its first kernel)
    # to the last range's end (2 us after the last copy): 5 + 3 x 10,000 + 3 x 1 (copies)
    # + 2 x (2 + 5) (sync return, next launch) + 2 = 30,024 us; big_kernel 27,600 us of it
    assert v["window_ms"] == approx(30.024)
    assert v["top_kernel_window_pct"] == approx(27600 / 30024 * 100)
    f = finding(r, "dominant-kernel")
    assert f["severity"] == "warning"
    assert "big_kernel (3 launches, 9.20 ms each, 1 per step; one launch lasts 92% of a step)" in f["message"]


def test_calls_per_step_are_formatted_like_other_numbers(run):
    """big_kernel launched 2, 2, 1 times (4,000 us each) over 3 steps: 5 / 3 = 1.6667 per step,
    printed "1.7 per step" (the MI300 report printed "5.6667 per step"). Kernel time 5 x 4,000 +
    3 x 8 x 100 = 22,400 us: 20,000 / 22,400 = 89.2857% (< 90: info). Steps 8,808, 8,808, 4,808 us
    (kernels + 8 us, as above): median 8,808 us; one launch = 4,000 / 8,808 = 45.4133%."""
    r = run("dominant_kernel_uneven_steps")
    v = r["metrics"]["values"]
    assert v["top_kernel_share_pct"] == approx(20000 / 22400 * 100)
    assert v["top_kernel_calls_per_step"] == approx(5 / 3)
    assert v["top_kernel_instance_share_pct"] == approx(4000 / 8808 * 100)
    f = finding(r, "dominant-kernel")
    assert f["severity"] == "info"
    assert "(5 launches, 4.00 ms each, 1.7 per step; one launch lasts 45% of a step)" in f["message"]
    assert "1.6667" not in f["message"]


def test_nccl_kernel_is_never_the_dominant_kernel(run):
    """Per step: GEMM 2,000 us, 4 x 100 us elementwise, NCCL all-reduce 8,000 us: 10,400 us of
    kernels. The all-reduce has the most time (8,000 / 10,400 = 76.9%, one launch of it 77% of a
    step: the old rule's warning), but a communication kernel waits on other ranks. The top
    compute kernel is the GEMM: 2,000 / 10,400 = 19.2308% (< 50%) -> quiet; its name is the one
    the values (and so the ncu command and the where table) carry."""
    r = run("nccl_kernel_dominates")
    v = r["metrics"]["values"]
    assert r["metrics"]["kernels"]["by_name"][0]["name"].startswith("ncclDevKernel_AllReduce")
    assert v["top_kernel_name"].startswith("sm90_xmma_gemm_bf16bf16")
    assert v["top_kernel_short_name"].startswith("sm90_xmma_gemm_bf16bf16")
    assert v["top_kernel_share_pct"] == approx(2000 / 10400 * 100)
    assert finding(r, "dominant-kernel") is None


@pytest.mark.parametrize("name, nccl, expected", [
    ("ncclDevKernel_Generic", True, True),             # RCCL on MI300: flagged by the reader
    ("ncclKernel_AllReduce_RING_LL_Sum_float", True, True),
    ("void vllm::cross_device_reduce_1stage<float, 8>(...)", False, True),
    ("void c10d::symmetric_memory::one_shot_all_reduce_kernel<float>(...)", False, True),
    ("void c10d::symmetric_memory::multimem_all_reduce_kernel<float>(...)", False, True),
    ("deep_ep::internode::all_to_all_kernel", False, True),
    ("nvshmemi_transfer_rma_kernel", False, True),
    ("void at::native::reduce_kernel<512, 1>(...)", False, False),
    ("void cub::DeviceReduceKernel<...>(...)", False, False),
    ("sm90_xmma_gemm_bf16bf16_bf16f32", False, False),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(...)", False, False),
])
def test_communication_kernel_classifier(name, nccl, expected):
    assert is_communication_kernel(name, nccl) is expected


def test_top_compute_kernel_skips_communication_rows():
    rows = [{"name": "ncclDevKernel_Generic", "is_nccl": True},
            {"name": "void vllm::cross_device_reduce_2stage<half, 8>()", "is_nccl": False},
            {"name": "gemm_kernel", "is_nccl": False}, {"name": "other", "is_nccl": False}]
    assert top_compute_kernel(rows)["name"] == "gemm_kernel"
    assert top_compute_kernel(rows[:2]) is None
    assert top_compute_kernel([]) is None and top_compute_kernel(None) is None


# -- {x:count} --------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, shown", [
    (5.6667, "5.7"), (1.0, "1"), (3, "3"), (1500, "1,500"), (1500.5, "1,500"), (1501.4, "1,501"),
    (99.96, "100.0"), (0.25, "0.2"), (12345678, "12,345,678"),
])
def test_count_spec(value, shown):
    """Whole -> integer with thousands separators; else one decimal below 100, none from 100 on
    (Python rounds half to even: 1,500.5 -> 1,500; 0.25 -> 0.2)."""
    assert text.render("{n:count}", {"n": value}) == shown


def test_count_spec_refuses_text_and_prints_na_for_null():
    assert text.check_spec("top_kernel_name", "count", is_text=True) is not None
    assert text.check_spec("top_kernel_calls_per_step", "count", is_text=False) is None
    assert text.render("{n:count} per step", {"n": None}) == "n/a per step"


# -- tiny-kernels ---------------------------------------------------------------------------------

def test_tiny_kernel_flood_559(run):
    """162 kernels of 200 us (27 each of six names), 279 of 4 us, 118 of 9.3 us: 559 kernels,
    397 under 10 us = 397 / 559 = 71.0197% (>= 60%), 397 >= 100 in the window (no steps).
    Median = the 280th of 559 sorted = 9.3 us; mean = (162 x 200 + 279 x 4 + 118 x 9.3) / 559 =
    34,613.4 / 559 = 61.9202 us. The host launches every 5 us, the GPU runs them back to back
    from the first kernel: window = 34,613.4 us, busy 100%. Impact 397 x 2 us x 100% = 0.794 ms = 2.294% of the
    window (>= 0.5%: fires; < 3%: info). Before issue 46 it needed 1,000 kernels (quiet).
    No kernel name dominates: 27 x 200 = 5,400 us = 15.6% each."""
    r = run("tiny_kernel_flood_559")
    v = r["metrics"]["values"]
    assert v["has_steps"] is False
    assert v["kernel_count"] == 559
    assert v["kernel_under_10us_pct"] == approx(397 / 559 * 100)
    assert v["kernel_median_us"] == approx(9.3)
    assert v["kernel_mean_us"] == approx(34613.4 / 559)
    assert v["window_ms"] == approx(34.6134)
    assert v["gpu_busy_pct"] == approx(100.0)  # back to back: the fixed cost of each counts in full
    f = finding(r, "tiny-kernels")
    assert f is not None
    assert f["impact_ms"] == approx(0.794)
    assert f["severity"] == by_impact(0.794 / 34.6134 * 100) == "info"
    assert ("559 kernels ran with a mean of 61.9 us (median 9.3 us); 71% are shorter than 10 us."
            in f["message"])
    assert "estimated 397 kernels under 10 us per GPU x 2.0 us x 100.0% for the time the GPU is busy" \
        in f["message"]
    assert finding(r, "dominant-kernel") is None


def test_tiny_kernel_rule_docs_params_and_condition_agree():
    """The documented share (60%), floor (100 tiny kernels) and impact floor (0.5%) are the
    params the condition reads; no 1,000-kernel requirement is left in it; the impact counts the
    fixed cost for the share of the window the GPU is busy."""
    from nsysdoc.rules import load_rules

    rule = next(r for r in load_rules().rules if r.id == "tiny-kernels")
    params = {k: p.default for k, p in rule.params.items()}
    assert params["min_tiny_pct"] == 60 and params["min_tiny_kernels"] == 100
    assert params["min_impact_pct"] == 0.5
    assert "min_kernels_per_step" not in params and "max_mean_us" not in params
    for name in ("min_tiny_pct", "min_tiny_kernels", "min_impact_pct"):
        assert name in rule.when.source
    assert "60%" in rule.docs["thresholds"] and "100" in rule.docs["thresholds"]
    assert "gpu_busy_pct" in rule.impact_ms.source


@pytest.mark.parametrize("val, spec, shown", [
    (1800 / 1803 * 100, ".0f", "99"),     # 99.83: "100% are shorter than 10 us" was false
    (99.7, ".0f", "99"), (99.97, ".1f", "99.9"), (99.94, ".1f", "99.9"),
    (99.4, ".0f", "99"), (100.0, ".0f", "100"), (98.6, ".0f", "99"), (12.6, ".0f", "13"),
])
def test_a_share_under_100_never_reads_100(val, spec, shown):
    """Review of issue 46: a number just under 100 is cut, not rounded up, to the precision asked;
    100 itself and numbers that do not reach 100 when rounded are formatted as always."""
    from nsysdoc.rules.text import render

    assert render(f"{{x_pct:{spec}}}", {"x_pct": val}) == shown
