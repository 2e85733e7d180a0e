"""Golden outputs: the full JSON result and the HTML page of the bundled sample and of every
fixture scenario, as the implementation produced them when the file was last written.

Speed work (issue 13) must not change any result: ``tests/test_golden_outputs.py`` compares the
current JSON key by key (floats to 1e-9 relative, everything else exactly) and the HTML byte for
byte (by its sha256) against ``tests/golden/*.json.gz``.

When a change of results is intended (a new metric, a reworded message), rewrite the files and
review the diff of what changed:

    python -m tests.golden --update             # all
    python -m tests.golden --update sync_storm  # one
    python -m tests.golden --diff sync_storm    # show what differs, without writing
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import sys
import tempfile
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden"
SAMPLE = "bundled_sample"


def _extra():
    """Scenarios at sizes the defaults do not reach: more steps than the output keeps as records."""
    from nsysdoc.testing.scenarios import steady_training

    return {"steady_training_2100_steps": lambda: steady_training(steps=2100, jitter_pct=5.0, seed=1)}


def names() -> list[str]:
    from nsysdoc.testing.scenarios import SCENARIOS

    return [SAMPLE, *sorted(SCENARIOS), *_extra()]


def _capture_path(name: str, folder: Path) -> Path:
    if name == SAMPLE:
        from nsysdoc.cli import sample_path

        return sample_path()
    from nsysdoc.testing.scenarios import SCENARIOS

    make = SCENARIOS.get(name) or _extra()[name]
    return make().write(folder / f"{name}.sqlite")


def outputs(name: str) -> dict:
    """What ``nsysdoc report`` writes for ``name`` (built-in rules, no project config, no cache):
    the JSON result and the HTML page's sha256, with the capture's path replaced by its name."""
    from nsysdoc.analysis import analyze
    from nsysdoc.views import render_html
    from nsysdoc.views.render import capped_result
    from nsysdoc.rules import apply_rules, load_rules
    from nsysdoc.trace import load_trace

    with tempfile.TemporaryDirectory() as tmp:
        path = _capture_path(name, Path(tmp))
        analysis = analyze(load_trace(path, cache=False))
        apply_rules(analysis.to_dict(), load_rules())
        result = json.loads(json.dumps(capped_result(analysis.to_dict()), allow_nan=False))
        html = render_html(analysis)
    full = str(path)
    result["source"]["path"] = path.name
    html = html.replace(full, path.name)
    return {"json": result, "html_sha256": hashlib.sha256(html.encode()).hexdigest(), "html_bytes": len(html)}


def load(name: str) -> dict:
    with gzip.open(GOLDEN / f"{name}.json.gz", "rt", encoding="utf-8") as f:
        return json.load(f)


def write(name: str, out: dict) -> Path:
    GOLDEN.mkdir(exist_ok=True)
    path = GOLDEN / f"{name}.json.gz"
    data = json.dumps(out, indent=1, sort_keys=True).encode()
    with open(path, "wb") as f:  # mtime 0: the same content gives the same bytes
        with gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as gz:
            gz.write(data)
    return path


def differences(old, new, path: str = "$", rel: float = 1e-9, limit: int = 20) -> list[str]:
    """Where ``new`` differs from ``old``: the same JSON types everywhere; floats within ``rel``
    (relative) agree; everything else must be equal."""
    out: list[str] = []

    def walk(a, b, p):
        if len(out) >= limit:
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b)):
                if k not in a:
                    out.append(f"{p}.{k}: new key")
                elif k not in b:
                    out.append(f"{p}.{k}: missing")
                else:
                    walk(a[k], b[k], f"{p}.{k}")
        elif isinstance(a, list) and isinstance(b, list):
            if len(a) != len(b):
                out.append(f"{p}: length {len(a)} -> {len(b)}")
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{p}[{i}]")
        elif type(a) is not type(b):  # 1 and 1.0, True and 1 print differently in JSON
            out.append(f"{p}: {type(a).__name__} {str(a)[:40]!r} -> {type(b).__name__} {str(b)[:40]!r}")
        elif isinstance(a, float):
            if not (a == b or math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)):
                out.append(f"{p}: {a!r} -> {b!r}")
        elif a != b:
            out.append(f"{p}: {str(a)[:80]!r} -> {str(b)[:80]!r}")

    walk(old, new, path)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="scenarios (default: all)")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--update", action="store_true", help="rewrite the golden files")
    g.add_argument("--diff", action="store_true", help="print what differs from the golden files")
    args = ap.parse_args(argv)
    bad = 0
    for name in args.names or names():
        out = outputs(name)
        if args.update:
            print(f"wrote {write(name, out)}")
            continue
        if not (GOLDEN / f"{name}.json.gz").exists():
            bad += 1
            print(f"{name}: no golden file (a new scenario: --update {name} writes it)")
            continue
        old = load(name)
        diffs = differences(old["json"], out["json"])
        if old["html_sha256"] != out["html_sha256"]:
            diffs.append(f"html: {old['html_bytes']} bytes -> {out['html_bytes']} bytes, content differs")
        bad += bool(diffs)
        print(f"{name}: {'same' if not diffs else ''}")
        for d in diffs:
            print(f"  {d}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
