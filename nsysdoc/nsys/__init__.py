"""Everything that shells out to NVIDIA Nsight Systems (``nsys``): capture, export, reuse.

Design:

* argv lists are built by pure functions (:func:`build_profile_argv`, :func:`build_export_argv`)
  and run separately (:func:`run_capture`, :func:`ensure_sqlite`), so the flags can be tested
  without an ``nsys`` binary.
* Library code never prints. The only output :func:`run_capture` produces is the profiled
  program's own stdout (inherited) and nsys' stderr, which is forwarded live (and its tail kept).
* Errors are the one-line errors of :mod:`nsysdoc.errors`.

Every flag emitted below is documented in the Nsight Systems User Guide, "CLI Profile Command
Switch Options" and "CLI Export Command Switch Options":
https://docs.nvidia.com/nsight-systems/UserGuide/index.html (see ``docs/capture.md`` for the table).

Modules: :mod:`.locate` (find nsys, version, switches), :mod:`.argv` (capture options and argv,
pure), :mod:`.export` (recognise, reuse and make SQLite exports; explain failures), :mod:`.run`
(run a capture). Input paths are resolved by :mod:`nsysdoc.inputs`, the export cache lives in
:mod:`nsysdoc.cache`.
"""
from ..cache import default_cache_dir
from ..inputs import expand_inputs
from .argv import CaptureOptions, build_export_argv, build_profile_argv, check_flag_support, default_output_name
from .export import (cache_path_for, ensure_sqlite, explain_capture_failure, is_nsys_export, owned_by_us,
                     sqlite_tables)
from .locate import (Runner, find_nsys, nsys_profile_switches, nsys_version, parse_nsys_version,
                     parse_profile_switches)
from .run import CaptureResult, run_capture

__all__ = [
    "CaptureOptions",
    "CaptureResult",
    "Runner",
    "build_export_argv",
    "cache_path_for",
    "default_cache_dir",
    "owned_by_us",
    "sqlite_tables",
    "build_profile_argv",
    "check_flag_support",
    "default_output_name",
    "ensure_sqlite",
    "expand_inputs",
    "explain_capture_failure",
    "find_nsys",
    "is_nsys_export",
    "nsys_profile_switches",
    "nsys_version",
    "parse_nsys_version",
    "parse_profile_switches",
    "run_capture",
]


