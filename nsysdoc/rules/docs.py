"""Rule documentation generated from the rule files (``docs/rules/``, ``nsysdoc rules explain``)."""
from __future__ import annotations

from pathlib import Path

from ..severity import WORST_FIRST
from .evaluate import RuleSet
from .spec import Rule


def _severity_text(rule: Rule) -> str:
    if isinstance(rule.severity, str):
        return f"`{rule.severity}`"
    return ", ".join(f"`{lvl}` when `{rule.severity[lvl].source}`" for lvl in WORST_FIRST
                     if lvl in rule.severity)


def explain(rule: Rule) -> str:
    """Markdown page for one rule: what, why, example, verify, fix, parameters, references."""
    docs = rule.docs or {}
    lines = [f"# `{rule.id}`: {rule.title}", ""]
    lines += [f"Category: {rule.category}. Severity: {_severity_text(rule)}.", ""]
    if rule.source != "builtin":
        lines += [f"Source: `{rule.source}`" + (" (replaces the built-in rule)" if rule.replaces_builtin else ""), ""]
    lines += ["## What it detects", "", (rule.summary or rule.title).strip(), "",
              f"Fires when: `{rule.when.source.strip()}`", ""]
    if rule.requires:
        lines += [f"Needs: {', '.join(rule.requires)} (otherwise reported as skipped, with the reason).", ""]
    if docs.get("why"):
        lines += ["## Why it costs time", "", docs["why"].strip(), ""]
    if docs.get("example"):
        lines += ["## Example", "", docs["example"].strip(), ""]
    lines += ["## Message", "", rule.message.strip(), ""]
    if rule.impact_ms is not None:
        lines += [f"Estimated impact (ms in the window): `{rule.impact_ms.source.strip()}`", ""]
    if rule.where:
        from ..metrics.attribution import SELECTORS

        lines += ["## Where", "", f"The finding lists where its time comes from (operator, module, Python line): "
                  f"`{rule.where}`, {SELECTORS.get(rule.where, '')} (docs/glossary.md, \"Where\").", ""]
    lines += ["## How to verify", "", rule.verify.strip(), "", "## What to try", "", rule.fix.strip(), ""]
    if rule.params:
        lines += ["## Parameters", "", "| name | default | unit | meaning |", "|---|---|---|---|"]
        for p in rule.params.values():
            lines.append(f"| `{p.name}` | {p.default} | {p.unit} | {p.doc.strip()} |")
        lines.append("")
    if docs.get("thresholds"):
        lines += ["## Why these thresholds", "", docs["thresholds"].strip(), ""]
    if rule.references:
        lines += ["## References", ""] + [f"- {r}" for r in rule.references] + [""]
    return "\n".join(lines).rstrip() + "\n"


def index(rs: RuleSet) -> str:
    lines = ["# Built-in rules", "", "Generated from `rules/*.yaml` by `nsysdoc rules docs docs/rules`; a test fails when",
             "this folder is stale. The rule format is described in [../rules.md](../rules.md).", "",
             "| id | category | title |", "|---|---|---|"]
    for r in rs.rules:
        lines.append(f"| [`{r.id}`]({r.id}.md) | {r.category} | {r.title} |")
    return "\n".join(lines) + "\n"


def write_docs(rs: RuleSet, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for r in rs.rules:
        p = out / f"{r.id}.md"
        p.write_text(explain(r), encoding="utf-8")
        written.append(p)
    p = out / "index.md"
    p.write_text(index(rs), encoding="utf-8")
    written.append(p)
    return written
