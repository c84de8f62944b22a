"""report: summary.html and summary.json as a reader sees them."""

import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.plugins import exporter
from rally_keystone_bench.report import render, svg
from rally_keystone_bench.verdicts import results

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import synthetic  # noqa: E402

PASSWORD = "Sup3r-Secret-Passw0rd"
FERNET = "gAAAAABmZ2u3QkL0" + "q1W2e3R4t5Y6" * 14


def _report():
    wls = [
        synthetic.workload(
            synthetic.iterations(200, concurrency=c, error_every=40, seed=c, slope=0.001),
            runner={"times": 200, "concurrency": c},
            contexts={"keystone_users": {"users_per_tenant": 2, "password": PASSWORD}},
        )
        for c in (1, 2, 4)
    ]
    wls.append(
        synthetic.workload(
            synthetic.iterations(100, seed=7),
            runner={"times": 100, "rps": {"start": 5, "end": 20, "step": 5, "duration": 2}},
            runner_type="rps",
        )
    )
    wls.append(
        synthetic.workload(
            synthetic.iterations(
                10,
                actions=["keystone.concurrent_burst"],
                nested={"keystone.concurrent_burst": ("keystone.issue_token", 8)},
                seed=8,
            ),
            scenario="KeystoneTokens.concurrent_create",
            args={"count": 8, "parallel": 8, "password": PASSWORD},
        )
    )
    rep = synthetic.report(wls)
    bad = rep["tasks"][0]["subtasks"][0]["workloads"][0]["data"][39]
    bad["error"] = ["TokenRequestError", f"validate token {FERNET}: HTTP 404: not found", "tb"]
    return rep


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    src = synthetic.write(str(d / "result.json"), _report())
    assert cli.main(["report", src, "--out", str(d / "out")]) == 0
    return d / "out"


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _tags(html):
    p = _Collect()
    p.feed(html)
    return p.tags


def test_html_is_self_contained(out):
    html = (out / "summary.html").read_text()
    tags = _tags(html)
    names = {t for t, _ in tags}
    assert "script" not in names and "img" not in names and "iframe" not in names
    for tag, attrs in tags:
        for key in ("src", "href"):
            if key in attrs:
                assert attrs[key].startswith(("data:", "#")), (tag, attrs)
    assert "@import" not in html and "url(" not in html and "@font-face" not in html
    # The only absolute URL is the SVG namespace, which is never fetched.
    assert set(re.findall(r"https?://[^\"'\s<>]+", html)) == {"http://www.w3.org/2000/svg"}


def test_charts_are_drawn_from_data(out):
    tags = _tags((out / "summary.html").read_text())
    svgs = [a for t, a in tags if t == "svg"]
    # 3 auth + rps: 2 charts each, rps one more; burst: 2 actions x 2 charts.
    assert len(svgs) == 4 * 2 + 1 + 4
    points = [a["d"] for t, a in tags if t == "path" and a.get("class") == "points"]
    # 6 latency-over-time charts, then as many percentile plots, a dot per sample
    assert len(points) == 12 and all(d.count("h0") >= 80 for d in points[:4])
    assert len([1 for t, a in tags if t == "path" and a.get("class") == "p95"]) >= 4
    fits = [a["d"] for t, a in tags if t == "path" and a.get("class") == "fit"]
    assert len(fits) == 6 and all(re.fullmatch(r"M[\d.]+,[\d.]+ L[\d.]+,[\d.]+", d) for d in fits)
    assert any(t == "path" and a.get("class") == "target" for t, a in tags)


def test_summary_json_numbers_match_the_samples(out):
    summary = json.loads((out / "summary.json").read_text())
    wls = results.load(out.parent / "result.json")
    first = summary["workloads"][0]
    a = wls[0].actions["keystone.issue_token"]
    ok = a.duration[~a.failed]
    got = first["actions"]["keystone.issue_token"]
    assert got["p95"] == pytest.approx(np.percentile(ok, 95))
    assert got["p99.9"] == pytest.approx(np.percentile(ok, 99.9))
    assert got["count"] == 200 and got["success_percent"] == pytest.approx(97.5)
    assert first["throughput"] == pytest.approx(195 / wls[0].load_duration)
    # slope was made 1 ms per second of run time
    lo, hi = got["slope"]["ci95"]
    assert lo < 0.001 < hi
    assert summary["workloads"][3]["rps_achieved"] > 0


def test_errors_grouped_by_type_and_status(out):
    errors = json.loads((out / "summary.json").read_text())["workloads"][0]["errors"]
    assert {(e["type"], e["http_status"], e["count"]) for e in errors} == {
        ("Unauthorized", 401, 4),
        ("TokenRequestError", 404, 1),
    }
    html = (out / "summary.html").read_text()
    assert "TokenRequestError" in html and "401" in html


def test_one_setting_table_rows_per_concurrency(out):
    tables = json.loads((out / "summary.json").read_text())["setting_tables"]
    (t,) = [t for t in tables if t["setting"] == "runner.concurrency"]
    totals = [r for r in t["rows"] if r["action"] == "total"]
    assert [r["label"] for r in totals] == ["1", "2", "4"]
    assert all(r["count"] == 200 and r["min"] <= r["avg"] <= r["max"] for r in totals)
    assert all(r["p90"] <= r["p95"] for r in totals)
    assert "by runner.concurrency" in (out / "summary.html").read_text()


def test_no_token_or_password_in_reports(out):
    for name in ("summary.html", "summary.json"):
        text = (out / name).read_text()
        assert PASSWORD not in text
        assert FERNET not in text and FERNET[:20] not in text
        assert FERNET[:8] in text  # shortened to 8 characters, as the design says


def test_setting_table_builder_takes_labels():
    wls = results.from_report(_report())
    rows = render.setting_table([("uwsgi-2w c=1", wls[0]), ("uwsgi-2w c=2", wls[1])], ["total"])
    assert [r["label"] for r in rows] == ["uwsgi-2w c=1", "uwsgi-2w c=2"]
    assert set(rows[0]) >= {"min", "avg", "max", "p90", "p95", "success_percent", "count"}
    assert rows[0]["throughput"] == wls[0].throughput


def test_report_of_bad_file_exits_2(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text('{"info": {"format_version": "1.2"}, "tasks": [')
    assert cli.main(["report", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "truncated" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_default_out_dir_is_beside_the_result(tmp_path, capsys):
    src = synthetic.write(
        str(tmp_path / "r.json"), synthetic.report([synthetic.workload(synthetic.iterations(30))])
    )
    assert cli.main(["report", src]) == 0
    assert (tmp_path / "summary.html").exists() and (tmp_path / "summary.json").exists()
    assert "it/s" in capsys.readouterr().out


def test_exporter_writes_the_same_summary(tmp_path):
    from rally.cli import task_results_loader

    src = synthetic.write(str(tmp_path / "r.json"), _report())
    tasks = task_results_loader.load(src)  # what `rally task export FILE` hands exporters
    rep = exporter.SummaryExporter(tasks, str(tmp_path / "exp")).generate()
    files = rep["files"]
    assert set(map(Path, files)) == {tmp_path / "exp/summary.html", tmp_path / "exp/summary.json"}
    exported = json.loads(files[str(tmp_path / "exp/summary.json")])
    direct = render.build_summary(results.load(src), src)
    assert exported["workloads"] == json.loads(json.dumps(direct["workloads"]))
    assert (tmp_path / "exp").is_dir()
    printed = exporter.SummaryExporter(tasks, None).generate()
    assert json.loads(printed["print"])["workloads"][0]["scenario"] == "KeystoneTokens.authenticate"


def test_downsample_keeps_spikes():
    t = np.arange(100000, dtype=float)
    y = np.ones(100000)
    y[54321] = 50.0
    dt, dy = svg.downsample(t, y, 1000)
    assert dt.size <= 1000 and dy.max() == 50.0


def test_rolling_p95_follows_a_step():
    t = np.arange(2000, dtype=float)
    y = np.where(t < 1000, 1.0, 2.0)
    mx, mv = svg.rolling_quantile(t, y)
    assert mv[mx < 900].max() == 1.0 and mv[mx > 1100].min() == 2.0


def test_rps_target_steps_up_to_end():
    wls = results.from_report(_report())
    target = render.rps_target(wls[3])
    rates = [r for _, r in target]
    assert rates[0] == 5 and max(rates) <= 20 and rates == sorted(rates)
    assert render.rps_target(wls[0]) == []


def test_pooled_rps_workloads_get_the_rate_chart_and_table_setting_too(tmp_path):
    # the capacity probes run on pooled_rps: their reports must still show
    # the target against the achieved rate
    wl = synthetic.workload(
        synthetic.iterations(100, seed=9),
        runner={"times": 100, "rps": 40, "max_concurrency": 200},
        runner_type="pooled_rps",
    )
    (loaded,) = results.from_report(synthetic.report([wl]))
    assert render.rps_target(loaded)[0] == (0.0, 40.0)
    from rally_keystone_bench.verbs import matrix

    assert matrix.runner_setting(loaded) == "rps 40"
    src = synthetic.write(str(tmp_path / "r.json"), synthetic.report([wl]))
    assert cli.main(["report", src, "--out", str(tmp_path / "out")]) == 0
    html = (tmp_path / "out" / "summary.html").read_text()
    assert "pooled_rps runner: target against achieved rate" in html
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["workloads"][0]["rps_achieved"] > 0


def test_summary_opens_with_an_overview_row_per_workload_and_action_linking_to_it(tmp_path):
    data = synthetic.iterations(20, seed=3)
    workloads = results.from_report(synthetic.report([synthetic.workload(data)]))
    html = render.write_summary(workloads, tmp_path, "x.json").html.read_text()
    overview = html[
        html.index('id="overview"') : html.index("</table>", html.index('id="overview"'))
    ]
    assert html.index('id="overview"') < html.index('id="workload-0"')
    rows = re.findall(r"<tr><td><a href=\"#workload-0\">1</a>", overview)
    assert len(rows) == len(workloads[0].actions)
    for header in ("p50 (median, ms)", "p95 (ms)", "p99 (ms)", "throughput", "success", "SLA"):
        assert header in overview


def test_twenty_samples_are_drawn_as_visible_dots():
    t = np.linspace(0, 19, 20)
    chart = svg.latency_over_time(t, np.full(20, 0.01), None, "latency", 0.0)
    assert 'stroke-width="8"' in chart and chart.count("h0") == 20
    many = svg.latency_over_time(np.linspace(0, 100, 5000), np.full(5000, 0.01), None, "l", 0.0)
    assert 'stroke-width="3"' in many
