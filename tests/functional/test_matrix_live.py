"""matrix for real: two deployments, one tiny task, one table."""

from __future__ import annotations

import json

import pytest
from _bench_helpers import bench, live_pids, states, tiny_task

pytestmark = [pytest.mark.functional, pytest.mark.slow]


def test_matrix_runs_each_deployment_and_writes_one_table(tmp_path):
    deployments = tmp_path / "d.yaml"
    deployments.write_text(
        "one-worker:\n  workers: 1\n  password_hash_rounds: 4\n"
        "gunicorn-2w:\n  server: gunicorn\n  workers: 2\n  password_hash_rounds: 4\n"
    )
    task = tiny_task(tmp_path / "tiny.json", times=4, concurrency=2)
    proc = bench(
        "matrix", "--deployments", str(deployments), "--task", str(task),
        "--reports-dir", str(tmp_path / "reports"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "deployment 1 of 2: one-worker" in proc.stderr
    assert "deployment 2 of 2: gunicorn-2w" in proc.stderr
    (out,) = (tmp_path / "reports").iterdir()
    rows = json.loads((out / "matrix.json").read_text())["rows"]
    issue = [r for r in rows if r["action"] == "keystone.issue_token"]
    assert {r["deployment"] for r in issue} == {"one-worker", "gunicorn-2w"}
    assert all(r["count"] == 4 and r["success_percent"] == 100 for r in issue)
    assert "gunicorn-2w" in (out / "matrix.html").read_text()
    assert all(live_pids(s) == [] for s in states(tmp_path / ".keystone-bench"))
