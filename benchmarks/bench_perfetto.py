"""Benchmark ``nsysdoc report -f perfetto`` (the Chrome trace export) against ``-f json`` on the
same capture.

    python benchmarks/bench_perfetto.py --kernels 1000000 [--shape steps] [--out benchmarks/out]

Uses :func:`bench_report.generate` (cached by size and shape in ``--out``); each run is a fresh
process without the cache (``--no-cache``), timed with its peak RSS (``ru_maxrss``). The export
runs the analysis first and then replays its slices, so its time is about the JSON report's plus
the replay and the writing; its memory should stay near the JSON report's (events are written in
chunks of at most 65,536 events). ``--runs N`` repeats the round (json first, then the exports)
and prints each run's time and peak as ratios to that round's json run.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_report import generate  # noqa: E402


def measure(cmd: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system: less swayed by other work on a shared machine)
    and peak RSS (MB) of one child process."""
    import subprocess

    wrapper = ("import resource,subprocess,sys,time;t=time.perf_counter();"
               "r=subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL,stderr=subprocess.PIPE);"
               "e=time.perf_counter()-t;u=resource.getrusage(resource.RUSAGE_CHILDREN);"
               "print(e,u.ru_utime+u.ru_stime,u.ru_maxrss/1024,r.returncode);"
               "sys.stderr.write(r.stderr.decode(errors='replace')[-2000:])")
    out = subprocess.run([sys.executable, "-c", wrapper, *cmd], capture_output=True, text=True, check=True)
    wall, cpu, mb, rc = out.stdout.split()
    if int(rc) != 0:
        raise SystemExit(f"command failed ({rc}): {' '.join(cmd)}\n{out.stderr.strip()}")
    return float(wall), float(cpu), float(mb)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--shape", default="steps", choices=["busy", "launch-bound", "steps", "steps-ops"])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    ap.add_argument("--steps", default="median,worst", help="also time --steps SPEC (empty: skip)")
    ap.add_argument("--runs", type=int, default=1,
                    help="rounds of the runs back to back (a shared machine is noisy: compare ratios within a round)")
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
    print(f"{'run':32} {'seconds':>8} {'x json':>7} {'cpu s':>7} {'x json':>7} {'peak MB':>8} {'- json':>7}")
    for _ in range(max(args.runs, 1)):
        base = None
        for label, cmd in runs:
            wall, cpu, mb = measure(cmd)
            base = base or (wall, cpu, mb)
            print(f"{label:32} {wall:8.1f} {wall / base[0]:7.2f} {cpu:7.1f} {cpu / base[1]:7.2f} {mb:8.0f} "
                  f"{mb - base[2]:7.0f}", flush=True)
    out = args.out / "bench.perfetto.json"
    if out.exists():
        with open(out, encoding="utf-8") as fh:
            data = json.load(fh)
        print(f"export: {out.stat().st_size / 1e6:,.0f} MB, events {data['otherData']['events']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
