"""Operators by input shape and input shapes across steps (issue 47, item 2; glossary "Operators
by input shape", "Input shapes across steps", "Convolution kernel share").

Every expected number is computed by hand from ``nsysdoc/testing/shape_scenarios.py`` and the
builder's timing model (header of ``tests/test_judgement_scenarios.py``), never from the tool:

``conv_shapes_per_step`` (defaults: 5 steps, batch 17 instead of 32 in step 3, convolution kernel
20 ms, 35 ms in step 3, ReLU kernel 0.2 ms). A step pushed at ``s``:

* ``aten::conv2d`` range ``[s, s+7000)``: 1 µs in, the launch ``[s+1000, s+6000)``, 1 µs out;
  its kernel ``[s+6000, s+6000+K)``;
* ``aten::relu`` range ``[s+7000, s+14000)``; its launch at ``s+8000`` ends at ``s+13000``, its
  kernel waits for the convolution: ``[s+6000+K, s+6000+K+200000)``;
* ``item()``: the copy API ``[s+14000, s+20000)``, the 1 µs copy after the ReLU kernel, the
  ``cudaStreamSynchronize`` until copy end + 2 µs = ``s+K+209000``: the step lasts ``K + 209 µs``:
  20.209 ms, 35.209 ms in step 3. Window = 4 x 20.209 + 35.209 = 116.045 ms.
"""
from __future__ import annotations

import gzip
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from nsysdoc.testing.builder import Capture  # noqa: E402
from nsysdoc.testing.shape_scenarios import conv_shapes_per_step  # noqa: E402
from nsysdoc.trace import kineto as K  # noqa: E402
from nsysdoc.trace.nvtx_text import canonical_sizes, sizes_of, sizes_text  # noqa: E402
from tests.conftest import SHARED_TRACES, diagnose_path  # noqa: E402
from tests.conftest import needs_shared, skip_without_shared  # noqa: E402  (issue 49)

KINETO = SHARED_TRACES / "kineto"
FORMS = ("nsys", "kineto")
A = 6e-5


def approx(x, tol=A):
    return pytest.approx(x, abs=tol)


def _write(cap: Capture, tmp_path: Path, form: str) -> Path:
    if form == "nsys":
        return cap.write(tmp_path / "t.sqlite")
    return cap.write_kineto(tmp_path / "t.pt.trace.json")


def _by_shape(result: dict) -> dict:
    return {(r["name"], json.dumps(r["input_dims"])): r for r in result["metrics"]["operators_by_shape"]["rows"]}


def _values(result: dict) -> dict:
    return result["metrics"]["values"]


def _finding(result: dict, rule: str):
    got = [f for f in result["findings"] if f["rule"] == rule]
    return got[0] if got else None


# ---------------------------------------------------------------------------------------------
# 1. the shapes text
# ---------------------------------------------------------------------------------------------
def test_shapes_text_is_the_json_with_comma_space_and_refuses_what_is_not_shapes():
    assert sizes_text([[2, 1, 128], [], []]) == "[[2, 1, 128], [], []]"
    assert sizes_text([[[2, 3], [4]], []]) == "[[[2, 3], [4]], []]"      # a tensor list's shapes
    assert sizes_text([]) == "[]"
    for bad in (None, "x", [[1.5]], [[None]], [None], [3], [[True]], [["2"]], [[[[1]]]], [[1 << 63]]):
        assert sizes_text(bad) is None, bad
    assert sizes_text([[1] * 400]) is None                                # longer than 1,000 characters
    assert canonical_sizes("[[10000,768],  [4, 512]]") == "[[10000, 768], [4, 512]]"
    assert canonical_sizes("[[1, 2]") is None
    # emit_nvtx's text: the shapes end where the next per-call field starts
    assert sizes_of("aten::index, seq = 10290, op_id = 71792, sizes = [[10000, 768], [4, 512]], "
                    "input_op_ids = [(16,0), (2333,0)]") == "[[10000, 768], [4, 512]]"
    assert sizes_of("aten::mm, sizes = [[2, 3], [3, 4]], stack = f.py(3): g") == "[[2, 3], [3, 4]]"
    assert sizes_of("aten::mm, seq = 3") is None


# ---------------------------------------------------------------------------------------------
# 2. operators_by_shape: a two-shape operator, both formats
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("form", FORMS)
def test_a_two_shape_operator_has_one_row_per_shape(tmp_path, form):
    # aten::conv2d: 4 calls with batch 32 (20 ms kernel each) and 1 with batch 17 (35 ms); each
    # range 7 µs with no child operator: self CPU = CPU = 7 µs per call. aten::relu: 0.2 ms each.
    r = diagnose_path(_write(conv_shapes_per_step(), tmp_path, form))
    ob = r["metrics"]["operators_by_shape"]
    assert ob["source"] == ("nvtx" if form == "nsys" else "kineto") and ob["missing"] is None
    assert ob["row_count"] == 4
    rows = _by_shape(r)
    conv32 = rows[("aten::conv2d", "[[32, 3, 224, 224], [64, 3, 7, 7]]")]
    conv17 = rows[("aten::conv2d", "[[17, 3, 224, 224], [64, 3, 7, 7]]")]
    assert (conv32["calls"], conv32["kernels"]) == (4, 4)
    assert conv32["self_gpu_ms"] == approx(80.0) and conv32["gpu_ms"] == approx(80.0)
    assert conv32["self_cpu_ms"] == approx(0.028) and conv32["cpu_ms"] == approx(0.028)
    assert (conv17["calls"], conv17["kernels"]) == (1, 1)
    assert conv17["self_gpu_ms"] == approx(35.0) and conv17["cpu_ms"] == approx(0.007)
    relu32 = rows[("aten::relu", "[[32, 64, 112, 112]]")]
    relu17 = rows[("aten::relu", "[[17, 64, 112, 112]]")]
    assert (relu32["calls"], relu32["self_gpu_ms"], relu17["calls"], relu17["self_gpu_ms"]) == \
        (4, approx(0.8), 1, approx(0.2))
    # by self GPU time: conv 80, conv 35, relu 0.8, relu 0.2
    assert [(x["name"], x["calls"]) for x in ob["rows"]] == \
        [("aten::conv2d", 4), ("aten::conv2d", 1), ("aten::relu", 4), ("aten::relu", 1)]


def _nested_capture() -> Capture:
    """Two steps of ``aten::linear`` ([[8, 4]]) holding ``aten::addmm`` (a 100 µs kernel) and, in
    step 1, an ``aten::linear`` of another shape ([[2, 4]]) inside it holding a 50 µs kernel."""
    cap = Capture()
    t = cap.process(pid=4720).thread()
    for i in range(2):
        with t.range(f"ProfilerStep#{i}"):
            with t.op("aten::linear", shapes=[[8, 4]]):
                with t.op("aten::addmm", shapes=[[8], [8, 4], [4, 4]]):
                    t.launch("gemm_kernel", 100)
                if i == 1:
                    with t.op("aten::linear", shapes=[[2, 4]]):
                        t.launch("small_gemm_kernel", 50)
            t.item()
    return cap


@pytest.mark.parametrize("form", FORMS)
def test_rows_of_a_name_add_up_to_its_operator_view_row(tmp_path, form):
    """The operator view's definitions per (name, shapes): a name's rows sum to its row there,
    a call nested in a call of its name (other shapes) included in calls and self times, left
    out of the inclusive ones."""
    r = diagnose_path(_write(_nested_capture(), tmp_path, form))
    ops = {x["name"]: x for x in r["metrics"]["operators"]["rows"]}
    rows = r["metrics"]["operators_by_shape"]["rows"]
    for name in ("aten::linear", "aten::addmm"):
        mine = [x for x in rows if x["name"] == name]
        for key in ("calls", "self_gpu_ms", "gpu_ms", "self_cpu_ms", "cpu_ms", "kernels"):
            assert sum(x[key] for x in mine) == approx(ops[name][key], 2e-4), (name, key)
    by = _by_shape(r)
    outer, inner = by[("aten::linear", "[[8, 4]]")], by[("aten::linear", "[[2, 4]]")]
    # outer: 2 calls; self GPU none (addmm's 100 µs is its child's, the 50 µs kernel the inner
    # linear's own); GPU total: 2 x 100 + 50 = 250 µs. inner: 1 call, self GPU 50 µs, and no
    # inclusive GPU or CPU time of its own (inside a call of its name)
    assert (outer["calls"], outer["self_gpu_ms"], outer["gpu_ms"]) == (2, approx(0.0), approx(0.25))
    assert (inner["calls"], inner["self_gpu_ms"], inner["gpu_ms"], inner["cpu_ms"]) == \
        (1, approx(0.05), approx(0.0), approx(0.0))


def test_missing_says_which_switch_records_shapes(tmp_path):
    for form, switch in (("nsys", "autograd-shapes-nvtx"), ("kineto", "record_shapes=True")):
        r = diagnose_path(_write(conv_shapes_per_step(record_shapes=False), tmp_path, form))
        ob = r["metrics"]["operators_by_shape"]
        assert ob["rows"] == [] and switch in ob["missing"]
        assert _values(r)["operator_shapes_recorded"] is False
        assert _values(r)["shape_changing_op_count"] is None


# ---------------------------------------------------------------------------------------------
# 3. input shapes across steps (rule dynamic-shapes) and fixed convolution shapes (cudnn-benchmark)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("form", FORMS)
def test_shapes_varying_in_step_3_only(tmp_path, form):
    # conv2d and relu both run batch 17 in step 3 only (interior): usual set in steps 0, 1, 2, 4.
    # Usual interior steps 1, 2: median 20.209 ms; step 3: 35.209 ms -> 15.0 ms; 15 / 116.045 = 12.926%
    r = diagnose_path(_write(conv_shapes_per_step(), tmp_path, form))
    v = _values(r)
    assert (v["shape_steps_compared"], v["shape_changing_op_count"], v["shape_changing_steps"]) == (5, 2, 1)
    assert v["shape_change_ms"] == approx(15.0)
    assert v["shape_modal_step_ms"] == approx(20.209) and v["shape_changed_step_ms"] == approx(35.209)
    assert v["shape_change_pct"] == approx(15.0 / 116.045 * 100, 1e-3)
    assert v["shape_change_note"] == (
        "aten::conv2d: [[32, 3, 224, 224], [64, 3, 7, 7]] in 4 steps, [[17, 3, 224, 224], [64, 3, 7, 7]] in "
        "ProfilerStep#3; aten::relu: [[32, 64, 112, 112]] in 4 steps, [[17, 64, 112, 112]] in ProfilerStep#3")
    f = _finding(r, "dynamic-shapes")
    assert f is not None and f["impact_ms"] == approx(15.0) and f["severity"] == "warning"
    assert "ProfilerStep#3" in f["message"] and "[[17, 3, 224, 224]" in f["message"]
    assert "In 1 of the 5 steps, 2 operator(s) ran" in f["message"]
    # the convolution's shapes change: no cudnn.benchmark hint; 115 of 116 ms are convolution
    assert v["conv_shapes_fixed"] is False and _finding(r, "cudnn-benchmark") is None
    assert v["conv_kernel_share_pct"] == approx(115 / 116 * 100, 1e-3)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("args", [{"odd_step": None}, {"odd_step": None, "first_conv_us": 80_000},
                                  {"odd_step": 0}, {"odd_step": 4}],
                         ids=["same_shapes", "slow_first_step", "other_shapes_in_first_step",
                              "other_shapes_in_last_step"])
def test_quiet_without_a_change_in_an_interior_step(tmp_path, form, args):
    r = diagnose_path(_write(conv_shapes_per_step(**args), tmp_path, form))
    v = _values(r)
    assert v["shape_changing_op_count"] == 0 and v["shape_change_ms"] == approx(0.0)
    assert _finding(r, "dynamic-shapes") is None
    conv = 80 + 4 * 20 if args.get("first_conv_us") else (5 * 20 if args["odd_step"] is None else 4 * 20 + 35)
    assert v["conv_kernel_share_pct"] == approx(conv / (conv + 1) * 100, 1e-3)
    if args["odd_step"] is not None:
        # other convolution shapes in the first or last step: the shapes are not the same in every
        # step, so no "same input shapes in each of the 5 steps" hint
        assert v["conv_shapes_fixed"] is False and _finding(r, "cudnn-benchmark") is None
        return
    # fixed convolution shapes and 100 of 101 ms (or, slow first: 160 of 161 ms) of convolution
    assert v["conv_shapes_fixed"] is True
    f = _finding(r, "cudnn-benchmark")
    assert f is not None and f["severity"] == "info" and f["impact_ms"] is None
    assert "torch.backends.cudnn.benchmark" in f["message"] and "does not say" in f["message"]


@pytest.mark.parametrize("form", FORMS)
def test_new_shapes_in_every_step_have_no_usual_step_to_compare_with(tmp_path, form):
    # a variable-length loop: aten::mm gets [32, L, 768] with L = 100..107, a new length in each of
    # 8 steps; the GEMM takes 20/20/30/20/30/20/30/20 ms. Every interior step (1..6) differs, so
    # there is no usual step: the cost is not judged (0 ms, no median of usual steps) and the rule
    # stays quiet instead of comparing the median of the changed steps (25 ms) with itself.
    cap = Capture()
    t = cap.process(pid=4710).thread()
    for i, us in enumerate([20_000, 20_000, 30_000, 20_000, 30_000, 20_000, 30_000, 20_000]):
        with t.range(f"ProfilerStep#{i}"):
            with t.op("aten::mm", shapes=[[32, 100 + i, 768], [768, 768]]):
                t.launch("ampere_sgemm_128x64_tn", us)
            t.item()
    r = diagnose_path(_write(cap, tmp_path, form))
    v = _values(r)
    assert (v["shape_steps_compared"], v["shape_changing_op_count"], v["shape_changing_steps"]) == (8, 1, 6)
    assert v["shape_change_ms"] == approx(0.0) and v["shape_modal_step_ms"] is None
    assert _finding(r, "dynamic-shapes") is None


def test_a_change_that_costs_no_time_is_quiet(tmp_path):
    # batch 17 in step 3, but the kernel takes the usual 20 ms: no step is slower
    r = diagnose_path(_write(conv_shapes_per_step(odd_conv_us=20_000), tmp_path, "kineto"))
    v = _values(r)
    assert v["shape_changing_op_count"] == 2 and v["shape_change_ms"] == approx(0.0)
    assert _finding(r, "dynamic-shapes") is None


# ---------------------------------------------------------------------------------------------
# 4. the Kineto reader: every engine reads the shapes alike; old cache entries are rebuilt
# ---------------------------------------------------------------------------------------------
ODD_DIMS = ['[[2, 1, 128], [], []]', '[[1.5], []]', '[[null]]', '[null]', '[3, [2]]', '[[[2, 3], [4]], []]',
            '"[[2]]"', '[[true]]', '[]', '{"a": 1}', '[[' + ", ".join(["7"] * 400) + ']]',
            '[[9223372036854775808]]', '[[-1, 0]]', 'null',
            # issue 47 review: a tensor list of 3,000 tensors (27 KB: refused before decoding); 3,000
            # blanks inside a short value (kept: the blanks are not the value); 331 times -0 (997
            # characters written as 0: kept), then 334 (1,004: refused)
            json.dumps([[1, 2, 3]] * 3000), '[[2,' + ' ' * 3000 + '3]]',
            '[[' + ','.join(['-0'] * 166) + '], [' + ','.join(['-0'] * 165) + ']]',
            '[[' + ','.join(['-0'] * 334) + ']]']


def test_a_huge_input_dims_is_refused_without_being_decoded_or_walked(monkeypatch):
    """A tensor list of 300,000 shapes (2.7 MB written): its text would pass the 1,000-character cap
    by far, so the msgspec path never decodes it and sizes_text never walks it - the answer (no
    shapes) is known from its length. A short value is still decoded."""
    from nsysdoc.trace import nvtx_text

    huge = [[1, 2, 3]] * 300_000
    calls = []
    monkeypatch.setattr(K.parse_msgspec, "_DIMS_DECODE",  # (the msgspec engine decodes the shapes)
                        lambda text: calls.append(len(text)) or json.loads(text))
    assert K._dims_texts([json.dumps(huge).encode(), b"[[2, 3]]"]) == [None, "[[2, 3]]"]
    assert calls == [8]
    walked = []
    real = nvtx_text._shape_item
    monkeypatch.setattr(nvtx_text, "_shape_item", lambda x: walked.append(1) or real(x))
    assert nvtx_text.sizes_text(huge) is None and nvtx_text.sizes_text([[1] * 400]) is None and not walked
    # the bound is tight: [[1, ..., 1]] with 332 ones is 4 + 332 + 2 x 331 = 998 characters (kept)
    assert nvtx_text.sizes_text([[1] * 332]) == json.dumps([[1] * 332]) and len(json.dumps([[1] * 332])) == 998


def test_every_engine_reads_the_same_shapes(tmp_path, monkeypatch):
    """Ops with ordinary and odd ``Input Dims`` (floats, nulls, a scalar, a tensor list, text,
    booleans, an object, a text over 1,000 characters, an integer past int64) among ordinary events:
    the slow path's names and rows from the msgspec and pyarrow paths, in small and large windows."""
    from tests.test_kineto import _read, _with_events

    text = conv_shapes_per_step().write_kineto(tmp_path / "k.json").read_text()
    evs = [f'{{"ph": "X", "cat": "cpu_op", "name": "aten::odd{i}", "pid": 4710, "tid": 4710, "ts": {10 + i}.000, '
           f'"dur": 0.500, "args": {{"External id": {900 + i}, "Input Dims": {d}}}}}' for i, d in enumerate(ODD_DIMS)]
    path = _with_events(tmp_path / "odd.json", text, evs, after=30)
    slow = _read(path, monkeypatch, mode="slow")[0]
    assert isinstance(slow, dict)
    names = [n for n in slow["names"] if n.startswith("aten::odd")]
    assert "aten::odd0, sizes = [[2, 1, 128], [], []]" in names
    assert "aten::odd5, sizes = [[[2, 3], [4]], []]" in names and "aten::odd8, sizes = []" in names
    assert "aten::odd12, sizes = [[-1, 0]]" in names
    for i in (1, 2, 3, 4, 6, 7, 9, 10, 11, 13):  # not shapes: the bare name
        assert f"aten::odd{i}" in names, i
    assert any(", sizes = [[32, 3, 224, 224], [64, 3, 7, 7]]" in n for n in slow["names"])
    arrow_windows = 0
    for window in (None, 600, 3000):
        got, paths = _read(path, monkeypatch, window=window)
        assert got == slow, window
        arrow_windows += paths["arrow"]
        assert _read(path, monkeypatch, window=window, mode="msgspec")[0] == slow
    assert arrow_windows > 0
    # an ordinary trace (no odd values) is read by pyarrow with its shapes
    plain, paths = _read(tmp_path / "k.json", monkeypatch, window=3000)
    assert paths["arrow"] > 0 and plain == _read(tmp_path / "k.json", monkeypatch, mode="slow")[0]


def test_cache_entries_of_the_reader_before_shapes_are_rebuilt(tmp_path, monkeypatch):
    from nsysdoc.trace.cache_entry import wait_for_cache_writes

    path = conv_shapes_per_step().write_kineto(tmp_path / "c.pt.trace.json")
    cache = tmp_path / "cache"
    with monkeypatch.context() as m:
        # 5: the reader's version before it kept shapes (and its entry had no ", sizes = " texts)
        m.setattr(K.load, "KINETO_FORMAT", 5)  # (the loader's cache key)
        for engine in (K.parse_slow, K.parse_msgspec):  # (the engines that call sizes_text)
            m.setattr(engine, "_sizes_text", lambda v: None)
        K.load_kineto(path, cache_dir=cache)
        wait_for_cache_writes()
        assert K.load_kineto(path, cache_dir=cache).from_cache  # the old version reads its own entry
    t = K.load_kineto(path, cache_dir=cache)
    assert not t.from_cache
    # (the operator texts are the NVTX table's: the string table keeps the names an id column holds)
    texts = t.store["nvtx"].read_all(["text"])["text"].to_pylist()
    assert any(", sizes = " in str(s) for s in texts)


# ---------------------------------------------------------------------------------------------
# 5. the page: a table, trace text escaped
# ---------------------------------------------------------------------------------------------
def test_page_shows_the_table_and_escapes_operator_names(tmp_path):
    import nsysdoc

    cap = Capture()
    t = cap.process(pid=4730).thread()
    for i in range(3):
        with t.range(f"ProfilerStep#{i}"):
            with t.op("aten::<script>alert(1)</script>", shapes=[[4, 4]]):
                t.launch("gemm_kernel", 100)
            t.item()
    rep = nsysdoc.report(str(_write(cap, tmp_path, "kineto")), no_config=True, cache=False)
    html = rep.to_html()
    assert rep.operators_by_shape["input_dims"].tolist() == ["[[4, 4]]"]
    assert 'id="operators-by-shape"' in html and "[[4, 4]]" in html
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


# ---------------------------------------------------------------------------------------------
# 6. the real PyTorch Profiler traces: call counts against a few lines of independent JSON code
# ---------------------------------------------------------------------------------------------
def _independent_counts(path: Path) -> Counter:
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    c: Counter = Counter()
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "Operator"):
            dims = (e.get("args") or {}).get("Input Dims")
            c[(e.get("name"), json.dumps(dims) if dims is not None else "null")] += 1
    return c


@needs_shared()
@pytest.mark.parametrize("name", ["kineto_resnet50_v100_oldformat.pt.trace.json.gz", "hta_a100_rank3of8.pt.trace.json.gz"])
def test_real_trace_calls_per_operator_and_shapes(name):
    path = KINETO / name
    skip_without_shared("kineto/" + name)
    r = diagnose_path(path)
    rows = r["metrics"]["operators_by_shape"]["rows"]
    assert len(rows) == 500  # 580 and 1,718 (operator, shapes) pairs: the first 500 by self GPU time
    counts = _independent_counts(path)
    for x in rows[:50]:
        assert counts[(x["name"], json.dumps(x["input_dims"]))] == x["calls"], x["name"]
    if name.startswith("kineto_resnet50"):
        # batch 32 of 224 x 224 images in all 6 steps; cuDNN kernels are most of the kernel time
        top = rows[0]
        assert (top["name"], top["input_dims"][0], top["calls"]) == \
            ("aten::cudnn_batch_norm_backward", [32, 256, 56, 56], 24)
        v = _values(r)
        assert v["conv_shapes_fixed"] is True and v["shape_changing_op_count"] == 0
        assert v["conv_kernel_share_pct"] > 50
        assert _finding(r, "cudnn-benchmark") is not None and _finding(r, "dynamic-shapes") is None
    else:
        # a recommender: sparse-feature sizes change every step, the steps' times barely (< 1% of the window)
        v = _values(r)
        assert v["shape_changing_op_count"] > 0 and v["shape_change_pct"] < 1
        assert _finding(r, "dynamic-shapes") is None and _finding(r, "cudnn-benchmark") is None


@pytest.mark.parametrize("scenario", ["conv", "nested"])
def test_every_attribution_path_gives_the_same_rows(tmp_path, monkeypatch, scenario):
    """An nsys export attributed slice by slice (slices of 5 NVTX rows: ranges open across slice
    ends), or over the whole capture at once, and the same capture as a PyTorch Profiler trace:
    the same (name, shapes) rows, equal to the operator view's rows per name."""
    cap = conv_shapes_per_step if scenario == "conv" else _nested_capture
    got = {}
    for mode, env in (("sliced", {"NSYSDOC_ATTR_SLICED_ROWS": "1", "NSYSDOC_SLICE_ROWS": "5"}),
                      ("whole", {"NSYSDOC_ATTR_SLICED_ROWS": str(1 << 60)}), ("kineto", {})):
        with monkeypatch.context() as m:
            for k, v in env.items():
                m.setenv(k, v)
            r = diagnose_path(_write(cap(), tmp_path / mode if tmp_path.joinpath(mode).mkdir() is None else tmp_path,
                                     "kineto" if mode == "kineto" else "nsys"))
        rows = {k: {c: round(x[c], 4) for c in ("calls", "self_gpu_ms", "gpu_ms", "self_cpu_ms", "cpu_ms", "kernels")}
                for k, x in _by_shape(r).items()}
        got[mode] = rows
        ops = {x["name"]: x for x in r["metrics"]["operators"]["rows"]}
        for name in {n for n, _ in rows}:
            for c in ("calls", "self_gpu_ms", "gpu_ms", "self_cpu_ms", "cpu_ms", "kernels"):
                assert sum(v[c] for (n, _), v in rows.items() if n == name) == approx(ops[name][c], 2e-4), (mode, name, c)
    assert got["sliced"] == got["whole"] == got["kineto"]


def test_convolution_share_counts_every_kernel_name_not_only_the_top_50(tmp_path):
    """One 100 ms convolution kernel, then 60 other kernel names of 10 ms each (a model with many
    small elementwise kernels). The JSON's by_name keeps the top 50 names (the convolution and 49
    others): over them the share would be 100 / (100 + 490) = 16.95%; over every name it is
    100 / (100 + 600) = 14.2857%."""
    from nsysdoc.testing.shape_scenarios import CONV_KERNEL

    cap = Capture()
    t = cap.process(pid=4710).thread()
    t.launch(CONV_KERNEL, 100_000)
    for i in range(60):
        t.launch(f"elementwise_kernel_{i:02d}", 10_000)
    t.item()
    r = diagnose_path(_write(cap, tmp_path, "nsys"))
    assert len(r["metrics"]["kernels"]["by_name"]) == 50
    assert _values(r)["conv_kernel_share_pct"] == approx(100 / 700 * 100, 1e-3)


def test_steps_compared_are_those_of_the_process_the_values_come_from(tmp_path):
    """Process 4710 runs 6 steps with fixed shapes; process 4720 runs 4 steps, its step 2 with
    batch 17 and a 35 ms convolution instead of 20 ms. The values come from 4720 (the only cost):
    shape_steps_compared is its 4 steps, not the 6 of the other process."""
    from nsysdoc.testing.shape_scenarios import CONV_KERNEL

    cap = Capture()
    for pid, steps, odd in ((4710, 6, None), (4720, 4, 2)):
        t = cap.process(pid=pid).thread()
        for i in range(steps):
            b = 17 if i == odd else 32
            with t.range(f"ProfilerStep#{i}"):
                with t.op("aten::conv2d", shapes=[[b, 3, 224, 224], [64, 3, 7, 7]]):
                    t.launch(CONV_KERNEL, 35_000 if i == odd else 20_000)
                t.item()
    v = _values(diagnose_path(_write(cap, tmp_path, "nsys")))  # (a Kineto trace holds one process)
    assert (v["shape_steps_compared"], v["shape_changing_op_count"], v["shape_changing_steps"]) == (4, 1, 1)


# ---------------------------------------------------------------------------------------------
# issue 50: operators by shape without per-row Python (nsysdoc.engine.shapes._match_rows,
# _distinct_triples); the same answers as the per-row definitions they replace
# ---------------------------------------------------------------------------------------------
#: (thread, start, end, name) of the attributor's ranges (forest order) and of the NVTX rows that
#: hold shapes (row order): two ranges share a key; one NVTX row has a key no range has.
RANGES = [(0, 10, 20, 1), (0, 10, 20, 1), (1, 5, 9, 2), (0, 10, 20, 2)]
SHAPED = [(0, 10, 20, 1), (1, 5, 9, 2), (0, 10, 20, 1), (0, 10, 20, 1), (0, 10, 21, 1), (0, 10, 20, 2)]
#: by hand: the k-th row of a key matches the k-th range of it; (0, 10, 20, 1) has 2 ranges, so
#: its 3rd row matches none; (0, 10, 21, 1) is no range's key
MATCHED = [0, 2, 1, -1, -1, 3]


def _cols(rows, start_shift=0):
    import numpy as np

    a = np.array(rows, dtype=np.int64)
    a[:, 1] += np.where(a[:, 1] == 5, start_shift, 0)  # the thread-1 range's start
    return [a[:, i].copy() for i in range(4)]


@pytest.mark.parametrize("shift", [0, -(1 << 62)], ids=["packed-keys", "keys-too-wide-to-pack"])
def test_shaped_rows_match_ranges_by_key_and_occurrence(shift):
    """Two NVTX rows with the key of two ranges take them in order; a third takes none. With a
    start 2^62 ns before the others the key columns cannot be packed into one int64 (the sort
    then uses every column): the same answer."""
    from nsysdoc.engine.shapes import _match_rows

    got = _match_rows(_cols(RANGES, shift), _cols(SHAPED, shift))
    assert got.tolist() == MATCHED


def test_shaped_rows_match_as_the_per_row_definition_on_random_keys():
    """Random keys with many repeats, both sides shuffled: each NVTX row takes the range of its
    key that the per-row definition (a queue of each key's ranges, in forest order) gives it."""
    import numpy as np

    from nsysdoc.engine.shapes import _match_rows

    rng = np.random.default_rng(50)
    for _ in range(20):
        nf, nq = int(rng.integers(0, 60)), int(rng.integers(0, 60))
        f = [rng.integers(-2, 3, nf) for _ in range(4)]
        q = [rng.integers(-2, 3, nq) for _ in range(4)]
        queue: dict = {}
        for i, k in enumerate(zip(*(c.tolist() for c in f))):
            queue.setdefault(k, []).append(i)
        want = [queue[k].pop(0) if queue.get(k) else -1 for k in zip(*(c.tolist() for c in q))]
        assert _match_rows(f, q).tolist() == want


@pytest.mark.parametrize("big", [0, 1 << 40], ids=["packed", "too-wide-to-pack"])
def test_distinct_name_step_shapes_triples_are_sorted(big):
    """(name, step, shapes) rows (2, 1, 0) twice, (0, 3, 0), (0, 0, 5): three distinct rows, sorted
    as np.unique(axis=0) sorts them; with names near 2^40 and steps near 2^30 they cannot share
    one int64 key: the same rows."""
    import numpy as np

    from nsysdoc.engine.shapes import _distinct_triples

    a = np.array([2, 0, 2, 0]) + big
    b = np.array([1, 3, 1, 0]) + (big >> 10)
    got = _distinct_triples(a, b, np.array([0, 0, 0, 5]))
    assert got.tolist() == [[big, big >> 10, 5], [big, 3 + (big >> 10), 0], [2 + big, 1 + (big >> 10), 0]]


class _NvtxBlocks:
    """An NVTX table of the block store (``read_block``) holding given texts, one block each."""

    def __init__(self, blocks: list[list[str]]) -> None:
        import pyarrow as pa

        from nsysdoc.trace.nvtx_text import FLAG_DECORATED

        self.blocks, pos = [], 0
        for texts in blocks:
            n = len(texts)
            r = list(range(pos, pos + n))
            self.blocks.append({"call_flags": [FLAG_DECORATED] * n, "start_ns": [10 * i for i in r],
                                "end_ns": [10 * i + 5 for i in r], "thread": [0] * n, "text_group": [0] * n,
                                "pos": r, "text": pa.array(texts, type=pa.large_string())})
            pos += n

    def __len__(self) -> int:
        return sum(len(b["pos"]) for b in self.blocks)

    def read_block(self, i: int, cols: list) -> dict:
        import numpy as np

        b = self.blocks[i]
        return {c: b[c] if c == "text" else np.asarray(b[c], dtype=np.int64) for c in cols}

    def read_text(self, i: int, col: str):  # (Table.read_text: a text column for one pass)
        return self.blocks[i][col]


def test_shapes_are_cut_before_the_fields_nsys_writes_after_them_block_by_block():
    """nsys --pytorch=autograd-shapes-nvtx writes ``input_op_ids`` (and a stack) after the shapes;
    a Kineto op's text ends with them. Block 1: rows 0-2 have shapes (row 0 cut before
    input_op_ids, row 1 before its stack; rows 1 and 2 the same shapes), row 3 none; block 2 (no
    field after its shapes): row 4 new shapes, row 5 those of rows 1-2. By hand: rows 0, 1, 2, 4,
    5 with codes 0, 1, 1, 2, 1 in the order the shapes first appear."""
    from types import SimpleNamespace

    from nsysdoc.engine.shapes import shaped_rows

    table = _NvtxBlocks([
        ["aten::index, seq = 1, op_id = 2, sizes = [[10000, 768], [4, 512]], input_op_ids = [(16,0), (2333,0)]",
         "aten::mm, sizes = [[2, 3], [3, 4]], stack = f.py(3): g", "aten::mm, seq = 4, sizes = [[2,3],[3,4]]",
         "ProfilerStep#1"],
        ["aten::relu, seq = 5, sizes = [[8]]", "aten::mm, seq = 6, sizes = [[2, 3], [3, 4]]"]])
    got = shaped_rows(SimpleNamespace(store=SimpleNamespace(get=lambda name: table)))
    assert got.pos.tolist() == [0, 1, 2, 4, 5] and got.st.tolist() == [0, 10, 20, 40, 50]
    assert got.code.tolist() == [0, 1, 1, 2, 1]
    assert got.texts == ["[[10000, 768], [4, 512]]", "[[2, 3], [3, 4]]", "[[8]]"]
