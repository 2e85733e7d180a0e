"""pandas, imported only where nsysdoc needs it.

A report of an Nsight Systems export does not use pandas (its tables are numpy columns:
:mod:`nsysdoc.trace.columns`), but importing it costs 0.3 s, a quarter of a cached report of
2 M kernels on the machines we measure. pyarrow imports pandas on its own, in passing, when it
is installed: its first Array conversion looks pandas up to recognise pandas objects, which a
report never hands it (pyarrow works without pandas; it is an optional dependency there).

:func:`defer` (called by the command line, whose process is ours) makes ``import pandas`` fail
for such passing imports; :func:`pandas` lifts that and imports it, and is how nsysdoc's own code
gets pandas (whole DataFrames for the API, tests and tools). Without
:func:`defer` (a library user's process) nothing changes.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager


class _Deferred:
    """A ``sys.meta_path`` finder refusing pandas."""

    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is not imported by nsysdoc's report of an nsys export "
                              "(nsysdoc.lazy_pandas.pandas() imports it)")
        return None


_FINDER = _Deferred()


def defer() -> None:
    """Refuse passing imports of pandas (other libraries') until :func:`pandas` is called."""
    if "pandas" not in sys.modules and _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def deferred() -> bool:
    return _FINDER in sys.meta_path


def allow() -> None:
    """Lift :func:`defer` (pandas is imported when next asked for)."""
    try:
        sys.meta_path.remove(_FINDER)
    except ValueError:
        pass


@contextmanager
def deferring():
    """:func:`defer` for the duration of a ``with`` block, then :func:`allow`."""
    defer()
    try:
        yield
    finally:
        allow()


def pandas():
    """The pandas module (lifts :func:`defer`)."""
    allow()
    import pandas as pd

    return pd
