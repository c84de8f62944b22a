"""keystone-bench scale on a real Keystone: a tiny sweep of revocation events."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

# slow: each point of a sweep starts a Keystone of its own (several deployments a test,
# like the matrix's), about a minute and a half a sweep here.
pytestmark = [pytest.mark.functional, pytest.mark.slow]


def test_a_tiny_revocation_sweep_prints_each_point_and_the_growth(tmp_path):
    """Both points, then the first again (the drift check, on by default), then the verdict."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rally_keystone_bench.cli",
            "scale",
            "--dimension",
            "revocation-events",
            "--values",
            "0,30",
            "--times",
            "20",
            "--password-hash-rounds",
            "4",
            "--reports-dir",
            str(tmp_path / "reports"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    lines = [ln for ln in out.splitlines() if re.match(r"\s+\d+ revocation events\s+p50", ln)]
    assert len(lines) == 3, out
    assert lines[2].strip().startswith("0 revocation events") and "(first point again)" in lines[2]
    assert re.search(r"^machine: the first point moved \d+\.\d% between the start", out, re.M)
    assert re.search(r"^growth: [+-].* ms per 1,000 revocation events \(95% interval", out, re.M)
    assert re.search(
        r"(flat|linear|faster than linear|slower than linear|falls)$",
        out.split("growth:")[1].splitlines()[0],
    )
    doc = json.loads(next((tmp_path / "reports").glob("*/scale.json")).read_text())
    assert [p["size"] for p in doc["points"]] == [0, 30]
    assert doc["first_point_again"]["size"] == 0 and doc["first_point_again"]["samples"] == 20
    assert doc["machine_drift"] is not None
    assert all(p["samples"] == 20 and p["success_percent"] == 100 for p in doc["points"])
    assert doc["points"][1]["setup_seconds"] > 0


def test_a_tiny_fernet_keys_sweep_starts_each_keystone_with_its_keys(tmp_path):
    """Each point's Keystone holds its own number of keys; the sweep fits per 10 keys.

    With --drift-check off: two Keystones, not three."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rally_keystone_bench.cli",
            "scale",
            "--dimension",
            "fernet-keys",
            "--values",
            "2,9",
            "--drift-check",
            "off",
            "--times",
            "10",
            "--password-hash-rounds",
            "4",
            "--reports-dir",
            str(tmp_path / "reports"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    held = re.findall(r"(\d+) active Fernet keys in (\S+)", proc.stderr)
    assert [int(n) for n, _ in held] == [2, 9], proc.stderr[-3000:]
    assert re.search(
        r"^growth: [+-].* ms per 10 active Fernet keys \(95% interval", proc.stdout, re.M
    )
    doc = json.loads(next((tmp_path / "reports").glob("*/scale.json")).read_text())
    assert [p["size"] for p in doc["points"]] == [2, 9]
    assert all(p["samples"] == 10 and p["setup_seconds"] is None for p in doc["points"])
    assert doc["first_point_again"] is None  # --drift-check off: no third Keystone
