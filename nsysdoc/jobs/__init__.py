"""Multi-rank jobs (``nsysdoc job``): per-rank summaries computed in parallel (process pool or
Dask), then the job view — ranks, clock offsets, straggler, roll-up, verdict (``docs/job.md``).

:func:`run_job` is the library entry point; ``nsysdoc/cli.py`` only parses options and prints.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from .analysis import JOB_CONTRACT, analyze_job
from .ranks import assign_ranks, pid_like_ranks, rank_from_name
from .run import Notice, Progress, run_dask, run_local
from .summary import summarize_file, summarize_trace

__all__ = ["run_job", "analyze_job", "assign_ranks", "rank_from_name", "summarize_file", "summarize_trace",
           "JOB_CONTRACT"]


def run_job(inputs: list[str], options: dict | None = None, *, jobs: int | None = None, dask: str | None = None,
            rank_pattern: str | None = None, progress: Progress | None = None, notice: Notice | None = None,
            dask_timeout: float | None = None) -> dict:
    """Analyse a job from per-rank captures (files or folders), or from captures holding several
    processes each (one capture of a node, or of the whole job): then every GPU process is a rank,
    numbered in file order then pid order. Raises InputError when no input can be read, ranks
    collide, two inputs are one file (hard or symbolic links), or a Dask worker's result is
    malformed. A folder entry named like a capture that is not a file (a directory named
    ``rank1.sqlite``) is a failed rank, named in the progress, the warnings and the ranks table.

    ``notice(text)`` receives one-line status texts that are not a rank's progress (waiting for a
    Dask worker to join); ``dask_timeout``: seconds to wait for one (default
    :func:`nsysdoc.jobs.run.worker_timeout`)."""
    from ..inputs import expand_inputs, not_regular

    files = expand_inputs(inputs, same_file="refuse", keep_not_regular=True)
    options = dict(options or {})
    options["split_processes"] = True  # a capture of several GPU processes (one node) is several ranks
    one = len(files) == 1
    name_error = None
    try:
        ranks, source = ([], "processes") if one else assign_ranks(files, rank_pattern)
    except InputError as exc:  # two names claim one rank: the traces' own distributedInfo may settle it
        if rank_pattern:
            raise
        ranks, source, name_error = list(range(len(files))), "order", exc
    bad = {i: why for i, f in enumerate(files) if (why := not_regular(f)) is not None}
    failed = {i: [{"file": f, "ok": False, "error": f"is {bad[i]}, not a capture file"}] for i, f in enumerate(files)
              if i in bad}
    todo = [f for i, f in enumerate(files) if i not in bad]
    inner = progress
    if progress and bad:  # named first, each on its progress line; the others count on from there
        for n, i in enumerate(sorted(bad), 1):
            progress(n, len(files), failed[i])

        def inner(done: int, total: int, recs: list) -> None:
            progress(done + len(bad), len(files), recs)
    if not todo:
        done = []
    elif dask:
        labels = [Path(f).name if one else f"rank {ranks[i]} ({Path(f).name})"
                  for i, f in enumerate(files) if i not in bad]
        done = run_dask(todo, options, dask, inner, labels=labels, notice=notice, timeout=dask_timeout)
    else:
        done = run_local(todo, options, jobs, inner, notice=notice)
    it = iter(done)
    results = [failed[i] if i in bad else next(it) for i in range(len(files))]
    summaries = []
    if not one and all(len(recs) == 1 for recs in results) and not rank_pattern:
        # PyTorch Profiler traces record their rank (distributedInfo): it wins over file names
        recorded = [recs[0].get("distributed_rank") for recs in results]
        if all(isinstance(r, int) for r in recorded) and len(set(recorded)) == len(recorded):
            ranks, source, name_error = recorded, "distributedInfo", None
    if name_error is not None:
        _raise_failures(results, name_error)
        raise name_error
    if not one and all(len(recs) == 1 for recs in results):
        for i, recs in enumerate(results):  # one rank per file: ids from the file names
            recs[0]["rank"] = ranks[i]
            summaries.append(recs[0])
    else:  # one capture, or per-node captures of several processes: ranks in file order, then pid order
        source = "processes"
        for recs in results:
            for rec in recs:
                rec["rank"] = len(summaries)
                summaries.append(rec)
    if not any(s.get("ok") for s in summaries):
        errors = "; ".join(f"{Path(s['file']).name}: {s['error']}" for s in summaries[:3])
        raise InputError(f"no rank could be read ({errors})")
    result = analyze_job(summaries, source, one_clock=one)
    if source == "file name":
        odd = pid_like_ranks([s["rank"] for s in summaries], [s.get("pids") or [] for s in summaries])
        if odd:
            shown = ", ".join(str(r) for r in odd[:5]) + (", ..." if len(odd) > 5 else "")
            result["warnings"].append(
                f"rank ids {shown} were taken from file names and look like process ids; pass --rank-pattern "
                f"REGEX to read the rank from another part of the name (its first group is the rank)")
    return result


def _raise_failures(results: list[list[dict]], name_error: InputError) -> None:
    """File names claim one rank twice, and the traces' recorded ranks cannot settle it because
    some inputs could not be read: the unread inputs are the error (issue 49), named with theirs,
    not the names' collision, which reading them might have settled."""
    bad = [rec for recs in results for rec in recs if not rec.get("ok")]
    if not bad:
        return
    shown = "; ".join(f"{Path(str(r.get('file'))).name}: {r.get('error')}" for r in bad[:3])
    more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
    raise InputError(f"{len(bad)} of {len(results)} inputs could not be read ({shown}{more})",
                     hint=f"their ranks are unknown, and the file names alone do not settle them ({name_error.message})")
