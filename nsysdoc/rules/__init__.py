"""YAML bottleneck rules: format (``spec``), safe expressions (``expr``), engine and test harness."""
from .evaluate import RuleSet, apply_rules, builtin_rules_dir, default_ruleset, evaluate, find_config, load_config, load_rules
from .spec import RULE_SCHEMA, Rule, load_rule

__all__ = ["RuleSet", "Rule", "RULE_SCHEMA", "apply_rules", "builtin_rules_dir", "default_ruleset", "evaluate",
           "find_config", "load_config", "load_rule", "load_rules"]
