"""Issue 50: the timeline window's NVTX rows are read with their text cut from each block as runs
of consecutive rows (``nsysdoc.engine.data.rows_overlapping_text``), not through a row filter of
the Arrow text column (which loads Arrow's compute module, 0.07-0.09 s of a cached report): the
same rows and texts as the store's own ``rows_overlapping``."""
from __future__ import annotations

import numpy as np

from nsysdoc.engine import data
from nsysdoc.trace.store import Store, to_text


def _nvtx() -> object:
    """Block 0: [0, 10) "a", [5, 100) "long", [12, 14) "x", [20, 30) "b"; block 1: [60, 70) "c",
    [65, 66) "d", [200, 210) "e" (two appends: two blocks)."""
    st = Store()
    t = st.table("nvtx", {"start_ns": "int64", "end_ns": "int64", "global_tid": "int64", "text": "str"})
    t.append({"start_ns": np.array([0, 5, 12, 20]), "end_ns": np.array([10, 100, 14, 30]),
              "global_tid": np.array([1, 1, 2, 1]), "text": ["a", "long", "x", "b"]})
    t.append({"start_ns": np.array([60, 65, 200]), "end_ns": np.array([70, 66, 210]),
              "global_tid": np.array([1, 2, 1]), "text": ["c", "d", "e"]})
    return t


def test_window_rows_and_texts_cut_as_runs():
    """Window [25, 65): start < 65 and end > 25 -> block 0 rows 1 and 3 ([5, 100) "long", [20, 30)
    "b": two runs, row 2 ends at 14), block 1 row 0 ([60, 70) "c"; [65, 66) starts at 65)."""
    t = _nvtx()
    d = data.rows_overlapping_text(t, 25, 65, ["start_ns", "end_ns", "global_tid", "text"])
    assert d["start_ns"].tolist() == [5, 20, 60] and d["end_ns"].tolist() == [100, 30, 70]
    assert d["global_tid"].tolist() == [1, 1, 1]
    assert d["text"].dtype == object and d["text"].tolist() == ["long", "b", "c"]
    ref = t.rows_overlapping(25, 65, ["start_ns", "end_ns", "global_tid", "text"])
    assert to_text(ref["text"]).tolist() == d["text"].tolist()
    # nothing in [300, 400): empty columns, an empty text array
    none = data.rows_overlapping_text(t, 300, 400, ["start_ns", "end_ns", "text"])
    assert len(none["start_ns"]) == 0 and none["text"].tolist() == []
    # a block read but none of its rows inside: [15, 16) meets only [5, 100)
    one = data.rows_overlapping_text(t, 15, 16, ["start_ns", "text"])
    assert one["start_ns"].tolist() == [5] and one["text"].tolist() == ["long"]


def test_too_many_runs_take_the_store_s_filter(monkeypatch):
    """With at most 1 run allowed per block, block 0's two runs go through the store's filter:
    the same rows and texts."""
    monkeypatch.setattr(data, "_TEXT_RUNS_MAX", 1)
    d = data.rows_overlapping_text(_nvtx(), 25, 65, ["start_ns", "text"])
    assert d["start_ns"].tolist() == [5, 20, 60] and d["text"].tolist() == ["long", "b", "c"]


def test_the_window_rows_never_filter_an_arrow_column(monkeypatch):
    """The Arrow row filter (what loads pyarrow.compute) is never used on the text column: the
    store's ``take`` sees no Arrow array; the store's own rows_overlapping does use it there."""
    from nsysdoc.trace import store

    seen = []
    orig = store.take

    def spy(v, idx):
        seen.append(store._is_arrow(v))
        return orig(v, idx)

    monkeypatch.setattr(store, "take", spy)
    t = _nvtx()
    data.rows_overlapping_text(t, 25, 65, ["start_ns", "text"])
    assert not any(seen)
    t.rows_overlapping(25, 65, ["start_ns", "text"])
    assert any(seen)
