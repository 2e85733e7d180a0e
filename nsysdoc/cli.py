"""Command line. The only module that prints and chooses exit codes.

Exit codes: 0 = no finding at or above ``--fail-on``; 1 = findings at or above it;
2 = usage or input error (bad file, bad option, nsys missing ...).
"""
from __future__ import annotations

import json
import os
import sys
import traceback
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from . import __version__
from .errors import NsysdocError

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Why is my GPU training slow? Diagnoses from Nsight Systems captures.")


class Format(str, Enum):
    json = "json"


class Severity(str, Enum):
    info = "info"
    warning = "warning"
    critical = "critical"
    never = "never"


def _err(message: str, hint: str | None = None) -> None:
    typer.echo(f"nsysdoc: error: {message}", err=True)
    if hint:
        typer.echo(f"nsysdoc: hint: {hint}", err=True)


def _progress(msg: str) -> None:
    if sys.stderr.isatty():
        typer.echo(f"nsysdoc: {msg}...", err=True)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"nsysdoc {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Show the version and exit.")) -> None:
    """nsysdoc command line."""


def sample_path() -> Path:
    from importlib.resources import files

    return Path(str(files("nsysdoc") / "sample" / "sample_training.sqlite"))


@app.command()
def report(
    inputs: list[Path] = typer.Argument(None, help="nsys exports (.sqlite); several files allowed.", show_default=False),
    fmt: Format = typer.Option(Format.json, "--format", "-f", help="Output format."),
    output: Optional[Path] = typer.Option(None, "--output", "-o",
                                          help="Output file (one input) or directory (several). Default: stdout for json."),
    step_marker: Optional[str] = typer.Option(None, "--step-marker",
                                              help="Regex an NVTX range's whole text must match to mark a training step."),
    sample: bool = typer.Option(False, "--sample", help="Report on the bundled sample capture."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the Parquet cache."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="Cache folder (default: $NSYSDOC_CACHE_DIR or ~/.cache/nsysdoc)."),
    fail_on: Severity = typer.Option(Severity.never, "--fail-on", help="Exit 1 when a finding has at least this severity."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks of internal errors."),
) -> None:
    """Diagnose one or more captures."""
    from .analysis import analyze
    from .trace import load_trace

    paths = list(inputs or [])
    if sample:
        paths.insert(0, sample_path())
    if not paths:
        _err("no input given", "pass an nsys export: nsysdoc report run.sqlite (or --sample)")
        raise typer.Exit(EXIT_ERROR)
    if len(paths) > 1 and output is not None and output.suffix:
        _err("with several inputs, --output must be a directory")
        raise typer.Exit(EXIT_ERROR)
    worst = EXIT_OK
    for path in paths:
        try:
            trace = load_trace(path, cache=not no_cache, cache_dir=cache_dir, progress=_progress)
            result = analyze(trace, step_pattern=step_marker).to_dict()
        except NsysdocError as exc:
            _err(exc.message, exc.hint)
            worst = EXIT_ERROR
            continue
        except Exception as exc:  # never a traceback for the user unless asked
            if debug:
                traceback.print_exc()
            _err(f"{path}: internal error: {type(exc).__name__}: {exc}", "please report this with --debug output")
            worst = EXIT_ERROR
            continue
        text = json.dumps(result, indent=2, allow_nan=False) + "\n"
        target = _target(path, output, len(paths), fmt)
        if target is None:
            sys.stdout.write(text)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            typer.echo(f"nsysdoc: wrote {target}", err=True)
        if worst == EXIT_OK and _fails(result, fail_on):
            worst = EXIT_FINDINGS
    raise typer.Exit(worst)


_RANK = {"info": 0, "warning": 1, "critical": 2}


def _fails(result: dict, fail_on: Severity) -> bool:
    if fail_on == Severity.never:
        return False
    return any(_RANK.get(f.get("severity"), -1) >= _RANK[fail_on.value] for f in result.get("findings", []))


def _target(path: Path, output: Path | None, n: int, fmt: Format) -> Path | None:
    ext = {"json": "json"}[fmt.value]
    name = f"{Path(path).stem}.nsysdoc.{ext}"
    if output is None:
        return None if (fmt == Format.json and n == 1) else Path.cwd() / name
    if n > 1 or output.is_dir():
        return output / name
    return output


def main() -> None:
    """Console-script entry point."""
    try:
        app(prog_name="nsysdoc")
    except KeyboardInterrupt:
        typer.echo("nsysdoc: interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":  # pragma: no cover
    main()
