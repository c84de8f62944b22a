"""latency_slope under the real rally CLI, against the mock token service.

A mock whose latency grows by 30 ms every second fails the SLA (Rally's SLA
failure exit code, details naming the slope); a flat mock passes it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rally_keystone_bench.deploy.mock import MockKeystone
from rally_keystone_bench.driver.rally import RallyHome, keystone_spec

pytestmark = pytest.mark.functional

PLUGINS = Path(__file__).parent / "plugins"
# ~10 s of load at 20 rps; 2 s of warm-up leaves about 160 points
TASK = {
    "version": 2,
    "title": "latency_slope against the mock",
    "subtasks": [
        {
            "title": "issue tokens",
            "scenario": {"KtbTest.issue_token": {}},
            "runner": {"rps": {"times": 200, "rps": 20}},
            "sla": {
                "latency_slope": {
                    "warmup": 2,
                    "max_slope": 0.01,
                    "action": "keystone.issue_token",
                    "min_iterations": 30,
                },
                "failure_rate": {"max": 0},
            },
        }
    ],
}


def run_task(tmp_path: Path, **mock_options) -> tuple[int, list[dict], dict]:
    """Start the mock, run the task; return (task start exit code, sla-check rows, result)."""
    with MockKeystone(run_dir=tmp_path / "mock", **mock_options) as ks:
        home = RallyHome(tmp_path / "rally")
        env = home.create_env("mock", keystone_spec(ks.admin_credentials))
        home.check_env(env)
        task_file = tmp_path / "task.json"
        task_file.write_text(json.dumps(TASK))
        start = home.rally(
            "--plugin-paths",
            str(PLUGINS),
            "task",
            "start",
            str(task_file),
            "--env",
            env,
            check=False,
            timeout=300,
        )
    assert "Task" in start.stdout, start.stdout[-2000:] + start.stderr[-2000:]
    check = home.rally("task", "sla-check", "--json", check=False)
    rows = json.loads(check.stdout)
    report = tmp_path / "report.json"
    home.rally("task", "report", "--json", "--out", str(report))
    workload = json.loads(report.read_text())["tasks"][0]["subtasks"][0]["workloads"][0]
    return start.returncode, rows, {"sla-check": check.returncode, "workload": workload}


def slope_row(rows: list[dict]) -> dict:
    return next(r for r in rows if r["criterion"] == "latency_slope")


@pytest.mark.serial  # the SLA judges a latency slope at a fixed rate
def test_growing_latency_fails_the_sla_with_rally_exit_code(tmp_path):
    """Latency growing 30 ms a second fails latency_slope (max_slope 0.01): the fitted
    slope within 25 % of 0.030 s/s, over twice the limit even at the band's low end.

    Slack: doc/source/sla.rst quotes 0.0303 s/s (95 % CI 0.0292..0.0314, n 159) from
    this mock and task; the 25 % is about seven times that interval's half-width, a
    round margin rather than a measured spread."""
    code, rows, res = run_task(tmp_path, slope_ms_per_s=30)
    row = slope_row(rows)
    assert code == 2  # rally task start: 2 when a workload did not pass its SLA
    assert res["sla-check"] == 1  # sla-check: the number of failed criteria
    assert row["status"] == "FAIL"
    assert row["detail"].startswith("keystone.issue_token: slope ")
    slope = float(row["detail"].split()[2])
    assert slope == pytest.approx(0.030, rel=0.25)
    assert "Failed (max 0.01)" in row["detail"]
    assert res["workload"]["pass_sla"] is False


@pytest.mark.serial  # the SLA judges a latency slope at a fixed rate
def test_flat_latency_passes_the_sla(tmp_path):
    """A flat mock (2 ms a request) passes: |slope| under max_slope 0.01, with over a
    hundred points past the 2 s warm-up (sla.rst's run of this task had n 159).

    Slack: no slope of this flat mock is quoted; the same mock at 20 ms a request, at 1
    to 47 rps, fitted |slope| of 8e-7 to 5.4e-4 s/s in doc/source/capacity.rst's and
    engines.rst's tables, so 0.01 is over 18 times the largest."""
    code, rows, res = run_task(tmp_path, service_time_ms=2)
    row = slope_row(rows)
    assert code == 0, row["detail"]
    assert res["sla-check"] == 0
    assert row["status"] == "PASS"
    assert abs(float(row["detail"].split()[2])) < 0.01
    assert "n 1" in row["detail"]  # over a hundred points past the warm-up


def test_tokens_from_any_worker_validate_and_revoke_in_every_worker(tmp_path):
    import requests

    with MockKeystone(workers=2, run_dir=tmp_path / "mock") as ks:
        c = ks.admin_credentials
        auth = {
            "identity": {
                "methods": ["password"],
                "password": {
                    "user": {
                        "name": c["username"],
                        "password": c["password"],
                        "domain": {"name": "Default"},
                    }
                },
            },
            "scope": {"project": {"name": "admin", "domain": {"name": "Default"}}},
        }
        url = ks.auth_url + "/auth/tokens"
        # fresh connections spread the requests over both worker processes
        tokens = [
            requests.post(url, json={"auth": auth}, headers={"Connection": "close"}).headers[
                "X-Subject-Token"
            ]
            for _ in range(8)
        ]
        admin = tokens[0]
        for tok in tokens:
            for _ in range(3):
                h = {"X-Auth-Token": admin, "X-Subject-Token": tok, "Connection": "close"}
                assert requests.get(url, headers=h).status_code == 200
        h = {"X-Auth-Token": admin, "X-Subject-Token": tokens[1], "Connection": "close"}
        assert requests.delete(url, headers=h).status_code == 204
        assert [requests.head(url, headers=h).status_code for _ in range(6)] == [404] * 6
        assert (tmp_path / "mock" / "openrc").stat().st_mode & 0o777 == 0o600
        assert (tmp_path / "mock" / "mock.pid").exists()
    assert not (tmp_path / "mock" / "mock.pid").exists()
