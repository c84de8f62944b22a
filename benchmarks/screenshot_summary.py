"""Screenshot of summary.html in headless Chromium, to see the charts as a reader does.

    python benchmarks/screenshot_summary.py RESULT.json|summary.html [--png OUT.png]

Given a Rally JSON report, renders summary.html next to the PNG first. Uses
Debian's chromium with the flags of tests/fixtures/chromium.py, and prints
any console message Chromium logged (there should be none).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
import chromium  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from _machine import describe  # noqa: E402

from rally_keystone_bench.driver import reports  # noqa: E402
from rally_keystone_bench.report import render  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", help="a Rally JSON report or a summary.html")
    ap.add_argument("--png", default="reports/summary.png")
    ap.add_argument("--width", type=int, default=1200)
    ap.add_argument("--height", type=int, default=2400)
    args = ap.parse_args()
    png = Path(args.png).resolve()
    page = Path(args.source)
    if page.suffix != ".html":
        page = render.write_summary(reports.load_any(args.source), png.parent, args.source).html
    chromium.screenshot(page, png, args.width, args.height)
    console = chromium.render(page).console
    print(f"machine: {describe()}")
    print(f"page: {page}")
    print(f"screenshot: {png} ({png.stat().st_size / 1024:.0f} KiB, {args.width}x{args.height})")
    print(f"console messages: {len(console)}")
    for line in console:
        print(f"  {line}")
    return 1 if console else 0


if __name__ == "__main__":
    sys.exit(main())
