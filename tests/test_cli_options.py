"""The command line's shared options and its error path, each written once (issue 51)."""
from __future__ import annotations

import ast
from pathlib import Path

import nsysdoc.cli as cli

SOURCE = Path(cli.__file__).read_text(encoding="utf-8")
SHARED = ("--step-marker", "--no-cache", "--cache-dir", "--no-config", "--nsys", "--debug")


def test_shared_options_are_declared_once_and_reach_every_command():
    """No flag of SHARED is spelled out in report, diff or job (each takes its Annotated alias,
    declared once), yet all three take it."""
    tree = ast.parse(SOURCE)
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in ("report", "diff", "job")):
        text = ast.get_source_segment(SOURCE, fn)
        for flag in SHARED:
            assert f'"{flag}"' not in text, (fn.name, flag)
    from typer.testing import CliRunner

    for name in ("report", "diff", "job"):
        out = CliRunner().invoke(cli.app, [name, "--help"], env={"COLUMNS": "200"}).output
        for flag in SHARED:
            assert flag in out, (name, flag)
    assert SOURCE.count('"--config", help="Project config (default: nsysdoc.yaml or pyproject.toml, found upwards).') == 1


def test_no_command_catches_bad_input_itself():
    """Bad input ends a command in one place (``_one_line_errors``): no handler in a command that
    only prints the error and exits 2."""
    ladders = []
    for node in ast.walk(ast.parse(SOURCE)):
        if isinstance(node, ast.ExceptHandler) and ast.unparse(node.type or ast.Constant(None)) == "NsysdocError":
            body = [ast.unparse(s) for s in node.body]
            if body[:1] == ["_err(exc.message, exc.hint)"] and body[1:2] and body[1].startswith("raise typer.Exit(EXIT_ERROR)"):
                ladders.append(node.lineno)
    assert ladders == [_wrapper_line()], ladders


def _wrapper_line() -> int:
    tree = ast.parse(SOURCE)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_one_line_errors")
    return next(n.lineno for n in ast.walk(fn) if isinstance(n, ast.ExceptHandler))


def test_the_cli_reads_the_public_result():
    assert "._result" not in SOURCE


def test_report_result_is_the_result_the_json_is_written_from(tmp_path):
    """``Report.result`` (what the CLI reads) holds the same verdict and findings as ``to_dict()``."""
    import nsysdoc
    from nsysdoc.testing.scenarios import SCENARIOS

    path = SCENARIOS["sync_storm"]().write(tmp_path / "run.sqlite")
    rep = nsysdoc.report(str(path), no_config=True, cache=False)
    assert rep.result["verdict"]["sentence"] == rep.verdict == rep.to_dict()["verdict"]["sentence"]
    assert [f["rule"] for f in rep.result["findings"]] == [f.rule for f in rep.findings]
