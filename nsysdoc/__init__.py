"""nsysdoc: why is my GPU training slow? Diagnoses from Nsight Systems captures.

The public API (docs/api.md)::

    import nsysdoc
    r = nsysdoc.report("run.sqlite")        # Report: verdict, findings, DataFrames, to_dict(), to_html()
    d = nsysdoc.diff("base.sqlite", r)      # Diff
    j = nsysdoc.job(["rank0.sqlite", "rank1.sqlite"])   # Job
    nsysdoc.NsysdocError                    # raised for bad input, with the command's one-line message

Everything not listed in ``__all__`` is private and may change without notice. Importing this
package loads nothing heavy: the analysis modules load on the first call, pandas on the first
DataFrame.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import NsysdocError
from .version import __version__
#: version of the Python API's surface (docs/api.md: what may change, and how it is announced)
API_VERSION = 1

__all__ = ["report", "reports", "diff", "job", "Report", "Finding", "Diff", "Job", "NsysdocError",
           "API_VERSION", "__version__"]

if TYPE_CHECKING:  # pragma: no cover
    from .api import Diff, Finding, Job, Report, diff, job, report, reports

_LAZY = {"report", "reports", "diff", "job", "Report", "Finding", "Diff", "Job"}


def __getattr__(name: str):
    if name in _LAZY:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'nsysdoc' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _LAZY)
