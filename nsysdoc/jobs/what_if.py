"""The straggler's what-if (issue 48): the job step if the straggler ran at the median rank's speed.

Pure functions over the rank summaries and the matched collectives of :mod:`nsysdoc.jobs.align`
(definitions in the glossary's "Multi-rank jobs" section and ``docs/job.md``, "Straggler
what-if"). The collectives are the points where the ranks meet; between two of them each rank
works on its own. Per step (each step index every rank holds, on the reference clock):

* a rank's **work before collective c** ``w[c, r]`` = its join of c − the end of its previous
  collective in the step (the step start for the first); its **tail** = its step end − the end of
  its last collective in the step;
* the collective's **transfer** on rank r ``x[c, r]`` = its end on r − the last join of c (the part
  no rank waits in);
* the step is replayed: every rank starts at its step start; it reaches c after ``w[c, r]``; c
  ends ``x[c, r]`` after the last rank reached it; the rank's step ends ``tail`` after its last
  collective. Replayed with the measured ``w`` this gives back the measured step of every rank.
* **The change**: the straggler's ``w[c, s]`` and tail become the median of the other ranks' (only
  where its own is longer: a fix makes nothing slower), and the step is replayed again. Saved =
  the job step replayed before − after (the job step is the longest rank's); the step after = the
  measured job step − saved. ``step_ms_before``/``step_ms_after`` are the medians over the steps,
  ``saved_ms_per_step`` their difference; ``saved_ms_per_step_mean`` = the mean of the per-step
  savings (the time recovered per step, comparable with ``wait_ms_per_step``: the medians'
  difference can be larger or smaller when a step crosses the median).

Without steps (``basis: window``), the same replay runs over the whole chain of matched
collectives, from the end of the first to the end of the last (the work before the first one is
unknown): saved per second of that span.

Collectives that overlap on a rank (the next one starts before the previous ends) count 0 work in
between; the replay with the measured numbers then differs from the measured times, and only the
difference of the two replays is used.
"""
from __future__ import annotations

import numpy as np

from .align import _step_of, _wall, aligned


def _num(x, digits: int = 4):
    if x is None:
        return None
    x = float(x)
    return round(x, digits) if np.isfinite(x) else None


def replay(start: np.ndarray, work: np.ndarray, transfer: np.ndarray, tail: np.ndarray) -> np.ndarray:
    """Each rank's end (ns) of a stretch that starts at ``start[r]``, meets at the collectives in
    order (``work[c, r]`` before each, ``transfer[c, r]`` after the last join) and ends ``tail[r]``
    after its last collective. Shapes: (R,), (C, R), (C, R), (R,)."""
    ready = start.astype(np.float64).copy()
    for c in range(work.shape[0]):
        last = float(np.max(ready + work[c]))
        ready = last + transfer[c]
    return ready + tail


def at_median(work: np.ndarray, tail: np.ndarray, who: int) -> tuple[np.ndarray, np.ndarray]:
    """``work`` and ``tail`` with rank ``who``'s entries lowered to the median of the other ranks'
    (never raised)."""
    others = [r for r in range(work.shape[1]) if r != who]
    w, t = work.copy(), tail.copy()
    if not others:
        return w, t
    if len(w):
        w[:, who] = np.minimum(w[:, who], np.median(work[:, others], axis=1))
    t[who] = min(t[who], float(np.median(tail[others])))
    return w, t


def _parts(J: np.ndarray, E: np.ndarray, start: np.ndarray, end: np.ndarray | None):
    """work (C, R), transfer (C, R) and tail (R,) of a stretch with collectives J/E (joins and ends,
    sorted by their last join), starting at ``start`` and ending at ``end`` (None: at the last
    collective's end)."""
    C = len(J)
    prev = np.vstack([start[None, :], E[:-1]]) if C else np.zeros((0, len(start)))
    work = np.maximum(J - prev, 0).astype(np.float64)
    transfer = np.maximum(E - J.max(axis=1, keepdims=True), 0).astype(np.float64)
    last_end = E[-1] if C else start
    tail = np.zeros(len(start)) if end is None else np.maximum(end - last_end, 0).astype(np.float64)
    return work, transfer, tail


def straggler_what_if(ok: list[dict], matched: dict, clock: dict, who: int) -> dict | None:
    """The what-if of rank index ``who`` (into ``ok``) at the median rank's speed (module doc), or
    None when no matched collective is there to replay through."""
    J, E, L = matched["join_ns"], matched.get("end_ns"), matched["local_start_ns"]
    if E is None or len(J) == 0 or len(ok) < 2:
        return None
    rank = ok[who]["rank"]
    change = (f"rank {rank}'s work before each collective (and after the last one in a step) at most the "
              f"median of the other ranks'")
    by_step = _step_rows(ok, J, L, clock)
    if by_step:
        before, after, saved = [], [], []
        for S, T, rows in by_step:
            order = rows[np.argsort(J[rows].max(axis=1), kind="stable")]
            work, transfer, tail = _parts(J[order], E[order], S, T)
            w2, t2 = at_median(work, tail, who)
            b = float(np.max(replay(S, work, transfer, tail) - S))
            a = float(np.max(replay(S, w2, transfer, t2) - S))
            measured = float(np.max(T - S))
            cut = max(b - a, 0.0)
            before.append(measured / 1e6)
            saved.append(cut / 1e6)
            after.append((measured - cut) / 1e6)
        b_med, a_med = float(np.median(before)), float(np.median(after))
        return {"basis": "step", "steps": len(by_step), "step_ms_before": _num(b_med), "step_ms_after": _num(a_med),
                "saved_ms_per_step": _num(b_med - a_med), "saved_ms_per_step_mean": _num(float(np.mean(saved))),
                "saved_pct": _num((b_med - a_med) / b_med * 100, 2)
                if b_med > 0 else None, "span_ms_before": None, "span_ms_after": None, "saved_ms_per_s": None,
                "change": change}
    if len(J) < 2:
        return None
    order = np.argsort(J.max(axis=1), kind="stable")
    Jo, Eo = J[order], E[order]
    start = Eo[0].astype(np.int64)
    work, transfer, tail = _parts(Jo[1:], Eo[1:], start, None)
    w2, t2 = at_median(work, tail, who)
    b = float(np.max(replay(start, work, transfer, tail) - start))
    a = float(np.max(replay(start, w2, transfer, t2) - start))
    if b <= 0:
        return None
    cut = max(b - a, 0.0)
    return {"basis": "window", "steps": 0, "step_ms_before": None, "step_ms_after": None, "saved_ms_per_step": None,
            "saved_ms_per_step_mean": None,
            "saved_pct": _num(cut / b * 100, 2), "span_ms_before": _num(b / 1e6), "span_ms_after": _num((b - cut) / 1e6),
            "saved_ms_per_s": _num(cut / b * 1000), "change": change}


def _step_rows(ok: list[dict], J: np.ndarray, L: np.ndarray, clock: dict) -> list[tuple]:
    """Per step index every rank holds: (start (R,), end (R,) on the reference clock, the rows of
    the collectives that every rank ran inside that step). Empty when a rank has no steps."""
    R = len(ok)
    if any(not s.get("steps") for s in ok):
        return []
    use_utc = bool(clock.get("use_utc"))
    ref_base = _wall(ok[0], use_utc)
    bounds: list[dict] = []
    where = np.zeros((len(J), R), dtype=np.int64)
    for r, s in enumerate(ok):
        steps = s["steps"]
        st = aligned(s, [x["start_ns"] for x in steps], clock["offsets_ns"][r], ref_base, use_utc)
        en = aligned(s, [x["end_ns"] for x in steps], clock["offsets_ns"][r], ref_base, use_utc)
        bounds.append({x["index"]: (int(a), int(b)) for x, a, b in zip(steps, st, en) if x["index"] is not None})
        pos = _step_of(steps, L[:, r])
        where[:, r] = [steps[p]["index"] if p >= 0 and steps[p]["index"] is not None else -1 for p in pos]
    out = []
    for k in sorted(set.intersection(*(set(b) for b in bounds))):
        rows = np.flatnonzero((where == k).all(axis=1))
        S = np.array([bounds[r][k][0] for r in range(R)], dtype=np.int64)
        T = np.array([bounds[r][k][1] for r in range(R)], dtype=np.int64)
        out.append((S, T, rows))
    return out
