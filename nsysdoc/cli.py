"""Command line. The only module that prints and chooses exit codes.

Exit codes: 0 = no finding at or above ``--fail-on``; 1 = findings at or above it (``diff``: the
candidate is slower beyond ``--fail-on-regression``); 2 = usage or input error (bad file, bad
option, nsys missing ...).
"""
from __future__ import annotations

import errno
import functools
import json
import os
import sys
import traceback
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from .severity import SEVERITY_RANK, WORST_FIRST
from .version import __version__
from .errors import NsysdocError
from .cli_params import install as _light_params
from .outputs import StdoutClosed

_light_params()  # option values converted without importing pydantic (see cli_params)

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
#: standard output's reader went away (``| head``): exit quietly, with the status of a process
#: killed by SIGPIPE, as ``cat`` or ``grep`` would
EXIT_PIPE = 128 + 13
EXIT_INTERRUPTED = 130

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Why is my GPU training slow? Diagnoses from Nsight Systems captures.")


class Format(str, Enum):
    html = "html"
    json = "json"
    md = "md"
    perfetto = "perfetto"


class Severity(str, Enum):
    info = "info"
    warning = "warning"
    critical = "critical"
    never = "never"


# The options report, diff and job share, declared once (issue 51: they were written out three
# times). Where a command words one differently (--rules in job, --config in report), its own
# declaration stays in its signature.
StepMarkerOption = Annotated[Optional[str], typer.Option(
    "--step-marker", help="Regex an NVTX range's whole text must match to mark a training step.")]
NoCacheOption = Annotated[bool, typer.Option(
    "--no-cache", help="Do not read or write the cache (the export's tables as Arrow files).")]
CacheDirOption = Annotated[Optional[Path], typer.Option(
    "--cache-dir", help="Cache folder (default: $NSYSDOC_CACHE_DIR or ~/.cache/nsysdoc).")]
NoConfigOption = Annotated[bool, typer.Option("--no-config", help="Ignore project config files.")]
NsysOption = Annotated[Optional[str], typer.Option(
    "--nsys", help="nsys binary for exporting .nsys-rep (default: $NSYS, then PATH).")]
DebugOption = Annotated[bool, typer.Option("--debug", help="Show tracebacks of internal errors.")]
ConfigOption = Annotated[Optional[Path], typer.Option(
    "--config", help="Project config (default: nsysdoc.yaml or pyproject.toml, found upwards).")]
RulesOption = Annotated[list[Path], typer.Option(
    "--rules", help="A folder of team rules (repeatable); same id replaces a built-in.")]


def _echo(text="", err: bool = False, nl: bool = True) -> None:
    """Every line the command line prints goes through here: escape sequences and control
    characters removed (:func:`nsysdoc.outputs.terminal_text`: file names, rule titles and kernel
    names are untrusted), encoded for the stream with replacement (a kernel name in Cyrillic on a
    ``latin-1`` terminal prints as ``?``, never a crash). A closed standard output (``| head``)
    ends the command quietly with :data:`EXIT_PIPE`; a closed standard error is ignored."""
    from .outputs import quiet_stdout, terminal_text

    stream = sys.stderr if err else sys.stdout
    if stream is None:  # pragma: no cover - no console at all
        return
    line = terminal_text(text) + ("\n" if nl else "")
    data = line.encode(getattr(stream, "encoding", None) or "utf-8", "replace")
    try:
        buf = getattr(stream, "buffer", None)
        if buf is not None:
            stream.flush()
            while data:  # a short count (a reader gone mid-way) is not an error: write the rest
                n = buf.write(data)
                data = data[n:] if n else b""
            buf.flush()
        else:
            stream.write(line)
            stream.flush()
    except (OSError, ValueError) as exc:
        if err:
            return
        if isinstance(exc, BrokenPipeError) or getattr(exc, "errno", None) == errno.EPIPE:
            quiet_stdout()
            raise typer.Exit(EXIT_PIPE)
        raise


def _one_line(text: str, limit: int = 600) -> str:
    """An error or hint as one line: messages can quote SQLite or nsys text that holds newlines
    (a malformed schema), and a CI log must get exactly one error line. Terminal escapes go first,
    whole (their text never shows)."""
    from .outputs import terminal_text

    s = " ".join(terminal_text(text).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _err(message: str, hint: str | None = None) -> None:
    _echo(f"nsysdoc: error: {_one_line(message)}", err=True)
    if hint:
        _echo(f"nsysdoc: hint: {hint}", err=True)  # may quote nsys's own last lines


def _one_line_errors(command):
    """Bad input (:class:`NsysdocError`) ends a command with its one-line error and exit code 2:
    one wrapper around every command instead of a try/except ladder around each step (issue 51)."""
    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except NsysdocError as exc:
            _err(exc.message, exc.hint)
            raise typer.Exit(EXIT_ERROR) from None

    return run


def _cache_warnings(print_them: bool = True) -> None:
    """One warning line per cache problem the library recorded (the report was made without it)."""
    from .cache import take_problems

    for msg in take_problems():
        if print_them:
            _echo(f"nsysdoc: warning: {_one_line(msg)}; carrying on without the cache", err=True)


def _progress(msg: str) -> None:
    if sys.stderr.isatty():
        _echo(f"nsysdoc: {msg}...", err=True)


def _version(value: bool) -> None:
    if value:
        _echo(f"nsysdoc {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Show the version and exit.")) -> None:
    """nsysdoc command line."""


def sample_path() -> Path:
    from importlib.resources import files

    return Path(str(files("nsysdoc") / "sample" / "sample_training.sqlite"))


def _ruleset(rule_dirs: list[Path], config: Optional[Path], no_config: bool):
    """The rules and configuration; a configuration file found walking up but passed over as
    untrusted (``Ruleset.warnings``) is said once, one warning line each, even with ``-q``."""
    from .api import load_ruleset

    ruleset = load_ruleset(rule_dirs, config=config, no_config=no_config)
    for w in getattr(ruleset, "warnings", None) or []:
        _echo(f"nsysdoc: warning: {_one_line(w)}", err=True)
    return ruleset


def _render(rep, fmt: "Format", worst_step: bool, export: tuple = (None, None)):
    """The text of a Report (nsysdoc.api) in ``fmt``; for perfetto, text chunks written as they
    come (a capture may hold millions of events)."""
    if fmt == Format.perfetto:
        return rep.perfetto_chunks(*export)
    if fmt == Format.json:
        return rep.to_json()
    if fmt == Format.md:
        return rep.to_markdown()
    return rep.to_html(worst_step=worst_step)


def _say(msg: str) -> None:
    """Pipeline progress: exporting a report is always said (it takes a while); the rest only on
    a terminal."""
    if msg.startswith("exporting "):
        _echo(f"nsysdoc: {msg}...", err=True)
    else:
        _progress(msg)


def _report_paths(paths: list[Path], fmt: "Format", output: Optional[Path], options,
                  fail_on: "Severity | None", debug: bool,
                  rule_dirs: list[Path] | None = None, config: Optional[Path] = None,
                  no_config: bool = False, quiet: bool = False, open_report: bool = False,
                  worst_step: bool = False, json_beside: bool = False, to_stdout: bool = False,
                  as_dir: bool = False, export: tuple = (None, None)) -> int:
    """Report each input with ``options`` (:class:`nsysdoc.options.ReportOptions`, built once by
    the command); returns the exit code (worst over inputs). Errors do not stop the rest."""
    from .api import empty_rule_folders, input_files, report_file

    try:
        ruleset = _ruleset(list(rule_dirs or []), config, no_config)
    except NsysdocError as exc:
        _err(exc.message, exc.hint)
        return EXIT_ERROR
    for d in empty_rule_folders(rule_dirs, ruleset):
        _echo(f"nsysdoc: warning: {d} holds no rule files (*.yaml); only the built-in rules run", err=True)
    if fail_on is None:
        fail_on = Severity(ruleset.fail_on) if ruleset.fail_on else Severity.never

    files: list[str] = []
    worst = EXIT_OK
    seen: set = set()
    for raw in paths:
        try:
            files.extend(input_files([raw], seen))
        except NsysdocError as exc:
            _err(exc.message, exc.hint)
            worst = EXIT_ERROR
    if not files:  # every input was refused, each with its own error line
        return EXIT_ERROR
    several = len(files) > 1 or len(paths) > 1 or any(Path(p).is_dir() for p in paths)
    names = _unique_names(files)
    if several and to_stdout:
        _err("-o - (standard output) takes one input", "name a folder with -o DIR/ for several inputs")
        return EXIT_ERROR
    if several and output is not None and output.suffix and not as_dir:
        _err("with several inputs, --output must be a directory")
        return EXIT_ERROR
    targets = {path: None if to_stdout else _target(Path(names.get(path, path)), output, several, fmt, as_dir)
               for path in files}
    planned = [t for t in targets.values() if t is not None]
    index = _index_path(targets, output, several, fmt)
    if index is not None:
        planned.append(index)
    if json_beside:
        planned += [t.with_suffix(".json") for t in planned if fmt != Format.json]
    try:  # before any work: no output may replace anything this run reads, or be unwritable
        _guard(planned, files, rule_dirs, ruleset)
    except NsysdocError as exc:
        _err(exc.message, exc.hint)
        return EXIT_ERROR
    rows: list = []  # index.html: (input, result, page, error)
    for path in files:
        try:
            rep = report_file(path, ruleset, options, keep_rows=fmt == Format.perfetto,
                              page_windows=fmt in (Format.html, Format.md))
            result = rep.result
            text = _render(rep, fmt, worst_step, export)
            _cache_warnings()
        except NsysdocError as exc:
            _cache_warnings(False)  # the error line is the one line to read
            _err(exc.message, exc.hint)
            rows.append((path, None, None, _one_line(exc.message)))
            worst = EXIT_ERROR
            continue
        except Exception as exc:  # never a traceback for the user unless asked
            if debug:
                traceback.print_exc()
            _err(f"{path}: internal error: {type(exc).__name__}: {exc}", "please report this with --debug output")
            rows.append((path, None, None, _one_line(f"internal error: {type(exc).__name__}: {exc}")))
            worst = EXIT_ERROR
            continue
        target = targets[path]
        try:
            _write_out(text, target)
            if json_beside and target is not None and fmt != Format.json:
                _write_out(rep.to_json(), target.with_suffix(".json"))
        except StdoutClosed:
            return EXIT_PIPE  # the reader went away (| head): nothing more to say, to anyone
        except NsysdocError as exc:
            _err(exc.message, exc.hint)
            rows.append((path, None, None, _one_line(exc.message)))
            worst = EXIT_ERROR
            continue
        except Exception as exc:  # a streamed output (-f perfetto) is made while it is written
            if debug:
                traceback.print_exc()
            _err(f"{path}: internal error: {type(exc).__name__}: {exc}", "please report this with --debug output")
            worst = EXIT_ERROR
            continue
        rows.append((path, result, target, None))
        for st in result.get("rules") or []:
            if st.get("status") == "broken":  # a CI log must show it even with -q
                _echo(_one_line(f"nsysdoc: warning: rule {st.get('rule')} is broken and did not run: "
                                f"{st.get('reason')}", 2000), err=True)
        if not quiet:
            summary = rep.summary_text(str(target) if target is not None else None)
            _echo(summary.rstrip("\n"), err=target is None)
        elif target is not None:
            _echo(f"nsysdoc: wrote {target}", err=True)
        if open_report and target is not None and fmt == Format.html:
            import webbrowser

            if not webbrowser.open(target.resolve().as_uri()):
                _echo(f"nsysdoc: no web browser found; open {target.resolve()} yourself", err=True)
        if worst == EXIT_OK and _fails(result, fail_on):
            worst = EXIT_FINDINGS
    if index is not None:
        from .api import index_html

        try:
            _write_out(index_html(rows, index.parent), index, "the index page")
        except NsysdocError as exc:
            _err(exc.message, exc.hint)
            return EXIT_ERROR
        _echo(f"nsysdoc: wrote {index}", err=True)  # issue 49: the page to open, with or without -q
    return worst


def _index_path(targets: dict, output: Optional[Path], several: bool, fmt: "Format") -> Optional[Path]:
    """``index.html`` of a folder report: several inputs written as pages into one output folder."""
    pages = [t for t in targets.values() if t is not None]
    if fmt != Format.html or not several or output is None or not pages:
        return None
    if len({t.parent for t in pages}) != 1:
        return None
    return pages[0].parent / "index.html"


@app.command()
@_one_line_errors
def report(
    inputs: list[str] = typer.Argument(None, show_default=False,
                                       help="nsys exports (.sqlite) or reports (.nsys-rep), PyTorch Profiler traces (.pt.trace.json[.gz], e.g. from torch.profiler.tensorboard_trace_handler or prof.export_chrome_trace), or folders of them."),
    fmt: Optional[Format] = typer.Option(None, "--format", "-f",
                                         help="html (one self-contained file), json (the contract in docs/json.md), "
                                              "md, or perfetto (a Chrome trace for ui.perfetto.dev, docs/perfetto.md). "
                                              "Default: from the --output suffix (.perfetto.json: perfetto), else html."),
    output: Optional[str] = typer.Option(None, "--output", "-o",
                                         help="Output file (one input) or directory (several, or a name ending "
                                              "in /, created). '-' is standard output. Default: "
                                              "<name>.nsysdoc.html here; json and md go to stdout."),
    step_marker: StepMarkerOption = None,
    sample: bool = typer.Option(False, "--sample", help="Report on the bundled sample capture."),
    no_cache: NoCacheOption = False,
    cache_dir: CacheDirOption = None,
    fail_on: Optional[Severity] = typer.Option(None, "--fail-on",
                                               help="Exit 1 when a finding has at least this severity (default: never)."),
    rules: RulesOption = [],
    config: Optional[Path] = typer.Option(None, "--config", help="Project config (default: nsysdoc.yaml, or pyproject.toml with a \\[tool.nsysdoc] table, found upwards)."),
    no_config: NoConfigOption = False,
    nsys: NsysOption = None,
    open_report: bool = typer.Option(False, "--open", help="Open the HTML report in a browser."),
    worst_step: bool = typer.Option(False, "--worst-step", help="Show the slowest step in the timeline (default: median)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Do not print the terminal summary."),
    debug: DebugOption = False,
    time_range: Optional[str] = typer.Option(None, "--range", metavar="START_S:END_S",
                                             help="-f perfetto: export [START_S, END_S) instead of the analysis "
                                                  "window (seconds on the capture's timeline, as the page prints "
                                                  "them; an empty side is open)."),
    steps: Optional[str] = typer.Option(None, "--steps", metavar="SPEC",
                                        help="-f perfetto: export these steps instead of the analysis window: "
                                             "median, worst, step numbers N or N-M (the JSON's steps[].step), "
                                             "comma-separated."),
) -> None:
    """Diagnose one or more captures: nsys exports or reports, or PyTorch Profiler (Kineto) traces.

    A PyTorch Profiler trace is what torch.profiler writes: profile(activities=[ProfilerActivity.CPU,
    ProfilerActivity.CUDA], schedule=schedule(wait=1, warmup=2, active=5),
    on_trace_ready=tensorboard_trace_handler("log/run")) with prof.step() every iteration, then
    nsysdoc report log/run/ (or prof.export_chrome_trace("trace.pt.trace.json")).
    """
    out_path, to_stdout, as_dir = _output_arg(output)
    paths: list[Path] = _input_args(inputs)
    fmt = _fmt_for(fmt, out_path, as_dir)
    from .api import check_perfetto_options

    check_perfetto_options(fmt.value, time_range, steps)  # before any work: a typo must not cost an analysis
    if sample:
        paths.insert(0, sample_path())
    if not paths:
        _err("no input given", "pass an nsys export: nsysdoc report run.sqlite (or --sample)")
        raise typer.Exit(EXIT_ERROR)
    from .api import ReportOptions
    from .lazy_pandas import deferring

    options = ReportOptions(step_marker=step_marker, cache=not no_cache, cache_dir=cache_dir, nsys=nsys, progress=_say)
    with deferring():  # an nsys export's report needs no pandas: keep pyarrow from importing it
        code = _report_paths(paths, fmt, out_path, options, fail_on, debug,
                             rules, config, no_config, quiet, open_report, worst_step, to_stdout=to_stdout,
                             as_dir=as_dir, export=(time_range, steps))
    raise typer.Exit(code)


@app.command()
@_one_line_errors
def diff(
    base: str = typer.Argument(..., help="The run before the change: a capture (.sqlite, .nsys-rep) or a saved "
                                         "report JSON (nsysdoc report --format json)."),
    candidate: str = typer.Argument(..., help="The run after the change: a capture or a saved report JSON."),
    fmt: Optional[Format] = typer.Option(None, "--format", "-f",
                                         help="html (one self-contained file), json (docs/diff.md) or md (a PR "
                                              "comment). Default: from the --output suffix, else html."),
    output: Optional[str] = typer.Option(None, "--output", "-o",
                                         help="Output file ('-': standard output; a name ending in / is a folder). "
                                              "Default: <base>-vs-<candidate>.nsysdoc-diff.html here; json and md "
                                              "go to stdout."),
    fail_on_regression: Optional[float] = typer.Option(
        None, "--fail-on-regression", metavar="PCT", min=0.0,
        help="Exit 1 when the candidate is significantly slower by more than PCT percent (the step time the "
             "verdict compares: the median step, or the mean step with inferred steps; or the time for the same "
             "work without timed steps)."),
    step_marker: StepMarkerOption = None,
    no_cache: NoCacheOption = False,
    cache_dir: CacheDirOption = None,
    rules: RulesOption = [],
    config: ConfigOption = None,
    no_config: NoConfigOption = False,
    nsys: NsysOption = None,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Do not print the summary."),
    debug: DebugOption = False,
) -> None:
    """Compare two runs: is the candidate faster than the base, by how much, and why."""
    from .api import diff as diff_runs
    diff_runs = diff_runs.__wrapped__  # the API's errors name parameters; the command's name its flags

    out_path, to_stdout, as_dir = _output_arg(output)
    base, candidate = _input_args([base, candidate])
    fmt = _fmt_for(fmt, out_path, as_dir)
    default_name = f"{base.stem}-vs-{candidate.stem}.nsysdoc-diff.{fmt.value}"
    target = None if to_stdout else (out_path / default_name if as_dir or (out_path is not None and _is_dir(out_path))
                                     else out_path)
    if target is None and fmt == Format.html and not to_stdout:
        target = Path.cwd() / default_name
    try:
        ruleset = _ruleset(list(rules), config, no_config)  # one error for bad rules, even with two saved reports
        _guard([target], _files_of([base, candidate]), rules, ruleset)
        d = diff_runs(base, candidate, rules=list(rules), config=config, no_config=no_config,
                      step_marker=step_marker, cache=not no_cache, cache_dir=cache_dir, nsys=nsys, progress=_say)
        _cache_warnings()
        text = d.to_json() if fmt == Format.json else d.to_markdown() if fmt == Format.md else d.to_html()
    except NsysdocError:
        raise  # to _one_line_errors, not to the internal-error clause below
    except Exception as exc:  # never a traceback for the user unless asked
        if debug:
            traceback.print_exc()
        _err(f"internal error: {type(exc).__name__}: {exc}", "please report this with --debug output")
        raise typer.Exit(EXIT_ERROR)
    try:
        _write_out(text, target, "the diff")
    except StdoutClosed:
        raise typer.Exit(EXIT_PIPE)
    if not quiet:
        _echo(d.summary_text(str(target) if target is not None else None).rstrip("\n"), err=target is None)
    elif target is not None:
        _echo(f"nsysdoc: wrote {target}", err=True)
    if fail_on_regression is not None and d.regression(fail_on_regression):
        raise typer.Exit(EXIT_FINDINGS)
    raise typer.Exit(EXIT_OK)


@app.command()
@_one_line_errors
def job(
    inputs: list[str] = typer.Argument(..., show_default=False,
                                       help="Per-rank captures (files or folders), or one capture holding several "
                                            "processes."),
    fmt: Optional[Format] = typer.Option(None, "--format", "-f",
                                         help="html, json (docs/job.md) or md. Default: from the --output suffix, else html."),
    output: Optional[str] = typer.Option(None, "--output", "-o",
                                         help="Output file ('-': standard output; a name ending in / is a folder). "
                                              "Default: job.nsysdoc.html here; json and md go to stdout."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1,
                                       help="Ranks analysed in parallel on this machine (default: CPU count)."),
    dask: Optional[str] = typer.Option(None, "--dask", envvar="DASK_SCHEDULER_ADDRESS", show_envvar=True,
                                       help="Run the per-rank analyses on this Dask scheduler (tcp://host:8786); "
                                            "workers must see the capture paths. Needs pip install 'nsysdoc[dask]'."),
    rank_pattern: Optional[str] = typer.Option(None, "--rank-pattern",
                                               help="Regex finding the rank number in a file name (first group)."),
    rank_reports: Optional[Path] = typer.Option(None, "--rank-reports",
                                                help="Also write each rank's HTML report into this folder (linked from the page)."),
    step_marker: StepMarkerOption = None,
    fail_on: Optional[Severity] = typer.Option(None, "--fail-on",
                                               help="Exit 1 when a rolled-up finding has at least this severity."),
    no_cache: NoCacheOption = False,
    cache_dir: CacheDirOption = None,
    rules: list[Path] = typer.Option([], "--rules", help="A folder of team rules (repeatable)."),
    config: ConfigOption = None,
    no_config: NoConfigOption = False,
    nsys: NsysOption = None,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Do not print the summary or progress."),
    debug: DebugOption = False,
) -> None:
    """Analyse a multi-rank job: per-rank summaries, clock offsets, straggler, rolled-up findings."""
    from .api import job as run_job
    run_job = run_job.__wrapped__  # the API's errors name parameters; the command's name its flags

    out_path, to_stdout, as_dir = _output_arg(output)
    inputs = _input_args(inputs)
    fmt = _fmt_for(fmt, out_path, as_dir)
    if to_stdout:
        target = None
    elif out_path is not None:
        target = out_path / f"job.nsysdoc.{fmt.value}" if as_dir or _is_dir(out_path) else out_path
    else:
        target = Path.cwd() / "job.nsysdoc.html" if fmt == Format.html else None

    def progress(done: int, total: int, recs: list) -> None:
        if quiet:
            return
        for rec in recs:  # one line per rank: a capture of several processes names each one's pids
            state = "ok" if rec.get("ok") else f"failed: {rec.get('error')}"
            who = f" (pid {', '.join(str(p) for p in rec['pids'])})" if len(recs) > 1 and rec.get("pids") else ""
            _echo(_one_line(f"nsysdoc: [{done}/{total}] {Path(str(rec.get('file'))).name}{who}: {state}", 2000),
                  err=True)

    try:
        ruleset = _ruleset(list(rules), config, no_config)  # validate rules and config here: one error, before any work
        if target is not None or rank_reports is not None:
            from .api import input_files, rank_report_path

            files = input_files(inputs)
            planned = [target] if target is not None else []
            if rank_reports is not None:
                planned += [rank_report_path(rank_reports, f) for f in files]
            _guard(planned, [*files, *inputs], rules, ruleset)
        j = run_job(inputs, jobs=jobs, dask=dask, rank_pattern=rank_pattern, rank_reports=rank_reports,
                    rules=list(rules), config=ruleset.config_path, no_config=no_config, step_marker=step_marker,
                    cache=not no_cache, cache_dir=cache_dir, nsys=nsys, progress=progress,
                    notice=None if quiet else (lambda text: _echo(f"nsysdoc: {_one_line(text)}", err=True)))
        _cache_warnings(not quiet)  # ranks read in this process (-j 1); workers' own go unreported
        text = (j.to_json() if fmt == Format.json else j.to_markdown() if fmt == Format.md
                else j.to_html(str(target) if target else None))
    except NsysdocError:
        raise  # to _one_line_errors, not to the internal-error clause below
    except Exception as exc:  # never a traceback for the user unless asked
        if debug:
            traceback.print_exc()
        _err(f"internal error: {type(exc).__name__}: {exc}", "please report this with --debug output")
        raise typer.Exit(EXIT_ERROR)
    try:
        _write_out(text, target, "the job page")
    except StdoutClosed:
        raise typer.Exit(EXIT_PIPE)
    if not quiet:
        _echo(j.summary_text(str(target) if target else None).rstrip("\n"), err=target is None)
    if fail_on is None:
        fail_on = Severity(ruleset.fail_on or "never")
    raise typer.Exit(EXIT_FINDINGS if _fails(j.result, fail_on) else EXIT_OK)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@_one_line_errors
def capture(
    command: list[str] = typer.Argument(..., help="The program to profile, after --: nsysdoc capture -- python train.py"),
    output_dir: Path = typer.Option(Path("."), "--output-dir", help="Folder for the .nsys-rep, .sqlite and report."),
    output_name: Optional[str] = typer.Option(None, "--output-name", help="Base name (default: from the command and time)."),
    cudnn: bool = typer.Option(False, "--cudnn", help="Also trace cuDNN calls."),
    cublas: bool = typer.Option(False, "--cublas", help="Also trace cuBLAS calls."),
    cpu_sampling: bool = typer.Option(False, "--cpu-sampling", help="Sample CPU call stacks (off by default)."),
    delay: Optional[float] = typer.Option(None, "--delay", help="Seconds to wait before collecting."),
    duration: Optional[float] = typer.Option(None, "--duration", help="Seconds to collect."),
    capture_range: Optional[str] = typer.Option(None, "--capture-range", help="cudaProfilerApi or nvtx."),
    capture_range_end: Optional[str] = typer.Option(None, "--capture-range-end", help="Passed to nsys as is (e.g. stop, repeat:3)."),
    nvtx_capture: Optional[str] = typer.Option(None, "--nvtx-capture", help="NVTX range[@domain] that starts the capture."),
    gpu_metrics_devices: Optional[str] = typer.Option(None, "--gpu-metrics-devices", help="Collect GPU metrics: all or 0,1."),
    cuda_graph_node: bool = typer.Option(False, "--cuda-graph-node", help="Trace CUDA graph nodes individually."),
    python_backtrace: bool = typer.Option(False, "--python-backtrace", help="Python backtraces for CUDA sync calls (enables CPU sampling)."),
    where: bool = typer.Option(False, "--where", help="Record what says where time comes from: operator ranges (--pytorch=autograd-nvtx) and CUDA call backtraces, where this nsys has them. Adds overhead: use it to locate a problem, not for a baseline."),
    memory: bool = typer.Option(False, "--memory", help="Record GPU memory allocations and frees (--cuda-memory-usage=true, where this nsys has it). Adds overhead: use it to look at memory, not for a baseline."),
    nsys_arg: list[str] = typer.Option([], "--nsys-arg", help="Extra flag for nsys profile, verbatim (repeatable)."),
    nsys: Optional[str] = typer.Option(None, "--nsys", help="nsys binary (default: $NSYS, then PATH)."),
    step_marker: Optional[str] = typer.Option(None, "--step-marker", help="Step marker regex for the report."),
    fail_on: Optional[Severity] = typer.Option(None, "--fail-on", help="Exit 1 when a finding has at least this severity."),
    rules: list[Path] = typer.Option([], "--rules", help="A folder of team rules (repeatable)."),
    force: bool = typer.Option(False, "--force", help="Replace an existing report of the same name (<name>.nsys-rep "
                                                      "and its pages); without it nsysdoc refuses before profiling."),
) -> None:
    """Profile a command with nsys, export it to SQLite, and report on it."""
    from .nsys import CaptureOptions, find_nsys, run_capture

    opts = CaptureOptions(
        output_dir=str(output_dir), output_name=output_name, trace_cudnn=cudnn, trace_cublas=cublas,
        cpu_sampling=cpu_sampling, delay_s=delay, duration_s=duration, capture_range=capture_range,
        capture_range_end=capture_range_end, nvtx_capture=nvtx_capture, gpu_metrics_devices=gpu_metrics_devices,
        cuda_graph_node=cuda_graph_node, python_backtrace=python_backtrace, extra_args=list(nsys_arg),
        where=where, force=force, memory=memory,
    )
    binary = find_nsys(nsys)
    result = run_capture(binary, opts, list(command))
    for old in result.replaced:
        _echo(f"nsysdoc: replaced {old} (--force)", err=True)
    _echo(f"nsysdoc: capture written to {result.rep_path}", err=True)
    if result.where_missing:
        _echo(f"nsysdoc: this nsys has no {', '.join(result.where_missing)}: the report says less about where "
                   "time comes from (upgrade Nsight Systems, see docs/capture.md)", err=True)
    if result.memory_missing:
        _echo("nsysdoc: this nsys has no --cuda-memory-usage: GPU memory usage was not recorded (upgrade Nsight "
              "Systems, see docs/capture.md)", err=True)
    if result.interrupted:
        _echo("nsysdoc: interrupted: reporting what was captured", err=True)
    if result.program_exit_code not in (0, None) and not result.interrupted:
        _echo(f"nsysdoc: the profiled program failed (exit code {result.program_exit_code}); "
                   "reporting what was captured", err=True)
    if result.diagnosis:
        _echo(f"nsysdoc: hint: {result.diagnosis}", err=True)
    if result.sqlite_path is None:
        _err(f"export to SQLite failed: {result.export_error or 'unknown error'}")
        raise typer.Exit(EXIT_ERROR)
    _echo(f"nsysdoc: SQLite export written to {result.sqlite_path}", err=True)
    sqlite = Path(result.sqlite_path)
    from .api import ReportOptions

    options = ReportOptions(step_marker=step_marker, nsys=binary, progress=_say)
    code = _report_paths([sqlite], Format.html, sqlite.with_name(sqlite.stem + ".nsysdoc.html"), options,
                         fail_on, False, rule_dirs=rules, json_beside=True)
    if result.interrupted:
        raise typer.Exit(130)
    if result.program_exit_code:
        raise typer.Exit(result.program_exit_code)
    raise typer.Exit(code)


def _unique_names(files: list[str]) -> dict[str, str]:
    """Report names per input: the file stem, prefixed by its folder(s) when two inputs share a stem
    (rank0/run.sqlite and rank1/run.sqlite must not overwrite each other's report)."""
    out: dict[str, str] = {}
    stems: dict[str, list[str]] = {}
    for f in files:
        stems.setdefault(Path(f).stem, []).append(f)
    for stem, group in stems.items():
        if len(group) == 1:
            out[group[0]] = group[0]
            continue
        for i, f in enumerate(group):
            parts = Path(f).resolve().parts[:-1]
            label = "-".join(parts[-2:]) if parts else str(i)
            out[f] = str(Path(f).with_name(f"{label}-{stem}{Path(f).suffix}".lstrip("-")))
        if len(set(Path(out[f]).stem for f in group)) < len(group):
            for i, f in enumerate(group):
                out[f] = str(Path(f).with_name(f"{stem}-{i + 1}{Path(f).suffix}"))
    return out




def _fails(result: dict, fail_on: "Severity | None") -> bool:
    """A finding at or above ``fail_on``; in a job, a straggler counts as one (its severity)."""
    if fail_on is None or fail_on == Severity.never:
        return False
    straggler = result.get("straggler") if isinstance(result.get("straggler"), dict) else None
    found = list(result.get("findings", [])) + ([straggler] if straggler else [])
    return any(SEVERITY_RANK.get(f.get("severity"), -1) >= SEVERITY_RANK[fail_on.value] for f in found)


def _target(path: Path, output: Path | None, several: bool, fmt: Format, as_dir: bool = False) -> Path | None:
    name = f"{Path(path).stem}.nsysdoc.{_SUFFIX.get(fmt, fmt.value)}"
    if output is None:
        return None if (fmt != Format.html and not several) else Path.cwd() / name
    if several or as_dir or _is_dir(output):
        return output / name
    return output


def _is_dir(p: Path) -> bool:
    """``p.is_dir()`` that answers False where the name cannot even be looked up (too long ...)."""
    try:
        return p.is_dir()
    except (OSError, ValueError):
        return False


def _output_arg(raw: Optional[str]) -> tuple[Optional[Path], bool, bool]:
    """``-o``'s value as (path, standard output?, folder?): ``-`` is standard output, and so is a
    name for the file standard output already is (``-o /dev/stdout``); a name ending in a path
    separator is a folder (created when missing). An empty value is refused (UsageError)."""
    from .outputs import check_path_value, is_stdout

    if raw is None:
        return None, False, False
    if raw == "-":
        return None, True, False
    check_path_value(raw, "output")
    if not raw.endswith("/") and is_stdout(raw):
        return None, True, False
    seps = (os.sep, os.altsep) if os.altsep else (os.sep,)
    return Path(raw), False, raw.endswith(seps) and len(raw) > 1 or raw == os.sep


_SUFFIX = {Format.perfetto: "perfetto.json"}


def _fmt_for(fmt: "Format | None", output: Optional[Path], as_dir: bool) -> "Format":
    if fmt is not None:
        return fmt
    if output is not None and not as_dir and output.name.lower().endswith(".perfetto.json"):
        return Format.perfetto
    suffix = output.suffix.lower() if output is not None and not as_dir else ""
    return {".json": Format.json, ".md": Format.md}.get(suffix, Format.html)


def _guard(planned, inputs, rule_dirs, ruleset) -> None:
    """The output guard (:func:`nsysdoc.outputs.check_outputs`), before any work: no output over a
    file this run reads (inputs and their SQLite files, the export beside a report, rule files of
    ``--rules`` and of the configuration, the configuration file, found or given), nor one that
    cannot be written."""
    from .api import check_outputs

    check_outputs(planned, inputs, ruleset, rule_dirs)


def _files_of(paths) -> list:
    """The files the inputs stand for (a folder: its captures), for the guard; an input that
    cannot be expanded stands for itself (its own error comes when it is read)."""
    from .api import input_files

    out: list = []
    for p in paths:
        try:
            out += input_files([p])
        except NsysdocError:
            out.append(p)
        out.append(p)
    return out


def _input_args(raw: list[str] | None) -> list[Path]:
    """Input arguments as paths: an empty argument is refused (``Path("")`` is the current folder,
    which nobody means by it)."""
    from .outputs import check_path_value

    return [check_path_value(r, "input") for r in raw or []]


def _write_out(text, target: Optional[Path], what: str = "the report") -> None:
    """The one place outputs are written: atomically to a file, or to standard output. ``text``
    is a string or an iterable of string chunks (written as they come)."""
    from .outputs import write_chunks_atomic, write_stdout, write_text_atomic

    if not isinstance(text, str):
        if target is None:
            for chunk in text:
                write_stdout(chunk)
        else:
            write_chunks_atomic(target, text, what)
    elif target is None:
        write_stdout(text)
    else:
        write_text_atomic(target, text, what)


cache_app = typer.Typer(no_args_is_help=True, help="Show or clear nsysdoc's cache of loaded captures and exports.")
app.add_typer(cache_app, name="cache")


def _mb(n: int) -> str:
    return f"{n / (1 << 20):,.1f} MB"


@cache_app.command("info")
def cache_info(cache_dir: CacheDirOption = None,
               as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Where the cache is, how many entries and how much disk it holds, and its size cap."""
    from . import cache

    for p in cache.settings_problems():  # e.g. NSYSDOC_CACHE_MAX_MB=inf: the default is used
        _echo(f"nsysdoc: warning: {_one_line(p)}", err=True)
    d = cache.info(cache_dir)
    if as_json:
        _echo(json.dumps(d, indent=2))
        raise typer.Exit(EXIT_OK)
    _echo(f"location: {d['location']}{'' if d['exists'] else ' (not created yet)'}")
    k = d["by_kind"]
    older = f", {k['older']} from an older nsysdoc" if k["older"] else ""
    _echo(f"entries:  {d['entries']} ({k['trace']} loaded captures, {k['export']} exports{older})")
    _echo(f"size:     {_mb(d['bytes'])} of {_mb(d['max_bytes'])} ({cache.MAX_ENV}; least recently used go first)")


@cache_app.command("clear")
def cache_clear(cache_dir: CacheDirOption = None) -> None:
    """Remove every cache entry (only folders nsysdoc itself created)."""
    from . import cache

    n, size = cache.clear(cache_dir)
    _echo(f"removed {n} entr{'y' if n == 1 else 'ies'} ({_mb(size)}) from {cache.info(cache_dir)['location']}")


rules_app = typer.Typer(no_args_is_help=True, help="List, explain, validate and test bottleneck rules.")
app.add_typer(rules_app, name="rules")


def _rules_or_exit(dirs: list[Path], config: Optional[Path] = None, no_config: bool = True):
    return _ruleset(dirs, config, no_config).rules


@rules_app.command("list")
@_one_line_errors
def rules_list(rules: list[Path] = typer.Option([], "--rules", help="Also load this team rules folder (repeatable)."),
               config: Optional[Path] = typer.Option(None, "--config", help="Apply this project config.")) -> None:
    """List the rules: id, severity, category, title, and where each comes from."""
    rs = _rules_or_exit(rules, config, config is None)
    for r in rs.rules:
        sev = r.severity if isinstance(r.severity, str) else "/".join(k for k in WORST_FIRST if k in r.severity)
        state = " (disabled)" if r.id in rs.disabled else ""
        src = "" if r.source == "builtin" else \
            f"  [{_one_line(r.source)}{', replaces built-in' if r.replaces_builtin else ''}]"
        _echo(f"{r.id:18} {sev:22} {r.category:18} {_one_line(r.title)}{state}{src}")


@rules_app.command("explain")
@_one_line_errors
def rules_explain(rule_id: str = typer.Argument(..., help="Rule id, e.g. host-sync."),
                  rules: list[Path] = typer.Option([], "--rules", help="Also load this team rules folder.")) -> None:
    """What a rule detects, why it costs time, how to verify and fix it, its parameters."""
    from .rules.docs import explain

    rs = _rules_or_exit(rules)
    _echo(explain(rs.by_id(rule_id)), nl=False)


@rules_app.command("check")
@_one_line_errors
def rules_check(folders: list[Path] = typer.Argument(..., help="Rule folders to validate.")) -> None:
    """Validate rule files (schema, expressions, names, cases files) without running them."""
    from .testing.rule_cases import check_folder

    count = 0
    builtin = {r.id for r in _rules_or_exit([]).rules}
    for d in folders:
        chk = check_folder(d, builtin)  # each file read once: linear in rules and cases
        count += len(chk.rules)
        for w in chk.warnings:
            _echo(f"nsysdoc: warning: {w}", err=True)
    _echo(f"{count} rule(s) OK")


@rules_app.command("test")
@_one_line_errors
def rules_test(folder: Path = typer.Argument(..., help="A rules folder with *.cases.yaml files."),
               config: Optional[Path] = typer.Option(None, "--config", help="Apply this project config.")) -> None:
    """Run the test cases of a rules folder (the same harness the built-in rules use)."""
    from .testing.rule_cases import run_folder
    from .rules.evaluate import builtin_rules_dir

    extra = [] if folder.resolve() == builtin_rules_dir().resolve() else [folder]
    rs = _rules_or_exit(extra, config, config is None)
    results = run_folder(folder, rs)
    failed = [r for r in results if not r.ok]
    for r in results:
        mark = "PASS" if r.ok else "FAIL"
        _echo(f"{mark} {r.case.id}" + ("" if r.ok else f"  ({r.case.path}:{r.case.line}: {r.detail})"))
    _echo(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    raise typer.Exit(EXIT_FINDINGS if failed else EXIT_OK)


@rules_app.command("schema")
def rules_schema() -> None:
    """Print the JSON Schema of a rule file."""
    from .rules import RULE_SCHEMA

    _echo(json.dumps(RULE_SCHEMA, indent=2))


@rules_app.command("docs")
def rules_docs(out: Path = typer.Argument(Path("docs/rules"), help="Folder to write the pages to.")) -> None:
    """Write one Markdown page per built-in rule, plus an index."""
    from .rules.docs import write_docs

    for p in write_docs(_rules_or_exit([]), out):
        _echo(f"wrote {p}")


_INTERRUPTED = False


def _on_sigint(signum, frame) -> None:
    global _INTERRUPTED
    _INTERRUPTED = True  # Typer turns KeyboardInterrupt into a silent exit 130: main() says why
    raise KeyboardInterrupt


def _interrupted_exit() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not interrupt the goodbye
    try:
        sys.stderr.write("nsysdoc: interrupted\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    mp = sys.modules.get("multiprocessing.util")
    if mp is not None:  # the job's pool was terminated (nsysdoc.jobs.run): release its semaphores
        try:
            mp._exit_function()
        except Exception:
            pass
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    # not sys.exit: an interrupt caught inside an import can make the interpreter's exit status
    # the signal's (-2) whatever SystemExit says; os._exit also skips waiting for background threads
    os._exit(EXIT_INTERRUPTED)


#: the widest and tallest terminal the help is laid out for (Rich pads every line of its panels
#: to the width: COLUMNS=100000000 cost 83 s and 3.8 GB before it was clamped)
MAX_COLUMNS, MAX_LINES = 1000, 10000


def _clamp_terminal_size(environ=os.environ) -> None:
    """Bound the terminal size Typer, Rich and Click read from ``COLUMNS``, ``LINES`` and
    ``TERMINAL_WIDTH``: a value that is not a positive number is dropped, a larger one clamped."""
    for name, cap in (("COLUMNS", MAX_COLUMNS), ("TERMINAL_WIDTH", MAX_COLUMNS), ("LINES", MAX_LINES)):
        raw = environ.get(name)
        if raw is None:
            continue
        value = raw.strip()
        if not (value.isascii() and value.isdigit()) or int(value) < 1:
            del environ[name]
        elif int(value) > cap:
            environ[name] = str(cap)


def main() -> None:
    """Console-script entry point. Ctrl-C: one line ``nsysdoc: interrupted`` and exit 130, at once
    (a job's worker processes are terminated, not waited for)."""
    import signal

    _clamp_terminal_size()
    global _INTERRUPTED
    _INTERRUPTED = False
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not when the shell ignores it
        signal.signal(signal.SIGINT, _on_sigint)
    try:
        app(prog_name="nsysdoc")
    except KeyboardInterrupt:
        _interrupted_exit()
    except SystemExit:
        if _INTERRUPTED:
            _interrupted_exit()
        raise


if __name__ == "__main__":  # pragma: no cover
    main()
