"""Rank ids of per-rank captures, from their file names (``docs/job.md``).

(A PyTorch Profiler trace that records its rank in ``distributedInfo`` gets that rank instead, when
every input does: :func:`nsysdoc.jobs.run_job`.) Tried in order on the file name without its
suffixes (``.nsys-rep``, ``.sqlite``, ``.pt.trace.json[.gz]``):

1. ``rank`` followed by the number, optionally after ``_``, ``-`` or ``.``: ``rank5``, ``rank_5``,
   ``Rank-05``, ``trace.rank.5``;
2. ``r`` + number as its own part: ``job-r5``, ``job_r5_node2``;
3. a number at the end after ``_``, ``-`` or ``.``: ``report_5`` (what ``nsys profile -o
   report_%q{RANK}`` writes), ``prof.5``.

A ``--rank-pattern`` regex replaces these (its first group, or the whole match, is the rank).
When a name matches nothing, ranks follow the input order instead (for every input, so that a
mix never collides). Two inputs claiming the same rank is an error.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..errors import InputError

PATTERNS = (
    re.compile(r"(?:^|[^a-z])rank[_.-]?(\d+)", re.IGNORECASE),
    re.compile(r"(?:^|[_.-])r(\d+)(?=$|[_.-])", re.IGNORECASE),
    re.compile(r"[_.-](\d+)$"),
)


from ..formats import input_stem as _stem  # noqa: E402


def rank_report_path(folder, path: str) -> Path:
    """The rank page ``nsysdoc job --rank-reports FOLDER`` writes for the capture ``path`` (its name
    without the capture suffix, ``.pt.trace.json.gz`` included): the CLI's and the API's output
    guard and the writer use this one name."""
    return Path(folder) / f"{_stem(str(path))}.nsysdoc.html"


def rank_from_name(path: str, pattern: str | None = None) -> int | None:
    """The rank a file name claims, or None."""
    stem = _stem(path)
    if pattern:
        from .. import safe_regex

        m = safe_regex.compile(pattern).search(stem)
        if not m:
            return None
        text = m.group(1) if m.groups() else m.group(0)
        return int(text) if text and text.isdigit() and len(text) < 10 else None
    for rx in PATTERNS:
        m = rx.search(stem)
        if m:
            return int(m.group(1))
    return None


#: a rank id from a file name at or above this, and 10x the number of inputs, looks like a process id
PID_LIKE_MIN = 1000


def pid_like_ranks(ranks: list[int], pids: list[list[int]]) -> list[int]:
    """Rank ids (taken from file names) that look like process ids: equal to a pid of their own
    capture, or at least :data:`PID_LIKE_MIN` and 10 times the number of inputs (``report_12345``
    from ``nsys profile -o report_%p``)."""
    n = len(ranks)
    return sorted(r for r, p in zip(ranks, pids) if r in (p or []) or (r >= PID_LIKE_MIN and r >= 10 * n))


def assign_ranks(files: list[str], pattern: str | None = None) -> tuple[list[int], str]:
    """Rank ids for ``files`` and how they were found: ``"file name"``, ``"pattern"`` or ``"order"``.

    Raises InputError when two files claim the same rank, or when ``pattern`` does not match a file."""
    if pattern:
        from .. import safe_regex

        try:
            safe_regex.compile(pattern)
        except safe_regex.PatternError as exc:
            raise InputError(f"--rank-pattern {pattern[:60]!r}: not a valid regular expression ({exc})")
    found = [rank_from_name(f, pattern) for f in files]
    if pattern and any(r is None for r in found):
        bad = next(f for f, r in zip(files, found) if r is None)
        raise InputError(f"--rank-pattern {pattern!r} finds no rank number in {Path(bad).name}")
    if any(r is None for r in found):
        return list(range(len(files))), "order"
    seen: dict[int, str] = {}
    for f, r in zip(files, found):
        if r in seen:
            raise InputError(f"two inputs claim rank {r}: {seen[r]} and {f}",
                             hint="give each rank's capture once, or name the rank with --rank-pattern")
        seen[r] = f
    return [int(r) for r in found], "pattern" if pattern else "file name"
