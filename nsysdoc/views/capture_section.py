"""The page's Capture section: what made the capture and what it holds (its facts, what was
traced, the profiler's diagnostics) and how to capture again for what is missing (the
``nsysdoc capture`` and ``nsys profile`` commands, or torch.profiler's snippet).

Split from ``views/build.py`` (issue 51): it reads ``result["source"]`` and ``result["capture"]``
only, and is the one part of the page that speaks of the profilers' options.
"""
from __future__ import annotations

import shlex

from .context import CaptureView, Cell, Column, Table, ViewerGuide, fmt_ms, fmt_num, fmt_pct, fmt_s, is_num

# ---------------------------------------------------------------------------------------------
# capture
# ---------------------------------------------------------------------------------------------
TRACED_LABELS = {"cuda_api": "CUDA API", "cuda_kernels": "CUDA kernels", "cuda_memcpy": "CUDA memcpy",
                 "cuda_memset": "CUDA memset", "cuda_sync": "CUDA synchronization", "nvtx": "NVTX", "osrt": "OS runtime",
                 "gpu_metrics": "GPU metrics", "cpu_sampling": "CPU sampling", "cudnn": "cuDNN", "cublas": "cuBLAS",
                 "mpi": "MPI", "cuda_graphs": "CUDA graphs (node trace)"}


#: ``source.tool`` -> the tool's name on the page
TOOL_LABELS = {"nsys": "Nsight Systems", "pytorch-profiler": "PyTorch Profiler"}

#: how to profile again with torch.profiler (a PyTorch Profiler trace's "Capture again"; README, docs/kineto.md)
TORCH_PROFILER_SNIPPET = """\
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
             schedule=schedule(wait=1, warmup=2, active=5),
             on_trace_ready=tensorboard_trace_handler("log/run")) as prof:
    for batch in loader:
        train_step(batch)
        prof.step()  # marks ProfilerStep#N
# then: nsysdoc report log/run/"""


def _kineto_recapture(result: dict) -> tuple[list[str], list[str]]:
    """(what cannot be diagnosed, advice) for a PyTorch Profiler trace, in torch.profiler's terms."""
    capture = result.get("capture") or {}
    traced = capture.get("traced") or {}
    missing, advice = [], []
    if not traced.get("cuda_api"):
        missing.append("CUDA API calls were not recorded: gaps cannot be attributed to their launching call "
                       "(host sync, launch overhead and input waits are unknown). Profile with "
                       "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA].")
    if not (traced.get("cuda_kernels") or traced.get("cuda_memcpy") or traced.get("cuda_memset")):
        missing.append("No GPU activity was recorded: add ProfilerActivity.CUDA to the profiler's activities and "
                       "check that the profiled steps ran CUDA work (the schedule's active steps).")
    if not traced.get("nvtx"):
        missing.append("No CPU operators or annotations were recorded: add ProfilerActivity.CPU to the activities "
                       "(it records operators, record_function ranges and ProfilerStep#N).")
    if not capture.get("has_step_markers"):
        advice.append("No training-step markers were found. Call prof.step() once per iteration inside "
                      "torch.profiler.profile (it writes ProfilerStep#N), or wrap each iteration in "
                      "torch.profiler.record_function(f\"train_step_{i}\"). If your steps are already marked with "
                      "another name, pass --step-marker REGEX.")
    advice.append("Python lines and nn.Module names: with_stack=True (and with_modules=True); input shapes: "
                  "record_shapes=True; allocations: profile_memory=True. Each adds overhead.")
    return missing, advice



def recapture_commands(result: dict) -> tuple[str, str, list[str], list[str]]:
    """(nsysdoc capture command, nsys profile command, what cannot be diagnosed, advice)."""
    capture = result.get("capture") or {}
    traced = capture.get("traced") or {}
    missing, advice = [], []
    need_metrics = not traced.get("gpu_metrics")
    if not traced.get("cuda_api"):
        missing.append("CUDA API calls were not traced: gaps cannot be attributed to their launching call "
                       "(host sync, launch overhead and input waits are unknown). Trace cuda.")
    if not (traced.get("cuda_kernels") or traced.get("cuda_memcpy") or traced.get("cuda_memset")):
        missing.append("No GPU activity was recorded: check that the program ran CUDA work inside the capture "
                       "(and, in containers, the profiling permissions).")
    if not traced.get("nvtx"):
        missing.append("NVTX was not traced (or nothing was annotated): no step markers and no DataLoader ranges.")
    if not traced.get("osrt"):
        missing.append("OS runtime calls were not traced: waits for input (poll, futex, read) cannot be told "
                       "apart from Python work on the host. Trace osrt.")
    if need_metrics:
        missing.append("No GPU metrics: SM active, SM issue and tensor-core activity per step "
                       "(what nvidia-smi would say vs the truth) are unavailable. Add --gpu-metrics-devices=all "
                       "(needs profiling permissions; Turing or newer).")
    if not capture.get("has_step_markers"):
        advice.append(("No training-step markers were found; the steps shown were inferred from the repeating GPU "
                       "work (see Capture). " if capture.get("step_source") == "inferred" else
                       "No training-step markers were found. ") + "Wrap each iteration in an NVTX range, e.g. "
                      "torch.cuda.nvtx.range_push(f\"train_step_{i}\") … torch.cuda.nvtx.range_pop(), or run under "
                      "torch.profiler.profile (it emits ProfilerStep#N). If your steps are already marked with "
                      "another name, pass --step-marker REGEX.")
    if capture.get("diagnostics"):
        advice.append("nsys reported warnings or errors while capturing (below): numbers may be incomplete.")
    try:
        from ..nsys import CaptureOptions, build_profile_argv

        argv = build_profile_argv("nsys", CaptureOptions(output_name="nsysdoc-train",
                                                         gpu_metrics_devices="all" if need_metrics else None),
                                  ["python", "train.py"])
        nsys_cmd = shlex.join(argv)
    except Exception:  # the command builder is another module's: never fail the report on it
        nsys_cmd = "nsys profile --trace=cuda,nvtx,osrt --sample=none" + \
            (" --gpu-metrics-devices=all" if need_metrics else "") + " --output=nsysdoc-train python train.py"
    ns_cmd = "nsysdoc capture" + (" --gpu-metrics-devices all" if need_metrics else "") + " -- python train.py"
    return ns_cmd, nsys_cmd, missing, advice


WINDOW_KINDS = {"steps": "first to last training step", "gpu-span": "first to last GPU operation",
                "steady-state": "the steady-state part of the GPU span"}


def _span_facts(cap: dict, origin: int = 0) -> list[tuple[str, str]]:
    """The GPU span and what the window leaves out of it (no step markers), as facts."""
    span = cap.get("span") or {}
    out = []
    if span.get("start_ns") is not None:
        out.append(("GPU span", f"{fmt_s(span['start_ns'] - origin)} → {fmt_s(span['end_ns'] - origin)} "
                                f"({fmt_ms(span.get('duration_ms'))})"))
    for x in cap.get("excluded") or []:
        what = {"warm-up": "left out: warm-up", "idle head": "left out: idle start",
                "idle tail": "left out: idle end"}.get(x.get("kind"), f"left out: {x.get('kind')}")
        x0, x1 = x.get("start_ns"), x.get("end_ns")
        text = (f"{fmt_s(x0 - origin if is_num(x0) else None)} → {fmt_s(x1 - origin if is_num(x1) else None)} "
                f"({fmt_ms(x.get('duration_ms'))})")
        if is_num(x.get("setup_ms")):
            text += f", {fmt_ms(x['setup_ms'])} of one-time set-up with the GPU idle"
        out.append((what, text))
    if cap.get("enough_gpu_work") is False and cap.get("not_judgeable_reason"):
        out.append(("judgement", str(cap["not_judgeable_reason"])))
    return out


def capture_view(result: dict, viewer: ViewerGuide | None = None) -> CaptureView:
    src = result.get("source") or {}
    cap = result.get("capture") or {}
    win = cap.get("window") or {}
    tool = str(src.get("tool") or "nsys")
    made_by = [("made by", "Nsight Systems")] if tool == "nsys" else \
        [("made by", f"{TOOL_LABELS.get(tool, tool)} (trace schemaVersion {src.get('schema_version') or 'unknown'})")]
    kineto = tool == "pytorch-profiler"
    if kineto:
        made_by = [("made by", f"PyTorch Profiler (Kineto) trace, schemaVersion {src.get('schema_version') or 'unknown'}"),
                   ("times", "seconds from the trace's start, as ui.perfetto.dev, chrome://tracing and TensorBoard's "
                             "trace view show them")]
    origin = (viewer or ViewerGuide()).origin_ns if kineto else 0
    facts = [("capture file", str(src.get("path") or "")), *made_by,
             *([("nsys version", str(src.get("nsys_version") or "unknown")),
                ("export schema version", str(src.get("schema_version") or "unknown"))] if tool == "nsys" else []),
             ("capture duration", fmt_ms(cap.get("duration_ms"))),
             ("analysis window", (f"{fmt_s(win['start_ns'] - origin)} → {fmt_s(win['end_ns'] - origin)} "
                                  f"({fmt_ms(win.get('duration_ms'))}, {WINDOW_KINDS.get(win.get('kind'), win.get('kind') or '')})")
              if win.get("start_ns") is not None and win.get("end_ns") is not None else "none"),
             *_span_facts(cap, origin),
             ("step markers", "found" if cap.get("has_step_markers") else
              "none found; steps inferred from the repeating GPU work" if cap.get("step_source") == "inferred"
              else "none found"),
             ("step pattern", str(cap.get("step_pattern") or "")),
             ("devices", str(cap.get("device_count"))), ("processes", str(cap.get("process_count"))),
             ("profiler overhead", fmt_pct(cap.get("profiler_overhead_pct"), 2) + " of the window")]
    labels = {**TRACED_LABELS, "nvtx": "CPU operators and annotations (record_function)"} if kineto else TRACED_LABELS
    traced = [(labels.get(k, k), bool(v)) for k, v in (cap.get("traced") or {}).items()]
    diag_rows = [[Cell(str(d.get("severity")), d.get("severity"), cls=f"sev-{d.get('severity')}"),
                  Cell(str(d.get("text")), d.get("text")), Cell(fmt_num(d.get("count"), 0), d.get("count"), True)]
                 for d in cap.get("diagnostics") or []]
    ns_cmd, nsys_cmd, missing, advice = recapture_commands(result)
    overhead = ("Profiling adds overhead: field reports measure step times 10–20% longer under "
                "nsys --trace=cuda,nvtx,osrt than without it. Read the absolute times here as relative ones, and "
                "re-measure the step time without the profiler after a fix. nsys's own recorded overhead "
                f"(PROFILER_OVERHEAD) covers {fmt_pct(cap.get('profiler_overhead_pct'), 2)} of this window.")
    if kineto:
        missing, advice = _kineto_recapture(result)
        overhead = ("Profiling adds overhead: the PyTorch Profiler's CUDA activity tracing and operator recording "
                    "lengthen step times, more so with record_shapes, with_stack and profile_memory. Read the absolute "
                    "times here as relative ones, and re-measure the step time without the profiler after a fix. "
                    f"The profiler's own recorded overhead covers {fmt_pct(cap.get('profiler_overhead_pct'), 2)} of "
                    "this window.")
    return CaptureView(
        facts=facts, traced=traced,
        diagnostics=Table(id="diagnostics", title="Profiler diagnostics" if kineto else "nsys diagnostics",
                          columns=[Column("Severity"), Column("Message"), Column("Count", True)], rows=diag_rows,
                          empty=("The trace holds no profiler warnings or errors." if kineto
                                 else "nsys recorded no warnings or errors.")),
        process_messages=[str(m) for m in cap.get("process_messages") or []],
        warnings=[str(w) for w in cap.get("warnings") or []], missing=missing, nsysdoc_command=ns_cmd,
        tool=TOOL_LABELS.get(tool, tool),
        not_recorded=[str(n.get("what")) for n in cap.get("not_recorded") or [] if isinstance(n, dict)],
        nsys_command=nsys_cmd, advice=advice, overhead=overhead,
        profiler_snippet=TORCH_PROFILER_SNIPPET if kineto else "")


