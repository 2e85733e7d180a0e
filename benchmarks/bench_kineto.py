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

``--shape pytorch2`` writes issue 33's shape instead: PyTorch 2.x with ``record_shapes=True``
(:func:`generate_pytorch2`). ``--baseline DIR`` times another checkout in the same batch.

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


#: (python module, ATen op, nested ATen op) around the launch, cycling per launch: ``pytorch2`` shape
OPS = (("nn.Module: Linear_{k}", "aten::linear", "aten::addmm"), (None, "aten::relu", None),
       (None, "aten::add_", None), (None, "autograd::engine::evaluate_function: AddmmBackward0", "aten::mm"))
GEMM_NAMES = ["ampere_sgemm_128x64_tn", "ampere_sgemm_64x32_sliced1x4_nn",
              "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>"
              "(cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4::Params)",
              "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas"]
STEPS = 8
#: (concrete value, type, strides, dims) of a bias, an activation, a weight and a scalar input
_T, _W, _B = ('""', '"float"', "[1]", "[1024]"), ('""', '"float"', "[1024, 1]", "[64, 1024]"), \
    ('""', '"float"', "[1, 1024]", "[1024, 1024]")
_S = ('"1"', '"Scalar"', "[]", "[]")
#: (concrete value, type, strides, dims) of each op's inputs
INPUTS = {"aten::linear": (_W, _B, _T), "aten::addmm": (_T, _W, _B, _S, _S), "aten::relu": (_W,),
          "aten::add_": (_W, _W, _S), "aten::mm": (_W, _B)}


def generate_pytorch2(path: Path, n: int, seed: int = 7) -> None:
    """A trace as PyTorch 2.x writes it with ``record_shapes=True`` (libkineto's ``output_json.cpp``
    layout, as in real 2.x files): the host section first (``ProfilerStep#i`` annotations, 8 in all;
    ``cpu_op`` ranges with their args: an ATen op around every launch, some nested
    (``aten::linear`` > ``aten::addmm``, a backward node > ``aten::mm``) and carrying autograd's
    ``Sequence number``; a ``python_function`` module range around each linear), then the device
    section (``cudaLaunchKernel`` calls with an ``ac2g`` flow start, kernels on 3 streams with the
    flow end), in time order within each."""
    rng = np.random.default_rng(seed)
    names = [f"void at::native::vectorized_elementwise_kernel<4, at::native::Functor{i}<float>, "
             f"at::detail::Array<char*, {1 + i % 3}> >(int, at::native::Functor{i}<float>, "
             f"at::detail::Array<char*, {1 + i % 3}>)" for i in range(KERNEL_NAMES)]
    api_t = 3_000_000_000_000
    dur = np.exp(rng.uniform(np.log(2_000), np.log(60_000), n)).astype(np.int64)
    api_dur = rng.integers(3_000, 9_000, n)
    gap = 8_000 + rng.exponential(6_000, n).astype(np.int64)  # room for the op ranges around each call
    api_start = api_t + np.cumsum(gap + api_dur) - api_dur
    api_end = api_start + api_dur
    stream = np.where(rng.random(n) < 0.7, 0, rng.integers(1, 3, n))
    start = np.empty(n, dtype=np.int64)
    for s in range(3):
        idx = np.flatnonzero(stream == s)
        if not len(idx):
            continue
        d = dur[idx]
        csum = np.concatenate(([0], np.cumsum(d)[:-1]))
        start[idx] = np.maximum.accumulate(np.maximum(api_end[idx] + 2_000, api_t) - csum) + csum
    kname = (rng.zipf(1.3, n) % KERNEL_NAMES).astype(np.int64)
    end = int(max((start + dur).max(), api_end[-1])) + 1_000_000
    t_start = api_t
    per_step = -(-n // STEPS)
    tmp = path.with_suffix(".tmp")
    ext = 0

    def x(cat, name, tid, s, e, args):
        return (f'\n  {{\n    "ph": "X", "cat": "{cat}", "name": "{name}", "pid": {PID}, "tid": {tid},\n'
                f'    "ts": {_us(s)}, "dur": {_us(e - s)},\n    "args": {{\n      {args}\n    }}\n  }},')

    def dims(op):  # record_shapes=True: each op's inputs (types, shapes, strides, scalar values)
        ins = INPUTS.get(op, ())
        return (f'"Concrete Inputs": [{", ".join(c for c, _, _, _ in ins)}], '
                f'"Input type": [{", ".join(t for _, t, _, _ in ins)}], '
                f'"Input Strides": [{", ".join(st for _, _, st, _ in ins)}], '
                f'"Input Dims": [{", ".join(d for _, _, _, d in ins)}]')

    with open(tmp, "w", encoding="utf-8", buffering=1 << 22) as f:
        f.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {\n      "id": 0, "name": "NVIDIA H100 80GB HBM3", '
                '"totalGlobalMem": 85045379072,\n      "computeMajor": 9, "computeMinor": 0,\n      '
                '"maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,\n      "regsPerBlock": 65536, '
                '"regsPerMultiprocessor": 65536, "warpSize": 32,\n      "sharedMemPerBlock": 49152, '
                '"sharedMemPerMultiprocessor": 233472,\n      "numSms": 132, "sharedMemPerBlockOptin": 232448\n    }\n'
                '  ],\n  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1, "pg_count": 1, '
                '"pg_config": [], "nccl_version": "2.20.5"},\n  "cupti_version": 22,\n  "cuda_runtime_version": 12040,\n'
                '  "cuda_driver_version": 12040,\n  "trace_id": "5D9E6B0C3D1A4F2E8B7C6A5D4E3F2A1B",\n'
                f'  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": {BASE_NS},\n  "traceEvents": [')
        # ---- host section: steps, python modules, ATen ops (time order) ----------------------
        out = []
        for i in range(n):
            a0, a1 = int(api_start[i]), int(api_end[i])
            if i % per_step == 0:
                s0 = a0 - 5_000
                s1 = int(api_start[i + per_step]) - 5_000 if i + per_step < n else a1 + 5_000
                ext += 1
                out.append(x("user_annotation", f"ProfilerStep#{i // per_step}", PID, s0, s1,
                             f'"External id": {ext},"Record function id": 0, "Ev Idx": {ext - 1}'))
            mod, op, inner = OPS[i % len(OPS)]
            seq = i // 2
            if mod:
                ext += 1
                out.append(x("python_function", mod.format(k=i % 12), PID, a0 - 3_000, a1 + 1_500,
                             f'"Python parent id": {ext - 1}, "Python id": {ext}, "Python module id": {i % 12}, '
                             f'"Python thread": 0, "Ev Idx": {ext - 1}'))
            ext += 1
            out.append(x("cpu_op", op, PID, a0 - 2_000, a1 + 1_000,
                         f'"External id": {ext},"Record function id": 0, "Sequence number": {seq}, '
                         f'"Fwd thread id": 0, {dims(op)}, "Ev Idx": {ext - 1}'))
            if inner:
                ext += 1
                out.append(x("cpu_op", inner, PID, a0 - 1_000, a1 + 500,
                             f'"External id": {ext},"Record function id": 0, {dims(inner)}, "Ev Idx": {ext - 1}'))
            if len(out) > 50_000:
                f.write("".join(out))
                out = []
        f.write("".join(out))
        # ---- device section: launches, flows, kernels --------------------------------------
        out = []
        for i in range(n):
            corr = i + 1
            a0, a1, k0 = int(api_start[i]), int(api_end[i]), int(start[i])
            k1 = k0 + int(dur[i])
            sid = 7 + int(stream[i])
            kn = GEMM_NAMES[i % len(GEMM_NAMES)] if OPS[i % len(OPS)][2] else names[kname[i]]
            out.append(
                f'\n  {{\n    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": {PID}, '
                f'"tid": {PID},\n    "ts": {_us(a0)}, "dur": {_us(a1 - a0)},\n    "args": {{\n'
                f'      "External id": {corr}, "cbid": 211, "correlation": {corr}\n    }}\n  }},'
                f'\n  {{\n    "ph": "s", "id": {corr}, "pid": {PID}, "tid": {PID}, "ts": {_us(a0)},\n'
                f'    "cat": "ac2g", "name": "ac2g"\n  }},'
                f'\n  {{\n    "ph": "X", "cat": "kernel", "name": "{kn}", "pid": 0, "tid": {sid},\n'
                f'    "ts": {_us(k0)}, "dur": {_us(k1 - k0)},\n    "args": {{\n      "External id": {corr},\n'
                f'      "queued": 0, "device": 0, "context": 1,\n      "stream": {sid}, "correlation": {corr},\n'
                f'      "registers per thread": 16,\n      "shared memory": 0,\n'
                f'      "blocks per SM": 0.0074074073,\n      "warps per SM": 0.0296296291,\n'
                f'      "grid": [1, 1, 1],\n      "block": [128, 1, 1],\n      "est. achieved occupancy %": 0\n'
                f'    }}\n  }},'
                f'\n  {{\n    "ph": "f", "id": {corr}, "pid": 0, "tid": {sid}, "ts": {_us(k0)},\n'
                f'    "cat": "ac2g", "name": "ac2g", "bp": "e"\n  }},')
            if len(out) > 20_000:
                f.write("".join(out))
                out = []
        f.write("".join(out))
        f.write(f'\n  {{\n    "name": "process_name", "ph": "M", "ts": {_us(t_start)}, "pid": {PID}, "tid": 0,\n'
                f'    "args": {{\n      "name": "python"\n    }}\n  }},')
        f.write(f'\n  {{\n    "name": "thread_name", "ph": "M", "ts": {_us(t_start)}, "pid": {PID}, "tid": {PID},\n'
                f'    "args": {{\n      "name": "thread {PID} (python)"\n    }}\n  }},')
        f.write(f'\n  {{\n    "ph": "X", "cat": "Trace", "ts": {_us(t_start - 10_000)}, "dur": {_us(end - t_start + 10_000)},\n'
                '    "pid": "Spans", "tid": "PyTorch Profiler",\n    "name": "PyTorch Profiler (0)",\n'
                '    "args": {\n      "Op count": 0\n    }\n  },')
        f.write(f'\n  {{\n    "name": "Record Window End", "ph": "i", "s": "g",\n    "pid": "", "tid": "", '
                f'"ts": {_us(end)}\n  }}\n  ],\n  "traceName": "bench.pt.trace.json"\n}}\n')
    os.replace(tmp, path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", type=int, default=None,
                    help="launches (and kernels); default 1,000,000 for launches, 200,000 for pytorch2")
    ap.add_argument("--shape", choices=("launches", "pytorch2"), default="launches",
                    help="launches: calls, kernels, flows and a ProfilerStep per 1,000 launches; pytorch2: "
                         "issue 33's shape (cpu_op ranges with their args around every launch, python_function "
                         "modules, 8 ProfilerSteps; 200 k launches + 200 k kernels make 0.35 GB)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--batches", type=int, default=1, help="measure this many batches, one table row set each")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="another checkout of nsysdoc (e.g. a git worktree of an earlier commit) timed in the "
                         "same batch, for a before/after ratio on a noisy machine")
    args = ap.parse_args()
    n = args.kernels or (200_000 if args.shape == "pytorch2" else 1_000_000)
    args.out.mkdir(parents=True, exist_ok=True)
    trace = args.out / (f"bench_{n}.pt.trace.json" if args.shape == "launches" else
                        f"bench_{args.shape}_{n}.pt.trace.json")
    if not trace.exists():
        t = time.perf_counter()
        (generate_pytorch2 if args.shape == "pytorch2" else generate)(trace, n)
        print(f"generated {trace} ({trace.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t:.0f} s")
    cache = Path(tempfile.mkdtemp(prefix="nsysdoc-bench-cache-"))
    env = dict(os.environ, NSYSDOC_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    checkouts = {"": ROOT} | ({"baseline ": args.baseline.resolve()} if args.baseline else {})
    for root in checkouts.values():  # byte-compiled first, as ``pip install`` does
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "nsysdoc")], check=True,
                       env={k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"})
    # -P: no current folder first on sys.path, so PYTHONPATH picks the checkout
    nsysdoc = [sys.executable, "-P", "-m", "nsysdoc", "report", str(trace), "--format", "json", "--no-config", "-q"]
    floor_cmd = [sys.executable, "-c", f"import json; json.load(open({str(trace)!r}))"]
    size = trace.stat().st_size / 1e6
    try:
        # correctness first: the report must see every kernel
        out = subprocess.run(nsysdoc + ["--no-cache"], capture_output=True, text=True, env=env, check=True)
        summary = json.loads(out.stdout)["summary"]
        print(f"summary: {summary}")
        for batch in range(args.batches):
            rows: dict[str, list] = {"floor": []}
            for _ in range(args.repeat):
                rows["floor"].append(measure(floor_cmd, env))
                for tag, root in checkouts.items():
                    e = dict(env, PYTHONPATH=str(root))
                    rows.setdefault(f"{tag}cold", []).append(measure(nsysdoc + ["--no-cache"], e))
            for tag, root in checkouts.items():
                e = dict(env, PYTHONPATH=str(root))
                shutil.rmtree(cache, ignore_errors=True)
                measure(nsysdoc, e)  # writes the cache
                for _ in range(args.repeat):
                    rows.setdefault(f"{tag}warm", []).append(measure(nsysdoc, e))
            best = {k: (min(t for t, _ in v), max(m for _, m in v)) for k, v in rows.items()}
            f_t, f_m = best["floor"]
            print(f"\n| {n:,} launches + {n:,} kernels, {args.shape} ({size:,.0f} MB), batch {batch + 1}, best of "
                  f"{args.repeat} | time | time ÷ json.load | peak RSS | RSS ÷ json.load |")
            print("|---|---|---|---|---|")
            labels = {"floor": "`json.load` (parse only)", "cold": "`nsysdoc report --no-cache`",
                      "warm": "`nsysdoc report` (cache hit)"}
            for k, (t, m) in best.items():
                label = labels.get(k) or f"{k.split()[0]}: {labels[k.split()[1]]}"
                print(f"| {label} | {t:.2f} s | {t / f_t:.2f}× | {m / 1024:.2f} GB | {m / f_m:.2f}× |")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
