"""Regular expressions that users supply (``--step-marker``, a rule's ``matches()``, ``--rank-pattern``).

They run on RE2 (``google-re2``): matching takes time linear in the text, so no pattern can hang
nsysdoc through catastrophic backtracking (``(a+)+$`` against ``'a' * 70 + '!'`` takes
microseconds, where Python's ``re`` takes years). RE2 has no backreferences and no lookaround;
such patterns are refused with a one-line error. Our own fixed patterns keep using ``re``.
"""
from __future__ import annotations

import functools

import re2

#: The longest pattern accepted (step markers and rule patterns are short).
MAX_PATTERN_CHARS = 1000
#: RE2's memory budget per compiled pattern (bounds a hostile pattern's automaton).
MAX_MEM_BYTES = 8 << 20


class PatternError(ValueError):
    """A pattern RE2 cannot compile (bad syntax, backreference, lookaround) or one too long."""


@functools.lru_cache(maxsize=256)
def compile(pattern: str, ignore_case: bool = False):  # noqa: A001 - mirrors re.compile
    """The compiled pattern; ``.search``, ``.match`` and ``.fullmatch`` work as in ``re``."""
    if not isinstance(pattern, str):
        raise PatternError("the pattern must be text")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(f"pattern longer than {MAX_PATTERN_CHARS} characters")
    opts = re2.Options()
    opts.log_errors = False  # errors become our one-line message, never RE2's stderr log
    opts.case_sensitive = not ignore_case
    opts.max_mem = MAX_MEM_BYTES
    try:
        return re2.compile(pattern, opts)
    except re2.error as exc:
        detail = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise PatternError(f"{detail[:120]} (RE2 syntax: no backreferences or lookaround)") from None
