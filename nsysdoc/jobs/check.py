"""Check the rank summaries a Dask worker sends back before anything reads them.

``--dask`` trusts the cluster (``docs/job.md``, "Trusting a Dask cluster"): Dask unpickles each
result on this machine, and unpickling can run code, so a hostile worker has already won when its
result arrives. What this module guards against is the rest: a worker running another nsysdoc
version, a broken or tampered installation, or a result that is not what
:func:`nsysdoc.jobs.summary.summarize_file` returns. Every record must be a dict with exactly the
documented fields, of the documented types; numbers finite and bounded; the file the one that was
sent; the rank's report (``--rank-reports``) the path the parent asked for. The first problem is
one :class:`~nsysdoc.errors.InputError` naming the rank and the field.
"""
from __future__ import annotations

import math

from ..errors import InputError
from .summary import BREAKDOWN_PARTS, MAX_COLLECTIVES

#: the largest magnitude of a float field (ms, %, counts): no real capture comes near it
MAX_NUMBER = 1e18
#: integers (ns timestamps, pids, counts) fit a signed 64-bit column
MAX_INT = (1 << 63) - 1
#: processes one capture may hold (one record each); far above any node
MAX_RECORDS = 100_000
#: the longest text field kept (an error line, a finding's title, a verdict sentence)
MAX_TEXT = 20_000
from ..severity import SEVERITIES  # noqa: E402
HINT = ("--dask trusts the cluster and checks what it sends back (docs/job.md): install this nsysdoc "
        "version on every worker, and use only a cluster you trust")

_OK_FIELDS = {
    "file", "ok", "error", "pids", "process_name", "devices", "gpu_models", "shared_capture",
    "session_start_utc_ns", "timestamps", "distributed_rank", "window_ms", "steps", "step_source",
    "step_time_ms_median", "breakdown_ms_per_step", "gpu_busy_pct", "compute_pct", "exposed_comm_pct",
    "copy_only_pct", "idle_pct_by_cause", "findings", "verdict", "kernel_count", "collectives",
}
_FAILED_FIELDS = {"file", "ok", "error"}


class _Bad(Exception):
    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"{field} {why}")
        self.field, self.why = field, why


def one_line(text: object, limit: int = 300) -> str:
    """``text`` as one printable line of at most ``limit`` characters (control characters,
    newlines and terminal escapes become spaces)."""
    s = "".join(c if c.isprintable() else " " for c in str(text))
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _is_int(v) -> bool:
    return type(v) is int and -MAX_INT <= v <= MAX_INT


def _is_num(v) -> bool:
    return (type(v) is int and -MAX_INT <= v <= MAX_INT) or (
        type(v) is float and math.isfinite(v) and abs(v) < MAX_NUMBER)


def _num_or_none(field: str, v, *, nonneg: bool = False) -> None:
    if v is None:
        return
    if not _is_num(v):
        raise _Bad(field, "is not a finite number")
    if nonneg and v < 0:
        raise _Bad(field, "is negative")


def _text(field: str, v, *, none: bool = True, choices: tuple | None = None) -> None:
    if v is None and none:
        return
    if type(v) is not str:
        raise _Bad(field, "is not text")
    if len(v) > MAX_TEXT:
        raise _Bad(field, f"is longer than {MAX_TEXT} characters")
    if choices is not None and v not in choices:
        raise _Bad(field, f"is not one of {', '.join(choices)}")


def _list(field: str, v, item, *, limit: int | None = None) -> None:
    if type(v) is not list:
        raise _Bad(field, "is not a list")
    if limit is not None and len(v) > limit:
        raise _Bad(field, f"holds more than {limit} entries")
    for i, x in enumerate(v):
        item(f"{field}[{i}]", x)


def _int_item(field: str, v) -> None:
    if not _is_int(v):
        raise _Bad(field, "is not a whole number")


def _dict(field: str, v, *, none: bool = False) -> dict | None:
    if v is None and none:
        return None
    if type(v) is not dict:
        raise _Bad(field, "is not an object")
    for k in v:
        if type(k) is not str or len(k) > 1000:
            raise _Bad(field, "has a key that is not text")
    return v


def _numbers(field: str, v, *, keys: tuple | None = None, nonneg: bool = False) -> None:
    """An object of finite numbers (or null), with keys from ``keys`` when given."""
    if _dict(field, v, none=True) is None:
        return
    for k, x in v.items():
        if keys is not None and k not in keys:
            raise _Bad(f"{field}.{k}", "is not a known field")
        _num_or_none(f"{field}.{k}", x, nonneg=nonneg)


def _step(field: str, s) -> None:
    _dict(field, s)
    if set(s) != {"index", "start_ns", "end_ns", "step_time_ms", "breakdown_ms"}:
        raise _Bad(field, "does not have the fields of a step")
    for k in ("index", "start_ns", "end_ns"):
        if not _is_int(s[k]):
            raise _Bad(f"{field}.{k}", "is not a whole number")
    if s["end_ns"] < s["start_ns"]:
        raise _Bad(f"{field}.end_ns", "is before its start_ns")
    if not _is_num(s["step_time_ms"]) or s["step_time_ms"] < 0:
        raise _Bad(f"{field}.step_time_ms", "is not a finite number of ms at least 0")
    _numbers(f"{field}.breakdown_ms", s["breakdown_ms"], keys=BREAKDOWN_PARTS)


def _finding(field: str, f) -> None:
    _dict(field, f)
    if set(f) != {"rule", "title", "severity", "impact_ms_per_step", "impact_pct"}:
        raise _Bad(field, "does not have the fields of a finding")
    _text(f"{field}.rule", f["rule"], none=False)
    _text(f"{field}.title", f["title"])
    _text(f"{field}.severity", f["severity"], choices=SEVERITIES)
    _num_or_none(f"{field}.impact_ms_per_step", f["impact_ms_per_step"])
    _num_or_none(f"{field}.impact_pct", f["impact_pct"])


def _collectives(field: str, v) -> None:
    _dict(field, v)
    total = 0
    for name, g in v.items():
        where = f"{field}[{name[:60]!r}]"
        _dict(where, g)
        if set(g) != {"start_ns", "end_ns"}:
            raise _Bad(where, "does not have start_ns and end_ns")
        starts, ends = g["start_ns"], g["end_ns"]
        if type(starts) is not list or type(ends) is not list or len(starts) != len(ends):
            raise _Bad(where, "does not have two lists of equal length")
        total += len(starts)
        if total > MAX_COLLECTIVES:
            raise _Bad(field, f"holds more than {MAX_COLLECTIVES} kernels")
        for k, xs in (("start_ns", starts), ("end_ns", ends)):
            for i, x in enumerate(xs):
                if not _is_int(x):
                    raise _Bad(f"{where}.{k}[{i}]", "is not a whole number")


def check_record(rec, file: str, report: str | None = None) -> None:
    """Raise ``_Bad`` unless ``rec`` is one summary of ``file`` as :func:`summarize_trace` (or a
    failed :func:`summarize_file`) makes it; ``report``: the rank's report path asked for."""
    _dict("the record", rec)
    if rec.get("file") != file:
        raise _Bad("file", "is not the capture that was sent")
    ok = rec.get("ok")
    if type(ok) is not bool:
        raise _Bad("ok", "is not true or false")
    fields = set(rec) - {"report"}
    expected = _OK_FIELDS if ok else _FAILED_FIELDS
    if fields != expected:
        extra, missing = sorted(fields - expected), sorted(expected - fields)
        raise _Bad(extra[0][:60] if extra else missing[0], "is not a field of a rank summary" if extra else "is missing")
    if "report" in rec and (not ok or report is None or rec["report"] != report):
        raise _Bad("report", "is not the rank report's path that was asked for")
    if not ok:
        _text("error", rec["error"], none=False)
        return
    if rec["error"] is not None:
        raise _Bad("error", "is set on a rank that was read")
    _list("pids", rec["pids"], _int_item, limit=MAX_RECORDS)
    _text("process_name", rec["process_name"])
    for k in ("devices", "gpu_models"):
        _list(k, rec[k], lambda f, x: _text(f, x, none=False), limit=10_000)
    if type(rec["shared_capture"]) is not bool:
        raise _Bad("shared_capture", "is not true or false")
    if rec["session_start_utc_ns"] is not None and not _is_int(rec["session_start_utc_ns"]):
        raise _Bad("session_start_utc_ns", "is not a whole number")
    _text("timestamps", rec["timestamps"], none=False, choices=("session", "absolute"))
    if rec["distributed_rank"] is not None and not _is_int(rec["distributed_rank"]):
        raise _Bad("distributed_rank", "is not a whole number")
    _text("step_source", rec["step_source"], choices=("markers", "inferred"))
    for k in ("window_ms", "step_time_ms_median", "gpu_busy_pct", "compute_pct", "exposed_comm_pct", "copy_only_pct"):
        _num_or_none(k, rec[k], nonneg=True)
    _list("steps", rec["steps"], _step)
    _numbers("breakdown_ms_per_step", rec["breakdown_ms_per_step"], keys=BREAKDOWN_PARTS)
    _numbers("idle_pct_by_cause", rec["idle_pct_by_cause"])
    if rec["idle_pct_by_cause"] is None:
        raise _Bad("idle_pct_by_cause", "is not an object")
    _list("findings", rec["findings"], _finding)
    v = _dict("verdict", rec["verdict"])
    if set(v) != {"status", "headline", "sentence"}:
        raise _Bad("verdict", "does not have the fields of a verdict")
    for k in ("status", "headline", "sentence"):
        _text(f"verdict.{k}", v[k])
    if not _is_int(rec["kernel_count"]) or rec["kernel_count"] < 0:
        raise _Bad("kernel_count", "is not a count")
    _collectives("collectives", rec["collectives"])


def expected_report(file: str, options: dict) -> str | None:
    """The rank report's path :func:`summarize_file` writes for ``file`` (None without
    ``rank_reports_dir``)."""
    from .ranks import rank_report_path

    folder = (options or {}).get("rank_reports_dir")
    return str(rank_report_path(folder, str(file))) if folder else None


def check_records(recs, file: str, options: dict, label: str) -> None:
    """Refuse (InputError, one line naming ``label``: the rank) a worker's result for ``file``
    that is not a non-empty list of summaries of that file (:func:`check_record`)."""
    try:
        if type(recs) is not list:
            raise _Bad("the result", "is not a list of rank summaries")
        if not recs or len(recs) > MAX_RECORDS:
            raise _Bad("the result", f"holds {len(recs)} rank summaries (1 to {MAX_RECORDS})")
        report = expected_report(file, options)
        for i, rec in enumerate(recs):
            try:
                check_record(rec, file, report)
            except _Bad as bad:
                if len(recs) > 1:
                    raise _Bad(f"record {i}: {bad.field}", bad.why) from None
                raise
        if len(recs) > 1 and not all(r.get("ok") for r in recs):
            raise _Bad("the result", "mixes failed and read records")
    except _Bad as bad:
        raise InputError(f"the Dask worker's result for {one_line(label, 200)} is malformed: "
                         f"{one_line(bad.field, 120)} {bad.why}", hint=HINT) from None
    except RecursionError:  # pathologically nested: never a traceback
        raise InputError(f"the Dask worker's result for {one_line(label, 200)} is malformed: nested too deeply",
                         hint=HINT) from None
