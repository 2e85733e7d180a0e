"""Build the page's :class:`~nsysdoc.views.context.ReportContext` from the result and its page data.

The page is a function of the JSON result (``docs/json.md``) and of the page data captured beside
it (:class:`nsysdoc.pagedata.PageData`: the timeline windows); nothing else is read. This module
assembles the context from the parts, each in its own module (issue 51 split the 1,087 lines that
were here by concern):

* :mod:`.summary` — the verdict, headline numbers, ranked findings and rule statuses (shared with
  the Markdown and terminal summaries);
* :mod:`.tables` — the operators, steps, kernels, copies, syncs, launches, NVTX, devices and gaps
  tables;
* :mod:`.capture_section` — the Capture section and the commands to capture again;
* :mod:`.assets` — the static CSS/JS, the Content-Security-Policy and safe links, shared by every
  page;

and here, the terms only the page defines (:data:`REPORT_TERMS`). The names other modules and
tests import from ``views.build`` are re-exported below, so they still can.
"""
from __future__ import annotations

from markupsafe import Markup

from ..version import __version__
from ..assembly.written import MAX_STEP_RECORDS, capped_result  # noqa: F401 - views render the result as written
from ..rules.verdict import what_if_text  # noqa: F401 - re-exported (views.render)
from . import charts
from .context import ReportContext, source_name
from .glossary import anchor, glossary_html, glossary_html_kept  # noqa: F401 - glossary_html re-exported
from .memory import memory_view  # issue 47
from .tldata import timeline_data
# the parts, re-exported: render, job_page, index_page, diff_page and tests import them from here
from .assets import LINK_HOSTS, _static, anchor_href, csp_for, path_href, safe_href  # noqa: F401
from .capture_section import (TOOL_LABELS, TORCH_PROFILER_SNIPPET, TRACED_LABELS, WINDOW_KINDS,  # noqa: F401
                              _kineto_recapture, _span_facts, capture_view, recapture_commands)
from .summary import (BREAKDOWN, BREAKDOWN_ANCHORS, HEADLINES, SHORT_LABELS, TRACE_VIEWERS,  # noqa: F401
                      _evidence, _has_steps, _median_breakdown, _no_steps_note, _pct, _per_outer_call, _time_ranges,
                      _trunc, backward_text, dispatch_text, finding_views, headline, impact_text, is_kineto,
                      numbers_show, rank_findings, rule_statuses, verdict, viewer_guide, where_rows)
from .tables import (FP32_NAME, OPERATORS_SHOWN, STEP_TABLE_MAX, _marked_steps, copies_table,  # noqa: F401
                     device_table, gaps_table, kernel_counter_tables, kernel_table, launch_table, nvtx_table,
                     operator_rows_shown, operator_shape_tables, operator_tables, steps_view, sync_tables,
                     tensor_core_label)

def _timeline_spans(host_kinds: str) -> str:
    """The page's definition of the timeline's spans; ``host_kinds``: what its host lanes draw."""
    return (f"The timeline draws each kernel, copy, memset, {host_kinds} "
            "overlapping the window, clipped to it. Zoomed out, neighbours "
            "closer than a pixel are drawn as one block (its tooltip says how many operations and their busy time); "
            "zoomed in, every operation is drawn on its own ('operations drawn one by one' above the timeline counts "
            "them). Only when the steps hold more than the page's budget (about 200,000 spans, 3.5 MB of data) are "
            "neighbours merged in the data itself, at the lane's widest holes; merged spans cover exactly the time of "
            "the spans they stand for, plus the small holes between them. Without scripts, a static drawing with at "
            "most 1,000 spans a lane is shown.")


#: Numbers only the page shows (not in the JSON): defined here and in docs/report.md.
REPORT_TERMS = [
    ("Tensor cores (kernel table)",
     "A name heuristic, not a measurement, shared with the fp32-gemm rule: 'yes' for GEMM, convolution "
     "and attention kernels whose own name (template arguments aside) shows tensor-core math (tensorop, "
     "hmma/imma/wgmma/mma, nvjet, flash, MMA tile shapes, or a bf16/fp16/tf32/fp8 precision) and no "
     "FFMA/SIMT marker; 'no — FP32 GEMM' for GEMM/convolution kernels doing FP32 math on CUDA cores (ffma, "
     "sgemm, simt, scudnn); 'no' for other FP32 kernels; '—' when the name says neither. Helpers such as "
     "gemv, im2col, split-K reduction and layout transforms are never GEMMs (see the glossary, "
     "fp32_gemm_ms). Confirm with the Tensor Active GPU metric or Nsight Compute."),
    ("NVTX range totals",
     "NVTX push/pop and start/end ranges overlapping the analysis window, grouped by domain and text: "
     "count, total (sum of the ranges' durations clipped to the window — nested ranges count at every "
     "level, and ranges on several threads add up, so totals can exceed the window), mean and max."),
    ("Timeline spans", _timeline_spans("NVTX range, CUDA API call, blocking sync call and OS wait")),
]


#: the same terms for a PyTorch Profiler trace, whose host ranges are CPU operators and annotations
#: (docs/kineto.md), plus the trace-viewer seconds the page shows instead of the nsys GUI's
KINETO_REPORT_TERMS = [
    REPORT_TERMS[0],
    ("Host range totals",
     "CPU operators (cpu_op), user annotations (record_function, ProfilerStep#N) and Python functions "
     "(python_function) overlapping the analysis window, grouped by kind and text: count, total (sum of the "
     "ranges' durations clipped to the window — nested ranges count at every level, and ranges on several "
     "threads add up, so totals can exceed the window), mean and max."),
    ("Timeline spans", _timeline_spans("CPU operator or annotation range, CUDA API call and blocking sync call")),
    ("Trace-viewer time",
     "Times of a PyTorch Profiler trace are shown in seconds from the trace's start — the start of the "
     "profiler's own span (PyTorch Profiler (0)), else the first event — which is where ui.perfetto.dev, "
     "chrome://tracing and TensorBoard's trace view put 0: (t − start) ÷ 10^9, with ns precision. The JSON keeps "
     "the trace's own times (start_ns, end_ns)."),
]



def build_context(result: dict, page, *, worst_step: bool = False, glossary_dir=None) -> ReportContext:
    """The page's context from the result and its page data (:class:`nsysdoc.pagedata.PageData`,
    or None: no timeline); nothing else is read (``glossary_dir``: where the rendered glossary is
    kept, :func:`~nsysdoc.views.glossary.glossary_html_kept`)."""
    src = result.get("source") or {}
    ran, counts, skipped = rule_statuses(result)
    tl = charts.timeline_view(page, worst=worst_step) if page is not None else None
    if tl is None:
        reason = "No analysis window (no GPU activity and no step markers): nothing to draw."
    else:
        reason = ""
    js = _static("report.js")
    viewer = viewer_guide(result, getattr(page, "viewer_origin_ns", None))
    findings = finding_views(result, viewer.origin_ns)
    tl_data = timeline_data(page, findings, worst=worst_step) if tl is not None else None
    tl_json = Markup(tl_data[1]) if tl_data is not None else None  # already escaped for a <script>
    return ReportContext(
        title=f"nsysdoc — {source_name(src.get('path'))}",
        source_name=source_name(src.get("path")), source_path=str(src.get("path") or ""),
        nsysdoc_version=str(result.get("nsysdoc_version") or __version__),
        verdict=verdict(result), headline=headline(result), findings=findings,
        rules_ran=ran, rule_counts=counts, skipped_rules=skipped,
        steps=steps_view(result, worst_step),
        timeline=tl, timeline_reason=reason,
        tables=[*operator_tables(result), *operator_shape_tables(result), kernel_table(result), *kernel_counter_tables(result), copies_table(result), *sync_tables(result), launch_table(result),
                nvtx_table(result), device_table(result), gaps_table(result, viewer)],
        capture=capture_view(result, viewer),
        glossary_html=glossary_html_kept(glossary_dir),
        report_terms=[(anchor(t), t, d) for t, d in (KINETO_REPORT_TERMS if is_kineto(result) else REPORT_TERMS)],
        css=Markup(_static("report.css")), js=Markup(js), csp=csp_for(js),
        result=capped_result(result), viewer=viewer, timeline_data=tl_json,
        memory=memory_view(result),  # issue 47
    )
