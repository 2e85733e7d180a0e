"""Issue 46, item 9: work launched by autograd's engine thread gets an operator — the forward
operator of its backward node by sequence number (``via: "sequence"``), or, when the launching
thread has no operator range at all, the range the process's main thread has open at the launch
(``via: "enclosing range"``, e.g. the user's ``Backward`` NVTX range).

Scenario: ``nsysdoc.testing.autograd_scenarios.backward_on_autograd_thread`` — per step (2 steps)
a 300 us FP32 GEMM in ``Forward`` > ``aten::linear`` > ``aten::addmm`` on the main thread; on the
autograd thread a 400 us FP32 GEMM in ``AddmmBackward0`` (seq of aten::linear) > ``aten::mm`` and a
200 us FP32 GEMM outside every range of that thread, while the main thread is inside ``Backward``.
Expected numbers by hand:

* FP32 GEMM time: 2 x (300 + 400 + 200) = 1800 us;
* aten::mm (backward of aten::linear): 2 x 400 = 800 us = 44.444 %; aten::addmm 600 us = 33.333 %;
  the bare GEMMs, 2 x 200 = 400 us = 22.222 %, named by ``Backward`` (before: ``(no operator)``).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from nsysdoc.metrics import attribution as A
from nsysdoc.testing.autograd_scenarios import backward_on_autograd_thread
from nsysdoc.testing.builder import global_tid

from .conftest import diagnose_path
from .test_attribution import FORMS, _write  # one writer of a scenario in the three formats


@pytest.fixture(scope="module", params=FORMS)
def autograd(request, tmp_path_factory):
    form = request.param
    path = _write(backward_on_autograd_thread(), form, tmp_path_factory.mktemp("ag"), "autograd")
    return form, diagnose_path(path)


def _by_op(where):
    return {(w["op"], w["via"]): w for w in where}


def test_fp32_gemm_where_names_the_forward_op_and_the_backward_range(autograd):
    form, r = autograd
    where = r["metrics"]["where"]["fp32_kernels"]
    rows = _by_op(where)
    seq = rows[("aten::mm", "sequence")]
    assert seq["backward_op"] == "AddmmBackward0" and seq["forward_op"] == "aten::linear"
    assert seq["share_pct"] == pytest.approx(800 / 1800 * 100, abs=1e-3) and seq["count"] == 2
    fwd = rows[("aten::addmm", None)]
    assert fwd["share_pct"] == pytest.approx(600 / 1800 * 100, abs=1e-3)
    # the bare backward GEMMs: the main thread's "Backward" range, open at their launch. In nsys
    # and 2021 Kineto traces it is an operator range (NVTX push/pop, an "Operator" event); in
    # current Kineto traces a record_function region (user_annotation): the module, no operator
    if form == "new":
        bare = rows[("(no operator)", "enclosing range")]
        assert bare["module"] == "Backward"
    else:
        bare = rows[("Backward", "enclosing range")]
        # nsys: the user's "Backward" NVTX range is a region (a module), not an autograd node
        assert bare["module"] == ("Backward" if form == "nsys" else None)
    assert bare["backward_op"] is None and bare["forward_op"] is None
    assert bare["share_pct"] == pytest.approx(400 / 1800 * 100, abs=1e-3)
    assert bare["ms"] == pytest.approx(0.4) and bare["count"] == 2
    # every site named: no row without an operator and a range
    assert not [w for w in where if w["op"] == "(no operator)" and not w["module"]]
    assert sum(w["share_pct"] for w in where) == pytest.approx(100.0, abs=1e-3)


def test_fp32_gemm_finding_carries_the_same_where(autograd):
    _form, r = autograd
    f = next(f for f in r["findings"] if f["rule"] == "fp32-gemm")
    vias = sorted(str(w["via"]) for w in f["where"])
    assert vias == ["None", "enclosing range", "sequence"]


def test_operator_view_counts_the_backward_range(autograd):
    form, r = autograd
    ops = r["metrics"]["operators"]
    rows = {x["name"]: x for x in ops["rows"]}
    if form == "new":
        # no operator on either thread: the 400 us stay "(no operator)", grouped under Backward
        none = rows["(no operator)"]
        assert none["self_gpu_ms"] == pytest.approx(0.4) and none["module"] == "Backward"
        assert ops["attributed_pct"] == pytest.approx(1400 / 1800 * 100, abs=1e-3)
    else:
        assert rows["Backward"]["self_gpu_ms"] == pytest.approx(0.4) and rows["Backward"]["kernels"] == 2
        assert "(no operator)" not in rows
        assert ops["attributed_pct"] == pytest.approx(100.0)


def test_launches_of_the_main_thread_and_of_another_process_keep_no_operator(tmp_path):
    # + per step a 50 us kernel the main thread launches under its step marker only, and a 70 us
    # kernel another process launches inside Backward: 2 x (50 + 70) = 240 us with no operator
    cap = backward_on_autograd_thread(orphan_us=50, other_process_us=70)
    r = diagnose_path(cap.write(tmp_path / "mixed.sqlite"))
    where = r["metrics"]["where"]["kernels"]
    total = 2 * (300 + 400 + 200 + 50 + 70)
    none = [w for w in where if w["op"] == "(no operator)"]
    assert len(none) == 1 and none[0]["via"] is None
    assert none[0]["share_pct"] == pytest.approx(2 * 120 / total * 100, abs=1e-3) and none[0]["count"] == 4
    bare = _by_op(where)[("Backward", "enclosing range")]
    assert bare["share_pct"] == pytest.approx(2 * 200 / total * 100, abs=1e-3) and bare["count"] == 2


def test_sliced_attribution_gives_the_same_result(tmp_path, monkeypatch):
    path = backward_on_autograd_thread(steps=3, orphan_us=50, other_process_us=70).write(tmp_path / "s.sqlite")
    got = []
    for rows in (str(1 << 60), "1"):
        monkeypatch.setenv("NSYSDOC_ATTR_SLICED_ROWS", rows)
        monkeypatch.setenv("NSYSDOC_SLICE_ROWS", "7")
        got.append(json.dumps(diagnose_path(path), sort_keys=True, default=str))
    assert got[0] == got[1]
    assert '"via": "enclosing range"' in got[0]


def test_main_threads_by_hand():
    # threads: 0 = (4242, 4242) main; 1 = (4242, 4243); 2 = (5151, 5152) no main thread in its
    # process; 3 = (4242, 4300); 4 = (4242 on host 1, 4243): another process key (hw bits)
    g = [global_tid(4242, 4242), global_tid(4242, 4243), global_tid(5151, 5152), global_tid(4242, 4300),
         global_tid(4242, 4243, hw=1)]
    assert A.main_threads(g).tolist() == [-1, 0, -1, 0, -1]
    assert A.main_threads([]).tolist() == []
    assert A.main_threads(np.array([global_tid(7, 8)])).tolist() == [-1]


def test_page_and_markdown_say_how_the_site_was_found(autograd):
    from nsysdoc.views.build import backward_text

    assert backward_text({"op": "Backward", "via": "enclosing range"}).startswith("launched by another thread")
    assert backward_text({"backward_op": "AddmmBackward0", "forward_op": "aten::linear", "via": "sequence"}) == \
        "backward of aten::linear (AddmmBackward0)"


def test_a_users_backward_range_is_not_an_autograd_node(autograd):
    # autograd's nodes end in "Backward" + digits right after a letter, digit or "_"; a user's range
    # named "Backward" is a region: the main thread's sync inside it has no backward node
    assert not A.is_backward("Backward") and not A.is_backward("loss Backward")
    assert A.is_backward("MulBackward0") and A.is_backward("AddmmBackward") and A.is_backward("Mul_Backward1")
    assert not A.is_op_like("Backward") and A.is_op_like("MulBackward0")
    _form, r = autograd
    for rows in r["metrics"]["where"].values():
        assert all(w["backward_op"] in (None, "AddmmBackward0") for w in rows)
