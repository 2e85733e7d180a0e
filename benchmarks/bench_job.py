"""Benchmark ``nsysdoc job``: wall time with a process pool vs one process, and the parent's memory.

    python benchmarks/bench_job.py --ranks 64 --kernels 100000 [--jobs 2] [--out benchmarks/out]

Generates (once, cached in ``--out``) a few distinct per-rank exports of N kernels + N runtime
rows with ``bench_report.generate`` (a rare kernel name renamed to an NCCL all-reduce so ranks
have collectives to match) and links them as ``rank0.sqlite`` … ``rank{R-1}.sqlite``. Then, each
in a fresh process and without the cache, runs ``run_job`` with ``--jobs 1`` and with
``--jobs J``, and reports wall time, the parent's own peak RSS (``RUSAGE_SELF``: what holds the
summaries) and the largest worker's peak (``RUSAGE_CHILDREN``). The parent's peak is also
measured for a quarter and half of the ranks, to show it does not grow with the rank count.
The floor is the ``sqlite3`` shell reading the kernel and runtime columns of all R files.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_report import generate  # noqa: E402

DISTINCT = 4
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from nsysdoc.jobs import run_job
files = json.loads(sys.argv[2]); jobs = int(sys.argv[3])
t = time.perf_counter()
d = run_job(files, {"no_cache": True}, jobs=jobs)
secs = time.perf_counter() - t
print(json.dumps({"secs": secs, "parent_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "worker_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                  "ranks": d["rank_count"], "failed": d["failed_count"], "matched": d["collectives"]["matched"]}))
"""


def make_ranks(out: Path, ranks: int, kernels: int) -> list[Path]:
    base = []
    for i in range(DISTINCT):
        p = out / f"jobrank_{kernels}_{i}.sqlite"
        if not p.exists():
            generate(p, kernels, seed=100 + i)
            con = sqlite3.connect(p)
            con.execute("UPDATE StringIds SET value = ? WHERE value = 'kernel_50'", (NCCL,))
            con.execute("UPDATE StringIds SET value = ? WHERE value LIKE 'void kernel_50<%'", (NCCL + "(void)",))
            con.commit()
            con.close()
        base.append(p)
    folder = out / f"job_{ranks}x{kernels}"
    folder.mkdir(exist_ok=True)
    files = []
    for r in range(ranks):
        f = folder / f"rank{r}.sqlite"
        if not f.exists():
            try:
                os.link(base[r % DISTINCT], f)
            except OSError:
                shutil.copy(base[r % DISTINCT], f)
        files.append(f)
    return files


def run(files: list[Path], jobs: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), json.dumps([str(f) for f in files]), str(jobs)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def floor(files: list[Path]) -> float:
    sqlite = shutil.which("sqlite3")
    if not sqlite:
        return float("nan")
    sql = ('SELECT sum(start), sum("end"), sum(deviceId), sum(contextId), sum(streamId), sum(correlationId), '
           'sum(globalPid), sum(demangledName), sum(shortName) FROM CUPTI_ACTIVITY_KIND_KERNEL; '
           'SELECT sum(start), sum("end"), sum(globalTid), sum(correlationId), sum(nameId), sum(eventClass) '
           'FROM CUPTI_ACTIVITY_KIND_RUNTIME;')
    t = time.perf_counter()
    for f in files:
        subprocess.run([sqlite, str(f), sql], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--kernels", type=int, default=100_000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    files = make_ranks(args.out, args.ranks, args.kernels)
    fl = floor(files)
    print(f"{args.ranks} ranks x {args.kernels:,} kernels + {args.kernels:,} runtime rows; "
          f"floor (sqlite3 shell over all files) {fl:.1f} s")
    print(f"{'run':28} {'seconds':>8} {'x floor':>8} {'parent MB':>10} {'worker MB':>10}")
    one = run(files, 1)
    print(f"{'--jobs 1 (one process)':28} {one['secs']:8.1f} {one['secs'] / fl:8.2f} {one['parent_mb']:10.0f} {'-':>10}")
    for n in sorted({max(2, args.ranks // 4), max(2, args.ranks // 2), args.ranks}):
        res = run(files[:n], args.jobs)
        label = f"--jobs {args.jobs}, {n} ranks"
        ratio = res["secs"] / (fl * n / args.ranks)
        print(f"{label:28} {res['secs']:8.1f} {ratio:8.2f} {res['parent_mb']:10.0f} {res['worker_mb']:10.0f}"
              f"   (matched {res['matched']} collectives)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
