"""capacity on either engine finds the mock's known N; both engines agree on a real Keystone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rally_keystone_bench import capacity, results
from rally_keystone_bench.driver import task as rally_task
from rally_keystone_bench.driver.rally import keystone_spec
from rally_keystone_bench.engines.locust import engine

pytestmark = pytest.mark.slow

# the 50-rps mock (1 worker, 20 ms a request), searched in a narrow range to stay short
SEARCH = ["--scenario", "validate", "--target", "mock", "--mock-workers", "1",
          "--mock-service-time", "20", "--low", "30", "--high", "70", "--precision", "2",
          "--warmup", "3", "--window", "10"]  # fmt: skip


def found_n(tmp_path: Path, *extra: str) -> float:
    proc = subprocess.run(
        [sys.executable, "-m", "rally_keystone_bench.cli", "capacity", *SEARCH, *extra,
         "--reports-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    (summary,) = Path(tmp_path).glob("*/capacity.json")
    result = json.loads(summary.read_text())["result"]
    assert result["status"] == "found", result
    return float(result["n_rps"])


def test_capacity_on_locust_and_on_rally_find_the_mock_n(tmp_path):
    n_locust = found_n(tmp_path / "locust", "--engine", "locust", "--locust-workers", "2")
    assert n_locust == pytest.approx(50, rel=0.10)
    n_rally = found_n(tmp_path / "rally", "--engine", "rally")
    assert n_rally == pytest.approx(n_locust, rel=0.10)


@pytest.mark.xfail(
    reason="open: on a busy 2-core machine the engines disagree (p50 1.20 s on "
    "Locust against 4.67 s on Rally, 5 rps, 1-worker Keystone); not yet explained",
    strict=False,
)
def test_both_engines_measure_the_same_issue_latency(small_keystone, tmp_path):
    """At a rate neither generator nor Keystone is near its limit, the p50 of
    keystone.issue_token from the Locust engine and from Rally's pooled_rps agree
    within 10 %.

    On the 2-worker, default-rounds Keystone, 5 password tokens a second kept both
    cores busy: requests queued, and each engine's p50 (4.3 s and 10.8 s) said
    how long its run had queued, not how fast Keystone answers. One worker with
    4 bcrypt rounds answers in tens of milliseconds, far below the rate.
    """
    keystone = small_keystone
    rate, seconds = 5.0, 30.0
    settings = engine.LoadSettings(
        scenario="authenticate", rate=rate, duration=seconds, warmup=5, workers=1
    )
    locust = engine.run_load(settings, keystone.admin_credentials, tmp_path / "locust")
    (wl_locust,) = results.load(locust.report)

    home_dir = tmp_path / "rally"
    from rally_keystone_bench.driver.rally import RallyHome

    home = RallyHome(home_dir)
    home.create_env("both", keystone_spec(keystone.admin_credentials))
    cap = capacity.Settings(
        scenario="authenticate", low=rate, high=rate, warmup=5, window=seconds,
        max_slope=1e6, precision=1, abort_on_sla_failure=False,
    )  # fmt: skip
    run = rally_task.start_task(
        home, "both", capacity.probe_task_path(), cap.task_args(rate), tmp_path / "rally.log",
        config=home.quiet_config(),
    )  # fmt: skip
    report = tmp_path / "rally.json"
    assert run.uuid and rally_task.json_report(home, run.uuid, report)
    (wl_rally,) = results.load(report)
    p50_locust = float(np.median(wl_locust.actions["keystone.issue_token"].ok_durations()))
    p50_rally = float(np.median(wl_rally.actions["keystone.issue_token"].ok_durations()))
    assert p50_locust == pytest.approx(p50_rally, rel=0.10)
