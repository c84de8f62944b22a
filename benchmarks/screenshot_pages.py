"""Screenshots of the summary, compare and gate pages for the documentation.

    python benchmarks/screenshot_pages.py [--out doc/source/_static/screenshots]

The pages are the ones tests/unit/test_golden_outputs.py checks byte for
byte against the code (tests/fixtures/golden: the recorded token-suite run,
a compare of two halves of it, the gate on seeded paired samples), and the
summary of a recorded profiled run (tests/fixtures/profiled.py: a flame graph
per workload, rendered here; too large to keep as a golden file), so a
screenshot shows what today's code renders. Run it again after a change to
a page, and the test's golden files are recorded again first
(KEYSTONE_BENCH_RECORD_GOLDEN=1). Headless Chromium, the flags of
tests/fixtures/chromium.py; prints any console message (there should be none).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
import chromium  # noqa: E402
import profiled  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from _machine import describe  # noqa: E402

GOLDEN = ROOT / "tests" / "fixtures" / "golden"
PAGES = {
    "summary": GOLDEN / "run.summary.html",
    "summary-flames": None,  # rendered below from tests/fixtures/profiled-run
    "compare": GOLDEN / "compare-slower.compare.html",
    "gate": GOLDEN / "gate-slower.gate.html",
}
# Pages shown from one of their elements on: the profiled run's summary from its first
# workload's flame graph (headless Chromium's screenshot ignores a #fragment).
ANCHORS = {"summary-flames": ('<h3 id="flame-0"', '<h2 id="workload-1"')}


def from_anchor(page: Path, start: str, end: str, out: Path) -> Path:
    """PAGE's head and title, then its markup from START to END: what a reader scrolled to."""
    html = page.read_text()
    body = html.index("<body>") + len("<body>")
    h1 = html[body : html.index("</h1>") + len("</h1>")]
    part = html[html.index(start) : html.index(end)]
    out.write_text(html[:body] + h1 + part + "</body></html>\n")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "doc" / "source" / "_static" / "screenshots"))
    ap.add_argument("--width", type=int, default=1200)
    ap.add_argument("--height", type=int, default=1500)
    args = ap.parse_args()
    out = Path(args.out)
    print(f"machine: {describe()}")
    failed = 0
    with tempfile.TemporaryDirectory(prefix="kb-pages-") as tmp:
        for name, page in PAGES.items():
            page = page or profiled.summary(Path(tmp))
            if name in ANCHORS:
                page = from_anchor(page, *ANCHORS[name], Path(tmp) / f"{name}.html")
            failed += _shoot(name, page, out, args.width, args.height)
    return 1 if failed else 0


def _shoot(name: str, page: Path, out: Path, width: int, height: int) -> bool:
    """Screenshot PAGE as OUT/NAME.png; print its size and console (True: a message)."""
    png = chromium.screenshot(page, out / f"{name}.png", width, height)
    console = chromium.render(page).console
    print(f"{png}: {png.stat().st_size} bytes, {len(console)} console message(s)")
    for line in console:
        print(f"    {line}")
    return bool(console)


if __name__ == "__main__":
    sys.exit(main())
