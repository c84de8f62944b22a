"""Every chart of the summary and compare pages, drawn by Chromium, shows its data: a
screenshot of each chart alone holds the chart's own color, and an empty chart's does not.

Rendered from recorded fixtures (no Keystone): the summary's percentile plots, each
workload's flame graph of a recorded profiled run, compare's base and candidate overlaid."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.report import svg

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import chromium  # noqa: E402
import synthetic  # noqa: E402

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "rally-keystone-tokens.json"
from _packages import require_package  # noqa: E402

pytestmark = pytest.mark.functional

if chromium.binary() is None:
    require_package("chromium", "chromium")

BLUE = (0x4A, 0x78, 0xB5)  # svg.COLORS["points"]: samples, percentiles
SVG_RE = re.compile(r"<svg .*?</svg>", re.S)


def _alone(tmp: Path, name: str, chart: str) -> Path:
    page = tmp / f"{name}.html"
    page.write_text(f'<!DOCTYPE html><html><body style="margin:0">{chart}</body></html>')
    return chromium.screenshot(page, tmp / f"{name}.png", width=740, height=280)


@pytest.fixture(scope="module")
def charts(tmp_path_factory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("charts")
    rep = synthetic.report([synthetic.workload(synthetic.iterations(12, seed=4))])
    src = synthetic.write(str(tmp / "result.json"), rep)
    assert cli.main(["report", src, "--out", str(tmp)]) == 0
    found = SVG_RE.findall((tmp / "summary.html").read_text())
    return {re.search(r'aria-label="([^"]*)"', c).group(1): c for c in found}


def test_every_summary_chart_of_a_twelve_sample_run_draws_its_samples(charts, tmp_path):
    assert "keystone.issue_token latency by percentile" in charts
    for i, (title, chart) in enumerate(charts.items()):
        drawn = chromium.count_color(_alone(tmp_path, f"c{i}", chart), BLUE)
        assert drawn > 300, f"{title}: {drawn} pixels of its samples' color"


def test_the_check_fails_on_an_empty_chart(tmp_path):
    import numpy as np

    empty = svg.percentiles(np.zeros(0), "nothing")
    assert chromium.count_color(_alone(tmp_path, "empty", empty), BLUE) < 50


# The flame graphs' frames: red-orange boxes (report/flame.py's colors); compare's base.
FLAME = (230, 140, 60)
ORANGE = (0xD9, 0x82, 0x2B)  # report/compare.BASE_COLOR
FLAME_RE = re.compile(r'<div class="flame">(<svg .*?</svg>)', re.S)


def _alone_wide(tmp: Path, name: str, chart: str) -> Path:
    page = tmp / f"{name}.html"
    page.write_text(f'<!DOCTYPE html><html><body style="margin:0">{chart}</body></html>')
    return chromium.screenshot(page, tmp / f"{name}.png", width=1220, height=900)


def test_every_workloads_flame_graph_of_the_recorded_run_draws_its_frames(tmp_path):
    import profiled  # noqa: PLC0415 - tests/fixtures, on sys.path above

    html = profiled.summary(tmp_path).read_text()
    flames = FLAME_RE.findall(html)
    said_empty = html.count('class="no-samples"')
    assert len(flames) + said_empty == html.count("Where Keystone's time went in this workload")
    assert len(flames) >= 4, f"{len(flames)} flame graphs, {said_empty} workloads without"
    for i, chart in enumerate(flames):
        drawn = chromium.count_color(_alone_wide(tmp_path, f"f{i}", chart), FLAME)
        assert drawn > 2000, f"flame graph {i + 1}: {drawn} pixels of its frames' colors"


def test_the_flame_check_fails_on_a_flame_graph_without_samples(tmp_path):
    from rally_keystone_bench.report.flame import flame_svg

    empty = flame_svg({}, "nothing")
    assert chromium.count_color(_alone_wide(tmp_path, "empty-flame", empty), FLAME) < 50


def test_every_percentile_plot_of_compare_draws_both_sides(tmp_path):
    import json

    rep = json.loads(REAL.read_text())
    base = synthetic.write(str(tmp_path / "base.json"), rep)
    cand = synthetic.write(
        str(tmp_path / "slow.json"), synthetic.slow_down(rep, "keystone.issue_token", 1.5)
    )
    page = tmp_path / "compare.html"
    assert cli.main(["compare", base, cand, "--html", str(page)]) == 1
    plots = SVG_RE.findall(page.read_text())
    plots = [p for p in plots if "latency by percentile, base and candidate" in p]
    assert len(plots) >= 5
    for i, chart in enumerate(plots):
        png = _alone(tmp_path, f"p{i}", chart)
        blue, orange = chromium.count_color(png, BLUE, 20), chromium.count_color(png, ORANGE, 20)
        # the base is drawn wider, under the candidate: where both are the same (the
        # actions not slowed) it shows as an orange border, about 180 pixels; its
        # legend's swatch alone is 48
        assert blue > 300 and orange > 100, f"plot {i + 1}: {blue} blue, {orange} orange pixels"


def test_the_compare_check_fails_on_a_plot_without_samples(tmp_path):
    import numpy as np

    empty = svg.percentile_curves("nothing", [("base", np.zeros(0), "#d9822b")])
    png = _alone(tmp_path, "empty-compare", empty)
    assert chromium.count_color(png, ORANGE, 20) < 50 and chromium.count_color(png, BLUE) < 50
