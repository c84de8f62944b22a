"""summary.html and the compare page in headless Chromium: no console error, drawn charts.

Skipped only when chromium is absent outside CI; in CI (CI set) it must run.
"""

import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from rally_keystone_bench import cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
sys.path.insert(0, str(FIXTURES))
import chromium  # noqa: E402
import synthetic  # noqa: E402
from _packages import require_package  # noqa: E402

pytestmark = pytest.mark.functional

if chromium.binary() is None:
    require_package("chromium", "chromium")


def _source(tmp: Path) -> str:
    """The committed report from a real run when there is one, else a synthetic one."""
    real = sorted(FIXTURES.glob("rally-*.json"))
    if real:
        return str(real[0])
    wls = [
        synthetic.workload(
            synthetic.iterations(300, concurrency=c, error_every=60, seed=c, slope=0.0005),
            runner={"times": 300, "concurrency": c},
        )
        for c in (1, 2)
    ]
    wls.append(
        synthetic.workload(
            synthetic.iterations(200, seed=5),
            runner={"times": 200, "rps": {"start": 5, "end": 20, "step": 5, "duration": 2}},
            runner_type="rps",
        )
    )
    return synthetic.write(str(tmp / "result.json"), synthetic.report(wls))


@pytest.fixture(scope="module")
def summary(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("chromium")
    assert cli.main(["report", _source(tmp), "--out", str(tmp)]) == 0
    return tmp / "summary.html"


class _Paths(HTMLParser):
    def __init__(self):
        super().__init__()
        self.svgs = 0
        self.paths = []
        self.per_svg = []

    def handle_starttag(self, tag, attrs):
        if tag == "svg":
            self.svgs += 1
            self.per_svg.append(0)
        if tag == "path":
            self.paths.append(dict(attrs))
            if self.per_svg and dict(attrs).get("d"):
                self.per_svg[-1] += 1


def test_chromium_renders_summary_without_console_errors(summary):
    out = chromium.render(summary)
    assert "keystone-bench summary" in out.dom, out.stderr[-2000:]
    assert out.console == []


def test_svg_charts_hold_drawn_paths(summary):
    dom = chromium.render(summary).dom
    p = _Paths()
    p.feed(dom)
    assert p.svgs >= 4
    drawn = [a["d"] for a in p.paths if a.get("d")]
    # Scatter of latencies: one 'M x y h0' dot per sample; the rolling p95: many vertices.
    dots = [a["d"] for a in p.paths if a.get("class") == "points"]
    counts = [d.count("h0") for d in dots]
    assert counts and min(counts) >= 5 and max(counts) >= 150, counts
    p95 = [a["d"] for a in p.paths if a.get("class") == "p95"]
    vertices = [len(re.findall(r"[\d.]+,[\d.]+", d)) for d in p95]
    assert vertices and min(vertices) >= 3 and max(vertices) >= 30, vertices
    assert len(drawn) == len(p.paths) and all(n >= 1 for n in p.per_svg)


def test_console_errors_are_caught(tmp_path):
    """The check above can fail: a malformed path and a script error are reported."""
    page = tmp_path / "broken.html"
    page.write_text(
        '<!DOCTYPE html><html><head><link rel="icon" href="data:,"></head><body>'
        '<svg><path d="M0,0 Lx"/></svg><script>undefinedFunction()</script></body></html>'
    )
    console = chromium.render(page).console
    assert any("attribute d" in m for m in console)
    assert any("undefinedFunction" in m for m in console)


def test_compare_page_renders_without_console_errors(tmp_path):
    rep = synthetic.report([synthetic.workload(synthetic.iterations(200, seed=3))])
    a, b = synthetic.split(rep, seed=1)
    b = synthetic.slow_down(b, "keystone.issue_token", 1.3)
    base = synthetic.write(str(tmp_path / "a.json"), a)
    cand = synthetic.write(str(tmp_path / "b.json"), b)
    page = tmp_path / "compare.html"
    assert cli.main(["compare", base, cand, "--html", str(page)]) == 1
    out = chromium.render(page)
    assert out.console == [] and "REGRESSION" in out.dom


def test_screenshot_is_taken(summary, tmp_path):
    png = chromium.screenshot(summary, tmp_path / "summary.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
