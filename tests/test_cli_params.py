"""The command line converts option values without pydantic (nsysdoc/cli_params.py), exactly as
typer's own adapters would: same values, same types, same error messages."""
from __future__ import annotations

import subprocess
import sys
from enum import Enum
from pathlib import Path

import pytest
import typer
import typer.core as tcore

# written against typer 0.29's internals (its vendored click, its coercion layer); with another
# typer cli_params installs nothing and these tests say so instead of failing to import
pytest.importorskip("typer._coercion", reason="typer without the pydantic coercion layer: cli_params is inactive")
from typer._click.core import Context  # noqa: E402  typer 0.29 vendors its click
from typer._click.exceptions import ClickException  # noqa: E402

from nsysdoc import cli, cli_params

from .conftest import ROOT


def _commands(group, prefix=()):
    for name, sub in sorted(group.commands.items()):
        if hasattr(sub, "commands"):  # a group (nsysdoc rules ...)
            yield from _commands(sub, prefix + (name,))
        else:
            yield " ".join(prefix + (name,)), sub


COMMANDS = list(_commands(typer.main.get_command(cli.app)))
PARAMS = [(name, cmd, p) for name, cmd in COMMANDS for p in cmd.params]


def _samples(ann, tmp: Path) -> list:
    ann = cli_params._unoptional(ann)
    if ann is bool:
        return [True, False]
    if ann is str:
        return ["x", "-", "", "a b", "ü\u2028", "--x"]
    if ann is int:
        return ["3", "-1", "0", "+3", "3.0", " 3", "3_0", "x", "", "99999999999999999999", 4]
    if ann is float:
        return ["1.5", "3", "-0.25", "1e3", "nan", "inf", "x", ".5", "", 2, 2.5]
    if isinstance(ann, type) and issubclass(ann, Enum):
        vals = [m.value for m in ann]
        return vals + [v.upper() for v in vals] + ["nope", "", list(ann)[0]]
    if isinstance(ann, type) and issubclass(ann, Path):
        f = tmp / "a file.sqlite"
        f.write_text("x")
        return ["run.sqlite", "-", "", "/nonexistent/x", str(tmp), str(f), "a\x00b", Path("p")]
    raise AssertionError(f"no samples for {ann!r}: add them (and check cli_params handles it)")


def _outcome(runtime, value, param, ctx):
    try:
        r = runtime.coerce(value, param=param, ctx=ctx)
    except ClickException as exc:
        return ("error", type(exc).__name__, exc.format_message())
    # repr: nan == nan is False, and the repr also tells PosixPath from str
    return ("ok", type(r).__name__, repr(r))


def test_every_option_of_every_command_takes_the_light_path():
    assert cli_params.install()
    for name, _cmd, p in PARAMS:
        rt = tcore.build_runtime_param(p.type_descriptor)
        assert type(rt).__name__ == "LightParam", (name, p.name, p.type_descriptor.annotation)


@pytest.mark.parametrize("name,cmd,param", PARAMS, ids=[f"{n}:{p.name}" for n, _, p in PARAMS])
def test_values_and_errors_are_typer_s_own(name, cmd, param, tmp_path):
    assert cli_params.install()
    d = param.type_descriptor
    light = tcore.build_runtime_param(d)
    original = tcore.build_runtime_param.original(d)
    ctx = Context(cmd)
    ann = cli_params._unoptional(d.annotation)
    many = getattr(ann, "__origin__", None) is list
    leaf = ann.__args__[0] if many else ann
    values = _samples(leaf, tmp_path)
    if many:
        values = [(v,) for v in values] + [tuple(values[:3]), ()]
    values.append(param.default)
    for v in values:
        assert _outcome(light, v, param, ctx) == _outcome(original, v, param, ctx), (name, param.name, v)


@pytest.mark.slow  # issue 50: a report in a fresh process (0.9 s of CPU); .ci/run runs it
def test_a_report_does_not_import_pydantic(tmp_path):
    code = ("import sys, runpy\n"
            "sys.argv = ['nsysdoc', 'report', sys.argv[1], '-q', '-f', 'json', '--no-config', '--cache-dir', sys.argv[2],"
            " '-o', sys.argv[3]]\n"
            "try:\n    runpy.run_module('nsysdoc', run_name='__main__')\n"
            "except SystemExit as e:\n    code = e.code\n"
            "print(code, 'pydantic' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / "nsysdoc" / "sample" / "sample_training.sqlite"), str(tmp_path / "c"),
                          str(tmp_path / "r.json")], capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.split() == ["0", "False"], out.stderr
    assert (tmp_path / "r.json").stat().st_size > 1000
