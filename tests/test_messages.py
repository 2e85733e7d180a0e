"""What every finding and verdict says reads like a finished product, on every named scenario and
every real export: no 'n/a' inside a sentence, durations in a unit that suits them, no sentence
starting in lower case, capture advice only for what is missing."""
from __future__ import annotations

import re

import pytest

from nsysdoc.testing.scenarios import SCENARIOS

from .conftest import diagnose_path, real_traces
from .conftest import SHARED_SKIP, needs_shared  # issue 49

#: a list of input shapes as torch.profiler's Input Dims prints it (integers, commas, brackets, '…')
INPUT_SHAPES = re.compile(r"\[\[[\d, \[\]…]*\]")
BIG_US = re.compile(r"\b\d{4,}(?:[.,]\d+)?\s?(?:us|µs)\b")       # 1000 us and more: say ms
#: a sentence that starts with a lower-case English word (code such as cudaFree or torch.cuda... and
#: tool names may start one)
LOWER_AFTER_STOP = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\bvs)\.\s+(?!(?:nsys|nsysdoc|ncu)\b)[a-z]+(?=[\s,;:])")


def texts(result: dict) -> list[tuple[str, str]]:
    out = [("verdict.sentence", result["verdict"]["sentence"]), ("verdict.detail", result["verdict"]["detail"])]
    for f in result["findings"]:
        for key in ("message", "verify", "fix"):
            out.append((f"{f['rule']}.{key}", f[key]))
    return out


def check(result: dict) -> None:
    for where, text in texts(result):
        assert "n/a" not in text, (where, text)
        assert not BIG_US.search(text), (where, text)
        assert not LOWER_AFTER_STOP.search(text), (where, text)
        # (input shapes are quoted as PyTorch prints them, "[[32, 3, 224, 224], []]": a list of
        # integer lists, which no unfilled {placeholder} or [[optional]] template part looks like)
        assert "{" not in text and "[[" not in INPUT_SHAPES.sub("", text), (where, text)
    q = next((f for f in result["findings"] if f["rule"] == "capture-quality"), None)
    if q is not None and result["capture"]["has_step_markers"]:
        assert "Mark training steps" not in q["fix"], q["fix"]
    if q is not None and all(result["capture"]["traced"].get(k) for k in ("cuda_api", "nvtx", "osrt")):
        assert "as well (nsysdoc capture traces" not in q["fix"], q["fix"]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_messages_read_cleanly(name, build):
    check(diagnose_path(build(name)))


@needs_shared()
@pytest.mark.parametrize("path", real_traces() or [None], ids=lambda p: p.name if p else "none")
def test_real_trace_messages_read_cleanly(path):
    if path is None:
        pytest.skip(SHARED_SKIP)
    from nsysdoc.errors import EmptyCaptureError

    try:
        result = diagnose_path(path)
    except EmptyCaptureError:
        return
    check(result)
