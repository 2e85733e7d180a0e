"""CI runs README.md's two commands as a user would: the extraction .ci/run relies on."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _extractor():
    spec = importlib.util.spec_from_file_location("readme_commands", ROOT / ".ci" / "readme_commands.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.readme_commands


def test_readme_starts_with_the_two_commands_ci_runs():
    cmds = _extractor()((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(cmds) == 2
    install_sample, install_tests = cmds
    assert install_sample.startswith("pip install") and "nsysdoc report --sample" in install_sample
    assert install_tests.startswith("pip install") and "pytest" in install_tests


def test_ci_runs_the_extracted_commands_in_a_fresh_venv():
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "python .ci/readme_commands.py README.md" in run   # never a copy of the commands
    assert "python3 -m venv" in run and "activate" in run
    assert "pip install" not in run.replace("python -m pip install --quiet --upgrade pip", "")


def test_extraction_joins_continuations_and_drops_comments():
    text = "# x\n\n```sh\n# a comment\npip install . \\\n  && nsysdoc report --sample   # run it\n```\n" \
           "text\n```bash\npip install '.[test]' && python3 -m pytest\n```\n```sh\nignored\n```\n"
    assert _extractor()(text) == ["pip install . && nsysdoc report --sample",
                                  "pip install '.[test]' && python3 -m pytest"]


# --- issue 50: README runs the fast tests, .ci/run the rest, every test exactly once -------------
def _ci_module():
    spec = importlib.util.spec_from_file_location("readme_commands", ROOT / ".ci" / "readme_commands.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_rest_is_the_complement_of_the_readme_s_marker_expression():
    mod = _ci_module()
    assert mod.marker_expression("pip install '.[test]' && python3 -m pytest -m \"not slow and not real\"") \
        == "not slow and not real"
    assert mod.marker_expression("python3 -m pytest -q -m'not slow'") == "not slow"
    assert mod.marker_expression("pip install '.[test]' && python3 -m pytest") is None
    assert mod.marker_expression("pip install '.[test]' -m x") is None          # not pytest's option
    assert mod.rest_expression("python3 -m pytest -m 'not slow and not real'") == "not (not slow and not real)"
    assert mod.rest_expression("python3 -m pytest") is None                    # README runs every test


def test_ci_runs_the_rest_after_the_readme_s_commands():
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'rest="$(python .ci/readme_commands.py --rest README.md)"' in run   # derived, never copied
    assert run.index("--rest README.md") > run.index('for cmd in "${commands[@]}"')
    assert 'python -m pytest -n auto --dist loadfile -m "$rest"' in run
    readme_tests = _extractor()((ROOT / "README.md").read_text(encoding="utf-8"))[1]
    assert _ci_module().marker_expression(readme_tests), "README's command runs the fast tests (-m EXPR)"


def _collected(*args) -> list[str]:
    """Node ids ``pytest --collect-only -q`` lists for ``args`` in a fresh process (this checkout)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert run.returncode in (0, 5), run.stdout[-2000:] + run.stderr[-2000:]
    return [ln for ln in run.stdout.splitlines() if "::" in ln and not ln.startswith(" ")]


@pytest.mark.slow
def test_readme_and_ci_together_run_every_test_exactly_once():
    """README's command (-m EXPR) and .ci/run's rest (-m "not (EXPR)") collect disjoint sets whose
    union is the whole suite: nothing is dropped by the split, nothing runs twice."""
    mod = _ci_module()
    readme_tests = _extractor()((ROOT / "README.md").read_text(encoding="utf-8"))[1]
    fast = _collected("-m", mod.marker_expression(readme_tests))
    rest = _collected("-m", mod.rest_expression(readme_tests))
    every = _collected()
    assert len(every) > 4000 and len(set(every)) == len(every)
    assert not set(fast) & set(rest)
    assert sorted(fast + rest) == sorted(every)
    assert len(fast) > len(rest) > 100   # both runs do real work
