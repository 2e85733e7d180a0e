"""Clock alignment and collective matching across ranks (``docs/job.md``, glossary "Job").

Every rank's events are first put on its own node's wall clock: ``utcEpochNs`` (the session start
nsys recorded) + the event's timestamp. Nodes' clocks disagree, so each rank's **clock offset**
(its clock minus the reference rank's at the same instant; positive when it is ahead) is then
estimated from the collectives themselves: the instances of one collective end together on every
rank. For the most common collective name that every rank runs, the rank's k-th end is paired with
the reference's (k+s)-th for small shifts s (a capture may start a few collectives later); the
shift whose differences are the most constant (least median absolute deviation, MAD) wins —
ties (a perfectly periodic job) go to s = 0 when both captures hold the same number of instances,
else to the smallest offset — and the offset is the median difference. Ranks in one capture
share one clock: their offsets are 0 by construction.

After alignment, instances are matched by end time: for each name every rank runs, an instance
of the reference rank is one **collective**, and each other rank's instance whose aligned end lies
nearest to it (within a quarter of the typical gap between instances, and at most 1 ms) is its
share of it. Collectives not found on every rank are left out.
"""
from __future__ import annotations

import numpy as np

MAX_SHIFT = 50
MATCH_TOL_NS = 1_000_000
MAD_TIE_NS = 20_000
#: below this many instances on either rank, the pairing is not chosen by its MAD (see _offset)
FEW_INSTANCES = 4


def _wall(summary: dict, use_utc: bool) -> int:
    return int(summary.get("session_start_utc_ns") or 0) if use_utc else 0


def common_names(summaries: list[dict]) -> list[str]:
    """Collective names every rank ran, most frequent first (by the rarest rank's count)."""
    if not summaries:
        return []
    names = set(summaries[0].get("collectives") or {})
    for s in summaries[1:]:
        names &= set(s.get("collectives") or {})
    counts = {n: min(len(s["collectives"][n]["end_ns"]) for s in summaries) for n in names}
    return sorted(names, key=lambda n: (-counts[n], n))


def _offset(ref_end: np.ndarray, end: np.ndarray) -> tuple[int, float, int] | None:
    """(offset_ns, mad_ns, shift) pairing end[k + s] with ref_end[k]; None without enough overlap."""
    n0, n1 = len(ref_end), len(end)
    need = max(2, min(n0, n1) // 2)
    cands = []
    for s in range(-min(MAX_SHIFT, n1 - 1), min(MAX_SHIFT, n1 - 1) + 1):
        k0, k1 = max(0, -s), min(n0, n1 - s)
        if k1 - k0 < need:
            continue
        d = end[k0 + s:k1 + s] - ref_end[k0:k1]
        med = float(np.median(d))
        cands.append((float(np.median(np.abs(d - med))), med, s))
    if not cands:
        return None
    if min(n0, n1) < FEW_INSTANCES:
        # 2-3 instances: a MAD over 2 pairs says nothing. Pair as many as possible, then take the
        # pairing that leaves the smallest offset (the session starts already put the clocks within
        # half the interval between collectives: docs/job.md, Limits)
        most = max(min(n0, n1 - c[2]) - max(0, -c[2]) for c in cands)
        pick = min((c for c in cands if min(n0, n1 - c[2]) - max(0, -c[2]) == most), key=lambda c: (abs(c[1]), abs(c[2])))
        return int(round(pick[1])), pick[0], pick[2]
    best_mad = min(c[0] for c in cands)
    tied = [c for c in cands if c[0] <= max(2 * best_mad, MAD_TIE_NS)]
    zero = [c for c in tied if c[2] == 0]
    pick = zero[0] if zero and n0 == n1 else min(tied, key=lambda c: (abs(c[1]), abs(c[2])))
    return int(round(pick[1])), pick[0], pick[2]


def clock_offsets(summaries: list[dict], one_clock: bool) -> dict:
    """Offsets of every rank relative to ``summaries[0]`` (the reference rank).

    Returns ``{"method", "offsets_ns": [int], "mad_us": [float | None], "shift": [int], "name",
    "use_utc", "warnings"}``; ``method`` is ``"same capture"``, ``"collective ends"``,
    ``"session start"`` (no collective every rank runs: the session starts alone) or ``"none"``."""
    n = len(summaries)
    out = {"method": "same capture", "offsets_ns": [0] * n, "mad_us": [None] * n, "shift": [0] * n,
           "name": None, "use_utc": False, "warnings": []}
    if one_clock or n <= 1:
        return out
    use_utc = all(s.get("session_start_utc_ns") for s in summaries)
    out["use_utc"] = use_utc
    if not use_utc:
        out["warnings"].append("a capture has no session start time (TARGET_INFO_SESSION_START_TIME): clock "
                               "offsets include the difference of the capture starts")
    names = common_names(summaries)
    base = [_wall(s, use_utc) for s in summaries]
    if not names:
        out["method"] = "session start" if use_utc else "none"
        # the session starts (already in every rank's wall clock) are all there is: nothing to correct
        out["warnings"].append("no collective kernel that every rank runs: ranks are aligned by their session "
                               "start times only, and no straggler can be named")
        return out
    name = names[0]
    out["method"], out["name"] = "collective ends", name
    ref = np.asarray(summaries[0]["collectives"][name]["end_ns"], dtype=np.int64) + base[0]
    for r in range(1, n):
        end = np.asarray(summaries[r]["collectives"][name]["end_ns"], dtype=np.int64) + base[r]
        got = _offset(ref, end)
        if got is None:
            out["warnings"].append(f"rank {summaries[r].get('rank')}: too few {name} kernels to align its clock")
            continue
        out["offsets_ns"][r], mad, out["shift"][r] = got[0], got[1], got[2]
        out["mad_us"][r] = round(mad / 1000, 3)
    return out


def aligned(summary: dict, t_ns, offset_ns: int, ref_base_ns: int, use_utc: bool) -> np.ndarray:
    """Times of a rank on the reference rank's capture timeline."""
    return np.asarray(t_ns, dtype=np.int64) + _wall(summary, use_utc) - offset_ns - ref_base_ns


def nearest(sorted_values: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """For each target, the position in ``sorted_values`` (ascending, not empty) of the nearest
    value (ties: the smaller one)."""
    n = len(sorted_values)
    pos = np.clip(np.searchsorted(sorted_values, targets), 1, max(n - 1, 1))
    if n == 1:
        return np.zeros(len(targets), dtype=np.int64)
    left, right = sorted_values[pos - 1], sorted_values[np.minimum(pos, n - 1)]
    return np.where(np.abs(left - targets) <= np.abs(right - targets), pos - 1, np.minimum(pos, n - 1))


def match_collectives(summaries: list[dict], clock: dict) -> dict:
    """Collectives found on every rank: ``{"names": [...], "join_ns": (C, R) array, "end_ns": (C, R),
    "local_start_ns": (C, R) (each rank's own timeline), "name_of": [C]}``; times on the
    reference's timeline."""
    n = len(summaries)
    use_utc = clock["use_utc"]
    ref_base = _wall(summaries[0], use_utc)
    joins, ends, local, name_of = [], [], [], []
    for name in common_names(summaries):
        ref_end = aligned(summaries[0], summaries[0]["collectives"][name]["end_ns"], 0, ref_base, use_utc)
        if len(ref_end) == 0:
            continue
        gaps = np.diff(np.sort(ref_end))
        tol = min(MATCH_TOL_NS, int(np.median(gaps) // 4)) if len(gaps) else MATCH_TOL_NS
        tol = max(tol, 1)
        J = np.zeros((len(ref_end), n), dtype=np.int64)
        E = np.zeros_like(J)
        L = np.zeros_like(J)
        ok = np.ones(len(ref_end), dtype=bool)
        for r, s in enumerate(summaries):
            c = s["collectives"][name]
            st = np.asarray(c["start_ns"], dtype=np.int64)
            en = np.asarray(c["end_ns"], dtype=np.int64)
            a_en = aligned(s, en, clock["offsets_ns"][r], ref_base, use_utc)
            order = np.argsort(a_en, kind="stable")
            a_sorted = a_en[order]
            idx = order[nearest(a_sorted, ref_end)]
            ok &= np.abs(a_en[idx] - ref_end) <= tol
            J[:, r] = aligned(s, st[idx], clock["offsets_ns"][r], ref_base, use_utc)
            E[:, r] = a_en[idx]
            L[:, r] = st[idx]
        joins.append(J[ok])
        ends.append(E[ok])
        local.append(L[ok])
        name_of += [name] * int(ok.sum())
    if not joins:
        empty = np.zeros((0, n), dtype=np.int64)
        return {"join_ns": empty, "end_ns": empty, "local_start_ns": empty, "name_of": []}
    J, E, L = np.vstack(joins), np.vstack(ends), np.vstack(local)
    order = np.argsort(J.min(axis=1), kind="stable")
    return {"join_ns": J[order], "end_ns": E[order], "local_start_ns": L[order],
            "name_of": [name_of[i] for i in order]}


def _step_of(steps: list[dict], t_local: np.ndarray) -> np.ndarray:
    """Index into ``steps`` of the step containing each local time, -1 outside every step."""
    if not steps:
        return np.full(len(t_local), -1)
    starts = np.array([s["start_ns"] for s in steps], dtype=np.int64)
    ends = np.array([s["end_ns"] for s in steps], dtype=np.int64)
    pos = np.searchsorted(starts, t_local, side="right") - 1
    inside = (pos >= 0) & (t_local < ends[np.clip(pos, 0, len(ends) - 1)])
    return np.where(inside, pos, -1)
