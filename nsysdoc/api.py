"""The Python API: the same diagnoses as the commands, as objects (docs/api.md).

    import nsysdoc
    r = nsysdoc.report("run.sqlite")
    r.verdict, r.findings, r.steps          # the sentence, Finding objects, a pandas DataFrame
    d = nsysdoc.diff("base.sqlite", r)      # paths, saved JSON reports or Report objects
    j = nsysdoc.job(["rank0.sqlite", "rank1.sqlite"], jobs=2)

Everything here runs :mod:`nsysdoc.pipeline`, the pipeline the command line runs, so
``Report.to_dict()`` is exactly the JSON ``nsysdoc report -f json`` writes, ``Diff.to_dict()``
what ``nsysdoc diff -f json`` writes and ``Job.to_dict()`` what ``nsysdoc job -f json`` writes.
Bad input raises :class:`nsysdoc.NsysdocError` with the command line's one-line message.
pandas is imported only when a DataFrame is asked for.
"""
from __future__ import annotations

import html
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, Union

from . import pipeline
from .errors import InputError, NsysdocError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

PathLike = Union[str, os.PathLike]
from .severity import SEVERITIES  # noqa: E402
#: idle causes, in the order the report lists them (columns of ``Report.devices`` / ``Report.gaps``)
from .idle_causes import IDLE_CAUSES  # noqa: E402
# issue 51: the tables' columns and builders, and the argument checks, in modules of their own;
# their names stay importable from here (tests and docs name ``nsysdoc.api.STEP_COLUMNS`` ...)
from .api_tables import (CRITICAL_PATH_COLUMNS, CRITICAL_PATH_SEGMENTS, DEVICE_COLUMNS,  # noqa: E402,F401
                         DIFF_KERNEL_COLUMNS, GAP_COLUMNS, GPU_OP_COLUMNS, KERNEL_COLUMNS, MEMORY_COLUMNS,
                         MEMORY_OP_COLUMNS, OPERATOR_COLUMNS, OPERATOR_SHAPE_COLUMNS, RANK_COLUMNS,
                         STEP_COLUMNS, STEP_PARTS, _chunk_rows, _concat_frames, _frame, _gap_frame,
                         _gpu_op_frame, _nullable_int)
from .api_args import (API_PARAMETERS, _api_errors, _optional_path, _optional_str,  # noqa: E402,F401
                       _path_arg, _path_list, _rule_dirs, api_wording, report_options)
from .options import ReportOptions, options_of  # noqa: E402
#: height of the frame ``_repr_html_`` shows the page in (the page scrolls inside it)
NOTEBOOK_FRAME_PX = 800



def _without_pandas(method):
    """Run ``method`` with passing imports of pandas refused (pyarrow's): rendering an nsys
    export's report needs none (nsysdoc.lazy_pandas); a process that has pandas keeps it."""
    import functools

    @functools.wraps(method)
    def run(*args, **kwargs):
        from .lazy_pandas import deferring

        with deferring():
            return method(*args, **kwargs)
    return run


def _iframe(page: str, title: str) -> str:
    """The self-contained page in a sandboxed frame: its styles and script stay inside it, and a
    notebook shows it as the browser would (the page is the frame's whole document, escaped once)."""
    return (f'<iframe title="{html.escape(title)}" sandbox="allow-scripts" '
            f'style="width:100%;height:{NOTEBOOK_FRAME_PX}px;border:1px solid #ddd" '
            f'srcdoc="{html.escape(page, quote=True)}"></iframe>')


def _json_text(result: dict) -> str:
    """``json.dumps(result, indent=2, allow_nan=False)`` and a newline, byte for byte, 4-5x faster.

    With ``indent`` the standard library falls back to its pure-Python encoder (0.2-0.3 s for the
    2 MB report of a 2,000-step capture). Its C encoder writes the compact text (same escapes,
    same float repr, same refusal of NaN), and msgspec re-indents it without re-encoding any
    string or number token (tests/test_api.py checks the equality on generated documents)."""
    import msgspec

    compact = json.dumps(result, allow_nan=False, separators=(",", ":"))
    try:
        return msgspec.json.format(compact, indent=2) + "\n"
    except msgspec.DecodeError:  # a lone surrogate (a file name that is not UTF-8): msgspec refuses it
        return json.dumps(result, indent=2, allow_nan=False) + "\n"



# --- report -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Finding:
    """One finding of a report (docs/json.md, ``findings[]``)."""

    rule: str
    severity: str
    title: str
    message: str
    impact_ms: float | None
    impact_ms_per_step: float | None
    impact_pct: float | None
    category: str | None = None
    where: list = field(default_factory=list)
    where_note: str | None = None
    evidence: list = field(default_factory=list)
    verify: str | None = None
    fix: str | None = None
    references: list = field(default_factory=list)
    time_ranges: list = field(default_factory=list)
    source: str | None = None

    @classmethod
    def from_dict(cls, f: dict) -> "Finding":
        return cls(rule=f.get("rule"), severity=f.get("severity"), title=f.get("title"), message=f.get("message"),
                   impact_ms=f.get("impact_ms"), impact_ms_per_step=f.get("impact_ms_per_step"),
                   impact_pct=f.get("impact_pct"), category=f.get("category"), where=list(f.get("where") or []),
                   where_note=f.get("where_note"), evidence=list(f.get("evidence") or []), verify=f.get("verify"),
                   fix=f.get("fix"), references=list(f.get("references") or []),
                   time_ranges=list(f.get("time_ranges") or []), source=f.get("source"))


def _at_least(severity: str | None, floor: str) -> bool:
    if floor == "never" or severity not in SEVERITIES:
        return False
    if floor not in SEVERITIES:
        raise UsageError(f"unknown severity {floor!r}", hint=f"use one of {', '.join(SEVERITIES)} or never")
    return SEVERITIES.index(severity) >= SEVERITIES.index(floor)



class Report:
    """The diagnosis of one capture: what ``nsysdoc report`` computes, as an object."""

    def __init__(self, analysis, *, options: ReportOptions | None = None, reads: Sequence[Any] = (),
                 reopen: Callable[[], Any] | None = None, **fields) -> None:
        # issue 51: the result, the whole tables and the page data are kept; given ``reopen`` (a
        # function giving the analysis again, the capture read anew: :func:`_reopen`), the trace,
        # its block store and the engine state are let go now, and the accessors that need rows
        # (memory, gpu_ops, gaps, perfetto) read the capture again on each call (docs/api.md)
        self._result_dict = analysis.to_dict()
        # the page data the caller captured (``_report``: without the replayed windows for a JSON-only
        # run, issue 50), else all of it now, while the engine state is at hand
        self._page = getattr(analysis, "page", None) or analysis.page_data()
        self._whole_tables = dict(getattr(analysis, "tables", None) or {})
        self._reopen = reopen
        if reopen is not None:
            analysis.release()
            analysis = None
        self._analysis = analysis
        #: the options the report was made with (its cache settings serve the page's templates);
        #: ``fields`` name some instead (``Report(a, cache=False)``)
        self._options = options_of(options, **fields)
        self._tables: dict[str, Any] = {}
        #: what the run read (nsysdoc.outputs.Read): no writer of this report may replace it
        self._reads = tuple(reads)

    def _whole_page(self):
        """The page data with every window: the one kept, or (a report made for JSON only, issue 50)
        captured now from the analysis kept or the capture read again."""
        if not getattr(self._page, "complete", True):
            self._page = self._rows().page_data()
        return self._page

    def _rows(self):
        """An analysis whose trace and engine state are at hand: the one kept, or the capture read
        and analysed again (:func:`_reopen`; its result is this report's)."""
        return self._analysis if self._analysis is not None else self._reopen()

    # plain values
    @property
    def path(self) -> str:
        """The capture this report read (the SQLite export, for a ``.nsys-rep``)."""
        return str(self._result["source"]["path"])

    @property
    def _result(self) -> dict:
        return self._result_dict

    @property
    def result(self) -> dict:
        """The result itself (what ``to_dict()`` copies, before the JSON's caps): read it, do not
        change it. The command line reads the rules' states and ``--fail-on`` from it."""
        return self._result

    @property
    def verdict(self) -> str:
        """The verdict sentence (the page's first line)."""
        return str((self._result.get("verdict") or {}).get("sentence") or "")

    @property
    def headline(self) -> str | None:
        """The verdict's short label (e.g. ``launch-bound``), or None."""
        return (self._result.get("verdict") or {}).get("headline")

    @property
    def findings(self) -> list[Finding]:
        """Findings, worst first (as on the page)."""
        return [Finding.from_dict(f) for f in self._result.get("findings") or []]

    @property
    def summary(self) -> dict:
        """GPU busy %, step count, median step time, kernel counts (``summary`` in the JSON)."""
        return dict(self._result.get("summary") or {})

    def fails(self, severity: str = "warning") -> bool:
        """True when a finding has at least ``severity`` (what ``--fail-on`` exits 1 for)."""
        return any(_at_least(f.severity, severity) for f in self.findings)

    # tables
    def _table(self, name: str, build: Callable[[], "pd.DataFrame"]) -> "pd.DataFrame":
        if name not in self._tables:
            self._tables[name] = build()
        return self._tables[name].copy()

    @property
    def steps(self) -> "pd.DataFrame":
        """One row per step (every process's; ``primary`` marks the thread whose steps count)."""
        def build():
            rows = []
            for s in self._result.get("steps") or []:
                row = dict(s)
                for p in STEP_PARTS:
                    row[f"{p}_ms"] = (s.get("breakdown_ms") or {}).get(p)
                rows.append(row)
            return _frame(rows, STEP_COLUMNS)
        return self._table("steps", build)

    @property
    def kernels(self) -> "pd.DataFrame":
        """Every kernel name that starts in the analysis window, by total GPU time (largest first)."""
        def build():
            from .assembly.numbers import _records

            full = self._whole_tables.get("kernels")
            rows = _records(full) if full is not None else \
                ((self._result.get("metrics") or {}).get("kernels") or {}).get("by_name") or []
            return _frame(rows, KERNEL_COLUMNS)
        return self._table("kernels", build)

    @property
    def operators(self) -> "pd.DataFrame":
        """The operator view (like ``key_averages()``), by GPU time; empty when the capture has no
        operator ranges (``metrics.operators.missing`` says which switch adds them)."""
        return self._table("operators", lambda: _frame(
            ((self._result.get("metrics") or {}).get("operators") or {}).get("rows") or [], OPERATOR_COLUMNS))

    @property
    def operators_by_shape(self) -> "pd.DataFrame":
        """The operator view per (operator, input shapes), like ``key_averages(group_by_input_shape=True)``;
        ``input_dims`` as text (``[[2, 1, 128], [], []]``). Empty when no operator range carries
        input shapes (``metrics.operators_by_shape.missing`` says which switch records them)."""
        def build():
            import json

            rows = ((self._result.get("metrics") or {}).get("operators_by_shape") or {}).get("rows") or []
            rows = [dict(r, input_dims=None if r.get("input_dims") is None else json.dumps(r["input_dims"]))
                    for r in rows]
            return _frame(rows, OPERATOR_SHAPE_COLUMNS)
        return self._table("operators_by_shape", build)

    @property
    def devices(self) -> "pd.DataFrame":
        """One row per GPU: the exclusive split of the analysis window and idle time by cause."""
        def build():
            rows = []
            for d in self._result.get("devices") or []:
                row = dict(d)
                for c in IDLE_CAUSES:
                    row[f"idle_{c}_ms"] = (d.get("idle_ms_by_cause") or {}).get(c)
                rows.append(row)
            return _frame(rows, DEVICE_COLUMNS)
        return self._table("devices", build)

    @property
    def gaps(self) -> "pd.DataFrame":
        """The longest idle gaps of the window (``metrics.idle_gaps.longest``), with their cause
        and the split of each gap between causes (ms)."""
        def build():
            rows = []
            for g in ((self._result.get("metrics") or {}).get("idle_gaps") or {}).get("longest") or []:
                row = dict(g)
                for c in IDLE_CAUSES:
                    row[f"{c}_ms"] = (g.get("split_ms") or {}).get(c, 0.0)
                rows.append(row)
            return _frame(rows, GAP_COLUMNS)
        return self._table("gaps", build)

    # issue 47: the memory view
    @property
    def memory(self) -> "pd.DataFrame":
        """GPU memory events in time order per device (``docs/glossary.md``, "Memory"): the
        signed ``bytes`` of each, the device's ``allocated_bytes`` after it (the trace's running
        total, or the sum since the capture began: ``metrics.memory.baseline``), its
        ``reserved_bytes`` (null unless the trace records it) and the thread; empty when the
        capture recorded no memory (``metrics.memory.missing`` says which switch does)."""
        def build():
            from .metrics import memory as mem_m
            from .trace import schema as S

            trace = self._rows().trace
            m = getattr(trace, "memory", None)
            if m is None or not len(m):
                return _frame([], MEMORY_COLUMNS)
            import numpy as np

            from .lazy_pandas import pandas

            pd = pandas()
            t, dt, dev = (np.asarray(m[c], dtype=np.int64) for c in ("timestamp_ns", "device_type", "device_id"))
            gtid = np.asarray(m["global_tid"], dtype=np.int64)
            parts = []
            for s in mem_m.device_series(t, dt, dev, m["bytes"], m["total_allocated_bytes"], m["total_reserved_bytes"]):
                idx = np.flatnonzero((dt == mem_m.DEVICE_CUDA) & (dev == s.device_id))
                g = gtid[idx[np.argsort(t[idx], kind="stable")]]  # device_series' order
                parts.append(pd.DataFrame({
                    "time_ns": s.time_ns, "device": np.full(len(g), s.device_id, dtype=np.int64), "bytes": s.bytes,
                    "allocated_bytes": s.allocated,
                    "reserved_bytes": pd.array(s.reserved if s.reserved is not None else [None] * len(g), dtype="Int64"),
                    "pid": pd.array([int(x) if k else None for x, k in zip(S.decode_pid(g), g != 0)], dtype="Int64"),
                    "tid": pd.array([int(x) if k else None for x, k in zip(S.decode_tid(g), g != 0)], dtype="Int64")}))
            if not parts:
                return _frame([], MEMORY_COLUMNS)
            return pd.concat(parts, ignore_index=True)[[c for c, _ in MEMORY_COLUMNS]]
        return self._table("memory", build)

    @property
    def memory_ops(self) -> "pd.DataFrame":
        """The operators that allocated the most GPU memory (``metrics.memory.top_ops``), most
        bytes first; empty without memory events or operator ranges."""
        return self._table("memory_ops", lambda: _frame(
            ((self._result.get("metrics") or {}).get("memory") or {}).get("top_ops") or [], MEMORY_OP_COLUMNS))

    # issue 48: the critical path
    @property
    def critical_path(self) -> "pd.DataFrame":
        """Each computed step's critical path (``metrics.critical_path.steps``; ``docs/glossary.md``,
        "Critical path"): its length (= the step time) and its segments in ms. Without steps, one
        row for the window (``step`` null); empty without GPU work."""
        def build():
            rows = ((self._result.get("metrics") or {}).get("critical_path") or {}).get("steps") or []
            return _frame([{"step": r.get("step"), "start_ns": r.get("start_ns"), "length_ms": r.get("length_ms"),
                            **{f"{k}_ms": (r.get("segments_ms") or {}).get(k) for k in CRITICAL_PATH_SEGMENTS}}
                           for r in rows], CRITICAL_PATH_COLUMNS)
        return self._table("critical_path", build)

    # issue 49: per-event tables, streamed from the block store (nsysdoc.engine.events)
    def iter_gpu_ops(self, chunk_rows: int = 1_000_000) -> Iterator["pd.DataFrame"]:
        """Every GPU operation (kernel, copy, memset) of the analysis window, in DataFrames of at
        most ``chunk_rows`` rows (:data:`GPU_OP_COLUMNS`), by start time. The capture's slices
        run again one at a time, so memory holds one slice and one chunk, however long the
        capture; each call runs them again. Raises NsysdocError for a bad ``chunk_rows``."""
        from .engine.events import gpu_op_chunks

        n = _chunk_rows(chunk_rows)
        for chunk in gpu_op_chunks(self._rows(), n):
            yield _gpu_op_frame(chunk)

    @property
    def gpu_ops(self) -> "pd.DataFrame":
        """:meth:`iter_gpu_ops` as one DataFrame: one row per GPU operation of the window (a
        20 M-kernel capture gives 20 M rows: iterate :meth:`iter_gpu_ops` to keep memory flat).
        Built on each access, not kept."""
        return _concat_frames(list(self.iter_gpu_ops()), GPU_OP_COLUMNS)

    def iter_gaps(self, chunk_rows: int = 1_000_000) -> Iterator["pd.DataFrame"]:
        """Every idle gap of the analysis window (the ``metrics.idle_gaps.count`` of them), in
        DataFrames of at most ``chunk_rows`` rows with :attr:`gaps`' columns (:data:`GAP_COLUMNS`),
        by end time (then device); streamed as :meth:`iter_gpu_ops` is."""
        from .engine.events import gap_chunks

        n = _chunk_rows(chunk_rows)
        labels = None
        a = self._rows()
        for chunk in gap_chunks(a, n):
            if labels is None:
                labels = list(a.trace.devices["label"])
            yield _gap_frame(chunk, labels)

    def all_gaps(self) -> "pd.DataFrame":
        """:meth:`iter_gaps` as one DataFrame: every gap, where :attr:`gaps` holds the 20
        longest (the same rows and columns for those; milliseconds here are not rounded, the JSON's are to 4 decimals)."""
        return _concat_frames(list(self.iter_gaps()), GAP_COLUMNS)

    # renderings
    def to_dict(self) -> dict:
        """Exactly the JSON ``nsysdoc report -f json`` writes (docs/json.md), as Python objects."""
        return json.loads(self.to_json())

    @_without_pandas
    def to_json(self) -> str:
        """The text ``nsysdoc report -f json`` writes."""
        from .assembly.written import capped_result

        return _json_text(capped_result(self._result))

    @_without_pandas
    def to_html(self, *, worst_step: bool = False) -> str:
        """The self-contained HTML page ``nsysdoc report`` writes."""
        from .views import render_html

        bytecode = None
        if self._options.cache:
            from .cache import templates_dir

            bytecode = templates_dir(self._options.cache_dir)
        return render_html(self._result, page=self._whole_page(), worst_step=worst_step, bytecode_dir=bytecode)

    @_without_pandas
    def to_markdown(self) -> str:
        """The Markdown ``nsysdoc report -f md`` writes."""
        from .views import render_markdown

        return render_markdown(self._result, page=self._whole_page())

    @_api_errors
    def perfetto_chunks(self, time_range: str | None = None, steps: str | None = None) -> Iterator[str]:
        """The Chrome trace JSON ``nsysdoc report -f perfetto`` writes (docs/perfetto.md), as text
        chunks: write them in order to a file that ui.perfetto.dev or chrome://tracing opens.
        ``time_range`` ("START_S:END_S", seconds as the page prints them) or ``steps`` ("median,worst",
        "3", "2-5") limit it, as ``--range`` / ``--steps`` do. Raises NsysdocError for a bad value."""
        from .views.perfetto import chrome_trace, selection_for

        a = self._rows()
        return chrome_trace(a, selection_for(a, time_range, steps))

    @_api_errors
    def to_perfetto(self, path: PathLike, *, time_range: str | None = None, steps: str | None = None) -> Path:
        """Write the Chrome trace JSON of :meth:`perfetto_chunks` to ``path`` (temp file, then rename).
        The command line's output guard applies first (:func:`nsysdoc.outputs.check_outputs`): a
        path this report's run read (its capture, the capture's ``-wal``, the export of a
        ``.nsys-rep``, a rule or configuration file) or one that cannot be written raises
        NsysdocError, and nothing is written."""
        from .outputs import check_outputs, check_path_value, write_chunks_atomic

        target = check_path_value(path, "output")
        _optional_str(time_range, "time_range")
        _optional_str(steps, "steps")
        check_outputs([target], self._reads or _reads_for([self.path], None))
        write_chunks_atomic(target, self.perfetto_chunks(time_range, steps))
        return target

    @_without_pandas
    def summary_text(self, page_path: str | None = None) -> str:
        """The short summary the command prints on the terminal."""
        from .views import terminal_summary

        return terminal_summary(self._result, page_path, page=self._page)

    def _repr_html_(self) -> str:
        """A compact summary (issue 49): verdict, key numbers, findings with Where; a few KB, not the page."""
        from .views.notebook import report_summary_html

        return report_summary_html(self._result)

    def __repr__(self) -> str:
        n = len(self._result.get("findings") or [])
        return f"<nsysdoc.Report {Path(self.path).name}: {self.verdict!r} ({n} finding{'s' * (n != 1)})>"



def _options(rules, config, no_config) -> pipeline.Ruleset:
    return pipeline.load_ruleset(_rule_dirs(rules), _optional_path(config, "config"), bool(no_config))



def _check_path(path) -> None:
    if isinstance(path, Report):
        return
    _path_arg(path)


def _reads_for(inputs, ruleset: pipeline.Ruleset | None, rule_dirs=()) -> list:
    """What a run on ``inputs`` with ``ruleset`` reads (:func:`nsysdoc.outputs.run_reads`): the
    inputs with their SQLite files and exports, every team rule folder loaded (given, or from the
    configuration), the configuration file."""
    from .outputs import run_reads

    dirs = list(rule_dirs or [])
    if ruleset is not None:
        dirs += list(getattr(ruleset.rules, "rule_dirs", None) or [])
        dirs += list(getattr(ruleset.config, "rule_dirs", None) or [])
    return run_reads(inputs, rule_dirs=dirs, config=ruleset.config_path if ruleset is not None else None)


@_api_errors
def reports(paths: PathLike | Sequence[PathLike], *, rules: Sequence[PathLike] | PathLike = (),
            config: PathLike | None = None, no_config: bool = False, step_marker: str | None = None,
            cache: bool = True, cache_dir: PathLike | None = None, nsys: str | None = None,
            progress: Callable[[str], None] | None = None) -> list[Report]:
    """A Report for each capture in ``paths`` (files or folders of them), in order."""
    from .inputs import expand_inputs

    items = _path_list(paths)
    options = report_options(step_marker=step_marker, cache=cache, cache_dir=cache_dir, nsys=nsys, progress=progress)
    ruleset = _options(rules, config, no_config)
    files = expand_inputs(items)
    return [_report(f, ruleset, options) for f in files]



def _report(path: PathLike, ruleset: pipeline.Ruleset, options: ReportOptions | None = None, *,
            keep_rows: bool = False, page_windows: bool = True, **fields) -> Report:
    """The Report of ``path``; ``keep_rows``: keep the trace and the engine state (a caller about
    to stream every event, ``-f perfetto``, saves reading the capture again); ``page_windows=False``:
    don't replay slices for the page's finding-range and whole-window timelines (a JSON-only run,
    issue 50: the page, if asked for later, captures them then)."""
    from .lazy_pandas import deferring

    options = options_of(options, **fields)
    with deferring():  # an nsys export's analysis needs no pandas: keep pyarrow from importing it
        analysis = pipeline.diagnose(path, ruleset, options)
        analysis.page_data(replay=page_windows)  # what the page needs, once the rules ran (issue 51)
    src = (analysis.to_dict().get("source") or {}).get("path")
    reopen = None if keep_rows else _reopen(str(src or path), analysis.step_pattern, analysis.to_dict(), options)
    return Report(analysis, options=options, reopen=reopen,
                  reads=_reads_for([path] + ([src] if src and str(src) != str(path) else []), ruleset))


def _reopen(src: str, step_pattern: str, result: dict, options: ReportOptions | None = None,
            **fields) -> Callable[[], Any]:
    """The analysis of ``src`` (the capture a report read: the SQLite export of a ``.nsys-rep``)
    made again, as :func:`nsysdoc.pipeline.diagnose` made it (from the cache when on), with the
    report's ``result`` (its findings): what a released :class:`Report` reads rows from. Of the
    ``options`` (or ``fields``) only the cache settings count: the export exists, the step
    pattern is the one the report used."""
    o = options_of(options, **fields)

    def reopen():
        from .analysis import analyze
        from .lazy_pandas import deferring
        from .trace import load_trace

        with deferring():
            a = analyze(load_trace(src, cache=o.cache, cache_dir=o.cache_dir), step_pattern=step_pattern)
        a.result = result
        return a
    return reopen


@_api_errors
def report(path: PathLike, *, rules: Sequence[PathLike] | PathLike = (), config: PathLike | None = None,
           no_config: bool = False, step_marker: str | None = None, cache: bool = True,
           cache_dir: PathLike | None = None, nsys: str | None = None,
           progress: Callable[[str], None] | None = None) -> Report:
    """Diagnose one capture: an nsys export (``.sqlite``), an nsys report (``.nsys-rep``, exported
    with ``nsys``), a PyTorch Profiler trace (``.pt.trace.json[.gz]``), or a folder holding one.

    Options are the command's: ``rules`` (team rule folders), ``config`` (default: the nearest
    nsysdoc.yaml or pyproject.toml [tool.nsysdoc], upwards; ``no_config=True`` ignores them),
    ``step_marker`` (regex for NVTX step ranges), ``cache`` / ``cache_dir``, ``nsys`` (binary).
    Raises NsysdocError for bad input (its ``message`` is the command's error line)."""
    _check_path(path)
    if isinstance(path, Report):
        return path
    options = report_options(step_marker=step_marker, cache=cache, cache_dir=cache_dir, nsys=nsys, progress=progress)
    ruleset = _options(rules, config, no_config)
    try:
        one = pipeline.one_input(path, "input")
    except InputError as exc:
        if "captures; the input must be one capture" in exc.message:
            raise InputError(exc.message, hint="nsysdoc.reports() reads each of them") from None
        raise
    return _report(one, ruleset, options)


# --- diff ---------------------------------------------------------------------------------------
class Diff:
    """Two runs compared: what ``nsysdoc diff`` computes, as an object."""

    def __init__(self, result: dict) -> None:
        self._result = result

    @property
    def verdict(self) -> str:
        """``faster``, ``slower``, ``inconclusive``, ``no significant change`` or ``identical``."""
        return str(self._result.get("verdict"))

    @property
    def headline(self) -> str:
        """One line, e.g. "Slower: 17.6% more time per step (strong evidence)"."""
        return str(self._result.get("headline") or "")

    @property
    def sentence(self) -> str:
        return str(self._result.get("sentence") or "")

    @property
    def comparable(self) -> bool:
        return bool(self._result.get("comparable"))

    @property
    def change_pct(self) -> float | None:
        """The step time change the verdict judges, percent: of the median step with marked steps on
        both sides, of the mean step when a side's steps are inferred; without timed steps, of the
        time for the same work (None when there is nothing to measure)."""
        from .compare import verdict_change_pct

        return verdict_change_pct(self._result)

    def regression(self, pct: float) -> bool:
        """True when the candidate is significantly slower by more than ``pct`` percent (what
        ``--fail-on-regression PCT`` exits 1 for)."""
        from .compare import regression

        return regression(self._result, pct)

    @property
    def kernels(self) -> "pd.DataFrame":
        """Kernels matched by name across the runs, per step (or per second of work), largest move first."""
        return _frame(self._result.get("kernels") or [], DIFF_KERNEL_COLUMNS)

    @property
    def breakdown(self) -> "pd.DataFrame":
        """The step split side by side (ms per step)."""
        return _frame(self._result.get("breakdown") or [], (
            ("part", "object"), ("label", "object"), ("base_ms_per_step", "float64"),
            ("candidate_ms_per_step", "float64"), ("delta_ms_per_step", "float64")))

    def to_dict(self) -> dict:
        """Exactly the JSON ``nsysdoc diff -f json`` writes (docs/diff.md)."""
        return json.loads(self.to_json())

    def to_json(self) -> str:
        return _json_text(self._result)

    def to_html(self) -> str:
        from .views.diff_page import render_diff_html

        return render_diff_html(self._result)

    def to_markdown(self) -> str:
        from .views.diff_page import render_diff_markdown

        return render_diff_markdown(self._result)

    def summary_text(self, page_path: str | None = None) -> str:
        from .views.diff_page import diff_terminal_summary

        return diff_terminal_summary(self._result, page_path)

    def _repr_html_(self) -> str:
        """A compact summary (issue 49): headline, sentence, the kernels that moved most."""
        from .views.notebook import diff_summary_html

        return diff_summary_html(self._result)

    def __repr__(self) -> str:
        return f"<nsysdoc.Diff {self.headline!r}>"


def _side(x, what: str, ruleset_of: Callable[[], pipeline.Ruleset], options: ReportOptions) -> tuple[dict, str]:
    if isinstance(x, Report):
        return x._result, x.path
    if isinstance(x, dict):
        raise UsageError(f"the {what} is a dict; pass a Report, a capture path or a saved report's path")
    _check_path(x)
    if pipeline.is_saved_report(x):
        return pipeline.read_report(x), str(x)
    return _report(pipeline.one_input(x, what), ruleset_of(), options)._result, str(x)


@_api_errors
def diff(base: PathLike | Report, candidate: PathLike | Report, *, rules: Sequence[PathLike] | PathLike = (),
         config: PathLike | None = None, no_config: bool = False, step_marker: str | None = None,
         cache: bool = True, cache_dir: PathLike | None = None, nsys: str | None = None,
         progress: Callable[[str], None] | None = None) -> Diff:
    """Compare two runs: captures, saved report JSON files (``nsysdoc report -f json``) or Report
    objects, in any mix. Options as :func:`report` (used for the sides that are captures)."""
    from .compare import compare

    loaded: list[pipeline.Ruleset] = []

    def ruleset_of() -> pipeline.Ruleset:
        if not loaded:
            loaded.append(_options(rules, config, no_config))
        return loaded[0]

    options = report_options(step_marker=step_marker, cache=cache, cache_dir=cache_dir, nsys=nsys, progress=progress)
    (a, name_a), (b, name_b) = (_side(base, "base", ruleset_of, options),
                                _side(candidate, "candidate", ruleset_of, options))
    return Diff(compare(a, b, names=(name_a, name_b)))


# --- job ----------------------------------------------------------------------------------------
class Job:
    """A multi-rank job: what ``nsysdoc job`` computes, as an object."""

    def __init__(self, result: dict, page_path: str | None = None) -> None:
        self._result = result
        self._page_path = page_path

    @property
    def result(self) -> dict:
        """The job's result itself (``to_dict()``'s source): read it, do not change it."""
        return self._result

    @property
    def verdict(self) -> str:
        """The job verdict sentence, the one the terminal, the Markdown and the page show
        (docs/job.md, "Job verdict"): a straggler first, then what most ranks share."""
        return str((self._result.get("verdict") or {}).get("sentence") or "")

    @property
    def straggler(self) -> dict | None:
        """The rank that makes the others wait (rank, wait per step, cause ...), or None."""
        s = self._result.get("straggler")
        return dict(s) if s else None

    @property
    def findings(self) -> list[dict]:
        """Findings rolled up over ranks (rule, severity, ranks, median impact)."""
        return [dict(f) for f in self._result.get("findings") or []]

    @property
    def warnings(self) -> list[str]:
        return list(self._result.get("warnings") or [])

    @property
    def ranks(self) -> "pd.DataFrame":
        """One row per rank: its file, step time, split of the window, clock offset and wait."""
        rows = []
        for r in self._result.get("ranks") or []:
            row = dict(r)
            row["steps"] = len(r["steps"]) if isinstance(r.get("steps"), list) else r.get("steps")
            row["verdict"] = (r.get("verdict") or {}).get("sentence") if isinstance(r.get("verdict"), dict) \
                else r.get("verdict")
            rows.append(row)
        return _frame(rows, RANK_COLUMNS)

    def fails(self, severity: str = "warning") -> bool:
        """True when a rolled-up finding or the straggler has at least ``severity`` (what
        ``nsysdoc job --fail-on`` exits 1 for)."""
        s = self._result.get("straggler")
        found = list(self._result.get("findings") or []) + ([s] if isinstance(s, dict) else [])
        return any(_at_least(f.get("severity"), severity) for f in found)

    def to_dict(self) -> dict:
        """Exactly the JSON ``nsysdoc job -f json`` writes (docs/job.md)."""
        return json.loads(self.to_json())

    def to_json(self) -> str:
        return _json_text(self._result)

    def to_html(self, page_path: str | None = None) -> str:
        from .views.job_page import render_job_html

        return render_job_html(self._result, page_path if page_path is not None else self._page_path)

    def to_markdown(self) -> str:
        from .views.job_page import render_job_markdown

        return render_job_markdown(self._result)

    def summary_text(self, page_path: str | None = None) -> str:
        from .views.job_page import job_terminal_summary

        return job_terminal_summary(self._result, page_path)

    def _repr_html_(self) -> str:
        """A compact summary (issue 49): verdict, ranks, straggler, rolled-up findings."""
        from .views.notebook import job_summary_html

        return job_summary_html(self._result, self._page_path)

    def __repr__(self) -> str:
        return f"<nsysdoc.Job {self._result.get('rank_count')} ranks: {self.verdict!r}>"


@_api_errors
def job(inputs: PathLike | Sequence[PathLike], *, jobs: int | None = None, dask: str | None = None,
        rank_pattern: str | None = None, rank_reports: PathLike | None = None,
        rules: Sequence[PathLike] | PathLike = (), config: PathLike | None = None, no_config: bool = False,
        step_marker: str | None = None, cache: bool = True, cache_dir: PathLike | None = None,
        nsys: str | None = None, progress: Callable[[int, int, list], None] | None = None,
        notice: Callable[[str], None] | None = None, dask_timeout: float | None = None) -> Job:
    """Analyse the ranks of one job: per-rank captures (files or folders), or one capture holding
    several processes. ``jobs`` ranks at a time on this machine, or on the Dask scheduler ``dask``
    (``tcp://host:8786``; ``dask_timeout`` seconds without any worker fail the job, default
    ``$NSYSDOC_DASK_WORKER_TIMEOUT`` or 120). ``rank_reports``: also write each rank's HTML page
    into this folder. ``progress(done, total, records)`` is called as ranks finish, ``notice(text)``
    with what the job is waiting for (a Dask worker)."""
    from .jobs import run_job

    items = _path_list(inputs)
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise UsageError(f"jobs must be a whole number ≥ 1, got {jobs!r}")
    _optional_str(dask, "dask")
    _optional_str(rank_pattern, "rank_pattern")
    report = report_options(step_marker=step_marker, cache=cache, cache_dir=cache_dir, nsys=nsys)
    if progress is not None and not callable(progress):
        raise UsageError(f"progress must be a function (or None), got {type(progress).__name__}")
    if notice is not None and not callable(notice):
        raise UsageError(f"notice must be a function (or None), got {type(notice).__name__}")
    if dask_timeout is not None and (isinstance(dask_timeout, bool) or not isinstance(dask_timeout, (int, float))
                                     or not dask_timeout > 0):
        raise UsageError(f"dask_timeout must be a number of seconds above 0, got {dask_timeout!r}")
    rank_reports = _optional_path(rank_reports, "rank_reports folder")
    ruleset = _options(rules, config, no_config)  # one error, before any work
    if rank_reports is not None:  # the output guard, before any work (as nsysdoc job --rank-reports)
        from .inputs import expand_inputs
        from .outputs import check_outputs

        from .jobs.ranks import rank_report_path

        files = expand_inputs(items)
        check_outputs([rank_report_path(rank_reports, f) for f in files],
                      _reads_for([*files, *items], ruleset, _rule_dirs(rules)))
    cfg_path = ruleset.config_path
    options = {**report.job_fields(), "rule_dirs": [str(Path(d).resolve()) for d in _rule_dirs(rules)],
               "config": str(Path(cfg_path).resolve()) if cfg_path else None,
               "rank_reports_dir": str(Path(rank_reports).resolve()) if rank_reports else None}
    result = run_job([str(p) for p in items], options, jobs=jobs, dask=dask, rank_pattern=rank_pattern,
                     progress=progress, notice=notice, dask_timeout=dask_timeout)
    return Job(result)


# --- the steps of a run, for the command line and tools built like it (issue 51) ------------------
# The command line reaches the library only through this module: these are the parts ``report``,
# ``diff`` and ``job`` put together, for a caller that reports many files with one ruleset, guards
# its own outputs and writes a folder's index page. Their errors name the command line's flags.
def load_ruleset(rules: Sequence[PathLike] | PathLike = (), *, config: PathLike | None = None,
                 no_config: bool = False) -> pipeline.Ruleset:
    """The built-in rules plus the team folders ``rules``, with the project configuration (as
    :func:`report` loads them): ``.rules``, ``.config``, ``.config_path``, ``.step_marker``,
    ``.fail_on``, and ``.warnings`` (configuration files found but passed over as untrusted)."""
    return _options(rules, config, no_config)


def empty_rule_folders(rules: Sequence[PathLike], ruleset: pipeline.Ruleset) -> list[Path]:
    """The rule folders (``rules``, and those the configuration names) that hold no rule file."""
    return pipeline.empty_rule_dirs(rules, ruleset)


def input_files(paths: Sequence[PathLike], seen: set | None = None) -> list[str]:
    """The capture files ``paths`` stand for, in order (a folder: its captures, sorted); ``seen``
    (a set the caller keeps) drops a file named twice across calls."""
    from .inputs import expand_inputs

    return expand_inputs(list(paths), seen)


def report_file(path: PathLike, ruleset: pipeline.Ruleset, options: ReportOptions | None = None, *,
                keep_rows: bool = False, page_windows: bool = True) -> Report:
    """The Report of one capture file with a ruleset already loaded (:func:`load_ruleset`) and the
    options built once (:class:`~nsysdoc.options.ReportOptions`): :func:`report` after its checks.
    ``keep_rows``: keep the trace and the engine state (about to stream every event: the Perfetto
    export); ``page_windows=False``: no timeline replayed for the page now (a JSON-only run; the
    page, if asked for later, replays them then)."""
    return _report(path, ruleset, options, keep_rows=keep_rows, page_windows=page_windows)


def check_outputs(outputs: Sequence[PathLike | None], inputs: Sequence[PathLike], ruleset: pipeline.Ruleset | None,
                  rules: Sequence[PathLike] = ()) -> None:
    """The output guard before any work (``nsysdoc.outputs.check_outputs``): no output may replace a
    file the run reads (the inputs and their SQLite files, the export beside a report, the rule
    files of ``rules`` and of the configuration, the configuration file), nor be unwritable."""
    from .outputs import check_outputs as guard

    guard([t for t in outputs if t is not None], _reads_for(inputs, ruleset, rules))


def check_perfetto_options(fmt: str, time_range: str | None, steps: str | None) -> None:
    """``time_range``/``steps`` of a Perfetto export, when either is given, checked before any
    capture is read (only with the format ``perfetto``, not both, well formed): UsageError otherwise."""
    if time_range is None and steps is None:
        return
    from .views.perfetto import check_export_options

    check_export_options(fmt, time_range, steps)


def rank_report_path(folder: PathLike, capture: PathLike) -> Path:
    """Where a job writes the page of the rank whose capture is ``capture`` into ``folder``."""
    from .jobs.ranks import rank_report_path as path_of

    return path_of(folder, str(capture))


def index_html(rows: Sequence[tuple], folder: PathLike) -> str:
    """The index page of a folder of reports: one row per ``(input, result, page, error)`` (a
    result and the page written for it, or None and the error line), pages linked relative to
    ``folder``."""
    from .views.index_page import index_row, render_index_html

    return render_index_html([index_row(p, r, t, Path(folder), e) for p, r, t, e in rows])


__all__ = ["Report", "Finding", "Diff", "Job", "report", "reports", "diff", "job", "NsysdocError", "InputError",
           "ReportOptions", "load_ruleset", "empty_rule_folders", "input_files", "report_file", "check_outputs",
           "check_perfetto_options", "rank_report_path", "index_html"]
