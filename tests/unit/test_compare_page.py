"""compare.html: what changed first, both sides' distributions, unchanged counters folded."""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from rally_keystone_bench import cli
from rally_keystone_bench.report import svg
from rally_keystone_bench.report.compare import BASE_COLOR, CAND_COLOR
from rally_keystone_bench.report.counters import evidence_html
from rally_keystone_bench.verdicts import counters

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import synthetic  # noqa: E402

NS = "{http://www.w3.org/2000/svg}"


def _page(tmp_path: Path, factor: float) -> str:
    rep = synthetic.report(
        [
            synthetic.workload(synthetic.iterations(200, seed=3)),
            synthetic.workload(
                synthetic.iterations(200, actions=("keystone.validate_token",), seed=4)
            ),
        ]
    )
    a, b = synthetic.split(rep, seed=1)
    b = synthetic.slow_down(b, "keystone.issue_token", factor)
    base = synthetic.write(str(tmp_path / "a.json"), a)
    cand = synthetic.write(str(tmp_path / "b.json"), b)
    page = tmp_path / "compare.html"
    cli.main(["compare", base, cand, "--html", str(page)])
    return page.read_text()


def test_the_change_comes_before_the_tables_and_each_action_draws_both_sides(tmp_path):
    html = _page(tmp_path, 1.3)
    changed = html.index('<ul class="changed">')
    assert changed < html.index('<table class="compare">')
    first = html[changed : html.index("</ul>", changed)]
    assert "keystone.issue_token: 1.33x slower (median" in first and "validate_token" not in first
    charts = re.findall(r"<svg .*?</svg>", html, re.S)
    # one per action (and total) of each workload, the two workloads sharing one label
    assert len(charts) == 4
    for chart in charts:
        root = ET.fromstring(chart)
        colors = {p.get("stroke") for p in root.iter(f"{NS}path") if p.get("class")}
        assert colors == {BASE_COLOR, CAND_COLOR}
        assert "base (n 100): p50" in chart and "candidate (n 100): p50" in chart


def test_nothing_changed_says_so_in_one_line(tmp_path):
    html = _page(tmp_path, 1.0)
    assert "No latency, success or throughput change" in html
    assert '<ul class="changed">' not in html


def test_unchanged_counter_lines_are_folded_away_after_the_changed_ones():
    def action(name: str, sql: int) -> counters.ActionCounters:
        return counters.ActionCounters(name, (sql,) * 20, (0.001,) * 20, {}, {})

    names = [f"keystone.action_{i}" for i in range(8)]
    before = {n: action(n, 4) for n in names}
    after = {n: action(n, 5 if n == names[3] else 4) for n in names}
    shown = evidence_html(counters.compare(before, after), {}, [], "base")
    assert len(shown["counts"]) >= 1 and all(names[3] in line for line in shown["counts"][:1])
    assert len(shown["unchanged"]) == 7

    from rally_keystone_bench.report.render import environment

    html = (
        environment()
        .from_string('{% with other = "base" %}{% include "_evidence.html.j2" %}{% endwith %}')
        .render(evidence=shown)
    )
    details = html.index("<details")
    assert html.index("keystone.action_3: 4 -&gt; 5") < details
    assert all(html.index(f"{n}: 4 -&gt; 4") > details for n in names if n != names[3])
    assert "7 unchanged counter lines" in html


def test_one_side_without_samples_is_drawn_with_the_other_and_said():
    chart = svg.percentile_curves(
        "x", [("base", np.array([0.01, 0.02, 0.03]), BASE_COLOR), ("candidate", np.zeros(0), "b")]
    )
    assert "candidate: no samples" in chart and "base (n 3): p50" in chart
    assert "no samples</text>" in svg.percentile_curves("x", [("base", np.zeros(0), "a")])
