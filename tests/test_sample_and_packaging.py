"""The bundled sample is what its scenario produces, and the wheel carries it."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from nsysdoc.cli import sample_path
from nsysdoc.testing.scenarios import sample_training

ROOT = Path(__file__).resolve().parent.parent


def dump(path) -> list[str]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return list(con.iterdump())
    finally:
        con.close()


def test_bundled_sample_matches_its_scenario(tmp_path):
    fresh = sample_training().write(tmp_path / "fresh.sqlite")
    assert dump(sample_path()) == dump(fresh), "run: python fixtures/build.py --sample"


def test_sample_is_small():
    assert 100_000 < sample_path().stat().st_size < 1_000_000


@pytest.mark.slow
def test_wheel_contains_data_and_installs(tmp_path):
    wheel_dir = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                    str(wheel_dir), str(ROOT)], check=True, timeout=300)
    (whl,) = wheel_dir.glob("nsysdoc-*.whl")
    names = zipfile.ZipFile(whl).namelist()
    assert "nsysdoc/sample/sample_training.sqlite" in names
    rule_files = {Path(p).name for p in (ROOT / "rules").glob("*.yaml")}
    assert rule_files and rule_files <= {Path(n).name for n in names if n.startswith("nsysdoc/builtin_rules/")}
    packages = {str(p.parent.relative_to(ROOT)).replace("/", ".") for p in (ROOT / "nsysdoc").rglob("__init__.py")}
    assert packages <= {str(Path(n).parent).replace("/", ".") for n in names}, "a package is missing from pyproject"
    assert not any(n.startswith("tests/") for n in names)
    # install the wheel (not editable) in a fresh venv whose dependencies come from this
    # environment's installed packages, whatever this environment is (system Python or a venv):
    # a .pth file adds this interpreter's site-packages after the venv's own (its own .pth files,
    # e.g. an editable nsysdoc, are not processed), so the wheel's copy of nsysdoc is the one found
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=False, with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    own = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    here = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(own) / "_outer_env.pth").write_text("\n".join(sorted(here)) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--ignore-installed", "-q", str(whl)],
                   check=True, timeout=300)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([str(env_dir / "bin" / "nsysdoc"), "report", "--sample", "--no-cache", "--format", "json"],
                          cwd=elsewhere,
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert '"step_count": 12' in proc.stdout
    assert '"rule": "data-starvation"' in proc.stdout  # built-in rules found in the installed package
    where = subprocess.run([str(py), "-c", "import nsysdoc; print(nsysdoc.__file__)"], cwd=elsewhere,
                           capture_output=True, text=True, env=env, check=True).stdout
    assert str(env_dir) in where, "the installed copy, not the source tree, must be imported"
