"""Every built-in rule's cases file, collected automatically (test ids ``<rule>::<case>``)."""
from __future__ import annotations

import pytest

from nsysdoc.rules import load_rules
from nsysdoc.testing.rule_cases import find_case_files, load_cases, run_case
from nsysdoc.rules.evaluate import builtin_rules_dir

RULES = load_rules()
CASES = [c for f in find_case_files(builtin_rules_dir()) for c in load_cases(f)]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rule_case(case, tmp_path):
    result = run_case(case, RULES, workdir=tmp_path)
    assert result.ok, f"{case.path}:{case.line}: {result.detail}"


def test_every_rule_has_positive_and_negative_cases():
    by_rule: dict[str, list] = {}
    for c in CASES:
        by_rule.setdefault(c.rule, []).append(c)
    for rule in RULES.rules:
        cases = by_rule.get(rule.id, [])
        assert any(c.expect.get("fires") is True or c.expect.get("status") == "fired" for c in cases), rule.id
        assert any(c.expect.get("fires") is False or c.expect.get("status") in ("passed", "skipped")
                   for c in cases), rule.id


def test_builtin_rule_ids_are_the_public_contract():
    assert sorted(r.id for r in RULES.rules) == sorted([
        "launch-bound", "tiny-kernels", "host-sync", "data-starvation", "nccl-exposed", "pageable-memcpy",
        "d2h-transfer", "dominant-kernel", "pseudo-busy", "fp32-gemm", "no-gpu-activity", "capture-quality",
        # issue 8: what the host does in GPU-idle gaps, and copies that dominate the GPU
        "transfer-bound", "allocation-churn", "one-time-setup", "host-bound",
        # issue 28: long CUDA calls while the GPU waits are driver work, not launch overhead;
        # kernels too small to fill the GPU
        "driver-stall", "under-filled-gpu",
        # issue 46: GPU idle while the next operation waits on other GPU work
        "gpu-dependency",
        # issue 46: the program's own host time outside the window
        "host-outside-window",
        # issue 47: the memory view (memory, not time: no impact)
        "memory-growth", "memory-near-capacity",
        # issue 47: optimizer.zero_grad() on every micro-batch of gradient accumulation
        "zero-grad-repeated",

        # issue 47: operators' input shapes that change between steps; cudnn.benchmark with fixed shapes
        "dynamic-shapes", "cudnn-benchmark"])


PUBLIC_DOCS = ("https://docs.nvidia.com/", "https://developer.nvidia.com/", "https://pytorch.org/",
               "https://docs.cupy.dev/")


@pytest.mark.parametrize("rule", RULES.rules, ids=[r.id for r in RULES.rules])
def test_references_are_public_documentation(rule):
    """Every reference a finding cites is a public NVIDIA/PyTorch/CuPy page a user can open; no text
    points to internal notes (the field articles the rules were built from are not public)."""
    assert rule.references, rule.id
    for ref in rule.references:
        urls = [w for w in str(ref).split() if w.startswith("http")]
        assert urls and all(u.startswith(PUBLIC_DOCS) for u in urls), (rule.id, ref)
    text = " ".join([rule.title, rule.summary, rule.message, rule.verify, rule.fix,
                     *map(str, rule.docs.values()), *map(str, rule.references)]).lower()
    assert "seed" not in text and "article" not in text, rule.id
