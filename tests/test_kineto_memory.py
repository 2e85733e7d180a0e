"""The Kineto reader's memory (issue 50): work done a block at a time gives what one call gives.

The table mapping reads the facts of the operator texts (text group, autograd sequence number,
call flags: :func:`nsysdoc.trace.nvtx_text.text_facts`) :data:`FACTS_BLOCK` distinct texts at a
time, because pyarrow's string kernels there held +175 MB at once on a 400 k-launch PyTorch 2
trace, whose every operator text is distinct (``..., seq = N``). The blocks must give exactly the
one call's answer: the group codes numbered in order of first appearance across blocks.
"""
from __future__ import annotations

import numpy as np

from nsysdoc.testing.scenarios import steady_training
from nsysdoc.trace import kineto as K
from nsysdoc.trace.nvtx_text import Groups, text_facts
from nsysdoc.trace.tables import Drops

MAPPING = K.mapping


def test_facts_in_blocks_of_two_number_groups_by_first_appearance(monkeypatch):
    """Five texts in blocks of two: [mm 1, add 2] [mm 3, ProfilerStep#1] [add]. By hand: groups
    by first appearance aten::mm = 0, aten::add = 1, ProfilerStep#1 = 2 (the third block's
    ``aten::add`` is the first block's group 1, not a new one); the sequence numbers 1, 2, 3 where
    written, -1 where not; the call flag "decorated" (1) on the texts with per-call fields."""
    monkeypatch.setattr(MAPPING, "FACTS_BLOCK", 2)
    sizes = []
    monkeypatch.setattr(MAPPING, "text_facts", lambda v, g: sizes.append(len(v)) or text_facts(v, g))
    texts = ["aten::mm, seq = 1", "aten::add, seq = 2", "aten::mm, seq = 3", "ProfilerStep#1", "aten::add"]
    groups = Groups()
    grp, seq, flags = MAPPING._text_facts_blocks(texts, groups)
    assert sizes == [2, 2, 1]  # three calls, none given more than a block
    assert grp.tolist() == [0, 1, 0, 2, 1]
    assert seq.tolist() == [1, 2, 3, -1, -1]
    assert flags.tolist() == [1, 1, 1, 0, 0]
    assert list(groups.texts) == ["aten::mm", "aten::add", "ProfilerStep#1"]


def test_facts_in_blocks_equal_one_call_across_both_groupers(monkeypatch):
    """10,000 distinct texts (6 operator names, each with its own sequence number; every 7th
    without one) in blocks of 4,500: the first two blocks take the Arrow grouper (over
    ``PYTHON_GROUPING_MAX`` = 4,096 texts), the last (1,000) the Python one; together they give
    what one call gives."""
    ops = ["aten::mm", "aten::add_", "aten::relu", "aten::linear", "autograd::engine::evaluate_function: MmBackward0",
           "aten::copy_"]
    texts = [ops[i % 6] if i % 7 == 0 else f"{ops[i % 6]}, seq = {i}" for i in range(10_000)]
    whole_groups = Groups()
    whole = text_facts(texts, whole_groups)
    monkeypatch.setattr(MAPPING, "FACTS_BLOCK", 4_500)
    groups = Groups()
    got = MAPPING._text_facts_blocks(texts, groups)
    for a, b in zip(got, whole):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert list(groups.texts) == list(whole_groups.texts) and len(groups.texts) == 6


def test_a_trace_read_with_tiny_fact_blocks_has_the_same_tables(tmp_path, monkeypatch):
    """A steady training run written as a Kineto trace, mapped with blocks of 3 texts and with
    one block: the same text groups, sequence numbers and call flags, row for row."""
    path = steady_training().write_kineto(tmp_path / "t.pt.trace.json")
    top, acc = K._parse(path)
    one = MAPPING._frames(top, acc, path, Drops())["nvtx_facts"]
    monkeypatch.setattr(MAPPING, "FACTS_BLOCK", 3)
    top, acc = K._parse(path)
    blocks = MAPPING._frames(top, acc, path, Drops())["nvtx_facts"]
    assert len(one[0]["seq"]) > 10 and len(one[1]) > 1  # (the check can see rows and groups)
    for key in ("text_group", "seq", "call_flags"):
        assert np.array_equal(one[0][key], blocks[0][key]), key
    assert list(one[1]) == list(blocks[1])


# ---------------------------------------------------------------------------------------------
# issue 50: the analysis's memory (the attributor and the shapes match set a 400 k-launch
# report's peak): a column that says nothing is not n int64, and the match frees its inputs
# ---------------------------------------------------------------------------------------------
def _attributor(texts_seq):
    """An attributor over ranges on thread 0, one after the other (10 ns each, 10 ns apart), with
    the given (text, sequence number)s; no modules, no frames."""
    from nsysdoc.engine.attribute import Attributor, Forest, Names

    names = Names()
    codes = np.array([names.code(t) for t, _ in texts_seq], dtype=np.int64)
    n = len(texts_seq)
    start = np.arange(n, dtype=np.int64) * 20
    ops = Forest(np.zeros(n, np.int64), start, start + 10, codes)
    empty = Forest(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    seq = np.array([s for _, s in texts_seq], dtype=np.int64)
    return Attributor("kineto", names, ops, empty, empty, seq, np.zeros(1, np.int64)), names


NONE_COLUMNS = ("op_frame", "bwd", "fwd", "fwd_mod", "fwd_frame")


def test_attributor_columns_none_everywhere_are_one_shared_value():
    """Two forward operators, no autograd node, no Python frame: by hand every range's backward
    node, forward operator, its module and frame, and own frame are NONE (-1), so each column is
    one shared read-only value (stride 0: 8 bytes, not 8 per operator); read as before."""
    attr, _ = _attributor([("aten::mm", 1), ("aten::add", 2)])
    for k in NONE_COLUMNS:
        col = getattr(attr, k)
        assert col.tolist() == [-1, -1], k
        assert col.strides == (0,) and not col.flags.writeable, k
    assert attr._lookups()["bwd"] is None  # "NONE everywhere", as for a full column


def test_attributor_column_that_names_something_stays_a_full_array():
    """aten::mm (seq 7), then its backward node MmBackward0 (seq 7): by hand range 1's backward
    node is MmBackward0 and its forward operator aten::mm (the same sequence number, same
    process); range 0 has neither. Those two columns are full arrays; the module, frame columns
    stay NONE everywhere (shared)."""
    attr, names = _attributor([("aten::mm", 7), ("MmBackward0", 7)])
    assert attr.bwd.tolist() == [-1, names.index_of("MmBackward0")]
    assert attr.fwd.tolist() == [-1, names.index_of("aten::mm")]
    assert attr.bwd.strides == (8,) and attr.fwd.strides == (8,)
    for k in ("op_frame", "fwd_mod", "fwd_frame"):
        assert getattr(attr, k).strides == (0,), k


def test_shapes_match_empties_the_key_columns_it_is_given():
    """The match copies both sides' key columns into its sort and empties the two lists, so the
    caller's columns are freed before the sort (the peak); the answer is the one by hand: row 0
    of q has range 1's key, row 1 no range's."""
    from nsysdoc.engine.shapes import _match_rows

    f = [np.array([0, 0]), np.array([5, 9]), np.array([8, 12]), np.array([1, 1])]
    q = [np.array([0, 0]), np.array([9, 9]), np.array([12, 13]), np.array([1, 1])]
    assert _match_rows(f, q).tolist() == [1, -1]
    assert f == [] and q == []


# ---------------------------------------------------------------------------------------------
# issue 50, the 0.45 GB goal: what a loaded PyTorch Profiler trace keeps, and where its rows live
# ---------------------------------------------------------------------------------------------
def _events(path):
    import json

    return json.loads(path.read_text())["traceEvents"]


def test_string_table_keeps_the_names_an_id_column_holds(tmp_path):
    """A steady training run as a Kineto trace: the string table holds the kernels' names, their
    short names and the CUDA calls' names (what the kernel and runtime tables' id columns hold),
    each at its id, and none of the operator texts (those are the NVTX table's ``text``)."""
    path = steady_training().write_kineto(tmp_path / "t.pt.trace.json")
    ev = _events(path)
    t = K.load_kineto(path, cache=False)
    kern = t.store["kernels"].read_all(["name_id", "short_id"])
    rt = t.store["runtime"].read_all(["name_id"])
    assert set(t.strings.lookup(kern["name_id"]).tolist()) == {e["name"] for e in ev if e.get("cat") == "kernel"}
    assert set(t.strings.lookup(rt["name_id"]).tolist()) == {e["name"] for e in ev if e.get("cat") == "cuda_runtime"}
    used = set(kern["name_id"].tolist()) | set(kern["short_id"].tolist()) | set(rt["name_id"].tolist())
    assert set(t.strings.ids.tolist()) == used
    ops = {e["name"] for e in ev if e.get("cat") == "cpu_op"}
    texts = t.store["nvtx"].read_all(["text"])["text"].to_pylist()
    assert ops and not ops & set(t.strings.values.tolist())
    assert ops <= {x.split(", ")[0] for x in texts}


def _result_json(trace) -> str:
    import json

    from nsysdoc.analysis import analyze

    return json.dumps(analyze(trace).result, sort_keys=True, default=str)


def test_a_trace_read_without_cache_reads_its_rows_from_mapped_files(tmp_path, monkeypatch):
    """Without the cache the store's blocks are written to a private folder and read from the
    memory-mapped files (none held in memory); where nothing can be written (the spill writer
    fails) they stay in memory. Both give the same report."""
    from nsysdoc.trace import store as store_m

    path = steady_training().write_kineto(tmp_path / "t.pt.trace.json")
    mapped = K.load_kineto(path, cache=False)
    st = mapped.store
    assert st.map_files and st.in_memory == 0
    assert all(b.data is None and b.group >= 0 for t in st.tables.values() for b in t.blocks)
    assert sum(len(t.blocks) for t in st.tables.values()) > 0
    folder = st._own_tmp
    assert folder is not None and folder.is_dir()

    def fail(self, table, part):
        raise store_m.SpillError("cannot write spilled rows: disk full")

    monkeypatch.setattr(store_m._Writer, "put", fail)
    held = K.load_kineto(path, cache=False)
    assert not held.store.map_files and held.store.in_memory > 0
    assert all(b.data is not None for t in held.store.tables.values() for b in t.blocks)
    assert _result_json(mapped) == _result_json(held)
    st.close()
    assert not folder.exists()  # the private folder goes with the store


def test_a_text_column_read_for_one_pass_is_not_kept(tmp_path):
    """``Table.read_text`` of a mapped store gives the block's texts (as ``read_block`` does),
    read into memory and not kept in the store's read cache."""
    path = steady_training().write_kineto(tmp_path / "t.pt.trace.json")
    t = K.load_kineto(path, cache=False)
    nv = t.store["nvtx"]
    before = dict(t.store._lru)
    for i in range(len(nv.blocks)):
        got = nv.read_text(i, "text")
        assert dict(t.store._lru) == before
        assert got.to_pylist() == nv.read_block(i, ["text"])["text"].to_pylist()


def test_shapes_are_matched_by_the_nvtx_row_of_each_range():
    """Operator ranges in forest order read from NVTX rows 9, 5, 3 (ranges 0 and 1 alike in
    thread, times and name); shaped rows 5 (code 0), 9 (code 1), 7 (code 2: no operator range)
    and 3 (code -1: shapes that do not parse). By hand: range 0 takes row 9's code 1, range 1
    row 5's code 0, range 2 none; two alike ranges keep their own shapes."""
    from nsysdoc.engine.shapes import _by_row

    got = _by_row(np.array([9, 5, 3]), np.array([5, 9, 7, 3]), np.array([0, 1, 2, -1]), ["a", "b", "c"])
    assert got.code.tolist() == [1, 0, -1] and got.texts == ["a", "b", "c"]
    assert _by_row(np.array([9, 5]), np.array([7]), np.array([2]), ["a", "b", "c"]) is None  # none matched


def test_the_attributor_built_from_the_plan_knows_each_operator_range_row(tmp_path):
    """The whole-capture attributor of a Kineto trace keeps each operator range's NVTX row: the
    row's own times and thread are the range's (and its forest input order is let go)."""
    from nsysdoc.analysis import compile_step_pattern
    from nsysdoc.engine.plan import make_plan

    path = steady_training().write_kineto(tmp_path / "t.pt.trace.json")
    t = K.load_kineto(path, cache=False)
    attr = make_plan(t, compile_step_pattern(None)).attr
    ops = attr.ops
    assert len(ops) > 10 and len(attr.op_row) == len(ops) and ops.order is None
    rows = t.store["nvtx"].read_all(["start_ns", "end_ns", "thread", "pos"])
    at = np.searchsorted(rows["pos"], attr.op_row)
    assert np.array_equal(rows["start_ns"][at], ops.start) and np.array_equal(rows["end_ns"][at], ops.end)
    assert np.array_equal(rows["thread"][at], ops.thread)


def test_memory_is_released_between_phases_unless_the_process_keeps_it(monkeypatch):
    """``release_between_phases`` hands freed memory back (Arrow's pool, glibc's heap) unless
    ``keep_freed_memory`` applied in this process (an Nsight Systems capture's report)."""
    from nsysdoc.trace import allocator as al

    trims = []
    monkeypatch.setattr(al, "_malloc_trim", lambda: trims.append(1))
    monkeypatch.setattr(al, "_KEEPS", True)
    assert al.release_between_phases() is False and trims == []
    monkeypatch.setattr(al, "_KEEPS", False)
    assert al.release_between_phases() is True and trims == [1]


def test_a_pytorch_trace_report_does_not_keep_freed_memory(tmp_path, monkeypatch):
    """The report of a PyTorch Profiler trace leaves glibc's defaults (its phases are built once:
    freed memory kept would only add to the peak); an Nsight Systems export's report keeps freed
    memory for its slices' reuse."""
    from nsysdoc import pipeline
    from nsysdoc.trace import store as store_m

    calls = []
    monkeypatch.setattr(store_m, "keep_freed_memory", lambda: calls.append(1) or True)
    scenario = steady_training()
    rules = pipeline.load_ruleset(no_config=True)
    pipeline.diagnose(scenario.write_kineto(tmp_path / "t.pt.trace.json"), rules, cache=False)
    assert calls == []
    pipeline.diagnose(scenario.write(tmp_path / "t.sqlite"), rules, cache=False)
    assert calls == [1]


def test_a_damaged_file_read_for_one_text_pass_is_one_line_and_the_entry_goes(tmp_path):
    """``read_text`` on a cache entry whose NVTX file was cut short: the one-line error a damaged
    block gives everywhere (CorruptFileError naming the table), and the entry is removed."""
    import pytest

    from nsysdoc.errors import CorruptFileError

    path = steady_training().write_kineto(tmp_path / "t.pt.trace.json")
    cache = tmp_path / "cache"
    K.load_kineto(path, cache_dir=cache)
    t = K.load_kineto(path, cache_dir=cache)
    assert t.from_cache and t.store.map_files
    nv = t.store["nvtx"]
    f = nv._file
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    with pytest.raises(CorruptFileError, match="stored rows of the nvtx table cannot be read"):
        nv.read_text(len(nv.blocks) - 1, "text")
    assert t.store.damaged and not t.store.cache_entry.exists()
