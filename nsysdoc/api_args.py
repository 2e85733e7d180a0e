"""The API's arguments (issue 51: apart from ``nsysdoc.api``, which grew past 1,000 lines): the
checks that turn a wrong argument into a one-line :class:`~nsysdoc.errors.UsageError` before any
work, the one :class:`~nsysdoc.options.ReportOptions` the keyword arguments build
(:func:`report_options`), and the wording of errors in the API's terms (:func:`api_wording`).
``nsysdoc.api`` re-exports these names."""
from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import NsysdocError, UsageError
from .options import ReportOptions

# --- errors that name API parameters (issue 49) -------------------------------------------------
#: the command line's flags that messages from the shared layers name, and the API parameter each
#: is: an error the API raises names ``step_marker=``, never ``--step-marker`` (cli.py keeps the flags)
API_PARAMETERS = {"--step-marker": "step_marker", "--rank-pattern": "rank_pattern", "--dask": "dask",
                  "--range": "time_range", "--steps": "steps", "--rank-reports": "rank_reports"}
_FLAG = re.compile(r"(?<![\w-])(" + "|".join(re.escape(f) for f in API_PARAMETERS) + r")(?![\w-])( (?=['\"A-Z0-9]|tcp://))?")


def api_wording(text: str | None) -> str | None:
    """``text`` with each command-line flag of :data:`API_PARAMETERS` named as the API parameter:
    ``--step-marker '(': ...`` becomes ``step_marker='(': ...``, ``pass --dask tcp://HOST:8786``
    becomes ``pass dask=tcp://HOST:8786``."""
    if not text:
        return text
    return _FLAG.sub(lambda m: API_PARAMETERS[m.group(1)] + "=", text)


def _api_errors(func):
    """Raise the NsysdocError ``func`` raises with its message and hint in the API's words."""
    import functools

    @functools.wraps(func)
    def run(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except NsysdocError as exc:
            message, hint = api_wording(exc.message), api_wording(exc.hint)
            if message != exc.message or hint != exc.hint:
                exc.message, exc.hint, exc.args = message, hint, (message,)
            raise
    return run



def _rule_dirs(rules) -> list[Path]:
    """``rules`` (one folder, or a list or tuple of them) as paths; anything else is a UsageError."""
    if rules is None:
        return []
    if isinstance(rules, (str, os.PathLike)):
        rules = [rules]
    if not isinstance(rules, (list, tuple)):
        raise UsageError(f"rules must be a folder path or a list of them, got {type(rules).__name__}")
    return [_path_arg(r, "rules folder") for r in rules]


def _path_arg(path, what: str = "input") -> Path:
    """A path argument: str or os.PathLike, not empty (``Path("")`` is the current folder), no NUL
    byte. UsageError otherwise, with one line."""
    from .outputs import check_path_value

    if not isinstance(path, (str, os.PathLike)):
        raise UsageError(f"expected a path for the {what}, got {type(path).__name__}")
    return check_path_value(path, what)


def _optional_path(value, what: str) -> Path | None:
    return None if value is None else _path_arg(value, what)


def _optional_str(value, what: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise UsageError(f"{what} must be a string, got {type(value).__name__}")
    if value is not None and "\x00" in value:
        raise UsageError(f"{what} holds a NUL byte")
    return value


def report_options(*, step_marker=None, cache=True, cache_dir=None, nsys=None, progress=None) -> ReportOptions:
    """The options every entry point shares, checked before any work (a wrong type is a one-line
    UsageError, an NsysdocError, never a TypeError from deep inside the pipeline), as the one
    :class:`~nsysdoc.options.ReportOptions` the pipeline is handed (issue 51)."""
    _optional_str(step_marker, "step_marker")
    if not isinstance(cache, (bool, int)):
        raise UsageError(f"cache must be True or False, got {type(cache).__name__}")
    _optional_path(cache_dir, "cache folder")
    if nsys is not None:
        _path_arg(nsys, "nsys binary")
    if progress is not None and not callable(progress):
        raise UsageError(f"progress must be a function (or None), got {type(progress).__name__}")
    return ReportOptions(step_marker=step_marker, cache=bool(cache), cache_dir=cache_dir, nsys=nsys, progress=progress)


def _path_list(paths) -> list[Path]:
    """One path or a list or tuple of them (any iterable but a string); UsageError otherwise."""
    if isinstance(paths, (str, os.PathLike)):
        return [_path_arg(paths)]
    if isinstance(paths, (bytes, dict)) or not hasattr(paths, "__iter__"):
        raise UsageError(f"expected a path or a list of paths, got {type(paths).__name__}")
    return [_path_arg(p) for p in paths]

