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
