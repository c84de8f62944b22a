"""keystone-bench capacity against the mock of known capacity, through the real rally CLI.

One worker with 20 ms of service time serves 50 token requests a second.
Probes are short (3 s of warm-up, 8 s of window). A whole search on the
Rally engine, with what this file checked of it until 2026-11-28, is in
test_capacity_engines.py (the slow suite), whose Rally search was the same
work a second time: ``tox`` keeps the search's first exit, a low that
already degrades.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# serial: each probe holds a rate for a fixed window, and the verdict is about latency.
pytestmark = [pytest.mark.functional, pytest.mark.serial]

BENCH = str(Path(sys.executable).parent / "keystone-bench")


def capacity(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    cmd = [BENCH, "capacity", "--scenario", "validate", "--target", "mock"]
    cmd += ["--mock-workers", "1", "--mock-service-time", "20", "--warmup", "3", "--window", "8"]
    cmd += [*args, "--reports-dir", str(tmp_path / "reports")]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    found = list((tmp_path / "reports").glob("*/capacity.json"))
    return proc, json.loads(found[0].read_text()) if found else None


def test_a_low_that_already_degrades_exits_1(tmp_path):
    """--low 70, 40 % past the mock's 50 rps: the first probe degrades, exit 1. Slack: at
    71 rps this mock's p50 was 1.8 s (Locust, engines.rst) and 3.0 s (Rally,
    capacity.rst), against its 20 ms service time."""
    proc, summary = capacity(tmp_path, "--low", "70", "--high", "80", "--precision", "10")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert summary["result"]["status"] == "low degrades"
    assert summary["result"]["n_rps"] is None
    assert [p["rps"] for p in summary["probes"]] == [70]
    assert summary["probes"][0]["verdict"].startswith("degraded")
    assert "even --low 70 rps is degraded" in proc.stdout
