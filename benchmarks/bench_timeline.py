"""Page size of the HTML report for big captures: the interactive timeline's data is capped.

    python benchmarks/bench_timeline.py --kernels 2000000 [--shape steps] [--out benchmarks/out]

Generates (once, cached by size and shape in ``--out``) the export of ``bench_report.py`` and
writes the HTML page; prints the page's bytes, the bytes of the timeline's embedded data
(``<script id="tl-data">``, capped at ``nsysdoc.metrics.timeline.DETAIL_MAX_BYTES``), the spans it
holds and whether any lane had to be merged. docs/report.md ("Timeline") quotes its numbers.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_report import generate  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", type=int, default=2_000_000)
    ap.add_argument("--shape", default="steps", choices=["busy", "launch-bound", "steps", "steps-ops"])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "out"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    src = out / f"timeline-{args.shape}-{args.kernels}.sqlite"
    if not src.exists():
        t = time.perf_counter()
        generate(src, args.kernels, shape=args.shape)
        print(f"generated {src} in {time.perf_counter() - t:.1f} s")
    from nsysdoc.analysis import analyze
    from nsysdoc.metrics.timeline import DETAIL_MAX_BYTES
    from nsysdoc.views import render_html
    from nsysdoc.trace import load_trace

    t = time.perf_counter()
    a = analyze(load_trace(src, cache=False))
    t_an = time.perf_counter() - t
    t = time.perf_counter()
    html = render_html(a)
    t_html = time.perf_counter() - t
    raw = html.split('<script type="application/json" id="tl-data">', 1)[1].split("</script>", 1)[0]
    data = json.loads(raw)
    merged = any("c" in ln for w in data["windows"] for ln in w["lanes"])
    print(json.dumps({"kernels": args.kernels, "shape": args.shape, "page_bytes": len(html.encode()),
                      "timeline_data_bytes": len(raw.encode()), "cap_bytes": DETAIL_MAX_BYTES,
                      "spans": data["spans"], "windows": [w["title"] for w in data["windows"]],
                      "merged": merged, "analyze_s": round(t_an, 1), "render_s": round(t_html, 2)}, indent=1))


if __name__ == "__main__":
    main()
