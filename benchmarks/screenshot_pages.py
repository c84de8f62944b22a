"""Screenshots of the summary, compare and gate pages for the documentation.

    python benchmarks/screenshot_pages.py [--out doc/source/_static/screenshots]

The pages are the ones tests/unit/test_golden_outputs.py checks byte for
byte against the code (tests/fixtures/golden: the recorded token-suite run,
a compare of two halves of it, the gate on seeded paired samples), so a
screenshot shows what today's code renders. Run it again after a change to
a page, and the test's golden files are recorded again first
(KEYSTONE_BENCH_RECORD_GOLDEN=1). Headless Chromium, the flags of
tests/fixtures/chromium.py; prints any console message (there should be none).
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

GOLDEN = ROOT / "tests" / "fixtures" / "golden"
PAGES = {
    "summary": "run.summary.html",
    "compare": "compare-slower.compare.html",
    "gate": "gate-slower.gate.html",
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "doc" / "source" / "_static" / "screenshots"))
    ap.add_argument("--width", type=int, default=1200)
    ap.add_argument("--height", type=int, default=1500)
    args = ap.parse_args()
    out = Path(args.out)
    print(f"machine: {describe()}")
    failed = 0
    for name, page in PAGES.items():
        png = chromium.screenshot(GOLDEN / page, out / f"{name}.png", args.width, args.height)
        console = chromium.render(GOLDEN / page).console
        print(f"{png}: {png.stat().st_size} bytes, {len(console)} console message(s)")
        for line in console:
            print(f"    {line}")
        failed += bool(console)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
