"""Run every hostile case (tests/hostile_cases.py) plus N seeded random damages of a fixture
capture (byte flips, truncation, page overwrite) as nsysdoc subprocesses, and print a Markdown
table of what happened.

    python3 benchmarks/hostile_sweep.py              # all cases + 200 damaged captures
    python3 benchmarks/hostile_sweep.py --flips 50 --no-slow
    python3 benchmarks/hostile_sweep.py --json > sweep.json

Columns: cases; clean refusals (exit 2, one error line [+ one hint]); reports produced (exit 0/1);
internal errors ("internal error" or a Traceback in stderr, or killed by a signal); hangs (killed
at the timeout); inputs modified (sha256 of every input file, -wal/-journal sidecars included,
before/after); wrong results (a case's expected numbers or contract disagree with the report);
failed (any expectation of the case not met). Every subprocess runs under an address-space cap
(NSYSDOC_HOSTILE_MEM_GB, default 3) with an isolated NSYSDOC_CACHE_DIR. Exit code: 0 when every
case met its expectation, 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import hostile_cases as hc  # noqa: E402

COLUMNS = ["cases", "clean refusals", "reports produced", "internal errors", "hangs", "inputs modified",
           "wrong results", "other exits", "skipped", "failed"]


def tally(outcomes: list[hc.Outcome]) -> dict[str, int]:
    return {
        "cases": len(outcomes),
        "clean refusals": sum(o.category == "refusal" for o in outcomes),
        "reports produced": sum(o.category == "report" for o in outcomes),
        "internal errors": sum(o.category == "internal" for o in outcomes),
        "hangs": sum(o.category == "hang" for o in outcomes),
        "inputs modified": sum(bool(o.modified) for o in outcomes),
        "wrong results": sum(bool(o.wrong) for o in outcomes),
        "other exits": sum(o.category == "other" for o in outcomes),
        "skipped": sum(o.category == "skipped" for o in outcomes),
        "failed": sum(not o.ok and not o.skipped for o in outcomes),
    }


def markdown(groups: dict[str, list[hc.Outcome]], seconds: float) -> str:
    lines = ["| set | " + " | ".join(COLUMNS) + " |", "|---|" + "---:|" * len(COLUMNS)]
    everything = [o for g in groups.values() for o in g]
    for label, outs in [*groups.items(), ("**total**", everything)]:
        t = tally(outs)
        lines.append(f"| {label} | " + " | ".join(str(t[c]) for c in COLUMNS) + " |")
    failed = [o for o in everything if not o.ok and not o.skipped]
    if failed:
        lines += ["", "| case | item | outcome | first failure |", "|---|---:|---|---|"]
        for o in failed:
            why = (o.failures[0] if o.failures else o.harness or "").replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {o.case.name} | {o.case.item} | {o.category} | {why[:160]} |")
    skipped = [o for o in everything if o.skipped]
    for o in skipped:
        lines.append(f"\nskipped {o.case.name}: {o.skipped}")
    lines.append(f"\n{len(everything)} runs in {seconds:.0f} s")
    return "\n".join(lines)


def as_json(groups: dict[str, list[hc.Outcome]], seconds: float) -> dict:
    def one(o: hc.Outcome) -> dict:
        r = o.run
        return {"case": o.case.name, "item": o.case.item, "expect": o.case.expect, "new": o.case.new,
                "category": o.category, "ok": o.ok, "failures": o.failures, "modified": o.modified,
                "wrong": o.wrong, "skipped": o.skipped, "harness": o.harness,
                "exit": r.rc if r else None, "seconds": round(r.seconds, 3) if r else None,
                "max_rss_mb": round(r.max_rss_mb, 1) if r and r.max_rss_mb else None,
                "argv": r.argv if r else None}
    return {"seconds": round(seconds, 1), "summary": {k: tally(v) for k, v in groups.items()},
            "outcomes": [one(o) for g in groups.values() for o in g]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flips", type=int, default=200, help="random damages of the fixture capture (default 200)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random damages")
    ap.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    ap.add_argument("--workers", type=int, default=None, help="cases run at once (default: CPUs + 1, at most 4)")
    ap.add_argument("--no-slow", action="store_true", help="leave out the slow cases (100k-step capture)")
    ap.add_argument("-k", dest="pattern", default=None, help="only cases whose name contains this")
    ap.add_argument("--keep", action="store_true", help="keep the case folders (printed on stderr)")
    args = ap.parse_args(argv)

    named = [c for c in hc.CASES if not (args.no_slow and c.slow)]
    flips = hc.flip_cases(args.flips, args.seed)
    if args.pattern:
        named = [c for c in named if args.pattern in c.name]
        flips = [c for c in flips if args.pattern in c.name]
    base = Path(tempfile.mkdtemp(prefix="nsysdoc-hostile-sweep-"))
    t0 = time.monotonic()
    runner = hc.Runner(named + flips, base, workers=args.workers)
    try:
        groups = {"named cases": [runner.outcome(c.name) for c in named],
                  f"random damage (--flips {args.flips}, seed {args.seed})": [runner.outcome(c.name) for c in flips]}
    finally:
        runner.close()
    seconds = time.monotonic() - t0
    if args.keep:
        print(f"case folders kept in {base}", file=sys.stderr)
    else:
        import shutil

        for p in base.rglob("*"):  # chmod 000 folders must be enterable to be removed
            if p.is_dir() and not p.is_symlink():
                p.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps(as_json(groups, seconds), indent=2))
    else:
        print(markdown(groups, seconds))
    return 0 if all(o.ok or o.skipped for g in groups.values() for o in g) else 1


if __name__ == "__main__":
    sys.exit(main())
