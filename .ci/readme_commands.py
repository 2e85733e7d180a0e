"""Print the commands of README.md's first two ``sh`` code blocks, one per line.

README.md starts with two commands a new user types on a fresh machine (install and run the
sample; install and run the tests). ``.ci/run`` runs exactly these, so CI breaks when they do;
``tests/test_ci.py`` checks this extraction.

README's test command runs the fast tests (a ``-m`` marker expression); ``--rest`` prints the
complement, ``not (EXPR)``, which ``.ci/run`` runs after README's commands, so CI runs every test
exactly once (issue 50).
"""
from __future__ import annotations

import re
import shlex
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


def marker_expression(command: str) -> str | None:
    """The ``-m`` expression of the ``pytest`` run in ``command`` (README's test command), or None
    when it selects no markers (then it runs every test)."""
    words = shlex.split(command)
    if "pytest" not in words:
        return None
    after = words[words.index("pytest") + 1:]
    for i, word in enumerate(after):
        if word == "-m" and i + 1 < len(after):
            return after[i + 1]
        if word.startswith("-m") and len(word) > 2:
            return word[2:]
    return None


def rest_expression(command: str) -> str | None:
    """The tests README's test command leaves out, as a ``-m`` expression: ``not (EXPR)``, so that
    the two runs together are every test, each once (issue 50). None when README runs them all."""
    expr = marker_expression(command)
    return None if expr is None else f"not ({expr})"


if __name__ == "__main__":
    args = sys.argv[1:]
    rest = "--rest" in args
    args = [a for a in args if a != "--rest"]
    path = Path(args[0] if args else "README.md")
    commands = readme_commands(path.read_text(encoding="utf-8"))
    if rest:  # .ci/run: the marker expression of the tests README's second command does not run
        expr = rest_expression(commands[1]) if len(commands) > 1 else None
        if expr:
            print(expr)
    else:
        for cmd in commands:
            print(cmd)
