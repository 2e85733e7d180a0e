"""Where GPU work comes from: the operator view and each finding's ``where``, on scenarios built
from a description (``nsysdoc.testing.scenarios``), in all three input forms (nsys SQLite, Kineto
new and old). Every expected number is computed here by hand from the scenario's durations.

Builder timing used below: an operator, Python frame or nn.Module call takes 1 us on entry and
1 us on exit (``ENTER_NS``); a kernel launch call takes ``api_us`` (5 us unless given).
"""
from __future__ import annotations

import numpy as np
import pytest

from nsysdoc.metrics import attribution as A
from nsysdoc.testing.scenarios import operators_forward_backward, where_tiny_kernels_and_item

from .conftest import diagnose_path

FORMS = ("nsys", "new", "old")


def _write(cap, form, tmp_path, name):
    if form == "nsys":
        return cap.write(tmp_path / f"{name}.sqlite")
    return cap.write_kineto(tmp_path / f"{name}_{form}.json", form=form)


@pytest.fixture(scope="module", params=FORMS)
def fwd_bwd(request, tmp_path_factory):
    form = request.param
    path = _write(operators_forward_backward(), form, tmp_path_factory.mktemp("fb"), "fwd_bwd")
    return form, diagnose_path(path)


@pytest.fixture(scope="module", params=FORMS)
def tiny_item(request, tmp_path_factory):
    form = request.param
    path = _write(where_tiny_kernels_and_item(), form, tmp_path_factory.mktemp("ti"), "tiny_item")
    return form, diagnose_path(path)


def _rows(result) -> dict[str, dict]:
    return {r["name"]: r for r in result["metrics"]["operators"]["rows"]}


# ---------------------------------------------------------------------------------------------
# the operator view
# ---------------------------------------------------------------------------------------------
def test_operator_view_gpu_times_by_hand(fwd_bwd):
    form, r = fwd_bwd
    ops = r["metrics"]["operators"]
    assert ops["source"] == ("nvtx" if form == "nsys" else "kineto")
    rows = _rows(r)
    # two steps: a 300 us GEMM under aten::linear > aten::addmm, a 20 us relu, a 400 us backward
    # GEMM under evaluate_function > AddmmBackward0 > aten::mm, a 50 us kernel under no operator
    assert rows["aten::addmm"]["self_gpu_ms"] == pytest.approx(2 * 0.300)
    assert rows["aten::addmm"]["kernels"] == 2 and rows["aten::addmm"]["top_kernel"] == "gemm_kernel"
    assert rows["aten::linear"]["self_gpu_ms"] == 0 and rows["aten::linear"]["gpu_ms"] == pytest.approx(0.600)
    assert rows["aten::relu"]["self_gpu_ms"] == pytest.approx(0.040)
    assert rows["aten::mm"]["self_gpu_ms"] == pytest.approx(0.800)
    assert rows["AddmmBackward0"]["gpu_ms"] == pytest.approx(0.800) and rows["AddmmBackward0"]["kernels"] == 0
    assert rows["autograd::engine::evaluate_function: AddmmBackward0"]["gpu_ms"] == pytest.approx(0.800)
    none = rows["(no operator)"]
    assert none["self_gpu_ms"] == pytest.approx(0.100) and none["kernels"] == 2 and none["calls"] == 0
    assert none["top_kernel"] == "orphan_kernel"
    # all GPU time: 2 x (300 + 20 + 400 + 50) us; 1.44 ms of it under an operator
    assert ops["gpu_ms"] == pytest.approx(1.54)
    assert ops["attributed_pct"] == pytest.approx(1.44 / 1.54 * 100, abs=1e-3)
    assert sum(x["self_gpu_ms"] for x in ops["rows"]) == pytest.approx(1.54)
    # sorted by self GPU time, most first
    assert [x["name"] for x in ops["rows"][:4]] == ["aten::mm", "aten::addmm", "(no operator)", "aten::relu"]


def test_operator_view_calls_and_cpu_times_by_hand(fwd_bwd):
    _form, r = fwd_bwd
    rows = _rows(r)
    assert all(rows[n]["calls"] == 2 for n in ("aten::linear", "aten::addmm", "aten::relu", "aten::mm"))
    # aten::addmm: 1 (enter) + 5 (launch call) + 1 (exit) = 7 us, twice
    assert rows["aten::addmm"]["cpu_ms"] == pytest.approx(0.014)
    assert rows["aten::addmm"]["self_cpu_ms"] == pytest.approx(0.014)
    # aten::linear: 1 + 10 (cpu) + 7 (addmm) + 5 (cpu) + 1 = 24 us; self 24 - 7 = 17 us
    assert rows["aten::linear"]["cpu_ms"] == pytest.approx(0.048)
    assert rows["aten::linear"]["self_cpu_ms"] == pytest.approx(0.034)
    # AddmmBackward0: 1 + 7 (aten::mm) + 1 = 9 us, self 2 us; evaluate_function around it: 11 us
    assert rows["AddmmBackward0"]["cpu_ms"] == pytest.approx(0.018)
    assert rows["AddmmBackward0"]["self_cpu_ms"] == pytest.approx(0.004)
    assert rows["autograd::engine::evaluate_function: AddmmBackward0"]["cpu_ms"] == pytest.approx(0.022)


def test_modules_and_frames_per_format(fwd_bwd):
    form, r = fwd_bwd
    rows = _rows(r)
    ops = r["metrics"]["operators"]
    if form == "nsys":
        # the user's NVTX range "forward" is the module; no Python frames without stacks
        assert rows["aten::addmm"]["module"] == "forward" and rows["aten::addmm"]["frame"] is None
        assert [m["key"] for m in ops["missing"]] == ["nsys_stacks"]
    elif form == "new":
        assert rows["aten::addmm"]["module"] == "nn.Module: Linear_0"
        assert rows["aten::addmm"]["frame"] == "model.py:12 in forward"
        assert ops["modules"][0] == {"name": "nn.Module: Linear_0", "gpu_ms": pytest.approx(1.44), "gpu_ops": 6,
                                     "top_op": "aten::mm"}
        assert ops["missing"] == []
    else:  # 2021 format: the Call stack argument gives the frames; no record_function regions
        assert rows["aten::addmm"]["frame"] == "model.py:12 in forward"
        assert [m["key"] for m in ops["missing"]] == ["kineto_modules"]
    if form != "nsys":
        assert ops["frames"][0]["name"] == "model.py:12 in forward"
        assert ops["frames"][0]["gpu_ms"] == pytest.approx(1.44)


def test_backward_kernels_name_their_forward_op_and_take_its_module_and_line(fwd_bwd):
    form, r = fwd_bwd
    where = r["metrics"]["where"]["kernels"]
    bwd = next(w for w in where if w["op"] == "aten::mm")
    assert bwd["backward_op"] == "AddmmBackward0"
    # seq 7 (step 0) and 17 (step 1): the outermost forward op with that number is aten::linear
    assert bwd["forward_op"] == "aten::linear"
    assert bwd["share_pct"] == pytest.approx(0.8 / 1.54 * 100, abs=1e-3)
    assert bwd["ms"] == pytest.approx(0.8) and bwd["count"] == 2
    if form == "new":
        assert bwd["module"] == "nn.Module: Linear_0" and bwd["frame"] == "model.py:12 in forward"
    if form == "nsys":
        assert bwd["module"] == "forward"
    fwd = next(w for w in where if w["op"] == "aten::addmm")
    assert fwd["backward_op"] is None and fwd["forward_op"] is None


# ---------------------------------------------------------------------------------------------
# findings say where
# ---------------------------------------------------------------------------------------------
def test_tiny_kernels_where_by_hand(tiny_item):
    form, r = tiny_item
    tiny = r["metrics"]["where"]["tiny_kernels"]
    # per step 400 x 4 us (aten::add_, train.py:55) and 200 x 2 us (aten::mul, train.py:56), 3 steps
    assert [(w["op"], w["count"]) for w in tiny] == [("aten::add_", 1200), ("aten::mul", 600)]
    assert tiny[0]["ms"] == pytest.approx(4.8) and tiny[1]["ms"] == pytest.approx(1.2)
    assert tiny[0]["share_pct"] == pytest.approx(80.0) and tiny[1]["share_pct"] == pytest.approx(20.0)
    if form != "nsys":
        assert [w["frame"] for w in tiny] == ["train.py:55 in <module>", "train.py:56 in <module>"]


def test_host_sync_finding_points_at_item_and_adds_up_to_its_impact(tiny_item):
    form, r = tiny_item
    f = next(f for f in r["findings"] if f["rule"] == "host-sync")
    assert f["where"], f
    top = f["where"][0]
    assert top["op"] == "aten::_local_scalar_dense" and top["share_pct"] == pytest.approx(100.0)
    if form != "nsys":
        assert top["frame"] == "train.py:60 in <module>"
    # the where list splits the finding's own time: its entries add up to the impact
    assert sum(w["ms"] for w in f["where"]) == pytest.approx(f["impact_ms"], abs=2e-3)


def test_dominant_kernel_where_is_the_operator_that_launches_it(tiny_item):
    form, r = tiny_item
    f = next(f for f in r["findings"] if f["rule"] == "dominant-kernel")
    assert f["where"][0]["op"] == "aten::mm"
    assert f["where"][0]["ms"] == pytest.approx(9.0)  # 3 x 3 ms
    if form != "nsys":
        assert f["where"][0]["frame"] == "train.py:50 in <module>"


def test_where_note_names_the_switch_that_adds_what_is_missing(tiny_item):
    form, r = tiny_item
    f = next(f for f in r["findings"] if f["rule"] == "host-sync")
    if form == "nsys":
        assert "with_stack=True" in f["where_note"]
    else:
        assert "record_function" in f["where_note"]


def test_no_ranges_means_no_operator_view_and_a_hint(build):
    r = diagnose_path(build("sync_storm"))
    ops = r["metrics"]["operators"]
    assert ops["source"] is None and ops["rows"] == []
    assert [m["key"] for m in ops["missing"]] == ["nvtx_ops", "nsys_stacks"]
    f = next(f for f in r["findings"] if f["rule"] == "host-sync")
    assert f["where"] == []
    assert "--pytorch=autograd-nvtx" in f["where_note"]


def test_markdown_and_html_show_where(tmp_path):
    from nsysdoc.views.render import render_html, render_markdown

    r = diagnose_path(where_tiny_kernels_and_item().write_kineto(tmp_path / "t.json"))
    md = render_markdown(r)
    assert "*Where:* `aten::_local_scalar_dense` at `train.py:60 in <module>` (100.0%" in md
    assert "\\<module" not in md.split("**Operators**")[0].split("*Where:*")[1].split("\n")[0]
    assert "**Operators**" in md
    from nsysdoc.analysis import analyze
    from nsysdoc.rules import apply_rules, load_rules
    from nsysdoc.trace import load_trace

    a = analyze(load_trace(tmp_path / "t.json", cache=False))
    apply_rules(a.result, load_rules())
    html = render_html(a)
    assert 'data-testid="where"' in html and "train.py:60 in &lt;module&gt;" in html
    assert 'id="operators"' in html


# ---------------------------------------------------------------------------------------------
# the pieces
# ---------------------------------------------------------------------------------------------
def test_forest_innermost_nesting_ties_and_overhang():
    # thread 0: A [0, 100) > B [10, 50) > C [10, 20) (C shares B's start: the shorter is inner);
    # D [50, 80) starts where B ends; E [90, 101) overhangs A by 1 (it holds t = 100 alone);
    # Z [30, 30) has no length. Thread 1: F [0, 1000).
    thread = [0, 0, 0, 0, 0, 0, 1]
    start = [0, 10, 10, 50, 90, 30, 0]
    end = [100, 50, 20, 80, 101, 30, 1000]
    f = A.Forest(thread, start, end, np.arange(7))
    q_t = np.array([0, 0, 0, 0, 0, 0, 0, 0, 1, 2])
    q = np.array([5, 10, 19, 20, 50, 95, 100, 30, 5, 5])
    got = [int(f.name[i]) if i >= 0 else -1 for i in f.innermost(q_t, q)]
    # 5: A; 10, 19: C; 20: B; 50: D (B ended); 95: E; 100: E (A ended, E has not); 30: B (Z has
    # no length); thread 1 at 5: F; thread 2: nothing
    assert got == [0, 2, 2, 1, 3, 4, 4, 1, 6, -1]
    depth = dict(zip(f.name.tolist(), f.depth.tolist()))
    assert depth == {0: 0, 1: 1, 2: 2, 3: 1, 4: 1, 5: 2, 6: 0}
    parent = {int(f.name[i]): (int(f.name[p]) if p >= 0 else -1) for i, p in enumerate(f.parent)}
    assert parent == {0: -1, 1: 0, 2: 1, 3: 0, 4: 0, 5: 1, 6: -1}
    # self time: A = 100 - (40 + 30 + 11) = 19; B = 40 - 10 - 0 = 30
    self_t = dict(zip(f.name.tolist(), f.self_time().tolist()))
    assert self_t[0] == 19 and self_t[1] == 30


def test_forest_ranges_that_overlap_without_nesting():
    # P [100, 110), Q [105, 111), R [110, 120), S [112, 118): Q starts inside P and outlives it
    f = A.Forest([0] * 4, [100, 105, 110, 112], [110, 111, 120, 118], np.arange(4))
    assert f.innermost([0] * 4, [107, 111, 115, 119]).tolist() == [1, 2, 3, 2]
    assert f.parent.tolist() == [-1, 0, 1, 2]


def _check_against_definition(f, qt, qq):
    """Innermost and parent, by brute force from the glossary's definitions (forest order)."""
    got = f.innermost(qt, qq)
    for i in range(len(qq)):
        c = [j for j in range(len(f)) if f.thread[j] == qt[i] and f.start[j] <= qq[i] < f.end[j]]
        assert got[i] == (c[-1] if c else -1)
    for i in range(len(f)):
        c = [j for j in range(i) if f.thread[j] == f.thread[i] and f.start[j] <= f.start[i] < f.end[j]]
        assert f.parent[i] == (c[-1] if c else -1)


def test_forest_agrees_with_its_definition_on_random_ranges():
    rng = np.random.default_rng(7)
    for _ in range(150):
        n = int(rng.integers(0, 40))
        th, s = rng.integers(0, 3, n), rng.integers(0, 100, n)
        e = s + rng.integers(-3, 40, n)
        f = A.Forest(th, s, e, np.arange(n))
        qt, qq = rng.integers(0, 4, 40), rng.integers(-5, 150, 40)
        _check_against_definition(f, qt, qq)


def _laminar(rng, lo, hi, depth, out, th):
    t = lo
    while t < hi and depth < 5:
        a = int(rng.integers(t, hi + 1))
        b = a if rng.random() < 0.3 else int(rng.integers(a, hi + 1))
        out.append((th, a, b))
        if b > a:
            _laminar(rng, a, b, depth + 1, out, th)
        t = b + int(rng.integers(0, 3))
        if rng.random() < 0.3:
            break


def test_forest_fast_path_for_nested_ranges_agrees_with_the_definition():
    rng = np.random.default_rng(3)
    for _ in range(150):
        rows = []
        for th in range(int(rng.integers(1, 3))):
            _laminar(rng, 0, 100, 0, rows, th)
        rng.shuffle(rows)
        th, s, e = (np.array([r[i] for r in rows], dtype=np.int64) for i in range(3))
        f = A.Forest(th, s, e, np.arange(len(rows)))
        assert f._events_ok  # properly nested: the boundary-list path
        qt, qq = rng.integers(0, 3, 40), rng.integers(-5, 110, 40)
        _check_against_definition(f, qt, qq)


def test_names():
    assert A.op_name("aten::index, seq = 10290, op_id = 71792, sizes = [[10000, 768], [4, 512]], "
                     "input_op_ids = [(16,0), (2333,0)]") == "aten::index"
    assert A.op_name("aten::view, op_id = 314290") == "aten::view"
    assert A.op_name("layer 3, block 2") == "layer 3, block 2"
    assert A.seq_of("aten::mean, seq = 12347, op_id = 5") == 12347 and A.seq_of("aten::view") == -1
    assert A.frame_label("train.py(184): <module>") == "train.py:184 in <module>"
    assert A.is_user_frame("train.py(184): <module>")
    assert not A.is_user_frame("torch/nn/modules/module.py(1743): _call_impl")
    assert not A.is_user_frame("<built-in method conv2d of type object at 0x7f>")
    assert not A.is_user_frame("/home/u/envs/lib/python3.7/site-packages/torch/nn/functional.py(2263): batch_norm")
    assert not A.is_user_frame("nn.Module: Linear_0")
    assert A.is_backward("MulBackward0") and A.is_backward("autograd::engine::evaluate_function: MulBackward0")
    assert not A.is_backward("aten::mul")
    assert A.is_op_like("aten::mm") and A.is_op_like("detach_, seq = 3") and not A.is_op_like("forward")


# ---------------------------------------------------------------------------------------------
# native call stacks of an Nsight Systems export (--cudabacktrace)
# ---------------------------------------------------------------------------------------------
def test_native_backtraces_name_the_programs_own_function(tmp_path):
    from nsysdoc.testing.scenarios import native_app_backtraces

    r = diagnose_path(native_app_backtraces().write(tmp_path / "native.sqlite"))
    where = r["metrics"]["where"]["kernels"]
    # 4 x 2 ms from Solver::step() in my_solver, 4 x 1 ms from Solver::residual() in libsolver.so;
    # the driver, runtime and libc frames of each chain are skipped
    assert [(w["frame"], w["ms"], w["count"]) for w in where] == [
        ("Solver::step() (my_solver)", pytest.approx(8.0), 4), ("Solver::residual() (libsolver.so)", pytest.approx(4.0), 4)]
    assert where[0]["share_pct"] == pytest.approx(200 / 3, abs=1e-3)
    assert all(w["op"] == "(no operator)" for w in where)
    # the sync gaps fall inside cudaDeviceSynchronize, called from main
    f = next(f for f in r["findings"] if f["rule"] == "host-sync")
    assert f["where"][0]["frame"] == "main (my_solver)"
    ops = r["metrics"]["operators"]
    assert ops["source"] is None and [m["key"] for m in ops["missing"]] == ["nvtx_ops"]


def test_native_frame_filter():
    from nsysdoc.trace.stacks import is_user_native

    assert is_user_native("Solver::step()", "/opt/app/bin/my_solver")
    for sym, mod in (("cudaLaunchKernel", "/usr/local/cuda/lib64/libcudart.so.12"), ("0x7f3a", "libcuda.so.1"),
                     ("_PyEval_EvalFrameDefault", "/usr/lib/libpython3.11.so"), ("at::native::add", "libtorch_cuda.so"),
                     ("x", "[Broken backtraces]"), ("__libc_start_main", "libc.so.6")):
        assert not is_user_native(sym, mod), (sym, mod)


def test_text_grouping_is_the_same_in_python_and_in_arrow(monkeypatch):
    import pyarrow as pa

    from nsysdoc.trace import nvtx_text as N

    texts = ["aten::mm, seq = 3, op_id = 17", "aten::mm, op_id = 18", "aten::mm", "forward",
             "aten::index, seq = 10290, op_id = 71792, sizes = [[10000, 768], [4, 512]], input_op_ids = [(16,0)]",
             "layer 3, block 2", "odd\nline, seq = 4", "", "MulBackward0, seq = 9", "a (b, c), seq = 2"]
    arr = pa.array(texts, type=pa.large_string())
    py = N.call_field_groups(arr)
    monkeypatch.setattr(N, "PYTHON_GROUPING_MAX", 0)
    ar = N.call_field_groups(arr)
    assert [py[1][i] for i in py[0]] == [ar[1][i] for i in ar[0]] == [
        "aten::mm", "aten::mm", "aten::mm", "forward", "aten::index", "layer 3, block 2", "odd\nline", "",
        "MulBackward0", "a (b, c), seq = 2"]
    assert py[2].tolist() == ar[2].tolist() == [True, True, False, False, True, False, True, False, True, False]


def test_text_facts_are_the_same_in_python_and_in_arrow(monkeypatch):
    import pyarrow as pa

    from nsysdoc.trace import nvtx_text as N

    texts = ["aten::mm, seq = 3, op_id = 17", "aten::mm, op_id = 18", "x, seq = 12", "y", "MulBackward0, seq = 9",
             "bad, seq = 1x, op_id = 2", "u, seq = \u0663", "v, seq = 99999999999999999999",
             "aten::add, seq = 5, op_id = 6, stack = train.py(3): step", "p, q, stack = a.py(1): f", "aten::mm"]
    want_seq = [3, -1, 12, -1, 9, -1, -1, -1, 5, -1, -1]
    # the group codes continue a trace's list: "aten::mm" is already group 0
    for arr in (texts, pa.array(texts, type=pa.large_string())):
        for limit in (4096, 0):
            monkeypatch.setattr(N, "PYTHON_GROUPING_MAX", limit)
            groups = N.Groups(["aten::mm"])
            g, s, f = N.text_facts(arr, groups)
            assert [groups.texts[i] for i in g] == ["aten::mm", "aten::mm", "x", "y", "MulBackward0", "bad", "u", "v",
                                                    "aten::add", "p, q, stack = a.py(1): f", "aten::mm"]
            assert g[0] == 0 and s.tolist() == want_seq
            assert f.tolist() == [1, 1, 1, 0, 1, 1, 1, 1, 3, 0, 0]
    rows = N.row_facts(np.array(["y", None, "x, seq = 2", "y"], dtype=object), N.Groups())
    assert rows["text_group"].tolist() == [0, 1, 2, 0] and rows["seq"].tolist() == [-1, -1, 2, -1]


def test_pyprof_texts_give_operator_names_and_source_lines(tmp_path):
    """NVIDIA pyprof (pyprof.nvtx.init()) writes a source-line marker range around each call and
    a dict text naming the operator: 3 steps of a 400 us conv2d at train.py:34."""
    from nsysdoc.testing import Capture

    cap = Capture()
    t = cap.process().thread()
    for i in range(3):
        with t.range(f"ProfilerStep#{i}"):
            with t.range("{'traceMarker': ['train.py:34', '/usr/lib/python3.10/site-packages/pyprof/nvtx/nvmarker.py:405'],"
                         " 'funcStack': 'forward'}"):
                with t.range("{'mod': 'torch.nn.functional', 'op': 'conv2d', 'args': [{'name': '', 'type': 'tensor', "
                             "'shape': (1, 3, 8, 8), 'dtype': 'float32'}]}"):
                    t.launch("conv_kernel", us=400)
            t.cpu(us=50)
    r = diagnose_path(cap.write(tmp_path / "pyprof.sqlite"))
    rows = _rows(r)
    assert rows["torch.nn.functional.conv2d"]["self_gpu_ms"] == pytest.approx(1.2)
    assert rows["torch.nn.functional.conv2d"]["frame"] == "train.py:34"
    assert not any(n.startswith("{'traceMarker'") for n in rows)
    assert "nsys_stacks" not in [m["key"] for m in r["metrics"]["operators"]["missing"]]
    assert A.pyprof("{'mod': 'Tensor', 'op': 'uniform_', 'args': []}") == ("op", "Tensor.uniform_")
    assert A.pyprof("forward") is None


@pytest.mark.parametrize("steps", [2, 8])  # 1,200 distinct texts: Python grouping; 4,800: Arrow's
def test_nvtx_summary_from_the_loader_s_groups_equals_grouping_again(steps, tmp_path):
    """The NVTX summary reads the text groups the loader stored (one code per range row) instead of
    grouping the window's texts again: the same table either way. Every operator range's text is
    distinct here (``aten::add_, op_id = N``), as --pytorch=autograd-nvtx writes them."""
    from nsysdoc.analysis import analyze
    from nsysdoc.metrics.nvtx import nvtx_summary_blocks
    from nsysdoc.trace import load_trace

    trace = load_trace(where_tiny_kernels_and_item(steps=steps).write(tmp_path / "t.sqlite"), cache=False)
    a = analyze(trace)
    nv = trace.store.get("nvtx").read_all(["text_group", "text"])
    # a group per operator, not per text
    assert len(trace.nvtx_groups) < 50 and len(set(nv["text"].to_pylist())) > 600 * steps
    w0, w1 = a.steps.window_start_ns, a.steps.window_end_ns
    cols = ["start_ns", "end_ns", "event_type", "domain", "text"]
    again = nvtx_summary_blocks(trace.store.get("nvtx").iter_blocks(cols), trace.nvtx_domains, w0, w1)
    assert a.result["metrics"]["nvtx"] == again
    add = next(r for r in again if r["text"] == "aten::add_")
    assert add["count"] == 400 * steps  # one row for every call, whatever its op_id


def test_forest_order_fast_path_equals_the_lexsort():
    # start-ordered input with threads interleaved and many equal starts (across threads too):
    # the radix-and-runs order must be exactly lexsort((-end, start, thread))
    rng = np.random.default_rng(11)
    for _ in range(200):
        n = int(rng.integers(1, 60))
        s = np.sort(rng.integers(0, 15, n))
        th = rng.integers(0, 4, n)
        e = s + rng.integers(0, 6, n)
        got = A._forest_order(th, s, e)
        assert got.tolist() == np.lexsort((-e, s, th)).tolist()
        # unsorted input and thread indices beyond int16 take the lexsort
        sh = rng.permutation(n)
        assert A._forest_order(th[sh], s[sh], e[sh]).tolist() == np.lexsort((-e[sh], s[sh], th[sh])).tolist()
        assert A._forest_order(th + 40_000, s, e).tolist() == np.lexsort((-e, s, th + 40_000)).tolist()


def test_site_sums_fold_chunks_into_one_exact_dict(monkeypatch):
    """SiteSums (the engine's per-site time and count, one chunk per slice and selector): rows
    counted 0 are left out, chunks fold into {site: [ns, count]} with integer sums, an add after
    reading folds again, merge and compaction keep the sums."""
    from nsysdoc.engine.attribute import SiteSums, accumulate, merge_sites

    a = SiteSums()
    assert not a and len(a) == 0 and a.get((1, 2)) is None
    a.add(np.array([[1, 2], [3, 4], [5, 6]]), np.array([10.0, 0.0, 7.0]), np.array([1, 0, 2]))
    a.add(np.array([[1, 2], [0, -1]]), np.array([5.0, 2.0 ** 52]), np.array([3, 1]))
    assert a and len(a.chunks) == 2
    assert a.fold() == {(1, 2): [15, 4], (5, 6): [7, 2], (0, -1): [2 ** 52, 1]}
    assert all(isinstance(v, int) for vals in a.values() for v in vals)
    assert (3, 4) not in a and sorted(a) == [(0, -1), (1, 2), (5, 6)]
    accumulate(a, np.array([[5, 6], [9, 9]]), np.array([0, 0, 1]), np.array([1, 2, 4]))
    assert dict(a.items()) == {(1, 2): [15, 4], (5, 6): [10, 4], (0, -1): [2 ** 52, 1], (9, 9): [4, 1]}
    # merge_sites: selector by selector, new selectors created
    w1, w2 = {"gpu_ops": a}, {"gpu_ops": SiteSums(), "copies": SiteSums()}
    w2["gpu_ops"].add(np.array([[9, 9]]), np.array([6.0]), np.array([2]))
    w2["copies"].add(np.array([[1, 1]]), np.array([1.0]), np.array([1]))
    merge_sites(w1, w2)
    assert w1["gpu_ops"].get((9, 9)) == [10, 3] and w1["copies"].fold() == {(1, 1): [1, 1]}
    # many chunks fold into one as they come, same sums
    monkeypatch.setattr(SiteSums, "COMPACT_CHUNKS", 4)
    b = SiteSums()
    for i in range(10):
        b.add(np.array([[i % 3, 0]]), np.array([float(i)]), np.array([1]))
    assert len(b.chunks) <= 4
    assert b.fold() == {(0, 0): [0 + 3 + 6 + 9, 4], (1, 0): [1 + 4 + 7, 3], (2, 0): [2 + 5 + 8, 3]}
