"""Print the commands of README.md's first two ``sh`` code blocks, one per line.

README.md starts with two commands a new user types on a fresh machine (install and run the
sample; install and run the tests). ``.ci/run`` runs exactly these, so CI breaks when they do;
``tests/test_ci.py`` checks this extraction.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

BLOCK = re.compile(r"^```(?:sh|bash|shell)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def readme_commands(text: str, count: int = 2) -> list[str]:
    """The first ``count`` shell code blocks, each joined into one command line (comments and
    blank lines dropped, backslash continuations joined)."""
    out = []
    for block in BLOCK.findall(text)[:count]:
        lines = [ln.split(" #")[0].rstrip() for ln in block.splitlines()]
        joined = " ".join(ln.rstrip("\\").strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#"))
        out.append(joined)
    return out


if __name__ == "__main__":
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "README.md")
    for cmd in readme_commands(path.read_text(encoding="utf-8")):
        print(cmd)
