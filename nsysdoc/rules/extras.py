"""The values the engine adds for the rules to quote, beyond the metrics: wording that depends on
the tool that made the capture, the capture's problems and what to change in it, and short notes
(launch gaps next to kernels, pinned copies, why nothing is per step).

Why a module of its own: these are sentences and switches (nsys or torch.profiler), computed from
the result before any rule runs (:func:`_extras`) and quoted by the rules as ``{name}``; the rules'
conditions, impacts and severities are :mod:`nsysdoc.rules.evaluate`. Moved out of
``nsysdoc/rules/evaluate.py`` (issue 51); re-exported there.
"""
from __future__ import annotations

import re
import shlex
from typing import Any

from . import text
from . import text as text_m


def _not_recorded(result: dict) -> dict[str, dict]:
    """Trace types the tool that made the capture cannot record (``capture.not_recorded``)."""
    return {n["kind"]: n for n in (result.get("capture") or {}).get("not_recorded") or [] if isinstance(n, dict)}


#: Wording that depends on the tool that made the capture (``source.tool``): rule messages name the
#: Nsight Systems GUI and nsys switches for an nsys export, a trace viewer and torch.profiler switches
#: for a PyTorch Profiler trace (docs/kineto.md). Engine values: rules quote them as ``{name}``.
TOOL_WORDING: dict[str, dict[str, str]] = {
    "nsys": {
        "trace_viewer": "the Nsight Systems GUI",
        "trace_timeline": "the Nsight Systems timeline",
        "capture_check": ("Check the capture command and the Diagnostics Summary of the report in the Nsight Systems "
                          "GUI (or the capture section below, which quotes nsys's own messages)."),
        "stack_switch": "with --python-backtrace=cuda (nsysdoc capture --python-backtrace)",
        "copy_rows": "the CUDA HW row is filled by [CUDA memcpy Host-to-Device] (or Device-to-Host) blocks",
        "kernel_summary_cmd": "nsys stats -r cuda_gpu_kern_sum",
        "pageable_check": ('In the timeline\'s CUDA HW row the memcpy is labelled "Pageable" (nsys memory kind 0); '
                           "nsys analyze -r cuda_memcpy_async lists the same copies."),
        "cpu_sampling_capture": "Capture with CPU sampling (nsys profile --sample=process-tree, or nsysdoc capture "
                                "--cpu-sampling)",
        "host_ranges": "NVTX ranges",
        "steady_capture": ("capture with nsysdoc capture --delay SECONDS, or mark steps and use "
                           "--capture-range=cudaProfilerApi with torch.cuda.profiler.start()/stop() or "
                           "--capture-range=nvtx"),
    },
    "pytorch-profiler": {
        "trace_viewer": "the trace viewer (ui.perfetto.dev, chrome://tracing or TensorBoard's trace view)",
        "trace_timeline": "the trace viewer's timeline (ui.perfetto.dev, chrome://tracing or TensorBoard's trace view)",
        "capture_check": ("Check the torch.profiler.profile call that wrote the trace: activities "
                          "(ProfilerActivity.CPU and ProfilerActivity.CUDA), the schedule (wait, warmup, active "
                          "steps) and prof.step() once per iteration (or the capture section below)."),
        "stack_switch": "with torch.profiler.profile(with_stack=True)",
        "copy_rows": "the GPU stream rows are filled by Memcpy HtoD (or DtoH) blocks",
        "kernel_summary_cmd": 'prof.key_averages().table(sort_by="count")',
        "pageable_check": ('In the trace viewer the copy is named "Memcpy HtoD (Pageable -> Device)" (or DtoH '
                           '"Device -> Pageable"), and the cudaMemcpyAsync call above it lasts as long as the copy.'),
        "cpu_sampling_capture": ("Profile with with_stack=True (torch.profiler.profile(with_stack=True): the Python "
                                 "frames of the operators)"),
        "host_ranges": "torch.profiler.record_function ranges",
        "steady_capture": ("profile with schedule=torch.profiler.schedule(wait=1, warmup=2, active=5) and call "
                           "prof.step() every iteration, so that the trace holds steady steps only"),
    },
}


def _tool(result: dict) -> str:
    tool = (result.get("source") or {}).get("tool")
    return tool if tool in TOOL_WORDING else "nsys"


def _extras(result: dict) -> dict:
    v = result["metrics"]["values"]
    extra: dict[str, Any] = {"_memcpy_traced": result["capture"]["traced"].get("cuda_memcpy", False)}
    kineto = _tool(result) == "pytorch-profiler"
    extra.update(TOOL_WORDING[_tool(result)])
    short = v.get("top_kernel_short_name")
    if short:
        count = v.get("top_kernel_count") or 1
        skip = min(10, max(count // 2, 0)) if count > 1 else 0
        from ..metrics.kernels import ncu_kernel_filter

        safe = re.sub(r"[^A-Za-z0-9_]+", "_", short)[:40] or "kernel"
        base, pattern = ncu_kernel_filter(short)  # a name built from a generic short name: its type
        extra["ncu_command"] = (
            f"ncu --kernel-name-base {base} --kernel-name {shlex.quote(pattern)} "
            f"--launch-skip {skip} --launch-count 1 --set full -o {safe}_ncu <your training command>")
    else:
        extra["ncu_command"] = None
    problems = []
    cap = result["capture"]
    if not v.get("gpu_activity"):
        problems.append("no GPU activity was recorded")
    elif not v.get("kernel_count") and v.get("launch_call_count"):
        problems.append(f"{v['launch_call_count']} kernel launch call(s) were recorded but no kernel execution: "
                        "GPU activity was not recorded")
    elif not v.get("kernel_count"):
        loads = v.get("module_load_count") or 0
        problems.append(f"no kernel was captured: the GPU activity is {v.get('gpu_op_count') or 0} copy/memset "
                        "operation(s)" + (f", and {loads} module/library load call(s) show the program loaded GPU code"
                                          if loads else "") + ", so its kernel launches were not traced (or it has none)")
    elif cap.get("not_judgeable_reason"):
        problems.append(cap["not_judgeable_reason"])
    for n in cap.get("nsys_notes") or []:
        if n["kind"] == "no-cuda" and v.get("kernel_count"):
            continue  # said by processes that did no CUDA work (a launcher, pytest workers)
        times = f" ({n['count']} times)" if n["count"] > 1 else ""
        problems.append(f'nsys says: "{n["text"].rstrip(".")}"{times}')
    if not v.get("has_step_markers"):
        problems.append(_no_steps_text(result))
    elif (v.get("step_count") or 0) < 3:
        problems.append(f"only {v.get('step_count')} step(s) captured; capture at least 3-5 after warm-up")
    if not v.get("has_steps") and (v.get("setup_pct") or 0) >= 15 and not v.get("warmup_ms"):
        problems.append(f"one-time set-up runs through the capture ({v['setup_pct']:.0f}% of the GPU span), so no "
                        "steady state could be separated from it")
    if cap.get("steps_set_aside"):
        problems.append(cap["steps_set_aside"]["description"])
    for x in cap.get("excluded") or []:
        what = {"warm-up": "one-time set-up at the start", "idle head": "an idle stretch at the start",
                "idle tail": "an idle stretch at the end",
                "copies before the first kernel": "copies before the first kernel (data or weights uploaded "
                                                  "before any kernel ran)",
                "set-up phase": f"the set-up phase '{str(x.get('text') or '')[:60]}' before the first kernel",
                "before the loop range": f"what comes before the range '{str(x.get('text') or '')[:60]}' around "
                                         "the measured loop (warm-up, set-up)"
                }.get(x["kind"], x["kind"])
        problems.append(f"the analysis window leaves out {x['duration_ms']:,.1f} ms of {what}")
    if (v.get("profiler_overhead_pct") or 0) >= 5:
        problems.append(f"profiler overhead covers {v['profiler_overhead_pct']:.1f}% of the window")
    problems += _support_problems(v, kineto)
    unrecordable = _not_recorded(result)
    switches = ((("cuda_api_traced", "cuda_api", "CUDA API calls (ProfilerActivity.CUDA) were"),
                 ("nvtx_traced", "nvtx", "CPU operators and annotations (ProfilerActivity.CPU) were"),
                 ("osrt_traced", "osrt", "OS runtime calls were")) if kineto else
                (("cuda_api_traced", "cuda_api", "CUDA API (--trace=cuda) was"),
                 ("nvtx_traced", "nvtx", "NVTX (--trace=nvtx) was"),
                 ("osrt_traced", "osrt", "OS runtime (--trace=osrt) was")))
    for flag, kind, what in switches:
        if kind in unrecordable:
            problems.append(f"{unrecordable[kind]['what']} are {unrecordable[kind]['why']}")
        elif not v.get(flag):
            problems.append(f"{what} {'not recorded' if kineto else 'not traced'}")
    cc, tf32 = v.get("compute_capability"), v.get("tf32_capable")
    if tf32 is True:
        extra["fp32_advice"] = (f"This GPU (compute capability {cc:.1f}) runs them on tensor cores with TF32, or with "
                                "bf16/fp16, several times faster.")
        extra["fp32_fix"] = ("Enable TF32 (torch.backends.cuda.matmul.allow_tf32 = True and "
                             "torch.backends.cudnn.allow_tf32 = True, or torch.set_float32_matmul_precision(\"high\")), "
                             "or train with AMP (torch.autocast with bf16 or fp16).")
    elif tf32 is False and cc is not None and cc >= 7.0:
        extra["fp32_advice"] = (f"This GPU (compute capability {cc:.1f}) has no TF32, but its tensor cores run fp16 "
                                "several times faster than FP32.")
        extra["fp32_fix"] = ("Train with AMP: torch.autocast(device_type=\"cuda\", dtype=torch.float16) with a "
                             "GradScaler (TF32 needs compute capability 8.0, Ampere, or newer).")
    elif tf32 is False:
        extra["fp32_advice"] = (f"This GPU (compute capability {cc:.1f}) has no tensor cores: fp16 (AMP) may still "
                                "help where the GPU has fast fp16 math; otherwise the gain needs a newer GPU.")
        extra["fp32_fix"] = ("Try AMP (torch.autocast with fp16) and measure; tensor cores need compute capability "
                             "7.0 (Volta) or newer, TF32 needs 8.0 (Ampere).")
    else:
        extra["fp32_advice"] = ("On GPUs with tensor cores, TF32 (compute capability 8.0, Ampere, and newer) or "
                                "bf16/fp16 (7.0 and newer) run these several times faster.")
        extra["fp32_fix"] = ("On Ampere or newer enable TF32 (torch.backends.cuda.matmul.allow_tf32 = True, "
                             "torch.backends.cudnn.allow_tf32 = True, or torch.set_float32_matmul_precision(\"high\")); "
                             "on any GPU with tensor cores train with AMP (torch.autocast with bf16 or fp16).")
    left_out = max((v.get("setup_ms") or 0) - (v.get("idle_setup_ms") or 0) - (v.get("alloc_growth_ms") or 0), 0)
    extra["warmup_note"] = (f"The analysis window leaves {text.duration(left_out * 1e6)} of it out, so the other "
                            "findings describe the steady state." if left_out > 0.5 * (v.get("setup_ms") or 0) else
                            "The analysis window still contains most of it: capture after warm-up to see the "
                            "steady state.")
    extra["launch_ratio_note"] = _launch_ratio_note(v)
    extra["pageable_cost_note"] = _pageable_cost_note(v)
    extra["capture_problems"] = "; ".join(problems) if problems else None
    extra["capture_fix"] = _capture_fix(v, cap, unrecordable, kineto)
    extra["capture_problem_count"] = len(problems)
    return extra


#: Idle time that stays unexplained (class ``unattributed``) from this share of the window is named
#: among the capture's problems, with what the capture lacks (issue 46).
UNEXPLAINED_IDLE_MIN_PCT = 10.0


def _support_problems(v: dict, kineto: bool) -> list[str]:
    """What the capture cannot support (:mod:`nsysdoc.metrics.capture_checks`): GPU work not
    recorded under a blocking call, idle time no launching call explains or that follows the last
    GPU operation (above ``UNEXPLAINED_IDLE_MIN_PCT`` % of the window), a sliver of GPU work."""
    out = []
    n = v.get("unrecorded_call_count") or 0
    if n:
        more = f" ({n} such blocking calls, {text.duration((v.get('unrecorded_gpu_ms') or 0) * 1e6)} in all)" if n > 1 else ""
        out.append(f"GPU work not recorded: {v.get('unrecorded_call_name')} lasts "
                   f"{text.duration((v.get('unrecorded_call_ms') or 0) * 1e6)}, recorded GPU work covers only its first "
                   f"{text.duration((v.get('unrecorded_covered_ms') or 0) * 1e6)}{more}; the host waited on GPU work the "
                   "capture does not hold, so GPU busy time and the bound it suggests cannot be trusted")
    pct = v.get("idle_unattributed_pct")
    if isinstance(pct, (int, float)) and pct > UNEXPLAINED_IDLE_MIN_PCT and v.get("cuda_api_traced") is False:
        # no launching call is known because no CUDA API call was recorded at all (said by its own line)
        out.append(f"{text.duration((v.get('idle_unattributed_ms') or 0) * 1e6)} ({pct:.1f}% of the window) of GPU "
                   "idle cannot be explained: no CUDA API call was recorded, so nothing says what the host was doing "
                   "when the GPU went idle")
    elif isinstance(pct, (int, float)) and pct > UNEXPLAINED_IDLE_MIN_PCT:
        how = ("record CUDA activity and runtime calls of every thread (ProfilerActivity.CUDA), or capture with "
               "Nsight Systems (nsys profile --trace=cuda --cuda-um-cpu-page-faults=true "
               "--cuda-um-gpu-page-faults=true --cuda-graph-trace=node)") if kineto else (
               "trace CUDA API calls of every process and thread (--trace=cuda), unified-memory page faults "
               "(--cuda-um-cpu-page-faults=true --cuda-um-gpu-page-faults=true) and CUDA graphs node by node "
               "(--cuda-graph-trace=node)")
        out.append(f"{text.duration((v.get('idle_unattributed_ms') or 0) * 1e6)} ({pct:.1f}% of the window) of GPU "
                   "idle ends in operations with no recorded launching call (unified-memory migrations, driver or "
                   f"graph work), so what the GPU waited on is unknown: {how}")
    tail = v.get("idle_tail_pct")
    if isinstance(tail, (int, float)) and tail > UNEXPLAINED_IDLE_MIN_PCT:
        out.append(f"{text.duration((v.get('idle_tail_ms') or 0) * 1e6)} ({tail:.1f}% of the window) of GPU idle comes "
                   "after the last GPU operation: the window ends with host work that launches nothing the capture "
                   "holds (the last step's tail, tear-down), so it cannot say what comes next; capture more steps")
    if v.get("gpu_work_sliver"):
        share = v.get("busy_capture_share_pct")
        out.append(f"the window holds only {text.duration((v.get('busy_ms') or 0) * 1e6)} of GPU work"
                   + (f" ({share:.3g}% of the capture from the first CUDA call on)"
                      if isinstance(share, (int, float)) else "")
                   + f", under {SLIVER_TEXT}: findings other than set-up, the capture's own and those measured over "
                     "the whole capture are info at most")
    return out


SLIVER_TEXT = "1 ms or 0.1% of the capture from the first CUDA call on"


#: What to change in the capture, worded for the tool that made it (nsys, or the PyTorch Profiler:
#: torch.profiler's switches). :func:`_capture_fix` picks one text per problem.
_FIX_TEXTS = {
    "nsys": {
        "no_activity": "Make CUDA activity recording work: match the driver and CUDA versions (a mismatch breaks "
                       "CUPTI), give containers the /dev/nvidia* devices and SYS_ADMIN, and trace the process that "
                       "does the GPU work (with launchers such as torchrun, the whole process tree).",
        "no_markers": 'Mark training steps with NVTX ranges (the PyTorch profiler\'s ProfilerStep#N, or '
                      'torch.cuda.nvtx.range("step N") around each step).',
        "few_steps": "Capture at least 3-5 steps after warm-up.",
        "steady": "Capture the steady state after warm-up: nsysdoc capture --delay SECONDS, or "
                  "--capture-range=cudaProfilerApi with torch.cuda.profiler.start()/stop() around 5-10 steps.",
        "overhead": "Keep the capture short and the trace types few: profiler overhead inflates step times.",
    },
    "pytorch-profiler": {
        "no_activity": "Make CUDA activity recording work: match the driver and CUDA versions (a mismatch breaks "
                       "CUPTI), give containers the /dev/nvidia* devices, and profile inside the process that does "
                       "the GPU work.",
        "no_markers": "Mark training steps: call prof.step() once per iteration inside torch.profiler.profile (it "
                      'writes ProfilerStep#N), or wrap each step in torch.profiler.record_function("train_step").',
        "few_steps": "Profile at least 3-5 steps after warm-up (torch.profiler.schedule(wait=1, warmup=2, active=5)).",
        "steady": "Profile the steady state after warm-up: schedule=torch.profiler.schedule(wait=1, warmup=2, "
                  "active=5) with prof.step() every iteration leaves the first steps out of the trace.",
        "overhead": "Keep the profiled range short and the switches few (record_shapes, with_stack and "
                    "profile_memory add overhead): profiler overhead inflates step times.",
    },
}


def _capture_fix(v: dict, cap: dict, unrecordable: dict | None = None, kineto: bool = False) -> str:
    """What to change in the capture, only for what this capture actually lacks, in the words of
    the tool that made it (``kineto``: torch.profiler's switches, not nsys's)."""
    texts = _FIX_TEXTS["pytorch-profiler" if kineto else "nsys"]
    todo = []
    unrecordable = unrecordable or {}
    if not v.get("kernel_count") and v.get("cuda_api_traced"):
        todo.append(texts["no_activity"])
    if kineto:
        missing = [a for a, kind, flag in (("ProfilerActivity.CUDA", "cuda_api", "cuda_api_traced"),
                                           ("ProfilerActivity.CPU", "nvtx", "nvtx_traced"))
                   if not v.get(flag) and kind not in unrecordable]
        if missing:
            todo.append(f"Add {' and '.join(missing)} to the profiler's activities "
                        "(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]).")
    else:
        missing = [t for t, kind, flag in (("cuda", "cuda_api", "cuda_api_traced"), ("nvtx", "nvtx", "nvtx_traced"),
                                           ("osrt", "osrt", "osrt_traced")) if not v.get(flag) and kind not in unrecordable]
        if missing:
            todo.append(f"Trace {', '.join(missing)} as well (nsysdoc capture traces cuda,nvtx,osrt).")
    wanted = [n["what"] for k, n in unrecordable.items() if k in ("cuda_api", "nvtx", "osrt", "gpu_metrics")]
    if wanted:
        todo.append(f"For {' and '.join(wanted)}, capture with Nsight Systems as "
                    "well (nsysdoc capture traces cuda,nvtx,osrt; add --gpu-metrics-devices all for GPU metrics).")
    if not v.get("has_step_markers"):
        todo.append(texts["no_markers"])
    elif (v.get("step_count") or 0) < 3:
        todo.append(texts["few_steps"])
    if v.get("kernel_count") and (cap.get("enough_gpu_work") is False or
                                  ((v.get("setup_pct") or 0) >= 15 and not v.get("warmup_ms"))):
        todo.append(texts["steady"])
    if v.get("lost_event_notes") and not kineto:
        todo.append("Nsight Systems may have lost events: let the program exit normally (buffers are flushed "
                    "at exit), flush periodically, or capture a shorter range.")
    if (v.get("profiler_overhead_pct") or 0) >= 5:
        todo.append(texts["overhead"])
    return " ".join(todo) or "Nothing to change in the capture."


def _pageable_cost_note(v: dict) -> str:
    """What pinning the pageable copies would save, or that it would save nothing measurable."""
    ref, save = v.get("pinned_gbps_reference"), v.get("pageable_saving_ms")
    if not isinstance(ref, (int, float)) or not isinstance(save, (int, float)):
        return ""
    where = "as pinned copies reach in this capture" if v.get("pinned_gbps_measured") else \
        "typical of pinned copies on this GPU's PCIe generation"
    if save < 0.0005:
        return (f"They already move about as fast as pinned memory would ({ref:.1f} GB/s, {where}), so pinning "
                "would save no measurable time; they still block the host while they run.")
    return f"At {ref:.1f} GB/s ({where}) they would take {text.duration(save * 1e6)} less."


def _step_candidates(result: dict, k: int = 3) -> list[dict]:
    """NVTX ranges that repeat like steps (3 times or more, not a library's, no operator, not a part
    of another repeated range), step-like names first, then most time first."""
    from ..trace.schema import LIBRARY_NVTX_DOMAINS

    rows = (result.get("metrics") or {}).get("nvtx") or []
    # texts that are data (pyprof's dict texts, multi-line ones) or markup-like are no step names;
    # a range looks like a step when it repeats and is no operator (aten::mul, a::b) nor data text
    out = [r for r in rows if isinstance(r, dict) and (r.get("count") or 0) >= 3 and r.get("text")
           and str(r.get("domain") or "").lower() not in LIBRARY_NVTX_DOMAINS
           and "::" not in str(r["text"]) and not str(r["text"]).lower().startswith("aten")
           and not str(r["text"]).lstrip().startswith(("{", "[")) and not any(c in str(r["text"]) for c in "\n{}<>")]

    def nested(b: dict) -> bool:
        # b repeats a whole number of times per repetition of a longer range a, and its time per
        # repetition of a fits inside a's: a part of a (a layer in a step, a forward pass in it)
        return any(a is not b and b["count"] % a["count"] == 0 and (a.get("mean_ms") or 0) > (b.get("mean_ms") or 0)
                   and (b.get("mean_ms") or 0) * (b["count"] // a["count"]) <= 1.05 * (a.get("mean_ms") or 0)
                   for a in out)

    out = [r for r in out if not nested(r)]
    from ..trace.schema import is_step_like

    out.sort(key=lambda r: (not is_step_like(r["text"]), -(r.get("total_ms") or 0)))
    return out[:k]


def _no_steps_text(result: dict) -> str:
    """Why nothing is per step: the default pattern found no step ranges, or the user's
    ``--step-marker`` matched nothing; with the ranges that repeat like steps and the option that
    would use one of them."""
    from ..trace.schema import DEFAULT_STEP_PATTERN

    pattern = (result.get("capture") or {}).get("step_pattern") or DEFAULT_STEP_PATTERN
    cands = _step_candidates(result)
    if pattern != DEFAULT_STEP_PATTERN:
        what = "CPU operator or annotation" if _tool(result) == "pytorch-profiler" else "NVTX"
        text = f"no {what} range matches the step marker '{pattern}' (--step-marker), so nothing is per step"
    elif _tool(result) == "pytorch-profiler":
        text = ("no training-step markers (ProfilerStep#N ranges, which prof.step() writes), so nothing is per "
                "step")
    else:
        text = "no training-step markers (NVTX ranges such as ProfilerStep#N), so nothing is per step"
    cap = result.get("capture") or {}
    if cap.get("steps_set_aside"):
        text = "the step markers were set aside (they hold too little of the GPU work), so nothing is per step"
    inferred = cap.get("steps_inferred")
    if inferred and inferred.get("method") == "one training step":
        text = text.replace(", so nothing is per step", "") + (
            "; the capture holds one training step (forward, backward and optimizer once), so per-step numbers "
            "are those of that one step")
    elif inferred:
        n = sum(p.get("steps") or 0 for p in inferred.get("processes") or [])
        period = "/".join(f"{p['period_ops']:,}" for p in inferred.get("processes") or [])
        layer = any(p.get("unit") != "training step" for p in inferred.get("processes") or [])
        text = text.replace(", so nothing is per step", "") + (
            f"; {n:,} steps were inferred from the repeating GPU work (every {period} GPU operations), so step "
            "times are estimates" + (" and a step may be one layer or block rather than a whole training step"
                                     if layer else ""))
    elif cap.get("steps_not_inferred"):
        why = "; ".join(str(x.get("reason")) for x in cap["steps_not_inferred"][:2])
        text += f"; no steps were inferred from the repeating GPU work ({why}), so costs are given in the window"
    if cands:
        names = ", ".join(f"{c['text'][:60]!r} ({c['count']}x, {text_m.duration((c.get('mean_ms') or 0) * 1e6)} each)"
                          for c in cands)
        first = re.sub(r"(?<![A-Za-z0-9])N(?![A-Za-z0-9])", lambda _: r"\d+",
                       re.escape(str(cands[0]["text"])[:60]).replace("\\#", "#"))
        text += f"; ranges that repeat like steps: {names} (for example --step-marker {shlex.quote(first)})"
    return text


def _launch_ratio_note(v: dict) -> str:
    """What the launch gaps' length says next to the kernels', in words that agree with the ratio
    (``launch_gap_to_kernel_ratio``: mean launch gap / median kernel)."""
    r, gap, kern = v.get("launch_gap_to_kernel_ratio"), v.get("launch_gap_us_mean"), v.get("kernel_median_us")
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (r, gap, kern)):
        return ""
    g, k = text.duration(gap * 1e3), text.duration(kern * 1e3)
    if r >= 3:
        return (f"The gaps last {g} on average, {r:.1f}x the median kernel ({k}): the CPU sets the pace, and "
                "a faster GPU would not help.")
    if r >= 1:
        return (f"The gaps last {g} on average, {r:.1f}x the median kernel ({k}): the host takes about as long "
                "to issue a kernel as the GPU takes to run it.")
    return (f"The gaps ({g} on average) are shorter than the median kernel ({k}; {r:.1f}x), but there are so "
            "many of them that they add up.")
