"""A report of an nsys export runs without pandas (issue 13: importing it costs 0.3 s, a quarter of
a cached report of 2 M kernels), and gives the result it gives with pandas loaded.

The analysis holds its small tables as numpy columns (:mod:`nsysdoc.trace.columns`); the command
line keeps pyarrow from importing pandas in passing (:mod:`nsysdoc.lazy_pandas`). The golden
outputs (``tests/test_golden_outputs.py``) compare every number and the HTML page with the
implementation that used pandas; here the same reports are made by ``python -m nsysdoc`` in a
fresh process, cold and from the cache, and must match an in-process report (where this test
module has pandas loaded) and never import pandas.
"""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from nsysdoc import lazy_pandas
from nsysdoc.cli import app, sample_path
from nsysdoc.trace.columns import Columns, as_column, factorize, factorize_objects

# issue 50: every test reports in a fresh process with and without pandas (5 s of CPU each); README's command leaves them to .ci/run
pytestmark = pytest.mark.slow

#: runs the command line like ``python -m nsysdoc`` and says on stderr whether pandas got imported
PROBE = """
import runpy, sys
sys.argv = ["nsysdoc"] + sys.argv[1:]
try:
    runpy.run_module("nsysdoc", run_name="__main__")
except SystemExit as exc:
    code = exc.code
print("PANDAS-IMPORTED" if "pandas" in sys.modules else "NO-PANDAS", file=sys.stderr)
sys.exit(code)
"""


def _cli(*args: str) -> str:
    r = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    return r.stderr.strip().splitlines()[-1]


def _in_process(path, out, *args) -> dict:
    r = CliRunner().invoke(app, ["report", str(path), "-f", "json", "-o", str(out), "--no-config", "-q", *args])
    assert r.exit_code in (0, 1), r.output
    return json.loads(out.read_text())


def _scenario(tmp_path, name):
    if name == "sample":
        return sample_path()
    from nsysdoc.testing.scenarios import SCENARIOS

    return SCENARIOS[name]().write(tmp_path / f"{name}.sqlite")


@pytest.mark.parametrize("name", ["sample", "healthy_training", "ddp_nccl", "pageable_h2d", "jit_warmup_then_steady"])
def test_a_report_of_an_nsys_export_never_imports_pandas_and_matches_one_made_with_it(tmp_path, name):
    path = _scenario(tmp_path, name)
    cache = tmp_path / "cache"
    runs = {"cold": ["--no-cache"], "first": ["--cache-dir", str(cache)], "warm": ["--cache-dir", str(cache)]}
    got = {}
    for run, extra in runs.items():
        out = tmp_path / f"{run}.json"
        assert _cli("report", str(path), "-f", "json", "-o", str(out), "--no-config", "-q", *extra) == "NO-PANDAS", run
        got[run] = json.loads(out.read_text())
    html = tmp_path / "warm.html"
    assert _cli("report", str(path), "-f", "html", "-o", str(html), "--no-config", "-q", "--worst-step",
                "--cache-dir", str(cache)) == "NO-PANDAS"
    md = tmp_path / "warm.md"
    assert _cli("report", str(path), "-f", "md", "-o", str(md), "--no-config", "-q", "--cache-dir", str(cache)) \
        == "NO-PANDAS"
    assert "pandas" in sys.modules  # the in-process report below runs with pandas loaded
    ref = _in_process(path, tmp_path / "ref.json", "--no-cache")
    assert got["cold"] == ref
    assert got["first"] == ref
    assert got["warm"] == ref


def test_a_report_of_a_pytorch_profiler_trace_never_imports_pandas_either(tmp_path):
    from nsysdoc.testing.kineto import write_kineto
    from nsysdoc.testing.scenarios import SCENARIOS

    path = tmp_path / "run.pt.trace.json"
    write_kineto(SCENARIOS["healthy_training"](), path)
    ref = _in_process(path, tmp_path / "ref.json", "--no-cache")
    cache = tmp_path / "cache"
    # the Kineto reader builds its event tables as numpy columns too (issue 33: pandas cost
    # 0.4-0.5 s of a cold report), cold and from the cache
    for run, extra in {"cold": ["--no-cache"], "first": ["--cache-dir", str(cache)],
                       "warm": ["--cache-dir", str(cache)]}.items():
        out = tmp_path / f"k-{run}.json"
        assert _cli("report", str(path), "-f", "json", "-o", str(out), "--no-config", "-q", *extra) \
            == "NO-PANDAS", run
        assert json.loads(out.read_text()) == ref, run


def test_defer_refuses_passing_imports_until_pandas_is_asked_for():
    code = """
import sys
from nsysdoc import lazy_pandas
lazy_pandas.defer()
try:
    import pandas
    print("imported")
except ImportError:
    print("refused")
import pyarrow as pa
print(pa.array([1, 2, None]).to_numpy(zero_copy_only=False).tolist(), "pandas" in sys.modules)
pd = lazy_pandas.pandas()
print(pd.DataFrame({"a": [1]}).shape, lazy_pandas.deferred())
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["refused", "[1.0, 2.0, nan] False", "(1, 1) False"]


def test_defer_is_a_no_op_once_pandas_is_loaded():
    assert "pandas" in sys.modules
    lazy_pandas.defer()
    try:
        assert not lazy_pandas.deferred()
    finally:
        lazy_pandas.allow()


# ---- Columns ---------------------------------------------------------------------------------
def test_columns_hold_equal_length_numpy_columns_and_give_python_records():
    t = Columns({"name": ["a", "b", "c"], "n": np.array([3, 1, 2]), "x": [0.5, None, 2.0]})
    assert len(t) == 3 and t.columns == ["name", "n", "x"]
    assert t["name"].dtype == object  # text stays Python strings, as in a DataFrame
    assert t["x"].dtype == np.float64 and np.isnan(t["x"][1])  # a missing number is NaN, as pandas makes it
    rec = t.records()
    assert rec[0] == {"name": "a", "n": 3, "x": 0.5} and rec[2] == {"name": "c", "n": 2, "x": 2.0}
    assert rec[1]["name"] == "b" and type(rec[1]["x"]) is float and rec[1]["x"] != rec[1]["x"]  # NaN
    assert type(t.records()[0]["n"]) is int and type(t.row(2)["x"]) is float and t.row(2) == {"name": "c", "n": 2,
                                                                                             "x": 2.0}
    s = t.take(np.argsort(t["n"], kind="stable"))
    assert s["name"].tolist() == ["b", "c", "a"]
    assert t.take(t["n"] > 1)["name"].tolist() == ["a", "c"]
    assert t.head(2)["n"].tolist() == [3, 1] and len(t.head(10)) == 3 and len(t.head(0)) == 0
    assert t.select(["n"]).columns == ["n"] and t.drop(["x"]).columns == ["name", "n"]
    u = t.assign(k=7, name=["z", "y", "x"])
    assert u["k"].tolist() == [7, 7, 7] and u["name"].tolist() == ["z", "y", "x"]
    assert t["name"].tolist() == ["a", "b", "c"]  # assign makes a new table
    with pytest.raises(ValueError):
        t["bad"] = [1, 2]
    df = t.to_pandas()
    assert list(df.columns) == t.columns and df["n"].tolist() == [3, 1, 2]
    assert Columns.from_pandas(df).records()[0] == {"name": "a", "n": 3, "x": 0.5}


@pytest.mark.parametrize("values, dtype", [([1, None, 3], np.float64), ([None, None], object),
                                           ([1, 2], np.int64), ([True, None], object), (["a", None], object)])
def test_a_column_from_a_list_is_typed_as_pandas_types_it(values, dtype):
    assert as_column(values).dtype == dtype
    assert pd.DataFrame({"c": values})["c"].to_numpy().dtype == dtype


@pytest.mark.parametrize("n, distinct, shift", [(1, 1, 0), (10, 3, 0), (1000, 5, 40), (50_000, 40, 0),
                                                (50_000, 40, 40), (50_000, 3000, 40), (3000, 2000, 0),
                                                (200_000, 150_000, 0)])
def test_factorize_gives_pandas_codes_and_uniques_in_order_of_first_appearance(n, distinct, shift):
    rng = np.random.default_rng(n + distinct + shift)
    values = (rng.integers(0, distinct, n).astype(np.int64) - (2 if shift else 0)) << shift
    codes, uniques = factorize(values)
    want_codes, want_uniques = pd.factorize(values)
    assert codes.tolist() == want_codes.tolist()
    assert uniques.tolist() == want_uniques.tolist()


def test_factorize_by_hand():
    codes, uniques = factorize(np.array([7, 3, 7, 9, 3, 3]))
    assert codes.tolist() == [0, 1, 0, 2, 1, 1] and uniques.tolist() == [7, 3, 9]
    codes, uniques = factorize(np.array([5 << 40, -1, 5 << 40]))
    assert codes.tolist() == [0, 1, 0] and uniques.tolist() == [5 << 40, -1]
    codes, uniques = factorize(np.zeros(0, np.int64))
    assert len(codes) == 0 and len(uniques) == 0


def test_factorize_objects_gives_pandas_codes_and_uniques_in_order_of_first_appearance():
    rng = np.random.default_rng(5)
    for n in (0, 1, 7, 500):
        values = np.array([("", "cpu_op", "python_function", "user")[i] for i in rng.integers(0, 4, n)], dtype=object)
        codes, uniques = factorize_objects(values)
        want_codes, want_uniques = pd.factorize(values)
        assert codes.tolist() == want_codes.tolist() and codes.dtype == np.int64
        assert uniques.tolist() == list(want_uniques) and uniques.dtype == object


def test_flow_correlations_match_a_pandas_merge_of_the_last_flow_of_each_pair():
    from nsysdoc.trace.kineto import _fill_from_flows

    def with_pandas(corr, key, ts, fkey, fts, fid):
        miss = np.flatnonzero(corr == 0)
        flows = pd.DataFrame({"k": fkey, "t": fts, "id": fid}).drop_duplicates(["k", "t"], keep="last")
        hit = pd.DataFrame({"k": key[miss], "t": ts[miss], "row": miss}).merge(flows, on=["k", "t"], how="inner")
        corr[hit["row"].to_numpy()] = hit["id"].to_numpy()

    rng = np.random.default_rng(33)
    for i in range(400):
        n, nf, r = int(rng.integers(0, 40)), int(rng.integers(0, 40)), int(rng.integers(1, 5))
        corr = rng.integers(0, 3, n).astype(np.int64)
        key, ts = (rng.integers(-r, r, n).astype(np.int64) for _ in range(2))
        if i % 5 == 0:
            ts[: n // 2] = np.iinfo(np.int64).min
        fkey, fts = (rng.integers(-r, r, nf).astype(np.int64) for _ in range(2))
        fid = rng.integers(1, 1 << 40, nf).astype(np.int64)
        got, want = corr.copy(), corr.copy()
        _fill_from_flows(got, key, ts, fkey, fts, fid)
        with_pandas(want, key, ts, fkey, fts, fid)
        assert got.tolist() == want.tolist(), i


@pytest.mark.parametrize("low", [0, -3, -(1 << 40)])
def test_streams_are_numbered_in_order_of_first_appearance_as_pandas_numbers_them(low):
    from nsysdoc.trace.tables import assign_streams

    rng = np.random.default_rng(-low % 97)
    cols = ("proc", "device", "context_id", "stream_id")
    names = ["kernels", "memcpy", "memset", "sync"]
    tables = [{c: rng.choice(np.array([low, 0, 1, 3, 1 << 20]), n).astype(np.int64) for c in cols}
              for n in (50, 0, 7, 30)]
    out = {k: Columns(t) for k, t in zip(names, tables)}
    assign_streams(out, names)
    both = pd.concat([pd.DataFrame(t) for t in tables], ignore_index=True)
    want = both.groupby(list(cols), sort=False).ngroup().to_numpy()
    got = np.concatenate([out[k]["stream"] for k in names])
    assert got.tolist() == want.tolist()
    assert np.stack([out["streams"][c] for c in cols], axis=1).tolist() == both.drop_duplicates().to_numpy().tolist()


def test_a_diff_of_two_nsys_exports_never_imports_pandas_and_matches_one_made_with_it(tmp_path):
    from nsysdoc.testing.scenarios import SCENARIOS

    base = SCENARIOS["healthy_training"]().write(tmp_path / "base.sqlite")
    cand = SCENARIOS["dataloader_starvation"]().write(tmp_path / "cand.sqlite")
    out = tmp_path / "diff.json"
    assert _cli("diff", str(base), str(cand), "-f", "json", "-o", str(out), "--no-config", "-q", "--no-cache") \
        == "NO-PANDAS"
    ref = tmp_path / "ref.json"
    r = CliRunner().invoke(app, ["diff", str(base), str(cand), "-f", "json", "-o", str(ref), "--no-config", "-q",
                                 "--no-cache"])
    assert r.exit_code in (0, 1), r.output
    assert json.loads(out.read_text()) == json.loads(ref.read_text())
