"""Benchmark ``nsysdoc report --format json`` against the sqlite3 shell reading the same columns.

    python benchmarks/bench_report.py --kernels 5000000 [--out benchmarks/out] [--repeat 3]

Generates (once, cached by size in ``--out``) an nsys-shaped export with N kernels and N runtime
rows on 2 devices (2 processes, 3 streams each, CUDA-graph-free, sorted as nsys flushes them), then
times, each in a fresh process:

* floor: the ``sqlite3`` shell summing every column nsysdoc reads from the kernel and runtime
  tables (so SQLite decodes exactly those columns);
* cold: ``nsysdoc report X --format json --no-cache`` (no Parquet cache read or written);
* first: the same with the cache enabled and empty (reads SQLite, writes the cache);
* warm: again with the cache filled.

Peak memory is the child's ``ru_maxrss``. Prints a table and the ratios to the floor.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nsysdoc.testing import ddl  # noqa: E402
from nsysdoc.testing.builder import global_tid  # noqa: E402

KERNEL_NAMES = 400


def generate(path: Path, n: int, seed: int = 7, shape: str = "busy") -> None:
    """N kernels + N cudaLaunchKernel rows, 2 processes x 1 device x 3 streams.

    ``busy``: 2-400 µs kernels with the host ahead (the GPU is almost never idle); ``launch-bound``:
    2-10 µs kernels with ~30 µs of host time between launches, so nearly every kernel ends an idle
    gap (the worst case for the gap classification)."""
    rng = np.random.default_rng(seed)
    tmp = path.with_suffix(".tmp")
    if tmp.exists():
        tmp.unlink()
    con = sqlite3.connect(tmp)
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    w = lambda name, cols: con.execute(ddl.create_sql(name, cols))  # noqa: E731
    w("StringIds", ddl.OTHER_TABLES["StringIds"])
    names = [f"void kernel_{i}<float, {i % 7}>(float*, int)" for i in range(KERNEL_NAMES)]
    shorts = [f"kernel_{i}" for i in range(KERNEL_NAMES)]
    strings = ["cudaLaunchKernel_v7000", "cudaStreamSynchronize_v3020"] + names + shorts
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", list(enumerate(strings)))
    w("META_DATA_EXPORT", [("name", "TEXT"), ("value", "TEXT")])
    con.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)",
                    [("EXPORT_PRODUCT_VERSION", "2026.2.1.210"), ("EXPORT_SCHEMA_VERSION", "3.25.0")])
    w("CUPTI_ACTIVITY_KIND_KERNEL", ddl.kernel_columns("2026"))
    w("CUPTI_ACTIVITY_KIND_RUNTIME", ddl.RUNTIME_COLUMNS)
    nk = len(ddl.kernel_columns("2026"))
    chunk = 500_000
    per_dev = n // 2
    for dev in range(2):
        pid = 1000 + dev
        gpid = global_tid(pid, 0)
        gtid = global_tid(pid, pid)
        api_t = 1_000_000_000
        gpu_free = np.zeros(3, dtype=np.int64) + api_t
        done = 0
        corr = 0
        while done < per_dev:
            m = min(chunk, per_dev - done)
            hi = 400_000 if shape == "busy" else 10_000
            dur = np.exp(rng.uniform(np.log(2_000), np.log(hi), m)).astype(np.int64)
            api_dur = rng.integers(3_000, 9_000, m)
            host_gap = rng.exponential(8_000 if shape == "busy" else 30_000, m).astype(np.int64)
            stall = rng.random(m) < 0.002
            host_gap[stall] += rng.integers(1_000_000, 20_000_000, stall.sum())
            api_start = api_t + np.cumsum(host_gap + api_dur) - api_dur
            api_t = int(api_start[-1] + api_dur[-1])
            stream = np.where(rng.random(m) < 0.7, 0, rng.integers(1, 3, m))
            start = np.empty(m, dtype=np.int64)
            # in-order per stream: start = max(api_end + 2us, previous end on the stream)
            api_end = api_start + api_dur
            for s in range(3):
                idx = np.flatnonzero(stream == s)
                ready = api_end[idx] + 2_000
                d = dur[idx]
                # running recurrence start_i = max(ready_i, start_{i-1} + d_{i-1}) via cumulative trick
                csum = np.concatenate(([0], np.cumsum(d)[:-1]))
                base = np.maximum.accumulate(np.maximum(ready, gpu_free[s]) - csum)
                st = base + csum
                start[idx] = st
                if len(idx):
                    gpu_free[s] = st[-1] + d[-1]
            name = (rng.zipf(1.3, m) % KERNEL_NAMES).astype(np.int64)
            corr_ids = np.arange(corr + 1, corr + m + 1)
            corr += m
            krows = []
            for i in range(m):
                krows.append((int(start[i]), int(start[i] + dur[i]), dev, 1, None, int(stream[i]) + 7, int(corr_ids[i]),
                              gpid, int(2 + name[i]), int(2 + KERNEL_NAMES + name[i]), None, 1, 0, 32, 128, 1, 1,
                              256, 1, 1, 0, 0, 0, 0, int(corr_ids[i]), 0, None, 0))
            con.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({','.join('?' * nk)})", krows)
            rrows = [(int(api_start[i]), int(api_end[i]), 0, gtid, int(corr_ids[i]), 0, 0, None) for i in range(m)]
            con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?,?,?,?)", rrows)
            done += m
    con.commit()
    con.close()
    os.replace(tmp, path)


def measure(cmd: list[str], env: dict | None = None) -> tuple[float, float]:
    """Time and peak RSS of one child, using a tiny wrapper so maxrss is per child."""
    wrapper = ("import resource,subprocess,sys,time;t=time.perf_counter();"
               "r=subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL);"
               "e=time.perf_counter()-t;"
               "print(e, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss/1024, r.returncode)")
    out = subprocess.run([sys.executable, "-c", wrapper, *cmd], capture_output=True, text=True, env=env, check=True)
    secs, mb, rc = out.stdout.split()
    if int(rc) not in (0, 1):
        raise SystemExit(f"command failed ({rc}): {' '.join(cmd)}")
    return float(secs), float(mb)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--shape", choices=("busy", "launch-bound"), default="busy",
                    help="busy: the GPU is almost never idle; launch-bound: nearly every kernel ends an idle gap")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    db = args.out / (f"bench_{args.kernels}.sqlite" if args.shape == "busy" else
                     f"bench_{args.shape}_{args.kernels}.sqlite")
    if not db.exists():
        t = time.perf_counter()
        generate(db, args.kernels, shape=args.shape)
        print(f"generated {db} ({db.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t:.0f} s")
    sqlite = shutil.which("sqlite3")
    floor_sql = ('SELECT sum(start), sum("end"), sum(deviceId), sum(contextId), sum(streamId), sum(correlationId), '
                 'sum(globalPid), sum(demangledName), sum(shortName) FROM CUPTI_ACTIVITY_KIND_KERNEL; '
                 'SELECT sum(start), sum("end"), sum(globalTid), sum(correlationId), sum(nameId), sum(eventClass) '
                 'FROM CUPTI_ACTIVITY_KIND_RUNTIME;')
    cache = Path(tempfile.mkdtemp(prefix="nsysdoc-bench-cache-"))
    env = dict(os.environ, NSYSDOC_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    report = [sys.executable, "-m", "nsysdoc.cli", "report", str(db), "--format", "json", "-o", os.devnull]
    rows = []
    for _ in range(args.repeat):
        rows.append(("floor (sqlite3 shell)", *measure([sqlite, str(db), floor_sql])) if sqlite else None)
        rows.append(("cold (--no-cache)", *measure(report + ["--no-cache"], env)))
        shutil.rmtree(cache, ignore_errors=True)
        rows.append(("first (writes cache)", *measure(report, env)))
        rows.append(("warm (cache hit)", *measure(report, env)))
    shutil.rmtree(cache, ignore_errors=True)
    rows = [r for r in rows if r]
    best: dict[str, tuple[float, float]] = {}
    for name, secs, mb in rows:
        b = best.get(name)
        best[name] = (min(secs, b[0]) if b else secs, max(mb, b[1]) if b else mb)
    floor = best.get("floor (sqlite3 shell)", (float("nan"), 0))[0]
    print(f"\nN = {args.kernels:,} kernels + {args.kernels:,} runtime rows ({args.shape}), "
          f"{db.stat().st_size / 1e6:.0f} MB, best of {args.repeat}")
    print(f"{'run':24} {'seconds':>8} {'x floor':>8} {'peak MB':>8}")
    for name, (secs, mb) in best.items():
        print(f"{name:24} {secs:8.2f} {secs / floor:8.2f} {mb:8.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
