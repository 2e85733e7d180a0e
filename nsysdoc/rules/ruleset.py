"""Rule sets: the built-in catalogue, team rule folders and the project configuration's overrides,
loaded into one :class:`RuleSet`.

Why a module of its own: which rules run (a team rule replacing a built-in one, the same id in
two folders refused, symlinks out of a folder refused, the configuration's enabled / severity /
params checked against each rule) is decided once, before any trace is read; reading one rule
file is :mod:`nsysdoc.rules.spec`, the configuration :mod:`nsysdoc.rules.config`, running the
rules :mod:`nsysdoc.rules.evaluate`. Moved out of ``nsysdoc/rules/evaluate.py`` (issue 51);
re-exported there.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from importlib.resources import files
from pathlib import Path
from typing import Any

from ..errors import RuleError
from .config import Config, find_config, load_config
from .spec import Rule, _short, load_rule


def builtin_rules_dir() -> Path:
    """The built-in catalogue: top-level ``rules/`` in the repository, installed as the package
    data folder ``nsysdoc/builtin_rules`` (see pyproject.toml)."""
    installed = Path(str(files("nsysdoc") / "builtin_rules"))
    if installed.is_dir():
        return installed
    source_tree = Path(__file__).resolve().parents[2] / "rules"
    if source_tree.is_dir() and (source_tree / "host-sync.yaml").is_file():
        return source_tree
    raise RuleError("the built-in rules are missing from this installation (nsysdoc/builtin_rules)",
                    hint="reinstall nsysdoc: pip install --force-reinstall nsysdoc")


@dataclass
class RuleSet:
    rules: list[Rule]
    disabled: set[str] = field(default_factory=set)
    forced_severity: dict[str, str] = field(default_factory=dict)
    param_values: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the team rule folders loaded, in order (the configuration's, then ``--rules``)
    rule_dirs: list[Path] = field(default_factory=list)

    def by_id(self, rule_id: str) -> Rule:
        for r in self.rules:
            if r.id == rule_id:
                return r
        import difflib

        close = difflib.get_close_matches(rule_id, [r.id for r in self.rules], n=1)
        raise RuleError(f"no rule {rule_id!r}" + (f"; did you mean {close[0]!r}?" if close else ""))


def check_inside(folder: Path, p: Path) -> None:
    """Refuse a rule or cases file that is a symlink to a file outside its folder (never read: a
    link to ``/etc/shadow`` or a ``.env`` must not be quoted in an error line, nor run as a rule).
    A link to another file of the same folder (or below it) is read as usual."""
    if not p.is_symlink():
        return
    try:
        inside = p.resolve().is_relative_to(Path(folder).resolve())
    except (OSError, RuntimeError):  # a symlink loop
        inside = False
    if not inside:
        raise RuleError(f"{p}: a symlink to a file outside the rules folder; refusing to read it",
                        hint="copy the rule into the folder (or link to one inside it)")


def load_dir(folder: Path, source: str) -> list[Rule]:
    folder = Path(folder)
    if not folder.is_dir():
        raise RuleError(f"{folder}: rules folder not found")
    rules = []
    for p in sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml")):
        if p.name.endswith((".cases.yaml", ".cases.yml")):
            continue
        check_inside(folder, p)
        rules.append(load_rule(p, source if source == "builtin" else str(p)))
    seen: dict[str, Path] = {}
    for r in rules:
        if r.id in seen:
            raise RuleError(f"{r.path}:1: id: rule {r.id!r} is also defined in {seen[r.id]}")
        seen[r.id] = r.path
    return rules


def _distinct_dirs(dirs) -> list[Path]:
    """The folders in order, each once: the same folder named twice (by the configuration and by
    ``--rules``, or by two spellings of one path) is loaded once."""
    out, seen = [], set()
    for d in dirs:
        d = Path(d)
        try:
            key = d.resolve()
        except (OSError, RuntimeError, ValueError):
            key = d
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def load_rules(rule_dirs: list[Path] | tuple = (), config: Config | None = None, builtin: bool = True) -> RuleSet:
    """Built-in rules, then each team folder (a team rule with a built-in's id replaces it; the
    same id in two team folders is refused, naming both files), then the project config's
    overrides (enabled / severity / params)."""
    config = config or Config()
    by_id: dict[str, Rule] = {}
    if builtin:
        for r in load_dir(builtin_rules_dir(), "builtin"):
            by_id[r.id] = r
    dirs = _distinct_dirs(list(config.rule_dirs) + [Path(x) for x in rule_dirs])
    for d in dirs:
        for r in load_dir(d, str(d)):
            prev = by_id.get(r.id)
            if prev is not None and prev.source != "builtin":
                raise RuleError(f"{r.path}:1: id: rule {r.id!r} is also defined in {prev.path}; a rule id may come "
                                "from one team rules folder only",
                                hint="rename one of them, or drop one folder from --rules / rule_dirs")
            if prev is not None:
                r = replace(r, replaces_builtin=True)
            by_id[r.id] = r
    rs = RuleSet(rules=sorted(by_id.values(), key=lambda r: r.id), rule_dirs=dirs)
    where = str(config.path) if config.path else "config"
    for rid, over in config.rules.items():
        if rid not in by_id:
            import difflib

            close = difflib.get_close_matches(rid, list(by_id), n=1)
            raise RuleError(f"{where}: rules.{str(rid)[:40]}: no such rule" + (f"; did you mean {close[0]!r}?" if close else ""))
        rule = by_id[rid]
        if over.get("enabled") is False:
            rs.disabled.add(rid)
        if "severity" in over:
            rs.forced_severity[rid] = over["severity"]
        for pname, pval in (over.get("params") or {}).items():
            if pname not in rule.params:
                import difflib

                close = difflib.get_close_matches(pname, list(rule.params), n=1)
                raise RuleError(f"{where}: rules.{rid}.params.{pname}: rule {rid!r} has no such parameter"
                                + (f"; did you mean {close[0]!r}?" if close else ""))
            default = rule.params[pname].default
            if isinstance(default, (int, float)) and not isinstance(default, bool):
                if not isinstance(pval, (int, float)) or isinstance(pval, bool):
                    raise RuleError(f"{where}: rules.{rid}.params.{pname}: expected a number, got {_short(pval)}")
                if not math.isfinite(pval):  # a NaN threshold never compares true; inf always/never does
                    raise RuleError(f"{where}: rules.{rid}.params.{pname}: expected a finite number, got {pval}")
            elif type(pval) is not type(default):
                raise RuleError(f"{where}: rules.{rid}.params.{pname}: expected {type(default).__name__}, got {_short(pval)}")
            rs.param_values.setdefault(rid, {})[pname] = pval
    return rs


def default_ruleset(rule_dirs=(), config_path: Path | None = None, use_config: bool = True) -> RuleSet:
    path = config_path if config_path is not None else (find_config() if use_config else None)
    return load_rules(rule_dirs, load_config(path))
