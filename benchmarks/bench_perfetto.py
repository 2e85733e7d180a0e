"""Benchmark ``nsysdoc report -f perfetto`` (the Chrome trace export) against ``-f json`` on the
same capture.

    python benchmarks/bench_perfetto.py --kernels 1000000 [--shape steps] [--out benchmarks/out]

Uses :func:`bench_report.generate` (cached by size and shape in ``--out``); each run is a fresh
process without the cache (``--no-cache``), timed with its peak RSS (``ru_maxrss``). The export
runs the analysis first and then replays its slices, so its time is about the JSON report's plus
the replay and the writing; its memory should stay near the JSON report's (events are written in
chunks, one engine slice at a time).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_report import generate, measure  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--shape", default="steps", choices=["busy", "launch-bound", "steps", "steps-ops"])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    ap.add_argument("--steps", default="median,worst", help="also time --steps SPEC (empty: skip)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cap = args.out / f"bench_{args.shape}_{args.kernels}.sqlite"
    if not cap.exists():
        print(f"generating {cap} ...", flush=True)
        generate(cap, args.kernels, shape=args.shape)
    base = [sys.executable, "-m", "nsysdoc", "report", str(cap), "--no-cache", "-q"]
    runs = [("json", base + ["-f", "json", "-o", str(args.out / "bench.json")]),
            ("perfetto (window)", base + ["-f", "perfetto", "-o", str(args.out / "bench.perfetto.json")])]
    if args.steps:
        runs.append((f"perfetto --steps {args.steps}",
                     base + ["-f", "perfetto", "--steps", args.steps, "-o", str(args.out / "bench.steps.perfetto.json")]))
    print(f"{'run':32} {'seconds':>8} {'peak MB':>8}")
    for label, cmd in runs:
        secs, mb = measure(cmd)
        print(f"{label:32} {secs:8.1f} {mb:8.0f}", flush=True)
    out = args.out / "bench.perfetto.json"
    if out.exists():
        with open(out, encoding="utf-8") as fh:
            data = json.load(fh)
        print(f"export: {out.stat().st_size / 1e6:,.0f} MB, events {data['otherData']['events']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
