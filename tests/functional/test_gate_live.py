"""gate for real: the same release on both sides passes; a server-side slowdown fails.

Both use the default environment's Keystone (SPEC ``keystone``: no new
install) and a one-workload task of password tokens, 2 rounds per side.
The users are created under each deployment, so its bcrypt rounds apply.
"""

from __future__ import annotations

import json

import pytest
from _bench_helpers import bench, live_pids, states, tiny_task

pytestmark = [pytest.mark.functional, pytest.mark.slow]


def gate(tmp_path, baseline_rounds: int, candidate_rounds: int):
    task = tiny_task(tmp_path / "tiny.json", times=12, concurrency=2)
    return bench(
        "gate", "--baseline", "keystone", "--candidate", "keystone",
        "--baseline-option", f"password_hash_rounds={baseline_rounds}",
        "--candidate-option", f"password_hash_rounds={candidate_rounds}",
        "--task", str(task), "--rounds", "2",
        "--reports-dir", str(tmp_path / "reports"), cwd=tmp_path,
    )  # fmt: skip


def _reports(tmp_path):
    (out,) = (tmp_path / "reports").iterdir()
    return out


def test_same_release_on_both_sides_exits_0(tmp_path):
    proc = gate(tmp_path, 4, 4)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert proc.stdout.startswith("no regression")
    out = _reports(tmp_path)
    assert json.loads((out / "gate.json").read_text())["exit_code"] == 0
    assert (out / "gate.html").exists() and (out / "gate-junit.xml").exists()
    assert "round 2 of 2: candidate" in proc.stderr
    assert all(live_pids(s) == [] for s in states(tmp_path / ".keystone-bench"))


def test_more_hash_rounds_on_the_candidate_exits_1_naming_issue_token(tmp_path):
    proc = gate(tmp_path, 4, 12)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert proc.stdout.startswith("REGRESSION")
    # The verdict line, then one line per action; a regression is marked "!".
    flagged = [ln.split()[0] for ln in proc.stdout.splitlines() if ln.startswith(" !")]
    assert "!keystone.issue_token" in flagged
    junit = (_reports(tmp_path) / "gate-junit.xml").read_text()
    assert 'failures="0"' not in junit
