"""Kernel names users can tell apart (docs/glossary.md, "Kernel names"): a generic short name such as
CUTLASS's ``Kernel`` is replaced by a name built from the demangled name, once per distinct pair."""
from __future__ import annotations

import re

import numpy as np
import pytest

from nsysdoc.metrics import kernels as K
from nsysdoc.metrics.kernels import DISPLAY_NAME_MAX, display_name, kernel_tables, kernels_by_name, ncu_kernel_filter
from nsysdoc.testing.scenarios import CUTLASS_GEMMS, cutlass_gemm_family
from nsysdoc.trace.model import StringTable

from .conftest import diagnose_path

CUTLASS2 = ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>"
            "(cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4::Params)")
CUTLASS2_WMMA = ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_h161616gemm_32x32_128x2_tn_align8>"
                 "(cutlass_80_wmma_tensorop_h161616gemm_32x32_128x2_tn_align8::Params)")
LIB3 = "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_void_bf16_128x128x64_1x1x1_0_tnn_align8_warpspecialized_epi_tma"
CUTLASS3_LIBRARY = f"void cutlass::device_kernel<{LIB3}>({LIB3}::Params)"
# a CUTLASS 3 GEMM built in place (no named type): cluster shape 2x1x1 before the 128x256x64 tile
CUTLASS3_INLINE = (
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
    "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized<2, "
    "cute::tuple<cute::C<2>, cute::C<1>, cute::C<1> >, cutlass::gemm::KernelTmaWarpSpecializedCooperative>, "
    "cute::tuple<cute::C<128>, cute::C<256>, cute::C<64> >, cutlass::bfloat16_t, cute::tuple<long, cute::C<1>, long>, "
    "cutlass::bfloat16_t, cute::tuple<long, cute::C<1>, long> >, void, void> >"
    "(cutlass::gemm::kernel::GemmUniversal<void>::Params)")
# FlashAttention-3: a wrapper template around the kernel's own type
FA3 = ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<"
       "2, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cute::tuple<cute::C<128>, cute::C<80>, cute::C<256> >, 256, "
       "cutlass::bfloat16_t, float, cutlass::arch::Sm90, false>, flash::CollectiveEpilogueFwd<int> > > >(int)")
# nsys's older demangler spells integer template arguments "int=128"
CUTLASS2_INLINE = ("void cutlass::Kernel<cutlass::gemm::kernel::Gemm<cutlass::gemm::threadblock::MmaPipelined<"
                   "cutlass::gemm::GemmShape<int=128,int=128,int=8>,cutlass::transform::threadblock::PredicatedTileIterator<"
                   "cutlass::MatrixShape<int=128,int=8>,float,cutlass::layout::RowMajor,int=1>,"
                   "cutlass::gemm::warp::MmaSimtPolicy<int> > > >(int)")
GEMVX = "void gemvx::kernel<int, int, float, float, float, float, false, true, 7>(int)"


@pytest.mark.parametrize("short, demangled, want", [
    ("Kernel", CUTLASS2, "cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>"),
    ("Kernel2", CUTLASS2_WMMA, "cutlass::Kernel2<cutlass_80_wmma_tensorop_h161616gemm_32x32_128x2_tn_align8>"),
    ("device_kernel", CUTLASS3_LIBRARY, f"cutlass::device_kernel<{LIB3}>"),
    ("device_kernel", CUTLASS3_INLINE,
     "cutlass::device_kernel<GemmUniversal bfloat16_t 128x256x64 KernelTmaWarpSpecializedCooperative>"),
    ("device_kernel", FA3, "cutlass::device_kernel<FlashAttnFwdSm90 bfloat16_t 128x80x256>"),
    ("Kernel", CUTLASS2_INLINE, "cutlass::Kernel<Gemm float 128x128x8 MmaSimtPolicy MmaPipelined>"),
    # built-in or numeric first argument: the argument list without namespaces
    ("kernel", GEMVX, "gemvx::kernel<int, int, float, float, float, float, false, true, 7>"),
    # not generic: unchanged, whatever the demangled name says
    ("elementwise_kernel", "void at::native::elementwise_kernel<128, 2>(int)", "elementwise_kernel"),
    ("sm80_xmma_gemm_f32f32", "sm80_xmma_gemm_f32f32", "sm80_xmma_gemm_f32f32"),
    # a Triton kernel called "kernel": nothing to build a name from
    ("kernel", "kernel", "kernel"),
    # the short name is not the demangled name's function: not ours to rename
    ("Kernel", "void foo::bar<int>(int)", "Kernel"),
    # not demangled (a mangled name)
    ("Kernel", "_ZN7cutlass6KernelI4TypeEEvNT_6ParamsE", "Kernel"),
])
def test_display_name_of_hand_written_names(short, demangled, want):
    assert display_name(short, demangled) == want


def test_display_names_of_the_three_cutlass_gemms_differ():
    names = {display_name("Kernel", n) for n in CUTLASS_GEMMS}
    assert len(names) == 3 and all(n.startswith("cutlass::Kernel<cutlass_80_") for n in names)


def test_absurdly_long_names_are_cut():
    inner = "cutlass_80_tensorop_" + "x" * 5000
    got = display_name("Kernel", f"void cutlass::Kernel<{inner}>(int)")
    assert len(got) == DISPLAY_NAME_MAX and got.endswith("…>") and got.startswith("cutlass::Kernel<cutlass_80_tensorop_xxx")
    # a demangled name over 64 KiB is not read at all
    huge = "void cutlass::Kernel<" + "a::" * 30_000 + "T>(int)"
    assert display_name("Kernel", huge) == "Kernel"
    # long template arguments of numbers are cut too
    many = "void gemvx::kernel<" + ", ".join(["1234567"] * 200) + ">(int)"
    assert len(display_name("kernel", many)) == DISPLAY_NAME_MAX


def test_html_characters_stay_plain_text():
    """The display name keeps the characters of the demangled name; escaping is the renderer's job."""
    assert display_name("kernel", 'void gemvx::kernel<int, &b<"c">>(int)') == 'gemvx::kernel<int, &b<"c">>'


def test_ncu_filter_selects_the_kernels_of_a_display_name():
    """The pattern of a name built from a plain type name matches its demangled name and not the
    other two GEMMs' (Python's re reads these patterns as ncu's ECMAScript regex does)."""
    for i, full in enumerate(CUTLASS_GEMMS):
        base, pattern = ncu_kernel_filter(display_name("Kernel", full))
        assert base == "demangled" and pattern.startswith("regex:")
        hits = [bool(re.search(pattern[len("regex:"):], other)) for other in CUTLASS_GEMMS]
        assert hits == [j == i for j in range(3)]
    # a built name that is not spelled as is in the demangled name: every kernel of the short name
    assert ncu_kernel_filter(display_name("device_kernel", CUTLASS3_INLINE)) == ("function", "regex:^device_kernel$")
    assert ncu_kernel_filter("volta_sgemm_128x64_nn") == ("function", "regex:^volta_sgemm_128x64_nn$")


# ---------------------------------------------------------------------------------------------
# grouping by display name: the same table as grouping the kernels by their display strings
# ---------------------------------------------------------------------------------------------
FULL = [CUTLASS2, CUTLASS2_WMMA, CUTLASS3_LIBRARY, CUTLASS3_INLINE, FA3, CUTLASS2_INLINE, GEMVX,
        "void at::native::elementwise_kernel<128, 2>(int)", "volta_sgemm_128x64_nn",
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        # two full names whose display names are equal: one row
        "void cutlass::Kernel<ns::SameOp>(int)", "void cutlass::Kernel<other::SameOp>(int)"]


def _short_of(full: str) -> str:
    from nsysdoc.trace.kineto import short_kernel_name
    return short_kernel_name(full)


@pytest.mark.parametrize("seed", range(12))
def test_grouping_by_display_name_equals_grouping_by_its_strings(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.choice([1, 40, 5000]))
    shorts = sorted({_short_of(f) for f in FULL} | {"Kernel"})
    strings = FULL + shorts
    ids = np.arange(100, 100 + len(strings)) * 3  # sparse string ids
    table = StringTable(ids, np.array(strings, dtype=object))
    name_ids = ids[:len(FULL)]
    short_ids = np.sort(ids[len(FULL):])
    short_str = {int(i): s for i, s in zip(ids, strings)}
    full = rng.integers(0, len(FULL), n)
    short = np.searchsorted(short_ids, [ids[len(FULL) + shorts.index(_short_of(FULL[f]))] for f in full])
    if seed % 2:  # some kernels of a CUTLASS GEMM carry another (non-generic) short name
        flip = (rng.random(n) < 0.2) & (full == 0)
        short = np.where(flip, int(np.searchsorted(short_ids, ids[len(FULL) + shorts.index("volta_sgemm_128x64_nn")])),
                         short)
    full, short = full.astype(np.uint16), short.astype(np.uint16)
    dur = rng.integers(1, 40_000, n).astype(np.uint32)
    nccl = np.array(["nccl" in FULL[f] for f in full])
    by_short, by_name = kernel_tables(full, short, dur, table, nccl, name_ids, short_ids, short_limit=50)
    # by hand: each kernel's display string, grouped as strings
    disp = [display_name(short_str[int(short_ids[s])], FULL[f]) for f, s in zip(full.tolist(), short.tolist())]
    uniq = sorted(set(disp))
    want_names = StringTable(np.arange(len(uniq)), np.array(uniq, dtype=object))
    codes = np.array([uniq.index(d) for d in disp], dtype=np.uint16)
    want = kernels_by_name(codes, dur, want_names, nccl, limit=50)
    got = by_short.to_pandas().sort_values(["total_ms", "name"], ascending=[False, True]).reset_index(drop=True)
    exp = want.to_pandas().sort_values(["total_ms", "name"], ascending=[False, True]).reset_index(drop=True)
    import pandas as pd
    pd.testing.assert_frame_equal(got, exp)
    assert len(by_name) == len(set(full.tolist()))
    # the two SameOp kernels share one row; every CUTLASS GEMM present has its own row
    assert set(by_short["name"]) == set(disp)


def test_display_names_are_built_once_per_distinct_pair(monkeypatch):
    calls = []
    real = K.display_name
    monkeypatch.setattr(K, "display_name", lambda s, d: calls.append((s, d)) or real(s, d))
    names = StringTable(np.array([1, 2, 3, 4, 5]), np.array([CUTLASS2, CUTLASS2_WMMA, "gemm_a", "Kernel", "Kernel2"],
                                                            dtype=object))
    full = np.tile(np.array([0, 1, 2], dtype=np.uint16), 200_000)
    short = np.tile(np.array([0, 1, 2], dtype=np.uint16), 200_000)  # codes into [4, 5, 3]
    dur = np.full(len(full), 1000, dtype=np.uint32)
    by_short, _ = kernel_tables(full, short, dur, names, None, np.array([1, 2, 3]), np.array([4, 5, 3]))
    assert sorted(calls) == sorted([("Kernel", CUTLASS2), ("Kernel2", CUTLASS2_WMMA)])
    assert sorted(by_short["count"].tolist()) == [200_000] * 3
    # without a generic short name nothing is built and the rows are the short names
    calls.clear()
    plain = StringTable(np.array([1, 2, 3]), np.array(["a<int>", "b<int>", "gemm_a"], dtype=object))
    by_short, _ = kernel_tables(full, short, dur, plain, None, np.array([1, 2, 3]), np.array([1, 2, 3]))
    assert calls == [] and sorted(by_short["name"]) == ["a<int>", "b<int>", "gemm_a"]


# ---------------------------------------------------------------------------------------------
# the fixture scenario, end to end (nsys export and PyTorch Profiler trace)
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def family(tmp_path_factory):
    d = tmp_path_factory.mktemp("cutlass-family")
    cap = cutlass_gemm_family()
    return {"sqlite": diagnose_path(cap.write(d / "c.sqlite")),
            "kineto": diagnose_path(cap.write_kineto(d / "c.pt.trace.json.gz"))}


@pytest.mark.parametrize("form", ["sqlite", "kineto"])
def test_three_cutlass_gemms_named_kernel_are_three_rows(family, form):
    steps, gemm_us, calls = 4, (900.0, 600.0, 300.0), (2, 1, 3)  # cutlass_gemm_family's defaults
    rows = {r["name"]: r for r in family[form]["metrics"]["kernels"]["by_short_name"]}
    for full, us, n in zip(CUTLASS_GEMMS, gemm_us, calls):
        inner = re.search(r"Kernel<(\w+)>", full).group(1)
        r = rows[f"cutlass::Kernel<{inner}>"]
        assert r["count"] == steps * n
        assert r["total_ms"] == pytest.approx(steps * n * us / 1000)
        assert r["median_us"] == pytest.approx(us)
    assert "Kernel" not in rows and len(rows) == 4  # the three GEMMs and the elementwise kernel
    names = {r["name"] for r in family[form]["metrics"]["kernels"]["names"]}
    assert names == set(rows)
    # the top kernel (900 µs x 2 per step) is named so in the values, and its ncu command selects it
    v = family[form]["metrics"]["values"]
    assert v["top_kernel_short_name"] == "cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>"
    verify = {f["rule"]: f for f in family[form]["findings"]}["dominant-kernel"]["verify"]
    base, pattern = ncu_kernel_filter(v["top_kernel_short_name"])
    assert f"ncu --kernel-name-base demangled --kernel-name '{pattern}'" in verify


def test_diff_matches_kernels_by_display_name(tmp_path):
    """The candidate's SIMT GEMM runs in half the time: its row (and only its) moves, by
    3 calls x 150 µs = 0.45 ms per step; the other two GEMMs named "Kernel" are matched unchanged."""
    from nsysdoc.compare import compare

    base = diagnose_path(cutlass_gemm_family().write(tmp_path / "a.sqlite"))
    cand = diagnose_path(cutlass_gemm_family(gemm_us=(900.0, 600.0, 150.0)).write(tmp_path / "b.sqlite"))
    rows = {k["name"]: k for k in compare(base, cand)["kernels"]}
    shown = [display_name("Kernel", n) for n in CUTLASS_GEMMS]
    assert all(rows[n]["status"] == "matched" for n in shown) and "Kernel" not in rows
    assert rows[shown[2]]["delta_ms_per_step"] == pytest.approx(-0.45)
    assert rows[shown[0]]["delta_ms_per_step"] == pytest.approx(0.0)
    assert rows[shown[1]]["delta_ms_per_step"] == pytest.approx(0.0)


def test_report_escapes_display_names(tmp_path):
    """A kernel under a generic short name whose template arguments carry HTML: the page shows the
    built name escaped."""
    from nsysdoc.analysis import analyze
    from nsysdoc.views import render_html
    from nsysdoc.testing import Capture
    from nsysdoc.trace import load_trace

    evil = 'void gemvx::kernel<int, &b, "</td><script>alert(1)</script>">(int)'
    cap = Capture()
    t = cap.process(pid=1).thread()
    for i in range(3):
        with t.range(f"ProfilerStep#{i}"):
            t.launch(evil, 5000, short_name="kernel")
            t.item()
    a = analyze(load_trace(cap.write(tmp_path / "e.sqlite"), cache=False))
    shown = a.to_dict()["metrics"]["kernels"]["by_short_name"][0]["name"]
    assert shown == 'gemvx::kernel<int, &b, "</td><script>alert(1)</script>">'
    html = render_html(a)
    assert "<script>alert(1)</script>" not in html
    assert ">gemvx::kernel&lt;int, &amp;b, &#34;&lt;/td&gt;&lt;script&gt;alert(1)&lt;/script&gt;&#34;&gt;</td>" in html


def test_timeline_spans_carry_display_names(tmp_path):
    from nsysdoc.analysis import analyze
    from nsysdoc.metrics.timeline import step_timeline
    from nsysdoc.trace import load_trace

    a = analyze(load_trace(cutlass_gemm_family().write(tmp_path / "c.sqlite"), cache=False))
    spans = [s for d in step_timeline(a)["devices"] for lane in d["lanes"] for s in lane["spans"] if s["kind"] == "kernel"]
    assert {s["name"] for s in spans} == {display_name("Kernel", n) for n in CUTLASS_GEMMS} | {"vectorized_elementwise_kernel"}
