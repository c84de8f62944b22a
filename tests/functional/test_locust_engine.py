"""The Locust engine against the mock: real locust master and workers as processes.

Each test starts the mock (deploy/mock.py) and the real ``locust`` command
through the engine or the ``keystone-bench load`` verb, then checks what a
user would: the rate sent, that every worker's samples are in the report,
that nothing is left in Keystone, the exit code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rally_keystone_bench.clients.admin import AdminClient
from rally_keystone_bench.deploy.mock import MockKeystone
from rally_keystone_bench.engines.locust import engine
from rally_keystone_bench.engines.locust import samples as sm
from rally_keystone_bench.engines.locust.setup import PREFIX
from rally_keystone_bench.verdicts import results

# Not serial (since 2026-11-28): four tests assert counts that the schedule fixes,
# not the clock; the rate's and the latencies' bounds held at load average 15 to 18
# (each docstring gives the figures), far past what the parallel part's neighbours add.
pytestmark = pytest.mark.slow


def left_in_keystone(credential: dict) -> list[str]:
    admin = AdminClient(credential, pool_size=1)
    return [u["name"] for u in admin.list_prefixed("users", PREFIX)] + [
        p["name"] for p in admin.list_prefixed("projects", PREFIX)
    ]


def start_rate(wl: results.Workload) -> float:
    s = np.sort(wl.iteration_started)
    return (s.size - 1) / float(s[-1] - s[0])


def test_master_and_two_workers_send_the_target_rate_and_lose_nothing(tmp_path):
    """100 rps for 10 s from two workers: all 1000 samples reported, start rate within 5 %.

    Slack: the engine started 49.9 of a target 50 rps at load 15 to 18 and sent 2,202
    validations/s with two workers idle (doc/source/engines.rst): 100 rps is under 5 %
    of that ceiling, and 5 % is 50 times the shortfall measured. The exact count needs
    every send within 10 s + 10 % + 1 s (the workers' cut-off, worker.py)."""
    with MockKeystone(workers=2, service_time_ms=2, run_dir=tmp_path / "mock") as mock:
        settings = engine.LoadSettings(scenario="validate", rate=100, duration=10, workers=2)
        result = engine.run_load(settings, mock.admin_credentials, tmp_path / "out")
        left = left_in_keystone(mock.admin_credentials)
    meta = result.meta
    per_worker = list(meta["workers"].values())
    assert len(per_worker) == 2 and not meta["lost"] and not meta["error"]
    assert all(w["reported"] == w["received"] > 0 for w in per_worker)
    (wl,) = results.load(result.report)
    assert sum(w["reported"] for w in per_worker) == wl.iterations == 1000
    assert json.loads(result.samples.read_text()).__len__() == 1000
    assert start_rate(wl) == pytest.approx(100, rel=0.05)
    assert wl.failed_iterations == 0 and wl.pass_sla
    assert left == [] and meta["left_behind"] == []


def test_lifecycle_times_each_action_once_per_iteration(tmp_path):
    """20 rps for 3 s of lifecycles: 60 iterations, each timing its four actions once.
    No rate or latency is asserted: the count is the schedule's, given every send
    within 3 s + 10 % + 1 s (the workers' cut-off), on a 1000 rps mock (1 ms)."""
    with MockKeystone(workers=1, service_time_ms=1, run_dir=tmp_path / "mock") as mock:
        settings = engine.LoadSettings(scenario="lifecycle", rate=20, duration=3, workers=1)
        result = engine.run_load(settings, mock.admin_credentials, tmp_path / "out")
        assert left_in_keystone(mock.admin_credentials) == []
    (wl,) = results.load(result.report)
    assert wl.iterations == 60 and wl.failed_iterations == 0
    for action in (sm.ISSUE, sm.VALIDATE, sm.CHECK, sm.REVOKE):
        assert wl.actions[action].count == 60


def test_workers_that_never_join_exit_2_with_nothing_sent_or_left(tmp_path):
    """--workers 0 and --expect-workers 1: no worker can join, by construction, so the 3 s
    --expect-timeout is a wait, not a race; 120 s bounds a failure."""
    with MockKeystone(workers=1, run_dir=tmp_path / "mock") as mock:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "rally_keystone_bench.cli",
                "load",
                "--scenario",
                "validate",
                "--locust-workers",
                "0",
                "--expect-workers",
                "1",
                "--expect-timeout",
                "3",
                "--duration",
                "2",
                "--target",
                "cloud",
                "--reports-dir",
                str(tmp_path / "r"),
            ],
            env={**__import__("os").environ, **_openrc(mock)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert left_in_keystone(mock.admin_credentials) == []
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "0 of 1 worker(s) joined" in last and "no load was sent" in last


def _openrc(mock: MockKeystone) -> dict[str, str]:
    c = mock.admin_credentials
    return {
        "OS_AUTH_URL": c["auth_url"],
        "OS_USERNAME": c["username"],
        "OS_PASSWORD": c["password"],
        "OS_PROJECT_NAME": c["project_name"],
        "OS_USER_DOMAIN_NAME": "Default",
        "OS_PROJECT_DOMAIN_NAME": "Default",
    }


def test_coordinated_omission_shows_in_response_time_not_service_time(tmp_path):
    """50 rps on a mock that stalls 2 s every 10 s, 2 connections: the requests due
    during a stall wait for a connection and go out late, so their service time
    stays short while their response time (from the intended start) holds the stall.

    Bounds: response p99 at least 1 s (half a stall); service p99 under 0.25 s and p50
    under 50 ms on a 2 ms mock. Slack: at load 15 to 18, 50 rps on a 5 ms mock gave
    service p50 28.5 ms and p99 72.1 ms (doc/source/engines.rst): 1.7 and 3.5 times
    under those bounds."""
    with MockKeystone(
        workers=2, service_time_ms=2, stall_s=2, stall_every_s=10, run_dir=tmp_path / "mock"
    ) as mock:
        settings = engine.LoadSettings(
            scenario="validate", rate=50, duration=30, workers=2, users=2
        )
        result = engine.run_load(settings, mock.admin_credentials, tmp_path / "out")
    (wl,) = results.load(result.report)
    a = wl.actions[sm.VALIDATE]
    response_p99 = float(np.percentile(a.response_times(), 99))
    service_p99 = float(np.percentile(a.ok_durations(), 99))
    service_p50 = float(np.percentile(a.ok_durations(), 50))
    assert response_p99 >= 1.0
    # only the 2 requests in flight when a stall begins wait it out on the wire:
    # 2 connections x 3 stalls of 1500 requests, under the 1 % of p99
    assert service_p99 < 0.25 < response_p99
    assert service_p50 < 0.05
    report = subprocess.run(
        [
            sys.executable,
            "-m",
            "rally_keystone_bench.cli",
            "report",
            str(result.report),
            "--out",
            str(tmp_path / "summary"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert report.returncode == 0
    assert "response time p50" in report.stdout and "service time p50" in report.stdout
    html = (tmp_path / "summary" / "summary.html").read_text()
    assert "response time" in html and "service time" in html


def test_load_verb_writes_the_report_and_summary(tmp_path):
    """load, 20 rps for 3 s after 1 s of warm-up: 60 iterations in the report (the
    warm-up's 20 left out), a summary, and the machine's record of the 3 s load (as
    ``run`` keeps it). No rate or latency is asserted: the count is the schedule's;
    300 s bounds a failure."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rally_keystone_bench.cli",
            "load",
            "--scenario",
            "authenticate",
            "--rate",
            "20",
            "--duration",
            "3",
            "--warmup",
            "1",
            "--locust-workers",
            "1",
            "--target",
            "mock",
            "--mock-service-time",
            "2",
            "--reports-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    (out,) = [p for p in Path(tmp_path).iterdir() if p.is_dir()]
    (wl,) = results.load(out / "locust-report.json")
    assert wl.iterations == 60  # the warm-up's 20 are not in the report
    assert (out / "summary.html").exists()
    assert "keystone.issue_token: service time p50" in proc.stdout
    assert_machine_record(proc.stdout, out, 3.0)


def assert_machine_record(stdout: str, out: Path, window: float) -> None:
    """The load's ``machine during the load:`` line, and its record in summary.json and
    load.json: sampled over about its WINDOW seconds, Locust's or Rally's processes as the
    load generator and the mock as the deployment, each seen working."""
    (line,) = [x for x in stdout.splitlines() if x.startswith("machine during the load: ")]
    assert f" of {os.cpu_count()} cores" in line, line
    record = json.loads((out / "summary.json").read_text())["machine"]
    assert json.loads((out / "load.json").read_text())["machine"] == record
    # 1 s intervals overlapping the window: its length, and up to one more on each side
    assert window - 0.5 <= record["seconds"] <= window + 3.0, record
    assert record["generator_mean"] > 0 and record["deployment_mean"] > 0, record


def test_load_on_the_rally_engine_runs_the_lifecycle_too(tmp_path):
    """--engine rally --scenario lifecycle: issue, validate, check, revoke, as Locust's.

    No rate or latency is asserted: 25 iterations at 5 rps (1 + 4 s), a count the
    task's times fixes, not the clock; 300 s bounds a failure."""
    proc = subprocess.run(
        [
            sys.executable, "-m", "rally_keystone_bench.cli", "load",
            "--engine", "rally", "--scenario", "lifecycle",
            "--rate", "5", "--duration", "4", "--warmup", "1",
            "--target", "mock", "--mock-service-time", "2", "--reports-dir", str(tmp_path),
        ],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (out,) = [p for p in Path(tmp_path).iterdir() if p.is_dir()]
    (wl,) = results.load(out / "rally-report.json")
    assert wl.scenario == "KeystoneTokens.lifecycle"
    assert wl.iterations == 25 and wl.failed_iterations == 0
    for action in (sm.ISSUE, sm.VALIDATE, sm.CHECK, sm.REVOKE):
        assert wl.actions[action].count == 25, action
        assert f"{action}: service time p50" in proc.stdout
    assert_machine_record(proc.stdout, out, 5.0)  # the warm-up is in Rally's report
