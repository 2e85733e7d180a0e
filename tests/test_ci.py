"""CI runs README.md's two commands as a user would: the extraction .ci/run relies on."""
from __future__ import annotations

import importlib.util
from pathlib import Path

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
