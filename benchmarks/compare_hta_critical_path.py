"""Compare nsysdoc's critical path (``metrics.critical_path``) with Holistic Trace Analysis's
(HTA, ``TraceAnalysis.critical_path_analysis``) on a PyTorch Profiler (Kineto) trace, for the same
step: nsysdoc's median step (issue 48).

HTA is never a dependency of nsysdoc. It runs in its own interpreter (HTA 0.5 needs pandas < 3):

    python3 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install "pandas<3" HolisticTraceAnalysis
    python benchmarks/compare_hta_critical_path.py TRACE.pt.trace.json.gz --hta-python /tmp/hta-venv/bin/python

Run it with the interpreter that has nsysdoc. ``--hta-python`` (or ``HTA_PYTHON``) names HTA's
interpreter; without it, this interpreter is tried. When HTA cannot be imported there, the
comparison says so and exits 0 (skipped).

What is compared, for the step (HTA's ``annotation="ProfilerStep"``, the instance with the same
name as nsysdoc's median step):

* path length: nsysdoc's ``length_ms`` (equals the step time by construction) against the sum of
  HTA's edge weights on its path (HTA gives dependency edges weight 0, so time between two CPU
  operators that no operator covers is not counted) and the span of the events on HTA's path;
* composition: nsysdoc ``cpu + launch`` against HTA ``cpu_bound``; ``kernel + copy`` against
  ``gpu_compute_bound``; ``comm`` against ``gpu_communication_bound``; ``wait`` against
  ``gpu_kernel_kernel_overhead + gpu_kernel_launch_overhead`` (GPU time spent waiting for the
  previous kernel's successor or for the launch).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = ROOT.parent / "shared" / "traces" / "kineto" / "hta_a100_rank3of8.pt.trace.json.gz"
GROUPS = {  # comparison row: (nsysdoc segments, HTA bound_by classes)
    "cpu (host ops, launch calls)": (("cpu", "launch"), ("cpu_bound",)),
    "GPU compute (kernels, copies)": (("kernel", "copy"), ("gpu_compute_bound",)),
    "communication": (("comm",), ("gpu_communication_bound",)),
    "GPU waiting (gaps, launch delay)": (("wait",), ("gpu_kernel_kernel_overhead", "gpu_kernel_launch_overhead")),
}


def hta_worker(trace: str, step_name: str) -> dict:
    """Runs under HTA's interpreter: its critical path of the ProfilerStep named ``step_name``."""
    try:
        import logging

        logging.disable(logging.WARNING)
        from hta.trace_analysis import TraceAnalysis
    except Exception as exc:  # noqa: BLE001 - any import failure means: skip
        return {"skipped": f"HTA is not importable here ({type(exc).__name__}: {exc})"}
    import hta

    with tempfile.TemporaryDirectory() as d:
        os.symlink(os.path.abspath(trace), os.path.join(d, os.path.basename(trace)))  # read in place
        a = TraceAnalysis(trace_dir=d)
        rank = a.t.get_ranks()[0]
        df = a.t.get_trace(rank)
        sym = a.t.symbol_table
        ids = [i for n, i in sym.sym_index.items() if "ProfilerStep" in n]
        ann = df[df.name.isin(ids)]  # HTA's instance ids count these rows in order
        names = [sym.sym_table[i] for i in ann.name]
        if step_name not in names:
            return {"skipped": f"HTA finds no annotation {step_name} (it sees {names})"}
        inst = names.index(step_name)
        g, ok = a.critical_path_analysis(rank=rank, annotation="ProfilerStep", instance_id=inst)
        if not ok:
            return {"skipped": "HTA's critical path analysis failed on this step"}
        edf = g.get_critical_path_breakdown()
        ev = df.loc[edf.event_idx.dropna().astype(int).unique()]
        by = edf[edf.bound_by != ""].groupby("bound_by").duration.sum()
        top = (edf[edf.duration > 0].sort_values("duration", ascending=False).head(8))
        return {"hta_version": getattr(hta, "__version__", "?"), "rank": int(rank), "instance": inst,
                "annotation_us": float(ann.dur.iloc[inst]),
                "sum_us": float(edf.duration.sum()),
                "span_us": float((ev.ts + ev.dur).max() - ev.ts.min()),
                "bound_by_us": {k: float(v) for k, v in by.items()},
                "edges": {k: int(v) for k, v in edf.groupby("type").size().items()},
                "top": [{"name": str(r.s_name), "us": float(r.duration), "type": str(r.type), "stream": float(r.stream)}
                        for r in top.itertuples()]}


def nsysdoc_median_step(trace: str) -> dict:
    """nsysdoc's report of the trace: the median step's critical path and its name."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "r.json"
        subprocess.run([sys.executable, "-m", "nsysdoc", "report", trace, "-f", "json", "-o", str(out), "--no-cache",
                        "--no-config"], check=True, capture_output=True)
        r = json.loads(out.read_text())
    cp = r["metrics"]["critical_path"]
    med = cp["median_step"]
    primary = [s for s in r["steps"] if s.get("primary")]
    name = primary[med["step"]]["name"] if med.get("step") is not None and med["step"] < len(primary) else None
    comm_steps = sum(1 for s in cp["steps"] if s["segments_ms"].get("comm", 0) > 0)
    exposed = next((f.get("impact_ms_per_step") for f in r["findings"] if f["rule"] == "nccl-exposed"), None)
    return {"step_name": name, "length_ms": med["length_ms"], "segments_ms": med["segments_ms"],
            "steps": [{"step": s["step"], "length_ms": s["length_ms"], "comm_ms": s["segments_ms"].get("comm")}
                      for s in cp["steps"]],
            "comm_on_path_steps": comm_steps, "nccl_exposed_ms_per_step": exposed, "missing": cp.get("missing")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace", nargs="?", default=str(DEFAULT_TRACE))
    p.add_argument("--hta-python", default=os.environ.get("HTA_PYTHON"),
                   help="interpreter with HolisticTraceAnalysis installed (default: this one)")
    p.add_argument("--json", help="also write the numbers to this file")
    p.add_argument("--hta-worker", metavar="STEP", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.hta_worker:
        print(json.dumps(hta_worker(a.trace, a.hta_worker)))
        return 0
    if not Path(a.trace).is_file():
        print(f"skipped: {a.trace} is not a file")
        return 0
    ns = nsysdoc_median_step(a.trace)
    py = a.hta_python or sys.executable
    try:
        run = subprocess.run([py, __file__, a.trace, "--hta-worker", ns["step_name"] or "?"], capture_output=True,
                             text=True, timeout=1800)
        lines = [x for x in run.stdout.splitlines() if x.startswith("{")]
        hta = json.loads(lines[-1]) if lines else {"skipped": f"HTA run failed: {run.stderr.strip()[-300:]}"}
    except (OSError, subprocess.TimeoutExpired) as exc:
        hta = {"skipped": f"cannot run {py}: {exc}"}
    print(f"trace: {Path(a.trace).name}; nsysdoc median step: {ns['step_name']}")
    print(f"nsysdoc: communication on the path in {ns['comm_on_path_steps']} of {len(ns['steps'])} steps; "
          f"nccl-exposed {ns['nccl_exposed_ms_per_step']} ms per step")
    if "skipped" in hta:
        print(f"HTA comparison skipped: {hta['skipped']}")
    else:
        length, hsum = ns["length_ms"], hta["sum_us"] / 1000
        print(f"HTA {hta['hta_version']}, rank {hta['rank']}, ProfilerStep instance {hta['instance']} "
              f"({hta['annotation_us'] / 1000:.2f} ms)")
        print(f"path length: nsysdoc {length:.2f} ms (= the step); HTA sum of edge weights {hsum:.2f} ms, "
              f"span of its path's events {hta['span_us'] / 1000:.2f} ms")
        print(f"{'':34s} {'nsysdoc ms':>10s} {'%':>6s} {'HTA ms':>10s} {'%':>6s}")
        for row, (ours, theirs) in GROUPS.items():
            x = sum(ns["segments_ms"].get(k, 0) for k in ours)
            y = sum(hta["bound_by_us"].get(k, 0) for k in theirs) / 1000
            print(f"{row:34s} {x:10.2f} {x / length * 100 if length else 0:6.1f} {y:10.2f} "
                  f"{y / hsum * 100 if hsum else 0:6.1f}")
        print("HTA's longest path edges:")
        for t in hta["top"]:
            print(f"  {t['us'] / 1000:8.3f} ms  {t['type']:36s} stream {t['stream']:>5.0f}  {t['name'][:60]}")
    if a.json:
        Path(a.json).write_text(json.dumps({"nsysdoc": ns, "hta": hta}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
