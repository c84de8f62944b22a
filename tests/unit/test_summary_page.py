"""The summary page a new user reads: workloads told apart, one name for one number,
charts that show their samples (no empty bins, no legend without its line)."""

import re
import sys
from pathlib import Path

import numpy as np

from rally_keystone_bench.report import render, svg
from rally_keystone_bench.verdicts import results

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import synthetic  # noqa: E402


def _workloads():
    wls = [
        synthetic.workload(
            synthetic.iterations(12, seed=1),
            scenario="KeystoneTokens.authenticate",
            args={"method": m, "scope": "project"},
        )
        for m in ("password", "token")
    ]
    wls.append(
        synthetic.workload(
            synthetic.iterations(10, actions=["keystone.validate_token"] * 5, seed=2),
            scenario="KeystoneTokens.validate",
            args={"method": "GET", "repetitions": 5},
        )
    )
    return results.from_report(synthetic.report(wls))


COUNTERS = {
    "traced_requests": 12,
    "sql_statements_median": 67,
    "sql_statements_max": 68,
    "db_ms_median": 4.25,
}


def _overview(html: str) -> str:
    start = html.index('id="overview"')
    return html[start : html.index("</table>", start)]


def test_overview_names_each_workload_by_what_tells_it_apart_and_shows_sql_and_db_ms(tmp_path):
    workloads = _workloads()
    counters = [{"keystone.issue_token": COUNTERS}, {}, {}]
    html = render.write_summary(workloads, tmp_path, "x.json", counters).html.read_text()
    overview = _overview(html)
    assert "KeystoneTokens.authenticate (method password)" in overview
    assert "KeystoneTokens.authenticate (method token)" in overview
    assert "SQL/req (median / max)" in overview and "DB ms (median)" in overview
    assert "<td>67 / 68</td><td>4.25</td>" in overview


def test_a_repeated_action_says_x5_and_total_is_defined_beside_the_table(tmp_path):
    workloads = _workloads()
    assert workloads[2].actions["keystone.validate_token"].count == 50
    html = render.write_summary(workloads, tmp_path, "x.json").html.read_text()
    overview = _overview(html)
    assert re.search(r"keystone.validate_token <i>&times;5</i>", overview)
    assert "Rally's\nHTML sums the repeats" in overview
    assert "<i>total</i> is the whole iteration" in overview
    assert "keystone.validate_token (x5)" in html  # Rally's own name, beside the table


def test_percentile_plot_draws_every_sample_of_a_small_run():
    chart = svg.percentiles(np.linspace(0.01, 0.02, 12), "p")
    dots = re.search(r'class="points" d="([^"]*)"', chart).group(1)
    assert dots.count("h0") == 12
    assert ">90%<" in chart and "12 samples: median 15.0 ms" in chart


def test_rolling_p95_is_in_the_legend_only_when_drawn():
    few = svg.latency_over_time(np.arange(10.0), np.full(10, 0.01), None, "l", 0.0)
    assert "rolling p95" not in few and 'class="p95"' not in few
    many = svg.latency_over_time(np.arange(100.0), np.full(100, 0.01), None, "l", 0.0)
    assert "rolling p95" in many and 'class="p95"' in many
