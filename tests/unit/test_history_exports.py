"""history's outputs: OpenMetrics and InfluxDB exports parsed back, the page, bad input."""

from __future__ import annotations

import http.server
import subprocess
import threading
from pathlib import Path

import pytest
from _packages import require_package
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from rally_keystone_bench import cli
from rally_keystone_bench.history import records
from rally_keystone_bench.history.store import Store
from rally_keystone_bench.report import history as history_report
from rally_keystone_bench.verbs import recording

ROOT = Path(__file__).resolve().parents[2]
GOLDEN_SUMMARY = ROOT / "tests" / "fixtures" / "golden" / "run.summary.json"


def store_of(tmp_path: Path, p50s: list[float]) -> Path:
    """A store of len(P50S) runs of the golden summary, its first action's p50 set per run."""
    out = tmp_path / "reports" / "token-suite-summary"
    out.mkdir(parents=True)
    out.joinpath("summary.json").write_text(GOLDEN_SUMMARY.read_text())
    rows = records.rows_from_summaries(recording.summaries_under(out.parent, "run"))
    path = tmp_path / "h.sqlite"
    with Store.open(str(path)) as store:
        for p50 in p50s:
            changed = [records.ActionRow(**{**r.__dict__, "p50": p50}) if i == 0 else r
                       for i, r in enumerate(rows)]  # fmt: skip
            store.record(records.build_record(
                "run", records.Keystone("keystone==30.0.0"), 'uwsgi "2x1" sqlite', {}, changed, "x"
            ))  # fmt: skip
    return path


def test_openmetrics_parses_back_one_series_per_percentile_from_the_newest_run(tmp_path):
    path = store_of(tmp_path, [0.1, 0.2, 0.3])
    with Store.open(str(path)) as store:
        runs = store.runs()
    text = history_report.openmetrics(runs)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    latency = families["keystone_bench_latency_seconds"]
    assert latency.unit == "seconds" and latency.type == "gauge"
    first = runs[-1]["rows"][0]
    key = (first["workload"], first["action"])
    mine = [s for s in latency.samples if (s.labels["workload"], s.labels["action"]) == key]
    assert {s.labels["percentile"]: s.value for s in mine} == {
        "p50": 0.3,
        "p95": first["p95"],
        "p99": first["p99"],
    }  # the newest run's numbers, never a mean of the three
    assert mine[0].labels["deployment"] == 'uwsgi "2x1" sqlite'  # quotes escaped and back
    assert len(families["keystone_bench_success_ratio"].samples) == len(first and runs[-1]["rows"])


def test_promtool_accepts_the_openmetrics_export(tmp_path):
    promtool = require_package("promtool", "prometheus")
    path = store_of(tmp_path, [0.1, 0.2])
    out = tmp_path / "keystone_bench.prom"
    assert (
        cli.main(["history", "--history", str(path), "--export", "openmetrics", "--out", str(out)])
        == 0
    )
    proc = subprocess.run([promtool, "check", "metrics"], input=out.read_text(),
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr


def parse_line_protocol(line: str) -> tuple[str, dict, dict, int]:
    """Measurement, tags, fields and timestamp of one line (escapes: \\, \\= \\space)."""
    parts, cur, i = [], "", 0
    while i < len(line):  # split on unescaped spaces
        if line[i] == "\\":
            cur += line[i : i + 2]
            i += 2
            continue
        if line[i] == " ":
            parts.append(cur)
            cur = ""
        else:
            cur += line[i]
        i += 1
    parts.append(cur)
    head, fields, stamp = parts

    def split(text: str, sep: str) -> list[str]:
        out, cur, i = [], "", 0
        while i < len(text):
            if text[i] == "\\":
                cur += text[i + 1]
                i += 2
                continue
            if text[i] == sep:
                out.append(cur)
                cur = ""
            else:
                cur += text[i]
            i += 1
        return [*out, cur]

    measurement, *tags = split(head, ",")
    return (measurement, dict(t.split("=", 1) for t in tags),
            dict(f.split("=", 1) for f in fields.split(",")), int(stamp))  # fmt: skip


def test_influx_has_every_run_at_its_time_with_its_own_numbers(tmp_path):
    path = store_of(tmp_path, [0.1, 0.2, 0.3])
    with Store.open(str(path)) as store:
        runs = store.runs()
    lines = history_report.influx(runs).splitlines()
    assert len(lines) == sum(len(r["rows"]) for r in runs)
    parsed = [parse_line_protocol(line) for line in lines]
    first = runs[0]["rows"][0]
    mine = [
        p
        for p in parsed
        if p[1]["workload"] == first["workload"] and p[1]["action"] == first["action"]
    ]
    assert [float(p[2]["p50"]) for p in mine] == [0.1, 0.2, 0.3]
    assert [p[2]["run"] for p in mine] == ["1i", "2i", "3i"]
    assert mine[0][0] == "keystone_bench" and mine[0][1]["deployment"] == 'uwsgi "2x1" sqlite'
    assert all(p[3] % 1_000_000_000 == 0 and p[3] > 1.7e18 for p in mine)


def test_an_export_from_a_report_needs_no_store(tmp_path, capsys):
    reports = tmp_path / "r" / "token-suite-summary"
    reports.mkdir(parents=True)
    reports.joinpath("summary.json").write_text(GOLDEN_SUMMARY.read_text())
    assert (
        cli.main(["history", "--export", "openmetrics", "--from-report", str(tmp_path / "r")]) == 0
    )
    families = list(text_string_to_metric_families(capsys.readouterr().out))
    assert {f.name for f in families} >= {
        "keystone_bench_latency_seconds",
        "keystone_bench_throughput",
    }


def test_push_puts_the_export_to_the_pushgateway_path(tmp_path):
    path = store_of(tmp_path, [0.1])
    got: list[tuple[str, str, bytes]] = []

    class Gateway(http.server.BaseHTTPRequestHandler):
        def do_PUT(self):  # noqa: N802
            body = self.rfile.read(int(self.headers["Content-Length"]))
            got.append((self.path, self.headers["Content-Type"], body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics/job/keystone_bench"
        rc = cli.main(["history", "--history", str(path), "--export", "openmetrics", "--push", url])
    finally:
        server.shutdown()
    assert rc == 0
    ((where, kind, body),) = got
    assert where == "/metrics/job/keystone_bench" and kind.startswith("text/plain")
    assert list(text_string_to_metric_families(body.decode()))


def test_the_page_draws_each_series_and_marks_the_change_point(tmp_path, capsys):
    p50s = [0.100, 0.102, 0.099, 0.101, 0.100, 0.098, 0.101, 0.100, 0.102, 0.099] * 1
    p50s += [v * 1.15 for v in p50s]
    path = store_of(tmp_path, p50s)
    page = tmp_path / "history.html"
    args = [
        "history",
        "--history",
        str(path),
        "--changes",
        "--action",
        "issue_token",
        "--html",
        str(page),
    ]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("1 of ") and "series with a change point" in out
    assert "run 11 (keystone==30.0.0): 15.0% higher from run 11" in out
    html = page.read_text()
    assert html.count('class="change"') == 1
    assert "<script" not in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["history"], "no store: give --history STORE or set KEYSTONE_BENCH_HISTORY"),
        (["history", "--history", "{tmp}/none.sqlite"], "no such store"),
        (["history", "--history", "{tmp}/h.sqlite", "--push", "http://x/"], "add --export"),
        (["history", "--export", "influx", "--from-report", "{tmp}/nowhere"], "no such directory"),
        (["history", "--history", "{tmp}/h.sqlite", "--export", "openmetrics", "--push", "ftp://x"],
         "not an http(s):// URL"),
        (["history", "--history", "postgresql://nobody@127.0.0.1:1/x"], "--history postgresql://"),
        (["history", "--history", "{tmp}/h.sqlite", "--changes", "--permutations", "50"],
         "--permutations 50 cannot reach --alpha 0.01 (the smallest p-value is 1/51): "
         "give at least 99"),
        (["history", "--history", "{tmp}/h.sqlite", "--alpha", "0"],
         "--alpha 0: no p-value is below it, so no change could be found"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.delenv("KEYSTONE_BENCH_HISTORY", raising=False)
    store_of(tmp_path, [0.1])
    rc = cli.main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err and len(err.strip().splitlines()) == 1


def test_across_deployments_the_deployment_filter_keeps_the_joined_series(tmp_path, capsys):
    """--deployment picks the runs (in the store); the joined series has no single line."""
    path = store_of(tmp_path, [0.1, 0.1])
    args = ["history", "--history", str(path), "--series", "--action", "issue_token",
            "--across-deployments", "--deployment", "sqlite"]  # fmt: skip
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "issue_token" in out and "machine:" in out
    assert cli.main([*args[:-1], "postgresql"]) == 0  # no run of that deployment: no series
    assert "issue_token" not in capsys.readouterr().out
