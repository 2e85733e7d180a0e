"""A finding's severity, in one place: the three words, lowest first, and their order.

Rules reach a severity (``rules/*.yaml``), the verdict and every output list findings worst first,
``--fail-on`` and a job compare them, the page and the index show the worst. All of them read the
order from here (issue 51: it was written out nine times).
"""
from __future__ import annotations

#: the severities, lowest first
SEVERITIES = ("info", "warning", "critical")
#: worst first: the order findings are listed in
WORST_FIRST = tuple(reversed(SEVERITIES))
#: a severity's rank: info 0, warning 1, critical 2 (``SEVERITY_RANK.get(s, -1)``: -1 for any other value)
SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITIES)}
