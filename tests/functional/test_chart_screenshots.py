"""Every chart of the summary page, drawn by Chromium, shows its data: a screenshot of
each chart alone holds the chart's own color, and an empty chart's does not."""

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
