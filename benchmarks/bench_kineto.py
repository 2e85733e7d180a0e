"""Benchmark ``nsysdoc report`` on a PyTorch Profiler (Kineto) trace against ``json.load`` of it.

    python benchmarks/bench_kineto.py --kernels 1000000 [--out benchmarks/out] [--repeat 2]

Generates (once, cached by size in ``--out``, streamed to disk: never built in memory) a Kineto
trace as PyTorch >= 2.0 writes it (``baseTimeNanoseconds``, microseconds with 3 decimals, the
multi-line layout of libkineto's ``output_json.cpp``): N ``cudaLaunchKernel`` calls on the main
thread, N kernels on 3 streams of one GPU (the host stays ahead: the GPU is rarely idle), an
``ac2g`` flow pair per launch, and a ``ProfilerStep#i`` annotation around every 1,000 launches.
Then times, each in a fresh process, best of ``--repeat``:

* floor: ``python -c "import json; json.load(open(F))"`` (parsing alone, no analysis);
* cold: ``nsysdoc report F --format json --no-cache`` (stream-parse, analysis, rules, JSON);
* warm: the same with the cache filled (the first run writes it).

Peak memory is the child's ``ru_maxrss``. Prints a Markdown table with the ratios to the floor
(the machine is shared and noisy, so compare ratios measured in one batch).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_report import measure  # noqa: E402

KERNEL_NAMES = 400
BASE_NS = 1_759_276_800_000_000_000  # 2025-10-01: a Kineto base time (a 3-month boundary)
PID = 4242


def _us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def generate(path: Path, n: int, seed: int = 7) -> None:
    """Stream the trace to ``path`` chunk by chunk (a few MB of Python objects at a time)."""
    rng = np.random.default_rng(seed)
    names = [f"void at::native::vectorized_elementwise_kernel<4, at::native::Functor{i}<float>, "
             f"at::detail::Array<char*, {1 + i % 3}> >(int, at::native::Functor{i}<float>, "
             f"at::detail::Array<char*, {1 + i % 3}>)" for i in range(KERNEL_NAMES)]
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8", buffering=1 << 22) as f:
        f.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {"id": 0, "name": "NVIDIA H100 80GB HBM3", '
                '"totalGlobalMem": 85045379072, "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024, '
                '"maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, '
                '"warpSize": 32, "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 233472, "numSms": 132, '
                '"sharedMemPerBlockOptin": 232448}\n  ],\n'
                '  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},\n'
                f'  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": {BASE_NS},\n  "traceEvents": [')
        f.write(f'\n  {{\n    "name": "process_name", "ph": "M", "ts": 0.000, "pid": {PID}, "tid": 0,\n'
                f'    "args": {{\n      "name": "python"\n    }}\n  }},')
        api_t = 3_000_000_000_000  # ~35 days after the base time: 13-digit microseconds, as in real traces
        t_start = api_t
        free = np.full(3, api_t, dtype=np.int64)
        corr = 0
        chunk = 100_000
        done = 0
        steps: list[tuple[int, int]] = []
        while done < n:
            m = min(chunk, n - done)
            dur = np.exp(rng.uniform(np.log(2_000), np.log(60_000), m)).astype(np.int64)
            api_dur = rng.integers(3_000, 9_000, m)
            gap = rng.exponential(6_000, m).astype(np.int64)
            api_start = api_t + np.cumsum(gap + api_dur) - api_dur
            api_end = api_start + api_dur
            api_t = int(api_end[-1])
            stream = np.where(rng.random(m) < 0.7, 0, rng.integers(1, 3, m))
            start = np.empty(m, dtype=np.int64)
            for s in range(3):
                idx = np.flatnonzero(stream == s)
                if not len(idx):
                    continue
                ready = api_end[idx] + 2_000
                d = dur[idx]
                csum = np.concatenate(([0], np.cumsum(d)[:-1]))
                st = np.maximum.accumulate(np.maximum(ready, free[s]) - csum) + csum
                start[idx] = st
                free[s] = st[-1] + d[-1]
            name = (rng.zipf(1.3, m) % KERNEL_NAMES).astype(np.int64)
            out = []
            for i in range(m):
                corr += 1
                a0, a1, k0 = int(api_start[i]), int(api_end[i]), int(start[i])
                k1 = k0 + int(dur[i])
                sid = 7 + int(stream[i])
                if (done + i) % 1000 == 0:
                    steps.append((a0 - 1_000, 0))
                out.append(
                    f'\n  {{\n    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": {PID}, '
                    f'"tid": {PID},\n    "ts": {_us(a0)}, "dur": {_us(a1 - a0)},\n    "args": {{\n'
                    f'      "External id": {corr}, "cbid": 211, "correlation": {corr}\n    }}\n  }},'
                    f'\n  {{\n    "ph": "s", "id": {corr}, "pid": {PID}, "tid": {PID}, "ts": {_us(a0)},\n'
                    f'    "cat": "ac2g", "name": "ac2g"\n  }},'
                    f'\n  {{\n    "ph": "X", "cat": "kernel", "name": "{names[name[i]]}", "pid": 0, "tid": {sid},\n'
                    f'    "ts": {_us(k0)}, "dur": {_us(k1 - k0)},\n    "args": {{\n      "External id": {corr},\n'
                    f'      "queued": 0, "device": 0, "context": 1,\n      "stream": {sid}, "correlation": {corr},\n'
                    f'      "registers per thread": 16,\n      "shared memory": 0,\n'
                    f'      "blocks per SM": 0.0074074073,\n      "warps per SM": 0.0296296291,\n'
                    f'      "grid": [1, 1, 1],\n      "block": [128, 1, 1],\n      "est. achieved occupancy %": 0\n'
                    f'    }}\n  }},'
                    f'\n  {{\n    "ph": "f", "id": {corr}, "pid": 0, "tid": {sid}, "ts": {_us(k0)},\n'
                    f'    "cat": "ac2g", "name": "ac2g", "bp": "e"\n  }},')
            f.write("".join(out))
            done += m
        # ProfilerStep#i: from just before every 1000th launch to just before the next
        bounds = [s for s, _ in steps] + [api_t + 1_000]
        f.write("".join(
            f'\n  {{\n    "ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{i}", "pid": {PID}, "tid": {PID},\n'
            f'    "ts": {_us(bounds[i])}, "dur": {_us(bounds[i + 1] - bounds[i])},\n'
            f'    "args": {{\n      "External id": {n + 1 + i}\n    }}\n  }},' for i in range(len(steps))))
        end = int(max(free.max(), api_t)) + 1_000_000
        f.write(f'\n  {{\n    "ph": "X", "cat": "Trace", "ts": {_us(t_start - 2_000)}, "dur": {_us(end - t_start + 2_000)},\n'
                '    "pid": "Spans", "tid": "PyTorch Profiler",\n    "name": "PyTorch Profiler (0)",\n'
                '    "args": {\n      "Op count": 0\n    }\n  },')
        f.write(f'\n  {{\n    "name": "Record Window End", "ph": "i", "s": "g",\n    "pid": "", "tid": "", '
                f'"ts": {_us(end)}\n  }}\n  ],\n  "traceName": "bench.pt.trace.json"\n}}\n')
    os.replace(tmp, path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    trace = args.out / f"bench_{args.kernels}.pt.trace.json"
    if not trace.exists():
        t = time.perf_counter()
        generate(trace, args.kernels)
        print(f"generated {trace} ({trace.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t:.0f} s")
    cache = Path(tempfile.mkdtemp(prefix="nsysdoc-bench-cache-"))
    env = dict(os.environ, NSYSDOC_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    nsysdoc = [sys.executable, "-m", "nsysdoc", "report", str(trace), "--format", "json", "--no-config", "-q"]
    floor_cmd = [sys.executable, "-c", f"import json; json.load(open({str(trace)!r}))"]
    try:
        # correctness first: the report must see every kernel
        out = subprocess.run(nsysdoc + ["--no-cache"], capture_output=True, text=True, env=env, check=True)
        summary = json.loads(out.stdout)["summary"]
        print(f"summary: {summary}")
        rows = {"floor": [], "cold": [], "warm": []}
        for _ in range(args.repeat):
            rows["floor"].append(measure(floor_cmd, env))
            rows["cold"].append(measure(nsysdoc + ["--no-cache"], env))
        measure(nsysdoc, env)  # writes the cache
        for _ in range(args.repeat):
            rows["warm"].append(measure(nsysdoc, env))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    best = {k: (min(t for t, _ in v), max(m for _, m in v)) for k, v in rows.items()}
    f_t, f_m = best["floor"]
    size = trace.stat().st_size / 1e6
    print(f"\n| {args.kernels:,} kernels ({size:,.0f} MB) | time | time ÷ json.load | peak RSS | RSS ÷ json.load |")
    print("|---|---|---|---|---|")
    for k, label in (("floor", "`json.load` (parse only)"), ("cold", "`nsysdoc report --no-cache`"),
                     ("warm", "`nsysdoc report` (cache hit)")):
        t, m = best[k]
        print(f"| {label} | {t:.2f} s | {t / f_t:.2f}× | {m / 1024:.2f} GB | {m / f_m:.2f}× |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
