"""Unit tests of the hardening pieces (issue 12) on hand-computed examples; the end-to-end hostile
cases run the CLI in tests/test_hostile_inputs.py."""
from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import numpy as np
import pytest

from nsysdoc import cache, safe_regex
from nsysdoc.errors import InputError, UsageError
from nsysdoc.inputs import check_outputs, expand_inputs, read_text, regular_file
from nsysdoc.trace import tables as F
from nsysdoc.trace import load_trace
from nsysdoc.trace.sqlite import load as R  # issue 51: load_export looks these names up there
from nsysdoc.trace.cache_entry import wait_for_cache_writes


# --------------------------------------------------------------------------------------------
# row validation
# --------------------------------------------------------------------------------------------
def _rows(start, end, dev=None):
    d = {"start_ns": np.array(start, dtype=np.int64), "end_ns": np.array(end, dtype=np.int64)}
    if dev is not None:
        d["device_id"] = np.array(dev, dtype=np.int64)
    return d


def test_validate_counts_each_reason_by_hand():
    B = F.BAD
    start = [100, 200, B, 300, 0, 500, 400, 600, 1 << 62]
    end = [150, 250, 10, 290, 0, 550, 450, (1 << 63) - 1, (1 << 62) + 5]
    dev = [0, 0, 0, 0, 0, B, 0, 0, 0]
    drops = F.Drops()
    out = F.validate(_rows(start, end, dev), "K", None, drops)
    # kept: rows 0, 1, 6 (row 7 ends beyond 2^61, row 8 starts beyond it)
    assert out["start_ns"].tolist() == [100, 200, 400]
    assert {(r["reason"], r["rows"]) for r in drops.as_list()} == {
        ("start or end NULL or not an integer", 1), ("deviceId, contextId or streamId NULL or out of range", 1),
        ("no timestamps (start = end = 0)", 1), ("end before start", 1),
        ("time outside the capture's session", 2)}


def test_validate_uses_the_session_duration_around_the_median():
    # 5 rows around t = 10 s and one at 10 s + 3 s; duration 1 s (+1 s slack) -> the last is outside
    s = 10_000_000_000
    start = [s, s + 1000, s + 2000, s + 3000, s + 4000, s + 3_000_000_000]
    drops = F.Drops()
    out = F.validate(_rows(start, [x + 10 for x in start]), "K", 1_000_000_000, drops)
    assert len(out["start_ns"]) == 5
    assert drops.as_list() == [{"table": "K", "reason": "time outside the capture's session", "rows": 1}]
    # negative times (nsys export --ts-shift) are valid
    drops = F.Drops()
    assert len(F.validate(_rows([-50, -40], [-45, -30]), "K", 1000, drops)["start_ns"]) == 2
    assert drops.as_list() == []


def test_nvtx_marks_without_an_end_are_kept():
    drops = F.Drops()
    out = F.validate(_rows([100, 200], [F.BAD, 250]), "NVTX_EVENTS", None, drops, end_optional=True)
    assert out["start_ns"].tolist() == [100, 200] and drops.as_list() == []


def test_a_fresh_load_has_exactly_the_cached_frame_columns(build):
    from nsysdoc.trace import load_trace

    t = load_trace(build("ddp_nccl"), cache=False)
    for name, cols in F.FRAME_COLUMNS.items():
        assert tuple(getattr(t, name).columns) == cols, name


# --------------------------------------------------------------------------------------------
# cache
# --------------------------------------------------------------------------------------------
def test_cache_key_changes_when_content_changes_with_mtime_restored(tmp_path):
    f = tmp_path / "x.sqlite"
    f.write_bytes(b"a" * 100)
    before = cache.entry_path(tmp_path / "c", f, "trace", 1)
    st = f.stat()
    time.sleep(0.01)
    with open(f, "r+b") as fh:  # same size, same inode
        fh.write(b"b")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert f.stat().st_mtime_ns == st.st_mtime_ns and f.stat().st_size == st.st_size
    assert cache.entry_path(tmp_path / "c", f, "trace", 1) != before  # ctime moved
    assert cache.entry_path(tmp_path / "c", f, "trace", 2) != cache.entry_path(tmp_path / "c", f, "trace", 1)


def _entry(folder: Path, name: str, size: int, used: float) -> Path:
    e = folder / name
    e.mkdir(parents=True)
    (e / "data").write_bytes(b"x" * size)
    os.utime(e, (used, used))
    return e


def test_eviction_removes_least_recently_used_until_under_the_cap(tmp_path):
    old = _entry(tmp_path, "trace-" + "a" * 24, 1000, 1000)
    mid = _entry(tmp_path, "export-" + "b" * 24, 1000, 2000)
    new = _entry(tmp_path, "trace-" + "c" * 24, 1000, 3000)
    mine = tmp_path / "my-notes"  # not an entry: never counted or touched
    mine.mkdir()
    (mine / "keep.txt").write_text("x" * 5000)
    freed = cache.evict(tmp_path, limit=2000, keep=new)
    assert freed == 1000 and not old.exists() and mid.exists() and new.exists() and mine.exists()
    cache.touch(mid)  # now the most recent: new goes next
    os.utime(new, (1500, 1500))
    cache.evict(tmp_path, limit=1000)
    assert mid.exists() and not new.exists()
    info = cache.info(tmp_path)
    assert info["entries"] == 1 and info["bytes"] == 1000
    assert cache.clear(tmp_path) == (1, 1000) and mine.exists()


def test_cache_size_cap_from_the_environment():
    assert cache.max_bytes({"NSYSDOC_CACHE_MAX_MB": "1"}) == 1 << 20
    assert cache.max_bytes({"NSYSDOC_CACHE_MAX_MB": "lots"}) == cache.DEFAULT_MAX_MB << 20
    assert cache.max_bytes({}) == cache.DEFAULT_MAX_MB << 20


def test_a_wrong_shaped_cache_entry_is_rebuilt(build, tmp_path):
    from nsysdoc.trace import load_trace

    path = build("healthy_training")
    first = load_trace(path, cache_dir=tmp_path)
    wait_for_cache_writes()
    (entry,) = [p for p in tmp_path.iterdir() if p.name.startswith("trace-")]
    assert load_trace(path, cache_dir=tmp_path).from_cache
    (entry / "meta.json").write_text("{}")
    again = load_trace(path, cache_dir=tmp_path)
    assert not again.from_cache and len(again.kernels) == len(first.kernels)
    wait_for_cache_writes()
    import pyarrow as pa
    import pyarrow.ipc as ipc

    t = pa.table({"wrong": [1, 2]})
    with ipc.new_file(str(entry / "kernels.arrow"), t.schema) as w:
        w.write_table(t)
    third = load_trace(path, cache_dir=tmp_path)
    assert not third.from_cache and len(third.kernels) == len(first.kernels)


# --------------------------------------------------------------------------------------------
# inputs and outputs
# --------------------------------------------------------------------------------------------
def test_non_regular_inputs_are_refused_without_opening(tmp_path):
    fifo = tmp_path / "p.sqlite"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="named pipe"):
        regular_file(fifo)
    with pytest.raises(InputError, match="is a device"):
        regular_file("/dev/null", "rule")
    with pytest.raises(InputError, match="named pipe"):
        read_text(fifo, "config")


def test_read_text_refuses_binary_big_and_non_utf8(tmp_path):
    f = tmp_path / "r.yaml"
    f.write_bytes(b"id: x\n\xff\xfe\n")
    with pytest.raises(InputError, match=r"r.yaml:2: rule file is not UTF-8"):
        read_text(f, "rule")
    f.write_bytes(b"a\x00b")
    with pytest.raises(InputError, match="binary"):
        read_text(f, "rule")
    f.write_bytes(b"a" * 2000)
    with pytest.raises(InputError, match="larger than 1 kB"):
        read_text(f, "rule", max_bytes=1024)


def test_outputs_never_replace_inputs(tmp_path):
    a = tmp_path / "a.sqlite"
    a.write_bytes(b"x")
    (tmp_path / "link.sqlite").symlink_to(a)
    os.link(a, tmp_path / "hard.sqlite")
    for out in (a, tmp_path / "link.sqlite", tmp_path / "hard.sqlite", tmp_path / "." / "a.sqlite"):
        with pytest.raises(UsageError, match="would overwrite the input"):
            check_outputs([out], [a])
    with pytest.raises(UsageError, match="same file"):
        check_outputs([tmp_path / "o.json", tmp_path / "o.json"], [a])
    check_outputs([tmp_path / "a.nsysdoc.json"], [a])  # a new file is fine


def test_the_same_file_twice_is_one_input(tmp_path):
    a = tmp_path / "a.sqlite"
    a.write_bytes(b"x")
    (tmp_path / "l.sqlite").symlink_to(a)
    seen: set = set()
    assert expand_inputs([a], seen) + expand_inputs([tmp_path / "l.sqlite"], seen) == [str(a)]


# --------------------------------------------------------------------------------------------
# regexes, expressions, display
# --------------------------------------------------------------------------------------------
def test_re2_is_linear_where_backtracking_is_not():
    t0 = time.perf_counter()
    assert safe_regex.compile("(a+)+$").search("a" * 5000 + "!") is None
    assert time.perf_counter() - t0 < 0.5
    with pytest.raises(safe_regex.PatternError, match="backreferences"):
        safe_regex.compile(r"(a)\1")
    assert safe_regex.compile(r"step#(\d+)", ignore_case=True).fullmatch("STEP#12").group(1) == "12"


def test_expression_budgets():
    from nsysdoc.rules.expr import ExprError, compile_expr

    with pytest.raises(ExprError, match="longer than 2000"):
        compile_expr("+".join(["1"] * 3000))
    with pytest.raises(ExprError, match="nested deeper"):
        compile_expr("not " * 100 + "true")
    e = compile_expr("round(x, n)")
    assert e.evaluate({"x": 1234.5678, "n": 2}) == 1234.57
    with pytest.raises(ExprError, match="within -30..30"):
        e.evaluate({"x": 1, "n": -1_000_000_000})
    assert compile_expr("x * x").evaluate({"x": 1 << 200}) == pytest.approx(float(1 << 400))


def test_format_spec_caps():
    from nsysdoc.rules.text import check_spec

    assert check_spec("gpu_busy_pct", ".1f", False) is None
    assert "capped" in check_spec("gpu_busy_pct", ".100000000f", False)
    assert "capped" in check_spec("gpu_busy_pct", ">2000000000", False)


def test_invisible_characters_are_shown_and_long_text_cut():
    from nsysdoc.views.render import _clean, shorten, visible

    assert visible("ab\u202ec\u200b") == "ab<U+202E>c<U+200B>"
    assert _clean("x\u202ey") == "x<U+202E>y"
    assert shorten("a" * 2010) == "a" * 2000 + "... [10 more characters]"


def test_capped_result_keeps_every_step_time():
    from nsysdoc.compare import _primary
    from nsysdoc.views.build import MAX_STEP_RECORDS, capped_result

    n = MAX_STEP_RECORDS + 5
    steps = [{"primary": True, "index": i, "pid": 1, "step_time_ms": float(i)} for i in range(n)]
    out = capped_result({"steps": steps})
    assert len(out["steps"]) == MAX_STEP_RECORDS and out["steps_truncated"] == {"shown": MAX_STEP_RECORDS, "total": n}
    assert json.loads(json.dumps(out))["step_series"]["step_time_ms"][-1] == float(n - 1)
    assert [s["step_time_ms"] for s in _primary(out)] == [float(i) for i in range(n)]
    assert capped_result({"steps": steps[:3]}) == {"steps": steps[:3]}


# --------------------------------------------------------------------------------------------
# compiled report templates (Jinja's bytecode cache in the nsysdoc cache)
# --------------------------------------------------------------------------------------------
def test_report_templates_are_compiled_once_and_a_damaged_file_is_a_miss(build, tmp_path):
    from nsysdoc.analysis import analyze
    from nsysdoc.views import render
    from nsysdoc.trace import load_trace

    a = analyze(load_trace(build("healthy_training"), cache=False))
    plain = render.render_html(a)
    folder = cache.templates_dir(tmp_path)
    assert folder is not None and folder.name.startswith("templates-") and (folder.stat().st_mode & 0o777) == 0o700
    render.environment.cache_clear()
    assert render.render_html(a, bytecode_dir=folder) == plain
    files = sorted(folder.glob("__jinja2_*.cache"))
    assert len(files) >= 1  # the page and the templates it includes
    render.environment.cache_clear()  # a new process: templates come from the files, same page
    assert render.render_html(a, bytecode_dir=folder) == plain
    from jinja2.bccache import bc_magic

    for f in files:  # damaged after a valid header (Jinja itself would raise): recompiled, no error
        f.write_bytes(bc_magic + b"\x80\x05garbage")
    render.environment.cache_clear()
    assert render.render_html(a, bytecode_dir=folder) == plain
    assert cache.info(tmp_path)["by_kind"]["templates"] == 1
    assert cache.clear(tmp_path)[0] == 1 and not folder.exists()


def test_templates_folder_refused_when_others_can_write_it(tmp_path):
    folder = cache.templates_dir(tmp_path)
    folder.chmod(0o777)
    assert cache.templates_dir(tmp_path) is None
    folder.rmdir()
    (tmp_path / folder.name).symlink_to(tmp_path)
    assert cache.templates_dir(tmp_path) is None


def test_html_report_with_no_cache_writes_no_compiled_templates(build, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from nsysdoc.cli import app

    monkeypatch.setenv("NSYSDOC_CACHE_DIR", str(tmp_path / "c"))
    path = build("healthy_training")
    r = CliRunner().invoke(app, ["report", str(path), "--no-cache", "-o", str(tmp_path / "a.html")])
    assert r.exit_code in (0, 1), r.output
    assert not list((tmp_path / "c").glob("templates-*"))
    r = CliRunner().invoke(app, ["report", str(path), "-o", str(tmp_path / "b.html")])
    assert r.exit_code in (0, 1), r.output
    assert list((tmp_path / "c").glob("templates-*/__jinja2_*.cache"))
    assert (tmp_path / "a.html").read_bytes() == (tmp_path / "b.html").read_bytes()


_REUSE_PROBE = """
import resource, sys
import numpy as np
from nsysdoc.trace.store import keep_freed_memory
try:  # numpy's huge-page hint would hide the 4 KB faults this counts
    from numpy._core.multiarray import _set_madvise_hugepage
    _set_madvise_hugepage(False)
except ImportError:
    pass
if sys.argv[1] == "keep" and not keep_freed_memory():
    print("not glibc"); sys.exit(0)
a = np.ones(20 << 17); del a  # 20 MB touched, then freed
r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
b = np.ones(20 << 17)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0)
"""


def test_the_command_line_reuses_freed_memory_instead_of_faulting_it_in_again():
    """With keep_freed_memory() (the report path calls it) a freed 20 MB array's pages serve the
    next one; glibc's default maps it afresh: 5,120 page faults on first touch."""
    import subprocess
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("glibc allocator tuning")
    run = lambda mode: subprocess.run([sys.executable, "-c", _REUSE_PROBE, mode], capture_output=True, text=True,
                                      check=True).stdout.strip()
    kept = run("keep")
    if kept == "not glibc":
        pytest.skip("no glibc mallopt")
    assert int(kept) < 500, kept
    assert int(run("default")) > 4000  # the probe can tell the difference


def test_the_slice_loop_releases_memory_only_once_it_has_grown(monkeypatch):
    """Releaser (called after every slice): the first release once the process holds
    RELEASE_RSS_BYTES, then only at 64 MB more than just before the previous one; a process
    that cannot measure itself releases every time."""
    from nsysdoc.trace import allocator as store  # issue 51: the allocator release, apart from the store

    trims = []
    monkeypatch.setattr(store, "_malloc_trim", lambda: trims.append(rss[0]))
    mb = 1 << 20
    rss = [0]
    monkeypatch.setattr(store, "resident_bytes", lambda: rss[0])
    r = store.Releaser()
    assert store.RELEASE_GROWTH_BYTES == 64 * mb
    # below the floor nothing is released, and nothing is remembered
    for v in (100, 600, 639):
        rss[0] = v * mb
        assert r() is False
    # 640 MB: released; then 640 + 64 = 704 MB is the next threshold
    for v, want in ((640, True), (700, False), (703, False), (704, True), (740, False), (768, True), (500, False),
                    (831, False), (832, True)):
        rss[0] = v * mb
        assert r() is want, v
    assert trims == [640 * mb, 704 * mb, 768 * mb, 832 * mb] and r.releases == 4
    # no measurement: every call releases
    monkeypatch.setattr(store, "resident_bytes", lambda: None)
    trims.clear()
    r2 = store.Releaser()
    assert [r2(), r2(), r2()] == [True, True, True] and len(trims) == 3


# --------------------------------------------------------------------------------------------
# issue 30: atomic outputs, the cache failing without failing the report, the Dask probe
# --------------------------------------------------------------------------------------------
def test_atomic_write_keeps_the_previous_file_when_the_write_fails(tmp_path, monkeypatch):
    """ENOSPC half-way through: OutputError, the previous file byte for byte, no temporary file."""
    import errno

    from nsysdoc import outputs
    from nsysdoc.errors import OutputError

    target = tmp_path / "report.html"
    target.write_text("PREVIOUS")
    real_write, calls = os.write, []

    def write(fd, data):
        calls.append(len(data))
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, bytes(data[:10]))  # a short write first: the helper must loop
    monkeypatch.setattr(outputs.os, "write", write)
    with pytest.raises(OutputError) as e:
        outputs.write_text_atomic(target, "NEW" * 1000)
    assert "No space left" in e.value.message and len(calls) == 2
    assert target.read_text() == "PREVIOUS" and sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_atomic_write_replaces_and_creates_folders(tmp_path):
    from nsysdoc import outputs

    target = tmp_path / "a" / "b" / "r.json"
    outputs.write_text_atomic(target, "one")
    outputs.write_text_atomic(target, "two \udcff")  # a surrogate from a non-UTF-8 name: replaced
    assert target.read_text(encoding="utf-8") == "two ?" and sorted(os.listdir(target.parent)) == ["r.json"]
    assert oct(target.stat().st_mode & 0o777) != oct(0o600)  # the usual permissions, not mkstemp's


def test_output_names_over_name_max_are_refused(tmp_path):
    from nsysdoc import outputs
    from nsysdoc.errors import OutputError

    outputs.check_output_name(tmp_path / ("x" * 250 + ".json"))
    with pytest.raises(OutputError, match="at most 255"):
        outputs.check_output_name(tmp_path / ("x" * 251 + ".json"))
    with pytest.raises(OutputError):  # counted in bytes: 128 two-byte characters
        outputs.check_output_name(tmp_path / ("é" * 128))


def _sample_copy(tmp_path: Path) -> Path:
    import shutil

    from nsysdoc.cli import sample_path

    dest = tmp_path / "run.sqlite"
    shutil.copyfile(sample_path(), dest)
    return dest


def test_a_cache_folder_removed_while_in_use_still_gives_the_trace(tmp_path, monkeypatch):
    """Another nsysdoc's cleanup removes the entry being written just before it is published: the
    capture is read again without the cache, and the problem recorded for the CLI's warning."""
    import shutil

    cap = _sample_copy(tmp_path)
    ref = load_trace(cap, cache=False)
    real = R.publish

    def vanish(tmp, *a, **kw):
        shutil.rmtree(tmp)
        return real(tmp, *a, **kw)
    monkeypatch.setattr(R, "publish", vanish)
    cache.take_problems()
    t = load_trace(cap, cache_dir=tmp_path / "c")
    assert len(t.kernels) == len(ref.kernels) and not t.from_cache
    probs = cache.take_problems()
    assert len(probs) == 1 and "cache" in probs[0]


def test_a_cache_folder_gone_before_the_first_block_still_gives_the_trace(tmp_path, monkeypatch):
    cap = _sample_copy(tmp_path)
    gone = tmp_path / "c" / ".tmp-gone"
    monkeypatch.setattr(R, "cache_tmp", lambda folder: gone)  # never created: every write fails
    monkeypatch.setattr(R, "_expected_rows", lambda exp, tables: 0)
    cache.take_problems()
    t = load_trace(cap, cache_dir=tmp_path / "c")
    assert len(t.kernels) > 0 and len(cache.take_problems()) == 1


def test_cache_clear_keeps_fresh_working_folders(tmp_path):
    fresh, stale = tmp_path / ".tmp-a1", tmp_path / ".tmp-b2"
    for d in (fresh, stale):
        d.mkdir()
    old = time.time() - cache.STALE_TMP_S - 60
    os.utime(stale, (old, old))
    cache.clear(tmp_path)
    assert fresh.is_dir() and not stale.exists()


def _greeter(payload: bytes):
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def serve():
        c, _ = srv.accept()
        c.sendall(payload)
        time.sleep(0.5)
        c.close()
    threading.Thread(target=serve, daemon=True).start()
    return f"tcp://127.0.0.1:{srv.getsockname()[1]}", srv


def test_dask_probe_accepts_a_scheduler_greeting_and_refuses_others():
    import struct

    from nsysdoc.jobs.run import probe_scheduler

    body = b"\x02\x00\x00\x00\x00\x00\x00\x00" + b"\x81\xafpickle-protocol\x05" + b"\x00" * 20
    addr, srv = _greeter(struct.pack("<Q", len(body)) + body)
    probe_scheduler(addr, timeout=5)  # no error
    srv.close()
    addr, srv = _greeter(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    t0 = time.monotonic()
    with pytest.raises(InputError, match="not a Dask scheduler"):
        probe_scheduler(addr, timeout=5)
    assert time.monotonic() - t0 < 2
    srv.close()
    with pytest.raises(InputError, match="not an address"):
        probe_scheduler("tcp://host:notaport")


def test_outputs_to_a_device_a_pipe_or_a_link_keep_what_the_name_is(tmp_path):
    """-o /dev/null must write to the device, never rename a file over it (as root, that turned
    /dev/null into a plain file for every program on the machine); a named pipe gets the text; a
    symbolic link stays a link and its target gets the text."""
    import threading

    from nsysdoc.outputs import write_chunks_atomic, write_text_atomic

    write_text_atomic(Path("/dev/null"), "x" * 100)
    write_chunks_atomic(Path("/dev/null"), iter(["a", "b"]))
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)

    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    write_text_atomic(fifo, "through the pipe")
    reader.join(10)
    assert got == [b"through the pipe"] and stat.S_ISFIFO(os.stat(fifo).st_mode)

    target = tmp_path / "real.html"
    target.write_text("old")
    link = tmp_path / "link.html"
    link.symlink_to(target)
    write_text_atomic(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    write_chunks_atomic(link, iter(["ne", "wer"]))
    assert link.is_symlink() and target.read_text() == "newer"
