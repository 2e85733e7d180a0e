"""The refusals of the Kineto reader: what kind of file it was given, in one line each.

Apart so every part of the reader (the byte stream, the document walk, the loader) raises the same
exceptions, and callers catch them without importing the parsers (:mod:`nsysdoc.errors` holds the
families: an input refusal exits 2 at the CLI).
"""
from __future__ import annotations

from ...errors import CorruptFileError, EmptyCaptureError, InputError


class NotJsonError(InputError):
    """The file is not JSON (nor gzip-compressed JSON)."""


class NotATraceError(InputError):
    """The file is JSON, but not a Chrome trace (no ``traceEvents``)."""


class TruncatedTraceError(CorruptFileError):
    """The gzip stream or the JSON ends before the trace does."""


class EmptyTraceError(EmptyCaptureError):
    """The trace holds no event nsysdoc can use."""
