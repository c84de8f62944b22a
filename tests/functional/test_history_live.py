"""Real runs recorded to a results store, read back and drawn: SQLite and PostgreSQL.

Each test runs the real ``keystone-bench run`` (a local Keystone, the real
Rally CLI) on a tiny task with ``--history``, then ``keystone-bench history``
on the same store. The PostgreSQL store lives in a schema of its own on the
local server's ``test`` database, dropped at the end.
"""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest
from _bench_helpers import bench, tiny_task
from prometheus_client.openmetrics.parser import text_string_to_metric_families

pytestmark = pytest.mark.functional

PG = "postgresql://postgres@127.0.0.1:5432/test"


def psql(sql: str) -> str:
    return subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "test", "-Atc", sql],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


@pytest.fixture
def pg_store():
    """A postgresql:// store URL in a schema made for this test (search_path in the URL)."""
    schema = f"rkb_history_{uuid.uuid4().hex[:10]}"
    psql(f"CREATE SCHEMA {schema}")
    try:
        yield f"{PG}?options=-csearch_path%3D{schema}", schema
    finally:
        psql(f"DROP SCHEMA {schema} CASCADE")


def run_recorded(tmp_path, store: str) -> subprocess.CompletedProcess:
    task = tiny_task(tmp_path / "tiny.json", times=3)
    proc = bench(
        "run", str(task), "--password-hash-rounds", "4", "--trace", "off", "--profile", "off",
        "--reports-dir", str(tmp_path / "reports"), "--history", store, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def check_read_back(tmp_path, store: str) -> None:
    """history lists the run, prints its series, draws it and exports it."""
    listed = bench("history", "--history", store, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    (line,) = [ln for ln in listed.stdout.splitlines()[1:] if ln.strip()]
    assert line.split()[0] == "1" and " run " in line and "rounds=4" in line

    (summary,) = (tmp_path / "reports").rglob("summary.json")
    first = json.loads(summary.read_text())["workloads"][0]
    p50_ms = first["actions"]["keystone.issue_token"]["p50"] * 1000
    page = tmp_path / "history.html"
    shown = bench(
        "history", "--history", store, "--series", "--action", "issue_token",
        "--html", str(page), cwd=tmp_path,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert f"{p50_ms:.2f} ms" in shown.stdout  # the summary's own number, not re-measured
    assert "no change point in 1 series" in shown.stdout
    assert "<svg" in page.read_text() and "issue_token" in page.read_text()

    exported = bench("history", "--history", store, "--export", "openmetrics", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    families = {f.name: f for f in text_string_to_metric_families(exported.stdout)}
    p50 = [
        s.value
        for s in families["keystone_bench_latency_seconds"].samples
        if s.labels["action"] == "keystone.issue_token" and s.labels["percentile"] == "p50"
    ]
    assert p50 == [pytest.approx(p50_ms / 1000)]


def test_a_run_recorded_to_sqlite_reads_back_and_draws(tmp_path):
    store = tmp_path / "history.sqlite"
    proc = run_recorded(tmp_path, str(store))
    assert f"history: run 1 recorded in {store}" in proc.stdout
    check_read_back(tmp_path, str(store))


def test_a_run_recorded_to_postgresql_reads_back_and_draws(tmp_path, pg_store):
    url, schema = pg_store
    proc = run_recorded(tmp_path, url)
    assert "history: run 1 recorded in postgresql://postgres@127.0.0.1:5432/test" in proc.stdout
    assert psql(f"SELECT count(*) FROM {schema}.runs").strip() == "1"
    check_read_back(tmp_path, url)


WRITER = """
import sys
from rally_keystone_bench.history import records
from rally_keystone_bench.history.store import Store
url, tag = sys.argv[1:3]
row = records.ActionRow("w#1 X", "total", 0.1, 0.2, 0.3, 5.0, 100.0, 10)
for i in range(20):
    with Store.open(url) as store:
        store.record(records.build_record("run", records.Keystone(tag), "d", {}, [row] * 50, "x"))
"""


def test_two_writers_to_one_postgresql_store_both_land(tmp_path, pg_store):
    """Both start on an empty schema: the first migration is taken under a lock, once."""
    import os
    import sys

    from _bench_helpers import ROOT

    url, schema = pg_store
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, url, tag], env=env, stderr=subprocess.PIPE)
        for tag in ("A", "B")
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()[-2000:]
    counts = psql(f"SELECT keystone, count(*) FROM {schema}.runs GROUP BY keystone ORDER BY 1")
    assert counts.split() == ["A|20", "B|20"]
    assert psql(f"SELECT count(*) FROM {schema}.results").strip() == str(40 * 50)
    assert psql(f"SELECT count(*) FROM {schema}.schema_version").strip() == "1"
