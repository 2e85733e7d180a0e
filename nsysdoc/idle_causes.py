"""Why a GPU was idle: the ten idle causes, in one place (issue 51: "cause" and "class" were the
same ten words in three lists).

The order is the reporting order: the columns of ``Report.devices``/``Report.gaps``, the keys of
``idle_ms_by_cause``, the values ``idle_<cause>_ms``/``_pct``/``_ms_per_step`` the rules read,
the gap colours of the timeline. ``nsysdoc.metrics.gpu`` numbers them (``CAUSE_SYNC`` = 0 ...).
No import: rule loading reads these without numpy.
"""
from __future__ import annotations

#: the idle causes, in reporting order
IDLE_CAUSES = ("sync", "input", "alloc", "setup", "launch", "api", "host", "dependency", "tail", "unattributed")
#: what each cause means, as the page and the Markdown say it
IDLE_CAUSE_LABELS = {
    "sync": "host blocked in a sync",
    "input": "host waiting for input",
    "alloc": "memory allocation/free",
    "setup": "one-time setup (module load, JIT, compile)",
    "launch": "launch and dispatch overhead",
    "api": "other CUDA API calls (and launch calls of 1 ms or more)",
    "host": "host CPU work (no CUDA call)",
    "dependency": "GPU-side dependency",
    "tail": "after the last GPU operation",
    "unattributed": "no launching call or launching thread known",
}
#: a cause's short name, for table column headers ("Idle: input wait (ms)")
IDLE_CAUSE_SHORT_NAMES = {"sync": "sync", "input": "input wait", "alloc": "allocation", "setup": "set-up",
                          "launch": "launch/dispatch", "api": "other CUDA API", "host": "host CPU work",
                          "dependency": "GPU dependency", "tail": "tail", "unattributed": "unattributed"}
