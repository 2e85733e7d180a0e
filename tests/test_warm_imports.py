"""A JSON report imports only what it uses (issue 50, warm fixed costs: at 2 M kernels a cached
report takes about 1.5 s, of which imports are a quarter).

Run as ``python -m nsysdoc report SAMPLE -f json --no-config`` in a fresh process, the report
must not import:

* ``jinja2`` (the HTML page's templates) nor ``pandas`` (tests/test_no_pandas.py says why);
* ``tomllib``: it reads a ``pyproject.toml``, and ``--no-config`` reads none;
* ``nsysdoc.nsys`` (the ``nsys`` command's runner and exporter): the input is already SQLite.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from nsysdoc.cli import sample_path  # noqa: E402

NOT_IMPORTED = ("jinja2", "pandas", "tomllib", "nsysdoc.nsys")

PROBE = """
import runpy, sys
sys.argv = ["nsysdoc"] + sys.argv[1:]
try:
    runpy.run_module("nsysdoc", run_name="__main__")
except SystemExit as exc:
    code = exc.code
print("IMPORTED " + " ".join(sorted(m for m in sys.modules if m in {names!r} or m.split(".")[0] in {names!r})),
      file=sys.stderr)
sys.exit(code)
"""


def test_a_json_report_of_an_export_imports_neither_templates_nor_toml_nor_nsys_runner(tmp_path):
    out = tmp_path / "r.json"
    r = subprocess.run([sys.executable, "-c", PROBE.format(names=NOT_IMPORTED), "report", str(sample_path()), "-f",
                        "json", "-o", str(out), "--no-config", "--no-cache", "-q"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode in (0, 1), r.stderr
    assert out.stat().st_size > 0
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("IMPORTED"), r.stderr
    assert last.split()[1:] == [], last
