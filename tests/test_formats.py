"""nsysdoc.formats: what a path holds, decided in one place (issue 51). Each file here is made
by hand; the expected kind follows from the order in the module's docstring."""
from __future__ import annotations

import gzip
import os
import sqlite3

import pytest

from nsysdoc import formats as F


def test_input_kind_in_the_documented_order(tmp_path):
    db = tmp_path / "run.sqlite"
    sqlite3.connect(db).execute("CREATE TABLE t (x)").connection.close()
    gz = tmp_path / "w.pt.trace.json.gz"
    gz.write_bytes(gzip.compress(b'{"traceEvents": []}'))
    js = tmp_path / "w.trace"
    js.write_text(' \n[{"ph": "X"}]')  # starts with a JSON array: the Kineto reader's to refuse
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    sqlite_named_json = tmp_path / "x.json"  # the header wins over the name
    sqlite_named_json.write_bytes(db.read_bytes())
    assert F.input_kind(tmp_path / "RUN.NSYS-REP") == "nsys-report"  # by name, any case, not opened
    assert F.input_kind(tmp_path / "old.qdrep") == "nsys-report"
    assert F.input_kind(db) == "sqlite"
    assert F.input_kind(sqlite_named_json) == "sqlite"
    assert F.input_kind(gz) == "kineto"
    assert F.input_kind(js) == "kineto"
    assert F.input_kind(other) == "other"
    assert F.input_kind(tmp_path / "missing.json") == "other"  # left to the nsys path's "no such file"
    assert F.input_kind(tmp_path) == "other"  # a folder


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_never_opened(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    assert F.input_kind(fifo) == "other"  # would block forever if opened
    assert not F.is_sqlite(fifo) and not F.is_kineto_trace(fifo)


def test_names_folders_stand_for_and_stems():
    assert F.is_kineto_name("worker0.1234.pt.trace.json.gz")
    assert F.is_kineto_name("W.PT.TRACE.JSON")
    assert not F.is_kineto_name("run.nsysdoc.json") and not F.is_kineto_name("run.json")
    assert F.input_stem("/x/rank3.pt.trace.json.gz") == "rank3"
    assert F.input_stem("rank1.nsys-rep") == "rank1"
    assert F.input_stem("rank2.SQLITE") == "rank2"
    assert F.input_stem("notes.txt") == "notes"


def test_a_saved_report_is_told_from_a_trace_by_content(tmp_path):
    saved = tmp_path / "base.json"
    saved.write_text('{"nsysdoc_version": "0.1.0", "kind": "report"}')
    trace = tmp_path / "t.json"
    trace.write_text('{"schemaVersion": 1, "traceEvents": []}')
    assert F.is_saved_report_head(saved, b"{")
    assert not F.is_saved_report_head(trace, b"{")  # JSON too, but a capture
    assert not F.is_saved_report_head(tmp_path / "run.sqlite", b"SQLite format 3")
