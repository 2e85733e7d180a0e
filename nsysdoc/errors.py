"""Errors the library raises. Only ``nsysdoc.cli`` turns them into messages and exit codes.

Every error carries a one-line ``message`` and an optional ``hint`` (what to do about it).
"""
from __future__ import annotations


class NsysdocError(Exception):
    """Base class: a problem with the user's input or environment (exit code 2)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.message


class InputError(NsysdocError):
    """The input path is missing, unreadable, or not a file we can read."""


class NotSqliteError(InputError):
    """The file is not an SQLite database at all."""


class NotNsysExportError(InputError):
    """The file is SQLite but not an Nsight Systems export (e.g. an nvprof database)."""


class CorruptFileError(InputError):
    """The file is an SQLite database that is truncated or damaged."""


class EmptyCaptureError(InputError):
    """The export holds no events at all to analyse."""


class UsageError(NsysdocError):
    """Bad option values (e.g. an invalid --step-marker regex)."""


class RuleError(NsysdocError):
    """A YAML rule or config file is invalid."""


class NsysNotFoundError(NsysdocError):
    """No ``nsys`` executable could be found."""


class NsysFailedError(NsysdocError):
    """``nsys`` ran but failed (non-zero exit, missing output)."""


class OutputError(NsysdocError):
    """An output (report, diff, job page) cannot be written: full disk, no permission, bad name."""
