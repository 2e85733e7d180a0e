"""Time and peak memory of the per-event tables (issue 49): ``Report.iter_gpu_ops`` /
``Report.iter_gaps`` streamed in chunks against ``Report.gpu_ops`` / ``Report.all_gaps()`` built
whole, on a capture of ``bench_report.py``'s shapes.

    python benchmarks/bench_events.py --kernels 2000000 [--shape steps] [--out benchmarks/out]

Each mode runs in a fresh process; peak memory is the child's ``ru_maxrss``, and "report" (the
report alone) is the baseline the other modes add to.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
import nsysdoc
mode, path = {mode!r}, {path!r}
t = time.perf_counter()
r = nsysdoc.report(path, no_config=True, cache=False)
t_report = time.perf_counter() - t
t = time.perf_counter()
rows = 0
if mode == "iter_gpu_ops":
    for df in r.iter_gpu_ops(chunk_rows=250_000):
        rows += len(df)
elif mode == "gpu_ops":
    rows = len(r.gpu_ops)
elif mode == "iter_gaps":
    for df in r.iter_gaps(chunk_rows=250_000):
        rows += len(df)
elif mode == "all_gaps":
    rows = len(r.all_gaps())
print(json.dumps({{"report_s": t_report, "table_s": time.perf_counter() - t, "rows": rows,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", type=int, default=2_000_000)
    ap.add_argument("--shape", default="steps", choices=["busy", "launch-bound", "steps", "steps-ops"])
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out")
    ap.add_argument("--db", type=Path, default=None, help="an existing capture of that shape (skips generation)")
    args = ap.parse_args()
    import bench_report

    db = args.db
    if db is None:
        args.out.mkdir(parents=True, exist_ok=True)
        db = args.out / f"events_{args.shape}_{args.kernels}.sqlite"
        if not db.exists():
            bench_report.generate(db, args.kernels, shape=args.shape)
    print(f"{db} ({args.kernels:,} kernels, {args.shape})")
    print(f"{'mode':<14} {'report s':>9} {'table s':>8} {'rows':>11} {'peak MB':>8}")
    for mode in ("report", "iter_gpu_ops", "gpu_ops", "iter_gaps", "all_gaps"):
        code = CHILD.format(root=str(ROOT), mode=mode, path=str(db))
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if out.returncode:
            print(mode, "failed:", out.stderr.strip()[-400:])
            continue
        d = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{mode:<14} {d['report_s']:>9.2f} {d['table_s']:>8.2f} {d['rows']:>11,} {d['peak_mb']:>8.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
