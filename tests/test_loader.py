"""Trace loader: detection, read-only access, schema variants, names, ids, cache."""
from __future__ import annotations

import hashlib
import os
import sqlite3

import numpy as np
import pytest

from nsysdoc.errors import CorruptFileError, EmptyCaptureError, InputError, NotNsysExportError, NotSqliteError
from nsysdoc.testing import Capture, global_tid
from nsysdoc.trace import load_trace, open_export
from nsysdoc.trace import schema as S
from nsysdoc.trace.columns import Columns

from .conftest import analyze_path


def small_capture(variant="2026", **kw) -> Capture:
    cap = Capture(variant=variant, **kw)
    t = cap.process(pid=777).thread()
    with t.range("ProfilerStep#1"):
        t.launch("void gemm_kernel<float>(float*)", 100)
        t.memcpy("HtoD", 1 << 20, pageable=True)
        t.item()
    return cap


def _digest(path) -> tuple[str, int]:
    data = open(path, "rb").read()
    return hashlib.sha256(data).hexdigest(), os.stat(path).st_mtime_ns


# --- refusing bad input ---------------------------------------------------------------------
def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_trace(tmp_path / "nope.sqlite")


def test_directory(tmp_path):
    with pytest.raises(InputError, match="directory"):
        load_trace(tmp_path)


def test_not_sqlite(tmp_path):
    p = tmp_path / "x.sqlite"
    p.write_text("hello, this is a text file\n" * 10)
    with pytest.raises(NotSqliteError, match="not an SQLite file"):
        load_trace(p)


def test_empty_file(tmp_path):
    p = tmp_path / "empty.sqlite"
    p.write_bytes(b"")
    with pytest.raises(NotSqliteError, match="empty"):
        load_trace(p)


def test_truncated_file(build, tmp_path):
    good = build(small_capture())
    data = good.read_bytes()
    bad = tmp_path / "truncated.sqlite"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptFileError, match="truncated"):
        load_trace(bad)


def test_corrupt_pages(build, tmp_path):
    good = build(small_capture())
    data = bytearray(good.read_bytes())
    # overwrite the second page onwards with garbage, keep the header intact
    for i in range(4096, len(data)):
        data[i] = (i * 7) & 0xFF
    bad = tmp_path / "corrupt.sqlite"
    bad.write_bytes(bytes(data))
    with pytest.raises((CorruptFileError, NotNsysExportError)):
        load_trace(bad, cache=False)


def test_plain_sqlite_is_refused(tmp_path):
    p = tmp_path / "app.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE users(id INTEGER, name TEXT)")
    con.commit()
    con.close()
    with pytest.raises(NotNsysExportError, match="not an Nsight Systems export"):
        load_trace(p)


def test_nvprof_database_is_refused(tmp_path):
    """nvprof/NVVP databases reuse the CUPTI_ACTIVITY_KIND_* names with another layout."""
    p = tmp_path / "nvprof.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE StringTable(_id_ INTEGER PRIMARY KEY, value TEXT)")
    con.execute("CREATE TABLE Version(version INTEGER)")
    con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(_id_ INTEGER PRIMARY KEY, start INTEGER, end INTEGER, name INTEGER)")
    con.commit()
    con.close()
    with pytest.raises(NotNsysExportError, match="nvprof"):
        load_trace(p)


def test_empty_capture(tmp_path):
    cap = Capture(trace=())
    cap.process()
    p = cap.write(tmp_path / "empty_capture.sqlite")
    with pytest.raises(EmptyCaptureError, match="empty"):
        load_trace(p)


# --- read-only ------------------------------------------------------------------------------
def test_input_is_never_modified(build, tmp_path_factory):
    p = build(small_capture())
    before = _digest(p)
    listing = sorted(os.listdir(p.parent))
    cache = tmp_path_factory.mktemp("cache")
    load_trace(p, cache=True, cache_dir=cache)
    load_trace(p, cache=True, cache_dir=cache)  # cache hit
    assert _digest(p) == before
    assert sorted(os.listdir(p.parent)) == listing  # no journal, lock or cache file beside it


def test_readonly_file_in_readonly_folder(build, tmp_path):
    p = build(small_capture())
    os.chmod(p, 0o444)
    os.chmod(p.parent, 0o555)
    try:
        trace = load_trace(p, cache=False)
        assert len(trace.kernels) == 1
    finally:
        os.chmod(p.parent, 0o755)


# --- schema variants ------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["2026", "2024", "2022"])
def test_variants_load(build, variant):
    p = build(small_capture(variant), name=f"v{variant}")
    trace = load_trace(p, cache=False)
    assert len(trace.kernels) == 1
    assert len(trace.memcpy) == 2
    assert trace.nsys_version is not None
    assert trace.traced["cuda_kernels"] and trace.traced["nvtx"]


def test_variants_give_identical_metrics(build):
    results = [analyze_path(build(small_capture(v), name=f"v{v}")) for v in ("2026", "2024", "2022")]
    for r in results[1:]:
        assert r["summary"] == results[0]["summary"]
        assert r["devices"][0]["busy_pct"] == results[0]["devices"][0]["busy_pct"]
        assert r["metrics"]["sync"]["sync_calls"] == results[0]["metrics"]["sync"]["sync_calls"]


def test_missing_optional_columns(tmp_path):
    """An export without globalPid/correlationId/greenContextId still loads (defaults)."""
    p = small_capture("2022").write(tmp_path / "old.sqlite")
    con = sqlite3.connect(p)
    con.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_MEMCPY DROP COLUMN srcKind")
    con.commit()
    con.close()
    trace = load_trace(p, cache=False)
    assert (trace.memcpy["host_kind"].to_numpy() == -1).sum() >= 1


# --- names and ids --------------------------------------------------------------------------
def test_api_suffix_stripped():
    assert S.strip_api_suffix("cudaLaunchKernel_v7000") == "cudaLaunchKernel"
    assert S.strip_api_suffix("cudaMemcpyAsync_v3020") == "cudaMemcpyAsync"
    assert S.strip_api_suffix("cuLaunchKernel") == "cuLaunchKernel"


def test_global_tid_decoding_including_high_hardware_ids():
    g = np.array([global_tid(1234, 5678), global_tid(1234, 5678, hw=0x81), global_tid(0xFFFFFF, 0xFFFFFF, hw=0xFF, vm=0xFF)],
                 dtype=np.int64)
    assert g[1] < 0  # hw id >= 0x80 makes the SQLite INTEGER negative
    assert S.decode_pid(g).tolist() == [1234, 1234, 0xFFFFFF]
    assert S.decode_tid(g).tolist() == [5678, 5678, 0xFFFFFF]
    assert S.decode_host(g).tolist() == [0, 0x8100, 0xFFFF]


def test_processes_and_threads(build):
    trace = load_trace(build(small_capture()), cache=False)
    assert trace.processes["pid"].tolist() == [777]
    assert 777 in trace.threads["tid"].tolist()
    assert trace.kernels["proc"].tolist() == [0]


def test_kernel_names_resolved(build):
    trace = load_trace(build(small_capture()), cache=False)
    assert trace.strings.get(int(trace.kernels["name_id"].iloc[0])) == "void gemm_kernel<float>(float*)"
    assert trace.strings.get(int(trace.kernels["short_id"].iloc[0])) == "gemm_kernel"


def test_api_kinds(build):
    trace = load_trace(build(small_capture()), cache=False)
    names = [S.strip_api_suffix(v) for v in trace.strings.lookup(trace.runtime["name_id"].to_numpy())]
    kinds = dict(zip(names, trace.runtime["api_kind"].tolist()))
    assert kinds["cudaLaunchKernel"] == S.API_LAUNCH
    assert kinds["cudaMemcpyAsync"] == S.API_ASYNC_COPY
    assert kinds["cudaStreamSynchronize"] == S.API_SYNC


def test_nvtx_registered_text_and_domains(tmp_path):
    cap = Capture()
    t = cap.process(pid=42).thread()
    with t.range("ProfilerStep#3", registered=True):
        with t.range("ncclAllReduce", domain="NCCL", registered=True):
            t.cpu(us=5)
    trace = load_trace(cap.write(tmp_path / "nvtx.sqlite"), cache=False)
    rows = dict(zip(trace.nvtx["text"], trace.nvtx["domain"]))
    assert rows == {"ProfilerStep#3": "", "ncclAllReduce": "NCCL"}


def test_gpu_rows_without_timestamps_are_dropped(build):
    p = build(small_capture())
    con = sqlite3.connect(p)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET start = 0, \"end\" = 0 WHERE copyKind = 2")
    con.commit()
    con.close()
    trace = load_trace(p, cache=False)
    assert len(trace.memcpy) == 1


def test_tables_missing_mean_not_traced(tmp_path):
    cap = small_capture()
    cap.trace = ("cuda",)
    trace = load_trace(cap.write(tmp_path / "cuda_only.sqlite"), cache=False)
    assert trace.traced["cuda_kernels"] and not trace.traced["nvtx"] and not trace.traced["osrt"]
    assert len(trace.nvtx) == 0


# --- cache ----------------------------------------------------------------------------------
def test_cache_roundtrip_is_identical(build, tmp_path):
    p = build("sample_training")
    cold = load_trace(p, cache=True, cache_dir=tmp_path / "c")
    warm = load_trace(p, cache=True, cache_dir=tmp_path / "c")
    assert not cold.from_cache and warm.from_cache
    for name in ("kernels", "memcpy", "runtime", "nvtx", "osrt", "devices", "processes", "threads", "gpu_metrics"):
        a, b = getattr(cold, name), getattr(warm, name)
        assert list(a.columns) == list(b.columns), name
        if isinstance(a, Columns):  # the small tables
            assert isinstance(b, Columns) and {k: b[k].dtype for k in b.columns} == {k: a[k].dtype for k in a.columns}
            a, b = a.to_pandas(), b.to_pandas()
        assert a.equals(b), name
    from nsysdoc.analysis import analyze

    assert analyze(cold).to_dict() == analyze(warm).to_dict()


def test_cache_invalidated_when_file_changes(build, tmp_path):
    p = build(small_capture())
    load_trace(p, cache=True, cache_dir=tmp_path / "c")
    con = sqlite3.connect(p)
    con.execute('DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL')
    con.commit()
    con.close()
    os.utime(p, ns=(os.stat(p).st_atime_ns, os.stat(p).st_mtime_ns + 10**9))
    again = load_trace(p, cache=True, cache_dir=tmp_path / "c")
    assert not again.from_cache
    assert len(again.kernels) == 0


def test_unwritable_cache_is_not_an_error(build, tmp_path):
    p = build(small_capture())
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x")
    trace = load_trace(p, cache=True, cache_dir=blocker / "sub")
    assert len(trace.kernels) == 1


def test_export_metadata(build):
    exp = open_export(build(small_capture("2022"), name="old"))
    assert exp.nsys_version == "2022.4.2.1"
    assert exp.schema_version == "3.0.0"


def test_streams_are_process_device_context_stream(tmp_path):
    cap = Capture(gpu_names={0: "A", 1: "B"})
    a = cap.process(pid=10, device=0).thread()
    b = cap.process(pid=11, device=0).thread()
    a.launch("k", 10, stream=7)
    a.launch("k", 10, stream=7)
    a.launch("k", 10, stream=13)
    b.launch("k", 10, stream=7)        # same stream id, other process: another stream
    a.launch("k", 10, stream=7, device=1)  # same process and stream id, other device
    trace = load_trace(cap.write(tmp_path / "streams.sqlite"), cache=False)
    assert len(trace.streams) == 4
    k = trace.kernels.sort_values("start_ns")
    assert k["stream"].nunique() == 4
    st = trace.streams.to_pandas().set_index("stream")
    for row in k.itertuples():
        assert st.loc[row.stream, "stream_id"] == row.stream_id
        assert st.loc[row.stream, "device"] == row.device


def test_stdlib_fallback_reads_the_same_as_adbc(build, monkeypatch):
    """Without the ADBC driver the stdlib cursor path must give identical tables."""
    from nsysdoc.trace.sqlite import chunks as sqlite_reader  # issue 51: the package looks it up there

    p = build("sample_training")
    fast = load_trace(p, cache=False)
    monkeypatch.setattr(sqlite_reader, "_adbc_module", lambda: None)
    slow = load_trace(p, cache=False)
    for name in ("kernels", "memcpy", "runtime", "osrt", "sync"):
        a, b = getattr(fast, name), getattr(slow, name)
        assert list(a.columns) == list(b.columns), name
        assert a.equals(b), name


@pytest.mark.slow  # issue 50: many chunk sizes read (0.9 s of CPU); .ci/run runs it
def test_chunked_reads_match_one_query(build, monkeypatch):
    """Rowid-range chunks (forced small here) reassemble the table exactly, including a gap in rowids."""
    from nsysdoc.trace.sqlite import chunks as sqlite_reader  # issue 51: the package looks it up there

    p = build("sample_training")
    con = sqlite3.connect(p)
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid BETWEEN 100 AND 150")
    con.commit()
    con.close()
    whole = load_trace(p, cache=False)
    monkeypatch.setattr(sqlite_reader, "CHUNK_ROWS", 97)
    chunked = load_trace(p, cache=False)
    assert len(whole.kernels) == len(chunked.kernels) == 3516 - 51
    assert whole.kernels.equals(chunked.kernels)


def test_grow_column_reserves_widens_and_trims():
    from nsysdoc.trace.sqlite.codes import _Grow

    g = _Grow(np.int16)
    g.reserve(5)
    g.add(np.array([1, 2], dtype=np.int64))
    g.add(np.array([40_000], dtype=np.int64))  # past int16: widened once, earlier values kept
    assert g.a.dtype == np.int32
    g.add(np.arange(4))  # past the reserve: grows
    out = g.done()
    assert out.tolist() == [1, 2, 40_000, 0, 1, 2, 3] and out.dtype == np.int32
    assert out.base is None  # a copy of the filled part, not a view holding the reserve
    full = _Grow(np.uint32)
    full.reserve(2)
    full.add(np.array([7, 8]))
    assert full.done().tolist() == [7, 8]


# --- timestamps on the UTC wall clock (nsys export --ts-normalize=true) ----------------------
def _same_but_file(d):
    """A report without what depends on the file name or the load time."""
    if isinstance(d, dict):
        return {k: _same_but_file(v) for k, v in d.items() if not any(w in k for w in ("path", "file", "seconds"))}
    if isinstance(d, list):
        return [_same_but_file(v) for v in d]
    return d


@pytest.mark.parametrize("scenario", ["sample_training", "jit_warmup_then_steady", "operators_forward_backward",
                                      "no_step_markers"])
def test_absolute_timestamps_give_the_report_of_session_timestamps(scenario, tmp_path):
    """The same capture exported with session-relative and with absolute (epoch) timestamps: the
    loader tells them apart (``clock``) and puts both on the session timeline, so every number of
    the report — step starts, idle gaps, capture framing, GPU metrics — is the same."""
    from nsysdoc.testing import scenarios

    from .conftest import diagnose_path

    cap = getattr(scenarios, scenario)()
    cap.diagnostic("CUDA event collection stalled", at_ns=cap.start_ns + 5_000_000)
    cap.profiler_overhead(cap.start_ns + 1_000_000, cap.start_ns + 2_000_000)
    rel = cap.write(tmp_path / "rel.sqlite")
    cap.absolute_timestamps = True
    abs_ = cap.write(tmp_path / "abs.sqlite")
    con = sqlite3.connect(abs_)
    first = con.execute("SELECT min(start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    stop = con.execute("SELECT stopTime FROM ANALYSIS_DETAILS").fetchone()[0]
    con.close()
    assert first > cap.utc_epoch_ns and stop > cap.utc_epoch_ns  # the export really is on the epoch
    t_rel, t_abs = load_trace(rel, cache=False), load_trace(abs_, cache=False)
    assert (t_rel.clock, t_abs.clock) == ("session", "absolute")
    assert t_rel.session_start_utc_ns == t_abs.session_start_utc_ns == cap.utc_epoch_ns
    assert int(t_abs.kernels["start_ns"].min()) == first - cap.utc_epoch_ns
    assert t_abs.diagnostics["timestamp_ns"].tolist() == t_rel.diagnostics["timestamp_ns"].tolist() == [1_005_000_000]
    assert t_abs.overhead["start_ns"].tolist() == [1_001_000_000]
    assert _same_but_file(diagnose_path(abs_)) == _same_but_file(diagnose_path(rel))


def test_absolute_timestamps_survive_the_cache(tmp_path):
    cap = small_capture(absolute_timestamps=True)
    p = cap.write(tmp_path / "abs.sqlite")
    first = load_trace(p, cache_dir=tmp_path / "cache")
    again = load_trace(p, cache_dir=tmp_path / "cache")
    assert again.from_cache and (first.clock, again.clock) == ("absolute", "absolute")
    assert again.kernels["start_ns"].tolist() == first.kernels["start_ns"].tolist()
    assert 0 < int(again.kernels["start_ns"].min()) < 2_000_000_000


def test_absolute_timestamps_without_a_session_start(tmp_path):
    """No TARGET_INFO_SESSION_START_TIME: epoch-sized times are still absolute; the earliest time
    sampled (the first rows of the event tables) stands for the session start."""
    cap = small_capture(absolute_timestamps=True)
    p = cap.write(tmp_path / "abs.sqlite")
    con = sqlite3.connect(p)
    con.execute("DROP TABLE TARGET_INFO_SESSION_START_TIME")
    first_api = con.execute("SELECT min(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    con.commit()
    con.close()
    t = load_trace(p, cache=False)
    assert t.clock == "absolute" and t.session_start_utc_ns == first_api
    assert int(t.runtime["start_ns"].min()) == 0
    # session-relative times without a session start stay as they are
    q = small_capture().write(tmp_path / "rel.sqlite")
    con = sqlite3.connect(q)
    con.execute("DROP TABLE TARGET_INFO_SESSION_START_TIME")
    con.commit()
    con.close()
    t = load_trace(q, cache=False)
    assert t.clock == "session" and t.session_start_utc_ns is None


def test_many_distinct_nvtx_texts_decode_as_few_do(tmp_path, monkeypatch):
    """A chunk with more distinct NVTX texts than PYTHON_GROUPING_MAX keeps them in Arrow when
    they are valid UTF-8 and short, else decodes each in Python: both ways give the texts a small
    capture gets (replacement characters for invalid bytes, the cap for long texts)."""
    from nsysdoc.trace.sqlite import nvtx as R  # issue 51: the NVTX reader's module
    from nsysdoc.trace.tables import MAX_STRING_CHARS, cap

    if R.chunked._adbc_module() is None:
        pytest.skip("the ADBC driver (Arrow columns) is not installed")
    kept = []
    real = R._utf8_as_is
    monkeypatch.setattr(R, "_utf8_as_is", lambda d: kept.append(real(d) is not None) or real(d))

    def build(n, path, variant):
        c = Capture()
        t = c.process(pid=9).thread()
        with t.range("ProfilerStep#1"):
            for i in range(n):
                with t.range(f"aten::add_, seq = {i}, op_id = {i}"):
                    t.launch("k", 1)
        f = c.write(path)
        con = sqlite3.connect(f)
        if variant == "long":
            con.execute(f"UPDATE {S.NVTX} SET text = 'long ' || printf('%.*c', {MAX_STRING_CHARS + 10}, 'x') "
                        f"WHERE text = 'aten::add_, seq = 1, op_id = 1'")
        if variant == "damaged":
            con.execute(f"UPDATE {S.NVTX} SET text = CAST(x'fffe41' AS TEXT) || ', seq = 2' "
                        f"WHERE text = 'aten::add_, seq = 2, op_id = 2'")
        con.commit()
        con.close()
        return f

    for variant in ("clean", "long", "damaged"):
        texts = {}
        for n in (50, 5000):
            kept.clear()
            tr = load_trace(build(n, tmp_path / f"t{n}{variant}.sqlite", variant), cache=False)
            got = tr.store.get("nvtx").read_all(["text", "text_group", "seq"])
            texts[n] = got["text"].to_pylist()[:50]
            groups = [tr.nvtx_groups[g] for g in got["text_group"][:50]]
            assert groups[5] == "aten::add_" and got["seq"][5] == 4  # row 0 is the step
            # the Arrow path, when it can (per row: these texts are all distinct)
            assert (kept == [True]) if n == 5000 and variant == "clean" else not any(kept)
            assert bool(kept) == (n == 5000)
        assert texts[50] == texts[5000]
        assert (texts[50][2] == cap("long " + "x" * (MAX_STRING_CHARS + 10))) == (variant == "long")
        assert ("\ufffd" in texts[50][3]) == (variant == "damaged")


def test_nvtx_chunks_with_other_storage_classes_read_as_the_stdlib_path(tmp_path, monkeypatch):
    """NVTX chunks are read with their integer columns as stored, and again with every value that
    is not an integer as NULL when one holds a real, a text or a blob; a text cell that is not
    text (a blob; the driver would make it a string) is NULL either way. Clean chunks take the first read only, and the
    tables equal the stdlib cursor's (which always reads the second way)."""
    from nsysdoc.trace.sqlite import chunks as R  # issue 51: _adbc_module and CHUNK_ROWS are looked up there
    from nsysdoc.trace.sqlite import ingest  # (and the ingest builds the NVTX reader)

    if R._adbc_module() is None:
        pytest.skip("the ADBC driver (Arrow columns) is not installed")
    c = Capture()
    t = c.process(pid=9).thread()
    for s in range(4):
        with t.range(f"ProfilerStep#{s}"):
            for i in range(40):
                with t.range(f"aten::mm, seq = {i}, op_id = {s * 40 + i}"):
                    t.launch("k", 5)
    p = c.write(tmp_path / "mixed.sqlite")
    con = sqlite3.connect(p)
    n = con.execute(f"SELECT max(rowid) FROM {S.NVTX}").fetchone()[0]
    assert n > 150
    con.execute(f'UPDATE {S.NVTX} SET "end" = "end" + 0.5 WHERE rowid = 20')           # a real
    con.execute(f"UPDATE {S.NVTX} SET globalTid = 'x' WHERE rowid = 45")                # a text
    con.execute(f"UPDATE {S.NVTX} SET domainId = x'00' WHERE rowid = 70")               # a blob
    con.execute(f"UPDATE {S.NVTX} SET text = x'4142' WHERE rowid = 101")               # a blob text
    assert con.execute(f"SELECT typeof(text) FROM {S.NVTX} WHERE rowid = 101").fetchone()[0] == "blob"
    con.commit()
    con.close()
    monkeypatch.setattr(R, "CHUNK_ROWS", 25)
    safe_reads = []
    real_sql = {}

    class Counting(ingest._NvtxReader):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            real_sql["safe"] = self.sql

    monkeypatch.setattr(ingest, "_NvtxReader", Counting)
    mod = R._adbc_module()

    class Con:
        def __init__(self, inner):
            self.inner = inner

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self.inner.__exit__(*exc)

        def cursor(self):
            cur = self.inner.cursor()
            execute = cur.execute

            def counted(sql, parameters=None):
                if sql == real_sql.get("safe"):
                    safe_reads.append(parameters)
                return execute(sql, parameters=parameters)
            cur.execute = counted
            return cur

    class Mod:
        def connect(self, uri):
            return Con(mod.connect(uri).__enter__())

    monkeypatch.setattr(R, "_adbc_module", lambda: Mod())
    fast = load_trace(p, cache=False)
    # rows 20, 45, 70 fall in three of the 25-row chunks; the text cells never force a second
    # read (the wider reads are the sample that finds the table's median start)
    assert sorted(lo for lo, hi in safe_reads if hi - lo == 25) == [1, 26, 51]
    monkeypatch.setattr(R, "_adbc_module", lambda: None)
    slow = load_trace(p, cache=False)
    cols = ["start_ns", "end_ns", "event_type", "global_tid", "text", "text_group", "seq", "thread"]
    a = fast.store.get("nvtx").read_all(cols)
    b = slow.store.get("nvtx").read_all(cols)
    for k in cols:
        va = a[k].to_pylist() if hasattr(a[k], "to_pylist") else np.asarray(a[k]).tolist()
        vb = b[k].to_pylist() if hasattr(b[k], "to_pylist") else np.asarray(b[k]).tolist()
        assert va == vb, k
    assert fast.nvtx_groups == slow.nvtx_groups
