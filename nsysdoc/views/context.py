"""What the report templates receive: typed, documented dataclasses, built from an ``Analysis``.

Every field carries ``metadata={"help": ...}``; ``tests/test_report.py`` fails when one does not
(the datasette ``template_contexts`` pattern). Templates only read these objects: every number is
already formatted here, so the HTML, the markdown and the terminal summary say the same thing.

Untrusted text (kernel names, NVTX text, process names, paths, finding texts from team rule files)
stays plain ``str``: the Jinja environment autoescapes it. Only :attr:`ReportContext.glossary_html`,
``css`` and ``js`` are :class:`markupsafe.Markup`, and they come from package files.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup


def _f(help_text: str, **kw):
    """A dataclass field with its documentation."""
    return field(metadata={"help": help_text}, **kw)


# ---------------------------------------------------------------------------------------------
# generic pieces
# ---------------------------------------------------------------------------------------------
@dataclass
class Cell:
    """One table cell."""

    text: str = _f("What the cell shows (already formatted; escaped by the template).")
    sort: Any = _f("Value the table sorts by (number or text); None sorts last.", default=None)
    numeric: bool = _f("Right-aligned numeric cell.", default=False)
    cls: str = _f("Extra CSS class (e.g. a severity or a highlight).", default="")
    title: str = _f("Tooltip (e.g. the untruncated text).", default="")


@dataclass
class Column:
    """One table column header."""

    label: str = _f("Header text.")
    numeric: bool = _f("Right-aligned numeric column.", default=False)
    help: str = _f("Tooltip: the column's definition.", default="")
    anchor: str = _f("Glossary anchor id for the definition ('' for none).", default="")


@dataclass
class Table:
    """A server-rendered table (readable without JavaScript; JS only adds sorting)."""

    id: str = _f("HTML id of the table (also the section anchor).")
    title: str = _f("Heading above the table.")
    columns: list[Column] = _f("Column headers.")
    rows: list[list[Cell]] = _f("Body rows.")
    note: str = _f("One line under the table (definition, truncation, caveat).", default="")
    empty: str = _f("Text shown instead of the table when it has no rows.", default="No rows.")


@dataclass
class LegendItem:
    """One colour swatch of a chart legend."""

    cls: str = _f("CSS class giving the colour (k-* span kinds, c-* breakdown/idle categories).")
    label: str = _f("What the colour means.")
    anchor: str = _f("Glossary anchor of its definition ('' for none).", default="")


@dataclass
class Tick:
    """An axis tick."""

    pos: str = _f("Position: SVG user units (bar chart y) or a percentage of the width (timeline x).")
    label: str = _f("Tick label.")


# ---------------------------------------------------------------------------------------------
# verdict and headline numbers
# ---------------------------------------------------------------------------------------------
@dataclass
class Headline:
    """One of the four headline numbers (GPU busy, step time, host wait, kernels per step)."""

    key: str = _f("JSON key it comes from (summary.* or metrics.host_wait_pct).")
    label: str = _f("Short name shown above the value.")
    value: str = _f("Formatted value with unit, or 'n/a'.")
    raw: float | None = _f("The JSON number (None when it does not apply).")
    note: str = _f("Qualifier under the value (median over N steps, mean over devices, why n/a).")
    definition: str = _f("Plain-text definition from the glossary (tooltip).")
    anchor: str = _f("Glossary anchor id of the definition (link target).")


@dataclass
class Verdict:
    """The one-sentence verdict at the top of the page."""

    sentence: str = _f("The verdict: the main bottleneck and what it costs per step, or what the numbers show.")
    status: str = _f("'bottleneck' (a costly finding), 'bound' (none: what bounds the run), 'too-little-work', "
                     "'no-gpu' (nothing to diagnose) or 'no-rules' (the rules engine did not run).")
    detail: str = _f("A second sentence: what bounds the run, what the capture shows, or what the numbers show.")
    framing: str = _f("What the analysis window leaves out of the capture, with times ('' when it covers nearly "
                      "all of it).", default="")
    top_rule: str = _f("Rule id of the top finding ('' when none).", default="")
    severity: str = _f("Severity of the top finding ('' when none).", default="")
    headline: str = _f("The verdict's headline id: a rule id, compute-bound, communication-bound, transfer-bound, "
                       "gpu-idle, capture-quality or no-gpu-activity ('' without rules).", default="")


# ---------------------------------------------------------------------------------------------
# findings
# ---------------------------------------------------------------------------------------------
@dataclass
class TimeRange:
    """A time range to open in the tool that shows the capture (:class:`ViewerGuide`)."""

    label: str = _f("What happens in the range.")
    start_ns: int = _f("Start on the export's timeline (ns, as the GUI shows it).")
    end_ns: int = _f("End (ns).")
    start_s: str = _f("Start in seconds with ns precision, as the viewer shows it (ViewerGuide.origin_ns).")
    end_s: str = _f("End in seconds with ns precision, as the viewer shows it.")
    duration: str = _f("Formatted duration.")
    device: str = _f("Device label ('' when not device-specific).")
    timeline: str = _f("Id of the range on the interactive timeline ('' when no timeline window overlaps it).",
                       default="")
    timeline_note: str = _f("Which part the timeline shows when it holds only part of the range ('' for all).",
                            default="")


@dataclass
class ViewerGuide:
    """How to find a range of this page in the tool that shows the capture: the Nsight Systems GUI
    for an nsys export; Perfetto, chrome://tracing or TensorBoard for a PyTorch Profiler trace."""

    heading: str = _f("Heading over a finding's time ranges.", default="Open in the Nsight Systems GUI")
    how: str = _f("Sentence under that heading: where to open the file and what the times are ('' for nsys).",
                  default="")
    timeline_hint: str = _f("Words after the timeline's window: what its times are and where to type them ('' "
                            "for nsys: the template's own words, the Nsight Systems GUI).", default="")
    gaps_note: str = _f("Last sentence of the idle-gap table's note: what its start/end seconds are.",
                        default="Start/end in seconds as the Nsight Systems GUI shows them.")
    origin_ns: int = _f("Instant the viewer shows as 0 on the capture's timeline (0 for nsys): shown seconds are "
                        "(t - origin_ns) / 1e9.", default=0)


@dataclass
class Evidence:
    """A finding's evidence table."""

    title: str = _f("Caption of the evidence table.")
    columns: list[str] = _f("Column names.")
    rows: list[list[str]] = _f("Formatted cell values.")
    numeric: list[bool] = _f("Per column: whether every value is a number (right-aligned).")
    titles: list[list[str]] = _f("Per cell: hover text, the full C++ signature of a kernel shown by its short name "
                                 "(issue 49), else empty.", default_factory=list)


@dataclass
class WhereRow:
    """One site of a finding's time: operator, module, Python frame, share."""

    op: str = _f("Innermost operator enclosing the time ('(no operator)' when none).")
    module: str = _f("Innermost module or record_function region ('' when none).")
    frame: str = _f("Innermost user Python frame, 'file.py:123 in func' ('' when none).")
    backward: str = _f("'backward of <forward op> (<node>)' for work of an autograd backward node, else ''.")
    share: str = _f("Share of the finding's attributed time (formatted %).")
    ms: str = _f("Time per GPU (formatted).")
    count: str = _f("How many operations, gaps or calls (formatted).")


@dataclass
class FindingView:
    """One finding (``docs/json.md``), formatted."""

    rank: int = _f("1-based rank by impact_ms (largest first; unknown impact last).")
    anchor: str = _f("HTML id of the finding's card.")
    rule: str = _f("Rule id (kebab-case).")
    severity: str = _f("info, warning or critical.")
    category: str = _f("Category (gpu-utilization, synchronization, ...).")
    title: str = _f("One-line title.")
    message: str = _f("What was found, with numbers, and why it costs time.")
    impact: str = _f("Formatted impact: per step, total, share of the window ('' when unknown).")
    impact_ms: float | None = _f("Estimated time lost in the analysis window (ms).")
    impact_ms_per_step: float | None = _f("Estimated time lost per step (ms).")
    impact_pct: float | None = _f("impact_ms / window × 100.")
    evidence: Evidence | None = _f("Evidence table, or None.")
    verify: str = _f("How to confirm it.")
    fix: str = _f("What to try.")
    references: list[str] = _f("References, shown as text (the page loads and links nothing external).")
    time_ranges: list[TimeRange] = _f("Exact ranges to open in the viewer (the Nsight Systems GUI, Perfetto ...).")
    source: str = _f("'builtin' or the path of the team rule file.")
    replaces_builtin: bool = _f("A team rule that replaces a built-in one.")
    where: list[WhereRow] = _f("Where the finding's time comes from, most first (may be empty).", default_factory=list)
    where_note: str = _f("What the capture lacks to say where (with the switch that adds it), or ''.", default="")
    what_if: str = _f("What fixing it would do to the median step (or the window without steps), replayed on the "
                      "dependency graph (glossary 'What-if'), or ''.", default="")


@dataclass
class RuleStatus:
    """A rule's status line (``result["rules"]``)."""

    rule: str = _f("Rule id.")
    status: str = _f("fired, passed, skipped, disabled or broken (a team rule that failed at run time).")
    reason: str = _f("Why (for skipped rules: what the capture lacks).")
    source: str = _f("'builtin' or a rule file path.")


# ---------------------------------------------------------------------------------------------
# step breakdown
# ---------------------------------------------------------------------------------------------
@dataclass
class BarSegment:
    """One coloured segment of a stacked step bar."""

    y: str = _f("Top (SVG units).")
    h: str = _f("Height (SVG units).")
    cls: str = _f("Category CSS class (c-compute, c-idle_input, ...).")
    title: str = _f("Tooltip: category, ms and share of the step.")


@dataclass
class Bar:
    """One step (or the mean of a bucket of steps) in the stacked chart."""

    x: str = _f("Left edge (SVG units).")
    w: str = _f("Width (SVG units).")
    cx: str = _f("Horizontal centre (SVG units), for the label.")
    top: str = _f("Top of the stacked bar (SVG units), for the median/worst mark.")
    label: str = _f("Step label under the bar ('' to skip).")
    title: str = _f("Tooltip of the whole bar.")
    segments: list[BarSegment] = _f("Stacked segments, bottom (compute) first.")
    mark: str = _f("'median', 'worst' or '' (marked bars get an outline).")


@dataclass
class StepChart:
    """Stacked bars of ``breakdown_ms`` for the primary steps of one step thread."""

    title: str = _f("Which process / thread.")
    width: int = _f("SVG viewBox width.")
    height: int = _f("SVG viewBox height.")
    plot_left: int = _f("x of the plot area's left edge.")
    plot_bottom: int = _f("y of the plot area's bottom edge (the x axis).")
    bars: list[Bar] = _f("Bars, in step order.")
    yticks: list[Tick] = _f("Y axis ticks (ms).")
    note: str = _f("E.g. how steps were bucketed.")
    aria: str = _f("Text alternative of the chart.")


@dataclass
class StepsView:
    """Section 3: the step breakdown."""

    present: bool = _f("Whether any primary step has a breakdown.")
    reason: str = _f("Why the section is empty (no step markers, no GPU work).")
    legend: list[LegendItem] = _f("Category colours.")
    charts: list[StepChart] = _f("One chart per step thread (process).")
    table: Table = _f("Per-step table: times, kernels, breakdown ms per category.")
    zero_categories: list[str] = _f("Categories that are 0 in every step (their columns are left out).")


# ---------------------------------------------------------------------------------------------
# timeline
# ---------------------------------------------------------------------------------------------
@dataclass
class TimelineRow:
    """One row of the timeline (a header or a lane)."""

    y: int = _f("Top (px).")
    h: int = _f("Height (px).")
    label: str = _f("Row label (device, stream, host thread, lane kind).")
    sub: str = _f("Small text after the label (counts, merges).")
    kind: str = _f("'device', 'stream', 'gaps', 'thread' or 'host'.")
    title: str = _f("Tooltip of the label (the untruncated text).", default="")


@dataclass
class TimelineRect:
    """One drawn span."""

    x: str = _f("Left (viewBox units; the plot is `width_units` wide).")
    w: str = _f("Width (viewBox units).")
    y: int = _f("Top (px).")
    h: int = _f("Height (px).")
    cls: str = _f("CSS class: k-<span kind> or c-idle_<cause>; ' m' appended for merged spans.")
    title: str = _f("Tooltip: name, duration, offset in the window.")


@dataclass
class TimelineLabel:
    """Text drawn over a wide NVTX range (hidden while zoomed)."""

    x: str = _f("Left as a percentage of the plot width.")
    y: int = _f("Baseline (px).")
    text: str = _f("Range name, truncated to fit.")


@dataclass
class TimelineView:
    """Section 4: the timeline of one representative step."""

    heading: str = _f("What window is shown (median/worst step name and time, or the capture middle).")
    choice: str = _f("'median step', 'worst step' or 'middle of the capture'.")
    start_ns: int = _f("Window start on the export's timeline (ns).")
    end_ns: int = _f("Window end (ns).")
    start_s: str = _f("Window start in seconds (GUI).")
    end_s: str = _f("Window end in seconds (GUI).")
    duration: str = _f("Formatted window length.")
    width_units: int = _f("viewBox width of the plot (x = (t - start) / window × width_units).")
    height: int = _f("Plot height (px).")
    label_width: int = _f("Width of the label column (px).")
    rows: list[TimelineRow] = _f("Headers and lanes, top to bottom.")
    rects: list[TimelineRect] = _f("Every span and idle gap drawn.")
    labels: list[TimelineLabel] = _f("Names over wide NVTX ranges.")
    ticks: list[Tick] = _f("Time axis ticks (ms from the window start).")
    legend: list[LegendItem] = _f("Span kind and idle cause colours.")
    notes: list[str] = _f("Caps applied (merged spans, hidden streams), how to see the other step.")
    span_count: int = _f("Number of rectangles drawn.")


# ---------------------------------------------------------------------------------------------
# capture
# ---------------------------------------------------------------------------------------------
@dataclass
class CaptureView:
    """Section 6: what was captured, and how to capture what is missing."""

    facts: list[tuple[str, str]] = _f("Label/value pairs: nsys and schema version, duration, window, devices ...")
    traced: list[tuple[str, bool]] = _f("Trace type -> whether its tables exist.")
    diagnostics: Table = _f("nsys DIAGNOSTIC_EVENT warnings and errors, grouped.")
    process_messages: list[str] = _f("Error lines the profiled process wrote.")
    warnings: list[str] = _f("nsysdoc's capture warnings (no markers, trace types missing).")
    missing: list[str] = _f("Diagnoses this capture cannot make, and why.")
    nsysdoc_command: str = _f("`nsysdoc capture` command line that re-captures with what is missing.")
    nsys_command: str = _f("The equivalent `nsys profile` command line.")
    advice: list[str] = _f("Advice that no flag gives (NVTX step markers, --step-marker).")
    overhead: str = _f("The profiling-overhead caveat, with the measured PROFILER_OVERHEAD share.")
    tool: str = _f("The tool that made the trace: Nsight Systems or PyTorch Profiler.")
    not_recorded: list[str] = _f("What that tool cannot record at all (PyTorch Profiler: OS runtime calls ...).")
    profiler_snippet: str = _f("torch.profiler code that profiles again (a PyTorch Profiler trace), else ''.",
                               default="")


# ---------------------------------------------------------------------------------------------
# the page
# ---------------------------------------------------------------------------------------------
@dataclass
class ReportContext:
    """Everything ``templates/report.html.j2`` renders."""

    title: str = _f("Page title.")
    source_name: str = _f("File name of the capture (untrusted text).")
    source_path: str = _f("Full path of the capture as given (untrusted text).")
    nsysdoc_version: str = _f("nsysdoc version that made the report.")
    verdict: Verdict = _f("Section 1: the verdict.")
    headline: list[Headline] = _f("Section 1: the four headline numbers.")
    findings: list[FindingView] = _f("Section 2: findings by severity, then cost (rules.verdict.rank_findings).")
    rules_ran: bool = _f("Whether the result has a 'rules' list (the rules engine ran).")
    rule_counts: dict[str, int] = _f("Number of rules per status (fired, passed, skipped, disabled, broken).")
    skipped_rules: list[RuleStatus] = _f("Rules that could not run on this capture (skipped or broken), with why.")
    steps: StepsView = _f("Section 3: the step breakdown.")
    timeline: TimelineView | None = _f("Section 4: timeline of one step (None without an analysis window).")
    timeline_reason: str = _f("Why there is no timeline ('' when there is one).")
    tables: list[Table] = _f("Section 5: kernels, copies, sync, launch path, NVTX, devices, idle gaps.")
    capture: CaptureView = _f("Section 6: capture facts and the re-capture command.")
    glossary_html: Markup = _f("Section 7: docs/glossary.md rendered (in-package copy).")
    report_terms: list[tuple[str, str, str]] = _f("Section 7: numbers only this page shows: (anchor, term, definition).")
    css: Markup = _f("Inlined stylesheet (static/report.css).")
    js: Markup = _f("Inlined script (static/report.js): zoom/pan of the timeline, table sorting.")
    csp: str = _f("Content-Security-Policy: nothing external; only the inlined script (by hash) runs.")
    result: dict = _f("The JSON result (docs/json.md), embedded as application/json for tools.")
    viewer: ViewerGuide = _f("Where to find this page's time ranges (the tool that shows the capture).",
                             default_factory=ViewerGuide)
    timeline_data: Markup | None = _f("The interactive timeline's data as embedded JSON (report.tldata.embed).",
                                    default=None)
    memory: Any = _f("Issue 47: the memory section (views.memory.MemoryView), None on pages without one.",
                     default=None)


# ---------------------------------------------------------------------------------------------
# formatting helpers (shared by html, markdown, terminal and the verdict): nsysdoc/fmt.py
# ---------------------------------------------------------------------------------------------
from ..fmt import (fmt_bytes, fmt_dur_ns, fmt_ms, fmt_num, fmt_pct, fmt_s, fmt_us, fmt_value, is_num,  # noqa: E402,F401
                   source_name)
