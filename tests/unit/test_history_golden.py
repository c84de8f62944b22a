"""Every output of ``keystone-bench history`` on a fixture store, against its golden file.

The store is built from the recorded run's summary (fixtures/golden/run.summary.json)
with fixed dates, machine and tool version: twelve runs, the issue path 15 %
slower from the seventh, two Keystones (a release and a checkout's commit).
The golden files under tests/fixtures/golden/history were recorded from the
code before history stopped importing deploy/ and reading summary.json
(issue 43); a change that moves one byte a user reads fails here.

Record again, after a deliberate change of output only:
``KEYSTONE_BENCH_RECORD_GOLDEN=1 pytest tests/unit/test_history_golden.py``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.history import records
from rally_keystone_bench.history.store import Store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SUMMARY = FIXTURES / "golden" / "run.summary.json"
GOLDEN = FIXTURES / "golden" / "history"
GENERATED_RE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")  # the page's own date
RECORD = os.environ.get("KEYSTONE_BENCH_RECORD_GOLDEN") == "1"
RELEASE = records.Keystone("keystone==30.0.0", describe="keystone 30.0.0")
CHECKOUT = records.Keystone(
    "../keystone", commit="0" * 39 + "1", describe="30.0.0-12-g0000001", repo="/nowhere/keystone"
)


def fixture_store(tmp_path: Path) -> Path:
    """Twelve runs of the recorded summary; from the seventh, issue_token is 15 % slower."""
    rows = records.rows_from_summary(json.loads(SUMMARY.read_text()), "token-suite")
    path = tmp_path / "h.sqlite"
    with Store.open(str(path)) as store:
        for n in range(12):
            factor = (1.0 + 0.01 * (n % 3)) * (1.15 if n >= 6 else 1.0)
            changed = tuple(
                dataclasses.replace(r, p50=r.p50 * factor)
                if r.action == "keystone.issue_token" and r.p50
                else r
                for r in rows
            )
            store.record(
                records.RunRecord(
                    recorded_at=f"2026-11-{n + 1:02d}T10:00:00Z",
                    verb="run",
                    keystone=CHECKOUT if n % 2 else RELEASE,
                    deployment='uwsgi "2x1" sqlite',
                    settings={"token.expiration": "3600"},
                    machine="AMD EPYC, 2 cores",
                    cpu_model="AMD EPYC",
                    cores=2,
                    tool_version="0.0.1 (golden)",
                    source=f"reports/2026110{n % 10}",
                    rows=changed,
                )
            )
    return path


def check(name: str, text: str, tmp_path: Path) -> None:
    text = GENERATED_RE.sub("<now>", text.replace(str(tmp_path), "<tmp>"))
    path = GOLDEN / name
    if RECORD:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"no golden file {name}: record it (see the module docstring)"
    assert text == path.read_text(), f"{name} differs from its golden file"


CASES = {
    "list.txt": [],
    "series.txt": ["--series", "--action", "issue_token"],
    "changes.txt": ["--changes"],
    "across.txt": ["--series", "--across-deployments", "--workload", "#1", "--metric", "p95"],
    "openmetrics.txt": ["--export", "openmetrics"],
    "influx.txt": ["--export", "influx"],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_history_prints_what_it_printed(name, tmp_path, capsys):
    store = fixture_store(tmp_path)
    assert cli.main(["history", "--history", str(store), *CASES[name]]) == 0
    check(name, capsys.readouterr().out, tmp_path)


def test_history_draws_what_it_drew(tmp_path, capsys):
    store = fixture_store(tmp_path)
    page = tmp_path / "history.html"
    args = ["history", "--history", str(store), "--changes", "--html", str(page)]
    assert cli.main(args) == 0
    check("changes-html.txt", capsys.readouterr().out, tmp_path)
    check("history.html", page.read_text(), tmp_path)


@pytest.mark.parametrize("kind", ["openmetrics", "influx"])
def test_an_export_from_a_report_exports_what_it_exported(kind, tmp_path, capsys, monkeypatch):
    report = tmp_path / "reports" / "token-suite-summary"
    report.mkdir(parents=True)
    report.joinpath("summary.json").write_text(SUMMARY.read_text())
    monkeypatch.setattr(records, "now", lambda: "2026-11-20T10:00:00Z")
    monkeypatch.setattr(records, "tool_version", lambda: "0.0.1 (golden)")
    monkeypatch.setattr(records, "machine_line", lambda: ("AMD EPYC, 2 cores", "AMD EPYC", 2))
    args = ["history", "--export", kind, "--from-report", str(tmp_path / "reports")]
    assert cli.main(args) == 0
    check(f"from-report.{kind}.txt", capsys.readouterr().out, tmp_path)
