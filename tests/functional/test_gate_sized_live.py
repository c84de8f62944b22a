"""The default gate's sized pass for real: one gate run, keystone==30.0.0 against a tree
whose revocation check does a little more work per revocation event it reads back.

One run serves every assertion: it exits 1 naming a validation workload (on an
empty Keystone the change costs nothing); both pairs of deployments were
seeded with the same rows per table; and the seeding happened before the
task, never over HTTP inside a judged window.
"""

from __future__ import annotations

import json
import re

import pytest
from _bench_helpers import bench
from _patched_trees import per_event_tree

from rally_keystone_bench.deploy import venv

# serial: the gate judges latencies; a neighbour's load would be its interference.
pytestmark = [pytest.mark.functional, pytest.mark.slow, pytest.mark.serial]

# What the seeding makes, and what no request inside a task run may touch.
SEEDED_PATHS = re.compile(r" /v3/(projects|services|endpoints|regions|groups|roles|OS-REVOKE)")


@pytest.fixture(scope="module")
def sized_gate(tmp_path_factory) -> tuple:
    tree = per_event_tree()
    venv.ensure_keystone_env(str(tree))  # built before the gate, outside its clock
    where = tmp_path_factory.mktemp("sized")
    # Validation without a cache reads every audit-chain event: a pair takes
    # seconds on a busy machine, so the validations get 40 s each.
    done = bench(
        "gate", "--baseline", "keystone==30.0.0", "--candidate", str(tree),
        "--task-args", json.dumps({"seconds": 40, "issue_seconds": 12}),
        "--reports-dir", str(where / "reports"), cwd=where, timeout=2400,
    )  # fmt: skip
    return done, where


def test_the_sized_pass_catches_work_per_revocation_event(sized_gate) -> None:
    done, _ = sized_gate
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    regressions = [line for line in done.stdout.splitlines() if "REGRESSION" in line]
    assert any("validate_token" in line or "check_token" in line for line in regressions), (
        done.stdout[-3000:]
    )
    assert re.search(r"^gate: \d+ s from start to verdict", done.stdout, re.M)


def test_both_sides_hold_the_same_seeded_rows(sized_gate) -> None:
    _, where = sized_gate
    (out,) = (where / "reports").iterdir()
    seeded = json.loads((out / "seeded.json").read_text())
    assert sorted(seeded) == ["baseline", "baseline_nocache", "candidate", "candidate_nocache"]
    counts = {name: report["counts"] for name, report in seeded.items()}
    assert counts["baseline"] == counts["candidate"]
    assert counts["baseline_nocache"] == counts["candidate_nocache"] == counts["baseline"]
    assert counts["baseline"]["revocation_event"] >= 4400
    assert counts["baseline"]["endpoint"] >= 180


def test_seeding_is_outside_every_timed_window(sized_gate) -> None:
    done, where = sized_gate
    out = done.stdout + done.stderr
    assert out.index("setup: seeded 4 deployments") < out.index("task run 1")
    logs = list(where.glob(".keystone-bench/runs/gate-*/*/keystone/access.log"))
    assert len(logs) >= 4, logs
    for log in logs:
        touched = [line for line in log.read_text().splitlines() if SEEDED_PATHS.search(line)]
        assert touched == [], f"{log}: {touched[:3]}"
