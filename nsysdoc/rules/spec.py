"""The rule file format: JSON Schema, loading with line numbers, and checks.

A rule is one YAML file; `nsysdoc rules schema` prints :data:`RULE_SCHEMA`. Loading validates the
file against it and then checks every expression and message field against the metric names
(``nsysdoc.rules.values.VALUE_NAMES``) and the rule's parameters. Errors name the file, the line
and the field, with a suggestion for unknown names.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import RuleError
from ..metrics.attribution import SELECTORS as WHERE_SELECTORS
from .expr import Expr, ExprError, compile_expr
from .text import check_spec
from .text import fields as text_fields
from .values import IDLE_CAUSES, STRING_VALUES, TABLE_COLUMNS, TIME_RANGE_KINDS, VALUE_NAMES

from ..severity import SEVERITIES  # noqa: E402
CATEGORIES = ("gpu-utilization", "launch-overhead", "synchronization", "memory-transfer", "input-pipeline",
              "communication", "kernel-efficiency", "capture")
REQUIREMENTS = ("kernels", "gpu_activity", "cuda_api", "nvtx", "osrt", "steps", "gpu_metrics", "memcpy", "sm_count",
                "memory")
ID_RE = r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$"

RULE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "nsysdoc bottleneck rule",
    "type": "object",
    "additionalProperties": False,
    "required": ["id", "title", "category", "when", "severity", "message", "verify", "fix"],
    "properties": {
        "id": {"type": "string", "pattern": ID_RE, "description": "kebab-case name of the problem; stable"},
        "title": {"type": "string", "minLength": 3, "description": "one line, names the problem"},
        "category": {"enum": list(CATEGORIES)},
        "summary": {"type": "string", "description": "what the rule detects, one sentence"},
        "requires": {"type": "array", "items": {"enum": list(REQUIREMENTS)}, "uniqueItems": True,
                     "description": "data the rule needs; when absent the rule is reported as skipped"},
        "params": {
            "type": "object",
            "description": "typed, documented parameters (overridable per project)",
            "additionalProperties": {
                "type": "object", "additionalProperties": False, "required": ["default", "doc"],
                "properties": {
                    "default": {"type": ["number", "string", "boolean"]},
                    "unit": {"type": "string"},
                    "doc": {"type": "string", "minLength": 3},
                },
            },
        },
        "when": {"type": ["string", "boolean"], "description": "condition (safe expression) for the rule to fire"},
        "severity": {
            "description": "a fixed severity, 'by-impact' (the built-in policy: critical from 15% of the window, "
                           "warning from 3%), or bands checked from critical down to info",
            "oneOf": [
                {"enum": list(SEVERITIES) + ["by-impact"]},
                {"type": "object", "additionalProperties": False, "minProperties": 1,
                 "properties": {s: {"type": ["string", "boolean"]} for s in SEVERITIES}},
            ],
        },
        "impact_ms": {"type": ["string", "number", "null"], "description": "expression: time lost in the window (ms)"},
        "impact_ms_per_step": {"type": ["string", "number", "null"]},
        "impact_pct": {"type": ["string", "number", "null"],
                       "description": "expression: impact as a % of the window (default impact_ms / window_ms * 100)"},
        "max_severity": {"enum": list(SEVERITIES), "description": "the highest severity the rule may reach"},
        "scope": {"enum": ["gpu", "host", "capture"],
                  "description": "host: the rule measures time the GPU sat idle because of the host, which a "
                                 "long enough window can show even with little GPU work (policy.HOST_JUDGE_MIN_WINDOW_MS); "
                                 "capture: the rule measures the program's time over the whole capture, judged "
                                 "whatever the GPU work"},
        "phase": {"enum": ["steady", "framing"],
                  "description": "framing: the rule is about how the capture is framed (one-time set-up, start-up), "
                                 "not the steady state; the verdict names it only when no steady-state finding "
                                 "reaches warning"},
        "impact_of": {"type": "string", "description": "what impact_ms and impact_pct are measured over when not the "
                                                      "analysis window (e.g. 'GPU span')"},
        "message": {"type": "string", "description": "template with {value} or {value:.1f} fields"},
        "evidence": {
            "type": "object", "additionalProperties": False, "required": ["table", "columns"],
            "properties": {
                "title": {"type": "string"},
                "table": {"enum": sorted(TABLE_COLUMNS)},
                "columns": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "where": {"type": "string"},
                "sort": {"type": "string"},
                "descending": {"type": "boolean"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 200},
            },
        },
        "where": {"enum": sorted(WHERE_SELECTORS),
                  "description": "which time the finding's 'where' list attributes to operators, modules and lines"},
        "time_ranges": {"type": "string", "description": "which time ranges to open in the Nsight Systems GUI",
                        "pattern": "^(" + "|".join(TIME_RANGE_KINDS) + ")(:[a-z]+)?$"},
        "verify": {"type": "string", "description": "how to confirm the finding"},
        "fix": {"type": "string", "description": "what to try"},
        "docs": {"type": "object", "additionalProperties": False,
                 "properties": {"why": {"type": "string"}, "example": {"type": "string"},
                                "thresholds": {"type": "string"}}},
        "references": {"type": "array", "items": {"type": "string"}},
    },
}


@dataclass
class Param:
    name: str
    default: Any
    doc: str
    unit: str = ""


@dataclass
class Rule:
    id: str
    title: str
    category: str
    path: Path
    source: str                     # "builtin" or the file path
    summary: str
    requires: tuple[str, ...]
    params: dict[str, Param]
    when: Expr
    severity: str | dict[str, Expr]
    impact_ms: Expr | None
    impact_ms_per_step: Expr | None
    message: str
    evidence: dict | None
    evidence_where: Expr | None
    time_ranges: str
    verify: str
    fix: str
    docs: dict = field(default_factory=dict)
    references: list[str] = field(default_factory=list)
    raw: dict = field(default_factory=dict)
    replaces_builtin: bool = False
    impact_pct: Expr | None = None
    max_severity: str | None = None
    #: "host": judged by impact even with too little GPU work (a long window of host-side idle time)
    scope: str = "gpu"
    #: the attribution selector of the finding's ``where`` list (nsysdoc.engine.attribute.SELECTORS)
    where: str | None = None
    #: "framing" (one-time set-up, start-up) or "steady": which the verdict prefers (rules.verdict)
    phase: str = "steady"


# --- YAML with line numbers --------------------------------------------------------------------
#: Limits on rule and config YAML (real rule files are a few kB, nested 4 deep): a hostile file is
#: refused in one line before PyYAML builds anything from it.
MAX_DEPTH = 32
MAX_INT_DIGITS = 30
MAX_EVENTS = 100_000
_SAFE_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "map", "seq")}
_INTLIKE = re.compile(r"^[-+]?(?:0[xob])?[0-9a-fA-F_]+$")


#: libyaml's parser when PyYAML was built with it (the usual wheel): the same events, nodes and
#: marks as the pure-Python one, about 5x faster (the built-in rules load in ~15 ms, not ~70 ms).
_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _check_events(text: str, path: Path) -> None:
    """Refuse aliases (a "billion laughs" file expands exponentially), tags other than the plain
    YAML types (``!!python/name:...``), nesting deeper than :data:`MAX_DEPTH` and integers longer
    than :data:`MAX_INT_DIGITS` digits. Iterative: the parser keeps its own stack."""
    depth = 0
    try:
        for i, ev in enumerate(yaml.parse(text, Loader=_FAST_LOADER)):
            line = ev.start_mark.line + 1 if ev.start_mark else 1
            if i > MAX_EVENTS:
                raise RuleError(f"{path}:{line}: YAML file has more than {MAX_EVENTS:,} nodes; refusing it")
            if isinstance(ev, yaml.AliasEvent) or getattr(ev, "anchor", None):
                raise RuleError(f"{path}:{line}: YAML anchors and aliases (&name, *name) are not allowed here")
            tag = getattr(ev, "tag", None)
            if tag and tag not in _SAFE_TAGS and tag not in ("!", "?") and not (
                    isinstance(ev, yaml.ScalarEvent) and ev.implicit[0]):
                raise RuleError(f"{path}:{line}: YAML tag {tag[:40]!r} is not allowed here")
            if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise RuleError(f"{path}:{line}: YAML nested deeper than {MAX_DEPTH} levels; refusing it")
            elif isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
            elif isinstance(ev, yaml.ScalarEvent) and ev.implicit[0] and ev.style is None \
                    and len(ev.value) > MAX_INT_DIGITS and _INTLIKE.match(ev.value) and any(c.isdigit() for c in ev.value):
                raise RuleError(f"{path}:{line}: number with more than {MAX_INT_DIGITS} digits")
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, path) from None


def _yaml_error(exc: "yaml.YAMLError", path: Path) -> RuleError:
    mark = getattr(exc, "problem_mark", None)
    where = f":{mark.line + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return RuleError(f"{path}{where}: invalid YAML: {str(problem)[:100]}")


def _compose(text: str, path: Path):
    _check_events(text, path)
    try:
        return yaml.compose(text, Loader=_FAST_LOADER)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, path) from None


def _to_python(node, path_lines: dict, key_path: tuple = (), loader=None):  # noqa: ANN001
    """Convert a composed YAML node to Python, recording the line of every key path."""
    loader = loader or yaml.SafeLoader("")
    path_lines[key_path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out = {}
        for k, v in node.value:
            if not isinstance(k, yaml.ScalarNode):
                raise RuleError(f"{k.start_mark.line + 1}: a key must be plain text")
            out[k.value] = _to_python(v, path_lines, key_path + (k.value,), loader)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_to_python(v, path_lines, key_path + (i,), loader) for i, v in enumerate(node.value)]
    return loader.construct_object(node, deep=True)


def load_yaml(path: Path, what: str = "rule") -> tuple[Any, dict]:
    """Parse a rule or config YAML file; returns the data and a map from key path to line number.
    Refuses, in one line that never quotes the file's content: a non-regular file, more than
    1 MB, bytes that are not UTF-8, and what :func:`_check_events` refuses."""
    from ..errors import InputError
    from ..inputs import read_text

    try:
        text = read_text(path, what)
    except InputError as exc:
        raise RuleError(exc.message) from None
    node = _compose(text, path)
    lines: dict = {}
    try:
        data = _to_python(node, lines) if node is not None else None
    except RuleError as exc:
        raise RuleError(f"{path}:{exc.message}") from None
    except (yaml.YAMLError, ValueError, RecursionError, MemoryError) as exc:
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise RuleError(f"{path}: invalid YAML: {str(problem)[:100]}") from None
    return data, lines


_NAME_LIKE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,39}")


def _key(k) -> str:
    """A key for an error message: quoted when it looks like a field name, else not quoted at all
    (a file that is not a rule, e.g. a symlink to a password file, must not be echoed to a CI log)."""
    return str(k) if isinstance(k, int) or (isinstance(k, str) and _NAME_LIKE.fullmatch(k)) else "<key>"


def _short(value, n: int = 40) -> str:
    """A value for an error message: its repr, shortened (errors never echo a file at length)."""
    r = repr(value)
    return r if len(r) <= n else r[: n - 3] + "..."


# --- JSON-schema subset validation (the subset RULE_SCHEMA uses) -------------------------------
def _type_ok(value, t) -> bool:
    types = t if isinstance(t, list) else [t]
    for one in types:
        if one == "string" and isinstance(value, str):
            return True
        if one == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        if one == "integer" and isinstance(value, int) and not isinstance(value, bool):
            return True
        if one == "boolean" and isinstance(value, bool):
            return True
        if one == "object" and isinstance(value, dict):
            return True
        if one == "array" and isinstance(value, list):
            return True
        if one == "null" and value is None:
            return True
    return False


def validate(value, schema: dict, where: tuple = ()) -> list[tuple[tuple, str]]:
    """Errors as (key path, message); empty when valid."""
    errs: list[tuple[tuple, str]] = []
    if "oneOf" in schema:
        results = [validate(value, s, where) for s in schema["oneOf"]]
        if not any(not r for r in results):
            errs.append((where, f"must be {' or '.join(_describe(s) for s in schema['oneOf'])}"))
        return errs
    if "enum" in schema and value not in schema["enum"]:
        import difflib

        close = difflib.get_close_matches(str(value), [str(e) for e in schema["enum"]], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        errs.append((where, f"{_short(value)} is not one of {', '.join(map(str, schema['enum']))}{hint}"))
        return errs
    if "type" in schema and not _type_ok(value, schema["type"]):
        errs.append((where, f"must be {_describe(schema)}, got {type(value).__name__}"))
        return errs
    if isinstance(value, str):
        if "pattern" in schema and not re.match(schema["pattern"], value):
            errs.append((where, f"{_short(value)} does not match {schema['pattern']}"))
        if "minLength" in schema and len(value) < schema["minLength"]:
            errs.append((where, "is too short"))
    if isinstance(value, int) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errs.append((where, f"must be >= {schema['minimum']}"))
        if "maximum" in schema and value > schema["maximum"]:
            errs.append((where, f"must be <= {schema['maximum']}"))
    if isinstance(value, dict):
        props = schema.get("properties", {})
        addl = schema.get("additionalProperties", True)
        for k, v in value.items():  # unknown or misspelt fields first: the most useful message
            if k in props:
                errs += validate(v, props[k], where + (k,))
            elif addl is False:
                import difflib

                close = difflib.get_close_matches(str(k), list(props), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                errs.append((where + (k,), f"unknown field {_key(k)!r}{hint}" if _key(k) != "<key>" else "a key that is not a field name"))
            elif isinstance(addl, dict):
                errs += validate(v, addl, where + (k,))
        for req in schema.get("required", []):
            if req not in value:
                errs.append((where, f"missing required field {req!r}"))
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            errs.append((where, "must not be empty"))
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errs.append((where, f"needs at least {schema['minItems']} item(s)"))
        if schema.get("uniqueItems") and len(set(map(repr, value))) != len(value):
            errs.append((where, "items must be unique"))
        if "items" in schema:
            for i, v in enumerate(value):
                errs += validate(v, schema["items"], where + (i,))
    return errs


def _describe(schema: dict) -> str:
    if "enum" in schema:
        return "one of " + ", ".join(map(str, schema["enum"]))
    names = {"object": "a mapping", "array": "a list", "string": "text", "number": "a number",
             "integer": "a whole number", "boolean": "true/false", "null": "null"}
    t = schema.get("type", "value")
    return " or ".join(names.get(x, x) for x in (t if isinstance(t, list) else [t]))


# --- rule loading ------------------------------------------------------------------------------
def _fail(path: Path, lines: dict, key_path: tuple, message: str) -> RuleError:
    line = None
    kp = key_path
    while kp and line is None:
        line = lines.get(kp)
        if line is None:
            kp = kp[:-1]
    line = line or lines.get((), 1)
    field_name = ".".join(_key(k) for k in key_path) or "(top)"
    return RuleError(f"{path}:{line}: {field_name}: {message}")


def template_fields(template: str) -> list[tuple[str, str]]:
    """(name, format spec) of each ``{...}`` field; only plain identifiers are allowed."""
    return text_fields(template)


def _time_ranges_problem(value: str, evidence) -> str | None:
    """Why a ``time_ranges`` value (``kind[:arg]``, already matched by the schema's pattern)
    cannot work, or None: only ``gaps`` takes an argument, an idle class (``gaps:sync``), and
    ``evidence`` needs an evidence table."""
    kind, sep, arg = value.partition(":")
    if kind == "gaps" and sep and arg not in IDLE_CAUSES:
        import difflib

        close = difflib.get_close_matches(arg, IDLE_CAUSES, n=1)
        return (f"unknown idle class {_short(arg)} in {_short(value)}; gaps takes one of {', '.join(IDLE_CAUSES)}"
                + (f"; did you mean 'gaps:{close[0]}'?" if close else ""))
    if kind != "gaps" and sep:
        return f"{kind} takes no ':{_short(arg)[1:-1]}' (only gaps does: gaps:sync, gaps:input ...)"
    if kind == "evidence" and not evidence:
        return "evidence needs an evidence table (the rule has no 'evidence:')"
    return None


def load_rule(path: Path, source: str = "builtin") -> Rule:
    data, lines = load_yaml(path)
    if not isinstance(data, dict):
        raise RuleError(f"{path}:1: a rule file must be a mapping of fields")
    errs = validate(data, RULE_SCHEMA)
    if errs:
        key_path, msg = errs[0]
        raise _fail(path, lines, key_path, msg)
    if path.name.split(".")[0] != data["id"]:
        raise _fail(path, lines, ("id",), f"the file must be named {data['id']}.yaml (rule id {data['id']!r})")
    params = {name: Param(name, p["default"], p["doc"], p.get("unit", "")) for name, p in (data.get("params") or {}).items()}
    for name, prm in params.items():  # a NaN threshold never compares true; an infinite one always/never does
        if isinstance(prm.default, float) and not math.isfinite(prm.default):
            raise _fail(path, lines, ("params", name, "default"), f"expected a finite number, got {prm.default}")
    clash = set(params) & set(VALUE_NAMES)
    if clash:
        raise _fail(path, lines, ("params", sorted(clash)[0]), "parameter name clashes with a metric value name")
    known = set(VALUE_NAMES) | set(params)

    def expr(key_path: tuple, source_text, names=known) -> Expr:
        try:
            return compile_expr(source_text, names)
        except ExprError as exc:
            raise _fail(path, lines, key_path, str(exc)) from None

    when = expr(("when",), data["when"])
    sev = data["severity"]
    severity = sev if isinstance(sev, str) else {k: expr(("severity", k), v) for k, v in sev.items()}
    impact = expr(("impact_ms",), data["impact_ms"]) if data.get("impact_ms") is not None else None
    impact_step = expr(("impact_ms_per_step",), data["impact_ms_per_step"]) \
        if data.get("impact_ms_per_step") is not None else None
    impact_pct = expr(("impact_pct",), data["impact_pct"]) if data.get("impact_pct") is not None else None
    for key in ("message", "verify", "fix"):
        try:
            fields = template_fields(data[key])
        except ValueError as exc:
            raise _fail(path, lines, (key,), f"{exc}; write {{{{ and }}}} for literal braces") from None
        for name, spec in fields:
            if name not in known:
                import difflib

                close = difflib.get_close_matches(name, sorted(known), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise _fail(path, lines, (key,), f"unknown name {name!r} in the {key} text{hint}")
            is_text = name in STRING_VALUES or isinstance(params.get(name, Param("", 1.5, "")).default, str)
            problem = check_spec(name, spec, is_text) if spec else None
            if problem:
                raise _fail(path, lines, (key,), problem)
    if "time_ranges" in data:
        problem = _time_ranges_problem(data["time_ranges"], data.get("evidence"))
        if problem:
            raise _fail(path, lines, ("time_ranges",), problem)
    evidence = data.get("evidence")
    where = None
    if evidence:
        cols = TABLE_COLUMNS[evidence["table"]]
        for i, c in enumerate(evidence["columns"]):
            if c not in cols:
                import difflib

                close = difflib.get_close_matches(c, cols, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise _fail(path, lines, ("evidence", "columns", i),
                            f"table {evidence['table']!r} has no column {c!r}{hint}")
        if evidence.get("sort") and evidence["sort"] not in cols:
            raise _fail(path, lines, ("evidence", "sort"), f"table {evidence['table']!r} has no column {evidence['sort']!r}")
        if evidence.get("where"):
            where = expr(("evidence", "where"), evidence["where"], set(cols) | known)
    return Rule(
        id=data["id"], title=data["title"], category=data["category"], path=path, source=source,
        summary=data.get("summary", ""), requires=tuple(data.get("requires") or ()), params=params, when=when,
        severity=severity, impact_ms=impact, impact_ms_per_step=impact_step, message=data["message"],
        impact_pct=impact_pct, max_severity=data.get("max_severity"), scope=data.get("scope") or "gpu",
        phase=data.get("phase") or "steady",
        evidence=evidence, evidence_where=where, time_ranges=data.get("time_ranges", "window"),
        verify=data["verify"], fix=data["fix"], docs=data.get("docs") or {}, references=data.get("references") or [],
        raw=data, where=data.get("where"),
    )
