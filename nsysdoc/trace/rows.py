"""Row budgets the readers and the engine share: how many rows a time slice holds (the SQLite
reader cuts its blocks narrower than a slice; the engine cuts the capture into slices of these
rows), each overridable by an environment variable for tests."""
from __future__ import annotations

import os

#: Rows (GPU operations, CUDA API calls and OS runtime calls) per slice: bounds a slice's memory
#: (about 0.2-0.3 KB per row while it runs). ``NSYSDOC_SLICE_ROWS`` overrides it (tests use a
#: few rows to check that slicing never changes a number).
SLICE_ROWS = 1_000_000


def env_rows(name: str, default: int) -> int:
    """A row count from environment variable ``name`` (at least 1), else ``default`` (unset or
    not an integer)."""
    raw = os.environ.get(name, "")
    try:
        return max(1, int(raw)) if raw.strip() else default
    except ValueError:
        return default


def slice_rows() -> int:
    """Rows per slice: ``NSYSDOC_SLICE_ROWS`` when set, else :data:`SLICE_ROWS`."""
    return env_rows("NSYSDOC_SLICE_ROWS", SLICE_ROWS)
