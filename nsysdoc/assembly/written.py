"""The result as it is written out (JSON, and the page's embedded copy): the per-step records
capped. Kept apart from the views so that writing JSON does not import the page's code."""
from __future__ import annotations

#: Per-step records kept in the JSON output (and the copy embedded in the HTML page). Beyond it,
#: every primary step's time stays in the compact ``step_series`` (docs/json.md).
MAX_STEP_RECORDS = 2000


def capped_result(result: dict) -> dict:
    """The result as written out: per-step records capped at :data:`MAX_STEP_RECORDS`, with
    ``steps_truncated`` and ``step_series`` (index, pid, step time of every primary step) when
    cut, so output size stays O(cap) in steps while diff still sees every step time."""
    steps = result.get("steps") or []
    if len(steps) <= MAX_STEP_RECORDS:
        return result
    primary = [s for s in steps if s.get("primary")]
    out = dict(result)
    out["steps"] = steps[:MAX_STEP_RECORDS]
    out["steps_truncated"] = {"shown": MAX_STEP_RECORDS, "total": len(steps)}
    out["step_series"] = {"index": [s.get("index") for s in primary], "pid": [s.get("pid") for s in primary],
                          "step_time_ms": [s.get("step_time_ms") for s in primary]}
    return out
