"""The analysis reads captures in time slices (nsysdoc.engine): however the timeline is cut, every
number must be the one a single pass gives. Each fixture scenario, the bundled sample, the real
exports and PyTorch Profiler traces run with slices of a handful of rows (dozens to hundreds of
slices; gaps, steps and long operations cross slice boundaries everywhere) and must give the
golden JSON and HTML, or, for real traces, the same JSON as one slice. The store's spill path
(every block written to an Arrow IPC file and read back) must not change anything either."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests import golden

from tests.conftest import SHARED_TRACES, needs_shared  # noqa: E402

TRACES = SHARED_TRACES


@pytest.fixture
def slice_rows(monkeypatch):
    def set_rows(n: int) -> None:
        monkeypatch.setenv("NSYSDOC_SLICE_ROWS", str(n))
    return set_rows


#: (name, rows per slice): every capture at 61 rows and at 7, and all but two at 1. The 2,100-step
#: capture runs at 241 rows only (480 slices, 4 s; 1,900 slices at 61 took 18-27 s and 18 k at 7,
#: minutes). The bundled sample is the ``sample_training`` scenario's capture, row for row, so at 1
#: row it would repeat ``sample_training``'s 30 s.
LONG = "steady_training_2100_steps"
CASES = ([(n, r) for r in (1, 7, 61) for n in golden.names()
          if n != LONG and not (r == 1 and n == golden.SAMPLE)] + [(LONG, 241)])


#: issue 50: 61-row slices of every capture (8 s of CPU in all) run in README's command; 1 and 7 rows
#: and the 2,100-step capture (140 s, sample_training at 1 row alone 34 s) are marked slow for .ci/run.
CASE_PARAMS = [pytest.param(n, r, id=f"{n}-{r}", marks=() if r == 61 else pytest.mark.slow) for n, r in CASES]


@pytest.mark.parametrize("name,rows", CASE_PARAMS)
def test_sliced_outputs_equal_the_golden_files(name, rows, slice_rows):
    slice_rows(rows)
    old = golden.load(name)
    new = golden.outputs(name)
    assert golden.differences(old["json"], new["json"]) == []
    assert new["html_sha256"] == old["html_sha256"], "HTML page differs with sliced analysis"


@pytest.mark.slow  # issue 50: five scenarios in 7-row slices (2.5 s of CPU); .ci/run runs it
def test_slicing_really_slices(slice_rows, tmp_path):
    """The invariance above is only worth something if slices are many and small."""
    from nsysdoc.analysis import analyze
    from nsysdoc.testing.scenarios import SCENARIOS
    from nsysdoc.trace import load_trace

    slice_rows(7)
    for name in ("steady_training", "jit_warmup_then_steady", "ddp_nccl", "launch_bound_small_kernels"):
        a = analyze(load_trace(SCENARIOS[name]().write(tmp_path / f"{name}.sqlite"), cache=False))
        assert a.engine.slices >= 20, (name, a.engine.slices)
    # the warm-up scenario exercises the steady-state re-run of edge slices
    a = analyze(load_trace(SCENARIOS["jit_warmup_then_steady"]().write(tmp_path / "w.sqlite"), cache=False))
    assert [x["kind"] for x in a.excluded] == ["warm-up"]


def _json(path, monkeypatch, rows=None, budget=None):
    from nsysdoc.analysis import analyze
    from nsysdoc.rules import apply_rules, load_rules
    from nsysdoc.trace import load_trace, store

    if rows is not None:
        monkeypatch.setenv("NSYSDOC_SLICE_ROWS", str(rows))
    else:
        monkeypatch.delenv("NSYSDOC_SLICE_ROWS", raising=False)
    if budget is not None:
        monkeypatch.setattr(store, "MEMORY_BUDGET", budget)
    a = analyze(load_trace(path, cache=False))
    apply_rules(a.to_dict(), load_rules())
    return json.loads(json.dumps(a.to_dict(), allow_nan=False, default=str))


REAL = sorted(TRACES.glob("*.sqlite")) + sorted((TRACES / "kineto").glob("*.json.gz")) if TRACES.is_dir() else []


@needs_shared()
@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_traces_same_json_whatever_the_slices(path, monkeypatch):
    from nsysdoc.errors import InputError

    try:
        one = _json(path, monkeypatch)
    except InputError:
        pytest.skip("refused by the loader (tested in test_real_traces.py)")
    many = _json(path, monkeypatch, rows=13)
    assert golden.differences(one, many) == []


def test_spilled_store_gives_the_same_json(monkeypatch, tmp_path):
    """Memory budget 0: every block goes to disk and is read back by the slices."""
    from nsysdoc.testing.scenarios import SCENARIOS

    for name in ("dataloader_starvation", "ddp_nccl", "jit_warmup_then_steady"):
        path = SCENARIOS[name]().write(tmp_path / f"{name}.sqlite")
        mem = _json(path, monkeypatch, rows=40)
        spilled = _json(path, monkeypatch, rows=40, budget=0)
        assert golden.differences(mem, spilled) == []


def test_cached_store_gives_the_same_json(monkeypatch, tmp_path):
    """A second load reads the cache entry's blocks from disk only."""
    from nsysdoc.analysis import analyze
    from nsysdoc.testing.scenarios import SCENARIOS
    from nsysdoc.trace import load_trace

    monkeypatch.setenv("NSYSDOC_SLICE_ROWS", "40")
    path = SCENARIOS["sync_storm"]().write(tmp_path / "s.sqlite")
    first = load_trace(path, cache=True, cache_dir=tmp_path / "cache")
    second = load_trace(path, cache=True, cache_dir=tmp_path / "cache")
    assert not first.from_cache and second.from_cache
    assert all(b.data is None for t in second.store.tables.values() for b in t.blocks)
    a, b = analyze(first).to_dict(), analyze(second).to_dict()
    a["source"]["path"] = b["source"]["path"] = ""
    assert golden.differences(json.loads(json.dumps(a, default=str)), json.loads(json.dumps(b, default=str))) == []


def test_capture_over_the_budget_keeps_no_block_in_memory(monkeypatch, tmp_path):
    """When the rows' estimate exceeds the memory budget, no block is held (they would only raise
    the peak); under it, all are. The numbers are the same either way."""
    from nsysdoc.analysis import analyze
    from nsysdoc.testing.scenarios import SCENARIOS
    from nsysdoc.trace import load_trace
    from nsysdoc.trace.sqlite import load as sqlite_reader  # issue 51: where load_export reads it

    path = SCENARIOS["ddp_nccl"]().write(tmp_path / "d.sqlite")
    small = load_trace(path, cache=False)
    assert small.store.in_memory > 0 and all(b.data is not None for t in small.store.tables.values() for b in t.blocks)
    monkeypatch.setattr(sqlite_reader, "_MIN_ROW_BYTES", 1 << 40)  # every capture is "too big"
    big = load_trace(path, cache=False)
    assert big.store.in_memory == 0 and all(b.data is None for t in big.store.tables.values() for b in t.blocks)
    assert golden.differences(analyze(small).to_dict(), analyze(big).to_dict()) == []


def test_cache_hit_keeps_a_small_capture_decoded(monkeypatch, tmp_path):
    """A cache entry whose decoded blocks fit the memory budget is decoded once and kept (each pass
    reads it again otherwise); a bigger one gets the bounded read cache."""
    from nsysdoc.testing.scenarios import SCENARIOS
    from nsysdoc.trace import load_trace, store

    path = SCENARIOS["sync_storm"]().write(tmp_path / "s.sqlite")
    load_trace(path, cache=True, cache_dir=tmp_path / "cache")
    hit = load_trace(path, cache=True, cache_dir=tmp_path / "cache")
    assert hit.from_cache and hit.store.read_cache_bytes == store.MEMORY_BUDGET and hit.store.map_files
    monkeypatch.setattr(store, "MEMORY_BUDGET", 1)
    hit = load_trace(path, cache=True, cache_dir=tmp_path / "cache")
    assert hit.from_cache and hit.store.read_cache_bytes == store.READ_CACHE_BYTES
    assert not hit.store.map_files  # mapped pages it touched would stay resident: bigger stores read


def _mapped_files() -> set[str]:
    with open("/proc/self/maps") as f:
        return {line.split(None, 5)[5].strip() for line in f if len(line.split(None, 5)) == 6}


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc/self/maps (Linux)")
def test_a_small_cache_hit_decodes_its_blocks_from_mapped_files(tmp_path):
    """A cache entry that fits the memory budget is memory-mapped (its batches decode in place,
    with no copy into fresh memory), and gives the same rows and the same analysis as reading it."""
    from nsysdoc.analysis import analyze
    from nsysdoc.testing.scenarios import SCENARIOS
    from nsysdoc.trace import load_trace

    path = SCENARIOS["steady_training"]().write(tmp_path / "s.sqlite")
    load_trace(path, cache=True, cache_dir=tmp_path / "cache")
    mapped = load_trace(path, cache=True, cache_dir=tmp_path / "cache")
    read = load_trace(path, cache=True, cache_dir=tmp_path / "cache")
    assert mapped.from_cache and read.from_cache and mapped.store.map_files
    read.store.map_files = False
    kernels = mapped.store.tables["kernels"]
    assert str(kernels._file) not in _mapped_files()
    rows = kernels.read_all()
    assert str(kernels._file) in _mapped_files()
    other = read.store.tables["kernels"].read_all()
    assert rows.keys() == other.keys() and all(np.array_equal(rows[c], other[c]) for c in rows if c in other)
    a, b = analyze(mapped).to_dict(), analyze(read).to_dict()
    assert golden.differences(json.loads(json.dumps(a, default=str)), json.loads(json.dumps(b, default=str))) == []


def test_damaged_cache_files_are_rebuilt_or_one_line_errors(tmp_path):
    """A cache file cut short or grown (a full disk, a crash while copying the cache) is a miss:
    the capture is read again. Bytes damaged in place decode to valid Arrow with wrong values:
    the block's recorded time range catches them when read, the report stops with the loader's
    one-line error (never an internal error), the entry is removed and the next run is right."""
    import pyarrow as pa
    import pyarrow.ipc as ipc
    from typer.testing import CliRunner

    from nsysdoc.cli import app
    from nsysdoc.testing.scenarios import SCENARIOS

    path = SCENARIOS["steady_training"]().write(tmp_path / "s.sqlite")
    args = ["report", str(path), "--no-config", "--format", "json", "--cache-dir", str(tmp_path / "cache")]

    def run(name):
        r = CliRunner().invoke(app, args + ["-o", str(tmp_path / name)])
        assert "Traceback" not in r.output and "internal error" not in r.output, r.output
        return r

    assert run("a.json").exit_code == 0
    expected = json.loads((tmp_path / "a.json").read_text())["summary"]
    (kern,) = (tmp_path / "cache").rglob("kernels.arrow")
    data = kern.read_bytes()
    kern.write_bytes(data[: len(data) // 2] + data)  # grown: the footer still reads, the offsets lie
    assert run("b.json").exit_code == 0
    assert json.loads((tmp_path / "b.json").read_text())["summary"] == expected
    (kern,) = (tmp_path / "cache").rglob("kernels.arrow")
    data = kern.read_bytes()
    starts = ipc.open_file(pa.py_buffer(data)).get_batch(0).column("start_ns").to_numpy()
    at = data.find(starts.tobytes())
    assert at > 0
    kern.write_bytes(data[:at] + (starts + 1).tobytes() + data[at + starts.nbytes:])  # same size
    r = run("c.json")
    assert r.exit_code == 2 and "kernels table cannot be read" in r.output and not kern.exists()
    assert run("d.json").exit_code == 0
    assert json.loads((tmp_path / "d.json").read_text())["summary"] == expected


def test_big_captures_keep_lz4_cache_files_small_ones_do_not(monkeypatch, tmp_path):
    """A cache entry is written uncompressed (read back at file speed) unless the rows' estimate
    says its files would pass UNCOMPRESSED_MAX_BYTES; both read back to the same JSON."""
    from nsysdoc.analysis import analyze
    from nsysdoc.testing.scenarios import SCENARIOS
    from nsysdoc.trace import load_trace
    from nsysdoc.trace.sqlite import load as sqlite_reader  # issue 51: where load_export reads it

    path = SCENARIOS["launch_bound_small_kernels"]().write(tmp_path / "l.sqlite")
    small = load_trace(path, cache=True, cache_dir=tmp_path / "c1")
    assert small.store.compress is False
    monkeypatch.setattr(sqlite_reader, "UNCOMPRESSED_MAX_BYTES", 0)
    big = load_trace(path, cache=True, cache_dir=tmp_path / "c2")
    assert big.store.compress is True
    files = {name: [p for p in (tmp_path / name).rglob("kernels.arrow")] for name in ("c1", "c2")}
    assert files["c1"] and files["c2"]
    # the uncompressed file is bigger: lz4 packs these repetitive rows several times
    assert files["c1"][0].stat().st_size > 1.5 * files["c2"][0].stat().st_size
    hits = [load_trace(path, cache=True, cache_dir=tmp_path / name) for name in ("c1", "c2")]
    assert all(h.from_cache for h in hits)
    a, b = (analyze(h).to_dict() for h in hits)
    assert golden.differences(json.loads(json.dumps(a, default=str)), json.loads(json.dumps(b, default=str))) == []


def test_an_error_while_preparing_the_next_slice_reaches_the_user_as_one_line(monkeypatch, tmp_path):
    """The next slice's operations are read on a worker thread: a damaged block found there must
    still end the report with the loader's one-line error and exit 2 (no traceback, no hang)."""
    import threading

    from typer.testing import CliRunner

    from nsysdoc.cli import app
    from nsysdoc.engine import run as run_m
    from nsysdoc.engine import slices
    from nsysdoc.errors import CorruptFileError
    from nsysdoc.testing.scenarios import SCENARIOS

    monkeypatch.setenv("NSYSDOC_SLICE_ROWS", "40")
    path = SCENARIOS["steady_training"]().write(tmp_path / "s.sqlite")
    real, calls = slices.prepare, []

    def failing(ctx, c0, c1):
        calls.append(threading.current_thread().name)
        if len(calls) == 3:
            raise CorruptFileError("stored rows of the kernels table cannot be read (test)")
        return real(ctx, c0, c1)

    monkeypatch.setattr(slices, "prepare", failing)  # inline (first slice, re-runs)
    monkeypatch.setattr(run_m, "prepare", failing)   # ahead, on the worker
    r = CliRunner().invoke(app, ["report", str(path), "--no-cache", "--no-config", "--format", "json",
                                 "-o", str(tmp_path / "r.json")])
    assert r.exit_code == 2, r.output
    assert "kernels table cannot be read" in r.output and "Traceback" not in r.output
    assert calls[2].startswith("nsysdoc-prefetch"), calls


def _long_idle_loop(prev, starts, ends, cum, span_end):
    """The per-interval definition (the loop :func:`slices.long_idle` replaced)."""
    from nsysdoc.engine.data import NEG

    out = []
    for j in range(len(starts)):
        a, b = int(prev), int(starts[j])
        if a > NEG and b > a and (b - a) * 4 >= span_end - a:
            out.append((a, b, int(cum[j])))
        prev = int(ends[j])
    return out


def test_long_idle_stretches_by_hand_and_against_the_per_interval_loop():
    """Idle stretches at least a quarter of what is left of the span after their start."""
    from nsysdoc.engine.data import NEG
    from nsysdoc.engine.slices import long_idle

    # span ends at 100; busy [0,10) [40,50) [52,60) [90,100): idle [10,40) is 30 >= (100-10)/4 =
    # 22.5, [50,52) is 2 < 12.5, [60,90) is 30 >= 10; busy before them 10, 20, 28
    starts, ends = np.array([0, 40, 52, 90]), np.array([10, 50, 60, 100])
    cum = np.concatenate(([0], np.cumsum(ends - starts)))
    assert long_idle(NEG, starts, ends, cum, 100) == [(10, 40, 10), (60, 90, 28)]
    # carried from the previous slice: idle [-50, 0) (50 >= 150/4) before the first interval
    # counts too; [-30, 0) (30 < 130/4) does not
    assert long_idle(-50, starts, ends, cum + 5, 100)[0] == (-50, 0, 5)
    assert long_idle(-30, starts, ends, cum + 5, 100)[0] == (10, 40, 15)
    assert long_idle(NEG, starts[:0], ends[:0], cum[:1], 100) == []
    rng = np.random.default_rng(7)
    for _ in range(60):
        n = int(rng.integers(1, 300))
        gaps = rng.integers(0, 50, n) * (rng.random(n) < 0.7)
        lens = rng.integers(1, 40, n)
        starts = np.cumsum(gaps + np.concatenate(([0], lens[:-1]))) + int(rng.integers(-500, 500))
        ends = starts + lens
        cum = int(rng.integers(0, 1000)) + np.concatenate(([0], np.cumsum(lens)))
        prev = NEG if rng.random() < 0.3 else int(starts[0] - rng.integers(0, 400))
        span_end = int(ends[-1] + rng.integers(0, 300))
        assert long_idle(prev, starts, ends, cum, span_end) == _long_idle_loop(prev, starts, ends, cum, span_end)


def test_next_call_syncs_by_hand_and_against_a_per_query_search():
    """Whether a thread's next CUDA call after a time exists, and whether one of its earliest
    calls (those starting at that same instant) is a blocking sync."""
    from nsysdoc.engine.slices import next_call_syncs

    # thread 7: calls at 10 (sync), 20, 20 (sync); thread 3: a call at 15
    th = np.array([7, 3, 7, 7])
    st = np.array([10, 15, 20, 20])
    sy = np.array([True, False, False, True])
    later, syncs = next_call_syncs(th, st, sy, np.array([7, 7, 7, 3, 3, 9]), np.array([5, 10, 20, 0, 15, 0]))
    assert later.tolist() == [True, True, False, True, False, False]
    assert syncs.tolist() == [True, True, False, False, False, False]
    rng = np.random.default_rng(11)
    for i in range(80):
        n, q = int(rng.integers(0, 200)), int(rng.integers(1, 50))
        th = rng.integers(0, 5, n) * 1_000_003
        # every fourth table spans more than 2^61 ns: too wide to pack, the per-thread search
        st = rng.integers(-100, 100, n) * (1 << 55 if i % 4 == 3 else 1)
        sy = rng.random(n) < 0.3
        qt, qa = rng.integers(0, 6, q) * 1_000_003, rng.integers(-120, 120, q) * (1 << 55 if i % 4 == 3 else 1)
        later, syncs = next_call_syncs(th, st, sy, qt, qa)
        for i in range(q):
            after = (th == qt[i]) & (st > qa[i])
            assert later[i] == after.any()
            first = after & (st == (st[after].min() if after.any() else 0))
            assert syncs[i] == bool((first & sy).any())


def test_first_and_last_slices_are_half_a_share(slice_rows, tmp_path):
    """The slices' rows (GPU operations, CUDA API and OS runtime calls) split into m + 1 equal
    shares, m the slices of at most NSYSDOC_SLICE_ROWS rows: the first and the last slice hold half
    a share (nothing overlaps the first one's reading; the last runs with the second core idle)."""
    from nsysdoc.engine.plan import _bounds
    from nsysdoc.testing.scenarios import SCENARIOS
    from nsysdoc.trace import load_trace

    slice_rows(400)
    trace = load_trace(SCENARIOS["steady_training"]().write(tmp_path / "s.sqlite"), cache=False)
    starts = []
    for name in ("kernels", "memcpy", "memset", "runtime", "osrt"):
        t = trace.store.get(name)
        if t is not None:
            starts += [b["start_ns"] for b in t.iter_blocks(["start_ns"])]
    starts = np.sort(np.concatenate(starts))
    edges = _bounds(trace)
    rows = np.diff(np.concatenate(([0], np.searchsorted(starts, edges), [len(starts)])))
    m = int(np.ceil(len(starts) / 400))
    share = len(starts) / (m + 1)
    assert len(rows) == m + 2 and rows.max() <= 400, rows
    assert abs(rows[0] - share / 2) <= 0.05 * share and abs(rows[-1] - share / 2) <= 0.05 * share, (rows, share)
    assert np.all(np.abs(rows[1:-1] - share) <= 0.05 * share), (rows, share)


def test_read_ahead_gives_every_block_in_order_and_its_errors(monkeypatch, tmp_path):
    """The plan's passes read the next spilled block on a thread of their own: the same blocks in
    the same order as the plain pass, the reads really on another thread, and a block that cannot
    be read raises its one-line error in the caller."""
    import threading

    from nsysdoc.errors import CorruptFileError
    from nsysdoc.testing.scenarios import SCENARIOS
    from nsysdoc.trace import load_trace, store

    monkeypatch.setattr(store, "MEMORY_BUDGET", 0)
    monkeypatch.setattr(store, "BLOCK_ROWS", 64)
    trace = load_trace(SCENARIOS["steady_training"]().write(tmp_path / "s.sqlite"), cache=False)
    t = trace.store.get("kernels")
    assert len(t.blocks) >= 4 and all(b.data is None for b in t.blocks)
    cols = ["start_ns", "end_ns", "device"]
    plain = list(t.iter_blocks(cols))
    readers = []
    real = t.read_block

    def spy(i, c=None):
        readers.append(threading.current_thread().name)
        return real(i, c)

    monkeypatch.setattr(t, "read_block", spy)
    ahead = list(t.iter_blocks(cols, ahead=True))
    assert len(ahead) == len(plain) == len(t.blocks)
    for a, b in zip(ahead, plain):
        assert all(np.array_equal(a[c], b[c]) for c in cols)
    assert len(readers) == len(t.blocks) and all(n.startswith("nsysdoc-read") for n in readers)

    def broken(i, c=None):
        if i == 2:
            raise CorruptFileError("stored rows of the kernels table cannot be read")
        return real(i, c)

    monkeypatch.setattr(t, "read_block", broken)
    got = []
    with pytest.raises(CorruptFileError):
        for b in t.iter_blocks(cols, ahead=True):
            got.append(b)
    assert len(got) == 2
