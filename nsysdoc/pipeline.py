"""The one pipeline every entry point runs: export (a ``.nsys-rep``) → load → analyse → rules.

``nsysdoc report``, ``nsysdoc diff``, ``nsysdoc job`` (each rank, in a worker) and the Python API
(:mod:`nsysdoc.api`) all call :func:`diagnose`; rules and configuration are loaded by
:func:`load_ruleset`. Nothing here prints: progress goes to an optional callback, problems are
raised as :class:`nsysdoc.errors.NsysdocError` (one-line message, optional hint).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import InputError, NsysdocError
from .options import ReportOptions, options_of

#: suffixes of Nsight Systems reports that must be exported to SQLite first
from .formats import REPORT_SUFFIXES, input_kind, is_report_name, is_saved_report_head  # noqa: F401


@dataclass(frozen=True)
class Ruleset:
    """Loaded rules and the project configuration they were loaded with."""

    rules: Any  # nsysdoc.rules.RuleSet
    config: Any  # nsysdoc.rules.Config
    config_path: Path | None = None

    @property
    def step_marker(self) -> str | None:
        return self.config.step_marker

    @property
    def fail_on(self) -> str | None:
        return self.config.fail_on

    @property
    def warnings(self) -> list[str]:
        """One line per configuration file found walking up but not read (owned by another user,
        in a folder others can write to, a FIFO ...): the command line prints each as a warning."""
        return list(getattr(self.config, "warnings", []) or [])

    def describe(self) -> dict:
        """Which configuration and rule folders a report used: the result's ``config``
        (docs/json.md)."""
        cfg = self.config
        path = self.config_path if self.config_path is not None else getattr(cfg, "path", None)
        dirs = getattr(self.rules, "rule_dirs", None)
        if dirs is None:
            dirs = list(getattr(cfg, "rule_dirs", []) or [])
        return {"path": str(path) if path is not None else None,
                "origin": getattr(cfg, "origin", None) or ("given" if path is not None else None),
                "rule_dirs": [str(d) for d in dirs],
                "ignored": [dict(i) for i in getattr(cfg, "ignored", []) or []]}


def config_path(config: str | os.PathLike | None, no_config: bool) -> Path | None:
    """The configuration file to use: ``config`` if given, none with ``no_config``, else the
    nearest nsysdoc.yaml or pyproject.toml with a [tool.nsysdoc] table, upwards from here, that
    can be trusted (:func:`nsysdoc.rules.evaluate.discover_config`)."""
    if config is not None:
        return Path(config)
    if no_config:
        return None
    from .rules.evaluate import find_config

    found = find_config()
    return Path(found) if found else None


def load_ruleset(rule_dirs=(), config: str | os.PathLike | None = None, no_config: bool = False) -> Ruleset:
    """Built-in rules plus each team folder in ``rule_dirs`` (same id replaces a built-in), with
    the project configuration's thresholds. Raises RuleError (an NsysdocError) on a bad file.

    Without ``config`` (and without ``no_config``) the configuration is found by walking up from
    the current folder; files passed over as untrusted are in ``Ruleset.warnings`` (one line
    each, for the caller to print) and in every report's ``config.ignored``."""
    from .rules import load_config, load_rules
    from .rules.evaluate import discover_config

    ignored: list[dict] = []
    if config is not None:
        path, origin = Path(config), "given"
    elif no_config:
        path, origin = None, "disabled"
    else:
        found = discover_config()
        path, ignored = found.path, found.ignored
        origin = "found" if path is not None else None
    cfg = load_config(path)
    cfg.origin, cfg.ignored = origin, ignored
    return Ruleset(load_rules([Path(d) for d in rule_dirs], cfg), cfg, path)


def empty_rule_dirs(rule_dirs, ruleset: Ruleset) -> list[Path]:
    """Rule folders (given or from the configuration) that hold no rule file: worth a warning."""
    out = []
    for d in list(rule_dirs or []) + list(ruleset.config.rule_dirs):
        if Path(d).is_dir() and not any(p for p in Path(d).glob("*.y*ml") if ".cases." not in p.name):
            out.append(Path(d))
    return out


def diagnose(path: str | os.PathLike, ruleset: Ruleset, options: ReportOptions | None = None, **fields):
    """Export (a ``.nsys-rep``), load, analyse and apply the rules: the Analysis, its result filled.

    ``options`` (:class:`nsysdoc.options.ReportOptions`, built once by the caller); keywords name
    its fields instead (``diagnose(path, ruleset, cache=False)``). Its ``step_marker`` defaults to
    the configuration's; its ``progress`` receives short phase messages (the command line shows
    them on a terminal)."""
    from .analysis import analyze
    from .rules import apply_rules
    from .trace import load_trace
    from .trace.store import keep_freed_memory

    o = options_of(options, **fields)
    src = str(path)
    kind = input_kind(src)  # (reads the file's first bytes: once)
    if kind != "kineto":
        # let the allocator reuse freed pages (see there): an Nsight Systems capture's analysis
        # frees and allocates similar arrays slice after slice. Not for a PyTorch Profiler trace
        # (issue 50): its whole-capture attributor and tables are built once, and the freed
        # memory kept would only add to the peak
        keep_freed_memory()
    if kind == "nsys-report":  # the one resolver (nsysdoc.formats)
        if o.progress is not None:
            o.progress(f"exporting {src} to SQLite (nsys export)")
        from .nsys import ensure_sqlite  # only for a .nsys-rep (issue 50: 4-7 ms of every other run)

        src = ensure_sqlite(src, nsys=o.nsys)
    trace = load_trace(src, cache=o.cache, cache_dir=o.cache_dir, progress=o.progress)
    analysis = analyze(trace, step_pattern=o.step_marker or ruleset.step_marker)
    result = apply_rules(analysis.to_dict(), ruleset.rules)  # fills analysis.result in place
    result["config"] = ruleset.describe()  # which configuration and rule folders were used
    return analysis


def is_saved_report(path: str | os.PathLike) -> bool:
    """A file that holds a saved report (``nsysdoc report -f json``), told from a capture by content:
    a PyTorch Profiler trace is JSON too, but a capture."""
    p = Path(path)
    try:
        return input_kind(p, saved_report=True) == "saved-report"  # the one resolver (nsysdoc.formats)
    except OSError as exc:
        raise InputError(f"{p}: cannot read: {exc.strerror or exc}")


def read_report(path: str | os.PathLike) -> dict:
    """A saved report JSON, checked (size, depth, non-finite numbers): one-line errors."""
    from .compare import read_saved_report

    try:
        return read_saved_report(Path(path))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{path}: not valid JSON ({exc})",
                         hint="pass a saved 'nsysdoc report --format json' file or a capture")


def one_input(path: str | os.PathLike, what: str) -> str:
    """The single capture ``path`` names (a file, or a folder holding exactly one)."""
    from .inputs import expand_inputs

    files = expand_inputs([Path(path)])
    if len(files) != 1:
        raise InputError(f"{path}: holds {len(files)} captures; the {what} must be one capture",
                         hint="name the capture file itself")
    return files[0]


def diff_side(path: str | os.PathLike, what: str, ruleset: Ruleset, options: ReportOptions | None = None) -> dict:
    """One side of a diff as a report result: a saved report JSON, or a capture to diagnose."""
    if is_saved_report(path):
        return read_report(path)
    return diagnose(one_input(path, what), ruleset, options).to_dict()



__all__ = ["Ruleset", "ReportOptions", "config_path", "load_ruleset", "empty_rule_dirs", "diagnose", "is_saved_report",
           "read_report", "one_input", "diff_side", "NsysdocError"]
