"""Rule engine: safe expressions, load-time errors with file:line, overrides, team rules, CLI."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from nsysdoc.errors import RuleError
from nsysdoc.rules import apply_rules, load_config, load_rules
from nsysdoc.rules.docs import explain
from nsysdoc.rules.evaluate import builtin_rules_dir
from nsysdoc.rules.expr import ExprError, compile_expr

from .conftest import analyze_path, run_cli

ROOT = Path(__file__).resolve().parent.parent


# --- expressions ----------------------------------------------------------------------------
def test_expression_arithmetic_and_logic():
    e = compile_expr("a * 2 + 1 >= b and not c or d in [1, 2]", {"a", "b", "c", "d"})
    assert e.evaluate({"a": 3, "b": 7, "c": False, "d": 9}) is True
    assert e.evaluate({"a": 1, "b": 7, "c": False, "d": 2}) is True
    assert e.evaluate({"a": 1, "b": 7, "c": False, "d": 3}) is False


def test_null_propagates_and_is_false():
    e = compile_expr("x > 1", {"x"})
    assert e.evaluate({"x": None}) is None
    assert compile_expr("coalesce(x, 5) > 1", {"x"}).evaluate({"x": None}) is True
    assert compile_expr("1 / x", {"x"}).evaluate({"x": 0}) is None


@pytest.mark.parametrize("src", [
    "__import__('os').system('echo pwned')",
    "x.__class__",
    "open('/etc/passwd')",
    "[c for c in x]",
    "lambda: 1",
    "x[0]",
    "eval('1')",
    "(1).real",
])
def test_dangerous_expressions_are_rejected(src):
    with pytest.raises(ExprError):
        compile_expr(src, {"x"})


def test_unknown_name_suggests():
    with pytest.raises(ExprError) as err:
        compile_expr("idle_sink_pct > 5", {"idle_sync_pct", "window_ms"})
    assert "did you mean 'idle_sync_pct'" in str(err.value)


# --- rule files -----------------------------------------------------------------------------
GOOD = """\
id: slow-step
title: Steps are slower than the team budget
category: gpu-utilization
params:
  budget_ms: {default: 10, unit: ms, doc: Step time budget.}
when: step_time_ms_median > budget_ms
severity: warning
impact_ms: (step_time_ms_median - budget_ms) * step_count
message: Median step {step_time_ms_median:.1f} ms is over the {budget_ms} ms budget.
verify: Compare with the previous capture.
fix: Find the regression.
"""


def write_rule(folder: Path, text: str, name: str = "slow-step") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / f"{name}.yaml"
    p.write_text(textwrap.dedent(text))
    return p


def test_team_rule_loads_and_fires(tmp_path, build):
    write_rule(tmp_path / "team", GOOD)
    rs = load_rules([tmp_path / "team"])
    result = apply_rules(analyze_path(build("healthy_training")), rs)
    (f,) = [f for f in result["findings"] if f["rule"] == "slow-step"]
    assert f["severity"] == "warning" and "budget" in f["message"]
    assert f["source"].endswith("slow-step.yaml")


@pytest.mark.parametrize("mutation, needle", [
    (("when: step_time_ms_median > budget_ms", "when: step_time_ms_mediam > budget_ms"), ":6: when: unknown name 'step_time_ms_mediam'"),
    (("category: gpu-utilization", "category: gpu"), ":3: category: 'gpu' is not one of"),
    (("severity: warning", "severity: fatal"), ":7: severity: must be one of info, warning, critical, by-impact or a mapping"),
    (("verify: Compare", "verfy: Compare"), "unknown field 'verfy'; did you mean 'verify'"),
    (("message: Median step {step_time_ms_median:.1f}", "message: Median step {step_time_ms_median.real}"), ":9: message:"),
    (("when: step_time_ms_median > budget_ms", "when: __import__('os').getcwd()"), ":6: when:"),
    (("title: Steps", "title: [Steps"), "invalid YAML"),
])
def test_bad_rules_name_file_line_and_field(tmp_path, mutation, needle):
    p = write_rule(tmp_path / "bad", GOOD.replace(*mutation))
    with pytest.raises(RuleError) as err:
        load_rules([tmp_path / "bad"])
    assert str(p) in err.value.message and needle in err.value.message, err.value.message


def test_file_name_must_match_id(tmp_path):
    write_rule(tmp_path / "t", GOOD, name="other-name")
    with pytest.raises(RuleError, match="must be named slow-step.yaml"):
        load_rules([tmp_path / "t"])


def test_team_rule_replaces_builtin_and_says_so(tmp_path, build):
    text = (builtin_rules_dir() / "host-sync.yaml").read_text().replace("default: 5\n", "default: 0.001\n", 1)
    write_rule(tmp_path / "team", text, name="host-sync")
    rs = load_rules([tmp_path / "team"])
    rule = rs.by_id("host-sync")
    assert rule.replaces_builtin and rule.source.endswith("host-sync.yaml")
    result = apply_rules(analyze_path(build("healthy_training")), rs)
    status = next(s for s in result["rules"] if s["rule"] == "host-sync")
    assert status["replaces_builtin"] is True


def test_config_overrides_params_severity_and_disables(tmp_path, build):
    cfg = tmp_path / "nsysdoc.yaml"
    cfg.write_text(textwrap.dedent("""\
        rules:
          data-starvation:
            params: {min_idle_pct: 90}
          host-sync:
            severity: info
            params: {min_idle_pct: 0}
          capture-quality:
            enabled: false
        """))
    rs = load_rules([], load_config(cfg))
    result = apply_rules(analyze_path(build("dataloader_starvation")), rs)
    by_rule = {f["rule"]: f for f in result["findings"]}
    assert "data-starvation" not in by_rule
    assert by_rule["host-sync"]["severity"] == "info"
    assert next(s for s in result["rules"] if s["rule"] == "capture-quality")["status"] == "disabled"


def test_pyproject_config(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.nsysdoc]\nfail_on = "warning"\n[tool.nsysdoc.rules.host-sync]\nenabled = false\n')
    cfg = load_config(tmp_path / "pyproject.toml")
    assert cfg.fail_on == "warning" and cfg.rules["host-sync"]["enabled"] is False


@pytest.mark.parametrize("text, needle", [
    ("rules:\n  host-synk: {enabled: false}\n", "did you mean 'host-sync'"),
    ("rules:\n  host-sync: {params: {min_idle: 3}}\n", "no such parameter; did you mean 'min_idle_pct'"),
    ("rules:\n  host-sync: {params: {min_idle_pct: lots}}\n", "expected a number"),
    ("rulez: {}\n", "unknown field 'rulez'"),
])
def test_bad_config_is_a_clear_error(tmp_path, text, needle):
    cfg = tmp_path / "nsysdoc.yaml"
    cfg.write_text(text)
    with pytest.raises(RuleError) as err:
        load_rules([], load_config(cfg))
    assert needle in err.value.message


def test_missing_data_is_skipped_not_passed(build):
    result = apply_rules(analyze_path(build("no_step_markers")), load_rules())
    status = {s["rule"]: s for s in result["rules"]}
    # pseudo-busy needs GPU metrics and steps: it says what is missing instead of "passed"
    assert status["pseudo-busy"]["status"] == "skipped"
    assert "step markers" in status["pseudo-busy"]["reason"] or "GPU metrics" in status["pseudo-busy"]["reason"]
    # d2h-transfer no longer needs steps (issue 28): judged on the window
    assert status["d2h-transfer"]["status"] == "passed"


def test_findings_ranked_by_impact(build):
    result = apply_rules(analyze_path(build("sample_training")), load_rules())
    impacts = [f["impact_ms"] for f in result["findings"] if f["impact_ms"] is not None]
    assert impacts == sorted(impacts, reverse=True)
    top = result["findings"][0]
    assert top["rule"] == "data-starvation" and top["time_ranges"] and top["evidence"]["rows"]


def test_dominant_kernel_verify_has_exact_ncu_command(build):
    result = apply_rules(analyze_path(build("dominant_kernel")), load_rules())
    f = next(f for f in result["findings"] if f["rule"] == "dominant-kernel")
    assert "ncu --kernel-name-base function --kernel-name 'regex:^volta_sgemm_128x64_nn$'" in f["verify"]
    assert "--launch-skip 2 --launch-count 1" in f["verify"]


# --- the seed articles' two case studies ------------------------------------------------------
def test_seed_case_1_names_python_augmentation_and_tiny_kernels(build):
    result = apply_rules(analyze_path(build("seed_case_augmentation")), load_rules())
    rules = [f["rule"] for f in result["findings"]]
    assert rules[0] == "launch-bound"  # the CPU (Python augmentation) leaves periodic holes
    assert "between ordinary launches" in result["findings"][0]["message"]


def test_seed_case_2_names_input_wait_logits_copy_and_bookkeeping_after_item(build):
    result = apply_rules(analyze_path(build("seed_case_large_model")), load_rules())
    rules = [f["rule"] for f in result["findings"]]
    assert rules[0] == "data-starvation"
    # each .item() is followed by 4 ms of Python bookkeeping with no CUDA call: host work, not the
    # sync's cost (issue 46: a host sync costs the idle while the host is blocked plus the refill
    # when it goes straight back to launching); the syncs themselves idle the GPU 2 us each
    assert {"data-starvation", "d2h-transfer", "host-bound"} <= set(rules)
    assert "host-sync" not in rules


def test_healthy_capture_has_no_findings(build):
    result = apply_rules(analyze_path(build("healthy_training")), load_rules())
    assert result["findings"] == []


# --- docs and CLI ---------------------------------------------------------------------------
def test_rule_docs_are_current():
    rs = load_rules()
    for r in rs.rules:
        page = ROOT / "docs" / "rules" / f"{r.id}.md"
        assert page.exists(), f"missing {page}: run nsysdoc rules docs docs/rules"
        assert page.read_text() == explain(r), f"{page} is stale: run nsysdoc rules docs docs/rules"


def run(*args, cwd=ROOT):
    return run_cli(*args, cwd=cwd)


@pytest.mark.slow  # issue 50: report commands in processes (3.9 s of CPU); .ci/run runs it
def test_fail_on_sets_exit_code(build):
    p = build("sample_training")
    j = ("--format", "json", "--no-config")
    assert run("report", p, *j, "--fail-on", "critical").returncode == 1
    assert run("report", p, *j, "--fail-on", "never").returncode == 0
    assert run("report", p, *j).returncode == 0
    healthy = build("healthy_training")
    assert run("report", healthy, *j, "--fail-on", "info").returncode == 0


def test_cli_bad_rule_folder_is_exit_2(tmp_path, build):
    write_rule(tmp_path / "bad", GOOD.replace("severity: warning", "severity: fatal"))
    proc = run("report", build("healthy_training"), "--format", "json", "--rules", tmp_path / "bad")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "slow-step.yaml:7: severity" in proc.stderr


@pytest.mark.slow  # issue 50: rules commands in processes (2.4 s of CPU); .ci/run runs it
def test_cli_rules_commands(tmp_path):
    assert "host-sync" in run("rules", "list").stdout
    assert "## How to verify" in run("rules", "explain", "host-sync").stdout
    bad = run("rules", "explain", "host-synk")
    assert bad.returncode == 2 and "did you mean 'host-sync'" in bad.stderr
    assert json.loads(run("rules", "schema").stdout)["properties"]["id"]["pattern"]
    assert run("rules", "check", ROOT / "rules").stdout.strip() == "25 rule(s) OK"  # issue 47: memory-growth, memory-near-capacity, zero-grad-repeated, dynamic-shapes, cudnn-benchmark


@pytest.mark.slow  # issue 50: a rules command in a process (1.4 s of CPU); .ci/run runs it
def test_cli_rules_test_on_a_team_folder(tmp_path):
    write_rule(tmp_path / "team", GOOD)
    (tmp_path / "team" / "slow-step.cases.yaml").write_text(textwrap.dedent("""\
        rule: slow-step
        cases:
          - name: fires_on_slow_steps
            scenario: dataloader_starvation
            expect: {fires: true}
          - name: quiet_under_a_generous_budget
            scenario: dataloader_starvation
            params: {budget_ms: 100000}
            expect: {fires: false}
          - name: deliberately_wrong
            scenario: healthy_training
            params: {budget_ms: 100000}
            expect: {fires: true}
        """))
    proc = run("rules", "test", tmp_path / "team")
    assert proc.returncode == 1
    assert "2 passed, 1 failed" in proc.stdout
    assert "FAIL slow-step::deliberately_wrong" in proc.stdout
