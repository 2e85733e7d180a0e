"""Compare two diagnoses: did the change make training faster, and why (``nsysdoc diff``).

Works on two JSON results of ``nsysdoc report`` (``docs/json.md``), however they were obtained
(a capture analysed now, or a saved ``--format json`` file), so a team can keep a small JSON
baseline. Definitions (``docs/diff.md``):

* **Identical**: two results of the same run (the same job step times, the same kernel table:
  names, launches and times, and the same window duration; paths do not count) get the verdict
  ``"identical"`` (strong), with no bootstrap: there is no change to measure.
* **Verdict** (with at least 2 timed steps on both sides): the change of the step time, with a
  bootstrap 95% interval (both sides' steps resampled with replacement, ``RESAMPLES`` times, fixed
  seed). The step time is the **median** job step when both sides' steps are marked, else (steps
  inferred on a side) the **mean** job step (total time of the steps ÷ their count): an inferred
  unit can be a layer, and the idle of a training step (waiting for input) then sits in a few
  units that the median ignores (``step_time_ms.statistic`` says which). ``"faster"`` or
  ``"slower"`` only when the interval excludes 0 and the change is at least ``NEGLIGIBLE_PCT`` %;
  ``"inconclusive"`` when the change is at least ``WEAK_THRESHOLD_PCT`` % but the interval
  includes 0; else ``"no significant change"``. With fewer than ``MIN_STEPS`` steps on a side the
  verdict is marked weak.
* Without timed steps on a side there is no step to time: the **work rate** compares how often the
  same kernels run per second of the window on each GPU (per-name launch rates, weighted by the
  base's kernel time); the verdict then needs a change of at least ``WEAK_THRESHOLD_PCT`` % and is
  marked weak. Every per-unit number is then per **second of work** (the work the base does in
  one second), so the candidate's numbers are scaled by its time for the same work: a kernel that
  is unchanged shows no change even though it runs less often per second.
* **Comparability**: what differs between the runs (GPU models and count, kernel time in shared
  kernels, how steps were found, kernels per step, profiler and version). Runs that share less
  than ``SHARED_NOT_COMPARABLE_PCT`` % of their kernel time get no verdict; limited ones (see
  ``_comparability``) at most a weak one. The **headline** says it in one line.
* **Why**: the step breakdown side by side (mean per step, per GPU), kernels matched by short name
  (time and launches per step, per GPU; new and vanished ones), NVTX ranges matched by folded name,
  copies by direction and host memory, sync calls and launches per step, and the findings resolved,
  new and changed. Every list is sorted by the size of its change, largest first.

Only ``"slower"`` is a regression (``regression``): ``"identical"``, ``"inconclusive"`` and
``"no significant change"`` never fail a build.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from .version import __version__
from .errors import InputError

#: version of the diff JSON (``docs/diff.md``)
DIFF_CONTRACT = 1
#: report JSON contract versions this diff reads (the fields it reads are checked by check_report) (``nsysdoc.analysis.CONTRACT``)
READABLE_CONTRACTS = (2, 3, 4)  # 3 adds metrics.operators, metrics.where and findings[].where only; 4 redefines
# steps and idle classes (docs/json.md), with the same keys: a saved baseline of 3 still reads
RESAMPLES = 2000
SEED = 0
MIN_STEPS = 5
#: without timed steps, the smallest change of the time for the same work that is a verdict; with
#: steps, a change at least this large whose interval includes 0 is "inconclusive", not "no significant change"
WEAK_THRESHOLD_PCT = 5.0
#: a step time change smaller than this is "no significant change" even when its interval excludes 0
NEGLIGIBLE_PCT = 1.0
#: a finding changed when its severity changed or its impact moved by this many points of the window
FINDING_CHANGE_PCT = 1.0
#: shared kernel time (either side) below this: the runs do different work, no verdict
SHARED_NOT_COMPARABLE_PCT = 50.0
#: shared kernel time (either side) below this: many kernels differ, the verdict is at most weak
SHARED_LIMITED_PCT = 80.0
#: kernels per step differing by this factor or more: a step is probably not the same work (at most weak)
KERNELS_PER_STEP_RATIO = 1.5
#: the largest saved report JSON read (a report is a few hundred KB; 10 M steps' step_series ~300 MB)
MAX_REPORT_BYTES = 512 << 20
#: the largest magnitude of a number field the diff reads: no count, time (ms), byte total or
#: percent of a real report comes near it, and sums and ratios of such numbers cannot overflow
#: to infinity (1e308 step times did, and the diff then crashed formatting "None")
MAX_NUMBER = 1e18
#: the shortest step time a saved report may hold (ms): 1 ns, nsys's resolution. A forged 1e-300 ms
#: base step read "Slower: 2268449999…(300 digits)…%". 0 (two step markers starting at the same
#: nanosecond) is a step without time, as null is, and is left out as before
MIN_STEP_MS = 1e-6
#: the longest duration (ms) a saved report may hold in a field the diff reads: about 32 years, per
#: step, window, kernel, range or copy total; a capture is hours
MAX_DURATION_MS = 1e12
TOOL_LABELS = {"nsys": "Nsight Systems", "pytorch-profiler": "the PyTorch Profiler"}

BREAKDOWN_LABELS = {
    "compute": "compute", "exposed_comm": "exposed communication", "copy": "copies only",
    "idle_sync": "idle: host blocked in a sync", "idle_input": "idle: waiting for input",
    "idle_alloc": "idle: memory allocation", "idle_setup": "idle: one-time set-up",
    "idle_launch": "idle: launch/dispatch overhead", "idle_api": "idle: other CUDA API",
    "idle_host": "idle: host CPU work", "idle_dependency": "idle: GPU-side dependency",
    "idle_tail": "idle: after the last GPU operation", "idle_unattributed": "idle: unattributed",
}


#: what the *_per_step fields are per (without timed steps a "step" is a second of work, or of window)
UNITS = {"step": "per step per GPU",
         "work": "per second of work per GPU (a second of work: what the base run does in one second of its window)",
         "second": "per second of the analysis window per GPU"}
#: the time unit of the "why" numbers, in words
MS_UNIT = {"step": "ms per step", "work": "ms per second of work", "second": "ms per second of window"}


def _is_num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and -MAX_NUMBER < x < MAX_NUMBER


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def read_saved_report(path: str | os.PathLike) -> dict:
    """A saved report JSON (one side of ``nsysdoc diff``), read with limits: at most
    :data:`MAX_REPORT_BYTES`, no ``NaN``/``Infinity`` literals (not JSON; Python's writer only
    makes them when asked), nesting no deeper than the parser's recursion limit. Anything else
    is an :class:`InputError` (one line). The fields the diff reads are then checked by
    :func:`check_report` (finite numbers of magnitude < :data:`MAX_NUMBER`, typed step_series)."""
    p = Path(path)
    hint = "pass a saved 'nsysdoc report --format json' file or a capture"
    try:
        with open(p, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_REPORT_BYTES:
                raise InputError(f"{p}: {size / (1 << 20):,.0f} MB is too large for a saved nsysdoc report "
                                 f"(at most {MAX_REPORT_BYTES >> 20} MB read)", hint=hint)
            raw = fh.read(MAX_REPORT_BYTES + 1)
    except OSError as exc:
        raise InputError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_REPORT_BYTES:  # grew while being read
        raise InputError(f"{p}: too large for a saved nsysdoc report (at most {MAX_REPORT_BYTES >> 20} MB read)",
                         hint=hint)
    try:
        return json.loads(raw.decode("utf-8-sig"), parse_constant=_no_constant)  # a BOM is harmless
    except RecursionError:
        raise InputError(f"{p}: not an nsysdoc report: JSON nested too deeply", hint=hint) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{p}: not valid JSON ({str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__})",
                         hint=hint) from None


def _malformed(what: str, field: str, why: str) -> InputError:
    return InputError(f"{what}: malformed nsysdoc report: {field} {why}",
                      hint="re-run 'nsysdoc report --format json' on the capture")


def _check_rows(what: str, rows, field: str, required: dict[str, tuple], optional: dict[str, tuple] = {}) -> None:
    """``rows`` must be a list of objects whose ``required`` keys hold one of the given kinds
    ("str", "num", "none", "dict") and whose ``optional`` keys, when present, do."""
    kinds = {"str": lambda v: isinstance(v, str), "num": _is_num, "none": lambda v: v is None,
             "dict": lambda v: isinstance(v, dict), "bool": lambda v: isinstance(v, bool),
             "list": lambda v: isinstance(v, list)}
    if not isinstance(rows, list):
        raise _malformed(what, field, "is not a list")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise _malformed(what, f"{field}[{i}]", "is not an object")
        for key, allowed in {**required, **optional}.items():
            if key not in row:
                if key in required:
                    raise _malformed(what, f"{field}[{i}].{key}", "is missing")
                continue
            if not any(kinds[k](row[key]) for k in allowed):
                raise _malformed(what, f"{field}[{i}].{key}", f"is not {' or '.join(allowed)}")


def check_report(result, what: str) -> None:
    """Refuse what is not an nsysdoc report of a contract this diff reads, or a report missing or
    mistyping a field the diff reads (one line, exit 2)."""
    if not isinstance(result, dict) or "nsysdoc_version" not in result or "metrics" not in result:
        raise InputError(f"{what}: not an nsysdoc report (expected the JSON of 'nsysdoc report --format json')")
    contract = result.get("contract")
    if contract not in READABLE_CONTRACTS:
        raise InputError(f"{what}: report of JSON contract {str(contract)[:20]} (nsysdoc "
                         f"{str(result.get('nsysdoc_version'))[:20]}); this nsysdoc reads contract "
                         f"{', '.join(map(str, READABLE_CONTRACTS))}",
                         hint="re-run 'nsysdoc report --format json' on the capture with this version")
    if "findings" not in result or "verdict" not in result:
        raise InputError(f"{what}: the report has no findings (made without the rules engine)")
    m = result["metrics"]
    for field, value, kind in (("metrics", m, dict), ("verdict", result["verdict"], dict),
                               ("capture", result.get("capture"), dict)):
        if not isinstance(value, kind):
            raise _malformed(what, field, "is not an object")
    for field in ("kernels", "sync", "values"):
        if not isinstance(m.get(field), dict):
            raise _malformed(what, f"metrics.{field}", "is missing or not an object")
    if not isinstance(m.get("launch"), (dict, type(None))):
        raise _malformed(what, "metrics.launch", "is not an object")
    cap = result["capture"]
    if cap.get("step_source") not in ("markers", "inferred", None):
        raise _malformed(what, "capture.step_source", "is not \"markers\", \"inferred\" or null")
    if not isinstance(cap.get("steps_inferred"), (dict, type(None))):
        raise _malformed(what, "capture.steps_inferred", "is not an object")
    window = result["capture"].get("window")
    if not isinstance(window, (dict, type(None))) or (window and not _is_num(window.get("duration_ms", 0) or 0)):
        raise _malformed(what, "capture.window", "is not an object with a number duration_ms")
    dc = m["values"].get("device_count")
    if dc is not None and not (_is_num(dc) and dc >= 0):
        raise _malformed(what, "metrics.values.device_count", "is not a count")
    _check_rows(what, m["kernels"].get("names"), "metrics.kernels.names", {"name": ("str",), "count": ("num",),
                                                                            "total_ms": ("num",)})
    _check_rows(what, m.get("nvtx"), "metrics.nvtx", {"text": ("str",), "count": ("num",), "total_ms": ("num",)})
    _check_rows(what, m.get("copies"), "metrics.copies", {"kind": ("str",), "bytes": ("num",), "time_ms": ("num",)},
                {"host_memory": ("str", "none"), "gbps": ("num", "none")})
    _check_rows(what, m["sync"].get("sync_calls"), "metrics.sync.sync_calls", {"count": ("num",)})
    _check_rows(what, result.get("findings"), "findings", {"rule": ("str",)},
                {"severity": ("str", "none"), "impact_pct": ("num", "none"), "impact_ms_per_step": ("num", "none"),
                 "title": ("str", "none")})
    _check_rows(what, result.get("steps") or [], "steps", {"primary": ("bool",)},
                {"step_time_ms": ("num", "none"), "breakdown_ms": ("dict", "none"), "index": ("num",),
                 "pid": ("num", "none")})
    _check_rows(what, result.get("devices") or [], "devices", {},
                {"busy_pct": ("num", "none"), "kernel_count": ("num", "none"), "copy_count": ("num", "none"),
                 "compute_ms": ("num", "none"), "exposed_comm_ms": ("num", "none"), "copy_only_ms": ("num", "none"),
                 "idle_ms_by_cause": ("dict", "none")})
    for i, st in enumerate(result.get("steps") or []):
        for k, v in (st.get("breakdown_ms") or {}).items():
            if not (_is_num(v) or v is None):
                raise _malformed(what, f"steps[{i}].breakdown_ms.{k}", "is not a number")
    for i, d in enumerate(result.get("devices") or []):
        for k, v in (d.get("idle_ms_by_cause") or {}).items():
            if not (_is_num(v) or v is None):
                raise _malformed(what, f"devices[{i}].idle_ms_by_cause.{k}", "is not a number")
    _check_series(result, what)
    _check_durations(result, what)


def _duration(what: str, field: str, v, *, step: bool = False) -> None:
    """A duration (ms) the diff reads: null, or at least 0 and at most :data:`MAX_DURATION_MS`;
    a step time (``step``) 0 or at least :data:`MIN_STEP_MS` (1 ns)."""
    if v is None:
        return
    if v < 0:
        raise _malformed(what, field, f"is negative ({v:g} ms)")
    if v > MAX_DURATION_MS:
        raise _malformed(what, field, f"is {v:g} ms, over {MAX_DURATION_MS:g} ms (about 32 years)")
    if step and 0 < v < MIN_STEP_MS:
        raise _malformed(what, field, f"is {v:g} ms, under 1 ns ({MIN_STEP_MS:g} ms): no step is that short")


def _count(what: str, field: str, v) -> None:
    if v is not None and v < 0:
        raise _malformed(what, field, f"is negative ({v:g})")


def _check_durations(result: dict, what: str) -> None:
    """Impossible numbers in fields :func:`check_report` typed: negative durations and counts,
    durations over :data:`MAX_DURATION_MS`, step times under 1 ns (``MIN_STEP_MS``), a window
    under 1 ns. Each is one line naming the field."""
    m = result["metrics"]
    _duration(what, "capture.window.duration_ms", (result["capture"].get("window") or {}).get("duration_ms"),
              step=True)
    for i, st in enumerate(result.get("steps") or []):
        _duration(what, f"steps[{i}].step_time_ms", st.get("step_time_ms"), step=True)
        for k, v in (st.get("breakdown_ms") or {}).items():
            _duration(what, f"steps[{i}].breakdown_ms.{k}", v)
    series = result.get("step_series")
    if isinstance(series, dict):
        for i, v in enumerate(series["step_time_ms"]):
            _duration(what, f"step_series.step_time_ms[{i}]", v, step=True)
    for field, rows, times, counts in (("metrics.kernels.names", m["kernels"].get("names"), ("total_ms",), ("count",)),
                                       ("metrics.nvtx", m.get("nvtx"), ("total_ms",), ("count",)),
                                       ("metrics.copies", m.get("copies"), ("time_ms",), ("bytes",)),
                                       ("metrics.sync.sync_calls", m["sync"].get("sync_calls"), (), ("count",))):
        for i, row in enumerate(rows or []):
            for k in times:
                _duration(what, f"{field}[{i}].{k}", row.get(k))
            for k in counts:
                _count(what, f"{field}[{i}].{k}", row.get(k))
    for i, d in enumerate(result.get("devices") or []):
        for k in ("compute_ms", "exposed_comm_ms", "copy_only_ms"):
            _duration(what, f"devices[{i}].{k}", d.get(k))
        for k in ("kernel_count", "copy_count"):
            _count(what, f"devices[{i}].{k}", d.get(k))
        for k, v in (d.get("idle_ms_by_cause") or {}).items():
            _duration(what, f"devices[{i}].idle_ms_by_cause.{k}", v)


def _check_series(result: dict, what: str) -> None:
    """``step_series`` (read when ``steps_truncated``): an object of three lists of equal length,
    numbers (index), numbers or null (pid, step_time_ms)."""
    series = result.get("step_series")
    if series is None:
        return
    if not isinstance(series, dict):
        raise _malformed(what, "step_series", "is not an object")
    lists = {k: series.get(k) for k in ("index", "pid", "step_time_ms")}
    for k, v in lists.items():
        if not isinstance(v, list):
            raise _malformed(what, f"step_series.{k}", "is not a list")
    if len({len(v) for v in lists.values()}) != 1:
        raise _malformed(what, "step_series", "has lists of different lengths")
    for k, v in lists.items():
        ok = _is_num if k == "index" else (lambda x: x is None or _is_num(x))
        for i, x in enumerate(v):
            if not ok(x):
                why = "is not a number" if k == "index" else "is not a number or null"
                raise _malformed(what, f"step_series.{k}[{i}]", why)


def _num(x, digits: int = 4):
    if x is None or (isinstance(x, float) and (math.isnan(x) or math.isinf(x))):
        return None
    return round(float(x), digits)


def _primary(result: dict) -> list[dict]:
    """Primary step records; from a saved report whose per-step records were capped, every step's
    index, pid and time come from its ``step_series`` (breakdowns then cover the records kept)."""
    series = result.get("step_series")
    if isinstance(series, dict) and result.get("steps_truncated"):
        idx, pid, ms = (series.get(k) or [] for k in ("index", "pid", "step_time_ms"))
        if isinstance(idx, list) and isinstance(pid, list) and isinstance(ms, list) and len(idx) == len(pid) == len(ms):
            kept = {(s.get("pid"), s.get("index")): s for s in result.get("steps") or [] if s.get("primary")}
            return [kept.get((p, i)) or {"primary": True, "index": i, "pid": p,
                                         "step_time_ms": m if _is_num(m) else None}
                    for i, p, m in zip(idx, pid, ms)]
    return [s for s in result.get("steps") or [] if s.get("primary")]


def _step_times(result: dict) -> np.ndarray:
    """The job's step times: for each job step index (``job_index``: the processes' inferred steps
    matched by start; else ``index``), the longest of the processes' primary steps (a synchronous
    data-parallel step ends when its slowest rank does). One process: its steps."""
    by_index: dict = {}
    for i, s in enumerate(_primary(result)):
        t = s.get("step_time_ms")
        if t is None or not t > 0:
            continue
        key = s.get("job_index", s.get("index", i))
        if isinstance(key, (int, float)) and key < 0:
            continue  # an inferred step with no partner on the other processes: no job step
        by_index[key] = max(by_index.get(key, 0.0), float(t))
    return np.array([by_index[k] for k in sorted(by_index)], dtype=float)


#: resampled values drawn at once per side (a chunk of resamples × steps): bounds the bootstrap's memory
CHUNK_VALUES = 1 << 21


def lower_median(x, axis=None):
    """The lower median: of an even count, the lower of the two middle values — the time of the
    report's median step (``metrics.steps.pick_steps``), so the diff shows the step time the
    report shows."""
    x = np.asarray(x, dtype=float)
    if axis is None:
        x = x.ravel()
        return float(np.partition(x, (len(x) - 1) // 2)[(len(x) - 1) // 2]) if len(x) else float("nan")
    k = (x.shape[axis] - 1) // 2
    return np.take(np.partition(x, k, axis=axis), k, axis=axis)


#: the step-time statistics a diff can compare (``step_time_ms.statistic``)
STATISTICS = {"median": lower_median, "mean": np.mean}


def bootstrap_change(a: np.ndarray, b: np.ndarray, statistic: str = "median", resamples: int = RESAMPLES,
                     seed: int = SEED, level: float = 95.0) -> tuple[float, float, float]:
    """``(change_pct, lo_pct, hi_pct)``: the change of ``statistic`` ("median" or "mean") from
    ``a`` to ``b`` and its bootstrap ``level``% interval (percentile method; each side resampled
    with replacement).

    The resamples are drawn in chunks of at most ``CHUNK_VALUES`` values per side, so memory stays
    bounded however many steps a side has: ``chunk = max(1, CHUNK_VALUES // max(len(a), len(b)))``
    resamples per chunk, the last chunk holding the rest; per chunk ``rng.integers(0, len(a), (k,
    len(a)))`` then the same for ``b``, with ``rng = np.random.default_rng(seed)``. For a given
    seed (and chunk size) the result is deterministic."""
    stat = STATISTICS[statistic]
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ma, mb = float(stat(a)), float(stat(b))
    change = (mb / ma - 1) * 100 if ma else float("nan")
    rng = np.random.default_rng(seed)
    chunk = max(1, CHUNK_VALUES // max(len(a), len(b), 1))
    ratio = np.empty(resamples, dtype=float)
    for start in range(0, resamples, chunk):
        k = min(chunk, resamples - start)
        ra = stat(a[rng.integers(0, len(a), (k, len(a)))], axis=1)
        rb = stat(b[rng.integers(0, len(b), (k, len(b)))], axis=1)
        ratio[start:start + k] = (rb / np.where(ra == 0, np.nan, ra) - 1) * 100
    tail = (100.0 - level) / 2
    lo, hi = np.nanpercentile(ratio, [tail, 100.0 - tail])
    return change, float(lo), float(hi)


def bootstrap_median_change(a: np.ndarray, b: np.ndarray, resamples: int = RESAMPLES,
                            seed: int = SEED, level: float = 95.0) -> tuple[float, float, float]:
    """:func:`bootstrap_change` of the median (the verdict's statistic with marked steps)."""
    return bootstrap_change(a, b, "median", resamples, seed, level)


def bootstrap_mean_change(a: np.ndarray, b: np.ndarray, resamples: int = RESAMPLES,
                          seed: int = SEED, level: float = 95.0) -> tuple[float, float, float]:
    """:func:`bootstrap_change` of the mean (the verdict's statistic when a side's steps are inferred)."""
    return bootstrap_change(a, b, "mean", resamples, seed, level)


def _devices(result: dict) -> int:
    return max(int(((result.get("metrics") or {}).get("values") or {}).get("device_count") or 1), 1)


def _window_s(result: dict) -> float:
    window = ((result.get("capture") or {}).get("window") or {}).get("duration_ms") or 0
    return (window / 1000.0) or 1.0


def _units(result: dict, per: str, time_per_work: float = 1.0) -> float:
    """How many units a result spans: steps (per process: each process's step thread times the
    same steps), seconds of window, or units of work (the work the base does in one second of its
    window: the candidate's window ÷ its time for the same work relative to the base)."""
    if per == "step":
        prim = _primary(result)
        return float(len(prim) / max(len({s.get("pid") for s in prim}), 1)) or 1.0
    if per == "work":
        return _window_s(result) / time_per_work
    return _window_s(result)


def _work_rate_change(base: dict, cand: dict) -> tuple[float | None, int]:
    """Change (%) of the time for the same work, from the launch rates of the kernels both runs
    run (count per second of window), weighted by the base's time in each; positive = slower."""
    wa, wb = _window_s(base) * _devices(base), _window_s(cand) * _devices(cand)
    kb = {k["name"]: k for k in base["metrics"]["kernels"].get("names") or []}
    kc = {k["name"]: k for k in cand["metrics"]["kernels"].get("names") or []}
    num = den = 0.0
    used = 0
    for name, a in kb.items():
        b = kc.get(name)
        if b is None or a["count"] < 3 or b["count"] < 3 or not a["total_ms"]:
            continue
        ratio = (b["count"] / wb) / (a["count"] / wa)
        num += a["total_ms"] * math.log(ratio)
        den += a["total_ms"]
        used += 1
    if not den:
        return None, 0
    return (1 / math.exp(num / den) - 1) * 100, used


def _statistic(base: dict, cand: dict) -> str:
    """The step time a verdict compares: "median" when both sides' steps are marked; "mean" when
    a side's steps are inferred (or of unknown origin), so the idle inside any unit counts."""
    return "median" if _step_source(base) == _step_source(cand) == "markers" else "mean"


def _measure(ta: np.ndarray, tb: np.ndarray, statistic: str, interval: bool) -> tuple[dict, str | None]:
    """One step-time statistic of both sides and its change; with ``interval``, its bootstrap
    interval, whether it is significant and the verdict it gives ("faster", "slower",
    "inconclusive" or "no significant change"); without, both null (not judged) and no verdict."""
    stat = STATISTICS[statistic]
    va, vb = float(stat(ta)), float(stat(tb))
    change = (vb / va - 1) * 100 if va else float("nan")
    out = {"statistic": statistic, "base": _num(va), "candidate": _num(vb), "change_pct": _num(change, 2),
           "ci95_pct": None, "significant": None, "base_steps": int(len(ta)), "candidate_steps": int(len(tb))}
    if not interval:
        return out, None
    change, lo, hi = bootstrap_change(ta, tb, statistic)
    excludes_0 = bool(lo > 0 or hi < 0)
    significant = excludes_0 and abs(change) >= NEGLIGIBLE_PCT
    out.update(change_pct=_num(change, 2), ci95_pct=[_num(lo, 2), _num(hi, 2)], significant=significant)
    if significant:
        return out, "slower" if change > 0 else "faster"
    if not excludes_0 and abs(change) >= WEAK_THRESHOLD_PCT:
        return out, "inconclusive"
    return out, "no significant change"


def _kernel_table(result: dict) -> list[tuple]:
    return sorted((str(k["name"]), float(k["count"]), float(k["total_ms"]))
                  for k in result["metrics"]["kernels"].get("names") or [])


def _window_ms(result: dict):
    return ((result.get("capture") or {}).get("window") or {}).get("duration_ms")


def identical(base: dict, cand: dict) -> bool:
    """Whether two results are of the same run: the same job step times (in order), the same
    kernel table (name, launches, total time of every row) and the same window duration. The
    numbers decide, not the paths: a capture against its own saved report is identical."""
    return (np.array_equal(_step_times(base), _step_times(cand)) and _window_ms(base) == _window_ms(cand)
            and _kernel_table(base) == _kernel_table(cand))


def _verdict(base: dict, cand: dict, same: bool = False) -> tuple[dict, str]:
    ta, tb = _step_times(base), _step_times(cand)
    if len(ta) >= 2 and len(tb) >= 2:
        statistic = _statistic(base, cand)
        st, verdict = _measure(ta, tb, statistic, interval=not same)
        median = st if statistic == "median" else _measure(ta, tb, "median", interval=False)[0]
        strength = "strong" if same or min(len(ta), len(tb)) >= MIN_STEPS else "weak"
        if same:  # no bootstrap: nothing differs to resample
            verdict = "identical"
            for x in (st, median):
                x["significant"] = False
        return {"per": "step", "strength": strength, "step_time_ms": st, "step_time_ms_median": median,
                "work_rate": None}, verdict
    out = {"base": None, "candidate": None, "change_pct": None, "ci95_pct": None, "significant": False,
           "base_steps": int(len(ta)), "candidate_steps": int(len(tb))}
    change, used = _work_rate_change(base, cand)
    wr = {"time_per_work_change_pct": _num(change, 2), "kernels_compared": used,
          "threshold_pct": WEAK_THRESHOLD_PCT}
    significant = change is not None and abs(change) >= WEAK_THRESHOLD_PCT and not same
    wr["significant"] = significant
    verdict = "identical" if same else ("slower" if change > 0 else "faster") if significant else "no significant change"
    per = "second" if change is None else "work"
    strength = "strong" if same else "weak" if change is not None else "none"
    return {"per": per, "strength": strength, "step_time_ms": {"statistic": None, **out},
            "step_time_ms_median": out, "work_rate": wr}, verdict


def _breakdown(base: dict, cand: dict, per: str, ua: float, ub: float) -> list[dict]:
    def parts(r: dict, units: float) -> dict[str, float]:
        if per == "step":
            rows = [s["breakdown_ms"] for s in _primary(r) if s.get("breakdown_ms")]
            keys = set().union(*rows) if rows else set()
            return {k: float(np.mean([x.get(k) or 0 for x in rows])) for k in keys}
        # per second of work or of window, per GPU: the device split of each GPU with work
        devs = [d for d in r.get("devices") or [] if d.get("busy_pct") is not None
                and (d.get("kernel_count") or 0) + (d.get("copy_count") or 0) > 0]
        out: dict[str, float] = {}
        for d in devs:
            ms = {"compute": d.get("compute_ms") or 0, "exposed_comm": d.get("exposed_comm_ms") or 0,
                  "copy": d.get("copy_only_ms") or 0,
                  **{f"idle_{c}": v or 0 for c, v in (d.get("idle_ms_by_cause") or {}).items()}}
            for k, v in ms.items():
                out[k] = out.get(k, 0.0) + v / units / max(len(devs), 1)
        return out

    pa, pb = parts(base, ua), parts(cand, ub)
    rows = []
    for k in BREAKDOWN_LABELS:
        a, b = pa.get(k, 0.0), pb.get(k, 0.0)
        if not a and not b:
            continue
        rows.append({"part": k, "label": BREAKDOWN_LABELS[k], "base_ms_per_step": _num(a),
                     "candidate_ms_per_step": _num(b), "delta_ms_per_step": _num(b - a)})
    rows.sort(key=lambda r: -abs(r["delta_ms_per_step"] or 0))
    return rows


def _matched(rows_a: list[dict], rows_b: list[dict], key: str, ua: float, ub: float, na: int, nb: int,
             extra=None) -> list[dict]:
    """Rows matched by ``key``: time and count per unit per GPU on each side, new/vanished marked."""
    a = {r[key]: r for r in rows_a}
    b = {r[key]: r for r in rows_b}
    out = []
    for name in set(a) | set(b):
        ra, rb = a.get(name), b.get(name)
        ta = (ra["total_ms"] / na / ua) if ra else 0.0
        tb = (rb["total_ms"] / nb / ub) if rb else 0.0
        ca = (ra["count"] / na / ua) if ra else 0.0
        cb = (rb["count"] / nb / ub) if rb else 0.0
        row = {"name": name, "status": "new" if ra is None else "vanished" if rb is None else "matched",
               "base_ms_per_step": _num(ta), "candidate_ms_per_step": _num(tb), "delta_ms_per_step": _num(tb - ta),
               "base_count_per_step": _num(ca, 2), "candidate_count_per_step": _num(cb, 2),
               "base_mean_us": _num(ra["total_ms"] / ra["count"] * 1000) if ra and ra["count"] else None,
               "candidate_mean_us": _num(rb["total_ms"] / rb["count"] * 1000) if rb and rb["count"] else None}
        if extra:
            row.update(extra(ra, rb))
        out.append(row)
    out.sort(key=lambda r: (-abs(r["delta_ms_per_step"] or 0), r["name"]))
    return out


def _copies(base: dict, cand: dict, ua: float, ub: float) -> list[dict]:
    def rows(r):
        out = {}
        for c in r["metrics"].get("copies") or []:
            out[f"{c['kind']} {c['host_memory'] or ''}".strip()] = c
        return out

    ra, rb = rows(base), rows(cand)
    na, nb = _devices(base), _devices(cand)
    out = []
    for k in sorted(set(ra) | set(rb)):
        a, b = ra.get(k), rb.get(k)
        out.append({"kind": k,
                    "base_bytes_per_step": int(a["bytes"] / na / ua) if a else 0,
                    "candidate_bytes_per_step": int(b["bytes"] / nb / ub) if b else 0,
                    "base_ms_per_step": _num(a["time_ms"] / na / ua) if a else 0.0,
                    "candidate_ms_per_step": _num(b["time_ms"] / nb / ub) if b else 0.0,
                    "base_gbps": a["gbps"] if a else None, "candidate_gbps": b["gbps"] if b else None})
    out.sort(key=lambda r: -abs((r["candidate_ms_per_step"] or 0) - (r["base_ms_per_step"] or 0)))
    return out


def _pageable_share(r: dict) -> float | None:
    host = [c for c in r["metrics"].get("copies") or [] if c["kind"] in ("HtoD", "DtoH")]
    total = sum(c["bytes"] for c in host)
    return _num(sum(c["bytes"] for c in host if c["host_memory"] == "pageable") / total * 100) if total else None


def _findings(base: dict, cand: dict) -> dict:
    fa = {f["rule"]: f for f in base.get("findings") or []}
    fb = {f["rule"]: f for f in cand.get("findings") or []}
    brief = lambda f: {"rule": f["rule"], "title": f.get("title"), "severity": f.get("severity"),  # noqa: E731
                       "impact_ms_per_step": f.get("impact_ms_per_step"), "impact_pct": f.get("impact_pct")}
    changed = []
    for rule in sorted(set(fa) & set(fb)):
        a, b = fa[rule], fb[rule]
        da = (b.get("impact_pct") or 0) - (a.get("impact_pct") or 0)
        if a.get("severity") != b.get("severity") or abs(da) >= FINDING_CHANGE_PCT:
            changed.append({"rule": rule, "title": b.get("title"), "base_severity": a.get("severity"),
                            "candidate_severity": b.get("severity"), "base_impact_pct": a.get("impact_pct"),
                            "candidate_impact_pct": b.get("impact_pct"), "delta_impact_pct": _num(da, 2)})
    changed.sort(key=lambda c: -abs(c["delta_impact_pct"] or 0))
    return {"resolved": [brief(fa[r]) for r in sorted(set(fa) - set(fb))],
            "new": [brief(fb[r]) for r in sorted(set(fb) - set(fa))], "changed": changed}


def _step_source(r: dict) -> str | None:
    """How a side's steps were found: "markers", "inferred" or None (no steps). Reports made before
    step inference have no ``capture.step_source``: their steps are the marked ones."""
    cap = r.get("capture") or {}
    if "step_source" in cap:
        return cap["step_source"]
    return "markers" if cap.get("has_step_markers") else None


def _gpu_models(r: dict) -> list[str] | None:
    """The GPU model names of a side (``devices[].name`` without a leading "NVIDIA "), each once,
    sorted; None when the capture records none."""
    names = {str(d.get("name")).strip() for d in r.get("devices") or [] if isinstance(d.get("name"), str)}
    names = {n[7:] if n.startswith("NVIDIA ") else n for n in names if n}
    return sorted(names) or None


def _side(r: dict, name: str | None) -> dict:
    v = r["metrics"].get("values") or {}
    cap = r.get("capture") or {}
    src = r.get("source") if isinstance(r.get("source"), dict) else {}
    text = lambda x: x if isinstance(x, str) else None  # noqa: E731
    inferred = cap.get("steps_inferred") if isinstance(cap.get("steps_inferred"), dict) else None
    return {"input": name, "path": src.get("path"),
            "nsys_version": text(src.get("nsys_version")),
            "nsysdoc_version": r.get("nsysdoc_version"), "steps": len(_step_times(r)),
            "step_pattern": cap.get("step_pattern"),
            "window_ms": (cap.get("window") or {}).get("duration_ms"),
            "gpu_busy_pct": v.get("gpu_busy_pct"), "device_count": v.get("device_count"),
            "verdict": (r.get("verdict") or {}).get("headline"),
            "tool": text(src.get("tool")) or "nsys", "schema_version": text(src.get("schema_version")),
            "gpu_models": _gpu_models(r), "step_source": _step_source(r),
            "steps_inferred": {"method": text(inferred.get("method")), "description": text(inferred.get("description")),
                               **_inferred_unit(inferred)}
            if inferred else None}


def _inferred_unit(inferred: dict) -> dict:
    """The period(s) in GPU operations and whether every process's unit is a whole training step
    (an optimizer or backward kernel in it), from ``capture.steps_inferred.processes``."""
    procs = [p for p in inferred.get("processes") or [] if isinstance(p, dict)]
    periods = sorted({p["period_ops"] for p in procs if _is_num(p.get("period_ops"))})
    return {"period_ops": [int(x) for x in periods],
            "whole_steps": bool(procs) and all(p.get("unit") == "training step" for p in procs)}


def _inferred_short(x: dict) -> str:
    """A few words on one side's inferred steps: the period, and whether it may be a layer."""
    inf = x.get("steps_inferred") or {}
    periods = "/".join(f"{p:,}" for p in inf.get("period_ops") or [])
    text = f"a unit of {periods} GPU operations repeats" if periods else "the GPU work repeats"
    if not inf.get("whole_steps"):
        text += " and runs no optimizer or backward kernel, so it may be one layer or block rather than a whole step"
    return text


def _shared_pct(rows_a: list[dict], rows_b: list[dict]) -> float | None:
    """Share (%) of side A's kernel time in kernel names side B also launches; None without kernel time."""
    names_b = {r["name"] for r in rows_b}
    total = sum(r["total_ms"] for r in rows_a)
    return _num(sum(r["total_ms"] for r in rows_a if r["name"] in names_b) / total * 100, 1) if total > 0 else None


def _whole(x: float) -> str:
    """A percentage in whole points, half up (62.5 -> "63"), as a reader rounds."""
    return str(int(math.floor(x + 0.5)))


def _version(side: dict) -> str | None:
    if side["tool"] == "pytorch-profiler":
        return f"trace schema {side['schema_version']}" if side.get("schema_version") else None
    return f"nsys {side['nsys_version']}" if side.get("nsys_version") else None


def _comparability(base: dict, cand: dict, a: dict, b: dict, per: str, kernels: list[dict]) -> tuple[dict, list[str]]:
    """What differs between the two runs, and whether their times can measure a change:
    ``status`` "comparable" (a strong verdict is possible), "limited" (the verdict is at most weak:
    ``limits`` says why) or "not comparable" (no verdict: ``reasons`` says why). With the warnings
    that say it in words (docs/diff.md, glossary "Comparability")."""
    warn: list[str] = []
    limits: list[str] = []
    reasons: list[str] = []
    ga, gb = a["gpu_models"], b["gpu_models"]
    gpus_differ = bool(ga and gb and ga != gb)
    if gpus_differ:
        limits.append("different GPU models")
        warn.append(f"The runs use different GPU models ({', '.join(ga)} vs {', '.join(gb)}): the change includes "
                    "the hardware's, so a verdict is at most weak.")
    elif bool(ga) != bool(gb):
        warn.append(f"The {'candidate' if ga else 'base'} does not record its GPU model (the "
                    f"{'base' if ga else 'candidate'} ran on {', '.join(ga or gb)}): check both ran on the same GPU type.")
    if (a["device_count"] or 0) != (b["device_count"] or 0):
        limits.append("different GPU counts")
    rows_a = base["metrics"]["kernels"].get("names") or []
    rows_b = cand["metrics"]["kernels"].get("names") or []
    sa, sb = _shared_pct(rows_a, rows_b), _shared_pct(rows_b, rows_a)
    shared = min(x for x in (sa, sb, 100.0) if x is not None)
    if sa is not None and sb is not None:
        both = f"{_whole(sa)}% of the base's kernel time and {_whole(sb)}% of the candidate's"
        if shared < SHARED_NOT_COMPARABLE_PCT:
            reasons.append(f"different models ({_whole(sa)}% and {_whole(sb)}% of kernel time in shared kernels)")
            warn.append(f"Only {both} is in kernels both runs launch (matched by name): they run different "
                        "models or code, so their times do not measure a change.")
        elif shared < SHARED_LIMITED_PCT:
            limits.append("many kernels differ")
            warn.append(f"Only {both} is in kernels both runs launch (matched by name): a new kernel library, "
                        "compiler or model change replaced many kernels, so the verdict is at most weak.")
    srca, srcb = a["step_source"], b["step_source"]
    if a["steps"] >= 2 and b["steps"] >= 2 and {srca, srcb} == {"markers", "inferred"}:
        inf = a if srca == "inferred" else b
        how = _inferred_short(inf)
        limits.append("marked steps against inferred steps")
        warn.append(f"The {'base' if srca == 'markers' else 'candidate'}'s steps are marked and the "
                    f"{'base' if srca == 'inferred' else 'candidate'}'s inferred{f' ({how})' if how else ''}: "
                    "check a step is the same work in both; the verdict is at most weak.")
    if any(x["step_source"] == "inferred" and x["steps"] >= 2 and not (x.get("steps_inferred") or {}).get("whole_steps")
           for x in (a, b)):
        limits.append("inferred steps may be layers")
        warn.append("The steps inferred on " + " and ".join(
            w for w, x in (("the base", a), ("the candidate", b)) if x["step_source"] == "inferred") +
            " run no optimizer or backward kernel: each may be one layer or block of a longer step, so the "
            "verdict is at most weak. Mark steps (ProfilerStep#N) for a verdict per training step.")
    if srca == srcb == "inferred":
        ma, mb = ((s.get("steps_inferred") or {}).get("method") for s in (a, b))
        if ma != mb:
            warn.append(f"Both runs' steps were inferred, by different methods ({ma} and {mb}): check a step "
                        "is the same work in both.")
    kpa = kpb = None
    if per == "step":
        kpa = _num(sum(k["base_count_per_step"] or 0 for k in kernels), 1)
        kpb = _num(sum(k["candidate_count_per_step"] or 0 for k in kernels), 1)
        if kpa and kpb and max(kpa, kpb) / min(kpa, kpb) >= KERNELS_PER_STEP_RATIO:
            limits.append("kernels per step differ")
            warn.append(f"A step launches {kpa:.0f} kernels per GPU in the base and {kpb:.0f} in the candidate: "
                        "a step is probably not the same work (batch size, gradient accumulation, model), so the "
                        "verdict is at most weak.")
    if a["tool"] != b["tool"]:
        limits.append("different profilers")
        warn.append(f"The base was captured by {TOOL_LABELS.get(a['tool'], a['tool'])} and the candidate by "
                    f"{TOOL_LABELS.get(b['tool'], b['tool'])}: they record different events, so the verdict is "
                    "at most weak.")
    else:
        va, vb = _version(a), _version(b)
        if va and vb and va != vb:
            warn.append(f"The captures come from different profiler versions ({va} and {vb}); the numbers "
                        "should not depend on it.")
    if per == "second" and not reasons:
        reasons.append("no shared measure of work")
    status = "not comparable" if reasons else "limited" if limits else "comparable"
    out = {"status": status, "reasons": reasons, "limits": limits,
           "gpu_models": {"base": ga, "candidate": gb, "same": None if not (ga and gb) else ga == gb},
           "device_count": {"base": a["device_count"], "candidate": b["device_count"]},
           "shared_kernel_time_pct": {"base": sa, "candidate": sb},
           "step_source": {"base": srca, "candidate": srcb},
           "kernels_per_step": {"base": kpa, "candidate": kpb},
           "tool": {"base": a["tool"], "candidate": b["tool"]},
           "version": {"base": _version(a), "candidate": _version(b)}}
    if gpus_differ and reasons:
        reasons[-1] += f" on different GPUs ({', '.join(ga)} vs {', '.join(gb)})"
    return out, warn


def _warnings(base: dict, cand: dict, a: dict, b: dict, per: str, same: bool = False) -> list[str]:
    out = []
    if (a["device_count"] or 0) != (b["device_count"] or 0):
        out.append(f"The runs use different GPU counts ({a['device_count']} and {b['device_count']}): kernels, copies "
                   "and the breakdown are compared per GPU; the step time is the job's, so a verdict is at most weak.")
    if per == "step" and a["step_source"] == b["step_source"] == "markers" and a["step_pattern"] != b["step_pattern"]:
        out.append("The step markers were found with different patterns; check that a step is the same work in both.")
    missing = " and ".join(w for w, r in (("base", a), ("candidate", b)) if (r["steps"] or 0) < 2)
    if per == "work":
        out.append(f"Fewer than 2 timed steps in the {missing}: the verdict compares kernel launch rates, which "
                   "assumes both runs do the same work at the same batch size. Add step markers (NVTX ranges or "
                   "torch.profiler's ProfilerStep) for a timed verdict.")
    elif per == "second" and not same:  # identical runs need no measure of work: they have a verdict
        out.append(f"Fewer than 2 timed steps in the {missing}, and the runs share no kernel launched at least 3 times: "
                   "there is nothing to measure work by, so no verdict. The numbers below are per second of window "
                   "and do not say which run is faster.")
    for what, r in (("base", base), ("candidate", cand)):
        if (r.get("verdict") or {}).get("status") in ("no-gpu", "too-little-work"):
            out.append(f"The {what} has too little GPU work to judge (see its report's capture-quality finding): "
                       "compare longer captures.")
    return out


def _inferred_note(a: dict, b: dict) -> str:
    """" Steps inferred on ...": which sides' steps were inferred (no step markers), with how."""
    sides = [(w, x) for w, x in (("base", a), ("candidate", b)) if x["step_source"] == "inferred" and x["steps"] >= 2]
    if not sides:
        return ""
    how = "; ".join(f"{w}: {_inferred_short(x)}" for w, x in sides)
    who = "both sides" if len(sides) == 2 else f"the {sides[0][0]}"
    return f" The steps of {who} were inferred from the repeating GPU work, not marked ({how})."


def _identical_facts(a: dict, b: dict, base: dict) -> str:
    """What two identical runs share, in a few words: steps, kernel launches, window."""
    rows = base["metrics"]["kernels"].get("names") or []
    launches = sum(r["count"] for r in rows)
    n = a["steps"]
    parts = [f"{n:,} timed step{'s' if n != 1 else ''}" if n else "no timed steps",
             f"{launches:,.0f} kernel launch{'es' if launches != 1 else ''} of {len(rows):,} "
             f"kernel{'s' if len(rows) != 1 else ''}"]
    if _is_num(a.get("window_ms")):
        parts.append(f"a {a['window_ms']:,.1f} ms window")
    return ", ".join(parts)


def _sentence(verdict: str, head: dict, why: list[str], missing: str = "both sides", comparable: bool = True,
              same: str = "") -> str:
    if verdict == "identical":
        return (f"Identical: the base and the candidate hold the same GPU work and timings ({same}; the same step "
                "times, kernel table and window): the same capture, or the same run saved twice, so there is no "
                "change to measure.")
    st = head["step_time_ms"]
    if head["per"] == "step":
        lo, hi = st["ci95_pct"]
        mean = st["statistic"] == "mean"
        text = (f"{st['statistic']} step {st['base']:.2f} ms → {st['candidate']:.2f} ms ({st['change_pct']:+.1f}%, "
                f"95% interval {lo:+.1f}% to {hi:+.1f}%, {st['base_steps']} and {st['candidate_steps']} steps"
                + ("; the mean, as the steps are not marked on both sides: the idle inside every step counts"
                   if mean else "") + ")")
        if not comparable:
            return (f"No verdict: {text}, but the runs are not comparable (see the warnings), so this does not "
                    "measure a change.")
        if verdict == "inconclusive":
            text = (f"Inconclusive: {text}; the change is large (at least {WEAK_THRESHOLD_PCT:.0f}%) but the steps "
                    "vary too much to be sure: the interval includes 0. Capture more steps to tell.")
        elif verdict != "no significant change":
            text = f"{verdict.capitalize()}: {text}."
        elif lo > 0 or hi < 0:
            text = f"No significant change: {text}; a change under {NEGLIGIBLE_PCT:.0f}% counts as none."
        else:
            text = f"No significant change: {text}; the interval includes 0."
        if head["strength"] == "weak" and min(st["base_steps"], st["candidate_steps"]) < MIN_STEPS:
            text += f" Weak: fewer than {MIN_STEPS} steps on a side."
    else:
        wr = head["work_rate"]
        if wr["time_per_work_change_pct"] is None:
            return (f"No verdict possible: without timed steps on {missing}, work is measured by the kernels both "
                    "runs launch at least 3 times, and they share none.")
        c = wr["time_per_work_change_pct"]
        often = "as often" if abs(c) < 0.05 else "less often" if c > 0 else "more often"
        measure = (f"without timed steps on {missing}, the time for the same work changes by {c:+.1f}% — the kernels both runs "
                   f"share run {often} per second per GPU ({wr['kernels_compared']} kernels compared; "
                   f"{WEAK_THRESHOLD_PCT:.0f}% needed)")
        if not comparable:
            return f"No verdict: {measure}, but the runs are not comparable (see the warnings)."
        text = f"{'No significant change' if verdict == 'no significant change' else verdict.capitalize()} (weak): {measure}."
    if why:
        text += " Largest moves: " + "; ".join(why) + "."
    return text


def _headline(verdict: str, head: dict, strength: str, comp: dict, a: dict, b: dict, missing: str,
              same: str = "") -> str:
    """One line: the verdict, by how much, per what, and how strong (docs/diff.md)."""
    if verdict == "identical":
        return f"Identical: the two captures hold the same GPU work and timings ({same})"
    if comp["status"] == "not comparable":
        if head["per"] == "second" and comp["reasons"] == ["no shared measure of work"]:
            return f"No verdict: no timed steps on {missing} and no shared kernel to measure work by"
        return "Not comparable: " + "; ".join(comp["reasons"])
    inferred = [w for w, x in (("base", a), ("candidate", b)) if x["step_source"] == "inferred" and x["steps"] >= 2]
    why = list(comp["limits"])
    if head["per"] == "step":
        st = head["step_time_ms"]
        c, (lo, hi) = st["change_pct"], st["ci95_pct"]
        mean = st["statistic"] == "mean"
        if inferred and "inferred steps may be layers" not in why:
            why.append("inferred steps on " + ("both sides" if len(inferred) == 2 else f"the {inferred[0]}"))
        if strength == "weak" and min(st["base_steps"], st["candidate_steps"]) < MIN_STEPS:
            why.append(f"fewer than {MIN_STEPS} steps")
        interval = f"95% interval {lo:+.1f}% to {hi:+.1f}%" + "".join(f"; {w}" for w in why)
        if verdict == "no significant change":
            return f"No significant change in {'mean step time' if mean else 'time per step'} ({c:+.1f}%, {interval})"
        if verdict == "inconclusive":
            return (f"Inconclusive: the {st['statistic']} step time changed by {c:+.1f}%, but the steps vary too "
                    f"much to be sure ({interval})")
        evidence = f"{strength} evidence" + (": " + ", ".join(why) if why else "")
        if mean:
            return (f"{verdict.capitalize()}: the mean step takes {abs(c):.1f}% {'more' if c > 0 else 'less'} time "
                    f"({evidence})")
        return f"{verdict.capitalize()}: {abs(c):.1f}% {'more' if c > 0 else 'less'} time per step ({evidence})"
    c = head["work_rate"]["time_per_work_change_pct"]
    why.insert(0, f"no timed steps on {missing}, measured by kernel launch rates")
    if verdict == "no significant change":
        return (f"No significant change in time for the same work ({c:+.1f}%; {WEAK_THRESHOLD_PCT:.0f}% needed "
                f"without steps)")
    return (f"{verdict.capitalize()}: the same work takes {abs(c):.1f}% {'more' if c > 0 else 'less'} time "
            f"({strength} evidence: " + ", ".join(why) + ")")


def compare(base: dict, cand: dict, names: tuple[str, str] | None = None) -> dict:
    """The diff of two report results (see the module docstring and ``docs/diff.md``). ``names``:
    how the user named the two inputs (shown instead of the capture paths)."""
    check_report(base, "base")
    check_report(cand, "candidate")
    names = names or (None, None)
    same = identical(base, cand)
    head, verdict = _verdict(base, cand, same)
    per = head["per"]
    factor = 1 + head["work_rate"]["time_per_work_change_pct"] / 100 if per == "work" else 1.0
    ua, ub, na, nb = _units(base, per), _units(cand, per, factor), _devices(base), _devices(cand)
    breakdown = _breakdown(base, cand, per, ua, ub)
    kernels = _matched(base["metrics"]["kernels"].get("names") or [], cand["metrics"]["kernels"].get("names") or [],
                       "name", ua, ub, na, nb)
    nvtx_a = [dict(r, name=r["text"]) for r in base["metrics"].get("nvtx") or []]
    nvtx_b = [dict(r, name=r["text"]) for r in cand["metrics"].get("nvtx") or []]
    nvtx = _matched(nvtx_a, nvtx_b, "name", ua, ub, na, nb)

    def per_unit(n, u, x):
        return _num(x / n / u, 2) if x is not None else None

    sync_a = sum(x["count"] for x in base["metrics"]["sync"].get("sync_calls") or [])
    sync_b = sum(x["count"] for x in cand["metrics"]["sync"].get("sync_calls") or [])
    launch_a = (base["metrics"].get("launch") or {}).get("launch_count") or 0
    launch_b = (cand["metrics"].get("launch") or {}).get("launch_count") or 0
    unit = MS_UNIT[per]
    why = [f"{b['label']} {b['delta_ms_per_step']:+.2f} {unit}" for b in breakdown[:2]
           if abs(b["delta_ms_per_step"] or 0) >= 0.005]
    why += [f"kernel {k['name'][:60]} {k['delta_ms_per_step']:+.2f} {unit}" for k in kernels[:1]
            if abs(k["delta_ms_per_step"] or 0) >= 0.005]
    if per == "second":  # no common measure of work: per-second moves say nothing about speed
        why = []
    a, b = _side(base, names[0]), _side(cand, names[1])
    comp, comp_warnings = _comparability(base, cand, a, b, per, kernels)
    strength = head["strength"]
    comparable = same or comp["status"] != "not comparable"  # identical runs need no measure of work
    if not comparable:
        verdict, strength = "no significant change", "none"
    elif comp["status"] == "limited" and strength == "strong" and not same:
        strength = "weak"
    head["strength"] = strength
    missing = " and ".join(w for w, n in (("the base", a["steps"]), ("the candidate", b["steps"])) if n < 2) \
        or "both sides"
    facts = _identical_facts(a, b, base) if same else ""
    sentence = _sentence(verdict, head, why, missing, comparable, facts)
    if comparable and per == "step" and not same:
        sentence += _inferred_note(a, b)
    return {
        "nsysdoc_version": __version__,
        "kind": "diff",
        "contract": DIFF_CONTRACT,
        "base": a,
        "candidate": b,
        "per": per,
        "unit": UNITS[per],
        "verdict": verdict,
        "strength": strength,
        "comparable": comparable,
        "headline": _headline(verdict, head, strength, comp, a, b, missing, facts),
        "sentence": sentence,
        "comparability": comp,
        "warnings": comp_warnings + _warnings(base, cand, a, b, per, same),
        "step_time_ms": head["step_time_ms"],
        "step_time_ms_median": head["step_time_ms_median"],
        "work_rate": head["work_rate"],
        "breakdown": breakdown,
        "kernels": kernels,
        "nvtx": nvtx,
        "copies": _copies(base, cand, ua, ub),
        "pageable_share_pct": {"base": _pageable_share(base), "candidate": _pageable_share(cand)},
        "sync_calls_per_step": {"base": per_unit(na, ua, sync_a), "candidate": per_unit(nb, ub, sync_b)},
        "launches_per_step": {"base": per_unit(na, ua, launch_a), "candidate": per_unit(nb, ub, launch_b)},
        "findings": _findings(base, cand),
    }


def verdict_change_pct(diff: dict) -> float | None:
    """The change (%) the verdict judges: of the step time the verdict compares
    (``step_time_ms``: the median or the mean job step) or, without timed steps, of the time for
    the same work. Diffs written before ``step_time_ms`` existed: the median's."""
    if diff["per"] == "step":
        return (diff.get("step_time_ms") or diff.get("step_time_ms_median") or {}).get("change_pct")
    return (diff.get("work_rate") or {}).get("time_per_work_change_pct")


def regression(diff: dict, pct: float) -> bool:
    """``--fail-on-regression PCT``: the verdict is "slower" and the step time the verdict compares
    (the median or the mean job step; without steps, the time for the same work) grew by more than
    ``pct`` percent. "identical", "inconclusive" and "no significant change" never fail."""
    if diff["verdict"] != "slower":
        return False
    change = verdict_change_pct(diff)
    return change is not None and change > pct
